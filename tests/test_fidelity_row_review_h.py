"""Issue #51, per-row review h: an independent second reading of six rows' fidelity records.

Rows: tis, clip_cov, kl_cov, bapo, gpg, sapo.

Held (3): clip_cov, kl_cov, sapo. Their "= theirs" claims are checked below against float64 NumPy transcriptions of
the cited lines (PRIME-RL/Entropy-Mechanism-of-RL@88505792 verl/trainer/ppo/core_algos.py:426-515 for clip_cov /
kl_cov at the recipes' settings; the verl 0.9.1 PyPI wheel core_algos.py:1623-1704 with agg_loss :1140-1206, and the
TRL 1.9.0 PyPI wheel grpo_trainer.py:3054-3095, 3124-3128 for sapo).

Not held (3), each error fixed in the record and checked here (no implementation changed, no implementation bug
found):

- ``tis`` (OMITTED): with normalize=True ours divides the weights by max(mean, 1e-8); the verl 0.9.1 PyPI wheel
  rollout_corr_helper.py:651-655 divides only when weights_mean > 1e-8 and otherwise leaves them unnormalised. A
  micro-batch whose truncated weights average ≤ 1e-8 (every log k ≈ −19) gets weights ~0.6 here and ~6e-9 there.
  The record's normalize deviation now says so.
- ``bapo`` (FALSE): the record gave theirs' sampler as "top_k 100 (script)" and said rl.top_k=100 gives it.
  WooooDyy/BAPO@7287044 recipe/bapo/run_bapo_example.sh:43 sets top_k=100, but the command (:61-130) passes only
  rollout.temperature / rollout.top_p (:96-97), never rollout.top_k, so the run samples at their verl 0.7.0.dev's
  rollout.yaml:14 top_k −1 (off), = ours rl.top_k 0. Record's read and sampler default corrected.
- ``gpg`` (FALSE, and an OMISSION): the record said theirs' alpha "counts every generated group" and inverse_alpha =
  min(1, n_valid / groups) per generation round. AMAP-ML/GPG@e096da8c open-r1/src/open_r1/gpg_trainer.py:325, 554
  sums n_valid over every resampling round of the micro-step, :551 num_samples is one round's group count, :600-610
  trains each process's valid groups (all rounds, earliest first) then its last round's zero-variance groups cut to
  len(prompts), and :625-626 divides by min(1, n_valid / num_samples). After a resampling round inverse_alpha is
  not the trained batch's valid share (the example below: they divide by 6/8 where the trained batch holds 4 valid
  groups of 8; ours, on that batch, multiplies by 8/4). Record's read, placement and deviation corrected.
"""
import math
import types

import jax
import jax.numpy as jnp
import numpy as np

from _fidelity import defaults as _defaults, fid as _fid, record as _record


def _batch(mask, adv, old=None, behav=None, group_id=None):
  from rljax.types import TrainBatch  # pylint: disable=import-outside-toplevel
  b, t = mask.shape
  return TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask), advantages=jnp.asarray(adv),
                    group_id=jnp.arange(b, dtype=jnp.int32) if group_id is None else jnp.asarray(group_id),
                    logp_old=None if old is None else jnp.asarray(old),
                    logp_behavior=None if behav is None else jnp.asarray(behav))


def _out(logp):
  from rljax.types import PolicyOutputs  # pylint: disable=import-outside-toplevel
  return PolicyOutputs(logp=jnp.asarray(logp), entropy=None)


# --------------------------------------------------------------------------------------------------------- tis


def _verl091_tis(log_ratio, mask, level, threshold, batch_normalize):
  """The verl 0.9.1 PyPI wheel rollout_corr_helper.py:522-657 compute_rollout_correction_weights, a float threshold:
  clamp(log k, ±20) (token) or of Σ m log k (sequence), exp, × mask, clamp(max=U); with batch_normalize ÷ the
  masked mean (token) or the mean of the sequences' means (sequence), only if that mean > 1e-8."""
  if level == "token":
    raw = np.exp(np.clip(log_ratio, -20.0, 20.0))
  else:
    raw = np.broadcast_to(np.exp(np.clip((log_ratio * mask).sum(-1, keepdims=True), -20.0, 20.0)), log_ratio.shape)
  w = np.minimum(raw * mask, threshold)
  if batch_normalize:
    if level == "token":
      mean = (w * mask).sum() / (mask.sum() + 1e-8)
    else:
      seq = (w * mask).sum(-1) / (mask.sum(-1) + 1e-8)
      has = (mask.sum(-1) > 0).astype(float)
      mean = (seq * has).sum() / max(has.sum(), 1e-8)
    if mean > 1e-8:
      w = w / mean
  return w


