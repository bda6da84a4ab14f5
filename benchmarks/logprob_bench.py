"""Fused vs naive log-prob + entropy head: compiled temporary memory and fwd+bwd time.

For every shape (N in {4096, 16384}, H in {512, 1024}, V in {32768, 152064};
issue #6) both paths are compiled for forward+backward (``value_and_grad`` of
``sum(logp) + sum(entropy)`` w.r.t. hidden and weight) in the same process:
the fused one (``rljax.kernels.logprob_and_entropy``, ``--fused xla`` = the
chunked path, default) and the naive one (``logprob_and_entropy_reference``:
materialised ``[N, V]`` f32 logits, autodiff). ``lower().compile()
.memory_analysis()`` gives temporary / argument / output bytes without
allocating anything, so memory is reported at every shape.

Time: inputs are made once per shape; each path gets one warm-up call, then
the two paths are timed alternately (fused, naive, fused, naive, ...) with
``jax.block_until_ready`` and the median is reported, so the ratio compares
runs made side by side under the same machine load. The fused path is timed
at every shape. The naive path is timed only where its compiled
temp + argument + output bytes fit in ``--mem-fraction`` of ``MemAvailable``
(``/proc/meminfo``, read just before); otherwise the row says so and prints
the bytes it would need (only the fused path can run there). Large shapes
take minutes per call on a small CPU host: the number of timed repeats is
cut so that one shape's timed calls stay within ``--budget`` seconds, and
where a single warm-up round already exceeds it, the warm-up calls are the
measurement (the executables are compiled ahead of time, so no compile time
is in them); the ``#`` line says which.

  python benchmarks/logprob_bench.py                         # all 8 shapes
  python benchmarks/logprob_bench.py --shapes 4096x512x32768 --repeats 5
  python benchmarks/logprob_bench.py --no-time               # memory only (seconds)

Prints one line per shape as it finishes (``#`` lines: details) and the
markdown table at the end.
"""
from __future__ import annotations

import argparse
import gc
import itertools
import os
import statistics
import time
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from rljax.kernels import logprob_and_entropy, logprob_and_entropy_reference

NS, HS, VS = (4096, 16384), (512, 1024), (32768, 152064)
SHAPES = tuple(itertools.product(NS, HS, VS))


def _step(fn, **kw):
  def loss(x, w, t):
    lp, ent = fn(x, w, t, **kw)
    return jnp.sum(lp) + jnp.sum(ent)
  return jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))


def compile_paths(fused_impl: str, n: int, h: int, v: int, dtype):
  """``{"naive": compiled, "fused": compiled}`` for fwd+bwd at one shape (nothing allocated)."""
  sds = jax.ShapeDtypeStruct
  args = (sds((n, h), dtype), sds((h, v), dtype), sds((n,), jnp.int32))
  return {"naive": _step(logprob_and_entropy_reference).lower(*args).compile(),
          "fused": _step(logprob_and_entropy, impl=fused_impl).lower(*args).compile()}


def memory(compiled) -> dict:
  """Temp, argument and output bytes of a compiled executable; ``need`` is their sum."""
  ma = compiled.memory_analysis()
  out = {"temp": int(ma.temp_size_in_bytes), "args": int(ma.argument_size_in_bytes),
         "out": int(ma.output_size_in_bytes)}
  out["need"] = out["temp"] + out["args"] + out["out"]
  return out


def mem_available() -> int:
  """``MemAvailable`` from ``/proc/meminfo`` in bytes (0 where it cannot be read)."""
  try:
    with open("/proc/meminfo") as f:
      for line in f:
        if line.startswith("MemAvailable:"):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  return 0


def inputs(n: int, h: int, v: int, dtype, seed: int = 0):
  rng = np.random.default_rng(seed)
  x = jnp.asarray(rng.standard_normal((n, h), np.float32), dtype)
  w = jnp.asarray(rng.standard_normal((h, v), np.float32) / np.float32(np.sqrt(h)), dtype)
  t = jnp.asarray(rng.integers(0, v, n), jnp.int32)
  return x, w, t


def _call(compiled, args) -> float:
  t0 = time.perf_counter()
  out = compiled(*args)
  jax.block_until_ready(out)
  dt = time.perf_counter() - t0
  del out
  return dt


