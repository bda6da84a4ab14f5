"""A config's RL phases against this machine's limits (issue #53 item 2, the demo's shape).

    python benchmarks/demo_roofline.py                                    # the main CPU demo (configs/default.py)
    python benchmarks/demo_roofline.py --config smollm2_addition          # the real-model demo (SmolLM2-135M)
    python benchmarks/demo_roofline.py --config smollm2_addition --steps 4 --set rl.concurrent_rollouts=1

Runs ``rljax.train.train`` on the config, as ``rljax train`` would (the host allocator set first, the CPU auto
settings resolved), for ``--steps`` RL steps with evaluations and checkpoints cut (they are outside both phases
anyway), then puts the median of each RL step's ``time/sample_s`` (the rollout) and ``time/update_s`` (the update)
from step 2 on (step 1 compiles) against this machine's float32 matmul rate and streaming-read bandwidth, both
measured in the same process before the run (``roofline.jax_matmul_seconds``, ``roofline.stream_read``).

The work is counted as ``benchmarks/roofline.py`` states it (one formula for every side), on the shapes the run
actually had: the model's layers, widths and vocabulary from its config; each update batch's prompt length (the
columns before a row's first loss-mask token) and completion length (its loss-mask tokens), averaged over the
timed steps; the prompt columns each group shares and the ones every prompt shares (``rl.share_prompt_forward``:
run once per group / once per micro-batch); the rollout's concurrent chunks and the update's micro-batches.

- **update**: the FLOPs it executes, 3 passes (forward + backward) of ``roofline.forward_shared`` over the
  batch, plus one forward when the proximal log-probs come from a separate forward (``rl.proximal_forward``),
  over the matmul rate: "X% of the matmul roofline" is that bound over the measured time;
- **rollout**: ``roofline.rollout_bound``: the shared prefill's FLOPs over the matmul rate plus, per decode step,
  the larger of its bytes (the matmul weights once, every row's cache) over the bandwidth and its FLOPs over the
  matmul rate; "Y% of the bandwidth bound" is that bound over the measured time. The rollout's time also holds
  what no limit counts (decoding the completions to text, the reward): it is the phase as a user waits for it.

A loaded machine (load average above the core count at the start) is said in the header, and the percentages are
withheld unless ``--allow-load``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchmarks/: the shared rules and the roofline
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import _peer_rules as rules  # noqa: E402
from roofline import (forward_shared, jax_matmul_seconds, model_shape, rollout_bound, rollout_flops_shared,  # noqa: E402
                      stream_read)

QUICK = ["eval.num_problems=4", "eval.batch_size=4", "eval.num_samples=1", "eval.pass_k=1", "checkpoint.enabled=false",
         "progress=false"]


def shape_of(model_cfg) -> dict:
  """``roofline.py``'s model shape from an rljax ``ModelConfig`` (dense layers; an MoE is refused: its
  matmul parameters per token are not ``N``)."""
  if getattr(model_cfg, "num_experts", 0):
    raise SystemExit("demo_roofline.py counts dense models only; this config's model is a mixture of experts")
  return model_shape(layers=model_cfg.num_layers, hidden=model_cfg.hidden_size, heads=model_cfg.num_heads,
                     head_dim=model_cfg.head_dim, kv_heads=model_cfg.num_kv_heads, vocab=model_cfg.vocab_size,
                     intermediate=model_cfg.intermediate_size)


def batch_lengths(loss_mask) -> tuple[float, float]:
  """``(mean prompt length, mean completion length)`` of an update batch's rows: the columns before each row's
  first loss-mask token, and its loss-mask tokens (rows without any are left out)."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  m = np.asarray(loss_mask).astype(bool)
  rows = m.any(axis=1)
  if not rows.any():
    return 0.0, 0.0
  return float(m[rows].argmax(axis=1).mean()), float(m[rows].sum(axis=1).mean())


