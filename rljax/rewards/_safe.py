"""The trainer's guard around reward functions, and weighted composite rewards.

Both run on the host (they call arbitrary Python verifiers).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

__all__ = ["RewardError", "safe_reward", "composite"]


class RewardError(ValueError):
  """A reward function raised, or returned a wrong shape / non-numeric / NaN."""


def _fn_name(fn) -> str:
  name = getattr(fn, "__name__", None)
  if name is None and hasattr(fn, "func"):  # functools.partial
    name = getattr(fn.func, "__name__", None)
  return name or repr(fn)


def safe_reward(fn: Callable, *, lenient: bool = False, name: Optional[str] = None) -> Callable:
  """Wraps a reward function so that it fails loudly (strict) or scores 0 (lenient).

  ``wrapped(completions, references=None, **kwargs) -> (rewards [B] float32, info)``
  calls ``fn(completions, references, **kwargs)`` with ``B = len(completions)``.
  ``fn`` may return ``[B]`` numbers (list, NumPy or JAX array) or
  ``(rewards, info_dict)``; the extra info is merged into ``info``.

  Strict (``lenient=False``): raises ``RewardError`` (a ``ValueError``) whose
  message names the function when ``fn`` raises, returns something that is
  not ``[B]`` numbers, or returns NaN/inf.
  Lenient: the offending entries score 0 instead (the whole batch when ``fn``
  raised or returned a wrong shape) and ``info["errors"]`` counts them;
  ``info["error"]`` holds the last message. ``info["errors"]`` is always
  present (0 when nothing failed).

  Args:
    fn: the reward function (e.g. ``rljax.rewards.math_answer``).
    lenient: score failures 0 instead of raising.
    name: name used in errors and logs (default ``fn.__name__``).
  """
  if not callable(fn):
    raise ValueError(f"fn must be callable, got {fn!r}")
  label = name or _fn_name(fn)

  def wrapped(completions: Sequence[Any], references: Optional[Sequence[Any]] = None, **kwargs):
    b = len(completions)
    info: dict[str, Any] = {"errors": 0}

    def fail(msg: str, count: int, cause=None):
      if not lenient:
        raise RewardError(f"reward function {label!r}: {msg}") from cause
      info["errors"] += count
      info["error"] = msg

    try:
      out = fn(completions, references, **kwargs)
    except Exception as e:  # noqa: BLE001 - the point is to catch anything
      fail(f"raised {type(e).__name__}: {e}", b, e)
      return np.zeros((b,), np.float32), info
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], Mapping):
      out, extra = out
      for k, v in extra.items():
        info[k if k != "errors" else "fn_errors"] = v
    try:
      values = np.asarray(out, dtype=np.float64)
    except (TypeError, ValueError) as e:
      fail(f"returned values that are not numbers ({type(out).__name__})", b, e)
      return np.zeros((b,), np.float32), info
    if values.shape != (b,):
      fail(f"returned shape {values.shape}, expected ({b},) (one reward per completion)", b)
      return np.zeros((b,), np.float32), info
    bad = ~np.isfinite(values)
    if bad.any():
      fail(f"returned {int(bad.sum())} non-finite rewards (NaN/inf) at indices "
           f"{np.flatnonzero(bad)[:5].tolist()}", int(bad.sum()))
      values = np.where(bad, 0.0, values)
    return values.astype(np.float32), info

  wrapped.__name__ = f"safe_{label}"
  wrapped.reward_name = label
  return wrapped


def composite(components: Mapping[str, Callable], weights: Optional[Mapping[str, float]] = None, *,
              lenient: bool = False) -> Callable:
  """Weighted composite reward ``r_i = sum_c w_c r_c(y_i)`` that logs every component.

  Source: multi-component rewards (Gazal-R1 accuracy/format/reasoning,
  000_3e503271be254a43.txt L15; MobileGUI-RL success + efficiency,
  001_5839a3671b0b4d92.txt L41; TableGPT-R1 L79; AlphaAlign L105). The
  abstracts give no weights or combination rule; the weighted sum is our
  (interpretation) reading.

  Args:
    components: ``{name: reward_fn}``; each ``reward_fn(completions,
      references, **kwargs)`` is wrapped in ``safe_reward(fn, lenient=lenient,
      name=name)``, so a failing component is reported by its name.
    weights: ``{name: w_c}`` with exactly the same keys (default: all 1.0).
    lenient: passed to ``safe_reward``.

  Returns:
    ``fn(completions, references=None, **kwargs) -> (total [B] float32, info)``
    with ``info = {"components": {name: [B]}, "matrix": [B, K] (unweighted, in
    ``info["names"]`` order, ready for multi-reward advantages such as GDPO),
    "names": tuple, "weights": tuple, "errors": total count, "errors/<name>":
    count, "mean/<name>": float}``. ``w_c = 0`` removes a component's effect
    on the total (it is still computed and logged).
  """
  if not isinstance(components, Mapping) or not components:
    raise ValueError("components must be a non-empty mapping {name: reward_fn}")
  names = tuple(components)
  for n in names:
    if not isinstance(n, str) or not n:
      raise ValueError(f"components keys must be non-empty strings, got {n!r}")
    if not callable(components[n]):
      raise ValueError(f"components[{n!r}] must be callable")
  if weights is None:
    weights = {n: 1.0 for n in names}
  if set(weights) != set(names):
    raise ValueError(f"weights must have exactly the keys of components {sorted(names)}, got {sorted(weights)}")
  w = []
  for n in names:
    try:
      wn = float(weights[n])
    except (TypeError, ValueError):
      raise ValueError(f"weights[{n!r}] must be a number, got {weights[n]!r}") from None
    if not math.isfinite(wn):
      raise ValueError(f"weights[{n!r}] must be finite, got {wn}")
    w.append(wn)
  wrapped = {n: safe_reward(components[n], lenient=lenient, name=n) for n in names}

  def fn(completions, references=None, **kwargs):
    cols, info = [], {"components": {}, "names": names, "weights": tuple(w), "errors": 0}
    for n in names:
      r, sub = wrapped[n](completions, references, **kwargs)
      cols.append(r)
      info["components"][n] = r
      info[f"errors/{n}"] = sub["errors"]
      info[f"mean/{n}"] = float(r.mean()) if r.size else 0.0
      info["errors"] += sub["errors"]
      if "parse_failures" in sub:
        info[f"parse_failures/{n}"] = sub["parse_failures"]
    matrix = np.stack(cols, axis=1) if cols else np.zeros((len(completions), 0), np.float32)
    total = np.zeros((matrix.shape[0],), np.float64)
    for k, wk in enumerate(w):
      if wk != 0.0:
        total += wk * matrix[:, k].astype(np.float64)
    info["matrix"] = matrix
    return total.astype(np.float32), info

  fn.__name__ = "composite_" + "_".join(names)
  return fn
