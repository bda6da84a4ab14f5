"""Independent float64 NumPy references for the ratio terms and corrections.

Written from the formulas in the spec (techniques-index.md / peer-conventions.md),
not from the rljax code: explicit loops where that is clearer. Each per-token
reference takes ``logp`` (the differentiable input) and ``logp_sg`` (the value
that the term detaches), so central finite differences in ``logp`` give the
gradient the term must have.
"""
import numpy as np
import jax.numpy as jnp

from rljax.types import PolicyOutputs, TrainBatch


def make_data(seed=0, b=5, t=7, *, noise=0.15, const_adv=True, empty_row=True, dtype=np.float64):
  rng = np.random.default_rng(seed)
  old = -rng.uniform(0.05, 2.5, (b, t))
  logp = old + noise * rng.normal(size=(b, t))
  behav = old + 0.5 * noise * rng.normal(size=(b, t))
  ref = old + noise * rng.normal(size=(b, t))
  mask = np.ones((b, t))
  if t >= 3:
    for i in range(b):
      mask[i, rng.integers(2, t + 1):] = 0  # ragged
    mask[0, 0] = 0  # a hole at the front
  if empty_row:
    mask[-1] = 0
  if const_adv:
    adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  else:
    adv = rng.normal(size=(b, t))
  adv[1] = -np.abs(adv[1])  # make sure both signs occur
  adv[2] = np.abs(adv[2])
  seg = np.zeros((b, t), np.int32)
  for i in range(b if t >= 3 else 0):
    cuts = np.sort(rng.choice(np.arange(1, t), size=2, replace=False))
    seg[i, cuts[0]:] = 1
    seg[i, cuts[1]:] = 3  # ids need not be contiguous numbers
  return dict(logp=logp.astype(dtype), old=old.astype(dtype), behav=behav.astype(dtype), ref=ref.astype(dtype),
              mask=mask.astype(dtype), adv=adv.astype(dtype), seg=seg)


def to_jax(d, dtype=jnp.float32, logp=None, **batch_overrides):
  b, t = d["mask"].shape
  fields = dict(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(d["mask"], dtype),
                advantages=jnp.asarray(d["adv"], dtype), group_id=jnp.zeros((b,), jnp.int32),
                logp_old=jnp.asarray(d["old"], dtype), logp_behavior=jnp.asarray(d["behav"], dtype),
                logp_ref=jnp.asarray(d["ref"], dtype), extras={"reward_segments": jnp.asarray(d["seg"], jnp.int32)})
  fields.update(batch_overrides)
  batch = TrainBatch(**fields)
  out = PolicyOutputs(logp=jnp.asarray(d["logp"] if logp is None else logp, dtype))
  return out, batch


# ----------------------------------------------------------------------------- helpers

def _clamp(x, lo=-20.0, hi=20.0):
  return np.minimum(np.maximum(x, lo), hi)


def _rowmean(x, m):
  n = m.sum(1)
  return (x * m).sum(1) / np.maximum(n, 1.0)


def ppo_core(r, a, el, eh, c=None):
  out = np.empty_like(r)
  for idx in np.ndindex(r.shape):
    ri, ai = r[idx], a[idx]
    l = max(-ai * ri, -ai * min(max(ri, 1 - el), 1 + eh))
    if c is not None and ai < 0:
      l = min(l, -ai * c)
    out[idx] = l
  return out


# ----------------------------------------------------------------------------- terms

def ref_ppo_clip(logp, logp_sg, d, el=0.2, eh=0.2, c=None, old=None):
  old = d["old"] if old is None else old
  r = np.exp(_clamp(logp - old))
  return ppo_core(r, d["adv"], el, eh, c) * d["mask"]


def ref_reinforce(logp, logp_sg, d, max_weight=None):
  w = np.exp(_clamp(logp_sg - d["behav"]))
  if max_weight is not None:
    w = np.minimum(w, max_weight)
  return -w * d["adv"] * logp * d["mask"]


def ref_gpg(logp, logp_sg, d):
  return -d["adv"] * logp * d["mask"]


def ref_gspo(logp, logp_sg, d, el=3e-4, eh=4e-4):
  m = d["mask"]
  s = np.exp(np.minimum(_rowmean(logp - d["old"], m), 10.0))
  r = np.repeat(s[:, None], m.shape[1], axis=1)
  return ppo_core(r, d["adv"], el, eh) * m


def ref_gspo_token(logp, logp_sg, d, el=3e-4, eh=4e-4):
  m = d["mask"]
  seq = _rowmean(logp_sg - d["old"], m)
  log_s = np.minimum(logp - logp_sg + seq[:, None], 10.0)
  return ppo_core(np.exp(log_s), d["adv"], el, eh) * m


