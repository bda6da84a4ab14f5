"""Issue #51 item 4, fourteenth draw (seed 20261219), part a: an independent re-audit of five in-full rows.

Rows drawn: greso, rloo, pilot_commit, length_penalty, oprl (five of the ten of
``random.Random(20261219).sample(rows, 10)`` over the 109 rows).

Held (2): rloo, length_penalty.

- ``rloo``: volcengine/verl@v0.7.0 (f9c855f7) core_algos.py:475-525 compute_rloo_outcome_advantage and :718-753
  compute_rloo_vectorized_outcome_advantage (the same in the verl 0.9.1 PyPI wheel, :587-637, :833-866);
  examples/rloo_trainer/run_qwen2-7b.sh (rloo, n 5, use_kl_in_reward True, kl_penalty kl, kl_coef 0.001; it sets
  a micro-batch size, so the config check passes); ppo_trainer.yaml:75-108 (kl_ctrl fixed); ray_trainer.py
  apply_kl_penalty (v0.7.0 :126-165; the 0.9.1 wheel :78-117, called by the v1 trainer_base.py:1754-1757).
  Both singleton rules and the run's KL-in-reward composition are checked below against float64 transcriptions.
- ``length_penalty``: huggingface/open-r1@1416fa0c src/open_r1/rewards.py:132-202 len_reward, configs.py:234-239,
  grpo.py:88, 112-114; huggingface/trl@v0.18.0 grpo_trainer.py:950-975, 1150-1193 (each process scores its own
  completions, then gather); the TRL 1.9.0 PyPI wheel grpo_trainer.py:536, 1612-1703; Kimi k1.5 Sec. 2.3.3 in the
  record's page-marked transcription (viktor-shcherb/msc_thesis@a6577d10 .../04_reinforcement-learning-continued.md:
  the same λ rule, 'added to the original reward with a weighting parameter', the warm-up). The rule on one group is
  checked below against a float64 transcription of len_reward.

Not held (3), each error fixed in the record and checked here (no implementation changed, no implementation bug
found):

- ``greso`` (FALSE, and one OMITTED): a deviation (added by per-row review o) said the README's commands do not
  start as released because generate_dataset.sh never runs dapo_math.py, so ./data/dapo_math/train.parquet is
  missing. Infini-AI-Lab/GRESO@b2778431 commits that file: git ls-tree b2778431 data/ lists data/dapo_math/
  train.parquet (3,186,333 bytes), added by 9f7f429 'update data' (2025-06-04), an ancestor of b2778431; read: 17,917
  rows, data_source 'dapo_math' (latex_math's 1 / 0.1 / 0 via the default branch of reward_score/__init__.py),
  extra_info.index 0-17916. The README's data step plus the committed file start every train script. OMITTED:
  ray_trainer.py:1006-1013 cuts each accumulated filtered batch to a multiple of trainer.n_gpus_per_node
  (data.full_sampling_bs unset in every script), dropping up to n_gpus − 1 admitted prompts with no rollout and no
  trace entry; ours rolls out every admitted prompt. The admission law and the adaptation equal theirs at their
  rewards (tested).
- ``pilot_commit`` (OMITTED, two): (1) the deviation said window, rule='uniform', max_per_prompt=n "give their
  pass/fail rule" without the budget: every passing prompt gets their n commit rollouts only with budget ≥ n × the
  passing prompts; at our default budget P·n//2, k > P/2 passing prompts share it (P = 4 all passing, n = 6: 3
  each, theirs 6; tested). (2) "up to max_num_gen_batches 10 per step": databricks/pilot-commit@6def20ea
  recipe/pc/pc_ray_trainer.py:669-683 raises ValueError when the 10th generation batch leaves the step short (the
  run stops); step_metrics.reset() (:801) restarts the count each step. Their filter_batch rule equals ours with the
  window at budget P·n (tested).
- ``oprl`` (FALSE): the record gave their step-reward numerator as "the PRM π_φ (..., trained by the trajectory DPO
  loss, loss_type eto, lr 1e-6)". Tongyi-ConvAI/Tongyi-Character@dfee104e CharacterRL-iStar/istar/dp_rm.py:377-448
  update_rm_eto (update=after, loss_type eto: both scripts) stores each micro-batch's q detached (:417
  q_lst.append(q.detach())) and computes compute_eto_loss_rm on that detached copy (:419-434; rm_utils.py:56-57 sets
  requires_grad on the detached tensor, a new leaf): loss.backward() reaches no PRM parameter and AdamW skips
  parameters without a gradient, so the PRM keeps its initial weights (the 'ce' path, update_rm :300-354, keeps q
  attached). Their step reward as released is β·Σ(log π_φ0 − log π_old); in run_webshop.sh (reward_model.model.path
  = actor_rollout_ref.model.path, :11, 30, 54) π_φ0 is the policy's initial model, the reference, so it is
  β·Σ log(π_ref/π_old), the negative of our prm='policy' at equal β (tested: ours with prm='extras' and the
  reference's log-probs gives their per-step reward, transcribed from dp_rm.py:53-208).
"""
import math

