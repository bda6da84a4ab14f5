"""The episode runner: a batch of multi-turn episodes on the jitted sampler, the prefix KV cache kept between turns.

``run_episodes(model, env, problems, ...)`` plays ``B = P * n`` episodes (``n`` per problem: whole groups):

1. ``env.reset`` once per problem (the ``n`` episodes of a group share it); ``generate`` samples every row's
   first turn from ``[bos] + encode(first observation)``;
2. per turn, for each running row: its new tokens are cut after the first stop string (``cut_at_stop``'s rule,
   found on the token ids as ``rljax.sampling.truncate_at_stop_strings`` does) or after the end token, and the
   sampler state is cut back there (``rljax.sampling.rewind``: the tokens after the cut are dropped, never
   trained on, and the environment never sees them); ``advance`` steps the environment on host threads (a
   thread pool over the batch's episodes: the sandbox is a subprocess, so tool calls run in parallel);
3. ``resume`` appends each running row's observation tokens (context: ``prompt_mask``) and samples the next
   turn, reusing the cache: nothing before is recomputed. Finished rows are inactive and left untouched.

The rows that come out are the sampler's own: ``tokens``, ``model_mask`` (= ``completion_mask``: exactly the
model-written tokens, the loss mask), ``logp_behavior`` over them, ``turn_ids`` (``rljax.envs.encode_episode``'s
convention: the 0-based model turn, an observation belongs to the turn that caused it, -1 on the opening prompt
and padding), and per episode the turn rewards, roles, failure / truncation flags and tool calls.

Limits, all ours: an observation longer than ``RunnerConfig.max_obs_tokens`` tokens, or an opening prompt longer
than ``max_prompt_tokens``, ends that episode as *truncated* (counted, never a crash; the cache is sized so that
nothing else can overflow it). The context budget of ``EpisodeConfig`` (windows) is not supported here: a new
window would be a new row with a new prefix, so ``run_episodes`` refuses an ``EpisodeConfig`` with a
``context_budget``. The environment steps run while the host waits: the next decode starts once every running
episode has its observation (the batch decodes in lockstep).
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
from typing import Any, Optional, Sequence

import jax
import numpy as np

from rljax.envs._multiturn import Episode, EpisodeConfig, advance, start
from rljax.envs._transcript import turn_arrays
from rljax.sampling import SamplerConfig, generate, resume, rewind
from rljax.sampling._stop import _first_hit

__all__ = ["RunnerConfig", "EpisodeBatch", "run_episodes"]


def _pow2_buckets(lo: int, hi: int) -> tuple:
  out, b = [], lo
  while b < hi:
    out.append(b)
    b *= 2
  return tuple(out) + (hi,)


@dataclasses.dataclass(frozen=True)
class RunnerConfig:
  """Static sizes of a runner (they fix the compiled sampler's shapes).

  Attributes:
    max_turns: most model turns per episode (``EpisodeConfig.max_turns``).
    max_new_tokens: most tokens per model turn.
    max_prompt_tokens: most tokens of the opening prompt (with the start token).
    max_obs_tokens: most tokens of one observation.
    pad_id: the padding token.
    threads: host threads stepping environments (1: on the calling thread).

  ``sampler_config`` sizes the KV cache for the worst case: the first turn ``bucket(max_prompt_tokens) +
  max_new_tokens`` slots, each later turn ``bucket(1 + max_obs_tokens) + max_new_tokens`` (the batch shares one
  slot counter). ``row_length`` is the longest row: ``max_prompt_tokens + max_turns * max_new_tokens +
  (max_turns - 1) * max_obs_tokens``.
  """
  max_turns: int = 4
  max_new_tokens: int = 32
  max_prompt_tokens: int = 64
  max_obs_tokens: int = 32
  pad_id: int = 0
  threads: int = 8

  def __post_init__(self):
    for name in ("max_turns", "max_new_tokens", "max_prompt_tokens", "max_obs_tokens", "threads"):
      v = getattr(self, name)
      if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"RunnerConfig.{name} must be an int >= 1, got {v!r}")
    if isinstance(self.pad_id, bool) or not isinstance(self.pad_id, int) or self.pad_id < 0:
      raise ValueError(f"RunnerConfig.pad_id must be an int >= 0, got {self.pad_id!r}")

  @property
  def prompt_bucket(self) -> int:
    return 1 << max(self.max_prompt_tokens - 1, 1).bit_length()

  @property
  def obs_bucket(self) -> int:
    return 1 << max(self.max_obs_tokens, 1).bit_length()  # [pending] + observation

  @property
  def sampler_config(self) -> SamplerConfig:
    buckets = tuple(sorted(set(_pow2_buckets(8, self.prompt_bucket) + _pow2_buckets(8, self.obs_bucket))))
    cache = (self.prompt_bucket + self.max_new_tokens
             + (self.max_turns - 1) * (self.obs_bucket + self.max_new_tokens))
    return SamplerConfig(max_new_tokens=self.max_new_tokens, prompt_buckets=buckets, cache_size=cache,
                         pad_id=self.pad_id, return_entropy=True, return_routing=False, decode_phases=1)

  @property
  def row_length(self) -> int:
    return self.max_prompt_tokens + self.max_turns * self.max_new_tokens + (self.max_turns - 1) * self.max_obs_tokens


@dataclasses.dataclass(frozen=True)
class EpisodeBatch:
  """``B = P * n`` played episodes as rows (row ``p * n + i``: episode ``i`` of problem ``p``).

  Attributes:
    episodes: the ``Episode`` records (``B``).
    tokens: ``[B, T]`` int32 (``T = RunnerConfig.row_length``), left-aligned, padded with ``pad_id``.
    prompt_mask: ``[B, T]`` bool: opening prompt and observations (context).
    model_mask: ``[B, T]`` bool: the model-written tokens (the loss mask).
    logp_behavior, entropy: ``[B, T]`` float32, the sampler's, on model tokens (0 elsewhere).
    turn_ids: ``[B, T]`` int32 (see the module docstring).
    turn_rewards, turn_valid: ``[B, M]`` (``M = max_turns``), ``episode_rewards``: ``[B]`` (``turn_arrays``).
    roles: per episode, the role of each model turn.
    failed: ``[B]`` the environment raised. truncated: ``[B]`` an observation or the prompt was too long.
    turns: ``[B]`` int32 model turns played. tool_calls: ``[B]`` int32 (``info["tool_calls"]``, 0 if absent).
    prefilled: tokens fed to the model outside the decode loop (prompts and observations).
  """
  episodes: tuple
  tokens: np.ndarray
  prompt_mask: np.ndarray
  model_mask: np.ndarray
  logp_behavior: np.ndarray
  entropy: np.ndarray
  turn_ids: np.ndarray
  turn_rewards: np.ndarray
  turn_valid: np.ndarray
  episode_rewards: np.ndarray
  roles: tuple
  failed: np.ndarray
  truncated: np.ndarray
  turns: np.ndarray
  tool_calls: np.ndarray
  prefilled: int

  def summary(self) -> dict:
    """Per-episode means for logging: ``turns``, ``tool_calls``, ``failed``, ``truncated``, ``reward``."""
    f = lambda x: float(np.mean(x)) if len(x) else 0.0
    return {"turns": f(self.turns), "tool_calls_per_episode": f(self.tool_calls), "failed": f(self.failed),
            "truncated": f(self.truncated), "reward": f(self.episode_rewards)}


def _turn_cut(ids: list, stop_strings: Sequence[str], eos_id: Optional[int], decode) -> tuple:
  """``(kept token count, action text)`` of one turn's sampled ``ids``: up to and including the end token
  (excluded from the text) or the token completing the first stop string (kept in the text and tokens)."""
  end = len(ids)
  if eos_id is not None and eos_id in ids:
    end = ids.index(eos_id) + 1
  body = ids[:end - 1] if end and eos_id is not None and ids[end - 1] == eos_id else ids[:end]
  j = _first_hit(body, stop_strings, decode) if stop_strings else -1
  if j >= 0:
    return j, decode(body[:j])
  return end, decode(body)


def _tool_calls(ep: Episode) -> int:
  return int(dict(ep.info or {}).get("tool_calls", 0) or 0)


def run_episodes(model, env, problems: Sequence[Any], *, tokenizer, episode_config: EpisodeConfig,
                 runner_config: RunnerConfig, key, n: int = 1, seeds: Optional[Sequence[int]] = None,
                 temperature: float = 1.0, greedy: bool = False, top_k: int = 0, top_p: float = 1.0,
                 policy_version: int = 0, group_ids: Optional[Sequence[int]] = None,
                 pool: Optional[concurrent.futures.Executor] = None) -> EpisodeBatch:
  """Plays ``n`` episodes of ``env`` for each of ``problems`` (see the module docstring).

  Args:
    model: a ``rljax.models.Transformer`` (or ``(graphdef, state)``).
    env: a ``MultiTurnEnv``. problems: ``P`` problems passed to ``env.reset``.
    tokenizer: an ``rljax.data`` tokenizer or a ``Codec`` (``encode``, ``decode``, ``bos_id``, ``eos_id``;
      the start token is put first when the tokenizer has one, as ``Codec.prompt_ids`` does).
    episode_config: stop strings and ``max_turns`` (``<= runner_config.max_turns``); no ``context_budget``.
    runner_config: the static sizes (``RunnerConfig``).
    key: PRNG key (turn ``k`` samples with ``fold_in(key, k)``). n: episodes per problem (group size).
    seeds: ``[P]`` reset seeds (default ``0..P-1``). group_ids: ``[P]`` the sampler's prompt ids (default
      ``0..P-1``; they seed each row's random stream).
    temperature, greedy, top_k, top_p: sampling, as in ``generate``.
    pool: an executor for the environment steps (default: ``runner_config.threads`` threads for this call).
  """
  if episode_config.context_budget is not None:
    raise ValueError("run_episodes does not support EpisodeConfig.context_budget (a new context window would be a "
                     "new row with a new prefix): set context_budget=None (docs/agents.md)")
  rc = runner_config
  if episode_config.max_turns > rc.max_turns:
    raise ValueError(f"EpisodeConfig.max_turns={episode_config.max_turns} exceeds RunnerConfig.max_turns="
                     f"{rc.max_turns} (the cache is sized for the runner's)")
  if not isinstance(n, (int, np.integer)) or n < 1:
    raise ValueError(f"n must be an int >= 1, got {n!r}")
  problems = list(problems)
  p = len(problems)
  if p == 0:
    raise ValueError("problems must not be empty")
  seeds = list(range(p)) if seeds is None else [int(s) for s in seeds]
  if len(seeds) != p:
    raise ValueError(f"seeds must have one seed per problem ({p}), got {len(seeds)}")
  tok = getattr(tokenizer, "tok", tokenizer)
  use_bos = bool(getattr(tok, "has_bos", True))
  eos = getattr(tok, "eos_id", None)
  eos = None if eos is None or eos < 0 else int(eos)
  decode = lambda ids: tok.decode([int(i) for i in ids])
  encode = lambda text: [int(i) for i in tok.encode(text)]
  cfg = rc.sampler_config
  stops = tuple(episode_config.stop_strings)
  b = p * int(n)
  own_pool = pool is None and rc.threads > 1
  if own_pool:
    pool = concurrent.futures.ThreadPoolExecutor(rc.threads)
  mapper = (lambda fn, xs: list(pool.map(fn, xs))) if pool is not None else (lambda fn, xs: [fn(x) for x in xs])
  try:
    firsts = mapper(lambda i: start(env, problems[i], seeds[i]), range(p))
    episodes = [firsts[i // n] for i in range(b)]
    truncated = np.zeros((b,), bool)
    prompts = []
    for i, ep in enumerate(firsts):
      ids = ([int(tok.bos_id)] if use_bos else []) + (encode(ep.context) if not ep.done else [])
      if len(ids) > rc.max_prompt_tokens:
        truncated[i * n:(i + 1) * n] = True
        ids = ids[:1] if ids else [rc.pad_id]
      prompts.append(ids or [rc.pad_id])
    for i in np.flatnonzero(truncated):
      episodes[i] = dataclasses.replace(episodes[i], done=True, finish="truncated")
    running = np.array([not ep.done for ep in episodes])
    prefilled = int(sum(len(x) for x in prompts))
    turn_start = [[] for _ in range(b)]  # per row: position where each turn's model tokens start
    sample = dict(greedy=greedy, temperature=1.0 if greedy else temperature, top_k=top_k, top_p=top_p,
                  stop_tokens=None if eos is None else [eos], policy_version=policy_version)
    gids = None if group_ids is None else np.asarray(group_ids, np.int32)
    _, st = generate(model, prompts, config=cfg, key=jax.random.fold_in(key, 0), n=int(n), prompt_ids=gids,
                     return_state=True, **sample)
    sample.pop("stop_tokens")
    for i in range(b):
      if running[i]:
        turn_start[i].append(len(prompts[i // n]))
    for turn in range(rc.max_turns):
      length = np.asarray(st.length)
      tokens = np.asarray(st.tokens)
      rows = [i for i in range(b) if running[i]]
      cuts = {}
      for i in rows:
        s0 = turn_start[i][-1]
        cuts[i] = _turn_cut(tokens[i, s0:length[i]].tolist(), stops, eos, decode)
      new_len = length.copy()
      for i in rows:
        new_len[i] = turn_start[i][-1] + cuts[i][0]
      if np.any(new_len != length):
        st = rewind(st, new_len, config=cfg)
      stepped = mapper(lambda i: advance(env, episodes[i], cuts[i][1], episode_config), rows)
      appended = [[] for _ in range(b)]
      for i, ep in zip(rows, stepped):
        obs = ""
        if not ep.done and ep.segments and ep.segments[-1].source == "env":
          obs = ep.segments[-1].text
        ids = encode(obs) if obs else []
        if len(ids) > rc.max_obs_tokens:
          ep = dataclasses.replace(ep, done=True, finish="truncated")
          truncated[i], ids = True, []
        episodes[i] = ep
        running[i] = not ep.done
        appended[i] = ids
      if turn + 1 >= rc.max_turns or not running.any():
        break
      for i in range(b):
        if running[i]:
          turn_start[i].append(int(new_len[i]) + len(appended[i]))
      prefilled += int(sum(len(a) for a in appended))
      _, st = resume(model, st, [a if r else [] for a, r in zip(appended, running)], config=cfg,
                     key=jax.random.fold_in(key, turn + 1), active=running, **sample)
    # the rows
    for i in range(b):  # an episode still running here hit max_turns (advance ends it): never the case
      assert not running[i], "internal: episode still running after the last turn"
    t = rc.row_length
    s = np.asarray(st.tokens).shape[1]
    w = min(s, t)
    pad = lambda x, v: np.concatenate([x[:, :w], np.full((b, t - w), v, x.dtype)], 1) if t > w else np.array(x[:, :t])
    tok_arr = pad(np.asarray(st.tokens, np.int32), rc.pad_id)
    pm = pad(np.asarray(st.prompt_mask, bool), False)
    mm = pad(np.asarray(st.completion_mask, bool), False)
    lp = pad(np.asarray(st.logp_behavior, np.float32), 0.0)
    ent = pad(np.asarray(st.entropy, np.float32), 0.0)
    lengths = np.asarray(st.length)
    turn_ids = np.full((b, t), -1, np.int32)
    for i in range(b):  # turn k: its model tokens and the observation it caused (a failing turn included)
      starts = turn_start[i] + [int(lengths[i])]
      for k in range(len(turn_start[i])):
        turn_ids[i, starts[k]:starts[k + 1]] = k
    mm &= turn_ids >= 0  # a row that never played (reset failed, prompt too long): its sampled tokens are out
    arrays = turn_arrays(episodes, rc.max_turns)
    return EpisodeBatch(
        episodes=tuple(episodes), tokens=tok_arr, prompt_mask=pm, model_mask=mm, logp_behavior=lp * mm,
        entropy=ent * mm, turn_ids=turn_ids, turn_rewards=arrays["turn_rewards"], turn_valid=arrays["turn_valid"],
        episode_rewards=arrays["episode_rewards"], roles=tuple(ep.roles for ep in episodes),
        failed=arrays["failed"], truncated=truncated,
        turns=np.asarray([ep.turns for ep in episodes], np.int32),
        tool_calls=np.asarray([_tool_calls(ep) for ep in episodes], np.int32), prefilled=prefilled)
  finally:
    if own_pool:
      pool.shutdown(wait=True)
