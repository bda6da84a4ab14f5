"""The step record (issue #34 item 3): ``StepData``'s field declarations are the one source of the needs
vocabulary, of what reaches the update and what a replay buffer stores, and of what ``take`` and
``concat_steps`` index; one function resolves a log-prob source."""
import types

import numpy as np
import pytest

from rljax import stages
from rljax.stages import StepData, probe_step
from rljax.train._rollout import concat_steps

# The vocabulary as it was written by hand before the fields declared it (the derived values must not move).
_NEEDS = {
    "logp_old": "proximal log-probs: the policy before this step's updates, recomputed on the rollout tokens",
    "entropy_old": "token entropies of the proximal policy (the same forward as logp_old)",
    "logp_behavior": "the sampler's log-probs of the sampled tokens (every rollout has them)",
    "entropy_behavior": "the sampler's token entropies (every rollout has them)",
    "logp_ref": "reference-policy log-probs (a forward of the frozen reference: the policy at the start of RL)",
    "entropy_ref": "token entropies of the reference (base) policy (the same forward as logp_ref)",
    "logp_teacher": "teacher log-probs (the teacher is the reference policy; TrainBatch.extras['logp_teacher'])",
    "values": "critic values V_t at sampling time (needs a critic in the recipe)",
    "greedy_rewards": "reward of a greedy rollout of each sample's prompt (ReMax's baseline)",
    "answer_ids": "per-sample answer keys: equal ids for equal extracted answers (task.answer_key)",
    "task_id": "per-sample task ids in [0, num_tasks) (task.task_id / task.num_tasks)",
    "reward_components": "[B, K] one column per reward function (a recipe with several rewards)",
    "token_rewards": "[B, T] token-level rewards (written by a token-level shaping stage)",
    "step_rewards": "[B, S] process (step) rewards with step_mask [B, S] (task.step_rewards(completions, problems))",
    "reward_segments": "[B, T] reward-segment index of each token: column k of reward_components scores the tokens "
                       "with id k (segmented tasks; TrainBatch.extras['reward_segments'], never the attention packing)",
    "turn_ids": "[B, T] turn ids (multi-turn episodes)",
    "turns": "per-sample list of the model's turns as text (multi-turn episodes; one turn when single-turn)",
    "advantages": "advantages written by an earlier estimator (advantage transforms)",
    "returns": "critic targets [B, T] written by the advantage estimator (gae)",
    "task_gradients": "Gram matrix <g_d, g_d'> [K, K] of the per-task gradients of the recipe's loss on the "
                      "step's batch, before the update (a TaskGradients; computed just before the update)",
}
_REPLAY_UNSTORED = ("answer_ids", "task_id", "reward_components", "token_rewards", "step_rewards", "reward_segments",
                   "turn_ids", "turns", "greedy_rewards", "values", "returns")
_BATCH_NEEDS = ("logp_old", "entropy_old", "logp_ref", "logp_behavior", "entropy_ref", "logp_teacher", "values",
               "reward_segments", "turn_ids", "task_id")
# preference_pairs left the vocabulary (issue #34 item 1): dpo's LossTerm builds its pairs itself (batch_extras)


def test_needs_vocabulary_is_unchanged():
  assert dict(stages.NEEDS) == _NEEDS
  assert sorted(stages.REPLAY_UNSTORED) == sorted(_REPLAY_UNSTORED)
  assert sorted(stages.BATCH_NEEDS) == sorted(_BATCH_NEEDS)
  assert len(set(stages.REPLAY_UNSTORED)) == len(stages.REPLAY_UNSTORED)
  assert len(set(stages.BATCH_NEEDS)) == len(stages.BATCH_NEEDS)
  assert isinstance(stages.REPLAY_UNSTORED, tuple) and isinstance(stages.BATCH_NEEDS, tuple)


def _step(b=4, key=None):
  data = probe_step()
  if b == 2:
    data = data.take([0, 2])
  return data.replace(key=key if key is not None else data.key,
                      extras={"replay_mask": np.arange(b) % 2 == 0, "scalar": 3.0, "wide": np.zeros(b + 1)})


def test_take_indexes_every_per_row_field():
  data = _step()
  rows = np.array([3, 1, 1])
  out = data.take(rows)
  assert out.batch_size == 3
  np.testing.assert_array_equal(out.tokens, data.tokens[rows])
  np.testing.assert_array_equal(out.logp_old, data.logp_old[rows])
  np.testing.assert_array_equal(out.reward_components, data.reward_components[rows])
  np.testing.assert_array_equal(out.step_mask, data.step_mask[rows])
  np.testing.assert_array_equal(out.advantages, data.advantages[rows])
  assert out.completions == tuple(data.completions[i] for i in rows)
  assert out.turns == tuple(data.turns[i] for i in rows)
  np.testing.assert_array_equal(out.extras["replay_mask"], data.extras["replay_mask"][rows])
  assert out.extras["scalar"] == 3.0 and out.extras["wide"].shape == (5,)  # not per-row: unchanged
  assert (out.num_groups, out.max_new_tokens, out.num_tasks, out.reward_names) == \
      (data.num_groups, data.max_new_tokens, data.num_tasks, data.reward_names)
  np.testing.assert_array_equal(out.entropy_ref, data.entropy_ref[rows])
  assert out.routing is None and out.task_gradients is None


def test_take_leaves_the_step_key_alone_when_the_batch_has_as_many_rows():
  data = _step(b=2, key=np.array([7, 9], np.uint32))  # a raw uint32[2] key of a 2-row batch is not per-row
  out = data.take([1, 1, 0])
  np.testing.assert_array_equal(out.key, [7, 9])
  np.testing.assert_array_equal(out.group_id, data.group_id[[1, 1, 0]])


