"""Fidelity of the objectives and control rooms (issue #23 item 2): where a default was set from the authors'
code, a float64 NumPy re-implementation of that code checks it here (A-LoL, CPGD's gradient against siiRL,
EntroPIC's sign convention, ...). That every row has a ``Technique.fidelity`` is tested in test_catalog.py.
"""
import inspect
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rljax.control as C
import rljax.objectives as O
from rljax.types import PolicyOutputs, TrainBatch

ROWS = O.TECHNIQUES + C.TECHNIQUES
REGISTRY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "registry.json")


def test_the_rooms_hold_exactly_the_registry_rows_of_their_kinds():
  """The objective and control rooms hold every recorded row of their kinds (tests/data/registry.json, rewritten
  by ``python -m rljax.recipes --regenerate``), and no other room holds one."""
  with open(REGISTRY, encoding="utf-8") as f:
    recorded = json.load(f)
  kinds = {r.kind for r in ROWS}
  assert kinds >= {"policy_loss", "correction", "kl", "aggregation", "controller", "value"}
  assert sorted(r.name for r in ROWS) == sorted(r["name"] for r in recorded if r["kind"] in kinds)


def test_authors_code_rows():
  assert {r.name for r in ROWS if r.fidelity.basis == "authors_code"} == {
      "erc", "rpg", "alol", "entropic", "bapo", "gmpo", "decoupled_ppo", "clip_cov", "kl_cov", "segment_ratio",
      "gpg", "delta_logp_reweight", "temperature_control", "pspo", "gft", "exgrpo_policy",
      "entropy_gated_contrastive"}  # the authors' repository found by per-row review l (#51)


@pytest.mark.parametrize("fn,defaults", [
    (O.alol, {"eps": 0.9, "ratio": "sequence"}),          # LoL-RL README / argparse: --ppo_clip 0.9, a_lol
    (O.erc, {"low": 0.95, "high": 1.05}),                # Kwai-Klear/ERC recipe/dapo/*_erc_1_05.sh
    (C.entropic, {"kp": 1.0, "ki": 0.01}),              # yk7333/EntroPIC run_entropic.sh
    (O.tis, {"threshold": 2.0}),                          # verl rollout_is_threshold default
    (O.kl_cov, {"kl_cov_ratio": 2e-4, "ppo_kl_coef": 1.0}),  # PRIME-RL recipe/dapo/32b_kl_cov.sh
    (O.gmpo, {"eps_low": 0.4, "eps_high": 0.4}),          # callsys/GMPO scripts/qwen2.5-math-7b-gmpo.sh
    (O.segment_ratio, {"eps_low": 0.06, "eps_high": 0.08}),  # yaochenzhu/Rank-GRPO train_rank_grpo.py
    (O.delta_logp_reweight, {"form": "linear", "c": 0.2}),  # Hesse73/RLVR-Directions scripts/run_7B.sh
    (O.gft, {"tau": 0.1, "rectification": "step"}),       # ZJU-OmniAI/GFT run_qwen2.5-math-1.5B.sh
    (O.exgrpo_policy, {"beta": 0.1, "clip_fresh": False}),  # LUFFY ExGRPO run_exgrpo.sh: p_div_p_0.1, no clip
], ids=["alol", "erc", "entropic", "tis", "kl_cov", "gmpo", "segment_ratio", "delta_logp", "gft", "exgrpo_policy"])
def test_defaults_are_the_references(fn, defaults):
  params = inspect.signature(fn).parameters
  assert {k: params[k].default for k in defaults} == defaults


# ---------------------------------------------------------------- A-LoL vs lolrl_qlora_llama_hh.py


def _alol_authors(logp, ref, mask, adv, ppo_clip=0.9, per_token=False):
  """float64 NumPy transcription of the a_lol / a_lol_seq branches (negative log-probs there).

  Returns (loss, d loss / d logp)."""
  nll = -logp
  if per_token:  # a_lol_seq
    w = np.clip(np.exp(logp - ref), 1 - ppo_clip, 1 + ppo_clip) * mask
    per_resp = (nll * w * mask).sum(1)
    dper = -w * mask
  else:  # a_lol
    w = np.clip(np.exp(((logp - ref) * mask).sum(1)), 1 - ppo_clip, 1 + ppo_clip)
    per_resp = (nll * mask).sum(1) * w
    dper = -mask * w[:, None]
  a = np.maximum(adv, 0.0)
  b = logp.shape[0]
  return (per_resp * a).mean(), dper * a[:, None] / b


