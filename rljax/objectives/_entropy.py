"""Entropy terms: bonus, entropy-ratio clipping, Clip-Cov / KL-Cov, top-entropy mask.

Two kinds of objects live here:

* loss terms (``entropy_bonus``, ``clip_cov``, ``kl_cov``) —
  ``term(out, batch) -> (per_token_loss [B, T], metrics)``;
* term *wrappers* (``erc``, ``top_entropy_mask``, ``advantage_sign_weighting``)
  that take another term and transform its per-token loss, so they compose::

      top_entropy_mask(erc(ppo_clip(...), low=0.95, high=1.05), rho=0.2)

  A wrapper keeps the inner term's metric prefix (``name``) and adds its own
  metrics under ``"<wrapper>/..."``.

Quantities that select tokens (covariances, entropy quantiles, entropy ratios)
are computed over the tokens of the batch the term sees. ``clip_cov``,
``kl_cov`` and ``top_entropy_mask`` also expose ``batch_statistics`` (the
selection made on the whole batch, see ``rljax.objectives._statistics``), so
that ``rljax.train.make_train_step`` gives every micro-batch the full batch's
selection; peers compute them over their local batch (TRL gathers the
entropies across processes for ``top_entropy_quantile``).

Size: one family (entropy terms and wrappers); the catalog rows with their fidelity records are the last ~200 lines.
"""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp

from rljax.objectives._kl import (_check_batch, _check_choice, _check_value, _float, _log_ratio, _mask, _masked_mean,
                                  _require, _with_name)
from rljax.objectives._statistics import batch_statistics, call_with_statistics, forward_statistics, with_statistics
from rljax.types import PolicyOutputs, TrainBatch, is_concrete

Array = jax.Array

__all__ = ["entropy_bonus", "erc", "clip_cov", "kl_cov", "top_entropy_mask", "advantage_sign_weighting",
           "masked_quantile"]


def _entropy_metric(out: PolicyOutputs, mask: Array) -> dict:
  if out.entropy is None:
    return {}
  return {"entropy": _masked_mean(jax.lax.stop_gradient(out.entropy.astype(_float(out.entropy))), mask)}


def _term_name(term) -> str:
  name = getattr(term, "name", None) or getattr(term, "__name__", None) or "term"
  return "term" if name == "<lambda>" else name


def _call_inner(term, out, batch, shape, statistics=None):
  result = call_with_statistics(term, out, batch, statistics)
  if not (isinstance(result, tuple) and len(result) == 2):
    raise ValueError("the wrapped term must return (per_token_loss [B, T], metrics dict)")
  loss, metrics = result
  if tuple(loss.shape) != tuple(shape):
    raise ValueError(f"the wrapped term returned per-token loss of shape {tuple(loss.shape)}, expected {shape}")
  return loss, dict(metrics)


def masked_quantile(x: Array, mask: Array, q) -> Array:
  """Quantile ``q`` ∈ [0, 1] of ``x`` over the entries where ``mask`` is set.

  Linear interpolation between order statistics (``torch.quantile`` /
  ``numpy.quantile`` default): with the n selected values sorted s_0 ≤ … ≤ s_{n−1},
  pos = q·(n−1), result = s_⌊pos⌋ + (pos − ⌊pos⌋)·(s_⌈pos⌉ − s_⌊pos⌋).
  Returns +inf when nothing is selected. Works under ``jit`` (n is traced).
  """
  x = jax.lax.stop_gradient(jnp.ravel(x).astype(jnp.float32))
  m = jnp.ravel(mask).astype(bool)
  s = jnp.sort(jnp.where(m, x, jnp.inf))
  if s.shape[0] == 0:  # an empty batch
    return jnp.asarray(jnp.inf, jnp.float32)
  n = jnp.sum(m.astype(jnp.int32))
  pos = jnp.asarray(q, jnp.float32) * jnp.maximum(n - 1, 0).astype(jnp.float32)
  lo = jnp.clip(jnp.floor(pos).astype(jnp.int32), 0, s.shape[0] - 1)
  hi = jnp.clip(jnp.minimum(lo + 1, n - 1), 0, s.shape[0] - 1)
  s_fin = jnp.where(jnp.isfinite(s), s, 0.0)
  value = s_fin[lo] + (pos - lo.astype(jnp.float32)) * (s_fin[hi] - s_fin[lo])
  return jnp.where(n > 0, value, jnp.inf)


# --------------------------------------------------------------------------------------
# entropy bonus
# --------------------------------------------------------------------------------------


def entropy_bonus(coef=1e-3):
  """Entropy bonus (verl ``entropy_coeff``, default 0; TRL ``entropy_coef``).

      L_t = −c · H_t,   H_t = −Σ_v π_θ(v|s_t) log π_θ(v|s_t)   (``out.entropy``)

  aggregated with the chain's mode, so ``loss −= c·agg(H)`` as in verl
  (``policy_loss − entropy_coeff · entropy``). ∂L/∂H_t = −c.

  Args:
    coef: c ≥ 0 (may be traced, e.g. from a controller).

  Reads ``out.entropy`` [B, T]. Metrics: ``entropy`` (masked token-mean), ``coef``.
  """
  _check_value("coef", coef, low=0.0)

  def term(out: PolicyOutputs, batch: TrainBatch):
    shape = _check_batch(out, batch)
    ent = _require("out.entropy", out.entropy, shape)
    c = jnp.asarray(coef).astype(jnp.promote_types(ent.dtype, jnp.float32))  # float64 stays float64
    return -c * ent, {**_entropy_metric(out, _mask(batch)), "coef": c}

  return _with_name(term, "entropy_bonus")


# --------------------------------------------------------------------------------------
# ERC
# --------------------------------------------------------------------------------------


