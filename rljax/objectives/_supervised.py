"""Supervised and distillation terms used inside RL pipelines.

``sft_nll``, ``gft``, ``opd``, ``dpo``, ``alol``, ``entropy_gated_contrastive``
and the wrapper ``delta_logp_reweight``. Sequence-level losses are spread over
the sequence's tokens; each docstring says which aggregation recovers the
paper's per-sequence / per-pair mean.

Size: one family (supervised and preference terms); the catalog rows with their fidelity records are the last ~300 lines.
"""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from rljax.objectives._entropy import _call_inner, _term_name, masked_quantile
from rljax.objectives._statistics import batch_statistics, has_statistics, with_statistics
from rljax.objectives._kl import (_check_batch, _check_choice, _check_value, _extra, _float, _log_ratio, _mask,
                                  _masked_mean, _proximal, _require, _seq_sum, _with_name)
from rljax.types import PolicyOutputs, TrainBatch, is_concrete

Array = jax.Array

__all__ = ["sft_nll", "gft", "opd", "dpo", "preference_pairs", "alol", "entropy_gated_contrastive",
           "delta_logp_reweight"]

_sg = jax.lax.stop_gradient


def _nll_metric(logp, mask):
  return _masked_mean(_sg(-logp), mask)


# --------------------------------------------------------------------------------------
# SFT / GFT
# --------------------------------------------------------------------------------------


def sft_nll(coef=1.0):
  """Supervised token NLL: ``L_t = −c · log π_θ(y_t | y_<t)``.

  Equals the cross-entropy of the logits against the target tokens; with
  ``token_mean`` it is the usual SFT loss (TRL ``SFTTrainer``'s default mean
  over completion tokens). ∂L/∂p_t = −c/p_t (the inverse-probability weight GFT
  bounds; seed 001 L49).

  Args:
    coef: c ≥ 0 (may be traced).

  Reads ``out.logp``. Metrics: ``nll`` (masked token-mean of −log p), ``coef``.
  """
  _check_value("coef", coef, low=0.0)

  def term(out: PolicyOutputs, batch: TrainBatch):
    _check_batch(out, batch)
    logp = out.logp.astype(_float(out.logp))
    c = jnp.asarray(coef).astype(logp.dtype)  # float64 stays float64 (x64)
    return -c * logp, {"nll": _nll_metric(logp, _mask(batch)), "coef": c}

  return _with_name(term, "sft_nll")


_GFT_RECTIFICATIONS = ("step", "ramp")


def gft(tau=0.1, *, rectification: str = "step", use_advantages: bool = False):
  """GFT Dynamic Coefficient Rectification (Group Fine-Tuning; seed 001 L49; arXiv:2604.14258).

      rectification="step" (default, the authors'):  c_t = 1 if p_t > τ else p_t
      rectification="ramp" (ours):                   c_t = min(1, p_t/τ)
      L_t = −sg(c_t) · log p_t            [· A_t if use_advantages]

  SFT's gradient w.r.t. p_t carries the inverse-probability weight 1/p_t; the
  rectification bounds it: "step" replaces it by 1 on tokens with p_t ≤ τ
  (∂L/∂p_t = −1 there, −1/p_t ≤ 1/τ above), "ramp" by 1/τ (continuous at τ).
  Tokens with p_t > τ get exactly the SFT gradient in both. "step" is the
  authors' code (github.com/ZJU-OmniAI/GFT, ``verl/trainer/ppo/core_algos.py::
  compute_gft_loss``: ``-log_prob * where(prob > tao, 1, prob).detach() *
  advantages``; ``examples/gft_trainer/run_qwen2.5-math-1.5B.sh``: τ = 0.1,
  GRPO advantages). There the term is the policy loss and always multiplies
  the (group) advantages (Group Advantage Learning); here that is
  ``use_advantages=True`` — off by default because the term is also used as a
  supervised addend next to a policy loss, where ``batch.advantages`` would
  weight it twice.

  Args:
    tau: τ ∈ (0, 1] (may be traced); authors' 0.1.
    rectification: ``"step"`` (authors') or ``"ramp"``.
    use_advantages: weight by ``batch.advantages`` (the authors' GFT loss).

  Metrics: ``nll``, ``frac_rectified`` (masked fraction with p_t ≤ τ for "step", < τ for "ramp").
  """
  _check_value("tau", tau, low=0.0, high=1.0, low_open=True)
  _check_choice("rectification", rectification, _GFT_RECTIFICATIONS)

  def term(out: PolicyOutputs, batch: TrainBatch):
    shape = _check_batch(out, batch)
    dtype = _float(out.logp)  # float64 stays float64: a float32 cast moves p across τ at the tie p = τ
    logp = out.logp.astype(dtype)
    t = jnp.asarray(tau, dtype)
    p = jnp.exp(_sg(logp))
    if rectification == "step":
      rectified = p <= t
      coef = jnp.where(rectified, p, 1.0)
    else:
      rectified = p < t
      coef = jnp.minimum(1.0, p / t)
    loss = -coef * logp
    if use_advantages:
      loss = loss * _require("batch.advantages", batch.advantages, shape)
    mask = _mask(batch)
    return loss, {"nll": _nll_metric(logp, mask),
                  "frac_rectified": _masked_mean(rectified.astype(jnp.float32), mask)}

  return _with_name(term, "gft")


# --------------------------------------------------------------------------------------
# OPD
# --------------------------------------------------------------------------------------


def opd(coef=1.0, *, teacher_key: str = "logp_teacher", importance_weighting: bool = True):
  """On-policy distillation: per-token reverse KL to a teacher (seed 001 L153, L73; slime ``--use-opd``).

      KL(π_θ‖π_T)(s_t) = E_{y~π_θ}[log π_θ(y|s_t) − log π_T(y|s_t)]
      L_t = c · sg(log π_θ(y_t) − log π_T(y_t)) · w_t,   w_t = exp(log π_θ(y_t) − sg(log π_b(y_t)))

  The value of ``sg(log π_θ − log π_T)`` is the sampled (k1) reverse-KL
  estimate; multiplying by w_t (value 1 on-policy, gradient ∇log π_θ) makes
  the gradient the REINFORCE estimator E[(log π_θ − log π_T)∇log π_θ], which
  equals ∇KL(π_θ‖π_T) exactly in expectation (the "+1" term has zero mean).
  Differentiating the k1 sample directly would give a zero-mean gradient, so
  that is not offered. π_b is ``batch.logp_proximal`` when the batch has one
  and ``importance_weighting`` is on (off-policy samples: w_t = π_θ/π_old,
  log clamped ±20), else the current policy (w_t ≡ 1). *Interpretation*: the
  abstracts only say "dense token-level supervision"; this is the
  reverse-KL-as-reward reading (slime/Thinking-Machines style).

  Args:
    coef: c ≥ 0 (may be traced).
    teacher_key: ``batch.extras`` key of the teacher log-probs ``[B, T]``.
    importance_weighting: use ``batch.logp_proximal`` when present.

  Metrics: ``reverse_kl`` (masked mean of log π_θ − log π_T), ``teacher_nll``.
  """
  _check_value("coef", coef, low=0.0)

  def term(out: PolicyOutputs, batch: TrainBatch):
    shape = _check_batch(out, batch)
    teacher = _extra(batch, teacher_key, shape)
    logp = out.logp.astype(_float(out.logp))  # float64 stays float64 (x64)
    has_prox = batch.logp_old is not None or batch.logp_behavior is not None
    log_w = _log_ratio(out, batch) if (importance_weighting and has_prox) else logp - _sg(logp)
    diff = _sg(logp - teacher)
    c = jnp.asarray(coef).astype(logp.dtype)
    mask = _mask(batch)
    metrics = {"reverse_kl": _masked_mean(diff, mask), "teacher_nll": _masked_mean(-teacher, mask)}
    return c * diff * jnp.exp(log_w), metrics

  return _with_name(term, "opd")


# --------------------------------------------------------------------------------------
# DPO
# --------------------------------------------------------------------------------------


def _check_pairs(pair_id, chosen) -> None:
  pid = np.asarray(pair_id)
  ch = np.asarray(chosen).astype(bool)
  for p in np.unique(pid[pid >= 0]):
    rows = np.nonzero(pid == p)[0]
    if len(rows) != 2:
      raise ValueError(f"batch.extras['dpo_pair_id']: pair {int(p)} has {len(rows)} rows, expected exactly 2")
    if ch[rows].sum() != 1:
      raise ValueError(f"pair {int(p)} must have exactly one chosen and one rejected row "
                       f"(chosen flags / rewards give {ch[rows].tolist()})")


def preference_pairs(data) -> dict:
  """DPO pairs from groups: each group's highest- and lowest-reward valid samples (when they differ).

  ``data``: a step's ``rljax.stages.StepData`` (``group_id``, ``valid``, ``rewards`` ``[B]``).

  Returns extras ``{"dpo_pair_id": [B] int32 (the group id, -1 outside a pair), "dpo_chosen": [B] bool}``
  (the keys :func:`dpo` reads by default): ``dpo``'s ``LossTerm.batch_extras``, built by the RL loop from each
  step's ``StepData``. Ties go to the first row. Our reading of on-policy DPO over
  GRPO groups: a group whose rewards are all equal gives no pair.
  """
  b = data.batch_size
  pair = np.full(b, -1, np.int32)
  chosen = np.zeros(b, bool)
  for gid in np.unique(data.group_id):
    rows = np.flatnonzero((data.group_id == gid) & data.valid)
    if rows.size < 2:
      continue
    r = data.rewards[rows]
    hi, lo = rows[int(np.argmax(r))], rows[int(np.argmin(r))]
    if r.max() > r.min():
      pair[[hi, lo]] = gid
      chosen[hi] = True
  return {"dpo_pair_id": pair, "dpo_chosen": chosen}


