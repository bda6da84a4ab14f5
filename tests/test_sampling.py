"""Tests for rljax.sampling (issue #5): greedy vs uncached argmax, log-probs vs
the training forward, chi-square of the sampled distribution, no recompiles,
bad input, reproducibility, stop tokens/strings, continuation, MoE routing."""
import dataclasses
import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from scipy import stats

from rljax.models import ModelConfig, Transformer, policy_outputs
from rljax.sampling import (FinishReason, SamplerConfig, generate, resume, top_k_mask, top_p_mask,
                            truncate_at_stop_strings, truncation_mask)

PROMPTS = [[1, 2, 3], [4, 5, 6, 7, 8], [9]]
M = 6
CFG = SamplerConfig(max_new_tokens=M, prompt_buckets=(8, 16), cache_size=40)


@pytest.fixture(scope="module")
def model():
  return Transformer(ModelConfig.tiny(), rngs=nnx.Rngs(0))


def _policy_outputs(model, tokens):
  """``policy_outputs`` under jit (eager dispatch is slow on a busy CPU)."""
  graphdef, state = nnx.split(model)
  return jax.jit(lambda s, t: policy_outputs(nnx.merge(graphdef, s), t))(state, tokens)


_FNS = {}


def _uncached_logits_fn(model):
  """Jitted uncached forward (cached per model so repeated calls do not retrace)."""
  if id(model) in _FNS:
    return _FNS[id(model)][1]
  graphdef, state = nnx.split(model)

  @jax.jit
  def f(tokens):  # [B, T] left-aligned, positions arange(T)
    return nnx.merge(graphdef, state)(tokens, return_logits=True).logits

  _FNS[id(model)] = (model, f)  # keep the model alive so its id is not reused
  return f


# ---------------------------------------------------------------- references


def _ref_probs(z, temperature, k, p, min_p):
  """float64 sort-based reference of softmax(trunc(z / T)) for one row."""
  zt = np.asarray(z, np.float64) / temperature
  keep = np.ones(zt.shape, bool)
  if k > 0:
    keep &= zt >= np.sort(zt)[::-1][k - 1]
  q = np.exp(zt - zt.max())
  if p < 1:
    qk = np.where(keep, q, 0.0)
    probs = qk / qk.sum()
    order = np.argsort(-probs, kind="stable")
    before = np.cumsum(probs[order]) - probs[order]
    keep_p = np.zeros_like(keep)
    keep_p[order] = before < p
    keep &= keep_p
  keep &= q >= min_p * q.max()
  out = np.where(keep, q, 0.0)
  return out / out.sum()


# ---------------------------------------------------------------- truncation


@pytest.mark.parametrize("jit", [False, True])
def test_truncation_mask_matches_sort_reference(jit):
  rng = np.random.default_rng(0)
  z = rng.normal(size=(6, 50)).astype(np.float32) * 3
  k = np.array([0, 1, 5, 0, 50, 7], np.int32)
  p = np.array([1.0, 0.5, 0.9, 0.3, 0.999, 1.0], np.float32)
  mp = np.array([0.0, 0.0, 0.01, 0.0, 0.2, 0.05], np.float32)
  t = np.array([1.0, 0.7, 1.3, 2.0, 0.5, 1.0], np.float32)
  fn = jax.jit(truncation_mask) if jit else truncation_mask
  got = np.asarray(fn(jnp.asarray(z / t[:, None]), k, p, mp))
  for b in range(z.shape[0]):
    want = _ref_probs(z[b], t[b], k[b], p[b], mp[b]) > 0
    np.testing.assert_array_equal(got[b], want, err_msg=f"row {b}")


def test_top_k_keeps_ties_and_handles_inf():
  z = jnp.array([[3.0, 1.0, 3.0, -jnp.inf, 2.0, -5.0]])
  np.testing.assert_array_equal(top_k_mask(z, jnp.array([1])), [[1, 0, 1, 0, 0, 0]])
  np.testing.assert_array_equal(top_k_mask(z, jnp.array([3])), [[1, 0, 1, 0, 1, 0]])
  np.testing.assert_array_equal(top_k_mask(z, jnp.array([6])), [[1, 1, 1, 1, 1, 1]])
  np.testing.assert_array_equal(top_k_mask(z, jnp.array([0])), [[1, 1, 1, 1, 1, 1]])


def test_top_p_hand_example():
  q = jnp.array([[0.5, 0.3, 0.15, 0.05]])  # mass before each: 0, .5, .8, .95
  for p, want in [(0.5, [1, 0, 0, 0]), (0.51, [1, 1, 0, 0]), (0.8, [1, 1, 0, 0]),
                  (0.81, [1, 1, 1, 0]), (1.0, [1, 1, 1, 1])]:
    np.testing.assert_array_equal(top_p_mask(q, jnp.array([p], jnp.float32)), [want], err_msg=str(p))


# ---------------------------------------------------------------- model level


