"""Fast end-to-end smoke test: tiny SFT + RL run, artefacts, CLI eval/sample on its checkpoint."""
import json
import os

import numpy as np
import pytest

from rljax import cli
from rljax.train import apply_overrides, read_jsonl, tiny_config


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  from rljax.train import train
  out = str(tmp_path_factory.mktemp("run"))
  cfg = apply_overrides(tiny_config(out), ["tensorboard=true", "plot=true", "rl.steps=3", "eval.every=2"])
  summary = train(cfg)
  return cfg, summary


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
