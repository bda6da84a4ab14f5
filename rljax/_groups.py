"""Group machinery shared by ``rljax.advantages``, ``rljax.rewards`` and ``rljax.filters``.

Groups are identified by ``group_id [B]`` (int, ``0 <= group_id < num_groups``)
and may be ragged; nothing here reshapes to ``[P, G]``. ``num_groups`` is a
static Python int and every statistic is a ``jax.ops.segment_*`` reduction, so
a group's statistic depends only on that group's rows (ragged groups give the
same result as computing each group alone; permuting the batch permutes the
per-row outputs).

Two views of the same statistics:

* ``group_stats(x, group_id, num_groups, valid)`` -> per-group ``[num_groups]``
  count / mean / std / min / max (rewards, filters);
* ``row_stats(r, gid, v, num_groups)`` -> per-row ``[B]`` count / mean / std
  of the row's group, where ``gid`` comes from ``prepare`` and routes invalid
  rows to an extra last segment (advantages).

Both use ``segment_moments`` (two-pass mean and ``ddof`` std).

Validation (``check_*``): shapes, dtypes and static parameters are checked at
trace time; values (id ranges, finiteness, 0/1 masks) only when the arrays are
concrete (``rljax.types.is_concrete``). Every error is a ``ValueError`` naming
the argument.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from rljax.types import check_mask, is_concrete

Array = jax.Array

__all__ = [
    "float_dtype", "check_rank", "check_shape", "check_choice", "check_vector", "check_finite",
    "check_float_vector", "check_num_groups", "resolve_num", "check_ids", "check_group_id", "check_valid",
    "check_fraction", "prepare", "seg_sum", "segment_moments", "GroupStats", "group_stats", "RowStats",
    "row_stats", "batch_mean_std", "group_any", "top_groups", "dense_ids", "Ranks", "group_ranks",
    "segmented_suffix_sum",
]


# ----------------------------------------------------------------------------- validation
def float_dtype(x):
  """The float dtype statistics of ``x`` are computed in (at least float32)."""
  return jnp.promote_types(jnp.asarray(x).dtype if is_concrete(x) else x.dtype, jnp.float32)


def check_rank(name: str, x, rank: int) -> tuple:
  """Raises unless ``x`` has ``rank`` dimensions; returns its shape."""
  shape = tuple(np.shape(x))
  if len(shape) != rank:
    raise ValueError(f"{name} must have rank {rank}, got shape {shape}")
  return shape


def check_shape(name: str, x, shape: tuple) -> None:
  if tuple(np.shape(x)) != tuple(shape):
    raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(np.shape(x))}")


def check_choice(name: str, value, allowed: tuple) -> None:
  if value not in allowed:
    raise ValueError(f"{name} must be one of {allowed}, got {value!r}")


def check_vector(name: str, x, batch: Optional[int] = None) -> Array:
  """``x`` must be a ``[B]`` numeric or bool vector (``B == batch`` if given); returns it as jnp."""
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
  """Raises ``ValueError`` naming ``x`` if it is concrete and holds NaN/inf (traced: no-op)."""
  if is_concrete(x):
    values = np.asarray(x)
    if jnp.issubdtype(values.dtype, jnp.inexact) and values.size and not np.all(np.isfinite(values)):
      bad = np.flatnonzero(~np.isfinite(values.ravel()))[:5]
      raise ValueError(f"{name} contains non-finite values (NaN or inf) at flat indices {bad.tolist()}; "
                       f"mask them with `valid` or fix the function that produced them")


def check_float_vector(name: str, x, batch: Optional[int] = None) -> Array:
  """``check_vector`` + ``check_finite``, cast to float32."""
  x = check_vector(name, x, batch)
  check_finite(name, x)
  return x.astype(jnp.float32)


def check_num_groups(num_groups, name: str = "num_groups") -> int:
  """``num_groups`` must be a positive Python int (it is a static segment count)."""
  if isinstance(num_groups, bool) or not isinstance(num_groups, (int, np.integer)) or num_groups <= 0:
    raise ValueError(f"{name} must be a positive Python int (static), got {num_groups!r}")
  return int(num_groups)


def resolve_num(num: Optional[int], b: int, name: str = "num_groups") -> int:
  """``num`` validated by ``check_num_groups``; ``None`` defaults to ``max(B, 1)``."""
  if num is None:
    return max(int(b), 1)
  return check_num_groups(num, name)


def check_ids(name: str, ids, b: Optional[int], num: Optional[int], num_name: str = "num_groups") -> None:
  """``ids`` must be ``[B]`` integers; values in ``[0, num)`` (``[0, inf)`` if ``num`` is None), when concrete."""
  check_vector(name, ids, b)
  dtype = jnp.asarray(ids).dtype if is_concrete(ids) else ids.dtype
  if not jnp.issubdtype(dtype, jnp.integer):
    raise ValueError(f"{name} must be an integer array, got dtype {dtype}")
  if is_concrete(ids) and np.size(ids):
    values = np.asarray(ids)
    lo, hi = values.min(), values.max()
    if lo < 0 or (num is not None and hi >= num):
      upper = "inf" if num is None else f"{num_name}={num}"
      raise ValueError(f"{name} values must lie in [0, {upper}), got range [{lo}, {hi}]; re-index ids to "
                       f"0..n-1" + ("" if num is None else f" or raise {num_name}"))


def check_group_id(group_id, num_groups: int, batch: Optional[int] = None) -> Array:
  """``group_id`` must be ``[B]`` integers in ``[0, num_groups)``; returns it as int32."""
  num_groups = check_num_groups(num_groups)
  check_ids("group_id", group_id, batch, num_groups)
  return jnp.asarray(group_id).astype(jnp.int32)


def check_valid(valid, batch: int) -> Array:
  """Optional ``[B]`` row mask (bool or 0/1) as bool; ``None`` means every row is valid."""
  if valid is None:
    return jnp.ones((batch,), jnp.bool_)
  check_vector("valid", valid, batch)
  check_mask("valid", valid)
  return jnp.asarray(valid).astype(jnp.bool_)


def check_fraction(name: str, value, *, allow_zero: bool = True) -> float:
  """A Python float in ``[0, 1]`` (``(0, 1]`` with ``allow_zero=False``)."""
  try:
    v = float(value)
  except (TypeError, ValueError):
    raise ValueError(f"{name} must be a number in [0, 1], got {value!r}") from None
  if not math.isfinite(v) or v < 0.0 or v > 1.0 or (not allow_zero and v == 0.0):
    lo = "[0" if allow_zero else "(0"
    raise ValueError(f"{name} must be in {lo}, 1], got {value!r}")
  return v


def prepare(rewards, group_id, valid, num_groups, *, rewards_name="rewards", group_name="group_id"):
  """Validates ``rewards [B]``, ``group_id [B]``, ``valid [B] | None`` for ``row_stats``.

  Returns ``(r, gid, v, num_groups)`` where ``r`` is float with invalid
  entries zeroed, ``v`` a float 0/1 validity (valid AND finite), and ``gid``
  routes invalid rows to the extra segment ``num_groups``. Concrete
  non-finite rewards on valid rows raise; traced ones make the row invalid.
  """
  (b,) = check_rank(rewards_name, rewards, 1)
  num_groups = resolve_num(num_groups, b)
  check_ids(group_name, group_id, b, num_groups)
  if valid is not None:
    check_mask("valid", valid, (b,))
  dtype = float_dtype(rewards)
  r = jnp.asarray(rewards, dtype)
  v = jnp.ones((b,), bool) if valid is None else jnp.asarray(valid).astype(bool)
  if is_concrete(rewards) and is_concrete(v):
    values = np.asarray(rewards)
    if not np.all(np.isfinite(values[np.asarray(v)])):
      raise ValueError(f"{rewards_name} contains non-finite values (NaN or inf) on valid rows; "
                       f"mask them with `valid` or fix the reward function")
  v = v & jnp.isfinite(r)
  r = jnp.where(v, r, 0.0)
  gid = jnp.where(v, jnp.asarray(group_id, jnp.int32), num_groups)
  return r, gid, v.astype(dtype), num_groups


# ----------------------------------------------------------------------------- statistics
def seg_sum(x, gid, num_groups):
  """Sum over ``num_groups + 1`` segments (the last one holds the rows ``prepare`` made invalid)."""
  return jax.ops.segment_sum(x, gid, num_segments=num_groups + 1)


def segment_moments(x: Array, seg: Array, num_segments: int, valid: Array, *, ddof: int = 0):
  """Per-segment ``(count, mean, std)``, each ``[num_segments]``, over rows where ``valid``.

  ``mean_s = sum_{i in s} x_i / n_s``;
  ``std_s = sqrt(sum_{i in s} (x_i - mean_s)^2 / max(n_s - ddof, 1))`` (two-pass).
  Empty segments give count 0, mean 0, std 0. ``x`` is float; rows outside
  ``valid`` never enter a sum (even if non-finite); non-finite values on valid
  rows propagate into their own segment only.

  The mean is summed shifted by the segment's largest valid value ``c_s``: ``mean_s = c_s + sum (x_i − c_s) / n_s``
  (the same number in exact arithmetic). A segment of equal values then has its value as mean and std 0 exactly;
  summed unshifted in float32, seven rewards of 0.3 have a mean 3e-8 off, which ``(x − mean) / (std + 1e-6)`` turns
  into advantages of 0.029 (as torch's ``mean``/``std`` in verl and TRL do).
  """
  seg_fn = lambda a: jax.ops.segment_sum(a, seg, num_segments=num_segments)
  count = seg_fn(valid.astype(x.dtype))
  top = jax.ops.segment_max(jnp.where(valid, x, -jnp.inf), seg, num_segments=num_segments)
  shift = jnp.where(count > 0, top, 0.0)
  shift = jnp.where(jnp.isfinite(shift), shift, 0.0)  # a non-finite value still propagates through the sum below
  mean = shift + seg_fn(jnp.where(valid, x - shift[seg], 0.0)) / jnp.maximum(count, 1.0)
  dev = jnp.where(valid, x - mean[seg], 0.0)
  std = jnp.sqrt(seg_fn(dev * dev) / jnp.maximum(count - ddof, 1.0))
  return count, mean, std


class GroupStats(NamedTuple):
  """Per-group statistics, each ``[num_groups]`` (empty groups: count 0, stats 0)."""
  count: Array   # number of valid rows
  mean: Array
  std: Array     # std with ``ddof`` (default 0, population, as ``np.std``), two-pass
  min: Array
  max: Array


def group_stats(x: Array, group_id: Array, num_groups: int, valid: Optional[Array] = None, *,
                ddof: int = 0) -> GroupStats:
  """Count, mean, std, min and max of ``x [B]`` per group over valid rows: ``[num_groups]`` each.

  ``std_g = sqrt(sum_{i in g} (x_i - mean_g)^2 / max(n_g - ddof, 1))``
  (``segment_moments``). Computed in ``float_dtype(x)`` (float32 for int,
  bool and float32 inputs). Empty groups give count 0 and zeros elsewhere.
  Non-finite values of ``x`` on valid rows propagate into their own group's
  statistics only.
  """
  x = jnp.asarray(x, float_dtype(x))
  valid = jnp.ones(x.shape, jnp.bool_) if valid is None else valid
  count, mean, std = segment_moments(x, group_id, num_groups, valid, ddof=ddof)
  gmax = jax.ops.segment_max(jnp.where(valid, x, -jnp.inf), group_id, num_segments=num_groups)
  gmin = jax.ops.segment_min(jnp.where(valid, x, jnp.inf), group_id, num_segments=num_groups)
  present = count > 0
  return GroupStats(count, jnp.where(present, mean, 0.0), jnp.where(present, std, 0.0),
                    jnp.where(present, gmin, 0.0), jnp.where(present, gmax, 0.0))


class RowStats(NamedTuple):
  """Per-row statistics of the row's group (gathered back to ``[B]``)."""
  count: Array   # valid members of the row's group
  mean: Array    # group mean (0 for singleton groups under ``singleton="raw"``)
  std: Array     # group std with ``ddof`` (1 for singletons under "raw")


def row_stats(r, gid, v, num_groups, *, ddof: int = 1, singleton: str = "zero") -> RowStats:
  """Mean and std of ``r`` over each row's group, per row ``[B]`` (inputs from ``prepare``).

  ``singleton="raw"`` reproduces verl: a group with one valid member gets
  mean 0 and std 1 (so its advantage is its raw reward); ``"zero"`` gives it
  its own mean (so its advantage is 0).
  """
  count, mean, std = segment_moments(r, gid, num_groups + 1, v > 0, ddof=ddof)
  if singleton == "raw":
    single = count <= 1.0
    mean = jnp.where(single, 0.0, mean)
    std = jnp.where(single, 1.0, std)
  return RowStats(count[gid], mean[gid], std[gid])


def batch_mean_std(x, v, *, ddof: int = 1):
  """Masked batch ``(mean, std)`` of ``x`` over entries with weight ``v`` (0/1), std with ``ddof``."""
  n = jnp.sum(v)
  mean = jnp.sum(x * v) / jnp.maximum(n, 1.0)
  var = jnp.sum(((x - mean) * v) ** 2) / jnp.maximum(n - ddof, 1.0)
  return mean, jnp.sqrt(jnp.maximum(var, 0.0))


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


def dense_ids(*keys: Array, valid: Optional[Array] = None) -> tuple[Array, Array]:
  """Dense ids ``0..n-1`` for distinct key tuples (lexicographic order), ``[B]``.

  Returns ``(ids, num_distinct)``; invalid rows (``valid`` False) are given
  id ``B`` (one past any real id). Used to combine (group, stratum) keys
  without overflow-prone arithmetic.
  """
  b = keys[0].shape[0]
  if b == 0:  # an empty batch: no ids (``changed.at[0]`` below would be out of bounds)
    return jnp.zeros((0,), jnp.int32), jnp.int32(0)
  vkey = jnp.zeros((b,), jnp.int32) if valid is None else (~jnp.asarray(valid, bool)).astype(jnp.int32)
  all_keys = (vkey,) + tuple(keys)
  order = jnp.lexsort(tuple(reversed(all_keys)))  # last key is primary for lexsort
  sorted_keys = [k[order] for k in all_keys]
  changed = jnp.zeros((b,), bool).at[0].set(True)
  for k in sorted_keys:
    changed = changed.at[1:].set(changed[1:] | (k[1:] != k[:-1]))
  ids_sorted = jnp.cumsum(changed.astype(jnp.int32)) - 1
  ids = jnp.zeros((b,), jnp.int32).at[order].set(ids_sorted)
  if valid is not None:
    ids = jnp.where(valid, ids, b)
  return ids, ids_sorted[-1] + 1 if b else jnp.int32(0)


class Ranks(NamedTuple):
  """Within-group order statistics of a value (per row, ``[B]``)."""
  count: Array     # group size (valid rows)
  less: Array      # members with a strictly smaller value
  equal: Array     # members with an equal value (incl. itself)
  position: Array  # 0-based position in the group sorted by (value, row index)
  order: Array     # permutation sorting rows by (gid, value, index)
  start: Array     # [num_groups + 1] first sorted position of each segment


def group_ranks(values, gid, num_groups) -> Ranks:
  """Order statistics of ``values`` inside each segment of ``gid`` (ties by row index)."""
  b = values.shape[0]
  if b == 0:  # an empty batch: every field empty (the run-length arithmetic below needs one row)
    empty = jnp.zeros((0,), jnp.int32)
    count = jnp.zeros((num_groups + 1,), jnp.int32)
    return Ranks(empty, empty, empty, empty, empty, count)
  order = jnp.lexsort((values, gid))
  sg, sv = gid[order], values[order]
  idx = jnp.arange(b, dtype=jnp.int32)
  count = jax.ops.segment_sum(jnp.ones((b,), jnp.int32), gid, num_segments=num_groups + 1)
  start = jnp.cumsum(count) - count
  pos_sorted = idx - start[sg]
  new_val = jnp.concatenate([jnp.ones((1,), bool), (sg[1:] != sg[:-1]) | (sv[1:] != sv[:-1])])
  vid = jnp.cumsum(new_val.astype(jnp.int32)) - 1
  first = jax.ops.segment_min(idx, vid, num_segments=b)
  run = jax.ops.segment_sum(jnp.ones((b,), jnp.int32), vid, num_segments=b)
  inv = jnp.zeros((b,), jnp.int32).at[order].set(idx)
  less = (first[vid] - start[sg])[inv]
  equal = run[vid][inv]
  return Ranks(count[gid], less, equal, pos_sorted[inv], order, start)


def segmented_suffix_sum(x, seg):
  """Inclusive suffix sums of ``x`` restarting at every change of the (sorted) ``seg``: ``[B]``."""
  if x.shape[0] == 0:
    return x
  last = jnp.concatenate([seg[1:] != seg[:-1], jnp.ones((1,), bool)])  # last element of each run

  def combine(a, b):
    av, af = a
    bv, bf = b
    return jnp.where(bf, bv, av + bv), af | bf

  # scan over the reversed array: a run's last element starts a new segment
  vals, _ = jax.lax.associative_scan(combine, (x[::-1], last[::-1]))
  return vals[::-1]