def _greedy_reference(model, prompt, steps):
  """Step-by-step argmax of the uncached forward (full recompute every step)."""
  f = _uncached_logits_fn(model)
  seq = list(prompt)
  for _ in range(steps):
    buf = np.zeros((1, 32), np.int32)
    buf[0, :len(seq)] = seq
    seq.append(int(np.argmax(np.asarray(f(buf))[0, len(seq) - 1])))
  return seq


def test_greedy_equals_uncached_argmax(model):
  r = generate(model, PROMPTS, config=CFG, key=jax.random.key(0), greedy=True)
  for i, p in enumerate(PROMPTS):
    seq = _greedy_reference(model, p, M)
    np.testing.assert_array_equal(np.asarray(r.tokens[i, :len(seq)]), seq)
    np.testing.assert_array_equal(np.asarray(r.prompt_mask[i]), np.arange(8 + M) < len(p))
    np.testing.assert_array_equal(np.asarray(r.completion_mask[i]),
                                  (np.arange(8 + M) >= len(p)) & (np.arange(8 + M) < len(seq)))
  assert np.all(np.asarray(r.finish_reason) == FinishReason.LENGTH)
  assert r.tokens.shape == (3, 8 + M)


def test_logprobs_equal_training_forward_and_reference(model):
  n = 2
  kw = dict(temperature=np.array([0.7, 1.0, 1.5], np.float32), top_k=np.array([0, 10, 20]),
            top_p=np.array([0.9, 1.0, 0.8], np.float32), min_p=np.array([0.0, 0.05, 0.0], np.float32))
  r = generate(model, PROMPTS, config=CFG, key=jax.random.key(1), n=n, **kw)
  assert r.tokens.shape == (3 * n, 8 + M)
  np.testing.assert_array_equal(r.group_id, np.repeat(np.arange(3), n))
  po = _policy_outputs(model, r.tokens)
  cm = np.asarray(r.completion_mask)
  assert cm.sum() == 3 * n * M
  diff = np.abs(np.where(cm, np.asarray(po.logp) - np.asarray(r.logp_behavior), 0)).max()
  assert diff <= 1e-5, diff
  ent = np.abs(np.where(cm, np.asarray(po.entropy) - np.asarray(r.entropy_behavior), 0)).max()
  assert ent <= 1e-5, ent
  assert np.all(np.asarray(r.logp_behavior)[~cm] == 0)
  # logp_sampling against a float64 sort-based truncation of the uncached logits.
  logits = np.asarray(_uncached_logits_fn(model)(np.asarray(r.tokens)))
  for b in range(r.tokens.shape[0]):
    g = b // n
    for t in np.flatnonzero(cm[b]):
      probs = _ref_probs(logits[b, t - 1], kw["temperature"][g], kw["top_k"][g], kw["top_p"][g], kw["min_p"][g])
      tok = int(r.tokens[b, t])
      assert probs[tok] > 0, (b, t)
      np.testing.assert_allclose(float(r.logp_sampling[b, t]), np.log(probs[tok]), atol=2e-5)


def test_chi_square_sampled_distribution():
  model = Transformer(ModelConfig.tiny(vocab_size=16), rngs=nnx.Rngs(3))
  cfg = SamplerConfig(max_new_tokens=1, prompt_buckets=(4,))
  prompt = [3, 1, 4]
  n = 4000
  logits = np.asarray(_uncached_logits_fn(model)(np.array([prompt], np.int32)))[0, -1]
  for case, (t, k, p) in enumerate([(0.8, 8, 0.9), (1.5, 0, 0.7)]):
    r = generate(model, [prompt], config=cfg, key=jax.random.key(10 + case), n=n,
                 temperature=t, top_k=k, top_p=p)
    first = np.asarray(r.tokens[:, 3])
    probs = _ref_probs(logits, t, k, p, 0.0)
    kept = probs > 0
    assert 2 <= kept.sum() < 16, kept.sum()  # the truncation is non-trivial
    counts = np.bincount(first, minlength=16)
    assert counts[~kept].sum() == 0  # never samples a truncated token
    _, pval = stats.chisquare(counts[kept], n * probs[kept])
    assert pval > 1e-3, (case, pval, counts, n * probs)


def test_no_recompile_for_new_length_in_bucket_and_new_temperature(model):
  compiles = []
  listener = lambda name, secs, **kw: compiles.append(name) if name == "/jax/core/compile/backend_compile_duration" else None
  key = jax.random.key(2)
  r = generate(model, PROMPTS, config=CFG, key=key, n=2, temperature=0.5, top_p=0.9)
  r.tokens.block_until_ready()
  jax.monitoring.register_event_duration_secs_listener(listener)
  try:
    r = generate(model, [[5, 6, 7, 8, 9, 10, 11], [1, 2, 3, 4], [5, 6]], config=CFG, key=jax.random.key(3),
                 n=2, temperature=[1.3, 0.2, 0.9], top_k=5, top_p=0.7, min_p=0.1, max_new_tokens=3,
                 stop_tokens=[[1, 2], [7], []], policy_version=4)
    r.tokens.block_until_ready()
  finally:
    jax.monitoring.unregister_event_duration_listener(listener)
  assert compiles == [], compiles
  assert np.asarray(r.completion_mask).sum(axis=1).max() <= 3
  np.testing.assert_array_equal(r.policy_version, [4] * 6)


