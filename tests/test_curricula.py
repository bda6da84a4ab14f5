"""DUMP and TAC (``rljax.filters._curriculum`` and their prompt-filter stages) against independent references:
a hand-derived UCB arm sequence, a list-based float64 re-implementation of the authors' estimator, brute-force
draws, hand-derived cosines, and the per-task gradients of a two-parameter model by hand."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from rljax import recipes
from rljax.filters import _curriculum as C
from rljax.stages import PromptData, PromptFilter, RunFacts, StepData, TaskGradients
from rljax.train import HookedLoss, LossHooks


def _ref_probs(windows, counts, c, tau, transfer=None, lam=0.0):
  """The authors' compute_sampling_weights, re-written with Python floats: mu = mean |window| (0 if empty),
  score = mu + c sqrt(2 ln(N + 1) / (n + 1)), N = max(1, sum n); softmax(score / tau)."""
  total = max(1, sum(counts))
  scores = []
  for j, (w, n) in enumerate(zip(windows, counts)):
    mu = sum(abs(x) for x in w) / len(w) if w else 0.0
    scores.append(mu + c * math.sqrt(2 * math.log(total + 1) / (n + 1)) + (lam * transfer[j] if lam else 0.0))
  m = max(scores)
  e = [math.exp((s - m) / tau) for s in scores]
  return [x / sum(e) for x in e], scores


def test_ucb_argmax_arm_sequence_hand_derived():
  """A two-armed toy bandit, one pull a step, |A| = 0.5 from arm 0 and 0.1 from arm 1, temperature 0 (argmax).
  Scores by hand (bonus sqrt(2 ln(N + 1) / (n + 1)), N = max(1, n_0 + n_1)):
  step 0: n = (0, 0): 1.1774 = 1.1774, tie -> arm 0;        step 1: n = (1, 0): 0.5 + 0.8326 > 1.1774 -> 0;
  step 2: n = (2, 0): 0.5 + 0.8558 < 1.4823 -> 1;           step 3: n = (2, 1): 0.5 + 0.9613 > 0.1 + 1.1774 -> 0;
  step 4: n = (3, 1): 0.5 + 0.8971 > 0.1 + 1.2686 -> 0;     step 5: n = (4, 1): 0.5 + 0.8466 < 0.1 + 1.3386 -> 1."""
  state = C.curriculum_init(2, window=10)
  pools = [np.array([0]), np.array([1])]
  seq = []
  for t in range(6):
    sc = C.curriculum_scores(state)
    if t == 2:
      np.testing.assert_allclose(sc["score"], [0.5 + math.sqrt(2 * math.log(3) / 3), math.sqrt(2 * math.log(3))])
    p = C.arm_probs(sc["score"], np.ones(2, bool), 0.0)
    index, arms = C.draw_prompts(jax.random.PRNGKey(t), p, pools, 1)
    assert index[0] == arms[0]
    seq.append(int(arms[0]))
    state = C.curriculum_observe(state, arms, np.array([[0.5, -0.1][int(arms[0])]]))
  assert seq == [0, 0, 1, 0, 0, 1]
  np.testing.assert_array_equal(state.count, [4, 2])


def test_scores_and_probs_match_a_list_based_float64_reference():
  """Random observations over 25 steps (window 5, so the ring wraps), the authors' defaults c = 1, tau = 0.1."""
  rng = np.random.default_rng(0)
  k, w = 4, 5
  state = C.curriculum_init(k, window=w)
  windows, counts = [[] for _ in range(k)], [0] * k
  for _ in range(25):
    b = int(rng.integers(1, 9))
    arms = rng.integers(0, k - 1, b)  # arm 3 is never observed: learnability 0, the largest bonus
    adv = rng.normal(size=b)
    valid = rng.random(b) < 0.8
    state = C.curriculum_observe(state, arms, adv, valid)
    for a, x, v in zip(arms, adv, valid):
      if v:
        windows[a] = (windows[a] + [x])[-w:]
        counts[a] += 1
    sc = C.curriculum_scores(state)
    p = C.arm_probs(sc["score"], np.ones(k, bool), 0.1)
    ref_p, ref_s = _ref_probs(windows, counts, 1.0, 0.1)
    np.testing.assert_allclose(sc["score"], ref_s, rtol=1e-6)  # the window holds float32 |A|
    np.testing.assert_allclose(p, ref_p, rtol=1e-4, atol=1e-9)
  np.testing.assert_array_equal(state.count, counts)
  assert state.count[3] == 0 and C.learnability(state)[3] == 0.0


