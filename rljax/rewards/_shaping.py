"""Reward shaping: pure, jit-able array functions over token counts, rewards and groups.

Every function returns ``(values, metrics)`` where ``metrics`` is a dict of
scalar arrays for logging. Lengths are **token counts** (``token_counts`` of a
completion mask), never characters. Groups are identified by ``group_id [B]``
with a static ``num_groups`` and may be ragged; a row mask ``valid [B]``
excludes padding rows (they get 0 and do not enter any group statistic).

Bad static input (shapes, unknown modes, bad hyper-parameters) raises
``ValueError`` naming the argument at trace time; NaN/inf inputs raise when the
arrays are concrete. Under ``jit`` (values unseen) each function documents
what a non-finite input does; it is always counted in ``metrics["nonfinite"]``
and never silently turns into a NaN reward.

Size: one family (jit-able shaping); the catalog rows with their fidelity records are the last ~310 lines.
"""
from __future__ import annotations

import functools
import math
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from rljax._answers import digits_value
from rljax._groups import (check_finite, check_float_vector, check_fraction, check_group_id, check_ids,
                          check_valid, check_vector, float_dtype, group_stats, top_groups)
from rljax.rewards import _verifiers
from rljax.types import check_mask, is_concrete

Array = jax.Array

__all__ = ["token_counts", "overlong_penalty", "length_penalty", "grpo_lambda", "correctness_gated",
           "gaussian_reward", "clipped_linear_reward", "prm_clip", "prm_delta", "rubric_dropout"]


def _pos_number(name: str, value, *, allow_zero: bool = False) -> float:
  try:
    v = float(value)
  except (TypeError, ValueError):
    raise ValueError(f"{name} must be a number, got {value!r}") from None
  if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
    raise ValueError(f"{name} must be {'>= 0' if allow_zero else '> 0'} and finite, got {value!r}")
  return v


def _finite_number(name: str, value) -> float:
  try:
    v = float(value)
  except (TypeError, ValueError):
    raise ValueError(f"{name} must be a number, got {value!r}") from None
  if not math.isfinite(v):
    raise ValueError(f"{name} must be finite, got {value!r}")
  return v


def token_counts(completion_mask: Array) -> Array:
  """``len_b = sum_t completion_mask[b, t]`` as ``[B]`` int32 (token counts for shaping)."""
  if np.ndim(completion_mask) != 2:
    raise ValueError(f"completion_mask must be [B, T], got shape {np.shape(completion_mask)}")
  check_mask("completion_mask", completion_mask)
  return jnp.sum(jnp.asarray(completion_mask).astype(jnp.int32), axis=1)


# ----------------------------------------------------------------------------- length

def overlong_penalty(lengths: Array, *, max_len: int, buffer_len: int, penalty_factor: float = 1.0,
                     clip: bool = False):
  """DAPO overlong soft punishment (added to the reward).

  ``p_i = min(-(len_i - (L_max - L_buf)) / L_buf * factor, 0)``: zero up to
  ``L_max - L_buf`` tokens, then linear, reaching ``-factor`` at ``L_max``.
  This is verl's ``reward.overlong_buffer.{len, penalty_factor}`` convention
  (``workers/reward_manager/dapo.py``), which keeps decreasing past ``L_max``;
  ``clip=True`` gives TRL's ``get_soft_overlong_punishment`` (``-factor`` for
  every ``len > L_max``). DAPO paper: arXiv:2503.14476.

  Args:
    lengths: ``[B]`` completion lengths in tokens (``token_counts``).
    max_len: ``L_max``, the generation budget in tokens.
    buffer_len: ``L_buf`` in ``(0, L_max]``.
    penalty_factor: ``factor >= 0``.
    clip: TRL's clamp at ``-factor`` beyond ``L_max``.

  Returns:
    ``(penalty [B] <= 0, {"overlong_frac", "penalty_mean"})``, the penalty in float32, or float64 for
    float64 lengths under x64.
    Non-finite lengths (under jit) get penalty 0 and are counted in
    ``metrics["nonfinite"]``.
  """
  lengths = check_vector("lengths", lengths)
  check_finite("lengths", lengths)
  lengths = lengths.astype(float_dtype(lengths))  # at least float32; float64 stays float64 under x64
  if isinstance(max_len, bool) or not isinstance(max_len, (int, np.integer)) or max_len <= 0:
    raise ValueError(f"max_len must be a positive int, got {max_len!r}")
  if isinstance(buffer_len, bool) or not isinstance(buffer_len, (int, np.integer)) or not 0 < buffer_len <= max_len:
    raise ValueError(f"buffer_len must be an int in (0, max_len={max_len}], got {buffer_len!r}")
  factor = _pos_number("penalty_factor", penalty_factor, allow_zero=True)
  finite = jnp.isfinite(lengths)
  safe_len = jnp.where(finite, lengths, 0.0)
  exceed = safe_len - float(max_len - buffer_len)
  penalty = jnp.minimum(-exceed / float(buffer_len) * factor, 0.0)
  if clip:
    penalty = jnp.maximum(penalty, -factor)
  penalty = jnp.where(finite, penalty, 0.0)
  n = max(penalty.size, 1)  # an empty batch: 0, not the NaN mean of nothing
  metrics = {"overlong_frac": jnp.sum((exceed > 0).astype(jnp.float32)) / n,
             "penalty_mean": jnp.sum(penalty) / n, "nonfinite": jnp.sum(~finite)}
  return penalty, metrics


_LP_MODES = ("kimi", "correct_only")


def length_penalty(lengths: Array, correct: Array, group_id: Array, *, num_groups: int,
                   valid: Optional[Array] = None, mode: str = "kimi"):
  """Group-relative length reward (Kimi k1.5 form), to add to the correctness reward.

  ``lambda_i = 0.5 - (len_i - min_g) / (max_g - min_g)`` over the valid rows of
  ``i``'s group ``g``; ``mode="kimi"``: ``r_i = lambda_i`` if correct else
  ``min(0, lambda_i)`` (Kimi k1.5, arXiv:2501.12599, section 2.3.3);
  ``mode="correct_only"``: ``lambda_i`` for correct rows, 0 for the others.
  A group whose lengths are all equal (including a group of size 1) gets 0.

  Source: the issue's "group-relative length penalty"; no seed abstract defines
  one (closest: DSS-GRPO's within-group shaping, 001_5839a3671b0b4d92.txt L79).
  Choosing Kimi's form is our interpretation. It depends only on within-group
  length differences (adding a constant to all lengths changes nothing) and
  the shortest correct response gets the largest value, 0.5.

  Args:
    lengths: ``[B]`` token counts.
    correct: ``[B]`` bool or 0/1 (a value > 0.5 counts as correct).
    group_id: ``[B]`` int in ``[0, num_groups)``.
    num_groups: static number of groups.
    valid: optional ``[B]`` row mask; invalid rows get 0 and are ignored.
    mode: ``"kimi"`` | ``"correct_only"``.

  Returns:
    ``(r [B] in [-0.5, 0.5], {"length_reward_mean", "flat_groups", "nonfinite"})``: float32, or float64 for
    float64 lengths (under x64).
    Rows with non-finite lengths (under jit) are treated as invalid (0) and counted.
  """
  if mode not in _LP_MODES:
    raise ValueError(f"mode must be one of {_LP_MODES}, got {mode!r}")
  dtype = float_dtype(lengths)  # float64 lengths give a float64 reward (x64); ints give float32
  check_float_vector("lengths", lengths)
  lengths = jnp.asarray(lengths, dtype)
  b = lengths.shape[0]
  correct = check_float_vector("correct", correct, b) > 0.5
  group_id = check_group_id(group_id, num_groups, b)
  return _length_penalty_core(lengths, correct, group_id, check_valid(valid, b), num_groups=num_groups, mode=mode)


@functools.partial(jax.jit, static_argnames=("num_groups", "mode"))
def _length_penalty_core(lengths, correct, group_id, valid, *, num_groups, mode):
  finite = jnp.isfinite(lengths)
  valid = valid & finite
  st = group_stats(jnp.where(finite, lengths, 0.0), group_id, num_groups, valid)
  lo, hi = st.min[group_id], st.max[group_id]
  span = hi - lo
  flat = span <= 0
  lam = jnp.where(flat, 0.0, 0.5 - (lengths - lo) / jnp.where(flat, 1.0, span))
  if mode == "kimi":
    r = jnp.where(correct, lam, jnp.minimum(lam, 0.0))
  else:
    r = jnp.where(correct, lam, 0.0)
  r = jnp.where(valid, r, 0.0)
  n_valid = jnp.maximum(jnp.sum(valid), 1)
  present = st.count > 0
  metrics = {"length_reward_mean": jnp.sum(r) / n_valid,
             "flat_groups": jnp.sum(present & (st.max <= st.min)), "nonfinite": jnp.sum(~finite)}
  return r, metrics


_GL_SELECTIONS = ("threshold", "top_fraction")
_GL_PENALTIES = ("kimi", "sigmoid")


