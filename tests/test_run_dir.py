"""Run directories never lose or mix data: refusals, --resume from the run's own config, --overwrite, corrupt and
mismatched checkpoints. Each case asserts the directory's files afterwards (config, metrics rows, checkpoints)."""
import glob
import hashlib
import json
import os
import shutil

import pytest

from rljax import cli
from rljax.train import read_jsonl
from rljax.train._checkpoint import Checkpointer

# the tiny config, 2 SFT + 4 RL steps, checkpoints every 2 steps
_BASE = ["--config", "tiny", "--set", "sft.steps=2", "--set", "rl.steps=4", "--set", "eval.num_problems=8",
         "--set", "eval.batch_size=8", "--set", "eval.num_samples=1", "--set", "eval.pass_k=1"]


def _snapshot(d):
  """{relative path: sha256} of every file under ``d``."""
  out = {}
  for path in sorted(glob.glob(os.path.join(d, "**"), recursive=True)):
    if os.path.isfile(path):
      with open(path, "rb") as f:
        out[os.path.relpath(path, d)] = hashlib.sha256(f.read()).hexdigest()
  return out


def _rows(d, stage):
  """The (step) of every training row of ``stage`` in metrics.jsonl, in file order."""
  return [r["step"] for r in read_jsonl(os.path.join(d, "metrics.jsonl")) if r["stage"] == stage and "loss" in r]


def _steps(d, stage):
  return Checkpointer(os.path.join(d, "checkpoints", stage)).all_steps()


def _config(d):
  with open(os.path.join(d, "config.json")) as f:
    return json.load(f)


def _corrupt(d, stage, step):
  for f in glob.glob(os.path.join(d, "checkpoints", stage, str(step), "state", "**", "*"), recursive=True):
    if os.path.isfile(f):
      with open(f, "wb") as fh:
        fh.write(b"garbage")


@pytest.fixture(scope="module")
def base_run(tmp_path_factory):
  d = str(tmp_path_factory.mktemp("base") / "run")
  assert cli.main(["train", *_BASE, "--out-dir", d]) == 0
  assert _rows(d, "sft") == [1, 2] and _rows(d, "rl") == [1, 2, 3, 4]
  assert _steps(d, "rl") == [2, 4]
  return d


@pytest.fixture
def run(base_run, tmp_path):
  d = str(tmp_path / "run")
  shutil.copytree(base_run, d)
  return d


def test_rerun_without_resume_refuses_and_changes_nothing(run, capsys):
  before = _snapshot(run)
  assert cli.main(["train", *_BASE, "--out-dir", run]) == 2
  err = capsys.readouterr().err
  assert "already holds a run" in err and "--resume" in err and "--overwrite" in err
  assert len(err.strip().splitlines()) == 1
  assert _snapshot(run) == before


def test_overwrite_replaces_the_run_and_keeps_other_files(run, capsys):
  with open(os.path.join(run, "my_notes.txt"), "w") as f:
    f.write("mine")
  assert cli.main(["train", *_BASE, "--set", "rl.steps=2", "--out-dir", run, "--overwrite"]) == 0
  assert "removed the previous run's" in capsys.readouterr().out
  assert _config(run)["rl"]["steps"] == 2
  assert _rows(run, "sft") == [1, 2] and _rows(run, "rl") == [1, 2]
  assert _steps(run, "rl") == [2]
  with open(os.path.join(run, "my_notes.txt")) as f:
    assert f.read() == "mine"
  with pytest.raises(SystemExit):  # exclusive flags: argparse's usage error
    cli.main(["train", *_BASE, "--out-dir", run, "--overwrite", "--resume"])


