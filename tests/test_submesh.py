"""Rollout and training sub-meshes (``rl.async_rollout_devices``) and the measured weight transfer between them.

In-process tests use the session's 8 fake CPU devices (conftest). The 2-process test launches this file twice as
a script (``--worker``): ``jax.distributed`` with 2 CPU devices per process, the mesh split at the process
boundary (process 0 rolls out, process 1 trains), the weights sent between them by ``jax.device_put``.
"""
import os
import sys
import threading
import time

import numpy as np
import pytest
from _workers import launch_workers, wait_workers

B_ROWS = 16  # tiny_config: 4 prompts x 4 samples


def _tiny_params(seed=0):
  from flax import nnx  # pylint: disable=import-outside-toplevel
  from rljax.models import ModelConfig, Transformer  # pylint: disable=import-outside-toplevel
  model = Transformer(ModelConfig.tiny(), rngs=nnx.Rngs(seed))
  return nnx.split(model, nnx.Param, ...)


def _devices(tree):
  import jax  # pylint: disable=import-outside-toplevel
  return set().union(*(x.sharding.device_set for x in jax.tree_util.tree_leaves(tree)))


# ----------------------------------------------------------------------------- split_mesh / transfer (one process)

def test_split_mesh_gives_disjoint_sub_meshes_with_whole_inner_axes():
  import jax  # pylint: disable=import-outside-toplevel
  from rljax import parallel as par  # pylint: disable=import-outside-toplevel
  mesh = par.make_mesh(par.MeshConfig(fsdp=-1))
  assert mesh.devices.size == 8
  for r in range(1, 8):
    rollout, train = par.split_mesh(mesh, r)
    assert list(rollout.devices.flat) == jax.devices()[:r] and list(train.devices.flat) == jax.devices()[r:]
    assert dict(rollout.shape) == {"data": 1, "fsdp": r, "tensor": 1, "expert": 1}
    assert dict(train.shape) == {"data": 1, "fsdp": 8 - r, "tensor": 1, "expert": 1}
  # data 2 x fsdp 2 x tensor 2: the cut runs along data (whole fsdp x tensor slices)
  mesh = par.make_mesh(par.MeshConfig(data=2, fsdp=2, tensor=2))
  rollout, train = par.split_mesh(mesh, 4)
  assert dict(rollout.shape) == dict(train.shape) == {"data": 1, "fsdp": 2, "tensor": 2, "expert": 1}
  np.testing.assert_array_equal(rollout.devices, mesh.devices[:1])
  np.testing.assert_array_equal(train.devices, mesh.devices[1:])
  # fsdp 4 x tensor 2: rollout device counts are whole tensor pairs
  assert par.split_sizes(par.make_mesh(par.MeshConfig(fsdp=4, tensor=2)).shape) == ("fsdp", [2, 4, 6])
  for bad in (0, 8, 3, -4, True, 4.0):
    with pytest.raises(ValueError, match=r"rl.async_rollout_devices=.*must be one of \[4\].*'data'"):
      par.split_mesh(mesh, bad)
  with pytest.raises(ValueError, match="rl.async_rollout_devices.*1 device"):
    par.split_mesh(par.make_mesh(par.MeshConfig(fsdp=1), jax.devices()[:1]), 1)


def test_transfer_reshards_onto_the_other_sub_mesh_and_counts_the_bytes():
  import jax  # pylint: disable=import-outside-toplevel
  from rljax import parallel as par  # pylint: disable=import-outside-toplevel
  _, params, rest = _tiny_params()
  rollout, train = par.split_mesh(par.make_mesh(par.MeshConfig(fsdp=-1)), 4)
  on_train = par.shard_state(params, train)
  assert _devices(on_train) == set(train.devices.flat)
  moved, seconds, nbytes = par.transfer(on_train, par.state_shardings(params, rollout))
  assert _devices(moved) == set(rollout.devices.flat) and seconds > 0
  host = [np.asarray(x) for x in jax.tree_util.tree_leaves(params)]
  assert nbytes == sum(h.nbytes for h in host) > 0
  for a, b, h in zip(jax.tree_util.tree_leaves(moved), jax.tree_util.tree_leaves(on_train), host):
    assert a.sharding.spec == b.sharding.spec  # the same layout, on the other devices
    np.testing.assert_array_equal(np.asarray(a), h)
  # fsdp-sharded on the training side: the rollout side holds its own shards (not all on one device)
  assert any(len(x.sharding.device_set) == 4 and not x.sharding.is_fully_replicated
             for x in jax.tree_util.tree_leaves(moved))
  copy, _, nbytes_same = par.transfer(on_train)  # shared devices: a copy where it was
  assert _devices(copy) == set(train.devices.flat) and nbytes_same == nbytes
  del rest