def ref_gmpo(logp, logp_sg, d, el=0.4, eh=0.4):
  """verl compute_policy_loss_geo_mean, per sequence, spread over tokens."""
  m, a = d["mask"], d["adv"]
  b, t = m.shape
  out = np.zeros((b, t))
  for i in range(b):
    idx = np.nonzero(m[i])[0]
    if idx.size == 0:
      continue
    lrs = []
    for j in idx:
      lr = logp[i, j] - d["old"][i, j]
      s = np.sign(a[i, j])
      lrc = min(max(lr, -el), eh)
      lrs.append(s * min(s * lr, s * lrc))
    rho = np.exp(np.mean(lrs))
    abar = np.mean(a[i, idx])
    out[i, idx] = -abar * rho
  return out


def ref_segment_ratio(logp, logp_sg, d, el=0.2, eh=0.2, seg=None):
  m, a = d["mask"], d["adv"]
  seg = d["seg"] if seg is None else seg
  b, t = m.shape
  r = np.ones((b, t))
  for i in range(b):
    for sid in np.unique(seg[i]):
      toks = [j for j in range(t) if seg[i, j] == sid and m[i, j] > 0]
      if not toks:
        continue
      rho = np.exp(min(np.mean([logp[i, j] - d["old"][i, j] for j in toks]), 10.0))
      for j in toks:
        r[i, j] = rho
  return ppo_core(r, a, el, eh) * m


def ref_cispo(logp, logp_sg, d, el=None, eh=4.0):
  r = np.exp(logp_sg - d["old"])
  w = np.minimum(r, 1 + eh)
  if el is not None:
    w = np.maximum(w, 1 - el)
  return -w * d["adv"] * logp * d["mask"]


def ref_sapo(logp, logp_sg, d, tau_pos=1.0, tau_neg=1.05):
  r = np.exp(logp - d["old"])
  tau = np.where(d["adv"] > 0, tau_pos, tau_neg)
  gate = 1.0 / (1.0 + np.exp(-tau * (r - 1.0))) * 4.0 / tau
  return -d["adv"] * gate * d["mask"]


def ref_cpgd(logp, logp_sg, d, el=0.2, eh=0.2, alpha=0.1):
  lr = logp - d["old"]
  a = d["adv"]
  lo, hi = np.log(1 - el), np.log(1 + eh)
  pg = np.maximum(-a * lr, -a * np.clip(lr, lo, hi))
  drift = np.exp(lr) - 1 - lr
  return (pg + alpha * drift) * d["mask"]


def ref_pspo(logp, logp_sg, d, alpha=0.1):
  r = np.exp(logp - d["old"])
  return -d["adv"] * ((1 - alpha) * r + alpha) * d["mask"]


def ref_decoupled_ppo(logp, logp_sg, d, el=0.2, eh=0.2, cap=None):
  w = np.exp(d["old"] - d["behav"])
  keep = np.ones_like(w) if cap is None else (w <= cap).astype(float)
  return w * keep * ref_ppo_clip(logp, logp_sg, d, el, eh)


# ----------------------------------------------------------------------------- corrections (weight * keep)

def ref_k(d, train=None):
  train = d["old"] if train is None else train
  return train - d["behav"]


def ref_tis(d, U=2.0, level="token"):
  lk, m = ref_k(d) * d["mask"], d["mask"]
  if level == "token":
    x = lk
  elif level == "sequence":
    x = np.repeat(lk.sum(1, keepdims=True), m.shape[1], 1)
  else:
    x = np.repeat(_rowmean(lk, m)[:, None], m.shape[1], 1)
  return np.minimum(np.exp(_clamp(x)), U)


def ref_mis(d, lo=0.5, hi=2.0, level="token"):
  lk, m = ref_k(d) * d["mask"], d["mask"]
  if level == "token":
    x = lk
  elif level == "sequence":
    x = np.repeat(lk.sum(1, keepdims=True), m.shape[1], 1)
  else:
    x = np.repeat(_rowmean(lk, m)[:, None], m.shape[1], 1)
  k = np.exp(x)
  return np.where((k >= lo) & (k <= hi), k, 0.0)


def ref_rejection_keep(d, tau, estimator, level):
  m = d["mask"]
  lk = ref_k(d)
  rho = np.exp(lk)
  dv = {"k1": -lk, "k2": 0.5 * lk ** 2, "k3": rho - 1 - lk}[estimator]
  b, t = m.shape
  keep = np.ones((b, t))
  for i in range(b):
    idx = [j for j in range(t) if m[i, j] > 0]
    if not idx:
      continue
    if level == "token":
      for j in idx:
        v = dv[i, j]
        if (abs(v) if estimator == "k1" else v) > tau:
          keep[i, j] = 0
      continue
    vals = [dv[i, j] for j in idx]
    stat = {"sequence_sum": sum(vals), "sequence_mean": np.mean(vals), "sequence_max": max(vals)}[level]
    if (abs(stat) if estimator == "k1" else stat) > tau:
      keep[i, idx] = 0
  return keep


