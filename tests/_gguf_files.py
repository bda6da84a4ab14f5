"""Tiny GGUF files of every dense family, written with the ``gguf`` package as llama.cpp's converter writes them
(its tensor names, Gemma RMSNorm weights stored as ``1 + w``, no attention scale or RoPE base of the sliding layers
in the metadata), from the weights of a tiny random transformers model; the Gemma files carry a small SentencePiece
vocabulary (byte fallback) in their metadata. Used by tests/test_gguf_families.py and tests/test_gemma3_run.py.
"""
import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

_H, _F, _N, _K, _D = 64, 96, 4, 2, 16
_BYTES = [f"<0x{b:02X}>" for b in range(256)]
_PIECES = ["\u2581", "a", "b", "c", "e", "h", "l", "o", "r", "t", "w", "1", "2", "+", "=", "\u2581t", "he", "\u2581the",
           "ll", "\u2581w", "or", "\u2581wor", "ld", "\u2581world", "12", "\u2581a"]
_TOKENS = ["<pad>", "<eos>", "<bos>", "<unk>"] + _BYTES + _PIECES + ["<start_of_turn>", "<end_of_turn>", "  "]
_TYPES = [3, 3, 3, 2] + [6] * 256 + [1] * len(_PIECES) + [3, 3, 4]
_V = len(_TOKENS)

# family -> (GGUF architecture, transformers config class, model class, config extras)
_FAMILIES = {
    "gemma": ("gemma", "GemmaConfig", "GemmaForCausalLM", dict(hidden_act="gelu_pytorch_tanh", num_hidden_layers=2)),
    "gemma2": ("gemma2", "Gemma2Config", "Gemma2ForCausalLM", dict(
        num_hidden_layers=2, sliding_window=4, attn_logit_softcapping=5.0, final_logit_softcapping=3.0,
        query_pre_attn_scalar=_D)),
    "gemma3": ("gemma3", "Gemma3TextConfig", "Gemma3ForCausalLM", dict(
        num_hidden_layers=7, sliding_window=4, query_pre_attn_scalar=_D, rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})),
    "qwen3": ("qwen3", "Qwen3Config", "Qwen3ForCausalLM", dict(num_hidden_layers=2, rope_theta=1e6)),
}
_NAMES = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
          "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
          "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
          "mlp.down_proj": "ffn_down"}
_SANDWICH = {"post_attention_layernorm": "post_attention_norm", "pre_feedforward_layernorm": "ffn_norm",
             "post_feedforward_layernorm": "post_ffw_norm"}


def _hf_model(family):
  _, cfg_cls, model_cls, extra = _FAMILIES[family]
  kw = dict(vocab_size=_V, hidden_size=_H, intermediate_size=_F, num_attention_heads=_N, num_key_value_heads=_K,
            head_dim=_D, max_position_embeddings=256, rms_norm_eps=1e-6, **extra)
  torch.manual_seed(0)
  model = getattr(transformers, model_cls)(getattr(transformers, cfg_cls)(**kw)).eval()
  with torch.no_grad():  # non-trivial weights everywhere (norm scales included)
    for p in model.parameters():
      p.add_(0.2 * torch.randn_like(p))
  return model


def _gguf_name(arch, hf_name):
  top = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
         "lm_head.weight": "output.weight"}
  if hf_name in top:
    return top[hf_name]
  _, _, i, rest = hf_name.split(".", 3)
  module = rest.rsplit(".", 1)[0]
  sandwich = arch in ("gemma2", "gemma3")
  if module == "post_attention_layernorm" and not sandwich:
    return f"blk.{i}.ffn_norm.weight"
  return f"blk.{i}.{(_SANDWICH if sandwich and module in _SANDWICH else _NAMES)[module]}.weight"


def write_family_gguf(path, family, model=None, *, tokenizer=True, meta=None):
  """``model``'s weights (default a fresh tiny one) as llama.cpp writes a ``family`` file (F32 tensors)."""
  arch = _FAMILIES[family][0]
  model = model if model is not None else _hf_model(family)
  cfg = model.config
  w = gguf.GGUFWriter(str(path), arch)
  w.add_block_count(cfg.num_hidden_layers)
  w.add_context_length(256)
  w.add_embedding_length(_H)
  w.add_feed_forward_length(_F)
  w.add_head_count(_N)
  w.add_head_count_kv(_K)
  w.add_key_length(_D)
  w.add_value_length(_D)
  w.add_layer_norm_rms_eps(1e-6)
  w.add_rope_freq_base(1e6 if arch in ("gemma3", "qwen3") else 10000.0)
  if arch in ("gemma2", "gemma3"):
    w.add_sliding_window(4)
  if arch == "gemma2":
    w.add_float32("gemma2.attn_logit_softcapping", 5.0)
    w.add_float32("gemma2.final_logit_softcapping", 3.0)
  for key, value in (meta or {}).items():
    w.add_uint32(key, value)
  if tokenizer:
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(_TOKENS)
    w.add_token_scores([0.0] * _V)
    w.add_token_types(_TYPES)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_pad_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(False)
  for name, p in model.state_dict().items():
    if name == "lm_head.weight" and cfg.tie_word_embeddings:
      continue
    arr = p.detach().numpy().astype(np.float32)
    gname = _gguf_name(arch, name)
    if arch.startswith("gemma") and gname.endswith("norm.weight"):
      arr = arr + 1  # llama.cpp's GemmaModel.modify_tensors
    w.add_tensor(gname, arr)
  w.write_header_to_file()
  w.write_kv_data_to_file()
  w.write_tensors_to_file()
  w.close()
  return model

FAMILIES, VOCAB = _FAMILIES, _V