@pytest.mark.parametrize("ratio", ["sequence", "token"])
def test_alol_default_matches_authors_code(ratio):
  rng = np.random.default_rng(3)
  b, t = 5, 6
  logp = -rng.uniform(0.05, 2.0, (b, t))
  ref = logp + rng.normal(scale=0.4, size=(b, t))
  ref[0] = logp[0] + 0.8   # ratio far below 1 - eps_old (0.8): clipped by 0.2, not by 0.9
  mask = np.ones((b, t))
  mask[1, 4:] = 0
  mask[3, 2:] = 0
  adv = np.array([1.3, -0.4, 0.7, 2.0, -1.1])
  want, want_grad = _alol_authors(logp, ref, mask, adv, per_token=(ratio == "token"))
  batch = TrainBatch.create(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask > 0),
                            advantages=jnp.asarray(np.repeat(adv[:, None], t, 1), jnp.float32),
                            group_id=jnp.arange(b), logp_ref=jnp.asarray(ref, jnp.float32))
  obj = O.chain(O.alol(ratio=ratio), aggregate=O.seq_mean_token_sum)
  f = lambda lp: obj(PolicyOutputs.create(logp=lp), batch)[0]
  lp = jnp.asarray(logp, jnp.float32)
  np.testing.assert_allclose(f(lp), want, rtol=1e-5)
  np.testing.assert_allclose(jax.grad(f)(lp), want_grad, rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------- CPGD vs siiRL


def test_cpgd_gradient_matches_siirl():
  """siiRL compute_policy_loss_cpgd + dp_actor's drift: same gradient as ours while r − 1 < 2."""
  rng = np.random.default_rng(5)
  b, t, eps_l, eps_h, coef = 4, 7, 0.2, 0.28, 0.05
  old = -rng.uniform(0.1, 2.0, (b, t))
  logp = old + rng.normal(scale=0.3, size=(b, t))
  mask = (rng.uniform(size=(b, t)) < 0.85).astype(np.float64)
  adv = np.repeat(rng.normal(size=(b, 1)), t, 1)
  adv[0], adv[1] = np.abs(adv[0]), -np.abs(adv[1])
  lr = logp - old
  r = np.exp(lr)
  assert np.all(r - 1 < 2)
  # -A * where(A > 0, min(logp, old + log(1+eps_h)), max(logp, old + log(1-eps_l))): d/dlogp = -A unless clipped.
  clipped = np.where(adv > 0, lr > np.log1p(eps_h), lr < np.log1p(-eps_l))
  pg = np.where(clipped, 0.0, -adv)
  drift = np.minimum(r - 1.0, 2.0)  # sg(clamp(r - 1, max=2)) * logp
  want = (pg + coef * drift) * mask / mask.sum()  # token-mean
  batch = TrainBatch.create(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask > 0),
                            advantages=jnp.asarray(adv, jnp.float32), group_id=jnp.arange(b),
                            logp_old=jnp.asarray(old, jnp.float32))
  obj = O.chain(O.cpgd(eps_l, eps_h, coef), aggregate=O.token_mean)
  g = jax.grad(lambda lp: obj(PolicyOutputs.create(logp=lp), batch)[0])(jnp.asarray(logp, jnp.float32))
  np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-7)


# ---------------------------------------------------------------- EntroPIC sign convention


@pytest.mark.parametrize("entropy", [0.05, 0.1, 0.4, 3.0])
def test_entropic_weights_follow_authors_alpha(entropy):
  """yk7333/EntroPIC: alpha = clip(K_p (H − H*) + K_i Σ, −1, 1) adds −alpha·r·|A| on high-probability tokens,
  i.e. weights 1 + alpha on positive and 1 − alpha on negative advantages; ours give the same 1 ± alpha."""
  target, kp = 0.1, 1.0
  ctl = C.entropic(target, kp=kp, ki=0.0)
  state = ctl.update(ctl.init(), entropy=entropy)
  alpha = np.clip(kp * (entropy - target), -1.0, 1.0)
  np.testing.assert_allclose([state.pos_weight, state.neg_weight], [1 + alpha, 1 - alpha], rtol=1e-6)


# ---------------------------------------------------------------- shared random batch


