"""Multi-reward advantage estimators: ``rewards [B, K] -> advantages [B]``.

Each reward column is first turned into a GRPO advantage with its own group
statistics (``A_k``); the estimators differ in how the K columns are weighted
and combined. Same ``(advantages, info)`` convention as the other modules.

Size: one family (multi-reward estimators); the catalog rows with their fidelity records are the last ~320 lines.
"""
from __future__ import annotations

from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from rljax import _groups as G
from rljax.advantages import _common as C
from rljax.advantages._outcome import _check_common, _grpo_core, _metrics
from rljax.types import is_concrete

Array = jax.Array

__all__ = ["gdpo", "dara", "sa_mrpo", "gd2po", "per_reward_grpo"]


def _check_multi(rewards, weights):
  shape = G.check_rank("rewards", rewards, 2)
  b, k = shape
  if k < 1:
    raise ValueError(f"rewards must have K >= 1 columns, got shape {shape}")
  dt = G.float_dtype(rewards)  # float64 rewards under x64 keep float64 weights (no silent float32 downcast)
  if weights is None:
    w = jnp.ones((k,), dt)
  else:
    if np.shape(weights) != (k,):
      raise ValueError(f"weights must have shape (K,) = ({k},) to match rewards [B, K], got {np.shape(weights)}")
    w = jnp.asarray(weights, dt)
  return b, k, w


def per_reward_grpo(rewards: Array, group_id: Array, *, valid: Optional[Array] = None,
                    num_groups: Optional[int] = None, eps: float = 1e-6, std_ddof: int = 1,
                    scale: str = "group", singleton: str = "zero"):
  """Column-wise GRPO: ``A_{i,k} = (r_{i,k} − μ_{g,k}) / (σ_{g,k} + ε)``; returns ``(A [B, K], v [B])``.

  Valid rows are those valid and finite in *every* column.
  """
  _check_common(eps, std_ddof, scale, singleton)
  b, k = G.check_rank("rewards", rewards, 2)
  rw = jnp.asarray(rewards)
  if is_concrete(rewards) and (valid is None or is_concrete(valid)):
    vals = np.asarray(rewards)
    rows = np.ones((b,), bool) if valid is None else np.asarray(valid).astype(bool)
    if not np.all(np.isfinite(vals[rows])):
      raise ValueError("rewards contains non-finite values (NaN or inf) on valid rows; mask them with `valid`")
  v_all = jnp.all(jnp.isfinite(rw), axis=1)
  if valid is not None:
    v_all = v_all & jnp.asarray(valid).astype(bool)
  cols = []
  for j in range(k):
    r, gid, v, ng = G.prepare(rw[:, j], group_id, v_all, num_groups, rewards_name=f"rewards[:, {j}]")
    cols.append(_grpo_core(r, gid, v, ng, eps=eps, std_ddof=std_ddof, scale=scale, singleton=singleton)[0])
  r0, gid, v, ng = G.prepare(jnp.zeros((b,), jnp.float32), group_id, v_all, num_groups)
  return jnp.stack(cols, axis=1), v, gid, ng


@C.fast_path
def gdpo(rewards: Array, group_id: Array, *, weights: Optional[Sequence[float]] = None,
         valid: Optional[Array] = None, num_groups: Optional[int] = None, eps: float = 1e-6,
         std_ddof: int = 1, whiten: bool = True, whiten_eps: float = 1e-8):
  """GDPO normalise-then-sum: ``A = whiten_batch(Σ_k w_k·(r_k − μ_{g,k})/(σ_{g,k} + ε))``.

  Each reward is GRPO-normalised in its own group statistics before the
  weighted sum, so no reward dominates by scale; the sum is then whitened over
  the batch's valid sequences (``(x − mean)·rsqrt(var_unbiased + 1e-8)``;
  ``whiten=False`` skips it, as TRL's ``normalize_then_sum`` may). Sources:
  seed 001_5839a3671b0b4d92.txt L5, L77, L85; verl ``gdpo``. Difference: verl
  whitens over response *tokens* (token-weighted); we whiten over sequences
  (broadcast afterwards with ``to_tokens``).

  Args:
    rewards: ``[B, K]``; weights: ``[K]`` (default ones; K mismatch raises).

  Returns:
    ``(advantages [B], info)`` with ``info["per_reward"] [B, K]``.
  """
  b, k, w = _check_multi(rewards, weights)
  per, v, _, _ = per_reward_grpo(rewards, group_id, valid=valid, num_groups=num_groups, eps=eps, std_ddof=std_ddof)
  total = per @ w
  adv = C.masked_whiten(total, v, eps=whiten_eps) if whiten else total * v
  return adv, _metrics(adv, total, v, per_reward=per)


_DARA_SCALES = ("max_ratio", "mean_one")
_DARA_CALIBRATIONS = ("positive", "symmetric")


