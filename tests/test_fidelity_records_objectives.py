"""Fidelity records of the objectives room (issue #51, second reading): each peer / authors' row whose record cites
lines that no earlier test transcribed gets a float64 NumPy transcription of those lines here (written for these
tests from the cited source, not copied, and not calling rljax), compared with the rljax term at the source's
settings: the per-token loss value and, where a stop-gradient shapes it, d loss / d log π_θ.

Sources: volcengine/verl@v0.7.0 (f9c855f7) verl/trainer/ppo/core_algos.py and rollout_corr_helper.py;
volcengine/verl@b178a3cd (0.8.0.dev) rollout_corr_helper.py; huggingface/trl@v1.9.0 trl/trainer/grpo_trainer.py.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rljax.objectives as O
from rljax.types import PolicyOutputs, TrainBatch


def _data(seed, b=6, t=7, noise=0.5):
  rng = np.random.default_rng(seed)
  old = -rng.uniform(0.05, 2.5, (b, t))
  new = old + noise * rng.normal(size=(b, t))
  behav = old + 0.5 * noise * rng.normal(size=(b, t))
  ref = old + noise * rng.normal(size=(b, t))
  mask = np.ones((b, t))
  for i in range(b):
    mask[i, rng.integers(2, t + 1):] = 0
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  adv[0], adv[1] = np.abs(adv[0]), -np.abs(adv[1])
  return dict(old=old, new=new, behav=behav, ref=ref, mask=mask, adv=adv)


def _run(term, d, **extra):
  """(per-token loss, d sum(loss) / d logp) of an rljax term in float64."""
  with jax.enable_x64(True):
    b, t = d["mask"].shape
    batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(d["mask"]),
                       advantages=jnp.asarray(d["adv"]), group_id=jnp.arange(b, dtype=jnp.int32),
                       logp_old=jnp.asarray(d["old"]), logp_behavior=jnp.asarray(d["behav"]),
                       logp_ref=jnp.asarray(d["ref"]),
                       **{k: ({kk: jnp.asarray(vv) for kk, vv in v.items()} if isinstance(v, dict) else jnp.asarray(v))
                          for k, v in extra.items()})  # numpy in: converted under x64
    f = lambda lp: term(PolicyOutputs(logp=lp, entropy=None), batch)[0]  # noqa: E731
    loss = np.asarray(f(jnp.asarray(d["new"])))
    grad = np.asarray(jax.grad(lambda lp: jnp.sum(f(lp)))(jnp.asarray(d["new"])))
  assert loss.dtype == np.float64 and grad.dtype == np.float64, "the term must keep float64 under x64"
  return loss, grad


def _masked_mean_rows(x, m):
  return (x * m).sum(-1) / np.maximum(m.sum(-1), 1.0)


# ---------------------------------------------------------------- reinforce: verl bypass_mode, loss_type='reinforce'


@pytest.mark.parametrize("rollout_is", [None, "token"])
def test_reinforce_matches_verl_bypass_reinforce(rollout_is):
  """core_algos.py:1731-1808 (pg_losses = -A log π · w) with w from rollout_corr_helper.py:318-436 computed with
  old_log_prob = log_prob (core_algos.py:1900-1911): w = min(exp(clamp(log π − log π_rollout, ±20)) · mask, 2.0),
  detached; rollout_is=None: no w."""
  d = _data(1)
  a, m, lp = d["adv"], d["mask"], d["new"]
  if rollout_is is None:
    w = np.ones_like(lp)
    term = O.reinforce(importance_weight=False)
  else:
    w = np.minimum(np.exp(np.clip(lp - d["behav"], -20, 20)) * m, 2.0)
    term = O.reinforce(max_weight=2.0)
  want = -a * lp * w
  loss, grad = _run(term, d)
  np.testing.assert_allclose(loss[m > 0], want[m > 0], rtol=1e-12)
  np.testing.assert_allclose(grad[m > 0], (-a * w)[m > 0], rtol=1e-12)
  if rollout_is:
    assert (w[m > 0] == 2.0).any() and (w[m > 0] < 2.0).any()


# ---------------------------------------------------------------- GSPO: TRL sequence level, verl gspo (token form)


def test_gspo_matches_trl_sequence_level():
  """trl@v1.9.0 grpo_trainer.py:3054-3091: log s = Σ log r m / max(Σ m, 1); coef_1 = exp; coef_2 = clip;
  per-token loss -min(coef_1 A, coef_2 A) (delta None)."""
  d = _data(2, noise=0.0006)
  a, m = d["adv"], d["mask"]
  el, eh = 3e-4, 4e-4
  log_s = _masked_mean_rows(d["new"] - d["old"], m)[:, None]
  s = np.exp(log_s)
  want = -np.minimum(s * a, np.clip(s, 1 - el, 1 + eh) * a)
  loss, _ = _run(O.gspo(el, eh), d)
  np.testing.assert_allclose(loss[m > 0], np.broadcast_to(want, m.shape)[m > 0], rtol=1e-12)
  clipped = (s > 1 + eh) | (s < 1 - el)
  assert clipped.any() and (~clipped).any()


def test_gspo_token_matches_verl_gspo():
  """verl@v0.7.0 core_algos.py:1000-1073: log s_t = logp − sg(logp) + sg(Σ (logp − old) m / max(Σ m, 1)), clamped at
  10; loss max(−A s, −A clip(s, 1−lo, 1+hi)); d/dlogp_t = −A s where the unclipped branch is taken, else 0."""
  d = _data(4, noise=0.001)
  a, m = d["adv"], d["mask"]
  el, eh = 3e-4, 4e-4
  log_s = np.minimum(_masked_mean_rows(d["new"] - d["old"], m)[:, None] * np.ones_like(m), 10.0)
  s = np.exp(log_s)
  l1, l2 = -a * s, -a * np.clip(s, 1 - el, 1 + eh)
  want = np.maximum(l1, l2)
  want_grad = np.where(l1 >= l2, -a * s, 0.0)
  loss, grad = _run(O.gspo_token(el, eh), d)
  np.testing.assert_allclose(loss[m > 0], want[m > 0], rtol=1e-12)
  np.testing.assert_allclose(grad[m > 0], want_grad[m > 0], rtol=1e-12, atol=1e-15)
  assert (want_grad[m > 0] == 0).any() and (want_grad[m > 0] != 0).any()


# ---------------------------------------------------------------- CISPO: TRL (upper cap) and verl (two-sided)


@pytest.mark.parametrize("peer", ["trl", "verl"])
def test_cispo_matches_trl_and_verl(peer):
  """trl@v1.9.0 grpo_trainer.py:3080-3082: -clamp(exp(log r), max=epsilon_high).detach() A logp (epsilon_high=5);
  verl@v0.7.0 core_algos.py:1489-1503: -clamp(exp(clamp(log r, ±20)), 1−low, 1+high).detach() A logp."""
  d = _data(4, noise=1.0)
  a, m, lp = d["adv"], d["mask"], d["new"]
  r = np.exp(np.clip(lp - d["old"], -20, 20))
  if peer == "trl":
    w, term = np.minimum(r, 5.0), O.cispo()
  else:
    w, term = np.clip(r, 0.8, 1.2), O.cispo(eps_low=0.2, eps_high=0.2)
  loss, grad = _run(term, d)
  np.testing.assert_allclose(loss[m > 0], (-w * a * lp)[m > 0], rtol=1e-12)
  np.testing.assert_allclose(grad[m > 0], (-w * a)[m > 0], rtol=1e-12)
  assert (w[m > 0] != r[m > 0]).any()


# ---------------------------------------------------------------- SAPO: verl / TRL gate


def test_sapo_matches_verl_and_trl_gate():
  """verl@v0.7.0 core_algos.py:1122-1139 (trl@v1.9.0 grpo_trainer.py:3092-3095 without the clamp):
  tau = 1.0 if A > 0 else 1.05; loss = −sigmoid(tau (r − 1)) 4/tau · A; d/dlogp = −A · 4 σ'(tau(r−1)) · r."""
  d = _data(5, noise=0.8)
  a, m = d["adv"], d["mask"]
  r = np.exp(np.clip(d["new"] - d["old"], -20, 20))
  tau = np.where(a > 0, 1.0, 1.05)
  sig = 1 / (1 + np.exp(-tau * (r - 1)))
  loss, grad = _run(O.sapo(), d)
  np.testing.assert_allclose(loss[m > 0], (-sig * 4 / tau * a)[m > 0], rtol=1e-12)
  np.testing.assert_allclose(grad[m > 0], (-a * 4 * sig * (1 - sig) * r)[m > 0], rtol=1e-10)


