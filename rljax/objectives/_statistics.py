"""Whole-batch statistics of objective terms (exact micro-batching).

Most terms give a token a loss that depends on its own row only, so slicing a
batch into micro-batches and passing the global aggregation denominator is
exact. A few normalise by a statistic of the rows they see: a top-k selection
(``clip_cov``, ``kl_cov``), an entropy quantile (``top_entropy_mask``,
``entropy_gated_contrastive(rho=...)``) or a mean weight
(``tis(normalize=True)``, ``delta_logp_reweight(normalize=True)``). Such a term
(or correction) exposes

    term.batch_statistics(out, batch) -> statistics            (a pytree)
    term(out, batch, statistics=statistics) -> (per_token_loss [B, T], metrics)

The statistics are computed once on the whole batch; a term called on a slice
with them uses them instead of the slice's own, so the slices' losses sum to
the whole batch's. Without ``statistics`` a term computes them from the rows
it sees (a term called directly behaves as before). Leaves of the batch's
token shape ``[B, T, ...]`` (per-token selections) are sliced with the batch;
every other leaf (a mean, a threshold) is shared by all slices
(``rljax.train.split_statistics``). Wrappers forward their inner term's
statistics, ratio terms their corrections', ``chain`` gathers its terms'
(``Objective.statistics``).
"""
from __future__ import annotations

__all__ = ["has_statistics", "batch_statistics", "call_with_statistics", "forward_statistics"]


def has_statistics(fn) -> bool:
  """Whether the term / correction ``fn`` reads a statistic of the whole batch."""
  return callable(getattr(fn, "batch_statistics", None))


def batch_statistics(fn, out, batch):
  """``fn.batch_statistics(out, batch)``, or ``None`` when ``fn`` reads no batch statistic."""
  return fn.batch_statistics(out, batch) if has_statistics(fn) else None


def call_with_statistics(fn, out, batch, statistics=None):
  """``fn(out, batch)``, with ``statistics=`` when some are given."""
  return fn(out, batch) if statistics is None else fn(out, batch, statistics=statistics)


def forward_statistics(wrapper, inner):
  """Gives ``wrapper`` (which has no statistic of its own) the statistics of the term it wraps."""
  if has_statistics(inner):
    wrapper.batch_statistics = inner.batch_statistics
  return wrapper
