"""The recipe's controllers in the RL loop (``rljax.stages.Controller``; catalog adapters in ``rljax.control``).

After every RL step each controller observes the step (``rljax.stages.ControlInputs``) and sets the *next*
step's values: hparams in ``state.hparams`` (float32 arrays read by the loss: changing them never recompiles
the train step) or the sampling temperature. The controller states (pytrees of float32 arrays) are saved with
every RL checkpoint and restored by ``--resume``. Logged as ``<controller>/<key>``: the values *used during*
the step plus the observation that drives the next update.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding

from rljax.stages import ControlInputs, Controller, scalar_metrics

__all__ = ["LoopControllers"]


class LoopControllers:
  """A recipe's controllers: ``init``, ``temperature``, ``apply`` (hparams into the state), ``step``."""

  def __init__(self, controllers: Sequence[Controller], temperature: float):
    self.controllers = tuple(controllers)
    self.default_temperature = float(temperature)

  def init(self) -> dict:
    """``{controller name: initial state}`` (checkpointed with the run)."""
    return {c.name: c.init() for c in self.controllers}

  def temperature(self, states: Mapping) -> float:
    """The sampling temperature of the next rollout (the configured one unless a controller moves it)."""
    for c in self.controllers:
      if c.temperature is not None:
        return float(c.temperature(states[c.name]))
    return self.default_temperature

  def apply(self, train_state, states: Mapping):
    """``train_state`` with the controllers' hparams written in (same shapes and dtypes: no recompile)."""
    hp = {}
    for c in self.controllers:
      for k, v in c.hparams(states[c.name]).items():
        # a fresh host copy (the train state is donated to the next step, the controller state must survive
        # it), placed like the value it replaces (replicated over the run's mesh, global on multi-host)
        host = np.asarray(jax.device_get(v), np.float32)
        old = train_state.hparams.get(k)
        if isinstance(old, jax.Array) and isinstance(old.sharding, NamedSharding):
          from rljax.parallel import place_global  # pylint: disable=import-outside-toplevel
          hp[k] = place_global(host, old.sharding)
        else:
          hp[k] = jnp.asarray(host)
    return train_state.with_hparams(**hp) if hp else train_state

  def step(self, train_state, states: Mapping, inputs: ControlInputs):
    """Every controller observes the finished step; returns ``(train_state, new states, metrics)``."""
    new, metrics = dict(states), {}
    for c in self.controllers:
      new[c.name], m = c.update(states[c.name], inputs)
      metrics.update(scalar_metrics(m, c.name))
    return self.apply(train_state, new), new, metrics
