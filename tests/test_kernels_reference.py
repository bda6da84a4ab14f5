"""Float64 NumPy reference for the rljax.kernels tests (independent of rljax.kernels),
validated here against central finite differences."""
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


def test_numpy_reference_gradient_matches_finite_differences():
  # Validates the hand-derived f64 gradients the other tests rely on.
  x, w, t, mask, a, b = make_inputs(0, 5, 4, 7)
  kw = dict(temperature=0.7, soft_cap=2.5, mask=mask)
  f = lambda x, w: float(np.sum(a * reference(x, w, t, **kw)[0]) + np.sum(b * reference(x, w, t, **kw)[1]))
  _, _, gx, gw = reference(x, w, t, a=a, b=b, **kw)
  x64, w64, eps = x.astype(np.float64), w.astype(np.float64), 1e-6
  for arr, g in ((x64, gx), (w64, gw)):
    num = np.zeros_like(arr)
    for idx in np.ndindex(arr.shape):
      old = arr[idx]
      arr[idx] = old + eps
      up = f(x64, w64)
      arr[idx] = old - eps
      dn = f(x64, w64)
      arr[idx] = old
      num[idx] = (up - dn) / (2 * eps)
    np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-8)
