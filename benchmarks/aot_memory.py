"""Ahead-of-time per-device memory of the sharded train step and sampler (no allocation).

Compiles ``rljax.train.make_train_step`` (and, for the rollout row, one decode step
of the sampler) for Qwen2.5-7B / 32B-size models on fake CPU meshes from abstract
``jax.ShapeDtypeStruct`` inputs carrying their shardings (``nnx.eval_shape`` /
``jax.eval_shape``: no parameter is ever materialised), and prints
``compiled.memory_analysis()`` per device beside a formula-level estimate of the
same quantity, and which TPU it fits (v5e 16 GB, v6e 32 GB, v5p 95 GB HBM).

Every row runs in its own subprocess (its own fake device count; one
out-of-memory or crash loses only that row). One command prints every row::

    python benchmarks/aot_memory.py                      # all rows (the big compiles take minutes each)
    python benchmarks/aot_memory.py --rows 7b-fsdp64,7b-rollout-fsdp64
    python benchmarks/aot_memory.py --rows 7b-fsdp64 --layers 2   # a quick check with fewer layers

Numerics of the train rows: float32 parameters and Adam moments (LoRA row: bfloat16
frozen base, float32 adapters and their Adam moments), bfloat16 compute,
``remat="full"``, layers scanned (``scan_layers=True``; the ``-unrolled`` row keeps the
unrolled loop for the compile-time comparison), ``fsdp_loss_fn`` (each layer's weights
gathered inside the remat'ed scan body, in bfloat16; the embedding looked up and the LM head
scored vocabulary-sharded, neither gathered). Loss: token-mean NLL through the fused log-prob
kernel (vocabulary-parallel over tensor x fsdp). Global batch 64 x 2048 tokens.

Caveat: this is XLA:CPU's buffer assignment, a proxy for the TPU compiler's; treat
the numbers as estimates to compare layouts, not as an HBM guarantee. "Fits" keeps
10 % headroom.
"""
import os
import sys


def _early_devices(argv) -> int:
  for i, a in enumerate(argv):
    if a == "--devices" and i + 1 < len(argv):
      return int(argv[i + 1])
    if a.startswith("--devices="):
      return int(a.split("=", 1)[1])
  return 64


if "--row" in sys.argv:  # a child: its fake device count before JAX is imported
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                             + f" --xla_force_host_platform_device_count={_early_devices(sys.argv)}").strip()
  os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

GiB = 2 ** 30
HBM_GB = {"v5e 16 GB": 16, "v6e 32 GB": 32, "v5p 95 GB": 95}


@dataclasses.dataclass(frozen=True)
class Row:
  model: str  # "7b" or "32b"
  mesh: tuple  # (data, fsdp, tensor)
  kind: str = "train"  # "train" or "rollout"
  scan: bool = True
  lora_rank: int = 0
  batch: int = 64  # global batch x sequence length (train rows)
  seq: int = 2048


ROWS = {
    "7b-fsdp64": Row("7b", (1, 64, 1)),
    "7b-fsdp16xtensor4": Row("7b", (1, 16, 4)),
    "7b-lora64-fsdp64": Row("7b", (1, 64, 1), lora_rank=64),
    # 128 devices: a global batch of 128 sequences (one per device; 64 would leave half the devices without a row)
    "32b-fsdp128": Row("32b", (1, 128, 1), batch=128),
    "32b-fsdp32xtensor4": Row("32b", (1, 32, 4)),
    "7b-rollout-fsdp64": Row("7b", (1, 64, 1), kind="rollout"),
    "7b-unrolled-fsdp64": Row("7b", (1, 64, 1), scan=False),
    # compile time against the layer count, quick: a tiny Qwen2.5-shaped model (H 256, 12 layers) on 8 devices
    "tiny-fsdp8": Row("tiny", (1, 8, 1), batch=16, seq=256),
    "tiny-unrolled-fsdp8": Row("tiny", (1, 8, 1), scan=False, batch=16, seq=256),
}
TINY = dict(vocab_size=4096, hidden_size=256, num_layers=12, num_heads=4, num_kv_heads=2, intermediate_size=1024)
ROLLOUT = dict(prompts=64, samples=8, prompt_len=512, new_tokens=1536)


