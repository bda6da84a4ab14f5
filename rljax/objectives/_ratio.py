"""Policy-gradient terms built on the importance ratio pi_theta / pi_old.

Every factory closes over its hyper-parameters and returns

    term(out: PolicyOutputs, batch: TrainBatch) -> (per_token_loss [B, T], metrics)

to be composed with ``rljax.objectives.chain``. Conventions shared by all:

* ``log r_t = clamp(out.logp - sg(logp_old), -20, 20)`` (verl's clamp), 0 off
  ``batch.loss_mask``; ``logp_old`` defaults to ``batch.logp_old`` and falls
  back to ``batch.logp_behavior``. ``old_logp=`` picks another source: a
  ``TrainBatch`` field, a key of ``batch.extras`` -- e.g. a behaviour log-prob
  computed under another prompt (hints, Guide, OC-GRPO) -- or a callable.
* Advantages ``batch.advantages [B, T]`` are detached.
* ``correction=`` takes one correction (``tis``, ``mis``, ``icepop``,
  ``divergence_rejection`` or a user function) or a sequence of them; the
  per-token loss is multiplied by their detached ``weight * keep_mask``. When a
  correction reads a batch statistic (``tis(normalize=True)``) the term has
  ``batch_statistics`` and takes ``statistics=`` (``rljax.objectives._statistics``).
* The per-token loss is 0 off the mask; the aggregation (``chain(...,
  aggregate=)``) turns it into a scalar. Sequence/segment-level terms repeat
  the sequence loss on each of its tokens so that ``seq_mean_token_mean``
  recovers the paper's per-sequence average (each docstring says which
  aggregation the paper uses).
* Clip bounds and coefficients may be jax arrays (controllers such as BAPO
  move them without recompiling); their values are validated only when
  concrete. Bad static input raises ``ValueError`` naming the argument.
* Metrics (local to the micro-batch, detached): ``ratio_mean``, ``ratio_max``,
  ``ratio_min``, ``approx_kl`` (k3 of the token ratios), ``approx_kl_k1``,
  ``clip_frac_low`` / ``clip_frac_high`` / ``clip_frac`` (share of loss tokens
  whose gradient the clip removes), ``pg_loss`` (token mean of this term),
  ``entropy`` (token mean of ``out.entropy`` when present) and
  ``correction/*`` (incl. ``correction/masked_frac``).

Size: one family (ratio-based policy losses); the catalog rows with their fidelity records are the last ~830 lines.
"""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from rljax.objectives import _ratio_utils as U
from rljax.objectives._statistics import batch_statistics, with_statistics
from rljax.objectives._ratio_utils import LOG_RATIO_CLAMP

__all__ = ["ppo_clip", "reinforce", "gpg", "gspo", "gspo_token", "gmpo", "segment_ratio", "cispo", "sapo",
           "cpgd", "pspo", "decoupled_ppo", "exgrpo_policy", "ppo_clip_loss"]

SEQ_LOG_RATIO_MAX = 10.0
"""Sequence-level log-ratios are clamped at 10 (verl ``gspo``)."""

sg = jax.lax.stop_gradient


# ----------------------------------------------------------------------------- shared pieces


def _prepare(out, batch, old_logp, name):
  """Validated, detached inputs: ``(logp, log_ratio, adv, mask, shape)``."""
  shape = U.check_inputs(out, batch)
  dtype = U.float_dtype(out.logp)
  logp = out.logp.astype(dtype)
  old = sg(U.get_logp(batch, old_logp, shape, name=f"{name} old_logp").astype(dtype))
  mask = batch.loss_mask.astype(dtype)
  adv = sg(batch.advantages.astype(dtype))
  log_ratio = jnp.where(mask > 0, jnp.clip(logp - old, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP), 0.0)
  return logp, log_ratio, adv, mask, shape


def _check_eps(eps_low, eps_high, dual_clip=None):
  U.check_scalar("eps_low", eps_low, lo=0.0, hi=1.0, hi_open=True)
  U.check_scalar("eps_high", eps_high, lo=0.0, allow_none=True)
  U.check_scalar("dual_clip", dual_clip, lo=1.0, lo_open=True, allow_none=True)


def ppo_clip_loss(ratio, adv, eps_low, eps_high, dual_clip=None):
  """Per-token PPO clipped surrogate (pure math, no masking).

      L = max(-A r, -A clip(r, 1 - eps_low, 1 + eps_high))
      dual clip (A < 0):  L = min(L, -A c)

  Returns ``(loss, low_active, high_active, dual_active)``: the boolean masks
  mark where the lower clip (A < 0, r < 1 - eps_low), the upper clip (A > 0,
  r > 1 + eps_high) or the dual clip (A < 0, r > c) makes the gradient 0.
  """
  lo, hi = 1.0 - eps_low, 1.0 + eps_high
  loss = jnp.maximum(-adv * ratio, -adv * jnp.clip(ratio, lo, hi))
  low_active = (adv < 0) & (ratio < lo)
  high_active = (adv > 0) & (ratio > hi)
  if dual_clip is None:
    dual_active = jnp.zeros_like(low_active)
  else:
    loss = jnp.where(adv < 0, jnp.minimum(loss, -adv * dual_clip), loss)
    dual_active = (adv < 0) & (ratio > dual_clip)
  return loss, low_active, high_active, dual_active


def _finish(loss, mask, corrections, out, batch, shape, metrics, statistics=None):
  """Applies the corrections and the mask, adds ``pg_loss`` and the correction metrics."""
  weight, keep, c_metrics = U.apply_corrections(corrections, out, batch, shape, mask, statistics)
  if corrections:
    loss = loss * weight * keep
  loss = loss * mask
  metrics = dict(metrics)
  metrics["pg_loss"] = U.masked_mean(loss, mask)
  metrics.update(_entropy_metric(out, mask, shape))
  metrics.update(c_metrics)
  return loss, U.stop_metrics(metrics)


def _named(term, name, corrections):
  """``U.set_name``; a term whose corrections read a batch statistic (``tis(normalize=True)``) gets
  their ``batch_statistics`` (``term(out, batch, statistics=...)`` passes them on)."""
  return U.set_name(with_statistics(term, U.corrections_statistics(corrections)), name)


def _entropy_metric(out, mask, shape):
  """``entropy``: token mean of ``out.entropy`` when the model provides it."""
  if out.entropy is None:
    return {}
  if tuple(np.shape(out.entropy)) != tuple(shape):
    raise ValueError(f"out.entropy must have shape {tuple(shape)} (like out.logp), got {np.shape(out.entropy)}")
  return {"entropy": U.masked_mean(out.entropy.astype(mask.dtype), mask)}


def _seq_broadcast(x_b, shape):
  return jnp.broadcast_to(x_b[:, None], shape)


# ----------------------------------------------------------------------------- PPO family


def ppo_clip(eps_low=0.2, eps_high=None, dual_clip=None, *, correction=None, old_logp=None):
  """PPO clipped surrogate with decoupled low/high epsilons and optional dual clip.

      r_t = pi_theta(y_t) / pi_old(y_t)
      L_t = max(-A_t r_t, -A_t clip(r_t, 1 - eps_low, 1 + eps_high))
      dual clip, A_t < 0:  L_t = min(L_t, -A_t c)

  Sources: PPO (Schulman et al. 2017, arXiv:1707.06347); decoupled
  "clip-higher" eps (DAPO, arXiv:2503.14476; StarPO-S, seed 000); dual clip
  (Ye et al. 2020, arXiv:1912.09729). verl ``vanilla``: dual clip always on
  with ``clip_ratio_c = 3.0``; TRL ``loss_type`` dapo/bnpo/grpo/dr_grpo: no
  dual clip. Here the dual clip is off unless ``dual_clip`` is given.
  Aggregation: DAPO ``token_mean``, GRPO ``seq_mean_token_mean``, Dr.GRPO
  ``seq_mean_token_sum_norm``.

  Args:
    eps_low: lower clip, ``0 <= eps_low < 1`` (jax array allowed).
    eps_high: upper clip ``>= 0``; defaults to ``eps_low``.
    dual_clip: ``c > 1`` or ``None``.
    correction: mismatch correction(s), see ``rljax.objectives.tis`` etc.
    old_logp: source of ``log pi_old`` (default ``logp_old`` then ``logp_behavior``).
  """
  eps_high = eps_low if eps_high is None else eps_high
  _check_eps(eps_low, eps_high, dual_clip)
  U.check_logp_source("old_logp", old_logp)
  corrections = U.check_correction(correction)

  def term(out, batch, statistics=None):
    _, log_ratio, adv, mask, shape = _prepare(out, batch, old_logp, "ppo_clip")
    ratio = jnp.exp(log_ratio)
    loss, low, high, dual = ppo_clip_loss(ratio, adv, eps_low, eps_high, dual_clip)
    metrics = {**U.ratio_metrics(log_ratio, mask), **U.clip_metrics(low, high, mask),
               "dual_clip_frac": U.masked_mean(dual.astype(mask.dtype), mask)}
    return _finish(loss, mask, corrections, out, batch, shape, metrics, statistics)

  return _named(term, "ppo_clip", corrections)


def decoupled_ppo(eps_low=0.2, eps_high=None, dual_clip=None, *, behavior_cap=None, cap_mode: str = "mask",
                  correction=None, proximal_logp="logp_old", behavior_logp="logp_behavior"):
  """AReaL decoupled PPO: behaviour, proximal and current policy.

      r_t = pi_theta(y_t) / pi_prox(y_t)
      w_t = sg(pi_prox(y_t) / pi_behav(y_t))
      L_t = w_t * max(-A_t r_t, -A_t clip(r_t, 1 - eps_low, 1 + eps_high))   (+ optional dual clip)

  ``pi_prox`` is ``batch.logp_old`` (recomputed proximal policy) and
  ``pi_behav`` the sampler's ``batch.logp_behavior``; both are required. With
  ``behavior_cap``, tokens whose ``w_t > cap`` are dropped (``cap_mode="mask"``,
  AReaL's ``behav_imp_weight_cap``) or ``w_t`` is clamped to ``cap``
  (``"clamp"``). The denominator is the original mask count (AReaL).

  Source: AReaL (seed 000 L29; arXiv:2505.24298; checked against the
  authors' ``areal/utils/functional/functional.py::ppo_actor_loss_fn``, whose
  dual clip ``min(L, c|A|)`` equals ours). There ``w`` multiplies the loss
  only when ``rejection_sampling`` is configured (token/sequence level,
  ratio or k1-k3 metric, mask or clamp; the legacy default was a token ratio
  cap 5 with mask, i.e. ``behavior_cap=5.0``); here it is always applied, as
  in the paper's objective. verl rollout-correction "decoupled" mode. With
  ``pi_prox = pi_behav`` it equals ``ppo_clip``.
  """
  eps_high = eps_low if eps_high is None else eps_high
  _check_eps(eps_low, eps_high, dual_clip)
  U.check_scalar("behavior_cap", behavior_cap, lo=0.0, lo_open=True, allow_none=True)
  U.check_choice("cap_mode", cap_mode, ("mask", "clamp"))
  U.check_logp_source("proximal_logp", proximal_logp)
  U.check_logp_source("behavior_logp", behavior_logp)
  corrections = U.check_correction(correction)

  def term(out, batch, statistics=None):
    _, log_ratio, adv, mask, shape = _prepare(out, batch, proximal_logp, "decoupled_ppo")
    prox = U.get_logp(batch, proximal_logp, shape, name="decoupled_ppo proximal_logp").astype(mask.dtype)
    behav = U.get_logp(batch, behavior_logp, shape, name="decoupled_ppo behavior_logp").astype(mask.dtype)
    log_w = jnp.where(mask > 0, jnp.clip(prox - behav, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP), 0.0)
    w = sg(jnp.exp(log_w))
    keep = jnp.ones_like(w)
    if behavior_cap is not None:
      if cap_mode == "mask":
        keep = (w <= behavior_cap).astype(w.dtype)
      else:
        w = jnp.minimum(w, behavior_cap)
    ratio = jnp.exp(log_ratio)
    loss, low, high, dual = ppo_clip_loss(ratio, adv, eps_low, eps_high, dual_clip)
    loss = loss * w * keep
    metrics = {**U.ratio_metrics(log_ratio, mask), **U.clip_metrics(low, high, mask),
               "dual_clip_frac": U.masked_mean(dual.astype(mask.dtype), mask),
               "behavior_weight_mean": U.masked_mean(w, mask), "behavior_weight_max": U.masked_max(w, mask),
               "behavior_masked_frac": U.masked_mean(1.0 - keep, mask)}
    return _finish(loss, mask, corrections, out, batch, shape, metrics, statistics)

  return _named(term, "decoupled_ppo", corrections)


def exgrpo_policy(eps_low=0.2, eps_high=None, beta=0.1, *, clip_fresh: bool = False, replay_key=None,
                  correction=None, old_logp=None):
  """ExGRPO's mixed-policy objective: an unclipped ratio on fresh rows, a shaped importance weight on replayed rows.

      fresh rows:     L_t = -A_t r_t,                r_t = pi_theta / pi_old    (the authors' mixed batches)
      replayed rows:  L_t = -A_t f(w_t),  f(w) = w / (w + beta),  w_t = pi_theta / pi_old

  ``batch.extras["replay_mask"] [B]`` bool marks the replayed rows (the declared extra ``rljax.replay.REPLAY_MASK``: a
  replay or hint stage writes it, all False on steps that replay nothing). With the ``exgrpo`` replay stage's default
  ``logp_old="behavior"``, ``pi_old`` of a replayed row is its stored behaviour policy, so ``w`` is the importance
  weight of the off-policy trajectory; ``f`` (no clip) damps large weights and boosts low-probability tokens, as
  LUFFY's policy shaping. The (1 - rho) / rho weighting of fresh and experience questions is the batch composition
  (the replay stage's ``ratio``), each experience group being G - 1 fresh rows and one replayed row, averaged by the
  aggregation like any other rows.

  Source: ExGRPO (arXiv 2510.02245; seed 001 L241); the authors' code (github.com/ElliottYan/LUFFY, ExGRPO/exgrpo/
  verl/verl/mix_src/mix_core_alg.py ``compute_token_on_off_policy_loss`` with ``exp_scripts/run_exgrpo.sh``:
  ``off_policy_reshape="p_div_p_0.1"``, i.e. f(w) = w/(w + 0.1) on experience rows, and ``loss_remove_clip=True``,
  i.e. ``-A r`` unclipped on the fresh rows of a mixed batch). The authors clip (PPO, ``1 ± 0.2``, no reshape) only
  in their on-policy warm-up before the first experience batch (``is_mixed_policy`` False); here a batch without
  the mask (no replay stage in the recipe) is that phase: every row is fresh and PPO-clipped, as
  ``ppo_clip``. ``clip_fresh=True`` PPO-clips the fresh rows of mixed batches too (rljax's earlier default).

  Args:
    eps_low, eps_high: PPO clip of the clipped fresh rows (``eps_high`` defaults to ``eps_low``).
    beta: the shaping constant ``> 0`` (authors 0.1).
    clip_fresh: PPO-clip the fresh rows of batches that carry the mask (default False: the authors').
    replay_key: None (default): the mask is the declared extra ``replay_mask`` (``REPLAY_MASK.of(batch)``); a
      string: a user stage's own ``batch.extras`` key holding it instead (unchecked).
    correction: corrections applied to both kinds of rows (``rljax.objectives.tis`` ...).
    old_logp: source of ``log pi_old`` (default ``logp_old``).
  """
  eps_high = eps_low if eps_high is None else eps_high
  _check_eps(eps_low, eps_high)
  U.check_scalar("beta", beta, lo=0.0, lo_open=True)
  if not isinstance(clip_fresh, bool):
    raise ValueError(f"clip_fresh must be a bool, got {clip_fresh!r}")
  U.check_logp_source("old_logp", old_logp)
  corrections = U.check_correction(correction)
  from rljax.replay import REPLAY_MASK  # pylint: disable=import-outside-toplevel (the declared extra, typed)
  if replay_key is not None and (not isinstance(replay_key, str) or not replay_key):
    raise ValueError(f"replay_key must be None (the declared extra 'replay_mask') or a non-empty extras key, got "
                     f"{replay_key!r}")
  mask_of = REPLAY_MASK.of if replay_key is None else REPLAY_MASK._replace(name=replay_key).of
  what = f"batch.extras[{REPLAY_MASK.name if replay_key is None else replay_key!r}]"

  def term(out, batch, statistics=None):
    _, log_ratio, adv, mask, shape = _prepare(out, batch, old_logp, "exgrpo_policy")
    ratio = jnp.exp(log_ratio)
    clipped, low, high, _ = ppo_clip_loss(ratio, adv, eps_low, eps_high)
    replayed = mask_of(batch)
    mixed = replayed is not None
    replayed = jnp.zeros(shape[:1], bool) if replayed is None else jnp.asarray(replayed).astype(bool)
    if replayed.shape != tuple(shape[:1]):
      raise ValueError(f"exgrpo_policy: {what} must have shape {tuple(shape[:1])}, got {replayed.shape}")
    rep = jnp.broadcast_to(replayed[:, None], shape)
    shaped = -adv * ratio / (ratio + beta)
    clip = clip_fresh or not mixed  # static: the authors clip only outside mixed batches
    fresh = clipped if clip else -adv * ratio
    loss = jnp.where(rep, shaped, fresh)
    on = ~rep if clip else jnp.zeros_like(rep)
    metrics = {**U.ratio_metrics(log_ratio, mask), **U.clip_metrics(low & on, high & on, mask),
               "replayed_token_frac": U.masked_mean(rep.astype(mask.dtype), mask)}
    return _finish(loss, mask, corrections, out, batch, shape, metrics, statistics)

  return _named(term, "exgrpo_policy", corrections)


# ----------------------------------------------------------------------------- plain policy gradients


