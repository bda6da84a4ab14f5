"""Stop strings, checked on the host after decode.

A stop string has many tokenisations, so matching token ids on device cannot
be exact; instead the jitted loop stops on stop *tokens* and the host cuts
each completion right after the first token at which the detokenised
completion contains a stop string. The cut position is found by bisection
over prefix lengths (``O(log n)`` detokenisations per row), which is exact
when "prefix contains the string" is monotone in the prefix length (true for
any detokeniser whose output for a prefix is a prefix of the output for a
longer one; byte-fallback tokenisers that emit replacement characters for
half-decoded bytes are still monotone for ASCII stop strings).
"""
from __future__ import annotations

from typing import Callable, Sequence

import jax.numpy as jnp
import numpy as np

from rljax.sampling._config import FinishReason
from rljax.types import Rollout

__all__ = ["first_stop_hit", "truncate_at_stop_strings"]


def first_stop_hit(ids: list, stops: Sequence[str], detokenize: Callable) -> int:
  """Smallest ``j`` such that ``detokenize(ids[:j])`` contains a stop string, or -1."""
  has = lambda j: any(s in detokenize(ids[:j]) for s in stops)
  if not ids or not has(len(ids)):
    return -1
  lo, hi = 1, len(ids)
  while lo < hi:
    mid = (lo + hi) // 2
    if has(mid):
      hi = mid
    else:
      lo = mid + 1
  return lo


def truncate_at_stop_strings(rollout: Rollout, stop_strings: Sequence[str],
                             detokenize: Callable[[list], str], pad_id: int = 0) -> Rollout:
  """Cuts every completion after the token that completes a stop string.

  For row ``b`` with completion tokens ``c`` (the ``completion_mask`` columns,
  in order), ``j* = min{j : some s in stop_strings is a substring of
  detokenize(c[:j])}``; tokens after ``c[j*-1]`` become padding (masks and
  log-probs zeroed) and ``finish_reason[b] = FinishReason.STOP_STRING``. Rows
  without a hit are unchanged. Host-side (NumPy); call it outside ``jit``.

  Args:
    rollout: ``Rollout`` from ``generate`` (left-aligned rows).
    stop_strings: strings to stop at (empty: returns ``rollout``).
    detokenize: maps a list of token ids to text.
    pad_id: token written into the cut positions.
  """
  if isinstance(stop_strings, str):
    raise ValueError("stop_strings must be a sequence of strings, not a single str")
  stops = [s for s in stop_strings if s]
  if not stops:
    return rollout
  tokens = np.array(rollout.tokens)
  comp = np.array(rollout.completion_mask).astype(bool)
  fields = {k: np.array(getattr(rollout, k)) for k in ("logp_behavior", "logp_sampling", "entropy_behavior", "routing")
            if getattr(rollout, k) is not None}
  finish = (np.array(rollout.finish_reason) if rollout.finish_reason is not None
            else np.full((tokens.shape[0],), int(FinishReason.LENGTH), np.int32))
  for b in range(tokens.shape[0]):
    cols = np.flatnonzero(comp[b])
    j = first_stop_hit(tokens[b, cols].tolist(), stops, detokenize)
    if j < 0:
      continue
    cut = cols[j:]
    if cut.size:
      tail = np.arange(cols[j], tokens.shape[1])
      tokens[b, tail] = pad_id
      comp[b, tail] = False
      for arr in fields.values():
        arr[b, tail] = 0
    finish[b] = int(FinishReason.STOP_STRING)
  prompt_mask = np.array(rollout.prompt_mask)
  return rollout.replace(tokens=jnp.asarray(tokens), completion_mask=jnp.asarray(comp),
                         prompt_mask=jnp.asarray(prompt_mask),
                         finish_reason=jnp.asarray(finish, jnp.int32),
                         **{k: jnp.asarray(v) for k, v in fields.items()})
