"""The RL step as one declared pipeline (issue #34, item 1): ``rljax.train._phases.PIPELINE`` is the only place
the phase order is written, and its three walkers (the collector, ``RLLoop.step``, the start-up dry run) have
one handler per phase of their side and walk the table in its order."""
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


def test_each_walker_has_exactly_one_handler_per_phase_of_its_side():
  from rljax.train._rl import RLLoop  # pylint: disable=import-outside-toplevel
  from rljax.train._rollout import Collector  # pylint: disable=import-outside-toplevel
  from rljax.train._startup import _DryRun  # pylint: disable=import-outside-toplevel
  assert _handlers(Collector) == {p.name for p in P.phases("collect")}
  assert _handlers(RLLoop) == {p.name for p in P.phases("train")}
  assert _handlers(_DryRun) == {p.name for p in P.PIPELINE}


def test_a_walker_missing_or_inventing_a_phase_is_refused_by_name():
  expected = P.phases("train")
  full = {p.name: print for p in expected}
  assert P.check_handlers("w", full, expected) is full
  with pytest.raises(ValueError, match=r"^w: its handlers must be one per phase .*; missing \['update'\], "
                                       r"unknown \[\]$"):
    P.check_handlers("w", {k: v for k, v in full.items() if k != "update"}, expected)
  with pytest.raises(ValueError, match=r"missing \[\], unknown \['rewards'\]$"):
    P.check_handlers("w", {**full, "rewards": print}, expected)


def test_the_trainer_orders_nothing_itself():
  """The phase order is the table's: RLLoop.step and dry_run call no phase handler by name."""
  from rljax.train import _rl, _startup  # pylint: disable=import-outside-toplevel
  for fn in (_rl.RLLoop.step, _startup.dry_run):
    assert not re.search(r"_phase_\w+\(", inspect.getsource(fn)), fn.__qualname__


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
