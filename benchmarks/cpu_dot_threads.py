"""Does XLA:CPU use every core for the decode loop's few-row matmuls (issue #53 item 2)?

A decode step multiplies ``M`` rows (the batch: 8 or 32 in ``real_model_bench.py``) by every weight matrix. This
times a chain of SmolLM2-135M's MLP matmuls (``[M, 576] x [576, 3072]``, then ``[M, 1536] x [1536, 576]``, each
layer's input the last one's output, as in a decode step) for ``M`` from 1 to 512 rows, in both of rljax's forms:
``dot_t`` (the weight stored ``[out, in]``, the decode loop's form, ``rljax.models._dots.dot_t``) and ``x @ W``
(stored ``[in, out]``, the training forward's). Each setting runs in a fresh process twice: pinned to one core
(``os.sched_setaffinity`` before JAX starts, so XLA:CPU's thread pool has one thread) and on all the cores this
process may use. The same two processes measure a streaming read (``roofline.stream_read``: a jitted float32
sum over 1 GiB, and one such sum per core on host threads).

The all-cores / one-core column says whether a matmul of that many rows is spread over the cores: about 1.0x
means it ran on one thread while the others waited. Best of ``--reps`` calls after a warm-up.

    python benchmarks/cpu_dot_threads.py
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _peer_rules as rules  # noqa: E402

ROWS = (1, 8, 32, 64, 128, 256, 512)
H, F, LAYERS = 576, 1536, 8  # SmolLM2-135M's hidden and MLP sizes

_CHILD = """
import json, os, sys, time
cores = json.loads(sys.argv[1])
if cores:
  os.sched_setaffinity(0, set(cores))
import jax, jax.numpy as jnp
sys.path.insert(0, sys.argv[2])
from rljax.models._dots import dot_t
from roofline import stream_read
rows, H, F, L, reps = json.loads(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
key = jax.random.key(0)
gate_up = [jax.random.normal(jax.random.fold_in(key, i), (2 * F, H)) * 0.02 for i in range(L)]  # [out, in]
down = [jax.random.normal(jax.random.fold_in(key, 100 + i), (H, F)) * 0.02 for i in range(L)]
gate_up_in_out = [w.T.copy() for w in gate_up]  # [in, out]
down_in_out = [w.T.copy() for w in down]

def decode_form(x, gu, d):
  for a, b in zip(gu, d):
    h = dot_t(x, a)
    x = x + dot_t(jnp.tanh(h[:, :F]) * h[:, F:], b)
  return x

def stored_form(x, gu, d):
  for a, b in zip(gu, d):
    h = x @ a
    x = x + (jnp.tanh(h[:, :F]) * h[:, F:]) @ b
  return x

def best(f, *args):
  f(*args).block_until_ready()
  out = float("inf")
  for _ in range(reps):
    t = time.perf_counter()
    f(*args).block_until_ready()
    out = min(out, time.perf_counter() - t)
  return out

res = {"threads": len(os.sched_getaffinity(0)), "dot_t": {}, "x @ W": {}}
for m in rows:
  x = jnp.ones((m, H), jnp.float32)
  flop = 2.0 * m * H * 3 * F * L
  res["dot_t"][m] = flop / best(jax.jit(decode_form), x, gate_up, down) / 1e9
  res["x @ W"][m] = flop / best(jax.jit(stored_form), x, gate_up_in_out, down_in_out) / 1e9
res["stream"] = stream_read(1 << 30, parts=res["threads"])
print("RESULT " + json.dumps(res))
"""


def run_child(cores: list, reps: int) -> dict:
  here = os.path.dirname(os.path.abspath(__file__))
  env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join(
      [os.path.dirname(here)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
  r = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(cores), here, json.dumps(ROWS), str(H), str(F),
                      str(LAYERS), str(reps)], capture_output=True, text=True, env=env, check=False)
  lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
  if r.returncode or not lines:
    raise SystemExit(f"the child on cores {cores or 'all'} failed:\n{r.stderr[-2000:]}")
  return json.loads(lines[-1][len("RESULT "):])


def table(one: dict, every: dict, guard: "rules.LoadGuard") -> str:
  n = every["threads"]
  out = [f"| rows M | form | 1 core GFLOP/s | {n} cores GFLOP/s | {n} cores / 1 core |", "|---|---|---|---|---|"]
  for form in ("dot_t", "x @ W"):
    for m in ROWS:
      a, b = one[form][str(m)], every[form][str(m)]
      out.append(f"| {m} | {form} | {a:.1f} | {b:.1f} | {guard.ratio(b / a)} |")
  s1, sn = one["stream"], every["stream"]
  out.append(f"streaming read: 1 core {s1['bytes_per_s'] / 1e9:.1f} GB/s, {n} cores {sn['bytes_per_s'] / 1e9:.1f} "
             f"GB/s ({guard.ratio(sn['bytes_per_s'] / s1['bytes_per_s'])})")
  return "\n".join(out)


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--reps", type=int, default=10, help="timed calls per setting (best of)")
  rules.add_rules_args(ap)
  args = ap.parse_args(argv)
  guard = rules.LoadGuard.now(args.allow_load)
  print(guard.header(), flush=True)
  cores = sorted(os.sched_getaffinity(0))
  print(f"SmolLM2-135M MLP chain, {LAYERS} layers: [M, {H}] x [{H}, {2 * F}], then [M, {F}] x [{F}, {H}]; best of "
        f"{args.reps}", flush=True)
  one = run_child(cores[:1], args.reps)
  every = run_child([], args.reps)
  print(table(one, every, guard))
  return 0


if __name__ == "__main__":
  sys.exit(main())
