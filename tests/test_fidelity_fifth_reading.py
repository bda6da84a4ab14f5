"""Issue #51 item 4, fifth draw (seed 20261210): the record errors the re-audit found, each checked here.

- ``oc_grpo``: the composition ``logp_old='recompute'`` + ``tis(1.0, lower=0.01)`` weighs fresh rows too (by
  min(pi_old / pi_sampler, 1)); the authors' per-token IS weight leaves them at 1 (AgPriyank/OC-GRPO@54d61030
  ray_trainer.py:5262-5300, ``_is_full = ones``, only ``replaced_idxs`` set).
- ``code_tests``: verl v0.7.0 calls ``prime_code.compute_score(..., continuous=True)`` (reward_score/__init__.py:88);
  the record now says so and lists the pass-rate score as a deviation.
- ``erc``: the authors' code has two ERC losses (``grpo_erc``, ``gppo_erc``); the record names both.
- ``segment``: the paper's per-block token mean is not an rljax aggregation (aggregations see (loss, mask) only).
"""
import inspect

import numpy as np

import rljax
from rljax.objectives import _aggregation

ROWS = {r.name: r for r in rljax.catalog()}


def _authors_is_weight(old_x, old_x_hinted, mask, replaced, clamp_min=0.01, power=1.0):
  """OC-GRPO per_token IS weight (float64 transcription of ray_trainer.py:5262-5300): rows in ``replaced`` get
  clamp(exp(-(log pi_old(y|x~) - log pi_old(y|x)))^power, clamp_min, 1) on their response tokens and 1 on padding;
  every other row gets 1."""
  w = np.ones_like(old_x)
  d = old_x_hinted - old_x
  tw = np.clip(np.exp(-d) ** power, clamp_min, 1.0)
  tw = tw * mask + (1.0 - mask)
  w[replaced] = tw[replaced]
  return w


def test_oc_grpo_tis_composition_matches_the_authors_weight_on_hinted_rows_but_not_on_fresh_rows():
  import jax.numpy as jnp
  import rljax.objectives as O
  from rljax.types import PolicyOutputs, TrainBatch
  rng = np.random.default_rng(20261210)
  b, t = 8, 7
  replaced = np.array([False] * 4 + [True] * 4)
  old_x = -rng.uniform(0.1, 2.0, (b, t))  # log pi_old(y | x) (logp_old='recompute')
  # logp_behavior: hinted rows, log pi(y | x + h); fresh rows, the sampler's own log-probs, a little off pi_old
  behavior = np.where(replaced[:, None], old_x + rng.normal(scale=1.5, size=(b, t)),
                      old_x + rng.normal(scale=0.05, size=(b, t)))
  mask = (rng.uniform(size=(b, t)) < 0.85).astype(np.float64)
  mask[:, 0] = 1
  batch = TrainBatch.create(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask > 0),
                            advantages=jnp.ones((b, t)), group_id=jnp.arange(b) // 4,
                            logp_old=jnp.asarray(old_x), logp_behavior=jnp.asarray(behavior))
  w, keep, _ = O.tis(1.0, lower=0.01)(PolicyOutputs.create(logp=jnp.asarray(old_x)), batch)
  w = np.asarray(w, np.float64)
  ref = _authors_is_weight(old_x, behavior, mask, replaced)
  on = mask > 0
  # hinted rows: their weight, when our sampler's hinted log-prob stands in for their forward of log pi_old(y | x~)
  np.testing.assert_allclose(w[replaced][on[replaced]], ref[replaced][on[replaced]], rtol=1e-5)  # float32 batch
  # fresh rows: theirs 1, ours min(pi_old / pi_sampler, 1) -- the deviation the record now lists
  fresh = w[~replaced][on[~replaced]]
  assert np.all(fresh <= 1.0) and np.any(fresh < 0.99)
  assert np.all(ref[~replaced] == 1.0)
  f = ROWS["oc_grpo"].fidelity
  assert any("fresh row" in d and "weight 1" in d for d in f.deviations)
  assert "4831-4900" in f.read and "get_solution_prefix" in f.read


def test_code_tests_record_gives_verls_continuous_call():
  f = ROWS["code_tests"].fidelity
  theirs = dict((name, t) for name, _, t in f.defaults)["score"]
  assert "continuous=True" in theirs and "pass rate of the first 10 cases" in theirs
  assert "reward_score/__init__.py:74-88" in f.read
  assert any(d.startswith("no continuous (pass-rate) score") and "continuous=True" in d for d in f.deviations)


def test_erc_record_names_both_authors_losses():
  f = ROWS["erc"].fidelity
  assert "gppo_erc" in f.read and "grpo_erc" in f.read
  assert "gppo_erc" in dict((n, t) for n, _, t in f.defaults)["wrapped loss"]
  assert any("gppo_erc" in d and "cannot be composed" in d for d in f.deviations)
  assert "the code fixes dual-clip PPO" not in " ".join(f.deviations)


def test_segment_per_block_token_mean_is_not_an_aggregation():
  # every aggregation takes (loss, mask): none can average a block's tokens over that block
  for name, fn in _aggregation._BY_NAME.items():
    positional = [p.name for p in inspect.signature(fn).parameters.values() if p.kind != p.KEYWORD_ONLY]
    assert positional == ["loss", "mask"], name
  f = ROWS["segment"].fidelity
  assert "aggregation's choice" not in f.placement
  assert any("no rljax aggregation" in d for d in f.deviations)
