"""SimpleTIR void-turn filtering on the tool countdown: GRPO with and without ``void_turn``, gradient norms.

SimpleTIR (000_3e503271be254a43.txt L27) filters out trajectories with a *void turn* (a turn with neither a code
block nor an answer), which it reports removes the gradient-norm explosions of multi-turn tool-integrated RL.
This script runs the comparison on ``configs/tool_countdown.py`` and draws the per-step gradient norm of both:

1. the demo's SFT warm start (``--sft-from`` a finished ``rljax train --config tool_countdown`` run, or its
   300 SFT steps run here). Its episodes have up to 2 turns and observations up to 32 tokens, so a void turn
   ends its episode (the environment's reminder is longer than 32 tokens: a truncated episode, reward 0);
2. two GRPO runs from it (``sft.init_from``), same seed and settings, sampled hot (``--temperature``, default
   1.5) so that void turns occur: ``rl.filters`` empty, and ``void_turn(code_pattern='<call>.*?</call>')``;
3. a PNG (``--figure``): ``train/grad_norm`` per RL step of both runs, and the share of sampled episodes with
   a void turn (``rollout/void_turn_episodes``, counted by the environment), with the share of rows the filter
   dropped (``void_turn/void_frac``: its regexes also call void a turn with an unclosed ``<call>``, which the
   environment answers with an error).

    PYTHONPATH=. python benchmarks/simpletir_void_turns.py --out runs/simpletir \\
        --figure docs/figures/simpletir_grad_norm.png [--sft-from runs/tool_countdown]

Prints one line per run: steps, gradient norm (median, max), void-episode share and rollout accuracy. The
runs' directories keep ``metrics.jsonl``; ``--plot-only`` redraws the figure from them.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

ARMS = (("no filter", ""), ("void_turn filter", "void_turn(code_pattern='<call>.*?</call>')"))
# the demo config's settings, pinned here so that the figure does not move with later tuning of the demo
SETTINGS = ("task.max_turns=2", "task.max_obs_tokens=32", "task.demo_tool_prob=0.4", "sft.steps=300",
            "rl.num_prompts=4", "rl.group_size=8", "rl.max_new_tokens=100", "rl.optim.learning_rate=2e-4",
            "checkpoint.every=50")


def _config(out_dir, overrides):
  from rljax._config_files import load_config  # pylint: disable=import-outside-toplevel
  from rljax.train._config import apply_overrides  # pylint: disable=import-outside-toplevel
  return apply_overrides(load_config("tool_countdown"), [f"out_dir={out_dir}", *SETTINGS, *overrides])


def _rl_rows(run_dir):
  rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") if line.strip()]
  return [r for r in rows if r.get("stage") == "rl" and "train/grad_norm" in r]


def run(out, *, sft_from, steps, temperature, seed):
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  sft_dir = sft_from or os.path.join(out, "sft")
  if not sft_from:
    t0 = time.time()
    train(_config(sft_dir, ["rl.steps=0", f"seed={seed}"]), overwrite=True)
    print(f"SFT: {time.time() - t0:.0f} s")
  for i, (name, spec) in enumerate(ARMS):
    t0 = time.time()
    train(_config(os.path.join(out, f"arm{i}"), [
        f"sft.init_from={sft_dir}", f"rl.steps={steps}", f"rl.temperature={temperature}", f"rl.filters={spec}",
        "eval.every=0", "eval.num_problems=16", "eval.batch_size=16", f"seed={seed}"]),
          overwrite=True)
    print(f"{name}: {time.time() - t0:.0f} s")


def plot(out, figure):
  from matplotlib.backends.backend_agg import FigureCanvasAgg  # pylint: disable=import-outside-toplevel
  from matplotlib.figure import Figure  # pylint: disable=import-outside-toplevel
  fig = Figure(figsize=(11, 3.8))
  FigureCanvasAgg(fig)
  ax_g, ax_v = fig.subplots(1, 2)
  for i, (name, _) in enumerate(ARMS):
    rows = _rl_rows(os.path.join(out, f"arm{i}"))
    steps = [r["step"] for r in rows]
    gn = np.array([r["train/grad_norm"] for r in rows])
    void = np.array([r.get("rollout/void_turn_episodes", np.nan) for r in rows])
    acc = np.array([r.get("rollout/accuracy", np.nan) for r in rows])
    ax_g.plot(steps, gn, marker="o", ms=3, label=name)
    line, = ax_v.plot(steps, void, marker="o", ms=3, label=f"{name}: episodes with a void turn (environment)")
    dropped = np.array([r.get("void_turn/void_frac", np.nan) for r in rows])
    if np.isfinite(dropped).any():  # the filter's own count: its regexes also call an unclosed or mixed turn void
      ax_v.plot(steps, dropped, ls="--", color=line.get_color(), label=f"{name}: rows dropped by the filter")
    drop = f", rows dropped by the filter {np.nanmean(dropped):.1%}" if np.isfinite(dropped).any() else ""
    print(f"{name}: {len(rows)} steps, grad norm median {np.median(gn):.3f} max {gn.max():.3f} "
          f"(max/median {gn.max() / np.median(gn):.1f}), void-turn episodes {np.nanmean(void):.1%}{drop}, "
          f"rollout accuracy {np.nanmean(acc):.1%}")
  ax_g.set_title("gradient norm per GRPO step (before clipping)")
  ax_g.set_ylabel("train/grad_norm")
  ax_v.set_title("void turns in the sampled episodes")
  ax_v.set_ylabel("share of the step's episodes")
  for ax in (ax_g, ax_v):
    ax.set_xlabel("RL step")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
  fig.suptitle("SimpleTIR void-turn filtering, tool countdown (2-layer d=64 model, the demo's SFT, sampled hot)",
               fontsize=10)
  fig.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(figure)), exist_ok=True)
  fig.savefig(figure, dpi=90)
  print(f"wrote {figure}")


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--out", default="runs/simpletir")
  ap.add_argument("--figure", default="docs/figures/simpletir_grad_norm.png")
  ap.add_argument("--sft-from", default=None, help="a finished tool_countdown run whose SFT to start from")
  ap.add_argument("--steps", type=int, default=20)
  ap.add_argument("--temperature", type=float, default=1.5)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--plot-only", action="store_true")
  a = ap.parse_args()
  if not a.plot_only:
    run(a.out, sft_from=a.sft_from, steps=a.steps, temperature=a.temperature, seed=a.seed)
  plot(a.out, a.figure)


if __name__ == "__main__":
  main()
