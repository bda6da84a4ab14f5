"""Held-out evaluation: greedy exact-match accuracy and unbiased pass@k."""
from __future__ import annotations

from math import comb
from typing import Sequence

import jax
import numpy as np

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
  scores = []
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
  return np.concatenate(scores, 0)


def evaluate(sample_fn, task, codec, problems: Sequence, *, batch_size: int, key, num_samples: int = 0,
             pass_k: Sequence[int] = (), temperature: float = 1.0) -> dict:
  """Greedy accuracy (and, with ``num_samples``, sampled success rate and pass@k).

  ``sample_fn(prompt_ids, *, n, greedy, temperature, key) -> Rollout``.
  Returns ``{"greedy_accuracy", "sample_accuracy", "pass@k" ...}`` (fractions).
  """
  batch_size = min(batch_size, len(problems))
  greedy = _generate_scores(sample_fn, task, codec, problems, batch_size=batch_size, n=1, greedy=True,
                            temperature=1.0, key=key)
  out = {"greedy_accuracy": float(greedy.mean())}
  if num_samples:
    s = _generate_scores(sample_fn, task, codec, problems, batch_size=batch_size, n=num_samples, greedy=False,
                         temperature=temperature, key=jax.random.fold_in(key, 1 << 20))
    c = s.sum(1).astype(np.int64)
    out["sample_accuracy"] = float(s.mean())
    for k in pass_k:
      out[f"pass@{k}"] = float(pass_at_k(num_samples, c, k).mean())
  return out