def test_arm_probs_masks_empty_arms_and_argmax_ties():
  p = C.arm_probs(np.array([1.0, 5.0, 1.0]), np.array([True, False, True]), 0.1)
  np.testing.assert_allclose(p, [0.5, 0.0, 0.5])
  np.testing.assert_array_equal(C.arm_probs(np.array([2.0, 2.0, 1.0]), np.ones(3, bool), 0.0), [1, 0, 0])
  with pytest.raises(ValueError, match="no arm"):
    C.arm_probs(np.ones(2), np.zeros(2, bool), 0.1)


def test_draw_prompts_frequencies_pools_and_key():
  pools = [np.array([0, 3, 5]), np.array([1]), np.array([2, 4]), np.array([], np.int64)]
  p = np.array([0.5, 0.2, 0.3, 0.0])
  index, arms = C.draw_prompts(jax.random.PRNGKey(1), p, pools, 20_000)
  for a, i in zip(arms[:200], index[:200]):
    assert i in pools[a]
  freq = np.bincount(arms, minlength=4) / arms.size
  np.testing.assert_allclose(freq, p, atol=0.015)  # 4.5 binomial standard deviations at n = 20,000
  within = np.bincount(index[arms == 0], minlength=6)[[0, 3, 5]] / (arms == 0).sum()
  np.testing.assert_allclose(within, [1 / 3] * 3, atol=0.02)  # uniform within the arm
  again, _ = C.draw_prompts(jax.random.PRNGKey(1), p, pools, 20_000)
  np.testing.assert_array_equal(index, again)  # the key fixes the draw
  with pytest.raises(ValueError, match="no prompts"):
    C.draw_prompts(jax.random.PRNGKey(0), np.array([0.5, 0.5]), [np.array([0]), np.array([], np.int64)], 3)


def test_observe_window_keeps_the_last_w_values_in_a_wrapping_ring():
  state = C.curriculum_init(2, window=3)
  state = C.curriculum_observe(state, np.array([0, 0, 1, 0, 0]), np.array([1.0, -2.0, 7.0, 3.0, -4.0]))
  np.testing.assert_allclose(C.learnability(state), [(2 + 3 + 4) / 3, 7.0])  # 1.0 dropped out
  state = C.curriculum_observe(state, np.array([0]), np.array([10.0]))
  np.testing.assert_allclose(C.learnability(state), [(3 + 4 + 10) / 3, 7.0])
  np.testing.assert_array_equal(state.count, [5, 1])
  with pytest.raises(ValueError, match="arm ids"):
    C.curriculum_observe(state, np.array([2]), np.array([1.0]))


def test_transfer_hand_derived_cosines_absent_tasks_and_decay():
  """g_0 = (1, 0), g_1 = (1, 1), g_2 = (0, 1), g_3 absent: cos(0,1) = cos(1,2) = 1/sqrt(2), cos(0,2) = 0, so
  T^step = (1/(2 sqrt 2), 1/sqrt 2, 1/(2 sqrt 2)); task 3 keeps its value."""
  g = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.0, 0.0]])
  state = C.curriculum_init(4)._replace(transfer=np.array([0.0, 0.0, 0.2, 0.4], np.float32))
  new, step = C.transfer_observe(state, g @ g.T, np.array([True, True, True, False]), decay=0.5)
  r = 1 / math.sqrt(2)
  np.testing.assert_allclose(step[:3], [r / 2, r, r / 2])
  assert np.isnan(step[3])
  np.testing.assert_allclose(new.transfer, [r / 4, r / 2, 0.1 + r / 4, 0.4], rtol=1e-6)
  # a task present with a zero gradient counts as absent; a lone task has no others: unchanged
  _, step = C.transfer_observe(state, g @ g.T, np.ones(4, bool), decay=0.5)
  assert np.isnan(step[3])
  lone, step = C.transfer_observe(state, g @ g.T, np.array([True, False, False, False]), decay=0.5)
  np.testing.assert_array_equal(lone.transfer, state.transfer)


