"""Stage factories of the advantage and multi-reward rows: built by name, run on a synthetic step, compared with a
direct call of the catalog function with the arguments the loop should pass."""
import numpy as np
import pytest

from rljax import advantages as A
from rljax.recipes import Recipe, names_for, resolve, stage
from rljax.stages import Advantage, MultiReward, RunFacts, StepData

G, N, T, P = 3, 4, 8, 3  # groups, rows per group, tokens, prompt tokens
PAD = 3  # a padding row (valid False) in group 0, with a reward that moves the group's statistics


def _step(seed: int = 0) -> StepData:
  """3 groups x 4 rows: random binary rewards, ragged completions, every need filled, K = 2 reward components,
  two turns / segments per completion (tokens 0-1 of the completion, then the rest)."""
  rng = np.random.default_rng(seed)
  b = G * N
  cm = np.zeros((b, T), bool)
  cm[:, P:] = True
  cm[np.arange(b) % 3 == 1, T - 2:] = False  # shorter completions
  cm[9, P + 1:] = False
  rewards = rng.integers(0, 2, b).astype(np.float32)
  rewards[:4] = [1.0, 0.0, 0.0, 1.0]  # group 0: 1/3 without the padding row, 1/2 with it
  valid = np.arange(b) != PAD
  f = lambda *shape: rng.normal(size=shape).astype(np.float32)
  turn = np.where(cm, (np.arange(T) >= P + 2).astype(np.int32), -1).astype(np.int32)
  step_mask = np.ones((b, 2), bool)
  step_mask[9] = [True, False]  # row 9 has one turn
  return StepData(
      tokens=rng.integers(1, 4, (b, T)).astype(np.int32), prompt_mask=~cm, completion_mask=cm,
      group_id=np.repeat(np.arange(G), N).astype(np.int32), num_groups=G, valid=valid, lengths=cm.sum(1),
      completions=tuple(str(i) for i in range(b)), problems=(None,) * b, prompt_index=np.repeat(np.arange(G), N),
      rewards=rewards, correct=rewards.copy(), logp_behavior=-np.abs(f(b, T)) * cm,
      entropy_behavior=np.abs(f(b, T)) * cm, max_new_tokens=T - P, logp_old=-np.abs(f(b, T)) * cm,
      logp_ref=-np.abs(f(b, T)) * cm, values=f(b, T) * cm, greedy_rewards=rng.integers(0, 2, b).astype(np.float32),
      answer_ids=rng.integers(0, 3, b).astype(np.int32), task_id=rng.integers(0, 2, b).astype(np.int32), num_tasks=2,
      reward_components=np.stack([rewards, rng.integers(0, 2, b)], 1).astype(np.float32),
      reward_names=("exact_match", "format_regex"), reward_segments=turn, turn_ids=turn, step_rewards=f(b, 2),
      step_mask=step_mask)


D = _step()
GID, VALID, R = D.group_id, D.valid, D.rewards
MASK = D.completion_mask & VALID[:, None]  # completion tokens of valid rows
FACTS = RunFacts(num_prompts=G, group_size=N, max_new_tokens=T - P, num_tasks=2)


def _with_advantages(data=D):
  return data.replace(advantages=np.asarray(A.grpo(data.rewards, GID, valid=VALID, num_groups=G)[0]))


def _check(out, ref, needs, stage_):
  np.testing.assert_allclose(np.asarray(out), np.asarray(ref), rtol=1e-5, atol=1e-6)
  assert stage_.needs == frozenset(needs)
  pad = np.asarray(out)[~VALID]
  assert np.all(pad == 0), "padding rows must get 0"


def test_every_row_has_a_stage():
  rows = ["remax", "vote", "task_normalized", "key_baseline", "role_ema_baseline", "hadw", "difficulty_weight",
          "gagar", "uniqueness", "canon", "segment", "outcome_conditioned_baseline", "tempo", "step_episode_mix",
          "sign_preserving_modulation"]
  assert set(rows) <= set(names_for("advantage"))
  assert "implicit_progress_reward" in names_for("shaping")  # a dense reward, after the forwards
  assert {"gdpo", "dara", "sa_mrpo", "gd2po", "composite"} <= set(names_for("multi_reward"))


def test_fixture_padding_row_matters():
  # a stage that forgot `valid` would give other advantages: the comparisons below can fail
  with_pad = A.grpo(R, GID, num_groups=G)[0]
  assert not np.allclose(np.asarray(with_pad)[:4], np.asarray(A.grpo(R, GID, valid=VALID, num_groups=G)[0])[:4])