import jax
import jax.numpy as jnp
import numpy as np

from _fidelity import defaults as _defaults, fid as _fid, record as _record


# ------------------------------------------------------------------------------------------- greso (not held)


def _greso_skip(trace, p_easy, p_hard):
  """Infini-AI-Lab/GRESO@b2778431 presampling_selector.py:102-148 and :230-256, float64: the probability that
  filter_examples_all_probabilistic skips a prompt with reward trace ``trace`` (its group means, oldest first):
  easy count = trailing means ≥ 0.98, skip 1 − max(p_easy^count, 0.01); if not skipped, hard: only when the last mean
  ≤ 0.11, count = trailing means ≤ 0.11, skip 1 − max(p_hard^count, 0.01)."""
  if not trace:
    return 0.0
  count = 0
  for r in reversed(trace):
    if r < 0.98:
      break
    count += 1
  s_easy = 1.0 - max(p_easy ** count, 0.01)
  s_hard = 0.0
  if trace[-1] <= 0.11:
    count = 0
    for r in reversed(trace):
      if r > 0.11:
        break
      count += 1
    s_hard = 1.0 - max(p_hard ** count, 0.01)
  return s_easy + (1.0 - s_easy) * s_hard


def _greso_adapt(p_easy, p_hard, easy_ratio, hard_ratio, t_easy=0.25 / 3, t_hard=0.25 * 2 / 3, lo=0.05, hi=0.95):
  """GRESO ray_trainer.py:1197-1219 (the epoch > 0 branch), float64."""
  p_hard = max(p_hard - 0.01, lo) if hard_ratio >= t_hard else min(p_hard + 0.01, hi)
  p_easy = max(p_easy - 0.01, lo) if easy_ratio >= t_easy else min(p_easy + 0.01, hi)
  return p_easy, p_hard


def test_greso_admission_and_adaptation_equal_theirs_at_their_rewards():
  """latex_math's rewards 1 (correct) and 0.1 (wrong answer), groups of 8, one observation per step; their
  adaptation counts all-1 and all-0.1 groups (metric_utils.py:205-212), ours all-equal groups split at 0.5."""
  from rljax.filters import greso  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(20261219)
  n_prompts, steps = 12, 9
  g = greso()
  state = g.init(n_prompts)
  traces = [[] for _ in range(n_prompts)]
  pe, ph = 0.5, 0.5
  for _ in range(steps):
    kind = rng.integers(0, 3, n_prompts)  # 0 mixed, 1 all correct, 2 all wrong
    rewards = np.where(rng.random((n_prompts, 8)) < 0.5, 1.0, 0.1)
    rewards[kind == 1] = 1.0
    rewards[kind == 2] = 0.1
    rewards[kind == 0, 0], rewards[kind == 0, 1] = 1.0, 0.1
    for j in range(n_prompts):
      traces[j].append(float(rewards[j].mean()))
    state, stats = g.update(state, jnp.arange(n_prompts), jnp.asarray(rewards.ravel(), jnp.float32),
                            jnp.repeat(jnp.arange(n_prompts), 8))
    pe, ph = _greso_adapt(pe, ph, float((kind == 1).mean()), float((kind == 2).mean()))
    np.testing.assert_allclose([float(stats["p_easy"]), float(stats["p_hard"])], [pe, ph], atol=1e-6)
  _, sel = g.select(state, jax.random.PRNGKey(0), jnp.arange(n_prompts))
  theirs = np.array([_greso_skip(traces[j], pe, ph) for j in range(n_prompts)])
  np.testing.assert_allclose(1.0 - np.asarray(sel["admit_prob"], np.float64), theirs, atol=2e-6)  # float32 state


