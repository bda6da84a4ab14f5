"""Issue #51, per-row review n: an independent second reading of six records (not a random draw).

Rows: segment, outcome_conditioned_baseline, tempo, sign_preserving_modulation, oprl, gdpo.

Held (4): segment, outcome_conditioned_baseline, tempo, gdpo. Their "= theirs" claims are checked below against
float64 NumPy transcriptions of the cited lines: arXiv 2602.10231 Sec. 3.1 and App. B Algorithm 1 (segment, OCB;
the paper text read whole, offsets 0-59928: no code link in it, and no authors' repository found in the code index),
fatebreaker/tempo@0a1c273d verl/trainer/ppo/core_algos.py:261-352 (tempo), NVlabs/GDPO@b080e63d
trl-GDPO/trl-0.18.0-gdpo/trl/trainer/grpo_trainer.py:1222-1248 and the verl 0.9.1 PyPI wheel's
compute_gdpo_outcome_advantage (gdpo). Also read and found as recorded: tempo's ray_trainer.py dispatch and fit(),
ppo_trainer.yaml, both train_*_tempo.sh (and the scripts at 7ba09982); GDPO's README (its nemo_rl-GDPO is a
'Work In Progress!' README, no code), config.yaml (apply_gdpo True, reward_weights unset), run_gsm8k_gdpo.sh,
gsm8k.py, zero3.yaml (8 processes), GRPOConfig defaults, verl-GDPO ray_trainer.py / core_algos.py / masked_whiten /
train_gdpo.sh, the verl 0.9.1 wheel's compute_advantage and v1 trainer_base.py.

Not held (2), each error fixed in the record and checked here (no implementation changed, no implementation bug
found):

- ``sign_preserving_modulation`` OMITTED the paper's experimental-settings appendix. The record read arXiv
  2608.04007v1 at offsets 20500-36500 only (and the read-whole pass re-read the same offsets); Appendix B
  (offsets 64950-68982) holds Table 4, the settings of every run: sampling temperature 1.0, PPO mini-batch 32 =
  the query batch 32 (one policy update per batch), lr 1e-6, max prompt / response 10,000 / 13,000 tokens,
  3 epochs, KL 0, D_H = {1, 2, 3}, and the 'Prompt-Group Normalization' paragraph (one pool per query over every
  valid policy-token position of the 16 rollouts, observation tokens excluded). None of Table 4's run settings
  was in the record's defaults.
- ``oprl`` OMITTED half of ours at a singleton group: the record gave ours as "episode term 0 (grpo's singleton
  rule)" against theirs "A = R + w·r_step"; our step term is 0 there too (each turn index is standardised over
  the group's one trajectory), so ours is 0 on every token (tested with Tongyi-ConvAI/Tongyi-Character@dfee104e
  CharacterRL-iStar/istar/core_istar.py:28-149 transcribed).
"""
import jax
import numpy as np
import pytest

from rljax.advantages._multi import gdpo
from rljax.advantages._token import oprl, outcome_conditioned_baseline, segment, sign_preserving_modulation, tempo
from _fidelity import defaults, fid, record


def _x64(fn, *args, **kwargs):
  with jax.enable_x64(True):
    out = fn(*args, **kwargs)
    return tuple(np.asarray(o) if not isinstance(o, dict) else {k: np.asarray(v) for k, v in o.items()}
                 for o in out)


# ------------------------------------------------------------------------- segment, OCB (held): BAE Algorithm 1

def _their_bae(rewards, outcome, gid):
  """arXiv 2602.10231 App. B Algorithm 1 (one prompt per gid): block 1's baseline the group mean (line 5), block
  k > 1's the mean of r_k over the group's samples with the same outcome o_k (lines 7-8); A = r − b (line 10)."""
  b, k = rewards.shape
  adv = np.zeros((b, k))
  for g in np.unique(gid):
    rows = np.flatnonzero(gid == g)
    adv[rows, 0] = rewards[rows, 0] - rewards[rows, 0].sum() / len(rows)
    for j in range(1, k):
      for i in rows:
        same = rows[outcome[rows, j] == outcome[i, j]]
        adv[i, j] = rewards[i, j] - rewards[same, j].sum() / len(same)
  return adv


