"""Issue #51 item 4, seventeenth draw (seed 20261222), part b: an independent re-audit of five in-full rows.

Rows drawn (five of the ten of ``random.Random(20261222).sample(rows, 10)`` over the 109 rows):
segment, dara, clip_cov, dump, qae.

Held (0). Not held (5), each error fixed in the record and checked here. No implementation was changed and no
implementation bug was found: each implementation matched a float64 transcription of its source at the stated
settings (below).

- ``clip_cov`` (OMITTED): the (n + 1e-8) divisor. PRIME-RL/Entropy-Mechanism-of-RL@88505792
  verl/utils/torch_functional.py:123-125 masked_mean is Σ x·m / (Σ m + 1e-8); agg_loss's token-mean
  (core_algos.py:333-334) and both means inside cov (:497) call it. The record said the whole-batch selection is
  equal "with one rank and one micro-batch per update"; their loss is then ours × n/(n + 1e-8), a relative 1e-8/n
  (the erc row lists the same divisor; this row did not). Also omitted, in the filter entry: the DAPO trainer's
  rounds of 256 prompts, the first 2048 rows kept (batch[:traj_bsz]) and the ValueError that stops the run after
  10 short rounds (recipe/dapo/dapo_ray_trainer.py:206-217). A defaults entry, a deviation and read corrected.
- ``dump`` (FALSE pointer): read cited ZhentingWang/DUMP@235e85d4 verl/utils/curriculum_learning.py ":212-330
  (CurriculumSampler: source ~ weights, index ~ uniform)"; those lines end inside __iter__'s set-up, before the draw
  (the source by rng.choices with the live self._weights :353-361, the index by rng.choice :369; the class spans
  :214-411). Read corrected; the estimator, the UCB weights and the window (curriculum_learning.py:50-79, 137-197)
  are checked against ours below (equal).
- ``dara`` (OMITTED): a second value of the filter cap. zhaihaotian/DARA@04591020 math/README.md ('Installation'):
  the example profile's settings (filter_cap 2) are the 1.5B runs'; "For the 4B models we used 0.8, 160 and 4": the
  Qwen3-4B runs allow 4 generation rounds before the ValueError. The record gave 2 as theirs. Read and the defaults'
  filter entry corrected; ours equals math/rdgdpo/advantages.py rdgdpo (positive calibration) below.
- ``qae`` (OMITTED): the group size. verl's DAPO scripts for the README's three models set n_resp_per_prompt=16
  (volcengine/verl@26a734e7 and @v0.7.0 recipe/dapo/run_dapo_qwen2.5_32b.sh:30, run_dapo_qwen3_8b_base_npu.sh:28,
  run_dapo_qwen3_14b_base_npu.sh:28), and torch.quantile's linear rank is K·(n − 1): at K = 0.4, n = 16 it is 6, an
  order statistic, so with ±1 rewards each group's baseline is ±1 and only one sign gets a non-zero advantage (the
  same as interpolation='inverted_cdf'); at rljax's default rl.group_size 8 the rank is 2.8 and the baseline
  interpolates (3 failures of 8: 0.6), both signs non-zero. The record listed no group size. A defaults entry, a
  deviation and read added; ours (mode='authors') equals the README's quoted lines in verl's GRPO advantage at both
  sizes (below).
- ``segment`` (FALSE as worded): the summary and a deviation said our std division is "as SLCA/DSS-GRPO('s)"; the
  record's only sources for those rows are their abstracts (seed 001 L57, L79), which say "group-relative
  advantages per segment" and state no std rule. Reworded; read notes it. The paper side (arXiv 2602.10231 Sec. 3.1,
  4.2-4.3, 5.2, Table 4, Algorithm 1, read whole: the paper text in the code index, id 60886396402, offsets
  0-59928) holds, and ours equals Algorithm 1 with the group-mean baseline, centred (scale='none'), and GRPO's
  population σ + ε (scale='group', std_ddof=0) below.

Each numeric reference below is a float64 NumPy transcription of the cited lines, written for these tests.
"""
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rljax import advantages as A
from rljax import objectives as O
from rljax.filters import _curriculum as C
from rljax.types import PolicyOutputs, TrainBatch
from _fidelity import any_deviation as _any_dev, mirror_git as _git
from _fidelity import defaults as _defaults, fid as _fid, record as _record




