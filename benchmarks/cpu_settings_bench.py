"""When do the CPU settings (concurrent rollout chunks, update micro-batches) make a GRPO step faster?

Times one GRPO step (rollout + update, ``grpo_step_bench.RljaxVariant``) with four settings, interleaved step
by step in one process: defaults; ``concurrent_chunks=2`` only; ``num_microbatches=4`` only; both. Prints each
median and its ratio to the defaults. Conditions:

* ``--model bench`` (the GRPO benchmark's 4.4M-parameter model) or ``--model demo`` (the main job's 133K one:
  2 layers, d=64, vocab 16, 32 prompts x 8 samples, 16 + 6 tokens);
* ``--prompts N``: prompts per step (samples per prompt stay);
* ``--hog``: a busy-loop process runs alongside (another job on the machine);
* cores: run under ``taskset -c 0`` for one core.

    python benchmarks/cpu_settings_bench.py --model bench
    taskset -c 0 python benchmarks/cpu_settings_bench.py --model bench
    python benchmarks/cpu_settings_bench.py --model bench --hog
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpo_step_bench as B  # noqa: E402

_DEMO = dict(V=16, H=64, L=2, NH=4, D=16, F=256, P=32, G=8, PROMPT_LEN=16, NEW=6)


def _hog():
  x = 0
  while True:
    x = (x * 1103515245 + 12345) % 2147483648


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--model", choices=("bench", "demo"), default="bench")
  ap.add_argument("--prompts", type=int, default=None, help="prompts per step (default: the model's)")
  ap.add_argument("--steps", type=int, default=5)
  ap.add_argument("--rounds", type=int, default=3)
  ap.add_argument("--hog", action="store_true", help="run a busy-loop process alongside")
  args = ap.parse_args(argv)
  if args.model == "demo":
    for k, v in _DEMO.items():
      setattr(B, k, v)
  if args.prompts:
    B.P = args.prompts
  variants = {"defaults": {}, "chunks=2": dict(rollout_chunks=2), "micro=4": dict(num_microbatches=4),
              "both": dict(rollout_chunks=2, num_microbatches=4)}
  built = {name: B.RljaxVariant(**kw) for name, kw in variants.items()}
  for v in built.values():
    v.run(3)  # compile + warm up
  hog = None
  if args.hog:
    hog = multiprocessing.Process(target=_hog, daemon=True)
    hog.start()
  times = {name: [] for name in variants}
  try:
    for _ in range(args.rounds):
      for _ in range(args.steps):
        for name, v in built.items():
          times[name] += v.run(1)
  finally:
    if hog is not None:
      hog.terminate()
  med = {n: statistics.median(t) for n, t in times.items()}
  cores = len(os.sched_getaffinity(0))
  print(json.dumps({"model": args.model, "prompts": B.P, "samples": B.G, "cores": cores, "hog": args.hog,
                    "median_step_s": {n: round(t, 4) for n, t in med.items()},
                    "ratio_to_defaults": {n: round(t / med["defaults"], 3) for n, t in med.items()}}), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