# ----------------------------------------------------------------------------- the runner in train()

def _train(out, extra, steps=3):
  from _rewards import dense_reward  # pylint: disable=import-outside-toplevel
  from rljax.train import apply_overrides, read_jsonl, tiny_config, train  # pylint: disable=import-outside-toplevel
  cfg = apply_overrides(tiny_config(str(out)), [f"rl.steps={steps}", "checkpoint.every=100", "sft.steps=1",
                                                "eval.num_problems=8", "eval.batch_size=8"] + extra)
  train(cfg, reward_fn=dense_reward)
  return [r for r in read_jsonl(os.path.join(cfg.out_dir, "metrics.jsonl")) if r["stage"] == "rl" and "loss" in r]


def test_config_errors_name_the_field(tmp_path):
  from _rewards import dense_reward  # pylint: disable=import-outside-toplevel
  from rljax.train import apply_overrides, tiny_config, train  # pylint: disable=import-outside-toplevel
  cfg = tiny_config(str(tmp_path))
  with pytest.raises(ValueError, match="rl.async_rollout_devices"):
    apply_overrides(cfg, ["rl.async_rollout_devices=-1"])
  with pytest.raises(ValueError, match="rl.async_rollout_devices=4.*rl.async_staleness"):
    apply_overrides(cfg, ["rl.async_rollout_devices=4"])
  for extra, match in [(["rl.async_rollout_devices=1"], r"rl.async_rollout_devices.*1 device"),
                       (["mesh.fsdp=8", "rl.async_rollout_devices=8"], r"async_rollout_devices=8: must be one of \[1,"),
                       (["mesh.fsdp=8", "rl.async_rollout_devices=3"],  # fsdp 3 does not divide hidden 32
                        r"rl.async_rollout_devices=3 gives the rollout sub-mesh .*hidden_size=32")]:
    with pytest.raises(ValueError, match=match):
      train(apply_overrides(cfg, ["rl.async_staleness=0"] + extra), reward_fn=dense_reward)
    assert not os.path.exists(os.path.join(cfg.out_dir, "config.json"))  # refused before anything is written


@pytest.mark.slow  # ~2.5 min on the loaded 2-core machine (two runs on 4 and 8 fake devices); the placement and
# the metrics are guarded in the default suite by test_split_with_staleness_and_chunked_sampler
def test_split_eta_zero_equals_the_synchronous_loop_on_the_training_sub_mesh(tmp_path, monkeypatch):
  """8 devices split 4 / 4 with eta = 0: the sampler's outputs live on devices 0-3 only and the train state on
  4-7 only; the run equals the synchronous loop on a 4-device mesh (the same programs on other devices) bit for
  bit, and reports a transfer of the parameters' bytes per step."""
  import jax  # pylint: disable=import-outside-toplevel
  import rljax.sampling  # pylint: disable=import-outside-toplevel
  from rljax.train import load_run  # pylint: disable=import-outside-toplevel
  from rljax.train._rl import RLLoop  # pylint: disable=import-outside-toplevel
  sync = _train(tmp_path / "sync", ["mesh.fsdp=4"])

  sampled, trained = [], []
  generate, step = rljax.sampling.generate, RLLoop.step

  def recording_generate(*args, **kwargs):
    out = generate(*args, **kwargs)
    sampled.append((threading.current_thread().name,
                    set().union(out.tokens.sharding.device_set, out.logp_behavior.sharding.device_set)))
    return out

  def recording_step(self, s, collected):
    out = step(self, s, collected)
    trained.append(_devices((self.state.params, self.state.opt_state)))
    return out

  monkeypatch.setattr(rljax.sampling, "generate", recording_generate)
  monkeypatch.setattr(RLLoop, "step", recording_step)
  split = _train(tmp_path / "split", ["mesh.fsdp=8", "rl.async_staleness=0", "rl.async_rollout_devices=4"])
  monkeypatch.undo()
  rollout_devices, train_devices = set(jax.devices()[:4]), set(jax.devices()[4:])
  assert len(trained) == 3 and all(d == train_devices for d in trained)
  # the RL rollouts (3 steps, the producer thread) ran on the rollout devices, nothing else did (the held-out
  # evaluations run on the SFT mesh, then on the training sub-mesh)
  rollouts = [d for name, d in sampled if name == "rljax-async-producer"]
  assert len(rollouts) == 3 and all(d == rollout_devices for d in rollouts)
  assert all(d != rollout_devices for name, d in sampled if name != "rljax-async-producer")

  state = load_run(str(tmp_path / "split"), stage="rl")[2]
  nbytes = sum(np.asarray(x).nbytes for x in jax.tree_util.tree_leaves((state.params, state.model_state)))
  assert len(sync) == len(split) == 3
  for a, b in zip(sync, split):
    assert b["async/weight_transfer_bytes"] == nbytes and b["async/weight_transfer_s"] > 0
    for key, value in a.items():
      if not key.startswith("time/") and key not in ("wall_s", "time"):
        assert b[key] == value, key
  ref = load_run(str(tmp_path / "sync"), stage="rl")[2]
  for x, y in zip(jax.tree_util.tree_leaves(ref.params), jax.tree_util.tree_leaves(state.params)):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.long
