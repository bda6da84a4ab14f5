"""Per-tile math shared by every fused implementation (pure jnp on arrays).

For one tile of tokens x vocab columns, with ``raw = x @ W`` accumulated in f32:
``z = soft_cap(raw) * inv_temp``. The forward keeps, per token, the running
max ``m``, ``s = sum_j e^(z_j - m)``, ``w = sum_j e^(z_j - m) z_j`` and the
target logit ``z_y``; then ``lse = m + log s``, ``logp = z_y - lse`` and
``H = lse - w / s``. The backward recomputes ``z``, sets ``p = e^(z - lse)`` and
``dz = g_lp (onehot - p) - g_H p (z - E_p[z])``, then chains through
``inv_temp`` and the soft-cap derivative ``1 - tanh^2(raw / cap)``.
"""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp

NEG_INF = float("-inf")


def tile_logits(raw, inv_temp, soft_cap: Optional[float]):
  """``(z, tanh_or_None)`` from the f32 tile ``raw = x @ W``."""
  if soft_cap is None:
    return raw * inv_temp, None
  th = jnp.tanh(raw * (1.0 / soft_cap))
  return th * (soft_cap * inv_temp), th


def vocab_window(j, block_v: int, v_cols: int, v_valid: int, rows: int = 1):
  """``(start, col [rows, bv], valid)`` of vocabulary block ``j`` of a weight with
  ``v_cols`` columns, read without padding: the block's window starts at
  ``min(j * bv, V - bv)`` (the ragged last block is shifted left onto real
  columns, needing ``bv <= V``); ``valid`` keeps the columns that are block
  ``j``'s own and below ``v_valid``."""
  start = jnp.minimum(j * block_v, v_cols - block_v)
  col = start + jax.lax.broadcasted_iota(jnp.int32, (rows, block_v), 1)
  return start, col, (col >= j * block_v) & (col < v_valid)


def online_update(m, s, w, zy, z, col, valid, tgt):
  """One online-softmax step over a ``[bn, bv]`` tile (stats are ``[bn, 1]``).

  ``col`` holds global column ids, ``valid`` marks the columns this tile owns
  (real, not padding, not read past the weight's end, not already counted by
  an overlapping window) and ``tgt`` is ``[bn, 1]`` target ids (ids outside
  this tile contribute nothing). Invalid columns may hold any value, NaN
  included: they only enter through ``where``.
  """
  zm = jnp.where(valid, z, NEG_INF)
  m_new = jnp.maximum(m, jnp.max(zm, axis=1, keepdims=True))
  scale = jnp.exp(m - m_new)
  e = jnp.exp(zm - m_new)
  s = s * scale + jnp.sum(e, axis=1, keepdims=True)
  w = w * scale + jnp.sum(jnp.where(valid, e * z, 0.0), axis=1, keepdims=True)
  zy = zy + jnp.sum(jnp.where(valid & (col == tgt), z, 0.0), axis=1, keepdims=True)
  return m_new, s, w, zy


def tile_draw(z, th, col, valid, tgt, lse, mean_z, g_lp, g_h, inv_temp,
              soft_cap: Optional[float]):
  """Cotangent of ``raw`` for one tile (f32), exactly 0 on invalid columns
  (whatever they hold). Per-token args are ``[bn, 1]``."""
  p = jnp.exp(z - lse)
  onehot = (col == tgt).astype(jnp.float32)
  dz = g_lp * (onehot - p) - g_h * p * (z - mean_z)
  draw = dz * inv_temp
  if soft_cap is not None:
    draw = draw * (1.0 - th * th)
  return jnp.where(valid, draw, 0.0)


def _dot(a, b, dims):
  # f32 operands: HIGHEST, so GPUs do not silently drop to TF32 and TPUs do not
  # round to one bf16 pass (the f32 tests demand 1e-5 relative error).
  f32 = jnp.float32 in (a.dtype, b.dtype)
  return jax.lax.dot_general(a, b, (dims, ((), ())), preferred_element_type=jnp.float32,
                             precision=jax.lax.Precision.HIGHEST if f32 else None)


def dot_nn(a, b):
  """``a @ b`` with f32 accumulation."""
  return _dot(a, b, ((1,), (0,)))


def dot_nt(a, b):
  """``a @ b.T`` with f32 accumulation."""
  return _dot(a, b, ((1,), (1,)))


def dot_tn(a, b):
  """``a.T @ b`` with f32 accumulation."""
  return _dot(a, b, ((0,), (0,)))
