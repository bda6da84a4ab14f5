"""A Hugging Face checkpoint brings its own architecture (issue #52 item 1b): shape fields set with
``model.hf_checkpoint`` are refused naming the checkpoint's value, before anything is written, and the run's
``config.json`` records the checkpoint's real shape."""
import dataclasses
import json
import os

import pytest

from rljax import cli
from rljax.data import TEMPLATES
from rljax.train import apply_overrides, checkpoint_architecture, with_checkpoint_architecture
from test_chat_templates import _questions, _run_config, _tiny_checkpoint, family_tokenizer

# the tiny checkpoint's shape (_tiny_checkpoint: ModelConfig.tiny with these values), by hand
TINY = {"num_layers": 1, "hidden_size": 16, "num_heads": 2, "num_kv_heads": 1, "intermediate_size": 32}


@pytest.fixture
def ckpt(tmp_path):
  tok = family_tokenizer(tmp_path / "tok", "qwen", chat_template=TEMPLATES["qwen"])
  return _tiny_checkpoint(tmp_path / "ckpt", tok, vocab_size=272)


def test_the_checkpoints_architecture_is_read_from_its_config_json(ckpt):
  with open(os.path.join(ckpt, "config.json"), encoding="utf-8") as f:
    hf = json.load(f)
  arch = checkpoint_architecture(ckpt)
  assert {k: arch[k] for k in TINY} == TINY
  assert arch["max_seq_len"] == hf["max_position_embeddings"]


def test_a_set_shape_field_other_than_the_checkpoints_is_refused(ckpt, tmp_path):
  cfg = _run_config(tmp_path / "run", ckpt, _questions(tmp_path / "q.jsonl"))  # tiny_config's from-scratch shape
  assert cfg.model.hidden_size != 16
  with pytest.raises(ValueError, match=r"model\.num_layers=3 is set with model\.hf_checkpoint=.*whose num_layers is 1"):
    with_checkpoint_architecture(apply_overrides(cfg, ["model.num_layers=3"]))
  with pytest.raises(ValueError, match=r"model\.hidden_size=64 .* whose hidden_size is 16"):
    with_checkpoint_architecture(apply_overrides(cfg, ["model.hidden_size=64"]))
  # the checkpoint's own value is no change; fields not set take the checkpoint's values
  got = with_checkpoint_architecture(apply_overrides(cfg, ["model.num_layers=1"]))
  assert {k: getattr(got.model, k) for k in TINY} == TINY
  assert with_checkpoint_architecture(got) == got  # its result is accepted again (a resume of the same config)


def test_set_fields_are_told_from_defaults_even_at_the_default_value():
  from rljax.train import ModelSpec, ShapeDefault, config_to_dict, tiny_config  # pylint: disable=C0415
  spec = ModelSpec()
  assert all(isinstance(getattr(spec, f), ShapeDefault) for f in TINY)  # the dataclass defaults: not set
  assert all(isinstance(getattr(tiny_config().model, f), ShapeDefault) for f in TINY)  # a library config's shape
  written = ModelSpec(hidden_size=64)  # the default's value, written by the user: set
  assert written == spec and not isinstance(written.hidden_size, ShapeDefault)
  assert not isinstance(dataclasses.replace(spec, num_layers=2).num_layers, ShapeDefault)
  over = apply_overrides(tiny_config(), ["model.num_heads=2", "model.dtype=bfloat16"])
  assert not isinstance(over.model.num_heads, ShapeDefault)  # --set, even at the config's own value
  assert isinstance(over.model.hidden_size, ShapeDefault)  # fields --set leaves alone stay defaults
  # an int in every other respect: the same JSON, hash and repr
  assert json.dumps(config_to_dict(over)["model"]) == json.dumps(config_to_dict(over.replace(
      model=dataclasses.replace(over.model, **{f: int(getattr(over.model, f)) for f in TINY})))["model"])
  assert repr(ShapeDefault(7)) == "7" and hash(ShapeDefault(7)) == hash(7)


def _config_file(path, ckpt, data, model_fields):
  path.write_text(f"""
from rljax.train import EvalConfig, ModelSpec, RLConfig, SFTConfig, TaskConfig, tiny_config

def get_config():
  return tiny_config({str(path.parent / "file_run")!r}).replace(
      model=ModelSpec(hf_checkpoint={ckpt!r}, {model_fields}),
      task=TaskConfig(name="jsonl", path={data!r}, verifier="math_answer", num_test=4),
      sft=SFTConfig(steps=1, batch_size=4), rl=RLConfig(steps=0, max_new_tokens=3),
      eval=EvalConfig(num_problems=4, batch_size=4, num_samples=1, pass_k=(1,)))
""")
  return str(path)


