"""PPO with a learned critic in the RL loop: a separate critic model or a value head on the policy trunk,
GAE advantages from its values, its clipped value loss, checkpoints and resume (rljax/train/_critic.py)."""
import os
import shutil

import jax
import numpy as np
import pytest

from rljax.train import apply_overrides, read_jsonl, tiny_config

BASE = ["task.digits=1", "sft.steps=20", "sft.optim.learning_rate=0.01", "rl.steps=3", "rl.num_prompts=4",
        "rl.group_size=4", "eval.num_problems=4", "eval.batch_size=4", "eval.num_samples=1", "eval.pass_k=1",
        "checkpoint.every=2", "rl.rewards=gaussian_reward(sigma=5.0, parse='arithmetic')", "rl.advantage=gae",
        "rl.critic=value_loss(clip_eps=0.2)", "rl.critic_lr=0.01"]


def _run(out, *overrides, resume=False):
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  cfg = apply_overrides(tiny_config(str(out)), BASE + list(overrides))
  return train(cfg, resume=resume)


def _rows(out):
  return [r for r in read_jsonl(os.path.join(out, "metrics.jsonl")) if r["stage"] == "rl" and r["step"] > 0]


@pytest.mark.long
@pytest.mark.parametrize("shared", [False, True])
def test_critic_trains_checkpoints_and_resumes_bit_for_bit(tmp_path, shared):
  out = str(tmp_path / "run")
  ov = [f"rl.critic_shared={str(shared).lower()}"]
  full = _run(out, *ov)
  rows = _rows(out)
  assert [r["step"] for r in rows] == [1, 2, 3]
  prefix = "value_loss/" if shared else "critic/value_loss/"
  for r in rows:
    assert np.isfinite(r["loss"]) and r["train/skipped"] == 0.0 and np.isfinite(r[prefix + "explained_variance"])
  # the critic learns: its values move (the head starts at zero)
  values = [r[prefix + "value_mean"] for r in rows]
  assert len(set(values)) == 3 and values[-1] != 0.0
  from rljax.train import load_run  # pylint: disable=import-outside-toplevel
  _, _, state, info = load_run(out, stage="rl")
  assert info["step"] == 3
  # resume from step 2 (drop the last checkpoint): the same parameters and critic state as the full run
  shutil.rmtree(os.path.join(out, "checkpoints", "rl", "3"))
  resumed = _run(out, *ov, resume=True)
  for a, b in zip(jax.tree_util.tree_leaves(full["params"]), jax.tree_util.tree_leaves(resumed["params"])):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  again = _rows(out)
  assert again[-1][prefix + "value_mean"] == rows[-1][prefix + "value_mean"]
  assert again[-1]["loss"] == rows[-1]["loss"]


def test_gae_without_a_critic_is_refused_at_start_up(tmp_path):
  from rljax.stages import NeedError  # pylint: disable=import-outside-toplevel
  with pytest.raises(NeedError, match=r"'gae' needs 'values'.*no critic"):
    _run(tmp_path, "rl.critic=")
