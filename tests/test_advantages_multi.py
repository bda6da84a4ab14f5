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


def test_dara_equalises_weighted_energy():
  r, g = grouped([4] * 6, 3, seed=2, binary=True)
  r[:, 2] = 0.0
  r[0, 2] = 1.0  # reward 2 active in a single group (sparse)
  r[:, 1][g < 3] = 1.0  # reward 1 saturated in half the groups
  adv, info = A.dara(r, g, eps=0.0, std_ddof=0)
  per = np.stack([np_grpo(r[:, k], g, ddof=0, eps=0.0) for k in range(3)], 1)
  energy = (per ** 2).sum(0)
  w = np.asarray(info["weights"])
  weighted = w ** 2 * energy
  active = energy > 0
  np.testing.assert_allclose(weighted[active], weighted[active][0], rtol=1e-5)
  np.testing.assert_allclose(adv, per @ w, rtol=1e-5, atol=1e-6)
  # a never-active reward gets weight 0
  r[:, 2] = 1.0
  _, info = A.dara(r, g)
  assert float(info["weights"][2]) == 0.0


def test_sa_mrpo():
  g = np.array([0, 0, 0, 0, 1, 1, 1, 1], np.int32)
  r = np.array([[1, 0], [1, 1], [1, 0], [0, 0],
                [1, 0], [1, 0], [1, 1], [1, 0]], np.float32)
  adv, info = A.sa_mrpo(r, g)
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
