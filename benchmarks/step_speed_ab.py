"""The real-model GRPO step of two source trees, interleaved: did a change to the trainer make it slower?

Runs ``rljax train --config smollm2_addition`` (SmolLM2-135M-Instruct, 8 prompts x 4, evaluations cut to 4
problems, no checkpoints) from tree A and tree B in turn, ``--rounds`` times (A, B, A, B, ...), each tree with its
own persistent compile cache (so a tree's second round skips its compile), and prints per run the median of the
RL steps' ``time/sample_s`` and ``time/update_s`` from step 2 on (step 1 compiles), with each step's reward and
loss, which must be equal between the trees for a change that keeps the numbers::

    git worktree add /tmp/before <old commit>
    JAX_PLATFORMS=cpu python benchmarks/step_speed_ab.py /tmp/before . --rounds 2 --work /tmp/step_ab

Each tree runs with ``PYTHONPATH=<tree>`` under the current interpreter (the same installed packages). The load
average at each start is printed; on a machine with load above its core count the times say little.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

SETTINGS = ["rl.steps=5", "eval.num_problems=4", "eval.batch_size=4", "eval.num_samples=1", "eval.pass_k=1",
            "checkpoint.enabled=false", "progress=false"]


def _load() -> float:
  with open("/proc/loadavg", encoding="utf-8") as f:
    return float(f.read().split()[0])


def run_tree(tree: str, out: str, cache: str, config: str) -> list[dict]:
  """One ``rljax train`` of ``tree``'s code into ``out``; returns its RL rows from step 2 on."""
  shutil.rmtree(out, ignore_errors=True)
  argv = [sys.executable, "-m", "rljax.cli", "train", "--config", config, "--out-dir", out]
  for s in SETTINGS:
    argv += ["--set", s]
  env = dict(os.environ, PYTHONPATH=os.path.abspath(tree), JAX_PLATFORMS="cpu", RLJAX_COMPILE_CACHE=cache)
  done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
  if done.returncode:
    raise SystemExit(f"{tree}: rljax train exited {done.returncode}:\n{done.stderr[-2000:]}")
  with open(os.path.join(out, "metrics.jsonl"), encoding="utf-8") as f:
    rows = [json.loads(line) for line in f]
  return [r for r in rows if "time/update_s" in r and r["step"] >= 2]


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("tree_a")
  ap.add_argument("tree_b")
  ap.add_argument("--rounds", type=int, default=2)
  ap.add_argument("--config", default="smollm2_addition")
  ap.add_argument("--work", default="/tmp/step_speed_ab")
  args = ap.parse_args(argv)
  numbers = {}
  for r in range(1, args.rounds + 1):
    for side, tree in (("A", args.tree_a), ("B", args.tree_b)):
      load = _load()
      rows = run_tree(tree, os.path.join(args.work, f"run_{side}"), os.path.join(args.work, f"cache_{side}"),
                      args.config)
      med = {k: statistics.median(x[k] for x in rows) for k in ("time/sample_s", "time/update_s")}
      numbers[side] = [(x["rollout/reward_mean"], x["loss"]) for x in rows]
      print(f"round {r} {side} ({tree}), load {load:.2f} at start: rollout {med['time/sample_s']:.2f} s, "
            f"update {med['time/update_s']:.2f} s (medians of steps 2-{rows[-1]['step']})", flush=True)
  same = numbers["A"] == numbers["B"]
  print("rewards and losses per step:", "equal" if same else f"DIFFERENT: A {numbers['A']} B {numbers['B']}")
  return 0 if same else 1


if __name__ == "__main__":
  sys.exit(main())
