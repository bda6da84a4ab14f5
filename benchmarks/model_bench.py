"""Training-forward tokens/s: rljax (jitted) vs Hugging Face transformers (torch CPU), one process.

Same tiny Qwen2-shaped config and the same weights on both sides (the HF model
is saved to a temp dir and loaded with ``rljax.models.from_pretrained``; the
logits are checked to agree first). Both sides run float32 with the same number
of CPU threads; A/B rounds are interleaved and the median per-round ratio is
reported with min/max (performance-anchors.md, fairness rules; docs/benchmarks.md, "How we compare": torch at
``--hf-threads``, default the machine's cores; above the core count the load average at the start withholds the
ratios unless ``--allow-load``).

  python benchmarks/model_bench.py [--batch 4 --seq 256 --rounds 7]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchmarks/: the shared rules
import _peer_rules as rules  # noqa: E402  pylint: disable=wrong-import-position


def build_parser() -> argparse.ArgumentParser:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--batch", type=int, default=4)
  ap.add_argument("--seq", type=int, default=256)
  ap.add_argument("--rounds", type=int, default=7)
  ap.add_argument("--iters", type=int, default=3, help="timed calls per side per round")
  ap.add_argument("--hidden", type=int, default=256)
  ap.add_argument("--layers", type=int, default=4)
  ap.add_argument("--vocab", type=int, default=8192)
  rules.threads_flag(ap, "--hf-threads", "HF transformers")
  rules.add_rules_args(ap)
  return ap


def main(argv=None):
  args = build_parser().parse_args(argv)
  guard = rules.LoadGuard.now(args.allow_load)

  import jax
  import jax.numpy as jnp
  import torch
  import transformers
  from flax import nnx

  from rljax.models import from_pretrained, policy_outputs

  threads = args.hf_threads
  torch.set_num_threads(threads)
  cfg = transformers.Qwen2Config(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=4 * args.hidden,
                                 num_hidden_layers=args.layers, num_attention_heads=args.hidden // 64,
                                 num_key_value_heads=max(1, args.hidden // 128), head_dim=64,
                                 max_position_embeddings=4096, tie_word_embeddings=True)
  torch.manual_seed(0)
  hf = transformers.Qwen2ForCausalLM(cfg).eval()
  with tempfile.TemporaryDirectory() as d:
    hf.save_pretrained(d)
    model = from_pretrained(d, dtype="float32")
  graphdef, state = nnx.split(model)
  tokens_np = np.random.RandomState(0).randint(0, args.vocab, (args.batch, args.seq))
  tokens = jnp.asarray(tokens_np, jnp.int32)
  tokens_t = torch.tensor(tokens_np)

  @jax.jit
  def fwd_logits(state, tok):
    return nnx.merge(graphdef, state)(tok, return_logits=True).logits

  @jax.jit
  def fwd_logp(state, tok):
    return policy_outputs(nnx.merge(graphdef, state), tok).logp

  def hf_logits():
    with torch.no_grad():
      return hf(tokens_t).logits

  t0 = time.perf_counter()
  ours = fwd_logits(state, tokens).block_until_ready()
  compile_s = time.perf_counter() - t0
  fwd_logp(state, tokens).block_until_ready()
  ref = hf_logits().numpy()
  diff = float(np.abs(np.asarray(ours) - ref).max())

  def time_it(fn):
    t = time.perf_counter()
    for _ in range(args.iters):
      fn()
    return (time.perf_counter() - t) / args.iters

  r_logits, r_logp, t_ours, t_logp, t_hf = [], [], [], [], []
  for _ in range(args.rounds):
    a = time_it(lambda: fwd_logits(state, tokens).block_until_ready())
    c = time_it(lambda: fwd_logp(state, tokens).block_until_ready())
    b = time_it(hf_logits)
    t_ours.append(a), t_logp.append(c), t_hf.append(b)
    r_logits.append(b / a)
    r_logp.append(b / c)
  n_tok = args.batch * args.seq
  med = statistics.median
  print(f"# model_bench: Qwen2-shaped H={args.hidden} L={args.layers} V={args.vocab} B={args.batch} T={args.seq}; "
        f"float32; threads={threads}; jax {jax.__version__} ({jax.default_backend()}), torch {torch.__version__}, "
        f"transformers {transformers.__version__}")
  print(f"logits max|diff| rljax vs HF: {diff:.2e}; rljax compile {compile_s:.2f} s")
  print(f"rljax forward+logits : {n_tok / med(t_ours):10.0f} tok/s")
  print(f"rljax forward+logp   : {n_tok / med(t_logp):10.0f} tok/s (policy_outputs, fused head)")
  print(f"HF transformers      : {n_tok / med(t_hf):10.0f} tok/s")
  print(guard.header())
  if not guard.ratios_allowed:
    print(f"ratio rljax/HF: {guard.ratio(0)}")
    return
  print(f"ratio rljax/HF (logits): median {med(r_logits):.2f}x  min {min(r_logits):.2f}x  max {max(r_logits):.2f}x "
        f"over {args.rounds} interleaved rounds")
  print(f"ratio rljax/HF (logp)  : median {med(r_logp):.2f}x  min {min(r_logp):.2f}x  max {max(r_logp):.2f}x")


if __name__ == "__main__":
  main()
