"""How the RL loop runs each advantage estimator: the helpers that build the stage its catalog row names
(``stage=``, declared beside the estimator in ``_outcome``, ``_stateful``, ``_token`` and ``_multi``).

Each factory takes the estimator's hyper-parameters; the loop supplies the data (``rewards``, ``group_id``,
``valid``, ``num_groups``, masks, and whatever the estimator needs: answer keys, task ids, critic values, a
greedy baseline, reference log-probs). Outcome rewards are ``data.rewards [B]`` (the sum of the token rewards
when a shaping stage wrote token-level ones, as verl scores them); token-level estimators read
``data.token_rewards`` when present. Padding and filtered-out rows (``valid`` False) get zero advantage.

Transforms (``transform=True``: ``task_normalized``, ``hadw``, ``difficulty_weight``, ``gagar``, ``uniqueness``,
``sign_preserving_modulation``) read the advantages the estimator before them wrote. The multi-reward rows
(``gdpo``, ``dara``, ``sa_mrpo``, ``gd2po``) are ``MultiReward(produces="advantages")`` stages reading
``data.reward_components [B, K]`` (one column per reward of the recipe, in ``data.reward_names`` order; their
``weights`` are in that order). Every factory traces its stage once on a tiny step when it is built (``checked``),
so a bad hyper-parameter fails at ``stage(...)`` time, never mid-run.
"""
from __future__ import annotations

import inspect

import jax
import numpy as np

from rljax.stages import (Advantage, Extra, MultiReward, _input, _signature, data_stage_factory, keyword,
                          probe_step)

# The extra ``oprl(prm='extras')`` reads (``data.logp_prm``; gathered into ``rljax.stages.EXTRAS``), declared by its
# reader: its writer is the task or a user stage (a process reward model), outside the library.
LOGP_PRM = Extra("logp_prm", "f", "BT", "the task or a user stage (a process reward model)",
                 "a PRM's log-probs of the rollout tokens (oprl(prm='extras'))")
EXTRAS = (LOGP_PRM,)

GROUP = {"rewards": "rewards", "group_id": "group_id", "valid": "valid", "num_groups": "num_groups"}
ROWS = {"group_id": "group_id", "valid": "valid", "num_groups": "num_groups"}


def completion(data) -> np.ndarray:
  """The tokens an advantage may sit on: completion tokens of valid rows."""
  return data.completion_mask & data.valid[:, None]


def token_rewards(data):
  """Token rewards when a stage wrote them, else the outcome reward (placed on the last token by the estimator)."""
  return data.token_rewards if data.token_rewards is not None else data.rewards


def passed(data) -> np.ndarray:
  """The task verifier's verdict as bool: ``correct > 0.5`` (``correct`` is its 0/1 score)."""
  return np.asarray(data.correct) > 0.5


def absent(data):  # pylint: disable=unused-argument
  """An optional input the loop does not provide (the function's default, None)."""
  return None


def prm_logp(data) -> np.ndarray:
  """``data.logp_prm [B, T]``: a process reward model's log-probs of the rollout tokens (``oprl``)."""
  x = data.logp_prm
  if x is None:
    raise ValueError("oprl(prm='extras') needs data.extras['logp_prm'] [B, T] (data.logp_prm), the PRM's log-probs "
                     "of the rollout tokens, written by an earlier stage; use prm='policy' without a PRM")
  return np.asarray(x)


def mean_entropy(data) -> np.ndarray:
  """Each row's mean sampler entropy over its completion tokens ``[B]``."""
  ent = data.require("entropy_behavior", "canon")
  m = data.completion_mask
  return (np.where(m, ent, 0.0).sum(1) / np.maximum(m.sum(1), 1)).astype(np.float32)


def sequence_advantages(by: str):
  """Source of ``data.advantages`` as ``[B]``, for a transform defined on whole rows.

  Token-level advantages ``[B, T]`` are accepted when they are constant over each valid row's completion tokens
  (an outcome estimator broadcast over tokens: ``reinforce_pp_baseline``, ``remax`` without token rewards); the
  row's value on its first completion token is taken. Advantages that vary within a row (``gae``, ``tempo``, token
  rewards) are refused: a row-level transform of them is not defined.
  """
  def source(data):
    adv = np.asarray(data.require("advantages", by))
    adv = adv.astype(np.result_type(np.float32, adv.dtype))  # float32, or float64 under jax_enable_x64
    if adv.ndim == 1:
      return adv
    m = completion(data)
    row = np.where(m.any(1), adv[np.arange(adv.shape[0]), np.argmax(m, 1)], 0.0).astype(adv.dtype)
    spread = np.abs(np.where(m, adv - row[:, None], 0.0)).max(initial=0.0)
    if spread > 1e-5 * (1.0 + np.abs(row).max(initial=0.0)):
      raise ValueError(f"{by} transforms sequence-level advantages [B], but the estimator before it wrote "
                       f"token-level ones that vary within a row (by up to {spread:.3g}); put {by} after an "
                       "outcome estimator (grpo, rloo, ...)")
    return row

  return source


