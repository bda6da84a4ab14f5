"""The command line as a new user meets it: help texts, catalog filtering, readable counts, sampling refusals and
warnings, progress bars only for a watcher, and the Python version the README and setup.py promise."""
import argparse
import io
import os
import re
import sys

import pytest

from rljax import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _subparsers():
  parser = cli._parser()  # pylint: disable=protected-access
  action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # pylint: disable=protected-access
  return action.choices


@pytest.mark.parametrize("command", ["train", "eval", "sample"])
def test_every_option_has_help_and_says_its_default(command):
  sub = _subparsers()[command]
  for action in sub._actions:  # pylint: disable=protected-access
    if action.dest == "help":
      continue
    assert action.help, f"rljax {command} {action.option_strings or action.dest} has no help text"
    if action.option_strings and action.default not in (None, False, []) and command != "train":
      assert "default" in action.help, f"rljax {command} {action.option_strings}: help does not say its default"


def test_train_help_lists_the_configs(capsys):
  with pytest.raises(SystemExit):
    cli.main(["train", "--help"])
  out = " ".join(capsys.readouterr().out.split())
  names = cli.available_configs()
  assert {"default", "dapo", "grpo", "dr_grpo", "gspo", "tiny"} <= set(names)
  assert "configs: " + ", ".join(names) in out


def test_catalog_help_and_kind_filter(capsys):
  from rljax.catalog import catalog, main
  with pytest.raises(SystemExit) as e:
    main(["--help"])
  assert e.value.code == 0 and "--kind" in capsys.readouterr().out
  assert main(["--kind", "advantage"]) == 0
  lines = capsys.readouterr().out.splitlines()[2:]
  want = [r.name for r in catalog() if r.kind == "advantage"]
  assert [l.split()[0] for l in lines] == want and len(want) > 5
  assert main(["--kind", "advantage", "--kind", "kl", "--markdown"]) == 0
  assert len(capsys.readouterr().out.splitlines()) == 2 + len(want) + sum(r.kind == "kl" for r in catalog())
  with pytest.raises(SystemExit) as e:
    main(["--kind", "nope"])
  assert e.value.code == 2 and "invalid choice: 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("n,text", [(12, "12"), (999, "999"), (5_300, "5,300 (5.30 K)"),
                                    (107_072, "107,072 (0.11 M)"), (494_032_768, "494,032,768 (494.03 M)"),
                                    (7_615_616_512, "7,615,616,512 (7.62 B)")])
def test_models_info_counts_are_readable(n, text):
  from rljax.models.info import readable_count
  assert readable_count(n) == text


def test_sample_temperature_zero_points_to_greedy(tmp_path, capsys):
  assert cli.main(["sample", "--run-dir", str(tmp_path), "1+1=", "--temperature", "0"]) == 2
  err = capsys.readouterr().err
  assert "--temperature must be > 0" in err and "--greedy" in err


def test_unknown_characters_of_a_char_tokenizer():
  from rljax.data import train_sentencepiece
  tok = train_sentencepiece(["12+34=46", "9+1=10"])
  assert tok.unknown_characters("12*3=x+ 4*") == ["*", "x", " "]
  assert tok.unknown_characters("12+3=") == []


def test_progress_bars_only_for_a_terminal(monkeypatch):
  from rljax.train._progress import progress_bar

  class Tty(io.StringIO):
    def isatty(self):
      return True

  monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
  monkeypatch.setattr(sys, "stderr", io.StringIO())
  assert progress_bar(total=3, disable=False).disable  # a log file or pipe: no bar
  monkeypatch.setattr(sys, "stderr", Tty())
  assert not progress_bar(total=3, disable=False).disable
  assert progress_bar(total=3, disable=True).disable


def test_python_version_of_setup_and_readme_agree():
  with open(os.path.join(ROOT, "setup.py")) as f:
    required = re.search(r'python_requires=">=(3\.\d+)"', f.read()).group(1)
  with open(os.path.join(ROOT, "README.md")) as f:
    head = "".join(f.readlines()[:12])
  assert f"Python {required}+" in head


def test_ci_runs_the_readmes_two_test_commands():
  """`.ci/run` runs the README's fast test command and its long-guards command (`-m long`), as written there."""
  with open(os.path.join(ROOT, "README.md")) as f:
    readme = f.read()
  with open(os.path.join(ROOT, ".ci", "run")) as f:
    ci = [line.strip() for line in f if line.strip() and not line.startswith("#")]
  commands = [c.split(" && ", 1)[1] for c in re.findall(r"^python3 -m venv \.venv && (.*pytest.*)$", readme, re.M)]
  assert len(commands) == 2 and commands[0].endswith("--durations=20") and commands[1].endswith("-m long")
  assert '".[test]"' in commands[0] and '".[dev]"' in commands[1]
  assert ci[-2:] == commands
