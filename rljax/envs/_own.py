"""Your own environment as a trainable task: ``task.name="env"``, ``task.env="module:factory"`` (docs/agents.md,
"Training on your own environment").

``task.env`` names a factory: ``"mypkg.envs:make_guess"`` (an importable module and a function in it),
``"path/to/file.py:make_guess"`` (a Python file, e.g. your config file; a relative path is read from the working
directory), optionally with literal keyword arguments: ``"mypkg.envs:make_guess(high=20)"``. The factory is
called with exactly those arguments (Python literals; none if the string names the function only), once when a
run starts and again when it resumes (the string is stored in the run's ``config.json``), and returns the
environment. ``TaskConfig(env=fn)`` in a config file turns a module-level function into its string.

What ``OwnEnvTask`` reads from the environment (``ENV_MEMBERS``; ``check_env`` refuses an object that lacks a
required one, naming each):

* required: ``reset(problem, seed) -> (state, observation)`` and ``step(state, action) -> StepResult``;
* ``stop_strings``: a model turn ends at the first one (default ``()``: at the end token or ``rl.max_new_tokens``);
* ``max_turns``: the episode's turn limit when ``task.max_turns`` is 0 (default 4);
* ``problems(split, num, seed) -> [Problem]``: default ``num`` problems that are seeds only
  (``Problem(prompt="episode <s>", answer="", meta={"seed": s})``), the train and test seeds disjoint;
  ``reset`` gets the ``Problem`` and its ``meta["seed"]`` (0 without one), and a group's episodes share both;
* ``demonstrate(episode) -> str``: a scripted expert's next action in an episode so far (an ``Episode``: its
  ``state`` and ``segments``); SFT plays it from ``reset`` to the end and trains on its turns. Needed when
  ``sft.steps > 0`` (without ``sft.init_from``);
* ``success(episode) -> float``: the held-out metric (default: not failed and an episode reward >= 1);
* ``eval_metrics(problems, episodes) -> dict``: more held-out metrics of greedy episodes (default none);
* ``corpus() -> [str]``: texts whose characters the tokenizer trained here must know (default: printable ASCII,
  the opening observations and the demonstrations are always in);
* ``role``, ``fit_context``: as in every environment (``rljax.envs.MultiTurnEnv``). Self-play (per-role rows) is
  for the built-in TicTacToe only.
"""
from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import os
import string
import sys
import zlib
from typing import Any, Callable, Optional

import numpy as np

from rljax.envs._multiturn import Episode, EpisodeConfig, advance, start
from rljax.envs._task import Problem, check_split, sample_split

__all__ = ["OWN_ENV_TASK", "ENV_MEMBERS", "OwnEnvTask", "check_env", "env_spec", "load_env", "parse_env_spec"]

OWN_ENV_TASK = "env"  # TaskConfig.name of a user's own environment

ENV_MEMBERS = {  # member: what it is (the refusal names the missing ones with this)
    "reset": "reset(problem, seed) -> (state, observation)",
    "step": "step(state, action) -> StepResult",
    "stop_strings": "stop_strings: a tuple of non-empty strings (optional)",
    "max_turns": "max_turns: an int >= 1 (optional)",
    "problems": "problems(split, num, seed) -> [Problem] (optional)",
    "demonstrate": "demonstrate(episode) -> str, the expert's next action (SFT demonstrations)",
    "success": "success(episode) -> float (optional)",
    "eval_metrics": "eval_metrics(problems, episodes) -> dict (optional)",
    "corpus": "corpus() -> [str] (optional)",
}
_DOCS = "docs/agents.md, 'Training on your own environment'"


def parse_env_spec(spec: str) -> tuple:
  """``"target:name(k=v, ...)"`` -> ``(target, name, args, kwargs)``; ``ValueError`` says what is wrong."""
  if not isinstance(spec, str) or not spec.strip():
    raise ValueError(f"a factory 'module:function' or 'file.py:function' (e.g. 'rljax.envs.examples:make_guess'), "
                     f"got {spec!r}")
  text = spec.strip()
  paren = text.find("(")
  head, call = (text, "") if paren < 0 else (text[:paren], text[paren:])
  target, sep, name = head.rpartition(":")
  if not sep or not target.strip() or not name.strip().isidentifier():
    raise ValueError(f"'module:function' or 'file.py:function', optionally with literal keyword arguments "
                     f"('mypkg.envs:make_env(size=4)'), got {spec!r}")
  args, kwargs = (), {}
  if call:
    try:
      node = ast.parse(f"f{call}", mode="eval").body
      if not isinstance(node, ast.Call):
        raise SyntaxError("not a call")
      args = tuple(ast.literal_eval(a) for a in node.args)
      kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
      if any(k is None for k in kwargs):
        raise ValueError("**kwargs")
    except (SyntaxError, ValueError):
      raise ValueError(f"the factory's arguments in {spec!r} must be Python literals (numbers, strings, tuples, "
                       f"lists, dicts, True/False/None), e.g. 'mypkg.envs:make_env(size=4)'") from None
  return target.strip(), name.strip(), args, kwargs


