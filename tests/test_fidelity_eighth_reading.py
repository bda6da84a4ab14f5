"""Issue #51 item 4, eighth draw (seed 20261213): the record errors the re-audit found, each checked here.

- ``rloo``: verl's core_algos.py has a second estimator, ``rloo_vectorized`` (v0.7.0:718-753, the same in the
  0.9.1 wheel), whose singleton group gets 0: ours, not verl's ``rloo`` A = r.
- ``reinforce_pp``: the verl 0.9.1 wheel (the peer the benchmarks run) carries the running return through mask-0
  tokens and keeps returns 0 there: our default; v0.7.0 and main b178a3cd reset it (``reset_at_mask=True``).
- ``gpg``: the authors' trainer generates a batch on every gradient-accumulation micro-step, so each micro-step's
  loss is divided by its own inverse_alpha; ours takes one factor over the update batch.
- ``oprl``: ``algorithm.istar.use_process_only`` (the step RLOO alone) was not in the record.
"""
import types

import jax
import jax.numpy as jnp
import numpy as np

import rljax
from rljax.advantages import reinforce_pp, rloo
from rljax.objectives._ratio import _gpg_alpha

ROWS = {r.name: r for r in rljax.catalog()}


def _verl_rloo(scores, index, vectorized):
  """Float64 transcription of verl v0.7.0 compute_rloo_outcome_advantage (:475-525) and
  compute_rloo_vectorized_outcome_advantage (:718-753): (c·r − Σ_g r)/max(c − 1, 1)·(c > 1)."""
  out = scores.copy()
  for g in np.unique(index):
    m = index == g
    c = m.sum()
    if c > 1:
      out[m] = scores[m] * c / (c - 1) - scores[m].mean() * c / (c - 1)
    elif vectorized:
      out[m] = 0.0
  return out


def test_rloo_zero_singleton_is_verl_rloo_vectorized():
  rng = np.random.default_rng(20261213)
  gid = np.array([0, 0, 0, 1, 2, 2, 3, 4, 4, 4])  # groups 1 and 3 are singletons
  r = rng.normal(size=gid.shape[0])
  with jax.enable_x64(True):
    zero, _ = rloo(jnp.asarray(r), jnp.asarray(gid), num_groups=5)
    raw, _ = rloo(jnp.asarray(r), jnp.asarray(gid), num_groups=5, singleton="raw")
  np.testing.assert_allclose(np.asarray(zero), _verl_rloo(r, gid, vectorized=True), atol=1e-12)
  np.testing.assert_allclose(np.asarray(raw), _verl_rloo(r, gid, vectorized=False), atol=1e-12)
  assert not np.allclose(np.asarray(zero), _verl_rloo(r, gid, vectorized=False))
  f = ROWS["rloo"].fidelity
  assert "rloo_vectorized" in f.read and "0.9.1 PyPI wheel" in f.read
  assert "rloo_vectorized" in f.defaults[0][2] and "rloo_vectorized" in f.deviations[0]


def _verl_rpp(tok, mask, gamma, carry):
  """Float64 transcription of verl compute_reinforce_plus_plus_outcome_advantage: 0.9.1 wheel core_algos.py:693-731
  (carry=True) or v0.7.0 :581-616 (carry=False), with torch_functional.masked_whiten (÷ (Σm + 1e-8), unbiased)."""
  b, t = tok.shape
  ret = np.zeros_like(tok)
  run = np.zeros(b)
  for i in reversed(range(t)):
    new = tok[:, i] + gamma * run
    if carry:
      ret[:, i] = new * mask[:, i]
      run = new * mask[:, i] + run * (1 - mask[:, i])
    else:
      ret[:, i] = new
      run = new * mask[:, i]
  n = mask.sum()
  mean = (ret * mask).sum() / (n + 1e-8)
  var = (((ret - mean) ** 2) * mask).sum() / (n + 1e-8) * n / (n - 1)
  return (ret - mean) / np.sqrt(var + 1e-8) * mask


