"""How the RL loop runs each objective row: a ``LossTerm`` stage factory per catalog name.

Every term reads ``PolicyOutputs`` (the current policy: ``logp``, ``entropy``) and ``TrainBatch`` fields; the
factory declares which batch inputs the loop must compute (``rljax.stages.NEEDS``) and which arguments a
controller may move (``hparams``: ``eps_low -> clip_low``, ``eps_high -> clip_high``, ``beta -> kl_beta``,
``coef -> entropy_coef``). A ratio term reads ``logp_old`` (the proximal policy, recomputed before the update);
corrections compare it with the sampler's ``logp_behavior``.
"""
from __future__ import annotations


import jax.numpy as jnp
import numpy as np

from rljax.objectives import _aggregation, _corrections, _entropy, _kl, _ratio, _supervised, _value
from rljax.objectives import _ratio_utils as U
from rljax.stages import Aggregation, Shaping, loss_term_factory

_CLIP = {"eps_low": "clip_low", "eps_high": "clip_high"}
_EPS_HIGH = {"eps_high": "eps_low"}


def _logp_needs(*names):
  """Needs of a term that reads log-prob sources given by argument ``names`` (``None`` = proximal)."""
  def needs(arguments):
    return {need for need in (U.logp_need(arguments.get(n)) for n in names) if need}
  return needs


def _segment_needs(arguments):
  """``segment_ratio``'s ids: the step's reward segments (default) or turn ids; other sources need nothing."""
  src = arguments.get("segment_ids", "reward_segments")
  return {src} if src in ("reward_segments", "turn_ids") else set()


def _source_needs(extra=()):
  def needs(arguments):
    return ({"entropy_old"} if arguments.get("source") == "old" else set()) | set(extra)
  return needs


def _delta_logp_needs(arguments):
  """``delta_logp_reweight`` reads ``batch.logp_old`` when its probabilities come from the old policy."""
  default = "old" if arguments.get("form", "linear") == "linear" else "current"
  return {"logp_old"} if (arguments.get("source") or default) == "old" else set()


def _entropy_gated_needs(arguments):
  return {"entropy_ref"} if arguments.get("entropy_key") in ("entropy_base", "entropy_ref") else set()


STAGES = {
    # policy losses: ratio r = π_θ / π_old (proximal, recomputed before the update)
    "ppo_clip": loss_term_factory(_ratio.ppo_clip, hparams=_CLIP, fill=_EPS_HIGH, role="policy",
                                  needs=_logp_needs("old_logp")),
    "reinforce": loss_term_factory(_ratio.reinforce, role="policy", needs={"logp_behavior"}),
    "exgrpo_policy": loss_term_factory(_ratio.exgrpo_policy, hparams=_CLIP, fill=_EPS_HIGH, role="policy",
                                       needs=_logp_needs("old_logp")),
    "gpg": loss_term_factory(_ratio.gpg, role="policy"),
    "gspo": loss_term_factory(_ratio.gspo, hparams=_CLIP, role="policy", needs=_logp_needs("old_logp")),
    "gspo_token": loss_term_factory(_ratio.gspo_token, hparams=_CLIP, role="policy", needs=_logp_needs("old_logp")),
    "gmpo": loss_term_factory(_ratio.gmpo, hparams=_CLIP, role="policy", needs=_logp_needs("old_logp")),
    "segment_ratio": loss_term_factory(_ratio.segment_ratio, hparams=_CLIP, fill=_EPS_HIGH, role="policy",
                                       needs=lambda a: _logp_needs("old_logp")(a) | _segment_needs(a)),
    "cispo": loss_term_factory(_ratio.cispo, role="policy", needs=_logp_needs("old_logp")),
    "sapo": loss_term_factory(_ratio.sapo, role="policy", needs=_logp_needs("old_logp")),
    "cpgd": loss_term_factory(_ratio.cpgd, hparams=_CLIP, fill=_EPS_HIGH, role="policy",
                              needs=_logp_needs("old_logp")),
    "pspo": loss_term_factory(_ratio.pspo, role="policy", needs=_logp_needs("old_logp")),
    "decoupled_ppo": loss_term_factory(_ratio.decoupled_ppo, hparams=_CLIP, fill=_EPS_HIGH, role="policy",
                                       needs=_logp_needs("proximal_logp", "behavior_logp")),
    # train/inference corrections: passed to a policy loss as correction=...
    "tis": loss_term_factory(_corrections.tis, role="correction", needs=_logp_needs("train_logp", "rollout_logp")),
    "mis": loss_term_factory(_corrections.mis, role="correction", needs=_logp_needs("train_logp", "rollout_logp")),
    "icepop": loss_term_factory(_corrections.icepop, role="correction",
                                needs=_logp_needs("train_logp", "rollout_logp")),
    "divergence_rejection": loss_term_factory(_corrections.divergence_rejection, role="correction",
                                              needs=_logp_needs("train_logp", "rollout_logp")),
    # entropy
    "entropy_bonus": loss_term_factory(_entropy.entropy_bonus, hparams={"coef": "entropy_coef"}),
    "erc": loss_term_factory(_entropy.erc, role="policy", needs={"entropy_old"}),
    "clip_cov": loss_term_factory(_entropy.clip_cov, hparams=_CLIP, role="policy", needs={"logp_old"}),
    "kl_cov": loss_term_factory(_entropy.kl_cov, role="policy", needs={"logp_old"}),
    "top_entropy_mask": loss_term_factory(_entropy.top_entropy_mask, role="policy", needs=_source_needs()),
    # KL
    "kl_penalty": loss_term_factory(_kl.kl_penalty, hparams={"beta": "kl_beta"}, needs={"logp_ref"}),
    "rpg": loss_term_factory(_kl.rpg, hparams={"beta": "kl_beta"}, role="policy", needs={"logp_ref", "logp_old"}),
    # supervised
    "sft_nll": loss_term_factory(_supervised.sft_nll),
    "gft": loss_term_factory(_supervised.gft),
    "opd": loss_term_factory(_supervised.opd, needs={"logp_teacher", "logp_old"}),
    "dpo": loss_term_factory(_supervised.dpo, role="policy", needs={"logp_ref", "preference_pairs"}),
    "alol": loss_term_factory(_supervised.alol, role="policy", needs={"logp_ref"}),
    "entropy_gated_contrastive": loss_term_factory(_supervised.entropy_gated_contrastive,
                                                   needs=_entropy_gated_needs),
    "delta_logp_reweight": loss_term_factory(_supervised.delta_logp_reweight, role="policy",
                                             needs=_delta_logp_needs),
    # the critic's loss (Recipe.critic): reads out.values, batch.values_old (the critic at sampling time) and
    # batch.returns (the advantage estimator's targets, e.g. gae)
    "value_loss": loss_term_factory(_value.value_loss, needs={"values", "returns"}),
}


