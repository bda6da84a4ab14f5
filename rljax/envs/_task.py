"""The single-turn verifiable task protocol.

A task generates problems procedurally and deterministically (a split and a
seed fix them), writes demonstrations for supervised warm-starts, and scores
decoded completions on the host. ``score`` never raises on malformed model
output: anything unparsable scores 0.
"""
from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np

from rljax.types import Problem

SPLITS = ("train", "test")


class Task(Protocol):
  """What every built-in task provides (see ``ArithmeticTask``).

  Optional, read by the RL loop when a recipe stage needs them (``rljax.stages.NEEDS``):
  ``answer_key(completion) -> str`` (the extracted, normalised answer: equal keys = same answer; default the
  stripped completion), ``num_tasks`` and ``task_id(problem) -> int`` in ``[0, num_tasks)``.
  """
  name: str

  def problems(self, split: str, num: int, seed: int) -> list[Problem]: ...

  def demonstration(self, problem: Problem, rng: np.random.Generator) -> str: ...

  def score(self, completions: Sequence[str], problems: Sequence[Problem]) -> np.ndarray: ...

  def corpus(self) -> list[str]: ...


def check_split(split: str) -> None:
  if split not in SPLITS:
    raise ValueError(f"split must be one of {SPLITS}, got {split!r}")


def split_of(key: str, test_fraction: float) -> str:
  """Deterministic, seed-independent split assignment of a problem key.

  A stable hash (not Python's salted ``hash``) of the problem's canonical key
  puts it in "test" with probability ``test_fraction``: the two splits are
  disjoint whatever seeds and sizes are asked for.
  """
  h = 2166136261
  for ch in key.encode():
    h = ((h ^ ch) * 16777619) & 0xFFFFFFFF
  return "test" if (h % 10_000) < int(test_fraction * 10_000) else "train"


def sample_split(draw, split: str, num: int, seed: int, test_fraction: float, max_tries_factor: int = 200):
  """Draws ``num`` problems from ``draw(rng) -> (key, Problem)`` that fall in ``split``."""
  check_split(split)
  if num < 0:
    raise ValueError(f"num must be >= 0, got {num}")
  rng = np.random.default_rng([seed, SPLITS.index(split)])
  out: list[Problem] = []
  for _ in range(max(num, 1) * max_tries_factor):
    if len(out) == num:
      break
    key, problem = draw(rng)
    if split_of(key, test_fraction) == split:
      out.append(problem)
  if len(out) < num:
    raise ValueError(f"could only draw {len(out)} of {num} {split} problems; the task space is too small")
  return out
