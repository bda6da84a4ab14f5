"""Rollout and training sub-meshes on 8 fake CPU devices: the weight transfer per update, and tokens/s with
shared devices vs split sub-meshes (issue #21; docs/async.md, ``rl.async_rollout_devices``).

The task, model, update and batches are ``async_throughput.py``'s (heavy-tailed lengths, the chunked
interruptible sampler, decoupled PPO). The asynchronous schedule (``Producer`` + ``WeightBox``, staleness
``eta``) runs twice:

  * ``shared``: the train state sharded ``fsdp=8`` over all 8 devices; the producer samples on the same
    devices, from a copy of the parameters published after each update (``rljax.parallel.transfer`` with no
    target: the copy the update's donation needs);
  * ``split 4 / 4``: ``rljax.parallel.split_mesh``: the train state on devices 4-7 (``fsdp=4``), the sampler's
    weights on devices 0-3, each published version resharded onto them (``transfer`` = ``jax.device_put``).

Reported per schedule: trained tokens/s, the trainer's idle fraction, the mean update time, the mean
publish (copy or transfer) time and bytes per update. Every program is compiled before the timing.

  python benchmarks/submesh_transfer.py [--steps 16] [--eta 2]

Fake CPU devices share the machine's cores: a split does not add compute here, it only separates the programs.
"""
from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = " ".join([f for f in os.environ.get("XLA_FLAGS", "").split()
                                    if "force_host_platform_device_count" not in f]
                                   + ["--xla_force_host_platform_device_count=8"])
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import async_throughput as at  # noqa: E402  pylint: disable=wrong-import-position


def run(bench, steps: int, eta: int, train_mesh, rollout_mesh=None) -> dict:
  from rljax import parallel as par  # pylint: disable=import-outside-toplevel
  from rljax.train._async import Producer, WeightBox, Weights  # pylint: disable=import-outside-toplevel
  jax = bench.jax
  state = jax.device_put(bench.fresh_state(), par.train_state_shardings(bench.state0, train_mesh))
  targets = None if rollout_mesh is None else (par.state_shardings(state.params, rollout_mesh),
                                               par.state_shardings(state.model_state, rollout_mesh))
  (params, rest), _, _ = par.transfer((state.params, state.model_state), targets)
  bench.warm_sampler(params, rest)
  tok, cm, lp, _ = bench.chunked(lambda: Weights(0, params, rest, {}), 0)
  bench.update(jax.tree_util.tree_map(bench.jnp.copy, state), tok, cm, lp, 0)  # compiles the sharded update
  box, stop = WeightBox(), threading.Event()
  box.publish(Weights(0, params, rest, {}))
  tokens_done, idle, update_s, transfer_s, nbytes = 0, 0.0, [], [], 0
  t0 = time.perf_counter()
  prod = Producer(lambda k, w: bench.chunked(box.latest, k, stop), box, start=0, stop_at=steps, staleness=eta,
                  stop=stop)
  try:
    for k in range(steps):
      t = time.perf_counter()
      tok, cm, lp, _ = prod.get(k)
      idle += time.perf_counter() - t
      t = time.perf_counter()
      state = bench.update(state, tok, cm, lp, k)
      update_s.append(time.perf_counter() - t)
      (params, rest), seconds, nbytes = par.transfer((state.params, state.model_state), targets)
      transfer_s.append(seconds)
      box.publish(Weights(k + 1, params, rest, {}))
      tokens_done += int(cm.sum())
  finally:
    prod.close()
  wall = time.perf_counter() - t0
  assert all(x.sharding.device_set == set(train_mesh.devices.flat) for x in jax.tree_util.tree_leaves(state.params))
  if rollout_mesh is not None:
    assert all(x.sharding.device_set == set(rollout_mesh.devices.flat) for x in jax.tree_util.tree_leaves(params))
  return {"wall_s": wall, "tokens": tokens_done, "idle_s": idle, "update_s": sum(update_s) / steps,
          "transfer_s": sum(transfer_s) / steps, "transfer_max_s": max(transfer_s), "bytes": nbytes}


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--steps", type=int, default=16)
  ap.add_argument("--eta", type=int, default=2)
  ap.add_argument("--updates", type=int, default=1)
  args = ap.parse_args()
  from rljax import parallel as par  # pylint: disable=import-outside-toplevel
  bench = at.Bench(args.updates)
  mesh = par.make_mesh(par.MeshConfig(fsdp=-1))
  rollout, train = par.split_mesh(mesh, 4)
  n = sum(x.size for x in bench.jax.tree_util.tree_leaves(bench.state0.params))
  print(f"{bench.jax.device_count()} devices; model {n:,} parameters; {args.steps} steps of {at.P}x{at.G} rows, "
        f"eta={args.eta}, {args.updates} update(s) per batch", flush=True)
  results = []
  for name, fn in (("shared (fsdp=8, copy on the same devices)", lambda: run(bench, args.steps, args.eta, mesh)),
                   ("split 4 / 4 (fsdp=4 each, reshard 4 -> 4 devices)",
                    lambda: run(bench, args.steps, args.eta, train, rollout))):
    r = fn()
    results.append((name, r))
    print(f"  {name}: {r['tokens'] / r['wall_s']:.0f} tok/s", flush=True)
  base = results[0][1]["tokens"] / results[0][1]["wall_s"]
  print("\n| devices | wall (s) | trained tokens/s | vs shared | trainer idle fraction | update (ms) | "
        "publish (ms, mean / max) | bytes per publish | publish / update |")
  print("|---|---|---|---|---|---|---|---|---|")
  for name, r in results:
    tps = r["tokens"] / r["wall_s"]
    print(f"| {name} | {r['wall_s']:.1f} | {tps:.0f} | {tps / base:.2f}x | {r['idle_s'] / r['wall_s']:.2f} | "
          f"{1e3 * r['update_s']:.0f} | {1e3 * r['transfer_s']:.1f} / {1e3 * r['transfer_max_s']:.1f} | "
          f"{r['bytes']:,} | {r['transfer_s'] / r['update_s']:.3f} |")


if __name__ == "__main__":
  main()
