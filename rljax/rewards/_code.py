"""A code verifier: the completion's program, then its problem's tests, run in ``rljax.sandbox``.

    code_tests(completions, references) -> [B] float32

Host-side like the text verifiers (``_verifiers``), never raising on model output; a host without the
sandbox's layers raises ``rljax.sandbox.SandboxUnavailable`` on the first call (not a zero reward).
"""
from __future__ import annotations

import concurrent.futures
import re
import secrets
from typing import Any, Optional, Sequence

import numpy as np

from rljax import sandbox
from rljax.rewards._verifiers import _as_text, _check_lengths

__all__ = ["code_tests", "extract_code"]

_EXTRACT = ("fenced", "whole")
# an opening fence: ``` and its info string (any tag, or none) up to the end of the line
_OPEN_FENCE = re.compile(r"```([^`\n]*)\n")
_CODE_TAGS = ("", "python", "python3", "py")
# Tests for a quick verifier: tight limits, standard library only.
DEFAULT_CONFIG = sandbox.SandboxConfig(wall_time_s=5.0, cpu_time_s=3, memory_bytes=512 << 20, output_bytes=16 << 10,
                                       site_packages=False)


def fenced_blocks(text: str) -> list:
  """The closed fenced blocks of ``text``, left to right, as ``(tag, body)``: each opening fence (```` ``` ````, its
  info string, a newline) pairs with the next ```` ``` ````, whatever its tag, so a ```` ```text ```` or
  ```` ```bash ```` block is skipped whole; ``tag`` is the info string's first word in lower case (``""`` for a
  bare fence). An opening fence without a closing one (a completion cut at the length limit) gives no block."""
  blocks, pos = [], 0
  while (m := _OPEN_FENCE.search(text, pos)) is not None:
    end = text.find("```", m.end())
    if end < 0:
      break
    words = m.group(1).split()
    blocks.append((words[0].lower() if words else "", text[m.end():end]))
    pos = end + 3
  return blocks


def extract_code(text: str, extract: str = "fenced") -> Optional[str]:
  """The program in a completion: for ``"fenced"`` the last closed block tagged ```` ```python ````,
  ```` ```python3 ````, ```` ```py ```` (any case) or bare ```` ``` ```` (blocks with other tags are skipped:
  :func:`fenced_blocks`), for ``"whole"`` the whole text; ``None`` when there is none."""
  if extract == "whole":
    return text if text.strip() else None
  code = [body for tag, body in fenced_blocks(text) if tag in _CODE_TAGS]
  return code[-1] if code and code[-1].strip() else None


def _tests_text(ref, i: int) -> Optional[str]:
  if ref is None:
    return None
  if isinstance(ref, str):
    return ref
  if isinstance(ref, (list, tuple)) and all(isinstance(t, str) for t in ref):
    return "\n".join(ref)
  raise ValueError(f"references[{i}] must be the test code as a str (or a list of str), got {type(ref).__name__}")


