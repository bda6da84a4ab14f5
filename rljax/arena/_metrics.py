"""The arena's per-run figures and their summary over seeds: pure functions of a run's files.

Per run (``run_figures``), from ``summary.json`` (``sft`` and ``rl`` evaluations, ``wall_s``) and the RL rows of
``metrics.jsonl``:

- ``gain``: held-out greedy accuracy after RL minus after SFT, in points (``100 * (rl - sft)``);
- ``pass@k change``: ``100 * (rl pass@k - sft pass@k)`` in points, for each requested k (None when not evaluated);
- ``entropy``: the mean of ``policy/entropy`` over the last 10% of RL steps (at least one row);
- ``steps_to_90``: the first RL step at which the trailing mean of ``rollout/reward_mean`` (window = the same
  10% of steps, at least one) reaches 90% of the *final* reward, the mean of the last 10% of steps; None when
  the final reward is <= 0 (90% of it is not a target);
- ``grad_spike``: ``max / median`` of ``train/grad_norm`` over RL steps (None when the median is 0);
- ``clip_frac``: the mean of the policy loss's own clip fraction (``<term>/clip_frac``, critic terms aside), else
  of the generic PPO-bound ``policy/clip_frac``; None when neither is logged (an entry without a clip, never 0);
- ``logp_gap``: the mean over RL steps of ``rollout/logp_gap``, the sampler's and the trainer's log-probs of the
  sampled tokens apart (nats per token; ``rljax/train/_mismatch.py``); None when not logged;
- ``ratio_out``: the mean over RL steps of ``rollout/mismatch_out_frac``, the share of tokens whose
  trainer/sampler ratio lies outside ``[1/2, 2]``; None when not logged;
- ``wall_s``: the run's wall time.

Over seeds (``spread``): the mean and the min and max of the runs that have the figure; the count says how many.
"""
from __future__ import annotations

import math
from typing import Iterable, Optional, Sequence

import numpy as np

__all__ = ["run_figures", "final_window", "tail_mean", "steps_to_fraction", "grad_spike", "clip_fraction",
           "clip_key", "spread", "FIGURES", "rl_rows"]

# (key, column title, unit) of the per-run figures, in table order (pass@k columns are added per k)
FIGURES = (
    ("gain", "greedy acc. gain", "points"),
    ("entropy", "final entropy", "nats"),
    ("steps_to_90", "steps to 90% reward", "steps"),
    ("grad_spike", "grad-norm spike", "max/median"),
    ("clip_frac", "clip fraction", "mean"),
    ("logp_gap", "log-prob gap", "nats/token"),
    ("ratio_out", "ratios outside [1/2, 2]", "share"),
    ("wall_s", "wall time", "s"),
)
_CRITIC_PREFIXES = ("value_loss", "critic")


def rl_rows(rows: Iterable[dict]) -> list[dict]:
  """The RL step rows (``stage == "rl"``, ``step >= 1``), in step order (a resumed run's rows are unique by step)."""
  by_step = {r["step"]: r for r in rows if r.get("stage") == "rl" and r.get("step", 0) >= 1}
  return [by_step[s] for s in sorted(by_step)]


def _series(rows: Sequence[dict], key: str) -> tuple[np.ndarray, np.ndarray]:
  pts = [(r["step"], float(r[key])) for r in rows if isinstance(r.get(key), (int, float))
         and not isinstance(r.get(key), bool) and math.isfinite(float(r[key]))]
  if not pts:
    return np.zeros(0, np.int64), np.zeros(0, np.float64)
  steps, values = zip(*pts)
  return np.asarray(steps), np.asarray(values, np.float64)


def final_window(n: int, fraction: float = 0.1) -> int:
  """The number of last steps that make the "final" value: ``max(1, round(fraction * n))`` (0 when ``n == 0``)."""
  return 0 if n == 0 else max(1, int(round(fraction * n)))


