"""Jit-able reward shaping (rljax.rewards), against float64 NumPy references."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rljax import rewards as R

RNG = np.random.default_rng(0)


def both(fn, *args, static=(), **kwargs):
  """Runs ``fn`` eagerly and under jit (keyword args closed over) and checks they agree."""
  eager = fn(*args, **kwargs)
  jitted = jax.jit(lambda *a: fn(*a, **kwargs))(*args)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-6),
               eager, jitted)
  return eager


def ragged_batch(sizes, seed=0):
  rng = np.random.default_rng(seed)
  gid = np.concatenate([np.full(s, g) for g, s in enumerate(sizes)]).astype(np.int32)
  perm = rng.permutation(len(gid))
  return gid[perm], perm


# ----------------------------------------------------------------------------- token_counts / overlong

def test_token_counts():
  mask = np.array([[0, 1, 1, 0], [1, 1, 1, 1], [0, 0, 0, 0]], bool)
  np.testing.assert_array_equal(R.token_counts(mask), [2, 4, 0])
  with pytest.raises(ValueError, match="completion_mask"):
    R.token_counts(np.array([0, 1]))
  with pytest.raises(ValueError, match="completion_mask"):
    R.token_counts(np.array([[0, 2]]))


def _overlong_ref(lengths, max_len, buf, factor, clip):
  out = []
  for n in lengths:
    p = min(-(n - (max_len - buf)) / buf * factor, 0.0)
    if clip and n > max_len:
      p = -factor
    out.append(p)
  return np.array(out)


@pytest.mark.parametrize("clip", [False, True])
def test_overlong_penalty_matches_reference(clip):
  lengths = np.array([0, 50, 79, 80, 81, 90, 99, 100, 130], np.int32)
  p, m = both(R.overlong_penalty, lengths, max_len=100, buffer_len=20, penalty_factor=1.5, clip=clip)
  np.testing.assert_allclose(p, _overlong_ref(lengths, 100, 20, 1.5, clip), rtol=1e-6, atol=1e-6)
  assert p[lengths <= 80].max() == 0 and p[7] == pytest.approx(-1.5)   # -factor at L_max
  assert float(m["overlong_frac"]) == pytest.approx(5 / 9)


def test_overlong_penalty_bad_input():
  with pytest.raises(ValueError, match="buffer_len"):
    R.overlong_penalty(np.array([1]), max_len=10, buffer_len=11)
  with pytest.raises(ValueError, match="max_len"):
    R.overlong_penalty(np.array([1]), max_len=0, buffer_len=1)
  with pytest.raises(ValueError, match="penalty_factor"):
    R.overlong_penalty(np.array([1]), max_len=10, buffer_len=2, penalty_factor=-1)
  with pytest.raises(ValueError, match="lengths"):
    R.overlong_penalty(np.array([1.0, np.nan]), max_len=10, buffer_len=2)
  with pytest.raises(ValueError, match="lengths"):
    R.overlong_penalty(np.ones((2, 2)), max_len=10, buffer_len=2)
  # under jit a NaN length cannot raise: it gets 0 and is counted
  p, m = jax.jit(lambda l: R.overlong_penalty(l, max_len=10, buffer_len=2))(jnp.array([10.0, jnp.nan]))
  np.testing.assert_allclose(p, [-1.0, 0.0])
  assert int(m["nonfinite"]) == 1


# ----------------------------------------------------------------------------- length_penalty

def _length_ref(lengths, correct, gid, mode="kimi"):
  out = np.zeros(len(lengths))
  for g in np.unique(gid):
    idx = np.flatnonzero(gid == g)
    lo, hi = lengths[idx].min(), lengths[idx].max()
    for i in idx:
      lam = 0.0 if hi == lo else 0.5 - (lengths[i] - lo) / (hi - lo)
      out[i] = lam if correct[i] else (min(0.0, lam) if mode == "kimi" else 0.0)
  return out


@pytest.mark.parametrize("mode", ["kimi", "correct_only"])
def test_length_penalty_reference_ragged_and_alone(mode):
  gid, _ = ragged_batch([3, 1, 3, 3], seed=1)
  b = len(gid)
  lengths = RNG.integers(1, 200, size=b)
  correct = RNG.random(b) < 0.5
  r, _ = both(R.length_penalty, lengths, correct, gid, num_groups=4, mode=mode)
  np.testing.assert_allclose(r, _length_ref(lengths.astype(float), correct, gid, mode), atol=1e-6)
  for g in (0, 1):  # a group alone gives the same values (one per distinct size: each compiles)
    idx = np.flatnonzero(gid == g)
    alone, _ = R.length_penalty(lengths[idx], correct[idx], np.zeros(len(idx), np.int32), num_groups=1, mode=mode)
    np.testing.assert_allclose(r[idx], alone, atol=1e-6)


def test_length_penalty_invariants():
  gid = np.array([0, 0, 0, 0, 1, 1], np.int32)
  lengths = np.array([10, 30, 20, 40, 7, 7])
  correct = np.array([1, 1, 0, 0, 1, 0])
  r, m = R.length_penalty(lengths, correct, gid, num_groups=2)
  r_shift, _ = R.length_penalty(lengths + 1000, correct, gid, num_groups=2)
  np.testing.assert_allclose(r, r_shift, atol=1e-6)              # translation invariant
  assert r[0] == pytest.approx(0.5) and r[0] == r[:4].max()        # shortest correct: largest bonus
  np.testing.assert_allclose(r[4:], 0.0)                          # flat group -> 0
  assert int(m["flat_groups"]) == 1
  perm = RNG.permutation(6)
  r_p, _ = R.length_penalty(lengths[perm], correct[perm], gid[perm], num_groups=2)
  np.testing.assert_allclose(r_p, np.asarray(r)[perm], atol=1e-6)  # permutation equivariant
  # valid mask: invalid rows get 0 and leave the statistics alone
  valid = np.array([1, 1, 1, 0, 1, 1], bool)
  r_v, _ = R.length_penalty(lengths, correct, gid, num_groups=2, valid=valid)
  np.testing.assert_allclose(r_v[:3], _length_ref(lengths[:3].astype(float), correct[:3], gid[:3]), atol=1e-6)
  assert r_v[3] == 0


def test_length_penalty_is_the_kimi_form_of_open_r1_per_group():
  """huggingface/open-r1 rewards.py len_reward (Kimi k1.5): lam = 0.5 − (len − min)/(max − min); correct: lam,
  wrong: min(0, lam); all lengths equal: 0. open-r1 takes min/max over its call's batch; ours over each group."""
  def open_r1(lengths, correct):
    lo, hi = min(lengths), max(lengths)
    if hi == lo:
      return [0.0] * len(lengths)
    lam = [0.5 - (x - lo) / (hi - lo) for x in lengths]
    return [l if c else min(0.0, l) for l, c in zip(lam, correct)]

  rng = np.random.default_rng(5)
  lengths = rng.integers(5, 60, 14).astype(np.float32)
  lengths[10:] = 7.0  # a flat group
  correct = rng.random(14) < 0.5
  gid = np.array([0] * 6 + [1] * 4 + [2] * 4, np.int32)
  got, _ = R.length_penalty(lengths, correct, gid, num_groups=3)
  ref = np.concatenate([open_r1(list(lengths[gid == g]), list(correct[gid == g])) for g in range(3)])
  np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-7)


