"""Tokenizers behind one interface: SentencePiece and HF ``tokenizer.json``.

``Tokenizer`` is the protocol the sampler, trainer and CLI use:
``encode(text, add_bos=False, add_eos=False) -> list[int]`` (the text's tokens, nothing added unless asked),
``encode_prompt(text)`` (a plain prompt, with the start token the tokenizer's own rule puts first),
``encode_chat(text)`` (a rendered chat template: its special tokens, nothing added),
``decode(ids) -> str`` (stops at the first end token, skips pad/bos),
``vocab_size`` (ids ``0..vocab_size-1``, added tokens included), ``bos_id``, ``eos_id``, ``pad_id``,
``has_bos`` (plain prompts start with ``bos_id``), ``special_tokens`` (``bos_token`` ... -> text, a chat
template's variables), ``special_token_ids`` (special token text -> id) and ``chat_template`` (the checkpoint's
own, or None).

``train_sentencepiece`` trains a SentencePiece model deterministically (one
thread, no sampling or shuffling of the input) — the built-in tasks use a
character model over their alphabet.
"""
from __future__ import annotations

import io
import json
import os
import re
from typing import Iterable, Optional, Protocol, Sequence

import sentencepiece as spm

__all__ = ["Tokenizer", "SentencePieceTokenizer", "HFTokenizer", "train_sentencepiece", "load_tokenizer"]


class Tokenizer(Protocol):
  vocab_size: int
  bos_id: int
  eos_id: int
  pad_id: int
  has_bos: bool
  chat_template: Optional[str]

  def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> list[int]: ...

  def encode_prompt(self, text: str) -> list[int]: ...

  def encode_chat(self, text: str) -> list[int]: ...

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
  """A SentencePiece ``tokenizer.model`` (Gemma / Llama-2 style, or our own).

  Plain prompts are ``[bos] + tokens(text)`` (``has_bos``); it carries no chat template (``chat_template`` None).
  """

  has_bos = True
  chat_template = None

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
    # the control and unknown pieces, text -> id (they never come out of ``encode``)
    self.special_token_ids = {self._sp.id_to_piece(i): i for i in range(self.vocab_size)
                              if self._sp.is_control(i) or self._sp.is_unknown(i)}

  def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> list[int]:
    ids = list(self._sp.encode(text))
    return ([self.bos_id] if add_bos else []) + ids + ([self.eos_id] if add_eos else [])

  def encode_prompt(self, text: str) -> list[int]:
    """A plain prompt: ``[bos] + tokens(text)`` (a SentencePiece model's start-token rule)."""
    ids = [int(i) for i in self._sp.encode(text)]
    return ids if ids[:1] == [self.bos_id] else [self.bos_id] + ids

  @property
  def special_tokens(self) -> dict:
    """``bos_token``, ``eos_token``, ``unk_token``, ``pad_token`` -> their pieces (a chat template's variables)."""
    ids = {"bos_token": self._sp.bos_id(), "eos_token": self._sp.eos_id(), "unk_token": self._sp.unk_id(),
           "pad_token": self._sp.pad_id()}
    return {k: self._sp.id_to_piece(i) for k, i in ids.items() if i >= 0}

  def encode_chat(self, text: str) -> list[int]:
    """A rendered chat: the control pieces it writes (``<s>``, ``</s>`` ...) become their ids, the rest is
    encoded; no start token is added (the template writes it)."""
    specials = {t: i for t, i in self.special_token_ids.items() if self._sp.is_control(i)}
    if not specials:
      return [int(i) for i in self._sp.encode(text)]
    pattern = re.compile("|".join(re.escape(t) for t in sorted(specials, key=len, reverse=True)))
    out, at = [], 0
    for m in pattern.finditer(text):
      out += [int(i) for i in self._sp.encode(text[at:m.start()])] if m.start() > at else []
      out.append(int(specials[m.group()]))
      at = m.end()
    return out + ([int(i) for i in self._sp.encode(text[at:])] if at < len(text) else [])

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
  """A Hugging Face ``tokenizer.json`` (+ ``tokenizer_config.json``) through the ``tokenizers`` package.

  It follows transformers' rules (``TokenizersBackend``, transformers 5.25):

  * plain text (``encode_prompt``): the start tokens the ``tokenizer.json`` post-processor puts before a text
    (``TemplateProcessing`` with ``<|begin_of_text|>`` for Llama-3 and ``<bos>`` for Gemma; ``ByteLevel`` adds
    none, as for Qwen and SmolLM2; no post-processor: none). ``add_bos_token`` / ``add_eos_token`` in
    ``tokenizer_config.json`` do not count: transformers drops them when a ``tokenizer.json`` exists
    (``PreTrainedTokenizerBase._from_pretrained``). Only the tokens before the text are kept (a prompt is
    continued, so an end token the post-processor would append is not), and a text that already starts with them
    does not get them twice.
  * chat text (``encode_chat``): encoded as is (``add_special_tokens=False``): the template writes the start
    token.
  * ``special_tokens``: the named special tokens of ``tokenizer_config.json`` (``bos_token`` ... as strings;
    ``special_tokens_map.json`` for a config without ``added_tokens_decoder``), the chat template's variables;
    ``special_token_ids``: the special added tokens, text -> id.
  * ``chat_template``: the checkpoint's own chat template: ``chat_template.jinja`` beside the tokenizer, else
    ``chat_template`` in ``tokenizer_config.json`` (a list of named templates: the one named ``default``); None
    when it has none.
  * truncation and padding stored in ``tokenizer.json`` are switched off (transformers does not apply them
    unless asked).
  """

  def __init__(self, path: str):
    try:
      from tokenizers import Tokenizer as _HFTok
    except ImportError as e:  # pragma: no cover - depends on the extra
      raise ImportError("HFTokenizer needs the `tokenizers` package: pip install 'rljax[hf]'") from e
    file = os.path.join(path, "tokenizer.json") if os.path.isdir(path) else path
    if not os.path.exists(file):
      raise ValueError(f"no tokenizer.json at {path!r}")
    folder = os.path.dirname(file)
    self._tok = _HFTok.from_file(file)
    self._tok.no_truncation()
    self._tok.no_padding()
    cfg = _read_json(os.path.join(folder, "tokenizer_config.json"))
    self.special_tokens = _named_special_tokens(cfg, os.path.join(folder, "special_tokens_map.json"))
    self.special_token_ids = {t.content: int(i) for i, t in self._tok.get_added_tokens_decoder().items()
                              if t.special}
    vocab = self._tok.get_vocab(with_added_tokens=True)
    self.vocab_size = max(int(self._tok.get_vocab_size(with_added_tokens=True)), max(vocab.values(), default=-1) + 1)

    def tid(key, default=None):
      tok = self.special_tokens.get(key)
      idx = self._tok.token_to_id(tok) if tok else None
      return default if idx is None else int(idx)

    self.eos_id = tid("eos_token", -1)
    self.bos_id = tid("bos_token", self.eos_id)
    self.pad_id = tid("pad_token", self.eos_id)
    self.prompt_prefix = []  # the tokens the post-processor puts before a text (none without a post-processor)
    if self._tok.post_processor is not None:
      probe = self._tok.encode("0", add_special_tokens=True)
      for i, seq in zip(probe.ids, probe.sequence_ids):
        if seq is not None:
          break
        self.prompt_prefix.append(int(i))
    self.has_bos = self.prompt_prefix == [self.bos_id]  # plain prompts start with the start token
    self.chat_template = _own_chat_template(folder, cfg)

  def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> list[int]:
    ids = self._tok.encode(text, add_special_tokens=False).ids
    return ([self.bos_id] if add_bos else []) + list(ids) + ([self.eos_id] if add_eos else [])

  def encode_prompt(self, text: str) -> list[int]:
    """A plain prompt: the post-processor's leading tokens (once) + the text's tokens."""
    ids = [int(i) for i in self._tok.encode(text, add_special_tokens=False).ids]
    pre = self.prompt_prefix
    return ids if pre and ids[:len(pre)] == pre else list(pre) + ids

  def encode_chat(self, text: str) -> list[int]:
    """A rendered chat: its tokens, no special token added (the template wrote them)."""
    return [int(i) for i in self._tok.encode(text, add_special_tokens=False).ids]

  def decode(self, ids: Sequence[int]) -> str:
    return self._tok.decode(_cut_at_eos(ids, self.eos_id, {self.pad_id, self.bos_id}))


