"""Issue #51 item 4, tenth draw (seed 20261215), slice b: an independent re-audit of five in-full rows.

Rows drawn: oprl, vcrl, grpo, gdpo, entropy_bonus.

Held (2): vcrl, grpo; their "= theirs" claims are checked below against float64 NumPy transcriptions of the cited
lines (vcrl: the reviews' p = σ²/σ²_max, even and odd G; grpo: verl compute_grpo_outcome_advantage at v0.7.0 and
its 'grpo_vectorized' variance floor).

Not held (3), each error fixed in the record and checked here:

- ``oprl``: three things on the path of Tongyi-Character@dfee104e's istar_rloo run were not in the record.
  (1) The invalid-action penalty: use_invalid_action_penalty True, invalid_action_penalty_coef 0.1 (ppo_trainer.yaml:
  57-58, run_sokoban.sh:53-54, run_webshop.sh:50-51), applied at ray_trainer.py:1271-1276 by
  apply_invalid_action_penalty (:204-239): an invalid-action step row's episode score (token_level_scores, the
  trajectory's episode_rewards on the row's last token, reward_manager/episode.py:79-100) is lowered by 0.1 before
  episode_rloo_reward; rm_scores are untouched (the penalty goes to a summed copy). (2) istar_norm is not a batch
  max-norm: update_rm_eto is Dispatch.DP_COMPUTE_PROTO (istar/rm_fsdp_workers.py:351-365), so each of the 8
  data-parallel ranks divides its own shard by its own max |r| + 1e-6 (the record said "batch max"). (3) adjust_batch
  (agent_system/multi_turn_rollout/utils.py:71-108, mode 'copy', ray_trainer.py:1158) duplicates random step rows to
  a multiple of 128.
- ``gdpo``: the record gave verl 0.9.1's norm_adv_by_std_in_grpo as a 'gdpo' setting ("True (False: r_k − μ_{g,k})").
  compute_advantage's generic branch (ray_trainer.py:248-279) never passes algorithm.norm_adv_by_std_in_grpo to a
  registered estimator (only its 'grpo' branch does, :235-247), so compute_gdpo_outcome_advantage always runs with its
  own default True. Also: the 0.9.1 path read is the legacy trainer's; the default v1 trainer (use_v1: true)
  fetches only uid / response_mask / rm_scores / ... (v1/trainer_base.py:1745), none of what the per-key path reads.
- ``entropy_bonus``: the record said ours equals TRL's bonus "under token_mean" for every loss_type, and that verl uses
  loss_agg_mode "as ours". Ours divides by the step batch's token count in every micro-batch; that is TRL's cispo /
  dapo / vespo (Σ H ÷ num_items_in_batch, grpo_trainer.py:3168) and verl 0.9.1's global batch_num_tokens, but TRL's
  grpo / sapo / bnpo / dr_grpo / luspo take each micro-batch's own token mean ÷ gradient_accumulation_steps (:3171) and
  verl v0.7.0's dp_actor each micro-batch's own token mean × 1/gradient_accumulation (dp_actor.py:465-467, 522;
  global_batch_info is empty on that path): a mean of micro-batch means.

No implementation bug found. Each numeric reference is a float64 NumPy transcription of the cited lines, written for
these tests (not copied from the sources).
"""
import math

import jax
import jax.numpy as jnp
import numpy as np

import rljax.advantages as A
from _fidelity import defaults as _defaults, fid as _fid, record as _record


# ----------------------------------------------------------------------------------------------------------------
# grpo (held): verl v0.7.0 core_algos.py:265-328 compute_grpo_outcome_advantage, :331-355 the vectorized variant


def _verl_grpo(scores, index, epsilon=1e-6, norm_adv_by_std_in_grpo=True):
  """compute_grpo_outcome_advantage: a singleton group gets mean 0 / std 1, else mean and torch.std (unbiased)."""
  scores = np.asarray(scores, np.float64).copy()
  groups = {}
  for i, g in enumerate(index):
    groups.setdefault(g, []).append(scores[i])
  stats = {g: ((0.0, 1.0) if len(v) == 1 else (np.mean(v), np.std(v, ddof=1))) for g, v in groups.items()}
  for i, g in enumerate(index):
    mean, std = stats[g]
    scores[i] = (scores[i] - mean) / (std + epsilon) if norm_adv_by_std_in_grpo else scores[i] - mean
  return scores


