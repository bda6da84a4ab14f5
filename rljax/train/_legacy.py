"""Configs written before the recipe fields existed (``rl.objective``, ``rl.kl_beta``, ``rl.controller``, ...).

``legacy_rl_fields`` rewrites an old ``RLConfig`` dict (an old run's ``config.json``) with recipe specs that
train what the old trainer trained, so old run directories stay loadable; ``MOVED`` tells a user who sets an old
field what replaced it. This is the only place that knows the old fields' technique names.
"""
from __future__ import annotations

__all__ = ["legacy_rl_fields", "MOVED"]

# old RLConfig field -> what replaced it
MOVED = {
    "objective": "rl.loss (e.g. rl.loss='gspo(eps_low=3e-4, eps_high=4e-4)') and rl.aggregation",
    "aggregate": "rl.aggregation",
    "adv_eps": "rl.advantage='grpo(eps=...)'",
    "clip_low": "rl.loss='ppo_clip(eps_low=..., eps_high=...)'",
    "clip_high": "rl.loss='ppo_clip(eps_low=..., eps_high=...)'",
    "kl_beta": "a KL term in rl.loss, e.g. rl.loss='ppo_clip, kl_penalty(beta=0.04, estimator=\"k3\")'",
    "kl_estimator": "kl_penalty(estimator=...) in rl.loss",
    "entropy_coef": "rl.loss='ppo_clip, entropy_bonus(coef=...)'",
    "dynamic_sampling": "rl.filters='zero_variance(refill=True)'",
    "overlong_buffer": "rl.shaping='overlong_penalty(buffer_len=..., penalty_factor=...)'",
    "overlong_penalty": "rl.shaping='overlong_penalty(buffer_len=..., penalty_factor=...)'",
    "controller": "rl.controllers, e.g. rl.controllers='adaptive_kl(target=0.1)'",
    "kl_target": "adaptive_kl(target=...) in rl.controllers",
    "kl_horizon": "adaptive_kl(horizon=...) in rl.controllers",
    "target_entropy": "entropic(target_entropy=...) or temperature_control(target_entropy=...) in rl.controllers",
    "entropic_kp": "entropic(kp=...) in rl.controllers",
    "entropic_ki": "entropic(ki=...) in rl.controllers",
    "bapo_rho0": "bapo(rho0=...) in rl.controllers",
    "temperature_kappa": "temperature_control(kappa=...) in rl.controllers",
}


def _call(name: str, **kwargs) -> str:
  args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
  return f"{name}({args})" if args else name


def legacy_rl_fields(d: dict) -> dict:
  """An old ``RLConfig`` dict (with ``objective``/``kl_beta``/``controller``/...) rewritten with recipe specs.

  A dict without old fields is returned unchanged. The translation reproduces what the old trainer ran.
  """
  if not set(d) & set(MOVED):
    return d
  d = dict(d)
  old = {k: d.pop(k) for k in list(d) if k in MOVED}
  objective = old.get("objective", "grpo")
  lo, hi = old.get("clip_low", 0.2), old.get("clip_high", 0.2)
  terms = [_call("gspo" if objective == "gspo" else "ppo_clip", eps_low=lo, eps_high=hi)]
  beta = old.get("kl_beta", 0.0)
  if beta:
    terms.append(_call("kl_penalty", beta=beta, estimator=old.get("kl_estimator", "k3")))
  if old.get("entropy_coef", 0.0):
    terms.append(_call("entropy_bonus", coef=old["entropy_coef"]))
  d["loss"] = ", ".join(terms)
  agg = old.get("aggregate", "token_mean")
  d["aggregation"] = "seq_mean_token_sum_norm" if objective == "dr_grpo" else agg
  adv = d.get("advantage", "grpo")
  d["advantage"] = _call("grpo", eps=old.get("adv_eps", 1e-4)) if adv == "grpo" else adv
  if old.get("dynamic_sampling"):
    d["filters"] = _call("zero_variance", refill=True)
  if old.get("overlong_buffer", 0):
    d["shaping"] = _call("overlong_penalty", buffer_len=old["overlong_buffer"],
                         penalty_factor=old.get("overlong_penalty", 1.0))
  ctl = old.get("controller", "none")
  if ctl == "adaptive_kl":
    d["controllers"] = _call("adaptive_kl", target=old.get("kl_target", 0.1), horizon=old.get("kl_horizon", 1e4),
                             kl_reduction="token_mean")  # the old field was a target for a token mean
  elif ctl == "entropic":
    d["controllers"] = _call("entropic", target_entropy=old.get("target_entropy"), kp=old.get("entropic_kp", 1.0),
                             ki=old.get("entropic_ki", 0.01))
  elif ctl == "bapo":
    d["controllers"] = _call("bapo", rho0=old.get("bapo_rho0", 0.5))
  elif ctl == "temperature_control":
    d["controllers"] = _call("temperature_control", target_entropy=old.get("target_entropy"),
                             kappa=old.get("temperature_kappa", 0.1))
  return d