def dpo(beta=0.1, *, label_smoothing=0.0, pair_key: str = "dpo_pair_id", chosen_key: str = "dpo_chosen"):
  """DPO — direct preference optimisation (Rafailov et al., arXiv:2305.18290; TRL ``DPOTrainer`` ``sigmoid``).

      h_b = Σ_t m_bt (log π_θ(y_bt) − log π_ref(y_bt))         (sequence log-ratio)
      margin = h_chosen − h_rejected
      L_pair = −(1−ε) log σ(β·margin) − ε log σ(−β·margin)     (ε = label smoothing, cDPO)

  Pairs: ``batch.extras[pair_key]`` ``[B]`` int gives each row's pair id (rows
  with id < 0 are not in a pair and get zero loss); each id ≥ 0 must appear on
  exactly two rows. The chosen row is flagged by ``batch.extras[chosen_key]``
  ``[B]`` (bool / 0-1); without it, the row with the larger ``batch.rewards``
  ``[B]`` is chosen. These are validated when concrete (outside ``jit``);
  under ``jit`` a valid row whose pair does not have exactly two rows with
  one chosen in the batch the term sees — e.g. a pair split across
  micro-batches — gets a NaN loss, so the train step's non-finite guard skips
  the update (``train/skipped``) instead of training on half pairs. Keep both
  rows of a pair in one micro-batch.
  The reference log-probs come from ``batch.logp_ref``; sums run over
  ``batch.loss_mask`` (the completion tokens).

  Spread: every masked token of both rows carries ``s·L_pair`` with
  ``s = N / N_paired`` (N: rows with at least one masked token; N_paired:
  those in a pair), so ``aggregate=seq_mean_token_mean`` gives exactly
  mean_pairs L_pair (TRL's loss) even when unpaired rows (id < 0, e.g. the
  groups' middle samples from ``preference_pairs``) share the batch: they
  count as sequences in that aggregation's denominator, and ``s`` undoes it.
  ``s`` is a statistic of the whole batch (``term.batch_statistics``), so a
  micro-batched step gets the full batch's. Other aggregations weight pairs
  by length.

  Args:
    beta: β > 0 (TRL default 0.1; may be traced).
    label_smoothing: ε ∈ [0, 0.5).

  Metrics (TRL names): ``rewards/chosen``, ``rewards/rejected`` (mean β·h),
  ``rewards/margins`` (mean β·margin), ``rewards/accuracies`` (fraction of
  pairs with margin > 0), ``loss_pair`` (mean L_pair), ``pair_scale`` (s).
  """
  _check_value("beta", beta, low=0.0, low_open=True)
  _check_value("label_smoothing", label_smoothing, low=0.0, high=0.5, high_open=True)

  def pair_ids(batch, b_dim):
    extras = dict(batch.extras or {})
    if pair_key not in extras:
      raise ValueError(f"batch.extras[{pair_key!r}] ([B] int pair ids) is required by dpo")
    pair_id = extras[pair_key]
    if tuple(np.shape(pair_id)) != (b_dim,):
      raise ValueError(f"batch.extras[{pair_key!r}] must have shape ({b_dim},), got {tuple(np.shape(pair_id))}")
    return jnp.asarray(pair_id).astype(jnp.int32)

  def statistics_fn(out, batch):
    """``{"pair_scale": N / N_paired}`` over the rows with at least one masked token (1 without pairs)."""
    shape = _check_batch(out, batch)
    has = jnp.sum(_mask(batch), axis=1) > 0
    n_all = jnp.sum(has.astype(jnp.float32))
    n_paired = jnp.sum((has & (pair_ids(batch, shape[0]) >= 0)).astype(jnp.float32))
    return {"pair_scale": jnp.where(n_paired > 0, n_all / jnp.maximum(n_paired, 1.0), 1.0)}

  def term(out: PolicyOutputs, batch: TrainBatch, statistics=None):
    shape = _check_batch(out, batch)
    b_dim = shape[0]
    ref = _require("batch.logp_ref", batch.logp_ref, shape)
    extras = dict(batch.extras or {})
    pair_id = pair_ids(batch, b_dim)
    valid = pair_id >= 0
    same = (pair_id[:, None] == pair_id[None, :]) & valid[:, None] & valid[None, :]
    if chosen_key in extras:
      chosen = extras[chosen_key]
      if tuple(np.shape(chosen)) != (b_dim,):
        raise ValueError(f"batch.extras[{chosen_key!r}] must have shape ({b_dim},), got {tuple(np.shape(chosen))}")
      chosen = jnp.asarray(chosen).astype(bool)
    else:
      rewards = batch.rewards
      if rewards is None or tuple(np.shape(rewards)) != (b_dim,):
        raise ValueError(f"dpo needs batch.extras[{chosen_key!r}] or batch.rewards of shape ({b_dim},)")
      rewards = jnp.asarray(rewards, jnp.float32)
      other = same & ~jnp.eye(b_dim, dtype=bool)
      partner = jnp.sum(jnp.where(other, rewards[None, :], 0.0), axis=1)
      chosen = rewards > partner
    if is_concrete(pair_id) and is_concrete(chosen):
      _check_pairs(pair_id, chosen)
    mask = _mask(batch)
    h = _seq_sum(out.logp.astype(_float(out.logp)) - ref, mask)
    sign = jnp.where(chosen, 1.0, -1.0)
    margin = jnp.sum(jnp.where(same, (sign * h)[None, :], 0.0), axis=1)  # h_chosen − h_rejected, per row
    bt = jnp.asarray(beta).astype(margin.dtype)
    eps = jnp.asarray(label_smoothing).astype(margin.dtype)
    z = bt * margin
    pair_loss = -(1.0 - eps) * jax.nn.log_sigmoid(z) - eps * jax.nn.log_sigmoid(-z)
    pair_loss = jnp.where(valid, pair_loss, 0.0)
    # traced counterpart of _check_pairs: an incomplete pair poisons the loss instead of passing silently
    n_rows = jnp.sum(same, axis=1)
    n_chosen = jnp.sum(same & chosen[None, :], axis=1)
    broken = valid & ((n_rows != 2) | (n_chosen != 1))
    pair_loss = jnp.where(broken, jnp.nan, pair_loss)
    vf = valid.astype(jnp.float32)
    ch = vf * chosen.astype(jnp.float32)
    rj = vf * (1.0 - chosen.astype(jnp.float32))
    n_ch = jnp.maximum(jnp.sum(ch), 1.0)
    metrics = {
        "rewards/chosen": jnp.sum(_sg(bt * h) * ch) / jnp.maximum(jnp.sum(ch), 1.0),
        "rewards/rejected": jnp.sum(_sg(bt * h) * rj) / jnp.maximum(jnp.sum(rj), 1.0),
        "rewards/margins": jnp.sum(_sg(z) * ch) / n_ch,
        "rewards/accuracies": jnp.sum((z > 0).astype(jnp.float32) * ch) / n_ch,
        "loss_pair": jnp.sum(_sg(pair_loss) * ch) / n_ch,
    }
    scale = (statistics_fn(out, batch) if statistics is None else statistics)["pair_scale"]
    metrics["pair_scale"] = scale
    return jnp.broadcast_to((scale * pair_loss)[:, None], shape), metrics

  return _with_name(with_statistics(term, statistics_fn), "dpo")


# --------------------------------------------------------------------------------------
# A-LoL
# --------------------------------------------------------------------------------------

_ALOL_RATIOS = ("none", "sequence", "token")


def alol(*, ratio: str = "sequence", eps=0.9):
  """A-LoL — Advantage-Leftover-Lunch offline RL (Baheti et al., arXiv:2305.14718; seed 001 L191).

  The whole output is one action; A_b = R(x, y) − V(x) (the LM's own
  sequence-level value estimate) is given as ``batch.advantages`` (a per-
  sequence value broadcast over tokens; the masked mean over the sequence is
  used). Samples with A_b < 0 are dropped (the code's ``clamp(A, min=0)``). Loss:

      L_b = −1[A_b > 0] · A_b · sg(w_b) · log π_θ(y_b | x_b)
      spread: L_bt = −1[A_b > 0] · A_b · sg(w_bt) · log π_θ(y_bt)

  with w from ``ratio``:
    * ``"none"`` — w ≡ 1 (``a_lol_ref_free``: A-weighted sequence NLL);
    * ``"sequence"`` — w_b = clip(π_θ(y|x)/π_ref(y|x), 1−ε, 1+ε) (``a_lol``), the
      clip done on the log (Σ_t log r_t ∈ [log(1−ε), log(1+ε)], same value, no overflow);
    * ``"token"`` — w_bt = clip(π_θ(y_t)/π_ref(y_t), 1−ε, 1+ε) per token (``a_lol_seq``).
  Checked against the authors' code (github.com/abaheti95/LoL-RL,
  ``lolrl_qlora_llama_hh.py``): the ratio is computed under ``no_grad``
  (detached), clamped to [1−ε, 1+ε] with ``--ppo_clip`` default ε = 0.9 (our
  default), multiplied into the sequence NLL Σ_t −log π_θ and by A⁺, and
  averaged over the batch — ``aggregate=seq_mean_token_sum`` gives exactly
  that mean_b L_b. Not reproduced: the code's ``ppo_clip=0`` (unclipped ratio)
  and its A-LoL-KL variant; V(x) (the code's value head on the reference
  model) is the advantage room's job.

  Args:
    ratio: ``"none"``, ``"sequence"`` or ``"token"``.
    eps: ε ∈ [0, 1) (concrete or traced); authors' default 0.9.

  Reads ``out.logp``, ``batch.advantages``, ``batch.logp_ref`` (π_ref) unless
  ``ratio="none"``. Metrics: ``frac_dropped`` (sequences with A < 0),
  ``weight_mean``, ``advantage_mean`` (kept sequences).
  """
  _check_choice("ratio", ratio, _ALOL_RATIOS)
  _check_value("eps", eps, low=0.0, high=1.0, high_open=True)

  def term(out: PolicyOutputs, batch: TrainBatch):
    shape = _check_batch(out, batch)
    adv = _require("batch.advantages", batch.advantages, shape)
    dtype = _float(out.logp)  # float64 stays float64 (x64)
    mask = _mask(batch).astype(dtype)
    logp = out.logp.astype(dtype)
    n = jnp.sum(mask, axis=1)
    has = (n > 0).astype(dtype)
    a_seq = _seq_sum(adv, mask) / jnp.maximum(n, 1.0)
    keep = (a_seq > 0).astype(dtype) * has
    e = jnp.asarray(eps).astype(dtype)
    if ratio == "none":
      w = jnp.ones(shape, dtype)
    else:
      ref = _require("batch.logp_ref", batch.logp_ref, shape)
      log_r = _sg(logp - ref)
      if ratio == "sequence":
        w = jnp.broadcast_to(jnp.exp(jnp.clip(_seq_sum(log_r, mask), jnp.log1p(-e), jnp.log1p(e)))[:, None], shape)
      else:
        w = jnp.clip(jnp.exp(jnp.clip(log_r, -20.0, 20.0)), 1.0 - e, 1.0 + e)
    loss = -(keep * a_seq)[:, None] * w * logp
    metrics = {"frac_dropped": jnp.sum((a_seq < 0) * has) / jnp.maximum(jnp.sum(has), 1.0),
               "weight_mean": _masked_mean(w, mask * keep[:, None]),
               "advantage_mean": jnp.sum(a_seq * keep) / jnp.maximum(jnp.sum(keep), 1.0)}
    return loss, metrics

  return _with_name(term, "alol")


# --------------------------------------------------------------------------------------
# ReasonMaxxer
# --------------------------------------------------------------------------------------

_NEGATIVE = ("logp", "unlikelihood")


