"""The multi-turn environments with scripted players: tool countdown (Python tool, real sandbox once),
FrozenLake (shortest path reaches the goal; holes, invalid words, slippery determinism), TicTacToe self-play
(perfect play draws, a scripted win, illegal moves, roles in the transcript); and tool-call parsing."""
import dataclasses
import sys

import numpy as np
import pytest

from rljax.envs import (CallError, CountdownTask, EpisodeConfig, FrozenLakeEnv, Problem, TicTacToeEnv, ToolCall,
                        ToolCountdownEnv, advance, encode_episode, minimax_move, parse_call, python_tool,
                        shortest_path, start, step_batch, truncate)
from rljax.sandbox import SandboxConfig, SandboxResult


def _run(env, actions, problem=None, seed=0, **cfg):
  config = EpisodeConfig(stop_strings=env.stop_strings, **cfg)
  ep = start(env, problem, seed)
  for a in actions:
    ep = advance(env, ep, a, config)
  return ep


# ----------------------------------------------------------------------------- tool calls


def test_parse_call_never_raises_and_says_what_is_wrong():
  assert parse_call("no call here") is None
  assert parse_call("think <call>print(1)</call> more") == ToolCall("print(1)")
  assert parse_call("<call>\nx = 1\nprint(x)\n</call>") == ToolCall("x = 1\nprint(x)")
  assert parse_call("<call>print(1)") == CallError("<call> without </call>")
  assert parse_call("<call> <call>1</call>") == CallError("nested <call>")
  assert parse_call("<call>  </call>") == CallError("empty <call></call>")
  assert isinstance(parse_call(None), CallError)


def test_truncate_is_exact():
  assert truncate("abc", 20) == "abc"
  out = truncate("x" * 100, 20)
  assert len(out) == 20 and out == "x" * 6 + "...[truncated]"
  with pytest.raises(ValueError, match="max_chars"):
    truncate("abc", 3)


def _fake_runner(code, *, config):
  """Evaluates nothing: echoes the code's length (tests must not depend on the sandbox's timing)."""
  del config
  if code == "loop":
    return SandboxResult("", "", None, 9, True, False, False, ("wall_time",), {}, 0.0)
  if code == "raise":
    return SandboxResult("", "Traceback\nZeroDivisionError: division by zero\n", 1, None, False, False, False, (),
                         {}, 0.0)
  return SandboxResult("y" * len(code) + "\n", "", 0, None, False, False, False, (), {}, 0.0)


def test_python_tool_formats_output_errors_and_timeouts():
  tool = python_tool(max_chars=20, runner=_fake_runner)
  assert tool("abc") == "yyy\n"
  assert tool("loop") == "[timed out]"
  assert tool("raise") == "ZeroDivisionError: division by zero"[:6] + "...[truncated]"
  assert len(tool("z" * 50)) == 20


# ----------------------------------------------------------------------------- tool countdown


PROBLEM = Problem("3,7,12>19=", "12+7", {"numbers": [3, 7, 12], "target": 19})


def test_tool_countdown_scripted_episode():
  env = ToolCountdownEnv(tool=python_tool(runner=_fake_runner))
  ep = _run(env, ["let me check <call>print(12+7)</call> IGNORED", "<answer>12+7</answer>"], PROBLEM)
  assert ep.done and ep.finish == "env" and ep.rewards == (0.0, 1.0) and ep.info["tool_calls"] == 1
  model = [s.text for s in ep.segments if s.source == "model"]
  assert model == ["let me check <call>print(12+7)</call>", "<answer>12+7</answer>"]  # cut at the stop string
  assert ep.segments[2].text == "<output>yyyyyyyyyyy\n</output>\n" and ep.segments[2].source == "env"
  # the tool output is never trained on
  (row,) = encode_episode(ep, type("T", (), {"bos_id": 1, "encode": lambda self, s: [ord(c) for c in s]})())
  trained = "".join(chr(t) for t in row.tokens[row.loss_mask])
  assert trained == "".join(model)