def code_tests(completions: Sequence[Any], references: Sequence[Any], *,
               config: sandbox.SandboxConfig = DEFAULT_CONFIG, extract: str = "fenced", workers: int = 1,
               return_info: bool = False):
  """Unit-test verifier: ``r_i = 1[program(y_i) + tests_i runs to its end in the sandbox and exits 0]``.

  The program is ``extract_code(y_i)``; the tests are the reference (typically ``assert`` lines, which see the
  program's definitions: both run as one module). The tests are followed by a line printing a fresh random
  marker, and a run counts only if it exits 0 *and* its output ends with that marker, so a program that calls
  ``sys.exit(0)`` or ``os._exit(0)`` before the tests scores 0. This is the usual exit-status verifier of code RL
  (e.g. verl's ``sandbox_fusion`` / prime code rewards; that form and the marker are ours, not one paper's). It
  is not proof against a program written to cheat on purpose: the tests run in the program's own process, which
  can read its source (the marker included) or rebind ``assert``-ed names.

  Args:
    completions: ``B`` decoded completions (non-strings, and completions without code, score 0 and count as
      parse failures).
    references: ``B`` test programs (``str``, or a list of ``str`` joined by newlines); ``None`` scores 0.
    config: the sandbox's limits (``DEFAULT_CONFIG``: 5 s wall, 3 s CPU, 512 MiB, standard library only).
    extract: ``"fenced"`` (the last ```` ``` ```` block) or ``"whole"`` (the completion is the program).
    workers: sandboxed runs at once (host threads; each run is its own process tree).
    return_info: also return ``{"parse_failures", "timeouts", "runs"}`` (timeouts: runs stopped by a limit).

  Returns:
    ``[B]`` float32 in {0, 1} (and the info dict if ``return_info``).

  Raises:
    ValueError: mismatched lengths, an unknown option, a reference that is not test code (data, not model
      output). ``rljax.sandbox.SandboxUnavailable``: this host cannot sandbox (nothing ran).
  """
  b = _check_lengths(completions, references, required=True)
  if extract not in _EXTRACT:
    raise ValueError(f"extract must be one of {_EXTRACT}, got {extract!r}")
  if not isinstance(config, sandbox.SandboxConfig):
    raise ValueError(f"config must be a rljax.sandbox.SandboxConfig, got {type(config).__name__}")
  if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
    raise ValueError(f"workers must be an int >= 1, got {workers!r}")
  tests = [_tests_text(references[i], i) for i in range(b)]
  jobs, failures = {}, 0
  for i in range(b):
    text = _as_text(completions[i])
    code = None if text is None else extract_code(text, extract)
    if code is None:
      failures += 1
    elif tests[i] is not None:
      jobs[i] = code
  out = np.zeros((b,), np.float32)
  timeouts = 0
  if jobs:
    sandbox.check(config)  # a host that cannot sandbox fails loudly, before any model code runs
    marker = "rljax-tests-passed-" + secrets.token_hex(16)

    def run(i):
      program = f"{jobs[i]}\n\n{tests[i]}\n\nprint({marker!r})\n"
      return i, sandbox.run_python(program, config=config)

    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
      for i, res in pool.map(run, sorted(jobs)):
        timeouts += bool(res.timed_out or res.limits_hit)
        out[i] = float(res.ok and res.stdout.rstrip("\n").endswith(marker))
  if return_info:
    return out, {"parse_failures": failures, "timeouts": timeouts, "runs": len(jobs)}
  return out