# ------------------------------------------------------------------------------ clip_cov (not held)

def _verl_masked_mean(x, m):
  """their fork's verl/utils/torch_functional.py:123-125."""
  return (x * m).sum() / (m.sum() + 1e-8)


def _clip_cov_theirs(old, logp, adv, mask, low, high, ratio=2e-4, lb=1.0, ub=5.0):
  """PRIME-RL/Entropy-Mechanism-of-RL@88505792 core_algos.py:469-518 compute_policy_loss_clip_cov and agg_loss
  token-mean (:333-334), for a candidate set of at most k (the randperm draw then takes all of them)."""
  r = np.exp(logp - old)
  l1 = -adv * r
  l2 = -adv * np.clip(r, 1 - low, 1 + high)
  clipped = (l2 > l1) & (mask > 0)
  cov = (adv - _verl_masked_mean(adv, mask)) * (logp - _verl_masked_mean(logp, mask))
  cov[mask == 0] = -np.inf
  cov[clipped] = -np.inf
  k = max(int(ratio * mask.sum()), 1)
  cand = np.argwhere((cov < ub) & (cov > lb) & (mask > 0))
  assert 0 < len(cand) <= k, "the transcription covers a candidate set the draw takes whole"
  corr = np.ones_like(adv)
  corr[cand[:, 0], cand[:, 1]] = 0
  loss = np.maximum(l1, l2) * corr
  return _verl_masked_mean(loss, mask), loss, clipped


def _clip_cov_data():
  mask = np.array([[1, 1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1]], np.float64)
  adv = np.repeat(np.array([[2.5], [-1.0], [-0.5]]), 8, axis=1)
  old = np.full(mask.shape, -1.2)
  old[0, :] = [-1.0, -1.1, -0.9, -1.3, -0.2, -1.0, -1.05, -1.0]
  logp = old + np.array([[0.01, -0.02, 0.03, 0.0, 0.02, 0.95, -0.01, 0.0],
                         [0.0, 0.01, -0.01, 0.02, 0.0, 0.0, 0.0, 0.0],
                         [-0.02, 0.01, 0.0, 0.01, -0.01, 0.02, 0.0, -0.03]])  # r(0,5) = e^0.95 > 2: clipped
  return old, logp, adv, mask


def test_clip_cov_their_token_mean_is_ours_times_n_over_n_plus_1e8():
  old, logp, adv, mask = _clip_cov_data()
  theirs, their_tok, clipped = _clip_cov_theirs(old, logp, adv, mask, 1.0, 1.0)  # the recipes' clip_ratio 1 / 1
  assert clipped.sum() == 1
  with jax.enable_x64(True):
    batch = TrainBatch(tokens=jnp.zeros(mask.shape, jnp.int32), loss_mask=jnp.asarray(mask),
                       advantages=jnp.asarray(adv), group_id=jnp.arange(3, dtype=jnp.int32),
                       logp_old=jnp.asarray(old))
    loss, _ = O.clip_cov(1.0, 1.0)(PolicyOutputs(logp=jnp.asarray(logp)), batch)
    loss = np.asarray(loss)
  assert loss.dtype == np.float64
  n = mask.sum()
  np.testing.assert_allclose(loss * mask, their_tok * mask, rtol=1e-14, atol=1e-15)  # the same token detached
  ours = (loss * mask).sum() / n  # chain's token_mean: Σ / n
  assert theirs != ours
  np.testing.assert_allclose(theirs / ours, n / (n + 1e-8), rtol=1e-13)
  assert abs(theirs / ours - 1.0) > 1e-11  # 1e-8 / 20 = 5e-10
  assert "(n + 1e-8)" in _defaults("clip_cov")["aggregation"][1]
  assert _any_dev("clip_cov", "masked_sum / (n + ", "torch_functional.py:123-125", "1e-8/n")
  assert "torch_functional.py:123-125" in _fid("clip_cov").read and "dapo_ray_trainer.py:184-217" in _fid("clip_cov").read
  filt = _defaults("clip_cov")["zero-variance filter (not this term's)"][1]
  assert "ValueError" in filt and "batch[:traj_bsz]" in filt and "10" in filt