def test_tool_countdown_bad_input_is_an_observation():
  env = ToolCountdownEnv(tool=python_tool(runner=_fake_runner))
  ep = _run(env, ["<call>print(1)", "nothing", "<answer>3*7</answer>"], PROBLEM, max_turns=5)
  assert ep.segments[2].text == "<output>error: <call> without </call></output>\n"
  assert "error: write <call>" in ep.segments[4].text
  assert ep.done and ep.rewards == (0.0, 0.0, 0.0)  # a wrong answer ends the episode with 0
  ep = _run(env, ["<answer>7+12+3</answer>"], PROBLEM)  # 22, not 19
  assert ep.rewards == (0.0,)
  with pytest.raises(ValueError, match="CountdownTask problem"):
    env.reset(Problem("x", "y"), 0)


def test_void_turn_filter_counts_the_environments_void_turns():
  """One definition: ``void_turn(**VOID_TURN_PATTERNS)`` calls a turn void exactly when ``step`` answers it with
  the void-turn reminder (``info["void"]``), on texts made of tag fragments: unclosed, nested, empty and
  reversed calls, ``</answer>`` without ``<answer>``, an answer before or after a call, plain text."""
  from rljax.envs import VOID_TURN_PATTERNS, is_void_turn  # pylint: disable=import-outside-toplevel
  from rljax.filters import void_turn  # pylint: disable=import-outside-toplevel
  env = ToolCountdownEnv(tool=python_tool(runner=_fake_runner))
  state, _ = env.reset(PROBLEM, 0)
  parts = ["<call>", "</call>", "<answer>", "</answer>", "12+7", "print(1)", " ", "\n", "<", "call>", "```"]
  rng = np.random.default_rng(0)
  texts = ["", "nothing", "x</answer>", "<call>print(1)", "<call></call>", "<answer></answer>", "</call><call>"]
  texts += ["".join(rng.choice(parts, size=rng.integers(1, 7))) for _ in range(600)]
  env_void = [bool(env.step(state, t).info.get("void")) for t in texts]
  keep, stats = void_turn([[t] for t in texts], **VOID_TURN_PATTERNS)
  assert (~keep).tolist() == env_void == [is_void_turn(t) for t in texts]
  assert 50 < sum(env_void) < len(texts) - 50  # both kinds occur often
  # the generic reading (a closed <call>...</call> block) calls unclosed calls void: the env answers them with
  # a parse error instead
  generic, _ = void_turn([["<call>print(1)"], ["x</answer>"]], code_pattern="<call>.*?</call>")
  assert generic.tolist() == [False, False]
  assert void_turn([["<call>print(1)"], ["x</answer>"]], **VOID_TURN_PATTERNS)[0].tolist() == [True, False]


def test_tool_countdown_solver_wins_every_problem():
  task = CountdownTask()
  env = ToolCountdownEnv(task=task, tool=python_tool(runner=_fake_runner))
  probs = task.problems("train", 8, seed=0)
  config = EpisodeConfig(stop_strings=env.stop_strings)
  eps = [start(env, p, i) for i, p in enumerate(probs)]
  eps = step_batch(env, eps, [f"<answer>{task.solve(p)}</answer>" for p in probs], config)
  assert [e.episode_reward for e in eps] == [1.0] * 8


def test_missing_sandbox_stops_the_run_instead_of_failing_episodes():
  from rljax.sandbox import SandboxUnavailable

  def refuse(code, *, config):
    raise SandboxUnavailable({"landlock_fs": "not in this kernel"})

  env = ToolCountdownEnv(tool=python_tool(runner=refuse))
  with pytest.raises(SandboxUnavailable, match="landlock_fs"):
    _run(env, ["<call>print(1)</call>"], PROBLEM)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is Linux only")
def test_tool_countdown_runs_code_in_the_real_sandbox():
  from rljax.sandbox import SandboxUnavailable, check
  try:
    check(SandboxConfig())
  except SandboxUnavailable as e:
    pytest.skip(f"this host lacks sandbox layers: {e}")
  env = ToolCountdownEnv()
  ep = _run(env, ["<call>print(12+7)</call>", "<call>open('/etc/shadow').read()</call>"], PROBLEM)
  assert ep.segments[2].text == "<output>19\n</output>\n"
  assert "Error" in ep.segments[4].text and not ep.failed


# ----------------------------------------------------------------------------- FrozenLake


BOARD = ("SFF", "FHF", "FFG")


