"""Forward+grad time of a composite objective vs verl's ``core_algos`` (torch CPU).

Objective (both sides, float32, identical NumPy-seeded inputs):

    PPO clip (eps 0.2 / 0.28, dual clip c = 3, verl's defaults)
      x IcePop token mask [0.5, 5] (pi_old / pi_rollout)
    + 1e-3 * k3 KL to the reference policy (verl ``low_var_kl``, clamps included)
    aggregated with token_mean; gradient w.r.t. the current log-probs.

rljax: ``chain(ppo_clip(0.2, 0.28, 3.0, correction=icepop(0.5, 5.0)),
kl_penalty(1e-3, "k3"), aggregate=token_mean)`` under ``jax.jit``.
verl: ``compute_rollout_correction_weights(..., "token", "0.5_5.0")`` ->
``compute_policy_loss_vanilla(..., rollout_is_weights=w)`` + ``kl_penalty`` +
``agg_loss`` + ``backward()``.

verl is *never* a dependency of rljax: it runs in a throwaway virtualenv as a
subprocess (``--verl-python``), e.g.::

    python3 -m venv /tmp/verl-venv && /tmp/verl-venv/bin/pip install torch==2.13.0 && \
      /tmp/verl-venv/bin/pip install --no-deps verl==0.9.1 && \
      /tmp/verl-venv/bin/pip install "transformers>=5.5.3,<5.11" omegaconf ray codetiming "tensordict>=0.8,<=0.10,!=0.9.0" pyvers

Rounds alternate rljax / verl (A/B/A/B, ``--rounds``); each round times
``--iters`` calls; the per-round time ratio verl / rljax is reported as median
(min, max), with the max |difference| of loss and gradient. verl's
``compute_rollout_correction_weights`` also computes many metrics (ESS,
.item() syncs); a second ratio times verl with the weights precomputed
outside the loop (a lower bound for verl; rljax still computes IcePop inside). Both sides use the
same thread count (``--threads``, default: the machine's cores, XLA's own pool and
``torch.set_num_threads(cores)``; 1: XLA's Eigen threading off and ``torch.set_num_threads(1)``). The peer at
its best (docs/benchmarks.md, "How we compare"): verl at the machine's cores unless a flag says otherwise; a
missing verl stops the run with the command that makes its venv (``--skip-verl`` times rljax only); above the
core count the load average at the start withholds the ratios unless ``--allow-load``.

    python benchmarks/objectives_bench.py --verl-python /tmp/verl-venv/bin/python
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchmarks/: the shared rules
import _peer_rules as rules  # noqa: E402  pylint: disable=wrong-import-position

VERL_WORKER = textwrap.dedent(r"""
    import json, os, sys, time
    import numpy as np, torch
    torch.set_num_threads(int(sys.argv[2]))
    from verl.trainer.ppo import core_algos as C
    from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_weights
    from verl.workers.config import ActorConfig
    d = np.load(sys.argv[1])
    t = {k: torch.from_numpy(d[k]) for k in d.files}
    cfg = ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, clip_ratio=0.2,
                      clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=3.0)

    def weights():
        return compute_rollout_correction_weights(t["old"] - t["behav"], t["mask"], rollout_is="token",
                                                  rollout_is_threshold="0.5_5.0")[0]

    w_fixed = weights()

    def step(w=None):
        logp = t["logp"].clone().requires_grad_(True)
        w = weights() if w is None else w
        pg, _ = C.compute_policy_loss_vanilla(t["old"], logp, t["adv"], t["mask"], loss_agg_mode="token-mean",
                                              config=cfg, rollout_is_weights=w)
        kld = C.kl_penalty(logp, t["ref"], "low_var_kl")
        loss = pg + 1e-3 * C.agg_loss(kld, t["mask"], "token-mean")
        loss.backward()
        return loss.detach(), logp.grad

    loss, grad = step()
    np.savez(sys.argv[3], loss=loss.numpy(), grad=grad.numpy())
    print("ready", flush=True)
    for line in sys.stdin:
        n = int(line)
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        t1 = time.perf_counter()
        for _ in range(n):
            step(w_fixed)
        t2 = time.perf_counter()
        print(json.dumps({"seconds": (t1 - t0) / n, "core_seconds": (t2 - t1) / n}), flush=True)
