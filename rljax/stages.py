"""The stages of one RL step and their calling conventions: what a recipe composes.

One RL step, as data flows (``rljax.train`` runs it; ``rljax.recipes.Recipe`` says which stages)::

    prompts --PromptFilter (DUMP/TAC draw; GRESO, Pilot-Commit, budgets)--> sampler --> Reward(s) (host)
      --> MultiReward (several rewards -> one reward, or straight to advantages)
      --> Shaping (phase "rollout": lengths, correctness)  --> Filter (phase "rewards"; may refill)
      --> policy forwards the recipe needs (proximal / reference log-probs, critic values, ...)
      --> Shaping (phase "forward": KL in the reward) --> Advantage (estimator, then transforms)
      --> Filter (phase "advantages") --> objective(hparams) --> update --> Controller(s)

Every stage reads a :class:`StepData` (host NumPy arrays of the step's rollouts and everything computed from
them so far) and returns what its kind returns (below). A stage declares the inputs it ``needs`` from the
vocabulary :data:`NEEDS`; the loop computes exactly those (no reference forward when nothing reads
``logp_ref``) and refuses, at start-up and before any compile, a recipe whose needs the run cannot meet,
naming the stage and the input.

Calling conventions (``data`` is a :class:`StepData`; ``metrics`` a dict whose scalar entries are logged as
``<stage name>/<key>``; arrays in it are ignored):

==============  =====================================================================================
kind            call
==============  =====================================================================================
Reward          ``fn(completions: list[str], problems: list[Problem]) -> [B]`` (host; wrapped in
                ``rljax.rewards.safe_reward``: a raise or NaN fails loudly, or scores 0 with
                ``task.lenient_rewards``)
MultiReward     ``fn(data) -> (values, metrics)`` reading ``data.reward_components [B, K]`` (several rewards
                without one: ``data.rewards`` is their sum);
                ``produces="rewards"``: ``values [B]`` is the reward; ``"advantages"``: the advantages
Shaping         ``fn(data) -> (rewards, metrics)``: new rewards ``[B]``, or token rewards ``[B, T]``
                (``data.rewards`` becomes their sum over tokens, as verl scores token rewards)
Filter          ``fn(data) -> (keep, metrics)``: ``keep [B]`` bool (dropped rows leave the batch: their
                loss mask is cleared and statistics skip them), or, in phase ``"advantages"``, ``[N]`` int
                row indices (a resampling of the batch, N <= B). ``refill=True``: dropped *groups* are
                replaced by newly sampled ones (DAPO dynamic sampling), up to ``rl.max_refills`` times
PromptFilter    ``init(num_dataset_prompts) -> state``; optional ``draw(state, prompts: PromptData, key) ->
                (index [P] int, state, metrics)``: the dataset prompts to roll out instead of the loader's
                candidates (a curriculum's sampler over the dataset; at most one stage of a recipe draws);
                optional ``select(state, prompts, key) -> (counts [P] int, state, metrics)``: rollouts per
                prompt, at most ``group_size`` (0 = skip: another candidate is drawn, up to
                ``rl.max_refills`` times); ``observe(state, data) -> (state, metrics)``: with
                ``observe_phase="rewards"`` on every sampled row before the forwards, with ``"advantages"``
                on the rows the update trains on, with their advantages (and ``task_gradients``), just
                before the update. ``pilot > 0``: ``select`` sees a scored pilot
                rollout of ``pilot`` samples per prompt (``prompts.pilot``) and returns the *commit* counts,
                at most ``group_size - pilot``; the pilot rows join their group (a commit of 0 keeps them)
Advantage       ``fn(data) -> (advantages [B] or [B, T], info)``; with ``init``: ``fn(data, state) ->
                (advantages, info, state)`` and the state is checkpointed. ``transform=True``: reads
                ``data.advantages`` (must follow an estimator). ``info["returns"]`` = critic targets
LossTerm        ``build(hparams) -> term`` with ``term(out, batch) -> (per_token_loss [B, T], metrics)``
                (``rljax.objectives.chain``); ``hparams`` maps its controller-movable arguments to
                hparam names (``eps_low -> clip_low``), so a controller changes them without recompiling
Replay          ``init() -> state`` (fixed-shape arrays: checkpointed); ``fn(data, state) -> (data, state,
                metrics)``: puts stored rows into the batch in place of fresh ones (marked
                ``data.extras["replay_mask"] [B]``) and stores fresh rows; optional ``prompts(state, index [P],
                key) -> (index [P], slots [P], metrics)`` swaps prompts before the rollout (``slots``: the
                stored row each group will replay, -1 none; ``fn`` reads them as ``extras["replay_slot"]``);
                optional ``hints(data, group_size, answer_key) -> (prompts [P], take [P], metrics)`` re-samples
                failed groups with a hinted prompt, trained behind the unhinted one (``rljax.hints``).
                ``phase`` ``"rewards"`` (before the forwards: replayed rows get advantages in their group) or
                ``"advantages"`` (after them: replayed rows keep their stored advantages)
Controller      ``init() -> state``; ``hparams(state) -> dict`` (values written into ``state.hparams``);
                ``update(state, inputs: ControlInputs) -> (state, metrics)`` after each step; optional
                ``temperature(state)`` (sampling temperature), ``wrap_policy(term, hparams)`` and
                ``policy_hparams(out, batch, hparams) -> dict``: hparams of the policy term chosen inside the
                loss on each (micro-)batch it is called on (BAPO's authors' placement); they override
                ``state.hparams`` there and the term is rebuilt with them
==============  =====================================================================================

A plain Python function in a recipe is the ``fn`` of a stage of the slot it is put in (a reward function
in ``rewards``, an advantage estimator in ``advantage``, ...), with no needs (a plain loss term is assumed to
read ``logp_old``); wrap it in the class to declare needs, a phase or state:
``Advantage(my_fn, needs=("answer_ids",))``.

At start-up every stage runs once on a synthetic batch of the run's shapes and its return is checked against this
table (``rljax.train._contracts``: tuple, dict keys, dtype, shape, finite values); loss terms are traced under
``jax.jit`` first. A violation names the slot, the stage, what it returned and what was expected.
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence

import numpy as np

__all__ = [
    "NEEDS", "BATCH_NEEDS", "REPLAY_UNSTORED", "StepData", "PromptData", "RunFacts", "ControlInputs", "Stage",
    "TaskGradients", "Reward", "MultiReward", "Shaping", "Filter", "PromptFilter", "Replay", "Advantage", "LossTerm",
    "Aggregation", "Controller", "NeedError", "scalar_metrics", "check_needs", "loss_term_factory", "data_stage_factory", "keyword",
    "probe_step", "checked",
]


class NeedError(ValueError):
  """A stage needs an input the run cannot provide (raised at start-up, naming the stage and the input)."""


def _array_rows(x) -> Optional[int]:
  return None if x is None or np.ndim(x) == 0 else int(np.shape(x)[0])


# The kinds of StepData fields: what ``StepData.take`` and ``StepData.concat`` do with each.
_ROWS = "rows"  # an array [B, ...]: indexed / concatenated along its first axis (when it has the batch's B rows)
_ROW_ITEMS = "row items"  # a tuple of B Python objects (texts, problems, turns): taken / joined item by item
_ROW_EXTRAS = "row extras"  # a dict: ``take`` indexes its [B, ...] entries, ``concat`` joins every entry
_STEP = "step"  # one value for the whole step (sizes, names, the PRNG key): kept as it is


def _field(kind: str, default=dataclasses.MISSING, *, need: Optional[str] = None, batch: bool = False,
           replayed: bool = True, train: Optional[str] = None, extra: Optional[str] = None,
           default_factory=dataclasses.MISSING):
  """A :class:`StepData` field of ``kind`` (``_ROWS``, ``_ROW_ITEMS``, ``_ROW_EXTRAS``, ``_STEP``).

  Args:
    need: the field is an input a stage may declare (its description in :data:`NEEDS`); the loop fills it only
      when some stage of the recipe needs it (the sampler's ``logp_behavior``/``entropy_behavior`` always).
    batch: the need reaches the update, as a ``TrainBatch`` field or extras entry (:data:`BATCH_NEEDS`).
    replayed: False when a replay buffer does not store it, so a replayed row could not carry it
      (:data:`REPLAY_UNSTORED`).
    train: the ``TrainBatch`` field the update's batch copies it into, as it is, when it is set
      (``StepData.train_batch_fields``).
    extra: the ``TrainBatch.extras`` key the inputs phase copies it into when it is set
      (``StepData.extras_fields``).
  """
  metadata = {"kind": kind}
  if train is not None:
    metadata["train"] = train
  if extra is not None:
    metadata["extra"] = extra
  if need is not None:
    metadata.update(need=need, batch=batch, replayed=replayed)
  return dataclasses.field(default=default, default_factory=default_factory, metadata=metadata)


def _rows(default=dataclasses.MISSING, **declared):
  return _field(_ROWS, default, **declared)


@dataclasses.dataclass(frozen=True)
class StepData:
  """Everything one RL step knows about its rollouts (host arrays, B rows = groups of samples).

  The rollout core, always present: ``tokens [B, T]``, ``prompt_mask``/``completion_mask [B, T]`` bool,
  ``group_id [B]`` int in ``[0, num_groups)`` (rows of a group are consecutive), ``num_groups`` (static),
  ``valid [B]`` bool (False: padding or filtered out), ``lengths [B]`` completion token counts, ``completions`` and
  ``problems`` (one per row), ``prompt_index [B]`` (each row's prompt's index in the training set: stable
  across steps, for per-prompt state), ``rewards [B]`` float32, ``correct [B]`` float32 (the task's verifier,
  whatever the reward), ``logp_behavior``/``entropy_behavior [B, T]`` (the sampler's), ``max_new_tokens``,
  ``step`` and ``key`` (a PRNG key for this stage call; stages never share one).

  The inputs stages need, each declared by its field (``need=``: its :data:`NEEDS` entry), present when a stage
  needs them: ``logp_old``, ``entropy_old``, ``logp_ref``, ``entropy_ref``, ``logp_teacher``, ``values [B, T]``;
  ``greedy_rewards [B]``; ``answer_ids [B]``; ``task_id [B]`` and ``num_tasks``; ``reward_components [B, K]`` with
  ``reward_names``; ``token_rewards [B, T]``; ``step_rewards [B, S]`` with ``step_mask``;
  ``reward_segments``/``turn_ids [B, T]`` (a token's reward segment / 0-based model turn, -1 = none; never the
  attention packing, which is ``TrainBatch.segment_ids``); ``turns``; ``task_gradients`` (a :class:`TaskGradients`,
  set just before the update). Written by estimators: ``advantages [B]`` or ``[B, T]``, ``returns [B, T]``
  (critic targets).

  Set by the rollout when it has them: ``segment_ids [B, T]`` int, the attention packing
  (``TrainBatch.segment_ids``: 0 = padding, tokens attend within equal ids; set by multi-turn rows that pack an
  episode's context windows, ``rljax.envs.pack_windows``; None: one sequence per row); ``routing [B, T, L_moe, k]``
  int32, the experts the sampler used (MoE models, when recorded: ``rl.routing_replay`` replays them).
  ``extras`` go to ``TrainBatch.extras`` (e.g. DPO pair ids).

  Each field declares its kind (a per-row array, per-row items, per-row extras or a step-level value), which
  ``take`` and ``concat`` follow, and, for an input, its need: adding an input is one field here.
  """
  tokens: np.ndarray = _rows()
  prompt_mask: np.ndarray = _rows()
  completion_mask: np.ndarray = _rows()
  group_id: np.ndarray = _rows()
  num_groups: int = _field(_STEP)
  valid: np.ndarray = _rows()
  lengths: np.ndarray = _rows()
  completions: tuple = _field(_ROW_ITEMS)
  problems: tuple = _field(_ROW_ITEMS)
  prompt_index: np.ndarray = _rows()
  rewards: np.ndarray = _rows()
  correct: np.ndarray = _rows()
  logp_behavior: np.ndarray = _rows(
      need="the sampler's log-probs of the sampled tokens (every rollout has them)", batch=True)
  entropy_behavior: Optional[np.ndarray] = _rows(None, need="the sampler's token entropies (every rollout has them)")
  routing: Optional[np.ndarray] = _rows(None)
  max_new_tokens: int = _field(_STEP, 0)
  step: int = _field(_STEP, 0)
  key: Any = _field(_STEP, None)
  logp_old: Optional[np.ndarray] = _rows(
      None, need="proximal log-probs: the policy before this step's updates, recomputed on the rollout tokens",
      batch=True, train="logp_old")
  entropy_old: Optional[np.ndarray] = _rows(
      None, need="token entropies of the proximal policy (the same forward as logp_old)", batch=True,
      train="entropy_old")
  logp_ref: Optional[np.ndarray] = _rows(
      None, need="reference-policy log-probs (a forward of the frozen reference: the policy at the start of RL)",
      batch=True, train="logp_ref")
  entropy_ref: Optional[np.ndarray] = _rows(
      None, need="token entropies of the reference (base) policy (the same forward as logp_ref)", batch=True)
  logp_teacher: Optional[np.ndarray] = _rows(
      None, need="teacher log-probs (the teacher is the reference policy; TrainBatch.extras['logp_teacher'])",
      batch=True, extra="logp_teacher")
  values: Optional[np.ndarray] = _rows(
      None, need="critic values V_t at sampling time (needs a critic in the recipe)", batch=True, replayed=False,
      train="values_old")
  greedy_rewards: Optional[np.ndarray] = _rows(
      None, need="reward of a greedy rollout of each sample's prompt (ReMax's baseline)", replayed=False)
  answer_ids: Optional[np.ndarray] = _rows(
      None, need="per-sample answer keys: equal ids for equal extracted answers (task.answer_key)", replayed=False)
  task_id: Optional[np.ndarray] = _rows(
      None, need="per-sample task ids in [0, num_tasks) (task.task_id / task.num_tasks)", batch=True,
      replayed=False, train="task_id")
  num_tasks: Optional[int] = _field(_STEP, None)
  reward_components: Optional[np.ndarray] = _rows(
      None, need="[B, K] one column per reward function (a recipe with several rewards)", replayed=False)
  reward_names: tuple = _field(_STEP, ())
  token_rewards: Optional[np.ndarray] = _rows(
      None, need="[B, T] token-level rewards (written by a token-level shaping stage)", replayed=False)
  step_rewards: Optional[np.ndarray] = _rows(
      None, need="[B, S] process (step) rewards with step_mask [B, S] (task.step_rewards(completions, problems))",
      replayed=False)
  step_mask: Optional[np.ndarray] = _rows(None)
  reward_segments: Optional[np.ndarray] = _rows(
      None, need="[B, T] reward-segment index of each token: column k of reward_components scores the tokens "
                 "with id k (segmented tasks; TrainBatch.extras['reward_segments'], never the attention packing)",
      batch=True, replayed=False)
  turn_ids: Optional[np.ndarray] = _rows(
      None, need="[B, T] turn ids (multi-turn episodes)", batch=True, replayed=False, train="turn_ids")
  turns: Optional[tuple] = _field(
      _ROW_ITEMS, None, need="per-sample list of the model's turns as text (multi-turn episodes; one turn when "
                             "single-turn)", replayed=False)
  segment_ids: Optional[np.ndarray] = _rows(None, train="segment_ids")
  advantages: Optional[np.ndarray] = _rows(
      None, need="advantages written by an earlier estimator (advantage transforms)")
  returns: Optional[np.ndarray] = _rows(
      None, need="critic targets [B, T] written by the advantage estimator (gae)", replayed=False,
      train="returns")
  task_gradients: Optional["TaskGradients"] = _field(
      _STEP, None, need="Gram matrix <g_d, g_d'> [K, K] of the per-task gradients of the recipe's loss on the "
                        "step's batch, before the update (a TaskGradients; computed just before the update)")
  extras: Mapping[str, Any] = _field(_ROW_EXTRAS, default_factory=dict)

  @property
  def batch_size(self) -> int:
    return int(self.tokens.shape[0])

  def replace(self, **changes) -> "StepData":
    return dataclasses.replace(self, **changes)

  def require(self, name: str, by: str = "a stage"):
    """``getattr(self, name)``, or a ``NeedError`` naming the need and the stage that asked for it."""
    value = getattr(self, name, None)
    if value is None:
      raise NeedError(f"{by} needs {name!r} ({NEEDS.get(name, 'an input')}), which this step does not have; "
                      f"declare it in the stage's needs")
    return value

  def take(self, rows) -> "StepData":
    """The same step restricted to (or resampled as) ``rows`` ``[N]`` int: every per-row field indexed (an array
    field whose first axis is not the batch's ``B`` rows, and step-level fields, are kept)."""
    rows = np.asarray(rows, np.int64)
    b = self.batch_size
    changes = {}
    for f in dataclasses.fields(self):
      v, kind = getattr(self, f.name), f.metadata["kind"]
      if kind == _ROW_ITEMS and v is not None:
        changes[f.name] = tuple(v[int(i)] for i in rows)
      elif kind == _ROW_EXTRAS:
        changes[f.name] = {k: (np.asarray(x)[rows] if _array_rows(x) == b else x) for k, x in v.items()}
      elif kind == _ROWS and isinstance(v, np.ndarray) and _array_rows(v) == b:
        changes[f.name] = v[rows]
    return self.replace(**changes)

  @staticmethod
  def train_batch_fields() -> dict:
    """``{StepData field: TrainBatch field}`` of the fields the update's batch copies as they are when set
    (``logp_old``, ``values`` -> ``values_old``, ...), as the fields declare them (``train=``)."""
    return {f.name: f.metadata["train"] for f in dataclasses.fields(StepData) if "train" in f.metadata}

  @staticmethod
  def extras_fields() -> dict:
    """``{StepData field: TrainBatch.extras key}`` of the inputs the inputs phase copies into the update's extras
    when set (``logp_teacher``), as the fields declare them (``extra=``)."""
    return {f.name: f.metadata["extra"] for f in dataclasses.fields(StepData) if "extra" in f.metadata}

  @staticmethod
  def concat(parts: Sequence["StepData"]) -> "StepData":
    """Row-wise concatenation of ``StepData`` of the same step: every per-row field joined (``B = sum`` of the
    parts' rows); a field some parts lack (None) is None; step-level fields are the first part's."""
    first = parts[0]
    if len(parts) == 1:
      return first
    b = first.batch_size
    changes = {}
    for f in dataclasses.fields(first):
      vals, kind = [getattr(p, f.name) for p in parts], f.metadata["kind"]
      if any(v is None for v in vals) and not all(v is None for v in vals):
        changes[f.name] = None  # an input some part lacks (e.g. the greedy baseline of a pilot rollout)
      elif kind == _ROW_ITEMS:
        changes[f.name] = None if vals[0] is None else tuple(x for v in vals for x in v)
      elif kind == _ROW_EXTRAS:
        changes[f.name] = {k: np.concatenate([np.asarray(v[k]) for v in vals]) for k in vals[0]}
      elif kind == _ROWS and isinstance(vals[0], np.ndarray) and vals[0].ndim >= 1 and vals[0].shape[0] == b:
        changes[f.name] = np.concatenate(vals, 0)
    return first.replace(**changes)


# Inputs a stage may need that are no StepData field (none today: a loss term that builds its own per-row inputs
# declares them as ``LossTerm.batch_extras``, e.g. dpo's preference pairs).
_EXTRA_NEEDS: dict = {}


def _declared_needs() -> dict:
  """``{need: field metadata}`` of every need: the StepData fields that declare one, then ``_EXTRA_NEEDS``."""
  out = {f.name: f.metadata for f in dataclasses.fields(StepData) if "need" in f.metadata}
  return {**out, **_EXTRA_NEEDS}


# The inputs a stage may need, and who provides them. ``rljax.train`` computes a need only when a stage of the
# recipe declares it; an entry the run cannot provide is refused at start-up (``check_needs``).
NEEDS: Mapping[str, str] = {n: m["need"] for n, m in _declared_needs().items()}

# Per-row inputs a replay buffer does not store: a replayed row could not carry them, so a recipe with a replay
# stage refuses stages that need them (start-up).
REPLAY_UNSTORED = tuple(n for n, m in _declared_needs().items() if not m["replayed"])

# Needs that reach the update as TrainBatch fields or extras (the others are host-side inputs of stages).
BATCH_NEEDS = tuple(n for n, m in _declared_needs().items() if m["batch"])


class TaskGradients(NamedTuple):
  """The per-task gradients of a step's loss, as inner products (``StepData.task_gradients``).

  Attributes:
    gram: ``[K, K]`` float64, ``<g_d, g_d'>`` with ``g_d`` the gradient, at the parameters before the update,
      of the recipe's loss restricted to the batch's rows of task ``d`` (its own aggregation denominator).
    present: ``[K]`` bool, the tasks with at least one trained token in the batch.
  """
  gram: np.ndarray
  present: np.ndarray


@dataclasses.dataclass(frozen=True)
class PromptData:
  """What a ``PromptFilter`` sees before the rollout.

  Attributes:
    problems: the ``P`` candidate problems (``rljax.envs.Problem``).
    index: ``[P]`` int, each problem's index in the training set (stable across steps: per-prompt state).
    num_dataset_prompts: size of the training set.
    step: the RL step.
    pilot: a :class:`StepData` of the pilot rollout (``PromptFilter.pilot`` samples per prompt), or None.
  """
  problems: tuple
  index: np.ndarray
  num_dataset_prompts: int
  step: int = 0
  pilot: Optional[StepData] = None


@dataclasses.dataclass(frozen=True)
class RunFacts:
  """Static facts of a run that stages may bind to at start-up (``Stage.bind``).

  Attributes:
    num_prompts: prompts (groups) per step; group_size: samples per prompt (the default rollout count).
    max_new_tokens: the completion budget (overlong shaping, Dr.GRPO's normaliser).
    temperature: the configured sampling temperature.
    num_dataset_prompts: size of the training set; num_tasks: task ids (None when the task has none).
    hparams: the objective's initial hparams (controllers start from the loss's values).
    seq_len: the rollout rows' width ``T`` (prompt + completion; a replay buffer's row width).
    task_ids: each training prompt's task id (``task.task_id``), a tuple of ``num_dataset_prompts`` ints, when
      a stage of the recipe needs ``task_id`` and the task defines them (a curriculum's arms), else None.
  """
  num_prompts: int
  group_size: int
  max_new_tokens: int
  temperature: float = 1.0
  num_dataset_prompts: int = 0
  num_tasks: Optional[int] = None
  hparams: Mapping[str, float] = dataclasses.field(default_factory=dict)
  seq_len: int = 0
  task_ids: Optional[tuple] = None


@dataclasses.dataclass(frozen=True)
class ControlInputs:
  """What a controller observes after a step.

  Attributes:
    batch: the step's ``TrainBatch`` (``logp_old``, ``logp_ref``, ``advantages``, ``loss_mask``; arrays may be
      sharded over the mesh).
    data: the step's :class:`StepData`.
    rollout_stats: rollout statistics (``entropy``: masked mean sampler entropy, ``reward_mean``, ...).
    update_metrics: the step's averaged update metrics.
    policy_logp: ``fn() -> logp [B, T]`` of the *updated* policy on ``batch.tokens`` (computed on demand).
  """
  batch: Any
  data: StepData
  rollout_stats: Mapping[str, float]
  update_metrics: Mapping[str, float]
  policy_logp: Callable[[], Any]


def scalar_metrics(metrics: Optional[Mapping], prefix: str = "") -> dict:
  """The finite-or-not scalar entries of ``metrics`` as floats, keys prefixed ``prefix/``."""
  out = {}
  for k, v in dict(metrics or {}).items():
    if isinstance(v, (bool, int, float, np.number)) or (hasattr(v, "shape") and np.ndim(v) == 0):
      try:
        out[f"{prefix}/{k}" if prefix else k] = float(np.asarray(v))
      except (TypeError, ValueError):
        continue
  return out


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
  ``data.extras["replay_mask"] [B]`` bool marking them (it reaches ``TrainBatch.extras``), and the new state
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
      none); the sampled rows of group ``p`` carry ``slots[p]`` as ``data.extras["replay_slot"]`` into ``fn``.
    hints: optional post-rollout hook of the hinted rollouts (``rljax.hints``): ``hints(data, group_size,
      answer_key) -> (prompts [P] hinted prompt text or None, take [P] int, metrics)`` on a scored sampling
      round; the collector samples ``group_size`` completions of each hinted prompt, and ``take[p]`` of group
      ``p``'s failed rows become hinted samples behind the *unhinted* prompt, with the hinted sampler's
      log-probs as ``logp_behavior`` (``extras["replay_mask"]`` marks them).
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


# ----------------------------------------------------------------------------- stage factories for catalog rows


def _signature(fn, drop: Sequence[str] = (), add: Sequence[inspect.Parameter] = ()) -> inspect.Signature:
  """``fn``'s signature without the loop-supplied parameters ``drop``, plus ``add`` (keyword-only)."""
  params = [p for p in inspect.signature(fn).parameters.values() if p.name not in drop]
  params += list(add)
  order = {inspect.Parameter.POSITIONAL_ONLY: 0, inspect.Parameter.POSITIONAL_OR_KEYWORD: 1,
           inspect.Parameter.VAR_POSITIONAL: 2, inspect.Parameter.KEYWORD_ONLY: 3, inspect.Parameter.VAR_KEYWORD: 4}
  return inspect.Signature(sorted(params, key=lambda p: order[p.kind]))


def keyword(name: str, default) -> inspect.Parameter:
  """A keyword-only parameter a stage factory adds to its technique's own (e.g. a filter's ``refill``)."""
  return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)


def loss_term_factory(fn: Callable, *, hparams: Mapping[str, str] = None, needs=(), role: str = "term",
                      fill: Mapping[str, str] = None, slot: Optional[str] = None,
                      batch_extras: Optional[Callable] = None) -> Callable:
  """The ``Technique.stage`` of an objective row: ``factory(*args, **kwargs) -> LossTerm``.

  Args:
    fn: the term factory (``rljax.objectives.ppo_clip``, ...); the stage factory has its signature.
    hparams: ``{argument: hparam name}`` of the controller-movable arguments; an argument left at
      ``None`` is not movable.
    needs: the term's needs, or ``needs(arguments: dict) -> iterable`` when they depend on the arguments
      (e.g. ``top_entropy_mask(source="old")`` needs ``entropy_old``).
    role: ``"policy"``, ``"term"`` or ``"correction"`` (see :class:`LossTerm`); a wrapper of a policy term
      (``erc``, ``top_entropy_mask``) is ``"policy"``.
    fill: ``{argument: other argument}``: a ``None`` argument takes the other's value (``ppo_clip``'s
      ``eps_high`` defaults to ``eps_low``), so that both are movable.
    slot: the recipe slot when it is not the kind's (``kl_in_reward`` is a shaping stage).
    batch_extras: the inputs the term provides itself (see :class:`LossTerm`).
  """
  sig = inspect.signature(fn)
  hparams = dict(hparams or {})

  def factory(*args, **kwargs):
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    for arg, other in (fill or {}).items():
      if arguments.get(arg) is None:
        arguments[arg] = arguments[other]
    positional = [p.name for p in sig.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    call_args = tuple(arguments.pop(n) for n in positional)
    movable = {a: r for a, r in hparams.items()
               if arguments.get(a) is not None and not isinstance(arguments.get(a), LossTerm)}
    for a in movable:
      arguments[a] = float(arguments[a])
    declared = needs(dict(bound.arguments)) if callable(needs) else needs
    return LossTerm(fn, args=call_args, kwargs=arguments, hparams=movable, role=role, name=fn.__name__,
                    needs=frozenset(declared), batch_extras=batch_extras)

  factory.__signature__ = sig
  factory.__name__ = fn.__name__
  factory.__doc__ = f"Stage factory of ``{fn.__name__}``: the same arguments, returns a ``LossTerm``."
  if slot:
    factory.slot = slot
  return factory


def _input(data: StepData, source, by: str):
  if callable(source):
    return source(data)
  if source in NEEDS:
    return data.require(source, by)
  return getattr(data, source)


def data_stage_factory(fn: Callable, cls: type, *, inputs: Mapping[str, Any], needs=(), loop_args=(),
                       result: Optional[Callable] = None, slot: Optional[str] = None, **fixed) -> Callable:
  """The ``Technique.stage`` of a row whose function takes the step's data as arguments.

  ``factory(**hyper_parameters) -> cls(call, ...)`` where ``call(data)`` is
  ``fn(**{arg: data.<field>}, **hyper_parameters)``.

  Args:
    fn: the technique's function (``rljax.advantages.qae``, ``rljax.filters.vcrl``, ...).
    cls: the stage class (``Advantage``, ``Filter``, ``Shaping``, ``MultiReward``).
    inputs: ``{argument of fn: StepData field name, or fn(data) -> value}``; these arguments are supplied by
      the loop and are not hyper-parameters. A field named in ``NEEDS`` (``answer_ids``, ``logp_ref``, ...)
      becomes a need of the stage.
    needs: further needs, or ``needs(hyper_parameters) -> iterable``.
    loop_args: extra keyword parameters (``keyword(name, default)``) passed to ``cls`` instead of ``fn``
      (a filter's ``refill``).
    result: ``result(output, data) -> output`` post-processing ``fn``'s return value into the stage's
      convention (default: unchanged, e.g. ``(advantages, info)``).
    slot: the recipe slot when it is not the kind's.
    **fixed: further ``cls`` fields (``phase="advantages"``, ``transform=True``, ...).
  """
  loop_args = tuple(loop_args)
  sig = _signature(fn, drop=tuple(inputs), add=loop_args)
  loop_names = {p.name for p in loop_args}

  def factory(*args, **kwargs):
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    hyper = dict(bound.arguments)
    loop = {n: hyper.pop(n) for n in loop_names}
    declared = set(needs(hyper) if callable(needs) else needs)
    declared |= {src for src in inputs.values() if isinstance(src, str) and src in NEEDS}
    name = fn.__name__

    def call(data):
      try:
        out = fn(**{arg: _input(data, src, name) for arg, src in inputs.items()}, **hyper)
      except ValueError as e:  # an illegal input: the message names the technique (NeedError already does)
        if isinstance(e, NeedError) or str(e).startswith(f"{name}:"):
          raise
        empty = " (an empty batch, B = 0, is not supported)" if data.batch_size == 0 else ""
        raise ValueError(f"{name}: {e}{empty}") from e
      return out if result is None else result(out, data)

    call.__name__ = name
    return cls(call, name=name, needs=frozenset(declared), **fixed, **loop)

  factory.__signature__ = sig
  factory.__name__ = fn.__name__
  factory.__doc__ = f"Stage factory of ``{fn.__name__}`` ({cls.__name__}); its hyper-parameters as arguments."
  if slot:
    factory.slot = slot
  return factory


def probe_step(*, components: int = 2, steps: int = 3) -> StepData:
  """A tiny step (2 groups x 2 rows, 3 completion tokens, one row shorter) with every input filled.

  Stage factories run their stage once on it when they are built (``checked``), so a bad hyper-parameter fails
  when the recipe is built, not mid-run. ``components``: reward columns (and segment ids); ``steps``: process
  (step) reward columns (and turn ids).
  """
  b, t = 4, 4
  cm = np.array([[0, 1, 1, 1], [0, 1, 1, 0], [0, 1, 1, 1], [0, 1, 1, 1]], bool)  # token 0 is the prompt
  r = np.array([1.0, 0.0, 1.0, 0.0], np.float32)
  zeros = np.zeros((b, t), np.float32)
  ids = lambda k: np.where(cm, np.minimum(np.arange(t) - 1, k - 1), -1).astype(np.int32)
  # a raw uint32[2] PRNG key: building the probe (at import, for the default config) must not start a backend
  return StepData(
      tokens=np.ones((b, t), np.int32), prompt_mask=~cm, completion_mask=cm,
      group_id=np.array([0, 0, 1, 1], np.int32), num_groups=2, valid=np.ones(b, bool),
      lengths=cm.sum(1).astype(np.int32), completions=("1",) * b, problems=(None,) * b,
      prompt_index=np.array([0, 0, 1, 1], np.int64), rewards=r, correct=r.copy(), logp_behavior=zeros,
      entropy_behavior=zeros + 0.5, max_new_tokens=3, key=np.zeros(2, np.uint32), logp_old=zeros, entropy_old=zeros,
      logp_ref=zeros, entropy_ref=zeros, logp_teacher=zeros, values=zeros, greedy_rewards=r[::-1].copy(),
      answer_ids=np.array([0, 1, 0, 0], np.int32), task_id=np.array([0, 0, 1, 1], np.int32), num_tasks=2,
      reward_components=np.repeat(r[:, None], components, 1), reward_names=tuple(f"r{j}" for j in range(components)),
      step_rewards=np.repeat(r[:, None], steps, 1), step_mask=np.ones((b, steps), bool),
      reward_segments=ids(components), turn_ids=ids(steps), turns=(("1",),) * b,
      advantages=np.array([0.5, -0.5, 0.5, -0.5], np.float32))


def checked(factory: Callable, probe: Callable = lambda kwargs: probe_step()) -> Callable:
  """``factory`` whose stage runs once on ``probe(kwargs)`` (a tiny step) when built: bad hyper-parameters raise
  then, not mid-run."""
  import functools  # pylint: disable=import-outside-toplevel

  @functools.wraps(factory)
  def build(*args, **kwargs):
    stage = factory(*args, **kwargs)
    stage.fn(probe(kwargs))
    return stage

  return build
