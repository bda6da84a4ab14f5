"""The RL step as one declared pipeline (issues #34 item 1, #50 item 1): ``rljax.train._phases.PIPELINE`` is the
only place the phase order and each phase's stages are written; its rows carry their phase functions, and one
executor (``walk``) runs them in every context (the collector, ``RLLoop.step``, the start-up dry run)."""
import inspect
import re

import jax.numpy as jnp
import numpy as np
import pytest

from rljax.recipes import Recipe
from rljax.stages import Advantage, Filter, Shaping
from rljax.train import _phases as P


def _handlers(cls) -> set:
  return {n[len("_phase_"):] for n, _ in inspect.getmembers(cls, inspect.isfunction) if n.startswith("_phase_")}


def test_the_table_runs_collect_then_train_in_the_issues_order():
  names = [p.name for p in P.PIPELINE]
  assert len(set(names)) == len(names)
  sides = [p.side for p in P.PIPELINE]
  assert sides == sorted(sides)  # "collect" < "train": every collect phase first
  order = ["prompts", "rollouts", "resample", "refill", "filters", "observe_rewards", "replay_rewards", "inputs",
           "advantages", "advantage_filters", "replay_advantages", "train_batch", "task_gradients",
           "observe_advantages", "update", "controllers"]
  assert names == order
  assert [p.name for p in P.phases("collect", per_round=True)] == ["prompts", "rollouts", "resample", "refill"]
  assert all(not p.per_round for p in P.phases("train"))
  assert all(not (p.needs_rows or p.checks_rows) for p in P.phases("collect"))
  with pytest.raises(ValueError, match="side must be"):
    P.phases("rollout")


def test_each_row_carries_its_phase_function_and_selector_and_no_walker_has_handlers():
  """Issue #50 item 1: the table runs the step. Every row names its phase function and its stage selector; the
  live collector, the trainer and the start-up check are contexts of one executor (``walk``) with no handler of
  their own (no ``_phase_<name>`` method, no handler dict)."""
  from rljax.train._rl import RLLoop  # pylint: disable=import-outside-toplevel
  from rljax.train._rollout import Collector  # pylint: disable=import-outside-toplevel
  from rljax.train._startup import _DryRun  # pylint: disable=import-outside-toplevel
  for p in P.PIPELINE:
    assert callable(p.fn) and p.fn.__module__ == P.__name__, p.name
    assert isinstance(p.select(Recipe()), dict), p.name
  for cls in (Collector, RLLoop, _DryRun):
    assert not _handlers(cls), cls
    assert "_handlers" not in inspect.getsource(cls), cls


def test_the_selectors_are_the_only_place_a_stage_is_assigned_a_phase():
  """The walkers test no stage's phase or hook by string: those tests are the rows' selectors (``_phases``)."""
  from rljax.train import _advantage, _rl, _rollout, _startup  # pylint: disable=import-outside-toplevel
  pattern = re.compile(r'\.phase ==|observe_phase ==|produces ==|\.refill\b(?!")|\.(prompts|hints|draw|observe) is '
                       r"(not )?None")
  for source in (_advantage, _rl, _rollout, _startup._DryRun, _startup.dry_run):
    assert not pattern.search(inspect.getsource(source)), source


def test_the_selectors_pick_each_stage_for_its_phase():
  keep = lambda d: (d.valid, {})
  refill = Filter(keep, name="refill", refill=True)
  batch = Filter(keep, name="batch")
  late = Filter(keep, name="late", phase="advantages")
  rollout = Shaping(lambda d: (d.rewards, {}), name="rollout")
  forward = Shaping(lambda d: (d.rewards, {}), name="forward", phase="forward")
  got = P.select_all(Recipe(filters=(refill, batch, late), shaping=(rollout, forward)))
  names = lambda part: [s.name for s in part]
  assert names(got["refill"]["filters"]) == ["refill"]
  assert names(got["filters"]["filters"]) == ["batch"]
  assert names(got["advantage_filters"]["filters"]) == ["late"]
  assert names(got["rollouts"]["shaping"]) == ["rollout"]
  assert names(got["advantages"]["shaping"]) == ["forward"]
  assert got["replay_rewards"]["replay"] == () and got["task_gradients"]["needs"] == ()