# ============================================================================= tests

import jax  # noqa: E402
import pytest  # noqa: E402

import rljax.objectives as O  # noqa: E402

CASES = {
    "ppo_clip": (lambda: O.ppo_clip(0.2, 0.28), lambda lp, s, d: ref_ppo_clip(lp, s, d, 0.2, 0.28)),
    "ppo_clip_dual": (lambda: O.ppo_clip(0.1, 0.12, dual_clip=1.1),
                      lambda lp, s, d: ref_ppo_clip(lp, s, d, 0.1, 0.12, 1.1)),
    "reinforce": (lambda: O.reinforce(), ref_reinforce),
    "reinforce_trunc": (lambda: O.reinforce(max_weight=1.02), lambda lp, s, d: ref_reinforce(lp, s, d, 1.02)),
    "gpg": (lambda: O.gpg(), ref_gpg),
    "gspo": (lambda: O.gspo(), ref_gspo),
    "gspo_wide": (lambda: O.gspo(0.05, 0.06), lambda lp, s, d: ref_gspo(lp, s, d, 0.05, 0.06)),
    "gspo_token": (lambda: O.gspo_token(), ref_gspo_token),
    "gspo_token_wide": (lambda: O.gspo_token(0.05, 0.06), lambda lp, s, d: ref_gspo_token(lp, s, d, 0.05, 0.06)),
    "gmpo": (lambda: O.gmpo(), ref_gmpo),
    "gmpo_tight": (lambda: O.gmpo(0.05, 0.07), lambda lp, s, d: ref_gmpo(lp, s, d, 0.05, 0.07)),
    "segment_ratio": (lambda: O.segment_ratio(0.05, 0.08), lambda lp, s, d: ref_segment_ratio(lp, s, d, 0.05, 0.08)),
    "cispo": (lambda: O.cispo(), ref_cispo),
    "cispo_two_sided": (lambda: O.cispo(0.1, 0.1), lambda lp, s, d: ref_cispo(lp, s, d, 0.1, 0.1)),
    "sapo": (lambda: O.sapo(), ref_sapo),
    "cpgd": (lambda: O.cpgd(0.1, 0.15, 0.3), lambda lp, s, d: ref_cpgd(lp, s, d, 0.1, 0.15, 0.3)),
    "pspo": (lambda: O.pspo(0.3), lambda lp, s, d: ref_pspo(lp, s, d, 0.3)),
    "decoupled_ppo": (lambda: O.decoupled_ppo(0.1, 0.1, behavior_cap=1.05),
                      lambda lp, s, d: ref_decoupled_ppo(lp, s, d, 0.1, 0.1, 1.05)),
}


def _fd_grad(ref, d, coef, h=1e-6):
  base = d["logp"]
  fd = np.zeros_like(base)
  for idx in np.ndindex(base.shape):
    e = np.zeros_like(base)
    e[idx] = h
    fd[idx] = (np.sum(coef * ref(base + e, base, d)) - np.sum(coef * ref(base - e, base, d))) / (2 * h)
  return fd


@pytest.mark.parametrize("name", sorted(CASES))
def test_value_and_gradient_match_float64_reference(name):
  """Per-token values against the NumPy reference; jax.grad against its central differences (float64)."""
  make, ref = CASES[name]
  term = make()
  coef = np.random.default_rng(3).uniform(0.5, 1.5, (5, 7))
  with jax.enable_x64(True):

    @jax.jit
    def value_and_grad(lp, batch):
      per_token = term(_po(lp), batch)[0]
      grad = jax.grad(lambda x: jnp.sum(coef * term(_po(x), batch)[0]))(lp)
      return per_token, grad

    fd_max = 0.0
    for seed, const_adv in ((1, True), (2, False)):
      d = make_data(seed=seed, const_adv=const_adv)
      out, batch = to_jax(d, jnp.float64)
      got, grad = value_and_grad(out.logp, batch)
      assert got.dtype == jnp.float64
      np.testing.assert_allclose(np.asarray(got), ref(d["logp"], d["logp"], d), rtol=1e-10, atol=1e-12)
      fd = _fd_grad(ref, d, coef)
      np.testing.assert_allclose(np.asarray(grad), fd, rtol=1e-6, atol=1e-8)
      assert np.all(np.asarray(grad)[d["mask"] == 0] == 0)
      fd_max = max(fd_max, np.abs(fd).max())
    assert fd_max > 0  # the case exercises a non-trivial gradient


def _po(lp):
  return PolicyOutputs(logp=lp)


