"""The step record stages read (:class:`StepData`), the needs its fields declare (:data:`NEEDS`), and the
other records a stage is given (``PromptData``, ``RunFacts``, ``ControlInputs``). See ``rljax.stages``."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from rljax.stages._extras import EXTRAS


class NeedError(ValueError):
  """A stage needs an input the run cannot provide (raised at start-up, naming the stage and the input)."""


def _array_rows(x) -> Optional[int]:
  return None if x is None or np.ndim(x) == 0 else int(np.shape(x)[0])


# The kinds of StepData fields: what ``StepData.take`` and ``StepData.concat`` do with each.
_ROWS = "rows"  # an array [B, ...]: indexed / concatenated along its first axis (when it has the batch's B rows)
_ROW_ITEMS = "row items"  # a tuple of B Python objects (texts, problems, turns): taken / joined item by item
_ROW_EXTRAS = "row extras"  # a dict: ``take`` indexes its [B, ...] entries, ``concat`` joins every entry
_STEP = "step"  # one value for the whole step (sizes, names, the PRNG key): kept as it is


# Who fills each need (``_field(by=...)``): one producer per need. The loop runs a producer only when a stage of
# the recipe needs one of its fields (``produced_by``); ``rljax.train._producers`` registers the functions of the
# conditional ones ("scoring"; the forwards in ``rljax.train._inputs``).
PRODUCERS: Mapping[str, str] = {
    "sampler": "every rollout (the sampler's outputs)",
    "rollout": "the rollout, when the run has it (several rewards; one turn per sample, or an episode's turns)",
    "episodes": "multi-turn episodes (rljax.train._episodes)",
    "scoring": "the host, from the scored completions and the task (a function in rljax.train._producers.SCORING)",
    "greedy rollout": "one greedy rollout of each prompt, scored (ReMax's baseline)",
    "policy forward": "a forward of the policy before the step's updates (the proximal policy)",
    "reference forward": "a forward of the frozen reference policy (a teacher is the reference)",
    "critic forward": "a forward of the critic (the policy's value head when the critic is shared)",
    "stage": "an earlier stage of the recipe (shaping, an estimator)",
    "task gradients": "the per-task gradient Gram matrix of the loss, just before the update",
}


def _field(kind: str, default=dataclasses.MISSING, *, need: Optional[str] = None, by: Optional[str] = None,
           batch: bool = False, replayed: bool = True, train: Optional[str] = None, extra: Optional[str] = None,
           default_factory=dataclasses.MISSING):
  """A :class:`StepData` field of ``kind`` (``_ROWS``, ``_ROW_ITEMS``, ``_ROW_EXTRAS``, ``_STEP``).

  Args:
    need: the field is an input a stage may declare (its description in :data:`NEEDS`); the loop fills it only
      when some stage of the recipe needs it (the sampler's ``logp_behavior``/``entropy_behavior`` always).
    by: the need's one producer, a key of :data:`PRODUCERS` (required with ``need``).
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
    if by not in PRODUCERS:
      raise ValueError(f"need field {need!r}: by={by!r} must be one of {sorted(PRODUCERS)}")
    metadata.update(need=need, by=by, batch=batch, replayed=replayed)
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
  ``extras`` go to ``TrainBatch.extras`` (e.g. DPO pair ids); the extras the library writes are declared in
  :data:`EXTRAS` by their writers' modules and read as typed attributes (``replay_mask``, ``replay_slot``,
  ``hint_mask``, ``role_id``, ``policy_version``, ``logp_prm``; None when absent), written with ``with_extras``
  (checked).

  Each field declares its kind (a per-row array, per-row items, per-row extras or a step-level value), which
  ``take`` and ``concat`` follow, and, for an input, its need and its one producer (``by=``, a key of
  :data:`PRODUCERS`): adding an input is one field here (and, for a host need computed from the scored
  completions, its function in ``rljax.train._producers.SCORING``).
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
      need="the sampler's log-probs of the sampled tokens (every rollout has them)", batch=True, by="sampler")
  entropy_behavior: Optional[np.ndarray] = _rows(
      None, need="the sampler's token entropies (every rollout has them)", by="sampler")
  routing: Optional[np.ndarray] = _rows(None)
  max_new_tokens: int = _field(_STEP, 0)
  step: int = _field(_STEP, 0)
  key: Any = _field(_STEP, None)
  logp_old: Optional[np.ndarray] = _rows(
      None, need="proximal log-probs: the policy before this step's updates, recomputed on the rollout tokens",
      batch=True, train="logp_old", by="policy forward")
  entropy_old: Optional[np.ndarray] = _rows(
      None, need="token entropies of the proximal policy (the same forward as logp_old)", batch=True,
      train="entropy_old", by="policy forward")
  logp_ref: Optional[np.ndarray] = _rows(
      None, need="reference-policy log-probs (a forward of the frozen reference: the policy at the start of RL)",
      batch=True, train="logp_ref", by="reference forward")
  entropy_ref: Optional[np.ndarray] = _rows(
      None, need="token entropies of the reference (base) policy (the same forward as logp_ref)", batch=True,
      by="reference forward")
  logp_teacher: Optional[np.ndarray] = _rows(
      None, need="teacher log-probs (the teacher is the reference policy; TrainBatch.extras['logp_teacher'])",
      batch=True, extra="logp_teacher", by="reference forward")
  values: Optional[np.ndarray] = _rows(
      None, need="critic values V_t at sampling time (needs a critic in the recipe)", batch=True, replayed=False,
      train="values_old", by="critic forward")
  greedy_rewards: Optional[np.ndarray] = _rows(
      None, need="reward of a greedy rollout of each sample's prompt (ReMax's baseline)", replayed=False,
      by="greedy rollout")
  answer_ids: Optional[np.ndarray] = _rows(
      None, need="per-sample answer keys: equal ids for equal extracted answers (task.answer_key)", replayed=False,
      by="scoring")
  task_id: Optional[np.ndarray] = _rows(
      None, need="per-sample task ids in [0, num_tasks) (task.task_id / task.num_tasks)", batch=True,
      replayed=False, train="task_id", by="scoring")
  num_tasks: Optional[int] = _field(_STEP, None)
  reward_components: Optional[np.ndarray] = _rows(
      None, need="[B, K] one column per reward function (a recipe with several rewards)", replayed=False, by="rollout")
  reward_names: tuple = _field(_STEP, ())
  token_rewards: Optional[np.ndarray] = _rows(
      None, need="[B, T] token-level rewards (written by a token-level shaping stage)", replayed=False, by="stage")
  step_rewards: Optional[np.ndarray] = _rows(
      None, need="[B, S] process (step) rewards with step_mask [B, S] (task.step_rewards(completions, problems))",
      replayed=False, by="scoring")
  step_mask: Optional[np.ndarray] = _rows(None)
  reward_segments: Optional[np.ndarray] = _rows(
      None, need="[B, T] reward-segment index of each token: column k of reward_components scores the tokens "
                 "with id k (segmented tasks; TrainBatch.extras['reward_segments'], never the attention packing)",
      batch=True, replayed=False, by="rollout")
  turn_ids: Optional[np.ndarray] = _rows(
      None, need="[B, T] turn ids (multi-turn episodes)", batch=True, replayed=False, train="turn_ids", by="episodes")
  turns: Optional[tuple] = _field(
      _ROW_ITEMS, None, need="per-sample list of the model's turns as text (multi-turn episodes; one turn when "
                             "single-turn)", replayed=False, by="rollout")
  segment_ids: Optional[np.ndarray] = _rows(None, train="segment_ids")
  advantages: Optional[np.ndarray] = _rows(
      None, need="advantages written by an earlier estimator (advantage transforms)", by="stage")
  returns: Optional[np.ndarray] = _rows(
      None, need="critic targets [B, T] written by the advantage estimator (gae)", replayed=False,
      train="returns", by="stage")
  task_gradients: Optional["TaskGradients"] = _field(
      _STEP, None, need="Gram matrix <g_d, g_d'> [K, K] of the per-task gradients of the recipe's loss on the "
                        "step's batch, before the update (a TaskGradients; computed just before the update)",
                        by="task gradients")
  extras: Mapping[str, Any] = _field(_ROW_EXTRAS, default_factory=dict)

  def __getattr__(self, name: str):
    """A declared extra read as an attribute: ``data.replay_mask`` is ``extras["replay_mask"]`` (None when the
    step has none) for each entry of :data:`EXTRAS` (declared by its writer's module, ``rljax.stages._extras``).
    Any other name raises ``AttributeError`` naming the declared extras: a misspelt extra is never a silent None
    (and a ``ValueError`` in ``with_extras``)."""
    if name.startswith("_"):  # dunder / private lookups (copy, pickle): never an extra
      raise AttributeError(name)
    spec = EXTRAS.get(name)
    if spec is None:
      raise AttributeError(f"StepData has no field or declared extra {name!r}; its declared extras "
                           f"(rljax.stages.EXTRAS): {sorted(EXTRAS)}")
    return spec.of(self)

  @property
  def batch_size(self) -> int:
    return int(self.tokens.shape[0])

  def replace(self, **changes) -> "StepData":
    return dataclasses.replace(self, **changes)

  def with_extras(self, **values) -> "StepData":
    """This step with the declared extras ``values`` set (a value None removes the entry), each checked against
    its :data:`EXTRAS` declaration: NumPy kind and shape (``[B]`` or ``[B, T]`` of this step).

    Raises ``ValueError`` for a name not declared in ``EXTRAS`` (naming the declared ones) and for a value of
    another kind or shape (naming the extra and its writer)."""
    unknown = sorted(set(values) - set(EXTRAS))
    if unknown:
      raise ValueError(f"undeclared extras {unknown}; the declared ones (rljax.stages.EXTRAS): {sorted(EXTRAS)} "
                       "(a stage's own keys go into replace(extras=...))")
    extras = dict(self.extras)
    for name, value in values.items():
      if value is None:
        extras.pop(name, None)
        continue
      spec, value = EXTRAS[name], np.asarray(value)
      shape = (self.batch_size,) if spec.shape == "B" else tuple(np.shape(self.tokens))
      if value.dtype.kind not in spec.kinds or value.shape != shape:
        raise ValueError(f"extras[{name!r}] ({spec.doc}; written by {spec.by}) must be of NumPy kind "
                         f"{spec.kinds!r} and shape {shape}, got {value.dtype} of shape {value.shape}")
      extras[name] = value
    return self.replace(extras=extras)

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


def produced_by(producer: str) -> frozenset:
  """The needs ``producer`` (a key of :data:`PRODUCERS`) fills: the loop runs it when a stage needs one of them."""
  if producer not in PRODUCERS:
    raise ValueError(f"unknown producer {producer!r}; producers: {sorted(PRODUCERS)}")
  return frozenset(n for n, m in _declared_needs().items() if m["by"] == producer)


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
