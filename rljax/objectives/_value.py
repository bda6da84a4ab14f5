"""Critic term: the (clipped) value loss of PPO with a learned value function.

The critic's values ``out.values`` come from a model with a value head
(``rljax.models.with_value_head`` / ``ModelConfig.value_head``) through
``rljax.models.policy_outputs``: ``values[b, t]`` is the value of the state
before token ``t``, aligned with ``batch.loss_mask`` like ``logp``. The targets
``batch.returns`` and the rollout-time values ``batch.values_old`` are data
(e.g. ``returns = advantages_raw + values_old`` from GAE).
"""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp

from rljax.objectives._kl import _check_batch, _check_value, _mask, _masked_mean, _require, _with_name
from rljax.types import PolicyOutputs, TrainBatch

__all__ = ["value_loss"]


def value_loss(clip_eps: Optional[float] = 0.2, coef=1.0):
  """PPO clipped value loss (verl ``compute_value_loss``; OpenRLHF ``ValueLoss``).

      v_clip = clip(v, v_old − ε, v_old + ε)
      L_t    = coef · ½ · max((v − R)², (v_clip − R)²)

  with ``v = out.values``, ``R = batch.returns``, ``v_old = batch.values_old``
  (all ``[B, T]``); ``clip_eps=None`` gives the unclipped ``coef · ½ (v − R)²``.
  The clip keeps the critic's update close to the rollout-time values (PPO,
  Schulman et al., arXiv:1707.06347, as in the OpenAI baselines PPO2 code):
  where the clipped branch is the larger one and the clip binds, the token's
  gradient w.r.t. ``v`` is 0. ``R`` and ``v_old`` are treated as constants.

  Convention: identical to verl's ``compute_value_loss`` (per-token
  ``max`` of the two squared errors, ½ outside, aggregated over the response
  mask by ``chain``'s ``aggregate``; verl's default ``loss_agg_mode`` is
  token-mean = ``token_mean`` here). Default ``clip_eps=0.2`` is TRL's
  ``cliprange_value`` and PPO2's shared ``cliprange``; verl's
  ``critic.cliprange_value`` and OpenRLHF v0.11.0's ``--critic.value_clip``
  default to 0.5 (pass ``clip_eps=0.5`` to reproduce them). The ε is absolute (in units of the returns), so it should
  follow the scale of the rewards.

  Args:
    clip_eps: ε ≥ 0 or None (no clipping); may be a traced array.
    coef: weight ≥ 0 of the term (verl's critic loss has none; TRL's ``vf_coef``
      / a shared actor-critic's value coefficient); may be a traced array.

  Reads ``out.values``, ``batch.returns`` and, with clipping,
  ``batch.values_old`` ([B, T]). Metrics (masked means over
  ``batch.loss_mask``, no gradient): ``clip_frac`` (fraction of tokens where
  the clipped branch is strictly larger, verl's ``vf_clipfrac``; 0 without
  clipping), ``value_mean``, ``return_mean``, ``explained_variance``
  ``1 − Var(R − v) / Var(R)`` (masked population variances; the denominator
  is floored at 1e-8).
  """
  if clip_eps is not None:
    _check_value("clip_eps", clip_eps, low=0.0)
  _check_value("coef", coef, low=0.0)

  def term(out: PolicyOutputs, batch: TrainBatch):
    shape = _check_batch(out, batch)
    if out.values is None:
      raise ValueError("out.values is required by value_loss but is None: the model needs a value head "
                       "(rljax.models.with_value_head or ModelConfig(value_head=True))")
    v = _require("out.values", out.values, shape)
    ret = jax.lax.stop_gradient(_require("batch.returns", batch.returns, shape))
    err = jnp.square(v - ret)
    if clip_eps is None:
      per_token, clipped = err, jnp.zeros(shape, bool)
    else:
      old = jax.lax.stop_gradient(_require("batch.values_old", batch.values_old, shape))
      eps = jnp.asarray(clip_eps).astype(jnp.promote_types(v.dtype, jnp.float32))  # float64 stays float64
      err_clip = jnp.square(jnp.clip(v, old - eps, old + eps) - ret)
      per_token, clipped = jnp.maximum(err, err_clip), err_clip > err
    mask = _mask(batch)
    vs = jax.lax.stop_gradient(v)
    resid = ret - vs
    var_resid = _masked_mean(jnp.square(resid - _masked_mean(resid, mask)), mask)
    var_ret = _masked_mean(jnp.square(ret - _masked_mean(ret, mask)), mask)
    metrics = {"clip_frac": _masked_mean(clipped.astype(jnp.float32), mask),
               "value_mean": _masked_mean(vs, mask), "return_mean": _masked_mean(ret, mask),
               "explained_variance": 1.0 - var_resid / jnp.maximum(var_ret, 1e-8)}
    return jnp.asarray(coef).astype(jnp.promote_types(per_token.dtype, jnp.float32)) * 0.5 * per_token, metrics

  return _with_name(term, "value_loss")


