"""KL terms: sampled KL estimators as a loss, KL folded into rewards, and RPG.

Conventions (shared by every term of this module; Δ = log π_θ − log π_ref):

* ``k1`` / ``kl``          Δ
* ``abs``                  |Δ|
* ``k2`` / ``mse``         ½ Δ²
* ``k3`` / ``low_var_kl``  e^{−Δ} + Δ − 1   (verl clamps −Δ to ±20 and the
  result to ±10; ``clamp=True`` reproduces that, ``clamp=False`` is TRL's)
* a ``+`` suffix (``k1+``, ``k3+``, ``low_var_kl+`` ...) is verl's
  straight-through estimator: forward value of the base estimator, gradient of
  k2 (``½Δ²``).

All estimator names are verl's ``kl_penalty`` names (verl 0.9.1
``trainer/ppo/core_algos.py::kl_penalty``); TRL's ``beta`` term is ``k3``.
This module also holds the small private helpers the other part-B objective
modules (``_entropy``, ``_supervised``) share.

Size: one family (KL terms); the catalog rows with their fidelity records are the last ~200 lines.
"""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from rljax.objectives import _ratio_utils as U
from rljax.types import PolicyOutputs, TrainBatch, check_mask, is_concrete

Array = jax.Array

__all__ = ["kl_penalty", "kl_in_reward", "kl_estimate", "rpg", "KL_ESTIMATORS"]

# --------------------------------------------------------------------------------------
# shared private helpers (used by _entropy.py and _supervised.py as well)
# --------------------------------------------------------------------------------------


def _check_value(name: str, value, *, low: Optional[float] = None, high: Optional[float] = None,
                 low_open: bool = False, high_open: bool = False) -> None:
  """Raises ``ValueError`` naming ``name`` when a *concrete* value is out of range.

  Traced values (e.g. a controller's ``state.beta`` inside ``jit``) are accepted
  unchecked: their values do not exist at trace time.
  """
  if value is None or not is_concrete(value):
    return
  arr = np.asarray(value, dtype=np.float64)
  if not np.all(np.isfinite(arr)):
    raise ValueError(f"{name} must be finite, got {value!r}")
  if low is not None and (np.any(arr <= low) if low_open else np.any(arr < low)):
    raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {value!r}")
  if high is not None and (np.any(arr >= high) if high_open else np.any(arr > high)):
    raise ValueError(f"{name} must be {'<' if high_open else '<='} {high}, got {value!r}")


def _check_choice(name: str, value, choices) -> None:
  if value not in choices:
    raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")


def _check_batch(out: PolicyOutputs, batch: TrainBatch) -> tuple:
  """Checks that ``out.logp`` and ``batch.loss_mask`` agree; returns ``(B, T)``."""
  shape = tuple(np.shape(out.logp))
  if len(shape) != 2:
    raise ValueError(f"out.logp must be [B, T], got shape {shape}")
  check_mask("batch.loss_mask", batch.loss_mask, shape)
  return shape


def _float(*xs):
  """The float type the terms compute in: at least float32, float64 when an input is (``jax_enable_x64``)."""
  return jnp.result_type(jnp.float32, *[jnp.asarray(x).dtype for x in xs])


def _require(name: str, x, shape: tuple):
  """Returns ``x`` as a float array (``_float``) after checking it is present and has ``shape``."""
  if x is None:
    raise ValueError(f"{name} is required by this term but is None")
  if tuple(np.shape(x)) != tuple(shape):
    raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(np.shape(x))}")
  x = jnp.asarray(x)
  return x.astype(_float(x))


def _extra(batch: TrainBatch, key: str, shape: tuple, *, required: bool = True):
  extras = dict(batch.extras or {})
  if key not in extras:
    if required:
      raise ValueError(f"batch.extras[{key!r}] is required by this term (expected shape {tuple(shape)})")
    return None
  return _require(f"batch.extras[{key!r}]", extras[key], shape)


def _mask(batch: TrainBatch) -> Array:
  return jnp.asarray(batch.loss_mask).astype(jnp.float32)


def _masked_mean(x: Array, mask: Array) -> Array:
  """``Σ x m / max(Σ m, 1)`` (0 on an empty mask, never NaN)."""
  mask = mask.astype(jnp.float32)
  return jnp.sum(jnp.where(mask != 0, x * mask, 0)) / jnp.maximum(jnp.sum(mask), 1.0)


def _seq_sum(x: Array, mask: Array) -> Array:
  return jnp.sum(jnp.where(mask != 0, x * mask.astype(jnp.float32), 0), axis=-1)


def _proximal(batch: TrainBatch, shape: tuple, name: str) -> Array:
  """``batch.logp_proximal`` ``[B, T]`` (the ``"proximal"`` source of ``get_logp``) in the terms' float type."""
  prox = U.get_logp(batch, U.PROXIMAL, shape, name=name)
  return prox.astype(_float(prox))


def _log_ratio(out: PolicyOutputs, batch: TrainBatch, clamp: Optional[float] = 20.0) -> Array:
  """``log r = log π_θ − log π_proximal`` (``batch.logp_proximal``) ``[B, T]``, clamped to ±clamp (verl: 20)."""
  prox = _proximal(batch, tuple(np.shape(out.logp)), "proximal log-probs")
  log_r = out.logp.astype(_float(out.logp)) - prox
  if clamp is not None:
    log_r = jnp.clip(log_r, -clamp, clamp)
  return log_r


def _with_name(fn, name: str):
  fn.name = name
  fn.__name__ = name
  return fn


# --------------------------------------------------------------------------------------
# KL estimators
# --------------------------------------------------------------------------------------

_BASE = {"k1": "k1", "kl": "k1", "abs": "abs", "k2": "k2", "mse": "k2", "k3": "k3", "low_var_kl": "k3"}
KL_ESTIMATORS = tuple(sorted(list(_BASE) + [k + "+" for k in _BASE]))