# ---------------------------------------------------------------- corrections: w · keep against the peers' weights


def _correction(corr, d):
  with jax.enable_x64(True):
    b, t = d["mask"].shape
    batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(d["mask"]),
                       advantages=jnp.asarray(d["adv"]), group_id=jnp.arange(b, dtype=jnp.int32),
                       logp_old=jnp.asarray(d["old"]), logp_behavior=jnp.asarray(d["behav"]))
    w, keep, _ = corr(PolicyOutputs(logp=jnp.asarray(d["new"])), batch)
    return np.asarray(w) * np.asarray(keep)


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_tis_matches_verl_rollout_is_and_trl_truncate(level):
  """verl@v0.7.0 rollout_corr_helper.py:362-386 (token: exp(clamp(log r, ±20)); sequence: exp(clamp(Σ m log r, ±20)));
  × mask; clamp(max=threshold). trl@v1.9.0 grpo_trainer.py:2580-2601 (*_truncate: clamp(exp(Σ m diff), min, max))."""
  d = _data(6, noise=0.8)
  m = d["mask"]
  log_r = d["old"] - d["behav"]
  if level == "token":
    verl = np.exp(np.clip(log_r, -20, 20)) * m
    trl = np.exp(log_r * m)
  else:
    verl = np.exp(np.clip((log_r * m).sum(-1, keepdims=True), -20, 20)) * m
    trl = np.exp((log_r * m).sum(-1, keepdims=True)) * np.ones_like(m)
  got = _correction(O.tis(2.0, level=level), d)
  np.testing.assert_allclose(got[m > 0], np.minimum(verl, 2.0)[m > 0], rtol=1e-12)
  got = _correction(O.tis(3.0, level=level, lower=0.5), d)
  np.testing.assert_allclose(got[m > 0], np.clip(trl, 0.5, 3.0)[m > 0], rtol=1e-12)
  assert (np.minimum(verl, 2.0)[m > 0] == 2.0).any()


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_mis_matches_trl_mask_modes(level):
  """trl@v1.9.0 grpo_trainer.py:2580-2617 (*_mask): ratio exp(Σ m (old − sampling)) per token or sequence, set to 0
  outside [clip_min, clip_max] (clip_min None: no lower bound); the per-token loss × that ratio (:3117-3118)."""
  d = _data(7, noise=0.8)
  m = d["mask"]
  diff = (d["old"] - d["behav"]) * m
  r = np.exp(diff) if level == "token" else np.exp(diff.sum(-1, keepdims=True)) * np.ones_like(m)
  for lo, hi, corr in ((None, 3.0, O.mis(0.0, 3.0, level=level)), (0.5, 2.0, O.mis(0.5, 2.0, level=level))):
    lo_ = -np.inf if lo is None else lo
    want = np.where((r < lo_) | (r > hi), 0.0, r)
    np.testing.assert_allclose(_correction(corr, d)[m > 0], want[m > 0], rtol=1e-12)
  assert ((r[m > 0] < 0.5) | (r[m > 0] > 2.0)).any()


