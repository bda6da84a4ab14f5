"""Outcome-level (sequence) advantage estimators: ``rewards [B] -> advantages [B]``.

Every function returns ``(advantages, info)``: ``info`` is a dict whose scalar
entries are logging metrics and whose array entries (documented per function,
e.g. ``"returns"``) are auxiliary outputs. ``rljax.advantages.scalar_metrics``
keeps only the scalars. Rows with ``valid`` False (and, under ``jit``,
non-finite rewards) get advantage 0 and are excluded from every statistic;
concrete non-finite rewards on valid rows raise ``ValueError``.

Size: one family (outcome estimators); the catalog rows with their fidelity records are the last ~600 lines.
"""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from rljax import _groups as G
from rljax.advantages import _common as C
from rljax.types import check_mask, is_concrete

Array = jax.Array

__all__ = [
    "grpo", "dr_grpo", "rloo", "reinforce_pp", "reinforce_pp_baseline", "remax", "gae", "qae", "passk",
    "rank", "vote", "task_normalized", "key_baseline", "difficulty_weight", "gagar", "uniqueness", "canon",
    "outcome_to_token_rewards",
]


def _metrics(adv, r, v, **extra):
  n = jnp.maximum(jnp.sum(v), 1.0)
  out = {
      "adv_mean": jnp.sum(adv * v) / n,
      "adv_abs_max": jnp.max(jnp.abs(adv * v)) if adv.size else jnp.float32(0.0),
      "reward_mean": jnp.sum(r * v) / n,
      "num_valid": jnp.sum(v),
  }
  out.update(extra)
  return out


def _grpo_core(r, gid, v, num_groups, *, eps, std_ddof, scale, singleton):
  """Returns (advantages [B], group stats, per-row denominator)."""
  st = G.row_stats(r, gid, v, num_groups, ddof=std_ddof, singleton=singleton)
  if scale == "group":
    denom = st.std + eps
  elif scale == "batch":
    _, bstd = G.batch_mean_std(r, v, ddof=std_ddof)
    denom = jnp.broadcast_to(bstd + eps, r.shape)
  else:
    denom = jnp.ones_like(r)
  adv = jnp.where(denom > 0, (r - st.mean) / jnp.where(denom > 0, denom, 1.0), 0.0) * v
  return adv, st, denom


def _check_common(eps, std_ddof, scale, singleton):
  G.check_choice("scale", scale, C.SCALES)
  G.check_choice("singleton", singleton, C.SINGLETONS)
  if not isinstance(std_ddof, (int,)) or std_ddof not in (0, 1):
    raise ValueError(f"std_ddof must be 0 or 1, got {std_ddof!r}")
  if not eps >= 0:
    raise ValueError(f"eps must be >= 0, got {eps!r}")


@C.fast_path
def grpo(rewards: Array, group_id: Array, *, valid: Optional[Array] = None, num_groups: Optional[int] = None,
         eps: float = 1e-6, std_ddof: int = 1, scale: str = "group", singleton: str = "zero"):
  """GRPO group-normalised outcome advantage.

  ``A_i = (r_i − μ_g(i)) / (σ_g(i) + ε)`` with ``μ_g``, ``σ_g`` the mean and
  std (``ddof=std_ddof``) of the valid rewards of sample i's group.
  ``scale="batch"`` divides by the batch std of the rewards instead (group
  mean, batch std: TRL ``scale_rewards="batch"``, "PPO-Lite");
  ``scale="none"`` does not divide (Dr.GRPO).

  Source: DeepSeekMath (arXiv 2402.03300); peer conventions verl ``grpo`` /
  ``grpo_vectorized`` (ε=1e-6, unbiased std), TRL ``scale_rewards``.

  Args:
    rewards: ``[B]`` float sequence rewards.
    group_id: ``[B]`` int, ``0 <= id < num_groups``; groups may be ragged.
    valid: optional ``[B]`` bool; invalid rows get 0 and do not count.
    num_groups: static number of group segments (default ``B``).
    eps: added to the std (verl 1e-6, TRL 1e-4).
    std_ddof: 1 (unbiased, verl/TRL) or 0 (population).
    scale: ``"group" | "batch" | "none"``.
    singleton: a group with one valid member gets ``A = 0`` (``"zero"``,
      default) or verl's mean 0 / std 1, i.e. ``A = r/(1+ε)`` (``"raw"``).

  Returns:
    ``(advantages [B], info)``; groups whose rewards are all equal get 0.
  """
  _check_common(eps, std_ddof, scale, singleton)
  r, gid, v, ng = G.prepare(rewards, group_id, valid, num_groups)
  adv, st, _ = _grpo_core(r, gid, v, ng, eps=eps, std_ddof=std_ddof, scale=scale, singleton=singleton)
  info = _metrics(adv, r, v,
                  frac_zero_std=jnp.sum(v * (st.count > 1) * (st.std == 0)) / jnp.maximum(jnp.sum(v), 1.0),
                  num_singleton=jnp.sum(v * (st.count == 1)))
  return adv, info


@C.fast_path
def dr_grpo(rewards: Array, group_id: Array, *, valid: Optional[Array] = None, num_groups: Optional[int] = None,
            singleton: str = "zero"):
  """Dr.GRPO advantage: ``A_i = r_i − μ_g(i)`` (no std division).

  Pair it with the constant-normaliser aggregation
  (``rljax.objectives.seq_mean_token_sum_norm``). Source: "Understanding R1-Zero-
  Like Training" (arXiv 2503.20783); verl ``norm_adv_by_std_in_grpo=False``;
  TRL ``scale_rewards="none"``. Shapes as in ``grpo``.
  """
  return grpo(rewards, group_id, valid=valid, num_groups=num_groups, eps=0.0, scale="none", singleton=singleton)


@C.fast_path
def rloo(rewards: Array, group_id: Array, *, valid: Optional[Array] = None, num_groups: Optional[int] = None,
         singleton: str = "zero"):
  """RLOO leave-one-out baseline: ``A_i = r_i − mean_{j≠i, j∈g} r_j = n/(n−1)·(r_i − μ_g)``.

  Source: "Back to Basics: Revisiting REINFORCE..." (arXiv 2402.14740); verl
  ``rloo``. A singleton group has no other member: ``A = 0`` (``"zero"``) or
  verl's raw reward ``A = r`` (``"raw"``). Shapes as in ``grpo``.
  """
  G.check_choice("singleton", singleton, C.SINGLETONS)
  r, gid, v, ng = G.prepare(rewards, group_id, valid, num_groups)
  st = G.row_stats(r, gid, v, ng, ddof=0, singleton="zero")
  n = st.count
  adv = jnp.where(n > 1, n / jnp.maximum(n - 1.0, 1.0) * (r - st.mean), r if singleton == "raw" else 0.0) * v
  return adv, _metrics(adv, r, v, num_singleton=jnp.sum(v * (n == 1)))


def outcome_to_token_rewards(rewards: Array, mask: Array) -> Array:
  """Places each sequence reward on the last token of ``mask``: ``[B] -> [B, T]``.

  A row with no valid token gets no reward (all zeros).
  """
  (b,) = G.check_rank("rewards", rewards, 1)
  shape = G.check_rank("mask", mask, 2)
  if shape[0] != b:
    raise ValueError(f"mask must be [B, T] with B={b}, got {shape}")
  m = jnp.asarray(mask).astype(bool)
  t = shape[1]
  last = t - 1 - jnp.argmax(m[:, ::-1], axis=1)
  onehot = (jnp.arange(t)[None, :] == last[:, None]) & jnp.any(m, axis=1, keepdims=True)
  r = jnp.asarray(rewards, G.float_dtype(rewards))
  return jnp.where(onehot, r[:, None], 0.0)


def _token_rewards(rewards, mask):
  shape = G.check_rank("mask", mask, 2)
  check_mask("mask", mask)
  G.check_finite("rewards", rewards)
  if jnp.ndim(rewards) == 1:
    return outcome_to_token_rewards(rewards, mask), shape
  G.check_shape("rewards", rewards, shape)
  return jnp.asarray(rewards, G.float_dtype(rewards)), shape


def _discounted_returns(rewards, mask, gamma, reset: bool = False):
  """Return-to-go ``G_t = r_t + γ·G_{t+1}`` on mask-1 tokens (0 elsewhere). A mask-0 token carries the running
  return through (default) or resets it to 0 (``reset``: verl's ``running_return * response_mask[:, t]``)."""
  m = mask.astype(rewards.dtype)

  def step(running, xs):
    r_t, m_t = xs
    new = r_t + gamma * running
    carry = new * m_t if reset else new * m_t + running * (1 - m_t)
    return carry, new * m_t

  _, out = jax.lax.scan(step, jnp.zeros(rewards.shape[0], rewards.dtype), (rewards.T, m.T), reverse=True)
  return out.T


@C.fast_path
def reinforce_pp(rewards: Array, mask: Array, *, gamma: float = 1.0, whiten_eps: float = 1e-8,
                 reset_at_mask: bool = False):
  """REINFORCE++: discounted return-to-go, whitened over all valid tokens of the batch.

      G_t = r_t + γ·G_{t+1}  (t in mask),   A = (G − mean_m G)·rsqrt(var_m G + 1e-8)·mask

  with the unbiased masked variance. Source: REINFORCE++ (arXiv 2501.03262); peer: verl
  ``compute_reinforce_plus_plus_outcome_advantage``.

  Mask-0 tokens inside a response (multi-turn tool observations) neither receive a return nor, by default, break
  the recursion: the running return is carried through them, so an earlier turn is credited with the outcome
  reward of the episode's last turn, as verl 0.9.1 does. verl v0.7.0 (and main b178a3cd) instead resets the
  running return at every mask-0 token (``running_return = running_return * response_mask[:, t]``, written for
  the padding after EOS), which with holes in the mask cuts the return at each observation: an earlier turn then
  sees only its own turn's rewards (0 under an outcome reward). ``reset_at_mask=True`` is v0.7.0's form. The two
  agree on masks without holes (a prefix of ones per row), i.e. single-turn responses. ``info["returns"]`` is 0
  outside the mask, as in verl 0.9.1 (v0.7.0 keeps the unmasked running value there; whitening and the returned
  advantages never read it).

  Args:
    rewards: ``[B]`` outcome rewards (placed on the last valid token) or
      ``[B, T]`` token rewards.
    mask: ``[B, T]`` bool response mask.
    gamma: discount.
    reset_at_mask: reset the running return at mask-0 tokens (verl) instead of carrying it through (default).

  Returns:
    ``(advantages [B, T], info)`` with ``info["returns"]`` the ``[B, T]`` returns.
  """
  if not isinstance(reset_at_mask, bool):
    raise ValueError(f"reset_at_mask must be a bool, got {reset_at_mask!r}")
  tok, _ = _token_rewards(rewards, mask)
  m = jnp.asarray(mask).astype(tok.dtype)
  returns = _discounted_returns(tok, m, gamma, reset=bool(reset_at_mask))
  adv = C.masked_whiten(returns, m, eps=whiten_eps)
  return adv, {"returns": returns, "adv_abs_max": jnp.max(jnp.abs(adv), initial=0.0), "num_tokens": jnp.sum(m)}


@C.fast_path
def reinforce_pp_baseline(rewards: Array, group_id: Array, *, mask: Optional[Array] = None,
                          valid: Optional[Array] = None, num_groups: Optional[int] = None,
                          singleton: str = "zero", whiten_eps: float = 1e-8):
  """REINFORCE++ with group baseline: ``A = whiten(r_i − μ_g(i))`` over the batch.

  With ``mask [B, T]`` the centred reward is broadcast over tokens and
  whitened over all valid *tokens* (verl ``reinforce_plus_plus_baseline``:
  longer responses weigh more in the batch statistics) and ``[B, T]`` is
  returned; without a mask it is whitened over valid sequences and ``[B]``
  is returned. Whitening: ``(x − mean)·rsqrt(var_unbiased + 1e-8)``.
  Source: arXiv 2501.03262; verl/OpenRLHF/slime ``reinforce_plus_plus_baseline``.
  Singletons: ``"zero"`` (A before whitening 0) or verl ``"raw"`` (mean 0).
  """
  G.check_choice("singleton", singleton, C.SINGLETONS)
  r, gid, v, ng = G.prepare(rewards, group_id, valid, num_groups)
  st = G.row_stats(r, gid, v, ng, ddof=0, singleton=singleton)
  centred = (r - st.mean) * v
  if mask is None:
    adv = C.masked_whiten(centred, v, eps=whiten_eps)
    return adv, _metrics(adv, r, v)
  b = r.shape[0]
  shape = G.check_rank("mask", mask, 2)
  if shape[0] != b:
    raise ValueError(f"mask must be [B, T] with B={b}, got {shape}")
  check_mask("mask", mask)
  m = jnp.asarray(mask).astype(r.dtype) * v[:, None]
  adv = C.masked_whiten(centred[:, None] * m, m, eps=whiten_eps)
  return adv, _metrics(jnp.sum(adv, 1) / jnp.maximum(jnp.sum(m, 1), 1.0), r, v)


@C.fast_path
def remax(rewards: Array, baseline_rewards: Array, *, mask: Optional[Array] = None):
  """ReMax: greedy-rollout baseline, ``A = r − b`` (b = reward of the greedy decode).

  Outcome form (``rewards [B]``, no mask): ``A_i = r_i − b_i``, ``[B]``.
  Token form (``rewards [B, T]`` or ``[B]`` with ``mask [B, T]``): verl
  ``remax``: ``returns_t = Σ_{s≥t} r_s·m_s`` and ``A_t = returns_t − b·m_t``,
  ``[B, T]`` (note: verl does not zero ``A`` outside the mask when a reward sits
  there; with outcome rewards on the last valid token both agree).
  Source: ReMax (arXiv 2310.10505).

  Returns:
    ``(advantages, info)``; token form adds ``info["returns"]``.
  """
  (b,) = G.check_rank("baseline_rewards", baseline_rewards, 1)
  G.check_finite("baseline_rewards", baseline_rewards)
  base = jnp.asarray(baseline_rewards, G.float_dtype(baseline_rewards))
  if mask is None:
    G.check_shape("rewards", rewards, (b,))
    G.check_finite("rewards", rewards)
    r = jnp.asarray(rewards, base.dtype)
    adv = r - base
    return adv, _metrics(adv, r, jnp.ones_like(r))
  tok, shape = _token_rewards(rewards, mask)
  if shape[0] != b:
    raise ValueError(f"baseline_rewards must be [B] with B={shape[0]}, got {(b,)}")
  m = jnp.asarray(mask).astype(tok.dtype)
  returns = jnp.cumsum((tok * m)[:, ::-1], axis=1)[:, ::-1]
  adv = returns - base[:, None] * m
  return adv, {"returns": returns, "adv_abs_max": jnp.max(jnp.abs(adv), initial=0.0), "num_tokens": jnp.sum(m)}


@C.fast_path
def gae(rewards: Array, values: Array, mask: Array, *, gamma: float = 1.0, lam: float = 1.0,
        whiten: bool = True, whiten_eps: float = 1e-8):
  """Generalised Advantage Estimation with returns and batch whitening (critic PPO).

  ``δ_t = r_t + γ·V_{t+1} − V_t``, ``A_t = δ_t + γλ·A_{t+1}``, where ``t+1`` is
  the next *valid* token (mask-0 observation tokens are skipped: they carry
  the next value and the running advantage through unchanged);
  ``returns = A_raw + V``; ``A`` is then whitened over valid tokens with
  the unbiased variance (``whiten=True``) and multiplied by the mask.
  Source: Schulman et al. (arXiv 1506.02438); verl ``gae``
  (``compute_gae_advantage_return``). Difference: verl does not multiply the
  whitened advantages by the mask (its loss masks them later); we return 0
  outside the mask.

  Args:
    rewards: ``[B, T]`` token rewards, or ``[B]`` placed on the last valid token.
    values: ``[B, T]`` critic values ``V_t``.
    mask: ``[B, T]`` response mask.

  Returns:
    ``(advantages [B, T], info)`` with ``info["returns"] [B, T]``.
  """
  tok, shape = _token_rewards(rewards, mask)
  G.check_shape("values", values, shape)
  m = jnp.asarray(mask).astype(tok.dtype)
  if is_concrete(values) and is_concrete(mask):  # values outside the mask (padding) are never read
    G.check_finite("values inside mask", np.asarray(values)[np.asarray(mask) > 0])
  val = jnp.asarray(values, tok.dtype)
  val_in = jnp.where(m > 0, val, 0.0)  # the recursion reads V only inside the mask (padding may hold NaN)

  def step(carry, xs):
    next_v, last = carry
    r_t, v_t, m_t = xs
    delta = r_t + gamma * next_v - v_t
    new = delta + gamma * lam * last
    next_v = v_t * m_t + (1 - m_t) * next_v
    last = new * m_t + (1 - m_t) * last
    return (next_v, last), last

  zeros = jnp.zeros(shape[0], tok.dtype)
  _, adv_t = jax.lax.scan(step, (zeros, zeros), (tok.T, val_in.T, m.T), reverse=True)
  raw = adv_t.T
  returns = raw + val
  adv = C.masked_whiten(raw, m, eps=whiten_eps) if whiten else raw * m
  return adv, {"returns": returns, "adv_abs_max": jnp.max(jnp.abs(adv), initial=0.0), "num_tokens": jnp.sum(m)}