def checked(fn, cls=Advantage, *, inputs, doc: str = "", **kw):
  """``data_stage_factory(fn, cls, inputs=inputs, **kw)`` whose stages are traced once when built.

  The trace (``jax.eval_shape`` on a tiny step: no compile, no run) runs ``fn``'s hyper-parameter checks, so a
  bad value fails at ``stage(...)`` time rather than mid-run. K (reward columns, segments, turns) is the length of
  a sequence hyper-parameter (``weights``, ``reward_min``), else 2.
  """
  base = data_stage_factory(fn, cls, inputs=inputs, **kw)
  sig = inspect.signature(base)

  def factory(*args, **kwargs):
    stage = base(*args, **kwargs)
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    hyper = dict(bound.arguments)
    k = next((len(v) for v in hyper.values() if isinstance(v, (list, tuple))), 2)
    tiny = probe_step(components=k, steps=k)
    values = {a: _input(tiny, s, fn.__name__) for a, s in inputs.items()}
    arrays = {a: v for a, v in values.items() if isinstance(v, np.ndarray)}
    static = {a: v for a, v in values.items() if a not in arrays}
    jax.eval_shape(lambda x: fn(**x, **static, **hyper), arrays)
    return stage

  factory.__signature__ = sig
  factory.__name__ = fn.__name__
  factory.__doc__ = doc or base.__doc__
  return factory


def chosen(fn, arg: str, default: str, sources: dict, *, inputs, needs=None, doc: str = "", unprobed=()):
  """Stage factory of ``fn`` whose input ``arg`` comes from a source the recipe names by the keyword ``arg``.

  Args:
    sources: ``{choice: {argument: StepData field or fn(data)}}`` (``arg`` and any argument tied to it, such as
      ``num_keys``); inputs: the other loop-supplied arguments; needs: ``{choice: needs}`` beyond the inputs'.
    unprobed: choices whose source the tiny probe step lacks (e.g. an ``extras`` key): their hyper-parameters are
      checked by tracing the ``default`` choice's stage instead.
  """
  factories = {c: (data_stage_factory(fn, Advantage, inputs={**inputs, **src}, needs=(needs or {}).get(c, ()))
                   if c in unprobed else checked(fn, inputs={**inputs, **src}, needs=(needs or {}).get(c, ())))
               for c, src in sources.items()}
  tied = {a for src in sources.values() for a in src}
  sig = _signature(fn, drop=(*inputs, *tied), add=(keyword(arg, default),))

  def factory(*args, **kwargs):
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    hyper = dict(bound.arguments)
    choice = hyper.pop(arg)
    if choice not in factories:
      raise ValueError(f"{fn.__name__}: {arg} must be one of {list(factories)}, got {choice!r}")
    if choice in unprobed:
      factories[default](**hyper)  # traces the default choice: checks the hyper-parameters now
    return factories[choice](**hyper)

  factory.__signature__ = sig
  factory.__name__ = fn.__name__
  factory.__doc__ = doc
  return factory


def group_estimator(fn, **extra_inputs):
  """Stage factory of an outcome estimator ``fn(rewards, group_id, *, valid, num_groups, ...)``."""
  return checked(fn, inputs={**GROUP, **extra_inputs})


def transform(fn, **inputs):
  """Stage factory of a row-level advantage transform ``fn(advantages, ..., group_id, *, valid, num_groups)``."""
  return checked(fn, inputs={"advantages": sequence_advantages(fn.__name__), **inputs}, transform=True,
                 doc=f"Stage factory of the ``{fn.__name__}`` transform: reads the estimator's advantages "
                     f"(``[B]``, or ``[B, T]`` constant within each row), its hyper-parameters as arguments.")


_MULTI = {"rewards": "reward_components", **ROWS}


def multi_reward(fn):
  """Stage factory of a multi-reward advantage ``fn(rewards [B, K], group_id, *, valid, num_groups, ...)``."""
  return checked(fn, MultiReward, inputs=_MULTI, produces="advantages",
                 doc=f"Stage factory of ``{fn.__name__}``: ``MultiReward(produces='advantages')`` over "
                     "``data.reward_components [B, K]`` (columns in ``data.reward_names`` order: per-reward "
                     "``weights`` follow it); its hyper-parameters as arguments.")
