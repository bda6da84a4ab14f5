"""Pallas GPU kernels (Triton lowering) for the fused log-prob / entropy head.

Mosaic GPU (preferred on Hopper) has no interpret mode in jax 0.10.2, so this
file targets the Triton lowering, which ``interpret=True`` can test on CPU.
(The Pallas Triton backend is deprecated upstream in favour of Mosaic GPU.)

Forward: grid ``N / block_n``; each program streams all vocab blocks with the
online ``(m, s, w, z_y)`` update, each logit tile ``[block_n, block_v]`` being
accumulated over ``H / block_h`` chunks on the tensor cores.
Backward: grid ``(N / block_n, V / block_v)``; each program recomputes its tile
once, forms ``dz`` (in the input dtype, f32 accumulation) and adds
``dz W^T`` into ``dX`` and ``X^T dz`` into ``dW`` with f32 atomics, chunk by
chunk over H: 8 N H V FLOPs and no ``[N, V]`` buffer (the CCE / verl layout).
Triton needs power-of-two block sizes and ``block_h | H``.

The weight is not padded when ``V >= block_v``: like the chunked XLA path, the
ragged last vocabulary block reads the window ``[V - block_v, V)`` and masks
the columns the previous block already covered (zero cotangent, so its atomic
adds into ``dW`` there add zero). A vocabulary smaller than one block is padded.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from rljax.kernels import _math


def _raw_tile(x_ref, w_ref, rows, cols, *, block_n, block_v, block_h, h):
  def body(k, acc):
    hs = pl.ds(pl.multiple_of(k * block_h, block_h), block_h)
    return acc + _math.dot_nn(x_ref[rows, hs], w_ref[hs, cols])
  return lax.fori_loop(0, h // block_h, body, jnp.zeros((block_n, block_v), jnp.float32))


def _window(j, *, block_n, block_v, v_cols, v_valid):
  """``(cols, col [bn, bv], valid)`` of vocabulary block ``j`` (the last one shifted onto real columns)."""
  start, col, valid = _math.vocab_window(j, block_v, v_cols, v_valid, rows=block_n)
  return pl.ds(start, block_v), col, valid


def _fwd_kernel(temp_ref, x_ref, w_ref, t_ref, m_ref, s_ref, ws_ref, zy_ref, *, block_n, block_v,
                block_h, h, vb, v_cols, v_valid, soft_cap):
  i = pl.program_id(0)
  rows = pl.ds(pl.multiple_of(i * block_n, block_n), block_n)
  inv_temp = temp_ref[0]
  tgt = t_ref[rows][:, None]

  def body(j, carry):
    m, s, ws, zy = carry
    cols, col, valid = _window(j, block_n=block_n, block_v=block_v, v_cols=v_cols, v_valid=v_valid)
    raw = _raw_tile(x_ref, w_ref, rows, cols, block_n=block_n, block_v=block_v, block_h=block_h,
                    h=h)
    z, _ = _math.tile_logits(raw, inv_temp, soft_cap)
    zm = jnp.where(valid, z, _math.NEG_INF)
    m_new = jnp.maximum(m, jnp.max(zm, axis=1))
    scale = jnp.exp(m - m_new)
    e = jnp.exp(zm - m_new[:, None])
    s = s * scale + jnp.sum(e, axis=1)
    ws = ws * scale + jnp.sum(jnp.where(valid, e * z, 0.0), axis=1)
    zy = zy + jnp.sum(jnp.where(valid & (col == tgt), z, 0.0), axis=1)
    return m_new, s, ws, zy

  init = (jnp.full((block_n,), _math.NEG_INF, jnp.float32),) + tuple(
      jnp.zeros((block_n,), jnp.float32) for _ in range(3))
  m, s, ws, zy = lax.fori_loop(0, vb, body, init)
  m_ref[rows] = m
  s_ref[rows] = s
  ws_ref[rows] = ws
  zy_ref[rows] = zy


def forward_stats(x, w, t, inv_temp, *, soft_cap, v_valid, block_n, block_v, block_h,
                  interpret=False):
  """Same contract as ``rljax.kernels._xla.forward_stats``."""
  n_pad, h = x.shape
  v_cols = w.shape[1]
  kernel = functools.partial(_fwd_kernel, block_n=block_n, block_v=block_v, block_h=block_h, h=h,
                             vb=pl.cdiv(v_cols, block_v), v_cols=v_cols, v_valid=v_valid,
                             soft_cap=soft_cap)
  stat = jax.ShapeDtypeStruct((n_pad,), jnp.float32)
  return tuple(pl.pallas_call(
      kernel,
      grid=(n_pad // block_n,),
      out_shape=[stat] * 4,
      compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=2),
      interpret=interpret,
      name="logprob_entropy_fwd_gpu",
  )(jnp.reshape(inv_temp, (1,)).astype(jnp.float32), x, w, t))


def _bwd_kernel(temp_ref, x_ref, w_ref, t_ref, lse_ref, mz_ref, glp_ref, gh_ref, dx0_ref, dw0_ref,
                dx_ref, dw_ref, *, block_n, block_v, block_h, h, v_cols, v_valid, soft_cap, mm_dtype):
  del dx0_ref, dw0_ref  # aliased to dx_ref / dw_ref (zero-initialised accumulators)
  i, j = pl.program_id(0), pl.program_id(1)
  rows = pl.ds(pl.multiple_of(i * block_n, block_n), block_n)
  cols, col, valid = _window(j, block_n=block_n, block_v=block_v, v_cols=v_cols, v_valid=v_valid)
  inv_temp = temp_ref[0]
  raw = _raw_tile(x_ref, w_ref, rows, cols, block_n=block_n, block_v=block_v, block_h=block_h, h=h)
  z, th = _math.tile_logits(raw, inv_temp, soft_cap)
  per_tok = [r[rows][:, None] for r in (t_ref, lse_ref, mz_ref, glp_ref, gh_ref)]
  draw = _math.tile_draw(z, th, col, valid, *per_tok, inv_temp, soft_cap).astype(mm_dtype)

  def body(k, carry):
    hs = pl.ds(pl.multiple_of(k * block_h, block_h), block_h)
    plgpu.atomic_add(dx_ref, (rows, hs), _math.dot_nt(draw, w_ref[hs, cols]))
    plgpu.atomic_add(dw_ref, (hs, cols), _math.dot_tn(x_ref[rows, hs], draw))
    return carry

  lax.fori_loop(0, h // block_h, body, 0)


def backward(x, w, t, inv_temp, lse, mean_z, g_lp, g_h, *, soft_cap, v_valid, block_n, block_v,
             block_h, interpret=False):
  """Same contract as ``rljax.kernels._xla.backward`` (dx and dw in f32)."""
  n_pad, h = x.shape
  v_cols = w.shape[1]
  kernel = functools.partial(_bwd_kernel, block_n=block_n, block_v=block_v, block_h=block_h, h=h,
                             v_cols=v_cols, v_valid=v_valid, soft_cap=soft_cap,
                             mm_dtype=jnp.promote_types(x.dtype, w.dtype))
  dx0 = jnp.zeros((n_pad, h), jnp.float32)
  dw0 = jnp.zeros((h, v_cols), jnp.float32)
  return pl.pallas_call(
      kernel,
      grid=(n_pad // block_n, pl.cdiv(v_cols, block_v)),
      out_shape=[jax.ShapeDtypeStruct(dx0.shape, jnp.float32),
                 jax.ShapeDtypeStruct(dw0.shape, jnp.float32)],
      input_output_aliases={8: 0, 9: 1},
      compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=2),
      interpret=interpret,
      name="logprob_entropy_bwd_gpu",
  )(jnp.reshape(inv_temp, (1,)).astype(jnp.float32), x, w, t, lse, mean_z, g_lp, g_h, dx0, dw0)
