"""``run_arena``: entries x seeds, each run a separate ``rljax train`` process, a shared SFT warm start per seed.

Plan (all checked before any process starts; a bad entry is an error naming it):

1. each entry's config = the base config, then the entry's overrides, then the arena-wide ``overrides``, then
   ``seed=<k>``; its run directory is ``<arena_dir>/<entry>/seed<k>``;
2. the SFT warm start is run once per seed (and per distinct model/task/SFT/eval config, ``sft_key``) into
   ``<arena_dir>/_sft/<key>/seed<k>`` (``rl.steps=0``); each entry's RL starts from it through
   ``sft.init_from`` (unless the base config already names one);
3. a run whose ``summary.json`` exists is finished and not redone (its config must be the one asked for, else
   the start is refused: the table would mix experiments); an interrupted one (``config.json`` and no summary)
   with the same config is resumed (``rljax train --resume``), with another config it is restarted
   (``--overwrite``); a run that failed before is retried.

Each run is ``python -m rljax.cli train ...`` with its output in ``<run dir>/arena.log``; ``jobs`` run at once.
A run that fails is marked failed (``arena_error.txt``: the last line of its output) and the others go on; the
RL runs of a failed warm start fail with its error. After each finished run the table (``arena.csv``,
``arena_runs.csv``, ``arena.md``) is rewritten; the curves (``curves.png``) are drawn at the end (also after an
interruption: Ctrl-C stops the runs, which save a checkpoint, and a rerun resumes them).
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Mapping, Optional, Sequence, Union

from rljax.arena._entries import Entry, select_entries
from rljax.arena._results import ERROR_FILE, plot_curves, read_run, run_dir, table_rows, write_table

__all__ = ["run_arena", "plan_arena", "ArenaRun", "default_jobs", "sft_key"]

CONFIG_FILE = "arena_config.json"  # the config the arena asked for (the run's own config.json is train's)
LOG_FILE = "arena.log"
# config fields that do not change what an SFT warm start computes
_NOT_SFT = ("rl", "out_dir", "seed", "progress", "tensorboard", "plot", "log_every")


def default_jobs(cpu_count: Optional[int] = None) -> int:
  """Runs at once by default: one per usable core. A run of the small CPU models keeps about one core busy (its
  decode loop and small matmuls leave XLA's other threads idle), so on 2 cores 2 runs at once finished 4 RL runs
  1.6-1.8x faster than 1 (on a shared machine: docs/arena.md, "Running the arena")."""
  n = cpu_count if cpu_count is not None else (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                                               else os.cpu_count() or 1)
  return max(1, n)


def sft_key(cfg) -> str:
  """A short hash of the config fields an SFT warm start depends on (everything but ``_NOT_SFT``).

  Only the values that differ from ``RunConfig()``'s enter it, so a config field added later with a default does
  not change the key of an existing arena directory."""
  from rljax.train import RunConfig, config_to_dict  # pylint: disable=import-outside-toplevel
  from rljax.train import config_changes  # pylint: disable=import-outside-toplevel
  d = {k: new for k, _, new in config_changes(RunConfig(), cfg) if k.split(".", 1)[0] not in _NOT_SFT}
  return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:10]


@dataclasses.dataclass
class ArenaRun:
  """One run of the plan: an entry's RL run (``entry`` set) or a seed's SFT warm start (``entry=None``)."""
  out_dir: str
  config: object  # RunConfig
  seed: int
  entry: Optional[str] = None
  after: Optional[str] = None  # the out_dir of the SFT run this one starts from
  status: str = "pending"  # pending | ok | failed | running | refused (its config cannot be built: ``error``)
  error: str = ""
  action: str = "start"  # start | resume | restart | done | refused

  @property
  def label(self) -> str:
    return f"{self.entry}/seed{self.seed}" if self.entry else f"SFT seed{self.seed}"


def _normalised(cfg):
  """``cfg`` as ``train`` writes it into ``config.json`` (recipe fields in their canonical spec form)."""
  return cfg.replace(rl=cfg.rl.with_recipe(cfg.rl.recipe()))


def _base_config(config):
  from rljax._config_files import load_config_and_recipe  # pylint: disable=import-outside-toplevel
  from rljax.train import RunConfig  # pylint: disable=import-outside-toplevel
  if isinstance(config, RunConfig):
    return config
  if config is not None and not isinstance(config, str):
    raise ValueError(f"config must be a RunConfig, a config name or a .py path, got {type(config).__name__}")
  cfg, recipe = load_config_and_recipe(config or "arena")
  if recipe is not None:
    raise ValueError(f"--config {config}: its get_recipe() gives a Python recipe, which arena entries cannot "
                     "override; use a config whose recipe is in its rl.* fields")
  return cfg


def _decide(run: ArenaRun) -> None:
  """Sets ``run.action`` from what its directory holds (module docstring, point 3)."""
  from rljax.train import config_changes, describe_changes, run_files, saved_config  # pylint: disable=import-outside-toplevel
  d = run.out_dir
  if not os.path.exists(os.path.join(d, "config.json")):
    run.action = "restart" if run_files(d) else "start"
    return
  try:
    changes = config_changes(saved_config(d), run.config)
  except ValueError:  # an unreadable config.json: the run cannot be resumed
    run.action = "restart"
    return
  # the warm start's path alone may differ (an arena directory from before a key change): the SFT config itself is
  # compared field by field, so the same fields mean the same (deterministic) warm start
  changes = [c for c in changes if c[0] != "sft.init_from"]
  if os.path.exists(os.path.join(d, "summary.json")):
    if changes and run.entry is not None:
      raise ValueError(f"{d} holds a finished run of another config ({describe_changes(changes, 5)}); "
                       "remove it or choose another arena directory (--out)")
    run.action, run.status = "done", "ok"
  else:
    run.action = "restart" if changes else "resume"


def plan_arena(config=None, *, recipes: Sequence[str] = (), experiment: Optional[str] = None,
               seeds: Sequence[int] = (0,), out_dir: str = "runs/arena", overrides: Sequence[str] = (),
               entries: Optional[Mapping[str, Entry]] = None,
               experiments: Optional[Mapping[str, Sequence[str]]] = None) -> tuple[list[Entry], list[ArenaRun]]:
  """``(entries, runs)``: the SFT runs first, then the RL runs; every config built and checked, nothing run.

  An entry whose config cannot be built on this base config (e.g. an MoE entry on a Hugging Face checkpoint,
  whose architecture is the checkpoint's) is *refused*: its runs are in the plan with ``status="refused"`` and
  the reason in ``error``, and the other entries run. When every entry is refused, ``ValueError`` names the
  first. A base config without SFT (``sft.steps=0``: a pretrained checkpoint) has no warm-start runs: each RL
  run starts from the model as loaded and evaluates it itself (its summary's ``sft`` row, "zero-shot")."""
  from rljax.train import apply_overrides  # pylint: disable=import-outside-toplevel
  chosen = select_entries(recipes, experiment, entries, experiments)
  seeds = list(seeds)
  if not seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds) \
      or len(set(seeds)) != len(seeds):
    raise ValueError(f"seeds must be distinct non-negative integers, got {seeds}")
  base = _base_config(config)
  try:
    base_all = apply_overrides(base, list(overrides))
  except ValueError as e:
    raise ValueError(f"arena --set: {e}") from None
  sft_runs: dict = {}
  runs = []
  for entry in chosen:
    for seed in seeds:
      try:
        cfg = apply_overrides(base, [*entry.overrides, *overrides, f"seed={seed}", "progress=false"])
        cfg = _normalised(cfg.replace(out_dir=run_dir(out_dir, entry.name, seed)))
      except ValueError as e:
        runs.append(ArenaRun(run_dir(out_dir, entry.name, seed), None, seed, entry.name, status="refused",
                             error=f"refused: {e}", action="refused"))
        continue
      after = None
      if cfg.sft.init_from is None and cfg.sft.steps > 0:  # no SFT: each run starts from the model as loaded
        key = sft_key(cfg)
        sft_dir = os.path.join(out_dir, "_sft", key, f"seed{seed}")
        if sft_dir not in sft_runs:
          sft_cfg = cfg.replace(rl=dataclasses.replace(base_all.rl, steps=0), out_dir=sft_dir, plot=False,
                                progress=False)
          sft_runs[sft_dir] = ArenaRun(sft_dir, _normalised(sft_cfg), seed)
        after = sft_dir
        cfg = cfg.replace(sft=dataclasses.replace(cfg.sft, init_from=sft_dir))
      runs.append(ArenaRun(cfg.out_dir, cfg, seed, entry.name, after))
  if all(r.action == "refused" for r in runs):  # nothing to run: the first reason is the error
    raise ValueError(f"arena entry {runs[0].entry!r}: {runs[0].error[len('refused: '):]}")
  for run in [r for r in runs if r.action != "refused"] + list(sft_runs.values()):
    _decide(run)
  needed = {r.after for r in runs if r.action != "done"}  # a warm start only finished runs used is not redone
  return chosen, [r for r in sft_runs.values() if r.out_dir in needed or r.action == "done"] + runs


def _last_line(path: str) -> str:
  try:
    with open(path, encoding="utf-8", errors="replace") as f:
      lines = [ln.strip() for ln in f.read().splitlines() if ln.strip()]
  except OSError:
    return "no output"
  return lines[-1][:500] if lines else "no output"


def _child_env() -> dict:
  """The environment of a run: this one, with the rljax being used first on ``PYTHONPATH``."""
  import rljax  # pylint: disable=import-outside-toplevel
  env = dict(os.environ)
  root = os.path.dirname(os.path.dirname(os.path.abspath(rljax.__file__)))
  env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
  return env


def _launch(run: ArenaRun, python: str):
  from rljax.train import config_to_dict  # pylint: disable=import-outside-toplevel
  os.makedirs(run.out_dir, exist_ok=True)
  err = os.path.join(run.out_dir, ERROR_FILE)
  if os.path.exists(err):
    os.remove(err)
  cfg_path = os.path.join(run.out_dir, CONFIG_FILE)
  with open(cfg_path, "w", encoding="utf-8") as f:
    json.dump(config_to_dict(run.config), f, indent=2)
  cmd = [python, "-m", "rljax.cli", "train", "--out-dir", run.out_dir]
  cmd += ["--resume"] if run.action == "resume" else ["--config", cfg_path, "--overwrite"]
  log = open(os.path.join(run.out_dir, LOG_FILE), "a", encoding="utf-8")
  log.write(f"\n[rljax arena] {time.strftime('%Y-%m-%d %H:%M:%S')} {run.action}: {' '.join(cmd)}\n")
  log.flush()
  proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=_child_env(),
                          start_new_session=True)  # Ctrl-C reaches the arena only; it stops the runs itself
  return proc, log


def _fail(run: ArenaRun, error: str) -> None:
  run.status, run.error = "failed", error
  os.makedirs(run.out_dir, exist_ok=True)
  with open(os.path.join(run.out_dir, ERROR_FILE), "w", encoding="utf-8") as f:
    f.write(error + "\n")


def run_arena(config=None, *, recipes: Sequence[str] = (), experiment: Optional[str] = None,
              seeds: Sequence[int] = (0,), jobs: Optional[int] = None, out_dir: str = "runs/arena",
              overrides: Sequence[str] = (), entries: Optional[Mapping[str, Entry]] = None,
              experiments: Optional[Mapping[str, Sequence[str]]] = None, progress: bool = True,
              python: Optional[str] = None, plot: bool = True) -> list[dict]:
  """Runs the arena; returns the table's rows (one per entry: status, ``<figure>_mean/_min/_max``; also in
  ``<out_dir>/arena.csv``, ``arena.md``).

  Args:
    config: the base config: a ``RunConfig``, a config name (``configs/``) or a ``.py`` path (default:
      ``arena``: countdown, ``configs/arena.py``).
    recipes: entry names (default: the ``default`` experiment's, or ``experiment``'s).
    experiment: a name of ``experiments`` (``rljax.arena.EXPERIMENTS``).
    seeds: the seeds; each entry runs once per seed.
    jobs: runs at once (default ``default_jobs()``; 1 when the runs train a Hugging Face checkpoint).
    out_dir: the arena directory.
    overrides: ``key=value`` overrides applied to every run, after the entry's own.
    entries, experiments: the pools to choose from (default ``rljax.arena.ENTRIES``, ``EXPERIMENTS``).
    progress: a progress bar over runs (only on a terminal or in a notebook, as the trainer's).
    python: the interpreter of the runs (default: this one).
    plot: draw ``curves.png`` at the end.
  """
  if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
    raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
  chosen, plan = plan_arena(config, recipes=recipes, experiment=experiment, seeds=seeds, out_dir=out_dir,
                            overrides=overrides, entries=entries, experiments=experiments)
  if jobs is None:  # a pretrained checkpoint's run keeps every core busy (and holds ~11 GB for a 135M model)
    jobs = 1 if any(r.config is not None and r.config.model.hf_checkpoint for r in plan) else default_jobs()
  names, seeds = [e.name for e in chosen], list(seeds)
  pass_k = _pass_k(plan)
  by_dir = {r.out_dir: r for r in plan}
  python = python or sys.executable
  for entry in dict.fromkeys(r.entry for r in plan if r.action == "refused"):
    print(f"[rljax arena] {entry}: {next(r.error for r in plan if r.entry == entry)}; the other entries run",
          file=sys.stderr)

  def write():
    runs = {(r.entry, r.seed): ({"status": "refused", "error": r.error} if r.action == "refused"
                                else read_run(r.out_dir, pass_k)) for r in plan if r.entry is not None}
    rows, run_rows = table_rows(out_dir, names, seeds, pass_k, runs)
    write_table(out_dir, rows, run_rows, pass_k)
    return rows

  todo = [r for r in plan if r.action not in ("done", "refused")]
  with _sigterm_raises():
    return _schedule(plan, todo, by_dir, jobs, python, progress, write, out_dir, names, seeds, plot)


class ArenaStopped(BaseException):
  """SIGTERM reached the arena: its runs are stopped (each saves a checkpoint) and a rerun resumes them."""


@contextlib.contextmanager
def _sigterm_raises():
  """SIGTERM raises ``ArenaStopped`` in the main thread (so the runs, in their own sessions, are stopped too)."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return

  def stop(signum, frame):
    raise ArenaStopped("SIGTERM: the arena's runs were stopped; run the arena again to resume them")

  previous = signal.signal(signal.SIGTERM, stop)
  try:
    yield
  finally:
    signal.signal(signal.SIGTERM, previous)


def _schedule(plan, todo, by_dir, jobs, python, progress, write, out_dir, names, seeds, plot):
  """Starts the runs of ``todo`` (at most ``jobs`` at once, each after its warm start) until all are done."""
  from rljax.train import progress_bar  # pylint: disable=import-outside-toplevel
  bar = progress_bar(total=len(plan), initial=len(plan) - len(todo), desc="arena", unit="run",
                     disable=not progress, leave=True)
  running: dict = {}
  try:
    while todo or running:
      for run in list(todo):  # start what may start
        if len(running) >= jobs:
          break
        dep = by_dir.get(run.after) if run.after else None
        if dep is not None and dep.status == "failed":
          todo.remove(run)
          _fail(run, f"SFT warm start failed ({dep.out_dir}): {dep.error}")
          bar.update(1)
          write()
          continue
        if dep is not None and dep.status != "ok":
          continue
        todo.remove(run)
        run.status = "running"
        running[run.out_dir] = (run, *_launch(run, python))
      bar.set_postfix_str(", ".join(r.label for r, _, _ in running.values())[:80])
      time.sleep(0.2)
      for key, (run, proc, log) in list(running.items()):
        rc = proc.poll()
        if rc is None:
          continue
        log.close()
        del running[key]
        if rc == 0 and os.path.exists(os.path.join(run.out_dir, "summary.json")):
          run.status = "ok"
        else:
          last = _last_line(os.path.join(run.out_dir, LOG_FILE))
          _fail(run, last if rc > 0 else f"killed by signal {-rc}; last output: {last}")
        bar.update(1)
        write()
      if not running and todo and all(by_dir.get(r.after) is not None and by_dir[r.after].status == "pending"
                                      for r in todo):  # pragma: no cover - a plan always lists its SFT runs
        raise RuntimeError("arena: runs wait for warm starts that are not planned")
  except BaseException:
    for run, proc, log in running.values():  # SIGTERM: each run saves a checkpoint and stops (a rerun resumes)
      if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    for run, proc, log in running.values():
      try:
        proc.wait(timeout=120)
      except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
      log.close()
    raise
  finally:
    bar.close()
    rows = write()
    if plot:
      plot_curves(out_dir, names, seeds)
  return rows


def _pass_k(plan) -> tuple:
  """The pass@k columns: the smallest and the largest k the runs evaluate (the base config's ``eval.pass_k``)."""
  ks = sorted({k for r in plan if r.config is not None for k in r.config.eval.pass_k})
  return tuple(dict.fromkeys([ks[0], ks[-1]])) if ks else ()
