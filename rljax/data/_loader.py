"""Grain pipelines over prompt sources, with checkpointable iterator state.

Sources are random-access sequences of records: a TFDS data source
(``builder.as_data_source(split)``), a list of ``rljax.envs.Problem`` (``rljax.types.Problem``) or dicts,
or a JSONL prompt file (``jsonl_source``). ``prompt_loader`` shuffles
deterministically (a seed fixes the order of every epoch), shards by host and
batches; its iterator's ``get_state()`` / ``set_state()`` resume it exactly.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Sequence

import grain

from rljax._jsonl import json_line
from rljax.data._tfds import decode_record
from rljax.types import Problem

__all__ = ["prompt_loader", "jsonl_source", "to_problem"]


class jsonl_source(Sequence):
  """A JSONL file of prompts, one JSON object per line with at least ``"prompt"``.

  Optional keys: ``"answer"`` (reference for verifiers) and anything else,
  kept in ``meta``. Malformed lines raise ``ValueError`` naming the line.
  """

  def __init__(self, path: str):
    if not os.path.exists(path):
      raise ValueError(f"JSONL prompt file {path!r} does not exist")
    self._records = []
    with open(path) as f:
      for n, line in enumerate(f, 1):
        if not line.strip():
          continue
        rec = json_line(line, f"{path}:{n}")
        if not isinstance(rec, dict) or not isinstance(rec.get("prompt"), str):
          raise ValueError(f"{path}:{n}: each line must be an object with a string 'prompt'")
        self._records.append(rec)

  def __len__(self):
    return len(self._records)

  def __getitem__(self, i):
    return self._records[i]


def to_problem(record: Any) -> Problem:
  """Normalises a TFDS record, a dict or a ``Problem`` into a ``Problem``."""
  if isinstance(record, Problem):
    return record
  if isinstance(record, dict) and isinstance(record.get("prompt"), bytes) or (
      isinstance(record, dict) and isinstance(record.get("meta"), (bytes, str))):
    record = decode_record(record)
  if isinstance(record, dict):
    meta = {k: v for k, v in record.items() if k not in ("prompt", "answer", "meta")}
    meta.update(record.get("meta") or {})
    return Problem(prompt=record["prompt"], answer=str(record.get("answer", "")), meta=meta)
  raise ValueError(f"cannot turn a {type(record).__name__} into a Problem")


def prompt_loader(source: Sequence, *, batch_size: int, seed: int, shuffle: bool = True,
                  num_epochs: int | None = None, shard_index: int = 0, shard_count: int = 1,
                  drop_remainder: bool = True):
  """A grain iterator of batches (lists of ``Problem``) over ``source``.

  Args:
    source: random-access records (see module docstring).
    batch_size: problems per batch (per host).
    seed: shuffling seed; the same seed gives the same order.
    shuffle: reshuffle every epoch.
    num_epochs: None repeats forever.
    shard_index, shard_count: this host's shard (``jax.process_index()`` /
      ``jax.process_count()`` in multi-host runs): records ``i`` with
      ``i % shard_count == shard_index``.
  Returns:
    a ``grain`` ``DatasetIterator`` with ``get_state()`` / ``set_state()``.
  """
  if batch_size < 1:
    raise ValueError(f"batch_size must be >= 1, got {batch_size}")
  if not 0 <= shard_index < shard_count:
    raise ValueError(f"shard_index must be in [0, shard_count={shard_count}), got {shard_index}")
  if len(source) == 0:
    raise ValueError("source is empty")
  ds = grain.MapDataset.source(source)
  if shard_count > 1:
    ds = ds[shard_index::shard_count]
  if len(ds) < batch_size and drop_remainder:
    raise ValueError(f"batch_size {batch_size} exceeds the {len(ds)} records of this shard")
  if shuffle:
    ds = ds.shuffle(seed=seed)
  ds = ds.repeat(num_epochs)
  ds = ds.map(to_problem).batch(batch_size, drop_remainder=drop_remainder, batch_fn=list)
  return iter(ds)
