"""The RL step as one declared pipeline: the table of its phases, in data-flow order, and the one executor that
runs it.

Each row of ``PIPELINE`` carries its phase function (``fn(ctx, run, stages)``) and a declared selector of the
recipe's stages it runs (``select(recipe) -> {part: stages}``, evaluated once per context by :func:`select_all`):
which stage runs in which phase is decided here and nowhere else. :func:`walk` runs rows in order; a batch is
followed through the step by reading the table and the phase functions above it top to bottom.

The phase functions are written once and run in two kinds of *context* (``ctx``):

* the live step: the collector (``rljax.train._rollout.Collector``: the ``"collect"`` rows, each sampling round
  walking the ``per_round`` ones, then the kept groups the others), run by every runner (synchronous,
  rollout-ahead, asynchronous, multi-process), and the trainer (``rljax.train._rl.RLLoop.step``: the ``"train"``
  rows). The multi-process runner (``rljax.train._multiproc_async``) is this context with another sampler call
  (``Collector(..., sample_fn=...)``): its rollout side's call samples and sends each call's rollouts, its
  training side's receives them, and its training side trains through ``run_steps`` -> ``RLLoop.step``; it has no
  phase code of its own;
* the start-up check (``rljax.train._startup.dry_run``: every row): a synthetic batch of the run's shapes, each
  stage call wrapped by its slot's contract check (``ctx.call``), naming the stage and the field.

What a context provides, and nothing else differs between the two:

* ``call(key, stage, fn)``: a stage call (``unchecked``: ``fn()``; the start-up check: ``fn()`` checked against
  contract ``key``), ``stages`` (:func:`select_all` of its recipe), ``states`` (the stage states:
  ``"advantage"``, ``"prompt_filters"``, ``"replay"``), ``any_rows(data)`` (the row gate);
* the collect side's sources: ``next_prompts()`` (the loader's candidates), ``pilot_rows(r, problems, index,
  key)`` (a prompt filter's pilot rollouts, scored), ``train_problems``, ``num_dataset_prompts``, ``pilot``,
  ``group_size``, ``local_groups``, ``max_refills``, ``roll_out(r)`` (the round's rollouts, scored by
  :func:`score_tail`), ``resample(r, stage)`` (a replay stage's hinted rollouts);
* the train side's devices: ``forwards(data, metrics)`` (the forwards the needs ask, and the update's extras),
  ``place(host)`` (the ``TrainBatch`` fields on the run's mesh), ``task_gradients(batch)``, ``optimize(run)``,
  ``control_inputs(run)``, ``set_controllers(new)``, ``ctl_state``, ``routing_replay``.

The trainer's row gates (``needs_rows``, ``checks_rows``): a phase with ``needs_rows`` runs only while some row
of the step's batch is valid on some process; ``checks_rows`` re-evaluates that (``ctx.any_rows``: one host
collective) before the phase. A step whose batch has no valid row at the update is an empty step: no update, no
controller.
"""
from __future__ import annotations

from typing import Callable, Mapping, NamedTuple

import jax
import numpy as np

from rljax.stages import ControlInputs, PromptData, StepData, TaskGradients, produced_by, scalar_metrics
from rljax.train._advantage import as_advantages
from rljax.train._inputs import host_batch
from rljax.train._mechanics import curriculum_draw, replay_swap
from rljax.train._rows import run_filters, set_rewards, unchecked
from rljax.train._streams import stream
from rljax.types import TrainBatch

__all__ = ["Phase", "PIPELINE", "phases", "select_all", "walk", "compute_advantages", "filter_advantages",
           "score_tail", "unchecked"]


# ----------------------------------------------------------------------------- the collect side

def _prompts(ctx, r, st) -> None:
  """The round's prompts: a prompt filter's draw, its pilot rollouts and select (until every group has an
  admitted prompt), else the loader's; then a replay stage's prompt swap."""
  if st["prompt_filters"]:
    r.problems, r.index, r.counts, r.blocks = _select_prompts(ctx, r, st, stream(r.side, "select"))
  else:
    r.problems, r.index = ctx.next_prompts()
  for stage in st["swap"]:
    if r.replay_states is not None:
      r.problems, r.index, r.replay_slots = replay_swap(ctx, r, stage)