def test_frozenlake_shortest_path_reaches_the_goal():
  env = FrozenLakeEnv(size=4)
  for seed in range(5):
    state, _ = env.reset(None, seed)
    path = shortest_path(state.board)
    ep = _run(env, [a + "\n" for a in path], seed=seed, max_turns=20)
    assert ep.done and ep.finish == "env" and ep.rewards[-1] == 1.0 and ep.turns == len(path)
    assert ep.info["outcome"] == "goal"


def test_frozenlake_rules():
  env = FrozenLakeEnv()
  state, obs = env.reset(BOARD, 0)
  assert obs.endswith("PFF\nFHF\nFFG\nMove (left, down, right, up):\n")
  ep = _run(env, ["up\n", "I go RIGHT\n", "down\n"], BOARD)  # border: stays; then right; then into the hole
  assert ep.state.pos == (1, 1) and ep.info["outcome"] == "hole" and ep.rewards == (0.0, 0.0, 0.0)
  ep = _run(FrozenLakeEnv(invalid_reward=-0.1), ["jump\n"], BOARD)
  assert ep.segments[-1].text.startswith("Invalid action.\nPFF") and ep.rewards == (-0.1,) and not ep.done
  assert shortest_path(BOARD) in (["right", "right", "down", "down"], ["down", "down", "right", "right"])
  assert shortest_path(("SH", "HG")) is None
  for bad in (("SF", "F"), ("SX", "FG"), ("FF", "FG")):
    with pytest.raises(ValueError, match="board"):
      env.reset(bad, 0)
  with pytest.raises(ValueError, match="slip_prob"):
    FrozenLakeEnv(slip_prob=2.0)


def test_frozenlake_random_boards_and_slips_are_deterministic_in_the_seed():
  env = FrozenLakeEnv(size=5, hole_prob=0.3, slip_prob=0.5)
  assert env.random_board(3) == env.random_board(3) and shortest_path(env.random_board(3)) is not None
  moves = ["right\n", "down\n"] * 4

  def trace(seed):
    return [s.text for s in _run(env, moves, None, seed=seed, max_turns=8).segments]

  assert trace(1) == trace(1)
  slipped = {dataclasses.replace(env, slip_prob=0.0).reset(None, s)[0].board for s in range(4)}
  assert len(slipped) > 1  # different seeds give different boards
  # slips happen at about the configured rate, perpendicular to the intended move
  lake = FrozenLakeEnv(slip_prob=0.5)
  state, _ = lake.reset(("FFFFF", "FFFFF", "FFSFF", "FFFFF", "FFFFG"), 0)
  moved = [lake.step(dataclasses.replace(state, seed=s), "up").info["moved"] for s in range(400)]
  counts = {a: moved.count(a) for a in ("up", "left", "right", "down")}
  assert counts["down"] == 0 and 150 < counts["up"] < 250 and counts["left"] > 60 and counts["right"] > 60


# ----------------------------------------------------------------------------- TicTacToe


def _selfplay(env, pick, seed=0):
  config = EpisodeConfig(stop_strings=env.stop_strings, max_turns=9)
  ep = start(env, None, seed)
  while not ep.done:
    ep = advance(env, ep, f"{pick(ep.state) + 1}\n", config)
  return ep


def test_tictactoe_perfect_play_draws():
  env = TicTacToeEnv()
  ep = _selfplay(env, lambda s: minimax_move(s.board, s.to_move))
  assert ep.finish == "env" and ep.turns == 9 and ep.info["role_rewards"] == {"X": 0.0, "O": 0.0}
  assert ep.roles == ("X", "O") * 4 + ("X",)
  # every segment carries its role: model turns the mover, observations the player addressed next
  model = [s for s in ep.segments if s.source == "model"]
  assert [s.role for s in model] == list(ep.roles)
  assert all(o.role != m.role for m, o in zip(ep.segments[1::2], ep.segments[2::2]) if o.turn < 8)