def _estimator_value(delta: Array, base: str, clamp: bool) -> Array:
  if base == "k1":
    return delta
  if base == "abs":
    return jnp.abs(delta)
  if base == "k2":
    return 0.5 * jnp.square(delta)
  neg = -delta  # log π_ref − log π_θ
  if clamp:
    neg = jnp.clip(neg, -20.0, 20.0)
  value = jnp.exp(neg) - neg - 1.0
  return jnp.clip(value, -10.0, 10.0) if clamp else value


def kl_estimate(logp: Array, logp_ref: Array, estimator: str = "k3", *, clamp: bool = True) -> Array:
  """Per-token sampled KL(π_θ ‖ π_ref) estimate, elementwise.

  With Δ = ``logp − logp_ref`` (samples drawn from π_θ):

      k1 = Δ,  abs = |Δ|,  k2 = ½Δ²,  k3 = e^{−Δ} + Δ − 1,
      "<name>+" = sg(k_name − ½Δ²) + ½Δ²   (value of k_name, gradient of k2).

  ``clamp=True`` follows verl (k3 only: −Δ clipped to [−20, 20], result to
  [−10, 10]); other estimators are never clamped (as in verl).
  Source: Schulman, "Approximating KL divergence" (2020) for k1/k2/k3; verl
  0.9.1 ``kl_penalty`` for the names and the "+" straight-through variant.

  Args:
    logp, logp_ref: arrays of equal shape (typically ``[B, T]``).
    estimator: one of ``KL_ESTIMATORS``.
    clamp: verl's k3 clamps.
  """
  if not isinstance(estimator, str):
    raise ValueError(f"estimator must be a string, one of {list(KL_ESTIMATORS)}, got {estimator!r}")
  straight_through = estimator.endswith("+")
  base = _BASE.get(estimator[:-1] if straight_through else estimator)
  if base is None:
    raise ValueError(f"estimator must be one of {list(KL_ESTIMATORS)}, got {estimator!r}")
  if tuple(np.shape(logp)) != tuple(np.shape(logp_ref)):
    raise ValueError(f"logp {tuple(np.shape(logp))} and logp_ref {tuple(np.shape(logp_ref))} must have the same shape")
  dtype = _float(logp, logp_ref)  # float64 inputs (jax_enable_x64) keep float64
  delta = jnp.asarray(logp).astype(dtype) - jnp.asarray(logp_ref).astype(dtype)
  value = _estimator_value(delta, base, clamp)
  if straight_through:
    k2 = 0.5 * jnp.square(delta)
    value = k2 + jax.lax.stop_gradient(value - k2)
  return value


def kl_penalty(beta=1e-3, estimator: str = "low_var_kl", *, clamp: bool = True, bias_correction: bool = False):
  """KL-to-reference loss term (verl ``use_kl_loss``; TRL ``beta``).

      L_t = β · k(log π_θ(y_t) − log π_ref(y_t))     [· sg?(r_t) with bias_correction]

  with ``k`` from ``kl_estimate`` (verl name ``kl_loss_type``, default
  ``low_var_kl`` = k3; verl's ``kl_loss_coef`` default is 0.001). TRL's
  ``use_bias_correction_kl`` multiplies the k3 value by the importance ratio
  r_t = π_θ/π_old (DeepSeek-V3.2); ``bias_correction=True`` does that with
  the token ratio r_t = exp(log π_θ − ``batch.logp_proximal``), gradient
  flowing through r_t (TRL multiplies by its non-detached ``coef_1``, which
  is the sequence ratio under ``importance_sampling_level="sequence"``).

  Args:
    beta: coefficient ≥ 0; may be a traced array (e.g. ``adaptive_kl`` state).
    estimator: one of ``KL_ESTIMATORS``.
    clamp: verl's k3 clamps (see ``kl_estimate``).
    bias_correction: TRL's ratio-weighted KL.

  Reads ``out.logp``, ``batch.logp_ref`` ([B, T]). Metrics: ``kl`` (masked
  token-mean of the estimator value), ``beta``.
  """
  _check_value("beta", beta, low=0.0)
  kl_estimate(jnp.zeros(()), jnp.zeros(()), estimator)  # validates the name now

  def term(out: PolicyOutputs, batch: TrainBatch):
    shape = _check_batch(out, batch)
    ref = _require("batch.logp_ref", batch.logp_ref, shape)
    kl = kl_estimate(out.logp, ref, estimator, clamp=clamp)
    if bias_correction:
      kl = kl * jnp.exp(_log_ratio(out, batch))
    mask = _mask(batch)
    b = jnp.asarray(beta).astype(kl.dtype)
    metrics = {"kl": _masked_mean(jax.lax.stop_gradient(kl), mask), "beta": b}
    return b * kl, metrics

  return _with_name(term, "kl_penalty")


