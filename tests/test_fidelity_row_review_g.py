"""Issue #51, per-row review g: an independent second reading of six records (not a random draw).

Rows: dr_grpo, rloo, remax, reinforce_pp_baseline, rank, length_penalty.

Held (2): dr_grpo (volcengine/verl@v0.7.0 core_algos.py:265-330 compute_grpo_outcome_advantage with
norm_adv_by_std_in_grpo=False, ray_trainer.py:234-246; the verl 0.9.1 PyPI wheel's v1 compute_advantage_for_multi_
trajectories; the authors' oat-based code, critic_type 'drgrpo', is r − the mean of num_samples, the same), rloo
(core_algos.py@v0.7.0:475-525 and :718-753, examples/rloo_trainer/run_qwen2-7b.sh@v0.7.0:5, 26, 29-31; the 0.9.1
wheel's v1 path, trainer/ppo/v1/utils.py:148-172, delegates every non-GRPO estimator to compute_advantage unchanged,
its padding rows form their own uid group with response_mask 0). Their "= theirs" claims are checked below against
float64 NumPy transcriptions of the cited lines.

Not held (4); each error fixed in the record (no implementation changed, no implementation bug found):

- ``reinforce_pp_baseline`` OMITTED verl's example run for this estimator:
  examples/reinforce_plus_plus_trainer/run_qwen2-7b_math_rf_baseline.sh@v0.7.0 sets rollout.n 8 (:37) and
  algorithm.use_kl_in_reward True (:40; kl_penalty kl, kl_coef 0.001 from ppo_trainer.yaml:75-108), use_kl_loss
  False (:26), so ray_trainer.py@v0.7.0:1502-1508 subtracts 0.001·(log π_old − log π_ref) from every response
  token's reward before compute_advantage: verl's group mean and whitening are of score − β·Σ_t KL_t. The record
  listed neither the script, the group size, nor the KL in the reward (the rloo and reinforce_pp rows' records have
  theirs); with KL ≠ 0 its advantages differ from the row's (tested).
- ``remax`` said FALSE "the source sets no hyper-parameter of this row" and OMITTED verl's ReMax example runs:
  examples/remax_trainer/run_qwen2.5-3b_seq_balance.sh and run_qwen2.5-7b_seq_balance.sh@v0.7.0 set rollout.n 4
  (:29) and use_kl_in_reward True, kl_penalty kl, kl_coef 0.001 (:31-33); ray_trainer.py@v0.7.0:1391-1400 scores the
  greedy baseline with reward_fn alone (no KL) and :1502-1508 applies the KL to the samples' token rewards only, so
  their A_t = Σ_{s≥t}(r_s − β·KL_s) − b (tested: = ours with the KL-shaped token rewards and the bare greedy reward).
- ``length_penalty`` cited Kimi k1.5 §2.3.3 as its source while saying it was not read, and OMITTED two of its
  settings. Kimi §2.3.3 (pp. 5-6, read in a page-marked transcription, viktor-shcherb/msc_thesis@a6577d10
  references/2025-01-kimi-k1.5-scaling-rl/sections/03_, 04_, 04b_*.md): the length reward "is then added to the
  original reward with a weighting parameter" (value not given) and is warmed up: "standard policy optimization
  without length penalty, followed by a constant length penalty for the rest of training"; §2.4 applies it in a
  separate long2short RL phase. Ours adds λ with weight 1 from the first step. The λ rule, the per-problem min/max
  and the all-equal case agree with Kimi and with open-r1's len_reward (tested).
- ``rank`` OMITTED a second third-party implementation that names the paper's equations (code index, read_file id
  60248978907, unattributed; its RLRRConfig, id 60383858830, gives "defaults from the paper's Appendix A.1"):
  ranks are dense (ties share one, r_max = the number of distinct keys) of a hierarchical key (Eq. 6: correct first,
  then floor(len/λ), then the raw reward), HRR (Eq. 3) is the default mode, τ 0.1, λ 2048, ξ± ±1e-3, F_norm 1. The
  record said ties and ξ "not stated" from the first transcription alone. With tied rewards ours differs from its
  PRR form (rewards (2, 2, 1, 0): theirs 0.375, 0.375, −0.125, −0.625; ours 2/3, 2/3, −1/3, −1; tested). The paper
  itself is still not read.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rljax import advantages as A
from rljax.objectives import kl_in_reward
from rljax.rewards import length_penalty
from _fidelity import defaults, fid



@pytest.fixture(autouse=True)
def _x64():
  """Every comparison here is in float64 (scoped to each test, not the session)."""
  with jax.enable_x64(True):
    yield

RNG = np.random.default_rng(20261207)


def _batch(group_sizes, t=6):
  gid = np.concatenate([np.full(n, g) for g, n in enumerate(group_sizes)])
  b = len(gid)
  scores = RNG.integers(0, 2, b).astype(np.float64) + RNG.normal(0, 0.3, b)
  lens = RNG.integers(1, t + 1, b)
  mask = (np.arange(t)[None, :] < lens[:, None]).astype(np.float64)
  return scores, gid, mask


def _outcome_tokens(scores, mask):
  """verl's token_level_scores: the score on the last response token."""
  tok = np.zeros_like(mask)
  last = mask.sum(1).astype(int) - 1
  tok[np.arange(len(scores)), last] = scores
  return tok


