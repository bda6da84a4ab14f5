"""Tool-augmented countdown: reach the target, optionally running Python in the sandbox first.

Each model turn is either a tool call ``<call>python code</call>`` (its output, truncated, comes back as
``<output>...</output>``) or a final ``<answer>expression</answer>``, scored by ``CountdownTask``'s exact
rational checker (reward 1 or 0, episode ends). A turn with neither is *void* (SimpleTIR's term): it gets a
reminder and reward 0. A call that cannot be parsed (unclosed, nested, empty) gets an error observation (never a
crash); it is a call attempt, not a void turn. ``VOID_TURN_PATTERNS`` are this definition as the two regexes of
``rljax.filters.void_turn``, so the filter drops exactly the episodes the environment counts (``is_void_turn``). With
``bind_inputs=True`` the tool runs ``n, t = [...], target`` before the model's code (and a shorter prompt says
so), so a program need not copy the numbers (ours: copying is what a small model learns slowest). The
environment after ReTool / SimpleTIR (code interpreter feedback inside the reasoning); the problem
generator and checker are ``rljax.envs.CountdownTask``'s; the tags and messages are ours.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Optional

from rljax.envs._countdown import CountdownTask
from rljax.envs._multiturn import StepResult
from rljax.envs._task import Problem
from rljax.envs._tools import CALL_CLOSE, CALL_OPEN, ToolCall, parse_call, python_tool

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)
_CALL_ATTEMPT = re.compile(re.escape(CALL_OPEN))  # parse_call answers None exactly when this does not occur

#: The environment's void turn for ``rljax.filters.void_turn(turns, **VOID_TURN_PATTERNS)`` (one definition,
#: used by ``step``): a turn is void unless it holds a call attempt (``<call>``: a call, or one ``parse_call``
#: rejects with an error observation) or an answer (``<answer>...</answer>``). SimpleTIR's own code counts an
#: unterminated code block as void; here the model gets the parse error instead.
VOID_TURN_PATTERNS = {"code_pattern": _CALL_ATTEMPT.pattern, "answer_pattern": _ANSWER.pattern}


def is_void_turn(action: str) -> bool:
  """True when ``action`` has neither a call attempt nor an answer (``VOID_TURN_PATTERNS``, ``re.S``)."""
  return not (_CALL_ATTEMPT.search(action) or _ANSWER.search(action))


@dataclasses.dataclass(frozen=True)
class ToolCountdownState:
  """The problem, how many tool calls were made and how many turns were void."""
  problem: Problem
  calls: int = 0
  voids: int = 0


@dataclasses.dataclass(frozen=True)
class ToolCountdownEnv:
  """Countdown with a Python tool (see the module docstring).

  Attributes:
    task: the ``CountdownTask`` that makes and checks problems (``task.problems(split, n, seed)``).
    tool: ``code -> observation text`` (default ``python_tool()``: the sandbox, 256 characters).
    stop_strings: what ends a model turn (use them as ``EpisodeConfig.stop_strings`` and in the sampler).
    bind_inputs: the tool runs ``tool_code(problem, code)``: the model's code after a line that sets ``n``
      (the numbers) and ``t`` (the target); tracebacks count that line.
  """
  task: CountdownTask = CountdownTask()
  tool: Optional[Callable[[str], str]] = None
  stop_strings: tuple = (CALL_CLOSE, "</answer>")
  bind_inputs: bool = False

  def prompt(self, problem: Problem) -> str:
    nums = ",".join(str(n) for n in problem.meta["numbers"])
    if self.bind_inputs:
      return (f"Numbers: {nums}. Target: {problem.meta['target']}. Use + - * / and each number at most once. "
              "Python <call>code</call> has n, t; answer <answer>expression</answer>.\n")
    return (f"Numbers: {nums}. Target: {problem.meta['target']}. Use + - * / and each number at most once. "
            "Run Python with <call>code</call>; answer with <answer>expression</answer>.\n")

  def tool_code(self, problem: Problem, code: str) -> str:
    """What the tool runs for the model's ``code``: ``code``, after ``n, t = [...], target`` with
    ``bind_inputs``."""
    if not self.bind_inputs:
      return code
    return f"n, t = {list(problem.meta['numbers'])!r}, {problem.meta['target']!r}\n{code}"

  def reset(self, problem: Problem, seed: int) -> tuple[Any, str]:
    """``seed`` is unused (the problem fixes everything)."""
    del seed
    if not isinstance(problem, Problem) or "numbers" not in problem.meta:
      raise ValueError(f"problem must be a CountdownTask problem, got {problem!r:.80}")
    return ToolCountdownState(problem), self.prompt(problem)

  def step(self, state: ToolCountdownState, action: str) -> StepResult:
    if is_void_turn(action):
      state = dataclasses.replace(state, voids=state.voids + 1)
      return StepResult(state, "<output>error: write <call>code</call> or <answer>expression</answer></output>\n",
                        0.0, False, {"tool_calls": state.calls, "void_turns": state.voids, "void": True})
    call = parse_call(action)
    answer = _ANSWER.search(action)
    if answer is not None and (call is None or answer.start() < action.find(CALL_OPEN)):
      reward = float(self.task.score([answer.group(1)], [state.problem])[0])
      return StepResult(state, "", reward, True, {"tool_calls": state.calls, "void_turns": state.voids})
    if isinstance(call, ToolCall):
      out = (self.tool or python_tool())(self.tool_code(state.problem, call.code))
      state = dataclasses.replace(state, calls=state.calls + 1)
      return StepResult(state, f"<output>{out}</output>\n", 0.0, False,
                        {"tool_calls": state.calls, "void_turns": state.voids})
    # not void, not an answer, not a call: "<call>" occurs, so parse_call gave a CallError
    return StepResult(state, f"<output>error: {call.message}</output>\n", 0.0, False,
                      {"tool_calls": state.calls, "void_turns": state.voids, "call_error": call.message})