def test_remax():
  s = stage("remax")
  adv, info = s.fn(D)
  _check(adv, A.remax(R, D.greedy_rewards, mask=MASK)[0], {"greedy_rewards"}, s)
  assert adv.shape == (G * N, T) and "returns" in info
  first = np.asarray(adv)[np.arange(G * N), np.argmax(MASK, 1)]
  np.testing.assert_allclose(first[VALID], (R - D.greedy_rewards)[VALID])


def test_vote():
  s = stage("vote", eps=0.1)
  adv, _ = s.fn(D)
  _check(adv, A.vote(R, D.answer_ids, GID, valid=VALID, num_groups=G, eps=0.1)[0], {"answer_ids"}, s)


def test_task_normalized_and_token_level_inputs():
  s = stage("task_normalized", center=False)
  data = _with_advantages()
  assert s.transform
  ref = A.task_normalized(data.advantages, D.task_id, valid=VALID, num_tasks=2, center=False)[0]
  _check(s.fn(data)[0], ref, {"advantages", "task_id"}, s)
  # token-level advantages constant within each row (an outcome estimator broadcast): the row's value
  tok = data.replace(advantages=data.advantages[:, None] * D.completion_mask)
  np.testing.assert_allclose(s.fn(tok)[0], ref, rtol=1e-5, atol=1e-6)
  # token-level advantages that vary within a row are refused
  with pytest.raises(ValueError, match="vary within a row"):
    s.fn(data.replace(advantages=np.asarray(A.gae(R, D.values, MASK)[0])))
  with pytest.raises(ValueError, match="advantages"):
    s.fn(D)  # no estimator before it


@pytest.mark.parametrize("key, ids, num, needs", [
    ("task_id", D.task_id, 2, {"task_id"}), ("answer_ids", D.answer_ids, None, {"answer_ids"}),
    ("group_id", GID, G, set())])
def test_key_baseline(key, ids, num, needs):
  s = stage("key_baseline") if key == "task_id" else stage("key_baseline", key=key)
  _check(s.fn(D)[0], A.key_baseline(R, ids, valid=VALID, num_keys=num)[0], needs, s)


