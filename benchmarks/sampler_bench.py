"""Generated tokens/s: rljax sampler vs Tunix's native sampler vs HF ``generate``.

Same model shape (Llama-style, random weights) and batch on all three:
vocab 512, hidden 256, 4 layers, 4 heads of 64 (MHA), MLP 1024, 64 prompts
of 16 tokens, 112 new tokens, float32, no early stop (every row generates
all 112 tokens). Two sampling modes: greedy, and temperature 1 + top-p 0.9.

Tunix runs in its own virtualenv (it may pin another jax) as a subprocess::

  python3 -m venv /tmp/tunix-venv && /tmp/tunix-venv/bin/pip install google-tunix
  /work/venv/bin/python benchmarks/sampler_bench.py --tunix-python /tmp/tunix-venv/bin/python

rljax is also timed with ``SamplerConfig.concurrent_chunks=2`` (``--chunks``):
the 64 prompts as two calls of 32 on two host threads at once, alternating
call by call with the one-call variant (and checked to give the same tokens).

The peers at their best (docs/benchmarks.md, "How we compare"): Tunix runs JAX at XLA's default threading (all
cores) in float32, as rljax does; HF ``generate`` runs at ``--hf-threads`` torch threads (default: the machine's
cores). A missing Tunix stops the run with the command that makes its venv (``--skip-tunix`` times the others);
above the core count the load average at the start withholds the ratios unless ``--allow-load``.

Each backend: one warm-up call (compile, reported separately), then
``--rounds`` timed calls (``block_until_ready``); the median is reported.
Also times the trainer's small case (2 layers, d=64, 256 sequences of 5 new
tokens) to show the per-call overhead of the rljax sampler.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchmarks/: the shared rules
import _peer_rules as rules  # noqa: E402  pylint: disable=wrong-import-position

V, H, L, NH, D, F = 512, 256, 4, 4, 64, 1024
P, PROMPT_LEN, NEW = 64, 16, 112
MODES = {"greedy": dict(greedy=True), "top_p0.9": dict(temperature=1.0, top_p=0.9)}


def _prompts(seed=0):
  import numpy as np  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(seed)
  return rng.integers(1, V, size=(P, PROMPT_LEN)).astype("int32")


def bench_rljax(rounds: int, chunks: int = 2) -> dict:
  import jax  # pylint: disable=import-outside-toplevel
  from flax import nnx  # pylint: disable=import-outside-toplevel
  from rljax.models import ModelConfig, Transformer  # pylint: disable=import-outside-toplevel
  from rljax.sampling import SamplerConfig, generate  # pylint: disable=import-outside-toplevel
  cfg = ModelConfig(vocab_size=V, hidden_size=H, num_layers=L, num_heads=NH, num_kv_heads=NH,
                    head_dim=D, intermediate_size=F)
  model = Transformer(cfg, rngs=nnx.Rngs(0))
  split = nnx.split(model)
  base = SamplerConfig(max_new_tokens=NEW, prompt_buckets=(PROMPT_LEN,))
  prompts = list(_prompts())
  out = {}
  for mode, kw in MODES.items():
    # one call, and (SamplerConfig.concurrent_chunks) the prompts as `chunks` calls on host threads at once;
    # the two alternate call by call, so that machine drift hits both alike
    variants = {mode: base}
    if chunks > 1:
      variants[f"{mode}, {chunks} concurrent chunks"] = dataclasses.replace(base, concurrent_chunks=chunks)
    tokens, times = {}, {name: [] for name in variants}
    for name, scfg in variants.items():
      t0 = time.perf_counter()
      r = generate(split, prompts, config=scfg, key=jax.random.key(0), **kw)
      r.tokens.block_until_ready()
      out[name] = dict(first_call_s=time.perf_counter() - t0)
      assert int(r.completion_mask.sum()) == P * NEW
      tokens[name] = r.tokens
    for i in range(rounds):
      for name, scfg in (list(variants.items())[::1 if i % 2 == 0 else -1]):
        t0 = time.perf_counter()
        generate(split, prompts, config=scfg, key=jax.random.key(i + 1), **kw).tokens.block_until_ready()
        times[name].append(time.perf_counter() - t0)
    for name in variants:
      out[name].update(tok_s=P * NEW / statistics.median(times[name]), times=times[name],
                       same_tokens_as_one_call=bool((tokens[name] == tokens[mode]).all()))
  # The trainer's small case: per-call wall time (Python overhead + device).
  small = ModelConfig(vocab_size=V, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=4,
                      head_dim=16, intermediate_size=256)
  split = nnx.split(Transformer(small, rngs=nnx.Rngs(0)))
  scfg = SamplerConfig(max_new_tokens=5, prompt_buckets=(16,))
  sp = [list(p) for p in _prompts()[:32]]
  generate(split, sp, config=scfg, key=jax.random.key(0), n=8).tokens.block_until_ready()
  times = []
  for i in range(max(rounds, 10)):
    t0 = time.perf_counter()
    generate(split, sp, config=scfg, key=jax.random.key(i), n=8).tokens.block_until_ready()
    times.append(time.perf_counter() - t0)
  out["small_case_ms_per_call"] = 1e3 * statistics.median(times)
  return out


_TUNIX_SCRIPT = textwrap.dedent('''
    import json, statistics, sys, time
    import jax, jax.numpy as jnp, numpy as np
    from flax import nnx
    from tunix.generate import sampler as sampler_lib
    from tunix.models.llama3 import model as llama
    V, H, L, NH, D, F, P, PL, NEW, rounds = [int(x) for x in sys.argv[1:11]]

    class Tok:  # ids as space-separated ints; no BOS, pad 0, EOS never produced
      def encode(self, s, **kw): return [int(x) for x in s.split()]
      def decode(self, ids, **kw): return " ".join(str(i) for i in ids)
      def bos_id(self): return 0
      def eos_id(self): return V + 7
      def pad_id(self): return 0

    cfg = llama.ModelConfig(num_layers=L, vocab_size=V, embed_dim=H, hidden_dim=F, num_heads=NH,
                            head_dim=D, num_kv_heads=NH, rope_theta=10000, norm_eps=1e-6)
    model = llama.Llama3(cfg, rngs=nnx.Rngs(0))
    s = sampler_lib.Sampler(model, Tok(), sampler_lib.CacheConfig(
        cache_size=PL + NEW, num_layers=L, num_kv_heads=NH, head_dim=D))
    rng = np.random.default_rng(0)
    prompts = [" ".join(str(int(x)) for x in row) for row in rng.integers(1, V, size=(P, PL))]
    modes = {"greedy": dict(temperature=0.0), "top_p0.9": dict(temperature=1.0, top_p=0.9)}
    out = {}
    for mode, kw in modes.items():
      def call(i):
        o = s(prompts, max_generation_steps=NEW, max_prompt_length=PL, eos_tokens=[V + 7],
              seed=i, pad_output=True, **kw)
        return o
      t0 = time.perf_counter(); o = call(0); first = time.perf_counter() - t0
      n_tok = sum(len(t) for t in o.tokens)
      times = []
      for i in range(rounds):
        t0 = time.perf_counter(); call(i + 1); times.append(time.perf_counter() - t0)
      out[mode] = dict(tok_s=P * NEW / statistics.median(times), first_call_s=first, times=times,
                       tokens_returned=n_tok)
    out["jax"] = jax.__version__
    print("RESULT " + json.dumps(out))
''')


def bench_tunix(python: str, rounds: int) -> dict:
  with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
    f.write(_TUNIX_SCRIPT)
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  env.pop("PYTHONPATH", None)
  args = [python, f.name] + [str(x) for x in (V, H, L, NH, D, F, P, PROMPT_LEN, NEW, rounds)]
  proc = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
  os.unlink(f.name)
  for line in proc.stdout.splitlines():
    if line.startswith("RESULT "):
      return json.loads(line[7:])
  return {"error": (proc.stderr or proc.stdout)[-2000:]}


def bench_hf(rounds: int, threads: int) -> dict:
  import torch  # pylint: disable=import-outside-toplevel
  torch.set_num_threads(threads)
  from transformers import LlamaConfig, LlamaForCausalLM  # pylint: disable=import-outside-toplevel
  torch.manual_seed(0)
  cfg = LlamaConfig(vocab_size=V, hidden_size=H, num_hidden_layers=L, num_attention_heads=NH,
                    num_key_value_heads=NH, head_dim=D, intermediate_size=F,
                    max_position_embeddings=256, eos_token_id=None, pad_token_id=0, bos_token_id=None)
  model = LlamaForCausalLM(cfg).eval()
  ids = torch.tensor(_prompts(), dtype=torch.long)
  attn = torch.ones_like(ids)
  modes = {"greedy": dict(do_sample=False), "top_p0.9": dict(do_sample=True, temperature=1.0, top_p=0.9, top_k=0)}
  out = {"torch_threads": torch.get_num_threads()}
  for mode, kw in modes.items():
    def call():
      with torch.no_grad():
        return model.generate(ids, attention_mask=attn, max_new_tokens=NEW, min_new_tokens=NEW, **kw)
    t0 = time.perf_counter()
    o = call()
    first = time.perf_counter() - t0
    assert o.shape == (P, PROMPT_LEN + NEW), o.shape
    times = []
    for _ in range(rounds):
      t0 = time.perf_counter()
      call()
      times.append(time.perf_counter() - t0)
    out[mode] = dict(tok_s=P * NEW / statistics.median(times), first_call_s=first, times=times)
  return out


def build_parser() -> argparse.ArgumentParser:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--tunix-python", default="/tmp/tunix-venv/bin/python")
  ap.add_argument("--skip-tunix", action="store_true")
  ap.add_argument("--rounds", type=int, default=3)
  ap.add_argument("--skip-hf", action="store_true")
  rules.threads_flag(ap, "--hf-threads", "HF generate")
  ap.add_argument("--chunks", type=int, default=2, help="also time rljax with SamplerConfig.concurrent_chunks=N")
  rules.add_rules_args(ap)
  return ap


def main(argv=None) -> int:
  args = build_parser().parse_args(argv)
  if not args.skip_tunix:
    rules.require_peer(args.tunix_python, "tunix")  # before anything is printed
  guard = rules.LoadGuard.now(args.allow_load)
  print(f"shape: V={V} H={H} L={L} heads={NH}x{D} F={F}; batch {P} prompts x {PROMPT_LEN} tokens, "
        f"{NEW} new tokens; nproc={os.cpu_count()}; HF generate on {args.hf_threads} torch thread(s), Tunix at XLA's "
        "default threading", flush=True)
  print(guard.header(), flush=True)
  res = {"rljax": bench_rljax(args.rounds, args.chunks)}
  print("rljax:", json.dumps(res["rljax"]), flush=True)
  res["tunix"] = {"error": "--skip-tunix"} if args.skip_tunix else bench_tunix(args.tunix_python, args.rounds)
  print("tunix:", json.dumps(res["tunix"]), flush=True)
  if not args.skip_hf:
    res["hf"] = bench_hf(args.rounds, args.hf_threads)
    print("hf:", json.dumps(res["hf"]), flush=True)
  print("\n| mode | rljax tok/s | Tunix tok/s | HF generate tok/s | rljax/Tunix | rljax/HF |")
  print("|---|---|---|---|---|---|")
  for mode in MODES:
    r = res["rljax"][mode]["tok_s"]
    t = res["tunix"].get(mode, {}).get("tok_s", float("nan"))
    h = res.get("hf", {}).get(mode, {}).get("tok_s", float("nan"))
    print(f"| {mode} | {r:,.0f} | {t:,.0f} | {h:,.0f} | {guard.ratio(r / t)} | {guard.ratio(r / h)} |")
    chunked = res["rljax"].get(f"{mode}, {args.chunks} concurrent chunks")
    if chunked:
      r = chunked["tok_s"]
      same = "same tokens" if chunked["same_tokens_as_one_call"] else "TOKENS DIFFER from one call"
      print(f"| {mode}, rljax in {args.chunks} concurrent chunks ({same}) | {r:,.0f} | {t:,.0f} | {h:,.0f} | "
            f"{guard.ratio(r / t)} | {guard.ratio(r / h)} |")
  print(f"\nrljax small case (2 layers, d=64, 32 prompts x 8 samples, 5 new tokens): "
        f"{res['rljax']['small_case_ms_per_call']:.1f} ms per call")
  return 0


if __name__ == "__main__":
  sys.exit(main())
