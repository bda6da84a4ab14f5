"""Static sampler configuration and the finish-reason enum."""
from __future__ import annotations

import dataclasses
import enum
from typing import Optional

import numpy as np


class FinishReason(enum.IntEnum):
  """Why a sequence stopped (``Rollout.finish_reason``)."""
  LENGTH = 0       # hit max_new_tokens (or was not generating this call)
  STOP_TOKEN = 1   # sampled one of its stop tokens (the stop token is kept)
  STOP_STRING = 2  # a stop string appeared (set on the host, see truncate_at_stop_strings)


def _err(field: str, value, allowed: str) -> ValueError:
  return ValueError(f"SamplerConfig.{field}={value!r} is invalid: expected {allowed}")


def default_buckets(max_prompt_len: int) -> tuple:
  """Powers of two from 16 up to the first one ``>= max_prompt_len``."""
  buckets, b = [], 16
  while True:
    buckets.append(b)
    if b >= max_prompt_len:
      return tuple(buckets)
    b *= 2


@dataclasses.dataclass(frozen=True)
class SamplerConfig:
  """Everything that fixes the compiled sampler's shapes (hashable, static).

  Attributes:
    max_new_tokens: static upper bound M on generated tokens per call (the
      per-call ``max_new_tokens`` argument is a traced value ``<= M``).
    prompt_buckets: sorted prompt-length buckets; a batch of prompts is padded
      to the smallest bucket that fits its longest prompt, so new lengths
      inside a bucket reuse the compiled function.
    cache_size: KV-cache slots S (default ``max(prompt_buckets) +
      max_new_tokens``). ``generate`` needs ``bucket + M <= S``; each
      ``resume`` needs ``used_slots + bucket + M <= S``.
    max_stop_tokens: width W of the per-sequence stop-token table.
    return_entropy: also compute the untempered per-token entropy.
    return_routing: record MoE routing ids when the model returns them.
    pad_id: token written into padding positions.
    cache_dtype: KV-cache dtype name (``None``: the model's default).
    decode_phases: ``generate``'s decode loop runs as up to this many loops
      (at most one per 16 new tokens), each over a cache prefix just long
      enough for its steps, so attention does not read the cache's empty
      tail; each phase is one more compiled loop body. 1: one loop over the
      ``bucket - 1 + max_new_tokens`` slots a call can fill. Same tokens and
      log-probs (up to float32 summation order) either way.
    phase_cache: how the decode phases get their cache prefix. ``"copy"``: each
      phase pads the cache to its length (a new buffer beside the previous one
      at each transition: up to 1.75x the cache at the last one with 4 phases;
      the fastest on CPU, where attention then reads a whole array).
      ``"in_place"``: the cache is padded once to its full length and written
      in place, and each phase attends over a static prefix of it (one cache
      in memory; what a pod needs, e.g. the 72B rollout at 8k context). ``"auto"``
      (default): ``"in_place"`` with mesh-sharded parameters, else ``"copy"``.
      Same values either way.
    concurrent_chunks: ``generate`` splits its P prompts into this many
      chunks of whole prompts and decodes them as separate jitted calls, one
      host thread each, at the same time. On CPU one decode loop leaves cores
      idle (a step is a chain of small ops), and concurrent calls fill them:
      on 2 cores the GRPO benchmark's 64-row rollout took 0.25 s as 2 x 32
      against 0.39 s as one call (docs/sampling.md). Rows keep their random
      streams, which depend only on (key, prompt id, sample index, position),
      so the tokens are the same as one call's unless a float32 rounding
      difference (a matmul's summation order may depend on its row count)
      flips a near-tie between two tokens; log-probs agree to rounding. Used
      only on CPU; calls with ``return_state`` (whose shared slot counter
      cannot be split) and calls with mesh-sharded parameters run as one
      call. The worker threads do not inherit thread-local JAX context
      managers (``jax.default_device``, ``jax.default_matmul_precision``, ...)
      entered by the caller: set such options with ``jax.config.update``.
      1 (default): one call.
    common_prefix: token ids that the prompts of a call are expected to
      start with (a system prompt, a chat template's header). When every
      prompt of a ``generate`` call starts with them and has at least one
      token more, they are prefilled once for the call and their keys/values
      copied to every prompt's cache, whose own prefill starts after them;
      otherwise (or with mesh-sharded parameters, or an MoE model) the call
      prefills every prompt whole. Same tokens and log-probs up to float32
      summation order. ``()`` (default): off.
    decode_weights: how the decode loop reads the layers' matmul weights and the LM head. ``"transposed"``:
      from ``[out, in]`` copies made once per call before the loop (``Transformer.decode_weights``; a tied
      head is the embedding itself, no copy), each few-row matmul streaming its weight as the left operand:
      on XLA:CPU 1.5-3x faster per matmul at 8-32 rows than the stored ``[in, out]`` layout (issue #53,
      docs/benchmarks.md), at the cost of that copy in memory for the call (one per concurrent chunk).
      ``"stored"``: the weights as stored. ``"auto"`` (default): ``"transposed"`` on CPU without a mesh
      when the parameters are float32 and take at most 2 GiB, else ``"stored"`` (16-bit weights: XLA:CPU runs
      only the stored form's ``x @ W`` on bfloat16 units and would convert a transposed copy to float32 every
      step). Same math (the matmuls' summation order
      may differ: tokens equal unless a rounding difference flips a near-tie).
  """
  max_new_tokens: int = 128
  prompt_buckets: tuple = (16, 32, 64, 128, 256, 512)
  cache_size: Optional[int] = None
  max_stop_tokens: int = 8
  return_entropy: bool = True
  return_routing: bool = True
  pad_id: int = 0
  cache_dtype: Optional[str] = None
  decode_phases: int = 4
  phase_cache: str = "auto"
  concurrent_chunks: int = 1
  common_prefix: tuple = ()
  decode_weights: str = "auto"

  def __post_init__(self):
    if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
      raise _err("max_new_tokens", self.max_new_tokens, "an int >= 1")
    buckets = tuple(self.prompt_buckets)
    if (not buckets or any(not isinstance(b, int) or b < 1 for b in buckets)
        or list(buckets) != sorted(set(buckets))):
      raise _err("prompt_buckets", self.prompt_buckets, "a non-empty strictly increasing tuple of ints >= 1")
    object.__setattr__(self, "prompt_buckets", buckets)
    if self.cache_size is None:
      object.__setattr__(self, "cache_size", buckets[-1] + self.max_new_tokens)
    if not isinstance(self.cache_size, int) or self.cache_size < buckets[0] + self.max_new_tokens:
      raise _err("cache_size", self.cache_size,
                 f"an int >= smallest bucket + max_new_tokens = {buckets[0] + self.max_new_tokens}")
    if not isinstance(self.max_stop_tokens, int) or self.max_stop_tokens < 1:
      raise _err("max_stop_tokens", self.max_stop_tokens, "an int >= 1")
    if not isinstance(self.pad_id, int) or self.pad_id < 0:
      raise _err("pad_id", self.pad_id, "an int >= 0")
    if not isinstance(self.decode_phases, int) or self.decode_phases < 1:
      raise _err("decode_phases", self.decode_phases, "an int >= 1")
    if self.phase_cache not in ("auto", "copy", "in_place"):
      raise _err("phase_cache", self.phase_cache, "'auto', 'copy' or 'in_place'")
    if not isinstance(self.concurrent_chunks, int) or self.concurrent_chunks < 1:
      raise _err("concurrent_chunks", self.concurrent_chunks, "an int >= 1")
    if self.decode_weights not in ("auto", "stored", "transposed"):
      raise _err("decode_weights", self.decode_weights, "'auto', 'stored' or 'transposed'")
    prefix = tuple(self.common_prefix)
    if any(not isinstance(t, (int, np.integer)) or isinstance(t, bool) or t < 0 for t in prefix):
      raise _err("common_prefix", self.common_prefix, "a tuple of token ids (ints >= 0)")
    object.__setattr__(self, "common_prefix", tuple(int(t) for t in prefix))
    if self.cache_dtype is not None and not isinstance(self.cache_dtype, str):
      raise _err("cache_dtype", self.cache_dtype, "None or a dtype name such as 'bfloat16'")

  def bucket(self, length: int, argname: str = "prompts") -> int:
    """Smallest bucket ``>= length`` (``ValueError`` naming ``argname`` if none)."""
    for b in self.prompt_buckets:
      if b >= length:
        return b
    raise ValueError(f"{argname}: length {length} exceeds the largest prompt bucket "
                     f"{self.prompt_buckets[-1]} (SamplerConfig.prompt_buckets)")
