"""Meshes, logical-axis sharding rules, sharded train state/step and multi-host start-up.

Public API::

    from rljax.parallel import MeshConfig, make_mesh, train_state_shardings, shard_train_step
    mesh = make_mesh(MeshConfig(data=1, fsdp=-1, tensor=1))
    shardings = train_state_shardings(state, mesh)          # params, optimizer state, scalars
    state = jax.device_put(state, shardings)
    step = shard_train_step(make_train_step(graphdef, loss_fn, opt, jit=False), shardings, mesh)

See ``docs/scaling.md``.
"""
from rljax.parallel._distributed import DistributedConfig, maybe_initialize_distributed
from rljax.parallel._mesh import AXES, MeshConfig, make_mesh
from rljax.parallel._rules import DEFAULT_RULES, logical_sharding, logical_to_spec
from rljax.parallel._shard import batch_sharding, replicated, shard_state, state_shardings
from rljax.parallel._train import (abstract_with_shardings, batch_shardings, compute_spec, fsdp_loss_fn,
                                   shard_train_step, train_state_shardings, with_logical_constraint)
from rljax.parallel._hlo import collectives  # noqa: E402

__all__ = ["AXES", "MeshConfig", "make_mesh", "DEFAULT_RULES", "logical_sharding", "logical_to_spec",
           "DistributedConfig", "maybe_initialize_distributed", "state_shardings", "shard_state",
           "batch_sharding", "replicated", "train_state_shardings", "shard_train_step", "batch_shardings",
           "with_logical_constraint", "abstract_with_shardings", "collectives", "fsdp_loss_fn", "compute_spec"]