def model_config(row: Row, layers=None):
  from rljax.models import LoRAConfig, presets  # pylint: disable=import-outside-toplevel
  kw = dict(compute_dtype="bfloat16", remat="full", scan_layers=row.scan)
  if row.model == "tiny":
    kw.update(TINY)
  if row.model == "32b":  # Qwen2.5-32B: H 5120, 64 layers, 40 heads, 8 KV heads, F 27648
    kw.update(hidden_size=5120, num_layers=64, num_heads=40, num_kv_heads=8, intermediate_size=27648)
  if row.lora_rank:
    kw.update(param_dtype="bfloat16", lora=LoRAConfig(rank=row.lora_rank, alpha=2.0 * row.lora_rank))
  if layers:
    kw["num_layers"] = layers
  return presets.qwen2_5_7b(**kw)


# --------------------------------------------------------------------------- formula-level estimate
def estimate(row: Row, cfg) -> dict:
  """Per-device bytes by term (see docs/scaling.md for the derivation)."""
  from rljax.models import presets  # pylint: disable=import-outside-toplevel
  data, fsdp, tensor = row.mesh
  n_dev = data * fsdp * tensor
  h, v, layers = cfg.hidden_size, cfg.vocab_size, cfg.num_layers
  total = presets.num_params(cfg)
  embed_head = v * h * (1 if cfg.tie_embeddings else 2)
  per_layer = (total - embed_head - h) / layers
  if row.kind == "rollout":
    b = ROLLOUT["prompts"] * ROLLOUT["samples"]
    s = ROLLOUT["prompt_len"] + ROLLOUT["new_tokens"]
    kv = layers * 2 * b * s * cfg.num_kv_heads * cfg.head_dim * 2 / (data * fsdp * min(tensor, cfg.num_kv_heads))
    return {"params f32": total * 4 / n_dev, "KV cache bf16": kv,
            "one layer gathered bf16": per_layer * 2 / tensor,
            "logits f32 [B, V]": b / (data * fsdp) * v / tensor * 4}
  p_bytes = 2 if cfg.param_dtype == "bfloat16" else 4
  out = {}
  if cfg.lora is not None:
    r = cfg.lora.rank
    n, kh, d, f = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.intermediate_size
    lora = layers * r * ((h + n * d) * 2 + (h + kh * d) * 2 + (h + f) * 2 + (f + h))
    out["frozen base bf16"] = total * p_bytes / n_dev
    out["adapters + Adam + grads"] = lora * 16 / n_dev
    out["base grads bf16 (unused)"] = total * p_bytes / n_dev
  else:
    out["params + Adam (12 B/param)"] = total * (p_bytes + 2 * p_bytes) / n_dev
    out["grads f32"] = total * p_bytes / n_dev
  tok = row.batch * row.seq / (data * fsdp)  # tokens per device
  out["residuals: L x layer inputs bf16"] = layers * tok * h * 2
  out["one layer: weights bf16 fwd + bwd, grad"] = per_layer * 2 * 3 / tensor
  seqs = row.batch / (data * fsdp)
  attn = seqs * (cfg.num_heads / tensor) * row.seq * row.seq * (4 + 4 + 2)  # f32 scores, f32 softmax, bf16 probs
  mlp = tok * (cfg.intermediate_size / tensor) * 2 * 4  # gate, up, act, product (bf16)
  out["one layer: recomputed activations"] = attn + mlp
  if row.scan:  # (the layers are stored stacked [L, ...]: the scan reads them in place, no stacked copy)
    # fsdp_loss_fn: the embedding is looked up without a gather; the head is re-split by vocabulary over
    # tensor x fsdp (its shard and gradient in the parameter dtype) and the vocab-parallel kernel gathers
    # ~8192 hidden rows at a time (bf16) with their f32 dX partials
    from rljax.kernels._sharded import _GATHER_ROWS  # pylint: disable=import-outside-toplevel
    out["head vocab-split + grad"] = v * h * p_bytes * 2 / (tensor * fsdp)
    out["head kernel: gathered rows bf16 + dX f32"] = _GATHER_ROWS * h * (2 + 4)
  else:  # the embedding and head gathered whole in f32 at the top of the loss, with their gradients
    out["embed + head gathered f32, + grads"] = (v * h if cfg.tie_embeddings else embed_head) * 4 * 2 / tensor
  return out


