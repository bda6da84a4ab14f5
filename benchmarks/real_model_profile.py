"""Where a real-model GRPO step's wall time goes: one step of ``rljax train`` traced, thunk by thunk.

    python benchmarks/real_model_profile.py                       # configs/smollm2_addition, step 3
    python benchmarks/real_model_profile.py --step 5 --out /tmp/rljax_profile

Runs ``rljax.train.train`` on the config for ``--step`` RL steps (evaluations only at the start and after the
last step, outside the trace) and records step ``--step`` with ``jax.profiler``: a Perfetto trace under ``--out``
(TensorBoard's profile plugin or ui.perfetto.dev open it), and the compiled update's HLO text beside it
(``update_hlo.txt``). Two windows of that step are reported:

- **rollout**: ``RLLoop.sample`` (prefill, decode, reward);
- **update**: ``RLLoop.update`` (the jitted update on the step's batch, synchronised).

XLA:CPU runs a program as thunks on a thread pool, several at once where they are independent. Each moment of a
window is shared equally among the thunks running then, so the rows of a window sum to its wall time. A thunk is
a **matmul** (XLA:CPU's YNNPACK fusions and dots), a **copy** (copies and transposes) or **elementwise** (every
other fusion). "no thunk" is the time none ran (dispatch, Python, host work, waits); "no thunk, after a dot" is
such time right after a ``dot`` thunk: XLA:CPU runs the dots YNNPACK does not take (in the update, the weight
gradients that contract over rows, ``X^T dY``) with Eigen, whose work can finish on the pool after the thunk's
event has closed, so that time is mostly matmul. The update's thunks are also split by where their HLO comes from
(the compiled update's ``op_name`` metadata): ``optimizer`` (the named scope in ``make_train_step``),
``log-prob head`` (``kernels.logprob_and_entropy``: the LM head's matmuls and log-softmax, forward and backward),
``backward`` (the rest of the gradient: transposes of the forward), ``forward`` (the rest of the loss's forward)
and ``other``.

The matmul rate of this machine (float32 2048^3 ``jnp.dot``, best of 5: ``real_model_bench.jax_matmul_seconds``)
is printed beside the report, so the matmul rows can be read against it. This measures rljax only;
``real_model_bench.py`` has the TRL comparison.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import glob
import gzip
import json
import os
import re
import sys
import time

import jax

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rljax.train import _rl  # pylint: disable=wrong-import-position
from rljax import configure_host_allocator  # pylint: disable=wrong-import-position
from rljax._config_files import load_config  # pylint: disable=wrong-import-position
from rljax.train import train  # pylint: disable=wrong-import-position

CONTAINERS = ("while", "call", "conditional")  # thunks that run other thunks: their time is their children's


def thunk_kind(name: str) -> str:
  """``matmul`` / ``copy`` / ``elementwise`` from an XLA:CPU thunk's name."""
  if name.startswith(("ynn_fusion", "dot", "onednn")):
    return "matmul"
  if "copy" in name or "transpose" in name:
    return "copy"
  return "elementwise"


def hlo_origin(op_name: str) -> str:
  """The update's part an instruction belongs to, from its ``op_name`` metadata (see the module docstring)."""
  if "optimizer" in op_name:
    return "optimizer"
  if "logprob_and_entropy" in op_name:
    return "log-prob head"
  if "transpose(" in op_name:
    return "backward"
  if "jvp(" in op_name:
    return "forward"
  return "other"


def hlo_op_names(hlo_text: str) -> dict:
  """``{instruction name: op_name}`` of a compiled module's text (``Compiled.as_text()``)."""
  out = {}
  for line in hlo_text.splitlines():
    m = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = ", line)
    if m:
      op = re.search(r'op_name="([^"]*)"', line)
      out[m.group(1)] = op.group(1) if op else ""
  return out


def wall_shares(events, window, label) -> collections.Counter:
  """Wall time (us) of ``window = (start, end)`` by ``label(event)``, each moment shared among the thunks
  running then; ``"no thunk"`` (``"no thunk, after a dot"``) where none ran. ``events``: complete
  (``ph == "X"``) leaf-thunk events."""
  lo, hi = window
  edges = []
  for e in events:
    s, f = max(e["ts"], lo), min(e["ts"] + e["dur"], hi)
    if f > s:
      edges += [(s, 1, id(e), e), (f, -1, id(e), e)]
  edges.sort(key=lambda x: (x[0], x[1]))
  shares, running, last, ended = collections.Counter(), {}, lo, ""
  idle = lambda: "no thunk, after a dot" if ended.startswith("dot") else "no thunk"  # noqa: E731
  for t, sign, key, e in edges:
    if t > last:
      if running:
        for ev in running.values():
          shares[label(ev)] += (t - last) / len(running)
      else:
        shares[idle()] += t - last
      last = t
    if sign > 0:
      running[key] = e
    else:
      running.pop(key, None)
      ended = e["name"]
  if hi > last:
    shares[idle()] += hi - last
  return shares


