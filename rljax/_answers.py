"""Answer parsing shared by ``rljax.envs`` (how a task reads its answers) and ``rljax.rewards`` (the numeric
rewards' ``parse=``), so that neither room imports the other for it."""
from __future__ import annotations

from typing import Optional


def digits_value(text, *, reverse: bool = False) -> Optional[float]:
  """The number a string of decimal digits stands for, read lowest digit first when ``reverse`` (``"221"`` ->
  122), or None when ``text`` (whitespace-stripped) is not a string of digits."""
  s = text.strip() if isinstance(text, str) else ""
  if not (s.isascii() and s.isdigit()):
    return None
  return float(int(s[::-1] if reverse else s))
