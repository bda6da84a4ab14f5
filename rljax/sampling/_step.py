"""One decode step's sampling math (pure, jittable): untempered logits from hidden states,
``sampling_step`` (Gumbel-max draw from the truncated tempered distribution and its log-probs) and
a vectorised ``argmax``."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from rljax.models import dot_t
from rljax.sampling import _truncation

Array = jax.Array

__all__ = ["sampling_step"]


def _logits(model, hidden: Array, mesh=None, head_t=None) -> Array:
  """Untempered float32 logits ``softcap(hidden @ W)`` exactly as the fused
  log-prob kernel computes them (``[..., H] -> [..., V]``); with a ``mesh`` (``[B, H]`` rows) the rows stay split
  over its batch axes and the head is scored vocabulary-split (``rljax.parallel.vocab_split_logits``).
  ``head_t``: ``W`` stored ``[V, H]`` (``Transformer.decode_weights``; ``hidden [B, H]``), scored as
  ``(W^T hidden^T)^T`` (``rljax.models._dots.dot_t``)."""
  if head_t is not None:
    raw = dot_t(hidden, head_t, preferred_element_type=jnp.float32)
  elif mesh is not None:
    from rljax.parallel import vocab_split_logits  # pylint: disable=import-outside-toplevel
    raw = vocab_split_logits(hidden, model.lm_head_weight(), mesh)
  else:
    raw = jnp.dot(hidden, model.lm_head_weight(), preferred_element_type=jnp.float32)
  raw = raw.astype(jnp.float32)
  cap = model.cfg.final_logit_softcap
  if cap is not None:
    raw = cap * jnp.tanh(raw / cap)
  return raw


def sampling_step(logits: Array, keys: Array, temperature: Array, top_k: Array,
                  top_p: Array, min_p: Array, *, greedy: bool = False,
                  return_entropy: bool = True):
  """Samples one token per row and its log-probs.

  ``x ~ softmax(trunc(z / T))`` by Gumbel-max (``argmax(trunc(z/T) + g)``,
  ``g ~ Gumbel(0, 1)`` drawn from the row's own key), which is an exact draw
  from the truncated tempered distribution; ``greedy``: ``x = argmax z``.

  Args:
    logits: ``[B, V]`` untempered float32 logits z.
    keys: ``[B]`` PRNG keys (one per row).
    temperature, top_p, min_p: ``[B]`` float32; top_k: ``[B]`` int32.
  Returns:
    ``(token [B] int32, logp_behavior [B] = log softmax(z)[x], logp_sampling
    [B] = log softmax(trunc(z / T))[x] (0 when greedy), entropy [B] or None)``.
  """
  z = logits.astype(jnp.float32)
  logp_all = jax.nn.log_softmax(z, axis=-1)
  entropy = None
  if return_entropy:
    entropy = -jnp.sum(jnp.exp(logp_all) * logp_all, axis=-1)
  if greedy:
    tok = _argmax_last(z)
    logp_s = jnp.zeros(z.shape[:1], jnp.float32)
  else:
    zt = _truncation.truncate_logits(z, temperature, top_k, top_p, min_p)
    g = jax.vmap(lambda k: jax.random.gumbel(k, z.shape[-1:], jnp.float32))(keys)
    tok = _argmax_last(zt + g)
    logp_t = jax.nn.log_softmax(zt, axis=-1)
    logp_s = jnp.take_along_axis(logp_t, tok[:, None], axis=-1)[:, 0]
  logp_b = jnp.take_along_axis(logp_all, tok[:, None], axis=-1)[:, 0]
  return tok, logp_b, logp_s, entropy


def _argmax_last(x: Array) -> Array:
  """``argmax(x, -1)`` as int32 (first index among ties) from two plain reductions (max, then
  the smallest index attaining it): XLA:CPU runs the (value, index) reduce of ``jnp.argmax``
  unvectorised, ~2x slower per decode step on ``[64, 512]``. A row containing NaN (never the
  case for finite logits) gives the last index instead of the first NaN's."""
  v = x.shape[-1]
  m = jnp.max(x, axis=-1, keepdims=True)
  idx = jnp.min(jnp.where(x == m, jnp.arange(v, dtype=jnp.int32), v), axis=-1)
  return jnp.minimum(idx, v - 1)
