"""Two local processes with ``jax.distributed.initialize`` train the tiny model like one process does.

The test launches this file twice as a script (``--worker``), each process
with one CPU device (``JAX_PLATFORMS=cpu``; CPU collectives over gloo), joined
through a coordinator on a free localhost port. Both run 2 train steps on a
``(fsdp 2)`` mesh spanning the two processes: parameters and Adam moments
are split between them, each process feeds only its own half of the global
batch (``jax.make_array_from_process_local_data``). Each worker gathers the
parameters (``process_allgather``) and writes them to ``.npz``; the test checks
both files are identical and equal to the single-process run.

``test_two_process_run_matches_one_process`` (slow) runs the whole ``train()``
the way ``rljax train`` does on each host (``maybe_initialize_distributed``
from ``RLJAX_*`` variables): 2 processes x 2 CPU devices, mesh ``fsdp 2 x
tensor 2``, 2 SFT + 2 RL steps with evaluation and checkpoints, then
``load_run`` on both processes and on one.
"""
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from _workers import launch_workers, wait_workers
from _rewards import dense_reward

STEPS = 2
B, T = 8, 12
TIMEOUT_S = 600  # generous: ~30 s unloaded, but compiles take minutes on a loaded 2-core machine


def _problem():
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  import optax  # pylint: disable=import-outside-toplevel
  from flax import nnx  # pylint: disable=import-outside-toplevel
  from rljax.models import ModelConfig, Transformer  # pylint: disable=import-outside-toplevel
  from rljax.train import init_train_state  # pylint: disable=import-outside-toplevel
  cfg = ModelConfig.tiny()
  opt = optax.adam(1e-3)
  graphdef, state = init_train_state(Transformer(cfg, rngs=nnx.Rngs(0)), opt)
  rng = np.random.default_rng(0)
  batches = []
  for _ in range(STEPS):
    tokens = rng.integers(0, cfg.vocab_size, (B, T), dtype=np.int32)
    lengths = rng.integers(1, T, size=B)
    mask = np.arange(T)[None, :] >= (T - lengths)[:, None]
    batches.append(dict(tokens=tokens, loss_mask=mask, advantages=np.zeros((B, T), np.float32),
                        group_id=np.arange(B, dtype=np.int32)))
  return graphdef, state, batches, opt


def _flat(tree):
  import jax  # pylint: disable=import-outside-toplevel
  return {jax.tree_util.keystr(k): np.asarray(v) for k, v in jax.tree_util.tree_leaves_with_path(tree)}


def _worker(process_id: int, port: int, out: str) -> None:
  import jax  # pylint: disable=import-outside-toplevel
  from jax.experimental import multihost_utils  # pylint: disable=import-outside-toplevel
  from rljax.parallel import (MeshConfig, make_mesh, maybe_initialize_distributed,  # pylint: disable=import-outside-toplevel
                              shard_train_step, train_state_shardings, fsdp_loss_fn)
  from rljax.train import make_train_step, nll_loss  # pylint: disable=import-outside-toplevel
  from rljax.types import TrainBatch  # pylint: disable=import-outside-toplevel

  say = lambda msg: print(f"process {process_id} [{time.time() - t0:.0f} s]: {msg}", flush=True)
  t0 = time.time()
  assert maybe_initialize_distributed(f"localhost:{port}", 2, process_id, env={})
  say("jax.distributed initialized")
  assert jax.process_count() == 2 and len(jax.devices()) == 2 and len(jax.local_devices()) == 1
  graphdef, state, batches, opt = _problem()
  mesh = make_mesh(MeshConfig(data=1, fsdp=2))
  shardings = train_state_shardings(state, mesh)

  def to_global(value, sharding):  # every process holds the same host value; each places its shards
    host = np.asarray(value)
    return jax.make_array_from_callback(host.shape, sharding, lambda idx: host[idx])

  state = jax.tree.map(lambda sh, sub: jax.tree.map(lambda x: to_global(x, sh), sub), shardings, state,
                       is_leaf=lambda x: isinstance(x, jax.sharding.NamedSharding))
  step = shard_train_step(make_train_step(graphdef, fsdp_loss_fn(nll_loss(), mesh), opt, jit=False), shardings, mesh)
  batch_sh = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(("data", "fsdp")))
  for host_batch in batches:
    fields = {}
    for name, x in host_batch.items():
      # this process's rows of the global batch: the union of its devices' index ranges
      rows = [idx[0] for idx in batch_sh.addressable_devices_indices_map(x.shape).values()]
      lo, hi = min(r.start or 0 for r in rows), max(x.shape[0] if r.stop is None else r.stop for r in rows)
      fields[name] = jax.make_array_from_process_local_data(batch_sh, x[lo:hi], x.shape)
    state, metrics = step(state, TrainBatch(**fields))
    say(f"step done, loss {float(np.asarray(metrics['loss'].addressable_data(0))):.6f}")
  params = multihost_utils.process_allgather(state.params, tiled=True)
  np.savez(out, loss=np.asarray(metrics["loss"].addressable_data(0)), **_flat(params))  # loss: replicated
  say("parameters written")