class StepRecorder:
  """Wraps ``RLLoop.sample`` and ``RLLoop.update`` to trace step ``step`` (1-based) of a run: its rollout and
  update as two annotated windows of one ``jax.profiler`` trace, and the compiled update's HLO text."""

  def __init__(self, step: int, trace_dir: str):
    self.step, self.trace_dir = step, trace_dir
    self.hlo_text = ""
    self.wall = {}

  @contextlib.contextmanager
  def installed(self):
    sample, update = _rl.RLLoop.sample, _rl.RLLoop.update
    rec = self

    def traced_sample(loop, s, *args, **kwargs):
      if s + 1 != rec.step:
        return sample(loop, s, *args, **kwargs)
      jax.profiler.start_trace(rec.trace_dir, create_perfetto_trace=True)
      with jax.profiler.TraceAnnotation("rljax_rollout"):
        t = time.perf_counter()
        out = jax.block_until_ready(sample(loop, s, *args, **kwargs))
        rec.wall["rollout"] = time.perf_counter() - t
      return out

    def traced_update(loop, batch, s):
      if s + 1 != rec.step:
        return update(loop, batch, s)
      rec.hlo_text = loop.update_step.lower(loop.state, batch).compile().as_text()
      try:
        with jax.profiler.TraceAnnotation("rljax_update"):
          t = time.perf_counter()
          out = update(loop, batch, s)
          jax.block_until_ready(loop.state)
          rec.wall["update"] = time.perf_counter() - t
      finally:
        jax.profiler.stop_trace()
      return out

    _rl.RLLoop.sample, _rl.RLLoop.update = traced_sample, traced_update
    try:
      yield self
    finally:
      _rl.RLLoop.sample, _rl.RLLoop.update = sample, update


def read_trace(trace_dir: str) -> list:
  paths = glob.glob(os.path.join(trace_dir, "**", "perfetto_trace.json.gz"), recursive=True)
  if not paths:
    raise FileNotFoundError(f"no perfetto_trace.json.gz under {trace_dir}")
  with gzip.open(max(paths, key=os.path.getmtime)) as f:
    data = json.load(f)
  return data["traceEvents"] if isinstance(data, dict) else data


def report(events: list, hlo_text: str, wall: dict, top: int = 0) -> str:
  """The two windows' tables (markdown); with ``top`` > 0 also the update's ``top`` largest instructions (their
  wall time summed over their runs, with their ``op_name``)."""
  complete = [e for e in events if e.get("ph") == "X"]
  windows = {}
  for name in ("rollout", "update"):
    marks = [e for e in complete if e["name"] == f"rljax_{name}"]
    if not marks:
      raise ValueError(f"the trace has no rljax_{name} annotation")
    windows[name] = (marks[0]["ts"], marks[0]["ts"] + marks[0]["dur"])
  op_names = hlo_op_names(hlo_text)
  # leaf thunks: events on XLA's threads named like HLO instructions (not the runtime's own spans)
  thunks = [e for e in complete if re.fullmatch(r"[\w\-]+(\.\d+)?", e["name"]) and not e["name"].startswith(
      CONTAINERS) and not e["name"].startswith(("rljax_", "ParseArguments", "DevicePut"))]
  lines = []
  for name, window in windows.items():
    total = window[1] - window[0]
    if name == "update":
      label = lambda n: (f"{hlo_origin(op_names[n])}: {thunk_kind(n)}" if n in op_names  # noqa: E731
                         else f"(not in the update's HLO): {thunk_kind(n)}")
    else:
      label = thunk_kind
    by_name = wall_shares(thunks, window, lambda e: e["name"])  # idle time keeps its own "no thunk..." keys
    shares = collections.Counter()
    for k, v in by_name.items():
      shares[k if k.startswith("no thunk") else label(k)] += v
    lines += [f"\n{name}: {total / 1e6:.2f} s in the trace ({wall[name]:.2f} s timed)",
              "| part | wall s | share |", "|---|---|---|"]
    lines += [f"| {k} | {v / 1e6:.3f} | {100 * v / total:.1f}% |" for k, v in shares.most_common() if v >= 1e-3 * total]
    if name == "update" and top:
      lines += [f"\nthe update's {top} largest instructions (wall s, runs, op_name):"]
      runs = collections.Counter(e["name"] for e in thunks if window[0] <= e["ts"] < window[1])
      lines += [f"  {v / 1e6:6.3f}  x{runs[k]:<4d} {k}: {op_names.get(k, '?')}"
                for k, v in by_name.most_common(top + 2) if not k.startswith("no thunk")][:top]
  return "\n".join(lines)


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--config", default="smollm2_addition", help="config name in configs/ or a .py path")
  ap.add_argument("--step", type=int, default=3, help="the RL step traced (1-based; >= 2 skips the compile)")
  ap.add_argument("--out", default="/tmp/rljax_profile", help="the run directory and the trace go here")
  ap.add_argument("--top", type=int, default=0, help="also list the update's N largest instructions")
  args = ap.parse_args(argv)
  if args.step < 1:
    ap.error(f"--step must be >= 1, got {args.step}")
  configure_host_allocator()  # as the rljax command line does, before JAX starts
  cfg = load_config(args.config)
  cfg = cfg.replace(rl=dataclasses.replace(cfg.rl, steps=args.step),
                    eval=dataclasses.replace(cfg.eval, every=args.step + 1),
                    out_dir=os.path.join(args.out, "run"))
  trace_dir = os.path.join(args.out, "trace")
  with StepRecorder(args.step, trace_dir).installed() as rec:
    train(cfg, overwrite=True)
  from real_model_bench import MATMUL_N, jax_matmul_seconds  # pylint: disable=import-outside-toplevel
  rate = 2 * MATMUL_N ** 3 / jax_matmul_seconds() / 1e9
  print(f"\nconfig {args.config}, RL step {args.step}; jax {jax.__version__}, nproc {os.cpu_count()}; "
        f"float32 matmul rate {rate:.1f} GFLOP/s ({MATMUL_N}^3, best of 5); trace in {trace_dir}")
  with open(os.path.join(args.out, "update_hlo.txt"), "w", encoding="utf-8") as f:
    f.write(rec.hlo_text)
  print(report(read_trace(trace_dir), rec.hlo_text, rec.wall, top=args.top))
  return 0


if __name__ == "__main__":
  sys.exit(main())