def phase_bounds(s: dict, run: dict, matmul_rate: float, bandwidth: float) -> dict:
  """The two phases' times at this machine's limits, from a run's shape (``run``: prompts, group, prompt_len,
  completion_len, prefix (shared per group; 0 = no sharing), common, chunks, microbatches, separate_proximal)."""
  p, c, g = run["prompt_len"], run["completion_len"], run["group"]
  shared = run["prefix"] > 0
  prompts = run["prompts"] if shared else run["prompts"] * g  # without sharing every row runs its prompt
  group = g if shared else 1
  common = run["common"] if shared else 0
  passes = 4 if run["separate_proximal"] else 3
  update = passes * forward_shared(s, prompts, group, p, c, common, run["microbatches"])
  prefill = rollout_flops_shared(s, run["prompts"], g, p, 1, run["rollout_common"], run["chunks"])
  bound = rollout_bound(s, run["prompts"] * g, p, c, matmul_rate, bandwidth, prefill_flops=prefill)
  return dict(update_flops=update, update_bound_s=update / matmul_rate, passes=passes, rollout=bound)


def run_config(config: str, steps: int, overrides: list) -> dict:
  """Trains ``config`` for ``steps`` RL steps in this process; returns the timed steps' medians and shapes."""
  import rljax.train._run as run_mod  # pylint: disable=import-outside-toplevel
  from rljax._config_files import load_config  # pylint: disable=import-outside-toplevel
  from rljax.train import _rl, apply_overrides, train  # pylint: disable=import-outside-toplevel
  from rljax.train._inputs import PROXIMAL_NEEDS  # pylint: disable=import-outside-toplevel

  seen: dict = {"lens": [], "times": []}
  inner_place, inner_build = _rl.RLLoop.place, run_mod.build_experiment

  def place(loop, host):  # the update batch's host arrays, before they go to the devices (outside any timing)
    if "loop" not in seen:
      seen["loop"] = dict(prefix=loop.prefix, common=loop.common, chunks=loop.rl.concurrent_rollouts,
                          microbatches=max(loop.rl.num_microbatches, 1), prompts=loop.rl.num_prompts,
                          group=loop.rl.group_size,
                          separate_proximal=bool(set(loop.needs) & set(PROXIMAL_NEEDS))
                          and not loop.proximal_from_update)
    seen["lens"].append(batch_lengths(host["loss_mask"]))
    return inner_place(loop, host)

  def build(*a, **k):
    exp = inner_build(*a, **k)
    seen["model"], seen["settings"] = exp.model.cfg, exp.auto_settings
    seen["rollout_common"] = len(exp.sampler_config.common_prefix)
    return exp

  class TimedWriter(run_mod.MetricsWriter):
    def write(self, stage, step, metrics):
      if stage == "rl" and "time/sample_s" in metrics:
        seen["times"].append((metrics["time/sample_s"], metrics["time/update_s"]))
      return super().write(stage, step, metrics)

  cfg = load_config(config)
  out_dir = tempfile.mkdtemp(prefix="rljax_demo_roofline_")
  cfg = apply_overrides(cfg, [f"rl.steps={steps}", f"out_dir={out_dir}"] + QUICK + list(overrides))
  _rl.RLLoop.place, run_mod.build_experiment, writer = place, build, run_mod.MetricsWriter
  run_mod.MetricsWriter = TimedWriter
  try:
    train(cfg, overwrite=True)
  finally:
    _rl.RLLoop.place, run_mod.build_experiment, run_mod.MetricsWriter = inner_place, inner_build, writer
    shutil.rmtree(out_dir, ignore_errors=True)  # the run directory is the benchmark's own, never the user's
  timed = seen["times"][1:]
  if not timed:
    raise SystemExit(f"--steps {steps}: at least 2 RL steps are needed (step 1 compiles and is not timed)")
  lens = seen["lens"][1:len(seen["times"])]
  run = dict(seen["loop"], rollout_common=seen["rollout_common"], settings=seen["settings"],
             prompt_len=statistics.mean(p for p, _ in lens), completion_len=statistics.mean(c for _, c in lens),
             rollout_s=statistics.median(t for t, _ in timed), update_s=statistics.median(u for _, u in timed),
             rollout_all=[t for t, _ in timed], update_all=[u for _, u in timed])
  return dict(run=run, shape=shape_of(seen["model"]))