def test_length_penalty_bad_input():
  with pytest.raises(ValueError, match="mode"):
    R.length_penalty(np.ones(2), np.ones(2), np.zeros(2, np.int32), num_groups=1, mode="linear")
  with pytest.raises(ValueError, match="group_id"):
    R.length_penalty(np.ones(2), np.ones(2), np.array([0, 2]), num_groups=2)
  with pytest.raises(ValueError, match="group_id"):
    R.length_penalty(np.ones(2), np.ones(2), np.array([0.0, 1.0]), num_groups=2)
  with pytest.raises(ValueError, match="num_groups"):
    R.length_penalty(np.ones(2), np.ones(2), np.zeros(2, np.int32), num_groups=0)
  with pytest.raises(ValueError, match="correct"):
    R.length_penalty(np.ones(2), np.ones(3), np.zeros(2, np.int32), num_groups=1)
  with pytest.raises(ValueError, match="lengths"):
    R.length_penalty(np.array([1.0, np.nan]), np.ones(2), np.zeros(2, np.int32), num_groups=1)


# ----------------------------------------------------------------------------- grpo_lambda

def test_grpo_lambda_threshold_switch():
  gid, _ = ragged_batch([4, 3, 1, 5], seed=2)
  b = len(gid)
  correct = RNG.random(b) < 0.6
  lengths = RNG.integers(5, 50, size=b)
  r, m = both(R.grpo_lambda, correct, lengths, gid, num_groups=4, threshold=0.5, selection="threshold",
              length_weight=0.3)
  lp = _length_ref(lengths.astype(float), correct, gid)
  expected = np.zeros(b)
  for g in range(4):
    idx = gid == g
    on = correct[idx].mean() >= 0.5
    expected[idx] = (correct[idx] + 0.3 * lp[idx]) if on else correct[idx].astype(float)
  np.testing.assert_allclose(r, expected, atol=1e-6)
  for g in range(4):  # below tau: exactly the 0/1 correctness
    idx = gid == g
    if correct[idx].mean() < 0.5:
      np.testing.assert_array_equal(np.asarray(r)[idx], correct[idx].astype(np.float32))


