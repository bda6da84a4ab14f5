"""Outcome-level advantage estimators against independent float64 NumPy references."""
import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rljax import advantages as A

JIT = [False, True]


def run(fn, *args, jit=True, **kw):
  f = functools.partial(fn, **kw)
  if jit:
    f = jax.jit(f)
  out = f(*args)
  return jax.tree_util.tree_map(np.asarray, out)


def ragged(sizes, seed=0, binary=False, shuffle=True):
  rng = np.random.RandomState(seed)
  gid = np.concatenate([np.full(s, i) for i, s in enumerate(sizes)]).astype(np.int32)
  r = rng.randint(0, 2, gid.size).astype(np.float32) if binary else rng.randn(gid.size).astype(np.float32)
  if shuffle:
    perm = rng.permutation(gid.size)
    gid, r = gid[perm], r[perm]
  return r, gid


# ----------------------------------------------------------------- references
def ref_grpo_verl(r, gid, eps=1e-6, norm=True):
  """verl compute_grpo_outcome_advantage (torch.std unbiased; singleton mean 0 std 1), float64."""
  r = r.astype(np.float64)
  out = np.zeros_like(r)
  for g in np.unique(gid):
    idx = gid == g
    x = r[idx]
    mean, std = (0.0, 1.0) if x.size == 1 else (x.mean(), x.std(ddof=1))
    out[idx] = (x - mean) / (std + eps) if norm else x - mean
  return out


def ref_loo(r, gid):
  out = np.zeros(r.shape, np.float64)
  for i in range(r.size):
    others = [r[j] for j in range(r.size) if gid[j] == gid[i] and j != i]
    out[i] = r[i] - np.mean(others) if others else 0.0
  return out


def ref_passk_bruteforce(r, gid, k):
  """A_i = (mean over k-subsets S∋i of max_S r − E_S max) / std_S max, by enumeration."""
  out = np.zeros(r.shape, np.float64)
  for g in np.unique(gid):
    idx = np.where(gid == g)[0]
    subsets = list(itertools.combinations(idx, k))
    maxes = np.array([max(r[list(s)]) for s in subsets], np.float64)
    rho, sigma = maxes.mean(), maxes.std()
    for i in idx:
      mi = np.mean([m for s, m in zip(subsets, maxes) if i in s])
      out[i] = 0.0 if sigma <= 1e-6 else (mi - rho) / sigma
  return out


# ------------------------------------------------------------------- GRPO family
def test_grpo_verl_doc_example():
  r = np.array([1., 0, 1, 1, 0, 0, 1, 0], np.float32)
  g = np.array([0, 0, 0, 0, 1, 1, 1, 1], np.int32)
  adv, info = A.grpo(r, g)
  np.testing.assert_allclose(adv, [.5, -1.5, .5, .5, -.5, -.5, 1.5, -.5], atol=5e-6)
  assert float(info["num_valid"]) == 8


@pytest.mark.parametrize("jit", JIT)
def test_grpo_matches_verl_formula_ragged(jit):
  r, g = ragged([4, 1, 3, 6, 2], seed=1)
  adv, _ = run(A.grpo, r, g, jit=jit, singleton="raw")
  np.testing.assert_allclose(adv, ref_grpo_verl(r, g), rtol=1e-5, atol=1e-6)
  adv0, info = run(A.grpo, r, g, jit=jit)  # default singleton="zero": the size-1 group gets 0
  ref = ref_grpo_verl(r, g)
  ref[np.isin(g, [1])] = 0.0
  np.testing.assert_allclose(adv0, ref, rtol=1e-5, atol=1e-6)
  assert float(info["num_singleton"]) == 1


