"""Row operations on a step's ``StepData`` that several phases share: concatenation, filters, new rewards.

``run_filters`` takes the stage call of its context (``rljax.train._phases``: ``unchecked`` in the live step, the
contract check in the start-up check), so both run the same code.
"""
from __future__ import annotations

import numpy as np

from rljax.stages import StepData, scalar_metrics

__all__ = ["concat_steps", "run_filters", "set_rewards", "unchecked"]


def unchecked(key: str, stage, fn):
  """The live step's stage call: ``fn()``. The start-up check (``rljax.train._startup``) passes a ``call`` that
  also checks the return against contract ``key`` (``rljax.train._contracts``), naming the stage."""
  del key, stage
  return fn()


def concat_steps(parts) -> StepData:
  """Row-wise concatenation of ``StepData`` of the same step (every per-row field: ``StepData.concat``)."""
  return StepData.concat(parts)


def run_filters(filters, data: StepData, metrics: dict, call=unchecked, key: str = "filters") -> StepData:
  """Applies row filters in order: a bool ``keep [B]`` gives ``valid &= keep``; an integer ``[N]`` result is a
  row selection (a resampling of the batch, padded with masked rows to ``B``). ``call(key, filter, fn)`` runs each
  filter (``unchecked``, or the start-up check's)."""
  for f in filters:
    keep, m = call(key, f, lambda f=f, data=data: f.fn(data))
    metrics.update(scalar_metrics(m, f.name))
    keep = np.asarray(keep)
    if keep.dtype == bool:
      if keep.shape != (data.batch_size,):
        raise ValueError(f"filter {f.name!r} returned keep of shape {keep.shape}, expected ({data.batch_size},)")
      data = data.replace(valid=data.valid & keep.astype(bool))
    else:
      rows = keep.astype(np.int64).reshape(-1)
      if rows.size > data.batch_size or (rows.size and (rows.min() < 0 or rows.max() >= data.batch_size)):
        raise ValueError(f"filter {f.name!r} returned {rows.size} row indices; expected at most "
                         f"{data.batch_size} indices in [0, {data.batch_size})")
      pad = np.arange(data.batch_size - rows.size) % data.batch_size  # filler rows, masked out below
      new_valid = np.concatenate([data.valid[rows], np.zeros(pad.size, bool)])
      data = data.take(np.concatenate([rows, pad])).replace(valid=new_valid)
    metrics[f"{f.name}/kept_rows"] = float(data.valid.sum())
  return data


def set_rewards(data: StepData, rewards, name: str) -> StepData:
  """``data`` with a stage's new rewards: ``[B]`` sequence rewards, or ``[B, T]`` token rewards (summed)."""
  rewards = np.asarray(rewards, np.float32)
  if rewards.shape == (data.batch_size,):
    return data.replace(rewards=rewards)
  if rewards.shape == data.tokens.shape:
    return data.replace(token_rewards=rewards, rewards=rewards.sum(1))
  raise ValueError(f"stage {name!r} returned rewards of shape {rewards.shape}; expected ({data.batch_size},) or "
                   f"{data.tokens.shape}")