def _select_prompts(ctx, r, st, key):
  """Pre-rollout selection: draws candidates until every group has an admitted prompt.

  Returns ``(problems, dataset indices, counts [P] valid rows per group, pilot blocks)``; a group left without an
  admitted prompt after ``max_refills`` extra draws is padding (count 0), reported as
  ``prompt_filters/unfilled_groups``.
  """
  g, local = ctx.group_size, ctx.local_groups
  chosen, draws = [], 0
  while len(chosen) < local and draws <= ctx.max_refills:
    problems, index = ctx.next_prompts()
    k = jax.random.fold_in(key, draws)
    problems, index = curriculum_draw(ctx, r, st["prompt_filters"], k, problems, index)
    pilot = ctx.pilot_rows(r, problems, index, k) if ctx.pilot else None
    counts = np.full(len(problems), g, np.int64)
    for j, pf in enumerate(st["prompt_filters"]):
      if pf.select is None:
        continue
      c, r.prompt_states[pf.name], m = ctx.call(
          "prompt_filters.select", pf,
          lambda pf=pf, problems=problems, index=index, pilot=pilot: pf.select(
              r.prompt_states[pf.name], PromptData(tuple(problems), index, ctx.num_dataset_prompts, r.step, pilot),
              stream(k, "prompt_select", j)))
      c = np.asarray(c, np.int64).reshape(-1)
      limit = g - ctx.pilot
      if c.shape != (len(problems),) or c.min(initial=0) < 0 or c.max(initial=0) > limit:
        raise ValueError(f"prompt filter {pf.name!r} returned counts {c.tolist()}; expected {len(problems)} "
                         f"ints in [0, {limit}] (rollouts per prompt{' after the pilot' if ctx.pilot else ''})")
      counts = np.minimum(counts, c + ctx.pilot)
      r.metrics.update(scalar_metrics(m, pf.name))
    chosen += [(problems[p], int(index[p]), int(counts[p]), (pilot, p)) for p in range(len(problems))
               if counts[p] > 0]
    draws += 1
  unfilled = max(0, local - len(chosen))
  filler = chosen[0][:2] if chosen else (problems[0], int(index[0]))
  chosen = chosen[:local] + [(*filler, 0, None)] * unfilled  # padding groups: count 0, masked out
  r.metrics["prompt_filters/draws"] = float(draws)
  r.metrics["prompt_filters/unfilled_groups"] = float(unfilled)
  return ([c[0] for c in chosen], np.asarray([c[1] for c in chosen], np.int64),
          np.asarray([c[2] for c in chosen], np.int64), [c[3] for c in chosen])


def score_tail(ctx, data: StepData, key, st, metrics: dict) -> StepData:
  """The end of scoring a sampled batch, after the reward functions: the multi-reward aggregation (a stage that
  produces rewards), then the rollout-phase shaping, each with its own key (``stream``)."""
  for multi in st["multi_reward"]:
    value, m = ctx.call("multi_reward", multi, lambda multi=multi: multi.fn(data.replace(
        key=stream(key, "multi_reward"))))
    data = set_rewards(data, value, multi.name)
    metrics.update(scalar_metrics(m, multi.name))
  for i, s in enumerate(st["shaping"]):
    rewards, m = ctx.call("shaping", s, lambda s=s, view=data.replace(key=stream(key, "rollout_shaping", i)):
                          s.fn(view))
    data = set_rewards(data, rewards, s.name)
    metrics.update(scalar_metrics(m, s.name))
  return data


def _rollouts(ctx, r, st) -> None:
  """The policy's rollouts (episodes for a multi-turn task), scored (rewards -> :func:`score_tail`); greedy
  rollouts first when a stage needs ``greedy_rewards``; a prompt filter's pilot rows join their groups. Each
  group's stored row to replay (a replay stage's prompt swap) goes with its rows (``data.replay_slot``)."""
  r.data = ctx.roll_out(r, st)
  if r.replay_slots is not None:
    r.data = r.data.with_extras(replay_slot=np.repeat(r.replay_slots, ctx.group_size))


def _resample(ctx, r, st) -> None:
  """A replay stage's hinted rollouts in place of some rows (``ctx.resample``: the collector's is
  ``rljax.train._mechanics.hint_rollouts``; the start-up check has no sampler)."""
  for stage in st["replay"]:
    r.data = ctx.resample(r, stage)


