"""How the RL loop runs each controller: its ``rljax.stages.Controller`` stage factory (the row's ``stage``).

After every RL step (rollout + updates) a controller observes the step and sets the *next* step's values:
hparams in ``state.hparams`` (float32 arrays read by the loss: changing them never recompiles) or the
sampling temperature. Its state (a ``NamedTuple`` of float32 arrays) is saved with every RL checkpoint.

* ``adaptive_kl`` — observes KL(π_old ‖ π_ref), the masked mean of ``kl_estimate(logp_old, logp_ref,
  estimator)`` over the loss tokens, with ``n_steps`` = sequences with loss tokens; moves ``kl_beta`` (β of
  ``kl_penalty``; β₀ = the term's ``beta`` unless ``init_beta`` is given): β ← β·(1 + clip(KL/target − 1,
  ±0.2)·n/horizon) (verl ``AdaptiveKLController``; Ziegler et al., arXiv:1909.08593). verl updates it once
  per step with the batch's mean KL(π_old ‖ π_ref), ``n_steps`` = batch size, and applies β to the KL in
  the reward; here it moves the ``kl_penalty`` loss term.
* ``entropic`` — observes H(π_old), the masked mean entropy of the rollout; moves ``pos_weight`` /
  ``neg_weight``, with which it wraps the policy loss (``advantage_sign_weighting``): e = H* − H,
  u = K_p·e + K_i·Σe, w± = clip(1 ∓ u, 0, 2) (EntroPIC, arXiv:2511.15248, seed 000 L107; the u → w mapping
  is ours).
* ``bapo`` — observes the ratio π_new/π_old on the step's batch after its updates, the advantages and the
  loss mask; moves ``clip_low = 1 − c_low`` and ``clip_high = c_high − 1`` (first bounds on the relaxation
  grid whose positive share reaches ρ₀; BAPO, seed 000 L53). The BAPO recipe re-chooses the bounds inside
  the loss for each mini-batch; here once per step from the ratio reached at its end (a one-step lag), which
  keeps the jitted step unchanged.
* ``temperature_control`` — observes H(π_old) as ``entropic``; moves the sampling temperature:
  T ← clip(T·exp(κ(H* − H)), t_min, t_max) (E3, seed 001 L203; the multiplicative rule is the spec's reading).

Logged metrics (``<name>/...``) are the values *used during* the step plus the observation that drives the
next update.
"""
from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np

from rljax.control import _controllers as C
from rljax.stages import Controller

_ENTROPY = "the masked mean entropy of the rollout (rollout/entropy, else policy/entropy of the update)"


def _f(x) -> float:
  return float(jax.device_get(x))


def _observed_entropy(name: str, inputs) -> float:
  if "entropy" in inputs.rollout_stats:
    return float(inputs.rollout_stats["entropy"])
  if "policy/entropy" in inputs.update_metrics:
    return float(inputs.update_metrics["policy/entropy"])
  raise ValueError(f"controller {name!r} needs {_ENTROPY}, but neither is reported")


def _host(state):
  """Process-local float32 copies (observations are global, so every process holds the same state)."""
  return jax.tree_util.tree_map(lambda x: np.asarray(jax.device_get(x), np.float32), state)


def adaptive_kl(init_beta=None, target: float = 6.0, horizon: float = 10000.0, *, clip: float = 0.2,
                estimator: str = "k3"):
  """Stage of ``rljax.control.adaptive_kl``; ``init_beta=None`` starts from the loss's ``kl_beta``."""
  from rljax.objectives import kl_estimate  # pylint: disable=import-outside-toplevel
  C.adaptive_kl(init_beta=1e-3 if init_beta is None else init_beta, target=target, horizon=horizon, clip=clip)

  @jax.jit
  def observe(logp_old, logp_ref, loss_mask):
    mask = loss_mask.astype(jnp.float32)
    kl = jnp.where(loss_mask, kl_estimate(logp_old, logp_ref, estimator), 0.0)  # padding may hold -inf log-probs
    kl = jnp.sum(kl * mask) / jnp.maximum(jnp.sum(mask), 1.0)
    n = jnp.sum(jnp.any(loss_mask, axis=1)).astype(jnp.float32)  # sequences with loss tokens (verl: batch size)
    return kl, n

  def build(beta0):
    ctl = C.adaptive_kl(init_beta=beta0, target=target, horizon=horizon, clip=clip)

    def update(state, inputs):
      state = _host(state)
      kl, n = observe(inputs.batch.logp_old, inputs.batch.logp_ref, inputs.batch.loss_mask)
      new = ctl.update(state, kl=kl, n_steps=n)
      return _host(new), {"kl_beta": _f(state.beta), "kl_ref": _f(kl)}

    return Controller(ctl.init, update, hparams=lambda s: {"kl_beta": s.beta}, writes=("kl_beta",),
                      name="adaptive_kl", needs={"logp_old", "logp_ref"}, bind_fn=bind)

  def bind(stage, facts):
    if init_beta is not None:
      return stage
    if "kl_beta" not in facts.hparams:
      raise ValueError("adaptive_kl moves kl_beta, which no loss term reads: add kl_penalty(beta=...) to rl.loss")
    return build(float(facts.hparams["kl_beta"]))

  return build(1e-3 if init_beta is None else float(init_beta))


