"""Fused vs naive log-prob + entropy head: compiled temporary memory and time.

For every shape, both paths are compiled for forward+backward
(``value_and_grad`` of ``sum(logp) + sum(entropy)`` w.r.t. hidden and weight)
in the same process; ``lower().compile().memory_analysis()`` gives the
temporary bytes without running anything. Wall time (median of ``--repeats``
runs after one warm-up) is measured only for shapes listed in ``--time`` (or
all with ``--time all``), since the naive path needs ``N * V * 4`` bytes per
logits copy. Prints a markdown table.

  python benchmarks/logprob_bench.py                       # memory for all 8 shapes
  python benchmarks/logprob_bench.py --time 4096x512x32768 # + timing of one shape
"""
from __future__ import annotations

import argparse
import itertools
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from rljax.kernels import logprob_and_entropy

NS, HS, VS = (4096, 16384), (512, 1024), (32768, 152064)


def _step(impl):
  def loss(x, w, t):
    lp, ent = logprob_and_entropy(x, w, t, impl=impl)
    return jnp.sum(lp) + jnp.sum(ent)
  return jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))


def _compile(impl, n, h, v, dtype):
  sds = jax.ShapeDtypeStruct
  return _step(impl).lower(sds((n, h), dtype), sds((h, v), dtype), sds((n,), jnp.int32)).compile()


def _time(compiled, n, h, v, dtype, repeats):
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(n, h)), dtype)
  w = jnp.asarray(rng.normal(size=(h, v)) / np.sqrt(h), dtype)
  t = jnp.asarray(rng.integers(0, v, n), jnp.int32)
  jax.block_until_ready(compiled(x, w, t))
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    jax.block_until_ready(compiled(x, w, t))
    times.append(time.perf_counter() - t0)
  return statistics.median(times)


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
  ap.add_argument("--fused", default="auto", help="impl of the fused path (auto/xla/pallas_*)")
  ap.add_argument("--time", default="", help="comma list of NxHxV to time, or 'all'")
  ap.add_argument("--repeats", type=int, default=3)
  args = ap.parse_args(argv)
  dtype = jnp.dtype(args.dtype)
  timed = set(args.time.split(",")) if args.time else set()
  print(f"# backend={jax.default_backend()} devices={len(jax.devices())} dtype={args.dtype} "
        f"fused impl={args.fused}; fwd+bwd, temp memory from memory_analysis()")
  print("| N | H | V | naive temp (MiB) | fused temp (MiB) | memory ratio | naive time (s) | fused time (s) | time ratio |")
  print("|---|---|---|---|---|---|---|---|---|")
  for n, h, v in itertools.product(NS, HS, VS):
    key = f"{n}x{h}x{v}"
    naive = _compile("reference", n, h, v, dtype)
    fused = _compile(args.fused, n, h, v, dtype)
    mn = naive.memory_analysis().temp_size_in_bytes
    mf = fused.memory_analysis().temp_size_in_bytes
    tn = tf = None
    if "all" in timed or key in timed:
      tf = _time(fused, n, h, v, dtype, args.repeats)
      tn = _time(naive, n, h, v, dtype, args.repeats)
    fmt = lambda s: "-" if s is None else f"{s:.2f}"
    ratio = "-" if tn is None else f"{tf / tn:.2f}"
    print(f"| {n} | {h} | {v} | {mn / 2**20:.0f} | {mf / 2**20:.1f} | {mn / max(mf, 1):.0f}x | "
          f"{fmt(tn)} | {fmt(tf)} | {ratio} |", flush=True)


if __name__ == "__main__":
  main()
