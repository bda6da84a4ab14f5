"""Stopping a run cleanly on SIGTERM (a preemption) or SIGINT (Ctrl-C): ``stop_flag`` and ``Preempted``.

``train`` enters ``stop_flag`` first, before anything is compiled. The first SIGTERM or SIGINT only sets
``flag["set"]`` (a Python handler runs between bytecodes, so a signal arriving during an XLA compilation or a
checkpoint write interrupts neither); the training loops look at the flag after each step (and before the first
one), save a checkpoint and raise ``Preempted`` (``preempted``). A second SIGINT while the first is handled (a
long step, the save) restores the previous handlers and raises ``KeyboardInterrupt`` at once: a checkpoint being
written then stays in orbax's temporary directory (``*.orbax-checkpoint-tmp*``), which the next resume removes
(``rljax.train._checkpoint.remove_partial_saves``). Further SIGTERMs are ignored (the save is under way).

``rljax train`` turns ``Preempted`` into one line with the resume command and the exit code ``128 + signal``
(143 for SIGTERM, 130 for Ctrl-C); after a second Ctrl-C it prints one line and leaves with ``os._exit(130)`` (the
writer threads of a save cut short would print orbax tracebacks during the interpreter's shutdown).
"""
from __future__ import annotations

import contextlib
import signal
import threading

__all__ = ["Preempted", "stop_flag", "preempted", "stop_note"]

NAMES = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "Ctrl-C"}


class Preempted(RuntimeError):
  """Raised by ``train`` after SIGTERM or SIGINT (Ctrl-C) once the current step's checkpoint is saved (or, when
  the signal came before the first step of the start, with nothing new saved; the message says which).
  ``signal``: the signal (SIGTERM when unknown, e.g. another process of the run received it); ``exit_code``:
  ``128 + signal`` (143, or 130 for Ctrl-C). ``train(cfg, resume=True)`` continues the run."""

  def __init__(self, message: str, signum: int = signal.SIGTERM):
    super().__init__(message)
    self.signal = signal.Signals(signum)

  @property
  def exit_code(self) -> int:
    return 128 + int(self.signal)


def preempted(flag: dict, what: str) -> Preempted:
  """``Preempted("<signal name>: <what>")`` for the signal that set ``flag`` (``"Ctrl-C: saved RL checkpoint at
  step 3"``)."""
  signum = flag.get("signal") or signal.SIGTERM
  return Preempted(f"{NAMES[signum]}: {what}", signum)


def stop_note(stage: str, step: int, saved: bool) -> str:
  """What a loop stopped by a signal after ``step`` did: ``"saved RL checkpoint at step 3"``, or without checkpoints
  (``checkpoint.enabled=false``) ``"stopped at RL step 3 (checkpoint.enabled=false: nothing saved)"``."""
  if saved:
    return f"saved {stage} checkpoint at step {step}"
  return f"stopped at {stage} step {step} (checkpoint.enabled=false: nothing saved)"


@contextlib.contextmanager
def stop_flag():
  """Yields ``flag``: ``flag["set"]`` becomes True on the first SIGTERM or SIGINT, ``flag["signal"]`` says which.

  A second SIGINT raises ``KeyboardInterrupt`` (the previous handlers restored first). The handlers are installed in
  the main thread only (elsewhere the flag never sets) and restored on exit, so a notebook or pytest keeps its own
  Ctrl-C afterwards. A SIGINT ignored when entering (``SIG_IGN``: a background job of a script) stays ignored.
  """
  flag = {"set": False, "signal": None}
  previous: dict = {}

  def restore():
    for signum, handler in previous.items():
      signal.signal(signum, signal.SIG_DFL if handler is None else handler)
    previous.clear()

  def handler(signum, frame):  # pylint: disable=unused-argument
    if not flag["set"]:
      flag.update(set=True, signal=signal.Signals(signum))
    elif signum == signal.SIGINT:
      restore()
      raise KeyboardInterrupt("Ctrl-C again: stopped at once, without saving")

  if threading.current_thread() is threading.main_thread():
    for signum in (signal.SIGTERM, signal.SIGINT):
      if signal.getsignal(signum) is not signal.SIG_IGN:
        previous[signum] = signal.signal(signum, handler)
  try:
    yield flag
  finally:
    restore()
