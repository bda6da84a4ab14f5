"""``sft.init_from``: a run starts from another run's finished SFT checkpoint; bad sources are refused at start-up,
before anything is written. (The happy path, two RL runs from one warm start, is in tests/test_arena.py.)"""
import json
import os

import pytest

from rljax.train import apply_overrides, config_to_dict, tiny_config, train
from rljax.train._sft import check_init_from


def _source(tmp_path, *overrides):
  """A run directory holding only a config.json (no checkpoint)."""
  d = tmp_path / "source"
  d.mkdir()
  cfg = apply_overrides(tiny_config(str(d)), list(overrides))
  (d / "config.json").write_text(json.dumps(config_to_dict(cfg)))
  return str(d)


def test_config_field_is_validated():
  with pytest.raises(ValueError, match=r"invalid config value sft.init_from=''"):
    apply_overrides(tiny_config(), ["sft.init_from="])
  assert apply_overrides(tiny_config(), ["sft.init_from=runs/x"]).sft.init_from == "runs/x"
  assert check_init_from(tiny_config()) is None  # unset: nothing to check


def test_bad_sources_are_refused_with_the_reason(tmp_path):
  out = str(tmp_path / "run")
  cfg = lambda src: apply_overrides(tiny_config(out), [f"sft.init_from={src}"])
  with pytest.raises(ValueError, match=r"sft.init_from='.*nowhere': run directory .* does not exist"):
    check_init_from(cfg(str(tmp_path / "nowhere")))
  (tmp_path / "empty").mkdir()
  with pytest.raises(ValueError, match=r"sft.init_from='.*empty': .* is not an rljax run directory"):
    check_init_from(cfg(str(tmp_path / "empty")))
  with pytest.raises(ValueError, match="this run's own directory"):
    check_init_from(cfg(out))
  src = _source(tmp_path, "task.digits=3", "model.hidden_size=64")
  with pytest.raises(ValueError, match=r"was trained with another model config \(hidden_size 64 → 32\)"):
    check_init_from(cfg(src))
  with pytest.raises(ValueError, match=r"another task config \(digits 3 → 2\)"):
    check_init_from(apply_overrides(cfg(src), ["model.hidden_size=64"]))
  ok = apply_overrides(cfg(src), ["model.hidden_size=64", "task.digits=3", "seed=5", "rl.steps=9"])
  with pytest.raises(ValueError, match="has no SFT checkpoint"):  # model and task agree; seed and RL may differ
    check_init_from(ok)


def test_train_refuses_before_writing(tmp_path):
  out = tmp_path / "run"
  with pytest.raises(ValueError, match="sft.init_from"):
    train(apply_overrides(tiny_config(str(out)), [f"sft.init_from={tmp_path / 'nowhere'}"]))
  assert not out.exists()