def test_split_with_staleness_and_chunked_sampler(tmp_path, monkeypatch):
  """A 4-device mesh split 2 / 2, eta = 2, 2-token chunks of 4-token responses (the interruptible sampler):
  every chunk runs on the rollout devices, the train state stays on the training devices, no trained row is
  older than eta, and every step reports the same transfer size."""
  import jax  # pylint: disable=import-outside-toplevel
  import rljax.train._async as async_mod  # pylint: disable=import-outside-toplevel
  from rljax.train._rl import RLLoop  # pylint: disable=import-outside-toplevel
  sampled, trained = [], []
  step = RLLoop.step

  def recording(fn):  # the chunks' prefills (generate, with its cache) and continuations (resume)
    def wrapped(*args, **kwargs):
      out = fn(*args, **kwargs)
      sampled.append((out[0] if isinstance(out, tuple) else out).tokens.sharding.device_set)
      return out
    return wrapped

  def recording_step(self, s, collected):
    out = step(self, s, collected)
    trained.append(_devices(self.state.params))
    return out

  monkeypatch.setattr(async_mod, "generate", recording(async_mod.generate))
  monkeypatch.setattr(async_mod, "resume", recording(async_mod.resume))
  monkeypatch.setattr(RLLoop, "step", recording_step)
  rows = _train(tmp_path / "x", ["mesh.fsdp=4", "rl.async_staleness=2", "rl.async_rollout_devices=2",
                                 "rl.async_chunk_tokens=2"], steps=2)  # the mesh: devices 0-3
  monkeypatch.undo()
  assert len(sampled) >= 4 and all(d == set(jax.devices()[:2]) for d in sampled)  # 2 chunks per batch at least
  assert len(trained) == 2 and all(d == set(jax.devices()[2:4]) for d in trained)
  for s, r in enumerate(rows):
    assert r["async/dropped"] == 0 and r["async/staleness_max"] <= min(s, 2) and np.isfinite(r["loss"])
    assert r["async/weight_transfer_bytes"] == rows[0]["async/weight_transfer_bytes"] > 0


# ----------------------------------------------------------------------------- two processes (jax.distributed)

