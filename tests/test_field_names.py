"""Config errors name fields as the user wrote them (issue #52 item 7): ``rl.loss`` through ``--set``, a config
file and ``train(cfg)``; the class attribute ``RLConfig.loss`` only where the user constructed the class."""
import os

import pytest

from rljax import cli
from rljax.train import RLConfig, apply_overrides, tiny_config
from rljax.train import user_field_names

CLASSES = ("RunConfig", "TaskConfig", "ModelSpec", "SFTConfig", "RLConfig", "EvalConfig", "CheckpointConfig",
           "MeshConfig", "OptimConfig")


def test_class_attributes_become_dotted_paths():
  assert user_field_names("invalid config value RLConfig.loss='x': must be") == "invalid config value rl.loss='x': must be"
  assert user_field_names("ModelSpec.lora_alpha and TaskConfig.path") == "model.lora_alpha and task.path"
  assert user_field_names("RunConfig.seed=-1") == "seed=-1"  # a top-level field has no section
  assert user_field_names("MeshConfig.fsdp, CheckpointConfig.every") == "mesh.fsdp, checkpoint.every"
  # OptimConfig is rl.optim or sft.optim: rewritten only when the route knows which
  assert user_field_names("OptimConfig.schedule='x'") == "OptimConfig.schedule='x'"
  assert user_field_names("OptimConfig.schedule='x'", optim="sft.optim") == "sft.optim.schedule='x'"
  # a qualified Python name in a hint, and a class named without a field, stay as written
  assert user_field_names("use rljax.train.RLConfig.loss") == "use rljax.train.RLConfig.loss"
  assert user_field_names("RLConfig has fields ['loss']") == "RLConfig has fields ['loss']"


@pytest.mark.parametrize("override, expected", [
    ("rl.loss=ppo2", "invalid config value rl.loss='ppo2': unknown loss term 'ppo2'"),
    ("model.hidden_size=65", "invalid config value model.hidden_size=65: must be divisible by num_heads=2"),
    ("sft.optim.schedule=step", "invalid config value sft.optim.schedule='step': must be one of"),
    ("rl.optim.schedule=step", "invalid config value rl.optim.schedule='step': must be one of"),
    ("seed=-1", "invalid config value seed=-1: must be a non-negative integer"),
    ("task.chat_template=mistral", "invalid config value task.chat_template='mistral'"),
])
def test_set_names_the_dotted_field(override, expected):
  with pytest.raises(ValueError) as err:
    apply_overrides(tiny_config(), [override])
  assert str(err.value).startswith(expected), str(err.value)
  assert not any(c + "." in str(err.value) for c in CLASSES), str(err.value)


def test_the_command_line_names_the_dotted_field(capsys):
  assert cli.main(["train", "--set", "rl.steps=-5"]) == 2
  err = capsys.readouterr().err
  assert "rljax train: error: invalid config value rl.steps=-5: must be a non-negative integer" in err, err
  assert "RLConfig" not in err


def test_a_config_file_names_the_dotted_field(tmp_path, capsys):
  for body, expected in [
      ("tiny_config().replace(rl=RLConfig(loss='ppo2'))", "invalid config value rl.loss='ppo2'"),
      ("tiny_config().replace(task=TaskConfig(name='csv'))", "invalid config value task.name='csv'")]:
    path = tmp_path / "bad.py"
    path.write_text("from rljax.train import RLConfig, TaskConfig, tiny_config\n\n\ndef get_config():\n"
                    f"  return {body}\n")
    assert cli.main(["train", "--config", str(path), "--out-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert expected in err and not any(c + "." in err for c in CLASSES), err
  assert not os.path.exists(tmp_path / "run")


def test_train_names_the_dotted_field(tmp_path):
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  cfg = apply_overrides(tiny_config(str(tmp_path / "run")), ["rl.routing_replay=true"])  # valid until train sees
  with pytest.raises(ValueError, match=r"^invalid config value rl\.routing_replay=True: needs an MoE model"):
    train(cfg)  # the dense model
  assert not os.path.exists(tmp_path / "run")


def test_constructing_the_class_names_the_class():
  with pytest.raises(ValueError, match=r"^invalid config value RLConfig\.steps=-1"):
    RLConfig(steps=-1)  # the user wrote RLConfig(...): its own name is the one they know
