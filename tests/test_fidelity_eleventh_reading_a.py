"""Issue #51 item 4, eleventh draw (seed 20261216), part a: an independent re-audit of five in-full rows.

Rows drawn: cpgd, hadw, gft, clipped_linear_reward, sa_mrpo.

Held (3): cpgd, clipped_linear_reward, sa_mrpo; their "= theirs" claims are checked below against float64 NumPy
transcriptions of the cited lines (siiRL@af00a771 for cpgd, mengdi-li/internally-rewarded-rl@f630fdbf for
clipped_linear_reward, arXiv 2608.16072 Sec. 3 / 4.1 Eq. 1 / Algorithm 1 for sa_mrpo).

Not held (2), each error fixed in the record and checked here (no implementation changed, no implementation bug
found):

- ``hadw``: the record gave "reward_window_k = 10 (gspo_hadw.sh)" as theirs. yangfengkai/HA-DW@8b087945
  verl/trainer/ppo/ray_trainer.py:330 reads trainer.get('reward_window_k', trainer.get('acc_window_k', 0)) and
  verl/trainer/config/ppo_trainer.yaml has no such key: the trainer's default is 0, batch_reward_history is None and
  core_algos.py:765-767 then anchors on torch.mean(scores), the current batch's mean reward (= hadw(window=1)).
  gspo_hadw.sh:45 passes trainer.reward_window_k=${REWARD_WINDOW_K} without '+', which Hydra refuses for a key not in
  the struct config (composing their config with hydra-core 1.3.8: "Could not override 'trainer.reward_window_k'.
  To append to your config use +trainer.reward_window_k=10"): the script does not start as released; its 10 needs
  +trainer.reward_window_k=10. Neither the default nor the fallback was in the record.
- ``gft``: the record's deviation said their log π is divided by the temperature where their p is not ("equal at
  temperature 1"). ZJU-OmniAI/GFT@763384de verl/trainer/ppo/ray_trainer.py:688 hard-codes use_old_log_probs =
  False, so fit() sets batch.meta_info['temperature'] = 1.0 (:1660) and dp_actor.update_policy divides the logits by
  1.0 (dp_actor.py:422, 534): their log π and p are both of softmax(z) at any rollout.temperature, as ours (the RL
  loop's untempered log π): there is no such deviation, and the record had no temperature row. Also read: their
  fit() reads self.config.trainer.kl_eval (:1612), a key their ppo_trainer.yaml lacks, so the script as released
  stops at step 1 with OmegaConf's ConfigAttributeError unless +trainer.kl_eval=False is added (no loss depends on
  it).
"""
import math

import jax
import jax.numpy as jnp
import numpy as np

from rljax.catalog import describe
from _fidelity import ROWS, defaults as _defaults, fid as _fid, log_softmax as _log_softmax, pick, train_batch


# ----------------------------------------------------------------------------------------------- cpgd (held)


def _siirl_cpgd_grad(old, new, adv, mask, clip_low=0.2, clip_high=0.2, drift_coef=0.001):
  """d(loss)/d(log π) of one siiRL micro-batch (sii-research/siiRL@af00a771):
  core_algos.py:600-618 compute_policy_loss_cpgd, −A·clamp(log π, max=log(1+ε_h)+log π_old) for A > 0, min=
  log(1−ε_l)+log π_old otherwise (torch.clamp passes the gradient inside its bounds); dp_actor.py:488-494 the drift
  clamp(exp(sg(log π) − log π_old) − 1, max=2)·log π × policy_drift_coeff; both agg_loss token-mean
  (masked_sum / (Σm + 1e-8), torch_functional.py:154-168)."""
  inside = np.where(adv > 0, new <= math.log(1 + clip_high) + old, new >= math.log(1 - clip_low) + old)
  pg = -adv * inside
  drift = np.minimum(np.exp(new - old) - 1.0, 2.0)
  denom = mask.sum() + 1e-8
  return (pg + drift_coef * drift) * mask / denom


