"""GRPO and TEMPO advantages at 65,536 samples in 8,192 groups: rljax (jitted JAX) vs verl (torch CPU).

verl's real code is run in a separate interpreter (a throwaway venv with
``verl`` installed, see docs/advantages.md), on the same inputs:
``verl.trainer.ppo.core_algos.compute_grpo_vectorized_outcome_advantage``
(and the loop version ``compute_grpo_outcome_advantage``). Both sides take
token-level rewards ``[B, T]`` (outcome on the last token), a response mask
and the group index, and return ``[B, T]`` advantages, so the work compared
is the same: sum over T, group statistics, normalise, broadcast over tokens.
The script also checks that the two results agree.

TEMPO has no verl counterpart; it is timed on its own at T = 64 response
tokens (a short-answer regime; the cost is T sorts of B rows) with groups
whose responses share random-length prefixes.

The peer at its best (docs/benchmarks.md, "How we compare"): verl at ``--verl-threads`` torch threads (default:
the machine's cores); a missing verl stops the run with the command that makes its venv (``--skip-verl`` times
rljax only); above the core count the load average at the start withholds the ratio unless ``--allow-load``.

Usage:
  python benchmarks/advantages_bench.py [--verl-python /tmp/verl-venv/bin/python] [--repeats 10] [--T 64]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchmarks/: the shared rules
import _peer_rules as rules  # noqa: E402  pylint: disable=wrong-import-position

B, GROUPS = 65_536, 8_192

VERL_SCRIPT = r"""
import json, sys, time
import numpy as np, torch
torch.set_num_threads(int(sys.argv[4]))
from verl.trainer.ppo import core_algos as C
d = np.load(sys.argv[1])
rew, mask, index = torch.from_numpy(d["token_rewards"]), torch.from_numpy(d["mask"]), d["group_id"]
repeats = int(sys.argv[3])
out = {"torch": torch.__version__, "threads": torch.get_num_threads()}
for name, fn, reps in [("grpo_vectorized", C.compute_grpo_vectorized_outcome_advantage, repeats),
                       ("grpo_loop", C.compute_grpo_outcome_advantage, 1)]:
  adv, _ = fn(rew, mask, index)  # warm-up
  times = []
  for _ in range(reps):
    t0 = time.perf_counter(); adv, _ = fn(rew, mask, index); times.append(time.perf_counter() - t0)
  out[name] = float(np.median(times))
  np.save(sys.argv[2] + "_" + name + ".npy", adv.numpy())