# float64 transcriptions of the verl v0.7.0 lines (written from core_algos.py / torch_functional.py)
def verl_group_mean(scores, index):
  out = np.empty_like(scores)
  for g in np.unique(index):
    sel = index == g
    out[sel] = 0.0 if sel.sum() == 1 else scores[sel].mean()
  return out


def verl_grpo_no_std(tok, mask, index):  # core_algos.py@v0.7.0:265-330, norm_adv_by_std_in_grpo=False
  s = tok.sum(-1)
  return (s - verl_group_mean(s, index))[:, None] * mask


def verl_rloo(tok, mask, index):  # :475-525
  s = tok.sum(-1).copy()
  m = verl_group_mean(s, index)
  for i in range(len(s)):
    n = (index == index[i]).sum()
    if n > 1:
      s[i] = s[i] * n / (n - 1) - m[i] * n / (n - 1)
  return s[:, None] * mask


def masked_mean(v, m):
  return (v * m).sum() / (m.sum() + 1e-8)


def masked_whiten(v, m):  # torch_functional.py@v0.7.0:287-340
  mean = masked_mean(v, m)
  var = masked_mean((v - mean) ** 2, m)
  var = var * m.sum() / (m.sum() - 1)
  return (v - mean) / np.sqrt(var + 1e-8)


def verl_rfpp_baseline(tok, mask, index):  # :423-471
  s = tok.sum(-1)
  c = (s - verl_group_mean(s, index))[:, None] * mask
  return masked_whiten(c, mask) * mask


def verl_remax(tok, mask, baseline):  # :620-652
  returns = np.flip(np.cumsum(np.flip(tok * mask, -1), -1), -1)
  return returns - baseline[:, None] * mask


def verl_apply_kl_penalty(tok_scores, old, ref, mask, beta=0.001):  # ray_trainer.py@v0.7.0:126-165, kl_penalty 'kl'
  return tok_scores - beta * (old - ref) * mask


# ------------------------------------------------------------------------------ dr_grpo (held)

def test_dr_grpo_equals_verl_grpo_without_std_with_singleton_raw():
  scores, gid, mask = _batch([4, 3, 1, 5])
  ours, _ = A.dr_grpo(jnp.asarray(scores), jnp.asarray(gid), num_groups=4, singleton="raw")
  theirs = verl_grpo_no_std(_outcome_tokens(scores, mask), mask, gid)
  np.testing.assert_allclose(np.asarray(ours)[:, None] * mask, theirs, rtol=0, atol=1e-12)
  zero, _ = A.dr_grpo(jnp.asarray(scores), jnp.asarray(gid), num_groups=4)
  assert float(zero[7]) == 0.0 and abs(theirs[7, 0] - scores[7]) < 1e-12  # the recorded singleton deviation
  assert "'zero' (A = 0)" in defaults("dr_grpo")["singleton"][0]


# ------------------------------------------------------------------------------ rloo (held)

def test_rloo_equals_verl_rloo_and_the_script_values_are_recorded():
  scores, gid, mask = _batch([5, 5, 1, 2])
  ours, _ = A.rloo(jnp.asarray(scores), jnp.asarray(gid), num_groups=4, singleton="raw")
  theirs = verl_rloo(_outcome_tokens(scores, mask), mask, gid)
  np.testing.assert_allclose(np.asarray(ours)[:, None] * mask, theirs, rtol=0, atol=1e-12)
  d = defaults("rloo")
  assert "rollout.n = 5" in d["group size"][1] and "True in run_qwen2-7b.sh" in d["use_kl_in_reward"][1]