""")


def make_inputs(b, t, seed=0):
  rng = np.random.default_rng(seed)
  old = -rng.uniform(0.01, 3.0, (b, t)).astype(np.float32)
  logp = (old + 0.1 * rng.normal(size=(b, t))).astype(np.float32)
  behav = (old + 0.3 * rng.normal(size=(b, t))).astype(np.float32)  # some tokens leave [0.5, 5]
  ref = (old + 0.2 * rng.normal(size=(b, t))).astype(np.float32)
  lengths = rng.integers(t // 4, t + 1, size=b)
  mask = (np.arange(t)[None, :] < lengths[:, None]).astype(np.float32)
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1).astype(np.float32)
  return dict(old=old, logp=logp, behav=behav, ref=ref, mask=mask, adv=adv)


def rljax_step(inputs):
  import jax
  import jax.numpy as jnp

  import rljax.objectives as O
  from rljax.types import PolicyOutputs, TrainBatch

  try:
    kl = O.kl_penalty(1e-3, estimator="k3")
  except (AttributeError, ValueError):  # part B not there: the same k3 penalty inline (verl low_var_kl clamps)

    def kl(out, batch):
      d = jnp.clip(batch.logp_ref - out.logp, -20.0, 20.0)
      return 1e-3 * jnp.clip(jnp.exp(d) - d - 1.0, -10.0, 10.0), {}

  objective = O.chain(O.ppo_clip(0.2, 0.28, dual_clip=3.0, correction=O.icepop(0.5, 5.0)), kl,
                      aggregate=O.token_mean)
  b, t = inputs["mask"].shape
  batch = TrainBatch.create(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(inputs["mask"]),
                            advantages=jnp.asarray(inputs["adv"]), group_id=jnp.zeros((b,), jnp.int32),
                            logp_old=jnp.asarray(inputs["old"]), logp_behavior=jnp.asarray(inputs["behav"]),
                            logp_ref=jnp.asarray(inputs["ref"]))
  fn = jax.jit(jax.value_and_grad(lambda lp, bt: objective(PolicyOutputs(logp=lp), bt)[0]))
  logp = jnp.asarray(inputs["logp"])
  loss, grad = jax.block_until_ready(fn(logp, batch))

  def run(n):
    t0 = time.perf_counter()
    for _ in range(n):
      jax.block_until_ready(fn(logp, batch))
    return (time.perf_counter() - t0) / n

  return run, np.asarray(loss), np.asarray(grad)


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--batch", type=int, default=256)
  parser.add_argument("--seq", type=int, default=1024)
  parser.add_argument("--rounds", type=int, default=7)
  parser.add_argument("--iters", type=int, default=5)
  rules.threads_flag(parser, "--threads", "verl, and XLA's threads of rljax (1 = XLA without Eigen threading, "
                     "torch.set_num_threads(1); on a loaded machine OpenMP oversubscription slows torch 10x)")
  parser.add_argument("--verl-python", default="/tmp/verl-venv/bin/python",
                      help="python of a throwaway venv with verl + torch (never an rljax dependency)")
  parser.add_argument("--skip-verl", action="store_true", help="time rljax only")
  rules.add_rules_args(parser)
  return parser


def main(argv=None):
  args = build_parser().parse_args(argv)
  if not args.skip_verl:
    rules.require_peer(args.verl_python, "verl")  # before anything is printed
  guard = rules.LoadGuard.now(args.allow_load)
  if args.threads == 1 and "jax" not in sys.modules:
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()

  inputs = make_inputs(args.batch, args.seq)
  run_jax, loss_j, grad_j = rljax_step(inputs)
  print(f"B={args.batch} T={args.seq} float32, threads={args.threads}, rounds={args.rounds} x {args.iters} iters")
  print(guard.header())

  if args.skip_verl:
    times = [run_jax(args.iters) for _ in range(args.rounds)]
    print(f"rljax forward+grad: median {np.median(times) * 1e3:.2f} ms")
    return

  with tempfile.TemporaryDirectory() as tmp:
    data, result, script = (os.path.join(tmp, n) for n in ("inputs.npz", "verl_out.npz", "worker.py"))
    np.savez(data, **inputs)
    with open(script, "w") as f:
      f.write(VERL_WORKER)
    env = dict(os.environ, VERL_USE_EXTERNAL_PLUGINS="none", OMP_NUM_THREADS=str(args.threads))
    worker = subprocess.Popen([args.verl_python, script, data, str(args.threads), result], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    line = worker.stdout.readline()
    while line and line.strip() != "ready":
      line = worker.stdout.readline()
    if not line:
      raise SystemExit("verl worker failed to start (see its stderr above)")
    ref = np.load(result)
    jax_t, verl_t, core_t = [], [], []
    for _ in range(args.rounds):  # A/B interleaved
      jax_t.append(run_jax(args.iters))
      worker.stdin.write(f"{args.iters}\n")
      worker.stdin.flush()
      res = json.loads(worker.stdout.readline())
      verl_t.append(res["seconds"])
      core_t.append(res["core_seconds"])
    worker.stdin.close()
    worker.wait()

  ratios = np.array(verl_t) / np.array(jax_t)
  core = np.array(core_t) / np.array(jax_t)
  print(f"rljax forward+grad: median {np.median(jax_t) * 1e3:.2f} ms   (min {min(jax_t) * 1e3:.2f})")
  print(f"verl  forward+grad: median {np.median(verl_t) * 1e3:.2f} ms   (min {min(verl_t) * 1e3:.2f})")
  print(f"verl  without its IS-weight step (weights precomputed, as a lower bound): "
        f"median {np.median(core_t) * 1e3:.2f} ms   (min {min(core_t) * 1e3:.2f})")
  if guard.ratios_allowed:
    print(f"time ratio verl/rljax: median {np.median(ratios):.2f}  (min {ratios.min():.2f}, max {ratios.max():.2f})")
    print(f"time ratio verl(precomputed weights)/rljax: median {np.median(core):.2f}  "
          f"(min {core.min():.2f}, max {core.max():.2f})")
  else:
    print(f"time ratio verl/rljax: {guard.ratio(0)}")
  print(f"loss: rljax {float(loss_j):.8f}  verl {float(ref['loss']):.8f}  "
        f"max|diff| {abs(float(loss_j) - float(ref['loss'])):.3e}")
  print(f"grad wrt logp: max|diff| {np.abs(grad_j - ref['grad']).max():.3e}  "
        f"(max|grad| {np.abs(ref['grad']).max():.3e})")


if __name__ == "__main__":
  sys.exit(main())
