"""Composition of objective terms (the optax ``chain`` pattern for losses).

A *term* is any callable

    term(out: PolicyOutputs, batch: TrainBatch) -> (per_token_loss [B, T], metrics: dict)

usually built by a factory that closes over hyper-parameters. ``chain`` sums the
per-token losses of its terms, aggregates them once over ``batch.loss_mask`` and
returns ``(loss, metrics)`` with each term's metrics prefixed by its name.
A sequence-level loss (DPO, GSPO, ...) is spread over the sequence's tokens by
its term so that the chosen aggregation recovers it (documented per term).
A term normalised by a statistic of the batch (a quantile, a top-k selection,
a mean weight) also has ``term.batch_statistics(out, batch)`` and takes
``term(out, batch, statistics=...)``, so that micro-batches can use the whole
batch's (``rljax.objectives._statistics``).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp

from rljax.objectives._aggregation import get_aggregation, token_mean
from rljax.objectives._statistics import call_with_statistics, forward_statistics, has_statistics
from rljax.types import PolicyOutputs, TrainBatch

Term = Callable[[PolicyOutputs, TrainBatch], tuple]

__all__ = ["chain", "named", "Term", "Objective"]


def _term_name(term, index: int) -> str:
  name = getattr(term, "name", None) or getattr(term, "__name__", None) or f"term{index}"
  if name == "<lambda>":
    name = f"term{index}"
  return name


def named(name: str, term: Term) -> Term:
  """Gives ``term`` the metric prefix ``name`` inside ``chain``."""

  def wrapped(out, batch, statistics=None):
    return call_with_statistics(term, out, batch, statistics)

  wrapped.name = name
  return forward_statistics(wrapped, term)


@dataclasses.dataclass(frozen=True)
class Objective:
  """A composed objective: ``objective(out, batch, denominator=None) -> (loss, metrics)``.

  ``denominator`` lets micro-batched / data-parallel callers pass the *global*
  aggregation denominator (e.g. the global token count for ``token_mean``) so
  that summing the per-micro-batch losses is exact. ``statistics`` does the
  same for terms normalised by a statistic of the batch (``clip_cov``,
  ``top_entropy_mask``, ``tis(normalize=True)``, ...): pass
  ``objective.statistics(out_full, batch_full)`` of the whole batch, sliced
  like the batch (``rljax.objectives._statistics``). ``aux_weight`` scales the
  auxiliary-loss term (``aux_loss_coef * out.aux_loss``): a caller that sums
  the losses of ``k`` equal slices of one batch passes ``1 / k``, so that the
  slices' auxiliary losses are averaged rather than summed. Metrics always
  include ``loss/numerator`` and ``loss/denominator`` (the local ones).
  """
  terms: tuple
  names: tuple
  aggregate: Callable
  aux_loss_coef: float = 0.0

  def denominator(self, batch: TrainBatch):
    """The aggregation denominator of ``batch``. For a global one compute it on the whole batch: it is
    the sum of the slices' denominators for every aggregation except ``token_sum`` (always 1)."""
    return self.aggregate(jnp.zeros(batch.loss_mask.shape, jnp.float32), batch.loss_mask)[1]

  @property
  def needs_statistics(self) -> bool:
    """Whether some term reads a statistic of the whole batch (then micro-batching needs ``statistics``)."""
    return any(has_statistics(t) for t in self.terms)

  def statistics(self, out: PolicyOutputs, batch: TrainBatch) -> dict:
    """The batch statistics of the terms that read one (``term.batch_statistics``), by term name."""
    return {name: t.batch_statistics(out, batch) for name, t in zip(self.names, self.terms) if has_statistics(t)}

  def __call__(self, out: PolicyOutputs, batch: TrainBatch, denominator: Optional[Any] = None,
               aux_weight: float = 1.0, statistics: Optional[dict] = None):
    if out.logp.shape != batch.loss_mask.shape:
      raise ValueError(f"out.logp {out.logp.shape} and batch.loss_mask {batch.loss_mask.shape} must match")
    per_tokens, metrics = [], {}
    for name, term in zip(self.names, self.terms):
      result = call_with_statistics(term, out, batch, (statistics or {}).get(name))
      if not (isinstance(result, tuple) and len(result) == 2):
        raise ValueError(f"objective term {name!r} must return (per_token_loss [B, T], metrics dict)")
      per_token, term_metrics = result
      if per_token.shape != batch.loss_mask.shape:
        raise ValueError(f"objective term {name!r} returned per-token loss of shape {per_token.shape}, "
                         f"expected {batch.loss_mask.shape}")
      per_tokens.append(per_token)
      for key, value in dict(term_metrics).items():
        metrics[f"{name}/{key}"] = value
    # summed in float32 at least (bf16 terms are promoted); float64 terms keep float64 (jax_enable_x64)
    dtype = jnp.result_type(jnp.float32, *[p.dtype for p in per_tokens])
    total = jnp.zeros(batch.loss_mask.shape, dtype)
    for per_token in per_tokens:
      total = total + per_token.astype(dtype)
    numerator, local_denominator = self.aggregate(total, batch.loss_mask)
    denom = local_denominator if denominator is None else jnp.asarray(denominator, jnp.float32)
    loss = numerator / jnp.maximum(denom, 1e-8)
    if out.aux_loss is not None:
      metrics["aux_loss"] = out.aux_loss
      if self.aux_loss_coef:
        loss = loss + (self.aux_loss_coef * aux_weight) * out.aux_loss
    metrics["loss/numerator"] = numerator
    metrics["loss/denominator"] = local_denominator
    metrics["loss"] = loss
    return loss, metrics


def chain(*terms: Term, aggregate=token_mean, aux_loss_coef: float = 0.0) -> Objective:
  """Composes objective terms into one loss.

      loss = aggregate(sum_i term_i(out, batch).per_token_loss, batch.loss_mask)
             + aux_loss_coef * out.aux_loss          (MoE load balancing, when present)

  Per-token losses are summed in float32, or float64 when a term returns
  float64 (``jax_enable_x64`` with float64 inputs); bf16 terms are promoted.

  Args:
    *terms: term callables (built-in factories' results or user functions with
      the same signature).
    aggregate: an aggregation (``token_mean``, ``seq_mean_token_mean``, ...) or
      its name; see ``rljax.objectives._aggregation``.
    aux_loss_coef: weight of the model's auxiliary loss (``out.aux_loss``, e.g.
      MoE load balancing); it is always reported as a metric. rljax models'
      ``policy_outputs`` already multiply ``aux_loss`` by
      ``cfg.router_aux_loss_coef`` (Qwen3-MoE: 1e-3), so use ``1.0`` to add it
      as configured, not the router coefficient a second time.

  Returns:
    An ``Objective``; ``objective(out, batch)`` returns ``(loss, metrics)`` with
    metrics prefixed ``"<term name>/"``.
  """
  if not terms:
    raise ValueError("chain needs at least one term")
  for i, t in enumerate(terms):
    if not callable(t):
      raise ValueError(f"chain argument {i} is not callable: {t!r}")
  names, seen = [], {}
  for i, t in enumerate(terms):
    base = _term_name(t, i)
    seen[base] = seen.get(base, 0) + 1
    names.append(base if seen[base] == 1 else f"{base}_{seen[base] - 1}")
  if aux_loss_coef < 0:
    raise ValueError(f"aux_loss_coef must be >= 0, got {aux_loss_coef}")
  return Objective(terms=tuple(terms), names=tuple(names), aggregate=get_aggregation(aggregate),
                   aux_loss_coef=aux_loss_coef)
