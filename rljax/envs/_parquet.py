"""verl-style parquet data for the ``jsonl`` task (``task.path=train.parquet``): records as ``read_jsonl`` gives.

verl's ``data.train_files`` / ``data.val_files`` are parquet files whose rows hold (``verl/utils/dataset``, the
``examples/data_preprocess`` scripts such as gsm8k):

- ``prompt``: a chat message list, ``[{"role": "user", "content": "..."}]``; a plain string is taken too;
- ``reward_model``: a struct ``{"style": "rule", "ground_truth": "..."}``, the reference answer;
- ``data_source``, ``ability``, ``extra_info``: kept in ``Problem.meta``.

The prompt is the one user message's ``content`` (rljax's ``Codec`` applies the chat template to it, as verl's
``RLHFDataset`` applies the tokenizer's to the message list). A list with a system message or several turns is
refused rather than cut (``Problem.prompt`` is one user message). The answer is ``answer_field``; a dotted name
reads a struct field (``reward_model.ground_truth``), and the default ``answer`` falls back to verl's
``reward_model.ground_truth`` when the file has no ``answer`` column. Every error names the file (and row).
"""
from __future__ import annotations

import os

__all__ = ["read_parquet", "VERL_ANSWER"]

VERL_ANSWER = "reward_model.ground_truth"  # verl's reference-answer column (a struct field)


def _prompt_text(value, field: str, where: str) -> str:
  """A prompt cell: a string, or a chat message list holding one user message."""
  if isinstance(value, str):
    return value
  if isinstance(value, (list, tuple)) and all(isinstance(m, dict) and "role" in m and "content" in m for m in value):
    roles = [m["role"] for m in value]
    if roles == ["user"] and isinstance(value[0]["content"], str):
      return value[0]["content"]
    raise ValueError(f"{where}: column {field!r} holds the messages {roles}; rljax takes one user message per "
                     "prompt (a system message or several turns would be dropped: fold them into the user message)")
  raise ValueError(f"{where}: column {field!r} must be a string or a chat message list [{{role, content}}], got "
                   f"{type(value).__name__}")


def _cell(row: dict, name: str):
  """``row[name]``, or a struct field for a dotted ``name`` (``reward_model.ground_truth``); KeyError if absent."""
  value = row
  for part in name.split("."):
    if not isinstance(value, dict) or part not in value:
      raise KeyError(name)
    value = value[part]
  return value


def read_parquet(path: str, *, prompt_field: str = "prompt", answer_field: str = "answer") -> list[dict]:
  """The rows of a parquet file as ``{"prompt", "answer", "meta"}`` dicts (``meta``: the other columns and
  ``"index"``). Raises ``ValueError`` naming the file: missing, unreadable, empty, a column missing (listing
  the columns it has), a prompt that is not one user message, an answer that is not text or a number."""
  from rljax.envs._fields import field_value as _field_value  # pylint: disable=import-outside-toplevel
  try:
    import pyarrow.parquet as pq  # pylint: disable=import-outside-toplevel
  except ImportError:
    raise ValueError(f"{path!r} is a parquet file, which needs pyarrow: pip install pyarrow") from None
  path = os.path.expanduser(path)
  if not os.path.isfile(path):
    raise ValueError(f"parquet file {path!r} does not exist" if not os.path.exists(path)
                     else f"parquet path {path!r} is not a file")
  try:
    table = pq.read_table(path)
  except Exception as e:  # pylint: disable=broad-except
    raise ValueError(f"{path}: not a readable parquet file ({type(e).__name__}: {' '.join(str(e).split())[:200]})")
  columns = table.column_names
  if answer_field == "answer" and "answer" not in columns and "reward_model" in columns:
    answer_field = VERL_ANSWER
  for field in (prompt_field, answer_field):
    if field.split(".")[0] not in columns:
      raise ValueError(f"{path}: no column {field.split('.')[0]!r} (columns: {columns})")
  records = []
  for i, row in enumerate(table.to_pylist()):
    where = f"{path}: row {i}"
    try:
      answer = _cell(row, answer_field)
    except KeyError:
      raise ValueError(f"{where}: no {answer_field!r} (its {answer_field.split('.')[0]!r}: "
                       f"{row.get(answer_field.split('.')[0])!r})") from None
    records.append({"prompt": _prompt_text(row[prompt_field], prompt_field, where),
                    "answer": _field_value(answer, answer_field, where, answer=True),
                    "meta": {**{k: v for k, v in row.items() if k not in (prompt_field, answer_field.split(".")[0])},
                             "index": i}})
  if not records:
    raise ValueError(f"parquet file {path!r} is empty (no rows)")
  return records
