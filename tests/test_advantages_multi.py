"""Multi-reward advantage estimators (rewards [B, K])."""
import functools

import jax
import numpy as np
import pytest

from rljax import advantages as A


def grouped(sizes, k, seed=0, binary=False):
  rng = np.random.RandomState(seed)
  gid = np.concatenate([np.full(s, i) for i, s in enumerate(sizes)]).astype(np.int32)
  r = rng.randint(0, 2, (gid.size, k)) if binary else rng.randn(gid.size, k)
  return r.astype(np.float32), gid


def np_grpo(x, gid, ddof=1, eps=1e-6):
  out = np.zeros(x.shape, np.float64)
  for g in np.unique(gid):
    idx = gid == g
    v = x[idx].astype(np.float64)
    sd = v.std(ddof=ddof) if v.size > ddof else 0.0
    out[idx] = 0.0 if sd + eps == 0 else (v - v.mean()) / (sd + eps)
  return out


def test_gdpo_reference_and_scale_invariance():
  r, g = grouped([4, 5, 3], 3, seed=1)
  w = [1.0, 0.5, 2.0]
  adv, info = jax.jit(A.gdpo, static_argnames=("weights",))(r, g, weights=tuple(w))
  total = sum(w[k] * np_grpo(r[:, k], g) for k in range(3))
  ref = (total - total.mean()) / np.sqrt(total.var(ddof=1) + 1e-8)
  np.testing.assert_allclose(adv, ref, rtol=1e-4, atol=1e-5)
  scaled = r * np.array([10.0, 1.0, 1.0], np.float32)
  np.testing.assert_allclose(A.gdpo(scaled, g, weights=w)[0], adv, rtol=1e-3, atol=1e-4)
  one, _ = A.gdpo(r[:, :1], g)
  g1 = np.asarray(A.grpo(r[:, 0], g)[0])
  np.testing.assert_allclose(one, A.masked_whiten(g1, np.ones_like(g1)), rtol=1e-5, atol=1e-6)
  with pytest.raises(ValueError, match="weights"):
    A.gdpo(r, g, weights=[1.0, 2.0])


def np_dara_authors(r, gid, *, w_max=5.0, calibration="positive", eps=1e-6, tau=1e-8):
  """Float64 NumPy restatement of the authors' ``rdgdpo`` estimator (github.com/zhaihaotian/DARA,
  math/rdgdpo/advantages.py): sample-std group GRPO per reward, density = fraction of groups whose
  Σ|A| > tau, w = min(w_max, sqrt(max ρ / ρ)), positive/symmetric calibration, batch whitening (ddof=1)."""
  k = r.shape[1]
  per = np.stack([np_grpo(r[:, j], gid, ddof=1, eps=eps) for j in range(k)], 1)
  groups = np.unique(gid)
  active = np.array([[np.abs(per[gid == g, j]).sum() > tau for j in range(k)] for g in groups])
  rho = active.mean(0)
  w = np.ones(k)
  live = rho > 0
  w[live] = np.minimum(np.sqrt(rho[live].max() / rho[live]), w_max)
  cal = w * np.clip(per, 0, None) + np.clip(per, None, 0) if calibration == "positive" else w * per
  s = cal.sum(1)
  return (s - s.mean()) / (s.std(ddof=1) + eps), w, rho


def dara_batch():
  """30 groups of 4, three binary rewards with densities 1, 1/2 and 1/30 (hand-built)."""
  gid = np.repeat(np.arange(30), 4).astype(np.int32)
  r = np.zeros((120, 3), np.float32)
  r[:, 0] = np.tile([1, 0, 1, 0], 30)          # varies in every group: ρ_0 = 1
  r[gid < 15, 1] = np.tile([1, 1, 0, 0], 15)   # varies in 15 of 30 groups: ρ_1 = 1/2
  r[gid >= 15, 1] = 1.0                         # constant (inactive) elsewhere
  r[0, 2] = 1.0                                 # varies in 1 of 30 groups: ρ_2 = 1/30
  return r, gid


