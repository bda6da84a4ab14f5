"""The stage kinds of one RL step (``Reward`` ... ``Controller``), their checks, and ``check_needs``. See the
calling conventions in ``rljax.stages``."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional, Sequence

from rljax.stages._data import NEEDS, NeedError, RunFacts


class Stage:
  """Base of every stage: a ``name`` (metric prefix), the ``needs`` it declares, ``bind`` for run facts."""
  name: str
  needs: frozenset

  def bind(self, facts: RunFacts) -> "Stage":  # pylint: disable=unused-argument
    """The stage configured for a run's static facts (default: unchanged)."""
    return self


def _needs(needs) -> frozenset:
  needs = frozenset(needs or ())
  unknown = sorted(needs - set(NEEDS))
  if unknown:
    raise ValueError(f"unknown need(s) {unknown}; a stage may need: {sorted(NEEDS)}")
  return needs


def _name(name, fn, default: str) -> str:
  if name:
    return str(name)
  n = getattr(fn, "name", None) or getattr(fn, "__name__", None)
  return n if isinstance(n, str) and n and n != "<lambda>" else default


def _frozen_stage(cls):
  """A frozen dataclass stage whose ``needs`` are validated and ``name`` defaulted from ``fn``."""
  post = getattr(cls, "_check", None)

  def __post_init__(self):  # noqa: N807
    object.__setattr__(self, "needs", _needs(self.needs))
    object.__setattr__(self, "name", _name(self.name, getattr(self, "fn", None), type(self).__name__.lower()))
    if post is not None:
      post(self)

  cls.__post_init__ = __post_init__
  return dataclasses.dataclass(frozen=True)(cls)


def _one_of(stage, field: str, allowed: Sequence[str]) -> None:
  v = getattr(stage, field)
  if v not in allowed:
    raise ValueError(f"{type(stage).__name__} {stage.name!r}: {field} must be one of {list(allowed)}, got {v!r}")


def _callable(stage, field: str = "fn") -> None:
  if not callable(getattr(stage, field)):
    raise ValueError(f"{type(stage).__name__} {stage.name!r}: {field} must be callable, got {getattr(stage, field)!r}")


@_frozen_stage
class Reward(Stage):
  """A host reward function ``fn(completions, problems) -> [B]`` (see the module table)."""
  fn: Callable
  name: str = ""
  needs: frozenset = frozenset()

  def _check(self):
    _callable(self)


@_frozen_stage
class MultiReward(Stage):
  """Several rewards -> one reward (``produces="rewards"``) or -> advantages (``"advantages"``)."""
  fn: Callable
  name: str = ""
  produces: str = "rewards"
  needs: frozenset = frozenset()

  def _check(self):
    _callable(self)
    _one_of(self, "produces", ("rewards", "advantages"))


@_frozen_stage
class Shaping(Stage):
  """``fn(data) -> (rewards [B] or token rewards [B, T], metrics)``; ``phase`` ``"rollout"`` or ``"forward"``.

  ``"rollout"`` stages run on every sampled batch before the filters (they see lengths, correctness, text);
  ``"forward"`` stages run after the policy forwards, right before the advantage (e.g. KL in the reward,
  which reads ``logp_old`` and ``logp_ref``), as verl applies its KL penalty after the reference forward.
  """
  fn: Callable
  name: str = ""
  phase: str = "rollout"
  needs: frozenset = frozenset()
  bind_fn: Optional[Callable] = None

  def _check(self):
    _callable(self)
    _one_of(self, "phase", ("rollout", "forward"))

  def bind(self, facts):
    return self if self.bind_fn is None else self.bind_fn(self, facts)


@_frozen_stage
class Filter(Stage):
  """``fn(data) -> (keep [B] bool | rows [N] int, metrics)``; ``phase`` ``"rewards"`` or ``"advantages"``.

  ``resamples=True``: the filter returns row indices (a resampling across groups), so the rows of a group are
  no longer consecutive: the loop then runs every row's prompt in the update (no shared-prompt forward)."""
  fn: Callable
  name: str = ""
  phase: str = "rewards"
  refill: bool = False
  resamples: bool = False
  needs: frozenset = frozenset()

  def _check(self):
    _callable(self)
    _one_of(self, "phase", ("rewards", "advantages"))
    if self.refill and self.phase != "rewards":
      raise ValueError(f"Filter {self.name!r}: refill=True needs phase='rewards' (refills happen while sampling)")


