"""Group statistics over ``group_id`` (ragged groups, no ``[P, G]`` reshape).

Shared by ``rljax.rewards`` (group-relative shaping) and ``rljax.filters``.
Everything here is jit-able: ``num_groups`` is a static Python int and the
statistics are ``jax.ops.segment_*`` reductions, so a group's statistic only
depends on that group's rows (ragged groups give the same result as computing
each group alone, and permuting the batch permutes the per-row outputs).

Value checks (group ids in range, finite inputs) run only when the arrays are
concrete (``rljax.types.is_concrete``); under ``jit`` the functions document
what they do with non-finite values instead of raising.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from rljax.types import is_concrete

Array = jax.Array


class GroupStats(NamedTuple):
  """Per-group statistics, each ``[num_groups]`` (empty groups: count 0, stats 0)."""
  count: Array   # number of valid rows
  mean: Array
  std: Array     # population std (ddof = 0), two-pass
  min: Array
  max: Array


def check_num_groups(num_groups) -> int:
  if isinstance(num_groups, bool) or not isinstance(num_groups, (int, np.integer)) or num_groups <= 0:
    raise ValueError(f"num_groups must be a positive Python int (static), got {num_groups!r}")
  return int(num_groups)


def check_vector(name: str, x, batch: Optional[int] = None) -> Array:
  """``x`` must be ``[B]`` numeric; returns it as a jnp array."""
  shape = tuple(np.shape(x))
  if len(shape) != 1:
    raise ValueError(f"{name} must be a [B] vector, got shape {shape}")
  if batch is not None and shape[0] != batch:
    raise ValueError(f"{name} must have shape ({batch},) to match the batch, got {shape}")
  x = jnp.asarray(x)
  if not (jnp.issubdtype(x.dtype, jnp.number) or x.dtype == jnp.bool_):
    raise ValueError(f"{name} must be numeric or bool, got dtype {x.dtype}")
  return x


def check_finite(name: str, x) -> None:
  """Raises ``ValueError`` naming ``x`` if it is concrete and has NaN/inf."""
  if is_concrete(x):
    values = np.asarray(x)
    if values.dtype.kind == "f" and not np.all(np.isfinite(values)):
      bad = np.flatnonzero(~np.isfinite(values.ravel()))[:5]
      raise ValueError(f"{name} contains non-finite values (NaN/inf) at flat indices {bad.tolist()}")


def check_group_id(group_id, num_groups: int, batch: Optional[int] = None) -> Array:
  """``group_id`` must be ``[B]`` integers in ``[0, num_groups)``."""
  num_groups = check_num_groups(num_groups)
  group_id = check_vector("group_id", group_id, batch)
  if not jnp.issubdtype(group_id.dtype, jnp.integer):
    raise ValueError(f"group_id must be an integer array, got dtype {group_id.dtype}")
  if is_concrete(group_id) and group_id.size:
    lo, hi = int(jnp.min(group_id)), int(jnp.max(group_id))
    if lo < 0 or hi >= num_groups:
      raise ValueError(f"group_id values must lie in [0, num_groups={num_groups}), got range [{lo}, {hi}]")
  return group_id.astype(jnp.int32)


def check_valid(valid, batch: int) -> Array:
  """Optional ``[B]`` row mask (bool or 0/1); ``None`` means every row is valid."""
  if valid is None:
    return jnp.ones((batch,), jnp.bool_)
  valid = check_vector("valid", valid, batch)
  if is_concrete(valid) and valid.dtype != jnp.bool_:
    v = np.asarray(valid)
    if not np.all((v == 0) | (v == 1)):
      raise ValueError("valid must be bool or contain only 0 and 1")
  return valid.astype(jnp.bool_)


def group_stats(x: Array, group_id: Array, num_groups: int, valid: Optional[Array] = None) -> GroupStats:
  """Count, mean, population std, min and max of ``x`` per group over valid rows.

  ``std_g = sqrt(sum_{i in g} (x_i - mean_g)^2 / n_g)`` (two-pass, ddof = 0 as
  ``np.std``). Empty groups give count 0 and zeros elsewhere. Non-finite values
  of ``x`` propagate into their own group's statistics only.
  """
  x = jnp.asarray(x, jnp.float32)
  valid = jnp.ones(x.shape, jnp.bool_) if valid is None else valid
  w = valid.astype(jnp.float32)
  seg = lambda v: jax.ops.segment_sum(v, group_id, num_segments=num_groups)
  xv = jnp.where(valid, x, 0.0)
  count = seg(w)
  safe = jnp.maximum(count, 1.0)
  mean = seg(xv) / safe
  dev = jnp.where(valid, x - mean[group_id], 0.0)
  std = jnp.sqrt(seg(dev * dev) / safe)
  gmax = jax.ops.segment_max(jnp.where(valid, x, -jnp.inf), group_id, num_segments=num_groups)
  gmin = jax.ops.segment_min(jnp.where(valid, x, jnp.inf), group_id, num_segments=num_groups)
  present = count > 0
  return GroupStats(count, jnp.where(present, mean, 0.0), jnp.where(present, std, 0.0),
                    jnp.where(present, gmin, 0.0), jnp.where(present, gmax, 0.0))


def group_any(flag: Array, group_id: Array, num_groups: int) -> Array:
  """``[num_groups]`` bool: does any row of the group have ``flag``."""
  return jax.ops.segment_sum(flag.astype(jnp.int32), group_id, num_segments=num_groups) > 0


def top_groups(score: Array, present: Array, fraction) -> Array:
  """``[G]`` bool: the ``ceil(fraction * #present)`` present groups with the highest score.

  Ties are broken towards the lower group index (a stable sort), so the
  selection is a function of the per-group scores only (not of row order).
  """
  g = score.shape[0]
  key = jnp.where(present, score, -jnp.inf)
  order = jnp.argsort(-key, stable=True)
  rank = jnp.zeros((g,), jnp.int32).at[order].set(jnp.arange(g, dtype=jnp.int32))
  n_present = jnp.sum(present.astype(jnp.float32))
  # ceil with a small guard so that e.g. 0.25 * 8 = 2 stays 2 in float32.
  k = jnp.ceil(jnp.asarray(fraction, jnp.float32) * n_present - 1e-6)
  return present & (rank.astype(jnp.float32) < k)


def check_fraction(name: str, value, *, allow_zero: bool = True) -> float:
  try:
    v = float(value)
  except (TypeError, ValueError):
    raise ValueError(f"{name} must be a number in [0, 1], got {value!r}") from None
  if not math.isfinite(v) or v < 0.0 or v > 1.0 or (not allow_zero and v == 0.0):
    lo = "[0" if allow_zero else "(0"
    raise ValueError(f"{name} must be in {lo}, 1], got {value!r}")
  return v
