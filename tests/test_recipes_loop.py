"""The RL loop with recipes: empty steps, resampling filters, stateful stages across resume, Python recipes from
config files and checkpoints, start-up refusals."""
import json
import os
import shutil
import textwrap

import jax
import numpy as np
import pytest

from rljax import cli
from rljax.recipes import Recipe
from rljax.stages import Advantage, Filter, NeedError
from rljax.train import apply_overrides, read_jsonl, tiny_config

DENSE = "gaussian_reward(sigma=5.0, parse='arithmetic')"
BASE = ["task.digits=1", "sft.steps=20", "sft.optim.learning_rate=0.01", "rl.num_prompts=4", "rl.group_size=4",
        "eval.num_problems=4", "eval.batch_size=4", "eval.num_samples=1", "eval.pass_k=1"]


def _cfg(out, *overrides):
  return apply_overrides(tiny_config(str(out)), BASE + [f"rl.rewards={DENSE}", *overrides])


def _rows(out):
  return [r for r in read_jsonl(os.path.join(str(out), "metrics.jsonl")) if r["stage"] == "rl" and r["step"] > 0]


def _leaves(tree):
  return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


@pytest.mark.long  # ~20 s on 2 cores: the fast loop's budget
def test_a_step_the_filters_empty_is_skipped_and_counted(tmp_path, capsys):
  """No update, no controller step, counted in train/empty_steps; the next steps train normally."""
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  def first_step_only(data):  # drops every row of the first step (data.step 0)
    return np.full(data.batch_size, data.step > 0, bool), {}

  recipe = Recipe(rewards=DENSE, filters=Filter(first_step_only, name="drop_first"),
                  controllers="temperature_control(target_entropy=0.1)")
  base = train(_cfg(tmp_path / "a", "rl.steps=0", "checkpoint.enabled=false"))
  out = train(_cfg(tmp_path / "b", "rl.steps=2", "checkpoint.enabled=false"), recipe=recipe)
  rows = _rows(tmp_path / "b")
  assert [r["train/empty_steps"] for r in rows] == [1.0, 1.0]
  assert "loss" not in rows[0] and "temperature_control/temperature" not in rows[0]  # nothing trained
  assert np.isfinite(rows[1]["loss"]) and rows[1]["temperature_control/temperature"] == 1.0  # T not moved at step 1
  assert "the filters left no valid sample" in capsys.readouterr().out
  assert any(not np.array_equal(a, b) for a, b in zip(_leaves(base["params"]), _leaves(out["params"])))


def test_a_resampling_filter_turns_the_shared_prompt_forward_off(tmp_path, capsys):
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  train(_cfg(tmp_path, "sft.steps=0", "rl.steps=1", "checkpoint.enabled=false", "rl.filters=shuffle_pairs"))
  assert "share_prompt_forward unused: filter(s) ['shuffle_pairs']" in capsys.readouterr().out


def _replay_buffer(out, cfg, step):
  """The ExGRPO replay buffer saved in RL checkpoint ``step`` of the run in ``out``."""
  from rljax.train._advantage import initial_stage_states  # pylint: disable=import-outside-toplevel
  from rljax.train._checkpoint import Checkpointer  # pylint: disable=import-outside-toplevel
  from rljax.train._experiment import build_experiment  # pylint: disable=import-outside-toplevel
  from rljax.train._recipes import recipe_from_config  # pylint: disable=import-outside-toplevel
  from rljax.train._startup import bound_recipe  # pylint: disable=import-outside-toplevel
  exp = build_experiment(cfg)
  template = {"stages": initial_stage_states(bound_recipe(exp, recipe_from_config(cfg.rl))[0], len(exp.train_problems))}
  ckpt = Checkpointer(str(out / "checkpoints" / "rl"))
  tree, _, _ = ckpt.restore(template, step=step, parts=True)
  ckpt.close()
  return tree["stages"]["replay"]["exgrpo"]


@pytest.mark.long
def test_stateful_stages_resume_bit_for_bit(tmp_path):
  """hadw's EMA anchor, GRESO's per-prompt streaks and ExGRPO's replay buffer are checkpointed: resuming from
  step 2 continues exactly (the parameters, the stages' metrics and the buffer saved at step 3, bit for bit)."""
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  ov = ["rl.steps=3", "checkpoint.every=2", "rl.advantage=grpo, hadw(decay=0.5)", "rl.prompt_filters=greso",
        "rl.replay=exgrpo(ratio=0.5)", "rl.loss=exgrpo_policy"]
  out = tmp_path / "run"
  full = train(_cfg(out, *ov))
  rows = _rows(out)
  buffer = _replay_buffer(out, _cfg(out, *ov), 3)
  assert (buffer.seq >= 0).sum() > 0 and rows[-1]["exgrpo/replayed"] > 0  # the buffer was used
  shutil.rmtree(out / "checkpoints" / "rl" / "3")
  resumed = train(_cfg(out, *ov), resume=True)
  again = _rows(out)
  for a, b in zip(_leaves(full["params"]), _leaves(resumed["params"])):
    np.testing.assert_array_equal(a, b)
  keys = [k for k in rows[-1] if k.startswith(("hadw/", "greso/", "exgrpo/"))]
  assert keys and all(again[-1][k] == rows[-1][k] for k in keys), keys
  for name, a, b in zip(type(buffer)._fields, buffer, _replay_buffer(out, _cfg(out, *ov), 3)):
    assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), name