def env_spec(fn: Callable) -> str:
  """The ``task.env`` string of a module-level function: ``"module:name"``, or ``"/abs/file.py:name"`` for a
  function of a file loaded by path (a config file)."""
  name = getattr(fn, "__name__", None)
  glob = getattr(fn, "__globals__", {})
  if name is None or glob.get(name) is not fn:
    raise ValueError(f"a module-level function (task.env stores its module and name), got {fn!r}")
  module = glob.get("__name__", "")
  by_path = module == "__main__" or module.startswith(("rljax_config_", "rljax_env_")) or module not in sys.modules
  if not by_path:  # an importable module; a file loaded by path (a config file) is named by its path instead
    try:
      by_path = importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
      by_path = True
  if not by_path:
    return f"{module}:{name}"
  if not glob.get("__file__"):
    raise ValueError(f"{fn!r} is in {module!r}, which is neither an importable module nor a file")
  return f"{os.path.abspath(glob['__file__'])}:{name}"


def _import_target(target: str):
  if target.endswith(".py"):
    path = os.path.abspath(os.path.expanduser(target))
    if not os.path.isfile(path):
      raise ValueError(f"no such file {path!r}")
    name = f"rljax_env_{zlib.crc32(path.encode()):08x}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    try:
      spec.loader.exec_module(module)
    except BaseException:
      sys.modules.pop(name, None)
      raise
    return module
  return importlib.import_module(target)


def load_env(spec: str, field: str = "TaskConfig.env"):
  """Imports and calls the factory ``spec`` names (``parse_env_spec``); returns what it returns. Errors are
  ``ValueError`` naming ``field`` and the spec."""
  if callable(spec) and not isinstance(spec, str):
    spec = env_spec(spec)
  bad = lambda why: ValueError(f"invalid config value {field}={spec!r}: {why}")
  try:
    target, name, args, kwargs = parse_env_spec(spec)
  except ValueError as e:
    raise bad(f"must be {e}") from None
  try:
    module = _import_target(target)
  except ValueError as e:
    raise bad(str(e)) from None
  except ImportError as e:
    raise bad(f"cannot import {target!r}: {type(e).__name__}: {e}") from None
  except Exception as e:  # pylint: disable=broad-except
    raise bad(f"importing {target!r} raised {type(e).__name__}: {e}") from None
  factory = getattr(module, name, None)
  if not callable(factory):
    raise bad(f"{target!r} has no function {name!r}" if factory is None else f"{name!r} in {target!r} is not callable")
  try:
    return factory(*args, **kwargs)
  except Exception as e:  # pylint: disable=broad-except
    raise bad(f"the factory {name}(...) raised {type(e).__name__}: {e}") from None


def check_env(env: Any, *, need_demonstrations: bool = False, what: str = "got") -> None:
  """Refuses (``ValueError``) an object that is not a trainable environment, naming every missing or malformed
  member (``ENV_MEMBERS``); ``need_demonstrations``: ``demonstrate`` is required too (SFT)."""
  problems = []
  for name in ("reset", "step"):
    if not callable(getattr(env, name, None)):
      problems.append(f"lacks {ENV_MEMBERS[name]}")
  for name in ("problems", "demonstrate", "success", "eval_metrics", "corpus"):
    if hasattr(env, name) and not callable(getattr(env, name)):
      problems.append(f"has {name} but not a method: must be {ENV_MEMBERS[name]}")
  if need_demonstrations and not callable(getattr(env, "demonstrate", None)):
    problems.append(f"lacks {ENV_MEMBERS['demonstrate']}, which SFT needs (or set sft.steps=0)")
  stops = getattr(env, "stop_strings", ())
  if isinstance(stops, str) or not isinstance(stops, (tuple, list)) or not all(isinstance(s, str) and s for s in stops):
    problems.append(f"has stop_strings={stops!r}: must be a tuple of non-empty strings")
  turns = getattr(env, "max_turns", 4)
  if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
    problems.append(f"has max_turns={turns!r}: must be an int >= 1")
  if problems:
    raise ValueError(f"{what} {type(env).__module__}.{type(env).__qualname__}, which is not an environment rljax "
                     f"can train on: it {'; it '.join(problems)} ({_DOCS})")