def _siirl_cpgd_pg_value(old, new, adv, clip_low=0.2, clip_high=0.2):
  clipped = np.where(adv > 0, np.minimum(new, math.log(1 + clip_high) + old),
                     np.maximum(new, math.log(1 - clip_low) + old))
  return -clipped * adv


def _ours_cpgd_grad(old, new, adv, mask, **kw):
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  from rljax.types import PolicyOutputs  # pylint: disable=import-outside-toplevel
  batch = train_batch(mask, adv, old)
  term = O.cpgd(**kw)
  with jax.enable_x64(True):
    def total(logp):
      loss, _ = term(PolicyOutputs(logp=logp), batch)
      return jnp.sum(loss) / jnp.sum(batch.loss_mask.astype(logp.dtype))  # chain's token_mean, one micro-batch
    g = jax.grad(total)(jnp.asarray(new))
    per_token, _ = term(PolicyOutputs(logp=jnp.asarray(new)), batch)
  return np.asarray(g), np.asarray(per_token)


def test_cpgd_gradient_equals_siirl_script_setting_and_differs_only_past_the_drift_cap():
  rng = np.random.default_rng(20261216)
  b, t = 8, 11
  mask = rng.random((b, t)) < 0.8
  mask[:, 0] = True
  mask[0, :3] = True
  old = -rng.random((b, t)) * 2 - 0.05
  new = old + rng.normal(scale=0.3, size=(b, t))  # r within exp(±~1): some tokens clipped, all r < 3
  new[0, :3] = old[0, :3] + np.array([1.3, 1.5, 2.0])  # r = e^1.3 ≈ 3.7, 4.5, 7.4: past siiRL's cap r − 1 ≤ 2
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  adv[0] = -abs(adv[0])  # A < 0 on the capped row: its PG term is unclipped there, only the drift differs
  g_ours, per_token = _ours_cpgd_grad(old, new, adv, mask, eps_low=0.2, drift_coef=0.001)
  g_theirs = _siirl_cpgd_grad(old, new, adv, mask, drift_coef=0.001)
  capped = np.exp(new - old) - 1.0 > 2.0
  assert (capped & mask).sum() == 3
  clipped = mask & ~np.where(adv > 0, new - old <= math.log(1.2), new - old >= math.log(0.8))
  assert clipped.any()  # the clip is exercised
  # equal (up to siiRL's + 1e-8 in the token count) wherever r − 1 ≤ 2
  np.testing.assert_allclose(g_ours[mask & ~capped], g_theirs[mask & ~capped], rtol=1e-9, atol=1e-15)
  # past the cap the recorded deviation: ours (r − 1), theirs 2
  n = mask.sum()
  np.testing.assert_allclose((g_ours - g_theirs)[capped] * n, 0.001 * (np.exp(new - old) - 3.0)[capped], rtol=1e-6)
  # the PG value: ours = theirs + A·log π_old (the recorded "different logged value")
  with jax.enable_x64(True):
    pg_only = _ours_cpgd_grad(old, new, adv, mask, eps_low=0.2, drift_coef=0.0)[1]
  np.testing.assert_allclose(pg_only[mask], (_siirl_cpgd_pg_value(old, new, adv) + adv * old)[mask], rtol=1e-12,
                             atol=1e-12)
  assert per_token.shape == (b, t)
  d = _defaults("cpgd")
  assert d["drift_coef"] == ("0.1", "policy_drift_coeff 0.001 (script; config default 0.0)")
  assert "capped at r = 3" in d["drift estimator"][1]
  assert any("drift_coef=0.001" in x for x in _fid("cpgd").deviations)


# ----------------------------------------------------------------------------------------------- hadw (not held)


