"""Hugging Face parity: tiny random transformers models saved locally, loaded in rljax.

Reference: the transformers (torch CPU) forward of the same checkpoint; float32
logits must agree to max abs diff <= 1e-4.
"""
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import jax.numpy as jnp  # noqa: E402
from safetensors.numpy import load_file, save_file  # noqa: E402

from rljax.models import from_pretrained, load_hf_config, param_count, save_pretrained  # noqa: E402

_COMMON = dict(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, head_dim=16, max_position_embeddings=256)

_CASES = {
    "llama3": ("LlamaConfig", "LlamaForCausalLM", dict(rope_scaling=dict(
        rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
        original_max_position_embeddings=32), tie_word_embeddings=False)),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(tie_word_embeddings=True, rope_theta=1e6)),
    "qwen2_yarn": ("Qwen2Config", "Qwen2ForCausalLM", dict(rope_scaling=dict(
        rope_type="yarn", factor=4.0, original_max_position_embeddings=64))),
    "qwen2_linear": ("Qwen2Config", "Qwen2ForCausalLM", dict(rope_scaling=dict(rope_type="linear", factor=2.0))),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {}),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", dict(
        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, norm_topk_prob=True)),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", dict(num_local_experts=4, num_experts_per_tok=2)),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", dict(hidden_act="gelu_pytorch_tanh")),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", dict(
        sliding_window=4, attn_logit_softcapping=5.0, final_logit_softcapping=3.0, query_pre_attn_scalar=24)),
    # sliding layers 0, 1, 3 (window 4 < 12 tokens), global layer 2; local and global RoPE bases differ, the
    # global one linearly scaled (as Gemma 3 4B+)
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", dict(
        num_hidden_layers=4, sliding_window=4, sliding_window_pattern=3, final_logit_softcapping=3.0,
        query_pre_attn_scalar=24, rope_parameters={
            "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 50000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 100.0}})),
}

_TOKENS = np.random.RandomState(0).randint(0, 256, (2, 12))
_POSITIONS = np.stack([np.arange(12) + 40, np.arange(12)])  # rope scaling matters beyond short contexts


def _make(case, path):
  cfg_cls, model_cls, extra = _CASES[case]
  kw = dict(_COMMON)
  kw.update(extra)
  torch.manual_seed(0)
  cfg = getattr(transformers, cfg_cls)(**kw)
  model = getattr(transformers, model_cls)(cfg).eval()
  with torch.no_grad():  # non-trivial weights everywhere (norm scales included)
    for p in model.parameters():
      p.add_(0.2 * torch.randn_like(p))
  model.save_pretrained(path)
  return model


def _hf_logits(model, tokens=_TOKENS, positions=_POSITIONS):
  with torch.no_grad():
    return model(torch.tensor(tokens), position_ids=torch.tensor(positions)).logits.numpy()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
  root = tmp_path_factory.mktemp("hf")
  return {case: (str(root / case), _make(case, str(root / case))) for case in _CASES}


@pytest.mark.parametrize("case", list(_CASES))
def test_logits_match_transformers(checkpoints, case):
  path, hf = checkpoints[case]
  model = from_pretrained(path, dtype="float32")
  assert model.cfg.architecture == load_hf_config(path)["architectures"][0]
  assert param_count(model) == sum(p.numel() for p in hf.parameters())
  out = model(jnp.asarray(_TOKENS, jnp.int32), jnp.asarray(_POSITIONS, jnp.int32), return_logits=True)
  ref = _hf_logits(hf)
  assert np.abs(ref).max() > 0.5  # the comparison is not trivially small
  np.testing.assert_allclose(np.asarray(out.logits), ref, rtol=0, atol=1e-4)


def test_moe_routing_and_aux_loss_match_transformers(checkpoints):
  path, hf = checkpoints["qwen3_moe"]
  model = from_pretrained(path)
  out = model(jnp.asarray(_TOKENS, jnp.int32), jnp.asarray(_POSITIONS, jnp.int32))
  with torch.no_grad():
    ho = hf(torch.tensor(_TOKENS), position_ids=torch.tensor(_POSITIONS), output_router_logits=True)
  for layer, logits in enumerate(ho.router_logits):
    ids = torch.topk(torch.softmax(logits.float(), -1), 2, dim=-1).indices.numpy().reshape(2, 12, 2)
    np.testing.assert_array_equal(np.sort(np.asarray(out.routing[:, :, layer]), -1), np.sort(ids, -1))
  np.testing.assert_allclose(float(out.aux_loss), float(ho.aux_loss), rtol=1e-5)


