"""GPU check of the rljax sampler: tokens/s vs the memory-bandwidth bound.

NOT RUN YET (prepared for a session with a GPU). Random-weight model of the
Qwen2.5-0.5B shape (V=151936, H=896, 24 layers, 14 heads / 2 KV heads of 64,
MLP 4864, tied embeddings, QKV bias) in bfloat16; batch 1, 64 and 256
prompts of 64 tokens, 128 new tokens, no early stop; greedy and
temperature 1 + top-p 0.9.

For each batch it prints generated tok/s, decode steps/s and the roofline:
each decode step must at least read the parameters and the live KV cache,
``bytes = param_bytes + B * ctx * L * 2 * K * D * 2`` (``ctx`` the mean
context during decode), so ``steps/s <= BW / bytes``; and compute gives
``tok/s <= PEAK / (2 * n_params)``. The decode-phase time is the full call
minus a prefill-only call (``max_new_tokens=1``). Bandwidth / peak default to
H200 (4.8 TB/s, 989 TF/s bf16 dense; the measured anchors are ~4.3 TB/s and
~790 TF/s, see performance-anchors.md); override with ``--bw`` / ``--peak``.

Usage (one short run, well under 5 minutes on an H200)::

  python benchmarks/gpu_sampler_check.py [--batches 1 64 256] [--rounds 3]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time


def main(argv=None) -> int:
  ap = argparse.ArgumentParser()
  ap.add_argument("--batches", type=int, nargs="+", default=[1, 64, 256])
  ap.add_argument("--prompt-len", type=int, default=64)
  ap.add_argument("--new", type=int, default=128)
  ap.add_argument("--rounds", type=int, default=3)
  ap.add_argument("--bw", type=float, default=4.8e12, help="HBM bytes/s")
  ap.add_argument("--peak", type=float, default=989e12, help="bf16 dense FLOP/s")
  args = ap.parse_args(argv)

  import jax  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  from flax import nnx  # pylint: disable=import-outside-toplevel
  from rljax.models import ModelConfig, Transformer  # pylint: disable=import-outside-toplevel
  from rljax.sampling import SamplerConfig, generate  # pylint: disable=import-outside-toplevel

  print("devices:", jax.devices(), "jax", jax.__version__, flush=True)
  cfg = ModelConfig(vocab_size=151936, hidden_size=896, num_layers=24, num_heads=14, num_kv_heads=2,
                    head_dim=64, intermediate_size=4864, tie_embeddings=True, qkv_bias=True,
                    rope_theta=1e6, param_dtype="bfloat16", compute_dtype="bfloat16")
  t0 = time.perf_counter()
  model = Transformer(cfg, rngs=nnx.Rngs(0))
  split = nnx.split(model)
  params = split[1]
  n_params = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(params))
  param_bytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(params))
  print(f"model: {n_params / 1e6:.1f}M params, {param_bytes / 2**20:.0f} MiB, init {time.perf_counter() - t0:.1f}s",
        flush=True)
  kv_per_token = cfg.num_layers * 2 * cfg.num_kv_heads * cfg.head_dim * 2  # bf16 k and v
  scfg = SamplerConfig(max_new_tokens=args.new, prompt_buckets=(args.prompt_len,), return_entropy=False,
                       cache_dtype="bfloat16")
  rng = np.random.default_rng(0)
  modes = {"greedy": dict(greedy=True), "top_p0.9": dict(temperature=1.0, top_p=0.9)}
  print("| batch | mode | tok/s | decode steps/s | bound steps/s (BW) | frac of BW bound | "
        "compute bound tok/s | first call s |")
  print("|---|---|---|---|---|---|---|---|")
  for b in args.batches:
    prompts = list(rng.integers(1, cfg.vocab_size, size=(b, args.prompt_len)).astype("int32"))
    for mode, kw in modes.items():
      def call(i, m=None):
        r = generate(split, prompts, config=scfg, key=jax.random.key(i), max_new_tokens=m, **kw)
        r.tokens.block_until_ready()
        return r
      t0 = time.perf_counter()
      r = call(0)
      first = time.perf_counter() - t0
      assert int(r.completion_mask.sum()) == b * args.new
      full, pre = [], []
      for i in range(args.rounds):
        t0 = time.perf_counter()
        call(i + 1)
        full.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        call(i + 1, 1)
        pre.append(time.perf_counter() - t0)
      t_full, t_pre = statistics.median(full), statistics.median(pre)
      steps = args.new - 1
      decode_s = max(t_full - t_pre, 1e-9)
      ctx = args.prompt_len + args.new / 2
      step_bytes = param_bytes + b * ctx * kv_per_token
      bound_steps = args.bw / step_bytes
      steps_s = steps / decode_s
      compute_tok_s = args.peak / (2 * n_params)
      print(f"| {b} | {mode} | {b * args.new / t_full:,.0f} | {steps_s:,.0f} | {bound_steps:,.0f} | "
            f"{steps_s / bound_steps:.2f} | {compute_tok_s:,.0f} | {first:.1f} |", flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