def _ha_dw(scores, index, history, eps=1e-6):
  """yangfengkai/HA-DW@8b087945 verl/trainer/ppo/core_algos.py:742-804 compute_ha_dw_outcome_advantage
  (norm_adv_by_std_in_grpo True), float64: history None or empty → hist_mean = mean of the batch's scores
  (:765-767), else the history's mean (compute_reward_history_stats, :154-159)."""
  scores = np.asarray(scores, np.float64)
  hist_mean = scores.mean() if not history else float(np.mean(np.asarray(history, np.float64)))
  out = np.empty_like(scores)
  for g in np.unique(index):
    rows = index == g
    s = scores[rows]
    mean, std = (0.0, 1.0) if s.size == 1 else (s.mean(), s.std(ddof=1))
    diff = mean - hist_mean
    direction = -np.sign(diff) * np.sign(s - mean)
    out[rows] = 1.5 * np.exp(direction * abs(diff)) * (s - mean) / (std + eps)
  return out


def _their_run(batches, index, reward_window_k):
  """ray_trainer.py:330-331 (deque(maxlen=k) only when k > 0), :1453-1462 (the batch's mean reward appended before
  the advantage; the list passed only when non-empty), compute_advantage :211-212."""
  history = [] if reward_window_k > 0 else None
  outs = []
  for r in batches:
    if history is not None:
      history = (history + [float(r.mean())])[-reward_window_k:]
    outs.append(_ha_dw(r, index, history))
  return outs


def test_hadw_their_default_window_is_the_current_batch_and_the_record_says_so():
  import rljax.advantages as A  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(20261216)
  gid = np.repeat(np.arange(6), 8)
  batches = [(rng.random(gid.size) < rng.random(6)[gid]).astype(np.float64) for _ in range(5)]  # gsm8k: 1 / 0
  theirs_default = _their_run(batches, gid, reward_window_k=0)  # the trainer's default (key absent)
  theirs_10 = _their_run(batches, gid, reward_window_k=10)      # +trainer.reward_window_k=10
  for window, theirs in ((1, theirs_default), (10, theirs_10)):
    est = A.hadw(window=window, scale=1.5)
    state = est.init()
    for r, ref in zip(batches, theirs):
      adv = A.grpo(r, gid)[0]
      ours, _, state = est.update(state, adv, r, gid)
      np.testing.assert_allclose(np.asarray(ours, np.float64), ref, rtol=1e-6, atol=1e-6)  # float32 anchor
  # the two settings differ from the second step on: which one is theirs matters
  assert np.allclose(theirs_default[0], theirs_10[0])
  assert max(np.abs(a - b).max() for a, b in zip(theirs_default[1:], theirs_10[1:])) > 1e-2
  d = _defaults("hadw")
  window = d["window"][1]
  assert window.startswith("trainer.reward_window_k, default 0") and "= window=1" in window
  assert "without '+'" in window and "+trainer.reward_window_k=10 gives 10" in window
  f = _fid("hadw")
  assert "core_algos.py:765-767" in f.read and "ray_trainer.py:330" in f.read and "Hydra refuses" in f.read
  assert "(k = 0, the default: no history, the current batch's mean reward)" in f.placement
  assert any("hadw(window=1, scale=1.5) on grpo is theirs at their trainer's default" in x for x in f.deviations)
  assert "default 0" in f.differences
  assert "Eleventh draw" in describe(ROWS["hadw"])


# ----------------------------------------------------------------------------------------------- gft (not held)


def _gft_update(z, y, adv, tau=0.1, use_old_log_probs=False, rollout_temperature=1.0):
  """ZJU-OmniAI/GFT@763384de, one update micro-batch: ray_trainer.py:688 (use_old_log_probs False), :1624-1660
  (without the old-log-prob forward, batch.meta_info['temperature'] = 1.0), dp_actor.py:422 (the update's
  temperature from meta_info), :185-200 (p = softmax of the logits before the division, log π after it),
  core_algos.py:668-712 compute_gft_loss (−log π · sg(where(p > tao, 1, p)) · A), per token."""
  temperature = rollout_temperature if use_old_log_probs else 1.0
  logp = pick(_log_softmax(z / temperature), y)
  p = pick(np.exp(_log_softmax(z)), y)
  return -logp * np.where(p > tau, 1.0, p) * adv


