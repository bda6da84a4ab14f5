"""Rollout-budget allocation (host side, NumPy): Pilot-Commit and E3.

These decide how many rollouts each prompt gets *before* sampling, so they run
on the host between jitted calls and return NumPy integer arrays (the sampler
needs concrete counts). Inputs may be NumPy or JAX arrays.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

__all__ = ["pilot_commit", "difficulty_budget"]


def _int(name: str, value, *, minimum: int = 0) -> int:
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
    raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
  return int(value)


def _water_fill(weights: np.ndarray, total: float, cap: np.ndarray) -> np.ndarray:
  """Real quotas ``q_i`` proportional to ``weights`` with ``q_i <= cap_i``, ``sum q = total``."""
  q = np.zeros_like(weights, dtype=np.float64)
  active = weights > 0
  remaining = float(total)
  while active.any() and remaining > 0:
    share = remaining * weights / weights[active].sum()
    over = active & (share >= cap)
    if not over.any():
      q[active] = share[active]
      break
    q[over] = cap[over]
    remaining -= cap[over].sum()
    active &= ~over
  return q


def _round(q: np.ndarray, total: int, cap: np.ndarray, weights: np.ndarray, ties: str) -> np.ndarray:
  """Largest-remainder rounding of quotas ``q`` to ints summing to <= ``total``.

  ``ties="index"``: leftover units go by (larger fraction, larger weight, lower
  index) — the sum is exactly ``min(total, sum cap)``. ``ties="equal"``:
  prompts with equal weight always get equal counts; leftover units go to
  whole tie classes while they fit, so the sum may fall short of ``total``.
  """
  base = np.minimum(np.floor(q + 1e-9).astype(np.int64), cap)
  while base.sum() > total:  # float round-up guard: take back from the smallest fraction
    k = int(np.argmin(np.where(base > 0, q - np.floor(q), np.inf)))
    base[k] -= 1
  left = int(total - base.sum())
  frac = q - base
  order = np.lexsort((np.arange(len(q)), -weights, -frac))
  eligible = (base < cap) & (weights > 0)
  if ties == "index":
    for i in order:
      if left <= 0:
        break
      if eligible[i]:
        base[i] += 1
        left -= 1
    return base
  i = 0
  while i < len(order) and left > 0:
    j = i
    while j < len(order) and weights[order[j]] == weights[order[i]]:
      j += 1
    cls = [k for k in order[i:j] if eligible[k]]
    if cls and len(cls) > left:
      break
    for k in cls:
      base[k] += 1
    left -= len(cls)
    i = j
  return base


def pilot_commit(pilot_rewards, group_id, *, num_groups: int, budget: int, score: str = "std",
                 rule: str = "proportional", min_score: float = 0.0, max_per_prompt: Optional[int] = None,
                 window: Optional[tuple] = None, valid=None):
  """Pilot-Commit: allocate the commit budget from the pilot rollouts' reward spread.

  Pilot stage (done by the caller): a few rollouts per prompt. Here, per
  prompt ``g``: ``s_g = std_g`` (``score="std"``) or ``var_g`` (population, of
  the valid pilot rewards); prompts with ``s_g <= min_score`` (collapsed,
  including 1-rollout pilots whose spread is unknown) are skipped (0).
  ``rule="proportional"``: ``n_g`` proportional to ``s_g``; ``"uniform"``:
  equal shares among kept prompts; with ``max_per_prompt`` the surplus is
  re-spread (water-filling). Quotas are rounded down with leftovers given by
  largest remainder to whole ties only, so ``sum n_g <= budget`` and ``n_g``
  is non-decreasing in ``s_g`` (equal scores get equal counts).

  ``window=(lo, hi)`` also skips prompts whose pilot mean reward lies outside
  ``[lo, hi]``: the authors' rule (github.com/databricks/pilot-commit,
  recipe/pc/pc_ray_trainer.py ``filter_batch``: success rate in
  ``[p_lower, 1 − p_upper] = [0.125, 0.75]``), which with ``rule="uniform"``
  and ``max_per_prompt = n`` gives every passing prompt the same n commit
  rollouts while the budget lasts (the authors keep the overflow in a replay
  buffer for later steps; we share the budget equally instead).

  Source: Pilot-Commit (001_5839a3671b0b4d92.txt L37, arXiv 2605.26606); the
  spread score and the proportional rule (default) are our reading of "allocate
  the rest to high-variance prompts"; reusing the pilot rollouts inside the
  group is the caller's choice.

  Args:
    pilot_rewards: ``[B]`` rewards of the pilot rollouts.
    group_id: ``[B]`` int prompt index in ``[0, num_groups)``.
    num_groups: number of prompts; budget: commit rollouts to spread (int >= 0).
    score: ``"std"`` | ``"var"``; rule: ``"proportional"`` | ``"uniform"``.
    min_score: threshold at or below which a prompt is skipped.
    window: optional ``(lo, hi)``, ``lo <= hi``: keep only prompts with pilot mean in ``[lo, hi]``.
    max_per_prompt: optional cap on commit rollouts per prompt.
    valid: optional ``[B]`` row mask.

  Returns:
    ``(n [num_groups] int64, {"score" [G], "num_committed_prompts",
    "num_skipped_prompts", "allocated", "unallocated"})``.
  """
  if score not in ("std", "var"):
    raise ValueError(f"score must be 'std' or 'var', got {score!r}")
  if rule not in ("proportional", "uniform"):
    raise ValueError(f"rule must be 'proportional' or 'uniform', got {rule!r}")
  num_groups = _int("num_groups", num_groups, minimum=1)
  budget = _int("budget", budget)
  r = np.asarray(pilot_rewards, np.float64)
  gid = np.asarray(group_id)
  if r.ndim != 1:
    raise ValueError(f"pilot_rewards must be [B], got shape {r.shape}")
  if gid.shape != r.shape or gid.dtype.kind not in "iu":
    raise ValueError(f"group_id must be an integer [B] array matching pilot_rewards, got {gid.shape} {gid.dtype}")
  if gid.size and (gid.min() < 0 or gid.max() >= num_groups):
    raise ValueError(f"group_id values must lie in [0, num_groups={num_groups})")
  v = np.ones(r.shape, bool) if valid is None else np.asarray(valid).astype(bool)
  if v.shape != r.shape:
    raise ValueError(f"valid must have shape {r.shape}, got {v.shape}")
  if not np.all(np.isfinite(r[v])):
    raise ValueError("pilot_rewards contains non-finite values")
  if not math.isfinite(float(min_score)) or min_score < 0:
    raise ValueError(f"min_score must be finite and >= 0, got {min_score!r}")
  cap = np.full((num_groups,), budget, np.int64)
  if max_per_prompt is not None:
    cap[:] = _int("max_per_prompt", max_per_prompt)
  cnt = np.bincount(gid[v], minlength=num_groups).astype(np.float64)
  mean = np.bincount(gid[v], r[v], minlength=num_groups) / np.maximum(cnt, 1)
  var = np.bincount(gid[v], (r[v] - mean[gid[v]]) ** 2, minlength=num_groups) / np.maximum(cnt, 1)
  s = np.sqrt(var) if score == "std" else var
  s = np.where(cnt >= 2, s, 0.0)
  kept = s > min_score
  if window is not None:
    lo, hi = (float(x) for x in window)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
      raise ValueError(f"window must be (lo, hi) with finite lo <= hi, got {window!r}")
    kept &= (mean >= lo) & (mean <= hi)
  w = np.where(kept, s if rule == "proportional" else 1.0, 0.0)
  q = _water_fill(w, budget, cap.astype(np.float64))
  n = _round(q, budget, cap, w, ties="equal") if w.sum() > 0 else np.zeros((num_groups,), np.int64)
  return n, {"score": s, "num_committed_prompts": int((n > 0).sum()), "num_skipped_prompts": int((~kept).sum()),
             "allocated": int(n.sum()), "unallocated": int(budget - n.sum())}


def difficulty_budget(accuracy, *, budget: int, min_per_prompt: int = 0, max_per_prompt: Optional[int] = None,
                      power: float = 1.0, smoothing: float = 0.0):
  """E3 difficulty-based rollout budgets: more rollouts for harder prompts.

  ``w_j = (1 - acc_j) ** power + smoothing``; every prompt first gets
  ``min_per_prompt``, the rest ``R = budget - P * min_per_prompt`` is spread
  proportionally to ``w`` (water-filled under ``max_per_prompt``) and rounded
  by largest remainder (ties: larger weight, then lower index), so
  ``sum n_j = budget`` exactly (when the caps allow it) and ``n_j`` is
  non-increasing in ``acc_j`` (equal accuracies differ by at most 1). If every
  weight is 0 (all solved, ``smoothing = 0``) the rest is spread uniformly.

  Source: E3 (001_5839a3671b0b4d92.txt L203): "dynamically allocating rollout
  budgets based on the difficulty of the problems". The authors' code
  (github.com/LiaoMengqi/E3-RL4LLMs, e3/trainer/ray_trainer.py
  ``get_rollout_n_per_prompt``) also gives every prompt a floor and splits the
  rest proportionally, but weights by the prompt's difficulty rank among all
  dataset prompts (sorted by mean past reward; unseen prompts weight 0) and
  hands the rounding leftover to the hardest prompts first; the ``(1 − acc)``
  weight and the largest-remainder rounding are ours.

  Args:
    accuracy: ``[P]`` estimated per-prompt accuracy in [0, 1] (e.g. a running
      mean of past rewards).
    budget: total rollouts (int >= ``P * min_per_prompt``).
    min_per_prompt: floor per prompt (e.g. 2 so a GRPO group exists).
    max_per_prompt: optional cap (``P * max_per_prompt >= budget``).
    power: ``> 0``; smoothing: ``>= 0``.

  Returns:
    ``(n [P] int64, {"weight" [P], "allocated"})``.
  """
  acc = np.asarray(accuracy, np.float64)
  if acc.ndim != 1 or acc.size == 0:
    raise ValueError(f"accuracy must be a non-empty [P] vector, got shape {acc.shape}")
  if not np.all(np.isfinite(acc)) or acc.min() < 0 or acc.max() > 1:
    raise ValueError("accuracy must be finite and in [0, 1]")
  budget = _int("budget", budget)
  lo = _int("min_per_prompt", min_per_prompt)
  p = acc.size
  if budget < p * lo:
    raise ValueError(f"budget must be >= P * min_per_prompt = {p * lo}, got {budget}")
  if max_per_prompt is not None:
    hi = _int("max_per_prompt", max_per_prompt)
    if hi < lo or p * hi < budget:
      raise ValueError(f"max_per_prompt must be >= min_per_prompt and P * max_per_prompt >= budget, got {hi}")
  else:
    hi = budget
  if not (math.isfinite(float(power)) and power > 0):
    raise ValueError(f"power must be > 0, got {power!r}")
  if not (math.isfinite(float(smoothing)) and smoothing >= 0):
    raise ValueError(f"smoothing must be >= 0, got {smoothing!r}")
  w = (1.0 - acc) ** float(power) + float(smoothing)
  if w.sum() <= 0:
    w = np.ones_like(w)
  rest = budget - p * lo
  cap = np.full((p,), hi - lo, np.int64)
  q = _water_fill(w, rest, cap.astype(np.float64))
  extra = _round(q, rest, cap, w, ties="index")
  left = rest - int(extra.sum())
  if left > 0:  # only zero-weight prompts have room left: spread the rest uniformly over them
    room = cap - extra
    w2 = (room > 0).astype(np.float64)
    extra += _round(_water_fill(w2, left, room.astype(np.float64)), left, room, w2, ties="index")
  n = lo + extra
  return n, {"weight": w, "allocated": int(n.sum())}