def test_icepop_matches_openrlhf_icepop():
  """OpenRLHF@v0.11.0 openrlhf/models/loss.py:196-204: vllm_is = exp(old − rollout); × 1[low ≤ vllm_is ≤ high];
  loss = vllm_is · loss (low, high = 0.5, 5.0 from train_ppo_ray.py)."""
  d = _data(8, noise=2.0)
  m = d["mask"]
  k = np.exp(d["old"] - d["behav"])
  want = k * ((k >= 0.5) & (k <= 5.0))
  np.testing.assert_allclose(_correction(O.icepop(), d)[m > 0], want[m > 0], rtol=1e-12)
  assert (want[m > 0] == 0).any() and (want[m > 0] != 0).any()


def _verl_rs(log_ratio, m, option, spec):
  """verl@b178a3cd rollout_corr_helper.py:93-153 (thresholds) and :219-330 (one option): the kept-token mask."""
  lr = np.clip(log_ratio, -20, 20)
  k = {"k1": -lr, "k2": 0.5 * lr ** 2, "k3": np.exp(lr) - 1 - lr}[option[-2:]]
  if option.endswith("k1"):
    lo, hi = (float(x) for x in spec.split("_")) if "_" in spec else (1 / float(spec), float(spec))
    ok = lambda s: (s >= np.log(lo)) & (s <= np.log(hi))  # noqa: E731
  else:
    ok = lambda s: s <= float(spec)  # noqa: E731
  if option.startswith("token"):
    return ok(k).astype(float)
  if option.startswith("seq_sum"):
    s = (k * m).sum(-1)
  elif option.startswith("seq_mean"):
    s = (k * m).sum(-1) / (m.sum(-1) + 1e-8)  # verl_F.masked_mean
  else:
    s = np.where(m > 0, k, -np.inf).max(-1)
  return np.broadcast_to(ok(s)[:, None], m.shape).astype(float)


@pytest.mark.parametrize("option,spec,kw", [
    ("token_k1", "0.6_1.5", dict(threshold=(np.log(0.6), np.log(1.5)), estimator="k1", level="token")),
    ("token_k1", "1.5", dict(threshold=np.log(1.5), estimator="k1", level="token")),
    ("token_k3", "0.1", dict(threshold=0.1, estimator="k3", level="token")),
    ("seq_sum_k2", "0.5", dict(threshold=0.5, estimator="k2", level="sequence_sum")),
    ("seq_mean_k1", "0.8_1.1", dict(threshold=(np.log(0.8), np.log(1.1)), estimator="k1", level="sequence_mean")),
    ("seq_mean_k3", "0.05", dict(threshold=0.05, estimator="k3", level="sequence_mean")),
    ("seq_max_k3", "0.3", dict(threshold=0.3, estimator="k3", level="sequence_max")),
])
def test_divergence_rejection_matches_verl_rollout_rs(option, spec, kw):
  d = _data(9, noise=0.6)
  m = d["mask"]
  want = _verl_rs(d["old"] - d["behav"], m, option, spec)
  got = _correction(O.divergence_rejection(**kw), d)
  np.testing.assert_array_equal(got[m > 0], want[m > 0])
  assert (want[m > 0] == 0).any() and (want[m > 0] == 1).any()


# ---------------------------------------------------------------- value, KL, entropy terms


def test_value_loss_matches_verl_compute_value_loss():
  """verl@v0.7.0 core_algos.py:1578-1582: vpredclipped = clip(v, v_old ± ε); ½ max((v − R)², (vclip − R)²)
  (per token, before agg_loss); ε = 0.5 (critic.yaml cliprange_value)."""
  rng = np.random.default_rng(10)
  b, t = 5, 6
  v, v_old, ret = rng.normal(size=(b, t)), rng.normal(size=(b, t)), rng.normal(size=(b, t))
  m = np.ones((b, t))
  vclip = np.clip(v, v_old - 0.5, v_old + 0.5)
  want = 0.5 * np.maximum((v - ret) ** 2, (vclip - ret) ** 2)
  want_grad = np.where((vclip - ret) ** 2 > (v - ret) ** 2, 0.0, v - ret)
  with jax.enable_x64(True):
    batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(m), advantages=jnp.zeros((b, t)),
                       group_id=jnp.arange(b, dtype=jnp.int32), values_old=jnp.asarray(v_old),
                       returns=jnp.asarray(ret))
    f = lambda vv: O.value_loss(0.5)(PolicyOutputs(logp=jnp.zeros((b, t)), values=vv), batch)[0]  # noqa: E731
    got = np.asarray(f(jnp.asarray(v)))
    grad = np.asarray(jax.grad(lambda vv: jnp.sum(f(vv)))(jnp.asarray(v)))
  assert got.dtype == np.float64
  np.testing.assert_allclose(got, want, rtol=1e-13)
  np.testing.assert_allclose(grad, want_grad, rtol=1e-13)
  assert (want_grad == 0).any() and (want_grad != 0).any()


@pytest.mark.parametrize("kind", ["low_var_kl", "k1", "k2", "abs", "low_var_kl+"])
def test_kl_penalty_matches_verl_kl_penalty(kind):
  """verl@v0.7.0 core_algos.py:1588-1649: k3 = clamp(exp(clamp(ref − lp, ±20)) − (ref − lp) − 1, ±10); k1 = lp − ref;
  k2 = ½Δ²; abs = |Δ|; '+': value of k, gradient of ½Δ² (straight through). × kl_loss_coef 0.001 (dp_actor:535)."""
  d = _data(11, noise=3.0)
  lp, ref, m = d["new"], d["ref"], d["mask"]
  delta = lp - ref
  kl = np.clip(ref - lp, -20, 20)
  k3 = np.clip(np.exp(kl) - kl - 1, -10, 10)
  value = {"low_var_kl": k3, "k1": delta, "k2": 0.5 * delta ** 2, "abs": np.abs(delta), "low_var_kl+": k3}[kind]
  dk3 = np.where((np.abs(ref - lp) < 20) & (np.exp(kl) - kl - 1 < 10), -np.exp(kl) + 1, 0.0)
  grad = {"low_var_kl": dk3, "k1": np.ones_like(lp), "k2": delta, "abs": np.sign(delta), "low_var_kl+": delta}[kind]
  loss, g = _run(O.kl_penalty(0.001, kind), d)
  np.testing.assert_allclose(loss, 0.001 * value, rtol=1e-12)
  np.testing.assert_allclose(g, 0.001 * grad, rtol=1e-12, atol=1e-18)
  if kind == "low_var_kl":
    assert (k3[m > 0] == 10).any()  # the clamp is exercised


