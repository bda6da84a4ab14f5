"""Technique mechanics of a sampling round, apart from sampling, scoring and padding (``Collector``): each runs
only when a stage declares it (the ``"rollouts"`` and ``"prompts"`` rows' selectors, ``rljax.train._phases``).

* a greedy baseline (``greedy_rewards``, ReMax's): one greedy rollout of each prompt, scored and not counted in
  the step's statistics, its reward repeated over the group's rows;
* pilot rollouts (a prompt filter's ``pilot=n``): ``n`` scored rollouts of each candidate prompt shown to its
  ``select``; a committed group's pilot rows then join its ``group_size - n`` committed rows.

``ctx`` is the collector: ``sample_scored(r, problems, index, n, sample_key, score_key, greedy=, record=)`` (this
process's rows of ``n`` samples of each prompt, scored), ``group_size``, ``lo``, ``hi``.
"""
from __future__ import annotations

import numpy as np

from rljax.stages import StepData
from rljax.train._rows import concat_steps
from rljax.train._streams import stream

__all__ = ["greedy_baseline", "pilot_rollouts", "join_pilots"]


def greedy_baseline(ctx, r) -> np.ndarray:
  """``[P g]``: each prompt's greedy rollout's reward, repeated over its group's ``g`` rows."""
  rows = ctx.sample_scored(r, r.problems, r.index, 1, stream(r.side, "greedy_sample"), stream(r.side, "greedy_score"),
                           greedy=True, record=False)
  return np.repeat(rows.rewards, ctx.group_size)


def pilot_rollouts(ctx, r, problems, index, key, pilot: int) -> StepData:
  """``pilot`` scored rollouts of each candidate prompt (``key``: the draw's), for a prompt filter's ``select``."""
  return ctx.sample_scored(r, problems, index, pilot, stream(key, "pilot_sample"), stream(key, "pilot_score"))


def join_pilots(ctx, data: StepData, blocks, n: int, pilot: int) -> StepData:
  """Each group: its prompt's ``pilot`` pilot rows (``blocks``: per group the pilot rollout and the prompt's place
  in it), then its ``n`` committed rows of ``data``; group ids ``lo .. hi - 1``."""
  parts, rows, offsets = [data], [], {}
  for p, block in enumerate(blocks):
    pilot_data, q = block if block and block[0] is not None else (None, None)
    if pilot_data is None:  # an unfilled group: any rows, masked out by its count 0
      rows.append(np.concatenate([np.full(pilot, p * n), np.arange(p * n, (p + 1) * n)]))
      continue
    if id(pilot_data) not in offsets:  # one pilot rollout per draw of candidates
      offsets[id(pilot_data)] = sum(d.batch_size for d in parts)
      parts.append(pilot_data)
    start = offsets[id(pilot_data)] + q * pilot
    rows.append(np.concatenate([np.arange(start, start + pilot), np.arange(p * n, (p + 1) * n)]))
  return concat_steps(parts).take(np.concatenate(rows)).replace(
      group_id=np.repeat(np.arange(ctx.lo, ctx.hi, dtype=np.int32), ctx.group_size))
