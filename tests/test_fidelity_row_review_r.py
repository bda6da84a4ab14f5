"""Issue #51, per-row review r: an independent second reading of five records (not a random draw).

Rows: rapo_replay, rorecomp_compensation, guide, oc_grpo, lte.

Held: rapo_replay, rorecomp_compensation (2 of 5). Not held: guide, oc_grpo, lte; each error is fixed in the
record (no implementation changed, no implementation bug found). The "= theirs" claims that survive are checked
below against float64 NumPy / Python transcriptions written for these tests from the cited lines.

- ``rapo_replay`` held. arXiv 2509.24107v1 (code index id 61329118727) read whole: Sec. 2.2 Eqs. 2-4, Sec. 2.4
  (Eqs. 5-6, the replay buffer), Sec. 2.5 Eq. 8, Sec. 2.6. FractalAIResearchLabs/Fathom-DeepResearch fetched whole
  (cdc2010, 60 files): inference, evaluation and serving only, no training code, so "no RAPO code" holds. The
  record's equality "equal when the failed rows share one reward" is checked against a transcription of their
  random replacement and Eq. 3 (population σ, no ε).
- ``rorecomp_compensation`` held. The abstract (seed 001 L163) and the ICLR reviews (code index id 62147932634)
  say what the record says; no paper text or code is stored (find_repos rorecomp: none). Its rule (the
  floor(c·#freed) oldest buffered rows, FIFO, each once, float32-stored advantages) is checked against a deque.
- ``guide`` OMITTED three things one layer out (vaskar-open-source-research/guide_rl@2f277152):
  (1) the loss's denominator: dp_actor.py:247-249, 311 split each mini-batch into micro-batches of
  ppo_micro_batch_size_per_gpu = 1 sequence (scripts and yaml), core_algos.py:364 takes masked_mean over that one
  sequence and the loss is ÷ gradient_accumulation: a per-sequence token mean averaged over the sequences
  (seq_mean_token_mean). The record called guide + exgrpo_policy(beta=1, clip_fresh=True) "their constant-γ loss"
  with no aggregation; the recipe's default token_mean differs whenever the rows' lengths differ (checked below);
  (2) the rift reward manager's format gate (do_verify_format True, response_format qwen_format in the scripts;
  rift_grader.py:58-118, format_grader.py:200-215): a correct answer without exactly one '\\boxed{' or with more
  than 3 trailing whitespace characters scores 0, so its group counts as failed for the hint trigger and filters;
  (3) ray_trainer.py:1479-1485, 1576-1584: passing groups beyond the step's rows go to the loader's buffer and are
  trained first at the next step (sampled by the previous policy).
- ``oc_grpo`` OMITTED the loss its IS weight enters: verl v0.4.1 (volcengine/verl@8d9e350e, the base of their fork)
  vanilla compute_policy_loss with dual clip clip_ratio_c 3.0 (ppo_trainer_7b.yaml:85), and loss_agg_mode
  token-mean applied per micro-batch of ppo_micro_batch_size_per_gpu = 4 sequences, each ÷ gradient_accumulation
  (dp_actor.py:427-429, 511; core_algos.py:539-540): the mean of micro-batch token means, not one token mean over
  the batch (ours, token_mean). Checked below: equal when one micro-batch holds all rows, different otherwise.
- ``lte`` said something FALSE and OMITTED a normaliser. FALSE: "a truncated response with no answer gives no
  hint": ours keys a failed row by task.answer_key, and every built-in task but small_addition has none
  (rljax/train/_mechanics.py:111 falls back to the stripped completion), so a truncated completion is quoted whole
  in the hint (checked below). OMITTED: the v1 write-up's J_Mixed (id 36716036164) has two normalisers, 1/Z' on the
  off-policy rows' sum and 1/Z on the on-policy rows' sum; ours one aggregation over all rows.

No implementation bug: every difference found is at the peers' settings, now stated in the records.
"""
import collections
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rljax.advantages as A
import rljax.objectives as O
from rljax import hints as H
from rljax.catalog import describe
from rljax.replay import _buffer as B
from rljax.replay import _stages as R
from rljax.types import PolicyOutputs, TrainBatch
from test_replay import FACTS, _step  # the replay tests' StepData builder (row width T, RunFacts)
from test_hints import _round  # the hints tests' one-round StepData builder
from _fidelity import ROWS, defaults as _defaults, fid as _fid


