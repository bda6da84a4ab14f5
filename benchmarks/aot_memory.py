"""Ahead-of-time per-device memory of the sharded train step (no allocation).

Compiles ``rljax.train.make_train_step`` for a Qwen2.5-7B-size model on a fake
64-device CPU mesh from abstract ``jax.ShapeDtypeStruct`` inputs carrying their
shardings (``nnx.eval_shape`` / ``jax.eval_shape``: no parameter is ever
materialised), then prints ``compiled.memory_analysis()`` per device for
several mesh layouts and a table of which layout fits TPU v5e (16 GB HBM),
v6e (32 GB) and v5p (95 GB).

Numerics: float32 parameters and Adam moments (mixed precision: f32 master
weights), bfloat16 compute, ``remat="full"`` per layer. The loss is the
token-mean NLL (``rljax.train.nll_loss``) through the fused log-prob kernel.

Caveat: this is XLA:CPU's buffer assignment (the CPU compiler's fusion and
scheduling), a proxy for the TPU compiler's; treat the numbers as estimates
to compare layouts, not as an HBM guarantee. The "fits" column keeps 10 %
headroom for the runtime and fragmentation.

Usage::

    python benchmarks/aot_memory.py [--layers 28] [--batch 64] [--seq 2048]
        [--layouts fsdp64,fsdp16xtensor4] [--param-dtype float32]
"""
import os
import sys

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=64").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402
from flax import nnx  # noqa: E402

from rljax.models import Transformer, presets  # noqa: E402
from rljax.parallel import (MeshConfig, abstract_with_shardings, batch_shardings, fsdp_loss_fn,  # noqa: E402
                            make_mesh, shard_train_step, train_state_shardings)
from rljax.train import init_train_state, make_train_step, nll_loss  # noqa: E402
from rljax.types import TrainBatch  # noqa: E402

HBM_GB = {"TPU v5e (16 GB)": 16, "TPU v6e (32 GB)": 32, "TPU v5p (95 GB)": 95}
LAYOUTS = {
    "fsdp64": MeshConfig(data=1, fsdp=64, tensor=1),
    "fsdp16xtensor4": MeshConfig(data=1, fsdp=16, tensor=4),
    "fsdp32xtensor2": MeshConfig(data=1, fsdp=32, tensor=2),
    "data4xfsdp16": MeshConfig(data=4, fsdp=16, tensor=1),
}


def abstract_state(cfg, optimizer):
  """(graphdef, TrainState of ShapeDtypeStruct) without allocating anything."""
  abstract_model = nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0)))
  graphdef = nnx.split(abstract_model, nnx.Param, ...)[0]
  state = jax.eval_shape(lambda: init_train_state(Transformer(cfg, rngs=nnx.Rngs(0)), optimizer)[1])
  return graphdef, state


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--layers", default="28",
                  help="number of layers (Qwen2.5-7B: 28); two values 'a,b' compile both and also print a "
                       "linear extrapolation to --target-layers (labelled as such), for slow machines")
  ap.add_argument("--target-layers", type=int, default=28)
  ap.add_argument("--batch", type=int, default=64, help="global batch (sequences)")
  ap.add_argument("--seq", type=int, default=2048, help="sequence length")
  ap.add_argument("--layouts", default="fsdp64,fsdp16xtensor4", help=f"comma list from {sorted(LAYOUTS)}")
  ap.add_argument("--param-dtype", default="float32", choices=("float32", "bfloat16"))
  ap.add_argument("--remat", default="full", choices=("none", "full", "dots", "dots_no_batch"))
  args = ap.parse_args(argv)
  assert len(jax.devices()) == 64, jax.devices()
  layer_counts = [int(x) for x in str(args.layers).split(",")]
  results = {n: run(n, args) for n in layer_counts}
  for n, rows in results.items():
    table(rows, f"measured, {n} layers")
  if len(layer_counts) == 2 and args.target_layers not in layer_counts:
    (a, ra), (b, rb) = sorted(results.items())
    extra = []
    for x, y in zip(ra, rb):
      vals = [x[i] + (y[i] - x[i]) * (args.target_layers - a) / (b - a) for i in range(2, 7)]
      extra.append((x[0], x[1], *vals))
    table(extra, f"LINEAR EXTRAPOLATION from {a} and {b} layers to {args.target_layers} layers (not compiled)")
  return 0