def _tis_inputs(seed, scale=0.7, shift=0.0):
  rng = np.random.default_rng(seed)
  b, t = 4, 6
  mask = (rng.random((b, t)) < 0.8).astype(np.float64)
  mask[:, 0] = 1.0
  old = -rng.random((b, t)) * 2
  behav = old - shift + rng.normal(scale=scale, size=(b, t))
  return mask, old, behav


def test_tis_equals_verl_at_token_and_sequence_level():
  from rljax.objectives import tis  # pylint: disable=import-outside-toplevel
  for level in ("token", "sequence"):
    mask, old, behav = _tis_inputs(3, scale=0.5 if level == "token" else 0.3)
    with jax.enable_x64(True):
      w, keep, _ = tis(2.0, level=level)(_out(old), _batch(mask, np.zeros_like(mask), old, behav))
      ours = np.asarray(w) * np.asarray(keep) * mask
    theirs = _verl091_tis(old - behav, mask, level, 2.0, False)
    assert (theirs == 2.0).any() and (theirs[mask > 0] < 2.0).any()  # the truncation bites, not everywhere
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=0)


def test_tis_normalize_below_1e8_differs_from_verl_and_the_record_says_so():
  from rljax.objectives import tis  # pylint: disable=import-outside-toplevel
  mask, old, behav = _tis_inputs(5, scale=0.01)
  behav = old + 19.0 + 0.01 * np.random.default_rng(6).normal(size=old.shape)  # every log k ≈ −19: mean ~6e-9
  with jax.enable_x64(True):
    w, _, _ = tis(2.0, normalize=True)(_out(old), _batch(mask, np.zeros_like(mask), old, behav))
    ours = np.asarray(w) * mask
  theirs = _verl091_tis(old - behav, mask, "token", 2.0, True)
  mean = (np.exp(old - behav) * mask).sum() / mask.sum()
  assert mean < 1e-8
  np.testing.assert_allclose(theirs, np.exp(old - behav) * mask, rtol=1e-12)  # verl: unnormalised
  np.testing.assert_allclose(ours, np.exp(old - behav) * mask / 1e-8, rtol=1e-9)  # ours: ÷ 1e-8
  assert ours[mask > 0].mean() > 0.1 and theirs[mask > 0].max() < 1e-8
  # a normal mean: equal
  mask, old, behav = _tis_inputs(7)
  with jax.enable_x64(True):
    w, _, _ = tis(2.0, normalize=True)(_out(old), _batch(mask, np.zeros_like(mask), old, behav))
  np.testing.assert_allclose(np.asarray(w) * mask, _verl091_tis(old - behav, mask, "token", 2.0, True),
                             rtol=1e-7)  # verl's masked_mean adds 1e-8 to the count
  dev = [d for d in _fid("tis").deviations if d.startswith("normalize=True")]
  assert len(dev) == 1 and "max(mean, 1e-8)" in dev[0] and "rollout_corr_helper.py:651-655" in dev[0]
  assert "weights_mean > 1e-8" in dev[0]


# ------------------------------------------------------------------------------------------ clip_cov / kl_cov


def _authors_clip_cov(old, new, adv, mask, clip_low, clip_high, clip_ratio, lb, ub):
  """PRIME-RL/Entropy-Mechanism-of-RL@88505792 verl/trainer/ppo/core_algos.py:469-515 compute_policy_loss_clip_cov,
  per-token loss (before agg_loss); the candidates are all taken (len ≤ clip_num), so randperm does not matter."""
  ratio = np.exp(new - old)
  l1 = -adv * ratio
  l2 = -adv * np.clip(ratio, 1 - clip_low, 1 + clip_high)
  clip_by_origin = (l2 > l1) & (mask > 0)
  mm = lambda x: (x * mask).sum() / (mask.sum() + 1e-8)  # verl_F.masked_mean
  cov = (adv - mm(adv)) * (new - mm(new))
  cov[mask == 0] = -np.inf
  cov[clip_by_origin] = -np.inf
  clip_num = max(int(clip_ratio * mask.sum()), 1)
  cand = (cov < ub) & (cov > lb) & (mask > 0)
  assert cand.sum() <= clip_num
  corr = np.where(cand, 0.0, 1.0)
  return np.maximum(l1, l2) * corr, cand