# ------------------------------------------------------------------------------------ rapo_replay (held)


def _their_eq3(r):
  """arXiv 2509.24107v1 Sec. 2.2 Eq. 3: (r − μ_R)/σ_R, σ_R = sqrt(1/G Σ (r_j − μ_R)²), no ε."""
  r = np.asarray(r, np.float64)
  return (r - r.mean()) / np.sqrt(((r - r.mean()) ** 2).mean())


def _their_replay(rewards, stored, i):
  """Sec. 2.4: 'one trajectory is randomly replaced with o⋆ from B' (row i drawn), then Eq. 3 over the group."""
  r = np.array(rewards, np.float64)
  r[i] = stored
  return _their_eq3(r)


def test_rapo_replay_equals_their_random_replacement_when_the_failed_rows_share_one_reward():
  stage = R.rapo_replay(capacity=8).bind(FACTS)
  state = stage.init()
  # epoch 1: prompt 3 succeeds once (R = 1.0 > 0.5: Eq. 4 with format and answer); stored
  _, state, m = stage.fn(_step([0, 1, 0, 0], prompts=[3], rewards=[0.1, 1.0, 0.1, 0.1], step=0), state)
  assert m["stored"] == 1
  # epoch 2: all four rollouts fail, all formatted (0.1 each, Eq. 4): whichever row is refilled
  out, state, m = stage.fn(_step([0, 0, 0, 0], prompts=[3], rewards=[0.1] * 4, step=1), state)
  assert m["replayed"] == 1
  ours = np.sort(_their_eq3(out.rewards))
  for i in range(4):  # every draw of theirs gives the same advantages, one of them on the stored success
    np.testing.assert_allclose(np.sort(_their_replay([0.1] * 4, 1.0, i)), ours, atol=1e-6)
  # failed rows that differ by format (0 / 0.1): their draw matters, ours replaces the lowest (the record's deviation)
  draws = {tuple(np.round(np.sort(_their_replay([0.1, 0.0, 0.1, 0.1], 1.0, i)), 9)) for i in range(4)}
  assert len(draws) == 2
  assert any("equal when the failed rows share one reward" in d for d in _fid("rapo_replay").deviations)


def test_rapo_replay_stores_and_triggers_as_r_above_one_half_under_their_stage_one_reward():
  """Eq. 4: r = 0.1·format + 0.9·answer ∈ {0, 0.1, 0.9, 1}: R > 0.5 ⇔ answer correct, so ours (correct > 0.5)
  stores exactly their o⋆ candidates and sees exactly their 'all rollouts fail'."""
  for fmt in (0, 1):
    for ans in (0, 1):
      r = 0.1 * fmt + 0.9 * ans
      assert (r > 0.5) == (ans > 0.5)
  d = _defaults("rapo_replay")
  assert "R(q, o⋆) > 0.5" in d["stored success"][1] and "Eq. 8" in d["stored success"][1]
  assert "temperature 1.4" in d["group size / batch (their runs)"][1]


# ------------------------------------------------------------------------- rorecomp_compensation (held)


