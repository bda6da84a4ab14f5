"""The multi-turn protocol: the driver (stop strings, max turns, context budget, failures, batches) and the
episode -> training-row arrays, against hand-built expectations; the rows feed ``step_episode_mix``."""
import dataclasses

import numpy as np
import pytest

from rljax.envs import (EpisodeConfig, Segment, StepResult, advance, batch_summary, cut_at_stop, drop_oldest_turns,
                        encode_episode, stack_rows, start, step_batch, turn_arrays)


class CharTok:
  """One token per character (``ord``), BOS = 1: expectations can be written by hand."""
  bos_id, eos_id, pad_id = 1, 2, 0

  def encode(self, text, add_bos=False, add_eos=False):
    return [ord(c) for c in text]


@dataclasses.dataclass(frozen=True)
class Echo:
  """Counts turns; the episode ends after ``length`` turns (reward 1 on the last, 0.5 before); observation
  ``"o<k>"``; raises on the action ``"boom"`` (tests the failure path)."""
  length: int = 3

  def reset(self, problem, seed):
    if problem == "bad":
      raise RuntimeError("cannot reset")
    return 0, "P:"

  def step(self, state, action):
    if action == "boom":
      raise RuntimeError("env bug")
    k = state + 1
    done = k >= self.length
    return StepResult(k, "" if done else f"o{k}", 1.0 if done else 0.5, done, {"k": k})


def _play(env, actions, config, problem=None):
  ep = start(env, problem, 0)
  for a in actions:
    ep = advance(env, ep, a, config)
  return ep


def test_cut_at_stop_keeps_the_earliest_stop_string():
  assert cut_at_stop("ab</call>cd\nef", ("\n", "</call>")) == ("ab</call>", True)
  assert cut_at_stop("ab\ncd</call>", ("</call>", "\n")) == ("ab\n", True)
  assert cut_at_stop("abc", ("\n",)) == ("abc", False)
  assert cut_at_stop("abc", ()) == ("abc", False)


def test_episode_config_errors_name_the_field():
  with pytest.raises(ValueError, match="max_turns"):
    EpisodeConfig(max_turns=0)
  with pytest.raises(ValueError, match="stop_strings"):
    EpisodeConfig(stop_strings="\n")
  with pytest.raises(ValueError, match="context_budget"):
    EpisodeConfig(context_budget=0)
  with pytest.raises(ValueError, match="source"):
    Segment("x", "tool", 0)


def test_episode_records_turns_rewards_and_stop_strings():
  cfg = EpisodeConfig(stop_strings=("\n",))
  ep = _play(Echo(3), ["a\nIGNORED", "b", "c", "d"], cfg)
  assert ep.done and ep.finish == "env" and not ep.failed and ep.turns == 3
  assert ep.rewards == (0.5, 0.5, 1.0) and ep.episode_reward == 2.0
  assert [(s.text, s.source, s.turn) for s in ep.segments] == [
      ("P:", "env", -1), ("a\n", "model", 0), ("o1", "env", 0), ("b", "model", 1), ("o2", "env", 1),
      ("c", "model", 2)]
  assert ep.context == "P:a\no1bo2c"


def test_max_turns_ends_the_episode():
  ep = _play(Echo(10), ["a", "b", "c"], EpisodeConfig(max_turns=2))
  assert ep.done and ep.finish == "max_turns" and ep.turns == 2 and ep.rewards == (0.5, 0.5)


def test_batch_finishes_at_different_turns_and_survives_a_failing_env():
  env, cfg = Echo(2), EpisodeConfig()
  eps = [start(env, None, 0), start(env, None, 1), start(env, "bad", 2)]
  assert eps[2].failed and eps[2].done and "cannot reset" in eps[2].error
  eps = step_batch(env, eps, ["x", "boom", None], cfg)
  assert not eps[0].done and eps[1].failed and "env bug" in eps[1].error and eps[1].finish == "failed"
  assert eps[1].segments[-1] == Segment("boom", "model", 0)  # the failing action stays in the record
  before = eps
  eps = step_batch(env, eps, ["y", None, None], cfg)
  assert eps[0].done and eps[0].finish == "env" and eps[0].turns == 2
  assert eps[1] is before[1] and eps[2] is before[2]  # finished episodes are returned unchanged
  s = batch_summary(eps)
  assert (s["episodes"], s["done"], s["failed"], s["finish_env"], s["finish_failed"]) == (3, 3, 2, 1, 2)
  with pytest.raises(ValueError, match="differ in length"):
    step_batch(env, eps, ["x"], cfg)


def test_context_budget_starts_a_window_with_the_recent_turns():
  # "P:" (2) + turn0 "aa"+"o1" (4) + turn1 "bb"+"o2" (4) = 10 > 8: keep the prompt and turn 1 only
  cfg = EpisodeConfig(max_turns=5, context_budget=8)
  ep = _play(Echo(5), ["aa", "bb"], cfg)
  assert len(ep.windows) == 2 and not ep.done
  assert [(s.text, s.turn, s.trainable) for s in ep.windows[1]] == [
      ("P:", -1, False), ("bb", 1, False), ("o2", 1, False)]
  ep = advance(Echo(5), ep, "c", cfg)  # "P:bbo2" + "c" + "o3" = 9 > 8: turn 2 alone fits
  assert len(ep.windows) == 3 and ep.context == "P:co3"
  rows = encode_episode(ep, CharTok(), add_bos=False)
  assert [r.window for r in rows] == [0, 1]  # window 2 holds no model turn yet: no row
  # each model turn is trained in exactly one row: the window (context) it was written in
  trained = sorted(int(t) for r in rows for t in r.turn_ids[r.loss_mask])
  assert trained == [0, 0, 1, 1, 2]
  #                                          P   :   b   b   o   2   c   o   3
  np.testing.assert_array_equal(rows[1].loss_mask, [0, 0, 0, 0, 0, 0, 1, 0, 0])
  np.testing.assert_array_equal(rows[1].turn_ids, [-1, -1, 1, 1, 1, 1, 2, 2, 2])


