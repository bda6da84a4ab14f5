"""Gemma 3 (``Gemma3ForCausalLM``) on a tiny random transformers model: greedy decoding through the sampler's KV
cache past the sliding window, the layer-scanned forward, export back to transformers, and the config features
rljax refuses. Logits parity itself is a case of tests/test_models_hf.py.

References: transformers' (torch CPU, float32) forward and ``generate``; rljax's own uncached forward for the
sampler's per-token log-probs.
"""
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from rljax.models import config_from_hf, config_to_hf, from_pretrained, policy_outputs, save_pretrained  # noqa: E402
from rljax.sampling import SamplerConfig, generate  # noqa: E402

pytestmark = pytest.mark.hf  # transformers parity: a long guard (tests/conftest.py)

_WINDOW = 4
_CFG = dict(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, max_position_embeddings=256, sliding_window=_WINDOW,
            sliding_window_pattern=3, query_pre_attn_scalar=24, final_logit_softcapping=3.0,
            rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 50000.0},
                             "sliding_attention": {"rope_type": "default", "rope_theta": 100.0}})
_PROMPTS = [[2, 17, 99, 4, 250, 31, 8, 77, 5], [2, 60, 61], [2, 200, 13, 13, 13, 90, 1, 45, 3, 3, 120, 7]]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
  path = str(tmp_path_factory.mktemp("gemma3"))
  torch.manual_seed(0)
  hf = transformers.Gemma3ForCausalLM(transformers.Gemma3TextConfig(**_CFG)).eval()
  with torch.no_grad():  # non-trivial weights everywhere (norm scales included)
    for p in hf.parameters():
      p.add_(0.2 * torch.randn_like(p))
  hf.save_pretrained(path)
  return path, hf


def _hf_greedy(hf, prompt, new):
  with torch.no_grad():
    out = hf.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                      max_new_tokens=new, do_sample=False, min_new_tokens=new, eos_token_id=None, pad_token_id=0)
  return out[0, len(prompt):].tolist()


def test_config_is_the_gemma3_architecture(tiny):
  path, hf = tiny
  cfg = from_pretrained(path).cfg
  assert cfg.layer_types == tuple(hf.config.layer_types) == (
      "sliding_attention", "sliding_attention", "full_attention", "sliding_attention")
  assert (cfg.rope_theta, cfg.rope_local_theta, cfg.sliding_window) == (50000.0, 100.0, _WINDOW)
  assert cfg.qk_norm and cfg.sandwich_norm and cfg.norm_plus_one and cfg.embed_scale and cfg.tie_embeddings
  assert cfg.attn_scale == 24 ** -0.5 and cfg.final_logit_softcap == 3.0 and cfg.attn_logit_softcap is None


def test_greedy_tokens_and_kv_cache_across_the_sliding_window(tiny):
  """20 new tokens after prompts of 3-12 tokens with a window of 4: the cached decode is past the window from its
  first steps. Tokens equal transformers' ``generate``; the sampler's per-token log-probs equal rljax's uncached
  forward over the finished sequences (the cache is exact, not only the argmax)."""
  path, hf = tiny
  model = from_pretrained(path)
  new = 20
  rollout = generate(model, _PROMPTS, config=SamplerConfig(max_new_tokens=new, prompt_buckets=(16,)),
                     key=jax.random.PRNGKey(0), greedy=True)
  tokens = np.asarray(rollout.tokens)
  for row, prompt in enumerate(_PROMPTS):
    got = tokens[row, len(prompt):len(prompt) + new].tolist()
    assert got == _hf_greedy(hf, prompt, new), row
  assert len(set(map(tuple, tokens[:, -new:].tolist()))) > 1  # not one degenerate continuation
  full = policy_outputs(model, jnp.asarray(tokens))
  mask = np.asarray(rollout.completion_mask, bool)
  np.testing.assert_allclose(np.asarray(rollout.logp_behavior)[mask], np.asarray(full.logp)[mask], rtol=0, atol=2e-5)


def test_scanned_layers_equal_the_unrolled_loop(tiny):
  path, _ = tiny
  tokens = jnp.asarray(np.random.RandomState(1).randint(0, 256, (2, 12)), jnp.int32)
  a = from_pretrained(path)(tokens, return_logits=True).logits
  b = from_pretrained(path, scan_layers=True)(tokens, return_logits=True).logits
  np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=0, atol=1e-5)


def test_export_loads_as_gemma3_and_greedy_decodes_the_same(tiny, tmp_path):
  path, hf = tiny
  model = from_pretrained(path)
  out = str(tmp_path / "export")
  save_pretrained(model, out)
  with open(os.path.join(out, "config.json")) as f:
    written = json.load(f)
  assert written["architectures"] == ["Gemma3ForCausalLM"] and written["model_type"] == "gemma3_text"
  reloaded = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
  assert type(reloaded).__name__ == "Gemma3ForCausalLM"
  assert reloaded.config.layer_types == hf.config.layer_types
  tokens = torch.tensor(np.random.RandomState(2).randint(0, 256, (2, 12)))
  with torch.no_grad():
    np.testing.assert_allclose(reloaded(tokens).logits.numpy(), hf(tokens).logits.numpy(), rtol=0, atol=1e-5)
  for prompt in _PROMPTS:
    assert _hf_greedy(reloaded, prompt, 12) == _hf_greedy(hf, prompt, 12)
  assert from_pretrained(out).cfg == model.cfg


def test_config_round_trip_and_refusals(tiny):
  path, _ = tiny
  cfg = from_pretrained(path).cfg
  assert config_from_hf(config_to_hf(cfg)) == cfg
  with open(os.path.join(path, "config.json")) as f:
    hf = json.load(f)
  for key, value, match in (("use_bidirectional_attention", True, "use_bidirectional_attention"),
                            ("attn_logit_softcapping", 50.0, "attn_logit_softcapping=50.0"),
                            ("vision_config", {"hidden_size": 8}, "vision_config")):
    with pytest.raises(ValueError, match=match):
      config_from_hf({**hf, key: value})
  scaled_local = {**hf, "rope_parameters": {**hf["rope_parameters"],
                                            "sliding_attention": {"rope_type": "linear", "factor": 2.0}}}
  with pytest.raises(ValueError, match="sliding_attention.rope_type='linear'"):
    config_from_hf(scaled_local)
  old_style = {k: v for k, v in hf.items() if k != "rope_parameters"}
  old_style.update(rope_theta=1e6, rope_local_base_freq=10000.0)
  assert (config_from_hf(old_style).rope_theta, config_from_hf(old_style).rope_local_theta) == (1e6, 1e4)
  with pytest.raises(ValueError, match="rope_local_theta"):
    cfg.replace(rope_local_theta=0.0)
