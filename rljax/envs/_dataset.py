"""Your own prompts and reference answers, scored by a verifier: a JSONL file or a local TFDS dataset.

The TRL / verl workflow, "my prompts, my verifier":

    rljax train --set task.name=jsonl --set task.path=data/train.jsonl --set task.verifier=math_answer

* **records**: a JSONL file, one JSON object per line with a string prompt and a reference answer (a string
  or a number) under ``prompt_field`` / ``answer_field`` (default ``"prompt"`` / ``"answer"``); blank lines
  are skipped, the other fields are kept in ``Problem.meta`` (with ``"index"``, the record's 0-based
  position). A ``.parquet`` path (and ``eval_path``) is read in verl's format instead (``rljax.envs._parquet``:
  ``prompt`` a chat message list, ``reward_model.ground_truth`` the answer). Or a TFDS dataset prepared as array_record under a local ``data_dir``
  (``tfds.data_source``, ``download=False``: nothing is fetched; TensorFlow is not needed), same fields.
* **splits**: a separate eval file (``eval_path``) / the TFDS ``eval_split``; or, for one JSONL file, a
  held-out share ``eval_fraction`` chosen by a stable hash of the prompt text (``rljax.envs._task.split_of``:
  the same split whatever the seed or the file order, repeated prompts on the same side, so no prompt is in
  both; the share is ``eval_fraction`` in expectation, not exactly). Training problems are a
  ``seed``-shuffled subset of the train split, held-out problems the first ones of the eval split, at most
  ``num`` of each (``TaskConfig.num_train`` / ``num_test``; the run logs how many it got).
* **reward**: ``verifier``, one catalog reward spec (``"math_answer"``, ``"exact_match(normalize='squad')"``,
  ``"format_regex(pattern='...')"``, ...; ``python -m rljax.catalog``) comparing each completion with its
  problem's answer, or, from Python, a function ``(completions, problems) -> [B]``. It is the task's
  verifier: the RL reward unless the recipe sets ``rl.rewards`` (or ``train(reward_fn=...)``), and the
  held-out accuracy.
* **SFT demonstration**: the reference answer itself (``sft.steps=0`` skips the warm start).

Every check on the data (missing or empty file, a line that is not JSON or not an object, a missing or
non-text field: each error names the file and line) runs when the task is built. ``TaskConfig`` builds a
``jsonl`` task when the config is made, so a bad one is refused before a run writes anything; for ``tfds``
it checks the verifier and that the dataset folder exists (opening TFDS is slow), and the records are read
when the run builds the task.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Callable, Optional, Sequence, Union

import numpy as np

from rljax._jsonl import json_line
from rljax.envs._fields import field_value as _field_value
from rljax.envs._task import Problem, check_split, split_of

__all__ = ["DatasetTask", "jsonl_task", "tfds_task", "read_jsonl", "read_records", "read_tfds", "resolve_verifier"]


def read_jsonl(path: str, *, prompt_field: str = "prompt", answer_field: str = "answer") -> list[dict]:
  """The records of a JSONL file as ``{"prompt", "answer", "meta"}`` dicts (``meta``: the other fields and
  ``"index"``). Raises ``ValueError`` naming the file (and line) when it is missing, empty or malformed."""
  if not isinstance(path, str) or not path:
    raise ValueError(f"JSONL path must be a file path, got {path!r}")
  path = os.path.expanduser(path)
  if not os.path.exists(path):
    raise ValueError(f"JSONL file {path!r} does not exist")
  if not os.path.isfile(path):
    raise ValueError(f"JSONL path {path!r} is not a file")
  records = []
  with open(path, encoding="utf-8") as f:
    for n, line in enumerate(f, 1):
      if not line.strip():
        continue
      where = f"{path}:{n}"
      rec = json_line(line, where)
      if not isinstance(rec, dict):
        raise ValueError(f"{where}: each line must be a JSON object, got {type(rec).__name__}")
      for field in (prompt_field, answer_field):
        if field not in rec:
          raise ValueError(f"{where}: no field {field!r} (fields: {sorted(rec)})")
      prompt = _field_value(rec[prompt_field], prompt_field, where, answer=False)
      answer = _field_value(rec[answer_field], answer_field, where, answer=True)
      meta = {k: v for k, v in rec.items() if k not in (prompt_field, answer_field)}
      records.append({"prompt": prompt, "answer": answer, "meta": {**meta, "index": len(records)}})
  if not records:
    raise ValueError(f"JSONL file {path!r} is empty (no records)")
  return records


def read_records(path: str, *, prompt_field: str = "prompt", answer_field: str = "answer") -> list[dict]:
  """``read_parquet`` for a ``.parquet`` file (verl's format, ``rljax.envs._parquet``), else ``read_jsonl``."""
  if isinstance(path, str) and path.endswith(".parquet"):
    from rljax.envs._parquet import read_parquet  # pylint: disable=import-outside-toplevel
    return read_parquet(path, prompt_field=prompt_field, answer_field=answer_field)
  return read_jsonl(path, prompt_field=prompt_field, answer_field=answer_field)


def read_tfds(data_dir: str, dataset: str, split: str, *, prompt_field: str = "prompt",
              answer_field: str = "answer") -> list[dict]:
  """The records of split ``split`` of a TFDS dataset prepared as array_record under ``data_dir``."""
  import tensorflow_datasets as tfds  # pylint: disable=import-outside-toplevel
  data_dir = os.path.expanduser(data_dir)
  if not os.path.isdir(data_dir):
    raise ValueError(f"TFDS data_dir {data_dir!r} does not exist")
  try:
    source = tfds.data_source(dataset, split=split, data_dir=data_dir, download=False)
  except Exception as e:  # pylint: disable=broad-except
    raise ValueError(f"cannot read TFDS {dataset!r} split {split!r} from {data_dir!r} ({type(e).__name__}: "
                     f"{' '.join(str(e).split())[:300]}); it must be prepared there as array_record") from e
  records = []
  for i in range(len(source)):
    rec = source[i]
    where = f"TFDS {dataset!r} {split}[{i}]"
    for field in (prompt_field, answer_field):
      if field not in rec:
        raise ValueError(f"{where}: no feature {field!r} (features: {sorted(rec)})")
    records.append({"prompt": _field_value(rec[prompt_field], prompt_field, where, answer=False),
                    "answer": _field_value(rec[answer_field], answer_field, where, answer=True),
                    "meta": {"index": i}})
  if not records:
    raise ValueError(f"TFDS {dataset!r} split {split!r} in {data_dir!r} is empty")
  return records


def resolve_verifier(verifier: Union[str, Callable]) -> Callable:
  """A reward function ``(completions, problems) -> [B]`` from one catalog reward spec, or ``verifier`` itself
  when it is callable. An unknown or malformed spec raises ``ValueError`` listing the valid names."""
  if callable(verifier):
    return verifier
  if not isinstance(verifier, str) or not verifier.strip():
    from rljax.recipes import names_for  # pylint: disable=import-outside-toplevel
    raise ValueError(f"a verifier is required: a reward of the catalog ({', '.join(names_for('rewards'))}) or, "
                     "from Python, a function (completions, problems) -> [B]")
  from rljax.recipes import resolve  # pylint: disable=import-outside-toplevel
  stages = resolve(verifier, "rewards")
  if len(stages) != 1:
    raise ValueError(f"the verifier is one reward, got {len(stages)}: {verifier!r} (several rewards go in "
                     "rl.rewards)")
  return stages[0].fn


def _problem(record: dict) -> Problem:
  return Problem(prompt=record["prompt"], answer=record["answer"], meta=record["meta"])


@dataclasses.dataclass(frozen=True, eq=False)
class DatasetTask:
  """Problems read from a dataset (``jsonl_task``, ``tfds_task``), scored by ``verifier``.

  Attributes:
    train, test: the problems of the two splits (non-empty tuples of ``Problem``).
    verifier: a catalog reward spec or a function ``(completions, problems) -> [B]``.
    name: ``"jsonl"`` or ``"tfds"``.
  """
  train: tuple
  test: tuple
  verifier: Union[str, Callable]
  name: str = "jsonl"
  _score: Callable = dataclasses.field(init=False, repr=False)

  def __post_init__(self):
    for split in ("train", "test"):
      if not getattr(self, split):
        raise ValueError(f"the {split} split of the {self.name} task is empty")
    object.__setattr__(self, "_score", resolve_verifier(self.verifier))

  def problems(self, split: str, num: int, seed: int) -> list[Problem]:
    """At most ``num`` problems of ``split``: train — a ``seed``-shuffled subset; test — the first, in order."""
    check_split(split)
    if isinstance(num, bool) or not isinstance(num, int) or num < 0:
      raise ValueError(f"num must be a non-negative int, got {num!r}")
    pool = self.train if split == "train" else self.test
    if split == "train":
      idx = np.random.default_rng([seed, 0]).permutation(len(pool))[:num]
      return [pool[int(i)] for i in idx]
    return list(pool[:num])

  def demonstration(self, problem: Problem, rng: np.random.Generator) -> str:
    """The reference answer (the SFT warm start's target)."""
    del rng
    return problem.answer

  def score(self, completions: Sequence[str], problems: Sequence[Problem]) -> np.ndarray:
    """``verifier(completions, problems)`` as ``[B]`` float32."""
    if len(completions) != len(problems):
      raise ValueError(f"completions ({len(completions)}) and problems ({len(problems)}) differ in length")
    return np.asarray(self._score(list(completions), list(problems)), np.float32)

  def corpus(self) -> list[str]:
    """Train prompts and answers, and the held-out prompts (the alphabet of a tokenizer trained from scratch)."""
    return [t for p in self.train for t in (p.prompt, p.answer)] + [p.prompt for p in self.test]


def jsonl_task(path: str, *, verifier: Union[str, Callable], eval_path: Optional[str] = None,
               eval_fraction: float = 0.1, prompt_field: str = "prompt", answer_field: str = "answer") -> DatasetTask:
  """A task from a JSONL file (see the module docstring): held-out problems from ``eval_path``, else the
  share ``eval_fraction`` of ``path``'s prompts (by prompt hash)."""
  records = read_records(path, prompt_field=prompt_field, answer_field=answer_field)
  if eval_path is not None:
    train, test = records, read_records(eval_path, prompt_field=prompt_field, answer_field=answer_field)
  else:
    if isinstance(eval_fraction, bool) or not isinstance(eval_fraction, (int, float)) or not 0 < eval_fraction < 1:
      raise ValueError(f"eval_fraction must be in (0, 1) (or give an eval file), got {eval_fraction!r}")
    train = [r for r in records if split_of(r["prompt"], eval_fraction) == "train"]
    test = [r for r in records if split_of(r["prompt"], eval_fraction) == "test"]
    for split, rows in (("train", train), ("held-out", test)):
      if not rows:
        raise ValueError(f"JSONL file {path!r}: its {len(records)} records leave the {split} split empty at "
                         f"eval_fraction={eval_fraction}; add records, change eval_fraction or give an eval file")
  return DatasetTask(train=tuple(_problem(r) for r in train), test=tuple(_problem(r) for r in test),
                     verifier=verifier, name="jsonl")


def tfds_task(data_dir: str, dataset: str, *, verifier: Union[str, Callable], train_split: str = "train",
              eval_split: str = "test", prompt_field: str = "prompt", answer_field: str = "answer") -> DatasetTask:
  """A task from a TFDS dataset prepared as array_record under ``data_dir`` (see the module docstring)."""
  read = lambda split: read_tfds(data_dir, dataset, split, prompt_field=prompt_field, answer_field=answer_field)
  return DatasetTask(train=tuple(_problem(r) for r in read(train_split)),
                     test=tuple(_problem(r) for r in read(eval_split)), verifier=verifier, name="tfds")