def test_grpo_scales(jit=True):
  r, g = ragged([5, 3, 4], seed=2)
  adv_b, _ = run(A.grpo, r, g, jit=jit, scale="batch")
  mean = np.array([r[g == x].mean() for x in g], np.float64)
  np.testing.assert_allclose(adv_b, (r - mean) / (r.astype(np.float64).std(ddof=1) + 1e-6), rtol=1e-5, atol=1e-6)
  adv_n, _ = run(A.grpo, r, g, jit=jit, scale="none")
  np.testing.assert_allclose(adv_n, ref_grpo_verl(r, g, norm=False), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(run(A.dr_grpo, r, g, jit=jit)[0], adv_n, atol=1e-7)
  adv_p, _ = run(A.grpo, r, g, jit=jit, std_ddof=0, eps=0.0)
  std0 = np.array([r[g == x].astype(np.float64).std() for x in g])
  np.testing.assert_allclose(adv_p, (r - mean) / std0, rtol=1e-5, atol=1e-6)


def test_dr_grpo_is_grpo_times_std_and_shift_invariant():
  r, g = ragged([4, 4, 4], seed=3)
  adv = np.asarray(A.grpo(r, g)[0], np.float64)
  std = np.array([r[g == x].astype(np.float64).std(ddof=1) for x in g])
  np.testing.assert_allclose(A.dr_grpo(r, g)[0], adv * (std + 1e-6), rtol=1e-5, atol=1e-6)
  shifted = r + 3.0 * (g == 1)
  np.testing.assert_allclose(A.dr_grpo(shifted, g)[0], A.dr_grpo(r, g)[0], atol=1e-5)


def test_grpo_equal_rewards_and_all_masked_give_zero_not_nan():
  r = np.ones(6, np.float32)
  g = np.array([0, 0, 0, 1, 1, 1], np.int32)
  adv, info = A.grpo(r, g)
  np.testing.assert_array_equal(adv, np.zeros(6))
  assert float(info["frac_zero_std"]) == 1.0
  adv, info = A.grpo(r, g, valid=np.zeros(6, bool))
  np.testing.assert_array_equal(adv, np.zeros(6))
  assert float(info["num_valid"]) == 0


@pytest.mark.parametrize("jit", JIT)
def test_rloo_matches_leave_one_out(jit):
  r, g = ragged([4, 2, 5, 1], seed=4)
  adv, _ = run(A.rloo, r, g, jit=jit)
  np.testing.assert_allclose(adv, ref_loo(r, g), rtol=1e-5, atol=1e-5)
  for x in np.unique(g):
    assert abs(adv[g == x].sum()) < 1e-5
  # verl: a singleton keeps its raw reward
  adv_raw, _ = run(A.rloo, r, g, jit=jit, singleton="raw")
  single = g == 3
  np.testing.assert_allclose(adv_raw[single], r[single])


# ---------------------------------------------------------------- token estimators
def _np_masked_whiten(x, m):
  n = m.sum()
  mean = (x * m).sum() / (n + 1e-8)
  var = (((x - mean) ** 2) * m).sum() / (n + 1e-8) * n / (n - 1)
  return (x - mean) / np.sqrt(var + 1e-8)


def _ragged_mask(b, t, seed, holes=True):
  rng = np.random.RandomState(seed)
  lengths = rng.randint(2, t + 1, b)
  m = (np.arange(t)[None, :] < lengths[:, None]).astype(np.float32)
  if holes:  # observation tokens inside the response (multi-turn)
    m[:, 1] = 0.0
  return m


def test_reinforce_pp_carries_the_return_through_mask_holes(jit=True):
  b, t, gamma = 6, 7, 0.9
  rng = np.random.RandomState(5)
  m = _ragged_mask(b, t, 5)
  tok_r = (rng.randn(b, t) * m).astype(np.float32)
  adv, info = run(A.reinforce_pp, tok_r, m, jit=jit, gamma=gamma)
  # our default: the running return is carried through mask-0 tokens (float64 reference)
  returns = np.zeros((b, t))
  running = np.zeros(b)
  for s in reversed(range(t)):
    new = tok_r[:, s] + gamma * running
    returns[:, s] = new * m[:, s]
    running = new * m[:, s] + running * (1 - m[:, s])
  ref = _np_masked_whiten(returns, m) * m
  np.testing.assert_allclose(info["returns"], returns, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(adv, ref, rtol=1e-4, atol=1e-5)
  n = m.sum()
  assert abs((adv * m).sum() / n) < 1e-5
  np.testing.assert_allclose(((adv * m) ** 2).sum() / (n - 1), 1.0, rtol=1e-4)


def _verl_reinforce_pp(token_level_rewards, response_mask, gamma):
  """verl compute_reinforce_plus_plus_outcome_advantage (verl/trainer/ppo/core_algos.py), its loop and
  verl_F.masked_whiten (unbiased variance, rsqrt(var + 1e-8)) transcribed in float64 NumPy."""
  returns = np.zeros_like(token_level_rewards)
  running_return = 0
  for t in reversed(range(token_level_rewards.shape[1])):
    running_return = token_level_rewards[:, t] + gamma * running_return
    returns[:, t] = running_return
    # Reset after EOS
    running_return = running_return * response_mask[:, t]
  n = response_mask.sum()
  mean = (returns * response_mask).sum() / n
  var = (((returns - mean) ** 2) * response_mask).sum() / n * n / (n - 1)
  advantages = (returns - mean) / np.sqrt(var + 1e-8) * response_mask
  return advantages, returns


def _carry_reinforce_pp(token_level_rewards, response_mask, gamma):
  """Our default in float64 NumPy: the running return is carried through mask-0 tokens."""
  returns = np.zeros_like(token_level_rewards)
  running = np.zeros(token_level_rewards.shape[0])
  for t in reversed(range(token_level_rewards.shape[1])):
    new = token_level_rewards[:, t] + gamma * running
    returns[:, t] = new * response_mask[:, t]
    running = np.where(response_mask[:, t] > 0, new, running)
  n = response_mask.sum()
  mean = (returns * response_mask).sum() / n
  var = (((returns - mean) ** 2) * response_mask).sum() / n * n / (n - 1)
  return (returns - mean) / np.sqrt(var + 1e-8) * response_mask, returns


@pytest.mark.parametrize("outcome", [False, True], ids=["token_rewards", "outcome_rewards"])
def test_reinforce_pp_both_forms_equal_float64_references(outcome):
  b, t, gamma = 6, 9, 0.9
  rng = np.random.default_rng(8)
  m = _ragged_mask(b, t, 8).astype(np.float64)
  m[:, 4] = 0.0  # a second observation hole (multi-turn)
  m[0, :] = 0.0
  m[0, :3] = 1.0  # a hole-free row
  if outcome:
    r = rng.normal(size=b)
    last = (t - 1 - np.argmax(m[:, ::-1], axis=1))
    tok = np.zeros((b, t))
    tok[np.arange(b), last] = r
  else:
    tok = rng.normal(size=(b, t)) * m
    r = tok
  with jax.enable_x64(True):
    for reset, ref_fn in ((True, _verl_reinforce_pp), (False, _carry_reinforce_pp)):
      adv, info = A.reinforce_pp(jnp.asarray(r), jnp.asarray(m), gamma=gamma, reset_at_mask=reset)
      ref_adv, ref_ret = ref_fn(tok, m, gamma)
      assert adv.dtype == jnp.float64
      np.testing.assert_allclose(np.asarray(adv), ref_adv, rtol=1e-12, atol=1e-12)
      np.testing.assert_allclose(np.asarray(info["returns"]), ref_ret * m, rtol=1e-12, atol=1e-12)
    carry, _ = A.reinforce_pp(jnp.asarray(r), jnp.asarray(m), gamma=gamma)
    verl, _ = A.reinforce_pp(jnp.asarray(r), jnp.asarray(m), gamma=gamma, reset_at_mask=True)
  assert not np.allclose(np.asarray(carry), np.asarray(verl))  # holes: the two forms differ
  holes_free = np.ones((2, 5))
  holes_free[1, 3:] = 0.0
  a1, _ = A.reinforce_pp(np.array([1.0, -1.0], np.float32), holes_free)
  a2, _ = A.reinforce_pp(np.array([1.0, -1.0], np.float32), holes_free, reset_at_mask=True)
  np.testing.assert_array_equal(np.asarray(a1), np.asarray(a2))  # no holes: the same
  with pytest.raises(ValueError, match="reset_at_mask"):
    A.reinforce_pp(np.array([1.0, -1.0], np.float32), holes_free, reset_at_mask="yes")


def test_reinforce_pp_outcome_gamma1_constant_per_response():
  m = _ragged_mask(4, 6, 6, holes=False)
  r = np.array([1., 0., 2., -1.], np.float32)
  _, info = A.reinforce_pp(r, m, gamma=1.0)
  ret = np.asarray(info["returns"])
  for i in range(4):
    vals = ret[i][m[i] > 0]
    np.testing.assert_allclose(vals, r[i])


def test_reinforce_pp_baseline_matches_verl(jit=True):
  r, g = ragged([3, 4, 3], seed=7)
  m = _ragged_mask(r.size, 5, 7, holes=False)
  adv, _ = run(A.reinforce_pp_baseline, r, g, jit=jit, mask=m, singleton="raw")
  centred = ref_grpo_verl(r, g, norm=False)
  ref = _np_masked_whiten(centred[:, None] * m, m) * m
  np.testing.assert_allclose(adv, ref, rtol=1e-4, atol=1e-5)
  seq, _ = run(A.reinforce_pp_baseline, r, g, jit=jit)
  ones = np.ones(r.size)
  np.testing.assert_allclose(seq, _np_masked_whiten(centred, ones), rtol=1e-4, atol=1e-5)
  # adding a per-group constant leaves it unchanged
  np.testing.assert_allclose(A.reinforce_pp_baseline(r + 5.0 * (g == 2), g)[0], seq, rtol=1e-4, atol=1e-4)
  # invalid rows get 0 and their tokens do not enter the token whitening: equal to the valid rows alone
  valid = np.ones(r.size, bool)
  valid[[1, 5]] = False
  adv_v, _ = run(A.reinforce_pp_baseline, r, g, jit=jit, mask=m, valid=valid, singleton="raw")
  alone, _ = A.reinforce_pp_baseline(r[valid], g[valid], mask=m[valid], singleton="raw")
  np.testing.assert_allclose(np.asarray(adv_v)[valid], alone, rtol=1e-4, atol=1e-5)
  assert np.all(np.asarray(adv_v)[~valid] == 0)


def test_remax(jit=True):
  m = _ragged_mask(4, 5, 8, holes=False)
  r = np.array([1., 0., 0.5, 2.], np.float32)
  base = np.array([1., 1., 0., 0.5], np.float32)
  adv, _ = run(A.remax, r, base, jit=jit)
  np.testing.assert_allclose(adv, r - base)
  tok_adv, info = run(A.remax, r, base, jit=jit, mask=m)
  tok_r = np.asarray(A.outcome_to_token_rewards(r, m))
  returns = np.flip(np.cumsum(np.flip(tok_r * m, -1), -1), -1)
  np.testing.assert_allclose(tok_adv, returns - base[:, None] * m, atol=1e-6)
  assert np.all(tok_adv[0] == 0)  # sampled reward == greedy reward


def test_gae_matches_verl_loop(jit=True):
  b, t, gamma, lam = 5, 6, 0.95, 0.8
  rng = np.random.RandomState(9)
  m = _ragged_mask(b, t, 9)
  tok_r = (rng.randn(b, t) * m).astype(np.float32)
  vals = rng.randn(b, t).astype(np.float32)
  adv, info = run(A.gae, tok_r, vals, m, jit=jit, gamma=gamma, lam=lam)
  nextv, last, rev = np.zeros(b), np.zeros(b), []
  for s in reversed(range(t)):
    delta = tok_r[:, s] + gamma * nextv - vals[:, s]
    new = delta + gamma * lam * last
    nextv = vals[:, s] * m[:, s] + (1 - m[:, s]) * nextv
    last = new * m[:, s] + (1 - m[:, s]) * last
    rev.append(last)
  raw = np.stack(rev[::-1], 1)
  np.testing.assert_allclose(info["returns"], raw + vals, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(adv, _np_masked_whiten(raw, m) * m, rtol=1e-4, atol=1e-5)


def test_gae_gamma_lambda_one_is_return_minus_value():
  m = np.ones((3, 4), np.float32)
  rng = np.random.RandomState(10)
  tok_r, vals = rng.randn(3, 4).astype(np.float32), rng.randn(3, 4).astype(np.float32)
  adv, _ = A.gae(tok_r, vals, m, gamma=1.0, lam=1.0, whiten=False)
  ref = np.flip(np.cumsum(np.flip(tok_r, -1), -1), -1) - vals
  np.testing.assert_allclose(adv, ref, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------ Pass@k
@pytest.mark.parametrize("jit,k", [(True, 1), (True, 2), (False, 3)])
def test_passk_equals_bruteforce(jit, k):
  r, g = ragged([5, 4, 6, 3], seed=11 + k, binary=True)
  adv, _ = run(A.passk, r, g, jit=jit, k=k)
  np.testing.assert_allclose(adv, ref_passk_bruteforce(r, g, k), rtol=1e-4, atol=1e-5)
  rc, gc = ragged([5, 4, 6], seed=20 + k)  # continuous rewards with a tie
  rc[0] = rc[1] if gc[0] == gc[1] else rc[0]
  adv, _ = run(A.passk, rc, gc, jit=jit, k=k)
  np.testing.assert_allclose(adv, ref_passk_bruteforce(rc, gc, k), rtol=1e-4, atol=1e-5)


def test_passk_closed_form_binary():
  n, k = 8, 3
  fn = jax.jit(functools.partial(A.passk, k=k))
  for c in range(n + 1):
    r = np.array([1.0] * c + [0.0] * (n - c), np.float32)
    adv = np.asarray(fn(r, np.zeros(n, np.int32))[0])
    rho = 1 - math.comb(n - c, k) / math.comb(n, k)
    sigma = math.sqrt(rho * (1 - rho))
    if sigma == 0:
      np.testing.assert_array_equal(adv, 0.0)  # c = 0 or c = n (or c > n − k): documented 0
      continue
    a_pos = (1 - rho) / sigma
    a_neg = (1 - rho - math.comb(n - c - 1, k - 1) / math.comb(n - 1, k - 1)) / sigma
    np.testing.assert_allclose(adv[:c], a_pos, rtol=1e-4)
    np.testing.assert_allclose(adv[c:], a_neg, rtol=1e-4, atol=1e-6)


def test_passk_bad_k():
  r, g = ragged([4, 2], seed=3, binary=True)
  with pytest.raises(ValueError, match="k=3"):
    A.passk(r, g, k=3)
  with pytest.raises(ValueError, match="k must"):
    A.passk(r, g, k=0)
  adv, info = jax.jit(functools.partial(A.passk, k=3))(r, g)  # traced: documented zero + count
  assert np.all(np.asarray(adv)[g == 1] == 0) and float(info["num_groups_lt_k"]) == 1.0


# --------------------------------------------------------------------- other baselines
QAE = jax.jit(A.qae, static_argnames=("quantile", "interpolation"))


def test_qae_two_regimes_and_inverted_cdf():
  for seed in range(6):
    r, g = ragged([8, 10, 5], seed=seed, binary=True)
    for K in (0.2, 0.5, 0.8):
      adv = np.asarray(QAE(r, g, quantile=K, interpolation="inverted_cdf")[0])
      for x in np.unique(g):
        rg, ag = r[g == x], adv[g == x]
        q = np.quantile(rg, K, method="inverted_cdf")
        std = rg.astype(np.float64).std(ddof=1)
        np.testing.assert_allclose(ag, (rg - q) / (std + 1e-6), rtol=1e-5, atol=1e-6)
        p = rg.mean()
        if p <= 1 - K:
          assert np.all(ag[rg == 0] == 0)
        else:
          assert np.all(ag[rg == 1] == 0)


def test_qae_default_is_the_authors_linear_quantile():
  """Default = github.com/junkangwu/QAE: torch.quantile(scores, K) (linear) in verl GRPO, (r − q)/(std + 1e-6)."""
  for seed in range(4):
    for binary in (True, False):
      r, g = ragged([8, 10, 5, 1], seed=40 + seed, binary=binary)
      for K in (0.2, 0.4, 0.5, 0.75, 1.0):
        adv = np.asarray(QAE(r, g, quantile=K)[0])
        for x in np.unique(g):
          rg = r[g == x].astype(np.float64)
          if rg.size == 1:
            continue
          q = np.quantile(rg, K)  # numpy's default method is torch.quantile's "linear"
          np.testing.assert_allclose(adv[g == x], (rg - q) / (rg.std(ddof=1) + 1e-6), rtol=1e-5, atol=1e-5)
  # K·(n−1) between a failure and a success: both signs (the inverted-CDF gate would zero one side)
  r = np.array([0, 0, 0, 1, 1, 1, 1, 1], np.float32)
  adv = np.asarray(A.qae(r, np.zeros(8, np.int32), quantile=0.4)[0])  # h = 2.8: q = 0.8
  assert np.all(adv[r == 0] < 0) and np.all(adv[r == 1] > 0)
  with pytest.raises(ValueError, match="interpolation"):
    A.qae(r, np.zeros(8, np.int32), interpolation="nearest")


def test_rank_invariance_and_ties():
  r, g = ragged([5, 6, 4], seed=30)
  r[np.where(g == 1)[0][:2]] = 0.25  # a tie
  adv = np.asarray(A.rank(r, g)[0])
  np.testing.assert_allclose(A.rank(np.exp(3 * r) - 7, g)[0], adv, atol=1e-6)
  from scipy.stats import rankdata
  for x in np.unique(g):
    rg = r[g == x]
    n = rg.size
    np.testing.assert_allclose(adv[g == x], (rankdata(rg) - (n + 1) / 2) / ((n - 1) / 2), atol=1e-6)
  tied = np.where(g == 1)[0][:2]
  assert adv[tied[0]] == adv[tied[1]]


def test_vote(jit=True):
  r = np.array([1., 1., 0., 0., 1., 1., 1., 1.], np.float32)
  ans = np.array([7, 7, 3, 9, 2, 2, 2, 2], np.int32)
  g = np.array([0, 0, 0, 0, 1, 1, 1, 1], np.int32)
  adv, _ = run(A.vote, r, ans, g, jit=jit, scale="none", form="margin")
  np.testing.assert_allclose(adv[:4], r[:4] - 1.0)  # majority answer 7, reward 1
  np.testing.assert_allclose(adv[4:], 0.0)  # unanimous group
  # tie between answers -> mean reward of all tied-majority rollouts
  adv2, _ = A.vote(np.array([1., 0., 1., 0.]), np.array([1, 2, 1, 2]), np.zeros(4, np.int32), scale="none",
                   form="margin")
  np.testing.assert_allclose(adv2, [0.5, -0.5, 0.5, -0.5])
  # scale="group": the group's unbiased std (ddof=1) + eps, float64 NumPy reference
  adv3, _ = run(A.vote, r, ans, g, jit=jit, form="margin")
  sd = np.std(r[:4].astype(np.float64), ddof=1)
  np.testing.assert_allclose(adv3[:4], (r[:4] - 1.0) / (sd + 1e-6), rtol=1e-5)
  # default form="glpo": GRPO + max(0, r − r_vote); here r <= r_vote = 1 so only the GRPO part remains
  adv4, _ = run(A.vote, r, ans, g, jit=jit)
  np.testing.assert_allclose(adv4[:4], (r[:4] - r[:4].mean()) / sd, rtol=1e-5)
  np.testing.assert_allclose(adv4[4:], 0.0)
  # a rollout above the vote reward gets the margin as a bonus
  adv5, _ = A.vote(np.array([0., 0., 1.]), np.array([1, 1, 2]), np.zeros(3, np.int32), scale="none")
  np.testing.assert_allclose(adv5, np.array([0., 0., 1.]) - 1 / 3 + np.array([0., 0., 1.]), rtol=1e-6)


def test_task_normalized():
  rng = np.random.RandomState(31)
  a = rng.randn(12).astype(np.float32)
  task = np.array([0, 1, 2] * 4, np.int32)
  out = np.asarray(A.task_normalized(a, task)[0])
  for x in range(3):
    np.testing.assert_allclose(out[task == x].mean(), 0.0, atol=1e-6)
    np.testing.assert_allclose(out[task == x].std(ddof=1), 1.0, rtol=1e-5)
  sub = task != 2  # removing another task's samples changes nothing
  np.testing.assert_allclose(A.task_normalized(a[sub], task[sub])[0], out[sub], atol=1e-6)


def test_key_baseline():
  r, k = ragged([3, 5, 2], seed=32)
  adv = np.asarray(A.key_baseline(r, k)[0])
  for x in np.unique(k):
    np.testing.assert_allclose(adv[k == x], r[k == x] - r[k == x].astype(np.float64).mean(), atol=1e-6)
    assert abs(adv[k == x].sum()) < 1e-5


def test_role_ema_baseline():
  est = A.role_ema_baseline(num_keys=3, decay=0.5, init="batch_mean")
  s = est.init()
  r1, k1 = np.array([1., 3., 10.], np.float32), np.array([0, 0, 1], np.int32)
  adv, _, s = est.update(s, r1, k1)  # un-jitted
  np.testing.assert_allclose(adv, [-1., 1., 0.])  # unseen keys use the batch mean
  np.testing.assert_allclose(s.baseline, [2., 10., 0.])
  r2, k2 = np.array([4.], np.float32), np.array([0], np.int32)
  adv, _, s2 = jax.jit(est.update)(s, r2, k2)
  np.testing.assert_allclose(adv, [2.0])  # uses the old baseline 2
  np.testing.assert_allclose(s2.baseline, [3., 10., 0.])  # key 1 untouched
  # decay 0 + update-first equals key_baseline
  est0 = A.role_ema_baseline(num_keys=4, decay=0.0, update_first=True)
  r, kk = ragged([3, 4, 2], seed=33)
  upd = jax.jit(est0.update)
  _, _, st = upd(est0.init(), r * 0 + 5, kk)
  np.testing.assert_allclose(upd(st, r, kk)[0], A.key_baseline(r, kk, num_keys=4)[0], atol=1e-6)


def test_role_ema_baseline_default_matches_the_authors_per_game_ema():
  """github.com/spiral-rl/spiral: per role, baseline = EMA(0.95) starting at 0.0, read before its update."""
  rng = np.random.RandomState(7)
  est = A.role_ema_baseline(num_keys=2)
  state, b = est.init(), [0.0, 0.0]
  upd = jax.jit(est.update)
  for _ in range(6):  # one game per step: one return per role
    r = rng.choice([-1.0, 0.0, 1.0], 2).astype(np.float32)
    adv, _, state = upd(state, r, np.array([0, 1], np.int32))
    ref = [r[p] - b[p] for p in (0, 1)]
    b = [0.95 * b[p] + 0.05 * r[p] for p in (0, 1)]
    np.testing.assert_allclose(adv, ref, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(state.baseline, b, rtol=1e-5, atol=1e-6)
  with pytest.raises(ValueError, match="init"):
    A.role_ema_baseline(num_keys=2, init="mean")


def test_hadw():
  adv = np.array([1., -1., 1., -1., 1., 1.], np.float32)
  corr = np.array([1, 0, 1, 1, 1, 0], np.float32)
  g = np.array([0, 0, 1, 1, 2, 2], np.int32)
  acc_b = corr.mean()
  acc_g = np.array([.5, .5, 1., 1., .5, .5])
  # signed=False: every row of a harder-than-anchor group is amplified
  out0 = A.hadw(decay=0.5, strength=2.0, signed=False).update(A.hadw().init(), adv, corr, g)[0]
  w0 = np.exp(2.0 * (acc_b - acc_g))
  np.testing.assert_allclose(out0, adv * w0, rtol=1e-6)
  assert np.all(w0[acc_g < acc_b] > 1) and np.all(w0[acc_g > acc_b] < 1)
  # default (signed): hard groups (acc < anchor) raise positive and shrink negative advantages; easy groups the reverse
  est = A.hadw(decay=0.5, strength=2.0)
  s = est.init()
  out, info, s1 = est.update(s, adv, corr, g)
  w = np.exp(2.0 * np.sign(adv) * (acc_b - acc_g))
  np.testing.assert_allclose(out, adv * w, rtol=1e-6)
  assert np.all(np.sign(out) == np.sign(adv))
  hard, easy = acc_g < acc_b, acc_g > acc_b
  assert np.all(out[hard & (adv > 0)] > adv[hard & (adv > 0)]) and np.all(out[hard & (adv < 0)] > adv[hard & (adv < 0)])
  assert np.all(out[easy & (adv > 0)] < adv[easy & (adv > 0)]) and np.all(out[easy & (adv < 0)] < adv[easy & (adv < 0)])
  np.testing.assert_allclose(s1.anchor, acc_b, rtol=1e-6)
  _, _, s2 = jax.jit(est.update)(s1, adv, np.zeros(6, np.float32), g)
  np.testing.assert_allclose(s2.anchor, 0.5 * acc_b, rtol=1e-6)
  # the EMA keeps decay of the old anchor: a <- 0.9 a + 0.1 acc_batch (decay != 1/2 tells the two apart)
  est9 = A.hadw(decay=0.9)
  _, _, t1 = est9.update(est9.init(), adv, corr, g)
  _, _, t2 = est9.update(t1, adv, np.zeros(6, np.float32), g)
  np.testing.assert_allclose(t2.anchor, 0.9 * acc_b, rtol=1e-6)


def test_difficulty_weight():
  adv = np.ones(9, np.float32)
  corr = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0], np.float32)
  g = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2], np.int32)
  out = np.asarray(A.difficulty_weight(adv, corr, g, strength=0.5)[0])
  np.testing.assert_allclose(out, [0.5] * 3 + [1 + 0.5 * (2 * 2 / 3 - 1)] * 3 + [1.5] * 3, rtol=1e-6)
  # form="exp": exp(s (2d - 1)), d = 1 - acc: > 1 for the all-wrong group, < 1 for the all-right one
  out_e = np.asarray(A.difficulty_weight(adv, corr, g, strength=0.5, form="exp")[0])
  np.testing.assert_allclose(out_e, np.exp(0.5 * np.array([-1.] * 3 + [2 * 2 / 3 - 1] * 3 + [1.] * 3)), rtol=1e-6)
  with pytest.raises(ValueError, match="strength"):
    A.difficulty_weight(adv, corr, g, strength=1.5)


def test_gagar():
  rng = np.random.RandomState(34)
  r, g = ragged([6, 5], seed=34, binary=True)
  adv = np.asarray(A.grpo(r, g)[0])
  passed = r > 0
  scores = rng.randn(r.size).astype(np.float32)
  out = np.asarray(A.gagar(adv, passed, scores, g, power=1.0)[0])
  for x in np.unique(g):
    p = (g == x) & passed
    np.testing.assert_allclose(out[p].sum(), adv[p].sum(), rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(out[~passed], adv[~passed])
  # equal A among passing -> ratios equal weight ratios (rank-based)
  for x in np.unique(g):
    idx = np.where((g == x) & passed)[0]
    if idx.size >= 2:
      order = np.argsort(scores[idx])
      ranks = np.empty(idx.size)
      ranks[order] = np.arange(1, idx.size + 1)
      np.testing.assert_allclose(out[idx] / out[idx[0]], ranks / ranks[0], rtol=1e-5)
  np.testing.assert_allclose(A.gagar(adv, passed, scores, g, power=0.0)[0], adv, rtol=1e-6)


def test_uniqueness():
  adv = np.array([1., 1., 1., 1., -1., 2., 2., 2.], np.float32)
  corr = np.array([1, 1, 1, 1, 0, 1, 1, 1], bool)
  cl = np.array([5, 5, 6, 6, 5, 1, 1, 2], np.int32)
  g = np.array([0, 0, 0, 0, 0, 1, 1, 1], np.int32)
  out = np.asarray(A.uniqueness(adv, corr, cl, g)[0])
  np.testing.assert_allclose(out[:5], adv[:5])  # equal-size clusters, failing unchanged
  w = np.array([0.5, 0.5, 1.0])
  w = w / w.mean()
  np.testing.assert_allclose(out[5:], 2 * w, rtol=1e-6)
  assert out[7] == out[5:].max()


def ref_canon_authors(r, metric, gid, lam, max_length=1.0):
  """github.com/biuboomc/CANON core_algos.compute_dr_entropy_per_token_group_outcome_advantage, float64:
  sort each group by the metric, low half = first n//2; A = r − λ·μ_other − (1−λ)·μ_own, / max_length."""
  out = np.zeros(r.shape, np.float64)
  for x in np.unique(gid):
    idx = np.where(gid == x)[0]
    order = idx[np.argsort(metric[idx], kind="stable")]
    low, high = order[: len(order) // 2], order[len(order) // 2:]
    mu_low, mu_high = r[low].mean(), r[high].mean()
    out[high] = (lam * (r[high] - mu_low) + (1 - lam) * (r[high] - mu_high)) / max_length
    out[low] = (lam * (r[low] - mu_high) + (1 - lam) * (r[low] - mu_low)) / max_length
  return out


def test_canon_equals_the_authors_form_on_even_groups():
  """Even groups, untied metric: authors' λ form = ours with intra=1, inter=2λ, scale='none'."""
  r, g = ragged([6, 8, 4], seed=37, binary=True)
  met = np.random.RandomState(38).randn(r.size)
  for lam in (0.0, 0.3, 0.5, 1.0):
    ours = A.canon(r, met.astype(np.float32), g, inter_coef=2 * lam, intra_coef=1.0, scale="none")[0]
    np.testing.assert_allclose(ours, ref_canon_authors(r.astype(np.float64), met, g, lam), atol=1e-6)


def test_canon():
  r, g = ragged([6, 7, 4], seed=35)
  met = np.random.RandomState(36).randn(r.size).astype(np.float32)
  a, _ = A.canon(r, met, g, inter_coef=2.0, intra_coef=0.5)
  np.testing.assert_allclose(A.canon(r, -met, g, inter_coef=2.0, intra_coef=0.5)[0], a, atol=1e-6)
  np.testing.assert_allclose(A.canon(r, met, g, inter_coef=1.0, intra_coef=1.0)[0], A.grpo(r, g)[0], atol=1e-5)
  # reference: strata by the metric median of each group
  a = np.asarray(a)
  for x in np.unique(g):
    idx = np.where(g == x)[0]
    rg, mg = r[idx].astype(np.float64), met[idx]
    strata = np.sign(mg - np.median(mg))
    mu_g, sd = rg.mean(), rg.std(ddof=1)
    for j, i in enumerate(idx):
      mu_s = rg[strata == strata[j]].mean()
      np.testing.assert_allclose(a[i], (0.5 * (rg[j] - mu_s) + 2.0 * (mu_s - mu_g)) / (sd + 1e-6), rtol=1e-4,
                                 atol=1e-5)


# ------------------------------------------------------------- generic invariants
GROUP_FNS = {
    "grpo": lambda r, g: A.grpo(r, g)[0],
    "dr_grpo": lambda r, g: A.dr_grpo(r, g)[0],
    "rloo": lambda r, g: A.rloo(r, g)[0],
    "passk": lambda r, g: A.passk((r > 0).astype(jnp.float32), g, k=2)[0],
    "qae": lambda r, g: A.qae(r, g, quantile=0.3)[0],
    "rank": lambda r, g: A.rank(r, g)[0],
    "vote": lambda r, g: A.vote(r, jnp.round(r * 2).astype(jnp.int32), g)[0],
    "key_baseline": lambda r, g: A.key_baseline(r, g)[0],
    "reinforce_pp_baseline_unwhitened": lambda r, g: A.reinforce_pp_baseline(r, g)[0] * 0 + A.dr_grpo(r, g)[0],
    "canon": lambda r, g: A.canon(r, jnp.sin(7 * r), g, inter_coef=1.5, intra_coef=0.5)[0],
    "difficulty_weight": lambda r, g: A.difficulty_weight(A.grpo(r, g)[0], r > 0, g)[0],
    "outcome_conditioned_baseline": lambda r, g: A.outcome_conditioned_baseline(r, (r > 0).astype(jnp.int32), g)[0],
}


FAST = ("grpo", "rloo", "passk", "rank")


@pytest.mark.parametrize("name", [n if n in FAST else pytest.param(n, marks=pytest.mark.slow)
                                  for n in sorted(GROUP_FNS)])
def test_ragged_groups_equal_each_group_alone_and_permutation_equivariant(name):
  fn = jax.jit(GROUP_FNS[name])
  r, g = ragged([5, 2, 7, 3], seed=40)
  full = np.asarray(fn(r, g))
  for x in np.unique(g):
    idx = g == x
    alone = np.asarray(fn(r[idx], np.zeros(idx.sum(), np.int32)))
    np.testing.assert_allclose(full[idx], alone, rtol=1e-5, atol=1e-6)
  perm = np.random.RandomState(41).permutation(r.size)
  np.testing.assert_allclose(np.asarray(fn(r[perm], g[perm])), full[perm], rtol=1e-5, atol=1e-6)
  assert np.all(np.isfinite(full))


def test_bad_inputs():
  r, g = ragged([3, 3], seed=42)
  bad = r.copy()
  bad[1] = np.nan
  with pytest.raises(ValueError, match="rewards"):
    A.grpo(bad, g)
  with pytest.raises(ValueError, match="scale"):
    A.grpo(r, g, scale="prompt")
  with pytest.raises(ValueError, match="group_id"):
    A.grpo(r, g + 10, num_groups=4)
  with pytest.raises(ValueError, match="group_id"):
    A.grpo(r, g[:-1])
  with pytest.raises(ValueError, match="num_groups"):
    A.grpo(r, g, num_groups=0)
  with pytest.raises(ValueError, match="singleton"):
    A.grpo(r, g, singleton="nan")
  # a NaN reward on an invalid row is fine; under jit a NaN reward is masked, never propagated
  ok = np.asarray(A.grpo(bad, g, valid=~np.isnan(bad))[0])
  assert np.all(np.isfinite(ok)) and ok[1] == 0
  adv, info = jax.jit(A.grpo)(bad, g)
  np.testing.assert_allclose(np.asarray(adv), ok, atol=1e-6)
  assert float(info["num_valid"]) == 5


def test_to_tokens():
  m = np.array([[0, 1, 1, 0], [1, 1, 1, 1]], bool)
  np.testing.assert_array_equal(A.to_tokens(np.array([2., -1.]), m), [[0, 2, 2, 0], [-1, -1, -1, -1]])
  with pytest.raises(ValueError, match="mask"):
    A.to_tokens(np.array([2., -1., 0.]), m)


def test_catalog_rows():
  import rljax
  names = {t.name for t in rljax.catalog()}
  for name in ["grpo", "dr_grpo", "rloo", "reinforce_pp", "reinforce_pp_baseline", "remax", "gae", "qae", "passk",
               "rank", "vote", "task_normalized", "key_baseline", "role_ema_baseline", "hadw", "difficulty_weight",
               "gagar", "uniqueness", "canon", "segment", "outcome_conditioned_baseline", "tempo",
               "step_episode_mix", "sign_preserving_modulation", "implicit_progress_reward", "gdpo", "dara",
               "sa_mrpo", "gd2po"]:
    assert name in names, name
  for t in A.TECHNIQUES:
    assert t.fn.__doc__ and "Source" in t.fn.__doc__ or "seed" in t.fn.__doc__, t.name