# --------------------------------------------------------------------------- one row (child process)
def run_row(name: str, layers=None) -> dict:
  import jax  # pylint: disable=import-outside-toplevel
  row = ROWS[name]
  data, fsdp, _ = row.mesh
  if row.kind == "train" and row.batch % (data * fsdp):
    raise ValueError(f"row {name}: batch {row.batch} is not divisible by data x fsdp = {data * fsdp}; the batch "
                     "would not be split over the mesh (the figure would be of a replicated batch)")
  cfg = model_config(row, layers)
  t0 = time.time()
  compiled = (_compile_rollout if row.kind == "rollout" else _compile_train)(row, cfg)
  t1 = time.time()
  m = compiled.memory_analysis()
  arg, out, tmp = m.argument_size_in_bytes, m.output_size_in_bytes, m.temp_size_in_bytes
  alias = getattr(m, "alias_size_in_bytes", 0)
  est = estimate(row, cfg)
  return dict(row=name, devices=len(jax.devices()), mesh=row.mesh, layers=cfg.num_layers, compile_s=t1 - t0,
              args=arg / GiB, out=out / GiB, alias=alias / GiB, temp=tmp / GiB,
              total=(arg + out - alias + tmp) / GiB, estimate={k: b / GiB for k, b in est.items()})


def _mesh(row):
  from rljax.parallel import MeshConfig, make_mesh  # pylint: disable=import-outside-toplevel
  data, fsdp, tensor = row.mesh
  return make_mesh(MeshConfig(data=data, fsdp=fsdp, tensor=tensor))


def _compile_train(row, cfg):
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  import optax  # pylint: disable=import-outside-toplevel
  from flax import nnx  # pylint: disable=import-outside-toplevel
  from rljax.models import Transformer, lora_mask  # pylint: disable=import-outside-toplevel
  from rljax.parallel import (abstract_with_shardings, batch_shardings, check_mesh_divides,  # pylint: disable=import-outside-toplevel
                              fsdp_loss_fn, shard_train_step, train_state_shardings)
  from rljax.train import init_train_state, make_train_step, nll_loss  # pylint: disable=import-outside-toplevel
  from rljax.types import TrainBatch  # pylint: disable=import-outside-toplevel
  mesh = _mesh(row)
  check_mesh_divides(mesh.shape, cfg)
  optimizer = optax.adamw(1e-6, weight_decay=0.0)
  if cfg.lora is not None:
    params = nnx.state(nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0))), nnx.Param)
    optimizer = optax.masked(optimizer, lora_mask(params))
  graphdef = nnx.split(nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0))), nnx.Param, ...)[0]
  state = jax.eval_shape(lambda: init_train_state(Transformer(cfg, rngs=nnx.Rngs(0)), optimizer)[1])
  b, t = row.batch, row.seq
  batch = TrainBatch(tokens=jax.ShapeDtypeStruct((b, t), jnp.int32), loss_mask=jax.ShapeDtypeStruct((b, t), jnp.bool_),
                     advantages=jax.ShapeDtypeStruct((b, t), jnp.float32),
                     group_id=jax.ShapeDtypeStruct((b,), jnp.int32))
  shardings = train_state_shardings(state, mesh)
  b_sh = batch_shardings(batch, mesh)
  step = make_train_step(graphdef, fsdp_loss_fn(nll_loss(), mesh), optimizer, jit=False)
  fn = shard_train_step(step, shardings, mesh, batch_sharding=b_sh)
  return fn.lower(abstract_with_shardings(state, shardings), abstract_with_shardings(batch, b_sh)).compile()