@C.fast_path
def qae(rewards: Array, group_id: Array, *, quantile: float = 0.5, valid: Optional[Array] = None,
        num_groups: Optional[int] = None, eps: float = 1e-6, std_ddof: int = 1, scale: str = "group",
        interpolation: str = "linear", mode: str = "rljax"):
  """QAE: group-wise K-quantile baseline, ``A_i = (r_i − Q_K(g)) / (σ_g + ε)``.

  ``Q_K`` is the K-quantile of the valid group rewards. ``interpolation="linear"``
  (default, the authors' code: ``torch.quantile``, numpy's default): with the
  sorted rewards ``s_0 ≤ … ≤ s_{n−1}`` and ``h = K·(n−1)``,
  ``Q = s_⌊h⌋ + (h − ⌊h⌋)·(s_⌈h⌉ − s_⌊h⌋)``. ``"inverted_cdf"``: the
  ``ceil(K·n)``-th smallest (at least the 1st), which makes the abstract's
  two-regime gate exact for binary rewards with success rate p: if p ≤ 1−K
  only successes get non-zero advantages, else only failures (the linear form
  gives both signs when K·(n−1) falls between a failure and a success).
  Source: "Quantile Advantage Estimation" (seed 000_3e503271be254a43.txt L21,
  arXiv 2509.22611); the authors' code (github.com/junkangwu/QAE) swaps
  ``torch.quantile(scores, K)`` for the mean inside verl's GRPO advantage, so
  GRPO's std division (``scale="group"``, unbiased std, ε = 1e-6) is kept.
  ``quantile`` is K in (0, 1] (the authors' README runs K = 0.4; ours defaults to the median, 0.5).

  ``mode`` picks the edge rules: ``"rljax"`` (default): a singleton group gets 0 (its quantile is its own
  reward) and K = 1 is the group max; ``"authors"`` (their verl GRPO branch): a singleton group keeps verl's
  mean 0 / std 1, ``A = r / (1 + ε)``, and K = 1 falls back to the group mean. A group whose denominator is 0
  (equal rewards with ``eps=0``) gets 0, as in ``grpo`` (the authors' code divides 0 by 0 there).
  """
  if not 0.0 < quantile <= 1.0:
    raise ValueError(f"qae: quantile must be in (0, 1], got {quantile!r}")
  G.check_choice("interpolation", interpolation, ("linear", "inverted_cdf"))
  G.check_choice("mode", mode, ("rljax", "authors"))
  _check_common(eps, std_ddof, scale, "zero")
  r, gid, v, ng = G.prepare(rewards, group_id, valid, num_groups)
  rk = G.group_ranks(r, gid, ng)
  n = rk.count.astype(r.dtype)
  sorted_r = r[rk.order]

  def nth(j):  # the j-th smallest (0-based) valid reward of each row's group
    return sorted_r[jnp.clip(rk.start[gid] + j, 0, r.shape[0] - 1)]

  if interpolation == "linear":
    h = quantile * jnp.maximum(n - 1, 0.0)
    lo = jnp.floor(h + 1e-6 * n)  # absorb float error of K·(n−1) at integers
    frac = jnp.clip(h - lo, 0.0, 1.0)
    hi = jnp.minimum(lo + 1, jnp.maximum(n - 1, 0.0))
    s_lo, s_hi = nth(lo.astype(jnp.int32)), nth(hi.astype(jnp.int32))
    q = s_lo + frac * (s_hi - s_lo)
  else:
    j = jnp.clip(jnp.ceil(quantile * n - 1e-6 * n), 1, jnp.maximum(n, 1)).astype(jnp.int32)
    q = nth(j - 1)
  st = G.row_stats(r, gid, v, ng, ddof=std_ddof, singleton="zero")
  std = st.std
  if mode == "authors":
    if quantile == 1.0:
      q = st.mean
    single = n == 1
    q = jnp.where(single, 0.0, q)  # verl: a singleton group's mean 0 and std 1
    std = jnp.where(single, 1.0, std)
  if scale == "group":
    denom = std + eps
  elif scale == "batch":
    denom = jnp.broadcast_to(G.batch_mean_std(r, v, ddof=std_ddof)[1] + eps, r.shape)
  else:
    denom = jnp.ones_like(r)
  adv = jnp.where(denom > 0, (r - q) / jnp.where(denom > 0, denom, 1.0), 0.0) * v
  return adv, _metrics(adv, r, v, frac_zero=jnp.sum(v * (adv == 0)) / jnp.maximum(jnp.sum(v), 1.0))


@C.fast_path
def passk(rewards: Array, group_id: Array, *, k: int, valid: Optional[Array] = None,
          num_groups: Optional[int] = None, sigma_eps: float = 1e-6):
  """Analytic Pass@k advantage: ``A_i = (E[max_{S∋i} r] − ρ) / σ`` over k-subsets S of the group.

  ``ρ = E_S[max_{j∈S} r_j]`` and ``σ² = Var_S[max r]`` over uniformly random
  k-subsets of the group's n valid rewards; ``E[max_{S∋i} r]`` averages over
  the subsets containing i. For binary rewards with c successes this is the
  closed form ``ρ = 1 − C(n−c, k)/C(n, k)``, ``σ = sqrt(ρ(1−ρ))``,
  ``A_correct = (1−ρ)/σ``, ``A_incorrect = (1 − ρ − C(n−c−1, k−1)/C(n−1, k−1))/σ``
  (Pass@k Training, seed 001_5839a3671b0b4d92.txt L169, arXiv 2508.10751;
  closed form from the authors' code). For general rewards we use the exact
  order-statistic expectation (our extension; it equals brute-force
  enumeration). Not verl's ``grpo_passk``.

  Computed from within-group sorted positions: the max of S is its member with
  the largest (value, row index); binomial ratios are products of k−1
  factors, and differences are taken on shortfalls ``max_g − r`` so that
  ``1 − ρ`` does not cancel in float32.

  Args:
    rewards: ``[B]``; group_id: ``[B]``; k: static int >= 1.
    sigma_eps: groups with ``σ <= sigma_eps`` get ``A = 0``: all rewards equal
      (c=0 or c=n), every k-subset holding a success (c > n−k), and groups whose
      σ is positive but tiny (binary n=64, k=16, c=46..48: σ < 6e-7, where the
      authors' code gives |A| < 1e-6).

  Raises:
    ValueError: if ``k`` exceeds a (concrete) group's valid size. Under ``jit``
      such groups get ``A = 0`` and are counted in ``info["num_groups_lt_k"]``.
  """
  if not isinstance(k, int) or k < 1:
    raise ValueError(f"k must be a positive int, got {k!r}")
  r, gid, v, ng = G.prepare(rewards, group_id, valid, num_groups)
  rk = G.group_ranks(r, gid, ng)
  n = rk.count.astype(r.dtype)
  if is_concrete(n) and is_concrete(v):
    import numpy as np
    small = np.asarray(v, bool) & (np.asarray(n) < k)
    if small.any():
      raise ValueError(f"k={k} exceeds the valid size ({int(np.asarray(n)[small].min())}) of group "
                       f"{int(np.asarray(group_id)[small][0])}; every group needs at least k samples")
  b = r.shape[0]
  order = rk.order
  sg = gid[order]
  sn = n[order]
  big = sn >= k  # groups smaller than k contribute nothing
  j1 = (rk.position[order] + 1).astype(r.dtype)  # 1-based position in the group's (value, index) sort
  nn = jnp.where(big, sn, float(k))
  # exact-ish binomial ratios as products of k−1 factors (no gammaln cancellation):
  # w_self_j = C(j−1,k−1)/C(n−1,k−1) = Π_{m=1}^{k−1} (j−m)/(n−m);  P(max = j) = (k/n)·w_self_j
  # w_above_j = C(j−2,k−2)/C(n−1,k−1) = (k−1)/(n−1)·Π_{m=2}^{k−1} (j−m)/(n−m)
  tail = jnp.ones_like(j1)
  for m_ in range(2, k):
    tail = tail * (j1 - m_) / (nn - m_)
  w_self = jnp.where(big, tail * (j1 - 1) / (nn - 1), 0.0) if k >= 2 else jnp.where(big, 1.0, 0.0)
  w_above = jnp.where(big, tail * (k - 1) / jnp.maximum(nn - 1, 1.0), 0.0) if k >= 2 else jnp.zeros_like(j1)
  p_max = w_self * k / nn
  # work with shortfalls s = max_g − r >= 0 so that 1 − ρ-type differences never cancel
  top = jax.ops.segment_max(r, gid, num_segments=ng + 1)
  ss = jnp.where(big, top[sg] - r[order], 0.0)
  short = G.seg_sum(p_max * ss, sg, ng)                    # r_max − ρ
  var = G.seg_sum(p_max * (ss - short[sg]) ** 2, sg, ng)   # Var of the subset max
  sigma = jnp.sqrt(var)
  # Σ_{j above i in i's group} s_j·w_above_j: segmented suffix sum (no global prefix-sum differences)
  incl = G.segmented_suffix_sum(ss * w_above, sg)
  same_next = jnp.concatenate([sg[1:] == sg[:-1], jnp.zeros((1,), bool)])
  above = jnp.where(same_next, jnp.concatenate([incl[1:], jnp.zeros((1,), r.dtype)]), 0.0)
  idx = jnp.arange(b)
  m_sorted = short[sg] - (ss * w_self + above)              # E[max_{S∋i}] − ρ
  inv = jnp.zeros((b,), jnp.int32).at[order].set(idx)
  m_i = m_sorted[inv]
  rho_i, sigma_i = top[gid] - short[gid], sigma[gid]
  ok = (n >= k) & (sigma_i > sigma_eps) & (v > 0)
  adv = jnp.where(ok, m_i / jnp.where(ok, sigma_i, 1.0), 0.0)
  lt_k = jnp.sum(jnp.where(v > 0, (n < k) / jnp.maximum(n, 1.0), 0.0))
  return adv, _metrics(adv, r, v, num_groups_lt_k=lt_k, passk_mean=jnp.sum(v * rho_i / jnp.maximum(n, 1.0)) /
                       jnp.maximum(jnp.sum(v / jnp.maximum(n, 1.0)), 1.0))


@C.fast_path
def rank(rewards: Array, group_id: Array, *, valid: Optional[Array] = None, num_groups: Optional[int] = None,
         normalize: str = "range"):
  """RLRR rank-based relative advantage: centred within-group mid-ranks.

  ``ρ_i = #{j∈g: r_j < r_i} + (#{j∈g: r_j = r_i} + 1)/2`` (1-based mid-rank,
  ties share it); ``A_i = (ρ_i − (n+1)/2) / ((n−1)/2)`` in [−1, 1]
  (``normalize="range"``), ``/ std(ρ)`` (``"std"``, population) or unscaled
  (``"none"``). Singletons get 0. Source: Ranking Reward Model / RLRR (seed
  001_5839a3671b0b4d92.txt L229); the abstract only says advantages come from
  within-group rankings — centring, mid-rank ties and the scale are ours.
  Invariant to any strictly increasing transform of the rewards.
  """
  G.check_choice("normalize", normalize, ("range", "std", "none"))
  r, gid, v, ng = G.prepare(rewards, group_id, valid, num_groups)
  rk = G.group_ranks(r, gid, ng)
  n = rk.count.astype(r.dtype)
  mid = rk.less.astype(r.dtype) + (rk.equal.astype(r.dtype) + 1) / 2
  centred = mid - (n + 1) / 2
  if normalize == "range":
    adv = centred / jnp.maximum((n - 1) / 2, 0.5)
  elif normalize == "std":
    st = G.row_stats(mid, gid, v, ng, ddof=0)
    adv = jnp.where(st.std > 0, centred / jnp.where(st.std > 0, st.std, 1.0), 0.0)
  else:
    adv = centred
  adv = adv * v
  return adv, _metrics(adv, r, v)


@C.fast_path
def vote(rewards: Array, answer_id: Array, group_id: Array, *, valid: Optional[Array] = None,
         num_groups: Optional[int] = None, eps: float = 1e-6, std_ddof: int = 1, scale: str = "group",
         form: str = "glpo", bonus: float = 1.0):
  """GLPO vote-guided advantage allocation (VAA-CSEC).

  ``r_vote(g)`` is the reward of the group's majority (self-consistency)
  answer: the mean reward of the rollouts giving that answer (if several
  answers tie for the majority, the mean over all their rollouts).

  * ``form="glpo"`` (default, the authors' code): GRPO plus a one-sided
    vote-margin bonus, ``A_i = (r_i − μ_g) / max(σ_g, eps) + bonus·max(0, r_i − r_vote(g))``.
  * ``form="margin"``: ``A_i = (r_i − r_vote(g)) / (σ_g + eps)``, the vote
    reward as the baseline (our earlier reading of the abstract); a rollout
    with the vote reward gets 0.

  ``scale`` picks σ (``"group"``: the group's std, ``"batch"``, ``"none"``: 1).
  A unanimous group gets all-zero advantages in both forms.

  Authors' code: github.com/HanYiton/VAA-CSEC ``YuYi/glpo/glpo_swift_plugin.py``
  (``_glpo_compute_advantages``): base = (R − mean_K)/clamp(std_K (ddof 1),
  min=GLPO_STD_EPS=1e-4), bonus = GLPO_BONUS_SCALE (1.0)·max(0, R − R(G)),
  R(G) = the task reward of ``Counter.most_common(1)`` answer (the first
  tied answer; ours averages the tied answers' rewards); pass ``eps=1e-4``
  for their floor. Source: seed 001_5839a3671b0b4d92.txt L135.

  Args:
    answer_id: ``[B]`` int, any values (e.g. a hash of the normalised final
      answer); equal ids = same answer.
    eps: added to σ (``"margin"``) or the lower bound of σ (``"glpo"``).
    bonus: the vote-margin bonus scale (``"glpo"``), >= 0.
  """
  _check_common(eps, std_ddof, scale, "zero")
  G.check_choice("form", form, ("glpo", "margin"))
  if is_concrete(bonus) and not (jnp.ndim(bonus) == 0 and 0.0 <= float(bonus) < float("inf")):
    raise ValueError(f"bonus must be a finite scalar >= 0, got {bonus!r}")
  r, gid, v, ng = G.prepare(rewards, group_id, valid, num_groups)
  b = r.shape[0]
  G.check_shape("answer_id", answer_id, (b,))
  key, _ = G.dense_ids(gid, jnp.asarray(answer_id), valid=v > 0)
  cnt = jax.ops.segment_sum(v, key, num_segments=b + 1)[key]
  top = jax.ops.segment_max(jnp.where(v > 0, cnt, -1.0), gid, num_segments=ng + 1)[gid]
  major = (cnt == top) & (v > 0)
  r_vote = G.seg_sum(r * major, gid, ng) / jnp.maximum(G.seg_sum(major.astype(r.dtype), gid, ng), 1.0)
  st = G.row_stats(r, gid, v, ng, ddof=std_ddof)
  sigma = st.std if scale == "group" else (G.batch_mean_std(r, v, ddof=std_ddof)[1] if scale == "batch" else None)
  if form == "margin":
    denom = 1.0 if sigma is None else sigma + eps
    adv = C.safe_div(r - r_vote[gid], denom) * v
  else:
    denom = 1.0 if sigma is None else jnp.maximum(sigma, eps)
    adv = (C.safe_div(r - st.mean, denom) + bonus * jnp.maximum(r - r_vote[gid], 0.0)) * v
  return adv, _metrics(adv, r, v, vote_reward_mean=jnp.sum(r_vote[gid] * v) / jnp.maximum(jnp.sum(v), 1.0))


@C.fast_path
def task_normalized(advantages: Array, task_id: Array, *, valid: Optional[Array] = None,
                    num_tasks: Optional[int] = None, eps: float = 1e-6, std_ddof: int = 1, center: bool = True,
                    scale: str = "advantages", rewards: Optional[Array] = None):
  """Per-task advantage normalisation: ``A' = (A − mean_task A) / (std_task A + ε)``.

  Statistics are keyed by ``task_id`` over the batch, so one task's reward
  scale cannot dominate. ``scale="rewards"`` divides by the std of
  ``rewards`` over the task's rows of the batch instead: QwenLong-L1.5's
  task-specific advantage estimation (arXiv 2512.12967 Sec. 4.2 Eq. 7) is
  ``A_i = (r_i − mean_group r) / std(r ∈ B_task)``, i.e.
  ``task_normalized(grpo(r, gid, scale="none")[0], task, rewards=r,
  scale="rewards", center=False)`` (its ``mean_group`` terms are 0 on each
  task, so ``center`` barely matters there). AgentRL's abstract (seed
  000_3e503271be254a43.txt L55) gives no form; its code (github.com/THUDM/AgentRL)
  and paper (arXiv 2510.04206) were not reachable, so the default is unchecked
  against AgentRL (the record says so). A task with a single
  valid sample gets 0 (``center=True``).

  Args:
    advantages: ``[B]`` (e.g. from ``grpo``); task_id: ``[B]`` int in ``[0, num_tasks)``.
    scale: ``"advantages"`` (std of the advantages, default) or ``"rewards"`` (std of ``rewards [B]``).
  """
  G.check_choice("scale", scale, ("advantages", "rewards"))
  r, tid, v, nt = G.prepare(advantages, task_id, valid, num_tasks, rewards_name="advantages",
                            group_name="task_id")
  st = G.row_stats(r, tid, v, nt, ddof=std_ddof)
  sd = st.std
  if scale == "rewards":
    if rewards is None:
      raise ValueError("task_normalized(scale='rewards') needs rewards [B]")
    G.check_shape("rewards", rewards, r.shape)
    sd = G.row_stats(jnp.asarray(rewards).astype(r.dtype), tid, v, nt, ddof=std_ddof).std
  adv = C.safe_div((r - st.mean) if center else r, sd + eps) * v
  return adv, _metrics(adv, r, v)