@pytest.mark.parametrize("name", sorted(n for n in CASES if n in {t.name for t in O.TECHNIQUES}))
def test_jit_equals_eager_float32(name):
  make, ref = CASES[name]
  d = make_data(seed=4)
  out, batch = to_jax(d)
  term = make()
  per_token, _ = term(out, batch)  # eager, float32, against the float64 reference
  np.testing.assert_allclose(np.asarray(per_token), ref(d["logp"], d["logp"], d), rtol=2e-5, atol=2e-6)
  objective = O.chain(term, aggregate="seq_mean_token_mean")

  def loss_fn(lp):
    return objective(_po(lp), batch)

  (l0, m0), g0 = jax.value_and_grad(loss_fn, has_aux=True)(out.logp)
  (l1, m1), g1 = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))(out.logp)
  np.testing.assert_allclose(l0, l1, rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(g0, g1, rtol=1e-5, atol=1e-7)
  assert m0.keys() == m1.keys()
  for k in m0:
    np.testing.assert_allclose(m0[k], m1[k], rtol=1e-5, atol=1e-6, err_msg=k)
    assert np.isfinite(np.asarray(m0[k])).all(), k


# ----------------------------------------------------------------------------- hand-derived values


def _tiny(logp, old, adv, mask=None, **kw):
  logp, old, adv = (np.asarray(x, np.float32)[None] for x in (logp, old, adv))
  mask = np.ones_like(logp) if mask is None else np.asarray(mask, np.float32)[None]
  b, t = logp.shape
  batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask), advantages=jnp.asarray(adv),
                     group_id=jnp.zeros((b,), jnp.int32), logp_old=jnp.asarray(old), **kw)
  return PolicyOutputs(logp=jnp.asarray(logp)), batch


def test_ppo_clip_hand_values():
  ln = np.log
  # r = 1.5, 1.5, 0.5, 4.0, 1.1 ; A = +1, -1, -1, -1, +2
  out, batch = _tiny([ln(1.5), ln(1.5), ln(0.5), ln(4.0), ln(1.1)], [0] * 5, [1, -1, -1, -1, 2])
  loss, m = O.ppo_clip(0.2, 0.28, dual_clip=3.0)(out, batch)
  # +1: min(1.5, 1.28) -> -1.28; -1,r=1.5: max(1.5, 1.28)=1.5 < 3; -1,r=.5: max(.5,.8)=.8; -1,r=4: min(4,3)=3; +2: -2.2
  np.testing.assert_allclose(np.asarray(loss)[0], [-1.28, 1.5, 0.8, 3.0, -2.2], rtol=1e-6)
  np.testing.assert_allclose(m["clip_frac_high"], 1 / 5, rtol=1e-6)
  np.testing.assert_allclose(m["clip_frac_low"], 1 / 5, rtol=1e-6)
  np.testing.assert_allclose(m["dual_clip_frac"], 1 / 5, rtol=1e-6)
  np.testing.assert_allclose(m["ratio_max"], 4.0, rtol=1e-6)
  np.testing.assert_allclose(m["ratio_mean"], (1.5 + 1.5 + 0.5 + 4 + 1.1) / 5, rtol=1e-6)
  k3 = np.mean([r - 1 - np.log(r) for r in (1.5, 1.5, 0.5, 4.0, 1.1)])
  np.testing.assert_allclose(m["approx_kl"], k3, rtol=1e-5)
  loss_nodual, _ = O.ppo_clip(0.2, 0.28)(out, batch)
  np.testing.assert_allclose(np.asarray(loss_nodual)[0, 3], 4.0, rtol=1e-6)


def test_gspo_and_sapo_hand_values():
  out, batch = _tiny([0.1, 0.3, 9.0], [0, 0, 0], [2.0, 2.0, 2.0], mask=[1, 1, 0])
  loss, m = O.gspo(0.5, 0.5)(out, batch)
  s = np.exp(0.2)  # geometric mean of e^0.1, e^0.3; the masked token is ignored
  np.testing.assert_allclose(np.asarray(loss)[0], [-2 * s, -2 * s, 0.0], rtol=1e-6)
  np.testing.assert_allclose(m["ratio_mean"], s, rtol=1e-6)
  loss, _ = O.gspo(0.1, 0.1)(out, batch)
  np.testing.assert_allclose(np.asarray(loss)[0, :2], [-2 * 1.1, -2 * 1.1], rtol=1e-6)
  # SAPO at r = 1: -A * sigmoid(0) * 4 / tau = -2 A / tau
  out, batch = _tiny([0.0, 0.0], [0.0, 0.0], [1.0, -1.0])
  loss, _ = O.sapo(1.0, 1.05)(out, batch)
  np.testing.assert_allclose(np.asarray(loss)[0], [-2.0, 2.0 / 1.05], rtol=1e-6)


