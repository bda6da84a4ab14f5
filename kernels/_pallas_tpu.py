"""Pallas TPU (Mosaic) kernels for the fused log-prob / entropy head.

Forward: grid ``(N / block_n, V / block_v)`` with the vocab axis innermost
("arbitrary"); each step computes one ``[block_n, block_v]`` f32 logit tile on
the MXU from a ``[block_n, H]`` hidden block and a ``[H, block_v]`` weight
block and folds it into the running ``(m, s, w, z_y)`` held in the resident
``[block_n, 1]`` output blocks (tokamax / levanter pattern, plus the entropy
accumulator). Backward: two kernels that both recompute the tiles from the
saved ``lse`` and ``E_p[z]`` (like the dq / dkv split of flash attention):
``dX`` with grid ``(n, v)`` accumulating over ``v``, and ``dW`` with grid
``(v, n)`` accumulating over ``n`` in an f32 VMEM scratch block and writing
``dW`` once per vocabulary block in the weight's dtype, so every output block is
revisited only on consecutive steps and no f32 ``[H, V]`` buffer exists. Cost
10 N H V FLOPs (one extra recompute against 8 N H V for a single-pass backward,
which would need dW atomics that TPUs lack). All of H stays resident per block
(no H tiling); ``BlockSizes.validate_for`` rejects blocks over the VMEM budget.

The weight is not padded: the vocabulary grid is ``cdiv(V, block_v)`` and the
last block may run past the weight's end. Mosaic reads unspecified values
there (the interpreter reads NaN) and drops the out-of-range part of a written
block, so those columns are masked out of the online log-sum-exp and given a
zero cotangent, and the ``dX`` kernel zeroes them in the weight block before
``dz W^T`` (``0 * NaN`` would otherwise poison it).

``rljax.kernels._api`` runs the kernels with ``interpret=True`` when it lowers
for CPU (tests) and as Mosaic kernels when it lowers for TPU.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from rljax.kernels import _math
from rljax.kernels._config import TPU_VMEM_BUDGET_BYTES

_VMEM_LIMIT = TPU_VMEM_BUDGET_BYTES + 16 * 1024 * 1024


def _params(*semantics):
  return pltpu.CompilerParams(dimension_semantics=semantics, vmem_limit_bytes=_VMEM_LIMIT)


def _tile(temp_ref, x_ref, w_ref, j, *, block_v, v_valid, soft_cap):
  inv_temp = temp_ref[0, 0]
  raw = _math.dot_nn(x_ref[...], w_ref[...])
  z, th = _math.tile_logits(raw, inv_temp, soft_cap)
  col = j * block_v + lax.broadcasted_iota(jnp.int32, raw.shape, 1)
  return z, th, col, col < v_valid, inv_temp


def _fwd_kernel(temp_ref, x_ref, w_ref, t_ref, m_ref, s_ref, ws_ref, zy_ref, *, block_v, v_valid,
                soft_cap):
  j = pl.program_id(1)

  @pl.when(j == 0)
  def _init():
    m_ref[...] = jnp.full(m_ref.shape, _math.NEG_INF, jnp.float32)
    s_ref[...] = jnp.zeros(s_ref.shape, jnp.float32)
    ws_ref[...] = jnp.zeros(ws_ref.shape, jnp.float32)
    zy_ref[...] = jnp.zeros(zy_ref.shape, jnp.float32)

  z, _, col, valid, _ = _tile(temp_ref, x_ref, w_ref, j, block_v=block_v, v_valid=v_valid,
                              soft_cap=soft_cap)
  m, s, ws, zy = _math.online_update(m_ref[...], s_ref[...], ws_ref[...], zy_ref[...], z, col,
                                     valid, t_ref[...])
  m_ref[...] = m
  s_ref[...] = s
  ws_ref[...] = ws
  zy_ref[...] = zy


def _smem_spec():
  return pl.BlockSpec(memory_space=pltpu.SMEM)


def forward_stats(x, w, t, inv_temp, *, soft_cap, v_valid, block_n, block_v, interpret=False):
  """Same contract as ``rljax.kernels._xla.forward_stats``."""
  n_pad, h = x.shape
  grid = (n_pad // block_n, pl.cdiv(w.shape[1], block_v))
  row = pl.BlockSpec((block_n, 1), lambda i, j: (i, 0))
  stat = jax.ShapeDtypeStruct((n_pad, 1), jnp.float32)
  kernel = functools.partial(_fwd_kernel, block_v=block_v, v_valid=v_valid, soft_cap=soft_cap)
  out = pl.pallas_call(
      kernel,
      grid=grid,
      in_specs=[_smem_spec(),
                pl.BlockSpec((block_n, h), lambda i, j: (i, 0)),
                pl.BlockSpec((h, block_v), lambda i, j: (0, j)),
                row],
      out_specs=[row] * 4,
      out_shape=[stat] * 4,
      compiler_params=_params(pltpu.PARALLEL, pltpu.ARBITRARY),
      interpret=interpret,
      name="logprob_entropy_fwd",
  )(jnp.reshape(inv_temp, (1, 1)).astype(jnp.float32), x, w, t.reshape(n_pad, 1))
  return tuple(a.reshape(n_pad) for a in out)


def _draw(temp_ref, x_ref, w_ref, t_ref, lse_ref, mz_ref, glp_ref, gh_ref, j, *, block_v, v_valid,
          soft_cap, mm_dtype):
  z, th, col, valid, inv_temp = _tile(temp_ref, x_ref, w_ref, j, block_v=block_v, v_valid=v_valid,
                                      soft_cap=soft_cap)
  draw = _math.tile_draw(z, th, col, valid, t_ref[...], lse_ref[...], mz_ref[...], glp_ref[...],
                         gh_ref[...], inv_temp, soft_cap)
  return draw.astype(mm_dtype)


def _dx_kernel(temp_ref, x_ref, w_ref, t_ref, lse_ref, mz_ref, glp_ref, gh_ref, dx_ref, *, ragged,
               **kw):
  j = pl.program_id(1)

  @pl.when(j == 0)
  def _init():
    dx_ref[...] = jnp.zeros(dx_ref.shape, jnp.float32)

  draw = _draw(temp_ref, x_ref, w_ref, t_ref, lse_ref, mz_ref, glp_ref, gh_ref, j, **kw)
  wb = w_ref[...]
  if ragged:  # the last block reads past the weight's end: zero those columns
    col = j * kw["block_v"] + lax.broadcasted_iota(jnp.int32, (1, wb.shape[1]), 1)
    wb = jnp.where(col < kw["v_valid"], wb, jnp.zeros_like(wb))
  dx_ref[...] += _math.dot_nt(draw, wb)


def _dw_kernel(temp_ref, x_ref, w_ref, t_ref, lse_ref, mz_ref, glp_ref, gh_ref, dw_ref, acc_ref,
               **kw):
  j, i = pl.program_id(0), pl.program_id(1)

  @pl.when(i == 0)
  def _init():
    acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)

  draw = _draw(temp_ref, x_ref, w_ref, t_ref, lse_ref, mz_ref, glp_ref, gh_ref, j, **kw)
  acc_ref[...] += _math.dot_tn(x_ref[...], draw)

  @pl.when(i == pl.num_programs(1) - 1)
  def _write():  # f32 accumulation in VMEM; dW leaves in the weight's dtype (no [H, V] f32 buffer)
    dw_ref[...] = acc_ref[...].astype(dw_ref.dtype)


def backward(x, w, t, inv_temp, lse, mean_z, g_lp, g_h, *, soft_cap, v_valid, block_n, block_v,
             interpret=False):
  """Same contract as ``rljax.kernels._xla.backward`` (dx in f32, dw in ``w.dtype``)."""
  n_pad, h = x.shape
  v_cols = w.shape[1]
  nb, vb = n_pad // block_n, pl.cdiv(v_cols, block_v)
  kw = dict(block_v=block_v, v_valid=v_valid, soft_cap=soft_cap,
            mm_dtype=jnp.promote_types(x.dtype, w.dtype))
  col2 = lambda a: a.reshape(n_pad, 1)
  args = (jnp.reshape(inv_temp, (1, 1)).astype(jnp.float32), x, w, col2(t), col2(lse),
          col2(mean_z), col2(g_lp), col2(g_h))

  def specs(tok, voc):  # tok/voc: grid position -> block index along N / V
    row = pl.BlockSpec((block_n, 1), lambda a, b: (tok(a, b), 0))
    return [_smem_spec(),
            pl.BlockSpec((block_n, h), lambda a, b: (tok(a, b), 0)),
            pl.BlockSpec((h, block_v), lambda a, b: (0, voc(a, b)))] + [row] * 5

  dx = pl.pallas_call(
      functools.partial(_dx_kernel, ragged=v_cols % block_v != 0, **kw),
      grid=(nb, vb),
      in_specs=specs(lambda i, j: i, lambda i, j: j),
      out_specs=pl.BlockSpec((block_n, h), lambda i, j: (i, 0)),
      out_shape=jax.ShapeDtypeStruct((n_pad, h), jnp.float32),
      compiler_params=_params(pltpu.PARALLEL, pltpu.ARBITRARY),
      interpret=interpret,
      name="logprob_entropy_bwd_dx",
  )(*args)
  dw = pl.pallas_call(
      functools.partial(_dw_kernel, **kw),
      grid=(vb, nb),
      in_specs=specs(lambda j, i: i, lambda j, i: j),
      out_specs=pl.BlockSpec((h, block_v), lambda j, i: (0, j)),
      out_shape=jax.ShapeDtypeStruct((h, v_cols), w.dtype),
      scratch_shapes=[pltpu.VMEM((h, block_v), jnp.float32)],
      compiler_params=_params(pltpu.PARALLEL, pltpu.ARBITRARY),
      interpret=interpret,
      name="logprob_entropy_bwd_dw",
  )(*args)
  return dx, dw
