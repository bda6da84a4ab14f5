"""The asynchronous runner across processes (``rljax.train._multiproc_async``): process 0 rolls out, process 1 trains.

The fast tests check the transfer schedule (the order both sides walk) against a brute-force simulation of the two
sides. The 2-process test launches this file twice as a script (``--worker``), 2 CPU devices per process, the env
vars and ports of ``tests/test_submesh.py`` (``jax_cross_host_transfer_socket_address``: the CPU backend's
cross-host transfers); each worker runs ``train`` with ``eta = 0``, then with ``eta = 1``. The 4-process test
runs the same workers on 4 processes x 1 device: two processes per side.
"""
import json
import os
import sys
import time

import numpy as np
import pytest
from _workers import launch_workers, wait_workers

STEPS = 3
# eta = 0 runs a tiny MoE whose update replays the sampler's routing (sent with the batch), bfloat16 sampler,
# with ReMax (a greedy sampler call per round) and DAPO's dynamic sampling (refill rounds), on parity rewards
MOE = ["model.num_experts=4", "model.moe_layers=[0]", "rl.routing_replay=true", "rl.sampler_dtype=bfloat16",
       "rl.advantage=remax", "rl.filters=zero_variance(refill=True)"]
OVERRIDES = [f"rl.steps={STEPS}", "sft.steps=0", "eval.num_problems=8", "eval.batch_size=8", "eval.num_samples=1",
             "eval.pass_k=1", "checkpoint.enabled=false", "rl.num_microbatches=1"]


# ----------------------------------------------------------------------------- the schedule (one process)

def test_sample_version_and_transfer_schedule_by_hand():
  from rljax.train._multiproc_async import sample_version, transfer_schedule  # pylint: disable=import-outside-toplevel
  assert [sample_version(k, 0) for k in range(4)] == [0, 1, 2, 3]
  assert [sample_version(k, 2) for k in range(5)] == [0, 0, 0, 1, 2]
  w, b = "weights", "batch"
  assert transfer_schedule(3, 0) == ((w, 0), (b, 0), (w, 1), (b, 1), (w, 2), (b, 2), (w, 3))
  assert transfer_schedule(4, 1) == ((w, 0), (b, 0), (b, 1), (w, 1), (b, 2), (w, 2), (b, 3), (w, 4))
  assert transfer_schedule(2, 3) == ((w, 0), (b, 0), (b, 1), (w, 2))


def _simulate(steps: int, eta: int, ops) -> list:
  """Both sides walking ``ops`` in lock step (each transfer needs both sides at it): the rollout side can do
  ``("batch", k)`` once it holds version ``max(0, k - eta)``; the trainer can send ``("weights", v)`` once it
  trained ``v`` steps, each step ``s`` needing batch ``s`` received. Returns the versions each batch was
  sampled with; raises on a deadlock (a transfer one side cannot reach)."""
  held, received, trained, versions = None, set(), 0, []
  for kind, j in ops:
    if kind == "weights":
      while trained < j:  # the trainer trains what it has received, in order
        if trained not in received:
          raise AssertionError(f"deadlock: weights {j} need step {trained}, whose batch comes later")
        trained += 1
      held = j
    else:
      if held is None or held != max(0, j - eta):
        raise AssertionError(f"batch {j} would be sampled with version {held}, not {max(0, j - eta)}")
      versions.append(held)
      received.add(j)
  assert trained == steps and held == steps
  return versions


def test_transfer_schedule_brute_force():
  """Every (steps, eta): the schedule is deadlock-free, each batch is sampled with version max(0, k - eta), every
  batch travels once in order, and the last transfer is the final version."""
  from rljax.train._multiproc_async import transfer_schedule  # pylint: disable=import-outside-toplevel
  for steps in range(0, 7):
    for eta in range(0, 5):
      ops = transfer_schedule(steps, eta)
      assert [j for kind, j in ops if kind == "batch"] == list(range(steps))
      assert _simulate(steps, eta, ops) == [max(0, k - eta) for k in range(steps)]
      assert ops[-1] == ("weights", steps)
      weights = [j for kind, j in ops if kind == "weights"]
      assert weights == sorted(set(weights))  # each version at most once, in order
  # a mutant order (weights sent after the batch sampled with them) is caught by the simulation
  bad = (("weights", 0), ("batch", 0), ("batch", 1), ("weights", 1), ("weights", 2))
  with pytest.raises(AssertionError, match="batch 1 would be sampled with version 0, not 1"):
    _simulate(2, 0, bad)