def test_cispo_and_pspo_hand_values():
  ln = np.log
  out, batch = _tiny([ln(0.5) - 1.0, ln(7.0) - 1.0], [-1.0, -1.0], [1.0, 1.0])
  loss, m = O.cispo(eps_high=4.0)(out, batch)  # weights 0.5 (no lower clip) and min(7, 5) = 5
  np.testing.assert_allclose(np.asarray(loss)[0], [-0.5 * (ln(0.5) - 1), -5.0 * (ln(7.0) - 1)], rtol=1e-6)
  np.testing.assert_allclose(m["clip_frac_high"], 0.5)
  loss, _ = O.pspo(0.25)(out, batch)  # r~ = 0.75 r + 0.25
  np.testing.assert_allclose(np.asarray(loss)[0], [-(0.75 * 0.5 + 0.25), -(0.75 * 7 + 0.25)], rtol=1e-6)
  # clip_eps clips the smoothed ratio r~ = 0.625, 5.5 (A = 1): max(-r~, -clip(r~, 0.8, 1.2)) = -0.625, -1.2
  loss, m = O.pspo(0.25, clip_eps=0.2)(out, batch)
  np.testing.assert_allclose(np.asarray(loss)[0], [-0.625, -1.2], rtol=1e-6)
  np.testing.assert_allclose(m["clip_frac_high"], 0.5)


# ----------------------------------------------------------------------------- invariants


def _grad(term, out, batch, agg="token_sum"):
  objective = O.chain(term, aggregate=agg)
  return np.asarray(jax.jit(jax.grad(lambda lp: objective(_po(lp), batch)[0]))(out.logp))


def _pair(factory_a, factory_b, batch, agg):
  """Jitted ``eps -> ((loss_a, grad_a), (loss_b, grad_b))``; eps is traced so one compile serves all."""

  @jax.jit
  def f(eps, lp):
    res = []
    for factory in (factory_a, factory_b):
      objective = O.chain(factory(eps[0], eps[1]), aggregate=agg)
      res.append(jax.value_and_grad(lambda x: objective(_po(x), batch)[0])(lp))
    return res

  return f


def _loss(term, out, batch, agg):
  return jax.jit(O.chain(term, aggregate=agg))(out, batch)[0]


def _jterm(term, out, batch):
  return jax.jit(term)(out, batch)


def test_ppo_clip_at_ratio_one_has_reinforce_and_gpg_gradient():
  d = make_data(seed=5)
  d["old"] = d["logp"].copy()
  d["behav"] = d["logp"].copy()
  out, batch = to_jax(d)
  g_ppo = _grad(O.ppo_clip(0.2, 0.28, 3.0), out, batch)
  g_rf = _grad(O.reinforce(), out, batch)
  g_gpg = _grad(O.gpg(), out, batch)
  g_sapo = _grad(O.sapo(), out, batch)
  g_cpgd = _grad(O.cpgd(), out, batch)
  g_cispo = _grad(O.cispo(), out, batch)
  expected = -d["adv"] * d["mask"]
  for g in (g_ppo, g_rf, g_gpg, g_sapo, g_cpgd, g_cispo):
    np.testing.assert_allclose(g, expected, rtol=1e-6, atol=1e-7)
  loss, m = _jterm(O.cpgd(), out, batch)
  np.testing.assert_allclose(loss, 0.0, atol=1e-7)
  np.testing.assert_allclose(m["drift"], 0.0, atol=1e-7)


def test_gspo_with_one_token_sequences_equals_ppo_clip():
  d = make_data(seed=6, b=9, t=1, empty_row=False)
  d["mask"][:] = 1
  out, batch = to_jax(d)
  for agg in ("token_mean", "seq_mean_token_mean"):
    f = _pair(O.gspo, O.ppo_clip, batch, agg)
    for eps in ((0.2, 0.28), (0.01, 0.02)):
      (a, ga), (b, gb) = f(jnp.asarray(eps), out.logp)
      np.testing.assert_allclose(a, b, rtol=1e-6)
      np.testing.assert_allclose(ga, gb, rtol=1e-6, atol=1e-7)


def test_segment_ratio_with_one_segment_equals_gspo():
  d = make_data(seed=7)
  d["seg"][:] = 2
  out, batch = to_jax(d)
  f = _pair(O.segment_ratio, O.gspo, batch, "token_sum")
  for eps in ((0.2, 0.28), (0.02, 0.03)):
    (a, ga), (b, gb) = f(jnp.asarray(eps), out.logp)
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ga, gb, rtol=1e-5, atol=1e-7)


