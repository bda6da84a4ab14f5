"""An arena directory's results: the per-run figures, the table over seeds (CSV, Markdown) and the curves (PNG).

Layout: ``<arena_dir>/<entry>/seed<k>/`` is a run directory (``summary.json``, ``metrics.jsonl``, ...);
a run that failed holds ``arena_error.txt`` (its error's last line). Everything here only reads those files, so
it works on a finished, partial or running arena alike (``rljax.arena.read_results``).
"""
from __future__ import annotations

import csv
import json
import os
from typing import Optional, Sequence

import numpy as np

from rljax.arena._metrics import FIGURES, rl_rows, run_figures, spread, clip_key

__all__ = ["run_dir", "run_status", "read_run", "table_rows", "write_table", "markdown_table", "plot_curves",
           "read_results", "table_pass_k", "CURVE_PANELS", "ERROR_FILE"]

ERROR_FILE = "arena_error.txt"
# (title, metric key; "clip" = each run's clip_key, "eval" = held-out greedy accuracy at the eval points)
CURVE_PANELS = (
    ("train reward", "rollout/reward_mean"),
    ("held-out greedy accuracy", "eval"),
    ("entropy", "policy/entropy"),
    ("gradient norm", "train/grad_norm"),
    ("clip fraction", "clip"),
    ("KL(old || new)", "policy/kl"),
    ("log-prob gap, sampler vs trainer", "rollout/logp_gap"),
)


def run_dir(arena_dir: str, entry: str, seed: int) -> str:
  return os.path.join(arena_dir, entry, f"seed{seed}")


def _read_json(path: str) -> Optional[dict]:
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except (OSError, ValueError):
    return None


def _read_rows(path: str) -> list:
  rows = []
  try:
    with open(path, encoding="utf-8") as f:
      for line in f:
        try:
          rows.append(json.loads(line))
        except ValueError:  # a line being written
          pass
  except OSError:
    pass
  return rows


def run_status(directory: str) -> tuple[str, str]:
  """``("ok", "")`` (``summary.json``), ``("failed", error)`` (``arena_error.txt``), else ``("pending", "")``."""
  if os.path.exists(os.path.join(directory, "summary.json")):
    return "ok", ""
  path = os.path.join(directory, ERROR_FILE)
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      return "failed", f.read().strip()
  return "pending", ""


def read_run(directory: str, pass_k: Sequence[int] = (1, 8)) -> dict:
  """``{"status", "error", **figures}`` of one run directory (figures only for a finished run)."""
  status, error = run_status(directory)
  out = {"status": status, "error": error}
  if status == "ok":
    summary = _read_json(os.path.join(directory, "summary.json")) or {}
    out.update(run_figures(summary, _read_rows(os.path.join(directory, "metrics.jsonl")), pass_k))
  return out


def _figure_keys(pass_k) -> list[tuple[str, str, str]]:
  keys = list(FIGURES[:1])
  keys += [(f"pass@{k}_change", f"pass@{k} change", "points") for k in pass_k]
  return keys + list(FIGURES[1:])


def table_rows(arena_dir: str, entries: Sequence[str], seeds: Sequence[int], pass_k: Sequence[int] = (1, 8),
               runs: Optional[dict] = None) -> tuple[list[dict], list[dict]]:
  """``(entry rows, run rows)``: per entry the status and, per figure, ``<key>_mean/_min/_max``; per run its
  figures. ``runs`` maps ``(entry, seed)`` to an already read ``read_run`` result."""
  runs = dict(runs or {})
  entry_rows, run_rows = [], []
  for name in entries:
    results = []
    for seed in seeds:
      r = runs.get((name, seed)) or read_run(run_dir(arena_dir, name, seed), pass_k)
      results.append((seed, r))
      run_rows.append({"entry": name, "seed": seed, **r})
    ok = [r for _, r in results if r["status"] == "ok"]
    failed = [(s, r) for s, r in results if r["status"] in ("failed", "refused")]
    if failed and all(r["status"] == "refused" for _, r in results):  # refused at start-up: one reason
      status = "refused"
      failed = failed[:1]
    elif failed:
      status = f"failed {len(failed)}/{len(seeds)}"
    elif len(ok) == len(seeds):
      status = "ok"
    else:
      status = f"partial {len(ok)}/{len(seeds)}"
    row = {"entry": name, "status": status, "seeds_ok": len(ok), "seeds": len(seeds),
           "error": (failed[0][1]["error"][len("refused: "):] if status == "refused"
                     else "; ".join(f"seed{s}: {r['error']}" for s, r in failed))}
    for key, _, _ in _figure_keys(pass_k):
      for stat, value in spread(r.get(key) for r in ok).items():
        if stat != "n":
          row[f"{key}_{stat}"] = value
    keys = sorted({r["clip_key"] for r in ok if r.get("clip_key")})
    row["clip_key"] = ",".join(keys)
    entry_rows.append(row)
  return entry_rows, run_rows