@pytest.mark.multiprocess
def test_two_processes_match_single_process(tmp_path):
  import jax  # pylint: disable=import-outside-toplevel
  from rljax.train import make_train_step, nll_loss  # pylint: disable=import-outside-toplevel
  from rljax.types import TrainBatch  # pylint: disable=import-outside-toplevel

  outs = [tmp_path / f"params_{i}.npz" for i in range(2)]
  procs = launch_workers(__file__, lambda i, port: ["--worker", i, port, outs[i]], devices_per_process=1)
  wait_workers(procs, time.time() + TIMEOUT_S)

  got = [dict(np.load(o)) for o in outs]
  assert got[0].keys() == got[1].keys()
  for k in got[0]:  # both processes hold the same (all-gathered) parameters, bit for bit
    np.testing.assert_array_equal(got[0][k], got[1][k], err_msg=k)

  graphdef, state, batches, opt = _problem()
  step = make_train_step(graphdef, nll_loss(), opt, donate=False)
  for b in batches:
    state, metrics = step(state, TrainBatch(**{k: jax.numpy.asarray(v) for k, v in b.items()}))
  ref = _flat(state.params)
  assert set(ref) == set(got[0]) - {"loss"} and len(ref) > 10
  np.testing.assert_allclose(got[0]["loss"].ravel()[0], metrics["loss"], rtol=1e-5, atol=1e-6)
  for k, v in ref.items():
    # Adam makes the update lr * g / (|g| + eps): 2 steps of float32 reduction-order noise in g move
    # ill-conditioned entries (|g| ~ eps) by up to 2 lr; all others agree to float32 rounding
    diff = np.abs(got[0][k] - v)
    assert np.mean(diff <= 1e-6 + 1e-5 * np.abs(v)) > 0.999, (k, diff.max())
    assert diff.max() <= 2 * 1e-3 * (1 + 1e-5), (k, diff.max())


# ----------------------------------------------------------------------------- the whole run (train / load_run)

RUN_OVERRIDES = ["sft.steps=2", "rl.steps=2", "eval.num_problems=4", "eval.batch_size=4", "eval.num_samples=1",
                 "eval.pass_k=1", "checkpoint.every=2"]
MESH = ["mesh.fsdp=2", "mesh.tensor=2"]  # 2 processes x 2 CPU devices: fsdp across processes, tensor within


def _run_config(out_dir, extra=()):
  from rljax.train import apply_overrides, tiny_config  # pylint: disable=import-outside-toplevel
  return apply_overrides(tiny_config(out_dir), RUN_OVERRIDES + list(extra))


def _train_worker(process_id: int, port: int, out_dir: str, npz: str) -> None:
  """What ``rljax train`` does on each host: join ``jax.distributed`` from RLJAX_* variables, then ``train``."""
  import jax  # pylint: disable=import-outside-toplevel
  from jax.experimental import multihost_utils  # pylint: disable=import-outside-toplevel
  from rljax.parallel import maybe_initialize_distributed  # pylint: disable=import-outside-toplevel
  from rljax.train import load_run, train  # pylint: disable=import-outside-toplevel

  t0 = time.time()
  say = lambda msg: print(f"process {process_id} [{time.time() - t0:.0f} s]: {msg}", flush=True)
  env = {"RLJAX_COORDINATOR": f"localhost:{port}", "RLJAX_NUM_PROCESSES": "2", "RLJAX_PROCESS_ID": str(process_id)}
  assert maybe_initialize_distributed(env=env)
  assert jax.process_count() == 2 and len(jax.devices()) == 4 and len(jax.local_devices()) == 2
  summary = train(_run_config(out_dir, MESH), reward_fn=dense_reward)
  say("trained")
  params = multihost_utils.process_allgather(summary["params"], tiled=True)
  _, _, restored, info = load_run(out_dir)  # every process restores (its shards) from the shared directory
  assert info["stage"] == "rl" and info["step"] == 2, info
  back = multihost_utils.process_allgather(restored.params, tiled=True)
  for (k, a), b in zip(_flat(params).items(), _flat(back).values()):
    np.testing.assert_array_equal(a, b, err_msg=f"restored {k}")
  np.savez(npz, **_flat(params))
  say("parameters written")