def test_host_collectives_over_one_process_are_local():
  import jax  # pylint: disable=import-outside-toplevel
  from rljax import parallel as par  # pylint: disable=import-outside-toplevel
  me = jax.process_index()
  assert par.process_any(True, [me]) and not par.process_any(False, (me,))
  assert par.process_sum({"a": 2.5}, [me]) == {"a": 2.5}
  assert par.allgather_rows([[1, 2], [3]], {me: (0, 2)}, 2, [me]) == [[1, 2], [3]]
  with pytest.raises(ValueError, match=r"processes \[0, 1\] of 1"):
    par.process_any(True, [0, 1])


def test_check_multiprocess_errors_name_the_field(tmp_path, monkeypatch):
  """Start-up refusals: the sides must be disjoint processes (checked for real on this one process), then (with
  the two sides faked onto processes 0 and 1) the fields and recipes the runner cannot run."""
  import types  # pylint: disable=import-outside-toplevel
  from rljax import parallel as par  # pylint: disable=import-outside-toplevel
  from rljax.train import apply_overrides, tiny_config  # pylint: disable=import-outside-toplevel
  import rljax.train._multiproc_async as M  # pylint: disable=import-outside-toplevel
  import jax  # pylint: disable=import-outside-toplevel
  mesh = par.make_mesh(par.MeshConfig(fsdp=4), jax.devices()[:4])
  cfg = apply_overrides(tiny_config(str(tmp_path)), ["rl.async_staleness=1", "checkpoint.enabled=false"])
  exp = types.SimpleNamespace(model=types.SimpleNamespace(cfg=types.SimpleNamespace(is_moe=False)), multi_turn=False)
  recipe = cfg.rl.recipe()
  with pytest.raises(ValueError, match=r"RLConfig.async_rollout_devices=0 with 1 processes.*one of \[\]"):
    M.check_multiprocess(cfg, mesh, exp, recipe)
  with pytest.raises(ValueError, match=r"async_rollout_devices=2: processes \[0\] would hold both"):
    M.check_multiprocess(apply_overrides(cfg, ["rl.async_rollout_devices=2"]), mesh, exp, recipe)
  cfg = apply_overrides(cfg, ["rl.async_rollout_devices=2"])
  real = M._sides
  monkeypatch.setattr(M, "_sides", lambda m, r: (*real(m, r)[:2], (0,), (1,)))
  M.check_multiprocess(cfg, mesh, exp, recipe)  # accepted
  for extra, match in [(["rl.async_chunk_tokens=2"], r"RLConfig.async_chunk_tokens=2 .*must be 0"),
                       (["checkpoint.enabled=true"], r"CheckpointConfig.enabled=True .*must be false")]:
    with pytest.raises(ValueError, match=match):
      M.check_multiprocess(apply_overrides(cfg, extra), mesh, exp, recipe)
  with pytest.raises(ValueError, match="prompt filter 'greso' keeps state the training side updates"):
    M.check_multiprocess(cfg, mesh, exp, apply_overrides(cfg, ["rl.prompt_filters=greso"]).rl.recipe())
  for accepted in (["rl.advantage=remax"], ["rl.filters=zero_variance(refill=True)"]):  # within-step sampling
    M.check_multiprocess(cfg, mesh, exp, apply_overrides(cfg, accepted).rl.recipe())
  monkeypatch.setattr(M, "_sides", lambda m, r: (*real(m, r)[:2], (0, 1), (2, 3)))
  M.check_multiprocess(cfg, mesh, exp, recipe)  # several processes per side: accepted


# ----------------------------------------------------------------------------- two processes

def _config(out_dir, extra):
  from rljax.train import apply_overrides, tiny_config  # pylint: disable=import-outside-toplevel
  return apply_overrides(tiny_config(out_dir), OVERRIDES + list(extra))


