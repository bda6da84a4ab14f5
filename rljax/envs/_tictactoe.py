"""TicTacToe for self-play (SPIRAL): one policy plays both ``X`` and ``O``; turns alternate roles.

A move is a cell number 1-9 (row-major; the first digit 1-9 in the turn counts). Each observation shows the
board (``render``: a free cell shows its number) and names the player to move, and every transcript segment
carries its role (``Segment.role``), so a role-conditioned baseline (SPIRAL's RAE: one baseline per game and
role) can key on it. Zero-sum outcome at the end: ``info["role_rewards"] = {winner: 1, loser: -1}`` or
``{X: 0, O: 0}`` for a draw; the per-turn reward is the mover's outcome on the final move and 0 before. An illegal move (no digit, or an occupied cell) loses
the game for its player when ``illegal="lose"`` (SPIRAL's rule), or, with ``illegal="retry"``, is answered
with an error and the same player moves again (reward 0). ``first`` chooses who opens: ``"X"`` or
``"random"`` (by the reset ``seed``).

Against a fixed opponent (held-out evaluation, ours): ``reset(Opponent(kind, model), seed)`` makes the
environment play the other role itself, ``random_move`` (uniform over free cells) or a minimax player
(``minimax_moves``: every optimal move, one drawn uniformly), each draw from ``rng([seed, ply])``, so a game is a
pure function of the seed and the moves. Only the model's turns are then model turns; the rewards and
``info["role_rewards"]`` are as in self-play (the model's reward is its outcome, +1 / 0 / -1).
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


def _other(role: str) -> str:
  return ROLES[1 - ROLES.index(role)]


OPPONENTS = ("random", "minimax")


@dataclasses.dataclass(frozen=True)
class Opponent:
  """A fixed opponent played by the environment: ``kind`` in ``OPPONENTS``; ``model`` the model's role (X opens)."""
  kind: str
  model: str

  def __post_init__(self):
    if self.kind not in OPPONENTS:
      raise ValueError(f"Opponent.kind must be one of {list(OPPONENTS)}, got {self.kind!r}")
    if self.model not in ROLES:
      raise ValueError(f"Opponent.model must be one of {list(ROLES)}, got {self.model!r}")