def test_segment_ratio_is_constant_within_segments_and_reads_other_ids():
  d = make_data(seed=8)
  out, batch = to_jax(d)
  # same result through turn_ids, an extras key and a callable
  ids = batch.extras["reward_segments"]
  ref, _ = _jterm(O.segment_ratio(0.05), out, batch)
  rho = ref_segment_ratio(d["logp"], None, d, 0.99, 1e6) / -d["adv"]  # unclipped: L = -A rho
  for i in range(d["mask"].shape[0]):
    for sid in np.unique(d["seg"][i]):
      sel = (d["seg"][i] == sid) & (d["mask"][i] > 0)
      if sel.any():
        assert np.ptp(rho[i][sel]) < 1e-12
  for kw, b2 in ((dict(segment_ids="turn_ids"), batch.replace(turn_ids=ids, extras={})),
                 (dict(segment_ids="segment_ids"), batch.replace(segment_ids=ids, extras={})),
                 (dict(segment_ids="items"), batch.replace(extras={"items": ids})),
                 (dict(segment_ids=lambda bb: ids, max_segments=4), batch)):
    got, _ = _jterm(O.segment_ratio(0.05, **kw), out, b2)
    np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_gmpo_without_clipping_equals_gspo_sequence_ratio():
  d = make_data(seed=9)
  out, batch = to_jax(d)
  agg = "seq_mean_token_mean"
  a = _loss(O.gmpo(0.9, 10.0), out, batch, agg)
  b = _loss(O.gspo(0.9, 1e6), out, batch, agg)
  np.testing.assert_allclose(a, b, rtol=1e-6)
  np.testing.assert_allclose(_grad(O.gmpo(0.9, 10.0), out, batch, agg), _grad(O.gspo(0.9, 1e6), out, batch, agg),
                             rtol=1e-5, atol=1e-7)
  # verl's geo_mean takes torch.mean over rows (empty rows count as 0); ours skips empty rows
  per_seq = ref_gmpo(d["logp"], d["logp"], d).sum(1) / np.maximum(d["mask"].sum(1), 1)
  nonempty = d["mask"].sum(1) > 0
  np.testing.assert_allclose(a, per_seq[nonempty].mean(), rtol=1e-5)


def test_gspo_token_matches_gspo_value_and_gradient():
  d = make_data(seed=10)
  out, batch = to_jax(d)
  f = _pair(O.gspo_token, O.gspo, batch, "seq_mean_token_mean")
  for eps in ((3e-4, 4e-4), (0.05, 0.06), (0.5, 0.5)):
    (a, ga), (b, gb) = f(jnp.asarray(eps), out.logp)
    np.testing.assert_allclose(a, b, rtol=1e-6)
    np.testing.assert_allclose(ga, gb, rtol=1e-5, atol=1e-7)


def test_decoupled_ppo_with_equal_proximal_and_behaviour_is_ppo_clip():
  d = make_data(seed=11)
  d["behav"] = d["old"].copy()
  out, batch = to_jax(d)
  a, _ = O.decoupled_ppo(0.2, 0.28, 3.0)(out, batch)
  b, _ = O.ppo_clip(0.2, 0.28, 3.0)(out, batch)
  np.testing.assert_allclose(a, b, rtol=1e-6)
  # clamp mode caps the behaviour weight
  d2 = make_data(seed=11)
  out, batch = to_jax(d2)
  got, m = O.decoupled_ppo(0.2, behavior_cap=1.01, cap_mode="clamp")(out, batch)
  w = np.minimum(np.exp(d2["old"] - d2["behav"]), 1.01)
  np.testing.assert_allclose(got, w * ref_ppo_clip(d2["logp"], None, d2, 0.2, 0.2), rtol=1e-5, atol=1e-7)
  assert float(m["behavior_masked_frac"]) == 0.0
  with pytest.raises(ValueError, match="logp_old"):
    O.decoupled_ppo()(out, batch.replace(logp_old=None))



def test_at_one_update_per_batch_decoupled_ppo_is_behaviour_weighted_pg_with_no_clip():
  """One update per batch on one minibatch takes the proximal log-probs from the update's own forward
  (``logp_old`` = the current values): decoupled PPO's ratio is then exactly 1, its clip never binds, and its
  gradient is the behaviour-weighted policy gradient  d/dlogp_t = -w_t A_t m_t / sum(m),  w_t = pi_prox / pi_behav
  (float64 reference). PPO clip against the stale behaviour policy instead zeroes the tokens it clips -- why the
  real-model arena's staleness entries (docs/arena.md) compare a clipped and an unclipped objective at mu = 1."""
  d = make_data(seed=5, noise=0.6, const_adv=False)
  d["old"] = d["logp"].copy()
  out, batch = to_jax(d)

  def grad(term):
    obj = O.chain(term, aggregate=O.token_mean)
    return np.asarray(jax.grad(lambda lp: obj(out.replace(logp=lp), batch)[0])(out.logp), np.float64)

  w = np.exp(_clamp(d["old"] - d["behav"]))
  want = -w * d["adv"] * d["mask"] / d["mask"].sum()
  np.testing.assert_allclose(grad(O.decoupled_ppo(0.2, 0.2)), want, rtol=1e-5, atol=1e-8)
  stale = grad(O.ppo_clip(0.2, 0.2, old_logp="logp_behavior"))
  r, adv, m = np.exp(d["logp"] - d["behav"]), d["adv"], d["mask"] > 0
  clipped = m & (((adv > 0) & (r > 1.2)) | ((adv < 0) & (r < 0.8)))
  assert clipped.sum() >= 3 and (~clipped & m).any()
  np.testing.assert_array_equal(stale[clipped], 0.0)
  np.testing.assert_allclose(stale[~clipped & m], want[~clipped & m], rtol=1e-5)