def _refill(ctx, r, st) -> None:
  """The refill filters' verdict on the round's rows (``r.keep``): a group none of whose rows is kept is
  dropped, and another round is drawn while groups are missing (``rl.max_refills``)."""
  keep = r.data.valid.copy()
  for f in st["filters"]:
    kf, m = ctx.call("filters.refill", f, lambda f=f: f.fn(r.data.replace(key=stream(r.side, "refill_filters"))))
    r.metrics.update(scalar_metrics(m, f.name))
    keep &= np.asarray(kf, bool)
  r.keep = keep


def _filters(ctx, r, st) -> None:
  """The rewards-phase batch filters on the kept groups."""
  r.data = run_filters(st["filters"], r.data.replace(key=stream(r.side, "batch_filters")), r.metrics, ctx.call)


# ----------------------------------------------------------------------------- the train side

def _observe(ctx, run, st) -> None:
  """Prompt filters observe the step's rows (their ``observe_phase``)."""
  states = ctx.states["prompt_filters"]
  for pf in st["prompt_filters"]:
    states[pf.name], m = ctx.call("prompt_filters.observe", pf, lambda pf=pf: pf.observe(states[pf.name], run.data))
    run.metrics.update(scalar_metrics(m, pf.name))


def _replay(ctx, run, st) -> None:
  """A replay stage on the step's batch: stored rows in, fresh rows stored (its buffer is checkpointed); in
  phase ``"advantages"`` the stored rows then get the step's forwards."""
  for stage in st["replay"]:
    states = ctx.states["replay"]
    run.data, states[stage.name], m = ctx.call("replay", stage, lambda stage=stage: stage.fn(run.data,
                                                                                           states[stage.name]))
    run.metrics.update(scalar_metrics(m, stage.name))
    if st["forwards"] and run.data.replay_mask.any():  # the stored rows' forwards (proximal, ...)
      _inputs(ctx, run, st)


def _inputs(ctx, run, st) -> None:
  """The forwards the needs ask and the update's extras (``ctx.forwards``); replayed rows then take their stored
  behaviour log-probs as ``logp_old`` when the replay stage says ``logp_old="behavior"``."""
  data = ctx.forwards(run.data, run.metrics)
  marked = data.replay_mask  # absent before an "advantages"-phase replay stage has run
  if st["behavior_logp_old"] and data.logp_old is not None and marked is not None:
    rows = np.asarray(marked, bool)[:, None]
    data = data.replace(logp_old=np.where(rows, data.logp_behavior, data.logp_old).astype(np.float32))
  run.data = data


def compute_advantages(st, data: StepData, states: dict, call=unchecked):
  """Forward-phase shaping -> multi-reward advantages -> the advantage estimator and transforms (``st``: the
  ``"advantages"`` row's stages, ``select_all(recipe)["advantages"]``).

  Returns ``(data with advantages [and returns], metrics, new advantage states)``. Each stage gets its own
  PRNG key folded from the step's (``rljax.train._streams``).
  """
  metrics, states = {}, dict(states)
  key = data.key
  for i, s in enumerate(st["shaping"]):
    view = data.replace(key=stream(key, "forward_shaping", i))
    rewards, m = call("shaping", s, lambda s=s, view=view: s.fn(view))
    data = set_rewards(data, rewards, s.name)
    metrics.update(scalar_metrics(m, s.name))
  for multi in st["multi_reward"]:
    view = data.replace(key=stream(key, "multi_reward_advantages"))
    adv, m = call("multi_reward.advantages", multi, lambda multi=multi, view=view: multi.fn(view))
    data = data.replace(advantages=as_advantages(adv, data, multi.name))
    metrics.update(scalar_metrics(m, multi.name))
  for i, a in enumerate(st["advantage"]):
    view = data.replace(key=stream(key, "advantage", i))
    adv, info, state = a.apply(view, states.get(a.name), call)
    if a.name in states:
      states[a.name] = state
    info = dict(info or {})
    if a.returns:  # the critic's targets, which the value loss reads
      call("advantage.returns", a, lambda info=info: info.get("returns"))
    returns = info.get("returns")
    data = data.replace(advantages=as_advantages(adv, data, a.name),
                        returns=data.returns if returns is None else np.asarray(returns, np.float32))
    metrics.update(scalar_metrics(info, a.name))
  return data, metrics, states


def _advantages(ctx, run, st) -> None:
  run.data, metrics, ctx.states["advantage"] = compute_advantages(st, run.data, ctx.states["advantage"], ctx.call)
  run.metrics.update(metrics)


