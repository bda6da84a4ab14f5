"""Public entry point (temporary: calls the reference)."""
from rljax.kernels._reference import logprob_and_entropy_reference


def logprob_and_entropy(hidden, weight, targets, *, temperature=1.0, mask=None,
                        soft_cap=None, impl="auto", block_sizes=None):
  """Per-token ``(logp [N], entropy [N])`` in float32; see the module docs."""
  return logprob_and_entropy_reference(hidden, weight, targets, temperature=temperature,
                                       mask=mask, soft_cap=soft_cap)
