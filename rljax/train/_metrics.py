"""Metrics sinks: JSON lines, TensorBoard event files, Weights & Biases and a PNG plot of the curves."""
from __future__ import annotations

import json
import math
import os
from typing import Mapping, Optional

import numpy as np

__all__ = ["MetricsWriter", "WandbSink", "check_trackers", "wandb_settings", "read_jsonl", "plot_metrics", "plot_panels",
           "PLOT_PANELS"]

WANDB_INSTALL = 'pip install -e ".[wandb]"'  # (or pip install wandb)

# (title, candidate metric keys, first present wins); ``plot_panels`` keeps those the run measures
PLOT_PANELS = (
    ("reward", ("rollout/reward_mean",)),
    ("held-out accuracy", ("eval/greedy_accuracy",)),
    ("held-out format", ("eval/greedy_format",)),  # tasks with a format_score (small_addition)
    ("entropy", ("policy/entropy", "rollout/entropy")),
    ("KL to the reference", ("kl/kl",)),  # a KL term in the loss
    ("KL(old || new)", ("policy/kl",)),  # 0 at one update per batch: the policy has not moved yet
    ("clip fraction", ("policy/clip_frac",)),
    ("loss", ("loss",)),
)


def _scalar(v) -> Optional[float]:
  try:
    f = float(np.asarray(v))
  except (TypeError, ValueError):
    return None
  return f


class MetricsWriter:
  """Writes ``{stage, step, **metrics}`` rows to ``metrics.jsonl`` and TensorBoard.

  Args:
    out_dir: run directory; files: ``metrics.jsonl``, ``tb/`` events,
      ``metrics.png``.
    tensorboard: also write TensorBoard events (tensorboardX).
    append: keep an existing ``metrics.jsonl`` (resumed runs drop rows past
      the resumed step with ``truncate``).
    wandb: ``WandbSink``'s keyword arguments to log to Weights & Biases too (None: not).
  """

  def __init__(self, out_dir: str, *, tensorboard: bool = True, append: bool = True, wandb: Optional[dict] = None):
    os.makedirs(out_dir, exist_ok=True)
    self.out_dir = out_dir
    self.path = os.path.join(out_dir, "metrics.jsonl")
    self._file = open(self.path, "a" if append else "w", encoding="utf-8")
    self._tb = None
    if tensorboard:
      from tensorboardX import SummaryWriter  # pylint: disable=import-outside-toplevel
      self._tb = SummaryWriter(os.path.join(out_dir, "tb"))
    self._wandb = WandbSink(jsonl=self.path, **wandb) if wandb is not None else None

  def truncate(self, stage: str, step: int) -> None:
    """Drops rows of ``stage`` with ``step > step`` (used when resuming)."""
    self._file.close()
    rows = [r for r in read_jsonl(self.path) if not (r.get("stage") == stage and r.get("step", 0) > step)]
    with open(self.path, "w", encoding="utf-8") as f:
      for r in rows:
        f.write(json.dumps(r) + "\n")
    self._file = open(self.path, "a", encoding="utf-8")

  def write(self, stage: str, step: int, metrics: Mapping) -> dict:
    row = {"stage": stage, "step": int(step)}
    for k, v in metrics.items():
      f = _scalar(v)
      if f is not None:
        row[k] = f if math.isfinite(f) else str(f)
    self._file.write(json.dumps(row) + "\n")
    self._file.flush()
    if self._tb is not None:
      for k, v in row.items():
        if k not in ("stage", "step") and isinstance(v, float):
          self._tb.add_scalar(f"{stage}/{k}", v, int(step))
    if self._wandb is not None:
      self._wandb.log(row)
    return row

  def close(self):
    self._file.close()
    if self._tb is not None:
      self._tb.close()
      self._tb = None
    if self._wandb is not None:
      self._wandb.finish()
      self._wandb = None


def check_trackers(cfg) -> None:
  """Refuses ``RunConfig.wandb=true`` without the ``wandb`` package, with the command that installs it (a start
  check: nothing is written)."""
  import importlib.util  # pylint: disable=import-outside-toplevel
  if cfg.wandb and importlib.util.find_spec("wandb") is None:
    raise ValueError(f"wandb=true logs to Weights & Biases, which needs the wandb package: {WANDB_INSTALL}")


def wandb_settings(cfg, config: dict) -> Optional[dict]:
  """``MetricsWriter``'s ``wandb`` argument for a run config (None when ``cfg.wandb`` is off)."""
  if not cfg.wandb:
    return None
  return {"project": cfg.wandb_project or os.environ.get("WANDB_PROJECT") or "rljax",
          "name": cfg.wandb_name or os.path.basename(os.path.normpath(cfg.out_dir)), "config": config,
          "plot": os.path.join(cfg.out_dir, "metrics.png") if cfg.plot else None}