def grpo_lambda(correct: Array, lengths: Array, group_id: Array, *, num_groups: int,
                threshold: float = 0.5, selection: str = "top_fraction", length_weight: float = 1.0,
                penalized: Optional[Array] = None, valid: Optional[Array] = None, penalty: str = "kimi",
                alpha: Optional[float] = None):
  """GRPO-λ: length-penalised reward only in groups with a high correctness ratio.

  ``acc_g = mean_{i in g} correct_i``; ``r_i = penalized_i`` if ``g`` is
  switched on, else the length-agnostic ``correct_i in {0, 1}``.
  ``selection="top_fraction"`` (default, the paper's batch-wise top-λ rule):
  on for the ``ceil(λ · #groups)`` groups of the batch with the highest
  ``acc_g`` (``λ = threshold``; ties to the lower group id);
  ``selection="threshold"``: on iff ``acc_g >= threshold`` (an absolute τ).
  Default (``penalty="kimi"``) ``penalized_i = correct_i + length_weight *
  length_penalty_i`` (Kimi-style ``length_penalty``). ``penalty="sigmoid"``:
  the paper's efficiency reward as transcribed in a stored translation of its
  method section, ``penalized_i = 1 − α·sigmoid((L_i − mean_g L)/std_g L)`` for
  a correct row and 0 for a wrong one, mean and std (population; z = 0 when
  the std is 0 or the length is not finite) over the correct valid rows of the
  row's group.

  Source: GRPO-λ, 000_3e503271be254a43.txt L9 (arXiv:2505.18086). The abstract
  gives the switch on the group correctness ratio; the paper selects the top-λ
  fraction of the batch's groups by that ratio (its example: the top 20 %,
  ``threshold=0.2``). The default λ = 0.5, the absolute-τ alternative and the
  default Kimi penalty are ours; ``penalty="sigmoid", alpha=α`` is the paper's
  form (α required: its value was not read), or pass your own ``penalized``.

  Args:
    correct: ``[B]`` bool or 0/1.
    lengths: ``[B]`` token counts.
    group_id: ``[B]`` int; num_groups: static int.
    threshold: the fraction λ for ``top_fraction`` (or ``tau`` for ``threshold``), in [0, 1].
    selection: ``"top_fraction"`` | ``"threshold"``.
    length_weight: weight of the default length penalty.
    penalized: optional ``[B]`` length-penalised reward to use instead (only with ``penalty="kimi"``).
    valid: optional ``[B]`` row mask (invalid rows get 0).
    penalty: ``"kimi"`` | ``"sigmoid"``, the built-in penalised reward when ``penalized`` is None.
    alpha: α of ``penalty="sigmoid"`` (required there, finite, >= 0; refused with ``"kimi"``).

  Returns:
    ``(r [B] float32, {"penalty_on_frac" (fraction of present groups switched on),
    "group_correct_ratio_mean", "nonfinite"})``.
  """
  if selection not in _GL_SELECTIONS:
    raise ValueError(f"selection must be one of {_GL_SELECTIONS}, got {selection!r}")
  if penalty not in _GL_PENALTIES:
    raise ValueError(f"grpo_lambda: penalty must be one of {_GL_PENALTIES}, got {penalty!r}")
  if penalty == "sigmoid":
    if alpha is None:
      raise ValueError("grpo_lambda: alpha is required with penalty='sigmoid' (the paper's α was not read)")
    if penalized is not None:
      raise ValueError("grpo_lambda: pass either penalized or penalty='sigmoid', not both")
    alpha = _pos_number("grpo_lambda: alpha", alpha, allow_zero=True)
  elif alpha is not None:
    raise ValueError(f"grpo_lambda: alpha applies to penalty='sigmoid' only, got alpha={alpha!r} with "
                     f"penalty={penalty!r}")
  threshold = check_fraction("threshold", threshold)
  length_weight = _finite_number("length_weight", length_weight)
  correct_f = check_float_vector("correct", correct)
  b = correct_f.shape[0]
  correct01 = (correct_f > 0.5).astype(jnp.float32)
  lengths = check_float_vector("lengths", lengths, b)
  group_id = check_group_id(group_id, num_groups, b)
  valid = check_valid(valid, b)
  if penalized is not None:
    penalized = check_float_vector("penalized", penalized, b)
  return _grpo_lambda_core(correct01, lengths, group_id, valid, penalized, num_groups=num_groups,
                           threshold=threshold, selection=selection, length_weight=length_weight,
                           penalty=penalty, alpha=alpha)


@functools.partial(jax.jit, static_argnames=("num_groups", "threshold", "selection", "length_weight", "penalty",
                                             "alpha"))
def _grpo_lambda_core(correct01, lengths, group_id, valid, penalized, *, num_groups, threshold, selection,
                      length_weight, penalty, alpha):
  if penalized is None and penalty == "sigmoid":
    ok = correct01 > 0.5
    finite = jnp.isfinite(lengths)
    ls = group_stats(jnp.where(finite, lengths, 0.0), group_id, num_groups, valid & ok & finite)
    mu, sd = ls.mean[group_id], ls.std[group_id]
    z = jnp.where(finite & (sd > 0), (lengths - mu) / jnp.where(sd > 0, sd, 1.0), 0.0)
    penalized = jnp.where(ok, 1.0 - alpha * jax.nn.sigmoid(z), 0.0)
    nonfinite = jnp.sum(valid & ~finite)
  elif penalized is None:
    lp, lp_metrics = _length_penalty_core(lengths, correct01 > 0.5, group_id, valid, num_groups=num_groups,
                                          mode="kimi")
    penalized = correct01 + length_weight * lp
    nonfinite = lp_metrics["nonfinite"]
  else:
    finite = jnp.isfinite(penalized)
    nonfinite = jnp.sum(~finite)
    valid = valid & finite
  st = group_stats(correct01, group_id, num_groups, valid)
  present = st.count > 0
  if selection == "threshold":
    on = present & (st.mean >= threshold)
  else:
    on = top_groups(st.mean, present, threshold)
  r = jnp.where(on[group_id], penalized, correct01)
  r = jnp.where(valid, r, 0.0)
  n_present = jnp.maximum(jnp.sum(present), 1)
  metrics = {"penalty_on_frac": jnp.sum(on) / n_present,
             "group_correct_ratio_mean": jnp.sum(jnp.where(present, st.mean, 0.0)) / n_present,
             "nonfinite": nonfinite}
  return r, metrics


# ----------------------------------------------------------------------------- outcome/process

def correctness_gated(outcome: Array, process: Array, correct: Array, *, weight: float = 1.0):
  """SCOPE-RL correctness-gated process reward: ``r_i = o_i + w * 1[correct_i] * p_i``.

  Source: SCOPE-RL "Quality-Aware Process RL applies correctness-gated
  process-shape rewards to refine correct trajectories" (001_5839a3671b0b4d92.txt
  L219). The additive form and ``w`` are our interpretation; the process
  terms themselves (useful-step density, error localisation, token efficiency)
  are the caller's ``process`` score.

  Args:
    outcome: ``[B]`` outcome reward. process: ``[B]`` process score.
    correct: ``[B]`` bool or 0/1. weight: ``w``.

  Returns:
    ``(r [B] float32, {"gated_frac", "nonfinite"})``. Incorrect rows get exactly
    ``o_i`` whatever their process score (even NaN); a non-finite process
    score on a correct row (under jit) contributes 0 and is counted.
  """
  weight = _finite_number("weight", weight)
  outcome = check_float_vector("outcome", outcome)
  b = outcome.shape[0]
  process = check_vector("process", process, b)
  process = process.astype(jnp.promote_types(process.dtype, jnp.float32))  # float64 stays float64 (x64)
  gate = check_vector("correct", correct, b).astype(jnp.float32) > 0.5
  if is_concrete(process) and is_concrete(gate):
    p, g = np.asarray(process), np.asarray(gate)
    if not np.all(np.isfinite(p[g])):
      raise ValueError("process contains non-finite values on correct rows")
  finite = jnp.isfinite(process)
  r = outcome + jnp.where(gate & finite, weight * jnp.where(finite, process, 0.0), 0.0)
  return r, {"gated_frac": jnp.sum(gate.astype(jnp.float32)) / max(b, 1), "nonfinite": jnp.sum(gate & ~finite)}


def gaussian_reward(pred: Array, target: Array, *, sigma: float = 1.0, invalid_value: float = 0.0):
  """Gaussian reward for continuous targets: ``r_i = exp(-(s_hat_i - s_i)^2 / (2 sigma^2))``.

  Source: OmniQuality-R "Gaussian-based reward to support continuous score
  prediction" (000_3e503271be254a43.txt L109; arXiv 2510.10609). The kernel is
  the authors' (github.com/yeppp27/VisualScore:
  openrlhf/models/remote_rm/math_verifier_wolatex_regress_specifc.py,
  ``RewardCalculator.get_reward``, ``reward_type="gaussian_rbf"``:
  ``exp(-(pred - gt)^2 / (2 sigma^2))``, 0 for an answer that does not parse).
  Their training scripts (examples/scripts/omniquality-R/) pass
  ``--initial_sigma 0.8`` (``sigma=0.8`` here); our default 1.0 is their CLI
  default. Their server adds a 0.5 format reward to it: here that is a
  separate reward (e.g. ``format_regex``). ``r = 1`` at ``s_hat = s``,
  symmetric, strictly decreasing in ``|s_hat - s|``, in ``(0, 1]``.

  Args:
    pred: ``[B]`` predicted scores; NaN marks an unparseable prediction and
      scores ``invalid_value`` (this is model output, so it does not raise).
    target: ``[B]`` targets (must be finite: raises when concrete).
    sigma: ``> 0``.

  Returns:
    ``(r [B] float32, {"invalid_frac", "abs_error_mean"})``.
  """
  sigma = _pos_number("sigma", sigma)
  invalid_value = _finite_number("invalid_value", invalid_value)
  pred = check_vector("pred", pred).astype(jnp.float32)
  target = check_float_vector("target", target, pred.shape[0])
  ok = jnp.isfinite(pred) & jnp.isfinite(target)
  err = jnp.where(ok, pred - target, 0.0)
  r = jnp.where(ok, jnp.exp(-(err * err) / (2.0 * sigma * sigma)), invalid_value)
  n_ok = jnp.maximum(jnp.sum(ok), 1)
  return r, {"invalid_frac": jnp.mean((~ok).astype(jnp.float32)), "abs_error_mean": jnp.sum(jnp.abs(err)) / n_ok}


