"""Token/segment-level advantage estimators against NumPy references and invariants."""
import functools

import jax
import numpy as np
import pytest

from rljax import advantages as A


def tree_group(sizes, t=6, vocab=2, seed=0):
  """Groups of responses with shared prefixes (small vocab forces branching), shuffled."""
  rng = np.random.RandomState(seed)
  gid = np.concatenate([np.full(s, i) for i, s in enumerate(sizes)]).astype(np.int32)
  b = gid.size
  tokens = rng.randint(0, vocab, (b, t)).astype(np.int32)
  tokens[:, :2] = 7  # a shared "prompt"
  mask = np.zeros((b, t), bool)
  lengths = rng.randint(3, t - 1, b)
  for i in range(b):
    mask[i, 2:2 + lengths[i]] = True
    tokens[i, 2 + lengths[i]:] = 0  # padding
  r = rng.randint(0, 2, b).astype(np.float32) + 0.25 * rng.randn(b).astype(np.float32)
  perm = rng.permutation(b)
  return r[perm], tokens[perm], mask[perm], gid[perm]


def ref_tempo(r, tokens, mask, gid, eps=1e-6):
  """Pairwise definition: same_{ij,t} = Π_{s<=t} 1[tok_is = tok_js] (masked tokens = -1)."""
  b, t = tokens.shape
  tok = np.where(mask, tokens, -1)
  grpo = np.zeros(b)
  denom = np.zeros(b)
  for g in np.unique(gid):
    idx = gid == g
    x = r[idx].astype(np.float64)
    sd = x.std(ddof=1) if x.size > 1 else 0.0
    grpo[idx] = (x - x.mean()) / (sd + eps) if x.size > 1 else 0.0
    denom[idx] = sd + eps
  adv = np.zeros((b, t))
  branch = np.zeros((b, t), bool)
  for i in range(b):
    members = np.where(gid == gid[i])[0]
    same_prev = np.ones(members.size, bool)
    for s in range(t):
      same = same_prev & (tok[members, s] == tok[i, s])
      v_before = r[members[same_prev]].astype(np.float64).mean()
      v_after = r[members[same]].astype(np.float64).mean()
      if mask[i, s]:
        branch[i, s] = not np.all(same == same_prev)
        adv[i, s] = grpo[i] + (v_after - v_before) / denom[i]
      same_prev = same
  return adv, branch, grpo


def test_tempo_matches_pairwise_reference_and_grpo_off_branch():
  r, tokens, mask, gid = tree_group([5, 3, 6, 1], seed=1)
  fn = A.tempo  # eager call (host checks + cached jit); test_tempo_paths_agree traces it inside jax.jit
  adv, info = fn(r, tokens, mask, gid)
  adv = np.asarray(adv)
  ref, branch, grpo = ref_tempo(r, tokens, mask, gid)
  np.testing.assert_allclose(adv, ref, rtol=1e-5, atol=1e-5)
  # TEMPO equals GRPO at every non-branch token; the TD term lives only on branch tokens
  off = mask & ~branch
  np.testing.assert_allclose(adv[off], np.broadcast_to(np.asarray(A.grpo(r, gid)[0])[:, None], adv.shape)[off],
                             rtol=0, atol=1e-6)
  td = np.asarray(info["td"])
  assert np.all(td[~branch] == 0)
  assert branch.any() and np.any(td[branch] != 0)
  assert np.all(adv[~mask] == 0)


def test_tempo_ragged_alone_and_permutation():
  r, tokens, mask, gid = tree_group([4, 6], seed=2)
  fn = jax.jit(A.tempo)
  full = np.asarray(fn(r, tokens, mask, gid)[0])
  for g in np.unique(gid):
    idx = gid == g
    alone = np.asarray(fn(r[idx], tokens[idx], mask[idx], np.zeros(idx.sum(), np.int32))[0])
    np.testing.assert_allclose(full[idx], alone, rtol=1e-5, atol=1e-6)
  perm = np.random.RandomState(3).permutation(r.size)
  np.testing.assert_allclose(np.asarray(fn(r[perm], tokens[perm], mask[perm], gid[perm])[0]), full[perm],
                             rtol=1e-5, atol=1e-6)


def test_tempo_options():
  r, tokens, mask, gid = tree_group([5], seed=4)
  a0 = np.asarray(A.tempo(r, tokens, mask, gid, td_coef=0.0)[0])
  np.testing.assert_allclose(a0, np.asarray(A.grpo(r, gid)[0])[:, None] * mask, atol=1e-7)
  a_nr, info = A.tempo(r, tokens, mask, gid, root_branch=False)
  first = mask & ~np.concatenate([np.zeros((r.size, 1), bool), mask[:, :-1]], 1)
  assert np.all(np.asarray(info["td"])[first] == 0)


