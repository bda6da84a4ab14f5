"""One-step off-policy rollouts: sample the next batch while the current one trains.

With ``rl.rollout_ahead`` the RL loop, right after it has its batch for step
``s``, starts sampling (and scoring) the batch of step ``s + 1`` on a background
thread from a *copy* of the parameters at that moment — the policy before step
``s``'s updates — and runs step ``s``'s updates meanwhile. Rollout and update
then share the machine instead of taking turns (on a 2-core CPU the GRPO step
of ``benchmarks/grpo_step_bench.py`` gets ~20% shorter), at the price of a
one-step lag between the behaviour policy and the policy being updated: the
"one-step off-policy" schedule of verl's async recipe and of PipelineRL/AReaL
with a staleness of 1. The loop's PPO ratio uses proximal log-probs recomputed
with the current parameters (decoupled PPO), and the sampler's own log-probs
stay in ``TrainBatch.logp_behavior`` for the off-policy corrections (``tis``,
``icepop``, ...) an objective may add.

The copy is needed because the train step donates its state: the sampler must
not read buffers that the update is about to overwrite.
"""
from __future__ import annotations

from concurrent import futures
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp

__all__ = ["RolloutAhead"]


class RolloutAhead:
  """Runs one producer call at a time on a background thread.

  ``submit(fn, *args)`` starts ``fn(*args)``; ``result()`` waits for it and
  returns its value (re-raising its exception); ``close()`` waits for an
  unfinished call and stops the thread. ``snapshot(tree)`` is a ready,
  independent copy of a pytree of arrays (safe to read while the original is
  donated).
  """

  def __init__(self):
    self._pool = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="rljax-rollout-ahead")
    self._future: Optional[futures.Future] = None

  @staticmethod
  def snapshot(tree: Any) -> Any:
    copy = jax.tree_util.tree_map(jnp.copy, tree)
    return jax.block_until_ready(copy)

  def submit(self, fn: Callable, *args) -> None:
    if self._future is not None:
      raise RuntimeError("a rollout is already in flight; call result() first")
    self._future = self._pool.submit(fn, *args)

  @property
  def pending(self) -> bool:
    return self._future is not None

  def result(self) -> Any:
    if self._future is None:
      raise RuntimeError("no rollout in flight")
    future, self._future = self._future, None
    return future.result()

  def close(self) -> None:
    if self._future is not None:
      futures.wait([self._future])
      self._future = None
    self._pool.shutdown(wait=True)

  def __enter__(self) -> "RolloutAhead":
    return self

  def __exit__(self, *exc) -> None:
    self.close()
