"""Filters and rollout allocation (rljax.filters), against NumPy references and invariants."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rljax import filters as F

RNG = np.random.default_rng(0)


def both(fn, *args, **kwargs):
  eager = fn(*args, **kwargs)
  jitted = jax.jit(lambda *a: fn(*a, **kwargs))(*args)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-6),
               eager, jitted)
  return eager


def ragged(sizes, seed=0):
  rng = np.random.default_rng(seed)
  gid = np.concatenate([np.full(s, g) for g, s in enumerate(sizes)]).astype(np.int32)
  return gid[rng.permutation(len(gid))]


# ----------------------------------------------------------------------------- zero_variance

def test_zero_variance_reference_and_invariants():
  gid = ragged([4, 1, 3, 2, 4, 2], seed=1)
  b = len(gid)
  metric = RNG.integers(0, 2, size=b).astype(np.float32)
  metric[gid == 2] = 0.1  # all equal with a value that is not exact in binary (mean rounding)
  keep, st = both(F.zero_variance, metric, gid, num_groups=7)
  for g in range(6):
    idx = gid == g
    vals = metric[idx].astype(np.float64)
    expected = np.std(vals) > 0 or idx.sum() == 1          # verl: std > 0 or singleton
    assert np.all(np.asarray(keep)[idx] == expected)        # constant within the group
    np.testing.assert_allclose(st["group_std"][g], np.std(vals), atol=1e-6)
  assert not bool(st["group_keep"][6])                      # empty group never kept
  assert int(st["num_groups_present"]) == 6
  # ragged == each group alone; permutation equivariance
  for g in (1, 3):
    idx = np.flatnonzero(gid == g)
    alone, _ = F.zero_variance(metric[idx], np.zeros(len(idx), np.int32), num_groups=1)
    np.testing.assert_array_equal(alone, np.asarray(keep)[idx])
  perm = RNG.permutation(b)
  keep_p, _ = F.zero_variance(metric[perm], gid[perm], num_groups=7)
  np.testing.assert_array_equal(keep_p, np.asarray(keep)[perm])


def test_zero_variance_options_and_bad_input():
  metric = np.array([1.0, 1.0, 0.0, 1.0, 2.0, 2.05])
  gid = np.array([0, 0, 1, 2, 3, 3], np.int32)
  keep, st = F.zero_variance(metric, gid, num_groups=4, keep_singletons=False)
  np.testing.assert_array_equal(keep, [0, 0, 0, 0, 1, 1])
  keep, _ = F.zero_variance(metric, gid, num_groups=4, atol=0.1)
  np.testing.assert_array_equal(keep, [0, 0, 1, 1, 0, 0])
  keep, _ = F.zero_variance(metric, gid, num_groups=4, valid=np.array([1, 1, 1, 1, 1, 0], bool))
  np.testing.assert_array_equal(keep, [0, 0, 1, 1, 1, 0])  # group 3 became a singleton; padding never kept
  keep, st = F.zero_variance(metric, gid, num_groups=4, valid=np.zeros(6, bool))   # all rows masked
  np.testing.assert_array_equal(keep, 0)
  assert int(st["num_groups_present"]) == 0 and float(st["kept_frac"]) == 0
  with pytest.raises(ValueError, match="metric"):
    F.zero_variance(np.array([1.0, np.nan]), np.array([0, 0]), num_groups=1)
  with pytest.raises(ValueError, match="group_id"):
    F.zero_variance(np.ones(2), np.array([0, 3]), num_groups=2)
  with pytest.raises(ValueError, match="group_id"):
    F.zero_variance(np.ones(2), np.array([0, 1, 1]), num_groups=2)
  with pytest.raises(ValueError, match="num_groups"):
    F.zero_variance(np.ones(2), np.array([0, 1]), num_groups=2.0)
  with pytest.raises(ValueError, match="valid"):
    F.zero_variance(np.ones(2), np.array([0, 1]), num_groups=2, valid=np.array([0, 2]))
  with pytest.raises(ValueError, match="atol"):
    F.zero_variance(np.ones(2), np.array([0, 1]), num_groups=2, atol=-1)
  # under jit a NaN cannot raise: its group is dropped and counted
  keep, st = jax.jit(lambda m: F.zero_variance(m, jnp.array([0, 0, 1, 1]), num_groups=2))(
      jnp.array([0.0, jnp.nan, 0.0, 1.0]))
  np.testing.assert_array_equal(keep, [0, 0, 1, 1])
  assert int(st["nonfinite_groups"]) == 1


# ----------------------------------------------------------------------------- variance_topp / vcrl

def test_variance_topp_reference_ties_and_permutation():
  gid = ragged([3, 3, 3, 3, 3, 3, 3], seed=2)
  r = RNG.random(len(gid)).astype(np.float32)
  r[gid == 5] = 0.5                                  # zero std
  keep, st = both(F.variance_topp, r, gid, num_groups=7, top_p=0.25)
  stds = np.array([np.std(r[gid == g].astype(np.float64)) for g in range(7)])
  k = int(np.ceil(0.25 * 7))
  kept_groups = sorted(np.argsort(-stds, kind="stable")[:k])
  assert sorted(np.flatnonzero(st["group_keep"])) == kept_groups
  assert np.asarray(keep).sum() == 3 * k
  kept = np.asarray(st["group_keep"])
  assert stds[kept].min() >= stds[~kept].max()
  perm = RNG.permutation(len(gid))
  keep_p, _ = F.variance_topp(r[perm], gid[perm], num_groups=7, top_p=0.25)
  np.testing.assert_array_equal(keep_p, np.asarray(keep)[perm])
  # ties go to the lower group id; exactly ceil(p * #present) groups
  gid2 = np.array([0, 0, 1, 1, 2, 2, 3, 3], np.int32)
  r2 = np.array([0, 1, 0, 1, 0, 1, 0, 0], np.float32)
  keep2, _ = F.variance_topp(r2, gid2, num_groups=5, top_p=0.5)
  np.testing.assert_array_equal(keep2, [1, 1, 1, 1, 0, 0, 0, 0])
  with pytest.raises(ValueError, match="top_p"):
    F.variance_topp(r2, gid2, num_groups=5, top_p=0.0)


def test_vcrl_scores_and_selection():
  gid = np.repeat(np.arange(5), 4).astype(np.int32)
  r = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0], np.float32)
  keep, st = both(F.vcrl, r, gid, num_groups=5, threshold=0.7)
  p = np.array([0, 1, 0.5, 0.25, 0.75])
  np.testing.assert_allclose(st["group_score"], 4 * p * (1 - p), atol=1e-6)   # max at p = .5, 0 at 0/1
  np.testing.assert_array_equal(np.asarray(st["group_keep"]), [0, 0, 1, 1, 1])
  perm = RNG.permutation(20)
  keep_p, _ = F.vcrl(r[perm], gid[perm], num_groups=5, threshold=0.7)
  np.testing.assert_array_equal(keep_p, np.asarray(keep)[perm])
  # the boundary is inclusive: score_g = 1 exactly (p = .5: var .25 = var_max) is kept at threshold 1
  keep1, st1 = F.vcrl(r, gid, num_groups=5, threshold=1.0)
  assert float(st1["group_score"][2]) == 1.0
  np.testing.assert_array_equal(np.asarray(st1["group_keep"]), [0, 0, 1, 0, 0])
  np.testing.assert_array_equal(keep1, gid == 2)
  _, st2 = F.vcrl(2 * r - 1, gid, num_groups=5, reward_range=(-1, 1))
  np.testing.assert_allclose(st2["group_score"], st["group_score"], atol=1e-6)
  with pytest.raises(ValueError, match="reward_range"):
    F.vcrl(r, gid, num_groups=5, reward_range=(1, 1))


# ----------------------------------------------------------------------------- negative_advantage_drop

def test_negative_advantage_drop_and_apply_keep():
  adv = np.array([0.5, -0.1, 0.0, -2.0, 3.0], np.float32)
  keep, m = both(F.negative_advantage_drop, adv, keep_zero=True)
  np.testing.assert_array_equal(keep, adv >= 0)
  keep0, m0 = F.negative_advantage_drop(adv)  # default: A = 0 dropped too, as the authors' zero sampling weight
  np.testing.assert_array_equal(keep0, adv > 0)
  assert int(m["num_dropped"]) == 2 and int(m0["num_dropped"]) == 3
  valid = np.array([True, True, True, True, False])
  keep_v, m_v = F.negative_advantage_drop(adv, valid=valid)                 # an invalid row is never kept
  np.testing.assert_array_equal(keep_v, (adv > 0) & valid)
  assert int(m_v["num_dropped"]) == 3
  mask = np.ones((5, 3), np.float32)
  out = F.apply_keep(mask, keep)
  np.testing.assert_array_equal(out, mask * (adv >= 0)[:, None])   # constant over a sequence's tokens
  assert out.dtype == mask.dtype
  with pytest.raises(ValueError, match="advantages"):
    F.negative_advantage_drop(np.array([np.nan, 1.0]))
  with pytest.raises(ValueError, match="keep"):
    F.apply_keep(mask, keep[:3])


# ----------------------------------------------------------------------------- void_turn

def test_void_turn():
  trajs = [
      ["```python\nprint(1)\n```", "so \\boxed{3}"],
      ["let me think", "```py\nx=1\n```"],          # first turn is void
      [],                                           # no model turn: kept (empty product)
      ["<answer>4</answer>"],
      ["```unterminated", "#### 5"],
      [None, "\\boxed{1}"],                         # malformed turn: void, no raise
  ]
  keep, st = F.void_turn(trajs)
  np.testing.assert_array_equal(keep, [1, 0, 1, 1, 0, 0])
  np.testing.assert_array_equal(st["void_turns"], [0, 1, 0, 0, 1, 1])
  keep2, _ = F.void_turn(trajs, code_pattern=r"```", answer_pattern=r"(?!)")
  np.testing.assert_array_equal(keep2, [0, 0, 1, 0, 0, 0])
  with pytest.raises(ValueError, match="code_pattern"):
    F.void_turn(trajs, code_pattern="(")
  with pytest.raises(ValueError, match="turns"):
    F.void_turn(["a string"])


# ----------------------------------------------------------------------------- greso

def test_greso_history_skip_and_readmission():
  gr = F.greso(p_easy=0.5, p_hard=0.25, adapt_step=0.0)  # fixed probabilities
  state = gr.init(6)
  ids = jnp.array([0, 1, 2, 3])
  admit, st = gr.select(state, jax.random.key(0), ids)
  assert np.all(np.asarray(admit)) and np.all(np.asarray(st["admit_prob"]) == 1)  # no history: never skipped
  rewards = jnp.array([1, 1, 1, 0, 0, 0, 1, 0, 1, 1, 1, 1.0])
  group = jnp.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 2])   # prompt 3 is not rolled out
  state2, m = gr.update(state, ids[:3], rewards, group)
  np.testing.assert_array_equal(state2.zero_streak, [1, 1, 0, 0, 0, 0])
  np.testing.assert_array_equal(state2.kind, [1, 2, 0, 0, 0, 0])       # easy, hard, informative
  np.testing.assert_array_equal(state.zero_streak, 0)                  # state only changes through update
  state3, _ = gr.update(state2, ids[:3], rewards, group)
  _, st3 = gr.select(state3, jax.random.key(1), ids)
  np.testing.assert_allclose(st3["admit_prob"], [0.25, 0.0625, 1, 1])   # p_kind ** streak
  # reproducible with a fixed key; empirical admission rate ~ q
  a1, _ = gr.select(state3, jax.random.key(5), ids)
  a2, _ = gr.select(state3, jax.random.key(5), ids)
  np.testing.assert_array_equal(a1, a2)
  keys = jax.random.split(jax.random.key(2), 400)
  rates = np.asarray(jax.vmap(lambda k: gr.select(state3, k, ids)[0])(keys)).mean(axis=0)
  assert abs(rates[0] - 0.25) < 0.1 and rates[1] < 0.15 and rates[2] == 1 and rates[3] == 1
  # an informative observation resets the streak (re-admission)
  state4, _ = gr.update(state3, ids[:1], jnp.array([0.0, 1.0]), jnp.array([0, 0]))
  assert int(state4.zero_streak[0]) == 0 and int(state4.kind[0]) == 0
  # a one-rollout group tells nothing: untouched
  state5, _ = gr.update(state3, ids[:1], jnp.array([1.0]), jnp.array([0]))
  assert int(state5.zero_streak[0]) == 2


def test_greso_jit_adaptation_and_bad_input():
  gr = F.greso(p_easy=0.5, p_hard=0.5, target_easy=0.0, target_hard=1.0, adapt_step=0.1)
  state = gr.init(4)
  upd = jax.jit(gr.update)
  state, m = upd(state, jnp.array([0, 1]), jnp.array([1.0, 1.0, 0.0, 0.0]), jnp.array([0, 0, 1, 1]))
  assert float(state.p_easy) == pytest.approx(0.4) and float(state.p_hard) == pytest.approx(0.6)
  sel = jax.jit(gr.select)
  admit, _ = sel(state, jax.random.key(0), jnp.array([0, 1, 2]))
  assert admit.shape == (3,)
  with pytest.raises(ValueError, match="prompt_ids"):
    gr.select(state, jax.random.key(0), jnp.array([0, 9]))
  with pytest.raises(ValueError, match="prompt_ids"):
    gr.update(state, jnp.array([0, 0]), jnp.ones(2), jnp.array([0, 1]))
  with pytest.raises(ValueError, match="rewards"):
    gr.update(state, jnp.array([0]), jnp.array([np.nan, 1.0]), jnp.array([0, 0]))
  with pytest.raises(ValueError, match="p_easy"):
    F.greso(p_easy=0.0)
  with pytest.raises(ValueError, match="num_prompts"):
    gr.init(0)


def test_greso_matches_the_authors_skip_probability_and_adaptation_rule():
  """github.com/Infini-AI-Lab/GRESO presampling_selector.py: skip = 1 − max(p ** count, 0.01); adapt: >= target."""
  gr = F.greso(p_easy=0.5, p_hard=0.25, adapt_step=0.0)
  state = gr.init(3)
  ids = jnp.array([0, 1, 2])
  rewards, group = jnp.array([1.0, 1.0, 0.0, 0.0, 1.0, 0.0]), jnp.array([0, 0, 1, 1, 2, 2])
  for count in range(1, 9):
    state, _ = gr.update(state, ids, rewards, group)
    _, st = gr.select(state, jax.random.key(count), ids)
    authors_keep = [max(0.5 ** count, 0.01), max(0.25 ** count, 0.01), 1.0]  # 1 − authors' skip probability
    np.testing.assert_allclose(st["admit_prob"], authors_keep, rtol=1e-6)
  bare = F.greso(p_easy=0.5, p_hard=0.25, admit_floor=0.0, adapt_step=0.0)
  np.testing.assert_allclose(bare.select(state, jax.random.key(0), ids)[1]["admit_prob"], [0.5 ** 8, 0.25 ** 8, 1],
                             rtol=1e-6)
  with pytest.raises(ValueError, match="admit_floor"):
    F.greso(admit_floor=1.5)
  # an observed fraction equal to its target counts as reached (authors: ratio >= target -> p -= step)
  ad = F.greso(p_easy=0.5, p_hard=0.5, target_easy=0.5, target_hard=0.6, adapt_step=0.1)
  s2, _ = ad.update(ad.init(2), jnp.array([0, 1]), jnp.array([1.0, 1.0, 0.0, 0.0]), jnp.array([0, 0, 1, 1]))
  assert float(s2.p_easy) == pytest.approx(0.4) and float(s2.p_hard) == pytest.approx(0.6)
  # defaults = the authors' run: step 0.01 towards 1/12 (easy) and 1/6 (hard) zero-variance fractions, p in [0.05, 0.95]
  d = F.greso()
  s3, m = d.update(d.init(12), jnp.arange(12), jnp.array([1.0, 1.0] + [0.0, 1.0] * 11), jnp.repeat(jnp.arange(12), 2))
  assert float(m["zero_var_easy_frac"]) == pytest.approx(1 / 12) and float(m["zero_var_hard_frac"]) == 0.0
  assert float(s3.p_easy) == pytest.approx(0.49) and float(s3.p_hard) == pytest.approx(0.51)  # 1/12 >= 1/12: skip more
  lo = F.greso(p_easy=0.05, p_hard=0.95)
  s4, _ = lo.update(lo.init(2), jnp.array([0, 1]), jnp.array([1.0, 1.0, 0.0, 0.0]), jnp.array([0, 0, 1, 1]))
  assert float(s4.p_easy) == pytest.approx(0.05) and float(s4.p_hard) == pytest.approx(0.94)  # clipped at 0.05


# ----------------------------------------------------------------------------- pilot_commit / difficulty_budget

def test_pilot_commit_window_is_the_authors_rule():
  """github.com/databricks/pilot-commit filter_batch: pass iff p_lower <= mean <= 1 − p_upper (0.125, 0.25);
  every passing prompt gets the same n commit rollouts."""
  rng = np.random.RandomState(2)
  P, n_pilot, n = 12, 8, 8
  pilot = (rng.rand(P, n_pilot) < rng.rand(P, 1)).astype(np.float32)
  gid = np.repeat(np.arange(P), n_pilot).astype(np.int32)
  means = pilot.mean(1)
  passing = (means >= 0.125) & (means <= 1 - 0.25)
  assert passing.any() and (~passing & (pilot.std(1) > 0)).any()  # a spread prompt outside the window
  counts, stats = F.pilot_commit(pilot.ravel(), gid, num_groups=P, budget=P * n, rule="uniform", max_per_prompt=n,
                                 window=(0.125, 0.75))
  np.testing.assert_array_equal(counts, np.where(passing, n, 0))
  with pytest.raises(ValueError, match="window"):
    F.pilot_commit(pilot.ravel(), gid, num_groups=P, budget=8, window=(0.9, 0.1))


def test_pilot_commit_invariants():
  rng = np.random.default_rng(3)
  for trial in range(20):
    g = rng.integers(2, 12)
    sizes = rng.integers(1, 5, size=g)
    gid = np.repeat(np.arange(g), sizes)
    r = rng.integers(0, 2, size=len(gid)).astype(float)
    budget = int(rng.integers(0, 60))
    cap = None if trial % 2 else int(rng.integers(1, 10))
    n, st = F.pilot_commit(r, gid, num_groups=g, budget=budget, max_per_prompt=cap)
    s = st["score"]
    assert n.sum() <= budget
    assert np.all(n[s == 0] == 0)                                   # collapsed prompts get nothing
    for i in range(g):                                              # non-decreasing in the score
      for j in range(g):
        if s[i] >= s[j]:
          assert n[i] >= n[j]
    if cap is not None:
      assert np.all(n <= cap)
  # hand-derived: stds .5, 0, .5, 0.4714 -> proportional split of 10
  n, st = F.pilot_commit(np.array([1, 0, 1, 1, 0, 1, 0, 0, 1]), np.array([0, 0, 1, 1, 2, 2, 3, 3, 3]),
                         num_groups=4, budget=10)
  s = np.array([0.5, 0.0, 0.5, np.std([0, 0, 1])])
  np.testing.assert_allclose(st["score"], s)
  q = 10 * s / s.sum()
  assert n.sum() <= 10 and n[1] == 0 and n[0] == n[2] and np.all(np.abs(n - q) < 1 + 1e-9)
  # proportional to the std, not the variance: stds .5 and 1 split 30 as 10 + 20 (the variance would give 6 + 24)
  n_s, st_s = F.pilot_commit(np.array([0.0, 1.0, 0.0, 2.0]), np.array([0, 0, 1, 1]), num_groups=2, budget=30)
  np.testing.assert_allclose(st_s["score"], [0.5, 1.0])
  np.testing.assert_array_equal(n_s, [10, 20])
  n_v, _ = F.pilot_commit(np.array([0.0, 1.0, 0.0, 2.0]), np.array([0, 0, 1, 1]), num_groups=2, budget=30,
                          score="var")
  np.testing.assert_array_equal(n_v, [6, 24])
  n_u, _ = F.pilot_commit(np.array([1, 0, 1, 1, 0, 1]), np.array([0, 0, 1, 1, 2, 2]), num_groups=3, budget=9,
                          rule="uniform")
  np.testing.assert_array_equal(n_u, [4, 0, 4])      # whole ties only: 9 -> 4 + 4, one unallocated
  with pytest.raises(ValueError, match="rule"):
    F.pilot_commit(np.ones(2), np.array([0, 0]), num_groups=1, budget=2, rule="greedy")
  with pytest.raises(ValueError, match="pilot_rewards"):
    F.pilot_commit(np.array([np.nan, 1]), np.array([0, 0]), num_groups=1, budget=2)
  with pytest.raises(ValueError, match="group_id"):
    F.pilot_commit(np.ones(2), np.array([0, 5]), num_groups=1, budget=2)


def test_difficulty_budget_invariants():
  rng = np.random.default_rng(4)
  for trial in range(20):
    p = int(rng.integers(1, 10))
    acc = np.round(rng.random(p), 1)
    lo = int(rng.integers(0, 3))
    budget = p * lo + int(rng.integers(0, 40))
    hi = None if trial % 2 else max(lo, -(-budget // p)) + int(rng.integers(0, 3))
    n, st = F.difficulty_budget(acc, budget=budget, min_per_prompt=lo, max_per_prompt=hi)
    assert n.sum() == budget and np.all(n >= lo)                     # conserved, floor respected
    if hi is not None:
      assert np.all(n <= hi)
    for i in range(p):
      for j in range(p):
        if acc[i] < acc[j]:
          assert n[i] >= n[j]                                       # non-increasing in accuracy
        if acc[i] == acc[j]:
          assert abs(int(n[i]) - int(n[j])) <= 1
  n, _ = F.difficulty_budget(np.array([0.0, 0.5, 1.0]), budget=9)
  np.testing.assert_array_equal(n, [6, 3, 0])                        # weights 1, .5, 0
  n, _ = F.difficulty_budget(np.array([1.0, 1.0]), budget=5)
  assert n.sum() == 5                                                # all solved: uniform
  with pytest.raises(ValueError, match="accuracy"):
    F.difficulty_budget(np.array([1.5]), budget=3)
  with pytest.raises(ValueError, match="budget"):
    F.difficulty_budget(np.array([0.5, 0.5]), budget=3, min_per_prompt=2)
  with pytest.raises(ValueError, match="max_per_prompt"):
    F.difficulty_budget(np.array([0.5, 0.5]), budget=10, max_per_prompt=4)


# ----------------------------------------------------------------------------- shuffle_pairs / rorecomp

def test_shuffle_pairs_contrast_and_draw():
  adv = np.array([0.9, -0.9, 0.1, -0.1, 0.0, 0.0, 0.0, 1.0, -1.0, 0.5], np.float32)
  gid = np.array([0, 0, 0, 0, 1, 1, 1, 2, 2, 2], np.int32)
  order, st = F.shuffle_pairs(adv, gid, pairs_per_group=2)
  pairs = st["pairs"]
  np.testing.assert_array_equal(pairs, [[0, 1], [2, 3], [7, 8]])        # all-zero group 1: no pair
  for hi, lo in pairs:
    assert gid[hi] == gid[lo]
  g0 = adv[gid == 0]
  assert adv[0] - adv[1] == g0.max() - g0.min()                           # maximal gap of the group
  np.testing.assert_array_equal(order, pairs.ravel())
  order, st = F.shuffle_pairs(adv, gid, pairs_per_group=2, key=jax.random.key(0), num_samples=4000)
  counts = np.bincount(order, minlength=10) / 4000
  w = np.zeros(10)
  w[pairs.ravel()] = np.abs(adv[pairs.ravel()])
  np.testing.assert_allclose(counts, w / w.sum(), atol=0.03)
  # the gap must exceed min_gap strictly: a pair whose gap equals min_gap is not formed
  two = np.array([1.0, 0.5, 0.5, 0.0], np.float32)
  _, st_t = F.shuffle_pairs(two, np.zeros(4, np.int32), pairs_per_group=2)
  np.testing.assert_array_equal(st_t["pairs"], [[0, 3]])                   # 2nd pair (1, 2) has gap 0 = min_gap
  _, st_g = F.shuffle_pairs(two, np.zeros(4, np.int32), pairs_per_group=2, min_gap=1.0)
  assert st_g["num_pairs"] == 0                                           # gap 1 is not > 1
  _, st_g = F.shuffle_pairs(two, np.zeros(4, np.int32), pairs_per_group=2, min_gap=0.99)
  np.testing.assert_array_equal(st_g["pairs"], [[0, 3]])
  adv_z = adv.copy()
  adv_z[2] = 0.0
  order_z, _ = F.shuffle_pairs(adv_z, gid, pairs_per_group=2, key=jax.random.key(1), num_samples=500)
  assert 2 not in set(order_z.tolist())                                   # zero advantage never drawn
  perm = RNG.permutation(10)
  _, st_p = F.shuffle_pairs(adv[perm], gid[perm], pairs_per_group=2)
  assert {tuple(perm[p]) for p in st_p["pairs"]} == {tuple(p) for p in pairs}
  with pytest.raises(ValueError, match="pairs_per_group"):
    F.shuffle_pairs(adv, gid, pairs_per_group=0)
  with pytest.raises(ValueError, match="advantages"):
    F.shuffle_pairs(np.array([np.nan]), np.array([0]))


def test_rorecomp_partition_and_permutation():
  rng = np.random.default_rng(5)
  gid = ragged([6, 1, 5, 4], seed=5)
  b = len(gid)
  correct = rng.random(b) < 0.5
  lengths = rng.integers(1, 8, size=b)                     # many ties
  valid = rng.random(b) < 0.9
  prio, st = F.rorecomp(correct, lengths, gid, fraction=0.5, valid=valid)
  buf = st["buffer"]
  assert not np.any(prio & buf) and np.array_equal(prio | buf, valid)   # exactly one of the two
  for g in range(4):
    c_idx = np.flatnonzero(valid & (gid == g) & correct)
    w_idx = np.flatnonzero(valid & (gid == g) & ~correct)
    if c_idx.size:   # every priority correct is no longer than every buffered correct
      pc, bc = c_idx[prio[c_idx]], c_idx[~prio[c_idx]]
      assert pc.size >= 1 and (bc.size == 0 or lengths[pc].max() <= lengths[bc].min())
    if w_idx.size:   # every priority incorrect is no shorter than every buffered incorrect
      pw, bw = w_idx[prio[w_idx]], w_idx[~prio[w_idx]]
      assert pw.size >= 1 and (bw.size == 0 or lengths[pw].min() >= lengths[bw].max())
  perm = rng.permutation(b)
  prio_p, _ = F.rorecomp(correct[perm], lengths[perm], gid[perm], valid=valid[perm])
  np.testing.assert_array_equal(prio_p, prio[perm])
  # hand example
  prio, _ = F.rorecomp(np.array([1, 1, 0, 0, 1]), np.array([5, 9, 3, 8, 4]), np.array([0, 0, 0, 0, 1]))
  np.testing.assert_array_equal(prio, [1, 0, 0, 1, 1])
  with pytest.raises(ValueError, match="fraction"):
    F.rorecomp(np.ones(2), np.ones(2), np.array([0, 0]), fraction=0)
  with pytest.raises(ValueError, match="lengths"):
    F.rorecomp(np.ones(2), np.ones(3), np.array([0, 0]))