def time_paths(compiled: dict, args, repeats: int, budget: float) -> tuple[dict, int]:
  """Warm-up each path once, then alternate timed calls; ``({name: [seconds]}, repeats made)``.

  Where one warm-up round (all paths) already took longer than ``budget``, the
  warm-up calls are the measurement (``0`` repeats made): the executables are
  compiled ahead of time, so a first call holds no compile time, and at these
  sizes (minutes per call) allocation is a negligible part of it.
  """
  warm = {name: _call(c, args) for name, c in compiled.items()}
  per_round = sum(warm.values())
  if per_round > budget:
    return {name: [s] for name, s in warm.items()}, 0
  reps = max(1, min(repeats, int(budget // max(per_round, 1e-9))))
  times = {name: [] for name in compiled}
  for _ in range(reps):
    for name, c in compiled.items():
      times[name].append(_call(c, args))
  return times, reps


def _mib(b: Optional[int]) -> str:
  return "-" if b is None else f"{b / 2**20:.1f} MiB" if b < 2**30 else f"{b / 2**30:.2f} GiB"


def _secs(s: Optional[float]) -> str:
  return "-" if s is None else f"{s:.3f}" if s < 10 else f"{s:.1f}"


def parse_shapes(text: str):
  if not text:
    return SHAPES
  shapes = []
  for item in text.split(","):
    try:
      n, h, v = (int(p) for p in item.lower().split("x"))
    except ValueError:
      raise ValueError(f"--shapes items must be NxHxV, got {item!r}") from None
    shapes.append((n, h, v))
  return tuple(shapes)


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
  ap.add_argument("--fused", default="xla", help="impl of the fused path (xla/auto/pallas_*)")
  ap.add_argument("--shapes", default="", help="comma list of NxHxV (default: the 8 issue shapes)")
  ap.add_argument("--repeats", type=int, default=3, help="timed calls per path after the warm-up (at most)")
  ap.add_argument("--budget", type=float, default=600.0,
                  help="seconds of timed calls per shape; fewer repeats (>= 1) where one round is longer")
  ap.add_argument("--mem-fraction", type=float, default=0.6,
                  help="time the naive path only if its compiled bytes fit in this fraction of MemAvailable")
  ap.add_argument("--no-time", action="store_true", help="memory analysis only")
  args = ap.parse_args(argv)
  if not 0 < args.mem_fraction <= 1:
    raise ValueError(f"--mem-fraction must be in (0, 1], got {args.mem_fraction}")
  if args.repeats < 1:
    raise ValueError(f"--repeats must be >= 1, got {args.repeats}")
  dtype = jnp.dtype(args.dtype)
  print(f"# backend={jax.default_backend()} devices={len(jax.devices())} cpus={os.cpu_count()} "
        f"jax={jax.__version__} dtype={args.dtype} fused impl={args.fused}; fwd+bwd of sum(logp)+sum(entropy) "
        f"w.r.t. hidden and weight; MemAvailable={_mib(mem_available())}", flush=True)
  rows = []
  for n, h, v in parse_shapes(args.shapes):
    t0 = time.perf_counter()
    compiled = compile_paths(args.fused, n, h, v, dtype)
    mem = {name: memory(c) for name, c in compiled.items()}
    print(f"# {n}x{h}x{v}: compiled in {time.perf_counter() - t0:.1f}s; naive temp {_mib(mem['naive']['temp'])} "
          f"(+args {_mib(mem['naive']['args'])}, out {_mib(mem['naive']['out'])}); fused temp "
          f"{_mib(mem['fused']['temp'])} (+args {_mib(mem['fused']['args'])}, out {_mib(mem['fused']['out'])})",
          flush=True)
    tn = tf = None
    note = ""
    if not args.no_time:
      avail = mem_available()
      limit = int(args.mem_fraction * avail)
      if mem["naive"]["need"] > limit:
        note = (f"naive not run: needs {mem['naive']['need']:,} bytes ({_mib(mem['naive']['need'])}) > "
                f"{args.mem_fraction:g} x MemAvailable {_mib(avail)}")
        del compiled["naive"]
      args_ = inputs(n, h, v, dtype)
      load0 = os.getloadavg()[0]
      times, reps = time_paths(compiled, args_, args.repeats, args.budget)
      del args_
      tf = statistics.median(times["fused"])
      tn = statistics.median(times["naive"]) if "naive" in times else None
      detail = "; ".join(f"{k} {[round(s, 3) for s in ts]}" for k, ts in times.items())
      rounds = f"{reps} timed round(s) after warm-up" if reps else "warm-up call only (round > --budget)"
      print(f"# {n}x{h}x{v}: {rounds}: {detail}; load avg {load0:.1f} -> "
            f"{os.getloadavg()[0]:.1f}" + (f"; {note}" if note else ""), flush=True)
    del compiled
    gc.collect()
    mn, mf = mem["naive"]["temp"], mem["fused"]["temp"]
    row = (f"| {n}x{h}x{v} | {_mib(mn)} | {_mib(mf)} | {mn / max(mf, 1):.0f}x | "
           f"{_secs(tn) if tn is not None or tf is None else 'not run (' + _mib(mem['naive']['need']) + ')'} | "
           f"{_secs(tf)} | {'-' if tn is None else f'{tf / tn:.2f}'} |")
    rows.append(row)
    print(row, flush=True)
  print("\n| N x H x V | naive temp | fused temp | memory ratio | naive fwd+bwd (s) | fused fwd+bwd (s) "
        "| fused / naive time |")
  print("|---|---|---|---|---|---|---|")
  print("\n".join(rows), flush=True)


if __name__ == "__main__":
  main()
