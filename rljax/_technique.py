"""The record every catalogued technique is described by."""
from __future__ import annotations

import dataclasses
from typing import Callable

KINDS = (
    "policy_loss", "correction", "kl", "entropy", "aggregation", "supervised",
    "controller", "advantage", "filter", "reward", "shaping", "multi_reward",
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
  """
  name: str
  kind: str
  fn: Callable
  formula: str
  source: str

  def __post_init__(self):
    if not self.name or not self.name.replace("_", "a").isalnum() or self.name.lower() != self.name:
      raise ValueError(f"Technique.name must be snake_case, got {self.name!r}")
    if self.kind not in KINDS:
      raise ValueError(f"Technique.kind must be one of {KINDS}, got {self.kind!r}")
    if not callable(self.fn):
      raise ValueError(f"Technique.fn of {self.name!r} must be callable")
