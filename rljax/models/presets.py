"""Configs of published model sizes (architecture only; load weights with ``from_pretrained``).

Each function returns a :class:`ModelConfig`; keyword overrides (e.g.
``param_dtype="bfloat16"``, ``remat="full"``, ``lora=LoRAConfig(...)``) are applied on top.
Numbers follow the models' published ``config.json`` files.
"""
from rljax.models._config import ModelConfig, RopeScaling

__all__ = ["PRESETS", "get", "qwen2_5_0_5b", "qwen2_5_1_5b", "qwen2_5_7b", "qwen2_5_32b", "qwen2_5_72b", "qwen3_0_6b", "qwen3_4b", "qwen3_8b",
           "qwen3_30b_a3b", "llama3_2_1b", "llama3_2_3b", "llama3_1_8b", "gemma2_2b"]


def _qwen2_5(**kw):
  base = dict(vocab_size=151936, head_dim=128, rope_theta=1e6, rms_norm_eps=1e-6, qkv_bias=True,
              max_position_embeddings=32768, architecture="Qwen2ForCausalLM", eos_token_id=151643,
              bos_token_id=151643)
  base.update(kw)
  return ModelConfig(**base)


def qwen2_5_0_5b(**o):
  return _qwen2_5(**{**dict(hidden_size=896, num_layers=24, num_heads=14, num_kv_heads=2, head_dim=64,
                            intermediate_size=4864, tie_embeddings=True), **o})


def qwen2_5_1_5b(**o):
  return _qwen2_5(**{**dict(hidden_size=1536, num_layers=28, num_heads=12, num_kv_heads=2,
                            intermediate_size=8960, tie_embeddings=True), **o})


def qwen2_5_7b(**o):
  return _qwen2_5(**{**dict(vocab_size=152064, hidden_size=3584, num_layers=28, num_heads=28, num_kv_heads=4,
                            intermediate_size=18944, tie_embeddings=False), **o})


def qwen2_5_32b(**o):
  return _qwen2_5(**{**dict(vocab_size=152064, hidden_size=5120, num_layers=64, num_heads=40, num_kv_heads=8,
                            intermediate_size=27648, tie_embeddings=False), **o})


def qwen2_5_72b(**o):
  return _qwen2_5(**{**dict(vocab_size=152064, hidden_size=8192, num_layers=80, num_heads=64, num_kv_heads=8,
                            intermediate_size=29568, tie_embeddings=False), **o})


def _qwen3(**kw):
  base = dict(vocab_size=151936, head_dim=128, num_kv_heads=8, rope_theta=1e6, rms_norm_eps=1e-6, qk_norm=True,
              max_position_embeddings=40960, architecture="Qwen3ForCausalLM", eos_token_id=151645,
              bos_token_id=151643)
  base.update(kw)
  return ModelConfig(**base)


def qwen3_0_6b(**o):
  return _qwen3(**{**dict(hidden_size=1024, num_layers=28, num_heads=16, intermediate_size=3072,
                          tie_embeddings=True), **o})


def qwen3_4b(**o):
  return _qwen3(**{**dict(hidden_size=2560, num_layers=36, num_heads=32, intermediate_size=9728,
                          tie_embeddings=True), **o})


def qwen3_8b(**o):
  return _qwen3(**{**dict(hidden_size=4096, num_layers=36, num_heads=32, intermediate_size=12288,
                          tie_embeddings=False), **o})


def qwen3_30b_a3b(**o):
  return _qwen3(**{**dict(hidden_size=2048, num_layers=48, num_heads=32, num_kv_heads=4, intermediate_size=6144,
                          num_experts=128, num_experts_per_tok=8, moe_intermediate_size=768, norm_topk_prob=True,
                          tie_embeddings=False, architecture="Qwen3MoeForCausalLM"), **o})