@C.fast_path
def key_baseline(rewards: Array, key: Array, *, valid: Optional[Array] = None, num_keys: Optional[int] = None):
  """Shared baseline by an arbitrary key: ``A_i = R_i − mean{R_j : key_j = key_i}``.

  Source: AdvEvo-MARL public baseline (seed 000_3e503271be254a43.txt L33):
  agents of one functional group share a mean-return baseline. ``key`` is
  ``[B]`` int in ``[0, num_keys)`` (default ``num_keys = B``); a key with one
  valid sample gives 0.
  """
  r, kid, v, nk = G.prepare(rewards, key, valid, num_keys, group_name="key")
  adv, _, _ = _grpo_core(r, kid, v, nk, eps=0.0, std_ddof=0, scale="none", singleton="zero")
  return adv, _metrics(adv, r, v)


@C.fast_path
def difficulty_weight(advantages: Array, correct: Array, group_id: Array, *, strength: float = 0.5,
                      form: str = "linear", valid: Optional[Array] = None, num_groups: Optional[int] = None):
  """Difficulty-prior reweighting: ``A'_i = A_i · f(1 − acc_g(i))``.

  ``acc_g`` is the group's empirical accuracy (mean of ``correct``), d = 1 −
  acc the difficulty; ``f(d) = 1 + s·(2d − 1)`` (``form="linear"``, needs
  0 <= s < 1, weights in [1−s, 1+s]) or ``exp(s·(2d − 1))`` (``"exp"``): >1
  for groups harder than 50 %, so hard prompts' signal is amplified. Source:
  online advantage differentiation with a difficulty prior (seed
  001_5839a3671b0b4d92.txt L59); f is not given in the abstract — both forms
  are our reading. Weights are constant within a group and positive.

  Returns:
    ``(advantages [B], info)`` with ``info["weights"] [B]``.
  """
  G.check_choice("form", form, ("linear", "exp"))
  if form == "linear" and not 0.0 <= strength < 1.0:
    raise ValueError(f"strength must be in [0, 1) for form='linear', got {strength!r}")
  a, gid, v, ng = G.prepare(advantages, group_id, valid, num_groups, rewards_name="advantages")
  G.check_shape("correct", correct, a.shape)
  c = jnp.asarray(correct).astype(a.dtype)
  acc = G.row_stats(c, gid, v, ng, ddof=0).mean
  d = 2 * (1 - acc) - 1
  w = 1 + strength * d if form == "linear" else jnp.exp(strength * d)
  adv = a * w * v
  return adv, _metrics(adv, a, v, weights=w * v, weight_mean=jnp.sum(w * v) / jnp.maximum(jnp.sum(v), 1.0))


@C.fast_path
def gagar(advantages: Array, passed: Array, scores: Array, group_id: Array, *, power: float = 1.0,
          weight: str = "rank", lambda_max: Optional[float] = None, valid: Optional[Array] = None,
          num_groups: Optional[int] = None):
  """GAGAR: sum-preserving redistribution of advantage among passing rollouts.

  Default (ours, ``lambda_max=None``): for passing rollouts of group g, ``A'_i = A_i·w_i·S_g / Σ_{j pass}
  w_j·A_j`` with ``S_g = Σ_{j pass} A_j`` (the passing sum is preserved); failing rollouts are unchanged; a
  group where ``Σ w·A`` is 0 is left unchanged.

  Weights: ``weight="rank"`` (default, ours) ``w_i = (ρ_i / n_pass)^power``, ρ_i the 1-based mid-rank of the
  grader's ``scores`` among the group's passing rollouts (lower rank, smaller weight; ``power=0`` = identity);
  ``weight="factor"`` takes ``scores`` as the quality factors ``f_i`` themselves (must be > 0 on passing rows;
  the paper's tier map, A.1–A.2: T1 top 1, other T1 ``f_runner`` 0.9, T2 tied groups ``f_max`` 0.85 → ``f_min``
  0.4 linearly, T3 ``f_low`` 0.2, is the caller's).

  ``lambda_max`` (float ≥ 1) gives the paper's Eqs. 7–8 as transcribed by a peer (below): with ``a⁺ =
  max(A, 0)`` on passing rows, ``λ = min(Σ_pass a⁺ / Σ_pass f·a⁺, λ_max)``, ``B_i = λ·f_i·a⁺_i`` (passing) or
  ``A_i`` (failing), and ``A' = B − mean_g(B)`` over the group's valid rows (0 below the cap when the A are
  group-centred). The paper's A is ``r − mean_g(r)``: pass ``grpo(..., scale="none")``; GAGAR's Flash runs
  use ``λ_max = 1.5``.

  Source: GAGAR (seed 001_5839a3671b0b4d92.txt L65; arXiv 2609.32577 Eqs. 6–8, App. A.1–A.2, read through the
  peer implementation github.com/kekmodel/mimo-verl: verl/trainer/ppo/gar.py ``redistribute``, ``factors``).

  Args:
    advantages, scores: ``[B]`` float; passed: ``[B]`` bool; group_id: ``[B]``.
    weight: ``"rank"`` or ``"factor"``.
    lambda_max: ``None`` or a finite float ``>= 1``.
  """
  G.check_choice("weight", weight, ("rank", "factor"))
  if lambda_max is not None and not (isinstance(lambda_max, (int, float)) and np.isfinite(lambda_max)
                                     and lambda_max >= 1.0):
    raise ValueError(f"lambda_max must be None or a finite float >= 1, got {lambda_max!r}")
  a, gid, v, ng = G.prepare(advantages, group_id, valid, num_groups, rewards_name="advantages")
  b = a.shape[0]
  check_mask("passed", passed, (b,))
  G.check_shape("scores", scores, (b,))
  G.check_finite("scores", scores)
  p = jnp.asarray(passed).astype(bool) & (v > 0)
  pgid = jnp.where(p, gid, ng)
  s = jnp.where(p, jnp.asarray(scores, a.dtype), 0.0)
  if weight == "factor":
    if is_concrete(s) and is_concrete(p) and not np.all(np.asarray(s)[np.asarray(p)] > 0):
      raise ValueError("scores must be > 0 on passing rows for weight='factor' (they are the quality factors f)")
    w = jnp.where(p, s, 1.0)
  else:
    rk = G.group_ranks(s, pgid, ng)
    n = jnp.maximum(rk.count.astype(a.dtype), 1.0)
    mid = rk.less.astype(a.dtype) + (rk.equal.astype(a.dtype) + 1) / 2
    w = jnp.where(p, (mid / n) ** power, 1.0)
  pf = p.astype(a.dtype)
  if lambda_max is None:
    total = G.seg_sum(a * pf, pgid, ng)[pgid]
    wtotal = G.seg_sum(a * w * pf, pgid, ng)[pgid]
    ok = p & (jnp.abs(wtotal) > 1e-12)
    adv = jnp.where(ok, a * w * total / jnp.where(ok, wtotal, 1.0), a) * v
    return adv, _metrics(adv, a, v, weights=w * pf)
  ap = jnp.maximum(a, 0.0) * pf
  num = G.seg_sum(ap, gid, ng)
  den = G.seg_sum(w * ap, gid, ng)
  ok_g = den > 1e-12
  lam = jnp.minimum(num / jnp.where(ok_g, den, 1.0), lambda_max)
  bb = jnp.where(p, lam[gid] * w * ap, a) * v
  mean_b = G.seg_sum(bb, gid, ng) / jnp.maximum(G.seg_sum(v, gid, ng), 1.0)
  adv = jnp.where(ok_g[gid], bb - mean_b[gid], a) * v
  return adv, _metrics(adv, a, v, weights=w * pf, lam=jnp.where(ok_g[gid], lam[gid], 1.0) * v)


@C.fast_path
def uniqueness(advantages: Array, correct: Array, cluster_id: Array, group_id: Array, *, alpha: float = 1.0,
               scope: str = "correct", valid: Optional[Array] = None, num_groups: Optional[int] = None):
  """Uniqueness-aware weights: ``A'_i = A_i · w_i``, ``w_i ∝ 1/f_i^α`` with ``f_i`` the size of i's strategy cluster.

  Source: "Rewarding the Rare: Uniqueness-Aware RL for Creative Problem Solving in LLMs" (arXiv 2601.08763v2,
  Sec. 3.2–3.3, Eqs. 3–5); clusters come from an LLM judge, passed here as ``cluster_id``.

  ``scope="all"`` is the paper's form: every valid rollout of a group is weighted by ``w_i = 1/f_i^α`` (Eq. 4),
  ``f_i`` = the number of valid rollouts of i's group in i's cluster (Eq. 3, the judge partitions all K
  rollouts), and ``A'_i = w_i·A_i`` (Eq. 5, with ``A`` the GRPO advantage ``(r − μ)/(σ + ε)`` of Eq. 1) — no
  renormalisation; weights lie in ``[K^−α, 1]``.

  ``scope="correct"`` (default, ours): only correct rollouts are reweighted, ``f_i`` counts the correct
  rollouts of i's cluster, and the weights ``1/f_i^α`` are renormalised to mean 1 over each group's correct
  rollouts, so equal-size clusters leave the advantages unchanged; incorrect rollouts are unchanged.

  Args:
    advantages: ``[B]`` float (e.g. ``grpo``'s). correct: ``[B]`` bool (unused for ``scope="all"``).
    cluster_id: ``[B]`` int, any values; compared only within a group. group_id: ``[B]`` int.
    alpha: ``α >= 0`` (the paper uses ``α ∈ [0, 1]``; 0 leaves ``A`` unchanged).
    scope: ``"correct"`` or ``"all"``.

  Returns:
    ``(advantages [B], info)`` with ``info["weights"] [B]``.
  """
  G.check_choice("scope", scope, ("correct", "all"))
  if not alpha >= 0.0:
    raise ValueError(f"alpha must be >= 0, got {alpha!r}")
  a, gid, v, ng = G.prepare(advantages, group_id, valid, num_groups, rewards_name="advantages")
  b = a.shape[0]
  check_mask("correct", correct, (b,))
  G.check_shape("cluster_id", cluster_id, (b,))
  c = (jnp.asarray(correct).astype(bool) if scope == "correct" else jnp.ones((b,), bool)) & (v > 0)
  key, _ = G.dense_ids(gid, jnp.asarray(cluster_id), valid=c)
  size = jax.ops.segment_sum(c.astype(a.dtype), key, num_segments=b + 1)[key]
  raw = jnp.where(c, jnp.maximum(size, 1.0) ** (-alpha), 0.0)
  if scope == "all":
    w = jnp.where(c, raw, 1.0)
  else:
    cf = c.astype(a.dtype)
    mean_w = G.seg_sum(raw, gid, ng)[gid] / jnp.maximum(G.seg_sum(cf, gid, ng)[gid], 1.0)
    w = jnp.where(c, raw / jnp.where(c, mean_w, 1.0), 1.0)
  adv = a * w * v
  return adv, _metrics(adv, a, v, weights=w * v)


@C.fast_path
def canon(rewards: Array, metric: Array, group_id: Array, *, inter_coef: float, intra_coef: float,
          valid: Optional[Array] = None, num_groups: Optional[int] = None, eps: float = 1e-6,
          std_ddof: int = 1, scale: str = "group"):
  """CANON conditional advantage: split each group by a metric, mix inter- and intra-subgroup terms.

  Each group is split by the within-group mid-rank of ``metric`` (entropy,
  length, ...) into a lower half, an upper half, and (odd n) the median
  stratum. With ``μ_s`` the mean reward of i's stratum and ``μ_g`` the group's:
  ``A_i = (intra·(r_i − μ_s) + inter·(μ_s − μ_g)) / (σ_g + ε)``. The
  inter term rewards the stratum whose metric trend helps (no presumed
  direction); the intra term picks the better response within its stratum.
  ``inter = intra = 1`` reduces to ``grpo``. Source: CANON (seed
  001_5839a3671b0b4d92.txt L193); authors' code github.com/biuboomc/CANON
  ``verl/trainer/ppo/core_algos.py``: ``A = (r − λμ_other − (1−λ)μ_own)/max_length``
  = ours with ``intra_coef=1, inter_coef=2λ, scale="none"`` on even groups
  without metric ties. Negating ``metric`` leaves A unchanged.
  """
  _check_common(eps, std_ddof, scale, "zero")
  r, gid, v, ng = G.prepare(rewards, group_id, valid, num_groups)
  b = r.shape[0]
  G.check_shape("metric", metric, (b,))
  G.check_finite("metric", metric)
  mval = jnp.where(v > 0, jnp.asarray(metric, r.dtype), 0.0)
  rk = G.group_ranks(mval, gid, ng)
  n = rk.count.astype(r.dtype)
  mid = rk.less.astype(r.dtype) + (rk.equal.astype(r.dtype) + 1) / 2
  stratum = jnp.sign(mid - (n + 1) / 2).astype(jnp.int32) + 1  # 0 low, 1 median, 2 high
  key, _ = G.dense_ids(gid, stratum, valid=v > 0)
  cnt = jax.ops.segment_sum(v, key, num_segments=b + 1)
  mu_s = (jax.ops.segment_sum(r * v, key, num_segments=b + 1) / jnp.maximum(cnt, 1.0))[key]
  st = G.row_stats(r, gid, v, ng, ddof=std_ddof)
  denom = (st.std + eps) if scale == "group" else (
      G.batch_mean_std(r, v, ddof=std_ddof)[1] + eps if scale == "batch" else 1.0)
  adv = C.safe_div(intra_coef * (r - mu_s) + inter_coef * (mu_s - st.mean), denom * jnp.ones_like(r)) * v
  return adv, _metrics(adv, r, v, stratum=stratum)


_S0 = "seed 000_3e503271be254a43.txt"
_S1 = "seed 001_5839a3671b0b4d92.txt"
_VERL_GRPO_READ = ("volcengine/verl@v0.7.0 (f9c855f7) verl/trainer/ppo/core_algos.py:265-330 "
                   "compute_grpo_outcome_advantage (the same at main b178a3cd, 2026-01-29, and in the verl 0.9.1 PyPI "
                   "wheel, core_algos.py:268-331) and :331-355 compute_grpo_vectorized_outcome_advantage (verl/utils/"
                   "groupwise.py group_mean_std: float32, a singleton mean 0 / std 1; v0.7.0 floors the variance at "
                   "epsilon, std ≥ 1e-3, and takes s2 − s1²/n; 0.9.1 :334-358 passes eps=0.0 and sums centred "
                   "squares: 'grpo' in float32); ray_trainer.py@v0.7.0:234-246 (0.9.1 :235-247: the GRPO branch passes "
                   "norm_adv_by_std_in_grpo, epsilon left at 1e-6); trainer/config/ppo_trainer.yaml@v0.7.0:81-84 "
                   "(adv_estimator gae, norm_adv_by_std_in_grpo True). #51 read-whole pass (rB): the record said 0.9.1 "
                   "was not stored and did not name 'grpo_vectorized'")
_GRPO_TWELFTH = (". Twelfth draw (#51 item 4, seed 20261217): the verl 0.9.1 PyPI wheel trainer/ppo/v1/"
                 "trainer_base.py:562-600 (_step_once: sample, _balance_batch, old log-probs, advantage), :1608-1621 "
                 "(_balance_batch pads the batch to a multiple of the dp size and the actor's mini-batch rows), "
                 "trainer/ppo/padding_utils.py:72-141, 144-210 (upsample_batch_to_divisible_size: synthetic rows "
                 "under one new pad uid, rm_scores and response_mask 0, before compute_advantage); the record said "
                 "verl has no padding rows")
_VERL07 = "volcengine/verl@v0.7.0 (f9c855f7) verl/trainer/ppo/core_algos.py"


def _verl07_same(lines091: str) -> str:
  """The v0.7.0 function is the same at main and, line for line, in the verl 0.9.1 wheel (at ``lines091``)."""
  return (f" (the same at main b178a3cd, 2026-01-29, and line for line in the verl 0.9.1 PyPI wheel, core_algos.py:"
          f"{lines091}; #51 read-whole pass (rB): the record said 0.9.1 was not stored)")
_VERL_WHITEN_READ = "; verl/utils/torch_functional.py:287-340 masked_mean (÷ (Σmask + 1e-8)), masked_var, masked_whiten"
_VERL_WHITEN_DEV = ("verl's masked_mean divides by Σmask + 1e-8, ours by Σmask (relative difference ≤ 1e-8/Σmask in "
                    "the "
                    "mean and the variance); verl raises for fewer than 2 mask tokens, ours gives 0 (one token) or "
                    "leaves zeros (none)")
_VERL_TOKEN_PLACEMENT = ("theirs: ray_trainer.compute_advantage in the driver, once per step after the rewards (and "
                         "the in-reward KL when use_kl_in_reward), on the whole batch's token_level_rewards, whitened "
                         "over every response token of the batch; ours: the advantage stage, once per step on the "
                         "step's token rewards (an outcome reward placed on the last completion token), over the "
                         "completion tokens of valid rows")
_V1_GRPO_PLACEMENT = ("; verl 0.9.1's default trainer (trainer.use_v1 true: ppo_trainer.yaml:232, main_ppo.py:183-192) "
                      "reaches the same compute_advantage through trainer/ppo/v1/utils.py:148-217 "
                      "compute_advantage_for_multi_trajectories (v1/trainer_base.py:1775-1784 passes algorithm."
                      "norm_adv_by_std_in_grpo): for 'grpo' only the final output of each {uid}_{session} (an agent "
                      "loop's last sequence) enters the group statistics and its advantage is broadcast to the "
                      "session's other outputs; = ours when each session is one row (our groups take every row of a "
                      "group_id)")