def filter_advantages(st, data: StepData, metrics: dict, call=unchecked) -> StepData:
  """The advantage-phase filters (``st``: the ``"advantage_filters"`` row's stages), with their own key."""
  return run_filters(st["filters"], data.replace(key=stream(data.key, "advantage_filters")), metrics,
                     call).replace(key=data.key)


def _advantage_filters(ctx, run, st) -> None:
  run.data = filter_advantages(st, run.data, run.metrics, ctx.call)


def _train_batch(ctx, run, st) -> None:
  """The update's ``TrainBatch``: the step's rows as ``host_batch`` builds them, placed by the context."""
  del st
  run.batch = TrainBatch(**ctx.place(host_batch(run.data, routing=ctx.routing_replay)))


def _task_gradients(ctx, run, st) -> None:
  """The per-task gradients of this step's loss, before the update, when a stage needs them."""
  if st["needs"]:
    gram, present = ctx.task_gradients(run.batch)
    run.data = run.data.replace(task_gradients=TaskGradients(np.asarray(gram, np.float64),
                                                             np.asarray(present, bool)))


def _update(ctx, run, st) -> None:
  """The loss and the optimizer step (and the critic's): ``run.update_metrics``."""
  del st
  ctx.optimize(run)


def _controllers(ctx, run, st) -> None:
  """Every controller observes the finished step and sets the next step's hparams / temperature."""
  inputs: ControlInputs = ctx.control_inputs(run)
  new, metrics = dict(ctx.ctl_state), {}
  for c in st["controllers"]:
    new[c.name], m = ctx.call("controllers", c, lambda c=c: c.update(ctx.ctl_state[c.name], inputs))
    metrics.update(scalar_metrics(m, c.name))
  ctx.set_controllers(new)
  run.controller_metrics = metrics


# ----------------------------------------------------------------------------- the selectors

def _first(stages) -> tuple:
  return tuple(stages)[:1]


def _replay_in(recipe, phase: str) -> tuple:
  return tuple(r for r in _first(recipe.replay) if r.phase == phase)


def _observing(recipe, phase: str) -> tuple:
  return tuple(pf for pf in recipe.prompt_filters if pf.observe is not None and pf.observe_phase == phase)


def _multi(recipe, produces: str) -> tuple:
  return tuple(m for m in (recipe.multi_reward,) if m is not None and m.produces == produces)


def _behavior(recipe) -> tuple:
  return tuple(r for r in _first(recipe.replay) if r.logp_old == "behavior")


# ----------------------------------------------------------------------------- the table

class Phase(NamedTuple):
  """One phase of the RL step.

  Attributes:
    name: the phase's name.
    side: ``"collect"`` (the collector) or ``"train"`` (``RLLoop.step``).
    slots: the recipe slots whose stages run in it (``Recipe`` fields; ``"inputs"``: the forwards the needs ask).
    what: one line on what happens.
    fn: the phase function ``fn(ctx, run, stages)`` (the module docstring).
    select: ``select(recipe) -> {part: tuple of stages}``: the stages the phase runs.
    per_round: collect side: the phase runs once per sampling round (a refill draws another round).
    needs_rows: train side: skipped when no row of the batch is valid.
    checks_rows: train side: whether a row is valid is evaluated again before this phase.
  """
  name: str
  side: str
  slots: tuple
  what: str
  fn: Callable
  select: Callable
  per_round: bool = False
  needs_rows: bool = False
  checks_rows: bool = False


