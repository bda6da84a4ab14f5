"""Fidelity, second pass (issue #35): rows moved off basis "abstract" after their authors' code (or, where none was
released, the paper's body) was found. Each test compares rljax's function, set to the reference's form, with a
float64 NumPy transcription of that code or pseudocode (written for these tests, not copied) on random inputs.
"""
import collections

import jax
import numpy as np

import rljax.advantages as A


# ----------------------------------------------------------------------------------------------------------------
# HA-DW: github.com/yangfengkai/HA-DW verl/trainer/ppo/core_algos.py compute_ha_dw_outcome_advantage; the trainer
# (ray_trainer.py) appends the batch's mean reward to a deque(maxlen=reward_window_k) before the advantage step.

def _hadw_authors(scores, index, history, eps=1e-6):
  """One step of the authors' estimator; ``history`` already holds this batch's mean reward."""
  scores = np.asarray(scores, np.float64)
  hist_mean = np.mean(history) if len(history) else scores.mean()
  out = np.zeros_like(scores)
  for g in np.unique(index):
    rows = np.where(index == g)[0]
    grp = scores[rows]
    if len(rows) == 1:
      mean, std = 0.0, 1.0
    else:
      mean, std = grp.mean(), grp.std(ddof=1)
    for i in rows:
      diff = mean - hist_mean
      direction = -np.sign(diff) * np.sign(scores[i] - mean)
      out[i] = 1.5 * np.exp(direction * abs(diff)) * (scores[i] - mean) / (std + eps)
  return out


