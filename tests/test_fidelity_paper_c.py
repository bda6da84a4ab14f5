"""Fidelity against the papers' own text (issue #35, second pass, part c).

Each test checks an rljax function against a short float64 NumPy transcription (written here) of the equation or
algorithm the row's ``Fidelity.reference`` names, on random inputs.
"""
import jax
import numpy as np
import pytest

import rljax
from rljax import advantages as A

ROWS = {r.name: r for r in rljax.catalog()}


@pytest.fixture(autouse=True)
def _x64():
  with jax.enable_x64(True):
    yield


# ----------------------------------------------------------------------------- QwenLong-L1.5 Eq. 7


def _qwenlong_task_advantage(r, group, task, ddof):
  """arXiv 2512.12967 Sec. 4.2 Eq. 7: ``A_i = (r_i − mean({r_k} over i's group)) / std(r | r ∈ B_task)``, the std
  over all rows of the batch with i's task."""
  out = np.zeros_like(r)
  for i in range(len(r)):
    out[i] = (r[i] - r[group == group[i]].mean()) / r[task == task[i]].std(ddof=ddof)
  return out


@pytest.mark.parametrize("ddof", [0, 1])
def test_task_normalized_matches_qwenlong_eq7(ddof):
  assert ROWS["task_normalized"].fidelity.basis == "authors_code"  # the README's code states Eq. 7 (issue #51)
  rng = np.random.RandomState(0)
  n_groups, g = 12, 6
  group = np.repeat(np.arange(n_groups), g).astype(np.int32)
  task = (np.arange(n_groups) % 3).repeat(g).astype(np.int32)  # a group lies within one task
  # one dense-reward task in [0, 1], two sparse 0/1 tasks
  r = np.where(task == 0, rng.rand(n_groups * g), rng.randint(0, 2, n_groups * g)).astype(np.float64)
  ref = _qwenlong_task_advantage(r, group, task, ddof)
  num = A.grpo(r, group, scale="none")[0]
  ours = np.asarray(A.task_normalized(num, task, rewards=r, scale="rewards", center=False, eps=0.0,
                                      std_ddof=ddof)[0])
  np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=1e-6)
  # the centred default agrees here: each task's mean of (r − group mean) is 0
  centred = np.asarray(A.task_normalized(num, task, rewards=r, scale="rewards", eps=0.0, std_ddof=ddof)[0])
  np.testing.assert_allclose(centred, ref, rtol=1e-6, atol=1e-6)


def test_task_normalized_rewards_scale_needs_rewards():
  with pytest.raises(ValueError, match="needs rewards"):
    A.task_normalized(np.zeros(4), np.zeros(4, np.int32), scale="rewards")


# ----------------------------------------------------------------------------- Rewarding the Rare Eqs. 1, 3–5


def _uniqueness_eq5(r, group, cluster, alpha, eps):
  """arXiv 2601.08763v2 Sec. 3: ``z = (r − μ_m)/(σ_m + ε)`` (Eq. 1), ``f`` = the size of i's strategy cluster among
  its group's K rollouts (Eq. 3), ``A' = z / f^α`` (Eqs. 4–5)."""
  out = np.zeros_like(r)
  for i in range(len(r)):
    g = group == group[i]
    z = (r[i] - r[g].mean()) / (r[g].std() + eps)
    f = np.sum(g & (cluster == cluster[i]))
    out[i] = z / f ** alpha
  return out


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0])
def test_uniqueness_all_scope_matches_rewarding_the_rare_eq5(alpha):
  assert ROWS["uniqueness"].fidelity.basis == "paper_formula"
  rng = np.random.RandomState(1)
  n_groups, k = 10, 8
  group = np.repeat(np.arange(n_groups), k).astype(np.int32)
  r = rng.randint(0, 2, n_groups * k).astype(np.float64)
  cluster = rng.randint(0, 4, n_groups * k).astype(np.int32) * 7 + 3  # arbitrary ids, reused across groups
  z = np.asarray(A.grpo(r, group, eps=1e-6, std_ddof=0)[0])
  ours = np.asarray(A.uniqueness(z, r > 0, cluster, group, alpha=alpha, scope="all")[0])
  np.testing.assert_allclose(ours, _uniqueness_eq5(r, group, cluster, alpha, 1e-6), rtol=1e-9, atol=1e-9)
  if alpha > 0:  # the default (correct-only, renormalised) is a different weighting
    default = np.asarray(A.uniqueness(z, r > 0, cluster, group, alpha=alpha)[0])
    assert not np.allclose(default, ours)


def test_uniqueness_rejects_bad_scope_and_alpha():
  z, c, g = np.zeros(4), np.ones(4, bool), np.zeros(4, np.int32)
  with pytest.raises(ValueError, match="scope must be one of"):
    A.uniqueness(z, c, g, g, scope="paper")
  with pytest.raises(ValueError, match="alpha must be >= 0"):
    A.uniqueness(z, c, g, g, alpha=-0.5)