def _technique_rows():
  from rljax._technique import Fidelity, Technique
  from rljax.rewards import _stages as S
  return (
      Technique("code_tests", "reward", code_tests,
                "r = 1[program(y) + tests(a) exits 0 in rljax.sandbox and prints the marker after the tests]",
                "issue #20 item 3 (code verifiers; PRIME-style unit-test reward)",
                stage=S.verifier(code_tests),
                fidelity=Fidelity("peer", "verl v0.7.0 verl/utils/reward_score/prime_code/__init__.py (compute_score)",
                                  "verl: APPS in/out test cases, last ```python block, continuous (pass rate) as "
                                  "verl calls it; ours: assert tests appended to the last fenced block, all-pass "
                                  "only, a marker",
                                  read="volcengine/verl@v0.7.0 (f9c855f7) verl/utils/reward_score/prime_code/"
                                       "__init__.py:21-73 (compute_score: the ```python split, APPS in/out cases "
                                       "via utils.check_correctness, timeout 5, the continuous branch); "
                                       "verl/utils/reward_score/__init__.py:74-88 (default_compute_score, the "
                                       "caller for data sources codecontests / apps / codeforces / taco: "
                                       "prime_code.compute_score(..., continuous=True), sandbox_fusion likewise "
                                       "when sandbox_fusion_url is set); prime_code/utils.py:41-60 "
                                       "(check_correctness: the run killed after timeout + 1 s). Fifth draw (#51 "
                                       "item 4): the caller was not read before; 'continuous off' was the "
                                       "function's default, not verl's. Ninth draw (#51 item 4): with "
                                       "continuous=False a failing completion reaches `return success, "
                                       "metadata_list` with metadata_list unassigned (UnboundLocalError), not 0; "
                                       "the same in the verl 0.9.1 PyPI wheel. Per-row review j (#51): "
                                       "prime_code/testing_util.py@v0.7.0:88-114 (run_test: reliability_guard() "
                                       "with no memory bound, :603-617; the program run after a preamble, :114) "
                                       "and prime_code/__init__.py:41-45 (the per-case dicts of the continuous "
                                       "branch keep inputs / outputs only, no fn_name; run_test's :100-105 then "
                                       "takes a case as stdin/stdout); the same in the verl 0.9.1 PyPI wheel "
                                       "(testing_util.py:101-127, prime_code/__init__.py:41-45). Fourteenth draw "
                                       "(#51, part b): prime_code/__init__.py:23 against our extract_code (_FENCE): "
                                       "a bare block after the ```python block and an unclosed last ```python block "
                                       "were not in the record. Sixteenth draw (#51 item 4, seed 20261221): our "
                                       "side's DEFAULT_CONFIG (rljax/rewards/_code.py: output_bytes 16 KiB, "
                                       "allow_fork False by SandboxConfig's default; rljax/sandbox/_config.py: a "
                                       "stream past output_bytes stops the run) and their reliability_guard "
                                       "(testing_util.py:603-683) were not in the limits row. Nineteenth draw (#51, "
                                       "part b): our extractor (then one regex, _FENCE, matched left to right) "
                                       "could not open at ```text / ```bash, so a block with another tag before "
                                       "the code desynchronised it (nothing, or the prose between the blocks, was "
                                       "run): fixed after that draw (fenced_blocks pairs each opening fence with "
                                       "the next fence, any tag)",
                                  defaults=(("extract", "'fenced': the last closed block tagged ```python / "
                                             "```python3 / ```py or bare ``` (the info string's first word, any "
                                             "case, a newline after it); fenced_blocks pairs each opening fence "
                                             "with the next fence whatever its tag, so a ```text / ```bash / "
                                             "```json block is skipped whole",
                                             "completion.split('```python')[-1].split('```')[0]: the text after "
                                             "the last ```python up to the next fence, or to the end when that "
                                             "block is unclosed; without ```python, the text before the first "
                                             "fence (the whole text when there is no fence)"),
                                            ("tests", "assert code appended to the program",
                                             "APPS inputs/outputs pairs (stdin/stdout or call-based)"),
                                            ("score", "1 if all pass, else 0", "continuous=True (the "
                                             "caller's): 1 if all pass, else the pass rate of the first 10 cases, "
                                             "each run alone (1.0 when the first 10 pass though a later one "
                                             "fails); the function's own default continuous=False returns True "
                                             "when all pass and otherwise raises UnboundLocalError "
                                             "(metadata_list is assigned only in the continuous branch)"),
                                            ("limits", "5 s wall, 3 s CPU, 512 MiB, stdlib only; stdout and stderr each "
                                             "capped at 16 KiB (DEFAULT_CONFIG.output_bytes; SandboxConfig's own "
                                             "default 64 KiB): a stream past it stops the run (0); no new "
                                             "processes (allow_fork False), 64 open files, a 64 MiB tmpfs the only "
                                             "writable directory",
                                             "all cases: timeout=5 (a 5 s alarm per case, the run killed after "
                                             "6 s); per case (continuous): timeout=10, killed after 11 s; no "
                                             "memory bound (reliability_guard() with maximum_memory_bytes None); "
                                             "the trainer's own environment (any installed package); no output "
                                             "cap (stdin/stdout cases captured whole, utils.py:27-29 sends the "
                                             "rest to /dev/null); reliability_guard (testing_util.py:603-683) "
                                             "sets exit / quit, os.kill / system / remove / rename / getcwd / "
                                             "chdir / fork / ..., shutil.rmtree / move and subprocess.Popen to "
                                             "None and makes resource / psutil / joblib / tkinter / ipdb "
                                             "unimportable"),
                                            ("program run", "the extracted block as it is",
                                             "a preamble, then the block: from string / re / datetime / "
                                             "collections / heapq / bisect / copy / math / random / statistics / "
                                             "itertools / functools / operator / io / sys / json / builtins / "
                                             "typing import *, those modules imported, "
                                             "sys.setrecursionlimit(6*10**5) (testing_util.py:114)"),
                                            ("call-based cases (fn_name)", "none (assert tests)",
                                             "the all-cases run calls fn_name; the continuous per-case runs drop "
                                             "fn_name (__init__.py:41-45), so each case of a call-based problem "
                                             "is run as a stdin/stdout program")),
                                  placement="theirs: the reward function, once per response after the rollout; "
                                            "ours: a completion reward (verifier), once per row after the "
                                            "rollout, run in rljax.sandbox",
                                  deviations=(
                                      "the reward is float32, also under x64 (the StepData contract: rewards [B] "
                                      "float32, a host function of the text)",
                                      "the tests are assert code run with the program, not APPS in/out pairs "
                                      "(a different data format); the program's exit must be followed by the "
                                      "marker printed after the tests",
                                      "a completion without a fence scores 0 (theirs run the whole text); a bare "
                                      "``` or ```py block is accepted (theirs: only ```python)",
                                      "the last closed block (```python, ```py or bare) is the program here, the text "
                                      "after the last ```python there: a bare block after the code (e.g. a sample "
                                      "output '```\\n5\\n```') is run here (and fails), the ```python block there; an "
                                      "unclosed last ```python block (a completion cut at the length limit) is run "
                                      "there to the end of the text, skipped here (an earlier closed block, or 0) "
                                      "(fourteenth draw, #51)",
                                      "the extracted block starts after the opening fence's newline, theirs at "
                                      "the character after '```python' (a leading newline: the same program); a "
                                      "block with another tag (```text, ```bash) is skipped by both (ours since "
                                      "the nineteenth draw, #51, found our old regex desynchronised by it)",
                                      "no continuous (pass-rate) score: verl's reward for code data sources "
                                      "is continuous=True (a failed set scores the pass rate of its first 10 "
                                      "cases); ours scores such a completion 0",
                                      "verl's compute_score with its own default continuous=False has no 0 "
                                      "score: a failing completion raises UnboundLocalError (only "
                                      "default_compute_score's continuous=True path scores failures)",
                                      "theirs run the program after an import preamble (math, collections, "
                                      "itertools, ... star-imported; recursion limit 6*10**5): a program that "
                                      "calls sqrt(4) or uses Counter without importing it passes there and "
                                      "fails here (NameError); a deep recursion that passes there can fail here "
                                      "(the default limit 1000) (per-row review j, #51)",
                                      "theirs set no memory bound and run in the trainer's environment; ours "
                                      "512 MiB, standard library only: a program that imports numpy or needs "
                                      "more memory can pass there and fail here",
                                      "ours stops a run whose stdout or stderr passes 16 KiB (DEFAULT_CONFIG."
                                      "output_bytes): a program that prints 20,000 characters (debug output) "
                                      "scores 0 here and can pass there (no cap); theirs set exit, quit, "
                                      "os.getcwd, os.chdir, os.remove, ... to None and block 'import "
                                      "resource' / psutil / joblib: a program that calls os.getcwd() passes here "
                                      "and fails there (sixteenth draw, #51)",
                                      "theirs' continuous pass rate of a call-based problem (fn_name) runs each "
                                      "case without fn_name, as a stdin/stdout program: a function-only "
                                      "solution that fails one case scores about 0 there, not its pass "
                                      "rate"))),
  )


TECHNIQUES = _technique_rows()