def test_dara_default_is_authors_form():
  r, g = dara_batch()
  adv, info = A.dara(r, g)
  # hand-derived: w = min(5, sqrt(max ρ / ρ)) = [1, sqrt(2), min(5, sqrt(30))] — the cap binds on reward 2
  np.testing.assert_allclose(info["density"], [1.0, 0.5, 1.0 / 30], rtol=1e-6)
  np.testing.assert_allclose(info["weights"], [1.0, np.sqrt(2.0), 5.0], rtol=1e-6)
  ref, w_ref, rho_ref = np_dara_authors(r.astype(np.float64), g)
  np.testing.assert_allclose(w_ref, [1.0, np.sqrt(2.0), 5.0], rtol=1e-12)  # the reference agrees with the hand values
  np.testing.assert_allclose(adv, ref, rtol=1e-4, atol=1e-5)
  a = np.asarray(adv, np.float64)
  np.testing.assert_allclose([a.mean(), a.std(ddof=1)], [0.0, 1.0], atol=1e-5)  # whitened over the batch
  sym, info_s = A.dara(r, g, calibration="symmetric")
  np.testing.assert_allclose(sym, np_dara_authors(r.astype(np.float64), g, calibration="symmetric")[0],
                             rtol=1e-4, atol=1e-5)
  assert np.abs(np.asarray(sym) - a).max() > 0.1  # the calibration matters on this batch
  uncapped, info_u = A.dara(r, g, w_max=None)
  np.testing.assert_allclose(info_u["weights"], [1.0, np.sqrt(2.0), np.sqrt(30.0)], rtol=1e-6)
  np.testing.assert_allclose(uncapped, np_dara_authors(r.astype(np.float64), g, w_max=np.inf)[0],
                             rtol=1e-4, atol=1e-5)
  # jit and a random batch with unequal groups (where the std's ddof matters) agree with the reference too
  rb, gb = grouped([3, 4, 5, 6, 4, 7, 3, 5], 3, seed=5, binary=True)
  rb[:, 2] = 0.0
  rb[[0, 5], 2] = 1.0
  np.testing.assert_allclose(jax.jit(A.dara)(rb, gb)[0], np_dara_authors(rb.astype(np.float64), gb)[0],
                             rtol=1e-4, atol=1e-5)


def test_dara_whitening_removes_batch_scale_drift():
  r, g = dara_batch()
  a1, _ = A.dara(r, g)
  r2 = r.copy()
  r2[g >= 15, 0] = 1.0  # reward 0 now active in half the groups: densities (and weights) change
  a2, info2 = A.dara(r2, g)
  np.testing.assert_allclose(info2["weights"], [1.0, 1.0, np.sqrt(15.0)], rtol=1e-6)
  for a in (a1, a2):
    np.testing.assert_allclose(np.asarray(a, np.float64).std(ddof=1), 1.0, rtol=1e-5)


def test_dara_abstract_form_equalises_weighted_energy():
  r, g = grouped([4] * 6, 3, seed=2, binary=True)
  r[:, 2] = 0.0
  r[0, 2] = 1.0  # reward 2 active in a single group (sparse)
  r[:, 1][g < 3] = 1.0  # reward 1 saturated in half the groups
  kw = dict(scale="mean_one", w_max=None, calibration="symmetric", whiten=False, std_ddof=0, eps=0.0)
  adv, info = A.dara(r, g, **kw)
  per = np.stack([np_grpo(r[:, k], g, ddof=0, eps=0.0) for k in range(3)], 1)
  active = np.array([[np.abs(per[g == x, k]).sum() > 0 for k in range(3)] for x in range(6)])
  rho = active.mean(0)
  raw = 1 / np.sqrt(rho)
  w_ref = raw * 3 / raw.sum()  # c/sqrt(ρ), mean 1 over the three active rewards
  np.testing.assert_allclose(info["weights"], w_ref, rtol=1e-6)
  energy = (per ** 2).sum(0)
  weighted = w_ref ** 2 * energy
  np.testing.assert_allclose(weighted, weighted[0], rtol=1e-5)
  np.testing.assert_allclose(adv, per @ w_ref, rtol=1e-5, atol=1e-6)
  # hand case: densities 1 and 1/4 -> raw weights 1, 2 -> mean-one weights 2/3, 4/3
  g2 = np.repeat(np.arange(4), 2).astype(np.int32)
  r2 = np.array([[1, 1], [0, 0], [1, 0], [0, 0], [1, 0], [0, 0], [1, 0], [0, 0]], np.float32)
  np.testing.assert_allclose(A.dara(r2, g2, **kw)[1]["weights"], [2 / 3, 4 / 3], rtol=1e-6)
  # a never-active reward gets weight 0 in this form, 1 in the authors' (its A_k is 0 either way)
  r[:, 2] = 1.0
  assert float(A.dara(r, g, **kw)[1]["weights"][2]) == 0.0
  assert float(A.dara(r, g)[1]["weights"][2]) == 1.0


def test_dara_bad_arguments():
  r, g = dara_batch()
  for kw, match in (({"scale": "sum"}, "scale"), ({"calibration": "negative"}, "calibration"),
                    ({"w_max": 0.5}, "w_max"), ({"w_max": float("nan")}, "w_max"),
                    ({"active_tol": -1.0}, "active_tol")):
    with pytest.raises(ValueError, match=match):
      A.dara(r, g, **kw)