def test_gft_update_is_untempered_on_both_sides_at_any_rollout_temperature():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  from rljax.types import PolicyOutputs  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(20261216)
  b, t, v = 6, 9, 7
  z = rng.normal(size=(b, t, v)) * 2.0
  y = rng.integers(0, v, size=(b, t))
  mask = rng.random((b, t)) < 0.85
  mask[:, 0] = True
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  ours_logp = pick(_log_softmax(z), y)  # the RL loop's log π: objective_loss(temperature=1.0)
  batch = train_batch(mask, adv)
  with jax.enable_x64(True):
    ours, _ = O.gft(0.1, use_advantages=True)(PolicyOutputs(logp=jnp.asarray(ours_logp)), batch)
  ours = np.asarray(ours)
  p = np.exp(ours_logp)
  assert (mask & (p <= 0.1)).any() and (mask & (p > 0.1)).any()  # both branches of the rectification
  for rollout_t in (1.0, 0.6, 1.3):  # rollout.temperature moves only the sampler in their trainer
    np.testing.assert_allclose(ours[mask], _gft_update(z, y, adv, rollout_temperature=rollout_t)[mask], rtol=1e-13,
                               atol=1e-13)
  # the record's old premise (their log π divided by the rollout temperature, p not) would differ at T ≠ 1: the
  # code path that would do it (use_old_log_probs True) is switched off at :688
  premise = _gft_update(z, y, adv, use_old_log_probs=True, rollout_temperature=0.6)
  assert np.abs(premise - ours)[mask].max() > 1e-2
  f = _fid("gft")
  assert not any("temperature-scaled" in x or "equal at temperature 1" in x for x in f.deviations)
  temp = _defaults("gft")["temperature in the log-probs"]
  assert "untempered" in temp[0] and "1.0 for the update forward, hard-coded" in temp[1]
  assert "ray_trainer.py:688, 1660" in temp[1]
  assert "ray_trainer.py:" in f.read and ":1612" in f.read and "+trainer.kl_eval=False" in f.read
  assert "p = exp(log π) on both sides at any rollout temperature" in f.placement
  assert "Eleventh draw" in f.read


# ------------------------------------------------------------------------------ clipped_linear_reward (held)


def test_clipped_linear_reward_equals_linear_clipping_and_disdain():
  from rljax.rewards import clipped_linear_reward  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(20261216)
  p = np.concatenate([rng.random(200), [0.0, 0.1, 1.0, 1 / 128]])  # the classifier's / discriminator's p(y | ·)
  with jax.enable_x64(True):
    # trainer.py:495-496: torch.clamp(c_pis_gt - 0.1, min=0, max=None), 10 MNIST classes (one_hot num_classes=10)
    ours, _ = clipped_linear_reward(p, offset=-0.1)
    # skill-discovery/code/disdain.py:794, 835: jnp.maximum(0, mean p(z | s_T) − 1/code_arity), 128 in its script
    ours128, _ = clipped_linear_reward(p, offset=-1 / 128)
  # float32 also under x64 (the recorded deviation; theirs is float32 too): equal to float32 rounding
  assert np.asarray(ours).dtype == np.float32
  np.testing.assert_allclose(np.asarray(ours), np.maximum(p - 0.1, 0.0), rtol=0, atol=1e-7)
  np.testing.assert_allclose(np.asarray(ours128), np.maximum(0.0, p - 1 / 128), rtol=0, atol=1e-7)
  # in float32 (their torch / jax dtype) exactly, and high = 1 never binds on a probability
  ours32, info = clipped_linear_reward(p.astype(np.float32), offset=-0.1)
  np.testing.assert_array_equal(np.asarray(ours32), np.maximum(p.astype(np.float32) - np.float32(0.1), 0))
  assert float(np.asarray(ours32).max()) <= 0.9 + 1e-7
  assert math.isclose(float(info["clipped_frac"]), float(np.mean(p.astype(np.float32) - np.float32(0.1) < 0)),
                      rel_tol=1e-6)
  d = _defaults("clipped_linear_reward")
  assert "−1/K = −0.1" in d["offset"][1] and "−1/128" in d["offset"][1]
  assert d["low / high"] == ("0 / 1", "0 / none")
  assert "0.99^(stop step)" in _fid("clipped_linear_reward").placement


