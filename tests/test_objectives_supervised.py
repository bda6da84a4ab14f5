"""Tests for rljax.objectives._supervised: sft_nll, gft, opd, dpo, alol, entropy_gated_contrastive,
delta_logp_reweight."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rljax.objectives as O
from rljax.types import PolicyOutputs, TrainBatch

B, T = 4, 5


def _data(seed=0, **kw):
  rng = np.random.default_rng(seed)
  logp = -rng.uniform(0.01, 3.0, (B, T)).astype(np.float32)
  mask = np.ones((B, T), bool)
  mask[1, 3:] = False
  mask[2, :1] = False
  fields = dict(tokens=jnp.zeros((B, T), jnp.int32), loss_mask=jnp.asarray(mask),
                advantages=jnp.asarray(rng.normal(size=(B, T)).astype(np.float32)), group_id=jnp.arange(B),
                logp_ref=jnp.asarray(logp + 0.3 * rng.normal(size=(B, T)).astype(np.float32)))
  fields.update(kw)
  return PolicyOutputs.create(logp=jnp.asarray(logp)), TrainBatch.create(**fields)


def _grad(term, out, batch, aggregate=O.token_sum):
  obj = O.chain(term, aggregate=aggregate)
  return np.asarray(jax.grad(lambda lp: obj(out.replace(logp=lp), batch)[0])(out.logp))


def _np_log_softmax(z):
  z = z - z.max(-1, keepdims=True)
  return z - np.log(np.exp(z).sum(-1, keepdims=True))


# ---------------------------------------------------------------- SFT / GFT


def test_sft_nll_equals_cross_entropy():
  rng = np.random.default_rng(0)
  vocab = 6
  logits = rng.normal(size=(B, T, vocab))
  targets = rng.integers(0, vocab, (B, T))
  lp = jnp.take_along_axis(jax.nn.log_softmax(jnp.asarray(logits, jnp.float32), -1),
                           jnp.asarray(targets)[..., None], -1)[..., 0]
  out, batch = _data()
  mask = np.asarray(batch.loss_mask)
  ce = -np.take_along_axis(_np_log_softmax(logits), targets[..., None], -1)[..., 0]
  for fn in (O.chain(O.sft_nll()), jax.jit(O.chain(O.sft_nll()))):
    loss, metrics = fn(PolicyOutputs(logp=lp), batch)
    np.testing.assert_allclose(loss, (ce * mask).sum() / mask.sum(), rtol=1e-5)
    np.testing.assert_allclose(metrics["sft_nll/nll"], (ce * mask).sum() / mask.sum(), rtol=1e-5)
  # ∂L/∂p_t = −1/p_t  ⇔  ∂L/∂log p_t = −1.
  np.testing.assert_allclose(_grad(O.sft_nll(), out, batch), -mask.astype(float), rtol=0)
  # coef scales value and gradient: L_t = −c·log p_t.
  lp_np = np.asarray(out.logp, np.float64)
  np.testing.assert_allclose(O.sft_nll(0.35)(out, batch)[0], -0.35 * lp_np, rtol=1e-6)
  np.testing.assert_allclose(_grad(O.sft_nll(0.35), out, batch), -0.35 * mask, rtol=1e-6)
  with pytest.raises(ValueError, match="coef"):
    O.sft_nll(-1.0)


def test_gft_bounds_inverse_probability_weight():
  out, batch = _data(seed=1)
  tau = 0.2
  p = np.exp(np.asarray(out.logp, np.float64))
  mask = np.asarray(batch.loss_mask)
  assert (p < tau).any() and (p >= tau).any()
  ramp = O.gft(tau, rectification="ramp")
  g = _grad(ramp, out, batch)  # ∂/∂log p
  np.testing.assert_allclose(g, -np.minimum(1.0, p / tau) * mask, rtol=1e-5)
  # Gradient w.r.t. p is −min(1/p, 1/τ), bounded by 1/τ.
  assert np.all(np.abs(g / p)[mask] <= 1 / tau + 1e-4)
  loss, metrics = jax.jit(ramp)(out, batch)
  np.testing.assert_allclose(loss, -np.minimum(1, p / tau) * np.asarray(out.logp), rtol=1e-5)
  np.testing.assert_allclose(metrics["frac_rectified"], ((p < tau) & mask).sum() / mask.sum(), rtol=1e-6)
  high = out.replace(logp=jnp.maximum(out.logp, np.log(tau) + 1e-3))  # every p ≥ τ: equals SFT
  for rect in ("ramp", "step"):
    np.testing.assert_allclose(_grad(O.gft(tau, rectification=rect), high, batch), _grad(O.sft_nll(), high, batch),
                               rtol=1e-6)
  adv = np.asarray(batch.advantages)
  np.testing.assert_allclose(O.gft(tau, rectification="ramp", use_advantages=True)(out, batch)[0],
                             np.asarray(loss) * adv, rtol=1e-5)
  for bad in (0.0, 1.5, -0.1):
    with pytest.raises(ValueError, match="tau"):
      O.gft(bad)


# ---------------------------------------------------------------- OPD


@pytest.mark.parametrize("off_policy", [False, True])
def test_opd_expected_gradient_is_reverse_kl_gradient(off_policy):
  rng = np.random.default_rng(4)
  v = 6
  theta, teacher, old = rng.normal(size=v), _np_log_softmax(rng.normal(size=v)), _np_log_softmax(rng.normal(size=v))
  sampler = old if off_policy else _np_log_softmax(theta)
  fields = dict(tokens=jnp.zeros((v, 1), jnp.int32), loss_mask=jnp.ones((v, 1), bool),
                advantages=jnp.zeros((v, 1)), group_id=jnp.zeros(v, jnp.int32),
                extras={"logp_teacher": jnp.asarray(teacher[:, None], jnp.float32)})
  if off_policy:
    fields["logp_old"] = jnp.asarray(old[:, None], jnp.float32)
  batch = TrainBatch(**fields)
  term = O.opd(coef=1.0)
  weights = jnp.asarray(np.exp(sampler), jnp.float32)  # sampling distribution, held fixed

  def expected(th):
    loss, _ = term(PolicyOutputs(logp=jax.nn.log_softmax(th)[:, None]), batch)
    return jnp.sum(weights * loss[:, 0])

  grad = jax.jit(jax.grad(expected))(jnp.asarray(theta, jnp.float32))

  def kl(th):
    lp = _np_log_softmax(th)
    return np.sum(np.exp(lp) * (lp - teacher))

  h = 1e-6
  want = np.array([(kl(theta + h * e) - kl(theta - h * e)) / (2 * h) for e in np.eye(v)])
  np.testing.assert_allclose(grad, want, rtol=2e-4, atol=2e-6)
  # Student = teacher: zero gradient.
  same = batch.replace(extras={"logp_teacher": jnp.asarray(_np_log_softmax(theta)[:, None], jnp.float32)})
  g0 = jax.grad(lambda th: jnp.sum(weights * term(PolicyOutputs(logp=jax.nn.log_softmax(th)[:, None]), same)[0][:, 0]))(
      jnp.asarray(theta, jnp.float32))
  np.testing.assert_allclose(g0, 0.0, atol=1e-6)


def test_opd_value_metrics_and_errors():
  out, batch = _data(seed=2)
  teacher = np.asarray(out.logp) - 0.4
  batch = batch.replace(extras={"logp_teacher": jnp.asarray(teacher)})
  mask = np.asarray(batch.loss_mask)
  loss, metrics = jax.jit(O.opd(2.0))(out, batch)
  np.testing.assert_allclose(loss, np.full((B, T), 0.8), rtol=1e-5)  # c·(log π − log π_T)·1 on-policy
  np.testing.assert_allclose(metrics["reverse_kl"], 0.4, rtol=1e-5)
  np.testing.assert_allclose(O.opd(2.0)(out, batch)[0], loss, rtol=1e-6)
  with pytest.raises(ValueError, match="logp_teacher"):
    O.opd()(out, batch.replace(extras={}))
  with pytest.raises(ValueError, match="logp_teacher"):
    O.opd()(out, batch.replace(extras={"logp_teacher": jnp.zeros((B, T + 1))}))
  with pytest.raises(ValueError, match="coef"):
    O.opd(-1.0)
  del mask


# ---------------------------------------------------------------- DPO


def _np_dpo(lp, ref, mask, pairs, chosen, beta, eps):
  h = ((lp - ref) * mask).sum(1)
  losses, margins = [], []
  for p in sorted(set(pairs) - {-1}):
    rows = [i for i in range(len(pairs)) if pairs[i] == p]
    c = [i for i in rows if chosen[i]][0]
    r = [i for i in rows if not chosen[i]][0]
    m = beta * (h[c] - h[r])
    ls = lambda x: -np.log1p(np.exp(-x))
    losses.append(-(1 - eps) * ls(m) - eps * ls(-m))
    margins.append(m)
  return np.array(losses), np.array(margins), h


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_dpo_matches_numpy_and_recovers_mean_over_pairs(eps):
  out, batch = _data(seed=5)
  pairs = np.array([1, 0, 1, 0])
  chosen = np.array([False, True, True, False])
  batch = batch.replace(extras={"dpo_pair_id": jnp.asarray(pairs), "dpo_chosen": jnp.asarray(chosen)})
  beta = 0.5
  lp, ref = np.asarray(out.logp, np.float64), np.asarray(batch.logp_ref, np.float64)
  mask = np.asarray(batch.loss_mask)
  losses, margins, h = _np_dpo(lp, ref, mask, pairs, chosen, beta, eps)
  obj = O.chain(O.dpo(beta, label_smoothing=eps), aggregate=O.seq_mean_token_mean)
  for fn in (obj, jax.jit(obj)):
    loss, metrics = fn(out, batch)
    np.testing.assert_allclose(loss, losses.mean(), rtol=1e-5)
    np.testing.assert_allclose(metrics["dpo/rewards/margins"], margins.mean(), rtol=1e-5)
    np.testing.assert_allclose(metrics["dpo/rewards/accuracies"], (margins > 0).mean(), rtol=1e-6)
    np.testing.assert_allclose(metrics["dpo/rewards/chosen"], beta * h[chosen].mean(), rtol=1e-5)
  # Analytic gradient: ∂L/∂log π(chosen token) = −β[(1−ε)σ(−βm) − εσ(βm)]/P, opposite on the rejected row.
  g = _grad(O.dpo(beta, label_smoothing=eps), out, batch, aggregate=O.seq_mean_token_mean)
  sig = lambda x: 1 / (1 + np.exp(-x))
  want = np.zeros((B, T))
  for p, m in zip(sorted(set(pairs)), margins):
    coef = -beta * ((1 - eps) * sig(-m) - eps * sig(m)) / len(margins)
    for i in np.flatnonzero(pairs == p):
      want[i] = coef * (1 if chosen[i] else -1) * mask[i]
  np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-7)
  # Rewards instead of chosen flags give the same loss.
  by_reward = batch.replace(extras={"dpo_pair_id": jnp.asarray(pairs)}, rewards=jnp.asarray(chosen * 1.0))
  np.testing.assert_allclose(obj(out, by_reward)[0], losses.mean(), rtol=1e-5)


def test_dpo_at_reference_is_log2_and_errors():
  out, batch = _data(seed=6)
  pairs = jnp.asarray([0, 0, 1, -1])
  chosen = jnp.asarray([1, 0, 1, 0])
  at_ref = batch.replace(logp_ref=out.logp, extras={"dpo_pair_id": pairs, "dpo_chosen": chosen})
  with pytest.raises(ValueError, match="pair 1"):  # pair 1 has one row
    O.dpo()(out, at_ref)
  pairs = jnp.asarray([0, 0, 1, 1])
  at_ref = at_ref.replace(extras={"dpo_pair_id": jnp.asarray([0, 0, -1, -1]), "dpo_chosen": chosen})
  loss, _ = O.dpo()(out, at_ref)
  mask = np.asarray(batch.loss_mask)
  # pair_scale s = 4 rows / 2 paired rows = 2 (rows 2, 3 are unpaired and carry no loss)
  np.testing.assert_allclose(np.asarray(loss)[:2][mask[:2]], 2 * np.log(2), rtol=1e-6)
  assert np.all(np.asarray(loss)[2:] == 0)  # unpaired rows carry no loss
  bad = at_ref.replace(extras={"dpo_pair_id": pairs, "dpo_chosen": jnp.asarray([1, 1, 0, 1])})
  with pytest.raises(ValueError, match="exactly one chosen"):
    O.dpo()(out, bad)
  with pytest.raises(ValueError, match="dpo_pair_id"):
    O.dpo()(out, batch)
  with pytest.raises(ValueError, match="beta"):
    O.dpo(beta=0.0)
  with pytest.raises(ValueError, match="label_smoothing"):
    O.dpo(label_smoothing=0.7)


def test_dpo_with_unpaired_rows_is_the_mean_over_pairs():
  """Unpaired rows (id −1: the middle samples of ``preference_pairs``' groups) count as sequences under
  seq_mean_token_mean; the term's pair_scale undoes that, also when the batch is cut into micro-batches."""
  b, t = 8, 5
  rng = np.random.default_rng(11)
  lp = -rng.uniform(0.01, 3.0, (b, t))
  ref = lp + 0.3 * rng.normal(size=(b, t))
  mask = np.ones((b, t), bool)
  mask[1, 3:] = False
  mask[6, 2:] = False
  mask[7] = False  # an all-padding unpaired row: not a sequence for seq_mean_token_mean either
  pairs = np.array([0, 0, -1, -1, 1, -1, 1, -1])
  chosen = np.array([True, False, False, False, False, False, True, False])
  losses, _, _ = _np_dpo(lp, ref, mask, pairs, chosen, 0.3, 0.0)
  out = PolicyOutputs.create(logp=jnp.asarray(lp, jnp.float32))
  batch = TrainBatch.create(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask),
                            advantages=jnp.zeros((b, t)), group_id=jnp.arange(b),
                            logp_ref=jnp.asarray(ref, jnp.float32),
                            extras={"dpo_pair_id": jnp.asarray(pairs), "dpo_chosen": jnp.asarray(chosen)})
  obj = O.chain(O.dpo(0.3), aggregate=O.seq_mean_token_mean)
  for fn in (obj, jax.jit(obj)):
    loss, metrics = fn(out, batch)
    np.testing.assert_allclose(loss, losses.mean(), rtol=1e-5)  # not 4/7 of it (2P / (2P + U))
    np.testing.assert_allclose(metrics["dpo/pair_scale"], 7 / 4, rtol=1e-6)
  # micro-batches of 4 rows with the whole batch's statistics and denominator sum to the same loss
  stats, denom = obj.statistics(out, batch), obj.denominator(batch)
  halves = [jax.tree_util.tree_map(lambda x, s=s: x[s] if np.ndim(x) and np.shape(x)[0] == b else x, batch)
            for s in (slice(0, 4), slice(4, 8))]
  outs = [out.replace(logp=out.logp[s]) for s in (slice(0, 4), slice(4, 8))]
  total = sum(obj(o, h, denominator=denom, statistics=stats)[0] for o, h in zip(outs, halves))
  np.testing.assert_allclose(total, losses.mean(), rtol=1e-5)
  # without any unpaired row the scale is 1 (the loss is unchanged)
  full = batch.replace(extras={"dpo_pair_id": jnp.asarray([0, 0, 2, 1, 2, 1, 3, 3]),
                               "dpo_chosen": jnp.asarray([1, 0, 1, 0, 0, 1, 1, 0])}, loss_mask=jnp.ones((b, t), bool))
  np.testing.assert_allclose(obj(out, full)[1]["dpo/pair_scale"], 1.0)


