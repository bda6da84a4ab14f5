"""Verifiable tasks: built-in procedural ones (train/test splits), GSM8K from a local TFDS dir, and a user's
own prompts and answers (a JSONL file or a local TFDS dataset) scored by a verifier.

Single-turn protocol (``Task``): ``problems(split, num, seed)``,
``demonstration(problem, rng)``, ``score(completions, problems)``, ``corpus()``.
"""
from rljax.envs._arithmetic import ArithmeticTask
from rljax.envs._countdown import CountdownTask, parse_expression
from rljax.envs._dataset import DatasetTask, jsonl_task, read_jsonl, read_tfds, resolve_verifier, tfds_task
from rljax.envs._gsm8k import VERL_INSTRUCTION, GSM8KTask, gsm8k_reference
from rljax.envs._task import SPLITS, Problem, Task

_TASKS = {"arithmetic": ArithmeticTask, "countdown": CountdownTask, "gsm8k": GSM8KTask, "jsonl": jsonl_task,
          "tfds": tfds_task}
TASK_NAMES = tuple(_TASKS)
DATASET_TASKS = ("jsonl", "tfds")  # a user's own data (rljax.envs._dataset)


def get_task(name: str, **kwargs) -> Task:
  """Builds a task by name: ``"arithmetic"``, ``"countdown"`` (procedural), ``"gsm8k"``
  (``get_task("gsm8k", data_dir=...)``: a local TFDS directory, see ``GSM8KTask``), or a user's own data:
  ``"jsonl"`` (``get_task("jsonl", path=..., verifier="math_answer")``, see ``jsonl_task``) and ``"tfds"``
  (``tfds_task``)."""
  if name not in _TASKS:
    raise ValueError(f"task must be one of {sorted(_TASKS)}, got {name!r}")
  return _TASKS[name](**kwargs)


__all__ = ["ArithmeticTask", "CountdownTask", "DATASET_TASKS", "DatasetTask", "GSM8KTask", "TASK_NAMES",
           "jsonl_task", "read_jsonl", "read_tfds", "resolve_verifier", "tfds_task", "Problem", "SPLITS", "Task", "VERL_INSTRUCTION", "get_task",
           "gsm8k_reference", "parse_expression"]