def test_kl_in_reward_matches_verl_apply_kl_penalty():
  """verl@v0.7.0 ray_trainer.py:148-157: kld = kl_penalty(old, ref, 'kl') · mask; rewards = scores − β·kld;
  current_kl = mean_b(masked_mean_t(kld)), β = kl_ctrl.kl_coef 0.001."""
  d = _data(12, noise=0.7)
  m = d["mask"]
  scores = np.random.default_rng(12).normal(size=m.shape) * m
  kld = (d["old"] - d["ref"]) * m
  with jax.enable_x64(True):
    got, metrics = O.kl_in_reward(jnp.asarray(scores), jnp.asarray(d["old"]), jnp.asarray(d["ref"]),
                                  jnp.asarray(m), beta=0.001)
  assert np.asarray(got).dtype == np.float64
  np.testing.assert_allclose(np.asarray(got), scores - 0.001 * kld, rtol=1e-13, atol=1e-16)
  np.testing.assert_allclose(float(metrics["kl"]), np.mean((kld * m).sum(-1) / (m.sum(-1) + 1e-8)), rtol=1e-7)


def test_entropy_bonus_matches_verl_dp_actor_sign_and_keeps_float64():
  """verl@v0.7.0 dp_actor.py:521-525: policy_loss −= agg_loss(entropy)·entropy_coeff: per token −c·H."""
  rng = np.random.default_rng(13)
  ent = rng.uniform(0, 3, (3, 4))
  with jax.enable_x64(True):
    batch = TrainBatch(tokens=jnp.zeros((3, 4), jnp.int32), loss_mask=jnp.ones((3, 4)), advantages=jnp.zeros((3, 4)),
                       group_id=jnp.arange(3, dtype=jnp.int32))
    got, _ = O.entropy_bonus(1e-3)(PolicyOutputs(logp=jnp.zeros((3, 4)), entropy=jnp.asarray(ent)), batch)
  assert np.asarray(got).dtype == np.float64
  np.testing.assert_allclose(np.asarray(got), -1e-3 * ent, rtol=1e-15)


# ---------------------------------------------------------------- GMPO, Rank-GRPO: the authors' code


def test_gmpo_matches_authors_code_per_sequence():
  """callsys/GMPO@205b2bf4 train_zero_math_gmpo.py:675-688, one sequence per micro-batch (its scripts):
  sgn = −1 if A ≥ 0 else 1; Δ' = sgn·max(sgn·Δ, clamp(sgn·Δ, −c, c)); ratio = exp(mean over the response Δ');
  pg_loss = −A·ratio (c = 0.4)."""
  d = _data(14, noise=0.6)
  a, m = d["adv"], d["mask"]
  want = np.zeros_like(m)
  for i in range(m.shape[0]):
    sgn = -1.0 if a[i, 0] >= 0 else 1.0
    diff = (d["new"][i] - d["old"][i])[m[i] > 0]
    s = sgn * diff
    ratio = np.exp((sgn * np.maximum(s, np.clip(s, -0.4, 0.4))).sum() / len(diff))
    want[i] = -a[i, 0] * ratio
  loss, _ = _run(O.gmpo(), d)
  np.testing.assert_allclose(loss[m > 0], want[m > 0], rtol=1e-12)
  assert (np.abs(d["new"] - d["old"])[m > 0] > 0.4).any()


def test_segment_ratio_matches_rank_grpo_item_level():
  """yaochenzhu/Rank-GRPO@0808d82c libs/trl/rank_grpo_trainer.py:2022-2075 (importance_sampling_level='item'):
  per item, mean of Σ m·log r over its tokens (counts clamped at 1), coef_1 = exp, coef_2 = clamp(1 − 0.06,
  1 + 0.08), per-token −min(coef_1 A, coef_2 A)."""
  d = _data(15, noise=0.1)
  a, m = d["adv"], d["mask"]
  rng = np.random.default_rng(15)
  seg = np.sort(rng.integers(0, 4, size=m.shape), axis=1)
  lr = d["new"] - d["old"]
  coef_1 = np.zeros_like(m)
  for i in range(m.shape[0]):
    for j in np.unique(seg[i]):
      sel = seg[i] == j
      coef_1[i, sel] = np.exp((lr[i, sel] * m[i, sel]).sum() / max(m[i, sel].sum(), 1.0))
  want = -np.minimum(coef_1 * a, np.clip(coef_1, 0.94, 1.08) * a)
  loss, _ = _run(O.segment_ratio(segment_ids="item_seg_ids"), d, extras={"item_seg_ids": seg})
  np.testing.assert_allclose(loss[m > 0], want[m > 0], rtol=1e-12)
  clipped = (coef_1 < 0.94) | (coef_1 > 1.08)
  assert clipped[m > 0].any() and (~clipped[m > 0]).any()


# ---------------------------------------------------------------- CPGD (siiRL), PSPO (GR-PSPO), decoupled PPO (AReaL)


