"""Attention masks of the transformer's forwards: causal over a KV cache's slots (with the rows' valid slots),
causal within segments (packed rows), the static shared-prefix pattern, and the sliding window on top of each.

A mask is ``[B, T, S]`` bool (query ``t`` of row ``b`` attends key slot ``j``) or a static
:class:`~rljax.models._layers.PrefixGroups` pattern; full-attention layers use the ``base`` mask,
sliding-window layers the ``sliding`` one.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import jax
import jax.numpy as jnp

from rljax.models._config import ModelConfig
from rljax.models._layers import PrefixGroups

Array = jax.Array


def _has_sliding(cfg: ModelConfig) -> bool:
  return cfg.layer_types is not None and "sliding_attention" in cfg.layer_types


def window_mask(kv_mask: Optional[Array], q_idx: Array, window: int, s_len: int) -> Array:
  """``[B, T, S]`` (``[1, T, S]`` without ``kv_mask``): slot ``j`` is within the sliding window of
  the query in slot ``q_idx[t]`` iff fewer than ``window`` valid slots lie in ``(j, q]`` — the
  position distance when a row's tokens fill its valid slots in order (masked slots are gaps).
  Without ``kv_mask`` every slot is valid: ``q - j < window``.

  Args:
    kv_mask: ``[B, S]`` bool valid slots, or None. q_idx: ``[T]`` int32 query slots.
  """
  if kv_mask is None:
    return ((q_idx[:, None] - jnp.arange(s_len, dtype=jnp.int32)[None, :]) < window)[None]
  cum = jnp.cumsum(kv_mask.astype(jnp.int32), axis=1)  # [B, S]
  return (jnp.take(cum, q_idx, axis=1)[:, :, None] - cum[:, None, :]) < window


def attention_masks(cfg: ModelConfig, b: int, t: int, *, cache_len: Optional[int] = None, cache_index=None,
                    kv_mask: Optional[Array] = None, segment_ids: Optional[Array] = None,
                    prefix_groups: Optional[PrefixGroups] = None) -> tuple:
  """``(base, sliding)``: the masks of the full-attention and the sliding-window layers of a ``[B, T]`` forward
  (``sliding`` None when the model has no sliding-window layer), for the inputs ``Transformer.__call__`` takes
  (validated there).

  * cached (``cache_len = S``, ``cache_index`` int32 scalar): ``[B, T, S]``; query ``t`` (slot
    ``q = cache_index + t``) attends slot ``j <= q`` with ``kv_mask[b, j]`` (``[B, S]``; None: every slot);
    sliding: and fewer than ``W`` valid slots in ``(j, q]``.
  * uncached: ``[B, T, T]`` causal (``j <= t``), within the query's segment when ``segment_ids`` ``[B, T]`` are
    given (0 = padding, attends nothing); sliding: and ``t - j < W``.
  * ``prefix_groups`` (uncached): the static patterns ``prefix_groups`` without and with ``window = W``.
  """
  if cache_len is not None:
    q_idx = cache_index + jnp.arange(t, dtype=jnp.int32)
    k_idx = jnp.arange(cache_len, dtype=jnp.int32)
    base = jnp.broadcast_to(k_idx[None, None, :] <= q_idx[None, :, None], (b, t, cache_len))
    if kv_mask is not None:
      base = base & kv_mask[:, None, :].astype(bool)
  elif prefix_groups is None:
    q_idx = k_idx = jnp.arange(t, dtype=jnp.int32)
    base = jnp.broadcast_to(k_idx[None, None, :] <= q_idx[None, :, None], (b, t, t))
    if segment_ids is not None:
      base = base & (segment_ids[:, :, None] == segment_ids[:, None, :]) & (segment_ids[:, :, None] != 0)
  if prefix_groups is not None:  # a static attention pattern instead of [B, T, T] masks
    return (dataclasses.replace(prefix_groups, window=None),
            dataclasses.replace(prefix_groups, window=cfg.sliding_window))
  sliding = None
  if _has_sliding(cfg):
    valid = kv_mask if cache_len is not None else None  # uncached: every slot is a token
    sliding = base & window_mask(valid, q_idx, cfg.sliding_window, k_idx.shape[0])
  return base, sliding


def decode_masks(cfg: ModelConfig, kv_mask: Array, cache_index: Array, s_len: int) -> tuple:
  """``(base [B, 1, S], sliding [B, 1, S] or None)``: the masks of one decode step writing slot ``cache_index``
  (int32 scalar) of an ``S``-slot cache with valid slots ``kv_mask`` ``[B, S]`` (including ``cache_index``); as
  :func:`attention_masks` cached with ``T = 1``."""
  k_idx = jnp.arange(s_len, dtype=jnp.int32)
  base = ((k_idx <= cache_index)[None, None, :] & kv_mask[:, None, :].astype(bool))  # [B, 1, S]
  sliding = None
  if _has_sliding(cfg):
    sliding = base & window_mask(kv_mask, cache_index[None], cfg.sliding_window, s_len)
  return base, sliding