def test_context_budget_too_small_ends_the_episode():
  ep = _play(Echo(5), ["aaaa", "b"], EpisodeConfig(context_budget=5))
  assert ep.done and ep.finish == "context" and ep.turns == 1
  assert drop_oldest_turns(ep.segments, 3, len) == ()


def test_encode_episode_hand_built():
  ep = _play(Echo(2), ["ab", "c"], EpisodeConfig())
  (row,) = encode_episode(ep, CharTok())
  #          BOS  P   :   a   b   o   1   c
  np.testing.assert_array_equal(row.tokens, [1, 80, 58, 97, 98, 111, 49, 99])
  np.testing.assert_array_equal(row.loss_mask, [0, 0, 0, 1, 1, 0, 0, 1])
  np.testing.assert_array_equal(row.turn_ids, [-1, -1, -1, 0, 0, 0, 0, 1])
  np.testing.assert_array_equal(row.segment_ids, np.ones(8))
  # the sampler's own ids replace the re-encoding of a model turn
  (row,) = encode_episode(ep, CharTok(), add_bos=False, model_ids={0: [7]})
  np.testing.assert_array_equal(row.tokens, [80, 58, 7, 111, 49, 99])
  np.testing.assert_array_equal(row.loss_mask, [0, 0, 1, 0, 0, 1])
  out = stack_rows([row, row], 8, pad_id=0)
  np.testing.assert_array_equal(out["tokens"][1], [80, 58, 7, 111, 49, 99, 0, 0])
  np.testing.assert_array_equal(out["turn_ids"][0], [-1, -1, 0, 0, 0, 1, -1, -1])
  np.testing.assert_array_equal(out["segment_ids"][0], [1, 1, 1, 1, 1, 1, 0, 0])
  np.testing.assert_array_equal(out["loss_mask"][0], [0, 0, 1, 0, 0, 1, 0, 0])
  with pytest.raises(ValueError, match="more than length"):
    stack_rows([row], 5)
  with pytest.raises(ValueError, match="bos_id"):
    encode_episode(ep, type("NoBos", (), {"bos_id": -1, "encode": CharTok.encode})(), add_bos=True)


def test_turn_arrays_and_train_batch_fields():
  from rljax.types import TrainBatch
  eps = [_play(Echo(2), ["a", "b"], EpisodeConfig()), _play(Echo(3), ["a"], EpisodeConfig())]
  t = turn_arrays(eps, 3)
  np.testing.assert_array_equal(t["turn_rewards"], [[0.5, 1.0, 0.0], [0.5, 0.0, 0.0]])
  np.testing.assert_array_equal(t["turn_valid"], [[1, 1, 0], [1, 0, 0]])
  np.testing.assert_array_equal(t["episode_rewards"], [1.5, 0.5])
  rows = stack_rows([encode_episode(e, CharTok())[0] for e in eps], 12)
  batch = TrainBatch.create(tokens=rows["tokens"], loss_mask=rows["loss_mask"],
                            advantages=np.zeros((2, 12), np.float32), group_id=np.zeros(2, np.int32),
                            segment_ids=rows["segment_ids"], turn_ids=rows["turn_ids"])
  assert batch.turn_ids.shape == (2, 12)
  with pytest.raises(ValueError, match="max_turns"):
    turn_arrays(eps, 1)


def test_turn_ids_route_per_turn_advantages_in_step_episode_mix():
  """step_episode_mix gathers the per-turn column by turn id: with gamma=0 and step_weight=1, each model token
  gets its own turn's group-standardised reward. Row 0 wins turn 0 and loses turn 1 against row 1, so its turn-0
  tokens must be positive and its turn-1 tokens negative (1-based ids would swap them)."""
  from rljax.advantages import step_episode_mix

  @dataclasses.dataclass(frozen=True)
  class Scripted:
    rewards: tuple

    def reset(self, problem, seed):
      return 0, "P"

    def step(self, k, action):
      return StepResult(k + 1, "o", self.rewards[k], k + 1 == len(self.rewards), {})

  eps = [_play(Scripted((1.0, 0.0)), ["aa", "bb"], EpisodeConfig()),
         _play(Scripted((0.0, 1.0)), ["aa", "bb"], EpisodeConfig())]
  rows = stack_rows([encode_episode(e, CharTok())[0] for e in eps], 10)
  t = turn_arrays(eps, 2)
  adv, _ = step_episode_mix(t["turn_rewards"], rows["turn_ids"], t["episode_rewards"], np.zeros(2, np.int32),
                            mask=rows["loss_mask"], step_weight=1.0, gamma=0.0, turn_valid=t["turn_valid"])
  adv = np.asarray(adv)
  m, tid = rows["loss_mask"], rows["turn_ids"]
  z = 1 / np.sqrt(2)  # (1 - 0.5) / std([1, 0], ddof=1)
  np.testing.assert_allclose(adv[0][m[0] & (tid[0] == 0)], [z, z], rtol=1e-4)
  np.testing.assert_allclose(adv[0][m[0] & (tid[0] == 1)], [-z, -z], rtol=1e-4)
  np.testing.assert_allclose(adv[1][m[1]], [-z, -z, z, z], rtol=1e-4)
  assert np.all(adv[~m] == 0)
