"""Fidelity, fourth independent reading (issue #51 item 4, seed 20261209): the recorded deviations that the reading
added, checked against float64 NumPy transcriptions of the cited source lines (written for these tests, not copied).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rljax
from rljax import objectives as O

ROWS = {r.name: r for r in rljax.catalog()}


def _verl07_seq_mean(loss, mask, mode, global_batch_size=None, dp_size=1):
  """volcengine/verl@v0.7.0 core_algos.agg_loss, 'seq-mean-token-sum' / 'seq-mean-token-mean' (:806-818)."""
  count = mask.sum(-1)
  if mode == "seq-mean-token-sum":
    seq = (loss * mask).sum(-1)
  else:
    seq = (loss * mask).sum(-1) / (count + 1e-8)
  has = (count > 0).astype(np.float64)
  n = has.sum() if global_batch_size is None else global_batch_size
  return (seq * has).sum() / n * dp_size


def _ours(agg, loss, mask):
  with jax.enable_x64(True):
    num, den = agg(jnp.asarray(loss), jnp.asarray(mask))
    return float(np.asarray(num, np.float64) / np.asarray(den, np.float64))


@pytest.mark.parametrize("agg,mode", [(O.seq_mean_token_sum, "seq-mean-token-sum"),
                                      (O.seq_mean_token_mean, "seq-mean-token-mean")])
def test_seq_aggregations_vs_verls_two_worker_paths(agg, mode):
  """Ours equals verl's new engine worker (the global sequence count passed in, each micro-batch's share summed) and
  its default legacy dp_actor (each micro-batch divided by its own count, × 1/gradient_accumulation) while no row is
  empty; with an empty row in one micro-batch the legacy path weighs that micro-batch's rows more (the recorded
  deviation)."""
  rng = np.random.default_rng(20261209)
  loss = rng.normal(size=(8, 6))
  mask = (rng.random((8, 6)) < 0.7).astype(np.float64)
  mask[:, 0] = 1.0  # no row is empty
  micro = [slice(i, i + 2) for i in range(0, 8, 2)]  # 4 micro-batches of 2 rows: gradient_accumulation = 4
  n_seq = float((mask.sum(-1) > 0).sum())
  engine = sum(_verl07_seq_mean(loss[s], mask[s], mode, global_batch_size=n_seq) for s in micro)
  legacy = sum(_verl07_seq_mean(loss[s], mask[s], mode) / len(micro) for s in micro)
  ours = _ours(agg, loss, mask)
  np.testing.assert_allclose(ours, engine, rtol=1e-7)
  np.testing.assert_allclose(ours, legacy, rtol=1e-7)

  mask[1] = 0.0  # micro-batch 0 now has one non-empty row
  n_seq = float((mask.sum(-1) > 0).sum())
  engine = sum(_verl07_seq_mean(loss[s], mask[s], mode, global_batch_size=n_seq) for s in micro)
  legacy = sum(_verl07_seq_mean(loss[s], mask[s], mode) / len(micro) for s in micro)
  ours = _ours(agg, loss, mask)
  np.testing.assert_allclose(ours, engine, rtol=1e-7)
  # legacy: row 0 weighs 1/(4·1), the other rows 1/(4·2); ours: every non-empty row 1/7
  per_row = (loss * mask).sum(-1) if mode == "seq-mean-token-sum" else (loss * mask).sum(-1) / np.maximum(
      mask.sum(-1), 1.0)
  np.testing.assert_allclose(legacy, per_row[0] / 4 + per_row[2:].sum() / 8, rtol=1e-7)
  assert abs(legacy - ours) > 1e-3
  record = ROWS[agg.__name__].fidelity
  assert any("legacy" in d and "non-empty" in d for d in record.deviations)
  assert "v0.4.0-v0.6.0" in record.read and "the same branch in v0.4.0" not in record.read