def _compile_rollout(row, cfg):
  """One decode step of the sampler (``Transformer.decode_step`` + the LM head) over the full KV cache."""
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  from flax import nnx  # pylint: disable=import-outside-toplevel
  from jax.sharding import NamedSharding  # pylint: disable=import-outside-toplevel
  from rljax.models import Transformer  # pylint: disable=import-outside-toplevel
  from rljax.parallel import abstract_with_shardings, logical_to_spec, state_shardings  # pylint: disable=import-outside-toplevel
  from rljax.sampling._state import LAYER_CACHE_AXES  # pylint: disable=import-outside-toplevel
  mesh = _mesh(row)
  graphdef, params = nnx.split(nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0))))
  p_sh = state_shardings(params, mesh)
  b = ROLLOUT["prompts"] * ROLLOUT["samples"]
  s = ROLLOUT["prompt_len"] + ROLLOUT["new_tokens"]
  shape = (b, cfg.num_kv_heads, s, cfg.head_dim)
  c_sh = NamedSharding(mesh, logical_to_spec(LAYER_CACHE_AXES, mesh, shape))
  cache = tuple(jax.ShapeDtypeStruct(shape, jnp.bfloat16, sharding=c_sh) for _ in range(cfg.num_layers))
  row_sh = NamedSharding(mesh, logical_to_spec(("batch", None), mesh, (b, 1)))
  tok = jax.ShapeDtypeStruct((b, 1), jnp.int32, sharding=row_sh)
  mask = jax.ShapeDtypeStruct((b, s), jnp.bool_, sharding=NamedSharding(mesh, logical_to_spec(("batch", None), mesh, (b, s))))

  def step(params, tokens, ks, vs, kv_mask):
    model = nnx.merge(graphdef, params)
    hidden, ks, vs, _ = model.decode_step(tokens, tokens, ks, vs, jnp.int32(s - 1), kv_mask)
    ks = tuple(jax.lax.with_sharding_constraint(k, c_sh) for k in ks)
    vs = tuple(jax.lax.with_sharding_constraint(v, c_sh) for v in vs)
    return jnp.argmax(model.logits(hidden[:, 0]), axis=-1), ks, vs

  fn = jax.jit(step, donate_argnums=(2, 3))
  return fn.lower(abstract_with_shardings(params, p_sh), tok, cache, cache, mask).compile()


# --------------------------------------------------------------------------- the table (parent process)
def fits(total):
  return " ".join(k.split()[0] for k, gb in HBM_GB.items() if total * GiB <= 0.9 * gb * 1e9) or "none"


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--rows", default=",".join(ROWS), help=f"comma list from {list(ROWS)}")
  ap.add_argument("--layers", type=int, default=None, help="override the layer count (quick checks)")
  ap.add_argument("--row", help=argparse.SUPPRESS)
  ap.add_argument("--devices", type=int, default=64, help=argparse.SUPPRESS)
  ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per row")
  args = ap.parse_args(argv)
  if args.row:
    print("RESULT " + json.dumps(run_row(args.row, args.layers)), flush=True)
    return 0
  results = []
  for name in args.rows.split(","):
    row = ROWS[name]
    n = row.mesh[0] * row.mesh[1] * row.mesh[2]
    cmd = [sys.executable, os.path.abspath(__file__), "--row", name, "--devices", str(n)]
    if args.layers:
      cmd += ["--layers", str(args.layers)]
    t0 = time.time()
    try:
      proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, check=False)
      lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
      if proc.returncode or not lines:
        raise RuntimeError(f"exit {proc.returncode}: {(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")
      res = json.loads(lines[-1][len("RESULT "):])
    except (RuntimeError, subprocess.TimeoutExpired) as e:
      res = dict(row=name, error=str(e)[:300], wall_s=time.time() - t0)
    results.append(res)
    _print_row(res)
  print("\n| row | mesh (data, fsdp, tensor) | layers | compile s | args GiB | temp GiB | total GiB | estimate GiB | fits |")
  print("|---|---|---|---|---|---|---|---|---|")
  for r in results:
    if "error" in r:
      print(f"| {r['row']} | | | | | | failed: {r['error']} | | |")
      continue
    est = sum(r["estimate"].values())
    print(f"| {r['row']} | {tuple(r['mesh'])} | {r['layers']} | {r['compile_s']:.0f} | {r['args']:.2f} | "
          f"{r['temp']:.2f} | **{r['total']:.2f}** | {est:.2f} | {fits(r['total'])} |")
  return 0


def _print_row(r):
  if "error" in r:
    print(f"{r['row']}: FAILED ({r['error']})", flush=True)
    return
  terms = ", ".join(f"{k} {v:.2f}" for k, v in r["estimate"].items())
  print(f"{r['row']}: {r['devices']} devices, mesh {tuple(r['mesh'])}, {r['layers']} layers, compile "
        f"{r['compile_s']:.0f} s; per device args {r['args']:.2f} GiB, outputs {r['out']:.2f} (aliased "
        f"{r['alias']:.2f}), temp {r['temp']:.2f}, total {r['total']:.2f} GiB; estimate "
        f"{sum(r['estimate'].values()):.2f} GiB = {terms}", flush=True)


if __name__ == "__main__":
  sys.exit(main())
