"""Weights & Biases as one more metrics sink (issue #52 item 3): ``--set wandb=true`` logs the project, the run
name, the config, every metric and the plot, tested in wandb's offline mode by reading the offline run file back;
without the wandb package the start is refused with the install command, nothing written."""
import glob
import json
import os
import struct
import sys

import pytest

from rljax import cli
from rljax.train import apply_overrides, read_jsonl, tiny_config

TINY = ["task.digits=1", "sft.steps=2", "sft.batch_size=4", "rl.steps=2", "rl.num_prompts=2", "rl.group_size=2",
        "rl.max_new_tokens=4", "checkpoint.enabled=false", "eval.num_problems=2", "eval.batch_size=2",
        "eval.num_samples=1", "eval.pass_k=1"]


def test_wandb_without_the_package_is_refused_with_the_install_command(tmp_path, monkeypatch, capsys):
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  monkeypatch.setitem(sys.modules, "wandb", None)  # importlib.util.find_spec("wandb") is None: not installed
  cfg = apply_overrides(tiny_config(str(tmp_path / "run")), TINY + ["wandb=true"])
  with pytest.raises(ValueError, match=r'wandb=true .* needs the wandb package: pip install -e "\.\[wandb\]"'):
    train(cfg)
  assert cli.main(["train", "--out-dir", str(tmp_path / "cli"), "--set", "wandb=true"]) == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and 'pip install -e ".[wandb]"' in err
  assert not os.path.exists(tmp_path / "run") and not os.path.exists(tmp_path / "cli")
  with pytest.raises(ValueError, match=r"RunConfig\.wandb"):
    tiny_config(str(tmp_path / "x")).replace(wandb="yes")


def _records(path):
  """The protobuf records of a wandb run file (``run-<id>.wandb``: a ``:W&B`` header, then LevelDB-log blocks of
  32 KiB; each chunk ``crc32 u32, length u16, type u8`` with FULL=1 / FIRST=2 / MIDDLE=3 / LAST=4)."""
  from wandb.proto import wandb_internal_pb2 as pb  # pylint: disable=import-outside-toplevel
  with open(path, "rb") as f:
    data = f.read()
  assert data[:4] == b":W&B"
  pos, block, payload = 7, 32768, b""
  while pos + 7 <= len(data):
    left = block - pos % block
    _, length, kind = struct.unpack("<IHB", data[pos:pos + 7]) if left >= 7 else (0, 0, 0)
    if left < 7 or (length == 0 and kind == 0):  # block trailer / padding
      pos += left
      continue
    payload += data[pos + 7:pos + 7 + length]
    pos += 7 + length
    if kind in (1, 4):
      record = pb.Record()
      record.ParseFromString(payload)
      payload = b""
      yield record


@pytest.mark.long  # wandb's import and its offline service take ~10-20 s
def test_a_run_logs_every_metric_the_config_and_the_plot_to_wandb_offline(tmp_path, monkeypatch, capsys):
  pytest.importorskip("wandb", reason='the wandb extra: pip install -e ".[wandb]"')
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  for k, v in {"WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path / "wb"), "WANDB_SILENT": "true"}.items():
    monkeypatch.setenv(k, v)
  os.makedirs(tmp_path / "wb")
  out = tmp_path / "run"
  train(apply_overrides(tiny_config(str(out)), TINY + ["wandb=true", "wandb_project=my-project", "plot=true"]))
  capsys.readouterr()
  import wandb  # pylint: disable=import-outside-toplevel
  wandb.teardown()  # the offline run file is complete once wandb's service has stopped
  files = glob.glob(str(tmp_path / "wb" / "wandb" / "offline-run-*" / "run-*.wandb"))
  assert len(files) == 1
  records = list(_records(files[0]))
  run = next(r.run for r in records if r.WhichOneof("record_type") == "run")
  assert (run.project, run.display_name) == ("my-project", "run")  # the run name: out_dir's last folder
  config = {u.key or "/".join(u.nested_key): json.loads(u.value_json) for u in run.config.update}
  with open(out / "config.json", encoding="utf-8") as f:
    assert {k: config[k] for k in ("seed", "rl", "sft", "model")} == {
        k: v for k, v in json.load(f).items() if k in ("seed", "rl", "sft", "model")}
  history = {}  # wandb's _step -> the row logged (a long row may come in several history records)
  for r in records:
    if r.WhichOneof("record_type") == "history":
      items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
      history.setdefault(items["_step"], {}).update(items)
  history = list(history.values())
  rows = read_jsonl(str(out / "metrics.jsonl"))
  assert {r["stage"] for r in rows} == {"sft", "rl"} and len(rows) >= 5
  for row in rows:  # every metric of every row arrived, against its stage's step
    want = {f"{row['stage']}/{k}": v for k, v in row.items() if k not in ("stage", "step") and isinstance(v, float)}
    same = [h for h in history if h.get(f"{row['stage']}/step") == row["step"]]
    assert any(all(h.get(k) == v for k, v in want.items()) for h in same), (row, same)
  plot = [h for h in history if h.get("metrics.png/_type") == "image-file"]
  assert len(plot) == 1
  assert os.path.isfile(os.path.join(os.path.dirname(files[0]), "files", plot[0]["metrics.png/path"]))
