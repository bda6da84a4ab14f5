"""Rollout-budget allocation (host side, NumPy): Pilot-Commit and E3.

These decide how many rollouts each prompt gets *before* sampling, so they run
on the host between jitted calls and return NumPy integer arrays (the sampler
needs concrete counts). Inputs may be NumPy or JAX arrays.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

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
  dataset prompts (sorted by mean past reward; the released data gives every
  prompt an initial rank, and a prompt never sampled counts as mean 0, among
  the hardest), floors its proportional share without a cap and hands the
  rounding leftover, up to its maximum, to the hardest prompts first; the
  ``(1 − acc)`` weight, the cap and the largest-remainder rounding are ours
  (the record lists each difference).

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


# ----------------------------------------------------------------------------- the stages (the rows' ``stage``)

def _pilot_commit_stage(*, pilot: int = 2, budget: Optional[int] = None, score: str = "std",
                        rule: str = "proportional", min_score: float = 0.0, max_per_prompt: Optional[int] = None,
                        window: Optional[tuple] = None):
  """Pilot-Commit as a prompt filter: ``pilot`` rollouts per prompt first, then the commit rollouts.

  ``select`` allocates ``rljax.filters.pilot_commit`` counts from the pilot rewards (``prompts.pilot``,
  ``pilot`` consecutive rows per candidate; their rows join the group): per prompt at most ``group_size -
  pilot`` (and ``max_per_prompt``), in total at most ``budget`` commit rollouts per step. ``budget=None``:
  half the layout's commit rows, ``P * (group_size - pilot) // 2``. The layout is static (see
  ``rljax.filters._stages``): the budget re-allocates the valid rows; a prompt committed 0 keeps its pilot rows.
  """
  from rljax.filters import _stages as S  # pylint: disable=import-outside-toplevel
  from rljax.stages import PromptFilter  # pylint: disable=import-outside-toplevel
  _int("pilot", pilot, minimum=2)  # a spread needs two pilot rollouts
  if budget is not None:
    _int("budget", budget)
  kw = dict(score=score, rule=rule, min_score=min_score, window=None if window is None else tuple(window))
  pilot_commit(np.zeros(2), np.zeros(2, np.int32), num_groups=1, budget=budget or 0, max_per_prompt=max_per_prompt,
               **kw)  # validates

  def build(group_size):
    if group_size is not None and pilot >= group_size:
      raise ValueError(f"pilot_commit: pilot={pilot} must be < group_size={group_size} (rollouts per prompt)")

    def select(state, prompts, key):  # pylint: disable=unused-argument
      n = S.layout(group_size, "pilot_commit") - pilot
      data = prompts.pilot
      if data is None:
        raise ValueError("pilot_commit: select needs the pilot rollout (prompts.pilot)")
      p = len(prompts.problems)
      cap = n if max_per_prompt is None else min(int(max_per_prompt), n)
      gid = (np.arange(data.batch_size) // (data.batch_size // p)).astype(np.int32)
      counts, stats = pilot_commit(data.rewards, gid, num_groups=p, budget=p * n // 2 if budget is None else budget,
                                   max_per_prompt=cap, valid=data.valid, **kw)
      report = _pilot_report(counts, stats["score"], data, gid, p, float(min_score), kw["window"])
      return counts, state, {**stats, **report}

    return PromptFilter(lambda num_dataset_prompts: (), select, name="pilot_commit", pilot=pilot,
                        bind_fn=lambda stage, facts: build(facts.group_size))

  return build(None)


def _pilot_report(counts, score, data, gid, p: int, min_score: float, window) -> dict:
  """Why Pilot-Commit committed no rollout to a prompt (each skipped prompt counts once, first reason first):
  ``skipped_zero_spread`` (pilot spread <= ``min_score``: predicted zero-variance), ``skipped_window`` (its pilot
  mean lies outside ``window``), ``skipped_budget`` (kept, but the budget ran out)."""
  zero = np.asarray(counts) == 0
  flat = zero & ~(np.asarray(score) > min_score)
  out_of_window = np.zeros(p, bool)
  if window is not None:
    v = np.asarray(data.valid, bool)
    mean = np.bincount(gid[v], np.asarray(data.rewards, np.float64)[v], minlength=p) / np.maximum(
        np.bincount(gid[v], minlength=p), 1)
    out_of_window = zero & ~flat & ((mean < window[0]) | (mean > window[1]))
  return {"skipped": float(zero.sum()), "skipped_zero_spread": float(flat.sum()),
          "skipped_window": float(out_of_window.sum()),
          "skipped_budget": float((zero & ~flat & ~out_of_window).sum())}


_pilot_commit_stage.slot = "prompt_filters"


class DifficultyState(NamedTuple):
  accuracy: np.ndarray  # [N] float32: running accuracy estimate per dataset prompt
  seen: np.ndarray      # [N] int32: steps in which the prompt was observed


def _difficulty_budget_stage(*, budget: Optional[int] = None, min_per_prompt: int = 0,
                             max_per_prompt: Optional[int] = None, power: float = 1.0, smoothing: float = 0.0,
                             decay: float = 0.5, prior: float = 0.5):
  """E3 difficulty budgets as a prompt filter, with a per-prompt accuracy estimate as its state.

  State: ``DifficultyState`` over the dataset prompts, ``accuracy = prior`` at first. ``select`` allocates
  ``rljax.filters.difficulty_budget`` counts (at most ``group_size`` and ``max_per_prompt``, summing to
  ``budget``) from the candidates' estimates; ``budget=None``: half the layout, ``P * group_size // 2``
  (at least ``P * min_per_prompt``). ``observe``: ``acc_j <- decay * acc_j + (1 - decay) * mean(correct)``
  over prompt ``j``'s rows of the step (``data.correct``, the task's verifier). The layout is static (see
  ``rljax.filters._stages``): the budget re-allocates the valid rows.
  """
  from rljax.filters import _stages as S  # pylint: disable=import-outside-toplevel
  from rljax.stages import PromptFilter  # pylint: disable=import-outside-toplevel
  if not 0.0 <= float(decay) < 1.0:
    raise ValueError(f"decay must be in [0, 1), got {decay!r}")
  if not 0.0 <= float(prior) <= 1.0:
    raise ValueError(f"prior must be in [0, 1], got {prior!r}")
  lo = _int("min_per_prompt", min_per_prompt)
  if budget is not None:
    _int("budget", budget)
  kw = dict(min_per_prompt=lo, power=power, smoothing=smoothing)
  difficulty_budget(np.array([prior]), budget=lo, max_per_prompt=max_per_prompt, **kw)  # validates

  def allocate(accuracy, group_size):
    p = accuracy.shape[0]
    cap = group_size if max_per_prompt is None else min(int(max_per_prompt), group_size)
    total = max(p * group_size // 2, p * lo) if budget is None else budget
    return difficulty_budget(accuracy, budget=total, max_per_prompt=cap, **kw)

  def build(facts):
    if facts is not None:  # the run's layout must admit the budget: fail at start-up
      allocate(np.full(facts.num_prompts, prior), facts.group_size)

    def init(num_dataset_prompts):
      return DifficultyState(np.full(num_dataset_prompts, prior, np.float32), np.zeros(num_dataset_prompts, np.int32))

    def select(state, prompts, key):  # pylint: disable=unused-argument
      n = S.layout(None if facts is None else facts.group_size, "difficulty_budget")
      acc = np.asarray(state.accuracy, np.float64)[np.asarray(prompts.index, np.int64)]
      counts, stats = allocate(acc, n)
      zero = counts == 0  # why: a zero weight (estimated solved), else the budget went to harder prompts
      report = {"skipped": float(zero.sum()), "skipped_solved": float((zero & (stats["weight"] <= 0)).sum()),
                "skipped_budget": float((zero & (stats["weight"] > 0)).sum()),
                "rows_cut": float(len(counts) * n - counts.sum())}
      return counts, state, {**stats, **report, "accuracy_mean": float(acc.mean())}

    def observe(state, data):
      if data.batch_size == 0:  # an empty batch: nothing observed
        return state, {"observed_prompts": 0, "step_accuracy": 0.0}
      ids, rows = S.per_prompt(data)
      mean = np.bincount(rows, np.clip(np.asarray(data.correct, np.float64), 0, 1), len(ids)) / np.bincount(rows)
      acc, seen = np.array(state.accuracy, np.float32), np.array(state.seen, np.int32)
      acc[ids] = decay * acc[ids] + (1.0 - decay) * mean
      seen[ids] += 1
      return DifficultyState(acc, seen), {"observed_prompts": len(ids), "step_accuracy": float(mean.mean())}

    return PromptFilter(init, select, observe, name="difficulty_budget", bind_fn=lambda stage, f: build(f))

  return build(None)


_difficulty_budget_stage.slot = "prompt_filters"


_S1 = "001_5839a3671b0b4d92.txt"


def _technique_rows():
  from rljax._technique import Fidelity, Technique
  return (
      Technique("pilot_commit", "filter", pilot_commit,
                "n_g proportional to pilot std_g, 0 if std_g = 0, sum <= budget",
                f"{_S1} L37 (Pilot-Commit, arXiv 2605.26606)",
                stage=_pilot_commit_stage,
                fidelity=Fidelity("authors_code", "github.com/databricks/pilot-commit: recipe/pc/pc_ray_trainer.py "
                                  "(filter_batch)",
                                  "default n ∝ pilot std; window, rule='uniform', max_per_prompt=n: their rule on "
                                  "acc (window (0.125, 0.75) on 0/1 rewards, (−0.75, 0.5) on their ±1 score), no "
                                  "replay buffer",
                                  read="databricks/pilot-commit@6def20ea recipe/pc/pc_ray_trainer.py:287-328 "
                                       "(filter_batch: lower ≤ mean acc ≤ 1 − upper) and :608-660 (explore batch "
                                       "→ replay buffer → commit batch), :378-384 (n_explore_effective); recipe/pc/config/"
                                       "pc_trainer.yaml:19-33; "
                                       "recipe/pc/replay_buffer.py (:135-150 prompt draw: random / max_variance "
                                       "/ most_recent / least_recent, :242-260 max_variance); pc_ray_trainer.py:"
                                       "168-214, 330-351, 642-651 (exclude_threshold_upper: easy prompts leave "
                                       "the data set); train_scripts/pc_qwen2.5-1.5b_p32c96.sh:19-33 and "
                                       "pc_qwen3-4b_p16c48.sh; read whole (#51, rG): pc_ray_trainer.py:420-700 "
                                       "(fit: explore, filter on algorithm.agg_metric, buffer, commit, old_log_prob "
                                       "recomputed on the whole batch, compute_advantage by uid); recipe/pc/config/"
                                       "pc_trainer.yaml (agg_metric acc, buffer_response_sampling_method "
                                       "max_variance); verl/utils/reward_score/__init__.py:63-100 and "
                                       "math_tinker.py:15-65 (verifier tinker_sympy in both pc scripts: score ±1 "
                                       "(min_reward −1, max_reward 1), acc the 0/1 correctness); verl/workers/"
                                       "reward_manager/dapo.py (the overlong penalty added to the score, not acc). "
                                       "Per-row review o (#51): recipe/pc/replay_buffer.py:70-87 (flush: an entry "
                                       "is evicted when current_step − its step > max_off_steps), pc_ray_trainer.py"
                                       ":495 (the draw, each round) before :700 (the flush, once the batch is full) "
                                       "and :839 (global_steps += 1 after the update), so an entry added at step s "
                                       "is drawn up to step s + 5; :843-851 (each epoch's end: the partial batch "
                                       "dropped, the buffer emptied with enforce=True); train_scripts/"
                                       "pc_qwen3-4b_p16c48.sh:19 (enable_overlong_buffer=False). Fourteenth draw "
                                       "(#51 item 4, seed 20261219): pc_ray_trainer.py:669-683 (a step whose batch is "
                                       "not full after max_num_gen_batches generation batches raises ValueError: "
                                       "the run stops; step_metrics.reset() at :801 restarts the count each step), "
                                       ":242-285 with :493 (the commit batch cut so that explore + commit rollouts "
                                       "divide the GPU count)",
                                  defaults=(("window", "None (off)", "[diversity_threshold_lower 0.125, 1 − upper "
                                             "0.25] (scripts; yaml 0.25 / 0.25)"),
                                            ("metric", "the pilot rows' rewards (after shaping)", "agg_metric acc "
                                             "(yaml; both scripts): the verifier's 0/1 correctness; their reward is "
                                             "±1 (tinker_sympy) plus the overlong penalty"),
                                            ("pilot", "2 rollouts", "exploration.n 32 (p32c96) / 16 (p16c48); "
                                             "yaml 8"),
                                            ("commit", "group_size − pilot per prompt", "rollout.n 96 / 48"),
                                            ("rule / score", "'proportional' to the pilot std",
                                             "pass/fail on the window, every passing prompt gets rollout.n"),
                                            ("budget", "P·(group_size − pilot)//2 per step",
                                             "train_batch_size prompts per step (128 in p32c96), explored from "
                                             "generation batches of gen_batch_size = 3 × 128 prompts, up to "
                                             "max_num_gen_batches 10 per step (a step still short after the 10th "
                                             "raises ValueError and the run stops, pc_ray_trainer.py:669-683); "
                                             "overflow kept in a replay buffer (buffer_max_off_steps 4)"),
                                            ("buffer draw", "none (committed in the same step)",
                                             "buffer_sampling_method max_variance (p32c96: the largest pilot "
                                             "std first, newer first on ties) / random (p16c48; the yaml's)"),
                                            ("exclude_threshold_upper", "none",
                                             "1.0 (both scripts; yaml null): a prompt whose pilot rollouts all "
                                             "succeed is removed from the data set from the next epoch"),
                                            ("overlong penalty (not this stage's)", "compose overlong_penalty",
                                             "overlong_buffer on, len 4096, factor 1.0 (p32c96)")),
                                  placement="theirs: the pilot (explore) rollouts of each generation batch are "
                                            "scored; passing prompts wait in a replay buffer (drawn up to 5 "
                                            "global steps after their exploration: the flush after each step's "
                                            "draw evicts an entry only when the step gap exceeds "
                                            "buffer_max_off_steps 4; at each epoch's end the buffer is emptied and "
                                            "a partial batch dropped; drawn by buffer_sampling_method: max_variance in p32c96, "
                                            "random in p16c48) and are "
                                            "committed later with rollout.n more rollouts, trained "
                                            "on pilot + commit samples; ours: a prompt filter, the pilot rows "
                                            "and the commit rows of a prompt are sampled in the same step (the "
                                            "pilot rows join the group)",
                                  deviations=(
                                      "the default allocates ∝ the pilot std; window, rule='uniform', "
                                      "max_per_prompt=n give their pass/fail rule, and every passing prompt their n "
                                      "commit rollouts only with budget ≥ n × the passing prompts (budget=P·n): at "
                                      "the default budget P·n//2, k > P/2 passing prompts share it, "
                                      "⌊P·n/(2k)⌋ each (P = 4 all passing, n = 6: 3 each, theirs 6; fourteenth "
                                      "draw, #51 item 4: the record gave the rule without the budget); the window is "
                                      "on the pilot mean of the rewards, theirs on acc (0/1): with their ±1 score window=(0.125, 0.75) keeps "
                                      "acc in [0.5625, 0.875], not [0.125, 0.75]; (−0.75, 0.5) matches only "
                                      "without an overlong penalty (on in p32c96; off in p16c48, "
                                      "enable_overlong_buffer=False); the metric is not "
                                      "selectable (data.correct is not read; not built)",
                                      "the pilot rows of a committed prompt are sampled with the commit rows, by "
                                      "the same policy; theirs were sampled when the prompt was explored, up to 5 "
                                      "steps earlier (buffer_max_off_steps 4 evicts only past a gap of 4, after the "
                                      "step's draw), and trained as on-policy rows (their "
                                      "old log-probs recomputed by the current actor with the whole batch)",
                                      "committed in the same step within a static layout (group_size rows); "
                                      "their passing prompts wait in a replay buffer and overflow to later steps",
                                      "their optional max-variance downsampling of the pilot responses "
                                      "(exploration.n_effective; null, off, by default) is not built: every pilot "
                                      "row stays in the group, as their default",
                                      "their scripts' exclusion of solved prompts from later epochs "
                                      "(exclude_threshold_upper 1.0) is not built"))),
      Technique("difficulty_budget", "filter", difficulty_budget,
                "n_j = min + largest-remainder(R * w_j / sum w), w_j = (1 - acc_j)^power",
                f"{_S1} L203 (E3, arXiv 2505.18573)",
                stage=_difficulty_budget_stage,
                fidelity=Fidelity("authors_code", "github.com/LiaoMengqi/E3-RL4LLMs: e3/trainer/ray_trainer.py "
                                  "(get_rollout_n_per_prompt)",
                                  "same min + proportional split; authors weight by the dataset-wide difficulty rank "
                                  "(sorted mean reward), leftover to the hardest; ours (1 − acc)^power, largest "
                                  "remainder",
                                  read="LiaoMengqi/E3-RL4LLMs@7e90b8e9 e3/trainer/ray_trainer.py:391-433 "
                                       "(get_rollout_n_per_prompt), :463-471 and :1208-1216 (min = max = rollout.n "
                                       "at start), :1432-1448 (per-epoch min −= n_update, max += n_update, "
                                       "update_rank); e3/data/rl_dataset.py:125-171 (prompt_stats, rank = "
                                       "index/P by descending mean reward, unseen −100); scripts/train_7b.sh:5-13. "
                                       "Error-class sweep (#51, s2b): the scripts' sampler switches: train_7b.sh:14-15, "
                                       "56-59 and train_1_5b.sh:14-15, 57-60 (rollout.temperature 1, "
                                       "enable_temperature_scheduler True, enable_annealing True, rollout.max_steps "
                                       "480); e3/worker/temperature_scheduler.py (TemperatureScheduler.step, "
                                       "annealing); e3/worker/fsdp_work.py:143-146 (one scheduler per worker), "
                                       ":446-450 and :478-487 (update_actor, Dispatch.DP_COMPUTE_PROTO: the "
                                       "scheduler steps on that rank's entropy), :517 (the rollout's sampling "
                                       "temperature), :552 (compute_log_prob at the same temperature). Per-row "
                                       "review c (#51): ray_trainer.py:402-431 whole (the proportional share "
                                       "min + (R − P·min)·rank/(Σrank + 1e-8) is floored with no cap; "
                                       "rollout_n_max bounds only the leftover loop, :421-431), :1432-1435 "
                                       "(stats: reward_extra_info['acc'] per rollout, e3/trainer/fn_score.py: "
                                       "1 / 0), :678-695 (StatefulDataLoader, num_workers 8, drop_last); "
                                       "rl_dataset.py:128-140 and :321-324 (the initial rank is the data's "
                                       "'rank' column, −100 only for a row without one); dataset/"
                                       "train_data.parquet (10,240 prompts, a float 'rank' in [0, 1) on every "
                                       "row); scripts/train_7b.sh:17 and train_1_5b.sh:17 (TRAIN_DATADIR="
                                       "./dataset/train_data_10k.parquet, a file the repository does not "
                                       "hold); README.md:93-96 (bash ./scripts/train.sh, a script the "
                                       "repository does not hold). Fifteenth draw (#51 item 4, seed 20261220): "
                                       "e3/worker/actor/dp_actor.py:380-408 (calculate_entropy only when "
                                       "entropy_coeff ≠ 0; the entropy metric appended as a set at :406), "
                                       "e3/worker/fsdp_work.py:446-487 (update_actor; the scheduler steps on "
                                       "metrics.get('actor/entropy_loss', None)), temperature_scheduler.py:41-65, "
                                       "scripts/train_7b.sh:10, 44 and train_1_5b.sh:10, 46 (entropy_coeff=0), "
                                       "e3/config/ppo_trainer.yaml:35 (entropy_coeff 0.001), "
                                       "verl/verl/utils/py_functional.py:159-163 (append_to_dict)",
                                  defaults=(("weight", "(1 − acc)^power, power 1", "rank = position/P in the "
                                             "dataset sorted by cumulative mean reward (hardest last)"),
                                            ("min_per_prompt", "0", "rollout.n 8 at epoch 1, − n_update 2 per "
                                             "epoch down to n_low 4"),
                                            ("max_per_prompt", "None (group_size); a cap on every count "
                                             "(water-filled)", "8 at epoch 1, + 2 per epoch up to n_high 12; "
                                             "it bounds only the rounding leftover (ray_trainer.py:421-431): the "
                                             "floored proportional share is not capped, so a hard prompt in an "
                                             "easy batch gets more than max"),
                                            ("budget", "P·group_size//2", "rollout.n · P = 8·P"),
                                            ("rounding", "largest remainder", "floor (shares ÷ (Σrank + 1e-8)), "
                                             "leftover to the hardest first up to max"),
                                            ("difficulty estimate", "EMA of correct, decay 0.5, prior 0.5",
                                             "cumulative mean reward (the per-rollout 'acc', 1 / 0) over all "
                                             "epochs, rank updated per epoch; the first epoch's rank is the "
                                             "data's 'rank' column (every released prompt has one; −100, weight "
                                             "0, only without it), and after update_rank a never-sampled prompt "
                                             "counts as mean 0, among the hardest (rl_dataset.py:161-171)"),
                                            ("sampling temperature (behind the rewards that rank the prompts)",
                                             "the run's rl.temperature, fixed (rl.temperature=1 is theirs)",
                                             "rollout.temperature 1 for the whole run, as released: both scripts "
                                             "set enable_temperature_scheduler True, enable_annealing True (yaml "
                                             "False) but also actor.entropy_coeff=0 (train_7b.sh:10, 44; "
                                             "train_1_5b.sh:10, 46), so e3/worker/actor/dp_actor.py:384-387 "
                                             "computes no entropy and :401-408 logs no 'actor/entropy_loss'; "
                                             "fsdp_work.py:487 calls TemperatureScheduler.step(None), which "
                                             "returns at once (temperature_scheduler.py:41-43): no H* recorded, "
                                             "no step counted, T never changes. The schedule it would run: from "
                                             "T 1, after the first step T ← T·(1 + T·ln(H*/H)/(ln V + ln ln V)), "
                                             "H the step's entropy, H* the first step's; from step 288 (480 − "
                                             "int(0.4·480)) H* cosine-annealed to 0.9·H* by step 480; each "
                                             "data-parallel worker its own scheduler, stepped on its own shard's "
                                             "entropy. With entropy_coeff ≠ 0 (the yaml's 0.001) dp_actor.py:406 "
                                             "hands append_to_dict a set ({'actor/entropy_loss', value}; "
                                             "verl/verl/utils/py_functional.py:159-160 calls .items()) and the "
                                             "first update raises AttributeError")),
                                  placement="theirs: before each step's rollout, on the dataloader batch's "
                                            "prompts (counts from the dataset-wide rank of the last epoch); "
                                            "stats added after the reward each step; ours: a prompt filter "
                                            "before the rollout (counts within the static layout), the estimate "
                                            "updated after each step from data.correct",
                                  deviations=(
                                      "the running accuracy per dataset prompt is float32 state, also under x64 "
                                      "(checkpointed host state)",
                                      "weights (1 − acc)^power from a per-prompt EMA; theirs the dataset-wide "
                                      "difficulty rank, refreshed once per epoch",
                                      "min/max per prompt are fixed; theirs start at min = max = rollout.n "
                                      "(uniform in epoch 1) and widen by n_update per epoch",
                                      "largest-remainder rounding; their 1e-8 floors exact shares one lower and "
                                      "the leftover goes to the hardest prompts first (e.g. [2, 5, 9, 16] vs ours "
                                      "[2, 6, 10, 14], tested)",
                                      "the budget defaults to half the layout (ours: the layout is static); "
                                      "theirs keep the total at rollout.n·P",
                                      "their scripts switch on E3's entropy-targeting temperature schedule "
                                      "(enable_temperature_scheduler, enable_annealing) but set entropy_coeff 0, "
                                      "with which it never steps (no 'actor/entropy_loss' metric: dp_actor.py:"
                                      "384-387, 401-408; fsdp_work.py:487; temperature_scheduler.py:41-43): as "
                                      "released their rollouts, and the rewards that rank the prompts, are "
                                      "sampled at rollout.temperature 1 throughout, as ours with "
                                      "rl.temperature=1; any entropy_coeff ≠ 0 stops their run at the first "
                                      "update (dp_actor.py:406 passes a set to append_to_dict); the schedule "
                                      "itself is not built (fifteenth draw, #51: the record had said their "
                                      "scripts run it)",
                                      "their rollout_n_max does not cap the proportional share, only the "
                                      "rounding leftover: e.g. rank [0, 0.1, 0.1, 0.9], 32 rollouts, min 4, "
                                      "max 12 gives theirs [4, 6, 5, 17]; ours (max_per_prompt=12) caps every "
                                      "count and water-fills the rest: [4, 8, 8, 12] (tested)",
                                      "as released, neither training script starts: both read "
                                      "./dataset/train_data_10k.parquet (train_7b.sh:17, train_1_5b.sh:17), which "
                                      "the repository does not hold (its dataset/train_data.parquet has 10,240 "
                                      "prompts, 160 steps of 64 × 3 epochs = their rollout.max_steps 480), and "
                                      "the README's `bash ./scripts/train.sh` names a script that does not "
                                      "exist; the values here are the scripts' own, with the data path "
                                      "pointed at train_data.parquet"))),
  )


TECHNIQUES = _technique_rows()
