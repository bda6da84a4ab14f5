"""configs/gemma3_sequences.py's task (no model): the prompt is benchmarks/gemma3_zero_shot.py's candidate I, word
for word (the zero-shot figure was measured on it), the splits are disjoint, the test split is fixed, no question
is an example's or has an example's answer, the reward reads the turn's first integer. Hand-written expectations."""
import importlib.util
import pathlib

import pytest

from rljax.configs.gemma3_sequences import EXAMPLES, FewShotSequences, make_env, terms

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_the_prompt_is_the_measured_candidate():
  spec = importlib.util.spec_from_file_location("gemma3_zero_shot", ROOT / "benchmarks" / "gemma3_zero_shot.py")
  bench = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(bench)
  _, prompts, answers, _, _ = bench.candidates()["I"]
  env = make_env()
  for prompt, answer in zip(prompts[:10], answers[:10]):
    first, second = (int(x) for x in prompt.rsplit("\n", 1)[1].split(", ")[:2])
    assert env.prompt(first, second - first) == prompt and str(first + 4 * (second - first)) == answer
  assert env.prompt(4, 9) == "2, 5, 8, 11, 14\n20, 27, 34, 41, 48\n9, 13, 17, 21, 25\n3, 11, 19, 27, 35\n4, 13, 22, 31,"
  assert terms(2, 3) == "2, 5, 8, 11,"


def test_splits_are_disjoint_and_the_test_split_fixed():
  env = make_env()
  test = env.problems("test", 1000, 0)
  train = env.problems("train", 2000, 3)
  key = lambda p: (p.meta["start"], p.meta["step"])
  assert 50 <= len(test) < 100 and len({key(p) for p in test}) == len(test)
  assert not {key(p) for p in test} & {key(p) for p in train}
  every = {(a, d) for a in range(1, 31) for d in range(2, 10)}
  never = {(2, 3), (20, 7), (9, 4), (3, 8)} | {(a, d) for a, d in every if a + 4 * d in (14, 48, 25, 35)}
  assert set(EXAMPLES) == {(2, 3), (20, 7), (9, 4), (3, 8)} and (5, 5) in never and (1, 6) in never
  assert {key(p) for p in test + train} == every - never  # 2000 draws reach every train question
  assert all(p.answer == str(p.meta["start"] + 4 * p.meta["step"]) for p in test + train)
  assert env.problems("test", 5, 9) == test[:5] and env.problems("train", 7, 1) == env.problems("train", 7, 1)
  assert env.problems("train", 7, 1) != env.problems("train", 7, 2)
  with pytest.raises(ValueError, match="split must be 'train' or 'test'"):
    env.problems("dev", 3, 0)
  with pytest.raises(ValueError, match="test_fraction"):
    FewShotSequences(test_fraction=1.0)
  with pytest.raises(ValueError, match="steps must be a tuple"):
    FewShotSequences(steps=(5, 2))


def test_the_reward_is_the_first_integer_of_the_turn():
  env = make_env()
  problem = env.problems("test", 1000, 0)[0]
  state, observation = env.reset(problem, 0)
  right = str(problem.meta["start"] + 4 * problem.meta["step"])
  assert observation == env.prompt(problem.meta["start"], problem.meta["step"]) and observation.endswith(",")
  for action, reward in ((f" {right}\n", 1.0), (f" {right}", 1.0), (f" {right}, 99", 1.0), (f" 7\n{right}", 0.0),
                         (f" {right}0", 0.0), ("", 0.0), (" forty", 0.0), (f" 1{right}", 0.0)):
    result = env.step(state, action)
    assert (result.reward, result.done, result.observation) == (reward, True, ""), action
  assert env.stop_strings == ("\n",) and env.max_turns == 1
