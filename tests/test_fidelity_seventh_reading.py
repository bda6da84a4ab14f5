"""Issue #51 item 4, seventh draw (seed 20261212): the record errors the re-audit found, each checked here.

- ``seq_mean_token_mean`` (and ``seq_mean_token_sum``, same text): verl v0.7.0's engine worker divides by
  ``global_batch_size = ppo_mini_batch_size × rollout.n`` (ray_trainer.py:1217-1225), every row of the mini-batch,
  so it gives ours only when no row is empty (the record said it gives ours).
- ``token_sum``: ``loss_scale_factor=1`` reaches ``agg_loss`` only on the engine worker; on the default legacy
  ``dp_actor`` the 'seq-mean-token-sum-norm' branch divides by T (``config.global_batch_info`` is empty there).
- ``dara``: the authors' repository has a second, tool-calling implementation (``compute_dara_combined_advantage``)
  whose combination is ours before the final normalisation, which there is token whitening.
"""
import jax
import jax.numpy as jnp
import numpy as np

import rljax
from rljax.objectives import seq_mean_token_mean, token_sum

ROWS = {r.name: r for r in rljax.catalog()}


def _verl_seq_mean_token_mean(loss, mask, global_batch_size=None):
  """Float64 transcription of verl v0.7.0 core_algos.py:812-818 (agg_loss 'seq-mean-token-mean', dp_size 1)."""
  count = mask.sum(-1)
  seq = (loss * mask).sum(-1) / (count + 1e-8)
  has = (count > 0).astype(np.float64)
  n = has.sum() if global_batch_size is None else global_batch_size
  return (seq * has).sum() / n


def _ours(fn, loss, mask):
  with jax.enable_x64(True):
    num, den = fn(jnp.asarray(loss), jnp.asarray(mask))
    return float(num) / float(den)


def test_engine_worker_gives_ours_only_without_empty_rows():
  rng = np.random.default_rng(20261212)
  b, t = 6, 9
  loss = rng.normal(size=(b, t))
  mask = (rng.uniform(size=(b, t)) < 0.7).astype(np.float64)
  mask[:, 0] = 1.0
  # no empty row: the engine worker's global_batch_size (all rows) is ours
  assert np.isclose(_ours(seq_mean_token_mean, loss, mask), _verl_seq_mean_token_mean(loss, mask, b), rtol=1e-7)
  mask[2] = 0.0  # one empty row (no loss token)
  ours = _ours(seq_mean_token_mean, loss, mask)
  assert np.isclose(ours, _verl_seq_mean_token_mean(loss, mask), rtol=1e-7)  # ÷ non-empty rows
  engine = _verl_seq_mean_token_mean(loss, mask, b)  # ÷ every row of the mini-batch
  assert np.isclose(engine, ours * (b - 1) / b, rtol=1e-7) and not np.isclose(engine, ours, rtol=1e-3)
  for name in ("seq_mean_token_mean", "seq_mean_token_sum"):
    text = " ".join(ROWS[name].fidelity.deviations)
    assert "empty rows included" in text and "ray_trainer.py:1217-1225" in text
    assert "verl's new engine worker (global_batch_size) gives ours" not in text


def test_token_sum_legacy_dp_actor_divides_by_t():
  rng = np.random.default_rng(7)
  b, t = 5, 11
  loss = rng.normal(size=(b, t))
  mask = (rng.uniform(size=(b, t)) < 0.6).astype(np.float64)
  # legacy dp_actor: agg_loss(loss_mat, loss_mask, 'seq-mean-token-sum-norm') with no loss_scale_factor -> ÷ T
  legacy = (loss * mask).sum(-1).sum() / mask.shape[-1]
  assert np.isclose(_ours(token_sum, loss, mask), t * legacy, rtol=1e-12)
  rec = ROWS["token_sum"].fidelity
  assert "only the engine" in rec.deviations[0] and "legacy dp_actor always divides by T" in rec.defaults[0][2]
  assert "always T = loss_mask.shape[-1]" in rec.placement


def _tool_calling_dara_combined(r, gid, w_max=5.0, eps=1e-6):
  """Float64 transcription of DARA's tool-calling combination, before its token whitening: per channel
  compute_grpo_outcome_advantage (sample std, + 1e-6), density of groups with Σ|A| > 1e-8, w = min(w_max,
  sqrt(max π / π)), combined = Σ_k w_k A_k (vendor/verl/verl/trainer/ppo/core_algos.py@54024d0e)."""
  z = np.zeros_like(r)
  groups = [np.flatnonzero(gid == g) for g in np.unique(gid)]
  for rows in groups:
    v = r[rows]
    z[rows] = (v - v.mean(0)) / (v.std(0, ddof=1) + eps)
  pi = np.array([np.mean([np.abs(z[rows, k]).sum() > 1e-8 for rows in groups]) for k in range(r.shape[1])])
  w = np.where(pi > 0, np.minimum(w_max, np.sqrt(pi.max() / np.where(pi > 0, pi, 1.0))), w_max)
  return (z * w).sum(1)


def test_dara_tool_calling_combination_is_ours_before_whitening():
  from rljax.advantages import dara
  rng = np.random.default_rng(3)
  g, n = 6, 4
  gid = np.repeat(np.arange(g), n)
  r = np.stack([rng.integers(0, 2, g * n), rng.integers(0, 2, g * n) * (rng.uniform(size=g * n) < 0.3)], 1)
  r = r.astype(np.float64)
  with jax.enable_x64(True):
    ours, _ = dara(jnp.asarray(r), jnp.asarray(gid), calibration="symmetric", whiten=False)
  assert np.allclose(np.asarray(ours), _tool_calling_dara_combined(r, gid), rtol=1e-12, atol=1e-12)
  text = " ".join(ROWS["dara"].fidelity.deviations)
  assert "token whitening" in text and "K channels" in text
  assert "compute_dara_combined_advantage" in ROWS["dara"].fidelity.read