def _bae_batch(seed=0):
  rng = np.random.default_rng(seed)
  gid = np.repeat(np.arange(3), 6)
  correct = rng.integers(0, 2, size=18)
  r1 = correct.astype(np.float64)                                   # the solution block's reward: correctness
  conf = rng.uniform(0, 1, size=18)
  r2 = -(conf - correct) ** 2                                       # the confidence block's Brier reward
  return gid, np.stack([r1, r2], 1), np.stack([np.zeros(18, int), correct], 1)


def test_bae_algorithm_1_equals_segment_block_1_and_ocb_block_2():
  gid, rewards, outcome = _bae_batch()
  theirs = _their_bae(rewards, outcome, gid)
  seg_ids = np.array([[0] * 3 + [1] * 2] * 18)
  ours_seg, _ = _x64(segment, rewards, seg_ids, gid, scale="none")
  ours_ocb, _ = _x64(outcome_conditioned_baseline, rewards[:, 1], outcome[:, 1], gid)
  np.testing.assert_allclose(ours_seg[:, :3], np.repeat(theirs[:, :1], 3, 1), rtol=0, atol=1e-13)
  np.testing.assert_allclose(ours_ocb, theirs[:, 1], rtol=0, atol=1e-13)
  # segment's own block-2 baseline is the group mean (their item 3), a recorded deviation: not Algorithm 1's
  assert np.max(np.abs(ours_seg[:, 3] - theirs[:, 1])) > 1e-3
  assert "outcome_conditioned_baseline" in " ".join(fid("segment").deviations)


def test_bae_grpo_population_sigma_is_std_ddof_0():
  gid, rewards, _ = _bae_batch(1)
  eps = 1e-6
  theirs = np.zeros(18)
  for g in range(3):
    r = rewards[gid == g, 1]
    theirs[gid == g] = (r - r.mean()) / (np.sqrt(((r - r.mean()) ** 2).sum() / len(r)) + eps)   # Sec. 3.1
  seg_ids = np.zeros((18, 2), int)
  ours, _ = _x64(segment, rewards[:, 1:], seg_ids, gid, std_ddof=0, eps=eps)
  np.testing.assert_allclose(ours[:, 0], theirs, rtol=0, atol=1e-12)
  ours_default, _ = _x64(segment, rewards[:, 1:], seg_ids, gid)
  assert np.max(np.abs(ours_default[:, 0] - theirs)) > 1e-3                    # ddof 1: a recorded deviation
  assert defaults("segment")["std_ddof"] == ("1", "population σ (Sec. 3.1), when used")


def test_ocb_optional_normalisation_ddof_0_and_records():
  gid, rewards, outcome = _bae_batch(2)
  eps = 1e-6
  theirs = np.zeros(18)
  for i in range(18):
    same = (gid == gid[i]) & (outcome[:, 1] == outcome[i, 1])
    r = rewards[same, 1]
    theirs[i] = (rewards[i, 1] - r.mean()) / (r.std() + eps)
  ours, _ = _x64(outcome_conditioned_baseline, rewards[:, 1], outcome[:, 1], gid, scale="group", std_ddof=0)
  np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)
  for row in ("segment", "outcome_conditioned_baseline"):
    assert "no code found" in fid(row).reference
    assert "group_size 32 (Table 4)" in defaults(row)["group size"][1]


# ------------------------------------------------------------------------------------------------ tempo (held)

def _their_tempo(scores, responses, response_mask, index, epsilon=1e-6, norm=True):
  """fatebreaker/tempo@0a1c273d verl/trainer/ppo/core_algos.py:292-352 compute_tempo_outcome_advantage, float64
  (the GRPO pass at :299-317 is overwritten on every response token, so only the second pass is transcribed)."""
  bsz, t = responses.shape
  out = np.zeros((bsz, t))
  id2index = {}
  for i in range(bsz):
    id2index.setdefault(index[i], []).append(i)
  for i in range(bsz):
    prev = id2index[index[i]]
    gs = scores[prev]
    gmean = gs.mean()
    gstd = np.sqrt(((gs - gmean) ** 2).sum() / (len(gs) - 1)) if len(gs) > 1 else np.nan    # torch.std, unbiased
    for j in range(t):
      if response_mask[i, j] == 0:
        break
      branch = [k for k in prev if responses[i, j] == responses[k, j]]
      val = scores[i] - gmean + scores[branch].mean() - scores[prev].mean()
      out[i, j] = val / (gstd + epsilon) if norm else val
      if len(prev) == 1:
        out[i, j:] = out[i, j]
        break
      prev = branch
  return out * response_mask