def _verl_group_mean_std(scores, gidx, eps, centred):
  """verl/utils/groupwise.py group_mean_std: v0.7.0 var = (s2 − s1²/n)/max(n − 1, 1) (centred=False), 0.9.1 sums
  centred squares (centred=True); std = sqrt(max(var, eps)); a singleton group mean 0, std 1."""
  g = int(gidx.max()) + 1
  count = np.bincount(gidx, minlength=g).astype(np.float64)
  s1 = np.bincount(gidx, scores, minlength=g)
  mean = s1 / np.maximum(count, 1.0)
  if centred:
    var_num = np.bincount(gidx, (scores - mean[gidx]) ** 2, minlength=g)
  else:
    var_num = np.bincount(gidx, scores * scores, minlength=g) - s1 * s1 / np.maximum(count, 1.0)
  std = np.sqrt(np.maximum(var_num / np.maximum(count - 1.0, 1.0), eps))
  single = count <= 1.0
  return np.where(single, 0.0, mean), np.where(single, 1.0, std)


def test_grpo_equals_verl_grpo_and_the_singleton_rule_is_the_recorded_one():
  rng = np.random.default_rng(20261215)
  index = np.array([0, 0, 0, 0, 1, 1, 1, 2, 3, 3])
  r = rng.normal(size=10)
  r[8:] = 0.7  # an all-equal group: 0 / (0 + ε) = 0 on both sides
  theirs = _verl_grpo(r, index)
  with jax.enable_x64(True):
    raw, _ = A.grpo(r, index, singleton="raw")
    zero, _ = A.grpo(r, index)
  np.testing.assert_allclose(np.asarray(raw), theirs, rtol=1e-12, atol=1e-14)  # singleton='raw' is verl's
  np.testing.assert_allclose(np.asarray(zero)[index != 2], theirs[index != 2], rtol=1e-12, atol=1e-14)
  assert float(zero[7]) == 0.0 and np.isclose(theirs[7], r[7] / (1 + 1e-6), rtol=1e-12)  # r/(1+ε) vs 0
  d = _defaults("grpo")
  assert d["eps"] == ("1e-6", "epsilon=1e-6") and d["singleton"][1] == "mean 0, std 1 (A = r/(1+ε))"


def test_grpo_vectorized_v070_variance_floor_and_091_without_it():
  index = np.array([0, 0, 0, 0, 1, 1, 1])
  r = np.array([0.0, 1e-4, 0.0, 1e-4, 0.2, 0.9, 0.4])  # group 0: variance 3.3e-9 < 1e-6
  with jax.enable_x64(True):
    ours = np.asarray(A.grpo(r, index)[0])
  m07, s07 = _verl_group_mean_std(r, index, 1e-6, centred=False)  # v0.7.0: eps=epsilon floors the variance
  v07 = (r - m07[index]) / (s07[index] + 1e-6)
  m09, s09 = _verl_group_mean_std(r, index, 0.0, centred=True)    # 0.9.1: eps=0.0
  v09 = (r - m09[index]) / (s09[index] + 1e-6)
  np.testing.assert_allclose(ours, v09, rtol=1e-12, atol=1e-14)
  assert np.all(np.abs(v07[:4]) < np.abs(ours[:4]) / 10)  # the floor std ≥ 1e-3 shrinks |A| of a near-flat group
  np.testing.assert_allclose(v07[4:], ours[4:], rtol=1e-12)
  assert any("std ≥ 1e-3" in d and "0.9.1 drops the floor" in d for d in _fid("grpo").deviations)


# ----------------------------------------------------------------------------------------------------------------
# vcrl (held): p = σ²/σ²_max with σ² = k(G−k)/(G(G−1)), σ²_max = G/(4(G−1)) (even G), (G+1)/(4G) (odd G)


def _vcrl_p(k, g):
  var = k * (g - k) / (g * (g - 1))
  var_max = g / (4 * (g - 1)) if g % 2 == 0 else (g + 1) / (4 * g)
  return var / var_max