def _batch(seed, b=4, t=6, *, const_adv=True, noise=0.3):
  rng = np.random.default_rng(seed)
  old = -rng.uniform(0.1, 2.0, (b, t))
  logp = old + rng.normal(scale=noise, size=(b, t))
  behav = old + rng.normal(scale=noise, size=(b, t))
  mask = np.ones((b, t))
  mask[1, 4:] = 0
  mask[2, :1] = 0
  adv = np.repeat(rng.normal(size=(b, 1)), t, 1) if const_adv else rng.normal(size=(b, t))
  adv[0], adv[1] = np.abs(adv[0]), -np.abs(adv[1])
  batch = TrainBatch.create(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask > 0),
                            advantages=jnp.asarray(adv, jnp.float32), group_id=jnp.arange(b),
                            logp_old=jnp.asarray(old, jnp.float32), logp_behavior=jnp.asarray(behav, jnp.float32))
  return dict(logp=logp, old=old, behav=behav, mask=mask, adv=adv), batch


def _value_and_grad(objective, batch, logp):
  f = lambda lp: objective(PolicyOutputs.create(logp=lp), batch)[0]
  lp = jnp.asarray(logp, jnp.float32)
  return float(f(lp)), np.asarray(jax.grad(f)(lp))


def _fd_grad(fn, x, h=1e-6):
  g = np.zeros_like(x)
  for idx in np.ndindex(x.shape):
    e = np.zeros_like(x)
    e[idx] = h
    g[idx] = (fn(x + e) - fn(x - e)) / (2 * h)
  return g


# ---------------------------------------------------------------- KL-Cov vs PRIME-RL compute_policy_loss_kl_cov


def _kl_cov_authors(logp, old, adv, mask, cov_logp, k_percent=0.02, ppo_kl_coef=1.0):
  """compute_policy_loss_kl_cov (token-mean); ``cov_logp`` is the detached log-prob the selection uses."""
  lr = logp - old
  loss = -adv * np.exp(lr)
  valid = mask > 0
  cov = (adv[valid] - adv[valid].mean()) * (cov_logp[valid] - cov_logp[valid].mean())
  n = max(1, int(len(cov) * k_percent / 100))
  flat = np.flatnonzero(valid.reshape(-1))[np.argsort(-cov, kind="stable")[:n]]
  loss.reshape(-1)[flat] += ppo_kl_coef * np.abs(lr.reshape(-1)[flat])
  return (loss * mask).sum() / mask.sum()


def test_kl_cov_default_matches_authors_code():
  d, batch = _batch(11, b=6, t=9, const_adv=False)
  d["adv"][3, 2] = 4.0  # one clear top-covariance token
  batch = batch.replace(advantages=jnp.asarray(d["adv"], jnp.float32))
  got, got_grad = _value_and_grad(O.chain(O.kl_cov(), aggregate=O.token_mean), batch, d["logp"])
  ref = lambda lp: _kl_cov_authors(lp, d["old"], d["adv"], d["mask"], cov_logp=d["logp"])
  np.testing.assert_allclose(got, ref(d["logp"]), rtol=1e-5)
  np.testing.assert_allclose(got_grad, _fd_grad(ref, d["logp"]), rtol=1e-4, atol=1e-6)


# ---------------------------------------------------------------- decoupled PPO vs AReaL ppo_actor_loss_fn


def _areal_decoupled(logp, prox, behav, adv, mask, eps=0.2, eps_high=0.28, c_clip=3.0, upper=5.0):
  """ppo_actor_loss_fn with rejection_sampling {level: token, action: mask, metric: ratio, upper}."""
  count = mask.sum()
  w = np.exp(prox - behav)
  keep = mask * (w <= upper)
  ratio = np.where(keep > 0, np.exp(logp - prox), 0.0)
  l1, l2 = -adv * ratio, -adv * np.clip(ratio, 1 - eps, 1 + eps_high)
  pg = np.maximum(l1, l2)
  pg = np.minimum(pg, np.sign(adv) * c_clip * adv)
  pg = pg * w
  return np.where(keep > 0, pg, 0.0).sum() / count


def test_decoupled_ppo_matches_areal():
  d, batch = _batch(13, b=5, t=7, noise=0.6)
  d["behav"][2, 3] = d["old"][2, 3] - 2.0   # pi_prox / pi_behav = e^2 > 5: masked
  d["logp"][1, 2] = d["old"][1, 2] + 1.5    # A < 0 and r = e^1.5 > 3: the dual clip binds
  batch = batch.replace(logp_behavior=jnp.asarray(d["behav"], jnp.float32))
  obj = O.chain(O.decoupled_ppo(0.2, 0.28, dual_clip=3.0, behavior_cap=5.0), aggregate=O.token_mean)
  got, got_grad = _value_and_grad(obj, batch, d["logp"])
  ref = lambda lp: _areal_decoupled(lp, d["old"], d["behav"], d["adv"], d["mask"])
  np.testing.assert_allclose(got, ref(d["logp"]), rtol=1e-5)
  np.testing.assert_allclose(got_grad, _fd_grad(ref, d["logp"]), rtol=1e-4, atol=1e-6)
  assert got_grad[2, 3] == 0 and got_grad[1, 2] == 0