def clipped_linear_reward(d: Array, *, scale: float = 1.0, offset: float = 0.0, low: float = 0.0,
                          high: float = 1.0):
  """IRRL clipped linear reward: ``r_i = clip(scale * d_i + offset, low, high)``.

  ``d`` is the discriminator's output (e.g. the probability it assigns to the
  true label), replacing a log-likelihood reward ``log d`` whose noise is
  unbounded. Source: IRRL, 000_3e503271be254a43.txt L39 (arXiv:2302.00270).
  The authors' code (github.com/mengdi-li/internally-rewarded-rl: trainer.py,
  ``information_maximization_reward_type == "linear_clipping"``; also
  skill-discovery/code/disdain.py) uses ``r = max(p_y - 1/K, 0)``: the
  probability of the true class ``y`` minus chance (``1/K``, ``K`` classes or
  skills), clipped below at 0 and not above (``p_y <= 1``). That is this
  function with ``offset=-1/K`` (``scale=1``, ``low=0``; ``high=1`` never binds
  on a probability). The default ``offset=0`` is ours: the class count is the
  caller's (``K -> inf``). Monotone non-decreasing in ``d`` (for
  ``scale >= 0``) and bounded by ``[low, high]``.

  Returns:
    ``(r [B] float32, {"clipped_frac", "nonfinite"})``; a non-finite ``d``
    (under jit) scores ``low`` and is counted.
  """
  scale = _pos_number("scale", scale, allow_zero=True)
  offset, low, high = (_finite_number(n, v) for n, v in (("offset", offset), ("low", low), ("high", high)))
  if low > high:
    raise ValueError(f"low must be <= high, got low={low}, high={high}")
  d = check_float_vector("d", d)
  finite = jnp.isfinite(d)
  lin = scale * jnp.where(finite, d, 0.0) + offset
  r = jnp.where(finite, jnp.clip(lin, low, high), low)
  clipped = finite & ((lin < low) | (lin > high))
  return r, {"clipped_frac": jnp.mean(clipped.astype(jnp.float32)), "nonfinite": jnp.sum(~finite)}


# ----------------------------------------------------------------------------- PRM refinements

def _check_steps(step_rewards, step_mask):
  if np.ndim(step_rewards) != 2:
    raise ValueError(f"step_rewards must be [B, S], got shape {np.shape(step_rewards)}")
  step_rewards = jnp.asarray(step_rewards)
  step_rewards = step_rewards.astype(jnp.promote_types(step_rewards.dtype, jnp.float32))  # float64 stays (x64)
  if step_mask is None:
    step_mask = jnp.ones(step_rewards.shape, jnp.bool_)
  check_mask("step_mask", step_mask, step_rewards.shape)
  step_mask = jnp.asarray(step_mask).astype(jnp.bool_)
  if is_concrete(step_rewards) and is_concrete(step_mask):
    r, m = np.asarray(step_rewards), np.asarray(step_mask)
    if not np.all(np.isfinite(r[m])):
      raise ValueError("step_rewards contains non-finite values on valid steps")
  return step_rewards, step_mask


def prm_clip(step_rewards: Array, step_mask: Optional[Array] = None, *, eta: float = 0.5):
  """PRM Clip refinement: ``r'_t = min(r_t - eta, 0)`` on valid steps (0 elsewhere).

  Every step reward is ``<= 0``, so a trajectory's return is bounded above by 0
  and repeating steps can never raise it. Source: Gao et al., "On Designing
  Effective RL Reward at Training Time for LLM Reasoning"
  (001_5839a3671b0b4d92.txt L157, arXiv:2410.15115); the abstract names
  "Clipping" and the upper bound; the form and ``eta`` default are
  unverified (recalled from the paper).

  Args:
    step_rewards: ``[B, S]`` PRM scores per reasoning step.
    step_mask: ``[B, S]`` valid steps (default all).
    eta: the clip threshold.

  Returns:
    ``(r' [B, S] float32, {"clipped_frac", "nonfinite"})``; non-finite valid
    steps (under jit) become 0 and are counted.
  """
  eta = _finite_number("eta", eta)
  r, m = _check_steps(step_rewards, step_mask)
  finite = jnp.isfinite(r)
  out = jnp.where(m & finite, jnp.minimum(r - eta, 0.0), 0.0)
  n = jnp.maximum(jnp.sum(m), 1)
  return out, {"clipped_frac": jnp.sum(m & finite & (r - eta < 0)) / n, "nonfinite": jnp.sum(m & ~finite)}


def prm_delta(step_rewards: Array, step_mask: Optional[Array] = None):
  """PRM Delta refinement: ``r'_t = r_t - r_{next(t)}``, the last valid step keeps ``r_T``.

  ``next(t)`` is the next valid step of the same row, so the return from any
  step telescopes: ``sum_{k >= t} r'_k = r_t`` — bounded however many steps
  follow. Source: Gao et al. (001_5839a3671b0b4d92.txt L157,
  arXiv:2410.15115); form unverified (recalled from the paper).

  Args:
    step_rewards: ``[B, S]``; step_mask: ``[B, S]`` valid steps (default all;
      holes are allowed).

  Returns:
    ``(r' [B, S] float32 (0 on invalid steps), {"nonfinite"})``; non-finite
    valid steps (under jit) are treated as 0 and counted.
  """
  r, m = _check_steps(step_rewards, step_mask)
  finite = jnp.isfinite(r)
  r0 = jnp.where(m & finite, r, 0.0)
  s = r.shape[1]
  idx = jnp.arange(s, dtype=jnp.int32)
  cand = jnp.where(m, idx[None, :], s)
  # first valid index >= t, then shift by one to get the first valid index > t
  nxt_ge = jax.lax.cummin(cand, axis=1, reverse=True)
  nxt = jnp.concatenate([nxt_ge[:, 1:], jnp.full((r.shape[0], 1), s, jnp.int32)], axis=1)
  padded = jnp.concatenate([r0, jnp.zeros((r.shape[0], 1), jnp.float32)], axis=1)
  nxt_val = jnp.take_along_axis(padded, nxt, axis=1)
  out = jnp.where(m, r0 - nxt_val, 0.0)
  return out, {"nonfinite": jnp.sum(m & ~finite)}


# ----------------------------------------------------------------------------- rubric dropout

_RD_MODES = ("bernoulli", "exact")
_RD_AGG = ("mean", "sum")


def rubric_dropout(key: Array, scores: Array, group_id: Array, *, drop_prob: float,
                   criterion_mask: Optional[Array] = None, weights: Optional[Array] = None,
                   mode: str = "bernoulli", aggregate: str = "mean"):
  """Rubric Dropout: score each rollout on a random subset of criteria shared by its group.

  For group ``g`` a keep mask ``k_g in {0,1}^C`` is drawn from
  ``fold_in(key, g)`` (so it depends only on ``key`` and the group id: every
  member of a group sees the same mask, different groups draw independently,
  and a group's result does not depend on the rest of the batch):
  ``mode="bernoulli"``: ``k_gc ~ Bernoulli(1 - p)``; ``mode="exact"``: exactly
  ``round(p * C)`` criteria dropped, uniformly. Then, with applicability
  ``a_ic`` (``criterion_mask``) and weights ``w_c``,
  ``"mean"``: ``r_i = sum_c w_c k_gc a_ic s_ic / sum_c w_c k_gc a_ic``;
  ``"sum"``: ``r_i = sum_c w_c k_gc a_ic s_ic``.
  If every applicable criterion of a row was dropped, the row is scored on
  the full rubric (counted in ``metrics["fallback_rows"]``); a row with no
  applicable criterion scores 0. ``drop_prob = 0`` is the full-rubric score
  (use that at evaluation).

  Source: Rubric Dropout (001_5839a3671b0b4d92.txt L81): "randomly drop a
  subset of the rubric's criteria before computing the reward ... the dropped
  subset is shared across each rollout group"; 30-50% works best. How the
  kept criteria are aggregated is not given (our choice: ``aggregate``).

  Args:
    key: PRNG key (a fresh one each step).
    scores: ``[B, C]`` per-criterion scores.
    group_id: ``[B]`` int >= 0 (no ``num_groups`` needed).
    drop_prob: ``p`` in [0, 1).
    criterion_mask: optional ``[B, C]`` applicable criteria (default all).
    weights: optional ``[C]`` non-negative criterion weights.
    mode: ``"bernoulli"`` | ``"exact"``. aggregate: ``"mean"`` | ``"sum"``.

  Returns:
    ``(r [B] float32, keep [B, C] bool (the group mask per row), metrics)``
    with ``metrics = {"kept_frac", "fallback_rows", "nonfinite"}``; a
    non-finite score on an applicable criterion (under jit) is treated as
    not applicable and counted.
  """
  if mode not in _RD_MODES:
    raise ValueError(f"mode must be one of {_RD_MODES}, got {mode!r}")
  if aggregate not in _RD_AGG:
    raise ValueError(f"aggregate must be one of {_RD_AGG}, got {aggregate!r}")
  p = check_fraction("drop_prob", drop_prob)
  if p >= 1.0:
    raise ValueError(f"drop_prob must be < 1, got {drop_prob!r}")
  if np.ndim(scores) != 2:
    raise ValueError(f"scores must be [B, C], got shape {np.shape(scores)}")
  b, c = np.shape(scores)
  scores = jnp.asarray(scores)
  scores = scores.astype(jnp.promote_types(scores.dtype, jnp.float32))  # float64 stays float64 (x64)
  check_ids("group_id", group_id, b, None)
  group_id = jnp.asarray(group_id)
  if criterion_mask is None:
    applicable = jnp.ones((b, c), jnp.bool_)
  else:
    check_mask("criterion_mask", criterion_mask, (b, c))
    applicable = jnp.asarray(criterion_mask).astype(jnp.bool_)
  if weights is None:
    w = jnp.ones((c,), jnp.float32)
  else:
    if tuple(np.shape(weights)) != (c,):
      raise ValueError(f"weights must have shape ({c},) = number of criteria K in scores, got {np.shape(weights)}")
    w = jnp.asarray(weights, jnp.float32)
    if is_concrete(w) and (not np.all(np.isfinite(np.asarray(w))) or np.any(np.asarray(w) < 0)):
      raise ValueError("weights must be finite and >= 0")
  if is_concrete(scores) and is_concrete(applicable):
    s_np, a_np = np.asarray(scores), np.asarray(applicable)
    if not np.all(np.isfinite(s_np[a_np])):
      raise ValueError("scores contains non-finite values on applicable criteria")
  return _rubric_dropout_core(key, scores, group_id, applicable, w, jnp.float32(p), mode=mode, aggregate=aggregate)