def tail_mean(values: Sequence[float], fraction: float = 0.1) -> Optional[float]:
  """The mean of the last ``final_window(len(values))`` values (None for none)."""
  values = np.asarray(values, np.float64)
  w = final_window(len(values), fraction)
  return None if w == 0 else float(values[-w:].mean())


def steps_to_fraction(steps: Sequence[int], values: Sequence[float], target: float = 0.9,
                      fraction: float = 0.1) -> Optional[int]:
  """The first step at which the trailing mean (window ``final_window``) of ``values`` reaches ``target`` times
  the final value (the mean of the last window). None when there are no values or the final value is <= 0."""
  steps, values = np.asarray(steps), np.asarray(values, np.float64)
  final = tail_mean(values, fraction)
  if final is None or final <= 0:
    return None
  w = final_window(len(values), fraction)
  trailing = np.convolve(values, np.ones(w) / w, mode="valid")  # trailing[j] = mean(values[j : j + w])
  hit = np.flatnonzero(trailing >= target * final - 1e-12)
  return int(steps[hit[0] + w - 1])  # hit exists: the last window's mean is the final value itself


def grad_spike(values: Sequence[float]) -> Optional[float]:
  """``max / median`` of the gradient norms (None for none, or a zero median)."""
  values = np.asarray(values, np.float64)
  if values.size == 0:
    return None
  med = float(np.median(values))
  return None if med <= 0 else float(values.max() / med)


def clip_key(rows: Sequence[dict]) -> Optional[str]:
  """The clip-fraction metric of these rows: the policy loss's own ``<term>/clip_frac`` (the first in name order,
  critic terms aside), else ``policy/clip_frac``; None when neither is logged."""
  keys = sorted({k for r in rows for k in r if k.endswith("/clip_frac")})
  own = [k for k in keys if not k.startswith(_CRITIC_PREFIXES + ("policy/",))]
  if own:
    return own[0]
  return "policy/clip_frac" if "policy/clip_frac" in keys else None


def clip_fraction(rows: Sequence[dict]) -> Optional[float]:
  """The mean over steps of ``clip_key(rows)`` (None when it is None)."""
  key = clip_key(rows)
  if key is None:
    return None
  _, values = _series(rows, key)
  return float(values.mean()) if values.size else None


def run_figures(summary: dict, rows: Iterable[dict], pass_k: Sequence[int] = (1, 8)) -> dict:
  """The figures of one finished run (module docstring); a figure that cannot be computed is None."""
  rows = rl_rows(rows)
  sft, rl = summary.get("sft") or {}, summary.get("rl") or {}
  out = {"gain": None if "greedy_accuracy" not in sft or "greedy_accuracy" not in rl
         else 100.0 * (rl["greedy_accuracy"] - sft["greedy_accuracy"])}
  for k in pass_k:
    key = f"pass@{k}"
    out[f"{key}_change"] = 100.0 * (rl[key] - sft[key]) if key in rl and key in sft else None
  _, entropy = _series(rows, "policy/entropy")
  out["entropy"] = tail_mean(entropy)
  steps, reward = _series(rows, "rollout/reward_mean")
  out["steps_to_90"] = steps_to_fraction(steps, reward)
  out["grad_spike"] = grad_spike(_series(rows, "train/grad_norm")[1])
  out["clip_frac"] = clip_fraction(rows)
  out["clip_key"] = clip_key(rows)
  for key, metric in (("logp_gap", "rollout/logp_gap"), ("ratio_out", "rollout/mismatch_out_frac")):
    _, values = _series(rows, metric)
    out[key] = float(values.mean()) if values.size else None
  out["wall_s"] = summary.get("wall_s")
  return out


def spread(values: Iterable[Optional[float]]) -> dict:
  """``{"mean", "min", "max", "n"}`` over the values that are not None (all None when there are none)."""
  xs = np.asarray([v for v in values if v is not None], np.float64)
  if xs.size == 0:
    return {"mean": None, "min": None, "max": None, "n": 0}
  return {"mean": float(xs.mean()), "min": float(xs.min()), "max": float(xs.max()), "n": int(xs.size)}
