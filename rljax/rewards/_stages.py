"""How the RL loop runs each reward and shaping row: the stage factories the rows name (``stage=``).

Rewards are host functions ``(completions, problems) -> [B]`` (``rljax.stages.Reward``): the text verifiers
compare each completion with its problem's reference answer (``problem.answer``). Shaping stages
(``rljax.stages.Shaping``) return new rewards from the step's data: lengths are completion token counts,
``correct`` is the task's verifier (0/1) whatever the reward.

Numeric rewards (``gaussian_reward``, ``clipped_linear_reward``) compare the number a completion gives with its
problem's reference, both read by a ``parse`` argument (see :func:`gaussian_reward`). Process-reward shaping
(``prm_clip``, ``prm_delta``, ``correctness_gated``) reads ``data.step_rewards [B, S]`` / ``step_mask`` (the
task's ``step_rewards``) and returns one sequence reward: for the PRM refinements the outcome plus the sum of
the refined valid steps, ``data.rewards + sum_s r'_s`` (Gao et al. add the success reward to the dense
process return); for ``correctness_gated`` ``r_outcome + w * 1[correct] * mean_s(process)`` over valid steps.
``length_penalty`` adds its length reward to ``data.rewards``; ``grpo_lambda`` and ``rubric_dropout``
(criteria: the recipe's reward columns ``data.reward_components``; its key: ``data.key``) replace it.
Every data stage runs once on a tiny step when built (``rljax.filters._stages.checked``): bad
hyper-parameters fail at start-up.
"""
from __future__ import annotations

import functools
from typing import Mapping, Optional

import numpy as np

from rljax._answers import digits_value
from rljax.rewards import _agentic, _safe, _shaping, _verifiers
from rljax.stages import MultiReward, Reward, Shaping, _signature, checked, data_stage_factory, probe_step


def verifier(fn):
  """Stage factory of a text verifier ``fn(completions, references, **hyper)``: references = answers."""
  sig = _signature(fn, drop=("completions", "references", "return_info"))

  def factory(**hyper):
    bound = sig.bind(**hyper)
    fn([""], [""], **bound.arguments)  # validates the hyper-parameters now

    def reward(completions, problems):
      return fn(list(completions), [p.answer for p in problems], **bound.arguments)

    reward.__name__ = fn.__name__
    return Reward(reward, name=fn.__name__)

  factory.__signature__ = sig
  factory.__name__ = fn.__name__
  factory.__doc__ = f"Stage factory of the ``{fn.__name__}`` verifier (references: each problem's answer)."
  return factory


def overlong_penalty(buffer_len: int, *, max_len=None, penalty_factor: float = 1.0, clip: bool = False):
  """DAPO overlong shaping: ``r + min(-(len - (L_max - L_buf)) / L_buf * factor, 0)``.

  ``max_len`` defaults to the run's ``max_new_tokens`` (DAPO's L_max).
  """
  def build(l_max):
    if l_max is not None:
      _shaping.overlong_penalty(np.zeros((1,)), max_len=l_max, buffer_len=buffer_len,
                                penalty_factor=penalty_factor, clip=clip)  # validates now

    def fn(data):
      pen, metrics = _shaping.overlong_penalty(data.lengths, max_len=l_max, buffer_len=buffer_len,
                                               penalty_factor=penalty_factor, clip=clip)
      return data.rewards + np.asarray(pen, np.float32), metrics

    return Shaping(fn, name="overlong_penalty", bind_fn=None if l_max is not None else bind)

  def bind(stage, facts):
    return build(facts.max_new_tokens)

  return build(max_len)


# ----------------------------------------------------------------------------- numeric rewards


def _number(text) -> Optional[float]:
  """The final answer of a solution as a number, read as ``math_answer`` reads it (``extract_math_answer``,
  normalised), or None."""
  ans = _verifiers.extract_math_answer(text) if isinstance(text, str) else None
  value = None if ans is None else _verifiers._to_number(_verifiers.normalize_math_answer(ans))
  return None if value is None else float(value)


# ``parse`` names: "number" for any task whose answers are numbers (GSM8K, MATH, countdown targets);
# "arithmetic" for the built-in ArithmeticTask, whose answers are written lowest digit first.
PARSERS = {"number": _number, "arithmetic": functools.partial(digits_value, reverse=True)}


def _parser(parse):
  if callable(parse):
    return parse
  if parse not in PARSERS:
    raise ValueError(f"parse must be one of {sorted(PARSERS)} or a callable text -> float | None, got {parse!r}")
  return PARSERS[parse]


def _numbers(parser, completions, problems):
  """``(pred [B], target [B])`` float32: NaN where a completion does not parse; an unparsable reference raises."""
  pred = np.array([np.nan if (v := parser(c)) is None else v for c in completions], np.float32)
  target = np.array([np.nan if (v := parser(p.answer)) is None else v for p in problems], np.float32)
  if not np.all(np.isfinite(target)):
    bad = int(np.flatnonzero(~np.isfinite(target))[0])
    raise ValueError(f"the reference answer {problems[bad].answer!r} is not a number for this parse")
  return pred, target