def erc(term, *, low=0.95, high=1.05, eps: float = 1e-8):
  """ERC — entropy-ratio clipping (Su et al., arXiv:2512.05591; seed 000 L45; code Kwai-Klear/ERC).

      ρ_t = (H(π_θ(·|s_t)) + δ) / (H(π_old(·|s_t)) + δ)
      L_t = l_t                 if low < ρ_t < high
            sg(l_t)             otherwise  (same value, zero gradient)

  where ``l_t`` is the wrapped term's per-token loss (the paper applies it to
  DAPO's / GPPO's clipped PG loss). The detach rule, the strict inequalities
  and δ = 1e-8 follow the released loss (github.com/Kwai-Klear/ERC,
  ``verl/trainer/ppo/core_algos.py::compute_policy_loss_grpo_erc``, bounds
  ``entropy_mask_low`` / ``entropy_mask_high``); the defaults 0.95 / 1.05 are
  the released recipes' (``recipe/dapo/*_erc_1_05.sh``). There the wrapped
  loss is verl's dual-clip PPO with optional TIS (``grpo_erc``) or GPPO's
  gradient-preserving clip (``gppo_erc``; no GPPO term is offered here); here
  any term. Their recipes also add ``0.1 ×`` the token-mean NLL of the rows
  whose reward is exactly 1 (``postive_loss_coeff``; not built).
  ρ_t = 1 when both entropies are 0.

  Args:
    term: the term to wrap (e.g. ``ppo_clip(...)``).
    low, high: band 0 ≤ low ≤ 1 ≤ high (concrete or traced).
    eps: δ ≥ 0.

  Reads ``out.entropy`` and ``batch.entropy_old`` [B, T]. Metrics (added to
  the inner term's): ``erc/entropy_ratio`` (masked mean ρ),
  ``erc/frac_detached``, ``erc/frac_low``, ``erc/frac_high`` (the released
  code's ``entropy_frac`` is 1 − ``frac_detached``).
  """
  if not callable(term):
    raise ValueError(f"term must be a callable objective term, got {term!r}")
  _check_value("low", low, low=0.0, high=1.0)
  _check_value("high", high, low=1.0)
  _check_value("eps", eps, low=0.0)

  def wrapped(out: PolicyOutputs, batch: TrainBatch, statistics=None):
    shape = _check_batch(out, batch)
    h = jax.lax.stop_gradient(_require("out.entropy", out.entropy, shape))
    h_old = _require("batch.entropy_old", batch.entropy_old, shape)
    loss, metrics = _call_inner(term, out, batch, shape, statistics)
    dt = jnp.promote_types(jnp.result_type(h, h_old), jnp.float32)  # float64 stays float64
    d = jnp.asarray(eps).astype(dt)
    num, den = h.astype(dt) + d, h_old.astype(dt) + d
    safe_den = jnp.where(den > 0, den, 1.0)
    ratio = jnp.where(den > 0, num / safe_den, jnp.where(num > 0, jnp.inf, 1.0))
    below = ratio <= jnp.asarray(low).astype(dt)
    above = ratio >= jnp.asarray(high).astype(dt)
    out_of_band = below | above
    loss = jnp.where(out_of_band, jax.lax.stop_gradient(loss), loss)
    mask = _mask(batch)
    finite = jnp.isfinite(ratio).astype(jnp.float32) * mask
    metrics.update({
        "erc/entropy_ratio": _masked_mean(jnp.where(jnp.isfinite(ratio), ratio, 0.0), finite),
        "erc/frac_detached": _masked_mean(out_of_band.astype(jnp.float32), mask),
        "erc/frac_low": _masked_mean(below.astype(jnp.float32), mask),
        "erc/frac_high": _masked_mean(above.astype(jnp.float32), mask),
    })
    return loss, metrics

  return forward_statistics(_with_name(wrapped, _term_name(term)), term)


# --------------------------------------------------------------------------------------
# Clip-Cov / KL-Cov
# --------------------------------------------------------------------------------------


def _count(n_valid: Array, ratio: float) -> Array:
  # Python's int(ratio * N) (verl) in float32, with a 1e-6 relative nudge so that e.g. 5000·2e-4 = 1.
  return jnp.maximum(jnp.floor(n_valid.astype(jnp.float32) * jnp.float32(ratio) * (1.0 + 1e-6)), 1.0)


def _select(candidates: Array, priority: Array, count: Array) -> Array:
  """Marks the ``count`` candidates of highest priority (ties: lower flat index first)."""
  flat_c = jnp.ravel(candidates)
  key = jnp.where(flat_c, -jnp.ravel(priority), jnp.inf)
  order = jnp.argsort(key, stable=True)
  rank = jnp.zeros_like(order).at[order].set(jnp.arange(order.shape[0], dtype=order.dtype))
  return (flat_c & (rank.astype(jnp.float32) < count)).reshape(candidates.shape)


def _covariance(adv: Array, logp: Array, mask: Array) -> Array:
  adv = jax.lax.stop_gradient(adv)
  logp = jax.lax.stop_gradient(logp)
  return (adv - _masked_mean(adv, mask)) * (logp - _masked_mean(logp, mask))


def clip_cov(eps_low=0.2, eps_high=0.2, *, clip_cov_ratio: float = 2e-4, clip_cov_lb: float = 1.0,
             clip_cov_ub: float = 5.0, key: Optional[Array] = None):
  """Clip-Cov (Cui et al., "The Entropy Mechanism of RL for Reasoning LMs", arXiv:2505.22617; verl ``clip_cov``).

      r_t = exp(log π_θ − log π_old),  l_t = max(−A_t r_t, −A_t clip(r_t, 1−ε_low, 1+ε_high))
      cov_t = (A_t − Ā)(log π_θ(y_t) − mean log π_θ)     (means over masked tokens)
      candidates: masked, unclipped (−A clip(r) ≤ −A r), clip_cov_lb < cov_t < clip_cov_ub
      k = max(⌊clip_cov_ratio · N⌋, 1),  N = #masked tokens
      L_t = 0 on the k selected candidates (value *and* gradient, as verl's
            ``pg_losses * corr``), l_t elsewhere.

  verl and the authors' code (github.com/PRIME-RL/Entropy-Mechanism-of-RL,
  ``compute_policy_loss_clip_cov``, same rule and defaults) draw the k
  candidates with ``torch.randperm`` (non-deterministic, global RNG).
  Here, without ``key`` the k candidates with the *largest* covariance are
  taken (ties → lower flat index), which is deterministic; with a PRNG ``key``
  they are drawn uniformly without replacement (verl's behaviour). Build the
  term inside the step with a fresh key (``jax.random.fold_in(key, step)``) for
  a new draw each step. No dual clip (as verl). log r is clamped to ±20.

  Args:
    eps_low, eps_high: PPO clip ranges ≥ 0 (verl ``clip_ratio_low/high`` 0.2).
    clip_cov_ratio: fraction in (0, 1] of masked tokens to detach (verl 2e-4).
    clip_cov_lb, clip_cov_ub: covariance window (verl 1.0, 5.0).
    key: optional PRNG key.

  Reads ``out.logp``, ``batch.logp_proximal``, ``batch.advantages``. Metrics:
  ``cov_clip_frac`` (verl's ``pg_clipfrac``: fraction of tokens selected),
  ``clip_frac`` (fraction where the PPO clip is active), ``approx_kl_k1``
  (masked mean of −log r, verl's ``ppo_kl``), ``entropy`` when ``out.entropy``
  is given.

  Batch statistics: ``{"selected": [B, T] bool}``, the tokens selected on the
  whole batch (N, the means in cov_t and the random draw are the whole
  batch's), so micro-batches detach exactly the full batch's tokens.
  """
  _check_value("eps_low", eps_low, low=0.0)
  _check_value("eps_high", eps_high, low=0.0)
  _check_value("clip_cov_ratio", clip_cov_ratio, low=0.0, high=1.0, low_open=True)
  _check_value("clip_cov_lb", clip_cov_lb)
  _check_value("clip_cov_ub", clip_cov_ub)
  if is_concrete(clip_cov_lb) and is_concrete(clip_cov_ub) and float(clip_cov_lb) >= float(clip_cov_ub):
    raise ValueError(f"clip_cov_lb ({clip_cov_lb}) must be < clip_cov_ub ({clip_cov_ub})")

  def pieces(out, batch):
    shape = _check_batch(out, batch)
    adv = _require("batch.advantages", batch.advantages, shape)
    log_r = _log_ratio(out, batch)
    ratio = jnp.exp(log_r)
    mask = _mask(batch)
    l1 = -adv * ratio
    lo, hi = (jnp.asarray(e).astype(ratio.dtype) for e in (eps_low, eps_high))
    l2 = -adv * jnp.clip(ratio, 1.0 - lo, 1.0 + hi)
    clipped = (l2 > l1) & (mask > 0)
    return adv, log_r, mask, jnp.maximum(l1, l2), clipped

  def select(out, adv, mask, clipped):
    cov = _covariance(adv, out.logp.astype(_float(out.logp)), mask)
    cand = (mask > 0) & ~clipped & (cov > clip_cov_lb) & (cov < clip_cov_ub)
    count = _count(jnp.sum(mask), clip_cov_ratio)
    priority = cov if key is None else jax.random.uniform(key, mask.shape)
    return _select(cand, priority, count)

  def statistics_fn(out, batch):
    adv, _, mask, _, clipped = pieces(out, batch)
    return {"selected": select(out, adv, mask, clipped)}

  def term(out: PolicyOutputs, batch: TrainBatch, statistics=None):
    adv, log_r, mask, pg_loss, clipped = pieces(out, batch)
    selected = select(out, adv, mask, clipped) if statistics is None else statistics["selected"]
    loss = jnp.where(selected | (mask <= 0), 0.0, pg_loss)  # 0 on padding, like every ratio term
    metrics = {"cov_clip_frac": _masked_mean(selected.astype(jnp.float32), mask),
               "clip_frac": _masked_mean(clipped.astype(jnp.float32), mask),
               "approx_kl_k1": _masked_mean(jax.lax.stop_gradient(-log_r), mask),
               **_entropy_metric(out, mask)}
    return loss, metrics

  return _with_name(with_statistics(term, statistics_fn), "clip_cov")