def test_segment_zero_outside_and_single_segment_is_grpo():
  rng = np.random.RandomState(5)
  gid = np.array([0, 0, 0, 1, 1, 1, 1], np.int32)
  b, t, k = 7, 8, 2
  rewards = rng.randn(b, k).astype(np.float32)
  seg = np.full((b, t), -1, np.int32)
  seg[:, 1:4] = 0
  seg[:, 4:7] = 1
  seg[:, 7] = k           # one past the last segment: outside [0, K), gets 0
  seg[2, 0] = k + 3
  adv, info = jax.jit(A.segment)(rewards, seg, gid)
  adv = np.asarray(adv)
  outside = (seg < 0) | (seg >= k)
  assert np.all(adv[outside] == 0)
  assert np.all(adv[~outside] != 0)
  for j in range(k):
    ref = np.asarray(A.grpo(rewards[:, j], gid)[0])
    np.testing.assert_allclose(adv[seg == j], np.broadcast_to(ref[:, None], (b, t))[seg == j], atol=1e-6)
  one = np.where(seg >= 0, 0, -1).astype(np.int32)
  m = seg >= 0
  adv1, _ = A.segment(rewards[:, :1], one, gid, mask=m)
  np.testing.assert_allclose(adv1, A.to_tokens(A.grpo(rewards[:, 0], gid)[0], m), atol=1e-7)


def test_outcome_conditioned_baseline():
  r = np.array([1., 0., .5, 1., 2., 0., 3., 4.], np.float32)
  o = np.array([1, 1, 0, 0, 0, 1, 1, 5], np.int32)
  g = np.array([0, 0, 0, 0, 1, 1, 1, 1], np.int32)
  adv = np.asarray(A.outcome_conditioned_baseline(r, o, g)[0])
  np.testing.assert_allclose(adv, [.5, -.5, -.25, .25, 0., -1.5, 1.5, 0.], atol=1e-6)  # singleton strata -> 0


def test_step_episode_mix():
  b, m_turns, t = 4, 3, 9
  rng = np.random.RandomState(6)
  turn_r = rng.randn(b, m_turns).astype(np.float32)
  turn_ids = np.repeat(np.arange(m_turns), 3)[None, :].repeat(b, 0).astype(np.int32)
  turn_ids[:, 0] = -1  # an observation token
  mask = turn_ids >= 0
  ep = rng.randn(b).astype(np.float32)
  gid = np.array([0, 0, 1, 1], np.int32)
  tv = np.ones((b, m_turns), bool)
  tv[1, 2] = False  # trajectory 1 has only two turns
  adv0, info = A.step_episode_mix(turn_r, turn_ids, ep, gid, mask=mask, step_weight=0.0, gamma=0.9, turn_valid=tv)
  np.testing.assert_allclose(adv0, A.to_tokens(A.grpo(ep, gid)[0], mask), atol=1e-6)
  ret = np.zeros((b, m_turns))
  for i in range(b):
    run = 0.0
    for j in reversed(range(m_turns)):
      if tv[i, j]:
        run = turn_r[i, j] + 0.9 * run
        ret[i, j] = run
  np.testing.assert_allclose(info["returns"], ret, rtol=1e-5, atol=1e-6)
  adv1, _ = jax.jit(functools.partial(A.step_episode_mix, step_weight=1.0, gamma=0.9))(
      turn_r, turn_ids, ep, gid, mask=mask, turn_valid=tv)
  adv1 = np.asarray(adv1)
  # turn 0 of group 0: standardise returns of rows 0, 1
  x = ret[[0, 1], 0]
  z = (x - x.mean()) / (x.std(ddof=1) + 1e-6)
  np.testing.assert_allclose(adv1[[0, 1], 1], z, rtol=1e-5)
  assert np.all(adv1[:, 0] == 0)