def test_tictactoe_rows_per_role():
  from rljax.envs import turn_arrays
  ep = _run(TicTacToeEnv(), ["1\n", "4\n", "2\n", "5\n", "3\n"])  # X wins on its third move
  tok = type("T", (), {"bos_id": 1, "encode": lambda self, s: [ord(c) for c in s]})()
  for role, moves in (("X", "1\n2\n3\n"), ("O", "4\n5\n")):
    (row,) = encode_episode(ep, tok, role=role)
    assert "".join(chr(t) for t in row.tokens[row.loss_mask]) == moves
    assert len(row.tokens) == len(encode_episode(ep, tok)[0].tokens)  # the other player's turns stay as context
  t = turn_arrays([ep, ep], 9, role="O")
  np.testing.assert_array_equal(t["episode_rewards"], [-1.0, -1.0])
  np.testing.assert_array_equal(t["turn_valid"][0, :6], [0, 1, 0, 1, 0, 0])
  np.testing.assert_array_equal(turn_arrays([ep], 9, role="X")["turn_rewards"][0, :5], [0, 0, 0, 0, 1])
  running = _run(TicTacToeEnv(), ["1\n"])
  with pytest.raises(ValueError, match="role_rewards"):
    turn_arrays([running], 9, role="X")


def test_tictactoe_perfect_player_never_loses_to_random():
  env = TicTacToeEnv(first="random")
  for seed in range(6):
    rng = np.random.default_rng(seed)

    def pick(s):
      if s.to_move == "X":
        return minimax_move(s.board, "X")
      return int(rng.choice([i for i in range(9) if s.board[i] == "."]))

    ep = _selfplay(env, pick, seed)
    assert ep.info["role_rewards"]["X"] >= 0.0


def test_tictactoe_scripted_win_and_illegal_moves():
  env = TicTacToeEnv()
  ep = _run(env, ["1\n", "4\n", "2\n", "5\n", "cell 3\n"])
  assert ep.info["role_rewards"] == {"X": 1.0, "O": -1.0} and ep.rewards == (0, 0, 0, 0, 1.0)
  assert ep.segments[-1].text == "X wins.\n"
  ep = _run(env, ["5\n", "5\n"])  # O plays a taken cell: O loses
  assert ep.done and ep.info["role_rewards"] == {"X": 1.0, "O": -1.0} and ep.rewards == (0.0, -1.0)
  ep = _run(TicTacToeEnv(illegal="retry"), ["5\n", "none\n", "1\n"])
  assert not ep.done and ep.roles == ("X", "O", "O") and "Illegal move (no cell number)" in ep.segments[4].text
  assert TicTacToeEnv(first="random").reset(None, 4) == TicTacToeEnv(first="random").reset(None, 4)
  assert {TicTacToeEnv(first="random").reset(None, s)[0].to_move for s in range(8)} == {"X", "O"}
  with pytest.raises(ValueError, match="illegal"):
    TicTacToeEnv(illegal="ignore")


def test_minimax_takes_a_win_and_blocks():
  b = tuple("XX.OO....")
  assert minimax_move(b, "X") == 2 and minimax_move(b, "O") == 5  # the quickest win, not a later one
  assert minimax_move(tuple("XX.O....."), "O") == 2


# ----------------------------------------------------------------------------- TicTacToe against fixed opponents

_LINES3 = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]


def _won(board, p):
  return any(all(board[i] == p for i in line) for line in _LINES3)


def _reference_values(board, to_move, me, memo):
  """Independent negamax over the whole game tree (written without rljax): ``me``'s value of ``board`` with
  ``to_move`` to play, +(10 - plies) for a win, -(10 - plies) for a loss, 0 for a draw."""
  key = (board, to_move)
  if key not in memo:
    other = "O" if to_move == "X" else "X"
    plies = 9 - board.count(".")
    if _won(board, other):  # the player who just moved won
      memo[key] = (10 - plies) * (1 if other == me else -1)
    elif "." not in board:
      memo[key] = 0
    else:
      vals = [_reference_values(board[:i] + to_move + board[i + 1:], other, me, memo)
              for i in range(9) if board[i] == "."]
      memo[key] = max(vals) if to_move == me else min(vals)
  return memo[key]


def _reachable(board="." * 9, to_move="X", seen=None):
  """Every position reachable in play where a move is to be made: ``{(board, to_move)}``."""
  seen = set() if seen is None else seen
  if (board, to_move) in seen or _won(board, "X") or _won(board, "O") or "." not in board:
    return seen
  seen.add((board, to_move))
  for i in range(9):
    if board[i] == ".":
      _reachable(board[:i] + to_move + board[i + 1:], "O" if to_move == "X" else "X", seen)
  return seen


