"""The RL step's named random streams: every ``fold_in`` number the trainer derives a key with, declared once.

The keys of a step form a tree. Its roots are ``fold_in(base_key, step)`` (the sampler's, folded once more by the
round number) and ``fold_in(side_key, step)`` (every other draw; ``side_key = split(base_key)[1]``). Counters fold
in as themselves: the step, the sampling round (``attempt``; each round's ``side`` key), a prompt filter's
candidate draw (``draws``), an evaluation chunk's first row. Every other key is a row of ``STREAMS``::

    stream(key, name, i) = jax.random.fold_in(key, STREAMS[name].number + i)

where ``key`` is the row's ``parent`` key and ``i`` the index of the stage within its slot (``0 <= i < count``;
``count = None``: no later number of the same parent). The numbers are those the trainer has always used, so runs
reproduce their earlier ``metrics.jsonl`` bit for bit (pinned by ``tests/test_streams.py``).

Parents:

* ``round side``: a sampling round's ``side`` key, ``fold_in(fold_in(side_key, step), attempt)``;
* ``step side``: ``fold_in(side_key, step)`` (the step's rounds are its counters 0, 1, ...);
* ``select``: ``fold_in(stream(round_side, "select"), draws)``, one draw of candidate prompts;
* ``score``: the key a scoring call receives (``"score"``, ``"greedy_score"`` or ``"pilot_score"``);
* ``advantages``: the advantage phase's root, ``stream(step_side, "advantages")``;
* ``eval``: an evaluation's key.
"""
from __future__ import annotations

from types import MappingProxyType
from typing import NamedTuple, Optional

import jax

__all__ = ["Stream", "STREAMS", "stream"]


class Stream(NamedTuple):
  """One named stream: ``fold_in(<parent key>, number + i)`` for ``0 <= i < count`` (``count=None``: unbounded)."""
  parent: str
  number: int
  what: str
  count: Optional[int] = 1


STREAMS = MappingProxyType({
    # a round's side key (rljax.train._rollout.Collector)
    "select": Stream("round side", 1, "pre-rollout selection: the root of each candidate draw's keys"),
    "greedy_sample": Stream("round side", 2, "the greedy rollouts of a stage needing greedy_rewards (ReMax)"),
    "greedy_score": Stream("round side", 3, "scoring the greedy rollouts"),
    "score": Stream("round side", 4, "scoring the round's rollouts (or episodes)"),
    "replay_prompts": Stream("round side", 5, "a replay stage's pre-rollout prompt swap"),
    "hints": Stream("round side", 6, "a replay stage's extra (hinted) rollouts"),
    "refill_filters": Stream("round side", 200, "the refill filters' verdicts"),
    # the step's side key
    "batch_filters": Stream("step side", 300, "the rewards-phase batch filters on the kept groups"),
    "advantages": Stream("step side", 1 << 20, "the root of the advantage phase's keys"),
    # one draw of candidate prompts
    "pilot_sample": Stream("select", 1, "the pilot rollouts of a prompt filter"),
    "pilot_score": Stream("select", 2, "scoring the pilot rollouts"),
    "prompt_select": Stream("select", 10, "prompt filter i's select", 30),
    "prompt_draw": Stream("select", 40, "prompt filter i's draw (a curriculum)", None),
    # a scoring call's key
    "multi_reward": Stream("score", 1, "a multi-reward stage producing rewards"),
    "rollout_shaping": Stream("score", 100, "rollout-phase shaping stage i", None),
    # the advantage phase's root
    "forward_shaping": Stream("advantages", 400, "forward-phase shaping stage i", 100),
    "multi_reward_advantages": Stream("advantages", 500, "a multi-reward stage producing advantages"),
    "advantage": Stream("advantages", 600, "advantage stage i (estimator, then transforms)", 100),
    "advantage_filters": Stream("advantages", 700, "the advantage-phase filters"),
    # an evaluation's key (rljax.train._eval)
    "eval_samples": Stream("eval", 1 << 20, "the sampled (pass@k) evaluation, after the greedy one"),
})


def stream(key, name: str, i: int = 0):
  """The key of stream ``name`` (a row of ``STREAMS``) under its parent ``key``: ``fold_in(key, number + i)``."""
  if name not in STREAMS:
    raise ValueError(f"unknown random stream {name!r}; streams: {sorted(STREAMS)}")
  s = STREAMS[name]
  if i < 0 or (s.count is not None and i >= s.count):
    raise ValueError(f"random stream {name!r}: index {i} outside [0, {s.count}) (the numbers after it belong to "
                     f"other streams of parent {s.parent!r})")
  return jax.random.fold_in(key, s.number + i)