def _cell(row: dict, key: str, digits: int) -> str:
  mean = row.get(f"{key}_mean")
  if mean is None:
    return "n/a"
  lo, hi = row[f"{key}_min"], row[f"{key}_max"]
  fmt = lambda v: f"{v:.{digits}f}"
  return fmt(mean) if row["seeds_ok"] == 1 or lo == hi else f"{fmt(mean)} [{fmt(lo)}, {fmt(hi)}]"


_DIGITS = {"gain": 1, "entropy": 3, "steps_to_90": 0, "grad_spike": 1, "clip_frac": 3, "logp_gap": 4, "ratio_out": 4,
           "wall_s": 0}


def table_pass_k(entry_rows: Sequence[dict]) -> tuple:
  """The k of the table's pass@k columns (from its ``pass@<k>_change_mean`` keys)."""
  ks = {int(k[5:-12]) for r in entry_rows for k in r if k.startswith("pass@") and k.endswith("_change_mean")}
  return tuple(sorted(ks))


def markdown_table(entry_rows: Sequence[dict], pass_k: Sequence[int] = (1, 8)) -> str:
  """The Markdown table: ``mean [min, max]`` over the finished seeds of each entry; ``n/a`` = not measured."""
  keys = _figure_keys(pass_k)
  header = ["entry", "status"] + [f"{title} ({unit})" for _, title, unit in keys]
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  for row in entry_rows:
    status = row["status"] + (f": {row['error']}" if row.get("error") else "")
    cells = [row["entry"], status.replace("|", "\\|")]
    cells += [_cell(row, key, _DIGITS.get(key, 1)) for key, _, _ in keys]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def write_table(arena_dir: str, entry_rows: Sequence[dict], run_rows: Sequence[dict],
                pass_k: Sequence[int] = (1, 8)) -> dict:
  """Writes ``arena.csv`` (per entry), ``arena_runs.csv`` (per run) and ``arena.md``; returns their paths."""
  os.makedirs(arena_dir, exist_ok=True)
  paths = {"csv": os.path.join(arena_dir, "arena.csv"), "runs_csv": os.path.join(arena_dir, "arena_runs.csv"),
           "md": os.path.join(arena_dir, "arena.md")}
  for path, rows in ((paths["csv"], entry_rows), (paths["runs_csv"], run_rows)):
    fields = list(dict.fromkeys(k for r in rows for k in r))
    tmp = path + ".tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
      w = csv.DictWriter(f, fieldnames=fields)
      w.writeheader()
      for r in rows:
        w.writerow({k: "" if r.get(k) is None else r.get(k) for k in fields})
    os.replace(tmp, path)  # a reader never sees half a table
  note = ("Each cell: mean [min, max] over the finished seeds (one value when they agree or one seed finished); "
          "n/a: not measured (e.g. no clip in the objective). Gains and pass@k changes are in points, after RL "
          "minus after SFT.")
  tmp = paths["md"] + ".tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    f.write(markdown_table(entry_rows, pass_k) + "\n\n" + note + "\n")
  os.replace(tmp, paths["md"])
  return paths


def _curve(rows: list, key: str, summary: Optional[dict]) -> tuple[np.ndarray, np.ndarray]:
  if key == "eval":
    pts = {r["step"]: r["eval/greedy_accuracy"] for r in rows
           if r.get("stage") == "rl" and isinstance(r.get("eval/greedy_accuracy"), float)}
    if summary and isinstance(summary.get("rl"), dict) and rows:
      last = max((r["step"] for r in rows if r.get("stage") == "rl"), default=None)
      if last is not None:
        pts[last] = summary["rl"].get("greedy_accuracy", pts.get(last))
    pts = {s: v for s, v in pts.items() if v is not None}
  else:
    rl = rl_rows(rows)
    if key == "clip":
      key = clip_key(rl)
      if key is None:
        return np.zeros(0), np.zeros(0)
    pts = {r["step"]: r[key] for r in rl if isinstance(r.get(key), float)}
  steps = np.asarray(sorted(pts))
  return steps, np.asarray([pts[s] for s in steps], np.float64)


