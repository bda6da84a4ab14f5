"""Memory of the LM head at Gemma 3 270M's vocabulary (V 262144, H 640): the fused log-prob + entropy op against
the materialising reference, forward and forward + backward, on CPU and for TPU. Memory figures only.

Programs (``tpu_kernel_memory.program_fn``): the forward ``(logp, entropy) = logprob_and_entropy(x, w, y)`` and
the forward + backward ``grad`` of ``sum(logp) + sum(entropy)`` w.r.t. hidden ``x [N, H]`` and weight ``w [H, V]``.
Implementations: ``auto`` (the chunked XLA path when lowered for CPU, the Mosaic kernel when lowered for TPU) and
``reference`` (the ``[N, V]`` logits materialised, autodiff). Three tables:

1. CPU, float32 (what a CPU run trains in), XLA:CPU's ``memory_analysis()`` of the compiled program: arguments,
   outputs, temp (GiB). XLA:CPU's buffer assignment is the compiler's figure, not a measurement.
2. CPU, measured (``--measure``): each program run once in a fresh process (fixed inputs); the process's peak
   resident set (``ru_maxrss``) minus that of the same process that builds the inputs and compiles the program
   but does not run it: the memory the run itself adds.
3. TPU, bfloat16: XLA:TPU's ``memory_analysis()`` for one chip of ``--target`` (``rljax.parallel.topology_devices``;
   libtpu compiles, no TPU is attached; the Mosaic kernel is checked in the compiled ``auto`` program)::

    JAX_PLATFORMS=cpu python benchmarks/gemma3_head_memory.py                 # tables 1 and 3
    JAX_PLATFORMS=cpu python benchmarks/gemma3_head_memory.py --measure       # + table 2 (needs ~4 GiB free)
    JAX_PLATFORMS=cpu python benchmarks/gemma3_head_memory.py --cpu-rows 1024 --tpu-rows 4096,8192 --target v5e:2x2
"""
import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys

import jax
import jax.numpy as jnp

_SPEC = importlib.util.spec_from_file_location(  # its sibling script: program_fn, compile_program, PROGRAMS
    "tpu_kernel_memory", os.path.join(os.path.dirname(os.path.abspath(__file__)), "tpu_kernel_memory.py"))
tkm = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(tkm)

GiB = 2 ** 30
V_GEMMA3, H_GEMMA3 = 262144, 640
IMPLS = ("auto", "reference")


def _rows(text: str) -> list:
  out = [int(s) for s in text.split(",") if s.strip()]
  if not out or any(n <= 0 for n in out):
    raise SystemExit(f"rows must be a comma-separated list of positive ints; got {text!r}")
  return out


def _args(n: int, h: int, v: int, dtype) -> tuple:
  return (jax.ShapeDtypeStruct((n, h), dtype), jax.ShapeDtypeStruct((h, v), dtype),
          jax.ShapeDtypeStruct((n,), jnp.int32))


def cpu_compiled(program: str, impl: str, n: int, h: int = H_GEMMA3, v: int = V_GEMMA3) -> dict:
  """XLA:CPU ``memory_analysis()`` of ``program`` / ``impl`` at ``x [n, h]``, ``w [h, v]`` float32 (bytes)."""
  mem = jax.jit(tkm.program_fn(program, impl)).lower(*_args(n, h, v, jnp.float32)).compile().memory_analysis()
  return {"arguments": mem.argument_size_in_bytes, "outputs": mem.output_size_in_bytes,
          "temp": mem.temp_size_in_bytes}


