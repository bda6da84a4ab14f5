"""Run directories: one run per directory, nothing written before a start is known to be valid.

A run directory holds the files of exactly one run (``RUN_FILES``). ``check_run_dir`` decides, before anything is
written, whether a start may use it:

- a fresh start (``resume=False``) refuses a directory that already holds a run's files unless ``overwrite=True``
  (then ``clear_run`` removes those files, and only those, once every other check has passed);
- ``resume=True`` needs the directory and its ``config.json``; the config the run continues with must keep the
  run's ``FIXED_SECTIONS`` (model, task, seed): a different model shape cannot load the run's checkpoints, a
  different task or seed would continue another experiment. Other fields (more steps, a learning rate) may
  change; ``config_changes`` lists them so the start can print the diff.
"""
from __future__ import annotations

import contextlib
import contextvars
import json
import os
import shutil
from typing import Optional

from rljax.train._checkpoint import CheckpointError
from rljax.train._config import RECIPE_FIELDS, RunConfig, config_from_dict, config_to_dict

__all__ = ["RUN_FILES", "WALL_FILE", "FIXED_SECTIONS", "run_files", "check_run_dir", "saved_config", "config_changes",
           "clear_run", "describe_changes", "from_cli", "in_cli", "how"]

# every file or folder ``train`` writes into a run directory
RUN_FILES = ("config.json", "recipe.json", "metrics.jsonl", "summary.json", "sft_eval.json", "metrics.png", "tb",
             "checkpoints", "tokenizer", "wall.json")
# the run's wall time so far, written when a part of it ends (finished or stopped cleanly): a resume adds to it
WALL_FILE = "wall.json"
# config sections a resumed run must keep: its checkpoints and data stream depend on them
FIXED_SECTIONS = ("model", "task", "seed")


# whether ``train`` was called by ``rljax train`` (advice names CLI flags) or from Python (its keyword arguments)
_FROM_CLI = contextvars.ContextVar("rljax_train_from_cli", default=False)

_HOW = {  # what to do -> (in the CLI, from Python)
    "resume": ("--resume", "train(cfg, resume=True)"),
    "overwrite": ("--overwrite", "train(cfg, overwrite=True)"),
    "out_dir": ("--out-dir", "out_dir"),
    "fresh_out_dir": ("a fresh --out-dir", "a fresh out_dir (cfg.replace(out_dir=...))"),
    "resume_and_overwrite": ("--resume and --overwrite", "resume=True and overwrite=True"),
}


@contextlib.contextmanager
def from_cli():
  """Inside: refusals say what to do with ``rljax train``'s flags (``--resume``, ``--overwrite``, ``--out-dir``);
  outside (``train()`` from Python) with its keyword arguments (``train(cfg, resume=True)``, ...)."""
  token = _FROM_CLI.set(True)
  try:
    yield
  finally:
    _FROM_CLI.reset(token)


def in_cli() -> bool:
  """Whether ``train`` runs for ``rljax train`` (``from_cli``), not for a Python caller."""
  return _FROM_CLI.get()


def how(what: str) -> str:
  """``what`` (a key of ``_HOW``: ``"resume"``, ``"overwrite"``, ``"out_dir"``, ...) in the user's interface:
  ``"--resume"`` from the CLI, ``"train(cfg, resume=True)"`` from Python."""
  return _HOW[what][0 if _FROM_CLI.get() else 1]


def run_files(out_dir: str) -> list[str]:
  """The run files present in ``out_dir`` (``[]`` when it is missing or holds none)."""
  if not os.path.isdir(out_dir):
    return []
  return [name for name in RUN_FILES if os.path.exists(os.path.join(out_dir, name))]


def saved_config(out_dir: str) -> RunConfig:
  """The ``RunConfig`` a run directory was trained with (its ``config.json``), with ``out_dir`` set to it."""
  if not os.path.isdir(out_dir):
    raise CheckpointError(f"run directory {out_dir!r} does not exist")
  path = os.path.join(out_dir, "config.json")
  if not os.path.exists(path):
    raise CheckpointError(f"{out_dir!r} is not an rljax run directory (no config.json)")
  try:
    with open(path, encoding="utf-8") as f:
      cfg = config_from_dict(json.load(f))
  except (json.JSONDecodeError, TypeError) as e:
    raise CheckpointError(f"{path} is not a readable run config ({e})") from e
  from rljax.train._checkpoint_arch import as_shape_defaults  # pylint: disable=import-outside-toplevel
  # the shape a run recorded is no user's choice (a checkpoint run's is the checkpoint's; before issue #52, the
  # toy defaults it never read): a resume neither refuses nor keeps it against the checkpoint's
  return cfg.replace(out_dir=out_dir, model=as_shape_defaults(cfg.model))


