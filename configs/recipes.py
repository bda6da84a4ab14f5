"""Published RL recipes as compositions of catalog techniques (``rljax.recipes.Recipe``).

Each function returns a ``Recipe``; the config files ``grpo.py``, ``dapo.py``, ``dr_grpo.py``, ``gspo.py``
write one into the run config (``cfg.rl.with_recipe(...)``), so ``config.json`` holds it and ``--resume`` and
``--set rl.<field>=...`` work on it. ``python -m rljax.catalog`` lists every technique.
"""
from rljax.recipes import Critic, Recipe, stage


def grpo(kl_beta=0.04):
  """GRPO (DeepSeekMath, arXiv:2402.03300): group-normalised advantage, PPO clip, per-sequence mean, KL (k3)."""
  return Recipe(name="grpo", advantage=stage("grpo", eps=1e-4), aggregation="seq_mean_token_mean",
                loss=(stage("ppo_clip", eps_low=0.2, eps_high=0.2),
                      stage("kl_penalty", beta=kl_beta, estimator="k3")))


def dapo(eps_low=0.2, eps_high=0.28, overlong_buffer=2):
  """DAPO (arXiv:2503.14476): clip-higher, token mean, dynamic sampling with refills, overlong shaping, no KL."""
  return Recipe(name="dapo", shaping=stage("overlong_penalty", buffer_len=overlong_buffer),
                filters=stage("zero_variance", refill=True), advantage=stage("grpo", eps=1e-4),
                loss=stage("ppo_clip", eps_low=eps_low, eps_high=eps_high), aggregation="token_mean")


def dr_grpo(eps=0.2):
  """Dr.GRPO (arXiv:2503.20783): mean-only advantage, constant normaliser B * L_max (L_max = max_new_tokens)."""
  return Recipe(name="dr_grpo", advantage="dr_grpo", loss=stage("ppo_clip", eps_low=eps, eps_high=eps),
                aggregation="seq_mean_token_sum_norm")


def gspo(eps_low=3e-4, eps_high=4e-4):
  """GSPO (arXiv:2507.18071): clipped sequence-level (geometric-mean) ratio, averaged per sequence."""
  return Recipe(name="gspo", advantage=stage("grpo", eps=1e-4), loss=stage("gspo", eps_low=eps_low, eps_high=eps_high),
                aggregation="seq_mean_token_mean")


def cispo(eps_high=4.0):
  """CISPO (MiniMax-M1, arXiv:2506.13585): clipped detached IS weight (cap 1 + eps_high = 5), token mean."""
  return Recipe(name="cispo", advantage=stage("grpo", eps=1e-4), loss=stage("cispo", eps_high=eps_high),
                aggregation="token_mean")


RECIPES = {"grpo": grpo, "dapo": dapo, "dr_grpo": dr_grpo, "gspo": gspo, "cispo": cispo}


def starpo_s(top_p=0.25, eps_low=0.2, eps_high=0.28, critic=True):
  """StarPO-S (RAGEN, seed 000 L13): top-p groups by reward std, decoupled clip, PPO + critic (GAE) or GRPO."""
  return Recipe(name="starpo_s", filters=stage("variance_topp", top_p=top_p), advantage="gae" if critic else "grpo",
                critic=Critic() if critic else None, loss=stage("ppo_clip", eps_low=eps_low, eps_high=eps_high))


# the multi-turn agent recipes (issue #20): not arena entries, the arena's task is single-turn
AGENT_RECIPES = {"starpo_s": starpo_s}
