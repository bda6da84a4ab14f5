"""Host-side verifiers over decoded text (batched, never raise on model output).

A verifier is a plain Python callable

    verifier(completions: Sequence[str], references: Sequence[Any]) -> np.ndarray [B] float32

run on the host between jitted calls (ARCHITECTURE.md, "one RL step"). Model
output is untrusted: anything that is not a string, text with no extractable
answer, unbalanced braces, absurdly long text... scores 0 and never raises.
With ``return_info=True`` a verifier returns ``(rewards, info)`` where
``info["parse_failures"]`` counts completions with no extractable answer (or
that were not text) — ``rljax.rewards.safe_reward`` merges it into its log.

Programmer errors (``len(references) != len(completions)``, an unknown
option) do raise ``ValueError`` naming the argument: they are not model output.

Options are keyword-only; configure a verifier with ``functools.partial``.
"""
from __future__ import annotations

import functools
import re
import unicodedata
from fractions import Fraction
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from rljax.rewards._math_text import (_MATH_SOURCES, _math_equal, _to_number,  # noqa: F401 (_to_number: shaping)
                                     extract_math_answer, normalize_math_answer)

__all__ = ["exact_match", "math_answer", "format_regex", "normalize_text", "normalize_math_answer",
           "extract_math_answer", "R1_FORMAT_PATTERN", "SEARCH_R1_FORMAT_PATTERN"]

_TEXT_MODES = ("none", "strip", "basic", "squad", "squad_space")
_EXTRACTORS = ("answer_tag", "last_line")


def _check_lengths(completions, references, required: bool = False) -> int:
  if required and references is None:
    raise ValueError("references are required by this verifier (one per completion), got None")
  if isinstance(completions, (str, bytes)):
    raise ValueError("completions must be a sequence of strings, got a single string")
  b = len(completions)
  if references is not None and len(references) != b:
    raise ValueError(f"references must have one entry per completion: got {len(references)} references "
                     f"for {b} completions")
  return b


def _as_text(x) -> Optional[str]:
  if isinstance(x, str):
    return x
  if isinstance(x, bytes):
    return x.decode("utf-8", errors="replace")
  return None


def _as_reference_list(ref) -> list[str]:
  """A reference is a string, a number, or a sequence of acceptable answers (``None``: none, scores 0).

  Raises ``ValueError`` for a ``None`` inside a sequence (it would otherwise become the text "None").
  """
  if ref is None:
    return []
  if isinstance(ref, (str, bytes, int, float, Fraction)) or isinstance(ref, np.generic):
    refs = [ref]
  else:
    try:
      refs = list(ref)
    except TypeError:
      refs = [ref]
  out = []
  for r in refs:
    if r is None:
      raise ValueError("a reference list holds None; give the acceptable answers as strings or numbers "
                       "(a missing reference is a plain None, which scores 0)")
    if isinstance(r, bytes):
      r = r.decode("utf-8", errors="replace")
    out.append(r if isinstance(r, str) else str(r))
  return out


# ----------------------------------------------------------------------------- text

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"  # string.punctuation
_PUNCT_DELETE = {ord(c): None for c in _PUNCTUATION}
_PUNCT_SPACE = {ord(c): " " for c in _PUNCTUATION}


def normalize_text(s: str, mode: str = "basic") -> str:
  """Text normaliser used by ``exact_match``.

  * ``"none"``: unchanged.  * ``"strip"``: surrounding whitespace removed.
  * ``"basic"`` (default): Unicode NFKC, casefold, whitespace runs collapsed to
    one space, surrounding whitespace, quotes and trailing ``. , ; : ! ?``
    removed.
  * ``"squad"``: SQuAD's ``normalize_answer``, as verl's ``search_r1_like_qa_em``:
    lower case, ASCII punctuation deleted (``"New-York"`` -> ``"newyork"``), the
    articles a/an/the removed, whitespace collapsed.
  * ``"squad_space"``: the same with punctuation mapped to a space
    (``"New-York"`` -> ``"new york"``): ``"squad"`` before issue #51.
  """
  if mode == "none":
    return s
  if mode == "strip":
    return s.strip()
  if mode == "basic":
    s = unicodedata.normalize("NFKC", s).casefold()
    s = " ".join(s.split())
    s = s.strip().strip("\"'`").rstrip(".,;:!?").strip()
    return s
  if mode in ("squad", "squad_space"):
    s = s.lower().translate(_PUNCT_DELETE if mode == "squad" else _PUNCT_SPACE)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())
  raise ValueError(f"normalize must be one of {_TEXT_MODES}, got {mode!r}")


