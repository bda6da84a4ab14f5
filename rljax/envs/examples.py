"""An environment of one's own, ready to train: ``rljax train --set task.name=env --set
task.env=rljax.envs.examples:make_guess`` (docs/agents.md, "Training on your own environment").

``Guess`` is the guessing game of docs/agents.md ("Writing an environment") with the members training reads:
``stop_strings`` (a turn is one line), ``max_turns`` and ``demonstrate`` (a binary-search expert, the SFT
demonstrations). Its problems are the default ones (seeds: ``reset`` draws the secret from the seed).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from rljax.envs._multiturn import StepResult

__all__ = ["Guess", "make_guess"]


@dataclasses.dataclass(frozen=True)
class Guess:
  """Guess a number in 1..high; the environment answers higher/lower. Reward 1 for the right guess."""
  high: int = 9
  stop_strings: tuple = ("\n",)
  max_turns: int = 4

  def reset(self, problem, seed):
    secret = int(np.random.default_rng(seed).integers(1, self.high + 1))
    return secret, f"Guess my number (1-{self.high}):\n"

  def step(self, secret, action):
    digits = "".join(c for c in action if c.isdigit())
    if not digits:
      return StepResult(secret, "Write a number.\n", 0.0, False)  # bad input is an observation
    g = int(digits)
    if g == secret:
      return StepResult(secret, "", 1.0, True)
    return StepResult(secret, "higher\n" if g < secret else "lower\n", 0.0, False)

  def demonstrate(self, episode):
    """The expert's next guess: binary search over the answers so far (SFT plays it to the end)."""
    lo, hi, g = 1, self.high, None
    for seg in episode.segments:
      if seg.source == "model":
        g = int("".join(c for c in seg.text if c.isdigit()))
      elif seg.text in ("higher\n", "lower\n"):
        lo, hi = (g + 1, hi) if seg.text == "higher\n" else (lo, g - 1)
    return f"{(lo + hi) // 2}\n"


def make_guess(high: int = 9, max_turns: int = 4) -> Guess:
  """The factory ``task.env`` names: ``"rljax.envs.examples:make_guess"`` or, with arguments,
  ``"rljax.envs.examples:make_guess(high=20, max_turns=5)"``."""
  return Guess(high=high, max_turns=max_turns)
