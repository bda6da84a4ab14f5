"""Compile seconds of the launches that should not recompile (issue #52 item 5), on the real-model demo.

Each launch is ``rljax`` in its own process (``nice -n 10``) that counts JAX's own events
(``jax._src.monitoring``): the backend-compile seconds (XLA compiling, or loading from the persistent cache on a
hit), the seconds tracing and lowering (which no cache skips), the persistent-cache hits and misses, the peak RSS
(``getrusage``) and the load average when it started. Every launch is run twice: with an empty cache (cold) and
again on the cache the first one filled (warm)::

    python benchmarks/launch_compile.py --work /tmp/launch_compile [--steps 2]

Launches: ``train`` (a first run of ``configs/smollm2_addition.py`` for ``--steps`` steps; its warm twin is a
second run of the same shapes into another directory), a ``--resume`` of that run one step further (on a copy per
cache), ``rljax sample`` of one prompt, and ``rljax eval`` (the run's own evaluation). Prints a Markdown table and
writes it with the raw counts to ``WORK/launch_compile.json``. On a shared machine the seconds are not
publishable; the cold/warm ratio and the miss counts are what it measures.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

# rljax's command line in a process that sums JAX's compile events and prints them as the last line
_COUNTED = """
import collections, json, resource, sys, time
from jax._src import monitoring
counts, secs = collections.Counter(), collections.Counter()
monitoring.register_event_listener(lambda event, **kw: counts.update([event.rsplit("/", 1)[-1]]))
def _dur(event, duration, **kw):
  secs[event.rsplit("/", 1)[-1]] += duration
monitoring.register_event_duration_secs_listener(_dur)
t0 = time.perf_counter()
from rljax.cli import main
rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "wall_s": time.perf_counter() - t0, "counts": counts, "secs": secs,
                  "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))
"""


def _launch(cache: str, argv, log: str) -> dict:
  env = dict(os.environ, JAX_PLATFORMS="cpu", RLJAX_COMPILE_CACHE=cache)
  for k in ("XLA_FLAGS", "JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"):
    env.pop(k, None)  # the command's defaults, as a user launches it
  with open("/proc/loadavg", encoding="utf-8") as f:
    load = f.read().split()[0]
  done = subprocess.run(["nice", "-n", "10", sys.executable, "-c", _COUNTED, *argv], env=env, capture_output=True,
                        text=True, check=False)
  with open(log, "w", encoding="utf-8") as f:
    f.write(done.stdout + "\n----- stderr\n" + done.stderr)
  lines = done.stdout.strip().splitlines()
  if done.returncode or not lines or not lines[-1].startswith("{"):
    raise SystemExit(f"{' '.join(argv)} failed (rc {done.returncode}); see {log}")
  out = json.loads(lines[-1])
  if out["rc"]:
    raise SystemExit(f"{' '.join(argv)} exited {out['rc']}; see {log}")
  out["load_at_start"] = float(load)
  return out


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--work", required=True, help="a scratch directory (runs, caches, logs)")
  p.add_argument("--steps", type=int, default=2, help="RL steps of the first run (the resume adds one)")
  p.add_argument("--launches", default="train,resume,sample,eval",
                 help="which launches, comma-separated (train first: the others read its run; default: %(default)s)")
  p.add_argument("--resume-on-train-cache", action="store_true",
                 help="resume once, on the cache the two train launches filled (no cold resume: its programs are "
                      "the first run's)")
  args = p.parse_args()
  work = os.path.abspath(args.work)
  os.makedirs(work, exist_ok=True)
  base = ["--config", "smollm2_addition", "--set", f"rl.steps={args.steps}", "--set", "checkpoint.every=1"]
  run = os.path.join(work, "run")
  saved = os.path.join(work, "launch_compile.json")
  rows = {}
  if os.path.exists(saved):  # launches of an earlier call (--launches runs a part at a time)
    with open(saved, encoding="utf-8") as f:
      rows = {tuple(k.split(" ", 1)): r for k, r in json.load(f)["rows"].items()}

  def one(name, which, cache, argv):
    rows[(name, which)] = _launch(cache, argv, os.path.join(work, f"{name}_{which.split()[0]}.log"))
    print(name, which, json.dumps(rows[(name, which)]), flush=True)

  def both(name, make_argv):
    cache = os.path.join(work, f"cache_{name}")
    shutil.rmtree(cache, ignore_errors=True)
    for which in ("cold", "warm"):
      one(name, which, cache, make_argv(which))

  todo = args.launches.split(",")
  if "train" in todo:  # a first run (cold), then a second run of the same shapes into another directory (warm)
    both("train", lambda which: ["train", "--out-dir", run if which == "cold" else run + "_again", *base])
  if "resume" in todo:  # a resume of a copy of the run, one step further
    for which in ("cold", "warm"):
      shutil.rmtree(f"{run}_resume_{which}", ignore_errors=True)
      shutil.copytree(run, f"{run}_resume_{which}")
    resume = lambda which: ["train", "--resume", "--out-dir", f"{run}_resume_{which}", "--config", "smollm2_addition",
                            "--set", f"rl.steps={args.steps + 1}"]
    if args.resume_on_train_cache:
      one("resume", "warm (the runs' cache)", os.path.join(work, "cache_train"), resume("warm"))
    else:
      both("resume", resume)
  if "sample" in todo:
    both("sample", lambda which: ["sample", "--run-dir", run, "What is 7 + 12? Reply with only the number."])
  if "eval" in todo:
    both("eval", lambda which: ["eval", "--run-dir", run])
  table = ["| launch | cache | backend compile s | trace + lower s | cache misses / hits | wall s | peak RSS GB "
           "| load at start |", "|---|---|---:|---:|---:|---:|---:|---:|"]
  for (name, which), r in rows.items():
    s, c = r["secs"], r["counts"]
    table.append(f"| {name} | {which} | {s.get('backend_compile_duration', 0):.1f} | "
                 f"{s.get('jaxpr_trace_duration', 0) + s.get('jaxpr_to_mlir_module_duration', 0):.1f} | "
                 f"{c.get('cache_misses', 0)} / {c.get('cache_hits', 0)} | {r['wall_s']:.0f} | "
                 f"{r['peak_rss_gb']:.2f} | {r['load_at_start']:.1f} |")
  print("\n".join(table))
  with open(saved, "w", encoding="utf-8") as f:
    json.dump({"table": table, "rows": {f"{n} {w}": r for (n, w), r in rows.items()}}, f, indent=1)


if __name__ == "__main__":
  main()
