"""JSONL lines parsed with errors that name the file and line: shared by ``rljax.envs`` (a user's task data,
``read_jsonl``) and ``rljax.data`` (prompt files, ``jsonl_source``); public as ``rljax.envs.json_line``."""
from __future__ import annotations

import json

__all__ = ["json_line"]


def json_line(line: str, where: str):
  """One JSONL line parsed; a ``ValueError`` naming ``where`` (``file:line``) and the column of a syntax error.

  The line's own newline is dropped first: ``json`` would place an error at the line's end (a truncated object) on
  the next line, column 1."""
  text = line.rstrip("\r\n")
  try:
    return json.loads(text)
  except json.JSONDecodeError as e:
    at = f"column {e.colno}" + (", the end of the line" if e.pos >= len(text.rstrip()) else "")
    raise ValueError(f"{where}: not valid JSON ({e.msg} at {at})") from None
