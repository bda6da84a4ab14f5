"""Weight and batch transfers between two local processes (``jax.device_put`` across sub-meshes), timed.

``python benchmarks/multiproc_transfer.py`` launches 2 processes x 2 CPU devices (``jax.distributed``, the CPU
backend's cross-host transfers through ``jax_cross_host_transfer_socket_address``), builds the mesh ``fsdp=4``
split 2 / 2 (``rljax.parallel.split_mesh``: process 0 the rollout side, process 1 the training side), and times,
after a warm-up:

* a weight version: the parameters of ``async_throughput.py``'s model (vocab 256, hidden 128, 2 layers;
  590,464 float32 parameters), training -> rollout, in their logical-axis shardings;
* a batch: the multi-process runner's message for 32 rows x 64 positions (tokens, masks, behaviour log-probs
  and entropies, finish reasons, per-row and per-token versions), rollout -> training.

Each is a ping-pong (there, then back the same way, the sender's ``device_put`` returning at once and the
receiver's waiting for the data); the figure is half the round trip seen by the side that starts it, so it
does not depend on the two processes' clocks or on when the other side enters.
"""
import json
import os
import socket
import subprocess
import sys
import time

import numpy as np

REPEATS = 10


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def _worker(process_id: int, port: int) -> None:
  import jax  # pylint: disable=import-outside-toplevel
  jax.config.update("jax_cross_host_transfer_socket_address", os.environ["TRANSFER_ADDRESS"])
  from flax import nnx  # pylint: disable=import-outside-toplevel
  from rljax import parallel as par  # pylint: disable=import-outside-toplevel
  from rljax.models import ModelConfig, Transformer  # pylint: disable=import-outside-toplevel
  assert par.maybe_initialize_distributed(f"localhost:{port}", 2, process_id, env={})
  rollout, train = par.split_mesh(par.make_mesh(par.MeshConfig(fsdp=-1)), 2)
  cfg = ModelConfig(vocab_size=256, hidden_size=128, num_layers=2, num_heads=4, num_kv_heads=4, head_dim=32,
                    intermediate_size=512, max_position_embeddings=128)
  _, params, _ = nnx.split(Transformer(cfg, rngs=nnx.Rngs(0)), nnx.Param, ...)
  host = jax.device_get(params)
  b, t = 32, 64
  batch = {"tokens": np.zeros((b, t), np.int32), "prompt_mask": np.zeros((b, t), np.uint8),
           "completion_mask": np.zeros((b, t), np.uint8), "logp_behavior": np.zeros((b, t), np.float32),
           "entropy_behavior": np.zeros((b, t), np.float32), "finish_reason": np.zeros((b,), np.int32),
           "policy_version": np.zeros((b,), np.int32), "token_version": np.zeros((b, t), np.int32)}
  cases = {"weights": (host, par.state_shardings(host, train), par.state_shardings(host, rollout), 1),
           "batch": (batch, par.row_sharding(rollout, b), par.row_sharding(train, b), 0)}
  out = {}
  for name, (tree, src, dst, starter) in cases.items():
    here, there = par.place_global(tree, src), par.place_global(tree, dst)  # each side holds one of them
    times = []
    for i in range(REPEATS + 2):
      t0 = time.perf_counter()
      if process_id == starter:  # there and back: send from `src`, receive into it again
        jax.device_put(here, dst)
        jax.block_until_ready(jax.device_put(there, src))
      else:
        got = jax.block_until_ready(jax.device_put(here, dst))
        jax.device_put(got, src)
      if process_id == starter and i >= 2:
        times.append((time.perf_counter() - t0) / 2)
    if process_id == starter:
      out[name] = {"bytes": par.tree_bytes(tree), "mean_ms": 1e3 * float(np.mean(times)),
                   "min_ms": 1e3 * float(np.min(times)), "max_ms": 1e3 * float(np.max(times))}
  from jax.experimental import multihost_utils  # pylint: disable=import-outside-toplevel
  multihost_utils.sync_global_devices("done")
  print("RESULT " + json.dumps(out), flush=True)


def main() -> None:
  port, procs = _free_port(), []
  for i in range(2):
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1", TRANSFER_ADDRESS=f"127.0.0.1:{_free_port()}",
               XLA_FLAGS="--xla_force_host_platform_device_count=2",
               PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                           os.environ.get("PYTHONPATH", "")]))
    procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", str(i), str(port)], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
  results = {}
  for i, p in enumerate(procs):
    log = p.communicate(timeout=600)[0]
    if p.returncode:
      raise SystemExit(f"process {i} failed:\n{log[-3000:]}")
    results.update(json.loads(next(l for l in log.splitlines() if l.startswith("RESULT "))[7:]))
  print(f"{'transfer':<10} {'bytes':>10} {'mean (ms)':>10} {'min (ms)':>10} {'max (ms)':>10} {'MB/s':>8}")
  for name, r in results.items():
    print(f"{name:<10} {r['bytes']:>10,} {r['mean_ms']:>10.2f} {r['min_ms']:>10.2f} {r['max_ms']:>10.2f} "
          f"{r['bytes'] / r['mean_ms'] / 1e3:>8.1f}")


if __name__ == "__main__":
  if len(sys.argv) == 4 and sys.argv[1] == "--worker":
    _worker(int(sys.argv[2]), int(sys.argv[3]))
  else:
    main()
