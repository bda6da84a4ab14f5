"""Objective recipes selected by ``RLConfig.objective`` (hyper-parameters traced from ``state.hparams``).

Each builder maps ``hparams -> Objective`` and is called inside the jitted
step, so clip bounds, KL beta and entropy coefficient are arrays that a
controller may change without recompiling.

* ``grpo``:    PPO-clip(eps_low, eps_high) [+ KL penalty] [+ entropy bonus]
* ``dapo``:    the same terms with clip-higher (set ``clip_high=0.28``), token mean,
               plus dynamic sampling / overlong shaping in the loop (config flags)
* ``dr_grpo``: PPO-clip with the constant normaliser ``seq_mean_token_sum_norm``
               (max_len = ``max_new_tokens``) and mean-only advantages
* ``gspo``:    sequence-level (geometric-mean) ratio clipping

With ``controller="entropic"`` the policy term is wrapped in
``advantage_sign_weighting(term, hp["pos_weight"], hp["neg_weight"])``; a
custom ``objective_fn`` receives the same hparams and applies them itself.
"""
from __future__ import annotations

from typing import Callable

from rljax.train._config import RLConfig

__all__ = ["build_objective", "initial_hparams"]


def initial_hparams(rl: RLConfig) -> dict:
  """The controller-owned scalars the RL step reads from ``state.hparams``.

  Always ``clip_low``, ``clip_high``, ``kl_beta``, ``entropy_coef`` (from the
  config); with ``controller="entropic"`` also ``pos_weight``/``neg_weight``.
  The chosen controller's initial values replace the config's (e.g. BAPO
  starts from its lowest bounds).
  """
  from rljax.train._controllers import make_controller  # pylint: disable=import-outside-toplevel
  hp = {"clip_low": rl.clip_low, "clip_high": rl.clip_high, "kl_beta": rl.kl_beta,
        "entropy_coef": rl.entropy_coef}
  ctl = make_controller(rl)
  hp.update({k: float(v) for k, v in ctl.hparams(ctl.init()).items()})
  return hp


def _aggregate(rl: RLConfig):
  from rljax import objectives as obj  # pylint: disable=import-outside-toplevel
  if rl.objective == "dr_grpo" or rl.aggregate == "seq_mean_token_sum_norm":
    return obj.seq_mean_token_sum_norm(max_len=rl.max_new_tokens)
  return obj.get_aggregation(rl.aggregate)


def build_objective(rl: RLConfig) -> Callable:
  """Returns ``builder(hparams) -> rljax.objectives.Objective`` for ``rl.objective``."""
  from rljax import objectives as obj  # pylint: disable=import-outside-toplevel
  if rl.objective == "custom":
    raise ValueError("RLConfig.objective='custom' needs an objective_fn passed to rljax.train.train")
  aggregate = _aggregate(rl)

  def builder(hp):
    if rl.objective == "gspo":
      policy = obj.gspo(eps_low=hp["clip_low"], eps_high=hp["clip_high"])
    else:
      policy = obj.ppo_clip(eps_low=hp["clip_low"], eps_high=hp["clip_high"])
    if rl.controller == "entropic":  # EntroPIC: loss weights of positive / negative advantage samples
      policy = obj.advantage_sign_weighting(policy, hp["pos_weight"], hp["neg_weight"])
    terms = [policy]
    if rl.kl_beta > 0:
      terms.append(obj.kl_penalty(beta=hp["kl_beta"], estimator=rl.kl_estimator))
    if rl.entropy_coef > 0:
      terms.append(obj.entropy_bonus(coef=hp["entropy_coef"]))
    return obj.chain(*terms, aggregate=aggregate)

  return builder