def test_sa_mrpo():
  g = np.array([0, 0, 0, 0, 1, 1, 1, 1], np.int32)
  r = np.array([[1, 0], [1, 1], [1, 0], [0, 0],
                [1, 0], [1, 0], [1, 1], [1, 0]], np.float32)
  adv, info = A.sa_mrpo(r, g, gamma=1.0, whiten=False, std_ddof=1)  # the earlier reading: Σ_k (1 − s_k)·grpo_k
  sat = r.mean(0)
  np.testing.assert_allclose(info["saturation"], sat, rtol=1e-6)
  per = np.stack([np_grpo(r[:, k], g) for k in range(2)], 1)
  np.testing.assert_allclose(adv, per @ (1 - sat), rtol=1e-5, atol=1e-6)
  # rollout 3 (fails obj 0, satisfies nothing) vs rollout 1: the equal-weight sum gives rollout 0 (1, 0) a negative
  # advantage in group 0 only through obj 1; reweighting flips at least one sign relative to the plain sum
  plain = per.sum(1)
  assert np.any(np.sign(plain) != np.sign(np.asarray(adv)))
  full = np.ones((8, 2), np.float32)
  _, info = A.sa_mrpo(full, g)
  np.testing.assert_array_equal(info["weights"], 0.0)


def test_gd2po_drops_exactly_conflicts():
  r, g = grouped([5, 6, 4], 3, seed=3, binary=True)
  adv, info = jax.jit(functools.partial(A.gd2po, whiten=False))(r, g)
  per = np.stack([np_grpo(r[:, k], g) for k in range(3)], 1)
  conflict = np.any(per > 1e-6, 1) & np.any(per < -1e-6, 1)
  np.testing.assert_array_equal(np.asarray(info["keep"]), ~conflict)
  assert conflict.any() and (~conflict).any()
  np.testing.assert_allclose(np.asarray(info["per_reward"])[~conflict], per[~conflict], rtol=1e-5, atol=1e-6)
  adv = np.asarray(adv)
  assert np.all(adv[conflict] == 0)
  q = np.array([(~conflict[g == x]).mean() for x in g])
  np.testing.assert_allclose(adv[~conflict], (q * per.sum(1))[~conflict], rtol=1e-5, atol=1e-6)


def ref_gd2po_authors(r, g, ratio_threshold=None):
  """github.com/Qwen-Applications/GD2PO ray_trainer.py (gdpo_filter_group_ratio / _ratio_conflict_group_ratio),
  float64, at sequence level (one token per response): verl GRPO per reward, mixed-sign conflict mask
  (optionally |ΣA|/(Σ|A| + 1e-8) < τ), sum × kept fraction of the group, masked whiten over kept rows."""
  per = np.stack([np_grpo(r[:, k], g) for k in range(r.shape[1])], 0)  # [K, B]
  conflict = (per > 1e-8).any(0) & (per < -1e-8).any(0)
  if ratio_threshold is not None:
    conflict &= np.abs(per.sum(0) / (np.abs(per).sum(0) + 1e-8)) < ratio_threshold
  keep = ~conflict
  ratio = np.array([keep[g == x].mean() for x in g])
  x = per.sum(0) * ratio * keep
  m = keep.astype(np.float64)
  mean = (x * m).sum() / m.sum()
  var = (((x - mean) * m) ** 2).sum() / (m.sum() - 1)
  return (x - mean) / np.sqrt(var + 1e-8) * m, keep


def test_gd2po_default_matches_the_authors_code():
  soft_differs = False
  for seed in range(3):
    r, g = grouped([5, 6, 4, 8], 3, seed=20 + seed, binary=True)
    for tau in (None, 0.237, 0.613):  # off the rational ratios binary rewards produce (0.2 is one: a tie)
      adv, info = A.gd2po(r, g, ratio_threshold=tau)
      ref, keep = ref_gd2po_authors(r.astype(np.float64), g, tau)
      np.testing.assert_array_equal(np.asarray(info["keep"]), keep)
      np.testing.assert_allclose(np.asarray(adv), ref, rtol=1e-4, atol=1e-5)
      soft_differs |= tau is not None and not np.array_equal(keep, ref_gd2po_authors(r, g)[1])
  assert soft_differs  # the ratio rule keeps some mixed-sign rollouts
  with pytest.raises(ValueError, match="ratio_threshold"):
    A.gd2po(r, g, ratio_threshold=1.5)


def test_multi_bad_inputs():
  r, g = grouped([3, 3], 2, seed=4)
  with pytest.raises(ValueError, match="rank 2"):
    A.dara(r[:, 0], g)
  bad = r.copy()
  bad[0, 1] = np.nan
  with pytest.raises(ValueError, match="rewards"):
    A.gdpo(bad, g)
  adv, _ = jax.jit(A.gdpo)(bad, g)  # traced: the NaN row is masked, not propagated
  assert np.all(np.isfinite(np.asarray(adv))) and float(adv[0]) == 0.0