# ------------------------------------------------------------------------------ reinforce_pp_baseline (not held)

def test_reinforce_pp_baseline_equals_verl_without_kl():
  scores, gid, mask = _batch([8, 8, 3, 1])
  ours, _ = A.reinforce_pp_baseline(jnp.asarray(scores), jnp.asarray(gid), mask=jnp.asarray(mask > 0), num_groups=4,
                                    singleton="raw")
  theirs = verl_rfpp_baseline(_outcome_tokens(scores, mask), mask, gid)
  # the recorded deviation: verl's masked_mean ÷ (Σmask + 1e-8)
  np.testing.assert_allclose(np.asarray(ours), theirs, rtol=1e-7, atol=1e-7)


def test_reinforce_pp_baseline_script_folds_kl_into_the_reward():
  """run_qwen2-7b_math_rf_baseline.sh@v0.7.0: use_kl_in_reward True, kl_coef 0.001, rollout.n 8."""
  scores, gid, mask = _batch([8, 8])
  old, ref = RNG.normal(-1, 0.5, mask.shape), RNG.normal(-1, 0.5, mask.shape)
  theirs = verl_rfpp_baseline(verl_apply_kl_penalty(_outcome_tokens(scores, mask), old, ref, mask), mask, gid)
  bare, _ = A.reinforce_pp_baseline(jnp.asarray(scores), jnp.asarray(gid), mask=jnp.asarray(mask > 0), num_groups=2)
  assert np.abs(np.asarray(bare) - theirs).max() > 1e-4  # the row alone is not their run
  tok, _ = kl_in_reward(jnp.asarray(scores), jnp.asarray(old), jnp.asarray(ref), jnp.asarray(mask > 0), beta=0.001)
  shaped, _ = A.reinforce_pp_baseline(jnp.sum(tok, -1), jnp.asarray(gid), mask=jnp.asarray(mask > 0), num_groups=2)
  np.testing.assert_allclose(np.asarray(shaped), theirs, rtol=1e-7, atol=1e-7)  # the recorded way to get theirs
  f = fid("reinforce_pp_baseline")
  assert "run_qwen2-7b_math_rf_baseline.sh@v0.7.0" in f.read and ":40 algorithm.use_kl_in_reward True" in f.read
  d = defaults("reinforce_pp_baseline")
  assert "rollout.n = 8" in d["group size"][1]
  assert "True in run_qwen2-7b_math_rf_baseline.sh@v0.7.0:40" in d["use_kl_in_reward"][1]
  assert "in-reward KL log-probs" in d
  assert any("rl.shaping=kl_in_reward(beta=0.001)" in x for x in f.deviations)


# ------------------------------------------------------------------------------ remax (not held)

def test_remax_script_kl_on_samples_not_on_the_greedy_baseline():
  scores, gid, mask = _batch([4, 4, 4])  # rollout.n 4: one greedy baseline per prompt
  greedy = np.repeat(RNG.integers(0, 2, 3).astype(np.float64), 4)
  old, ref = RNG.normal(-1, 0.5, mask.shape), RNG.normal(-1, 0.5, mask.shape)
  tok_theirs = verl_apply_kl_penalty(_outcome_tokens(scores, mask), old, ref, mask)
  theirs = verl_remax(tok_theirs, mask, greedy)
  tok, _ = kl_in_reward(jnp.asarray(scores), jnp.asarray(old), jnp.asarray(ref), jnp.asarray(mask > 0), beta=0.001)
  ours, _ = A.remax(tok, jnp.asarray(greedy), mask=jnp.asarray(mask > 0))
  np.testing.assert_allclose(np.asarray(ours), theirs, rtol=0, atol=1e-12)
  bare, _ = A.remax(jnp.asarray(scores), jnp.asarray(greedy), mask=jnp.asarray(mask > 0))
  np.testing.assert_allclose(np.asarray(bare), verl_remax(_outcome_tokens(scores, mask), mask, greedy), atol=1e-12)
  assert np.abs(np.asarray(bare) - theirs).max() > 1e-4
  f = fid("remax")
  assert "no hyper-parameter" not in " ".join(x for row in f.defaults for x in row)
  d = defaults("remax")
  assert "rollout.n = 4" in d["samples per prompt"][1] and "not on reward_baselines" in d["use_kl_in_reward"][1]
  assert "run_qwen2.5-7b_seq_balance.sh@v0.7.0" in f.read and "1391-1404" in f.read
  assert any("Σ_{s≥t}(r_s − 0.001·KL_s) − b" in x for x in f.deviations)


