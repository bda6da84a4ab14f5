"""Tokens/s of the asynchronous runner across 2 processes vs the same split inside one process (issue #21).

Both runs are ``rljax.train.train`` on the same config (the tiny addition task, a random-weight 2-layer d=128
model, 8 prompts x 4 samples, 24 new tokens, no SFT), the mesh ``fsdp=2N`` split N / N
(``rl.async_rollout_devices=N``, ``--side-devices N``), staleness ``eta``, the plain (non-interruptible)
sampler:

  * ``one process``: 2N fake CPU devices; the rollout side is the producer thread on the first N, the trainer
    on the others (``rljax.train._async``);
  * ``two processes``: 2 processes x N fake CPU devices (``jax.distributed``); process 0 only samples,
    process 1 only trains, exchanging ``jax.device_put`` reshards (``rljax.train._multiproc_async``).

Reported per run, from ``metrics.jsonl`` (steps after the first two, whose compiles dominate): trained
completion tokens per second of the RL stage's wall time, the trainer's idle fraction at the end, the mean
update time (``time/update_s``) and the weight transfer time per version. Both runs use the machine's cores (fake devices share them; the processes
are not pinned), so the ratio says what the process boundary costs or gains here, not what separate hosts give.

  python benchmarks/multiproc_async_throughput.py [--steps 12] [--eta 1] [--side-devices 2]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

OVERRIDES = ["sft.steps=0", "model.hidden_size=128", "model.num_layers=2", "model.num_heads=4",
             "model.num_kv_heads=4", "model.intermediate_size=512", "model.max_seq_len=64", "rl.num_prompts=8",
             "rl.group_size=4", "rl.max_new_tokens=24", "rl.num_microbatches=1", "eval.num_problems=8",
             "eval.batch_size=8", "eval.num_samples=1", "eval.pass_k=1", "checkpoint.enabled=false",
             "log_every=1"]


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def _train(out_dir: str, steps: int, eta: int, side: int) -> None:
  from rljax.train import apply_overrides, tiny_config, train  # pylint: disable=import-outside-toplevel
  train(apply_overrides(tiny_config(out_dir), OVERRIDES + [f"rl.steps={steps}", f"rl.async_staleness={eta}",
                                                           f"mesh.fsdp={2 * side}", f"rl.async_rollout_devices={side}"]))


def _env(devices: int) -> dict:
  flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if "force_host_platform_device_count" not in f]
  return dict(os.environ, JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1",
              XLA_FLAGS=" ".join(flags + [f"--xla_force_host_platform_device_count={devices}"]))


def _run(args_of, envs: list) -> None:
  """Runs this script as ``len(envs)`` worker processes (``args_of(i)``: process ``i``'s arguments)."""
  procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), *args_of(i)], env=e)
           for i, e in enumerate(envs)]
  codes = [p.wait(timeout=1800) for p in procs]
  if any(codes):
    raise SystemExit(f"workers exited with {codes}")


def _summary(out_dir: str, skip: int = 2) -> dict:
  rows = [json.loads(line) for line in open(os.path.join(out_dir, "metrics.jsonl"), encoding="utf-8")]
  rows = [r for r in rows if r.get("stage") == "rl" and "loss" in r]
  timed = rows[skip:]
  tokens = sum(r["rollout/completion_len"] * r["rollout/valid_rows"] for r in timed)
  wall = timed[-1]["time/rl_s"] - rows[skip - 1]["time/rl_s"]
  return {"steps": len(timed), "tokens": tokens, "wall_s": wall, "tok_s": tokens / wall,
          "idle": rows[-1]["async/trainer_idle_fraction"],
          "weights_ms": 1e3 * sum(r.get("async/weight_transfer_s", 0.0) for r in timed) / len(timed),
          "update_ms": 1e3 * sum(r["time/update_s"] for r in timed) / len(timed)}


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--steps", type=int, default=12)
  ap.add_argument("--eta", type=int, default=1)
  ap.add_argument("--side-devices", type=int, default=2, help="devices per side (per process with 2 processes)")
  ap.add_argument("--worker", nargs=3, metavar=("PROCESS", "PORT", "OUT"), help=argparse.SUPPRESS)
  a = ap.parse_args()
  if a.worker:
    process_id, port, out = int(a.worker[0]), int(a.worker[1]), a.worker[2]
    if port:
      from rljax import parallel as par  # pylint: disable=import-outside-toplevel
      assert par.maybe_initialize_distributed(env={
          "RLJAX_COORDINATOR": f"localhost:{port}", "RLJAX_NUM_PROCESSES": "2", "RLJAX_PROCESS_ID": str(process_id),
          "RLJAX_TRANSFER_ADDRESS": os.environ["TRANSFER_ADDRESS"]})
    _train(out, a.steps, a.eta, a.side_devices)
    return
  root = tempfile.mkdtemp(prefix="rljax_mp_bench_")
  n = a.side_devices
  common = ["--steps", str(a.steps), "--eta", str(a.eta), "--side-devices", str(n), "--worker"]
  results = {}
  t = time.perf_counter()
  _run(lambda i: common + ["0", "0", os.path.join(root, "one")], [_env(2 * n)])
  print(f"one process done ({time.perf_counter() - t:.0f} s)", flush=True)
  results[f"one process, {2 * n} devices (threads)"] = _summary(os.path.join(root, "one"))
  t, port = time.perf_counter(), _free_port()
  envs = [dict(_env(n), TRANSFER_ADDRESS=f"127.0.0.1:{_free_port()}") for _ in range(2)]
  _run(lambda i: common + [str(i), str(port), os.path.join(root, "two")], envs)
  print(f"two processes done ({time.perf_counter() - t:.0f} s)", flush=True)
  results[f"two processes x {n} devices"] = _summary(os.path.join(root, "two"))
  base = next(iter(results.values()))["tok_s"]
  print(f"\neta={a.eta}, {a.steps} steps (the first 2 not timed), {n} devices per side\n")
  print("| run | trained tokens/s | vs one process | trainer idle fraction | update (ms) | "
        "weight transfer (ms/version) |")
  print("|---|---|---|---|---|---|")
  for name, r in results.items():
    print(f"| {name} | {r['tok_s']:.0f} | {r['tok_s'] / base:.2f}x | {r['idle']:.2f} | {r['update_ms']:.0f} | "
          f"{r['weights_ms']:.1f} |")


if __name__ == "__main__":
  main()
