"""Hinted and off-context rollouts (issue #21 item 4: Guide, OC-GRPO, LTE, ADHint): the rules against
hand-derived values and brute force, and, through the real collector on the tiny model, that a hinted row is
the *unhinted* prompt followed by a completion sampled under the hinted prompt, so the training forward is
under the unhinted context while ``logp_behavior`` is the hinted sampler's.

(Every row trains for two steps in tests/test_recipes_every_technique_data.py.)
"""
import jax
import numpy as np
import pytest
from flax import nnx

from rljax import hints as H
from rljax.envs import Problem
from rljax.stages import StepData

# ----------------------------------------------------------------------------- the rules


def test_hint_groups_all_failed_and_hard_groups_hand_derived():
  correct = np.array([0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0], np.float32)
  valid = np.array([1] * 12 + [0] * 4, bool)  # the last group has no valid row
  np.testing.assert_array_equal(H.hint_groups(correct, valid, 4), [True, False, False, False])
  # success rates 0, 1/4, 1/2, (none): max_success=0.25 takes the first two, 0.5 the first three
  np.testing.assert_array_equal(H.hint_groups(correct, valid, 4, max_success=0.25), [True, True, False, False])
  np.testing.assert_array_equal(H.hint_groups(correct, valid, 4, max_success=0.5), [True, True, True, False])
  # an invalid success does not count: group 2 with its successes masked out is all-failed
  valid2 = valid.copy()
  valid2[[10, 11]] = False
  assert H.hint_groups(correct, valid2, 4)[2]


def test_answer_prefix_mistakes_hint_and_adhint_fraction_hand_derived():
  assert H.answer_prefix("1234", 1.0) == "1234"
  assert H.answer_prefix("1234", 0.5) == "12"
  assert H.answer_prefix("1234", 0.3) == "12"  # ceil(1.2) = 2
  assert H.answer_prefix("1234", 0.25) == "1"
  assert H.answer_prefix("7", 0.1) == "7"
  assert H.mistakes_hint(["5", "", "6", "5", "8", "9"], max_mistakes=3) == "5, 6, 8"
  assert H.mistakes_hint(["5", "5"], max_mistakes=3) == "5"
  assert H.mistakes_hint(["", ""], max_mistakes=3) == ""
  assert H.adhint_fraction(0.0, min_fraction=0.25, max_fraction=1.0) == 1.0
  assert H.adhint_fraction(0.5, min_fraction=0.25, max_fraction=1.0) == 0.625
  assert H.adhint_fraction(0.25, min_fraction=0.0, max_fraction=0.8) == pytest.approx(0.6)
  assert H.hinted_prompt("Hint: {hint}\n{prompt}", "3+4=", "7") == "Hint: 7\n3+4="


def test_replaced_rows_matches_brute_force():
  rng = np.random.default_rng(0)
  g = 4
  for _ in range(200):
    p = int(rng.integers(1, 4))
    correct = rng.integers(0, 2, p * g).astype(np.float32)
    valid = rng.random(p * g) < 0.8
    take = rng.integers(0, g + 2, p)
    rows, hinted = H.replaced_rows(correct, valid, g, take)
    want_rows, want_hinted = [], []
    for q in range(p):  # brute force: walk the group backwards, take failed valid rows until take[q]
      picked = [r for r in reversed(range(q * g, (q + 1) * g)) if valid[r] and correct[r] <= 0.5][:take[q]]
      want_rows += sorted(picked)
      want_hinted += [q * g + j for j in range(len(picked))]
    assert rows.tolist() == want_rows and hinted.tolist() == want_hinted