def test_listener_sees_compiles(model):
  """The compile counter used above does fire on a real compilation."""
  compiles = []
  listener = lambda name, secs, **kw: compiles.append(name) if name == "/jax/core/compile/backend_compile_duration" else None
  jax.monitoring.register_event_duration_secs_listener(listener)
  try:
    jax.jit(lambda x: x * 3 + 1)(jnp.arange(7.0)).block_until_ready()
  finally:
    jax.monitoring.unregister_event_duration_listener(listener)
  assert compiles


@pytest.mark.parametrize("kwargs, name", [
    (dict(prompts=[[1, 2], []]), "prompts"),
    (dict(prompts=[]), "prompts"),
    (dict(prompts=[list(range(17))]), "prompts"),
    (dict(n=0), "n"),
    (dict(top_p=0.0), "top_p"),
    (dict(top_p=1.5), "top_p"),
    (dict(temperature=0.0), "temperature"),
    (dict(temperature=-1.0), "temperature"),
    (dict(min_p=2.0), "min_p"),
    (dict(top_k=-1), "top_k"),
    (dict(max_new_tokens=M + 1), "max_new_tokens"),
    (dict(stop_tokens=[list(range(9))]), "stop_tokens"),
])
def test_bad_input_raises_naming_argument(model, kwargs, name):
  args = dict(prompts=[[1, 2]], n=1)
  args.update(kwargs)
  prompts = args.pop("prompts")
  with pytest.raises(ValueError, match=name):
    generate(model, prompts, config=CFG, key=jax.random.key(0), **args)


def test_greedy_allows_zero_temperature(model):
  r = generate(model, PROMPTS, config=CFG, key=jax.random.key(0), temperature=0.0, greedy=True)
  assert np.all(np.asarray(r.logp_sampling) == 0)


def test_sampler_config_validation():
  with pytest.raises(ValueError, match="max_new_tokens"):
    SamplerConfig(max_new_tokens=0)
  with pytest.raises(ValueError, match="prompt_buckets"):
    SamplerConfig(prompt_buckets=(32, 16))
  with pytest.raises(ValueError, match="cache_size"):
    SamplerConfig(max_new_tokens=8, prompt_buckets=(8,), cache_size=10)
  with pytest.raises(ValueError, match="decode_phases"):
    SamplerConfig(decode_phases=0)
  with pytest.raises(ValueError, match="concurrent_chunks"):
    SamplerConfig(concurrent_chunks=0)
  with pytest.raises(ValueError, match="decode_weights.*'auto', 'stored' or 'transposed'"):
    SamplerConfig(decode_weights="column_major")
  assert SamplerConfig(max_new_tokens=8, prompt_buckets=(8, 16)).cache_size == 24
  assert hash(CFG) == hash(SamplerConfig(max_new_tokens=M, prompt_buckets=(8, 16), cache_size=40))


def test_reproducible_and_independent_of_batch_composition(model):
  kw = dict(config=CFG, n=2, temperature=1.0, top_p=0.95)
  a = generate(model, PROMPTS, key=jax.random.key(5), **kw)
  b = generate(model, PROMPTS, key=jax.random.key(5), **kw)
  np.testing.assert_array_equal(a.tokens, b.tokens)
  # Reordered batch, same prompt ids: each (prompt, sample) gets the same tokens.
  order = [2, 0, 1]
  c = generate(model, [PROMPTS[i] for i in order], key=jax.random.key(5), prompt_ids=order, **kw)
  for j, i in enumerate(order):
    np.testing.assert_array_equal(c.tokens[2 * j:2 * j + 2], a.tokens[2 * i:2 * i + 2])
  np.testing.assert_array_equal(c.group_id, np.repeat(order, 2))
  # Samples of one group differ (independent keys), a new key changes them.
  assert not np.array_equal(a.tokens[0], a.tokens[1])
  d = generate(model, PROMPTS, key=jax.random.key(6), **kw)
  assert not np.array_equal(a.tokens, d.tokens)


def test_per_sequence_stop_tokens(model):
  g = generate(model, PROMPTS, config=CFG, key=jax.random.key(0), greedy=True)
  # Stop row 0 at its 3rd greedy token and row 2 at its 1st; row 1 has no stop hit.
  stop0 = int(g.tokens[0, len(PROMPTS[0]) + 2])
  stop2 = int(g.tokens[2, len(PROMPTS[2])])
  first0 = list(np.asarray(g.tokens[0, 3:3 + M])).index(stop0)
  r = generate(model, PROMPTS, config=CFG, key=jax.random.key(0), greedy=True,
               stop_tokens=[[stop0], [], [stop2]])
  lens = np.asarray(r.completion_mask).sum(axis=1)
  np.testing.assert_array_equal(lens, [first0 + 1, M, 1])
  np.testing.assert_array_equal(r.finish_reason, [FinishReason.STOP_TOKEN, FinishReason.LENGTH, FinishReason.STOP_TOKEN])
  assert int(r.tokens[0, 3 + first0]) == stop0 and int(r.tokens[0, 4 + first0]) == CFG.pad_id


