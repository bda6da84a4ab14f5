"""Controllers in the RL loop: ``RLConfig.controller`` -> a ``LoopController``.

After every RL step (rollout + ``updates_per_batch`` epochs of updates) the
chosen ``rljax.control`` controller observes that step and moves the
hyper-parameters of the *next* step. The values live in ``state.hparams``
(float32 arrays: changing them never recompiles the train step) or, for the
sampling temperature, in the controller state read by the rollout. The
controller state (a ``NamedTuple`` of float32 arrays) is saved with every RL
checkpoint and restored by ``--resume``.

* ``adaptive_kl`` — observes KL(π_old ‖ π_ref), the masked mean of
  ``kl_estimate(logp_old, logp_ref, rl.kl_estimator)`` over the loss tokens, with
  ``n_steps`` = sequences; moves ``hparams["kl_beta"]`` (β of the ``kl_penalty``
  term; ``rl.kl_beta`` is β₀): β ← β·(1 + clip(KL/target − 1, ±0.2)·n/horizon)
  (verl ``AdaptiveKLController``; Ziegler et al., arXiv:1909.08593).
* ``entropic`` — observes H(π_old), the masked mean entropy of the rollout; moves
  ``hparams["pos_weight"]``/``["neg_weight"]`` (``advantage_sign_weighting`` of the
  policy term): e = H* − H, u = K_p·e + K_i·Σe, w± = clip(1 ∓ u, 0, 2)
  (EntroPIC, arXiv:2511.15248, seed 000 L107; the u → w mapping is ours).
* ``bapo`` — observes the ratio π_new/π_old on this batch after its updates, the
  advantages and the loss mask; moves ``hparams["clip_low"] = 1 − c_low`` and
  ``["clip_high"] = c_high − 1`` (first bounds on the relaxation grid whose
  positive share reaches ρ₀; BAPO, seed 000 L53 and the WooooDyy/BAPO README).
* ``temperature_control`` — observes H(π_old) as ``entropic``; moves the sampling
  temperature: T ← clip(T·exp(κ(H* − H)), 0.1, 2) (E3, seed 001 L203; the
  multiplicative rule is the spec's reading).

π_old is the policy that sampled the step (its log-probs recomputed before
the update, ``batch.logp_old``). Logged metrics (``control/...``) are the values
*used during* the step plus the observation that drives the next update.

Interpretation notes: verl updates its ``AdaptiveKLController`` once per step
with the batch's mean KL(π_old ‖ π_ref) and ``n_steps`` = batch size, and
uses the new β from the next step on — the same here (verl applies β to the
KL-in-reward; rljax to the ``kl_penalty`` loss term). The BAPO recipe
re-chooses the bounds inside the loss for each mini-batch; here they are chosen
once per step from the ratio reached at the end of the step (a one-step lag),
which keeps the jitted step unchanged.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding

from rljax.train._config import CONTROLLERS, RLConfig

__all__ = ["LoopController", "make_controller", "CONTROLLERS"]


def _f(x) -> float:
  return float(jax.device_get(x))


class LoopController:
  """One RL-loop controller built from an ``RLConfig`` (``controller="none"``: a no-op).

  Methods:
    init() -> state: the controller's initial state (``{}`` for ``"none"``).
    hparams(state) -> dict: the ``state.hparams`` entries it owns.
    temperature(state) -> float: the sampling temperature of the next rollout.
    step(train_state, state, *, batch, rollout_stats, update_metrics, policy_logp)
      -> (train_state with new hparams, new state, metrics dict).
  """

  def __init__(self, rl: RLConfig):
    from rljax import control  # pylint: disable=import-outside-toplevel
    self.rl = rl
    self.name = rl.controller
    if self.name == "none":
      self.ctl = None
    elif self.name == "adaptive_kl":
      self.ctl = control.adaptive_kl(init_beta=rl.kl_beta, target=rl.kl_target, horizon=rl.kl_horizon)
    elif self.name == "entropic":
      self.ctl = control.entropic(rl.target_entropy, kp=rl.entropic_kp, ki=rl.entropic_ki)
    elif self.name == "bapo":
      self.ctl = control.bapo(rl.bapo_rho0)
    elif self.name == "temperature_control":
      self.ctl = control.temperature_control(rl.target_entropy, init_temperature=rl.temperature,
                                             kappa=rl.temperature_kappa)
    else:  # RLConfig validates the name; this guards direct construction
      raise ValueError(f"RLConfig.controller must be one of {list(CONTROLLERS)}, got {self.name!r}")

    # observations are computed in jit: batch arrays may be global (multi-host) arrays
    self._adaptive_kl_update = jax.jit(self._adaptive_kl_impl)
    self._bapo_update = jax.jit(self._bapo_impl)

  def _adaptive_kl_impl(self, state, logp_old, logp_ref, loss_mask):
    from rljax.objectives import kl_estimate  # pylint: disable=import-outside-toplevel
    mask = loss_mask.astype(jnp.float32)
    kl = jnp.sum(kl_estimate(logp_old, logp_ref, self.rl.kl_estimator) * mask) / jnp.maximum(jnp.sum(mask), 1.0)
    n = jnp.sum(jnp.any(loss_mask, axis=1)).astype(jnp.float32)  # sequences with loss tokens (verl: batch size)
    return self.ctl.update(state, kl=kl, n_steps=n), kl

  def _bapo_impl(self, state, advantages, logp, logp_old, loss_mask):
    return self.ctl.update(state, advantages=advantages, logp=logp, logp_old=logp_old, mask=loss_mask)

  def init(self):
    """The initial controller state (a pytree of float32 scalars)."""
    return {} if self.ctl is None else self.ctl.init()

  def hparams(self, state) -> dict:
    """The train-state hparams this controller sets from ``state`` (floats or arrays)."""
    if self.name == "adaptive_kl":
      return {"kl_beta": state.beta}
    if self.name == "entropic":
      return {"pos_weight": state.pos_weight, "neg_weight": state.neg_weight}
    if self.name == "bapo":
      return {"clip_low": 1.0 - state.clip_low, "clip_high": state.clip_high - 1.0}
    return {}

  def temperature(self, state) -> float:
    """Sampling temperature for the next rollout (``rl.temperature`` unless controlled)."""
    if self.name == "temperature_control":
      return _f(state.temperature)
    return self.rl.temperature

  def apply(self, train_state, state):
    """``train_state`` with this controller's hparams written in (no recompile)."""
    # fresh host copies (the train state is donated to the next step, the controller state must survive
    # it), placed like the values they replace (replicated over the run's mesh, global on multi-host)
    hp = {}
    for k, v in self.hparams(state).items():
      host = np.asarray(jax.device_get(v), np.float32)
      old = train_state.hparams.get(k)
      if isinstance(old, jax.Array) and isinstance(old.sharding, NamedSharding):
        from rljax.parallel import place_global  # pylint: disable=import-outside-toplevel
        hp[k] = place_global(host, old.sharding)
      else:
        hp[k] = jnp.asarray(host)
    return train_state.with_hparams(**hp) if hp else train_state

  def _observed_entropy(self, rollout_stats: Mapping[str, float], update_metrics: Mapping[str, float]) -> float:
    if "entropy" in rollout_stats:
      return float(rollout_stats["entropy"])
    if "policy/entropy" in update_metrics:  # the sampler was built without entropies
      return float(update_metrics["policy/entropy"])
    raise ValueError(f"RLConfig.controller={self.name!r} needs the policy entropy, but neither the rollout "
                     "nor the update metrics report one")

  def step(self, train_state, state, *, batch, rollout_stats: Mapping[str, float],
           update_metrics: Mapping[str, float], policy_logp: Optional[Callable[[Any], Any]] = None):
    """Observes one finished RL step and sets the next step's values.

    Args:
      train_state: the ``TrainState`` after this step's updates.
      state: the controller state used during this step.
      batch: this step's ``TrainBatch`` (``logp_old``, ``logp_ref``,
        ``advantages``, ``loss_mask``).
      rollout_stats: the rollout statistics (``entropy``: masked mean entropy of π_old).
      update_metrics: the step's averaged update metrics.
      policy_logp: ``fn(train_state) -> logp [B, T]`` of the updated policy
        on ``batch.tokens`` (needed by ``bapo`` only).

    Returns:
      ``(train_state, new_state, metrics)``.
    """
    if self.ctl is None:
      return train_state, state, {}
    # host values: uncommitted, so the jitted updates place them next to the (possibly sharded) batch
    state = jax.tree_util.tree_map(lambda x: np.asarray(jax.device_get(x), np.float32), state)
    metrics = {}
    if self.name == "adaptive_kl":
      if batch.logp_ref is None or batch.logp_old is None:
        raise ValueError("RLConfig.controller='adaptive_kl' needs batch.logp_old and batch.logp_ref")
      new, kl = self._adaptive_kl_update(state, batch.logp_old, batch.logp_ref, batch.loss_mask)
      metrics = {"control/kl_beta": _f(state.beta), "control/kl_ref": _f(kl)}
    elif self.name == "entropic":
      h = self._observed_entropy(rollout_stats, update_metrics)
      metrics = {"control/pos_weight": _f(state.pos_weight), "control/neg_weight": _f(state.neg_weight),
                 "control/entropy": h}
      new = self.ctl.update(state, entropy=h)
      metrics["control/entropy_error"] = _f(new.error)
      metrics["control/integral"] = _f(new.integral)
    elif self.name == "bapo":
      if policy_logp is None:
        raise ValueError("RLConfig.controller='bapo' needs policy_logp (log-probs of the updated policy)")
      metrics = {"control/clip_low": 1.0 - _f(state.clip_low), "control/clip_high": _f(state.clip_high) - 1.0}
      new = self._bapo_update(state, batch.advantages, policy_logp(train_state), batch.logp_old, batch.loss_mask)
      metrics["control/balance"] = _f(new.balance)
    else:  # temperature_control
      h = self._observed_entropy(rollout_stats, update_metrics)
      metrics = {"control/temperature": _f(state.temperature), "control/entropy": h}
      new = self.ctl.update(state, entropy=h)
    # a process-local float32 copy (observations are global, so every process holds the same state)
    new = jax.tree_util.tree_map(lambda x: jnp.asarray(np.asarray(jax.device_get(x), np.float32)), new)
    return self.apply(train_state, new), new, metrics


def make_controller(rl: RLConfig) -> LoopController:
  """The loop controller selected by ``rl.controller`` (see the module docstring)."""
  return LoopController(rl)
