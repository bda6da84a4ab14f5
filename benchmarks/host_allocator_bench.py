"""Page faults and time of a jitted CPU step with glibc's default allocator and with the one rljax's command line
sets (``rljax.configure_host_allocator``: freed memory kept for reuse).

    python benchmarks/host_allocator_bench.py [--size 4096] [--rounds 3] [--calls 5]

Each round runs the same step in two fresh processes, one per setting (the setting must be made before JAX
starts), order alternating; each process times ``--calls`` calls after two warm-up calls and reports the median
and the minor page faults per call. The step: ``y = tanh(x @ x.T)``, then ``sum(sin(y) @ y)``, with ``x`` of
``size x 512``: XLA:CPU allocates and frees its ``size x size`` float32 buffers (64 MiB each at 4096) within every
call, as it does a model's activations and temporaries in a train step. Ratios are of medians measured in the same
run.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from rljax.host_allocator import GLIBC_ENV  # pylint: disable=wrong-import-position

_STEP = """
import json, resource, statistics, sys, time
import rljax
message = rljax.configure_host_allocator()
import jax, jax.numpy as jnp
size, calls = int(sys.argv[1]), int(sys.argv[2])
@jax.jit
def step(x):
  y = jnp.tanh(x @ x.T)
  return jnp.sum(jnp.sin(y) @ y)
x = jnp.ones((size, 512), jnp.float32) / 512
for _ in range(2):
  step(x).block_until_ready()
times, faults = [], []
for _ in range(calls):
  f0, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
  step(x).block_until_ready()
  times.append(time.perf_counter() - t0)
  faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
print(json.dumps({"s": statistics.median(times), "faults": statistics.median(faults), "message": message}))
"""


def run_one(mode: str, size: int, calls: int) -> dict:
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  env = {k: v for k, v in os.environ.items() if k not in GLIBC_ENV}
  env.update(RLJAX_HOST_ALLOCATOR=mode, PYTHONPATH=root + os.pathsep + env.get("PYTHONPATH", ""))
  out = subprocess.run([sys.executable, "-c", _STEP, str(size), str(calls)], capture_output=True, text=True,
                       env=env, check=True)
  return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--size", type=int, default=4096)
  ap.add_argument("--rounds", type=int, default=3)
  ap.add_argument("--calls", type=int, default=5)
  args = ap.parse_args(argv)
  res = {"keep": [], "system": []}
  for r in range(args.rounds):
    for mode in (("keep", "system") if r % 2 == 0 else ("system", "keep")):
      res[mode].append(run_one(mode, args.size, args.calls))
      print(f"round {r + 1}, {mode}: {res[mode][-1]['s']:.3f} s, {res[mode][-1]['faults']:,.0f} page faults per call",
            flush=True)
  keep, system = (statistics.median(x["s"] for x in res[m]) for m in ("keep", "system"))
  print(f"\n{res['keep'][0]['message']}\n")
  print("| allocator | s per call (median) | page faults per call |\n|---|---|---|")
  for m in ("system", "keep"):
    print(f"| {m} | {statistics.median(x['s'] for x in res[m]):.3f} | "
          f"{statistics.median(x['faults'] for x in res[m]):,.0f} |")
  per_round = ", ".join(f"{s['s'] / k['s']:.2f}x" for s, k in zip(res["system"], res["keep"]))
  print(f"\nkept memory: {system / keep:.2f}x the calls per second of glibc's defaults (per round {per_round})")
  return 0


if __name__ == "__main__":
  sys.exit(main())