def test_clipped_linear_reward_stage_is_one_minus_the_distance():
  from rljax.recipes import stage  # pylint: disable=import-outside-toplevel
  from rljax.types import Problem  # pylint: disable=import-outside-toplevel
  reward = stage("clipped_linear_reward")
  problems = [Problem("q", "7"), Problem("q", "7"), Problem("q", "7"), Problem("q", "-2")]
  r = np.asarray(reward.fn(["7", "7.25", "9", "no number"], problems))
  np.testing.assert_allclose(r, [1.0, 0.75, 0.0, 0.0], atol=1e-7)
  assert r.dtype == np.float32


# ----------------------------------------------------------------------------------------------- sa_mrpo (held)


def _sa_mrpo_paper(rewards, gid, r_min, r_max, gamma, w):
  """arXiv 2608.16072 Sec. 3 (population std), Sec. 4.1 (A_k, r̄^(k), s^(k), w̃_k = w_k(1 − s^(k))^γ), Eq. 1 (batch
  standardisation), Algorithm 1 lines 3-10; no ε."""
  rewards = np.asarray(rewards, np.float64)
  a = np.zeros_like(rewards)
  for g in np.unique(gid):
    rows = gid == g
    x = rewards[rows]
    a[rows] = (x - x.mean(0)) / x.std(0)
  s = (rewards.mean(0) - r_min) / (r_max - r_min)
  agg = a @ (w * (1 - s) ** gamma)
  return (agg - agg.mean()) / agg.std()


def test_sa_mrpo_equals_the_papers_equation_one():
  import rljax.advantages as A  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(20261216)
  g, n = 6, 8  # Sec. 5.1: G = 8
  gid = np.repeat(np.arange(g), n)
  while True:  # correctness 0/1 and the graded length reward of Sec. 5.3, each non-constant in every group
    correct = (rng.random(g * n) < rng.random(g)[gid]).astype(np.float64)
    length = np.clip((2048 - rng.integers(600, 2300, g * n)) / 1024.0, 0.0, 1.0)
    r = np.stack([correct, length], 1)
    if all(r[gid == i].std(0).min() > 0 for i in range(g)):
      break
  ref = _sa_mrpo_paper(r, gid, 0.0, 1.0, 0.25, np.ones(2))
  with jax.enable_x64(True):
    exact, info = A.sa_mrpo(jnp.asarray(r), jnp.asarray(gid), eps=0.0)
    default, _ = A.sa_mrpo(jnp.asarray(r), jnp.asarray(gid))  # eps = 1e-6 on each std: the recorded deviation
  np.testing.assert_allclose(np.asarray(exact), ref, rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(np.asarray(default), ref, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(np.asarray(info["saturation"]), r.mean(0), rtol=1e-12)
  # γ = 0 is GDPO (the paper's special case): the saturation drops out
  with jax.enable_x64(True):
    gdpo_case, _ = A.sa_mrpo(jnp.asarray(r), jnp.asarray(gid), eps=0.0, gamma=0.0)
  np.testing.assert_allclose(np.asarray(gdpo_case), _sa_mrpo_paper(r, gid, 0.0, 1.0, 0.0, np.ones(2)), rtol=1e-12,
                             atol=1e-12)
  d = _defaults("sa_mrpo")
  assert d["gamma"][0] == "0.25" and d["std_ddof"][0].startswith("0") and "population" in d["std_ddof"][1]
  assert d["eps"] == ("1e-6 added to each std", "none")
  assert any("ε = 1e-6" in x for x in _fid("sa_mrpo").deviations)