def test_minimax_moves_equal_brute_force_on_every_reachable_position():
  from rljax.envs._tictactoe import minimax_moves
  positions = _reachable()
  assert len(positions) == 4520  # positions with a move to make (5478 legal positions minus the finished ones)
  memos = {"X": {}, "O": {}}
  for board, me in positions:
    other = "O" if me == "X" else "X"
    vals = {i: _reference_values(board[:i] + me + board[i + 1:], other, me, memos[me])
            for i in range(9) if board[i] == "."}
    best = max(vals.values())
    assert minimax_moves(tuple(board), me) == [i for i in sorted(vals) if vals[i] == best], board
  assert minimax_moves(tuple("." * 9), "X") == list(range(9))  # every opening draws under perfect play
  with pytest.raises(ValueError, match="finished board"):
    minimax_moves(tuple("XXXOO...."), "O")


def test_random_opponent_is_uniform_over_free_cells_and_seeded():
  from rljax.envs._tictactoe import opponent_move, random_move
  board = tuple("X...O..X.")
  counts = np.bincount([random_move(board, np.random.default_rng(s)) for s in range(6000)], minlength=9)
  assert counts[[0, 4, 7]].sum() == 0 and all(900 < c < 1100 for c in counts[[1, 2, 3, 5, 6, 8]])  # 1000 +- 3 sd
  assert opponent_move(board, "O", "random", 5) == opponent_move(board, "O", "random", 5)
  empty = tuple("." * 9)  # every opening is optimal: the minimax opponent's tie-breaks vary its games
  assert sorted({opponent_move(empty, "X", "minimax", s) for s in range(200)}) == list(range(9))
  assert {opponent_move(tuple("XX.OO...."), "O", "minimax", s) for s in range(50)} == {5}  # its quickest win
  with pytest.raises(ValueError, match="opponent kind"):
    opponent_move(board, "O", "greedy", 0)


def test_minimax_opponent_never_loses_whatever_the_model_plays():
  """Every line of play of the model (all its moves, exhaustively), with the minimax opponent's draws for a few
  seeds: the model never wins; and it draws when it plays minimax itself."""
  from rljax.envs._tictactoe import Opponent, minimax_move
  env = TicTacToeEnv()
  config = EpisodeConfig(stop_strings=env.stop_strings, max_turns=9)
  outcomes = set()

  def play(ep):
    if ep.done:
      assert ep.finish == "env"
      outcomes.add(ep.episode_reward)
      return
    for i in range(9):
      if ep.state.board[i] == ".":
        play(advance(env, ep, f"{i + 1}\n", config))

  for model in ("X", "O"):
    for seed in range(2):
      play(start(env, Opponent("minimax", model), seed))
      ep = start(env, Opponent("minimax", model), seed)
      while not ep.done:
        ep = advance(env, ep, f"{minimax_move(ep.state.board, model) + 1}\n", config)
      assert ep.episode_reward == 0.0 and ep.info["role_rewards"] == {"X": 0.0, "O": 0.0}
  assert outcomes == {0.0, -1.0}


def test_opponent_games_score_the_model_and_record_only_its_turns():
  from rljax.envs._tictactoe import Opponent
  env = TicTacToeEnv()
  state, obs = env.reset(Opponent("random", "O"), 3)
  assert state.board.count("X") == 1 and state.to_move == "O" and obs.endswith(" O to play:\n")
  assert env.reset(Opponent("random", "O"), 3) == (state, obs)  # a pure function of the seed
  ep = _run(env, ["1\n"] * 9, problem=Opponent("random", "X"), seed=0)
  assert ep.roles == ("X",) * ep.turns and ep.done  # the opponent's moves are the environment's, not turns
  ep = _run(env, ["5\n", "5\n"], problem=Opponent("minimax", "X"), seed=0)  # a taken cell: the model loses
  assert ep.rewards == (0.0, -1.0) and ep.info["role_rewards"] == {"X": -1.0, "O": 1.0} and ep.info["illegal"]
  # the model as O, always the lowest free cell, against minimax as X: X wins on its own move
  ep = start(env, Opponent("minimax", "O"), 0)
  config = EpisodeConfig(stop_strings=env.stop_strings, max_turns=9)
  while not ep.done:
    ep = advance(env, ep, f"{ep.state.board.index('.') + 1}\n", config)
  assert ep.episode_reward == -1.0 and ep.info["role_rewards"] == {"X": 1.0, "O": -1.0}
  assert "X wins." in ep.segments[-1].text
  with pytest.raises(ValueError, match="Opponent.kind"):
    Opponent("greedy", "X")
  with pytest.raises(ValueError, match="Opponent.model"):
    Opponent("random", "Z")