def kl_cov(*, kl_cov_ratio: float = 2e-4, ppo_kl_coef=1.0):
  """KL-Cov (arXiv:2505.22617; verl ``kl_cov``).

      r_t = exp(log π_θ − log π_old),  cov_t as in ``clip_cov``
      k = max(⌊kl_cov_ratio · N⌋, 1), S = the k masked tokens of largest cov_t
      L_t = −A_t r_t + 1[t ∈ S] · ppo_kl_coef · |log r_t|

  Unclipped PG loss plus an |log r| penalty on the top-covariance tokens.
  The authors' code (github.com/PRIME-RL/Entropy-Mechanism-of-RL,
  ``verl/trainer/ppo/core_algos.py::compute_policy_loss_kl_cov``; recipe
  ``recipe/dapo/32b_kl_cov.sh``: ``k_percent=0.02`` %, ``ppo_kl_coef=1``) and
  verl pick S with ``torch.topk`` (tie order unspecified); here ties go to
  the lower flat index (deterministic). Defaults are the authors':
  ratio 2e-4 and ``ppo_kl_coef = 1`` (verl's config default is 0.1; its
  function falls back to 1.0). log r is clamped to ±20.

  Args:
    kl_cov_ratio: fraction in (0, 1] of masked tokens penalised (authors, verl 2e-4).
    ppo_kl_coef: penalty coefficient ≥ 0 (may be traced); authors' 1.0.

  Reads ``out.logp``, ``batch.logp_proximal``, ``batch.advantages``. Metrics:
  ``frac_penalized``, ``ppo_kl_abs`` (masked mean |log r|, verl's ``ppo_kl``),
  ``entropy`` when available.

  Batch statistics: ``{"selected": [B, T] bool}``, S chosen on the whole batch.
  """
  _check_value("kl_cov_ratio", kl_cov_ratio, low=0.0, high=1.0, low_open=True)
  _check_value("ppo_kl_coef", ppo_kl_coef, low=0.0)

  def select(out, batch):
    adv = _require("batch.advantages", batch.advantages, _check_batch(out, batch))
    mask = _mask(batch)
    cov = _covariance(adv, out.logp.astype(_float(out.logp)), mask)  # float64 stays float64
    return _select(mask > 0, cov, _count(jnp.sum(mask), kl_cov_ratio))

  def term(out: PolicyOutputs, batch: TrainBatch, statistics=None):
    shape = _check_batch(out, batch)
    adv = _require("batch.advantages", batch.advantages, shape)
    log_r = _log_ratio(out, batch)
    mask = _mask(batch)
    selected = select(out, batch) if statistics is None else statistics["selected"]
    coef = jnp.asarray(ppo_kl_coef).astype(log_r.dtype)
    # |log r| as sign(log r)·log r: the same value, and at r = 1 the derivative 0 of torch's abs backward
    # (sign(0) = 0) in their code; jnp.abs's derivative at 0 is 1 (a penalty gradient on every selected token)
    abs_log_r = jnp.sign(log_r) * log_r
    loss = -adv * jnp.exp(log_r) + jnp.where(selected, coef * abs_log_r, 0.0)
    loss = jnp.where(mask > 0, loss, 0.0)  # 0 on padding, like every ratio term
    metrics = {"frac_penalized": _masked_mean(selected.astype(jnp.float32), mask),
               "ppo_kl_abs": _masked_mean(jax.lax.stop_gradient(jnp.abs(log_r)), mask),
               **_entropy_metric(out, mask)}
    return loss, metrics

  return _with_name(with_statistics(term, lambda out, batch: {"selected": select(out, batch)}), "kl_cov")


# --------------------------------------------------------------------------------------
# top-entropy mask, sign weighting
# --------------------------------------------------------------------------------------

_ENTROPY_SOURCES = ("current", "old")


def top_entropy_mask(term, rho=0.2, *, source: str = "current"):
  """Top-entropy token mask ("Beyond the 80/20 rule", Wang et al., arXiv:2506.01939; TRL ``top_entropy_quantile``).

      q = quantile_{1−ρ}({H_t : loss_mask_t}),  keep_t = loss_mask_t · 1[H_t ≥ q]
      L_t = keep_t · l_t

  ``l_t`` is the wrapped term's per-token loss; ρ is the *kept* fraction
  (TRL: ``get_high_entropy_mask(entropies, mask, 1 − top_entropy_quantile)``,
  ``torch.quantile`` linear interpolation over all non-padding tokens).
  As in TRL the aggregation denominator is unchanged (dropped tokens still
  count in ``token_mean``'s denominator). ρ = 1 keeps every valid token;
  ρ = 0 keeps only the maximum-entropy tokens.

  Args:
    term: the term to wrap.
    rho: kept fraction ρ ∈ [0, 1] (TRL ``top_entropy_quantile``, paper 0.2;
      may be traced).
    source: ``"current"`` (``out.entropy``, TRL) or ``"old"``
      (``batch.entropy_old``, the rollout policy's entropy).

  Metrics (added to the inner term's): ``top_entropy/frac_kept``,
  ``top_entropy/threshold``.

  Batch statistics: ``{"keep": [B, T] bool, "threshold": q, "inner": ...}``,
  the tokens kept on the whole batch (a per-token mask rather than q alone, so
  that a token whose entropy equals q is kept or dropped as in the whole-batch
  forward whatever the micro-batch's float rounding), and the wrapped term's.
  """
  if not callable(term):
    raise ValueError(f"term must be a callable objective term, got {term!r}")
  _check_value("rho", rho, low=0.0, high=1.0)
  _check_choice("source", source, _ENTROPY_SOURCES)

  def select(out, batch):
    shape = _check_batch(out, batch)
    ent = (_require("out.entropy", out.entropy, shape) if source == "current"
           else _require("batch.entropy_old", batch.entropy_old, shape))
    ent = jax.lax.stop_gradient(ent)
    mask = _mask(batch)
    threshold = masked_quantile(ent, mask, 1.0 - jnp.asarray(rho, jnp.float32))
    return (ent >= threshold) & (mask > 0), threshold

  def statistics_fn(out, batch):
    keep, threshold = select(out, batch)
    return {"keep": keep, "threshold": threshold, "inner": batch_statistics(term, out, batch)}

  def wrapped(out: PolicyOutputs, batch: TrainBatch, statistics=None):
    shape = _check_batch(out, batch)
    if statistics is None:
      (keep, threshold), inner = select(out, batch), None
    else:
      keep, threshold, inner = statistics["keep"], statistics["threshold"], statistics["inner"]
    loss, metrics = _call_inner(term, out, batch, shape, inner)
    metrics.update({"top_entropy/frac_kept": _masked_mean(keep.astype(jnp.float32), _mask(batch)),
                    "top_entropy/threshold": threshold})
    return jnp.where(keep, loss, 0.0), metrics

  return _with_name(with_statistics(wrapped, statistics_fn), _term_name(term))


