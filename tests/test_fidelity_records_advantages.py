"""Fidelity, four-question records (issue #51) for the advantages room, controllers and multi-reward rows: float64
NumPy transcriptions of the cited sources' lines (written for these tests, not copied), compared with rljax at the
source's settings. Each test names the file and lines it transcribes.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rljax
import rljax.advantages as A

ROWS = {r.name: r for r in rljax.catalog()}


# ----------------------------------------------------------------------------------------------------------------
# verl v0.7.0 (f9c855f7) verl/utils/torch_functional.py:287-340: masked_mean divides by mask.sum() + 1e-8;
# masked_var = masked_mean((x − mean)²)·n/(n − 1); masked_whiten = (x − mean)·rsqrt(var + 1e-8).

def _verl_masked_mean(x, m):
  return (x * m).sum() / (m.sum() + 1e-8)


def _verl_masked_whiten(x, m):
  mean = _verl_masked_mean(x, m)
  n = m.sum()
  var = _verl_masked_mean((x - mean) ** 2, m) * n / (n - 1)
  return (x - mean) / np.sqrt(var + 1e-8)


# ours divides by Σmask, verl by Σmask + 1e-8 (recorded deviation): a relative difference of order 1e-8/Σmask,
# far below this tolerance, far above float64 rounding.
_WHITEN_RTOL = 1e-8


def _mask(b, t, seed):
  rng = np.random.default_rng(seed)
  m = np.zeros((b, t))
  for i, n in enumerate(rng.integers(2, t + 1, size=b)):
    m[i, :n] = 1.0
  return m


def test_reinforce_pp_baseline_matches_verl_lines_423_471():
  """verl core_algos.py:423-471: scores = Σ_t r; id2mean (singleton: 0); (scores − mean) tiled over T, × mask,
  masked_whiten × mask."""
  rng = np.random.default_rng(3)
  gid = np.array([0, 0, 0, 1, 1, 1, 1, 2, 3, 3], np.int32)  # group 2 is a singleton
  b, t = gid.size, 7
  m = _mask(b, t, 4)
  r = rng.normal(size=b).round(2)
  last = t - 1 - np.argmax(m[:, ::-1], axis=1)
  tok = np.zeros((b, t))
  tok[np.arange(b), last] = r
  scores = tok.sum(-1)
  means = {g: (0.0 if (gid == g).sum() == 1 else scores[gid == g].mean()) for g in np.unique(gid)}
  centred = scores - np.array([means[g] for g in gid])
  ref = _verl_masked_whiten(np.tile(centred[:, None], (1, t)) * m, m) * m
  with jax.enable_x64(True):
    got, _ = A.reinforce_pp_baseline(jnp.asarray(r), jnp.asarray(gid), mask=jnp.asarray(m), singleton="raw")
    assert got.dtype == jnp.float64
    zero, _ = A.reinforce_pp_baseline(jnp.asarray(r), jnp.asarray(gid), mask=jnp.asarray(m))
  np.testing.assert_allclose(np.asarray(got), ref, rtol=_WHITEN_RTOL, atol=1e-12)
  # the default singleton='zero' differs from verl only on the singleton's row (before whitening: 0, not r)
  centred[gid == 2] = 0.0
  ref0 = _verl_masked_whiten(np.tile(centred[:, None], (1, t)) * m, m) * m
  np.testing.assert_allclose(np.asarray(zero), ref0, rtol=_WHITEN_RTOL, atol=1e-12)
  assert not np.allclose(np.asarray(zero), ref)


def test_remax_matches_verl_lines_620_652():
  """verl core_algos.py:620-652: returns = (r·m).flip.cumsum.flip; A = returns − b·m (token rewards, holes)."""
  rng = np.random.default_rng(5)
  b, t = 5, 8
  m = _mask(b, t, 6)
  m[1, 2] = 0.0  # an observation hole
  tok = rng.normal(size=(b, t))  # rewards also outside the mask: verl multiplies them by the mask first
  base = rng.normal(size=b)
  returns = np.flip(np.cumsum(np.flip(tok * m, -1), -1), -1)
  ref = returns - base[:, None] * m
  with jax.enable_x64(True):
    got, info = A.remax(jnp.asarray(tok * m), jnp.asarray(base), mask=jnp.asarray(m))
    assert got.dtype == jnp.float64
  np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-13, atol=1e-13)
  np.testing.assert_allclose(np.asarray(info["returns"]), returns, rtol=1e-13, atol=1e-13)


def test_gae_matches_verl_lines_213_260():
  """verl core_algos.py:213-260: the reversed loop with mask-0 tokens carrying nextvalues and lastgaelam;
  returns = A + V; masked_whiten(A) (verl leaves whitened values outside the mask; ours multiplies by it)."""
  rng = np.random.default_rng(7)
  b, t, gamma, lam = 6, 9, 0.97, 0.9
  m = _mask(b, t, 8)
  m[2, 3] = m[4, 1] = 0.0  # observation holes
  rew = rng.normal(size=(b, t)) * m
  val = rng.normal(size=(b, t))
  nextvalues = np.zeros(b)
  lastgaelam = np.zeros(b)
  rev = []
  for s in reversed(range(t)):
    delta = rew[:, s] + gamma * nextvalues - val[:, s]
    lastgaelam_ = delta + gamma * lam * lastgaelam
    nextvalues = val[:, s] * m[:, s] + (1 - m[:, s]) * nextvalues
    lastgaelam = lastgaelam_ * m[:, s] + (1 - m[:, s]) * lastgaelam
    rev.append(lastgaelam)
  adv = np.stack(rev[::-1], axis=1)
  returns = adv + val
  ref = _verl_masked_whiten(adv, m)
  with jax.enable_x64(True):
    got, info = A.gae(jnp.asarray(rew), jnp.asarray(val), jnp.asarray(m), gamma=gamma, lam=lam)
    assert got.dtype == jnp.float64
  np.testing.assert_allclose(np.asarray(got), ref * m, rtol=_WHITEN_RTOL, atol=1e-12)
  np.testing.assert_allclose(np.asarray(info["returns"]), returns, rtol=1e-13, atol=1e-13)


def test_reinforce_pp_reset_matches_verl_lines_581_616_with_its_masked_mean():
  """verl core_algos.py:581-616 with its masked_whiten (÷ Σmask + 1e-8): reset_at_mask=True."""
  rng = np.random.default_rng(9)
  b, t, gamma = 5, 8, 0.9
  m = _mask(b, t, 10)
  m[0, 1] = 0.0
  tok = rng.normal(size=(b, t)) * m
  returns = np.zeros((b, t))
  running = np.zeros(b)
  for s in reversed(range(t)):
    running = tok[:, s] + gamma * running
    returns[:, s] = running
    running = running * m[:, s]
  ref = _verl_masked_whiten(returns, m) * m
  with jax.enable_x64(True):
    got, _ = A.reinforce_pp(jnp.asarray(tok), jnp.asarray(m), gamma=gamma, reset_at_mask=True)
  np.testing.assert_allclose(np.asarray(got), ref, rtol=_WHITEN_RTOL, atol=1e-12)


@pytest.mark.parametrize("name", ["reinforce_pp", "reinforce_pp_baseline", "remax", "gae"])
def test_verl_rows_are_in_full_form_and_cite_the_stored_version(name):
  fid = ROWS[name].fidelity
  assert fid.in_full and "v0.7.0" in fid.read and "0.9.1" not in fid.reference


# the rows moved to the four-question form in this pass, each with the commit (code) or the page (paper) it read
_MOVED = {"reinforce_pp": "@v0.7.0", "reinforce_pp_baseline": "@v0.7.0", "remax": "@v0.7.0", "gae": "@v0.7.0",
          "adaptive_kl": "@v0.7.0", "gdpo": "@b080e63d", "passk": "@c3ba575e", "vote": "@e2a32547",
          "role_ema_baseline": "@a02d0ed8", "hadw": "@8b087945", "canon": "@7d6f814f", "gd2po": "@f1ad765b",
          "temperature_control": "@7e90b8e9", "entropic": "@2470730c", "dara": "@04591020", "composite": "@f2cd5771",
          "step_episode_mix": "@93afb003", "implicit_progress_reward": "@9284b4c0", "gagar": "@0d88bb36",
          "uniqueness": "61124452340", "sa_mrpo": "59225745322", "sign_preserving_modulation": "70801290449",
          "segment": "60886396402", "outcome_conditioned_baseline": "60886396402", "task_normalized": "@12489b07"}


@pytest.mark.parametrize("name", sorted(_MOVED))
def test_moved_rows_answer_the_four_questions(name):
  fid = ROWS[name].fidelity
  assert fid.in_full and _MOVED[name] in fid.read, fid.read
  assert fid.placement.startswith("theirs") and "ours" in fid.placement
  assert fid.basis != "abstract"


# ----------------------------------------------------------------------------------------------------------------
# GDPO: NVlabs/GDPO@b080e63d trl-GDPO/trl-0.18.0-gdpo/trl/trainer/grpo_trainer.py:1222-1248.

def _gdpo_trl(rewards, num_generations, weights):
  rewards = np.nan_to_num(rewards)
  per = []
  for i in range(rewards.shape[1]):
    r = rewards[:, i].reshape(-1, num_generations)
    mean = np.repeat(r.mean(1), num_generations)
    std = np.repeat(r.std(1, ddof=1), num_generations)
    per.append((rewards[:, i] - mean) / (std + 1e-4))
  pre_bn = (np.stack(per, 1) * weights[None, :]).sum(1)
  return pre_bn, (pre_bn - pre_bn.mean()) / (pre_bn.std(ddof=1) + 1e-4)


def test_gdpo_matches_the_authors_trl_code_up_to_the_recorded_batch_step():
  rng = np.random.default_rng(11)
  n, g, k = 4, 5, 3
  rewards = rng.integers(0, 3, size=(n * g, k)).astype(np.float64) / 2
  gid = np.repeat(np.arange(g), n).astype(np.int32)
  w = np.array([1.0, 0.5, 2.0])
  pre_bn, theirs = _gdpo_trl(rewards, n, w)
  with jax.enable_x64(True):
    raw, _ = A.gdpo(jnp.asarray(rewards), jnp.asarray(gid), weights=tuple(w), eps=1e-4, whiten=False)
    ours, _ = A.gdpo(jnp.asarray(rewards), jnp.asarray(gid), weights=tuple(w), eps=1e-4)
    assert ours.dtype == jnp.float64
  np.testing.assert_allclose(np.asarray(raw), pre_bn, rtol=1e-13, atol=1e-13)  # the group step: theirs exactly
  # the batch step: ours (x − mean)·rsqrt(var + 1e-8) (recorded), theirs (x − mean)/(std + 1e-4)
  std = pre_bn.std(ddof=1)
  np.testing.assert_allclose(np.asarray(ours), (pre_bn - pre_bn.mean()) / np.sqrt(std ** 2 + 1e-8), rtol=1e-13,
                             atol=1e-13)
  np.testing.assert_allclose(np.asarray(ours), theirs, rtol=2e-4 / std)
  assert not np.allclose(np.asarray(ours), theirs, rtol=1e-9, atol=0)


# ----------------------------------------------------------------------------------------------------------------
# Pass@k: RUCAIBox/Passk_Training@c3ba575e code/passk_adv.py:10-19 (calc_adv), 21-43 (compute_advantage).

def _comb(n, k):
  from math import comb
  return comb(n, k) if n >= 0 and k >= 0 else 0  # scipy.special.comb: 0 for a negative N or k


def _calc_adv(val, k):
  c = len(np.where(val == 1)[0])
  n = len(val)
  rho = 1 - _comb(n - c, k) / _comb(n, k)
  sigma = np.sqrt(rho * (1 - rho))
  adv_p = (1 - rho) / (sigma + 1e-6)
  adv_n = (1 - rho - _comb(n - c - 1, k - 1) / _comb(n - 1, k - 1)) / (sigma + 1e-6)
  new_val = np.where(val == 1, adv_p, val)
  return np.where(new_val == 0, adv_n, new_val), sigma


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_passk_matches_the_authors_calc_adv_up_to_their_sigma_eps(k):
  rng = np.random.default_rng(12 + k)
  sizes = [8, 8, 6, 5, 8]
  gid = np.repeat(np.arange(len(sizes)), sizes).astype(np.int32)
  r = rng.integers(0, 2, size=gid.size).astype(np.float64)
  r[gid == 4] = 1.0  # c = n: their σ = 0 gives 0, as ours
  ref = np.zeros_like(r)
  scale = np.ones_like(r)
  for g in range(len(sizes)):
    adv, sigma = _calc_adv(r[gid == g], k)
    ref[gid == g] = adv
    scale[gid == g] = sigma / (sigma + 1e-6)  # ours divides by σ, theirs by σ + 1e-6 (recorded)
  with jax.enable_x64(True):
    got, _ = A.passk(jnp.asarray(r), jnp.asarray(gid), k=k)
    assert got.dtype == jnp.float64
  np.testing.assert_allclose(np.asarray(got) * scale, ref, rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------------------------------------------
# GLPO: HanYiton/VAA-CSEC@e2a32547 YuYi/glpo/glpo_swift_plugin.py _glpo_compute_advantages Steps 5-7:
# base = (R − mean_K)/clamp(std_K (ddof 1), min=1e-4), bonus = scale·max(0, R − R(G)); R(G) = the task reward of
# Counter(valid answers).most_common(1) (a unique majority here; every rollout of an answer has the same reward).

def test_vote_float64_matches_glpo_steps_5_to_7():
  rng = np.random.default_rng(21)
  groups, k = 5, 8
  answers = rng.integers(0, 4, size=(groups, k))
  answers[:, :4] = 2  # a strict majority
  answer_reward = rng.uniform(-1.5, 3.7, size=(groups, 4))
  r = np.take_along_axis(answer_reward, answers, axis=1)
  r[1] = 0.7  # a zero-variance group: std clamped at 1e-4
  answers[1] = 2
  ref = np.zeros_like(r)
  for i in range(groups):
    vals, counts = np.unique(answers[i], return_counts=True)
    r_g = r[i][answers[i] == vals[np.argmax(counts)]][0]
    base = (r[i] - r[i].mean()) / max(r[i].std(ddof=1), 1e-4)
    ref[i] = base + 0.5 * np.maximum(r[i] - r_g, 0.0)
  gid = np.repeat(np.arange(groups), k).astype(np.int32)
  with jax.enable_x64(True):
    got, _ = A.vote(jnp.asarray(r.reshape(-1)), jnp.asarray(answers.reshape(-1)), jnp.asarray(gid), eps=1e-4,
                    bonus=0.5)
    assert got.dtype == jnp.float64
  # atol: the mean's float64 rounding (≈1e-16) divided by the 1e-4 floor in the zero-variance group
  np.testing.assert_allclose(np.asarray(got), ref.reshape(-1), rtol=1e-13, atol=1e-11)


# ----------------------------------------------------------------------------------------------------------------
# CANON: biuboomc/CANON@7d6f814f verl/trainer/ppo/core_algos.py:281-367 (compute_dr_length_on_mean_group_outcome_
# advantage; 369-455, the entropy variant, splits the same way by mean token entropy): sort each group by the metric,
# the first n//2 are "short", the rest "long"; A = (λ(r − α μ_other ± β) + (1 − λ)(r − μ_own))/max_length.

def _canon_authors(scores, metric, index, alpha, beta, lam, max_length):
  out = np.zeros_like(scores)
  for g in np.unique(index):
    rows = np.where(index == g)[0]
    order = rows[np.argsort(metric[rows], kind="stable")]
    mid = len(rows) // 2
    short, long_ = order[:mid], order[mid:]
    mu_s, mu_l = scores[short].mean(), scores[long_].mean()
    for i in long_:
      out[i] = (lam * (alpha * scores[i] - mu_s + beta) + (1 - lam) * (scores[i] - mu_l)) / max_length
    for i in short:
      out[i] = (lam * (scores[i] - alpha * mu_l - beta) + (1 - lam) * (scores[i] - mu_s)) / max_length
  return out


@pytest.mark.parametrize("lam", [1.0, 0.3])
def test_canon_matches_the_authors_split_at_their_settings(lam):
  rng = np.random.default_rng(31)
  n, groups, max_length = 8, 4, 8192.0
  gid = np.repeat(np.arange(groups), n).astype(np.int32)
  r = rng.integers(0, 2, size=gid.size).astype(np.float64)
  length = rng.permutation(gid.size).astype(np.float64)  # distinct metric values: no ties
  ref = _canon_authors(r, length, gid, 1.0, 0.0, lam, max_length)
  with jax.enable_x64(True):
    got, _ = A.canon(jnp.asarray(r), jnp.asarray(length), jnp.asarray(gid), inter_coef=2 * lam, intra_coef=1.0,
                     scale="none")
    assert got.dtype == jnp.float64
  np.testing.assert_allclose(np.asarray(got) / max_length, ref, rtol=1e-12, atol=1e-15)


# ----------------------------------------------------------------------------------------------------------------
# GD²PO: Qwen-Applications/GD2PO@f1ad765b tool-calling/verl/trainer/ppo/ray_trainer.py:243-317 (per-reward GRPO,
# the mixed-sign mask on token-summed advantages, the group keep ratio), 323-360 (the ratio-conflict rule),
# 472-497 (gdpo_filter_group_ratio); the per-reward GRPO is their core_algos.py compute_grpo_outcome_advantage
# (unbiased std + 1e-6). Compared before the final whitening (theirs over kept tokens, ours over kept rows: recorded).

def _gd2po_authors_pre_whiten(rewards, index, lengths, ratio_threshold=None):
  b, k = rewards.shape
  per = np.zeros((k, b))
  for j in range(k):
    for g in np.unique(index):
      rows = index == g
      x = rewards[rows, j]
      per[j, rows] = (x - x.mean()) / (x.std(ddof=1) + 1e-6)
  rollout = per * lengths[None, :]  # (A·mask).sum(-1): the token sum of a constant A
  conflict = (rollout > 1e-8).any(0) & (rollout < -1e-8).any(0)
  if ratio_threshold is not None:
    ratio = rollout.sum(0) / (np.abs(rollout).sum(0) + 1e-8)
    conflict = conflict & (np.abs(ratio) < ratio_threshold)
  keep = ~conflict
  ratio_g = np.zeros(b)
  for g in np.unique(index):
    rows = index == g
    ratio_g[rows] = keep[rows].sum() / rows.sum()
  return per.sum(0) * ratio_g * keep, keep


@pytest.mark.parametrize("tau", [None, 0.8])
def test_gd2po_matches_the_authors_rules_before_whitening(tau):
  rng = np.random.default_rng(41)
  n, groups, k = 4, 6, 3
  gid = np.repeat(np.arange(groups), n).astype(np.int32)
  rewards = rng.normal(size=(gid.size, k))
  lengths = rng.integers(3, 9, size=gid.size).astype(np.float64)
  ref, keep = _gd2po_authors_pre_whiten(rewards, gid, lengths, tau)
  assert 0 < keep.sum() < keep.size
  with jax.enable_x64(True):
    got, info = A.gd2po(jnp.asarray(rewards), jnp.asarray(gid), whiten=False, ratio_threshold=tau,
                        conflict_tol=1e-8)
    assert got.dtype == jnp.float64
  np.testing.assert_array_equal(np.asarray(info["keep"]), keep)
  np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------------------------------------------
# DARA: zhaihaotian/DARA@04591020 math/rdgdpo/advantages.py (standardize, normalize_responses, support_statistics,
# compute_advantages method 'rdgdpo'): group GRPO per channel (std correction 1, + 1e-6), density = share of groups
# whose Σ|A| > tau = 1e-8, w = min(w_max = 5, sqrt(max ρ/ρ)), positive calibration, response-level (x − mean)/(std + ε).

def _rdgdpo(scores, index, calibration="positive", w_max=5.0, eps=1e-6, tau=1e-8):
  groups = [np.where(index == g)[0] for g in np.unique(index)]
  adv = np.zeros_like(scores)
  for rows in groups:
    v = scores[rows]
    adv[rows] = (v - v.mean(0)) / (v.std(0, ddof=1) + eps)
  active = np.stack([np.abs(adv[rows]).sum(0) > tau for rows in groups])
  density = active.mean(0)
  w = np.ones_like(density)
  live = density > 0
  w[live] = np.minimum(np.sqrt(density[live].max() / density[live]), w_max)
  cal = w * np.clip(adv, 0, None) + np.clip(adv, None, 0) if calibration == "positive" else w * adv
  s = cal.sum(-1)
  return (s - s.mean()) / (s.std(ddof=1) + eps)


@pytest.mark.parametrize("calibration", ["positive", "symmetric"])
def test_dara_float64_matches_rdgdpo(calibration):
  rng = np.random.default_rng(51)
  gid = np.repeat(np.arange(12), 4).astype(np.int32)
  r = np.zeros((gid.size, 2))
  r[:, 0] = rng.integers(0, 2, size=gid.size)
  r[gid < 2, 1] = rng.normal(size=8)  # a sparse second channel: density 2/12, weight capped at sqrt(6)
  ref = _rdgdpo(r, gid, calibration)
  with jax.enable_x64(True):
    got, _ = A.dara(jnp.asarray(r), jnp.asarray(gid), calibration=calibration)
    assert got.dtype == jnp.float64
  np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------------------------------------------
# composite: huggingface/trl@f2cd5771 trl/trainer/grpo_trainer.py:2683 (rewards_per_func · reward_weights).nansum(1)
# on finite rewards (the rows TRL scores; a None/NaN component is a recorded deviation).

def test_composite_matches_trl_weighted_sum_in_float64():
  from rljax.rewards import composite
  rng = np.random.default_rng(61)
  cols = rng.normal(size=(7, 3))
  w = np.array([0.5, 2.0, -1.0])
  fns = {n: (lambda c, r=None, _k=k, **kw: cols[:, _k]) for k, n in enumerate(("a", "b", "c"))}
  total, info = composite(fns, dict(zip("abc", w)))(["x"] * 7)
  ref = np.nansum(cols.astype(np.float32).astype(np.float64) * w[None, :], axis=1)  # components are float32
  np.testing.assert_allclose(total, ref.astype(np.float32), rtol=0, atol=0)  # float64 sum, float32 result
  np.testing.assert_array_equal(info["matrix"], cols.astype(np.float32))


# ----------------------------------------------------------------------------------------------------------------
# float64 kept under x64 (issue #51, "silent float32 under x64"): the multi-reward weights, SA-MRPO's saturation and
# GD²PO's query weight were float32 before; each is compared here with a float64 transcription at 1e-12.

def _group_z(r, gid, ddof, eps):
  out = np.zeros_like(r)
  for g in np.unique(gid):
    rows = gid == g
    out[rows] = (r[rows] - r[rows].mean(0)) / (r[rows].std(0, ddof=ddof) + eps)
  return out


def test_gdpo_weights_stay_float64_under_x64():
  rng = np.random.default_rng(71)
  gid = np.repeat(np.arange(5), 4).astype(np.int32)
  r = rng.normal(size=(gid.size, 3))
  w = np.array([0.3, 0.7, 0.1])  # not float32-representable
  pre = _group_z(r, gid, 1, 1e-6) @ w
  with jax.enable_x64(True):
    got, _ = A.gdpo(jnp.asarray(r), jnp.asarray(gid), weights=tuple(w), whiten=False)
  np.testing.assert_allclose(np.asarray(got), pre, rtol=1e-12, atol=1e-12)


def test_sa_mrpo_matches_eq1_and_algorithm1_in_float64():
  """arXiv 2608.16072 Sec. 4.1: A_k = (r_k − μ_k)/σ_k (population std, Sec. 3), s_k = (mean_batch r_k − r_min)/(r_max −
  r_min), w̃_k = w_k (1 − s_k)^γ, Eq. 1 batch standardisation; ε = 1e-6 added to each std is ours (recorded)."""
  rng = np.random.default_rng(72)
  gid = np.repeat(np.arange(6), 4).astype(np.int32)
  r = rng.uniform(0.0, 1.0, size=(gid.size, 3)).round(3)
  w, gamma = np.array([0.3, 0.7, 0.1]), 0.25
  s = (r.mean(0) - 0.0) / (1.0 - 0.0)
  agg = _group_z(r, gid, 0, 1e-6) @ (w * (1 - s) ** gamma)
  ref = (agg - agg.mean()) / (agg.std() + 1e-6)
  with jax.enable_x64(True):
    got, info = A.sa_mrpo(jnp.asarray(r), jnp.asarray(gid), weights=tuple(w))
    assert info["saturation"].dtype == jnp.float64
  np.testing.assert_allclose(np.asarray(info["saturation"]), s, rtol=1e-13)
  np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-12, atol=1e-12)


def test_gd2po_query_weight_stays_float64_under_x64():
  gid = np.repeat(np.arange(2), 3).astype(np.int32)
  r = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0],   # rows 0 and 1 conflict: q = 1/3 for the group
                [1.0, 1.0], [0.0, 0.0], [0.5, 0.5]])
  with jax.enable_x64(True):
    _, info = A.gd2po(jnp.asarray(r), jnp.asarray(gid), whiten=False)
  np.testing.assert_array_equal(np.asarray(info["keep"]), [False, False, True, True, True, True])
  np.testing.assert_allclose(np.asarray(info["query_weight"]), [1 / 3] * 3 + [1.0] * 3, rtol=1e-15)


# ----------------------------------------------------------------------------------------------------------------
# QwenLong-L1.5 task-specific advantage: Tongyi-Zhiwen/Qwen-Doc@12489b07 QwenLong-L1.5/README.md
# (compute_grpo_task_norm_outcome_advantage): (r − mean_uid r) / (std_task r (torch.std, unbiased) + 1e-6), a
# singleton uid's mean 0, a singleton task's std 0.

def test_task_normalized_matches_the_authors_task_norm_function():
  rng = np.random.default_rng(81)
  gid = np.repeat(np.arange(6), 4).astype(np.int32)
  task = np.array([0, 0, 1, 1, 2, 2]).repeat(4).astype(np.int32)
  r = rng.integers(0, 2, size=gid.size).astype(np.float64) * rng.uniform(0.5, 1.0, size=gid.size)
  ref = np.zeros_like(r)
  for i in range(r.size):
    ref[i] = (r[i] - r[gid == gid[i]].mean()) / (r[task == task[i]].std(ddof=1) + 1e-6)
  with jax.enable_x64(True):
    a, _ = A.grpo(jnp.asarray(r), jnp.asarray(gid), scale="none")
    got, _ = A.task_normalized(a, jnp.asarray(task), rewards=jnp.asarray(r), scale="rewards", center=False)
    assert got.dtype == jnp.float64
  np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-12, atol=1e-12)
