"""One record field as text: the JSONL, TFDS and parquet readers share it (``rljax.envs._dataset``, ``_parquet``)."""
import numpy as np

__all__ = ["field_value"]


def field_value(value, field: str, where: str, *, answer: bool) -> str:
  if isinstance(value, bytes):
    value = value.decode("utf-8")
  elif isinstance(value, np.ndarray) and value.shape == ():
    return field_value(value.item(), field, where, answer=answer)
  if isinstance(value, str):
    return value
  if answer and isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
    return str(value)
  kind = "a string or a number" if answer else "a string"
  raise ValueError(f"{where}: field {field!r} must be {kind}, got {type(value).__name__}")