def test_tac_scores_permute_with_the_tasks():
  """Relabelling the tasks permutes every per-task score (the spec's invariant)."""
  rng = np.random.default_rng(3)
  k = 4
  state = C.curriculum_observe(C.curriculum_init(k, 6), rng.integers(0, k, 30), rng.normal(size=30))
  vecs = rng.normal(size=(k, 5))
  state, _ = C.transfer_observe(state, vecs @ vecs.T, np.ones(k, bool))
  perm = np.array([2, 0, 3, 1])
  relabelled = C.CurriculumState(*(np.asarray(x)[perm] for x in state))  # new task i is old task perm[i]
  a = C.curriculum_scores(state, transfer_weight=0.7)["score"]
  b = C.curriculum_scores(relabelled, transfer_weight=0.7)["score"]
  np.testing.assert_allclose(b, a[perm])
  s2, _ = C.transfer_observe(relabelled, (vecs @ vecs.T)[np.ix_(perm, perm)], np.ones(k, bool))
  s1, _ = C.transfer_observe(state, vecs @ vecs.T, np.ones(k, bool))
  np.testing.assert_allclose(s2.transfer, s1.transfer[perm], rtol=1e-6)


def test_tac_without_transfer_is_dump():
  rng = np.random.default_rng(4)
  state = C.curriculum_observe(C.curriculum_init(3, 8), rng.integers(0, 3, 12), rng.normal(size=12))
  state = state._replace(transfer=np.array([0.9, -0.3, 0.1], np.float32))
  np.testing.assert_array_equal(C.curriculum_scores(state, transfer_weight=0.0)["score"],
                                C.curriculum_scores(state)["score"])
  ref_p, _ = _ref_probs([[]] * 3, [0] * 3, 1.0, 0.1)
  np.testing.assert_allclose(C.arm_probs(C.curriculum_scores(C.curriculum_init(3))["score"], np.ones(3, bool), 0.1),
                             ref_p)
  lam = C.curriculum_scores(state, transfer_weight=2.0)["score"] - C.curriculum_scores(state)["score"]
  np.testing.assert_allclose(lam, 2.0 * state.transfer, rtol=1e-6)


# ----------------------------------------------------------------------------- the stages

TASK_IDS = (0, 1, 1, 0, 2, 1, 0, 0, 2, 1)  # 10 dataset prompts, 3 tasks
FACTS = RunFacts(num_prompts=3, group_size=2, max_new_tokens=3, num_dataset_prompts=10, num_tasks=3,
                 task_ids=TASK_IDS)


def _data(advantages, task_id, valid=None) -> StepData:
  b = len(task_id)
  cm = np.zeros((b, 4), bool)
  cm[:, 1:] = True
  cm[0, 3] = False
  return StepData(tokens=np.ones((b, 4), np.int32), prompt_mask=~cm, completion_mask=cm,
                  group_id=np.arange(b) // 2, num_groups=b // 2, valid=np.ones(b, bool) if valid is None else valid,
                  lengths=cm.sum(1), completions=("",) * b, problems=(None,) * b, prompt_index=np.arange(b),
                  rewards=np.zeros(b, np.float32), correct=np.zeros(b, np.float32),
                  logp_behavior=np.zeros((b, 4), np.float32), advantages=np.asarray(advantages, np.float32),
                  task_id=np.asarray(task_id, np.int32), num_tasks=3)


