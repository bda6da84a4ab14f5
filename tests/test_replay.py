"""Replay buffers (issue #21 item 3): the selection rules against independent references, the stages' buffer
management, ExGRPO's mixed-policy loss, and the buffer through a real Checkpointer round trip, bit for bit.

(The resumed training run with a buffer is in tests/test_recipes_loop.py; every row trains for two steps in
tests/test_recipes_every_technique_*.py.)
"""
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rljax import objectives as O
from rljax import replay as R
from rljax.replay import _buffer as B
from rljax.stages import RunFacts, StepData
from rljax.types import PolicyOutputs, TrainBatch

T = 5  # row width: 2 prompt tokens, 3 completion tokens
FACTS = RunFacts(num_prompts=3, group_size=4, max_new_tokens=3, seq_len=T)


def _step(correct, *, group_size=4, prompts=None, rewards=None, lengths=None, step=0, seed=0, extras=None):
  """A StepData of len(correct) rows in groups of ``group_size``; row i's tokens are all 10 * step + i + 1."""
  correct = np.asarray(correct, np.float32)
  b = correct.size
  rng = np.random.default_rng(seed)
  cm = np.zeros((b, T), bool)
  lengths = np.full(b, 3) if lengths is None else np.asarray(lengths)
  for i, n in enumerate(lengths):
    cm[i, 2:2 + n] = True
  groups = np.repeat(np.arange(b // group_size, dtype=np.int32), group_size)
  prompts = np.arange(b // group_size) if prompts is None else np.asarray(prompts)
  tokens = np.repeat((10 * step + np.arange(b) + 1)[:, None], T, 1).astype(np.int32)
  return StepData(
      tokens=tokens, prompt_mask=~cm & (np.arange(T) < 2), completion_mask=cm, group_id=groups,
      num_groups=b // group_size, valid=np.ones(b, bool), lengths=cm.sum(1).astype(np.int32),
      completions=tuple(f"c{i}" for i in range(b)), problems=(None,) * b,
      prompt_index=np.repeat(np.asarray(prompts, np.int64), group_size),
      rewards=correct.copy() if rewards is None else np.asarray(rewards, np.float32), correct=correct,
      logp_behavior=-rng.uniform(0.1, 2.0, (b, T)).astype(np.float32) * cm,
      entropy_behavior=rng.uniform(0.1, 2.0, (b, T)).astype(np.float32) * cm, max_new_tokens=3, step=step,
      key=jax.random.PRNGKey(step), extras=dict(extras or {}))


def _buffer_with(rows):
  """A buffer holding ``rows``: dicts with prompt, correct, seq (and optional entropy, score)."""
  buf = B.empty_buffer(max(len(rows), 1) + 2, T)
  for s, r in enumerate(rows):
    buf.prompt_index[s] = r["prompt"]
    buf.correct[s] = r["correct"]
    buf.seq[s] = r["seq"]
    buf.score[s] = r.get("score", 0.5)
    buf.completion_mask[s, 2:] = True
    buf.entropy_behavior[s, 2:] = r.get("entropy", 1.0)
    buf.tokens[s] = 100 + s
  return buf


# ----------------------------------------------------------------------------- the buffer


def test_store_fills_empty_slots_then_evicts_the_oldest_and_insert_copies_stored_rows():
  buf = B.empty_buffer(3, T)
  d0 = _step([1, 0, 1, 1], group_size=2, step=0)
  buf = B.store(buf, d0, [0, 2], step=0)
  assert buf.prompt_index.tolist() == [0, 1, -1] and buf.seq.tolist() == [0, 1, -1]
  d1 = _step([1, 1, 0, 0], group_size=2, prompts=[5, 6], step=1)
  buf = B.store(buf, d1, [0, 1], step=1)  # slot 2 (empty), then slot 0 (oldest, seq 0)
  assert buf.prompt_index.tolist() == [5, 1, 5] and buf.seq.tolist() == [3, 1, 2] and buf.step.tolist() == [1, 0, 1]
  np.testing.assert_array_equal(buf.tokens[[2, 0]], d1.tokens[[0, 1]])
  np.testing.assert_array_equal(buf.logp_behavior[1], d0.logp_behavior[2])
  out = B.insert(d0, buf, [3], [1])
  np.testing.assert_array_equal(out.tokens[3], d0.tokens[2])
  np.testing.assert_array_equal(out.logp_behavior[3], d0.logp_behavior[2])  # the stored behaviour log-probs
  assert out.completions[3] == "" and out.completions[2] == "c2"
  assert out.extras["replay_mask"].tolist() == [False, False, False, True]
  np.testing.assert_array_equal(out.tokens[:3], d0.tokens[:3])
  with pytest.raises(ValueError, match="tokens wide"):
    B.store(B.empty_buffer(2, T + 1), d0, [0], step=0)


def test_insert_gives_replayed_rows_no_turn_structure():
  """A multi-turn step: the turn ids, per-turn rewards and turn texts describe the fresh rows' tokens; a replayed
  row (the buffer stores none of them) gets none, the other rows keep theirs."""
  buf = B.store(B.empty_buffer(3, T), _step([1, 0, 1, 1], group_size=2), [0], step=0)
  tids = np.where(_step([1, 0, 1, 1]).completion_mask, 0, -1).astype(np.int32)
  tids[:, 4] = 1
  d = _step([1, 0, 1, 1], group_size=2, step=1).replace(
      turn_ids=tids, step_rewards=np.full((4, 2), 0.5, np.float32), step_mask=np.ones((4, 2), bool),
      turns=tuple(("a", "b") for _ in range(4)))
  out = B.insert(d, buf, [1], [0])
  assert (out.turn_ids[1] == -1).all() and not out.step_mask[1].any() and (out.step_rewards[1] == 0).all()
  assert out.turns[1] == () and out.turns[0] == ("a", "b")
  for name in ("turn_ids", "step_rewards", "step_mask"):
    np.testing.assert_array_equal(getattr(out, name)[[0, 2, 3]], getattr(d, name)[[0, 2, 3]])
  assert (d.turn_ids[1] >= 0).any()  # the input is not changed


def test_insert_gives_replayed_self_play_rows_their_own_role_id():
  """Self-play rows name their role (``extras["role_id"]``, rljax/train/_episodes.py). A replayed row takes the
  stored row's role, never the role of the fresh row it replaces; a stored row without one gets -1."""
  roles = {"role_id": np.array([0, 1, 0, 1], np.int32)}
  buf = B.store(B.empty_buffer(3, T), _step([1, 0, 1, 1], group_size=2, extras=roles), [1, 2], step=0)
  buf = B.store(buf, _step([1, 0, 1, 1], group_size=2), [3], step=0)  # a step without roles
  assert buf.role_id.tolist() == [1, 0, -1]
  d = _step([1, 0, 1, 1], group_size=2, step=1, extras=roles)
  out = B.insert(d, buf, [0, 1, 3], [0, 1, 2])
  assert out.extras["role_id"].tolist() == [1, 0, 0, -1]
  assert d.extras["role_id"].tolist() == [0, 1, 0, 1]  # the input is not changed
  assert "role_id" not in B.insert(_step([1, 0, 1, 1], group_size=2), buf, [0], [0]).extras  # none asked for


# ----------------------------------------------------------------------------- RAPO and MobileRL selection rules


def _reference_plan(data, buf, count):
  """Brute force, written without _buffer: per group (in id order) ``count(fresh rates) -> k``; rows worst-first
  by (reward, -row), stored successes of the prompt by -seq."""
  rows_out, slots_out = [], []
  for g in sorted(set(data.group_id.tolist())):
    rows = [i for i in range(data.batch_size) if data.group_id[i] == g and data.valid[i]]
    if not rows:
      continue
    ok = [data.correct[i] > 0.5 for i in rows]
    prompt = data.prompt_index[rows[0]]
    stored = sorted((s for s in range(len(buf.seq)) if buf.prompt_index[s] == prompt and buf.correct[s] > 0.5),
                    key=lambda s: -buf.seq[s])
    k, candidates = count(ok, rows, stored)
    worst = sorted(candidates, key=lambda i: (data.rewards[i], -i))
    rows_out += worst[:k]
    slots_out += stored[:k]
  return rows_out, slots_out


def _random_case(rng, b=12, g=4):
  correct = rng.integers(0, 2, b) * (rng.random(b) < 0.6)
  data = _step(correct, group_size=g, prompts=rng.integers(0, 3, b // g), rewards=rng.integers(0, 3, b) / 2.0,
               seed=int(rng.integers(1 << 30)))
  data = data.replace(valid=rng.random(b) < 0.85)
  stored = [{"prompt": int(rng.integers(0, 3)), "correct": float(rng.integers(0, 2)), "seq": int(s)}
            for s in rng.permutation(8)]
  return data, _buffer_with(stored)


def test_rapo_plan_matches_a_brute_force_reference():
  rng = np.random.default_rng(0)
  for per_group in (1, 2):
    def count(ok, rows, stored):
      return (0 if any(ok) or len(rows) < 2 else min(per_group, len(stored), len(rows) - 1)), rows
    for _ in range(60):
      data, buf = _random_case(rng)
      rows, slots = B.rapo_plan(data, buf, per_group=per_group)
      ref_rows, ref_slots = _reference_plan(data, buf, count)
      assert rows.tolist() == ref_rows and slots.tolist() == ref_slots


def test_positive_replay_plan_hand_derived_and_brute_force():
  # group 0: 1 of 4 correct (p = 0.25): ceil(0.5 * 0.75 * 4) = 2 replaced; group 1: p = 0.75 > 0.5: none;
  # group 2: p = 0, only one success stored: 1 replaced
  data = _step([1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0], prompts=[7, 8, 9],
               rewards=[1, .2, .1, .1, 1, 1, 1, 0, 0, .5, 0, .3])
  buf = _buffer_with([{"prompt": 7, "correct": 1, "seq": 0}, {"prompt": 7, "correct": 1, "seq": 4},
                      {"prompt": 7, "correct": 0, "seq": 5}, {"prompt": 8, "correct": 1, "seq": 1},
                      {"prompt": 9, "correct": 1, "seq": 2}])
  rows, slots = B.positive_replay_plan(data, buf, ratio=0.5, max_success=0.5)
  assert rows.tolist() == [3, 2, 10] and slots.tolist() == [1, 0, 4]  # ties at 0.1: the later row first
  rng = np.random.default_rng(1)
  for ratio, max_success in ((0.5, 0.5), (1.0, 1.0), (0.25, 0.0)):
    def count(ok, rows, stored):
      p = sum(ok) / len(rows)
      failed = [i for i, o in zip(rows, ok) if not o]
      if p > max_success or len(rows) < 2:
        return 0, failed
      return min(math.ceil(ratio * (1 - p) * len(rows) - 1e-9), len(failed), len(stored), len(rows) - 1), failed
    for _ in range(60):
      data, buf = _random_case(rng)
      rows, slots = B.positive_replay_plan(data, buf, ratio=ratio, max_success=max_success)
      assert (rows.tolist(), slots.tolist()) == _reference_plan(data, buf, count)


# ----------------------------------------------------------------------------- ExGRPO selection


def test_exgrpo_bucket_probabilities_hand_derived():
  scores = [0.0, 0.25, 0.25, 0.5, 1.0]  # buckets (G = 4): 0, 1, 1, 2, 4; bucket 3 empty
  w = {b: math.exp(-0.5 * (b / 4 - 0.5) ** 2) for b in (0, 1, 2, 4)}
  total = sum(w.values())
  expected = [w[0] / total, w[1] / total / 2, w[1] / total / 2, w[2] / total, w[4] / total]
  np.testing.assert_allclose(B.exgrpo_bucket_probs(scores, buckets=4, sigma=1.0), expected, rtol=1e-12)
  sharp = B.exgrpo_bucket_probs(scores, buckets=4, sigma=0.1)  # a narrow Gaussian favours medium difficulty
  assert sharp.argmax() == 3 and sharp[3] > 0.9


def test_exgrpo_pick_draws_buckets_with_their_probabilities_and_never_repeats():
  prompts, scores = np.array([40, 10, 30, 20, 50]), np.array([0.0, 0.25, 0.25, 0.5, 1.0])
  probs = dict(zip(prompts.tolist(), B.exgrpo_bucket_probs(scores, buckets=4)))
  n = 4000
  counts = {p: 0 for p in prompts.tolist()}
  for i, u1 in itertools.product(range(n), (0.25, 0.75)):  # u0 on a grid: frequencies = the CDF's widths
    counts[int(B.exgrpo_pick(prompts, scores, [[(i + 0.5) / n, u1]], buckets=4)[0])] += 1
  for p, c in counts.items():
    assert abs(c / (2 * n) - probs[p]) <= 1.0 / n, (p, c / (2 * n), probs[p])
  # within a bucket the position floor(u1 * |b|) in ascending prompt order: bucket 1 holds 10 < 30
  u0 = probs[40] + 0.5 * (probs[10] + probs[30])  # inside bucket 1's CDF interval
  assert B.exgrpo_pick(prompts, scores, [[u0, 0.1]], buckets=4).tolist() == [10]
  assert B.exgrpo_pick(prompts, scores, [[u0, 0.9]], buckets=4).tolist() == [30]
  picked = B.exgrpo_pick(prompts, scores, np.full((7, 2), 0.5), buckets=4)
  assert sorted(picked.tolist()) == sorted(prompts.tolist())  # without replacement, then the pool is empty


def test_exgrpo_trajectory_is_the_lowest_entropy_success_of_the_prompt():
  buf = _buffer_with([{"prompt": 3, "correct": 1, "seq": 0, "entropy": 0.9},
                      {"prompt": 3, "correct": 0, "seq": 1, "entropy": 0.1},  # a failure: never replayed
                      {"prompt": 3, "correct": 1, "seq": 2, "entropy": 0.4},
                      {"prompt": 3, "correct": 1, "seq": 3, "entropy": 0.4},  # tie: the most recent
                      {"prompt": 4, "correct": 1, "seq": 4, "entropy": 0.0}])
  assert B.exgrpo_trajectory(buf, 3) == 3 and B.exgrpo_trajectory(buf, 4) == 4 and B.exgrpo_trajectory(buf, 5) == -1


# ----------------------------------------------------------------------------- the stages


def test_rapo_stage_rescues_an_all_failed_group_with_its_prompts_stored_success():
  stage = R.rapo_replay(capacity=8, per_prompt=1).bind(FACTS)
  state = stage.init()
  d0 = _step([0, 1, 1, 0, 0, 0, 0, 0], prompts=[1, 2], rewards=[0, .5, .9, 0, 0, 0, 0, 0], step=0)
  out, state, m = stage.fn(d0, state)
  assert m["replayed"] == 0 and m["stored"] == 1 and out.extras["replay_mask"].sum() == 0
  assert state.prompt_index[state.seq >= 0].tolist() == [1]
  assert state.reward[state.seq == 0].tolist() == [np.float32(0.9)]
  d1 = _step([0, 0, 0, 0, 1, 0, 0, 0], prompts=[1, 2], rewards=[.3, .1, .2, .1, 1, 0, 0, 0], step=1)
  out, state, m = stage.fn(d1, state)
  assert m["replayed"] == 1 and out.extras["replay_mask"].tolist() == [0, 0, 0, 1, 0, 0, 0, 0]
  np.testing.assert_array_equal(out.tokens[3], d0.tokens[2])  # row 3 (lowest reward, the later of a tie)
  np.testing.assert_array_equal(out.logp_behavior[3], d0.logp_behavior[2])
  assert out.correct[3] == 1 and out.rewards[3] == np.float32(0.9) and out.valid.all()
  kept = state.prompt_index[state.seq >= 0]
  assert sorted(kept.tolist()) == [1, 2]  # prompt 2 stored its success; prompt 1 keeps its one (per_prompt=1)


def test_exgrpo_stage_manages_buckets_retires_solved_prompts_and_replays_into_mixed_groups():
  stage = R.exgrpo(capacity=16, ratio=0.5, per_prompt=3, sigma=0.01).bind(FACTS)
  state = stage.init()
  # step 0: prompt 1 half solved (2 stored, score 0.5), prompt 2 solved by all (nothing), prompt 3 a quarter (1)
  d0 = _step([1, 0, 1, 0, 1, 1, 1, 1, 1, 0, 0, 0], prompts=[1, 2, 3], step=0)
  _, state, m = stage.fn(d0, state)
  live = state.seq >= 0
  assert m["stored"] == 3 and sorted(state.prompt_index[live].tolist()) == [1, 1, 3]
  assert sorted(state.score[live].tolist()) == [0.25, 0.5, 0.5]
  # before step 1's rollout: floor(0.5 * 3) = 1 experience prompt replaces the batch's last prompt; sigma = 0.01
  # puts the weight on the medium bucket (acc 0.5: prompt 1)
  index, slots, pm = stage.prompts(state, np.array([4, 5, 6]), jax.random.PRNGKey(0))
  assert index.tolist() == [4, 5, 1] and slots[:2].tolist() == [-1, -1] and state.prompt_index[slots[2]] == 1
  entropy = (state.entropy_behavior * state.completion_mask).sum(1) / 3
  ones = np.flatnonzero(live & (state.prompt_index == 1))
  assert slots[2] == ones[np.argmin(entropy[ones])]  # the lower-entropy success of prompt 1
  assert pm["displaced_prompts"] == 1 and pm["pool_prompts"] == 2
  assert stage.prompts(state, np.array([1, 3, 6]), jax.random.PRNGKey(0))[0].tolist() == [1, 3, 6]  # no repeat
  # step 1: prompt 3 solved by all (retired: its row leaves), prompt 5 a quarter (stored), prompt 1 the mixed group:
  # fresh rows 8-10 (2 of 3 correct: kept, score 2/3, 2 stored + its latest old one) and row 11 replayed
  d1 = _step([1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 0, 0], prompts=[3, 5, 1], step=1,
             extras={"replay_slot": np.repeat(slots, 4)})
  out, state, m = stage.fn(d1, state)
  assert out.extras["replay_mask"].tolist() == [0] * 11 + [1] and "replay_slot" not in out.extras
  assert out.correct[11] == 1 and m["replayed"] == 1
  live = state.seq >= 0
  assert sorted(state.prompt_index[live].tolist()) == [1, 1, 1, 5]
  np.testing.assert_allclose(state.score[live & (state.prompt_index == 1)], 2 / 3)
  assert state.score[live & (state.prompt_index == 5)].tolist() == [0.25]
  assert m["retired_prompts"] == 1 and m["stored"] == 3
  assert not np.isin(out.tokens[11, 0], state.tokens[live & (state.step == 1)][:, 0])  # replayed: not stored again


def test_rorecomp_compensation_every_fresh_row_is_priority_or_buffered_and_freed_rows_take_the_oldest():
  stage = R.rorecomp_compensation(capacity=16, fraction=0.5).bind(FACTS)
  state = stage.init()
  lengths = [1, 3, 2, 3, 1, 2, 3, 3]
  d0 = _step([1, 1, 0, 0, 1, 0, 1, 0], group_size=4, lengths=lengths, step=0)
  d0 = d0.replace(advantages=np.linspace(-1, 1, 8).astype(np.float32))
  priority, _ = R._stages._rorecomp(d0.correct, d0.lengths, d0.group_id, fraction=0.5, valid=d0.valid)
  out, state, m = stage.fn(d0, state)
  assert out.valid.tolist() == priority.tolist()  # empty buffer: the freed rows leave the batch
  stored = state.seq >= 0
  assert m["stored"] == (~priority).sum() == stored.sum() and m["priority_rows"] == priority.sum()
  np.testing.assert_array_equal(np.sort(state.tokens[stored][:, 0]), np.sort(d0.tokens[~priority][:, 0]))
  slot = int(np.flatnonzero(state.seq == 0)[0])
  first = int(np.flatnonzero(~priority)[0])
  np.testing.assert_allclose(state.advantages[slot], d0.advantages[first] * d0.completion_mask[first])
  d1 = _step([1, 1, 0, 0, 1, 0, 1, 0], group_size=4, lengths=lengths, step=1)
  d1 = d1.replace(advantages=np.zeros(8, np.float32))
  out1, state1, m1 = stage.fn(d1, state)
  freed = np.flatnonzero(~priority)  # the same split (same correctness and lengths)
  assert m1["replayed"] == freed.size and out1.valid.all()
  assert out1.extras["replay_mask"].tolist() == (~priority).tolist()
  np.testing.assert_array_equal(out1.tokens[freed], d0.tokens[freed])  # FIFO: stored in row order, oldest first
  np.testing.assert_allclose(out1.advantages[freed], d0.advantages[freed][:, None] * d0.completion_mask[freed])
  assert np.all(out1.advantages[~out1.extras["replay_mask"]] == 0)
  assert np.all(state1.step[state1.seq >= 0] == 1)  # the replayed rows left the buffer (each used once)


@pytest.mark.parametrize("factory,kwargs", [(R.rapo_replay, {"per_group": 0}), (R.positive_replay, {"ratio": 0.0}),
                                            (R.exgrpo, {"sigma": 0.0}), (R.exgrpo, {"logp_old": "proximal"}),
                                            (R.rorecomp_compensation, {"compensation": 1.5})])
def test_bad_hyper_parameters_name_the_argument(factory, kwargs):
  with pytest.raises(ValueError, match=list(kwargs)[0]):
    factory(**kwargs)


def test_an_unbound_replay_stage_says_so():
  with pytest.raises(ValueError, match="not bound to the run"):
    R.rapo_replay().init()


# ----------------------------------------------------------------------------- ExGRPO's mixed-policy objective


def test_exgrpo_policy_clips_fresh_rows_and_shapes_replayed_rows():
  logp = jnp.log(jnp.array([[0.5, 0.4], [0.2, 0.6]]))
  old = jnp.log(jnp.array([[0.25, 0.4], [0.4, 0.3]]))  # w = [[2, 1], [0.5, 2]]
  adv = jnp.array([[1.0, 1.0], [-2.0, 3.0]])
  mask = jnp.ones((2, 2))
  batch = TrainBatch(tokens=jnp.zeros((2, 2), jnp.int32), loss_mask=mask, advantages=adv,
                     group_id=jnp.zeros(2, jnp.int32),
                     rewards=jnp.zeros(2), logp_behavior=old, logp_old=old,
                     extras={"replay_mask": jnp.array([False, True])})
  loss, _ = O.exgrpo_policy(eps_low=0.2, beta=0.1, clip_fresh=True)(PolicyOutputs(logp=logp, entropy=None), batch)
  # clip_fresh: fresh row 0: max(-A w, -A clip(w, 0.8, 1.2)) = [-1.2, -1]; replayed row 1: -A w / (w + 0.1)
  np.testing.assert_allclose(loss, [[-1.2, -1.0], [2 * 0.5 / 0.6, -3 * 2 / 2.1]], rtol=1e-6)
  grad = jax.grad(lambda lp: O.exgrpo_policy(beta=0.1)(PolicyOutputs(logp=lp, entropy=None), batch)[0].sum())(logp)
  w = np.array([0.5, 2.0])
  np.testing.assert_allclose(grad[1], -np.array([-2.0, 3.0]) * 0.1 * w / (w + 0.1) ** 2, rtol=1e-5)
  plain = batch.replace(extras={})
  np.testing.assert_allclose(O.exgrpo_policy()(PolicyOutputs(logp=logp, entropy=None), plain)[0],
                             O.ppo_clip()(PolicyOutputs(logp=logp, entropy=None), plain)[0])
  # default (the authors' loss_remove_clip=True): the fresh row is -A r unclipped, the replayed row unchanged
  loss, _ = O.exgrpo_policy(beta=0.1)(PolicyOutputs(logp=logp, entropy=None), batch)
  np.testing.assert_allclose(loss, [[-2.0, -1.0], [2 * 0.5 / 0.6, -3 * 2 / 2.1]], rtol=1e-6)


def test_exgrpo_policy_reads_the_declared_replay_mask_typed_or_a_user_key():
  """Issue #50: the default reads the declared extra (``rljax.replay.REPLAY_MASK.of(batch)``); ``replay_key`` names
  a user stage's own key instead; a bad ``replay_key`` is refused when the term is built, and a mask of another
  shape names the key."""
  logp = jnp.log(jnp.array([[0.5, 0.4], [0.2, 0.6]]))
  old = jnp.log(jnp.array([[0.25, 0.4], [0.4, 0.3]]))
  batch = TrainBatch(tokens=jnp.zeros((2, 2), jnp.int32), loss_mask=jnp.ones((2, 2)),
                     advantages=jnp.array([[1.0, 1.0], [-2.0, 3.0]]), group_id=jnp.zeros(2, jnp.int32),
                     logp_old=old, extras={"replay_mask": jnp.array([False, True])})
  out = PolicyOutputs(logp=logp, entropy=None)
  assert R.REPLAY_MASK.name == "replay_mask" and R.REPLAY_MASK.of(batch) is batch.extras["replay_mask"]
  assert R.REPLAY_MASK.of(batch.replace(extras={})) is None
  default, _ = O.exgrpo_policy(beta=0.1)(out, batch)
  mine, _ = O.exgrpo_policy(beta=0.1, replay_key="mine")(out, batch.replace(extras={"mine": jnp.array([False, True])}))
  np.testing.assert_array_equal(default, mine)
  ignored, _ = O.exgrpo_policy(beta=0.1, replay_key="mine")(out, batch)  # no "mine": the on-policy (clipped) phase
  np.testing.assert_array_equal(ignored, O.ppo_clip()(out, batch)[0])
  with pytest.raises(ValueError, match="replay_key must be None"):
    O.exgrpo_policy(replay_key="")
  with pytest.raises(ValueError, match=r"batch.extras\['replay_mask'\] must have shape \(2,\)"):
    O.exgrpo_policy()(out, batch.replace(extras={"replay_mask": jnp.array([[False, True]] * 2)}))


def _exgrpo_authors_loss(old_log_prob, log_prob, advantages, prefix_mask, cliprange=0.2, clip_upper_bound=1.0,
                         loss_remove_clip=True, off_policy_reshape="p_div_p_0.1"):
  """Per-token ``pg_losses`` of ExGRPO's compute_token_on_off_policy_loss (github.com/ElliottYan/LUFFY,
  ExGRPO/exgrpo/verl/verl/mix_src/mix_core_alg.py; on_policy_reshape="no_reshape", target_probs=None, no
  off/all clips), transcribed in float64 NumPy. ``prefix_mask [B, T]`` bool: the experience (off-policy) tokens."""
  negative_approx_kl = log_prob - old_log_prob
  ratio = np.exp(negative_approx_kl)
  on_pg_losses = -advantages * ratio
  upper_bound = max(clip_upper_bound, 1.0 + cliprange)
  if loss_remove_clip is False:
    on_pg_losses2 = -advantages * np.clip(ratio, 1.0 - cliprange, upper_bound)
    on_pg_losses = np.maximum(on_pg_losses, on_pg_losses2)
  off_ratio = np.exp(negative_approx_kl)
  if off_policy_reshape == "p_div_p_0.1":
    off_ratio = off_ratio / (off_ratio + 0.1)
  off_pg_losses = -advantages * off_ratio
  prefix_mask = prefix_mask.astype(np.float64)
  return off_pg_losses * prefix_mask + on_pg_losses * (1 - prefix_mask)


def test_exgrpo_policy_equals_the_authors_loss_in_float64():
  rng = np.random.default_rng(11)
  b, t = 6, 9
  old = np.log(rng.uniform(0.05, 0.95, (b, t)))
  logp = old + rng.normal(0.0, 0.6, (b, t))  # ratios well outside [0.8, 1.2]
  adv = rng.normal(0.0, 1.5, (b, t))
  replayed = np.array([False, True, False, False, True, False])
  mask = (rng.uniform(size=(b, t)) < 0.8).astype(np.float64)
  with jax.enable_x64(True):
    batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask), advantages=jnp.asarray(adv),
                       group_id=jnp.zeros(b, jnp.int32), rewards=jnp.zeros(b, jnp.float64),
                       logp_behavior=jnp.asarray(old), logp_old=jnp.asarray(old),
                       extras={"replay_mask": jnp.asarray(replayed)})
    out = PolicyOutputs(logp=jnp.asarray(logp), entropy=None)
    prefix = np.broadcast_to(replayed[:, None], (b, t))
    for clip_fresh in (False, True):
      loss, _ = O.exgrpo_policy(beta=0.1, clip_fresh=clip_fresh)(out, batch)
      ref = _exgrpo_authors_loss(old, logp, adv, prefix, loss_remove_clip=not clip_fresh) * mask
      assert loss.dtype == jnp.float64
      np.testing.assert_allclose(np.asarray(loss), ref, rtol=1e-12, atol=1e-14)
    # no replay stage (the authors' on-policy warm-up, is_mixed_policy False): PPO clip, no reshape
    loss, _ = O.exgrpo_policy(beta=0.1)(out, batch.replace(extras={}))
    ref = _exgrpo_authors_loss(old, logp, adv, np.zeros((b, t), bool), loss_remove_clip=False) * mask
    np.testing.assert_allclose(np.asarray(loss), ref, rtol=1e-12, atol=1e-14)
  with pytest.raises(ValueError, match="clip_fresh"):
    O.exgrpo_policy(clip_fresh="yes")


# ----------------------------------------------------------------------------- checkpoints


@pytest.mark.parametrize("factory", [R.exgrpo, R.rapo_replay, R.positive_replay, R.rorecomp_compensation])
def test_a_buffer_survives_a_checkpointer_round_trip_bit_for_bit(factory, tmp_path):
  from rljax.train._checkpoint import Checkpointer  # pylint: disable=import-outside-toplevel
  stage = factory(capacity=6).bind(FACTS)
  state = stage.init()
  rng = np.random.default_rng(3)
  for s in range(4):
    d = _step(rng.integers(0, 2, 12), prompts=rng.integers(0, 3, 3), rewards=rng.random(12), step=s, seed=s,
              lengths=rng.integers(1, 4, 12))
    _, state, _ = stage.fn(d.replace(advantages=rng.normal(size=12).astype(np.float32)), state)
  assert (state.seq >= 0).sum() > 0
  ckpt = Checkpointer(str(tmp_path / "ckpt"))
  tree = {"stages": {"advantage": {}, "prompt_filters": {}, "replay": {stage.name: state}}}
  ckpt.save(4, tree, {"step": 4}, parts=True)
  ckpt.close()
  template = {"stages": {"advantage": {}, "prompt_filters": {}, "replay": {stage.name: stage.init()}}}
  restored, meta, step = Checkpointer(str(tmp_path / "ckpt")).restore(template, parts=True)
  got = restored["stages"]["replay"][stage.name]
  assert step == 4 and isinstance(got, B.ReplayBuffer)
  for name, a, b in zip(B.ReplayBuffer._fields, state, got):
    assert a.dtype == b.dtype and a.shape == b.shape, name
    assert a.tobytes() == b.tobytes(), name


# ----------------------------------------------------------------------------- the loop


class _FakeLoop:
  """The live context's forwards (``RLLoop.forwards``; here: logp_old = -9 everywhere)."""

  @staticmethod
  def forwards(data, metrics):  # pylint: disable=unused-argument
    return data.replace(logp_old=np.full(data.tokens.shape, -9.0, np.float32))


@pytest.mark.parametrize("reading", ["recompute", "behavior"])
def test_replayed_rows_logp_old_is_recomputed_or_their_stored_behaviour_logp(reading):
  """The inputs phase (``rljax.train._phases``), its stages as its selector picks them from the recipe."""
  from types import SimpleNamespace  # pylint: disable=import-outside-toplevel
  from rljax.recipes import Recipe  # pylint: disable=import-outside-toplevel
  from rljax.train import _phases as P  # pylint: disable=import-outside-toplevel
  stage = R.rapo_replay(logp_old=reading).bind(FACTS)
  d = _step([0, 0, 0, 0, 1, 0, 1, 0], extras={"replay_mask": np.array([0, 0, 0, 1, 0, 0, 0, 0], bool)})
  run = SimpleNamespace(data=d, metrics={})
  row = next(p for p in P.PIPELINE if p.name == "inputs")
  row.fn(_FakeLoop, run, row.select(Recipe(replay=stage)))
  out = run.data
  fresh = ~d.extras["replay_mask"]
  assert np.all(out.logp_old[fresh] == -9.0)
  np.testing.assert_array_equal(out.logp_old[3], d.logp_behavior[3] if reading == "behavior" else np.full(T, -9.0))
  np.testing.assert_array_equal(out.logp_behavior, d.logp_behavior)  # the stored behaviour log-probs stay


@pytest.mark.parametrize("overrides,match", [
    (["rl.replay=rapo_replay", "rl.rollout_ahead=true"], "rollout_ahead"),
    (["rl.replay=exgrpo", "rl.advantage=grpo, uniqueness"], r"stores no \['answer_ids'\].*'uniqueness'"),
    (["rl.replay=rapo_replay", "rl.routing_replay=true", "model.num_experts=2", "model.num_experts_per_tok=1"],
     "stores no expert routing"),
    (["rl.replay=guide", "rl.routing_replay=true", "model.num_experts=2", "model.num_experts_per_tok=1"],
     "samples hinted rows under another prompt"),
])
def test_unsupported_replay_combinations_are_refused_at_start_up(overrides, match, tmp_path):
  from rljax.train import apply_overrides, tiny_config, train  # pylint: disable=import-outside-toplevel
  cfg = apply_overrides(tiny_config(str(tmp_path)), ["task.digits=1", "rl.steps=1", "progress=false", *overrides])
  with pytest.raises(ValueError, match=match):
    train(cfg)
  assert not (tmp_path / "metrics.jsonl").exists()


def test_a_recipe_without_replay_describes_as_before():
  """recipe.json of a run without a replay stage keeps its layout (a resume compares it with the stored one)."""
  from rljax.recipes import Recipe  # pylint: disable=import-outside-toplevel
  assert "replay" not in Recipe().describe()
  assert Recipe(replay="rapo_replay(per_group=2)").describe()["replay"] == ["rapo_replay(per_group=2)"]
  assert Recipe(replay="exgrpo").specs()["replay"] == "exgrpo" and Recipe().specs()["replay"] == ""
