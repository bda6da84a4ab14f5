"""Shared by the "every technique trains" tests: a tiny config, a compile cache, and the per-row checks.

``rljax.recipes._examples.example(name)`` gives the smallest recipe that trains each catalog technique; these
tests run it for two RL steps on the tiny model (1-digit addition after a 50-step SFT warm start, whose
completions are numbers: the dense ``gaussian_reward`` and the verifier both have within-group variance) and
check that the loss is finite, no step was skipped or empty, the parameters moved, and the technique's metrics
are in ``metrics.jsonl``. The rows enumerate ``rljax.catalog()``: a new row with a stage is covered without
editing the tests (its metrics should carry its name, as every built-in stage's do).
"""
import json
import os

import jax
import numpy as np
import pytest

from rljax.recipes._examples import SKIP, example, trainable_names
from rljax.recipes._spec import _catalog, slot_of
from rljax.train import apply_overrides, read_jsonl, tiny_config

BASE = ["task.digits=1", "sft.steps=50", "sft.optim.learning_rate=0.01", "rl.steps=2", "rl.num_prompts=8",
        "rl.group_size=4", "eval.num_problems=4", "eval.batch_size=4", "eval.num_samples=1", "eval.pass_k=1",
        "checkpoint.enabled=false", "progress=false"]

# metrics whose prefix is not the technique's name (established names, tested in the objectives' own tests)
METRIC_PREFIX = {"tis": "correction/", "icepop": "correction/", "divergence_rejection": "correction/",
                 "mis": "correction/", "top_entropy_mask": "top_entropy/", "delta_logp_reweight": "delta_logp/"}

LOSS_SLOTS = ("loss", "critic", "aggregation", "controllers")


def names(loss_side: bool) -> list:
  """The trainable rows on one side (loss/critic/aggregation/controllers, or the data side)."""
  rows = _catalog()
  return [n for n in trainable_names() if n not in SKIP and (slot_of(rows[n]) in LOSS_SLOTS) == loss_side]


@pytest.fixture(scope="module")
def compile_cache(tmp_path_factory):
  """A persistent compilation cache for the module: runs that share a program (the same loss, the sampler)
  load it instead of compiling again (~1.5 s instead of ~5 s a run)."""
  saved = {k: getattr(jax.config, k) for k in ("jax_compilation_cache_dir",
                                               "jax_persistent_cache_min_compile_time_secs",
                                               "jax_persistent_cache_min_entry_size_bytes")}
  jax.config.update("jax_compilation_cache_dir", str(tmp_path_factory.mktemp("jax_cache")))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  yield
  for k, v in saved.items():
    jax.config.update(k, v)


@pytest.fixture(scope="module")
def warm_start(compile_cache, tmp_path_factory):
  """The parameters every technique's run starts RL from (the same deterministic SFT warm start)."""
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  out = train(apply_overrides(tiny_config(str(tmp_path_factory.mktemp("sft"))), BASE + ["rl.steps=0"]))
  return jax.tree_util.tree_leaves(out["params"])


def trains(name: str, warm_start, out_dir: str) -> None:
  """Runs ``example(name)`` for two RL steps and checks the run (see the module docstring)."""
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  cfg = apply_overrides(tiny_config(out_dir), BASE + [f"rl.{k}={v}" for k, v in example(name).items()])
  summary = train(cfg)
  rows = [r for r in read_jsonl(os.path.join(out_dir, "metrics.jsonl")) if r["stage"] == "rl" and r["step"] > 0]
  assert [r["step"] for r in rows] == [1, 2]
  for r in rows:
    assert np.isfinite(r["loss"]) and r["train/skipped"] == 0.0 and r["train/empty_steps"] == 0.0, r
  moved = [not np.array_equal(a, b) for a, b in zip(warm_start, jax.tree_util.tree_leaves(summary["params"]))]
  assert any(moved), f"{name}: the parameters did not change"
  with open(os.path.join(out_dir, "recipe.json"), encoding="utf-8") as f:
    described = json.load(f)
  assert name in json.dumps(described), described
  if slot_of(_catalog()[name]) == "aggregation":  # an aggregation has no metrics of its own: its denominator
    assert all(r["loss/denominator"] > 0 for r in rows)
    return
  prefix = METRIC_PREFIX.get(name, f"{name}/")  # its own metrics: "<name>/..." (or "<policy>/<name>/...")
  keys = sorted({k for r in rows for k in r})
  assert any(k.startswith(prefix) or f"/{prefix}" in k for k in keys), f"{name}: no {prefix!r} metric in {keys}"