def entropy_gated_contrastive(tau=None, *, rho=None, entropy_key: str = "entropy_base", reward_threshold=0.5,
                              negative: str = "logp"):
  """ReasonMaxxer entropy-gated contrastive loss (seed 001 L179).

      g_t = 1[H_base(s_t) ≥ τ]       (or H_base ≥ its (1−ρ)-quantile over masked tokens)
      c_b = +1 if reward_b > reward_threshold (correct rollout) else −1
      L_t = −g_t · log π_θ(y_t)            if c_b = +1
      L_t = +g_t · log π_θ(y_t)            if c_b = −1, negative="logp"
      L_t = −g_t · log(1 − π_θ(y_t))       if c_b = −1, negative="unlikelihood"

  The gate comes from the frozen *base* model's entropy on the offline
  rollouts (``batch.extras[entropy_key]`` [B, T], falling back to
  ``batch.entropy_old``), so it does not move during training.
  *Interpretation*: the abstract gives "contrastive loss only at
  entropy-gated decision points" (1–3% of positions); the ±log π form, τ / ρ
  and the unlikelihood option (bounded, since +log π is unbounded below) are
  ours. Exactly one of ``tau``, ``rho`` must be given. The authors' code
  (github.com/farukakgul/ReasonMaxxer, ``scripts/train_reasonmaxxer.py``;
  per-row review l of issue #51 found it, the record has the details) uses
  the rollout's advantage clipped to ±2.5 instead of ±1, averages over each
  rollout's gated tokens (one rollout per micro-batch), and adds
  0.2 · KL(π_base ‖ π_θ) on the other tokens in its README recipe; pass
  advantages-derived rewards and compose ``kl_penalty`` for something close.

  Args:
    tau: absolute entropy threshold (nats) ≥ 0.
    rho: kept fraction ∈ [0, 1] of masked positions (top-entropy).
    entropy_key: extras key for the base-model entropy.
    reward_threshold: correctness threshold on ``batch.rewards`` [B].
    negative: ``"logp"`` or ``"unlikelihood"``.

  Metrics: ``frac_gated``, ``frac_correct``.

  Batch statistics (with ``rho``): ``{"threshold": q}``, the quantile of the
  whole batch's masked base entropies (batch data, so the micro-batches'
  comparisons with q are exactly the whole batch's).
  """
  if (tau is None) == (rho is None):
    raise ValueError(f"exactly one of tau and rho must be given, got tau={tau!r}, rho={rho!r}")
  _check_value("tau", tau, low=0.0)
  _check_value("rho", rho, low=0.0, high=1.0)
  _check_value("reward_threshold", reward_threshold)
  _check_choice("negative", negative, _NEGATIVE)

  def base_entropy(batch, shape):
    ent = _extra(batch, entropy_key, shape, required=False)
    if ent is None:
      if batch.entropy_old is None:
        raise ValueError(f"entropy_gated_contrastive needs batch.extras[{entropy_key!r}] or batch.entropy_old")
      ent = _require("batch.entropy_old", batch.entropy_old, shape)
    return _sg(ent)

  def quantile(out, batch):
    return masked_quantile(base_entropy(batch, _check_batch(out, batch)), _mask(batch),
                           1.0 - jnp.asarray(rho, jnp.float32))

  def term(out: PolicyOutputs, batch: TrainBatch, statistics=None):
    shape = _check_batch(out, batch)
    ent = base_entropy(batch, shape)
    rewards = batch.rewards
    if rewards is None or tuple(np.shape(rewards)) != (shape[0],):
      raise ValueError(f"batch.rewards must have shape ({shape[0]},) for entropy_gated_contrastive")
    mask = _mask(batch)
    if tau is not None:
      threshold = jnp.asarray(tau, jnp.float32)
    else:
      threshold = quantile(out, batch) if statistics is None else statistics["threshold"]
    gate = ((ent >= threshold) & (mask > 0)).astype(jnp.float32)
    correct = jnp.asarray(rewards, jnp.float32) > jnp.asarray(reward_threshold, jnp.float32)
    logp = out.logp.astype(_float(out.logp))
    if negative == "logp":
      neg = logp
    else:
      neg = -jnp.log1p(-jnp.exp(jnp.minimum(logp, np.log1p(-1e-6))))
    loss = gate * jnp.where(correct[:, None], -logp, neg)
    has = (jnp.sum(mask, axis=1) > 0).astype(jnp.float32)
    metrics = {"frac_gated": _masked_mean(gate, mask),
               "frac_correct": jnp.sum(correct * has) / jnp.maximum(jnp.sum(has), 1.0)}
    return loss, metrics

  statistics_fn = None if rho is None else (lambda out, batch: {"threshold": quantile(out, batch)})
  return _with_name(with_statistics(term, statistics_fn), "entropy_gated_contrastive")


# --------------------------------------------------------------------------------------
# Δlog p reweighting
# --------------------------------------------------------------------------------------

_P_SOURCES = ("current", "old")


_DELTA_FORMS = ("linear", "power")


def delta_logp_reweight(term, *, form: str = "linear", c=0.2, gamma=1.0, normalize: Optional[bool] = None,
                        source: Optional[str] = None):
  """Low-probability token reweighting (Δlog p paper, seed 001 L239; arXiv:2603.22117).

      form="linear" (default, the authors'):  w_t = 1 + c · (1 − p_t)
      form="power"  (ours):                   w_t = (1 − p_t)^γ
      p_t = sg(π(y_t|s_t)),   [w_t ← w_t / mean_{masked}(w)  if normalize]
      L_t = w_t · l_t

  where ``l_t`` is the wrapped term's per-token loss. The paper: RLVR's
  reasoning-critical updates have large Δlog p = log p_RLVR − log p_base,
  which sit on low-probability tokens, and a training-time reweighting that
  focuses learning on them helps. Checked against the authors' code
  (github.com/Hesse73/RLVR-Directions, ``verl/recipe/logprl/logp_ray_trainer.py``,
  ``reweight.method="reshape_reversed"``): the advantages are multiplied by
  ``1 + c − c·p_old`` (p of the old, recomputed policy; no normalisation;
  ``scripts/run_7B.sh`` c = 0.2, ``run_8B.sh`` c = 0.1) — the default here
  (``source="old"``, ``normalize=False``). Multiplying the per-token loss by
  a detached weight is the same as multiplying its advantage. Not
  reproduced: the code's other methods (reshape, middle, normalize, ppl*)
  and its positive/negative-advantage masks.

  ``form="power"`` is our earlier design: non-increasing in p_t, w = 1 for
  γ = 0, and (by default there) normalised to mean weight 1 over the
  batch's masked tokens, p from the current policy.

  Args:
    term: the term to wrap.
    form: ``"linear"`` (authors') or ``"power"``.
    c: c ≥ 0 of the linear form (may be traced).
    gamma: γ ≥ 0 of the power form (may be traced).
    normalize: divide by the masked mean weight (when it is > 0); default
      False for ``"linear"``, True for ``"power"``.
    source: ``"current"`` (out.logp) or ``"old"`` (``batch.logp_proximal``);
      default ``"old"`` for ``"linear"``, ``"current"`` for ``"power"``.

  Metrics (added): ``delta_logp/weight_mean`` (before normalisation),
  ``delta_logp/weight_max`` (after).

  Batch statistics (with ``normalize``): ``{"weight_mean": mean_{masked}(w) of
  the whole batch, "inner": ...}`` (the wrapped term's), so micro-batches
  normalise by the whole batch's mean weight.
  """
  if not callable(term):
    raise ValueError(f"term must be a callable objective term, got {term!r}")
  _check_choice("form", form, _DELTA_FORMS)
  _check_value("c", c, low=0.0)
  _check_value("gamma", gamma, low=0.0)
  if normalize is None:
    normalize = form == "power"
  if source is None:
    source = "old" if form == "linear" else "current"
  _check_choice("source", source, _P_SOURCES)

  def weight(out, batch):
    shape = _check_batch(out, batch)
    logp = out.logp if source == "current" else _proximal(batch, shape, "delta_logp_reweight")
    dtype = jnp.promote_types(logp.dtype, jnp.float32)  # float64 stays float64 (x64); bf16 -> float32
    p = jnp.exp(_sg(logp.astype(dtype)))
    q = jnp.clip(1.0 - p, 0.0, 1.0)
    if form == "linear":
      return 1.0 + jnp.asarray(c, dtype) * q
    return jnp.power(q, jnp.asarray(gamma, dtype))

  def statistics_fn(out, batch):
    return {"weight_mean": _masked_mean(weight(out, batch), _mask(batch)), "inner": batch_statistics(term, out, batch)}

  def wrapped(out: PolicyOutputs, batch: TrainBatch, statistics=None):
    shape = _check_batch(out, batch)
    statistics = statistics or {}
    loss, metrics = _call_inner(term, out, batch, shape, statistics.get("inner"))
    mask = _mask(batch)
    w = weight(out, batch)
    mean_w = _masked_mean(w, mask)
    if normalize:
      norm = statistics.get("weight_mean", mean_w)
      w = jnp.where(norm > 0, w / jnp.where(norm > 0, norm, 1.0), 1.0)
    metrics.update({"delta_logp/weight_mean": mean_w,
                    "delta_logp/weight_max": jnp.max(jnp.where(mask > 0, w, 0.0), initial=0.0)})
    return w * loss, metrics

  return _with_name(with_statistics(wrapped, statistics_fn if normalize or has_statistics(term) else None),
                    _term_name(term))