@dataclasses.dataclass(frozen=True)
class TicTacToeState:
  """The 9 cells (``"."``, ``"X"``, ``"O"``), the player to move, and the environment's own opponent (None in
  self-play) with the seed of its draws."""
  board: tuple
  to_move: str
  opponent: Optional[Opponent] = None
  seed: int = 0


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
    """The board, rows joined by ``/``, a free cell shown by its number, and the player to move:
    ``"XO3/4X6/789 O to play:\\n"`` (short: observations are most of a sequence's tokens; the free cells' numbers
    make a legal move a copy of one of them, ours)."""
    b = [c if c != "." else str(i + 1) for i, c in enumerate(state.board)]
    rows = "/".join("".join(b[3 * r:3 * r + 3]) for r in range(3))
    return f"{rows} {state.to_move} to play:\n"

  def reset(self, problem: Any, seed: int) -> tuple[Any, str]:
    """Every game starts empty. ``problem``: None (self-play; ``seed`` picks the opener when ``first="random"``)
    or an ``Opponent`` (X opens; when the model plays O, the opponent's first move is made here)."""
    intro = "TicTacToe: three in a row wins. Cells are numbered 1-9, row by row.\n"
    if isinstance(problem, Opponent):
      state = TicTacToeState((".",) * 9, "X", problem, int(seed))
      if problem.model == "O":
        cell = opponent_move(state.board, "X", problem.kind, int(seed))
        state = dataclasses.replace(state, board=_put(state.board, cell, "X"), to_move="O")
      return state, intro + self.render(state)
    if problem is not None:
      raise ValueError(f"TicTacToeEnv.reset: problem must be None (self-play) or an Opponent, got {problem!r}")
    first = "X" if self.first == "X" else ROLES[int(np.random.default_rng([seed, 3]).integers(2))]
    state = TicTacToeState((".",) * 9, first)
    return state, intro + self.render(state)

  def step(self, state: TicTacToeState, action: str) -> StepResult:
    me = state.to_move
    other = _other(me)
    m = _CELL.search(action)
    cell = int(m.group()) - 1 if m else -1
    if cell < 0 or state.board[cell] != ".":
      why = "no cell number" if cell < 0 else f"cell {cell + 1} is taken"
      if self.illegal == "lose":
        return StepResult(state, f"Illegal move ({why}): {me} loses.\n", -1.0, True,
                          {"role_rewards": {me: -1.0, other: 1.0}, "illegal": True})
      return StepResult(state, f"Illegal move ({why}).\n" + self.render(state), 0.0, False, {"illegal": True})
    board = _put(state.board, cell, me)
    nxt = dataclasses.replace(state, board=board, to_move=other)
    if winner(board) == me:
      return StepResult(nxt, f"{me} wins.\n", 1.0, True, {"role_rewards": {me: 1.0, other: -1.0}})
    if "." not in board:
      return StepResult(nxt, "Draw.\n", 0.0, True, {"role_rewards": {me: 0.0, other: 0.0}})
    if state.opponent is None:
      return StepResult(nxt, self.render(nxt), 0.0, False, {})
    reply = opponent_move(board, other, state.opponent.kind, state.seed)  # the environment's own move
    board = _put(board, reply, other)
    nxt = dataclasses.replace(state, board=board, to_move=me)
    if winner(board) == other:
      return StepResult(nxt, f"{other} plays {reply + 1}: {other} wins.\n", -1.0, True,
                        {"role_rewards": {me: -1.0, other: 1.0}})
    if "." not in board:
      return StepResult(nxt, f"{other} plays {reply + 1}: draw.\n", 0.0, True, {"role_rewards": {me: 0.0, other: 0.0}})
    return StepResult(nxt, self.render(nxt), 0.0, False, {})  # the board shows the opponent's move


def _put(board: tuple, cell: int, role: str) -> tuple:
  return board[:cell] + (role,) + board[cell + 1:]


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


def _free(board: tuple) -> list:
  board = tuple(board)
  free = [i for i in range(9) if board[i] == "."]
  if not free or winner(board) is not None:
    raise ValueError(f"no move to make on a finished board {''.join(board)!r}")
  return free


def minimax_moves(board: tuple, me: str) -> list:
  """Every optimal move (0-based cells, ascending) for ``me``: those of the highest game value (the quickest
  win, else a draw, else the slowest loss). Brute force over the game tree (a reference for tests and the
  environment's minimax opponent)."""
  board = tuple(board)
  vals = {i: _value(_put(board, i, me), _other(me), me) for i in _free(board)}
  best = max(vals.values())
  return [i for i in sorted(vals) if vals[i] == best]


def minimax_move(board: tuple, me: str) -> int:
  """A perfect player's move (0-based cell) for ``me``: the lowest of ``minimax_moves``."""
  return minimax_moves(board, me)[0]


def random_move(board: tuple, rng: np.random.Generator) -> int:
  """A uniformly random free cell (0-based)."""
  free = _free(board)
  return free[int(rng.integers(len(free)))]


def opponent_move(board: tuple, me: str, kind: str, seed: int) -> int:
  """The environment opponent's move for ``me``: ``kind="random"``: ``random_move``; ``"minimax"``: one of
  ``minimax_moves`` drawn uniformly (a perfect player that varies its games). The draw uses
  ``rng([seed, ply])`` (``ply`` = cells taken), so it is a pure function of the seed and the board."""
  rng = np.random.default_rng([int(seed), 9 - tuple(board).count(".")])
  if kind == "random":
    return random_move(board, rng)
  if kind == "minimax":
    moves = minimax_moves(board, me)
    return moves[int(rng.integers(len(moves)))]
  raise ValueError(f"opponent kind must be one of {list(OPPONENTS)}, got {kind!r}")