def test_dpo_under_jit_poisons_incomplete_pairs():
  """The eager checks cannot run under jit (e.g. inside a micro-batched train step, where a split pair
  would otherwise train on half pairs): broken pairs give a NaN loss, so the step's guard skips it."""
  out, batch = _data(seed=6)
  dpo = jax.jit(O.dpo())
  one_row = batch.replace(extras={"dpo_pair_id": jnp.asarray([0, 0, 1, -1]), "dpo_chosen": jnp.asarray([1, 0, 1, 0])})
  loss = np.asarray(dpo(out, one_row)[0])
  assert np.all(np.isnan(loss[2])) and np.all(np.isfinite(loss[[0, 1, 3]]))
  two_chosen = batch.replace(extras={"dpo_pair_id": jnp.asarray([0, 0, 1, 1]),
                                     "dpo_chosen": jnp.asarray([1, 1, 0, 1])})
  loss = np.asarray(dpo(out, two_chosen)[0])
  assert np.all(np.isnan(loss[:2])) and np.all(np.isfinite(loss[2:]))
  total, _ = jax.jit(O.chain(O.dpo()))(out, one_row)
  assert np.isnan(float(total))
  good = batch.replace(extras={"dpo_pair_id": jnp.asarray([0, 0, 1, 1]), "dpo_chosen": jnp.asarray([1, 0, 0, 1])})
  assert np.all(np.isfinite(np.asarray(dpo(out, good)[0])))