def table(rows, title):
  print(f"\n{title}:\n")
  print("| layout | mesh (data, fsdp, tensor) | args GiB | outputs GiB | aliased GiB | temp GiB | total GiB | "
        + " | ".join(HBM_GB) + " |")
  print("|---|---|---|---|---|---|---|" + "---|" * len(HBM_GB))
  for name, shape, arg, out, alias, tmp, total in rows:
    fits = ["yes" if total * 2 ** 30 <= 0.9 * hbm * 1e9 else "no" for hbm in HBM_GB.values()]
    print(f"| {name} | ({shape['data']}, {shape['fsdp']}, {shape['tensor']}) | {arg:.2f} | {out:.2f} | {alias:.2f} | "
          f"{tmp:.2f} | {total:.2f} | " + " | ".join(fits) + " |", flush=True)


def run(num_layers, args):
  cfg = presets.qwen2_5_7b(num_layers=num_layers, param_dtype=args.param_dtype, compute_dtype="bfloat16",
                           remat=args.remat)
  optimizer = optax.adamw(1e-6, weight_decay=0.0)
  graphdef, state = abstract_state(cfg, optimizer)
  n_params = sum(x.size for x in jax.tree.leaves(state.params))
  b, t = args.batch, args.seq
  batch = TrainBatch(tokens=jax.ShapeDtypeStruct((b, t), jnp.int32), loss_mask=jax.ShapeDtypeStruct((b, t), jnp.bool_),
                     advantages=jax.ShapeDtypeStruct((b, t), jnp.float32),
                     group_id=jax.ShapeDtypeStruct((b,), jnp.int32))
  print(f"# Qwen2.5-7B-size: {n_params / 1e9:.2f} B params, {cfg.num_layers} layers, params {args.param_dtype}, "
        f"Adam moments {args.param_dtype}, compute bfloat16, remat={args.remat}, "
        f"global batch {b} x {t} tokens, 64 fake CPU devices", flush=True)
  rows = []
  for name in args.layouts.split(","):
    mesh = make_mesh(LAYOUTS[name])
    shardings = train_state_shardings(state, mesh)
    a_state = abstract_with_shardings(state, shardings)
    b_sh = batch_shardings(batch, mesh)
    a_batch = abstract_with_shardings(batch, b_sh)
    step = make_train_step(graphdef, fsdp_loss_fn(nll_loss(), mesh), optimizer, jit=False)
    fn = shard_train_step(step, shardings, mesh, batch_sharding=b_sh)
    t0 = time.time()
    lowered = fn.lower(a_state, a_batch)
    t1 = time.time()
    compiled = lowered.compile()
    t2 = time.time()
    m = compiled.memory_analysis()
    gb = lambda x: x / 2 ** 30
    arg, out, tmp = m.argument_size_in_bytes, m.output_size_in_bytes, m.temp_size_in_bytes
    alias = getattr(m, "alias_size_in_bytes", 0)
    total = arg + out - alias + tmp
    rows.append((name, dict(mesh.shape), gb(arg), gb(out), gb(alias), gb(tmp), gb(total)))
    print(f"{name}: mesh {dict(mesh.shape)} lower {t1 - t0:.0f} s, compile {t2 - t1:.0f} s; per device "
          f"arguments {gb(arg):.2f} GiB, outputs {gb(out):.2f} GiB (aliased {gb(alias):.2f} GiB donated), "
          f"temp {gb(tmp):.2f} GiB, total {gb(total):.2f} GiB", flush=True)

  return rows


if __name__ == "__main__":
  sys.exit(main())