def gaussian_reward(*, sigma: float = 1.0, invalid_value: float = 0.0, parse="number"):
  """``rljax.rewards.gaussian_reward`` as a Reward: ``exp(-(s_hat - s)^2 / (2 sigma^2))``.

  ``s_hat`` is the number the completion gives and ``s`` its problem's reference (``problem.answer``), both
  read by ``parse``; a completion that does not parse scores ``invalid_value``. A Reward sees only
  ``(completions, problems)`` and a ``Problem`` carries no code (its ``meta`` is JSON), so the parser is an
  argument: ``"number"`` (``extract_math_answer``, as ``math_answer`` reads answers), ``"arithmetic"``
  (``ArithmeticTask.answer_value``: digits lowest first) or, from Python, a callable ``text -> float | None``.
  """
  parser = _parser(parse)
  _shaping.gaussian_reward(np.zeros(1), np.zeros(1), sigma=sigma, invalid_value=invalid_value)  # validates

  def reward(completions, problems):
    pred, target = _numbers(parser, completions, problems)
    return np.asarray(_shaping.gaussian_reward(pred, target, sigma=sigma, invalid_value=invalid_value)[0])

  reward.__name__ = "gaussian_reward"
  return Reward(reward, name="gaussian_reward")


def clipped_linear_reward(*, scale: float = 1.0, offset: float = 1.0, low: float = 0.0, high: float = 1.0,
                          parse="number"):
  """``rljax.rewards.clipped_linear_reward`` as a Reward on ``d = -|s_hat - s|``: ``clip(offset - scale |s_hat -
  s|, low, high)``.

  Numbers as in :func:`gaussian_reward` (``parse``). With the defaults: 1 for the exact value, falling linearly
  to 0 at an error of ``offset / scale``. A completion that does not parse scores ``low``.
  """
  parser = _parser(parse)
  _shaping.clipped_linear_reward(np.zeros(1), scale=scale, offset=offset, low=low, high=high)  # validates

  def reward(completions, problems):
    pred, target = _numbers(parser, completions, problems)
    ok = np.isfinite(pred)
    d = -np.abs(np.where(ok, pred, target) - target)
    r = _shaping.clipped_linear_reward(d, scale=scale, offset=offset, low=low, high=high)[0]
    return np.where(ok, np.asarray(r), np.float32(low)).astype(np.float32)

  reward.__name__ = "clipped_linear_reward"
  return Reward(reward, name="clipped_linear_reward")


# ----------------------------------------------------------------------------- shaping from the step's data


def _process_mean(data) -> np.ndarray:
  """``[B]`` mean of each row's valid process (step) rewards; 0 for a row without a valid step."""
  r = np.asarray(data.require("step_rewards", "correctness_gated"))
  r = r.astype(np.result_type(np.float32, r.dtype))  # float64 stays float64 (x64)
  m = np.asarray(data.step_mask if data.step_mask is not None else np.ones(r.shape, bool), bool)
  return np.where(m, r, 0.0).sum(1) / np.maximum(m.sum(1), 1)


def plus_outcome_steps(out, data):
  """Shaped step rewards ``[B, S]`` -> the sequence reward ``data.rewards + sum_s r'_s`` (outcome + process)."""
  steps, metrics = out
  steps = np.asarray(steps)
  return data.rewards + steps.astype(np.result_type(np.float32, steps.dtype)).sum(1), metrics


def shaping_stage(fn, inputs, probe=None, **kw):
  """The stage factory of a shaping function ``fn``: ``data_stage_factory(fn, Shaping, inputs=inputs, **kw)``,
  whose stages run once on a tiny step when built (``probe(hyper_parameters)`` gives that step, if passed)."""
  build = data_stage_factory(fn, Shaping, inputs=inputs, **kw)
  return checked(build) if probe is None else checked(build, probe)


_GROUP = {"group_id": "group_id", "num_groups": "num_groups", "valid": "valid"}
STEPS = {"step_rewards": "step_rewards", "step_mask": "step_mask"}


def composite(weights: Optional[Mapping[str, float]] = None):
  """``rljax.rewards.composite`` as a ``MultiReward(produces="rewards")``: ``r = sum_c w_c r_c``.

  The components are the recipe's ``rewards`` (columns of ``data.reward_components [B, K]``, named by
  ``data.reward_names``); ``weights`` maps reward names to weights, a reward it does not name weighs 1 (default:
  equal weights 1). Weights are checked when the stage is built; a name that is not a reward of the recipe
  raises when the stage first runs (the loop's start-up dry run). Logs ``mean/<name>`` of each component.
  """
  if weights is not None and not isinstance(weights, Mapping):
    raise ValueError(f"composite: weights must be a mapping {{reward name: weight}}, got {weights!r}")
  weights = dict(weights or {})
  if weights:
    _safe.composite({n: _verifiers.exact_match for n in weights}, weights)  # validates names and weights

  def fn(data):
    cols = np.asarray(data.require("reward_components", "composite"))
    cols = cols.astype(np.result_type(np.float32, cols.dtype))  # float64 stays float64 (x64)
    names = tuple(data.reward_names)
    unknown = sorted(set(weights) - set(names))
    if unknown:
      raise ValueError(f"composite: weights name {unknown}, which are not rewards of the recipe {list(names)}")
    w = np.asarray([float(weights.get(n, 1.0)) for n in names], cols.dtype)
    v = np.asarray(data.valid, bool)
    metrics = {f"mean/{n}": float(cols[v, k].mean()) if v.any() else 0.0 for k, n in enumerate(names)}
    return cols @ w, metrics

  return MultiReward(fn, name="composite", produces="rewards", needs={"reward_components"})