@C.fast_path
def dara(rewards: Array, group_id: Array, *, valid: Optional[Array] = None, num_groups: Optional[int] = None,
         eps: float = 1e-6, std_ddof: int = 1, scale: str = "max_ratio", w_max: Optional[float] = 5.0,
         calibration: str = "positive", whiten: bool = True, active_tol: float = 1e-8):
  """DARA density-aware aggregation: ``A = whiten_batch(Σ_k w_k·A_k)``, ``w_k ∝ 1/sqrt(ρ_k)``.

  ``A_k`` is the GRPO advantage of reward k (``std_ddof``, ``eps``); ``ρ_k``
  = fraction of the batch's groups in which reward k is active (the group's
  ``Σ_i |A_{i,k}| > active_tol``). A sparse reward, active in few groups, has
  little advantage energy ``E_k = Σ_i A_{i,k}²``; weighting it by ``1/sqrt(ρ_k)``
  restores it. Weights are recomputed every batch.

  Default (the authors' released code, github.com/zhaihaotian/DARA
  ``math/rdgdpo/advantages.py``, method ``rdgdpo``; their main method
  ``dara_asym``):

      w_k = min(w_max, sqrt(max_j ρ_j / ρ_k))     (w_max = 5; w_k = 1 if ρ_k = 0)
      C_{i,k} = w_k·max(A_{i,k}, 0) + min(A_{i,k}, 0)      (calibration="positive")
      A_i = (S_i − mean S) / (std_{ddof=1} S + ε),  S_i = Σ_k C_{i,k}   (over the batch's valid rows)

  with sample-std group normalisation (``std_ddof=1``) and ``active_tol`` 1e-8
  as there. ``calibration="symmetric"`` (their ``dara_sym``) scales both signs:
  ``C = w·A``. The final whitening fixes the advantages' scale from batch to
  batch (without it the scale drifts with the densities).

  The abstract's form (seed 001_5839a3671b0b4d92.txt L77 gives ``w_k ∝
  1/sqrt(ρ_k)`` and no scale) is ``scale="mean_one", w_max=None,
  calibration="symmetric", whiten=False, std_ddof=0``: ``w_k = c/sqrt(ρ_k)``
  with ``c`` (ours) making the active rewards' weights average 1, a
  never-active reward's weight 0, ``A = Σ_k w_k·A_k``. It equalises the
  weighted energy ``w_k²·E_k`` exactly for population std, ε = 0 and equal
  group sizes (each active group contributes n to E_k).

  Args:
    rewards: ``[B, K]``; group_id: ``[B]``; valid: optional ``[B]``.
    scale: ``"max_ratio"`` (authors) | ``"mean_one"`` (ours, for the abstract's form).
    w_max: cap on the weights, ≥ 1, or ``None`` for no cap.
    calibration: ``"positive"`` | ``"symmetric"``.
    whiten: batch whitening of the combined advantage (ε = ``eps``, sample std).

  Returns:
    ``(advantages [B], info)`` with ``info["weights"] [K]``, ``info["density"] [K]``,
    ``info["energy"] [K]`` (of the unweighted ``A_k``), ``info["per_reward"] [B, K]``.
  """
  if scale not in _DARA_SCALES:
    raise ValueError(f"scale must be one of {_DARA_SCALES}, got {scale!r}")
  if calibration not in _DARA_CALIBRATIONS:
    raise ValueError(f"calibration must be one of {_DARA_CALIBRATIONS}, got {calibration!r}")
  if w_max is not None and not (np.isfinite(w_max) and w_max >= 1.0):
    raise ValueError(f"w_max must be None or a finite number >= 1, got {w_max!r}")
  if not (np.isfinite(active_tol) and active_tol >= 0.0):
    raise ValueError(f"active_tol must be a finite number >= 0, got {active_tol!r}")
  _check_multi(rewards, None)
  per, v, gid, ng = per_reward_grpo(rewards, group_id, valid=valid, num_groups=num_groups, eps=eps,
                                    std_ddof=std_ddof)
  present = G.seg_sum(v, gid, ng)[:ng] > 0
  n_groups = jnp.maximum(jnp.sum(present), 1)
  act = G.seg_sum(jnp.abs(per) * v[:, None], gid, ng)[:ng] > active_tol  # [ng, K]
  rho = jnp.sum(act & present[:, None], axis=0) / n_groups
  live = rho > 0
  safe = jnp.where(live, rho, 1.0)
  if scale == "max_ratio":
    w = jnp.where(live, jnp.sqrt(jnp.max(rho) / safe), 1.0)
  else:
    raw = jnp.where(live, 1.0 / jnp.sqrt(safe), 0.0)
    w = raw * jnp.maximum(jnp.sum(live), 1) / jnp.maximum(jnp.sum(raw), 1e-12)
  if w_max is not None:
    w = jnp.minimum(w, w_max)
  if calibration == "positive":
    combined = jnp.maximum(per, 0.0) @ w + jnp.sum(jnp.minimum(per, 0.0), axis=1)
  else:
    combined = per @ w
  combined = combined * v
  if whiten:
    n = jnp.sum(v)
    mean = jnp.sum(combined * v) / jnp.maximum(n, 1.0)
    std = jnp.sqrt(jnp.sum(((combined - mean) * v) ** 2) / jnp.maximum(n - 1.0, 1.0))
    adv = C.safe_div(combined - mean, std + eps) * v
  else:
    adv = combined
  return adv, _metrics(adv, combined, v, weights=w, density=rho, energy=jnp.sum(per * per * v[:, None], axis=0),
                       per_reward=per)


