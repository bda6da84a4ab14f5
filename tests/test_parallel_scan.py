"""Scanned layers with per-layer FSDP gathers on 8 fake CPU devices (mesh data 2, fsdp 2, tensor 2).

Reference: the single-device step of the unrolled model without remat (same parameters).
The sharded step runs the layers under ``lax.scan`` with full remat, and ``fsdp_loss_fn``
gathers each layer's weights inside the scan body. Its loss, gradients (Adam's first
moment) and updated parameters must equal the reference to float32 rounding (rtol 1e-5),
and its HLO must gather layer weights only inside the loop, one layer at a time.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import NamedSharding

from rljax.models import LoRAConfig, ModelConfig, Transformer
from rljax.models._hf import _unstack_values
from rljax.parallel import (MeshConfig, batch_shardings, collectives, compute_spec, fsdp_loss_fn, make_mesh,
                            shard_train_step, train_state_shardings)
from rljax.parallel._hlo import loop_computations, mesh_axes_of_groups
from rljax.train import init_train_state, make_train_step, nll_loss
from rljax.types import TrainBatch

LR = 1e-3
B, T, L = 8, 12, 3
CFG = ModelConfig.tiny(num_layers=L, intermediate_size=96, vocab_size=256)  # every weight has its own shard shape
TIED = CFG.replace(tie_embeddings=True, num_layers=1)  # the head is the embedding's transpose: neither may be gathered
LORA = CFG.replace(lora=LoRAConfig(rank=4, targets=("q", "o", "down")))  # adapters stored over fsdp, gathered per layer


def _problem(cfg):
  opt = optax.adam(LR)
  model = Transformer(cfg, rngs=nnx.Rngs(0))
  for path, var in nnx.to_flat_state(nnx.state(model, nnx.LoRAParam)):  # B = 0 at init: make the adapters matter
    if path[-1] == "lora_b":
      var.set_value(0.05 * jnp.ones_like(var[...]))
  graphdef, state = init_train_state(model, opt)
  rng = np.random.default_rng(0)
  tokens = rng.integers(0, cfg.vocab_size, (B, T), dtype=np.int32)
  lengths = np.array([1, 11, 3, 9, 2, 10, 5, 6])
  mask = np.arange(T)[None, :] >= (T - lengths)[:, None]
  batch = TrainBatch(tokens=jnp.asarray(tokens), loss_mask=jnp.asarray(mask),
                     advantages=jnp.zeros((B, T), jnp.float32), group_id=jnp.arange(B, dtype=jnp.int32))
  return graphdef, state, batch, opt


@functools.lru_cache(maxsize=None)
def _sharded(cfg=CFG):
  graphdef, state, batch, opt = _problem(cfg.replace(scan_layers=True, remat="full"))
  mesh = make_mesh(MeshConfig(data=2, fsdp=2, tensor=2))
  shardings = train_state_shardings(state, mesh)
  step = make_train_step(graphdef, fsdp_loss_fn(nll_loss(), mesh), opt, jit=False)
  fn = shard_train_step(step, shardings, mesh, donate=False)
  placed = jax.device_put(state, shardings)
  compiled = fn.lower(placed, jax.device_put(batch, batch_shardings(batch, mesh))).compile()
  out = compiled(placed, jax.device_put(batch, batch_shardings(batch, mesh)))
  return mesh, placed, compiled, jax.device_get(out)


def _flat(tree, cfg=None):
  """``{path: array}``; with the ``cfg`` of a scanned model, its stacked layers unstacked (per-layer paths)."""
  def key(path):
    return tuple(getattr(k, "key", getattr(k, "idx", getattr(k, "name", None))) for k in path)
  flat = {key(k): np.asarray(v) for k, v in jax.tree_util.tree_leaves_with_path(tree)}
  if cfg is not None and cfg.scan_layers:
    flat = {k[:-1]: v for k, v in _unstack_values(cfg, {k + ("value",): v for k, v in flat.items()}).items()}
  return flat


@pytest.mark.long
@pytest.mark.parametrize("cfg", [CFG, TIED, LORA], ids=["untied", "tied", "lora"])
def test_scanned_per_layer_gathered_step_equals_single_device_unrolled_step(cfg):
  graphdef, state, batch, opt = _problem(cfg)
  ref_state, ref_metrics = jax.device_get(make_train_step(graphdef, nll_loss(), opt, donate=False)(state, batch))
  _, _, _, (new_state, metrics) = _sharded(cfg)
  scfg = cfg.replace(scan_layers=True)  # the sharded step's model stores its layers stacked
  np.testing.assert_allclose(metrics["loss"], ref_metrics["loss"], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(metrics["train/grad_norm"], ref_metrics["train/grad_norm"], rtol=1e-5)
  mu, ref_mu = _flat(new_state.opt_state[0].mu, scfg), _flat(ref_state.opt_state[0].mu)  # 0.1 * gradient
  assert mu.keys() == ref_mu.keys() and len(mu) > 10
  for k in ref_mu:
    # LoRA (B = 0.05: gradients ~30x larger): 10 entries of 3 tensors (embed, o.lora_b, v.kernel) differ by up to
    # 5e-8, 1.5e-6 of their tensor's max, identically with the adapters replicated (the summation order of the
    # sharded step, not the adapters' layout); compared at 1e-5 of each tensor's max, as in test_models_scan
    atol = 1e-5 * np.abs(ref_mu[k]).max() if cfg.lora is not None else 1e-8
    np.testing.assert_allclose(mu[k], ref_mu[k], rtol=1e-5, atol=atol, err_msg=str(k))
  p, ref_p = _flat(new_state.params, scfg), _flat(ref_state.params)
  assert p.keys() == ref_p.keys()
  for k in ref_p:  # well-conditioned entries (|g| > 1e-5) tightly; see test_parallel_train for the bound
    ok = np.abs(ref_mu[k] / 0.1) > 1e-5
    np.testing.assert_allclose(p[k][ok], ref_p[k][ok], rtol=1e-5, atol=1e-6, err_msg=str(k))


def test_layer_weights_are_gathered_inside_the_loop_one_layer_at_a_time():
  mesh, placed, compiled, _ = _sharded()
  hlo = compiled.as_text()
  ops = collectives(hlo)
  in_loop = loop_computations(hlo)
  assert in_loop, "no while loop: the layers were not scanned"
  layer_vars = [v for path, v in nnx.to_flat_state(placed.params) if path[0] == "layer_stacks"]
  assert layer_vars and all(v[...].shape[0] == L and v[...].sharding.spec[:1] in ((), (None,)) for v in layer_vars)
  gathered = {}  # one layer's compute-shard shape of each fsdp-sharded stacked weight -> its [L, ...] form
  for var in layer_vars:
    x = var[...]  # stored stacked [L, ...], the layer axis unsharded
    if compute_spec(x.sharding.spec) != x.sharding.spec:
      stacked = NamedSharding(mesh, compute_spec(x.sharding.spec)).shard_shape(x.shape)
      gathered[stacked[1:]] = stacked
  assert len(gathered) >= 3
  others = {NamedSharding(mesh, compute_spec(v[...].sharding.spec)).shard_shape(v[...].shape)
            for path, v in nnx.to_flat_state(placed.params) if path[0] != "layer_stacks"}
  assert not others & set(gathered), "ambiguous shapes: a layer weight and a top-level one share a compute shape"
  # (the LM head kernel's shard_map gathers hidden rows, [48, 64] here, the down projection's compute shape)
  fsdp_gathers = [c for c in ops if c.op == "all-gather" and mesh_axes_of_groups(c.groups, mesh) == frozenset({"fsdp"})
                  and "/shard_map/" not in c.line]
  layer_gathers = [c for c in fsdp_gathers if any(s in gathered for s in c.shapes)]
  assert layer_gathers, "no per-layer weight gather found"
  for c in fsdp_gathers:
    for s in c.shapes:  # never a stacked (whole-model) layer weight
      assert s not in gathered.values() and not (len(s) and s[0] == L and s[1:] in gathered), c.line[:300]
  for c in layer_gathers:
    assert c.computation in in_loop, f"a layer weight is gathered outside the scanned loop: {c.line[:300]}"
    assert c.dtype == "f32"  # the tiny model computes in float32 (bfloat16 compute gathers bfloat16)
  # gradients are reduced per layer inside the (backward) loop too
  assert any(c.op in ("reduce-scatter", "all-reduce") and c.computation in in_loop
             and mesh_axes_of_groups(c.groups, mesh) is not None and "fsdp" in mesh_axes_of_groups(c.groups, mesh)
             for c in ops)


def test_embedding_table_is_never_gathered_nor_its_gradient_reduced_whole():
  mesh, placed, compiled, _ = _sharded()
  emb = placed.params["embed"][...]  # [V, H] stored (tensor, fsdp)
  whole = {emb.shape, NamedSharding(mesh, compute_spec(emb.sharding.spec)).shard_shape(emb.shape)}
  head = placed.params["lm_head"][...]
  assert not whole & {head.shape, NamedSharding(mesh, compute_spec(head.sharding.spec)).shard_shape(head.shape)}
  for c in collectives(compiled.as_text()):
    if c.op in ("all-gather", "all-reduce"):
      assert not set(c.shapes) & whole, f"the embedding (or its gradient) whole on a device: {c.line[:300]}"


def _head_shapes(mesh, w):
  """Shapes of the whole head ``[H, V]`` and of its fsdp-gathered compute shard ``[H, V / tensor]``,
  and their transposes (the tied embedding's ``[V, H]``, a transposed gradient)."""
  shapes = {w.shape, NamedSharding(mesh, compute_spec(w.sharding.spec)).shard_shape(w.shape)}
  return shapes | {s[::-1] for s in shapes}


@pytest.mark.parametrize("cfg", [CFG, TIED], ids=["untied", "tied"])
def test_lm_head_is_never_gathered_nor_its_gradient_reduced_whole(cfg):
  """The head is scored vocabulary-sharded (rljax.parallel._train._ShardedHead): its stored
  ``[H / fsdp, V / tensor]`` shard is re-split to ``[H, V / (tensor * fsdp)]`` by an all-to-all, so
  no collective yields the head or its fsdp-gathered ``[H, V / tensor]`` form, in any dtype."""
  mesh, placed, compiled, _ = _sharded(cfg)
  w = placed.params["embed" if cfg.tie_embeddings else "lm_head"][...]
  h, v = cfg.hidden_size, cfg.vocab_size
  whole = _head_shapes(mesh, w if not cfg.tie_embeddings else w.T)
  assert (h, v) in whole and (h, v // 2) in whole
  ops = collectives(compiled.as_text())
  for c in ops:
    assert not set(c.shapes) & whole, f"the LM head (or its gradient) whole on a device: {c.line[:300]}"
  # the re-split: each device sends fsdp pieces of [H / fsdp, V / (tensor * fsdp)] of its stored shard
  # (XLA writes them in a reshaped form); once forward, once back for the gradient
  piece = (h // 2) * (v // 2 // 2)
  resplits = [c for c in ops if c.op == "all-to-all" and mesh_axes_of_groups(c.groups, mesh) == frozenset({"fsdp"})
              and len(c.shapes) == 2 and all(int(np.prod(s)) == piece for s in c.shapes)]
  assert len(resplits) >= 2, "no all-to-all re-splitting the head (and its gradient) by vocabulary"


def test_loop_computations_on_handwritten_hlo():
  hlo = """HloModule m
%body.1 (p: f32[2]) -> f32[2] {
  %p = f32[2]{0} parameter(0)
  %f = f32[2]{0} fusion(%p), kind=kLoop, calls=%fused.3
  ROOT %g = f32[4]{0} all-gather(%f), replica_groups={{0,1}}, dimensions={0}
}
%fused.3 (x: f32[2]) -> f32[2] {
  ROOT %x = f32[2]{0} parameter(0)
}
%cond.2 (p: f32[2]) -> pred[] {
  ROOT %c = pred[] constant(true)
}
ENTRY %main.9 (a: f32[2]) -> f32[2] {
  %a = f32[2]{0} parameter(0)
  %w = f32[2]{0} while(%a), condition=%cond.2, body=%body.1
  ROOT %h = f32[4]{0} all-gather(%w), replica_groups={{0,1}}, dimensions={0}
}
"""
  assert loop_computations(hlo) == {"body.1", "cond.2", "fused.3"}
  ops = collectives(hlo)
  assert [(c.name, c.computation) for c in ops] == [("g", "body.1"), ("h", "main.9")]


def test_lora_adapters_are_stored_over_fsdp_and_gathered_per_layer():
  """The rules split the adapters' ``lora_in`` / ``lora_out`` dimensions over ``fsdp`` (the rank is
  replicated); in the scanned step they are gathered inside the loop, one layer at a time."""
  mesh, placed, compiled, _ = _sharded(LORA)
  adapters = {tuple(p): v[...] for p, v in nnx.to_flat_state(placed.params) if p[-1] in ("lora_a", "lora_b")}
  assert len(adapters) == 6
  for path, x in adapters.items():  # [L, in, r] (layers, lora_in, lora) / [L, r, out] (layers, lora, lora_out)
    want = (None, "fsdp", None) if path[-1] == "lora_a" else (None, None, "fsdp")
    assert tuple(x.sharding.spec) + (None,) * (3 - len(x.sharding.spec)) == want, (path, x.sharding.spec)
  hlo = compiled.as_text()
  in_loop = loop_computations(hlo)
  shards = {NamedSharding(mesh, compute_spec(x.sharding.spec)).shard_shape(x.shape)[1:] for x in adapters.values()}
  gathers = [c for c in collectives(hlo) if c.op == "all-gather" and set(c.shapes) & shards
             and mesh_axes_of_groups(c.groups, mesh) == frozenset({"fsdp"})]
  assert gathers and all(c.computation in in_loop for c in gathers), [c.line[:200] for c in gathers]
