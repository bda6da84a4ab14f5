"""Rollout and training sub-meshes, and the explicit, measured weight transfer between them.

``split_mesh(mesh, r)`` cuts the run's mesh into two disjoint meshes with the same axis names: the **rollout
sub-mesh** (the first ``r`` devices in the mesh's order) and the **training sub-mesh** (the others). The cut
runs along the outermost axis of size > 1 (``data``, else ``fsdp``, ...), so every inner axis (``tensor``,
``expert``: a host's or an ICI ring's devices) stays whole on both sides; ``r`` must then be a multiple of the
product of the inner axes. ``jax.make_mesh`` orders a multi-process mesh by process, so a cut at a process
boundary gives each sub-mesh whole processes.

``transfer(tree, shardings)`` is the weight transfer: ``jax.device_put`` onto the other sub-mesh's shardings
(a reshard between disjoint device sets; ``jax.jit`` refuses arguments and outputs on different device
sets), waited for, timed and byte-counted. What JAX allows (jax 0.10, checked on CPU):

* one process: any source and target shardings;
* several processes (``jax.distributed``): the two sub-meshes must lie on *disjoint sets of processes*, with
  the same layout (the same ``PartitionSpec`` on meshes of the same shape): JAX then sends each shard
  process to process. The CPU backend has no cross-host transfers of its own: every process first calls
  ``jax.config.update("jax_cross_host_transfer_socket_address", "host:port")`` (JAX's DCN transfer server;
  before ``jax.distributed.initialize``), else ``device_put`` raises "does not support cross-host device
  transfers". Backends that support cross-host transfers themselves need no setting.
  Sub-meshes that share processes (say each host's first half of devices rolls out, the second half
  trains) are refused by ``jax.device_put`` ("input and target sharding should have the same set of
  devices"; JAX's experimental support for that case is in the TFRT TPU runtime only).
"""
from __future__ import annotations

import math
import time
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

__all__ = ["split_mesh", "split_sizes", "transfer", "tree_bytes"]


def split_sizes(shape: dict, field: str = "rl.async_rollout_devices") -> tuple:
  """``(axis, allowed)``: the mesh axis a split cuts and the rollout device counts it allows (``shape``: axis
  name -> size, in mesh order). Raises ``ValueError`` naming ``field`` when the mesh has one device."""
  names, sizes = list(shape), [int(s) for s in shape.values()]
  cut = next((i for i, s in enumerate(sizes) if s > 1), None)
  if cut is None:
    raise ValueError(f"{field} splits the mesh into rollout and training devices, but the mesh {dict(shape)} has "
                     "1 device: give it more (e.g. mesh.fsdp=-1)")
  inner = math.prod(sizes[cut + 1:])
  return names[cut], [j * inner for j in range(1, sizes[cut])]


def split_mesh(mesh: Mesh, rollout_devices: int, field: str = "rl.async_rollout_devices") -> tuple:
  """``(rollout_mesh, train_mesh)``: the first ``rollout_devices`` devices of ``mesh`` and the others, cut
  along its outermost axis of size > 1 (module docstring). Both keep ``mesh``'s axis names and types.

  Raises ``ValueError`` naming ``field`` and the allowed values when ``rollout_devices`` leaves a side empty
  or does not divide the cut axis into whole slices."""
  axis, allowed = split_sizes(mesh.shape, field)
  if isinstance(rollout_devices, bool) or not isinstance(rollout_devices, int) or rollout_devices not in allowed:
    raise ValueError(f"invalid config value {field}={rollout_devices!r}: must be one of {allowed} on the mesh "
                     f"{dict(mesh.shape)} (the split cuts axis {axis!r} and leaves both sides non-empty)")
  i = mesh.axis_names.index(axis)
  j = rollout_devices // (mesh.devices.size // mesh.devices.shape[i])
  devices = mesh.devices
  kw = {"axis_types": mesh.axis_types} if hasattr(mesh, "axis_types") else {}
  rollout = Mesh(np.take(devices, np.arange(j), axis=i), mesh.axis_names, **kw)
  train = Mesh(np.take(devices, np.arange(j, devices.shape[i]), axis=i), mesh.axis_names, **kw)
  return rollout, train


def tree_bytes(tree: Any) -> int:
  """Bytes of a pytree's arrays, each array once (its global, logical size: ``size * itemsize``)."""
  return int(sum(x.size * np.dtype(x.dtype).itemsize for x in jax.tree_util.tree_leaves(tree)))


def transfer(tree: Any, shardings: Optional[Any] = None) -> tuple:
  """``(copy, seconds, nbytes)``: ``tree`` placed on ``shardings`` (``jax.device_put``; a prefix tree, one
  ``NamedSharding`` per ``nnx.Variable`` allowed) and waited for; ``seconds`` is the wall time of the copy,
  ``nbytes`` :func:`tree_bytes` of ``tree``. ``shardings=None``: a copy on the same devices (the shared-device
  snapshot that survives the train step's donation)."""
  t = time.perf_counter()
  if shardings is None:
    out = jax.tree_util.tree_map(jnp.copy, tree)
  else:
    out = jax.device_put(tree, shardings)
  out = jax.block_until_ready(out)
  return out, time.perf_counter() - t, tree_bytes(tree)