PIPELINE: tuple = (
    Phase("prompts", "collect", ("prompt_filters", "replay"),
          "the round's prompts: a prompt filter's draw, its pilot rollouts and select; a replay stage's prompt swap",
          _prompts, lambda r: {"prompt_filters": tuple(r.prompt_filters),
                               "swap": tuple(x for x in r.replay if x.prompts is not None)[:1]}, per_round=True),
    Phase("rollouts", "collect", ("rewards", "multi_reward", "shaping"),
          "the policy's rollouts (and greedy ones when a stage needs greedy_rewards), scored: rewards, "
          "multi-reward (rewards), rollout-phase shaping", _rollouts,
          lambda r: {"rewards": tuple(r.rewards), "multi_reward": _multi(r, "rewards"),
                     "shaping": tuple(s for s in r.shaping if s.phase == "rollout"),
                     "greedy": tuple(s for s in r.stages() if s.needs & produced_by("greedy rollout")),
                     "pilot": tuple(pf for pf in r.prompt_filters if pf.pilot)[:1]}, per_round=True),
    Phase("resample", "collect", ("replay",),
          "a replay stage's extra rollouts (its hints and splice hooks) in place of some rows", _resample,
          lambda r: {"replay": tuple(x for x in r.replay if x.hints is not None)[:1]}, per_round=True),
    Phase("refill", "collect", ("filters",),
          "refill filters judge the round's groups; another round is drawn while groups are missing", _refill,
          lambda r: {"filters": tuple(f for f in r.filters if f.refill)}, per_round=True),
    Phase("filters", "collect", ("filters",), "the rewards-phase batch filters on the kept groups", _filters,
          lambda r: {"filters": tuple(f for f in r.filters if f.phase == "rewards" and not f.refill)}),
    Phase("observe_rewards", "train", ("prompt_filters",), "prompt filters observe every sampled row", _observe,
          lambda r: {"prompt_filters": _observing(r, "rewards")}),
    Phase("replay_rewards", "train", ("replay",), "a rewards-phase replay stage: stored rows in, fresh rows stored",
          _replay, lambda r: {"replay": _replay_in(r, "rewards"), "forwards": False}),
    Phase("inputs", "train", ("inputs",), "the forwards the needs ask (logp_old, logp_ref, values, ...)", _inputs,
          lambda r: {"behavior_logp_old": _behavior(r)}, needs_rows=True, checks_rows=True),
    Phase("advantages", "train", ("shaping", "multi_reward", "advantage"),
          "forward-phase shaping, multi-reward (advantages), the advantage estimators", _advantages,
          lambda r: {"shaping": tuple(s for s in r.shaping if s.phase == "forward"),
                     "multi_reward": _multi(r, "advantages"), "advantage": tuple(r.advantage)}, needs_rows=True),
    Phase("advantage_filters", "train", ("filters",), "the advantages-phase filters", _advantage_filters,
          lambda r: {"filters": tuple(f for f in r.filters if f.phase == "advantages")}, needs_rows=True),
    Phase("replay_advantages", "train", ("replay",),
          "an advantages-phase replay stage (and the forwards of its stored rows)", _replay,
          lambda r: {"replay": _replay_in(r, "advantages"), "forwards": True,
                     "behavior_logp_old": _behavior(r)}, needs_rows=True),
    Phase("train_batch", "train", (), "the update's TrainBatch from the step's rows", _train_batch, lambda r: {},
          needs_rows=True, checks_rows=True),
    Phase("task_gradients", "train", ("inputs",), "the per-task gradients of the loss, when a stage needs them",
          _task_gradients,
          lambda r: {"needs": tuple(s for s in r.stages() if s.needs & produced_by("task gradients"))},
          needs_rows=True),
    Phase("observe_advantages", "train", ("prompt_filters",), "prompt filters observe the rows trained on",
          _observe, lambda r: {"prompt_filters": _observing(r, "advantages")}, needs_rows=True),
    Phase("update", "train", ("loss", "aggregation", "critic"), "the loss and the optimizer step (and the critic's)",
          _update, lambda r: {}, needs_rows=True),
    Phase("controllers", "train", ("controllers",), "the controllers move hparams, temperature, state",
          _controllers, lambda r: {"controllers": tuple(r.controllers)}, needs_rows=True),
)


def phases(side: str, *, per_round=None) -> tuple:
  """The phases of ``side`` (``"collect"``, ``"train"``; ``"all"``: every phase), in order; ``per_round``:
  only the collect phases that do (True) or do not (False) run once per sampling round."""
  if side not in ("collect", "train", "all"):
    raise ValueError(f"side must be 'collect', 'train' or 'all', got {side!r}")
  return tuple(p for p in PIPELINE if (side == "all" or p.side == side)
               and (per_round is None or p.per_round == per_round))


def select_all(recipe) -> Mapping[str, Mapping[str, tuple]]:
  """``{phase name: its selector's stages}`` of ``recipe``: what each phase of ``PIPELINE`` runs."""
  return {p.name: p.select(recipe) for p in PIPELINE}


def walk(rows, ctx, run) -> None:
  """Runs the phases ``rows`` (rows of ``PIPELINE``, in order) on ``run`` in context ``ctx`` (the module
  docstring): ``row.fn(ctx, run, ctx.stages[row.name])``, with the trainer's row gates."""
  has_rows = True
  for phase in rows:
    if phase.checks_rows:
      has_rows = ctx.any_rows(run.data)
    if phase.needs_rows and not has_rows:
      continue
    phase.fn(ctx, run, ctx.stages[phase.name])
