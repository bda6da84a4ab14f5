"""Verifiable tasks: built-in procedural ones (train/test splits) and GSM8K from a local TFDS dir.

Single-turn protocol (``Task``): ``problems(split, num, seed)``,
``demonstration(problem, rng)``, ``score(completions, problems)``, ``corpus()``.
"""
from rljax.envs._arithmetic import ArithmeticTask
from rljax.envs._countdown import CountdownTask, parse_expression
from rljax.envs._gsm8k import VERL_INSTRUCTION, GSM8KTask, gsm8k_reference
from rljax.envs._task import SPLITS, Problem, Task

_TASKS = {"arithmetic": ArithmeticTask, "countdown": CountdownTask, "gsm8k": GSM8KTask}


def get_task(name: str, **kwargs) -> Task:
  """Builds a task by name: ``"arithmetic"``, ``"countdown"`` (procedural) or ``"gsm8k"``
  (``get_task("gsm8k", data_dir=...)``: a local TFDS directory, see ``GSM8KTask``)."""
  if name not in _TASKS:
    raise ValueError(f"task must be one of {sorted(_TASKS)}, got {name!r}")
  return _TASKS[name](**kwargs)


__all__ = ["ArithmeticTask", "CountdownTask", "GSM8KTask", "Problem", "SPLITS", "Task", "VERL_INSTRUCTION", "get_task",
           "gsm8k_reference", "parse_expression"]