def test_stop_strings_on_host(model):
  r = generate(model, PROMPTS, config=CFG, key=jax.random.key(0), greedy=True)
  detok = lambda ids: "".join(chr(97 + t % 26) for t in ids)
  comp = [np.asarray(r.tokens[b])[np.asarray(r.completion_mask[b])].tolist() for b in range(3)]
  stop = detok(comp[1][2:4])  # a 2-token stop string inside row 1's completion
  out = truncate_at_stop_strings(r, [stop], detok)
  text = detok(comp[1])
  j = next(j for j in range(1, M + 1) if stop in detok(comp[1][:j]))
  assert stop in text
  assert int(np.asarray(out.completion_mask[1]).sum()) == j
  assert int(out.finish_reason[1]) == FinishReason.STOP_STRING
  for b in (0, 2):
    if stop not in detok(comp[b]):
      np.testing.assert_array_equal(out.tokens[b], r.tokens[b])
  cut = np.asarray(out.completion_mask[1])
  np.testing.assert_array_equal(np.asarray(out.logp_behavior[1])[~cut], 0)


def test_resume_reuses_prefix_and_matches_forward(model):
  n = 2
  # top_k=1 is greedy through the sampling path (shares the compiled sampler).
  r1, st = generate(model, PROMPTS, config=CFG, key=jax.random.key(0), n=n, top_k=1, return_state=True)
  appended = [[11, 12], [13], [14, 15, 16], [], [17], [18, 19]]
  r2, st = resume(model, st, appended, config=CFG, key=jax.random.key(1), top_k=1)
  assert r2.tokens.shape == (6, CFG.cache_size)
  # Greedy resume == greedy decoding of the concatenated sequence from scratch.
  for b in range(6):
    prompt = PROMPTS[b // n]
    turn1 = np.asarray(r1.tokens[b])[np.asarray(r1.completion_mask[b])].tolist()
    full = list(prompt) + turn1 + appended[b]
    ref = _greedy_reference(model, list(prompt), M)
    assert ref == list(prompt) + turn1
    ref = _greedy_reference(model, full, M)
    np.testing.assert_array_equal(np.asarray(r2.tokens[b, :len(ref)]), ref)
    pm = np.asarray(r2.prompt_mask[b])
    assert pm[:len(prompt)].all() and pm[len(full) - len(appended[b]):len(full)].all()
    assert pm.sum() == len(prompt) + len(appended[b])
    assert np.asarray(r2.completion_mask[b]).sum() == 2 * M
  # A sampled third turn; every sampled token's log-prob equals the training forward.
  r3, st = resume(model, st, [[5], [], [], [6, 7], [], []], config=CFG, key=jax.random.key(2),
                  temperature=1.2, top_k=30, top_p=0.95)
  cm = np.asarray(r3.completion_mask)
  assert cm.sum() == 6 * 3 * M
  po = _policy_outputs(model, r3.tokens)
  diff = np.abs(np.where(cm, np.asarray(po.logp) - np.asarray(r3.logp_behavior), 0)).max()
  assert diff <= 1e-5, diff
  with pytest.raises(ValueError, match="appended"):
    resume(model, st, [list(range(30))] + [[]] * 5, config=CFG, key=jax.random.key(3))
  with pytest.raises(ValueError, match="appended"):
    resume(model, st, [[1]] * 6, config=CFG, key=jax.random.key(3), active=[False] + [True] * 5)


def test_cache_overflow_error_names_the_cache_size_that_fits(model):
  """The default cache fits one turn; the resume error names SamplerConfig(cache_size=N), and N fits."""
  import re  # pylint: disable=import-outside-toplevel
  small = SamplerConfig(max_new_tokens=M, prompt_buckets=(8,))
  assert small.cache_size == 8 + M
  _, st = generate(model, PROMPTS, config=small, key=jax.random.key(0), return_state=True)
  with pytest.raises(ValueError, match=r"SamplerConfig\(cache_size=\d+\)") as err:
    resume(model, st, [[11]] * 3, config=small, key=jax.random.key(1))
  need = int(re.search(r"cache_size=(\d+)", str(err.value)).group(1))
  assert need == int(st.slot) + 8 + M  # used slots + the appended chunk's bucket + max_new_tokens
  fits = SamplerConfig(max_new_tokens=M, prompt_buckets=(8,), cache_size=need)
  _, st = generate(model, PROMPTS, config=fits, key=jax.random.key(0), return_state=True)
  r2, _ = resume(model, st, [[11]] * 3, config=fits, key=jax.random.key(1))
  assert r2.tokens.shape == (3, need)
  # a prompt whose bucket does not fit an explicitly small cache: 16 + M slots needed
  tight = SamplerConfig(max_new_tokens=M, prompt_buckets=(8, 16), cache_size=8 + M)
  with pytest.raises(ValueError, match=rf"SamplerConfig\(cache_size={16 + M}\) or larger"):
    generate(model, [[1] * 9], config=tight, key=jax.random.key(0))


@pytest.mark.slow  # compiles a MoE model (about a minute on a busy 2-core CPU)
def test_moe_routing_matches_training_forward():
  model = Transformer(ModelConfig.tiny_moe(), rngs=nnx.Rngs(1))
  cfg = SamplerConfig(max_new_tokens=3, prompt_buckets=(8,))
  r = generate(model, [[1, 2, 3], [4, 5, 6, 7, 8, 9]], config=cfg, key=jax.random.key(0), n=2)
  po = _policy_outputs(model, r.tokens)
  assert r.routing is not None and r.routing.shape == po.routing.shape
  fed = np.array(r.prompt_mask | r.completion_mask)
  last = fed.sum(axis=1) - 1  # the last sampled token is never fed forward
  fed[np.arange(fed.shape[0]), last] = False
  np.testing.assert_array_equal(np.asarray(r.routing)[fed], np.asarray(po.routing)[fed])
  cm = np.asarray(r.completion_mask)
  diff = np.abs(np.where(cm, np.asarray(po.logp) - np.asarray(r.logp_behavior), 0)).max()
  assert diff <= 1e-5, diff


def test_decode_step_equals_cached_call():
  """``Transformer.decode_step`` (per-layer head-major cache, used by the decode
  loop) == the stacked-cache ``__call__`` with T = 1, on a Gemma-2-like model
  (GQA, sliding window, attention/final soft-caps, sandwich norms) with masked
  slot gaps."""
  from rljax.models import KVCache
  cfg = ModelConfig.tiny(layer_types=("sliding_attention", "full_attention"), sliding_window=3,
                         attn_logit_softcap=5.0, final_logit_softcap=30.0, sandwich_norm=True)
  model = Transformer(cfg, rngs=nnx.Rngs(4))
  graphdef, state = nnx.split(model)
  b, s = 2, 12
  rng = np.random.default_rng(0)
  tok = jnp.asarray(rng.integers(0, 128, (b, 6)), jnp.int32)
  kv_mask = jnp.asarray(np.arange(s)[None] < np.array([[6], [4]]))  # row 1: slots 4, 5 masked
  kv_mask = kv_mask.at[:, 6].set(True)

  @jax.jit
  def f(state):
    m = nnx.merge(graphdef, state)
    out = m(tok, jnp.broadcast_to(jnp.arange(6), (b, 6)), cache=m.init_cache(b, s), cache_index=0,
            kv_mask=kv_mask)
    new, pos = tok[:, :1] + 1, jnp.array([[6], [4]], jnp.int32)
    ref = m(new, pos, cache=out.cache, cache_index=6, kv_mask=kv_mask)
    split = lambda x: tuple(x[i].transpose(0, 2, 1, 3) for i in range(cfg.num_layers))  # [B, K, S, D]
    hid, ks, vs, _ = m.decode_step(new, pos, split(out.cache.k), split(out.cache.v), 6, kv_mask)
    got = KVCache(jnp.stack(ks).transpose(0, 1, 3, 2, 4), jnp.stack(vs).transpose(0, 1, 3, 2, 4))
    return ref.hidden, hid, ref.cache, got

  ref_h, got_h, ref_c, got_c = f(state)
  np.testing.assert_allclose(np.asarray(got_h), np.asarray(ref_h), atol=1e-5, rtol=0)
  np.testing.assert_allclose(np.asarray(got_c.k), np.asarray(ref_c.k), atol=1e-6, rtol=0)
  np.testing.assert_allclose(np.asarray(got_c.v), np.asarray(ref_c.v), atol=1e-6, rtol=0)


@pytest.mark.long
def test_generate_logprobs_equal_forward_on_gemma_like_model():
  """``generate`` (prefill into a prompt-sized cache, padded into the per-layer
  decode layout, repeated to n rows) == the training forward on a model with
  GQA, a sliding window shorter than the prompts, soft-caps and sandwich norms;
  prompts of different lengths in one bucket, then ``resume`` on top."""
  cfg = ModelConfig.tiny(layer_types=("sliding_attention", "full_attention"), sliding_window=3,
                         attn_logit_softcap=5.0, final_logit_softcap=30.0, sandwich_norm=True)
  model = Transformer(cfg, rngs=nnx.Rngs(5))
  r, st = generate(model, PROMPTS, config=CFG, key=jax.random.key(2), n=2, return_state=True)
  cm = np.asarray(r.completion_mask)
  assert cm.sum() == 3 * 2 * M
  po = _policy_outputs(model, r.tokens)
  diff = np.abs(np.where(cm, np.asarray(po.logp) - np.asarray(r.logp_behavior), 0)).max()
  assert diff <= 1e-5, diff
  r2, _ = resume(model, st, [[3, 4]] * 6, config=CFG, key=jax.random.key(3))
  cm2 = np.asarray(r2.completion_mask)
  assert cm2.sum() == 3 * 2 * 2 * M
  po2 = _policy_outputs(model, r2.tokens)
  diff2 = np.abs(np.where(cm2, np.asarray(po2.logp) - np.asarray(r2.logp_behavior), 0)).max()
  assert diff2 <= 1e-5, diff2


def test_argmax_last_equals_argmax_with_ties_and_inf():
  from rljax.sampling._step import _argmax_last
  rng = np.random.default_rng(0)
  x = rng.integers(-3, 3, size=(200, 37)).astype(np.float32)  # many ties
  x[5] = -np.inf
  x[5, 7] = 0.0
  x[6, :] = -np.inf
  x[6, 30] = np.inf
  x[6, 31] = np.inf
  got = np.asarray(jax.jit(_argmax_last)(jnp.asarray(x)))
  np.testing.assert_array_equal(got, np.argmax(x, axis=-1))
  assert got.dtype == np.int32


@pytest.mark.long
def test_decode_phases_equal_one_loop():
  """The phased decode loop (each phase attends a cache prefix just long enough for its steps)
  gives the same tokens, log-probs, entropies and state as one loop over the whole cache: prompts
  of different lengths, a sliding-window layer, rows stopping in the first phase, then resume."""
  from rljax.sampling._decode import decode_phase_ends
  assert decode_phase_ends(15, 48, 4) == (31, 47, 63)  # at most one phase per 16 new tokens
  assert decode_phase_ends(7, 32, 4) == (23, 39)
  assert decode_phase_ends(3, 8, 4) == (11,)
  assert decode_phase_ends(0, 50, 3) == (17, 34, 50)
  cfg = ModelConfig.tiny(layer_types=("sliding_attention", "full_attention"), sliding_window=5)
  model = Transformer(cfg, rngs=nnx.Rngs(7))
  base = SamplerConfig(max_new_tokens=32, prompt_buckets=(8,), cache_size=80)
  kw = dict(key=jax.random.key(4), n=2, temperature=1.0)
  g = generate(model, PROMPTS, config=base, **kw)
  stop = [[int(g.tokens[0, len(PROMPTS[0]) + 4])], [], []]  # row 0 stops in the first phase
  out = {}
  for phases in (1, 2):
    c = dataclasses.replace(base, decode_phases=phases)
    r, st = generate(model, PROMPTS, config=c, stop_tokens=stop, return_state=True, **kw)
    assert st.cache.k.shape[2] == base.cache_size and st.kv_mask.shape[1] == base.cache_size
    r2, _ = resume(model, st, [[3]] * 6, config=c, key=jax.random.key(5), max_new_tokens=4)
    out[phases] = (r, st, r2)
  (a, sa, a2), (b, sb, b2) = out[1], out[2]
  assert int(np.asarray(a.completion_mask[0]).sum()) == 5  # the stop fired during phase one
  np.testing.assert_array_equal(a.tokens, b.tokens)
  np.testing.assert_array_equal(a.completion_mask, b.completion_mask)
  np.testing.assert_array_equal(a.finish_reason, b.finish_reason)
  for name in ("logp_behavior", "logp_sampling", "entropy_behavior"):  # equal up to float32 summation order
    np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=2e-6, atol=1e-6)
  np.testing.assert_array_equal(sa.kv_mask, sb.kv_mask)
  np.testing.assert_allclose(sa.cache.k, sb.cache.k, rtol=0, atol=1e-6)
  np.testing.assert_array_equal(a2.tokens, b2.tokens)
  cm = np.asarray(b.completion_mask)
  po = _policy_outputs(model, b.tokens)
  assert np.abs(np.where(cm, np.asarray(po.logp) - np.asarray(b.logp_behavior), 0)).max() <= 1e-5