def _greso_rolled_out(accumulated, n_gpus):
  """GRESO ray_trainer.py:1006-1013 (full_sampling_bs unset): the accumulated batch cut to a multiple of n_gpus."""
  return accumulated - accumulated % n_gpus


def test_greso_record_says_the_dapo_file_is_committed_and_names_the_gpu_cut():
  f = _fid("greso")
  dev = " ".join(f.deviations)
  assert "as released, the README's commands do not start" not in dev and "pd.read_parquet fails" not in dev
  assert "the README's commands start as released" in dev and "9f7f429" in dev and "17,917 rows" in dev
  assert "9f7f429 'update data', 2025-06-04" in f.read and "3,186,333 bytes" in f.read
  # the cut: up to n_gpus − 1 admitted prompts dropped (the record: 7 at 8 GPUs, 3 at 4)
  for n_gpus, most in ((8, 7), (4, 3)):
    dropped = [a - _greso_rolled_out(a, n_gpus) for a in range(384, 384 + 2 * n_gpus)]
    assert max(dropped) == most and f"{most} at {n_gpus}" in dev
  assert _greso_rolled_out(389, 8) == 384
  assert "ray_trainer.py:1006-1013" in dev


# ------------------------------------------------------------------------------------------------ rloo (held)


def _verl_rloo(scores, index):
  """verl@v0.7.0 core_algos.py:475-525 (float64): a singleton keeps its score; else s·n/(n−1) − mean·n/(n−1)."""
  scores = np.asarray(scores, np.float64).copy()
  out = scores.copy()
  for g in np.unique(index):
    sel = index == g
    n = sel.sum()
    if n > 1:
      out[sel] = scores[sel] * n / (n - 1) - scores[sel].mean() * n / (n - 1)
  return out


def _verl_rloo_vectorized(scores, index):
  """verl@v0.7.0 core_algos.py:718-753 (float64): ((c·s − Σ_g s)/max(c − 1, 1))·(c > 1)."""
  scores = np.asarray(scores, np.float64)
  _, inv = np.unique(index, return_inverse=True)
  c = np.bincount(inv)[inv].astype(np.float64)
  tot = np.bincount(inv, weights=scores)[inv]
  return (c * scores - tot) / np.maximum(c - 1, 1) * (c > 1)


def _verl_kl_in_reward(scores, old, ref, mask, beta=0.001):
  """verl apply_kl_penalty (v0.7.0 ray_trainer.py:126-165) with kl_penalty 'kl': the score on the last response
  token (token_level_scores), minus β·(old − ref)·mask; the advantage then sums the tokens."""
  t = mask.shape[1]
  last = t - 1 - np.argmax(mask[:, ::-1], axis=1)
  tls = np.zeros(mask.shape)
  tls[np.arange(mask.shape[0]), last] = scores
  return tls - beta * (old - ref) * mask


def test_rloo_both_singleton_rules_and_the_kl_in_reward_run_equal_verl():
  from rljax.advantages import rloo  # pylint: disable=import-outside-toplevel
  from rljax.objectives import kl_in_reward  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(20261219)
  sizes = (5, 5, 1, 3, 5)  # rollout.n 5, a singleton, a ragged group
  gid = np.repeat(np.arange(len(sizes)), sizes)
  r = (rng.random(gid.size) < 0.4).astype(np.float64)  # gsm8k: 1 / 0
  with jax.enable_x64(True):
    zero = np.asarray(rloo(jnp.asarray(r), jnp.asarray(gid), num_groups=len(sizes))[0])
    raw = np.asarray(rloo(jnp.asarray(r), jnp.asarray(gid), num_groups=len(sizes), singleton="raw")[0])
  np.testing.assert_allclose(raw, _verl_rloo(r, gid), rtol=0, atol=1e-14)
  np.testing.assert_allclose(zero, _verl_rloo_vectorized(r, gid), rtol=0, atol=1e-14)
  # the example run: β = 0.001 k1 KL folded into the reward before the leave-one-out
  b, t = gid.size, 6
  mask = np.ones((b, t))
  for i in range(b):
    mask[i, rng.integers(2, t + 1):] = 0
  old, ref = rng.normal(-1.0, 0.3, (b, t)), rng.normal(-1.0, 0.3, (b, t))
  theirs = _verl_rloo(_verl_kl_in_reward(r, old, ref, mask).sum(-1), gid)
  with jax.enable_x64(True):
    tok, _ = kl_in_reward(jnp.asarray(r), jnp.asarray(old), jnp.asarray(ref), jnp.asarray(mask), beta=0.001)
    ours = np.asarray(rloo(jnp.sum(tok, -1), jnp.asarray(gid), num_groups=len(sizes), singleton="raw")[0])
  np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-13)
  assert "rollout.n = 5" in _defaults("rloo")["group size"][1]


