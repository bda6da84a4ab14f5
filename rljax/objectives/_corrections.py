"""Train/inference mismatch corrections usable with any ratio term.

A correction is built by a factory and has the signature

    correction(out: PolicyOutputs, batch: TrainBatch) -> (weight [B, T], keep_mask [B, T], metrics)

``weight`` carries no gradient; ratio terms take ``correction=`` (one
correction or a sequence of them) and multiply their per-token loss by
``weight * keep_mask``. The aggregation denominator is not changed (AReaL's
convention: it counts the original ``loss_mask``); to renormalise over the kept
tokens instead (verl's rejection sampling rewrites ``response_mask``), multiply
``batch.loss_mask`` by ``keep_mask`` before calling the objective.

All corrections compare the *trainer's* log-prob of the sampled token under
the parameters that sampled it, ``log pi_train`` (``batch.logp_old``; when it
is absent -- on-policy, no recompute -- the detached current ``out.logp``),
with the *sampler's* ``log pi_rollout`` (``batch.logp_behavior``):

    log k_t = clamp(log pi_train(y_t) - log pi_rollout(y_t), -20, 20)

Both sources can be overridden (``train_logp=``, ``rollout_logp=``: a
``TrainBatch`` field, a key of ``batch.extras``, or a callable). Conventions
follow verl's ``rollout_corr_helper`` (``compute_rollout_correction_weights``,
``compute_rollout_rejection_mask``), TRL's ``vllm_importance_sampling_mode``
and OpenRLHF's ``is_correction_type``; see ``docs/objectives.md``.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from rljax.objectives import _ratio_utils as U
from rljax.objectives._statistics import with_statistics
from rljax.objectives._ratio_utils import LOG_RATIO_CLAMP

__all__ = ["tis", "mis", "icepop", "divergence_rejection", "mismatch_log_ratio"]

_LEVELS = ("token", "sequence", "geometric")
_REJECTION_LEVELS = ("token", "sequence_sum", "sequence_mean", "sequence_max")
_ESTIMATORS = {"k1": "k1", "kl": "k1", "k2": "k2", "mse": "k2", "k3": "k3", "low_var_kl": "k3"}


def mismatch_log_ratio(out, batch, *, train_logp=None, rollout_logp="logp_behavior", name="correction"):
  """Per-token ``log pi_train(y_t) - log pi_rollout(y_t)`` (detached, 0 off the mask).

  Returns ``(log_k [B, T], mask [B, T])`` in the computation dtype.
  """
  shape = U.check_inputs(out, batch, need_advantages=False)
  dtype = U.float_dtype(out.logp)
  if train_logp is None and batch.logp_old is None:
    train = jax.lax.stop_gradient(out.logp)
  else:
    train = U.get_logp(batch, train_logp, shape, name=f"{name} train_logp", default="logp_old")
  rollout = U.get_logp(batch, rollout_logp, shape, name=f"{name} rollout_logp", default="logp_behavior")
  mask = batch.loss_mask.astype(dtype)
  log_k = jnp.where(mask > 0, train.astype(dtype) - rollout.astype(dtype), 0.0)
  return jax.lax.stop_gradient(log_k), mask


def _level_log_ratio(log_k, mask, level):
  """Token log-ratio, sequence sum (product of ratios) or sequence mean (geometric mean)."""
  if level == "token":
    agg = log_k
  elif level == "sequence":
    agg = jnp.broadcast_to(U.seq_sum(log_k, mask)[:, None], log_k.shape)
  else:  # geometric
    agg = jnp.broadcast_to(U.seq_mean(log_k, mask)[:, None], log_k.shape)
  return jnp.clip(agg, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)


def _check_sources(train_logp, rollout_logp):
  U.check_logp_source("train_logp", train_logp)
  U.check_logp_source("rollout_logp", rollout_logp)


def tis(threshold=2.0, *, level: str = "token", lower=None, normalize: bool = False,
        train_logp=None, rollout_logp="logp_behavior"):
  """Truncated importance sampling (TIS) weight for the train/inference mismatch.

      token:     w_t = min(k_t, U),                     k_t = pi_train(y_t) / pi_rollout(y_t)
      sequence:  w_t = min(prod_s k_s, U)               (every token of the sequence)
      geometric: w_t = min(exp(mean_s log k_s), U)      (length-normalised sequence ratio)

  optionally also ``max(., lower)``; ``w`` is detached; with ``normalize`` it
  is divided by its masked batch mean (verl ``rollout_is_batch_normalize``;
  the whole batch's under micro-batching: batch statistics
  ``{"weight_mean": mean}``, see ``rljax.objectives._statistics``).
  ``keep_mask`` is all ones.

  Source: Yao et al., "Your efficient RL framework secretly brings you
  off-policy RL training" (TIS, 2025 blog); verl ``rollout_is=token|sequence``
  with a float ``rollout_is_threshold`` (default U = 2.0); TRL
  ``vllm_importance_sampling_mode=token_truncate|sequence_truncate``
  (``clip_max=3.0``); seed 001 L51 ("clipped importance sampling").

  Args:
    threshold: upper truncation ``U`` (> 0; may be a jax array).
    level: ``"token"``, ``"sequence"`` or ``"geometric"``.
    lower: optional lower truncation (``0 <= lower <= U``).
    normalize: divide by the masked batch mean of ``w``.
    train_logp, rollout_logp: log-prob sources (see module docstring).
  """
  U.check_choice("level", level, _LEVELS)
  U.check_scalar("threshold", threshold, lo=0.0, lo_open=True)
  U.check_scalar("lower", lower, lo=0.0, allow_none=True)
  if lower is not None:
    U.check_order("lower", lower, "threshold", threshold)
  _check_sources(train_logp, rollout_logp)

  def truncated(out, batch):
    log_k, mask = mismatch_log_ratio(out, batch, train_logp=train_logp, rollout_logp=rollout_logp, name="tis")
    raw = jnp.exp(_level_log_ratio(log_k, mask, level))
    w = jnp.minimum(raw, threshold)
    if lower is not None:
      w = jnp.maximum(w, lower)
    return log_k, mask, raw, w

  def weight_mean(out, batch):
    _, mask, _, w = truncated(out, batch)
    return {"weight_mean": U.masked_mean(w, mask)}

  def correction(out, batch, statistics=None):
    log_k, mask, raw, w = truncated(out, batch)
    if normalize:
      mean = U.masked_mean(w, mask) if statistics is None else statistics["weight_mean"]
      w = w / jnp.maximum(mean, 1e-8)
    w = jax.lax.stop_gradient(w * mask + (1.0 - mask))
    metrics = {
        "weight_mean": U.masked_mean(w, mask),
        "weight_max": U.masked_max(w, mask),
        "truncated_frac": U.masked_mean((raw > threshold).astype(mask.dtype), mask),
        "raw_ratio_mean": U.masked_mean(raw, mask),
        "mismatch_k1": U.masked_mean(-log_k, mask),
    }
    return w, jnp.ones_like(mask), U.stop_metrics(metrics)

  return U.set_name(with_statistics(correction, weight_mean if normalize else None), "tis")


def mis(lower=0.5, upper=2.0, *, level: str = "token", reweight: bool = True,
        train_logp=None, rollout_logp="logp_behavior"):
  """Masked importance sampling (MIS): drop tokens/sequences whose ratio leaves ``[L, U]``.

      keep_t = 1[L <= k <= U],   w_t = k (``reweight``) or 1

  with ``k = k_t`` (token), ``prod_s k_s`` (sequence) or
  ``exp(mean_s log k_s)`` (geometric); in the sequence levels the mask is
  constant within a sequence. ``w`` is detached.

  Source: TRL v1.9.0 ``vllm_importance_sampling_mode`` ``token_mask`` /
  ``sequence_mask`` (ratio set to 0 outside ``[clip_min, clip_max]``); verl
  v0.7.0 ``rollout_rs`` (token / sequence / geometric ratio bounds, a mask
  only) with ``rollout_is`` weights; OpenRLHF ``seq-mask-tis``.

  Args:
    lower, upper: the kept band, ``0 <= lower <= upper`` (jax arrays allowed).
    level: ``"token"``, ``"sequence"`` or ``"geometric"``.
    reweight: multiply kept tokens by the raw ratio (``True``, as the peers
      do) or only mask (``False``).
  """
  U.check_choice("level", level, _LEVELS)
  U.check_scalar("lower", lower, lo=0.0)
  U.check_scalar("upper", upper, lo=0.0, lo_open=True)
  U.check_order("lower", lower, "upper", upper)
  _check_sources(train_logp, rollout_logp)

  def correction(out, batch):
    log_k, mask = mismatch_log_ratio(out, batch, train_logp=train_logp, rollout_logp=rollout_logp, name="mis")
    k = jnp.exp(_level_log_ratio(log_k, mask, level))
    keep = ((k >= lower) & (k <= upper)).astype(mask.dtype)
    w = k if reweight else jnp.ones_like(k)
    w = jax.lax.stop_gradient(w * mask + (1.0 - mask))
    keep = keep * mask + (1.0 - mask)
    metrics = {
        "masked_frac": U.masked_mean(1.0 - keep, mask),
        "masked_frac_low": U.masked_mean((k < lower).astype(mask.dtype), mask),
        "masked_frac_high": U.masked_mean((k > upper).astype(mask.dtype), mask),
        "weight_mean": U.masked_mean(w * keep, mask),
        "raw_ratio_mean": U.masked_mean(k, mask),
        "mismatch_k1": U.masked_mean(-log_k, mask),
    }
    return w, keep, U.stop_metrics(metrics)

  return U.set_name(correction, "mis")


def icepop(alpha=0.5, beta=5.0, *, reweight: bool = True, train_logp=None, rollout_logp="logp_behavior"):
  """IcePop (Ring-1T): token-level masking of the train/inference discrepancy.

      M(k_t) = k_t if alpha <= k_t <= beta else 0,   k_t = pi_train(y_t; theta_old) / pi_infer(y_t; theta_old)

  ``M`` (detached) multiplies the ratio term's clipped loss, so tokens with
  too much mismatch get exactly zero gradient and in-range tokens equal the
  PPO term times ``k_t``. This is ``mis(alpha, beta, level="token")`` under its
  own catalog name. ``reweight=False`` keeps only the mask (our option; the
  Ring-1T form multiplies by ``k``).

  Source: Ring-1T / IcePop (seed 000 L51; mask verified beyond the abstract);
  OpenRLHF v0.11.0 ``is_correction_type=icepop`` (threshold ``[0.5, 5]``,
  ``openrlhf/models/loss.py``).
  """
  U.check_scalar("alpha", alpha, lo=0.0)
  U.check_scalar("beta", beta, lo=0.0, lo_open=True)
  U.check_order("alpha", alpha, "beta", beta)
  inner = mis(alpha, beta, level="token", reweight=reweight, train_logp=train_logp, rollout_logp=rollout_logp)

  def correction(out, batch):
    return inner(out, batch)

  return U.set_name(correction, "icepop")


def _divergence(log_k, estimator):
  """Per-token divergence of pi_rollout from pi_train, from rollout samples.

  With ``rho = pi_train / pi_rollout`` (``log rho = log_k``): k1 = -log rho,
  k2 = (log rho)^2 / 2, k3 = rho - 1 - log rho; each estimates
  KL(pi_rollout || pi_train) from tokens sampled by the rollout engine (k1 and
  k3 unbiased, k3 >= 0).
  """
  if estimator == "k1":
    return -log_k
  if estimator == "k2":
    return 0.5 * jnp.square(log_k)
  return jnp.exp(log_k) - 1.0 - log_k


def divergence_rejection(threshold, *, estimator: str = "k3", level: str = "token",
                         train_logp=None, rollout_logp="logp_behavior"):
  """Rejection of tokens or sequences by a k1/k2/k3 train/inference divergence.

      d_t = k_j(log rho_t),  rho_t = pi_train(y_t) / pi_rollout(y_t)
      k1 = -log rho,  k2 = (log rho)^2 / 2,  k3 = rho - 1 - log rho
      token:         reject t      if D = d_t             is out of bounds
      sequence_sum:  reject seq i  if D = sum_t d_t       ...
      sequence_mean: reject seq i  if D = mean_t d_t
      sequence_max:  reject seq i  if D = max_t d_t

  "Out of bounds": ``D > threshold`` for a float threshold (for k1, which is
  signed, ``|D| > threshold``), or ``D`` outside ``[lo, hi]`` for a
  ``(lo, hi)`` pair. ``weight`` is 1 and ``keep_mask`` the accepted tokens.

  Source: verl ``compute_rollout_rejection_mask`` (``rollout_rs`` in
  ``token_k{1,2,3}``, ``seq_sum_k*``, ``seq_mean_k*``, ``seq_max_k{2,3}``; k1
  needs "lower_upper" bounds there); AReaL ``RejectionSamplingConfig``
  (``metric=kl_k1/2/3``, ``agg=sum/mean/max``). The sign convention is
  verl's (checked at b178a3cd, 0.8.0.dev, ``rollout_corr_helper.py``: ``log_ratio = old -
  rollout``, ``token_k1 = -log_ratio``, ``token_k3 = exp(log_ratio) - 1 -
  log_ratio``): the k's estimate KL(pi_rollout || pi_train) from the
  sampler's tokens. verl's k1 bounds are *ratio* bounds ``"L_U"``, i.e.
  ``threshold=(log L, log U)`` here; a single verl k1 value ``x`` is
  ``threshold=log x``.

  Args:
    threshold: float ``tau > 0`` or a pair ``(lo, hi)`` with ``lo <= hi``.
    estimator: ``"k1"``, ``"k2"``, ``"k3"`` (aliases ``kl``, ``mse``, ``low_var_kl``).
    level: ``"token"``, ``"sequence_sum"``, ``"sequence_mean"``, ``"sequence_max"``
      (``sequence_max`` needs a non-negative estimator: k2 or k3).
  """
  if estimator not in _ESTIMATORS:
    raise ValueError(f"estimator must be one of {tuple(_ESTIMATORS)}, got {estimator!r}")
  U.check_choice("level", level, _REJECTION_LEVELS)
  est = _ESTIMATORS[estimator]
  if level == "sequence_max" and est == "k1":
    raise ValueError("level='sequence_max' needs a non-negative estimator ('k2' or 'k3'), got estimator='k1'")
  if isinstance(threshold, (tuple, list)):
    if len(threshold) != 2:
      raise ValueError(f"threshold must be a number or a (lo, hi) pair, got {threshold!r}")
    lo, hi = threshold
    U.check_scalar("threshold[0]", lo)
    U.check_scalar("threshold[1]", hi)
    U.check_order("threshold[0]", lo, "threshold[1]", hi)
  else:
    U.check_scalar("threshold", threshold, lo=0.0, lo_open=True)
    lo, hi = None, threshold
  _check_sources(train_logp, rollout_logp)

  def correction(out, batch):
    log_k, mask = mismatch_log_ratio(out, batch, train_logp=train_logp, rollout_logp=rollout_logp,
                                     name="divergence_rejection")
    d = _divergence(jnp.clip(log_k, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP), est) * mask
    if level == "token":
      stat = d
    else:
      reduce = {"sequence_sum": U.seq_sum, "sequence_mean": U.seq_mean, "sequence_max": U.seq_max}[level]
      stat = jnp.broadcast_to(reduce(d, mask)[:, None], d.shape)
    if lo is None:
      reject = (jnp.abs(stat) > hi) if est == "k1" else (stat > hi)
    else:
      reject = (stat < lo) | (stat > hi)
    keep = 1.0 - reject.astype(mask.dtype) * mask
    metrics = {
        "masked_frac": U.masked_mean(1.0 - keep, mask),
        "divergence_mean": U.masked_mean(d, mask),
        "divergence_max": U.masked_max(d, mask),
    }
    return jnp.ones_like(mask), keep, U.stop_metrics(metrics)

  return U.set_name(correction, "divergence_rejection")


def _technique_rows():
  from rljax._technique import Fidelity, Technique
  from rljax.objectives import _peer_conventions as PC
  from rljax.objectives import _stages as S
  from rljax.stages import loss_term_factory
  v07 = "volcengine/verl@v0.7.0 (f9c855f7) verl/trainer/ppo/rollout_corr_helper.py"
  trl = "huggingface/trl@v1.9.0 (35def3ee) trl/trainer/grpo_trainer.py"
  theirs_place = ("theirs: verl computes w (and the rejection mask, which rewrites response_mask) once per step in "
                  "the trainer on the whole batch from the recomputed old log-probs against the rollout's, "
                  "before the update, and the actor multiplies each micro-batch's per-token loss by it (in "
                  "bypass mode, the bypass_* presets, inside the loss on each micro-batch from the current "
                  "log-probs against the rollout's: on the legacy trainer only; verl 0.9.1's default v1 trainer "
                  "applies no correction in bypass mode), both sides at rollout.temperature and the rollout's "
                  "log-probs vLLM's processed_logprobs (top-k / top-p renormalised); TRL "
                  "computes it once per generation batch (old log-probs vs the vLLM sampling log-probs, both at "
                  "temperature, the vLLM side processed_logprobs) and multiplies the per-token loss, only with "
                  "use_vllm=True (the default GRPOTrainer generates with transformers and corrects nothing); ours: a "
                  "correction of a ratio term, evaluated on each "
                  "micro-batch from logp_old (else sg(log π_θ)) and logp_behavior, multiplying the term's "
                  "per-token loss (the aggregation denominator keeps the original loss_mask), both log-probs "
                  "untempered and untruncated")
  conv_read = ("; peer conventions (#51 sweep s1a): " + PC.READ_VERL_T + "; " + PC.READ_V1_BYPASS + "; the v1 "
               "trainer's decoupled path: trainer/ppo/v1/trainer_base.py:1743-1772 (rollout_log_probs fetched, "
               "compute_rollout_correction_and_add_to_batch) and workers/utils/losses.py:87-111 (ppo_loss passes "
               "rollout_is_weights to the policy loss); volcengine/verl@v0.7.0 trainer/ppo/ray_trainer.py:1514-1522 "
               "(the correction only when rollout_log_probs is in the batch: rollout.calculate_log_probs True); "
               + PC.READ_TRL_T + ", " + PC.READ_TRL_VLLM)
  conv_defaults = ((PC.T_NAME, PC.T_OURS, PC.T_VERL + "; " + PC.T_TRL),
                   (PC.TOPP_NAME, PC.TOPP_OURS, PC.TOPP_VERL + "; " + PC.TOPP_TRL),
                   ("trainer reaching it", "the correction runs whenever it wraps the loss term",
                    "TRL: only with use_vllm=True (default False: no vLLM IS correction at all), "
                    "vllm_importance_sampling_correction True; verl v0.7.0: rollout.calculate_log_probs True "
                    "(default False) and rollout_correction set; verl 0.9.1 (calculate_log_probs True): the decoupled "
                    "presets on the v1 (default) and legacy trainers, the bypass_* presets on the legacy trainer "
                    "only"))
  conv_deviations = (PC.TOPP_DEVIATION + ": pass both as train_logp / rollout_logp (extras keys)",
                     PC.V1_BYPASS_DEVIATION,
                     "TRL's correction (and its mask) runs only with use_vllm=True; its default GRPOTrainer "
                     "(use_vllm False) applies none")
  return (
      Technique("tis", "correction", tis, "w = sg(min(pi_train/pi_rollout, U)) per token or sequence",
                "TIS (Yao et al. 2025 blog); verl rollout_is; TRL *_truncate; seed 001 L51",
                stage=loss_term_factory(tis, role="correction", needs=S.logp_needs("train_logp", "rollout_logp")),
                fidelity=Fidelity("peer", "verl v0.7.0 rollout_corr_helper.compute_rollout_correction_weights; TRL "
                                  "v1.9.0 *_truncate",
                                  "level='geometric' and lower= are our options (not in verl)",
                                  read=v07 + ":318-436 compute_rollout_correction_weights (rollout_is 'token' / "
                                       "'sequence', clamp(max=rollout_is_threshold), batch_normalize); the verl 0.9.1 "
                                       "PyPI wheel "
                                       "rollout_corr_helper.py:93-130 _parse_rollout_is_threshold "
                                       "and :522-657 (a float threshold: the same TIS; a 'L_U' string: IcePop, "
                                       "weights zeroed outside [L, U], kept × ratio; presets decoupled_token_icepop / "
                                       "bypass_pg_token_icepop '0.5_5.0'), config/algorithm.py:179-185 and "
                                       "config/algorithm/rollout_correction.yaml:6-28; " + trl +
                                       ":2578-2601 (token_truncate / sequence_truncate) and grpo_config.py:924-951"
                                       + conv_read,
                                  defaults=(("threshold", "2.0", "verl rollout_is_threshold = 2.0; TRL "
                                             "vllm_importance_sampling_clip_max = 3.0"),
                                            ("level", "'token'", "verl rollout_is null in rollout_correction.yaml "
                                             "(off: set to enable; "
                                             "the RolloutCorrectionConfig dataclass default is 'sequence'); "
                                             "TRL vllm_importance_sampling_mode = 'sequence_mask' (a mask, not tis)"),
                                            ("lower", "None", "verl: none; TRL vllm_importance_sampling_clip_min = None"),
                                            ("normalize", "False", "verl rollout_is_batch_normalize = False"),
                                            ("log-ratio clamp", "±20 (token and sequence sum)",
                                             "verl ±20 (SAFETY_BOUND); TRL none")) + conv_defaults,
                                  placement=theirs_place,
                                  deviations=("level='geometric' and lower= are our options (verl has neither; "
                                              "TRL's clip_min is lower=)",
                                              "verl 0.9.1's 'L_U' rollout_is_threshold (IcePop: zero outside [L, U]) "
                                              "is not tis: it is mis(L, U, level='token'|'sequence') or icepop",
                                              "normalize=True divides by the masked mean of the micro-batch (the "
                                              "whole batch with batch statistics); verl normalises over the "
                                              "(distributed) batch and, at sequence level, over sequences; a mean "
                                              "≤ 1e-8: ours divides by 1e-8 (w / max(mean, 1e-8)), verl leaves the "
                                              "weights unnormalised (the verl 0.9.1 PyPI wheel "
                                              "rollout_corr_helper.py:651-655: divides only if weights_mean > 1e-8; "
                                              "per-row review h, #51: not in the record before); verl's mean itself "
                                              "divides by (n + 1e-8) where torch.distributed is not initialised (the "
                                              "trainer's driver): verl_F.masked_mean (utils/torch_functional.py:"
                                              "307-308), so at token level theirs is w·(n + 1e-8)/Σw, ours w·n/Σw "
                                              "(a relative 1e-8/n), and at sequence level each row's mean is "
                                              "Σw_i/(n_i + 1e-8) (rollout_corr_helper.py:628-646; eighteenth draw, "
                                              "#51: omitted); distributed_masked_mean (:967-986) divides by n",
                                              "log k clamped to ±20 (verl); TRL exponentiates unclamped")
                                  + conv_deviations)),
      Technique("mis", "correction", mis, "w = sg(k) * 1[L <= k <= U], k token/sequence ratio",
                "TRL *_mask; verl rollout_rs ratio bounds; OpenRLHF seq-mask-tis",
                stage=loss_term_factory(mis, role="correction", needs=S.logp_needs("train_logp", "rollout_logp")),
                fidelity=Fidelity("peer", "TRL v1.9.0 vllm_importance_sampling_mode token_mask / sequence_mask",
                                  "reweight=False (mask only) and level='geometric' are our options",
                                  read=trl + ":2578-2621 (ratio exp(Σ m (old − sampling)) per token or sequence; "
                                       "*_mask: set to 0 outside [clip_min, clip_max]), :3117-3118 (per-token loss "
                                       "× the ratio); grpo_config.py:924-951; " + v07 + ":82-193 "
                                       "compute_rollout_rejection_mask (ratio bounds, lower = 1/upper) read too; "
                                       "the verl 0.9.1 PyPI "
                                       "wheel rollout_corr_helper.py:132-413: rollout_rs has no "
                                       "ratio bounds any more (token_k1 'L_U' keeps L ≤ π_rollout/π_train ≤ U, i.e. "
                                       "mis(1/U, 1/L) as a mask; seq_mean_k1 is the geometric level; see "
                                       "divergence_rejection), and :522-657: rollout_is_threshold 'L_U' is IcePop "
                                       "(weight = ratio inside [L, U], 0 outside, token or sequence, response_mask "
                                       "kept) = mis(L, U, level) with reweight=True" + conv_read,
                                  defaults=(("lower", "0.5", "TRL clip_min = None (no lower bound); verl "
                                             "rollout_rs_threshold_lower = 1/upper"),
                                            ("upper", "2.0", "TRL clip_max = 3.0; verl rollout_rs_threshold (none)"),
                                            ("level", "'token'", "TRL 'sequence_mask' (the default mode)"),
                                            ("reweight", "True", "TRL: kept tokens × ratio (True); verl rollout_rs: "
                                             "mask only (False), weights from rollout_is separately"),
                                            ("log-ratio clamp", "±20", "TRL none; verl ±20")) + conv_defaults,
                                  placement=theirs_place,
                                  deviations=("defaults (0.5, 2.0, token) are ours: TRL's are (None, 3.0, sequence): "
                                              "mis(0.0, 3.0, level='sequence')",
                                              "rejected tokens keep their place in the aggregation denominator; "
                                              "verl's rejection removes them from response_mask (multiply "
                                              "loss_mask by keep for its form)",
                                              "level='geometric' (verl rollout_rs='geometric') and reweight=False "
                                              "are options; log k clamped to ±20",
                                              "verl 0.9.1 rollout_rs token_k1/seq_sum_k1 'L_U' bound π_rollout/π_train "
                                              "(the inverse ratio): verl 'L_U' is mis(1/U, 1/L, reweight=False) with "
                                              "loss_mask × keep; its rollout_is 'L_U' (IcePop) is mis(L, U, level) "
                                              "as is",
                                              "OpenRLHF v0.11.0 seq-mask-tis (openrlhf/models/loss.py:209-216, "
                                              "3c3be623; 'ppo' loss only; cli default [0.5, 5.0]) masks by the "
                                              "sequence's geometric-mean ratio but weights each kept token by its "
                                              "own token ratio, unclamped: not one mis but correction=(mis(0.5, 5.0, "
                                              "level='geometric', reweight=False), tis(threshold=1e30))")
                                  + conv_deviations)),
      Technique("icepop", "correction", icepop, "M(k) = k if alpha <= k <= beta else 0 (token)",
                "Ring-1T / IcePop, seed 000 L51; OpenRLHF icepop",
                stage=loss_term_factory(icepop, role="correction", needs=S.logp_needs("train_logp", "rollout_logp")),
                fidelity=Fidelity("peer", "OpenRLHF v0.11.0 openrlhf/models/loss.py PolicyLoss "
                                  "(vllm_is_correction_type='icepop')",
                                  "alpha/beta default 0.5/5.0 (OpenRLHF's); reweight=False is our option; k from "
                                  "untempered log-probs (OpenRLHF: at rollout.temperature, top-p-renormalised)",
                                  read="OpenRLHF/OpenRLHF@v0.11.0 (3c3be623) openrlhf/models/loss.py:196-207 (vllm_is "
                                       "= exp(old − rollout), zeroed outside [low, high], × the clipped PPO loss) "
                                       "and openrlhf/cli/train_ppo_ray.py:256-271 (is_correction_enable, "
                                       "is_correction_threshold [0.5, 5.0], is_correction_type); the verl 0.9.1 "
                                       "PyPI wheel "
                                       "rollout_corr_helper.py:522-657 (rollout_is_threshold "
                                       "'L_U': the same mask at token or sequence level, response_mask kept) and "
                                       "config/algorithm.py:216-234, :374-397 (decoupled_token_icepop / "
                                       "bypass_pg_token_icepop: 0.5 / 5.0; in bypass mode a policy-gradient loss, "
                                       "not PPO clip). Tenth draw (#51 item 4), the data k is computed on: "
                                       "train_ppo_ray.py:78 (with is_correction_enable the vLLM engines return "
                                       "logprobs_mode='processed_logprobs'), :163-164 and :398-399 "
                                       "(rollout.temperature 1.0, rollout.top_p 1.0), trainer/ppo_utils/"
                                       "samples_generator.py:203-210 (SamplingParams temperature, top_p, top_k −1, "
                                       "logprobs=1), trainer/ray/ppo_actor.py:524 (the actor's temperature = "
                                       "rollout.temperature) and models/actor.py:285 with models/utils.py:139-141 "
                                       "(log_probs_from_logits divides the logits by it, for old_log_probs too); "
                                       "vllm-project/vllm@01fa3fe7 vllm/v1/sample/ops/topk_topp_sampler.py "
                                       "TopKTopPSampler.forward_native (processed_logprobs = log_softmax of the "
                                       "temperature-scaled, top-k/top-p-truncated logits). The record listed "
                                       "neither setting. Sweep s1a (#51, peer conventions): train_ppo_ray.py:257 "
                                       "(--algo.advantage.is_correction_enable, store_true, default False), :265-270 "
                                       "(is_correction_type default 'tis'), :420 (actor.policy_loss_type 'ppo'), "
                                       "loss.py:196-197 (the correction only for policy_loss_type 'ppo'): OpenRLHF's "
                                       "default run applies no IcePop; verl: " + PC.READ_V1_BYPASS + "; verl's "
                                       "decoupled_token_icepop k is exp(old_log_probs − rollout_log_probs) with the "
                                       "same conventions (" + PC.READ_VERL_T + ")",
                                  defaults=(("alpha", "0.5", "0.5"), ("beta", "5.0", "5.0"),
                                            ("reweight", "True", "True (kept tokens × ratio)"),
                                            ("log-ratio clamp", "±20", "none"),
                                            ("temperature in k", "none: logp_old and logp_behavior are untempered "
                                             "(log softmax(z); the sampler's own temperature, RLConfig.temperature "
                                             "1.0, does not enter k)",
                                             "rollout.temperature (default 1.0) on both sides: old_log_probs = "
                                             "log softmax(z_train / T), rollout_log_probs = vLLM processed_logprobs "
                                             "at T"),
                                            ("top-p / top-k in k", "none (logp_behavior is the full distribution)",
                                             "rollout.top_p (default 1.0), top_k −1: rollout_log_probs is the "
                                             "log-prob renormalised over the kept nucleus; old_log_probs is not "
                                             "truncated"),
                                            ("is_correction_enable / is_correction_type", "icepop runs whenever it "
                                             "wraps the loss term", "False / 'tis' (OpenRLHF's default run: no "
                                             "IcePop; needs --algo.advantage.is_correction_enable and "
                                             "--algo.advantage.is_correction_type icepop)"),
                                            (PC.V1_BYPASS_NAME, "—", "bypass_pg_token_icepop: its IcePop REINFORCE "
                                             "only on the legacy trainer (use_v1 false); the default v1 trainer runs "
                                             "plain PPO clip against the rollout log-probs, no IcePop weight; "
                                             "decoupled_token_icepop runs on both")),
                                  placement="theirs: inside PolicyLoss on each micro-batch (policy_loss_type='ppo' "
                                            "only), k = exp(old_log_probs − rollout_log_probs) multiplying the "
                                            "clipped loss before aggregation, both log-probs at the rollout "
                                            "temperature (the actor's logits ÷ T; vLLM's processed_logprobs, "
                                            "after the top-p / top-k truncation); ours: a correction of a ratio "
                                            "term on each micro-batch, k from logp_old (else sg(log π_θ)) and "
                                            "logp_behavior, both untempered and untruncated",
                                  deviations=("log k clamped to ±20 (OpenRLHF exponentiates unclamped; equal "
                                              "inside the band)",
                                              "reweight=False (mask only) is our option; OpenRLHF applies icepop "
                                              "only to its 'ppo' loss, ours to any ratio term",
                                              "icepop is token level only; verl 0.9.1's sequence-level IcePop "
                                              "(rollout_is='sequence', 'L_U') is mis(L, U, level='sequence')",
                                              "k is the ratio of untempered, untruncated probabilities; OpenRLHF's "
                                              "is that of the tempered ones (rollout.temperature T on both sides) "
                                              "with the rollout side renormalised over vLLM's top-p / top-k "
                                              "nucleus (processed_logprobs), so at T ≠ 1 or top_p < 1 a token's k, "
                                              "and whether it is kept, differ (equal at their defaults T = 1, "
                                              "top_p = 1); no built-in source gives theirs: Rollout.logp_sampling "
                                              "(the tempered, truncated sampler log-prob) does not reach the "
                                              "TrainBatch and the trainer's log-probs are untempered, so both "
                                              "would have to be passed as train_logp / rollout_logp (extras keys); "
                                              "verl's decoupled_token_icepop k has OpenRLHF's conventions "
                                              "(rollout.temperature on both sides, processed_logprobs)",
                                              "OpenRLHF runs IcePop only with --algo.advantage.is_correction_enable "
                                              "and is_correction_type 'icepop' (defaults False and 'tis'); its "
                                              "default run has no correction",
                                              PC.V1_BYPASS_DEVIATION + ": bypass_pg_token_icepop's IcePop weight "
                                              "is verl's only on the legacy trainer"))),
      Technique("divergence_rejection", "correction", divergence_rejection,
                "reject token/sequence if k_j(log pi_train - log pi_rollout) (sum|mean|max) > tau",
                "verl compute_rollout_rejection_mask; AReaL RejectionSamplingConfig",
                stage=loss_term_factory(divergence_rejection, role="correction",
                                        needs=S.logp_needs("train_logp", "rollout_logp")),
                fidelity=Fidelity("peer", "verl 0.8.0.dev (b178a3cd) rollout_corr_helper.compute_rollout_rejection_mask",
                                  "k1 bounds are log-ratio bounds: verl's ratio bounds 'L_U' = threshold=(log L, log U)",
                                  read="volcengine/verl@b178a3cd (0.8.0.dev, 2026-01-29) verl/trainer/ppo/"
                                       "rollout_corr_helper.py:93-153 (_parse_rollout_rs_thresholds: k1 'L_U', a "
                                       "single k1 value U means [1/U, U]) and :156-372 compute_rollout_rejection_mask "
                                       "(token_k1/2/3, seq_sum/seq_mean_k1/2/3, seq_max_k2/3); v0.7.0 has only "
                                       "ratio bounds (rollout_rs token/sequence/geometric); verl/trainer/config/"
                                       "algorithm.py:176 and algorithm/rollout_correction.yaml:12 (rollout_rs null), "
                                       ":210-565 (the presets), core_algos.py:2065-2200 "
                                       "compute_policy_loss_bypass_mode. Sixth draw (#51 item 4): the record gave "
                                       "the helper's signature default token_k1 as verl's default. Sweep s1a (#51, "
                                       "peer conventions): at b178a3cd verl/workers/actor/dp_actor.py:259, 368 "
                                       "(logits.div_(temperature)), verl/trainer/config/rollout/rollout.yaml:11-17 "
                                       "(temperature 1.0, top_k −1, top_p 1), :77 (logprobs_mode processed_logprobs), "
                                       ":206 (calculate_log_probs False), verl/trainer/ppo/ray_trainer.py:1487-1499 "
                                       "(bypass: apply_bypass_mode) and :1566-1572 (the decoupled correction only "
                                       "with rollout_log_probs in the batch); the same rollout_rs in the verl 0.9.1 "
                                       "PyPI wheel (rollout_corr_helper.py:132-413) under " + PC.READ_V1_BYPASS + ". Per-row review j "
                                       "(#51): the verl 0.9.1 PyPI wheel's rollout_corr_helper.py:132-413 whole "
                                       "(its _sequence_mean = verl_F.masked_mean, utils/torch_functional.py:273-308: "
                                       "Σ / (n + 1e-8)) and trainer/config/algorithm.py:236-350 (the presets' "
                                       "thresholds, the same as at b178a3cd)",
                                  defaults=(("threshold", "none (required)", "rollout_rs_threshold (required)"),
                                            ("estimator, level", "'k3', 'token'", "none: rollout_rs null in "
                                             "RolloutCorrectionConfig and rollout_correction.yaml (no rejection; "
                                             "'token_k1' is only compute_rollout_rejection_mask's signature "
                                             "default, the trainer passes the config's); presets: seq_sum_k1 "
                                             "'0.5_2.0' (decoupled_seq_is_rs), seq_mean_k1 '0.999_1.001' (the "
                                             "geo_rs presets), seq_mean_k3 0.01 (the k3_rs presets)"),
                                            ("log-ratio clamp", "±20", "±20 (SAFETY_BOUND)"),
                                            ("several criteria at once", "one per correction (pass a sequence)",
                                             "comma-separated rollout_rs options, ANDed"),
                                            (PC.T_NAME, PC.T_OURS, PC.T_VERL),
                                            (PC.TOPP_NAME, PC.TOPP_OURS, PC.TOPP_VERL),
                                            ("trainer reaching it", "the correction runs whenever it wraps the loss "
                                             "term", "b178a3cd / v0.7.0: rollout.calculate_log_probs True (default "
                                             "False: no rollout_log_probs, no rejection); verl 0.9.1: the "
                                             "decoupled presets on the v1 (default) and legacy trainers, the "
                                             "bypass_* presets (bypass_ppo_clip_k3_rs, bypass_pg_geo_rs, ...) on "
                                             "the legacy trainer only")),
                                  placement="theirs: verl computes the rejection mask once per step in the trainer on the "
                                            "whole batch (recomputed old log-probs against the rollout's) and "
                                            "rewrites response_mask before the update; in bypass mode (the "
                                            "bypass_* presets) inside the loss on each micro-batch, from the "
                                            "current log-probs against the rollout's; ours: a correction of a "
                                            "ratio term on each micro-batch from logp_old (else sg(log π_θ)) and "
                                            "logp_behavior, the aggregation denominator keeping the original "
                                            "loss_mask",
                                  deviations=("k1 bounds are log-ratio bounds: verl's 'L_U' is threshold=(log L, "
                                              "log U); a single verl k1 value U is threshold=log U",
                                              "rejected tokens keep their place in the aggregation denominator; "
                                              "verl rewrites response_mask (multiply loss_mask by keep for its form)",
                                              "the default estimator/level (k3, token) are ours; verl rejects "
                                              "nothing unless rollout_rs is set (its presets: seq_sum_k1, "
                                              "seq_mean_k1, seq_mean_k3)",
                                              PC.TOPP_DEVIATION + ": pass both as train_logp / rollout_logp (extras "
                                              "keys)",
                                              "verl rejects nothing unless the rollout log-probs exist: "
                                              "rollout.calculate_log_probs is False by default at b178a3cd and "
                                              "v0.7.0 (True in 0.9.1)",
                                              PC.V1_BYPASS_DEVIATION + ": a bypass preset's rejection (e.g. "
                                              "bypass_ppo_clip_k3_rs) happens only on the legacy trainer",
                                              "the sequence mean divides by max(n, 1); verl's _sequence_mean is "
                                              "verl_F.masked_mean, Σ / (n + 1e-8) (torch_functional.py:294-308 in "
                                              "the verl 0.9.1 PyPI wheel), so its seq_mean statistic is smaller "
                                              "in magnitude by a factor 1/(1 + 1e-8/n): a sequence whose mean lies "
                                              "within that relative margin above a bound is rejected here and kept "
                                              "there (at the geo_rs presets' ±log 1.001 bounds a margin of about "
                                              "1e-11/n in the mean log-ratio; per-row review j, #51)"))),
  )


TECHNIQUES = _technique_rows()
