"""Issue #51 "read whole" pass, slice rF: each row's cited source read whole at the cited commit, and the record
errors found fixed. Rows and errors (the report lists the rows that held):

- gdpo: upstream verl's 'gdpo' (the verl 0.9.1 wheel, core_algos.py:361-468 compute_gdpo_outcome_advantage:
  weighted, per-reward GRPO with norm_adv_by_std_in_grpo, masked_whiten over tokens) was not read though the row
  cites "verl gdpo" (class 3/4); verl-GDPO's train_gdpo.sh (rollout.n 4, train_batch_size 512) not in the
  defaults (class 1); TRL applies GDPO only for K > 1 rewards (edge rule, class 5).
- rloo, reinforce_pp: verl's own example runs (examples/rloo_trainer/run_qwen2-7b.sh, examples/reinforce_plus_plus_
  trainer/run_qwen2-7b_math_rf.sh @v0.7.0) set use_kl_in_reward=True (k1, kl_coef 0.001) and rollout.n 5 / 8: not in
  the defaults, and the placement did not say the estimator runs on score − β·KL (class 1/2).
- vote: run_glpo.sh's other settings (GLPO_M 6, GLPO_ALPHA 0.5 and GLPO_STD_SCALE 1 read by no code, the two
  reward_funcs and their unused weights) not listed (class 1); the plugin's fallbacks (sample count not a multiple
  of K, < 2 reward columns: ms-swift's own advantage) not listed (class 5).
- task_normalized: the README's third method, AEPO (run after this advantage), not mentioned (class 3); the
  singleton-task edge (their task2std 0 → r/1e-6) not stated, nor that grpo(singleton='raw') gives theirs (class 5).
- uniqueness: Eq. 1's ε / σ (value not stated), the judge models and λ_KL = 0.001 of Sec. 4.1 not in the defaults
  (class 1).
- sign_preserving_modulation: the paper's group size / batch (16 per query, 32 queries, ≤ 10 turns), its "no KL" and
  its per-trajectory token-mean objective not in the defaults (class 1).

Each numeric reference is a float64 NumPy transcription of the cited lines, written for these tests.
"""
import os

import jax
import numpy as np
import pytest

import rljax
import rljax.advantages as A

ROWS = {r.name: r for r in rljax.catalog()}
VERL091 = "/work/peers/verl/verl/trainer/ppo/core_algos.py"


def _fid(name):
  return ROWS[name].fidelity


def _record_text(name):
  f = _fid(name)
  return " ".join([f.read, f.placement, " ".join(" ".join(t) for t in f.defaults), " ".join(f.deviations)])


# ----------------------------------------------------------------------------------------------------------------
# gdpo: verl 0.9.1 compute_gdpo_outcome_advantage (core_algos.py:361-468), float64 transcription

def _verl_grpo_seq(scores, index, eps=1e-6, norm_by_std=True):  # compute_grpo_outcome_advantage :268-331
  out = np.array(scores, np.float64)
  for g in set(index.tolist()):
    sel = index == g
    if sel.sum() == 1:
      mean, std = 0.0, 1.0
    else:
      mean, std = scores[sel].mean(), scores[sel].std(ddof=1)
    out[sel] = (scores[sel] - mean) / (std + eps) if norm_by_std else scores[sel] - mean
  return out


def _verl_masked_whiten(x, m):  # utils/torch_functional.py masked_whiten: masked_mean ÷ (Σm + 1e-8), unbiased var
  mean = (x * m).sum() / (m.sum() + 1e-8)
  var = (((x - mean) ** 2) * m).sum() / (m.sum() + 1e-8) * (m.sum() / (m.sum() - 1))
  return (x - mean) / np.sqrt(var + 1e-8)


def _verl_gdpo(comps, index, lengths, weights, t_len):
  m = (np.arange(t_len)[None, :] < lengths[:, None]).astype(np.float64)
  total = sum(w * _verl_grpo_seq(comps[:, k], index) for k, w in enumerate(weights))
  return _verl_masked_whiten(total[:, None] * m, m) * m, total