# ----------------------------------------------------------------------------------- pilot_commit (not held)


def _pc_filter_batch(acc, lower=0.125, upper=0.25):
  """databricks/pilot-commit@6def20ea pc_ray_trainer.py:287-328: pass when lower ≤ mean acc ≤ 1 − upper."""
  m = np.asarray(acc, np.float64).mean(axis=1)
  return (m >= lower) & (m <= 1 - upper)


def test_pilot_commit_window_rule_needs_the_full_budget_to_give_every_passing_prompt_n():
  from rljax.filters import pilot_commit  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(20261219)
  p, pilot, n = 6, 8, 6
  acc = (rng.random((p, pilot)) < rng.random((p, 1))).astype(np.float64)
  acc[0], acc[1] = 1.0, 0.0  # solved / unsolved: fail the window
  acc[2] = [1, 1, 0, 0, 0, 0, 0, 0]
  gid = np.repeat(np.arange(p), pilot).astype(np.int32)
  passing = _pc_filter_batch(acc)
  kw = dict(num_groups=p, rule="uniform", max_per_prompt=n, window=(0.125, 0.75))
  full, _ = pilot_commit(acc.ravel(), gid, budget=p * n, **kw)
  np.testing.assert_array_equal(full, np.where(passing, n, 0))  # theirs: every passing prompt gets n
  # the record's number: four prompts, all passing, n = 6, the default budget P·n//2 = 12: 3 each
  acc4 = np.array([[1, 1, 0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0, 0, 0], [1, 0] * 4, [1, 1, 1, 1, 1, 0, 0, 0]], float)
  assert _pc_filter_batch(acc4).all()
  half, _ = pilot_commit(acc4.ravel(), np.repeat(np.arange(4), 8).astype(np.int32), num_groups=4, budget=4 * n // 2,
                         rule="uniform", max_per_prompt=n, window=(0.125, 0.75))
  k = 4
  np.testing.assert_array_equal(half, [math.floor(4 * n / (2 * k))] * 4)
  assert list(half) == [3, 3, 3, 3]
  dev = " ".join(_fid("pilot_commit").deviations)
  assert "only with budget ≥ n × the passing prompts (budget=P·n)" in dev and "3 each, theirs 6" in dev
  budget_row = _defaults("pilot_commit")["budget"][1]
  assert "raises ValueError and the run stops" in budget_row and "669-683" in budget_row


# ------------------------------------------------------------------------------------- length_penalty (held)


def _open_r1_len_reward(lengths, correct):
  """huggingface/open-r1@1416fa0c rewards.py:183-202 (float64): λ = 0.5 − (len − min)/(max − min) over the call's
  completions, λ if correct else min(0, λ); all zero when max = min."""
  lengths = np.asarray(lengths, np.float64)
  lo, hi = lengths.min(), lengths.max()
  if hi == lo:
    return np.zeros_like(lengths)
  lam = 0.5 - (lengths - lo) / (hi - lo)
  return np.where(correct, lam, np.minimum(0.0, lam))


def test_length_penalty_equals_len_reward_on_one_group():
  from rljax.rewards import length_penalty  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(20261219)
  lengths = rng.integers(40, 900, 8).astype(np.float64)
  correct = rng.random(8) < 0.5
  with jax.enable_x64(True):
    ours = np.asarray(length_penalty(jnp.asarray(lengths), jnp.asarray(correct.astype(np.float64)),
                                     jnp.zeros(8, jnp.int32), num_groups=1)[0])
    flat = np.asarray(length_penalty(jnp.full(4, 7.0), jnp.ones(4), jnp.zeros(4, jnp.int32), num_groups=1)[0])
  np.testing.assert_allclose(ours, _open_r1_len_reward(lengths, correct), rtol=0, atol=1e-15)
  np.testing.assert_array_equal(flat, _open_r1_len_reward(np.full(4, 7.0), np.ones(4, bool)))
  assert "characters" in _defaults("length_penalty")["length unit"][1]


