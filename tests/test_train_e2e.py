"""Fast end-to-end smoke test: tiny SFT + RL run, artefacts, CLI eval/sample on its checkpoint."""
import contextlib
import io
import json
import os

import numpy as np
import pytest

from _rewards import dense_reward
from rljax import cli
from rljax.train import apply_overrides, read_jsonl, tiny_config


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  from rljax.train import train
  out = str(tmp_path_factory.mktemp("run"))
  cfg = apply_overrides(tiny_config(out), ["tensorboard=true", "plot=true", "rl.steps=3", "eval.every=2"])
  console = io.StringIO()
  with contextlib.redirect_stdout(console):
    summary = train(cfg)
  RUN_CONSOLE.append(console.getvalue())
  return cfg, summary


RUN_CONSOLE = []  # what the module's run printed


def test_no_learning_signal_is_said_once(run):
  """Tiny's 4 SFT steps leave every reward 0: the console says so (once) after NO_SIGNAL_STEPS such steps."""
  from rljax.train._cadence import NO_SIGNAL_STEPS, NoSignalWatch  # pylint: disable=import-outside-toplevel
  cfg, _ = run
  rl = [r for r in read_jsonl(os.path.join(cfg.out_dir, "metrics.jsonl")) if r["stage"] == "rl" and "loss" in r]
  flat = [r["rollout/zero_var_groups"] == r["rollout/sampled_groups"] for r in rl]
  said = [l for l in RUN_CONSOLE[0].splitlines() if "no learning signal" in l]
  assert len(said) == int(all(flat[:NO_SIGNAL_STEPS])), (flat, said)
  if said:
    assert f"equal for {NO_SIGNAL_STEPS} steps" in said[0] and "too hard" in said[0]
  watch = NoSignalWatch(steps=2)
  flat_step, mixed_step = {"zero_var_groups": 4, "sampled_groups": 4}, {"zero_var_groups": 3, "sampled_groups": 4}
  assert watch.observe(flat_step, np.ones(8)) is None and watch.observe(mixed_step, np.ones(8)) is None
  assert watch.observe(flat_step, np.ones(8)) is None  # the count restarts after a step with signal
  msg = watch.observe(flat_step, np.ones(8))
  assert "equal for 2 steps (all 1.0)" in msg and "too easy" in msg
  assert watch.observe(flat_step, np.ones(8)) is None  # said once
  watch = NoSignalWatch(steps=1)
  assert "values 0.0, 1.0" in watch.observe(flat_step, np.array([0.0, 0.0, 1.0, 1.0]))


def test_artefacts_and_metrics(run):
  cfg, summary = run
  out = cfg.out_dir
  for name in ("config.json", "metrics.jsonl", "metrics.png", "summary.json", "sft_eval.json"):
    assert os.path.exists(os.path.join(out, name)), name
  assert any(f.startswith("events") for f in os.listdir(os.path.join(out, "tb")))
  rows = read_jsonl(os.path.join(out, "metrics.jsonl"))
  sft = [r for r in rows if r["stage"] == "sft" and "loss" in r]
  rl = [r for r in rows if r["stage"] == "rl" and "loss" in r]
  assert [r["step"] for r in sft] == list(range(1, cfg.sft.steps + 1))
  assert [r["step"] for r in rl] == list(range(1, cfg.rl.steps + 1))
  for r in rl:
    for key in ("rollout/reward_mean", "policy/entropy", "policy/kl", "policy/clip_frac", "train/grad_norm"):
      assert key in r and np.isfinite(r[key]), key
    assert r["train/skipped"] == 0.0
  assert sft[-1]["loss"] < sft[0]["loss"]
  evals = [r for r in rows if r["stage"] == "rl" and "eval/greedy_accuracy" in r]
  assert [r["step"] for r in evals] == [0, 2, 3]
  s = json.load(open(os.path.join(out, "summary.json")))
  assert set(s["sft"]) >= {"greedy_accuracy", "sample_accuracy", "pass@1", "pass@2"}
  assert 0.0 <= s["rl"]["greedy_accuracy"] <= 1.0
  assert sorted(os.listdir(os.path.join(out, "checkpoints"))) == ["rl", "sft"]


def test_cli_eval_and_sample(run, capsys):
  cfg, _ = run
  assert cli.main(["eval", "--run-dir", cfg.out_dir, "--num-samples", "2", "--k", "1", "2",
                   "--num-problems", "8"]) == 0
  res = json.loads(capsys.readouterr().out)
  assert res["stage"] == "rl" and res["step"] == cfg.rl.steps and res["num_problems"] == 8
  assert 0.0 <= res["pass@1"] <= res["pass@2"] <= 1.0
  assert cli.main(["sample", "--run-dir", cfg.out_dir, "12+34=", "--n", "2"]) == 0
  lines = [l for l in capsys.readouterr().out.splitlines() if not l.startswith("#")]
  assert len(lines) == 2 and all(l.startswith("12+34=\t") for l in lines)