def reinforce(*, importance_weight: bool = True, max_weight=None, behavior_logp="logp_behavior", correction=None):
  """Importance-weighted vanilla policy gradient (the on-policy "MiniRL" recipe).

      L_t = -sg(w_t) A_t log pi_theta(y_t),   w_t = pi_theta(y_t) / pi_rollout(y_t)

  ``w_t`` uses the detached *current* log-prob against the sampler's
  ``batch.logp_behavior``: on-policy, the current parameters are the ones
  that sampled, so ``w`` is exactly the train/inference IS weight of the
  paper, and the gradient ``-w A grad log pi`` equals that of the ratio form
  ``-A pi_theta / pi_rollout``. ``max_weight`` truncates ``w`` (TIS-style; the
  abstract does not say whether ``w`` is truncated, so it is off by default);
  ``importance_weight=False`` gives ``w = 1`` (= ``gpg``). A ``correction`` is
  applied on top (use either it or ``importance_weight``, not both, to avoid
  weighting twice).

  Source: Qwen, "Stabilizing RL with LLMs: Formulation and Practices"
  (arXiv:2512.01374; seed 000 L7); verl ``compute_policy_loss_reinforce``
  (default aggregation ``seq_mean_token_sum``).
  """
  U.check_scalar("max_weight", max_weight, lo=0.0, lo_open=True, allow_none=True)
  U.check_logp_source("behavior_logp", behavior_logp)
  corrections = U.check_correction(correction)

  def term(out, batch, statistics=None):
    shape = U.check_inputs(out, batch)
    dtype = U.float_dtype(out.logp)
    logp = out.logp.astype(dtype)
    mask = batch.loss_mask.astype(dtype)
    adv = sg(batch.advantages.astype(dtype))
    metrics = {}
    if importance_weight:
      behav = U.get_logp(batch, behavior_logp, shape, name="reinforce behavior_logp").astype(dtype)
      log_w = jnp.where(mask > 0, jnp.clip(sg(logp) - behav, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP), 0.0)
      w = jnp.exp(log_w)
      if max_weight is not None:
        metrics["truncated_frac"] = U.masked_mean((w > max_weight).astype(dtype), mask)
        w = jnp.minimum(w, max_weight)
      metrics.update(U.ratio_metrics(log_w, mask))
      metrics["is_weight_mean"] = U.masked_mean(w, mask)
      metrics["is_weight_max"] = U.masked_max(w, mask)
    else:
      w = jnp.ones(shape, dtype)
    loss = -sg(w) * adv * jnp.where(mask > 0, logp, 0.0)
    return _finish(loss, mask, corrections, out, batch, shape, metrics, statistics)

  return _named(term, "reinforce", corrections)


def gpg(*, alpha: str = "none", correction=None):
  """GPG: the plain policy-gradient loss, no ratio and no clip.

      L_t = -A_t log pi_theta(y_t)                 (alpha="none")
      L_t = -(G / G_valid) A_t log pi_theta(y_t)   (alpha="valid_groups": the authors' 1/alpha, ``adjust_gd``)

  ``G``: the groups (``batch.group_id``) of the rows with a loss token; ``G_valid``: those of them with a non-zero
  advantage on some loss token (the authors' groups whose reward std is not 0). Counted on the whole batch (a
  batch statistic: exact under micro-batching); ``G_valid = 0`` gives factor 1 (every advantage is 0).

  Source: GPG ("GPG: A Simple and Strong RL Baseline", arXiv:2504.02546;
  no abstract in the seeds); checked against the authors' code
  (github.com/AMAP-ML/GPG, VisualThinker-R1-Zero ``grpo_trainer.py``,
  ``pg_name == 'gpg'``: ``-logp · A``, seq-mean-token-mean, the loss divided by
  alpha with ``adjust_gd``) and verl ``compute_policy_loss_gpg``. GPG's
  advantage ``(r - mean_g) / f_norm`` is ``grpo`` (``scale="group"``, ``eps=1e-4``, or ``scale="none"``); the
  authors' ``1/alpha`` loss scale is ``alpha="valid_groups"`` here. Their open-r1 ``train.sh`` launches
  ``gpg_trainer.py`` with ``--scale_rewards False --adjust_gd``: ``dr_grpo`` advantages, ``alpha="valid_groups"``.
  Equals ``reinforce(importance_weight=False)`` with ``alpha="none"``.
  """
  if alpha not in ("none", "valid_groups"):
    raise ValueError(f"gpg: alpha must be one of ['none', 'valid_groups'], got {alpha!r}")
  corrections = U.check_correction(correction)

  def factor(batch):
    if alpha == "none":
      return None
    return _gpg_alpha(batch)

  def term(out, batch, statistics=None):
    shape = U.check_inputs(out, batch)
    dtype = U.float_dtype(out.logp)
    mask = batch.loss_mask.astype(dtype)
    logp = jnp.where(mask > 0, out.logp.astype(dtype), 0.0)
    loss = -sg(batch.advantages.astype(dtype)) * logp
    metrics = {"logp_mean": U.masked_mean(sg(logp), mask)}
    own = None
    if alpha != "none":
      own = statistics[-1] if statistics is not None else factor(batch)
      statistics = statistics[0] if statistics is not None else None
      loss = loss * own.astype(dtype)
      metrics["gpg_alpha"] = own.astype(dtype)
    return _finish(loss, mask, corrections, out, batch, shape, metrics, statistics)

  term = _named(term, "gpg", corrections)
  if alpha != "none":
    inner = term
    term = with_statistics(term, lambda out, batch: (batch_statistics(inner, out, batch), factor(batch)))
  return term


def _gpg_alpha(batch) -> jax.Array:
  """``G / G_valid`` of ``gpg(alpha="valid_groups")`` over the rows of ``batch`` (1 when ``G_valid = 0``)."""
  m = batch.loss_mask > 0
  if batch.group_id is None:
    raise ValueError("gpg: alpha='valid_groups' needs batch.group_id (the groups whose rewards are compared)")
  gid = jnp.asarray(batch.group_id)
  live = jnp.any(m, axis=1)                                            # rows with a loss token
  signal = jnp.any(m & (batch.advantages != 0), axis=1) & live         # rows with a non-zero advantage
  same = gid[:, None] == gid[None, :]
  earlier = jnp.tril(jnp.ones(same.shape, bool), -1)
  first = lambda rows: rows & ~jnp.any(same & earlier & rows[None, :], axis=1)  # first row of its group among rows
  groups = jnp.sum(first(live))
  valid = jnp.sum(first(jnp.any(same & signal[None, :], axis=1) & live))
  dtype = jnp.promote_types(batch.advantages.dtype, jnp.float32)
  return jnp.where(valid > 0, groups / jnp.maximum(valid, 1), 1).astype(dtype)


# ----------------------------------------------------------------------------- sequence / segment ratios


def _gspo_check(eps_low, eps_high, old_logp, correction):
  _check_eps(eps_low, eps_high)
  U.check_logp_source("old_logp", old_logp)
  return U.check_correction(correction)


def gspo(eps_low=3e-4, eps_high=4e-4, *, correction=None, old_logp=None):
  """GSPO: clipped *sequence-level* ratio (gradient through the mean log-ratio).

      s_i = exp(min(mean_t log r_{i,t}, 10)) = (pi_theta(y_i|x) / pi_old(y_i|x))^(1/|y_i|)
      L_{i,t} = max(-A_{i,t} s_i, -A_{i,t} clip(s_i, 1 - eps_low, 1 + eps_high))

  The sequence loss is repeated on each token of the sequence, so
  ``seq_mean_token_mean`` gives the paper's ``mean_i L_i`` (GSPO,
  arXiv:2507.18071; verl ``gspo`` default aggregation); TRL
  ``importance_sampling_level="sequence"`` uses its ``loss_type`` aggregation
  (default token mean). Defaults eps 3e-4 / 4e-4 (paper, verl recipe). The
  clamp at 10 is verl's. With one-token sequences it equals ``ppo_clip``.
  """
  corrections = _gspo_check(eps_low, eps_high, old_logp, correction)

  def term(out, batch, statistics=None):
    _, log_ratio, adv, mask, shape = _prepare(out, batch, old_logp, "gspo")
    log_s = jnp.clip(U.seq_mean(log_ratio, mask), -LOG_RATIO_CLAMP, SEQ_LOG_RATIO_MAX)
    log_s = _seq_broadcast(log_s, shape)
    loss, low, high, _ = ppo_clip_loss(jnp.exp(log_s), adv, eps_low, eps_high)
    metrics = {**U.ratio_metrics(log_s, mask, log_ratio), **U.clip_metrics(low, high, mask)}
    return _finish(loss, mask, corrections, out, batch, shape, metrics, statistics)

  return _named(term, "gspo", corrections)


def gspo_token(eps_low=3e-4, eps_high=4e-4, *, correction=None, old_logp=None):
  """GSPO-token: the sequence ratio's value with a per-token gradient path.

      log s_{i,t} = min(log pi_theta(y_t) - sg(log pi_theta(y_t)) + sg(mean_t log r_{i,t}), 10)
      L_{i,t} = max(-A_{i,t} s_{i,t}, -A_{i,t} clip(s_{i,t}, 1 - eps_low, 1 + eps_high))

  ``s_{i,t}`` equals ``s_i`` in value at every token; each token's gradient
  is ``-A_{i,t} s_i grad log pi(y_t)``, so per-token advantages are allowed.
  With ``A`` constant per sequence and ``seq_mean_token_mean`` its gradient
  equals ``gspo``'s. No dual clip. Source: GSPO (arXiv:2507.18071);
  verl ``gspo`` (``compute_policy_loss_gspo``; default ``seq_mean_token_mean``).
  """
  corrections = _gspo_check(eps_low, eps_high, old_logp, correction)

  def term(out, batch, statistics=None):
    logp, log_ratio, adv, mask, shape = _prepare(out, batch, old_logp, "gspo_token")
    log_s_seq = _seq_broadcast(sg(U.seq_mean(log_ratio, mask)), shape)
    log_s = jnp.minimum(logp - sg(logp) + log_s_seq, SEQ_LOG_RATIO_MAX)
    log_s = jnp.where(mask > 0, log_s, 0.0)
    loss, low, high, _ = ppo_clip_loss(jnp.exp(log_s), adv, eps_low, eps_high)
    metrics = {**U.ratio_metrics(log_s, mask, log_ratio), **U.clip_metrics(low, high, mask)}
    return _finish(loss, mask, corrections, out, batch, shape, metrics, statistics)

  return _named(term, "gspo_token", corrections)


def gmpo(eps_low=0.4, eps_high=0.4, *, correction=None, old_logp=None):
  """GMPO: geometric mean of token ratios, clipped per token in log space.

      lr_t   = log r_t,   sgn_t = sign(A_t)
      lr'_t  = sgn_t * min(sgn_t lr_t, sgn_t clip(lr_t, -eps_low, eps_high))
      rho_i  = exp(mean_t lr'_t),   Abar_i = mean_t A_t
      L_{i,t} = -Abar_i rho_i        (same value on every token of sequence i)

  With ``seq_mean_token_mean`` this is the paper's ``mean_i(-Abar_i rho_i)``
  (GMPO, arXiv:2507.20673; the paper's clip range is (e^-0.4, e^0.4), our
  default; checked against the authors' ``train_zero_math_gmpo.py``, which
  takes one sequence with a scalar advantage per micro-batch). verl ``geo_mean`` computes the same but always takes the plain
  batch mean (ignoring ``loss_agg_mode``, and counting all-masked rows as 0);
  verl's eps come from ``clip_ratio_low/high`` (0.2 by default). TRL has it
  in ``experimental/gmpo``.

  Corrections (as verl does with its IS weights): tokens a correction drops
  are removed from the sequence (means over the kept tokens), and the
  sequence is weighted by the geometric mean of the kept tokens' weights.
  With no token clipped, ``rho_i`` equals GSPO's ``s_i``.
  """
  U.check_scalar("eps_low", eps_low, lo=0.0)
  U.check_scalar("eps_high", eps_high, lo=0.0)
  U.check_logp_source("old_logp", old_logp)
  corrections = U.check_correction(correction)

  def term(out, batch, statistics=None):
    _, log_ratio, adv, mask, shape = _prepare(out, batch, old_logp, "gmpo")
    weight, keep, c_metrics = U.apply_corrections(corrections, out, batch, shape, mask, statistics)
    m = mask * keep
    sgn = jnp.sign(adv)
    clipped = jnp.clip(log_ratio, -eps_low, eps_high)
    lr = sgn * jnp.minimum(sgn * log_ratio, sgn * clipped)
    log_rho = jnp.clip(U.seq_mean(lr, m), -LOG_RATIO_CLAMP, SEQ_LOG_RATIO_MAX)
    rho = _seq_broadcast(jnp.exp(log_rho), shape)
    adv_bar = _seq_broadcast(U.seq_mean(adv, m), shape)
    loss = -adv_bar * rho
    if corrections:
      seq_w = jnp.exp(U.seq_mean(jnp.log(jnp.maximum(weight, 1e-30)), m))
      loss = loss * _seq_broadcast(sg(seq_w), shape)
    has = (jnp.sum(m, axis=1, keepdims=True) > 0).astype(mask.dtype)
    loss = loss * mask * has
    low = (adv < 0) & (log_ratio < -eps_low)
    high = (adv > 0) & (log_ratio > eps_high)
    metrics = {**U.ratio_metrics(_seq_broadcast(log_rho, shape), m, log_ratio), **U.clip_metrics(low, high, m),
               "pg_loss": U.masked_mean(loss, mask), **_entropy_metric(out, mask, shape), **c_metrics}
    return loss, U.stop_metrics(metrics)

  return _named(term, "gmpo", corrections)


def segment_ratio(eps_low=0.06, eps_high=0.08, *, segment_ids="reward_segments", max_segments: Optional[int] = None,
                  correction=None, old_logp=None):
  """Segment-level geometric-mean ratio (Rank-GRPO; turns, list items).

      rho_seg = exp(min(sum_{t in seg} log r_t / n_seg, 10))
      L_t = max(-A_t rho_{seg(t)}, -A_t clip(rho_{seg(t)}, 1 - eps_low, 1 + eps_high))

  ``n_seg`` counts the segment's loss tokens; the gradient flows through the
  segment mean (as in ``gspo``). Segments are the tokens of one row sharing
  an id in ``[0, max_segments)`` (default ``T``); they need not be
  contiguous. With one segment per sequence ``rho`` is GSPO's ``s_i`` and the
  term equals ``gspo(eps_low, eps_high)``.

  Source: ConvRec-R1 / Rank-GRPO (seed 000 L87), checked against the
  authors' code (github.com/yaochenzhu/Rank-GRPO,
  ``libs/trl/rank_grpo_trainer.py``, ``importance_sampling_level="item"``):
  the item ratio is exp of the mean token log-ratio over the item's tokens
  (gradient through the mean), PPO-clipped with the token's (item-broadcast)
  advantage; defaults eps 0.06 / 0.08 are ``train_rank_grpo.py``'s. The
  code puts tokens past the last item in one overflow bin (give them their
  own id here) and aggregates with TRL's ``loss_type`` (``token_mean`` =
  ``bnpo``, ``seq_mean_token_mean`` = ``grpo``). Differences: log-ratios
  clamped (±20 per token, rho at 10; the code has none).

  Args:
    segment_ids: a key of ``batch.extras`` (default ``"reward_segments"``:
      the step's reward segments, ``rljax.stages.StepData.reward_segments``),
      a ``TrainBatch`` field (``"turn_ids"``; ``"segment_ids"`` is the
      attention packing: one segment per packed sequence), or a callable
      ``batch -> [B, T]`` int array.
    max_segments: static bound on the ids (``ids < max_segments``).
  """
  eps_high = eps_low if eps_high is None else eps_high
  _check_eps(eps_low, eps_high)
  if max_segments is not None and (not isinstance(max_segments, (int, np.integer)) or max_segments <= 0):
    raise ValueError(f"max_segments must be a positive int or None, got {max_segments!r}")
  if not (isinstance(segment_ids, str) or callable(segment_ids)):
    raise ValueError(f"segment_ids must be a TrainBatch field / extras key or a callable, got {segment_ids!r}")
  U.check_logp_source("old_logp", old_logp)
  corrections = U.check_correction(correction)

  def term(out, batch, statistics=None):
    _, log_ratio, adv, mask, shape = _prepare(out, batch, old_logp, "segment_ratio")
    ids = _get_ids(batch, segment_ids, shape)
    n = shape[1] if max_segments is None else int(max_segments)
    v = U.concrete_value(ids) if U.is_concrete(ids) else None
    if v is not None and U.is_concrete(mask):  # ids outside the loss mask (-1 = none: padding) are not read
      v = v[np.asarray(U.concrete_value(mask)) > 0]
    if v is not None and v.size and (v.min() < 0 or v.max() >= n):
      raise ValueError(f"segment_ratio: segment_ids must lie in [0, {n}) (max_segments={max_segments}) on the loss "
                       f"tokens, got values in [{int(v.min())}, {int(v.max())}]")
    ids = jnp.where(mask > 0, ids, 0)
    log_rho = jnp.clip(U.segment_mean(log_ratio, mask, ids, n), -LOG_RATIO_CLAMP, SEQ_LOG_RATIO_MAX)
    log_rho = jnp.where(mask > 0, log_rho, 0.0)
    loss, low, high, _ = ppo_clip_loss(jnp.exp(log_rho), adv, eps_low, eps_high)
    metrics = {**U.ratio_metrics(log_rho, mask, log_ratio), **U.clip_metrics(low, high, mask)}
    return _finish(loss, mask, corrections, out, batch, shape, metrics, statistics)

  return _named(term, "segment_ratio", corrections)


def _get_ids(batch, source, shape):
  ids, label = U.batch_source(batch, source, ("segment_ids", "turn_ids"), name="segment_ratio segment_ids")
  if tuple(np.shape(ids)) != tuple(shape):
    raise ValueError(f"{label} must have shape {tuple(shape)}, got {np.shape(ids)}")
  dtype = jnp.asarray(ids).dtype if U.is_concrete(ids) else ids.dtype
  if not jnp.issubdtype(dtype, jnp.integer):
    raise ValueError(f"{label} must be an integer array, got dtype {dtype}")
  return jnp.asarray(ids)


# ----------------------------------------------------------------------------- other ratio shapes


