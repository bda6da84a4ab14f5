"""Advantage-specific helpers: token broadcast, masked whitening, the eager fast path.

Group statistics and input validation shared with ``rljax.rewards`` and
``rljax.filters`` live in ``rljax._groups``.
"""
from __future__ import annotations

import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np

from rljax._groups import check_ids, check_rank, float_dtype, resolve_num
from rljax.types import check_mask, is_concrete

Array = jax.Array

SCALES = ("group", "batch", "none")
SINGLETONS = ("zero", "raw")


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


def safe_div(num, denom):
  """``num / denom`` where ``denom > 0``, else 0 (a group of equal rewards with ``eps=0``: 0/0 would be NaN);
  ``grpo``'s guard, shared by every estimator that divides by a std plus ``eps``."""
  ok = denom > 0
  return jnp.where(ok, num / jnp.where(ok, denom, 1.0), 0.0)


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


# ------------------------------------------------------------------ eager fast path
_FINITE_NAMES = ("rewards", "advantages", "episode_rewards", "scores", "metric", "values", "baseline_rewards",
                 "turn_rewards", "signal", "logp", "logp_ref")
_ID_NAMES = (("group_id", "num_groups"), ("key", "num_keys"), ("task_id", "num_tasks"))
_MASK_NAMES = ("valid", "mask", "passed", "correct", "segment_valid", "turn_valid")
# estimators that read their [B, T] inputs only inside `mask` (padding may hold anything, e.g. NaN log-probs)
_READ_INSIDE_MASK = ("implicit_progress_reward", "oprl", "gae")


def _value_checks(fn_name: str, args: dict) -> None:
  """The value checks estimators make on concrete inputs (run before the jitted call)."""
  valid = args.get("valid")
  for name in _MASK_NAMES:
    if args.get(name) is not None:
      check_mask(name, args[name])
  rows = None if valid is None else np.asarray(valid).astype(bool)
  inside = None
  if fn_name in _READ_INSIDE_MASK and args.get("mask") is not None:
    inside = np.asarray(args["mask"]).astype(bool)
  for name in _FINITE_NAMES:
    x = args.get(name)
    if x is None:
      continue
    vals = np.asarray(x)
    if inside is not None and vals.shape == inside.shape:
      if vals.size and np.issubdtype(vals.dtype, np.number) and not np.all(np.isfinite(vals[inside])):
        raise ValueError(f"{name} contains non-finite values (NaN or inf) inside `mask`; leave those positions "
                         f"out of `mask` or fix the function that produced them")
      continue
    turns = args.get("turn_valid")
    if name in ("turn_rewards", "signal") and turns is not None and vals.shape == np.shape(turns):
      vals = np.where(np.asarray(turns).astype(bool), vals, 0.0)  # padded turns are not read
    if rows is not None and vals.ndim >= 1 and vals.shape[0] == rows.shape[0]:
      vals = vals[rows]
    if vals.size and np.issubdtype(vals.dtype, np.number) and not np.all(np.isfinite(vals)):
      if "valid" in args:
        raise ValueError(f"{name} contains non-finite values (NaN or inf) on valid rows; mask them with `valid` "
                         f"or fix the reward function")
      raise ValueError(f"{name} contains non-finite values (NaN or inf); fix the function that produced them")
  for name, num_name in _ID_NAMES:
    ids = args.get(name)
    if ids is None or np.ndim(ids) != 1:
      continue
    b = np.shape(ids)[0]
    num = resolve_num(args.get(num_name), b, num_name)
    if np.issubdtype(np.asarray(ids).dtype, np.integer):
      check_ids(name, ids, b, num, num_name)
  if fn_name == "gagar" and args.get("weight") == "factor" and args.get("passed") is not None:
    on = np.asarray(args["passed"]).astype(bool)
    if rows is not None and rows.shape == on.shape:
      on &= rows
    if not np.all(np.asarray(args["scores"])[on] > 0):
      raise ValueError("scores must be > 0 on passing rows for weight='factor' (they are the quality factors f)")
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