_KL_T_DEFAULT = ("in-reward KL log-probs", "kl_in_reward's logp_old and logp_ref, untempered (log softmax of the raw "
                 "logits; RLConfig.temperature does not enter)",
                 "old_log_prob and ref_log_prob at actor_rollout_ref.rollout.temperature (the actor's and the "
                 "reference's logits ÷ T: fsdp_workers.py@v0.7.0:1017, 1056 with dp_actor.py:213, 298; 0.9.1 "
                 "v1/trainer_base.py:1655, 1701); T = 1.0 in the script (rollout.yaml default), where the two agree")
_OUTCOME_PLACEMENT = ("theirs: once per step, after the rewards, on the whole batch grouped by uid (index), the "
                      "advantage broadcast over response tokens; ours: the advantage stage, once per step on the "
                      "step's rows grouped by group_id, padded rows excluded")


def _technique_rows():
  from rljax._technique import Fidelity, Technique
  from rljax.advantages import _stages as S
  return (
      Technique("grpo", "advantage", grpo, "A_i = (r_i − μ_g)/(σ_g + ε); scale group|batch|none",
                "arXiv 2402.03300; verl grpo",
                stage=S.group_estimator(grpo),
                fidelity=Fidelity("peer", f"{_VERL07}: compute_grpo_outcome_advantage",
                                  "singleton group: ours A = 0; verl mean 0, std 1, i.e. A = r/(1+ε) "
                                  "(singleton='raw')",
                                  read=_VERL_GRPO_READ + _GRPO_TWELFTH,
                                  defaults=(("eps", "1e-6", "epsilon=1e-6"), ("std", "ddof 1 (std_ddof=1)",
                                                                             "torch.std (unbiased)"),
                                            ("scale", "'group'", "norm_adv_by_std_in_grpo=True"),
                                            ("singleton", "'zero' (A = 0)", "mean 0, std 1 (A = r/(1+ε))")),
                                  placement=_OUTCOME_PLACEMENT + _V1_GRPO_PLACEMENT,
                                  deviations=(
                                      "a singleton group gets 0 (no within-group signal); singleton='raw' is verl's",
                                      "a group whose σ + ε is 0 (eps=0, equal rewards) gets 0; verl divides 0 by 0",
                                      "padded rows (valid False) are outside every group and get 0; verl v0.7.0 "
                                      "has no padding rows; verl 0.9.1's default (v1) trainer appends synthetic "
                                      "padding rows before the advantage (v1/trainer_base.py:582, 600, 1619-1621; "
                                      "trainer/ppo/padding_utils.py:144-210) under one fresh 'pad…' uid with "
                                      "rm_scores 0 and response_mask 0 (:72-141), so they form their own group and "
                                      "get A = 0 (all-zero rewards: 0/(0 + ε); one row: 0/(1 + ε)), as ours, and "
                                      "leave the real groups unchanged",
                                      "verl's second estimator in the file, adv_estimator 'grpo_vectorized', is "
                                      "float32 and in v0.7.0 floors the group variance at epsilon (std ≥ 1e-3, so a "
                                      "group whose variance is below 1e-6 gets a smaller |A| than here); 0.9.1 drops "
                                      "the floor (= ours up to float32); not built, ours is the 'grpo' form"))),
      Technique("dr_grpo", "advantage", dr_grpo, "A_i = r_i − μ_g",
                "arXiv 2503.20783; verl norm_adv_by_std_in_grpo=False",
                stage=S.group_estimator(dr_grpo),
                fidelity=Fidelity("peer", f"{_VERL07}: compute_grpo_outcome_advantage(norm_adv_by_std_in_grpo=False)",
                                  "singleton group: ours A = 0; verl A = r (singleton='raw')",
                                  read=_VERL_GRPO_READ + " (the norm_adv_by_std_in_grpo=False branch)",
                                  defaults=(("singleton", "'zero' (A = 0)", "mean 0 (A = r)"),
                                            ("estimator", "r − mean (this row)", "adv_estimator 'grpo' with "
                                             "algorithm.norm_adv_by_std_in_grpo=False (the flag reaches only that "
                                             "branch)")),
                                  placement=_OUTCOME_PLACEMENT + _V1_GRPO_PLACEMENT,
                                  deviations=("a singleton group gets 0; singleton='raw' is verl's A = r",
                                              "verl's 'grpo_vectorized' is never r − mean on verl's trainers: "
                                              "compute_advantage (ray_trainer.py@v0.7.0:234-264, 0.9.1 :235-282) "
                                              "passes norm_adv_by_std_in_grpo only on its 'grpo' branch; every other "
                                              "estimator, grpo_vectorized included, gets token_level_rewards, "
                                              "response_mask, config and index, and compute_grpo_vectorized_"
                                              "outcome_advantage (core_algos.py@v0.7.0:331-355, 0.9.1 :334-358) "
                                              "does not read config, so its own default True divides by std + ε "
                                              "whatever algorithm.norm_adv_by_std_in_grpo says; only adv_estimator "
                                              "'grpo' with the flag False is this row. #51 error-class sweep (s1b): "
                                              "the record said grpo_vectorized with the flag False is r − mean"))),
      Technique("rloo", "advantage", rloo, "A_i = r_i − mean_{j≠i} r_j = n/(n−1)(r_i − μ_g)",
                "arXiv 2402.14740; verl rloo",
                stage=S.group_estimator(rloo),
                fidelity=Fidelity("peer", f"{_VERL07}: compute_rloo_outcome_advantage",
                                  "singleton group: ours A = 0 (verl 'rloo_vectorized'); verl 'rloo' A = r "
                                  "(singleton='raw')",
                                  read="volcengine/verl@v0.7.0 (f9c855f7) verl/trainer/ppo/core_algos.py:475-525 "
                                       "compute_rloo_outcome_advantage (r·n/(n−1) − mean·n/(n−1); a singleton "
                                       "keeps r; the epsilon argument is unused) and :718-753 "
                                       "compute_rloo_vectorized_outcome_advantage (adv_estimator 'rloo_vectorized': "
                                       "(c·r − Σ_g r)/max(c − 1, 1)·(c > 1), a singleton gets 0) (both the same at "
                                       "main b178a3cd, 2026-01-29, and in the verl 0.9.1 PyPI wheel, core_algos.py:"
                                       "587-637 and :833-866). Eighth draw (#51 item 4): the vectorized variant "
                                       "and the 0.9.1 wheel were not in the record. #51 read-whole pass (rF): "
                                       "examples/rloo_trainer/run_qwen2-7b.sh@v0.7.0 (verl's RLOO run: "
                                       "adv_estimator rloo, rollout.n 5, use_kl_in_reward True, kl_penalty kl, "
                                       "kl_ctrl.kl_coef 0.001, use_kl_loss False); trainer/config/ppo_trainer.yaml"
                                       "@v0.7.0:75-108 (use_kl_in_reward False, kl_penalty kl, kl_coef 0.001)",
                                  defaults=(("singleton", "'zero' (A = 0)",
                                             "A = r ('rloo'); A = 0 ('rloo_vectorized')"),
                                            ("group size", "the step's groups (group_id)",
                                             "rollout.n = 5 (run_qwen2-7b.sh)"),
                                            ("use_kl_in_reward", "not part of the row (the kl_in_reward shaping "
                                             "stage, beta=0.001, estimator 'kl')",
                                             "True in run_qwen2-7b.sh (k1, kl_coef 0.001); ppo_trainer.yaml "
                                             "default False"),
                                            _KL_T_DEFAULT),
                                  placement="theirs: once per step, after the rewards and, in their RLOO example "
                                            "run (use_kl_in_reward True), after apply_kl_penalty subtracts "
                                            "0.001·(log π_old − log π_ref) on every response token, so the "
                                            "leave-one-out runs on score − β·Σ_t KL_t; on the whole batch grouped "
                                            "by uid (index), the advantage broadcast over response tokens; ours: the "
                                            "advantage stage, once per step on the step's rows (data.rewards, the "
                                            "sum of the token rewards when a shaping stage such as kl_in_reward "
                                            "wrote them) grouped by group_id, padded rows excluded",
                                  deviations=("a singleton group gets 0, as verl's 'rloo_vectorized'; singleton='raw' "
                                              "is verl's 'rloo' (A = r)",
                                              "verl's RLOO example run folds a k1 KL to the reference into the "
                                              "reward before the advantage (use_kl_in_reward, kl_coef 0.001); "
                                              "the row does not: add rl.shaping=kl_in_reward(beta=0.001) for "
                                              "theirs (at rollout.temperature 1.0, the script's; at T ≠ 1 verl's "
                                              "KL is between the tempered distributions, logits ÷ T on both "
                                              "forwards, ours between the untempered ones)"))),
      Technique("reinforce_pp", "advantage", reinforce_pp, "A = whiten_tokens(G_t), G_t = r_t + γG_{t+1}",
                "arXiv 2501.03262; verl reinforce_plus_plus",
                stage=S.checked(reinforce_pp, inputs={"rewards": S.token_rewards, "mask": S.completion}),
                fidelity=Fidelity(
                    "peer", f"{_VERL07}: compute_reinforce_plus_plus_outcome_advantage",
                    "mask-0 tokens inside a response carry the running return, as verl 0.9.1 (v0.7.0 and main "
                    "b178a3cd reset it there: running_return * response_mask); equal on hole-free masks; "
                    "reset_at_mask=True: v0.7.0's",
                    read=f"{_VERL07}:581-616 compute_reinforce_plus_plus_outcome_advantage (the same at main "
                         "b178a3cd, 2026-01-29)" + _VERL_WHITEN_READ + "; the verl 0.9.1 PyPI wheel (installed for "
                         "the peer benchmarks) core_algos.py:693-731: the running return is carried through mask-0 "
                         "(observation) tokens and returns are 0 there (returns[:, t] = new · m_t; running = new · m_t "
                         "+ running · (1 − m_t)), its utils/torch_functional.py:294-345 masked_mean / masked_var / "
                         "masked_whiten as v0.7.0. Eighth draw (#51 item 4): the record said 0.9.1 was not stored and "
                         "gave the v0.7.0 reset as verl's. #51 read-whole pass (rF): examples/reinforce_plus_plus_"
                         "trainer/run_qwen2-7b_math_rf.sh@v0.7.0 (adv_estimator reinforce_plus_plus, rollout.n 8, "
                         "use_kl_in_reward True, use_kl_loss False); trainer/config/ppo_trainer.yaml@v0.7.0:75-108 "
                         "(gamma 1.0, kl_penalty kl, kl_ctrl fixed, kl_coef 0.001). Fifteenth draw (#51 item 4, seed "
                         "20261220): the same script's data.train_batch_size=1024 with rollout.n=8 (and "
                         "ppo_mini_batch_size=1024: one update per batch), so its whitening pool is 8192 responses; "
                         "the record listed the group size, which the estimator does not read, and not the batch "
                         "size, which it does; the verl 0.9.1 wheel's default (v1, sync) trainer whitens the same "
                         "whole batch (v1/trainer_base.py:533-560 one _step_once of train_batch_size, "
                         "parameter_sync_step 1; :1743-1783 _compute_advantage after _balance_batch, whose padding "
                         "rows have response_mask 0, padding_utils.py:72-141, response_mask zeros at :101)",
                    defaults=(("gamma", "1.0", "algorithm.gamma = 1.0"), ("whiten_eps", "1e-8", "rsqrt(var + 1e-8)"),
                              ("train batch (the whitening pool)", "the step's valid rows (RLConfig num_prompts 32 × "
                               "group_size 8 = 256 by default)", "data.train_batch_size=1024 prompts × rollout.n 8 = "
                               "8192 responses (run_qwen2-7b_math_rf.sh), whitened together"),
                              ("variance", "unbiased", "unbiased (masked_var)"),
                              ("reset_at_mask", "False (carry through mask-0 tokens)",
                               "0.9.1: carry through (returns 0 on mask-0 tokens); v0.7.0 / main b178a3cd: reset "
                               "(running_return * response_mask[:, t])"),
                              ("use_kl_in_reward", "not part of the row (the kl_in_reward shaping stage, "
                               "beta=0.001, estimator 'kl')", "True in run_qwen2-7b_math_rf.sh (kl_penalty kl, "
                               "kl_coef 0.001 from ppo_trainer.yaml); ppo_trainer.yaml default False"),
                              ("group size", "the step's groups (not used by the estimator)",
                               "rollout.n = 8 (run_qwen2-7b_math_rf.sh)"),
                              _KL_T_DEFAULT),
                    placement=_VERL_TOKEN_PLACEMENT + "; verl's REINFORCE++ example run sets use_kl_in_reward, so "
                              "its returns sum score − 0.001·(log π_old − log π_ref) over the later tokens",
                    deviations=(
                        "none against verl 0.9.1 on the return (a mask-0 token inside a response carries the running "
                        "return through there too); v0.7.0 and main b178a3cd reset it at every mask-0 token "
                        "(written for the padding after EOS), so an earlier turn sees only its own turn's rewards: "
                        "reset_at_mask=True is that form; all agree on hole-free masks",
                        "info['returns'] is 0 outside the mask, as 0.9.1 (v0.7.0 keeps the running value there; "
                        "neither reads it)",
                        "verl's REINFORCE++ example run (run_qwen2-7b_math_rf.sh) folds a per-token k1 KL to the "
                        "reference into the token rewards (use_kl_in_reward); the row "
                        "does not: add rl.shaping=kl_in_reward(beta=0.001) for theirs (at rollout.temperature 1.0, "
                        "the script's; at T ≠ 1 verl's KL is between the tempered distributions, logits ÷ T on both "
                        "forwards, ours between the untempered ones)",
                        "the mean and variance the returns are whitened with are taken over the step's rows (256 at "
                        "RLConfig's defaults); verl's example run whitens 8192 responses together (1024 prompts × 8): "
                        "the same formula over a 32× larger pool, so the statistics (and every A) differ unless "
                        "rl.num_prompts × rl.group_size is set to 8192",
                        _VERL_WHITEN_DEV))),
      Technique("reinforce_pp_baseline", "advantage", reinforce_pp_baseline, "A = whiten(r_i − μ_g)",
                "arXiv 2501.03262; verl reinforce_plus_plus_baseline",
                stage=S.group_estimator(reinforce_pp_baseline, mask=S.completion),
                fidelity=Fidelity(
                    "peer", f"{_VERL07}: compute_reinforce_plus_plus_baseline_outcome_advantage",
                    "equal with mask [B,T] and singleton='raw' (verl: singleton mean 0); default singleton 'zero'; "
                    "without a mask ours whitens over sequences, not tokens",
                    read=f"{_VERL07}:423-471 compute_reinforce_plus_plus_baseline_outcome_advantage"
                         f"{_verl07_same('536-584')}"
                         + _VERL_WHITEN_READ + ". Per-row review g (#51): verl's example run for this estimator, "
                         "examples/reinforce_plus_plus_trainer/run_qwen2-7b_math_rf_baseline.sh@v0.7.0 (:13 "
                         "adv_estimator reinforce_plus_plus_baseline, :37 rollout.n 8, :40 algorithm.use_kl_in_reward "
                         "True, :26-28 use_kl_loss False (its kl_loss_coef 0.001 / kl_loss_type mse unused)); "
                         "trainer/config/ppo_trainer.yaml@v0.7.0:75-108 (kl_penalty kl, kl_ctrl fixed, kl_coef "
                         "0.001); ray_trainer.py@v0.7.0:1502-1508 (apply_kl_penalty before compute_advantage); a "
                         "later main (3f388066) flips the script to use_kl_loss True (k2 'mse', 0.001) and "
                         "use_kl_in_reward False; the 0.9.1 wheel ships no examples",
                    defaults=(("singleton", "'zero' (A = 0 before whitening)", "mean 0 (r kept)"),
                              ("whiten_eps", "1e-8", "rsqrt(var + 1e-8)"),
                              ("group mean", "mean over the group's valid rows", "torch.mean over the uid group"),
                              ("variance", "unbiased", "unbiased (masked_var)"),
                              ("group size", "the step's groups (group_id)",
                               "rollout.n = 8 (run_qwen2-7b_math_rf_baseline.sh:37)"),
                              ("use_kl_in_reward", "not part of the row (the kl_in_reward shaping stage, "
                               "beta=0.001, estimator 'kl')", "True in run_qwen2-7b_math_rf_baseline.sh@v0.7.0:40 "
                               "(k1, kl_coef 0.001 from ppo_trainer.yaml); ppo_trainer.yaml default False"),
                              _KL_T_DEFAULT),
                    placement="theirs: ray_trainer.compute_advantage in the driver, once per step on the whole "
                              "batch, the group (uid) mean of the summed token rewards subtracted, broadcast over "
                              "response tokens and whitened over every response token of the batch (longer "
                              "responses weigh more); in verl's example run (use_kl_in_reward True) after "
                              "apply_kl_penalty subtracts 0.001·(log π_old − log π_ref) on every response token, so "
                              "the group mean and the whitening are of score − β·Σ_t KL_t; ours: the advantage stage, "
                              "once per step, grouped by group_id, whitened over the completion tokens of valid rows "
                              "(padded rows excluded)",
                    deviations=(
                        "a singleton group gets 0 before whitening (no within-group signal); singleton='raw' is "
                        "verl's mean 0",
                        "called without a mask (Python use) it whitens over valid sequences and returns [B]; the "
                        "stage always passes the completion mask (verl's token whitening)",
                        _VERL_WHITEN_DEV,
                        "verl's example run for this estimator (run_qwen2-7b_math_rf_baseline.sh@v0.7.0) folds a k1 "
                        "KL to the reference into the token rewards before the advantage (use_kl_in_reward, kl_coef "
                        "0.001); the row does not: add rl.shaping=kl_in_reward(beta=0.001) for theirs (at "
                        "rollout.temperature 1.0, the script's; at T ≠ 1 verl's KL is between the tempered "
                        "distributions, ours between the untempered ones). Per-row review g (#51): the record had "
                        "neither the script nor its KL in the reward"))),
      Technique("remax", "advantage", remax, "A = r − r_greedy (token: Σ_{s≥t} r_s − b·m_t)",
                "arXiv 2310.10505; verl remax",
                # verl's token form: A_t = Σ_{s≥t} r_s − b on completion tokens (= r − b everywhere with an outcome
                # reward)
                stage=S.checked(remax, inputs={"rewards": S.token_rewards, "baseline_rewards": "greedy_rewards",
                                               "mask": S.completion}),
                fidelity=Fidelity(
                    "peer", f"{_VERL07}: compute_remax_outcome_advantage",
                    "token form identical; the [B] form (no mask) is r − b per sequence",
                    read=f"{_VERL07}:620-652 compute_remax_outcome_advantage{_verl07_same('735-767')}; "
                         "verl/trainer/ppo/ray_trainer.py@v0.7.0:1368-1402 (the greedy baseline rollout); the verl "
                         "0.9.1 PyPI wheel (#51 error-class sweep, s1b): trainer/ppo/ray_trainer.py:1493-1535 (the "
                         "deprecated legacy trainer, trainer.use_v1 false: the greedy baseline generated in the same "
                         "request as the samples, __do_sample__ False, its summed rm_scores = reward_baselines), "
                         "trainer/ppo/v1/trainer_base.py:1743-1784 (the default trainer's _compute_advantage fetches "
                         "uid, response_mask, rm_scores, rollout_log_probs, old_log_probs, ref_log_prob, values: no "
                         "reward_baselines; nothing under trainer/ppo/v1/ generates a greedy baseline), ray_trainer.py:"
                         "248-279 (the non-GRPO branch adds reward_baselines only when the batch has it). Per-row "
                         "review g (#51): verl's ReMax example runs, examples/remax_trainer/run_qwen2.5-3b_seq_"
                         "balance.sh and run_qwen2.5-7b_seq_balance.sh@v0.7.0 (:8 adv_estimator remax, :29 "
                         "rollout.n 4, :31-33 use_kl_in_reward True, kl_penalty kl, kl_ctrl.kl_coef 0.001, :22 "
                         "use_kl_loss False); ray_trainer.py@v0.7.0:1391-1404 (reward_baselines = reward_fn's summed "
                         "score of the greedy output, no KL; the batch then repeated rollout.n times, interleaved: "
                         "one greedy baseline per prompt for its n samples) and :1502-1508 (apply_kl_penalty on the "
                         "samples' token rewards only)",
                    defaults=(("samples per prompt", "the step's group size (one greedy rollout per prompt)",
                               "rollout.n = 4 (run_qwen2.5-{3b,7b}_seq_balance.sh:29), one greedy rollout per prompt"),
                              ("use_kl_in_reward", "not part of the row (the kl_in_reward shaping stage, "
                               "beta=0.001, estimator 'kl'; greedy_rewards untouched)",
                               "True in both ReMax scripts (:31-33: kl_penalty kl, kl_coef 0.001) on the samples' "
                               "token rewards, not on reward_baselines; ppo_trainer.yaml default False"),
                              _KL_T_DEFAULT),
                    placement="theirs: a second, greedy (do_sample=False) generation of the step's prompts before "
                              "the update, its summed reward is reward_baselines; the advantage in "
                              "ray_trainer.compute_advantage, once per step on the whole batch; ours: the greedy "
                              "rewards (greedy_rewards, a greedy rollout of the same prompts) read by the advantage "
                              "stage, once per step on the step's rows; verl 0.9.1's default trainer (trainer.use_v1 "
                              "true, ppo_trainer.yaml:232) has no greedy rollout and does not fetch "
                              "reward_baselines, so adv_estimator remax calls compute_remax_outcome_advantage "
                              "without its required reward_baselines (a TypeError): in 0.9.1 ReMax runs only on the "
                              "legacy trainer (trainer.use_v1=false)",
                    deviations=(
                        "none in the token form (returns = reverse cumsum of r·m, A = returns − b·m); called "
                        "without a mask (Python use) it returns the [B] form r − b",
                        "the peer path is verl v0.7.0's trainer or verl 0.9.1's legacy one (trainer.use_v1=false): "
                        "0.9.1's default v1 trainer cannot run adv_estimator remax (no greedy baseline, "
                        "reward_baselines never fetched)",
                        "verl's ReMax example runs fold a k1 KL to the reference into the samples' token rewards "
                        "(use_kl_in_reward, kl_coef 0.001) while the greedy baseline keeps its bare score, so their "
                        "A_t = Σ_{s≥t}(r_s − 0.001·KL_s) − b; the row does not: add rl.shaping=kl_in_reward("
                        "beta=0.001) for theirs (at rollout.temperature 1.0; at T ≠ 1 verl's KL is between the "
                        "tempered distributions). Per-row review g (#51): the record said the source sets no "
                        "hyper-parameter of this row"))),
      Technique("gae", "advantage", gae, "A_t = δ_t + γλA_{t+1}, δ_t = r_t + γV_{t+1} − V_t; returns = A + V; whiten",
                "arXiv 1506.02438; verl gae",
                # critic PPO: needs the critic's values at sampling time; info["returns"] are the critic's targets
                stage=S.checked(gae, inputs={"rewards": S.token_rewards, "values": "values", "mask": S.completion},
                                returns=True),
                fidelity=Fidelity(
                    "peer", f"{_VERL07}: compute_gae_advantage_return",
                    "ours multiplies the whitened A by the mask (verl leaves values outside it); equal on masked "
                    "tokens",
                    read=f"{_VERL07}:213-260 compute_gae_advantage_return{_verl07_same('216-263')}"
                         + _VERL_WHITEN_READ,
                    defaults=(("gamma", "1.0", "algorithm.gamma = 1.0"), ("lam", "1.0", "algorithm.lam = 1.0"),
                              ("whiten", "True", "always (masked_whiten)"), ("whiten_eps", "1e-8", "1e-8")),
                    placement="theirs: ray_trainer.compute_advantage in the driver (ray_trainer.py@v0.7.0:217-233, "
                              "0.9.1 :218-234), once per step on the whole batch after the rewards (and the in-reward "
                              "KL when use_kl_in_reward), with the critic's values computed on the rollout before the "
                              "update; returns = raw A + V are the critic's targets; A whitened over every response "
                              "token; the same branch then runs PF-PPO's reweighting when algorithm.use_pf_ppo "
                              "(default False; not part of this row); ours: the "
                              "advantage stage, once per step on the step's rows with the values recorded at sampling "
                              "time, returns in info['returns'], whitened over the completion tokens of valid rows",
                    deviations=(
                        "the whitened A is multiplied by the mask (0 outside it); verl leaves whitened values on "
                        "mask-0 tokens (its loss masks them)",
                        "values outside the mask never enter A (padding may hold NaN); verl reads them in δ_t and a "
                        "NaN there would pass through its (1 − mask) carry",
                        _VERL_WHITEN_DEV))),
      Technique("qae", "advantage", qae,
                "A_i = (r_i − Q_K(g))/(σ_g + ε), K-quantile baseline (torch.quantile linear default)",
                f"{_S0} L21; arXiv 2509.22611",
                stage=S.group_estimator(qae),
                fidelity=Fidelity(
                    "authors_code", "github.com/junkangwu/QAE: README.md (quotes its verl/trainer/ppo/"
                    "core_algos.py L315-319)",
                    "mode='authors' = their code (singleton r/(1+ε), K=1 mean); default mode='rljax', K=0.5 (theirs "
                    "0.4); interpolation='inverted_cdf' gives the abstract's exact two-regime gate",
                    read="github.com/junkangwu/QAE (branch main, commit not recorded): README.md, its quote of "
                         "verl/trainer/ppo/core_algos.py L315-319 (compute_grpo_outcome_advantage with "
                         "torch.quantile); no stored copy of the repository could be fetched in the issue #51 pass. "
                         "#51 read-whole pass (rB): the README as stored at gitblind.noratr.app/junkangwu/QAE and "
                         "skillagent.dev/skill/junkangwu/QAE (pages corpus; fetch and find_files: no snapshot): "
                         "quantile_k = config.get('quantile_k', -1.0), the quantile only for 0 < K < 1, else the mean; "
                         "'This repo only changes the DAPO recipe'; runs: recipe/qae/run_dapo_qwen2.5_32b.sh, "
                         "run_dapo_qwen3-14b-base.sh, run_dapo_qwen3-8b-base.sh = python3 -m recipe.dapo.main_dapo "
                         "++algorithm.quantile_k=0.4 (the scripts themselves not stored); verl's DAPO recipe "
                         "(volcengine/verl@v0.7.0 recipe/dapo/dapo_ray_trainer.py:229-290 the filter_groups loop, "
                         ":320-330 compute_advantage on the kept batch; run_dapo_qwen2.5_32b.sh:25-30 "
                         "enable_filter_groups=True, metric acc, max_num_gen_batches 10, n 16). Error-class sweep "
                         "(#51, s2a; launch switches): the same script :18-21 (enable_overlong_buffer True, "
                         "overlong_buffer_len 4096, overlong_penalty_factor 1.0) with reward_model.reward_manager dapo "
                         "(verl/workers/reward_manager/dapo.py:116-127: min(−(L − (L_max − 4096))/4096, 0) added to "
                         "the score, the score from math_dapo: +1 correct, −1 otherwise): the rewards the quantile "
                         "baseline is taken over are shaped by the overlong penalty in their runs, which the record "
                         "did not list (the QAE scripts are not stored; they launch this recipe's main_dapo with "
                         "++algorithm.quantile_k=0.4). Per-row review e (#51): that reward manager is not what scores "
                         "the samples at v0.7.0. trainer/config/ppo_trainer.yaml:34 selects reward_model "
                         "dp_reward_loop (use_reward_loop True); fit's generate_sequences is the agent loop "
                         "(dapo_ray_trainer.py:159; ray_trainer.py:916-936, 'sync mode is deprecated'), whose "
                         "_compute_score (experimental/agent_loop/agent_loop.py:385-393, 689-718) scores each "
                         "sample with the reward loop's DAPORewardManager, which reads "
                         "reward_model.reward_kwargs.overlong_buffer_cfg and max_resp_len "
                         "(experimental/reward_loop/reward_manager/dapo.py:33-35, 103); run_dapo_qwen2.5_32b.sh:117-120 "
                         "set reward_model.overlong_buffer.* only, so at v0.7.0 the script's reward is math_dapo's "
                         "±1 with no overlong penalty (the legacy manager that main_dapo.py:152-158 builds returns "
                         "those rm_scores unchanged, reward_manager/dapo.py:57-59). The QAE fork's verl version is not "
                         "recorded; the README's 'core_algos.py (lines ~315-319)' fits verl main of 24-27 Sep 2025 "
                         "(volcengine/verl@26a734e7: scores_tensor = torch.stack at :314, the mean at :315; at "
                         "v0.7.0 they are :316-317), where the DAPO trainer scored with the legacy manager "
                         "(26a734e7 recipe/dapo/dapo_ray_trainer.py:141-186, self.reward_fn; "
                         "verl/workers/reward_manager/dapo.py:116-122 adds the penalty), so their runs had the "
                         "penalty if the fork is of that date (an inference; the fork is not stored). Also: on stock "
                         "verl neither the DAPO trainer (v0.7.0 dapo_ray_trainer.py:323-330; 26a734e7 :311-318) nor "
                         "compute_advantage's GRPO branch (v0.7.0 ray_trainer.py:234-246; 26a734e7 :229-240) passes "
                         "config to compute_grpo_outcome_advantage, so the README's quoted lines alone read "
                         "quantile_k = −1.0 (config None) and give the mean; the README says the trainer reads "
                         "quantile_k (its changed trainer lines are not stored). Fifteenth draw (#51 item 4, seed "
                         "20261220): whether their runs filter groups is not known. The paper's models are Qwen3-8B-Base "
                         "and Qwen3-14B-Base (the README's run_dapo_qwen3-8b-base.sh / run_dapo_qwen3-14b-base.sh), and "
                         "verl's own DAPO scripts for those models set enable_filter_groups=False "
                         "(volcengine/verl@26a734e7 and @v0.7.0 recipe/dapo/run_dapo_qwen3_8b_base_npu.sh:23 and "
                         "run_dapo_qwen3_14b_base_npu.sh:23; train_prompt_bsz 16, gen_prompt_bsz 3x / 2x, n 16); only "
                         "run_dapo_qwen2.5_32b.sh:25 enables it. The record placed their advantage after the filter "
                         "and said their runs drop all-equal groups, from the 32B script alone. Seventeenth draw "
                         "(#51 item 4, seed 20261222): the group size those scripts set, n_resp_per_prompt=16 "
                         "(volcengine/verl@26a734e7 and @v0.7.0 recipe/dapo/run_dapo_qwen2.5_32b.sh:30, "
                         "run_dapo_qwen3_8b_base_npu.sh:28, run_dapo_qwen3_14b_base_npu.sh:28), reaches the "
                         "quantile's rank K·(n − 1) (torch.quantile linear: floor(rank) and the fraction); the "
                         "record did not list it",
                    defaults=(("quantile (K)", "0.5", "0.4 (README run script)"), ("eps", "1e-6", "1e-6"),
                              ("std", "unbiased (std_ddof=1)", "torch.std, unbiased"),
                              ("interpolation", "linear", "linear (torch.quantile default)"),
                              ("singleton group", "0 (mode='rljax')", "r/(1+ε): verl's mean 0, std 1"),
                              ("K = 1", "group max (mode='rljax')", "group mean"),
                              ("reward the quantile is over", "the step's rewards (rl.shaping="
                               "'overlong_penalty(buffer_len=4096)' adds theirs)", "DAPO's reward manager: +1 / −1 "
                               "(math_dapo), plus the overlong penalty min(−(L − (L_max − 4096))/4096, 0) (buffer "
                               "4096, factor 1.0, the DAPO scripts' enable_overlong_buffer True) only where the "
                               "legacy manager scores (verl main of Sep 2025, which the README's line numbers fit): "
                               "not binary for responses longer than L_max − 4096; at verl v0.7.0 as released the "
                               "reward loop scores and the scripts' overlong_buffer does not reach it "
                               "(reward_model.reward_kwargs.overlong_buffer_cfg unset): ±1 only"),
                              ("quantile_k reaching the advantage", "quantile=K (the stage's argument)",
                               "++algorithm.quantile_k=0.4; stock verl's DAPO trainer and compute_advantage pass no "
                               "config to the GRPO advantage (quantile_k = −1.0: the mean); their trainer change "
                               "is not stored"),
                              ("dynamic sampling (filter_groups)", "none in the stage (rl.filters="
                               "'zero_variance(refill=True)' adds it)", "not known for their runs (the QAE scripts "
                               "are not stored): verl's run_dapo_qwen2.5_32b.sh enable_filter_groups=True (metric "
                               "acc, max_num_gen_batches 10); verl's scripts for the paper's Qwen3-8B-Base and "
                               "Qwen3-14B-Base (run_dapo_qwen3_8b_base_npu.sh:23, run_dapo_qwen3_14b_base_npu.sh:23) "
                               "enable_filter_groups=False"),
                              ("group size n (the quantile's rank K·(n − 1))", "rl.group_size, 8 by default",
                               "n_resp_per_prompt 16 in verl's DAPO scripts for the README's three models "
                               "(run_dapo_qwen2.5_32b.sh:30, run_dapo_qwen3_8b_base_npu.sh:28, "
                               "run_dapo_qwen3_14b_base_npu.sh:28; the QAE scripts are not stored): at K = 0.4 the "
                               "rank is 6 exactly")),
                    placement="theirs: verl's GRPO outcome advantage inside the DAPO recipe's trainer, once per "
                              "step, on the batch grouped by uid: with run_dapo_qwen2.5_32b.sh's "
                              "enable_filter_groups=True it runs AFTER DAPO's dynamic-sampling filter (filter_groups: "
                              "groups whose acc has std 0 dropped, generation repeated until train_batch_size prompts "
                              "are kept, at most 10 batches), on the kept batch; verl's DAPO scripts for the paper's "
                              "Qwen3-8B/14B-Base set enable_filter_groups=False (no filter: every group reaches the "
                              "advantage, an all-equal one at A = 0); which their runs used is not known (the QAE "
                              "scripts are not stored); ours: the advantage stage, once per step on "
                              "the step's rows, grouped by group_id, padded rows (valid False) excluded; an all-equal "
                              "group gets A = 0 here and stays in the batch (rl.filters='zero_variance(refill=True)' "
                              "is theirs; the kept groups' A is the same)",
                    deviations=(
                        "default K = 0.5 (the median: the abstract names no K); pass quantile=0.4 for the README's",
                        "mode='rljax' gives a singleton group 0 (no within-group signal) and reads K = 1 as the max "
                        "(the quantile's definition); mode='authors' keeps verl's singleton rule and their mean "
                        "fallback",
                        "a group whose σ + ε is 0 (equal rewards, eps=0) gets 0 as in grpo; their code gives NaN",
                        "under verl's 32B DAPO script (enable_filter_groups=True) their runs drop all-equal groups "
                        "before the advantage (DAPO's filter_groups, metric acc) and resample; the qae stage alone keeps them at A = 0 (rl.filters='zero_variance(refill=True)' is "
                        "theirs)",
                        "whether their runs filter is not known: the QAE scripts are not stored, verl's 32B DAPO script "
                        "enables filter_groups and verl's scripts for the paper's Qwen3-8B-Base and Qwen3-14B-Base set "
                        "enable_filter_groups=False; in that form the qae stage alone (no zero_variance filter) is "
                        "theirs on every group, all-equal groups included (A = 0 in both)",
                        "an empty batch returns an empty result (theirs: not reachable, verl never calls it with "
                        "B = 0)",
                        "their runs shape the reward with DAPO's overlong penalty before the advantage (buffer 4096, "
                        "factor 1.0) where the legacy reward manager scores (verl main of Sep 2025, the date the "
                        "README's line numbers fit; the fork itself is not stored), so a long response's reward lies "
                        "between −2 and 1 and the group quantile is taken over those values; the qae stage takes "
                        "whatever rewards the step has: compose rl.shaping='overlong_penalty(buffer_len=4096)' for "
                        "that. On verl v0.7.0 as released the same scripts' reward is ±1 only (the reward loop reads "
                        "reward_model.reward_kwargs.overlong_buffer_cfg, which they do not set): the qae stage with "
                        "no overlong_penalty stage is that",
                        "the quantile reaches their advantage only through their changed trainer (not stored): on "
                        "stock verl the DAPO trainer passes no config to compute_grpo_outcome_advantage, so the "
                        "README's lines alone give the mean baseline (grpo); ours always takes quantile=K",
                        "the linear quantile depends on the group size through its rank K·(n − 1): at theirs (K = "
                        "0.4, n = 16) the rank is 6, Q is the 7th smallest reward (as interpolation='inverted_cdf', "
                        "ceil(0.4·16) = 7) and with ±1 rewards each group's baseline is −1 or +1, so only one sign "
                        "gets a non-zero advantage; at rljax's default rl.group_size 8 the rank is 2.8 and Q "
                        "interpolates (3 failures of 8: Q = −1 + 0.8·2 = 0.6), so failures and successes both get "
                        "non-zero advantages: rl.group_size=16 (or interpolation='inverted_cdf') gives their gate "
                        "(seventeenth draw, #51: not listed before)"))),
      Technique("passk", "advantage", passk, "A_i = (E[max_{S∋i} r] − ρ)/σ over k-subsets; ρ = 1 − C(n−c,k)/C(n,k)",
                f"{_S1} L169; arXiv 2508.10751",
                stage=S.group_estimator(passk),
                fidelity=Fidelity(
                    "authors_code", "github.com/RUCAIBox/Passk_Training: code/passk_adv.py (calc_adv)",
                    "ours divides by σ (authors σ + 1e-6); rewards outside {0,1}: ours exact subset-max expectation, "
                    "authors leave them unchanged",
                    read="RUCAIBox/Passk_Training@c3ba575e (2025-08-15) code/passk_adv.py:10-19 calc_adv, 21-43 "
                         "compute_advantage (verl-style, grouped by index); README.md (the closed form; 'Among its "
                         "three progressive variants, bootstrap sampling ... full sampling ... analytical "
                         "derivation'); the repository has no training scripts (no K of theirs to compare); "
                         "git ls-tree c3ba575e: README.md, code/maze_verifier.py, code/passk_adv.py, figures/ (read "
                         "whole in the #51 read-whole pass, rB). Twelfth draw (#51 item 4, seed 20261217): "
                         "calc_adv's second np.where (:18) also catches an A_pos of exactly 0 (ρ = 1), where A_neg is "
                         "0 too (C(n−c−1, k−1) = 0 when n − c < k): no effect; maze_verifier.py compute_score returns "
                         "1 / 0 only (:62-71), so the binary branch is what their maze runs take. The record said "
                         "the groups with σ ≤ 1e-6 are the all-equal and c > n − k ones, equal to theirs; "
                         "0 < σ ≤ 1e-6 also occurs (e.g. n = 64, k = 16, c = 46..48), a difference below 1e-6",
                    defaults=(("k", "required", "K, required (compute_advantage argument)"),
                              ("σ floor", "σ ≤ sigma_eps = 1e-6 → A = 0, else ÷ σ", "÷ (σ + 1e-6)"),
                              ("rewards", "any real (exact subset-max expectation)",
                               "binary: 1 → A_pos, 0 → A_neg, any other value left unchanged")),
                    placement="theirs: compute_advantage adapted to verl's advantage step, once per step on the "
                              "whole batch, summed token rewards grouped by index (uid), broadcast over "
                              "response_mask; ours: the advantage stage, once per step on the step's rows grouped by "
                              "group_id, padded rows excluded",
                    deviations=(
                        "ours divides by σ (relative difference 1e-6/σ); groups with σ ≤ sigma_eps = 1e-6 get 0: "
                        "σ = 0 (all equal, or c > n − k) gives 0 as theirs (0/(0 + 1e-6)); 0 < σ ≤ 1e-6 needs "
                        "C(n, k) ≳ 1e12 (n = 64, k = 16, c = 46 / 47 / 48: σ = 5.6e-7 / 1.9e-7 / 4.5e-8), where "
                        "theirs is not 0 but (1 − ρ)/(σ + 1e-6) ≈ 2.0e-7 / 2.9e-8 / 1.9e-9 on a correct row and "
                        "≈ −5.1e-7 / −8.1e-8 / −5.9e-9 on an incorrect one (|A| < 1e-6)",
                        "rewards outside {0, 1}: ours is the exact expectation of the k-subset max (equal to brute "
                        "force; our extension); theirs leaves such a reward as its advantage and counts it as a "
                        "failure (not in c: calc_adv :11), so ρ, σ and every other row of its group change too "
                        "(e.g. k = 2, rewards [1, 0.5, 0, 0]: theirs [0.999998, 0.5, −0.333333, −0.333333], ours "
                        "[0.894427, 0, −0.447214, −0.447214]; nineteenth draw, #51: the record named only "
                        "the non-binary row)",
                        "a group smaller than k is refused on concrete input (under jit: A = 0, counted in "
                        "info['num_groups_lt_k']); theirs divides by C(n, k) = 0",
                        "k must be a positive int (refused naming k)",
                        "the README's other two Pass@k-training variants, full sampling and bootstrap sampling (the "
                        "sampled forms whose asymptote is the analytic one), and its 'implicit reward design' "
                        "advantages are in no file of the repository (code/ holds passk_adv.py and "
                        "maze_verifier.py only): not built; passk is the analytic derivation"))),
      Technique("rank", "advantage", rank, "A_i = (midrank_i − (n+1)/2)/((n−1)/2)", f"{_S1} L229",
                stage=S.group_estimator(rank),
                fidelity=Fidelity("abstract", f"{_S1} L229 (RLRR abstract, arXiv 2601.23058)",
                                  "centred mid-ranks, ties shared, [−1, 1] scale ours; paper body not stored. A "
                                  "third-party transcription (id 552439543): normalize='std' = its 'Ranking as "
                                  "Reward' ÷ std (population), 'range' = 2 × its ÷ 1 form",
                                  read="arXiv 2601.23058v1 (page read: arxiv.org/html/2601.23058v1, pages corpus): "
                                       "title, abstract, the opening of §1 and the Figure 1 caption (sparse 0/1 "
                                       "rewards give zero intra-group variance; scalar RMs' score range drifts). "
                                       "The corpus returns only a page's opening (~2,000 characters), so the method "
                                       "(how the Ranking Reward Model's ranking becomes a reward or advantage) was "
                                       "not read. Code searched (issue #51, 2 passes): code corpus and find_repos "
                                       "'RLRR' (yale-nlp/RLRR, zstarN70/RLRR, ff-raw-war/RLRR are other work), "
                                       "'Ranking Reward Model', the title: none. #51 paper-conventions sweep (s3): "
                                       "the code corpus does hold an unattributed file (read_file id 552439543, "
                                       "repository and path not given by the index) whose docstring transcribes a "
                                       "'RankGRPO' with 'A Ranking Reward Model (RRM) producing a relative rank "
                                       "within the group r_i ∈ {1, ..., G} (1 = best)' and three rank-aware "
                                       "rewards: 'Ranking as Weight' s = exp(τ(1 − r))·s_rule, 'Ranking as "
                                       "Supplement' s = s_rule + τ tanh(r_max/r − 1), 'Ranking as Reward' s = "
                                       "(r_max − r)/(r_max − 1); then A = (s − mean s)/F_norm, 'F_norm is either 1 "
                                       "or std'; then A clipped by correctness (max(A, ξ⁻) if s_rule = 1, min(A, ξ⁺) "
                                       "if s_rule = 0) before GRPO's clipped objective; its code's τ default 0.1. "
                                       "It matches RLRR's abstract (the Ranking Reward Model, sparse and unstable "
                                       "rewards) but is a third party's reading, not the paper's text. Per-row "
                                       "review g (#51): a second, unattributed third-party implementation in the "
                                       "code index (read_file id 60248978907, 'Relative-reward shaping for "
                                       "group-based RL (RLRR). Implements Niu et al., arXiv:2601.23058', with its "
                                       "RLRRConfig, id 60383858830, 'defaults from the paper's Appendix A.1') names "
                                       "the paper's equations: HRR s_rule + τ tanh(r_max/r − 1) (Eq. 3), PRR (r_max "
                                       "− r)/(r_max − 1) (Eq. 4), A = s − mean s, ÷ (std + 1e-6) only with "
                                       "std_normalize (Eq. 1), the correctness clip (Eq. 5), and ranks from a "
                                       "hierarchical re-ranking (Eq. 6): dense ranks (1 = best, equal keys share a "
                                       "rank, r_max = the number of distinct keys) of the key (correct first, then "
                                       "floor(len/λ) for correct rows, then the raw reward, higher better); its "
                                       "defaults mode 'hrr', τ 0.1, λ 2048, ξ⁺ 1e-3, ξ⁻ −1e-3, std_normalize False "
                                       "(F_norm = 1), length_rerank True, correctness_clip True; the paper itself "
                                       "still not read",
                                  defaults=(("rank → advantage", "(midrank − (n+1)/2)/((n−1)/2) in [−1, 1] "
                                             "(normalize='range')",
                                             "not in stored paper text; the transcription's 'Ranking as Reward': "
                                             "(s − mean s)/F_norm, s = (G − r)/(G − 1) ∈ [0, 1], F_norm 1 or "
                                             "std(s) (ddof not stated): 'range' is twice its F_norm = 1 "
                                             "advantage, 'std' equals its F_norm = std one with the population "
                                             "std"),
                                            ("ties", "mid-rank, shared", "the first transcription: not stated "
                                             "(ranks 1..G); the second (Eq. 6): dense ranks, equal keys share one "
                                             "and r_max = the number of distinct keys"),
                                            ("rank key", "the reward alone",
                                             "the second transcription (Eq. 6): correct before wrong, then "
                                             "floor(len/λ) among correct rows (shorter first), then the raw "
                                             "reward; λ 2048 (its Appendix A.1 defaults)"),
                                            ("mode / τ / ξ± / F_norm", "one rank → advantage map (no rule-reward "
                                             "mix, no clip); normalize='range'",
                                             "the second transcription's defaults (its Appendix A.1): 'hrr', τ 0.1, "
                                             "ξ⁺ 1e-3, ξ⁻ −1e-3, F_norm 1"),
                                            ("singleton group", "0", "not read"),
                                            ("rule reward in the rank reward", "none (ranks of the step's "
                                             "rewards only)", "transcription: 'Weight' exp(τ(1 − r))·s_rule and "
                                             "'Supplement' s_rule + τ tanh(G/r − 1) use the verifier's 0/1 "
                                             "s_rule; τ not stated (its code: 0.1)"),
                                            ("correctness clip of A", "none",
                                             "transcription: A ≥ ξ⁻ on correct rows, A ≤ ξ⁺ on wrong ones; ξ "
                                             "values not stated"),
                                            ("ranking source", "the step's scalar rewards",
                                             "a listwise Ranking Reward Model ranking the group's responses "
                                             "(abstract)")),
                                  placement="theirs (abstract): in group-based RL (GRPO-style), the group's "
                                            "responses to a prompt are ranked (a listwise Ranking Reward Model, "
                                            "or raw evaluations turned into ranks) and the relative ranking "
                                            "replaces the absolute reward; per the transcription, the rank reward "
                                            "is group-centred (÷ 1 or its std) and clipped by correctness before "
                                            "the GRPO loss; ours: the advantage stage, once per step on the "
                                            "step's rewards, ranked within each group_id, padded rows excluded",
                                  deviations=(
                                      "the rank → advantage map (centred mid-ranks, range/std/none scale) is our "
                                      "reading: the paper's mapping was not reached; against the third-party "
                                      "transcription's 'Ranking as Reward', normalize='std' is its F_norm = std "
                                      "form (population std; its ddof is not stated) and the default 'range' "
                                      "doubles its F_norm = 1 form (in [−1, 1], not [−1/2, 1/2])",
                                      "the transcription's 'Ranking as Weight' / 'Ranking as Supplement' rewards "
                                      "(rank combined with the verifier's s_rule, τ) and its correctness clip of "
                                      "the advantage (ξ⁻, ξ⁺) are not built",
                                      "ranks are taken from the step's scalar rewards; the paper's listwise Ranking "
                                      "Reward Model is not part of rljax (a stage that writes its ranks, higher = "
                                      "better, as rewards gives the same advantages: rank is invariant to any "
                                      "increasing transform)",
                                      "with tied rewards our mid-ranks differ from the second transcription's dense "
                                      "ranks even in its PRR form: rewards (2, 2, 1, 0) give its F_norm = 1 "
                                      "advantages (0.375, 0.375, −0.125, −0.625) and ours, normalize='range', "
                                      "(2/3, 2/3, −1/3, −1); its hierarchical key (correctness, length bin) and its "
                                      "default HRR form with the ξ clip are not built. Per-row review g (#51): the "
                                      "record had the first transcription only"))),
      Technique("vote", "advantage", vote,
                "A_i = (r_i − μ_g)/max(σ_g, ε) + b·max(0, r_i − r_vote(g)), r_vote = majority answer's reward",
                f"{_S1} L135",
                stage=S.group_estimator(vote, answer_id="answer_ids"),
                fidelity=Fidelity("authors_code", "github.com/HanYiton/VAA-CSEC: YuYi/glpo/glpo_swift_plugin.py "
                                  "(_glpo_compute_advantages)",
                                  "default = theirs with eps=1e-4 (their σ floor) unless a majority rollout has "
                                  "the format reward (their R(G) never does); tied majority answers: ours "
                                  "averages, theirs takes the first; form='margin': (r − r_vote)/(σ + ε)",
                                  read="HanYiton/VAA-CSEC@e2a32547 YuYi/glpo/glpo_swift_plugin.py (stored copy, "
                                       "read_file): _compute_group_per_sample (the vote reward R(G)) and "
                                       "_glpo_compute_advantages Steps 2-7 (base, bonus); YuYi/glpo/run_glpo.sh@"
                                       "9bb6a1ff (run settings). #51 read-whole pass (rF): the plugin whole (Step 3 "
                                       "fallbacks, the module-level patch), the older copy YuYi/glpo_swift_plugin.py"
                                       "@9bb6a1ff (the same Steps 2-7), YuYi/src/rewards/zh_grammar_reward.py@"
                                       "e2a32547 (zh_gec_reward, the run's individual reward: the plugin's _score "
                                       "with the 0.3 format reward, best over references). Row review m (#51, "
                                       "per-row review): both plugin copies' _extract_answer (glpo/glpo_swift_"
                                       "plugin.py:59-79 at e2a32547, YuYi/glpo_swift_plugin.py:36-56 at 9bb6a1ff) "
                                       "count the think tags with an empty pattern, to = len(re.findall(r'', c)) "
                                       "and tc likewise (:63-64 at e2a32547, :40-41 at 9bb6a1ff), i.e. len(c) + 1 each, so perfect is never True and "
                                       "their fmt_r is always 0; their plain-text fallback ends with "
                                       "re.sub(r'[\\s\\S]*$', '', ...) (:77 / :54), i.e. ''; zh_grammar_reward.py "
                                       "extract_answer counts '<think>' / '</think>' and gives a well-formatted "
                                       "rollout 0.3. YuYi/glpo/run_glpo.sh@e2a32547 (the plugin's commit) loads "
                                       "src/rewards/zh_grammar_reward_v3.py, which the repository does not hold "
                                       "(YuYi/src has rewards/zh_grammar_reward.py only), and no file there "
                                       "registers zh_gec_reward (the e2a32547 plugin registers "
                                       "zh_gec_individual_reward and zh_gec_group_reward); YuYi/glpo/README.md "
                                       "copies glpo_swift_plugin_v3.py (not in the repository) and builds the data "
                                       "with prepare_glpo_data.py --M 4 (each prompt 4 times). The record said R(G) "
                                       "has the 0.3 format reward when a majority rollout is well formatted, and "
                                       "cited the 9bb6a1ff script only",
                                  defaults=(("eps (σ floor)", "1e-6", "GLPO_STD_EPS = 1e-4 (clamp(std, min=1e-4))"),
                                            ("std_ddof", "1", "unbiased=True"),
                                            ("bonus", "1.0", "GLPO_BONUS_SCALE = 1.0"),
                                            ("group size", "the step's groups (group_id)",
                                             "GLPO_K = 8 consecutive samples (= num_generations 8)"),
                                            ("form", "'glpo'", "the plugin's only form"),
                                            ("run_glpo.sh environment", "none",
                                             "GLPO_M=6 (read only for the log line), GLPO_ALPHA=0.5 and "
                                             "GLPO_STD_SCALE=1 (read by no code of either plugin copy), "
                                             "GLPO_GROUP_COL_IDX=1 (run_glpo.sh@9bb6a1ff; the script at e2a32547 "
                                             "sets the same but loads the absent zh_grammar_reward_v3.py: it does "
                                             "not start as released)"),
                                            ("rewards", "the step's rewards (one reward)",
                                             "reward_funcs zh_gec_reward zh_gec_group_reward, reward_weights 1.0 1.0 "
                                             "(the weights are unused by the patched advantage: column 0 is R_ij, "
                                             "column 1 R(G))"),
                                            ("format reward in r_vote", "as in the majority rollouts' rewards "
                                             "(their mean)",
                                             "never in R(G): the plugin's format check counts re.findall(r'', c) "
                                             "= len(c) + 1 think tags, so its fmt_r is 0, while zh_gec_reward "
                                             "(R_ij) adds 0.3 to a well-formatted rollout"),
                                            ("scale_rewards", "n/a", "none (ms-swift's own advantage, used only in "
                                             "the fallbacks)")),
                                  placement="theirs: a monkey-patch of ms-swift GRPOTrainer._compute_advantages, "
                                            "once per generation batch on rewards_per_func (column 1 the group "
                                            "reward R(G), column 0 the individual reward), groups = consecutive "
                                            "blocks of K; R(G) is computed in the reward function by scoring the "
                                            "majority answer; ours: the advantage stage, once per step on the "
                                            "step's rewards and answer_ids grouped by group_id, r_vote the mean "
                                            "reward of the majority answer's rollouts, padded rows excluded",
                                  deviations=(
                                      "eps defaults to 1e-6; pass eps=1e-4 for their σ floor",
                                      "r_vote is the mean reward of the rollouts giving the majority answer; theirs "
                                      "scores the answer once with the plugin's _score and no format reward (its "
                                      "format check never passes), while R_ij (zh_gec_reward) has 0.3 for a "
                                      "well-formatted rollout: a well-formatted rollout giving the majority answer "
                                      "gets a bonus of 0.3 there, here max(0, r_i − r_vote) < 0.3 (0 when every "
                                      "majority rollout is well formatted; a unanimous, well-formatted group: "
                                      "theirs 0.3 on every row, ours 0); equal when the majority rollouts' rewards "
                                      "are equal and none is well formatted",
                                      "tied majority answers: ours averages their rewards, theirs takes the first "
                                      "(Counter.most_common)",
                                      "every answer_id votes; theirs skips empty answers (and R(G) = 0 when none "
                                      "is left; a rollout without an <answer> tag is empty there, the plugin's "
                                      "plain-text fallback returning ''): give unparsable answers distinct ids to "
                                      "keep them out of the "
                                      "majority",
                                      "form='margin' ((r − r_vote)/(σ + ε)) and scale='batch'|'none' are ours",
                                      "their fallbacks: a batch whose sample count is not a multiple of GLPO_K, or "
                                      "fewer than 2 reward columns, gets ms-swift's own advantage (no bonus; "
                                      "scale_rewards none in the run); ours groups by group_id, any group sizes",
                                      "their launch script at the plugin's commit (run_glpo.sh@e2a32547) loads "
                                      "src/rewards/zh_grammar_reward_v3.py, which the repository does not hold, and "
                                      "no file there registers zh_gec_reward: it does not start as released; the "
                                      "settings above are run_glpo.sh@9bb6a1ff's (zh_grammar_reward.py)"))),
      Technique("task_normalized", "advantage", task_normalized, "A' = (A − mean_task A)/(std_task A + ε)",
                f"{_S0} L5, L55",
                stage=S.transform(task_normalized, task_id="task_id", rewards="rewards", valid="valid",
                                  num_tasks="num_tasks"),
                fidelity=Fidelity(
                    "authors_code", "github.com/Tongyi-Zhiwen/Qwen-Doc: QwenLong-L1.5/README.md "
                    "(compute_grpo_task_norm_outcome_advantage); arXiv 2512.12967 Eq. 7",
                    "theirs: (r − mean_group r)/(std(r ∈ B_task) + 1e-6) = task_normalized(grpo(scale='none'), "
                    "scale='rewards', center=False); default std of the advantages, +ε, ddof 1: ours",
                    read="Tongyi-Zhiwen/Qwen-Doc@12489b07 QwenLong-L1.5/README.md 'Task-specific Advantage "
                         "Estimation' (stored copy, read_file: the formula and compute_grpo_task_norm_outcome_"
                         "advantage: id2mean per uid, singleton 0; task2std = torch.std over the batch's rows of the "
                         "task, a singleton task 0; (r − mean)/(std + 1e-6)); 'Task-balanced Sampling' (equal "
                         "domain weights per batch); the paper PDF not re-read. #51 read-whole pass (rF): the "
                         "README whole: 'Requirements' (their trainer is verl v0.4), 'AEPO' (after the advantage "
                         "step, when aepo_entropy_low < actor/entropy_loss < aepo_entropy_high, only rows with A > 0 "
                         "and reward > 0 are kept, truncated to a multiple of the world size); the arXiv HTML "
                         "(pages corpus: arxiv.org/html/2512.12967v1, arxivlens, emergentmind) gives only the abstract. "
                         "Row review m (#51, per-row review): the row's second source, seed 000 L55, is AgentRL's "
                         "abstract, which names its code, github.com/THUDM/AgentRL; neither that code nor the paper "
                         "body (arXiv 2510.04206) was read (no snapshot, no stored file, the pages corpus returns the "
                         "abstract only). The record said AgentRL's task normalisation gives no form, from the "
                         "abstract alone, and did not name the code",
                    defaults=(("scale", "'advantages' (std of the incoming advantages)",
                               "the std of the task's rewards in the batch ('rewards')"),
                              ("center", "True (subtract the task mean of A)", "no (center=False)"),
                              ("eps", "1e-6", "epsilon = 1e-6"), ("std_ddof", "1", "torch.std, unbiased"),
                              ("group baseline", "the incoming estimator's (grpo(scale='none') for theirs)",
                               "mean over the uid group, singleton 0 (r kept)"),
                              ("norm_adv_by_std_in_grpo", "n/a", "True (False: r − mean, no task std)")),
                    placement="theirs: the advantage step of their verl trainer, once per step on the whole "
                              "batch (task-balanced: equal samples per task), grouped by uid for the mean and by "
                              "data_source for the std; ours: a transform of the advantage stage's output, once "
                              "per step on the step's valid rows, keyed by task_id",
                    deviations=(
                        "default scale='advantages', center=True: (A − mean_task A)/(std_task A + ε) (ours; AgentRL's "
                        "abstract (seed 000 L55) gives no form, and its code, github.com/THUDM/AgentRL, and paper body, "
                        "arXiv 2510.04206, were not read: whether this default is AgentRL's task advantage "
                        "normalisation is unchecked); task_normalized(grpo(r, scale='none'), task, rewards=r, "
                        "scale='rewards', center=False) is theirs (tested)",
                        "a singleton uid group: grpo gives 0, theirs keeps r (mean 0): grpo(singleton='raw') is "
                        "theirs; a task with one row then gets r/(0 + 1e-6) in both (their task2std 0)",
                        "their task-balanced sampler is a data-loader concern, not part of this row",
                        "the README's AEPO (negative-gradient clipping by the batch entropy, run after this "
                        "advantage; aepo_entropy_low / _high not given) is not built: not part of this row"))),
      Technique("key_baseline", "advantage", key_baseline, "A_i = R_i − mean{R_j : key_j = key_i}", f"{_S0} L33",
                stage=S.chosen(
                    key_baseline, "key", "task_id", {
                        "task_id": {"key": "task_id", "num_keys": "num_tasks"},
                        "answer_ids": {"key": "answer_ids", "num_keys": "batch_size"},
                        "group_id": {"key": "group_id", "num_keys": "num_groups"}},
                    inputs={"rewards": "rewards", "valid": "valid"},
                    doc="AdvEvo-MARL shared baseline ``A_i = R_i − mean{R_j : key_j = key_i}`` over the batch. The "
                        "paper's key is an agent's functional group; ours is ``key='task_id'`` (default: one baseline "
                        "per task), ``'answer_ids'`` (rows with the same extracted answer, across prompts) or "
                        "``'group_id'`` (= dr_grpo)."),
                fidelity=Fidelity("abstract",
                                  f"{_S0} L33 (AdvEvo-MARL abstract: shared mean-return baseline; arXiv 2510.01586)",
                                  "mean over rows with the same key, no std, singleton 0: ours. No AdvEvo-MARL code "
                                  "(their earlier Evo-MARL's, zhangyt-cn/Evo-MARL, has no public baseline); "
                                  "stored arXiv HTML: the abstract",
                                  read="arXiv 2510.01586v1 (page read: arxiv.org/html/2510.01586v1, pages corpus): "
                                       "title, authors, abstract ('a public baseline for advantage estimation: "
                                       "agents within the same functional group share a group-level mean-return "
                                       "baseline'); the corpus returns only a page's opening (~2,000 characters), "
                                       "so the method section (the baseline's equation) was not read; "
                                       "arxiv.org/abs/2510.01586 (same abstract). Code searched (issue #51): code "
                                       "corpus and find_string 'AdvEvo-MARL', 'public baseline': reading lists and "
                                       "summaries only, no release. #51 paper-conventions sweep (s3): the paper's "
                                       "ICLR 2026 reviews (code index, read_file id 62085690467; 'Decision: "
                                       "Reject'): review 1, 'both attackers and defenders are jointly trained "
                                       "using REINFORCE++'; review 2, 'Can this method be applied to other MARL "
                                       "algorithms, or is it strictly limited to REINFORCE++?', the baseline 'quite "
                                       "similar to ... GRPO (with the difference of not sharing weights between "
                                       "agents)'; review 1, only 3 agents, 'most groups are likely divided 2:1, in "
                                       "which case the single-agent group would only consider single-agent "
                                       "rewards'. The inherited convention: REINFORCE++ (arXiv 2501.03262) "
                                       "normalises the advantage over the global batch, (A − mean)/std; the "
                                       "paper's own equation was not read. Per-row review d (#51): the same "
                                       "authors' earlier version, Evo-MARL (arXiv 2508.03864, Pan, Zhang et al.; "
                                       "the record said no code was found), has a repository: "
                                       "zhangyt-cn/Evo-MARL@ca39bca4 (code index) README.md (OpenRLHF-based, "
                                       "'utilize parameter-sharing', core in mas-train.py), mas-train.py (three "
                                       "roles analyst → executor → verifier in one chain, the analyst also the "
                                       "attacker; one episode = the three turns of one actor, one reward at the "
                                       "last turn: ±0.5 correctness, ±1 safety; vLLM temperature 0.7), "
                                       "run_chain_ppo.sh (openrlhf.cli.train_ppo_ray --agent_func_path "
                                       "mas-train.py --advantage_estimator group_norm --n_samples_per_prompt 2 "
                                       "--normalize_reward --init_kl_coef 1e-4 --use_kl_loss; OpenRLHF itself is "
                                       "not in the stored snapshot); credit_bank.py (per-role score bank, unused: "
                                       "its calls in mas-train.py are commented out). No public / "
                                       "functional-group baseline there: "
                                       "every role's turns share the episode's return and the baseline is "
                                       "OpenRLHF's per-prompt group_norm (GRPO-like, over 2 samples), not "
                                       "REINFORCE++, so it does not settle AdvEvo-MARL's form",
                                  defaults=(("key", "'task_id' (one baseline per task)",
                                             "the agent's functional group (attackers / defenders)"),
                                            ("baseline", "mean of R over valid rows with the same key",
                                             "group-level mean return (abstract)"),
                                            ("std scaling", "none",
                                             "not stated in the stored text; the agents are trained with "
                                             "REINFORCE++ (reviews 1, 2), whose advantage is normalised over the "
                                             "global batch ((A − mean)/std, arXiv 2501.03262); whether that "
                                             "follows the public baseline is not stated"),
                                            ("base algorithm (the recipe's, not this stage's)",
                                             "the recipe's loss (e.g. PPO clip)", "REINFORCE++ (reviews)"),
                                            ("agents per functional group", "rows per key value",
                                             "3 agents per system in the experiments (review 1: 'most groups are "
                                             "likely divided 2:1')"),
                                            ("singleton key", "0 (R − R)",
                                             "not read (review 1: a one-agent group 'would only consider "
                                             "single-agent rewards')")),
                                  placement="theirs (abstract): multi-agent RL in which attacker and defender "
                                            "LLM agents are co-trained; each agent's advantage uses the mean "
                                            "return of the agents in its functional group as baseline; where in "
                                            "the step and over which episodes the mean is taken not read; ours: "
                                            "the advantage stage, once per step over the step's valid rows, one "
                                            "mean per key value (task_id, answer_ids or group_id)",
                                  deviations=(
                                      "the key is the caller's choice; rljax has no multi-agent roles, so "
                                      "the paper's functional group maps to whatever id the task puts in "
                                      "task_id (default), answer_ids or group_id (key='group_id' = dr_grpo)",
                                      "no batch normalisation after the baseline; REINFORCE++ (their trainer, per "
                                      "the reviews) whitens advantages over the global batch: "
                                      "reinforce_pp_baseline(rewards, key) (Python; the key as its group id) gives "
                                      "whiten(R − mean_key R) with rljax's REINFORCE++ whitening (unbiased var + "
                                      "1e-8); whether AdvEvo-MARL whitens after its public baseline is not in the "
                                      "stored text",
                                      "the mean is over the step's rows only and the baseline includes the row's "
                                      "own return (not leave-one-out): the abstract says 'mean-return baseline', "
                                      "its exact form was not read"))),
      Technique("difficulty_weight", "advantage", difficulty_weight, "A' = A·(1 + s(2(1 − acc_g) − 1))", f"{_S1} L59",
                stage=S.transform(difficulty_weight, correct="correct", **S.ROWS),
                fidelity=Fidelity("abstract", f"{_S1} L59 (arXiv 2505.13261; OpenReview 0xewM6o97m)",
                                  "weight f(difficulty) (linear 1 + s(2d − 1) or exp) ours. No code found; the "
                                  "stored arXiv HTML (v1, v2) gives only the abstract and §1's opening",
                                  read="arXiv 2505.13261v1 and v2 (pages read: arxiv.org/html/2505.13261v1, "
                                       "arxiv.org/html/2505.13261v2, pages corpus): title, authors, abstract "
                                       "('online advantage differentiation, computing group-wise empirical "
                                       "accuracy as a difficulty proxy to adaptively reweight advantages "
                                       "estimation, providing stronger learning signals for more challenging "
                                       "problems') and the opening of §1; openreview.net/forum?id=0xewM6o97m (the "
                                       "ICLR 2026 withdrawn version, same abstract). The corpus returns only a "
                                       "page's opening (~2,000 characters): the weighting function was not read. "
                                       "Code searched (issue #51): code corpus by title: paper notes only "
                                       "(mbeliaev1/vlm-notes lists no code). #51 paper-conventions sweep (s3): the "
                                       "paper's ICLR 2026 reviews (code index, read_file id 62307804185; 'Withdrawn'; "
                                       "the paper text itself is not stored): review 3, 'The replacement of GRPO "
                                       "std normalization with difficulty adaptive weighting is supported by "
                                       "empirical results' and 'Steep Exponential is only described verbally "
                                       "without an explicit formula', a 'Random' baseline among the weightings; "
                                       "review 4, 'online non-linear reweighting of advantages based on in-group "
                                       "accuracy'; review 1, 'During GRPO training, the weights of the advantage "
                                       "function are dynamically adjusted based on the group accuracy', the offline "
                                       "filter dropping accuracy > 0.87 or < 0.084 (review 2: [0.1, 0.87]). Thirteenth draw (#51 item 4, "
                                       "seed 20261218): pages corpus again (arxiv.org/html/2505.13261v1, v2, "
                                       "emergentmind.com/articles/2505.13261, tomesphere.com/paper/2505.13261: "
                                       "the abstract and summaries, no weighting formula) and find_string "
                                       "'2505.13261' over the code index (two paper lists, no code)",
                                  defaults=(("difficulty", "d = 1 − acc_g, acc_g = mean correct over the group",
                                             "group-wise empirical accuracy as the proxy (abstract)"),
                                            ("base advantage", "the incoming estimator's output (e.g. grpo: "
                                             "(r − μ_g)/(σ_g + ε))",
                                             "GRPO's advantage with its std normalisation replaced by the "
                                             "difficulty weight (review 3): (r − μ_g)·f"),
                                            ("form", "'linear': f = 1 + s(2d − 1)",
                                             "non-linear (review 4); a 'Steep Exponential' among the compared "
                                             "weightings, its formula not given in the paper (review 3)"),
                                            ("strength s", "0.5", "not read")),
                                  placement="theirs (abstract): in GRPO training, online, per prompt group: the "
                                            "group's empirical accuracy reweights the group's advantages (harder "
                                            "groups get larger weights); their offline difficulty filtering and "
                                            "difficulty hints are separate parts of the recipe; ours: a "
                                            "transform of the advantage stage's output, once per step on the "
                                            "step's valid rows, acc_g from the verifier's correct",
                                  deviations=(
                                      "the weight function (form='linear': 1 + s(2d − 1), weights in [1 − s, "
                                      "1 + s]; form='exp': exp(s(2d − 1)), weights in [e^−s, e^s], 0.607 to 1.649 "
                                      "at s = 0.5; thirteenth draw, #51: the record gave [1 − s, 1 + s] for both) "
                                      "and s = 0.5 are ours: the paper's function was not reached (the reviews: non-"
                                      "linear, a 'Steep Exponential' described only in words)",
                                      "the weight multiplies whatever the estimator gives; the paper replaces "
                                      "GRPO's ÷ σ by the weight (review 3): chain it after dr_grpo (or "
                                      "grpo(scale='none')) for (r − μ)·f; after the default grpo it is "
                                      "(r − μ)/(σ + ε)·f, a second difficulty factor (σ is largest at "
                                      "accuracy 1/2)",
                                      "only the online reweighting is this row; the offline U-shaped difficulty "
                                      "filter and the difficulty-hint prompts are not part of it"))),
      Technique("gagar", "advantage", gagar, "A'_i = A_i w_i Σ_pass A / Σ_pass wA (passing only)",
                f"{_S1} L65; arXiv 2609.32577",
                # passing = the task verifier's verdict; the grader's ranking scores = the step's reward
                stage=S.transform(gagar, passed=S.passed, scores="rewards", **S.ROWS),
                fidelity=Fidelity("peer", "github.com/kekmodel/mimo-verl: verl/trainer/ppo/gar.py (redistribute, "
                                  "factors: GAGAR arXiv 2609.32577 Eqs. 6-8, App. A.1-A.2)",
                                  "weight='factor', lambda_max=1.5 on grpo(scale='none') = theirs (a⁺, λ capped, B − "
                                  "mean B); tier factors f: the caller's; default: rank weights "
                                  "(midrank/n_pass)^power, no cap (ours)",
                                  read="kekmodel/mimo-verl@0d88bb36 verl/trainer/ppo/gar.py (stored copy, read_file): "
                                       "GARConfig (factor defaults, lambda_max, pass_threshold), factors (Eq. 6), "
                                       "redistribute (Eqs. 7-8), GARStep.grade / redistribute (mixed groups only, "
                                       "hacks zeroed, GRPO advantages replaced); the paper itself not read. Per-row "
                                       "review c (#51): the caller, verl/trainer/ppo/v1/trainer_base.py@0d88bb36 "
                                       "_compute_advantage (stored copy, read_file): invalid rows (is_infra or the "
                                       "sentinel score) excluded, gar_step.grade on token_level_rewards before "
                                       "the length penalty and GRPO, compute_advantage_for_multi_trajectories "
                                       "(norm_adv_by_std_in_grpo, default True), gar_step.redistribute, then, for "
                                       "adv_estimator grpo, advantage_fixes.group_size_correction "
                                       "(algorithm.group_size_correction, default True), then mask_invalid_rows; "
                                       "advantage_fixes.py group_size_correction (stored copies @5e0138b4 and "
                                       "@2343c133; no copy at 0d88bb36 is stored): each group × (1 − 1/n_ref)/(1 − 1/n_valid), n_ref = "
                                       "rollout.n, n_valid its valid sessions; identity for a full group, 0 for "
                                       "a group with one valid session",
                                  defaults=(("weight", "'rank' ((midrank/n_pass)^power)",
                                             "quality factors from the grader's tiers (weight='factor')"),
                                            ("lambda_max", "None (no cap)", "1.5"),
                                            ("power", "1.0", "none (tiers)"),
                                            ("tier factors", "the caller's scores",
                                             "f_runner 0.9, f_max 0.85, f_min 0.4, f_low 0.2"),
                                            ("pass_threshold", "the stage's passed (correct > 0.5)",
                                             "outcome score ≥ 1.0"),
                                            ("base advantage", "the incoming estimator's (e.g. grpo)",
                                             "r − mean_g(r) (no σ), replacing GRPO's on graded groups")),
                                  placement="theirs: two trainer hooks per step, a grader call on the mixed-outcome "
                                            "groups before GRPO (confirmed hacks reset to reward 0), then the "
                                            "graded groups' GRPO advantages replaced after it, broadcast to every "
                                            "row of a session; ours: a transform of the advantage stage's output, "
                                            "once per step on the step's rows grouped by group_id, passed = the "
                                            "verifier's verdict, the ranking scores = the step's rewards (no "
                                            "grader); theirs then multiply every GRPO group, GAR-redistributed ones "
                                            "included, by (1 − 1/rollout.n)/(1 − 1/n_valid) (group_size_correction, "
                                            "on by default), ours applies no such factor",
                                  deviations=(
                                      "default weights are ranks of the scores, no λ cap (ours); "
                                      "weight='factor', lambda_max=1.5 on grpo(scale='none') is theirs",
                                      "the tier → factor map (their factors(), Eq. 6) and the grader are the "
                                      "caller's; the stage ranks passing rows by their reward",
                                      "every group with a passing row is redistributed; theirs only mixed groups "
                                      "(≥ 2 valid, some pass, some fail) with a usable grader result",
                                      "confirmed hacks are not zeroed here (a reward's job)",
                                      "their trainer rescales each GRPO group after GAR by (1 − 1/n_ref)/(1 − "
                                      "1/n_valid) (advantage_fixes.group_size_correction, default on; n_ref = "
                                      "rollout.n): a graded group that lost rows to infrastructure failures gets "
                                      "its redistributed advantages scaled (e.g. 4 valid of 8: × 7/6; one "
                                      "valid: × 0); ours leaves a group with invalid rows unscaled (equal on "
                                      "full groups)"))),
      Technique("uniqueness", "advantage", uniqueness, "A'_i = A_i·w_i, w ∝ 1/|cluster(i)|^α, mean 1 over correct",
                f"{_S1} L61",
                # strategy clusters = extracted-answer classes (the paper clusters with an LLM judge)
                stage=S.transform(uniqueness, correct=S.passed, cluster_id="answer_ids", **S.ROWS),
                fidelity=Fidelity("paper_formula", "arXiv 2601.08763v2 Sec. 3, Eqs. 1, 3–5 (A' = z/f^α); paper text "
                                                   "stored in the code index (file id 61124452340)",
                                  "scope='all', alpha=α gives Eq. 5 (every rollout, f over all K, no renormalising); "
                                  "default scope='correct' (correct rows only, mean-1 weights) ours. Authors' repo "
                                  "zhiyuanhubj/Uniqueness-Aware-RL: README only",
                                  read="arXiv 2601.08763v2 Sec. 3.1 Eq. 1 (z = (r − μ)/(σ + ε)), Sec. 3.2 Eqs. 2-3 "
                                       "(the judge's partition of all K rollouts, f = cluster size), Sec. 3.3 "
                                       "Eqs. 4-5 (w = 1/f^α, α ∈ [0, 1], advantage = w·z), Sec. 3.4, Sec. 4.1 "
                                       "hyper-parameters (page read: the paper text in the code index, file id "
                                       "61124452340, offsets 0-32000). #51 read-whole pass (rF): Sec. 3.1-4.1 "
                                       "re-read (offsets 9500-25500). Row review m (#51, per-row review): the "
                                       "paper text whole (offsets 0-87339): Appendix A (offsets ~40000-46000), "
                                       "'our 3-stage strategy clustering pipeline': Stage 1 a Qwen-family judge "
                                       "groups the K solutions in prose, Stage 2 (GPT/o3) extracts the groups as "
                                       "a dict, Stage 3 (GPT/o3) converts it to a list of K integer labels; "
                                       "Appendix B.3 (every domain's reward in {0, 1}; medicine by an LLM judge's "
                                       "y/n). The record described one judge query",
                                  defaults=(("scope", "'correct' (correct rows, weights renormalised to mean 1)",
                                             "every rollout, f over all K, no renormalising ('all')"),
                                            ("alpha", "1.0", "α ∈ [0, 1]; no value found in Sec. 3-4.1"),
                                            ("group size", "the step's groups", "K = 8 rollouts per prompt"),
                                            ("base advantage", "the incoming estimator's (e.g. grpo)",
                                             "GRPO z of Eq. 1"),
                                            ("eps, σ (Eq. 1)", "the incoming estimator's (grpo: ε 1e-6, std ddof 1)",
                                             "'a small constant', value not stated; σ's ddof not stated"),
                                            ("judge", "none (answer_ids clusters)",
                                             "Qwen2.5-72B / OLMo-3-32B / Qwen3-32B for the 7B / 7B / 8B policies "
                                             "(Sec. 4.1; Sec. 3.2 says 'the 32B version'), Stage 1 of a 3-stage "
                                             "pipeline whose Stages 2-3 (GPT/o3) turn its prose grouping into K "
                                             "integer labels (Appendix A)"),
                                            ("KL", "not part of the row", "λ_KL = 0.001 (Sec. 4.1), with GRPO "
                                             "clipping (Sec. 3.4)")),
                                  placement="theirs: the GRPO advantage replaced once per step, per problem's K "
                                            "rollouts, the judge (a larger model of the same family) grouping "
                                            "all K traces in one query, then GPT/o3 extracting the groups (a dict) "
                                            "and the K labels (Appendix A, Stages 2-3); ours: a transform of the advantage stage's "
                                            "output, once per step on the step's rows grouped by group_id, the "
                                            "stage's clusters = the rows' extracted-answer classes (answer_ids)",
                                  deviations=(
                                      "default scope='correct': only correct rows are reweighted, f counts the "
                                      "correct rows of the cluster and the weights are renormalised to mean 1 "
                                      "(the paper's 'temper or normalize w within each problem' safeguard); "
                                      "scope='all' is Eq. 5",
                                      "alpha ≥ 0 is accepted (the paper: α ∈ [0, 1])",
                                      "no LLM judge: the stage clusters by extracted answer (answer_ids), a "
                                      "stand-in for the paper's strategy clusters; call uniqueness(...) with a "
                                      "judge's cluster_id for theirs"))),
      Technique("canon", "advantage", canon, "A = (intra(r − μ_s) + inter(μ_s − μ_g))/(σ_g + ε), strata by metric",
                f"{_S1} L193",
                stage=S.chosen(
                    canon, "metric", "length", {
                        "length": {"metric": lambda data: np.asarray(data.lengths, np.float32)},
                        "entropy": {"metric": S.mean_entropy}},
                    inputs={**S.GROUP}, needs={"entropy": ("entropy_behavior",)},
                    doc="CANON: strata by a metric of each row, ``metric='length'`` (completion tokens, default) or "
                        "``'entropy'`` (mean sampler entropy over the completion: the paper's main choice); "
                        "``inter_coef`` and ``intra_coef`` weigh the inter- and intra-stratum terms (the decomposition "
                        "is our reading)."),
                fidelity=Fidelity("authors_code", "github.com/biuboomc/CANON: verl/trainer/ppo/core_algos.py "
                                  "(compute_dr_entropy_per_token_group_outcome_advantage)",
                                  "authors: A = r − λμ_other − (1−λ)μ_own, /max_length, median to the upper half; "
                                  "= ours with intra=1, inter=2λ, scale='none' (even n, no ties)",
                                  read="biuboomc/CANON@7d6f814f (2026-03-16) verl/trainer/ppo/core_algos.py:369-455 "
                                       "compute_dr_entropy_per_token_group_outcome_advantage (metric: masked mean "
                                       "token entropy) and 281-367 compute_dr_length_on_mean_group_outcome_advantage "
                                       "(metric: response length); verl/trainer/ppo/ray_trainer.py:186-255 and "
                                       "dapo_ray_trainer.py:266-282 (max_length); scripts/setups.sh:9-22. Row "
                                       "review m (#51, per-row review): scripts/setups.sh whole (:44-109, python -m "
                                       "verl.trainer.ppo.main_dapo with +algorithm.alpha and +algorithm._lambda, no "
                                       "beta); verl/trainer/ppo/main_dapo.py:55 (hydra.main, config dapo_trainer); "
                                       "verl/trainer/ppo/config/dapo_trainer.yaml:185-199 (algorithm: no alpha, "
                                       "_lambda or beta key); ray_trainer.py:567 (set_struct True): composing "
                                       "dapo_trainer.yaml with setups.sh's 65 overrides (hydra-core 1.3.8, "
                                       "omegaconf 2.3.1) and reading algorithm.beta, as dapo_ray_trainer.py:275 "
                                       "does, raises ConfigAttributeError (Key 'beta' is not in struct); "
                                       "verl/workers/fsdp_workers.py:536-542 and verl/workers/actor/dp_actor.py:"
                                       "117-120, 154-157 (the entropy: entropy_from_logits of the logits ÷ "
                                       "rollout.temperature); verl/utils/torch_functional.py:118-120 (masked_mean "
                                       "÷ (Σmask + 1e-8)). The record said beta = 0.0 (the functions' default) is "
                                       "what runs, and gave the entropy metric no temperature",
                                  defaults=(("intra_coef / inter_coef", "required",
                                             "λ (_lambda, 'mu in Eq. 5') = 1.0: intra 1, inter 2λ = 2"),
                                            ("α / β", "none (α = 1, β = 0)",
                                             "alpha = 1.0 ('Eq. 8'); beta: dapo_ray_trainer.py:275 reads "
                                             "config.algorithm.beta, set by neither dapo_trainer.yaml nor setups.sh "
                                             "(#51 rI): reading the absent key raises ConfigAttributeError, so "
                                             "setups.sh as released stops at the first step's advantage; with "
                                             "+algorithm.beta=0.0 it runs at beta 0 (the functions' default, never "
                                             "reached through the trainer)"),
                                            ("scale", "'group' (÷ σ_g + ε)",
                                             "÷ max_length = max_response_length 8192 with seq-mean-token-sum, "
                                             "else 1; no σ"),
                                            ("metric", "'length'", "entropy (dr_entropy_token_budget) or length "
                                             "(dr_length_on_mean), by adv_estimator"),
                                            ("group size", "the step's groups", "n_resp_per_prompt = 16"),
                                            ("entropy metric's temperature",
                                             "none: entropy_behavior, the sampler's untempered entropy, mean Σ/n",
                                             "entropy_from_logits of logits ÷ actor_rollout_ref.rollout.temperature "
                                             "(the old-log-prob forward), masked mean Σ/(n + 1e-8); temperature = "
                                             "1.0 in setups.sh, where the two agree"),
                                            ("λ schedule", "constant (inter_coef)", "constant λ, or annealed / "
                                             "cosine-restart λ over the steps (adv_estimator …_annel, "
                                             "…_cosine_restart[_r]); setups.sh:10-16 assigns adv_estimator seven "
                                             "times, the last (…_cosine_restart_r) wins when sourced")),
                                  placement="theirs: ray_trainer.compute_advantage in the driver, once per step on "
                                            "the whole batch grouped by uid, the entropy from the rollout's "
                                            "recomputed log-probs at rollout.temperature (the old-log-prob forward "
                                            "of RayDAPOTrainer.fit, main_dapo's trainer); ours: the advantage stage, once per step on the "
                                            "step's valid rows grouped by group_id, metric = completion length or "
                                            "the sampler's mean entropy (entropy_behavior)",
                                  deviations=(
                                      "the form is A = (intra(r − μ_s) + inter(μ_s − μ_g))/(σ_g + ε); theirs = "
                                      "intra=1, inter=2λ, scale='none', times 1/max_length, for even groups with no "
                                      "metric ties (tested)",
                                      "an odd group: ours gives the median row its own stratum; theirs puts it in "
                                      "the upper half (i ≥ n//2)",
                                      "metric ties: ours splits by mid-rank (tied rows share a stratum); theirs by a "
                                      "stable sort (batch order)",
                                      "α ≠ 1 and β ≠ 0 (their asymmetric terms; the length and entropy variants "
                                      "even place α differently) are not offered",
                                      "a singleton group: ours 0; theirs r·α/max_length (means 0)",
                                      "default ÷ (σ_g + ε) (GRPO scale); theirs never divides by σ; the "
                                      "1/max_length factor is a learning-rate change left to the aggregation",
                                      "setups.sh as released stops at its first advantage step "
                                      "(dapo_ray_trainer.py:275 reads config.algorithm.beta, which no config sets: "
                                      "ConfigAttributeError, whatever adv_estimator); add +algorithm.beta=0.0 for "
                                      "the run this record compares",
                                      "the entropy metric: theirs of softmax(z/T) at rollout.temperature (1.0 in "
                                      "setups.sh: equal to ours there); ours the untempered sampler entropy: at "
                                      "T ≠ 1 the order of a group's rows by entropy, hence the strata, can differ",
                                      "their step-scheduled λ (annealed, cosine with restarts: the estimators "
                                      "…_annel and …_cosine_restart[_r], ray_trainer.py:255-290) is not built; "
                                      "inter_coef is constant",
                                      "their control estimator dr_random (setups.sh; core_algos.py:779-840: the "
                                      "halves split by the rows' batch order, not by a metric) is not a stage "
                                      "metric here; the function takes any metric array, the row order gives its "
                                      "strata (the rest of its formula was not compared)"))),
  )


TECHNIQUES = _technique_rows()