def test_failed_start_writes_nothing(tmp_path, capsys):
  fresh = str(tmp_path / "fresh")
  assert cli.main(["train", *_BASE, "--set", "task.name=no_such_task", "--out-dir", fresh]) == 2
  assert "no_such_task" in capsys.readouterr().err
  assert not os.path.exists(fresh)
  assert cli.main(["train", "--resume", "--out-dir", str(tmp_path / "missing")]) == 2
  assert "does not exist" in capsys.readouterr().err
  assert not os.path.exists(tmp_path / "missing")


def test_resume_reads_the_runs_config_and_prints_the_changes(run, capsys):
  """``--resume`` with no ``--config``: the run's config.json (not the default config) plus the --set changes."""
  assert cli.main(["train", "--resume", "--out-dir", run, "--set", "rl.steps=6"]) == 0
  out = capsys.readouterr().out
  assert "with changes to its config: rl.steps 4 → 6" in out
  assert "resumed RL from step 4" in out
  cfg = _config(run)
  assert cfg["rl"]["steps"] == 6 and cfg["sft"]["steps"] == 2 and cfg["model"]["hidden_size"] == 32
  assert _rows(run, "sft") == [1, 2] and _rows(run, "rl") == [1, 2, 3, 4, 5, 6]
  assert _steps(run, "rl") == [2, 4, 6]


def test_a_spec_written_another_way_is_no_change():
  """issue #36 item 4: ``grpo(eps=0.0001)`` (config.json) and ``grpo(eps=1e-4)`` (the default config) are one
  setting; specs are compared parsed, so only real changes are printed."""
  import dataclasses  # pylint: disable=import-outside-toplevel
  from rljax.train import default_config  # pylint: disable=import-outside-toplevel
  from rljax.train._rundir import config_changes  # pylint: disable=import-outside-toplevel
  cfg = default_config()
  assert cfg.rl.advantage == "grpo(eps=1e-4)"
  same = cfg.replace(rl=dataclasses.replace(cfg.rl, advantage="grpo(eps=0.0001)",
                                            loss=cfg.rl.loss.replace(", ", ",").replace("0.2", "2e-1")))
  assert config_changes(cfg, same) == []
  other = same.replace(rl=dataclasses.replace(same.rl, advantage="grpo(eps=1e-3)", steps=cfg.rl.steps + 1))
  assert config_changes(cfg, other) == [("rl.steps", cfg.rl.steps, cfg.rl.steps + 1),
                                        ("rl.advantage", "grpo(eps=1e-4)", "grpo(eps=1e-3)")]


def test_resume_with_another_model_shape_is_one_line_and_changes_nothing(run, capsys):
  before = _snapshot(run)
  assert cli.main(["train", "--resume", "--out-dir", run, "--set", "model.hidden_size=64"]) == 2
  err = capsys.readouterr().err.strip()
  assert err == ("rljax train: error: the model config differs from the run's: hidden_size 32 → 64 (a resumed run "
                 "keeps its model, task, seed; train a new --out-dir instead)")
  assert _snapshot(run) == before


def test_corrupt_checkpoint_warns_once_and_is_replaced(run, capsys):
  _corrupt(run, "rl", 4)
  assert cli.main(["train", "--resume", "--out-dir", run]) == 0
  captured = capsys.readouterr()
  warnings = [l for l in captured.err.splitlines() if "unreadable" in l]
  assert len(warnings) == 1, captured.err
  assert warnings[0].startswith("[rljax] warning: checkpoint step 4 is unreadable: ")
  assert os.path.join("rl", "4", "state") in warnings[0]
  assert "resumed RL from step 2" in captured.out
  assert _steps(run, "rl") == [2, 4]
  assert _rows(run, "rl") == [1, 2, 3, 4]  # steps 3 and 4 re-trained, each row once
  # the re-trained step 4 replaced the corrupt one: it reads back without a warning
  assert cli.main(["eval", "--run-dir", run, "--num-samples", "1", "--k", "1", "--num-problems", "4"]) == 0
  captured = capsys.readouterr()
  assert json.loads(captured.out)["step"] == 4 and "unreadable" not in captured.err