_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def _extract_text(s: str, extract) -> Optional[str]:
  if extract is None:
    return s
  if extract == "answer_tag":
    found = _ANSWER_TAG.findall(s)
    return found[-1] if found else None
  if extract == "last_line":
    lines = [ln for ln in s.splitlines() if ln.strip()]
    return lines[-1] if lines else None
  return extract(s)


def exact_match(completions: Sequence[str], references: Sequence[Any], *, normalize: str = "basic",
                extract: Union[None, str, Callable[[str], Optional[str]]] = None,
                return_info: bool = False):
  """Exact-match verifier: ``r_i = 1[norm(extract(y_i)) in {norm(a) : a in refs_i}]``.

  Source: binary correctness reward (001_5839a3671b0b4d92.txt L225); the
  normaliser is ours (the sources do not specify one, see ``normalize_text``).

  An answer that is empty after normalisation scores 0, whatever the
  reference (a reference that normalises to ``""``, e.g. ``"?"``, is never
  matched).

  Args:
    completions: ``B`` decoded completions.
    references: ``B`` references; each a string, a number, or a sequence of
      acceptable answers (any match scores 1); ``None`` scores 0, a ``None``
      inside a sequence raises ``ValueError``.
    normalize: ``"basic"`` | ``"squad"`` | ``"squad_space"`` | ``"strip"`` | ``"none"``.
    extract: what part of the completion is compared: ``None`` (all of it),
      ``"answer_tag"`` (the last ``<answer>...</answer>``), ``"last_line"``, or a
      callable ``str -> str | None`` (``None`` or an exception scores 0).
    return_info: also return ``{"parse_failures": int}``.

  Returns:
    ``[B]`` float32 in {0, 1} (and the info dict if ``return_info``).
  """
  b = _check_lengths(completions, references, required=True)
  if normalize not in _TEXT_MODES:
    raise ValueError(f"normalize must be one of {_TEXT_MODES}, got {normalize!r}")
  if extract is not None and not callable(extract) and extract not in _EXTRACTORS:
    raise ValueError(f"extract must be None, a callable or one of {_EXTRACTORS}, got {extract!r}")

  def score(text, refs_i):
    answer = None if text is None else _extract_text(text, extract)
    if not isinstance(answer, str):
      return None
    answer = normalize_text(answer, normalize)
    # an empty answer never matches (not even a reference that normalises to "", e.g. "?")
    return float(answer in {normalize_text(r, normalize) for r in refs_i} - {""})

  return _score_rows(completions, references, b, score, return_info)


def _score_rows(completions, references, b: int, score, return_info: bool):
  """``[B]`` float32 of ``score(text or None, reference list) -> float or None`` (None: no answer found) per row;
  a bad reference raises (the data), a completion that fails to parse or raises scores 0 and counts in
  ``parse_failures`` (the model's output never crashes the run)."""
  out = np.zeros((b,), np.float32)
  failures = 0
  for i in range(b):
    try:
      refs_i = _as_reference_list(references[i])
    except ValueError as e:  # the data, not the model: fail loudly
      raise ValueError(f"references[{i}]: {e}") from None
    try:
      value = score(_as_text(completions[i]), refs_i)
      if value is None:
        failures += 1
      else:
        out[i] = value
    except Exception:  # never crash the run on model output
      failures += 1
  return (out, {"parse_failures": failures}) if return_info else out