def test_clip_cov_divisor_and_filter_lines_as_recorded():
  repo = "PRIME-RL+Entropy-Mechanism-of-RL"
  tf = _git(repo, "show", "88505792:verl/utils/torch_functional.py").splitlines()
  assert tf[122].startswith("def masked_mean(") and tf[124].strip() == (
      "return (values * mask).sum(axis=axis) / (mask.sum(axis=axis) + 1e-8)")
  ca = _git(repo, "show", "88505792:verl/trainer/ppo/core_algos.py").splitlines()
  assert ca[333].strip() == "loss = verl_F.masked_mean(loss_mat, loss_mask)"
  assert "verl_F.masked_mean(advantages, response_mask)" in ca[496] and "cov_all" in ca[496]
  tr = _git(repo, "show", "88505792:recipe/dapo/dapo_ray_trainer.py").splitlines()
  assert tr[211].strip().startswith("raise ValueError(") and tr[216].strip() == "batch = batch[:traj_bsz]"
  sh = _git(repo, "show", "88505792:recipe/dapo/7b_clip_cov.sh").splitlines()
  assert sh[34].strip() == "gen_prompt_bsz=$((train_prompt_bsz * 1))" and sh[32].strip() == "max_num_gen_batches=10"


# ------------------------------------------------------------------------------ dump (not held)

class _Estimator:
  """ZhentingWang/DUMP@235e85d4 verl/utils/curriculum_learning.py:35-79 LearnabilityEstimator (the parts the
  weights read: the window of 300 advantages, mu = mean |A| over it, n_samples)."""

  def __init__(self):
    self.adv, self.mu, self.n = [], 0.0, 0

  def update(self, adv):
    if len(adv) == 0:
      return
    self.adv.extend(list(adv))
    if len(self.adv) > 300:
      self.adv = self.adv[-300:]
    self.mu = float(np.mean(np.abs(np.array(self.adv))))
    self.n += len(adv)


def _dump_weights(est):
  """curriculum_learning.py:137-197 compute_sampling_weights (exploration_weight 1.0, temperature 0.1)."""
  total = max(1, sum(e.n for e in est))
  s = np.array([e.mu + 1.0 * np.sqrt(2 * np.log(total + 1) / (e.n + 1)) for e in est])
  w = np.exp((s - s.max()) / 0.1)
  return w / w.sum()