@functools.partial(jax.jit, static_argnames=("mode", "aggregate"))
def _rubric_dropout_core(key, scores, group_id, applicable, w, p, *, mode, aggregate):
  c = scores.shape[1]
  finite = jnp.isfinite(scores)
  applicable_f = applicable & finite
  s0 = jnp.where(applicable_f, scores, 0.0)

  def group_mask(gid):
    k = jax.random.fold_in(key, gid)
    if mode == "bernoulli":
      return jax.random.bernoulli(k, 1.0 - p, (c,))
    n_drop = jnp.round(p * c)  # round half to even, as Python's round
    u = jax.random.uniform(k, (c,))
    rank = jnp.argsort(jnp.argsort(u))
    return rank >= n_drop

  keep = jax.vmap(group_mask)(group_id.astype(jnp.uint32))  # [B, C], equal rows within a group
  kept_w = w[None, :] * (keep & applicable_f)
  full_w = w[None, :] * applicable_f
  fallback = jnp.sum(kept_w, axis=1) <= 0
  use_w = jnp.where(fallback[:, None], full_w, kept_w)
  num = jnp.sum(use_w * s0, axis=1)
  if aggregate == "mean":
    den = jnp.sum(use_w, axis=1)
    r = jnp.where(den > 0, num / jnp.where(den > 0, den, 1.0), 0.0)
  else:
    r = num
  metrics = {"kept_frac": jnp.sum(keep.astype(jnp.float32)) / max(keep.size, 1),  # 0 on an empty batch
             "fallback_rows": jnp.sum(fallback & (jnp.sum(full_w, axis=1) > 0)),
             "nonfinite": jnp.sum(applicable & ~finite)}
  return r, keep, metrics


# ----------------------------------------------------------------------------- the stages (the rows' ``stage``)


def _overlong_penalty_stage(buffer_len: int, *, max_len=None, penalty_factor: float = 1.0, clip: bool = False):
  """DAPO overlong shaping: ``r + min(-(len - (L_max - L_buf)) / L_buf * factor, 0)``.

  ``max_len`` defaults to the run's ``max_new_tokens`` (DAPO's L_max).
  """
  from rljax.stages import Shaping  # pylint: disable=import-outside-toplevel

  def build(l_max):
    if l_max is not None:
      overlong_penalty(np.zeros((1,)), max_len=l_max, buffer_len=buffer_len, penalty_factor=penalty_factor,
                       clip=clip)  # validates now

    def fn(data):
      pen, metrics = overlong_penalty(data.lengths, max_len=l_max, buffer_len=buffer_len,
                                      penalty_factor=penalty_factor, clip=clip)
      return data.rewards + np.asarray(pen, np.float32), metrics

    return Shaping(fn, name="overlong_penalty", bind_fn=None if l_max is not None else bind)

  def bind(stage, facts):
    return build(facts.max_new_tokens)

  return build(max_len)


def _number(text) -> Optional[float]:
  """The final answer of a solution as a number, read as ``math_answer`` reads it (``extract_math_answer``,
  normalised), or None."""
  ans = _verifiers.extract_math_answer(text) if isinstance(text, str) else None
  value = None if ans is None else _verifiers._to_number(_verifiers.normalize_math_answer(ans))
  return None if value is None else float(value)


# ``parse`` names: "number" for any task whose answers are numbers (GSM8K, MATH, countdown targets);
# "arithmetic" for the built-in ArithmeticTask, whose answers are written lowest digit first.
PARSERS = {"number": _number, "arithmetic": functools.partial(digits_value, reverse=True)}


def _parser(parse):
  if callable(parse):
    return parse
  if parse not in PARSERS:
    raise ValueError(f"parse must be one of {sorted(PARSERS)} or a callable text -> float | None, got {parse!r}")
  return PARSERS[parse]


def _numbers(parser, completions, problems):
  """``(pred [B], target [B])`` float32: NaN where a completion does not parse; an unparsable reference raises."""
  pred = np.array([np.nan if (v := parser(c)) is None else v for c in completions], np.float32)
  target = np.array([np.nan if (v := parser(p.answer)) is None else v for p in problems], np.float32)
  if not np.all(np.isfinite(target)):
    bad = int(np.flatnonzero(~np.isfinite(target))[0])
    raise ValueError(f"the reference answer {problems[bad].answer!r} is not a number for this parse")
  return pred, target


def _gaussian_reward_stage(*, sigma: float = 1.0, invalid_value: float = 0.0, parse="number"):
  """``rljax.rewards.gaussian_reward`` as a Reward: ``exp(-(s_hat - s)^2 / (2 sigma^2))``.

  ``s_hat`` is the number the completion gives and ``s`` its problem's reference (``problem.answer``), both
  read by ``parse``; a completion that does not parse scores ``invalid_value``. A Reward sees only
  ``(completions, problems)`` and a ``Problem`` carries no code (its ``meta`` is JSON), so the parser is an
  argument: ``"number"`` (``extract_math_answer``, as ``math_answer`` reads answers), ``"arithmetic"``
  (``ArithmeticTask.answer_value``: digits lowest first) or, from Python, a callable ``text -> float | None``.
  """
  from rljax.stages import Reward  # pylint: disable=import-outside-toplevel
  parser = _parser(parse)
  gaussian_reward(np.zeros(1), np.zeros(1), sigma=sigma, invalid_value=invalid_value)  # validates

  def reward(completions, problems):
    pred, target = _numbers(parser, completions, problems)
    return np.asarray(gaussian_reward(pred, target, sigma=sigma, invalid_value=invalid_value)[0])

  reward.__name__ = "gaussian_reward"
  return Reward(reward, name="gaussian_reward")


def _clipped_linear_reward_stage(*, scale: float = 1.0, offset: float = 1.0, low: float = 0.0,
                                 high: float = 1.0, parse="number"):
  """``rljax.rewards.clipped_linear_reward`` as a Reward on ``d = -|s_hat - s|``: ``clip(offset - scale |s_hat -
  s|, low, high)``.

  Numbers as in :func:`_gaussian_reward_stage` (``parse``). With the defaults: 1 for the exact value, falling linearly
  to 0 at an error of ``offset / scale``. A completion that does not parse scores ``low``.
  """
  from rljax.stages import Reward  # pylint: disable=import-outside-toplevel
  parser = _parser(parse)
  clipped_linear_reward(np.zeros(1), scale=scale, offset=offset, low=low, high=high)  # validates

  def reward(completions, problems):
    pred, target = _numbers(parser, completions, problems)
    ok = np.isfinite(pred)
    d = -np.abs(np.where(ok, pred, target) - target)
    r = clipped_linear_reward(d, scale=scale, offset=offset, low=low, high=high)[0]
    return np.where(ok, np.asarray(r), np.float32(low)).astype(np.float32)

  reward.__name__ = "clipped_linear_reward"
  return Reward(reward, name="clipped_linear_reward")


_S0 = "000_3e503271be254a43.txt"
_S1 = "001_5839a3671b0b4d92.txt"


