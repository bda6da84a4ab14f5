"""Meshes, logical-axis sharding rules and multi-host start-up."""
from rljax.parallel._distributed import DistributedConfig, maybe_initialize_distributed
from rljax.parallel._mesh import AXES, MeshConfig, make_mesh
from rljax.parallel._rules import DEFAULT_RULES, logical_sharding, logical_to_spec

__all__ = ["AXES", "MeshConfig", "make_mesh", "DEFAULT_RULES", "logical_sharding", "logical_to_spec",
           "DistributedConfig", "maybe_initialize_distributed"]