print(json.dumps(out))
"""


def make_inputs(t: int, seed: int = 0):
  rng = np.random.RandomState(seed)
  g = B // GROUPS
  group_id = rng.permutation(np.repeat(np.arange(GROUPS), g)).astype(np.int32)
  lengths = rng.randint(t // 4, t + 1, B)
  mask = np.arange(t)[None, :] < lengths[:, None]
  rewards = rng.randint(0, 2, B).astype(np.float32)
  token_rewards = np.zeros((B, t), np.float32)
  token_rewards[np.arange(B), lengths - 1] = rewards
  # tokens: within a group each response copies a random earlier member's prefix, then diverges
  tokens = rng.randint(0, 32_000, (B, t)).astype(np.int32)
  order = np.argsort(group_id, kind="stable")
  for start in range(0, B, g):
    rows = order[start:start + g]
    for j in range(1, g):
      src = rows[rng.randint(0, j)]
      cut = rng.randint(0, t)
      tokens[rows[j], :cut] = tokens[src, :cut]
  return group_id, mask, rewards, token_rewards, tokens


def time_jax(fn, args, repeats):
  import jax
  out = fn(*args)
  jax.block_until_ready(out)
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    out = fn(*args)
    jax.block_until_ready(out)
    times.append(time.perf_counter() - t0)
  return float(np.median(times)), out


def build_parser() -> argparse.ArgumentParser:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--verl-python", default=os.environ.get("VERL_PYTHON", "/tmp/verl-venv/bin/python"))
  ap.add_argument("--skip-verl", action="store_true", help="time rljax only")
  rules.threads_flag(ap, "--verl-threads", "verl")
  ap.add_argument("--repeats", type=int, default=10)
  ap.add_argument("--T", type=int, default=64)
  rules.add_rules_args(ap)
  return ap


def main(argv=None):
  args = build_parser().parse_args(argv)
  if not args.skip_verl:
    rules.require_peer(args.verl_python, "verl")  # before anything is printed
  guard = rules.LoadGuard.now(args.allow_load)

  import jax
  import jax.numpy as jnp
  from rljax import advantages as A

  group_id, mask, rewards, token_rewards, tokens = make_inputs(args.T)
  print(f"B={B} groups={GROUPS} (size {B // GROUPS}) T={args.T} jax={jax.__version__} "
        f"device={jax.devices()[0].platform} cpus={os.cpu_count()}")
  print(guard.header())

  @jax.jit
  def grpo_tokens(token_rewards, mask, group_id):
    adv, _ = A.grpo(jnp.sum(token_rewards, axis=1), group_id, num_groups=GROUPS, singleton="raw")
    return A.to_tokens(adv, mask)

  @jax.jit
  def tempo_tokens(rewards, tokens, mask, group_id):
    return A.tempo(rewards, tokens, mask, group_id, num_groups=GROUPS)[0]

  dev = [jax.device_put(x) for x in (token_rewards, mask, group_id)]
  t_grpo, ours = time_jax(grpo_tokens, dev, args.repeats)
  t_tempo, _ = time_jax(tempo_tokens, [jax.device_put(x) for x in (rewards, tokens, mask, group_id)],
                        max(3, args.repeats // 3))
  print(f"rljax grpo (jit, [B,T] out):   {t_grpo * 1e3:9.3f} ms")
  print(f"rljax tempo (jit, T={args.T}):     {t_tempo * 1e3:9.3f} ms")

  if args.skip_verl:
    return 0
  with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "inputs.npz")
    np.savez(path, token_rewards=token_rewards, mask=mask.astype(np.float32), group_id=group_id)
    proc = subprocess.run([args.verl_python, "-c", VERL_SCRIPT, path, os.path.join(tmp, "out"),
                           str(args.repeats), str(args.verl_threads)], capture_output=True, text=True, cwd=tmp,  # not the repo root:
                          # its kernels/ folder would shadow HF's `kernels` package inside transformers
                          env={**os.environ,
                                                                                   "VERL_USE_EXTERNAL_PLUGINS": "none"})
    if proc.returncode != 0:
      print("verl run failed:\n" + proc.stderr[-3000:])
      return 1
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    ref_vec = np.load(os.path.join(tmp, "out_grpo_vectorized.npy"))
    ref_loop = np.load(os.path.join(tmp, "out_grpo_loop.npy"))
  diff_vec = float(np.max(np.abs(np.asarray(ours) - ref_vec)))
  diff_loop = float(np.max(np.abs(np.asarray(ours) - ref_loop)))
  print(f"verl grpo_vectorized (torch {res['torch']} CPU, {res['threads']} threads): "
        f"{res['grpo_vectorized'] * 1e3:9.3f} ms   max|diff| vs rljax = {diff_vec:.2e}")
  print(f"verl grpo (loop version):                         {res['grpo_loop'] * 1e3:9.3f} ms   "
        f"max|diff| vs rljax = {diff_loop:.2e}")
  ratio = res["grpo_vectorized"] / t_grpo
  print(f"speed-up rljax grpo vs verl grpo_vectorized: {guard.ratio(ratio)}")
  print("| estimator | B / groups | rljax (jit, CPU) | verl (torch CPU) | ratio |")
  print("|---|---|---|---|---|")
  print(f"| GRPO | {B} / {GROUPS} | {t_grpo * 1e3:.2f} ms | {res['grpo_vectorized'] * 1e3:.2f} ms "
        f"(`grpo_vectorized`) | {guard.ratio(ratio, '{:.1f}x')} |")
  print(f"| TEMPO (T={args.T}) | {B} / {GROUPS} | {t_tempo * 1e3:.2f} ms | — | — |")
  return 0


if __name__ == "__main__":
  sys.exit(main())