@dataclasses.dataclass(frozen=True)
class OwnEnvTask:
  """A user's environment as a task (the module docstring lists what it reads from ``env``).

  Attributes:
    env: the environment (``check_env`` passed). max_turns: most model turns per episode. context_budget: most
    characters of context per window (None: unlimited). spec: the ``task.env`` string it came from.
  """
  env: Any
  max_turns: int = 4
  context_budget: Optional[int] = None
  spec: str = ""
  name: str = OWN_ENV_TASK
  roles: tuple = ()
  num_tasks: Optional[int] = None

  @property
  def episode_config(self) -> EpisodeConfig:
    return EpisodeConfig(stop_strings=tuple(getattr(self.env, "stop_strings", ())), max_turns=self.max_turns,
                         context_budget=self.context_budget)

  def problems(self, split: str, num: int, seed: int) -> list:
    check_split(split)
    if callable(getattr(self.env, "problems", None)):
      out = list(self.env.problems(split, num, seed))
      if len(out) != num or not all(isinstance(p, Problem) for p in out):
        raise ValueError(f"{type(self.env).__qualname__}.problems({split!r}, {num}, {seed}) must return {num} "
                         f"rljax.envs.Problem records, got {len(out)} ({type(out[0]).__name__ if out else '-'})")
      return out

    def draw(rng):
      s = int(rng.integers(1 << 30))
      return str(s), Problem(prompt=f"episode {s}", answer="", meta={"seed": s})
    return sample_split(draw, split, num, seed, 0.1)

  def env_problem(self, problem: Problem) -> Any:
    return problem

  def seed(self, problem: Problem) -> int:
    return int(problem.meta.get("seed", 0))

  def demonstration_episode(self, problem: Problem, rng: Optional[np.random.Generator] = None) -> Episode:
    """The expert's episode: ``env.demonstrate(episode)`` played from ``reset`` to the end (``rng`` unused: the
    expert is the environment's)."""
    del rng
    cfg = self.episode_config
    ep = start(self.env, self.env_problem(problem), self.seed(problem))
    if ep.failed:
      raise ValueError(f"a demonstration's reset failed: {ep.error}")
    while not ep.done:
      action = self.env.demonstrate(ep)
      if not isinstance(action, str):
        raise ValueError(f"{type(self.env).__qualname__}.demonstrate(episode) must return the action text (str), "
                         f"got {type(action).__name__}")
      ep = advance(self.env, ep, action, cfg)
    if ep.failed:
      raise ValueError(f"a demonstration episode failed: {ep.error}")
    return ep

  def success(self, ep: Episode) -> float:
    if ep.failed:
      return 0.0
    fn = getattr(self.env, "success", None)
    return float(fn(ep)) if callable(fn) else float(ep.episode_reward >= 1.0)

  def eval_metrics(self, problems, episodes) -> dict:
    if len(problems) != len(episodes):
      raise ValueError(f"eval_metrics needs one episode per problem, got {len(episodes)} for {len(problems)}")
    fn = getattr(self.env, "eval_metrics", None)
    return dict(fn(problems, episodes)) if callable(fn) else {}

  def corpus(self) -> list:
    texts = [string.printable]
    for p in self.problems("train", 8, 0):
      ep = start(self.env, self.env_problem(p), self.seed(p))
      texts.append(ep.context)
      if callable(getattr(self.env, "demonstrate", None)):
        texts += [s.text for w in self.demonstration_episode(p).windows for s in w]
    fn = getattr(self.env, "corpus", None)
    return texts + (list(fn()) if callable(fn) else [])

  def score(self, completions, problems):
    raise ValueError("an environment task is multi-turn: its episodes are scored by the environment "
                     "(run_episodes), not by score(completions)")

  def demonstration(self, problem, rng):
    raise ValueError("an environment task is multi-turn: use demonstration_episode(problem)")


def own_env_task(spec: str, *, max_turns: Optional[int] = None, context_budget: Optional[int] = None,
                 need_demonstrations: bool = False) -> OwnEnvTask:
  """Builds the environment ``spec`` names (``load_env``), checks it (``check_env``) and resets its first training
  problem (a ``reset`` that raises is refused here, not as a run of failed episodes)."""
  env = load_env(spec)
  check_env(env, need_demonstrations=need_demonstrations,
            what=f"invalid config value TaskConfig.env={spec!r}: it returned")
  task = OwnEnvTask(env, max_turns or getattr(env, "max_turns", 4), context_budget, spec)
  first = task.problems("train", 1, 0)[0]
  ep = start(env, task.env_problem(first), task.seed(first))
  if ep.failed:
    raise ValueError(f"invalid config value TaskConfig.env={spec!r}: the environment's reset fails on its first "
                     f"training problem: {ep.error}")
  return task
