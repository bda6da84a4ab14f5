"""Train/inference mismatch corrections: tis, mis, icepop, divergence_rejection.

References are the float64 NumPy functions in ``test_objectives_ratio`` (written
from the spec formulas), plus hand-derived values and invariants.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rljax.objectives as O
from rljax.types import PolicyOutputs
from test_objectives_ratio import (make_data, ref_mis, ref_ppo_clip, ref_rejection_keep, ref_tis, ref_gmpo,
                                   to_jax)


def _po(lp):
  return PolicyOutputs(logp=lp)


def _data(seed=0, noise=0.6):
  # larger train/inference noise so that every band and threshold is exercised
  return make_data(seed=seed, noise=noise)


@pytest.mark.parametrize("level", ["token", "sequence", "geometric"])
def test_tis_matches_reference(level):
  d = _data(1)
  out, batch = to_jax(d)
  w, keep, m = jax.jit(O.tis(1.3, level=level))(out, batch)
  mask = d["mask"] > 0
  np.testing.assert_allclose(np.asarray(w)[mask], ref_tis(d, 1.3, level)[mask], rtol=1e-5)
  assert np.all(np.asarray(w) <= 1.3 + 1e-6)
  assert np.all(np.asarray(keep) == 1)
  raw = ref_tis(d, np.inf, level)[mask]
  np.testing.assert_allclose(m["truncated_frac"], np.mean(raw > 1.3), rtol=1e-6)
  assert 0 < float(m["truncated_frac"]) < 1
  if level != "token":  # constant within each sequence
    for i in range(d["mask"].shape[0]):
      row = np.asarray(w)[i][mask[i]]
      assert row.size == 0 or np.ptp(row) < 1e-6


def test_tis_hand_values_lower_and_normalize():
  d = make_data(seed=2)
  d["mask"][:] = 0
  d["mask"][0, :3] = 1
  d["old"][0, :3] = [np.log(0.5), np.log(3.0), np.log(1.0)]
  d["behav"][0, :3] = 0.0
  out, batch = to_jax(d)
  w, _, _ = O.tis(2.0, lower=0.8)(out, batch)
  np.testing.assert_allclose(np.asarray(w)[0, :3], [0.8, 2.0, 1.0], rtol=1e-6)
  w, _, _ = O.tis(2.0, lower=0.8, normalize=True)(out, batch)
  np.testing.assert_allclose(np.asarray(w)[0, :3], np.array([0.8, 2.0, 1.0]) / (3.8 / 3), rtol=1e-6)
  w, _, _ = O.tis(100.0, level="sequence")(out, batch)
  np.testing.assert_allclose(np.asarray(w)[0, :3], [1.5, 1.5, 1.5], rtol=1e-5)  # 0.5 * 3 * 1
  w, _, _ = O.tis(100.0, level="geometric")(out, batch)
  np.testing.assert_allclose(np.asarray(w)[0, :3], [1.5 ** (1 / 3)] * 3, rtol=1e-5)


def test_weights_are_one_when_trainer_and_sampler_agree_and_carry_no_gradient():
  d = _data(3)
  d["behav"] = d["logp"].copy()
  out, batch = to_jax(d)
  on_policy = batch.replace(logp_old=None)  # train log-prob falls back to sg(out.logp)
  for corr in (O.tis(2.0), O.tis(2.0, level="sequence"), O.mis(0.5, 2.0), O.icepop(),
               O.mis(0.9, 1.1, level="sequence")):
    w, keep, _ = corr(out, on_policy)
    np.testing.assert_allclose(w, 1.0, rtol=1e-6)
    np.testing.assert_allclose(keep, 1.0)
    g = jax.grad(lambda lp: jnp.sum(corr(_po(lp), on_policy)[0] * corr(_po(lp), on_policy)[1]))(out.logp)
    assert np.all(np.asarray(g) == 0)
  keep, = [O.divergence_rejection(1e-9, estimator=e, level=lv)(out, on_policy)[1]
           for e, lv in [("k3", "sequence_max")]]
  np.testing.assert_allclose(keep, 1.0)


@pytest.mark.parametrize("level", ["token", "sequence", "geometric"])
def test_mis_matches_reference(level):
  d = _data(4)
  out, batch = to_jax(d)
  lo, hi = {"token": (0.7, 1.4), "sequence": (0.9, 1.5), "geometric": (0.99, 1.05)}[level]
  w, keep, m = jax.jit(O.mis(lo, hi, level=level))(out, batch)
  mask = d["mask"] > 0
  expected = ref_mis(d, lo, hi, level)
  np.testing.assert_allclose((np.asarray(w) * np.asarray(keep))[mask], expected[mask], rtol=1e-5)
  dropped = expected[mask] == 0
  np.testing.assert_allclose(m["masked_frac"], dropped.mean(), rtol=1e-6)
  assert 0 < float(m["masked_frac"]) < 1
  w2, keep2, _ = O.mis(lo, hi, level=level, reweight=False)(out, batch)
  np.testing.assert_allclose(w2, 1.0)
  np.testing.assert_allclose(keep2, keep)


def test_icepop_zeroes_gradient_outside_band_and_scales_inside():
  d = _data(5)
  out, batch = to_jax(d)
  alpha, beta = 0.8, 1.25
  term = O.ppo_clip(0.2, 0.28, correction=O.icepop(alpha, beta))
  loss, m = term(out, batch)
  k = np.exp(d["old"] - d["behav"])
  inside = (k >= alpha) & (k <= beta)
  base = ref_ppo_clip(d["logp"], None, d, 0.2, 0.28)
  np.testing.assert_allclose(np.asarray(loss), np.where(inside, k * base, 0.0), rtol=1e-5, atol=1e-7)
  g = jax.grad(lambda lp: jnp.sum(term(_po(lp), batch)[0]))(out.logp)
  mask = d["mask"] > 0
  assert np.all(np.asarray(g)[~inside] == 0)
  assert np.any(np.asarray(g)[inside & mask] != 0)
  np.testing.assert_allclose(m["correction/masked_frac"], np.mean(~inside[mask]), rtol=1e-6)
  # icepop is token-level mis under its own name
  np.testing.assert_allclose(O.icepop(alpha, beta)(out, batch)[0] * O.icepop(alpha, beta)(out, batch)[1],
                             O.mis(alpha, beta)(out, batch)[0] * O.mis(alpha, beta)(out, batch)[1])


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
@pytest.mark.parametrize("level", ["token", "sequence_sum", "sequence_mean", "sequence_max"])
def test_divergence_rejection_matches_reference(estimator, level):
  if level == "sequence_max" and estimator == "k1":
    with pytest.raises(ValueError, match="sequence_max"):
      O.divergence_rejection(0.1, estimator=estimator, level=level)
    return
  d = _data(6)
  out, batch = to_jax(d)
  mask = d["mask"] > 0
  taus = [0.02, 0.1, 0.5, 2.0]
  fracs = []
  for tau in taus:
    w, keep, m = O.divergence_rejection(tau, estimator=estimator, level=level)(out, batch)
    np.testing.assert_allclose(w, 1.0)
    expected = ref_rejection_keep(d, tau, estimator, level)
    np.testing.assert_array_equal(np.asarray(keep)[mask], expected[mask])
    fracs.append(float(m["masked_frac"]))
    np.testing.assert_allclose(fracs[-1], 1 - expected[mask].mean(), rtol=1e-6)
  assert all(a >= b for a, b in zip(fracs, fracs[1:]))  # raising tau never rejects more
  assert fracs[0] > 0


def test_divergence_rejection_two_sided_bounds_and_zero_divergence():
  d = _data(7)
  out, batch = to_jax(d)
  mask = d["mask"] > 0
  lk = d["old"] - d["behav"]
  _, keep, _ = O.divergence_rejection((-0.2, 0.1), estimator="k1")(out, batch)
  k1 = -lk
  np.testing.assert_array_equal(np.asarray(keep)[mask], ((k1 >= -0.2) & (k1 <= 0.1))[mask].astype(float))
  same = batch.replace(logp_behavior=batch.logp_old)
  for e in ("k1", "k2", "k3"):
    _, keep, _ = O.divergence_rejection(1e-6, estimator=e, level="sequence_sum")(out, same)
    np.testing.assert_allclose(keep, 1.0)


@pytest.mark.parametrize("factory", [lambda c: O.ppo_clip(0.2, 0.28, 3.0, correction=c),
                                     lambda c: O.gspo(0.1, correction=c), lambda c: O.gspo_token(0.1, correction=c),
                                     lambda c: O.segment_ratio(0.1, correction=c), lambda c: O.cispo(correction=c),
                                     lambda c: O.sapo(correction=c), lambda c: O.cpgd(correction=c),
                                     lambda c: O.pspo(0.2, correction=c), lambda c: O.reinforce(correction=c),
                                     lambda c: O.gpg(correction=c), lambda c: O.decoupled_ppo(correction=c)])
def test_any_ratio_term_accepts_a_correction(factory):
  d = _data(8)
  out, batch = to_jax(d)
  corr = [O.tis(1.5), O.divergence_rejection(0.05)]
  base, _ = factory(None)(out, batch)
  got, m = jax.jit(factory(corr))(out, batch)
  w = np.minimum(np.exp(d["old"] - d["behav"]), 1.5)
  keep = ref_rejection_keep(d, 0.05, "k3", "token")
  np.testing.assert_allclose(got, np.asarray(base) * w * keep, rtol=1e-5, atol=1e-7)
  assert "correction/tis/weight_mean" in m and "correction/divergence_rejection/masked_frac" in m
  np.testing.assert_allclose(m["correction/masked_frac"], 1 - keep[d["mask"] > 0].mean(), rtol=1e-6)


def test_gmpo_correction_drops_tokens_and_uses_geometric_mean_weight():
  d = _data(9)
  out, batch = to_jax(d)
  got, _ = O.gmpo(correction=O.icepop(0.8, 1.25))(out, batch)
  k = np.exp(d["old"] - d["behav"])
  inside = ((k >= 0.8) & (k <= 1.25)).astype(float)
  d2 = dict(d, mask=d["mask"] * inside)
  per = ref_gmpo(d["logp"], None, d2)  # ratio and mean advantage over the kept tokens
  b = d["mask"].shape[0]
  expected = np.zeros_like(per)
  for i in range(b):
    kept = d2["mask"][i] > 0
    if kept.any():
      seq_loss = per[i][kept][0] * np.exp(np.mean(np.log(k[i][kept])))
      expected[i] = seq_loss * d["mask"][i]
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)


def test_custom_sources_and_user_corrections():
  d = _data(10)
  out, batch = to_jax(d)
  w, _, _ = O.tis(1e6, train_logp="logp_ref", rollout_logp="hint")(out, batch.replace(extras={"hint": batch.logp_old}))
  np.testing.assert_allclose(np.asarray(w)[d["mask"] > 0], np.exp(d["ref"] - d["old"])[d["mask"] > 0], rtol=1e-5)

  def halve(out, batch):  # a user correction composes like a built-in one
    return jnp.full(batch.loss_mask.shape, 0.5), jnp.ones(batch.loss_mask.shape), {"custom": jnp.float32(1)}

  a, m = O.ppo_clip(correction=halve)(out, batch)
  b, _ = O.ppo_clip()(out, batch)
  np.testing.assert_allclose(a, 0.5 * np.asarray(b), rtol=1e-6)
  assert float(m["correction/custom"]) == 1.0

  def bad(out, batch):
    return jnp.ones((2, 2)), jnp.ones((2, 2)), {}

  with pytest.raises(ValueError, match="weight"):
    O.ppo_clip(correction=bad)(out, batch)


def test_jit_equals_eager():
  d = _data(11)
  out, batch = to_jax(d)
  for corr in (O.tis(1.5, level="sequence"), O.mis(0.5, 2.0, level="geometric"), O.icepop(),
               O.divergence_rejection(0.05, level="sequence_mean")):
    a = corr(out, batch)
    b = jax.jit(corr)(out, batch)
    np.testing.assert_allclose(a[0], b[0], rtol=1e-6)
    np.testing.assert_array_equal(a[1], b[1])
    for key in a[2]:
      np.testing.assert_allclose(a[2][key], b[2][key], rtol=1e-5, atol=1e-7)


def test_thresholds_may_be_traced():
  d = _data(12)
  out, batch = to_jax(d)
  f = jax.jit(lambda lo, hi: O.mis(lo, hi)(out, batch)[1])
  np.testing.assert_array_equal(f(0.7, 1.4), O.mis(0.7, 1.4)(out, batch)[1])
  g = jax.jit(lambda u: O.tis(u)(out, batch)[0])
  np.testing.assert_allclose(g(1.3), O.tis(1.3)(out, batch)[0])


@pytest.mark.parametrize("factory,match", [
    (lambda: O.tis(-1.0), "threshold"),
    (lambda: O.tis(0.0), "threshold"),
    (lambda: O.tis(2.0, level="batch"), "level"),
    (lambda: O.tis(2.0, lower=3.0), "lower"),
    (lambda: O.mis(3.0, 2.0), "lower"),
    (lambda: O.mis(-0.5, 2.0), "lower"),
    (lambda: O.mis(0.5, 2.0, level="seq"), "level"),
    (lambda: O.icepop(-0.1, 5.0), "alpha"),
    (lambda: O.icepop(6.0, 5.0), "alpha"),
    (lambda: O.divergence_rejection(0.1, estimator="k9"), "estimator"),
    (lambda: O.divergence_rejection(0.1, level="sequence"), "level"),
    (lambda: O.divergence_rejection(-0.1), "threshold"),
    (lambda: O.divergence_rejection((0.1, 0.2, 0.3)), "threshold"),
    (lambda: O.divergence_rejection((0.3, 0.1), estimator="k1"), "threshold"),
    (lambda: O.tis(2.0, train_logp=1.0), "train_logp"),
])
def test_bad_hyper_parameters_raise(factory, match):
  with pytest.raises(ValueError, match=match):
    factory()


def test_bad_batches_raise():
  d = _data(13)
  out, batch = to_jax(d)
  b, t = d["mask"].shape
  for corr in (O.tis(), O.mis(), O.icepop(), O.divergence_rejection(0.1)):
    with pytest.raises(ValueError, match="logp_behavior"):
      corr(out, batch.replace(logp_behavior=None))
    with pytest.raises(ValueError, match="logp_behavior"):
      corr(out, batch.replace(logp_behavior=jnp.zeros((b, t + 1))))
    with pytest.raises(ValueError, match="loss_mask"):
      corr(out, batch.replace(loss_mask=batch.loss_mask * 2))
    with pytest.raises(ValueError, match="rollout_logp"):
      O.tis(rollout_logp="nope")(out, batch)


def test_catalog_rows():
  rows = {t.name: t for t in O.TECHNIQUES}
  for name in ("tis", "mis", "icepop", "divergence_rejection"):
    assert rows[name].kind == "correction"
    assert getattr(O, name) is rows[name].fn
