"""The sampler's carried state (``SamplerState``) and the layouts and sharding of its KV cache.

The state between calls holds the model's stacked ``KVCache`` ``[L, B, S, K, D]``; inside a decode
loop the cache is a pair of ``L``-tuples of head-major ``[B, K, S, D]`` arrays (:func:`_to_layers`).
With parameters sharded over a mesh both layouts are constrained through the logical axes below.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

import jax
import jax.numpy as jnp

from rljax.parallel import with_logical_constraint
from rljax.types import Rollout

Array = jax.Array

__all__ = ["CACHE_AXES", "LAYER_CACHE_AXES", "SamplerState"]

# Logical axes of the KV cache (``rljax.parallel.DEFAULT_RULES``): rows over the batch mesh axes,
# KV heads over ``tensor``; the stacked ``[L, B, S, K, D]`` cache and the decode loop's per-layer
# head-major ``[B, K, S, D]`` arrays.
CACHE_AXES = ("layers", "batch", "cache_seq", "kv_heads", "head_dim")
LAYER_CACHE_AXES = ("batch", "kv_heads", "cache_seq", "head_dim")


def _params_mesh(params):
  """The mesh the parameters are sharded over (None: one device / unsharded)."""
  for x in jax.tree.leaves(params):
    sh = getattr(x, "sharding", None)
    if isinstance(sh, jax.sharding.NamedSharding) and sh.mesh.size > 1:
      return sh.mesh
  return None


def _constrain_cache(cache, mesh):
  if mesh is None:
    return cache
  return type(cache)(with_logical_constraint(cache.k, CACHE_AXES, mesh),
                     with_logical_constraint(cache.v, CACHE_AXES, mesh))


def _row_split(mesh) -> int:
  """How many ways the rows (logical ``batch`` axis) are split over ``mesh`` (1 without a mesh)."""
  if mesh is None:
    return 1
  from rljax.parallel import DEFAULT_RULES  # pylint: disable=import-outside-toplevel
  axes = dict(DEFAULT_RULES)["batch"]
  axes = (axes,) if isinstance(axes, str) else tuple(axes)
  split = 1
  for a in axes:
    split *= int(dict(mesh.shape).get(a, 1))
  return split


def _constrain_rows(x, mesh):
  """``x`` (``[B, ...]``) with its rows split over the mesh's batch axes (unchanged without a mesh)."""
  if mesh is None or x is None:
    return x
  return with_logical_constraint(x, ("batch",) + (None,) * (x.ndim - 1), mesh)


def _constrain_layers(layers, mesh):
  if mesh is None:
    return layers
  return tuple(with_logical_constraint(x, LAYER_CACHE_AXES, mesh) for x in layers)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class SamplerState:
  """Everything needed to continue a batch of sequences (pass to ``resume``).

  ``B`` sequences, ``S = config.cache_size`` slots/positions. The last sampled
  token of each row (``pending``) is not in the cache yet; ``resume`` feeds it
  together with the appended tokens. Arrays are device arrays; treat the
  state as consumed once passed to ``resume``.

  Attributes:
    cache: model ``KVCache`` (``[L, B, S, K, D]`` leaves).
    kv_mask: ``[B, S]`` bool, slots holding a real key of that row.
    slot: int32 scalar, first free cache slot (shared by all rows).
    pending: ``[B]`` int32 last sampled token (position ``length - 1``).
    length: ``[B]`` int32 tokens in the sequence, including ``pending``.
    tokens, prompt_mask, completion_mask, logp_behavior, logp_sampling:
      ``[B, S]`` left-aligned sequence buffers (see ``Rollout``).
    entropy: ``[B, S]`` float32 or None. routing: ``[B, S, L, k]`` or None.
    finish_reason: ``[B]`` int32 ``FinishReason`` of the last call.
    group_id, sample_index: ``[B]`` int32 (prompt id, index within group).
    policy_version: ``[B]`` int32. stop_tokens: ``[B, W]`` int32 (-1 = none).
  """
  cache: Any
  kv_mask: Array
  slot: Array
  pending: Array
  length: Array
  tokens: Array
  prompt_mask: Array
  completion_mask: Array
  logp_behavior: Array
  logp_sampling: Array
  finish_reason: Array
  group_id: Array
  sample_index: Array
  policy_version: Array
  stop_tokens: Array
  entropy: Optional[Array] = None
  routing: Optional[Array] = None

  def replace(self, **changes) -> "SamplerState":
    return dataclasses.replace(self, **changes)

  def to_rollout(self, length: Optional[int] = None) -> Rollout:
    """The sequences as a ``Rollout`` (first ``length`` columns; default all S)."""
    cut = (lambda x: x) if length is None else (lambda x: x[:, :length])
    return Rollout(
        tokens=cut(self.tokens), prompt_mask=cut(self.prompt_mask),
        completion_mask=cut(self.completion_mask), logp_behavior=cut(self.logp_behavior),
        group_id=self.group_id, policy_version=self.policy_version,
        logp_sampling=cut(self.logp_sampling),
        entropy_behavior=None if self.entropy is None else cut(self.entropy),
        routing=None if self.routing is None else cut(self.routing),
        finish_reason=self.finish_reason)


def _to_layers(cache, mesh):
  """``KVCache`` ``[L, B, S, K, D]`` -> ``(ks, vs)``: ``L``-tuples of head-major ``[B, K, S, D]``
  arrays, the decode loop's layout (one array per layer: slicing a layer out of the stacked cache
  would copy it every step; kv head before slot: no per-step transpose)."""
  split = lambda x: _constrain_layers(tuple(x[i].transpose(0, 2, 1, 3) for i in range(x.shape[0])), mesh)
  return split(cache.k), split(cache.v)


def _from_layers(layers, cache_type):
  """Inverse of :func:`_to_layers`."""
  ks, vs = layers
  return cache_type(jnp.stack(ks).transpose(0, 1, 3, 2, 4), jnp.stack(vs).transpose(0, 1, 3, 2, 4))


def _fit_slots(st: SamplerState, size: int, mesh) -> SamplerState:
  """``st`` with its per-layer cache and ``kv_mask`` zero-padded to ``size`` slots (never shrunk)."""
  ks, vs = st.cache
  extra = size - ks[0].shape[2]
  if extra <= 0:
    return st
  pad = lambda layers: _constrain_layers(tuple(jnp.pad(x, ((0, 0), (0, 0), (0, extra), (0, 0))) for x in layers),
                                         mesh)
  return st.replace(cache=(pad(ks), pad(vs)), kv_mask=jnp.pad(st.kv_mask, ((0, 0), (0, extra))))