def _worker(process_id: int, port: int, out: str) -> None:
  """Runs ``train`` with eta = 0 then eta = 1 on ``WORKER_PROCESSES`` (env, default 2) processes of 4 / that many
  devices each (mesh fsdp=4 split 2 / 2), recording on each process what the RL update and the sampler touched."""
  n = int(os.environ.get("WORKER_PROCESSES", "2"))
  import jax  # pylint: disable=import-outside-toplevel
  from jax.experimental import multihost_utils  # pylint: disable=import-outside-toplevel
  from _rewards import dense_reward, parity_reward  # pylint: disable=import-outside-toplevel
  import rljax.sampling  # pylint: disable=import-outside-toplevel
  from rljax import parallel as par  # pylint: disable=import-outside-toplevel
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  from rljax.train._rl import RLLoop  # pylint: disable=import-outside-toplevel
  # what `rljax train` does on each host, with the CPU backend's transfer server (RLJAX_TRANSFER_ADDRESS)
  assert par.maybe_initialize_distributed(env={"RLJAX_COORDINATOR": f"localhost:{port}",
                                               "RLJAX_NUM_PROCESSES": str(n), "RLJAX_PROCESS_ID": str(process_id),
                                               "RLJAX_TRANSFER_ADDRESS": os.environ["TRANSFER_ADDRESS"]})
  assert jax.config.values["jax_cross_host_transfer_socket_address"] == os.environ["TRANSFER_ADDRESS"]
  record = {"generate": [], "steps": []}
  generate, step = rljax.sampling.generate, RLLoop.step

  def recording_generate(*args, **kwargs):
    r = generate(*args, **kwargs)
    record["generate"].append(sorted(d.id for d in r.tokens.sharding.device_set))
    return r

  def recording_step(self, s, collected):
    data = collected.data
    v = data.extras.get("policy_version")
    versions = sorted(set(np.asarray(v)[data.completion_mask].tolist())) if v is not None else None
    routing = data.routing
    out = step(self, s, collected)
    held = sorted({sh.device.id for x in jax.tree_util.tree_leaves((self.state.params, self.state.opt_state))
                   for sh in x.addressable_shards})
    record["steps"].append({"step": s, "versions": versions, "devices": held,
                            "routing": None if routing is None else np.asarray(routing).tolist()})
    return out

  rljax.sampling.generate = recording_generate
  RLLoop.step = recording_step
  plain = bool(os.environ.get("WORKER_PLAIN"))  # eta = 0 without MOE's stages, on dense rewards
  extra, reward = ([], dense_reward) if plain else (MOE, parity_reward)
  if os.environ.get("WORKER_SYNC"):  # the synchronous loop on these processes (mesh fsdp=2)
    train(_config(os.path.join(out, "sync_mp"), ["mesh.fsdp=2"] + extra), reward_fn=reward)
    return
  for eta in (0, 1):
    record = {"generate": [], "steps": [], "local": sorted(d.id for d in jax.local_devices())}
    summary = train(_config(os.path.join(out, f"eta{eta}"), ["mesh.fsdp=4", f"rl.async_staleness={eta}",
                                                             "rl.async_rollout_devices=2"] + (extra if eta == 0 else [])),
                    reward_fn=reward if eta == 0 else dense_reward)
    params = multihost_utils.process_allgather(summary["params"], tiled=True)  # the trained parameters, whole
    np.savez(os.path.join(out, f"eta{eta}_params_p{process_id}.npz"),
             **{jax.tree_util.keystr(k): np.asarray(v) for k, v in jax.tree_util.tree_leaves_with_path(params)})
    with open(os.path.join(out, f"eta{eta}_p{process_id}.json"), "w", encoding="utf-8") as f:
      json.dump(record, f)
    print(f"process {process_id}: eta={eta} done", flush=True)


def _launch(tmp_path, n: int, *, sync: bool = False, devices: int = 0, plain: bool = False):
  """Runs the workers on ``n`` processes of ``devices`` (default ``4 // n``) CPU devices each and, meanwhile, the
  synchronous reference (one process, mesh fsdp=2: the training sub-mesh's shape; eta = 0's config) here;
  returns its summary. Fails the test with the workers' logs when one fails or they do not finish in time.
  ``sync``: the workers run the synchronous loop (``WORKER_SYNC``, into ``sync_mp``) and nothing runs here
  (returns None). ``plain``: eta = 0 runs the dense model on dense rewards (``WORKER_PLAIN``), not ``MOE``."""
  from _rewards import dense_reward, parity_reward  # pylint: disable=import-outside-toplevel
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  procs = launch_workers(__file__, lambda i, port: ["--worker", i, port, tmp_path], processes=n,
                         devices_per_process=devices or 4 // n, transfer=True,
                         env={"WORKER_PROCESSES": str(n), "WORKER_SYNC": "1" if sync else "",
                              "WORKER_PLAIN": "1" if plain else ""})
  deadline = time.time() + 600  # generous (compiles on a loaded 2-core machine); a hang fails here, never the suite
  extra, reward = ([], dense_reward) if plain else (MOE, parity_reward)
  ref = None if sync else train(_config(str(tmp_path / "sync"), ["mesh.fsdp=2"] + extra), reward_fn=reward)
  wait_workers(procs, deadline)
  return ref


