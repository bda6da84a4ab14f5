"""Private helpers shared by the ratio terms and the mismatch corrections.

Nothing here is public API: shape/value validation that raises ``ValueError``
naming the argument, log-prob lookup on a ``TrainBatch``, masked reductions,
per-sequence and per-segment means, and the metric helpers every ratio term
reports.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np

from rljax.objectives._statistics import batch_statistics, call_with_statistics, has_statistics
from rljax.types import PolicyOutputs, TrainBatch, check_mask, is_concrete

Array = jax.Array
LogpSource = Union[None, str, Callable[[TrainBatch], Array]]

LOG_RATIO_CLAMP = 20.0
"""``log r`` is clamped to ``[-20, 20]`` before ``exp`` (verl's convention)."""

PROXIMAL = "proximal"
"""The log-prob source ``batch.logp_proximal``: ``logp_old`` if set, else ``logp_behavior``."""

_BATCH_LOGP_FIELDS = ("logp_old", "logp_behavior", "logp_ref")


# ----------------------------------------------------------------------------- validation


def concrete_value(x) -> Optional[np.ndarray]:
  """``x`` as a NumPy array when its value is known at trace time, else ``None``."""
  if x is None or not is_concrete(x):
    return None
  try:
    return np.asarray(x, dtype=np.float64)
  except (TypeError, ValueError) as e:
    raise ValueError(f"expected a number or numeric array, got {x!r}") from e


def check_scalar(name: str, x, *, lo=None, hi=None, lo_open=False, hi_open=False, allow_none=False):
  """Validates a hyper-parameter; a traced value is accepted unchecked.

  Hyper-parameters that controllers move (clip bounds, coefficients) may be
  jax arrays, possibly traced; their values are checked only when concrete so
  that no Python branch is taken on a tracer.
  """
  if x is None:
    if allow_none:
      return
    raise ValueError(f"{name} must be a number, got None")
  if isinstance(x, bool):
    raise ValueError(f"{name} must be a number, got bool {x!r}")
  if not is_concrete(x):
    if jnp.ndim(x) != 0:
      raise ValueError(f"{name} must be a scalar, got shape {jnp.shape(x)}")
    return
  v = concrete_value(x)
  if v.ndim != 0:
    raise ValueError(f"{name} must be a scalar, got shape {v.shape}")
  v = float(v)
  if not np.isfinite(v):
    raise ValueError(f"{name} must be finite, got {v}")
  if lo is not None and (v < lo or (lo_open and v == lo)):
    raise ValueError(f"{name} must be {'>' if lo_open else '>='} {lo}, got {v}")
  if hi is not None and (v > hi or (hi_open and v == hi)):
    raise ValueError(f"{name} must be {'<' if hi_open else '<='} {hi}, got {v}")


def check_order(lo_name: str, lo, hi_name: str, hi) -> None:
  """Raises unless ``lo <= hi`` (checked only when both are concrete)."""
  a, b = concrete_value(lo), concrete_value(hi)
  if a is not None and b is not None and float(a) > float(b):
    raise ValueError(f"{lo_name} ({float(a)}) must be <= {hi_name} ({float(b)})")


def check_choice(name: str, value, choices: Sequence[str]) -> None:
  if value not in choices:
    raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")


def check_logp_source(name: str, source: LogpSource) -> None:
  if source is not None and not isinstance(source, str) and not callable(source):
    raise ValueError(f"{name} must be None, a TrainBatch field / extras key, or a callable(batch), got {source!r}")


def check_inputs(out: PolicyOutputs, batch: TrainBatch, *, need_advantages: bool = True) -> tuple[int, int]:
  """Trace-time checks shared by every term: shapes and a 0/1 loss mask."""
  shape = tuple(np.shape(out.logp))
  if len(shape) != 2:
    raise ValueError(f"out.logp must be [B, T], got shape {shape}")
  check_mask("batch.loss_mask", batch.loss_mask, shape)
  if need_advantages:
    if batch.advantages is None:
      raise ValueError("batch.advantages is required by this term")
    if tuple(np.shape(batch.advantages)) != shape:
      raise ValueError(f"batch.advantages must have shape {shape} (like out.logp), got {np.shape(batch.advantages)}")
  return shape


def batch_source(batch: TrainBatch, source, fields: tuple, *, name: str):
  """``(array, label)`` of a source argument on ``batch``: a callable ``batch -> array``, a ``TrainBatch`` field
  named in ``fields``, or a key of ``batch.extras``. Raises ``ValueError`` naming ``name`` when the field is None or
  the key absent. Shared by ``get_logp`` and ``segment_ratio``'s ids."""
  if callable(source):
    return source(batch), f"{name} (callable)"
  if source in fields:
    value, label = getattr(batch, source), f"batch.{source}"
    if value is None:
      raise ValueError(f"{name}: {label} is None but this term reads it")
    return value, label
  extras = dict(batch.extras or {})
  if source not in extras:
    raise ValueError(f"{name}={source!r} is neither a TrainBatch field {tuple(fields)} nor a key of batch.extras "
                     f"{sorted(extras)}")
  return extras[source], f"batch.extras[{source!r}]"


def get_logp(batch: TrainBatch, source: LogpSource, shape: tuple, *, name: str, default: str = PROXIMAL) -> Array:
  """Resolves a log-prob source to its ``[B, T]`` array on ``batch``: the one place a source name is read.

  ``source`` is ``None`` (``default``), ``"proximal"`` (``batch.logp_proximal``: ``batch.logp_old`` if set, else
  ``batch.logp_behavior``), a ``TrainBatch`` field name (``"logp_old"``, ``"logp_behavior"``, ``"logp_ref"``), a
  key of ``batch.extras`` (e.g. a behaviour log-prob computed under another prompt: hints, Guide, OC-GRPO), or a
  callable ``batch -> [B, T]``. Raises ``ValueError`` naming ``name`` when the source is absent, and naming the
  array when its shape is not ``shape`` (like ``out.logp``).
  """
  if source is None:
    source = default
  if source == PROXIMAL:
    try:
      logp = batch.logp_proximal
    except ValueError as e:
      raise ValueError(f"{name}: {e}") from None
    label = "batch.logp_old" if logp is batch.logp_old else "batch.logp_behavior"
  else:
    logp, label = batch_source(batch, source, _BATCH_LOGP_FIELDS, name=name)
  if tuple(np.shape(logp)) != tuple(shape):
    raise ValueError(f"{label} must have shape {tuple(shape)} (like out.logp), got {np.shape(logp)}")
  return jnp.asarray(logp)


def logp_need(source: LogpSource) -> Optional[str]:
  """The ``rljax.stages.NEEDS`` entry the loop must compute for a log-prob ``source`` (see ``get_logp``): ``None``
  and ``"proximal"`` read ``logp_old``, a ``TrainBatch`` log-prob field itself; an extras key or a callable
  needs nothing the loop computes on request (None)."""
  if source is None or source == PROXIMAL:
    return "logp_old"
  if isinstance(source, str) and source in _BATCH_LOGP_FIELDS:
    return source
  return None


def float_dtype(*xs):
  """At least float32; float64 when an input is float64 (x64 tests)."""
  return jnp.result_type(jnp.float32, *[jnp.asarray(x).dtype for x in xs])


# ----------------------------------------------------------------------------- reductions


def masked_mean(x: Array, mask: Array) -> Array:
  """``sum(x m) / max(sum(m), 1)`` over all axes (0 when nothing is masked in)."""
  return jnp.sum(jnp.where(mask != 0, x * mask, 0)) / jnp.maximum(jnp.sum(mask), 1.0)


def masked_max(x: Array, mask: Array) -> Array:
  """Max of ``x`` over ``mask`` (0 when the mask is empty)."""
  if jnp.size(x) == 0:  # an empty batch
    return jnp.zeros((), x.dtype)
  has = jnp.sum(mask) > 0
  return jnp.where(has, jnp.max(jnp.where(mask > 0, x, -jnp.inf)), 0.0)


def masked_min(x: Array, mask: Array) -> Array:
  if jnp.size(x) == 0:  # an empty batch
    return jnp.zeros((), x.dtype)
  has = jnp.sum(mask) > 0
  return jnp.where(has, jnp.min(jnp.where(mask > 0, x, jnp.inf)), 0.0)


def seq_mean(x: Array, mask: Array) -> Array:
  """Per-sequence masked mean ``[B]``: ``sum_t x m / max(sum_t m, 1)``."""
  return jnp.sum(x * mask, axis=1) / jnp.maximum(jnp.sum(mask, axis=1), 1.0)


def seq_sum(x: Array, mask: Array) -> Array:
  return jnp.sum(x * mask, axis=1)


def seq_max(x: Array, mask: Array) -> Array:
  """Per-sequence masked max ``[B]`` (0 for an empty row)."""
  has = jnp.sum(mask, axis=1) > 0
  return jnp.where(has, jnp.max(jnp.where(mask > 0, x, -jnp.inf), axis=1), 0.0)


def segment_mean(x: Array, mask: Array, segment_ids: Array, num_segments: int) -> Array:
  """Masked mean of ``x`` over the tokens sharing a (row, segment id); ``[B, T]``.

  Segment ids are per row and must lie in ``[0, num_segments)``; equal ids in
  different rows are different segments, and the tokens of a segment need not
  be contiguous. Every position (masked or not) receives its segment's mean;
  a segment with no masked-in token gets 0.
  """
  b, t = x.shape
  flat = (jnp.arange(b, dtype=jnp.int32)[:, None] * num_segments + segment_ids.astype(jnp.int32)).reshape(-1)
  total = jax.ops.segment_sum((x * mask).reshape(-1), flat, num_segments=b * num_segments)
  count = jax.ops.segment_sum(mask.reshape(-1), flat, num_segments=b * num_segments)
  mean = total / jnp.maximum(count, 1.0)
  return mean[flat].reshape(b, t)


# ----------------------------------------------------------------------------- metrics


def ratio_metrics(log_ratio: Array, mask: Array, token_log_ratio: Optional[Array] = None) -> dict:
  """``ratio_mean``, ``ratio_max``, ``ratio_min`` and ``approx_kl`` (k3, Schulman).

  ``log_ratio`` is the log of the ratio the term uses (token, sequence or
  segment ratio broadcast to tokens); the KL metrics use the per-token
  ``token_log_ratio`` (default ``log_ratio``):
  ``approx_kl = mean_t (r_t - 1 - log r_t)`` estimates KL(pi_old || pi_theta)
  (>= 0); ``approx_kl_k1 = mean_t (-log r_t)`` is verl's ``ppo_kl``.
  """
  log_ratio = jax.lax.stop_gradient(log_ratio)
  tlr = log_ratio if token_log_ratio is None else jax.lax.stop_gradient(token_log_ratio)
  ratio = jnp.exp(log_ratio)
  return {
      "ratio_mean": masked_mean(ratio, mask),
      "ratio_max": masked_max(ratio, mask),
      "ratio_min": masked_min(ratio, mask),
      "approx_kl": masked_mean(jnp.exp(tlr) - 1.0 - tlr, mask),
      "approx_kl_k1": masked_mean(-tlr, mask),
  }


def clip_metrics(low_active: Array, high_active: Array, mask: Array) -> dict:
  """Fractions of loss tokens where the lower / upper clip removes the gradient."""
  low = masked_mean(low_active.astype(mask.dtype), mask)
  high = masked_mean(high_active.astype(mask.dtype), mask)
  return {"clip_frac_low": low, "clip_frac_high": high, "clip_frac": low + high}


def stop_metrics(metrics: dict) -> dict:
  return {k: jax.lax.stop_gradient(v) for k, v in metrics.items()}


def set_name(fn, name: str):
  """Gives a term its catalog name (its metric prefix inside ``chain``)."""
  fn.name = name
  fn.__name__ = name
  fn.__qualname__ = name
  return fn


Correction = Callable[[PolicyOutputs, TrainBatch], tuple]


def check_correction(correction: Any) -> tuple:
  """Normalises ``correction=`` (None, one callable, or a sequence of them) to a tuple."""
  if correction is None:
    return ()
  items = tuple(correction) if isinstance(correction, (list, tuple)) else (correction,)
  for i, c in enumerate(items):
    if not callable(c):
      raise ValueError(f"correction[{i}] must be a callable correction(out, batch) -> (weight, keep_mask, metrics), "
                       f"got {c!r}")
  return items


def corrections_statistics(corrections: tuple):
  """``batch_statistics(out, batch)`` of a ratio term whose corrections read a batch statistic
  (``tis(normalize=True)``): the tuple of the corrections' statistics (``None`` for the others);
  ``None`` when no correction reads one."""
  if not any(has_statistics(c) for c in corrections):
    return None
  return lambda out, batch: tuple(batch_statistics(c, out, batch) for c in corrections)


def apply_corrections(corrections: tuple, out: PolicyOutputs, batch: TrainBatch, shape: tuple, mask: Array,
                      statistics: Optional[tuple] = None):
  """Runs the corrections; returns ``(weight [B, T], keep [B, T], metrics)``.

  ``weight = prod_c sg(weight_c)`` and ``keep = prod_c keep_c``; ratio terms
  multiply their per-token loss by ``weight * keep``. The
  aggregation denominator is left unchanged (AReaL convention: it counts the
  original ``loss_mask``). Metrics are prefixed ``"correction/"`` (and the
  correction's name when several are given); ``correction/masked_frac`` is the
  fraction of loss tokens any correction zeroed. ``statistics``: the whole
  batch's (``corrections_statistics``), one entry per correction.
  """
  weight_all = jnp.ones(shape, mask.dtype)
  keep_all = jnp.ones(shape, mask.dtype)
  metrics = {}
  for i, c in enumerate(corrections):
    result = call_with_statistics(c, out, batch, None if statistics is None else statistics[i])
    if not (isinstance(result, tuple) and len(result) == 3):
      raise ValueError(f"correction {i} must return (weight [B, T], keep_mask [B, T], metrics dict)")
    weight, keep, c_metrics = result
    for label, arr in (("weight", weight), ("keep_mask", keep)):
      if tuple(np.shape(arr)) != tuple(shape):
        raise ValueError(f"correction {i} returned {label} of shape {np.shape(arr)}, expected {tuple(shape)}")
    keep = jnp.asarray(keep).astype(mask.dtype)
    weight_all = weight_all * jax.lax.stop_gradient(jnp.asarray(weight)).astype(mask.dtype)
    keep_all = keep_all * keep
    prefix = "correction/" if len(corrections) == 1 else f"correction/{getattr(c, 'name', i)}/"
    for k, v in dict(c_metrics).items():
      metrics[prefix + k] = v
  if corrections:
    metrics["correction/masked_frac"] = masked_mean(1.0 - keep_all, mask)
  return weight_all, keep_all, stop_metrics(metrics)