def math_answer(completions: Sequence[str], references: Sequence[Any], *,
                sources: Sequence[str] = _MATH_SOURCES, extract_reference: bool = True,
                rel_tol: float = 1e-6, abs_tol: float = 1e-9, max_chars: Optional[int] = 100_000,
                return_info: bool = False):
  """Final-answer verifier for math: ``r_i = 1[equiv(extract(y_i), ref_i)]``.

  Extraction (``extract_math_answer``): the first of ``sources`` (default:
  last ``\\boxed{}``, then ``####``, then "the answer is", then the last
  number) that finds an answer. Equivalence: the two answers are normalised
  (``normalize_math_answer``); equal strings match; otherwise both are parsed
  as exact numbers (integers, decimals, ``1,234``, ``a/b``, ``\\frac{a}{b}``,
  ``1e-3``) and compared exactly, then with ``math.isclose(rel_tol, abs_tol)``;
  non-numeric answers without LaTeX commands compare case-insensitively.
  So ``\\boxed{0.5}``, ``#### 1/2``, ``\\boxed{\\frac12}`` and a trailing
  ``0.5`` all match the reference ``"0.5"``.

  Source: no paper defines it (task B's design; extraction order and
  normalisation are ours, following the usual MATH/GSM8K conventions).

  Args:
    completions: ``B`` decoded completions (non-strings score 0).
    references: ``B`` reference answers (string, number, or a sequence of
      acceptable answers). With ``extract_reference`` a reference that
      contains ``####`` or ``\\boxed`` (a full GSM8K/MATH solution) is reduced
      to its final answer first.
    sources: extraction order, any of ``("boxed", "hash", "answer_is", "last_number")``.
    max_chars: only the last ``max_chars`` characters of a completion are
      searched (bounds the run time on runaway outputs; ``None``: all).
    return_info: also return ``{"parse_failures": int}`` (no answer found).

  Returns:
    ``[B]`` float32 in {0, 1} (and the info dict if ``return_info``).
  """
  b = _check_lengths(completions, references, required=True)
  sources = tuple(sources)
  if not sources or any(s not in _MATH_SOURCES for s in sources):
    raise ValueError(f"sources must be a non-empty sequence of {_MATH_SOURCES}, got {sources!r}")
  if max_chars is not None and (not isinstance(max_chars, int) or max_chars <= 0):
    raise ValueError(f"max_chars must be a positive int or None, got {max_chars!r}")

  def score(text, refs_i):
    if text is None:
      return None
    if max_chars is not None and len(text) > max_chars:
      text = text[-max_chars:]
    pred = extract_math_answer(text, sources)
    if pred is None:
      return None
    for ref in refs_i:
      if extract_reference and ("####" in ref or "\\boxed" in ref or "\\fbox" in ref):
        ref = extract_math_answer(ref, ("boxed", "hash")) or ref
      if _math_equal(pred, ref, rel_tol, abs_tol):
        return 1.0
    return 0.0

  return _score_rows(completions, references, b, score, return_info)


# ----------------------------------------------------------------------------- format

#: DeepSeek-R1-style format: exactly one ``<think>`` block then one ``<answer>``
#: block, nothing else (tempered tokens keep matching linear-time).
R1_FORMAT_PATTERN = (r"\s*<think>(?:(?!</?think>).)*</think>\s*"
                     r"<answer>(?:(?!</?answer>).)*</answer>\s*")

_SR1_TEXT = r"(?:(?!</?(?:think|search|information|answer)>).)*"  # text holding none of Search-R1's eight tags
SEARCH_R1_FORMAT_PATTERN = (rf"\s*<think>{_SR1_TEXT}</think>\s*"
                            rf"(?:<search>{_SR1_TEXT}</search>\s*<information>{_SR1_TEXT}</information>\s*"
                            rf"<think>{_SR1_TEXT}</think>\s*)*"
                            rf"<answer>{_SR1_TEXT}</answer>\s*")
"""Search-R1's valid sequence as a regex (fullmatch, ``re.DOTALL``): ``think (search information think)* answer``,
whitespace only between the blocks, no tag inside a block. The language the authors' ``is_valid_sequence`` state
machine accepts on the text after the assistant marker (github.com/PeterGriffinJin/Search-R1:
verl/utils/reward_score/qa_em_format.py)."""

_REGEX_MODES = ("fullmatch", "match", "search")


@functools.lru_cache(maxsize=64)
def _compile(pattern: str, flags: int) -> re.Pattern:
  return re.compile(pattern, flags)