def test_vcrl_score_is_p_for_even_g_and_lower_for_odd_g():
  from rljax.filters import vcrl  # pylint: disable=import-outside-toplevel
  for g in range(2, 10):
    rewards, gid = [], []
    for k in range(g + 1):
      rewards += [1.0] * k + [0.0] * (g - k)
      gid += [k] * g
    with jax.enable_x64(True):
      keep, stats = vcrl(np.asarray(rewards), np.asarray(gid), num_groups=g + 1, threshold=0.8)
    score = np.asarray(stats["group_score"])
    p = np.array([_vcrl_p(k, g) for k in range(g + 1)])
    if g % 2 == 0:
      np.testing.assert_allclose(score, p, rtol=1e-12, atol=1e-15)
    else:
      np.testing.assert_allclose(score, p * (g * g - 1) / (g * g), rtol=1e-12, atol=1e-15)  # 4k(G−k)/G² vs /(G²−1)
      assert score.max() < 1.0 and np.isclose(p.max(), 1.0)
    np.testing.assert_array_equal(np.asarray(stats["group_keep"]), score >= 0.8)
    np.testing.assert_array_equal(np.asarray(keep), (score >= 0.8)[np.asarray(gid)])
  f = _fid("vcrl")
  assert any("equal to their p for even G, lower for odd G" in d for d in f.deviations)
  assert _defaults("vcrl")["threshold κ"][1] == "0.3 for the first 20 steps, then 0.8 (reviews of the paper text)"


# ----------------------------------------------------------------------------------------------------------------
# gdpo (not held): the verl 0.9.1 caller never passes norm_adv_by_std_in_grpo to 'gdpo'


def _grpo_tokens(scores, index, eps=1e-6, norm_adv_by_std_in_grpo=True):
  return _verl_grpo(scores, index, eps, norm_adv_by_std_in_grpo)


def _verl091_gdpo(components, index, weights, norm_adv_by_std_in_grpo=True):
  """core_algos.py:361-468 with its own default norm_adv_by_std_in_grpo=True; per key GRPO, weighted sum (the
  masked_whiten over tokens is left out: the pre-whitening sum is what is compared)."""
  return sum(w * _grpo_tokens(components[:, k], index, 1e-6, norm_adv_by_std_in_grpo)
             for k, w in enumerate(weights))


def _verl091_compute_advantage(components, index, weights, adv_estimator, norm_adv_by_std_in_grpo):
  """ray_trainer.py:187-282: the 'grpo' branch passes norm_adv_by_std_in_grpo (:235-247); the generic branch builds
  adv_kwargs from token_level_rewards, response_mask, config, index (+ non_tensor_batch, batch for gdpo) and calls
  the registered function (:248-279), which then runs with its own defaults."""
  if adv_estimator == "grpo":
    return _grpo_tokens(components.sum(1), index, 1e-6, norm_adv_by_std_in_grpo)
  adv_kwargs = {"index": index}  # no norm_adv_by_std_in_grpo key
  return _verl091_gdpo(components, weights=weights, **adv_kwargs)


def test_gdpo_verl091_ignores_algorithm_norm_adv_by_std_in_grpo():
  rng = np.random.default_rng(7)
  comps = rng.integers(0, 3, size=(12, 2)).astype(np.float64)
  index = np.repeat(np.arange(3), 4)
  w = (1.0, 0.5)
  on = _verl091_compute_advantage(comps, index, w, "gdpo", True)
  off = _verl091_compute_advantage(comps, index, w, "gdpo", False)
  np.testing.assert_array_equal(on, off)  # the setting never reaches compute_gdpo_outcome_advantage
  grpo_on = _verl091_compute_advantage(comps, index, w, "grpo", True)
  grpo_off = _verl091_compute_advantage(comps, index, w, "grpo", False)
  assert not np.allclose(grpo_on, grpo_off)  # while 'grpo' does read it
  with jax.enable_x64(True):
    raw, _ = A.gdpo(comps, index, weights=w, whiten=False)
  np.testing.assert_allclose(np.asarray(raw), on, rtol=1e-12, atol=1e-14)  # ours = their only reachable mode
  direct_off = _verl091_gdpo(comps, index, w, norm_adv_by_std_in_grpo=False)  # a direct call only
  assert not np.allclose(direct_off, on)
  theirs = _defaults("gdpo")["norm_adv_by_std_in_grpo"][1]
  assert theirs.startswith("verl 0.9.1: True, always") and "ray_trainer.py:248-279" in theirs
  assert "False: r_k − μ_{g,k}, no σ, per reward)" not in theirs
  devs = " ".join(_fid("gdpo").deviations)
  assert "no verl setting reaches it" in devs and "ray_trainer.py:235-247" in devs
  assert "use_v1: true, ppo_trainer.yaml:232" in devs and "v1/trainer_base.py:1743-1783" in devs
  assert "Tenth draw" in _fid("gdpo").read


