"""Launches that do not recompile (issue #52 item 5): after a first ``rljax train``, a second run of the same shapes,
a resume, ``rljax sample`` and ``rljax eval`` load every program they compile from JAX's persistent compilation
cache, counted by JAX's own cache events (``jax._src.monitoring``), not by timings; ``sample`` and ``eval`` build
no optimizer state (live arrays counted)."""
import gc
import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from rljax.train import apply_overrides, tiny_config

# rljax's command line in a process that counts JAX's persistent-cache events and prints them as the last line
_COUNTED = """
import collections, json, sys
from jax._src import monitoring
counts = collections.Counter()
monitoring.register_event_listener(lambda event, **kw: counts.update([event.rsplit("/", 1)[-1]]))
from rljax.cli import main
rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, **counts}))
"""


def _launch(cache, *args):
  env = dict(os.environ, JAX_PLATFORMS="cpu", RLJAX_COMPILE_CACHE=str(cache))
  for k in ("XLA_FLAGS", "JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"):
    env.pop(k, None)  # the command's defaults, as a user launches it
  done = subprocess.run([sys.executable, "-c", _COUNTED, *args], env=env, capture_output=True, text=True,
                        timeout=900)
  counts = json.loads(done.stdout.strip().splitlines()[-1])
  assert counts.pop("rc") == 0, done.stderr[-3000:]
  return counts


@pytest.mark.long  # five launches of the tiny config, each in its own process
def test_second_run_resume_sample_and_eval_compile_nothing(tmp_path):
  cache, run = tmp_path / "cache", str(tmp_path / "run")
  args = ["--config", "tiny", "--set", "sft.steps=2", "--set", "rl.steps=2", "--set", "checkpoint.every=1"]
  first = _launch(cache, "train", "--out-dir", run, *args)
  assert first["cache_misses"] > 0 and first["compile_requests_use_cache"] > 0  # stored: programs written
  sample = ("sample", "--run-dir", run, "12+34=")
  # one prompt x 1: a sampler shape (prompts x samples per prompt are static) the run never compiled: it compiles
  # once and is stored. Reusing a program of the run instead (the rollout's 4 x 4, the evaluation's 32 x 1 here)
  # means padding the prompts to its batch and decoding all of it on every call: on the demo's model 6.8 s a call
  # against 1.3 s, for a ~13 s compile paid once (docs/real_models.md, benchmarks/sample_padding_cost.py)
  new_shape = _launch(cache, *sample)
  assert new_shape.get("cache_misses", 0) <= 1, new_shape
  launches = {
      "second run": ("train", "--out-dir", str(tmp_path / "again"), *args),
      "resume": ("train", "--resume", "--out-dir", run, "--set", "rl.steps=3"),
      "sample": sample,
      "eval": ("eval", "--run-dir", run),  # by default the run's own evaluation: its shapes
  }
  for name, argv in launches.items():
    counts = _launch(cache, *argv)
    requests = counts.get("compile_requests_use_cache", 0)
    assert requests > 0, (name, counts)  # the launch did look in the cache
    assert counts.get("cache_hits", 0) == requests and "cache_misses" not in counts, (name, counts)


def _live_bytes() -> int:
  gc.collect()
  return sum(x.nbytes for x in jax.live_arrays())


def test_sample_and_eval_load_the_weights_without_optimizer_state(tmp_path):
  from flax import nnx
  from rljax.train import load_run, train
  out = str(tmp_path / "run")
  train(apply_overrides(tiny_config(out), ["sft.steps=1", "rl.steps=1", "checkpoint.every=1", "eval.num_problems=4"]))
  loaded = {}
  for weights_only in (True, False):
    before = _live_bytes()
    exp, _, state, info = load_run(out, weights_only=weights_only)
    loaded[weights_only] = (_live_bytes() - before, state, exp)
    assert info["stage"] == "rl" and info["step"] == 1
  (light, state_w, exp), (full, state_f, _) = loaded[True], loaded[False]
  assert state_w.opt_state is None and state_f.opt_state is not None
  for a, b in zip(jax.tree_util.tree_leaves((state_w.params, state_w.model_state)),
                  jax.tree_util.tree_leaves((state_f.params, state_f.model_state))):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))  # the same weights
  p = sum(x.nbytes for x in jax.tree_util.tree_leaves(nnx.state(exp.model, nnx.Param)))
  # the weights-only load holds the freshly built model and the restored weights (2 P); the full one Adam's two
  # moments more (4 P)
  assert light <= 2 * p + 4096 and full - light >= 1.9 * p, (light, full, p)