def _worker(process_id: int, port: int, out: str) -> None:
  """Process 0 holds the rollout sub-mesh, process 1 the training sub-mesh; one update on the training side,
  the weights sent across by ``rljax.parallel.transfer``, a forward on the rollout side."""
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  from flax import nnx  # pylint: disable=import-outside-toplevel
  from rljax import parallel as par  # pylint: disable=import-outside-toplevel
  # the CPU backend has no cross-host transfers of its own: JAX's DCN transfer server, before the backend starts
  jax.config.update("jax_cross_host_transfer_socket_address", os.environ["TRANSFER_ADDRESS"])
  assert par.maybe_initialize_distributed(f"localhost:{port}", 2, process_id, env={})
  assert jax.process_count() == 2 and len(jax.devices()) == 4
  graphdef, params, rest = _tiny_params()
  mesh = par.make_mesh(par.MeshConfig(fsdp=-1))
  rollout, train = par.split_mesh(mesh, 2)
  assert {d.process_index for d in rollout.devices.flat} == {0} and {d.process_index for d in train.devices.flat} == {1}
  params_t = par.place_global(params, par.state_shardings(params, train))
  update = jax.jit(lambda p: jax.tree_util.tree_map(lambda x: x * 0.5 + 1.0, p))  # runs where its input lives
  params_t = update(params_t)
  moved, seconds, nbytes = par.transfer(params_t, par.state_shardings(params, rollout))
  assert _devices(moved) == set(rollout.devices.flat) and seconds > 0
  tokens = jax.device_put(_TOKENS, jax.sharding.NamedSharding(rollout, jax.sharding.PartitionSpec()))
  logits_sum = jax.jit(lambda p, t: nnx.merge(graphdef, p, rest)(t).hidden.astype(jnp.float32).sum())(moved, tokens)
  saved = {"nbytes": np.asarray(nbytes),
           "logits_sum": np.asarray([np.asarray(s.data) for s in logits_sum.addressable_shards])}
  for path, x in jax.tree_util.tree_leaves_with_path(moved):
    for i, s in enumerate(x.addressable_shards):  # this process's shards, and where they sit in the array
      saved[f"{jax.tree_util.keystr(path)}|{i}|data"] = np.asarray(s.data)
      bounds = [sl.indices(n)[:2] for sl, n in zip(s.index, x.shape)]
      saved[f"{jax.tree_util.keystr(path)}|{i}|index"] = np.asarray(bounds)
  np.savez(out, **saved)
  print(f"process {process_id}: transfer {seconds:.3f} s, {nbytes} bytes", flush=True)


_TOKENS = (np.arange(12, dtype=np.int32).reshape(2, 6) * 7) % 50


@pytest.mark.multiprocess
def test_two_processes_rollout_on_one_train_on_the_other(tmp_path):
  """2 processes x 2 CPU devices: the weights go from process 1's devices (training sub-mesh) to process 0's
  (rollout sub-mesh) through JAX's cross-host transfer (``jax_cross_host_transfer_socket_address``: the CPU
  backend has none of its own); process 0 then holds exactly the updated weights, in the same layout."""
  import jax  # pylint: disable=import-outside-toplevel
  from flax import nnx  # pylint: disable=import-outside-toplevel
  outs = [str(tmp_path / f"p{i}.npz") for i in range(2)]
  procs = launch_workers(__file__, lambda i, port: ["--worker", i, port, outs[i]], transfer=True)
  wait_workers(procs, time.time() + 300)
  got = [dict(np.load(o)) for o in outs]
  graphdef, params, rest = _tiny_params()
  updated = jax.tree_util.tree_map(lambda x: np.asarray(x) * 0.5 + 1.0, params)
  expect = {jax.tree_util.keystr(k): v for k, v in jax.tree_util.tree_leaves_with_path(updated)}
  assert int(got[0]["nbytes"]) == int(got[1]["nbytes"]) == sum(v.nbytes for v in expect.values())
  assert not [k for k in got[1] if k.endswith("|data")]  # process 1 holds no rollout shard
  seen = set()
  for k in (k for k in got[0] if k.endswith("|data")):
    name, i, _ = k.split("|")
    index = tuple(slice(lo, hi) for lo, hi in got[0][f"{name}|{i}|index"])
    np.testing.assert_array_equal(got[0][k], expect[name][index], err_msg=k)
    seen.add(name)
  assert seen == set(expect)
  # the rollout-side forward ran on process 0's two devices only, on the updated weights
  ref = float(nnx.merge(graphdef, updated, rest)(_TOKENS).hidden.astype(np.float32).sum())
  assert got[1]["logits_sum"].size == 0 and got[0]["logits_sum"].size == 2
  np.testing.assert_allclose(got[0]["logits_sum"], ref, rtol=1e-5)


if __name__ == "__main__" and len(sys.argv) == 5 and sys.argv[1] == "--worker":
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  _worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
