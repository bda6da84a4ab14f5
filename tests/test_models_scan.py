"""Scanned layers (``ModelConfig.scan_layers``): the same model as the unrolled loop.

The scanned model stores its layers stacked (``layer_stacks``: one ``[n, ...]`` array per weight
and run of identical layers). Reference: the unrolled model (one Block per layer) with the same
parameters, converted with ``convert_layout`` (a same-seed init gives the same values too, tested).
Forward logits, cached prefill, MoE routing, gradients of the policy log-probs (compared layer by
layer after unstacking) and greedy sampling must agree to float32 rounding (rtol 1e-5), for dense,
MoE (mixed dense/MoE layers: several stacks) and LoRA models, with and without remat.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from rljax.models import (LoRAConfig, ModelConfig, Transformer, convert_layout, from_pretrained, layer_runs,
                          policy_outputs, save_pretrained)
from rljax.models._hf import _unstack_values
from rljax.models import param_count, presets
from rljax.sampling import SamplerConfig, generate

CASES = {
    "dense": ModelConfig.tiny(num_layers=3),
    "moe_mixed": ModelConfig.tiny_moe(num_layers=4, moe_layers=(1, 2)),
    "lora_remat_full": ModelConfig.tiny(num_layers=3, lora=LoRAConfig(rank=4), remat="full"),
    "dense_remat_dots": ModelConfig.tiny(num_layers=3, remat="dots"),
}


def _pair(cfg, seed=0):
  """``(unrolled, scanned)``: the scanned model is the unrolled one converted to stacked storage."""
  unrolled = Transformer(cfg, rngs=nnx.Rngs(seed))
  if cfg.lora is not None:  # B = 0 at init: give the adapters a value so that they matter
    for path, var in nnx.to_flat_state(nnx.state(unrolled, nnx.LoRAParam)):
      if path[-1] == "lora_b":
        var.set_value(0.05 * (1 + path[1]) * jnp.ones_like(var[...]))  # a different value per layer
  return unrolled, convert_layout(unrolled, True)


def _per_layer(model, state):
  """``{path: array}`` of ``state`` (shaped like ``model``'s) with stacked layers unstacked."""
  flat = {tuple(k): np.asarray(v[...]) for k, v in nnx.to_flat_state(state)}
  return _unstack_values(model.cfg, flat) if model.cfg.scan_layers else flat


def _tokens(b=3, t=9, seed=1):
  return jax.random.randint(jax.random.key(seed), (b, t), 0, 128)


def _jit_call(model, tokens, routing=None):
  graphdef, state = nnx.split(model)
  return jax.jit(lambda st, x, r: nnx.merge(graphdef, st)(x, routing=r, return_logits=True))(state, tokens, routing)


def test_layer_runs_group_identical_layers():
  assert layer_runs(ModelConfig.tiny(num_layers=3)) == [(0, 3)]
  assert layer_runs(CASES["moe_mixed"]) == [(0, 1), (1, 3), (3, 4)]
  gemma2 = ModelConfig.tiny(num_layers=3, sliding_window=4,
                            layer_types=("sliding_attention", "full_attention", "full_attention"))
  assert layer_runs(gemma2) == [(0, 1), (1, 3)]
  with pytest.raises(ValueError, match="layer_runs takes a ModelConfig, got list"):
    layer_runs([])


@pytest.mark.parametrize("name", ["moe_mixed", "lora_remat_full"])
def test_stacked_storage_layout_and_same_seed_init(name):
  """Scanned models store ``[n, ...]`` arrays per run (axis ``layers`` first); a same-seed init gives
  the per-layer init's values; ``convert_layout`` round-trips exactly; the parameter count is the same."""
  cfg = CASES[name]
  unrolled = Transformer(cfg, rngs=nnx.Rngs(3))
  scanned = Transformer(cfg.replace(scan_layers=True), rngs=nnx.Rngs(3))
  assert scanned.layers is None and unrolled.layer_stacks is None
  runs = layer_runs(cfg)
  assert len(scanned.layer_stacks) == len(runs)
  for stack, (a, b) in zip(scanned.layer_stacks, runs):
    for _, var in nnx.to_flat_state(nnx.state(stack)):
      assert var[...].shape[0] == b - a and var.get_metadata()["logical_axes"][0] == "layers"
  ref = {tuple(k): np.asarray(v[...]) for k, v in nnx.to_flat_state(nnx.state(unrolled))}
  got = _per_layer(scanned, nnx.state(scanned))
  assert got.keys() == ref.keys()
  for k in ref:
    np.testing.assert_array_equal(got[k], ref[k], err_msg=str(k))
  back = _per_layer(unrolled, nnx.state(convert_layout(scanned, False)))
  for k in ref:
    np.testing.assert_array_equal(back[k], ref[k], err_msg=str(k))
  assert param_count(scanned) == param_count(unrolled) == presets.num_params(cfg) + (
      0 if cfg.lora is None else param_count(nnx.state(unrolled, nnx.LoRAParam)))


@pytest.mark.parametrize("name", ["dense", pytest.param("moe_mixed", marks=pytest.mark.long), "lora_remat_full",
                                  pytest.param("dense_remat_dots", marks=pytest.mark.slow)])  # remat: lora_remat_full
def test_scanned_forward_and_gradient_equal_unrolled(name):
  cfg = CASES[name]
  unrolled, scanned = _pair(cfg)
  tokens = _tokens()
  a, b = _jit_call(unrolled, tokens), _jit_call(scanned, tokens)
  np.testing.assert_allclose(b.logits, a.logits, rtol=1e-5, atol=1e-5)
  if cfg.is_moe:
    np.testing.assert_array_equal(b.routing, a.routing)
    np.testing.assert_allclose(b.aux_loss, a.aux_loss, rtol=1e-5)
    # replaying a (different) routing gives the same outputs too
    replay = jnp.flip(a.routing, axis=-1)
    np.testing.assert_allclose(_jit_call(scanned, tokens, replay).logits, _jit_call(unrolled, tokens, replay).logits,
                               rtol=1e-5, atol=1e-5)

  def loss(m):
    po = policy_outputs(m, tokens)
    return jnp.sum(po.logp * jnp.linspace(0.5, 1.5, po.logp.size).reshape(po.logp.shape)) + (
        0.0 if po.aux_loss is None else 10.0 * po.aux_loss)

  def grad(model):
    graphdef, state = nnx.split(model)
    return jax.jit(jax.grad(lambda st: loss(nnx.merge(graphdef, st))))(state)

  fa, fb = _per_layer(unrolled, grad(unrolled)), _per_layer(scanned, grad(scanned))
  assert fa.keys() == fb.keys() and len(fa) > 10
  for path, x in fa.items():
    y = fb[path]
    assert np.abs(x).max() > 0, path  # every parameter (incl. the adapters) gets a gradient
    np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-5 * np.abs(x).max(), err_msg=str(path))