def test_cpgd_gradient_matches_siirl_in_float64():
  """sii-research/siiRL@af00a771 core_algos.py:611-617: clipped_log_prob = clamp(log π, max=log(1+ε)+old) if A > 0
  else clamp(log π, min=log(1−ε)+old); pg = −clipped·A; dp_actor.py:490: drift = clamp(exp(sg(log π) − old) − 1,
  max=2)·log π, × coef. Gradient: −A where log π is not clamped, + coef·min(r − 1, 2). Value: ours − (−A·old)."""
  d = _data(16, noise=0.4)
  a, m, lp, old = d["adv"], d["mask"], d["new"], d["old"]
  eps, coef = 0.2, 0.001
  clipped = np.where(a > 0, np.minimum(lp, np.log(1 + eps) + old), np.maximum(lp, np.log(1 - eps) + old))
  pg = -clipped * a
  free = np.where(a > 0, lp < np.log(1 + eps) + old, lp > np.log(1 - eps) + old)
  r = np.exp(lp - old)
  assert (r[m > 0] < 3).all()  # below siiRL's cap, where its drift gradient is k3's
  want_grad = np.where(free, -a, 0.0) + coef * np.minimum(r - 1, 2.0)
  loss, grad = _run(O.cpgd(eps, drift_coef=coef), d)
  np.testing.assert_allclose(grad[m > 0], want_grad[m > 0], rtol=1e-12, atol=1e-15)
  np.testing.assert_allclose((loss - coef * (r - 1 - (lp - old)))[m > 0], (pg + a * old)[m > 0], rtol=1e-12,
                             atol=1e-15)
  assert (~free[m > 0]).any() and free[m > 0].any()


def test_pspo_matches_gr_pspo_patch_in_float64():
  """MCDwyer/GR-PSPO@16d89d53 grpotrainer.patch:36-42: coef_2 = (1 − α)·exp(log π − old) + α; −coef_2·A (α 0.1)."""
  d = _data(17, noise=0.7)
  a, m = d["adv"], d["mask"]
  coef_1 = np.exp(d["new"] - d["old"])
  loss, grad = _run(O.pspo(), d)
  np.testing.assert_allclose(loss[m > 0], (-(0.9 * coef_1 + 0.1) * a)[m > 0], rtol=1e-12)
  np.testing.assert_allclose(grad[m > 0], (-0.9 * coef_1 * a)[m > 0], rtol=1e-12)


@pytest.mark.parametrize("rejection", [False, True])
def test_decoupled_ppo_matches_areal_ppo_actor_loss_fn(rejection):
  """inclusionAI/AReaL@4aef98d8 functional.py:429-545 (token level, c_clip None): ratio = exp(log π − prox) on the
  mask; max(−A r, −A clip(r, 1 − 0.2, 1 + 0.28)); with rejection_sampling (token, mask, ratio, upper 5.0):
  tokens with w = exp(prox − behave) > 5 leave loss_mask, × w; the sum over the original mask count."""
  d = _data(18, noise=0.5)
  d["behav"] = d["old"] + np.random.default_rng(18).normal(scale=2.0, size=d["old"].shape)
  a, m = d["adv"], d["mask"]
  r = np.exp(d["new"] - d["old"])
  per_token = np.maximum(-a * r, -a * np.clip(r, 0.8, 1.28))
  w = np.exp(d["old"] - d["behav"])
  if rejection:
    keep = (w <= 5.0).astype(float)
    per_token = per_token * w * keep
    term = O.decoupled_ppo(0.2, 0.28, behavior_cap=5.0)
    assert (keep[m > 0] == 0).any()
  else:  # w always applied here; AReaL without rejection_sampling has no w: equal once w is multiplied in
    per_token = per_token * w
    term = O.decoupled_ppo(0.2, 0.28)
  loss, _ = _run(term, d)
  np.testing.assert_allclose(loss[m > 0], per_token[m > 0], rtol=1e-12)
  assert ((r > 1.28) & (a > 0))[m > 0].any() or ((r < 0.8) & (a < 0))[m > 0].any()


# ---------------------------------------------------------------- KL-Cov, Clip-Cov: PRIME-RL/Entropy-Mechanism-of-RL


def _cov_data(seed):
  d = _data(seed, b=8, t=9, noise=0.3)
  d["adv"] = np.random.default_rng(seed).normal(scale=3.0, size=d["adv"].shape)  # per-token A: large covariances
  d["new"] = d["old"] + np.random.default_rng(seed + 1).normal(scale=0.3, size=d["old"].shape)
  return d


def test_kl_cov_matches_authors_code_in_float64():
  """PRIME-RL/Entropy-Mechanism-of-RL@88505792 core_algos.py:426-465: cov = (A − mean A)(log π − mean log π) over
  the valid tokens; the max(1, int(N·k_percent/100)) largest get −A r + coef·|log r|, the rest −A r
  (k_percent 2 here, i.e. kl_cov_ratio 0.02; coef 1)."""
  d = _cov_data(19)
  a, m, lp = d["adv"], d["mask"], d["new"]
  valid = m > 0
  cov = (a[valid] - a[valid].mean()) * (lp[valid] - lp[valid].mean())
  n_sel = max(1, int(len(cov) * 2 / 100))
  r = np.exp(lp - d["old"])
  want = -a * r
  idx = np.flatnonzero(valid.ravel())[np.argsort(-cov, kind="stable")[:n_sel]]
  want.ravel()[idx] += np.abs(lp - d["old"]).ravel()[idx]
  loss, _ = _run(O.kl_cov(kl_cov_ratio=0.02), d)
  assert n_sel >= 1 and len(np.unique(cov)) == len(cov)  # no ties: topk's order does not matter
  np.testing.assert_allclose(loss[valid], want[valid], rtol=1e-12)


