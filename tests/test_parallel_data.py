"""Process-local data helpers (``rljax.parallel._data``) on 8 fake CPU devices, one process.

The multi-process behaviour is exercised end to end by ``tests/test_multiprocess.py``; here: which rows a
process feeds, the grain loader of a process's rows against ``prompt_loader``, global batches, host copies.
"""
import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from rljax.data import prompt_loader
from rljax.parallel import (MeshConfig, all_process_rows, global_batch, host_rows, make_mesh, process_any,
                            process_batches, process_rows, process_sum, row_sharding, to_host)

RECORDS = [{"prompt": f"{i}+{i}=", "answer": str(2 * i)} for i in range(23)]


def test_row_sharding_and_rows():
  mesh = make_mesh(MeshConfig(data=2, fsdp=2, tensor=2))
  sh = row_sharding(mesh, 8)
  assert sh.spec == P(("data", "fsdp"))
  assert all_process_rows(sh, 8) == {0: (0, 8)} and process_rows(sh, 8) == (0, 8)
  with pytest.raises(ValueError, match=r"6 rows is not divisible by the batch mesh axes \{'data': 2, 'fsdp': 2\}"):
    row_sharding(mesh, 6)
  assert row_sharding(make_mesh(MeshConfig(data=1, fsdp=1, tensor=8)), 3).spec == P(None)  # no batch axes: whole


def test_process_batches_equal_prompt_loader_and_slice_it():
  n = 4
  full = prompt_loader(RECORDS, batch_size=n, seed=5)
  whole = process_batches(RECORDS, global_batch_size=n, rows=(0, n), seed=5)
  parts = [process_batches(RECORDS, global_batch_size=n, rows=r, seed=5) for r in ((0, 1), (1, 3), (3, 4))]
  for _ in range(7):  # past the first epoch (23 records): the reshuffled epoch agrees too
    ref = [p.prompt for p in next(full)]
    assert [p.prompt for p in next(whole)] == ref
    assert sum(([p.prompt for p in next(it)] for it in parts), []) == ref  # any split: the same global batch
  assert whole.get_state() == full.get_state()
  state = whole.get_state()
  nxt = [p.prompt for p in next(whole)]
  again = process_batches(RECORDS, global_batch_size=n, rows=(0, n), seed=5)
  again.set_state(state)
  assert [p.prompt for p in next(again)] == nxt
  with pytest.raises(ValueError, match="rows must satisfy"):
    process_batches(RECORDS, global_batch_size=n, rows=(2, 6), seed=5)
  with pytest.raises(ValueError, match="exceeds the 23 records"):
    process_batches(RECORDS, global_batch_size=24, rows=(0, 24), seed=5)


def test_global_batch_and_host_copies():
  mesh = make_mesh(MeshConfig(data=2, fsdp=2, tensor=2))
  sh = row_sharding(mesh, 8)
  x = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)
  g = global_batch({"x": x, "m": x > 4}, sh, 8)
  assert g["x"].sharding == sh and g["m"].dtype == bool
  np.testing.assert_array_equal(to_host(g)["x"], x)
  np.testing.assert_array_equal(host_rows(g, 2, 6)["x"], x[2:6])
  # rows of an array split on a later dimension too
  y = jax.device_put(x[:, :2], NamedSharding(mesh, P("data", "tensor")))
  np.testing.assert_array_equal(host_rows({"y": y}, 3, 7)["y"], x[3:7, :2])
  assert process_sum({"a": 1.5, "b": 2}) == {"a": 1.5, "b": 2} and process_any(True) and not process_any(False)


def test_run_config_mesh_overrides():
  from rljax.train import apply_overrides, config_to_dict, tiny_config  # pylint: disable=import-outside-toplevel
  from rljax.train._config import config_from_dict  # pylint: disable=import-outside-toplevel
  cfg = tiny_config()
  assert cfg.mesh == MeshConfig(data=1, fsdp=1, tensor=1, expert=1)
  c = apply_overrides(cfg, ["mesh.fsdp=2", "mesh.tensor=4"])
  assert c.mesh == MeshConfig(data=1, fsdp=2, tensor=4, expert=1)
  assert config_from_dict(config_to_dict(c)) == c
  with pytest.raises(ValueError, match="mesh axis 'fsdp' must be >= 1 or -1"):
    apply_overrides(cfg, ["mesh.fsdp=0"])
  with pytest.raises(ValueError, match="invalid override mesh.tensor='x'"):
    apply_overrides(cfg, ["mesh.tensor=x"])
  with pytest.raises(ValueError, match="at most one mesh axis may be -1"):
    apply_overrides(cfg, ["mesh.data=-1", "mesh.fsdp=-1"])
  with pytest.raises(ValueError, match="unknown config field 'mesh.pipeline'"):
    apply_overrides(cfg, ["mesh.pipeline=2"])
  # deprecated alias: num_devices=n is mesh.data=n (0: all devices)
  assert apply_overrides(cfg, ["num_devices=0"]).mesh == MeshConfig(data=-1, fsdp=1, tensor=1, expert=1)
  assert apply_overrides(cfg, ["num_devices=2"]).num_devices is None
  with pytest.raises(ValueError, match="RunConfig.num_devices"):
    cfg.replace(mesh=MeshConfig(fsdp=2), num_devices=2)


def test_run_mesh_uses_the_first_devices():
  from rljax.train import tiny_config  # pylint: disable=import-outside-toplevel
  from rljax.train._experiment import run_mesh  # pylint: disable=import-outside-toplevel
  one = run_mesh(tiny_config())
  assert one.devices.size == 1 and one.devices.flat[0] == jax.devices()[0]
  four = run_mesh(tiny_config().replace(mesh=MeshConfig(data=1, fsdp=2, tensor=2)))
  assert dict(four.shape) == {"data": 1, "fsdp": 2, "tensor": 2, "expert": 1}
  assert set(four.devices.flat) == set(jax.devices()[:4])
  assert run_mesh(tiny_config().replace(mesh=MeshConfig(fsdp=-1))).devices.size == 8
  with pytest.raises(ValueError, match="needs 16 devices"):
    run_mesh(tiny_config().replace(mesh=MeshConfig(data=2, fsdp=8)))
