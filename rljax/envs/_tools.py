"""Tool calls in model text: ``<call>code</call>`` parsing and the sandboxed Python tool.

The call format is ReTool/SimpleTIR-style (code in a delimited block, its output fed back as an observation);
the tags are ours. Model-written code runs only through ``rljax.sandbox.run_python``.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Union

from rljax.sandbox import SandboxConfig, run_python

CALL_OPEN, CALL_CLOSE = "<call>", "</call>"


@dataclasses.dataclass(frozen=True)
class ToolCall:
  """A parsed call: the code between the tags (stripped)."""
  code: str


@dataclasses.dataclass(frozen=True)
class CallError:
  """A call that cannot be parsed; ``message`` is shown to the model."""
  message: str


def parse_call(text: str, open_tag: str = CALL_OPEN, close_tag: str = CALL_CLOSE) -> Union[None, ToolCall, CallError]:
  """The first call in ``text``: ``None`` when ``open_tag`` does not occur, ``ToolCall(code)`` for
  ``open_tag code close_tag``, else ``CallError`` (unclosed, nested, or empty). Never raises for any text."""
  if not isinstance(text, str):
    return CallError(f"a call must be text, got {type(text).__name__}")
  i = text.find(open_tag)
  if i < 0:
    return None
  body_start = i + len(open_tag)
  j = text.find(close_tag, body_start)
  if j < 0:
    return CallError(f"{open_tag} without {close_tag}")
  code = text[body_start:j]
  if open_tag in code:
    return CallError(f"nested {open_tag}")
  if not code.strip():
    return CallError(f"empty {open_tag}{close_tag}")
  return ToolCall(code.strip("\n"))


def truncate(text: str, max_chars: int, marker: str = "...[truncated]") -> str:
  """``text`` if it has at most ``max_chars`` characters, else its first ``max_chars - len(marker)`` and
  ``marker`` (exactly ``max_chars`` in all)."""
  if max_chars < len(marker):
    raise ValueError(f"max_chars must be >= {len(marker)} (the marker's length), got {max_chars}")
  return text if len(text) <= max_chars else text[:max_chars - len(marker)] + marker


def python_tool(config: SandboxConfig = SandboxConfig(), max_chars: int = 256,
                runner: Optional[Callable] = None) -> Callable[[str], str]:
  """``code -> observation text``: runs ``code`` with ``rljax.sandbox.run_python(code, config)`` (or
  ``runner``, same signature, for tests) and returns its stdout, then stderr's last line if it failed, plus
  ``[timed out]`` / ``[limits: ...]`` notes, truncated to ``max_chars``. ``SandboxUnavailable`` propagates
  (a host problem, not the model's): check the host at start-up with ``rljax.sandbox.check``."""
  run = runner or run_python

  def tool(code: str) -> str:
    res = run(code, config=config)
    out = res.stdout
    if res.exit_code != 0 and res.stderr.strip():
      out += res.stderr.strip().splitlines()[-1]
    if res.timed_out:
      out += "[timed out]"
    elif res.limits_hit:
      out += f"[limits: {', '.join(res.limits_hit)}]"
    return truncate(out, max_chars)

  return tool
