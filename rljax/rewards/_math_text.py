"""Math answers in free text: the last ``\\boxed{}`` / ``####`` / "the answer is" / last number
(``extract_math_answer``), a canonical form (``normalize_math_answer``: units, ``\\frac``, thousands
separators, ``x = ...``) and equality by value (``_math_equal``: exact fractions, then a relative / absolute
tolerance). Pure string functions used by ``math_answer`` (``rljax.rewards._verifiers``) and the shaping
stages; they never raise on model output."""
from __future__ import annotations

import math
import re
import unicodedata
from fractions import Fraction
from typing import Optional, Sequence

__all__ = ["extract_math_answer", "normalize_math_answer"]

_MATH_SOURCES = ("boxed", "hash", "answer_is", "last_number")


def _match_brace(s: str, start: int) -> Optional[int]:
  """Index of the ``}`` closing the ``{`` at ``start`` (escaped braces skipped)."""
  depth = 0
  i = start
  n = len(s)
  while i < n:
    c = s[i]
    if c == "\\":
      i += 2
      continue
    if c == "{":
      depth += 1
    elif c == "}":
      depth -= 1
      if depth == 0:
        return i
    i += 1
  return None


def _last_boxed(s: str) -> Optional[str]:
  idx = max(s.rfind("\\boxed"), s.rfind("\\fbox"))
  if idx < 0:
    return None
  j = idx + (6 if s.startswith("\\boxed", idx) else 5)
  while j < len(s) and s[j] == " ":
    j += 1
  if j < len(s) and s[j] == "{":
    end = _match_brace(s, j)
    return None if end is None else s[j + 1:end]
  m = re.match(r"\s*([^\s$]+)", s[j:])  # "\boxed 5"
  return m.group(1) if m else None


_HASH = re.compile(r"####\s*([^\n]*)")
_ANSWER_IS = re.compile(r"\banswer\s*(?:is|:|=)\s*:?\s*([^\n]*)", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])[-−+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:/\d+)?(?:[eE][-+]?\d+)?(?![\w])")


def _last_number(s: str) -> Optional[str]:
  found = [m.group(0) for m in _NUMBER.finditer(s) if any(ch.isdigit() for ch in m.group(0))]
  return found[-1] if found else None


_LEADING_NUMBER = re.compile(r"^\$?\s*([-−+]?(?:\d[\d,]*)?\.?\d+(?:/\d+)?)\s*\$?(?:\s+[A-Za-z][A-Za-z ]*)?\.?$")


def _trim_words(ans: str) -> str:
  """``"12 apples."`` -> ``"12"``: a number followed only by plain words (units)."""
  m = _LEADING_NUMBER.match(ans.strip())
  return m.group(1) if m else ans


def extract_math_answer(text: str, sources: Sequence[str] = _MATH_SOURCES) -> Optional[str]:
  """The final answer of a solution: the first of ``sources`` that finds one.

  * ``"boxed"``: contents of the last ``\\boxed{...}`` / ``\\fbox{...}``
    (nested braces matched; ``\\boxed 5`` also accepted);
  * ``"hash"``: the text after the last ``####`` on its line (GSM8K);
    for this and ``"answer_is"``, a number followed only by plain words
    ("12 apples.") is reduced to the number;
  * ``"answer_is"``: the rest of the line after the last "answer is" /
    "answer:" / "answer =" (so also "The final answer is ...");
  * ``"last_number"``: the last number (``-1,234.5``, ``3/4``, ``1e-3``).

  Returns ``None`` when nothing is found, and also when the text has a
  ``\\boxed`` that cannot be parsed (unbalanced braces): a malformed final
  answer scores 0 rather than falling back to a guess.
  """
  for src in sources:
    if src == "boxed":
      ans = _last_boxed(text)
      if ans is None and ("\\boxed" in text or "\\fbox" in text):
        return None  # a malformed final \boxed is a failure, not a cue to guess
    elif src == "hash":
      found = _HASH.findall(text)
      ans = _trim_words(found[-1]) if found else None
    elif src == "answer_is":
      found = _ANSWER_IS.findall(text)
      ans = found[-1].strip().rstrip(".") if found else None
      if ans is not None:
        inner = _last_boxed(ans)
        ans = inner if inner is not None else _trim_words(ans)
    elif src == "last_number":
      ans = _last_number(text)
    else:
      raise ValueError(f"sources entries must be among {_MATH_SOURCES}, got {src!r}")
    if ans is not None and ans.strip():
      return ans.strip()
  return None


