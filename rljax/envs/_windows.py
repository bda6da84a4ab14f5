"""An episode's context windows packed into one training row (``pack_windows``).

With a context budget (``EpisodeConfig.context_budget``) the runner (``run_episodes``) gives each window of an
episode its own row: the window's context (the opening prompt, or the kept / summarised turns that start a new
window) and the turns first written in it. Training wants one row per *episode*, so that everything that
reads a group (GRPO's mean and std, filters, baselines, per-turn estimators) sees the prompt's episodes, each
once, whatever their number of windows. ``pack_windows`` puts an episode's window rows side by side in one row
of a fixed width, each window its own attention segment (``segment_ids``: window ``w`` has id ``w + 1``, padding
0; ``rljax.models``: a token attends only within its segment, and positions restart at each segment, so every
window is scored on exactly the context the sampler saw).

What each packed row holds, per token (each array is the runner's, concatenated in window order):

* ``model_mask``: the model tokens first written in that window (text carried into a later window is
  context there: ``prompt_mask``), so every model token of the episode is trained exactly once;
* ``logp_behavior`` / ``entropy``: the sampler's, on exactly those tokens;
* ``turn_ids``: the episode's global 0-based turn index (a new window's carried-over segments keep their
  turn), so per-turn rewards (``turn_rewards [B, M]``) gather onto the right tokens.

The per-episode arrays (``turn_rewards``, ``episode_rewards``, ``failed``, ...) are unchanged: row ``b`` is
episode ``b``. Ours: an alternative to one training row per window (see docs/agents.md, "How context windows
train", for why).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from rljax.envs._runner import EpisodeBatch

__all__ = ["pack_windows"]

_ROW_FIELDS = ("tokens", "prompt_mask", "model_mask", "logp_behavior", "entropy", "turn_ids")


def pack_windows(batch: EpisodeBatch, length: int, *, pad_id: int = 0) -> EpisodeBatch:
  """``batch`` (``R`` window rows of ``B`` episodes) with one row per episode, ``[B, length]``.

  Row ``b`` is episode ``b``'s window rows (``row_episode == b``) in ``row_window`` order, each cut to its
  ``row_lengths`` and laid end to end, then padded (``pad_id``, masks False, log-probs 0, turn ids -1);
  ``segment_ids [B, length]`` is ``w + 1`` on the ``w``-th packed window's tokens (windows that exist:
  ``0..k-1``) and 0 on padding; ``row_lengths`` the packed lengths; ``row_episode = arange(B)``,
  ``row_window`` each episode's number of windows minus one (its last window).

  Raises ``ValueError`` if an episode's windows do not fit in ``length`` (size ``length`` with
  ``RunnerConfig.packed_row_length``, which bounds every episode the runner plays) or the batch lacks
  ``row_episode`` / ``row_window`` / ``row_lengths``.
  """
  if batch.row_episode is None or batch.row_window is None or batch.row_lengths is None:
    raise ValueError("pack_windows needs the runner's row_episode, row_window and row_lengths (run_episodes)")
  b = len(batch.episodes)
  out = {k: np.zeros((b, length), getattr(batch, k).dtype) for k in _ROW_FIELDS}
  out["tokens"][:] = pad_id
  out["turn_ids"][:] = -1
  seg = np.zeros((b, length), np.int32)
  lengths = np.zeros((b,), np.int32)
  last = np.zeros((b,), np.int32)
  order = np.lexsort((batch.row_window, batch.row_episode))  # by episode, then window
  for r in order:
    e, n = int(batch.row_episode[r]), int(batch.row_lengths[r])
    lo = int(lengths[e])
    if lo + n > length:
      raise ValueError(f"episode {e}'s context windows take more than {length} tokens packed (window "
                       f"{int(batch.row_window[r])} ends at {lo + n}); size rows with "
                       f"RunnerConfig.packed_row_length")
    for k in _ROW_FIELDS:
      out[k][e, lo:lo + n] = getattr(batch, k)[r, :n]
    seg[e, lo:lo + n] = int(batch.row_window[r]) + 1
    lengths[e] = lo + n
    last[e] = batch.row_window[r]
  return dataclasses.replace(batch, **out, segment_ids=seg, row_lengths=lengths,
                             row_episode=np.arange(b, dtype=np.int32), row_window=last)
