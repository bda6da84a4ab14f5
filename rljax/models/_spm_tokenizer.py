"""A GGUF file's SentencePiece tokenizer (``tokenizer.ggml.model = "llama"``) as a ``tokenizers.Tokenizer``.

The Gemma family's GGUF files (Gemma, Gemma-2, Gemma 3) carry a SentencePiece BPE vocabulary as a token list,
scores and token types, with no merges. It becomes the BPE tokenizer that Gemma's own ``tokenizer.json`` describes:

- normalizer: ``" "`` -> ``"▁"`` (U+2581), plus a leading ``"▁"`` when ``tokenizer.ggml.add_space_prefix`` is true;
  no pre-tokenizer (the text is one word, as in SentencePiece);
- model: BPE with byte fallback (``<0x00>`` .. ``<0xFF>`` byte tokens) and ``<unk>`` fused. The merges are
  recovered from the vocabulary: every way to cut a token in two vocabulary pieces is a merge, ranked by the
  token's position in the list (Gemma's scores do not follow its merge order; the position does — llama.cpp's
  vocabulary is written in SentencePiece's piece order, best merges first);
- tokens typed CONTROL (3) are special added tokens, USER_DEFINED (4) plain added tokens (matched whole);
  a token of two or more spaces is spelled with ``"▁"`` as SentencePiece does internally;
- decoder: ``"▁"`` -> ``" "``, byte fallback, fuse; a ``<bos>`` prefix when ``tokenizer.ggml.add_bos_token``.

Reference: transformers' GGUF reader (``AutoTokenizer.from_pretrained(dir, gguf_file=...)``) builds the same
tokenizer; the real-model test compares the ids of both on mixed text.
"""
from __future__ import annotations

__all__ = ["build_spm_tokenizer"]

_CONTROL, _USER_DEFINED = 3, 4  # llama.cpp token types
_SPACE = "\u2581"


def _spelled(token: str) -> str:
  """A token of spaces only, as SentencePiece spells it internally (``"  "`` -> ``"▁▁"``)."""
  return _SPACE * len(token) if token and " " in token and not token.strip() else token


def _merges(tokens: list, special: set) -> list:
  """``(left, right)`` pairs, best first: each token's cuts into two vocabulary pieces, tokens in list order,
  a token's cuts by the pieces' ids."""
  ids: dict = {}
  for i, t in enumerate(tokens):
    ids.setdefault(t, i)
  out = []
  for i, t in enumerate(tokens):
    if i in special or len(t) < 2:
      continue
    cuts = [(ids[t[:k]], ids[t[k:]], t[:k], t[k:]) for k in range(1, len(t)) if t[:k] in ids and t[k:] in ids]
    out.extend((a, b) for _, _, a, b in sorted(cuts))
  return out


def build_spm_tokenizer(tok: dict):
  """``tok``: the ``tokenizer.*`` metadata without the ``tokenizer.`` prefix (``ggml.tokens``, ``ggml.token_type``,
  ``ggml.add_bos_token``, ...). Returns a ``tokenizers.Tokenizer``."""
  # pylint: disable-next=import-outside-toplevel
  from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, processors
  tokens = [_spelled(t) for t in tok["ggml.tokens"]]
  types = list(tok.get("ggml.token_type") or [1] * len(tokens))
  # a respelled run of spaces is an ordinary vocabulary piece (merged from "▁"s), not a token matched whole
  added = {i for i, t in enumerate(types) if t in (_CONTROL, _USER_DEFINED) and tokens[i] == tok["ggml.tokens"][i]}
  vocab: dict = {}
  for i, t in enumerate(tokens):
    vocab.setdefault(t, i)  # a repeated token keeps its first id
  unk_id = tok.get("ggml.unknown_token_id")
  unk = tokens[int(unk_id)] if unk_id is not None else None
  t = Tokenizer(models.BPE(vocab=vocab, merges=_merges(tokens, added), unk_token=unk, fuse_unk=True,
                           byte_fallback=True))
  steps = [normalizers.Replace(" ", _SPACE)]
  if tok.get("ggml.add_space_prefix"):
    steps.insert(0, normalizers.Prepend(_SPACE))
  t.normalizer = normalizers.Sequence(steps)
  t.decoder = decoders.Sequence([decoders.Replace(_SPACE, " "), decoders.ByteFallback(), decoders.Fuse()])
  t.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False) for i in sorted(added)
                        if types[i] == _CONTROL])
  t.add_tokens([AddedToken(tokens[i], special=False, normalized=False) for i in sorted(added)
                if types[i] == _USER_DEFINED])
  bos = tok.get("ggml.bos_token_id")
  if tok.get("ggml.add_bos_token") and bos is not None:
    name = tokens[int(bos)]
    t.post_processor = processors.TemplateProcessing(single=f"{name}:0 $A:0", pair=f"{name}:0 $A:0 {name}:1 $B:1",
                                                     special_tokens=[(name, int(bos))])
  for i in sorted(added):
    if t.token_to_id(tokens[i]) != i:
      raise ValueError(f"tokenizer: added token {tokens[i]!r} maps to id {t.token_to_id(tokens[i])}, expected {i}")
  return t
