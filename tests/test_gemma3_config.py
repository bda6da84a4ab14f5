"""configs/gemma3_multiplication.py's task (no model): the prompt is benchmarks/gemma3_zero_shot.py's candidate E,
word for word (the zero-shot figure was measured on it), the splits are disjoint by unordered pair, the test
split is fixed and neither asks an example's pair, the reward reads the turn's first integer. Hand-written
expectations."""
import importlib.util
import pathlib

import pytest

from rljax.configs.gemma3_multiplication import EXAMPLES, FewShotMultiplication, make_env

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_the_prompt_is_the_measured_candidate():
  spec = importlib.util.spec_from_file_location("gemma3_zero_shot", ROOT / "benchmarks" / "gemma3_zero_shot.py")
  bench = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(bench)
  _, prompts, answers, _, _ = bench.candidates()["E"]
  env = make_env()
  for prompt, answer in zip(prompts[:10], answers[:10]):
    a, b = (int(x) for x in prompt.rsplit("What is ", 1)[1].split("?")[0].split(" * "))
    assert env.prompt(a, b) == prompt and str(a * b) == answer
  assert env.prompt(6, 8).endswith("A: 45\n\nQ: What is 6 * 8?\nA:")
  assert env.prompt(6, 8).startswith("Q: What is 3 * 4?")


def test_splits_are_disjoint_by_unordered_pair_and_the_test_split_fixed():
  env = make_env()
  test = env.problems("test", 1000, 0)
  train = env.problems("train", 500, 3)
  pair = lambda p: frozenset((p.meta["a"], p.meta["b"]))
  assert 10 < len(test) < 64 and len({(p.meta["a"], p.meta["b"]) for p in test}) == len(test)
  assert not {pair(p) for p in test} & {pair(p) for p in train}
  shown = {frozenset(pair) for pair in EXAMPLES}  # an example's answer is in the prompt: never asked
  assert {(p.meta["a"], p.meta["b"]) for p in test + train} == {
      (a, b) for a in range(2, 10) for b in range(2, 10) if frozenset((a, b)) not in shown}
  assert env.problems("test", 5, 9) == test[:5] and env.problems("train", 7, 1) == env.problems("train", 7, 1)
  assert env.problems("train", 7, 1) != env.problems("train", 7, 2)
  with pytest.raises(ValueError, match="split must be 'train' or 'test'"):
    env.problems("dev", 3, 0)
  with pytest.raises(ValueError, match="test_fraction"):
    FewShotMultiplication(test_fraction=1.0)


def test_the_reward_is_the_first_integer_of_the_turn():
  env = make_env()
  problem = [p for p in env.problems("test", 1000, 0) if p.meta["a"] * p.meta["b"] >= 10][0]
  state, observation = env.reset(problem, 0)
  right = str(problem.meta["a"] * problem.meta["b"])
  assert observation == env.prompt(problem.meta["a"], problem.meta["b"])
  for action, reward in ((f" {right}\n", 1.0), (f" {right}", 1.0), (f" {right}.", 1.0), (f" 7\n{right}", 0.0),
                         (f" {right}0", 0.0), ("", 0.0), (" twelve", 0.0), (f" {right} or 3", 1.0)):
    result = env.step(state, action)
    assert (result.reward, result.done, result.observation) == (reward, True, ""), action
  assert env.stop_strings == ("\n",) and env.max_turns == 1