def test_python_recipe_from_a_config_file_trains_checkpoints_and_evaluates(tmp_path, capsys):
  path = tmp_path / "my_config.py"
  path.write_text(textwrap.dedent(f'''
      import numpy as np
      from rljax.recipes import Recipe
      from rljax.stages import Advantage
      from rljax.train import apply_overrides, tiny_config

      def centred(data):
          adv = np.where(data.valid, data.rewards - data.rewards[data.valid].mean(), 0.0)
          return adv.astype(np.float32), {{"spread": float(adv.std())}}

      def get_config():
          return apply_overrides(tiny_config({str(tmp_path / "run")!r}), {BASE!r} + ["rl.steps=2"])

      def get_recipe():
          return Recipe(rewards={DENSE!r}, advantage=Advantage(centred, name="centred"),
                        loss="ppo_clip, kl_penalty(beta=0.01)")
  '''))
  assert cli.main(["train", "--config", str(path)]) == 0
  rows = _rows(tmp_path / "run")
  assert len(rows) == 2 and all("centred/spread" in r for r in rows)
  with open(tmp_path / "run" / "recipe.json") as f:
    assert json.load(f)["python"] is True
  capsys.readouterr()
  # the checkpoint (with the reference parameters of the KL term) evaluates without the recipe
  assert cli.main(["eval", "--run-dir", str(tmp_path / "run"), "--num-samples", "1", "--k", "1",
                   "--num-problems", "4"]) == 0
  assert json.loads(capsys.readouterr().out)["step"] == 2
  # a recipe field set on the command line would be ignored: refused
  assert cli.main(["train", "--config", str(path), "--set", "rl.advantage=rloo"]) == 2
  assert "get_recipe() gives the recipe" in capsys.readouterr().err


def test_resume_with_another_recipe_is_refused(tmp_path):
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  train(_cfg(tmp_path, "rl.steps=1"))
  with pytest.raises(ValueError, match="was trained with the recipe"):
    train(_cfg(tmp_path, "rl.steps=2", "rl.advantage=rloo"), resume=True)


def test_start_up_refusals_name_the_stage_and_the_input(tmp_path):
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  with pytest.raises(NeedError, match=r"'value_loss' needs 'returns'.*gae"):  # a critic with a GRPO advantage
    train(_cfg(tmp_path / "a", "rl.steps=1", "rl.critic=value_loss"))
  with pytest.raises(ValueError, match=r"stage 'bad_advantage' fails on a synthetic batch at start-up"):
    train(_cfg(tmp_path / "b", "rl.steps=1"), recipe=Recipe(advantage=Advantage(lambda d: 1 / 0, name="bad_advantage")))
  assert not os.path.exists(tmp_path / "a" / "config.json") and not os.path.exists(tmp_path / "b" / "metrics.jsonl")


def test_objective_fn_keeps_the_replaced_losss_needs(tmp_path):
  """train(objective_fn=...) with a KL term in the config's loss: the reference forward still runs."""
  from rljax.objectives import chain, kl_penalty, ppo_clip  # pylint: disable=import-outside-toplevel
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  seen = {}

  def objective(hp):
    seen.update(hp)
    return chain(ppo_clip(hp["clip_low"], hp["clip_high"]), kl_penalty(beta=hp["kl_beta"]))

  train(_cfg(tmp_path, "rl.steps=1", "checkpoint.enabled=false", "rl.loss=ppo_clip, kl_penalty(beta=0.05)"),
        objective_fn=objective)
  assert np.isfinite(_rows(tmp_path)[0]["kl_penalty/kl"]) and {"clip_low", "kl_beta"} <= set(seen)


def test_the_loop_computes_only_what_the_recipe_needs(tmp_path):
  """No reference copy or forward without a stage reading logp_ref/entropy_ref/logp_teacher; no proximal forward
  for a loss that reads no ratio (gpg)."""
  from rljax.train._experiment import build_experiment  # pylint: disable=import-outside-toplevel
  from rljax.train._rl import rl_templates  # pylint: disable=import-outside-toplevel
  from rljax.train._startup import bound_recipe  # pylint: disable=import-outside-toplevel
  from rljax.train._inputs import REFERENCE_NEEDS  # pylint: disable=import-outside-toplevel
  from rljax.train._optim import make_optimizer  # pylint: disable=import-outside-toplevel
  from rljax.train._step import init_train_state  # pylint: disable=import-outside-toplevel
  cfg = _cfg(tmp_path)
  exp = build_experiment(cfg)
  graphdef, state = init_train_state(exp.model, make_optimizer(cfg.sft.optim, 1)[0])
  for loss, with_ref in (("ppo_clip", False), ("ppo_clip, kl_penalty(beta=0.01)", True),
                         ("ppo_clip, entropy_gated_contrastive(rho=0.5)", True), ("gpg", False)):
    recipe = bound_recipe(exp, Recipe(rewards=DENSE, loss=loss))[0]
    ref = rl_templates(exp, cfg, recipe, graphdef, state)[4]
    assert bool(ref) == with_ref == bool(recipe.needs & REFERENCE_NEEDS), loss
  assert "logp_old" not in Recipe(loss="gpg").needs and "logp_old" in Recipe(loss="ppo_clip").needs