@_frozen_stage
class PromptFilter(Stage):
  """Pre-rollout selection: ``init``/``draw``/``select``/``observe`` (see the module table).

  ``observe_phase``: ``"rewards"`` (default: every sampled row, before the policy forwards) or ``"advantages"``
  (the rows the update trains on, with their advantages, just before the update; a stage that reads them
  declares ``needs={"advantages"}``)."""
  init: Callable
  select: Optional[Callable] = None
  observe: Optional[Callable] = None
  name: str = ""
  pilot: int = 0
  draw: Optional[Callable] = None
  observe_phase: str = "rewards"
  needs: frozenset = frozenset()
  bind_fn: Optional[Callable] = None

  def _check(self):
    _callable(self, "init")
    if self.select is None and self.draw is None:
      raise ValueError(f"PromptFilter {self.name!r}: give select, draw or both")
    for f in ("select", "draw"):
      if getattr(self, f) is not None:
        _callable(self, f)
    _one_of(self, "observe_phase", ("rewards", "advantages"))
    if self.pilot and self.select is None:
      raise ValueError(f"PromptFilter {self.name!r}: a pilot rollout needs select (it returns the commit counts)")
    if isinstance(self.pilot, bool) or not isinstance(self.pilot, int) or self.pilot < 0:
      raise ValueError(f"PromptFilter {self.name!r}: pilot must be an int >= 0, got {self.pilot!r}")

  def bind(self, facts):
    return self if self.bind_fn is None else self.bind_fn(self, facts)


@_frozen_stage
class Replay(Stage):
  """A replay buffer: ``init() -> state``, ``fn(data, state) -> (data, state, metrics)`` (see the module table).

  ``fn`` returns the step's batch with stored rows in place of some fresh ones (their tokens, masks, rewards,
  correctness and the *stored* behaviour log-probs/entropies; ``completions`` entries ``""``) and
  ``data.replay_mask [B]`` bool marking them (``with_extras``; it reaches ``TrainBatch.extras``), and the new state
  (fresh rows stored). Replayed rows never go back into the buffer.

  Attributes:
    phase: ``"rewards"``: after the rewards-phase filters, before the policy forwards (replayed rows join
      their group's advantage); ``"advantages"``: after the advantage-phase filters (replayed rows carry
      their stored advantages ``[T]``; the forwards run again on the changed batch).
    logp_old: the proximal log-probs of replayed rows: ``"recompute"`` (the forward of the current policy, as
      for fresh rows: the PPO ratio starts at 1, the off-policy gap stays in ``logp_behavior`` for the
      corrections) or ``"behavior"`` (the stored behaviour log-probs: the ratio is the importance weight
      pi_theta / pi_behavior of the off-policy row).
    mixes_prompts: rows of another prompt may enter a group (no shared-prompt forward then).
    prompts: optional pre-rollout hook ``prompts(state, index [P] int, key) -> (index [P], slots [P], metrics)``:
      the step's prompts (dataset indices) with some replaced, and per group the stored row to replay (-1:
      none); the sampled rows of group ``p`` carry ``slots[p]`` as ``data.replay_slot`` into ``fn``.
    hints: optional post-rollout hook of the hinted rollouts (``rljax.hints``): ``hints(data, group_size,
      answer_key) -> (prompts [P] hinted prompt text or None, take [P] int, metrics)`` on a scored sampling
      round; the collector samples ``group_size`` completions of each hinted prompt, and ``take[p]`` of group
      ``p``'s failed rows become hinted samples behind the *unhinted* prompt, with the hinted sampler's
      log-probs as ``logp_behavior`` (``data.replay_mask`` marks them).
    splice: the hook that goes with ``hints`` (required with it): ``splice(data, drawn, take, *, pad_id) ->
      (rows [K], drawn_rows [K], rebuilt)``: ``drawn`` is the extra rollout (``tokens``, ``completion_mask``,
      ``logp_behavior``, ``entropy_behavior``, ``[P g, T']``); row ``rows[k]`` of the round is replaced by row
      ``drawn_rows[k]`` of ``rebuilt`` (a dict of ``tokens``, ``prompt_mask``, ``completion_mask``,
      ``logp_behavior``, ``entropy_behavior`` ``[P g, T]``, or None when ``K = 0``), which the collector scores
      against the round's problems (``rljax.hints.splice_hinted``).
  """
  init: Callable
  fn: Callable
  name: str = ""
  phase: str = "rewards"
  logp_old: str = "recompute"
  mixes_prompts: bool = False
  prompts: Optional[Callable] = None
  hints: Optional[Callable] = None
  splice: Optional[Callable] = None
  needs: frozenset = frozenset()
  bind_fn: Optional[Callable] = None

  def _check(self):
    _callable(self, "init")
    _callable(self)
    _one_of(self, "phase", ("rewards", "advantages"))
    _one_of(self, "logp_old", ("recompute", "behavior"))
    if self.prompts is not None:
      _callable(self, "prompts")
    if (self.hints is None) != (self.splice is None):
      raise ValueError(f"Replay {self.name!r}: hints and splice go together; got "
                       f"hints={'set' if self.hints else None}, splice={'set' if self.splice else None}")
    if self.hints is not None:
      _callable(self, "hints")
      _callable(self, "splice")
      if self.phase != "rewards":
        raise ValueError(f"Replay {self.name!r}: a stage with hints must have phase 'rewards', got {self.phase!r}")

  def bind(self, facts):
    return self if self.bind_fn is None else self.bind_fn(self, facts)


