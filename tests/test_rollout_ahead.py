"""Rollout scheduling in the RL loop: ``rl.rollout_ahead`` (step s+1's batch is sampled from the parameters
before step s's updates) and ``rl.concurrent_rollouts`` (the batch sampled as concurrent chunks)."""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _rewards import dense_reward
from rljax.train import apply_overrides, read_jsonl, tiny_config
from rljax.train._ahead import RolloutAhead


def test_snapshot_survives_donation_and_errors_propagate():
  params = {"w": jnp.arange(4.0)}
  snap = RolloutAhead.snapshot(params)
  jax.jit(lambda p: jax.tree.map(lambda x: x + 1, p), donate_argnums=0)(params)  # donates the original
  with RolloutAhead() as ahead:
    ahead.submit(lambda p: np.asarray(p["w"]) * 2, snap)
    with pytest.raises(RuntimeError, match="already in flight"):
      ahead.submit(lambda: None)
    np.testing.assert_array_equal(ahead.result(), [0.0, 2.0, 4.0, 6.0])
    assert not ahead.pending

    def fail():
      raise KeyError("reward server down")

    ahead.submit(fail)
    with pytest.raises(KeyError, match="reward server down"):
      ahead.result()
    with pytest.raises(RuntimeError, match="no rollout"):
      ahead.result()


def _rl_rows(out, extra):
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  cfg = apply_overrides(tiny_config(str(out)), ["rl.steps=3", "checkpoint.every=100"] + extra)
  train(cfg, reward_fn=dense_reward)
  return [r for r in read_jsonl(os.path.join(cfg.out_dir, "metrics.jsonl")) if r["stage"] == "rl" and "loss" in r]


@pytest.mark.long
def test_rollout_ahead_is_one_step_behind(tmp_path):
  """With a learning rate too small to move any parameter, looking ahead changes nothing (same batches,
  keys and data order); with a real one, batches from step 2 on come from the older policy."""
  frozen = ["rl.optim.learning_rate=1e-30"]
  sync = _rl_rows(tmp_path / "sync", frozen)
  ahead = _rl_rows(tmp_path / "ahead", frozen + ["rl.rollout_ahead=true"])
  assert [r["rollout/lag"] for r in ahead] == [0.0, 1.0, 1.0]
  for a, b in zip(sync, ahead):
    for key in ("rollout/entropy", "rollout/reward_mean", "rollout/completion_len", "loss"):
      np.testing.assert_allclose(b[key], a[key], rtol=1e-6, err_msg=key)

  sync = _rl_rows(tmp_path / "sync_lr", ["rl.optim.learning_rate=0.05"])
  ahead = _rl_rows(tmp_path / "ahead_lr", ["rl.optim.learning_rate=0.05", "rl.rollout_ahead=true"])
  np.testing.assert_allclose(ahead[0]["rollout/entropy"], sync[0]["rollout/entropy"], rtol=1e-6)  # same θ_0
  assert abs(ahead[1]["rollout/entropy"] - sync[1]["rollout/entropy"]) > 1e-4  # θ_0 vs θ_1


@pytest.mark.long
def test_concurrent_rollouts_train_like_one_call(tmp_path):
  """``rl.concurrent_rollouts=2`` reaches the sampler (and its evaluations) and samples the same batches:
  the same rewards and completion lengths, losses equal up to float32 summation order."""
  from rljax.train import build_experiment  # pylint: disable=import-outside-toplevel
  cfg = apply_overrides(tiny_config(str(tmp_path / "x")), ["rl.concurrent_rollouts=2"])
  assert build_experiment(cfg).sampler_config.concurrent_chunks == 2
  with pytest.raises(ValueError, match="rl.concurrent_rollouts"):
    apply_overrides(tiny_config(str(tmp_path / "y")), ["rl.concurrent_rollouts=-1"])
  one = _rl_rows(tmp_path / "one", [])
  two = _rl_rows(tmp_path / "two", ["rl.concurrent_rollouts=2"])
  assert len(one) == len(two) == 3
  for name in ("sft_eval.json", "summary.json"):  # the evaluations run chunked too (the tiny model scores ~0)
    with open(tmp_path / "one" / name) as f1, open(tmp_path / "two" / name) as f2:
      a, b = ({k: v for k, v in json.load(f).items() if k not in ("out_dir", "wall_s", "settings")}
              for f in (f1, f2))
    assert a == b and len(a) >= 3, (name, a, b)
  for a, b in zip(one, two):
    for key in ("rollout/reward_mean", "rollout/completion_len"):
      assert b[key] == a[key], key
    for key in ("rollout/entropy", "loss"):
      np.testing.assert_allclose(b[key], a[key], rtol=1e-5, atol=1e-6, err_msg=key)
