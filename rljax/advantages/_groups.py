"""Group machinery shared by every estimator: validation, segment statistics.

Groups are identified by ``group_id [B]`` (int, ``0 <= group_id < num_groups``)
and may be ragged. Statistics are computed with ``jax.ops.segment_sum`` over
``num_groups + 1`` segments: rows that are invalid (``valid`` False, or a
non-finite reward under ``jit``) are routed to the extra last segment, so they
never touch a real group. ``num_groups`` must be static; it defaults to ``B``
(always enough once group ids are re-indexed to ``0..P-1``).
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from rljax.types import check_mask, is_concrete  # noqa: F401 (re-exported)

Array = jax.Array

SCALES = ("group", "batch", "none")
SINGLETONS = ("zero", "raw")


def float_dtype(x):
  return jnp.promote_types(jnp.asarray(x).dtype if is_concrete(x) else x.dtype, jnp.float32)


def check_rank(name: str, x, rank: int) -> tuple:
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


def check_finite(name: str, x) -> None:
  """Raises ``ValueError`` if a concrete ``x`` holds NaN/inf (traced: no-op)."""
  if is_concrete(x):
    values = np.asarray(x)
    if values.size and not np.all(np.isfinite(values)):
      raise ValueError(f"{name} contains non-finite values (NaN or inf); mask them with `valid` "
                       f"or fix the reward function")


def check_ids(name: str, ids, b: int, num: int, num_name: str = "num_groups") -> None:
  """Shape/dtype check of an id array; value range checked when concrete."""
  check_shape(name, ids, (b,))
  dtype = jnp.asarray(ids).dtype if is_concrete(ids) else ids.dtype
  if not jnp.issubdtype(dtype, jnp.integer):
    raise ValueError(f"{name} must be an integer array, got dtype {dtype}")
  if is_concrete(ids) and b:
    values = np.asarray(ids)
    if values.min() < 0 or values.max() >= num:
      raise ValueError(f"{name} values must lie in [0, {num_name}={num}), got range "
                       f"[{values.min()}, {values.max()}]; re-index ids to 0..n-1 or raise {num_name}")


def resolve_num(num: Optional[int], b: int, name: str = "num_groups") -> int:
  if num is None:
    return max(int(b), 1)
  if not isinstance(num, (int, np.integer)) or num < 1:
    raise ValueError(f"{name} must be a positive Python int (static), got {num!r}")
  return int(num)


def prepare(rewards, group_id, valid, num_groups, *, rewards_name="rewards", group_name="group_id"):
  """Validates ``rewards [B]``, ``group_id [B]``, ``valid [B] | None``.

  Returns ``(r, gid, v, num_groups)`` where ``r`` is float with invalid
  entries zeroed, ``v`` a float 0/1 validity (valid AND finite), and ``gid``
  routes invalid rows to segment ``num_groups``.
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


def seg_sum(x, gid, num_groups):
  """Sum over ``num_groups + 1`` segments (the last one holds invalid rows)."""
  return jax.ops.segment_sum(x, gid, num_segments=num_groups + 1)


class GroupStats(NamedTuple):
  """Per-row group statistics (gathered back to ``[B]``)."""
  count: Array   # valid members of the row's group
  mean: Array    # group mean (0 for singleton groups under ``singleton="raw"``)
  std: Array     # group std with ``ddof`` (1 for singletons under "raw", 0 under "zero")


def group_stats(r, gid, v, num_groups, *, ddof: int = 1, singleton: str = "zero") -> GroupStats:
  """Mean and std of ``r`` over each row's group (only valid rows count).

  ``singleton="raw"`` reproduces verl: a group with one valid member gets
  mean 0 and std 1 (so its advantage is its raw reward); ``"zero"`` gives it
  its own mean (so its advantage is 0).
  """
  count = seg_sum(v, gid, num_groups)
  total = seg_sum(r * v, gid, num_groups)
  mean = total / jnp.maximum(count, 1.0)
  centred = (r - mean[gid]) * v
  ss = seg_sum(centred * centred, gid, num_groups)
  var = ss / jnp.maximum(count - ddof, 1.0)
  std = jnp.sqrt(jnp.maximum(var, 0.0))
  if singleton == "raw":
    single = count <= 1.0
    mean = jnp.where(single, 0.0, mean)
    std = jnp.where(single, 1.0, std)
  return GroupStats(count[gid], mean[gid], std[gid])


def batch_mean_std(x, v, *, ddof: int = 1):
  n = jnp.sum(v)
  mean = jnp.sum(x * v) / jnp.maximum(n, 1.0)
  var = jnp.sum(((x - mean) * v) ** 2) / jnp.maximum(n - ddof, 1.0)
  return mean, jnp.sqrt(jnp.maximum(var, 0.0))


def to_tokens(advantages: Array, mask: Array) -> Array:
  """Broadcasts sequence advantages ``[B]`` over tokens: ``A[b, t] = A[b]·mask[b, t]``.

  Args:
    advantages: ``[B]`` float.
    mask: ``[B, T]`` bool/0-1 (typically ``completion_mask`` / ``loss_mask``).

  Returns:
    ``[B, T]`` advantages, zero outside ``mask``.
  """
  (b,) = check_rank("advantages", advantages, 1)
  shape = check_rank("mask", mask, 2)
  if shape[0] != b:
    raise ValueError(f"mask must be [B, T] with B={b}, got {shape}")
  check_mask("mask", mask)
  adv = jnp.asarray(advantages)
  return adv[:, None] * jnp.asarray(mask).astype(adv.dtype)