def _prompts(n=3):
  return PromptData((None,) * n, np.arange(n), 10)


def test_dump_stage_draws_from_the_arms_and_learns_from_token_advantages():
  stage = recipes.stage("dump")
  assert isinstance(stage, PromptFilter) and stage.select is None and stage.observe_phase == "advantages"
  with pytest.raises(ValueError, match="bind"):
    stage.draw(stage.init(10), _prompts(), jax.random.PRNGKey(0))
  unbound = stage.bind(RunFacts(num_prompts=3, group_size=2, max_new_tokens=3))  # a task without task ids
  with pytest.raises(ValueError, match="task ids"):
    unbound.draw(unbound.init(10), _prompts(), jax.random.PRNGKey(0))
  bound = stage.bind(FACTS)
  state = bound.init(10)
  key = jax.random.PRNGKey(5)
  index, state1, m = bound.draw(state, _prompts(), key)
  p = C.arm_probs(C.curriculum_scores(state)["score"], np.ones(3, bool), 0.1)
  ref_index, ref_arms = C.draw_prompts(key, p, C.arm_pools(np.array(TASK_IDS), 3), 3)
  np.testing.assert_array_equal(index, ref_index)
  assert [TASK_IDS[i] for i in index] == ref_arms.tolist()
  assert sum(m[f"chosen_{j}"] for j in range(3)) == 3 and m["skipped"] == 0.0
  np.testing.assert_allclose([m[f"prob_{j}"] for j in range(3)], [1 / 3] * 3)
  # token advantages [B, T]: a row's A is the mean over its completion tokens (row 0 has two)
  adv = np.zeros((4, 4), np.float32)
  adv[0, 1:3] = [1.0, -3.0]
  adv[1, 1:] = 0.5
  adv[2, 1:] = -0.25
  adv[3, 1:] = 2.0
  state2, m = bound.observe(state1, _data(adv, [0, 0, 2, 1], valid=np.array([True, True, True, False])))
  np.testing.assert_allclose(C.learnability(state2), [(1.0 + 0.5) / 2, 0.0, 0.25])
  np.testing.assert_array_equal(state2.count, [2, 0, 1])  # the invalid row is not observed
  assert m["observed_rows"] == 3.0


def test_tac_stage_reads_the_task_gradients():
  bound = recipes.stage("tac", transfer_weight=2.0, decay=0.0).bind(FACTS)
  g = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
  data = _data(np.array([1.0, -1.0, 0.5, -0.5]), [0, 0, 1, 1]).replace(
      task_gradients=TaskGradients(g @ g.T, np.array([True, True, False])))
  state, m = bound.observe(bound.init(10), data)
  np.testing.assert_allclose(state.transfer, [1 / math.sqrt(2), 1 / math.sqrt(2), 0.0], rtol=1e-6)
  assert m["step_transfer_0"] == pytest.approx(1 / math.sqrt(2)) and "step_transfer_2" not in m
  _, _, m = bound.draw(state, _prompts(), jax.random.PRNGKey(0))
  assert m["transfer_0"] == pytest.approx(1 / math.sqrt(2), rel=1e-6)
  assert m["score_0"] == pytest.approx(m["learnability_0"] + m["bonus_0"] + 2.0 * m["transfer_0"])
  with pytest.raises(ValueError, match="decay"):
    recipes.stage("tac", decay=1.0)
  with pytest.raises(ValueError, match="temperature"):
    recipes.stage("dump", temperature=-1.0)


class _Lin(nnx.Module):
  def __init__(self):
    self.w = nnx.Param(jnp.array([0.5, -1.0], jnp.float32))


class _SquareLoss(HookedLoss):
  """loss = sum_i mask_i (w . x_i)^2 / denominator, denominator = the number of trained rows."""

  def hooks(self):
    return LossHooks(denominator=self.denominator)

  def denominator(self, batch, hparams):  # pylint: disable=unused-argument
    return jnp.maximum(jnp.sum(batch.loss_mask[:, 0]), 1.0)

  def __call__(self, model, batch, hparams, denominator):  # pylint: disable=unused-argument
    x = batch.advantages  # [B, 2]: the row's features (any [B, T] field of the batch)
    per_row = (x @ model.w[...]) ** 2
    return jnp.sum(per_row * batch.loss_mask[:, 0]) / denominator, {}


