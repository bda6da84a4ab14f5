"""Meshes, logical-axis sharding rules, sharded train state/step and multi-host start-up.

Public API::

    from rljax.parallel import MeshConfig, make_mesh, train_state_shardings, shard_train_step
    mesh = make_mesh(MeshConfig(data=1, fsdp=-1, tensor=1))
    shardings = train_state_shardings(state, mesh)          # params, optimizer state, scalars
    state = jax.device_put(state, shardings)
    step = shard_train_step(make_train_step(graphdef, loss_fn, opt, jit=False), shardings, mesh)

Multi-host data (``_data``): ``process_rows`` (the rows of a global batch this
process feeds), ``process_batches`` (a grain loader of only those rows),
``global_batch`` (``jax.make_array_from_process_local_data``), ``to_host`` /
``host_rows`` (NumPy copies of global arrays), ``process_any`` / ``process_sum`` /
``allgather_rows`` (host collectives over every process or a process group: ``group_allgather``).

TPU slices with no TPU attached (``_topology``): ``topology_mesh("v5e:16x16", MeshConfig(...))`` builds a
mesh that programs are compiled for with XLA:TPU (``rljax plan``); ``CHIPS`` holds each generation's published figures.

Rollout / training sub-meshes (``_submesh``): ``split_mesh`` (two disjoint meshes), ``transfer`` (the
explicit, timed and byte-counted weight reshard between them), ``tree_bytes``.

See ``docs/scaling.md``.
"""
from rljax.parallel._distributed import DistributedConfig, maybe_initialize_distributed
from rljax.parallel._mesh import AXES, MeshConfig, check_mesh_divides, make_mesh
from rljax.parallel._rules import DEFAULT_RULES, logical_sharding, logical_to_spec
from rljax.parallel._shard import batch_sharding, replicated, shard_state, state_shardings
from rljax.parallel._train import (abstract_with_shardings, batch_shardings, compute_spec, fsdp_loss_fn,
                                   shard_train_step, sharded_head, train_state_shardings,
                                   gather_per_layer, vocab_split_logits,
                                   with_logical_constraint)
from rljax.parallel._hlo import collectives  # noqa: E402
from rljax.parallel._submesh import split_mesh, split_sizes, transfer, tree_bytes
from rljax.parallel._topology import CHIPS, Chip, chip_of, topology_devices, topology_mesh
from rljax.parallel._data import (all_process_rows, allgather_rows, global_batch, host_rows, place_global,
                                  group_allgather, process_any, process_batches, process_rows, process_sum,
                                  row_sharding, to_host)

__all__ = ["AXES", "MeshConfig", "make_mesh", "check_mesh_divides", "DEFAULT_RULES", "logical_sharding", "logical_to_spec",
           "DistributedConfig", "maybe_initialize_distributed", "state_shardings", "shard_state",
           "batch_sharding", "replicated", "train_state_shardings", "shard_train_step", "batch_shardings",
           "with_logical_constraint", "sharded_head", "gather_per_layer", "vocab_split_logits", "abstract_with_shardings", "collectives", "fsdp_loss_fn", "compute_spec",
           "row_sharding", "process_rows", "all_process_rows", "global_batch", "place_global", "to_host", "host_rows",
           "allgather_rows", "process_sum", "process_any", "group_allgather", "process_batches", "split_mesh",
           "split_sizes", "transfer", "tree_bytes", "CHIPS", "Chip", "chip_of", "topology_devices",
           "topology_mesh"]