def _tempo_batch(seed=0, n=7, groups=3, t=9, pad=0):
  rng = np.random.default_rng(seed)
  resp = rng.integers(1, 3, size=(n * groups, t))                # a 2-token vocabulary: many shared prefixes
  lengths = rng.integers(3, t + 1, size=n * groups)
  mask = (np.arange(t)[None, :] < lengths[:, None]).astype(np.float64)
  resp = np.where(mask > 0, resp, pad)                           # right-padded with the pad id, as verl's responses
  scores = rng.integers(0, 2, size=n * groups).astype(np.float64) + 0.1 * rng.standard_normal(n * groups)
  index = np.repeat(np.arange(groups), n)                         # one uid per prompt, rollout.n rows
  return scores, resp, mask, index


def test_tempo_equals_theirs_at_the_defaults():
  for seed in range(3):
    scores, resp, mask, index = _tempo_batch(seed)
    theirs = _their_tempo(scores, resp, mask, index)
    for mgs in (16, None):                                        # both of our exact paths
      ours, info = _x64(tempo, scores, resp.astype(np.int32), mask, index, max_group_size=mgs)
      np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)
    assert np.asarray(info["num_branch_tokens"]) > 0              # the TD term is exercised


def test_tempo_without_std_equals_their_norm_false():
  scores, resp, mask, index = _tempo_batch(5)
  theirs = _their_tempo(scores, resp, mask, index, norm=False)
  ours, _ = _x64(tempo, scores, resp.astype(np.int32), mask, index, scale="none")
  np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)


def test_tempo_one_row_group_nan_theirs_zero_ours():
  scores, resp, mask, index = _tempo_batch(7, n=1, groups=2)
  with np.errstate(invalid="ignore"):
    theirs = _their_tempo(scores, resp, mask, index)
  assert np.all(np.isnan(theirs[mask > 0]))
  for mgs in (16, None):
    ours, _ = _x64(tempo, scores, resp.astype(np.int32), mask, index, max_group_size=mgs)
    # 0 up to float64 roundoff: the default fast path leaves ~1e-10 (see the float32 case below)
    assert np.max(np.abs(ours)) <= 1e-9
  assert defaults("tempo")["singleton group"][1].startswith("NaN on every token")


_ZERO_VAR = (np.array([0.3, 0.3, 0.3, 0.3, 123.456, 0.01], np.float32),
             np.array([[1, 2, 1], [1, 1, 2], [2, 1, 1], [2, 2, 2], [1, 1, 1], [1, 1, 1]], np.int32),
             np.ones((6, 3), np.float32), np.array([0, 0, 0, 0, 1, 2]))


def test_tempo_float32_zero_variance_group_sort_path_is_zero():
  r, tok, m, g = _ZERO_VAR
  theirs = _their_tempo(r.astype(np.float64), tok, m, g)          # float64: 0 on the all-0.3 group
  assert np.all(theirs[:4] == 0.0)
  ours, _ = tempo(r, tok, m, g, max_group_size=None)              # float32, the sort path
  assert np.max(np.abs(np.asarray(ours)[:4])) <= 1e-3


# implementation bug found by per-row review n and fixed the same day: tempo's fast path (_prefix_values_near,
# max_group_size=16) added every cross-group pair's reward at position 0 and subtracted it back, so its float32
# roundoff scaled with the other groups' rewards and was divided by σ_g + ε = 1e-6 in a zero-variance group (3.04 on
# the first token of each all-0.3 row here). Fixed: cross-group pairs add nothing, and the prefix means are taken
# on rewards shifted by the group's largest (an equal-reward group sums exact zeros).
def test_tempo_float32_zero_variance_group_default_path_is_zero():
  r, tok, m, g = _ZERO_VAR
  ours, _ = tempo(r, tok, m, g)
  assert np.max(np.abs(np.asarray(ours)[:4])) <= 1e-3