def cispo(eps_low=None, eps_high=4.0, *, correction=None, old_logp=None):
  """CISPO: clip the detached IS weight, never the gradient.

      L_t = -sg(clip(r_t, 1 - eps_low, 1 + eps_high)) A_t log pi_theta(y_t)

  ``eps_low=None`` leaves the weight unclipped below (the paper tunes only the
  upper bound; TRL's ``cispo`` is upper-only with ``min(r, epsilon_high)``,
  ``epsilon_high = 5.0`` recommended). verl ``cispo`` clips both sides with
  ``clip_ratio_low/high`` (v0.7.0 actor.yaml defaults 0.2/0.2); verl (1.0, 4.0) equals TRL
  (5.0). Our default ``eps_high = 4.0`` is TRL's recommended cap 5.0.
  ``eps_low`` may be up to 1 (1 = no lower clip). Aggregation: the paper and
  TRL use a token mean (``token_mean``).

  Source: MiniMax-M1 (arXiv:2506.13585); verl ``cispo``; TRL ``cispo``.
  ``clip_frac_high`` / ``clip_frac_low`` report where the *weight* saturates
  (the gradient does not vanish there).
  """
  U.check_scalar("eps_low", eps_low, lo=0.0, hi=1.0, allow_none=True)
  U.check_scalar("eps_high", eps_high, lo=0.0)
  U.check_logp_source("old_logp", old_logp)
  corrections = U.check_correction(correction)

  def term(out, batch, statistics=None):
    logp, log_ratio, adv, mask, shape = _prepare(out, batch, old_logp, "cispo")
    ratio = jnp.exp(log_ratio)
    hi = 1.0 + eps_high
    w = jnp.minimum(ratio, hi)
    low = jnp.zeros_like(ratio, dtype=bool)
    if eps_low is not None:
      w = jnp.maximum(w, 1.0 - eps_low)
      low = ratio < 1.0 - eps_low
    loss = -sg(w) * adv * jnp.where(mask > 0, logp, 0.0)
    metrics = {**U.ratio_metrics(log_ratio, mask), **U.clip_metrics(low, ratio > hi, mask),
               "weight_mean": U.masked_mean(w, mask)}
    return _finish(loss, mask, corrections, out, batch, shape, metrics, statistics)

  return _named(term, "cispo", corrections)


def sapo(tau_pos=1.0, tau_neg=1.05, *, correction=None, old_logp=None):
  """SAPO: a smooth sigmoid gate instead of the hard clip.

      tau_t = tau_pos if A_t > 0 else tau_neg
      L_t = -A_t sigma(tau_t (r_t - 1)) 4 / tau_t

  At ``r = 1`` the gradient is ``-A grad log pi`` (``4 sigma'(0) = 1``); it
  decays smoothly, never to a zero plateau. Aggregation: verl always uses
  ``seq_mean_token_mean`` (ignores its argument), TRL a sequence mean,
  AReaL ``sapo_loss_fn`` a token mean -- choose with ``chain(aggregate=)``.

  Source: Qwen, "Soft Adaptive Policy Optimization" (arXiv:2511.20347);
  verl ``sapo`` (``tau_pos=1.0``, ``tau_neg=1.05``), TRL
  ``loss_type="sapo"``, AReaL ``sapo_loss_fn``.
  """
  U.check_scalar("tau_pos", tau_pos, lo=0.0, lo_open=True)
  U.check_scalar("tau_neg", tau_neg, lo=0.0, lo_open=True)
  U.check_logp_source("old_logp", old_logp)
  corrections = U.check_correction(correction)

  def term(out, batch, statistics=None):
    _, log_ratio, adv, mask, shape = _prepare(out, batch, old_logp, "sapo")
    ratio = jnp.exp(log_ratio)
    tau = jnp.where(adv > 0, tau_pos, tau_neg)
    gate = jax.nn.sigmoid(tau * (ratio - 1.0)) * (4.0 / tau)
    loss = -adv * gate
    metrics = {**U.ratio_metrics(log_ratio, mask), "gate_mean": U.masked_mean(gate, mask)}
    return _finish(loss, mask, corrections, out, batch, shape, metrics, statistics)

  return _named(term, "sapo", corrections)


_DRIFT = ("k1", "k2", "k3")


def cpgd(eps_low=0.2, eps_high=None, drift_coef=0.1, *, drift_estimator: str = "k3", correction=None,
         old_logp=None):
  """CPGD: clipped *log*-ratio policy gradient plus a policy-drift KL.

      lr_t = log r_t
      L_t = max(-A_t lr_t, -A_t clip(lr_t, log(1 - eps_low), log(1 + eps_high))) + alpha * D_t
      D_t = r_t - 1 - lr_t  (k3: KL(pi_old || pi_theta) from old-policy samples)

  (``drift_estimator="k1"``: ``D = -lr``; ``"k2"``: ``D = lr^2 / 2``.) At
  ``pi_theta = pi_old`` the loss is 0, the drift gradient is 0 and the PG
  gradient is ``-A grad log pi``; tokens past the log-space clip in A's
  favoured direction get no PG gradient.

  Source: CPGD (arXiv:2505.12504; seed 000 L43; MM-EUREKA). The abstract names only the
  log-ratio clip and the KL drift regulariser. Checked against siiRL
  (github.com/sii-research/siiRL, ``siirl/dag_worker/core_algos.py::
  compute_policy_loss_cpgd`` and the drift in ``engine/actor/dp_actor.py``;
  the paper's code link, ModalMinds/MM-EUREKA, holds no CPGD code in the
  stored snapshot): its PG term ``-A · clip(log π)`` (log π clipped at
  log π_old + log(1 ± eps) on A's side) has exactly our gradient (its value
  is ours shifted by ``-A log π_old``), and its drift
  ``sg(min(r − 1, 2)) · log π`` is the gradient of our k3 drift, capped at
  r = 3. Its example scripts use ``policy_drift_coeff = 0.001`` and
  ``token_mean``; our ``alpha = 0.1`` is kept (not the paper's value, which we
  could not read).
  """
  eps_high = eps_low if eps_high is None else eps_high
  _check_eps(eps_low, eps_high)
  U.check_scalar("drift_coef", drift_coef, lo=0.0)
  U.check_choice("drift_estimator", drift_estimator, _DRIFT)
  U.check_logp_source("old_logp", old_logp)
  corrections = U.check_correction(correction)

  def term(out, batch, statistics=None):
    _, log_ratio, adv, mask, shape = _prepare(out, batch, old_logp, "cpgd")
    lo, hi = jnp.log1p(-jnp.asarray(eps_low, log_ratio.dtype)), jnp.log1p(jnp.asarray(eps_high, log_ratio.dtype))
    pg = jnp.maximum(-adv * log_ratio, -adv * jnp.clip(log_ratio, lo, hi))
    if drift_estimator == "k1":
      drift = -log_ratio
    elif drift_estimator == "k2":
      drift = 0.5 * jnp.square(log_ratio)
    else:
      drift = jnp.exp(log_ratio) - 1.0 - log_ratio
    loss = pg + drift_coef * drift
    low = (adv < 0) & (log_ratio < lo)
    high = (adv > 0) & (log_ratio > hi)
    metrics = {**U.ratio_metrics(log_ratio, mask), **U.clip_metrics(low, high, mask),
               "drift": U.masked_mean(drift, mask)}
    return _finish(loss, mask, corrections, out, batch, shape, metrics, statistics)

  return _named(term, "cpgd", corrections)


def pspo(alpha=0.1, *, clip_eps=None, correction=None, old_logp=None):
  """PSPO probability smoothing: the ratio of a policy smoothed toward the old one.

      pi~ = (1 - alpha) pi_theta + alpha pi_old   =>   r~_t = (1 - alpha) r_t + alpha
      L_t = -A_t r~_t

  used in place of the clipped ratio, so the gradient ``(1 - alpha) grad r``
  is never cut off; ``r~ >= alpha``. ``clip_eps`` additionally applies a PPO
  clip to ``r~`` (our option; off in GR-PSPO). Source: PSPO / GR-PSPO
  (seed 000 L119; arXiv:2509.21282), checked against the authors' patch of
  TRL 0.25.1 (github.com/MCDwyer/GR-PSPO, ``grpotrainer.patch``:
  ``-((1 - smoothing_alpha) coef_1 + smoothing_alpha) A``, no min, no clip;
  ``grpoconfig.patch``: ``smoothing_alpha = 0.1``, our default). Aggregation
  is TRL's ``loss_type`` there (``"dapo"`` in ``maths_finetuning.py``).
  """
  U.check_scalar("alpha", alpha, lo=0.0, hi=1.0)
  U.check_scalar("clip_eps", clip_eps, lo=0.0, hi=1.0, hi_open=True, allow_none=True)
  U.check_logp_source("old_logp", old_logp)
  corrections = U.check_correction(correction)

  def term(out, batch, statistics=None):
    _, log_ratio, adv, mask, shape = _prepare(out, batch, old_logp, "pspo")
    smoothed = (1.0 - alpha) * jnp.exp(log_ratio) + alpha
    if clip_eps is None:
      loss = -adv * smoothed
      low = high = jnp.zeros_like(smoothed, dtype=bool)
    else:
      loss, low, high, _ = ppo_clip_loss(smoothed, adv, clip_eps, clip_eps)
    metrics = {**U.ratio_metrics(log_ratio, mask), **U.clip_metrics(low, high, mask),
               "smoothed_ratio_mean": U.masked_mean(smoothed, mask)}
    return _finish(loss, mask, corrections, out, batch, shape, metrics, statistics)

  return _named(term, "pspo", corrections)