def test_task_gradient_gram_against_hand_gradients():
  """d/dw of (w.x)^2 is 2 (w.x) x: with w = (0.5, -1), rows x = (1, 0), (0, 1) of task 0 and (2, 2) of task 1,
  g_0 = [2*0.5*(1, 0) + 2*(-1)*(0, 1)] / 2 = (0.5, -1), g_1 = 2*(-1)*(2, 2) / 1 = (-4, -4); task 2 absent."""
  from rljax.train._task_grads import task_gradient_gram  # pylint: disable=import-outside-toplevel
  from rljax.types import TrainBatch  # pylint: disable=import-outside-toplevel
  graphdef, params, state = nnx.split(_Lin(), nnx.Param, ...)
  x = jnp.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0], [5.0, 5.0]])
  mask = jnp.array([[True, True], [True, True], [True, True], [False, False]])
  batch = TrainBatch(tokens=jnp.ones((4, 2), jnp.int32), loss_mask=mask, advantages=x,
                     group_id=jnp.arange(4), rewards=jnp.zeros(4), logp_behavior=jnp.zeros((4, 2)),
                     task_id=jnp.array([0, 0, 1, 2], jnp.int32))
  gram, present = task_gradient_gram(graphdef, _SquareLoss(), 3)(params, state, batch, {})
  g = np.array([[0.5, -1.0], [-4.0, -4.0], [0.0, 0.0]])
  np.testing.assert_allclose(np.asarray(gram), g @ g.T, rtol=1e-6)
  np.testing.assert_array_equal(np.asarray(present), [True, True, False])  # row 3 of task 2 trains no token


# ----------------------------------------------------------------------------- in the loop

DENSE = "gaussian_reward(sigma=5.0, parse='arithmetic')"
LOOP = ["task.digits=1", "sft.steps=20", "sft.optim.learning_rate=0.01", "rl.num_prompts=4", "rl.group_size=4",
        "eval.num_problems=4", "eval.batch_size=4", "eval.num_samples=1", "eval.pass_k=1", f"rl.rewards={DENSE}",
        "progress=false"]


def _loop_rows(out):
  import os  # pylint: disable=import-outside-toplevel
  from rljax.train import read_jsonl  # pylint: disable=import-outside-toplevel
  return [r for r in read_jsonl(os.path.join(str(out), "metrics.jsonl")) if r["stage"] == "rl" and r["step"] > 0]


def _curriculum_state(out, cfg, step):
  from rljax.train._advantage import initial_stage_states  # pylint: disable=import-outside-toplevel
  from rljax.train._checkpoint import Checkpointer  # pylint: disable=import-outside-toplevel
  from rljax.train._experiment import build_experiment  # pylint: disable=import-outside-toplevel
  from rljax.train._recipes import recipe_from_config  # pylint: disable=import-outside-toplevel
  from rljax.train._startup import bound_recipe  # pylint: disable=import-outside-toplevel
  exp = build_experiment(cfg)
  template = {"stages": initial_stage_states(bound_recipe(exp, recipe_from_config(cfg.rl))[0], len(exp.train_problems))}
  ckpt = Checkpointer(str(out / "checkpoints" / "rl"))
  tree, _, _ = ckpt.restore(template, step=step, parts=True)
  ckpt.close()
  return tree["stages"]["prompt_filters"]["dump"]