def test_the_executor_skips_row_gated_phases_when_no_row_is_valid():
  """``walk``: a ``needs_rows`` phase runs only while ``ctx.any_rows`` said yes at the last ``checks_rows``."""
  calls = []
  rows = tuple(P.Phase(n, "train", (), "", lambda ctx, run, st, n=n: calls.append(n), lambda r: {},
                       needs_rows=gated, checks_rows=checks)
               for n, gated, checks in (("a", False, False), ("b", True, True), ("c", True, False)))

  class Ctx:
    stages = {r.name: {} for r in rows}

    @staticmethod
    def any_rows(data):
      calls.append("any_rows")
      return bool(data)

  for data, want in ((True, ["a", "any_rows", "b", "c"]), (False, ["a", "any_rows"])):
    calls.clear()
    P.walk(rows, Ctx, type("Run", (), {"data": data}))
    assert calls == want


def test_the_trainer_orders_nothing_itself():
  """The phase order is the table's: RLLoop.step, the collector and dry_run walk it and call no phase function by
  name."""
  from rljax.train import _rl, _rollout, _startup  # pylint: disable=import-outside-toplevel
  for fn in (_rl.RLLoop.step, _rollout.Collector.__call__, _rollout.Collector._round, _startup.dry_run):
    src = inspect.getsource(fn)
    assert "walk(" in src and not re.search(r"_phase_\w+\(|\._(prompts|rollouts|refill|filters|update)\(", src), \
        fn.__qualname__


def test_the_multi_process_runner_is_a_context_of_the_one_executor():
  """Issue #50 item 1: the multi-process runner re-implements no phase. Both of its sides run the one
  ``Collector`` (which walks the table's collect rows) with their own sampler call (the rollout side's samples and
  sends, the training side's receives), and the training side trains through ``run_steps`` -> ``RLLoop.step`` (the
  train rows); it imports no phase function or selector and calls no stage hook itself."""
  import ast  # pylint: disable=import-outside-toplevel
  from rljax.train import _multiproc_async as M  # pylint: disable=import-outside-toplevel
  tree = ast.parse(inspect.getsource(M))
  imported = {(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
  assert {("rljax.train._rollout", "Collector"), ("rljax.train._rl", "RLLoop"),
          ("rljax.train._cadence", "run_steps")} <= imported
  assert not {m for m, _ in imported} & {"rljax.train._phases", "rljax.train._advantage", "rljax.train._inputs",
                                          "rljax.train._mechanics", "rljax.train._rows", "rljax.stages"}
  hooks = {"fn", "select", "draw", "observe", "prompts", "hints", "splice", "init"}  # a stage's hooks
  called = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
  assert not called & hooks, sorted(called & hooks)
  for cls in (M._Sampler, M._Trainer):
    src = inspect.getsource(cls)
    assert "sample_fn=" in src and not _handlers(cls) and "_handlers" not in src, cls  # the Collector's sampler call
  assert "self.loop.collect" not in inspect.getsource(M._Sampler) and "loop.collect(" in inspect.getsource(M._Trainer)


def test_the_dry_run_walks_the_stages_in_the_tables_order():
  """Recording stages in five slots: the start-up check calls them in PIPELINE order (shaping in "rollouts",
  the refill filter in "refill", the rewards-phase filter in "filters", the advantage in "advantages", the
  advantages-phase filter in "advantage_filters"), then the loss term in "update"."""
  from test_startup_contracts import _check  # pylint: disable=import-outside-toplevel
  calls = []

  def rec(name, out):
    def fn(data):
      calls.append(name)
      return out(data)
    fn.__name__ = name
    return fn

  def term(out, batch):
    calls.append("loss")
    return -batch.advantages * jnp.exp(out.logp - batch.logp_old), {}

  keep = lambda d: (np.ones(d.batch_size, bool), {})
  recipe = Recipe(
      shaping=Shaping(rec("shaping", lambda d: (d.rewards, {})), name="shaping"),
      filters=(Filter(rec("advantage_filter", keep), name="advantage_filter", phase="advantages"),
               Filter(rec("batch_filter", keep), name="batch_filter"),
               Filter(rec("refill_filter", keep), name="refill_filter", refill=True)),
      advantage=Advantage(rec("advantage", lambda d: (np.zeros(d.batch_size, np.float32), {})), name="advantage"),
      loss=(term,))
  _check(recipe)
  firsts = list(dict.fromkeys(calls))
  assert firsts == ["shaping", "refill_filter", "batch_filter", "advantage", "advantage_filter", "loss"], calls