def test_grpo_lambda_threshold_boundary_is_inclusive():
  """``acc ≥ τ`` switches on exactly at τ: groups at acc = τ are penalised, one correct answer fewer is not."""
  gid = np.repeat(np.arange(5), 4).astype(np.int32)
  correct = np.array([1, 1, 1, 0,  1, 1, 0, 0,  1, 1, 1, 1,  1, 0, 0, 0,  0, 0, 0, 0])  # 3/4, 2/4, 1, 1/4, 0
  pen = np.full(20, 9.0)
  for tau, on in ((0.75, [1, 0, 1, 0, 0]), (0.5, [1, 1, 1, 0, 0]), (0.25, [1, 1, 1, 1, 0]), (0.0, [1] * 5),
                  (1.0, [0, 0, 1, 0, 0])):
    r, m = both(R.grpo_lambda, correct, np.ones(20), gid, num_groups=5, threshold=tau, selection="threshold",
                penalized=pen)
    want = np.where(np.repeat(on, 4).astype(bool), 9.0, correct)
    np.testing.assert_array_equal(np.asarray(r), want)
    np.testing.assert_allclose(float(m["penalty_on_frac"]), np.mean(on))
  # a threshold just above a group's ratio leaves it off
  r, _ = R.grpo_lambda(correct, np.ones(20), gid, num_groups=5, threshold=0.75 + 1e-6, selection="threshold",
                       penalized=pen)
  np.testing.assert_array_equal(np.asarray(r)[:4], correct[:4])


