"""Chunked XLA implementation (the CPU default and the fallback everywhere).

Forward: ``lax.map`` over token blocks, ``fori_loop`` over vocab blocks with an
online log-sum-exp; only ``[block_n, block_v]`` logits exist at any time.
Backward: vocab blocks outer, token blocks inner, recomputing each tile from
the saved ``lse`` and ``E_p[z]``. ``dX`` is carried in f32 (``[N, H]``) and each
``dW[:, block]`` is finished before moving on, so the extra memory is
``N * H * 4`` bytes plus one tile, never ``N * V``. Cost 8 N H V FLOPs.

The weight is never padded: V need not be a multiple of ``block_v``. The last
vocabulary block is read as the window ``[V - block_v, V)`` (a clamped
``dynamic_slice``) and its columns that the previous block already covered are
masked to ``-inf`` (forward) and to a zero cotangent (backward, where its
``dW`` slice is added to, not written over).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from rljax.kernels import _math


def _vocab_blocks(v_cols, block_v):
  if block_v > v_cols:
    raise ValueError(f"block_v={block_v} exceeds the weight's {v_cols} columns")
  return -(-v_cols // block_v)


def forward_stats(x, w, t, inv_temp, *, soft_cap, v_valid, block_n, block_v):
  """Per-token ``(m, s, w, z_y)`` ``[Np]`` f32 over the vocabulary.

  Args: ``x [Np, H]`` (``Np`` a multiple of ``block_n``), ``w [H, V]`` (any
  ``V >= block_v``), ``t [Np]`` int32 target ids relative to this weight
  (others: no target), ``inv_temp`` f32 scalar. Columns ``>= v_valid`` are
  padding.
  """
  n_pad, h = x.shape
  nb, vb = n_pad // block_n, _vocab_blocks(w.shape[1], block_v)

  def token_block(args):
    xb, tb = args
    tb = tb[:, None]

    def body(j, carry):
      start, col, valid = _math.vocab_window(j, block_v, w.shape[1], v_valid)
      wb = lax.dynamic_slice_in_dim(w, start, block_v, axis=1)
      raw = _math.dot_nn(xb, wb)
      z, _ = _math.tile_logits(raw, inv_temp, soft_cap)
      return _math.online_update(*carry, z, col, valid, tb)

    init = (jnp.full((block_n, 1), _math.NEG_INF, jnp.float32),) + tuple(
        jnp.zeros((block_n, 1), jnp.float32) for _ in range(3))
    return lax.fori_loop(0, vb, body, init)

  stats = lax.map(token_block, (x.reshape(nb, block_n, h), t.reshape(nb, block_n)))
  return tuple(a.reshape(n_pad) for a in stats)


def backward(x, w, t, inv_temp, lse, mean_z, g_lp, g_h, *, soft_cap, v_valid, block_n, block_v):
  """``(dx [Np, H] f32, dw [H, V] w.dtype)`` for upstream ``g_lp``, ``g_h`` ``[Np]``."""
  n_pad, h = x.shape
  v_cols = w.shape[1]
  nb, vb = n_pad // block_n, _vocab_blocks(v_cols, block_v)
  mm_dtype = jnp.promote_types(x.dtype, w.dtype)  # bf16 dz into the GEMMs, f32 accumulation
  xs = x.reshape(nb, block_n, h)
  per_tok = [a.reshape(nb, block_n, 1) for a in (t, lse, mean_z, g_lp, g_h)]

  def vocab_block(j, carry):
    dx, dw = carry
    start, col, valid = _math.vocab_window(j, block_v, v_cols, v_valid)
    wb = lax.dynamic_slice_in_dim(w, start, block_v, axis=1)

    def token_block(i, inner):
      dx, dwb = inner
      xb = xs[i]
      tb, lb, mb, glb, ghb = (a[i] for a in per_tok)
      raw = _math.dot_nn(xb, wb)
      z, th = _math.tile_logits(raw, inv_temp, soft_cap)
      draw = _math.tile_draw(z, th, col, valid, tb, lb, mb, glb, ghb, inv_temp, soft_cap)
      draw = draw.astype(mm_dtype)
      dxb = lax.dynamic_slice_in_dim(dx, i * block_n, block_n, axis=0) + _math.dot_nt(draw, wb)
      dx = lax.dynamic_update_slice_in_dim(dx, dxb, i * block_n, axis=0)
      return dx, dwb + _math.dot_tn(xb, draw)

    dx, dwb = lax.fori_loop(0, nb, token_block, (dx, jnp.zeros((h, block_v), jnp.float32)))
    # Added, not written: the ragged last window overlaps columns finished by the
    # previous block, where its own cotangent is exactly zero.
    dwb = lax.dynamic_slice_in_dim(dw, start, block_v, axis=1) + dwb.astype(dw.dtype)
    dw = lax.dynamic_update_slice_in_dim(dw, dwb, start, axis=1)
    return dx, dw

  init = (jnp.zeros((n_pad, h), jnp.float32), jnp.zeros((h, v_cols), w.dtype))
  return lax.fori_loop(0, vb, vocab_block, init)