def _aggregation_factory(fn):
  def factory():
    return Aggregation(fn, name=fn.__name__)
  factory.__name__ = fn.__name__
  factory.__doc__ = f"Stage factory of the ``{fn.__name__}`` aggregation."
  return factory


def _sum_norm_factory(max_len=None):
  """``seq_mean_token_sum_norm``: ``max_len`` defaults to the run's ``max_new_tokens`` (Dr.GRPO's L_max)."""
  def bind(stage, facts):
    return Aggregation(_aggregation.seq_mean_token_sum_norm(max_len=max_len or facts.max_new_tokens),
                       name="seq_mean_token_sum_norm")
  return Aggregation(_aggregation.seq_mean_token_sum_norm(max_len=max_len), name="seq_mean_token_sum_norm",
                     bind_fn=bind)


def _kl_in_reward_factory(beta=1e-3, *, estimator: str = "kl", clamp: bool = True):
  """KL in the reward as a shaping stage (phase ``"forward"``: after the proximal and reference forwards).

  ``r_t = score_t − β·k(log π_old − log π_ref)·m_t`` on the completion tokens of valid rows, where ``score``
  is the step's token rewards if a stage wrote some, else the sequence reward on the last token (verl
  ``apply_kl_penalty``, applied after the reference forward and before the advantage).
  """
  _kl.kl_in_reward(jnp.zeros((1,)), jnp.zeros((1, 1)), jnp.zeros((1, 1)), jnp.ones((1, 1)), beta=beta,
                   estimator=estimator, clamp=clamp)  # validates the arguments now, not mid-run

  def fn(data):
    scores = data.token_rewards if data.token_rewards is not None else data.rewards
    mask = data.completion_mask & data.valid[:, None]
    rewards, metrics = _kl.kl_in_reward(scores, data.require("logp_old", "kl_in_reward"),
                                        data.require("logp_ref", "kl_in_reward"), mask, beta=beta,
                                        estimator=estimator, clamp=clamp)
    rewards = np.asarray(rewards)
    return rewards.astype(np.result_type(np.float32, rewards.dtype)), metrics  # float64 stays (x64)

  return Shaping(fn, name="kl_in_reward", phase="forward", needs={"logp_old", "logp_ref"})


_kl_in_reward_factory.slot = "shaping"
STAGES["kl_in_reward"] = _kl_in_reward_factory

for _name in ("token_mean", "token_sum", "seq_mean_token_sum", "seq_mean_token_mean"):
  STAGES[_name] = _aggregation_factory(getattr(_aggregation, _name))
STAGES["seq_mean_token_sum_norm"] = _sum_norm_factory
