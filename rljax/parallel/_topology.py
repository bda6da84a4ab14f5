"""TPU topologies with no TPU attached: devices and meshes that ``jit(...).lower(...).compile()`` targets with XLA:TPU.

``libtpu`` (``pip install -e ".[tpu]"``) carries the TPU compiler; ``jax.experimental.topologies`` describes a
slice (``"v5e:16x16"``: 256 v5e chips) as device objects that no program can run on but every program can be
compiled for, Pallas kernels included (Mosaic). A mesh over them is an ordinary ``jax.sharding.Mesh``::

    from rljax.parallel import MeshConfig, topology_mesh
    mesh = topology_mesh("v5e:16x16", MeshConfig(data=1, fsdp=-1, tensor=1))   # 256 devices, fsdp=256
    compiled = jax.jit(f).lower(*abstract_inputs_sharded_over(mesh)).compile()
    compiled.memory_analysis()                                              # the TPU's own buffer assignment

Everything that chooses by platform (the fused kernel's implementation, interpret mode) follows the devices a
program is lowered for, not the host's default backend, so such a compile is the program a pod would run.

``CHIPS`` holds each generation's published per-chip figures (HBM capacity, bf16 peak, HBM bandwidth), used by
``rljax plan`` for "fits" and for lower-bound time estimates; they are the vendor's numbers, not measurements.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
from typing import Optional

from jax.sharding import Mesh

from rljax.parallel._mesh import MeshConfig, make_mesh

__all__ = ["Chip", "CHIPS", "EXAMPLE_TOPOLOGIES", "chip_of", "topology_devices", "topology_mesh"]

GiB = 2 ** 30


@dataclasses.dataclass(frozen=True)
class Chip:
  """One TPU generation's published per-chip figures.

  Attributes:
    name: the generation as topology names spell it (``"v5e"``).
    device_kind: what ``device.device_kind`` reports for it (``"TPU v5 lite"``).
    hbm_bytes: HBM capacity per chip.
    bf16_flops: peak dense bf16 matmul rate per chip (FLOP/s).
    hbm_bytes_per_s: peak HBM bandwidth per chip (bytes/s).
  """
  name: str
  device_kind: str
  hbm_bytes: int
  bf16_flops: float
  hbm_bytes_per_s: float


# Google Cloud's published per-chip figures (cloud.google.com/tpu/docs/v4, v5e, v5p, v6e).
CHIPS = {
    "v4": Chip("v4", "TPU v4", 32 * GiB, 275e12, 1228e9),
    "v5e": Chip("v5e", "TPU v5 lite", 16 * GiB, 197e12, 819e9),
    "v5p": Chip("v5p", "TPU v5", 95 * GiB, 459e12, 2765e9),
    "v6e": Chip("v6e", "TPU v6 lite", 32 * GiB, 918e12, 1640e9),
}
EXAMPLE_TOPOLOGIES = ("v5e:2x2", "v5e:8x8", "v5e:16x16", "v6e:16x16", "v5p:8x8x4", "v4:4x4x4")
_NAME = re.compile(r"^(v4|v5e|v5p|v6e):(\d+(?:x\d+){1,2})$")


def _valid_names() -> str:
  return (f"GENERATION:AxB[xC] with GENERATION one of {', '.join(CHIPS)}, e.g. {', '.join(EXAMPLE_TOPOLOGIES)} "
          "(v5e/v6e slices are 2-D, at least 2x2; v4/v5p slices are 3-D)")


def chip_of(topology: str) -> Chip:
  """The :class:`Chip` of a topology name (``"v5e:16x16"`` -> v5e); ``ValueError`` listing valid names."""
  m = _NAME.match(str(topology).strip())
  if not m:
    raise ValueError(f"unknown TPU topology {topology!r}; valid names: {_valid_names()}")
  return CHIPS[m.group(1)]


def _chips(topology: str) -> int:
  return math.prod(int(x) for x in topology.split(":")[1].split("x"))


@functools.lru_cache(maxsize=None)
def topology_devices(topology: str) -> tuple:
  """The devices of a TPU slice described by name, with no TPU attached (``jax.experimental.topologies``).

  Args:
    topology: ``"v5e:16x16"``, ``"v6e:8x8"``, ``"v5p:8x8x4"``, ``"v4:4x4x4"``, ...
  Returns:
    a tuple of TPU device objects (compile targets only), one per chip.
  Raises:
    ValueError: an unknown name (listing the valid forms), a slice libtpu refuses (its reason), or libtpu not
      installed (the install command).
  """
  chip_of(topology)  # the name's form first: a typo should not wait for libtpu
  try:
    import libtpu  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  except ImportError:
    raise ValueError(f"compiling for {topology} needs the TPU compiler (libtpu): pip install -e \".[tpu]\"") from None
  # libtpu takes a machine-wide lock file (/tmp/libtpu_lockfile) so that two processes never drive one TPU; a
  # compile-only process drives none, and without this a second one (a test worker, a plan beside a plan) fails
  os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
  from jax.experimental import topologies  # pylint: disable=import-outside-toplevel
  try:
    desc = topologies.get_topology_desc(topology_name=topology, platform="tpu")
  except Exception as e:  # pylint: disable=broad-except  (libtpu raises XlaRuntimeError / RuntimeError)
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    raise ValueError(f"libtpu refused topology {topology!r} ({first}); valid names: {_valid_names()}") from None
  devices = tuple(desc.devices)
  if len(devices) != _chips(topology):
    raise ValueError(f"topology {topology!r} gave {len(devices)} devices, expected {_chips(topology)}")
  return devices


def topology_mesh(topology: str, config: MeshConfig = MeshConfig(), *, devices: Optional[int] = None) -> Mesh:
  """The 4-axis mesh (``data``, ``fsdp``, ``tensor``, ``expert``) over a TPU slice's devices, for compiling.

  Args:
    topology: a TPU topology name (:func:`topology_devices`).
    config: axis sizes; one may be -1 (all remaining chips). The product must equal the slice's chips
      (or ``devices``).
    devices: use only the first ``devices`` chips (a one-chip program: ``devices=1`` of ``"v5e:2x2"``,
      the smallest slice libtpu describes).
  Raises:
    ValueError naming the axes and the chip count when the mesh does not divide the slice.
  """
  devs = topology_devices(topology)
  if devices is not None:
    if not 1 <= devices <= len(devs):
      raise ValueError(f"devices={devices}: {topology} has {len(devs)} chips")
    devs = devs[:devices]
  try:
    config.resolve(len(devs))
  except ValueError as e:
    raise ValueError(f"mesh {dict(zip(('data', 'fsdp', 'tensor', 'expert'), config.sizes))} does not fit "
                     f"{topology} ({len(devs)} chips): {e}") from None
  return make_mesh(config, devs)
