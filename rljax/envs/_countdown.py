"""Countdown: combine the given numbers with + - * / to reach a target.

Prompt ``"3,7,12>19="``; a correct completion is an expression such as
``12+7`` that uses each given number at most once (``use_all=True``: exactly
once, as in TinyZero) and evaluates exactly (rational arithmetic) to the
target. Completions are parsed by a small recursive-descent parser — never
``eval`` — and anything malformed scores 0.
"""
from __future__ import annotations

import dataclasses
import itertools
from fractions import Fraction
from typing import Optional, Sequence

import numpy as np

from rljax.envs._task import Problem, sample_split

_OPS = "+-*/"


def parse_expression(text: str) -> tuple[Fraction, list[int]]:
  """Parses ``+ - * /`` and parentheses over non-negative integers.

  Returns:
    (value, the integer literals used, in order).
  Raises:
    ValueError on any syntax error or division by zero.
  """
  s = text.replace(" ", "")
  pos = 0
  used: list[int] = []

  def peek():
    return s[pos] if pos < len(s) else ""

  def expr():
    nonlocal pos
    v = term()
    while peek() in ("+", "-") and peek():
      op = s[pos]; pos += 1
      r = term()
      v = v + r if op == "+" else v - r
    return v

  def term():
    nonlocal pos
    v = atom()
    while peek() in ("*", "/") and peek():
      op = s[pos]; pos += 1
      r = atom()
      if op == "/" and r == 0:
        raise ValueError("division by zero")
      v = v * r if op == "*" else v / r
    return v

  def atom():
    nonlocal pos
    if peek() == "(":
      pos += 1
      v = expr()
      if peek() != ")":
        raise ValueError("missing )")
      pos += 1
      return v
    start = pos
    while peek().isdigit():
      pos += 1
    if start == pos or pos - start > 6:
      raise ValueError(f"expected a number at {start}")
    n = int(s[start:pos])
    used.append(n)
    return Fraction(n)

  if not s:
    raise ValueError("empty expression")
  value = expr()
  if pos != len(s):
    raise ValueError(f"unexpected {s[pos]!r} at {pos}")
  return value, used


def _solutions(numbers: Sequence[int], use_all: bool):
  """Yields (expression, value) over ordered subsets and operator trees (small inputs)."""
  sizes = [len(numbers)] if use_all else range(1, len(numbers) + 1)

  def build(items):
    if len(items) == 1:
      yield str(items[0]), Fraction(items[0])
      return
    for split in range(1, len(items)):
      for le, lv in build(items[:split]):
        for re_, rv in build(items[split:]):
          yield f"({le}+{re_})", lv + rv
          yield f"({le}-{re_})", lv - rv
          yield f"({le}*{re_})", lv * rv
          if rv != 0:
            yield f"({le}/{re_})", lv / rv

  for k in sizes:
    for perm in itertools.permutations(numbers, k):
      yield from build(list(perm))


def _strip_outer(expr: str) -> str:
  if expr.startswith("(") and expr.endswith(")"):
    depth = 0
    for i, ch in enumerate(expr):
      depth += ch == "("
      depth -= ch == ")"
      if depth == 0 and i < len(expr) - 1:
        return expr
    return expr[1:-1]
  return expr


@dataclasses.dataclass(frozen=True)
class CountdownTask:
  """Reach ``target`` from ``num_numbers`` numbers in ``[1, max_number]``.

  Attributes:
    num_numbers: how many numbers are given (2..4).
    max_number: largest given number.
    use_all: every number must be used exactly once.
    test_fraction: share of the problem space reserved for the test split.
  """
  num_numbers: int = 3
  max_number: int = 20
  use_all: bool = False
  test_fraction: float = 0.1
  name: str = "countdown"

  def __post_init__(self):
    if not 2 <= self.num_numbers <= 4:
      raise ValueError(f"num_numbers must be in [2, 4], got {self.num_numbers}")
    if not 2 <= self.max_number <= 999:
      raise ValueError(f"max_number must be in [2, 999], got {self.max_number}")

  def problems(self, split: str, num: int, seed: int) -> list[Problem]:
    """Problems whose target is made by a random expression over the numbers."""

    def draw(rng):
      nums = [int(x) for x in rng.integers(1, self.max_number + 1, size=self.num_numbers)]
      k = self.num_numbers if self.use_all else int(rng.integers(2, self.num_numbers + 1))
      chosen = [nums[i] for i in rng.permutation(self.num_numbers)[:k]]
      expr = str(chosen[0])
      for n in chosen[1:]:
        op = _OPS[int(rng.integers(3))]  # + - * keep targets integral
        expr = f"({expr}{op}{n})"
      value, _ = parse_expression(expr)
      target = int(value)
      if target <= 0:
        target = int(sum(chosen))
        expr = "+".join(str(n) for n in chosen)
      prompt = ",".join(str(n) for n in nums) + f">{target}="
      return prompt, Problem(prompt=prompt, answer=_strip_outer(expr),
                             meta={"numbers": nums, "target": target})

    return sample_split(draw, split, num, seed, self.test_fraction)

  def solve(self, problem: Problem) -> Optional[str]:
    """A shortest known solution by enumeration (None if there is none)."""
    target = Fraction(problem.meta["target"])
    for expr, value in _solutions(problem.meta["numbers"], self.use_all):
      if value == target:
        return _strip_outer(expr)
    return None

  def demonstration(self, problem: Problem, rng: np.random.Generator) -> str:
    del rng
    return problem.answer

  def _correct(self, completion: str, problem: Problem) -> bool:
    try:
      value, used = parse_expression(completion.strip())
    except (ValueError, ZeroDivisionError, RecursionError):
      return False
    pool = list(problem.meta["numbers"])
    for n in used:
      if n not in pool:
        return False
      pool.remove(n)
    if self.use_all and pool:
      return False
    return value == problem.meta["target"]

  def score(self, completions: Sequence[str], problems: Sequence[Problem]) -> np.ndarray:
    """1.0 for a valid expression reaching the target, else 0 (never raises)."""
    if len(completions) != len(problems):
      raise ValueError(f"completions ({len(completions)}) and problems ({len(problems)}) differ in length")
    return np.array([float(isinstance(c, str) and self._correct(c, p))
                     for c, p in zip(completions, problems)], np.float32)

  def corpus(self) -> list[str]:
    return ["0123456789+-*/()>=,"]