@pytest.mark.multiprocess
def test_two_processes_rollout_on_one_train_on_the_other(tmp_path):
  """(a) eta = 0 equals the synchronous loop on the training sub-mesh's shape (fsdp=2) bit for bit: every metric
  of the RL steps and the final parameters, with an MoE whose update replays the routing the rollout process's
  bfloat16 sampler chose (it travels with the batch), ReMax's greedy rows and DAPO's refill rounds (more sampler
  calls per step, made by both sides' Collectors); (b) eta = 1 samples batch k with version max(0, k - 1) (per-token
  tags, staleness metrics); (c) the rollout process holds no train-state shard and runs no update, the training
  process runs no sampler during RL (its evaluations only)."""
  import jax  # pylint: disable=import-outside-toplevel
  from rljax.train import read_jsonl  # pylint: disable=import-outside-toplevel
  out = str(tmp_path)
  ref = _launch(tmp_path, 2)
  rl = lambda d: [r for r in read_jsonl(os.path.join(d, "metrics.jsonl")) if r["stage"] == "rl" and "loss" in r]
  sync, eta0, eta1 = rl(tmp_path / "sync"), rl(tmp_path / "eta0"), rl(tmp_path / "eta1")
  assert len(sync) == len(eta0) == len(eta1) == STEPS
  # (a) every metric of the synchronous loop, bit for bit (the same prompts, keys and programs on 2 devices)
  for a, b in zip(sync, eta0):
    for key, value in a.items():
      if not key.startswith("time/"):
        assert b[key] == value, key
    assert b["async/version_lag"] == 0 and b["async/batch_transfer_bytes"] > 0
  assert eta0[-1]["async/weight_transfer_bytes"] == sum(
      np.asarray(x).nbytes for x in jax.tree_util.tree_leaves(ref["params"]))
  flat = {jax.tree_util.keystr(k): np.asarray(v) for k, v in jax.tree_util.tree_leaves_with_path(ref["params"])}
  for p in (0, 1):  # both processes end with the synchronous run's parameters, on the whole mesh
    got = dict(np.load(os.path.join(out, f"eta0_params_p{p}.npz")))
    assert got.keys() == flat.keys() and len(flat) > 5
    for k, v in flat.items():
      np.testing.assert_array_equal(got[k], v, err_msg=k)
  assert all("rollout/routing_mismatch" in r and "rollout/logp_gap_no_replay" in r for r in sync)
  # refill rounds happened, and each round's greedy and sampled calls travelled: 2 transfers per round
  assert sum(r["rollout/refills"] for r in sync) > 0
  assert [r["async/sampler_calls"] for r in eta0] == [2 * (1 + r["rollout/refills"]) for r in sync]
  rec0 = json.load(open(os.path.join(out, "eta0_p1.json"), encoding="utf-8"))
  routing = [np.asarray(s["routing"]) for s in rec0["steps"]]  # [B, T, L_moe=1, k=2] experts, received
  assert all(r.shape[2:] == (1, 2) and r.max() > 0 for r in routing)
  # (b) eta = 1: batch k sampled with version max(0, k - 1), per token and in the metrics
  rec = {p: json.load(open(os.path.join(out, f"eta1_p{p}.json"), encoding="utf-8")) for p in (0, 1)}
  assert [s["versions"] for s in rec[1]["steps"]] == [[0], [0], [1]]
  assert [r["async/staleness_max"] for r in eta1] == [0, 1, 1]
  assert [r["async/staleness_mean"] for r in eta1] == [0, 1, 1]
  assert all(r["async/dropped"] == 0 and np.isfinite(r["loss"]) for r in eta1)
  rollout_rows = read_jsonl(os.path.join(out, "eta1", "rollout_0.jsonl"))
  assert [(r["step"], r["version"], r["calls"]) for r in rollout_rows] == [(0, 0, 1), (1, 0, 1), (2, 1, 1)]
  # (c) placement, both runs (device ids: process 0's and process 1's local devices)
  for eta in (0, 1):
    rec = {p: json.load(open(os.path.join(out, f"eta{eta}_p{p}.json"), encoding="utf-8")) for p in (0, 1)}
    mine, theirs, both = rec[0]["local"], rec[1]["local"], sorted(rec[0]["local"] + rec[1]["local"])
    assert rec[0]["steps"] == []  # the rollout process ran no update
    assert len(rec[1]["steps"]) == STEPS and all(s["devices"] == theirs for s in rec[1]["steps"])
    # the rollout process sampled the RL batches on its own devices (the evaluations before and after RL run on
    # the whole mesh); the training process sampled only in evaluations (whole mesh, or its own devices)
    calls = sum(r["async/sampler_calls"] for r in (eta0 if eta == 0 else eta1))  # STEPS for eta = 1
    assert sum(d == mine for d in rec[0]["generate"]) == calls and all(d in (mine, both) for d in rec[0]["generate"])
    assert all(d in (theirs, both) for d in rec[1]["generate"]) and rec[1]["generate"].count(theirs) == 1


