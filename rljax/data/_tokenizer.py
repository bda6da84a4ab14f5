"""Tokenizers behind one interface: SentencePiece and HF ``tokenizer.json``.

``Tokenizer`` is the protocol the sampler, trainer and CLI use:
``encode(text, add_bos=False, add_eos=False) -> list[int]``,
``decode(ids) -> str`` (stops at the first end token, skips pad/bos),
``vocab_size``, ``bos_id``, ``eos_id``, ``pad_id``.

``train_sentencepiece`` trains a SentencePiece model deterministically (one
thread, no sampling or shuffling of the input) — the built-in tasks use a
character model over their alphabet.
"""
from __future__ import annotations

import io
import json
import os
from typing import Iterable, Optional, Protocol, Sequence

import sentencepiece as spm

__all__ = ["Tokenizer", "SentencePieceTokenizer", "HFTokenizer", "train_sentencepiece", "load_tokenizer"]


class Tokenizer(Protocol):
  vocab_size: int
  bos_id: int
  eos_id: int
  pad_id: int

  def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> list[int]: ...

  def decode(self, ids: Sequence[int]) -> str: ...


def _cut_at_eos(ids: Sequence[int], eos_id: int, skip: set) -> list[int]:
  out = []
  for i in ids:
    i = int(i)
    if i == eos_id:
      break
    if i not in skip:
      out.append(i)
  return out


class SentencePieceTokenizer:
  """A SentencePiece ``tokenizer.model`` (Gemma / Llama-2 style, or our own)."""

  def __init__(self, model_path: Optional[str] = None, *, model_proto: Optional[bytes] = None):
    if (model_path is None) == (model_proto is None):
      raise ValueError("give exactly one of model_path or model_proto")
    if model_path is not None:
      if not os.path.exists(model_path):
        raise ValueError(f"model_path {model_path!r} does not exist")
      with open(model_path, "rb") as f:
        model_proto = f.read()
    self.model_proto = model_proto
    self._sp = spm.SentencePieceProcessor(model_proto=model_proto)
    self.vocab_size = int(self._sp.vocab_size())
    self.bos_id = int(self._sp.bos_id())
    self.eos_id = int(self._sp.eos_id())
    self.pad_id = int(self._sp.pad_id()) if self._sp.pad_id() >= 0 else self.eos_id

  def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> list[int]:
    ids = list(self._sp.encode(text))
    return ([self.bos_id] if add_bos else []) + ids + ([self.eos_id] if add_eos else [])

  def decode(self, ids: Sequence[int]) -> str:
    return self._sp.decode(_cut_at_eos(ids, self.eos_id, {self.pad_id, self.bos_id}))

  def id_to_piece(self, i: int) -> str:
    return self._sp.id_to_piece(int(i))

  def unknown_characters(self, text: str) -> list[str]:
    """The distinct characters of ``text`` this vocabulary has no piece for (they encode as ``<unk>``)."""
    unk = self._sp.unk_id()
    return [c for c in dict.fromkeys(text) if unk in self._sp.encode(c)]

  def save(self, path: str) -> None:
    with open(path, "wb") as f:
      f.write(self.model_proto)