def format_regex(completions: Sequence[str], references: Optional[Sequence[Any]] = None, *,
                 pattern: Union[str, re.Pattern] = R1_FORMAT_PATTERN, mode: str = "fullmatch",
                 flags: int = re.DOTALL, max_chars: Optional[int] = None, return_info: bool = False):
  """Format reward: ``r_i = 1[pattern matches y_i]`` (``references`` ignored).

  Source: format rewards (Search-R1 study, 001_5839a3671b0b4d92.txt L161;
  Gazal-R1's format component, 000_3e503271be254a43.txt L15). The authors'
  format check (github.com/PeterGriffinJin/Search-R1:
  verl/utils/reward_score/qa_em_format.py, ``is_valid_sequence``, a state
  machine over the ``think``/``search``/``information``/``answer`` tags after
  the assistant marker) is ``pattern=SEARCH_R1_FORMAT_PATTERN`` (fullmatch);
  the default ``R1_FORMAT_PATTERN`` (one ``<think>`` block, one ``<answer>``
  block: the no-search case) is ours, for tasks without a search tool. Their
  ``compute_score_em`` mixes the indicator with answer and retrieval scores
  (``structure_format_score`` ...): that is a ``composite`` of rewards here.

  Args:
    completions: ``B`` decoded completions (non-strings score 0).
    references: ignored (present so every verifier has one signature).
    pattern: a regex string or compiled pattern.
    mode: ``"fullmatch"`` | ``"match"`` (anchored at the start) | ``"search"``.
    flags: ``re`` flags for a string pattern (default ``re.DOTALL``).
    max_chars: completions longer than this score 0 without running the
      regex (bounds run time for user patterns that backtrack; the default
      pattern is linear-time, so ``None`` is safe with it).
    return_info: also return ``{"parse_failures": int}`` (non-strings, too long).

  Returns:
    ``[B]`` float32 in {0, 1} (and the info dict if ``return_info``).
  """
  b = _check_lengths(completions, references)
  if mode not in _REGEX_MODES:
    raise ValueError(f"mode must be one of {_REGEX_MODES}, got {mode!r}")
  if max_chars is not None and (not isinstance(max_chars, int) or max_chars <= 0):
    raise ValueError(f"max_chars must be a positive int or None, got {max_chars!r}")
  try:
    compiled = pattern if isinstance(pattern, re.Pattern) else _compile(pattern, flags)
  except (re.error, TypeError) as e:
    raise ValueError(f"pattern is not a valid regular expression: {e}") from None
  matcher = getattr(compiled, mode)
  out = np.zeros((b,), np.float32)
  failures = 0
  for i in range(b):
    text = _as_text(completions[i])
    if text is None or (max_chars is not None and len(text) > max_chars):
      failures += 1
      continue
    try:
      out[i] = float(matcher(text) is not None)
    except Exception:  # never crash the run on model output
      failures += 1
  return (out, {"parse_failures": failures}) if return_info else out


_S0 = "000_3e503271be254a43.txt"
_S1 = "001_5839a3671b0b4d92.txt"