def _trl_gdpo(rewards, n, weights):
  """trl-GDPO grpo_trainer.py:1222-1248 (apply_gdpo, K > 1): nan_to_num, per-reward group mean / std (unbiased) of
  consecutive blocks of n, ÷ (std + 1e-4), weighted nansum, then batch mean / std (unbiased), ÷ (std + 1e-4)."""
  rewards = np.nan_to_num(rewards)
  per = []
  for k in range(rewards.shape[1]):
    blocks = rewards[:, k].reshape(-1, n)
    mean = np.repeat(blocks.mean(1), n)
    std = np.repeat(blocks.std(1, ddof=1), n)
    per.append((rewards[:, k] - mean) / (std + 1e-4))
  pre = (np.stack(per, 1) * np.asarray(weights)[None]).sum(1)
  return (pre - pre.mean()) / (pre.std(ddof=1) + 1e-4), pre


def test_gdpo_trl_group_step_with_eps_1e4_and_the_batch_step_bound():
  rng = np.random.default_rng(11)
  r = rng.integers(0, 2, size=(32, 3)).astype(np.float64)
  gid = np.repeat(np.arange(2), 16)  # num_generations 16 (gdpo_gsm8k config)
  theirs, pre = _trl_gdpo(r, 16, (1.0, 1.0, 1.0))
  with jax.enable_x64(True):
    ours_pre = np.asarray(A.gdpo(r, gid, eps=1e-4, whiten=False)[0])
    ours = np.asarray(A.gdpo(r, gid, eps=1e-4)[0])
  np.testing.assert_allclose(ours_pre, pre, rtol=1e-12, atol=1e-14)
  s = pre.std(ddof=1)
  rel = np.abs(ours - theirs) / np.maximum(np.abs(theirs), 1e-300)
  assert np.all(rel[np.abs(theirs) > 1e-12] <= 1e-4 / s + 1e-12) and rel.max() > 0  # "≤ 1e-4/std", not equal


# ----------------------------------------------------------------------------------------------------------------
# entropy_bonus (not held): the token mean's denominator under micro-batching


def _tb(mask, ent):
  from rljax.types import PolicyOutputs, TrainBatch  # pylint: disable=import-outside-toplevel
  b, t = mask.shape
  with jax.enable_x64(True):
    batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask),
                       advantages=jnp.zeros((b, t), jnp.float64), group_id=jnp.arange(b, dtype=jnp.int32),
                       logp_old=jnp.zeros((b, t), jnp.float64))
    out = PolicyOutputs(logp=jnp.zeros((b, t), jnp.float64), entropy=jnp.asarray(ent))
  return batch, out


def test_entropy_bonus_denominator_is_global_as_trl_dapo_not_trl_grpo_or_verl_v070():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(3)
  c = 1e-3
  mask = np.zeros((4, 8), bool)
  mask[0, :8] = mask[1, :7] = True  # micro-batch 1: 15 tokens
  mask[2, :2] = mask[3, :1] = True  # micro-batch 2: 3 tokens
  ent = rng.uniform(0.1, 3.0, (4, 8))
  ent[2:] += 2.0                    # the short micro-batch has higher entropies
  mbs = (slice(0, 2), slice(2, 4))
  obj = O.chain(O.entropy_bonus(c))
  n_all = mask.sum()
  ours = 0.0
  for s in mbs:
    batch, out = _tb(mask[s], ent[s])
    with jax.enable_x64(True):
      ours += float(obj(out, batch, denominator=float(n_all))[0])  # make_train_step's global denominator
  batch, out = _tb(mask, ent)
  with jax.enable_x64(True):
    np.testing.assert_allclose(ours, float(obj(out, batch)[0]), rtol=1e-12)  # = the whole batch at once
  ga = len(mbs)
  # TRL grpo_trainer.py:3166-3171, one process: loss_type dapo divides Σ H by num_items_in_batch (:3140); grpo / bnpo
  # / dr_grpo / sapo / luspo take the micro-batch's token mean ÷ current_gradient_accumulation_steps
  trl_dapo = sum(-c * (ent[s] * mask[s]).sum() / n_all for s in mbs)
  trl_grpo = sum(-c * (ent[s] * mask[s]).sum() / max(mask[s].sum(), 1) / ga for s in mbs)
  # verl v0.7.0 dp_actor.py:465-467, 522-525: agg_loss token-mean over the micro-batch (no global counts), × 1/GA
  verl_070 = sum(-c * (ent[s] * mask[s]).sum() / mask[s].sum() * (1 / ga) for s in mbs)
  np.testing.assert_allclose(ours, trl_dapo, rtol=1e-12)
  np.testing.assert_allclose(trl_grpo, verl_070, rtol=1e-12)
  assert abs(ours - trl_grpo) > 1e-5  # a mean of micro-batch means
  text = _record("entropy_bonus")
  assert "equal under token_mean" not in text and "whatever loss_type" in text
  devs = " ".join(_fid("entropy_bonus").deviations)
  assert "cispo / dapo (its default) / vespo" in devs and "grpo, sapo, bnpo, dr_grpo, luspo" in devs
  assert "dp_actor.py:465-467, 522" in devs and "mean of micro-batch means" in devs
  assert "v1/trainer_base.py:1831-1832" in _fid("entropy_bonus").read