def report(config: str, res: dict, rate: float, bw: dict, guard: rules.LoadGuard) -> list:
  """The report's lines (also returned for tests)."""
  s, run = res["shape"], res["run"]
  b = phase_bounds(s, run, rate, bw["bytes_per_s"])
  r = b["rollout"]
  pct = lambda x: guard.ratio(x, "{:.0%}")  # noqa: E731
  lines = [
      f"config {config}: {s['L']} layers, hidden {s['H']}, {s['heads']} x {s['head_dim']} query heads, {s['kv']} "
      f"key/value heads, vocabulary {s['V']}, {s['N']:,} body matmul parameters",
      f"rl: {run['prompts']} prompts x {run['group']}, {run['chunks']} rollout chunk(s), {run['microbatches']} update "
      f"micro-batch(es); prompt columns shared per group {run['prefix']}, by every prompt {run['common']} "
      f"(rollout: {run['rollout_common']}); proximal forward {'separate' if run['separate_proximal'] else 'the update own'}",
      f"auto settings: {run['settings'] or '(none)'}",
      f"limits: float32 matmul {rate / 1e9:.1f} GFLOP/s (JAX, 2048^3, best of 5), streaming read "
      f"{bw['bytes_per_s'] / 1e9:.1f} GB/s (one call {bw['one_call'] / 1e9:.1f}, {bw['parts']} at once "
      f"{bw['per_part'] / 1e9:.1f})",
      f"timed steps {len(run['rollout_all'])} (from step 2): rollout median {run['rollout_s']:.3f} s "
      f"({', '.join(f'{x:.3f}' for x in run['rollout_all'])}), update median {run['update_s']:.3f} s "
      f"({', '.join(f'{x:.3f}' for x in run['update_all'])}); mean prompt {run['prompt_len']:.1f} tokens, "
      f"completion {run['completion_len']:.1f}",
      f"update: {b['update_flops'] / 1e9:.2f} GFLOP executed ({b['passes']} passes of the shared-prompt forward), "
      f"bound {b['update_bound_s']:.3f} s, measured {run['update_s']:.3f} s: "
      f"{pct(b['update_bound_s'] / run['update_s'])} of the matmul roofline (goal 80%)",
      f"rollout: bound {r['total']:.3f} s (prefill {r['prefill']:.3f} s, {r['decode_steps']} decode steps "
      f"{r['decode']:.3f} s, {r['bandwidth_bound_steps']} of them bandwidth-bound), measured {run['rollout_s']:.3f} s: "
      f"{pct(r['total'] / run['rollout_s'])} of the bandwidth bound (goal 70%)",
  ]
  return lines


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--config", default="default", help="a config name in configs/ or a .py path")
  ap.add_argument("--steps", type=int, default=6, help="RL steps (step 1 compiles and is not timed)")
  ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="more config overrides")
  rules.add_rules_args(ap)
  args = ap.parse_args(argv)
  if args.steps < 2:
    ap.error(f"--steps must be at least 2 (step 1 compiles and is not timed), got {args.steps}")
  from rljax import configure_host_allocator  # pylint: disable=import-outside-toplevel
  configure_host_allocator()  # as the rljax command line does, before JAX starts
  guard = rules.LoadGuard.now(args.allow_load)
  print(guard.header(), flush=True)
  rate = 2 * 2048 ** 3 / jax_matmul_seconds(2048, 5)
  bw = stream_read()
  res = run_config(args.config, args.steps, args.set)
  print("\n".join(report(args.config, res, rate, bw, guard)))
  return 0


if __name__ == "__main__":
  sys.exit(main())