def test_clip_cov_matches_authors_code_when_the_draw_takes_every_candidate():
  """PRIME-RL/Entropy-Mechanism-of-RL@88505792 core_algos.py:469-513 (recipe eps 1/1, lb 1, ub 5): candidates are
  valid, unclipped tokens with lb < cov < ub; randperm keeps min(clip_num, #candidates) of them, so with
  clip_num ≥ #candidates every candidate gets corr 0 whatever the draw; the rest max(−A r, −A clip(r))."""
  d = _cov_data(20)
  a, m, lp = d["adv"], d["mask"], d["new"]
  r = np.exp(lp - d["old"])
  l1, l2 = -a * r, -a * np.clip(r, 0.0, 2.0)
  clipped = (l2 > l1) & (m > 0)
  am = (a * m).sum() / m.sum()
  lm = (lp * m).sum() / m.sum()
  cov = (a - am) * (lp - lm)
  cand = (m > 0) & ~clipped & (cov > 1.0) & (cov < 5.0)
  clip_num = max(int(0.5 * m.sum()), 1)
  assert 0 < cand.sum() <= clip_num
  want = np.where(cand, 0.0, np.maximum(l1, l2))
  loss, _ = _run(O.clip_cov(1.0, 1.0, clip_cov_ratio=0.5), d)
  np.testing.assert_allclose(loss[m > 0], want[m > 0], rtol=1e-12)


# ---------------------------------------------------------------- ERC: Kwai-Klear/ERC


def test_erc_matches_authors_grpo_erc_loss():
  """Kwai-Klear/ERC@f1885c53 core_algos.py:966-1006 with the recipe's settings (clip 0.2/0.28, c 10, band
  0.95/1.05): dual-clip PPO per token; ρ = (H + 1e-8)/(H_old + 1e-8); the loss is detached where not
  0.95 < ρ < 1.05. Value: the dual-clip loss; gradient: its gradient inside the band, 0 outside."""
  d = _data(21, noise=0.5)
  a, m = d["adv"], d["mask"]
  rng = np.random.default_rng(21)
  h_old = rng.uniform(0.1, 2.0, m.shape)
  h = h_old * rng.uniform(0.9, 1.1, m.shape)
  r = np.exp(np.clip(d["new"] - d["old"], -20, 20))
  l1, l2 = -a * r, -a * np.clip(r, 0.8, 1.28)
  c1 = np.maximum(l1, l2)
  loss_val = np.where(a < 0, np.minimum(-a * 10.0, c1), c1)
  grad_pg = np.where(l1 >= l2, -a * r, 0.0)
  grad_pg = np.where((a < 0) & (-a * 10.0 < c1), 0.0, grad_pg)
  rho = (h + 1e-8) / (h_old + 1e-8)
  band = (rho > 0.95) & (rho < 1.05)
  term = O.erc(O.ppo_clip(0.2, 0.28, dual_clip=10.0))
  loss, grad = _run(lambda out, batch: term(out.replace(entropy=jnp.asarray(h)), batch), d,
                    entropy_old=h_old)
  np.testing.assert_allclose(loss[m > 0], loss_val[m > 0], rtol=1e-12)
  np.testing.assert_allclose(grad[m > 0], np.where(band, grad_pg, 0.0)[m > 0], rtol=1e-12, atol=1e-15)
  assert band[m > 0].any() and (~band[m > 0]).any()


# ---------------------------------------------------------------- top-entropy mask: TRL get_high_entropy_mask


def test_top_entropy_mask_matches_trl_high_entropy_mask():
  """trl@v1.9.0 grpo_trainer.py:1413-1432 with top_entropy_quantile 0.2 (:3021): q = quantile(float32 valid
  entropies, 1 − 0.2); keep = H·m ≥ q and m; per-token loss × keep (:3114-3115). 26 valid tokens: q is the 21st
  order statistic exactly, so float32 rounding of the interpolation does not matter."""
  d = _data(22, b=5, t=7)
  d["mask"] = np.zeros((5, 7))
  d["mask"].ravel()[:26] = 1
  m = d["mask"]
  ent = np.random.default_rng(22).uniform(0.0, 3.0, m.shape).astype(np.float32).astype(np.float64)
  q = np.quantile(ent[m > 0].astype(np.float32), 0.8)
  keep = (ent * m >= q) & (m > 0)
  base, _ = _run(O.ppo_clip(), d)
  term = O.top_entropy_mask(O.ppo_clip(), rho=0.2)
  loss, _ = _run(lambda out, batch: term(out.replace(entropy=jnp.asarray(ent)), batch), d)
  np.testing.assert_allclose(loss[m > 0], np.where(keep, base, 0.0)[m > 0], rtol=1e-12)
  assert keep.sum() == 6


# ---------------------------------------------------------------- ExGRPO: ElliottYan/LUFFY mix_core_alg


def test_exgrpo_policy_matches_authors_mixed_loss():
  """ElliottYan/LUFFY@01f4ae06 mix_core_alg.py:87-197 with run_exgrpo.sh (on_policy_reshape no_reshape,
  loss_remove_clip True, off_policy_reshape p_div_p_0.1): on tokens −A·r; prefix (replayed) tokens −A·r/(r + 0.1);
  r = exp(log π − old); per token pg_losses = off·prefix + on·(1 − prefix)."""
  d = _data(23, noise=0.6)
  a, m = d["adv"], d["mask"]
  replay = np.array([True, False, True, False, False, True])
  prefix = np.broadcast_to(replay[:, None], m.shape).astype(float)
  r = np.exp(d["new"] - d["old"])
  want = (-a * r / (r + 0.1)) * prefix + (-a * r) * (1 - prefix)
  loss, _ = _run(O.exgrpo_policy(), d, extras={"replay_mask": replay})
  np.testing.assert_allclose(loss[m > 0], want[m > 0], rtol=1e-12)


# ---------------------------------------------------------------- GFT: ZJU-OmniAI/GFT compute_gft_loss


def test_gft_matches_authors_compute_gft_loss():
  """ZJU-OmniAI/GFT@763384de core_algos.py:702-706 (tao 0.1 from the recipe): loss = −log π · sg(where(p > tao, 1, p))
  · A with p = exp(log π) (temperature 1); gradient −sg(c)·A."""
  d = _data(24)
  d["new"] = np.log(np.random.default_rng(24).uniform(0.01, 1.0, d["new"].shape))
  a, m, lp = d["adv"], d["mask"], d["new"]
  p = np.exp(lp)
  c = np.where(p > 0.1, 1.0, p)
  loss, grad = _run(O.gft(use_advantages=True), d)
  np.testing.assert_allclose(loss[m > 0], (-lp * c * a)[m > 0], rtol=1e-12)
  np.testing.assert_allclose(grad[m > 0], (-c * a)[m > 0], rtol=1e-12)
  assert (p[m > 0] <= 0.1).any() and (p[m > 0] > 0.1).any()