def advantage_sign_weighting(term, pos_weight=1.0, neg_weight=1.0):
  """Scales a term's per-token loss by the sign of the advantage (EntroPIC's loss side).

      L_t = w_t · l_t,  w_t = pos_weight if A_t > 0, neg_weight if A_t < 0, 1 if A_t = 0

  Use with ``rljax.control.entropic``: ``advantage_sign_weighting(ppo_clip(...),
  state.pos_weight, state.neg_weight)`` inside the jitted step (weights may be
  traced). Weights must be ≥ 0. Metrics: ``sign_weight/pos``, ``sign_weight/neg``.
  """
  if not callable(term):
    raise ValueError(f"term must be a callable objective term, got {term!r}")
  _check_value("pos_weight", pos_weight, low=0.0)
  _check_value("neg_weight", neg_weight, low=0.0)

  def wrapped(out: PolicyOutputs, batch: TrainBatch, statistics=None):
    shape = _check_batch(out, batch)
    adv = jax.lax.stop_gradient(_require("batch.advantages", batch.advantages, shape))
    loss, metrics = _call_inner(term, out, batch, shape, statistics)
    pw, nw = jnp.asarray(pos_weight, jnp.float32), jnp.asarray(neg_weight, jnp.float32)
    w = jnp.where(adv > 0, pw, jnp.where(adv < 0, nw, 1.0))
    metrics.update({"sign_weight/pos": pw, "sign_weight/neg": nw})
    return w * loss, metrics

  return forward_statistics(_with_name(wrapped, _term_name(term)), term)


