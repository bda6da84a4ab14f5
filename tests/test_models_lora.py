"""LoRA: identity at init, only adapters train (optax masking), merge/unmerge, adapter export."""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from safetensors.numpy import load_file

from rljax.models import (LORA_FILTER, LoRAConfig, ModelConfig, Transformer, lora_mask, merge_lora, policy_outputs,
                          save_lora_adapter, unmerge_lora)

_LORA = LoRAConfig(rank=4, alpha=8.0, targets=("q", "v", "o", "down"))


def _tokens(b, t, seed=0):
  return jnp.asarray(np.random.RandomState(seed).randint(0, 128, (b, t)), jnp.int32)


def _pair():
  base = Transformer(ModelConfig.tiny(), rngs=nnx.Rngs(0))
  lora = Transformer(ModelConfig.tiny(lora=_LORA), rngs=nnx.Rngs(1))
  nnx.update(lora, nnx.state(base, nnx.Param))  # same base weights (LoRAParam is not in base)
  return base, lora


def test_lora_config_scale_and_validation():
  assert LoRAConfig(rank=4, alpha=8.0).scale == 2.0
  assert LoRAConfig(rank=4, alpha=8.0, rslora=True).scale == 4.0
  with pytest.raises(ValueError, match="targets"):
    LoRAConfig(targets=("qq",))
  with pytest.raises(ValueError, match="rank"):
    LoRAConfig(rank=0)


def test_lora_at_init_equals_base():
  base, lora = _pair()
  tok = _tokens(2, 6)
  np.testing.assert_array_equal(base(tok, return_logits=True).logits, lora(tok, return_logits=True).logits)
  assert lora.layers[0].attn.q.lora_a.shape == (64, 4)
  assert lora.layers[0].attn.o.lora_b.shape == (4, 64)
  assert lora.layers[0].attn.k.lora_scale is None  # not a target


def test_only_adapters_train_with_optax_mask():
  _, lora = _pair()
  tok = _tokens(2, 6, seed=1)
  graphdef, params, rest = nnx.split(lora, nnx.Param, ...)
  mask = lora_mask(params)
  tx = optax.chain(optax.masked(optax.adam(1e-2), mask),
                   optax.masked(optax.set_to_zero(), jax.tree_util.tree_map(lambda m: not m, mask)))
  opt = tx.init(params)

  def loss(p):
    return -jnp.sum(policy_outputs(nnx.merge(graphdef, p, rest), tok).logp)

  @jax.jit
  def step(p, o):
    g = jax.grad(loss)(p)
    u, o = tx.update(g, o, p)
    return optax.apply_updates(p, u), o, g

  new, _, grads = step(params, opt)
  flat_old = dict(nnx.to_flat_state(params))
  flat_grad = dict(nnx.to_flat_state(grads))
  changed_lora = 0
  for path, var in nnx.to_flat_state(new):
    is_lora = isinstance(flat_old[path], nnx.LoRAParam)
    same = np.array_equal(np.asarray(var[...]), np.asarray(flat_old[path][...]))
    if is_lora:
      changed_lora += not same
    else:
      assert same, path  # base weights untouched
  assert changed_lora > 0
  # lora_b gets a gradient at init (A != 0); lora_a does not (B == 0).
  assert float(jnp.max(jnp.abs(flat_grad[("layers", 0, "attn", "q", "lora_b")][...]))) > 0
  # The nnx filter selects exactly the adapter parameters.
  n_filter = len(jax.tree_util.tree_leaves(nnx.state(lora, LORA_FILTER)))
  assert n_filter == sum(jax.tree_util.tree_leaves(mask)) == 2 * 4 * 2


def _trained():
  _, lora = _pair()
  rng = np.random.RandomState(3)
  for _, var in nnx.to_flat_state(nnx.state(lora, nnx.LoRAParam)):
    var.set_value(jnp.asarray(0.1 * rng.standard_normal(var.shape), jnp.float32))
  return lora


def test_merge_unmerge_roundtrip():
  lora = _trained()
  tok = _tokens(2, 6, seed=2)
  ref = lora(tok, return_logits=True).logits
  w0 = np.asarray(lora.layers[1].attn.q.kernel[...])
  merge_lora(lora)
  np.testing.assert_allclose(lora(tok, return_logits=True).logits, ref, rtol=1e-5, atol=1e-5)
  a = np.asarray(lora.layers[1].attn.q.lora_a[...], np.float64)
  b = np.asarray(lora.layers[1].attn.q.lora_b[...], np.float64)
  np.testing.assert_allclose(lora.layers[1].attn.q.kernel[...], w0 + 2.0 * (a @ b).reshape(w0.shape),
                             rtol=1e-5, atol=1e-6)
  unmerge_lora(lora)
  np.testing.assert_allclose(lora.layers[1].attn.q.kernel[...], w0, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(lora(tok, return_logits=True).logits, ref, rtol=1e-5, atol=1e-5)


def test_export_adapter_alone(tmp_path):
  lora = _trained()
  save_lora_adapter(lora, str(tmp_path))
  cfg = json.load(open(os.path.join(tmp_path, "adapter_config.json")))
  assert cfg["r"] == 4 and cfg["lora_alpha"] == 8.0 and set(cfg["target_modules"]) == {"q_proj", "v_proj",
                                                                                          "o_proj", "down_proj"}
  t = load_file(os.path.join(tmp_path, "adapter_model.safetensors"))
  assert len(t) == 2 * 4 * 2
  a = t["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"]
  b = t["base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"]
  assert a.shape == (4, 64) and b.shape == (64, 4)
  # PEFT convention: delta W_hf [out, in] = s * B @ A equals our delta transposed.
  ours = np.asarray(lora.layers[0].attn.q.lora_delta()).reshape(64, 64).T
  np.testing.assert_allclose(2.0 * b @ a, ours, rtol=1e-5, atol=1e-6)
