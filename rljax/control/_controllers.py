"""Controllers: ``init() -> state``, ``update(state, **observations) -> state``.

A controller is a frozen dataclass holding its (static, Python) settings; its
*state* is a ``NamedTuple`` of float32 arrays (a pytree), so it can live in
the train state, be passed through ``jax.jit`` and change every step without
recompiling. ``update`` is pure and jittable. Loss factories take the
controlled value as a (possibly traced) array, e.g. inside the jitted step::

    ctl = adaptive_kl(init_beta=1e-3, target=6.0, horizon=10_000)
    state = ctl.init()
    ...  # in the jitted step:
    term = rljax.objectives.kl_penalty(beta=state.beta)
    state = ctl.update(state, kl=observed_kl, n_steps=batch_size)

How the RL loop runs each controller: its ``rljax.stages.Controller`` stage factory (``_<name>_stage``, the
catalog row's ``stage``, at the end of this module). After every RL step (rollout + updates) a controller observes
the step and sets the *next* step's values: hparams in ``state.hparams`` (float32 arrays read by the loss: changing
them never recompiles) or the sampling temperature. Its state (a ``NamedTuple`` of float32 arrays) is saved with
every RL checkpoint.

* ``adaptive_kl`` — observes KL(π_old ‖ π_ref) from ``kl_estimate(logp_old, logp_ref, estimator)`` on the loss
  tokens, by default the mean over sequences of each sequence's sum (``kl_reduction``, ``observed_kl``: Ziegler
  et al.'s quantity, for which their target 6.0 is set), with ``n_steps`` = sequences with loss tokens; moves ``kl_beta`` (β of
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
  grid whose positive share reaches ρ₀; BAPO, seed 000 L53). The authors' recipe chooses the bounds inside
  the loss on every micro-batch from the current ratio: ``placement="loss"``. The default ``placement="step"``
  chooses them once per step from the ratio reached at its end and applies them to the next step (a one-step
  lag); a batch with no signal keeps the previous bounds.
* ``temperature_control`` — observes H(π_old) as ``entropic``; moves the sampling temperature:
  T ← clip(T·exp(κ(H* − H)), t_min, t_max) (E3, seed 001 L203; the multiplicative rule is the spec's reading).

Logged metrics (``<name>/...``) are the values *used during* the step plus the observation that drives the
next update.

Size: one family (the four controllers); their catalog rows with fidelity records are the last ~180 lines.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from rljax.types import check_mask, is_concrete

Array = jax.Array

__all__ = ["adaptive_kl", "AdaptiveKL", "AdaptiveKLState", "entropic", "EntroPIC", "EntroPICState", "bapo", "BAPO",
           "BAPOState", "bapo_positive_share", "bapo_pos_neg_ratio", "temperature_control", "TemperatureControl", "TemperatureState"]


def _f32(x) -> Array:
  return jnp.asarray(x, jnp.float32)


def _finite(name: str, value) -> float:
  try:
    v = float(value)
  except (TypeError, ValueError) as e:
    raise ValueError(f"{name} must be a number, got {value!r}") from e
  if not np.isfinite(v):
    raise ValueError(f"{name} must be finite, got {value!r}")
  return v


def _positive(name: str, value) -> None:
  if _finite(name, value) <= 0:
    raise ValueError(f"{name} must be > 0, got {value!r}")


def _nonneg(name: str, value) -> None:
  if _finite(name, value) < 0:
    raise ValueError(f"{name} must be >= 0, got {value!r}")


def _check_obs(name: str, value) -> None:
  """Observation values: finite when concrete (traced ones are accepted unchecked)."""
  if value is None:
    raise ValueError(f"{name} is required")
  if is_concrete(value) and not np.all(np.isfinite(np.asarray(value, np.float64))):
    raise ValueError(f"{name} must be finite, got {value!r}")


# --------------------------------------------------------------------------------------
# adaptive KL
# --------------------------------------------------------------------------------------


class AdaptiveKLState(NamedTuple):
  beta: Array


@dataclasses.dataclass(frozen=True)
class AdaptiveKL:
  """Adaptive KL coefficient (Ziegler et al. 2019, arXiv:1909.08593; verl ``AdaptiveKLController``).

      e = clip(KL / target − 1, −clip, clip)
      β ← β · (1 + e · n_steps / horizon)

  verl: ``kl_ctrl.kl_coef`` (init β), ``target_kl``, ``horizon``; the error
  clip 0.2 is hard-coded there; verl calls ``update(current_kl, n_steps=batch
  size)`` once per step with the batch's mean token KL.
  """
  init_beta: float = 1e-3
  target: float = 6.0
  horizon: float = 10000.0
  clip: float = 0.2

  def __post_init__(self):
    _nonneg("init_beta", self.init_beta)
    _positive("target", self.target)
    _positive("horizon", self.horizon)
    _nonneg("clip", self.clip)

  def init(self) -> AdaptiveKLState:
    """β = ``init_beta``."""
    return AdaptiveKLState(beta=_f32(self.init_beta))

  def update(self, state: AdaptiveKLState, *, kl, n_steps=1) -> AdaptiveKLState:
    """One verl update with the observed mean KL and the number of samples it covers."""
    _check_obs("kl", kl)
    _check_obs("n_steps", n_steps)
    err = jnp.clip(_f32(kl) / self.target - 1.0, -self.clip, self.clip)
    return AdaptiveKLState(beta=state.beta * (1.0 + err * _f32(n_steps) / self.horizon))


def adaptive_kl(init_beta: float = 1e-3, target: float = 6.0, horizon: float = 10000.0, *,
                clip: float = 0.2) -> AdaptiveKL:
  """Adaptive KL controller: β ← β·(1 + clip(KL/target − 1, ±clip)·n_steps/horizon).

  verl ``AdaptiveKLController`` / Ziegler et al. arXiv:1909.08593. Returns an
  ``AdaptiveKL`` (``init() -> AdaptiveKLState``, ``update(state, kl=, n_steps=)``);
  ``state.beta`` [] float32 is β, to pass as ``kl_penalty(beta=state.beta)`` or
  ``kl_in_reward(..., beta=state.beta)``.
  """
  return AdaptiveKL(init_beta=init_beta, target=target, horizon=horizon, clip=clip)


# --------------------------------------------------------------------------------------
# EntroPIC
# --------------------------------------------------------------------------------------


class EntroPICState(NamedTuple):
  integral: Array     # Σ_{s≤t} e_s (clamped to ±integral_limit)
  error: Array        # last e_t
  control: Array      # u_t
  pos_weight: Array   # loss coefficient of positive-advantage samples
  neg_weight: Array   # loss coefficient of negative-advantage samples


_ENTROPIC_MODES = ("symmetric", "positive", "negative")


@dataclasses.dataclass(frozen=True)
class EntroPIC:
  """EntroPIC — PI control of the positive / negative sample loss weights (arXiv:2511.15248; seed 000 L107).

      e_t = H_target − H_t,   I_t = clip(I_{t−1} + e_t, ±integral_limit)
      u_t = K_p · e_t + K_i · I_t
      mode "symmetric": w⁺ = clip(1 − u_t, w_min, w_max), w⁻ = clip(1 + u_t, w_min, w_max)
      mode "positive":  w⁺ = clip(1 − u_t, ...), w⁻ = 1
      mode "negative":  w⁺ = 1,                  w⁻ = clip(1 + u_t, ...)

  Entropy below target (u > 0) shifts weight from positive-advantage samples
  (which sharpen the policy, lowering entropy) to negative ones (which raise
  it). K_p = K_i = 0 gives w⁺ = w⁻ = 1. Apply the weights with
  ``rljax.objectives.advantage_sign_weighting(term, state.pos_weight,
  state.neg_weight)``.

  Checked against the authors' code (github.com/yk7333/EntroPIC,
  ``core_algos.py::compute_policy_loss_entropic`` and ``dp_actor.py``):
  α = clip(K_p (H − H*) + K_i Σ_prev (H − H*), −1, 1) (= −u, the integral
  there holding the *previous* errors, scaled by micro/mini batch size), and
  the loss gains α · token-mean over tokens with p_t > 0.95 of (−r_t |A_t|):
  on those tokens positive samples weigh 1 + α = w⁺ and negative ones
  1 − α = w⁻ — our weights. Differences: we weight every token (the code only
  p > 0.95 ones, through a separately normalised unclipped term), our
  integral includes the current error, and ``mode`` is ours. Defaults
  K_p = 1, K_i = 0.01 are ``run_entropic.sh``'s (there H* = 0.1).
  """
  target_entropy: float
  kp: float = 1.0
  ki: float = 0.01
  w_min: float = 0.0
  w_max: float = 2.0
  integral_limit: float = 1e6
  mode: str = "symmetric"

  def __post_init__(self):
    _nonneg("target_entropy", self.target_entropy)
    _nonneg("kp", self.kp)
    _nonneg("ki", self.ki)
    _nonneg("w_min", self.w_min)
    if _finite("w_max", self.w_max) < self.w_min or self.w_max < 1.0 or self.w_min > 1.0:
      raise ValueError(f"need w_min <= 1 <= w_max, got w_min={self.w_min}, w_max={self.w_max}")
    _positive("integral_limit", self.integral_limit)
    if self.mode not in _ENTROPIC_MODES:
      raise ValueError(f"mode must be one of {list(_ENTROPIC_MODES)}, got {self.mode!r}")

  def init(self) -> EntroPICState:
    """Zero integral, unit weights."""
    z, one = _f32(0.0), _f32(1.0)
    return EntroPICState(integral=z, error=z, control=z, pos_weight=one, neg_weight=one)

  def update(self, state: EntroPICState, *, entropy) -> EntroPICState:
    """One PI step from the observed (masked mean) policy entropy."""
    _check_obs("entropy", entropy)
    err = self.target_entropy - _f32(entropy)
    integral = jnp.clip(state.integral + err, -self.integral_limit, self.integral_limit)
    u = self.kp * err + self.ki * integral
    pos = jnp.clip(1.0 - u, self.w_min, self.w_max)
    neg = jnp.clip(1.0 + u, self.w_min, self.w_max)
    if self.mode == "positive":
      neg = jnp.ones_like(neg)
    elif self.mode == "negative":
      pos = jnp.ones_like(pos)
    return EntroPICState(integral=integral, error=err, control=u, pos_weight=pos, neg_weight=neg)


def entropic(target_entropy: float, *, kp: float = 1.0, ki: float = 0.01, w_min: float = 0.0, w_max: float = 2.0,
             integral_limit: float = 1e6, mode: str = "symmetric") -> EntroPIC:
  """EntroPIC PI controller (seed 000 L107): e = H* − H, u = K_p·e + K_i·Σe, w± = clip(1 ∓ u).

  Returns an ``EntroPIC`` (``update(state, entropy=)``); ``state.pos_weight`` and
  ``state.neg_weight`` [] float32 feed ``advantage_sign_weighting``. The u → w
  mapping is our interpretation (see ``EntroPIC``).
  """
  return EntroPIC(target_entropy=target_entropy, kp=kp, ki=ki, w_min=w_min, w_max=w_max,
                  integral_limit=integral_limit, mode=mode)


# --------------------------------------------------------------------------------------
# BAPO
# --------------------------------------------------------------------------------------


class BAPOState(NamedTuple):
  clip_low: Array   # c_low: lower bound on the ratio r (PPO: 1 − ε_low)
  clip_high: Array  # c_high: upper bound on r (PPO: 1 + ε_high)
  balance: Array    # the criterion at the chosen bounds (positive share, or pos/neg in mode "code")


def _bapo_inputs(advantages, ratio, mask, clip_low, clip_high) -> tuple:
  """The criterion's inputs in the float dtype of ``advantages`` and ``ratio`` (float64 stays float64; at least
  float32), bounds with two trailing axes for the grid."""
  dtype = jnp.promote_types(jnp.result_type(advantages, ratio), jnp.float32)
  lo, hi = jnp.asarray(clip_low, dtype)[..., None, None], jnp.asarray(clip_high, dtype)[..., None, None]
  return jnp.asarray(advantages, dtype), jnp.asarray(ratio, dtype), jnp.asarray(mask, dtype), lo, hi


def bapo_positive_share(advantages, ratio, mask, clip_low, clip_high) -> Array:
  """Share of the PPO-clip loss magnitude carried by positive-advantage tokens (mode ``"share"``).

      active_t = (A_t > 0 ∧ r_t ≤ c_high) ∨ (A_t < 0 ∧ r_t ≥ c_low)   (tokens with gradient)
      share = Σ_{A>0, active} |A_t| r_t / Σ_{active} |A_t| r_t        (0 when nothing is active)

  ``clip_low``/``clip_high`` may carry leading grid dimensions (broadcast
  against ``[B, T]`` via trailing axes of size 1).
  """
  a, r, m, lo, hi = _bapo_inputs(advantages, ratio, mask, clip_low, clip_high)
  pos = (a > 0) & (r <= hi)
  neg = (a < 0) & (r >= lo)
  mag = jnp.abs(a) * r * m
  p = jnp.sum(jnp.where(pos, mag, 0.0), axis=(-2, -1))
  n = jnp.sum(jnp.where(neg, mag, 0.0), axis=(-2, -1))
  return jnp.where(p + n > 0, p / jnp.where(p + n > 0, p + n, 1.0), 0.0)


def bapo_pos_neg_ratio(advantages, ratio, mask, clip_low, clip_high, eps: float = 1e-8) -> Array:
  """Positive / negative contribution ratio of the released BAPO recipe (mode ``"code"``).

      r̃_t = min(r_t, c_high) if A_t ≥ 0 else max(r_t, c_low)
      pos = Σ_t max(r̃_t A_t m_t, 0),  neg = Σ_t max(−r̃_t A_t m_t, 0)
      ratio = pos / (neg + eps)   (+inf when neg = 0)

  (``WooooDyy/BAPO`` ``recipe/bapo/policy_loss.py::_compute_effective_advantage``.)
  Bounds may carry leading grid dimensions.
  """
  a, r, m, lo, hi = _bapo_inputs(advantages, ratio, mask, clip_low, clip_high)
  eff = jnp.where(a >= 0, jnp.minimum(r, hi), jnp.maximum(r, lo)) * a * m
  p = jnp.sum(jnp.maximum(eff, 0.0), axis=(-2, -1))
  n = jnp.sum(jnp.maximum(-eff, 0.0), axis=(-2, -1))
  return jnp.where(n > 0, p / (n + eps), jnp.inf)


_BAPO_MODES = ("share", "code")


@dataclasses.dataclass(frozen=True)
class BAPO:
  """BAPO adaptive clip bounds (seed 000 L53; README and verl recipe of ``WooooDyy/BAPO``).

  Each step, the bounds are relaxed from (low_min, high_min) over a fixed
  grid of candidates, and the first candidate meeting the criterion is kept
  (else the last, most relaxed one). The whole grid is evaluated at once (no
  data-dependent loop, jit-friendly). Two readings (``mode``):

  * ``"share"`` (default; OUR READING of the README/paper's "target contribution ρ₀ of positive
    signals to the policy gradient loss", not the released code): criterion
    ``bapo_positive_share ≥ rho0`` over tokens whose gradient is not clipped;
    both bounds move together — candidate k is
    (min(low_min + k·low_step, low_max), min(high_min + k·high_step, high_max)).
    The share definition and the lock-step order are our reading.
  * ``"code"`` (the released verl recipe, ``compute_policy_loss_bapo``):
    criterion ``bapo_pos_neg_ratio ≥ rho0`` (a pos/neg *ratio*, contributions
    weighted by the clipped ratio, clipped tokens included); c_low is raised
    first, step by step to low_max, then c_high.

  Ranges [0.6, 0.9] / [1.2, 3.0] and ρ₀ = 0.5 are the README's (spec);
  steps 0.05 are the recipe yaml's. The released recipe
  (``recipe/bapo/config/bapo_trainer.yaml``) uses ``mode="code"`` with
  target 1 and ranges (0.6, 0.8) / (1.2, 2.0):
  ``bapo(1.0, mode="code", low_range=(0.6, 0.8), high_range=(1.2, 2.0))``.
  The default stays the README/paper rule (the paper's stated method; a
  pos/neg ratio of 1 is a positive share of 0.5). The code's PPO loss keeps
  verl's dual clip (``clip_ratio_c`` 3). Use the bounds as
  ``ppo_clip(eps_low=1 − state.clip_low, eps_high=state.clip_high − 1)``.
  """
  rho0: float = 0.5
  low_min: float = 0.6
  low_max: float = 0.9
  high_min: float = 1.2
  high_max: float = 3.0
  low_step: float = 0.05
  high_step: float = 0.05
  mode: str = "share"
  eps: float = 1e-8

  def __post_init__(self):
    r = _finite("rho0", self.rho0)
    if self.mode not in _BAPO_MODES:
      raise ValueError(f"mode must be one of {list(_BAPO_MODES)}, got {self.mode!r}")
    if r < 0 or (self.mode == "share" and r > 1.0):
      raise ValueError(f"rho0 must be in [0, 1] (mode 'share') or >= 0 (mode 'code'), got {self.rho0}")
    _positive("low_min", self.low_min)
    if not self.low_min <= _finite("low_max", self.low_max) <= 1.0:
      raise ValueError(f"need 0 < low_min <= low_max <= 1, got {self.low_min}, {self.low_max}")
    if not 1.0 <= _finite("high_min", self.high_min) <= _finite("high_max", self.high_max):
      raise ValueError(f"need 1 <= high_min <= high_max, got {self.high_min}, {self.high_max}")
    _positive("low_step", self.low_step)
    _positive("high_step", self.high_step)
    _nonneg("eps", self.eps)

  def grid(self, dtype=jnp.float32) -> tuple:
    """The candidate (c_low [K], c_high [K]) arrays, in search order (in ``dtype``)."""
    n_low = int(np.ceil((self.low_max - self.low_min) / self.low_step - 1e-9))
    n_high = int(np.ceil((self.high_max - self.high_min) / self.high_step - 1e-9))
    if self.mode == "share":
      steps = np.arange(max(n_low, n_high) + 1, dtype=np.float64)
      low = np.minimum(self.low_min + steps * self.low_step, self.low_max)
      high = np.minimum(self.high_min + steps * self.high_step, self.high_max)
    else:
      low_seq = np.minimum(self.low_min + np.arange(n_low + 1) * self.low_step, self.low_max)
      high_seq = np.minimum(self.high_min + np.arange(1, n_high + 1) * self.high_step, self.high_max)
      low = np.concatenate([low_seq, np.full(n_high, self.low_max)])
      high = np.concatenate([np.full(n_low + 1, self.high_min), high_seq])
    return jnp.asarray(low, dtype), jnp.asarray(high, dtype)

  def init(self) -> BAPOState:
    """The starting bounds (``low_min``, ``high_min``)."""
    return BAPOState(clip_low=_f32(self.low_min), clip_high=_f32(self.high_min), balance=_f32(0.0))

  def choose(self, advantages, ratio, mask) -> tuple:
    """``(c_low, c_high, criterion at them, signal)`` for one batch of ``[B, T]`` arrays: the first grid
    candidate whose criterion reaches ``rho0`` (else the last, loosest one). ``signal`` is False when no masked
    token carries a non-zero advantage (all-zero advantages, all padding, B = 0): the criterion is then
    meaningless, and ``update`` keeps the previous bounds. Computed in the inputs' float dtype."""
    low, high = self.grid(jnp.promote_types(jnp.result_type(advantages, ratio), jnp.float32))
    if self.mode == "share":
      values = bapo_positive_share(advantages, ratio, mask, low, high)
    else:
      values = bapo_pos_neg_ratio(advantages, ratio, mask, low, high, self.eps)
    ok = values >= self.rho0
    idx = jnp.where(jnp.any(ok), jnp.argmax(ok), low.shape[0] - 1)
    signal = jnp.any((jnp.asarray(advantages) != 0) & (jnp.asarray(mask) > 0))
    return low[idx], high[idx], values[idx], signal

  def update(self, state: BAPOState, *, advantages, logp, logp_old, mask) -> BAPOState:
    """Chooses the next step's bounds from the batch (``[B, T]`` arrays; ratio = exp(logp − logp_old), log
    clamped ±20). BAPO re-searches from the starting bounds every step; a batch with no signal (``choose``) keeps
    ``state`` (without this rule, mode ``"share"`` would move to the loosest bounds on such a batch)."""
    shape = tuple(np.shape(advantages))
    if len(shape) != 2:
      raise ValueError(f"bapo: advantages must be [B, T], got {shape}")
    for name, x in (("logp", logp), ("logp_old", logp_old)):
      if tuple(np.shape(x)) != shape:
        raise ValueError(f"bapo: {name} must have shape {shape}, got {tuple(np.shape(x))}")
    check_mask("mask", mask, shape)
    log_ratio = jnp.asarray(logp) - jnp.asarray(logp_old)
    ratio = jnp.exp(jnp.clip(jnp.where(jnp.asarray(mask) > 0, log_ratio, 0.0), -20.0, 20.0))
    low, high, value, signal = self.choose(advantages, ratio, mask)
    keep = lambda new, old: jnp.where(signal, new, old).astype(jnp.result_type(old))
    return BAPOState(clip_low=keep(low, state.clip_low), clip_high=keep(high, state.clip_high),
                     balance=keep(value, state.balance))


def bapo(rho0: float = 0.5, *, low_range=(0.6, 0.9), high_range=(1.2, 3.0), low_step: float = 0.05,
         high_step: float = 0.05, mode: str = "share", eps: float = 1e-8) -> BAPO:
  """BAPO adaptive clip bounds (seed 000 L53; README and verl recipe of WooooDyy/BAPO).

  Relaxes (c_low, c_high) from (low_range[0], high_range[0]) over a grid
  until the criterion reaches ``rho0``: the positive share of the active
  PPO-clip loss mass (``mode="share"``, README reading, bounds move together)
  or the released recipe's pos/neg contribution ratio (``mode="code"``, c_low
  first, then c_high). Returns a ``BAPO`` (``update(state, advantages=,
  logp=, logp_old=, mask=)``); ``state.clip_low``, ``state.clip_high`` []
  float32.
  """
  return BAPO(rho0=rho0, low_min=low_range[0], low_max=low_range[1], high_min=high_range[0],
              high_max=high_range[1], low_step=low_step, high_step=high_step, mode=mode, eps=eps)


# --------------------------------------------------------------------------------------
# temperature control (E3)
# --------------------------------------------------------------------------------------


class TemperatureState(NamedTuple):
  temperature: Array


_TEMPERATURE_RULES = ("exp", "e3")


@dataclasses.dataclass(frozen=True)
class TemperatureControl:
  """Entropy-targeting sampling temperature (E3, seed 001 L203).

      rule "exp" (default):  T ← clip(T · exp(κ · (H_target − H)), T_min, T_max)
      rule "e3" (authors'):  T ← clip(T · (1 + T · log(H_target / H) / F), T_min, T_max),
                             F = log V + log log V  (V = ``vocab_size``)

  The abstract says only "adaptive dynamic temperature adjustment ... to
  maintain the entropy at a stable level"; ``"exp"`` is the spec's reading.
  ``"e3"`` is the authors' ``TemperatureScheduler.step``
  (github.com/LiaoMengqi/E3-RL4LLMs, ``e3/worker/temperature_scheduler.py``).
  It needs the vocabulary size, which a bare ``temperature_control(H*)``
  does not have, so ``"exp"`` stays the default. Differences from that code:
  the target is given here (the code may take the mean entropy of its first
  step, and skips updating on that step), T is clipped to [T_min, T_max]
  (the code does not clip), and its optional cosine annealing of the target
  is not reproduced. Feed ``state.temperature`` to the sampler as a traced
  array.
  """
  target_entropy: float
  init_temperature: float = 1.0
  kappa: float = 0.1
  t_min: float = 0.1
  t_max: float = 2.0
  rule: str = "exp"
  vocab_size: Optional[int] = None

  def __post_init__(self):
    _nonneg("target_entropy", self.target_entropy)
    _positive("init_temperature", self.init_temperature)
    _nonneg("kappa", self.kappa)
    _positive("t_min", self.t_min)
    if not self.t_min <= self.init_temperature <= _finite("t_max", self.t_max):
      raise ValueError(f"need t_min <= init_temperature <= t_max, got {self.t_min}, {self.init_temperature}, "
                       f"{self.t_max}")
    if self.rule not in _TEMPERATURE_RULES:
      raise ValueError(f"rule must be one of {list(_TEMPERATURE_RULES)}, got {self.rule!r}")
    if self.rule == "e3":
      _positive("target_entropy", self.target_entropy)
      if not isinstance(self.vocab_size, (int, np.integer)) or isinstance(self.vocab_size, bool) \
          or self.vocab_size < 3:
        raise ValueError(f"vocab_size must be an int >= 3 with rule='e3', got {self.vocab_size!r}")

  def init(self) -> TemperatureState:
    """T = ``init_temperature``."""
    return TemperatureState(temperature=_f32(self.init_temperature))

  def update(self, state: TemperatureState, *, entropy) -> TemperatureState:
    """One multiplicative step from the observed policy entropy."""
    _check_obs("entropy", entropy)
    t = state.temperature
    if self.rule == "e3":
      v = float(self.vocab_size)
      factor = np.log(v) + np.log(np.log(v))
      log_alpha = jnp.log(self.target_entropy) - jnp.log(jnp.maximum(_f32(entropy), 1e-12))
      t = t * (1.0 + t * log_alpha / factor)
    else:
      t = t * jnp.exp(self.kappa * (self.target_entropy - _f32(entropy)))
    return TemperatureState(temperature=jnp.clip(t, self.t_min, self.t_max))


def temperature_control(target_entropy: float, *, init_temperature: float = 1.0, kappa: float = 0.1,
                        t_min: float = 0.1, t_max: float = 2.0, rule: str = "exp",
                        vocab_size: Optional[int] = None) -> TemperatureControl:
  """E3 entropy-targeting temperature (seed 001 L203): T ← clip(T·exp(κ(H* − H)), T_min, T_max).

  ``rule="e3"`` (with ``vocab_size``) is the authors' update
  T ← T·(1 + T·log(H*/H)/(log V + log log V)); see ``TemperatureControl``.
  Returns a ``TemperatureControl`` (``update(state, entropy=)``);
  ``state.temperature`` [] float32 goes to the sampler as a traced array.
  """
  return TemperatureControl(target_entropy=target_entropy, init_temperature=init_temperature, kappa=kappa,
                            t_min=t_min, t_max=t_max, rule=rule, vocab_size=vocab_size)


# ----------------------------------------------------------------------------- the stages (rows' ``stage``)

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


KL_REDUCTIONS = ("sequence_sum", "sequence_mean", "token_mean")


def observed_kl(kl_tokens, loss_mask, kl_reduction: str):
  """The step's KL as ``adaptive_kl`` observes it, from per-token estimates ``kl_tokens`` [B, T] and ``loss_mask``
  [B, T] bool (rows with no loss token are left out of every form):

  * ``"sequence_sum"`` — mean over rows of Σ_t KL_t (Ziegler et al.: lm-human-preferences ``train_policy.py:221``,
    the quantity their ``target`` 6.0 is set for);
  * ``"sequence_mean"`` — mean over rows of the row's token mean (verl ``apply_kl_penalty``'s ``current_kl``);
  * ``"token_mean"`` — Σ KL_t / Σ mask over the step (rljax before 2026-12-07; longer rows weigh more).

  Returns (KL [], rows with a loss token [] float32: ``n_steps``).
  """
  mask = loss_mask.astype(jnp.float32)
  kl = jnp.where(loss_mask, kl_tokens, 0.0)  # padding may hold -inf log-probs
  per_row = jnp.sum(kl * mask, axis=1)
  tokens = jnp.sum(mask, axis=1)
  rows = (tokens > 0).astype(jnp.float32)
  n = jnp.sum(rows)
  if kl_reduction == "sequence_sum":
    value = jnp.sum(per_row * rows) / jnp.maximum(n, 1.0)
  elif kl_reduction == "sequence_mean":
    value = jnp.sum(per_row / jnp.maximum(tokens, 1.0) * rows) / jnp.maximum(n, 1.0)
  elif kl_reduction == "token_mean":
    value = jnp.sum(per_row) / jnp.maximum(jnp.sum(tokens), 1.0)
  else:
    raise ValueError(f"adaptive_kl: kl_reduction must be one of {KL_REDUCTIONS}, got {kl_reduction!r}")
  return value, n


def _adaptive_kl_stage(init_beta=None, target: float = 6.0, horizon: float = 10000.0, *, clip: float = 0.2,
                       estimator: str = "k3", kl_reduction: str = "sequence_sum"):
  """Stage of ``rljax.control.adaptive_kl``; ``init_beta=None`` starts from the loss's ``kl_beta``.

  ``kl_reduction`` (``observed_kl``) says which KL the ``target`` is for: the default ``"sequence_sum"`` is the
  per-response sum that Ziegler et al.'s 6.0 bounds; verl's ``target_kl`` (0.1) is for ``"sequence_mean"``.
  """
  from rljax.objectives import kl_estimate  # pylint: disable=import-outside-toplevel
  from rljax.stages import Controller  # pylint: disable=import-outside-toplevel
  adaptive_kl(init_beta=1e-3 if init_beta is None else init_beta, target=target, horizon=horizon, clip=clip)
  if kl_reduction not in KL_REDUCTIONS:
    raise ValueError(f"adaptive_kl: kl_reduction must be one of {KL_REDUCTIONS}, got {kl_reduction!r}")

  @jax.jit
  def observe(logp_old, logp_ref, loss_mask):
    return observed_kl(kl_estimate(logp_old, logp_ref, estimator), loss_mask, kl_reduction)

  def build(beta0):
    ctl = adaptive_kl(init_beta=beta0, target=target, horizon=horizon, clip=clip)

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


def _entropic_stage(target_entropy: float, *, kp: float = 1.0, ki: float = 0.01, w_min: float = 0.0,
                    w_max: float = 2.0, integral_limit: float = 1e6, mode: str = "symmetric"):
  """Stage of ``rljax.control.entropic``: wraps the policy loss in ``advantage_sign_weighting``."""
  from rljax.objectives import advantage_sign_weighting  # pylint: disable=import-outside-toplevel
  from rljax.stages import Controller  # pylint: disable=import-outside-toplevel
  ctl = entropic(target_entropy, kp=kp, ki=ki, w_min=w_min, w_max=w_max, integral_limit=integral_limit, mode=mode)

  def update(state, inputs):
    state = _host(state)
    h = _observed_entropy("entropic", inputs)
    new = ctl.update(state, entropy=h)
    return _host(new), {"pos_weight": _f(state.pos_weight), "neg_weight": _f(state.neg_weight), "entropy": h,
                        "entropy_error": _f(new.error), "integral": _f(new.integral)}

  return Controller(ctl.init, update, hparams=lambda s: {"pos_weight": s.pos_weight, "neg_weight": s.neg_weight},
                    writes=("pos_weight", "neg_weight"), name="entropic",
                    wrap_policy=lambda term, hp: advantage_sign_weighting(term, hp["pos_weight"], hp["neg_weight"]))


_BAPO_PLACEMENTS = ("step", "loss")


def _bapo_in_loss(ctl: BAPO):
  """``policy_hparams(out, batch, hp)`` of BAPO's authors' placement: the bounds chosen inside the loss from the
  current ratio π_θ/π_old on the (micro-)batch the loss is called on (no gradient through the choice); a
  micro-batch with no signal keeps the step's bounds ``hp``."""
  def choose(out, batch, hp):
    mask = batch.loss_mask
    log_ratio = jax.lax.stop_gradient(out.logp) - batch.logp_proximal
    ratio = jnp.exp(jnp.clip(jnp.where(mask > 0, log_ratio, 0.0), -20.0, 20.0))
    low, high, _, signal = ctl.choose(batch.advantages, ratio, mask)
    eps_low = jnp.where(signal, 1.0 - low, hp["clip_low"]).astype(jnp.result_type(hp["clip_low"]))
    eps_high = jnp.where(signal, high - 1.0, hp["clip_high"]).astype(jnp.result_type(hp["clip_high"]))
    return {"clip_low": eps_low, "clip_high": eps_high}
  return choose


def _bapo_stage(rho0: float = 0.5, *, low_range=(0.6, 0.9), high_range=(1.2, 3.0), low_step: float = 0.05,
                high_step: float = 0.05, mode: str = "share", eps: float = 1e-8, placement: str = "step"):
  """Stage of ``rljax.control.bapo``: moves the policy loss's ``clip_low``/``clip_high``.

  ``placement="step"`` (default): once per step, after the update, from π_new/π_old on the step's batch; the
  bounds apply to the next step (a one-step lag; a batch with no signal keeps the bounds). ``"loss"`` (the
  authors' ``compute_policy_loss_bapo``): inside the loss, on every (micro-)batch, from the current ratio on that
  data; the step's hparams then only log the last step-level choice."""
  from rljax.stages import Controller  # pylint: disable=import-outside-toplevel
  if placement not in _BAPO_PLACEMENTS:
    raise ValueError(f"bapo: placement must be one of {list(_BAPO_PLACEMENTS)}, got {placement!r}")
  ctl = bapo(rho0, low_range=tuple(low_range), high_range=tuple(high_range), low_step=low_step,
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
                    writes=("clip_low", "clip_high"), name="bapo", needs={"logp_old"},
                    policy_hparams=_bapo_in_loss(ctl) if placement == "loss" else None)


def _temperature_control_stage(target_entropy: float, *, init_temperature=None, kappa: float = 0.1,
                               t_min: float = 0.1, t_max: float = 2.0, rule: str = "exp", vocab_size=None):
  """Stage of ``rljax.control.temperature_control``; ``init_temperature=None`` starts from ``rl.temperature``."""
  from rljax.stages import Controller  # pylint: disable=import-outside-toplevel

  def build(t0):
    ctl = temperature_control(target_entropy, init_temperature=t0, kappa=kappa, t_min=t_min, t_max=t_max,
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


def _technique_rows():
  from rljax._technique import Fidelity, Technique
  return (
      Technique("adaptive_kl", "controller", adaptive_kl, "β ← β·(1 + clip(KL/target − 1, ±0.2)·n/horizon)",
                "verl AdaptiveKLController; Ziegler et al. arXiv:1909.08593", stage=_adaptive_kl_stage,
                fidelity=Fidelity(
                    "peer", "volcengine/verl@v0.7.0 verl/trainer/ppo/core_algos.py: AdaptiveKLController.update",
                    "target 6.0 on the per-response KL sum (Ziegler et al.; verl: 0.1 on a mean of token means, "
                    "kl_reduction='sequence_mean'); estimator k3 (theirs k1); moves a KL loss term's β",
                    read="volcengine/verl@v0.7.0 (f9c855f7) verl/trainer/ppo/core_algos.py:150-171 "
                         "AdaptiveKLController, 190-209 get_kl_controller; verl/trainer/ppo/ray_trainer.py:126-165 "
                         "apply_kl_penalty (the caller); verl/trainer/config/algorithm.py:36-39 and "
                         "ppo_trainer.yaml algorithm.kl_ctrl (defaults); the same at main b178a3cd and in the verl "
                         "0.9.1 PyPI wheel (read whole, #51: core_algos.py:153-212, ray_trainer.py:78-117 and :365, "
                         "ppo_trainer.yaml:108-123); huggingface/trl@v1.9.0 searched: no adaptive KL controller. #51 "
                         "error-class sweep (s1b), the log-probs the KL is taken on and the default trainer: "
                         "verl/workers/fsdp_workers.py@v0.7.0:1017 (compute_log_prob) and :1056 "
                         "(compute_ref_log_prob) set meta_info temperature = rollout.temperature, dp_actor.py:213, "
                         "298 divide the logits by it; rollout.yaml@v0.7.0:11 (temperature 1.0); the 0.9.1 wheel's "
                         "default trainer (trainer.use_v1 true, ppo_trainer.yaml:232): trainer/ppo/v1/"
                         "trainer_base.py:126-127 (get_kl_controller when use_kl_in_reward), :1655 and :1701 (old "
                         "and reference log-probs at rollout.temperature; engine/fsdp/transformer_impl.py:98-103 "
                         "divides the logits), :1743-1760 (_compute_advantage calls ray_trainer.apply_kl_penalty), "
                         ":1608-1621 (_balance_batch appends synthetic padding rows, padding_utils.py:144-215, "
                         "before it). Per-row review i (#51), the source of the 6.0: Ziegler et al.'s code, "
                         "openai/lm-human-preferences@cbfd210b launch.py:11, 17, 124, 129-131, 142-144 (the books "
                         "tasks sentiment / descriptiveness: response_length 24, policy.temperature 0.7, "
                         "ppo.batch_size 512, rewards.kl_coef 0.15, adaptive_kl.target 6.0; cnndm / tldr :162-164, "
                         ":180-182: adaptive off, fixed kl_coef 0.01 / 0.03), lm_human_preferences/train_policy.py:"
                         "26-28 (AdaptiveKLParams, horizon 10000), :118-124 (AdaptiveKLController.update, verl's "
                         "form), :150-151 (−β·k1 per token in the reward), :221 (objective/kl = the batch mean of "
                         "each response's SUM over its tokens of log π_old − log π_ref), :299-305 (update after the "
                         "step's PPO epochs, n_steps = ppo.batch_size); policy.py:121 (logits ÷ temperature)",
                    defaults=(("init_beta", "the loss's kl_beta (None), else 1e-3", "kl_ctrl.kl_coef = 0.001"),
                              ("target", "6.0 (the number of Ziegler et al.'s books tasks, where it bounds the "
                               "per-response SUM of k1 over 24 tokens, ≈ 0.25 per token; observed here as that sum, "
                               "kl_reduction='sequence_sum'; TRL's legacy PPOConfig target 6.0, gone in TRL 1.9.0)",
                               "kl_ctrl.target_kl = 0.1"),
                              ("kl_reduction", "'sequence_sum': the mean over rows of each row's KL summed over its "
                               "loss tokens (Ziegler et al.'s objective/kl, train_policy.py:221)",
                               "current_kl = the batch mean of each row's token-mean KL ('sequence_mean')"),
                              ("horizon", "10000", "kl_ctrl.horizon = 10000"),
                              ("clip", "0.2", "0.2, hard-coded (np.clip(current_kl/target − 1, −0.2, 0.2))"),
                              ("estimator", "'k3'", "algorithm.kl_penalty = 'kl' (k1: log π_old − log π_ref)"),
                              ("type", "adaptive (the controller)", "kl_ctrl.type = 'fixed' (adaptive is opt-in)"),
                              ("temperature of the KL's log-probs", "none: logp_old and logp_ref are untempered "
                               "(log softmax of the raw logits; RLConfig.temperature does not enter)",
                               "actor_rollout_ref.rollout.temperature = 1.0 on both: old_log_prob and ref_log_prob "
                               "are log softmax(z / T) (recomputed, not top-p / top-k truncated)")),
                    placement="theirs: apply_kl_penalty in the driver, once per step before the advantage, only "
                              "with use_kl_in_reward: the reward gets −β·KL(π_old‖π_ref) per token with the current "
                              "β, then update(current_kl = batch mean of per-sequence token-mean KL, n_steps = batch "
                              "size); ours: a controller run once per step after the update on the step's logp_old "
                              "and logp_ref, the new β read by the next step's kl_penalty loss term (kl_beta)",
                    deviations=(
                        "target defaults to 6.0 with kl_reduction='sequence_sum' (Ziegler et al.'s pair: their "
                        "observed KL, lm-human-preferences train_policy.py:221, is the batch mean of each response's "
                        "k1 SUMMED over its tokens; TRL's legacy PPOConfig, adap_kl_ctrl / target 6 / horizon 10000 / "
                        "init_kl_coef 0.2, which TRL 1.9.0 no longer has: its trl/ has no adaptive KL controller), "
                        "not verl's target_kl = 0.1 on a sequence-mean of token means; verl's form is target=0.1, "
                        "kl_reduction='sequence_mean', estimator='k1'. Until 2026-12-07 the 6.0 was compared with a "
                        "token mean (kl_reduction='token_mean', kept for old configs), where at a usual KL the error "
                        "sat at −0.2 and β only shrank",
                        "Ziegler et al.'s β starts at kl_coef 0.15 and their log-probs are at temperature 0.7 "
                        "(launch.py:124, 129-131); ours at the loss's kl_beta and untempered",
                        "estimator defaults to 'k3'; verl's in-reward KL is kl_penalty='kl' (k1): pass "
                        "estimator='k1'",
                        "β moves a KL loss term (kl_penalty(beta=...)); verl's adaptive controller moves the "
                        "in-reward KL coefficient only (its KL loss, use_kl_loss, has a fixed kl_loss_coef)",
                        "n_steps counts the rows with a loss token (padding rows excluded); verl: the batch size "
                        "(0.9.1's default v1 trainer: including the synthetic padding rows it appends when the batch "
                        "is not a multiple of the dp size and mini-batch sizes, whose KL enters the mean as 0)",
                        "the KL is between the untempered distributions; verl's is between the tempered ones "
                        "(the actor's and the reference's logits ÷ rollout.temperature), so at T ≠ 1 the observed "
                        "KL and β's path differ; equal at verl's default T = 1.0 (ours has no temperature "
                        "option: the trainer's log-probs are untempered)",
                        "β is float32 state (checkpointed, as every controller state); verl keeps a Python float",
                        "verl's current_kl takes each row's token mean with masked_mean (the verl 0.9.1 PyPI wheel "
                        "utils/torch_functional.py:294-308: Σ kl·mask / (Σ mask + 1e-8)); ours "
                        "(kl_reduction='sequence_mean') divides by the token count: each row's term is n/(n + 1e-8) "
                        "times ours there (smaller in magnitude; #51 twenty-first draw)"))),
      Technique("entropic", "controller", entropic, "u = K_p·e + K_i·Σe, e = H* − H; w± = clip(1 ∓ u)",
                "000_3e503271be254a43.txt L107", stage=_entropic_stage,
                fidelity=Fidelity("authors_code", "github.com/yk7333/EntroPIC: core_algos.py "
                                  "compute_policy_loss_entropic, dp_actor.py",
                                  "code reweights only tokens with p > 0.95, via an added α·r·|A| token-mean; we "
                                  "scale every token's loss by 1 ± α; integral includes the current error",
                                  read="yk7333/EntroPIC@2470730c core_algos.py compute_policy_loss_entropic (stored "
                                       "copy, read_file: the dual-clip PPO loss plus "
                                       "control_alpha·agg_loss(−ratio·|A|, "
                                       "mask = response_mask·[π > high_prob_thresh = 0.95])); README.md's quote of "
                                       "dp_actor.py (α = clip(K_i·accumulated + K_p·(H − H*), −1, 1), the error "
                                       "accumulated after use, scaled by micro/mini batch size); run_entropic.sh "
                                       "(target_entropy 0.1, entropy_control_p 1, entropy_control_i 0.01); "
                                       "dp_actor.py@2470730c update_policy (code index, read in the second "
                                       "reading, #51 item 4: H = agg_loss(entropy) of each micro-batch, α as "
                                       "quoted, accumulated += (H − H*)·micro/mini batch size after use); read "
                                       "whole (#51, rG): config/entropic.yaml (target_entropy −1, "
                                       "entropy_control_p 1, entropy_control_i 0.01, loss_mode entropic) and "
                                       "run_entropic.sh whole (rollout.n 8, temperature 0.6, train_batch_size = "
                                       "ppo_mini_batch_size = 512: one update per step, entropy_coeff 0, no KL). "
                                       "Error-class sweep (#51, s2a; launch switches, the data-parallel dispatch): "
                                       "dp_actor.py@2470730c update_policy (temperature = data.meta_info"
                                       "['temperature'], the rollout's, passed to _forward_micro_batch, which "
                                       "divides the logits by it before the entropy and log-probs; "
                                       "self.accumulate_entropy_error an attribute of each rank's actor, set in "
                                       "__init__; ppo_mini_batch_size × rollout.n ÷ the data-parallel size rows "
                                       "per rank, token-budget micro-batches with use_dynamic_bsz), fsdp_workers.py"
                                       "@2470730c (the actor's dispatch registered per dp_rank; the mini-batch "
                                       "normalised by the data-parallel size), run_entropic.sh (rollout.temperature "
                                       "0.6, trainer.n_gpus_per_node 8, use_dynamic_bsz True): H, α and the "
                                       "integral are of softmax(z/0.6) and per rank, neither of which the record "
                                       "said. Per-row review j (#51): dp_actor.py@2470730c update_policy whole "
                                       "(stored copy): calculate_entropy = entropy_coeff != 0 or target_entropy > "
                                       "0; entropy_loss = agg_loss(loss_mat=entropy, ...) with no guard; "
                                       "control_alpha = 0.0 when target_entropy < 0; micro_batch_metrics "
                                       "'actor/control_alpha': control_alpha.item(); on_policy (one mini-batch, "
                                       "ppo_epochs 1, as run_entropic.sh) makes old_log_prob = log_prob.detach(), "
                                       "r = 1 in value; verl/workers/config/actor.py@2470730c ActorConfig "
                                       "(target_entropy 0, entropy_control_p 1.0, entropy_control_i 0.01). The "
                                       "record said yaml −1 gives α = 0, plain dual-clip PPO",
                                  defaults=(("kp", "1.0", "entropy_control_p = 1 (run_entropic.sh)"),
                                            ("ki", "0.01", "entropy_control_i = 0.01"),
                                            ("target_entropy", "required", "target_entropy = 0.1 "
                                             "(run_entropic.sh); yaml −1 (and ActorConfig's own default 0) does "
                                             "not run: update_policy computes the entropy only if entropy_coeff "
                                             "!= 0 or target_entropy > 0, then calls agg_loss on it "
                                             "unconditionally (None with entropy_coeff 0: a TypeError), and with "
                                             "target_entropy < 0 control_alpha is the Python float 0.0, whose "
                                             "control_alpha.item() in the metrics raises AttributeError: the "
                                             "control cannot be switched off in their code"),
                                            ("weights range", "w_min 0, w_max 2 (α ∈ [−1, 1])", "α clipped to "
                                             "[−1, 1]"),
                                            ("high_prob_thresh", "none (every token)", "0.95"),
                                            ("integral_limit", "1e6", "none"),
                                            ("mode", "'symmetric'", "symmetric (both signs)"),
                                            ("entropy's temperature", "none: H(softmax(z)), the sampler's "
                                             "untempered entropy_behavior (else the update's policy/entropy, also "
                                             "untempered); rl.temperature does not enter it",
                                             "rollout.temperature 0.6 (run_entropic.sh): the actor divides the "
                                             "logits by it, so H (and the ratio and the π > 0.95 mask) is of "
                                             "softmax(z/0.6); target_entropy 0.1 is a set point on that scale"),
                                            ("controller state", "one (the run's)", "one per data-parallel rank "
                                             "(8 GPUs): each rank's actor accumulates its own error from its own "
                                             "micro-batches' H, so the ranks' α differ within a step")),
                                  placement="theirs: inside the actor's update, on every micro-batch of every "
                                            "data-parallel rank: H is that micro-batch's entropy under the current "
                                            "policy at the rollout temperature (logits ÷ 0.6), α from it and the "
                                            "errors that rank accumulated so far, the extra term added to that "
                                            "micro-batch's loss, the ranks' gradients averaged; ours: a controller "
                                            "once per step after the update from the step's reported (untempered) "
                                            "entropy of the whole batch, the weights applied to the next step's "
                                            "loss (advantage_sign_weighting)",
                                  deviations=(
                                      "every token of a positive (negative) sample is scaled by w⁺ (w⁻); theirs "
                                      "adds α·token-mean(−r·|A|) over the tokens with π > 0.95 only (unclipped "
                                      "ratio, its own normaliser)",
                                      "the integral includes the current error; theirs uses the previous errors "
                                      "(accumulated after use, scaled by micro/mini batch size)",
                                      "one update per step, applied with a one-step lag; theirs per micro-batch, "
                                      "at once",
                                      "mode='positive'|'negative' and integral_limit are ours",
                                      "the state is float32 (theirs a Python float)",
                                      "the observed entropy is untempered (H of softmax(z)); their run samples at "
                                      "rollout.temperature 0.6 and measures H of softmax(z/0.6), which is lower for "
                                      "any non-uniform logits, so target_entropy 0.1 does not carry over: no "
                                      "setting gives their H (the sampler's entropy_behavior and the update's "
                                      "forward are untempered)",
                                      "one controller for the whole batch; theirs one per data-parallel rank (each "
                                      "rank's actor holds its own accumulated error and sees only its slice's "
                                      "micro-batches)",
                                      "target_entropy = 0 runs here (the controller drives H down to 0); in their "
                                      "code only target_entropy > 0 runs with entropy_coeff 0 (at 0 the entropy "
                                      "is not computed and agg_loss(None) raises; below 0 control_alpha.item() "
                                      "raises), so there is no control-off setting there (per-row review j, "
                                      "#51)"))),
      Technique("bapo", "controller", bapo,
                "first (c_low, c_high) on a relaxation grid with positive share ≥ ρ₀",
                "000_3e503271be254a43.txt L53; WooooDyy/BAPO README and recipe", stage=_bapo_stage,
                fidelity=Fidelity(
                    "authors_code", "github.com/WooooDyy/BAPO: recipe/bapo/policy_loss.py "
                    "compute_policy_loss_bapo",
                    "mode='share' (README reading), placement='step' ours; theirs: mode='code', placement='loss', "
                    "rho0 / low_range 1.0 / (0.6, 0.8) (yaml), 0.5 / (0.8, 0.95) (script); paper: ρ₀ 0.4, c_high "
                    "first; raises as released",
                    read="WooooDyy/BAPO@7287044 (re-read in the second reading, #51 item 4): "
                         "recipe/bapo/policy_loss.py:21-62 _compute_effective_advantage and :76-185 "
                         "compute_policy_loss_bapo; recipe/bapo/config/bapo_trainer.yaml:9-22; README (the ρ₀ rule), "
                         "as transcribed in tests/test_control.py; recipe/bapo/run_bapo_example.sh:12-25, 76-128 "
                         "(target_pos_ratio 0.5, lower 0.8 → 0.95 step 0.05, upper 1.2 → 2.0 step 0.1, ppo_epochs 2, "
                         "rollout.n 16, clip_ratio 0.2 / 0.2). Error-class sweep (#51, s2a; launch switches): "
                         "run_bapo_example.sh:16-18 (train_batch_size 256, ppo_epochs 2, ppo_mini_batch_size 64: 4 "
                         "mini-batches per epoch, 8 optimizer steps per step, the run name's 'staleness'), :41-43 "
                         "(temperature 1, top_p 1, top_k 100): the record gave the epochs but not the mini-batches. "
                         "Per-row review h (#51): run_bapo_example.sh:43 sets top_k=100 but the command (:61-130) "
                         "passes only rollout.temperature and rollout.top_p (:96-97), never rollout.top_k, so the run "
                         "samples at the rollout config's top_k -1 (off; verl/trainer/config/rollout/rollout.yaml:14 "
                         "of their verl 0.7.0.dev): the record had said top_k 100. Fourteenth draw (#51, part b): "
                         "recipe/bapo/bapo_worker.py:58-63 sets the Hydra actor config to struct mode "
                         "(OmegaConf.set_struct) and hands that DictConfig to the actor (verl's own worker converts "
                         "it with omega_conf_to_dataclass, their verl 0.7.0.dev fsdp_workers.py:795), so "
                         "policy_loss.py:158-161, which stores its metrics as pl_config._bapo_metrics_buffer, a key "
                         "the struct config lacks, raises omegaconf's ConfigAttributeError ('Key "
                         "'_bapo_metrics_buffer' is not in struct'; omegaconf 2.3, hydra-core 1.3's) on the first "
                         "loss call: the released recipe stops at its first actor update, so the settings here are "
                         "the code's, never a finished run's; verl/workers/actor/dp_actor.py:415-420 and "
                         "actor.yaml:72 (the loss aggregation, not in the record before). Nineteenth draw (#51, part b): "
                         "the paper, committed in this repository as paper.pdf (WooooDyy/BAPO@602d517, 2025-10-22; "
                         "deleted at b1cd33c, 'the offical paper is avaliable on arxiv': arXiv 2510.18927) and never "
                         "read before: §4.2 Eq. 8 (the condition: the positive tokens' share of Σ_t min(r_t·A_t, "
                         "clip(r_t, c_low, c_high)·A_t), a clipped token counted at its clipped value), Algorithm 1 "
                         "(lines 9-17: from (a⁻, a⁺), while ρ < ρ₀ and c_low + δ₂ ≤ b⁻: c_high += δ₁ while "
                         "c_high + δ₁ ≤ b⁺, else c_low += δ₂; once per update, inside the staleness loop) and §5 "
                         "'Implementation details' (ρ₀ = 0.4, a⁻ = 0.6, b⁻ = 0.9, a⁺ = 1.2, b⁺ = 3.0, δ₁ = 0.05 "
                         "(c_high), δ₂ = 0.02 (c_low); DeepSeek-R1-Distill-Qwen-7B, learning rate 2×10⁻⁶, "
                         "temperature 0.6)",
                    defaults=(("mode", "'share' (our reading of the README)", "the code's pos/neg ratio ('code')"),
                              ("rho0 (target)", "0.5", "1.0 (yaml); 0.5 (run_bapo_example.sh); the paper: ρ₀ = 0.4 (§5 "
                               "implementation details; the README's 0.5 'as used in the paper' is not the paper's)"),
                              ("low_range", "(0.6, 0.9) (README)", "(0.6, 0.8) (yaml); (0.8, 0.95) (script)"),
                              ("high_range", "(1.2, 3.0) (README)", "(1.2, 2.0) (yaml and script)"),
                              ("low_step / high_step", "0.05 / 0.05", "0.05 / 0.05 (yaml); 0.05 / 0.1 (script); the paper: "
                               "0.02 / 0.05 (δ₂ for c_low, δ₁ for c_high, §5)"),
                              ("search order", "mode='share': both bounds one step per grid point (lock step); "
                               "mode='code': c_low to its max, then c_high", "the code: c_low first, then c_high "
                               "(policy_loss.py:126-152); the paper's Algorithm 1: c_high first, up to b⁺, then "
                               "c_low, the search ending when c_low + δ₂ > b⁻"),
                              ("ppo_epochs (not this controller's)", "the trainer's", "2 (script): the bounds "
                               "chosen again on each epoch's micro-batches"),
                              ("mini-batches (not this controller's)", "rl.num_minibatches (1); "
                               "rl.num_minibatches=4, rl.updates_per_batch=2 gives theirs", "train_batch_size 256 ÷ "
                               "ppo_mini_batch_size 64 = 4 per epoch: 8 optimizer steps per step against π_old fixed "
                               "before the first, so the ratio the bounds are chosen from drifts over 8 steps "
                               "(placement='loss' sees it; placement='step' sees only the end)"),
                              ("sampler", "rl.temperature 1.0, rl.top_k 0, rl.top_p 1.0", "temperature 1, top_p 1 "
                               "(script :96-97); top_k -1 (off: rollout.yaml:14; the script's top_k=100 at :43 is "
                               "never passed): equal; the trained ratio is of recomputed, untruncated log-probs in "
                               "both; the paper's runs: temperature 0.6 (§5)"),
                              ("eps", "1e-8", "1e-8"),
                              ("placement", "'step'", "inside the loss, per micro-batch ('loss')"),
                              ("dual clip", "off (ppo_clip dual_clip=None)", "verl's clip_ratio_c = 3"),
                              ("loss aggregation (not this controller's)", "the recipe's policy loss (rl.loss)",
                               "token-mean (actor.yaml:72, not set by the script) over each micro-batch's tokens "
                               "(agg_loss masked_mean), × the micro-batch's rows / the GPU's mini-batch rows "
                               "(use_dynamic_bsz, dp_actor.py:417-418)"),
                              ("runs as released", "yes", "no: the first loss call raises ConfigAttributeError "
                               "(policy_loss.py:161 on the struct DictConfig of bapo_worker.py:58-63)")),
                    placement="theirs: inside compute_policy_loss_bapo, on every micro-batch, from the current "
                              "ratio π_θ/π_old on that data (no gradient through the choice), applied at once; "
                              "the pos / neg sums are all_reduce-summed over the data-parallel ranks "
                              "(policy_loss.py:47-55), so one choice covers the micro-step's micro-batches of "
                              "every GPU (script: 8 GPUs, use_dynamic_bsz True: micro-batches by token budget); "
                              "ours (placement='step'): once per step after the update, from π_new/π_old on the "
                              "step's batch, applied to the next step; placement='loss' runs theirs "
                              "(Controller.policy_hparams, the policy term rebuilt per micro-batch)",
                    deviations=(
                        "mode='share' (default) is our reading of the README's ρ₀ rule (positive share of the active "
                        "loss mass, bounds moved in lock step); the code's criterion is mode='code'",
                        "the paper (arXiv 2510.18927, the repository's paper.pdf@602d517) is neither: its Algorithm 1 "
                        "relaxes c_high first (δ₁ = 0.05) up to b⁺ = 3.0 and only then c_low (δ₂ = 0.02), at ρ₀ = "
                        "0.4; mode='share' moves both at once (0.05 / 0.05, ρ₀ 0.5), so its second candidate is "
                        "(0.65, 1.25) where the paper's is (0.6, 1.25); and its Eq. 8 counts a clipped token at its "
                        "clipped surrogate value (c_high·A for A > 0, r > c_high; c_low·A for A < 0, r < c_low), "
                        "where mode='share' counts only tokens with gradient (mode='code' uses the paper's per-token "
                        "terms); no mode gives the paper's search order (nineteenth draw, #51: the record had not "
                        "read the paper)",
                        "placement='step' (default) lags one step and sees the ratio after the update, not during it; "
                        "kept because it leaves the loss term a plain ppo_clip that other controllers can move",
                        "a batch with no signal (all-zero advantages, all padding, B = 0) keeps the previous bounds "
                        "(placement='step') or the step's bounds (placement='loss'); without the rule mode='share' "
                        "moved to the loosest (0.9, 3.0), theirs picks the tightest (pos/neg = inf)",
                        "the criterion is computed in the inputs' float dtype; the state (the chosen grid point) "
                        "stays float32, as every controller state (checkpointed)",
                        "the ratio is read inside the loss mask only (padding holds no ratio)",
                        "placement='loss' chooses on the global micro-batch (every device's rows: the sums run "
                        "over the sharded array), = their DP all_reduce when our micro-batch holds the rows of "
                        "their ranks' micro-batches of one micro-step; their dynamic (token-budget) micro-batches "
                        "are not built. Read-whole pass (#51 rI): the all_reduce was not in the record",
                        "their released recipe does not run its loss: bapo_worker.py:58-63 gives the actor the "
                        "struct-mode DictConfig and policy_loss.py:161 then adds a key to it (ConfigAttributeError "
                        "on the first micro-batch); the comparisons here are with the code as written, which runs "
                        "once the worker passes a dataclass config as verl's own worker does (fourteenth draw, "
                        "#51)"))),
      Technique("temperature_control", "controller", temperature_control, "T ← T·exp(κ(H* − H))",
                "001_5839a3671b0b4d92.txt L203", stage=_temperature_control_stage,
                fidelity=Fidelity("authors_code", "github.com/LiaoMengqi/E3-RL4LLMs: e3/worker/"
                                  "temperature_scheduler.py",
                                  "default rule 'exp' is ours (the code's needs V: rule='e3', vocab_size=V); "
                                  "T clipped to [T_min, T_max]; target given, no first-step skip or annealing",
                                  read="LiaoMengqi/E3-RL4LLMs@7e90b8e9 (2025-11-07) e3/worker/temperature_scheduler.py:"
                                       "6-78 TemperatureScheduler (step: the update rule, the first-step target, "
                                       "annealing); e3/worker/fsdp_work.py:143-146, 182 (built with "
                                       "rollout.temperature, V = the actor model's vocab_size), 481-487 (step after "
                                       "each update with metrics['actor/entropy_loss'], T read by the next rollout); "
                                       "scripts/train_7b.sh:14-15, 56-59; e3/config/ppo_trainer.yaml:95-97; "
                                       "e3/worker/actor/dp_actor.py:380-406 (actor/entropy_loss is recorded only "
                                       "when entropy_coeff ≠ 0, through append_to_dict(metrics, {set}), which "
                                       "raises: set has no .items(); verl/verl/utils/py_functional.py:159); "
                                       "scripts/train_1_5b.sh and train_7b.sh set entropy_coeff 0. Error-class "
                                       "sweep (#51, s2a; the data-parallel dispatch, the sampler temperature): "
                                       "e3/worker/fsdp_work.py:446-450 (update_actor, Dispatch.DP_COMPUTE_PROTO, "
                                       "sets data.meta_info['temperature'] to the scheduler's current T), :552 (the "
                                       "same for compute_log_prob), :516-517 (each rollout worker sets its vLLM "
                                       "sampling temperature from its own scheduler), :143-146 (one "
                                       "TemperatureScheduler per worker process) and e3/worker/actor/dp_actor.py:"
                                       "150, 225, 274, 320 (the logits ÷ that T before the entropy and log-probs): "
                                       "the observed entropy is of softmax(z/T) at the current T, and each rank "
                                       "steps its own scheduler from its own slice; the record said neither. Per-"
                                       "row review f (#51): README.md:93-96 (the training command, bash "
                                       "./scripts/train.sh, names a script the repository does not have: scripts/ "
                                       "holds train_1_5b.sh, train_7b.sh and infer.sh; both train scripts set the "
                                       "same scheduler switches, rollout.temperature 1 and max_steps 480)",
                                  defaults=(("rule", "'exp' (κ = 0.1)", "the e3 rule (T(1 + T·log(H*/H)/F))"),
                                            ("vocab_size", "None (required for rule='e3')",
                                             "the actor model's vocab_size"),
                                            ("init_temperature", "rl.temperature (stage), else 1.0",
                                             "rollout.temperature = 1"),
                                            ("target_entropy", "required",
                                             "None: the mean entropy of the first init_steps = 1 step"),
                                            ("t_min / t_max", "0.1 / 2.0", "no clip"),
                                            ("annealing", "none", "enable_annealing = True in the scripts: the "
                                             "target cosine-decays to 0.9× over the last 40% of max_steps = 480"),
                                            ("enable_temperature_scheduler", "on (the controller)",
                                             "False in ppo_trainer.yaml, True in the scripts"),
                                            ("observed entropy's temperature", "none: H(softmax(z)) (the sampler's "
                                             "entropy_behavior and the update's policy/entropy are untempered)",
                                             "the current T: update_actor sets meta_info['temperature'] = the "
                                             "scheduler's T and the actor divides the logits by it, so H = "
                                             "H(softmax(z/T)) and a change of T feeds back into H directly"),
                                            ("scheduler state", "one T for the run", "one TemperatureScheduler per "
                                             "worker process (8 GPUs in train_7b.sh), each stepped with its own "
                                             "slice's entropy metric and setting its own vLLM engine's T"),
                                            ("where the new T goes", "the sampler only (the trainer's logp, "
                                             "logp_old and entropies stay untempered log softmax(z))",
                                             "the worker's vLLM sampling temperature and also the trainer's log-probs: "
                                             "compute_log_prob (old_log_probs, fsdp_work.py:552) and update_actor "
                                             "(:446-450) pass the scheduler's T in meta_info['temperature'], and "
                                             "dp_actor divides the logits by it (:150, 225, 274, 320), so π_old, π "
                                             "and the PPO ratio are of softmax(z/T_t)")),
                                  placement="theirs: in each actor worker (one per data-parallel rank) after each "
                                            "policy update, from that rank's update's mean policy entropy "
                                            "(actor/entropy_loss, of softmax(z/T) at the current T), the new T set on "
                                            "that worker's rollout sampling params for the next generation; ours: a "
                                            "controller once per step after the update, from the (untempered) "
                                            "entropy the step reports for the whole batch (the sampler's, else the "
                                            "update's policy/entropy), T read by the next step's sampler",
                                  deviations=(
                                      "rule 'exp' is the default (a bare temperature_control(H*) has no "
                                      "vocabulary size); rule='e3', vocab_size=V is theirs",
                                      "the target is given; theirs may take the first step's mean entropy and "
                                      "skips the update on that step",
                                      "T is clipped to [t_min, t_max]; theirs is unclipped",
                                      "their optional cosine annealing of the target (on in their scripts) is "
                                      "not implemented",
                                      "the observed entropy is the sampler's when reported (theirs: the "
                                      "update's policy entropy)",
                                      "T is float32 state (theirs a Python float)",
                                      "at the cited commit their scheduler never moves T in their own runs: the "
                                      "scripts set entropy_coeff 0, so update_policy records no "
                                      "actor/entropy_loss and step(None) returns (T stays rollout.temperature "
                                      "1); with entropy_coeff ≠ 0 the recording line passes a set to "
                                      "append_to_dict and raises. Ours is the rule as the paper and the "
                                      "scheduler describe it, fed every step",
                                      "the observed entropy is untempered; theirs is H(softmax(z/T)) at the current "
                                      "T (the actor's logits ÷ T), so in theirs raising T raises the measured H at "
                                      "once, in ours only through the samples: the same rule settles at another T "
                                      "(equal while T = 1)",
                                      "one T for the whole run; theirs one scheduler per data-parallel worker, each "
                                      "stepped from its own slice's entropy, so the ranks' temperatures can drift "
                                      "apart",
                                      "the controller's T reaches only our sampler; theirs also tempers the "
                                      "trainer's log-probs of the same step (old_log_probs in compute_log_prob, "
                                      "log π in update_actor: the logits ÷ T_t, fsdp_work.py:446-450, 552; "
                                      "dp_actor.py:150, 225, 274, 320), so once T ≠ 1 their PPO ratio, clip and "
                                      "KL are of softmax(z/T_t) and ours of softmax(z) (#51 per-row review f: "
                                      "the record read these lines but listed only the entropy's temperature)"))),
  )


TECHNIQUES = _technique_rows()
