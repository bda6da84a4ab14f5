"""Runs that start from a checkpoint: the small-addition task, the real-model defaults, the "zero-shot" log, the
per-step console line, LoRA training (adapters only), the compile cache and ``rljax export``'s refusals.

The same on the real SmolLM2-135M fixture: tests/test_real_model.py.
"""
import contextlib
import io
import json
import os
import re

import jax
import numpy as np
import pytest
from flax import nnx

from rljax import cli
from rljax.envs import SmallAdditionTask, get_task
from rljax.train import apply_overrides, pretrained_config, tiny_config


def test_small_addition_splits_are_disjoint_and_the_test_split_distinct():
  task = get_task("small_addition")
  test = task.problems("test", 1000, 0)
  train = task.problems("train", 3000, 5)
  key = lambda p: (p.meta["a"], p.meta["b"])
  assert len({key(p) for p in test}) == len(test) > 50  # every held-out question once
  assert not {key(p) for p in test} & {key(p) for p in train}
  assert task.problems("test", 10, 0) == task.problems("test", 10, 7) == test[:10]  # fixed whatever the seed
  assert task.problems("train", 20, 1) == task.problems("train", 20, 1) != task.problems("train", 20, 2)
  space = {(a, b) for a in range(1, 10) for b in range(1, 21)}
  assert {key(p) for p in test + train} <= space | {(b, a) for a, b in space}
  assert all(p.prompt == f"What is {p.meta['a']} + {p.meta['b']}? Reply with only the number." for p in test)


def test_small_addition_scores_correctness_and_format_apart():
  task = SmallAdditionTask()
  p = task.problems("test", 1, 0)[0]
  s = str(p.meta["a"] + p.meta["b"])
  completions = [s, f" {s}.", f"{p.meta['a']} + {p.meta['b']} = {s}", f"The answer is {s}!", "12 and 99", "", s + "0"]
  np.testing.assert_array_equal(task.score(completions, [p] * 7), [1, 1, 1, 1, 0, 0, 0])
  np.testing.assert_array_equal(task.format_score(completions, [p] * 7), [1, 1, 0, 0, 0, 0, 1])
  with pytest.raises(ValueError, match="small must be an inclusive range"):
    SmallAdditionTask(small=(5, 1))


def test_pretrained_config_has_real_model_defaults():
  cfg = pretrained_config("/some/checkpoint")
  assert cfg.model.hf_checkpoint == "/some/checkpoint" and cfg.sft.steps == 0
  assert cfg.rl.updates_per_batch == 1 and cfg.rl.optim.learning_rate == 1e-6 and cfg.rl.optim.warmup_steps == 10
  assert "kl_penalty" in cfg.rl.loss and cfg.rl.max_new_tokens == 256
  names = [s.name for s in cfg.rl.recipe().loss]
  assert names == ["ppo_clip", "kl_penalty"]
  assert pretrained_config("/x", seed=3).seed == 3


def _train_logged(cfg):
  from rljax.train import train
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    summary = train(cfg)
  return summary, out.getvalue()


def test_a_run_without_sft_says_zero_shot_and_prints_each_steps_times(tmp_path):
  cfg = apply_overrides(tiny_config(str(tmp_path / "run")), ["sft.steps=0", "rl.steps=2", "checkpoint.enabled=false"])
  _, log = _train_logged(cfg)
  assert "[rljax] zero-shot (no SFT): held-out greedy accuracy" in log
  assert "points over zero-shot)" in log and "SFT" not in log.split("zero-shot (no SFT)")[1]
  for step in (1, 2):  # no progress bar here (not a terminal): one line per step
    assert f"[rljax] RL step {step}/2: rollout " in log
  line = [l for l in log.splitlines() if l.startswith("[rljax] RL step 2/2")][0]
  assert re.search(r"rollout [0-9.]+ m?s, update [0-9.]+ m?s, reward", line), line
  assert "held-out greedy" in line  # step 2 evaluated (the last)


