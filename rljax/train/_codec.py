"""Host-side glue between text problems and token arrays (prompts, SFT rows, decoding)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from rljax.types import TrainBatch

__all__ = ["Codec", "sft_batch"]


class Codec:
  """Encodes prompts as ``[bos] + tokens(prompt)`` and completions as ``tokens(text) + [eos]``.

  A tokenizer without a start token (``has_bos = False``, e.g. Qwen's) gets
  prompts without one, as its model was trained.
  """

  def __init__(self, tokenizer):
    self.tok = tokenizer
    self.bos_id = int(tokenizer.bos_id)
    self.use_bos = bool(getattr(tokenizer, "has_bos", True))
    self.eos_id = int(tokenizer.eos_id)
    self.pad_id = int(getattr(tokenizer, "pad_id", 0))
    if self.pad_id < 0:
      self.pad_id = 0

  def prompt_ids(self, problem) -> list[int]:
    text = problem.prompt if hasattr(problem, "prompt") else str(problem)
    return ([self.bos_id] if self.use_bos else []) + list(self.tok.encode(text))

  def completion_ids(self, text: str) -> list[int]:
    return list(self.tok.encode(text)) + [self.eos_id]

  def decode_completions(self, tokens, completion_mask) -> list[str]:
    """Decodes each row's completion tokens (decoding stops at eos)."""
    tokens = np.asarray(tokens)
    mask = np.asarray(completion_mask).astype(bool)
    out = []
    for row, m in zip(tokens, mask):
      ids = [int(i) for i in row[m]]
      if self.eos_id in ids:
        ids = ids[:ids.index(self.eos_id)]
      out.append(self.tok.decode(ids))
    return out


def sft_batch(task, codec: Codec, problems: Sequence, *, step: int, seed: int, batch_size: int,
              seq_len: int) -> TrainBatch:
  """A deterministic SFT batch for ``step``: demonstrations from ``task.demonstration``.

  Row = ``[bos] prompt completion [eos]`` left-aligned and padded to
  ``seq_len``; ``loss_mask`` covers the completion and eos. A multi-turn task
  (``task.demonstration_episode``): the scripted episode's tokens
  (``rljax.envs.encode_episode``), ``loss_mask`` on its model turns only (``rng`` draws any random choice of the
  demonstration, e.g. the tool countdown's tool-or-direct mixture); with a context budget, its windows side by
  side with ``segment_ids`` = window + 1 (the layout of ``rljax.envs.pack_windows``). The problems and
  demonstrations depend only on ``(seed, step)``, so a resumed run sees the
  same batches.
  """
  rng = np.random.default_rng([seed, 7, step])
  idx = rng.integers(len(problems), size=batch_size)
  tokens = np.full((batch_size, seq_len), codec.pad_id, np.int32)
  mask = np.zeros((batch_size, seq_len), bool)
  if hasattr(task, "demonstration_episode"):  # a multi-turn task: its scripted episodes, model segments trained
    from rljax.envs import encode_episode  # pylint: disable=import-outside-toplevel
    packed = task.episode_config.context_budget is not None  # context windows side by side (pack_windows' layout)
    seg = np.zeros((batch_size, seq_len), np.int32) if packed else None
    for r, i in enumerate(idx):
      rows = encode_episode(task.demonstration_episode(problems[int(i)], rng), codec.tok, add_bos=codec.use_bos)
      lo = 0
      for row in rows if packed else rows[:1]:  # without a budget an episode has one window
        hi = lo + row.tokens.size
        if hi > seq_len:
          raise ValueError(f"a demonstration episode has {hi} tokens or more, more than the rows' {seq_len}: "
                           "raise rl.max_new_tokens or task.max_obs_tokens")
        tokens[r, lo:hi], mask[r, lo:hi] = row.tokens, row.loss_mask
        if packed:
          seg[r, lo:hi] = row.window + 1
        lo = hi
    return TrainBatch(tokens=tokens, loss_mask=mask, advantages=np.zeros((batch_size, seq_len), np.float32),
                      group_id=np.arange(batch_size, dtype=np.int32), segment_ids=seg)
  for r, i in enumerate(idx):
    p = problems[int(i)]
    prompt = codec.prompt_ids(p)
    comp = codec.completion_ids(task.demonstration(p, rng))
    row = (prompt + comp)[:seq_len]
    tokens[r, :len(row)] = row
    mask[r, len(prompt):len(row)] = True
  zeros = np.zeros((batch_size, seq_len), np.float32)
  return TrainBatch(tokens=tokens, loss_mask=mask, advantages=zeros,
                    group_id=np.arange(batch_size, dtype=np.int32))