def test_collector_rolls_out_the_drawn_prompts():
  """The prompts phase's draw (``rljax.train._mechanics.curriculum_draw``, in the collector's context): the curriculum's
  indices replace the loader's candidates (problems looked up in the training set), its metrics are logged under
  its name, and a draw out of range is refused."""
  from types import SimpleNamespace  # pylint: disable=import-outside-toplevel
  from rljax.train._mechanics import curriculum_draw  # pylint: disable=import-outside-toplevel
  from rljax.train._rows import unchecked  # pylint: disable=import-outside-toplevel
  problems = [f"p{i}" for i in range(10)]
  stage = recipes.stage("dump").bind(FACTS)
  ctx = SimpleNamespace(call=unchecked, num_dataset_prompts=10, train_problems=problems)
  r = SimpleNamespace(step=0, metrics={}, prompt_states={"greso": None, "dump": stage.init(10)})
  filters = (recipes.stage("greso").bind(FACTS), stage)
  key = jax.random.PRNGKey(2)
  got, index = curriculum_draw(ctx, r, filters, key, ["x", "y", "z"], np.array([7, 8, 9]))
  expected, _, _ = stage.draw(stage.init(10), _prompts(), jax.random.fold_in(key, 41))  # dump is filter 1
  np.testing.assert_array_equal(index, expected)
  assert got == [problems[i] for i in expected]
  assert r.metrics["dump/replaced"] == 3.0 and "dump/prob_0" in r.metrics
  bad = PromptFilter(lambda n: (), draw=lambda st, pr, k: (np.array([0, 1, 10]), st, {}), name="bad")
  r.prompt_states = {"bad": ()}
  with pytest.raises(ValueError, match="dataset indices"):
    curriculum_draw(ctx, r, (bad,), key, ["x", "y", "z"], np.array([7, 8, 9]))


def test_the_loop_observes_each_prompt_filter_in_its_phase():
  """The observe phases (``observe_rewards``, ``observe_advantages``) run the observe of the prompt filters their
  selectors pick: the stages of that phase only."""
  from types import SimpleNamespace  # pylint: disable=import-outside-toplevel
  from rljax.recipes import Recipe  # pylint: disable=import-outside-toplevel
  from rljax.train import _phases as P  # pylint: disable=import-outside-toplevel
  from rljax.train._rows import unchecked  # pylint: disable=import-outside-toplevel
  seen = []
  mk = lambda name, phase: PromptFilter(lambda n: 0, select=lambda st, pr, k: (None, st, {}), name=name,
                                        observe=lambda st, d: (st + 1, {"n": seen.append(name) or st + 1}),
                                        observe_phase=phase)
  selected = P.select_all(Recipe(prompt_filters=(mk("early", "rewards"), mk("late", "advantages"))))
  ctx = SimpleNamespace(call=unchecked, states={"prompt_filters": {"early": 0, "late": 0}})
  run = SimpleNamespace(data=None, metrics={})
  rows = {p.name: p for p in P.PIPELINE}
  rows["observe_rewards"].fn(ctx, run, selected["observe_rewards"])
  assert seen == ["early"] and run.metrics == {"early/n": 1.0}
  rows["observe_advantages"].fn(ctx, run, selected["observe_advantages"])
  assert seen == ["early", "late"] and ctx.states["prompt_filters"] == {"early": 1, "late": 1}


def test_curriculum_state_checkpoints_bit_for_bit(tmp_path):
  """The stage state (numpy arrays of fixed shape) round-trips through the run's checkpointer."""
  from rljax.train._checkpoint import Checkpointer  # pylint: disable=import-outside-toplevel
  state = C.curriculum_observe(C.curriculum_init(3, 4), np.array([0, 2, 2, 0, 0, 0, 0]), np.arange(7) - 3.5)
  state = state._replace(transfer=np.array([0.25, -0.5, 0.0], np.float64))  # the state is float64 (issue #51)
  ckpt = Checkpointer(str(tmp_path / "ckpt"))
  ckpt.save(1, {"stages": {"prompt_filters": {"dump": state}}}, {"step": 1}, parts=True)
  tree, _, _ = ckpt.restore({"stages": {"prompt_filters": {"dump": C.curriculum_init(3, 4)}}}, step=1, parts=True)
  ckpt.close()
  for name, a, b in zip(C.CurriculumState._fields, state, tree["stages"]["prompt_filters"]["dump"]):
    assert np.asarray(b).dtype == a.dtype and np.asarray(b).tobytes() == a.tobytes(), name


