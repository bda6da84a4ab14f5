"""Materialising reference for the fused log-prob / entropy head.

Builds the full ``[N, V]`` float32 logits, so it costs ``N * V * 4`` bytes (plus
as much again for its gradient). It exists as the ground truth that the fused
implementations are tested against and as the "naive" baseline of
``benchmarks/logprob_bench.py``; gradients come from ordinary autodiff.
"""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp

Array = jax.Array


def apply_soft_cap(raw: Array, soft_cap: Optional[float]) -> Array:
  """``cap * tanh(raw / cap)`` (Gemma-2 final-logit soft-capping), or ``raw``."""
  if soft_cap is None:
    return raw
  return soft_cap * jnp.tanh(raw / soft_cap)


def logprob_and_entropy_reference(hidden: Array, weight: Array, targets: Array, *,
                                  temperature=1.0, mask: Optional[Array] = None,
                                  soft_cap: Optional[float] = None,
                                  impl: str = "reference", block_sizes=None):
  """Per-token ``log pi(target)`` and entropy from full logits (plain jnp).

  ``z = soft_cap(hidden @ weight) / temperature`` (float32 accumulation),
  ``logp_i = z_{i, y_i} - logsumexp(z_i)``,
  ``entropy_i = logsumexp(z_i) - sum_j softmax(z_i)_j z_ij``.

  Args:
    hidden: ``[N, H]`` hidden states (any float dtype).
    weight: ``[H, V]`` unembedding.
    targets: ``[N]`` integer token ids in ``[0, V)`` (any value where masked).
    temperature: positive scalar (float or traced array).
    mask: optional ``[N]`` bool; masked rows give ``logp = entropy = 0`` and
      zero gradient.
    soft_cap: optional positive float (``z = cap * tanh(z / cap)``).
    impl, block_sizes: accepted for signature compatibility and ignored.

  Returns:
    ``(logp [N] float32, entropy [N] float32)``. Inputs are validated by the
    public :func:`rljax.kernels.logprob_and_entropy`, not here.
  """
  del impl, block_sizes
  v = weight.shape[-1]
  raw = jnp.dot(hidden, weight, preferred_element_type=jnp.float32).astype(jnp.float32)
  z = apply_soft_cap(raw, soft_cap) / jnp.asarray(temperature, jnp.float32)
  logz = jax.nn.log_softmax(z, axis=-1)
  safe_t = jnp.clip(targets.astype(jnp.int32), 0, v - 1)
  logp = jnp.take_along_axis(logz, safe_t[:, None], axis=-1)[:, 0]
  entropy = -jnp.sum(jnp.exp(logz) * logz, axis=-1)
  if mask is not None:
    mask = jnp.asarray(mask).astype(bool)
    logp = jnp.where(mask, logp, 0.0)
    entropy = jnp.where(mask, entropy, 0.0)
  return logp, entropy