def _read_json(path: str) -> dict:
  if not os.path.exists(path):
    return {}
  with open(path, encoding="utf-8") as f:
    try:
      data = json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"{path} is not valid JSON: {e}") from None
  if not isinstance(data, dict):
    raise ValueError(f"{path} must hold a JSON object, got {type(data).__name__}")
  return data


def _token_text(value) -> Optional[str]:
  if isinstance(value, dict):
    value = value.get("content")
  return value if isinstance(value, str) else None


def _named_special_tokens(cfg: dict, map_file: str) -> dict:
  """``bos_token`` ... -> text, as transformers reads them (``tokenizer_config.json``; ``special_tokens_map.json``
  when the config has no ``added_tokens_decoder``)."""
  from rljax.data._chat import SPECIAL_TOKEN_NAMES  # pylint: disable=import-outside-toplevel
  merged = dict(cfg)
  if "added_tokens_decoder" not in cfg:
    merged.update({k: v for k, v in _read_json(map_file).items() if k in SPECIAL_TOKEN_NAMES})
  return {k: _token_text(merged[k]) for k in SPECIAL_TOKEN_NAMES if _token_text(merged.get(k)) is not None}


def _own_chat_template(folder: str, cfg: dict) -> Optional[str]:
  """The checkpoint's chat template: ``chat_template.jinja`` (as transformers, it wins over the config), else the
  config's ``chat_template`` (a string, or a list of ``{"name", "template"}``: the one named ``default``)."""
  path = os.path.join(folder, "chat_template.jinja")
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      return f.read()
  value = cfg.get("chat_template")
  if isinstance(value, list):
    value = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}.get("default")
  return value if isinstance(value, str) and value.strip() else None


def load_tokenizer(path: str) -> Tokenizer:
  """Loads ``tokenizer.json`` (HF) or ``tokenizer.model`` (SentencePiece) from a file or directory, or the
  tokenizer of a ``.gguf`` file (through its cached converted directory, ``rljax.models.gguf_checkpoint``).

  A directory with both (Gemma, Llama-2 checkpoints) gives the ``tokenizer.json``, the one transformers'
  ``AutoTokenizer`` uses."""
  if path.endswith(".gguf"):
    from rljax.models import gguf_checkpoint  # pylint: disable=import-outside-toplevel
    path = gguf_checkpoint(path)
  if os.path.isdir(path):
    for fname, cls in (("tokenizer.json", HFTokenizer), ("tokenizer.model", SentencePieceTokenizer)):
      if os.path.exists(os.path.join(path, fname)):
        return cls(os.path.join(path, fname))
    raise ValueError(f"no tokenizer.model or tokenizer.json in {path!r}")
  if path.endswith(".json"):
    return HFTokenizer(path)
  return SentencePieceTokenizer(path)
