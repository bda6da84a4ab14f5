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

Timing: rljax runs under ``rljax.configure_host_allocator()``, as the rljax command line does (glibc keeps freed
memory: each call's 16 MB ``[B, T]`` output is not faulted in again page by page; under glibc's defaults 6 of
30 calls after the compile took ~4,096 minor page faults each, with it 1 of 30). verl runs as one long-lived worker per
``--verl-allocators`` row: ``system`` (glibc's defaults, as verl ships) and ``keep`` (the same glibc settings, given
at its start; of its 30 calls after a warm-up: 8 with ~4,096 faults under ``system``, 2 under ``keep``). After one warm-up round
per side, ``--rounds`` rounds alternate rljax and the verl rows (the order reversed every other round); a round is
the median of ``--repeats`` calls; the ratio is the median over rounds with the per-round range.

The peer at its best (docs/benchmarks.md, "How we compare"): verl at ``--verl-threads`` torch threads (default:
the machine's cores); a missing verl stops the run with the command that makes its venv (``--skip-verl`` times
rljax only); above the core count the load average at the start withholds the ratio unless ``--allow-load``.

Usage:
  python benchmarks/advantages_bench.py [--verl-python /tmp/verl-venv/bin/python] [--rounds 7] [--repeats 20]
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

# the verl worker: times the loop version once, then answers "n" on stdin with the median of n timed calls of
# ``grpo_vectorized`` (one JSON line per round), so that rounds alternate with rljax's in the same run
VERL_WORKER = r"""
import json, sys, time
import numpy as np, torch
torch.set_num_threads(int(sys.argv[3]))
from verl.trainer.ppo import core_algos as C
d = np.load(sys.argv[1])
rew, mask, index = torch.from_numpy(d["token_rewards"]), torch.from_numpy(d["mask"]), d["group_id"]
out = {"torch": torch.__version__, "threads": torch.get_num_threads()}
for name, fn in [("grpo_loop", C.compute_grpo_outcome_advantage), ("grpo_vectorized", C.compute_grpo_vectorized_outcome_advantage)]:
  t0 = time.perf_counter(); adv, _ = fn(rew, mask, index); out[name] = time.perf_counter() - t0
  np.save(sys.argv[2] + "_" + name + ".npy", adv.numpy())
print(json.dumps(out), flush=True)
for line in sys.stdin:
  times = []
  for _ in range(int(line)):
    t0 = time.perf_counter(); C.compute_grpo_vectorized_outcome_advantage(rew, mask, index)
    times.append(time.perf_counter() - t0)
  print(json.dumps({"seconds": float(np.median(times))}), flush=True)
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
  """Median seconds of ``repeats`` calls of ``fn(*args)`` (already compiled) and the last output."""
  import jax
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    out = fn(*args)
    jax.block_until_ready(out)
    times.append(time.perf_counter() - t0)
  return float(np.median(times)), out


class VerlWorker:
  """verl in its venv as a long-lived process (``VERL_WORKER``), under glibc's default allocator (``system``) or
  the settings ``rljax.configure_host_allocator`` makes (``keep``, given to it as glibc's start-up variables)."""

  def __init__(self, python: str, inputs: str, out: str, threads: int, allocator: str):
    env = {**os.environ, "VERL_USE_EXTERNAL_PLUGINS": "none"}
    if allocator == "keep":
      from rljax.host_allocator import KEEP_ENV  # pylint: disable=import-outside-toplevel
      env.update(KEEP_ENV)
    # cwd: not the repo root, whose kernels/ folder would shadow HF's `kernels` package inside transformers
    self.proc = subprocess.Popen([python, "-c", VERL_WORKER, inputs, out, str(threads)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True, cwd=os.path.dirname(inputs), env=env)
    line = self.proc.stdout.readline()
    if not line:
      raise SystemExit("verl worker failed to start (see its stderr above)")
    self.info = json.loads(line)

  def time(self, repeats: int) -> float:
    self.proc.stdin.write(f"{repeats}\n")
    self.proc.stdin.flush()
    return json.loads(self.proc.stdout.readline())["seconds"]

  def close(self) -> None:
    self.proc.stdin.close()
    self.proc.wait()


def build_parser() -> argparse.ArgumentParser:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--verl-python", default=os.environ.get("VERL_PYTHON", "/tmp/verl-venv/bin/python"))
  ap.add_argument("--skip-verl", action="store_true", help="time rljax only")
  rules.threads_flag(ap, "--verl-threads", "verl")
  ap.add_argument("--verl-allocators", default="system,keep",
                  help="verl's glibc allocator, one row each: system (glibc's defaults), keep (the settings of "
                       "rljax.configure_host_allocator, which rljax runs under, as the rljax command line does)")
  ap.add_argument("--rounds", type=int, default=7, help="rounds alternating rljax / verl rows")
  ap.add_argument("--repeats", type=int, default=20, help="calls per round (its median is the round's time)")
  ap.add_argument("--T", type=int, default=64)
  rules.add_rules_args(ap)
  return ap


def main(argv=None):
  args = build_parser().parse_args(argv)
  allocators = args.verl_allocators.split(",")
  if set(allocators) - {"system", "keep"}:
    raise SystemExit(f"--verl-allocators: each of system, keep; got {args.verl_allocators!r}")
  if not args.skip_verl:
    rules.require_peer(args.verl_python, "verl")  # before anything is printed
  guard = rules.LoadGuard.now(args.allow_load)
  from rljax import configure_host_allocator  # pylint: disable=import-outside-toplevel
  allocator = configure_host_allocator()  # as the rljax command line does, before JAX starts

  import jax
  import jax.numpy as jnp
  from rljax import advantages as A

  group_id, mask, rewards, token_rewards, tokens = make_inputs(args.T)
  print(f"B={B} groups={GROUPS} (size {B // GROUPS}) T={args.T} jax={jax.__version__} "
        f"device={jax.devices()[0].platform} cpus={os.cpu_count()}; rounds={args.rounds} x {args.repeats} calls")
  print(guard.header())
  print(f"rljax: {allocator}")

  @jax.jit
  def grpo_tokens(token_rewards, mask, group_id):
    adv, _ = A.grpo(jnp.sum(token_rewards, axis=1), group_id, num_groups=GROUPS, singleton="raw")
    return A.to_tokens(adv, mask)

  @jax.jit
  def tempo_tokens(rewards, tokens, mask, group_id):
    return A.tempo(rewards, tokens, mask, group_id, num_groups=GROUPS)[0]

  dev = [jax.device_put(x) for x in (token_rewards, mask, group_id)]
  time_jax(grpo_tokens, dev, args.repeats)  # compile, and let the allocator settle
  t_tempo, _ = time_jax(tempo_tokens, [jax.device_put(x) for x in (rewards, tokens, mask, group_id)],
                        max(3, args.repeats // 6))
  print(f"rljax tempo (jit, T={args.T}):     {t_tempo * 1e3:9.3f} ms")

  if args.skip_verl:
    t_grpo = np.median([time_jax(grpo_tokens, dev, args.repeats)[0] for _ in range(args.rounds)])
    print(f"rljax grpo (jit, [B,T] out):   {t_grpo * 1e3:9.3f} ms")
    return 0
  with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "inputs.npz")
    np.savez(path, token_rewards=token_rewards, mask=mask.astype(np.float32), group_id=group_id)
    workers = {a: VerlWorker(args.verl_python, path, os.path.join(tmp, a), args.verl_threads, a) for a in allocators}
    for w in workers.values():
      w.time(args.repeats)  # warm-up round, as rljax's
    ours_t, verl_t = [], {a: [] for a in allocators}
    for i in range(args.rounds):  # A/B interleaved, the order alternating
      sides = ["rljax", *allocators]
      for side in (sides if i % 2 == 0 else sides[::-1]):
        if side == "rljax":
          t, ours = time_jax(grpo_tokens, dev, args.repeats)
          ours_t.append(t)
        else:
          verl_t[side].append(workers[side].time(args.repeats))
    for w in workers.values():
      w.close()
    first = workers[allocators[0]]
    ref_vec = np.load(os.path.join(tmp, allocators[0] + "_grpo_vectorized.npy"))
    ref_loop = np.load(os.path.join(tmp, allocators[0] + "_grpo_loop.npy"))
  diff_vec = float(np.max(np.abs(np.asarray(ours) - ref_vec)))
  diff_loop = float(np.max(np.abs(np.asarray(ours) - ref_loop)))
  t_grpo = float(np.median(ours_t))
  print(f"rljax grpo (jit, [B,T] out):   {t_grpo * 1e3:9.3f} ms  (per round {min(ours_t) * 1e3:.3f}-"
        f"{max(ours_t) * 1e3:.3f})")
  rows = []
  for a in allocators:
    ratios = np.array(verl_t[a]) / np.array(ours_t)
    t_verl = float(np.median(verl_t[a]))
    rows.append((a, t_verl, ratios))
    print(f"verl grpo_vectorized (torch {first.info['torch']} CPU, {first.info['threads']} threads, allocator {a}): "
          f"{t_verl * 1e3:9.3f} ms  (per round {min(verl_t[a]) * 1e3:.3f}-{max(verl_t[a]) * 1e3:.3f});  "
          f"rljax speed-up {guard.ratio(float(np.median(ratios)))} "
          f"(per round {guard.ratio(ratios.min())}-{guard.ratio(ratios.max())})")
  print(f"max|diff| rljax vs verl grpo_vectorized = {diff_vec:.2e}; vs the loop version "
        f"({first.info['grpo_loop'] * 1e3:.1f} ms, one call) = {diff_loop:.2e}")
  print("| estimator | B / groups | rljax (jit, CPU) | verl (torch CPU) | ratio (median; per round) |")
  print("|---|---|---|---|---|")
  for a, t_verl, ratios in rows:
    print(f"| GRPO | {B} / {GROUPS} | {t_grpo * 1e3:.2f} ms | {t_verl * 1e3:.2f} ms (`grpo_vectorized`, allocator "
          f"{a}) | {guard.ratio(float(np.median(ratios)))} ({guard.ratio(ratios.min())}-"
          f"{guard.ratio(ratios.max())}) |")
  print(f"| TEMPO (T={args.T}) | {B} / {GROUPS} | {t_tempo * 1e3:.2f} ms | — | — |")
  return 0


if __name__ == "__main__":
  sys.exit(main())
