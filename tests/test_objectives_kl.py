"""Tests for rljax.objectives._kl: kl_penalty / kl_estimate, kl_in_reward, rpg."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rljax.objectives as O
from rljax.types import PolicyOutputs, TrainBatch


B, T = 3, 5


def _batch(seed=0, **kw):
  rng = np.random.default_rng(seed)
  logp = -rng.uniform(0.05, 3.0, (B, T)).astype(np.float32)
  mask = np.ones((B, T), bool)
  mask[0, 3:] = False
  mask[2, :1] = False
  fields = dict(tokens=jnp.zeros((B, T), jnp.int32), loss_mask=jnp.asarray(mask),
                advantages=jnp.asarray(rng.normal(size=(B, T)).astype(np.float32)), group_id=jnp.arange(B),
                logp_old=jnp.asarray(logp + 0.3 * rng.normal(size=(B, T)).astype(np.float32)),
                logp_ref=jnp.asarray(logp + 0.5 * rng.normal(size=(B, T)).astype(np.float32)))
  fields.update(kw)
  return PolicyOutputs.create(logp=jnp.asarray(logp)), TrainBatch.create(**fields)


def _np_k(delta, base, clamp=True):
  delta = np.asarray(delta, np.float64)
  if base == "k1":
    return delta
  if base == "abs":
    return np.abs(delta)
  if base == "k2":
    return 0.5 * delta ** 2
  neg = -delta
  if clamp:
    neg = np.clip(neg, -20, 20)
  v = np.exp(neg) - neg - 1
  return np.clip(v, -10, 10) if clamp else v


ALIASES = {"k1": "k1", "kl": "k1", "abs": "abs", "k2": "k2", "mse": "k2", "k3": "k3", "low_var_kl": "k3"}


@pytest.mark.parametrize("name", sorted(ALIASES))
def test_kl_estimate_values_and_straight_through_gradient(name):
  delta = np.array([-30.0, -3.0, -0.5, 0.0, 0.2, 2.5, 25.0], np.float32)
  ref = np.linspace(-2, -1, delta.size).astype(np.float32)
  logp = ref + delta
  base = ALIASES[name]
  for clamp in (True, False):
    if not clamp and base == "k3":
      sl = slice(1, -1)  # e^{30} is fine in f32 but compare only the moderate range unclamped
    else:
      sl = slice(None)
    got = O.kl_estimate(jnp.asarray(logp[sl]), jnp.asarray(ref[sl]), name, clamp=clamp)
    np.testing.assert_allclose(got, _np_k(delta[sl].astype(np.float64), base, clamp), rtol=2e-5, atol=1e-5)
  # "+" variant: value of the base estimator, gradient of k2 (= Δ w.r.t. logp).
  plus = lambda lp: O.kl_estimate(lp, jnp.asarray(ref), name + "+")
  np.testing.assert_allclose(plus(jnp.asarray(logp)), _np_k(delta, base), rtol=2e-5, atol=1e-5)
  grad = jax.grad(lambda lp: jnp.sum(plus(lp)))(jnp.asarray(logp))
  np.testing.assert_allclose(grad, delta, rtol=1e-5, atol=1e-5)


def test_k3_gradient_is_analytic():
  delta = np.array([-1.5, -0.1, 0.0, 0.7, 3.0])
  ref = np.full(delta.shape, -1.0)
  grad = jax.grad(lambda lp: jnp.sum(O.kl_estimate(lp, jnp.asarray(ref, jnp.float32), "k3")))(
      jnp.asarray(ref + delta, jnp.float32))
  np.testing.assert_allclose(grad, 1.0 - np.exp(-delta), rtol=1e-5, atol=1e-6)  # d/dΔ (e^{−Δ}+Δ−1)


def test_every_estimator_zero_at_reference_and_k3_nonnegative():
  x = jnp.asarray(np.random.default_rng(1).normal(size=20), jnp.float32)
  for name in O.KL_ESTIMATORS:
    np.testing.assert_allclose(O.kl_estimate(x, x, name), 0.0, atol=0)
  y = x + jnp.asarray(np.random.default_rng(2).normal(size=20) * 3, jnp.float32)
  assert np.all(np.asarray(O.kl_estimate(y, x, "k3")) >= 0)


@pytest.mark.parametrize("estimator", ["k1", "k3", "low_var_kl+", "abs", "mse"])
def test_kl_penalty_term_matches_numpy_jit_and_nojit(estimator):
  out, batch = _batch()
  beta = 0.05
  term = O.kl_penalty(beta=beta, estimator=estimator)
  base = ALIASES[estimator.rstrip("+")]
  delta = np.asarray(out.logp, np.float64) - np.asarray(batch.logp_ref, np.float64)
  want = beta * _np_k(delta, base)
  mask = np.asarray(batch.loss_mask, np.float64)
  for fn in (term, jax.jit(term)):
    loss, metrics = fn(out, batch)
    np.testing.assert_allclose(loss, want, rtol=2e-5, atol=1e-7)
    np.testing.assert_allclose(metrics["kl"], (_np_k(delta, base) * mask).sum() / mask.sum(), rtol=2e-5)
  # Through chain with token_mean.
  obj = O.chain(term)
  np.testing.assert_allclose(obj(out, batch)[0], (want * mask).sum() / mask.sum(), rtol=2e-5)


def test_kl_penalty_accepts_traced_beta_and_matches():
  out, batch = _batch()

  @jax.jit
  def f(beta):
    return O.chain(O.kl_penalty(beta=beta, estimator="k3"))(out, batch)[0]

  np.testing.assert_allclose(f(jnp.float32(0.2)), 2 * f(jnp.float32(0.1)), rtol=1e-6)


def test_kl_penalty_bias_correction_multiplies_by_ratio():
  out, batch = _batch()
  plain, _ = O.kl_penalty(beta=1.0, estimator="k3")(out, batch)
  corr, _ = O.kl_penalty(beta=1.0, estimator="k3", bias_correction=True)(out, batch)
  r = np.exp(np.asarray(out.logp, np.float64) - np.asarray(batch.logp_old, np.float64))
  np.testing.assert_allclose(corr, np.asarray(plain) * r, rtol=1e-5)


def test_kl_penalty_bad_inputs():
  with pytest.raises(ValueError, match="estimator"):
    O.kl_penalty(estimator="k4")
  with pytest.raises(ValueError, match="estimator"):
    O.kl_penalty(estimator="full")
  with pytest.raises(ValueError, match="beta"):
    O.kl_penalty(beta=-0.1)
  with pytest.raises(ValueError, match="beta"):
    O.kl_penalty(beta=float("nan"))
  out, batch = _batch()
  with pytest.raises(ValueError, match="logp_ref"):
    O.kl_penalty()(out, batch.replace(logp_ref=None))
  with pytest.raises(ValueError, match="logp_ref"):
    O.kl_penalty()(out, batch.replace(logp_ref=jnp.zeros((B, T + 1))))
  with pytest.raises(ValueError, match="loss_mask"):
    O.kl_penalty()(out, batch.replace(loss_mask=jnp.full((B, T), 0.5)))
  with pytest.raises(ValueError, match="loss_mask"):
    O.kl_penalty()(out, batch.replace(loss_mask=jnp.ones((B, T - 1))))


def test_kl_in_reward_sequence_scores_and_k1_total():
  out, batch = _batch()
  mask = np.asarray(batch.loss_mask)
  scores = np.array([1.0, -0.5, 2.0], np.float32)
  beta = 0.1
  rewards, metrics = O.kl_in_reward(scores, batch.logp_old, batch.logp_ref, mask, beta=beta)
  old, ref = np.asarray(batch.logp_old, np.float64), np.asarray(batch.logp_ref, np.float64)
  kl = (old - ref) * mask
  want = -beta * kl
  for b in range(B):
    last = np.nonzero(mask[b])[0].max()
    want[b, last] += scores[b]
  np.testing.assert_allclose(rewards, want, rtol=1e-5, atol=1e-6)
  # Total penalty = β Σ_t (log π_old − log π_ref) over masked tokens.
  np.testing.assert_allclose(np.sum(rewards) - scores.sum(), -beta * kl.sum(), rtol=1e-5)
  np.testing.assert_allclose(metrics["kl"], np.mean(kl.sum(1) / mask.sum(1)), rtol=1e-5)
  want = want.astype(np.float32)
  same, _ = O.kl_in_reward(want, batch.logp_old, batch.logp_ref, mask, beta=0.0)
  np.testing.assert_allclose(same, want, rtol=0, atol=0)
  jitted = jax.jit(lambda s, b: O.kl_in_reward(s, batch.logp_old, batch.logp_ref, mask, beta=b, estimator="k3")[0])
  np.testing.assert_allclose(jitted(scores, 0.1),
                             O.kl_in_reward(scores, batch.logp_old, batch.logp_ref, mask, beta=0.1, estimator="k3")[0],
                             rtol=1e-6)
  with pytest.raises(ValueError, match="beta"):
    O.kl_in_reward(scores, batch.logp_old, batch.logp_ref, mask, beta=-1.0)
  with pytest.raises(ValueError, match="scores"):
    O.kl_in_reward(np.zeros(B + 1), batch.logp_old, batch.logp_ref, mask)
  with pytest.raises(ValueError, match="mask"):
    O.kl_in_reward(scores, batch.logp_old, batch.logp_ref, np.full((B, T), 2.0))


# ---------------------------------------------------------------- RPG on a tiny categorical policy

V = 5


def _categorical_setup(seed):
  rng = np.random.default_rng(seed)
  theta = rng.normal(size=V)
  old = rng.normal(size=V)
  ref = rng.normal(size=V)
  adv = rng.normal(size=V)
  logsm = lambda z: z - np.log(np.sum(np.exp(z - z.max()))) - z.max()
  return theta, logsm(old), logsm(ref), adv, logsm


def _np_objective(theta, log_ref, adv, kl, normalized, logsm):
  """−J(θ) = −Σ π_θ A + β D, exact over the V actions (float64)."""
  lp = logsm(theta)
  p, q = np.exp(lp), np.exp(log_ref)
  if kl == "reverse":
    d = np.sum(p * (lp - log_ref)) + (0 if normalized else np.sum(q - p))
  else:
    d = np.sum(q * (log_ref - lp)) + (0 if normalized else np.sum(p - q))
  return -np.sum(p * adv), d


@pytest.mark.parametrize("kl", ["reverse", "forward"])
@pytest.mark.parametrize("normalized", [True, False])
@pytest.mark.parametrize("estimator", ["surrogate", "reinforce"])
def test_rpg_expected_gradient_matches_analytic_kl_gradient(kl, normalized, estimator):
  theta, log_old, log_ref, adv, logsm = _categorical_setup(3)
  beta = 0.7
  # One row per action v (sampled from π_old, weight π_old(v) for the exact expectation), T = 1.
  batch = TrainBatch(tokens=jnp.zeros((V, 1), jnp.int32), loss_mask=jnp.ones((V, 1), bool),
                     advantages=jnp.asarray(adv[:, None], jnp.float32), group_id=jnp.zeros(V, jnp.int32),
                     logp_old=jnp.asarray(log_old[:, None], jnp.float32),
                     logp_ref=jnp.asarray(log_ref[:, None], jnp.float32))
  term = O.rpg(beta=beta, kl=kl, normalized=normalized, estimator=estimator)
  p_old = jnp.asarray(np.exp(log_old), jnp.float32)

  def expected_loss(th):
    lp = jax.nn.log_softmax(th)
    loss, _ = term(PolicyOutputs(logp=lp[:, None]), batch)
    return jnp.sum(p_old * loss[:, 0])

  grad = jax.jit(jax.grad(expected_loss))(jnp.asarray(theta, jnp.float32))
  # Independent reference: central finite differences of the exact objective in float64.
  f = lambda th: sum(_np_objective(th, log_ref, adv, kl, normalized, logsm)[i] * (1, beta)[i] for i in (0, 1))
  h = 1e-6
  want = np.array([(f(theta + h * e) - f(theta - h * e)) / (2 * h) for e in np.eye(V)])
  np.testing.assert_allclose(grad, want, rtol=2e-4, atol=2e-5)
  if estimator == "surrogate":  # value: the importance-sampled loss is exactly −J in expectation
    pg, d = _np_objective(theta, log_ref, adv, kl, normalized, logsm)
    np.testing.assert_allclose(expected_loss(jnp.asarray(theta, jnp.float32)), pg + beta * d, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("kl,normalized", [("reverse", True), ("reverse", False), ("forward", True),
                                           ("forward", False)])
def test_rpg_reinforce_matches_released_code_formulas_with_ref_equal_old(kl, normalized):
  out, batch = _batch(seed=4)
  batch = batch.replace(logp_ref=batch.logp_old)
  beta, lo, hi = 0.3, 0.2, 0.28
  lp, old, a = (np.asarray(x, np.float64) for x in (out.logp, batch.logp_old, batch.advantages))
  w = np.exp(lp - old)
  wc = np.clip(w, 1 - lo, 1 + hi)
  # compute_policy_loss_reinforce (complex-reasoning/RPG): loss = −sg(A·w̃ + kl_term)·logp, with
  # kl_term = −β w̃(log w + 1) | −β w̃ log w | β | β(1 − w̃)  for rkl | urkl | fkl | ufkl  (π_ref = π_old).
  if kl == "reverse":
    kl_term = -beta * wc * (np.log(w) + (1.0 if normalized else 0.0))
  else:
    kl_term = beta * np.ones_like(w) if normalized else beta * (1 - wc)
  want_coef = -(a * wc + kl_term)
  term = O.rpg(beta, kl=kl, normalized=normalized, estimator="reinforce", clip=(lo, hi))
  obj = O.chain(term, aggregate=O.token_sum)
  for fn in (term, jax.jit(term)):
    loss, metrics = fn(out, batch)
    np.testing.assert_allclose(loss, want_coef * lp, rtol=2e-5, atol=1e-6)
  g = jax.grad(lambda x: obj(out.replace(logp=x), batch)[0])(out.logp)
  np.testing.assert_allclose(g, want_coef * np.asarray(batch.loss_mask), rtol=2e-5, atol=1e-6)
  # Without clip, REINFORCE and surrogate gradients are identical sample by sample.
  sur = O.chain(O.rpg(beta, kl=kl, normalized=normalized), aggregate=O.token_sum)
  rf = O.chain(O.rpg(beta, kl=kl, normalized=normalized, estimator="reinforce"), aggregate=O.token_sum)
  _, b2 = _batch(seed=5)
  g1 = jax.grad(lambda x: sur(out.replace(logp=x), b2)[0])(out.logp)
  g2 = jax.grad(lambda x: rf(out.replace(logp=x), b2)[0])(out.logp)
  np.testing.assert_allclose(g1, g2, rtol=2e-5, atol=1e-6)


def test_rpg_regulariser_only_and_bad_args():
  out, batch = _batch()
  loss, metrics = O.rpg(beta=1.0, policy_gradient=False)(out, batch)
  lp, old, ref = (np.asarray(x, np.float64) for x in (out.logp, batch.logp_old, batch.logp_ref))
  np.testing.assert_allclose(loss, np.exp(lp - old) * (lp - ref), rtol=1e-5, atol=1e-6)
  assert set(metrics) >= {"kl", "ratio_mean", "beta"}
  np.testing.assert_allclose(jax.jit(O.rpg(beta=1.0, policy_gradient=False))(out, batch)[0], loss, rtol=1e-6)
  for kwargs, name in ((dict(kl="sideways"), "kl"), (dict(estimator="pathwise"), "estimator"),
                       (dict(beta=-1.0), "beta"), (dict(clip=(0.2, 0.2)), "clip"),
                       (dict(estimator="reinforce", clip=(1.5, 0.2)), "eps_low"),
                       (dict(estimator="reinforce", clip=0.2), "clip")):
    with pytest.raises(ValueError, match=name):
      O.rpg(**kwargs)
  with pytest.raises(ValueError, match="logp_ref"):
    O.rpg()(out, batch.replace(logp_ref=None))