def test_rorecomp_compensation_fills_the_freed_rows_with_the_oldest_buffered_rows_once():
  """A deque transcription of the record's rule: the non-priority fresh rows enter a FIFO with their (float32)
  advantages; the freed rows of a step take floor(c·#freed) of the oldest, each used once; the rest leave."""
  from rljax.filters import rorecomp
  stage = R.rorecomp_compensation(capacity=64, compensation=0.5).bind(FACTS)
  state = stage.init()
  fifo = collections.deque()
  rng = np.random.default_rng(0)
  for step in range(4):
    correct = rng.integers(0, 2, 8).astype(np.float32)
    lengths = rng.integers(1, 4, 8)
    adv = rng.normal(size=8)
    data = _step(correct, lengths=lengths, step=step).replace(advantages=adv)
    priority = np.asarray(rorecomp(data.correct, data.lengths, data.group_id, fraction=0.5, valid=data.valid)[0])
    freed = np.flatnonzero(~priority)
    k = min(math.floor(0.5 * freed.size), len(fifo))
    out, state, m = stage.fn(data, state)
    assert m["stored"] == freed.size and m["replayed"] == k
    taken = [fifo.popleft() for _ in range(k)]
    rows = freed[:k]  # the first freed rows take them, oldest first
    for r, (tok, a32) in zip(rows, taken):
      assert np.asarray(out.replay_mask)[r] and int(np.asarray(out.tokens)[r, 0]) == tok
      cm = np.asarray(out.completion_mask)[r]
      assert np.all(np.asarray(out.advantages)[r][cm] == a32) and np.all(np.asarray(out.advantages)[r][~cm] == 0)
    assert not np.asarray(out.valid)[freed[k:]].any()  # the remaining freed rows leave the batch
    for r in freed:
      fifo.append((int(data.tokens[r, 0]), np.float32(adv[r])))
  assert "floor(c · #freed)" in ROWS["rorecomp_compensation"].formula
  assert any("float32" in x for x in _fid("rorecomp_compensation").deviations)


# -------------------------------------------------------------------------------------- guide (not held)


def _guide_micro_batched(logp, old, adv, mask, on_policy, cliprange=0.2, gamma=1.0):
  """guide_rl@2f277152: core_algos.py:279-364 compute_policy_loss (constant γ) on each micro-batch of ONE sequence
  (dp_actor.py:247-249), masked_mean over its tokens, each ÷ gradient_accumulation = #sequences (dp_actor.py:311)."""
  total = 0.0
  b = logp.shape[0]
  for i in range(b):
    r = np.exp(logp[i] - old[i])
    if not on_policy[i]:
      r = r / (r + gamma)
      pg = -adv[i] * r  # off-policy: unclipped (max of two equal losses)
    else:
      pg = np.maximum(-adv[i] * r, -adv[i] * np.clip(r, 1 - cliprange, 1 + cliprange))
    total += (pg * mask[i]).sum() / mask[i].sum() / b
  return total


def _guide_case(seed):
  rng = np.random.default_rng(seed)
  b, t = 8, 7
  hinted = np.array([False] * 4 + [True] * 4)
  old = -rng.uniform(0.1, 2.0, (b, t))
  logp = old + rng.normal(scale=0.5, size=(b, t))
  mask = np.zeros((b, t))
  for i, n in enumerate([7, 2, 5, 3, 6, 1, 4, 7]):  # unequal lengths
    mask[i, :n] = 1
  adv = np.repeat(rng.normal(size=(b, 1)), t, 1)
  batch = TrainBatch.create(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask > 0),
                            advantages=jnp.asarray(adv), group_id=jnp.arange(b) // 4, logp_old=jnp.asarray(old),
                            extras={"replay_mask": jnp.asarray(hinted)})
  return logp, old, adv, mask, hinted, batch


def test_guide_loss_is_theirs_with_seq_mean_token_mean_not_with_the_default_token_mean():
  with jax.enable_x64(True):
    logp, old, adv, mask, hinted, batch = _guide_case(3)
    theirs = _guide_micro_batched(logp, old, adv, mask, ~hinted)
    term = O.exgrpo_policy(0.2, 0.2, beta=1.0, clip_fresh=True)
    seq = O.chain(term, aggregate=O.seq_mean_token_mean)
    tok = O.chain(term, aggregate=O.token_mean)
    f = lambda obj: (lambda lp: obj(PolicyOutputs.create(logp=lp), batch)[0])
    got_seq = float(f(seq)(jnp.asarray(logp)))
    got_tok = float(f(tok)(jnp.asarray(logp)))
    np.testing.assert_allclose(got_seq, theirs, rtol=1e-10)
    assert abs(got_tok - theirs) > 1e-3 * abs(theirs)
    grad = np.asarray(jax.grad(f(seq))(jnp.asarray(logp)))
    h, ref = 1e-6, np.zeros_like(logp)
    for idx in np.ndindex(logp.shape):
      e = np.zeros_like(logp)
      e[idx] = h
      ref[idx] = (_guide_micro_batched(logp + e, old, adv, mask, ~hinted)
                  - _guide_micro_batched(logp - e, old, adv, mask, ~hinted)) / (2 * h)
    np.testing.assert_allclose(grad, ref, rtol=1e-6, atol=1e-9)
  d = _defaults("guide")
  assert "seq_mean_token_mean" in d["loss aggregation"][1] and "token_mean" in d["loss aggregation"][0]
  assert "with seq_mean_token_mean" in _fid("guide").differences
  assert any(x.startswith("their loss is a per-sequence token mean") for x in _fid("guide").deviations)