def masked_whiten(x: Array, mask: Array, *, eps: float = 1e-8, ddof: int = 1, shift_mean: bool = True) -> Array:
  """verl's ``masked_whiten``: ``(x − mean_m)·rsqrt(var_m + eps)`` over entries where ``mask``.

  ``var_m`` uses ``ddof`` (verl: unbiased, ddof=1). Unlike verl (which raises
  for fewer than 2 valid entries) a single valid entry whitens to 0 and no
  valid entry leaves zeros; the result is multiplied by ``mask``.
  """
  m = jnp.asarray(mask).astype(float_dtype(x))
  n = jnp.sum(m)
  mean = jnp.sum(x * m) / jnp.maximum(n, 1.0)
  var = jnp.sum(((x - mean) * m) ** 2) / jnp.maximum(n - ddof, 1.0)
  out = (x - mean) * jax.lax.rsqrt(var + eps)
  if not shift_mean:
    out = out + mean
  return out * m


def dense_ids(*keys: Array, valid: Optional[Array] = None) -> tuple[Array, Array]:
  """Dense ids ``0..n-1`` for distinct key tuples (lexicographic order), ``[B]``.

  Returns ``(ids, num_distinct)``; invalid rows (``valid`` False) are given
  id ``B`` (one past any real id). Used to combine (group, stratum) keys
  without overflow-prone arithmetic.
  """
  b = keys[0].shape[0]
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
  last = jnp.concatenate([seg[1:] != seg[:-1], jnp.ones((1,), bool)])  # last element of each run

  def combine(a, b):
    av, af = a
    bv, bf = b
    return jnp.where(bf, bv, av + bv), af | bf

  # scan over the reversed array: a run's last element starts a new segment
  vals, _ = jax.lax.associative_scan(combine, (x[::-1], last[::-1]))
  return vals[::-1]


# ------------------------------------------------------------------ eager fast path
_FINITE_NAMES = ("rewards", "advantages", "episode_rewards", "scores", "metric", "values", "baseline_rewards",
                 "turn_rewards", "signal", "logp", "logp_ref")
_ID_NAMES = (("group_id", "num_groups"), ("key", "num_keys"), ("task_id", "num_tasks"))
_MASK_NAMES = ("valid", "mask", "passed", "correct", "segment_valid", "turn_valid")


def _value_checks(fn_name: str, args: dict) -> None:
  """The value checks estimators make on concrete inputs (run before the jitted call)."""
  valid = args.get("valid")
  for name in _MASK_NAMES:
    if args.get(name) is not None:
      check_mask(name, args[name])
  rows = None if valid is None else np.asarray(valid).astype(bool)
  for name in _FINITE_NAMES:
    x = args.get(name)
    if x is None:
      continue
    vals = np.asarray(x)
    if rows is not None and vals.ndim >= 1 and vals.shape[0] == rows.shape[0]:
      vals = vals[rows]
    if vals.size and np.issubdtype(vals.dtype, np.number) and not np.all(np.isfinite(vals)):
      raise ValueError(f"{name} contains non-finite values (NaN or inf) on valid rows; mask them with `valid` "
                       f"or fix the reward function")
  for name, num_name in _ID_NAMES:
    ids = args.get(name)
    if ids is None or np.ndim(ids) != 1:
      continue
    b = np.shape(ids)[0]
    num = resolve_num(args.get(num_name), b, num_name)
    if np.issubdtype(np.asarray(ids).dtype, np.integer):
      check_ids(name, ids, b, num, num_name)
  if fn_name == "passk" and args.get("group_id") is not None:
    gid, k = np.asarray(args["group_id"]), args["k"]
    keep = np.ones(gid.shape, bool) if rows is None else rows
    if gid.size and isinstance(k, int):
      sizes = np.bincount(gid[keep], minlength=gid.max() + 1) if keep.any() else np.zeros(1, int)
      small = [g for g in np.unique(gid[keep]) if sizes[g] < k]
      if small:
        raise ValueError(f"k={k} exceeds the valid size ({int(sizes[small[0]])}) of group {int(small[0])}; "
                         f"every group needs at least k samples")


def _is_static(value) -> bool:
  return value is None or isinstance(value, (bool, int, float, str))


def fast_path(fn):
  """Runs ``fn`` jitted when called eagerly with concrete arrays.

  Value checks (finite rewards on valid rows, id ranges, 0/1 masks) run first
  on the host; Python scalars/strings are static arguments; lists/tuples of
  numbers (e.g. ``weights``) become static tuples. Called under a transform
  (tracers), ``fn`` runs directly (it is traced into the caller's program).
  """
  import functools
  import inspect

  sig = inspect.signature(fn)
  cache: dict = {}

  @functools.wraps(fn)
  def wrapper(*args, **kwargs):
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    statics, arrays = {}, {}
    for name, value in arguments.items():
      if isinstance(value, list):
        value = tuple(value)
      if _is_static(value) or (isinstance(value, tuple) and all(_is_static(x) for x in value)):
        statics[name] = value
      else:
        arrays[name] = value
    if not all(is_concrete(x) for x in jax.tree_util.tree_leaves(arrays)):
      return fn(**arguments)
    _value_checks(fn.__name__, arguments)
    key = tuple(sorted(statics.items()))
    jitted = cache.get(key)
    if jitted is None:
      jitted = cache[key] = jax.jit(functools.partial(fn, **statics))
    return jitted(**arrays)

  wrapper.__wrapped__ = fn
  return wrapper
