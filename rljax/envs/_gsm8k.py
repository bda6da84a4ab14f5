"""GSM8K (Cobbe et al. 2021, arXiv:2110.14168) read from a local TFDS directory.

The TFDS ``gsm8k`` dataset (features ``question``, ``answer``; the answer is a
worked solution ending in ``#### <number>``) must already be prepared under
``data_dir`` — e.g. ``tfds build gsm8k --data_dir=/data/tfds
--file_format=array_record`` on a machine with internet, then copy
``/data/tfds/gsm8k``. It is read with ``tfds.data_source`` (array_record,
random access, no TensorFlow) and ``download=False``: nothing is ever fetched.

* prompt: the question followed by verl's instruction (``examples/data_preprocess/gsm8k.py``:
  ``Let's think step by step and output the final answer after "####".``); a run puts it in a chat template
  (``task.chat_template``, applied by ``rljax.train.Codec``: one user message);
* reference answer: the number after ``####`` in ``answer`` (commas removed);
* demonstration (SFT): the dataset's worked solution, unchanged;
* verifier (``method``): ``"flexible"`` (default) — the **last number** in the
  completion equals the reference numerically (verl ``gsm8k.compute_score``'s
  ``method="flexible"`` extraction); ``"strict"`` — the number after the last
  ``####`` (verl's default ``method="strict"``, which also checks the format).
  Reward 1.0 on a match, else 0 (verl ``format_score=0``). verl compares the
  extracted *strings* (commas and ``$`` removed); here both sides go through
  ``rljax.rewards.math_answer`` and compare as exact numbers, so ``72.0`` and
  ``72`` match (our reading of "numeric match").
"""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Sequence

import numpy as np

from rljax.envs._task import Problem, check_split

__all__ = ["GSM8KTask", "gsm8k_reference", "VERL_INSTRUCTION"]

VERL_INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'
_METHODS = ("flexible", "strict")
_HASH_NUMBER = re.compile(r"####\s*\$?\s*(-?[0-9.,]+)")


def _text(x) -> str:
  if isinstance(x, bytes):
    return x.decode("utf-8")
  if isinstance(x, np.ndarray) and x.shape == ():
    return _text(x.item())
  return str(x)


def gsm8k_reference(solution: str) -> str:
  """The final answer of a GSM8K solution: the number after the last ``####``, commas removed.

  Raises ``ValueError`` when the solution has no ``#### <number>`` (a
  malformed *dataset* record, not model output).
  """
  found = _HASH_NUMBER.findall(solution)
  if not found:
    raise ValueError(f"GSM8K answer has no '#### <number>': {solution[-80:]!r}")
  return found[-1].replace(",", "").rstrip(".")


@dataclasses.dataclass(frozen=True)
class GSM8KTask:
  """GSM8K prompts / answers / verifier from a local TFDS ``data_dir`` (see the module docstring).

  Attributes:
    data_dir: the TFDS data directory holding ``gsm8k/<version>/`` (``~`` expanded).
    dataset: the TFDS name, optionally with a version (``"gsm8k:1.0.0"``).
    method: ``"flexible"`` (last number) or ``"strict"`` (number after ``####``).
    instruction: appended to the question after a space (``""``: none).
  """
  data_dir: str = "~/tensorflow_datasets"
  dataset: str = "gsm8k"
  method: str = "flexible"
  instruction: str = VERL_INSTRUCTION
  name: str = "gsm8k"

  def __post_init__(self):
    if not isinstance(self.data_dir, str) or not self.data_dir:
      raise ValueError(f"data_dir must be a local TFDS directory, got {self.data_dir!r}")
    if self.method not in _METHODS:
      raise ValueError(f"method must be one of {list(_METHODS)}, got {self.method!r}")

  # ------------------------------------------------------------------ data

  def source(self, split: str):
    """The random-access TFDS data source of ``split`` (records with ``question``/``answer``)."""
    check_split(split)
    import tensorflow_datasets as tfds  # pylint: disable=import-outside-toplevel
    data_dir = os.path.expanduser(self.data_dir)
    if not os.path.isdir(data_dir):
      raise ValueError(f"GSM8K: data_dir {data_dir!r} does not exist; prepare it with `tfds build gsm8k "
                       f"--data_dir=<dir> --file_format=array_record` on a machine with internet and copy it here")
    try:
      return tfds.data_source(self.dataset, split=split, data_dir=data_dir, download=False)
    except Exception as e:  # pylint: disable=broad-except
      raise ValueError(f"GSM8K: cannot read TFDS {self.dataset!r} split {split!r} from {data_dir!r} "
                       f"({type(e).__name__}: {str(e)[:300]}); it must be prepared there as array_record "
                       "(`tfds build gsm8k --file_format=array_record`)") from e

  def format_prompt(self, question: str) -> str:
    """Question + instruction (the user message a chat template wraps)."""
    return question.strip() + (" " + self.instruction if self.instruction else "")

  def _problem(self, record, index: int) -> Problem:
    question, solution = _text(record["question"]), _text(record["answer"])
    return Problem(prompt=self.format_prompt(question), answer=gsm8k_reference(solution),
                   meta={"question": question, "solution": solution, "index": int(index)})

  def problems(self, split: str, num: int, seed: int) -> list[Problem]:
    """``num`` problems of ``split``: train — a ``seed``-shuffled subset; test — the first ``num`` in order."""
    if isinstance(num, bool) or not isinstance(num, int) or num < 0:
      raise ValueError(f"num must be a non-negative int, got {num!r}")
    src = self.source(split)
    n = len(src)
    if num > n:
      raise ValueError(f"num={num} but the GSM8K {split!r} split in {self.data_dir!r} has {n} examples")
    if split == "train":
      idx = np.random.default_rng([seed, 0]).permutation(n)[:num]
    else:
      idx = np.arange(num)
    return [self._problem(src[int(i)], int(i)) for i in idx]

  def demonstration(self, problem: Problem, rng: np.random.Generator) -> str:
    """The dataset's worked solution (ends in ``#### <answer>``)."""
    del rng
    return problem.meta["solution"]

  def score(self, completions: Sequence[str], problems: Sequence[Problem]) -> np.ndarray:
    """1.0 where the extracted number equals the reference numerically (see ``method``), else 0."""
    if len(completions) != len(problems):
      raise ValueError(f"completions ({len(completions)}) and problems ({len(problems)}) differ in length")
    from rljax.rewards import math_answer  # pylint: disable=import-outside-toplevel
    sources = ("last_number",) if self.method == "flexible" else ("hash",)
    return math_answer(list(completions), [p.answer for p in problems], sources=sources, extract_reference=False)

  def corpus(self) -> list[str]:
    """Prompts and solutions of the train split (for a tokenizer trained from scratch)."""
    src = self.source("train")
    out = []
    for i in range(len(src)):
      p = self._problem(src[i], i)
      out += [p.prompt, p.meta["solution"]]
    return out
