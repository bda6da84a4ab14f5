"""Core forward of rljax.models: config validation, KV cache, packing, policy_outputs, remat, dtypes."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from rljax.models import (KVCache, ModelConfig, RopeScaling, Transformer, logical_axes, policy_outputs,
                          rope_inv_freq, segment_positions)


def _tokens(b, t, v=128, seed=0):
  return jnp.asarray(np.random.RandomState(seed).randint(0, v, (b, t)), jnp.int32)


def _bump(model, std=0.3, seed=1):
  """Random, non-trivial weights (norms away from 1) so that tests can fail."""
  rng = np.random.RandomState(seed)
  for _, var in nnx.to_flat_state(nnx.state(model, nnx.Param)):
    v = np.asarray(var[...], np.float32)
    var.set_value(jnp.asarray(v + std * rng.standard_normal(v.shape).astype(np.float32), var[...].dtype))
  return model


@pytest.fixture(scope="module")
def tiny():
  return _bump(Transformer(ModelConfig.tiny(), rngs=nnx.Rngs(0)))


def test_config_validation_names_field():
  with pytest.raises(ValueError, match="num_kv_heads"):
    ModelConfig.tiny(num_kv_heads=3)
  with pytest.raises(ValueError, match="activation"):
    ModelConfig.tiny(activation="relu")
  with pytest.raises(ValueError, match="num_experts_per_tok"):
    ModelConfig.tiny(num_experts=4, num_experts_per_tok=5, moe_intermediate_size=8)
  with pytest.raises(ValueError, match="sliding_window"):
    ModelConfig.tiny(layer_types=("sliding_attention", "full_attention"))
  with pytest.raises(ValueError, match="param_dtype"):
    ModelConfig.tiny(param_dtype="int8")
  with pytest.raises(dataclasses.FrozenInstanceError):
    ModelConfig.tiny().vocab_size = 3


def test_shapes_and_logical_axes(tiny):
  out = tiny(_tokens(2, 7), return_logits=True)
  assert out.hidden.shape == (2, 7, 64) and out.logits.shape == (2, 7, 128)
  assert out.logits.dtype == jnp.float32 and out.routing is None and out.cache is None
  assert tiny.lm_head_weight().shape == (64, 128)
  axes = logical_axes(tiny)
  assert axes[("embed",)] == ("vocab", "embed")
  assert axes[("layers", 0, "attn", "q", "kernel")] == ("embed", "heads", "head_dim")
  assert axes[("layers", 1, "mlp", "down", "kernel")] == ("mlp", "embed")
  assert all(a is not None for a in axes.values())


def test_logits_equal_hidden_times_head(tiny):
  out = tiny(_tokens(2, 5), return_logits=True)
  ref = np.asarray(out.hidden, np.float64) @ np.asarray(tiny.lm_head_weight(), np.float64)
  np.testing.assert_allclose(np.asarray(out.logits), ref, rtol=1e-5, atol=1e-5)


def test_cache_prefill_then_decode_equals_uncached(tiny):
  b, t, p, s = 2, 10, 4, 16
  tok = _tokens(b, t, seed=3)
  full = tiny(tok, return_logits=True).logits
  cache = tiny.init_cache(b, s)
  kv = jnp.zeros((b, s), bool).at[:, :p].set(True)
  out = tiny(tok[:, :p], cache=cache, cache_index=jnp.int32(0), kv_mask=kv, return_logits=True)
  got = [out.logits]
  step = jax.jit(lambda c, x, i, m: tiny(x, cache=c, cache_index=i, kv_mask=m, return_logits=True))
  cache = out.cache
  for i in range(p, t):
    kv = kv.at[:, i].set(True)
    o = step(cache, tok[:, i:i + 1], jnp.int32(i), kv)
    cache = o.cache
    got.append(o.logits)
  np.testing.assert_allclose(np.concatenate(got, 1), full, rtol=2e-5, atol=2e-5)


def test_cache_left_padding_with_kv_mask(tiny):
  # Row 1 is left-padded by 3; the cached run masks those slots and must equal an
  # uncached run of the unpadded row.
  tok = _tokens(2, 9, seed=4)
  pad = 3
  positions = jnp.stack([jnp.arange(9), jnp.clip(jnp.arange(9) - pad, 0, None)]).astype(jnp.int32)
  kv = jnp.ones((2, 12), bool).at[1, :pad].set(False)
  out = tiny(tok, positions, cache=tiny.init_cache(2, 12), cache_index=jnp.int32(0), kv_mask=kv,
             return_logits=True)
  ref = tiny(tok[1:, pad:], return_logits=True).logits
  np.testing.assert_allclose(out.logits[1, pad:], ref[0], rtol=2e-5, atol=2e-5)
  ref0 = tiny(tok[:1], return_logits=True).logits
  np.testing.assert_allclose(out.logits[0], ref0[0], rtol=2e-5, atol=2e-5)


def test_packed_segments_equal_separate_runs(tiny):
  a, b2 = _tokens(1, 5, seed=5), _tokens(1, 4, seed=6)
  packed = jnp.concatenate([a, b2, jnp.zeros((1, 2), jnp.int32)], axis=1)
  seg = jnp.asarray([[1] * 5 + [2] * 4 + [0] * 2], jnp.int32)
  out = jax.jit(lambda x, s: tiny(x, segment_ids=s, return_logits=True).logits)(packed, seg)
  ra = tiny(a, return_logits=True).logits
  rb = tiny(b2, return_logits=True).logits
  np.testing.assert_allclose(out[0, :5], ra[0], rtol=2e-5, atol=2e-5)
  np.testing.assert_allclose(out[0, 5:9], rb[0], rtol=2e-5, atol=2e-5)
  assert np.all(np.isfinite(np.asarray(out)))  # padding rows stay finite
  np.testing.assert_array_equal(segment_positions(seg)[0], [0, 1, 2, 3, 4, 0, 1, 2, 3, 0, 1])


@pytest.mark.parametrize("jit", [False, True])
def test_policy_outputs_equal_log_softmax(tiny, jit):
  tok = _tokens(2, 8, seed=7)
  temp = 0.7
  fn = (lambda x: policy_outputs(tiny, x, temperature=temp))
  po = jax.jit(fn)(tok) if jit else fn(tok)
  z = np.asarray(tiny(tok, return_logits=True).logits, np.float64) / temp
  lsm = z - np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1, keepdims=True)) - z.max(-1, keepdims=True)
  ref = np.zeros((2, 8))
  ref[:, 1:] = np.take_along_axis(lsm[:, :-1], np.asarray(tok)[:, 1:, None], -1)[..., 0]
  ent = np.zeros((2, 8))
  ent[:, 1:] = -(np.exp(lsm) * lsm).sum(-1)[:, :-1]
  np.testing.assert_allclose(po.logp, ref, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(po.entropy, ent, rtol=1e-5, atol=1e-5)
  assert po.routing is None and po.aux_loss is None


def test_policy_outputs_packed_masks_segment_starts(tiny):
  tok = _tokens(1, 8, seed=8)
  seg = jnp.asarray([[1, 1, 1, 2, 2, 2, 0, 0]], jnp.int32)
  po = policy_outputs(tiny, tok, segment_ids=seg)
  sep = policy_outputs(tiny, tok[:, 3:6])
  np.testing.assert_array_equal(np.asarray(po.logp)[0, [0, 3, 6, 7]], 0.0)
  np.testing.assert_allclose(po.logp[0, 4:6], sep.logp[0, 1:3], rtol=1e-5, atol=1e-5)


def test_functional_split_merge_jit_matches(tiny):
  graphdef, state = nnx.split(tiny)
  tok = _tokens(2, 6, seed=9)

  @jax.jit
  def f(state, x):
    return nnx.merge(graphdef, state)(x, return_logits=True).logits

  np.testing.assert_allclose(f(state, tok), tiny(tok, return_logits=True).logits, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_remat_same_value_and_grad():
  cfg = ModelConfig.tiny(num_layers=2)
  # Default (well-conditioned) init: with _bump'ed weights XLA's different fusion under remat
  # alone moves gradients by ~1e-4 relative.
  m1 = Transformer(cfg, rngs=nnx.Rngs(0))
  m2 = Transformer(cfg.replace(remat="full"), rngs=nnx.Rngs(0))
  tok = _tokens(2, 6, seed=10)

  def value_and_grad(m):
    graphdef, state = nnx.split(m)
    return jax.jit(jax.value_and_grad(lambda st: jnp.sum(policy_outputs(nnx.merge(graphdef, st), tok).logp)))(state)

  (l1, g1), (l2, g2) = value_and_grad(m1), value_and_grad(m2)
  np.testing.assert_allclose(l1, l2, rtol=1e-6)
  for (k, a), (_, b) in zip(nnx.to_flat_state(g1), nnx.to_flat_state(g2)):
    np.testing.assert_allclose(a[...], b[...], rtol=1e-5, atol=1e-6, err_msg=str(k))


def test_bf16_params_and_compute():
  cfg = ModelConfig.tiny(param_dtype="bfloat16", compute_dtype="bfloat16")
  m = Transformer(cfg, rngs=nnx.Rngs(0))
  assert m.embed[...].dtype == jnp.bfloat16
  out = m(_tokens(1, 4), return_logits=True)
  assert out.hidden.dtype == jnp.bfloat16 and out.logits.dtype == jnp.float32
  f32 = Transformer(ModelConfig.tiny(compute_dtype="float32", param_dtype="bfloat16"), rngs=nnx.Rngs(0))
  np.testing.assert_allclose(out.logits, f32(_tokens(1, 4), return_logits=True).logits, atol=5e-2)


def test_sliding_window_cache_equals_uncached():
  cfg = ModelConfig.tiny(sliding_window=3, layer_types=("sliding_attention", "full_attention"),
                         attn_logit_softcap=5.0, final_logit_softcap=3.0, sandwich_norm=True,
                         norm_plus_one=True, embed_scale=True, activation="gelu_tanh", query_pre_attn_scalar=32.0)
  m = _bump(Transformer(cfg, rngs=nnx.Rngs(1)))
  tok = _tokens(1, 8, seed=11)
  full = m(tok, return_logits=True).logits
  assert float(jnp.max(jnp.abs(full))) <= 3.0
  cache = m.init_cache(1, 8)
  kv = jnp.ones((1, 8), bool)
  out = m(tok[:, :5], cache=cache, cache_index=jnp.int32(0), kv_mask=kv, return_logits=True)
  o2 = m(tok[:, 5:], cache=out.cache, cache_index=jnp.int32(5), kv_mask=kv, return_logits=True)
  np.testing.assert_allclose(jnp.concatenate([out.logits, o2.logits], 1), full, rtol=2e-5, atol=2e-5)
  # The window matters: a full-attention model gives different logits.
  m_full = Transformer(cfg.replace(layer_types=None), rngs=nnx.Rngs(1))
  nnx.update(m_full, nnx.state(m))
  assert float(jnp.max(jnp.abs(m_full(tok, return_logits=True).logits - full))) > 1e-3


def test_rope_llama3_inv_freq_hand_derived():
  # Hand-derived: D=8, theta=10000 -> inv = [1, 0.1, 0.01, 0.001]; wavelengths 2pi/inv.
  s = RopeScaling(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                  original_max_position_embeddings=64)
  inv, mult = rope_inv_freq(8, 10000.0, s)
  base = np.array([1.0, 0.1, 0.01, 0.001])
  wl = 2 * np.pi / base  # [6.28, 62.8, 628, 6283]; high_wl = 16, low_wl = 64
  smooth = (64 / wl[1] - 1) / 3  # medium band: 16 <= 62.8 <= 64
  expect = [base[0], (1 - smooth) * base[1] / 8 + smooth * base[1], base[2] / 8, base[3] / 8]
  np.testing.assert_allclose(inv, expect, rtol=1e-12)
  assert mult == 1.0
  inv_lin, _ = rope_inv_freq(8, 10000.0, RopeScaling(rope_type="linear", factor=4.0))
  np.testing.assert_allclose(inv_lin, base / 4, rtol=1e-12)


def test_bad_inputs_raise():
  m = Transformer(ModelConfig.tiny(), rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match="tokens"):
    m(jnp.zeros((3,), jnp.int32))
  with pytest.raises(ValueError, match="positions"):
    m(jnp.zeros((1, 3), jnp.int32), jnp.zeros((1, 4), jnp.int32))
  with pytest.raises(ValueError, match="cache_index"):
    m(jnp.zeros((1, 3), jnp.int32), cache=m.init_cache(1, 4))
  with pytest.raises(ValueError, match="routing"):
    m(jnp.zeros((1, 3), jnp.int32), routing=jnp.zeros((1, 3, 1, 1), jnp.int32))
  with pytest.raises(ValueError, match="cache.k"):
    m(jnp.zeros((1, 3), jnp.int32), cache=KVCache(jnp.zeros((1, 1, 4, 2, 16)), jnp.zeros((1, 1, 4, 2, 16))),
      cache_index=0)


def test_presets_match_published_parameter_counts():
  from rljax.models import presets
  # Published totals (model cards / safetensors metadata).
  known = {"qwen2.5-0.5b": 494_032_768, "llama-3.2-1b": 1_235_814_400, "llama-3.1-8b": 8_030_261_248,
           "qwen2.5-7b": 7_615_616_512, "gemma-2-2b": 2_614_341_888}
  for name, n in known.items():
    assert presets.num_params(presets.get(name)) == n, name
  assert presets.get("qwen3-30b-a3b").num_moe_layers == 48
  with pytest.raises(ValueError, match="unknown preset"):
    presets.get("gpt-5")


@pytest.mark.parametrize("kw", [dict(), dict(tie_embeddings=True, qkv_bias=True),
                                dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=8, qk_norm=True,
                                     moe_layers=(1,), sandwich_norm=True)])
def test_closed_form_param_count_matches_arrays(kw):
  from rljax.models import param_count, presets
  cfg = ModelConfig.tiny(**kw)
  abstract = nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0)))
  assert param_count(abstract) == presets.num_params(cfg)


def test_shard_state_places_params_by_logical_axes():
  from rljax.models import shard_state
  if len(jax.devices()) < 4:
    pytest.skip("needs >= 4 (fake) devices")
  mesh = jax.make_mesh((2, 2), ("fsdp", "tensor"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
  m = Transformer(ModelConfig.tiny(), rngs=nnx.Rngs(0))
  tok = _tokens(2, 5)
  ref = m(tok, return_logits=True).logits
  shard_state(m, mesh)
  spec = m.layers[0].attn.q.kernel[...].sharding.spec
  assert tuple(spec) == ("fsdp", "tensor", None)
  assert tuple(m.embed[...].sharding.spec) == ("tensor", "fsdp")
  np.testing.assert_allclose(m(tok, return_logits=True).logits, ref, rtol=1e-5, atol=1e-5)


def test_decode_inside_fori_loop_matches_teacher_forced_argmax(tiny):
  # Greedy decode in a jitted fori_loop (how a sampler uses the cache) equals the argmax of an
  # uncached forward over the generated sequence (teacher forcing).
  graphdef, state = nnx.split(tiny)
  prompt = _tokens(2, 3, seed=12)
  n_new, s = 4, 8

  @jax.jit
  def generate(state, prompt):
    m = nnx.merge(graphdef, state)
    kv = jnp.zeros((2, s), bool).at[:, :3].set(True)
    out = m(prompt, cache=m.init_cache(2, s), cache_index=jnp.int32(0), kv_mask=kv, return_logits=True)
    seq = jnp.zeros((2, s), jnp.int32).at[:, :3].set(prompt)
    first = jnp.argmax(out.logits[:, -1], -1).astype(jnp.int32)

    def body(i, carry):
      cache, seq, kv, nxt = carry
      pos = 3 + i
      seq = jax.lax.dynamic_update_slice(seq, nxt[:, None], (0, pos))
      kv = jax.lax.dynamic_update_slice(kv, jnp.ones((2, 1), bool), (0, pos))
      o = m(nxt[:, None], cache=cache, cache_index=pos, kv_mask=kv, return_logits=True)
      return o.cache, seq, kv, jnp.argmax(o.logits[:, -1], -1).astype(jnp.int32)

    _, seq, _, _ = jax.lax.fori_loop(0, n_new, body, (out.cache, seq, kv, first))
    return seq

  seq = generate(state, prompt)[:, :3 + n_new]
  ref = jnp.argmax(tiny(seq, return_logits=True).logits, -1)
  np.testing.assert_array_equal(seq[:, 3:], ref[:, 2:-1])


@pytest.mark.parametrize("bias", [False, True])
def test_fused_decode_projections_equal_separate(bias):
  """The decode path's one-matmul q/k/v (per kv head: its query heads, k, v) and gate/up projections give
  the separate projections' values (GQA 4 query heads over 2 kv heads; with and without QKV bias)."""
  from rljax.models._layers import rope_cos_sin  # pylint: disable=import-outside-toplevel
  cfg = ModelConfig(vocab_size=32, hidden_size=16, num_layers=1, num_heads=4, num_kv_heads=2, head_dim=8,
                    intermediate_size=24, qkv_bias=bias)
  blk = Transformer(cfg, rngs=nnx.Rngs(3)).layers[0]
  if bias:  # zero-initialised biases would not test their placement
    for lin in (blk.attn.q, blk.attn.k, blk.attn.v):
      lin.bias[...] = jax.random.normal(jax.random.PRNGKey(7), lin.bias.shape)
  x = jax.random.normal(jax.random.PRNGKey(0), (3, 1, 16))
  cos, sin = rope_cos_sin(jnp.full((3, 1), 5), cfg)
  for a, b in zip(blk.attn.qkv(x, cos, sin, fused=True), blk.attn.qkv(x, cos, sin)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(blk.mlp(x, fused=True), blk.mlp(x), rtol=1e-5, atol=1e-6)


def test_qwen2_without_qkv_bias_saves_zero_biases_and_loads_back(tmp_path):
  """HF Qwen2 always has q/k/v biases: a bias-free Qwen2-architecture model is written with zero biases
  (the same function), so ``from_pretrained`` reads it back and gives the same log-probs."""
  from safetensors.numpy import load_file  # pylint: disable=import-outside-toplevel
  from rljax.models import from_pretrained, save_pretrained  # pylint: disable=import-outside-toplevel
  model = Transformer(ModelConfig.tiny(), rngs=nnx.Rngs(3))
  assert model.cfg.architecture == "Qwen2ForCausalLM" and not model.cfg.qkv_bias
  save_pretrained(model, str(tmp_path))
  tensors = load_file(str(tmp_path / "model.safetensors"))
  for proj, size in (("q", 4 * 16), ("k", 2 * 16), ("v", 2 * 16)):
    np.testing.assert_array_equal(tensors[f"model.layers.1.self_attn.{proj}_proj.bias"], np.zeros(size))
  loaded = from_pretrained(str(tmp_path))
  tok = jnp.asarray(np.random.default_rng(0).integers(0, 128, (2, 9)), jnp.int32)
  np.testing.assert_allclose(policy_outputs(loaded, tok).logp, policy_outputs(model, tok).logp, rtol=1e-6, atol=1e-6)
