"""Tests for rljax.objectives._entropy: entropy_bonus, erc, clip_cov, kl_cov, top_entropy_mask."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rljax.objectives as O
from rljax.types import PolicyOutputs, TrainBatch

B, T = 4, 6


def _data(seed=0, adv_scale=1.0, logp_spread=2.0):
  rng = np.random.default_rng(seed)
  logp = -rng.uniform(0.01, logp_spread, (B, T)).astype(np.float32)
  mask = np.ones((B, T), bool)
  mask[0, 4:] = False
  mask[3, :2] = False
  ent = rng.uniform(0.1, 3.0, (B, T)).astype(np.float32)
  batch = TrainBatch.create(
      tokens=jnp.zeros((B, T), jnp.int32), loss_mask=jnp.asarray(mask),
      advantages=jnp.asarray((adv_scale * rng.normal(size=(B, T))).astype(np.float32)), group_id=jnp.arange(B),
      logp_old=jnp.asarray(logp + 0.4 * rng.normal(size=(B, T)).astype(np.float32)),
      entropy_old=jnp.asarray(ent * rng.uniform(0.85, 1.15, (B, T)).astype(np.float32)))
  out = PolicyOutputs.create(logp=jnp.asarray(logp), entropy=jnp.asarray(ent))
  return out, batch


def _np_ppo(out, batch, eps_low, eps_high):
  lp, old, a = (np.asarray(x, np.float64) for x in (out.logp, batch.logp_old, batch.advantages))
  r = np.exp(lp - old)
  l1, l2 = -a * r, -a * np.clip(r, 1 - eps_low, 1 + eps_high)
  return l1, l2, np.maximum(l1, l2)


def _grad_wrt_logp(term, out, batch, aggregate=O.token_mean):
  obj = O.chain(term, aggregate=aggregate)
  return jax.grad(lambda lp: obj(out.replace(logp=lp), batch)[0])(out.logp)


# ---------------------------------------------------------------- entropy bonus


def test_entropy_bonus_value_and_analytic_gradient_through_logits():
  rng = np.random.default_rng(0)
  vocab = 7
  logits = rng.normal(size=(B, T, vocab))
  mask = np.ones((B, T), bool)
  mask[1, 3:] = False
  c = 0.3
  batch = TrainBatch(tokens=jnp.zeros((B, T), jnp.int32), loss_mask=jnp.asarray(mask),
                     advantages=jnp.zeros((B, T)), group_id=jnp.arange(B))
  term = O.entropy_bonus(coef=c)

  def loss_fn(z):
    lp = jax.nn.log_softmax(z, axis=-1)
    ent = -jnp.sum(jnp.exp(lp) * lp, axis=-1)
    return O.chain(term)(PolicyOutputs(logp=jnp.zeros((B, T)), entropy=ent), batch)

  (loss, metrics), grad = jax.value_and_grad(loss_fn, has_aux=True)(jnp.asarray(logits, jnp.float32))
  p = np.exp(logits - logits.max(-1, keepdims=True))
  p /= p.sum(-1, keepdims=True)
  h = -(p * np.log(p)).sum(-1)
  n = mask.sum()
  np.testing.assert_allclose(loss, -c * (h * mask).sum() / n, rtol=1e-5)
  np.testing.assert_allclose(metrics["entropy_bonus/entropy"], (h * mask).sum() / n, rtol=1e-5)
  # dH/dz_v = −p_v (log p_v + H)
  want = -c / n * mask[..., None] * (-p * (np.log(p) + h[..., None]))
  np.testing.assert_allclose(grad, want, rtol=1e-4, atol=1e-7)
  # Uniform logits: H = log V.
  _, m = loss_fn(jnp.zeros((B, T, vocab)))
  np.testing.assert_allclose(m["entropy_bonus/entropy"], np.log(vocab), rtol=1e-6)


def test_entropy_bonus_zero_coef_and_bad_args():
  out, batch = _data()
  g = jax.grad(lambda e: O.chain(O.entropy_bonus(0.0))(out.replace(entropy=e), batch)[0])(out.entropy)
  assert np.all(np.asarray(g) == 0)
  with pytest.raises(ValueError, match="coef"):
    O.entropy_bonus(-1.0)
  with pytest.raises(ValueError, match="out.entropy"):
    O.entropy_bonus(0.1)(out.replace(entropy=None), batch)
  # jit == no-jit, traced coefficient.
  f = jax.jit(lambda c: O.chain(O.entropy_bonus(c))(out, batch)[0])
  np.testing.assert_allclose(f(0.5), O.chain(O.entropy_bonus(0.5))(out, batch)[0], rtol=1e-6)


# ---------------------------------------------------------------- ERC


def test_erc_detaches_out_of_band_tokens_only():
  out, batch = _data()
  h_old = np.full((B, T), 2.0, np.float32)
  ratios = np.array([0.5, 0.94, 0.96, 1.0, 1.04, 1.2], np.float32)
  h = h_old * ratios[None, :]
  out = out.replace(entropy=jnp.asarray(h))
  batch = batch.replace(entropy_old=jnp.asarray(h_old))
  inner = O.sft_nll()
  term = O.erc(inner, low=0.95, high=1.05)
  loss, metrics = term(out, batch)
  np.testing.assert_allclose(loss, inner(out, batch)[0], rtol=0)  # value unchanged
  in_band = np.abs(ratios - 1) < 0.05
  mask = np.asarray(batch.loss_mask)
  g = np.asarray(_grad_wrt_logp(term, out, batch))
  want = np.where(in_band[None, :] & mask, -1.0 / mask.sum(), 0.0)  # d(−logp)/dlogp / N for kept tokens
  np.testing.assert_allclose(g, want, rtol=1e-6, atol=0)
  np.testing.assert_allclose(metrics["erc/frac_detached"], ((~in_band[None, :]) & mask).sum() / mask.sum(), rtol=1e-6)
  # Same under jit; π_θ = π_old (ratio 1 everywhere) makes ERC a no-op.
  np.testing.assert_allclose(jax.jit(term)(out, batch)[0], loss, rtol=0)
  same = batch.replace(entropy_old=out.entropy)
  np.testing.assert_allclose(_grad_wrt_logp(term, out, same), _grad_wrt_logp(inner, out, same), rtol=0)
  # Zero entropies: both 0 -> ratio 1 (kept); only the old one 0 -> detached.
  h0 = np.zeros((B, T), np.float32)
  h0[:, 1] = 0.3
  g = np.asarray(_grad_wrt_logp(term, out.replace(entropy=jnp.asarray(h0)), batch.replace(entropy_old=jnp.zeros((B, T)))))
  np.testing.assert_allclose(g, np.where((h0 == 0) & mask, -1.0 / mask.sum(), 0.0), rtol=1e-6, atol=0)
  with pytest.raises(ValueError, match="low"):
    O.erc(inner, low=-0.1)
  with pytest.raises(ValueError, match="high"):
    O.erc(inner, high=0.9)
  with pytest.raises(ValueError, match="entropy_old"):
    term(out, batch.replace(entropy_old=None))


# ---------------------------------------------------------------- Clip-Cov / KL-Cov


def _np_cov(out, batch):
  m = np.asarray(batch.loss_mask, np.float64)
  a, lp = np.asarray(batch.advantages, np.float64), np.asarray(out.logp, np.float64)
  return (a - (a * m).sum() / m.sum()) * (lp - (lp * m).sum() / m.sum())


def test_clip_cov_matches_numpy_reference_deterministic():
  out, batch = _data(seed=3, adv_scale=3.0, logp_spread=4.0)
  ratio, lb, ub = 0.2, 1.0, 5.0
  term = O.clip_cov(0.2, 0.28, clip_cov_ratio=ratio, clip_cov_lb=lb, clip_cov_ub=ub)
  l1, l2, ppo = _np_ppo(out, batch, 0.2, 0.28)
  m = np.asarray(batch.loss_mask)
  cov = _np_cov(out, batch)
  cand = m & ~(l2 > l1) & (cov > lb) & (cov < ub)
  k = max(int(ratio * m.sum()), 1)
  order = sorted(np.flatnonzero(cand), key=lambda i: -cov.ravel()[i])
  sel = np.zeros(B * T, bool)
  sel[order[:k]] = True
  sel = sel.reshape(B, T)
  assert cand.sum() > k > 1, "test data should have more candidates than the budget"
  want = np.where(sel | ~m, 0.0, ppo)  # 0 on padding too
  assert np.all(ppo[~m] != 0)  # the padding positions would carry a loss without the mask
  for fn in (term, jax.jit(term)):
    loss, metrics = fn(out, batch)
    np.testing.assert_allclose(loss, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(metrics["cov_clip_frac"], sel.sum() / m.sum(), rtol=1e-6)
  g = np.asarray(_grad_wrt_logp(term, out, batch))
  assert np.all(g[sel] == 0)


def test_clip_cov_random_selection_with_key():
  out, batch = _data(seed=3, adv_scale=3.0, logp_spread=4.0)
  m = np.asarray(batch.loss_mask)
  l1, l2, ppo = _np_ppo(out, batch, 0.2, 0.2)
  cov = _np_cov(out, batch)
  cand = m & ~(l2 > l1) & (cov > 1.0) & (cov < 5.0)
  k = max(int(0.2 * m.sum()), 1)
  picks = []
  for seed in range(3):
    term = O.clip_cov(clip_cov_ratio=0.2, key=jax.random.PRNGKey(seed))
    loss = np.asarray(jax.jit(term)(out, batch)[0])
    assert np.all(loss[~m] == 0)  # padding carries no loss
    sel = (loss == 0) & (ppo != 0) & m
    assert sel.sum() == min(k, cand.sum())
    assert np.all(cand[sel])
    rest = ~sel & m
    np.testing.assert_allclose(loss[rest], ppo[rest], rtol=1e-5, atol=1e-6)  # others equal the PPO clip
    if seed == 0:  # un-jitted equals jitted; deterministic given the key
      np.testing.assert_array_equal(np.asarray(term(out, batch)[0]), loss)
    picks.append(tuple(np.flatnonzero(sel)))
  assert len(set(picks)) > 1  # different keys draw different subsets
  # Few candidates: the count is capped by the candidate count.
  term = O.clip_cov(clip_cov_ratio=1.0, clip_cov_lb=1.0, clip_cov_ub=5.0)
  sel = np.asarray(term(out, batch)[1]["cov_clip_frac"]) * m.sum()
  np.testing.assert_allclose(sel, cand.sum(), rtol=1e-6)


def test_kl_cov_matches_numpy_reference():
  out, batch = _data(seed=5)
  coef, ratio = 0.7, 0.15
  term = O.kl_cov(kl_cov_ratio=ratio, ppo_kl_coef=coef)
  m = np.asarray(batch.loss_mask)
  lp, old, a = (np.asarray(x, np.float64) for x in (out.logp, batch.logp_old, batch.advantages))
  cov = _np_cov(out, batch)
  k = max(int(m.sum() * ratio), 1)
  valid = np.flatnonzero(m)
  top = valid[np.argsort(-cov.ravel()[valid], kind="stable")[:k]]
  sel = np.zeros(B * T, bool)
  sel[top] = True
  sel = sel.reshape(B, T)
  want = (-a * np.exp(lp - old) + sel * coef * np.abs(lp - old)) * m  # 0 on padding
  for fn in (term, jax.jit(term)):
    loss, metrics = fn(out, batch)
    np.testing.assert_allclose(loss, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(metrics["frac_penalized"], k / m.sum(), rtol=1e-6)
  # The penalty is |log r| on either side of r = 1: mirror the old policy about the current one
  # (log r → −log r; cov and so the selection do not depend on logp_old).
  mirrored = batch.replace(logp_old=jnp.asarray(2 * lp - old, jnp.float32))
  assert sel.any() and np.all(lp[sel] != old[sel])  # so a selected log r < 0 here or in the mirrored batch
  want_m = (-a * np.exp(old - lp) + sel * coef * np.abs(lp - old)) * m
  np.testing.assert_allclose(term(out, mirrored)[0], want_m, rtol=1e-5, atol=1e-6)
  # At r = 1 the penalty is 0 and L = −A.
  at_one = batch.replace(logp_old=out.logp)
  np.testing.assert_allclose(term(out, at_one)[0], -a * m, rtol=1e-6)
  for kwargs, name in ((dict(kl_cov_ratio=0.0), "kl_cov_ratio"), (dict(ppo_kl_coef=-1.0), "ppo_kl_coef")):
    with pytest.raises(ValueError, match=name):
      O.kl_cov(**kwargs)
  with pytest.raises(ValueError, match="clip_cov_ratio"):
    O.clip_cov(clip_cov_ratio=1.5)
  with pytest.raises(ValueError, match="clip_cov_lb"):
    O.clip_cov(clip_cov_lb=5.0, clip_cov_ub=1.0)


# ---------------------------------------------------------------- top-entropy mask


def test_masked_quantile_matches_numpy():
  rng = np.random.default_rng(7)
  x = rng.normal(size=(5, 9)).astype(np.float32)
  m = rng.uniform(size=(5, 9)) < 0.6
  for q in (0.0, 0.13, 0.5, 0.8, 1.0):
    np.testing.assert_allclose(O.masked_quantile(jnp.asarray(x), jnp.asarray(m), q),
                               np.quantile(x[m].astype(np.float64), q), rtol=1e-5, atol=1e-6)
  assert np.isinf(O.masked_quantile(jnp.asarray(x), jnp.zeros_like(jnp.asarray(m)), 0.5))


@pytest.mark.parametrize("rho", [0.2, 0.5, 1.0])
def test_top_entropy_mask_keeps_top_rho_of_valid_tokens(rho):
  out, batch = _data(seed=2)
  inner = O.sft_nll()
  term = O.top_entropy_mask(inner, rho=rho)
  m = np.asarray(batch.loss_mask)
  h = np.asarray(out.entropy, np.float64)
  q = np.quantile(h[m], 1 - rho)  # TRL: torch.quantile(entropies[mask], 1 − top_entropy_quantile)
  keep = (h >= q) & m
  for fn in (term, jax.jit(term)):
    loss, metrics = fn(out, batch)
    np.testing.assert_allclose(loss, np.where(keep, -np.asarray(out.logp), 0.0), rtol=1e-6)
    np.testing.assert_allclose(metrics["top_entropy/frac_kept"], keep.sum() / m.sum(), rtol=1e-6)
  assert not np.any(np.asarray(loss)[~m])  # padding never kept
  if rho == 1.0:
    assert keep.sum() == m.sum()
  else:  # every kept token has entropy >= every dropped valid token
    assert h[keep].min() >= h[m & ~keep].max()
  # Gradient is the inner gradient on kept tokens, zero elsewhere.
  g = np.asarray(_grad_wrt_logp(term, out, batch))
  np.testing.assert_allclose(g, np.where(keep, -1.0 / m.sum(), 0.0), rtol=1e-6)


def test_wrappers_compose_in_chain():
  out, batch = _data(seed=4)
  term = O.top_entropy_mask(O.erc(O.kl_cov(kl_cov_ratio=0.1), low=0.9, high=1.1), rho=0.5, source="old")
  obj = O.chain(term, O.entropy_bonus(1e-3))
  loss, metrics = obj(out, batch)
  assert {"kl_cov/frac_penalized", "kl_cov/erc/frac_detached", "kl_cov/top_entropy/frac_kept",
          "entropy_bonus/entropy"} <= set(metrics)
  np.testing.assert_allclose(jax.jit(obj)(out, batch)[0], loss, rtol=1e-6)
  with pytest.raises(ValueError, match="rho"):
    O.top_entropy_mask(O.sft_nll(), rho=1.5)
  with pytest.raises(ValueError, match="source"):
    O.top_entropy_mask(O.sft_nll(), source="future")
  with pytest.raises(ValueError, match="term"):
    O.top_entropy_mask(3)


def test_advantage_sign_weighting():
  out, batch = _data(seed=6)
  a = np.array(batch.advantages)
  a[0, 0] = 0.0
  batch = batch.replace(advantages=jnp.asarray(a))
  inner = O.sft_nll()
  loss, metrics = O.advantage_sign_weighting(inner, 0.5, 2.0)(out, batch)
  w = np.where(a > 0, 0.5, np.where(a < 0, 2.0, 1.0))
  np.testing.assert_allclose(loss, w * -np.asarray(out.logp), rtol=1e-6)
  np.testing.assert_allclose(O.advantage_sign_weighting(inner)(out, batch)[0], inner(out, batch)[0], rtol=0)
  with pytest.raises(ValueError, match="neg_weight"):
    O.advantage_sign_weighting(inner, 1.0, -1.0)


def test_at_one_update_per_batch_erc_is_its_inner_term_and_the_cov_terms_touch_at_most_k_tokens():
  """With the proximal inputs taken from the update's own forward (one update per batch: ``logp_old = sg(logp)``,
  ``entropy_old = sg(entropy)``) ERC's entropy ratio is exactly 1, so its gradient is its inner term's, bit for bit;
  Clip-Cov differs from the unclipped PG gradient only on its ``k = max(floor(ratio N), 1)`` selected tokens (here
  N = 20 masked tokens, k = 1), and KL-Cov not at all: its |log r| penalty has gradient 0 at r = 1, as torch's abs
  backward in the authors' code -- why the real-model arena (docs/arena.md) cannot test them at μ = 1."""
  out, batch = _data(seed=3)
  at_one = batch.replace(logp_old=jax.lax.stop_gradient(out.logp), entropy_old=jax.lax.stop_gradient(out.entropy))
  ppo = _grad_wrt_logp(O.ppo_clip(0.2, 0.2), out, at_one)
  np.testing.assert_array_equal(np.asarray(_grad_wrt_logp(O.erc(O.ppo_clip(0.2, 0.2)), out, at_one)), np.asarray(ppo))
  assert np.asarray(ppo)[np.asarray(batch.loss_mask)].any()
  for term, k in ((O.clip_cov(), 1), (O.kl_cov(), 0)):
    changed = np.asarray(_grad_wrt_logp(term, out, at_one)) != np.asarray(ppo)
    assert changed.sum() == k, term
