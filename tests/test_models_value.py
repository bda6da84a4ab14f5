"""Value head of rljax.models (PPO with a learned critic): alignment of ``PolicyOutputs.values``,
grouped shared-prefix and packed paths, ``with_value_head``, gradients, sampling, HF export, checkpoints."""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from rljax.models import (LoRAConfig, ModelConfig, Transformer, fan_in_init, from_pretrained, logical_axes,
                          merge_lora, policy_outputs, save_pretrained, with_value_head)


from test_models import _bump, _tokens  # noqa: E402  (random non-trivial weights, the value head included)


def _critic(cfg=None, seed=1):
  cfg = (cfg or ModelConfig.tiny()).replace(value_head=True)
  return _bump(Transformer(cfg, rngs=nnx.Rngs(0)), seed=seed)


def _hand_values(model, hidden, valid=None):
  """``values[b, t] = hidden[b, t-1] . w + b`` (float64), column 0 and ``~valid`` zero."""
  h = np.asarray(hidden, np.float64)
  w = np.asarray(model.value_head.kernel[...], np.float64)[:, 0]
  bias = float(np.asarray(model.value_head.bias[...])[0])
  out = np.zeros(h.shape[:2])
  out[:, 1:] = h[:, :-1] @ w + bias
  if valid is not None:
    out = np.where(valid, out, 0.0)
  return out


def test_config_field_validated():
  with pytest.raises(ValueError, match="value_head"):
    ModelConfig.tiny(value_head=1)
  assert ModelConfig.tiny().value_head is False