def test_reinforce_pp_default_is_verl_091_and_reset_is_v070():
  rng = np.random.default_rng(5)
  b, t = 4, 12
  mask = (rng.uniform(size=(b, t)) < 0.7).astype(np.float64)
  mask[:, 0] = 1.0
  mask[:, 3] = 0.0  # a hole (an observation span) in every row
  mask[:, 4] = 1.0
  tok = rng.normal(size=(b, t)) * mask
  for gamma in (1.0, 0.9):
    with jax.enable_x64(True):
      carry, _ = reinforce_pp(jnp.asarray(tok), jnp.asarray(mask > 0), gamma=gamma)
      reset, _ = reinforce_pp(jnp.asarray(tok), jnp.asarray(mask > 0), gamma=gamma, reset_at_mask=True)
    v091 = _verl_rpp(tok, mask, gamma, carry=True)
    v070 = _verl_rpp(tok, mask, gamma, carry=False)
    # the only difference left is verl's + 1e-8 in the masked mean (relative ≤ 1e-8 / Σm)
    np.testing.assert_allclose(np.asarray(carry), v091, rtol=0, atol=1e-7)
    np.testing.assert_allclose(np.asarray(reset), v070, rtol=0, atol=1e-7)
    assert np.abs(v091 - v070).max() > 1e-2
  f = ROWS["reinforce_pp"].fidelity
  assert "core_algos.py:693-731" in f.read and "0.9.1: carry through" in dict((d[0], d[2]) for d in f.defaults)[
      "reset_at_mask"]
  assert "none against verl 0.9.1" in f.deviations[0]


def _theirs_micro_step_alpha(adv, group_id):
  """The authors' gpg_trainer.py:540-627 on one micro-step: inverse_alpha = min(1, n_valid / groups)."""
  groups = np.unique(group_id)
  valid = sum(np.any(adv[group_id == g] != 0) for g in groups)
  return min(1.0, valid / len(groups))


def test_gpg_alpha_per_micro_step_differs_from_one_batch_factor():
  t = 3
  # two micro-steps of two groups of 2 rows each: step 1 has 2 valid groups, step 2 has 1
  adv = np.array([0.5, -0.5, 1.0, -1.0, 0.3, -0.3, 0.0, 0.0])
  gid = np.array([0, 0, 1, 1, 2, 2, 3, 3])
  loss = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])  # any per-row loss
  steps = [slice(0, 4), slice(4, 8)]
  theirs = sum(loss[s].sum() / _theirs_micro_step_alpha(adv[s], gid[s]) for s in steps)
  batch = types.SimpleNamespace(loss_mask=jnp.ones((8, t), bool), group_id=jnp.asarray(gid),
                                advantages=jnp.asarray(np.repeat(adv[:, None], t, 1)))
  factor = float(_gpg_alpha(batch))
  assert np.isclose(factor, 4 / 3, rtol=1e-6)
  ours = loss.sum() * factor
  assert not np.isclose(ours, theirs)  # 36·4/3 = 48 vs 10 + 26·2 = 62
  # the same valid share in every micro-step: equal
  adv2 = np.array([0.5, -0.5, 0.0, 0.0, 0.3, -0.3, 0.0, 0.0])
  batch2 = types.SimpleNamespace(loss_mask=batch.loss_mask, group_id=batch.group_id,
                                 advantages=jnp.asarray(np.repeat(adv2[:, None], t, 1)))
  theirs2 = sum(loss[s].sum() / _theirs_micro_step_alpha(adv2[s], gid[s]) for s in steps)
  assert np.isclose(loss.sum() * float(_gpg_alpha(batch2)), theirs2)
  f = ROWS["gpg"].fidelity
  assert "gpg_trainer.py:247-265" in f.read and "gradient-accumulation micro-step" in f.placement
  assert any("one factor per update batch" in d for d in f.deviations)


def test_oprl_lists_use_process_only():
  f = ROWS["oprl"].fidelity
  assert "use_process_only" in dict((d[0], d[2]) for d in f.defaults)
  assert any("use_process_only" in d and "not built" in d for d in f.deviations)
  assert "ray_trainer.py:1302" in " ".join(f.deviations)