# ---------------------------------------------------------------------- sign_preserving_modulation (not held)

def _their_turnsight(a_base, gaps, turn_of, valid_tok, gid, lam=0.5, eps_w=0.5, eps=1e-6):
  """arXiv 2608.04007v1 'Group-Normalized Weight Construction' and 'Advantage Integration' with Appendix B's
  'Prompt-Group Normalization': δ̄*_{i,k} = the turn's mean selected gap; μ, σ over the selected gaps at every valid
  policy-token position of the query's rollouts (σ's ddof is not stated: population here); w = 1 + ε_w
  tanh(sign(A)·δ̂); Ã = A·[(1 − λ) + λ w]."""
  b, t = a_base.shape
  out = np.zeros((b, t))
  for g in np.unique(gid):
    rows = np.flatnonzero(gid == g)
    pool = gaps[rows][valid_tok[rows] > 0]
    mu, sd = pool.mean(), pool.std()
    for i in rows:
      for tok in range(t):
        if not valid_tok[i, tok]:
          continue
        k = turn_of[i, tok]
        in_turn = (turn_of[i] == k) & (valid_tok[i] > 0)
        dhat = (gaps[i, in_turn].mean() - mu) / (sd + eps)
        w = 1 + eps_w * np.tanh(np.sign(a_base[i, tok]) * dhat)
        out[i, tok] = a_base[i, tok] * ((1 - lam) + lam * w)
  return out


def test_turnsight_equals_ours_with_one_policy_token_per_turn():
  rng = np.random.default_rng(0)
  b, m = 8, 4
  gid = np.repeat([0, 1], 4)
  turn_of = np.tile(np.arange(m), (b, 1))
  gaps = rng.standard_normal((b, m))
  a_base = rng.standard_normal((b, m))
  theirs = _their_turnsight(a_base, gaps, turn_of, np.ones((b, m)), gid)
  ours, _ = _x64(sign_preserving_modulation, a_base, gaps, turn_of, gid, mask=np.ones((b, m)))
  np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)


def test_turnsight_token_pool_differs_with_longer_turns_as_recorded():
  rng = np.random.default_rng(1)
  b, m, per = 6, 3, 3
  gid = np.repeat([0, 1], 3)
  turn_of = np.tile(np.repeat(np.arange(m), per), (b, 1))
  gaps = rng.standard_normal((b, m * per))                        # the gaps vary within a turn
  a_base = np.repeat(rng.standard_normal((b, 1)), m * per, 1)
  theirs = _their_turnsight(a_base, gaps, turn_of, np.ones((b, m * per)), gid)
  turn_means = gaps.reshape(b, m, per).mean(-1)                   # ours: the per-turn signal, each turn once
  ours, _ = _x64(sign_preserving_modulation, a_base, turn_means, turn_of, gid, mask=np.ones((b, m * per)))
  assert np.max(np.abs(ours - theirs)) > 1e-3
  np.testing.assert_array_equal(np.sign(ours), np.sign(theirs))   # both keep the base advantage's sign
  assert any("token-level gaps" in d for d in fid("sign_preserving_modulation").deviations)


def test_sign_preserving_record_reads_appendix_b_table_4():
  rec = fid("sign_preserving_modulation")
  assert "Appendix B (offsets 64950-68982)" in rec.read
  assert "Prompt-Group Normalization" in rec.read
  d = defaults("sign_preserving_modulation")
  assert d["sampling temperature (their runs)"][1].startswith("1.0")
  assert "32 queries = the query batch" in d["PPO mini-batch (their runs)"][1]
  assert "13,000" in d["lr, lengths, epochs (their runs)"][1] and "3 epochs" in d["lr, lengths, epochs (their runs)"][1]


# ------------------------------------------------------------------------------------------------ oprl (not held)

