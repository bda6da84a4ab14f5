"""What the fidelity-reading tests share: the catalog's rows by name, a row's record and defaults, and two float64
NumPy transcriptions used by several of them (a stable log-softmax, vLLM's top-p filter)."""
import numpy as np

import rljax
from rljax.catalog import describe

ROWS = {r.name: r for r in rljax.catalog()}


def fid(name):
  """Row ``name``'s fidelity record."""
  return ROWS[name].fidelity


def defaults(name) -> dict:
  """Row ``name``'s defaults side by side: ``{hyper-parameter: (ours, theirs)}``."""
  return {k: (o, t) for k, o, t in fid(name).defaults}


def record(name) -> str:
  """Row ``name`` as ``python -m rljax.catalog NAME`` prints it."""
  return describe(ROWS[name])


def log_softmax(z):
  """log softmax over the last axis (float64, max-shifted)."""
  z = z - z.max(-1, keepdims=True)
  return z - np.log(np.exp(z).sum(-1, keepdims=True))


def vllm_top_p(z, p):
  """vLLM's top-p on (tempered) logits: ascending sort, drop while the cumulative prob ≤ 1 − p, keep the last."""
  if p >= 1.0:
    return z
  order = np.argsort(z, axis=-1)
  zs = np.take_along_axis(z, order, -1)
  cum = np.cumsum(np.exp(log_softmax(zs)), -1)
  drop = cum <= 1 - p
  drop[..., -1] = False
  out = np.empty_like(z)
  np.put_along_axis(out, order, np.where(drop, -np.inf, zs), -1)
  return out
