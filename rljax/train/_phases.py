"""The RL step as one declared pipeline: the table of its phases, in data-flow order, written once.

Three walkers go through ``PIPELINE``, each with one handler per phase of its side, and nothing else decides
the order:

* the collector (``rljax.train._rollout.Collector``, the ``"collect"`` side, run by every runner: synchronous,
  rollout-ahead, asynchronous, multi-process): each sampling round walks the ``per_round`` phases, then the
  kept groups walk the others (``"filters"``);
* the trainer (``rljax.train._rl.RLLoop.step``, the ``"train"`` side);
* the start-up check (``rljax.train._startup.dry_run``, every phase): each stage of a phase runs once on a
  synthetic batch of the run's shapes and its return is checked against its slot's contract.

A phase names the recipe slots whose stages run in it. A technique enters the step only through what its stage
declares in those slots (a prompt filter's ``draw``/``select``/``pilot``/``observe``, a replay stage's
``prompts``/``hints``/``splice``/``phase``, a need such as ``greedy_rewards``, a loss term's ``batch_extras``
and ``hparams``); the walkers name no technique.

The trainer's row gates (``needs_rows``, ``checks_rows``): a phase with ``needs_rows`` runs only while some row
of the step's batch is valid on some process; ``checks_rows`` re-evaluates that (one host collective) before
the phase. A step whose batch has no valid row at the update is an empty step: no update, no controller.
"""
from __future__ import annotations

from typing import Callable, Mapping, NamedTuple

__all__ = ["Phase", "PIPELINE", "phases", "check_handlers"]


class Phase(NamedTuple):
  """One phase of the RL step.

  Attributes:
    name: the phase's name (a handler key of every walker of its side).
    side: ``"collect"`` (the collector) or ``"train"`` (``RLLoop.step``).
    slots: the recipe slots whose stages run in it (``Recipe`` fields; ``"inputs"``: the forwards the needs ask).
    what: one line on what happens.
    per_round: collect side: the phase runs once per sampling round (a refill draws another round).
    needs_rows: train side: skipped when no row of the batch is valid.
    checks_rows: train side: whether a row is valid is evaluated again before this phase.
  """
  name: str
  side: str
  slots: tuple
  what: str
  per_round: bool = False
  needs_rows: bool = False
  checks_rows: bool = False


PIPELINE: tuple = (
    Phase("prompts", "collect", ("prompt_filters", "replay"),
          "the round's prompts: a prompt filter's draw, its pilot rollouts and select; a replay stage's prompt swap",
          per_round=True),
    Phase("rollouts", "collect", ("rewards", "multi_reward", "shaping"),
          "the policy's rollouts (and greedy ones when a stage needs greedy_rewards), scored: rewards, "
          "multi-reward (rewards), rollout-phase shaping", per_round=True),
    Phase("resample", "collect", ("replay",),
          "a replay stage's extra rollouts (its hints and splice hooks) in place of some rows", per_round=True),
    Phase("refill", "collect", ("filters",),
          "refill filters judge the round's groups; another round is drawn while groups are missing",
          per_round=True),
    Phase("filters", "collect", ("filters",), "the rewards-phase batch filters on the kept groups"),
    Phase("observe_rewards", "train", ("prompt_filters",), "prompt filters observe every sampled row"),
    Phase("replay_rewards", "train", ("replay",), "a rewards-phase replay stage: stored rows in, fresh rows stored"),
    Phase("inputs", "train", ("inputs",), "the forwards the needs ask (logp_old, logp_ref, values, ...)",
          needs_rows=True, checks_rows=True),
    Phase("advantages", "train", ("shaping", "multi_reward", "advantage"),
          "forward-phase shaping, multi-reward (advantages), the advantage estimators", needs_rows=True),
    Phase("advantage_filters", "train", ("filters",), "the advantages-phase filters", needs_rows=True),
    Phase("replay_advantages", "train", ("replay",),
          "an advantages-phase replay stage (and the forwards of its stored rows)", needs_rows=True),
    Phase("train_batch", "train", (), "the update's TrainBatch from the step's rows", needs_rows=True,
          checks_rows=True),
    Phase("task_gradients", "train", ("inputs",), "the per-task gradients of the loss, when a stage needs them",
          needs_rows=True),
    Phase("observe_advantages", "train", ("prompt_filters",), "prompt filters observe the rows trained on",
          needs_rows=True),
    Phase("update", "train", ("loss", "aggregation", "critic"), "the loss and the optimizer step (and the critic's)",
          needs_rows=True),
    Phase("controllers", "train", ("controllers",), "the controllers move hparams, temperature, state",
          needs_rows=True),
)


def phases(side: str, *, per_round=None) -> tuple:
  """The phases of ``side`` (``"collect"``, ``"train"``; ``"all"``: every phase), in order; ``per_round``:
  only the collect phases that do (True) or do not (False) run once per sampling round."""
  if side not in ("collect", "train", "all"):
    raise ValueError(f"side must be 'collect', 'train' or 'all', got {side!r}")
  return tuple(p for p in PIPELINE if (side == "all" or p.side == side)
               and (per_round is None or p.per_round == per_round))


def check_handlers(walker: str, handlers: Mapping[str, Callable], expected: tuple) -> Mapping[str, Callable]:
  """``handlers`` when they are exactly one per phase of ``expected``; else ValueError naming ``walker`` and the
  phases missing or unknown (a walker never skips or invents a phase silently)."""
  names = [p.name for p in expected]
  missing, unknown = [n for n in names if n not in handlers], sorted(set(handlers) - set(names))
  if missing or unknown:
    raise ValueError(f"{walker}: its handlers must be one per phase {names}; missing {missing}, unknown {unknown}")
  return handlers