def _their_istar_rloo(episode_scores, step_scores, index, traj_index, w=1.0):
  """Tongyi-ConvAI/Tongyi-Character@dfee104e CharacterRL-iStar/istar/core_istar.py:28-149
  (compute_istar_rloo_advantage, use_process_only False): RLOO of the summed episode score + w·RLOO of the summed
  step score, each baseline over the first row seen of each (uid, traj_uid); a uid with one trajectory is left raw."""
  def rloo(scores):
    scores = scores.astype(np.float64).copy()
    seen, id2 = set(), {}
    for i, (u, tr) in enumerate(zip(index, traj_index)):
      if (u, tr) in seen:
        continue
      id2.setdefault(u, []).append(scores[i])
      seen.add((u, tr))
    out = scores.copy()
    for i, u in enumerate(index):
      n = len(id2[u])
      if n > 1:
        out[i] = scores[i] * n / (n - 1) - np.mean(id2[u]) * n / (n - 1)
    return out
  return rloo(episode_scores) + w * rloo(step_scores)


def test_oprl_singleton_group_theirs_raw_ours_zero_on_every_token():
  rng = np.random.default_rng(0)
  t, m = 6, 2
  logp = rng.standard_normal((1, t)) - 1.0
  logp_ref = rng.standard_normal((1, t)) - 1.0
  turn_ids = np.array([[0, 0, 0, 1, 1, 1]])
  beta, w, r_ep = 0.05, 1.0, 1.0
  ours, info = _x64(oprl, logp, logp_ref, turn_ids, np.array([r_ep]), np.array([0]), mask=np.ones((1, t)),
                    turn_valid=np.ones((1, m), bool), beta=beta, step_weight=0.5)
  step_r = np.array([beta * (logp - logp_ref)[0, :3].sum(), beta * (logp - logp_ref)[0, 3:].sum()])
  np.testing.assert_allclose(info["step_rewards"][0], step_r, rtol=0, atol=1e-13)
  # theirs: one step row per turn of the one trajectory (same uid, same traj_uid)
  theirs = _their_istar_rloo(np.array([r_ep, r_ep]), step_r, ["u", "u"], ["t", "t"], w)
  np.testing.assert_allclose(theirs, r_ep + w * step_r, rtol=0, atol=1e-15)
  assert np.all(np.abs(theirs) > 0.5)
  assert np.all(ours == 0.0)                                      # both terms vanish here, not the episode term only
  ours_line = defaults("oprl")["singleton group (one trajectory per uid)"][0]
  assert ours_line.startswith("0 on every token") and "step term 0" in ours_line


def test_oprl_extras_step_reward_is_their_q_summed_per_step():
  rng = np.random.default_rng(3)
  b, t, m = 4, 8, 3
  prm = rng.standard_normal((b, t)) - 2.0
  old = rng.standard_normal((b, t)) - 2.0
  turn_ids = np.tile(np.array([0, 0, 1, 1, 1, 2, 2, -1]), (b, 1))
  mask = (turn_ids >= 0).astype(np.float64)
  _, info = _x64(oprl, prm, old, turn_ids, np.ones(b), np.repeat([0, 1], 2), mask=mask,
                 turn_valid=np.ones((b, m), bool), beta=0.05)
  q = prm - old                                                   # dp_rm.py:161 with ref_module None
  theirs = np.stack([0.05 * q[:, turn_ids[0] == k].sum(1) for k in range(m)], 1)   # :199-204, step granularity
  np.testing.assert_allclose(info["step_rewards"], theirs, rtol=0, atol=1e-13)


# ------------------------------------------------------------------------------------------------- gdpo (held)

def _their_trl_gdpo(rpf, num_generations, weights):
  """NVlabs/GDPO@b080e63d trl-GDPO/trl-0.18.0-gdpo/trl/trainer/grpo_trainer.py:1222-1248, float64."""
  r = np.nan_to_num(rpf)
  cols = []
  for i in range(r.shape[1]):
    x = r[:, i].reshape(-1, num_generations)
    mean = np.repeat(x.mean(1), num_generations)
    std = np.repeat(x.std(1, ddof=1), num_generations)
    cols.append((r[:, i] - mean) / (std + 1e-4))
  pre = np.nansum(np.stack(cols, 1) * weights[None, :], 1)
  return pre, (pre - pre.mean()) / (pre.std(ddof=1) + 1e-4)