class WandbSink:
  """Weights & Biases: one wandb run with the run's config; each row of ``metrics.jsonl`` logged as
  ``<stage>/<metric>`` against the stage's own step axis (``sft/step``, ``rl/step``: ``define_metric``, so the
  SFT and RL steps, both counted from 0, do not collide); at the end the plot ``metrics.png`` (drawn from
  ``jsonl``) as an image. ``WANDB_MODE=offline`` writes the run under ``WANDB_DIR`` for ``wandb sync``."""

  def __init__(self, *, project: str, name: str, config: dict, jsonl: str, plot: Optional[str] = None):
    import wandb  # pylint: disable=import-outside-toplevel
    self._wandb, self.jsonl, self.plot = wandb, jsonl, plot
    self.run = wandb.init(project=project, name=name, config=config)
    self._stages: set = set()

  def log(self, row: Mapping) -> None:
    stage = row["stage"]
    if stage not in self._stages:
      self.run.define_metric(f"{stage}/step")
      self.run.define_metric(f"{stage}/*", step_metric=f"{stage}/step")
      self._stages.add(stage)
    self.run.log({f"{stage}/step": row["step"],
                  **{f"{stage}/{k}": v for k, v in row.items() if k not in ("stage", "step") and isinstance(v, float)}})

  def finish(self) -> None:
    if self.plot is not None and read_jsonl(self.jsonl):
      self.run.log({"metrics.png": self._wandb.Image(plot_metrics(self.jsonl, self.plot))})
    self.run.finish()


def read_jsonl(path: str) -> list[dict]:
  if not os.path.exists(path):
    return []
  rows = []
  with open(path, encoding="utf-8") as f:
    for line in f:
      line = line.strip()
      if line:
        rows.append(json.loads(line))
  return rows


def plot_panels(rows: list[dict]) -> list[tuple[str, str]]:
  """``[(title, metric key)]``: the ``PLOT_PANELS`` the rows measure, in order. A panel is drawn when one of its
  keys has a value that is not 0 in some row; a key logged as 0 throughout is a term the run does not have (KL(old
  || new) and the clip fraction at one update per batch: the ratio is 1), a flat line that would say nothing. The
  reward and held-out accuracy panels are drawn whenever logged, zeros included (a run that learns nothing)."""
  out = []
  for title, keys in PLOT_PANELS:
    for key in keys:
      values = [r[key] for r in rows if isinstance(r.get(key), float)]
      if values and (title in ("reward", "held-out accuracy") or any(v != 0.0 for v in values)):
        out.append((title, key))
        break
  return out


def plot_metrics(jsonl_path: str, png_path: str, stage: str = "rl") -> str:
  """Plots the ``plot_panels`` of the run's ``stage`` rows per step (reward, held-out accuracy and format,
  entropy, KL, clip fraction, loss: those it measures), three panels a row, at least two rows.

  Draws on a ``matplotlib.figure.Figure`` with its own Agg canvas: no pyplot, and the global matplotlib
  backend is left alone (a notebook keeps showing its plots inline)."""
  from matplotlib.backends.backend_agg import FigureCanvasAgg  # pylint: disable=import-outside-toplevel
  from matplotlib.figure import Figure  # pylint: disable=import-outside-toplevel

  rows = [r for r in read_jsonl(jsonl_path) if r.get("stage") == stage]
  panels = plot_panels(rows)
  n_rows = max(2, -(-len(panels) // 3))
  fig = Figure(figsize=(13, 3.25 * n_rows))
  FigureCanvasAgg(fig)
  axes = fig.subplots(n_rows, 3).ravel()
  for ax, (title, key) in zip(axes, panels):
    pts = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), float)]
    xs, ys = zip(*pts)
    ax.plot(xs, ys, marker="o" if len(pts) < 20 else None, ms=3)
    ax.set_ylabel(key, fontsize=8)
    ax.set_title(title)
    ax.set_xlabel(f"{stage} step")
    ax.grid(alpha=0.3)
  for ax in axes[len(panels):]:
    ax.set_axis_off()
  if not panels:
    axes[0].text(0.5, 0.5, f"no {stage} metrics logged", ha="center", va="center", transform=axes[0].transAxes)
  fig.tight_layout()
  fig.savefig(png_path, dpi=90)
  return png_path