def test_role_ema_baseline_binds_and_round_trips_state():
  s = stage("role_ema_baseline", decay=0.5)
  assert s.needs == {"task_id"}
  with pytest.raises(ValueError, match="bind"):
    s.init()
  with pytest.raises(ValueError, match="per task id, but this run's task defines none"):
    s.bind(RunFacts(num_prompts=G, group_size=N, max_new_tokens=5))
  s = s.bind(FACTS)
  est = A.role_ema_baseline(num_keys=2, decay=0.5)
  state, ref_state = s.init(), est.init()
  d2 = _step(1)
  for data in (D, d2, D):
    adv, _, state = s.fn(data, state)
    ref, _, ref_state = est.update(ref_state, data.rewards, data.task_id, valid=data.valid)
    np.testing.assert_allclose(adv, ref, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(state.baseline, ref_state.baseline)
    assert np.all(np.asarray(adv)[~data.valid] == 0)
  fresh = s.fn(D, s.init())[0]
  assert not np.allclose(adv, fresh)  # the state is used


def test_hadw_round_trips_state():
  s = stage("hadw", decay=0.5, strength=2.0)
  assert s.transform and s.needs == {"advantages"}
  est = A.hadw(decay=0.5, strength=2.0)
  state, ref_state = s.init(), est.init()
  for data in (_with_advantages(), _with_advantages(_step(1)).replace(valid=VALID)):
    adv, _, state = s.fn(data, state)
    ref, _, ref_state = est.update(ref_state, data.advantages, data.correct, GID, valid=VALID, num_groups=G)
    np.testing.assert_allclose(adv, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state.anchor, ref_state.anchor)
  assert float(state.anchor) != float(s.init().anchor)


def test_difficulty_weight():
  s = stage("difficulty_weight", strength=0.3, form="exp")
  data = _with_advantages()
  ref = A.difficulty_weight(data.advantages, D.correct, GID, strength=0.3, form="exp", valid=VALID, num_groups=G)[0]
  _check(s.fn(data)[0], ref, {"advantages"}, s)


def test_gagar():
  rng = np.random.default_rng(3)
  data = _with_advantages().replace(rewards=R + 0.1 * rng.random(G * N).astype(np.float32))  # graded scores
  s = stage("gagar", power=2.0)
  ref = A.gagar(data.advantages, D.correct > 0.5, data.rewards, GID, power=2.0, valid=VALID, num_groups=G)[0]
  _check(s.fn(data)[0], ref, {"advantages"}, s)
  assert not np.allclose(ref, data.advantages)  # the scores matter


def test_uniqueness():
  s = stage("uniqueness")
  data = _with_advantages()
  ref = A.uniqueness(data.advantages, D.correct > 0.5, D.answer_ids, GID, valid=VALID, num_groups=G)[0]
  _check(s.fn(data)[0], ref, {"advantages", "answer_ids"}, s)


def test_canon_metrics():
  s = stage("canon", inter_coef=1.0, intra_coef=0.5)
  ref = A.canon(R, D.lengths.astype(np.float32), GID, inter_coef=1.0, intra_coef=0.5, valid=VALID, num_groups=G)[0]
  _check(s.fn(D)[0], ref, set(), s)
  s = resolve("canon(inter_coef=1.0, intra_coef=0.5, metric='entropy')", "advantage")[0]
  cm = D.completion_mask
  entropy = (D.entropy_behavior * cm).sum(1) / cm.sum(1)
  ref = A.canon(R, entropy, GID, inter_coef=1.0, intra_coef=0.5, valid=VALID, num_groups=G)[0]
  _check(s.fn(D)[0], ref, {"entropy_behavior"}, s)


def test_segment():
  s = stage("segment", scale="none")
  ref = A.segment(D.reward_components, D.reward_segments, GID, mask=MASK, valid=VALID, num_groups=G, scale="none")[0]
  _check(s.fn(D)[0], ref, {"reward_components", "reward_segments"}, s)


def test_outcome_conditioned_baseline():
  s = stage("outcome_conditioned_baseline")
  assert np.all(np.asarray(s.fn(D)[0]) == 0)  # reward == verdict: every stratum is constant
  data = D.replace(rewards=R + 0.5 * D.reward_components[:, 1])
  ref = A.outcome_conditioned_baseline(data.rewards, (D.correct > 0.5).astype(np.int32), GID, valid=VALID,
                                       num_groups=G)[0]
  _check(s.fn(data)[0], ref, set(), s)
  s = stage("outcome_conditioned_baseline", outcome="answer_ids", scale="group")
  ref = A.outcome_conditioned_baseline(data.rewards, D.answer_ids, GID, valid=VALID, num_groups=G, scale="group")[0]
  _check(s.fn(data)[0], ref, {"answer_ids"}, s)


def test_tempo():
  s = stage("tempo", td_coef=0.5)
  adv, info = s.fn(D)
  _check(adv, A.tempo(R, D.tokens, MASK, GID, valid=VALID, num_groups=G, td_coef=0.5)[0], set(), s)
  assert float(info["num_branch_tokens"]) > 0


def test_step_episode_mix():
  s = stage("step_episode_mix", step_weight=0.3, gamma=0.9)
  ref = A.step_episode_mix(D.step_rewards, D.turn_ids, R, GID, mask=MASK, step_weight=0.3, gamma=0.9,
                           turn_valid=D.step_mask, valid=VALID, num_groups=G)[0]
  _check(s.fn(D)[0], ref, {"step_rewards", "turn_ids"}, s)


def test_sign_preserving_modulation():
  s = stage("sign_preserving_modulation", lam=0.7)
  assert s.transform
  data = _with_advantages()
  ref = A.sign_preserving_modulation(data.advantages, D.step_rewards, D.turn_ids, GID, mask=MASK, lam=0.7,
                                     turn_valid=D.step_mask, valid=VALID, num_groups=G)[0]
  _check(s.fn(data)[0], ref, {"advantages", "step_rewards", "turn_ids"}, s)


def test_implicit_progress_reward_is_a_dense_reward_added_to_the_scores():
  s = stage("implicit_progress_reward", beta=0.5)
  assert s.phase == "forward" and s.needs == {"logp_old", "logp_ref"}
  out, _ = s.fn(D)
  dense = np.asarray(A.implicit_progress_reward(D.logp_old, D.logp_ref, MASK, beta=0.5)[0])
  last = MASK.shape[1] - 1 - np.argmax(MASK[:, ::-1], 1)
  expected = dense.copy()
  expected[np.arange(G * N), last] += np.where(MASK.any(1), R, 0.0)  # the outcome reward on the last token
  np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-7)
  assert np.all(out[~VALID] == 0)
  tok = np.full(MASK.shape, 0.25, np.float32)  # token rewards written by an earlier stage are kept
  np.testing.assert_allclose(s.fn(D.replace(token_rewards=tok))[0], tok + dense, rtol=1e-6)