def test_cli_errors_for_missing_or_corrupt_run(tmp_path, capsys):
  assert cli.main(["eval", "--run-dir", str(tmp_path / "missing")]) == 2
  assert "does not exist" in capsys.readouterr().err
  os.makedirs(tmp_path / "empty")
  assert cli.main(["sample", "--run-dir", str(tmp_path / "empty"), "1+1="]) == 2
  assert "not an rljax run directory" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the run on a device mesh

_MESH_OVERRIDES = ["sft.steps=2", "rl.steps=2", "eval.num_problems=4", "eval.batch_size=4", "eval.num_samples=1",
                   "eval.pass_k=1", "checkpoint.enabled=false"]


def _flat_params(params):
  import jax  # pylint: disable=import-outside-toplevel
  return {jax.tree_util.keystr(k): v for k, v in jax.tree_util.tree_leaves_with_path(params)}


@pytest.fixture(scope="module")
def one_device_run(tmp_path_factory):
  from rljax.train import train
  cfg = apply_overrides(tiny_config(str(tmp_path_factory.mktemp("mesh1"))), _MESH_OVERRIDES)
  assert cfg.mesh.sizes == (1, 1, 1, 1)
  summary = train(cfg, reward_fn=dense_reward)
  params = _flat_params(summary["params"])
  assert all(len(v.sharding.device_set) == 1 for v in params.values())
  return {k: np.asarray(v) for k, v in params.items()}, summary


@pytest.mark.long
@pytest.mark.parametrize("mesh", [["mesh.data=2", "mesh.fsdp=2", "mesh.tensor=2"],
                                  pytest.param(["mesh.fsdp=4", "mesh.tensor=2"], marks=pytest.mark.slow),
                                  # scanned layers, full remat, per-layer gathers (the step: test_parallel_scan.py)
                                  pytest.param(["mesh.data=2", "mesh.fsdp=2", "mesh.tensor=2", "model.scan_layers=true",
                                                "model.remat=full"], marks=pytest.mark.slow)],
                         ids=["d2f2t2", "f4t2", "d2f2t2-scan"])
def test_train_on_a_mesh_matches_one_device(one_device_run, mesh, tmp_path):
  """``--set mesh.*``: the same SFT + RL run sharded over 8 devices ends with the 1-device parameters, and the
  final parameters carry the shardings the logical-axis rules declare."""
  import jax  # pylint: disable=import-outside-toplevel
  from rljax.parallel import state_shardings  # pylint: disable=import-outside-toplevel
  from rljax.train import train
  ref, ref_summary = one_device_run
  cfg = apply_overrides(tiny_config(str(tmp_path)), _MESH_OVERRIDES + mesh)
  summary = train(cfg, reward_fn=dense_reward)
  got = _flat_params(summary["params"])
  mesh_obj = next(iter(got.values())).sharding.mesh
  assert mesh_obj.devices.size == 8 and dict(mesh_obj.shape) == {
      "data": cfg.mesh.data, "fsdp": cfg.mesh.fsdp, "tensor": cfg.mesh.tensor, "expert": 1}
  declared = _flat_params(jax.tree.map(  # one sharding per nnx.Variable, broadcast to its array
      lambda sh, var: jax.tree.map(lambda _: sh, var), state_shardings(summary["params"], mesh_obj),
      summary["params"], is_leaf=lambda x: isinstance(x, jax.sharding.NamedSharding)))
  sharded = 0
  for k, v in got.items():
    assert v.sharding.is_equivalent_to(declared[k], v.ndim), (k, v.sharding, declared[k])
    sharded += len(v.sharding.spec) > 0 and any(s is not None for s in v.sharding.spec)
  assert sharded >= 6  # embeddings, attention and MLP kernels are split
  if cfg.model.scan_layers:  # stored stacked [L, ...] (one run: the tiny model's layers are identical)
    stacked = {k: v for k, v in got.items() if k.startswith("['layer_stacks']")}
    assert stacked and all(k.startswith("['layer_stacks'][0]") for k in stacked)
    got = {k: v for k, v in got.items() if k not in stacked}
    for k, v in stacked.items():
      got.update({k.replace("['layer_stacks'][0]", f"['layers'][{j}]"): v[j] for j in range(v.shape[0])})
  assert set(got) == set(ref)
  for k, v in ref.items():
    g = np.asarray(jax.device_get(got[k]))
    # float32 reduction order differs between layouts; Adam's lr * m / (sqrt(v) + eps) keeps it at rounding level
    np.testing.assert_allclose(g, v, rtol=1e-5, atol=1e-6, err_msg=k)
  rows = [r for r in read_jsonl(os.path.join(cfg.out_dir, "metrics.jsonl")) if r["stage"] == "rl" and "loss" in r]
  ref_rows = [r for r in read_jsonl(os.path.join(ref_summary["out_dir"], "metrics.jsonl"))
              if r["stage"] == "rl" and "loss" in r]
  assert len(rows) == len(ref_rows) == cfg.rl.steps
  for r, q in zip(rows, ref_rows):
    assert r["rollout/reward_mean"] == q["rollout/reward_mean"]  # the same samples were drawn
    assert abs(r["train/grad_norm"] - q["train/grad_norm"]) <= 1e-4 * q["train/grad_norm"]
    assert q["train/grad_norm"] > 0
