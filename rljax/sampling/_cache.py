"""KV-cache surgery that needs no model: ``rewind`` (cut rows back), ``restart`` (rows start over from
one token) and ``compact`` (free the masked gaps between a row's cached keys), each a host wrapper
over a small jitted program on the ``SamplerState``."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from rljax.sampling._config import SamplerConfig
from rljax.sampling._host import _per_row
from rljax.sampling._state import SamplerState

__all__ = ["compact", "restart", "rewind"]


@functools.partial(jax.jit, static_argnames=("pad_id",))
def _rewind_jit(st: SamplerState, length, *, pad_id: int) -> SamplerState:
  s = st.tokens.shape[1]
  keep = jnp.arange(s)[None, :] < length[:, None]
  # the row's real cache slots, in slot order, hold positions 0, 1, ..., length - 2 (prefill and decode feed a
  # row's tokens in position order at increasing slots); keep the first new_length - 1 of them
  fed = jnp.cumsum(st.kv_mask.astype(jnp.int32), axis=1)
  kv_mask = st.kv_mask & (fed <= (length - 1)[:, None])
  zero = lambda x: (None if x is None
                    else jnp.where(keep.reshape(keep.shape + (1,) * (x.ndim - 2)), x, 0).astype(x.dtype))
  pending = jnp.take_along_axis(st.tokens, (length - 1)[:, None], axis=1)[:, 0]
  return st.replace(kv_mask=kv_mask, length=length, pending=pending,
                    tokens=jnp.where(keep, st.tokens, pad_id), prompt_mask=st.prompt_mask & keep,
                    completion_mask=st.completion_mask & keep, logp_behavior=zero(st.logp_behavior),
                    logp_sampling=zero(st.logp_sampling), entropy=zero(st.entropy), routing=zero(st.routing))


def rewind(state: SamplerState, length, *, config: SamplerConfig) -> SamplerState:
  """Cuts row ``b`` of ``state`` back to its first ``length[b]`` tokens, as if it had stopped there.

  Used when the host ends a turn inside what was sampled (a stop string completed before the sampler's stop
  token): the tokens after the cut become padding (masks and log-probs zeroed), their cache slots are masked out
  (``kv_mask``; the slots themselves stay used), and token ``length[b] - 1`` becomes the pending token, so the
  next ``resume`` continues exactly as from a sequence that ended there. Nothing is recomputed.

  Args:
    state: a ``SamplerState`` (consumed).
    length: ``[B]`` ints in ``[1, state.length[b]]`` (``state.length`` leaves the row unchanged).
    config: the ``SamplerConfig`` of the state (its ``pad_id``).
  """
  cur = np.asarray(state.length)
  new = _per_row(length, cur.shape[0], np.int32, "length")
  if np.any(new < 1) or np.any(new > cur):
    bad = int(np.flatnonzero((new < 1) | (new > cur))[0])
    raise ValueError(f"length[{bad}]={int(new[bad])} must be in [1, {int(cur[bad])}] (the row's current length)")
  return _rewind_jit(state, jnp.asarray(new), pad_id=config.pad_id)


@functools.partial(jax.jit, static_argnames=("pad_id",))
def _restart_jit(st: SamplerState, selected, first, *, pad_id: int) -> SamplerState:
  st = _rewind_jit(st, jnp.where(selected, 1, st.length), pad_id=pad_id)
  tokens = st.tokens.at[:, 0].set(jnp.where(selected, first, st.tokens[:, 0]))
  prompt_mask = st.prompt_mask.at[:, 0].set(st.prompt_mask[:, 0] | selected)
  return st.replace(tokens=tokens, prompt_mask=prompt_mask, pending=jnp.where(selected, first, st.pending),
                    completion_mask=st.completion_mask & ~selected[:, None])


def restart(state: SamplerState, rows, first, *, config: SamplerConfig) -> SamplerState:
  """Row ``rows[j]`` of ``state`` starts over as the one-token sequence ``[first[j]]`` (context: ``prompt_mask``).

  Its cached keys are masked out (as ``rewind`` to length 1 does; the slots stay used until ``compact``) and its
  buffers cleared, so a new prefix can be fed to that row alone (``feed_rows`` with the prefix's other tokens)
  while the other rows keep their caches: a multi-turn runner moving one episode to a new context window.

  Args:
    state: a ``SamplerState`` (consumed). rows: distinct row indices. first: one token id per row.
    config: the ``SamplerConfig`` of the state (its ``pad_id``).
  """
  b = state.pending.shape[0]
  rows = [int(r) for r in rows]
  if len(set(rows)) != len(rows) or (rows and (min(rows) < 0 or max(rows) >= b)):
    raise ValueError(f"rows must be distinct row indices in [0, {b}), got {rows}")
  if len(first) != len(rows):
    raise ValueError(f"first must have one token per row ({len(rows)}), got {len(first)}")
  selected, tok = np.zeros((b,), bool), np.zeros((b,), np.int32)
  selected[rows], tok[rows] = True, [int(t) for t in first]
  return _restart_jit(state, jnp.asarray(selected), jnp.asarray(tok), pad_id=config.pad_id)


@jax.jit
def _compact_jit(st: SamplerState) -> SamplerState:
  s = st.kv_mask.shape[1]
  order = jnp.argsort(jnp.where(st.kv_mask, 0, 1), axis=1, stable=True)  # [B, S]: real slots first, in order
  count = jnp.sum(st.kv_mask.astype(jnp.int32), axis=1)
  idx = order[None, :, :, None, None]  # the stacked cache [L, B, S, K, D]
  gather = lambda x: jnp.take_along_axis(x, idx, axis=2)
  cache = type(st.cache)(gather(st.cache.k), gather(st.cache.v))
  kv_mask = jnp.arange(s)[None, :] < count[:, None]
  return st.replace(cache=cache, kv_mask=kv_mask, slot=jnp.max(count).astype(jnp.int32))


def compact(state: SamplerState) -> SamplerState:
  """Moves each row's cached keys to the front of the cache, freeing the slots that masked gaps used.

  Every call feeds all rows at one shared slot counter, so rows that sit out a call (``active=False``), rows
  with shorter appended chunks and ``rewind`` leave masked slots that stay used. Row ``b``'s real slots (its
  ``kv_mask``) keep their order and move to slots ``[0, count_b)``; the counter becomes ``max_b count_b``.
  Positions are the tokens' own (they were given explicitly when the keys were written), so attention sees the
  same keys with the same positions: a full-attention layer gives the same values up to float summation order,
  and a sliding window (which counts valid slots) the same keys. The sequence buffers are per position and stay
  as they are. ``state`` is consumed.
  """
  return _compact_jit(state)