@pytest.mark.parametrize("cfg", [ModelConfig.tiny(), ModelConfig.tiny_moe()], ids=["dense", "moe"])
def test_values_are_head_of_previous_hidden(cfg):
  model = _critic(cfg)
  tok = _tokens(2, 7, seed=3)
  po = policy_outputs(model, tok)
  assert po.values.shape == (2, 7) and po.values.dtype == jnp.float32
  ref = _hand_values(model, model(tok).hidden)
  assert np.abs(ref[:, 1:]).min() > 1e-3  # a non-trivial head: a shifted alignment would fail
  np.testing.assert_allclose(po.values, ref, rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(np.asarray(po.values)[:, 0], 0.0)
  hot = policy_outputs(model, tok, temperature=0.37)
  np.testing.assert_array_equal(hot.values, po.values)  # temperature scales logits only
  assert not np.allclose(hot.logp, po.logp)
  if cfg.is_moe:  # replaying the routing gives the same values
    np.testing.assert_allclose(policy_outputs(model, tok, routing=po.routing).values, po.values, rtol=1e-6)


def test_values_under_jit_equal_eager():
  model = _critic()
  tok = _tokens(2, 6, seed=4)
  graphdef, state = nnx.split(model)
  jitted = jax.jit(lambda s, t: policy_outputs(nnx.merge(graphdef, s), t).values)(state, tok)
  np.testing.assert_allclose(jitted, policy_outputs(model, tok).values, rtol=1e-5, atol=1e-6)


def test_segment_ids_zero_segment_starts_and_padding():
  model = _critic()
  tok = _tokens(2, 8, seed=5)
  seg = jnp.asarray([[1, 1, 1, 2, 2, 2, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1]], jnp.int32)
  po = policy_outputs(model, tok, segment_ids=seg)
  s = np.asarray(seg)
  valid = np.zeros(s.shape, bool)
  valid[:, 1:] = (s[:, 1:] == s[:, :-1]) & (s[:, 1:] != 0)
  ref = _hand_values(model, model(tok, segment_ids=seg).hidden, valid)
  np.testing.assert_allclose(po.values, ref, rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(np.asarray(po.values)[0, [0, 3, 6, 7]], 0.0)
  assert np.all(np.abs(np.asarray(po.values)[valid]) > 1e-4)
  sep = policy_outputs(model, tok[:1, 3:6])  # segment 2 alone: same values
  np.testing.assert_allclose(po.values[0, 4:6], sep.values[0, 1:3], rtol=1e-5, atol=1e-5)


@pytest.mark.long
def test_grouped_shared_prefix_equals_ungrouped_values_and_value_loss_grad():
  model = _critic()
  p, g, tp, tc = 2, 3, 4, 5
  prompts = np.asarray(_tokens(p, tp, seed=6))
  tok = jnp.asarray(np.concatenate([np.repeat(prompts, g, axis=0), np.asarray(_tokens(p * g, tc, seed=7))], axis=1))
  ret = jnp.asarray(np.random.RandomState(8).standard_normal(tok.shape), jnp.float32)
  mask = jnp.zeros(tok.shape, jnp.float32).at[:, tp:].set(1.0).at[:, 2].set(1.0)  # a prompt column too
  graphdef, state = nnx.split(model)

  def value_loss(s, **kw):
    v = policy_outputs(nnx.merge(graphdef, s), tok, **kw).values
    return jnp.sum(0.5 * (v - ret) ** 2 * mask), v

  def close(a, b):  # rtol 1e-5 relative to the array's scale (only the summation order differs)
    a, b = np.asarray(a), np.asarray(b)
    return np.abs(a - b).max() <= 1e-5 * np.abs(a).max()

  grouped = jax.jit(jax.value_and_grad(lambda s: value_loss(s, shared_prefix_len=tp, group_size=g), has_aux=True))
  (l0, v0), g0 = jax.jit(jax.value_and_grad(value_loss, has_aux=True))(state)
  (l1, v1), g1 = grouped(state)
  assert close(v0, v1) and close(l0, l1)
  np.testing.assert_array_equal(np.asarray(v1)[:, 0], 0.0)
  flat0, flat1 = dict(nnx.to_flat_state(g0)), dict(nnx.to_flat_state(g1))
  for k in flat0:
    assert close(flat0[k][...], flat1[k][...]), k
  assert not close(v0, value_loss(state, shared_prefix_len=tp + 1, group_size=g)[1])  # a broken promise differs
  assert np.abs(np.asarray(flat0[("layers", 0, "attn", "q", "kernel")][...])).max() > 0  # the trunk is trained


def test_model_without_head_returns_none():
  model = _bump(Transformer(ModelConfig.tiny(), rngs=nnx.Rngs(0)))
  tok = _tokens(2, 6)
  assert model.value_head is None
  assert policy_outputs(model, tok).values is None
  assert policy_outputs(model, tok, shared_prefix_len=2, group_size=2).values is None
  with pytest.raises(ValueError, match="no value head"):
    model.value(model(tok).hidden)


def test_with_value_head_copies_trunk_and_zero_head():
  policy = _bump(Transformer(ModelConfig.tiny(), rngs=nnx.Rngs(0)))
  critic = with_value_head(policy)
  assert critic.cfg == policy.cfg.replace(value_head=True) and policy.cfg.value_head is False
  np.testing.assert_array_equal(critic.value_head.kernel[...], 0.0)
  np.testing.assert_array_equal(critic.value_head.bias[...], 0.0)
  tok = _tokens(2, 7, seed=9)
  pa, pc = policy_outputs(policy, tok), policy_outputs(critic, tok)
  np.testing.assert_array_equal(pc.logp, pa.logp)
  np.testing.assert_array_equal(pc.values, 0.0)
  critic.embed.set_value(critic.embed[...] + 1.0)  # new buffers: the policy does not move
  np.testing.assert_array_equal(policy_outputs(policy, tok).logp, pa.logp)
  again = with_value_head(_critic())  # an existing head is replaced by a fresh one
  np.testing.assert_array_equal(again.value_head.kernel[...], 0.0)


@pytest.mark.parametrize("merged", [False, True])
def test_with_value_head_keeps_lora_and_merge_state(merged):
  policy = _bump(Transformer(ModelConfig.tiny(lora=LoRAConfig(rank=4, targets=("q", "v"))), rngs=nnx.Rngs(0)))
  b = policy.layers[0].attn.q.lora_b
  b.set_value(b[...] + 0.5)  # a non-zero adapter
  if merged:
    merge_lora(policy)
  critic = with_value_head(policy)
  assert critic.layers[0].attn.q.lora_merged is merged
  tok = _tokens(2, 6, seed=10)
  np.testing.assert_allclose(policy_outputs(critic, tok).logp, policy_outputs(policy, tok).logp, rtol=1e-6, atol=1e-6)


def test_value_head_gets_gradient_and_zero_head_leaves_trunk_still():
  critic = with_value_head(_bump(Transformer(ModelConfig.tiny(), rngs=nnx.Rngs(0))))
  tok = _tokens(2, 6, seed=11)
  mask = jnp.asarray(np.random.RandomState(12).randint(0, 2, tok.shape), jnp.float32)
  graphdef, state = nnx.split(critic)
  grads = jax.grad(lambda s: jnp.sum(policy_outputs(nnx.merge(graphdef, s), tok).values * mask))(state)
  h = np.asarray(critic(tok).hidden, np.float64)[:, :-1]
  m = np.asarray(mask)[:, 1:]
  np.testing.assert_allclose(grads.value_head.kernel[...][:, 0], np.einsum("bth,bt->h", h, m), rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(grads.value_head.bias[...], [m.sum()], rtol=1e-6)
  np.testing.assert_array_equal(grads.layers[0].attn.q.kernel[...], 0.0)  # dV/dh = w = 0 at the start


def test_sampling_runs_on_value_head_model():
  from rljax.sampling import SamplerConfig, generate
  policy = Transformer(ModelConfig.tiny(), rngs=nnx.Rngs(0))
  critic = with_value_head(policy)
  cfg = SamplerConfig(max_new_tokens=4, prompt_buckets=(8,), cache_size=16)
  prompts = [[1, 2, 3], [4, 5]]
  rc = generate(critic, prompts, config=cfg, key=jax.random.key(0), greedy=True)
  rp = generate(policy, prompts, config=cfg, key=jax.random.key(0), greedy=True)
  np.testing.assert_array_equal(rc.tokens, rp.tokens)
  np.testing.assert_allclose(rc.logp_behavior, rp.logp_behavior, rtol=1e-6, atol=1e-6)


def test_hf_export_skips_head_and_import_adds_zero_head(tmp_path):
  critic = _critic(ModelConfig.tiny(qkv_bias=True))  # Qwen2: q/k/v biases
  tok = _tokens(2, 6, seed=13)
  want = policy_outputs(critic, tok)
  save_pretrained(critic, str(tmp_path))
  from safetensors.numpy import load_file
  names = load_file(os.path.join(tmp_path, "model.safetensors"))
  assert not [n for n in names if "value" in n or "score" in n]
  with open(os.path.join(tmp_path, "config.json")) as f:
    assert "value_head" not in json.load(f)
  plain = from_pretrained(str(tmp_path))
  assert plain.cfg.value_head is False and plain.value_head is None
  np.testing.assert_allclose(policy_outputs(plain, tok).logp, want.logp, rtol=1e-6, atol=1e-6)
  fresh = from_pretrained(str(tmp_path), value_head=True)
  np.testing.assert_array_equal(fresh.value_head.kernel[...], 0.0)
  np.testing.assert_allclose(policy_outputs(fresh, tok).logp, want.logp, rtol=1e-6, atol=1e-6)


def test_axes_param_count_fan_in_init_and_sharding():
  from rljax.models import param_count, presets, shard_state
  cfg = ModelConfig.tiny(value_head=True)
  critic = Transformer(cfg, rngs=nnx.Rngs(0))
  axes = logical_axes(critic)
  assert axes[("value_head", "kernel")] == ("embed", None) and axes[("value_head", "bias")] == (None,)
  assert param_count(critic) == presets.num_params(cfg) == presets.num_params(cfg.replace(value_head=False)) + 65
  plain = Transformer(cfg.replace(value_head=False), rngs=nnx.Rngs(0))  # the head does not change trunk init
  np.testing.assert_array_equal(critic.layers[1].mlp.down.kernel[...], plain.layers[1].mlp.down.kernel[...])
  fan_in_init(critic)
  np.testing.assert_array_equal(critic.value_head.kernel[...], 0.0)
  if len(jax.devices()) >= 4:
    mesh = jax.make_mesh((2, 2), ("fsdp", "tensor"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    critic = _critic()
    tok = _tokens(2, 5)
    ref = policy_outputs(critic, tok).values
    shard_state(critic, mesh)
    assert tuple(critic.value_head.kernel[...].sharding.spec) == ("fsdp", None)
    np.testing.assert_allclose(policy_outputs(critic, tok).values, ref, rtol=1e-5, atol=1e-5)


def test_orbax_checkpoint_roundtrip(tmp_path):
  from rljax.train import Checkpointer
  critic = _critic()
  state = nnx.state(critic)
  ckpt = Checkpointer(str(tmp_path / "ckpt"))
  ckpt.save(0, state)
  template = nnx.state(Transformer(critic.cfg, rngs=nnx.Rngs(5)))
  restored, _, _ = ckpt.restore(template)
  fresh = Transformer(critic.cfg, rngs=nnx.Rngs(5))
  nnx.update(fresh, restored)
  np.testing.assert_array_equal(fresh.value_head.kernel[...], critic.value_head.kernel[...])
  tok = _tokens(2, 5, seed=14)
  np.testing.assert_allclose(policy_outputs(fresh, tok).values, policy_outputs(critic, tok).values, rtol=1e-6)
