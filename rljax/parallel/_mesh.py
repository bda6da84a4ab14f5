"""Device meshes from a config, with the named axes ``data``, ``fsdp``, ``tensor``, ``expert``.

* ``data``   — pure data parallelism: parameters replicated, batch split.
* ``fsdp``   — batch split *and* parameters/optimizer state sharded (ZeRO-3);
  each layer's weights are all-gathered just in time.
* ``tensor`` — Megatron-style tensor parallelism: heads, MLP width and the
  vocabulary split; activations reduced inside each layer.
* ``expert`` — MoE experts split across devices.

On a TPU pod slice or a multi-node GPU job, the mesh covers *all* devices of
all processes (``jax.devices()``), and ``jax.make_mesh`` orders them so that the
innermost axes (``tensor``, then ``expert``) stay within a host / ICI ring.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Mapping, Optional, Sequence

import jax
from jax.sharding import AxisType, Mesh

AXES = ("data", "fsdp", "tensor", "expert")

__all__ = ["AXES", "MeshConfig", "make_mesh", "check_mesh_divides"]


@dataclasses.dataclass(frozen=True)
class MeshConfig:
  """Axis sizes; exactly one may be -1 (inferred from the device count).

  Attributes:
    data: data-parallel replicas.
    fsdp: fully-sharded data-parallel degree (default: all remaining devices).
    tensor: tensor-parallel degree (keep within one host / ICI neighbourhood).
    expert: expert-parallel degree (MoE).
  """
  data: int = 1
  fsdp: int = -1
  tensor: int = 1
  expert: int = 1

  def __post_init__(self):
    sizes = self.sizes
    if sum(s == -1 for s in sizes) > 1:
      raise ValueError(f"at most one mesh axis may be -1, got {dict(zip(AXES, sizes))}")
    for name, s in zip(AXES, sizes):
      if isinstance(s, bool) or not isinstance(s, int):
        raise ValueError(f"mesh axis {name!r} must be an integer (>= 1, or -1 for all remaining devices), got {s!r}")
      if s != -1 and s < 1:
        raise ValueError(f"mesh axis {name!r} must be >= 1 or -1, got {s}")

  @property
  def sizes(self) -> tuple[int, ...]:
    return (self.data, self.fsdp, self.tensor, self.expert)

  def resolve(self, num_devices: int) -> tuple[int, ...]:
    """Concrete axis sizes for ``num_devices`` devices."""
    sizes = list(self.sizes)
    known = math.prod(s for s in sizes if s != -1)
    if -1 in sizes:
      if num_devices % known:
        raise ValueError(f"{num_devices} devices are not divisible by the fixed mesh axes "
                         f"{dict(zip(AXES, self.sizes))} (product {known})")
      sizes[sizes.index(-1)] = num_devices // known
    if math.prod(sizes) != num_devices:
      raise ValueError(f"mesh {dict(zip(AXES, sizes))} needs {math.prod(sizes)} devices, "
                       f"but {num_devices} are available")
    return tuple(sizes)


def make_mesh(config: MeshConfig = MeshConfig(), devices: Optional[Sequence] = None) -> Mesh:
  """Builds the 4-axis mesh (``data``, ``fsdp``, ``tensor``, ``expert``) over ``devices``.

  Uses ``jax.make_mesh`` (device-order aware on TPU/GPU); axes are ``Auto``
  so that ``jax.jit`` shardings and ``with_sharding_constraint`` drive layout.
  """
  devices = list(jax.devices() if devices is None else devices)
  sizes = config.resolve(len(devices))
  return jax.make_mesh(sizes, AXES, axis_types=(AxisType.Auto,) * len(AXES), devices=devices)


def _model_dims(model_cfg) -> list:
  """``(mesh axis, config field, size)`` of every dimension a mesh axis splits (``DEFAULT_RULES``)."""
  dims = [("fsdp", "hidden_size", model_cfg.hidden_size),
          ("tensor", "num_heads", model_cfg.num_heads),
          ("tensor", "num_kv_heads", model_cfg.num_kv_heads),
          ("tensor", "vocab_size", model_cfg.vocab_size),
          ("tensor", "intermediate_size", model_cfg.intermediate_size)]
  if getattr(model_cfg, "num_experts", 0):
    dims += [("tensor", "moe_intermediate_size", model_cfg.moe_intermediate_size),
             ("expert", "num_experts", model_cfg.num_experts)]
  return dims


def check_mesh_divides(mesh_shape: Mapping[str, int], model_cfg) -> None:
  """Refuses a mesh whose axes do not divide the model dimensions they split.

  ``fsdp`` splits ``hidden_size`` (the ``embed`` axis of every weight); ``tensor`` splits
  ``num_heads``, ``num_kv_heads``, ``vocab_size``, ``intermediate_size`` (and, for MoE,
  ``moe_intermediate_size``); ``expert`` splits ``num_experts``. The logical-axis rules would
  silently replicate a dimension that its axis does not divide (``logical_to_spec``), which
  keeps the run correct but multiplies that weight's memory by the axis size; at start-up
  it is refused instead.

  Args:
    mesh_shape: axis name -> size (``Mesh.shape`` or ``dict(zip(AXES, sizes))``).
    model_cfg: a ``rljax.models.ModelConfig``.
  Raises:
    ValueError naming the axis, the dimension and the axis sizes that divide it.
  """
  for axis, field, size in _model_dims(model_cfg):
    n = int(mesh_shape.get(axis, 1))
    if n > 1 and size % n:
      valid = [d for d in range(1, size + 1) if size % d == 0 and d <= max(n, 64)]
      raise ValueError(f"mesh axis {axis}={n} does not divide the model's {field}={size} "
                       f"(ModelConfig.{field}); valid {axis} sizes: {', '.join(map(str, valid))}")