def test_gdpo_record_reads_verl_091_gdpo_and_equals_it_before_the_token_whitening():
  rng = np.random.default_rng(0)
  comps = rng.integers(0, 3, size=(12, 3)).astype(np.float64)
  index = np.repeat(np.arange(3), 4)
  lengths = rng.integers(1, 9, size=12)
  w = (1.0, 0.5, 2.0)
  theirs, theirs_total = _verl_gdpo(comps, index, lengths, w, 8)
  with jax.enable_x64(True):
    ours, info = A.gdpo(comps, index, weights=w)
    raw, _ = A.gdpo(comps, index, weights=w, whiten=False)
  np.testing.assert_allclose(np.asarray(raw), theirs_total, rtol=1e-12, atol=1e-12)
  # the token-weighted whitening differs from ours (sequence-weighted) on unequal lengths: recorded, not equal
  m = np.arange(8)[None, :] < lengths[:, None]
  assert not np.allclose(np.asarray(ours)[:, None] * m, theirs, atol=1e-6)
  f = _fid("gdpo")
  assert "core_algos.py:361-468 compute_gdpo_outcome_advantage" in f.read
  assert "train_gdpo.sh (adv_estimator gdpo, rollout.n 4, train_batch_size 512)" in f.read
  assert any("verl 0.9.1 'gdpo'" in d and "norm_adv_by_std_in_grpo=False" in d for d in f.deviations)
  # tenth draw (#51 item 4): the 0.9.1 trainer never passes norm_adv_by_std_in_grpo to 'gdpo'
  ours_nadv, theirs_nadv = dict((k, (o, t)) for k, o, t in f.defaults)["norm_adv_by_std_in_grpo"]
  assert ours_nadv == "none (always ÷ σ_{g,k} + ε)" and theirs_nadv.startswith("verl 0.9.1: True, always")
  if os.path.exists(VERL091):
    src = open(VERL091).read().split("\n")
    assert src[361].startswith("def compute_gdpo_outcome_advantage(")
    assert "masked_whiten(new_advantage, response_mask)" in "\n".join(src[360:468])


def _trl_gdpo(rewards, n, weights):  # trl-GDPO grpo_trainer.py:1222-1248 (apply_gdpo, K > 1) and the GRPO branch
  if rewards.shape[1] > 1:
    a = []
    for k in range(rewards.shape[1]):
      r = rewards[:, k].reshape(-1, n)
      a.append(((r - r.mean(1, keepdims=True)) / (r.std(1, ddof=1, keepdims=True) + 1e-4)).reshape(-1))
    pre = (np.stack(a, 1) * np.asarray(weights)[None]).sum(1)
    return (pre - pre.mean()) / (pre.std(ddof=1) + 1e-4)
  r = (rewards * np.asarray(weights)[None]).sum(1).reshape(-1, n)  # scale_rewards True (TRL 0.18 default)
  return ((r - r.mean(1, keepdims=True)) / (r.std(1, ddof=1, keepdims=True) + 1e-4)).reshape(-1)


def test_gdpo_k1_edge_trl_has_no_batch_step_and_the_record_says_so():
  rng = np.random.default_rng(1)
  r1 = rng.normal(size=(8, 1))
  gid = np.repeat(np.arange(2), 4)
  with jax.enable_x64(True):
    ours1 = np.asarray(A.gdpo(r1, gid, eps=1e-4)[0])
    ours1_nw = np.asarray(A.gdpo(r1, gid, eps=1e-4, whiten=False)[0])
  np.testing.assert_allclose(ours1_nw, _trl_gdpo(r1, 4, (1.0,)), rtol=1e-12)  # whiten=False is theirs at K = 1
  assert not np.allclose(ours1, _trl_gdpo(r1, 4, (1.0,)), atol=1e-3)
  r3 = rng.integers(0, 2, size=(8, 3)).astype(np.float64) + rng.normal(scale=0.1, size=(8, 3))
  with jax.enable_x64(True):
    ours3 = np.asarray(A.gdpo(r3, gid, eps=1e-4)[0])
  np.testing.assert_allclose(ours3, _trl_gdpo(r3, 4, (1.0, 1.0, 1.0)), rtol=1e-3, atol=1e-3)  # std + 1e-4 vs rsqrt
  assert any(d.startswith("K = 1: TRL applies GDPO only when there is more than one reward")
             for d in _fid("gdpo").deviations)


# ----------------------------------------------------------------------------------------------------------------
# rloo / reinforce_pp: verl's example runs fold a k1 KL into the reward (apply_kl_penalty) before the advantage