def _technique_rows():
  from rljax._technique import Fidelity, Technique
  from rljax.objectives import _peer_conventions as PC
  from rljax.objectives import _stages as S
  from rljax.stages import loss_term_factory
  return (
      Technique("sft_nll", "supervised", sft_nll, "L_t = −log π_θ(y_t)", "standard SFT; 001_5839a3671b0b4d92.txt L49",
                stage=loss_term_factory(sft_nll),
                fidelity=Fidelity("peer", "TRL v1.9.0 SFTTrainer token cross-entropy "
                                  "(sft_trainer._chunked_cross_entropy_loss)",
                                  "TRL divides by num_items_in_batch (global token count): token_mean with the "
                                  "global denominator",
                                  read="huggingface/trl@v1.9.0 (35def3ee) trl/trainer/sft_trainer.py:99-116 _chunk "
                                       "(F.nll_loss(log_softmax, reduction='sum') per chunk of valid tokens), "
                                       ":117-234 _chunked_cross_entropy_loss (Σ / num_items_in_batch, else / the "
                                       "local valid count), :1286-1300 (loss_type); trl/trainer/sft_config.py:"
                                       "283-295, 335-336 (loss_type None → 'chunked_nll'); read whole (#51): "
                                       "sft_trainer.py:773-787 dft_loss and :1287-1296 (loss_type 'dft': −sg(p)·"
                                       "log p, Σ / num_items_in_batch; 'nll' the model's own loss), "
                                       "sft_config.py:100-115; sweep s1a (#51, micro-batch denominator): "
                                       "num_items_in_batch comes from transformers' Trainer (TRL 1.9.0 requires "
                                       "transformers ≥ 4.56.2; read at transformers 5.25.0): trainer.py:2343-2395 "
                                       "_get_num_items_in_batch (the valid shifted labels of the whole "
                                       "gradient-accumulation window, gathered and summed over the processes when "
                                       "average_tokens_across_devices, training_args.py:858-859 default True) and "
                                       ":2244-2252 (the loss × num_processes, undoing DDP's mean). Per-row review e "
                                       "(#51), the TRL 1.9.0 PyPI wheel around the loss: sft_config.py:205-219 "
                                       "(max_length 1024, truncation_mode 'keep_start'), sft_trainer.py:1571-1598 "
                                       "(_prepare_dataset, unpacked: input_ids and labels cut to their first "
                                       "max_length tokens, then an example left with no label ≠ −100 dropped); "
                                       "sft_config.py:156-162 (router_aux_loss_coef 0.001), sft_trainer.py:1357-1365 "
                                       "(an MoE model's output_router_logits set and the coef propagated) and "
                                       ":335-360 (the chunked forward adds router_aux_loss_coef × "
                                       "load_balancing_loss_func(router_logits) to the loss); :264-266, 325-327 and "
                                       "104-107 (the model config's logit_scale / final_logit_softcapping applied to "
                                       "the logits before the log-softmax, as the model's own forward)",
                                  defaults=(("coef", "1.0", "none (1)"),
                                            ("sequence length", "every loss-mask token (the recipe's prompt and "
                                             "completion lengths)", "max_length 1024, truncation_mode 'keep_start': "
                                             "prompt + completion cut to the first 1024 tokens before the loss; an "
                                             "example left with no completion token dropped"),
                                            ("MoE load-balancing loss", "none (the chain adds no router loss)",
                                             "router_aux_loss_coef 0.001 × the router's load-balancing loss added "
                                             "for an MoE model (no effect otherwise)"),
                                            ("tokens", "loss_mask", "labels ≠ −100 (completion_only_loss / "
                                             "assistant_only_loss choose them)"),
                                            ("aggregation", "chain's token_mean: the step batch's loss-token "
                                             "count on every micro-batch (make_train_step's global denominator)",
                                             "Σ / num_items_in_batch: the accumulation window's valid tokens over "
                                             "all processes (average_tokens_across_devices True)")),
                                  placement="theirs: the model forward's loss on each micro-batch (logits → "
                                            "log_softmax at the labels); ours: a loss term from out.logp on each "
                                            "micro-batch",
                                  deviations=("none in the denominator: TRL divides every micro-batch by the valid-"
                                              "token count of the whole gradient-accumulation window over all "
                                              "processes (num_items_in_batch, average_tokens_across_devices True), "
                                              "chain's token_mean by the step batch's loss-token count "
                                              "(make_train_step's global denominator): equal for any "
                                              "micro-batching; with average_tokens_across_devices=False TRL "
                                              "divides by each process's own window count (unequal when the "
                                              "processes' token counts differ)",
                                              "TRL's loss_type='dft' (Dynamic Fine-Tuning, −sg(p_t)·log p_t) is "
                                              "not this row: it is gft(tau=1.0) (c_t = p_t everywhere)",
                                              "TRL's SFTConfig.max_length 1024 (keep_start) truncates prompt + "
                                              "completion before the loss: only the completion tokens inside the "
                                              "first 1024 count (numerator and num_items_in_batch), and an example "
                                              "whose prompt fills the 1024 is dropped; ours sums every loss-mask "
                                              "token. Equal when every sequence fits in 1024 tokens (or with "
                                              "max_length=None)",
                                              "for an MoE policy TRL adds router_aux_loss_coef (0.001) × the "
                                              "load-balancing loss; the chain adds none (equal for a dense model or "
                                              "router_aux_loss_coef=0)"))),
      Technique("gft", "supervised", gft, "L_t = −sg(p_t > τ ? 1 : p_t)·log p_t  [·A_t]",
                "001_5839a3671b0b4d92.txt L49 (GFT); arXiv:2604.14258",
                stage=loss_term_factory(gft),
                fidelity=Fidelity("authors_code", "github.com/ZJU-OmniAI/GFT: verl/trainer/ppo/core_algos.py "
                                  "compute_gft_loss",
                                  "the code always multiplies by the group advantages: use_advantages=True (off by "
                                  "default, the term also serves as an SFT addend); rectification='ramp' is ours",
                                  read="ZJU-OmniAI/GFT@763384de (2026-05-19) verl/trainer/ppo/core_algos.py:668-712 "
                                       "compute_gft_loss (−log π · sg(where(p > tao, 1, p)) · A, agg_loss), "
                                       "verl/workers/actor/dp_actor.py:185-200 (p = softmax of the logits before "
                                       "the temperature division), :538 (loss_mode = 'gft' hard-coded) and "
                                       ":586-594; verl/trainer/ppo/ray_trainer.py:276-306 "
                                       "(build_dataprop_from_gen_batch: the prompt's stored model_answer_id "
                                       "candidates as responses), :1518, :1570-1576 (expert rows concatenated with "
                                       "the rollouts under the same uid); examples/gft_trainer/"
                                       "run_qwen2.5-math-1.5B.sh (tao 0.1, adv_estimator grpo, use_kl_loss False, "
                                       "entropy_coeff 0, rollout.n 4, data.teacher_count 4). Error-class sweep "
                                       "(#51, s2a; the micro-batch normaliser, launch switches): "
                                       "run_qwen2.5-math-1.5B.sh:8, 11, 18, 40-41 (train_batch_size 128, 4 GPUs, "
                                       "ppo_mini_batch_size 64, ppo_micro_batch_size_per_gpu 16, no "
                                       "use_dynamic_bsz), :58-59 (custom_reward_function NuminaMath.py "
                                       "compute_score, a path outside the repository); verl/workers/"
                                       "fsdp_workers.py:172-173 (the mini-batch × rollout.n ÷ the data-parallel "
                                       "size: 64 rows per GPU), :670-671 (update_actor, per-rank slices), "
                                       "verl/workers/actor/dp_actor.py:479-484 (gradient_accumulation = 64 // 16 = "
                                       "4, micro-batches of 16 rows), :623-625 (each micro-batch's token-mean ÷ 4): "
                                       "128 prompts × (4 rollouts + 4 expert rows) = 1024 rows, 4 optimizer steps "
                                       "per step; the record called the aggregation 'token-mean' without whose. "
                                       "Eleventh draw (#51 item 4, seed 20261216): verl/trainer/ppo/ray_trainer.py:"
                                       "688 (use_old_log_probs = False, hard-coded), :1624-1660 (so no old-log-prob "
                                       "forward, and batch.meta_info['temperature'] = 1.0), verl/workers/actor/"
                                       "dp_actor.py:422, 534 (update_policy's forward at that temperature: the "
                                       "logits ÷ 1.0), verl/trainer/config/ppo_trainer.yaml:398 (rollout.temperature "
                                       "1.0, the sampler's only; the script does not set it); ray_trainer.py:1612 "
                                       "(self.config.trainer.kl_eval read on every step, a key ppo_trainer.yaml does "
                                       "not have: the script as released stops at its first step with OmegaConf's "
                                       "ConfigAttributeError unless +trainer.kl_eval=False is added, checked by "
                                       "composing their config with hydra-core 1.3.8; no loss term depends on it), "
                                       ":1532-1538 and :1605-1610 (a one-off generation and log-prob forward on the "
                                       "data set's last four batches for that metric, not trained on). The record's "
                                       "deviation said their log π is divided by the temperature where p is not "
                                       "(equal at temperature 1): on every run the division is by 1.0. Per-row "
                                       "review l: verl/trainer/fsdp_gft_trainer.py:337-476 with verl/trainer/config/"
                                       "gft_trainer.yaml and verl/utils/dataset/gft_dataset.py:138-147 (a second, "
                                       "SFT-style entry point that no README command or script runs: data-set "
                                       "responses, three model answers + the ground truth per question; loss "
                                       "CrossEntropy·sg(p) of the plain logits, Σ ÷ (the micro-batch's loss tokens "
                                       "+ 1e-8) backpropagated per micro-batch (:470-475); the ÷ n_micro_batches "
                                       "at :493 comes after the backward, for the logged loss only; its "
                                       "sequence-parallel branch, :407-459, leaves out the p factor); the record "
                                       "did not mention it",
                                  defaults=(("tau", "0.1", "tao 0.1 (function default 0.5)"),
                                            (PC.T_NAME, PC.T_OURS,
                                             "1.0 for the update forward, hard-coded (ray_trainer.py:688, 1660; "
                                             "dp_actor.py:422): log π = log softmax(z / 1.0) and p = softmax(z) "
                                             "(dp_actor.py:185-200), whatever rollout.temperature (default 1.0, "
                                             "sampling only)"),
                                            ("rectification", "'step'", "step (p > tao ? 1 : p)"),
                                            ("use_advantages", "False", "always (× A)"),
                                            ("aggregation", "chain's (token_mean): the update batch's token count",
                                             "loss_agg_mode token-mean of each 16-row micro-batch on each GPU, ÷ "
                                             "gradient_accumulation 4, the 4 GPUs averaged: a mean of micro-batch "
                                             "token means"),
                                            ("mini-batches per step", "rl.num_minibatches × rl.updates_per_batch",
                                             "4: 1024 rows (128 prompts × (4 + 4)) ÷ 256 rows per mini-batch "
                                             "(ppo_mini_batch_size 64 × rollout.n 4)"),
                                            ("group", "the step's rows", "rollout.n 4 samples + teacher_count 4 "
                                             "expert responses from the data set, one uid")),
                                  placement="theirs: the actor's loss on each micro-batch (loss_mode 'gft'), A "
                                            "from verl's grpo estimator over each group of 4 rollouts and 4 expert "
                                            "(data-set) responses, p and log π from that forward, both of "
                                            "softmax(z) (its temperature is 1.0, hard-coded), the loss on "
                                            "both kinds of rows; ours: a "
                                            "loss term on each micro-batch, p = exp(sg(log π_θ)) of the untempered "
                                            "log π_θ: p = exp(log π) on both sides at any rollout temperature",
                                  deviations=("use_advantages=False by default (an SFT addend); the authors' loss is "
                                              "gft(use_advantages=True) with grpo advantages",
                                              "rectification='ramp' is our option",
                                              "their groups mix rollout.n = 4 samples with teacher_count = 4 "
                                              "expert responses read from the data set (extra_info "
                                              "model_answer_id), all scored and trained on; no rljax stage adds a "
                                              "data set's responses to a group, so their run is not composable",
                                              "their dp_actor also has loss modes vanilla, raft, raft_scale and sft "
                                              "(compute_policy_loss_raft*, compute_sft_loss), unreachable at this "
                                              "commit: loss_mode is overwritten with 'gft' (dp_actor.py:538)",
                                              "their second trainer, verl/trainer/fsdp_gft_trainer.py (no README "
                                              "command or script runs it), trains on data-set responses with "
                                              "−sg(p)·log p (no τ, no advantage): gft(tau=1.0) here (every p ≤ 1 "
                                              "keeps its p); its gradient is the sum of the micro-batches' token "
                                              "means (the ÷ n_micro_batches follows the backward), n_micro × "
                                              "chain's token_mean when the micro-batches hold equal token counts",
                                              "their token-mean is per 16-row micro-batch on each GPU (÷ gradient_"
                                              "accumulation 4, GPUs averaged): a mean of micro-batch token means, "
                                              "where ours divides by the update batch's token count: equal when "
                                              "every micro-batch holds the same number of loss tokens"))),
      Technique("opd", "supervised", opd, "L_t = c·sg(logπθ − logπT)·exp(logπθ − sg(logπb))",
                "001_5839a3671b0b4d92.txt L153, L73; slime --use-opd",
                stage=loss_term_factory(opd, needs={"logp_teacher", "logp_old"}),
                fidelity=Fidelity("peer", "github.com/THUDM/slime: slime/backends/megatron_utils/loss.py "
                                  "apply_opd_kl_to_advantages",
                                  "a standalone loss term; slime subtracts coef·(log π_old − log π_T) from the "
                                  "advantages, so it passes the PPO clip (same gradient on-policy, unclipped)",
                                  read="THUDM/slime@624b824a (2026-08-21) slime/backends/megatron_utils/loss.py:"
                                       "663-701 apply_opd_kl_to_advantages (A ← A − opd_kl_coef·(log π − log π_T) "
                                       "per token, log π the trainer's recomputed log-probs, or the rollout's with "
                                       "use_rollout_logprobs), called at :810-816 after the advantage estimator "
                                       "and before normalize_advantages; slime/utils/arguments.py:1123-1150 "
                                       "(--use-opd, --opd-type, --opd-kl-coef 1.0); read whole (#51): "
                                       "examples/on_policy_distillation/run-qwen3-8B-opd.sh:65, 74-75, 104-113 and "
                                       "run-qwen3-8B-opd-megatron.sh:42, 80-92 (--advantage-estimator grpo, "
                                       "--opd-kl-coef 1.0, n-samples-per-prompt 4, --use-kl-loss with kl-loss-coef "
                                       "0.00, entropy 0; no --normalize-advantages, arguments.py:1004 default "
                                       "False; --eps-clip 0.2 default, :899), slime/rollout/"
                                       "on_policy_distillation.py:32-67 (post_process_rewards, the SGLang script's "
                                       "only: every task reward "
                                       "0.0, so the grpo advantage is 0 and the signal is −coef·KL alone); sweep "
                                       "s1a (#51, peer conventions): loss.py:1317-1360 (calculate_per_token_loss "
                                       "False, arguments.py:879 and not set by the OPD scripts: the policy loss is "
                                       "sum_of_sample_mean × num_microbatches / step_global_batch_size × dp size), "
                                       "slime/backends/megatron_utils/cp_utils.py:47-80 (each sample's token sum ÷ "
                                       "its rollout's loss tokens), slime/ray/rollout.py:647-666, 684-700 and "
                                       "slime/utils/types.py:92-104 (rollout_mask_sums; a rollout is one sample "
                                       "unless a rollout function sets rollout_id); loss.py:540-543 (the student's "
                                       "logits ÷ rollout_temperature), arguments.py:343-347 (--rollout-temperature "
                                       "1.0; both OPD scripts pass 1), slime/rollout/on_policy_distillation.py:"
                                       "12-18 (the SGLang teacher asked with temperature = rollout_temperature). "
                                       "Per-row review b (#51): run-qwen3-8B-opd-megatron.sh:50-52 (RM_ARGS: "
                                       "--rm-type math; no custom reward post-process), slime/rollout/rm_hub/"
                                       "__init__.py:81-82 (math: 1 if grade_answer_verl else 0), slime/ray/"
                                       "rollout.py:608-633 (_post_process_rewards without a custom function: "
                                       "grpo rewards (r − group mean)/(std + 1e-6), torch's unbiased std; "
                                       "rewards_normalization on unless --disable-rewards-normalization, "
                                       "arguments.py:1011-1016): the Megatron-teacher run trains on the math "
                                       "reward, GRPO + OPD, not pure distillation; arguments.py:348-350 "
                                       "(--rollout-top-p 1.0, neither OPD script sets it), loss.py:83-95 and "
                                       ":977 (policy loss), slime/backends/megatron_utils/actor.py:357-372 "
                                       "(compute_log_prob: old, ref and Megatron-teacher log-probs, "
                                       "use_rollout_top_p_replay=True), loss.py:349-430 and slime/utils/"
                                       "ppo_utils.py:251-275 (below top-p 1 the log-prob is taken over the "
                                       "rollout's recorded nucleus: other logits −inf, renormalised; the entropy "
                                       "unmasked), rollout.py:718-732 (the nucleus ids stored per sample); the "
                                       "record said every published run is pure distillation and had no top-p "
                                       "row. Seventeenth draw (#51 item 4, seed 20261222), the teachers: "
                                       "run-qwen3-8B-opd.sh:15 (the SGLang teacher server: --model-path "
                                       "/root/Qwen3-32B) against the student's --hf-checkpoint /root/Qwen3-8B, "
                                       "--ref-load /root/Qwen3-8B_torch_dist (:51-52); run-qwen3-8B-opd-megatron.sh"
                                       ":87 --opd-teacher-load /root/Qwen3-8B_torch_dist, the same checkpoint as "
                                       "its --ref-load (:29) the student starts from, and examples/"
                                       "on_policy_distillation/README.md:70 ('This example uses the same model as "
                                       "both student and teacher (for demonstration only)'): that run's OPD term "
                                       "is −coef·(log π_old − log π_init), 0 on the first step; ours: the RL "
                                       "loop's logp_teacher is the reference forward's log-probs (rljax/stages/"
                                       "_data.py:145-147), the frozen copy of the policy at the start of RL "
                                       "(rljax/train/_rl.py:89, rljax/train/_inputs.py:5-6): the record had the "
                                       "Megatron run as GRPO + distillation and did not say which teacher either "
                                       "side uses",
                                  defaults=(("coef", "1.0", "opd_kl_coef 1.0"),
                                            ("teacher log-probs", "batch.extras[teacher_key]", "teacher_log_probs "
                                             "from an SGLang server or a Megatron teacher (opd_type)"),
                                            ("teacher model (their runs)", "the RL loop: the policy at the start "
                                             "of RL (logp_teacher = the reference forward); no setting loads "
                                             "another model",
                                             "run-qwen3-8B-opd.sh: Qwen3-32B (SGLang server) for a Qwen3-8B "
                                             "student; run-qwen3-8B-opd-megatron.sh: /root/Qwen3-8B_torch_dist, "
                                             "the student's own starting checkpoint (its --ref-load; README.md:70 "
                                             "'for demonstration only')"),
                                            ("importance_weighting", "True (π_θ/π_old when logp_old is given)",
                                             "the PPO ratio of the policy loss"),
                                            ("task reward in the published runs", "the recipe's reward (OPD added "
                                             "to the policy loss)", "run-qwen3-8B-opd.sh (SGLang teacher): 0.0 for "
                                             "every sample (post_process_rewards): pure distillation, grpo "
                                             "advantages 0, PPO clip eps 0.2 on −coef·KL; "
                                             "run-qwen3-8B-opd-megatron.sh (Megatron teacher): --rm-type math (1 "
                                             "correct, else 0), group-normalised (r − mean)/(std + 1e-6): the grpo "
                                             "advantage − coef·KL, PPO clip eps 0.2"),
                                            ("aggregation", "chain's (token_mean)", "the policy loss's: each "
                                             "sample's token mean, averaged over the step's samples "
                                             "(step_global_batch_size; calculate_per_token_loss False)"),
                                            (PC.T_NAME, PC.T_OURS, "--rollout-temperature (default 1.0; the OPD "
                                             "scripts 1) divides the student's logits"),
                                            ("top-p in the log-probs", "none: log π_θ and log π_old are "
                                             "untruncated; rl.top_p only samples", "--rollout-top-p (default 1.0; "
                                             "neither OPD script sets it): below 1 the student's old and current "
                                             "log-probs (and a Megatron teacher's) are renormalised over the "
                                             "rollout's recorded top-p nucleus")),
                                  placement="theirs: once per step on the whole rollout batch, folded into the "
                                            "advantages before their normalisation; the policy loss (PPO clip) then "
                                            "carries it on every micro-batch; ours: a separate loss term on each "
                                            "micro-batch, the KL value detached, the gradient through w",
                                  deviations=("a standalone term: not clipped by the PPO ratio and not part of "
                                              "the advantage normalisation (slime's --normalize-advantages would "
                                              "rescale it with the advantages); equal value and gradient on-policy "
                                              "without normalisation",
                                              "the KL uses the current log π_θ (= log π_old on-policy); slime's "
                                              "the step's old log-probs",
                                              "aggregation: slime's OPD signal rides in its policy loss, the mean "
                                              "over the step's samples of each sample's token mean (÷ "
                                              "step_global_batch_size, for any micro-batching); chain's default "
                                              "token_mean weighs the samples by length: "
                                              "chain(aggregate=seq_mean_token_mean) gives slime's when no sample "
                                              "is empty (the 'equal value' above is per token)",
                                              PC.T_DEVIATION + " (slime's student log π is at "
                                              "--rollout-temperature)",
                                              "the Megatron-teacher script (run-qwen3-8B-opd-megatron.sh) also "
                                              "trains on the math reward: A = (r − mean_g)/(std_g + 1e-6) − "
                                              "coef·(log π_old − log π_T); ours is ppo_clip(0.2) on the grpo "
                                              "advantage (eps 1e-6, std_ddof 1: slime's normalisation) plus "
                                              "opd(1.0), the same gradient on-policy (16 prompts × 4 samples = "
                                              "--global-batch-size 64: one optimizer step per rollout, ratio 1)",
                                              "at --rollout-top-p < 1 slime's student log-probs (old and current, "
                                              "and a Megatron teacher's) are log-softmax over the rollout's top-p "
                                              "nucleus, renormalised; ours are untruncated, so the KL value and "
                                              "the PPO ratio differ; equal at top-p 1 (slime's default and both "
                                              "OPD scripts); no option gives theirs",
                                              "teacher: the Megatron script's teacher is the student's starting "
                                              "checkpoint, so its OPD term is −coef·(log π_old − log π_init), 0 on "
                                              "the first step, a k1 penalty toward the initial policy in the "
                                              "advantage; the RL loop here does the same (logp_teacher is the "
                                              "frozen start-of-RL policy): that run is the one ours reproduces; the "
                                              "SGLang script's Qwen3-32B teacher (another model than the student's "
                                              "start) has no RL-loop setting here"))),
      Technique("dpo", "supervised", dpo, "L = −log σ(β[(h_w) − (h_l)]), h = Σ_t logπθ − logπref",
                "arXiv:2305.18290; TRL DPOTrainer",
                stage=loss_term_factory(dpo, role="policy", needs={"logp_ref"}, batch_extras=preference_pairs),
                fidelity=Fidelity("peer", "TRL v1.9.0 DPOTrainer loss_type='sigmoid' (f_divergence_type='reverse_kl')",
                                  "label_smoothing (cDPO form) is our option; TRL's sigmoid loss has none",
                                  read="huggingface/trl@v1.9.0 (35def3ee) trl/trainer/dpo_trainer.py:1329-1435 "
                                       "_compute_loss (completion log-probs summed per sequence, reference ones "
                                       "likewise, reverse_kl scores = the log ratios, sigmoid: −logsigmoid(β·Δ)), "
                                       ":1578 (mean over the pairs × loss weight); trl/trainer/dpo_config.py "
                                       "(beta 0.1, loss_type ['sigmoid'], label_smoothing 0.0, f_divergence_type "
                                       "'reverse_kl', ld_alpha None); sweep s1a (#51, micro-batch denominator): "
                                       "dpo_trainer.py:922-925 (model_accepts_loss_kwargs False: transformers' "
                                       "Trainer divides each micro-batch's loss by gradient_accumulation_steps) and "
                                       ":1578 (the micro-batch's mean over its own pairs); no temperature enters "
                                       "TRL's DPO log-probs (nor ours). Per-row review b (#51): dpo_config.py:"
                                       "170-177 (router_aux_loss_coef 0.001), :188-202 (max_length 1024, "
                                       "truncation_mode 'keep_start'); dpo_trainer.py:152-169 "
                                       "(DataCollatorForPreference: each prompt + completion cut to its first "
                                       "max_length tokens, the completion mask with it), :1073-1079 (an example "
                                       "whose prompt alone has ≥ max_length tokens is dropped), :881-884 and "
                                       ":1580-1582 (an MoE policy: loss + router_aux_loss_coef · its "
                                       "load-balancing loss), :1565-1576 (the WPO weight: exp of the completion "
                                       "mean of log p − log Σ_v p_v², not of log p); the record listed neither "
                                       "max_length nor router_aux_loss_coef. Fifteenth draw (#51 item 4, seed "
                                       "20261220): dpo_trainer.py:1000-1013 (add_eos: a non-conversational chosen / "
                                       "rejected text not ending with the EOS token gets it appended, so h sums its "
                                       "log-ratio), :912-916 and dpo_config.py:178-182 (disable_dropout True), the "
                                       "DPOConfig docstring's note (learning_rate 1e-6, bf16 True, "
                                       "gradient_checkpointing True, logging_steps 10: TRL's own defaults, not "
                                       "transformers'); ours: RLConfig.aggregation 'token_mean' "
                                       "(rljax/train/_config.py; Recipe.aggregation the same), the aggregation the "
                                       "record's use line trains with. The record listed no aggregation default, "
                                       "no EOS rule and none of DPOConfig's training defaults",
                                  defaults=(("beta", "0.1", "0.1"),
                                            ("label_smoothing", "0.0 (cDPO when > 0)", "0.0 (unused by 'sigmoid'; "
                                             "robust / exo_pair / aot / aot_unpaired use it)"),
                                            ("f_divergence_type", "reverse KL only", "'reverse_kl'"),
                                            ("ld_alpha (length desensitisation)", "not offered", "None"),
                                            ("max_length / truncation_mode", "none: h sums every loss_mask token "
                                             "(the sampled completion)", "1024, 'keep_start': prompt + completion "
                                             "cut to their first 1024 tokens, so h sums only the completion tokens "
                                             "inside them; an example whose prompt has ≥ 1024 tokens is dropped"),
                                            ("router_aux_loss_coef (MoE policies)", "none: the recipe's chain "
                                             "adds no auxiliary loss (aux_loss_coef 0)", "0.001 × the "
                                             "load-balancing loss added to the DPO loss"),
                                            ("aggregation", "token_mean (RLConfig.aggregation / Recipe.aggregation "
                                             "default; the use line's): each pair's loss weighted by its two rows' "
                                             "completion tokens; aggregate seq_mean_token_mean gives TRL's",
                                             "the mean over the micro-batch's pairs (dpo_trainer.py:1578)"),
                                            ("EOS on the completion", "none added: h sums the sampled completion's "
                                             "loss-mask tokens (an EOS only where one was sampled)",
                                             "add_eos: a non-conversational completion not ending with EOS gets "
                                             "one (dpo_trainer.py:1000-1013)"),
                                            ("training defaults (DPOConfig's own)", "RLConfig.optim (learning_rate "
                                             "3e-4), ModelSpec.dtype float32, no dropout in the model",
                                             "learning_rate 1e-6, bf16 True (the forwards in bf16 autocast), "
                                             "gradient_checkpointing True, disable_dropout True")),
                                  placement="theirs: each micro-batch holds [chosen; rejected] halves, policy and "
                                            "reference forwards on it (or precomputed reference log-probs); ours: a "
                                            "loss term on each micro-batch, pairs from batch.extras, π_ref = "
                                            "batch.logp_ref; both rows of a pair must share a micro-batch",
                                  deviations=("label_smoothing > 0 gives the cDPO form −(1 − ε) log σ(βΔ) − ε log "
                                              "σ(−βΔ) (TRL's 'aot' smoothing, not its 'robust'); TRL's 'sigmoid' "
                                              "has none",
                                              "the pair loss is spread over the pair's tokens: "
                                              "aggregate=seq_mean_token_mean gives TRL's mean over pairs; other "
                                              "aggregations weight pairs by length",
                                              "the micro-batch denominator: TRL takes each micro-batch's mean over "
                                              "its own pairs and transformers divides it by "
                                              "gradient_accumulation_steps (model_accepts_loss_kwargs False, "
                                              "dpo_trainer.py:922-925), DDP averaging the processes; ours divides "
                                              "every micro-batch by the step batch's row count: equal when every "
                                              "micro-batch holds the same number of pairs "
                                              "(per_device_train_batch_size; a short last batch of the data set "
                                              "differs)",
                                              "TRL's other loss types and f-divergences are not offered",
                                              "TRL's use_weighting (WPO: each pair × the product of its two rows' "
                                              "weights exp(mean over the completion of log p_t − log Σ_v p_v²), "
                                              "the 'aligned' length-normalised probability, dpo_trainer.py:"
                                              "1565-1576) and "
                                              "sync_ref_model (TR-DPO: π_ref ← 0.6·π_θ + 0.4·π_ref every 512 steps) "
                                              "are not offered (both off by default, dpo_config.py:107-125)",
                                              "TRL's max_length 1024 (keep_start) cuts each prompt + completion "
                                              "before the forward: completion tokens past the 1024th token of their "
                                              "sequence do not enter h there, ours sums every loss-mask token; "
                                              "equal when every prompt + completion fits in 1024 tokens (no option "
                                              "truncates h here)",
                                              "an MoE policy: TRL adds router_aux_loss_coef (0.001) × the "
                                              "load-balancing loss to the DPO loss; the RL loop's chain adds no "
                                              "auxiliary loss",
                                              "the default aggregation (token_mean, what rl.loss=dpo(...) trains with) "
                                              "weights each pair's loss by its two rows' completion-token count; "
                                              "TRL's loss is the unweighted mean over pairs: equal only with "
                                              "rl.aggregation=seq_mean_token_mean or equal pair lengths",
                                              "TRL appends the EOS token to a non-conversational completion that "
                                              "lacks it, so a completion cut at the length limit is scored there "
                                              "with an EOS log-ratio in h; ours sums only the sampled tokens"))),
      Technique("alol", "supervised", alol, "L = −1[A>0]·A·sg(clip(π/π_ref))·log π(y|x)",
                "001_5839a3671b0b4d92.txt L191; arXiv:2305.14718",
                stage=loss_term_factory(alol, role="policy", needs={"logp_ref"}),
                fidelity=Fidelity("authors_code", "github.com/abaheti95/LoL-RL: lolrl_qlora_llama_hh.py (a_lol, "
                                  "a_lol_seq, a_lol_ref_free)",
                                  "A = R − V(x) comes from the batch (the code's value head); ppo_clip=0 (no clip) and "
                                  "A-LoL-KL are not offered",
                                  read="abaheti95/LoL-RL@9f8d8166 (2024-03-20) lolrl_qlora_llama_hh.py:110-111 "
                                       "(algorithm, ppo_clip 0.9), :844-905 a_lol (ratio exp(Σ log π − Σ log π_ref) "
                                       "under no_grad, clamp [1 − 0.9, 1 + 0.9], × Σ_t −log π, × clamp(R − V, 0), "
                                       "batch mean), :906-952 a_lol_seq (per-token clamped ratio), :953-962 "
                                       "a_lol_ref_free; :113, :539-600 (R = sigmoid(reward-model score); "
                                       "--sampling_strategy: None (argparse), good_priority = draw the training "
                                       "rows ∝ A⁺, good_random, all_priority; max_steps × the positive-A share); "
                                       "README.md:6, 25-30; train_generation_task_with_off_policy_PG.py:49-54, "
                                       "575, 662-698 (the COMET / Reddit implementation: --ppo_clip default None = "
                                       "the unclipped ratio, --train_sampling off; the README's commands for those "
                                       "tasks pass neither). Error-class sweep (#51, s2a; the micro-batch "
                                       "normaliser): lolrl_qlora_llama_hh.py:55-56 (per_device_train_batch_size 4, "
                                       "gradient_accumulation_steps 4), :660-688 (each step draws "
                                       "per_device_train_batch_size rows), :905 / :952 (the loss: the mean over "
                                       "those 4 rows), :964-968 (backward, then every gradient_accumulation_steps "
                                       "steps clip_grad_norm_ to max_grad_norm 0.3 (:50) and the optimizer step; the loss is "
                                       "never divided by gradient_accumulation_steps): the optimizer step's "
                                       "gradient is the sum of 4 micro-batch means, 4 × the mean over its 16 rows; "
                                       "the record said 'mean over the batch' without which batch. Per-row "
                                       "review c (#51): lolrl_qlora_llama_hh.py:714-729 (each batch is tokenised "
                                       "in the loop: the prompt, with the system prefix, left-truncated to "
                                       "768 − 128 = 640 tokens, :724; the response, the data set's suffix + "
                                       "tokenizer.eos_token, right-truncated to 128 tokens, :727-729; the "
                                       "argparse max_prompt_length 640 / max_length 768, :70-71, are not read "
                                       "there), :739-748 (log π over those ≤ 128 response positions, the "
                                       "appended EOS included), :865-870 (the ratio over the same positions). "
                                       "Sixteenth draw (#51 item 4, seed 20261221), the value head: "
                                       "utils/rl_utils.py:452-503 ValueHeadAttention (nn.Dropout of "
                                       "summary_dropout_prob on the hidden states, :488, and on the attention "
                                       "output, :501; summary_dropout_prob = 0.1 when the model config has "
                                       "none, :462-467, as LLaMA's has none), lolrl_qlora_llama_hh.py:193 "
                                       "(value_function_model.train()), :239 (the best head deep-copied in "
                                       "train mode), :503-514 (built or loaded: a new module, train mode), "
                                       "no .eval() on the head anywhere in the file (its .eval() calls, :118, "
                                       ":200, :252, :441, are the LM's and the baseline's); :285 (the V behind "
                                       "the cached A that draws the rows) and :856 / :918 (V(x) at the loss, "
                                       "under torch.no_grad, which leaves dropout on)",
                                  defaults=(("ratio", "'sequence'", "algorithm 'nll' (the argparse default); "
                                             "a_lol is the paper's main method"),
                                            ("eps", "0.9", "ppo_clip 0.9 (lolrl_qlora_llama_hh.py); None, no "
                                             "clip, in train_generation_task_with_off_policy_PG.py (COMET, Reddit)"),
                                            ("sampling", "the step's rows, each once", "sampling_strategy None "
                                             "(argparse: shuffled); README: 'only train on that subset [A > 0] with "
                                             "prioritized sampling' = good_priority (rows drawn ∝ A⁺)"),
                                            ("A", "batch.advantages (its masked mean per row)",
                                             "R − V(x) from the value head on the reference model, clamp(min=0)"),
                                            ("aggregation", "chain's (seq_mean_token_sum gives the code's per "
                                             "micro-batch form)", "mean over each 4-row micro-batch of the "
                                             "per-sequence sums, the 4 micro-batches' losses summed (not averaged) "
                                             "into one optimizer step: 4 × the mean over its 16 rows"),
                                            ("rows per optimizer step", "the update batch",
                                             "per_device_train_batch_size 4 × gradient_accumulation_steps 4 = 16, "
                                             "one process"),
                                            ("truncation", "none: every loss-mask token of the row",
                                             "hard-coded in the loop: the prompt left-truncated to 640 tokens "
                                             "(:724), the response (suffix + EOS) right-truncated to its first 128 "
                                             "tokens (:727-729); log π(y|x), the ratio and the loss sum over those"),
                                            ("V(x) at the loss (value-head dropout)",
                                             "none: A = batch.advantages as given",
                                             "ValueHeadAttention left in train mode (never .eval()): dropout p "
                                             "0.1 on its input hidden states and on its attention output "
                                             "(utils/rl_utils.py:462-467, 488, 501), so V(x) and A = clamp(R − "
                                             "V, 0) are a fresh dropout sample at each loss evaluation "
                                             "(lolrl_qlora_llama_hh.py:856, :918), not the V that set the row's "
                                             "sampling weight (:285, itself a dropout sample, cached in "
                                             "train_advantage_cache.pkl); its attention (:497-498) has no "
                                             "key_padding_mask, so V(x) also reads the left padding of the "
                                             "micro-batch's prompts (lolrl_qlora_llama_hh.py:723-724, :853-855) "
                                             "and depends on the other rows' prompt lengths")),
                                  placement="theirs: offline, each training batch of the fixed data set: π_ref and "
                                            "V(x) from the frozen reference model under no_grad, the loss on the "
                                            "batch, gradient accumulation; ours: a loss term on each micro-batch, "
                                            "π_ref = batch.logp_ref, A = batch.advantages",
                                  deviations=("A comes from the batch: the code's value head V(x) is the advantage "
                                              "room's job (advantages = R − V)",
                                              "ppo_clip=0 (unclipped ratio) and A-LoL-KL (kl_beta > 0) are not "
                                              "offered",
                                              "the sequence ratio is clipped in log space (same value, no "
                                              "overflow); the token ratio's log is clamped to ±20 first",
                                              "the script's other --algorithm choices (lolrl_qlora_llama_hh.py:110, "
                                              ":756-800) are not built: nll (the default: the sequence NLL summed "
                                              "over tokens), wbc (that NLL × the reward), r_gold (GOLD: the token "
                                              "probability floored at 0.1 × the reward) and r_lol (the reward in "
                                              "place of the advantage)",
                                              "their prioritized sampling (good_priority: training rows drawn ∝ "
                                              "A⁺, max_steps scaled by the positive share; good_random, "
                                              "all_priority) is not built: here every row of the step is used once "
                                              "and an A ≤ 0 row gets zero loss",
                                              "their second implementation (train_generation_task_with_off_policy_"
                                              "PG.py, the COMET and Reddit tasks) leaves the ratio unclipped "
                                              "(--ppo_clip None), which is not offered here",
                                              "their optimizer step sums the 4 gradient-accumulation micro-batches' "
                                              "mean losses (no ÷ gradient_accumulation_steps), 4 × the 16-row mean "
                                              "that chain(aggregate=seq_mean_token_sum) gives: a constant factor "
                                              "(a learning-rate change), which also moves where their "
                                              "clip_grad_norm_ threshold bites",
                                              "their response is the data set's suffix + EOS cut to its first 128 "
                                              "tokens and their prompt is cut to its last 640 (lolrl_qlora_llama_"
                                              "hh.py:724-729, hard-coded): Σ_t log π, the sequence ratio and the "
                                              "loss run over at most 128 response tokens; ours over every "
                                              "loss-mask token (equal for responses of ≤ 128 tokens, EOS "
                                              "included; a longer one differs)",
                                              "their V(x) in the loss is computed with the value head's dropout "
                                              "(p 0.1) on, since the head is never put in eval mode "
                                              "(utils/rl_utils.py:488, 501; lolrl_qlora_llama_hh.py:193, 239, "
                                              "856, 918): their A at the loss is a random draw around the "
                                              "head's deterministic value, and a row drawn for a positive cached A "
                                              "can get A = 0 (or another A) in its loss; ours uses "
                                              "batch.advantages unchanged (a deterministic V is the advantage "
                                              "room's; no option gives their dropout sample); their head also "
                                              "attends over the left-padded prompt positions without a padding "
                                              "mask (utils/rl_utils.py:497-498), so their V(x) changes with the "
                                              "micro-batch's longest prompt"))),
      Technique("entropy_gated_contrastive", "supervised", entropy_gated_contrastive,
                "L_t = −1[H_base ≥ τ]·c_b·log π_θ(y_t), c = ±1 by correctness", "001_5839a3671b0b4d92.txt L179",
                stage=loss_term_factory(entropy_gated_contrastive, needs=S.entropy_gated_needs,
                                        batch_extras=S.entropy_base_extras),
                fidelity=Fidelity("authors_code", "github.com/farukakgul/ReasonMaxxer: scripts/train_reasonmaxxer.py",
                                  "there: CE at gated tokens × clip(A, ±2.5), each rollout's mean over its gated "
                                  "tokens, + 0.2·KL(base‖π) off the gate (04_train_tau1p4.sh; argparse 0.1); ours: "
                                  "±1 by correctness, no anchor",
                                  read="farukakgul/ReasonMaxxer@72182e90 (the authors' repository: the fork "
                                       "ansz42/ReasonMaxxer's README names it the official one, and the README's "
                                       "BibTeX names Ömer Faruk Akgül first author of arXiv 2605.06241; its "
                                       "history, 4725111 'Initial public release' 2026-05-07 to 72182e9 "
                                       "2026-05-08, all commits by farukakgul, is carried by that fork, fetched; "
                                       "per-row review l): "
                                       "scripts/train_reasonmaxxer.py (unchanged since 4725111; argparse: "
                                       "decision_objective 'adv_ce' of adv_ce / delta_hinge / correct_sft, adv_clip "
                                       "2.5, kl_weight 0.1, beta_neg 1, batch_size 1, grad_accum_steps 4; the "
                                       "'adv_ce' branch: pos / neg = gated tokens with A > 0 / A < 0, Σ CE·clip(A) "
                                       "÷ their count per micro-batch, + kl_weight · the mean of KL(π_base ‖ π_θ) "
                                       "over the micro-batch's other valid positions, (loss / grad_accum_steps)"
                                       ".backward(); --curriculum_ordering sorts the rollouts by |A|·(gated ÷ "
                                       "completion length), descending, and turns the loader's shuffle off), "
                                       "scripts/score_rollouts.py (the base entropies: teacher-forced forward of "
                                       "the base model on prompt + completion, log_softmax of the float32 logits, "
                                       "untempered), scripts/select_mid_pool.py, scripts/prepare_training_data.py "
                                       "(H_base > τ, --tau 0.8, no --gate), and the README's recipe examples/"
                                       "qwen25_1p5b/02_generate_score_3x100x20.sh (20 rollouts per problem at "
                                       "temperature 0.6, top_p 0.95, max_tokens 8192; score_rollouts.py at "
                                       "max_seq_len 8192), 03_select_mid50_trim80.sh (select_mid_pool.py "
                                       "--max_target_problems 50 --require_both_signs --trim_fraction 0.8: the 50 "
                                       "problems closest to pass rate 0.5 with a correct and a wrong rollout, then "
                                       "the shortest 80% of their rollouts), 04_train_tau1p4.sh (prepare_training_"
                                       "data.py --tau_pos 1.4 --tau_neg 1.4 --min_pass 0.0 --max_pass 1.0; train_"
                                       "reasonmaxxer.py --batch_size 1 --grad_accum_steps 8 --kl_weight 0.2 "
                                       "--adv_clip 2.5 --decision_objective adv_ce --beta_neg 1.0 --curriculum_"
                                       "ordering --curriculum_key signal_clarity --epochs 2 --max_optimizer_steps "
                                       "149, LoRA r 32 / α 64 on q, k, v, o_proj, lr 1e-4) and 04_train_tau_sweep.sh "
                                       "(τ 1.0, 1.4, 1.8, 2.2, the rest the same). Per-row review l: the record "
                                       "cited only Arka04bro/ReasonMaxxer, a fork of the authors' repository (its "
                                       "stored files sit at the authors' commits 47251115, 69c47bd3, 1a8646b7 and "
                                       "at later ones), and called its authorship unconfirmed; read earlier in that "
                                       "fork: Arka04bro/ReasonMaxxer@a3bdf96b scripts/train_reasonmaxxer.py (the "
                                       "same 'adv_ce' path; the fork adds decision_objective clipped_ratio, "
                                       "--behavior_temperature and --kl_decision_weight; ninth draw (#51 item 4), "
                                       "the loop's switches: variant 'reasonmaxxer' (else 'fullseq'), "
                                       "separate_pos_neg_norm, balance_pos_neg, pos_only_decisions, "
                                       "normalize_by_problem, adaptive_betaneg, kl_on_generated_only all off, "
                                       "neg_prob_floor 0), scripts/prepare_training_data.py@f1651992 (the gate and "
                                       "the advantage: per problem A = (r − mean)/max(pstdev, 1e-8) on 0/1 "
                                       "correctness over the problem's rows in the file; problems with pass rate in "
                                       "[min_pass 0.25, max_pass 0.75], at most 50, closest to 0.5; decision "
                                       "positions = generated positions with H_base > τ_pos (correct rows) / τ_neg "
                                       "(wrong rows), --tau 0.8; the fork's --gate, default entropy_tau), the fork's "
                                       "reasonmaxxer/gating.py@f1651992 (gates entropy_tau, entropy_topk, "
                                       "entropy_quantile, random, low_entropy, first_k, last_k, stride, all; budgets "
                                       "per rollout) and its 0.5B pilot examples/qwen25_0p5b_pilot/00_config.sh and "
                                       "05_phase1_gates.sh@7088ef51 (KL_WEIGHT 0.2, GRAD_ACCUM 8, --batch_size 1, "
                                       "adv_clip 2.5, adv_ce, τ calibrated to TARGET_TOKENS_PER_ROLLOUT 10, pass "
                                       "range [0, 1], the control gates budget-matched per rollout); sweep s1a (#51, "
                                       "peer conventions): student and base log-probs F.log_softmax of the plain "
                                       "logits; scripts/generate_rollouts.py and reasonmaxxer/config.py@47251115 "
                                       "(TEMPERATURE 0.6, TOP_P 0.95; the generation payload stores no entropies, "
                                       "score_rollouts.py adds them). Sixteenth draw (#51 item 4, seed 20261221), the "
                                       "length and the tokens: scripts/score_rollouts.py@72182e90:146, 149 "
                                       "(argparse --dtype bfloat16, --max_seq_len 4096), :119-122 (the entropy: "
                                       "log_softmax of the logits .float()), :246-271 (the rendered prompt and "
                                       "prompt + completion TEXT tokenised anew, truncation=True, max_length "
                                       "--max_seq_len; was_truncated counted), :278-307 (the bfloat16 forward's "
                                       "logits upcast; the stored tokens, entropies and completion are those "
                                       "of the cut re-tokenisation); examples/qwen25_1p5b/"
                                       "02_generate_score_3x100x20.sh (--dtype bfloat16 --max_seq_len 8192; "
                                       "generation --max_tokens 8192); scripts/train_reasonmaxxer.py:77-93 "
                                       "(rows longer than --max_seq_len cut, --truncate_side right: decision "
                                       "positions past the cut dropped), :578-579 (argparse 4096, right), "
                                       "04_train_tau1p4.sh (--max_seq_len 8192 --truncate_side right --dtype "
                                       "bfloat16)",
                                  defaults=(("tau / rho", "one of them required", "decision positions precomputed "
                                             "by prepare_training_data.py: H_base > τ; the authors' recipe τ 1.4 "
                                             "(04_train_tau1p4.sh; sweep 1.0 / 1.4 / 1.8 / 2.2), argparse --tau 0.8 "
                                             "(τ_pos / τ_neg may differ by correctness); the fork's pilot scripts "
                                             "calibrate τ to ~10 tokens per rollout; cgap_tau 2.5 only for the "
                                             "held-out gap"),
                                            ("advantage behind c", "none (c = ±1 from batch.rewards)",
                                             "per problem (r − mean)/max(population std, 1e-8) on 0/1 "
                                             "correctness over the problem's kept rollouts; the recipe's pool: 50 "
                                             "problems with a correct and a wrong rollout, closest to pass rate "
                                             "0.5, then the shortest 80% of their rollouts, pass range [0, 1] "
                                             "(argparse [0.25, 0.75])"),
                                            ("per-row weight c", "±1 by reward > 0.5", "clip(A, ±2.5) (adv_clip); "
                                             "A = 0 rows (all-correct or all-wrong after the trim) get no "
                                             "decision loss"),
                                            ("gate comparison", "H ≥ τ", "H > τ"),
                                            ("KL anchor off the gate", "none here (compose kl_penalty)",
                                             "kl_weight 0.2 (04_train_tau1p4.sh, and the fork's pilot KL_WEIGHT "
                                             "0.2; argparse 0.1) · KL(π_base ‖ π_θ), full-vocabulary"),
                                            ("negative", "'logp' (+log π)", "adv_ce: CE × negative A (= +|A| log π)"),
                                            ("aggregation", "chain's (token_mean over loss_mask)", "each "
                                             "micro-batch's mean over its gated tokens (Σ ÷ their count), the loss "
                                             "÷ grad_accum_steps before backward; a micro-batch is one rollout "
                                             "(--batch_size 1: argparse and every script), grad_accum_steps 8 "
                                             "(04_train_tau1p4.sh, the pilot; argparse 4): an optimizer step is the "
                                             "mean over 8 rollouts of each rollout's gated-token mean"),
                                            ("data order", "the step's batch", "--curriculum_ordering "
                                             "signal_clarity (04_train_tau1p4.sh): rollouts sorted by |A|·(gated ÷ "
                                             "completion length), descending, no shuffle; argparse: shuffled"),
                                            ("log-probs / entropy temperature", "log π_θ untempered; H from "
                                             "batch.extras[entropy_key] as given (entropy_old: untempered)",
                                             "log π_θ = F.log_softmax of the plain logits (untempered, as ours); "
                                             "H_base from score_rollouts.py: the base model's teacher-forced "
                                             "entropy of log_softmax of the bfloat16 forward's logits upcast to "
                                             "float32 (--dtype bfloat16), untempered, on rollouts "
                                             "sampled at temperature 0.6, top_p 0.95"),
                                            ("length and tokens", "every loss-mask token of the batch's "
                                             "sampled ids", "the rollout's text re-tokenised with its prompt "
                                             "by score_rollouts.py and cut at --max_seq_len 8192 tokens of "
                                             "prompt + completion (02_generate_score_3x100x20.sh; argparse "
                                             "4096), cut again at --max_seq_len 8192, right, in training "
                                             "(04_train_tau1p4.sh; argparse 4096): no gate, decision loss or "
                                             "KL anchor past 8192 tokens, while generation allows max_tokens "
                                             "8192 after the prompt")),
                                  placement="theirs: offline, on each micro-batch (one rollout) of the stored "
                                            "rollouts; the frozen base model's forward gives the KL anchor, the "
                                            "gate comes with the data (score_rollouts.py's base entropies, "
                                            "prepare_training_data.py's positions); ours: a loss term on each "
                                            "micro-batch, the gate from batch.extras[entropy_key] (base-model "
                                            "entropies) or entropy_old",
                                  deviations=("c = ±1 by correctness instead of the clipped advantage (equal when "
                                              "|A| = 1)",
                                              "the denominator: theirs divides each micro-batch's gated sum by its "
                                              "own gated-token count and averages the micro-batches (÷ "
                                              "grad_accum_steps); chain's token_mean divides by the step batch's "
                                              "loss tokens, gated or not: ours = theirs × (gated ÷ loss tokens of "
                                              "the step) when every micro-batch holds the same number of gated "
                                              "tokens; with the authors' --batch_size 1 a micro-batch is one "
                                              "rollout, so theirs weighs each rollout equally (a per-rollout mean "
                                              "over its gated tokens), ours each token; no aggregation option "
                                              "gives theirs",
                                              "the gate keeps H = τ (≥); theirs needs H > τ",
                                              "no KL anchor: add kl_penalty (a sampled-token estimate, not the "
                                              "code's full-vocabulary KL(π_base ‖ π_θ))",
                                              "the authors' other decision objectives (delta_hinge, correct_sft) "
                                              "and the fork's clipped_ratio are not offered",
                                              "the authors' recipe trains on a fixed pool in curriculum order "
                                              "(--curriculum_ordering signal_clarity: |A|·gated share, descending, "
                                              "unshuffled, 149 optimizer steps over 2 epochs); ours trains on the "
                                              "step's fresh batch: no order option",
                                              "rho is a quantile over the batch's masked tokens; the fork's "
                                              "entropy_quantile gate keeps round(budget_frac·n) top-entropy "
                                              "positions per rollout, and its other gates (entropy_topk, random, "
                                              "low_entropy, first_k, last_k, stride, all) and per-correctness "
                                              "τ_pos / τ_neg are not offered",
                                              "train_reasonmaxxer.py's other switches are not offered (all off by "
                                              "default): --variant fullseq (every generated token, not the gate; "
                                              "≈ tau=0.0 here), --separate_pos_neg_norm and --balance_pos_neg "
                                              "(positive and negative gated tokens normalised apart / averaged "
                                              "0.5·(pos + neg)), --pos_only_decisions, --neg_prob_floor (negative "
                                              "tokens with π ≤ floor dropped), --normalize_by_problem (rows "
                                              "weighted by inverse problem frequency), --adaptive_betaneg (β_neg "
                                              "moved by the trend of Δlog p⁺), --kl_on_generated_only (the anchor "
                                              "otherwise covers the prompt positions too) and the fork's "
                                              "--kl_decision_weight (KL at the gated tokens as well, 0 by default)",
                                              "negative='unlikelihood' (−log(1 − π) on wrong rows) is ours",
                                              "the length: theirs scores and trains each rollout cut at 8192 "
                                              "tokens of prompt + completion (score_rollouts.py:254-271 "
                                              "truncation; train_reasonmaxxer.py:77-93, --truncate_side right), "
                                              "so a completion running past 8192 − prompt tokens (generation "
                                              "allows 8192 after the prompt) has no gate, loss or KL anchor "
                                              "there; ours covers every loss-mask token (equal for rollouts "
                                              "within 8192 tokens)",
                                              "the tokens: theirs are the completion TEXT re-tokenised with the "
                                              "prompt (score_rollouts.py:246-268), not the sampled ids; where "
                                              "the re-tokenisation differs, their gate, log-probs and "
                                              "positions are those of other tokens; ours are the sampled ids"))),
      Technique("delta_logp_reweight", "supervised", delta_logp_reweight,
                "L_t = (1 + c·(1 − p_old,t))·l_t  (form='power': (1 − p_t)^γ / mean(w))",
                "001_5839a3671b0b4d92.txt L239; arXiv:2603.22117",
                stage=loss_term_factory(delta_logp_reweight, role="policy", needs=S.delta_logp_needs),
                fidelity=Fidelity("authors_code", "github.com/Hesse73/RLVR-Directions: verl/recipe/logprl/"
                                  "logp_ray_trainer.py (reshape_reversed)",
                                  "the code's other reweight methods and advantage-sign masks are not offered; "
                                  "form='power' is our earlier design",
                                  read="Hesse73/RLVR-Directions@af8f20a6 (2026-02-22) verl/recipe/logprl/"
                                       "logp_ray_trainer.py:493-562 (reweight: p = exp(old_log_probs); "
                                       "reshape_reversed w = 1 + c − c·p; advantages × w, optionally under an "
                                       "advantage-sign mask), recipe/logprl/config/logp_trainer.yaml (adv_mask "
                                       "'none'), scripts/run_7B.sh (c 0.2, clip 0.2/0.28, clip_ratio_c 10, "
                                       "token-mean, no KL) and run_8B.sh (c 0.1); logp_ray_trainer.py:296-480 "
                                       "(algorithm.logp_diff: token masks by old log-prob / probability / "
                                       "logp difference quantiles, method clip or reweight; the scripts: enable "
                                       "True, quantile 0.2, mask_by 'old', method 'none' = statistics only). "
                                       "Error-class sweep (#51, s2a; launch switches): run_7B.sh and run_8B.sh "
                                       ":34-37 (max_response_length 8192 / 20480, enable_overlong_buffer True, "
                                       "overlong_buffer_len 4096, overlong_penalty_factor 1.0), :41-47 "
                                       "(enable_filter_groups True, metric acc, max_num_gen_batches 10, "
                                       "train_prompt_bsz 512, gen_prompt_bsz 1536, n_resp_per_prompt 16, "
                                       "train_prompt_mini_bsz 32), :66 (temperature 1.0): the reward the weighted "
                                       "advantages come from carries DAPO's overlong penalty, which the record did "
                                       "not list; w is computed once from old_log_probs, so the 16 mini-batches per "
                                       "step leave it fixed (ours: logp_proximal, also fixed)",
                                  defaults=(("form", "'linear'", "reshape_reversed"),
                                            ("c", "0.2", "0.2 (run_7B.sh); 0.1 (run_8B.sh)"),
                                            ("source", "'old' (logp_proximal)", "old_log_probs (recomputed)"),
                                            ("normalize", "False", "none"),
                                            ("adv_mask", "not offered (all tokens)", "'none'"),
                                            ("logp_diff token mask", "not offered (all tokens)", "method 'none' "
                                             "in run_7B.sh / run_8B.sh (no effect); the yaml's enable True, "
                                             "start_step 20, quantile 0.8, method 'none'"),
                                            ("reward / filter (not this term's)", "the recipe's (compose "
                                             "overlong_penalty, zero_variance)", "DAPO's overlong penalty (buffer "
                                             "4096 of max_response_length 8192 (7B) / 20480 (8B), factor 1.0) on the "
                                             "reward before the advantage; groups filtered on acc (up to 10 "
                                             "generation batches of 1536 prompts), 16 responses per prompt"),
                                            ("sampler temperature", "rl.temperature 1.0 (p untempered)",
                                             "1.0 (p = exp(old_log_probs) at T = 1): equal")),
                                  placement="theirs: once per step on the driver, after the advantage, on the "
                                            "whole batch: A ← A·w, then the PPO actor update; ours: a wrapper "
                                            "multiplying the wrapped term's per-token loss by the detached w on "
                                            "each micro-batch (equal: the PPO loss is linear in A for a fixed "
                                            "sign and w > 0)",
                                  deviations=("the code's other methods (reshape, middle, normalize, ppl*) and its "
                                              "positive/negative advantage masks are not offered",
                                              "form='power' (normalised, current p) is our earlier design",
                                              "their logp_diff token masks are not built: method 'clip' replaces "
                                              "the loss mask by a quantile subset of tokens (mask_by old / "
                                              "old-negative / old-prob / old-prob-middle / logp / entropy / "
                                              "logp-middle / logp-end), method 'reweight' applies w only on that "
                                              "subset; their scripts run method 'none' (statistics only), which "
                                              "is ours"))),
  )


TECHNIQUES = _technique_rows()