def _llama3(factor, **kw):
  base = dict(vocab_size=128256, rope_theta=500000.0, rms_norm_eps=1e-5, max_position_embeddings=131072,
              rope_scaling=RopeScaling(rope_type="llama3", factor=factor, low_freq_factor=1.0, high_freq_factor=4.0,
                                       original_max_position_embeddings=8192),
              architecture="LlamaForCausalLM", bos_token_id=128000, eos_token_id=128001)
  base.update(kw)
  return ModelConfig(**base)


def llama3_2_1b(**o):
  return _llama3(32.0, **{**dict(hidden_size=2048, num_layers=16, num_heads=32, num_kv_heads=8, head_dim=64,
                                 intermediate_size=8192, tie_embeddings=True), **o})


def llama3_2_3b(**o):
  return _llama3(32.0, **{**dict(hidden_size=3072, num_layers=28, num_heads=24, num_kv_heads=8, head_dim=128,
                                 intermediate_size=8192, tie_embeddings=True), **o})


def llama3_1_8b(**o):
  return _llama3(8.0, **{**dict(hidden_size=4096, num_layers=32, num_heads=32, num_kv_heads=8, head_dim=128,
                                intermediate_size=14336, tie_embeddings=False), **o})


def gemma2_2b(**o):
  base = dict(vocab_size=256000, hidden_size=2304, num_layers=26, num_heads=8, num_kv_heads=4, head_dim=256,
              intermediate_size=9216, rms_norm_eps=1e-6, rope_theta=10000.0, max_position_embeddings=8192,
              tie_embeddings=True, activation="gelu_tanh", norm_plus_one=True, embed_scale=True, sandwich_norm=True,
              query_pre_attn_scalar=256.0, attn_logit_softcap=50.0, final_logit_softcap=30.0, sliding_window=4096,
              layer_types=tuple("sliding_attention" if i % 2 == 0 else "full_attention" for i in range(26)),
              architecture="Gemma2ForCausalLM", bos_token_id=2, eos_token_id=1, pad_token_id=0)
  base.update(o)
  return ModelConfig(**base)


PRESETS = {
    "qwen2.5-0.5b": qwen2_5_0_5b, "qwen2.5-1.5b": qwen2_5_1_5b, "qwen2.5-7b": qwen2_5_7b,
    "qwen2.5-32b": qwen2_5_32b, "qwen2.5-72b": qwen2_5_72b,
    "qwen3-0.6b": qwen3_0_6b, "qwen3-4b": qwen3_4b, "qwen3-8b": qwen3_8b, "qwen3-30b-a3b": qwen3_30b_a3b,
    "llama-3.2-1b": llama3_2_1b, "llama-3.2-3b": llama3_2_3b, "llama-3.1-8b": llama3_1_8b,
    "gemma-2-2b": gemma2_2b,
}


def get(name: str, **overrides) -> ModelConfig:
  """Preset by name (case-insensitive), e.g. ``get("qwen3-0.6b", param_dtype="bfloat16")``."""
  key = name.lower()
  if key not in PRESETS:
    raise ValueError(f"unknown preset {name!r}; available: {sorted(PRESETS)}")
  return PRESETS[key](**overrides)


def num_params(cfg: ModelConfig) -> int:
  """Parameter count implied by ``cfg`` (closed form; no arrays built)."""
  h, d, v = cfg.hidden_size, cfg.head_dim, cfg.vocab_size
  attn = h * d * (2 * cfg.num_heads + 2 * cfg.num_kv_heads)
  if cfg.qkv_bias:
    attn += d * (cfg.num_heads + 2 * cfg.num_kv_heads)
  if cfg.qk_norm:
    attn += 2 * d
  norms = (4 if cfg.sandwich_norm else 2) * h
  moe = set(cfg.moe_layer_indices)
  total = v * h * (1 if cfg.tie_embeddings else 2) + h
  for i in range(cfg.num_layers):
    mlp = (cfg.num_experts * 3 * h * cfg.moe_intermediate_size + h * cfg.num_experts) if i in moe else \
        3 * h * cfg.intermediate_size
    total += attn + norms + mlp
  return total + (h + 1 if cfg.value_head else 0)
