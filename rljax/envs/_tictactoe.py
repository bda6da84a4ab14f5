"""TicTacToe for self-play (SPIRAL): one policy plays both ``X`` and ``O``; turns alternate roles.

A move is a cell number 1-9 (row-major; the first digit 1-9 in the turn counts). Each observation shows the
board and names the player to move, and every transcript segment carries its role (``Segment.role``), so a
role-conditioned baseline (SPIRAL's RAE: one baseline per game and role) can key on it. Zero-sum outcome at
the end: ``info["role_rewards"] = {winner: 1, loser: -1}`` or ``{X: 0, O: 0}`` for a draw; the per-turn reward
is the mover's outcome on the final move and 0 before. An illegal move (no digit, or an occupied cell) loses
the game for its player when ``illegal="lose"`` (SPIRAL's rule), or, with ``illegal="retry"``, is answered
with an error and the same player moves again (reward 0). ``first`` chooses who opens: ``"X"`` or
``"random"`` (by the reset ``seed``).
"""
from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any, Optional

import numpy as np

from rljax.envs._multiturn import StepResult

ROLES = ("X", "O")
_LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
_CELL = re.compile(r"[1-9]")


def winner(board: tuple) -> Optional[str]:
  """``"X"``/``"O"`` if that player has three in a line, else None."""
  for a, b, c in _LINES:
    if board[a] != "." and board[a] == board[b] == board[c]:
      return board[a]
  return None


@dataclasses.dataclass(frozen=True)
class TicTacToeState:
  """The 9 cells (``"."``, ``"X"``, ``"O"``) and the player to move."""
  board: tuple
  to_move: str


@dataclasses.dataclass(frozen=True)
class TicTacToeEnv:
  """TicTacToe self-play (see the module docstring).

  Attributes:
    illegal: ``"lose"`` or ``"retry"``. first: ``"X"`` or ``"random"``. stop_strings: a turn ends at a newline.
  """
  illegal: str = "lose"
  first: str = "X"
  stop_strings: tuple = ("\n",)

  def __post_init__(self):
    if self.illegal not in ("lose", "retry"):
      raise ValueError(f"TicTacToeEnv.illegal must be 'lose' or 'retry', got {self.illegal!r}")
    if self.first not in ("X", "random"):
      raise ValueError(f"TicTacToeEnv.first must be 'X' or 'random', got {self.first!r}")

  def role(self, state: TicTacToeState) -> str:
    return state.to_move

  def render(self, state: TicTacToeState) -> str:
    b = state.board
    rows = "\n".join("".join(b[3 * r:3 * r + 3]) for r in range(3))
    return f"{rows}\nYou are {state.to_move}. Your move (1-9):\n"

  def reset(self, problem: Any, seed: int) -> tuple[Any, str]:
    """``problem`` is unused (every game starts empty); ``seed`` picks the opener when ``first="random"``."""
    del problem
    first = "X" if self.first == "X" else ROLES[int(np.random.default_rng([seed, 3]).integers(2))]
    state = TicTacToeState((".",) * 9, first)
    return state, "TicTacToe: three in a row wins. Cells are numbered 1-9, row by row.\n" + self.render(state)

  def step(self, state: TicTacToeState, action: str) -> StepResult:
    me = state.to_move
    other = ROLES[1 - ROLES.index(me)]
    m = _CELL.search(action)
    cell = int(m.group()) - 1 if m else -1
    if cell < 0 or state.board[cell] != ".":
      why = "no cell number" if cell < 0 else f"cell {cell + 1} is taken"
      if self.illegal == "lose":
        return StepResult(state, f"Illegal move ({why}): {me} loses.\n", -1.0, True,
                          {"role_rewards": {me: -1.0, other: 1.0}, "illegal": True})
      return StepResult(state, f"Illegal move ({why}).\n" + self.render(state), 0.0, False, {"illegal": True})
    board = state.board[:cell] + (me,) + state.board[cell + 1:]
    nxt = TicTacToeState(board, other)
    if winner(board) == me:
      return StepResult(nxt, f"{me} wins.\n", 1.0, True, {"role_rewards": {me: 1.0, other: -1.0}})
    if "." not in board:
      return StepResult(nxt, "Draw.\n", 0.0, True, {"role_rewards": {me: 0.0, other: 0.0}})
    return StepResult(nxt, self.render(nxt), 0.0, False, {})


@functools.lru_cache(maxsize=None)
def _value(board: tuple, to_move: str, me: str) -> int:
  """Game value for ``me`` with ``to_move`` to play: ``10 - plies`` for a win, ``plies - 10`` for a loss, 0 for
  a draw (a quicker win is worth more). Pure, so memoised."""
  w = winner(board)
  plies = 9 - board.count(".")
  if w is not None:
    return 10 - plies if w == me else plies - 10
  free = [i for i in range(9) if board[i] == "."]
  if not free:
    return 0
  nxt = ROLES[1 - ROLES.index(to_move)]
  vals = [_value(board[:i] + (to_move,) + board[i + 1:], nxt, me) for i in free]
  return max(vals) if to_move == me else min(vals)


def minimax_move(board: tuple, me: str) -> int:
  """A perfect player's move (0-based cell) for ``me``: maximises the game value (the quickest win, else a
  draw, else the slowest loss), ties broken by the lowest cell. Brute force over the game tree (a reference
  for tests and baselines)."""
  board = tuple(board)
  other = ROLES[1 - ROLES.index(me)]
  free = [i for i in range(9) if board[i] == "."]
  if not free or winner(board) is not None:
    raise ValueError(f"no move to make on a finished board {''.join(board)!r}")
  return max(free, key=lambda i: (_value(board[:i] + (me,) + board[i + 1:], other, me), -i))