_UNIT_WRAP = re.compile(r"\\(?:text|textbf|textrm|mathrm|mbox|operatorname)\s*\{([^{}]*)\}")
_FRAC_SHORT = re.compile(r"\\frac\s*(\d)\s*(\d)")
_FRAC_HALF = re.compile(r"\\frac\s*\{([^{}]*)\}\s*(\d)")
_ASSIGN = re.compile(r"^[a-zA-Z]\s*=\s*(?!=)")
_THOUSANDS = re.compile(r"^[-+]?\d{1,3}(,\d{3})+(\.\d*)?$")
_NUM_TAIL_UNITS = re.compile(r"^([-+]?[\d.,/]+)\s*\\(?:text|mbox|mathrm)\s*\{\s*[a-zA-Z ]+\s*\}$")


def normalize_math_answer(s: str) -> str:
  """Canonical string of a math answer (before the numeric comparison).

  Removes ``$``, ``\\(``/``\\)``/``\\[``/``\\]``, ``\\left``/``\\right``, LaTeX
  spacing (``\\! \\, \\; \\:``), degree signs, percent signs, a trailing ``.``,
  a leading ``x =``, text units after a number (``5 \\text{ cm}``), unwraps
  ``\\text{..}``/``\\mathrm{..}``, maps ``\\dfrac``/``\\tfrac`` to ``\\frac``,
  ``\\frac12`` to ``\\frac{1}{2}``, the Unicode minus to ``-``, and drops all
  whitespace.
  """
  s = unicodedata.normalize("NFKC", s).replace("−", "-").strip()
  s = _NUM_TAIL_UNITS.sub(r"\1", s)
  for a, b in (("\\left", ""), ("\\right", ""), ("\\!", ""), ("\\,", ""), ("\\;", ""), ("\\:", ""),
               ("\\dfrac", "\\frac"), ("\\tfrac", "\\frac"), ("\\(", ""), ("\\)", ""), ("\\[", ""),
               ("\\]", ""), ("$", ""), ("^\\circ", ""), ("^{\\circ}", ""), ("°", ""), ("\\%", ""),
               ("%", ""), ("\\displaystyle", "")):
    s = s.replace(a, b)
  for _ in range(3):  # nested wrappers
    s = _UNIT_WRAP.sub(r"\1", s)
  s = _FRAC_SHORT.sub(r"\\frac{\1}{\2}", s)
  s = _FRAC_HALF.sub(r"\\frac{\1}{\2}", s)
  s = s.strip().rstrip(".").strip()
  s = _ASSIGN.sub("", s)
  s = "".join(s.split())
  return s


_FRAC_FULL = re.compile(r"^([-+]?)\\frac\{([^{}]+)\}\{([^{}]+)\}$")


def _to_number(s: str) -> Optional[Fraction]:
  """Exact value of a canonical answer, or ``None`` if it is not a number."""
  if _THOUSANDS.match(s):
    s = s.replace(",", "")
  m = _FRAC_FULL.match(s)
  if m:
    num, den = _to_number(m.group(2)), _to_number(m.group(3))
    if num is None or den is None or den == 0:
      return None
    val = num / den
    return -val if m.group(1) == "-" else val
  if s.count("/") == 1:
    a, b = s.split("/")
    num, den = _to_number(a), _to_number(b)
    if num is None or den is None or den == 0:
      return None
    return num / den
  if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", s):
    return None
  try:
    return Fraction(s)
  except (ValueError, ZeroDivisionError):
    return None


def _math_equal(pred: str, ref: str, rel_tol: float, abs_tol: float) -> bool:
  a, b = normalize_math_answer(pred), normalize_math_answer(ref)
  if a == b and a:
    return True
  x, y = _to_number(a), _to_number(b)
  if x is not None and y is not None:
    if x == y:
      return True
    return math.isclose(float(x), float(y), rel_tol=rel_tol, abs_tol=abs_tol)
  if x is None and y is None and "\\" not in a + b:
    return bool(a) and a.casefold() == b.casefold()
  return False