def _verify_qwen_simple_format(text):
  """guide_rl@2f277152 verl/verl/workers/reward_manager/format_grader.py:200-215, transcribed."""
  if text.count("\\boxed{") != 1:
    return False
  trailing = len(text) - len(text.rstrip(" \n"))
  return trailing <= 3


def test_guide_format_gate_fails_correct_answers_their_trigger_then_hints():
  # a correct answer boxed twice (restated) or followed by blank lines is graded '' (0) there
  assert not _verify_qwen_simple_format("so \\boxed{42}. Final: \\boxed{42}")
  assert not _verify_qwen_simple_format("\\boxed{42}\n\n\n\n")
  assert _verify_qwen_simple_format("the answer is \\boxed{42}\n")
  d = _defaults("guide")
  key = "accuracy of the trigger and filters"
  assert "do_verify_format True" in d[key][1] and "qwen_format" in d[key][1] and "recipe's verdict" in d[key][0]
  devs = " ".join(_fid("guide").deviations)
  assert "qwen_format check fails" in devs
  assert "loader's buffer and trained first at the next step" in devs and "1576-1584" in devs
  assert "Per-row review r (#51)" in _fid("guide").read and "rift_grader.py:58-118" in _fid("guide").read


# ------------------------------------------------------------------------------------ oc_grpo (not held)


def _oc_grpo_v041(logp, old_x, old_hinted, adv, mask, replaced, micro, clamp_min=0.01, eps=0.2, clip_c=3.0):
  """AgPriyank/OC-GRPO@54d61030 ray_trainer.py:5262-5300 (per_token IS weight on the replaced rows' advantages),
  then volcengine/verl@v0.4.1 core_algos.py:607-621 (vanilla, dual clip) with agg_loss token-mean (:539-540) on
  each micro-batch of ``micro`` rows, each ÷ gradient_accumulation (dp_actor.py:427-429, 511)."""
  w = np.where(replaced[:, None], np.clip(np.exp(-(old_hinted - old_x)), clamp_min, 1.0), 1.0)
  a = adv * w
  r = np.exp(logp - old_x)
  pg1 = np.maximum(-a * r, -a * np.clip(r, 1 - eps, 1 + eps))
  pg = np.where(a < 0, np.minimum(-a * clip_c, pg1), pg1)
  b = logp.shape[0]
  ga = b // micro
  return sum((pg[s:s + micro] * mask[s:s + micro]).sum() / mask[s:s + micro].sum() / ga for s in range(0, b, micro))


