"""Scanned layers (``ModelConfig.scan_layers``): the same model as the unrolled loop.

Reference: the unrolled model with the same parameters (same seed; the flag changes no
parameter). Forward logits, cached prefill, MoE routing, gradients of the policy log-probs
and greedy sampling must agree to float32 rounding (rtol 1e-5), for dense, MoE (mixed
dense/MoE layers: several scanned runs) and LoRA models, with and without remat.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from rljax.models import (LoRAConfig, ModelConfig, Transformer, from_pretrained, policy_outputs,
                          save_pretrained)
from rljax.models._transformer import layer_runs
from rljax.sampling import SamplerConfig, generate

CASES = {
    "dense": ModelConfig.tiny(num_layers=3),
    "moe_mixed": ModelConfig.tiny_moe(num_layers=4, moe_layers=(1, 2)),
    "lora_remat_full": ModelConfig.tiny(num_layers=3, lora=LoRAConfig(rank=4), remat="full"),
    "dense_remat_dots": ModelConfig.tiny(num_layers=3, remat="dots"),
}


def _pair(cfg, seed=0):
  unrolled = Transformer(cfg, rngs=nnx.Rngs(seed))
  scanned = Transformer(cfg.replace(scan_layers=True), rngs=nnx.Rngs(seed))
  if cfg.lora is not None:  # B = 0 at init: give the adapters a value so that they matter
    for m in (unrolled, scanned):
      for path, var in nnx.to_flat_state(nnx.state(m, nnx.LoRAParam)):
        if path[-1] == "lora_b":
          var.set_value(0.05 * jnp.ones_like(var[...]))
  return unrolled, scanned


def _tokens(b=3, t=9, seed=1):
  return jax.random.randint(jax.random.key(seed), (b, t), 0, 128)


def _jit_call(model, tokens, routing=None):
  graphdef, state = nnx.split(model)
  return jax.jit(lambda st, x, r: nnx.merge(graphdef, st)(x, routing=r, return_logits=True))(state, tokens, routing)


def test_layer_runs_group_identical_layers():
  assert layer_runs(Transformer(ModelConfig.tiny(num_layers=3), rngs=nnx.Rngs(0)).layers) == [(0, 3)]
  moe = Transformer(CASES["moe_mixed"], rngs=nnx.Rngs(0))
  assert layer_runs(moe.layers) == [(0, 1), (1, 3), (3, 4)]
  gemma2 = ModelConfig.tiny(num_layers=3, sliding_window=4,
                            layer_types=("sliding_attention", "full_attention", "full_attention"))
  assert layer_runs(Transformer(gemma2, rngs=nnx.Rngs(0)).layers) == [(0, 1), (1, 3)]


@pytest.mark.parametrize("name", ["dense", "moe_mixed", "lora_remat_full",
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

  fa, fb = nnx.to_flat_state(grad(unrolled)), nnx.to_flat_state(grad(scanned))
  assert [p for p, _ in fa] == [p for p, _ in fb] and len(fa) > 10
  for (path, x), (_, y) in zip(fa, fb):
    x, y = np.asarray(x[...]), np.asarray(y[...])
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


def test_hf_round_trip_with_scanned_layers(tmp_path):
  _, scanned = _pair(ModelConfig.tiny(num_layers=3, architecture="LlamaForCausalLM"))
  save_pretrained(scanned, str(tmp_path))
  back = from_pretrained(str(tmp_path), scan_layers=True)
  assert back.cfg.scan_layers
  tokens = _tokens()
  np.testing.assert_array_equal(back(tokens, return_logits=True).logits, scanned(tokens, return_logits=True).logits)


def test_scan_layers_and_remat_validation():
  with pytest.raises(ValueError, match=r"ModelConfig\.scan_layers=1 .*a bool"):
    ModelConfig.tiny(scan_layers=1)
  with pytest.raises(ValueError, match=r"ModelConfig\.remat='save_all' .*'none', 'full', 'dots', 'dots_no_batch'"):
    ModelConfig.tiny(remat="save_all")
