"""The advantage phase's pieces that are not the walk: the stage states a step starts from, and an advantage
stage's return made the step's ``advantages`` (the phase itself: ``rljax.train._phases.compute_advantages``)."""
from __future__ import annotations

import numpy as np

from rljax.stages import StepData

__all__ = ["as_advantages", "initial_stage_states"]


def initial_stage_states(recipe, num_dataset_prompts: int) -> dict:
  """``{"advantage": {name: state}, "prompt_filters": {name: state}}`` of the recipe's stateful stages, and
  ``"replay": {name: buffer}`` when the recipe has a replay stage (absent otherwise, so that checkpoints of
  recipes without one keep their layout)."""
  states = {"advantage": {a.name: a.init() for a in recipe.advantage if a.init is not None},
            "prompt_filters": {p.name: p.init(num_dataset_prompts) for p in recipe.prompt_filters}}
  if getattr(recipe, "replay", ()):
    states["replay"] = {r.name: r.init() for r in recipe.replay}
  return states


def as_advantages(adv, data: StepData, name: str) -> np.ndarray:
  """Stage ``name``'s advantages ``[B]`` or ``[B, T]`` as float32, 0 on invalid rows; ValueError naming the stage
  on another shape or a non-finite value on a valid row."""
  adv = np.asarray(adv, np.float32)
  b, t = data.tokens.shape
  if adv.shape not in ((b,), (b, t)):
    raise ValueError(f"advantage stage {name!r} returned shape {adv.shape}; expected ({b},) or ({b}, {t})")
  if not np.all(np.isfinite(adv[data.valid])):
    raise ValueError(f"advantage stage {name!r} returned non-finite advantages on valid rows")
  valid = data.valid if adv.ndim == 1 else data.valid[:, None]
  return np.where(valid, adv, 0.0).astype(np.float32)