# ------------------------------------------------------------------------------------------------ oprl (not held)


def _istar_eto_prm_grad(theta, x, old, succ, beta=0.05):
  """Tongyi-Character@dfee104e dp_rm.py:377-448 update_rm_eto with rm_utils.py:43-135 compute_eto_loss_rm, on a
  toy PRM whose per-token log-probs are ``theta·x``: q = rm_log_labels − old_log_probs (:161), stored detached
  (:417), step Q = β·Σ q (:75), one step per trajectory here, −log σ(Q_succ − Q_fail) over the pairs (:126). Returns
  d loss / d theta as released (detached) and with q attached (the 'ce' path's convention)."""
  def loss(th, detach):
    q = th * x - old
    if detach:
      q = jax.lax.stop_gradient(q)
    qv = beta * q.sum(-1)
    pairs = [(i, j) for i in range(len(succ)) if succ[i] for j in range(len(succ)) if not succ[j]]
    return sum(-jax.nn.log_sigmoid(qv[i] - qv[j]) for i, j in pairs) / len(pairs)
  with jax.enable_x64(True):
    return (float(jax.grad(loss)(jnp.float64(theta), True)), float(jax.grad(loss)(jnp.float64(theta), False)))


def _istar_step_reward(rm_logp, old_logp, mask, beta=0.05):
  """Tongyi-Character@dfee104e dp_rm.py:53-208 (ref_module None, lambda 0, step_granularity 'step'): r = β·(rm −
  old) summed over the step's valid tokens (before istar_norm)."""
  return beta * ((rm_logp - old_logp) * mask).sum(-1)


def test_oprl_their_prm_gets_no_gradient_and_their_released_reward_is_minus_ours():
  from rljax.advantages import oprl  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(20261219)
  x, old = rng.normal(size=(4, 5)), rng.normal(-1.0, 0.2, (4, 5))
  as_released, attached = _istar_eto_prm_grad(0.3, x, old, [True, False, True, False])
  assert as_released == 0.0 and abs(attached) > 1e-5
  # run_webshop.sh: the PRM is the policy's initial model (the reference), never updated
  b, t = 4, 6
  ref, old = rng.normal(-1.0, 0.3, (b, t)), rng.normal(-1.0, 0.3, (b, t))
  mask = np.ones((b, t), bool)
  turn_ids = np.zeros((b, t), np.int32)  # one step (turn) per row, as their one row per environment step
  kw = dict(mask=jnp.asarray(mask), turn_valid=jnp.ones((b, 1), bool), beta=0.05)
  args = (jnp.asarray(turn_ids), jnp.asarray(rng.random(b)), jnp.asarray([0, 0, 1, 1]))
  with jax.enable_x64(True):
    policy = np.asarray(oprl(jnp.asarray(old), jnp.asarray(ref), *args, **kw)[1]["step_rewards"])[:, 0]
    extras = np.asarray(oprl(jnp.asarray(ref), jnp.asarray(old), *args, **kw)[1]["step_rewards"])[:, 0]
  theirs = _istar_step_reward(ref, old, mask)
  np.testing.assert_allclose(extras, theirs, rtol=0, atol=1e-14)
  np.testing.assert_allclose(policy, -theirs, rtol=0, atol=1e-14)
  f = _fid("oprl")
  numerator = _defaults("oprl")["step reward numerator"][1]
  assert "trained by the trajectory DPO loss" not in numerator and "never trained" in numerator
  assert "q.detach() (dp_rm.py:417-434)" in numerator
  dev = " ".join(f.deviations)
  assert "the negative of prm='policy' at equal β" in dev and "rm_utils.py:56-57" in dev
  assert "dp_rm.py:377-448 update_rm_eto" in f.read and "the record said the PRM is trained" in f.read
  assert "changes no PRM weight" in _record("oprl")