def _technique_rows():
  from rljax._technique import Fidelity, Technique
  from rljax.objectives import _peer_conventions as PC
  from rljax.objectives import _stages as S
  from rljax.stages import loss_term_factory
  return (
      Technique("entropy_bonus", "entropy", entropy_bonus, "L_t = −c·H_t",
                "verl entropy_coeff; TRL entropy_coef",
                stage=loss_term_factory(entropy_bonus, hparams={"coef": "entropy_coef"}),
                fidelity=Fidelity("peer", "verl v0.7.0 dp_actor (pg_loss − entropy_coeff·agg(entropy)); TRL v1.9.0 "
                                  "entropy_coef",
                                  "default c = 1e-3 (verl entropy_coeff default 0)",
                                  read="volcengine/verl@v0.7.0 (f9c855f7) verl/workers/actor/dp_actor.py:459-462 and "
                                       ":520-525 (policy_loss −= agg_loss(entropy, loss_agg_mode)·entropy_coeff), "
                                       "actor.yaml entropy_coeff 0; huggingface/trl@v1.9.0 "
                                       "trl/trainer/grpo_trainer.py:3152-3181 (loss − coef·mean token entropy); read "
                                       "whole (#51): grpo_trainer.py:3152-3215 (the bonus's own normaliser: per "
                                       "micro-batch token mean ÷ gradient_accumulation_steps, or Σ ÷ the global "
                                       "token count for loss_type cispo / dapo / vespo, whatever the policy "
                                       "term's loss_type; use_adaptive_entropy: the Skywork-OR1 controller) and "
                                       "grpo_config.py:292-325 (entropy_coef 0.0, use_adaptive_entropy False, "
                                       "entropy_coef_min 0.0, entropy_coef_max 1.0, entropy_coef_delta 0.005, "
                                       "entropy_target 0.2); the verl 0.9.1 PyPI wheel "
                                       "workers/utils/losses.py:122-130 (policy_loss −= entropy_coeff·agg_loss("
                                       "entropy, loss_agg_mode, global counts)), actor.yaml:93 entropy_coeff 0, "
                                       "trainer/ppo/ray_trainer.py:1336-1338 (entropy computed when "
                                       "entropy_coeff ≠ 0; the default v1 trainer: v1/trainer_base.py:1831-1832, "
                                       "the same). Tenth draw (#51 item 4, seed 20261215): the deviations "
                                       "called ours equal to TRL under token_mean for every loss_type and to "
                                       "verl's loss_agg_mode; TRL's grpo / sapo / bnpo / dr_grpo / luspo "
                                       "and verl v0.7.0's dp_actor normalise each micro-batch by its own "
                                       "token count. Sweep s1a (#51, peer conventions): the entropies both peers "
                                       "feed the bonus are those of softmax(z/T): " + PC.READ_TRL_T + "; "
                                       + PC.READ_VERL_T + "; the verl 0.9.1 wheel transformer_impl.py:1386-1400 "
                                       "(the entropy from the temperature-scaled logits)",
                                  defaults=(("coef", "1e-3", "verl entropy_coeff 0; TRL entropy_coef 0.0"),
                                            ("aggregation", "chain's (token_mean)", "verl: the actor's "
                                             "loss_agg_mode; TRL: token mean over the (entropy-masked) tokens"),
                                            ("adaptive coef", "not built (coef is fixed for the run)",
                                             "TRL use_adaptive_entropy False; when on: entropy_coef_delta 0.005, "
                                             "[entropy_coef_min 0.0, entropy_coef_max 1.0], entropy_target 0.2"),
                                            ("temperature of H", "none: out.entropy is the untempered forward's "
                                             "(RLConfig.temperature, default 1.0, only samples)",
                                             "H of softmax(z/T): TRL temperature 1.0, verl rollout.temperature 1.0")),
                                  placement="theirs: added to the actor's loss on each micro-batch from the "
                                            "forward's entropies; ours: a loss term on each micro-batch from "
                                            "out.entropy, aggregated by chain",
                                  deviations=("default c = 1e-3; both peers default to 0 (off)",
                                              "TRL restricts the bonus to the top-entropy tokens when "
                                              "top_entropy_quantile < 1; here the term sees every masked token",
                                              "TRL's bonus is a token mean whatever loss_type aggregates the "
                                              "policy term; ours is aggregated by chain with the other terms "
                                              "(under seq_mean_token_mean ours averages per sequence first); verl "
                                              "uses loss_agg_mode, as ours",
                                              "the token mean's denominator: ours is the step batch's token count "
                                              "for every micro-batch (make_train_step's global denominator), "
                                              "equal to TRL's loss_type cispo / dapo (its default) / vespo "
                                              "(Σ H ÷ num_items_in_batch / num_processes, grpo_trainer.py:3140, "
                                              "3168) and to verl 0.9.1's losses.py (global batch_num_tokens); "
                                              "TRL's other loss types (grpo, sapo, bnpo, dr_grpo, luspo) take "
                                              "each micro-batch's own token mean ÷ gradient_accumulation_steps "
                                              "(:3171), and verl v0.7.0's dp_actor each micro-batch's own token "
                                              "mean × 1/gradient_accumulation (agg_loss without global counts, "
                                              "dp_actor.py:465-467, 522): a mean of micro-batch means, unequal "
                                              "to ours when the micro-batches' token counts differ",
                                              "TRL's use_adaptive_entropy (Skywork-OR1: after each optimizer step "
                                              "coef += 0.005 if the window's mean entropy ≤ entropy_target 0.2 "
                                              "else −= 0.005, clipped to [0, 1], the bonus applied only while "
                                              "that entropy ≤ the target) is not built",
                                              "H is the untempered entropy; both peers' is that of softmax(z/T), T "
                                              "the rollout temperature (TRL temperature, verl rollout.temperature): "
                                              "the bonus and its gradient differ at T ≠ 1, equal at T = 1 (their "
                                              "defaults); no option gives theirs"))),
      Technique("erc", "entropy", erc,
                "ρ_t = (H_θ+δ)/(H_old+δ); l_t detached where ρ_t ∉ (low, high)",
                "000_3e503271be254a43.txt L45; arXiv:2512.05591; Kwai-Klear/ERC code",
                stage=loss_term_factory(erc, role="policy", needs={"entropy_old"}),
                fidelity=Fidelity("authors_code", "github.com/Kwai-Klear/ERC: verl/trainer/ppo/core_algos.py "
                                  "compute_policy_loss_grpo_erc",
                                  "wraps any term (the code: dual-clip PPO, grpo_erc, or GPPO, gppo_erc: not offered); "
                                  "bounds 0.95/1.05 = released recipes; their 0.1 positive-sample NLL "
                                  "(postive_loss_coeff) not built",
                                  read="Kwai-Klear/ERC@f1885c53 (2026-01-05) verl/trainer/ppo/core_algos.py:915-1010 "
                                       "compute_policy_loss_grpo_erc (dual-clip PPO, optional TIS, ρ = (H + 1e-8) / "
                                       "(H_old + 1e-8), detach where not low < ρ < high), verl/workers/actor/"
                                       "dp_actor.py:443 and :534 (old entropies from the rollout batch), recipe/"
                                       "dapo/perf_run_dapo_ours_math_szp_ae_dapo_erc_1_05.sh (clip 0.2/0.28, "
                                       "clip_ratio_c 10, entropy_mask_low/high 0.95/1.05, token-mean); "
                                       "core_algos.py:807-912 compute_policy_loss_gppo_erc (the same ERC mask around "
                                       "GPPO's gradient-preserving clip: clamp(r, (1 − ε_l)·r/sg(r), (1 + ε_h)·r/"
                                       "sg(r)), dual-clip c) with recipe/dapo/perf_run_dapo_ours_math_szp_ae_gppo_"
                                       "erc_1_05.sh (loss_mode gppo_erc, clip 0.2/0.2, clip_ratio_c 10, 0.95/1.05, "
                                       "token-mean); README 'We integrate ERC into both DAPO and GPPO'. Fifth draw "
                                       "(#51 item 4): gppo_erc was not in the record; dp_actor.py:510-518, "
                                       "549-550 (postive_loss: −log π over the rows whose summed token reward is "
                                       "exactly 1.0, agg_loss token-mean over those rows, × postive_loss_coeff, "
                                       "added to the policy loss), set to 0.1 by all four erc recipes (:106 in "
                                       "three, :110 in the 1_5B gppo one; actor.yaml:13 default 0.1). Sixth draw "
                                       "(#51 item 4): the positive-sample NLL was not in the record. Error-class "
                                       "sweep (#51, s2a; launch switches, the data-parallel dispatch): "
                                       "perf_run_dapo_ours_math_szp_ae_dapo_erc_1_05.sh (the same values in the "
                                       "other three erc recipes) :39-46 (enable_filter_groups True, metric acc, max_num_gen_batches "
                                       "1, train_prompt_bsz 128, gen_prompt_bsz 256, n_resp_per_prompt 8, "
                                       "train_prompt_mini_bsz 16), :71-72 (temperature 1.0, top_p 1.0), :78 "
                                       "(use_dynamic_bsz True), :33 (enable_overlong_buffer False); dp_actor.py:"
                                       "416-418 (mini-batches; on_policy only with one), :425 (token-budget "
                                       "micro-batches), :451-454 and :565-569 (each micro-batch's token-mean × its "
                                       "rows / the GPU's mini-batch rows), fsdp_workers.py:843-845 (update_actor "
                                       "dispatched per data-parallel rank): 8 optimizer steps per step, H = H_old "
                                       "(ρ = 1, nothing masked) on the first; the record gave neither. Per-row "
                                       "review k (#51), the released code as it runs: dp_actor.py:480-506 "
                                       "(update_policy, every micro-batch, on rank 0) calls os.makedirs on the "
                                       "hard-coded /mmu_nlp_hdd/panleiyu/KlearReasoner-copy/debug/"
                                       "logprob_entropy_debug_1112_erc_dapo_end_32k and torch.save's the "
                                       "micro-batch's old_log_prob, log_prob, old and new entropies, advantages, "
                                       "response_mask and responses there: a user who cannot create /mmu_nlp_hdd "
                                       "gets PermissionError at the first update, so training does not run as "
                                       "released (as root it writes one file per micro-batch per step); "
                                       "README.md:187-188 gives 'bash recipe/dapo/perf_run_dapo_ours_math_szp_ae_"
                                       "dapo_erc_1_05.sh # 7B + DAPO' and 'bash recipe/dapo/perf_run_dapo_ours_"
                                       "code.sh # 7B + GPPO', a script not in the repository (the GPPO runs are "
                                       "the two *_gppo_erc_1_05.sh recipes, which README does not name); all four "
                                       "erc recipes launch /share/miniconda3/envs/verl_szp_py310/bin/ray and "
                                       ".../bin/python (:86-88; :90-92 in 1_5B_..._gppo_erc_1_05.sh), their "
                                       "cluster's environment, under set -xeuo pipefail (:9): elsewhere they stop "
                                       "there; and dp_actor.py:552-556 would take the KL loss against "
                                       "old_log_prob, not the reference log-probs (use_kl_loss False in all four: "
                                       "no effect)",
                                  defaults=(("low / high", "0.95 / 1.05", "entropy_mask_low/high 0.95 / 1.05"),
                                            ("eps (δ)", "1e-8", "1e-8"),
                                            ("wrapped loss", "any term (e.g. ppo_clip(0.2, 0.28, dual_clip=10))",
                                             "loss_mode grpo_erc: dual-clip PPO, clip 0.2/0.28, clip_ratio_c 10; or "
                                             "gppo_erc: GPPO's gradient-preserving clip, clip 0.2/0.2, clip_ratio_c "
                                             "10; TIS off (tis_imp_ratio_cap -1)"),
                                            ("positive-sample NLL", "not in this term",
                                             "postive_loss_coeff 0.1 (every erc recipe): 0.1 × the token-mean of "
                                             "−log π over the rows with reward exactly 1.0, added to the loss"),
                                            ("mini-batches per step", "rl.num_minibatches × rl.updates_per_batch "
                                             "(the recipe's); rl.num_minibatches=8, rl.updates_per_batch=1 gives "
                                             "theirs", "train_prompt_bsz 128 ÷ train_prompt_mini_bsz 16 = 8 "
                                             "optimizer steps, ppo_epochs 1; H_old fixed before the first, so ρ = 1 "
                                             "(no token detached) on the first mini-batch and the mask acts from "
                                             "the second"),
                                            ("aggregation (the wrapped term's)", "chain's: the update batch's token "
                                             "count on every micro-batch", "loss_agg_mode token-mean per "
                                             "token-budget micro-batch (use_dynamic_bsz) × its rows / the GPU's "
                                             "mini-batch rows, the GPUs' gradients averaged"),
                                            ("sampler temperature / top_p", "rl.temperature 1.0, rl.top_p 1.0 "
                                             "(H, log π untempered)", "1.0 / 1.0: equal"),
                                            ("group filter (not this term's)", "compose zero_variance",
                                             "enable_filter_groups True (acc), gen_prompt_bsz 256 for 128 kept "
                                             "prompts, max_num_gen_batches 1")),
                                  placement="theirs: inside the actor's loss on each micro-batch, H from that "
                                            "forward, H_old the entropies stored with the old log-probs before the "
                                            "update; each data-parallel rank trains its slice (update_actor's "
                                            "dispatch), 8 mini-batches per step, each a token-mean per token-budget "
                                            "micro-batch weighted by its row share; ours: a wrapper of the term on "
                                            "each micro-batch, H = out.entropy, H_old = batch.entropy_old, the "
                                            "chain's denominator over the whole update batch",
                                  deviations=("wraps any term; the code has two ERC losses: grpo_erc (dual-clip "
                                              "PPO: erc(ppo_clip(0.2, 0.28, dual_clip=10.0)) is its recipe's loss) "
                                              "and gppo_erc (GPPO's gradient-preserving clip, whose clipped tokens "
                                              "keep a gradient): no GPPO term is offered, so that recipe cannot be "
                                              "composed",
                                              "ρ = 1 when both entropies and δ are 0 (the code divides 0 by 0)",
                                              "their recipes add 0.1 × the token-mean NLL of the rows whose reward "
                                              "is exactly 1.0 (postive_loss_coeff, dp_actor.py:510-518, 549-550; "
                                              "not masked by ERC) to the loss; not part of erc and not built: "
                                              "sft_nll in a chain weighs every row and shares the chain's "
                                              "denominator",
                                              "their recipes train each step as 8 mini-batches (128 ÷ 16 prompts) "
                                              "against H_old and π_old computed before the first: on the first ρ = "
                                              "1 and ERC masks nothing; rl.num_minibatches=8 with "
                                              "rl.updates_per_batch=1 is theirs (rljax's default 2 epochs of one "
                                              "mini-batch masks on the second epoch only)",
                                              "their token-mean is per token-budget micro-batch (use_dynamic_bsz) "
                                              "weighted by its row share of the GPU's mini-batch; ours one "
                                              "denominator for the whole update batch: equal when every "
                                              "micro-batch's mean token count per row is the same",
                                              "the released actor (dp_actor.py:480-506) saves every micro-batch's "
                                              "log-probs, entropies and advantages to a hard-coded /mmu_nlp_hdd/... "
                                              "directory (PermissionError for a user who cannot create it: the "
                                              "code does not train as released), and the recipes launch their "
                                              "cluster's /share/miniconda3/... ray and python, and README's GPPO "
                                              "command names a script the repository lacks: the values above are "
                                              "the recipes' as written, run with those lines changed",
                                              "their token-mean is masked_sum / (n + 1e-8) (verl/utils/"
                                              "torch_functional.py:184-185 of their fork), chain's token_mean Σ / "
                                              "n: theirs × n/(n + 1e-8), a relative 1e-8/n"))),
      Technique("clip_cov", "entropy", clip_cov,
                "PPO clip; k=max(⌊ratio·N⌋,1) unclipped tokens with cov∈(lb,ub) get L=0",
                "verl clip_cov; arXiv:2505.22617",
                stage=loss_term_factory(clip_cov, hparams=S.CLIP, role="policy", needs={"logp_old"}),
                fidelity=Fidelity("authors_code", "github.com/PRIME-RL/Entropy-Mechanism-of-RL: "
                                  "verl/trainer/ppo/core_algos.py compute_policy_loss_clip_cov",
                                  "no implicit RNG: without key= the k largest-cov candidates are taken (code: "
                                  "randperm draw; key= draws uniformly); log r clamped ±20",
                                  read="PRIME-RL/Entropy-Mechanism-of-RL@88505792 (2025-06-26) verl/trainer/ppo/"
                                       "core_algos.py:469-515 compute_policy_loss_clip_cov, verl/workers/actor/"
                                       "dp_actor.py:402-415, recipe/dapo/7b_clip_cov.sh and 32b_clip_cov.sh "
                                       "(clip_ratio_low/high 1, clip_cov_ratio 2e-4, lb 1.0, ub 5.0, token-mean), "
                                       "verl/trainer/config/ppo_trainer.yaml:53-55. Error-class sweep (#51, s2a; "
                                       "launch switches, the data-parallel dispatch): 7b_clip_cov.sh:34-37 "
                                       "(train_prompt_bsz 256, train_prompt_mini_bsz 32, n_resp_per_prompt 8), "
                                       ":53-54 (temperature 1.0, top_p 1.0), :60 (use_dynamic_bsz True), :25 "
                                       "(overlong buffer off); verl/workers/fsdp_workers.py:562-563 (update_actor "
                                       "Dispatch.DP_COMPUTE_PROTO: each rank its slice), :128-129 (the mini-batch "
                                       "÷ the data-parallel size), dp_actor.py:338 (8 mini-batches), :351 "
                                       "(token-budget micro-batches), :451 (× rows / mini-batch rows): cov, N and "
                                       "the draw are per GPU per token-budget micro-batch, which the record's "
                                       "'per micro-batch' did not say. Seventeenth draw (#51 item 4, seed "
                                       "20261222): verl/utils/torch_functional.py:123-125 of their fork "
                                       "(masked_mean = Σ x·m / (Σ m + 1e-8)), which agg_loss's token-mean "
                                       "(core_algos.py:333-334) and the two means in cov (:497) call; "
                                       "recipe/dapo/dapo_ray_trainer.py:184-217 (filter_groups: gen_batch_size = "
                                       "train_prompt_bsz 256 prompts a round, kept groups concatenated, "
                                       "batch[:256·8] once 256 are kept, ValueError at :212 when 10 rounds "
                                       "fall short)",
                                  defaults=(("eps_low / eps_high", "0.2 / 0.2", "recipes: 1 / 1 (config 0.2)"),
                                            ("clip_cov_ratio", "2e-4", "2e-4"), ("clip_cov_lb", "1.0", "1.0"),
                                            ("clip_cov_ub", "5.0", "5.0"),
                                            ("selection among candidates", "the k largest cov (key=: uniform)",
                                             "torch.randperm (uniform, global RNG)"),
                                            ("log-ratio clamp", "±20", "none"),
                                            ("aggregation", "chain's (token_mean: Σ / n)", "token-mean per GPU "
                                             "per token-budget micro-batch (Σ / (n + 1e-8), torch_functional.py:"
                                             "125) × its rows / the GPU's mini-batch rows"),
                                            ("mini-batches per step", "rl.num_minibatches × rl.updates_per_batch",
                                             "train_prompt_bsz 256 ÷ train_prompt_mini_bsz 32 = 8 optimizer steps "
                                             "(ppo_epochs 1): r = 1 on the first, so no token is clipped there"),
                                            ("sampler temperature / top_p", "rl.temperature 1.0, rl.top_p 1.0 "
                                             "(untempered)", "1.0 / 1.0: equal"),
                                            ("zero-variance filter (not this term's)", "compose zero_variance",
                                             "recipe/dapo/*_cov.sh: enable_filter_groups True (metric acc, "
                                             "max_num_gen_batches 10), n_resp_per_prompt 8, adv_estimator grpo; "
                                             "rounds of 256 prompts until 256 kept groups, the first 2048 rows "
                                             "kept (batch[:traj_bsz], the surplus dropped); fewer than 256 after 10 "
                                             "rounds raises ValueError and stops the run (dapo_ray_trainer.py:"
                                             "206-217)")),
                                  placement="theirs: inside the actor's loss on each micro-batch: cov, N and the "
                                            "draw over that micro-batch's valid tokens, on each data-parallel rank "
                                            "separately (update_actor is dispatched per rank; with use_dynamic_bsz "
                                            "the micro-batches are cut by a token budget), 8 mini-batches per "
                                            "step; ours: the selection is a batch statistic (cov means, N and the "
                                            "choice over the whole update batch, every device's rows) applied on "
                                            "every micro-batch; called without statistics it is per call",
                                  deviations=("eps defaults 0.2/0.2 (verl's config); the authors' recipes use "
                                              "clip_ratio 1/1: clip_cov(1.0, 1.0)",
                                              "deterministic by default: the k candidates of largest cov; the "
                                              "code draws k uniformly (key= does, with JAX's RNG); equal when the "
                                              "candidates are at most k",
                                              "selection over the whole batch, not per micro-batch and per "
                                              "data-parallel rank (equal with one rank and one micro-batch per "
                                              "update; their recipes run 8 mini-batches per step, each cut into "
                                              "token-budget micro-batches on every GPU, so k = int(ratio·N) is "
                                              "taken per GPU micro-batch, each at least 1)",
                                              "k = max(⌊ratio·N·(1 + 1e-6)⌋, 1) (a nudge against float error); the "
                                              "code's int(ratio·N)",
                                              "log r clamped to ±20; the code has none",
                                              "their token-mean and the two means in cov are masked_sum / (n + "
                                              "1e-8) (verl_F.masked_mean, torch_functional.py:123-125 of their "
                                              "fork), ours Σ / n: with one rank and one micro-batch their loss is "
                                              "ours × n/(n + 1e-8), a relative 1e-8/n (seventeenth draw, #51: not "
                                              "listed before)"))),
      Technique("kl_cov", "entropy", kl_cov,
                "L = −A·r + 1[top-k cov]·coef·|log r|", "verl kl_cov; arXiv:2505.22617",
                stage=loss_term_factory(kl_cov, role="policy", needs={"logp_old"}),
                fidelity=Fidelity("authors_code", "github.com/PRIME-RL/Entropy-Mechanism-of-RL: "
                                  "verl/trainer/ppo/core_algos.py compute_policy_loss_kl_cov",
                                  "ties go to the lower index (topk: unspecified); log r clamped ±20; coef 1 = "
                                  "authors' recipe (verl config 0.1); k = ⌊ratio·N·(1 + 1e-6)⌋ (theirs "
                                  "int(N·k/100))",
                                  read="PRIME-RL/Entropy-Mechanism-of-RL@88505792 (2025-06-26) verl/trainer/ppo/"
                                       "core_algos.py:426-467 compute_policy_loss_kl_cov (k_percent is a percent: "
                                       "max(1, int(N·k/100)) tokens by torch.topk of cov), verl/workers/actor/"
                                       "dp_actor.py:417-426, recipe/dapo/32b_kl_cov.sh (k_percent 0.02, "
                                       "ppo_kl_coef 1) and 7b_kl_cov.sh (k_percent 0.2), ppo_trainer.yaml:51-52. "
                                       "Error-class sweep (#51, s2a; launch switches, the data-parallel dispatch): "
                                       "7b_kl_cov.sh:31-34 (train_prompt_bsz 256, train_prompt_mini_bsz 32, "
                                       "n_resp_per_prompt 8), :50-51 (temperature 1.0, top_p 1.0), :57 "
                                       "(use_dynamic_bsz True); verl/workers/fsdp_workers.py:562-563 (update_actor "
                                       "Dispatch.DP_COMPUTE_PROTO), dp_actor.py:338, :351, :451: the top-k is per "
                                       "GPU per token-budget micro-batch, and with 8 mini-batches per step "
                                       "|log r| = 0 on the first (no penalty, no gradient from it there). "
                                       "Fourteenth draw (#51, part b): core_algos.py:458 k_percent_nums = max(1, "
                                       "int(len(cov_lst_all) * k / 100)) in float64 against our _count "
                                       "max(⌊N·ratio·(1 + 1e-6)⌋, 1) in float32: the record had not listed the "
                                       "nudge (the clip_cov row does). Twenty-first draw (#51, part a): "
                                       "core_algos.py:333-334 (agg_loss token-mean = verl_F.masked_mean) and "
                                       "verl/utils/torch_functional.py:123-125 of their fork (Σ x·m / (Σ m + 1e-8)): "
                                       "the record had not listed the 1e-8 (the clip_cov row, same fork, does)",
                                  defaults=(("kl_cov_ratio", "2e-4", "k_percent 0.02 % = 2e-4 (32b recipe); 0.2 % "
                                             "= 2e-3 (7b recipe, config default)"),
                                            ("ppo_kl_coef", "1.0", "1"),
                                            ("PPO clip", "none", "none (clip_ratio unused by kl_cov)"),
                                            ("log-ratio clamp", "±20", "none"),
                                            ("aggregation", "chain's (token_mean: Σ / n)", "token-mean per GPU "
                                             "per token-budget micro-batch (Σ / (n + 1e-8), torch_functional.py:"
                                             "125) × its rows / the GPU's mini-batch rows"),
                                            ("mini-batches per step", "rl.num_minibatches × rl.updates_per_batch",
                                             "train_prompt_bsz 256 ÷ train_prompt_mini_bsz 32 = 8 optimizer steps "
                                             "(ppo_epochs 1): log r = 0 on the first, so the |log r| penalty acts "
                                             "from the second"),
                                            ("sampler temperature / top_p", "rl.temperature 1.0, rl.top_p 1.0 "
                                             "(untempered)", "1.0 / 1.0: equal"),
                                            ("zero-variance filter (not this term's)", "compose zero_variance",
                                             "recipe/dapo/*_cov.sh: enable_filter_groups True (metric acc, "
                                             "max_num_gen_batches 10), n_resp_per_prompt 8, adv_estimator grpo")),
                                  placement="theirs: inside the actor's loss on each micro-batch: cov means, N "
                                            "and the top-k over that micro-batch's valid tokens, on each "
                                            "data-parallel rank separately (update_actor is dispatched per rank; "
                                            "token-budget micro-batches), 8 mini-batches per step; ours: the "
                                            "selection is a batch statistic (over the whole update batch, every "
                                            "device's rows) applied on every micro-batch; called without "
                                            "statistics it is per call",
                                  deviations=("selection over the whole batch, not per micro-batch and per "
                                              "data-parallel rank (equal with one rank and one micro-batch per "
                                              "update; their recipes cut each of 8 mini-batches per step into "
                                              "token-budget micro-batches on every GPU, the top-k taken in each)",
                                              "ties in cov go to the lower flat index; torch.topk's order is "
                                              "unspecified",
                                              "kl_cov_ratio is a fraction (the code's k_percent / 100); the 7b "
                                              "recipe is kl_cov_ratio=2e-3",
                                              "log r clamped to ±20; the code has none",
                                              "k = max(⌊ratio·N·(1 + 1e-6)⌋, 1) in float32 (a nudge against float "
                                              "error), the code's max(1, int(N·k_percent/100)) in float64: from about "
                                              "a million masked tokens ours takes one token more at some N (2e-4: N = "
                                              "1,004,999 gives 201 against 200; 2e-3: N = 992,499 gives 1985 against "
                                              "1984); their N is one GPU micro-batch's (≤ 30,720 tokens in the 7b "
                                              "recipe, 20,480 in the 32b), ours the whole update batch's",
                                              "their token-mean is masked_sum / (n + 1e-8) (verl_F.masked_mean, "
                                              "torch_functional.py:123-125 of their fork, via agg_loss, core_algos.py:"
                                              "333-334), ours Σ / n: with one rank and one micro-batch their loss is "
                                              "ours × n/(n + 1e-8), a relative 1e-8/n (twenty-first draw, #51: not "
                                              "listed before; cov's two means are plain .mean() over the valid "
                                              "tokens, core_algos.py:457)"))),
      Technique("top_entropy_mask", "entropy", top_entropy_mask,
                "L_t = 1[H_t ≥ quantile_{1−ρ}(H)]·l_t", "TRL top_entropy_quantile; arXiv:2506.01939",
                stage=loss_term_factory(top_entropy_mask, role="policy", needs=S.source_needs()),
                fidelity=Fidelity("peer", "TRL v1.9.0 GRPOTrainer.get_high_entropy_mask (top_entropy_quantile)",
                                  "source='old' (rollout entropy) is our option",
                                  read="huggingface/trl@v1.9.0 (35def3ee) trl/trainer/grpo_trainer.py:1396-1432 "
                                       "get_high_entropy_mask (float32 torch.quantile of the valid entropies "
                                       "gathered over processes, keep H ≥ q on the mask), :3020-3021 (threshold "
                                       "1 − top_entropy_quantile) and :3114-3115 (per-token loss × mask); "
                                       "grpo_config.py:856-862; sweep s1a (#51, peer conventions): the entropies "
                                       "ranked are those of softmax(z/T), " + PC.READ_TRL_T + "; the mask leaves "
                                       "the loss_type's denominator alone (grpo_trainer.py:3124-3150 count every "
                                       "mask token), as ours. Per-row review i (#51), the terms the mask covers: "
                                       "the TRL 1.9.0 PyPI wheel grpo_trainer.py:3114-3115 (the policy loss × the "
                                       "mask), :3120-3121 (β·KL added after it, on every token; grpo_config.py:"
                                       "671-672 beta 0.0), grpo_trainer.py:3155-3181 (the entropy bonus, "
                                       "entropy_coef 0.0 or use_adaptive_entropy, over effective_mask = mask · "
                                       "entropy_mask) and :3190 (the adaptive controller's observed entropy over "
                                       "the same kept tokens), :827 (_entropy_bonus_enabled)",
                                  defaults=(("rho", "0.2 (the paper's)", "top_entropy_quantile 1.0 (off)"),
                                            ("source", "'current' (out.entropy)", "the current forward's "
                                             "entropies"),
                                            ("quantile", "linear interpolation, float32", "torch.quantile "
                                             "(linear) on float32"),
                                            ("temperature of H", "none: out.entropy / entropy_old are untempered",
                                             "TRL temperature (default 1.0): H of softmax(z/T)"),
                                            ("terms under the mask", "the wrapped term only (an entropy_bonus or "
                                             "kl_penalty outside the wrapper acts on every token)",
                                             "the policy loss and the entropy bonus (entropy_coef, default 0.0: "
                                             "the bonus is the mean entropy of the kept tokens); not β·KL (beta, "
                                             "default 0.0), added after the mask")),
                                  placement="theirs: inside _compute_loss on each micro-batch, q over that "
                                            "micro-batch's valid tokens gathered across processes; the "
                                            "denominator keeps every token; ours: a wrapper whose kept-token "
                                            "mask is a batch statistic (q over the whole update batch) applied "
                                            "on every micro-batch; without statistics it is per call",
                                  deviations=("rho defaults to the paper's 0.2; TRL's default 1.0 keeps every "
                                              "token (rho=1.0)",
                                              "q over the whole update batch, not per micro-batch (equal with "
                                              "one micro-batch per update)",
                                              "source='old' (the rollout policy's entropy) is our option",
                                              "H is untempered here; TRL ranks the entropies of softmax(z/T) "
                                              "(temperature T, default 1.0): at T ≠ 1 q and the kept tokens differ "
                                              "(temperature does not preserve the tokens' entropy order); equal at "
                                              "T = 1",
                                              "TRL's mask also covers its entropy bonus (grpo_trainer.py:3155-3181, "
                                              "with entropy_coef ≠ 0 or use_adaptive_entropy): effective_mask = "
                                              "mask · entropy_mask, the bonus the kept tokens' entropy ÷ the kept "
                                              "tokens' count (loss types other than cispo / dapo / vespo; those ÷ the "
                                              "global token count), and the adaptive controller observes the kept "
                                              "tokens' entropy (:3190); its β·KL (:3120-3121) is added after the mask "
                                              "on every token. Ours masks only the wrapped term: wrap the policy term "
                                              "(kl_penalty outside the wrapper, as TRL); an entropy_bonus outside it "
                                              "acts on every token, wrapped too it is TRL's 'dapo' bonus (for TRL's "
                                              "other loss types, which divide by the kept tokens, no form is ours). "
                                              "Equal at TRL's defaults (beta 0.0, entropy_coef 0.0)"))),
  )


TECHNIQUES = _technique_rows()