def _their_verl_gdpo_pre_whiten(rpf, index, weights, eps=1e-6):
  """The verl 0.9.1 PyPI wheel core_algos.py compute_gdpo_outcome_advantage before masked_whiten: per key
  compute_grpo_outcome_advantage (eps 1e-6, unbiased std, norm_adv_by_std_in_grpo True), weighted sum."""
  out = np.zeros(rpf.shape[0])
  for k in range(rpf.shape[1]):
    col = np.zeros(rpf.shape[0])
    for g in np.unique(index):
      s = rpf[index == g, k]
      col[index == g] = (s - s.mean()) / (s.std(ddof=1) + eps)
    out += weights[k] * col
  return out


def _gdpo_batch(seed=0):
  rng = np.random.default_rng(seed)
  n, groups = 16, 4
  rpf = np.stack([rng.integers(0, 2, n * groups), rng.integers(0, 2, n * groups),
                  rng.uniform(-3, 3, n * groups)], 1).astype(np.float64)
  return rpf, np.repeat(np.arange(groups), n), n


def test_gdpo_trl_group_step_equals_ours_at_eps_1e4_batch_step_within_recorded_bound():
  rpf, gid, n = _gdpo_batch()
  w = np.array([1.0, 0.5, 2.0])
  pre, theirs = _their_trl_gdpo(rpf, n, w)
  ours, info = _x64(gdpo, rpf, gid, weights=w, eps=1e-4)
  np.testing.assert_allclose(info["per_reward"] @ w, pre, rtol=0, atol=1e-12)
  std = pre.std(ddof=1)
  rel = np.abs(ours - theirs) / np.maximum(np.abs(theirs), 1e-12)
  assert np.max(rel) <= 1e-4 / std * 1.0001 and np.max(rel) > 0  # 'a relative difference ≤ 1e-4/std', not 0


def test_gdpo_verl_091_equals_ours_before_the_whitening():
  rpf, gid, _ = _gdpo_batch(1)
  w = np.array([1.0, 1.0, 0.3])
  theirs = _their_verl_gdpo_pre_whiten(rpf, gid, w)
  _, info = _x64(gdpo, rpf, gid, weights=w)
  np.testing.assert_allclose(info["per_reward"] @ w, theirs, rtol=0, atol=1e-12)


def test_gdpo_one_reward_trl_skips_the_batch_step_ours_whitens():
  rpf, gid, n = _gdpo_batch(2)
  r = rpf[:, 2:]
  x = r[:, 0].reshape(-1, n)
  trl_grpo = (r[:, 0] - np.repeat(x.mean(1), n)) / (np.repeat(x.std(1, ddof=1), n) + 1e-4)   # their else-branch
  ours, _ = _x64(gdpo, r, gid, eps=1e-4)
  assert np.max(np.abs(ours - trl_grpo)) > 1e-3
  assert any("K = 1" in d for d in fid("gdpo").deviations)
  assert "K = 1" not in record("tempo")


def test_tempo_float32_fast_path_equals_the_float64_reference_beside_large_rewards():
  """Seven equal rewards beside a group with rewards in [0, 5] (per-row review n's realistic case: 1.82 on the fast
  path before the fix): both paths equal a float64 transcription of theirs."""
  rng = np.random.default_rng(7)
  r = np.concatenate([np.full(7, 0.3), rng.uniform(0, 5, 8), rng.integers(0, 2, 8).astype(float)]).astype(np.float32)
  g = np.repeat([0, 1, 2], [7, 8, 8])
  tok = rng.integers(1, 3, size=(23, 6)).astype(np.int32)
  m = np.ones((23, 6), np.float32)
  theirs = _their_tempo(r.astype(np.float64), tok, m, g)
  for mgs in (16, None):
    ours, _ = tempo(r, tok, m, g, max_group_size=mgs)
    np.testing.assert_allclose(np.asarray(ours, np.float64), theirs, atol=2e-3, err_msg=str(mgs))
    assert np.max(np.abs(np.asarray(ours)[:7])) <= 1e-3