# ---------------------------------------------------------------- A-LoL


@pytest.mark.parametrize("ratio", ["none", "sequence", "token"])
def test_alol_matches_numpy(ratio):
  out, batch = _data(seed=7)
  seq_adv = np.array([1.5, -0.7, 0.4, -2.0], np.float32)
  batch = batch.replace(advantages=jnp.asarray(np.repeat(seq_adv[:, None], T, 1)))
  eps = 0.2
  lp, ref = np.asarray(out.logp, np.float64), np.asarray(batch.logp_ref, np.float64)
  mask = np.asarray(batch.loss_mask)
  if ratio == "none":
    w = np.ones((B, T))
  elif ratio == "sequence":
    w = np.repeat(np.clip(np.exp(((lp - ref) * mask).sum(1)), 1 - eps, 1 + eps)[:, None], T, 1)
  else:
    w = np.clip(np.exp(lp - ref), 1 - eps, 1 + eps)
  keep = (seq_adv > 0)[:, None].astype(np.float64)
  want = -keep * seq_adv[:, None] * w * lp
  term = O.alol(ratio=ratio, eps=eps)
  for fn in (term, jax.jit(term)):
    loss, metrics = fn(out, batch)
    np.testing.assert_allclose(loss, want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(metrics["frac_dropped"], 0.5, rtol=1e-6)
  g = _grad(term, out, batch)
  assert np.all(g[keep[:, 0] == 0] == 0)  # negative advantage: zero gradient
  np.testing.assert_allclose(g, -keep * seq_adv[:, None] * w * mask, rtol=1e-5, atol=1e-7)
  # seq_mean_token_sum gives mean_b L_b.
  loss = O.chain(term, aggregate=O.seq_mean_token_sum)(out, batch)[0]
  np.testing.assert_allclose(loss, (want * mask).sum() / B, rtol=1e-5)


def test_alol_bad_args():
  with pytest.raises(ValueError, match="ratio"):
    O.alol(ratio="both")
  with pytest.raises(ValueError, match="eps"):
    O.alol(eps=1.0)
  out, batch = _data()
  with pytest.raises(ValueError, match="logp_ref"):
    O.alol()(out, batch.replace(logp_ref=None))


# ---------------------------------------------------------------- ReasonMaxxer


@pytest.mark.parametrize("negative", ["logp", "unlikelihood"])
def test_entropy_gated_contrastive_matches_numpy(negative):
  rng = np.random.default_rng(8)
  h_base = rng.uniform(0, 2, (B, T)).astype(np.float32)
  rewards = np.array([1.0, 0.0, 1.0, 0.0], np.float32)
  out, batch = _data(seed=8, rewards=jnp.asarray(rewards), extras={"entropy_base": jnp.asarray(h_base)})
  tau = 1.0
  lp = np.asarray(out.logp, np.float64)
  mask = np.asarray(batch.loss_mask)
  gate = (h_base >= tau) & mask
  neg = lp if negative == "logp" else -np.log1p(-np.exp(lp))
  want = gate * np.where((rewards > 0.5)[:, None], -lp, neg)
  term = O.entropy_gated_contrastive(tau, negative=negative)
  for fn in (term, jax.jit(term)):
    loss, metrics = fn(out, batch)
    np.testing.assert_allclose(loss, want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(metrics["frac_gated"], gate.sum() / mask.sum(), rtol=1e-6)
  g = _grad(term, out, batch)
  assert np.all(g[~gate] == 0)
  if negative == "logp":
    np.testing.assert_allclose(g, gate * np.where((rewards > 0.5)[:, None], -1.0, 1.0), rtol=1e-6)
  # rho gate: top half of masked positions by base entropy.
  q = np.quantile(h_base[mask].astype(np.float64), 0.5)
  loss, metrics = O.entropy_gated_contrastive(rho=0.5)(out, batch)
  np.testing.assert_allclose(metrics["frac_gated"], ((h_base >= q) & mask).sum() / mask.sum(), rtol=1e-6)
  # The gate uses the frozen base entropy, not the current policy's.
  moved = out.replace(entropy=jnp.zeros((B, T)))
  np.testing.assert_allclose(term(moved, batch)[0], want, rtol=1e-5, atol=1e-7)


def test_entropy_gated_contrastive_errors():
  with pytest.raises(ValueError, match="tau"):
    O.entropy_gated_contrastive()
  with pytest.raises(ValueError, match="tau"):
    O.entropy_gated_contrastive(1.0, rho=0.2)
  with pytest.raises(ValueError, match="rho"):
    O.entropy_gated_contrastive(rho=2.0)
  with pytest.raises(ValueError, match="negative"):
    O.entropy_gated_contrastive(1.0, negative="hinge")
  out, batch = _data()
  with pytest.raises(ValueError, match="entropy"):
    O.entropy_gated_contrastive(1.0)(out, batch.replace(rewards=jnp.zeros(B)))


# ---------------------------------------------------------------- Δlog p reweighting


def test_delta_logp_reweight():
  out, batch = _data(seed=9)
  inner = O.sft_nll()
  lp = np.asarray(out.logp, np.float64)
  mask = np.asarray(batch.loss_mask)
  gamma = 2.0
  w = (1 - np.exp(lp)) ** gamma
  wn = w / ((w * mask).sum() / mask.sum())
  term = O.delta_logp_reweight(inner, form="power", gamma=gamma)
  for fn in (term, jax.jit(term)):
    loss, metrics = fn(out, batch)
    np.testing.assert_allclose(loss, wn * -lp, rtol=1e-5)
  np.testing.assert_allclose(O.delta_logp_reweight(inner, form="power", gamma=gamma, normalize=False)(out, batch)[0], w * -lp,
                             rtol=1e-5)
  # Gradient: weight is a constant (detached).
  np.testing.assert_allclose(_grad(term, out, batch), -wn * mask, rtol=1e-5)
  # Weight is non-increasing in p; γ = 0 recovers the unweighted loss.
  order = np.argsort(lp.ravel())
  assert np.all(np.diff(wn.ravel()[order]) <= 1e-7)
  np.testing.assert_allclose(O.delta_logp_reweight(inner, form="power", gamma=0.0)(out, batch)[0], inner(out, batch)[0], rtol=1e-6)
  with pytest.raises(ValueError, match="gamma"):
    O.delta_logp_reweight(inner, gamma=-1.0)


def test_delta_logp_reweight_default_linear_form_uses_old_policy():
  # The authors' form: w_t = 1 + c·(1 − p_old,t), p from logp_old, not normalised (float64 reference).
  out, batch = _data(seed=11)
  rng = np.random.default_rng(12)
  old = np.asarray(out.logp, np.float64) + 0.5 * rng.normal(size=(B, T))
  old = np.minimum(old, -1e-3)
  batch = batch.replace(logp_old=jnp.asarray(old, jnp.float32))
  lp = np.asarray(out.logp, np.float64)
  mask = np.asarray(batch.loss_mask)
  inner = O.sft_nll()
  for c in (0.2, 0.45):
    w = 1.0 + c * (1.0 - np.exp(old))
    term = O.delta_logp_reweight(inner, c=c)
    for fn in (term, jax.jit(term)):
      np.testing.assert_allclose(fn(out, batch)[0], w * -lp, rtol=1e-5)
    np.testing.assert_allclose(_grad(term, out, batch), -w * mask, rtol=1e-5)
  with pytest.raises(ValueError, match="source"):
    O.delta_logp_reweight(inner, source="teacher")