def test_a_python_config_files_shape_fields_are_refused_not_corrected(ckpt, tmp_path, capsys):
  data = _questions(tmp_path / "q.jsonl")
  # hidden_size=64 and num_layers=2 are ModelSpec's defaults: written in the file, they are the user's
  bad = _config_file(tmp_path / "bad.py", ckpt, data, "hidden_size=64, num_layers=2")
  assert cli.main(["train", "--config", bad]) == 2
  err = capsys.readouterr().err
  assert ("model.num_layers=2 and model.hidden_size=64 are set with model.hf_checkpoint=" in err
          and "whose num_layers is 1 and hidden_size is 16" in err), err
  assert not os.path.exists(tmp_path / "file_run")
  # the checkpoint's own values, or none at all, are accepted; --print-config shows the checkpoint's shape
  for fields in ("hidden_size=16, num_layers=1", "dtype='float32'"):
    good = _config_file(tmp_path / "good.py", ckpt, data, fields)
    assert cli.main(["train", "--config", good, "--print-config"]) == 0
    model = json.loads(capsys.readouterr().out)["model"]
    assert {k: model[k] for k in TINY} == TINY
  assert not os.path.exists(tmp_path / "file_run")


def test_train_refuses_a_python_configs_shape_fields_before_writing(ckpt, tmp_path):
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  cfg = _run_config(tmp_path / "run", ckpt, _questions(tmp_path / "q.jsonl"))
  bad = cfg.replace(model=dataclasses.replace(cfg.model, num_kv_heads=4))  # the ModelSpec default's value
  with pytest.raises(ValueError, match=r"model\.num_kv_heads=4 is set with .* whose num_kv_heads is 1"):
    train(bad)
  assert not os.path.exists(cfg.out_dir)


def test_the_cli_refuses_a_set_shape_field_before_writing(ckpt, tmp_path, capsys):
  data = _questions(tmp_path / "q.jsonl")
  # the CLI: --set model.hidden_size=64 (the toy default) on a checkpoint is refused too, nothing written
  sets = [a for s in ["model.hidden_size=64", "model.hf_checkpoint=" + ckpt, "task.name=jsonl", "task.path=" + data,
                      "task.verifier=math_answer"] for a in ("--set", s)]
  assert cli.main(["train", "--out-dir", str(tmp_path / "cli"), *sets]) == 2
  err = capsys.readouterr().err
  assert "model.hidden_size=64 is set with model.hf_checkpoint" in err and "whose hidden_size is 16" in err
  assert not os.path.exists(tmp_path / "cli")


@pytest.mark.long  # a run and its resume (~50 s on 2 loaded cores)
def test_a_run_records_the_checkpoints_shape_and_resumes(ckpt, tmp_path, capsys):
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  good = _run_config(tmp_path / "run", ckpt, _questions(tmp_path / "q.jsonl"))
  train(good)
  with open(tmp_path / "run" / "config.json", encoding="utf-8") as f:
    model = json.load(f)["model"]
  assert {k: model[k] for k in TINY} == TINY and model["max_seq_len"] == checkpoint_architecture(ckpt)["max_seq_len"]
  # the same Python config (tiny_config's shape) resumes: its shape fields become the checkpoint's, as recorded
  out = train(apply_overrides(good, ["sft.steps=2"]), resume=True)
  assert out["out_dir"] == str(tmp_path / "run")
  capsys.readouterr()


def test_a_written_config_json_records_its_shape_and_is_not_refused(ckpt, tmp_path, capsys):
  from rljax.train import config_to_dict  # pylint: disable=import-outside-toplevel
  # a config.json as rljax arena writes it (the toy shape beside the checkpoint) is a record, not the user's choice
  cfg = _run_config(tmp_path / "run", ckpt, _questions(tmp_path / "q.jsonl"))
  path = tmp_path / "config.json"
  path.write_text(json.dumps(config_to_dict(cfg)))
  assert json.loads(path.read_text())["model"]["hidden_size"] != 16
  assert cli.main(["train", "--config", str(path), "--print-config"]) == 0
  model = json.loads(capsys.readouterr().out)["model"]
  assert {k: model[k] for k in TINY} == TINY
  # a --set of a shape field on top of it is the user's, and refused
  assert cli.main(["train", "--config", str(path), "--set", "model.num_layers=2", "--print-config"]) == 2
  assert "model.num_layers=2 is set with model.hf_checkpoint" in capsys.readouterr().err