@C.fast_path
def sa_mrpo(rewards: Array, group_id: Array, *, reward_min=0.0, reward_max=1.0, gamma: float = 0.25,
            weights: Optional[Sequence[float]] = None, whiten: bool = True, valid: Optional[Array] = None,
            num_groups: Optional[int] = None, eps: float = 1e-6, std_ddof: int = 0):
  """SA-MRPO saturation-aware reweighting of per-reward group advantages.

      Â_k = (r_k − μ_{g,k}) / (σ_{g,k} + ε)                      (each reward standardised in its group)
      s_k = (mean_batch r_k − min_k) / (max_k − min_k)          (batch-level saturation, clipped to [0, 1])
      Ã   = Σ_k w_k (1 − s_k)^γ Â_k;   A = (Ã − mean_batch Ã) / (std_batch Ã + ε)   (``whiten``)

  An objective every rollout already satisfies gets weight 0 (γ > 0), so
  unsaturated objectives dominate; γ = 0 is GDPO. Source: SA-MRPO (seed
  001_5839a3671b0b4d92.txt L85); the paper (arXiv 2608.16072, "Learn What's
  Left, Not What's Mastered", Sec. 4.1, Eq. 1, Algorithm 1; no code released)
  gives exactly this with population std (our ``std_ddof=0`` default) and no
  ε; γ = 0.25 is its Table 1 setting (0.5 was best in its γ sweep, Table 4).
  ``gamma=1, whiten=False, std_ddof=1`` is our earlier reading ``Σ_k (1 − s_k)·grpo_k``.

  Args:
    rewards: ``[B, K]``; reward_min, reward_max: scalars or ``[K]`` bounds.
    gamma: saturation exponent, >= 0; weights: optional ``[K]`` prescribed w_k (default 1).
    whiten: the paper's final batch standardisation of the aggregate (Eq. 1).

  Returns:
    ``(advantages [B], info)`` with ``info["weights"] [K]`` (w_k (1 − s_k)^γ), ``info["saturation"] [K]``.
  """
  b, k, w0 = _check_multi(rewards, weights)
  if is_concrete(gamma) and not (np.ndim(gamma) == 0 and 0.0 <= float(gamma) < np.inf):
    raise ValueError(f"gamma must be a finite scalar >= 0, got {gamma!r}")
  if np.shape(reward_min) not in ((), (k,)) or np.shape(reward_max) not in ((), (k,)):
    raise ValueError(f"reward_min/reward_max must be scalars or shape ({k},)")
  if is_concrete(reward_max) and is_concrete(reward_min) and np.any(np.asarray(reward_max) <= np.asarray(reward_min)):
    raise ValueError("reward_max must exceed reward_min for every reward")
  per, v, _, _ = per_reward_grpo(rewards, group_id, valid=valid, num_groups=num_groups, eps=eps, std_ddof=std_ddof)
  dt = per.dtype  # the rewards' float dtype (float64 under x64): the saturation is not computed in float32
  lo = jnp.broadcast_to(jnp.asarray(reward_min, dt), (k,))
  hi = jnp.broadcast_to(jnp.asarray(reward_max, dt), (k,))
  rn = jnp.clip((jnp.where(v[:, None] > 0, jnp.asarray(rewards, dt), lo) - lo) / (hi - lo), 0.0, 1.0)
  sat = jnp.sum(rn * v[:, None], axis=0) / jnp.maximum(jnp.sum(v), 1.0)
  w = w0 * (1.0 - sat) ** gamma
  agg = per @ w
  if whiten:
    mean, std = G.batch_mean_std(agg, v, ddof=std_ddof)
    agg = C.safe_div(agg - mean, std + eps)
  adv = agg * v
  return adv, _metrics(adv, adv, v, weights=w, saturation=sat, per_reward=per)


@C.fast_path
def gd2po(rewards: Array, group_id: Array, *, weights: Optional[Sequence[float]] = None,
          valid: Optional[Array] = None, num_groups: Optional[int] = None, eps: float = 1e-6,
          std_ddof: int = 1, conflict_tol: float = 1e-6, query_weight: bool = True,
          ratio_threshold: Optional[float] = None, whiten: bool = True, whiten_eps: float = 1e-8):
  """GD²PO: drop sign-conflicting rollouts, reweight queries by consensus, whiten the kept rows.

  With per-dimension GRPO advantages ``A_{i,k}``, rollout i is in conflict if
  two dimensions with ``|A| > conflict_tol`` have opposite signs; with
  ``ratio_threshold = τ`` (the authors' soft "ratio conflict" variant, τ = 0.2
  in their code's default, 0.8 in their script) only if also ``|Σ_k A_{i,k}| / (Σ_k |A_{i,k}| + 1e-8) < τ``.
  Conflicting rollouts get 0 (``info["keep"]``). The query weight ``q_g`` is the
  fraction of the group's valid rollouts kept (its reward consensus), and
  ``A_i = keep_i · q_g(i) · Σ_k w_k·A_{i,k}``, then (``whiten=True``) whitened
  over the kept rows, ``(x − mean)·rsqrt(var_unbiased + 1e-8)``, as the
  authors' ``use_masked_whiten_in_gdpo`` does (``query_weight=False``: q = 1).
  Kept rollouts' per-dimension advantages (``info["per_reward"]``) are those
  of plain per-dimension GRPO. Source: GD²PO (seed 001_5839a3671b0b4d92.txt
  L5); authors' code github.com/Qwen-Applications/GD2PO,
  tool-calling/verl/trainer/ppo/ray_trainer.py (``gdpo_filter_group_ratio``,
  ``gdpo_filter_ratio_conflict_group_ratio``). Differences: the authors whiten
  over response tokens (token-weighted), we over kept sequences; their sign
  test uses 1e-8 on token-summed advantages, ours ``conflict_tol`` on ``A``.

  Returns:
    ``(advantages [B], info)``: ``keep [B]`` bool, ``query_weight [B]``, ``per_reward [B, K]``.
  """
  if ratio_threshold is not None and not 0.0 <= ratio_threshold <= 1.0:
    raise ValueError(f"ratio_threshold must be None or in [0, 1], got {ratio_threshold!r}")
  b, k, w = _check_multi(rewards, weights)
  per, v, gid, ng = per_reward_grpo(rewards, group_id, valid=valid, num_groups=num_groups, eps=eps,
                                    std_ddof=std_ddof)
  pos = jnp.any(per > conflict_tol, axis=1)
  neg = jnp.any(per < -conflict_tol, axis=1)
  conflict = pos & neg
  if ratio_threshold is not None:
    ratio = jnp.sum(per, axis=1) / (jnp.sum(jnp.abs(per), axis=1) + 1e-8)
    conflict = conflict & (jnp.abs(ratio) < ratio_threshold)
  keep = ~conflict & (v > 0)
  kf = keep.astype(per.dtype)  # the rewards' float dtype (a float32 keep ratio would round q under x64)
  q = (G.seg_sum(kf, gid, ng)[gid] / jnp.maximum(G.seg_sum(v.astype(per.dtype), gid, ng)[gid], 1.0) if query_weight
       else jnp.ones((b,), per.dtype))
  total = kf * q * (per @ w)
  adv = C.masked_whiten(total, kf, eps=whiten_eps) if whiten else total
  return adv, _metrics(adv, adv, v, keep=keep, query_weight=q * v, per_reward=per,
                       frac_conflict=jnp.sum(v * (1 - kf)) / jnp.maximum(jnp.sum(v), 1.0))