def _mean_curve(curves):
  """The mean over seeds at each step any seed logged (the seeds that logged it)."""
  table: dict = {}
  for steps, values in curves:
    for s, v in zip(steps, values):
      table.setdefault(int(s), []).append(v)
  steps = np.asarray(sorted(table))
  return steps, np.asarray([np.mean(table[s]) for s in steps])


def plot_curves(arena_dir: str, entries: Sequence[str], seeds: Sequence[int], png_path: Optional[str] = None,
                panels=CURVE_PANELS) -> str:
  """Overlaid learning curves, one panel per metric, the mean over the finished-or-running seeds per entry.

  Draws on a ``matplotlib.figure.Figure`` with its own Agg canvas (no pyplot; the global backend is left alone,
  as ``rljax.train.plot_metrics``). Returns the PNG's path (default ``<arena_dir>/curves.png``)."""
  from matplotlib.backends.backend_agg import FigureCanvasAgg  # pylint: disable=import-outside-toplevel
  from matplotlib.figure import Figure  # pylint: disable=import-outside-toplevel
  from matplotlib import rcParams  # pylint: disable=import-outside-toplevel
  png_path = png_path or os.path.join(arena_dir, "curves.png")
  ncols = 3
  nrows = -(-len(panels) // ncols)
  fig = Figure(figsize=(5 * ncols, 3.6 * nrows))
  FigureCanvasAgg(fig)
  axes = np.atleast_1d(fig.subplots(nrows, ncols)).ravel()
  data = {}
  for name in entries:
    for seed in seeds:
      d = run_dir(arena_dir, name, seed)
      data[(name, seed)] = (_read_rows(os.path.join(d, "metrics.jsonl")), _read_json(os.path.join(d, "summary.json")))
  # one colour per entry in every panel (a panel where an entry logged nothing must not shift the others')
  colors = rcParams["axes.prop_cycle"].by_key()["color"]
  for ax, (title, key) in zip(axes, panels):
    drawn = False
    for i, name in enumerate(entries):
      curves = [_curve(data[(name, seed)][0], key, data[(name, seed)][1]) for seed in seeds]
      curves = [c for c in curves if len(c[0])]
      if curves:
        steps, values = _mean_curve(curves)
        ax.plot(steps, values, marker="o" if len(steps) < 20 else None, ms=3, label=name,
                color=colors[i % len(colors)])
        drawn = True
    if not drawn:
      ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes)
    ax.set_title(title)
    ax.set_xlabel("RL step")
    ax.grid(alpha=0.3)
  for ax in axes[len(panels):]:
    ax.set_visible(False)
  legend = {}  # every entry drawn in any panel, in the entries' order
  for ax in axes[:len(panels)]:
    for h, l in zip(*ax.get_legend_handles_labels()):
      legend.setdefault(l, h)
  labels = [n for n in entries if n in legend]
  handles = [legend[n] for n in labels]
  if labels:
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 8), fontsize=8, frameon=False)
  fig.tight_layout(rect=(0, 0.04 + 0.03 * ((len(labels) - 1) // 8) if labels else 0, 1, 1))
  fig.savefig(png_path, dpi=90)
  return png_path


def read_results(arena_dir: str, entries: Optional[Sequence[str]] = None, seeds: Optional[Sequence[int]] = None,
                 pass_k: Optional[Sequence[int]] = None) -> tuple[list[dict], list[dict]]:
  """``table_rows`` of an arena directory; ``entries`` / ``seeds`` default to what the directory holds,
  ``pass_k`` to the smallest and largest k the first finished run evaluated."""
  if not os.path.isdir(arena_dir):
    raise ValueError(f"arena directory {arena_dir!r} does not exist")
  if entries is None:
    entries = sorted(n for n in os.listdir(arena_dir)
                     if os.path.isdir(os.path.join(arena_dir, n)) and not n.startswith(("_", ".")))
  if seeds is None:
    found = {int(s[4:]) for n in entries if os.path.isdir(os.path.join(arena_dir, n))
             for s in os.listdir(os.path.join(arena_dir, n)) if s.startswith("seed") and s[4:].isdigit()}
    seeds = sorted(found)
  if pass_k is None:
    pass_k = ()
    for name in entries:
      for seed in seeds:
        summary = _read_json(os.path.join(run_dir(arena_dir, name, seed), "summary.json"))
        ks = sorted(int(k[5:]) for k in (summary or {}).get("sft", {}) if k.startswith("pass@"))
        if ks and not pass_k:
          pass_k = tuple(dict.fromkeys([ks[0], ks[-1]]))
  return table_rows(arena_dir, entries, seeds, pass_k)