def _child(program: str, impl: str, n: int, h: int, v: int, run: bool) -> None:
  """In a fresh process: builds the inputs, compiles ``program`` and runs it once when ``run``; prints the
  peak resident set in bytes as JSON."""
  def inputs():  # deterministic, made in place by one fused program: no transient copy raises the baseline's peak
    x = jnp.sin(jnp.arange(n * h, dtype=jnp.float32)).reshape(n, h)
    w = 0.05 * jnp.cos(jnp.arange(h * v, dtype=jnp.float32)).reshape(h, v)
    return x, w, (jnp.arange(n, dtype=jnp.int32) * 7919) % v
  x, w, y = jax.block_until_ready(jax.jit(inputs)())
  fn = jax.jit(tkm.program_fn(program, impl)).lower(x, w, y).compile()
  if run:
    jax.block_until_ready(fn(x, w, y))
  print(json.dumps({"peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))


def _peak_rss(program: str, impl: str, n: int, h: int, v: int, run: bool) -> int:
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                        f"{program},{impl},{n},{h},{v},{int(run)}"], capture_output=True, text=True, env=env,
                       check=True)
  return json.loads(out.stdout.strip().splitlines()[-1])["peak_rss"]


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--cpu-rows", default="1024,4096", help="N (tokens) for the CPU tables")
  ap.add_argument("--tpu-rows", default="4096,8192", help="N (tokens) for the TPU table")
  ap.add_argument("--target", default="v5e:2x2", help="libtpu topology; one chip of it is compiled for")
  ap.add_argument("--measure", action="store_true", help="also run each CPU program (the smallest --cpu-rows)")
  ap.add_argument("--no-tpu", action="store_true", help="leave out the TPU table (no libtpu needed)")
  ap.add_argument("--child", default="", help=argparse.SUPPRESS)
  args = ap.parse_args(argv)
  if args.child:
    program, impl, n, h, v, run = args.child.split(",")
    _child(program, impl, int(n), int(h), int(v), bool(int(run)))
    return
  h, v = H_GEMMA3, V_GEMMA3
  programs = tkm.PROGRAMS
  print(f"Gemma 3 270M head (H {h}, V {v}): memory only, GiB")
  print("\n1. CPU, float32, XLA:CPU memory_analysis() of the compiled program")
  print("| N | program | impl | arguments | outputs | temp |")
  print("|---|---|---|---|---|---|")
  for n in _rows(args.cpu_rows):
    for program in programs:
      for impl in IMPLS:
        r = cpu_compiled(program, impl, n, h, v)
        print(f"| {n} | {program} | {impl} | {r['arguments'] / GiB:.3f} | {r['outputs'] / GiB:.3f} | "
              f"{r['temp'] / GiB:.3f} |", flush=True)
  if args.measure:
    n = min(_rows(args.cpu_rows))
    print("\n2. CPU, float32, measured: peak RSS of a fresh process that builds the inputs, compiles and runs the "
          "program once, minus the same process without the run")
    print("| N | program | impl | peak RSS, compiled only | added by the run |")
    print("|---|---|---|---|---|")
    for program in programs:
      for impl in IMPLS:
        base = _peak_rss(program, impl, n, h, v, run=False)
        ran = _peak_rss(program, impl, n, h, v, run=True)
        print(f"| {n} | {program} | {impl} | {base / GiB:.3f} | {(ran - base) / GiB:.3f} |", flush=True)
  if args.no_tpu:
    return
  from rljax.parallel import topology_devices  # pylint: disable=import-outside-toplevel
  device = topology_devices(args.target)[0]
  print(f"\n3. TPU, bfloat16, XLA:TPU memory_analysis(), one chip of {args.target} ({device.device_kind})")
  print("| N | program | impl | Mosaic | arguments | outputs | temp |")
  print("|---|---|---|---|---|---|---|")
  for n in _rows(args.tpu_rows):
    for program in programs:
      for impl in IMPLS:
        r = tkm.compile_program(device, program, impl, n, h, v)
        if "error" in r:
          print(f"| {n} | {program} | {impl} | | refused: {r['error']} | | |", flush=True)
          continue
        print(f"| {n} | {program} | {impl} | {'yes' if r['mosaic'] else 'no'} | {r['arguments'] / GiB:.3f} | "
              f"{r['outputs'] / GiB:.3f} | {r['temp'] / GiB:.3f} |", flush=True)


if __name__ == "__main__":
  main()