def entropic(target_entropy: float, *, kp: float = 1.0, ki: float = 0.01, w_min: float = 0.0, w_max: float = 2.0,
             integral_limit: float = 1e6, mode: str = "symmetric"):
  """Stage of ``rljax.control.entropic``: wraps the policy loss in ``advantage_sign_weighting``."""
  from rljax.objectives import advantage_sign_weighting  # pylint: disable=import-outside-toplevel
  ctl = C.entropic(target_entropy, kp=kp, ki=ki, w_min=w_min, w_max=w_max, integral_limit=integral_limit, mode=mode)

  def update(state, inputs):
    state = _host(state)
    h = _observed_entropy("entropic", inputs)
    new = ctl.update(state, entropy=h)
    return _host(new), {"pos_weight": _f(state.pos_weight), "neg_weight": _f(state.neg_weight), "entropy": h,
                        "entropy_error": _f(new.error), "integral": _f(new.integral)}

  return Controller(ctl.init, update, hparams=lambda s: {"pos_weight": s.pos_weight, "neg_weight": s.neg_weight},
                    writes=("pos_weight", "neg_weight"), name="entropic",
                    wrap_policy=lambda term, hp: advantage_sign_weighting(term, hp["pos_weight"], hp["neg_weight"]))


def bapo(rho0: float = 0.5, *, low_range=(0.6, 0.9), high_range=(1.2, 3.0), low_step: float = 0.05,
         high_step: float = 0.05, mode: str = "share", eps: float = 1e-8):
  """Stage of ``rljax.control.bapo``: moves the policy loss's ``clip_low``/``clip_high``."""
  ctl = C.bapo(rho0, low_range=tuple(low_range), high_range=tuple(high_range), low_step=low_step,
               high_step=high_step, mode=mode, eps=eps)
  observe = jax.jit(lambda state, adv, logp, logp_old, mask: ctl.update(state, advantages=adv, logp=logp,
                                                                         logp_old=logp_old, mask=mask))

  def update(state, inputs):
    state = _host(state)
    b = inputs.batch
    new = observe(state, b.advantages, inputs.policy_logp(), b.logp_old, b.loss_mask)
    return _host(new), {"clip_low": 1.0 - _f(state.clip_low), "clip_high": _f(state.clip_high) - 1.0,
                        "balance": _f(new.balance)}

  return Controller(ctl.init, update,
                    hparams=lambda s: {"clip_low": 1.0 - s.clip_low, "clip_high": s.clip_high - 1.0},
                    writes=("clip_low", "clip_high"), name="bapo", needs={"logp_old"})


def temperature_control(target_entropy: float, *, init_temperature=None, kappa: float = 0.1, t_min: float = 0.1,
                        t_max: float = 2.0, rule: str = "exp", vocab_size=None):
  """Stage of ``rljax.control.temperature_control``; ``init_temperature=None`` starts from ``rl.temperature``."""

  def build(t0):
    ctl = C.temperature_control(target_entropy, init_temperature=t0, kappa=kappa, t_min=t_min, t_max=t_max,
                                rule=rule, vocab_size=vocab_size)

    def update(state, inputs):
      state = _host(state)
      h = _observed_entropy("temperature_control", inputs)
      return _host(ctl.update(state, entropy=h)), {"temperature": _f(state.temperature), "entropy": h}

    return Controller(ctl.init, update, writes=("temperature",), temperature=lambda s: _f(s.temperature),
                      name="temperature_control", bind_fn=bind)

  def bind(stage, facts):
    if init_temperature is not None:
      return stage
    if not t_min <= facts.temperature <= t_max:
      raise ValueError(f"temperature_control: rl.temperature={facts.temperature} is outside its bounds "
                       f"[t_min, t_max] = [{t_min}, {t_max}]")
    return build(float(facts.temperature))

  return build(1.0 if init_temperature is None else float(init_temperature))

