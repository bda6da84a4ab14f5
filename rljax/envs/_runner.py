"""The episode runner: a batch of multi-turn episodes on the jitted sampler, the prefix KV cache kept between turns.

``run_episodes(model, env, problems, ...)`` plays ``B = P * n`` episodes (``n`` per problem: whole groups):

1. ``env.reset`` once per problem (the ``n`` episodes of a group share it); ``generate`` samples every row's
   first turn from ``[bos] + encode(first observation)``;
2. per turn, for each running row: its new tokens are cut after the first stop string (``cut_at_stop``'s rule,
   found on the token ids as ``rljax.sampling.truncate_at_stop_strings`` does), after the end token or after
   ``max_new_tokens``, and the sampler state is cut back there (``rljax.sampling.rewind``: the tokens after the
   cut are dropped, never trained on, and the environment never sees them); ``advance`` steps the environment on
   host threads (a thread pool over the batch's episodes: the sandbox is a subprocess, so tool calls run in
   parallel);
3. ``resume`` appends each running row's observation tokens (context: ``prompt_mask``) and samples the next
   turn, reusing the cache: nothing before is recomputed. Finished rows are inactive and left untouched.

Two schedules (``RunnerConfig.chunk_tokens``), same episodes. **Lockstep** (0): one call decodes a whole turn of
every running row; the next call starts once every environment has stepped. **Overlapped** (``k``): a call
decodes at most ``k`` tokens per row; after each call, the rows whose turn ended (end token, stop string, or
``max_new_tokens``, checked on the tokens so far) are cut and their environment steps are submitted to the pool,
the other rows keep decoding in the next call. A row whose observation is ready starts its next turn when no row
is decoding (``rejoin="turn"``: the batch's turn boundary) or at the next call (``"chunk"``: rows run turns out of
step, through ``resume``'s ``active`` mask; a few joining rows are prefilled alone with ``feed_rows``). The host
waits for an environment only when no row is left to decode. Each
row samples turn ``t`` with ``fold_in(key, t)`` (``resume`` takes one key per row), so a row's tokens depend on
its own prefix and turn, not on which call decoded them: both schedules give the same episodes, up to float
summation order (the cache slots a row's keys occupy depend on timing). Masked slots left by rows that sat out
a call are reclaimed with ``rljax.sampling.compact`` when the next call would not fit.

The rows that come out are the sampler's own: ``tokens``, ``model_mask`` (= ``completion_mask``: exactly the
model-written tokens, the loss mask), ``logp_behavior`` over them, ``turn_ids`` (``rljax.envs.encode_episode``'s
convention: the 0-based model turn, an observation belongs to the turn that caused it, -1 on the opening prompt
and padding), and per episode the turn rewards, roles, failure / truncation flags and tool calls.

Context windows (``EpisodeConfig.context_budget``): when ``advance`` moves an episode to a new window (the
environment's ``fit_context``), the row's window so far becomes a row of its own (with the observation that ends
it, as ``encode_episode`` has it), and the sampler row starts over from the new window's prefix: ``[bos]`` and
each of the window's segments encoded on its own (``rljax.sampling.restart``, then ``feed_rows``: a prefill of
that row only, counted in ``prefilled``; the other rows keep their caches). The model then sees exactly the text of
the ``advance`` path, and behaviour log-probs stay on the tokens the model wrote in that window; the carried-over
text is context.

Limits, all ours: an observation longer than ``RunnerConfig.max_obs_tokens`` tokens (the one that ends a window
included), or an opening prompt (or a new window's prefix) longer than ``max_prompt_tokens``, ends that episode as
*truncated* (counted, never a crash; the cache is sized so that nothing else can overflow it). So a window's row
fits in ``row_length`` tokens, and an episode's windows together in ``packed_row_length`` (``pack_windows``).
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import time
from typing import Any, Optional, Sequence

import jax
import numpy as np

from rljax.envs._multiturn import Episode, EpisodeConfig, advance, start
from rljax.envs._transcript import turn_arrays
from rljax.sampling import (SamplerConfig, compact, feed_rows, first_stop_hit, generate, restart, resume,
                            rewind)

__all__ = ["RunnerConfig", "EpisodeBatch", "run_episodes"]


REJOIN = ("turn", "chunk")


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
    chunk_tokens: the schedule. 0: lockstep (one sampler call decodes a whole turn of every running row, then
      every environment steps, then the next call). ``k >= 1``: overlapped (each call decodes at most ``k``
      tokens; a row whose turn ended steps its environment on the thread pool while the other rows decode on).
    rejoin: when an overlapped row whose observation is ready starts its next turn. ``"turn"``: once no row is
      decoding (the batch's turn boundary: one prefill call per turn, as lockstep, and the environment steps of
      rows that ended their turn early are hidden behind the others' decoding). ``"chunk"``: at the next call
      (rows run turns out of step; each call in which a row joins prefills a ``[B, bucket]`` chunk for the whole
      batch, so this pays when environment latency is long against that prefill).

  ``sampler_config`` sizes the KV cache. Lockstep, for the worst case: the first turn ``bucket(max_prompt_tokens)
  + max_new_tokens`` slots, each later turn ``bucket(1 + max_obs_tokens) + max_new_tokens`` (the batch shares one
  slot counter). Overlapped, the number of calls depends on timing, so the cache is that size plus room for one
  more call, and is compacted (``rljax.sampling.compact``) when a call would not fit. ``row_length`` is the
  longest row: ``max_prompt_tokens + max_turns * max_new_tokens + (max_turns - 1) * max_obs_tokens``.
  """
  max_turns: int = 4
  max_new_tokens: int = 32
  max_prompt_tokens: int = 64
  max_obs_tokens: int = 32
  pad_id: int = 0
  threads: int = 8
  chunk_tokens: int = 0
  rejoin: str = "turn"

  def __post_init__(self):
    for name in ("max_turns", "max_new_tokens", "max_prompt_tokens", "max_obs_tokens", "threads"):
      v = getattr(self, name)
      if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"RunnerConfig.{name} must be an int >= 1, got {v!r}")
    for name in ("pad_id", "chunk_tokens"):
      v = getattr(self, name)
      if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"RunnerConfig.{name} must be an int >= 0, got {v!r}")
    if self.rejoin not in REJOIN:
      raise ValueError(f"RunnerConfig.rejoin must be one of {REJOIN}, got {self.rejoin!r}")

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
    new = self.max_new_tokens
    if self.chunk_tokens:
      # a call decodes <= k tokens; bucket 1: a call where no row appends anything feeds only the pending tokens.
      # Room for one more call after a compaction: a row holds <= row_length + k - 1 tokens (a chunk can run
      # past the turn's max_new_tokens before the host cuts it).
      new = min(self.chunk_tokens, self.max_new_tokens)
      buckets = (1,) + buckets
      cache = max(cache, self.row_length + new - 1) + self.obs_bucket + new
    return SamplerConfig(max_new_tokens=new, prompt_buckets=buckets, cache_size=cache,
                         pad_id=self.pad_id, return_entropy=True, return_routing=False, decode_phases=1)

  @property
  def row_length(self) -> int:
    return self.max_prompt_tokens + self.max_turns * self.max_new_tokens + (self.max_turns - 1) * self.max_obs_tokens

  @property
  def packed_row_length(self) -> int:
    """The longest episode with its context windows packed into one row (``rljax.envs.pack_windows``):
    ``row_length + (max_turns - 1) * max_prompt_tokens``. An episode has at most ``max_turns`` windows (a new one
    starts after a turn), each window's prefix is at most ``max_prompt_tokens`` tokens, and every model turn and
    observation lies in exactly one window's row (carried-over text is in the next window's prefix)."""
    return self.row_length + (self.max_turns - 1) * self.max_prompt_tokens


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
    sampler_calls: ``generate`` / ``resume`` calls. compactions: ``compact`` calls.
    row_episode, row_window: ``[R]`` int32, the episode and window of each row. Row ``b < B`` is episode ``b``'s
      last window (its only one without a context budget, ``R = B``); rows ``B, B + 1, ...`` are the earlier
      windows of episodes that moved to a new window (``EpisodeConfig.context_budget``). The row arrays above are
      ``[R, T]``; the per-episode ones stay ``[B]`` / ``[B, M]`` (index them with ``row_episode``).
    row_lengths: ``[R]`` int32, each row's tokens before its padding.
    segment_ids: ``[R, T]`` int32 or None: the attention packing of rows that hold several windows
      (``rljax.envs.pack_windows``: window ``w`` of the row's episode has id ``w + 1``, padding 0); None: one
      sequence per row (the runner's own rows).
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
  sampler_calls: int = 0
  compactions: int = 0
  row_episode: Optional[np.ndarray] = None
  row_window: Optional[np.ndarray] = None
  row_lengths: Optional[np.ndarray] = None
  segment_ids: Optional[np.ndarray] = None

  def summary(self) -> dict:
    """Per-episode means for logging: ``turns``, ``tool_calls``, ``failed``, ``truncated``, ``reward``."""
    f = lambda x: float(np.mean(x)) if len(x) else 0.0
    return {"turns": f(self.turns), "tool_calls_per_episode": f(self.tool_calls), "failed": f(self.failed),
            "truncated": f(self.truncated), "reward": f(self.episode_rewards)}


def _turn_end(ids: list, stop_strings: Sequence[str], end_ids, decode, max_new: int):
  """``(kept token count, action text)`` if the turn's tokens sampled so far, ``ids[:max_new]``, end it, else
  ``None``. It ends after the first end token (one of ``end_ids``; excluded from the text), after the token
  completing the first stop string (kept in the text and tokens; the smallest such prefix, as
  ``truncate_at_stop_strings`` finds it, so a prefix of the turn gives the cut of the whole turn), or at
  ``max_new`` tokens."""
  ids = ids[:max_new]
  end = next((k + 1 for k, i in enumerate(ids) if i in end_ids), None)
  body = ids if end is None else ids[:end - 1]
  j = first_stop_hit(body, stop_strings, decode) if stop_strings else -1
  if j >= 0:
    return j, decode(body[:j])
  if end is not None or len(ids) >= max_new:
    return len(ids) if end is None else end, decode(body)
  return None


def _turn_cut(ids: list, stop_strings: Sequence[str], end_ids, decode) -> tuple:
  """``(kept token count, action text)`` of one whole turn's sampled ``ids`` (``_turn_end``'s rule)."""
  return _turn_end(ids, stop_strings, end_ids, decode, len(ids))


def _turn_ids(prefix_tids: list, turn_start: list, turn_base: int, length: int) -> list:
  """Turn ids of a window row's first ``length`` tokens: its prefix's, then turn ``turn_base + k`` on the ``k``-th
  turn of the window (its model tokens and the observation it caused, a failing turn included)."""
  out = list(prefix_tids[:length])
  starts = list(turn_start) + [length]
  for k in range(len(turn_start)):
    out += [turn_base + k] * (starts[k + 1] - starts[k])
  return out + [-1] * (length - len(out))


def _window_prefix(window, encode, bos: list) -> tuple:
  """``(ids, turn ids)`` of a new window's prefix: ``bos`` then each segment encoded on its own (as
  ``encode_episode`` does: segment boundaries are token boundaries), each token with its segment's turn."""
  ids, tids = list(bos), [-1] * len(bos)
  for seg in window:
    e = encode(seg.text)
    ids += e
    tids += [seg.turn] * len(e)
  return ids, tids


def _finished_window(st, i: int, length: int, ep: Episode, prefix_tids, turn_start, turn_base: int, window: int,
                     encode) -> dict:
  """Row ``i``'s window that ``ep`` just left, as 1-D arrays: the sampler's tokens up to ``length`` and the last
  turn's observation, which the window's record ends with (context: it is in ``ep.windows[window]``)."""
  last = ep.windows[window][-1]
  obs = encode(last.text) if last.source == "env" and last.turn == ep.turns - 1 else []
  get = lambda name, dtype: np.asarray(getattr(st, name))[i, :length].astype(dtype)
  model = get("completion_mask", bool)
  tids = _turn_ids(prefix_tids, turn_start, turn_base, length) + [ep.turns - 1] * len(obs)
  pad0 = lambda x, v: np.concatenate([x, np.full((len(obs),), v, x.dtype)])
  return {"episode": i, "window": window,
          "tokens": np.concatenate([get("tokens", np.int32), np.asarray(obs, np.int32)]),
          "prompt_mask": pad0(get("prompt_mask", bool), True), "model_mask": pad0(model, False),
          "logp_behavior": pad0(get("logp_behavior", np.float32) * model, 0.0),
          "entropy": pad0(get("entropy", np.float32) * model, 0.0), "turn_ids": np.asarray(tids, np.int32)}


def _tool_calls(ep: Episode) -> int:
  return int(dict(ep.info or {}).get("tool_calls", 0) or 0)


def _done_future(fn) -> concurrent.futures.Future:
  """``fn()`` run now, as a finished future (no pool: the calling thread steps the environments)."""
  fut = concurrent.futures.Future()
  try:
    fut.set_result(fn())
  except BaseException as e:  # pylint: disable=broad-except
    fut.set_exception(e)
  return fut


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
      the start token is put first when the tokenizer's plain prompts have one, ``has_bos``). A turn ends at
      the Codec's ``stop_ids`` (a tokenizer: at ``eos_id``).
    episode_config: stop strings, ``max_turns`` (``<= runner_config.max_turns``) and the context budget.
    runner_config: the static sizes and the schedule (``RunnerConfig``).
    key: PRNG key (turn ``k`` of every row samples with ``fold_in(key, k)``, whichever call decodes it).
    n: episodes per problem (group size).
    seeds: ``[P]`` reset seeds (default ``0..P-1``). group_ids: ``[P]`` the sampler's prompt ids (default
      ``0..P-1``; they seed each row's random stream).
    temperature, greedy, top_k, top_p: sampling, as in ``generate``.
    pool: an executor for the environment steps (default: ``runner_config.threads`` threads for this call).
  """
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
  end_ids = frozenset(int(i) for i in getattr(tokenizer, "stop_ids", None) or ([] if eos is None else [eos]))
  decode = lambda ids: tok.decode([int(i) for i in ids])
  encode = lambda text: [int(i) for i in tok.encode(text)]
  cfg = rc.sampler_config
  windows = episode_config.context_budget is not None
  if windows:  # after a compaction: a row, a window's prefix fed alone (feed_rows), then a call
    cfg = dataclasses.replace(cfg, cache_size=max(cfg.cache_size, rc.row_length + rc.prompt_bucket + rc.obs_bucket
                                                  + 2 * cfg.max_new_tokens))
  overlap = rc.chunk_tokens > 0
  stops = tuple(episode_config.stop_strings)
  b = p * int(n)
  own_pool = pool is None and rc.threads > 1
  if own_pool:
    pool = concurrent.futures.ThreadPoolExecutor(rc.threads)
  mapper = (lambda fn, xs: list(pool.map(fn, xs))) if pool is not None else (lambda fn, xs: [fn(x) for x in xs])
  submit = pool.submit if pool is not None else _done_future
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
    turn_start = [[] for _ in range(b)]  # per row: position where each turn's model tokens start (this window)
    turn_base = np.zeros((b,), np.int32)  # per row: the episode's turn index of the window's first model turn
    prefix_tids = [[-1] * len(prompts[i // n]) for i in range(b)]  # per row: turn ids of the window's prefix
    row_window = np.zeros((b,), np.int32)  # per row: the window of its episode the sampler row holds
    done_windows = []  # the earlier windows of episodes that moved to a new one (EpisodeRow-like dicts)
    refits = {}  # row -> (prefix ids, their turn ids) of its new window
    sample = dict(greedy=greedy, temperature=1.0 if greedy else temperature, top_k=top_k, top_p=top_p,
                  stop_tokens=sorted(end_ids) or None, policy_version=policy_version)
    gids = None if group_ids is None else np.asarray(group_ids, np.int32)
    t0 = time.perf_counter()
    _, st = generate(model, prompts, config=cfg, key=jax.random.fold_in(key, 0), n=int(n), prompt_ids=gids,
                     return_state=True, **sample)
    length = np.asarray(st.length)
    call_s = time.perf_counter() - t0  # the last call's wall time
    sample.pop("stop_tokens")
    calls, compactions = 1, 0
    turn_keys = jax.vmap(lambda t: jax.random.fold_in(key, t))(np.arange(rc.max_turns, dtype=np.int32))
    for i in range(b):
      if running[i]:
        turn_start[i].append(len(prompts[i // n]))
    decoded = running.copy()  # rows the last sampler call decoded
    stepping = {}  # row -> the future of its environment step
    joining = {}  # row -> the observation ids it resumes with
    while True:
      # 1. the rows whose turn ended in the last call: cut back to the turn's end, step their environments
      tokens = np.asarray(st.tokens)
      new_len = length.copy()
      for i in np.flatnonzero(decoded):
        s0 = turn_start[i][-1]
        end = _turn_end(tokens[i, s0:length[i]].tolist(), stops, end_ids, decode, rc.max_new_tokens)
        if end is not None:
          new_len[i] = s0 + end[0]
          stepping[i] = submit(functools.partial(advance, env, episodes[i], end[1], episode_config))
      if np.any(new_len != length):
        st = rewind(st, new_len, config=cfg)
      length = new_len
      still = decoded & ~np.isin(np.arange(b), list(stepping))  # rows continuing their turn
      # 2. the observations that are ready: lockstep, or no row decoding with rejoin="turn": all of them; no row
      # decoding with rejoin="chunk": the first, and those ready within one more call's time; else those done
      idle = not still.any()
      if stepping:
        if not overlap or (idle and rc.rejoin == "turn"):
          concurrent.futures.wait(list(stepping.values()))
        elif idle and not joining:
          concurrent.futures.wait(list(stepping.values()), return_when=concurrent.futures.FIRST_COMPLETED)
          concurrent.futures.wait(list(stepping.values()), timeout=call_s)
        for i in sorted(i for i, f in stepping.items() if f.done()):
          ep = stepping.pop(i).result()
          if not ep.done and len(ep.windows) > len(episodes[i].windows):  # over budget: a new window
            prefix, tids = _window_prefix(ep.windows[-1], encode, [int(tok.bos_id)] if use_bos else [])
            last = ep.windows[-2][-1]  # the observation that ends the window: the row's, within max_obs_tokens
            ends = len(encode(last.text)) if last.source == "env" and last.turn == ep.turns - 1 else 0
            if not prefix or len(prefix) > rc.max_prompt_tokens or ends > rc.max_obs_tokens:
              ep = dataclasses.replace(ep, done=True, finish="truncated")
              truncated[i] = True
            else:
              done_windows.append(_finished_window(st, i, length[i], ep, prefix_tids[i], turn_start[i],
                                                   turn_base[i], int(row_window[i]), encode))
              refits[i] = (prefix, tids)
            episodes[i] = ep
            running[i] = not ep.done
            if running[i]:
              joining[i] = []
            continue
          obs = ""
          if not ep.done and ep.segments and ep.segments[-1].source == "env":
            obs = ep.segments[-1].text
          ids = encode(obs) if obs else []
          if len(ids) > rc.max_obs_tokens:
            ep = dataclasses.replace(ep, done=True, finish="truncated")
            truncated[i], ids = True, []
          episodes[i] = ep
          running[i] = not ep.done
          if running[i]:
            joining[i] = ids
      join = joining if idle or rc.rejoin == "chunk" else {}  # rejoin="turn": ready rows wait for the others
      if idle and not join:
        if stepping:
          decoded = np.zeros((b,), bool)
          continue
        break
      # 3. the next call: continuing rows decode on, joining rows append their observation (or start their new
      # window: the row starts over and its prefix is fed to it alone) and start a turn
      t0 = time.perf_counter()
      feed = {}  # row -> tokens fed to that row alone (feed_rows) before the call
      new_windows = sorted(i for i in join if i in refits)
      if new_windows:
        st = restart(st, new_windows, [refits[i][0][0] for i in new_windows], config=cfg)
        for i in new_windows:
          (prefix, prefix_tids[i]), turn_start[i] = refits.pop(i), []
          length[i], turn_base[i], row_window[i] = 1, episodes[i].turns, len(episodes[i].windows) - 1
          prefilled += len(prefix)
          if len(prefix) > 1:
            feed[i] = prefix[1:]
      appended = [[] for _ in range(b)]
      for i, ids in join.items():
        turn_start[i].append(int(length[i]) + len(feed.get(i, ())) + len(ids))
        prefilled += len(ids)
        appended[i] = ids
      active = still | np.isin(np.arange(b), list(join))
      joining = {i: v for i, v in joining.items() if i not in join}
      obs_rows = [i for i in join if appended[i]]
      if overlap and 0 < len(obs_rows) <= b // 2:  # a few rows join: prefill only them, then decode
        feed.update({i: appended[i] for i in obs_rows})
        appended = [[] for _ in range(b)]
      lc = cfg.bucket(1 + max(len(a) for a in appended), "appended")
      lf = cfg.bucket(1 + max(len(a) for a in feed.values()), "appended") if feed else 0
      if int(st.slot) + lf + lc + cfg.max_new_tokens > cfg.cache_size:
        st, compactions = compact(st), compactions + 1
      if feed:
        st = feed_rows(model, st, list(feed), list(feed.values()), config=cfg)
      turn = np.asarray([turn_base[i] + max(len(t) - 1, 0) for i, t in enumerate(turn_start)], np.int32)
      _, st = resume(model, st, appended, config=cfg, key=turn_keys[turn], active=active, **sample)
      length = np.asarray(st.length)
      call_s = time.perf_counter() - t0
      calls += 1
      decoded = active
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
    for i in range(b):
      tids = _turn_ids(prefix_tids[i], turn_start[i], int(turn_base[i]), int(lengths[i]))
      turn_ids[i, :min(len(tids), t)] = tids[:t]
    mm &= turn_ids >= 0  # a row that never played (reset failed, prompt too long): its sampled tokens are out
    rows = dict(tokens=tok_arr, prompt_mask=pm, model_mask=mm, logp_behavior=lp * mm, entropy=ent * mm,
                turn_ids=turn_ids)
    for k in rows:  # the earlier windows: rows b, b + 1, ...
      fill = {"tokens": rc.pad_id, "turn_ids": -1}.get(k, 0)
      extra = np.full((len(done_windows), t), fill, rows[k].dtype)
      for r, win in enumerate(done_windows):
        extra[r, :len(win[k])] = win[k]
      rows[k] = np.concatenate([rows[k], extra], 0)
    arrays = turn_arrays(episodes, rc.max_turns)
    return EpisodeBatch(
        episodes=tuple(episodes), **rows, turn_rewards=arrays["turn_rewards"], turn_valid=arrays["turn_valid"],
        episode_rewards=arrays["episode_rewards"], roles=tuple(ep.roles for ep in episodes),
        failed=arrays["failed"], truncated=truncated,
        turns=np.asarray([ep.turns for ep in episodes], np.int32),
        tool_calls=np.asarray([_tool_calls(ep) for ep in episodes], np.int32), prefilled=prefilled,
        sampler_calls=calls, compactions=compactions,
        row_episode=np.asarray(list(range(b)) + [w["episode"] for w in done_windows], np.int32),
        row_window=np.asarray(list(row_window) + [w["window"] for w in done_windows], np.int32),
        row_lengths=np.asarray([min(int(x), t) for x in lengths] + [len(w["tokens"]) for w in done_windows],
                               np.int32))
  finally:
    if own_pool:
      pool.shutdown(wait=True)