def _turn_counts(data) -> np.ndarray:
  """``[B]`` model turns of each episode: its valid step (turn) columns, ``data.step_mask [B, S]``."""
  r = data.require("step_rewards", "a turn-count shaping stage")
  m = data.step_mask if data.step_mask is not None else np.ones(np.shape(r), bool)
  return np.asarray(m, bool).sum(1).astype(np.float64)


def shortest_path_reward(*, success: float = 1.0):
  """MobileRL shortest-path adjustment as a ``Shaping`` stage: the episode reward ``data.rewards`` less
  ``max(l − L, 0)/(2l)``, ``l`` = the episode's turns (``data.step_mask``), ``L`` = the fewest turns of a
  success in its group (``rljax.rewards.shortest_path_reward``)."""
  _agentic.shortest_path_reward(np.zeros(1), np.ones(1), np.zeros(1, int), success=success)  # validates now

  def fn(data):
    out, info = _agentic.shortest_path_reward(data.rewards, _turn_counts(data), data.group_id, success=success,
                                              valid=data.valid)
    return out, {"mean_penalty": info["mean_penalty"]}

  return Shaping(fn, name="shortest_path_reward", needs={"step_rewards"})


TOOL_CALL_COUNTS = ("turns", "calls")


def tool_call_reward(*, coef: float = 1.0, decay_steps: int = 200, schedule: str = "cosine", max_calls: int = 10,
                     count: str = "turns", pattern: str = _agentic.DEFAULT_CALL_PATTERN):
  """SPEAR's tool-call reward as a ``Shaping`` stage: ``data.rewards + coef·min(1, n/K)·w(step)``, ``w`` the cosine
  decay over ``decay_steps`` RL steps (``rljax.rewards.tool_call_reward``; defaults are the authors': K = 10,
  T = 200).

  ``count="turns"`` (default, the authors' counter ``episode_lengths``): ``n`` = the episode's environment steps,
  i.e. its model turns (``len(data.turns[i])``); ``count="calls"``: ``n`` = matches of ``pattern`` in the
  episode's model turns (default ``<call>``, rljax.envs' tool calls).
  """
  if count not in TOOL_CALL_COUNTS:
    raise ValueError(f"count must be one of {TOOL_CALL_COUNTS}, got {count!r}")
  _agentic.tool_call_reward(np.zeros(1), np.zeros(1), 0, coef=coef, decay_steps=decay_steps, schedule=schedule,
                            max_calls=max_calls)  # validates now
  _agentic.count_calls([[""]], pattern)

  def fn(data):
    turns = data.require("turns", "tool_call_reward")
    if count == "calls":
      n = _agentic.count_calls(turns, pattern)
    else:
      if any(isinstance(t, (str, bytes)) for t in turns):
        raise ValueError("tool_call_reward: data.turns must hold one sequence of turn strings per row")
      n = np.array([len(t) for t in turns], np.int64)
    out, info = _agentic.tool_call_reward(data.rewards, n, data.step, coef=coef, decay_steps=decay_steps,
                                          schedule=schedule, max_calls=max_calls)
    return out, {"weight": info["weight"], "call_rate": info["call_rate"]}

  return Shaping(fn, name="tool_call_reward", needs={"turns"})


# the shaped reward replaces data.rewards (GRPO-lambda: penalised in on-groups, else 1[correct])
grpo_lambda = shaping_stage(_shaping.grpo_lambda, {"correct": "correct", "lengths": "lengths", **_GROUP,
                                                   "penalized": lambda data: None})
# Kimi's length reward is added to data.rewards
length_penalty = shaping_stage(_shaping.length_penalty, {"lengths": "lengths", "correct": "correct", **_GROUP},
                               result=lambda out, data: (data.rewards + np.asarray(out[0]), out[1]))
# criteria = the recipe's reward columns; the rubric score replaces data.rewards (their sum)
rubric_dropout = shaping_stage(
    _shaping.rubric_dropout, {"key": "key", "scores": "reward_components", "group_id": "group_id",
                              "criterion_mask": lambda data: None},
    probe=lambda kw: probe_step(components=len(kw["weights"]) if kw.get("weights") is not None else 2),
    result=lambda out, data: (out[0], out[2]))
correctness_gated = shaping_stage(_shaping.correctness_gated,
                                  {"outcome": "rewards", "process": _process_mean,
                                   "correct": lambda data: np.asarray(data.correct) * data.valid},
                                  needs=("step_rewards",))
