"""Each phase against this machine's limit: the measured limits (float32 matmul rate, streaming-read memory
bandwidth) and the work of a Llama-style model's phases (model FLOPs, bytes read per decoded token).

Limits, measured in JAX on all cores (``jax_matmul_seconds``, ``stream_read``): the best float32 ``n x n x n``
``jnp.dot`` under jit, and the best streaming read (a jitted sum over a large float32 array, as one call and as one
call per core on host threads at once; the faster counts), best of ``repeats``.

Counting (one formula for every side; a shape ``s`` is ``model_shape``'s dict: ``L`` layers, hidden ``H``, ``heads``
x ``head_dim`` query heads, ``kv`` key/value heads, vocabulary ``V``, ``N`` = the non-embedding matmul parameters
``L * (2 * H * heads * head_dim + 2 * H * kv * head_dim + 3 * H * F)``):

* forward FLOPs of a token = ``2 * N`` (every matmul weight once: multiply + add) + ``2 * V * H`` where the token's
  logits are needed (the LM head) + attention ``4 * L * heads * head_dim * c`` at context ``c`` (scores and the
  weighted sum, ``2 * heads * head_dim * c`` each); norms, rotary and softmax are not counted;
* training = 3 x forward (the backward costs two forwards: the gradients of activations and of weights);
* a decode step must read at least the matmul weights once, ``(N + V * H) * bytes`` (the tied embedding as the LM
  head; the embedding lookup reads only a row per token, not counted), and each row's key/value cache up to its
  position, ``2 * L * kv * head_dim * c * bytes`` per row; per decoded token: that over the rows of the step.

A phase's bound is its time at the limit: the update's FLOPs over the matmul rate; the rollout's prefill FLOPs
over the matmul rate plus, per decode step, the larger of its bytes over the bandwidth and its FLOPs over the matmul
rate (at small batches a decode step is bandwidth-bound). "X% of the roofline" is the bound over the measured time.
Source: the roofline model (Williams, Waterman and Patterson, CACM 2009); the 3x training rule as in Kaplan et al.
2020 (6 x parameters x tokens), here counted per matmul.
"""
from __future__ import annotations

import concurrent.futures
import time


def jax_matmul_seconds(n: int = 2048, repeats: int = 5) -> float:
  """Best of ``repeats`` float32 ``n x n x n`` ``jnp.dot`` calls under jit (compiled and run once first), seconds."""
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
  mm = jax.jit(jnp.dot)
  mm(a, a).block_until_ready()
  best = float("inf")
  for _ in range(repeats):
    t = time.perf_counter()
    mm(a, a).block_until_ready()
    best = min(best, time.perf_counter() - t)
  return best


