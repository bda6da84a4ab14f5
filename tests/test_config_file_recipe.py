"""A config file's partial ``get_recipe()`` keeps the config's recipe, as ``train(cfg, reward_fn=...)`` does
(issue #52 item 1a): ``Recipe.given`` / ``Recipe.over``, both routes, and what ``config.json`` / ``recipe.json``
record."""
import json
import textwrap

import pytest

from rljax import cli
from rljax.recipes import Recipe
from rljax.train import apply_overrides, pretrained_config, run_recipe, tiny_config

# pretrained_config's loss (DAPO bounds + a k3 KL penalty), written out by hand: the reference of the merge
PRETRAINED_LOSS = ["ppo_clip(eps_low=0.2, eps_high=0.28)", "kl_penalty(beta=0.001, estimator='k3')"]


def my_reward(completions, problems):
  return [float(c == p.answer) for c, p in zip(completions, problems)]


def test_given_records_the_constructor_arguments_and_replace_changes():
  assert Recipe().given == frozenset()
  assert Recipe(rewards=(my_reward,)).given == {"rewards"}
  assert Recipe("exact_match", None, "", advantage="rloo").given == {"rewards", "multi_reward", "shaping", "advantage"}
  assert Recipe(rewards=(my_reward,)).replace(loss="ppo_clip").given == {"rewards", "loss"}


def test_over_takes_only_the_given_fields():
  base = Recipe(rewards="exact_match, format_regex(pattern='a')", multi_reward="composite",
                shaping="overlong_penalty(buffer_len=4, max_len=8)", advantage="grpo(eps=0.0001)",
                loss=", ".join(PRETRAINED_LOSS), aggregation="seq_mean_token_mean", name="config")
  merged = Recipe(rewards=(my_reward,)).over(base)
  d = merged.describe()
  assert d["rewards"] == ["my_reward"] and d["multi_reward"] is None  # the base's combiner combined its rewards
  for slot in ("shaping", "advantage", "loss", "aggregation", "filters", "controllers", "name"):
    assert d[slot] == base.describe()[slot], slot
  # a given field equal to Recipe's default still replaces the base's value
  assert Recipe(advantage="grpo").over(base).describe()["advantage"] == ["grpo"]
  # a builder brings its whole loss
  obj = Recipe(objective=lambda hp: None, hparams={"kl_beta": 0.5}).over(base)
  assert obj.loss == () and obj.hparams == {"kl_beta": 0.5} and obj.describe()["shaping"] == base.describe()["shaping"]


def test_a_reward_only_recipe_keeps_pretrained_configs_kl_term(tmp_path):
  """Both routes give the same recipe: the reward replaced, the KL term and the DAPO bounds kept."""
  cfg = pretrained_config(str(tmp_path / "ckpt"))
  assert cfg.rl.recipe().describe()["loss"] == PRETRAINED_LOSS
  by_reward_fn = run_recipe(cfg, reward_fn=my_reward)
  by_config_file = Recipe(rewards=(my_reward,)).over(cfg.rl.recipe())
  assert by_config_file.describe() == by_reward_fn.describe()
  assert by_config_file.describe()["loss"] == PRETRAINED_LOSS and "logp_ref" in by_config_file.needs
  assert by_config_file.initial_hparams() == by_reward_fn.initial_hparams() == {
      "clip_low": 0.2, "clip_high": 0.28, "kl_beta": 0.001}


def _config_file(tmp_path, out, recipe_expr):
  path = tmp_path / "mine.py"
  path.write_text(textwrap.dedent(f'''
      from rljax.recipes import Recipe
      from rljax.train import apply_overrides, tiny_config

      def get_config():
          return apply_overrides(tiny_config({str(out)!r}), {OVERRIDES!r})

      def my_reward(completions, problems):
          return [float(c == p.answer) for c, p in zip(completions, problems)]

      def get_recipe():
          return {recipe_expr}
  '''), encoding="utf-8")
  return str(path)


OVERRIDES = ["task.digits=1", "sft.steps=0", "rl.steps=1", "rl.num_prompts=2", "rl.group_size=2",
             "rl.max_new_tokens=4", "checkpoint.enabled=false", "eval.num_problems=2", "eval.batch_size=2",
             "eval.num_samples=1", "eval.pass_k=1", "plot=false", "rl.advantage=grpo(eps=0.0001)",
             "rl.loss=" + ", ".join(PRETRAINED_LOSS)]


def test_load_config_and_recipe_merges_the_files_recipe(tmp_path):
  cfg, recipe = cli.load_config_and_recipe(_config_file(tmp_path, tmp_path / "run", "Recipe(rewards=(my_reward,))"))
  d = recipe.describe()
  assert d["rewards"] == ["my_reward"]
  assert d["advantage"] == ["grpo(eps=0.0001)"] and d["loss"] == PRETRAINED_LOSS  # not Recipe's grpo / ppo_clip
  assert d == run_recipe(cfg, reward_fn=recipe.rewards[0].fn).describe()


@pytest.mark.long  # two training runs (~40 s on 2 loaded cores); the merge itself is tested above in the fast loop
def test_both_routes_train_and_record_the_same_recipe(tmp_path, capsys):
  """The CLI with the config file and train(cfg, reward_fn=...): recipe.json says what ran (the config's
  advantage and KL loss, the user's reward), and config.json's recipe fields agree with it."""
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  assert cli.main(["train", "--config", _config_file(tmp_path, tmp_path / "a", "Recipe(rewards=(my_reward,))")]) == 0
  train(apply_overrides(tiny_config(str(tmp_path / "b")), OVERRIDES), reward_fn=my_reward)
  capsys.readouterr()
  runs = {}
  for name in ("a", "b"):
    with open(tmp_path / name / "recipe.json", encoding="utf-8") as f:
      recipe = json.load(f)
    with open(tmp_path / name / "config.json", encoding="utf-8") as f:
      rl = json.load(f)["rl"]
    assert recipe["python"] is True and recipe["rewards"] == ["my_reward"]
    assert recipe["advantage"] == [rl["advantage"]] == ["grpo(eps=0.0001)"]
    assert recipe["loss"] == PRETRAINED_LOSS and rl["loss"] == ", ".join(PRETRAINED_LOSS)
    runs[name] = {k: v for k, v in recipe.items() if k != "name"}
  assert runs["a"] == runs["b"]
