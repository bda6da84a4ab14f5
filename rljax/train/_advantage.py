"""The scoring half of an RL step after the forwards: forward-phase shaping, the advantage, advantage filters."""
from __future__ import annotations

import numpy as np

from rljax.stages import StepData, scalar_metrics
from rljax.train._rollout import run_filters, set_rewards
from rljax.train._streams import stream

__all__ = ["compute_advantages", "filter_advantages", "initial_stage_states", "unchecked"]


def initial_stage_states(recipe, num_dataset_prompts: int) -> dict:
  """``{"advantage": {name: state}, "prompt_filters": {name: state}}`` of the recipe's stateful stages, and
  ``"replay": {name: buffer}`` when the recipe has a replay stage (absent otherwise, so that checkpoints of
  recipes without one keep their layout)."""
  states = {"advantage": {a.name: a.init() for a in recipe.advantage if a.init is not None},
            "prompt_filters": {p.name: p.init(num_dataset_prompts) for p in recipe.prompt_filters}}
  if getattr(recipe, "replay", ()):
    states["replay"] = {r.name: r.init() for r in recipe.replay}
  return states


def _as_advantages(adv, data: StepData, name: str) -> np.ndarray:
  adv = np.asarray(adv, np.float32)
  b, t = data.tokens.shape
  if adv.shape not in ((b,), (b, t)):
    raise ValueError(f"advantage stage {name!r} returned shape {adv.shape}; expected ({b},) or ({b}, {t})")
  if not np.all(np.isfinite(adv[data.valid])):
    raise ValueError(f"advantage stage {name!r} returned non-finite advantages on valid rows")
  valid = data.valid if adv.ndim == 1 else data.valid[:, None]
  return np.where(valid, adv, 0.0).astype(np.float32)


def unchecked(key: str, stage, fn):
  """The live step's stage call: ``fn()``. The start-up check (``rljax.train._startup``) passes a ``call`` that
  also checks the return against contract ``key`` (``rljax.train._contracts``), naming the stage."""
  del key, stage
  return fn()


def compute_advantages(recipe, data: StepData, states: dict, call=unchecked):
  """Forward-phase shaping -> advantage estimator and transforms.

  Returns ``(data with advantages [and returns], metrics, new advantage states)``. Each stage gets its own
  PRNG key folded from the step's (``rljax.train._streams``). ``call(contract key, stage, fn)`` runs each stage
  call ``fn()``: ``unchecked`` in the step, a checking one in the start-up check (the same code on its synthetic
  batch).
  """
  metrics, states = {}, dict(states)
  key = data.key
  for i, s in enumerate(x for x in recipe.shaping if x.phase == "forward"):
    view = data.replace(key=stream(key, "forward_shaping", i))
    rewards, m = call("shaping", s, lambda s=s, view=view: s.fn(view))
    data = set_rewards(data, rewards, s.name)
    metrics.update(scalar_metrics(m, s.name))
  multi = recipe.multi_reward
  if multi is not None and multi.produces == "advantages":
    view = data.replace(key=stream(key, "multi_reward_advantages"))
    adv, m = call("multi_reward.advantages", multi, lambda: multi.fn(view))
    data = data.replace(advantages=_as_advantages(adv, data, multi.name))
    metrics.update(scalar_metrics(m, multi.name))
  for i, a in enumerate(recipe.advantage):
    view = data.replace(key=stream(key, "advantage", i))
    if a.init is not None:
      adv, info, states[a.name] = call("advantage.stateful", a, lambda a=a, view=view: a.fn(view, states[a.name]))
    else:
      adv, info = call("advantage", a, lambda a=a, view=view: a.fn(view))
    info = dict(info or {})
    if a.returns:  # the critic's targets, which the value loss reads
      call("advantage.returns", a, lambda info=info: info.get("returns"))
    returns = info.get("returns")
    data = data.replace(advantages=_as_advantages(adv, data, a.name),
                        returns=data.returns if returns is None else np.asarray(returns, np.float32))
    metrics.update(scalar_metrics(info, a.name))
  return data, metrics, states


def filter_advantages(recipe, data: StepData, metrics: dict) -> StepData:
  """The recipe's advantage-phase filters (``rljax.train._rollout.run_filters``), with their own key."""
  filters = [f for f in recipe.filters if f.phase == "advantages"]
  return run_filters(filters, data.replace(key=stream(data.key, "advantage_filters")), metrics).replace(key=data.key)