@pytest.mark.parametrize("name, kwargs", [
    ("gdpo", {"weights": [1.0, 0.5]}), ("dara", {"std_ddof": 1}),
    ("sa_mrpo", {"reward_min": 0.0, "reward_max": [1.0, 2.0]}), ("gd2po", {"weights": [2.0, 1.0], "query_weight": False})])
def test_multi_reward_to_advantages(name, kwargs):
  s = stage(name, **kwargs)
  assert isinstance(s, MultiReward) and s.produces == "advantages"
  ref = getattr(A, name)(D.reward_components, GID, valid=VALID, num_groups=G, **kwargs)[0]
  _check(s.fn(D)[0], ref, {"reward_components"}, s)
  Recipe(multi_reward=s, advantage="difficulty_weight")  # then only transforms


def test_composite():
  s = stage("composite", weights={"format_regex": 0.2})
  assert isinstance(s, MultiReward) and s.produces == "rewards" and s.needs == {"reward_components"}
  total, metrics = s.fn(D)
  np.testing.assert_allclose(total, D.reward_components[:, 0] + 0.2 * D.reward_components[:, 1], rtol=1e-6)
  assert metrics["mean/format_regex"] == pytest.approx(D.reward_components[VALID, 1].mean())
  np.testing.assert_allclose(stage("composite").fn(D)[0], D.reward_components.sum(1))
  with pytest.raises(ValueError, match="not rewards of the recipe"):
    stage("composite", weights={"math_answer": 1.0}).fn(D)


@pytest.mark.parametrize("name, kwargs, match", [
    ("qae", {"quantile": 2.0}, "quantile"), ("vote", {"scale": "tokens"}, "scale"),
    ("difficulty_weight", {"strength": 1.5}, "strength"), ("tempo", {"singleton": "x"}, "singleton"),
    ("step_episode_mix", {"step_weight": 2.0}, "step_weight"), ("sign_preserving_modulation", {"lam": 2.0}, "lam"),
    ("segment", {"std_ddof": 3}, "std_ddof"), ("outcome_conditioned_baseline", {"scale": "batch"}, "scale"),
    ("gdpo", {"eps": -1.0}, "eps"), ("sa_mrpo", {"reward_min": 1.0, "reward_max": 0.0}, "reward_max"),
    ("hadw", {"decay": 1.0}, "decay"), ("role_ema_baseline", {"decay": -0.1}, "decay"),
    ("canon", {"inter_coef": 1.0, "intra_coef": 1.0, "metric": "speed"}, "metric must be one of"),
    ("key_baseline", {"key": "prompt"}, "key must be one of"),
    ("composite", {"weights": {"exact_match": float("nan")}}, "finite"), ("composite", {"weights": [1.0]}, "mapping")])
def test_bad_hyper_parameters_raise_when_built(name, kwargs, match):
  with pytest.raises(ValueError, match=match):
    stage(name, **kwargs)


@pytest.mark.parametrize("name, listed", [
    ("vote", "[eps=1e-06, std_ddof=1, scale='group', form='glpo', bonus=1.0]"), ("canon", "[inter_coef, intra_coef, eps=1e-06"),
    ("key_baseline", "[key='task_id']"), ("role_ema_baseline", "[decay=0.95, update_first=False, init='zero']"),
    ("composite", "[weights=None]"), ("gdpo", "[weights=None, eps=1e-06")])
def test_unknown_argument_lists_the_valid_ones(name, listed):
  """Each with its default (a required one bare), as ``python -m rljax.catalog NAME`` shows them."""
  required = {"inter_coef": 1.0, "intra_coef": 1.0} if name == "canon" else {}
  with pytest.raises(ValueError, match="unknown argument 'valid'") as e:
    stage(name, valid=True, **required)  # loop-supplied, not a hyper-parameter
  assert listed in str(e.value)


def test_recipe_order_checks():
  r = Recipe(advantage="grpo, hadw(strength=0.5), task_normalized")
  assert [a.name for a in r.advantage] == ["grpo", "hadw", "task_normalized"]
  assert isinstance(r.advantage[1], Advantage) and r.advantage[1].init is not None
  with pytest.raises(ValueError, match="must start with an estimator"):
    Recipe(advantage="difficulty_weight")
  with pytest.raises(ValueError, match="only transforms"):
    Recipe(multi_reward="gdpo", advantage="vote")
