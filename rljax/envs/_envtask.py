"""Multi-turn environments as trainable tasks: problems with splits, scripted demonstrations, success.

``get_env_task(name)`` wraps ``ToolCountdownEnv``, ``FrozenLakeEnv`` or ``TicTacToeEnv`` in an ``EnvTask``:

* ``problems(split, num, seed)``: ``rljax.envs.Problem`` records (the RL loop's loader and eval carry them);
  ``env_problem(problem)`` and ``seed(problem)`` are what ``env.reset`` gets;
* ``demonstration_episode(problem, rng)``: a scripted solver's ``Episode`` for the SFT warm start (trained on
  its model segments only, ``encode_episode``): the tool countdown calls Python once with a search over the two
  numbers' expressions that prints the first one hitting the target (the environment binds the numbers and
  the target, ``ToolCountdownEnv.bind_inputs``, so the program is the same for every problem), then answers
  with the printed line;
  FrozenLake walks a shortest path (BFS); TicTacToe plays uniformly random legal moves for both sides (the
  warm start learns the format and the rules, not strength: RL has to find that). The countdown demonstration's
  tool output is computed here (it is our own program's output, never model code; a test checks it equals the
  sandbox's). With ``demo_tool_prob < 1`` a countdown demonstration is, with probability ``1 - demo_tool_prob``,
  a *direct* answer without the tool instead: the two numbers in the given order joined by a random one of
  ``+ - *`` (a plausible guess, right in about a third of problems). The warm-started policy then calls the
  tool on some episodes only, and RL has a choice to learn (ours, for the demo: ReTool's cold start is all
  tool-integrated);
* ``success(episode)``: the held-out metric: the target reached (countdown), the goal reached (FrozenLake); for
  TicTacToe, a self-play game played to its end without an illegal move, and a held-out game against a fixed
  opponent not lost (won or drawn);
* ``eval_metrics(problems, episodes)``: more held-out metrics of greedy episodes (``eval/<name>``). TicTacToe's
  test split is games against fixed opponents played by the environment (``Opponent``: a uniformly random
  player and a minimax player with random tie-breaks, the model playing X and O in turn, one seed each):
  ``win_vs_random``, ``draw_vs_random``, ``loss_vs_random`` and the same ``_vs_minimax`` (an illegal move is a
  loss), and ``illegal`` (the share of games lost by an illegal move). Other tasks: none;
* ``roles``: the self-play roles (TicTacToe: ``("X", "O")``, one training row per role, ``task_id`` = the role's
  index, ``num_tasks`` = the number of roles), else ``()``.

The countdown problems are ``CountdownTask(num_numbers=2, max_number=9)`` by default: small enough that a
~100k-parameter model can learn the call and the answer on a CPU. Ours, not a paper's.
"""
from __future__ import annotations

import dataclasses
import zlib
from typing import Any, Optional

import numpy as np

from rljax.envs._countdown import CountdownTask
from rljax.envs._frozenlake import FrozenLakeEnv, shortest_path
from rljax.envs._multiturn import Episode, EpisodeConfig, advance, start
from rljax.envs._task import Problem, check_split, sample_split
from rljax.envs._tictactoe import OPPONENTS, ROLES, Opponent, TicTacToeEnv
from rljax.envs._tool_countdown import ToolCountdownEnv

__all__ = ["EnvTask", "ENV_TASK_NAMES", "get_env_task", "search_code", "search_output"]

ENV_TASK_NAMES = ("tool_countdown", "frozenlake", "tictactoe")


def search_code() -> str:
  """The demonstration's tool call body (the environment binds ``n``, the numbers, and ``t``, the target:
  ``ToolCountdownEnv.bind_inputs``): prints the first ``x op y`` (both orders of the two numbers, ``op`` in
  ``+ - *``) that equals ``t``."""
  return "print(next(e for e in[f'{x}{o}{y}'for x,y in(n,n[::-1])for o in'+-*']if eval(e)==t))"


def search_output(numbers, target) -> str:
  """What ``search_code()`` prints for these inputs (computed here, not run). Raises ``ValueError`` when no
  ``x op y`` equals ``target`` (the program would fail; ``CountdownTask(num_numbers=2)`` targets always have one)."""
  a, b = numbers[0], numbers[1]
  ops = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y}
  hit = next((f"{x}{o}{y}\n" for x, y in ((a, b), (b, a)) for o in "+-*" if ops[o](x, y) == target), None)
  if hit is None:
    raise ValueError(f"no x op y over the numbers {list(numbers)} equals the target {target}")
  return hit


