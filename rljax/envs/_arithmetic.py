"""Multi-digit addition with every number written lowest digit first.

37 + 85 = 122 is posed as ``730+580=`` with answer ``221``. Writing the answer
lowest digit first puts each carry next to the digits that cause it (see
shared/design/demo-task-notes.md); writing the operands lowest digit first too
puts the i-th answer digit at a *constant* distance from the i-th digit of each
operand, which a rotary-position model picks up within a few hundred steps
(measured on the demo: with big-endian operands the 2-layer model sat on its
loss plateau for 1000-4000 steps, seed-dependent; little-endian operands
left it by step ~500 on seeds 0, 1 and 2). The optional *sloppy teacher*
drops every carry in a fraction of the demonstrations, so that supervised
warm-starting leaves a policy that often samples the right answer but prefers
the wrong one greedily: room for RL to beat its teacher.
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import numpy as np

from rljax._answers import digits_value
from rljax.envs._task import Problem, sample_split


@dataclasses.dataclass(frozen=True)
class ArithmeticTask:
  """``a+b=`` with ``digits``-digit zero-padded operands.

  Attributes:
    digits: operand width (1..9).
    reverse_answer: write the sum lowest digit first (recommended).
    reverse_operands: write the operands lowest digit first (recommended).
    sloppy_carry_prob: probability that a demonstration ignores every carry.
    test_fraction: share of the problem space reserved for the test split.
  """
  digits: int = 3
  reverse_answer: bool = True
  reverse_operands: bool = True
  sloppy_carry_prob: float = 0.0
  test_fraction: float = 0.1
  name: str = "arithmetic"

  def __post_init__(self):
    if not 1 <= self.digits <= 9:
      raise ValueError(f"digits must be in [1, 9], got {self.digits}")
    if not 0.0 <= self.sloppy_carry_prob <= 1.0:
      raise ValueError(f"sloppy_carry_prob must be in [0, 1], got {self.sloppy_carry_prob}")
    if not 0.0 < self.test_fraction < 1.0:
      raise ValueError(f"test_fraction must be in (0, 1), got {self.test_fraction}")

  def _format(self, total: int) -> str:
    s = str(total)
    return s[::-1] if self.reverse_answer else s

  def _make(self, a: int, b: int) -> Problem:
    w = self.digits
    x, y = f"{a:0{w}d}", f"{b:0{w}d}"
    if self.reverse_operands:
      x, y = x[::-1], y[::-1]
    return Problem(prompt=f"{x}+{y}=", answer=self._format(a + b), meta={"a": a, "b": b})

  def problems(self, split: str, num: int, seed: int) -> list[Problem]:
    """``num`` problems of ``split`` ("train"/"test"), deterministic in ``seed``."""
    hi = 10 ** self.digits

    def draw(rng):
      a, b = int(rng.integers(hi)), int(rng.integers(hi))
      return f"{a}+{b}", self._make(a, b)

    return sample_split(draw, split, num, seed, self.test_fraction)

  def no_carry_answer(self, problem: Problem) -> str:
    """The answer with every carry dropped: digit-wise ``(a_i + b_i) mod 10``."""
    a, b = problem.meta["a"], problem.meta["b"]
    value = sum((((a // 10 ** i) + (b // 10 ** i)) % 10) * 10 ** i for i in range(self.digits))
    return self._format(value)

  def demonstration(self, problem: Problem, rng: np.random.Generator) -> str:
    """The teacher's completion: correct, or carry-free with ``sloppy_carry_prob``."""
    if self.sloppy_carry_prob > 0 and rng.random() < self.sloppy_carry_prob:
      return self.no_carry_answer(problem)
    return problem.answer

  def score(self, completions: Sequence[str], problems: Sequence[Problem]) -> np.ndarray:
    """1.0 where the completion (whitespace-stripped) equals the answer, else 0."""
    if len(completions) != len(problems):
      raise ValueError(f"completions ({len(completions)}) and problems ({len(problems)}) differ in length")
    out = np.zeros(len(problems), np.float32)
    for i, (c, p) in enumerate(zip(completions, problems)):
      out[i] = float(isinstance(c, str) and c.strip() == p.answer)
    return out

  def answer_value(self, text) -> Optional[float]:
    """The number an answer written as this task writes it stands for (``"221"`` -> 122 when
    ``reverse_answer``), or None when ``text`` (whitespace-stripped) is not a string of digits."""
    return digits_value(text, reverse=self.reverse_answer)

  def step_rewards(self, completions: Sequence[str], problems: Sequence[Problem]):
    """Process rewards: one step per answer digit, as written (lowest digit first when ``reverse_answer``).

    Returns ``(rewards [B, S] float32, mask [B, S] bool)`` with ``S = digits + 1`` (the longest sum):
    ``rewards[i, k] = 1`` where the k-th character of the stripped completion is the reference's k-th digit,
    else 0 (missing or wrong); ``mask[i, k]`` marks the positions the reference has. Digits the completion
    writes beyond the reference are not steps (the outcome reward, ``score``, rejects them).
    """
    if len(completions) != len(problems):
      raise ValueError(f"completions ({len(completions)}) and problems ({len(problems)}) differ in length")
    s = self.digits + 1
    rewards, mask = np.zeros((len(problems), s), np.float32), np.zeros((len(problems), s), bool)
    for i, (c, p) in enumerate(zip(completions, problems)):
      ref = p.answer[:s]
      mask[i, :len(ref)] = True
      c = c.strip() if isinstance(c, str) else ""
      rewards[i, :len(ref)] = [float(k < len(c) and c[k] == d) for k, d in enumerate(ref)]
    return rewards, mask

  def corpus(self) -> list[str]:
    return ["0123456789+="]

  @property
  def num_tasks(self) -> int:
    """Task ids are carry counts: ``0 .. digits``."""
    return self.digits + 1

  def task_id(self, problem: Problem) -> int:
    """The number of carries in ``a + b`` (a difficulty class: the sloppy teacher gets 0-carry sums right)."""
    a, b = problem.meta["a"], problem.meta["b"]
    carries, carry = 0, 0
    for i in range(self.digits):
      carry = int((a // 10 ** i) % 10 + (b // 10 ** i) % 10 + carry >= 10)
      carries += carry
    return carries
