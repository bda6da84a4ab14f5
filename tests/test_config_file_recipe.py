"""A partial recipe keeps the config's recipe, from a config file's ``get_recipe()``, ``train(cfg, recipe=...)`` and
``train(cfg, reward_fn=...)`` alike (issue #52 item 1): ``Recipe.given`` / ``Recipe.over``, every route, and what
``config.json`` / ``recipe.json`` record: the recipe that ran, a slot with a Python function as a marker naming
it, never the config's old value."""
import json
import textwrap

import pytest

from rljax import cli
from rljax.recipes import Recipe
from rljax.train import RLConfig, apply_overrides, config_from_dict, pretrained_config, run_recipe, tiny_config

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
  by_train_recipe = run_recipe(cfg, Recipe(rewards=(my_reward,)))  # train(cfg, recipe=Recipe(rewards=(fn,)))
  assert by_config_file.describe() == by_reward_fn.describe() == by_train_recipe.describe()
  assert by_train_recipe.initial_hparams() == by_reward_fn.initial_hparams()
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


@pytest.mark.long  # four training runs (~80 s on 2 loaded cores); the merge and the records are tested above
def test_both_routes_train_and_record_the_same_recipe(tmp_path, capsys):
  """The CLI with the config file, train(cfg, reward_fn=...) and train(cfg, recipe=Recipe(rewards=...)): recipe.json
  says what ran (the config's advantage and KL loss, the user's reward), and config.json agrees with it (the reward
  as a marker naming the function). A get_recipe() that also gives the loss trains and records that loss."""
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  assert cli.main(["train", "--config", _config_file(tmp_path, tmp_path / "a", "Recipe(rewards=(my_reward,))")]) == 0
  train(apply_overrides(tiny_config(str(tmp_path / "b")), OVERRIDES), reward_fn=my_reward)
  train(apply_overrides(tiny_config(str(tmp_path / "c")), OVERRIDES), recipe=Recipe(rewards=(my_reward,)))
  (tmp_path / "d").mkdir()
  assert cli.main(["train", "--config", _config_file(tmp_path / "d", tmp_path / "d" / "run",
                                                     "Recipe(rewards=(my_reward,), loss='reinforce')")]) == 0
  capsys.readouterr()
  runs = {}
  for name in ("a", "b", "c", "d/run"):
    recipe, config = _written(tmp_path / name)
    rl = config["rl"]
    loss = ["reinforce"] if name == "d/run" else PRETRAINED_LOSS
    assert recipe["python"] is True and recipe["rewards"] == ["my_reward"] and rl["rewards"] == "<python: my_reward>"
    assert recipe["advantage"] == [rl["advantage"]] == ["grpo(eps=0.0001)"]
    assert recipe["loss"] == loss and rl["loss"] == ", ".join(loss), name
    runs[name] = {k: v for k, v in recipe.items() if k != "name"}
  assert runs["a"] == runs["b"] == runs["c"]


def test_a_recipe_given_every_slot_is_not_merged():
  """Every slot given: nothing of the config's is read (a run's config.json may hold markers, which build no
  recipe), and the recipe runs as given."""
  slots = dict(rewards=(my_reward,), multi_reward=None, shaping="", prompt_filters="", filters="", replay="",
               advantage="rloo", loss="reinforce", aggregation="seq_mean_token_mean", controllers="", critic=None)
  cfg = tiny_config("unused")
  marked = cfg.replace(rl=RLConfig(rewards="<python: my_reward>", advantage="rloo"))
  got = run_recipe(marked, Recipe(**slots)).describe()
  assert (got["advantage"], got["loss"], got["aggregation"]) == (["rloo"], ["reinforce"], "seq_mean_token_mean")
  with pytest.raises(ValueError, match=r"RLConfig\.rewards='<python: my_reward>' records a Python stage"):
    run_recipe(marked, Recipe(rewards=(my_reward,)))  # partial: the config's recipe is needed, and cannot be built


def test_with_recipe_marks_each_slot_a_spec_cannot_hold():
  rl = tiny_config("unused").rl
  recipe = Recipe(rewards=(my_reward, "exact_match"), advantage="grpo(eps=0.0001)", loss=", ".join(PRETRAINED_LOSS))
  with pytest.raises(ValueError, match="reward.* stage 'my_reward' is not a catalog technique"):
    rl.with_recipe(recipe)  # a config of the user's own: refused, as before
  marked = rl.with_recipe(recipe, mark_python=True)
  assert marked.rewards == "<python: my_reward, exact_match>"
  assert (marked.advantage, marked.loss) == ("grpo(eps=0.0001)", ", ".join(PRETRAINED_LOSS))
  assert config_from_dict({"rewards": marked.rewards}, RLConfig).rewards == marked.rewards  # a config.json loads
  with pytest.raises(ValueError, match=r"RLConfig\.advantage='nope'"):  # the other fields are still checked
    RLConfig(rewards=marked.rewards, advantage="nope")

  def my_objective(hp):
    return None

  built = rl.with_recipe(Recipe(objective=my_objective), mark_python=True)
  assert built.loss == built.aggregation == "<python: objective my_objective>"
  direct = rl.with_recipe(Recipe(loss="ppo_clip", hparams={"clip_low": 0.1}), mark_python=True)
  assert direct.loss == "<python: ppo_clip, hparams {'clip_low': 0.1}>"


class _Stop(Exception):
  pass


def _written(out):
  with open(out / "recipe.json", encoding="utf-8") as f:
    recipe = json.load(f)
  with open(out / "config.json", encoding="utf-8") as f:
    config = json.load(f)
  return recipe, config


@pytest.mark.parametrize("route", ["config file with a loss", "train(recipe=partial)"])
def test_config_json_records_the_recipe_that_runs(tmp_path, monkeypatch, capsys, route):
  """The start writes config.json and recipe.json (the run is stopped there): the loss the run trains with, the
  config's advantage, the user's reward as a marker (issue #52 item 1b: config.json kept the config's rl.loss
  and a reward of ''; train(recipe=...) dropped the config's KL term)."""
  import rljax.train._run as run  # pylint: disable=import-outside-toplevel

  def stop(*a, **k):
    raise _Stop

  monkeypatch.setattr(run, "run_sft", stop)
  out = tmp_path / "run"
  if route == "config file with a loss":
    loss = ["reinforce"]  # given: it replaces the config's loss, KL term included, as the file says
    with pytest.raises(_Stop):
      cli.main(["train", "--config", _config_file(tmp_path, out, "Recipe(rewards=(my_reward,), loss='reinforce')")])
  else:
    loss = PRETRAINED_LOSS  # not given: the config's (its KL term), where it used to be Recipe's own ppo_clip
    with pytest.raises(_Stop):
      run.train(apply_overrides(tiny_config(str(out)), OVERRIDES), recipe=Recipe(rewards=(my_reward,)))
  capsys.readouterr()
  recipe, config = _written(out)
  assert recipe["loss"] == loss and recipe["advantage"] == ["grpo(eps=0.0001)"] and recipe["python"] is True
  rl = config["rl"]
  assert (rl["rewards"], rl["advantage"], rl["loss"]) == ("<python: my_reward>", "grpo(eps=0.0001)", ", ".join(loss))
  # the record loads (rljax eval / sample read it); a resume without the recipe is refused, naming the field
  assert config_from_dict(config).rl.rewards == "<python: my_reward>"
  before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
  assert cli.main(["train", "--resume", "--out-dir", str(out)]) == 2
  assert "rl.rewards='<python: my_reward>' records a Python stage" in capsys.readouterr().err
  assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before  # nothing written