# ---------------------------------------------------------------- A-LoL: abaheti95/LoL-RL


@pytest.mark.parametrize("variant", ["a_lol", "a_lol_seq"])
def test_alol_matches_authors_code_in_float64(variant):
  """abaheti95/LoL-RL@9f8d8166 lolrl_qlora_llama_hh.py:866-904 (a_lol) and :927-951 (a_lol_seq), ppo_clip 0.9:
  ratio exp(Σ m log π − Σ m log π_ref) (per token for a_lol_seq) clamped to [0.1, 1.9], detached; loss per row
  (Σ_t −log π · m) · ratio (a_lol_seq: Σ_t −log π · ratio_t · m) · clamp(A, 0). Compared per row."""
  d = _data(25, noise=0.8)
  d["adv"][3] = -np.abs(d["adv"][3])
  a, m, lp, ref = d["adv"][:, 0], d["mask"], d["new"], d["ref"]
  aplus = np.clip(a, 0.0, None)
  if variant == "a_lol":
    w = np.clip(np.exp(((lp - ref) * m).sum(1)), 0.1, 1.9)
    want_row = (-lp * m).sum(1) * w * aplus
    want_grad = -w[:, None] * aplus[:, None] * m
    term = O.alol(ratio="sequence")
  else:
    w = np.clip(np.exp(lp - ref) * m, 0.1, 1.9) * m
    want_row = (-lp * w * m).sum(1) * aplus
    want_grad = -w * aplus[:, None]
    term = O.alol(ratio="token")
  loss, grad = _run(term, d)
  np.testing.assert_allclose((loss * m).sum(1), want_row, rtol=1e-12, atol=1e-15)
  np.testing.assert_allclose((grad * m), want_grad * m, rtol=1e-12, atol=1e-15)
  assert loss.dtype == np.float64 and (aplus == 0).any()


# ---------------------------------------------------------------- Δlog p reweight: Hesse73/RLVR-Directions


def test_delta_logp_reweight_matches_authors_advantage_reweight():
  """Hesse73/RLVR-Directions@af8f20a6 logp_ray_trainer.py:495-505, 559-560 (reshape_reversed, c 0.2): A ← A·(1 + c −
  c·exp(old_log_prob)); then verl's dual-clip PPO of run_7B.sh (clip 0.2/0.28, clip_ratio_c 10) on that A."""
  d = _data(26, noise=0.5)
  m, old = d["mask"], d["old"]
  a = d["adv"] * (1 + 0.2 - 0.2 * np.exp(old))
  r = np.exp(np.clip(d["new"] - old, -20, 20))
  c1 = np.maximum(-a * r, -a * np.clip(r, 0.8, 1.28))
  want = np.where(a < 0, np.minimum(-a * 10.0, c1), c1)
  loss, _ = _run(O.delta_logp_reweight(O.ppo_clip(0.2, 0.28, dual_clip=10.0)), d)
  np.testing.assert_allclose(loss[m > 0], want[m > 0], rtol=1e-12)


# ---------------------------------------------------------------- SFT NLL: TRL chunked_nll


def test_sft_nll_matches_trl_chunked_nll():
  """trl@v1.9.0 sft_trainer.py:110 and :226-233: Σ_valid nll_loss(log_softmax, reduction='sum') / n_valid
  (num_items_in_batch None); per token −log π. With token_mean: the same scalar."""
  d = _data(27)
  m, lp = d["mask"], d["new"]
  loss, grad = _run(O.sft_nll(), d)
  np.testing.assert_allclose(loss[m > 0], -lp[m > 0], rtol=1e-15)
  np.testing.assert_allclose(grad[m > 0], -1.0, rtol=1e-15)
  with jax.enable_x64(True):
    b, t = m.shape
    batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(m), advantages=jnp.zeros((b, t)),
                       group_id=jnp.arange(b, dtype=jnp.int32))
    total = float(O.chain(O.sft_nll(), aggregate=O.token_mean)(PolicyOutputs(logp=jnp.asarray(lp)), batch)[0])
  np.testing.assert_allclose(total, (-lp * m).sum() / m.sum(), rtol=1e-14)


# ---------------------------------------------------------------- DPO: TRL sigmoid


def test_dpo_matches_trl_sigmoid_loss():
  """trl@v1.9.0 dpo_trainer.py:1396-1435, 1578: h = Σ_completion log π − Σ log π_ref per sequence; Δ = h_chosen −
  h_rejected; loss = mean over pairs of −logsigmoid(β Δ) (β 0.1). With seq_mean_token_mean: the same scalar."""
  d = _data(28, noise=1.5)
  m, lp, ref = d["mask"], d["new"], d["ref"]
  pair = np.array([0, 0, 1, 1, 2, 2])
  chosen = np.array([True, False, False, True, True, False])
  h = ((lp - ref) * m).sum(1)
  deltas = [h[(pair == k) & chosen][0] - h[(pair == k) & ~chosen][0] for k in range(3)]
  want = np.mean([np.log1p(np.exp(-0.1 * x)) for x in deltas])
  with jax.enable_x64(True):
    b, t = m.shape
    batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(m), advantages=jnp.zeros((b, t)),
                       group_id=jnp.arange(b, dtype=jnp.int32), logp_ref=jnp.asarray(ref),
                       extras={"dpo_pair_id": jnp.asarray(pair), "dpo_chosen": jnp.asarray(chosen)})
    total = float(O.chain(O.dpo(0.1), aggregate=O.seq_mean_token_mean)(PolicyOutputs(logp=jnp.asarray(lp)), batch)[0])
  np.testing.assert_allclose(total, want, rtol=1e-12)