def _verl_kl_rewards(score, lo, lr, m, beta=1e-3):  # ray_trainer apply_kl_penalty, kl_penalty 'kl' (k1)
  tok = np.zeros_like(lo)
  last = m.sum(1).astype(int) - 1
  tok[np.arange(len(score)), last] = score
  return tok - beta * (lo - lr) * m


def _verl_rloo(scores, index):  # compute_rloo_outcome_advantage (0.9.1 :587-637)
  out = scores.copy()
  for g in set(index.tolist()):
    sel = index == g
    n = sel.sum()
    if n > 1:
      out[sel] = scores[sel] * n / (n - 1) - scores[sel].mean() * n / (n - 1)
  return out


def _kl_setup(b, t_len, seed):
  rng = np.random.default_rng(seed)
  lo, lr = rng.normal(-1, 0.3, (b, t_len)), rng.normal(-1, 0.3, (b, t_len))
  m = (np.arange(t_len)[None] < rng.integers(2, t_len + 1, b)[:, None]).astype(np.float64)
  return rng.integers(0, 2, b).astype(np.float64), lo, lr, m


def test_rloo_with_kl_in_reward_equals_verls_example_run_and_record_lists_it():
  from rljax.objectives import kl_in_reward
  score, lo, lr, m = _kl_setup(10, 6, 2)
  index = np.repeat(np.arange(2), 5)  # rollout.n 5
  theirs = _verl_rloo(_verl_kl_rewards(score, lo, lr, m).sum(1), index)
  with jax.enable_x64(True):
    tok, _ = kl_in_reward(score, lo, lr, m, beta=1e-3, estimator="kl")
    ours = np.asarray(A.rloo(np.asarray(tok).sum(1), index)[0])
    plain = np.asarray(A.rloo(score, index)[0])
  np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
  assert not np.allclose(plain, theirs, atol=1e-5)  # the row alone is not their run
  f = _fid("rloo")
  assert ("group size", "the step's groups (group_id)", "rollout.n = 5 (run_qwen2-7b.sh)") in f.defaults
  assert any(d[0] == "use_kl_in_reward" and "True in run_qwen2-7b.sh" in d[2] for d in f.defaults)
  assert "apply_kl_penalty" in f.placement
  assert any("rl.shaping=kl_in_reward(beta=0.001)" in d for d in f.deviations)


def _verl_rfpp(tok, m, gamma=1.0):  # compute_reinforce_plus_plus_outcome_advantage 0.9.1 :693-731 + masked_whiten
  b, t_len = tok.shape
  ret, run = np.zeros_like(tok), np.zeros(b)
  for t in reversed(range(t_len)):
    new = tok[:, t] + gamma * run
    ret[:, t] = new * m[:, t]
    run = new * m[:, t] + run * (1 - m[:, t])
  return _verl_masked_whiten(ret, m) * m


def test_reinforce_pp_with_kl_in_reward_equals_verls_example_run_and_record_lists_it():
  from rljax.objectives import kl_in_reward
  score, lo, lr, m = _kl_setup(8, 7, 3)
  theirs = _verl_rfpp(_verl_kl_rewards(score, lo, lr, m), m)
  with jax.enable_x64(True):
    tok, _ = kl_in_reward(score, lo, lr, m, beta=1e-3, estimator="kl")
    ours = np.asarray(A.reinforce_pp(np.asarray(tok), m)[0])
  np.testing.assert_allclose(ours * m, theirs, rtol=1e-6, atol=1e-8)  # masked_mean's + 1e-8 in the divisor
  f = _fid("reinforce_pp")
  assert any(d[0] == "use_kl_in_reward" and "True in run_qwen2-7b_math_rf.sh" in d[2] for d in f.defaults)
  assert ("group size", "the step's groups (not used by the estimator)",
          "rollout.n = 8 (run_qwen2-7b_math_rf.sh)") in f.defaults
  assert "example run sets use_kl_in_reward" in f.placement
  assert any("rl.shaping=kl_in_reward(beta=0.001)" in d for d in f.deviations)


# ----------------------------------------------------------------------------------------------------------------
# vote: VAA-CSEC glpo_swift_plugin.py _glpo_compute_advantages Steps 4-7 (GLPO_K 8, GLPO_STD_EPS 1e-4, bonus 1.0)

