"""The asynchronous runner's chunked sampler: the KV cache kept between chunks of one weight version vs a
prefill of the whole sequence so far before every chunk (issue #21; docs/async.md).

``InterruptibleSampler`` decodes in chunks of ``k`` tokens and reads the latest weights before each chunk. With
``reuse_cache=True`` (the default) a chunk under the same weights continues the previous call's cache
(``rljax.sampling.resume``); a prefill happens only after new weights (AReaL's recomputation) or when few rows
are left (a smaller batch). ``reuse_cache=False`` is the previous behaviour. Both draw the same tokens (checked
here; log-probs equal to float rounding).

The task: the benchmarks' random-weight 2-layer d=64 model (``episode_cache.tiny_model``), 8 prompts of 16
tokens x 4 samples, per-row lengths drawn from a lognormal (median ``--median``, sigma 1.0, capped at ``--new``:
heavy-tailed), fixed weights, or new weights every ``--switch-every`` chunks. Reported: wall seconds per batch
(median of ``--rounds`` interleaved rounds, every shape compiled before), prefilled tokens, and the ratio.

  python benchmarks/chunked_sampler_cache.py [--new 256] [--chunks 8,16,32] [--switch-every 0]
"""
from __future__ import annotations

import argparse
import statistics
import time

import jax
import numpy as np
from flax import nnx

from episode_cache import tiny_model
from rljax.sampling import SamplerConfig
from rljax.train._async import InterruptibleSampler, Weights

V, P, G, PROMPT_LEN = 64, 8, 4, 16


def _batch(k: int, new: int, median: float):
  rng = np.random.default_rng([11, k])
  prompts = [rng.integers(2, V, size=PROMPT_LEN) for _ in range(P)]
  caps = np.clip(np.round(rng.lognormal(np.log(median), 1.0, size=P * G)), 1, new).astype(np.int64)
  return prompts, caps


def _sampler(graphdef, weights, cfg, chunk, reuse, switch_every):
  calls = []

  def latest():  # new weights (another version of the same parameters) every `switch_every` chunks
    calls.append(None)
    w = weights[0]
    return w if not switch_every else w._replace(version=(len(calls) - 1) // switch_every)
  return InterruptibleSampler(graphdef, latest, config=cfg, chunk=chunk, partial=True, stop_tokens=[],
                              reuse_cache=reuse)


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--new", type=int, default=256, help="max new tokens per row")
  ap.add_argument("--median", type=float, default=32.0, help="median drawn length")
  ap.add_argument("--chunks", default="8,16,32")
  ap.add_argument("--switch-every", type=int, default=0, help="new weights every N chunks (0: never)")
  ap.add_argument("--batches", type=int, default=3)
  ap.add_argument("--rounds", type=int, default=3)
  args = ap.parse_args()
  graphdef, params, rest = nnx.split(tiny_model(V), nnx.Param, ...)
  weights = [Weights(0, params, rest, {})]
  cfg = SamplerConfig(max_new_tokens=args.new, prompt_buckets=(PROMPT_LEN,), return_entropy=False,
                      return_routing=False, pad_id=0)
  weights_note = f"new weights every {args.switch_every} chunks" if args.switch_every else "fixed weights"
  print(f"{P} prompts x {G} samples, lengths lognormal(median {args.median:g}) capped at {args.new}, "
        f"{weights_note}; {jax.devices()[0].platform}")
  print("| chunk | prefill every chunk: s/batch | reuse the cache: s/batch | speed-up | prefilled tokens "
        "(every chunk → reuse) | chunks |")
  print("|---|---|---|---|---|---|")
  for chunk in (int(c) for c in args.chunks.split(",")):
    times = {False: [], True: []}
    stats, outs = {}, {}
    for rnd in range(args.rounds + 1):  # round 0 compiles every shape
      for reuse in (False, True):
        s = _sampler(graphdef, weights, cfg, chunk, reuse, args.switch_every)
        t = time.perf_counter()
        out = [s(*_batch(k, args.new, args.median)[:1], n=G, greedy=False, temperature=1.0,
                 key=jax.random.PRNGKey(k), max_new=_batch(k, args.new, args.median)[1])
               for k in range(args.batches)]
        if rnd:
          times[reuse].append((time.perf_counter() - t) / args.batches)
        stats[reuse], outs[reuse] = s.stats, out
    for a, b in zip(outs[False], outs[True]):
      np.testing.assert_array_equal(a.tokens, b.tokens)
      np.testing.assert_allclose(a.logp_behavior, b.logp_behavior, atol=1e-4)
    t0, t1 = statistics.median(times[False]), statistics.median(times[True])
    print(f"| {chunk} | {t0:.3f} | {t1:.3f} | **{t0 / t1:.2f}x** | {stats[False]['prefilled_tokens']:,} → "
          f"{stats[True]['prefilled_tokens']:,} | {stats[True]['chunks']} |", flush=True)


if __name__ == "__main__":
  main()
