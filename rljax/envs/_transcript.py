"""Episode -> training rows: the token arrays a runner puts in a ``TrainBatch``.

Each window of an episode (``rljax.envs.Episode.windows``; one unless the context budget was hit) is one row:
its segments' tokens concatenated, with per token

* ``loss_mask``: 1 only on model-written, trainable tokens (tool output, observations, prompts and text carried
  into a later window as context are 0);
* ``turn_ids``: the 0-based model turn the token belongs to (an observation belongs to the turn that caused it),
  -1 on the opening prompt and on padding. This is the convention of the catalog rows that read turn ids:
  ``step_episode_mix`` and ``sign_preserving_modulation`` gather ``turn_rewards[:, turn_ids]`` from ``[B, M]``
  per-turn arrays (-1 = no turn), ``segment`` likewise; ``segment_ratio(segment_ids="turn_ids")`` needs ids
  >= 0 everywhere, so give it ``np.maximum(turn_ids, 0)`` (only loss tokens are read);
* ``segment_ids``: the model's attention packing (``rljax.models``: 0 = padding, tokens attend within equal
  ids): 1 on every real token, 0 on padding. One episode window is one sequence.

Per episode: ``turn_rewards [M]`` (``Episode.rewards``), the turn roles, the episode reward (their sum).
"""
from __future__ import annotations

import dataclasses
from typing import Mapping, Optional, Sequence

import numpy as np

from rljax.envs._multiturn import Episode


@dataclasses.dataclass(frozen=True)
class EpisodeRow:
  """One window of one episode as ``[T]`` arrays (unpadded).

  Attributes:
    tokens: ``[T]`` int32. loss_mask: ``[T]`` bool. turn_ids: ``[T]`` int32 (0-based, -1 = none).
    segment_ids: ``[T]`` int32 (1 on every token). window: index of the window in the episode.
  """
  tokens: np.ndarray
  loss_mask: np.ndarray
  turn_ids: np.ndarray
  segment_ids: np.ndarray
  window: int


def _trained(seg, role) -> bool:
  return seg.source == "model" and seg.trainable and (role is None or seg.role == role)


def encode_episode(ep: Episode, tokenizer, *, add_bos: Optional[bool] = None,
                   model_ids: Optional[Mapping[int, Sequence[int]]] = None, role: Optional[str] = None) -> list:
  """One ``EpisodeRow`` per window of ``ep`` that has a trainable model turn (a window that is only carried-over
  context, e.g. the last one after a fit, is left out; ``EpisodeRow.window`` keeps the index).

  Each segment is encoded on its own (``tokenizer.encode(text)``, no BOS/EOS) so that segment boundaries are
  token boundaries. ``tokenizer``: an ``rljax.data`` tokenizer or a ``Codec`` (its ``tok``). ``add_bos`` puts
  ``tokenizer.bos_id`` first in each row (context, mask 0, turn -1); ``None``: as ``Codec`` does, when the
  tokenizer has a start token (``has_bos``, default True).
  ``model_ids[turn]``: the token ids the sampler actually produced for that model turn (use them: a re-encoding
  of the decoded text need not give the same ids); they replace the encoding of the turn's trainable model
  segment. ``role``: train only that role's turns (self-play: one row per player; the other player's turns
  are context, mask 0).
  """
  tokenizer = getattr(tokenizer, "tok", tokenizer)
  if add_bos is None:
    add_bos = bool(getattr(tokenizer, "has_bos", True))
  rows = []
  for w, window in enumerate(ep.windows):
    if not any(_trained(seg, role) for seg in window):
      continue
    toks, mask, turns = [], [], []
    if add_bos:
      bos = getattr(tokenizer, "bos_id", None)
      if bos is None or bos < 0:
        raise ValueError(f"add_bos=True but the tokenizer has no bos_id ({type(tokenizer).__name__})")
      toks, mask, turns = [int(bos)], [False], [-1]
    for seg in window:
      train = _trained(seg, role)
      if train and model_ids is not None and seg.turn in model_ids:
        ids = [int(i) for i in model_ids[seg.turn]]
      else:
        ids = list(tokenizer.encode(seg.text))
      toks += ids
      mask += [train] * len(ids)
      turns += [seg.turn] * len(ids)
    n = len(toks)
    rows.append(EpisodeRow(np.asarray(toks, np.int32).reshape(n), np.asarray(mask, bool).reshape(n),
                           np.asarray(turns, np.int32).reshape(n), np.ones((n,), np.int32), w))
  return rows


def stack_rows(rows: Sequence[EpisodeRow], length: int, pad_id: int = 0) -> dict:
  """Right-pads rows to ``length``: ``{"tokens", "loss_mask", "turn_ids", "segment_ids"}`` each ``[B, length]``
  (padding: ``pad_id``, False, -1, 0). Raises if a row is longer than ``length`` (nothing is cut silently)."""
  b = len(rows)
  out = {"tokens": np.full((b, length), pad_id, np.int32), "loss_mask": np.zeros((b, length), bool),
         "turn_ids": np.full((b, length), -1, np.int32), "segment_ids": np.zeros((b, length), np.int32)}
  for i, r in enumerate(rows):
    n = r.tokens.shape[0]
    if n > length:
      raise ValueError(f"row {i} has {n} tokens, more than length={length}")
    for k in out:
      out[k][i, :n] = getattr(r, k)
  return out


def turn_arrays(episodes: Sequence[Episode], max_turns: int, role: Optional[str] = None) -> dict:
  """Per-episode turn quantities as ``[B, M]`` arrays (``M = max_turns``): ``turn_rewards`` float32 (0 past
  the last turn), ``turn_valid`` bool, and ``episode_rewards [B]`` (sum of the turn rewards), ``failed [B]``
  bool (a runner marks these rows invalid: their record ends at the failing turn). Rows line up with the
  episodes (repeat them for episodes with several windows).

  ``role`` (self-play): ``turn_valid`` only on that role's turns, and ``episode_rewards`` is the game's outcome
  for it, ``info["role_rewards"][role]`` (0 for a failed episode; an ended game without it raises).
  """
  b = len(episodes)
  rewards, valid = np.zeros((b, max_turns), np.float32), np.zeros((b, max_turns), bool)
  episode_rewards = np.zeros((b,), np.float32)
  for i, ep in enumerate(episodes):
    if ep.turns > max_turns:
      raise ValueError(f"episode {i} has {ep.turns} turns, more than max_turns={max_turns}")
    rewards[i, :ep.turns] = ep.rewards
    valid[i, :ep.turns] = True if role is None else [r == role for r in ep.roles]
    if role is None:
      episode_rewards[i] = rewards[i].sum()
    elif not ep.failed:
      outcome = dict(ep.info.get("role_rewards") or {})
      if role not in outcome:
        raise ValueError(f"episode {i} has no info['role_rewards'][{role!r}] (roles: {sorted(outcome)}; "
                         f"done={ep.done})")
      episode_rewards[i] = outcome[role]
  rewards = np.where(valid, rewards, 0.0).astype(np.float32)
  return {"turn_rewards": rewards, "turn_valid": valid, "episode_rewards": episode_rewards,
          "failed": np.array([ep.failed for ep in episodes], bool)}
