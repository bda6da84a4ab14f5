"""TPU memory of the fused log-prob / entropy head, compiled by XLA:TPU and Mosaic with no TPU attached.

For a Qwen-sized LM head (V 151936, bf16) this compiles, for one chip of a TPU topology
(``jax.experimental.topologies``; libtpu compiles, nothing runs), the forward and the
forward + backward (``grad`` of ``sum(logp) + sum(entropy)`` w.r.t. hidden and weight) of:

* ``auto``: what ``rljax.kernels.logprob_and_entropy`` lowers for TPU by default, the Pallas
  Mosaic kernel (the script checks its ``tpu_custom_call`` is in the compiled program);
* ``xla``: the chunked XLA path;
* ``reference``: the materialising ``[N, V]`` logits and autodiff;

and prints XLA:TPU's ``memory_analysis()`` per program: argument, output and temp GiB. These are
the compiler's buffer sizes, not a measurement on a chip. ``fits`` keeps 10% of the chip's HBM free::

    pip install -e ".[tpu]"      # libtpu
    JAX_PLATFORMS=cpu python benchmarks/tpu_kernel_memory.py
    JAX_PLATFORMS=cpu python benchmarks/tpu_kernel_memory.py --target v6e:2x2 --shapes 4096x896 --impls auto

tests/test_kernels_tpu.py imports :func:`topology_devices`, :func:`program_fn` and :func:`compile_program`.
"""
import argparse
import os
import time

# libtpu takes a process lock (/tmp/libtpu_lockfile) meant for processes that drive a real TPU;
# compiling only, several processes may load it at once.
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from rljax.kernels import logprob_and_entropy  # noqa: E402

GiB = 2 ** 30
# Published HBM per chip (GB = 1e9 bytes) of the generations the tests compile for.
HBM_BYTES = {"v5e": 16e9, "v6e": 32e9, "v5p": 95e9, "v4": 32e9}
IMPLS = ("auto", "xla", "reference")
PROGRAMS = ("forward", "forward+backward")
V_QWEN = 151936


def topology_devices(name: str) -> list:
  """The chips of the libtpu topology ``name`` (e.g. ``"v5e:2x2"``, ``"v6e:2x2"``, ``"v5p:2x2x1"``).

  Raises ``RuntimeError`` with the install command when libtpu is missing.
  """
  try:
    import libtpu  # noqa: F401
  except ImportError as e:
    raise RuntimeError('libtpu is not installed: pip install -e ".[tpu]"') from e
  from jax.experimental import topologies
  return list(topologies.get_topology_desc(topology_name=name, platform="tpu").devices)


def topology_device(name: str):
  """One chip of the topology ``name`` (libtpu has no one-chip ``v5e:1x1``: a chip of a 2x2)."""
  return topology_devices(name)[0]


def program_fn(program: str, impl: str):
  """``f(hidden, weight, targets)``: the op's ``(logp, entropy)`` (``"forward"``) or the gradient of
  ``sum(logp) + sum(entropy)`` w.r.t. hidden and weight (``"forward+backward"``)."""
  def forward(x, w, t):
    return logprob_and_entropy(x, w, t, impl=impl)

  def loss(x, w, t):
    logp, ent = logprob_and_entropy(x, w, t, impl=impl)
    return jnp.sum(logp) + jnp.sum(ent)

  if program == "forward":
    return forward
  if program == "forward+backward":
    return jax.grad(loss, argnums=(0, 1))
  raise ValueError(f"program must be one of {PROGRAMS}; got {program!r}")


def compile_program(device, program: str, impl: str, n: int, h: int, v: int, dtype=jnp.bfloat16):
  """Compiles ``program`` of ``impl`` at ``hidden [n, h]``, ``weight [h, v]`` (``dtype``) for ``device``.

  Returns a dict: ``arguments``, ``outputs``, ``temp`` (bytes, XLA's ``memory_analysis()``),
  ``mosaic`` (a ``tpu_custom_call`` is in the compiled text), ``loops`` (``while`` ops in it),
  ``compile_s``, or ``error`` (the compiler's first line) when XLA refuses the program.
  """
  sh = NamedSharding(Mesh(np.array([device]), ("chip",)), P())
  args = (jax.ShapeDtypeStruct((n, h), dtype, sharding=sh),
          jax.ShapeDtypeStruct((h, v), dtype, sharding=sh),
          jax.ShapeDtypeStruct((n,), jnp.int32, sharding=sh))
  t0 = time.perf_counter()
  try:
    compiled = jax.jit(program_fn(program, impl)).lower(*args).compile()
  except Exception as e:  # XLA:TPU refuses programs over the chip's HBM
    return {"error": str(e).strip().splitlines()[0][:160], "compile_s": time.perf_counter() - t0}
  mem = compiled.memory_analysis()
  text = compiled.as_text()
  return {"arguments": mem.argument_size_in_bytes, "outputs": mem.output_size_in_bytes,
          "temp": mem.temp_size_in_bytes, "mosaic": "tpu_custom_call" in text,
          "loops": text.count(" while("), "compile_s": time.perf_counter() - t0}


def _shapes(text: str):
  out = []
  for item in text.split(","):
    n, h = (int(p) for p in item.lower().split("x"))
    out.append((n, h))
  return out


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--target", default="v5e:2x2", help="libtpu topology name; one chip of it is compiled for")
  ap.add_argument("--shapes", default="4096x896,4096x3584,8192x3584", help="NxH list (V is --vocab)")
  ap.add_argument("--vocab", type=int, default=V_QWEN)
  ap.add_argument("--impls", default=",".join(IMPLS))
  ap.add_argument("--programs", default=",".join(PROGRAMS))
  args = ap.parse_args(argv)
  device = topology_device(args.target)
  hbm = HBM_BYTES.get(args.target.split(":")[0])
  print(f"XLA:TPU memory_analysis() per program, one chip of {args.target} ({device.device_kind}), "
        f"V {args.vocab}, bf16; GiB")
  print("| N | H | program | impl | Mosaic | arguments | outputs | temp | fits (90% HBM) |")
  print("|---|---|---|---|---|---|---|---|---|")
  for n, h in _shapes(args.shapes):
    for program in args.programs.split(","):
      for impl in args.impls.split(","):
        r = compile_program(device, program, impl, n, h, args.vocab)
        if "error" in r:
          print(f"| {n} | {h} | {program} | {impl} | | | | | refused: {r['error']} |", flush=True)
          continue
        total = r["arguments"] + r["outputs"] + r["temp"]
        fits = "?" if hbm is None else ("yes" if total <= 0.9 * hbm else "no")
        print(f"| {n} | {h} | {program} | {impl} | {'yes' if r['mosaic'] else 'no'} | "
              f"{r['arguments'] / GiB:.3f} | {r['outputs'] / GiB:.3f} | {r['temp'] / GiB:.3f} | {fits} |",
              flush=True)


if __name__ == "__main__":
  main()