def test_a_run_with_sft_still_says_after_sft_and_an_sft_only_run_prints_no_rl_line(tmp_path):
  """An SFT-only run (notebook 03's warm-start cell, issue #36 item 3): no after-RL line, and no after-RL evaluation
  or gain in what ``train()`` returns or in ``summary.json``."""
  summary, log = _train_logged(apply_overrides(tiny_config(str(tmp_path / "a")), ["rl.steps=0"]))
  assert "[rljax] after SFT: held-out greedy accuracy" in log and "after RL" not in log and "points over" not in log
  with open(tmp_path / "a" / "summary.json", encoding="utf-8") as f:
    written = json.load(f)
  for s in (summary, written):
    assert "sft" in s and "rl" not in s and "gain_points" not in s


@pytest.mark.long
def test_lora_trains_only_the_adapters(tmp_path):
  from rljax.train import build_experiment
  cfg = apply_overrides(tiny_config(str(tmp_path / "lora")),
                        ["model.lora_rank=4", "sft.steps=3", "rl.steps=1", "checkpoint.enabled=false"])
  summary, log = _train_logged(cfg)
  assert "(LoRA r=4: " in log
  trained = nnx.to_flat_state(summary["params"])
  assert trained and all(isinstance(v, nnx.LoRAParam) for _, v in trained)  # the optimizer saw adapters alone
  fresh = build_experiment(cfg).model  # the same seed: the same initial weights
  base = dict(nnx.to_flat_state(nnx.state(fresh, nnx.Param)))
  frozen = dict(nnx.to_flat_state(summary["model_state"]))
  kernels = [k for k, v in base.items() if not isinstance(v, nnx.LoRAParam)]
  assert kernels and all(k in frozen for k in kernels)
  for k in kernels:
    np.testing.assert_array_equal(np.asarray(frozen[k][...]), np.asarray(base[k][...]))
  moved = [k for k, v in trained if k[-1] == "lora_b" and np.abs(np.asarray(v[...])).max() > 0]
  assert moved  # B starts at zero: training moved it


def test_lora_fields_are_checked():
  with pytest.raises(ValueError, match=r"model.lora_alpha=8.0.*lora_rank=0"):
    apply_overrides(tiny_config(), ["model.lora_alpha=8"])
  with pytest.raises(ValueError, match="model.lora_rank"):
    apply_overrides(tiny_config(), ["model.lora_rank=-1"])
  spec = apply_overrides(tiny_config(), ["model.lora_rank=8"]).model
  assert spec.lora.rank == 8 and spec.lora.alpha == 16.0


def test_compile_cache_directory(monkeypatch, tmp_path):
  from rljax.train._compile_cache import default_compile_cache_dir, enable_compile_cache
  monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
  monkeypatch.setenv("RLJAX_CACHE", str(tmp_path))
  assert default_compile_cache_dir() == os.path.join(str(tmp_path), "jax-compile")
  monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "jax"))
  assert default_compile_cache_dir() == str(tmp_path / "jax")
  assert enable_compile_cache("") is None  # RLJAX_COMPILE_CACHE="" turns it off
  before = jax.config.jax_compilation_cache_dir
  try:
    assert enable_compile_cache(str(tmp_path / "c"), min_compile_time_s=0.5) == str(tmp_path / "c")
    assert jax.config.jax_compilation_cache_dir == str(tmp_path / "c") and os.path.isdir(tmp_path / "c")
  finally:
    jax.config.update("jax_compilation_cache_dir", before)


def test_export_refuses_a_scratch_model_run_and_a_non_empty_directory(tmp_path, capsys):
  cfg = apply_overrides(tiny_config(str(tmp_path / "run")), ["sft.steps=1", "rl.steps=0"])
  _train_logged(cfg)
  (tmp_path / "full").mkdir()
  (tmp_path / "full" / "x").write_text("keep")
  assert cli.main(["export", "--run-dir", cfg.out_dir, str(tmp_path / "full")]) == 2
  assert "is not empty" in capsys.readouterr().err and (tmp_path / "full" / "x").read_text() == "keep"
  assert cli.main(["export", "--run-dir", cfg.out_dir, str(tmp_path / "out")]) == 2
  assert "trained a model from scratch" in capsys.readouterr().err and not (tmp_path / "out").exists()