# ---------------------------------------------------------------- GMPO vs callsys/GMPO train_zero_math_gmpo.py


def _gmpo_authors(logp, old, adv, mask, cliprange=0.4):
  """One sequence per micro-batch (scalar advantage), losses averaged over the sequences."""
  losses = []
  for i in range(logp.shape[0]):
    m = mask[i] > 0
    if not m.any():
      continue
    a = adv[i, 0]
    sgn = -1 if a >= 0 else 1
    diff = sgn * (logp[i] - old[i])
    diff_max = sgn * np.maximum(diff, np.clip(diff, -cliprange, cliprange))
    losses.append(-a * np.exp(diff_max[m].sum() / m.sum()))
  return np.mean(losses)


def test_gmpo_default_matches_authors_code():
  d, batch = _batch(17, b=5, t=8, noise=0.5)
  obj = O.chain(O.gmpo(), aggregate=O.seq_mean_token_mean)
  got, got_grad = _value_and_grad(obj, batch, d["logp"])
  ref = lambda lp: _gmpo_authors(lp, d["old"], d["adv"], d["mask"])
  np.testing.assert_allclose(got, ref(d["logp"]), rtol=1e-5)
  np.testing.assert_allclose(got_grad, _fd_grad(ref, d["logp"]), rtol=1e-4, atol=1e-6)


# ---------------------------------------------------------------- Rank-GRPO vs yaochenzhu/Rank-GRPO (item level)


def _rank_grpo_authors(logp, old, adv, mask, seg, eps_low=0.06, eps_high=0.08):
  """rank_grpo_trainer._compute_loss, importance_sampling_level='item', loss_type='bnpo'."""
  lr = logp - old
  n_bins = seg.max() + 1
  sums = np.zeros((logp.shape[0], n_bins))
  counts = np.zeros((logp.shape[0], n_bins))
  for i, j in np.ndindex(logp.shape):
    sums[i, seg[i, j]] += lr[i, j] * mask[i, j]
    counts[i, seg[i, j]] += mask[i, j]
  means = sums / np.maximum(counts, 1.0)
  coef_1 = np.exp(np.take_along_axis(means, seg, 1))
  coef_2 = np.clip(coef_1, 1 - eps_low, 1 + eps_high)
  per_token = -np.minimum(coef_1 * adv, coef_2 * adv)
  return (per_token * mask).sum() / mask.sum()


def test_segment_ratio_default_matches_authors_code():
  d, batch = _batch(19, b=4, t=9, const_adv=False, noise=0.2)
  seg = np.array([[0, 0, 0, 1, 1, 2, 2, 2, 3]] * 4)
  seg[2] = [0, 0, 1, 1, 1, 1, 2, 3, 3]
  adv = np.take_along_axis(np.random.default_rng(1).normal(size=(4, 4)), seg, 1)  # one advantage per item
  batch = batch.replace(advantages=jnp.asarray(adv, jnp.float32), extras={**batch.extras, "reward_segments": jnp.asarray(seg, jnp.int32)})
  got, got_grad = _value_and_grad(O.chain(O.segment_ratio(), aggregate=O.token_mean), batch, d["logp"])
  ref = lambda lp: _rank_grpo_authors(lp, d["old"], adv, d["mask"], seg)
  np.testing.assert_allclose(got, ref(d["logp"]), rtol=1e-5)
  np.testing.assert_allclose(got_grad, _fd_grad(ref, d["logp"]), rtol=1e-4, atol=1e-6)


# ---------------------------------------------------------------- Δlog p reweighting vs Hesse73/RLVR-Directions


