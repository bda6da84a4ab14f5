"""Shardings of NNX model state from the parameters' logical-axis metadata.

The model family annotates every parameter with ``logical_axes`` metadata
(e.g. ``('embed', 'heads', 'head_dim')``); ``state_shardings`` maps them to
mesh axes with the rule table and returns a tree of ``NamedSharding`` that is a
prefix of the state (usable as ``jax.jit`` in/out shardings or with
``jax.device_put``). Parameters without metadata are replicated.
"""
from __future__ import annotations

from typing import Any

import jax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from rljax.parallel._rules import DEFAULT_RULES, Rules, logical_to_spec

__all__ = ["state_shardings", "shard_state", "batch_sharding", "replicated"]


def _is_variable(x) -> bool:
  return isinstance(x, nnx.Variable)


def _axes_of(variable) -> Any:
  meta = variable.get_metadata() if hasattr(variable, "get_metadata") else {}
  return meta.get("logical_axes")


def _value_shape(variable) -> tuple:
  return tuple(jax.tree.leaves(variable)[0].shape) if jax.tree.leaves(variable) else ()


def state_shardings(state, mesh: Mesh, rules: Rules = DEFAULT_RULES):
  """A ``NamedSharding`` per variable of ``state`` (an ``nnx.State`` or any pytree of Variables)."""

  def one(v):
    if not _is_variable(v):
      return NamedSharding(mesh, PartitionSpec())
    axes = _axes_of(v)
    if axes is None:
      return NamedSharding(mesh, PartitionSpec())
    return NamedSharding(mesh, logical_to_spec(axes, mesh, _value_shape(v), rules))

  return jax.tree.map(one, state, is_leaf=_is_variable)


def shard_state(state, mesh: Mesh, rules: Rules = DEFAULT_RULES):
  """``jax.device_put`` of ``state`` onto the shardings of ``state_shardings``."""
  return jax.device_put(state, state_shardings(state, mesh, rules))


def batch_sharding(mesh: Mesh, ndim: int = 2, rules: Rules = DEFAULT_RULES) -> NamedSharding:
  """Leading (batch) dimension over ``data`` x ``fsdp``; the rest replicated."""
  return NamedSharding(mesh, logical_to_spec(("batch",) + (None,) * (ndim - 1), mesh, None, rules))


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, PartitionSpec())