@_frozen_stage
class Advantage(Stage):
  """``fn(data) -> (advantages, info)``, or stateful ``fn(data, state) -> (advantages, info, state)``.

  ``returns=True``: the estimator writes the critic's targets (``info["returns"] [B, T]``, GAE), which a
  recipe's value loss needs."""
  fn: Callable
  name: str = ""
  init: Optional[Callable] = None
  transform: bool = False
  returns: bool = False
  needs: frozenset = frozenset()
  bind_fn: Optional[Callable] = None

  def _check(self):
    _callable(self)
    if self.transform:
      object.__setattr__(self, "needs", self.needs | {"advantages"})

  def bind(self, facts):
    return self if self.bind_fn is None else self.bind_fn(self, facts)

  def apply(self, data, state, call) -> tuple:
    """``(advantages, info, state)``: the one call the step makes, whichever of the two forms ``fn`` has (a
    stateless ``fn`` leaves ``state`` as given). ``call(contract, stage, thunk)`` runs ``fn`` under its contract,
    ``"advantage"`` or ``"advantage.stateful"`` (``rljax.train._contracts``: the start-up check's context)."""
    if self.init is None:
      advantages, info = call("advantage", self, lambda: self.fn(data))
      return advantages, info, state
    return call("advantage.stateful", self, lambda: self.fn(data, state))