# ----------------------------------------------------------------------------------------------------------------
# oprl (not held): the invalid-action penalty, the per-shard istar_norm, adjust_batch


def _rloo_first_seen(scores, uid, traj):
  """core_istar.py:48-149 episode_rloo_reward / step_rloo_reward: the baseline set holds the first row seen of each
  (uid, traj_uid); every row r gets r·n/(n−1) − mean·n/(n−1) (n the group's trajectories), a singleton keeps r."""
  scores = np.asarray(scores, np.float64).copy()
  seen, by_uid = set(), {}
  for i in range(len(scores)):
    if (uid[i], traj[i]) in seen:
      continue
    by_uid.setdefault(uid[i], []).append(scores[i])
    seen.add((uid[i], traj[i]))
  for i in range(len(scores)):
    n = len(by_uid[uid[i]])
    if n > 1:
      scores[i] = scores[i] * n / (n - 1) - np.mean(by_uid[uid[i]]) * n / (n - 1)
  return scores


def _apply_invalid_action_penalty(episode_scores, is_action_valid, coef=0.1):
  """ray_trainer.py:204-239: token_level_scores[i, last] −= coef·(1 − is_action_valid[i]) (the row's episode
  score, episode.py:79-100); the rm_scores sum it also lowers is a local copy."""
  return np.asarray(episode_scores, np.float64) - coef * (1.0 - np.asarray(is_action_valid, np.float64))


def test_oprl_invalid_action_penalty_moves_their_episode_rloo_term():
  # one uid group, three trajectories (a: 2 steps, b: 3 steps, c: 1 step); each step row carries its episode reward
  uid = ["u"] * 6
  traj = ["a", "a", "b", "b", "b", "c"]
  ep = np.array([1.0, 1.0, 0.0, 0.0, 0.0, 0.5])
  valid = np.array([1, 0, 1, 1, 0, 1])  # row 1 (a, not the first row of a) and row 4 (b, not first) invalid
  base = _rloo_first_seen(ep, uid, traj)
  pen = _rloo_first_seen(_apply_invalid_action_penalty(ep, valid), uid, traj)
  n = 3
  np.testing.assert_allclose(pen - base, [0, -0.1 * n / (n - 1), 0, 0, -0.1 * n / (n - 1), 0], atol=1e-15)
  valid_first = np.array([1, 1, 0, 1, 1, 1])  # row 2 is b's first row: the baseline reads it
  pen_first = _rloo_first_seen(_apply_invalid_action_penalty(ep, valid_first), uid, traj)
  np.testing.assert_allclose(pen_first - base, [0.1 / (n - 1), 0.1 / (n - 1), -0.1, 0.1 / (n - 1),
                                                0.1 / (n - 1), 0.1 / (n - 1)], atol=1e-15)
  d = _defaults("oprl")
  assert d["invalid-action penalty"][0] == "none"
  assert "invalid_action_penalty_coef 0.1 (yaml:57-58, both scripts)" in d["invalid-action penalty"][1]
  devs = " ".join(_fid("oprl").deviations)
  assert "invalid-action penalty is not built" in devs and "0.1·n/(n − 1)" in devs and "by 0.1 when" in devs
  assert "ray_trainer.py:204-239" in _fid("oprl").read and "Tenth draw" in _fid("oprl").read


def _istar_norm(scores):  # dp_rm.py:220-224 on the rows it is given (step granularity: the sum on the last token)
  rev = np.flip(np.cumsum(np.flip(scores, 1), 1), 1)
  return scores / (np.abs(rev).max() + 1e-6)


