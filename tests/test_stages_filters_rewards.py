"""Stage factories of the filter, reward and shaping rows: each stage against a direct call of its function."""

import jax
import numpy as np
import pytest

from rljax import filters as F
from rljax import recipes
from rljax import rewards as W
from rljax.envs import ArithmeticTask, Problem
from rljax.stages import Filter, NeedError, PromptData, PromptFilter, Reward, RunFacts, Shaping, StepData
from rljax.train._rollout import run_filters, set_rewards

G, N = 3, 4  # groups x rows per group
TASK = ArithmeticTask(digits=2)
FACTS = RunFacts(num_prompts=G, group_size=N, max_new_tokens=6)
INDEX = np.array([5, 2, 7])  # each group's prompt in the dataset


def _step(rewards=None, valid=None, group_size=N) -> StepData:
  """A synthetic step: 3 groups x 4 rows (by default), binary rewards, row 7 invalid (padding)."""
  r = np.asarray([1, 1, 1, 1, 1, 0, 0, 0, 1, 0, 1, 0] if rewards is None else rewards, np.float32)
  b, t = r.shape[0], 8
  g = b // group_size
  lengths = np.array([2, 3, 4, 5, 1, 2, 5, 3, 6, 2, 4, 3])[:b]
  cm = np.zeros((b, t), bool)
  for i, n in enumerate(lengths):
    cm[i, 2:2 + n] = True
  if valid is None:
    valid = np.ones(b, bool)
    if b > 7:
      valid[7] = False
  rng = np.random.default_rng(0)
  problems = tuple(TASK._make(a, c) for a, c in ((37, 85), (1, 2), (40, 50)))  # pylint: disable=protected-access
  step_mask = np.ones((b, 4), bool)
  step_mask[::3, 3] = False
  step_mask[min(2, b - 1), 1:] = False
  turns = (("```x```", "\\boxed{2}"), ("let me think", "\\boxed{1}"), ("<answer>3</answer>",), ())
  return StepData(
      tokens=np.ones((b, t), np.int32), prompt_mask=~cm, completion_mask=cm,
      group_id=np.repeat(np.arange(g, dtype=np.int32), group_size), num_groups=g, valid=np.asarray(valid, bool),
      lengths=lengths.astype(np.int32), completions=tuple(str(i) for i in range(b)),
      problems=tuple(problems[i // group_size] for i in range(b)),
      prompt_index=np.repeat(INDEX[:g], group_size).astype(np.int64), rewards=r, correct=r.copy(),
      logp_behavior=np.zeros((b, t), np.float32), max_new_tokens=6, key=jax.random.PRNGKey(3),
      reward_components=rng.integers(0, 2, (b, 2)).astype(np.float32), reward_names=("a", "b"),
      step_rewards=rng.uniform(0, 1, (b, 4)).astype(np.float32), step_mask=step_mask,
      turns=tuple(turns[i % 4] for i in range(b)),
      advantages=np.array([0.5, -1.0, 0.0, 2.0, -0.5, 1.5, -2.0, 3.0, 0.7, -0.7, 0.2, -0.1], np.float32)[:b])


def _np(x):
  return np.asarray(x)


# ----------------------------------------------------------------------------- slots and needs

FILTERS = ("zero_variance", "variance_topp", "vcrl", "void_turn", "rorecomp", "negative_advantage_drop",
           "shuffle_pairs")
PROMPT_FILTERS = ("greso", "pilot_commit", "difficulty_budget", "dump", "tac")
REWARDS = ("gaussian_reward", "clipped_linear_reward")
SHAPING = ("grpo_lambda", "length_penalty", "rubric_dropout", "prm_clip", "prm_delta", "correctness_gated")


def test_slots():
  assert set(recipes.names_for("prompt_filters")) == set(PROMPT_FILTERS)
  assert set(FILTERS) <= set(recipes.names_for("filters"))
  assert not set(PROMPT_FILTERS) & set(recipes.names_for("filters"))
  assert set(REWARDS) <= set(recipes.names_for("rewards"))
  assert set(SHAPING) <= set(recipes.names_for("shaping"))
  rows = {r.name: r for r in F.TECHNIQUES}
  assert all(rows[n].stage.slot == "prompt_filters" for n in PROMPT_FILTERS)


@pytest.mark.parametrize("name, kwargs, cls, phase, needs", [
    ("variance_topp", {}, Filter, "rewards", set()),
    ("vcrl", {}, Filter, "rewards", set()),
    ("void_turn", {}, Filter, "rewards", {"turns"}),
    ("rorecomp", {}, Filter, "rewards", set()),
    ("negative_advantage_drop", {}, Filter, "advantages", {"advantages"}),
    ("shuffle_pairs", {}, Filter, "advantages", {"advantages"}),
    ("greso", {}, PromptFilter, None, set()),
    ("pilot_commit", {}, PromptFilter, None, set()),
    ("difficulty_budget", {}, PromptFilter, None, set()),
    ("dump", {}, PromptFilter, None, {"task_id", "advantages"}),
    ("tac", {}, PromptFilter, None, {"task_id", "advantages", "task_gradients"}),
    ("gaussian_reward", {}, Reward, None, set()),
    ("clipped_linear_reward", {}, Reward, None, set()),
    ("grpo_lambda", {}, Shaping, "rollout", set()),
    ("length_penalty", {}, Shaping, "rollout", set()),
    ("rubric_dropout", {"drop_prob": 0.3}, Shaping, "rollout", {"reward_components"}),
    ("prm_clip", {}, Shaping, "rollout", {"step_rewards"}),
    ("prm_delta", {}, Shaping, "rollout", {"step_rewards"}),
    ("correctness_gated", {}, Shaping, "rollout", {"step_rewards"}),
])
def test_kind_phase_and_needs(name, kwargs, cls, phase, needs):
  stage = recipes.stage(name, **kwargs)
  assert isinstance(stage, cls) and stage.name == name
  assert set(stage.needs) == needs
  if phase is not None:
    assert stage.phase == phase


def test_refill_only_on_group_filters():
  for name in ("zero_variance", "variance_topp", "vcrl"):
    assert recipes.stage(name, refill=True).refill and not recipes.stage(name).refill
  for name in ("void_turn", "rorecomp", "negative_advantage_drop", "shuffle_pairs"):
    with pytest.raises(ValueError, match="refill"):
      recipes.stage(name, refill=True)


# ----------------------------------------------------------------------------- row filters


def test_variance_topp():
  d = _step()
  keep, _ = recipes.stage("variance_topp", top_p=0.5, refill=True).fn(d)
  expected, _ = F.variance_topp(d.rewards, d.group_id, num_groups=G, top_p=0.5, valid=d.valid)
  np.testing.assert_array_equal(_np(keep), _np(expected))
  # ceil(0.5 * 3) = 2 groups with the largest std: 1 and 2 (group 0 is all 1); the invalid row 7 is never kept
  np.testing.assert_array_equal(_np(keep), np.r_[[False] * 4, [True] * 3, False, [True] * 4])


def test_vcrl_excludes_invalid_rows_from_its_statistic():
  d = _step()
  keep, _ = recipes.stage("vcrl", threshold=0.8).fn(d)
  expected, _ = F.vcrl(d.rewards, d.group_id, num_groups=G, threshold=0.8, valid=d.valid)
  np.testing.assert_array_equal(_np(keep), _np(expected))
  # group 1 over its valid rows [1, 0, 0]: 4 p (1 - p) = 8/9 >= 0.8 (with row 7, [1, 0, 0, 0]: 0.75, dropped)
  np.testing.assert_array_equal(_np(keep), np.r_[[False] * 4, [True] * 3, False, [True] * 4])


def test_void_turn_reads_turns():
  d = _step()
  stage = recipes.stage("void_turn")
  keep, m = stage.fn(d)
  expected, _ = F.void_turn(d.turns)
  np.testing.assert_array_equal(_np(keep), _np(expected))
  np.testing.assert_array_equal(_np(keep)[:4], [True, False, True, True])  # "let me think" is a void turn
  with pytest.raises(NeedError, match="turns"):
    stage.fn(d.replace(turns=None))
  out = run_filters((stage,), d, {})
  np.testing.assert_array_equal(out.valid, d.valid & _np(expected))


def test_rorecomp_keeps_priority_rows():
  d = _step()
  keep, _ = recipes.stage("rorecomp", fraction=0.5).fn(d)
  expected, _ = F.rorecomp(d.correct, d.lengths, d.group_id, fraction=0.5, valid=d.valid)
  np.testing.assert_array_equal(_np(keep), _np(expected))
  assert not keep[7] and keep.any() and not keep.all()


def test_negative_advantage_drop_sequence_and_token_advantages():
  d = _step()
  stage = recipes.stage("negative_advantage_drop", keep_zero=False)
  keep, _ = stage.fn(d)
  expected, _ = F.negative_advantage_drop(d.advantages, valid=d.valid, keep_zero=False)
  np.testing.assert_array_equal(_np(keep), _np(expected))
  assert not keep[7] and not keep[2]  # invalid row; A = 0 with keep_zero=False
  # token-level advantages: a row's advantage is the one on its first completion token (column 2 here)
  tok = np.random.default_rng(1).normal(size=d.tokens.shape).astype(np.float32)
  tok[:, 2] = d.advantages
  tok[:, 3:] = -np.sign(d.advantages)[:, None] * 5  # a masked mean over the row would flip most signs
  keep_tok, _ = stage.fn(d.replace(advantages=tok))
  np.testing.assert_array_equal(_np(keep_tok), _np(expected))
  np.testing.assert_array_equal(F._stages.row_advantages(d.replace(advantages=tok)), d.advantages)


def test_shuffle_pairs_is_a_resampling_with_the_step_key():
  d = _step()
  stage = recipes.stage("shuffle_pairs", pairs_per_group=2, num_samples=6)
  order, _ = stage.fn(d)
  expected, st = F.shuffle_pairs(d.advantages, d.group_id, pairs_per_group=2, num_samples=6, key=d.key,
                                 valid=d.valid)
  np.testing.assert_array_equal(_np(order), _np(expected))
  assert order.dtype.kind == "i" and order.size == 6 and 7 not in set(order.tolist())
  other, _ = F.shuffle_pairs(d.advantages, d.group_id, pairs_per_group=2, num_samples=6,
                             key=jax.random.PRNGKey(99), valid=d.valid)
  order2, _ = stage.fn(d.replace(key=jax.random.PRNGKey(99)))
  np.testing.assert_array_equal(_np(order2), _np(other))
  out = run_filters((stage,), d, {})  # the loop's resampling: the drawn rows, then masked filler
  np.testing.assert_array_equal(out.advantages[:6], d.advantages[order])
  np.testing.assert_array_equal(out.valid, np.r_[[True] * 6, [False] * 6])


# ----------------------------------------------------------------------------- prompt filters


def _prompts(index=INDEX, pilot=None):
  problems = tuple(TASK._make(int(i), 1) for i in index)  # pylint: disable=protected-access
  return PromptData(problems, np.asarray(index), 10, pilot=pilot)


def test_greso_round_trip():
  stage = recipes.stage("greso", p_easy=0.01, p_hard=0.02, adapt_step=0.0)  # fixed probabilities
  with pytest.raises(ValueError, match="bind"):
    stage.select(stage.init(10), _prompts(), jax.random.PRNGKey(0))
  bound = stage.bind(FACTS)
  ref = F.greso(p_easy=0.01, p_hard=0.02, adapt_step=0.0)
  state = bound.init(10)
  jax.tree.map(np.testing.assert_array_equal, state, ref.init(10))
  key = jax.random.PRNGKey(0)
  counts, state1, _ = bound.select(state, _prompts(), key)
  np.testing.assert_array_equal(counts, [N, N, N])  # unseen prompts are always admitted
  assert state1 is state
  # observe: each prompt's rows (all of them, masked or not) grouped by dataset index
  d = _step()
  state2, _ = bound.observe(state1, d)
  ids, inv = np.unique(d.prompt_index, return_inverse=True)
  expected, _ = ref.update(state1, ids, d.rewards, inv.astype(np.int32))
  jax.tree.map(np.testing.assert_array_equal, state2, expected)
  assert int(state2.zero_streak[5]) == 1 and int(state2.kind[5]) == 1  # group 0: all correct, "easy"
  assert int(state2.zero_streak[2]) == 0 and int(state2.zero_streak[7]) == 0
  filtered = d.replace(valid=np.r_[[False] * 4, d.valid[4:]])  # group 0 dropped by a row filter: still observed
  jax.tree.map(np.testing.assert_array_equal, bound.observe(state1, filtered)[0], state2)
  # select after observe: prompt 5 is admitted with probability p_easy
  counts, _, m = bound.select(state2, _prompts(), key)
  admit, _ = ref.select(state2, key, np.sort(INDEX))
  np.testing.assert_array_equal(counts, np.where(_np(admit)[np.searchsorted(np.sort(INDEX), INDEX)], N, 0))
  np.testing.assert_allclose(_np(m["admit_prob"]), [1.0, 0.01, 1.0], rtol=1e-6)  # sorted ids 2, 5, 7
  skipped = counts == 0  # the report: how many candidates were skipped, and why (prompt 5's streak is "easy")
  assert m["skipped"] == skipped.sum() and m["skipped_easy"] == skipped.sum() and m["skipped_hard"] == 0
  counts, _, _ = bound.select(state2, _prompts(np.array([5, 5, 2])), key)  # repeated candidates are fine
  assert counts[0] == counts[1] and counts[2] == N


def test_pilot_commit_allocates_from_the_pilot():
  stage = recipes.stage("pilot_commit", pilot=2)
  assert stage.pilot == 2
  bound = stage.bind(FACTS)
  pilot = _step(rewards=[1, 1, 1, 0, 0, 1], group_size=2)
  state = bound.init(10)
  counts, state, m = bound.select(state, _prompts(pilot=pilot), jax.random.PRNGKey(0))
  assert (m["skipped"], m["skipped_zero_spread"], m["skipped_window"], m["skipped_budget"]) == (1, 1, 0, 0)
  # default budget: half the commit rows, 3 * (4 - 2) // 2 = 3; prompt 0 collapsed (std 0)
  expected, _ = F.pilot_commit(pilot.rewards, np.repeat(np.arange(G), 2), num_groups=G, budget=3, max_per_prompt=2,
                               valid=pilot.valid)
  np.testing.assert_array_equal(counts, expected)
  np.testing.assert_array_equal(counts, [0, 1, 1])  # equal scores get equal counts: 1.5 each rounds to 1
  counts, _, _ = recipes.stage("pilot_commit", pilot=2, budget=10).bind(FACTS).select(
      state, _prompts(pilot=pilot), jax.random.PRNGKey(0))
  np.testing.assert_array_equal(counts, [0, 2, 2])  # capped at group_size - pilot
  budget1 = recipes.stage("pilot_commit", pilot=2, budget=1).bind(FACTS)  # one commit row for two equal prompts
  _, _, m = budget1.select(state, _prompts(pilot=pilot), jax.random.PRNGKey(0))
  assert (m["skipped"], m["skipped_zero_spread"], m["skipped_budget"]) == (3, 1, 2)
  window = recipes.stage("pilot_commit", pilot=2, window=(0.6, 1.0)).bind(FACTS)  # pilot means 1, .5, .5
  _, _, m = window.select(state, _prompts(pilot=pilot), jax.random.PRNGKey(0))
  assert (m["skipped"], m["skipped_zero_spread"], m["skipped_window"], m["skipped_budget"]) == (3, 1, 2, 0)
  with pytest.raises(ValueError, match="pilot rollout"):
    bound.select(state, _prompts(), jax.random.PRNGKey(0))
  with pytest.raises(ValueError, match="group_size"):
    recipes.stage("pilot_commit", pilot=4).bind(FACTS)


def test_difficulty_budget_round_trip():
  stage = recipes.stage("difficulty_budget", decay=0.5, prior=0.5)
  bound = stage.bind(FACTS)
  state = bound.init(10)
  np.testing.assert_array_equal(state.accuracy, np.full(10, 0.5, np.float32))
  key = jax.random.PRNGKey(0)
  counts, state1, _ = bound.select(state, _prompts(), key)
  expected, _ = F.difficulty_budget(np.full(3, 0.5), budget=G * N // 2, max_per_prompt=N)
  np.testing.assert_array_equal(counts, expected)
  np.testing.assert_array_equal(counts, [2, 2, 2])
  state2, _ = bound.observe(state1, _step())
  # EMA of each prompt's accuracy over its rows: prompt 5 (1.0) -> 0.75, prompt 2 (1/4) -> 0.375, 7 (1/2) -> 0.5
  np.testing.assert_allclose(state2.accuracy[INDEX], [0.75, 0.375, 0.5])
  np.testing.assert_array_equal(state2.seen[INDEX], [1, 1, 1])
  assert state2.accuracy[0] == 0.5 and state2.seen[0] == 0
  counts, _, _ = bound.select(state2, _prompts(), key)
  expected, _ = F.difficulty_budget(state2.accuracy[INDEX].astype(np.float64), budget=6, max_per_prompt=N)
  np.testing.assert_array_equal(counts, expected)
  np.testing.assert_array_equal(counts, [1, 3, 2])  # the hardest prompt (2) gets the most rollouts
  solved = state2._replace(accuracy=np.where(np.arange(10) == 5, 1.0, state2.accuracy).astype(np.float32))
  counts, _, m = bound.select(solved, _prompts(), key)
  assert counts[0] == 0 and m["skipped"] == 1 and m["skipped_solved"] == 1 and m["skipped_budget"] == 0
  assert m["rows_cut"] == G * N - counts.sum() == 6
  with pytest.raises(ValueError, match="budget"):
    recipes.stage("difficulty_budget", budget=13).bind(FACTS)  # more than 3 prompts x 4 rows


# ----------------------------------------------------------------------------- the arithmetic task's helpers


def test_arithmetic_answer_value():
  assert TASK.answer_value("221") == 122.0 and TASK.answer_value(" 221\n") == 122.0
  assert TASK.answer_value(TASK._make(37, 85).answer) == 122.0  # pylint: disable=protected-access
  assert TASK.answer_value("0221") == 1220.0
  for bad in ("", "12a", "-3", "1.5", "²", None):
    assert TASK.answer_value(bad) is None
  assert ArithmeticTask(digits=2, reverse_answer=False).answer_value("122") == 122.0


def test_arithmetic_step_rewards():
  p1, p2 = TASK._make(37, 85), TASK._make(1, 2)  # pylint: disable=protected-access
  assert (p1.answer, p2.answer) == ("221", "3")
  r, m = TASK.step_rewards(["221", " 201", "2", "3", "45", None], [p1, p1, p1, p2, p2, p2])
  np.testing.assert_array_equal(r, [[1, 1, 1], [1, 0, 1], [1, 0, 0], [1, 0, 0], [0, 0, 0], [0, 0, 0]])
  np.testing.assert_array_equal(m, [[1, 1, 1]] * 3 + [[1, 0, 0]] * 3)
  assert r.dtype == np.float32 and m.dtype == bool
  with pytest.raises(ValueError, match="differ"):
    TASK.step_rewards(["1"], [p1, p2])


# ----------------------------------------------------------------------------- rewards


def test_gaussian_reward_arithmetic_and_number():
  stage = recipes.stage("gaussian_reward", sigma=2.0, invalid_value=-1.0, parse="arithmetic")
  p = TASK._make(37, 85)  # pylint: disable=protected-access
  r = stage.fn(["221", "321", "x", "022"], [p] * 4)
  expected, _ = W.gaussian_reward(np.array([122, 123, np.nan, 220], np.float32), np.full(4, 122.0), sigma=2.0,
                                  invalid_value=-1.0)
  np.testing.assert_allclose(r, _np(expected), rtol=1e-6)
  np.testing.assert_allclose(r[:3], [1.0, np.exp(-1 / 8), -1.0], rtol=1e-6)
  q = Problem("q", "12")
  r = recipes.stage("gaussian_reward").fn(["so \\boxed{10}", "The answer is 12.", "no idea"], [q] * 3)
  expected, _ = W.gaussian_reward(np.array([10, 12, np.nan], np.float32), np.full(3, 12.0))
  np.testing.assert_allclose(r, _np(expected), rtol=1e-6)
  with pytest.raises(ValueError, match="reference"):
    stage.fn(["1"], [Problem("q", "twelve")])
  wrapped, _ = W.safe_reward(stage.fn)(["221"], [p])  # the loop's guard accepts its output
  np.testing.assert_allclose(wrapped, [1.0])


def test_clipped_linear_reward():
  stage = recipes.stage("clipped_linear_reward", scale=0.5, parse="arithmetic")
  p = TASK._make(37, 85)  # pylint: disable=protected-access
  r = stage.fn(["221", "321", "x", "022"], [p] * 4)  # 122, 123, invalid, 220
  expected, _ = W.clipped_linear_reward(-np.abs(np.array([122, 123, 220], np.float32) - 122), scale=0.5, offset=1.0)
  np.testing.assert_allclose(r[[0, 1, 3]], _np(expected), rtol=1e-6)
  np.testing.assert_allclose(r, [1.0, 0.5, 0.0, 0.0])  # invalid -> low
  r = recipes.stage("clipped_linear_reward", low=-1.0, parse="number").fn(["nothing"], [Problem("q", "3")])
  np.testing.assert_allclose(r, [-1.0])


# ----------------------------------------------------------------------------- shaping


def test_grpo_lambda_replaces_rewards():
  d = _step()
  stage = recipes.stage("grpo_lambda", threshold=0.5)
  r, _ = stage.fn(d)
  expected, _ = W.grpo_lambda(d.correct, d.lengths, d.group_id, num_groups=G, threshold=0.5, valid=d.valid)
  np.testing.assert_allclose(_np(r), _np(expected), rtol=1e-6)
  assert r[7] == 0 and not np.allclose(_np(r), d.rewards)  # group 0 (acc 1) is length-penalised
  np.testing.assert_allclose(set_rewards(d, r, stage.name).rewards, _np(expected), rtol=1e-6)


def test_length_penalty_adds_to_rewards():
  d = _step()
  r, _ = recipes.stage("length_penalty", mode="correct_only").fn(d)
  lp, _ = W.length_penalty(d.lengths, d.correct, d.group_id, num_groups=G, valid=d.valid, mode="correct_only")
  np.testing.assert_allclose(_np(r), d.rewards + _np(lp), rtol=1e-6)
  np.testing.assert_allclose(_np(r)[:4], [1.5, 1 + 0.5 - 1 / 3, 1 + 0.5 - 2 / 3, 0.5], rtol=1e-6)


def test_rubric_dropout_on_reward_components():
  d = _step()
  stage = recipes.stage("rubric_dropout", drop_prob=0.5, weights=[1.0, 2.0])
  r, _ = stage.fn(d)
  expected, _, _ = W.rubric_dropout(d.key, d.reward_components, d.group_id, drop_prob=0.5, weights=[1.0, 2.0])
  np.testing.assert_allclose(_np(r), _np(expected), rtol=1e-6)
  other = jax.random.PRNGKey(7)
  expected, _, _ = W.rubric_dropout(other, d.reward_components, d.group_id, drop_prob=0.5, weights=[1.0, 2.0])
  np.testing.assert_allclose(_np(stage.fn(d.replace(key=other))[0]), _np(expected), rtol=1e-6)
  with pytest.raises(NeedError, match="reward_components"):
    stage.fn(d.replace(reward_components=None))
  recipes.stage("rubric_dropout", drop_prob=0.5, weights=[1.0, 1.0, 1.0])  # 3 criteria: built on 3 columns


def test_prm_clip_and_delta_sequence_reward():
  d = _step()
  r, _ = recipes.stage("prm_clip", eta=0.3).fn(d)
  steps, _ = W.prm_clip(d.step_rewards, d.step_mask, eta=0.3)
  np.testing.assert_allclose(_np(r), d.rewards + _np(steps).sum(1), rtol=1e-5)
  hand = d.rewards + np.where(d.step_mask, np.minimum(d.step_rewards - 0.3, 0), 0).sum(1)
  np.testing.assert_allclose(_np(r), hand, rtol=1e-5, atol=1e-6)
  r, _ = recipes.stage("prm_delta").fn(d)
  steps, _ = W.prm_delta(d.step_rewards, d.step_mask)
  np.testing.assert_allclose(_np(r), d.rewards + _np(steps).sum(1), rtol=1e-5)
  first = d.step_rewards[np.arange(12), np.argmax(d.step_mask, 1)]  # the delta return telescopes to r_first
  np.testing.assert_allclose(_np(r), d.rewards + first, rtol=1e-5, atol=1e-6)
  with pytest.raises(NeedError, match="step_rewards"):
    recipes.stage("prm_delta").fn(d.replace(step_rewards=None))


def test_correctness_gated_on_mean_process_reward():
  d = _step()
  r, _ = recipes.stage("correctness_gated", weight=0.5).fn(d)
  process = (d.step_rewards * d.step_mask).sum(1) / d.step_mask.sum(1)
  expected, _ = W.correctness_gated(d.rewards, process, d.correct, weight=0.5)
  np.testing.assert_allclose(_np(r), _np(expected), rtol=1e-5)
  np.testing.assert_allclose(_np(r), d.rewards + 0.5 * d.correct * process, rtol=1e-5)
  np.testing.assert_allclose(_np(r)[2], 1 + 0.5 * d.step_rewards[2, 0], rtol=1e-5)  # one valid step


def test_rewards_stages_with_the_arithmetic_process_rewards():
  p = TASK._make(37, 85)  # pylint: disable=protected-access
  step_rewards, step_mask = TASK.step_rewards(["221", "201"], [p, p])
  d = _step(rewards=[1, 0], valid=[True, True], group_size=2).replace(step_rewards=step_rewards, step_mask=step_mask)
  r, _ = recipes.stage("prm_clip", eta=0.5).fn(d)
  np.testing.assert_allclose(_np(r), [1.0, -0.5])  # one wrong digit


# ----------------------------------------------------------------------------- bad hyper-parameters


@pytest.mark.parametrize("name, kwargs", [
    ("zero_variance", {"atol": -1.0}),
    ("variance_topp", {"top_p": 0.0}),
    ("vcrl", {"threshold": 2.0}),
    ("vcrl", {"reward_range": (1.0, 0.0)}),
    ("void_turn", {"code_pattern": "("}),
    ("rorecomp", {"fraction": 0.0}),
    ("negative_advantage_drop", {"keep_zero": True, "refill": True}),
    ("shuffle_pairs", {"pairs_per_group": 0}),
    ("shuffle_pairs", {"min_gap": -1.0}),
    ("shuffle_pairs", {"num_samples": -1}),
    ("greso", {"p_easy": 0.0}),
    ("greso", {"p_min": 0.5, "p_max": 0.1}),
    ("pilot_commit", {"pilot": 1}),
    ("pilot_commit", {"rule": "greedy"}),
    ("pilot_commit", {"budget": -1}),
    ("difficulty_budget", {"power": 0.0}),
    ("difficulty_budget", {"decay": 1.0}),
    ("difficulty_budget", {"min_per_prompt": 3, "max_per_prompt": 2}),
    ("gaussian_reward", {"sigma": 0.0}),
    ("gaussian_reward", {"parse": "roman"}),
    ("clipped_linear_reward", {"low": 2.0}),
    ("grpo_lambda", {"threshold": 1.5}),
    ("grpo_lambda", {"selection": "best"}),
    ("length_penalty", {"mode": "linear"}),
    ("rubric_dropout", {"drop_prob": 1.0}),
    ("rubric_dropout", {"drop_prob": 0.5, "mode": "some"}),
    ("prm_clip", {"eta": float("nan")}),
    ("correctness_gated", {"weight": float("inf")}),
])
def test_bad_hyper_parameters_raise_at_build(name, kwargs):
  with pytest.raises(ValueError):
    recipes.stage(name, **kwargs)