def _reference_outcomes_vs_random(policy, model):
  """Exact ``{outcome: probability}`` of ``policy(board) -> cell`` playing ``model`` against a uniformly random
  player (X opens), by enumerating the random player's moves (written without rljax)."""
  out = {1: 0.0, 0: 0.0, -1: 0.0}

  def go(board, to_move, prob):
    other = "O" if to_move == "X" else "X"
    if _won(board, other):
      out[1 if other == model else -1] += prob
      return
    if "." not in board:
      out[0] += prob
      return
    free = [i for i in range(9) if board[i] == "."]
    moves = [policy(board)] if to_move == model else free
    for i in moves:
      go(board[:i] + to_move + board[i + 1:], other, prob / len(moves))

  go("." * 9, "X", 1.0)
  return out


def test_eval_metrics_against_exact_outcome_probabilities():
  """The held-out metrics of a scripted player (the lowest free cell) over 600 seeded games per opponent and role
  agree with the exact probabilities (enumerated) within 4 standard errors; against minimax it never wins."""
  from rljax.envs import get_env_task
  task = get_env_task("tictactoe")
  lowest = lambda board: board.index(".")
  config = task.episode_config
  n = 600
  for model in ("X", "O"):
    problems = [Problem("", "", {"opponent": kind, "model": model, "seed": s})
                for kind in ("random", "minimax") for s in range(n)]
    episodes = []
    for p in problems:
      ep = start(task.env, task.env_problem(p), task.seed(p))
      while not ep.done:
        ep = advance(task.env, ep, f"{lowest(''.join(ep.state.board)) + 1}\n", config)
      episodes.append(ep)
    m = task.eval_metrics(problems, episodes)
    exact = _reference_outcomes_vs_random(lowest, model)
    for name, outcome in (("win", 1), ("draw", 0), ("loss", -1)):
      se = max(np.sqrt(exact[outcome] * (1 - exact[outcome]) / n), 1e-9)
      assert abs(m[f"{name}_vs_random"] - exact[outcome]) < 4 * se + 1e-12, (model, name, m, exact)
      assert sum(m[f"{k}_vs_minimax"] for k in ("win", "draw", "loss")) == pytest.approx(1.0)
    assert m["win_vs_minimax"] == 0.0 and m["illegal"] == 0.0
    success = np.mean([task.success(ep) for ep in episodes])  # greedy_accuracy: the games not lost
    assert success == pytest.approx((1 - m["loss_vs_random"] + 1 - m["loss_vs_minimax"]) / 2)
  assert 0.1 < exact[1] < 0.9  # the lowest cell as O against random: a mixed outcome (the test can tell)


def test_eval_metrics_count_illegal_moves_as_losses_and_skip_absent_opponents():
  from rljax.envs import get_env_task
  task = get_env_task("tictactoe")
  problems = [Problem("", "", {"opponent": "random", "model": "X", "seed": s}) for s in range(4)]
  eps = [_run(task.env, moves, problem=task.env_problem(p), seed=task.seed(p))
         for p, moves in zip(problems, (["x\n"], ["5\n", "5\n"]))]  # no cell number; a taken cell
  for p in problems[2:]:  # two legal games: the lowest free cell
    ep = start(task.env, task.env_problem(p), task.seed(p))
    while not ep.done:
      ep = advance(task.env, ep, f"{ep.state.board.index('.') + 1}\n", task.episode_config)
    eps.append(ep)
  legal = [round(ep.episode_reward) for ep in eps[2:]]
  m = task.eval_metrics(problems, eps)
  assert set(m) == {"win_vs_random", "draw_vs_random", "loss_vs_random", "illegal"}  # no minimax games here
  assert m["illegal"] == 0.5
  for name, o in (("win", 1), ("draw", 0), ("loss", -1)):
    assert m[f"{name}_vs_random"] == (legal.count(o) + 2 * (o == -1)) / 4
  assert [task.success(ep) for ep in eps] == [0.0, 0.0] + [float(o >= 0) for o in legal]
  assert get_env_task("frozenlake").eval_metrics([], []) == {}
  with pytest.raises(ValueError, match="one episode per problem"):
    task.eval_metrics(problems, eps[:3])