def test_clip_cov_equals_the_authors_code_at_their_recipe_clip():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(11)
  b, t = 6, 10
  mask = (rng.random((b, t)) < 0.85).astype(np.float64)
  adv = np.repeat(rng.normal(scale=2.0, size=(b, 1)), t, 1)
  new = -rng.random((b, t)) * 4
  old = new + rng.normal(scale=0.6, size=(b, t))
  theirs, cand = _authors_clip_cov(old, new, adv, mask, 1.0, 1.0, 0.2, 1.0, 5.0)
  assert 0 < cand.sum()
  with jax.enable_x64(True):
    loss, metrics = O.clip_cov(1.0, 1.0, clip_cov_ratio=0.2)(_out(new), _batch(mask, adv, old))
  np.testing.assert_allclose(np.asarray(loss) * mask, theirs * mask, rtol=1e-12, atol=1e-15)
  assert np.isclose(float(metrics["cov_clip_frac"]), cand.sum() / mask.sum(), rtol=1e-6)
  d = _defaults("clip_cov")
  assert d["eps_low / eps_high"][1].startswith("recipes: 1 / 1") and d["clip_cov_ratio"] == ("2e-4", "2e-4")


def _authors_kl_cov(old, new, adv, mask, k_percent, ppo_kl_coef):
  """PRIME-RL/Entropy-Mechanism-of-RL@88505792 core_algos.py:426-467 compute_policy_loss_kl_cov (per-token loss)."""
  log_r = new - old
  loss = -adv * np.exp(log_r)
  valid = mask.reshape(-1) > 0
  idx = np.nonzero(valid)[0]
  a, lp = adv.reshape(-1)[valid], new.reshape(-1)[valid]
  cov = (a - a.mean()) * (lp - lp.mean())
  n = max(1, int(len(cov) * min(k_percent, len(cov)) / 100))
  top = idx[np.argsort(-cov, kind="stable")[:n]]
  flat = loss.reshape(-1).copy()
  flat[top] += ppo_kl_coef * np.abs(log_r.reshape(-1)[top])
  return flat.reshape(loss.shape), n


def test_kl_cov_equals_the_authors_code():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(12)
  b, t = 5, 8
  mask = (rng.random((b, t)) < 0.9).astype(np.float64)
  mask[:, 0] = 1.0
  adv = np.repeat(rng.normal(size=(b, 1)), t, 1)
  new = -rng.random((b, t)) * 3
  old = new + rng.normal(scale=0.3, size=(b, t))
  for k_percent in (20.0, 0.2):  # 0.2 %: one token (the 7b recipe's k_percent at this N)
    theirs, n = _authors_kl_cov(old, new, adv, mask, k_percent, 1.0)
    with jax.enable_x64(True):
      loss, metrics = O.kl_cov(kl_cov_ratio=k_percent / 100, ppo_kl_coef=1.0)(_out(new), _batch(mask, adv, old))
    np.testing.assert_allclose(np.asarray(loss) * mask, theirs * mask, rtol=1e-12, atol=1e-15)
    assert round(float(metrics["frac_penalized"]) * mask.sum()) == n
  assert _defaults("kl_cov")["ppo_kl_coef"] == ("1.0", "1")


# ---------------------------------------------------------------------------------------------------------- bapo


def test_bapo_record_says_the_script_samples_at_top_k_off():
  read = _fid("bapo").read
  assert "run_bapo_example.sh:43 sets top_k=100" in read and "never rollout.top_k" in read
  assert "rollout.yaml:14" in read
  ours, theirs = _defaults("bapo")["sampler"]
  assert "rl.top_k 0" in ours
  assert "top_k -1 (off" in theirs and "never passed" in theirs and "rl.top_k=100 gives it" not in theirs


def _authors_bapo_bounds(adv, ratio, mask, target, low, low_max, low_step, high, high_max, high_step, eps=1e-8):
  """WooooDyy/BAPO@7287044 recipe/bapo/policy_loss.py:21-62, 100-152: c_low raised first, then c_high."""
  def pos_neg(lo, hi):
    eff = np.where(adv >= 0, np.minimum(ratio, hi), np.maximum(ratio, lo)) * adv * mask
    p, n = np.clip(eff, 0, None).sum(), (-np.clip(eff, None, 0)).sum()
    return math.inf if n <= 0 else p / (n + eps)
  v = pos_neg(low, high)
  while v < target and low < low_max and low_step > 0:
    low = min(low + low_step, low_max)
    v = pos_neg(low, high)
    if v >= target:
      break
  while v < target and high < high_max and high_step > 0:
    high = min(high + high_step, high_max)
    v = pos_neg(low, high)
    if v >= target:
      break
  return low, high