def _flat(d: dict, prefix: str = "") -> dict:
  out = {}
  for k, v in d.items():
    if isinstance(v, dict):
      out.update(_flat(v, f"{prefix}{k}."))
    else:
      out[f"{prefix}{k}"] = v
  return out


# fields holding technique specs ("grpo(eps=1e-4)"): compared by their parsed values, not their text
SPEC_FIELDS = tuple(f"rl.{name}" for name in RECIPE_FIELDS) + ("task.verifier",)


def _same(key: str, old, new) -> bool:
  """Whether a field's two values are the same setting: ``grpo(eps=0.0001)`` is ``grpo(eps=1e-4)``, ``grpo()`` is
  ``grpo`` (both parsed: literal values compared), other fields by value."""
  if old == new:
    return True
  if key in SPEC_FIELDS and isinstance(old, str) and isinstance(new, str):
    from rljax.recipes import parse  # pylint: disable=import-outside-toplevel
    try:
      return parse(old) == parse(new)
    except ValueError:
      return False
  return False


def config_changes(before: RunConfig, after: RunConfig) -> list[tuple[str, object, object]]:
  """``[(dotted field, before, after)]`` for every field that differs (``out_dir`` aside), in field order. Technique
  specs are compared parsed (``SPEC_FIELDS``): a number written another way is no change."""
  a, b = _flat(config_to_dict(before)), _flat(config_to_dict(after))
  return [(k, a.get(k), b.get(k)) for k in dict.fromkeys([*a, *b])
          if k != "out_dir" and not _same(k, a.get(k), b.get(k))]


def _fixed_changes(changes) -> dict[str, list[str]]:
  out: dict[str, list[str]] = {}
  for key, old, new in changes:
    section = key.split(".", 1)[0]
    if section in FIXED_SECTIONS:
      field = key.split(".", 1)[1] if "." in key else key
      out.setdefault(section, []).append(f"{field} {old} → {new}")
  return out


def check_run_dir(cfg: RunConfig, *, resume: bool, overwrite: bool = False) -> list[tuple[str, object, object]]:
  """Validates starting ``cfg`` in ``cfg.out_dir``; writes nothing. Returns the changes against the run's saved
  config when resuming (``[]`` otherwise).

  Raises ``ValueError`` (``CheckpointError`` for a missing or unreadable run) with one line saying what to do.
  """
  out_dir = cfg.out_dir
  if resume and overwrite:
    raise ValueError(f"{how('resume_and_overwrite')} exclude each other: continue the run in {out_dir!r}, or "
                     "replace it")
  if not resume:
    present = run_files(out_dir)
    if present and not overwrite:
      raise ValueError(f"{out_dir!r} already holds a run ({', '.join(present)}); continue it with {how('resume')}, "
                       f"replace it with {how('overwrite')}, or choose {how('fresh_out_dir')}")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
      raise ValueError(f"{how('out_dir')} {out_dir!r} is a file, not a directory")
    return []
  from rljax.train._checkpoint_arch import with_checkpoint_architecture  # pylint: disable=import-outside-toplevel
  before = with_checkpoint_architecture(saved_config(out_dir))  # a run saved with the toy shape fields
  changes = config_changes(before, cfg)
  fixed = _fixed_changes(changes)
  if fixed:
    raise ValueError("; ".join(f"the {section} config differs from the run's: {', '.join(items)}"
                               for section, items in fixed.items())
                     + f" (a resumed run keeps its {', '.join(FIXED_SECTIONS)}; train a new {how('out_dir')} instead)")
  return changes


def clear_run(out_dir: str) -> list[str]:
  """Removes the run files of ``out_dir`` (``RUN_FILES``, nothing else); returns the names removed."""
  removed = run_files(out_dir)
  for name in removed:
    path = os.path.join(out_dir, name)
    if os.path.isdir(path) and not os.path.islink(path):
      shutil.rmtree(path)
    else:
      os.remove(path)
  return removed


def describe_changes(changes, limit: Optional[int] = None) -> str:
  """``"rl.steps 8 → 16, rl.loss.... "`` for a log line."""
  items = [f"{k} {old} → {new}" for k, old, new in changes[:limit]]
  more = len(changes) - len(items)
  return ", ".join(items) + (f" (+{more} more)" if more > 0 else "")