@_frozen_stage
class LossTerm(Stage):
  """An objective term built inside the jitted step from ``state.hparams``.

  ``build(hparams) -> term`` calls ``factory(*args, **kwargs)`` after replacing every argument that is itself a
  ``LossTerm`` by its built value (a correction passed as ``correction=``, the policy term an ``erc`` or
  ``top_entropy_mask`` wraps) and every argument named in ``hparams`` by ``hparams[role]`` (a traced float32
  scalar from ``state.hparams``: a controller moves it without recompiling).

  Attributes:
    factory: the catalog factory (``rljax.objectives.ppo_clip``, ...).
    args, kwargs: its arguments.
    hparams: ``{argument: hparam name}`` of its controller-movable arguments (``{"eps_low": "clip_low"}``).
    role: ``"policy"`` (a policy loss, or a term wrapping one: a controller's ``wrap_policy`` applies to
      it), ``"term"`` (added to the loss), ``"correction"`` (passed to a policy loss as ``correction=``).
    batch_extras: ``fn(data: StepData) -> {key: [B, ...] host array}``: inputs the term provides itself, built
      on the host from the step's data before the update and passed in ``TrainBatch.extras`` (``dpo``'s
      preference pairs); the loop calls it for every term that declares one, nested ones included.
  """
  factory: Callable
  args: tuple = ()
  kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  hparams: Mapping[str, str] = dataclasses.field(default_factory=dict)
  role: str = "term"
  name: str = ""
  needs: frozenset = frozenset()
  batch_extras: Optional[Callable] = None

  def _check(self):
    _callable(self, "factory")
    if self.batch_extras is not None:
      _callable(self, "batch_extras")
    _one_of(self, "role", ("policy", "term", "correction"))
    if self.name == "lossterm":  # no fn: name it after the factory
      object.__setattr__(self, "name", _name("", self.factory, "term"))
    missing = sorted(set(self.hparams) - set(self.kwargs))
    if missing:
      raise ValueError(f"LossTerm {self.name!r}: hparams {missing} must be given a value in kwargs")
    nested = [a for a in (*self.args, *self.kwargs.values()) if isinstance(a, LossTerm)]
    object.__setattr__(self, "needs", self.needs.union(*(a.needs for a in nested)))

  def children(self) -> list:
    return [a for a in (*self.args, *self.kwargs.values()) if isinstance(a, LossTerm)]

  def initial_hparams(self) -> dict:
    """``{hparam name: initial value}`` of this term and the terms inside it."""
    out = {}
    for child in self.children():
      _merge_hparams(out, child.initial_hparams(), self.name)
    _merge_hparams(out, {role: float(self.kwargs[arg]) for arg, role in self.hparams.items()}, self.name)
    return out

  def build(self, hparams: Mapping[str, Any]):
    """The term (or correction) with its movable arguments read from ``hparams``."""
    def value(v):
      return v.build(hparams) if isinstance(v, LossTerm) else v
    kwargs = {k: value(v) for k, v in self.kwargs.items()}
    for arg, role in self.hparams.items():
      kwargs[arg] = hparams[role]
    built = self.factory(*(value(a) for a in self.args), **kwargs)
    if self.role != "correction" and callable(built) and not getattr(built, "name", None):
      try:
        built.name = self.name
      except AttributeError:
        pass
    return built


def _merge_hparams(out: dict, new: Mapping[str, float], owner: str) -> None:
  for k, v in new.items():
    if k in out and out[k] != v:
      raise ValueError(f"hparam {k!r} is set twice ({out[k]} and {v}) in {owner!r}; "
                       "two terms cannot share a controller-movable hyper-parameter")
    out[k] = v


@_frozen_stage
class Aggregation(Stage):
  """The loss aggregation (``rljax.objectives.token_mean``, ...); ``bind`` may fill ``max_len``."""
  fn: Callable
  name: str = ""
  needs: frozenset = frozenset()
  bind_fn: Optional[Callable] = None

  def _check(self):
    _callable(self)

  def bind(self, facts):
    return self if self.bind_fn is None else self.bind_fn(self, facts)


@_frozen_stage
class Controller(Stage):
  """A loop controller (see the module table). ``writes``: the hparam names it owns (``"temperature"``
  for the sampling temperature); every hparam it writes must be read by a loss term, else the recipe is
  refused at start-up."""
  init: Callable
  update: Callable
  hparams: Callable = dataclasses.field(default=lambda state: {})
  writes: tuple = ()
  temperature: Optional[Callable] = None
  wrap_policy: Optional[Callable] = None
  policy_hparams: Optional[Callable] = None
  name: str = ""
  needs: frozenset = frozenset()
  bind_fn: Optional[Callable] = None

  def _check(self):
    _callable(self, "init")
    _callable(self, "update")
    if self.policy_hparams is not None:
      _callable(self, "policy_hparams")
    object.__setattr__(self, "writes", tuple(self.writes))

  def bind(self, facts):
    return self if self.bind_fn is None else self.bind_fn(self, facts)


def check_needs(stages: Sequence[Stage], available: Mapping[str, str]) -> None:
  """Raises ``NeedError`` naming the first stage whose need is not in ``available``.

  Args:
    stages: the recipe's stages.
    available: ``{need: ""}`` for every need the run can provide, or ``{need: reason}`` with a non-empty
      reason for a need it cannot (e.g. ``{"turn_ids": "the task is single-turn"}``).
  """
  for stage in stages:
    unmet = [(n, available.get(n, "nothing in this run provides it")) for n in sorted(stage.needs)]
    unmet = [(n, reason) for n, reason in unmet if reason]
    if unmet:
      raise NeedError(f"{type(stage).__name__} {stage.name!r} needs " + "; and ".join(
          f"{n!r} ({NEEDS[n]}), which this run cannot provide: {reason}" for n, reason in unmet))