def _technique_rows():
  from rljax._technique import Fidelity, Technique
  from rljax.rewards import _stages as S
  from rljax.stages import probe_step
  return (
      Technique("grpo_lambda", "shaping", grpo_lambda,
                "r_i = penalized_i if group g is in the batch's top-lambda fraction by acc_g else 1[correct_i]",
                f"{_S0} L9 (GRPO-lambda, arXiv:2505.18086)",
                # the shaped reward replaces data.rewards (GRPO-lambda: penalised in on-groups, else 1[correct])
                stage=S.shaping_stage(grpo_lambda, {"correct": "correct", "lengths": "lengths", **S.GROUP,
                                                    "penalized": lambda data: None}),
                fidelity=Fidelity("paper_formula", "arXiv 2505.18086 GRPO-λ method (top-λ fraction of groups by "
                                  "correctness ratio; efficiency reward 1 − α·σ(z))",
                                  "λ = 0.5 default and the Kimi penalty inside the selected groups are ours; "
                                  "penalty='sigmoid', alpha=α, threshold=0.2 is the paper's as translated; "
                                  "selection='threshold' an absolute τ",
                                  read="arXiv 2505.18086v1 (pages read: arxiv.org/html/2505.18086v1 and "
                                       "hf-mirror.puppyis.cool/papers/2505.18086.md, pages corpus: title, "
                                       "authors, abstract, Figure 1 caption; the corpus returns only a page's "
                                       "opening). The method section as translated into Chinese in a stored "
                                       "write-up 'GRPO-λ (动态长度惩罚)' (code index file id 49297942322, "
                                       "read_file): batch-wise top-λ selection (groups sorted by correctness "
                                       "ratio, e.g. the top 20 %), efficiency-priority reward r = 1 − α·σ((L − "
                                       "mean(L)_correct)/std(L)_correct) if correct else 0 in the top-λ groups, "
                                       "0/1 elsewhere, then GRPO's (r − mean)/std. The paper's own equation "
                                       "numbers, α and the run's λ were not read; the write-up's own code "
                                       "(α = 0.6, λ = 0.2, np.std) is the writer's, not the authors'. A later "
                                       "version, NeurIPS 2025 ER Workshop (openreview.net/forum?id=4BhPBBqZjj, "
                                       "pages corpus: its abstract only, 'improves average accuracy by 0.36% ~ "
                                       "3.76% while reducing CoT sequence length by 44.2% ~ 62.3%'), was not "
                                       "read beyond the abstract: its settings may differ from v1's",
                                  defaults=(("threshold (λ)", "0.5", "top 20 % in the method's example"),
                                            ("selection", "'top_fraction' (ceil(λ·#groups), ties to the lower "
                                             "group id)", "batch-wise top-λ by correctness ratio"),
                                            ("penalty", "'kimi': 1[correct] + length_weight·Kimi length reward",
                                             "1 − α·σ((L − mean_correct L)/std_correct L), wrong 0 "
                                             "(penalty='sigmoid')"),
                                            ("alpha", "required with penalty='sigmoid'", "not read"),
                                            ("length_weight", "1.0", "none (Kimi form is ours)"),
                                            ("std of the lengths", "population (penalty='sigmoid')",
                                             "std, ddof not stated")),
                                  placement="theirs: the reward step of GRPO training, once per batch of query "
                                            "groups after the rollout: groups ranked by correctness ratio, the "
                                            "top λ get the efficiency reward, the rest 0/1, then GRPO's group "
                                            "advantage; ours: a shaping stage after the verifier, once per step "
                                            "on the step's valid rows, replacing data.rewards before the "
                                            "advantage stage",
                                  deviations=(
                                      "the shaped reward is float32, also under x64 (built from 0/1 correctness and "
                                      "integer lengths; the StepData rewards contract)",
                                      "default penalty='kimi' (Kimi k1.5 length reward added to 1[correct]) is "
                                      "ours; penalty='sigmoid', alpha=α gives the translated paper form (tested "
                                      "against a float64 transcription)",
                                      "default λ = 0.5; the method's example is 0.2 (threshold=0.2)",
                                      "the paper form was read in a translation, not the paper: its std's ddof "
                                      "and a single correct answer (std 0: ours z = 0, reward 1 − α/2) are our "
                                      "choices",
                                      "selection='threshold' (an absolute acc ≥ τ) is ours"))),
      Technique("overlong_penalty", "shaping", overlong_penalty,
                "p = min(-(len - (L_max - L_buf)) / L_buf * factor, 0)",
                "DAPO arXiv:2503.14476; verl reward_manager/dapo.py overlong_buffer",
                stage=_overlong_penalty_stage,
                fidelity=Fidelity("peer", "verl v0.7.0 experimental/reward_loop/reward_manager/dapo.py (default) and "
                                  "workers/reward_manager/dapo.py (legacy): one formula",
                                  "clip=True gives a clamp at −factor beyond L_max (with penalty_factor=1: TRL "
                                  "1.9.0's get_soft_overlong_punishment, −1 beyond L_max; TRL has no factor)",
                                  read="volcengine/verl@v0.7.0 (f9c855f7) verl/workers/reward_manager/dapo.py:"
                                       "116-127 (overlong_reward = min(−exceed/len·factor, 0), added to the "
                                       "score); recipe/dapo/config/dapo_trainer.yaml:14-18; recipe/dapo/"
                                       "run_dapo_qwen2.5_32b.sh:18-21; the verl 0.9.1 PyPI wheel "
                                       "workers/reward_manager/dapo.py:120-127 and experimental/"
                                       "reward_loop/reward_manager/dapo.py:108-114 (the same formula); TRL 1.9.0 "
                                       "trl/rewards/other_rewards.py:83-138 "
                                       "(get_soft_overlong_punishment: 0 up to L_max − L_cache, (L_max − L_cache − "
                                       "|y|)/L_cache up to L_max, −1 beyond; no factor). Per-row review e (#51), "
                                       "which code scores at v0.7.0: trainer/config/ppo_trainer.yaml:34 "
                                       "(reward_model: dp_reward_loop, use_reward_loop True, "
                                       "reward_model/dp_reward_loop.yaml:5); the DAPO trainer generates through the "
                                       "agent loop (recipe/dapo/dapo_ray_trainer.py:159, ray_trainer.py:916-936), "
                                       "whose _compute_score (experimental/agent_loop/agent_loop.py:385-393, "
                                       "689-718) scores each sample as it finishes with the reward loop's "
                                       "DAPORewardManager (experimental/reward_loop/reward_manager/dapo.py:23-114; "
                                       "the same formula at :103-109), which reads reward_model.reward_kwargs."
                                       "overlong_buffer_cfg and reward_model.reward_kwargs.max_resp_len (:33-35); "
                                       "the cited legacy manager (main_dapo.py:152-158, overlong_buffer_cfg="
                                       "reward_model.overlong_buffer) returns those rm_scores unchanged "
                                       "(reward_manager/dapo.py:57-59). run_dapo_qwen2.5_32b.sh:117-120 set "
                                       "reward_model.overlong_buffer.{enable,len,penalty_factor} only, so as "
                                       "released the script's reward has no overlong penalty; "
                                       "examples/gmpo_trainer/test_dapo_7b_math.sh:120-125 show the form that "
                                       "reaches it (+reward_model.reward_kwargs.overlong_buffer_cfg.* and "
                                       "+reward_model.reward_kwargs.max_resp_len). verl 0.9.1 reads "
                                       "reward.reward_kwargs.overlong_buffer_cfg (reward_loop/reward_manager/"
                                       "dapo.py:33-35; none by default). The record cited the legacy manager as "
                                       "theirs and the script's 4096 / 1.0 as what runs",
                                  defaults=(("buffer_len", "required", "overlong_buffer.len 4096 (script; yaml 0, "
                                             "off); at v0.7.0 not what runs: the reward loop reads reward_model."
                                             "reward_kwargs.overlong_buffer_cfg, unset by the script: no penalty "
                                             "as released (+reward_model.reward_kwargs.overlong_buffer_cfg.len=4096 "
                                             "gives 4096)"),
                                            ("max_len", "the run's max_new_tokens", "max_resp_len = "
                                             "data.max_response_length (20480 in the script) in the legacy manager; "
                                             "the reward loop's is reward_model.reward_kwargs.max_resp_len (unset "
                                             "by the script)"),
                                            ("penalty_factor", "1.0", "1.0 (script; yaml 0.0); at v0.7.0 it reaches "
                                             "the reward only as reward_kwargs.overlong_buffer_cfg.penalty_factor"),
                                            ("clip", "False (no clamp)", "none (a response cannot exceed "
                                             "max_resp_len)")),
                                  placement="theirs: at v0.7.0 the reward loop's DAPO reward manager, once "
                                            "per sample inside the agent loop as each response finishes (verl "
                                            "0.9.1: the reward loop's manager too, from the agent loop or the v1 "
                                            "trainer's compute_rm_score, trainer_base.py:1564), added to the verifier's score (rm_scores on the "
                                            "last response token), and only when reward_kwargs.overlong_buffer_cfg "
                                            "is set; in the legacy manager (verl before the reward loop became "
                                            "the default) once per response after the rollout, the same formula; "
                                            "length = the response's attention-mask tokens (EOS included); ours: "
                                            "a shaping stage after the reward, added to data.rewards, lengths = "
                                            "completion token counts (the stop token included)",
                                  deviations=(
                                      "the stage adds the penalty in float32 (the loop's reward dtype); the "
                                      "function keeps float64 under x64",
                                      "clip=True (a clamp at −factor; TRL's −1 when penalty_factor=1) is an "
                                      "option; verl's form is the default",
                                      "verl v0.7.0's DAPO scripts as released add no penalty (their "
                                      "reward_model.overlong_buffer does not reach the reward loop): the stage "
                                      "is theirs only with +reward_model.reward_kwargs.overlong_buffer_cfg.* and "
                                      "+reward_model.reward_kwargs.max_resp_len set (or the legacy manager); "
                                      "leave the stage out for the scripts as released"))),
      Technique("length_penalty", "shaping", length_penalty,
                "lam = 0.5 - (len - min_g)/(max_g - min_g); r = lam if correct else min(0, lam)",
                f"Kimi k1.5 arXiv:2501.12599; {_S1} L79 (interpretation)",
                # Kimi's length reward is added to data.rewards
                stage=S.shaping_stage(length_penalty, {"lengths": "lengths", "correct": "correct", **S.GROUP},
                                      result=lambda out, data: (data.rewards + np.asarray(out[0]), out[1])),
                fidelity=Fidelity("peer", "github.com/huggingface/open-r1: src/open_r1/rewards.py (len_reward, "
                                  "Kimi k1.5 form)",
                                  "ours: token lengths, min/max per prompt group (Kimi); open-r1: character lengths "
                                  "over the call's completions (one process's share of the generation batch)",
                                  read="huggingface/open-r1@1416fa0c src/open_r1/rewards.py:132-202 (len_reward: "
                                       "math_verify correctness, character lengths, λ = 0.5 − (len − min)/(max − "
                                       "min) over the call's completions, 0 when all equal); Kimi k1.5 (arXiv "
                                       "2501.12599 §2.3.3) not re-read in issue #51. #51 error-class sweep (s1b), "
                                       "the trainer that calls it: open-r1@1416fa0c setup.py:72 (trl[vllm]==0.18.0), "
                                       "src/open_r1/configs.py:234-239 (reward_funcs default accuracy, format, "
                                       "tag_count: 'length' is opt-in), src/open_r1/grpo.py:88, 112-114; "
                                       "huggingface/trl@v0.18.0 trl/trainer/grpo_trainer.py:1150-1193 (each process "
                                       "calls the reward functions on its own completions, then gathers the "
                                       "rewards), :951-975 (the generation batch: per_device_train_batch_size × "
                                       "steps_per_generation rows per process), grpo_config.py:517-518 "
                                       "(steps_per_generation = gradient_accumulation_steps by default); the same in "
                                       "the TRL 1.9.0 PyPI wheel (grpo_trainer.py:1612-1703). Per-row review g "
                                       "(#51): Kimi k1.5 §2.3.3 (pp. 5-6) and §2.4 'Long2short RL' (p. 8) read in a "
                                       "page-marked transcription (viktor-shcherb/msc_thesis@a6577d10 references/"
                                       "2025-01-kimi-k1.5-scaling-rl/sections/03_reinforcement-learning.md, "
                                       "04_reinforcement-learning-continued.md, 04b_training-recipe-long2short-"
                                       "sft.md; the arXiv PDF itself not read): the k sampled responses of one "
                                       "problem, len(i) the length of (y_i, z_i) (CoT and answer; 'token length' in "
                                       "the section's motivation), 0 for all when max_len = min_len, the same λ rule; "
                                       "'This length-based reward is then added to the original reward with a "
                                       "weighting parameter' (its value not given); 'we employ standard policy "
                                       "optimization without length penalty, followed by a constant length penalty "
                                       "for the rest of training' (a warm-up, its length not given); §2.4 applies "
                                       "the penalty in a separate long2short RL phase with a much shorter maximum "
                                       "rollout length; TRL 1.9.0 grpo_trainer.py:536 (reward_weights None: every "
                                       "reward function weighted 1.0)",
                                  defaults=(("mode", "'kimi' (wrong: min(0, λ))", "the same rule"),
                                            ("weight", "1 (λ added to data.rewards as is)",
                                             "Kimi: 'added to the original reward with a weighting parameter', value "
                                             "not stated; open-r1: its reward_weights entry, 1.0 unless set (TRL "
                                             "grpo_trainer.py:536)"),
                                            ("schedule", "every step the recipe lists the stage, from the first",
                                             "Kimi: no length penalty during a warm-up phase, then a constant one "
                                             "(warm-up length not stated), in the long2short RL phase (§2.4); "
                                             "open-r1: every step"),
                                            ("length unit", "tokens (data.lengths)", "characters of the content"),
                                            ("min / max over", "the row's prompt group (group_id)",
                                             "every completion of the reward call: the calling process's share of "
                                             "the generation batch (per_device_train_batch_size × "
                                             "steps_per_generation rows; the whole generation batch only on one "
                                             "process)"),
                                            ("enabled", "when the recipe lists the stage",
                                             "when reward_funcs lists 'length' (default accuracy, format, "
                                             "tag_count)"),
                                            ("correctness", "the task's verifier (data.correct)",
                                             "math_verify parse + verify; an unparseable gold counts correct")),
                                  placement="theirs: a GRPOTrainer reward function, once per generation batch "
                                            "after the rollout, on each process's own completions before TRL "
                                            "gathers the rewards, summed with the other rewards by their weights; "
                                            "ours: a shaping stage after the reward, added to data.rewards, per "
                                            "prompt group",
                                  deviations=(
                                      "min/max per prompt group (Kimi's per-problem form); theirs over the "
                                      "call's completions, one process's share of the generation batch, so their "
                                      "λ depends on the number of processes (one group of character lengths gives "
                                      "theirs on one process, tested); #51 error-class sweep (s1b): the record "
                                      "said the whole batch",
                                      "lengths in tokens; theirs characters",
                                      "correctness from the run's verifier; theirs math_verify, with an "
                                      "unparseable reference counted correct",
                                      "Kimi's weighting parameter and its warm-up (no length penalty at first, then "
                                      "a constant one) are not built: the stage adds λ with weight 1 from the first "
                                      "step; = Kimi only with their weight 1 and after their warm-up. Per-row "
                                      "review g (#51): the record cited Kimi §2.3.3 without reading it and had "
                                      "neither the weight nor the warm-up"))),
      Technique("rubric_dropout", "shaping", rubric_dropout,
                "r_i = sum_c w_c k_gc s_ic / sum_c w_c k_gc, k_g shared by group g", f"{_S1} L81",
                # criteria = the recipe's reward columns; the rubric score replaces data.rewards (their sum)
                stage=S.shaping_stage(
                    rubric_dropout, {"key": "key", "scores": "reward_components", "group_id": "group_id",
                                     "criterion_mask": lambda data: None},
                    probe=lambda kw: probe_step(components=len(kw["weights"]) if kw.get("weights") is not None else 2),
                    result=lambda out, data: (out[0], out[2])),
                fidelity=Fidelity("abstract", f"{_S1} L81 (Rubric Dropout abstract, arXiv 2608.11669)",
                                  "mean over kept criteria, Bernoulli default: ours; no code. A reading of the "
                                  "paper (id 62378977393): a fixed fraction of the positive-weight criteria "
                                  "dropped: mode='exact' (round(p·C); theirs floor)",
                                  read="Rubric Dropout abstract (seed 001 L81, read in full: drop a random subset "
                                       "of the rubric's criteria at every step before computing the reward, the "
                                       "subset shared across each rollout group, evaluation on the full rubric, "
                                       "dropout 30% and 50% compared); no paper body or code found. #51 paper-"
                                       "conventions sweep (s3): the paper is arXiv 2608.11669v1 (12 Aug 2026, "
                                       "'Work in Progress'); the pages corpus holds no page of it; a reading "
                                       "report in the code index (read_file id 62378977393, section C16, not the "
                                       "paper's text): 'drop a random fraction f of the rubric's positive-weight "
                                       "criteria per step, one mask per rollout group seeded by SHA256(instance_id, "
                                       "step) so GRPO's group-standardized advantages stay comparable and the "
                                       "normalizer cancels'; runs: Qwen3-8B / 4B, GRPO, 16 rollouts, lr 1e-6, "
                                       "600 steps, proxy judge gpt-4o-mini, gold claude-sonnet-4-6, f = 50 % the "
                                       "headline arm; every configuration one seed. An unattributed third-party "
                                       "implementation (code index, read_file id 71015215527: dropout_keep, 'Rubric "
                                       "Dropout (arXiv 2608.11669, section 3)'): keeps n − floor(f·n) criteria, at "
                                       "least min_keep = 3, sampled without replacement from a SHA256(example_id, "
                                       "step) seed; score Σ w·v / Σ positive w, clipped to [0, 1] (its own choices "
                                       "beyond the paper are not marked)",
                                  defaults=(("drop_prob", "required (no default)",
                                             "f = 0.3 and 0.5 compared (abstract), 0.5 the headline arm; a 30-50 % "
                                             "sweet spot"),
                                            ("mode", "'bernoulli' (each criterion kept w.p. 1 − p)",
                                             "a fixed fraction f of the criteria dropped each step (reading "
                                             "report): an exact count, mode='exact' (ours drops round(p·C); the "
                                             "third-party implementation floor(f·C), keeping ≥ 3)"),
                                            ("which criteria may be dropped", "every criterion (weights must be "
                                             "≥ 0)", "the positive-weight criteria (reading report); negative-"
                                             "weight (penalty) criteria always kept"),
                                            ("aggregate", "'mean' over kept criteria (weights None)",
                                             "a normaliser shared by the group that cancels under GRPO's "
                                             "standardisation (reading report); the third-party implementation: "
                                             "Σ w·v / Σ positive w over the kept criteria, clipped to [0, 1]"),
                                            ("mask seed", "fold_in(step key, group id)",
                                             "SHA256(instance_id, step): one mask per prompt per step"),
                                            ("group size / steps (their runs)", "the recipe's",
                                             "16 rollouts, lr 1e-6, 600 steps (reading report)")),
                                  placement="theirs (abstract; reading report): at every RL step, before the "
                                            "reward of each rollout group is computed, one dropped subset per "
                                            "group (seeded by the prompt and the step); the full rubric at "
                                            "evaluation; ours: a shaping stage after the reward that rescores "
                                            "data.reward_components (one column per criterion) with one mask per "
                                            "group from the step's key",
                                  deviations=(
                                      "how kept criteria are combined (weighted mean, or sum) and the mask law "
                                      "are ours; the paper drops a fixed fraction (reading report): "
                                      "mode='exact' is that, with round(p·C) dropped; the third-party "
                                      "implementation drops floor(f·C) and keeps at least 3, so at C = 5, f = "
                                      "0.3 it keeps 4 criteria where ours keeps 3 (round(1.5) = 2 dropped)",
                                      "every criterion may be dropped here (weights must be ≥ 0); theirs drops "
                                      "among the positive-weight criteria only (a rubric's penalty criteria are "
                                      "always scored)",
                                      "a row whose applicable criteria were all dropped is scored on the full "
                                      "rubric (ours)",
                                      "the criteria are the recipe's reward columns; their LLM-judge rubric "
                                      "grading is the caller's"))),
      Technique("prm_clip", "shaping", prm_clip, "r'_t = min(r_t - eta, 0)", f"{_S1} L157 (arXiv:2410.15115)",
                stage=S.shaping_stage(prm_clip, S.STEPS, result=S.plus_outcome_steps),
                fidelity=Fidelity("abstract", f"{_S1} L157 (arXiv 2410.15115 abstract)",
                                  'min(r − η, 0) recalled (a description of its Clip figure agrees); η ours. Searched '
                                  '2026-12 (2 passes) pages, code, openpsi-project/ReaLHF (all branches): no code; '
                                  'only abstract and reviews stored',
                                  read="arXiv 2410.15115 abstract (page read: arxiv.org/html/2410.15115v3, pages corpus: title and "
                                       "abstract; seed 001 L157) and ICLR 2025 reviews (paperhub.cn/paper/F0GNv13ojF: "
                                       "'r_process(q, p_k+1)'); the method section and code are not stored. "
                                       "Eleventh draw (#51 item 4, seed 20261216): 'a description of its Clip "
                                       "figure agrees' named no source here; it is the machine description of "
                                       "the paper's Clip/Delta figure (pages corpus, subtext.edge.nugit.net/"
                                       "image/4e28d956... (nemotron-free, healer-alpha-free, gemini-2.0-flash "
                                       "readings): a dashed threshold η over the step rewards; the 'Clipped "
                                       "Reward' panel keeps only the steps below η, as bars below zero, and "
                                       "nothing for the steps above η: min(r − η, 0)); the same reviews in the "
                                       "code index (read_file id 63217475182): review 2 asks for 'the reward "
                                       "thresholds for the Clip and Delta mechanisms' (the submission does not "
                                       "give η), review 5 'r_process(q, p_k+1) can be 0' after clipping; a third "
                                       "party's restatement (code index, read_file id 26158084682, CoDeR-RL "
                                       "README): 'r(q,p_k) = min(r_process(q,p_k) − η, 0)', η not given. Per-row "
                                       "review p (#51), the same reviews read whole: review 6 'The paper does "
                                       "not tell us about the hyperparameter choice of α, but with some large "
                                       "enough α, this may lead to agent preferring long wrong generations' (a "
                                       "weight on the learned reward added to the success reward; the CoDeR-RL "
                                       "README writes Delta as 'r_k = α × (r_k − r_{k+1})'); reviews 1, 5 and 6 "
                                       "on the paper's combined mechanism: 'clipping and then delta-ing the PRM "
                                       "rewards', 'none of them work well on their own' (1), 'delta is applied "
                                       "on top of clipping' (5), 'the proposed clip-delta mechanism ... where "
                                       "PRM-clip is the potential function' (6)",
                                  defaults=(("eta", "0.5", "not in the stored text (review 2: the submission "
                                             "does not report the Clip threshold)"),
                                            ("process-reward weight α", "none: Σ_s r'_s is added at weight 1 "
                                             "(plus_outcome_steps)", "α on the learned reward (review 6; "
                                             "value not in the stored text)")),
                                  placement="theirs (abstract): PRM step rewards combined with the success reward "
                                            "during RL, refined so that a trajectory's accumulated reward is "
                                            "bounded above; ours: a shaping stage after the reward: the clipped "
                                            "step rewards are summed into the row's sequence reward "
                                            "(data.rewards + Σ_s r'_s)",
                                  deviations=(
                                      "the form min(r − η, 0) and η = 0.5 are our reading (the abstract names "
                                      "'Clipping' and the upper bound only)",
                                      "the refined step rewards are summed into one sequence reward; a per-step "
                                      "placement (each at its step's tokens) is not built",
                                      "their weight α on the process reward is not an argument here (weight 1); "
                                      "its value is not in the stored text (per-row review p)",
                                      "their combined Clip-Delta (Delta applied to the clipped rewards, reviews "
                                      "1, 5, 6) is not a stage here: prm_delta(prm_clip(r)) composes as "
                                      "functions, but the stages rl.shaping=[prm_clip, prm_delta] each read the "
                                      "raw data.step_rewards, giving outcome + Σ min(r − η, 0) + r_first, not "
                                      "clip-delta's outcome + min(r_first − η, 0); as functions, "
                                      "prm_delta(prm_clip(r)) gives the combination (tested; per-row review p)"))),
      Technique("prm_delta", "shaping", prm_delta, "r'_t = r_t - r_{t+1}, r'_T = r_T",
                f"{_S1} L157 (arXiv:2410.15115)",
                stage=S.shaping_stage(prm_delta, S.STEPS, result=S.plus_outcome_steps),
                fidelity=Fidelity("abstract", f"{_S1} L157 (arXiv 2410.15115 abstract)",
                                  'r_t − r_{t+1} recalled; r_T kept on the last step unverified (a figure description '
                                  'crosses it out). Searched 2026-12 (2 passes) pages, code, ReaLHF: no code; only '
                                  'abstract and reviews stored',
                                  read="arXiv 2410.15115 abstract (page read: arxiv.org/html/2410.15115v3, pages corpus: title and "
                                       "abstract; seed 001 L157) and ICLR 2025 reviews (paperhub.cn/paper/F0GNv13ojF: "
                                       "'r_process(q, p_k+1)'); a machine description of the Clip/Delta figure "
                                       "(pages corpus, subtext.edge.nugit.net/image/4e28d956...: steps s1-s4, "
                                       "the Delta panel's s4 marked X, s3's delta positive though its bar is "
                                       "below s4's); the method section and code are not stored. Per-row review "
                                       "p (#51): the ICLR reviews in the code index read whole (read_file id "
                                       "63217475182): review 6 'The paper does not tell us about the "
                                       "hyperparameter choice of α' (a weight on the learned reward added to "
                                       "the success reward) and 'the proposed clip-delta mechanism ... where "
                                       "PRM-clip is the potential function', review 1 'clipping and then "
                                       "delta-ing the PRM rewards', 'none of them work well on their own', "
                                       "review 5 'delta is applied on top of clipping'; a third party's "
                                       "restatement (read_file id 26158084682, CoDeR-RL README): Delta 'r_k = α "
                                       "× (r_k − r_{k+1})'",
                                  defaults=(("process-reward weight α", "none: Σ_s r'_s is added at weight 1 "
                                             "(plus_outcome_steps)", "α on the learned reward (review 6; the "
                                             "CoDeR-RL restatement's α; value not in the stored text)"),),
                                  placement="theirs (abstract): PRM step rewards combined with the success reward "
                                            "during RL, refined so that a trajectory's accumulated reward is "
                                            "bounded; ours: a shaping stage after the reward: the delta step "
                                            "rewards are summed into the row's sequence reward, which telescopes "
                                            "to the first valid step's r (plus the outcome reward)",
                                  deviations=(
                                      "the form r_t − r_{t+1} and r_T kept on the last step are our reading "
                                      "(a review's 'r_process(q, p_k+1)' agrees with the difference); the "
                                      "figure description suggests the last step gets no process reward and "
                                      "step T − 1 keeps r_{T−1}: summed, r_1 as here for rows of ≥ 2 steps, 0 "
                                      "for a one-step row (ours: r_1)",
                                      "summed into one sequence reward, Delta reduces to the first step's "
                                      "reward: its per-step credit needs a per-step placement, not built",
                                      "their weight α on the process reward is not an argument here (weight 1); "
                                      "its value is not in the stored text (per-row review p)",
                                      "the paper's combined Clip-Delta (Delta on the clipped rewards; reviews 1, "
                                      "5, 6) is not a stage here: after a prm_clip stage, the prm_delta stage "
                                      "still reads the raw data.step_rewards and adds r_first, so the pair gives "
                                      "outcome + Σ min(r − η, 0) + r_first, not outcome + min(r_first − η, 0); "
                                      "as functions, prm_delta(prm_clip(r)) gives the combination (tested; "
                                      "per-row review p)"))),
      Technique("correctness_gated", "shaping", correctness_gated, "r = r_outcome + w 1[correct] r_process",
                f"{_S1} L219 (SCOPE-RL, interpretation)",
                stage=S.shaping_stage(correctness_gated,
                                      {"outcome": "rewards", "process": S.process_mean,
                                       "correct": lambda data: np.asarray(data.correct) * data.valid},
                                      needs=("step_rewards",)),
                fidelity=Fidelity("abstract", f"{_S1} L219 (SCOPE-RL abstract)",
                                  "gate r_outcome + w·1[correct]·r_process ours; process terms the caller's. Its link "
                                  "github.com/tokencraft-lab/SCOPE-RL: no snapshot, not indexed; code search "
                                  "'SCOPE-RL': other projects (2026-12)",
                                  read="SCOPE-RL abstract (seed 001 L219, read in full: 'Quality-Aware Process RL "
                                       "applies correctness-gated process-shape rewards to refine correct "
                                       "trajectories after success', GRPO update kept; code linked at "
                                       "github.com/tokencraft-lab/SCOPE-RL, not stored); no paper body found",
                                  defaults=(("weight", "1.0", "not stated"),),
                                  placement="theirs (abstract): in the second stage (after success), process-shape "
                                            "rewards are added only on correct trajectories, then the GRPO "
                                            "update; ours: a shaping stage after the reward: data.rewards + w · "
                                            "1[correct] · (mean of the row's valid step rewards), needs "
                                            "step_rewards",
                                  deviations=(
                                      "the additive gate and w are our reading; their process terms (useful-"
                                      "step density, error localisation, token efficiency) are the caller's "
                                      "step rewards, averaged per row",
                                      "their first stage (prefix-decomposed scaffold rewards before success) "
                                      "is not part of this row"))),
      Technique("gaussian_reward", "reward", gaussian_reward, "r = exp(-(s_hat - s)^2 / (2 sigma^2))",
                f"{_S0} L109 (OmniQuality-R, arXiv 2510.10609)",
                stage=_gaussian_reward_stage,
                fidelity=Fidelity("authors_code", "github.com/yeppp27/VisualScore: openrlhf/models/remote_rm/"
                                  "math_verifier_wolatex_regress_specifc.py (gaussian_rbf)",
                                  "same kernel; their scripts: sigma=0.8 (default 1.0 = their CLI default); unparsed → "
                                  "0 (invalid_value=0); their +0.5 format term: a separate reward (format_regex); "
                                  "per-dataset σ multipliers (off): not built",
                                  read="yeppp27/VisualScore@479b9f3b openrlhf/models/remote_rm/math_verifier_wolatex_"
                                       "regress_specifc.py:160-235 (RewardCalculator.get_reward, gaussian_rbf), "
                                       ":249-260 (verify_format, 0.5), :331-354 (reward = format + accuracy, the sum at :353-354; "
                                       "per-row review q: cited as :331-352 before), "
                                       ":401 (--initial_sigma 1.0); examples/scripts/omniquality-R/train_grpo_ava_"
                                       "evalmuse_koniq_7B_RLstage1.sh:71-76 (sigma 0.8). Error-class sweep (#51, "
                                       "s2b): the second stage's launch, train_grpo_ava_evalmuse_koniq_7B_RLstage2.sh:"
                                       "77-78 (the same server, gaussian_rbf, sigma 0.8), :86 (entry point "
                                       "openrlhf.cli.train_ppo_ray_improved), :110 (num_episodes 8), :135-138 "
                                       "(--use_high_entropy, --high_entropy_rho 0.2, --enable_accuracy_filter, "
                                       "--min_gaussian_std 0.001); openrlhf/cli/train_ppo_ray_improved.py:430-432 "
                                       "(freezing_filter_steps −1); openrlhf/trainer/ppo_utils/"
                                       "experience_maker_improved.py:250-252 (the filter before the advantage) and "
                                       ":449-492 (filter: per prompt group of n_samples_per_prompt 16, torch.std of "
                                       "the acc_rewards, the Gaussian term without the format term; a group with std "
                                       "≤ 0.001 is dropped, :480). Twelfth draw (#51 item 4, seed 20261217): "
                                       "RLstage1.sh:24 and RLstage2.sh:24 (export WANDB_API_KEY=\"\", 'Wandb "
                                       "configuration (optional)'), RLstage1.sh:129 and RLstage2.sh:132 (--use_wandb "
                                       "${WANDB_API_KEY}, unquoted), openrlhf/cli/train_ppo_ray.py:410 and "
                                       "train_ppo_ray_improved.py:410 (--use_wandb, type=str): with the key left "
                                       "empty the option gets no value and argparse stops the trainer ('argument "
                                       "--use_wandb: expected one argument', exit 2), so neither script starts as "
                                       "released; README.md:97, 102 run ./examples/scripts/VisualScore/..., a folder "
                                       "the snapshot does not have (the scripts are under examples/scripts/"
                                       "omniquality-R/), and its list of variables to edit does not name the key. "
                                       "With a key set (or the flag dropped) the values below are what runs; "
                                       "openrlhf/trainer/ppo_utils/experience_maker.py:579-599, 636-647 (the "
                                       "decoded prompt + response sent, the server's 'rewards' summed over the one "
                                       "server by train_ppo_ray.py:21-22 reward_fn). The record did not say the "
                                       "scripts do not start. Per-row review q (#51): openrlhf/utils/"
                                       "remote_rm_utils.py:11-45 (request_api_wrapper: response.json(); remote_rm_fn "
                                       ":39-40 returns torch.tensor(v) of each JSON list: the Python floats the server "
                                       "computed in float64 become float32 tensors)",
                                  defaults=(("sigma", "1.0", "0.8 (train scripts, once started: a WandB key must be "
                                             "set); CLI default 1.0"),
                                            ("invalid_value", "0.0", "0.0 (no tag, float() fails)"),
                                            ("parse", "'number' (boxed / #### / 'answer is' / last number)",
                                             "the first <answer>(.*?)</answer>, float()"),
                                            ("dataset σ multipliers", "none", "off (enable_dataset_specific False)"),
                                            ("format term", "none (format_regex)", "+0.5 (verify_format)"),
                                            ("group filter on the Gaussian term", "none (compose zero_variance: it "
                                             "tests max − min of the summed reward)",
                                             "stage 1: none; stage 2 (RLstage2.sh: train_ppo_ray_improved, "
                                             "--enable_accuracy_filter, --min_gaussian_std 0.001, "
                                             "freezing_filter_steps −1: from the first step): a prompt group whose "
                                             "16 Gaussian rewards have unbiased std ≤ 0.001 is dropped before the "
                                             "advantage (experience_maker_improved.py:250-252, 449-492)")),
                                  placement="theirs: a remote reward server scoring each response once after "
                                            "generation, reward = 0.5·format + gaussian_rbf; ours: a completion "
                                            "reward, once per row after the rollout",
                                  deviations=(
                                      "the reward is float32, also under x64 (the StepData contract: rewards [B] "
                                      "float32, a host function of the text), as theirs is when it reaches the "
                                      "trainer (remote_rm_utils.py:40, torch.tensor of the server's JSON floats: "
                                      "float32); what differs is that the parsed prediction and target are "
                                      "float32 here before the kernel (theirs Python floats, the kernel in "
                                      "float64): at their 0-5 scores the reward differs from theirs by < 1e-6 "
                                      "(at most 4e-7 at sigma 0.8 on a 3-decimal grid). Per-row review q (#51): the "
                                      "record did not say theirs is float32 too, so its float32 reward read as a "
                                      "difference",
                                      "sigma defaults to 1.0 (their CLI default); sigma=0.8 is their runs'",
                                      "their launch scripts as released stop at argparse (--use_wandb with the "
                                      "empty WANDB_API_KEY they export); not a difference of the reward: with a key "
                                      "set they run sigma 0.8 as stated",
                                      "the number is read by parse='number' (math_answer's extraction); theirs "
                                      "read only the <answer> tag. The parse also reads the reference answer "
                                      "(problem.answer, '2.971' in their data), so a callable reading only the tag "
                                      "raises on it: theirs is a tag-only callable with the references stored as "
                                      "'<answer>2.971</answer>'; a callable that falls back to float(text) for "
                                      "tagless text gives theirs except on a tagless completion that is a bare "
                                      "number (theirs 0). Twelfth draw (#51 item 4): the record said 'a callable "
                                      "parse gives theirs'",
                                      "their +0.5 format term is a separate reward (format_regex with their "
                                      "pattern); not added here",
                                      "their server's other --reward_type rules (:184-212: negative_mae, "
                                      "negative_mse, bounded_reward 1 − |e|/max_error, hybrid_mae_bonus, and "
                                      "original_binary 1[|e| < 0.3], the CLI default, :399) are not built; the "
                                      "train scripts pass gaussian_rbf",
                                      "their stage-2 run drops prompt groups whose Gaussian term varies little "
                                      "(torch.std ≤ 0.001 over the 16 samples, the format term not counted); not "
                                      "built: composing zero_variance drops only groups whose summed reward is "
                                      "constant (max − min ≤ its atol), so a group of near-equal Gaussian scores "
                                      "(e.g. every prediction within 0.01 of the target) trains here and is dropped "
                                      "there; their stage 2 also trains on the top 20% entropy tokens only "
                                      "(--use_high_entropy, --high_entropy_rho 0.2), a loss-side switch"))),
      Technique("clipped_linear_reward", "reward", clipped_linear_reward, "r = clip(a d + b, low, high)",
                f"{_S0} L39 (IRRL, arXiv:2302.00270, interpretation)",
                stage=_clipped_linear_reward_stage,
                fidelity=Fidelity("authors_code", "github.com/mengdi-li/internally-rewarded-rl: trainer.py "
                                  "(linear_clipping: clamp(p_y - 0.1, min=0))",
                                  "theirs: r = max(p_y − 1/K, 0), K classes (MNIST: 0.1); offset=-1/K gives it; "
                                  "default offset 0 (the class count is the caller's); high=1 never binds on p",
                                  read="mengdi-li/internally-rewarded-rl@f630fdbf trainer.py:489-498 (r_certainty, "
                                       "linear_clipping: torch.clamp(c_pis_gt - 0.1, min=0)) and :521-556 (R at the "
                                       "stop step); config.py:60 (default reward type); skill-discovery/code/"
                                       "disdain.py:834-835 (jnp.maximum(0, skill_rewards_linear)), :777-801 "
                                       "(skill_rewards_linear = ensemble-mean p(z | s_T) − 1/code_arity, on the "
                                       "last transition only), config.py:37-40 (code_arity 24 by default), "
                                       "skill-discovery/scripts/train_linear_clipping.sh (code_arity 128, "
                                       "goal_duration 20; read in the #51 read-whole pass). Per-row review q (#51): "
                                       "README.md:17-22 (the digit task's training command: "
                                       "./scripts/training/ram_linear_clipping.sh, 'to train a RAM model using the "
                                       "clipped linear reward'; :25 the shipped checkpoint ram_18_4x4_1_ckpt_1400 is "
                                       "that run's), scripts/training/ram_linear_clipping.sh (--dynamic_exploration_"
                                       "time False, --num_glimpses 18, batch_size 256), trainer.py:594-752 (the "
                                       "fixed-time path: :643-644 the same clamp(p_y − 0.1, min=0), :734 R = "
                                       "r_certainty, :739-752 the same R on all 18 steps minus the baseline, no "
                                       "discount); README.md:59-73 (skill discovery: 'cd skill_discovery', a folder "
                                       "the snapshot names skill-discovery)",
                                  defaults=(("scale", "1", "1"),
                                            ("offset", "function 0; stage 1 (on d = −|ŝ − s|)",
                                             "−1/K = −0.1 (10 MNIST classes, hard-coded); skill discovery: "
                                             "−1/code_arity, −1/128 in its script (config default 24: −1/24)"),
                                            ("low / high", "0 / 1", "0 / none")),
                                  placement="theirs: once per episode at the stop step, on the online "
                                            "classifier's probability of the true label; the reward goes to "
                                            "REINFORCE with a baseline, discounted by 0.99^(stop step) by default "
                                            "(config.py:35-39: use_implict_lat_penalty True, "
                                            "discount_factor_lat_penalty 0.99); skill discovery: the "
                                            "discriminator's p(z | s_T) on the last transition of each goal "
                                            "period, a SARSA(λ) Q-learning target (disdain.py:800-825); the "
                                            "README's own training command, ram_linear_clipping.sh (RAM, "
                                            "--dynamic_exploration_time False): a fixed 18 glimpses, the reward "
                                            "after the last one, undiscounted, the same R for each of the 18 "
                                            "steps minus the baseline (trainer.py:594-752); "
                                            "ours: the function maps any d; the catalog stage is a completion "
                                            "reward, d = −|ŝ − s| of the parsed number and the reference",
                                  deviations=(
                                      "the reward is float32, also under x64 (the StepData contract: rewards [B] "
                                      "float32, a host function of the text)",
                                      "the function's default offset is 0 (K is the caller's); offset=-1/K gives "
                                      "theirs; high = 1 is ours and never binds on a probability",
                                      "the stage scores a number's distance (clip(1 − |ŝ − s|, 0, 1)), not a "
                                      "classifier's probability: there is no discriminator in a text reward; "
                                      "an unparsed completion scores low",
                                      "their certainty threshold, latency term and classifier loss are not part "
                                      "of this row",
                                      "their other reward rules are not built: information_maximization_"
                                      "reward_type linear_noclipping (p − 0.1), log_clipping (max(log p − log 0.1, "
                                      "0)) and log_noclipping (log(p/0.1)) (trainer.py:495-504), and the accuracy "
                                      "rewards acc_reward_type zero_and_one / minus_one_and_one (:509-514; "
                                      "use_information_maximization_reward defaults to False); each has its own "
                                      "script (scripts/training/), this row is dtram_linear_clipping.sh's",
                                      "the README's training command is the RAM script, ram_linear_clipping.sh "
                                      "(README.md:17-22): there the reward r = max(p_y − 0.1, 0) is neither "
                                      "discounted nor taken at a chosen stop step (a fixed 18 glimpses, "
                                      "trainer.py:594-752), where dtram_linear_clipping.sh's is 0.99^(stop step)·r; "
                                      "the kernel is the same in both (this row's function with offset=-0.1). "
                                      "Per-row review q (#51): the record gave only the DT-RAM script's placement"))),
  )


TECHNIQUES = _technique_rows()