@pytest.mark.long
def test_concurrent_chunks_equal_one_call(model, monkeypatch):
  """``concurrent_chunks``: the prompts are decoded as separate calls on host threads, and the
  concatenated rollout equals one call's (tokens, masks, ids exactly; log-probs up to float32
  summation order) with per-prompt sampling parameters, stop tokens, prompt ids and versions."""
  import threading
  from rljax.sampling import _sampler
  prompts = PROMPTS + [[10, 11], [12, 13, 14, 15]]
  kw = dict(key=jax.random.key(9), n=2, temperature=[1.0, 0.7, 1.3, 1.0, 0.9], top_k=[0, 5, 0, 3, 0],
            prompt_ids=[40, 41, 42, 43, 44], policy_version=[1, 2, 3, 4, 5])
  free = generate(model, prompts, config=CFG, **kw)
  third = lambda row: int(free.tokens[row, len(prompts[row // 2]) + 2])  # a token each row samples
  kw["stop_tokens"] = [[third(0)], [], [third(4), 0], [], [third(8)]]
  one = generate(model, prompts, config=CFG, **kw)
  calls = []
  real = _sampler._generate_jit

  def spy(graphdef, params, prompt, *args, **kwargs):
    calls.append((prompt.shape[0], threading.get_ident(), kwargs["config"].concurrent_chunks))
    return real(graphdef, params, prompt, *args, **kwargs)

  monkeypatch.setattr(_sampler, "_generate_jit", spy)
  for chunks, sizes in ((2, [2, 3]), (3, [2, 1, 2]), (9, [1] * 5)):
    calls.clear()
    got = generate(model, prompts, config=dataclasses.replace(CFG, concurrent_chunks=chunks), **kw)
    assert sorted(c[0] for c in calls) == sorted(sizes)  # one call per chunk of whole prompts
    threads = {c[1] for c in calls}  # the calling thread and pool threads (which may be reused by chunks
    assert len(threads) == 2 if chunks == 2 else len(threads) > 1  # that start after another one ended)
    assert {c[2] for c in calls} == {1}  # the compiled program does not depend on the chunk count
    for name in ("tokens", "prompt_mask", "completion_mask", "group_id", "policy_version", "finish_reason"):
      np.testing.assert_array_equal(getattr(got, name), getattr(one, name), err_msg=name)
    for name in ("logp_behavior", "logp_sampling", "entropy_behavior"):
      np.testing.assert_allclose(getattr(got, name), getattr(one, name), rtol=2e-6, atol=2e-6, err_msg=name)
  assert set(np.asarray(one.finish_reason).tolist()) == {0, 1}  # some rows stopped, some ran to the limit
  calls.clear()  # a state for resume cannot be split: one call
  r, st = generate(model, prompts, config=dataclasses.replace(CFG, concurrent_chunks=2), return_state=True, **kw)
  assert [c[:1] for c in calls] == [(5,)] and st.pending.shape == (10,)
  np.testing.assert_array_equal(r.tokens, one.tokens)
  # default prompt ids; greedy (n = 2: the programs of the chunks above, one more for greedy)
  for extra in (dict(temperature=0.8), dict(greedy=True, temperature=0.0)):
    one = generate(model, prompts, config=CFG, key=jax.random.key(2), n=2, **extra)
    got = generate(model, prompts, config=dataclasses.replace(CFG, concurrent_chunks=2), key=jax.random.key(2),
                   n=2, **extra)
    np.testing.assert_array_equal(got.tokens, one.tokens)
    np.testing.assert_array_equal(got.group_id, np.repeat(np.arange(5), 2))
    np.testing.assert_allclose(got.logp_behavior, one.logp_behavior, rtol=2e-6, atol=2e-6)


def test_common_prefix_prefilled_once_equals_whole_prefill(monkeypatch):
  """``SamplerConfig.common_prefix``: prompts that all start with it have it prefilled once per call and copied
  to every prompt's cache; the rollout equals the whole-prompt prefill's (tokens, masks exactly; log-probs and
  entropies up to float32 summation order), on a model whose sliding window (3) is shorter than the common
  part (4), with prompts of different lengths, sampled rows and the state that ``resume`` continues. Prompts
  that do not all start with it (or are not longer than it) are prefilled whole."""
  from rljax.sampling import _sampler
  cfg = ModelConfig.tiny(layer_types=("sliding_attention", "full_attention"), sliding_window=3)
  model = Transformer(cfg, rngs=nnx.Rngs(11))
  common = (7, 3, 9, 2)
  prompts = [list(common) + [5], list(common) + [1, 8, 6], list(common) + [4, 4]]
  base = SamplerConfig(max_new_tokens=M, prompt_buckets=(8, 16), cache_size=40)
  kw = dict(key=jax.random.key(6), n=2, temperature=1.0)
  seen = []
  real = _sampler._generate_jit

  def spy(*args, **kwargs):
    seen.append(kwargs["config"].common_prefix)
    return real(*args, **kwargs)

  monkeypatch.setattr(_sampler, "_generate_jit", spy)
  a, sa = generate(model, prompts, config=base, return_state=True, **kw)
  b, sb = generate(model, prompts, config=dataclasses.replace(base, common_prefix=common), return_state=True, **kw)
  assert seen == [(), common]
  for name in ("tokens", "prompt_mask", "completion_mask", "finish_reason"):
    np.testing.assert_array_equal(getattr(b, name), getattr(a, name), err_msg=name)
  for name in ("logp_behavior", "logp_sampling", "entropy_behavior"):
    np.testing.assert_allclose(getattr(b, name), getattr(a, name), rtol=2e-6, atol=2e-6, err_msg=name)
  cm = np.asarray(b.completion_mask)
  po = _policy_outputs(model, b.tokens)
  assert np.abs(np.where(cm, np.asarray(po.logp) - np.asarray(b.logp_behavior), 0)).max() <= 1e-5
  ra, _ = resume(model, sa, [[3, 4]] * 6, config=base, key=jax.random.key(3))
  rb, _ = resume(model, sb, [[3, 4]] * 6, config=base, key=jax.random.key(3))
  np.testing.assert_array_equal(rb.tokens, ra.tokens)
  np.testing.assert_allclose(rb.logp_behavior, ra.logp_behavior, rtol=2e-6, atol=2e-6)
  seen.clear()

  class Seen(Exception):
    pass

  def record(*args, **kwargs):  # the program each call would compile, without compiling it
    seen.append(kwargs["config"].common_prefix)
    raise Seen

  monkeypatch.setattr(_sampler, "_generate_jit", record)
  with_common = dataclasses.replace(base, common_prefix=common)
  for other in ([7, 3, 8, 2, 1], list(common), list(common) + [2]):  # differs in token 2; no token of its own; fits
    with pytest.raises(Seen):
      generate(model, prompts + [other], config=with_common, **kw)
  assert seen == [(), (), common]
  with pytest.raises(ValueError, match="common_prefix"):
    SamplerConfig(common_prefix=(1, -2))


@pytest.mark.parametrize("overrides", [dict(), dict(tie_embeddings=True, qkv_bias=True),
                                       dict(sandwich_norm=True, sliding_window=3, final_logit_softcap=5.0)])
def test_decode_weights_transposed_equals_stored(overrides):
  """``SamplerConfig.decode_weights``: the decode loop on ``[out, in]`` copies of the weights (the head: the tied
  embedding itself, or ``lm_head.T``) gives the stored layout's tokens and masks exactly and its log-probs and
  entropies up to float32 summation order, in ``generate`` (greedy and sampled) and in ``resume``."""
  model = Transformer(ModelConfig.tiny(**overrides), rngs=nnx.Rngs(3))
  cfgs = {m: dataclasses.replace(CFG, decode_weights=m) for m in ("stored", "transposed")}
  for kw in (dict(greedy=True, temperature=0.0), dict(temperature=1.0, top_p=0.9, n=2)):
    out = {}
    for m, c in cfgs.items():
      r, st = generate(model, PROMPTS, config=c, key=jax.random.key(4), return_state=True, **kw)
      r2, _ = resume(model, st, [[5, 6]] * st.pending.shape[0], config=c, key=jax.random.key(5))
      out[m] = (r, r2)
    for a, b in zip(out["stored"], out["transposed"]):
      for name in ("tokens", "prompt_mask", "completion_mask", "finish_reason"):
        np.testing.assert_array_equal(getattr(b, name), getattr(a, name), err_msg=name)
      for name in ("logp_behavior", "logp_sampling", "entropy_behavior"):
        np.testing.assert_allclose(getattr(b, name), getattr(a, name), rtol=1e-5, atol=1e-5, err_msg=name)


def test_decode_weights_auto_and_what_is_transposed(monkeypatch):
  """``"auto"`` resolves to ``"transposed"`` on CPU for a small float32 model and to ``"stored"`` above the size
  limit or with 16-bit weights;
  ``Block.decode_weights`` holds the transposed fused weights, and leaves out projections with an unmerged LoRA
  adapter (they run as stored)."""
  from rljax.models import LoRAConfig
  from rljax.sampling import _host
  model = Transformer(ModelConfig.tiny(), rngs=nnx.Rngs(0))
  _, params = nnx.split(model)
  assert _host._compiled_config(CFG, params, None).decode_weights == "transposed"
  assert _host._compiled_config(dataclasses.replace(CFG, decode_weights="stored"), params, None).decode_weights == (
      "stored")
  # 16-bit weights stay stored: XLA:CPU upcasts a bfloat16 transposed-operand dot's operands to float32
  half = Transformer(ModelConfig.tiny(param_dtype="bfloat16", compute_dtype="bfloat16"), rngs=nnx.Rngs(0))
  assert _host._compiled_config(CFG, nnx.split(half)[1], None).decode_weights == "stored"
  monkeypatch.setattr(_host, "AUTO_TRANSPOSED_BYTES", 1024)
  assert _host._compiled_config(CFG, params, None).decode_weights == "stored"
  block = model.layers[0]
  w = block.decode_weights()
  np.testing.assert_array_equal(w["qkv"], np.asarray(block.attn.fused_qkv_weight()).T)
  np.testing.assert_array_equal(w["o"], np.asarray(block.attn.o.kernel[...]).reshape(-1, 64).T)
  gate_up, down = w["mlp"]
  np.testing.assert_array_equal(gate_up[0::2], np.asarray(block.mlp.gate.kernel[...]).T)  # rows 2j: gate j
  np.testing.assert_array_equal(gate_up[1::2], np.asarray(block.mlp.up.kernel[...]).T)
  np.testing.assert_array_equal(down, np.asarray(block.mlp.down.kernel[...]).T)
  _, head = model.decode_weights()
  np.testing.assert_array_equal(head, np.asarray(model.lm_head_weight()).T)
  lora = Transformer(ModelConfig.tiny(lora=LoRAConfig(rank=2, alpha=4.0, targets=("q", "down"))), rngs=nnx.Rngs(0))
  assert set(lora.layers[0].decode_weights()) == {"o"}
