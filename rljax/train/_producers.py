"""The registered producers of the needs the loop fills on the host from a scored rollout (``by="scoring"``).

Each need of :data:`rljax.stages.NEEDS` declares its one producer beside its ``StepData`` field (``by=``, a key of
``rljax.stages.PRODUCERS``). The "scoring" ones are the functions below, ``SCORING[need](task, answer_index,
completions, problems) -> {StepData field: value}``, run by the collector for each need a stage of the recipe
declares (``rljax.train._rollout.Collector.score``); the forwards' needs are produced in ``rljax.train._inputs``,
the greedy rollout's in the collector's rollout phase, the task gradients before the update. Adding a host need
is its field (``by="scoring"``) and its function here: the trainer has no branch per need.

A need's producer may also give the run's static facts over the training set at start-up (``FACTS[need](task,
problems) -> {RunFacts field: value}``, run by ``rljax.train._startup.bound_recipe`` for each need a stage of the
recipe declares): ``task_id``'s gives ``RunFacts.task_ids`` (a curriculum's arms).
"""
from __future__ import annotations

import numpy as np

__all__ = ["SCORING", "FACTS"]


def answer_ids(task, answer_index: dict, completions, problems) -> dict:  # pylint: disable=unused-argument
  """``answer_ids [B]``: equal ids for equal answer keys (``task.answer_key``, default the stripped completion)
  within a step (``answer_index``: key -> id, shared by the step's sampling rounds)."""
  key_fn = getattr(task, "answer_key", None) or (lambda c: c.strip())
  return {"answer_ids": np.asarray([answer_index.setdefault(key_fn(c), len(answer_index)) for c in completions],
                                   np.int32)}


def step_rewards(task, answer_index: dict, completions, problems) -> dict:  # pylint: disable=unused-argument
  """``step_rewards [B, S]`` float32 and ``step_mask [B, S]`` bool: ``task.step_rewards(completions, problems)``."""
  rewards, mask = task.step_rewards(completions, list(problems))
  return {"step_rewards": np.asarray(rewards, np.float32), "step_mask": np.asarray(mask, bool)}


def task_id(task, answer_index: dict, completions, problems) -> dict:  # pylint: disable=unused-argument
  """``task_id [B]`` int32 (``task.task_id`` of each row's problem) and ``num_tasks``."""
  return {"task_id": np.asarray([task.task_id(p) for p in problems], np.int32), "num_tasks": int(task.num_tasks)}


SCORING = {"answer_ids": answer_ids, "step_rewards": step_rewards, "task_id": task_id}


def task_ids(task, problems) -> dict:
  """``RunFacts.task_ids``: each training prompt's ``task.task_id`` (a tuple of ints), when the task defines task
  ids (``task_id`` and ``num_tasks``); nothing otherwise (a self-play task's roles are no prompt's task)."""
  if not (hasattr(task, "task_id") and hasattr(task, "num_tasks")):
    return {}
  return {"task_ids": tuple(int(task.task_id(p)) for p in problems)}


FACTS = {"task_id": task_ids}
