"""How the RL loop runs each filter: ``rljax.stages.Filter`` / ``PromptFilter`` stage factories (rows' ``stage``).

Row filters return ``keep [B]`` (dropped rows leave the batch: no loss, no statistics); padding and
filtered-out rows (``valid`` False) never enter a statistic and are never kept. The group filters
(``zero_variance``, ``variance_topp``, ``vcrl``) take ``refill=True``: the loop then replaces dropped groups
with newly sampled ones (DAPO dynamic sampling, up to ``rl.max_refills`` extra sampling rounds; verl
``max_num_gen_batches``). ``void_turn`` reads ``data.turns`` (single-turn tasks: one turn, the completion);
``rorecomp`` keeps its priority rows (short-correct | long-incorrect).

Advantage-phase filters (``negative_advantage_drop``, ``shuffle_pairs``) read ``data.advantages``. A row's
advantage, when the estimator wrote token-level ``[B, T]`` ones, is the one on its first completion token
(``R - V(prompt)`` for GAE with ``gamma = lambda = 1``, A-LoL's sequence-level advantage; the value itself for
estimators that broadcast one advantage over the row); a row with no completion token reads 0.
``shuffle_pairs`` returns row indices (a resampling of the batch) drawn with ``data.key``.

Prompt filters (``PromptFilter``, recipe slot ``prompt_filters``): ``greso``, ``pilot_commit``,
``difficulty_budget``. The loop keeps a static layout: every group has ``group_size`` rows and the rows beyond
a prompt's count are sampled but masked out; a budget re-allocates the valid rows within that layout (it does
not save sampling compute). Their ``observe`` reads every row of the step's batch, masked or not (each is a
rollout of the prompt at ``data.prompt_index``), so a group dropped by a row filter still counts.

Every factory runs its stage once on a tiny step (``probe_step``) when it is built: bad hyper-parameters fail
at start-up, not mid-run.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import numpy as np

from rljax.filters import _allocation, _curriculum as _C, _greso
from rljax.stages import Filter, PromptFilter, StepData, checked, data_stage_factory, keyword, probe_step

GROUP = {"group_id": "group_id", "num_groups": "num_groups", "valid": "valid"}
REFILL = (keyword("refill", False),)


def row_advantages(data: StepData) -> np.ndarray:
  """``[B]`` advantages: ``data.advantages``, or its value on each row's first completion token if ``[B, T]``."""
  adv = np.asarray(data.require("advantages", "an advantage-phase filter"), np.float32)
  if adv.ndim == 1:
    return adv
  cm = np.asarray(data.completion_mask, bool)
  first = adv[np.arange(adv.shape[0]), np.argmax(cm, axis=1)]
  return np.where(cm.any(1), first, 0.0).astype(np.float32)


# ----------------------------------------------------------------------------- prompt filters


def _per_prompt(data: StepData):
  """``(prompt ids [P'] unique dataset indices, row -> position in ids [B])`` over every row of the batch."""
  return np.unique(np.asarray(data.prompt_index, np.int64), return_inverse=True)


def _layout(group_size: Optional[int], name: str) -> int:
  """The run's ``group_size`` (bound from ``RunFacts``), or an error naming the unbound prompt filter."""
  if group_size is None:
    raise ValueError(f"prompt filter {name!r} is not bound to the run (stage.bind(RunFacts)): its group_size "
                     "is unknown")
  return int(group_size)