def _technique_rows():
  from rljax._technique import Fidelity, Technique
  from rljax.objectives import _peer_conventions as PC
  from rljax.objectives import _stages as S
  from rljax.stages import loss_term_factory
  verl = "verl v0.7.0 core_algos."
  _V07 = "volcengine/verl@v0.7.0 (f9c855f7) verl/trainer/ppo/core_algos.py"
  _TRL19 = "huggingface/trl@v1.9.0 (35def3ee)"
  rows = [
      ("ppo_clip", ppo_clip, "max(-A r, -A clip(r, 1-eps_low, 1+eps_high)); A<0: min(., -A c)",
       "PPO arXiv:1707.06347; DAPO arXiv:2503.14476; dual clip arXiv:1912.09729; verl vanilla",
       loss_term_factory(ppo_clip, hparams=S.CLIP, fill=S.EPS_HIGH, role="policy", needs=S.logp_needs("old_logp")),
       Fidelity("peer", verl + "compute_policy_loss_vanilla; TRL GRPOTrainer loss_type='dapo'",
                "dual clip off unless dual_clip=c (verl: always on, c=3.0; TRL: none); dual_clip=3.0 gives verl's form",
                read="volcengine/verl@v0.7.0 (f9c855f7) verl/trainer/ppo/core_algos.py:906-997 "
                     "compute_policy_loss_vanilla (:957-982 the per-token loss, its dual clip at :976-982; :988-990 "
                     "agg_loss; the same function, line for line, in the verl 0.9.1 PyPI wheel's core_algos.py:"
                     "1285-1376); verl/trainer/config/actor/actor.yaml:"
                     "36-42, 79 (clip_ratio / clip_ratio_low / clip_ratio_high 0.2, clip_ratio_c 3.0; 0.9.1: :36-42, "
                     ":83); read whole (#51): " + _TRL19 + " trl/trainer/grpo_trainer.py:3054-3091 (coef_1 = "
                     "exp(log r), unclamped; coef_2 = clamp(coef_1, 1 − epsilon_low, 1 + epsilon_high); with delta "
                     "coef_1 = clamp(coef_1, max=delta); −min(coef_1·A, coef_2·A)), :918-921, grpo_config.py:187-193, "
                     "680-700 (epsilon 0.2, epsilon_high None → epsilon, delta None); peer conventions (#51 sweep "
                     "s1a): " + PC.READ_VERL_T + "; " + PC.READ_TRL_T + ", " + PC.READ_TRL_VLLM + "; " + PC.READ_DENOM
                     + "; the default paths: verl 0.9.1's v1 trainer (ppo_trainer.yaml:232 use_v1 true) updates "
                     "through the engine's ppo_loss with actor.policy_loss.loss_mode 'vanilla' (actor.yaml:61, :86 "
                     "loss_agg_mode token-mean): compute_policy_loss_vanilla; verl v0.7.0 dp_actor.py:432, 478-479 "
                     "(one mini-batch and one epoch: π_old = the current log-probs, detached); TRL's GRPOTrainer "
                     "defaults to loss_type 'dapo'. Row review a (#51, per-row review): the record cited :907-975, which stops "
                     "before the dual clip (:976-982) it describes; and its placement gave TRL's recompute of the old "
                     "log-probs as 'num_iterations > 1 or steps_per_generation > gradient_accumulation_steps', where "
                     "grpo_trainer.py:2561-2564 tests gradient_accumulation_steps % (steps_per_generation × "
                     "num_iterations) ≠ 0 (e.g. num_iterations 2, steps_per_generation 2, gradient_accumulation_steps "
                     "4 reuses the generation batch within one optimizer step and keeps the detached current "
                     "log-probs)",
                defaults=(("eps_low", "0.2", "verl clip_ratio_low 0.2 (actor.yaml; None → clip_ratio 0.2); TRL "
                           "epsilon 0.2"),
                          ("eps_high", "eps_low", "verl clip_ratio_high 0.2 (else clip_ratio); TRL epsilon_high None "
                           "→ epsilon"),
                          ("dual_clip", "None (off)", "verl clip_ratio_c = 3.0, always on; TRL delta None (off)"),
                          ("log-ratio clamp", "±20", "verl ±20; TRL none"),
                          (PC.T_NAME, PC.T_OURS, PC.T_VERL + "; " + PC.T_TRL),
                          ("aggregation", "chain's (token_mean)", "verl actor loss_agg_mode token-mean; TRL loss_type "
                           "'dapo'"),
                          (PC.DENOM_NAME, PC.DENOM_OURS_TOKEN_MEAN, PC.DENOM_VERL + "; " + PC.DENOM_TRL)),
                placement="theirs: verl: the actor's loss on each micro-batch, ratio π_θ/π_old from the recomputed "
                          "old log-probs (v0.7.0 with one mini-batch and one epoch: the current ones, detached), both "
                          "at the rollout temperature, aggregated by agg_loss(loss_agg_mode) (v0.7.0: the "
                          "micro-batch's own counts × 1/gradient_accumulation; 0.9.1: the mini-batch's global "
                          "counts); TRL: _compute_loss on each micro-batch, π_old the detached current log-probs "
                          "unless gradient_accumulation_steps % (steps_per_generation × num_iterations) ≠ 0 (a "
                          "generation batch reused across optimizer steps: the old log-probs are then recomputed at "
                          "generation) or the vLLM correction is on, all ÷ temperature, dapo's Σ ÷ "
                          "num_items_in_batch; ours: a loss term on each micro-batch, log π_old = logp_old (else "
                          "logp_behavior), untempered, aggregated by chain with the step batch's denominator",
                deviations=("the dual clip is off by default (TRL's delta is off by default); dual_clip=3.0 gives "
                            "verl's loss; TRL's delta (INTELLECT-2: the unclipped ratio capped at delta) gives the "
                            "same per-token loss as dual_clip=delta when delta ≥ 1 + eps_high (its recommended range)",
                            "log r clamped to ±20 (verl); TRL exponentiates unclamped (equal while |log r| ≤ 20)",
                            "padded tokens get log ratio 0 (ratio 1) before the mask; verl's mask is applied in "
                            "agg_loss only",
                            PC.T_DEVIATION,
                            PC.DENOM_DEVIATION_TOKEN_MEAN))),
      ("reinforce", reinforce, "-sg(pi_theta/pi_rollout) A log pi_theta",
       "MiniRL, arXiv:2512.01374 (seed 000 L7); verl compute_policy_loss_reinforce",
       loss_term_factory(reinforce, role="policy", needs={"logp_behavior"}),
       Fidelity("peer", "verl v0.7.0 core_algos.compute_policy_loss_reinforce (bypass_mode, loss_type='reinforce')",
                "w = pi_theta/pi_rollout untruncated by default (verl: no w unless rollout_is is set; then "
                "truncated at rollout_is_threshold=2.0): max_weight=2.0 gives verl's rollout_is='token' form",
                read=_V07 + ":1731-1808 compute_policy_loss_reinforce and :1811-1953 compute_policy_loss_bypass_mode "
                     "(w from rollout_corr_helper.py:318-436 compute_rollout_correction_weights with "
                     "old_log_prob=log_prob, under no_grad); read whole (#51): the verl 0.9.1 PyPI wheel "
                     "core_algos.py:2333-2410 and :2414-2520 (the same loss and bypass path), "
                     "trainer/config/algorithm.py:353-397 (presets bypass_pg_is: rollout_is 'sequence', 2.0; "
                     "bypass_pg_token_icepop: rollout_is 'token', '0.5_5.0', the IcePop weight), "
                     "rollout_corr_helper.py:522-657; peer conventions (#51 sweep s1a): " + PC.READ_VERL_T + "; "
                     + PC.READ_V1_BYPASS + "; volcengine/verl@v0.7.0 trainer/ppo/ray_trainer.py:1440-1450 "
                     "(apply_bypass_mode) and rollout_corr_helper.py apply_bypass_mode (needs rollout_log_probs: "
                     "rollout.calculate_log_probs True, default False); " + PC.READ_DENOM + ". Row review a (#51, per-row "
                     "review): volcengine/verl@v0.7.0 verl/workers/actor/dp_actor.py:430-432, 475-481 (on_policy = "
                     "one mini-batch and ppo_epochs 1: old_log_prob = log_prob.detach() replaces the batch's "
                     "old_log_probs, in bypass mode the rollout log-probs, unless actor.use_rollout_log_probs, False "
                     "in FSDPActorConfig, verl/workers/config/actor.py:285), so compute_policy_loss_bypass_mode gets "
                     "rollout_log_prob = the current log-probs: w = 1 and nothing is rejected; the record's placement "
                     "had w always against the rollout log-prob. examples/rollout_correction/"
                     "run_with_rollout_corr.sh:16-18, 29-30, 47-49, 56, 84 (verl's reinforce-bypass example: "
                     "rollout_is 'sequence', rollout_is_threshold 2.0, rollout_is_batch_normalize true, bypass_mode "
                     "true, loss_type reinforce, train_batch_size 128, ppo_mini_batch_size 32, ppo_epochs 1, "
                     "adv_estimator rloo, rollout.calculate_log_probs True) and rollout_corr_helper.py:399-430 (the "
                     "truncation, then the sequence level's weights ÷ their mean over the rows, "
                     "distributed_masked_mean over the dp ranks, inside each micro-batch's loss): not in the record. "
                     "The deviation's '(the MiniRL form)' had no citation: seed 000 L7, the only text of the paper "
                     "read, is its abstract, which names no MiniRL and says clipping becomes essential once updates "
                     "go off-policy. Thirteenth draw (#51 item 4, seed 20261218): run_with_rollout_corr.sh:63-89 "
                     "sets neither actor.ppo_micro_batch_size(_per_gpu) nor use_dynamic_bsz (both null / false in "
                     "trainer/config/_generated_ppo_trainer.yaml:51-53), and main_ppo.py:292-296 runs "
                     "verl/utils/config.py:151 (omega_conf_to_dataclass of the actor config), whose "
                     "verl/workers/config/actor.py:184-187 (ActorConfig.__post_init__, via FSDPActorConfig :289) "
                     "asserts one of them is set: the example stops before training as released (its values are "
                     "what runs once a micro-batch size is added); the verl 0.9.1 PyPI wheel trainer/config/"
                     "algorithm.py:400-421, 474-499, 502-529 (three more loss_type 'reinforce' presets: "
                     "bypass_pg_geo_rs, bypass_pg_geo_rs_seq_tis, bypass_pg_geo_rs_token_tis: rollout_rs "
                     "'seq_mean_k1', rollout_rs_threshold '0.999_1.001', the last two with rollout_is 'sequence' / "
                     "'token', threshold 2.0) and rollout_corr_helper.py:132-194, 197-415 (seq_mean_k1, :342-349: a row is "
                     "kept when log 0.999 ≤ mean_t(−clamp(log r_t, ±20)) ≤ log 1.001, else its response_mask is "
                     "zeroed); volcengine/verl@v0.7.0 trainer/config/algorithm.py:336-367 and :405-439 (its own reinforce "
                     "presets besides bypass_pg_is: bypass_pg_rs: rollout_rs 'geometric', threshold 1.001, lower "
                     "1/1.001, rollout_token_veto_threshold 1e-4; bypass_pg_geo_rs_seq_tis: the same plus rollout_is "
                     "'sequence', 2.0) and rollout_corr_helper.py:82-195 (geometric: exp(clamp(mean_t log r_t, ±20)) "
                     "kept inside [1/1.001, 1.001]), :656-677 (the veto: a row with any loss token whose unclamped "
                     "log r < log 1e-4 is dropped from response_mask). The record named neither the example's "
                     "failure nor these presets",
                defaults=(("importance weight", "on (importance_weight=True)",
                           "off unless rollout_correction.rollout_is is set ('token' or 'sequence'); 1 on v0.7.0's "
                           "legacy dp_actor with one mini-batch and one epoch (the rollout log-probs replaced)"),
                          ("max_weight", "None (untruncated)", "rollout_is_threshold = 2.0"),
                          ("weight level", "token", "rollout_is: 'token' or 'sequence' (product of ratios)"),
                          ("log-ratio clamp", "±20", "±20 (SAFETY_BOUND)"),
                          ("rollout_is_batch_normalize", "not offered here (tis(normalize=True) as correction: ÷ the "
                           "token-weighted mean of w over the whole batch)",
                           "False (rollout_correction.yaml); verl's reinforce example: true: at the sequence level "
                           "the truncated weights ÷ their mean over the micro-batch's non-empty rows (all dp ranks)"),
                          ("mini-batches per step (verl's example)", "rl.num_minibatches × rl.updates_per_batch",
                           "train_batch_size 128 ÷ ppo_mini_batch_size 32 = 4, ppo_epochs 1, rloo advantages"),
                          ("aggregation", "chain's (token_mean)", "actor loss_agg_mode (token-mean)"),
                          (PC.DENOM_NAME, PC.DENOM_OURS_TOKEN_MEAN, PC.DENOM_VERL),
                          (PC.T_NAME, PC.T_OURS, PC.T_VERL + " (log π_θ in w and in the loss)"),
                          (PC.TOPP_NAME, PC.TOPP_OURS, PC.TOPP_VERL),
                          (PC.V1_BYPASS_NAME, "the reinforce term runs whenever it is the loss",
                           "legacy trainer (use_v1 false): algorithm.rollout_correction bypass_mode True, loss_type "
                           "'reinforce' (bypass_pg_* presets; v0.7.0 also rollout.calculate_log_probs True); the "
                           "default v1 trainer: only actor.policy_loss.loss_mode 'bypass_mode' with "
                           "actor.policy_loss.rollout_correction.loss_type 'reinforce' (else PPO clip, no w)")),
                placement="theirs: in bypass mode (old_log_prob = rollout log-prob) the actor's loss on each "
                          "micro-batch, w from the current π_θ (detached, at rollout.temperature) against the "
                          "rollout log-prob (vLLM processed_logprobs: tempered, top-k / top-p renormalised), "
                          "optional rejection rewriting response_mask; reached through apply_bypass_mode, which "
                          "verl 0.9.1's default v1 trainer never calls; on verl v0.7.0's legacy dp_actor with one "
                          "mini-batch and one epoch the rollout log-prob is replaced by the current log-prob, "
                          "detached (dp_actor.py:478-479), so w = 1; ours: a loss term on each micro-batch, w "
                          "from sg(log π_θ) − logp_behavior, both untempered and untruncated",
                deviations=("w is on by default and untruncated (the abstract's 'basic policy gradient algorithm with "
                            "importance sampling correction' for on-policy training; the paper's body, its MiniRL "
                            "objective and whatever clipping it adds for off-policy updates, not read); verl weights "
                            "only with rollout_is set, truncated at 2.0: importance_weight=False gives verl's "
                            "default, max_weight=2.0 its rollout_is='token'",
                            "verl v0.7.0's legacy dp_actor with one mini-batch and one epoch (train_batch_size = "
                            "ppo_mini_batch_size, ppo_epochs 1) replaces the rollout log-probs by the detached "
                            "current ones, so its bypass reinforce has w = 1 whatever rollout_is: "
                            "importance_weight=False gives it; verl 0.9.1's engine has no such replacement",
                            "verl's rollout_is='sequence' weight (product over the sequence) is not a reinforce "
                            "option: importance_weight=False with correction=tis(2.0, level='sequence'), equal while "
                            "tis's train side logp_old is the current policy (one optimizer step per batch, or the "
                            "first); verl's is the current π_θ on every mini-batch",
                            "verl's reinforce example normalises the sequence weights (rollout_is_batch_normalize "
                            "true) by their mean over each micro-batch's rows; tis(2.0, level='sequence', "
                            "normalize=True) divides by the token-weighted mean over the whole batch: equal only "
                            "when every row has the same number of loss tokens and one micro-batch holds the batch",
                            "w of padded tokens is 1 (masked out after); verl multiplies w by response_mask",
                            "verl v0.7.0's reinforce example (examples/rollout_correction/run_with_rollout_corr.sh) "
                            "does not start as released: it sets no actor micro-batch size and no use_dynamic_bsz, "
                            "so the config check (ActorConfig.__post_init__, verl/workers/config/actor.py:184-187) "
                            "stops it before training; the values listed for it are what runs once "
                            "actor.ppo_micro_batch_size_per_gpu is added",
                            "verl 0.9.1's geometric rejection presets with loss_type 'reinforce' (bypass_pg_geo_rs, "
                            "bypass_pg_geo_rs_seq_tis, bypass_pg_geo_rs_token_tis: rollout_rs 'seq_mean_k1' "
                            "'0.999_1.001', a row dropped unless 0.999 ≤ exp(−mean_t log r_t) ≤ 1.001) are "
                            "importance_weight=False with correction=mis(1/1.001, 1/0.999, level='geometric', "
                            "reweight=False), plus tis(2.0, level='sequence') or tis(2.0) for the _seq_tis / "
                            "_token_tis ones (each token's log r clamped to ±20 before their mean, ours after; equal "
                            "while |log r| ≤ 20; correction=divergence_rejection((log 0.999, log 1.001), "
                            "estimator='k1', level='sequence_mean') clamps as theirs); verl v0.7.0's bypass_pg_rs and "
                            "bypass_pg_geo_rs_seq_tis (rollout_rs 'geometric' 1.001: mis(1/1.001, 1.001, "
                            "level='geometric', reweight=False)) also set rollout_token_veto_threshold 1e-4 (a row "
                            "with any token ratio below 1e-4 rejected whole): no correction here rejects a row on one "
                            "token's low ratio (not built), so those presets differ on such rows; what the train side "
                            "of w and of the mask is follows the deviations above",
                            "verl 0.9.1's IcePop weight (rollout_is_threshold 'L_U', preset bypass_pg_token_icepop "
                            "'0.5_5.0': the ratio inside [L, U], 0 outside) is importance_weight=False with "
                            "correction=icepop(0.5, 5.0); its preset bypass_pg_is is the sequence form above",
                            PC.V1_BYPASS_DEVIATION + ": the reinforce loss is verl's only on the legacy trainer or "
                            "with the actor's own policy_loss set as above",
                            "w and log π: " + PC.TOPP_DEVIATION + "; w's training side is sg(log π_θ) of the "
                            "untempered forward, so no option gives theirs here",
                            PC.DENOM_DEVIATION_TOKEN_MEAN))),
      ("gpg", gpg, "-A log pi_theta", "GPG arXiv:2504.02546; verl gpg",
       loss_term_factory(gpg, role="policy"),
       Fidelity("authors_code", "github.com/AMAP-ML/GPG: open-r1/src/open_r1/gpg_trainer.py (GPGTrainer)",
                "the code's 1/alpha loss scale (adjust_gd) is alpha='valid_groups' (default 'none'); advantage = "
                "grpo(scale='none' or eps=1e-4); aggregation is chain's",
                read="AMAP-ML/GPG@e096da8c (2025-05-21, fetched snapshot) open-r1/src/open_r1/gpg_trainer.py:"
                     "280-318 (compute_loss: −log π·A, token mean over the micro-batch, ÷ inverse_alpha with "
                     "adjust_gd), :540-627 (resampling until n_valid ≥ min_inverse_alpha·groups; A = r − mean_g, "
                     "÷ (std_g + 1e-4) with scale_rewards; inverse_alpha = min(1, n_valid / groups)), :130-150, "
                     ":225-235 (weighted_sample sampler); open-r1/src/open_r1/configs.py:55-68 (GPGConfig "
                     "defaults); open-r1/train.sh (--scale_rewards False --adjust_gd --min_inverse_alpha 0.5, "
                     "recipe config_simple_rl_math_l35_v1.yaml: num_generations 8, beta 0); the multimodal copies "
                     "(R1-V, Visual-RFT, VisualThinker-R1-Zero grpo_trainer.py) divide by inverse_alpha + 1e-5; "
                     "gpg_trainer.py:247-265 (_prepare_inputs: every gradient-accumulation micro-step generates "
                     "and scores its own batch, so each micro-step has its own inverse_alpha), train.sh "
                     "--gradient_accumulation_steps 4, recipe per_device_train_batch_size 8 (one group of 8 per "
                     "process per micro-step). Eighth draw (#51 item 4): the per-micro-step alpha was not in the "
                     "record. Read-whole pass (#51 rI): the verl 0.9.1 PyPI wheel verl/trainer/ppo/core_algos.py "
                     "compute_policy_loss_gpg (−log π·A, × rollout_is_weights when given, agg_loss with "
                     "global_batch_info) and compute_gpg_outcome_advantage (adv_estimator gpg). Error-class sweep "
                     "(#51, s2a; the data-parallel dispatch): gpg_trainer.py:303 (the token mean's denominator is "
                     "the process's own micro-batch, completion_mask.sum() of its 8 rows), the HF Trainer's 1/"
                     "gradient_accumulation_steps per micro-step and DDP's mean over the processes: the record "
                     "called it a token mean without saying whose; recipe :56-57 (temperature 1.0, top_p 1.0: "
                     "the log-probs are untempered, as ours). Per-row review h (#51): gpg_trainer.py:323-326, 551-554 "
                     "(n_valid_samples += num_samples − num_identical_reward_groups sums the valid groups of every "
                     "generation round of the micro-step, up to max_gen 20; num_samples = stds.numel() is one "
                     "round's gathered group count), :600-610 (the trained batch: each process's valid groups of "
                     "all rounds, earliest first (merge :765-772), then its last round's zero-variance groups, cut "
                     "to len(prompts) rows), :625-626 (inverse_alpha = min(1, n_valid_samples / num_samples)): after "
                     "a resampling round inverse_alpha counts valid groups that are not trained (cut off, or of "
                     "another process), so it is not the trained batch's valid share; the record had said it "
                     "counts the generated groups of one round",
                defaults=(("alpha (adjust_gd)", "'none'", "on (train.sh --adjust_gd; GPGConfig default False)"),
                          ("advantage std", "grpo's choice (scale='group', eps=1e-6)",
                           "none: train.sh --scale_rewards False (r − mean_g, dr_grpo's form); with scale_rewards "
                           "(TRL's default, the recipes without train.sh) ÷ (std_g + 1e-4)"),
                          ("beta (KL)", "not in this term", "0.0 (recipe)"),
                          ("aggregation", "chain's (token_mean): Σ l·m over the update batch ÷ its token count",
                           "token mean over each process's own micro-batch (8 rows), × 1/gradient_accumulation_steps "
                           "(4) per micro-step, the processes' gradients averaged (DDP): a mean of per-process, "
                           "per-micro-step token means"),
                          ("sampler temperature / top_p", "rl.temperature 1.0, rl.top_p 1.0 (log-probs untempered)",
                           "temperature 1.0, top_p 1.0 (recipe): equal"),
                          ("min_inverse_alpha resampling", "not implemented",
                           "0.5 (train.sh, GPGConfig): resample until the valid share ≥ it"),
                          ("groups per alpha", "every group of the update batch",
                           "the groups of one micro-step's generation, gathered over the processes "
                           "(per_device_train_batch_size 8 = num_generations: one group per process; "
                           "gradient_accumulation_steps 4 micro-steps per optimizer step)")),
                placement="theirs: A and inverse_alpha computed once per gradient-accumulation micro-step on all "
                          "processes' gathered groups (inverse_alpha summing the valid groups of the micro-step's "
                          "resampling rounds), and every micro-step generates its own batch (_prepare_inputs), so "
                          "each micro-batch's loss is divided by its own micro-step's inverse_alpha before the micro-batches' gradients are accumulated; ours: A from the "
                          "advantage stage, the factor G/G_valid a whole-batch statistic of the loss (same on every "
                          "micro-batch)",
                deviations=(
                    "alpha='none' is the default: the plain −A log π of verl's compute_policy_loss_gpg; "
                    "alpha='valid_groups' is the authors' adjust_gd",
                    "G counts the groups of rows with a loss token in the update batch and G_valid those of them "
                    "with a non-zero advantage, both over the trained batch; theirs divides by inverse_alpha = "
                    "min(1, Σ_rounds valid groups / one round's groups) (gpg_trainer.py:554, 625-626): the valid "
                    "groups of every resampling round of the micro-step, trained or not, over one round's group "
                    "count, capped at 1; equal when the first round meets min_inverse_alpha (no resampling); "
                    "after resampling theirs is smaller (e.g. 8 processes of one group, round 1 valid on 3, "
                    "round 2 on 3, two of them on the same processes: they divide by 6/8, the trained batch holds "
                    "4 valid groups of 8, ours multiplies by 8/4); with no valid group ours uses factor 1 (theirs resamples "
                    "until n_valid ≥ 0.5·groups, asserting fewer than 20 rounds, :613)",
                    "one factor per update batch; theirs one per gradient-accumulation micro-step (4 in train.sh), "
                    "each over that micro-step's groups: Σ_k L_k/α_k where ours gives (Σ_k L_k)·G/G_valid; equal "
                    "when every micro-step has the same valid share (or with one micro-step per update)",
                    "the token mean's denominator: ours the update batch's token count (one denominator for all "
                    "micro-batches and devices); theirs each process's micro-batch token count (gpg_trainer.py:303), "
                    "each micro-step's loss × 1/gradient_accumulation_steps and the processes' gradients averaged, "
                    "so a row weighs 1/(P·K·n_pk) with n_pk its micro-batch's token count: equal when every "
                    "process's micro-batch holds the same number of loss tokens",
                    "their extra sampling rounds until min_inverse_alpha is met are not implemented (a filter's "
                    "job: zero_variance with resampling)",
                    "their weighted_sample sampler (sample_strategy uniform / hard / soft / medium, prompts "
                    "weighted by their running accuracy, gpg_trainer.py:130-150, 225-235; off by default and in "
                    "train.sh) is not built; scale_batch is declared but unused in the loss at this commit",
                    "verl's advantage estimator gpg (compute_gpg_outcome_advantage, verl 0.9.1) is not built: "
                    "A = α·(r − mean_g)/f_norm with α = B / count_nonzero(scores) over the whole batch (rows "
                    "with a non-zero reward, not groups with reward variance), f_norm 1, no std, a singleton "
                    "group mean 0 (A = α·r); alpha='valid_groups' is the authors' G / G_valid instead"))),
      ("gspo", gspo, "s = exp(mean_t log r); max(-A s, -A clip(s, 1-eps_low, 1+eps_high))",
       "GSPO arXiv:2507.18071; TRL importance_sampling_level=sequence",
       loss_term_factory(gspo, hparams=S.CLIP, role="policy", needs=S.logp_needs("old_logp")),
       Fidelity("peer", "TRL v1.9.0 GRPOTrainer._compute_loss, importance_sampling_level='sequence'",
                "token log r clamped to ±20 and log s to [-20, 10] (verl gspo clamps log s at max 10 only; TRL has "
                "none); aggregation is chain's (TRL: loss_type)",
                read=_TRL19 + " trl/trainer/grpo_trainer.py:3054-3091 (sequence log weight = masked mean of log r, "
                     "coef_1 = exp, -min(coef_1 A, clip(coef_1) A)), :3124-3142 (loss_type aggregation), "
                     ":903-909 (the GSPO warning: loss_type='grpo' reproduces the paper); trl/trainer/grpo_config.py "
                     "epsilon / epsilon_high / loss_type / delta defaults; docs/source/paper_index.md:83-99 (GSPO, 'to "
                     "reproduce the paper's setting': importance_sampling_level 'sequence', loss_type 'grpo', beta 0, "
                     "epsilon 3e-4, epsilon_high 4e-4, :94-95 gradient_accumulation_steps 1, steps_per_generation 4 "
                     "('partition rollout batch into 4 mini-batches. GSPO paper (v2), section 5.1'); :99 'only has an "
                     "effect when training goes slightly off-policy'); read whole (#51): the same "
                     "_compute_loss's loss_type 'luspo' (grpo_trainer.py:3143-3148, grpo_config.py:268-271, "
                     "817-820: LUSPO, 'a modification of GSPO', needs importance_sampling_level='sequence': "
                     "(ℓ_b·|y_b|).mean() over the micro-batch's rows, ÷ gradient_accumulation_steps) and 'vespo' "
                     "(:3096-3107, Gamma weights on the sequence ratio); peer conventions (#51 sweep s1a): "
                     + PC.READ_TRL_T + ", " + PC.READ_TRL_VLLM + "; grpo_config.py:750 (importance_sampling_level "
                     "'token' by default: the default GRPOTrainer does not reach the sequence ratio), "
                     "grpo_trainer.py:3124-3150 (the loss_type normalisers), :2427 (num_items_in_batch). Row review a (#51, "
                     "per-row review): the record cited paper_index.md:89-95 and took epsilon, epsilon_high, "
                     "loss_type and beta from it, but not :94-95 (gradient_accumulation_steps 1, "
                     "steps_per_generation 4: four optimizer steps per rollout batch, all against the old log-probs "
                     "of the generation, recomputed since 1 % 4 ≠ 0, grpo_trainer.py:2561-2576); its placement said "
                     "TRL's π_old is the detached current log-probs 'when num_iterations = 1', false in that setting; "
                     "and it called the ±20 token clamp and the −20 floor on log s 'verl's clamps', where "
                     "volcengine/verl@v0.7.0 core_algos.py:1033-1045 compute_policy_loss_gspo clamps log s at max 10 "
                     "only",
                defaults=(("eps_low", "3e-4", "epsilon = 0.2 (GSPO paper, TRL paper index: 3e-4)"),
                          ("eps_high", "4e-4", "epsilon_high = None → epsilon (paper: 4e-4)"),
                          ("aggregation", "chain's (token_mean)",
                           "loss_type = 'dapo' (token sum / global token count); the paper: 'grpo' (sequence mean)"),
                          ("delta (upper clamp of the unclipped ratio)", "not offered", "None (off)"),
                          ("log-ratio clamps", "token log r ±20, log s [-20, 10]", "none"),
                          ("importance_sampling_level", "sequence (this row)", "'token' (set 'sequence' for GSPO)"),
                          ("optimizer steps per rollout batch", "rl.num_minibatches × rl.updates_per_batch (RLConfig: "
                           "1 × 2); rl.num_minibatches=4, rl.updates_per_batch=1 gives the paper's",
                           "TRL: one (steps_per_generation = gradient_accumulation_steps, num_iterations 1: π_old = "
                           "π_θ detached, s = 1); the paper index (GSPO v2 §5.1): gradient_accumulation_steps 1, "
                           "steps_per_generation 4: four, π_old recomputed at generation"),
                          (PC.T_NAME, PC.T_OURS, PC.T_TRL),
                          (PC.DENOM_NAME, PC.DENOM_OURS_TOKEN_MEAN, PC.DENOM_TRL)),
                placement="theirs: the loss of each micro-batch, log π_old from the generation step's recomputed "
                          "old_per_token_logps when gradient_accumulation_steps % (steps_per_generation × "
                          "num_iterations) ≠ 0 (the paper index's 1 % 4) or with the vLLM correction, else the "
                          "detached current log-probs (TRL's defaults: s = 1 on every update); ours: a loss term on "
                          "each micro-batch, log π_old = logp_old (else logp_behavior)",
                deviations=("defaults are the GSPO paper's clip range (3e-4 / 4e-4), not TRL's 0.2: pass "
                            "eps_low=0.2, eps_high=0.2 for TRL's defaults",
                            "log r clamped to ±20 per token and log s to [-20, 10] (ours: verl's compute_policy_loss_gspo "
                            "clamps log s at max 10 only, v0.7.0 core_algos.py:1045, no token clamp and no floor; the "
                            "±20 is verl vanilla's token clamp); TRL has none; "
                            "equal while |log r| ≤ 20 and mean log r ≤ 10",
                            "aggregation is chain's; TRL's default 'dapo' sums tokens over the global token count "
                            "(= ours under token_mean for any micro-batching); the paper's form is seq_mean_token_mean "
                            "(TRL loss_type='grpo': each micro-batch's mean of row means ÷ gradient_accumulation_steps, "
                            "its mean counting empty rows as 0: equal to ours when no row is empty)",
                            "TRL's loss_type='luspo' (LUSPO: each sequence's GSPO loss × its length, mean over the "
                            "rows) is gspo with aggregate=seq_mean_token_sum (TRL's mean counts empty rows and runs "
                            "per micro-batch ÷ gradient_accumulation_steps: equal with no empty row and equal "
                            "micro-batches); TRL's 'vespo' (Gamma-weighted sequence ratio) is not built",
                            "the paper's schedule (TRL paper index :94-95: each rollout batch trained as four "
                            "optimizer steps against the generation's log-probs) is rl.num_minibatches=4 with "
                            "rl.updates_per_batch=1; RLConfig's default (one mini-batch, two updates) is neither "
                            "that nor TRL's default, where every update is on-policy (s = 1, the clip never acts)",
                            PC.T_DEVIATION + " (here s = exp(mean_t log r) of the tempered log-probs)"))),
      ("gspo_token", gspo_token, "log s_t = logp - sg(logp) + sg(mean_t log r); PPO clip on s_t",
       "GSPO arXiv:2507.18071; verl gspo",
       loss_term_factory(gspo_token, hparams=S.CLIP, role="policy", needs=S.logp_needs("old_logp")),
       Fidelity("peer", "verl v0.7.0 core_algos.compute_policy_loss_gspo",
                "token log r clamped to +-20 before the mean (verl: no token clamp); aggregation is chain's "
                "(verl forces seq-mean-token-mean)",
                read=_V07 + ":1000-1073 compute_policy_loss_gspo; verl/trainer/config/actor/actor.yaml "
                     "(clip_ratio*, loss_agg_mode); examples/gspo_trainer/test_gspo_3b_math.sh:44-73, 159 "
                     "(clip_ratio_low 3e-4, clip_ratio_high 4e-4, loss_agg_mode seq-mean-token-mean, kl 0) and "
                     "run_qwen30b_gspo.sh:14-24, 93-98 (3e-4 / 4e-4, clip_ratio_c 10, loss_agg_mode not set); "
                     "the verl 0.9.1 PyPI wheel core_algos.py:1546-1619: the same loss, but "
                     "agg_loss now takes loss_agg_mode (actor default token-mean; the 'forced' mean is gone); peer "
                     "conventions (#51 sweep s1a): " + PC.READ_VERL_T + "; " + PC.READ_DENOM + "; v0.7.0 "
                     "core_algos.py:1059-1061 (agg_loss(..., 'seq-mean-token-mean', **config.global_batch_info), "
                     "global_batch_info empty on the legacy dp_actor). Twelfth draw (#51 item 4, seed 20261217): "
                     "test_gspo_3b_math.sh:74-77 (train_batch_size 512, ppo_mini_batch_size 128 'maintain 4 "
                     "mini-batches as recommended by the paper, see Sec. 5.1', rollout.n 16), :99, 140 "
                     "(use_dynamic_bsz true: each micro-batch's loss × its rows / ppo_mini_batch_size), an sbatch "
                     "script (:1-14, 31: SLURM_JOB_NUM_NODES under set -u); run_qwen30b_gspo.sh:45-47 (train_batch_size "
                     "256, ppo_mini_batch_size 32: 8 mini-batches), :99-100, :180 (trainer.use_legacy_worker_impl="
                     "disable: the engine worker, whose agg_loss gets global_batch_size = ppo_mini_batch_size × n), "
                     ":186-187 (n_gpus_per_node / nnodes from $ARNOLD_WORKER_GPU / $ARNOLD_WORKER_NUM, set by their "
                     "launcher, not the script); v0.7.0 dp_actor.py:430-432 (the batch split into "
                     "ppo_mini_batch_size mini-batches, one optimizer step each; on_policy only with one mini-batch "
                     "and one epoch), data/legacy_data.yaml:42 and actor/actor.yaml:18, 108 (train_batch_size 1024, "
                     "ppo_mini_batch_size 256, ppo_epochs 1). The record gave neither the mini-batch count nor the "
                     "30B script's worker. Per-row review k (#51): examples/gspo_trainer@v0.7.0 holds two more "
                     "launch scripts the record did not name: test_gspo_3b_math_slurm.sh (test_gspo_3b_math.sh's "
                     "values, plus RAY_NUM_NODES and RAY_memory_monitor_refresh_ms exports) and "
                     "test_gspo_qwen30b_a3b_ep.sh: :17-18, 100 (clip_ratio_low 3e-4, clip_ratio_high 4e-4, "
                     "clip_ratio_c 10), :26 (loss_agg_mode token-mean: ignored by v0.7.0's forced "
                     "seq-mean-token-mean, honoured by 0.9.1's loss), :29-31 (train_prompt_bsz 256, "
                     "train_prompt_mini_bsz 32: 8 optimizer steps per batch, n 16), :60 (use_dynamic_bsz), :80-82 "
                     "(ppo_megatron_trainer.yaml, use_legacy_worker_impl auto there (:166): main_ppo.py:123-164 "
                     "starts the legacy Megatron worker, whose megatron_actor.py:444-541, 693-703 hands each "
                     "token-budget micro-batch's gspo loss to Megatron's forward_backward_func with num_microbatches "
                     "= their count), :135 (rollout.calculate_log_probs True), :2, 46-49 (set -u; MODEL_PATH="
                     "$HDFS_ROOT/..., CKPTS_DIR and TRAIN_FILE under $DATA_ROOT, which the script never sets: it "
                     "stops at :46 unless the caller exports them); and verl's seq-mean-token-mean divides each "
                     "row's token sum by (n + 1e-8) (core_algos.py@v0.7.0:814; the 0.9.1 wheel's :1196), "
                     "chain(aggregate=seq_mean_token_mean) by n",
                defaults=(("eps_low", "3e-4", "clip_ratio_low = 0.2 (GSPO recipe: 3e-4)"),
                          ("eps_high", "4e-4", "clip_ratio_high = 0.2 (GSPO recipe: 4e-4)"),
                          ("log s clamp", "max 10", "max 10"),
                          ("token log r clamp", "±20 before the mean", "none"),
                          ("aggregation", "chain's (token_mean)", "v0.7.0: seq-mean-token-mean, forced "
                           "(loss_agg_mode ignored); 0.9.1: loss_agg_mode (actor.yaml token-mean; "
                           "test_gspo_3b_math.sh sets seq-mean-token-mean)"),
                          (PC.DENOM_NAME, PC.DENOM_OURS_TOKEN_MEAN, PC.DENOM_VERL),
                          (PC.T_NAME, PC.T_OURS, PC.T_VERL),
                          ("optimizer steps per rollout batch", "rl.num_minibatches × rl.updates_per_batch (defaults "
                           "1 × 2: the whole batch twice); rl.num_minibatches=4, rl.updates_per_batch=1 gives "
                           "test_gspo_3b_math.sh's", "4 in test_gspo_3b_math.sh (train_batch_size 512 ÷ "
                           "ppo_mini_batch_size 128, the paper's four mini-batches), 8 in run_qwen30b_gspo.sh (256 ÷ "
                           "32), 4 at verl's defaults (1024 ÷ 256), ppo_epochs 1; log π_old fixed before the first, "
                           "so s_i = 1 there and the 3e-4 / 4e-4 clip acts from the second")),
                placement="theirs: the actor's loss on each micro-batch (loss_mode='gspo'), log π_old the "
                          "recomputed old log-probs, the sequence mean over response_mask; each rollout batch is "
                          "train_batch_size ÷ ppo_mini_batch_size optimizer steps against that log π_old; ours: a "
                          "loss term on each micro-batch, log π_old = logp_old (else logp_behavior), the mean over "
                          "loss_mask; rl.num_minibatches × rl.updates_per_batch optimizer steps per batch against "
                          "the proximal forward before the first",
                deviations=("defaults are the GSPO paper's clip range (3e-4 / 4e-4), not verl's actor defaults "
                            "0.2 / 0.2",
                            "token log r clamped to ±20 before the sequence mean (verl: no token clamp); equal "
                            "while |log r| ≤ 20",
                            "aggregation is chain's; verl v0.7.0 forces seq-mean-token-mean, per micro-batch over "
                            "its own non-empty rows × 1/gradient_accumulation: chain(aggregate=seq_mean_token_mean) "
                            "gives it when no row is empty; verl 0.9.1 uses loss_agg_mode (default token-mean: ours, "
                            "its global batch_num_tokens as our step-batch denominator, for any micro-batching)",
                            PC.T_DEVIATION + " (here the sequence mean of the tempered log ratios)",
                            "the GSPO scripts train each rollout batch as 4 (test_gspo_3b_math.sh) or 8 "
                            "(run_qwen30b_gspo.sh) optimizer steps against log π_old computed before the first: "
                            "s_i = 1 on the first and the clip acts from the second; our default (one mini-batch, "
                            "rl.updates_per_batch 2) clips on the second epoch only: rl.num_minibatches=4 with "
                            "rl.updates_per_batch=1 is theirs",
                            "run_qwen30b_gspo.sh runs verl v0.7.0's engine worker (use_legacy_worker_impl=disable): "
                            "the forced seq-mean-token-mean there divides by global_batch_size = ppo_mini_batch_size "
                            "× n, every row counted: chain(aggregate=seq_mean_token_mean) when no row is empty",
                            "test_gspo_qwen30b_a3b_ep.sh (verl v0.7.0's third GSPO script) runs the legacy Megatron "
                            "worker: each token-budget micro-batch's forced seq-mean-token-mean over its own rows, "
                            "averaged over the micro-batches by Megatron's schedule (num_microbatches), 8 optimizer "
                            "steps per batch (256 ÷ 32): rl.num_minibatches=8, rl.updates_per_batch=1 gives the "
                            "schedule; its loss_agg_mode token-mean takes effect only on verl 0.9.1 (ours); "
                            "as released it stops at $HDFS_ROOT under set -u",
                            "verl's seq-mean-token-mean divides each row's token sum by (n + 1e-8), ours by n: "
                            "chain(aggregate=seq_mean_token_mean) is verl's × (n + 1e-8)/n per row, a relative "
                            "1e-8/n (not exactly equal)"))),
      ("gmpo", gmpo, "-mean_t(A) exp(mean_t sign-clipped log r)", "GMPO arXiv:2507.20673; verl geo_mean",
       loss_term_factory(gmpo, hparams=S.CLIP, role="policy", needs=S.logp_needs("old_logp")),
       Fidelity("authors_code", "github.com/callsys/GMPO: train_zero_math_gmpo.py (critic_type_modify='gmpo')",
                "code: one sequence per micro-batch, scalar A (we average A over the sequence); log r clamped "
                "+-20, log rho [-20, 10]; eps 0.4 = scripts/qwen2.5-math-7b-gmpo.sh",
                read="callsys/GMPO@205b2bf4 (2025-07-30) train_zero_math_gmpo.py:673-701 (critic_type_modify 'gmpo': "
                     "sgn = −1 if A ≥ 0 else 1; max(sgn·Δ, clamp(sgn·Δ, ±cliprange))·sgn; ratio = exp(masked "
                     "mean); −A·ratio) and scripts/qwen2.5-math-7b-gmpo.sh (CLIPRANGE=0.4, "
                     "train_batch_size_per_device 1, beta 0, num_ppo_epochs 1, N_SAMPLE 8, --critic_type grpo: "
                     "compute_monte_carlo_advantages :405-421); the variants at :702-800 (gmpo_noclip, "
                     "gmpo_seqclip, gmpo_without_norm, grpo_clip_wider; scripts/ablation/) and "
                     "train_zero_math_hmpo.py:675-702 (hmpo, scripts/qwen2.5-math-7b-hmpo.sh). Error-class sweep "
                     "(#51, s2a; launch switches, the data-parallel dispatch): scripts/qwen2.5-math-7b-gmpo.sh:17-18, "
                     "55-63 (8 GPUs, 8 samples, temperature 1, top_p 1, train_batch_size 128, "
                     "train_batch_size_per_device 1, rollout_batch_size 128 prompts, pi_buffer_maxlen_per_device "
                     "128), train_zero_math_gmpo.py:620 (the learner walks the device's whole buffer, one sequence "
                     "per micro-step), :851, :860 (backward, then the strategy's optimizer step, which steps every "
                     "grad_acc_step micro-steps), :667 (logits ÷ temperature 1); oat-llm (the pinned 0.1.3.post1; "
                     "read at sail-sg/oat@v0.1.3.post2, 78d6f95a) oat/utils/deepspeed.py:227-229 (grad_acc_step = "
                     "train_batch_size // train_batch_size_per_device // world_size = 16) and "
                     "oat/algorithms/ppo.py:218-234 (learn: one learning_step on the whole buffer): a rollout of "
                     "1024 responses is trained as 8 optimizer steps of 128 sequences against log-probs fixed "
                     "before the first; the record did not say so. Row review a (#51, per-row review): the "
                     "repository's readme.md:26-27 (Code Usage) names GMPO in verl first "
                     "(examples/gmpo_trainer); read volcengine/verl@v0.7.0 (f9c855f7) "
                     "verl/trainer/ppo/core_algos.py:1382-1465 compute_policy_loss_geo_mean (the same function in "
                     "the verl 0.9.1 PyPI wheel's core_algos.py:1928-2011): no clamp at all (:1426-1427, the ±20 "
                     "clamp commented out; the ratio exp(Σ m·lr'/(Σ m + 1e-8)) unclamped), A and the row means ÷ "
                     "(Σ m + 1e-8), pg_loss = torch.mean over the micro-batch's rows, loss_agg_mode and "
                     "global_batch_info unused; examples/gmpo_trainer/README.md:26-35 (clip_ratio_low 0.4, "
                     "clip_ratio_high 0.4, loss_mode geo_mean) and run_qwen2_5-7b_math.sh:11-13, 20, 23, 31-32, 36-38, "
                     "47, 56 (use_kl_loss False, grpo, train_batch_size 1024, ppo_mini_batch_size 256, "
                     "ppo_micro_batch_size_per_gpu 16, rollout.n 5, 8 GPUs: 160 rows per GPU per mini-batch, 10 "
                     "micro-batches); v0.7.0 dp_actor.py:444-467, 541-547 (each micro-batch's loss × "
                     "1/gradient_accumulation: the mini-batch's row mean), the verl 0.9.1 PyPI wheel "
                     "workers/utils/losses.py:103-144 with workers/engine/fsdp/transformer_impl.py:724-777 (the "
                     "engine backpropagates each micro-batch's loss as returned, no 1/gradient_accumulation; "
                     "geo_mean's mean is local, so a mini-batch's gradient is the sum of its micro-batches' row "
                     "means: K × the row mean with K equal micro-batches per rank, 10 in that script). The record "
                     "called the ±20 / [−20, 10] clamps verl geo_mean's, and did not name the verl route",
                defaults=(("eps_low", "0.4", "cliprange 0.4 (log space)"),
                          ("eps_high", "0.4", "cliprange 0.4 (log space)"),
                          ("advantage per sequence", "mean_t A over the loss tokens", "the scalar A of the row"),
                          ("log-ratio clamps", "token ±20, log ρ [−20, 10]", "none (the code; verl geo_mean: none either)"),
                          ("aggregation", "chain's (token_mean; paper: seq_mean_token_mean)",
                           "one sequence per micro-batch: the loss −A·ρ of that sequence; DeepSpeed scales each "
                           "micro-step by 1/grad_acc_step (16) and averages the 8 ranks: the plain mean of −A·ρ over "
                           "an optimizer step's 128 sequences (seq_mean_token_mean gives it)"),
                          ("optimizer steps per rollout batch", "rl.num_minibatches × rl.updates_per_batch (the "
                           "recipe's); rl.num_minibatches=8, rl.updates_per_batch=1 gives theirs",
                           "8: rollout_batch_size 128 prompts × 8 samples = 1024 responses (128 per GPU), "
                           "train_batch_size 128 → 8 optimizer steps, num_ppo_epochs 1; log π_old fixed before the "
                           "first, so ρ ≠ 1 and the clip acts from the second"),
                          ("sampler temperature / top_p", "rl.temperature 1.0, rl.top_p 1.0 (log-probs untempered)",
                           "temperature 1, top_p 1 (script; the learner divides the logits by 1): equal"),
                          ("advantage (not this term's)", "the recipe's advantage stage",
                           "--critic_type grpo: (r − mean_g)/(std_g + 1e-8), unbiased std, 8 samples; "
                           "grpo(eps=1e-8) gives it"),
                          ("truncated responses (not this term's)", "the recipe's reward",
                           "reward 0 for a response stopped by the length limit (finish_reason 'length', "
                           "generate_max_length 3000; the actor, train_zero_math_gmpo.py:219-232, 276-279)"),
                          ("cliprange ablation", "eps_low=eps_high=0.8 gives it",
                           "scripts/ablation/qwen2.5-math-7b-gmpo-clip0.8.sh: CLIPRANGE 0.8"),
                          ("verl route (readme.md's first; examples/gmpo_trainer)", "eps_low=eps_high=0.4, "
                           "seq_mean_token_mean",
                           "clip_ratio_low = clip_ratio_high = 0.4 (actor.yaml default 0.2), loss_mode geo_mean: "
                           "torch.mean of each micro-batch's row losses (v0.7.0 × 1/gradient_accumulation; 0.9.1 "
                           "summed over the micro-batches), grpo advantages, rollout.n 5, 4 mini-batches of 256 "
                           "prompts per 1024-prompt step, no KL")),
                placement="theirs: the learner's PPO step, one sequence per micro-batch (train_batch_size_per_device "
                          "1), log π_old recomputed by the learner before the update; the mean runs over that "
                          "micro-batch's response tokens; each GPU walks its 128 buffered responses one per "
                          "micro-step, an optimizer step every 16 micro-steps (128 sequences over 8 GPUs), so one "
                          "rollout is 8 optimizer steps, all against the log π_old computed before the first; ours: "
                          "a loss term, ρ per row over its loss tokens, on each micro-batch; optimizer steps per "
                          "batch = rl.num_minibatches × rl.updates_per_batch, log π_old = the proximal forward before "
                          "the first",
                deviations=("ρ is computed per row; the code's masked mean runs over the whole micro-batch, "
                            "which is one row in its scripts (equal there)",
                            "A is averaged over the row's tokens (per-token advantages allowed); the code's A is "
                            "one scalar per row (equal for outcome advantages)",
                            "log r clamped to ±20 and log ρ to [−20, 10] (ours: neither the code nor verl geo_mean clamps, "
                            "core_algos.py:1426-1427 has its ±20 line commented out); equal while |log r| ≤ 20 and "
                            "each row's mean ≤ 10",
                            "A = 0 gives 0 here (sign 0); the code treats A = 0 as positive (the loss is 0 either "
                            "way)",
                            "their ablation variants are not built: gmpo_noclip (cliprange 1000), gmpo_seqclip (the "
                            "clip on the sequence's summed log ratio), gmpo_without_norm (exp of the sum, not the "
                            "mean), grpo_clip_wider, and HMPO (train_zero_math_hmpo.py: the harmonic mean of the "
                            "clipped token ratios)",
                            "their script trains each rollout batch (1024 responses) as 8 optimizer steps of 128 "
                            "sequences (train_batch_size 128 < 128 prompts × 8 samples), all against log π_old "
                            "computed before the first: rl.num_minibatches=8 with rl.updates_per_batch=1 is theirs; "
                            "the trainer's defaults (one mini-batch, rl.updates_per_batch 2) are not",
                            "their per-step weighting is the mean over sequences (one per micro-step, DeepSpeed's "
                            "1/grad_acc_step and the ranks' mean); the default token_mean weighs a row by its token "
                            "count: chain(aggregate=seq_mean_token_mean) is theirs",
                            "verl geo_mean (the README's verl route) takes torch.mean over each micro-batch's rows "
                            "and its masked means add 1e-8 to the token counts: on v0.7.0's legacy dp_actor (× "
                            "1/gradient_accumulation) the mini-batch's row mean, an empty row counted as 0 "
                            "(seq_mean_token_mean skips it; equal with no empty row, to ~1e-8); on verl 0.9.1's engine "
                            "no 1/gradient_accumulation and no global count, so its gradient is K × that mean (K "
                            "micro-batches per rank: 10 in the authors' verl script) where its other terms use the "
                            "global counts; no option gives the factor K"))),
      ("segment_ratio", segment_ratio, "rho_seg = exp(mean_{t in seg} log r); PPO clip on rho_seg",
       "Rank-GRPO / ConvRec-R1, seed 000 L87",
       loss_term_factory(segment_ratio, hparams=S.CLIP, fill=S.EPS_HIGH, role="policy",
                         needs=lambda a: S.logp_needs("old_logp")(a) | S.segment_needs(a)),
       Fidelity("authors_code", "github.com/yaochenzhu/Rank-GRPO: libs/trl/rank_grpo_trainer.py "
                "(importance_sampling_level='item')",
                "log r clamped +-20 and log rho at 10 (code: none); its overflow bin is any spare id here; "
                "eps 0.06/0.08 = train_rank_grpo.py",
                read="yaochenzhu/Rank-GRPO@0808d82c (2026-05-23) libs/trl/rank_grpo_trainer.py:2016-2088 "
                     "(importance_sampling_level 'item': per-item mean log r via scatter_add over seg ids clamped "
                     "to [0, rec_num], PPO clip, loss_type aggregation) and train_rank_grpo.py:117-170 "
                     "(epsilon 0.06, epsilon_high 0.08, beta = kl_beta 1e-3, num_iterations = mu 1, rec_num 20); "
                     "README.MD:27 (trl[vllm]==0.21.0) and huggingface/trl@v0.21.0 grpo_config.py (loss_type "
                     "'bnpo'). Error-class sweep (#51, s2a; launch switches, the data-parallel dispatch, the "
                     "caller): rank_grpo_trainer.py:783-787 (end_of_list_reward 0.1, extra_token_penalty −0.1, "
                     "early_stop_penalty −0.1, apply_extra_length_shaping: getattr(args, …, True), and TRL 0.21.0's "
                     "GRPOConfig has none of these fields, so the shaping is on) and :1826-1851 (the shaping added "
                     "to the token advantages after the group normalisation; the loss mask keeps the overflow "
                     "tokens and the EOS token); the record said 'the optional length shaping off'. "
                     "INSTALL.SH (copies libs/trl into the installed trl, so train_rank_grpo.py's "
                     "'from trl import GRPOConfig, RankGRPOTrainer' gets TRL's own GRPOConfig); README.MD:101-128 "
                     "(the documented run launches grpo_test_qwen25_0.5b_with_kl.py with "
                     "configs/sft_test_qwen25_0.5b.yaml, neither in the repository; train_rank_grpo.py and "
                     "configs/qwen25_0.5b_grpo.yaml, 4 processes, are what is stored), per_device_train_batch_size "
                     "16, gradient_accumulation_steps 6, num_generations 8, temperature not set (TRL's 1.0). "
                     "Sixteenth draw (#51 item 4, seed 20261221): train_rank_grpo.py:64, 68 (its own argparse "
                     "defaults: gradient_accumulation_steps 12, per_device_train_batch_size 8): 16 / 6 are the "
                     "README's flags, not the stored script's values; configs/qwen25_0.5b_grpo.yaml sets deepspeed "
                     "gradient_accumulation_steps 6, which transformers' DeepSpeed integration checks against "
                     "TrainingArguments' (fill_match, trainer_config_finalize: a mismatch raises ValueError; read in "
                     "the installed transformers 5.25.0, not the version their run used), so the stored script "
                     "needs the README's --gradient_accumulation_steps 6",
                defaults=(("eps_low", "0.06", "epsilon 0.06"), ("eps_high", "0.08", "epsilon_high 0.08"),
                          ("segments", "ids < max_segments (default T)", "items 0..rec_num−1 (rec_num 20) + one "
                           "overflow bin"),
                          ("KL to the reference", "not in this term (add kl_penalty)", "beta = kl_beta 1e-3, "
                           "k3 per token"),
                          ("log-ratio clamps", "token ±20, log ρ ≤ 10", "none"),
                          ("aggregation", "chain's (token_mean)", "GRPOConfig's loss_type, not set by the "
                           "script: 'bnpo' (trl 0.21.0, README.MD:27), each process's micro-batch token mean (16 "
                           "rows), 6 accumulation steps (the README's flags; train_rank_grpo.py's own defaults: "
                           "8 rows, 12 steps, :64, :68), the 4 processes' gradients averaged"),
                          ("advantage (not this term's)", "the recipe's advantage stage (segment(eps=1e-4) gives "
                           "per-segment GRPO advantages)", "per item: item k's reward normalized over the prompt's "
                           "num_generations 8 completions at rank k, (r_k − mean)/(std + 1e-4) (scale_rewards, "
                           "unbiased std), broadcast to item k's tokens (a newline belongs to the item before it), "
                           "0 on the overflow tokens and on EOS (rank_grpo_trainer.py:497-565, 1781-1829), then the "
                           "length shaping"),
                          ("length shaping (not this term's)", "none",
                           "on (apply_extra_length_shaping defaults to True, no config field sets it; "
                           "rank_grpo_trainer.py:783-787, 1831-1848): −0.1 added to every token after the 20th item "
                           "(extra_token_penalty), +0.1 to the EOS token of a response with exactly 20 items, no "
                           "overflow and an EOS (end_of_list_reward), −0.1 to the EOS token of one that ends with "
                           "fewer than 20 items (early_stop_penalty); added to the advantages, after the "
                           "normalisation"),
                          ("sampler temperature / top_p", "rl.temperature 1.0, rl.top_p 1.0 (log-probs untempered)",
                           "TRL's defaults 1.0 / 1.0 (not set by the script): equal")),
                placement="theirs: TRL's _compute_loss on each micro-batch, log π_old = the detached current "
                          "log-probs (mu = 1: on-policy) or the generation step's; ours: a loss term on each "
                          "micro-batch, log π_old = logp_old (else logp_behavior), segment ids from the batch",
                deviations=("the code's overflow bin (tokens after the last item) is any spare id here: give those "
                            "tokens their own id",
                            "log r clamped to ±20 and log ρ at 10; the code has none",
                            "the KL term (beta 1e-3 in the script) is a separate kl_penalty term",
                            "their loss_type 'bnpo' (trl 0.21.0's default) divides each process's micro-batch by "
                            "its own token count (rank_grpo_trainer.py:2083-2084), then the accumulation steps and "
                            "the processes are averaged; chain's token_mean divides by the whole batch's: equal "
                            "with one process and one micro-batch per update (their config runs 4 processes × 6 "
                            "accumulation steps), else whenever every micro-batch holds the same number of loss "
                            "tokens",
                            "their length shaping (on by default: −0.1 on each token after the 20th item, ±0.1 on "
                            "the EOS token of a 20-item / shorter list, added to the normalised advantages) is not "
                            "built: no advantage stage adds per-token terms after the normalisation (a shaping "
                            "before it would be normalised with the reward)",
                            "the documented run (README.MD:101-128) launches grpo_test_qwen25_0.5b_with_kl.py, which "
                            "the repository does not hold; the record follows the stored train_rank_grpo.py with the "
                            "README's flags (16 rows per micro-batch, 6 accumulation steps); the script's own "
                            "defaults are 8 rows and 12 steps (train_rank_grpo.py:64, 68), which changes bnpo's "
                            "per-micro-batch denominators (sixteenth draw, #51)"))),
      ("cispo", cispo, "-sg(clip(r, 1-eps_low, 1+eps_high)) A log pi_theta",
       "MiniMax-M1 arXiv:2506.13585; verl cispo; TRL cispo",
       loss_term_factory(cispo, role="policy", needs=S.logp_needs("old_logp")),
       Fidelity("peer", "TRL v1.9.0 GRPOTrainer loss_type='cispo'; verl v0.7.0 core_algos.compute_policy_loss_cispo",
                "default = TRL with epsilon_high=5 (upper cap only, ours 1+eps_high); verl: actor.yaml two-sided 0.8/1.2 "
                "(eps_low=eps_high=0.2), its CISPO example upper-only cap 1.2 (eps_low=None, eps_high=0.2)",
                read=_TRL19 + " trl/trainer/grpo_trainer.py:3080-3082 (clamp(coef_1, max=epsilon_high).detach() · A · "
                     "log π), :3139-3142 (sum / num_items_in_batch), grpo_config.py:695-702 (epsilon_high, 5.0 "
                     "recommended for cispo); " + _V07 + ":1468-1526 compute_policy_loss_cispo; read whole (#51): TRL "
                     "grpo_trainer.py:3054-3066 (importance_sampling_level 'sequence' also feeds cispo's coef_1) and "
                     "the verl 0.9.1 PyPI wheel core_algos.py:2048-2105 (the same loss, agg_loss(loss_agg_mode)); "
                     "peer conventions (#51 sweep s1a): " + PC.READ_TRL_T + ", " + PC.READ_TRL_VLLM + "; "
                     + PC.READ_VERL_T + "; " + PC.READ_DENOM + ". Row review a (#51, per-row review): verl's own "
                     "CISPO launch script, volcengine/verl@v0.7.0 examples/cispo_trainer/"
                     "run_cispo_qwen2_5_0_5b_gsm8k.sh:11-14 (adv_estimator grpo, loss_mode cispo, "
                     "actor.clip_ratio_low=10, actor.clip_ratio_high=0.2), :17, :26-27 (train_batch_size 256, "
                     "ppo_mini_batch_size 128, ppo_micro_batch_size_per_gpu 16: two mini-batches per step), :28-30 "
                     "(use_kl_loss True, kl_loss_coef 0.001, low_var_kl), :39 (rollout.n 5): its weight is "
                     "clamp(r, 1 − 10, 1.2), upper-only with cap 1.2; the record gave verl's form as two-sided "
                     "(0.8, 1.2), the actor.yaml defaults (verl/trainer/config/actor/actor.yaml:39-42), and did not "
                     "name the script; its placement also gave TRL's detached old log-probs as 'when num_iterations "
                     "= 1' (grpo_trainer.py:2561-2564: when gradient_accumulation_steps % (steps_per_generation × "
                     "num_iterations) = 0 and no vLLM correction); huggingface/trl@v1.9.0 docs/source/paper_index.md:487-498 "
                     "(the ScaleRL recipe, where the 5.0 comes from: loss_type 'cispo', epsilon_high 5.0, "
                     "num_generations 16, scale_rewards 'batch', cast_lm_head_to_fp32)",
                defaults=(("eps_high", "4.0 (cap 1 + 4 = 5)",
                           "TRL: epsilon_high (cap = epsilon_high itself; None → epsilon = 0.2; 5.0 recommended); "
                           "verl: cap 1 + clip_ratio_high = 1.2 (actor.yaml 0.2; its CISPO example also 0.2)"),
                          ("eps_low", "None (no lower clip)", "TRL: none; verl: 1 − clip_ratio_low = 0.8 (actor.yaml "
                           "0.2); its CISPO example: clip_ratio_low=10, a bound of −9: no lower clip"),
                          ("advantage (not this term's)", "the recipe's advantage stage (configs/recipes.py cispo: grpo(eps=1e-4))",
                           "TRL's ScaleRL recipe (paper_index.md:487-498): scale_rewards 'batch' (group mean, batch "
                           "std + 1e-4: grpo(scale='batch', eps=1e-4)), num_generations 16; verl's CISPO example: adv_estimator grpo"),
                          ("KL to the reference (not this term's)", "a separate kl_penalty term",
                           "TRL beta 0.0; verl actor.yaml use_kl_loss False; verl's CISPO example: use_kl_loss True, "
                           "kl_loss_coef 0.001, low_var_kl"),
                          ("log-ratio clamp", "±20", "TRL: none; verl: ±20"),
                          ("aggregation", "chain's (token_mean)",
                           "TRL: token sum / global token count; verl: loss_agg_mode (token-mean)"),
                          (PC.DENOM_NAME, PC.DENOM_OURS_TOKEN_MEAN, "TRL cispo: Σ ÷ num_items_in_batch (the "
                           "generation batch's tokens); " + PC.DENOM_VERL),
                          (PC.T_NAME, PC.T_OURS, PC.T_TRL + "; " + PC.T_VERL)),
                placement="theirs: the loss of each micro-batch, ratio against the generation step's old "
                          "log-probs (TRL: the detached current log-probs unless gradient_accumulation_steps % "
                          "(steps_per_generation × num_iterations) ≠ 0 or the vLLM correction is on; verl v0.7.0's "
                          "legacy dp_actor: the detached current ones with one mini-batch and one epoch); ours: a "
                          "loss term on each micro-batch, log π_old = logp_old (else logp_behavior)",
                deviations=("our eps_high is an offset (cap 1 + eps_high) like verl's; TRL's epsilon_high is the "
                            "cap itself: TRL epsilon_high=5 is eps_high=4",
                            "lower clip off by default (TRL); verl's actor defaults are two-sided: eps_low=0.2, "
                            "eps_high=0.2; verl's CISPO example (clip_ratio_low=10, clip_ratio_high=0.2) is upper "
                            "only: eps_low=None, eps_high=0.2 (a cap of 1.2, not TRL's 5); the two verl forms differ "
                            "on every token with r < 0.8",
                            "log r clamped to ±20 (verl); TRL has no clamp",
                            "TRL's importance_sampling_level='sequence' with loss_type 'cispo' (the capped weight "
                            "from exp(mean_t log r), one per sequence) is not built: ours caps each token's ratio",
                            "the micro-batch denominator: chain's token_mean divides every micro-batch by the step "
                            "batch's tokens, as TRL's cispo (num_items_in_batch) and verl 0.9.1's token-mean (global "
                            "batch_num_tokens) do, for any micro-batching; verl v0.7.0's default legacy dp_actor takes "
                            "each micro-batch's own token mean × 1/gradient_accumulation: equal only when the "
                            "micro-batches hold the same number of loss tokens",
                            PC.T_DEVIATION))),
      ("sapo", sapo, "-A sigmoid(tau (r-1)) 4/tau, tau = tau_pos if A>0 else tau_neg",
       "SAPO arXiv:2511.20347; verl sapo; TRL sapo",
       loss_term_factory(sapo, role="policy", needs=S.logp_needs("old_logp")),
       Fidelity("peer", "verl v0.7.0 core_algos.compute_policy_loss_sapo; TRL v1.9.0 GRPOTrainer loss_type='sapo'",
                "aggregation is chain's (verl forces seq-mean-token-mean; TRL 'sapo' is a sequence mean)",
                read=_V07 + ":1076-1158 compute_policy_loss_sapo, actor.yaml tau_pos/tau_neg; " + _TRL19 +
                     " trl/trainer/grpo_trainer.py:3092-3095 and :3124-3128, grpo_config.py:704-717; read whole (#51): "
                     "grpo_trainer.py:3054-3066 (importance_sampling_level 'sequence' also feeds the gate: the "
                     "sequence's mean log r), the verl 0.9.1 PyPI wheel core_algos.py:1623-1704 (the same loss, "
                     "seq-mean-token-mean still forced); peer conventions (#51 sweep s1a): " + PC.READ_VERL_T + "; "
                     + PC.READ_TRL_T + ", " + PC.READ_TRL_VLLM + "; " + PC.READ_DENOM + "; sixteenth draw (#51 "
                     "item 4, seed 20261221): the verl 0.9.1 PyPI wheel core_algos.py:1140-1206 agg_loss, whose "
                     "'seq-mean-token-mean' (the mode compute_policy_loss_sapo forces, :1688-1690) divides each "
                     "row's token sum by (its token count + 1e-8) (:1194-1202)",
                defaults=(("tau_pos", "1.0", "1.0 (verl tau_pos, TRL sapo_temperature_pos)"),
                          ("tau_neg", "1.05", "1.05 (verl tau_neg, TRL sapo_temperature_neg)"),
                          ("log-ratio clamp", "±20", "verl ±20; TRL none"),
                          ("aggregation", "chain's (token_mean)",
                           "verl: seq-mean-token-mean, forced; TRL: per-sequence mean, then mean"),
                          (PC.DENOM_NAME, PC.DENOM_OURS_TOKEN_MEAN, "TRL sapo: each micro-batch's mean of row means "
                           "(empty rows count 0) ÷ gradient_accumulation_steps; " + PC.DENOM_VERL),
                          (PC.T_NAME, PC.T_OURS, PC.T_VERL + "; " + PC.T_TRL)),
                placement="theirs: the actor's loss on each micro-batch, ratio against the old log-probs; tau "
                          "chosen by A > 0 (A = 0 takes tau_neg); ours: a loss term on each micro-batch, the same "
                          "rule",
                deviations=("aggregation is chain's; both peers average per sequence first: "
                            "chain(aggregate=seq_mean_token_mean) gives TRL's when no row is empty (its clamp(min=1.0) "
                            "count is exact) and verl's only up to verl's per-row denominator n + 1e-8 (the "
                            "verl 0.9.1 PyPI wheel core_algos.py:1194-1202; volcengine/verl@v0.7.0 core_algos.py:814, the "
                            "same): ours is verl's × (n + 1e-8)/n per row, a relative 1e-8/n "
                            "(TRL's mean over a "
                            "micro-batch's rows counts an empty row as 0, verl v0.7.0 divides each micro-batch by its "
                            "own non-empty rows × 1/gradient_accumulation, verl 0.9.1 by ppo_mini_batch_size × "
                            "rollout.n; ours by the step batch's non-empty rows)",
                            "log r clamped to ±20 (verl); TRL has no clamp",
                            "TRL's importance_sampling_level='sequence' with loss_type 'sapo' (the gate on "
                            "exp(mean_t log r)) is not built: ours gates each token's ratio (TRL's default 'token')",
                            PC.T_DEVIATION))),
      ("cpgd", cpgd, "max(-A log r, -A clip(log r, log(1-eps), log(1+eps))) + alpha (r - 1 - log r)",
       "CPGD arXiv:2505.12504, seed 000 L43; siiRL compute_policy_loss_cpgd",
       loss_term_factory(cpgd, hparams=S.CLIP, fill=S.EPS_HIGH, role="policy", needs=S.logp_needs("old_logp")),
       Fidelity("peer", "github.com/sii-research/siiRL: siirl/dag_worker/core_algos.py compute_policy_loss_cpgd",
                "PG term: same gradient (value shifted by -A log pi_old); drift sg(min(r-1, 2)) log pi = our k3 "
                "gradient, uncapped here; siiRL scripts: coef 0.001 (ours 0.1)",
                read="sii-research/siiRL@af00a771 (2026-01-05) siirl/dag_worker/core_algos.py:573-624 "
                     "compute_policy_loss_cpgd (log π clamped at log π_old + log(1 ± ε) on A's side, −A·that); "
                     "siirl/engine/actor/dp_actor.py:488-494 (policy_drift = clamp(exp(sg(log π) − log π_old) − 1, "
                     "max=2)·log π, × policy_drift_coeff); examples/cpgd_trainer/run_qwen2_5-7b.sh; read whole (#51): "
                     "core_algos.py:461-515 compute_cpgd_outcome_advantage (adv_estimator 'cpgd', "
                     "weight_factor_in_cpgd 'STD_weight' = (r − mean_g)/(std_g + 1e-6), unbiased std, a singleton "
                     "gets r/(1 + 1e-6); 'clip_filter_like_weight' = (r − mean_g)·min(bsz / #groups with std ≠ 0, 3); "
                     "'naive' = r − mean_g), siirl/main_dag.py:109-111 (adv_estimator cpgd sets use_cpgd_loss), "
                     "siirl/params/model_args.py:282-284, 310-313, 668-675 (clip_ratio, clip_ratio_low, "
                     "clip_ratio_high each 0.2, loss_agg_mode token-mean, "
                     "policy_drift_coeff 0.0, weight_factor_in_cpgd 'STD_weight'), dp_actor.py:414-500 (each "
                     "micro-batch's loss × 1/gradient_accumulation), the other four cpgd_trainer scripts "
                     "(run_qwen3-8b.sh, run_qwen3-1.7b.sh, run_qwen2_5_vl-72b.sh: use_kl_loss True, kl_loss_coef "
                     "0.01, low_var_kl; run_qwen2_5_vl-7b.sh and run_qwen2_5-7b.sh: use_kl_loss False; all: "
                     "policy_drift_coeff 0.001, clip_ratio 0.2, STD_weight, rollout.n 8); peer conventions (#51 sweep "
                     "s1a): siirl/engine/actor/dp_actor.py:176, 254 (logits.div_(temperature)), :308, 353 "
                     "(temperature from the data), siirl/engine/fsdp_workers.py:1372, 1423 (= rollout.temperature), "
                     "siirl/params/model_args.py:442-444 (RolloutArguments.temperature 1.0; the five scripts do not "
                     "set it), dp_actor.py:386-421 (gradient_accumulation, loss_scale_factor 1/gradient_accumulation "
                     "or rows / ppo_mini_batch_size with use_dynamic_bsz). Per-row review k (#51): the five "
                     "scripts' schedule, which the record did not give: run_qwen2_5-7b.sh:22-23, 54-55 "
                     "(data.train_batch_size 512 × nnodes prompts, ppo_mini_batch_size 256 × nnodes; the same in "
                     "run_qwen3-8b.sh, run_qwen3-1.7b.sh, run_qwen2_5_vl-7b.sh; run_qwen2_5_vl-72b.sh:23 "
                     "PPO_MINI_BATCH_SIZE_PER_NODE 128), model_args.py:290 (ppo_epochs 1), fsdp_workers.py:212-213 "
                     "(both × rollout.n ÷ the data-parallel size), dp_actor.py:370-382 (each GPU's batch split into "
                     "ppo_mini_batch_size mini-batches, one optimizer step each; on_policy only with one), :432-439 "
                     "(otherwise log π_old = the stored old_log_probs): 2 optimizer steps per batch (4 in the 72B "
                     "script) against log π_old recomputed before the first, so on the first r = 1 (no clip, "
                     "drift 0) and both act from the second; and agg_loss's token-mean is masked_sum / (n + 1e-8) "
                     "(siirl/utils/model_utils/torch_functional.py:154-168)",
                defaults=(("eps_low / eps_high", "0.2 / eps_low", "clip_ratio_low 0.2 / clip_ratio_high 0.2 "
                           "(model_args.py:283-284, their own defaults, not None: the scripts' clip_ratio=0.2 "
                           "does not reach cpgd's bounds; a clip_ratio alone is ignored)"),
                          ("drift_coef", "0.1", "policy_drift_coeff 0.001 (script; config default 0.0)"),
                          ("drift estimator", "k3: r − 1 − log r (gradient (r − 1)·∇log π)",
                           "sg(min(r − 1, 2))·log π (the k3 gradient, capped at r = 3)"),
                          ("log-ratio clamp", "±20", "none"),
                          ("aggregation", "chain's (token_mean)", "loss_agg_mode token-mean (both terms)"),
                          (PC.T_NAME, PC.T_OURS, "rollout.temperature (RolloutArguments default 1.0, not set by the "
                           "scripts) divides the logits of the old and current forwards"),
                          ("advantage (not this term's)", "the recipe's advantage stage",
                           "adv_estimator cpgd, weight_factor_in_cpgd 'STD_weight': grpo's (r − mean)/(std + 1e-6) "
                           "(all five scripts)"),
                          ("KL to the reference (not this term's)", "a separate kl_penalty term",
                           "use_kl_loss True, kl_loss_coef 0.01, low_var_kl in run_qwen3-8b / qwen3-1.7b / "
                           "qwen2_5_vl-72b; off in run_qwen2_5-7b / qwen2_5_vl-7b"),
                          ("optimizer steps per batch", "rl.num_minibatches × rl.updates_per_batch (defaults 1 × 2: "
                           "the whole batch twice); rl.num_minibatches=2 (4), rl.updates_per_batch=1 gives theirs",
                           "train_batch_size 512 ÷ ppo_mini_batch_size 256 = 2 in four scripts, 512 ÷ 128 = 4 in "
                           "run_qwen2_5_vl-72b.sh; ppo_epochs 1; log π_old fixed before the first, so r = 1 there "
                           "(no clip, drift 0)")),
                placement="theirs: the actor's loss on each micro-batch (loss_mode='cpgd'; the drift added in "
                          "dp_actor when use_cpgd_loss, which adv_estimator='cpgd' switches on), log π_old "
                          "recomputed before the update, each term token-mean over the micro-batch and the "
                          "micro-batch loss × 1/gradient_accumulation; ours: one loss term on each micro-batch, "
                          "log π_old = logp_old (else logp_behavior), chain's denominator the whole batch's",
                deviations=("siiRL's PG value is ours + (−A log π_old) (ours = theirs + A log π_old; "
                            "sixteenth draw, #51: this line had the sign reversed): the same gradient, a "
                            "different logged value",
                            "the drift gradient is uncapped here; siiRL caps r − 1 at 2 (equal while r ≤ 3)",
                            "drift_coef default 0.1 is ours; the siiRL scripts use 0.001 (drift_coef=0.001)",
                            "log r clamped to ±20; siiRL has none",
                            "siiRL's advantage modes 'clip_filter_like_weight' and 'naive' (weight_factor_in_cpgd) "
                            "are not built as such ('naive' is grpo(scale='none')); its default 'STD_weight' is "
                            "grpo(eps=1e-6, singleton='raw') (a singleton gets r/(1 + 1e-6): mean 0, std 1)",
                            "siiRL's token-mean is per micro-batch (× 1/gradient_accumulation); chain's token_mean "
                            "divides by the whole batch's tokens: equal with one micro-batch or equal token counts",
                            PC.T_DEVIATION + " (siiRL's log π and log π_old are both at rollout.temperature)",
                            "eps_high defaults to eps_low here; siiRL's clip_ratio_low / clip_ratio_high default to "
                            "0.2 each, so its clip_ratio moves neither (set eps_low and eps_high as their "
                            "clip_ratio_low / clip_ratio_high)",
                            "their scripts train each batch as 2 optimizer steps (4 in run_qwen2_5_vl-72b.sh) "
                            "against log π_old recomputed before the first: r = 1 on the first (the clip and the "
                            "drift act from the second); our default (one mini-batch, rl.updates_per_batch 2) "
                            "clips on the second epoch only: rl.num_minibatches=2 (4) with rl.updates_per_batch=1 "
                            "is theirs",
                            "siiRL's token-mean divides by (n + 1e-8) (torch_functional.py:154-168), chain's "
                            "token_mean by n: theirs × n/(n + 1e-8), a relative 1e-8/n"))),
      ("pspo", pspo, "-A ((1-alpha) r + alpha)", "PSPO arXiv:2509.21282, seed 000 L119",
       loss_term_factory(pspo, role="policy", needs=S.logp_needs("old_logp")),
       Fidelity("authors_code", "github.com/MCDwyer/GR-PSPO: grpotrainer.patch, grpoconfig.patch (TRL 0.25.1)",
                "clip_eps (a PPO clip on the smoothed ratio) is our option, off by default; log r clamped +-20",
                read="MCDwyer/GR-PSPO@16d89d53 (2025-11-19) grpotrainer.patch:20-45 (trust_region_method 'pspo': "
                     "coef_2 = (1 − smoothing_alpha)·coef_1 + smoothing_alpha; −coef_2·A), grpoconfig.patch "
                     "(against trl-0.25.1: smoothing_alpha 0.1, trust_region_method 'clip'), maths_finetuning.py:"
                     "160-215 (pspo runs: epsilon 0, loss_type 'dapo', num_iterations 2, beta 0); requirements.txt "
                     "pins trl==0.21.0. Error-class sweep (#51, s2a; launch switches): maths_finetuning.py:201-207 "
                     "(num_generations 4, per_device_train_batch_size 4, gradient_accumulation_steps 16, "
                     "temperature 0.8, top_p 0.9; no use_vllm: TRL's own generate), :32-34 with "
                     "maths_rewards.py:72-96 (the reward: 1 correct / 0, +0.05 for the '#### <answer>' format, "
                     "−0.2 when no number is found, clipped to [0, 1]); TRL's GRPOTrainer divides the logits by "
                     "args.temperature before the log-softmax of every log-prob it trains on, old and new (the "
                     "TRL 1.9.0 PyPI wheel grpo_trainer.py:1517-1519; the same at huggingface/trl@v0.25.1 "
                     "grpo_trainer.py:910): the record listed neither setting. Twelfth draw (#51 item 4, seed "
                     "20261217): the patches' base, huggingface/trl@v0.25.1 (1cf8d56c), is stored (fetched) and "
                     "was read; both patches apply to it cleanly and fail on requirements.txt's trl==0.21.0 "
                     "(grpotrainer.patch hunk 1 and grpoconfig.patch hunk 2 rejected), which has neither the two "
                     "GRPOConfig fields (maths_finetuning.py:188-224 then stops with a TypeError on "
                     "trust_region_method) nor loss_type 'dapo' (added after 0.21.0): the pinned install does not "
                     "start, what runs is 0.25.1 patched. There: grpo_trainer.py:1522-1536 (old log-probs "
                     "recomputed, gradient_accumulation_steps 16 % (steps_per_generation 16 × num_iterations 2) ≠ "
                     "0), :1851 (dapo: Σ ÷ (num_items_in_batch / num_processes)), :460 (compute_loss_func set: no "
                     "further ÷ gradient_accumulation), :1598-1620 with grpo_config.py:566-567 (the advantage "
                     "their loss receives: scale_rewards 'group', (r − mean_g)/(std_g + 1e-4), unbiased std over "
                     "the num_generations 4). README.md's command (python maths_finetuning.py --model ... "
                     "--trust_region_method ... --seed ...) stops at maths_finetuning.py:260-263 (len(sys.argv) != "
                     "4: usage, exit 1): the script takes three positional arguments (model, method, seed). The "
                     "record said 0.25.1 was not stored here and listed neither the pin's failure, the README "
                     "command's, nor the advantage",
                defaults=(("alpha", "0.1", "smoothing_alpha 0.1"),
                          ("clip_eps", "None (no clip)", "none in the pspo branch (epsilon 0.0 unused)"),
                          ("log-ratio clamp", "±20", "none (TRL's log ratio)"),
                          ("aggregation", "chain's (token_mean)", "loss_type 'dapo' (token sum / global count)"),
                          ("temperature in the ratio", "none: logp and logp_old are untempered (log softmax(z); "
                           "rl.temperature only changes the sampler)", "temperature 0.8 (maths_finetuning.py:206): "
                           "coef_1 = exp(log softmax(z_θ/0.8)[y] − log softmax(z_old/0.8)[y])"),
                          ("top_p", "rl.top_p (sampler only; the trained log-probs are untruncated)",
                           "0.9 (:207), in TRL's generate only; the trained log-probs are untruncated, as ours"),
                          ("reward (not this term's)", "the task's verifier",
                           "gsm8k_numeric_reward: 1 / 0, +0.05 format, −0.2 without a number, clipped to [0, 1]; "
                           "num_generations 4"),
                          ("advantage (not this term's)", "the recipe's advantage stage (grpo: (r − μ_g)/(σ_g + "
                           "1e-6), ddof 1)", "TRL 0.25.1 scale_rewards 'group' (default): (r − mean_g)/(std_g + "
                           "1e-4), unbiased std over the num_generations 4 (grpo_trainer.py@v0.25.1:1598-1620)")),
                placement="theirs: TRL GRPOTrainer._compute_loss on each micro-batch, coef_1 against the "
                          "generation step's old log-probs (num_iterations 2: two passes over each batch), both "
                          "log-probs of the temperature-scaled distribution softmax(z/0.8); ours: a loss term on each "
                          "micro-batch, log π_old = logp_old (else logp_behavior), both untempered",
                deviations=("clip_eps (a PPO clip on the smoothed ratio) is our option, off by default (the "
                            "authors' form)",
                            "log r clamped to ±20; TRL's has none",
                            "the ratio is of untempered probabilities; their runs sample at temperature 0.8 and TRL "
                            "trains on the log-probs of softmax(z/0.8), so coef_1 = π_θ,T/π_old,T differs from "
                            "ours at any token where the two logit vectors differ by more than a constant (equal at "
                            "T = 1); no setting gives theirs: the trainer's forward is untempered (objective_loss "
                            "temperature=1.0), rl.temperature=0.8 changes only the sampling",
                            "their gsm8k reward shaping (+0.05 format, −0.2 no number, clipped to [0, 1]) belongs to "
                            "the task's reward, not to this term",
                            "their advantage divides by std + 1e-4 (TRL's scale_rewards 'group'); the grpo stage's "
                            "default by σ + 1e-6: rl.advantage='grpo(eps=1e-4)' gives theirs (a group of 4 with "
                            "equal rewards gets 0 in both)",
                            "the released setup does not run as documented: requirements.txt pins trl 0.21.0, to "
                            "which the patches do not apply, and the README's flag-style command exits at the "
                            "argument check; the values here are maths_finetuning.py's with three positional "
                            "arguments on TRL 0.25.1 patched"))),
      ("decoupled_ppo", decoupled_ppo, "sg(pi_prox/pi_behav) max(-A r, -A clip(r)), r = pi_theta/pi_prox",
       "AReaL arXiv:2505.24298, seed 000 L29",
       loss_term_factory(decoupled_ppo, hparams=S.CLIP, fill=S.EPS_HIGH, role="policy",
                         needs=S.logp_needs("proximal_logp", "behavior_logp")),
       Fidelity("authors_code", "github.com/inclusionAI/AReaL: areal/utils/functional/functional.py "
                "ppo_actor_loss_fn",
                "w always applied (paper); AReaL applies it only with rejection_sampling (old default cap 5, "
                "mask: behavior_cap=5.0); its lower/sequence/kl filters: use mis/divergence_rejection",
                read="inclusionAI/AReaL@4aef98d8 (v1.0.4-17, 2026-05-21) areal/utils/functional/functional.py:"
                     "429-559 ppo_actor_loss_fn and :185-426 apply_rejection_sampling (twentieth draw, #51: the record had "
                     ":429-545 and :185-330, which ends inside the sequence-level branch, before the token-level "
                     "branch their configs take, :391-401, and the mask update and weight zeroing, :403-426); "
                     "areal/api/cli_args.py:"
                     "1224-1320 RejectionSamplingConfig (level token, action mask, metric ratio, upper 5.0, lower "
                     "None), :1396-1410 (eps_clip 0.2, eps_clip_higher None, c_clip None), :1485-1500 "
                     "(use_decoupled_loss False, rejection_sampling None); examples/math/gsm8k_grpo.yaml:64-79 "
                     "and boba_grpo.yaml (the launch configs: eps_clip 0.4, recompute_logprob and "
                     "use_decoupled_loss true, rejection_sampling metric ratio upper 5.0). Error-class sweep "
                     "(#51, s2a; launch switches, the data-parallel dispatch): gsm8k_grpo.yaml:28 "
                     "(rollout.max_head_offpolicyness 2; boba_grpo.yaml:28, 4; cli_args.py:2039-2045 default 0), "
                     ":36, 40 (n_samples 4, temperature 1.0; boba 16, 1.0), :65-81 (actor.temperature = "
                     "gconfig.temperature, reward_scaling 10, reward_bias −0.5, ppo_n_minibatches 1 (boba 4), "
                     "reward_norm group / group, adv_norm batch / batch); areal/trainer/ppo/actor.py:145-175 "
                     "((r + bias)·scaling, clipped to ±reward_clip 20, cli_args.py:1420-1426, then the group "
                     "reward norm), :363 and areal/engine/core/train_engine.py:30-66 (the loss weight: the "
                     "loss-mask token count summed over the micro-batches and all-reduced over the data-parallel "
                     "group), areal/utils/data.py:1395-1420, 1500-1526 (batch-level normalisation all-reduced); "
                     "areal/infra/controller/train_controller.py:471-597 (compute_advantages and ppo_update "
                     "dispatched as data-parallel slices): the staleness and the mini-batch count were not in "
                     "the record",
                defaults=(("eps_low", "0.2", "eps_clip 0.2 (cli_args); 0.4 in the math example configs"),
                          ("eps_high", "eps_low", "eps_clip_higher None → "
                           "eps_clip"),
                          ("dual_clip", "None", "c_clip None"),
                          ("behaviour weight w", "always applied", "only with rejection_sampling set (default None; "
                           "set in the example configs)"),
                          ("behavior_cap, cap_mode", "None, 'mask'", "rejection_sampling upper 5.0, action "
                           "'mask' when configured (the example configs: ratio, upper 5.0)"),
                          ("log-ratio clamp", "±20 (r and w)", "none (w's non-finite log ratios set to 0)"),
                          ("staleness (π_behav's lag)", "rl.async_staleness None (synchronous: π_behav = the "
                           "sampler's copy of π_old, w = 1 up to the numerics); rl.async_staleness=2 gives theirs",
                           "rollout.max_head_offpolicyness 2 (gsm8k_grpo.yaml), 4 (boba_grpo.yaml); cli_args "
                           "default 0: a rollout may come from a policy up to that many versions old, which is what "
                           "w corrects"),
                          ("mini-batches per step", "rl.num_minibatches (1)", "ppo_n_minibatches 1 (gsm8k), 4 "
                           "(boba): from the second, π_θ ≠ π_prox, r ≠ 1"),
                          ("temperature in the log-probs", "none (untempered)", "actor.temperature = "
                           "gconfig.temperature 1.0 in both configs: equal"),
                          ("reward and advantage (not this term's)", "the recipe's reward and advantage stages",
                           "(r − 0.5)·10 clipped to ±20, then the group mean / std (reward_norm group, group_size "
                           "n_samples), GAE with discount 1 and λ 1 (cli_args), then the batch mean / std over the "
                           "whole batch (adv_norm batch, all-reduced over the data-parallel group)")),
                placement="theirs: the actor's loss on each micro-batch (micro-batches packed by token budget, "
                          "max_tokens_per_mb 10240), π_prox recomputed by the trainer before the update, π_behave "
                          "from the inference engine up to max_head_offpolicyness versions old; masked tokens stay "
                          "in the denominator (loss_mask_count before rejection), the denominator the mini-batch's "
                          "token count over all micro-batches and data-parallel ranks (all-reduced); ours: a loss "
                          "term on each micro-batch, π_prox = logp_old, π_behav = logp_behavior, the chain's "
                          "denominator over loss_mask of the whole update batch (the same global count)",
                deviations=("w multiplies the loss always (the paper's objective); AReaL only with "
                            "rejection_sampling configured; its form without it (no w) is ppo_clip with "
                            "old_logp = the proximal log-probs",
                            "AReaL's lower bound, sequence level and k1–k3 metrics are not options here: add "
                            "mis / divergence_rejection as a correction",
                            "log ratios clamped to ±20; AReaL has none",
                            "AReaL's importance_sampling_level='sequence' (the geometric mean of the token "
                            "ratios, GSPO-style) and prox_logp_method='loglinear' (π_prox interpolated between the "
                            "behaviour and current log-probs, no forward pass) are not built "
                            "(cli_args.py:1499-1517); ours takes π_prox from logp_old, their default 'recompute'",
                            "their launch configs run the asynchronous trainer with max_head_offpolicyness 2 (gsm8k) "
                            "/ 4 (boba): π_behav lags π_prox by up to that many versions, the case w exists for; "
                            "rljax's synchronous default gives w ≈ 1 (the sampler and the trainer hold the same "
                            "weights): rl.async_staleness=2 (or 4) is theirs; boba's ppo_n_minibatches 4 is "
                            "rl.num_minibatches=4"))),
      ("exgrpo_policy", exgrpo_policy, "fresh: -A r (unclipped); replayed: -A w/(w+beta), w = pi_theta/pi_old "
       "(stored pi_b)", "ExGRPO arXiv:2510.02245, seed 001 L241",
       loss_term_factory(exgrpo_policy, hparams=S.CLIP, fill=S.EPS_HIGH, role="policy", needs=S.logp_needs("old_logp")),
       Fidelity("authors_code", "github.com/ElliottYan/LUFFY: ExGRPO/exgrpo/verl/verl/mix_src/mix_core_alg.py; "
                "ExGRPO/exp_scripts/run_exgrpo.sh",
                "mixed phase = a replay stage in the recipe (authors: once batch solve rate > 0.35); clip_fresh=True "
                "PPO-clips fresh rows; the rho weighting is the batch composition",
                read="ElliottYan/LUFFY@01f4ae06 (2026-03-20) ExGRPO/exgrpo/verl/verl/mix_src/mix_core_alg.py:36-230 "
                     "compute_token_on_off_policy_loss (:87-127 on-policy ratio and loss_remove_clip, :129-151 "
                     "off_ratio = r / (r + 0.1) for 'p_div_p_0.1', :197 per-token mix by prefix_mask, :215-219 "
                     "loss_remove_token_mean: Σ loss·mask / response length) and ExGRPO/exp_scripts/run_exgrpo.sh "
                     "(off_policy_reshape p_div_p_0.1, loss_remove_clip True, loss_remove_token_mean True, "
                     "experience_ratio 0.5, experience_start_sratio 0.35, entropy_coeff 0.001). Error-class "
                     "sweep (#51, s2a; launch switches, the micro-batch normaliser): run_exgrpo.sh:40, 43, 47-50 "
                     "(train_batch_size 128, max_response_length 8192, ppo_mini_batch_size 64, "
                     "ppo_micro_batch_size 64, use_dynamic_bsz True, ppo_max_token_len_per_gpu 32768), :60, 63 "
                     "(temperature 1.0, n 8), :92 (algorithm.grpo_use_std False), :99 (skip_grad_bound 500); "
                     "mix_fsdp_worker.py:88-91 (the mini-batch × n ÷ the data-parallel size), mix_actor.py:63 "
                     "(gradient_accumulation = 64 // 64 = 1), :89-92 (token-budget micro-batches), :184 and :225 "
                     "(each micro-batch's loss, its entropy bonus a masked mean of that micro-batch, ÷ 1, "
                     "summed over the micro-batches), :253-258 (the optimizer step skipped when the gradient norm "
                     "exceeds 500); mix_trainer.py:88-116 (grpo without the std): the record gave neither the two "
                     "optimizer steps per step nor the per-micro-batch entropy normaliser. Per-row review k (#51): "
                     "mix_trainer.py:88-116 is MIXRayPPOTrainer's (main_mix_ppo.py:241-243, trainer.experience "
                     "False), not on the script's path: run_exgrpo.sh:28 sets trainer.experience=True, so "
                     "main_mix_ppo.py:232-234 runs ExperienceMixRayPPOTrainer, whose advantage is "
                     "mix_trainer_helper.py:38-67 compute_advantage (the same grpo code, use_std = grpo_use_std "
                     "False) called at mix_trainer_experience.py:456-460, then × prefix_reward_weight_alpha on "
                     "replayed tokens and _beta on fresh ones (:462-470; 1.0 / 1.0: run_exgrpo.sh:86, "
                     "mix_ppo_trainer.yaml:138-139); mix_trainer_experience.py:429-438 sets the phase per batch in "
                     "meta_info, read by mix_actor.py:65-67 over the config (warm-up: loss_remove_clip False, "
                     "off_policy_reshape 'no_reshape', exp_is_weighting False, whatever the script sets; mixed: the "
                     "script's values); the warm-up clip's upper bound is max(clip_upper_bound, 1 + clip_ratio) "
                     "(mix_core_alg.py:117; mix_ppo_trainer.yaml:40 clip_upper_bound 1.0, so 1.2, = ours); a "
                     "replayed row's log π_old is its recorded old log-probs only with trainer.exp_is_correct "
                     "(run_exgrpo.sh:35 True) and a recorded row whose sum ≠ 0 (experience_trainer_ops.py:76-99), "
                     "else the current recompute (mix_trainer_experience.py:411-415). Fifteenth draw (#51 item 4, seed "
                     "20261220): rljax/replay/_stages.py exgrpo fn and _buffer.py insert (replay_mask written on "
                     "every step, all False without replay), mix_trainer_experience.py:429-438 and 538-542 (their "
                     "warm-up batches clip until the switch). Eighteenth draw (#51 item 4, seed 20261223): "
                     "experience_trainer_ops.py:44-68 (the recorded old_log_prob is batch['old_log_probs'], the "
                     "trainer's recompute at mix_trainer_experience.py:411-413), :76-99 (copied by position)",
                defaults=(("beta", "0.1", "p_div_p_0.1"),
                          ("clip_fresh", "False (fresh rows unclipped in mixed batches)", "loss_remove_clip True"),
                          ("eps_low / eps_high (warm-up phase)", "0.2 / eps_low", "clip_ratio 0.2 (on-policy "
                           "phase)"),
                          ("aggregation", "chain's (token_mean)", "loss_remove_token_mean: Σ over the "
                           "micro-batch / max response length (8192), gradient_accumulation 1 (the micro-batches' "
                           "losses summed), the GPUs averaged: Σ over the mini-batch / (8192 × the data-parallel "
                           "size)"),
                          ("entropy bonus", "not in this term (entropy_bonus)", "entropy_coeff 0.001, a masked token "
                           "mean per token-budget micro-batch, summed over the GPU's micro-batches (gradient_"
                           "accumulation 1), so its weight grows with the number of micro-batches"),
                          ("mini-batches per step", "rl.num_minibatches (1); rl.num_minibatches=2 with "
                           "rl.updates_per_batch=1 gives theirs", "train_batch_size 128 ÷ ppo_mini_batch_size 64 = "
                           "2 optimizer steps per step, π_old fixed before the first: the second mini-batch's fresh "
                           "rows have r ≠ 1, unclipped in mixed batches (loss_remove_clip), PPO-clipped at 1 ± 0.2 "
                           "in warm-up ones (meta_info loss_remove_clip False, mix_trainer_experience.py:435-438)"),
                          ("advantage (not this term's)", "the recipe's advantage stage",
                           "grpo with algorithm.grpo_use_std False: r − mean_g, no std (dr_grpo's form)"),
                          ("gradient-norm skip", "none (clip only)", "skip_grad_bound 500: a step whose gradient "
                           "norm exceeds 500 (or is non-finite) is dropped"),
                          ("warm-up clip upper bound", "1 + eps_high (1.2)", "max(clip_upper_bound 1.0, 1 + "
                           "clip_ratio 0.2) = 1.2 (mix_core_alg.py:117): equal"),
                          ("replayed rows' log π_old", "logp_old (the exgrpo stage's stored behaviour log-probs)",
                           "recorded_old_log_prob with trainer.exp_is_correct True (the script); False keeps the "
                           "current recompute"),
                          ("log-ratio clamp", "±20", "none")),
                placement="theirs: the actor's loss on each micro-batch; replayed tokens are those under "
                          "prefix_mask, their log π_old the recorded old_log_probs: the trainer's recompute at the "
                          "storing step (experience_trainer_ops.py:52, from compute_log_prob at "
                          "mix_trainer_experience.py:411-413), not the sampler's; the mixed loss starts "
                          "once the batch solve rate passes 0.35; ours: a loss term on each micro-batch, replayed "
                          "rows from batch.extras['replay_mask'] (REPLAY_MASK), log π_old = logp_old (the exgrpo "
                          "stage's behaviour log-probs for replayed rows)",
                deviations=("aggregation is chain's; the recipe's form (Σ / max length) is "
                            "chain(aggregate=seq_mean_token_sum_norm) up to a constant: theirs is Σ over the "
                            "mini-batch ÷ (8192 × the data-parallel size) (micro-batch losses summed, "
                            "gradient_accumulation 1, GPUs averaged), ours Σ ÷ (B × L); its entropy bonus, however, "
                            "is a sum of per-micro-batch token means whose count follows the token budget: an "
                            "entropy_bonus term aggregated by chain is not it",
                            "their script trains each step as 2 optimizer steps (ppo_mini_batch_size 64 of 128 "
                            "prompts) and skips a step whose gradient norm exceeds 500; rl.num_minibatches=2 gives "
                            "the first, the second is not built",
                            "the on-policy warm-up phase is a batch without extras['replay_mask'] (PPO clip, as the "
                            "authors'); no stage of ours gives it with replay: the exgrpo replay stage writes "
                            "replay_mask on every step from the first (all False when it replays nothing, "
                            "rljax/replay/_buffer.py insert), so in the exgrpo recipe every batch is mixed and the "
                            "fresh rows are never clipped, and the switch at solve rate 0.35 is not built (the "
                            "replay stage's record: 'not built'); theirs PPO-clip every row at [0.8, 1.2] until a "
                            "step's batch/solved exceeds 0.35 (mix_trainer_experience.py:429-438, 538-542). With "
                            "one mini-batch per step r = 1 and the clip changes nothing; with their 2 optimizer "
                            "steps (rl.num_minibatches=2) the second mini-batch's fresh rows differ wherever r "
                            "leaves [0.8, 1.2] in their warm-up steps (tested); clip_fresh=True gives their "
                            "warm-up but also clips their mixed phase (fifteenth draw, #51: the record had said the "
                            "switch belongs to the replay stage, which does not build it)",
                            "a replayed row's log π_old is the sampler's stored log-prob here (the exgrpo stage's "
                            "logp_old='behavior'); theirs the trainer's recomputed old_log_probs of the storing "
                            "step (experience_trainer_ops.py:52): w and w/(w + β) differ on each replayed token "
                            "by that step's sampler-trainer mismatch, exp(log π_trainer − log π_sampler); equal "
                            "where the two agree; logp_old='recompute' gives their exp_is_correct False (the "
                            "current recompute) instead (eighteenth draw, #51: the placement had called them "
                            "behaviour log-probs)",
                            "clip_fresh=True PPO-clips the fresh rows of mixed batches (our option)",
                            "log r clamped to ±20; the code has none",
                            "their loss also has other ratio shapings, selected by actor.off_policy_reshape / "
                            "on_policy_reshape (mix_core_alg.py:89-117, :134-150): no_reshape (the yaml default), "
                            "logp, p_logp, square_root, pow, p_div_p_0.1 / 0.3 / 0.5 (the script: off p_div_p_0.1, "
                            "on no_reshape), and off_policy_max_clip / min_clip / all_max_clip (-1: off); beta "
                            "gives p_div_p_β on replayed rows; the other shapings and clips are not built"))),
  ]
  return tuple(Technique(name, "policy_loss", fn, formula, src, stage=stage, fidelity=fid)
               for name, fn, formula, src, stage, fid in rows)


TECHNIQUES = _technique_rows()