@pytest.mark.parametrize("case", ["qwen2", "gemma2", "qwen3_moe"])
def test_save_pretrained_roundtrip_loads_in_transformers(checkpoints, case, tmp_path):
  path, hf = checkpoints[case]
  model = from_pretrained(path)
  out_dir = str(tmp_path / "export")
  save_pretrained(model, out_dir, max_shard_bytes=40_000)  # forces a sharded checkpoint with index
  assert os.path.isfile(os.path.join(out_dir, "model.safetensors.index.json"))
  reloaded = transformers.AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32).eval()
  np.testing.assert_allclose(_hf_logits(reloaded), _hf_logits(hf), rtol=0, atol=1e-5)
  again = from_pretrained(out_dir)  # and rljax reads its own sharded output
  assert again.cfg == model.cfg


def _copy_with(path, dst, edit=None, config_edit=None):
  os.makedirs(dst, exist_ok=True)
  cfg = load_hf_config(path)
  if config_edit:
    config_edit(cfg)
  with open(os.path.join(dst, "config.json"), "w") as f:
    json.dump(cfg, f)
  tensors = load_file(os.path.join(path, "model.safetensors"))
  if edit:
    edit(tensors)
  save_file(tensors, os.path.join(dst, "model.safetensors"))
  return dst


def test_errors_name_tensor_and_shape(checkpoints, tmp_path):
  path, _ = checkpoints["qwen2"]
  bad = _copy_with(path, str(tmp_path / "arch"), config_edit=lambda c: c.update(architectures=["FooForCausalLM"]))
  with pytest.raises(ValueError, match="FooForCausalLM"):
    from_pretrained(bad)
  name = "model.layers.1.self_attn.k_proj.weight"
  missing = _copy_with(path, str(tmp_path / "missing"), edit=lambda t: t.pop(name))
  with pytest.raises(ValueError, match=r"missing tensor 'model\.layers\.1\.self_attn\.k_proj\.weight'.*\(32, 64\)"):
    from_pretrained(missing)
  shape = _copy_with(path, str(tmp_path / "shape"), edit=lambda t: t.update({name: t[name][:16]}))
  with pytest.raises(ValueError, match=r"k_proj\.weight.*\(16, 64\), expected \(32, 64\)"):
    from_pretrained(shape)
  extra = _copy_with(path, str(tmp_path / "extra"),
                     edit=lambda t: t.update({"model.layers.0.mlp.extra.weight": np.zeros((2,), np.float32)}))
  with pytest.raises(ValueError, match="extra.weight"):
    from_pretrained(extra)

  def huge(t):
    t["model.norm.weight"] = t["model.norm.weight"].copy()
    t["model.norm.weight"][0] = 1e6
  over = _copy_with(path, str(tmp_path / "overflow"), edit=huge)
  with pytest.raises(ValueError, match=r"model\.norm\.weight.*overflows float16"):
    from_pretrained(over, dtype="float16")
  with pytest.raises(ValueError, match="config.json"):
    from_pretrained(str(tmp_path / "nowhere"))


def test_bf16_load(checkpoints):
  import copy  # pylint: disable=import-outside-toplevel
  path, hf = checkpoints["llama3"]
  model = from_pretrained(path, dtype="bfloat16", compute_dtype="float32")
  assert model.embed[...].dtype == jnp.bfloat16
  out = model(jnp.asarray(_TOKENS, jnp.int32), jnp.asarray(_POSITIONS, jnp.int32), return_logits=True)
  rounded = copy.deepcopy(hf)
  with torch.no_grad():  # reference: the same weights rounded to bf16, computed in f32
    for p in rounded.parameters():
      p.copy_(p.bfloat16().float())
  np.testing.assert_allclose(np.asarray(out.logits), _hf_logits(rounded), rtol=0, atol=1e-4)


def test_info_cli_prints_config_and_count(checkpoints, capsys):
  from rljax.models import info  # pylint: disable=import-outside-toplevel
  path, hf = checkpoints["qwen3"]
  assert info.main([path]) == 0
  text = capsys.readouterr().out
  assert "Qwen3ForCausalLM" in text and "qk_norm = True" in text
  assert f"parameters: {sum(p.numel() for p in hf.parameters()):,}" in text
  assert info.main([path + "_missing"]) == 1


def test_from_pretrained_with_mesh(checkpoints):
  import jax  # pylint: disable=import-outside-toplevel
  if len(jax.devices()) < 4:
    pytest.skip("needs >= 4 (fake) devices")
  path, hf = checkpoints["qwen3"]
  mesh = jax.make_mesh((2, 2), ("fsdp", "tensor"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
  model = from_pretrained(path, mesh=mesh)
  assert tuple(model.layers[0].mlp.gate.kernel[...].sharding.spec) == ("fsdp", "tensor")
  out = model(jnp.asarray(_TOKENS, jnp.int32), jnp.asarray(_POSITIONS, jnp.int32), return_logits=True)
  np.testing.assert_allclose(np.asarray(out.logits), _hf_logits(hf), rtol=0, atol=1e-4)