def train_sentencepiece(lines: Iterable[str], out_dir: Optional[str] = None, *, vocab_size: Optional[int] = None,
                        model_type: str = "char", name: str = "tokenizer") -> SentencePieceTokenizer:
  """Trains a SentencePiece model deterministically on ``lines``.

  Special ids: pad 0, unk 1, bos 2, eos 3. Text is not normalised and no
  dummy whitespace prefix is added, so a character model maps each character
  of the corpus to exactly one id. ``vocab_size=None`` with ``model_type="char"``
  gives 4 + the number of distinct characters.

  Args:
    lines: training text.
    out_dir: where ``{name}.model`` is written (not written when None).
    vocab_size: target vocabulary size (required for "unigram"/"bpe").
    model_type: "char", "unigram", "bpe" or "word".
  """
  if model_type not in ("char", "unigram", "bpe", "word"):
    raise ValueError(f"model_type must be one of char, unigram, bpe, word; got {model_type!r}")
  lines = [l for l in lines if l]
  if not lines:
    raise ValueError("lines must contain some text")
  if vocab_size is None:
    if model_type != "char":
      raise ValueError("vocab_size is required unless model_type='char'")
    vocab_size = 4 + len(set("".join(lines)) - {" "}) + (1 if any(" " in l for l in lines) else 0)
  buf = io.BytesIO()
  spm.SentencePieceTrainer.train(
      sentence_iterator=iter(lines), model_writer=buf, model_type=model_type, vocab_size=vocab_size,
      pad_id=0, unk_id=1, bos_id=2, eos_id=3, add_dummy_prefix=False, remove_extra_whitespaces=False,
      normalization_rule_name="identity", num_threads=1, hard_vocab_limit=False, shuffle_input_sentence=False,
      input_sentence_size=0, character_coverage=1.0, minloglevel=2)
  tok = SentencePieceTokenizer(model_proto=buf.getvalue())
  if out_dir is not None:
    os.makedirs(out_dir, exist_ok=True)
    tok.save(os.path.join(out_dir, f"{name}.model"))
  return tok


class HFTokenizer:
  """A Hugging Face ``tokenizer.json`` through the ``tokenizers`` package (optional extra)."""

  def __init__(self, path: str):
    try:
      from tokenizers import Tokenizer as _HFTok
    except ImportError as e:  # pragma: no cover - depends on the extra
      raise ImportError("HFTokenizer needs the `tokenizers` package: pip install 'rljax[hf]'") from e
    file = os.path.join(path, "tokenizer.json") if os.path.isdir(path) else path
    if not os.path.exists(file):
      raise ValueError(f"no tokenizer.json at {path!r}")
    self._tok = _HFTok.from_file(file)
    self.vocab_size = int(self._tok.get_vocab_size())
    cfg = {}
    cfg_file = os.path.join(os.path.dirname(file), "tokenizer_config.json")
    if os.path.exists(cfg_file):
      with open(cfg_file) as f:
        cfg = json.load(f)

    def tid(key, default=None):
      tok = cfg.get(key)
      if isinstance(tok, dict):
        tok = tok.get("content")
      idx = self._tok.token_to_id(tok) if tok else None
      return default if idx is None else int(idx)

    self.eos_id = tid("eos_token", -1)
    self.has_bos = tid("bos_token") is not None  # Qwen has none: prompts then start without one
    self.bos_id = tid("bos_token", self.eos_id)
    self.pad_id = tid("pad_token", self.eos_id)

  def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> list[int]:
    ids = self._tok.encode(text, add_special_tokens=False).ids
    return ([self.bos_id] if add_bos else []) + list(ids) + ([self.eos_id] if add_eos else [])

  def decode(self, ids: Sequence[int]) -> str:
    return self._tok.decode(_cut_at_eos(ids, self.eos_id, {self.pad_id, self.bos_id}))


def load_tokenizer(path: str) -> Tokenizer:
  """Loads ``tokenizer.model`` (SentencePiece) or ``tokenizer.json`` (HF) from a file or directory, or the
  tokenizer of a ``.gguf`` file (through its cached converted directory, ``rljax.models.gguf_checkpoint``)."""
  if path.endswith(".gguf"):
    from rljax.models._gguf import gguf_checkpoint  # pylint: disable=import-outside-toplevel
    path = gguf_checkpoint(path)
  if os.path.isdir(path):
    for fname, cls in (("tokenizer.model", SentencePieceTokenizer), ("tokenizer.json", HFTokenizer)):
      if os.path.exists(os.path.join(path, fname)):
        return cls(os.path.join(path, fname))
    raise ValueError(f"no tokenizer.model or tokenizer.json in {path!r}")
  if path.endswith(".json"):
    return HFTokenizer(path)
  return SentencePieceTokenizer(path)
