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
                       logp_ref=jnp.asarray(d["ref"]), **extra)
    f = lambda lp: term(PolicyOutputs(logp=lp, entropy=None), batch)[0]  # noqa: E731
    loss = np.asarray(f(jnp.asarray(d["new"])))
    grad = np.asarray(jax.grad(lambda lp: jnp.sum(f(lp)))(jnp.asarray(d["new"])))
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