def test_unhinted_rows_moves_each_completion_behind_its_unhinted_prompt():
  # unhinted rows: width 7, prompts left-padded to 3 positions; hinted rows: width 9, prompts of 5 positions
  tokens = np.array([[0, 1, 2, 9, 9, 9, 9], [1, 3, 4, 9, 9, 9, 9]], np.int32)
  pm = np.array([[0, 1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0, 0]], bool)
  h_tokens = np.array([[0, 5, 5, 1, 2, 7, 8, 0, 0], [5, 5, 1, 3, 4, 6, 0, 0, 0]], np.int32)
  h_cm = np.array([[0, 0, 0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 0, 1, 0, 0, 0]], bool)
  h_lp = np.where(h_cm, -np.arange(1, 10, dtype=np.float32), 0.0)
  h_ent = np.where(h_cm, np.arange(1, 10, dtype=np.float32) / 10, 0.0)
  tok, out_pm, cm, lp, ent = H.unhinted_rows(tokens, pm, h_tokens, h_cm, h_lp, h_ent, pad_id=0)
  np.testing.assert_array_equal(tok, [[0, 1, 2, 7, 8, 0, 0], [1, 3, 4, 6, 0, 0, 0]])
  np.testing.assert_array_equal(out_pm, pm)
  np.testing.assert_array_equal(cm, [[0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 1, 0, 0, 0]])
  np.testing.assert_array_equal(lp, [[0, 0, 0, -6, -7, 0, 0], [0, 0, 0, -6, 0, 0, 0]])
  np.testing.assert_allclose(ent, [[0, 0, 0, .6, .7, 0, 0], [0, 0, 0, .6, 0, 0, 0]])
  with pytest.raises(ValueError, match="does not fit"):
    H.unhinted_rows(tokens[:, :4], pm[:, :4], h_tokens, h_cm, h_lp)