def test_dump_weights_and_window_equal_the_authors_estimator():
  rng = np.random.default_rng(20261222)
  est = [_Estimator() for _ in range(3)]
  state = C.curriculum_init(3, 300)
  for step in range(6):  # 256 rows a step; arm 2 unseen until step 3; arms 0 and 1 pass the window of 300
    arms = rng.choice([0, 1] if step < 3 else [0, 1, 2], 128 * 16 // 8)
    adv = rng.normal(size=arms.size) * rng.choice([0.0, 1.0], arms.size)
    for j in range(3):
      est[j].update(adv[arms == j])
    state = C.curriculum_observe(state, arms, adv)
    sc = C.curriculum_scores(state, exploration=1.0)
    ours = C.arm_probs(sc["score"], np.ones(3, bool), 0.1)
    np.testing.assert_allclose(ours, _dump_weights(est), rtol=1e-12, atol=1e-300)
  np.testing.assert_allclose(C.learnability(state), [e.mu for e in est], rtol=1e-12)
  assert int(state.count.sum()) == sum(e.n for e in est) and state.filled.max() == 300
  read = _fid("dump").read
  assert ":214-411" in read and ":353-361" in read and ":369" in read
  assert ":212-330 (CurriculumSampler: source ~ weights" not in read


def test_dump_sampler_draw_lines_as_recorded():
  text = _git("ZhentingWang+DUMP", "show", "235e85d4:verl/utils/curriculum_learning.py").splitlines()
  assert text[213].startswith("class CurriculumSampler") and text[324].strip().startswith("def __iter__")
  assert "self._weights[s]" in text[352] and "self.rng.choices(valid_sources, weights=valid_weights" in text[360]
  assert text[368].strip() == "idx = self.rng.choice(self.source_indices[source])"
  assert not any("rng.choice" in line for line in text[211:330])  # the old pointer holds no draw
  assert text[410].strip() == "return len(self.dataset)"


# ------------------------------------------------------------------------------ dara (not held)

def _rdgdpo_theirs(scores, index, eps=1e-6, tau=1e-8, w_max=5.0):
  """zhaihaotian/DARA@04591020 math/rdgdpo/advantages.py standardize (correction=1), support_statistics (active:
  Σ|A| > tau per group, density = mean over groups), rdgdpo weights sqrt(max ρ / ρ).clamp(w_max) on live channels,
  calibration 'positive', normalize_responses (÷ std(correction=1) + ε)."""
  groups = [np.flatnonzero(index == g) for g in dict.fromkeys(index.tolist())]
  ch = np.zeros_like(scores)
  for rows in groups:
    v = scores[rows]
    ch[rows] = (v - v.mean(0)) / (v.std(0, ddof=1) + eps)
  active = np.stack([np.abs(ch[rows]).sum(0) > tau for rows in groups])
  dens = active.mean(0)
  w = np.ones_like(dens)
  live = dens > 0
  w[live] = np.minimum(np.sqrt(dens[live].max() / dens[live]), w_max)
  s = (w * np.maximum(ch, 0) + np.minimum(ch, 0)).sum(1)
  return (s - s.mean()) / (s.std(ddof=1) + eps)


def test_dara_equals_rdgdpo_and_the_record_gives_both_filter_caps():
  rng = np.random.default_rng(7)
  g, n = 12, 16
  index = np.repeat(np.arange(g), n)
  correct = rng.choice([0.0, 1.0], g * n, p=[0.6, 0.4])
  length = np.where(np.repeat(np.arange(g) < 3, n), rng.choice([0.0, 1.0], g * n, p=[0.2, 0.8]), 1.0)  # sparse
  scores = np.stack([correct, length], 1)
  theirs = _rdgdpo_theirs(scores, index)
  with jax.enable_x64(True):
    ours, info = A.dara(jnp.asarray(scores), jnp.asarray(index, jnp.int32))
  np.testing.assert_allclose(np.asarray(ours), theirs, rtol=1e-12, atol=1e-12)
  assert float(np.asarray(info["weights"])[1]) > 1.0  # the sparse length channel is up-weighted
  filt = _defaults("dara")["zero-variance filter (not this stage's)"][1]
  assert "max_num_gen_batches 2 for the 1.5B runs, 4 for the 4B models" in filt and "4 for the 4B models) raises" in filt
  assert "'For the 4B models we used 0.8, 160 and 4'" in _fid("dara").read


# ------------------------------------------------------------------------------ qae (not held)

def _torch_quantile_linear(v, q):
  s = np.sort(v)
  rank = q * (s.size - 1)
  lo = int(math.floor(rank))
  hi = min(lo + 1, s.size - 1)
  return s[lo] + (rank - lo) * (s[hi] - s[lo])


def _qae_theirs(scores, index, k, eps=1e-6):
  """volcengine/verl@26a734e7 core_algos.py:262-320 compute_grpo_outcome_advantage with the README's quoted
  lines (quantile_k in (0, 1): torch.quantile, linear) in place of the mean; torch.std unbiased."""
  out = np.empty_like(scores)
  for g in np.unique(index):
    v = scores[index == g]
    mean, std = (0.0, 1.0) if v.size == 1 else (_torch_quantile_linear(v, k), v.std(ddof=1))
    out[index == g] = (v - mean) / (std + eps)
  return out


@pytest.mark.parametrize("n", [16, 8])
def test_qae_the_group_size_sets_the_gate(n):
  fails = np.arange(n + 1)
  scores = np.concatenate([np.where(np.arange(n) < f, -1.0, 1.0) for f in fails])  # every failure count
  index = np.repeat(np.arange(n + 1), n)
  theirs = _qae_theirs(scores, index, 0.4)
  with jax.enable_x64(True):
    ours, _ = A.qae(jnp.asarray(scores), jnp.asarray(index, jnp.int32), quantile=0.4, mode="authors")
  np.testing.assert_allclose(np.asarray(ours), theirs, rtol=1e-13, atol=1e-15)
  both = [bool((theirs[index == g] > 0).any() and (theirs[index == g] < 0).any()) for g in range(n + 1)]
  if n == 16:  # rank 0.4·15 = 6: an order statistic, one sign per group (= inverted_cdf)
    assert not any(both)
    with jax.enable_x64(True):
      inv, _ = A.qae(jnp.asarray(scores), jnp.asarray(index, jnp.int32), quantile=0.4, interpolation="inverted_cdf",
                     mode="authors")
    np.testing.assert_allclose(np.asarray(inv), theirs, rtol=1e-13, atol=1e-15)
  else:  # rank 0.4·7 = 2.8: interpolated, 3 failures of 8 give the baseline 0.6
    assert both[3] and sum(both) > 0
    assert abs(_torch_quantile_linear(scores[index == 3], 0.4) - 0.6) < 1e-12
  ours_d, theirs_d = _defaults("qae")["group size n (the quantile's rank K·(n − 1))"]
  assert "8 by default" in ours_d and "16" in theirs_d and "run_dapo_qwen3_8b_base_npu.sh:28" in theirs_d
  assert _any_dev("qae", "rank is 2.8", "Q = −1 + 0.8·2 = 0.6", "rl.group_size=16")


def test_qae_dapo_scripts_set_sixteen_responses():
  for commit in ("26a734e7", "v0.7.0"):
    for name, line in (("run_dapo_qwen2.5_32b.sh", 30), ("run_dapo_qwen3_8b_base_npu.sh", 28),
                       ("run_dapo_qwen3_14b_base_npu.sh", 28)):
      text = _git("volcengine+verl", "show", f"{commit}:recipe/dapo/{name}").splitlines()
      assert text[line - 1].strip() == "n_resp_per_prompt=16"


# ------------------------------------------------------------------------------ segment (not held)

def _bae_group_mean(rewards, index, std=None, eps=1e-6):
  """arXiv 2602.10231 App. B Algorithm 1 with the Group Mean Baseline for every block (Sec. 4.3 item 3):
  A_k = r_k − mean_g r_k, optionally ÷ (σ + ϵ) with Sec. 3.1's population σ."""
  out = np.empty_like(rewards)
  for g in np.unique(index):
    v = rewards[index == g]
    a = v - v.mean(0)
    out[index == g] = a if std is None else a / (v.std(0, ddof=0) + eps)
  return out


def test_segment_equals_algorithm_1_group_mean_and_the_record_cites_no_std_rule():
  rng = np.random.default_rng(3)
  g, n, t = 4, 32, 10  # group_size 32 (Table 4)
  index = np.repeat(np.arange(g), n)
  r = np.stack([rng.choice([0.0, 1.0], g * n), -(rng.uniform(size=g * n) - rng.choice([0.0, 1.0], g * n)) ** 2], 1)
  seg = np.where(np.arange(t)[None, :] < rng.integers(2, 8, g * n)[:, None], 0, 1)  # solution | confidence block
  for scale, std, ddof in (("none", None, 1), ("group", "population", 0)):
    want = _bae_group_mean(r, index, std)
    with jax.enable_x64(True):
      ours, info = A.segment(jnp.asarray(r), jnp.asarray(seg, jnp.int32), jnp.asarray(index, jnp.int32),
                             scale=scale, std_ddof=ddof)
    np.testing.assert_allclose(np.asarray(info["per_segment"]), want, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(np.asarray(ours), np.take_along_axis(want, seg, 1), rtol=1e-12, atol=1e-13)
  f = _fid("segment")
  assert "as SLCA/DSS-GRPO" not in f.differences and "no std rule" in f.differences
  assert not _any_dev("segment", "as SLCA/DSS-GRPO") and _any_dev("segment", "give no std rule")
  assert _record("segment").count("no std rule") == 2
  assert "seed 001 L57" in _fid("segment").read and "difficulty-aware scaling" in _fid("segment").read


def test_segment_seed_abstracts_state_no_std_rule():
  path = "/work/shared/seeds/001_5839a3671b0b4d92.txt"
  if not os.path.exists(path):
    pytest.skip("the seed file is not on this machine")
  lines = open(path, encoding="utf-8").read().splitlines()
  for i in (57, 79):
    assert "standard deviation" not in lines[i - 1].lower() and "std" not in lines[i - 1].lower()
  assert "group-relative advantages per segment" in lines[78]
  assert "decouples advantage estimation at the structural segment level" in lines[56]
