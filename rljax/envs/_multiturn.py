"""The multi-turn text environment protocol and a host-side episode driver.

An environment (``MultiTurnEnv``) is pure: ``reset(problem, seed) -> (state, first_observation)`` and
``step(state, action_text) -> StepResult(state, observation, reward, done, info)``; the state is an explicit,
immutable value and all randomness comes from the ``seed`` given to ``reset`` (carried in the state). The
driver (``start`` / ``advance`` / ``step_batch``) owns what every environment shares:

* **stop strings** (``EpisodeConfig.stop_strings``): a model turn ends at the first one (kept: the model wrote
  it); text after it is dropped, never shown to the environment nor trained on;
* **a maximum number of turns** (``max_turns``): the episode ends after that many model turns;
* **a context budget** (``context_budget``, measured by ``measure``: characters by default, or tokens with a
  tokenizer's ``len(encode(s))``): when the text the model would see next exceeds it, the environment's
  ``fit_context`` hook (default ``drop_oldest_turns``) returns a shorter context, which starts a new *window*
  (one training row); the carried-over text is context only (never trained on twice);
* **rewards**: ``StepResult.reward`` is the reward of the turn just taken (an environment with only a terminal
  reward returns 0 before the last turn); ``info["role_rewards"]`` at the end gives each role's outcome in a
  game (self-play);
* **bad input**: an environment that raises marks its episode ``failed`` (``error`` says why) and ends it;
  the rest of the batch goes on (``step_batch``). Except ``rljax.sandbox.SandboxUnavailable``: a host that
  cannot run model code safely stops the run rather than failing every episode quietly. Unparseable tool calls are the environment's to turn into an
  error observation (``rljax.envs.parse_call``).

An episode's record is a tuple of windows, each a tuple of ``Segment`` s (``source`` "env" or "model", the 0-based
model ``turn`` it belongs to, -1 for the opening prompt, and the ``role`` that wrote or is addressed).
``rljax.envs.encode_episode`` turns it into training rows. Protocol, conventions and a worked example:
docs/agents.md, "Writing an environment". Our design, after the seeds' multi-turn setups (RAGEN/StarPO-S,
SimpleTIR, SPIRAL); not any one paper's interface.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional, Protocol, Sequence

from rljax.sandbox import SandboxUnavailable

SOURCES = ("env", "model")


@dataclasses.dataclass(frozen=True)
class Segment:
  """One piece of an episode's text.

  Attributes:
    text: the text.
    source: ``"model"`` (written by the policy: trained on) or ``"env"`` (prompt, observation, tool output,
      summary: never trained on).
    turn: 0-based index of the model turn it belongs to (an observation belongs to the turn that caused it);
      -1 for the opening prompt.
    role: who wrote it (model) or whom it addresses (env), e.g. ``"X"``/``"O"`` in a game; ``""`` if one role.
    trainable: False for model text carried into a later window as context (already trained in its own).
  """
  text: str
  source: str
  turn: int
  role: str = ""
  trainable: bool = True

  def __post_init__(self):
    if self.source not in SOURCES:
      raise ValueError(f"Segment.source must be one of {SOURCES}, got {self.source!r}")


@dataclasses.dataclass(frozen=True)
class StepResult:
  """What ``MultiTurnEnv.step`` returns: the new state, the observation shown to the model next (``""`` when
  done and nothing to say), the reward of this turn, whether the episode ended, and free-form ``info``
  (``"role"``: who moves next; ``"role_rewards"``: ``{role: outcome}`` at the end of a game)."""
  state: Any
  observation: str
  reward: float
  done: bool
  info: Mapping[str, Any] = dataclasses.field(default_factory=dict)


class MultiTurnEnv(Protocol):
  """A text environment over many turns (pure; see the module docstring).

  ``reset(problem, seed)`` returns ``(state, first_observation)``; ``step(state, action)`` returns a
  ``StepResult``. Optional: ``role(state) -> str`` (whose turn it is, for games; default ``""``),
  ``fit_context(segments, budget, measure) -> segments`` (default ``drop_oldest_turns``), ``stop_strings``
  (a default for ``EpisodeConfig``).
  """

  def reset(self, problem: Any, seed: int) -> tuple[Any, str]: ...

  def step(self, state: Any, action: str) -> StepResult: ...


@dataclasses.dataclass(frozen=True)
class EpisodeConfig:
  """What the driver enforces for every environment.

  Attributes:
    stop_strings: a model turn ends at the first of these (kept in the turn). ``()``: the sampler's own end.
    max_turns: most model turns per episode (>= 1).
    context_budget: most ``measure(context)`` the model may be shown; ``None``: unlimited.
    measure: ``str -> int`` size of a context (default ``len``: characters; tokens: ``lambda s:
      len(tokenizer.encode(s))``).
  """
  stop_strings: tuple = ()
  max_turns: int = 8
  context_budget: Optional[int] = None
  measure: Callable[[str], int] = len

  def __post_init__(self):
    if isinstance(self.stop_strings, str) or not all(isinstance(s, str) and s for s in self.stop_strings):
      raise ValueError(f"EpisodeConfig.stop_strings must be a tuple of non-empty strings, got {self.stop_strings!r}")
    if not isinstance(self.max_turns, int) or self.max_turns < 1:
      raise ValueError(f"EpisodeConfig.max_turns must be an int >= 1, got {self.max_turns!r}")
    if self.context_budget is not None and (not isinstance(self.context_budget, int) or self.context_budget < 1):
      raise ValueError(f"EpisodeConfig.context_budget must be None or an int >= 1, got {self.context_budget!r}")


@dataclasses.dataclass(frozen=True)
class Episode:
  """One episode's immutable record.

  Attributes:
    state: the environment's state (``None`` once failed).
    windows: tuple of windows, each a tuple of ``Segment`` (a new window starts when the context is fitted).
    rewards: per-turn rewards, ``len == turns``.
    roles: the role of each model turn.
    turns: model turns taken.
    done: ended (by the environment, ``max_turns``, the context budget, or a failure).
    failed: the environment raised; ``error`` says what.
    finish: why it ended: ``""`` (running), ``"env"``, ``"max_turns"``, ``"context"``, ``"failed"``.
    info: the last ``StepResult.info`` (``role_rewards`` for games).
  """
  state: Any
  windows: tuple
  rewards: tuple = ()
  roles: tuple = ()
  turns: int = 0
  done: bool = False
  failed: bool = False
  error: str = ""
  finish: str = ""
  info: Mapping[str, Any] = dataclasses.field(default_factory=dict)

  @property
  def segments(self) -> tuple:
    """The current window (what the model sees next)."""
    return self.windows[-1]

  @property
  def context(self) -> str:
    """The text the model continues on its next turn."""
    return "".join(s.text for s in self.windows[-1])

  @property
  def episode_reward(self) -> float:
    """Sum of the per-turn rewards (the terminal reward is the last turn's)."""
    return float(sum(self.rewards))


def cut_at_stop(text: str, stop_strings: Sequence[str]) -> tuple[str, bool]:
  """``(text up to and including the earliest stop string, True)``, or ``(text, False)`` if none occurs."""
  best = None
  for s in stop_strings:
    i = text.find(s)
    if i >= 0 and (best is None or i + len(s) < best):
      best = i + len(s)
  return (text, False) if best is None else (text[:best], True)


def drop_oldest_turns(segments: Sequence[Segment], budget: int, measure: Callable[[str], int]) -> tuple:
  """Default context hook: keeps the opening prompt (turn -1) and the most recent whole turns that fit in
  ``budget``; everything kept is context only (``trainable=False``). Returns ``()`` if not even the opening
  prompt and the last turn fit (the driver then ends the episode, ``finish="context"``)."""
  head = tuple(s for s in segments if s.turn < 0)
  turns = sorted({s.turn for s in segments if s.turn >= 0})
  keep: tuple = ()
  for t in reversed(turns):
    cand = tuple(s for s in segments if s.turn == t) + keep
    if measure("".join(s.text for s in head + cand)) > budget:
      break
    keep = cand
  if not keep:
    return ()
  return tuple(dataclasses.replace(s, trainable=False) for s in head + keep)


def _role(env, state) -> str:
  fn = getattr(env, "role", None)
  return fn(state) if fn is not None and state is not None else ""


def start(env: MultiTurnEnv, problem: Any, seed: int) -> Episode:
  """Resets ``env``; an environment that raises gives a failed, finished episode (never raises)."""
  try:
    state, obs = env.reset(problem, seed)
    if not isinstance(obs, str):
      raise TypeError(f"reset must return (state, str), got observation {type(obs).__name__}")
  except SandboxUnavailable:
    raise
  except Exception as e:  # pylint: disable=broad-except
    return Episode(None, ((),), done=True, failed=True, error=f"reset: {type(e).__name__}: {e}", finish="failed")
  return Episode(state, ((Segment(obs, "env", -1, _role(env, state)),),))


def _fail(ep: Episode, where: str, e: BaseException) -> Episode:
  return dataclasses.replace(ep, state=None, done=True, failed=True, error=f"{where}: {type(e).__name__}: {e}",
                             finish="failed")


def advance(env: MultiTurnEnv, ep: Episode, action: str, config: EpisodeConfig) -> Episode:
  """One model turn: cut ``action`` at a stop string, step ``env``, record it, enforce ``max_turns`` and the
  context budget. A finished episode is returned unchanged. Never raises for the environment's errors."""
  if ep.done:
    return ep
  if not isinstance(action, str):
    raise ValueError(f"action must be the model's text (str), got {type(action).__name__}")
  text, _ = cut_at_stop(action, config.stop_strings)
  t, role = ep.turns, _role(env, ep.state)
  try:
    res = env.step(ep.state, text)
    if not isinstance(res, StepResult) or not isinstance(res.observation, str):
      raise TypeError(f"step must return a StepResult with a str observation, got {res!r:.80}")
    reward = float(res.reward)
  except SandboxUnavailable:
    raise
  except Exception as e:  # pylint: disable=broad-except
    failed = _fail(ep, f"step (turn {t})", e)
    return dataclasses.replace(failed, windows=ep.windows[:-1] + (ep.segments + (Segment(text, "model", t, role),),))
  new = (Segment(text, "model", t, role),)
  if res.observation:
    new += (Segment(res.observation, "env", t, _role(env, res.state)),)
  finish = "env" if res.done else ("max_turns" if t + 1 >= config.max_turns else "")
  ep = dataclasses.replace(ep, state=res.state, windows=ep.windows[:-1] + (ep.segments + new,),
                           rewards=ep.rewards + (reward,), roles=ep.roles + (role,), turns=t + 1,
                           done=bool(finish), finish=finish, info=dict(res.info))
  if ep.done or config.context_budget is None or config.measure(ep.context) <= config.context_budget:
    return ep
  fit = getattr(env, "fit_context", drop_oldest_turns)
  try:
    fitted = tuple(fit(ep.segments, config.context_budget, config.measure))
  except Exception as e:  # pylint: disable=broad-except
    return _fail(ep, "fit_context", e)
  if not fitted or config.measure("".join(s.text for s in fitted)) > config.context_budget:
    return dataclasses.replace(ep, done=True, finish="context")
  fitted = tuple(dataclasses.replace(s, trainable=False) for s in fitted)
  return dataclasses.replace(ep, windows=ep.windows + (fitted,))


def step_batch(env: MultiTurnEnv, episodes: Sequence[Episode], actions: Sequence[Optional[str]],
               config: EpisodeConfig) -> list:
  """``advance`` each running episode with its action (``None`` or anything for finished ones, which are
  returned unchanged). Episodes are independent: one failing or ending does not affect the others."""
  if len(episodes) != len(actions):
    raise ValueError(f"episodes ({len(episodes)}) and actions ({len(actions)}) differ in length")
  return [ep if ep.done else advance(env, ep, a, config) for ep, a in zip(episodes, actions)]


def batch_summary(episodes: Sequence[Episode]) -> dict:
  """Counts for logging: ``episodes``, ``done``, ``failed`` and ``finish`` reasons, mean ``turns``."""
  out = {"episodes": len(episodes), "done": sum(e.done for e in episodes), "failed": sum(e.failed for e in episodes),
         "mean_turns": float(sum(e.turns for e in episodes)) / max(len(episodes), 1)}
  for reason in ("env", "max_turns", "context", "failed"):
    out[f"finish_{reason}"] = sum(e.finish == reason for e in episodes)
  return out