def test_delta_logp_reweight_default_matches_authors_code():
  """logp_ray_trainer: advantages *= 1 + c − c·p_old ('reshape_reversed', c = 0.2), then the PPO loss."""
  d, batch = _batch(23, b=5, t=7, const_adv=False, noise=0.3)
  c, eps_l, eps_h = 0.2, 0.2, 0.28

  def ref(lp):
    adv = d["adv"] * (1 + c - c * np.exp(d["old"]))
    r = np.exp(lp - d["old"])
    loss = np.maximum(-adv * r, -adv * np.clip(r, 1 - eps_l, 1 + eps_h))
    return (loss * d["mask"]).sum() / d["mask"].sum()

  obj = O.chain(O.delta_logp_reweight(O.ppo_clip(eps_l, eps_h)), aggregate=O.token_mean)
  got, got_grad = _value_and_grad(obj, batch, d["logp"])
  np.testing.assert_allclose(got, ref(d["logp"]), rtol=1e-5)
  np.testing.assert_allclose(got_grad, _fd_grad(ref, d["logp"]), rtol=1e-4, atol=1e-6)
  # The stage reads the old policy's log-probs (not entropies) for the default source.
  from rljax.objectives._stages import delta_logp_needs
  assert delta_logp_needs({}) == {"logp_old"} and delta_logp_needs({"source": "old"}) == {"logp_old"}
  assert delta_logp_needs({"form": "power"}) == set()


# ---------------------------------------------------------------- E3 temperature vs LiaoMengqi/E3-RL4LLMs


def _e3_authors(entropies, t0, vocab, target):
  """TemperatureScheduler.step with a given target (init_steps=1: the first call only records)."""
  factor = np.log(vocab) + np.log(np.log(vocab))
  t, out = t0, []
  for step, h in enumerate(entropies, start=1):
    if step > 1:
      t = t * (1 + t * np.log(target / h) / factor)
    out.append(t)
  return out


def test_temperature_control_e3_rule_matches_authors_code():
  hs = [0.9, 0.5, 0.42, 0.61, 0.3, 0.35]
  want = _e3_authors(hs, 1.0, 151_936, 0.45)
  ctl = C.temperature_control(0.45, rule="e3", vocab_size=151_936, t_min=0.01, t_max=10.0)
  state, got = ctl.init(), [1.0]
  for h in hs[1:]:  # the code skips its first step
    state = ctl.update(state, entropy=h)
    got.append(float(state.temperature))
  np.testing.assert_allclose(got, want, rtol=1e-5)
  with pytest.raises(ValueError, match="vocab_size"):
    C.temperature_control(0.45, rule="e3")
  with pytest.raises(ValueError, match="rule"):
    C.temperature_control(0.45, rule="pid")


# ---------------------------------------------------------------- PSPO vs MCDwyer/GR-PSPO


def test_pspo_default_matches_authors_patch():
  """grpotrainer.patch: per_token_loss = -((1 - alpha) * coef_1 + alpha) * A, alpha = 0.1; loss_type 'grpo'."""
  d, batch = _batch(29, b=5, t=7, noise=0.5)

  def ref(lp):
    coef_2 = 0.9 * np.exp(lp - d["old"]) + 0.1
    per_token = -coef_2 * d["adv"]
    m = d["mask"]
    return ((per_token * m).sum(1) / np.maximum(m.sum(1), 1.0)).mean()

  got, got_grad = _value_and_grad(O.chain(O.pspo(), aggregate=O.seq_mean_token_mean), batch, d["logp"])
  np.testing.assert_allclose(got, ref(d["logp"]), rtol=1e-5)
  np.testing.assert_allclose(got_grad, _fd_grad(ref, d["logp"]), rtol=1e-4, atol=1e-6)


# ---------------------------------------------------------------- GFT vs ZJU-OmniAI/GFT compute_gft_loss


def test_gft_default_matches_authors_code():
  """-log_prob * where(prob > tao, 1, prob).detach() * advantages, token-mean; tao = 0.1."""
  d, batch = _batch(31, b=5, t=8, const_adv=False, noise=0.3)
  d["logp"][0, :4] = np.log([0.05, 0.09, 0.11, 0.5])  # both sides of tau
  p_fixed = np.exp(d["logp"])

  def ref(lp):
    coef = np.where(p_fixed > 0.1, 1.0, p_fixed)  # detached
    return (-lp * coef * d["adv"] * d["mask"]).sum() / d["mask"].sum()

  obj = O.chain(O.gft(use_advantages=True), aggregate=O.token_mean)
  got, got_grad = _value_and_grad(obj, batch, d["logp"])
  np.testing.assert_allclose(got, ref(d["logp"]), rtol=1e-5)
  np.testing.assert_allclose(got_grad, _fd_grad(ref, d["logp"]), rtol=1e-4, atol=1e-6)
