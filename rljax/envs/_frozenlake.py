"""FrozenLake as a text game (RAGEN's grid puzzle): walk from ``S`` to ``G`` without falling into a hole ``H``.

The board is shown as text rows (``P`` marks the player); an action is one word, ``left``, ``down``, ``right``
or ``up`` (the last such word in the turn counts, case-insensitive). Reaching ``G`` gives reward 1 and ends the
episode; a hole ends it with 0; walking into the border leaves the player in place. A turn without a valid
word is *invalid*: the environment says so, the player stays, reward ``invalid_reward`` (default 0; RAGEN
penalises format errors, the value is ours). With ``slip_prob > 0`` the move goes to one of the two
perpendicular directions with probability ``slip_prob / 2`` each (Gym's slippery lake has ``2/3``), drawn
from ``numpy.random.default_rng([seed, turn])``: the episode is a pure function of the seed and the actions.
"""
from __future__ import annotations

import dataclasses
import re
from collections import deque
from typing import Any, Optional, Sequence

import numpy as np

from rljax.envs._multiturn import StepResult

ACTIONS = ("left", "down", "right", "up")
_MOVES = {"left": (0, -1), "down": (1, 0), "right": (0, 1), "up": (-1, 0)}
_WORD = re.compile(r"\b(left|down|right|up)\b", re.I)


@dataclasses.dataclass(frozen=True)
class LakeState:
  """The board (tuple of row strings), the player's ``(row, col)``, the episode ``seed`` and turns taken."""
  board: tuple
  pos: tuple
  seed: int
  turn: int = 0


def shortest_path(board: Sequence[str]) -> Optional[list]:
  """Actions of a shortest hole-free path from ``S`` to ``G`` (non-slippery), or None (BFS)."""
  rows, cols = len(board), len(board[0])
  start = next((r, c) for r in range(rows) for c in range(cols) if board[r][c] == "S")
  prev = {start: None}
  queue = deque([start])
  while queue:
    cur = queue.popleft()
    if board[cur[0]][cur[1]] == "G":
      path = []
      while prev[cur] is not None:
        cur, a = prev[cur]
        path.append(a)
      return path[::-1]
    for a in ACTIONS:
      nxt = (cur[0] + _MOVES[a][0], cur[1] + _MOVES[a][1])
      if 0 <= nxt[0] < rows and 0 <= nxt[1] < cols and nxt not in prev and board[nxt[0]][nxt[1]] != "H":
        prev[nxt] = (cur, a)
        queue.append(nxt)
  return None


@dataclasses.dataclass(frozen=True)
class FrozenLakeEnv:
  """FrozenLake (see the module docstring).

  Attributes:
    size: side of random boards (2..8). hole_prob: chance of a hole per free cell of a random board.
    slip_prob: probability the move slips sideways (0: deterministic).
    invalid_reward: reward of a turn with no valid action word.
    stop_strings: a turn ends at a newline.
  """
  size: int = 4
  hole_prob: float = 0.2
  slip_prob: float = 0.0
  invalid_reward: float = 0.0
  stop_strings: tuple = ("\n",)

  def __post_init__(self):
    if not 2 <= self.size <= 8:
      raise ValueError(f"FrozenLakeEnv.size must be in [2, 8], got {self.size}")
    if not 0.0 <= self.hole_prob < 1.0:
      raise ValueError(f"FrozenLakeEnv.hole_prob must be in [0, 1), got {self.hole_prob}")
    if not 0.0 <= self.slip_prob <= 1.0:
      raise ValueError(f"FrozenLakeEnv.slip_prob must be in [0, 1], got {self.slip_prob}")

  def random_board(self, seed: int) -> tuple:
    """A solvable ``size x size`` board, ``S`` top-left, ``G`` bottom-right, deterministic in ``seed``."""
    rng = np.random.default_rng([seed, 1])
    n = self.size
    while True:
      cells = np.where(rng.random((n, n)) < self.hole_prob, "H", "F")
      cells[0, 0], cells[n - 1, n - 1] = "S", "G"
      board = tuple("".join(r) for r in cells)
      if shortest_path(board) is not None:
        return board

  def render(self, state: LakeState) -> str:
    rows = [list(r) for r in state.board]
    rows[state.pos[0]][state.pos[1]] = "P"
    return "\n".join("".join(r) for r in rows) + "\nMove (left, down, right, up):\n"

  def reset(self, problem: Any, seed: int) -> tuple[Any, str]:
    """``problem``: a board (rows of ``S F H G``, one ``S`` and one ``G``) or ``None`` for
    ``random_board(seed)``."""
    board = self.random_board(seed) if problem is None else tuple(problem)
    if (not board or len({len(r) for r in board}) != 1 or any(set(r) - set("SFHG") for r in board)
        or "".join(board).count("S") != 1 or "".join(board).count("G") != 1):
      raise ValueError(f"board must be equal-length rows of S/F/H/G with one S and one G, got {board!r}")
    start = next((r, row.index("S")) for r, row in enumerate(board) if "S" in row)
    state = LakeState(board, start, int(seed))
    return state, "Walk from S to G, avoiding holes H. P is you.\n" + self.render(state)

  def step(self, state: LakeState, action: str) -> StepResult:
    words = _WORD.findall(action)
    turn = state.turn + 1
    if not words:
      state = dataclasses.replace(state, turn=turn)
      return StepResult(state, "Invalid action.\n" + self.render(state), self.invalid_reward, False,
                        {"invalid": True})
    move = words[-1].lower()
    if self.slip_prob > 0:
      u = np.random.default_rng([state.seed, 2, turn]).random()
      if u < self.slip_prob:
        i = ACTIONS.index(move)
        move = ACTIONS[(i + (1 if u < self.slip_prob / 2 else 3)) % 4]  # a perpendicular direction
    dr, dc = _MOVES[move]
    r = min(max(state.pos[0] + dr, 0), len(state.board) - 1)
    c = min(max(state.pos[1] + dc, 0), len(state.board[0]) - 1)
    state = dataclasses.replace(state, pos=(r, c), turn=turn)
    cell = state.board[r][c]
    if cell == "G":
      return StepResult(state, "", 1.0, True, {"moved": move, "outcome": "goal"})
    if cell == "H":
      return StepResult(state, "", 0.0, True, {"moved": move, "outcome": "hole"})
    return StepResult(state, self.render(state), 0.0, False, {"moved": move})
