"""Held-out evaluation: greedy exact-match accuracy and unbiased pass@k."""
from __future__ import annotations

from math import comb
from typing import Sequence

import jax
import numpy as np

from rljax.train._streams import stream

__all__ = ["pass_at_k", "evaluate"]


def pass_at_k(n: int, c, k: int) -> np.ndarray:
  """Unbiased pass@k (Chen et al. 2021, arXiv:2107.03374): ``1 - C(n-c, k) / C(n, k)``.

  Args:
    n: samples drawn per problem.
    c: ``[P]`` number of correct samples per problem.
    k: ``1 <= k <= n``.
  """
  if not 1 <= k <= n:
    raise ValueError(f"k must be in [1, n={n}], got {k}")
  c = np.asarray(c, np.int64)
  if np.any((c < 0) | (c > n)):
    raise ValueError(f"c must be in [0, n={n}]")
  return np.asarray([1.0 - comb(n - int(ci), k) / comb(n, k) for ci in c], np.float64)


def _generate_scores(sample_fn, task, codec, problems, *, batch_size, n, greedy, temperature, key):
  """``(scores [P, n], formats [P, n] or None)``: the task's ``score`` of ``n`` completions per problem, and its
  ``format_score`` when it has one (a task whose failures can be format or content measures them apart)."""
  fmt = getattr(task, "format_score", None)
  scores, formats = [], []
  for start in range(0, len(problems), batch_size):
    chunk = list(problems[start:start + batch_size])
    real = len(chunk)
    chunk = chunk + [chunk[0]] * (batch_size - real)  # fixed shapes: one compilation
    rollout = sample_fn([codec.prompt_ids(p) for p in chunk], n=n, greedy=greedy, temperature=temperature,
                        key=jax.random.fold_in(key, start))
    completions = codec.decode_completions(rollout.tokens, rollout.completion_mask)
    expanded = [p for p in chunk for _ in range(n)]
    s = np.asarray(task.score(completions, expanded), np.float32).reshape(batch_size, n)
    scores.append(s[:real])
    if fmt is not None:
      formats.append(np.asarray(fmt(completions, expanded), np.float32).reshape(batch_size, n)[:real])
  return np.concatenate(scores, 0), (np.concatenate(formats, 0) if fmt is not None else None)


def evaluate(sample_fn, task, codec, problems: Sequence, *, batch_size: int, key, num_samples: int = 0,
             pass_k: Sequence[int] = (), temperature: float = 1.0) -> dict:
  """Greedy accuracy (and, with ``num_samples``, sampled success rate and pass@k).

  ``sample_fn(prompt_ids, *, n, greedy, temperature, key) -> Rollout``.
  Returns ``{"greedy_accuracy", "sample_accuracy", "pass@k" ...}`` (fractions); a task with a ``format_score``
  adds ``greedy_format`` (and ``sample_format``): the share of completions in the asked format, right or wrong.
  """
  batch_size = min(batch_size, len(problems))
  greedy, greedy_fmt = _generate_scores(sample_fn, task, codec, problems, batch_size=batch_size, n=1, greedy=True,
                                        temperature=1.0, key=key)
  out = {"greedy_accuracy": float(greedy.mean())}
  if greedy_fmt is not None:
    out["greedy_format"] = float(greedy_fmt.mean())
  if num_samples:
    s, s_fmt = _generate_scores(sample_fn, task, codec, problems, batch_size=batch_size, n=num_samples,
                                greedy=False, temperature=temperature, key=stream(key, "eval_samples"))
    if s_fmt is not None:
      out["sample_format"] = float(s_fmt.mean())
    c = s.sum(1).astype(np.int64)
    out["sample_accuracy"] = float(s.mean())
    for k in pass_k:
      out[f"pass@{k}"] = float(pass_at_k(num_samples, c, k).mean())
  return out