# ------------------------------------------------------------------------------ rank (not held)

def test_rank_against_the_transcription_ranking_as_reward():
  r = np.array([0.3, 0.9, 0.1, 0.5, 0.7, 0.2])  # one group, no ties
  g = len(r)
  rr = np.argsort(np.argsort(-r)) + 1  # 1 = best
  s = (g - rr) / (g - 1)
  f1 = s - s.mean()
  fstd = f1 / s.std()  # population std
  gid = jnp.zeros(g, int)
  rng_, _ = A.rank(jnp.asarray(r), gid, num_groups=1)
  std_, _ = A.rank(jnp.asarray(r), gid, num_groups=1, normalize="std")
  np.testing.assert_allclose(np.asarray(rng_), 2 * f1, atol=1e-12)
  np.testing.assert_allclose(np.asarray(std_), fstd, atol=1e-12)
  assert "method" in fid("rank").read and "was not read" in fid("rank").read


# ------------------------------------------------------------------------------ length_penalty (not held)

def open_r1_len_reward(lengths, correct):  # open-r1 rewards.py len_reward (one call's completions)
  lo, hi = min(lengths), max(lengths)
  if hi == lo:
    return [0.0] * len(lengths)
  out = []
  for n, c in zip(lengths, correct):
    lam = 0.5 - (n - lo) / (hi - lo)
    out.append(lam if c else min(0.0, lam))
  return out


def test_length_penalty_equals_len_reward_on_one_group():
  lengths = np.array([120.0, 40.0, 75.0, 300.0, 40.0])
  correct = np.array([1.0, 0.0, 1.0, 0.0, 1.0])
  ours, _ = length_penalty(jnp.asarray(lengths), jnp.asarray(correct), jnp.zeros(5, int), num_groups=1)
  np.testing.assert_allclose(np.asarray(ours), open_r1_len_reward(list(lengths), list(correct > 0.5)), atol=1e-12)
  flat, _ = length_penalty(jnp.full(3, 7.0), jnp.ones(3), jnp.zeros(3, int), num_groups=1)
  assert np.all(np.asarray(flat) == 0.0)
  f = fid("length_penalty")
  assert "viktor-shcherb/msc_thesis@a6577d10" in f.read and "weighting parameter" in f.read
  d = defaults("length_penalty")
  assert "value not stated" in d["weight"][1] and "warm-up" in d["schedule"][1]
  assert any("warm-up" in x and "not built" in x for x in f.deviations)


def _dense_prr(r):
  """The second transcription's PRR (Eq. 4 on Eq. 6's dense ranks, the key the reward alone), F_norm = 1."""
  keys = sorted(set(-r))
  dense = np.array([keys.index(-x) + 1 for x in r], float)  # 1 = best, ties share
  rmax = dense.max()
  s = (rmax - dense) / (rmax - 1)
  return s - s.mean()


def test_rank_ties_differ_from_the_dense_rank_transcription():
  r = np.array([2.0, 2.0, 1.0, 0.0])
  theirs = _dense_prr(r)
  np.testing.assert_allclose(theirs, [0.375, 0.375, -0.125, -0.625], atol=1e-12)
  ours, _ = A.rank(jnp.asarray(r), jnp.zeros(4, int), num_groups=1)
  np.testing.assert_allclose(np.asarray(ours), [2 / 3, 2 / 3, -1 / 3, -1.0], atol=1e-12)
  # without ties the two agree up to the recorded factor 2
  r2 = np.array([0.3, 0.9, 0.1, 0.5])
  o2, _ = A.rank(jnp.asarray(r2), jnp.zeros(4, int), num_groups=1)
  np.testing.assert_allclose(np.asarray(o2), 2 * _dense_prr(r2), atol=1e-12)
  f = fid("rank")
  assert "60248978907" in f.read and "Appendix A.1" in f.read
  d = defaults("rank")
  assert "dense ranks" in d["ties"][1] and "λ 2048" in d["rank key"][1]
  assert "ξ⁺ 1e-3, ξ⁻ −1e-3" in d["mode / τ / ξ± / F_norm"][1]
  assert any("(0.375, 0.375, −0.125, −0.625)" in x and "(2/3, 2/3, −1/3, −1)" in x for x in f.deviations)
