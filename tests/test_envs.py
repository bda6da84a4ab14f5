"""Built-in tasks: determinism, disjoint splits, verifiers against brute force."""
import itertools
from fractions import Fraction

import numpy as np
import pytest

from rljax.envs import ArithmeticTask, CountdownTask, get_task, parse_expression


def test_arithmetic_problems_are_deterministic_and_correct():
  task = ArithmeticTask(digits=3)
  a = task.problems("train", 50, seed=7)
  assert a == task.problems("train", 50, seed=7)
  assert a != task.problems("train", 50, seed=8)
  for p in a:
    x, y = p.meta["a"], p.meta["b"]
    assert p.prompt == f"{x:03d}"[::-1] + "+" + f"{y:03d}"[::-1] + "="
    assert p.answer == str(x + y)[::-1]
  big_endian = ArithmeticTask(digits=3, reverse_operands=False, reverse_answer=False)
  p = big_endian._make(37, 85)
  assert (p.prompt, p.answer) == ("037+085=", "122")
  assert ArithmeticTask(digits=3)._make(37, 85).prompt == "730+580="


def test_arithmetic_splits_are_disjoint():
  task = ArithmeticTask(digits=2)
  train = {p.prompt for p in task.problems("train", 3000, seed=0)}
  test = {p.prompt for p in task.problems("test", 200, seed=1)}
  assert train and test and not train & test


def test_no_carry_answer_by_hand():
  task = ArithmeticTask(digits=3)
  p = task._make(37, 85)  # 37+85 (prompt 730+580=): digit sums 12, 11, 0 -> no-carry 2,1,0 -> value 012 -> "21" reversed
  assert p.answer == "221"
  assert task.no_carry_answer(p) == "21"
  q = task._make(123, 456)  # no carries at all
  assert task.no_carry_answer(q) == q.answer


def test_sloppy_teacher_rate():
  task = ArithmeticTask(digits=3, sloppy_carry_prob=0.6)
  problems = [p for p in task.problems("train", 2000, seed=0) if task.no_carry_answer(p) != p.answer]
  rng = np.random.default_rng(0)
  wrong = np.mean([task.demonstration(p, rng) != p.answer for p in problems])
  assert abs(wrong - 0.6) < 0.05


def test_arithmetic_score_never_raises():
  task = ArithmeticTask()
  ps = task.problems("test", 3, seed=0)
  scores = task.score([ps[0].answer, " " + ps[1].answer + " ", None], ps)
  np.testing.assert_array_equal(scores, [1.0, 1.0, 0.0])
  with pytest.raises(ValueError, match="completions"):
    task.score(["1"], ps)


def test_countdown_parser_and_score():
  value, used = parse_expression("(3+4)*2-10/5")
  assert value == Fraction(12) and used == [3, 4, 2, 10, 5]
  for bad in ["", "3+", "(3", "3)", "1/0", "a+1", "3**2"]:
    with pytest.raises((ValueError, ZeroDivisionError)):
      parse_expression(bad)
  task = CountdownTask(num_numbers=3, max_number=10)
  ps = task.problems("train", 30, seed=0)
  assert task.score([p.answer for p in ps], ps).tolist() == [1.0] * 30
  p = ps[0]
  n = p.meta["numbers"]
  # Reusing a number more often than given is rejected.
  assert task.score([f"{n[0]}+{n[0]}+{n[0]}+{n[0]}"], [p])[0] in (0.0,)
  assert task.score(["((", "1/0", "", "9" * 50], [p] * 4).tolist() == [0.0] * 4


def test_countdown_solver_matches_brute_force():
  task = CountdownTask(num_numbers=3, max_number=6)
  for p in task.problems("test", 10, seed=2):
    sol = task.solve(p)
    assert sol is not None and task.score([sol], [p])[0] == 1.0
  # brute force: every target reachable with + over subsets is found
  p = task.problems("train", 1, seed=0)[0]
  nums = p.meta["numbers"]
  for k in range(1, 4):
    for sub in itertools.combinations(nums, k):
      q = type(p)(prompt="", answer="", meta={"numbers": nums, "target": sum(sub)})
      assert task.solve(q) is not None


def test_get_task_and_bad_input():
  assert isinstance(get_task("arithmetic", digits=2), ArithmeticTask)
  with pytest.raises(ValueError, match="task"):
    get_task("chess")
  with pytest.raises(ValueError, match="digits"):
    ArithmeticTask(digits=0)
  with pytest.raises(ValueError, match="split"):
    ArithmeticTask().problems("validation", 1, 0)