_S1 = "seed 001_5839a3671b0b4d92.txt"


def _technique_rows():
  from rljax._technique import Fidelity, Technique
  from rljax.advantages import _stages as S
  return (
      Technique("gdpo", "multi_reward", gdpo, "A = whiten(Σ_k w_k (r_k − μ_{g,k})/(σ_{g,k} + ε))",
                f"{_S1} L5, L77, L85; verl gdpo",
                stage=S.multi_reward(gdpo),
                fidelity=Fidelity(
                    "authors_code", "github.com/NVlabs/GDPO: trl-GDPO/trl-0.18.0-gdpo/trl/trainer/grpo_trainer.py "
                    "(GDPO branch); verl-GDPO ray_trainer.py",
                    "eps=1e-4 gives their group step; their batch step divides by std + 1e-4, ours multiplies by "
                    "rsqrt(var + 1e-8); their verl variant whitens over tokens, unweighted, singleton r/(1+ε)",
                    read="NVlabs/GDPO@b080e63d (2026-01-09) trl-GDPO/trl-0.18.0-gdpo/trl/trainer/grpo_trainer.py:"
                         "1222-1248 (the README's 'line 1222': per-reward group mean/std over num_generations, "
                         "/(std + 1e-4), weighted nansum, batch mean/std, /(std + 1e-4)), 481-484 (apply_gdpo); "
                         "verl-GDPO/verl/trainer/ppo/ray_trainer.py:175-199 (correctness + format GRPO summed, "
                         "masked_whiten over response tokens) with verl-GDPO/verl/trainer/ppo/core_algos.py:111-155; "
                         "trl-GDPO/open-r1/recipes/Qwen2.5-1.5B-Instruct/gdpo_gsm8k/config.yaml (run settings), "
                         "run_gsm8k_gdpo.sh, src/open_r1/gsm8k.py:100-125, 192-195 (three rewards: correctness, int, "
                         "format); verl-GDPO/train_gdpo.sh (adv_estimator gdpo, rollout.n 4, train_batch_size 512). "
                         "#51 read-whole pass (rF): upstream verl's 'gdpo' (the verl 0.9.1 PyPI wheel "
                         "core_algos.py:361-468 compute_gdpo_outcome_advantage: per key of algorithm.gdpo_reward_keys "
                         "compute_grpo_outcome_advantage (:268-331, eps 1e-6, singleton mean 0 / std 1, "
                         "norm_adv_by_std_in_grpo), weighted by gdpo_reward_weights (default ones), then "
                         "masked_whiten over response tokens; ray_trainer.py:260-263; config/algorithm.py:668-673). "
                         "Tenth draw (#51 item 4, seed 20261215): ray_trainer.py:187-279 compute_advantage (its "
                         "generic branch passes no norm_adv_by_std_in_grpo), v1/utils.py:148-176 and "
                         "v1/trainer_base.py:1743-1783 (the default trainer's caller), main_ppo.py:183-192; "
                         "the record gave norm_adv_by_std_in_grpo as a verl 0.9.1 setting of 'gdpo'",
                    defaults=(("eps (group std)", "1e-6", "1e-4 (TRL); 1e-6 (verl-GDPO)"),
                              ("std_ddof", "1", "torch.std, unbiased"),
                              ("weights", "ones", "reward_weights, default ones (verl-GDPO: unweighted sum of two)"),
                              ("whiten", "True, (x − mean)·rsqrt(var + 1e-8) over valid sequences",
                               "TRL: (x − mean)/(std + 1e-4) over the batch's sequences; verl-GDPO: masked_whiten "
                               "over response tokens"),
                              ("num_generations", "the step's group sizes (group_id)",
                               "16 (gdpo_gsm8k config); rollout.n 4 (verl-GDPO train_gdpo.sh)"),
                              ("reward count K", "any K ≥ 1 (K = 1: GRPO then whitening)",
                               "TRL: 3 (gsm8k.py); GDPO only when K > 1, else the plain GRPO branch (no batch step); "
                               "verl-GDPO: 2 (correctness, format); verl 0.9.1: the gdpo_reward_keys"),
                              ("norm_adv_by_std_in_grpo", "none (always ÷ σ_{g,k} + ε)",
                               "verl 0.9.1: True, always: compute_gdpo_outcome_advantage's own default; "
                               "compute_advantage's generic branch (ray_trainer.py:248-279) does not pass "
                               "algorithm.norm_adv_by_std_in_grpo, so a False there never reaches it (only "
                               "a direct call with False gives r_k − μ_{g,k}, no σ)"),
                              ("train batch", "the step's rows", "verl-GDPO: train_batch_size 512 prompts; TRL: "
                               "per_device_train_batch_size 16, gradient_accumulation_steps 4"),
                              ("KL penalty in the reward", "none (the stage reads reward_components)",
                               "verl-GDPO train_gdpo.sh: use_kl_loss False, so the fit loop applies apply_kl_penalty "
                               "(ray_trainer.py:753-759, :99-124; algorithm.kl_ctrl.kl_coef 0.001): token_level_rewards "
                               "= token_level_scores − 0.001·KL; the 'gdpo' branch reads token_level_scores_correctness "
                               "and token_level_scores_format (:177-178), so the penalty never reaches its advantage "
                               "(error-class sweep #51, s2b); TRL: no KL in the reward")),
                    placement="theirs (TRL): _generate_and_score_completions, once per generation batch, on the "
                              "rewards gathered from every process, groups = consecutive blocks of num_generations, "
                              "before the local slice; ours: the advantage stage, once per step on the step's "
                              "reward_components [B, K], grouped by group_id, padded rows excluded, the [B] result "
                              "broadcast over completion tokens",
                    deviations=(
                        "eps defaults to 1e-6 (GRPO's); pass eps=1e-4 for the TRL code's group step",
                        "the batch step is (x − mean)·rsqrt(var + whiten_eps) (verl's masked_whiten); the TRL code "
                        "divides by std + 1e-4 (a relative difference ≤ 1e-4/std); no argument gives theirs exactly",
                        "their verl variant whitens over response tokens (longer responses weigh more) and gives a "
                        "singleton group r/(1+ε); ours whitens over valid sequences and gives a singleton 0",
                        "a non-finite reward component on a valid row is refused; TRL turns None/NaN into 0 "
                        "(nan_to_num)",
                        "upstream verl 0.9.1 'gdpo' (compute_gdpo_outcome_advantage) is the verl-GDPO form made "
                        "general: weighted by gdpo_reward_weights, per-reward GRPO with norm_adv_by_std_in_grpo, "
                        "masked_whiten over response tokens (token-weighted), a singleton group r/(1 + ε); ours: the "
                        "same per-reward step and weights, whitened over valid sequences (equal to theirs before "
                        "the whitening for groups of ≥ 2; tested); its norm_adv_by_std_in_grpo=False mode "
                        "(no σ per reward) is not built, and no verl setting reaches it: the trainer's "
                        "compute_advantage passes algorithm.norm_adv_by_std_in_grpo on its 'grpo' branch only "
                        "(ray_trainer.py:235-247), not to the registered estimators (:248-279)",
                        "the verl 0.9.1 path read is the legacy trainer's (trainer.use_v1 False, main_ppo_v0); "
                        "the default trainer (use_v1: true, ppo_trainer.yaml:232) computes the advantage in "
                        "v1/trainer_base.py:1743-1783 on the fields uid, response_mask, rm_scores, "
                        "rollout_log_probs, old_log_probs, ref_log_prob, values only (:1745), so "
                        "compute_gdpo_outcome_advantage's reads of batch['prompts'] and of the "
                        "gdpo_reward_keys columns (core_algos.py:419, 429) find nothing there",
                        "K = 1: TRL applies GDPO only when there is more than one reward (else its GRPO branch, "
                        "no batch step); ours still whitens the single GRPO column over the batch"))),
      Technique("dara", "multi_reward", dara,
                "A = whiten(Σ_k [w_k max(A_k, 0) + min(A_k, 0)]), w_k = min(5, sqrt(max ρ / ρ_k)) "
                "(ρ = active-group density)",
                f"{_S1} L77; authors' code github.com/zhaihaotian/DARA math/rdgdpo/advantages.py",
                stage=S.multi_reward(dara),
                fidelity=Fidelity("authors_code", "github.com/zhaihaotian/DARA: math/rdgdpo/advantages.py (rdgdpo, "
                                  "dara_asym)",
                                  read="zhaihaotian/DARA@04591020 math/rdgdpo/advantages.py (stored copy, read_file): "
                                       "standardize, normalize_responses, support_statistics, compute_advantages "
                                       "method 'rdgdpo' (config epsilon, tau, w_max, calibration, static_weights), "
                                       "METHODS (grpo, gdpo, dvao, gd2po_hard, rdgdpo); math/scripts/train.py "
                                       "(stored copy, read_file: the launcher's METHODS dara_asym / dara_sym / "
                                       "static_asym / static_sym and its overrides); read whole (#51, rG): "
                                       "math/rdgdpo/verl_adapter.py (the "
                                       "estimator registration: epsilon forced to 1e-6, the algorithm.rdgdpo config "
                                       "passed), math/runtime/overlay/verl/trainer/ppo/filter_groups.py "
                                       "(filter_groups_by_reward, criterion seq_reward) and the overlay "
                                       "ray_trainer.py's opening (PORT-11: the filter runs before the advantage). The "
                                       "repository's second, tool-calling implementation (the BFCL runs, read_file "
                                       "in the #51 seventh draw): vendor/verl/verl/trainer/ppo/core_algos.py@54024d0e "
                                       "compute_dara_combined_advantage and compute_grpo_outcome_advantage, "
                                       "docs/ALGORITHMS.md@878c983d (dara_asym / dara_sym through "
                                       "algorithm.dara.calibration, 'token whitening'). Per-row review o (#51): the "
                                       "overlay ray_trainer.py's fit, PORT-4 (its filter_groups branch, between "
                                       "the reward and compute_advantage): each round generates data.gen_batch_size "
                                       "= 3·512//2 = 768 prompts (train.py), the kept groups are concatenated, and "
                                       "once 512 are collected select_uid_groups keeps the first train_batch_size "
                                       "= 512 uids in first-seen order (the surplus kept groups are discarded, "
                                       "'informative_groups_discarded') and compute_advantage runs on those; "
                                       "fewer than 512 after max_num_gen_batches rounds raises ValueError; "
                                       "math/configs/machine.example.json (filter_cap 2, train.py's "
                                       "max_num_gen_batches). Seventeenth draw (#51 item 4, seed 20261222): "
                                       "math/README.md@04591020 'Installation': the example profile's rollout "
                                       "settings are the 1.5B runs' (memory 0.9, 256 sequences, up to 2 "
                                       "generation batches); 'For the 4B models we used 0.8, 160 and 4' (the "
                                       "filter cap 4 for Qwen3-4B-Instruct-2507 / -Thinking-2507; the r1-7b runs' "
                                       "cap is not stated)",
                                  defaults=(("eps", "1e-6", "epsilon = 1e-6 (group std and the final std)"),
                                            ("std_ddof", "1", "correction=1"),
                                            ("active_tol", "1e-8", "tau = 1e-8"),
                                            ("w_max", "5.0", "w_max = 5.0"),
                                            ("calibration", "'positive'", "'positive' (config default)"),
                                            ("scale", "'max_ratio'", "sqrt(max ρ / ρ_k)"),
                                            ("whiten", "True", "normalize_responses, always"),
                                            ("group size", "the step's groups", "rollout.n = --group-size, 16 "
                                             "(train.py)"),
                                            ("zero-variance filter (not this stage's)", "compose zero_variance",
                                             "filter_groups enable True, metric seq_reward, max_num_gen_batches 2 "
                                             "for the 1.5B runs, 4 for the 4B models (train.py: the machine "
                                             "profile's filter_cap, 2 in machine.example.json; README: 'For the 4B "
                                             "models we used ... 4'); rounds of gen_batch_size 3·512//2 = 768 "
                                             "prompts until 512 kept groups, the first 512 (uid first-seen order) "
                                             "kept and the surplus discarded; fewer than 512 after 2 rounds (4 for "
                                             "the 4B models) raises ValueError")),
                                  placement="theirs: compute_advantages on the full update batch before optimizer "
                                            "micro-batching, once per step, grouped by prompt uid, two channels "
                                            "(correctness + format or length), after the dynamic-sampling group "
                                            "filter (filter_groups.py, criterion seq_reward: a group whose total "
                                            "reward is uniform is dropped even when its channels vary, so ρ_k is "
                                            "over the kept groups, and of those only the first train_batch_size "
                                            "= 512 in uid first-seen order across the step's generation rounds "
                                            "of 768 prompts: the surplus kept groups are discarded before the "
                                            "advantage); ours: the advantage stage, once per "
                                            "step on the step's reward_components [B, K], grouped by group_id, "
                                            "padded rows excluded, ρ_k over the groups with a valid row (a group "
                                            "with varying channels and a constant total counts unless a composed "
                                            "filter drops it)",
                                  deviations=(
                                      "a group with one valid row gives 0 in each channel; theirs raises ('Each "
                                      "prompt needs at least two responses')",
                                      "any number of reward channels; theirs (math/) exactly two (correctness plus "
                                      "format or length); their tool-calling code takes K channels (a third, "
                                      "length, in configs/three_rewards.json)",
                                      "their tool-calling implementation (vendor/verl core_algos.py "
                                      "compute_dara_combined_advantage, docs/ALGORITHMS.md) differs from the math/ "
                                      "one that ours follows: the final normalisation is token whitening (mean and "
                                      "sample variance over all valid response tokens, ÷ sqrt(var + 1e-8): a long "
                                      "response weighs more) where ours and math/ normalise each response once "
                                      "(÷ std + ε); a group with one response keeps r / (1 + 1e-6) per channel "
                                      "(compute_grpo_outcome_advantage: mean 0, std 1), ours 0; the token whitening "
                                      "is not built",
                                      "their static_weights control (fixed weights; the launcher's static_asym / "
                                      "static_sym: [1, 5]) is not offered; scale='mean_one' and w_max=None are ours",
                                      "their advantages.py also holds the comparison methods grpo, gdpo, "
                                      "gd2po_hard and dvao (Σ_k w_k (r_k − μ_k) / Σ_k w_k σ_k per group, "
                                      "base_weights 0.5 / 0.5); dvao is not built (gdpo and gd2po are rows here)",
                                      "computed in the inputs' float dtype; theirs float32"))),
      Technique("sa_mrpo", "multi_reward", sa_mrpo,
                "A = whiten(Σ_k w_k (1 − s_k)^γ Â_k), s_k = batch-mean normalised reward k",
                f"{_S1} L85; arXiv 2608.16072",
                stage=S.multi_reward(sa_mrpo),
                fidelity=Fidelity("paper_formula", "arXiv 2608.16072 (SA-MRPO) Sec. 4.1 Eq. 1, Algorithm 1 (paper "
                                  "text; no code released)",
                                  "defaults = the paper's (γ=0.25 as its Table 1, population std, batch whitening); "
                                  "ours adds ε to each std and clips each row's normalised reward to [0, 1] before "
                                  "the batch mean (not s_k after it)",
                                  read="arXiv 2608.16072 Sec. 3 (mean/std: population), Sec. 4.1 (A_k, s^(k), w̃_k = "
                                       "w_k(1 − s^(k))^γ, Eq. 1 batch standardisation), Algorithm 1, Sec. 5.1 "
                                       "(G = 8), Sec. 5.5 and Table 4 (γ = 0.25 is Table 1's SA-MRPO_2obj) (page "
                                       "read: the paper text in the code index, file id 59225745322, offsets "
                                       "6000-54000; per-row review o (#51): the whole text, offsets 0-56082: no "
                                       "appendix, no code link). Eighteenth draw (#51 item 4, seed 20261223): "
                                       "Sec. 5.1 (offset 29000-30000) says 'a global batch size of 256', Sec. 5.5 "
                                       "'a batch size of 256', neither with a unit; the record said '256 prompts'; "
                                       "the γ of Table 1's 3-objective and 7B runs and of Tables 2-3 is not stated "
                                       "(Table 4's caption ties γ = 0.25 to SA-MRPO_2obj only)",
                                  defaults=(("gamma", "0.25", "0.25 (Table 1, 2-objective runs; Table 4 sweeps "
                                                              "0-1, 0.5 best on average; not stated for the "
                                                              "other runs)"),
                                            ("weights", "ones", "w_k prescribed (no values stated in Sec. 4-5 as read)"),
                                            ("reward_min / reward_max", "0 / 1", "the attainable bounds (their "
                                                                                  "rewards lie in [0, 1])"),
                                            ("std_ddof", "0 (population)", "population std (Sec. 3)"),
                                            ("eps", "1e-6 added to each std", "none"),
                                            ("whiten", "True", "Eq. 1, always"),
                                            ("group size / batch", "the step's groups",
                                             "G = 8 rollouts per prompt (Sec. 5.1; Sec. 5.5: 8 rollouts per problem), "
                                             "'a global batch size of 256' (Sec. 5.1; Sec. 5.5 'a batch size of "
                                             "256'): the paper does not say whether 256 counts prompts or "
                                             "responses (verl's data.train_batch_size counts prompts: 256 × 8 = "
                                             "2048 rows per whitening if so)")),
                                  placement="theirs: the advantage construction of a verl GRPO step, once per "
                                            "policy update on the batch of B queries × G rollouts, s^(k) from the "
                                            "current batch; ours: the advantage stage, once per step on the step's "
                                            "reward_components [B, K] grouped by group_id, s_k over valid rows",
                                  deviations=(
                                      "ε = 1e-6 is added to each group std and to the batch std; the paper divides "
                                      "by σ (a group with equal rewards would give 0/0 there, 0 here)",
                                      "each row's normalised reward (r − min)/(max − min) is clipped to [0, 1] before "
                                      "the batch mean, not s_k after it: with rewards outside the bounds the two "
                                      "differ (rewards −1 and 1 in bounds [0, 1]: s_k = 0.5 here, the paper's "
                                      "s^(k) = 0); the paper assumes rewards within the bounds, where both agree",
                                      "a singleton group gives 0 in each column (the paper has G ≥ 2)",
                                      "float64 under x64: the saturation and the weights were float32 before "
                                      "issue #51's pass (fixed, tested)"))),
      Technique("gd2po", "multi_reward", gd2po, "A = whiten_kept(keep_i·q_g·Σ_k w_k A_{i,k}), keep = no sign conflict",
                f"{_S1} L5",
                stage=S.multi_reward(gd2po),
                fidelity=Fidelity("authors_code", "github.com/Qwen-Applications/GD2PO: tool-calling/verl/trainer/ppo/"
                                  "ray_trainer.py",
                                  "authors whiten over kept tokens, ours over kept rows; sign tolerance "
                                  "conflict_tol=1e-6 (authors 1e-8 on token sums); ratio_threshold selects their soft "
                                  "rule",
                                  read="Qwen-Applications/GD2PO@f1ad765b (2026-06-15) tool-calling/verl/trainer/ppo/"
                                       "ray_trainer.py:215-241 (active rewards by env: WITHCORRECT, WITHFORMAT on, WITHLENGTH off by "
                                       "default; the correctness_length scripts export 1 / 0 / 1, the "
                                       "correctness_length_format scripts 1 / 1 / 1), "
                                       "243-317 (_compute_active_gdpo_advantages, _get_mixed_sign_conflict_mask, "
                                       "_apply_gdpo_keep_mask, _compute_gdpo_group_keep_ratio), 319-360 (ratio "
                                       "conflict), 451-519 (gdpo, gdpo_filter_group_ratio, gdpo_filter_ratio_conflict_"
                                       "group_ratio); tool-calling/verl/trainer/ppo/core_algos.py:250-310 (per-reward "
                                       "GRPO); tool-calling/scripts/correctness_length/train_gd2po_{hard,snr}.sh. "
                                       "Fifteenth draw (#51 item 4, seed 20261220): the documented launch does not "
                                       "start as released. tool-calling/README.md:49-68 runs "
                                       "scripts/correctness_length/train_hard.sh, train_snr.sh, train_gdpo.sh and "
                                       "scripts/correctness_length_format/train_hard.sh, train_snr.sh; only "
                                       "train_gd2po_hard.sh, train_gd2po_snr.sh (and correctness_length/"
                                       "train_gdpo.sh) exist at f1ad765b (git ls-tree); README.md:35-41 puts the "
                                       "data in dataset/rlla_4K/ while every script reads "
                                       "${REPO_ROOT}/dataset/rlla_4k (train_gd2po_hard.sh:30, train_gd2po_snr.sh:31"
                                       "), which does not exist on a case-sensitive file system; the top-level "
                                       "README.md:45 names train_gd2po_hard.sh. The record cited the scripts' values "
                                       "without saying this. Sixteenth draw (#51 item 4, seed 20261221): the "
                                       "whitening pool, data.train_batch_size=512 in all four gd2po scripts "
                                       "(correctness_length/ and correctness_length_format/ train_gd2po_hard.sh:39, "
                                       "train_gd2po_snr.sh:42; rollout.n=4 at :60 / :63; ppo_mini_batch_size=128 "
                                       "at :47 / :50 splits only the update), and ray_trainer.py:1556-1563 (fit "
                                       "calls compute_advantage once on the whole generated batch)",
                                  defaults=(("eps", "1e-6", "1e-6 (compute_grpo_outcome_advantage)"),
                                            ("std_ddof", "1", "torch.std, unbiased"),
                                            ("weights", "ones", "none (an unweighted sum of the active rewards)"),
                                            ("reward channels", "the stage's reward_components",
                                             "correctness + length (scripts/correctness_length: WITHFORMAT=0, "
                                             "WITHLENGTH=1) or all three (correctness_length_format); the code's "
                                             "default without the scripts: correctness + format"),
                                            ("conflict_tol", "1e-6 on A", "1e-8 on the token-summed A"),
                                            ("ratio_threshold", "None (the hard rule)",
                                             "gdpo_filter_ratio_conflict_threshold = 0.2 in the code, TAU = 0.8 in "
                                             "train_gd2po_snr.sh; the hard script uses none"),
                                            ("ratio eps", "1e-8, on the per-reward A: Σ_k A_k / (Σ_k |A_k| + 1e-8)",
                                             "gdpo_filter_ratio_conflict_eps = 1e-8 (yaml, train_gd2po_snr.sh:39), "
                                             "on the token sums: Σ_k A_k·L / (Σ_k |A_k|·L + 1e-8) = Σ_k A_k / "
                                             "(Σ_k |A_k| + 1e-8/L) (ray_trainer.py:263, 342-346)"),
                                            ("query_weight", "True", "group keep ratio, always on in both variants"),
                                            ("whiten", "True, over kept rows",
                                             "use_masked_whiten_in_gdpo = True, over kept tokens"),
                                            ("group size", "the step's groups", "rollout.n = 4 (scripts)"),
                                            ("train batch (the whitening pool)", "the step's rows (RLConfig "
                                             "num_prompts 32 × group_size 8 = 256 by default)",
                                             "data.train_batch_size=512 prompts × rollout.n 4 = 2048 responses "
                                             "per step (all four gd2po scripts): the masked whitening's mean and "
                                             "variance over all their kept tokens at once"),
                                            ("norm_adv_by_std_in_grpo", "none (each reward's A is ÷ (σ + ε))",
                                             "True (ppo_trainer.yaml:155; no script sets it): read in fit "
                                             "(ray_trainer.py:1552-1554) and passed to compute_advantage (:1561), "
                                             "which hands it to every gdpo branch (:447, 459, 480, 515) and so to "
                                             "each per-reward compute_grpo_outcome_advantage (:259, 336); False "
                                             "(A = r − mean, no σ) is not built (error-class sweep #51, s2b)"),
                                            ("KL penalty in the reward", "none",
                                             "use_kl_in_reward False (ppo_trainer.yaml:158; scripts leave it): "
                                             "token_level_rewards = token_level_scores (:1542-1548); the gdpo "
                                             "branches read the token_level_scores_* channels anyway (:231-235)")),
                                  placement="theirs: ray_trainer.compute_advantage in the driver, once per step on "
                                            "the whole batch grouped by uid, the per-reward token scores written by "
                                            "the reward step; ours: the advantage stage, once per step on the step's "
                                            "reward_components [B, K] grouped by group_id, padded rows excluded, "
                                            "the [B] result broadcast over completion tokens",
                                  deviations=(
                                      "whitening over kept rows; theirs over kept response tokens (longer kept "
                                      "responses weigh more, verl's masked_mean ÷ (n + 1e-8))",
                                      "the whitening pool: theirs whitens the kept tokens of the whole "
                                      "512-prompt × 4 batch (2048 responses, train_gd2po_*.sh:39 / :42); "
                                      "ours the kept rows of the step (256 by default): equal only when the "
                                      "step holds their batch (rl.num_prompts=512, rl.group_size=4, one "
                                      "token per row)",
                                      "the sign test is |A| > conflict_tol = 1e-6 on the per-reward advantage; "
                                      "theirs > 1e-8 on its token sum A·L (conflict_tol=1e-8 is theirs for L = 1)",
                                      "the ratio rule's ε: ours 1e-8 added to Σ_k |A_k|; theirs 1e-8 added to the "
                                      "token sums Σ_k |A_k|·L, i.e. 1e-8/L on Σ_k |A_k| (ray_trainer.py:263, 342-346): "
                                      "the ratios differ by a relative ≤ 1e-8/Σ_k |A_k| and agree at L = 1 "
                                      "(eighteenth draw, #51 item 4: the record gave both as 1e-8)",
                                      "weights apply to the reward dimensions (ours); theirs sums the active "
                                      "dimensions unweighted",
                                      "a singleton group: each dimension gives 0 (theirs r/(1+ε)); the query weight "
                                      "counts valid rows only",
                                      "ratio_threshold=None (the hard rule) is the default; the snr rule is "
                                      "ratio_threshold=τ (their code 0.2, their script 0.8)",
                                      "their repository's second application, safe-alignment/ (two reward "
                                      "models, useful and harmless; scripts/run_gd2po_hard.sh, run_gd2po_snr.sh "
                                      "with SNR_THRESHOLD 0.8), has its own copy of the rules "
                                      "(safe-alignment/verl/trainer/ppo/ray_trainer.py:300-470) whose "
                                      "gdpo_filter_ratio_conflict_eps defaults to 1e-6 (tool-calling's 1e-8); "
                                      "only the tool-calling copy was read line by line",
                                      "their documented tool-calling launch does not start as released: the README's "
                                      "train_hard.sh / train_snr.sh are not in the repository (the scripts are "
                                      "train_gd2po_hard.sh / train_gd2po_snr.sh), and its data directory "
                                      "dataset/rlla_4K/ is not the scripts' dataset/rlla_4k; the values above are "
                                      "the scripts' (run by their real names, the data under dataset/rlla_4k)"))),
  )


TECHNIQUES = _technique_rows()