@pytest.mark.parametrize("name", ["dense", "moe_mixed"])
def test_scanned_cached_prefill_equals_unrolled(name):
  unrolled, scanned = _pair(CASES[name])
  tokens = _tokens(2, 6)
  cache = unrolled.init_cache(2, 10)
  kv_mask = jnp.arange(10)[None, :] < jnp.array([[6], [4]])
  a = unrolled(tokens, cache=cache, cache_index=0, kv_mask=kv_mask, return_logits=True)
  b = scanned(tokens, cache=cache, cache_index=0, kv_mask=kv_mask, return_logits=True)
  np.testing.assert_allclose(b.logits, a.logits, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(b.cache.k, a.cache.k, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(b.cache.v, a.cache.v, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["moe_mixed", "lora_remat_full"])
def test_scanned_greedy_sampling_equals_unrolled(name):
  unrolled, scanned = _pair(CASES[name])
  cfg = SamplerConfig(max_new_tokens=6, prompt_buckets=(8,), cache_size=16)
  prompts = [[1, 2, 3], [4, 5, 6, 7, 8]]
  a = generate(unrolled, prompts, config=cfg, key=jax.random.key(0), greedy=True)
  b = generate(scanned, prompts, config=cfg, key=jax.random.key(0), greedy=True)
  np.testing.assert_array_equal(b.tokens, a.tokens)
  np.testing.assert_allclose(b.logp_behavior, a.logp_behavior, rtol=1e-5, atol=1e-5)


def _tensors(path):
  from safetensors.numpy import load_file  # pylint: disable=import-outside-toplevel
  return load_file(str(path))


@pytest.mark.parametrize("cfg", [
    ModelConfig.tiny(num_layers=3, architecture="LlamaForCausalLM", lora=LoRAConfig(rank=4)),
    ModelConfig.tiny_moe(num_layers=4, moe_layers=(1, 2))],
    ids=["llama_lora", "qwen3moe_mixed"])
def test_hf_round_trip_with_scanned_layers(tmp_path, cfg):
  """Export from stacked storage writes the same tensors as from per-layer storage (LoRA merged; the
  PEFT adapter too); importing with scan_layers=True stacks them back."""
  unrolled, scanned = _pair(cfg)
  save_pretrained(unrolled, str(tmp_path / "u"))
  save_pretrained(scanned, str(tmp_path / "s"))
  ref, got = _tensors(tmp_path / "u" / "model.safetensors"), _tensors(tmp_path / "s" / "model.safetensors")
  assert ref.keys() == got.keys() and f"model.layers.{cfg.num_layers - 1}.input_layernorm.weight" in ref
  for k in ref:
    np.testing.assert_array_equal(got[k], ref[k], err_msg=k)
  if cfg.lora is not None:
    from rljax.models import save_lora_adapter  # pylint: disable=import-outside-toplevel
    save_lora_adapter(unrolled, str(tmp_path / "ua"))
    save_lora_adapter(scanned, str(tmp_path / "sa"))
    ra, ga = (_tensors(tmp_path / d / "adapter_model.safetensors") for d in ("ua", "sa"))
    assert ra.keys() == ga.keys() and len(ra) == 2 * 7 * cfg.num_layers
    for k in ra:
      np.testing.assert_array_equal(ga[k], ra[k], err_msg=k)
  back = from_pretrained(str(tmp_path / "s"), scan_layers=True)
  assert back.cfg.scan_layers and back.layers is None and len(back.layer_stacks) == len(layer_runs(cfg))
  plain = from_pretrained(str(tmp_path / "s"))
  want = _per_layer(plain, nnx.state(plain))
  have = _per_layer(back, nnx.state(back))
  assert want.keys() == have.keys()
  for k in want:
    np.testing.assert_array_equal(have[k], want[k], err_msg=str(k))
  if cfg.is_moe:  # (the parameters are equal; the forward of stacked MoE models is tested above)
    return
  tokens = _tokens()
  logits = back(tokens, return_logits=True).logits
  np.testing.assert_allclose(logits, plain(tokens, return_logits=True).logits, rtol=1e-5, atol=1e-5)
  if cfg.lora is None:  # (with LoRA the export holds the merged weights: same function, other rounding)
    np.testing.assert_array_equal(logits, scanned(tokens, return_logits=True).logits)


def test_scan_layers_and_remat_validation():
  with pytest.raises(ValueError, match=r"ModelConfig\.scan_layers=1 .*a bool"):
    ModelConfig.tiny(scan_layers=1)
  with pytest.raises(ValueError, match=r"ModelConfig\.remat='save_all' .*'none', 'full', 'dots', 'dots_no_batch'"):
    ModelConfig.tiny(remat="save_all")


@pytest.mark.parametrize("num_layers", [1, 3])
def test_checkpoint_of_one_layout_is_refused_by_the_other(tmp_path, num_layers):
  """A checkpoint saved with stacked layers does not load into per-layer storage (nor back): a
  CheckpointMismatch naming the layout, never a silent misload; restore-then-convert_layout works.
  With one layer the leaf count agrees and only the shapes ([1, ...] vs [...]) tell the layouts apart."""
  from rljax.train import Checkpointer  # pylint: disable=import-outside-toplevel
  from rljax.train._checkpoint import CheckpointMismatch  # pylint: disable=import-outside-toplevel
  unrolled, scanned = _pair(ModelConfig.tiny(num_layers=num_layers))
  ckpt = Checkpointer(str(tmp_path / "s"))
  ckpt.save(1, nnx.state(scanned))
  for template in (nnx.state(unrolled), nnx.state(Transformer(unrolled.cfg, rngs=nnx.Rngs(9)))):
    with pytest.raises(CheckpointMismatch, match=r"scan_layers .*convert_layout"):
      ckpt.restore(template)
  other = Checkpointer(str(tmp_path / "u"))
  other.save(1, nnx.state(unrolled))
  with pytest.raises(CheckpointMismatch, match=r"scan_layers .*convert_layout"):
    other.restore(nnx.state(scanned))
  fresh = Transformer(scanned.cfg, rngs=nnx.Rngs(9))  # other values, the saving run's layout
  restored, _, _ = ckpt.restore(nnx.state(fresh))
  nnx.update(fresh, restored)
  got, ref = _per_layer(unrolled, nnx.state(convert_layout(fresh, False))), _per_layer(unrolled, nnx.state(unrolled))
  assert got.keys() == ref.keys()
  for k in ref:
    np.testing.assert_array_equal(got[k], ref[k], err_msg=str(k))


def test_model_copies_and_rescaling_keep_the_stacked_layout():
  """``fan_in_init``, ``with_value_head`` and ``with_dtype`` on a stacked model give the per-layer
  model's results (compared after unstacking); the stacked ``[n, ...]`` axis is not a fan-in."""
  from rljax.models import fan_in_init, with_value_head  # pylint: disable=import-outside-toplevel
  from rljax.models._dtype import with_dtype  # pylint: disable=import-outside-toplevel
  unrolled, scanned = _pair(CASES["lora_remat_full"])
  for fn in (lambda m: fan_in_init(m) and m, with_value_head, lambda m: with_dtype(m, "bfloat16")):
    a, b = fn(unrolled), fn(scanned)
    ref, got = _per_layer(a, nnx.state(a)), _per_layer(b, nnx.state(b))
    assert b.layer_stacks is not None and ref.keys() == got.keys()
    for k in ref:
      np.testing.assert_array_equal(got[k], ref[k], err_msg=str(k))
  f = scanned.cfg.intermediate_size  # the down projection's fan-in F (not n * F): std 1/sqrt(F)
  np.testing.assert_allclose(np.std(np.asarray(scanned.layer_stacks[0].mlp.down.kernel[...])), f ** -0.5, rtol=0.05)
