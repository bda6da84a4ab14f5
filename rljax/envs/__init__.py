"""Verifiable tasks: built-in procedural ones (train/test splits), GSM8K from a local TFDS dir, and a user's
own prompts and answers (a JSONL file or a local TFDS dataset) scored by a verifier.

Single-turn protocol (``Task``): ``problems(split, num, seed)``,
``demonstration(problem, rng)``, ``score(completions, problems)``, ``corpus()``.

Multi-turn protocol (``MultiTurnEnv``): ``reset(problem, seed) -> (state, observation)``,
``step(state, action) -> StepResult``, driven by ``start`` / ``advance`` / ``step_batch`` under an
``EpisodeConfig``; ``encode_episode`` turns an episode into training rows; ``run_episodes`` plays a batch of
episodes on the model (the sampler's KV cache kept between turns). Environments: ``ToolCountdownEnv``
(Python tool in the sandbox), ``FrozenLakeEnv`` (grid), ``TicTacToeEnv`` (self-play); your own through
``task.name="env"``, ``task.env="module:factory"`` (``OwnEnvTask``; an example: ``rljax.envs.examples``). See
docs/agents.md.
"""
from rljax.envs._arithmetic import ArithmeticTask
from rljax.envs._countdown import CountdownTask, parse_expression
from rljax.envs._small_addition import SmallAdditionTask
from rljax.envs._dataset import (DatasetTask, json_line, jsonl_task, read_jsonl, read_records, read_tfds, resolve_verifier,
                                 tfds_task)
from rljax.envs._parquet import read_parquet
from rljax.envs._gsm8k import VERL_INSTRUCTION, GSM8KTask, gsm8k_reference
from rljax.envs._frozenlake import FrozenLakeEnv, LakeState, shortest_path
from rljax.envs._envtask import ENV_TASK_NAMES, EnvTask, get_env_task
from rljax.envs._own import (ENV_MEMBERS, OWN_ENV_TASK, OwnEnvTask, check_env, env_spec, load_env, own_env_task,
                             parse_env_spec)
from rljax.envs._runner import EpisodeBatch, RunnerConfig, run_episodes
from rljax.envs._multiturn import (Episode, EpisodeConfig, MultiTurnEnv, Segment, StepResult, advance,
                                   batch_summary, cut_at_stop, drop_oldest_turns, start, step_batch)
from rljax.envs._task import SPLITS, Problem, Task
from rljax.envs._tictactoe import TicTacToeEnv, TicTacToeState, minimax_move
from rljax.envs._tool_countdown import VOID_TURN_PATTERNS, ToolCountdownEnv, ToolCountdownState, is_void_turn
from rljax.envs._tools import CallError, ToolCall, parse_call, python_tool, truncate
from rljax.envs._transcript import EpisodeRow, encode_episode, stack_rows, turn_arrays
from rljax.envs._windows import pack_windows

_TASKS = {"arithmetic": ArithmeticTask, "countdown": CountdownTask, "small_addition": SmallAdditionTask, "gsm8k": GSM8KTask, "jsonl": jsonl_task,
          "tfds": tfds_task}
TASK_NAMES = tuple(_TASKS)
DATASET_TASKS = ("jsonl", "tfds")  # a user's own data (rljax.envs._dataset)
MULTI_TURN_TASKS = ENV_TASK_NAMES + (OWN_ENV_TASK,)  # task names trained on episodes ("env": your own environment)


def get_task(name: str, **kwargs) -> Task:
  """Builds a task by name: ``"arithmetic"``, ``"countdown"`` (procedural), ``"gsm8k"``
  (``get_task("gsm8k", data_dir=...)``: a local TFDS directory, see ``GSM8KTask``), or a user's own data:
  ``"jsonl"`` (``get_task("jsonl", path=..., verifier="math_answer")``, see ``jsonl_task``) and ``"tfds"``
  (``tfds_task``)."""
  if name not in _TASKS:
    raise ValueError(f"task must be one of {sorted(_TASKS)}, got {name!r}")
  return _TASKS[name](**kwargs)


__all__ = ["ArithmeticTask", "CountdownTask", "SmallAdditionTask", "DATASET_TASKS", "DatasetTask", "GSM8KTask", "TASK_NAMES",
           "json_line", "jsonl_task", "read_jsonl", "read_records", "read_parquet", "read_tfds", "resolve_verifier", "tfds_task", "Problem", "SPLITS", "Task", "VERL_INSTRUCTION", "get_task",
           "gsm8k_reference", "parse_expression",
           # multi-turn
           "Episode", "EpisodeConfig", "MultiTurnEnv", "Segment", "StepResult", "advance", "batch_summary",
           "cut_at_stop", "drop_oldest_turns", "start", "step_batch", "EpisodeRow", "encode_episode", "stack_rows",
           "turn_arrays", "CallError", "ToolCall", "parse_call", "python_tool", "truncate", "ToolCountdownEnv",
           "ToolCountdownState", "VOID_TURN_PATTERNS", "is_void_turn", "FrozenLakeEnv", "LakeState", "shortest_path",
           "TicTacToeEnv", "TicTacToeState", "minimax_move", "EpisodeBatch", "RunnerConfig", "run_episodes",
           "pack_windows",
           "ENV_TASK_NAMES", "EnvTask", "get_env_task", "MULTI_TURN_TASKS", "ENV_MEMBERS", "OWN_ENV_TASK",
           "OwnEnvTask", "check_env", "env_spec", "load_env", "own_env_task", "parse_env_spec"]
