"""A Hugging Face checkpoint brings its own architecture (issue #52 item 1b): shape fields set with
``model.hf_checkpoint`` are refused naming the checkpoint's value, before anything is written, and the run's
``config.json`` records the checkpoint's real shape."""
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
    with_checkpoint_architecture(apply_overrides(cfg, ["model.num_layers=3"]), set_fields=("num_layers",))
  with pytest.raises(ValueError, match=r"model\.hidden_size=64 .* whose hidden_size is 16"):
    with_checkpoint_architecture(apply_overrides(cfg, ["model.hidden_size=64"]), set_fields=("hidden_size",))
  # the checkpoint's own value is no change; fields not set take the checkpoint's values
  got = with_checkpoint_architecture(apply_overrides(cfg, ["model.num_layers=1"]), set_fields=("num_layers",))
  assert {k: getattr(got.model, k) for k in TINY} == TINY


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