@pytest.mark.multiprocess
@pytest.mark.slow  # ~5 min on the loaded 2-core machine (3 runs of train, compiles dominate)
def test_two_process_run_matches_one_process(tmp_path):
  """``train`` on 2 processes x 2 devices (mesh fsdp 2 x tensor 2 over both): each process feeds its own
  rows, both end with the parameters of the 1-device run; metrics are written once (process 0); the
  checkpoints are written once and restore, on 2 processes and on 1."""
  from rljax.train import load_run, read_jsonl, train  # pylint: disable=import-outside-toplevel
  out_dir = str(tmp_path / "run2")
  npz = [str(tmp_path / f"params_{i}.npz") for i in range(2)]
  procs = launch_workers(__file__, lambda i, port: ["--train-worker", i, port, out_dir, npz[i]])
  deadline = time.time() + TIMEOUT_S
  # meanwhile, the single-process reference on one device (the default mesh)
  ref_summary = train(_run_config(str(tmp_path / "run1")), reward_fn=dense_reward)
  ref = {k: np.asarray(v) for k, v in _flat(ref_summary["params"]).items()}
  wait_workers(procs, deadline)

  got = [dict(np.load(f)) for f in npz]
  assert got[0].keys() == got[1].keys() == ref.keys()
  for k in ref:
    np.testing.assert_array_equal(got[0][k], got[1][k], err_msg=k)  # both processes: the same parameters
    np.testing.assert_allclose(got[0][k], ref[k], rtol=1e-5, atol=1e-6, err_msg=k)  # = the 1-process run

  # host-side files once: every metrics row exactly once, as in the 1-process run
  rows = read_jsonl(os.path.join(out_dir, "metrics.jsonl"))
  ref_rows = read_jsonl(os.path.join(str(tmp_path / "run1"), "metrics.jsonl"))
  assert [(r["stage"], r["step"]) for r in rows] == [(r["stage"], r["step"]) for r in ref_rows]
  rl = [r for r in rows if r["stage"] == "rl" and "loss" in r]
  ref_rl = [r for r in ref_rows if r["stage"] == "rl" and "loss" in r]
  # global values (summed over the processes' rows: float64 sums in another order)
  assert [r["rollout/reward_mean"] for r in rl] == pytest.approx([r["rollout/reward_mean"] for r in ref_rl], rel=1e-6)
  assert all(r["train/grad_norm"] > 0 for r in ref_rl)
  # checkpoints: one step directory per save, no leftover temporaries, meta written once
  for stage in ("sft", "rl"):
    d = os.path.join(out_dir, "checkpoints", stage)
    assert sorted(os.listdir(d)) == ["2"], (stage, os.listdir(d))
    assert sorted(os.listdir(os.path.join(d, "2"))) == sorted(os.listdir(os.path.join(tmp_path, "run1", "checkpoints",
                                                                                      stage, "2")))
  # the 2-process checkpoint restores in one process (onto 4 of its 8 devices: the run's mesh)
  _, _, state, info = load_run(out_dir)
  assert info["meta"]["stage"] == "rl" and info["meta"]["done"]
  for k, v in _flat(state.params).items():
    np.testing.assert_array_equal(np.asarray(v), got[0][k], err_msg=k)


if __name__ == "__main__" and len(sys.argv) == 5 and sys.argv[1] == "--worker":
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  _worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])

if __name__ == "__main__" and len(sys.argv) == 6 and sys.argv[1] == "--train-worker":
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  _train_worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])


def test_importing_rljax_does_not_start_the_xla_backend():
  """``jax.distributed.initialize`` must come before the backend starts: no rljax module may build a JAX array
  (a ``jnp`` constant) at import time. Checked in a fresh interpreter."""
  code = ("import rljax, rljax.parallel, rljax.train, rljax.sampling, rljax.envs, rljax.objectives, rljax.recipes, "
          "rljax.arena, rljax.replay, rljax.hints, rljax.models\n"
          "from jax._src import xla_bridge as xb\n"
          "assert not xb._backends, 'an import started the XLA backend'\n")
  proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
