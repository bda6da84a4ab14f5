"""Fidelity, sweep by error class (issue #51 items 2 and 4): checks for the record corrections of that sweep.

Each reference is a float64 NumPy transcription of the cited lines (written for these tests, not copied).
"""
import jax
import jax.numpy as jnp
import numpy as np

import rljax
from rljax import objectives as O

ROWS = {r.name: r for r in rljax.catalog()}


def _verl091_agg_loss(loss_mat, loss_mask, mode, dp_size=1, loss_scale_factor=None):
  """verl 0.9.1 (PyPI wheel) verl/trainer/ppo/core_algos.py agg_loss, 'token-sum' (:1176-1180) and
  'seq-mean-token-sum-norm' (:1181-1192), one rank (no global counts: global_batch_size = the non-empty rows)."""
  loss_mat, loss_mask = np.asarray(loss_mat, np.float64), np.asarray(loss_mask, np.float64)
  if mode == "token-sum":
    return (loss_mat * loss_mask).sum() * dp_size
  assert mode == "seq-mean-token-sum-norm"
  seq_losses = (loss_mat * loss_mask).sum(-1)
  seq_mask = (loss_mask.sum(-1) > 0).astype(np.float64)
  loss = (seq_losses * seq_mask).sum() / seq_mask.sum() * dp_size
  return loss / (loss_mask.shape[-1] if loss_scale_factor is None else loss_scale_factor)


def _value(agg, loss, mask):
  num, den = agg(jnp.asarray(loss), jnp.asarray(mask))
  return float(np.asarray(num, np.float64) / np.asarray(den, np.float64))


def test_token_sum_and_sum_norm_against_verl_091():
  rng = np.random.default_rng(11)
  loss = rng.normal(size=(6, 9))
  mask = rng.random((6, 9)) < 0.7
  mask[:, 0] = True  # every row has a token: the case where verl 0.9.1's sum-norm equals ours
  with jax.enable_x64(True):
    np.testing.assert_allclose(_value(O.token_sum, loss, mask), _verl091_agg_loss(loss, mask, "token-sum"),
                               rtol=1e-14)
    np.testing.assert_allclose(_value(O.seq_mean_token_sum_norm, loss, mask),
                               _verl091_agg_loss(loss, mask, "seq-mean-token-sum-norm"), rtol=1e-14)
    # the recorded difference: an all-padding row counts in our B, not in verl 0.9.1's non-empty-row mean
    mask[2] = False
    ours = _value(O.seq_mean_token_sum_norm, loss, mask)
    np.testing.assert_allclose(ours * 6 / 5, _verl091_agg_loss(loss, mask, "seq-mean-token-sum-norm"), rtol=1e-14)
  assert "0.9.1" in ROWS["token_sum"].fidelity.differences
  assert any("0.9.1" in d and "non-empty" in d for d in ROWS["seq_mean_token_sum_norm"].fidelity.deviations)


def test_records_name_the_version_they_read():
  """A record's reference names the version its ``read`` gives (class 1 of the sweep): ppo_clip read v0.7.0."""
  fid = ROWS["ppo_clip"].fidelity
  assert "v0.7.0" in fid.reference and "v0.7.0" in fid.read and "verl 0.9.1" not in fid.reference


def test_abstract_rows_cite_the_stored_arxiv_html():
  """Class 5: rows that said 'no paper body stored' cite the arXiv HTML the search tool's pages corpus holds."""
  for name, page in (("lte", "arxiv.org/html/2510.26109"), ("adhint", "arxiv.org/html/2512.13095"),
                     ("rapo_replay", "arxiv.org/html/2509.24107"), ("rorecomp", "arxiv.org/html/2509.25958"),
                     ("rorecomp_compensation", "arxiv.org/html/2509.25958")):
    read = ROWS[name].fidelity.read
    assert page in read and "no paper body stored" not in read, name


def test_segment_ratio_names_the_pinned_trl_default_aggregation():
  """Class 4: Rank-GRPO's script leaves loss_type unset; its README pins trl 0.21.0, whose default is 'bnpo'."""
  fid = ROWS["segment_ratio"].fidelity
  theirs = {name: t for name, _, t in fid.defaults}
  assert "'bnpo'" in theirs["aggregation"] and "trl" in fid.read and "v0.21.0" in fid.read
  assert any("bnpo" in d for d in fid.deviations)