def test_ratio_against_a_log_prob_from_another_prompt():
  """Hints / Guide / OC-GRPO: pass the behaviour log-prob computed under the other prompt."""
  d = make_data(seed=12)
  out, batch = to_jax(d)
  hint = batch.logp_ref  # any [B, T] array stands for "log pi_old(y | hinted prompt)"
  with_extras = batch.replace(extras={"logp_hint": hint})
  for make in (lambda **k: O.ppo_clip(0.2, **k), lambda **k: O.gspo(0.1, **k), lambda **k: O.cispo(**k)):
    a, _ = make(old_logp="logp_hint")(out, with_extras)
    b, _ = make()(out, batch.replace(logp_old=hint))
    c, _ = make(old_logp=lambda bb: bb.logp_ref)(out, batch)
    e, _ = make(old_logp="logp_ref")(out, batch)
    for x in (a, c, e):
      np.testing.assert_allclose(x, b, rtol=1e-6)


def test_clip_bounds_may_be_traced_arrays():
  d = make_data(seed=13)
  out, batch = to_jax(d)

  @jax.jit
  def f(eps_low, eps_high, lp):
    objective = O.chain(O.ppo_clip(eps_low, eps_high, correction=O.icepop(eps_low, 1.0 / eps_low)),
                        O.cpgd(eps_low, eps_high, eps_low), O.pspo(eps_low), O.cispo(eps_low, eps_high))
    return jax.value_and_grad(lambda x: objective(_po(x), batch)[0])(lp)

  for lo, hi in ((0.2, 0.28), (0.1, 0.5)):
    l1, g1 = f(jnp.float32(lo), jnp.float32(hi), out.logp)
    objective = O.chain(O.ppo_clip(lo, hi, correction=O.icepop(lo, 1.0 / lo)), O.cpgd(lo, hi, lo), O.pspo(lo),
                        O.cispo(lo, hi))
    l0, g0 = jax.value_and_grad(lambda x: objective(_po(x), batch)[0])(out.logp)
    np.testing.assert_allclose(l1, l0, rtol=1e-5)
    np.testing.assert_allclose(g1, g0, rtol=1e-5, atol=1e-7)
  # a concrete jax array is still validated
  with pytest.raises(ValueError, match="eps_low"):
    O.ppo_clip(jnp.float32(1.5))


def test_metrics_match_numpy():
  d = make_data(seed=14)
  out, batch = to_jax(d)
  _, m = O.ppo_clip(0.1, 0.15)(out, batch)
  mask = d["mask"] > 0
  r = np.exp(d["logp"] - d["old"])[mask]
  a = d["adv"][mask]
  np.testing.assert_allclose(m["ratio_mean"], r.mean(), rtol=1e-5)
  np.testing.assert_allclose(m["ratio_max"], r.max(), rtol=1e-5)
  np.testing.assert_allclose(m["ratio_min"], r.min(), rtol=1e-5)
  np.testing.assert_allclose(m["approx_kl"], np.mean(r - 1 - np.log(r)), rtol=1e-4, atol=1e-7)
  np.testing.assert_allclose(m["approx_kl_k1"], np.mean(-np.log(r)), rtol=1e-4, atol=1e-7)
  np.testing.assert_allclose(m["clip_frac_low"], np.mean((a < 0) & (r < 0.9)), rtol=1e-6)
  np.testing.assert_allclose(m["clip_frac_high"], np.mean((a > 0) & (r > 1.15)), rtol=1e-6)
  assert 0 < float(m["clip_frac"]) < 1
  np.testing.assert_allclose(m["pg_loss"], ref_ppo_clip(d["logp"], None, d, 0.1, 0.15)[mask].mean(), rtol=1e-5)
  ent = np.random.default_rng(0).uniform(0, 3, d["mask"].shape)
  for term in (O.ppo_clip(), O.gmpo(), O.cispo()):
    _, m = term(out.replace(entropy=jnp.asarray(ent, jnp.float32)), batch)
    np.testing.assert_allclose(m["entropy"], ent[mask].mean(), rtol=1e-5)
  with pytest.raises(ValueError, match="entropy"):
    O.ppo_clip()(out.replace(entropy=jnp.zeros((2, 2))), batch)


