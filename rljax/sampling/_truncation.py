"""Exact top-k / top-p / min-p truncation without a full-vocabulary sort.

Every threshold is found by a fixed-length bisection over the *bit patterns*
of float32 values. Finite float32 numbers map to ``uint32`` keys whose integer
order equals the float order (flip the sign bit of non-negatives, all bits of
negatives), so 32 halvings of the ``uint32`` range pin the exact threshold
value: the result is the same set a sort would give, not an approximation.
Each halving is one masked reduction over ``[B, V]``; the cost is
``O(32 V)`` per row with no sort, no ``[B, V]`` permutation and no scatter.
A ``lax.cond`` skips a whole filter when no row in the batch uses it, so pure
temperature sampling pays nothing.

Conventions (all applied to the tempered distribution ``q = softmax(z / T)``):

- top-k keeps ``{i : z_i >= z_(k)}``, ``z_(k)`` the k-th largest tempered
  logit (``k <= 0``: off). All tokens tied with the k-th are kept.
- top-p keeps ``{i : sum_{j : q_j > q_i} q_j < top_p * Z}`` where ``q`` is
  restricted to the top-k set and ``Z`` is its mass: the smallest
  most-probable-first prefix whose mass reaches ``top_p`` (vLLM / HF
  convention; ties at the boundary are all kept). ``top_p = 1``: off.
- min-p keeps ``{i : q_i >= min_p * max_j q_j}`` (``min_p = 0``: off).
- The kept set is the intersection; the argmax is always kept.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array

_SIGN = np.uint32(0x80000000)  # NumPy: a jnp constant would start the XLA backend at import (before jax.distributed)
_ONE_BITS = 0x3F800000  # float32 1.0


def ordered_key(x: Array) -> Array:
  """Maps float32 ``x`` to ``uint32`` with the same total order (finite and ±inf)."""
  bits = jax.lax.bitcast_convert_type(x.astype(jnp.float32), jnp.uint32)
  negative = (bits & _SIGN) != 0
  return jnp.where(negative, ~bits, bits | _SIGN)


def top_k_mask(z: Array, k: Array) -> Array:
  """``[B, V]`` bool: ``z[b, i] >= `` the ``k[b]``-th largest of ``z[b]``.

  Exact (ties kept) via 32 bisection steps over ``ordered_key`` values: the
  threshold is ``max{u : #{i : key_i >= u} >= k}``. ``k[b] <= 0`` keeps all.

  Args:
    z: ``[B, V]`` float32 logits (``-inf`` allowed).
    k: ``[B]`` int32.
  """
  key = ordered_key(z)
  kk = jnp.maximum(k, 1).astype(jnp.int32)[:, None]

  def body(_, lohi):
    lo, hi = lohi
    diff = hi - lo
    mid = lo + (diff >> 1) + (diff & 1)  # ceil((lo + hi) / 2) without overflow
    ok = jnp.sum(key >= mid, axis=-1, keepdims=True, dtype=jnp.int32) >= kk
    return jnp.where(ok, mid, lo), jnp.where(ok, hi, mid - 1)

  shape = (z.shape[0], 1)
  lo0 = jnp.zeros(shape, jnp.uint32)
  hi0 = jnp.full(shape, 0xFFFFFFFF, jnp.uint32)
  lo, _ = jax.lax.fori_loop(0, 32, body, (lo0, hi0))
  return (key >= lo) | (k <= 0)[:, None]


def top_p_mask(q: Array, top_p: Array) -> Array:
  """``[B, V]`` bool nucleus of unnormalised non-negative weights ``q``.

  Keeps ``i`` iff ``sum_{j : q_j > q_i} q_j < top_p * sum_j q_j``. The
  threshold ``u* = min{u : sum_{bits(q_j) > u} q_j < top_p Z}`` is found by
  bisection over the bit patterns of ``q`` (non-negative floats order like
  their bits), then ``keep = bits(q) >= u*``. Requires ``max q <= 1``.

  Args:
    q: ``[B, V]`` float32, ``0 <= q <= 1`` (zeros are never kept when ``top_p <= 1``).
    top_p: ``[B]`` float32 in ``(0, 1]``; rows with ``top_p >= 1`` keep all.
  """
  bits = jax.lax.bitcast_convert_type(q.astype(jnp.float32), jnp.uint32)
  target = top_p[:, None] * jnp.sum(q, axis=-1, keepdims=True)

  def body(_, lohi):
    lo, hi = lohi
    mid = lo + ((hi - lo) >> 1)
    mass_above = jnp.sum(jnp.where(bits > mid, q, 0.0), axis=-1, keepdims=True)
    ok = mass_above < target
    return jnp.where(ok, lo, mid + 1), jnp.where(ok, mid, hi)

  shape = (q.shape[0], 1)
  lo0 = jnp.zeros(shape, jnp.uint32)
  hi0 = jnp.full(shape, _ONE_BITS, jnp.uint32)
  _, hi = jax.lax.fori_loop(0, 31, body, (lo0, hi0))
  return (bits >= hi) | (top_p >= 1.0)[:, None]


def truncation_mask(zt: Array, top_k: Array, top_p: Array, min_p: Array) -> Array:
  """Kept-token mask of the tempered logits ``zt [B, V]`` (see module docstring).

  Args:
    zt: ``[B, V]`` float32 tempered logits ``z / T``.
    top_k: ``[B]`` int32 (``<= 0``: off). top_p: ``[B]`` float32 in ``(0, 1]``.
    min_p: ``[B]`` float32 in ``[0, 1]``.
  """
  keep_k = jax.lax.cond(jnp.any(top_k > 0), lambda: top_k_mask(zt, top_k),
                        lambda: jnp.ones(zt.shape, bool))
  q = jnp.exp(zt - jnp.max(zt, axis=-1, keepdims=True))  # max q == 1
  qk = jnp.where(keep_k, q, 0.0)
  keep_p = jax.lax.cond(jnp.any(top_p < 1.0), lambda: top_p_mask(qk, top_p),
                        lambda: jnp.ones(zt.shape, bool))
  keep_min = q >= min_p[:, None]
  return keep_k & keep_p & keep_min


def truncate_logits(z: Array, temperature: Array, top_k: Array, top_p: Array,
                    min_p: Array) -> Array:
  """``z / T`` with truncated tokens set to ``-inf`` (``[B, V]`` float32)."""
  zt = z.astype(jnp.float32) / temperature[:, None]
  return jnp.where(truncation_mask(zt, top_k, top_p, min_p), zt, -jnp.inf)
