"""Logical-axis rules: from named array dimensions to mesh axes.

Every parameter and activation dimension of the model family has a logical
name (``batch``, ``seq``, ``embed``, ``heads``, ``kv_heads``, ``head_dim``,
``mlp``, ``vocab``, ``expert``, ``layers``, ``cache_seq``). A rule table maps
each name to mesh axes (maxtext's ``logical_axis_rules``). The default table:

=============  ====================  =========================================
logical        mesh axes             why
=============  ====================  =========================================
batch          (data, fsdp)          every batch-parallel device gets a slice
embed          fsdp                  ZeRO-3: weights sharded over fsdp
heads/kv_heads tensor                Megatron attention split
mlp            tensor                Megatron MLP split
vocab          tensor                vocab-parallel embedding / head
expert         expert                experts split
lora_in/out    fsdp                  LoRA adapters' input / output dims (ZeRO-3 like the base)
lora           replicated            the rank
others         replicated
=============  ====================  =========================================

A dimension that the mesh axes do not divide is replicated instead (e.g. 2 KV
heads on a tensor axis of 4), and a mesh axis is used at most once per array.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Union

from jax.sharding import Mesh, NamedSharding, PartitionSpec

MeshAxes = Union[None, str, tuple]
Rules = tuple

DEFAULT_RULES: Rules = (
    ("batch", ("data", "fsdp")),
    ("embed", "fsdp"),
    ("heads", "tensor"),
    ("kv_heads", "tensor"),
    ("mlp", "tensor"),
    ("vocab", "tensor"),
    ("expert", "expert"),
    ("seq", None),
    ("head_dim", None),
    ("layers", None),
    ("cache_seq", None),
    ("norm", None),
    ("lora", None),
    ("lora_in", "fsdp"),
    ("lora_out", "fsdp"),
)

__all__ = ["DEFAULT_RULES", "logical_to_spec", "logical_sharding"]


def _as_tuple(axes: MeshAxes) -> tuple:
  if axes is None:
    return ()
  return (axes,) if isinstance(axes, str) else tuple(axes)


def logical_to_spec(logical: Sequence[Optional[str]], mesh: Mesh, shape: Optional[Sequence[int]] = None,
                    rules: Rules = DEFAULT_RULES) -> PartitionSpec:
  """The ``PartitionSpec`` of an array whose dimensions have logical names ``logical``.

  Args:
    logical: one name (or None) per dimension.
    mesh: the mesh (its axis sizes decide divisibility).
    shape: the array shape; dimensions not divisible by their mesh axes are replicated.
    rules: ``(logical name, mesh axes)`` pairs; unknown names raise ``ValueError``.
  """
  table = dict(rules)
  if shape is not None and len(shape) != len(logical):
    raise ValueError(f"logical axes {tuple(logical)} do not match shape {tuple(shape)}")
  used: set = set()
  out = []
  for i, name in enumerate(logical):
    if name is None:
      out.append(None)
      continue
    if name not in table:
      raise ValueError(f"logical axis {name!r} has no rule; known: {sorted(table)}")
    axes = tuple(a for a in _as_tuple(table[name]) if a in mesh.shape and a not in used and mesh.shape[a] > 1)
    if shape is not None:
      # keep the longest prefix of mesh axes whose product divides the dimension
      while axes and shape[i] % math.prod(mesh.shape[a] for a in axes):
        axes = axes[:-1]
    used.update(axes)
    out.append(None if not axes else axes[0] if len(axes) == 1 else axes)
  return PartitionSpec(*out)


def logical_sharding(logical: Sequence[Optional[str]], mesh: Mesh, shape: Optional[Sequence[int]] = None,
                     rules: Rules = DEFAULT_RULES) -> NamedSharding:
  """``NamedSharding(mesh, logical_to_spec(...))``."""
  return NamedSharding(mesh, logical_to_spec(logical, mesh, shape, rules))
