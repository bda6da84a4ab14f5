"""``model.hf_checkpoint`` as a Hugging Face Hub id (issue #52 item 2), offline: a hub cache laid out by hand
(``models--ORG--NAME/snapshots/<commit>/``, ``refs/<branch>``) holding a tiny model, ``HF_HUB_OFFLINE=1``."""
import json
import os
import shutil

import pytest

from rljax import cli
from rljax.data import TEMPLATES
from rljax.models import is_hub_id, resolve_checkpoint
from rljax.train import apply_overrides
from test_chat_templates import _questions, _run_config, _tiny_checkpoint, family_tokenizer

MAIN = "a" * 40  # the commit refs/main names
OTHER = "b" * 40  # a second commit, reached by its hash or the tag v1


def _lay_out_cache(cache, model_dir, repo="tiny-org/tiny-model"):
  """The hub cache layout huggingface_hub reads, by hand: two snapshots of ``model_dir``, refs main and v1."""
  root = os.path.join(cache, "models--" + repo.replace("/", "--"))
  for commit in (MAIN, OTHER):
    shutil.copytree(model_dir, os.path.join(root, "snapshots", commit))
  os.makedirs(os.path.join(root, "refs"))
  for ref, commit in (("main", MAIN), ("v1", OTHER)):
    with open(os.path.join(root, "refs", ref), "w", encoding="utf-8") as f:
      f.write(commit)
  return root


@pytest.fixture
def hub(tmp_path, monkeypatch):
  """``(HF_HUB_CACHE, snapshots root)`` with the tiny model cached as tiny-org/tiny-model; offline."""
  tok = family_tokenizer(tmp_path / "tok", "qwen", chat_template=TEMPLATES["qwen"])
  model = _tiny_checkpoint(tmp_path / "model", tok, vocab_size=272)
  cache = str(tmp_path / "hub")
  root = _lay_out_cache(cache, model)
  monkeypatch.setenv("HF_HUB_CACHE", cache)
  monkeypatch.setenv("HF_HUB_OFFLINE", "1")
  monkeypatch.chdir(tmp_path)  # "tiny-org/tiny-model" names nothing on the local disk
  return cache, root


def test_hub_ids_are_told_from_local_paths(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  assert is_hub_id("Qwen/Qwen2.5-0.5B-Instruct") and is_hub_id("tiny-org/tiny.model_2")
  assert not is_hub_id("/abs/path") and not is_hub_id("./rel/path") and not is_hub_id("a/b/c")
  assert not is_hub_id("org/model.gguf") and not is_hub_id("plain")
  os.makedirs(tmp_path / "org" / "name")
  assert not is_hub_id("org/name")  # a local directory wins


def test_a_hub_id_resolves_to_its_cached_snapshot(hub, tmp_path, monkeypatch):
  cache, root = hub
  assert resolve_checkpoint("tiny-org/tiny-model") == os.path.join(root, "snapshots", MAIN)
  assert resolve_checkpoint("tiny-org/tiny-model", "v1") == os.path.join(root, "snapshots", OTHER)
  assert resolve_checkpoint("tiny-org/tiny-model", OTHER) == os.path.join(root, "snapshots", OTHER)
  # HF_HOME/hub when HF_HUB_CACHE is not set
  monkeypatch.delenv("HF_HUB_CACHE")
  monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
  shutil.copytree(cache, tmp_path / "home" / "hub")
  assert resolve_checkpoint("tiny-org/tiny-model") == str(tmp_path / "home" / "hub" / os.path.relpath(
      os.path.join(root, "snapshots", MAIN), cache))


def test_a_hub_id_not_in_the_cache_offline_is_one_line_with_the_download_command(hub, tmp_path, capsys):
  with pytest.raises(ValueError, match=r"model\.hf_checkpoint='Qwen/Qwen2\.5-0\.5B-Instruct' \(a Hub id, or a local "
                     r"path that does not exist\) is not in the Hugging Face cache \(.*hub\) and HF_HUB_OFFLINE is "
                     r"set: download it with `hf download Qwen/Qwen2\.5-0\.5B-Instruct`"):
    resolve_checkpoint("Qwen/Qwen2.5-0.5B-Instruct")
  with pytest.raises(ValueError, match=r"hf_revision='v2'.*`hf download tiny-org/tiny-model --revision v2`"):
    resolve_checkpoint("tiny-org/tiny-model", "v2")
  with pytest.raises(ValueError, match=r"a revision applies to a Hub id only"):
    resolve_checkpoint(str(tmp_path / "model"), "main")
  data = _questions(tmp_path / "q.jsonl")
  before = sorted(os.listdir(tmp_path))
  assert cli.main(["train", "--out-dir", str(tmp_path / "run"), "--set", "model.hf_checkpoint=Qwen/Qwen2.5-0.5B-Instruct",
                   "--set", "task.name=jsonl", "--set", f"task.path={data}", "--set", "task.verifier=math_answer"]) == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and "hf download Qwen/Qwen2.5-0.5B-Instruct" in err
  assert sorted(os.listdir(tmp_path)) == before  # nothing written: no run directory, no cache entry
  assert sorted(os.listdir(hub[0])) == ["models--tiny-org--tiny-model"]


@pytest.mark.long  # a training run (~30 s on 2 loaded cores); the resolution is tested above in the fast loop
def test_a_run_on_a_hub_id_trains_and_records_the_id(hub, tmp_path, capsys):
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  cfg = _run_config(tmp_path / "run", "tiny-org/tiny-model", _questions(tmp_path / "q.jsonl"), "model.hf_revision=v1")
  train(cfg)
  with open(tmp_path / "run" / "config.json", encoding="utf-8") as f:
    model = json.load(f)["model"]
  assert (model["hf_checkpoint"], model["hf_revision"]) == ("tiny-org/tiny-model", "v1")
  assert (model["num_layers"], model["hidden_size"]) == (1, 16)  # the checkpoint's shape
  assert f"chat template ({os.path.join(hub[1], 'snapshots', OTHER)})" in capsys.readouterr().out
  with pytest.raises(ValueError, match=r"model\.hf_revision"):
    apply_overrides(cfg, ["model.hf_checkpoint=none"])
