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


def bapo_positive_share(advantages, ratio, mask, clip_low, clip_high) -> Array:
  """Share of the PPO-clip loss magnitude carried by positive-advantage tokens (mode ``"share"``).

      active_t = (A_t > 0 ∧ r_t ≤ c_high) ∨ (A_t < 0 ∧ r_t ≥ c_low)   (tokens with gradient)
      share = Σ_{A>0, active} |A_t| r_t / Σ_{active} |A_t| r_t        (0 when nothing is active)

  ``clip_low``/``clip_high`` may carry leading grid dimensions (broadcast
  against ``[B, T]`` via trailing axes of size 1).
  """
  a, r, m = _f32(advantages), _f32(ratio), _f32(mask)
  lo, hi = _f32(clip_low)[..., None, None], _f32(clip_high)[..., None, None]
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
  a, r, m = _f32(advantages), _f32(ratio), _f32(mask)
  lo, hi = _f32(clip_low)[..., None, None], _f32(clip_high)[..., None, None]
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

  * ``"share"`` (default; README/paper: "target contribution ρ₀ of positive
    signals to the policy gradient loss"): criterion
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

  def grid(self) -> tuple:
    """The candidate (c_low [K], c_high [K]) arrays, in search order."""
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
    return jnp.asarray(low, jnp.float32), jnp.asarray(high, jnp.float32)

  def init(self) -> BAPOState:
    """The starting bounds (``low_min``, ``high_min``)."""
    return BAPOState(clip_low=_f32(self.low_min), clip_high=_f32(self.high_min), balance=_f32(0.0))

  def update(self, state: BAPOState, *, advantages, logp, logp_old, mask) -> BAPOState:
    """Chooses this step's bounds from the batch (``[B, T]`` arrays; ratio = exp(logp − logp_old), log clamped ±20)."""
    del state  # BAPO re-searches from the starting bounds every step.
    shape = tuple(np.shape(advantages))
    if len(shape) != 2:
      raise ValueError(f"advantages must be [B, T], got {shape}")
    for name, x in (("logp", logp), ("logp_old", logp_old)):
      if tuple(np.shape(x)) != shape:
        raise ValueError(f"{name} must have shape {shape}, got {tuple(np.shape(x))}")
    check_mask("mask", mask, shape)
    ratio = jnp.exp(jnp.clip(_f32(logp) - _f32(logp_old), -20.0, 20.0))
    low, high = self.grid()
    if self.mode == "share":
      values = bapo_positive_share(advantages, ratio, mask, low, high)
    else:
      values = bapo_pos_neg_ratio(advantages, ratio, mask, low, high, self.eps)
    ok = values >= self.rho0
    idx = jnp.where(jnp.any(ok), jnp.argmax(ok), low.shape[0] - 1)
    return BAPOState(clip_low=low[idx], clip_high=high[idx], balance=values[idx])


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