def test_bapo_code_mode_equals_the_authors_search_at_the_script_settings():
  from rljax import control as C  # pylint: disable=import-outside-toplevel
  ctl = C.bapo(0.5, mode="code", low_range=(0.8, 0.95), high_range=(1.2, 2.0), low_step=0.05, high_step=0.1)
  seen = set()
  for seed in range(24):
    rng = np.random.default_rng(100 + seed)
    b, t = 6, 7
    mask = (rng.random((b, t)) < 0.9).astype(np.float64)
    adv = np.repeat(rng.normal(size=(b, 1)), t, 1)
    logp_old = -rng.random((b, t)) * 2
    logp = logp_old + rng.normal(scale=0.5, size=(b, t))
    want = _authors_bapo_bounds(adv, np.exp(logp - logp_old), mask, 0.5, 0.8, 0.95, 0.05, 1.2, 2.0, 0.1)
    with jax.enable_x64(True):
      st = ctl.update(ctl.init(), advantages=adv, logp=logp, logp_old=logp_old, mask=mask)
    np.testing.assert_allclose((float(st.clip_low), float(st.clip_high)), want, rtol=1e-6)
    seen.add(want)
  assert len(seen) > 2  # the search stops at different points


# ----------------------------------------------------------------------------------------------------------- gpg


def _authors_gpg_micro_step(rounds, n_gen=8, min_inverse_alpha=0.5):
  """AMAP-ML/GPG@e096da8c gpg_trainer.py:320-626 for one micro-step, one group of n_gen rows per process:
  ``rounds[k][p]`` = process p's rewards in round k. Returns (inverse_alpha, each process's trained rewards)."""
  n_valid = 0
  procs = len(rounds[0])
  new = [None] * procs  # each process's valid rows of every round so far (merge: earlier rounds first)
  for k, rewards in enumerate(rounds):
    stds = np.array([np.std(r, ddof=1) for r in rewards])   # the gathered groups' stds
    num_samples = stds.size                                 # :551, one round's groups
    n_valid += num_samples - int((stds == 0).sum())         # :554
    ident = [None] * procs
    for p, r in enumerate(rewards):
      if np.std(r, ddof=1) > 0:
        new[p] = r if new[p] is None else np.concatenate([new[p], r])  # merge(valid, new) = cat([new, valid])
      else:
        ident[p] = r
    if n_valid >= min_inverse_alpha * num_samples:          # :600 else resample
      trained = [np.concatenate([x for x in (new[p], ident[p]) if x is not None])[:n_gen] for p in range(procs)]
      return min(1.0, n_valid / num_samples), trained       # :625-626
    assert k + 1 < 20
  raise AssertionError("more rounds needed")


def test_gpg_inverse_alpha_sums_resampling_rounds_and_is_not_the_trained_share():
  from rljax.objectives._ratio import _gpg_alpha  # pylint: disable=import-outside-toplevel
  valid = np.array([1.0, 0, 1, 0, 1, 1, 0, 0])
  flat0, flat1 = np.zeros(8), np.ones(8)
  round1 = [valid, valid, valid, flat0, flat1, flat0, flat1, flat0]   # 3 valid groups of 8 < 0.5: resample
  round2 = [valid, valid, flat0, valid, flat1, flat0, flat1, flat0]   # 3 more: n_valid 6 ≥ 4
  inv_alpha, trained = _authors_gpg_micro_step([round1, round2])
  assert inv_alpha == 6 / 8
  rewards = np.stack(trained)                                          # [process, row]
  n_valid_trained = int((rewards.std(1) > 0).sum())
  assert n_valid_trained == 4
  adv = rewards - rewards.mean(1, keepdims=True)                       # --scale_rewards False
  t = 3
  batch = types.SimpleNamespace(loss_mask=jnp.ones((64, t), bool), group_id=jnp.repeat(jnp.arange(8), 8),
                                advantages=jnp.asarray(np.repeat(adv.reshape(-1)[:, None], t, 1)))
  ours = float(_gpg_alpha(batch))
  assert np.isclose(ours, 8 / 4) and np.isclose(1 / inv_alpha, 4 / 3) and not np.isclose(ours, 1 / inv_alpha)
  # no resampling (the first round meets min_inverse_alpha): equal
  inv1, trained1 = _authors_gpg_micro_step([[valid] * 5 + [flat0] * 3])
  adv1 = np.stack(trained1) - np.stack(trained1).mean(1, keepdims=True)
  batch1 = types.SimpleNamespace(loss_mask=batch.loss_mask, group_id=batch.group_id,
                                 advantages=jnp.asarray(np.repeat(adv1.reshape(-1)[:, None], t, 1)))
  assert np.isclose(float(_gpg_alpha(batch1)), 1 / inv1)
  f = _fid("gpg")
  assert "gpg_trainer.py:323-326, 551-554" in f.read and ":625-626" in f.read
  dev = [d for d in f.deviations if d.startswith("G counts")]
  assert len(dev) == 1 and "they divide by 6/8" in dev[0] and "ours multiplies by 8/4" in dev[0]
  assert "theirs counts every generated group" not in dev[0]
  assert "resampling rounds" in f.placement