def test_grpo_lambda_default_is_the_papers_top_fraction():
  """The paper ranks the batch's groups by correctness ratio and penalises the top λ fraction (default λ = 0.5)."""
  gid = np.repeat(np.arange(6), 2).astype(np.int32)
  correct = np.array([0, 0,  1, 0,  1, 1,  0, 0,  1, 1,  1, 0])  # ratios 0, .5, 1, 0, 1, .5
  pen = np.arange(12, dtype=np.float64) + 10
  r, m = both(R.grpo_lambda, correct, np.ones(12), gid, num_groups=6, penalized=pen)
  # ceil(0.5 · 6) = 3 groups: the two at ratio 1 (groups 2, 4) and, of the tied 0.5 groups, the lower id (1)
  on = np.repeat([0, 1, 1, 0, 1, 0], 2).astype(bool)
  np.testing.assert_array_equal(np.asarray(r), np.where(on, pen, correct))
  assert float(m["penalty_on_frac"]) == 0.5
  # relative, not absolute: the same rule on a batch where every group is weak still penalises the top half
  weak = np.array([0, 0,  1, 0,  0, 0,  0, 0,  1, 0,  0, 0])  # ratios 0, .5, 0, 0, .5, 0
  r, _ = R.grpo_lambda(weak, np.ones(12), gid, num_groups=6, penalized=pen)
  on = np.repeat([0, 1, 0, 0, 1, 0], 2).astype(bool) | (np.repeat(np.arange(6), 2) == 0)  # 3rd: tie at 0 -> id 0
  np.testing.assert_array_equal(np.asarray(r), np.where(on, pen, weak))
  r_abs, _ = R.grpo_lambda(weak, np.ones(12), gid, num_groups=6, penalized=pen, selection="threshold")
  np.testing.assert_array_equal(np.asarray(r_abs), np.where(np.repeat([0, 1, 0, 0, 1, 0], 2).astype(bool), pen, weak))


def _grpo_lambda_paper(correct, lengths, gid, lam, alpha):
  """GRPO-λ's reward as its method section gives it (read in a stored Chinese translation, code index file id
  49297942322): groups sorted by correctness ratio, the top ceil(λ·#groups) get the efficiency reward
  r = 1 − α·σ((L − mean(L)_correct)/std(L)_correct) for a correct completion, 0 for a wrong one; the rest 0/1.
  float64, plain Python loops; ties in the ratio broken by the lower group id; std population, z = 0 if it is 0."""
  groups = sorted(set(gid.tolist()))
  ratio = {g: correct[gid == g].mean() for g in groups}
  order = sorted(groups, key=lambda g: (-ratio[g], g))
  top = set(order[:int(np.ceil(lam * len(groups)))])
  out = np.zeros(len(gid))
  for i in range(len(gid)):
    g = int(gid[i])
    if g not in top:
      out[i] = float(correct[i])
      continue
    if not correct[i]:
      continue
    lc = lengths[(gid == g) & correct.astype(bool)].astype(np.float64)
    sd = lc.std()
    z = (lengths[i] - lc.mean()) / sd if sd > 0 else 0.0
    out[i] = 1.0 - alpha * (1.0 / (1.0 + np.exp(-z)))
  return out