if __name__ == "__main__" and len(sys.argv) == 5 and sys.argv[1] == "--worker":
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  _worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])


@pytest.mark.slow  # ~90 s alone on 2 cores, ~150 s with its 2-process reference; the default suite keeps the
@pytest.mark.multiprocess  # group collectives' own test (tests/test_group_collectives.py, ~5 s)
def test_four_processes_two_per_side(tmp_path):
  """Each side of several processes: 4 processes x 1 device, processes 0, 1 roll out and 2, 3 train (the sides'
  host collectives over their own processes, ``rljax.parallel.group_allgather``). (a) eta = 0 ends with the
  parameters of the synchronous one-process loop on fsdp=2 bit for bit (on every process) and writes its RL
  metrics bit for bit, except: the recipe stages' statistics (``grpo/*``: the writing process's rows in any
  multi-process run) equal those of the synchronous loop on 2 processes x 1 device, and ``dense_reward/mean`` /
  ``rollout/entropy`` (means of per-process float32 partial sums) are not compared;
  (b) eta = 1 trains on versions [0], [0], [1]; (c) one writer (process 2), one rollout log per rollout process,
  no update on a rollout process, each training process's update on its own device only."""
  import jax  # pylint: disable=import-outside-toplevel
  from rljax.train import read_jsonl  # pylint: disable=import-outside-toplevel
  out = str(tmp_path)
  ref = _launch(tmp_path, 4, plain=True)
  _launch(tmp_path, 2, sync=True, devices=1, plain=True)
  rl = lambda d: [r for r in read_jsonl(os.path.join(d, "metrics.jsonl")) if r["stage"] == "rl" and "loss" in r]
  sync, sync_mp = rl(tmp_path / "sync"), rl(tmp_path / "sync_mp")
  eta0, eta1 = rl(tmp_path / "eta0"), rl(tmp_path / "eta1")
  assert len(sync) == len(sync_mp) == len(eta0) == len(eta1) == STEPS  # one writer: each step once
  # the recipe stages' statistics come from the writing process's rows: equal to the synchronous loop with the
  # same split (2 training processes); two host-side means of float32 rewards / entropies differ in the last
  # float32 bits from both references (a float32 partial sum per process): not compared
  split = lambda key: key.startswith("grpo/")
  loose = {"dense_reward/mean", "rollout/entropy"}
  for a, m, b in zip(sync, sync_mp, eta0):
    assert a.keys() <= b.keys() and sum(map(split, a)) >= 5
    for key, value in a.items():
      if not key.startswith("time/") and key not in loose:
        assert b[key] == (m if split(key) else a)[key], key
  flat = {jax.tree_util.keystr(k): np.asarray(v) for k, v in jax.tree_util.tree_leaves_with_path(ref["params"])}
  for p in range(4):
    got = dict(np.load(os.path.join(out, f"eta0_params_p{p}.npz")))
    assert got.keys() == flat.keys() and len(flat) > 5
    for k, v in flat.items():
      np.testing.assert_array_equal(got[k], v, err_msg=k)
  rec = {p: json.load(open(os.path.join(out, f"eta1_p{p}.json"), encoding="utf-8")) for p in range(4)}
  for p in (2, 3):
    assert [s["versions"] for s in rec[p]["steps"]] == [[0], [0], [1]]
  assert [r["async/staleness_max"] for r in eta1] == [0, 1, 1]
  for p in (0, 1):
    rows = read_jsonl(os.path.join(out, "eta1", f"rollout_{p}.jsonl"))
    assert [(r["step"], r["version"]) for r in rows] == [(0, 0), (1, 0), (2, 1)]
  assert not os.path.exists(os.path.join(out, "eta1", "rollout_2.jsonl"))
  for eta in (0, 1):
    rec = {p: json.load(open(os.path.join(out, f"eta{eta}_p{p}.json"), encoding="utf-8")) for p in range(4)}
    assert rec[0]["steps"] == [] and rec[1]["steps"] == []
    for p in (2, 3):
      assert len(rec[p]["steps"]) == STEPS and all(s["devices"] == rec[p]["local"] for s in rec[p]["steps"])
    rollout_devices = sorted(rec[0]["local"] + rec[1]["local"])
    calls = sum(r["async/sampler_calls"] for r in (eta0 if eta == 0 else eta1))  # STEPS for eta = 1
    for p in (0, 1):  # each rollout process made every RL sampler call on the rollout sub-mesh
      assert rec[p]["generate"].count(rollout_devices) == calls
