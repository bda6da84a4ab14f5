"""The record every catalogued technique is described by."""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

KINDS = (
    "policy_loss", "correction", "kl", "entropy", "aggregation", "supervised",
    "controller", "advantage", "filter", "reward", "shaping", "multi_reward", "value",
    "kernel", "sampler", "model",
)


@dataclasses.dataclass(frozen=True)
class Technique:
  """One row of ``rljax.catalog()``.

  Attributes:
    name: stable snake_case name (what issues, configs and docs call it).
    kind: one of ``KINDS``.
    fn: the public callable (usually a factory closing over hyper-parameters).
    formula: one-line formula.
    source: seed file + line and/or arXiv id.
    stage: ``stage(**hyper_parameters) -> rljax.stages.Stage``: how the RL loop runs the
      technique (``None`` for rows that are not a stage of the RL step: kernels, samplers,
      models). Its keyword arguments are the technique's hyper-parameters; what the loop
      supplies (rewards, group ids, masks, ...) is not among them. A recipe names the row
      (``rljax.recipes.stage("qae", quantile=0.7)`` or ``--set rl.advantage='qae(quantile=0.7)'``)
      and this factory builds the stage: adding a row with a ``stage`` makes the technique
      usable from Python and the command line with no change to the trainer.
  """
  name: str
  kind: str
  fn: Callable
  formula: str
  source: str
  stage: Optional[Callable] = None

  def __post_init__(self):
    if not self.name or not self.name.replace("_", "a").isalnum() or self.name.lower() != self.name:
      raise ValueError(f"Technique.name must be snake_case, got {self.name!r}")
    if self.kind not in KINDS:
      raise ValueError(f"Technique.kind must be one of {KINDS}, got {self.kind!r}")
    if not callable(self.fn):
      raise ValueError(f"Technique.fn of {self.name!r} must be callable")
    if self.stage is not None and not callable(self.stage):
      raise ValueError(f"Technique.stage of {self.name!r} must be callable or None")