@dataclasses.dataclass(frozen=True)
class EnvTask:
  """A multi-turn environment as a task (see the module docstring).

  Attributes:
    name: one of ``ENV_TASK_NAMES``. env: the environment. max_turns: most model turns per episode.
    countdown: the problem source of ``tool_countdown``.
    demo_tool_prob: ``tool_countdown`` only: the probability that a demonstration calls the tool (else it
      answers directly), in [0, 1].
    context_budget: most characters of context the model is shown (``EpisodeConfig.context_budget``; over it the
      environment's ``fit_context`` starts a new window); None: unlimited.
  """
  name: str
  env: Any
  max_turns: int = 4
  countdown: Optional[CountdownTask] = None
  demo_tool_prob: float = 1.0
  context_budget: Optional[int] = None

  def __post_init__(self):
    p = self.demo_tool_prob
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
      raise ValueError(f"EnvTask.demo_tool_prob must be in [0, 1], got {self.demo_tool_prob!r}")
    if self.name != "tool_countdown" and self.demo_tool_prob != 1.0:
      raise ValueError(f"EnvTask.demo_tool_prob must be 1.0 (unset) for {self.name!r}: only tool_countdown's "
                       f"demonstrations call a tool, got {self.demo_tool_prob!r}")

  @property
  def roles(self) -> tuple:
    return ("X", "O") if self.name == "tictactoe" else ()

  @property
  def num_tasks(self) -> Optional[int]:
    """Self-play: the number of roles (each row's ``task_id`` is its role's index, the key of a role-conditioned
    baseline such as SPIRAL's RAE, ``role_ema_baseline``); else None."""
    return len(self.roles) or None

  @property
  def episode_config(self) -> EpisodeConfig:
    return EpisodeConfig(stop_strings=tuple(self.env.stop_strings), max_turns=self.max_turns,
                         context_budget=self.context_budget)

  def problems(self, split: str, num: int, seed: int) -> list:
    check_split(split)
    if self.name == "tool_countdown":
      return self.countdown.problems(split, num, seed)
    if self.name == "frozenlake":
      def draw(rng):
        s = int(rng.integers(1 << 30))
        board = self.env.random_board(s)
        path = shortest_path(board)
        return "".join(board), Problem(prompt="/".join(board), answer=" ".join(path), meta={"board": list(board)})
      return sample_split(draw, split, num, seed, 0.1)
    if split == "train":  # self-play: every game starts empty
      return [Problem(prompt="tictactoe", answer="", meta={}) for _ in range(num)]
    # held-out: games against the environment's fixed opponents; any prefix is balanced over opponent and role
    kinds = [(k, r) for k in OPPONENTS for r in ROLES]
    return [Problem(prompt=f"tictactoe vs {kinds[i % 4][0]} as {kinds[i % 4][1]} #{i // 4}", answer="",
                    meta={"opponent": kinds[i % 4][0], "model": kinds[i % 4][1], "seed": seed * 100_003 + i // 4})
            for i in range(num)]

  def env_problem(self, problem: Problem) -> Any:
    if self.name == "frozenlake":
      return tuple(problem.meta["board"])
    if self.name == "tictactoe":
      m = problem.meta
      return Opponent(m["opponent"], m["model"]) if "opponent" in m else None
    return problem if self.name == "tool_countdown" else None

  def seed(self, problem: Problem) -> int:
    return int(problem.meta.get("seed", 0)) if self.name == "tictactoe" else 0

  def demonstration_episode(self, problem: Problem, rng: Optional[np.random.Generator] = None) -> Episode:
    """The scripted solver's episode (see the module docstring). ``rng`` draws the countdown's tool-or-direct
    choice and the direct guess's operator (default: a generator seeded by the problem's prompt, so a problem
    always gets the same demonstration); the other environments' solvers are deterministic."""
    cfg = self.episode_config
    if self.name == "tool_countdown":
      nums, target = problem.meta["numbers"], problem.meta["target"]
      if self.demo_tool_prob < 1.0:
        rng = np.random.default_rng(zlib.crc32(problem.prompt.encode())) if rng is None else rng
        if rng.random() >= self.demo_tool_prob:  # a direct answer: a plausible guess, no tool
          return advance(self.env, start(self.env, problem, 0),
                         f"<answer>{nums[0]}{'+-*'[int(rng.integers(3))]}{nums[1]}</answer>", cfg)
      out = search_output(nums, target)
      env = dataclasses.replace(self.env, tool=lambda code: out)  # our program's known output
      ep = start(env, problem, 0)
      ep = advance(env, ep, f"<call>{search_code()}</call>", cfg)
      return advance(env, ep, f"<answer>{out.strip()}</answer>", cfg)
    ep = start(self.env, self.env_problem(problem), self.seed(problem))
    if self.name == "frozenlake":
      for move in shortest_path(tuple(problem.meta["board"])):
        ep = advance(self.env, ep, f"{move}\n", cfg)
      return ep
    rng = np.random.default_rng(0) if rng is None else rng
    while not ep.done:  # uniformly random legal moves, both sides
      free = [i for i, c in enumerate(ep.state.board) if c == "."]
      ep = advance(self.env, ep, f"{free[int(rng.integers(len(free)))] + 1}\n", cfg)
    return ep

  def success(self, ep: Episode) -> float:
    if ep.failed:
      return 0.0
    if self.name == "tictactoe":
      legal = ep.done and ep.finish == "env" and not dict(ep.info).get("illegal", False)
      if getattr(ep.state, "opponent", None) is not None:  # against a fixed opponent: not lost
        return float(legal and ep.episode_reward >= 0.0)
      return float(legal)
    return float(ep.episode_reward >= 1.0)

  def eval_metrics(self, problems, episodes) -> dict:
    """Held-out metrics beyond ``success`` over greedy ``episodes`` of ``problems`` (see the module docstring):
    TicTacToe's win / draw / loss rates against each opponent present, and ``illegal``; else ``{}``."""
    if len(problems) != len(episodes):
      raise ValueError(f"eval_metrics needs one episode per problem, got {len(episodes)} for {len(problems)}")
    if self.name != "tictactoe":
      return {}
    out, illegal, n = {}, 0, 0
    for kind in OPPONENTS:
      games = [ep for p, ep in zip(problems, episodes) if p.meta.get("opponent") == kind]
      if not games:
        continue
      # the model's outcome: its reward at the end; a failed or unfinished game counts as a loss
      outcome = [round(ep.episode_reward) if ep.done and ep.finish == "env" and not ep.failed else -1 for ep in games]
      for name, value in (("win", 1), ("draw", 0), ("loss", -1)):
        out[f"{name}_vs_{kind}"] = float(np.mean([o == value for o in outcome]))
      illegal += sum(bool(dict(ep.info).get("illegal", False)) for ep in games)
      n += len(games)
    if n:
      out["illegal"] = illegal / n
    return out

  def corpus(self) -> list:
    """Texts for a character tokenizer: demonstrations of a few problems and the environment's messages."""
    texts = []
    for p in self.problems("train", 8, 0):
      texts += [s.text for w in self.demonstration_episode(p).windows for s in w]
    extra = ("Invalid action.\nIllegal move (no cell number): X loses.\n<output>error: write <call>code</call> or "
             "<answer>expression</answer></output>\nTraceback (most recent call last): File line Error[timed out]"
             "[limits: ]'\"_#=;!?%&|^~`{}[]abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    return texts + [extra]

  def score(self, completions, problems):
    raise ValueError(f"the {self.name} task is multi-turn: its episodes are scored by the environment "
                     "(run_episodes), not by score(completions)")

  def demonstration(self, problem, rng):
    raise ValueError(f"the {self.name} task is multi-turn: use demonstration_episode(problem)")


def get_env_task(name: str, *, max_turns: Optional[int] = None, tool=None, demo_tool_prob: float = 1.0,
                 context_budget: Optional[int] = None) -> EnvTask:
  """``EnvTask`` by name (``ENV_TASK_NAMES``). ``max_turns`` (default: countdown 3, FrozenLake 6, TicTacToe 9);
  ``tool``: the countdown's Python tool (default: the sandbox, ``python_tool()``); ``demo_tool_prob``: the
  countdown demonstrations' share that call the tool (``EnvTask.demo_tool_prob``); ``context_budget``: most
  characters of context per window (``EnvTask.context_budget``; None: unlimited)."""
  kw = dict(demo_tool_prob=demo_tool_prob, context_budget=context_budget)
  if name == "tool_countdown":
    cd = CountdownTask(num_numbers=2, max_number=9)
    return EnvTask(name, ToolCountdownEnv(task=cd, tool=tool, bind_inputs=True), max_turns or 3, cd, **kw)
  if name == "frozenlake":
    return EnvTask(name, FrozenLakeEnv(size=3, hole_prob=0.2), max_turns or 6, **kw)
  if name == "tictactoe":
    return EnvTask(name, TicTacToeEnv(), max_turns or 9, **kw)
  raise ValueError(f"env task must be one of {list(ENV_TASK_NAMES)}, got {name!r}")