def _round(correct, completions, answers, g=4):
  b = len(correct)
  return StepData(
      tokens=np.zeros((b, 3), np.int32), prompt_mask=np.zeros((b, 3), bool), completion_mask=np.ones((b, 3), bool),
      group_id=np.repeat(np.arange(b // g, dtype=np.int32), g), num_groups=b // g, valid=np.ones(b, bool),
      lengths=np.full(b, 3, np.int32), completions=tuple(completions),
      problems=tuple(Problem(f"q{i // g}=", answers[i // g]) for i in range(b)),
      prompt_index=np.repeat(np.arange(b // g), g), rewards=np.asarray(correct, np.float32),
      correct=np.asarray(correct, np.float32), logp_behavior=np.zeros((b, 3), np.float32), max_new_tokens=3, step=0,
      key=jax.random.PRNGKey(0))


def test_each_stage_hints_the_groups_its_rule_names_with_the_hint_of_its_rule():
  data = _round([0, 0, 0, 0, 1, 0, 0, 0], [" 5", "6", "5 ", "", "42", "1", "2", "3"], ["1234", "42"])
  key = str.strip
  prompts, take, m = H.guide(fraction=0.5, template="[{hint}]{prompt}").hints(data, 4, key)
  assert prompts == ["[12]q0=", None] and take.tolist() == [4, 0] and m["hinted_prompts"] == 1.0
  prompts, take, _ = H.oc_grpo().hints(data, 4, key)  # half the failed rows (ceil), prefix of half the answer
  assert prompts == ["Hint: the solution starts with 12\nq0=", None] and take.tolist() == [2, 0]
  prompts, take, _ = H.lte(max_mistakes=2, template="{hint}|{prompt}").hints(data, 4, key)
  assert prompts == ["5, 6|q0=", None] and take.tolist() == [4, 0]
  # ADHint: group 1 has p = 1/4 <= 0.5: ratio 0.25 + 0.75 * 0.75 = 0.8125 -> ceil(1.625) = 2 characters of "42";
  # group 0 (p = 0): ratio 1; take = ceil(0.5 * #failed): 2 and ceil(1.5) = 2
  prompts, take, _ = H.adhint(template="{hint}|{prompt}").hints(data, 4, key)
  assert prompts == ["1234|q0=", "42|q1="] and take.tolist() == [2, 2]
  # LTE without a wrong answer to quote gives no hint
  empty = _round([0, 0, 0, 0], ["", " ", "", ""], ["7"])
  assert H.lte().hints(empty, 4, key)[0] == [None]


@pytest.mark.parametrize("factory,kwargs,match", [
    (H.guide, {"fraction": 0.0}, "fraction"), (H.guide, {"rows": 1.5}, "rows"),
    (H.oc_grpo, {"template": "no fields"}, "template"), (H.lte, {"max_mistakes": 0}, "max_mistakes"),
    (H.adhint, {"min_fraction": 0.9, "max_fraction": 0.5}, "min_fraction"),
    (H.adhint, {"max_success": 1.0}, "max_success"), (H.guide, {"logp_old": "x"}, "logp_old"),
])
def test_bad_hyper_parameters_name_the_argument(factory, kwargs, match):
  with pytest.raises(ValueError, match=match):
    factory(**kwargs)


def test_the_stage_counts_hinted_groups_and_marks_them_for_the_losses():
  data = _round([0, 0, 1, 1, 0, 0, 0, 0], ["a"] * 8, ["1", "2"])
  data = data.replace(extras={"hint_mask": np.array([1, 1, 0, 0, 0, 0, 0, 1], bool)})
  stage = H.guide()
  out, state, m = stage.fn(data, stage.init())
  assert state.tolist() == [2] and m["hinted_rows"] == 3.0 and m["hinted_success"] == 0.0
  np.testing.assert_array_equal(out.extras["replay_mask"], data.extras["hint_mask"])
  _, state, _ = stage.fn(data, state)
  assert state.tolist() == [4]


# ----------------------------------------------------------------------------- the collector, end to end


@pytest.fixture(scope="module")
def hinted_round(tmp_path_factory):
  """One collected batch of the untrained tiny model (1-digit sums: nearly every group fails) with ``guide``."""
  from rljax.recipes import Recipe  # pylint: disable=import-outside-toplevel
  from rljax.train import apply_overrides, tiny_config  # pylint: disable=import-outside-toplevel
  from rljax.train._experiment import build_experiment  # pylint: disable=import-outside-toplevel
  from rljax.train._rollout import Collector  # pylint: disable=import-outside-toplevel
  cfg = apply_overrides(tiny_config(str(tmp_path_factory.mktemp("hints"))),
                        ["task.digits=1", "rl.num_prompts=4", "rl.group_size=4", "progress=false"])
  exp = build_experiment(cfg)
  recipe = Recipe(replay=H.guide(rows=0.5, template="{hint}={prompt}"))
  problems = list(enumerate(exp.train_problems))
  loader = iter([[(p, i) for i, p in problems[:4]]])
  graphdef, params, rest = nnx.split(exp.model, nnx.Param, ...)
  collect = Collector(exp, recipe, loader, graphdef, prompt_rows={0: (0, 4)}, base_key=jax.random.PRNGKey(3),
                      num_dataset_prompts=len(exp.train_problems), needs=recipe.needs)
  out = collect(params, rest, 0, 1.0, {})
  return exp, graphdef, params, rest, out


def test_hinted_rows_train_under_the_unhinted_prompt_with_the_hinted_samplers_logp(hinted_round):
  from rljax.train._inputs import forward_fn  # pylint: disable=import-outside-toplevel
  exp, graphdef, params, rest, (data, _, metrics, _) = hinted_round
  hinted = np.asarray(data.extras["replay_mask"], bool)  # the collector marks the spliced rows
  assert hinted.any() and metrics["guide/hinted_prompts"] >= 1
  # the stage's fn (the replay phase) names them hint_mask
  _, _, m = H.guide().fn(data, H.guide().init())
  assert m["hinted_rows"] == float((hinted & data.valid).sum())
  forward = forward_fn(graphdef)
  logp_train = np.asarray(forward(params, rest, data.tokens)[0])  # what StepInputs and the update compute
  codec, cm = exp.codec, data.completion_mask
  # independent rows built from ids: row i unhinted = prompt ids + completion (left-padded as the sampler pads,
  # the batch's shape); row i hinted = hinted prompt ids + completion (right-padded: causal, so the padding does
  # not change the completion's log-probs; wider than the batch's rows, which fit the longest unhinted prompt)
  rows, h_start = np.zeros_like(data.tokens), {}
  h_rows = np.zeros((data.tokens.shape[0], data.tokens.shape[1] + 8), data.tokens.dtype)
  for i in np.flatnonzero(hinted):
    problem = data.problems[i]
    assert problem.prompt == exp.train_problems[int(data.prompt_index[i])].prompt  # the original problem
    prompt = codec.prompt_ids(problem)
    assert data.tokens[i][data.prompt_mask[i]].tolist() == prompt  # the trained row: the unhinted prompt ids ...
    completion = data.tokens[i][cm[i]]
    start = int(np.flatnonzero(cm[i])[0])
    assert start == int(np.flatnonzero(data.prompt_mask[i]).max()) + 1  # ... then the completion
    rows[i, start - len(prompt):start] = prompt
    rows[i, start:start + completion.size] = completion
    h_prompt = codec.prompt_ids(f"{problem.answer}={problem.prompt}")
    h_rows[i, :len(h_prompt)] = h_prompt
    h_rows[i, len(h_prompt):len(h_prompt) + completion.size] = completion
    h_start[i] = len(h_prompt)
  logp_rows = np.asarray(forward(params, rest, rows)[0])
  logp_hinted = np.asarray(forward(params, rest, h_rows)[0])
  for i, hs in h_start.items():
    n = int(cm[i].sum())
    # the training log-probs are those of the unhinted row
    np.testing.assert_allclose(logp_rows[i][cm[i]], logp_train[i][cm[i]], rtol=1e-5, atol=1e-5)
    # the behaviour log-probs are those of the hinted row
    np.testing.assert_allclose(data.logp_behavior[i][cm[i]], logp_hinted[i, hs:hs + n], rtol=1e-4, atol=1e-4)
    # ... and the two contexts give different log-probs: the ratio exp(logp - logp_behavior) is not 1
    assert np.max(np.abs(logp_train[i][cm[i]] - data.logp_behavior[i][cm[i]])) > 1e-3
  fresh = data.valid & ~hinted
  # fresh rows: the sampler's log-probs are the forward of their own (unhinted) rows
  np.testing.assert_allclose(data.logp_behavior[fresh][cm[fresh]], logp_train[fresh][cm[fresh]],
                             rtol=1e-4, atol=1e-4)


def test_hinted_rows_replace_half_of_each_failed_group_and_are_scored_against_the_original_answer(hinted_round):
  exp, _, _, _, (data, _, metrics, _) = hinted_round
  hinted = np.asarray(data.extras["replay_mask"], bool)
  for g in range(4):
    rows = np.arange(4 * g, 4 * g + 4)
    if hinted[rows].any():
      assert hinted[rows].tolist() == [False, False, True, True]  # ceil(0.5 * 4) = 2: the group's last rows
  scores = exp.task.score(list(data.completions), list(data.problems))
  np.testing.assert_array_equal(data.correct, np.asarray(scores, np.float32))
  assert metrics["guide/too_long_prompts"] == 0.0


def test_a_hinted_prompt_longer_than_the_largest_bucket_is_counted_not_sampled(hinted_round):
  from rljax.recipes import Recipe  # pylint: disable=import-outside-toplevel
  from rljax.train._rollout import Collector  # pylint: disable=import-outside-toplevel
  exp, graphdef, params, rest, _ = hinted_round
  recipe = Recipe(replay=H.guide(template="{hint}={hint}={hint}={prompt}"))
  loader = iter([[(p, i) for i, p in enumerate(exp.train_problems[:4])]])
  collect = Collector(exp, recipe, loader, graphdef, prompt_rows={0: (0, 4)}, base_key=jax.random.PRNGKey(3),
                      num_dataset_prompts=len(exp.train_problems), needs=recipe.needs)
  data, _, metrics, _ = collect(params, rest, 0, 1.0, {})
  assert metrics["guide/too_long_prompts"] == metrics["guide/hint_candidates"] > 0
  assert not data.extras["replay_mask"].any()


def test_a_replay_stage_declares_hints_and_splice_together():
  from rljax.stages import Replay  # pylint: disable=import-outside-toplevel
  hints = H.guide().hints
  with pytest.raises(ValueError, match="hints and splice go together"):
    Replay(lambda: 0, lambda d, s: (d, s, {}), name="mine", hints=hints)
  with pytest.raises(ValueError, match="hints and splice go together"):
    Replay(lambda: 0, lambda d, s: (d, s, {}), name="mine", splice=H.splice_hinted)
  Replay(lambda: 0, lambda d, s: (d, s, {}), name="mine", hints=hints, splice=H.splice_hinted)


def test_the_stage_state_survives_a_checkpointer_round_trip_bit_for_bit(tmp_path):
  from rljax.train._checkpoint import Checkpointer  # pylint: disable=import-outside-toplevel
  stage = H.lte()
  data = _round([0, 0, 1, 1], ["a"] * 4, ["1"]).replace(extras={"hint_mask": np.array([1, 1, 0, 0], bool)})
  _, state, _ = stage.fn(data, stage.init())
  ckpt = Checkpointer(str(tmp_path / "ckpt"))
  ckpt.save(1, {"stages": {"replay": {stage.name: state}}}, {"step": 1}, parts=True)
  ckpt.close()
  restored, _, step = Checkpointer(str(tmp_path / "ckpt")).restore({"stages": {"replay": {stage.name: stage.init()}}},
                                                                   parts=True)
  got = np.asarray(restored["stages"]["replay"][stage.name])
  assert step == 1 and got.dtype == state.dtype and got.tobytes() == state.tobytes() and got.tolist() == [1]