def test_oc_grpo_loss_is_a_mean_of_micro_batch_token_means_with_dual_clip():
  rng = np.random.default_rng(11)
  b, t = 8, 6
  replaced = np.array([False] * 4 + [True] * 4)
  old_x = -rng.uniform(0.1, 2.0, (b, t))
  old_hinted = np.where(replaced[:, None], old_x + rng.normal(scale=1.5, size=(b, t)), old_x)
  logp = old_x + rng.normal(scale=0.6, size=(b, t))
  mask = np.zeros((b, t))
  for i, n in enumerate([6, 1, 2, 2, 6, 5, 6, 3]):
    mask[i, :n] = 1
  adv = np.repeat(rng.normal(size=(b, 1)), t, 1)
  with jax.enable_x64(True):
    batch = TrainBatch.create(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask > 0),
                              advantages=jnp.asarray(adv), group_id=jnp.arange(b) // 4,
                              logp_old=jnp.asarray(old_x), logp_behavior=jnp.asarray(old_hinted))
    obj = O.chain(O.ppo_clip(0.2, 0.2, dual_clip=3.0, correction=O.tis(1.0, lower=0.01)), aggregate=O.token_mean)
    ours = float(obj(PolicyOutputs.create(logp=jnp.asarray(logp)), batch)[0])
  # one micro-batch holding every row: their token-mean is ours
  np.testing.assert_allclose(ours, _oc_grpo_v041(logp, old_x, old_hinted, adv, mask, replaced, micro=b), rtol=1e-9)
  # their run: micro-batches of 4 sequences (ppo_micro_batch_size_per_gpu 4): a mean of micro-batch token means
  theirs = _oc_grpo_v041(logp, old_x, old_hinted, adv, mask, replaced, micro=4)
  assert abs(theirs - ours) > 1e-3 * abs(ours)
  d = _defaults("oc_grpo")
  key = "loss (the term the weight enters)"
  assert "clip_ratio_c 3.0" in d[key][1] and "micro-batch of 4 sequences" in d[key][1] and "token_mean" in d[key][0]
  assert any("dual clip 3.0 (compose ppo_clip(dual_clip=3.0))" in x for x in _fid("oc_grpo").deviations)
  assert "volcengine/verl@v0.4.1" in _fid("oc_grpo").read and "dp_actor.py:427-429" in _fid("oc_grpo").read


# ---------------------------------------------------------------------------------------- lte (not held)


def test_lte_quotes_a_truncated_completion_whole_under_the_default_answer_key():
  truncated = "Let me add 17 and 25 step by step. First 17 +"  # cut at max_new_tokens: no answer
  data = _round([0, 0, 0, 0], ["41", truncated, "41", "43"], ["42"])
  default_key = lambda c: c.strip()  # rljax/train/_mechanics.py:111, a task without answer_key
  prompts, take, _ = H.lte(template="{hint}|{prompt}").hints(data, 4, default_key)
  assert prompts == [f"41, {truncated}, 43|q0="] and take.tolist() == [4]
  # with an answer_key that extracts a final number (None -> ""), the truncated row gives no mistake
  extract = lambda c: c.strip() if c.strip().isdigit() else ""
  assert H.lte(template="{hint}|{prompt}").hints(data, 4, extract)[0] == ["41, 43|q0="]
  from rljax.envs import _arithmetic, _countdown, _gsm8k, _small_addition
  assert hasattr(_small_addition.SmallAdditionTask, "answer_key")
  for cls in (_arithmetic.ArithmeticTask, _gsm8k.GSM8KTask, _countdown.CountdownTask):
    assert not hasattr(cls, "answer_key"), cls
  devs = " ".join(_fid("lte").deviations)
  assert "a truncated response with no answer gives no hint)" not in devs
  assert "quotes up to 3 whole failed completions, truncated ones included" in devs


def test_lte_j_mixed_two_normalisers_differ_from_one_token_mean():
  """The v1 write-up's J_Mixed: 1/Z' Σ_off + 1/Z Σ_on; with Z', Z the two parts' token counts it is the sum of two
  token means, not the token mean over all rows (here 2 hinted rows of 3 tokens, 6 on-policy rows of 9)."""
  off = np.full(2 * 3, 0.7)  # per-token f(r̂')·Â' values
  on = np.full(6 * 9, -0.2)  # per-token clipped terms
  theirs = off.sum() / off.size + on.sum() / on.size
  ours = (off.sum() + on.sum()) / (off.size + on.size)
  assert abs(theirs - ours) > 0.1
  d = _defaults("lte")
  assert "1/Z'" in d["loss normalisation"][1] and "token_mean" in d["loss normalisation"][0]
  assert "the whole stripped completion" in d["max_mistakes"][0]
  assert any(x.startswith("their J_Mixed normalises") for x in _fid("lte").deviations)
  assert "Per-row review r (#51)" in _fid("lte").read


def test_the_five_records_print():
  for name in ("rapo_replay", "rorecomp_compensation", "guide", "oc_grpo", "lte"):
    assert describe(ROWS[name])
  for name in ("guide", "oc_grpo", "lte"):
    assert "Per-row review r (#51)" in describe(ROWS[name])