def test_sign_preserving_modulation():
  rng = np.random.RandomState(7)
  b, m_turns, t = 6, 2, 6
  adv = rng.randn(b).astype(np.float32)
  sig = 5 * rng.randn(b, m_turns).astype(np.float32)
  turn_ids = np.repeat(np.arange(m_turns), 3)[None, :].repeat(b, 0).astype(np.int32)
  mask = np.ones((b, t), bool)
  gid = np.array([0, 0, 0, 1, 1, 1], np.int32)
  out, info = A.sign_preserving_modulation(adv, sig, turn_ids, gid, mask=mask, lam=1.0, eps_w=1.0, signed=False,
                                           norm="turn_index")  # the earlier reading A·(1 + λ tanh z)
  out = np.asarray(out)
  assert np.all(np.sign(out) == np.sign(adv)[:, None])
  z = np.zeros((b, m_turns))
  for g in (0, 1):
    idx = gid == g
    z[idx] = (sig[idx] - sig[idx].mean(0)) / (sig[idx].std(0) + 1e-6)
  ref = adv[:, None] * (1 + np.tanh(np.take_along_axis(z, turn_ids, 1)))
  np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(A.sign_preserving_modulation(adv, sig, turn_ids, gid, mask=mask, lam=0.0)[0],
                             adv[:, None] * mask)
  with pytest.raises(ValueError, match="lam"):
    A.sign_preserving_modulation(adv, sig, turn_ids, gid, mask=mask, lam=1.5)


def test_implicit_progress_reward():
  rng = np.random.RandomState(8)
  logp = -rng.rand(3, 5).astype(np.float32)
  mask = rng.rand(3, 5) > 0.3
  r, info = A.implicit_progress_reward(logp, logp, mask, beta=0.5)
  np.testing.assert_array_equal(r, 0.0)
  ref = -rng.rand(3, 5).astype(np.float32)
  r, info = A.implicit_progress_reward(logp, ref, mask, beta=0.5)
  np.testing.assert_allclose(r, 0.5 * (logp - ref) * mask, rtol=1e-6)
  np.testing.assert_allclose(info["sequence_sum"], (0.5 * (logp - ref) * mask).sum(1), rtol=1e-5)
  g = jax.grad(lambda lp: A.implicit_progress_reward(lp, ref, mask)[0].sum())(logp)
  np.testing.assert_array_equal(g, 0.0)
  mask[0, 0], mask[1, 2] = True, False
  bad = logp.copy()
  bad[0, 0] = np.nan
  with pytest.raises(ValueError, match="logp.*inside `mask`") as err:
    A.implicit_progress_reward(bad, ref, mask)
  assert "valid" not in str(err.value)  # the function has no `valid` argument to suggest
  with pytest.raises(ValueError, match="logp_ref"):
    A.implicit_progress_reward(logp, np.where(mask, np.inf, ref), mask)


def test_implicit_progress_reward_padding_and_beta():
  """Padding may hold NaN / −inf (a forward's log-probs outside the completion): eager and jit both give 0 there."""
  rng = np.random.RandomState(9)
  logp = -rng.rand(3, 6).astype(np.float32)
  ref = -rng.rand(3, 6).astype(np.float32)
  mask = np.ones((3, 6), bool)
  mask[0, 4:] = False
  mask[2] = False  # an all-padding row
  pad_logp = np.where(mask, logp, np.nan).astype(np.float32)
  pad_ref = np.where(mask, ref, -np.inf).astype(np.float32)
  want = np.where(mask, 0.5 * (logp.astype(np.float64) - ref), 0.0)
  eager, info = A.implicit_progress_reward(pad_logp, pad_ref, mask, beta=0.5)
  jitted, info_j = jax.jit(lambda a, b, m: A.implicit_progress_reward(a, b, m, beta=0.5))(pad_logp, pad_ref, mask)
  for r, i in ((eager, info), (jitted, info_j)):
    np.testing.assert_allclose(r, want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(i["sequence_sum"], want.sum(1), rtol=1e-5, atol=1e-7)
    assert np.all(np.isfinite(np.asarray(i["mean"])))
  for beta in (0.0, -1.0, float("nan"), float("inf")):
    with pytest.raises(ValueError, match="beta"):
      A.implicit_progress_reward(logp, ref, mask, beta=beta)


def test_tempo_paths_agree():
  r, tokens, mask, gid = tree_group([5, 3, 6, 1], seed=1)
  fn = jax.jit(A.tempo, static_argnames=("max_group_size",))
  sort_path = np.asarray(fn(r, tokens, mask, gid, max_group_size=None)[0])
  near = np.asarray(fn(r, tokens, mask, gid, max_group_size=6)[0])
  fallback = np.asarray(fn(r, tokens, mask, gid, max_group_size=4)[0])  # a group of 6 > 4: sort path at run time
  np.testing.assert_allclose(near, sort_path, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(fallback, sort_path, rtol=1e-6, atol=1e-6)