def _technique_rows():
  from rljax._technique import Fidelity, Technique
  from rljax.rewards import _stages as S
  return (
      Technique("exact_match", "reward", exact_match,
                "r = 1[norm(extract(y)) in {norm(a)}]", f"{_S1} L225 (binary correctness); normaliser ours",
                stage=S.verifier(exact_match),
                fidelity=Fidelity("peer", "verl v0.7.0 verl/utils/reward_score/search_r1_like_qa_em.py (compute_score)",
                                  "normalize='squad', extract='answer_tag' is verl's EM (issue #51: 'squad' deletes "
                                  "punctuation as verl; the old space mapping is 'squad_space'); no /4 for > 10 tags",
                                  read="volcengine/verl@v0.7.0 (f9c855f7) verl/utils/reward_score/"
                                       "search_r1_like_qa_em.py:23-50 (normalize_answer, em_check), :66-86 "
                                       "(extract_solution: the last <answer>), :96-128 (compute_score), :53-63 and "
                                       ":131-155 (subem_check, compute_score_subem); verl/utils/reward_score/"
                                       "__init__.py:93-104 (the caller)",
                                  defaults=(("normalize", "'basic' (NFKC, casefold, trailing punctuation)",
                                             "normalize_answer: lower, punctuation deleted, articles, "
                                             "whitespace ('squad')"),
                                            ("extract", "None (the whole completion)", "the last "
                                             "<answer>…</answer>, stripped ('answer_tag')"),
                                            ("score / format_score", "1 / 0", "1.0 / 0.0"),
                                            ("tag spam", "none", "score/4 when > 10 <answer> or </answer> tags")),
                                  placement="theirs: the reward function, once per response after the rollout "
                                            "(reward manager); ours: a completion reward (verifier), once per row "
                                            "after the rollout",
                                  deviations=(
                                      "the reward is float32, also under x64 (the StepData contract: rewards [B] "
                                      "float32, a host function of the text)",
                                      "the default normaliser 'basic' and extract=None are ours; normalize="
                                      "'squad', extract='answer_tag' give verl's EM",
                                      "no score/4 for more than 10 answer tags",
                                      "an answer that normalises to '' never matches (verl: '' equals a "
                                      "reference that normalises to '')",
                                      "'squad' mapped punctuation to a space before issue #51 ('New-York' = "
                                      "'new york'); that is now normalize='squad_space'",
                                      "the same file's second estimator, compute_score_subem (:131-155: 1 when a "
                                      "normalised gold answer is a substring of the normalised extracted answer, "
                                      "no tag-spam rule), is not built (default_compute_score calls compute_score "
                                      "for the searchR1_* data sources, __init__.py:93-104)"))),
      Technique("math_answer", "reward", math_answer,
                "r = 1[equiv(last boxed | #### | answer is | last number, ref)]",
                "task B design (MATH/GSM8K conventions)",
                stage=S.verifier(math_answer),
                fidelity=Fidelity("peer", "verl v0.7.0 verl/utils/reward_score/math_reward.py (compute_score, "
                                  "is_equiv)",
                                  "verl: last \\boxed only, strip_string equality; ours also ####, 'answer is', last "
                                  "number (sources=('boxed',) for verl's), exact/tolerant numeric equality",
                                  read="volcengine/verl@v0.7.0 (f9c855f7) verl/utils/reward_score/math_reward.py:"
                                       "17-29 (compute_score), :32-87 (is_equiv, remove_boxed, "
                                       "last_boxed_only_string), :90-227 (fix_fracs, fix_a_slash_b, "
                                       "remove_right_units, fix_sqrt, strip_string: the hendrycks MATH normaliser); "
                                       "verl/utils/reward_score/__init__.py:44-51 (the caller: math_reward for "
                                       "lighteval/MATH, MATH-500; gsm8k for openai/gsm8k), gsm8k.py:17-72 "
                                       "(extract_solution, compute_score). Per-row review d (#51): the verl 0.9.1 "
                                       "PyPI wheel's math_reward.py is the same file (the v1 trainer's default "
                                       "reward manager 'naive' reaches it through default_compute_score); "
                                       "math_reward.py:49-60 remove_boxed asserts the '\\boxed ' or '\\boxed{' "
                                       "prefix, so a last_boxed_only_string result '\\fbox{…}' (:67-70, read only "
                                       "when there is no \\boxed) raises AssertionError, caught at :25-26: "
                                       "compute_score returns 0.0 for any \\fbox answer; examples/data_preprocess/"
                                       "math_dataset.py:28-29, 69-75 (the MATH ground_truth is "
                                       "remove_boxed(last_boxed_only_string(solution)), made when the parquet is "
                                       "built) and gsm8k.py:27-32, 67, 77 (the GSM8K ground_truth: the number after "
                                       "'#### ', ',' removed); the record said verl reads \\fbox and took the "
                                       "ground truth as given. Eighteenth draw (#51 item 4, seed 20261223): "
                                       "math_reward.py:32-46 is_equiv (strip_string equality, case-sensitive; "
                                       "an exception falls back to str1 == str2) and :203-205 strip_string's "
                                       "'=' rule (a single '=' whose left side has ≤ 2 characters keeps the right "
                                       "side: 'xy=3' and '10=5' become '3' and '5'); rljax/rewards/_math_text.py "
                                       "_math_equal (non-numeric answers with no '\\' compare by casefold) and "
                                       "_ASSIGN (drops one letter and '=' only): the record listed neither",
                                  defaults=(("sources", "boxed, ####, 'the answer is', last number",
                                             "the last \\boxed{…} / \\boxed … only: a \\fbox{…} (found "
                                             "only when there is no \\boxed) fails remove_boxed's assertion, "
                                             "caught: 0.0"),
                                            ("equality", "normalised strings, then exact numbers, then "
                                             "isclose(rel_tol 1e-6, abs_tol 1e-9), then for two non-numeric "
                                             "answers with no LaTeX command a case-insensitive (casefold) "
                                             "comparison", "strip_string(a) == strip_string(b), case-sensitive"),
                                            ("reference", "extract_reference=True (a full solution is reduced "
                                             "to its answer)", "the ground truth as compute_score gets it; verl's "
                                             "preprocessing reduces it when the data is built: MATH "
                                             "remove_boxed(last_boxed_only_string(solution)) (math_dataset.py), "
                                             "GSM8K the number after '#### ', ',' removed (gsm8k.py)"),
                                            ("max_chars", "100000 (the completion's tail)", "none")),
                                  placement="theirs: the reward function, once per response after the rollout; "
                                            "ours: a completion reward (verifier), once per row after the rollout",
                                  deviations=(
                                      "the reward is float32, also under x64 (the StepData contract: rewards [B] "
                                      "float32, a host function of the text)",
                                      "more answer sources than the last \\boxed; sources=('boxed',) gives "
                                      "verl's extraction of a last \\boxed{…}, except its edge rules: a '\\boxed ' "
                                      "(with a space) anywhere wins over a later \\boxed{…} and keeps the text up "
                                      "to the next '$' (ours: the last \\boxed, one space-free token), and a \\fbox "
                                      "answer scores 0 in verl (found only when there is no \\boxed, then "
                                      "remove_boxed's assertion fails and compute_score catches it); ours reads "
                                      "\\fbox{…} like \\boxed{…} (the later of the two)",
                                      "verl's GSM8K scorer (gsm8k.py, data source openai/gsm8k) is not built as a "
                                      "mode: the last '#### <digits . ,>' in the last 300 characters, ',' and '$' "
                                      "removed, string equality with the ground truth (method 'flexible': the last "
                                      "number); sources=('hash',) is the nearest (ours reads the rest of the line "
                                      "and compares by value)",
                                      "numbers compare by value (2 = \\frac{4}{2}, 12 = 12.0, 1/3 ≈ 0.333333 at "
                                      "rel_tol 1e-6); verl compares the normalised strings only (tested)",
                                      "our normaliser (normalize_math_answer) is not strip_string: it also drops "
                                      "\\text/\\mathrm wrappers and Unicode minus, and does not rewrite "
                                      "\\sqrt2 to \\sqrt{2}",
                                      "two non-numeric answers without a LaTeX command compare case-insensitively "
                                      "here ('\\boxed{A}' against 'a', '\\boxed{Yes}' against 'yes': ours 1, "
                                      "verl 0: strip_string keeps the case)",
                                      "a leading assignment: ours drops only '<one letter> ='; strip_string drops "
                                      "the left side of any single '=' with ≤ 2 characters before it "
                                      "('\\boxed{xy=3}' or '\\boxed{10=5}' against '3' / '5': verl 1, ours 0) "
                                      "(tested)"))),
      Technique("format_regex", "reward", format_regex, "r = 1[regex matches y]",
                f"{_S1} L161 (Search-R1); {_S0} L15 (Gazal-R1)",
                stage=S.verifier(format_regex),
                fidelity=Fidelity("authors_code", "github.com/PeterGriffinJin/Search-R1: verl/utils/reward_score/"
                                  "qa_em_format.py (is_valid_sequence)",
                                  "pattern=SEARCH_R1_FORMAT_PATTERN is theirs (on the completion, not after an "
                                  "assistant marker); default R1_FORMAT_PATTERN (think then answer, no search) ours; "
                                  "Gazal-R1's: no code",
                                  read="PeterGriffinJin/Search-R1@a14dc3a4 verl/utils/reward_score/qa_em_format.py:"
                                       "49-122 (is_valid_sequence) and :154-197 (compute_score_em: the format "
                                       "scores; :124-136 extract_solution: the last of ≥ 2 <answer> blocks in "
                                       "prompt + response); scripts/nq_hotpotqa/v0.3/train_grpo_format.sh:81-83; "
                                       "verl/trainer/config/ppo_trainer.yaml:144-146. Error-class sweep (#51, s2b), "
                                       "the caller: the script runs python -m verl.trainer.main_ppo_format; "
                                       "main_ppo_format.py:25-29 (_select_rm_score_fn: compute_score_em for the QA "
                                       "data sources, any other raises), :32-97 (RewardManager: decode prompt + "
                                       "response with special tokens, the score on the last response token), "
                                       ":183-186 (reward_fn gets reward_model.structure_format_score / "
                                       "final_format_score / retrieval_score), :189 (val_reward_fn = "
                                       "RewardManager(tokenizer, num_examine=1): every format score left at 0). Per-row review j (#51): "
                                       "qa_em_format.py:61-121 whole against the default R1_FORMAT_PATTERN on "
                                       "completions without search turns (a tag inside a block: :85-104). "
                                       "Sixteenth draw (#51 item 4, seed 20261221): the data the script trains on "
                                       "(scripts/data_process/qa_search_train_merge.py:26-39 and nq_search.py:"
                                       "26-39, make_prefix, template 'base': '... provide the answer inside "
                                       "<answer> and </answer>, ... For example, <answer> Beijing </answer>.'): "
                                       "the decoded prompt already holds two <answer> blocks, so extract_solution "
                                       "(:124-136, ≥ 2 matches over prompt + response) never returns None; the "
                                       "record's '0 invalid with no extracted answer' does not occur with their "
                                       "data (a response without an <answer> block scores final_format_score "
                                       "0.1)",
                                  defaults=(("pattern", "R1_FORMAT_PATTERN (think, answer)",
                                             "is_valid_sequence: think (search information think)* answer "
                                             "(SEARCH_R1_FORMAT_PATTERN)"),
                                            ("text checked", "the completion", "the text after "
                                             "<|im_start|>assistant (prompt + response decoded)"),
                                            ("score", "1 / 0", "combined with EM: 1 valid+correct, 0.8 correct "
                                             "only, 0.2 (+ retrieval_score if an <information> block holds a gold "
                                             "answer) valid and not correct, 0.1 invalid with a wrong extracted "
                                             "answer (structure_format_score 0.2, final_format_score 0.1, "
                                             "retrieval_score 0; all 0 in ppo_trainer.yaml); their prompt "
                                             "(make_prefix) holds two <answer> blocks, so an answer is always "
                                             "extracted: a response with no <answer> block gets the prompt's "
                                             "example 'Beijing' and scores 0.1 (0.8 if a gold answer is "
                                             "'Beijing'), never 0")),
                                  placement="theirs: inside the EM reward, once per response after the rollout "
                                            "(reward manager on the decoded sequence), training only: the "
                                            "validation reward manager is built without the format scores "
                                            "(main_ppo_format.py:189), so validation scores pure EM (1 correct, "
                                            "0 otherwise, format ignored); ours: a completion reward "
                                            "(verifier), once per row after the rollout; the recipe sums rewards",
                                  deviations=(
                                      "the reward is float32, also under x64 (the StepData contract: rewards [B] "
                                      "float32, a host function of the text)",
                                      "the default pattern is R1's think-then-answer (no search turns); "
                                      "pattern=SEARCH_R1_FORMAT_PATTERN gives their accepted language",
                                      "even on a completion with no search turn the default pattern is not "
                                      "theirs: it accepts Search-R1's other tags inside a block (<search>, "
                                      "<information>, <answer> inside <think>; <think>, <search>, <information> "
                                      "inside <answer>), which is_valid_sequence rejects ('Unexpected tag' in "
                                      "state in_think / in_answer, qa_em_format.py:85-104), e.g. "
                                      "'<think>a <search>q</search></think><answer>x</answer>' scores 1 here, "
                                      "invalid there (per-row review j, #51)",
                                      "the regex runs on the completion; theirs on the decoded text after the "
                                      "assistant marker (no marker: invalid)",
                                      "a 0/1 format reward; their 1 / 0.8 / 0.2 / 0.1 blend with EM is not built (a "
                                      "weighted sum of format_regex and exact_match is not the same table); a "
                                      "completion with no <answer> block scores 0.1 there (the prompt's example "
                                      "answer 'Beijing' is extracted and judged), not 0 (sixteenth draw, #51)",
                                      "max_chars (off by default) scores overlong completions 0: ours",
                                      "their format scores reach the training reward only (reward_fn); their "
                                      "validation reward is EM alone (val_reward_fn built with the defaults 0); "
                                      "format_regex, a stage of the RL step, is not part of any validation "
                                      "metric"))),
  )


TECHNIQUES = _technique_rows()