def test_catalog_rows():
  names = {t.name: t for t in O.TECHNIQUES}
  for name in ("ppo_clip", "reinforce", "gpg", "gspo", "gspo_token", "gmpo", "segment_ratio", "cispo", "sapo",
               "cpgd", "pspo", "decoupled_ppo"):
    assert names[name].kind == "policy_loss"
    assert getattr(O, name) is names[name].fn
    assert names[name].fn.__doc__ and "L" in names[name].fn.__doc__
    assert getattr(O, name)().name == name if name not in ("reinforce", "gpg") else True


# ----------------------------------------------------------------------------- bad input


def _bad_batch(**changes):
  out, batch = to_jax(make_data(seed=15))
  return out, batch.replace(**changes)


@pytest.mark.parametrize("factory,match", [
    (lambda: O.ppo_clip(1.0), "eps_low"),
    (lambda: O.ppo_clip(-0.1), "eps_low"),
    (lambda: O.ppo_clip(0.2, -0.1), "eps_high"),
    (lambda: O.ppo_clip(0.2, dual_clip=0.5), "dual_clip"),
    (lambda: O.ppo_clip(float("nan")), "eps_low"),
    (lambda: O.gspo(1.2), "eps_low"),
    (lambda: O.segment_ratio(0.2, max_segments=0), "max_segments"),
    (lambda: O.cispo(eps_low=1.5), "eps_low"),
    (lambda: O.cispo(eps_high=-1.0), "eps_high"),
    (lambda: O.sapo(tau_pos=0.0), "tau_pos"),
    (lambda: O.sapo(tau_neg=-1.0), "tau_neg"),
    (lambda: O.cpgd(drift_coef=-0.1), "drift_coef"),
    (lambda: O.cpgd(drift_estimator="k7"), "drift_estimator"),
    (lambda: O.pspo(1.5), "alpha"),
    (lambda: O.pspo(-0.1), "alpha"),
    (lambda: O.decoupled_ppo(behavior_cap=-1.0), "behavior_cap"),
    (lambda: O.decoupled_ppo(cap_mode="drop"), "cap_mode"),
    (lambda: O.reinforce(max_weight=0.0), "max_weight"),
    (lambda: O.ppo_clip(correction="icepop"), "correction"),
    (lambda: O.ppo_clip(old_logp=3), "old_logp"),
    (lambda: O.gmpo(eps_low=-1.0), "eps_low"),
])
def test_bad_hyper_parameters_raise(factory, match):
  with pytest.raises(ValueError, match=match):
    factory()


@pytest.mark.parametrize("name", sorted(n for n in CASES if n in {t.name for t in O.TECHNIQUES}))
def test_bad_batches_raise_at_trace_time(name):
  make, _ = CASES[name]
  term = make()
  out, batch = _bad_batch()
  b, t = batch.loss_mask.shape
  with pytest.raises(ValueError, match="advantages"):
    term(out, batch.replace(advantages=jnp.zeros((b, t + 1))))
  with pytest.raises(ValueError, match="loss_mask"):
    term(out, batch.replace(loss_mask=batch.loss_mask * 0.5))
  with pytest.raises(ValueError, match="loss_mask"):
    term(out, batch.replace(loss_mask=jnp.ones((b, t - 1))))
  with pytest.raises(ValueError, match="logp"):
    term(_po(jnp.zeros((b,))), batch)
  # the shape errors also fire while tracing under jit
  with pytest.raises(ValueError, match="advantages"):
    jax.jit(lambda o, bb: term(o, bb)[0])(out, batch.replace(advantages=jnp.zeros((b, t + 1))))


def test_missing_or_misshaped_log_probs_raise():
  out, batch = _bad_batch()
  b, t = batch.loss_mask.shape
  with pytest.raises(ValueError, match="logp_old or logp_behavior"):
    O.ppo_clip()(out, batch.replace(logp_old=None, logp_behavior=None))
  with pytest.raises(ValueError, match="logp_old"):
    O.ppo_clip()(out, batch.replace(logp_old=jnp.zeros((b, t + 2))))
  with pytest.raises(ValueError, match="old_logp"):
    O.ppo_clip(old_logp="logp_hint")(out, batch)
  with pytest.raises(ValueError, match="logp_behavior"):
    O.reinforce()(out, batch.replace(logp_behavior=None))
  with pytest.raises(ValueError, match="segment_ids"):
    O.segment_ratio(max_segments=2)(out, batch)  # ids go up to 3
  with pytest.raises(ValueError, match="reward_segments"):
    O.segment_ratio()(out, batch.replace(extras={}))
  with pytest.raises(ValueError, match="integer"):
    O.segment_ratio()(out, batch.replace(extras={"reward_segments": batch.extras["reward_segments"].astype(float)}))
  # the old policy falls back to logp_behavior
  a, _ = O.ppo_clip()(out, batch.replace(logp_old=None))
  c, _ = O.ppo_clip()(out, batch.replace(logp_old=batch.logp_behavior))
  np.testing.assert_allclose(a, c)