def test_hadw_window_scale_matches_authors_code_over_steps():
  rng = np.random.default_rng(0)
  k, n, groups = 3, 6, 5
  est = A.hadw(window=k, scale=1.5)
  step = jax.jit(est.update)
  state = est.init()
  history = collections.deque(maxlen=k)
  gid = np.repeat(np.arange(groups), n).astype(np.int32)
  for t in range(5):  # more steps than the window, so old batches leave it
    p = rng.uniform(0.05, 0.95, size=groups)
    r = (rng.uniform(size=(groups, n)) < p[:, None]).astype(np.float32).reshape(-1)
    if t == 2:
      r[:n] = 1.0  # an all-correct group: A = 0 for both
    history.append(float(r.mean()))
    ref = _hadw_authors(r, gid, list(history))
    adv, _ = A.grpo(r, gid)
    out, info, state = step(state, adv, r, gid)
    np.testing.assert_allclose(np.asarray(out, np.float64), ref, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(float(info["anchor"]), np.mean(history), rtol=1e-6)
  assert int(state.count) == k


def test_hadw_window_ignores_an_all_invalid_batch():
  est = A.hadw(window=2, scale=1.5)
  r = np.array([1., 0., 1., 1.], np.float32)
  gid = np.array([0, 0, 1, 1], np.int32)
  _, _, s1 = est.update(est.init(), A.grpo(r, gid)[0], r, gid)
  _, _, s2 = est.update(s1, np.zeros(4, np.float32), r, gid, valid=np.zeros(4, bool))
  np.testing.assert_array_equal(np.asarray(s2.history), np.asarray(s1.history))
  assert int(s2.count) == 1


# ----------------------------------------------------------------------------------------------------------------
# UI-S1 (Semi-online RL): github.com/X-PLUG/MobileAgent UI-S1/uis1/core_uis1.py (compute_step_discounted_returns,
# compute_uis1_outcome_advantage with mode="mean_std_norm"); one row per (trajectory, turn).

def _uis1_authors(uid, traj, step, reward, gamma, w_ep=1.0, w_step=1.0, eps=1e-6):
  reward = np.asarray(reward, np.float64)
  ret = np.zeros_like(reward)
  for tr in np.unique(traj):
    rows = np.where(traj == tr)[0]
    rows = rows[np.argsort(step[rows])]
    running = 0.0
    for i in rows[::-1]:  # extract_match all True: the chain never restarts
      running = reward[i] + gamma * running
      ret[i] = running
  ep = np.zeros_like(reward)
  for u in np.unique(uid):  # compute_mean_std_cross_all_data=True: every row of the prompt
    rows = np.where(uid == u)[0]
    mean, std = (0.0, 1.0) if len(rows) == 1 else (reward[rows].mean(), reward[rows].std(ddof=1))
    ep[rows] = (reward[rows] - mean) / (std + eps)
  st = np.zeros_like(reward)
  for key in set(zip(uid, step)):
    rows = np.where((uid == key[0]) & (step == key[1]))[0]
    mean, std = (ret[rows].mean(), 1.0) if len(rows) == 1 else (ret[rows].mean(), ret[rows].std(ddof=1))
    st[rows] = (ret[rows] - mean) / (std + eps)
  return w_ep * ep + w_step * st


def test_step_episode_mix_turns_matches_ui_s1_code():
  rng = np.random.default_rng(1)
  prompts, n, turns, tok = 3, 4, 4, 2
  b = prompts * n
  lengths = rng.integers(1, turns + 1, size=b)
  turn_r = rng.uniform(size=(b, turns)).astype(np.float32)
  turn_valid = np.arange(turns)[None, :] < lengths[:, None]
  turn_ids = np.repeat(np.arange(turns), tok)[None, :].repeat(b, 0)
  turn_ids = np.where(turn_valid[:, turn_ids[0]], turn_ids, -1).astype(np.int32)
  mask = turn_ids >= 0
  gid = np.repeat(np.arange(prompts), n).astype(np.int32)
  adv, _ = A.step_episode_mix(turn_r, turn_ids, np.zeros(b, np.float32), gid, mask=mask, step_weight=1.0,
                              episode_weight=1.0, episode="turns", gamma=0.5, turn_valid=turn_valid)
  i, m = np.nonzero(turn_valid)  # the authors' rows
  ref = _uis1_authors(gid[i], i, m, turn_r[i, m], gamma=0.5)
  want = np.zeros((b, turns * tok))
  for row, (ii, mm) in enumerate(zip(i, m)):
    want[ii, mm * tok:(mm + 1) * tok] = ref[row]
  np.testing.assert_allclose(np.asarray(adv, np.float64), want, rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------------------------------------------
# Progress advantage: github.com/deeplearning-wisc/progress-advantage pa/scoring.py (per_step_progress_advantage)
# with pa/aggregations.py (aggregate_tokens): a step's score is beta·(agg(log pi) − agg(log pi_ref)) over its tokens.

def _progress_authors(policy_steps, ref_steps, token_agg, beta):
  agg = {"sum": np.sum, "mean": np.mean}[token_agg]
  return [beta * (float(agg(np.asarray(p, np.float64))) - float(agg(np.asarray(r, np.float64))))
          for p, r in zip(policy_steps, ref_steps)]


def test_implicit_progress_reward_step_sums_match_progress_advantage_code():
  rng = np.random.default_rng(2)
  b, t, beta = 3, 12, 0.7
  logp = rng.normal(-2.0, 1.0, size=(b, t)).astype(np.float32)
  logp_ref = rng.normal(-2.0, 1.0, size=(b, t)).astype(np.float32)
  step_of = np.array([-1, 0, 0, 0, -1, 1, 1, -1, 2, 2, 2, 2], np.int32)  # -1: observation tokens
  mask = step_of >= 0
  rew, _ = A.implicit_progress_reward(logp, logp_ref, np.broadcast_to(mask, (b, t)), beta=beta)
  rew = np.asarray(rew, np.float64)
  for i in range(b):
    steps = [np.where(step_of == k)[0] for k in range(3)]
    want_sum = _progress_authors([logp[i, s] for s in steps], [logp_ref[i, s] for s in steps], "sum", beta)
    want_mean = _progress_authors([logp[i, s] for s in steps], [logp_ref[i, s] for s in steps], "mean", beta)
    np.testing.assert_allclose([rew[i, s].sum() for s in steps], want_sum, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose([rew[i, s].mean() for s in steps], want_mean, rtol=1e-6, atol=1e-6)
    assert np.all(rew[i, ~mask] == 0.0)


# ----------------------------------------------------------------------------------------------------------------
# Blockwise Advantage Estimation (arXiv 2602.10231), App. B Algorithm 1: no code was found, so this transcribes the
# paper's pseudocode (basis "paper_formula"): block 1 baseline = group mean; block k > 1 baseline = mean of the
# group's samples with the same intermediate outcome; A = r − b applied to the block's tokens (main runs: no std).

def _bae_alg1(r, outcome, gid):
  r = np.asarray(r, np.float64)
  a = np.zeros_like(r)
  for g in np.unique(gid):
    rows = np.where(gid == g)[0]
    a[rows, 0] = r[rows, 0] - r[rows, 0].mean()
    for k in range(1, r.shape[1]):
      for o in np.unique(outcome[rows, k]):
        stratum = rows[outcome[rows, k] == o]
        a[stratum, k] = r[stratum, k] - r[stratum, k].mean()
  return a


def test_segment_and_outcome_conditioned_baseline_match_blockwise_ae_algorithm_1():
  rng = np.random.default_rng(3)
  groups, n, tok = 4, 8, 3
  b = groups * n
  gid = np.repeat(np.arange(groups), n).astype(np.int32)
  correct = rng.integers(0, 2, size=b)
  r = np.stack([correct, -(rng.uniform(size=b) - correct) ** 2], axis=1).astype(np.float32)  # RLVR, Brier
  outcome = np.stack([np.zeros(b, int), correct], axis=1)
  want = _bae_alg1(r, outcome, gid)
  seg_ids = np.broadcast_to(np.repeat(np.arange(2), tok), (b, 2 * tok)).astype(np.int32)
  adv1, _ = A.segment(r[:, :1], np.where(seg_ids == 0, 0, -1).astype(np.int32), gid, scale="none")
  np.testing.assert_allclose(np.asarray(adv1)[:, :tok], np.repeat(want[:, :1], tok, 1), rtol=1e-6, atol=1e-6)
  adv2, _ = A.outcome_conditioned_baseline(r[:, 1], correct.astype(np.int32), gid)
  np.testing.assert_allclose(np.asarray(adv2), want[:, 1], rtol=1e-6, atol=1e-6)
  routed = np.asarray(A.to_tokens(adv2, seg_ids == 1))
  np.testing.assert_allclose(routed[:, tok:], np.repeat(want[:, 1:], tok, 1), rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------------------------------------------
# GLPO (VAA-CSEC): github.com/HanYiton/VAA-CSEC YuYi/glpo/glpo_swift_plugin.py (_glpo_compute_advantages,
# _compute_group_per_sample): base = (R − mean_K) / clamp(std_K, 1e-4), bonus = max(0, R − R(G)), R(G) = reward of
# the most common answer (Counter.most_common). Groups here have a unique majority answer (the authors break ties by
# first occurrence; we average the tied answers).

def _glpo_authors(r, answers, k, bonus_scale=1.0, std_eps=1e-4):
  r = np.asarray(r, np.float64).reshape(-1, k)
  answers = np.asarray(answers).reshape(-1, k)
  out = np.zeros_like(r)
  for i in range(r.shape[0]):
    vals, counts = np.unique(answers[i], return_counts=True)
    vote = vals[np.argmax(counts)]
    r_g = r[i][answers[i] == vote][0]
    base = (r[i] - r[i].mean()) / max(r[i].std(ddof=1), std_eps)
    out[i] = base + bonus_scale * np.maximum(r[i] - r_g, 0.0)
  return out.reshape(-1)


def test_vote_default_matches_glpo_code():
  rng = np.random.default_rng(4)
  groups, k = 6, 8
  answers = np.zeros((groups, k), np.int32)
  for i in range(groups):
    answers[i] = rng.choice([0, 1, 2, 3], size=k, p=[0.55, 0.25, 0.15, 0.05])
    answers[i, :4] = 0  # a strict majority answer
  answer_reward = rng.uniform(-1.5, 3.7, size=(groups, 4))  # one reward per distinct answer, as the task reward is
  r = np.take_along_axis(answer_reward, answers, axis=1).astype(np.float32).reshape(-1)
  r[k:2 * k] = 1.0  # a zero-variance group
  answers[1] = 0
  gid = np.repeat(np.arange(groups), k).astype(np.int32)
  want = _glpo_authors(r, answers.reshape(-1), k)
  got, _ = A.vote(r, answers.reshape(-1), gid, eps=1e-4)
  np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-6, atol=1e-6)
  got2, _ = A.vote(r, answers.reshape(-1), gid, eps=1e-4, bonus=0.3)
  np.testing.assert_allclose(np.asarray(got2, np.float64), _glpo_authors(r, answers.reshape(-1), k, 0.3),
                             rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------------------------------------------
# SA-MRPO (arXiv 2608.16072 Sec. 4.1, Eq. 1, Algorithm 1; no code was released): transcription of the paper's
# pseudocode with its population std (Sec. 3) and no epsilon (groups here have non-zero variance in every column).

def _sa_mrpo_paper(r, gid, lo, hi, gamma, w):
  r = np.asarray(r, np.float64)
  s = (r.mean(0) - lo) / (hi - lo)
  a = np.zeros(r.shape[0])
  for g in np.unique(gid):
    rows = gid == g
    a[rows] = ((r[rows] - r[rows].mean(0)) / r[rows].std(0)) @ (w * (1 - s) ** gamma)
  return (a - a.mean()) / a.std()


def test_sa_mrpo_default_matches_the_paper_algorithm():
  rng = np.random.default_rng(5)
  groups, n, k = 5, 8, 3
  gid = np.repeat(np.arange(groups), n).astype(np.int32)
  r = np.stack([rng.integers(0, 2, size=groups * n), rng.uniform(0, 2, size=groups * n),
                (rng.uniform(size=groups * n) < 0.9)], 1).astype(np.float32)
  for g in range(groups):  # non-zero variance in every column of every group
    r[g * n, 2], r[g * n + 1, 2], r[g * n, 0], r[g * n + 1, 0] = 0, 1, 0, 1
  lo, hi = np.zeros(k), np.array([1.0, 2.0, 1.0])
  for gamma, w in ((0.25, np.ones(k)), (0.5, np.array([1.0, 0.5, 2.0]))):
    want = _sa_mrpo_paper(r, gid, lo, hi, gamma, w)
    got, _ = A.sa_mrpo(r, gid, reward_min=0.0, reward_max=hi.tolist(), gamma=gamma, weights=w.tolist(), eps=0.0)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------------------------------------------
# TurnSight (arXiv 2608.04007, "Group-Normalized Weight Construction", "Advantage Integration"; its code is not in our
# store): δ̂ = (δ̄* − μ_q)/(σ_q + ε) over the query's sibling turns, w = 1 + ε_w tanh(sign(A)·δ̂),
# Ã = A·[(1 − λ) + λ w], λ = ε_w = 0.5. Here every turn has one token, so the paper's token-level pooling and our
# per-turn pooling coincide.

def _turnsight_paper(a_tok, delta, turn_of_tok, turn_valid, gid, lam=0.5, eps_w=0.5, eps=1e-6):
  a_tok = np.asarray(a_tok, np.float64)
  out = a_tok.copy()
  for g in np.unique(gid):
    rows = np.where(gid == g)[0]
    vals = np.concatenate([delta[i][turn_valid[i]] for i in rows]).astype(np.float64)
    mu, sd = vals.mean(), vals.std()
    for i in rows:
      for t, k in enumerate(turn_of_tok[i]):
        if k < 0:
          continue
        w = 1 + eps_w * np.tanh(np.sign(a_tok[i, t]) * (delta[i, k] - mu) / (sd + eps))
        out[i, t] = a_tok[i, t] * ((1 - lam) + lam * w)
  return out


def test_sign_preserving_modulation_default_matches_turnsight_paper():
  rng = np.random.default_rng(6)
  groups, n, turns = 3, 4, 4
  b = groups * n
  gid = np.repeat(np.arange(groups), n).astype(np.int32)
  lengths = rng.integers(1, turns + 1, size=b)
  turn_valid = np.arange(turns)[None, :] < lengths[:, None]
  turn_ids = np.where(turn_valid, np.arange(turns)[None, :], -1).astype(np.int32)  # one token per turn
  delta = rng.normal(0.0, 2.0, size=(b, turns)).astype(np.float32)
  a_tok = rng.normal(size=(b, turns)).astype(np.float32)  # token-level base advantages of both signs
  got, _ = A.sign_preserving_modulation(a_tok, delta, turn_ids, gid, mask=turn_ids >= 0, turn_valid=turn_valid)
  want = _turnsight_paper(np.where(turn_ids >= 0, a_tok, 0.0), delta, turn_ids, turn_valid, gid)
  np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-6, atol=1e-6)
  assert np.all(np.sign(np.asarray(got)) == np.sign(np.where(turn_ids >= 0, a_tok, 0.0)))