def test_oprl_istar_norm_is_per_data_parallel_shard_and_ours_cancels_a_common_factor():
  rng = np.random.default_rng(5)
  b, t, ranks = 16, 4, 8
  scores = np.zeros((b, t))
  scores[:, -1] = rng.normal(size=b) * rng.uniform(0.1, 5.0, size=b)
  whole = _istar_norm(scores)
  # Dispatch.DP_COMPUTE_PROTO (rm_fsdp_workers.py:351): the batch is cut into `ranks` equal chunks, each rank runs
  # update_rm_eto -> istar_norm on its own chunk (dp_rm.py:439), the outputs are concatenated
  shards = np.concatenate([_istar_norm(c) for c in np.split(scores, ranks)])
  assert not np.allclose(shards, whole)
  divisors = scores[:, -1] / shards[:, -1]
  assert len(set(np.round(divisors, 12))) > 1  # not one batch-wide factor
  # ours: step_episode_mix standardises each turn index over the group's trajectories: a common positive factor
  # cancels up to ε, a per-row one does not
  mask = np.ones((b, t), bool)
  tid = np.repeat(np.arange(t)[None], b, 0)
  turn_r = rng.normal(size=(b, t))
  gid = np.repeat(np.arange(2), 8)
  r_ep = rng.normal(size=b)
  with jax.enable_x64(True):
    ref = np.asarray(A.step_episode_mix(turn_r, tid, r_ep, gid, mask=mask, eps=1e-12)[0])
    common = np.asarray(A.step_episode_mix(turn_r * 0.05, tid, r_ep, gid, mask=mask, eps=1e-12)[0])
    per_row = np.asarray(A.step_episode_mix(turn_r * np.repeat([0.05, 0.5], 8)[:, None] * np.tile([1, 3], 8)[:, None],
                                            tid, r_ep, gid, mask=mask, eps=1e-12)[0])
  np.testing.assert_allclose(common, ref, rtol=1e-9, atol=1e-9)
  assert not np.allclose(per_row, ref, atol=1e-3)
  f = _fid("oprl")
  assert "rm_scores are batch-normalised" not in f.placement and "per data-parallel rank's shard" in f.placement
  assert "per-shard max-norm" in f.differences and "batch max-norm" not in f.differences
  assert _defaults("oprl")["step reward normalisation"][1].startswith("istar_norm = batch_norm (÷ (max |r| over the "
                                                                     "rows of one data-parallel rank's shard")
  assert any("theirs is not batch-wide" in d and "different divisors" in d for d in f.deviations)


def test_oprl_prm_extras_step_reward_is_their_beta_q_summed_per_step_and_adjust_batch_pads_to_128():
  rng = np.random.default_rng(8)
  tid = np.array([[0, 0, 1, 1, 2, 2], [0, 0, 0, 1, 1, -1]])
  mask = tid >= 0
  tv = np.array([[True, True, True], [True, True, False]])
  prm = -rng.uniform(0.1, 3.0, tid.shape)
  old = -rng.uniform(0.1, 3.0, tid.shape)
  with jax.enable_x64(True):
    _, info = A.oprl(prm, old, tid, np.array([1.0, 0.0]), np.array([0, 0]), mask=mask, turn_valid=tv, beta=0.05)
  # dp_rm.py:161-204: q = rm_log_labels − old_log_probs, r = β·q (lambda 0), step granularity: Σ r over the step
  theirs = np.zeros((2, 3))
  for i in range(2):
    for k in range(3):
      sel = (tid[i] == k) & mask[i]
      theirs[i, k] = (0.05 * (prm[i] - old[i]))[sel].sum()
  np.testing.assert_allclose(np.asarray(info["step_rewards"]), theirs, rtol=1e-12, atol=1e-15)
  # agent_system/multi_turn_rollout/utils.py:71-108: size_divisor = lcm(log_prob_micro_batch_size_per_gpu·n_gpus (ref
  # and rollout), ppo_mini_batch_size) with 16, 8, 64 in both scripts; mode 'copy' duplicates to the next multiple
  divisor = math.lcm(16 * 8, 16 * 8, 64)
  assert divisor == 128 and (300 + (divisor - 300 % divisor)) % 128 == 0
  f = _fid("oprl")
  assert "adjust_batch pads the step rows to a multiple of 128" in f.placement
  assert any(d.startswith("their adjust_batch (mode 'copy') duplicates") for d in f.deviations)
