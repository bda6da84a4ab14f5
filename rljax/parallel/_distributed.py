"""Multi-host start-up through JAX's own distributed runtime.

``maybe_initialize_distributed`` calls ``jax.distributed.initialize`` when the
process is one of several: explicitly (``--coordinator``/``num_processes``/
``process_id``, or ``RLJAX_COORDINATOR``/``RLJAX_NUM_PROCESSES``/``RLJAX_PROCESS_ID``),
or on a cluster JAX detects by itself (TPU pod slices, SLURM, Open MPI:
``JAX_COORDINATOR_ADDRESS`` or the cluster's variables). On one process it does
nothing. CPU processes use gloo collectives.

``RLJAX_TRANSFER_ADDRESS=host:port`` (or ``transfer_address=``) sets
``jax_cross_host_transfer_socket_address`` before ``jax.distributed.initialize``:
JAX's DCN transfer server, which a backend without cross-host transfers of its
own (CPU) needs for a ``jax.device_put`` between processes (the multi-process
asynchronous runner's rollout and training sub-meshes). Each process gives its
own address.
"""
from __future__ import annotations

import os
from typing import Mapping, Optional

import jax

__all__ = ["maybe_initialize_distributed", "DistributedConfig"]

_CLUSTER_HINTS = ("JAX_COORDINATOR_ADDRESS", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "TPU_WORKER_HOSTNAMES",
                  "MEGASCALE_COORDINATOR_ADDRESS")


class DistributedConfig:
  """Resolved multi-process settings (None = let JAX detect)."""

  def __init__(self, coordinator: Optional[str], num_processes: Optional[int], process_id: Optional[int],
               transfer_address: Optional[str] = None):
    self.coordinator, self.num_processes, self.process_id = coordinator, num_processes, process_id
    self.transfer_address = transfer_address

  @classmethod
  def from_env(cls, env: Mapping[str, str] = os.environ) -> "DistributedConfig":
    def as_int(key):
      v = env.get(key)
      if v is None:
        return None
      try:
        return int(v)
      except ValueError:
        raise ValueError(f"{key} must be an integer, got {v!r}") from None
    return cls(env.get("RLJAX_COORDINATOR"), as_int("RLJAX_NUM_PROCESSES"), as_int("RLJAX_PROCESS_ID"),
               env.get("RLJAX_TRANSFER_ADDRESS"))


def maybe_initialize_distributed(coordinator: Optional[str] = None, num_processes: Optional[int] = None,
                                 process_id: Optional[int] = None, env: Mapping[str, str] = os.environ, *,
                                 transfer_address: Optional[str] = None) -> bool:
  """Initialises ``jax.distributed`` when several processes take part; returns whether it did (``transfer_address``:
  module docstring)."""
  cfg = DistributedConfig.from_env(env)
  transfer_address = transfer_address or cfg.transfer_address
  coordinator = coordinator or cfg.coordinator
  num_processes = num_processes if num_processes is not None else cfg.num_processes
  process_id = process_id if process_id is not None else cfg.process_id
  explicit = coordinator is not None or (num_processes or 1) > 1
  detected = any(k in env for k in _CLUSTER_HINTS)
  if not explicit and not detected:
    return False
  if transfer_address:  # before the backend starts (initialize); "" = unset
    if ":" not in transfer_address:
      raise ValueError(f"RLJAX_TRANSFER_ADDRESS must look like host:port, got {transfer_address!r}")
    jax.config.update("jax_cross_host_transfer_socket_address", transfer_address)
  if explicit:
    if coordinator is None or num_processes is None or process_id is None:
      raise ValueError("multi-process runs need coordinator, num_processes and process_id together "
                       f"(got {coordinator!r}, {num_processes!r}, {process_id!r})")
    if not 0 <= process_id < num_processes:
      raise ValueError(f"process_id must be in [0, {num_processes}), got {process_id}")
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes, process_id=process_id)
  else:
    jax.distributed.initialize()
  return True