def test_grpo_lambda_sigmoid_penalty_is_the_papers_form_in_float64():
  gid = np.repeat(np.arange(5), 6).astype(np.int32)
  correct = np.array([1, 1, 1, 1, 1, 0,  1, 1, 0, 0, 0, 0,  1, 1, 1, 1, 1, 1,  1, 0, 0, 0, 0, 0,
                      1, 1, 1, 0, 0, 0])  # ratios 5/6, 2/6, 1, 1/6, 3/6: distinct, no tie at the cut
  lengths = np.random.default_rng(51).permutation(np.arange(20, 400))[:30]  # distinct lengths
  lengths[18] = 77  # group 3's single correct answer: std 0, z = 0
  for lam, alpha in ((0.2, 0.6), (0.6, 0.6), (1.0, 0.3)):
    with jax.enable_x64(True):
      r, m = both(R.grpo_lambda, correct, lengths.astype(np.float64), gid, num_groups=5, threshold=lam,
                  penalty="sigmoid", alpha=alpha)
    ref = _grpo_lambda_paper(correct, lengths, gid, lam, alpha)
    np.testing.assert_allclose(np.asarray(r), ref, rtol=1e-6, atol=1e-6)
    assert float(m["penalty_on_frac"]) == pytest.approx(np.ceil(lam * 5) / 5)
  # λ = 1: group 3 (one correct answer) is on and its correct row gets 1 − α/2
  assert np.asarray(r)[18] == pytest.approx(1 - 0.3 / 2, abs=1e-6)
  # longer correct completions get less; every correct row of an on group lies in (1 − α, 1)
  on = np.asarray(r)[:5]
  assert np.argsort(on).tolist() == np.argsort(-lengths[:5]).tolist()
  assert np.all((on > 1 - 0.3) & (on < 1))
  with pytest.raises(ValueError, match="grpo_lambda: alpha is required"):
    R.grpo_lambda(correct, lengths, gid, num_groups=5, penalty="sigmoid")
  with pytest.raises(ValueError, match="grpo_lambda: alpha"):
    R.grpo_lambda(correct, lengths, gid, num_groups=5, penalty="sigmoid", alpha=-0.1)
  with pytest.raises(ValueError, match="grpo_lambda: alpha applies"):
    R.grpo_lambda(correct, lengths, gid, num_groups=5, alpha=0.5)
  with pytest.raises(ValueError, match="grpo_lambda: penalty"):
    R.grpo_lambda(correct, lengths, gid, num_groups=5, penalty="linear")
  with pytest.raises(ValueError, match="not both"):
    R.grpo_lambda(correct, lengths, gid, num_groups=5, penalty="sigmoid", alpha=0.5, penalized=np.ones(30))


def test_grpo_lambda_top_fraction_and_custom_penalized():
  gid = np.array([0, 0, 1, 1, 2, 2, 3, 3], np.int32)
  correct = np.array([1, 1, 1, 0, 0, 0, 1, 1])       # ratios 1, .5, 0, 1
  penalized = np.full(8, 7.0)
  r, m = R.grpo_lambda(correct, np.ones(8), gid, num_groups=4, threshold=0.5, selection="top_fraction",
                       penalized=penalized)
  # ceil(0.5*4) = 2 groups with the highest ratio: groups 0 and 3 (ratio 1)
  np.testing.assert_array_equal(r, [7, 7, 1, 0, 0, 0, 7, 7])
  assert float(m["penalty_on_frac"]) == 0.5
  # all rows masked: zeros and no group switched on (documented), never NaN
  r3, m3 = R.grpo_lambda(correct, np.ones(8), gid, num_groups=4, valid=np.zeros(8, bool))
  np.testing.assert_array_equal(r3, 0)
  assert float(m3["penalty_on_frac"]) == 0
  r4, m4 = R.length_penalty(np.arange(8), correct, gid, num_groups=4, valid=np.zeros(8, bool))
  np.testing.assert_array_equal(r4, 0)
  assert np.isfinite(float(m4["length_reward_mean"]))
  with pytest.raises(ValueError, match="selection"):
    R.grpo_lambda(correct, np.ones(8), gid, num_groups=4, selection="best")
  with pytest.raises(ValueError, match="threshold"):
    R.grpo_lambda(correct, np.ones(8), gid, num_groups=4, threshold=1.5)


# ----------------------------------------------------------------------------- outcome / process

def test_correctness_gated():
  outcome = np.array([1.0, 0.0, 1.0, 0.0])
  process = np.array([0.3, np.nan, -0.2, 5.0])
  correct = np.array([1, 0, 1, 0])
  r, m = R.correctness_gated(outcome, process, correct, weight=2.0)
  np.testing.assert_allclose(r, [1.6, 0.0, 0.6, 0.0], atol=1e-6)   # incorrect rows: exactly r_outcome, NaN ignored
  with pytest.raises(ValueError, match="process"):
    R.correctness_gated(outcome, np.array([np.nan, 0, 0, 0]), correct)
  r_j, m_j = jax.jit(R.correctness_gated)(outcome, np.array([np.nan, 0, 0, 0]), correct)
  assert np.all(np.isfinite(r_j)) and int(m_j["nonfinite"]) == 1