def stream_read(nbytes: int = 1 << 30, repeats: int = 5, parts: int | None = None) -> dict:
  """Streaming-read bandwidth, bytes/s: a jitted float32 sum over ``nbytes`` of data, best of ``repeats``; as one
  call (``one_call``) and as ``parts`` calls on host threads at once, each over its own ``nbytes / parts``
  (``per_part``; default: one per core). ``bytes_per_s`` is the better of the two."""
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  if parts is None:
    from _peer_rules import core_count  # pylint: disable=import-outside-toplevel
    parts = core_count()
  n = nbytes // 4 // parts * parts
  total = jax.jit(jnp.sum)
  whole = jnp.ones((n,), jnp.float32)
  pieces = [jnp.ones((n // parts,), jnp.float32) for _ in range(parts)]

  def best(fn):
    fn()  # compile, warm up
    out = float("inf")
    for _ in range(repeats):
      t = time.perf_counter()
      fn()
      out = min(out, time.perf_counter() - t)
    return out

  one = best(lambda: total(whole).block_until_ready())
  with concurrent.futures.ThreadPoolExecutor(parts) as pool:
    split = best(lambda: [f.result() for f in [pool.submit(lambda p: total(p).block_until_ready(), p)
                                               for p in pieces]])
  del whole, pieces
  rates = {"one_call": 4 * n / one, "per_part": 4 * n / split}
  return {**rates, "bytes_per_s": max(rates.values()), "bytes": 4 * n, "parts": parts}


# -------------------------------------------------------------------------------------------------- counting

def model_shape(*, layers: int, hidden: int, heads: int, head_dim: int, kv_heads: int, vocab: int,
                intermediate: int) -> dict:
  """The shape dict every count here takes, with ``N`` the body's matmul parameters (module docstring)."""
  n_body = layers * (2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim + 3 * hidden * intermediate)
  return dict(H=hidden, L=layers, heads=heads, head_dim=head_dim, kv=kv_heads, V=vocab, N=n_body)


def fwd_flops(s: dict, context_from: float, tokens: float, head_tokens: float) -> float:
  """Forward model FLOPs of ``tokens`` consecutive positions after ``context_from`` earlier ones (attention to
  themselves and all earlier positions), ``head_tokens`` of which need logits."""
  # sum over positions c = context_from + 1 .. context_from + tokens of 4 * L * heads * head_dim * c
  ctx = tokens * context_from + tokens * (tokens + 1) / 2
  return 2 * s["N"] * tokens + 2 * s["V"] * s["H"] * head_tokens + 4 * s["L"] * s["heads"] * s["head_dim"] * ctx


def rollout_flops(s: dict, rows: int, prompt_len: float, completion_len: float) -> float:
  """Per row: prefill of the prompt (logits of its last position) + decode of the generated tokens."""
  prefill = fwd_flops(s, 0, prompt_len, 1)
  decode = fwd_flops(s, prompt_len, completion_len - 1, completion_len - 1) if completion_len > 1 else 0.0
  return rows * (prefill + decode)


def update_flops(s: dict, rows: int, prompt_len: float, completion_len: float) -> float:
  """3x the forward of each row (prompt + completion), logits on the completion tokens."""
  return rows * 3 * fwd_flops(s, 0, prompt_len + completion_len, completion_len)


def _check_common(common: float, prompt_len: float) -> None:
  """Every prompt starts with the ``common`` tokens, so they cannot outnumber the (mean) prompt."""
  if common > prompt_len:
    raise ValueError(f"common prefix of {common} tokens longer than the mean prompt ({prompt_len}): the prompts "
                     "counted are not the ones the run had")


def rollout_flops_shared(s: dict, prompts: int, group: int, prompt_len: float, completion_len: float,
                         common: int = 0, calls: int = 1) -> float:
  """rljax's rollout as executed: each distinct prompt prefilled once (its cache repeated ``group`` times), the
  ``common`` tokens every prompt starts with once per sampler call (``calls``: the concurrent chunks)."""
  _check_common(common, prompt_len)
  decode = fwd_flops(s, prompt_len, completion_len - 1, completion_len - 1) if completion_len > 1 else 0.0
  prefill = calls * fwd_flops(s, 0, common, 0) + prompts * fwd_flops(s, common, prompt_len - common, 1)
  return prefill + prompts * group * decode


def forward_shared(s: dict, prompts: int, group: int, prompt_len: float, completion_len: float, common: int = 0,
                   microbatches: int = 1) -> float:
  """One forward of a batch whose groups run their prompt once (``share_prompt_forward``): the ``common`` tokens
  every prompt starts with once per micro-batch, the rest of the prompt per group, the completions per row
  (attending to the prompt), logits on the completion tokens."""
  _check_common(common, prompt_len)
  return (microbatches * fwd_flops(s, 0, common, 0) + prompts * fwd_flops(s, common, prompt_len - common, 0)
          + prompts * group * fwd_flops(s, prompt_len, completion_len, completion_len))


def weight_bytes(s: dict, dtype_bytes: int = 4) -> float:
  """The matmul weights a decode step reads: the ``N`` body parameters and the ``V x H`` LM head."""
  return (s["N"] + s["V"] * s["H"]) * dtype_bytes


def kv_bytes(s: dict, context: float, dtype_bytes: int = 4) -> float:
  """One row's key/value cache over ``context`` positions: ``2 * L * kv * head_dim * context * bytes``."""
  return 2 * s["L"] * s.get("kv", s["heads"]) * s["head_dim"] * context * dtype_bytes


def decode_step_bytes(s: dict, rows: int, context: float, dtype_bytes: int = 4) -> float:
  """What one decode step of ``rows`` rows at ``context`` cached positions must read at least."""
  return weight_bytes(s, dtype_bytes) + rows * kv_bytes(s, context, dtype_bytes)


def bytes_per_decoded_token(s: dict, rows: int, context: float, dtype_bytes: int = 4) -> float:
  return decode_step_bytes(s, rows, context, dtype_bytes) / rows


def rollout_bound(s: dict, rows: int, prompt_len: float, completion_len: float, matmul_rate: float,
                  bandwidth: float, prefill_flops: float | None = None, dtype_bytes: int = 4) -> dict:
  """The rollout's time at the machine's limits (seconds): ``prefill`` = its FLOPs (default: every row's prompt,
  ``rollout_flops`` with no decode) over ``matmul_rate``; ``decode`` = per decode step (the first token comes from
  the prefill; step ``j`` = 1 .. completion_len - 1 reads a cache of ``prompt_len + j - 1`` positions and writes
  position ``prompt_len + j``) the larger of its bytes over ``bandwidth`` and its FLOPs over ``matmul_rate``;
  ``decode_bytes``: all decode steps' bytes; ``bandwidth_bound_steps``: the steps where bytes decide."""
  if prefill_flops is None:
    prefill_flops = rows * fwd_flops(s, 0, prompt_len, 1)
  decode_s, total_bytes, bw_steps = 0.0, 0.0, 0
  steps = max(int(round(completion_len)) - 1, 0)
  for j in range(1, steps + 1):
    ctx = prompt_len + j - 1
    nbytes = decode_step_bytes(s, rows, ctx, dtype_bytes)
    flops = rows * fwd_flops(s, ctx, 1, 1)
    t_bytes, t_flops = nbytes / bandwidth, flops / matmul_rate
    decode_s += max(t_bytes, t_flops)
    total_bytes += nbytes
    bw_steps += t_bytes >= t_flops
  prefill_s = prefill_flops / matmul_rate
  return dict(prefill=prefill_s, decode=decode_s, total=prefill_s + decode_s, decode_bytes=total_bytes,
              decode_steps=steps, bandwidth_bound_steps=bw_steps)


def roofline_line(update_flops_: float, update_s: float, rollout_bound_s: float, rollout_s: float,
                  matmul_rate: float) -> str:
  """``update: X% of the matmul roofline, rollout: Y% of the bandwidth bound`` (bound time over measured time)."""
  return (f"update: {update_flops_ / matmul_rate / update_s:.0%} of the matmul roofline, "
          f"rollout: {rollout_bound_s / rollout_s:.0%} of the bandwidth bound")


def main(argv=None) -> int:
  """``python benchmarks/roofline.py``: this machine's limits alone (the float32 matmul rate and the streaming-read
  bandwidth, in JAX on all cores), with the load at the start; ``real_model_bench.py`` puts each phase against them."""
  import argparse  # pylint: disable=import-outside-toplevel
  import _peer_rules as rules  # pylint: disable=import-outside-toplevel
  ap = argparse.ArgumentParser(description=main.__doc__.split(":")[0])
  ap.add_argument("--n", type=int, default=2048, help="matmul size (n x n x n)")
  ap.add_argument("--stream-bytes", type=int, default=1 << 30)
  ap.add_argument("--repeats", type=int, default=5)
  args = ap.parse_args(argv)
  g = rules.LoadGuard.now()
  print(f"load average {g.load:.2f} at start, {g.cores} cores" + (": LOADED MACHINE, figures not for publication"
                                                                  if g.loaded else ""), flush=True)
  rate = 2 * args.n ** 3 / jax_matmul_seconds(args.n, args.repeats)
  bw = stream_read(args.stream_bytes, args.repeats)
  print(f"float32 matmul {args.n}^3, best of {args.repeats}: {rate / 1e9:.1f} GFLOP/s")
  print(f"streaming read of {bw['bytes'] / 2**20:.0f} MiB, best of {args.repeats}: {bw['bytes_per_s'] / 1e9:.1f} GB/s "
        f"(one call {bw['one_call'] / 1e9:.1f}, {bw['parts']} calls at once {bw['per_part'] / 1e9:.1f})")
  return 0


if __name__ == "__main__":
  import os  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  sys.exit(main())
