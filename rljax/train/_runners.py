"""Where each RL step's batch comes from: the ``Runner`` protocol, its implementations chosen in one place
(:func:`make_runner`), and :func:`run_rl`, the RL stage as one loop over a runner.

A runner gives step ``s``'s collected batch and hears when the step has trained::

    collected, data_state, row = runner.next(s)   # the Collector's batch, the loader state to checkpoint with
                                                  # step s, and the runner's metrics for the step's row
    row |= loop.step(s, collected)                # RLLoop: rewards ... advantages, update, controllers
    runner.after_step(s, row)                     # version s + 1 exists: hand it on, add the runner's metrics
    ...
    runner.close()                                # batches in flight are discarded

The runners:

* :class:`SyncRunner` (the default): samples step ``s``'s batch with the current parameters when asked;
* :class:`AheadRunner` (``rl.rollout_ahead``): step ``s + 1``'s batch is sampled on a background thread from a
  copy of the parameters before step ``s``'s updates, while step ``s`` trains (``rljax/train/_ahead.py``);
* ``AsyncRunner`` (``rl.async_staleness``, one process; ``rljax/train/_async.py``): a producer thread samples
  batch ``k`` once the policy version is at least ``k - eta``; stale rows are dropped; ``after_step`` publishes
  version ``s + 1`` (a reshard onto the rollout sub-mesh, if split);
* across processes (``rl.async_staleness`` with several processes): ``run_rl`` hands the stage to
  ``rljax/train/_multiproc_async.py``, whose training side (``_Trainer``) is a runner of the same loop
  (``run_steps``) and whose rollout side walks the transfer schedule.

The loop over steps and its evaluation / logging / checkpoint cadence is ``rljax/train/_cadence.py``'s
``run_steps``, for every runner.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import jax

from rljax import parallel as par
from rljax.train._ahead import RolloutAhead
from rljax.train._async import AsyncRunner
from rljax.train._cadence import run_steps
from rljax.train._experiment import Experiment
from rljax.train._rl import RLLoop
from rljax.train._signals import preempted

__all__ = ["Runner", "SyncRunner", "AheadRunner", "make_runner", "run_rl"]


@runtime_checkable
class Runner(Protocol):
  """The source of each RL step's batch (module docstring)."""

  def next(self, s: int) -> tuple:
    """``(collected, data_state, row)``: step ``s``'s ``Collected`` batch, the loader state to checkpoint with
    step ``s`` (the batches consumed through it) and the runner's metrics for the step's row."""

  def after_step(self, s: int, row: dict) -> None:
    """Step ``s`` has trained (the policy is version ``s + 1``); adds the runner's metrics to ``row``."""

  def stop_requested(self, flag: dict) -> bool:
    """Whether the run stops after this step (a signal: ``flag["set"]`` on any process taking part); the same
    answer on every process of the loop."""

  def close(self) -> None:
    """Stops background work; batches in flight are discarded (the checkpoint's loader state precedes them)."""


class SyncRunner:
  """Step ``s``'s batch sampled with the current parameters when it is asked for."""

  def __init__(self, loop: RLLoop):
    self.loop = loop

  def sample(self, s: int):
    loop = self.loop
    return loop.sample(s, loop.state.params, loop.state.model_state, loop.controllers.temperature(loop.ctl_state),
                       loop.stage_states["prompt_filters"], loop.stage_states.get("replay"))

  def next(self, s: int) -> tuple:
    return self.sample(s), self.loop.loader.get_state(), {}

  def after_step(self, s: int, row: dict) -> None:
    pass

  def stop_requested(self, flag: dict) -> bool:
    return par.process_any(flag["set"])

  def close(self) -> None:
    pass


class AheadRunner(SyncRunner):
  """``rl.rollout_ahead``: once step ``s``'s batch is in hand, step ``s + 1``'s is sampled on a background thread
  from a copy of the parameters now (before step ``s``'s updates); ``rollout/lag`` is 1 for such a batch, 0 for
  the first step of a (re)start, sampled in place."""

  def __init__(self, loop: RLLoop, stop_at: int):
    super().__init__(loop)
    self.stop_at, self.ahead = stop_at, RolloutAhead()

  def next(self, s: int) -> tuple:
    loop = self.loop
    lag = 1 if self.ahead.pending else 0
    collected = self.ahead.result() if lag else self.sample(s)
    data_state = loop.loader.get_state()  # batches consumed through step s (before the look-ahead draws)
    if s + 1 < self.stop_at:
      self.ahead.submit(loop.sample, s + 1, *RolloutAhead.snapshot((loop.state.params, loop.state.model_state)),
                        loop.controllers.temperature(loop.ctl_state), collected.prompt_states)
    return collected, data_state, {"rollout/lag": float(lag)}

  def close(self) -> None:
    self.ahead.close()


def make_runner(loop: RLLoop, rollout_mesh=None) -> Runner:
  """The runner ``loop.rl`` asks for: ``rl.async_staleness`` (the asynchronous runner, on ``rollout_mesh`` when
  split), ``rl.rollout_ahead``, or the synchronous one. The multi-process case never gets here (``run_rl``)."""
  rl = loop.rl
  if rl.async_staleness is not None:
    return AsyncRunner(loop, start=loop.start, stop_at=rl.steps, rollout_mesh=rollout_mesh)
  if rl.rollout_ahead:
    return AheadRunner(loop, rl.steps)
  return SyncRunner(loop)


def run_rl(exp: Experiment, sft_graphdef, sft_state, recipe, writer, resume: bool, flag, mesh, evals: list, *,
           checked: bool = False):
  """The RL stage: ``rl.steps`` steps of ``recipe``; returns ``(graphdef, state)``. ``checked``: the recipe
  passed ``check_recipe`` already (``train`` checks it before SFT)."""
  cfg, rl = exp.cfg, exp.cfg.rl
  if rl.async_staleness is not None and jax.process_count() > 1:  # rollout and training processes
    from rljax.train._multiproc_async import run_rl_multiprocess  # pylint: disable=import-outside-toplevel
    return run_rl_multiprocess(exp, sft_graphdef, sft_state, recipe, writer, mesh, evals, resume=resume, flag=flag,
                               checked=checked)
  rollout_mesh = None
  if rl.async_staleness is not None and rl.async_rollout_devices:  # the trainer keeps the rest of the mesh
    rollout_mesh, mesh = par.split_mesh(mesh, rl.async_rollout_devices, "RLConfig.async_rollout_devices")
  loop = RLLoop(exp, sft_graphdef, sft_state, recipe, mesh, resume=resume, evals=evals, writer=writer,
                checked=checked)
  if par.process_any(flag["set"]):  # a signal before the first step of this start: no step to finish
    loop.ckpt.close()
    raise preempted(flag, f"stopped before RL step {loop.start + 1}: nothing new saved")
  return run_steps(exp, loop, make_runner(loop, rollout_mesh), flag, evals)
