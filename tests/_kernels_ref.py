"""Float64 NumPy reference for the kernels tests (independent of rljax.kernels)."""
import numpy as np


def make_inputs(seed, n, h, v, scale=3.0, masked_frac=0.25):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(n, h)).astype(np.float32)
  w = (rng.normal(size=(h, v)) * scale / np.sqrt(h)).astype(np.float32)
  t = rng.integers(0, v, size=n).astype(np.int32)
  mask = rng.random(n) >= masked_frac
  t = np.where(mask, t, -100).astype(np.int32)  # padding ids where masked
  a = rng.normal(size=n)  # upstream cotangents of logp / entropy
  b = rng.normal(size=n)
  return x, w, t, mask, a, b


def reference(x, w, t, *, temperature=1.0, soft_cap=None, mask=None, a=None, b=None):
  """(logp, entropy, dL/dx, dL/dw) in float64 for L = sum a*logp + sum b*entropy."""
  x = np.asarray(x, np.float64)
  w = np.asarray(w, np.float64)
  n, v = x.shape[0], w.shape[1]
  mask = np.ones(n, bool) if mask is None else np.asarray(mask, bool)
  t = np.where(mask, t, 0)
  raw = x @ w
  if soft_cap is None:
    c, dcap = raw, np.ones_like(raw)
  else:
    th = np.tanh(raw / soft_cap)
    c, dcap = soft_cap * th, 1.0 - th ** 2
  z = c / temperature
  zmax = z.max(axis=1, keepdims=True)
  e = np.exp(z - zmax)
  s = e.sum(axis=1, keepdims=True)
  p = e / s
  lse = (zmax + np.log(s))[:, 0]
  logp = z[np.arange(n), t] - lse
  ez = (p * z).sum(axis=1)
  ent = lse - ez
  logp = np.where(mask, logp, 0.0)
  ent = np.where(mask, ent, 0.0)
  if a is None:
    return logp, ent
  a = np.where(mask, a, 0.0)[:, None]
  b = np.where(mask, b, 0.0)[:, None]
  onehot = np.zeros_like(z)
  onehot[np.arange(n), t] = 1.0
  dz = a * (onehot - p) - b * p * (z - ez[:, None])
  draw = dz / temperature * dcap
  return logp, ent, draw @ w.T, x.T @ draw


def rel_err(got, want):
  got = np.asarray(got, np.float64)
  want = np.asarray(want, np.float64)
  return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))
