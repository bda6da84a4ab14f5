"""Fused log-prob and entropy of the LM head (``rljax.kernels``).

``logprob_and_entropy(hidden [N, H], weight [H, V], targets [N])`` returns the
per-token ``log pi(target)`` and policy entropy without materialising the
``[N, V]`` logits, with a ``jax.custom_vjp`` for gradients w.r.t. ``hidden``
and ``weight`` from both outputs. Implementations: chunked XLA (CPU default),
Pallas Mosaic TPU, Pallas GPU (Triton lowering), the materialising reference,
and a vocab-parallel ``jax.shard_map`` version. See ``docs/kernels.md``.
"""
from rljax.kernels._config import BlockSizes
from rljax.kernels._reference import logprob_and_entropy_reference
from rljax.kernels._api import logprob_and_entropy
from rljax.kernels._sharded import logprob_and_entropy_sharded

__all__ = ["BlockSizes", "logprob_and_entropy", "logprob_and_entropy_reference",
           "logprob_and_entropy_sharded"]
