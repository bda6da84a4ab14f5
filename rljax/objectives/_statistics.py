"""Whole-batch statistics of objective terms (exact micro-batching).

Most terms give a token a loss that depends on its own row only, so slicing a
batch into micro-batches and passing the global aggregation denominator is
exact. A few normalise by a statistic of the rows they see: a top-k selection
(``clip_cov``, ``kl_cov``), an entropy quantile (``top_entropy_mask``,
``entropy_gated_contrastive(rho=...)``) or a mean weight
(``tis(normalize=True)``, ``delta_logp_reweight(normalize=True)``). Such a term
(or correction) is a ``StatisticTerm`` (``with_statistics(fn, statistics_fn)``):

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

import functools

__all__ = ["StatisticTerm", "with_statistics", "has_statistics", "batch_statistics", "call_with_statistics",
           "forward_statistics"]


class StatisticTerm:
  """A term (or correction) that reads a statistic of the whole batch, with that statistic declared beside it:
  ``fn(out, batch, statistics=None)`` (what a call runs) and ``batch_statistics(out, batch) -> pytree``.

  The one form such a term has (no attribute set on a function and looked up by name): ``has_statistics`` is an
  ``isinstance`` test. The term's ``name`` / ``__name__`` and other attributes are copied from ``fn``, and
  attributes set on it later (``set_name``) stay on it.
  """

  def __init__(self, fn, batch_statistics):
    if not callable(fn) or not callable(batch_statistics):
      raise TypeError(f"StatisticTerm needs two callables, got fn={fn!r}, batch_statistics={batch_statistics!r}")
    functools.update_wrapper(self, fn)  # name, __name__, __doc__ and the term's other attributes
    self.fn = fn.fn if isinstance(fn, StatisticTerm) else fn
    self.batch_statistics = batch_statistics

  def __call__(self, *args, **kwargs):
    return self.fn(*args, **kwargs)


def with_statistics(fn, statistics_fn):
  """``fn`` with its whole-batch statistics ``statistics_fn(out, batch)`` (a ``StatisticTerm``; a ``StatisticTerm``
  given as ``fn`` has its statistics replaced); ``fn`` unchanged when ``statistics_fn`` is None."""
  if statistics_fn is None:
    return fn
  return StatisticTerm(fn, statistics_fn)


def has_statistics(fn) -> bool:
  """Whether the term / correction ``fn`` reads a statistic of the whole batch."""
  return isinstance(fn, StatisticTerm)


def batch_statistics(fn, out, batch):
  """``fn.batch_statistics(out, batch)``, or ``None`` when ``fn`` reads no batch statistic."""
  return fn.batch_statistics(out, batch) if has_statistics(fn) else None


def call_with_statistics(fn, out, batch, statistics=None):
  """``fn(out, batch)``, with ``statistics=`` when some are given."""
  return fn(out, batch) if statistics is None else fn(out, batch, statistics=statistics)


def forward_statistics(wrapper, inner):
  """``wrapper`` (which has no statistic of its own) with the statistics of the term it wraps."""
  return with_statistics(wrapper, inner.batch_statistics if has_statistics(inner) else None)
