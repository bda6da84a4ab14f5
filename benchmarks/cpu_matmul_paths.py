"""Does any XLA:CPU setting make a bfloat16 matmul faster than the float32 one (issue #53 item 3)?

torch's bfloat16 matmul uses a CPU's AMX or AVX512-BF16 units where it has them (that is what makes TRL's
``bf16=True`` row fast on such a CPU). This times a ``[n, n] @ [n, n]`` ``jnp.dot`` under jit in three forms:
float32; bfloat16 operands and output; bfloat16 operands with a float32 output (``preferred_element_type``: on an
AVX512-BF16 CPU only this form reached the units, through the default YNNPACK path; docs/benchmarks.md,
2026-12-07), in a fresh process per XLA:CPU library path (``XLA_FLAGS``: the default; oneDNN; XNNPACK; YNNPACK —
the flags jaxlib's own binary lists), best of ``--reps`` calls after a warm-up, with torch's ``mm`` at the cores
beside it (``--torch-python``, a peer venv).
The header names the CPU and its matrix units (``_peer_rules.cpu_line``): on a CPU without AMX / AVX512-BF16 no
library can reach bfloat16 units, and the table says what each path does with bfloat16 there. A path whose
flag this jaxlib does not accept is printed as refused, with XLA's message.

    python benchmarks/cpu_matmul_paths.py --torch-python /tmp/trl-venv/bin/python
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _peer_rules as rules  # noqa: E402

# name -> XLA_FLAGS (the library-call paths XLA:CPU has; names from `strings libjax_common.so | grep xla_cpu_`)
PATHS = {
    "default": "",
    "onednn": "--xla_cpu_use_onednn=true --xla_cpu_experimental_onednn_custom_call=true",
    "onednn fusion dot": "--xla_cpu_experimental_onednn_fusion_type=dot",
    "xnnpack fusion dot": "--xla_cpu_experimental_xnn_fusion_type=dot",
    "xnnpack graph greedy": "--xla_cpu_use_xnnpack=true --xla_cpu_experimental_xnn_graph_fusion_mode="
                            "XNN_GRAPH_FUSION_MODE_GREEDY",
    "ynnpack fusion dot": "--xla_cpu_experimental_ynn_fusion_type=dot",
}

_JAX = """
import json, sys, time
import jax, jax.numpy as jnp
n, reps = int(sys.argv[1]), int(sys.argv[2])
out = {}
# float32; bfloat16 operands and output; bfloat16 operands with a float32 output (preferred_element_type)
for name, dt, out_dt in (("float32", "float32", None), ("bfloat16", "bfloat16", None),
                         ("bfloat16_f32", "bfloat16", jnp.float32)):
  a = jax.random.normal(jax.random.key(0), (n, n)).astype(dt)
  b = jax.random.normal(jax.random.key(1), (n, n)).astype(dt)
  f = jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=out_dt))
  f(a, b).block_until_ready()
  best = min((lambda t0: (f(a, b).block_until_ready(), time.perf_counter() - t0)[1])(time.perf_counter())
             for _ in range(reps))
  out[name] = 2 * n ** 3 / best / 1e9
print("RESULT " + json.dumps(out))
"""

_TORCH = """
import json, sys, time
import torch
n, reps, threads = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
out = {}
for dt in (torch.float32, torch.bfloat16):
  a, b = torch.randn(n, n, dtype=dt), torch.randn(n, n, dtype=dt)
  torch.mm(a, b)
  best = min((lambda t0: (torch.mm(a, b), time.perf_counter() - t0)[1])(time.perf_counter()) for _ in range(reps))
  out[str(dt).split(".")[1]] = 2 * n ** 3 / best / 1e9
print("RESULT " + json.dumps(out))
"""


def _run(cmd: list, env: dict) -> dict | str:
  p = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
  line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
  if line is None:
    return "refused: " + (p.stderr.strip().splitlines() or ["(no output)"])[-1][:160]
  return json.loads(line[len("RESULT "):])


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--n", type=int, default=2048)
  ap.add_argument("--reps", type=int, default=5)
  ap.add_argument("--torch-python", default="", help="a peer venv's python (torch) for the torch rows")
  rules.add_rules_args(ap)
  args = ap.parse_args(argv)
  guard = rules.LoadGuard.now(args.allow_load)
  print(guard.header(), flush=True)
  print(f"jax {__import__('jax').__version__}, jaxlib {__import__('jaxlib').__version__}; "
        f"[{args.n}, {args.n}] @ [{args.n}, {args.n}], best of {args.reps} (GFLOP/s)", flush=True)
  print("| path | float32 | bfloat16 | bfloat16 / float32 | bfloat16 -> float32 out | that / float32 |")
  print("|---|---|---|---|---|---|")
  rows = [(name, _run([sys.executable, "-c", _JAX, str(args.n), str(args.reps)],
                      {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": flags}))
          for name, flags in PATHS.items()]
  if args.torch_python:
    for t in sorted({1, rules.core_count()}):
      rows.append((f"torch mm, {t} thread(s)", _run([args.torch_python, "-c", _TORCH, str(args.n), str(args.reps),
                                                    str(t)], dict(os.environ))))
  for name, r in rows:
    if isinstance(r, str):
      print(f"| {name} | {r} | | | | |")
    else:
      mixed = r.get("bfloat16_f32")  # torch's mm has no float32-output form of a bfloat16 product
      tail = (f"{mixed:.1f} | {guard.ratio(mixed / r['float32'])}" if mixed else "– | –")
      print(f"| {name} | {r['float32']:.1f} | {r['bfloat16']:.1f} | {guard.ratio(r['bfloat16'] / r['float32'])} | "
            f"{tail} |")
  return 0


if __name__ == "__main__":
  sys.exit(main())