def test_every_rl_checkpoint_unreadable_says_how_to_restart_from_sft(run, capsys):
  _corrupt(run, "rl", 2)
  _corrupt(run, "rl", 4)
  before, before_config = _snapshot(run), _config(run)
  assert cli.main(["train", "--resume", "--out-dir", run]) == 2
  err = capsys.readouterr().err
  line = [l for l in err.splitlines() if l.startswith("rljax train: error:")]
  assert len(line) == 1 and "no readable checkpoint" in line[0]
  rl_dir = os.path.join(run, "checkpoints", "rl")
  assert f"To restart RL from the SFT checkpoint, move the RL checkpoints aside (mv {rl_dir} {rl_dir}.unreadable)" \
      in line[0]
  # (the copied run's config.json now names its own directory; nothing else changed)
  same = lambda snap: {k: v for k, v in snap.items() if not k.startswith("checkpoints") and k != "config.json"}
  assert same(_snapshot(run)) == same(before)
  assert {k: v for k, v in _config(run).items() if k != "out_dir"} == \
      {k: v for k, v in before_config.items() if k != "out_dir"}
  # following the advice restarts RL from the SFT checkpoint
  shutil.move(rl_dir, rl_dir + ".unreadable")
  assert cli.main(["train", "--resume", "--out-dir", run]) == 0
  out = capsys.readouterr().out
  assert "resumed SFT from step 2" in out and "resumed RL" not in out
  assert _rows(run, "sft") == [1, 2] and _rows(run, "rl") == [1, 2, 3, 4]
  assert _steps(run, "rl") == [2, 4]


def test_refusals_name_what_to_do_in_the_callers_interface(tmp_path):
  """issue #36 item 5: from Python, ``train()``'s keyword arguments (the README's snippet run twice); from the CLI,
  its flags. Refused before anything is built or written."""
  from rljax.train import apply_overrides, tiny_config, train  # pylint: disable=import-outside-toplevel
  from rljax.train._rundir import from_cli  # pylint: disable=import-outside-toplevel
  d = tmp_path / "readme"
  d.mkdir()
  (d / "config.json").write_text("{}")
  cfg = apply_overrides(tiny_config(str(d)), ["rl.steps=2", "progress=false"])
  with pytest.raises(ValueError) as e:
    train(cfg)
  msg = str(e.value)
  assert "continue it with train(cfg, resume=True), replace it with train(cfg, overwrite=True)" in msg, msg
  assert "--" not in msg
  with pytest.raises(ValueError, match=r"^resume=True and overwrite=True exclude each other"):
    train(cfg, resume=True, overwrite=True)
  with from_cli(), pytest.raises(ValueError) as e:
    train(cfg)
  assert "continue it with --resume, replace it with --overwrite, or choose a fresh --out-dir" in str(e.value)
  assert (d / "config.json").read_text() == "{}" and sorted(p.name for p in d.iterdir()) == ["config.json"]


def test_resume_of_a_finished_run_says_so_and_changes_nothing(run, capsys):
  """issue #36 item 6: no re-evaluation, no rewritten summary.json, no duplicate eval row: every file as it was."""
  before = _snapshot(run)
  with open(os.path.join(run, "summary.json")) as f:
    written = json.load(f)
  assert cli.main(["train", "--resume", "--out-dir", run]) == 0
  out = capsys.readouterr().out
  assert f"{run} is finished (RL step 4 of 4): nothing to train, nothing written" in out, out
  assert "resumed" not in out and "after RL" not in out
  assert _snapshot(run) == before
  # from Python: the same, and the summary comes back with the final parameters
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  from rljax.train._rundir import saved_config  # pylint: disable=import-outside-toplevel
  summary = train(saved_config(run), resume=True)
  assert {k: v for k, v in summary.items() if k not in ("params", "graphdef", "model_state")} == written
  assert summary["params"] is not None and _snapshot(run) == before