def kl_in_reward(scores: Array, logp_old: Array, logp_ref: Array, mask: Array, *, beta=1e-3,
                 estimator: str = "kl", clamp: bool = True):
  """KL folded into the reward (verl ``algorithm.use_kl_in_reward``; not a loss term).

      r_t = score_t − β · m_t · k(log π_old(y_t) − log π_ref(y_t))

  verl ``compute_rewards(token_level_scores, old_log_prob, ref_log_prob, kl_ratio)``
  with the estimator ``algorithm.kl_penalty`` (default ``"kl"`` = k1) and β from
  ``kl_ctrl`` (fixed or ``adaptive_kl``). A sequence score ``[B]`` is first put
  on the last token of ``mask`` (verl's ``token_level_scores`` convention; a
  row with an empty mask then carries no score).

  Args:
    scores: ``[B, T]`` token-level scores or ``[B]`` sequence scores.
    logp_old, logp_ref: ``[B, T]`` log-probs of the sampled tokens under the
      rollout (old) and reference policies.
    mask: ``[B, T]`` response mask (0/1 or bool).
    beta: coefficient ≥ 0 (may be traced).
    estimator: one of ``KL_ESTIMATORS`` (the "+" variants only change gradients,
      which do not matter for rewards).
    clamp: verl's k3 clamps.

  Returns:
    ``(token_rewards [B, T], metrics)`` with ``metrics["kl"]`` = batch mean of the
    per-sequence masked token-mean KL — verl's ``actor/reward_kl_penalty``, the
    value to feed ``adaptive_kl.update(kl=...)`` — and ``metrics["beta"]``.
  """
  _check_value("beta", beta, low=0.0)
  shape = tuple(np.shape(logp_old))
  if len(shape) != 2:
    raise ValueError(f"logp_old must be [B, T], got {shape}")
  if tuple(np.shape(logp_ref)) != shape:
    raise ValueError(f"logp_ref must have shape {shape}, got {tuple(np.shape(logp_ref))}")
  check_mask("mask", mask, shape)
  m = jnp.asarray(mask).astype(jnp.float32)
  scores = jnp.asarray(scores, _float(scores, logp_old, logp_ref))  # float64 stays float64 (x64)
  if scores.shape == shape[:1]:
    idx = jnp.arange(shape[1])
    last = jnp.max(jnp.where(m > 0, idx[None, :], -1), axis=1)
    scores = jnp.where(idx[None, :] == last[:, None], scores[:, None], 0.0)
  elif scores.shape != shape:
    raise ValueError(f"scores must be [B] or [B, T] = {shape}, got {scores.shape}")
  # padding never leaks: -inf log-probs there would give NaN * 0
  kl = jnp.where(m > 0, kl_estimate(jnp.asarray(logp_old), jnp.asarray(logp_ref), estimator, clamp=clamp), 0.0) * m
  b = jnp.asarray(beta).astype(jnp.promote_types(kl.dtype, jnp.float32))  # float64 stays float64
  per_seq = jnp.sum(kl, axis=1) / jnp.maximum(jnp.sum(m, axis=1), 1.0)
  return scores - b * kl, {"kl": jnp.sum(per_seq) / max(shape[0], 1), "beta": b}


# --------------------------------------------------------------------------------------
# RPG
# --------------------------------------------------------------------------------------

_RPG_KL = ("reverse", "forward")
_RPG_EST = ("surrogate", "reinforce")


def rpg(beta=1e-4, kl: str = "reverse", *, normalized: bool = True, estimator: str = "surrogate",
        policy_gradient: bool = True, clip=None, clamp: float = 20.0):
  """RPG — regularized policy gradient (Zhang et al., arXiv:2505.17508; seed 000 L113; code complex-reasoning/RPG).

  Objective maximised: J(θ) = E_{π_θ}[A] − β·D, with D one of

      reverse KL   KL(π_θ‖π_ref)   = Σ π_θ log(π_θ/π_ref)
      reverse UKL  UKL(π_θ‖π_ref)  = Σ π_θ log(π_θ/π_ref) − π_θ + π_ref
      forward KL   KL(π_ref‖π_θ)   = Σ π_ref log(π_ref/π_θ)
      forward UKL  UKL(π_ref‖π_θ)  = Σ π_ref log(π_ref/π_θ) − π_ref + π_θ

  (UKL = the generalized KL of unnormalized measures, ``normalized=False``),
  estimated per token from samples of π_old with w = π_θ/π_old and
  w_ref = π_ref/π_old (log-ratios clamped at ±``clamp``, verl's 20):

  ``estimator="surrogate"`` (fully differentiable, loss value = −J estimate):

      reverse KL   L = −w·A + β·w·(log π_θ − log π_ref)
      reverse UKL  L = −w·A + β·(w·(log π_θ − log π_ref) − w + w_ref)
      forward KL   L = −w·A + β·w_ref·(log π_ref − log π_θ)
      forward UKL  L = −w·A + β·(w_ref·(log π_ref − log π_θ) − w_ref + w)

  ``estimator="reinforce"`` (REINFORCE-style, L = sg(c)·log π_θ):

      reverse KL    c = −w̃·A + β·w̃·(log π_θ − log π_ref + 1)
      reverse UKL   c = −w̃·A + β·w̃·(log π_θ − log π_ref)
      forward KL    c = −w̃·A − β·w_ref
      forward UKL   c = −w̃·A + β·(w̃ − w_ref)

  with w̃ = clip(w, 1 − ε_low, 1 + ε_high) when ``clip=(ε_low, ε_high)`` is
  given, else w. Each unclipped coefficient is exactly ∂L_surrogate/∂log π_θ,
  so the two estimators have the same gradient, whose expectation under π_old
  is the exact gradient of −J. The β terms of the REINFORCE forms are the
  released code's ``compute_policy_loss_reinforce`` kl_terms (``rpg_rf_rkl``:
  w(log w + 1), ``rpg_rf_urkl``: w log w, ``rpg_rf_fkl``: 1, ``rpg_rf_ufkl``:
  1 − w), where π_ref = π_old (w_ref = 1) — pass ``batch.logp_ref =
  batch.logp_old`` to reproduce that setting; our generalisation to a
  separate π_ref and the surrogate forms are our own derivation. Differences
  from the released code: with ``clip`` the log-ratio term uses the unclipped
  log π_θ/π_ref (the code takes log of the clipped w); its ±10 clamps of the
  kl terms and its "clip_ppo" variants are not reproduced. The released
  scripts use β = 1e-4 and clip (0.2, 0.28) or (0.1, 0.1).
  ``policy_gradient=False`` drops the A part, leaving only the regulariser.

  Args:
    beta: KL coefficient ≥ 0 (may be traced).
    kl: ``"reverse"`` or ``"forward"``.
    normalized: KL (True) or UKL (False).
    estimator: ``"surrogate"`` or ``"reinforce"``.
    policy_gradient: include the importance-weighted A term.
    clip: ``None`` or ``(eps_low, eps_high)`` ≥ 0, REINFORCE only.
    clamp: bound on |log w| and |log w_ref|.

  Reads ``out.logp``, ``batch.logp_proximal`` (π_old), ``batch.logp_ref``,
  ``batch.advantages``. Metrics: ``kl`` (masked mean of the per-token
  divergence estimate, the surrogate's β-term / β), ``ratio_mean``,
  ``clip_frac`` (with ``clip``), ``beta``.
  """
  _check_value("beta", beta, low=0.0)
  _check_choice("kl", kl, _RPG_KL)
  _check_choice("estimator", estimator, _RPG_EST)
  if clamp is None or not clamp > 0:
    raise ValueError(f"clamp must be a positive number, got {clamp!r}")
  if clip is not None:
    if estimator != "reinforce":
      raise ValueError("clip is only used by estimator='reinforce'")
    if not (isinstance(clip, (tuple, list)) and len(clip) == 2):
      raise ValueError(f"clip must be None or a pair (eps_low, eps_high), got {clip!r}")
    _check_value("clip[0] (eps_low)", clip[0], low=0.0, high=1.0)
    _check_value("clip[1] (eps_high)", clip[1], low=0.0)

  def term(out: PolicyOutputs, batch: TrainBatch):
    shape = _check_batch(out, batch)
    ref = _require("batch.logp_ref", batch.logp_ref, shape)
    adv = _require("batch.advantages", batch.advantages, shape)
    logp = out.logp.astype(_float(out.logp))  # float64 stays float64 (x64)
    log_w = _log_ratio(out, batch, clamp)
    old = _proximal(batch, shape, "rpg")
    log_w_ref = jnp.clip(ref - old, -clamp, clamp)
    w, w_ref = jnp.exp(log_w), jnp.exp(log_w_ref)
    b = jnp.asarray(beta).astype(logp.dtype)
    log_q = logp - ref  # log π_θ − log π_ref
    if kl == "reverse":
      div = w * log_q if normalized else w * log_q - w + w_ref
    else:
      div = -w_ref * log_q if normalized else -w_ref * log_q - w_ref + w
    mask = _mask(batch)
    metrics = {"kl": _masked_mean(jax.lax.stop_gradient(div), mask),
               "ratio_mean": _masked_mean(jax.lax.stop_gradient(w), mask), "beta": b}
    if estimator == "surrogate":
      pg = -w * adv if policy_gradient else jnp.zeros_like(w)
      return pg + b * div, metrics
    wt = w
    if clip is not None:
      lo = 1.0 - jnp.asarray(clip[0]).astype(logp.dtype)
      hi = 1.0 + jnp.asarray(clip[1]).astype(logp.dtype)
      wt = jnp.clip(w, lo, hi)
      metrics["clip_frac"] = _masked_mean(((w < lo) | (w > hi)).astype(jnp.float32), mask)
    if kl == "reverse":
      coef = wt * (log_q + 1.0) if normalized else wt * log_q
    else:
      coef = -w_ref if normalized else wt - w_ref
    pg = -wt * adv if policy_gradient else jnp.zeros_like(w)
    return jax.lax.stop_gradient(pg + b * coef) * logp, metrics

  return _with_name(term, "rpg")


