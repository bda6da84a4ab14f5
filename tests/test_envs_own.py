"""Your own environment in training: ``task.name=env`` with ``task.env="module:factory"`` (or a file's function),
the refusal of an object that is not an environment before anything is written, and resume rebuilding it."""
import json
import os

import numpy as np
import pytest

from rljax import envs
from rljax.envs.examples import Guess, make_guess
from rljax.train import apply_overrides, config_from_dict, tiny_config, train
from rljax.train._experiment import build_task

_GUESS = "rljax.envs.examples:make_guess(high=5, max_turns=3)"


def _cfg(out_dir, spec=_GUESS, extra=()):
  return apply_overrides(tiny_config(str(out_dir)), [
      "task.name=env", f"task.env={spec}", "task.num_train=32", "task.num_test=2", "task.max_obs_tokens=16",
      "rl.steps=2", "rl.num_prompts=2", "rl.group_size=2", "rl.max_new_tokens=3", "rl.updates_per_batch=1",
      "sft.steps=1", "sft.batch_size=2", "eval.num_problems=2", "eval.batch_size=2", *extra])


@pytest.mark.long
def test_guess_trains_from_its_factory_and_resume_rebuilds_it(tmp_path):
  summary = train(_cfg(tmp_path), overwrite=True)
  rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl", encoding="utf-8")]
  steps = [r for r in rows if r.get("stage") == "rl" and "rollout/turns" in r]
  assert len(steps) == 2 and all(np.isfinite(r["loss"]) and 1 <= r["rollout/turns"] <= 3 for r in steps), steps
  assert 0.0 <= summary["rl"]["greedy_accuracy"] <= 1.0
  with open(tmp_path / "config.json", encoding="utf-8") as f:
    saved = config_from_dict(json.load(f))  # what rljax train --resume starts from
  assert saved.task.name == "env" and saved.task.env == _GUESS
  task = build_task(saved)
  assert task.env == Guess(high=5, max_turns=3) and task.max_turns == 3  # the same environment, arguments included
  assert task.episode_config.stop_strings == ("\n",)


def test_demonstrations_and_default_problems():
  task = envs.own_env_task("rljax.envs.examples:make_guess", need_demonstrations=True)
  train_p, test_p = task.problems("train", 20, 0), task.problems("test", 20, 0)
  assert not {p.meta["seed"] for p in train_p} & {p.meta["seed"] for p in test_p}  # disjoint seeds
  for p in train_p:  # binary search finds 1..9 within 4 guesses
    ep = task.demonstration_episode(p)
    assert task.success(ep) == 1.0 and ep.turns <= 4
  assert set("Guess my number (1-9):\nhigher\nlower\n") <= set("".join(task.corpus()))


def test_a_config_files_function_is_stored_as_its_file(tmp_path):
  from rljax.cli import load_config  # pylint: disable=import-outside-toplevel
  path = tmp_path / "my_env.py"
  path.write_text("from rljax.envs.examples import Guess\nfrom rljax.train import TaskConfig, tiny_config\n\n\n"
                  "def make_env():\n  return Guess(high=7)\n\n\n"
                  "def get_config():\n  cfg = tiny_config()\n"
                  "  return cfg.replace(task=TaskConfig(name='env', env=make_env, num_train=32, num_test=2))\n")
  cfg = load_config(str(path))
  assert cfg.task.env == f"{path}:make_env"
  assert build_task(cfg).env == Guess(high=7)
  assert TaskConfig_env(make_guess) == "rljax.envs.examples:make_guess"  # an importable module: module:function


def TaskConfig_env(fn):  # pylint: disable=invalid-name
  from rljax.train import TaskConfig  # pylint: disable=import-outside-toplevel
  return TaskConfig(name="env", env=fn).env


def test_an_object_that_is_not_an_environment_is_refused_before_any_write(tmp_path):
  factory = tmp_path / "bad_env.py"
  factory.write_text("class Half:\n  def reset(self, problem, seed):\n    return 0, 'hi'\n  stop_strings = '\\n'\n\n\n"
                     "def make_nothing():\n  return object()\n\n\ndef make_half():\n  return Half()\n")
  out = tmp_path / "run"
  with pytest.raises(ValueError, match=r"task.env=.*make_nothing.*not an environment.*lacks reset\(problem, "
                                       r"seed\).*lacks step\(state, action\)"):
    train(_cfg(out, f"{factory}:make_nothing"), overwrite=True)
  with pytest.raises(ValueError, match=r"make_half.*lacks step.*lacks demonstrate\(episode\).*sft.steps=0.*"
                                       r"stop_strings='\\n'"):
    train(_cfg(out, f"{factory}:make_half"), overwrite=True)
  assert not os.path.exists(out)  # nothing written
  with pytest.raises(ValueError, match="task.env=.*no function 'missing'"):
    train(_cfg(out, "rljax.envs.examples:missing"), overwrite=True)
  with pytest.raises(ValueError, match="task.env=.*cannot import 'no_such_pkg.envs'"):
    train(_cfg(out, "no_such_pkg.envs:make"), overwrite=True)
  with pytest.raises(ValueError, match=r"task.env=.*make_guess\(\.\.\.\) raised TypeError"):
    train(_cfg(out, "rljax.envs.examples:make_guess(size=3)"), overwrite=True)
  assert not os.path.exists(out)
  # the string's form is checked when the config is made
  with pytest.raises(ValueError, match="task.env.*module:function"):
    apply_overrides(tiny_config(str(out)), ["task.name=env", "task.env=make_guess"])
  with pytest.raises(ValueError, match="task.env.*literals"):
    apply_overrides(tiny_config(str(out)), ["task.name=env", "task.env=m:f(size=x)"])
  with pytest.raises(ValueError, match="task.env.*left unset.*arithmetic"):
    apply_overrides(tiny_config(str(out)), [f"task.env={_GUESS}"])
