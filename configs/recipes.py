"""Published RL recipes as compositions of rljax objective terms.

Each function returns an ``rljax.objectives.Objective`` (a ``chain(...)``).
Only the *loss* side lives here: DAPO's dynamic sampling and overlong reward
shaping, and Dr.GRPO's / GRPO's advantage estimators, are filters, rewards and
advantages (other rooms) applied before the loss.
"""
from rljax import objectives as O


def dapo(eps_low=0.2, eps_high=0.28):
  """DAPO (arXiv:2503.14476): clip-higher, token-level mean, no KL, no entropy bonus."""
  return O.chain(O.ppo_clip(eps_low, eps_high), aggregate=O.token_mean)


def dr_grpo(eps=0.2, max_len=None):
  """Dr.GRPO (arXiv:2503.20783): PPO clip, constant normaliser B * L_max (advantages without std)."""
  return O.chain(O.ppo_clip(eps, eps), aggregate=O.seq_mean_token_sum_norm(max_len=max_len))


def gspo(eps_low=3e-4, eps_high=4e-4):
  """GSPO (arXiv:2507.18071): clipped sequence-level ratio, averaged per sequence."""
  return O.chain(O.gspo(eps_low, eps_high), aggregate=O.seq_mean_token_mean)


def cispo(eps_high=4.0):
  """CISPO (MiniMax-M1, arXiv:2506.13585): clipped detached IS weight (cap 1 + eps_high = 5), token mean."""
  return O.chain(O.cispo(eps_high=eps_high), aggregate=O.token_mean)


RECIPES = {"dapo": dapo, "dr_grpo": dr_grpo, "gspo": gspo, "cispo": cispo}