def _kl_in_reward_stage(beta=1e-3, *, estimator: str = "kl", clamp: bool = True):
  """KL in the reward as a shaping stage (phase ``"forward"``: after the proximal and reference forwards).

  ``r_t = score_t − β·k(log π_old − log π_ref)·m_t`` on the completion tokens of valid rows, where ``score``
  is the step's token rewards if a stage wrote some, else the sequence reward on the last token (verl
  ``apply_kl_penalty``, applied after the reference forward and before the advantage).
  """
  from rljax.stages import Shaping  # pylint: disable=import-outside-toplevel
  kl_in_reward(jnp.zeros((1,)), jnp.zeros((1, 1)), jnp.zeros((1, 1)), jnp.ones((1, 1)), beta=beta,
               estimator=estimator, clamp=clamp)  # validates the arguments now, not mid-run

  def fn(data):
    scores = data.token_rewards if data.token_rewards is not None else data.rewards
    mask = data.completion_mask & data.valid[:, None]
    rewards, metrics = kl_in_reward(scores, data.require("logp_old", "kl_in_reward"),
                                    data.require("logp_ref", "kl_in_reward"), mask, beta=beta,
                                    estimator=estimator, clamp=clamp)
    rewards = np.asarray(rewards)
    return rewards.astype(np.result_type(np.float32, rewards.dtype)), metrics  # float64 stays (x64)

  return Shaping(fn, name="kl_in_reward", phase="forward", needs={"logp_old", "logp_ref"})


_kl_in_reward_stage.slot = "shaping"


