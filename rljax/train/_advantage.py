"""The scoring half of an RL step after the forwards: forward-phase shaping, the advantage, advantage filters."""
from __future__ import annotations

import numpy as np

from rljax.stages import StepData, scalar_metrics
from rljax.train._rollout import run_filters, set_rewards
from rljax.train._streams import stream

__all__ = ["compute_advantages", "filter_advantages", "initial_stage_states"]


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


def compute_advantages(recipe, data: StepData, states: dict):
  """Forward-phase shaping -> advantage estimator and transforms.

  Returns ``(data with advantages [and returns], metrics, new advantage states)``. Each stage gets its own
  PRNG key folded from the step's.
  """
  metrics, states = {}, dict(states)
  key = data.key
  for i, s in enumerate(x for x in recipe.shaping if x.phase == "forward"):
    rewards, m = s.fn(data.replace(key=stream(key, "forward_shaping", i)))
    data = set_rewards(data, rewards, s.name)
    metrics.update(scalar_metrics(m, s.name))
  multi = recipe.multi_reward
  if multi is not None and multi.produces == "advantages":
    adv, m = multi.fn(data.replace(key=stream(key, "multi_reward_advantages")))
    data = data.replace(advantages=_as_advantages(adv, data, multi.name))
    metrics.update(scalar_metrics(m, multi.name))
  for i, a in enumerate(recipe.advantage):
    view = data.replace(key=stream(key, "advantage", i))
    if a.init is not None:
      adv, info, states[a.name] = a.fn(view, states[a.name])
    else:
      adv, info = a.fn(view)
    info = dict(info or {})
    returns = info.get("returns")
    data = data.replace(advantages=_as_advantages(adv, data, a.name),
                        returns=data.returns if returns is None else np.asarray(returns, np.float32))
    metrics.update(scalar_metrics(info, a.name))
  return data, metrics, states


def filter_advantages(recipe, data: StepData, metrics: dict) -> StepData:
  """The recipe's advantage-phase filters (``rljax.train._rollout.run_filters``), with their own key."""
  filters = [f for f in recipe.filters if f.phase == "advantages"]
  return run_filters(filters, data.replace(key=stream(data.key, "advantage_filters")), metrics).replace(key=data.key)