# ---------------------------------------------------------------------------------------------------------- sapo


def _verl091_sapo(old, new, adv, mask, tau_pos=1.0, tau_neg=1.05, global_batch_size=None):
  """The verl 0.9.1 PyPI wheel core_algos.py:1623-1704 compute_policy_loss_sapo with agg_loss :1194-1202
  (seq-mean-token-mean, forced; dp_size 1)."""
  ratio = np.exp(np.clip(new - old, -20.0, 20.0))
  tau = np.where(adv > 0, tau_pos, tau_neg)
  pg = -(1 / (1 + np.exp(-tau * (ratio - 1.0))) * (4.0 / tau)) * adv
  cnt = mask.sum(-1)
  seq = (pg * mask).sum(-1) / (cnt + 1e-8)
  has = (cnt > 0).astype(float)
  gbs = has.sum() if global_batch_size is None else global_batch_size
  return (seq * has).sum() / gbs


def _trl_sapo(old, new, adv, mask, tau_pos=1.0, tau_neg=1.05):
  """The TRL 1.9.0 PyPI wheel grpo_trainer.py:3054-3058, 3092-3095, 3124-3125 (loss_type 'sapo', token level)."""
  coef = np.exp(new - old)
  tau = np.where(adv > 0, tau_pos, tau_neg)
  pg = -(1 / (1 + np.exp(-tau * (coef - 1))) * 4 / tau) * adv
  return ((pg * mask).sum(-1) / np.maximum(mask.sum(-1), 1.0)).mean()


def test_sapo_equals_verl_and_trl_per_sequence_mean():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  from rljax.objectives import seq_mean_token_mean  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(21)
  b, t = 6, 9
  mask = (rng.random((b, t)) < 0.8).astype(np.float64)
  mask[:, 0] = 1.0
  adv = np.repeat(rng.normal(size=(b, 1)), t, 1)
  adv[0] = 0.0  # A = 0 takes tau_neg (irrelevant to the value, checked by the gate below)
  old = -rng.random((b, t)) * 2
  new = old + rng.normal(scale=0.4, size=(b, t))
  with jax.enable_x64(True):
    loss, _ = O.chain(O.sapo(), aggregate=seq_mean_token_mean)(_out(new), _batch(mask, adv, old))
    per_tok, _ = O.sapo()(_out(new), _batch(mask, adv, old))
  np.testing.assert_allclose(float(loss), _verl091_sapo(old, new, adv, mask), rtol=1e-7)  # verl's + 1e-8
  np.testing.assert_allclose(float(loss), _trl_sapo(old, new, adv, mask), rtol=1e-12)
  # the gate per token at a negative advantage uses tau_neg = 1.05
  r = np.exp(new - old)
  gate_neg = 1 / (1 + np.exp(-1.05 * (r - 1))) * 4 / 1.05
  neg = (adv < 0) & (mask > 0)
  np.testing.assert_allclose(np.asarray(per_tok)[neg], (-gate_neg * adv)[neg], rtol=1e-12)
  d = _defaults("sapo")
  assert d["tau_pos"][0] == "1.0" and d["tau_neg"][0] == "1.05" and "1.05" in d["tau_neg"][1]