@pytest.mark.slow  # two runs (about 40 s alone on 2 cores); the two tests above guard its parts quickly
def test_dump_in_the_loop_rolls_out_what_it_drew_and_resumes_bit_for_bit(tmp_path):
  """The rows DUMP observes come from the prompts it drew (each step's samples_j grows by chosen_j x group_size:
  the task ids are recomputed from the rolled-out problems), and its state is checkpointed: a run resumed from
  step 2 saves the same state at step 3, bit for bit, and logs the same metrics."""
  from rljax.train import apply_overrides, tiny_config, train  # pylint: disable=import-outside-toplevel
  import shutil  # pylint: disable=import-outside-toplevel
  out = tmp_path / "run"
  cfg = lambda: apply_overrides(tiny_config(str(out)), LOOP + ["rl.steps=3", "checkpoint.every=2",
                                                               "rl.prompt_filters=dump(window=8)"])
  train(cfg())
  rows = _loop_rows(out)
  k = 2  # 1-digit sums: 0 or 1 carry
  for before, after in zip(rows, rows[1:]):
    for j in range(k):
      assert after[f"dump/samples_{j}"] == before[f"dump/samples_{j}"] + 4 * before[f"dump/chosen_{j}"]
  assert sum(rows[0][f"dump/chosen_{j}"] for j in range(k)) == 4 and rows[0]["dump/observed_rows"] == 16
  saved = _curriculum_state(out, cfg(), 3)
  assert saved.count.sum() == 48 and np.all(np.isfinite(C.learnability(saved)))
  shutil.rmtree(out / "checkpoints" / "rl" / "3")
  train(cfg(), resume=True)
  again = _loop_rows(out)
  keys = [key for key in rows[-1] if key.startswith("dump/")]
  assert keys and all(again[-1][key] == rows[-1][key] for key in keys)
  for name, a, b in zip(C.CurriculumState._fields, saved, _curriculum_state(out, cfg(), 3)):
    assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), name


def test_start_up_refuses_two_curricula_and_binds_the_task_ids():
  """``check_recipe`` on a stand-in experiment (the arithmetic task's problems): two drawing stages are refused;
  one is bound to every training prompt's task id (the carry count)."""
  from types import SimpleNamespace  # pylint: disable=import-outside-toplevel
  from rljax.envs import ArithmeticTask  # pylint: disable=import-outside-toplevel
  from rljax.recipes import Recipe  # pylint: disable=import-outside-toplevel
  from rljax.train._startup import bound_recipe, check_recipe  # pylint: disable=import-outside-toplevel
  task = ArithmeticTask(digits=2)
  rl = SimpleNamespace(routing_replay=False, rollout_ahead=False, async_staleness=None, group_size=2, num_prompts=3,
                       max_new_tokens=3, temperature=1.0)
  exp = SimpleNamespace(cfg=SimpleNamespace(rl=rl), task=task, train_problems=task.problems("train", 12, 0),
                        model=SimpleNamespace(cfg=SimpleNamespace(is_moe=False)), seq_len=8)
  with pytest.raises(ValueError, match="at most one prompt filter may draw"):
    check_recipe(exp, Recipe(prompt_filters="dump, tac"))
  with pytest.raises(ValueError, match=r"\['dump'\] learn from the trained rows.*'positive_replay'"):
    check_recipe(exp, Recipe(prompt_filters="dump", replay="positive_replay"))
  _, facts = bound_recipe(exp, Recipe(prompt_filters="dump"))
  assert facts.task_ids == tuple(task.task_id(p) for p in exp.train_problems) and facts.num_tasks == 3
  assert bound_recipe(exp, Recipe(prompt_filters="greso"))[1].task_ids is None  # only when a stage needs them