def _technique_rows():
  from rljax._technique import Fidelity, Technique
  from rljax.objectives import _peer_conventions as PC
  from rljax.objectives import _stages as S
  from rljax.stages import loss_term_factory
  return (
      Technique("kl_penalty", "kl", kl_penalty,
                "β·k(Δ), Δ=logπθ−logπref; k1=Δ, abs=|Δ|, k2=½Δ², k3=e^{−Δ}+Δ−1; '+' = value of k, grad of k2",
                "verl kl_penalty (kl_loss_type); TRL beta (k3); Schulman 2020",
                stage=loss_term_factory(kl_penalty, hparams={"beta": "kl_beta"}, needs={"logp_ref"}),
                fidelity=Fidelity("peer", "verl v0.7.0 core_algos.kl_penalty / kl_penalty_forward; TRL v1.9.0 "
                                  "GRPOTrainer beta (k3, use_bias_correction_kl)",
                                  read="volcengine/verl@v0.7.0 (f9c855f7) verl/trainer/ppo/core_algos.py:1588-1649 "
                                       "kl_penalty / kl_penalty_forward, verl/workers/actor/dp_actor.py:527-536 "
                                       "(use_kl_loss), actor.yaml kl_loss_coef / kl_loss_type; huggingface/trl@v1.9.0 "
                                       "trl/trainer/grpo_trainer.py:3068-3076 and :3120-3121 (k3 per token, "
                                       "× coef_1 with use_bias_correction_kl, + beta·kl); read whole (#51): the verl "
                                       "0.9.1 PyPI wheel core_algos.py:2188-2251 (kl_penalty "
                                       "strips a '+' before kl_penalty_forward; v0.7.0 passes 'k3+' on and raises "
                                       "NotImplementedError), workers/utils/losses.py:132-142 (use_kl_loss: "
                                       "kl_loss_coef·agg_loss(kld, loss_agg_mode, global counts)), actor.yaml:103-116 "
                                       "(use_kl_loss false, kl_loss_coef 0.001, kl_loss_type low_var_kl); sweep s1a "
                                       "(#51, peer conventions): " + PC.READ_VERL_T + "; " + PC.READ_TRL_T + "; "
                                       + PC.READ_DENOM + "; v0.7.0 dp_actor.py:527-536 (the KL's own agg_loss on "
                                       "the micro-batch, no global counts). Twelfth draw (#51 item 4, seed "
                                       "20261217): the TRL 1.9.0 PyPI wheel trl/trainer/grpo_trainer.py:3037, 3054, "
                                       "3066 (coef_1 = exp(log π_θ − log π_old), log π_old the detached current "
                                       "log-probs when not stored; no clamp), grpo_config.py:834-855 "
                                       "(sync_ref_model False, ref_model_mixup_alpha 0.6, ref_model_sync_steps 512) "
                                       "and grpo_trainer.py:1145-1161 (SyncRefModelCallback when sync_ref_model; "
                                       "refused with beta 0.0 or a PEFT model); ours: bias_correction's ratio is "
                                       "objectives/_kl.py _log_ratio, log r clamped to ±20 before exp. The record "
                                       "listed neither the clamp nor TRL's reference sync",
                                  defaults=(("beta", "0.001", "verl kl_loss_coef 0.001 (use_kl_loss False); "
                                             "TRL beta 0.0"),
                                            ("estimator", "'low_var_kl' (k3)", "verl kl_loss_type 'low_var_kl'; "
                                             "TRL k3 only"),
                                            ("clamp", "True (k3: −Δ to ±20, value to ±10)", "verl: same; TRL: none"),
                                            ("bias_correction", "False", "TRL use_bias_correction_kl False"),
                                            ("bias_correction ratio clamp", "log r clamped to ±20 before exp",
                                             "TRL coef_1 = exp(log r), no clamp"),
                                            ("reference-model sync", "none (π_ref is the initial policy, fixed)",
                                             "verl: none; TRL sync_ref_model False (when on, TR-DPO: π_ref ← "
                                             "0.6·π_θ + 0.4·π_ref every 512 steps)"),
                                            (PC.T_NAME, PC.T_OURS, PC.T_VERL + "; " + PC.T_TRL),
                                            (PC.DENOM_NAME, "chain's: token_mean's step-batch token count on every "
                                             "micro-batch", "verl: the KL's own agg_loss(loss_agg_mode): v0.7.0 "
                                             "each micro-batch's own count × 1/gradient_accumulation, 0.9.1 the "
                                             "mini-batch's global counts; TRL: the policy term's loss_type "
                                             "normaliser")),
                                  placement="theirs: verl adds kl_loss_coef·agg(kld) to the actor loss on each "
                                            "micro-batch (log π_θ vs the precomputed ref log-probs, the actor's "
                                            "loss_agg_mode); TRL adds beta·kl to the per-token loss before its "
                                            "aggregation; ours: a loss term on each micro-batch aggregated by "
                                            "chain with the other terms (the TRL form)",
                                  deviations=("with bias_correction the ratio is the token ratio against "
                                              "batch.logp_proximal; TRL multiplies by coef_1, the sequence ratio "
                                              "under importance_sampling_level='sequence'",
                                              "aggregated with the policy term by chain (TRL's form); verl "
                                              "aggregates the KL separately with the same loss_agg_mode (equal "
                                              "for a linear aggregation with the same denominator: verl 0.9.1's "
                                              "global counts; verl v0.7.0's default legacy dp_actor divides each "
                                              "micro-batch by its own token count × 1/gradient_accumulation, "
                                              "equal to chain's token_mean only when the micro-batches hold the "
                                              "same number of loss tokens; TRL's KL follows its loss_type, see "
                                              "ppo_clip's record)",
                                              PC.T_DEVIATION + " (both peers' log π_θ and log π_ref are at T)",
                                              "the '+' estimators (value of k, gradient of k2) are verl 0.9.1's; in "
                                              "the cited v0.7.0 kl_penalty('k3+') raises NotImplementedError "
                                              "(kl_penalty_forward gets the name with its '+')",
                                              "with bias_correction the ratio is exp(log r) with log r clamped to "
                                              "±20 (_log_ratio); TRL's coef_1 is not clamped: equal while "
                                              "|log r| ≤ 20; past it ours weighs k by e^{±20} and passes no gradient "
                                              "through the ratio, TRL by the full ratio",
                                              "TRL's sync_ref_model (off by default: the reference policy moved "
                                              "towards π_θ every ref_model_sync_steps) is not offered; π_ref stays "
                                              "the initial policy (verl's only form)"))),
      Technique("kl_in_reward", "kl", kl_in_reward, "r_t = score_t − β·k(logπold − logπref)·m_t",
                "verl algorithm.use_kl_in_reward / compute_rewards",
                stage=_kl_in_reward_stage,
                fidelity=Fidelity("peer", "verl v0.7.0 ray_trainer.apply_kl_penalty + core_algos.kl_penalty "
                                  "(use_kl_in_reward)",
                                  read="volcengine/verl@v0.7.0 (f9c855f7) verl/trainer/ppo/ray_trainer.py:126-165 "
                                       "apply_kl_penalty (kld = kl_penalty(old, ref) · mask; rewards = scores − "
                                       "β·kld; current_kl = batch mean of the per-sequence masked means), called "
                                       "at :1504; core_algos.py:1588-1649; ppo_trainer.yaml:87-102 "
                                       "(use_kl_in_reward False, kl_penalty 'kl', kl_ctrl.kl_coef 0.001); read whole "
                                       "(#51): the verl 0.9.1 PyPI wheel ray_trainer.py:78-117 apply_kl_penalty (the "
                                       "same), called at :1638-1644 after the values and before the rollout correction "
                                       "and the advantage, core_algos.py:2188-2251; sweep s1a (#51, peer "
                                       "conventions): the default v1 trainer (ppo_trainer.yaml:232 use_v1 true) "
                                       "reaches the same apply_kl_penalty (trainer/ppo/v1/trainer_base.py:64, "
                                       "126-127 the kl_ctrl, :1743-1760 on the fetched old_log_probs and "
                                       "ref_log_prob, before the rollout correction and the advantage); the "
                                       "log-probs it is fed: " + PC.READ_VERL_T + "; in bypass mode old_log_probs "
                                       "is the rollout's (trainer_base.py:1642-1647, ray_trainer.py:1575-1583)",
                                  defaults=(("beta", "0.001", "kl_ctrl.kl_coef 0.001 (fixed controller)"),
                                            ("estimator", "'kl' (k1)", "algorithm.kl_penalty 'kl'"),
                                            ("clamp", "True (k3 only)", "k3 clamps always on"),
                                            (PC.T_NAME, PC.T_OURS, PC.T_VERL + " (old_log_probs, ref_log_prob)")),
                                  placement="theirs: once per step in the trainer, on the whole batch after the "
                                            "old and ref log-probs and before the advantage; ours: a shaping "
                                            "stage (phase 'forward') on the whole batch before the advantage, "
                                            "from logp_old and logp_ref",
                                  deviations=("a [B] sequence score is first put on the last mask token "
                                              "(verl's token_level_scores are already [B, T])",
                                              "metrics kl of an empty row counts 0 (divides by max(n, 1)); "
                                              "verl's masked_mean divides by n + 1e-8",
                                              "a '+' estimator ('k3+') gives the base estimator's value here and "
                                              "in verl 0.9.1; the cited v0.7.0 raises NotImplementedError on it",
                                              PC.T_DEVIATION + " (verl's old and ref log-probs are at T)",
                                              "in verl's bypass mode (rollout_correction.bypass_mode) old_log_probs "
                                              "is the rollout's vLLM processed_logprobs, so its KL is "
                                              "log π_rollout − log π_ref (tempered, truncated); ours always reads "
                                              "logp_old, the trainer's own untempered proximal forward"))),
      Technique("rpg", "kl", rpg,
                "L = −w·A + β·D̂, D̂ ∈ {KL, UKL} × {reverse, forward}, surrogate or REINFORCE sg(c)·logπθ",
                "000_3e503271be254a43.txt L113; arXiv:2505.17508; complex-reasoning/RPG code",
                stage=loss_term_factory(rpg, hparams={"beta": "kl_beta"}, role="policy",
                                        needs={"logp_ref", "logp_old"}),
                fidelity=Fidelity("authors_code", "github.com/complex-reasoning/RPG: verl/trainer/ppo/core_algos.py "
                                  "(compute_policy_loss_reinforce, kl_penalty rpg_*)",
                                  "π_ref ≠ π_old generalised; with clip the log term uses unclipped log π/π_ref; "
                                  "the code's ±10 clamps and clip_ppo variants are not reproduced",
                                  read="complex-reasoning/RPG@ec8e30bd (2026-06-14) verl/trainer/ppo/core_algos.py:"
                                       "495-580 compute_policy_loss_reinforce (rf kl_terms; imported by verl/workers/"
                                       "actor/dp_actor.py:26 but not called at this commit) and :629-710 kl_penalty "
                                       "rpg_* forms (w = exp(log π − ref); values clamped ±10 except rpg_fkl = "
                                       "−log w and rpg_rf_fkl = −1, unclamped; also rpg_js and rpg_ujs); "
                                       "dp_actor.py:336-366 "
                                       "(dual-clip PPO + kl_loss_coef·agg(kl_penalty(log π, ref, kl_loss_type)) "
                                       "with use_kl_loss); recipe/rpg/src/rpg_ray_trainer.py:185-199 (use_kl_in_reward: "
                                       "apply_kl_penalty with kl_loss_type on the old log-probs); recipe/rpg/7b/"
                                       "run_rpg_7b_rkl1e-4.sh (use_kl_loss, rpg_rkl, 1e-4, clip 0.2/0.28, c 10, "
                                       "adv_estimator rpg, use_iterative_ref_model True, DAPO group filter and "
                                       "overlong buffer) and run_rpg_7b_rkl1e-4_rf.sh (use_kl_in_reward, "
                                       "rpg_rf_rkl); dp_actor.py:315-318 and rpg_ray_trainer.py:140-150, 270-280 "
                                       "(use_iterative_ref_model: ref_log_prob = old_log_probs, no reference "
                                       "forward); verl/trainer/ppo/ray_trainer.py apply_kl_penalty (β = "
                                       "algorithm.kl_ctrl.kl_coef) and :205-211, core_algos.py "
                                       "compute_rpg_outcome_advantage (r − mean_g, no std); every recipe/rpg/7b "
                                       "script's settings (the *_rf_clip_ppo_* scripts: use_kl_in_reward True, "
                                       "kl_coef 0.0; run_rpg_7b_schedulefree.sh: no KL). Error-class sweep (#51, "
                                       "s2a; launch switches, the data-parallel dispatch): run_rpg_7b_rkl1e-4.sh:"
                                       "33-36 (train_prompt_bsz 512, train_prompt_mini_bsz 32, n_resp_per_prompt "
                                       "16), :53-54 (temperature 1.0, top_p 1.0), :58 (use_dynamic_bsz True); "
                                       "verl/workers/fsdp_workers.py:466-467 (update_actor Dispatch."
                                       "DP_COMPUTE_PROTO), dp_actor.py:281 (16 mini-batches), :294 (token-budget "
                                       "micro-batches), :370 (× rows / mini-batch rows): with the reference = the "
                                       "step's old policy, w = 1 on the first mini-batch (the KL value 0, its "
                                       "gradient per token ∇log π, zero only in expectation) and w moves from the "
                                       "second; the record gave neither "
                                       "the mini-batch count nor the per-micro-batch token-mean. Per-row review b "
                                       "(#51): verl/trainer/ppo/ray_trainer.py:147-172 apply_kl_penalty (kld = "
                                       "kl_penalty(old_log_probs, ref_log_prob) × response_mask; "
                                       "token_level_rewards = scores − kl_coef·kld) with rpg_ray_trainer.py:"
                                       "130-150 (use_kl_in_reward: ref_log_prob = old_log_probs) and "
                                       "core_algos.py:153-192 (scores = Σ token_level_rewards): in "
                                       "run_rpg_7b_rkl1e-4_rf.sh (kl_coef 1e-4, rpg_rf_rkl) kld = w(log w + 1) "
                                       "= 1 on every response token, a reward of R − 1e-4·|y|; ours: the RL "
                                       "loop's logp_ref is the frozen reference's forward (rljax/train/"
                                       "_inputs.py:5-6, the policy at the start of RL) on every step, and no "
                                       "setting makes it the step's old policy; the record's 'equal with "
                                       "logp_ref = logp_old' and 'rl.num_minibatches=16 with logp_ref = "
                                       "logp_old is theirs' named no way to get it. Seventeenth draw (#51 item 4, "
                                       "seed 20261222), the paper (cited as the source, not read before): RPG.pdf "
                                       "at ec8e30bd (the ICLR 2026 version, 39 pages): Sec. 3.3 p. 6 and "
                                       "Algorithm 1 p. 24 (the RPG loss: a dual clip of w·Â with the KL inside "
                                       "the clipped advantage, RKL Â = (R − b) − β(log w + 1), c > 1); Sec. 4.1 "
                                       "p. 8 (RPG-Style Clip for RPG-REINFORCE); Sec. 5 p. 8 (Qwen3-4B and "
                                       "Qwen2.5-7B-Instruct, DAPO-Math-17k 13.9k English samples), p. 9 (Table 3: "
                                       "8K context, 'Last' = the 400th step; iterative reference updates 'every K "
                                       "optimizer steps, or when a moving average of token-level KL exceeds a "
                                       "target κ'), p. 10 (RPG-Style Clip enabled for the REINFORCE-style runs); "
                                       "Appendix H pp. 25-26 (AdamW lr 1e-6, weight decay 0.1, gradient clip 1.0, "
                                       "400 steps with 10 warm-up steps, global batch 512, 16 responses at "
                                       "temperature 1.0, 'The per-GPU mini-batch size is 32', 8 H100, maximum "
                                       "length 4,096 for 2K context and 8,192 for 4K context, β 1e-4, (ε1, ε2) = "
                                       "(0.2, 0.28) for RPG and RPG-REINFORCE); Tables 5 / 6 (4K / 2K context); "
                                       "against the stored scripts: MODEL_PATH Qwen/Qwen2.5-Math-7B (CTX2K) or "
                                       "Qwen/Qwen2.5-7B-Instruct (*_7binstruct), response 2048: no Qwen3-4B, 4K "
                                       "or 8K script; optim.lr 1e-6 (use_kl_loss scripts) and 5e-7 (every rf "
                                       "script); verl's ppo_mini_batch_size 32 is prompts over all GPUs, "
                                       "fsdp_workers.py:117-118 (32 × 16 / 8 = 64 rows per GPU)",
                                  defaults=(("beta", "1e-4", "kl_loss_coef 1e-4 (the use_kl_loss scripts); the rf "
                                             "scripts' reward coefficient algorithm.kl_ctrl.kl_coef: 1e-4 in "
                                             "run_rpg_7b_rkl1e-4_rf.sh, 0.0 in every *_rf_clip_ppo_* script (no KL "
                                             "there); 0 in "
                                             "run_rpg_7b_schedulefree.sh"),
                                            ("kl, normalized", "'reverse', True", "one script per divergence: "
                                             "rpg_rkl / fkl / ufkl / urkl (function default rpg_rf_ufkl)"),
                                            ("estimator", "'surrogate'", "use_kl_loss runs: the differentiable "
                                             "kl_penalty forms (our surrogate with π_ref = π_old)"),
                                            ("policy_gradient", "True (−w·A in this term)", "the PG part is verl's "
                                             "dual-clip PPO (clip 0.2/0.28, clip_ratio_c 10), a separate loss"),
                                            ("clip", "None", "(0.2, 0.28) in compute_policy_loss_reinforce"),
                                            ("clamp", "±20 on log w, log w_ref", "kl values clamped to ±10, except "
                                             "rpg_fkl (−log w) and rpg_rf_fkl (−1): unclamped"),
                                            ("advantage (not this term's)", "the recipe's advantage stage",
                                             "adv_estimator rpg: r − mean_g, no std (a singleton keeps r)"),
                                            ("aggregation", "chain's (token_mean): the update batch's token count",
                                             "token-mean per GPU per token-budget micro-batch (use_dynamic_bsz) × "
                                             "its rows / the GPU's mini-batch rows, the GPUs' gradients averaged"),
                                            ("mini-batches per step", "rl.num_minibatches × rl.updates_per_batch; "
                                             "rl.num_minibatches=16, rl.updates_per_batch=1 gives theirs",
                                             "train_prompt_bsz 512 ÷ train_prompt_mini_bsz 32 = 16 optimizer steps "
                                             "(ppo_epochs 1), the reference (= old log-probs) fixed before the "
                                             "first"),
                                            ("sampler temperature / top_p", "rl.temperature 1.0, rl.top_p 1.0 "
                                             "(untempered)", "1.0 / 1.0: equal"),
                                            ("reference", "batch.logp_ref: in the RL loop always the frozen reference "
                                             "(the policy at the start of RL); no setting makes it the step's old "
                                             "policy",
                                             "use_iterative_ref_model True (the scripts; rpg_trainer.yaml False): "
                                             "the reference is the step's old policy, ref_log_prob = "
                                             "old_log_probs"),
                                            ("group filter / overlong (not this term's)", "compose zero_variance, "
                                             "overlong_penalty", "enable_filter_groups True (acc, up to 20 "
                                             "generation batches of 3 × 512 prompts), overlong buffer 512 of 2048, "
                                             "16 responses per prompt (run_rpg_7b_rkl1e-4.sh)"),
                                            ("models / context (their runs)", "the recipe's",
                                             "the paper: Qwen3-4B (2K / 4K / 8K context; Table 3's headline 8K) and "
                                             "Qwen2.5-7B-Instruct (Sec. 5 p. 8); the stored scripts: "
                                             "Qwen2.5-Math-7B or Qwen2.5-7B-Instruct at max_response_length 2048 "
                                             "only"),
                                            ("learning rate (their runs)", "the recipe's",
                                             "the paper 1e-6 (Appendix H); the scripts 1e-6 (use_kl_loss) and 5e-7 "
                                             "(rf, rf_clip_ppo)")),
                                  placement="theirs: use_kl_loss runs add kl_loss_coef·agg(kl_penalty) to the "
                                            "PPO actor loss on each micro-batch (w from log π_θ and the reference "
                                            "log-probs); rf runs fold the rpg_rf_* value into the reward once per "
                                            "step (old log-probs vs reference) before the rpg advantage; ours: one "
                                            "loss term on each micro-batch with the A part and the KL part, w = "
                                            "π_θ/π_old, w_ref = π_ref/π_old",
                                  deviations=("π_ref ≠ π_old generalised (w_ref); the code's forms assume the "
                                              "samples' policy is the reference (w = π_θ/π_ref): equal with "
                                              "logp_ref = logp_old, which is what their scripts run "
                                              "(use_iterative_ref_model True); no RL-loop setting gives that "
                                              "(logp_ref is the frozen reference's forward): a Python loss term "
                                              "(rljax.stages.LossTerm with needs={'logp_old'}) calling "
                                              "rpg(...)(out, batch.replace(logp_ref=batch.logp_old)) does",
                                              "the scripts' PG loss is dual-clip PPO: ppo_clip(0.2, 0.28, "
                                              "dual_clip=10.0) + rpg(policy_gradient=False) is their use_kl_loss "
                                              "form",
                                              "the rf variants as the stored code runs them (KL in the reward, "
                                              "compute_policy_loss_reinforce unused) and the clip_ppo variants "
                                              "are not reproduced; estimator='reinforce' follows the unused "
                                              "function's non-clip_ppo branch",
                                              "with clip the log term uses the unclipped log π/π_ref (the code "
                                              "takes log of the clipped w); the code's ±10 value clamps are not "
                                              "applied",
                                              "the rf_clip_ppo scripts (most of recipe/rpg/7b) set use_kl_in_reward "
                                              "True with algorithm.kl_ctrl.kl_coef 0.0, and with "
                                              "use_iterative_ref_model the rf values of old vs old are constants "
                                              "(rkl 1, fkl −1, ufkl and urkl 0): those runs are dual-clip PPO on "
                                              "the rpg advantage, ppo_clip(...) alone, no KL",
                                              "kl_penalty's rpg_js (0.5·(w log w + log w)) and rpg_ujs (0.5·(w log "
                                              "w − log w), not its comment's formula) are not built; no script "
                                              "selects them",
                                              "their scripts train each step as 16 mini-batches (512 ÷ 32 prompts) "
                                              "against the step's old log-probs as the reference: w = 1 and the KL "
                                              "value is 0 on the first, w ≠ 1 from the second on; "
                                              "rl.num_minibatches=16 with logp_ref = logp_old (the Python term "
                                              "above) is theirs",
                                              "run_rpg_7b_rkl1e-4_rf.sh, the one rf script with a KL coefficient "
                                              "(use_kl_in_reward, kl_coef 1e-4, rpg_rf_rkl): with the reference = "
                                              "the old log-probs its per-token value w(log w + 1) is 1, so the run "
                                              "is dual-clip PPO on the rpg advantage of R − 1e-4·|y| (a length "
                                              "penalty in the reward); no rljax shaping subtracts a constant per "
                                              "token (overlong_penalty and length_penalty have other forms)",
                                              "their token-mean is per token-budget micro-batch on each GPU "
                                              "(weighted by its row share); ours one denominator for the whole "
                                              "update batch: equal when every micro-batch's mean token count per "
                                              "row is the same",
                                              "the paper's RPG loss (Algorithm 1, RPG.pdf p. 24; Sec. 3.3 p. 6) "
                                              "dual-clips w·Â with the KL inside Â (RKL: Â = (R − b) − β(log w + "
                                              "1)), so where w leaves [1 − ε1, 1 + ε2] the KL's gradient is clipped "
                                              "with the PG's; the stored scripts' code (and ours) adds the KL as a "
                                              "separate unclipped term: at A = 1, w = 1.5, (0.2, 0.28) the paper's "
                                              "∂L/∂log π is 1.28·β, the code's β·w(log w + 1) = 2.108·β; not built "
                                              "here",
                                              "the paper updates the reference 'every K optimizer steps, or when a "
                                              "moving average of token-level KL exceeds a target κ' (p. 9); the "
                                              "stored code resets it to the old policy at every step (K = 16 "
                                              "mini-batches), with no KL trigger; the RL loop's reference here stays the policy at the "
                                              "start of RL (rljax/train/_inputs.py:5-6)"))),
  )


TECHNIQUES = _technique_rows()