def _technique_rows():
  from rljax._technique import Fidelity, Technique
  from rljax.objectives import _stages as S
  from rljax.stages import loss_term_factory
  return (
      Technique("value_loss", "value", value_loss,
                "½·coef·max((v−R)², (clip(v, v_old−ε, v_old+ε)−R)²); ε=None: ½·coef·(v−R)²",
                "PPO arXiv:1707.06347; verl compute_value_loss (cliprange_value); OpenRLHF ValueLoss",
                stage=loss_term_factory(value_loss, needs={"values", "returns"}),
                fidelity=Fidelity("peer", "verl v0.7.0 core_algos.compute_value_loss; OpenRLHF v0.11.0 ValueLoss",
                                  "default clip_eps 0.2 (TRL's cliprange_value; verl cliprange_value and OpenRLHF "
                                  "value_clip are 0.5: pass 0.5); coef is ours",
                                  read="volcengine/verl@v0.7.0 (f9c855f7) verl/trainer/ppo/core_algos.py:1546-1585 "
                                       "compute_value_loss and verl/trainer/config/critic/critic.yaml:80 "
                                       "(cliprange_value 0.5); OpenRLHF/OpenRLHF@v0.11.0 (3c3be623) "
                                       "openrlhf/models/loss.py:233-269 ValueLoss, cli/train_ppo_ray.py:390 "
                                       "(--critic.value_clip 0.5); huggingface/trl@v1.9.0 "
                                       "trl/experimental/ppo/ppo_config.py:257-263 (vf_coef 0.1, cliprange_value 0.2); "
                                       "sweep s1a (#51, micro-batch denominator): volcengine/verl@v0.7.0 "
                                       "verl/workers/critic/dp_critic.py:210-245 (the default legacy critic: "
                                       "compute_value_loss with no global counts on each micro-batch, × "
                                       "1/gradient_accumulation or rows / ppo_mini_batch_size), critic.yaml:83 "
                                       "(loss_agg_mode = the actor's, token-mean); the verl 0.9.1 PyPI wheel "
                                       "workers/utils/losses.py:147-200 value_loss (dp_size, batch_num_tokens, "
                                       "global_batch_size of the mini-batch: the default v1 trainer's critic); "
                                       "OpenRLHF v0.11.0 openrlhf/trainer/ray/ppo_critic.py:95-104 and "
                                       "openrlhf/utils/loss_utils.py:54-100 (iter_grad_accum_global_norm: the "
                                       "optimizer step's tokens over all dp ranks ÷ gas), models/loss.py:11-37 "
                                       "aggregate_loss; the TRL 1.9.0 PyPI wheel trl/experimental/ppo/"
                                       "ppo_trainer.py:810-847 (0.5·masked_mean over the micro-batch inside "
                                       "accelerator.accumulate). Per-row review b (#51): the TRL 1.9.0 PyPI "
                                       "wheel trl/experimental/ppo/ppo_trainer.py:727 (sequence_length = the "
                                       "first pad index − 1, the last response token), :762-769 "
                                       "(padding_mask_p1: index > sequence_length + 1), :778 (the score at "
                                       "sequence_length + 1), :828 and :837 (the value loss masked by "
                                       "~padding_mask_p1: the response and the one position after it); ours: "
                                       "rljax/recipes/_recipe.py:88-90 and :349-350 with :441-447 (a shared "
                                       "critic's value loss enters the policy loss × Critic.coef, "
                                       "rl.critic_coef, default 0.5, on top of coef); the record gave the "
                                       "weight as coef alone and TRL's mask as the response's",
                                  defaults=(("clip_eps", "0.2", "verl 0.5; OpenRLHF 0.5; TRL 0.2"),
                                            ("coef", "1.0; a shared critic (rl.critic_shared=true) also multiplies "
                                             "the term by rl.critic_coef (Critic.coef, default 0.5): weight 0.5",
                                             "verl: none (own critic optimiser); TRL vf_coef 0.1"),
                                            ("value-loss tokens", "batch.loss_mask (the completion tokens)",
                                             "verl response_mask, OpenRLHF action_mask: the response; TRL PPO "
                                             "~padding_mask_p1: the response and the position after its last "
                                             "token (inside the padded width)"),
                                            ("½ factor", "yes", "yes (verl, OpenRLHF)"),
                                            ("aggregation", "chain's (token_mean)", "verl loss_agg_mode token-mean; "
                                             "OpenRLHF token-level mean"),
                                            ("micro-batch denominator", "the step batch's loss-token count on "
                                             "every micro-batch (make_train_step's global denominator)",
                                             "verl v0.7.0 (legacy dp_critic, the default): each micro-batch's own "
                                             "token count × 1/gradient_accumulation; verl 0.9.1: the mini-batch's "
                                             "global token count; OpenRLHF v0.11.0: the optimizer step's global "
                                             "token count; TRL PPO: each micro-batch's own masked mean ÷ "
                                             "gradient accumulation")),
                                  placement="theirs: the critic's update on each micro-batch, v_old the values "
                                            "computed before the update on the whole batch, R = GAE returns; "
                                            "ours: a loss term on each micro-batch, v_old = batch.values_old, "
                                            "R = batch.returns",
                                  deviations=("default ε 0.2 is TRL's; verl and OpenRLHF default to 0.5 "
                                              "(clip_eps=0.5)",
                                              "coef (TRL's vf_coef) weights the term for a shared actor-critic "
                                              "loss; verl's separate critic has none (coef=1); in the RL loop a "
                                              "shared critic's term is also × rl.critic_coef (default 0.5), so "
                                              "TRL's vf_coef 0.1 is rl.critic_coef=0.1 with coef=1 (the default "
                                              "weight is 0.5)",
                                              "TRL's PPO value loss also regresses the value at the position after "
                                              "the response's last token (padding_mask_p1, where its GAE puts the "
                                              "score) and counts it in its token mean; ours, verl's and "
                                              "OpenRLHF's cover the response tokens only",
                                              "the micro-batch denominator: ours divides every micro-batch by the "
                                              "step batch's token count, as verl 0.9.1's critic (global "
                                              "batch_num_tokens) and OpenRLHF v0.11.0 (the step's global token "
                                              "count) do, for any micro-batching; verl v0.7.0's default legacy "
                                              "dp_critic and TRL's PPO take each micro-batch's own token mean × "
                                              "1/gradient_accumulation: equal only when the micro-batches hold the "
                                              "same number of loss tokens"))),
  )


TECHNIQUES = _technique_rows()
