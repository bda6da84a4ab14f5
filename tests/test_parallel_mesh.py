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


def test_check_mesh_divides_names_the_axis_the_dimension_and_valid_sizes():
  from rljax.models import ModelConfig
  from rljax.parallel import check_mesh_divides
  dense = ModelConfig.tiny(num_heads=4, num_kv_heads=2, vocab_size=120, intermediate_size=96)
  check_mesh_divides({"data": 2, "fsdp": 4, "tensor": 2, "expert": 1}, dense)  # all divide
  check_mesh_divides({"fsdp": 1, "tensor": 1}, dense)
  cases = [({"tensor": 4}, r"tensor=4 does not divide the model's num_kv_heads=2 .*valid tensor sizes: 1, 2$"),
           ({"tensor": 8}, r"tensor=8 does not divide the model's num_heads=4 .*valid tensor sizes: 1, 2, 4$"),
           ({"fsdp": 3}, r"fsdp=3 does not divide the model's hidden_size=64 \(ModelConfig\.hidden_size\)"),
           ({"tensor": 2}, None)]
  for shape, msg in cases:
    if msg is None:
      check_mesh_divides(shape, dense)
      continue
    with pytest.raises(ValueError, match=msg):
      check_mesh_divides(shape, dense)
  with pytest.raises(ValueError, match=r"tensor=2 does not divide the model's vocab_size=121 .*valid tensor sizes: 1, 11"):
    check_mesh_divides({"tensor": 2}, dense.replace(vocab_size=121))
  with pytest.raises(ValueError, match=r"tensor=2 does not divide the model's intermediate_size=97"):
    check_mesh_divides({"tensor": 2}, dense.replace(intermediate_size=97))
  moe = ModelConfig.tiny_moe(num_experts=6, moe_intermediate_size=30)
  check_mesh_divides({"expert": 3, "tensor": 2}, moe)
  with pytest.raises(ValueError, match=r"expert=4 does not divide the model's num_experts=6 .*valid expert sizes: 1, 2, 3, 6"):
    check_mesh_divides({"expert": 4}, moe)
  with pytest.raises(ValueError, match=r"tensor=2 does not divide the model's moe_intermediate_size=15"):
    check_mesh_divides({"tensor": 2}, moe.replace(moe_intermediate_size=15))


def test_train_refuses_a_mesh_that_does_not_divide_the_model(tmp_path):
  import os
  from rljax.train import tiny_config, train
  from rljax.parallel import MeshConfig as MC
  cfg = tiny_config(str(tmp_path / "run")).replace(mesh=MC(data=1, fsdp=2, tensor=4))  # 2 heads on tensor=4
  with pytest.raises(ValueError, match=r"mesh axis tensor=4 does not divide the model's num_heads=2"):
    train(cfg)
  assert not os.path.exists(tmp_path / "run" / "config.json")  # refused before anything is written
