"""The data contract every rljax room agrees on (see ARCHITECTURE.md).

All batched arrays are ``[B, T]`` (B sequences, T positions); masks are
explicit; nothing is ragged inside ``jit``. Token-level quantities are aligned
with ``tokens``: ``logp[b, t] = log pi(tokens[b, t] | tokens[b, :t])``, so
position 0 (which has no context) and prompt positions carry zeros and are
excluded by the masks. A sequence-level quantity is ``[B]``; a group of
samples of one prompt is identified by ``group_id [B]``, never by reshaping.

The three containers are frozen dataclasses registered as JAX pytrees
(optional fields may be ``None``). Build them with ``.create(...)``, which
validates shapes and dtypes (and, for concrete arrays, that masks are 0/1) and
raises ``ValueError`` naming the offending field. The plain constructor does
no checks and is what jitted code uses.

``LossHooks`` / ``HookedLoss`` are how a loss function declares its micro-batching hooks to the train step
(``rljax.train.LossFn``), shared by the step and the wrappers that forward them (``rljax.parallel.fsdp_loss_fn``).

``Problem`` (one prompt with its reference answer: what tasks generate, prompt
loaders yield and verifiers score) is a plain frozen dataclass of the host; it is also
``rljax.envs.Problem``.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array

__all__ = ["Rollout", "TrainBatch", "PolicyOutputs", "Problem", "LossHooks", "HookedLoss", "loss_hooks", "check_mask",
           "is_concrete"]


def is_concrete(x) -> bool:
  """True when ``x`` holds values (not a tracer), so value checks are possible."""
  return not isinstance(x, jax.core.Tracer)


def _shape(x) -> tuple:
  return tuple(np.shape(x))


def check_mask(name: str, mask, shape: Optional[tuple] = None) -> None:
  """Raises ``ValueError`` unless ``mask`` is boolean or 0/1-valued.

  Values are checked only when ``mask`` is concrete; a traced float mask is
  accepted (its values cannot be seen at trace time).
  """
  if shape is not None and _shape(mask) != tuple(shape):
    raise ValueError(f"{name} must have shape {tuple(shape)}, got {_shape(mask)}")
  dtype = jnp.asarray(mask).dtype if is_concrete(mask) else mask.dtype
  if dtype == jnp.bool_:
    return
  if not (jnp.issubdtype(dtype, jnp.integer) or jnp.issubdtype(dtype, jnp.floating)):
    raise ValueError(f"{name} must be bool or 0/1 numbers, got dtype {dtype}")
  if is_concrete(mask):
    values = np.asarray(mask)
    if not np.all((values == 0) | (values == 1)):
      bad = values[(values != 0) & (values != 1)].ravel()[:3]
      raise ValueError(f"{name} must contain only 0 and 1, found values such as {bad.tolist()}")


def _check_shape(name: str, x, shape: tuple) -> None:
  if x is None:
    return
  if _shape(x)[: len(shape)] != tuple(shape) or len(_shape(x)) < len(shape):
    raise ValueError(f"{name} must have leading shape {tuple(shape)}, got {_shape(x)}")


def _check_exact(name: str, x, shape: tuple) -> None:
  if x is not None and _shape(x) != tuple(shape):
    raise ValueError(f"{name} must have shape {tuple(shape)}, got {_shape(x)}")


def _check_tokens(tokens) -> tuple[int, int]:
  if len(_shape(tokens)) != 2:
    raise ValueError(f"tokens must be [B, T], got shape {_shape(tokens)}")
  if not jnp.issubdtype(jnp.asarray(tokens).dtype if is_concrete(tokens) else tokens.dtype, jnp.integer):
    raise ValueError("tokens must be an integer array")
  return _shape(tokens)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Rollout:
  """What the sampler returns.

  Attributes:
    tokens: ``[B, T]`` int32, prompt followed by completion (padded).
    prompt_mask: ``[B, T]`` bool, True on (unpadded) prompt tokens.
    completion_mask: ``[B, T]`` bool, True on sampled tokens.
    logp_behavior: ``[B, T]`` float32, log-prob of each sampled token under the
      *untempered* sampling policy (0 outside ``completion_mask``).
    group_id: ``[B]`` int32, index of the prompt each sample belongs to.
    policy_version: ``[B]`` int32, version of the parameters that sampled it.
    logp_sampling: optional ``[B, T]`` log-prob under the distribution actually
      sampled from (temperature, top-k/top-p/min-p truncation applied).
    entropy_behavior: optional ``[B, T]`` entropy of the untempered policy.
    routing: optional ``[B, T, L, k]`` int32 MoE expert ids (routing replay).
    finish_reason: optional ``[B]`` int32 (see ``rljax.sampling.FinishReason``).
  """
  tokens: Array
  prompt_mask: Array
  completion_mask: Array
  logp_behavior: Array
  group_id: Array
  policy_version: Array
  logp_sampling: Optional[Array] = None
  entropy_behavior: Optional[Array] = None
  routing: Optional[Array] = None
  finish_reason: Optional[Array] = None

  @classmethod
  def create(cls, **fields) -> "Rollout":
    """Validating constructor (raises ``ValueError`` naming the field)."""
    b, t = _check_tokens(fields["tokens"])
    for name in ("prompt_mask", "completion_mask"):
      check_mask(name, fields[name], (b, t))
    for name in ("logp_behavior", "logp_sampling", "entropy_behavior"):
      _check_exact(name, fields.get(name), (b, t))
    _check_shape("routing", fields.get("routing"), (b, t))
    for name in ("group_id", "policy_version", "finish_reason"):
      _check_exact(name, fields.get(name), (b,))
    return cls(**fields)

  @property
  def batch_size(self) -> int:
    return self.tokens.shape[0]

  def replace(self, **changes) -> "Rollout":
    return dataclasses.replace(self, **changes)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TrainBatch:
  """What one update consumes.

  Attributes:
    tokens: ``[B, T]`` int32.
    loss_mask: ``[B, T]`` bool/0-1, tokens that contribute to the loss.
    advantages: ``[B, T]`` float32 (a sequence-level advantage is broadcast).
    group_id: ``[B]`` int32.
    rewards: optional ``[B]`` or ``[B, K]`` float32.
    logp_behavior: optional ``[B, T]`` sampler log-probs (behaviour policy).
    logp_old: optional ``[B, T]`` proximal / old-policy log-probs (PPO ratio
      denominator). When absent, terms fall back to ``logp_behavior``.
    logp_ref: optional ``[B, T]`` reference-policy log-probs (KL terms).
    entropy_old: optional ``[B, T]`` entropy of the old policy.
    values_old: optional ``[B, T]`` critic values at sampling time.
    returns: optional ``[B, T]`` critic targets.
    segment_ids: optional ``[B, T]`` int32, the attention packing (``rljax.models``: tokens attend within
      equal non-zero ids, 0 = padding). A per-token reward-segment index is ``extras["reward_segments"]``.
    turn_ids: optional ``[B, T]`` int32 (multi-turn).
    task_id: optional ``[B]`` int32.
    routing: optional ``[B, T, L_moe, k]`` int32 MoE expert ids to replay in
      the update's forward (rollout routing replay, R3: the sampler's routing).
    extras: mapping of additional named arrays (e.g. ``"logp_teacher"``),
      ``[B]`` or ``[B, T]``; terms document the keys they read.
  """
  tokens: Array
  loss_mask: Array
  advantages: Array
  group_id: Array
  rewards: Optional[Array] = None
  logp_behavior: Optional[Array] = None
  logp_old: Optional[Array] = None
  logp_ref: Optional[Array] = None
  entropy_old: Optional[Array] = None
  values_old: Optional[Array] = None
  returns: Optional[Array] = None
  segment_ids: Optional[Array] = None
  turn_ids: Optional[Array] = None
  task_id: Optional[Array] = None
  routing: Optional[Array] = None
  extras: Mapping[str, Any] = dataclasses.field(default_factory=dict)

  @classmethod
  def create(cls, **fields) -> "TrainBatch":
    """Validating constructor (raises ``ValueError`` naming the field)."""
    b, t = _check_tokens(fields["tokens"])
    check_mask("loss_mask", fields["loss_mask"], (b, t))
    for name in ("advantages", "logp_behavior", "logp_old", "logp_ref", "entropy_old",
                 "values_old", "returns", "segment_ids", "turn_ids"):
      _check_exact(name, fields.get(name), (b, t))
    _check_exact("group_id", fields.get("group_id"), (b,))
    _check_exact("task_id", fields.get("task_id"), (b,))
    _check_shape("routing", fields.get("routing"), (b, t))
    rewards = fields.get("rewards")
    if rewards is not None and (len(_shape(rewards)) not in (1, 2) or _shape(rewards)[0] != b):
      raise ValueError(f"rewards must be [B] or [B, K] with B={b}, got {_shape(rewards)}")
    for key, value in dict(fields.get("extras") or {}).items():
      if _shape(value)[:1] != (b,):
        raise ValueError(f"extras[{key!r}] must have leading dimension B={b}, got {_shape(value)}")
    return cls(**fields)

  @property
  def logp_proximal(self) -> Array:
    """``logp_old`` if set, else ``logp_behavior`` (on-policy sampler log-probs)."""
    if self.logp_old is not None:
      return self.logp_old
    if self.logp_behavior is not None:
      return self.logp_behavior
    raise ValueError("TrainBatch needs logp_old or logp_behavior for a ratio term")

  def replace(self, **changes) -> "TrainBatch":
    return dataclasses.replace(self, **changes)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class PolicyOutputs:
  """What the model (through the fused kernels) gives the objectives.

  Attributes:
    logp: ``[B, T]`` float32 log-prob of ``tokens[b, t]`` under the current
      policy (0 at position 0).
    entropy: optional ``[B, T]`` float32 policy entropy at each position.
    routing: optional ``[B, T, L, k]`` MoE expert ids used in the forward.
    values: optional ``[B, T]`` critic values.
    aux_loss: optional scalar (e.g. MoE load balancing).
  """
  logp: Array
  entropy: Optional[Array] = None
  routing: Optional[Array] = None
  values: Optional[Array] = None
  aux_loss: Optional[Array] = None

  @classmethod
  def create(cls, **fields) -> "PolicyOutputs":
    logp = fields["logp"]
    if len(_shape(logp)) != 2:
      raise ValueError(f"logp must be [B, T], got {_shape(logp)}")
    for name in ("entropy", "values"):
      _check_exact(name, fields.get(name), _shape(logp))
    _check_shape("routing", fields.get("routing"), _shape(logp))
    return cls(**fields)

  def replace(self, **changes) -> "PolicyOutputs":
    return dataclasses.replace(self, **changes)


@dataclasses.dataclass(frozen=True)
class Problem:
  """One prompt with its reference answer.

  Attributes:
    prompt: the text the policy continues.
    answer: the canonical correct completion (without the end token).
    meta: task-specific fields (operands, target, ...), JSON-serialisable.
  """
  prompt: str
  answer: str
  meta: Mapping[str, Any] = dataclasses.field(default_factory=dict)


class LossHooks(NamedTuple):
  """The micro-batching hooks of a loss function (``rljax.train.LossFn`` says what each does), each None when the
  loss has none."""
  denominator: Optional[Callable] = None
  statistics: Optional[Callable] = None
  with_aux_weight: Optional[Callable] = None


class HookedLoss:
  """Base of a loss function with micro-batching hooks: it declares them in one typed record, ``hooks() ->
  LossHooks``, the only thing ``make_train_step`` reads besides the call (``objective_loss`` and
  ``rljax.parallel.fsdp_loss_fn`` are ones). A plain callable is a loss without hooks."""

  def hooks(self) -> LossHooks:
    """The hooks this loss has (default: none)."""
    return LossHooks()


def loss_hooks(loss_fn) -> LossHooks:
  """``loss_fn.hooks()`` for a ``HookedLoss``; none for a plain callable.

  Raises:
    TypeError: a plain callable carrying a hook as an attribute (``loss_fn.denominator = ...``, the convention
      before ``HookedLoss``): it would be ignored, so micro-batching would silently stop being exact.
  """
  if isinstance(loss_fn, HookedLoss):
    return loss_fn.hooks()
  stray = [name for name in LossHooks._fields if callable(getattr(loss_fn, name, None))]
  if stray:
    raise TypeError(f"the loss function {loss_fn!r} defines {stray} as attribute(s), which make_train_step no "
                    "longer reads: subclass rljax.train.HookedLoss and return them from hooks() -> LossHooks(...)")
  return LossHooks()
