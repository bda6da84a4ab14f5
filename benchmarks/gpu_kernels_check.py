"""GPU check of the fused log-prob / entropy kernels (run on a CUDA machine).

NOT RUN YET: written in a session without a GPU.

1. Correctness gate on the device: every impl vs the materialising reference
   at a small shape (f32; forward and both gradients, relative error).
2. Speed at the RL shape N=32768, H=4096, V=152064 in bf16: forward and
   forward+backward time of each impl, a same-shape ``X @ W`` matmul timed in
   the same process, the achieved fraction of the ``8 N H V`` FLOP roofline
   (against the measured matmul rate and against the 989 TF/s H200 spec), and
   peak device memory. Each impl runs in its own subprocess so that
   ``memory_stats()['peak_bytes_in_use']`` is clean.

  python benchmarks/gpu_kernels_check.py            # everything (~3-6 min on H200)
  python benchmarks/gpu_kernels_check.py --impls xla --skip-naive
Writes ``gpu_kernels_check.json`` under $OUT (or the cwd) and prints a table.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

SPEC_FLOPS = 989e12  # H200 dense bf16


def _timeit(fn, *args, repeats=5):
  import jax
  jax.block_until_ready(fn(*args))
  ts = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    ts.append(time.perf_counter() - t0)
  ts.sort()
  return ts[len(ts) // 2]


def _inputs(n, h, v, dtype, seed=0):
  import jax
  import jax.numpy as jnp
  k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
  x = jax.random.normal(k1, (n, h), jnp.float32).astype(dtype)
  w = (jax.random.normal(k2, (h, v), jnp.float32) * (2.0 / h ** 0.5)).astype(dtype)
  t = jax.random.randint(k3, (n,), 0, v)
  return x, w, t


def one(impl: str, n: int, h: int, v: int) -> dict:
  """Runs in a fresh process: correctness gate then timing for ``impl``."""
  import jax
  import jax.numpy as jnp
  import numpy as np
  from rljax.kernels import logprob_and_entropy

  res = {"impl": impl, "device": str(jax.devices()[0].device_kind), "N": n, "H": h, "V": v}

  def loss_fn(impl_):
    def loss(x, w, t):
      lp, ent = logprob_and_entropy(x, w, t, impl=impl_)
      return jnp.sum(lp) + 0.5 * jnp.sum(ent), (lp, ent)
    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1), has_aux=True))

  if impl == "matmul":
    x, w, _ = _inputs(n, h, v, jnp.bfloat16)
    mm = jax.jit(lambda x, w: jnp.dot(x, w, preferred_element_type=jnp.float32).sum())
    res["t_fwd_s"] = _timeit(mm, x, w)
    res["matmul_tflops"] = 2 * n * h * v / res["t_fwd_s"] / 1e12
  else:
    if impl != "reference":  # correctness gate on the device, f32, small shape
      xs, ws, ts = _inputs(512, 256, 4000, jnp.float32, seed=1)
      (_, (lp, ent)), (gx, gw) = loss_fn(impl)(xs, ws, ts)
      (_, (lp0, ent0)), (gx0, gw0) = loss_fn("reference")(xs, ws, ts)
      rel = lambda a, b: float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(b)))
      res["gate_rel_err"] = {k: rel(a, b) for k, a, b in
                             (("logp", lp, lp0), ("entropy", ent, ent0), ("dx", gx, gx0), ("dw", gw, gw0))}
      res["gate_ok"] = bool(max(res["gate_rel_err"].values()) <= 1e-4)
    x, w, t = _inputs(n, h, v, jnp.bfloat16)
    fwd = jax.jit(lambda x, w, t: logprob_and_entropy(x, w, t, impl=impl))
    step = loss_fn(impl)
    res["t_fwd_s"] = _timeit(fwd, x, w, t)
    res["t_fwdbwd_s"] = _timeit(step, x, w, t)
    lp, ent = fwd(x, w, t)
    res["logp_max"] = float(jnp.max(lp))
    res["entropy_range"] = [float(jnp.min(ent)), float(jnp.max(ent)), float(np.log(v))]
    res["temp_bytes_fwdbwd"] = step.lower(x, w, t).compile().memory_analysis().temp_size_in_bytes
  stats = jax.devices()[0].memory_stats() or {}
  res["peak_bytes"] = stats.get("peak_bytes_in_use")
  return res


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--one", help=argparse.SUPPRESS)
  ap.add_argument("--impls", default="xla,pallas_gpu")
  ap.add_argument("--skip-naive", action="store_true", help="skip the materialising reference (~60 GB)")
  ap.add_argument("--shape", default="32768,4096,152064")
  ap.add_argument("--timeout", type=int, default=240, help="seconds per subprocess")
  args = ap.parse_args(argv)
  n, h, v = map(int, args.shape.split(","))
  if args.one:
    print("RESULT " + json.dumps(one(args.one, n, h, v)), flush=True)
    return
  impls = ["matmul"] + args.impls.split(",") + ([] if args.skip_naive else ["reference"])
  results = []
  for impl in impls:
    cmd = [sys.executable, __file__, "--one", impl, "--shape", args.shape]
    try:
      out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
      line = [l for l in out.stdout.splitlines() if l.startswith("RESULT ")]
      r = json.loads(line[-1][7:]) if line else {"impl": impl, "error": out.stderr[-3000:]}
    except subprocess.TimeoutExpired:
      r = {"impl": impl, "error": f"timeout after {args.timeout}s"}
    results.append(r)
    print(json.dumps(r), flush=True)
  mm = next((r for r in results if r["impl"] == "matmul" and "t_fwd_s" in r), None)
  flops = 8 * n * h * v
  print(f"\nN={n} H={h} V={v} bf16; roofline = 8NHV = {flops:.3g} FLOP")
  if mm:
    print(f"same-shape X@W: {mm['t_fwd_s'] * 1e3:.2f} ms = {mm['matmul_tflops']:.0f} TF/s")
  print("| impl | gate | fwd (ms) | fwd+bwd (ms) | TF/s (8NHV) | vs matmul rate | vs 989 TF/s | peak mem (GiB) |")
  print("|---|---|---|---|---|---|---|---|")
  for r in results:
    if r["impl"] == "matmul" or "t_fwdbwd_s" not in r:
      if "error" in r:
        print(f"| {r['impl']} | ERROR: {r['error'].splitlines()[-1] if r['error'] else ''} |")
      continue
    tf = flops / r["t_fwdbwd_s"]
    vs_mm = "-" if not mm else f"{tf / (mm['matmul_tflops'] * 1e12):.0%}"
    peak = "-" if r.get("peak_bytes") is None else f"{r['peak_bytes'] / 2**30:.1f}"
    print(f"| {r['impl']} | {r.get('gate_ok', '-')} | {r['t_fwd_s'] * 1e3:.1f} | "
          f"{r['t_fwdbwd_s'] * 1e3:.1f} | {tf / 1e12:.0f} | {vs_mm} | {tf / SPEC_FLOPS:.0%} | {peak} |")
  path = os.path.join(os.environ.get("OUT", "."), "gpu_kernels_check.json")
  with open(path, "w") as f:
    json.dump(results, f, indent=1)
  print(f"wrote {path}")


if __name__ == "__main__":
  main()
