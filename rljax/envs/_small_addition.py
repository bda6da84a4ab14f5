"""Small additions asked as a question: the real-model demo's task (``--config smollm2_addition``).

``What is 7 + 12? Reply with only the number.`` with one operand in ``[1, 9]`` and the other in ``[1, 20]``
(which one comes first is drawn too): a pretrained instruct model already knows the sums, and its zero-shot
failures are mostly *format* (a sentence, the question repeated, a rambling derivation that runs out of
tokens) rather than wrong arithmetic. The task therefore scores two things separately:

- ``score``: correctness, ``r = 1[last integer of the completion = a + b]`` (so ``"7 + 12 = 19"`` counts);
- ``format_score``: ``1[the completion, whitespace-stripped, is exactly an integer (optionally ending in '.')]``.

Measured with SmolLM2-135M-Instruct in its chat template (shared/design/real-model-notes.md): greedy zero-shot
accuracy ~47%, temperature-1 ~13%; 50 GRPO steps take greedy to ~90%. The whole problem space is small
(9 x 20 x 2 orders = 360 questions): the held-out split is a fixed hash-chosen share of it (``test_fraction``),
never seen in training, and its problems are distinct.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Optional, Sequence

import numpy as np

from rljax.envs._task import Problem, check_split, split_of

__all__ = ["SmallAdditionTask"]

_INT = re.compile(r"-?\d+")
_ONLY_INT = re.compile(r"-?\d+\.?")


@dataclasses.dataclass(frozen=True)
class SmallAdditionTask:
  """``What is a + b? <instruction>`` with ``a`` in ``small`` and ``b`` in ``large`` (either order).

  Attributes:
    small, large: inclusive operand ranges ``(lo, hi)`` of the two operands.
    instruction: appended to the question ("" for none).
    test_fraction: share of the problem space held out (by a stable hash of ``"a+b"``).
  """
  small: tuple = (1, 9)
  large: tuple = (1, 20)
  instruction: str = "Reply with only the number."
  test_fraction: float = 0.3
  name: str = "small_addition"

  def __post_init__(self):
    for field in ("small", "large"):
      lo_hi = getattr(self, field)
      if (not isinstance(lo_hi, (tuple, list)) or len(lo_hi) != 2 or
          not all(isinstance(v, int) and not isinstance(v, bool) for v in lo_hi) or not 0 <= lo_hi[0] <= lo_hi[1]):
        raise ValueError(f"{field} must be an inclusive range (lo, hi) of integers with 0 <= lo <= hi, got {lo_hi!r}")
    if not 0.0 < self.test_fraction < 1.0:
      raise ValueError(f"test_fraction must be in (0, 1), got {self.test_fraction}")

  def _space(self) -> list[tuple[int, int]]:
    pairs = {(a, b) for a in range(self.small[0], self.small[1] + 1) for b in range(self.large[0], self.large[1] + 1)}
    return sorted(pairs | {(b, a) for a, b in pairs})

  def _make(self, a: int, b: int) -> Problem:
    prompt = f"What is {a} + {b}?" + (f" {self.instruction}" if self.instruction else "")
    return Problem(prompt=prompt, answer=str(a + b), meta={"a": a, "b": b})

  def problems(self, split: str, num: int, seed: int) -> list[Problem]:
    """``"test"``: the first ``num`` distinct held-out questions (a fixed order, whatever ``seed``); ``"train"``:
    ``num`` questions drawn with replacement from the rest, deterministic in ``seed``."""
    check_split(split)
    if isinstance(num, bool) or not isinstance(num, int) or num < 0:
      raise ValueError(f"num must be a non-negative int, got {num!r}")
    pool = [p for p in self._space() if split_of(f"{p[0]}+{p[1]}", self.test_fraction) == split]
    if not pool:
      raise ValueError(f"the {split} split of small_addition{self.small, self.large} is empty")
    if split == "test":
      order = np.random.default_rng([0, 1]).permutation(len(pool))
      return [self._make(*pool[int(i)]) for i in order[:num]]
    idx = np.random.default_rng([seed, 0]).integers(len(pool), size=num)
    return [self._make(*pool[int(i)]) for i in idx]

  def demonstration(self, problem: Problem, rng: np.random.Generator) -> str:
    """The answer alone (an SFT warm start, if one is wanted, teaches the format)."""
    del rng
    return problem.answer

  def answer_value(self, text) -> Optional[int]:
    """The last integer in ``text``, or None."""
    found = _INT.findall(text) if isinstance(text, str) else []
    return int(found[-1]) if found else None

  def score(self, completions: Sequence[str], problems: Sequence[Problem]) -> np.ndarray:
    """``[B]`` float32: 1 where the completion's last integer equals ``a + b``."""
    if len(completions) != len(problems):
      raise ValueError(f"completions ({len(completions)}) and problems ({len(problems)}) differ in length")
    return np.asarray([float(self.answer_value(c) == int(p.answer)) for c, p in zip(completions, problems)],
                      np.float32)

  def format_score(self, completions: Sequence[str], problems: Sequence[Problem]) -> np.ndarray:
    """``[B]`` float32: 1 where the stripped completion is exactly one integer (right or wrong)."""
    if len(completions) != len(problems):
      raise ValueError(f"completions ({len(completions)}) and problems ({len(problems)}) differ in length")
    return np.asarray([float(isinstance(c, str) and _ONLY_INT.fullmatch(c.strip()) is not None)
                       for c in completions], np.float32)

  def answer_key(self, completion: str) -> str:
    """The extracted answer (equal keys = the same answer), for stages that group answers."""
    v = self.answer_value(completion)
    return "" if v is None else str(v)

  def corpus(self) -> list[str]:
    return ["What is 0123456789 + ? Reply with only the number."]