# ---------------------------------------------------------------- OPD: THUDM/slime apply_opd_kl_to_advantages


def test_opd_matches_slime_advantage_penalty_on_policy():
  """THUDM/slime@624b824a loss.py:694-698: A ← A − coef·(log π − log π_T), then the PPO loss −A·r (r = 1
  on-policy, no clip active there). Base advantage 0, coef 1: value coef·(log π − log π_T), gradient the same
  (−A' ∂r/∂log π = −A' at r = 1)."""
  d = _data(29)
  d["old"] = d["new"].copy()  # on-policy
  m, lp = d["mask"], d["new"]
  teacher = lp + np.random.default_rng(29).normal(scale=0.7, size=lp.shape)
  a_prime = 0.0 - 1.0 * (lp - teacher)
  loss, grad = _run(O.opd(1.0), d, extras={"logp_teacher": teacher})
  np.testing.assert_allclose(loss[m > 0], (-a_prime)[m > 0], rtol=1e-12)
  np.testing.assert_allclose(grad[m > 0], (-a_prime)[m > 0], rtol=1e-12)
  assert loss.dtype == np.float64


# ---------------------------------------------------------------- entropy-gated contrastive: ReasonMaxxer adv_ce


def test_entropy_gated_contrastive_matches_reasonmaxxer_adv_ce_at_unit_advantages():
  """Arka04bro/ReasonMaxxer@a3bdf96b train_reasonmaxxer.py, decision_objective 'adv_ce' (kl_weight 0): token_ce =
  −log π; decision mask = H_base > τ; weighted_ce = CE·A⁺ + CE·A⁻ with A = ±1 (inside adv_clip 2.5); decision_loss
  = Σ over the gated tokens / their count. Ours per token: −g·c·log π with c = ±1 by reward > 0.5."""
  d = _data(30)
  m, lp = d["mask"], d["new"]
  rng = np.random.default_rng(30)
  h_base = rng.uniform(0.0, 4.0, m.shape)
  a = np.array([1.0, -1.0, 1.0, -1.0, -1.0, 1.0])
  gate = (h_base > 2.5) & (m > 0)
  token_ce = -lp
  want = np.where(gate, token_ce * a[:, None], 0.0)
  loss, _ = _run(O.entropy_gated_contrastive(tau=2.5), d, rewards=(a > 0).astype(float),
                 extras={"entropy_base": h_base})
  np.testing.assert_allclose(loss[m > 0], want[m > 0], rtol=1e-12)
  np.testing.assert_allclose(loss[gate].sum() / gate.sum(), (token_ce * a[:, None])[gate].sum() / gate.sum(),
                             rtol=1e-12)
  assert gate.any() and (~gate & (m > 0)).any()


# ---------------------------------------------------------------- RPG: complex-reasoning/RPG


@pytest.mark.parametrize("kl_type,kw", [
    ("rpg_rf_rkl", dict(kl="reverse", normalized=True)), ("rpg_rf_urkl", dict(kl="reverse", normalized=False)),
    ("rpg_rf_fkl", dict(kl="forward", normalized=True)), ("rpg_rf_ufkl", dict(kl="forward", normalized=False))])
def test_rpg_reinforce_matches_authors_compute_policy_loss_reinforce(kl_type, kw):
  """complex-reasoning/RPG@ec8e30bd core_algos.py:529-571 (non-clip_ppo branch), π_ref = π_old as the code assumes:
  w = exp(log π − old); w_ = clamp(w, 0.8, 1.28); kl_term: fkl β, rkl −β w_(log w_ + 1), ufkl β(1 − w_), urkl
  −β w_ log w_; loss = −sg(A w_ + kl_term)·log π. Tokens where w is clipped differ for rkl/urkl (ours: the
  unclipped log, recorded): compared on the unclipped ones there, everywhere for fkl/ufkl."""
  d = _data(31, noise=0.4)
  d["ref"] = d["old"].copy()
  a, m, lp = d["adv"], d["mask"], d["new"]
  beta = 1e-2
  w = np.exp(lp - d["old"])
  w_ = np.clip(w, 0.8, 1.28)
  kl_term = {"rpg_rf_fkl": beta * np.ones_like(w_), "rpg_rf_rkl": -beta * w_ * (np.log(w_) + 1),
             "rpg_rf_ufkl": beta * (1 - w_), "rpg_rf_urkl": -beta * w_ * np.log(w_)}[kl_type]
  c = a * w_ + kl_term
  loss, grad = _run(O.rpg(beta, estimator="reinforce", clip=(0.2, 0.28), **kw), d)
  cmp = m > 0
  if kl_type in ("rpg_rf_rkl", "rpg_rf_urkl"):
    cmp &= w == w_
  np.testing.assert_allclose(loss[cmp], (-c * lp)[cmp], rtol=1e-12)
  np.testing.assert_allclose(grad[cmp], (-c)[cmp], rtol=1e-12)
  assert (w[m > 0] != w_[m > 0]).any() and cmp.any()


def test_rpg_surrogate_kl_matches_authors_rpg_rkl_kl_loss():
  """complex-reasoning/RPG@ec8e30bd core_algos.py:677-680 (kl_penalty 'rpg_rkl', the use_kl_loss runs): w = exp(log π
  − ref), clamp(w·(log π − ref), ±10), × kl_loss_coef; with π_ref = π_old ours is β·w·(log π − log π_ref)."""
  d = _data(32, noise=0.5)
  d["ref"] = d["old"].copy()
  m, lp, ref = d["mask"], d["new"], d["ref"]
  w = np.exp(lp - ref)
  value = np.clip(w * (lp - ref), -10, 10)
  loss, grad = _run(O.rpg(1e-4, policy_gradient=False), d)
  np.testing.assert_allclose(loss[m > 0], 1e-4 * value[m > 0], rtol=1e-12)
  np.testing.assert_allclose(grad[m > 0], (1e-4 * w * (lp - ref + 1))[m > 0], rtol=1e-12)