def greso(*, p_easy: float = 0.5, p_hard: float = 0.5, easy_threshold: float = 0.5,
          target_easy: Optional[float] = 0.25 / 3, target_hard: Optional[float] = 0.25 * 2 / 3,
          adapt_step: float = 0.01, p_min: float = 0.05, p_max: float = 0.95, admit_floor: float = 0.01):
  """GRESO as a prompt filter: admitted prompts get ``group_size`` rollouts, skipped ones 0.

  State: the ``GresoState`` over the dataset prompts (``init(num_dataset_prompts)``). ``select`` draws the
  admissions of the candidates' dataset indices with the loop's key; ``observe`` records each prompt's
  zero-variance streak from ``data.rewards`` of its rows (grouped by ``data.prompt_index``).
  ``group_size`` comes from the run (``bind``).
  """
  g = _greso.greso(p_easy=p_easy, p_hard=p_hard, easy_threshold=easy_threshold, target_easy=target_easy,
                   target_hard=target_hard, adapt_step=adapt_step, p_min=p_min, p_max=p_max,
                   admit_floor=admit_floor)  # validates

  def build(group_size):
    def select(state, prompts, key):
      n = _layout(group_size, "greso")
      ids, inv = np.unique(np.asarray(prompts.index, np.int64), return_inverse=True)
      admit, stats = g.select(state, key, ids)
      skipped = ~np.asarray(admit)[inv]
      kind = np.asarray(state.kind)[np.asarray(prompts.index, np.int64)]
      report = {"skipped": float(skipped.sum()),  # per candidate; why: its zero-variance streak's kind
                "skipped_easy": float((skipped & (kind == _greso.EASY)).sum()),
                "skipped_hard": float((skipped & (kind == _greso.HARD)).sum())}
      return np.where(skipped, 0, n).astype(np.int64), state, {**stats, **report}

    def observe(state, data):
      if data.batch_size == 0:  # an empty batch: nothing observed
        return state, {}
      ids, rows = _per_prompt(data)
      return g.update(state, ids, data.rewards, rows.astype(np.int32))

    return PromptFilter(g.init, select, observe, name="greso", bind_fn=lambda stage, facts: build(facts.group_size))

  return build(None)