# ----------------------------------------------------------------------------- GAGAR Eqs. 6–8 (peer transcription)


def _gar_redistribute(r, passed, f, group, lambda_max):
  """github.com/kekmodel/mimo-verl verl/trainer/ppo/gar.py ``redistribute`` (GAGAR arXiv 2609.32577 Eqs. 7–8), per
  group: ``a = r − mean(r)``; ``a⁺ = max(a, 0)`` on passes; ``λ = min(Σ a⁺ / Σ f·a⁺, λ_max)``; ``B = λ·f·a⁺`` (pass)
  or ``a`` (fail); ``A = B − mean(B)``; ``Σ f·a⁺ <= 0`` leaves ``a``."""
  out = np.zeros_like(r)
  for g in np.unique(group):
    m = group == g
    a = r[m] - r[m].mean()
    pos = np.where(passed[m], np.maximum(a, 0.0), 0.0)
    num, den = pos.sum(), (np.where(passed[m], f[m], 0.0) * pos).sum()
    if den <= 0.0:
      out[m] = a
      continue
    lam = min(num / den, lambda_max)
    b = np.where(passed[m], lam * f[m] * pos, a)
    out[m] = b - b.mean()
  return out


@pytest.mark.parametrize("lambda_max", [1.0, 1.5, 100.0])
def test_gagar_factor_form_matches_gar_redistribute(lambda_max):
  assert ROWS["gagar"].fidelity.basis == "peer"
  rng = np.random.RandomState(2)
  n_groups, k = 16, 8
  group = np.repeat(np.arange(n_groups), k).astype(np.int32)
  passed = rng.rand(n_groups * k) < 0.5
  # non-binary rewards: passes in [0.6, 1.2], failures in [0, 0.7], so a pass can sit below its group mean
  r = np.where(passed, 0.6 + 0.6 * rng.rand(n_groups * k), 0.7 * rng.rand(n_groups * k))
  f = rng.choice([1.0, 0.9, 0.85, 0.625, 0.4, 0.2], n_groups * k)  # the paper's Flash tier factors
  a = np.asarray(A.grpo(r, group, scale="none")[0])
  ours, info = A.gagar(a, passed, f, group, weight="factor", lambda_max=lambda_max)
  ref = _gar_redistribute(r, passed, f, group, lambda_max)
  np.testing.assert_allclose(np.asarray(ours), ref, rtol=1e-9, atol=1e-12)
  if lambda_max == 1.5:
    assert np.any(np.asarray(info["lam"]) == 1.5) and np.any(np.asarray(info["lam"]) < 1.5)  # cap binds somewhere
  # the default (rank weights, no cap) is another redistribution
  assert not np.allclose(np.asarray(A.gagar(a, passed, f, group)[0]), ref)


def test_gagar_rejects_bad_weight_lambda_max_and_factors():
  a, p, g = np.array([0.5, -0.5]), np.array([True, False]), np.zeros(2, np.int32)
  with pytest.raises(ValueError, match="weight must be one of"):
    A.gagar(a, p, np.ones(2), g, weight="tier")
  with pytest.raises(ValueError, match="lambda_max must be None or a finite float >= 1"):
    A.gagar(a, p, np.ones(2), g, lambda_max=0.5)
  with pytest.raises(ValueError, match="scores must be > 0 on passing rows"):
    A.gagar(a, p, np.array([0.0, 1.0]), g, weight="factor")


# ----------------------------------------------------------------------------- OmniQuality-R Gaussian RBF reward


def _omniquality_gaussian_rbf(pred, gt, sigma):
  """github.com/yeppp27/VisualScore math_verifier_wolatex_regress_specifc.py ``RewardCalculator.get_reward`` with
  ``reward_type="gaussian_rbf"``: ``exp(-(pred − gt)^2 / (2 σ^2))``; an answer that does not parse scores 0."""
  return np.array([0.0 if np.isnan(p) else np.exp(-((p - t) ** 2) / (2 * sigma ** 2)) for p, t in zip(pred, gt)])


@pytest.mark.parametrize("sigma", [0.8, 1.0, 2.5])
def test_gaussian_reward_matches_omniquality_gaussian_rbf(sigma):
  assert ROWS["gaussian_reward"].fidelity.basis == "authors_code"
  from rljax import rewards as R
  rng = np.random.RandomState(3)
  gt = rng.uniform(1.0, 5.0, 64)
  pred = gt + rng.normal(0.0, 1.5, 64)
  pred[rng.rand(64) < 0.2] = np.nan  # unparseable answers
  ours = np.asarray(R.gaussian_reward(pred, gt, sigma=sigma)[0])
  np.testing.assert_allclose(ours, _omniquality_gaussian_rbf(pred, gt, sigma), rtol=1e-6, atol=1e-7)