def _glpo(ind, grp, k=8, std_eps=1e-4, bonus_scale=1.0):
  if ind.size % k:
    return None  # their fallback: ms-swift's own advantage
  r, g = ind.reshape(-1, k), grp.reshape(-1, k)
  base = (r - r.mean(1, keepdims=True)) / np.maximum(r.std(1, ddof=1, keepdims=True), std_eps)
  return (base + np.maximum(r - g[:, :1], 0.0) * bonus_scale).reshape(-1)


def test_vote_equals_glpo_steps_at_their_settings_and_record_lists_the_script_and_fallbacks():
  rng = np.random.default_rng(4)
  answers = np.array([0, 0, 0, 1, 2, 1, 3, 4, 5, 5, 5, 5, 6, 7, 8, 9])  # a unique majority per group of 8
  value = rng.uniform(-1.5, 3.7, 10)
  ind = value[answers]  # a rollout's reward is its answer's score: the majority's rollouts share it
  gid = np.repeat(np.arange(2), 8)
  grp = np.repeat([value[0], value[5]], 8)  # R(G): the majority answer scored once
  with jax.enable_x64(True):
    ours = np.asarray(A.vote(ind, answers, gid, eps=1e-4)[0])
  np.testing.assert_allclose(ours, _glpo(ind, grp), rtol=1e-12, atol=1e-12)
  assert _glpo(ind[:12], grp[:12]) is None  # 12 samples, K 8: the fallback the record now names
  f = _fid("vote")
  assert any(d[0] == "run_glpo.sh environment" and "GLPO_ALPHA=0.5" in d[2] and "GLPO_STD_SCALE=1" in d[2]
             for d in f.defaults)
  assert any(d[0] == "rewards" and "zh_gec_reward zh_gec_group_reward" in d[2] for d in f.defaults)
  assert any(d.startswith("their fallbacks: a batch whose sample count is not a multiple of GLPO_K")
             for d in f.deviations)
  assert "zh_grammar_reward.py" in f.read


# ----------------------------------------------------------------------------------------------------------------
# task_normalized: QwenLong-L1.5 README compute_grpo_task_norm_outcome_advantage

def _qwenlong_task_norm(scores, index, task, eps=1e-6):
  out = scores.copy()
  for i in range(len(scores)):
    t = task == task[i]
    g = index == index[i]
    std = 0.0 if t.sum() == 1 else scores[t].std(ddof=1)
    mean = 0.0 if g.sum() == 1 else scores[g].mean()
    out[i] = (scores[i] - mean) / (std + eps)
  return out


def test_task_normalized_equals_qwenlong_with_singletons_and_record_names_aepo():
  rng = np.random.default_rng(5)
  r = rng.integers(0, 2, 11).astype(np.float64) + rng.normal(scale=0.1, size=11)
  gid = np.array([0, 0, 0, 1, 1, 1, 2, 2, 3, 4, 4])
  task = np.array([0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 3])  # task 2: one row (a singleton uid group too)
  theirs = _qwenlong_task_norm(r, gid, task)
  with jax.enable_x64(True):
    base = A.grpo(r, gid, scale="none", singleton="raw")[0]
    ours = np.asarray(A.task_normalized(base, task, rewards=r, scale="rewards", center=False)[0])
  np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-9)
  assert abs(theirs[8]) > 1e5  # the singleton task's r/1e-6
  f = _fid("task_normalized")
  assert any("AEPO" in d and "not built" in d for d in f.deviations)
  assert any("grpo(singleton='raw') is theirs" in d for d in f.deviations)
  assert "verl v0.4" in f.read


def test_uniqueness_record_lists_eq1_eps_the_judges_and_the_kl():
  names = {d[0]: d for d in _fid("uniqueness").defaults}
  assert "value not stated" in names["eps, σ (Eq. 1)"][2]
  assert "Qwen2.5-72B" in names["judge"][2]
  assert names["KL"][2].startswith("λ_KL = 0.001")


def test_sign_preserving_modulation_record_lists_the_batch_kl_and_objective():
  names = {d[0]: d for d in _fid("sign_preserving_modulation").defaults}
  assert names["group size"][2].startswith("16 trajectories per query, 32 queries per batch")
  assert names["KL"][2].startswith("none")
  assert "1/G Σ_i 1/|τ_i| Σ_t" in names["loss aggregation"][2]