def test_gaussian_reward():
  pred = np.array([1.0, 1.5, 0.5, 3.0, np.nan])
  target = np.ones(5)
  r, m = both(R.gaussian_reward, pred, target, sigma=0.5)
  err = pred[:4] - 1.0
  np.testing.assert_allclose(r[:4], np.exp(-err ** 2 / (2 * 0.25)), rtol=1e-6)
  assert r[0] == 1 and r[1] == r[2] and r[3] < r[1] and r[4] == 0     # peak, symmetric, decreasing, invalid
  assert float(m["invalid_frac"]) == pytest.approx(0.2)
  r_inv, _ = R.gaussian_reward(pred, target, sigma=0.5, invalid_value=-1.0)
  assert r_inv[4] == -1.0 and np.array_equal(r_inv[:4], r[:4])          # invalid_value marks unparsable rows
  with pytest.raises(ValueError, match="sigma"):
    R.gaussian_reward(pred, target, sigma=0)
  with pytest.raises(ValueError, match="target"):
    R.gaussian_reward(pred, np.array([1, 1, 1, 1, np.nan]))


def test_clipped_linear_reward():
  d = np.linspace(-1, 2, 13)
  r, m = both(R.clipped_linear_reward, d, scale=2.0, offset=-0.5, low=0.0, high=1.0)
  np.testing.assert_allclose(r, np.clip(2 * d - 0.5, 0, 1), atol=1e-6)
  assert np.all(np.diff(np.asarray(r)) >= 0)
  with pytest.raises(ValueError, match="low"):
    R.clipped_linear_reward(d, low=1, high=0)


# ----------------------------------------------------------------------------- PRM

def test_prm_clip_and_bound():
  s = np.array([[0.9, 0.2, 0.6, 0.0], [0.1, 0.7, 0.0, 0.0]])
  mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], bool)
  r, _ = both(R.prm_clip, s, mask, eta=0.5)
  np.testing.assert_allclose(r, np.where(mask, np.minimum(s - 0.5, 0), 0), atol=1e-6)
  assert np.all(np.asarray(r) <= 0)
  # repeating steps never raises the return
  rep = np.tile(s[:1, :3], (1, 3))
  r_rep, _ = R.prm_clip(rep, eta=0.5)
  assert float(r_rep.sum()) <= float(r[0].sum())


def test_prm_delta_telescopes_with_holes():
  s = RNG.random((3, 7))
  mask = RNG.random((3, 7)) < 0.7
  mask[2] = False
  r, _ = both(R.prm_delta, s, mask)
  r = np.asarray(r, np.float64)
  for b in range(3):
    steps = np.flatnonzero(mask[b])
    for k, t in enumerate(steps):       # return from step t == r_PRM(t)
      np.testing.assert_allclose(r[b, steps[k:]].sum(), s[b, t], atol=1e-5)
  assert np.all(r[~mask] == 0)
  with pytest.raises(ValueError, match="step_rewards"):
    R.prm_delta(np.where(mask, np.nan, s), mask)
  with pytest.raises(ValueError, match="step_mask"):
    R.prm_delta(s, mask[:, :3])


# ----------------------------------------------------------------------------- rubric dropout

