"""Multi-turn environments as trainable tasks: problems with splits, scripted demonstrations, success.

``get_env_task(name)`` wraps ``ToolCountdownEnv``, ``FrozenLakeEnv`` or ``TicTacToeEnv`` in an ``EnvTask``:

* ``problems(split, num, seed)``: ``rljax.envs.Problem`` records (the RL loop's loader and eval carry them);
  ``env_problem(problem)`` and ``seed(problem)`` are what ``env.reset`` gets;
* ``demonstration_episode(problem, rng)``: a scripted solver's ``Episode`` for the SFT warm start (trained on
  its model segments only, ``encode_episode``): the tool countdown calls Python once with a search over the two
  numbers' expressions that prints the first one hitting the target (the environment binds the numbers and
  the target, ``ToolCountdownEnv.bind_inputs``, so the program is the same for every problem), then answers
  with the printed line;
  FrozenLake walks a shortest path (BFS); TicTacToe plays minimax for both sides. The countdown demonstration's
  tool output is computed here (it is our own program's output, never model code; a test checks it equals the
  sandbox's). With ``demo_tool_prob < 1`` a countdown demonstration is, with probability ``1 - demo_tool_prob``,
  a *direct* answer without the tool instead: the two numbers in the given order joined by a random one of
  ``+ - *`` (a plausible guess, right in about a third of problems). The warm-started policy then calls the
  tool on some episodes only, and RL has a choice to learn (ours, for the demo: ReTool's cold start is all
  tool-integrated);
* ``success(episode)``: the held-out metric: the target reached (countdown), the goal reached (FrozenLake), a
  game played to its end without an illegal move (TicTacToe: under minimax play both sides draw);
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
from rljax.envs._tictactoe import TicTacToeEnv, minimax_move
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
    return [Problem(prompt="tictactoe", answer="", meta={}) for _ in range(num)]  # every game starts empty

  def env_problem(self, problem: Problem) -> Any:
    if self.name == "frozenlake":
      return tuple(problem.meta["board"])
    return problem if self.name == "tool_countdown" else None

  def seed(self, problem: Problem) -> int:
    del problem
    return 0

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
    while not ep.done:
      ep = advance(self.env, ep, f"{minimax_move(ep.state.board, ep.state.to_move) + 1}\n", cfg)
    return ep

  def success(self, ep: Episode) -> float:
    if ep.failed:
      return 0.0
    if self.name == "tictactoe":
      return float(ep.done and ep.finish == "env" and not dict(ep.info).get("illegal", False))
    return float(ep.episode_reward >= 1.0)

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