def pilot_commit(*, pilot: int = 2, budget: Optional[int] = None, score: str = "std", rule: str = "proportional",
                 min_score: float = 0.0, max_per_prompt: Optional[int] = None, window: Optional[tuple] = None):
  """Pilot-Commit as a prompt filter: ``pilot`` rollouts per prompt first, then the commit rollouts.

  ``select`` allocates ``rljax.filters.pilot_commit`` counts from the pilot rewards (``prompts.pilot``,
  ``pilot`` consecutive rows per candidate; their rows join the group): per prompt at most ``group_size -
  pilot`` (and ``max_per_prompt``), in total at most ``budget`` commit rollouts per step. ``budget=None``:
  half the layout's commit rows, ``P * (group_size - pilot) // 2``. The layout is static (see the module
  docstring): the budget re-allocates the valid rows; a prompt committed 0 keeps its pilot rows.
  """
  _allocation._int("pilot", pilot, minimum=2)  # a spread needs two pilot rollouts
  if budget is not None:
    _allocation._int("budget", budget)
  kw = dict(score=score, rule=rule, min_score=min_score, window=None if window is None else tuple(window))
  _allocation.pilot_commit(np.zeros(2), np.zeros(2, np.int32), num_groups=1, budget=budget or 0,
                           max_per_prompt=max_per_prompt, **kw)  # validates

  def build(group_size):
    if group_size is not None and pilot >= group_size:
      raise ValueError(f"pilot_commit: pilot={pilot} must be < group_size={group_size} (rollouts per prompt)")

    def select(state, prompts, key):  # pylint: disable=unused-argument
      n = _layout(group_size, "pilot_commit") - pilot
      data = prompts.pilot
      if data is None:
        raise ValueError("pilot_commit: select needs the pilot rollout (prompts.pilot)")
      p = len(prompts.problems)
      cap = n if max_per_prompt is None else min(int(max_per_prompt), n)
      gid = (np.arange(data.batch_size) // (data.batch_size // p)).astype(np.int32)
      counts, stats = _allocation.pilot_commit(data.rewards, gid, num_groups=p,
                                               budget=p * n // 2 if budget is None else budget, max_per_prompt=cap,
                                               valid=data.valid, **kw)
      report = _pilot_report(counts, stats["score"], data, gid, p, float(min_score), kw["window"])
      return counts, state, {**stats, **report}

    return PromptFilter(lambda num_dataset_prompts: (), select, name="pilot_commit", pilot=pilot,
                        bind_fn=lambda stage, facts: build(facts.group_size))

  return build(None)


def _pilot_report(counts, score, data: StepData, gid, p: int, min_score: float, window) -> dict:
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


class DifficultyState(NamedTuple):
  accuracy: np.ndarray  # [N] float32: running accuracy estimate per dataset prompt
  seen: np.ndarray      # [N] int32: steps in which the prompt was observed


def difficulty_budget(*, budget: Optional[int] = None, min_per_prompt: int = 0,
                      max_per_prompt: Optional[int] = None, power: float = 1.0, smoothing: float = 0.0,
                      decay: float = 0.5, prior: float = 0.5):
  """E3 difficulty budgets as a prompt filter, with a per-prompt accuracy estimate as its state.

  State: ``DifficultyState`` over the dataset prompts, ``accuracy = prior`` at first. ``select`` allocates
  ``rljax.filters.difficulty_budget`` counts (at most ``group_size`` and ``max_per_prompt``, summing to
  ``budget``) from the candidates' estimates; ``budget=None``: half the layout, ``P * group_size // 2``
  (at least ``P * min_per_prompt``). ``observe``: ``acc_j <- decay * acc_j + (1 - decay) * mean(correct)``
  over prompt ``j``'s rows of the step (``data.correct``, the task's verifier). The layout is static (see
  the module docstring): the budget re-allocates the valid rows.
  """
  if not 0.0 <= float(decay) < 1.0:
    raise ValueError(f"decay must be in [0, 1), got {decay!r}")
  if not 0.0 <= float(prior) <= 1.0:
    raise ValueError(f"prior must be in [0, 1], got {prior!r}")
  lo = _allocation._int("min_per_prompt", min_per_prompt)
  if budget is not None:
    _allocation._int("budget", budget)
  kw = dict(min_per_prompt=lo, power=power, smoothing=smoothing)
  _allocation.difficulty_budget(np.array([prior]), budget=lo, max_per_prompt=max_per_prompt, **kw)  # validates

  def allocate(accuracy, group_size):
    p = accuracy.shape[0]
    cap = group_size if max_per_prompt is None else min(int(max_per_prompt), group_size)
    total = max(p * group_size // 2, p * lo) if budget is None else budget
    return _allocation.difficulty_budget(accuracy, budget=total, max_per_prompt=cap, **kw)

  def build(facts):
    if facts is not None:  # the run's layout must admit the budget: fail at start-up
      allocate(np.full(facts.num_prompts, prior), facts.group_size)

    def init(num_dataset_prompts):
      return DifficultyState(np.full(num_dataset_prompts, prior, np.float32), np.zeros(num_dataset_prompts, np.int32))

    def select(state, prompts, key):  # pylint: disable=unused-argument
      n = _layout(None if facts is None else facts.group_size, "difficulty_budget")
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
      ids, rows = _per_prompt(data)
      mean = np.bincount(rows, np.clip(np.asarray(data.correct, np.float64), 0, 1), len(ids)) / np.bincount(rows)
      acc, seen = np.array(state.accuracy, np.float32), np.array(state.seen, np.int32)
      acc[ids] = decay * acc[ids] + (1.0 - decay) * mean
      seen[ids] += 1
      return DifficultyState(acc, seen), {"observed_prompts": len(ids), "step_accuracy": float(mean.mean())}

    return PromptFilter(init, select, observe, name="difficulty_budget", bind_fn=lambda stage, f: build(f))

  return build(None)


def _curriculum_stage(name: str, *, exploration: float, temperature: float, window: int, transfer_weight: float,
                      decay: float):
  """The ``PromptFilter`` of DUMP (``transfer_weight = 0``) and TAC: ``draw`` picks the step's prompts from the
  arms' probabilities, ``observe`` (phase ``"advantages"``) learns from the trained rows' advantages (and, for
  TAC, the per-task gradients)."""
  _C._pos("exploration", exploration, allow_zero=True)
  _C._pos("temperature", temperature, allow_zero=True)
  _C._pos("window", window, integer=True)
  _C._pos("transfer_weight", transfer_weight, allow_zero=True)
  if not 0.0 <= float(decay) < 1.0:
    raise ValueError(f"decay must be in [0, 1), got {decay!r}")
  tac = name == "tac"
  needs = {"task_id", "advantages"} | ({"task_gradients"} if tac else set())

  def scores(state):
    return _C.curriculum_scores(state, exploration=exploration, transfer_weight=transfer_weight)

  def build(facts):
    # a task without task ids leaves the stage unbound: the start-up refuses its task_id need first
    task_ids = None if facts is None or not facts.num_tasks else facts.task_ids
    k = 1 if task_ids is None else int(facts.num_tasks)
    pools = None if task_ids is None else _C.arm_pools(np.asarray(task_ids, np.int64), k)

    def init(num_dataset_prompts):  # pylint: disable=unused-argument
      return _C.curriculum_init(k, window)

    def draw(state, prompts, key):
      if pools is None:
        raise ValueError(f"{name} is not bound to a run with task ids (stage.bind(RunFacts(num_tasks=..., "
                         "task_ids=...))): its arms, the task's task ids, are unknown")
      sc = scores(state)
      p = _C.arm_probs(sc["score"], np.array([len(q) > 0 for q in pools]), temperature)
      index, arms = _C.draw_prompts(key, p, pools, len(prompts.problems))
      chosen = np.bincount(arms, minlength=k)
      metrics = {"skipped": 0.0, "replaced": float(len(index))}
      for j in range(k):  # what it chose (per arm) and why: the probability and the score's parts
        metrics.update({f"chosen_{j}": float(chosen[j]), f"prob_{j}": float(p[j]), f"score_{j}": float(sc["score"][j]),
                        f"learnability_{j}": float(sc["learnability"][j]), f"bonus_{j}": float(sc["bonus"][j]),
                        f"samples_{j}": float(state.count[j])})
        if tac:
          metrics[f"transfer_{j}"] = float(state.transfer[j])
      return index, state, metrics

    def observe(state, data):
      arms = np.asarray(data.require("task_id", name), np.int64)
      adv = _C.row_mean_advantages(data.require("advantages", name), data.completion_mask)
      state = _C.curriculum_observe(state, arms, adv, data.valid)
      metrics = {"observed_rows": float(np.sum(data.valid))}
      if tac:
        grads = data.require("task_gradients", name)
        state, step = _C.transfer_observe(state, grads.gram, grads.present, decay)
        metrics.update({f"step_transfer_{j}": float(v) for j, v in enumerate(step) if np.isfinite(v)})
      return state, metrics

    return PromptFilter(init, observe=observe, draw=draw, observe_phase="advantages", name=name,
                        needs=frozenset(needs), bind_fn=lambda stage, f: build(f))

  return build(None)


def dump(*, exploration: float = 1.0, temperature: float = 0.1, window: int = 300):
  """DUMP as a prompt filter that draws the step's prompts (``rljax.filters._curriculum``; the arms are the task's
  task ids).

  ``draw``: each of the step's ``P`` prompts draws its arm from ``p = softmax(score / temperature)`` with
  ``score_j = mean_window |A|_j + exploration * sqrt(2 ln(N + 1) / (n_j + 1))`` and a prompt uniformly from that
  arm's training prompts (with replacement), with the loop's key; the loader's candidates are replaced.
  ``observe`` (after the advantages): each trained row's ``|A|`` (mean over its completion tokens) enters its
  arm's window of the last ``window`` samples, and ``n_j`` counts them. Defaults = the authors' (c = 1,
  tau = 0.1, 300); ``temperature=0``: the UCB argmax. The state is checkpointed. Metrics, per arm ``j``:
  ``chosen_j`` (prompts drawn this step), ``prob_j``, ``score_j`` = ``learnability_j + bonus_j``, ``samples_j``.
  """
  return _curriculum_stage("dump", exploration=exploration, temperature=temperature, window=window,
                           transfer_weight=0.0, decay=0.0)


def tac(*, transfer_weight: float = 1.0, decay: float = 0.9, exploration: float = 1.0, temperature: float = 0.1,
        window: int = 300):
  """TAC as a prompt filter: DUMP's bandit plus ``transfer_weight * T_d``, the smoothed mean cosine between task
  ``d``'s gradient and the other tasks' on each step's batch (``rljax.filters._curriculum``: abstract only, our
  interpretation; the loop computes the per-task gradients' Gram matrix, need ``task_gradients``, with one
  extra backward pass per task). ``transfer_weight=0`` is ``dump``. Metrics add ``transfer_j`` (the smoothed
  ``T_j`` behind the score) and ``step_transfer_j`` (the step's mean cosine).
  """
  return _curriculum_stage("tac", exploration=exploration, temperature=temperature, window=window,
                           transfer_weight=transfer_weight, decay=decay)


for _f in (greso, pilot_commit, difficulty_budget, dump, tac):
  _f.slot = "prompt_filters"


def row_filter(fn, inputs, **kw):
  """The stage factory of a row filter ``fn``: ``data_stage_factory(fn, Filter, inputs=inputs, **kw)``, whose
  stages run once on a tiny step when built (``checked``)."""
  return checked(data_stage_factory(fn, Filter, inputs=inputs, **kw))
