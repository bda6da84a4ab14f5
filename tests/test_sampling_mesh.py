"""The sampler over a device mesh: each chip prefills the prompts of its own rows (``prefill_rows``) when the
prompts do not divide the row split, the prefill gathers one layer at a time, the decode loop writes one
full-size cache in place, and the logits are scored vocabulary-split; the samples equal the one-device ones."""
from __future__ import annotations

import jax
import numpy as np
import pytest
from flax import nnx

from rljax.models import ModelConfig, Transformer
from rljax.parallel import MeshConfig, make_mesh, shard_state
from rljax.sampling import SamplerConfig, generate
from rljax.sampling._decode import prefill_rows


@pytest.mark.parametrize("prompts,n,split", [(2, 4, 4), (3, 4, 4), (96, 8, 256), (128, 8, 256), (5, 3, 5),
                                             (6, 8, 16), (1, 8, 8), (3, 2, 2)])
def test_prefill_rows_gives_each_row_its_prompt_from_its_own_chip(prompts, n, split):
  layout = prefill_rows(prompts, n, split)
  b = prompts * n
  if prompts % split == 0 or b % split:
    assert layout is None
    return
  index, local = layout
  r = b // split
  q = index.size // split
  assert index.size % split == 0 and local.shape == (split, r)
  for row in range(b):  # brute force: row b sits on chip b // r and reads prefill row chip * q + local
    chip, i = divmod(row, r)
    assert 0 <= local[chip, i] < q
    assert index[chip * q + local[chip, i]] == row // n
  # a chip prefills only prompts its rows need
  for chip in range(split):
    need = {row // n for row in range(chip * r, (chip + 1) * r)}
    assert set(index[chip * q:(chip + 1) * q].tolist()) == need
  assert prefill_rows(prompts, n, 1) is None


@pytest.mark.parametrize("scan", [False, True])
@pytest.mark.parametrize("prompts", [[[3, 4, 5], [7, 8]], [[3, 4, 5], [7, 8], [9, 10, 11, 12]]])
def test_sampler_over_a_mesh_the_prompts_do_not_divide_gives_the_same_samples(scan, prompts):
  cfg = ModelConfig.tiny(scan_layers=scan)
  graphdef, state = nnx.split(Transformer(cfg, rngs=nnx.Rngs(0)))
  config = SamplerConfig(max_new_tokens=40, prompt_buckets=(8,), decode_phases=3)
  kw = dict(config=config, key=jax.random.key(3), n=4, temperature=1.0)
  mesh = make_mesh(MeshConfig(data=2, fsdp=2, tensor=2))  # rows split 4 ways: 2 or 3 prompts x 4 samples
  assert prefill_rows(len(prompts), 4, 4) is not None
  ref = generate((graphdef, state), prompts, **kw)
  out = generate((graphdef, shard_state(state, mesh)), prompts, **kw)
  np.testing.assert_array_equal(out.tokens, ref.tokens)
  np.testing.assert_array_equal(out.completion_mask, ref.completion_mask)
  np.testing.assert_allclose(out.logp_behavior, ref.logp_behavior, rtol=1e-5, atol=1e-5)


def test_in_place_phase_cache_gives_the_same_samples_as_the_copying_one():
  graphdef, state = nnx.split(Transformer(ModelConfig.tiny(), rngs=nnx.Rngs(0)))
  prompts = [[3, 4, 5], [7, 8], [9, 10, 11, 12]]
  outs = [generate((graphdef, state), prompts, key=jax.random.key(5), n=2, temperature=1.0,
                   config=SamplerConfig(max_new_tokens=48, prompt_buckets=(8,), decode_phases=3, phase_cache=mode))
          for mode in ("copy", "in_place")]
  np.testing.assert_array_equal(outs[0].tokens, outs[1].tokens)
  np.testing.assert_allclose(outs[0].logp_behavior, outs[1].logp_behavior, rtol=1e-6, atol=1e-6)


def test_phase_cache_is_validated():
  with pytest.raises(ValueError, match="phase_cache"):
    SamplerConfig(phase_cache="inplace")
