"""Mesh construction and logical-axis rules (8 fake CPU devices)."""
import jax
import pytest
from jax.sharding import PartitionSpec as P

from rljax.parallel import MeshConfig, logical_to_spec, make_mesh, maybe_initialize_distributed


def test_mesh_sizes_and_inference():
  assert len(jax.devices()) == 8
  mesh = make_mesh(MeshConfig(data=2, fsdp=-1, tensor=2))
  assert dict(mesh.shape) == {"data": 2, "fsdp": 2, "tensor": 2, "expert": 1}
  assert dict(make_mesh(MeshConfig(data=8, fsdp=1)).shape)["data"] == 8
  with pytest.raises(ValueError, match="needs 16 devices"):
    make_mesh(MeshConfig(data=4, fsdp=4))
  with pytest.raises(ValueError, match="at most one"):
    MeshConfig(data=-1, fsdp=-1)
  with pytest.raises(ValueError, match="'tensor'"):
    MeshConfig(tensor=0)
  with pytest.raises(ValueError, match="not divisible"):
    make_mesh(MeshConfig(data=3, fsdp=-1))


def test_logical_rules():
  mesh = make_mesh(MeshConfig(data=2, fsdp=2, tensor=2))
  assert logical_to_spec(("batch", "seq"), mesh) == P(("data", "fsdp"), None)
  assert logical_to_spec(("embed", "mlp"), mesh, (64, 128)) == P("fsdp", "tensor")
  # 3 heads are not divisible by tensor=2: replicated.
  assert logical_to_spec(("embed", "heads", "head_dim"), mesh, (64, 3, 16)) == P("fsdp", None, None)
  # batch of 2 takes only the data axis.
  assert logical_to_spec(("batch", "seq"), mesh, (2, 5)) == P("data", None)
  # one mesh axis at most once per array
  assert logical_to_spec(("vocab", "mlp"), mesh, (8, 8)) == P("tensor", None)
  with pytest.raises(ValueError, match="no rule"):
    logical_to_spec(("nonsense",), mesh)
  with pytest.raises(ValueError, match="do not match"):
    logical_to_spec(("embed",), mesh, (4, 4))


def test_single_process_does_not_initialize():
  assert maybe_initialize_distributed(env={}) is False
  with pytest.raises(ValueError, match="together"):
    maybe_initialize_distributed(coordinator="localhost:1234", env={})
  with pytest.raises(ValueError, match="process_id"):
    maybe_initialize_distributed("localhost:1234", 2, 5, env={})
  with pytest.raises(ValueError, match="RLJAX_NUM_PROCESSES"):
    maybe_initialize_distributed(env={"RLJAX_NUM_PROCESSES": "two"})