def test_concat_steps_joins_every_per_row_field():
  a, b = _step(), _step().take([1, 2])
  b = b.replace(extras={k: np.asarray(v)[[1, 2]] if k == "replay_mask" else v for k, v in a.extras.items()})
  a = a.replace(extras={"replay_mask": a.extras["replay_mask"]})
  b = b.replace(extras={"replay_mask": b.extras["replay_mask"]}, greedy_rewards=None)
  out = concat_steps([a, b])
  assert out.batch_size == 6
  np.testing.assert_array_equal(out.tokens, np.concatenate([a.tokens, b.tokens]))
  np.testing.assert_array_equal(out.logp_ref, np.concatenate([a.logp_ref, b.logp_ref]))
  np.testing.assert_array_equal(out.extras["replay_mask"], np.concatenate([a.extras["replay_mask"],
                                                                           b.extras["replay_mask"]]))
  assert out.completions == a.completions + b.completions and out.problems == a.problems + b.problems
  assert out.turns == a.turns + b.turns
  assert out.greedy_rewards is None  # one part lacks it
  assert out.num_groups == a.num_groups and out.reward_names == a.reward_names
  assert concat_steps([a]) is a


def _batch(**fields):
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  from rljax.types import TrainBatch  # pylint: disable=import-outside-toplevel
  b, t = 2, 3
  base = dict(tokens=jnp.ones((b, t), jnp.int32), loss_mask=jnp.ones((b, t)), advantages=jnp.zeros((b, t)),
              group_id=jnp.zeros(b, jnp.int32))
  return TrainBatch(**{**base, **fields})


def test_one_function_resolves_a_log_prob_source():
  import pytest  # pylint: disable=import-outside-toplevel
  from rljax.objectives import _ratio_utils as U  # pylint: disable=import-outside-toplevel
  old, behavior, ref, hint = (np.full((2, 3), v, np.float32) for v in (-1.0, -2.0, -3.0, -4.0))
  batch = _batch(logp_old=old, logp_behavior=behavior, logp_ref=ref, extras={"logp_hint": hint})
  for source, want in ((None, old), ("proximal", old), ("logp_old", old), ("logp_behavior", behavior),
                       ("logp_ref", ref), ("logp_hint", hint), (lambda bb: bb.logp_ref, ref)):
    np.testing.assert_array_equal(U.get_logp(batch, source, (2, 3), name="t"), want)
  np.testing.assert_array_equal(U.get_logp(batch.replace(logp_old=None), None, (2, 3), name="t"), behavior)
  with pytest.raises(ValueError, match="t: TrainBatch needs logp_old or logp_behavior"):
    U.get_logp(batch.replace(logp_old=None, logp_behavior=None), "proximal", (2, 3), name="t")
  with pytest.raises(ValueError, match=r"batch.logp_behavior must have shape \(2, 4\)"):
    U.get_logp(batch.replace(logp_old=None), "proximal", (2, 4), name="t")
  assert [U.logp_need(s) for s in (None, "proximal", "logp_old", "logp_behavior", "logp_ref", "logp_hint",
                                   lambda bb: bb.logp_ref)] == \
      ["logp_old", "logp_old", "logp_old", "logp_behavior", "logp_ref", None, None]


def test_the_update_batch_copies_the_declared_fields():
  assert StepData.train_batch_fields() == {  # as train_batch listed them by hand (routing aside: rl.routing_replay)
      "logp_old": "logp_old", "logp_ref": "logp_ref", "entropy_old": "entropy_old", "values": "values_old",
      "returns": "returns", "turn_ids": "turn_ids", "task_id": "task_id", "segment_ids": "segment_ids"}


def test_a_loss_term_declares_the_inputs_it_builds_itself():
  """Issue #34 item 1: dpo's preference pairs are its LossTerm's ``batch_extras`` (the trainer names no technique);
  a recipe lists each term's once, nested and critic terms included."""
  from rljax import recipes, stages as S  # pylint: disable=import-outside-toplevel
  from rljax.objectives import preference_pairs  # pylint: disable=import-outside-toplevel
  dpo = recipes.stage("dpo", beta=0.2)
  assert dpo.batch_extras is preference_pairs and "preference_pairs" not in dpo.needs
  own = S.LossTerm(lambda out, batch: (out.logp, {}), name="own", batch_extras=lambda data: {"w": data.rewards})
  recipe = recipes.Recipe(advantage="grpo", loss=[dpo, own, recipes.stage("dpo")])
  assert recipe.batch_extras()[0] is preference_pairs and len(recipe.batch_extras()) == 2
  assert recipes.Recipe(advantage="grpo", loss=["ppo_clip"]).batch_extras() == ()
  with pytest.raises(ValueError, match="batch_extras"):
    S.LossTerm(lambda out, batch: (out.logp, {}), name="bad", batch_extras="pairs")
  # the pairs: each group's best and worst valid row (float64 by hand: group 0 rows 0..2, group 1 all equal)
  data = types.SimpleNamespace(batch_size=6, group_id=np.array([0, 0, 0, 1, 1, 1]),
                               valid=np.array([True, True, False, True, True, True]),
                               rewards=np.array([0.2, 0.9, 5.0, 1.0, 1.0, 1.0]))
  pairs = preference_pairs(data)
  np.testing.assert_array_equal(pairs["dpo_pair_id"], [0, 0, -1, -1, -1, -1])
  np.testing.assert_array_equal(pairs["dpo_chosen"], [False, True, False, False, False, False])