@pytest.mark.parametrize("mode", ["bernoulli", "exact"])
def test_rubric_dropout_group_shared_mask_and_reference(mode):
  gid, _ = ragged_batch([3, 1, 3, 2, 3], seed=3)
  b, c = len(gid), 8
  scores = RNG.random((b, c))
  weights = RNG.random(c) + 0.1
  key = jax.random.key(7)
  run = both if mode == "bernoulli" else lambda f, *a, **k: f(*a, **k)  # jit checked once (compiles are slow)
  r, keep, m = run(R.rubric_dropout, key, scores, gid, drop_prob=0.4, weights=weights, mode=mode)
  keep = np.asarray(keep)
  for g in range(5):
    rows = keep[gid == g]
    assert np.all(rows == rows[0])                    # identical within a group
    if mode == "exact":
      assert rows[0].sum() == c - round(0.4 * c)
  expected = np.array([(weights * keep[i] * scores[i]).sum() / (weights * keep[i]).sum() for i in range(b)])
  np.testing.assert_allclose(r, expected, rtol=1e-5)
  # ragged / alone: a group's result does not depend on the rest of the batch
  for g in (1, 3):  # a singleton and a pair (each distinct size compiles once)
    idx = np.flatnonzero(gid == g)
    r_alone, keep_alone, _ = R.rubric_dropout(key, scores[idx], gid[idx], drop_prob=0.4, weights=weights, mode=mode)
    np.testing.assert_allclose(r_alone, np.asarray(r)[idx], rtol=1e-6)
  # permutation equivariance
  perm = RNG.permutation(b)
  r_p, _, _ = R.rubric_dropout(key, scores[perm], gid[perm], drop_prob=0.4, weights=weights, mode=mode)
  np.testing.assert_allclose(r_p, np.asarray(r)[perm], rtol=1e-6)


def test_rubric_dropout_independent_groups_full_rubric_and_fallback():
  b, c = 64, 10
  gid = np.arange(b, dtype=np.int32)
  scores = RNG.random((b, c))
  _, keep, _ = R.rubric_dropout(jax.random.key(0), scores, gid, drop_prob=0.5)
  assert len({tuple(row) for row in np.asarray(keep)}) > 32     # groups draw different masks
  assert 0.35 < np.asarray(keep).mean() < 0.65
  r0, keep0, _ = R.rubric_dropout(jax.random.key(0), scores, gid, drop_prob=0.0)
  np.testing.assert_allclose(r0, scores.mean(1), rtol=1e-6)     # p = 0: full rubric
  assert np.all(np.asarray(keep0))
  # all applicable criteria dropped -> full rubric; no applicable -> 0
  applicable = np.zeros((b, c), bool)
  applicable[:, 0] = True
  applicable[0] = False
  r, keep, m = R.rubric_dropout(jax.random.key(1), scores, gid, drop_prob=0.9, criterion_mask=applicable,
                                mode="exact", aggregate="sum")
  np.testing.assert_allclose(np.asarray(r)[1:], scores[1:, 0], rtol=1e-6)
  assert r[0] == 0 and int(m["fallback_rows"]) == int((~np.asarray(keep)[1:, 0]).sum())


def test_rubric_dropout_bad_input():
  s = np.ones((2, 3))
  gid = np.zeros(2, np.int32)
  k = jax.random.key(0)
  with pytest.raises(ValueError, match="weights"):
    R.rubric_dropout(k, s, gid, drop_prob=0.3, weights=np.ones(4))   # K mismatch
  with pytest.raises(ValueError, match="drop_prob"):
    R.rubric_dropout(k, s, gid, drop_prob=1.0)
  with pytest.raises(ValueError, match="mode"):
    R.rubric_dropout(k, s, gid, drop_prob=0.3, mode="other")
  with pytest.raises(ValueError, match="aggregate"):
    R.rubric_dropout(k, s, gid, drop_prob=0.3, aggregate="max")
  with pytest.raises(ValueError, match="scores"):
    R.rubric_dropout(k, np.array([[1.0, np.nan, 0.0]] * 2), gid, drop_prob=0.3)
  with pytest.raises(ValueError, match="criterion_mask"):
    R.rubric_dropout(k, s, gid, drop_prob=0.3, criterion_mask=np.ones((2, 4), bool))
  with pytest.raises(ValueError, match="group_id"):
    R.rubric_dropout(k, s, np.array([0, -1]), drop_prob=0.3)

