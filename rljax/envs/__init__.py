"""Built-in verifiable tasks (procedurally generated, with train/test splits).

Single-turn protocol (``Task``): ``problems(split, num, seed)``,
``demonstration(problem, rng)``, ``score(completions, problems)``, ``corpus()``.
"""
from rljax.envs._arithmetic import ArithmeticTask
from rljax.envs._countdown import CountdownTask, parse_expression
from rljax.envs._task import SPLITS, Problem, Task

_TASKS = {"arithmetic": ArithmeticTask, "countdown": CountdownTask}


def get_task(name: str, **kwargs) -> Task:
  """Builds a built-in task by name (``"arithmetic"`` or ``"countdown"``)."""
  if name not in _TASKS:
    raise ValueError(f"task must be one of {sorted(_TASKS)}, got {name!r}")
  return _TASKS[name](**kwargs)


__all__ = ["ArithmeticTask", "CountdownTask", "Problem", "SPLITS", "Task", "get_task", "parse_expression"]
