"""Issue #51, error-class sweep s1b (peer conventions): the log-probs convention (a), the micro-batch denominator
(b) and the peer's default path (c), over the rows token_mean ... composite (see docs/catalog.md).

Each reference is a float64 NumPy transcription of the cited lines (written for these tests, not copied):

- TRL 1.9.0 PyPI wheel trl/trainer/grpo_trainer.py:3124-3148 (_compute_loss per loss_type), :2427
  (num_items_in_batch), split over gradient-accumulation micro-batches and processes (DDP averages gradients; the
  losses are linear in the per-token loss, so equal losses are equal gradients).
- verl 0.9.1 PyPI wheel core_algos.py:334-358 / ray_trainer.py:235-270 (compute_advantage's dispatch: the
  norm_adv_by_std_in_grpo flag reaches only the 'grpo' branch), ray_trainer.py:78-117 (apply_kl_penalty).
- open-r1 @1416fa0c src/open_r1/rewards.py:132-202 (len_reward) called per process, as TRL v0.18.0 (open-r1's pin)
  and 1.9.0 call reward functions on the process's own completions before the gather.
"""
import jax
import jax.numpy as jnp
import numpy as np

from rljax import objectives as O
from _fidelity import defaults as _defaults, fid as _fid, log_softmax as _log_softmax


def _text(name):
  fid = _fid(name)
  return " ".join([fid.reference, fid.differences, fid.read, fid.placement, *fid.deviations,
                   *(f"{k} {o} {t}" for k, o, t in fid.defaults)])


# ----------------------------------------------------------------------------- (b) micro-batch denominators


def _ours(agg, loss, mask):
  with jax.enable_x64(True):
    num, den = agg(jnp.asarray(loss, jnp.float64), jnp.asarray(mask, jnp.float64))
    return float(np.asarray(num, np.float64) / np.asarray(den, np.float64))


def _trl_step_loss(loss, mask, loss_type, *, processes, grad_accum, max_completion_length=None,
                   num_items_in_batch=None):
  """TRL 1.9.0 _compute_loss (grpo_trainer.py:3124-3148) summed over one optimizer step: rows split into
  ``processes`` × ``grad_accum`` micro-batches of equal row counts (per_device_train_batch_size), each micro-batch's
  loss backpropagated as is (the Trainer's own 1/GA is disabled, :945-950), gradients averaged over processes.
  ``num_items_in_batch``: the generation batch's loss tokens (:2427), all processes; default the step's."""
  loss, mask = np.asarray(loss, np.float64), np.asarray(mask, np.float64)
  if num_items_in_batch is None:
    num_items_in_batch = mask.sum()
  per_proc = np.split(np.arange(loss.shape[0]), processes)
  total = 0.0
  for rows in per_proc:
    for mb in np.split(rows, grad_accum):
      l, m = loss[mb], mask[mb]
      if loss_type in ("grpo", "sapo"):
        v = ((l * m).sum(-1) / np.maximum(m.sum(-1), 1.0)).mean() / grad_accum
      elif loss_type == "bnpo":
        v = (l * m).sum() / max(m.sum(), 1.0) / grad_accum
      elif loss_type == "dr_grpo":
        v = (l * m).sum() / (l.shape[0] * max_completion_length) / grad_accum
      elif loss_type in ("dapo", "cispo", "vespo"):
        v = (l * m).sum() / (max(num_items_in_batch, 1.0) / processes)
      elif loss_type == "luspo":  # l is sequence-constant: (l_b · |y_b|).mean()
        v = (l[:, 0] * m.sum(-1)).mean() / grad_accum
      else:
        raise ValueError(loss_type)
      total += v
  return total / processes  # DDP: the mean of the processes' gradients


def _uneven_batch(rng, b=8, t=12):
  loss = rng.normal(size=(b, t))
  lengths = rng.integers(1, t + 1, size=b)  # very different token counts per micro-batch
  lengths[:2] = [t, 1]
  mask = (np.arange(t)[None, :] < lengths[:, None]).astype(np.float64)
  return loss, mask


def test_trl_loss_types_against_our_aggregations_under_micro_batching():
  rng = np.random.default_rng(51)
  loss, mask = _uneven_batch(rng)
  kw = dict(processes=2, grad_accum=2)
  # 'dapo' (TRL's default): ours when one generation batch is one optimizer step (steps_per_generation = GA)
  np.testing.assert_allclose(_trl_step_loss(loss, mask, "dapo", **kw), _ours(O.token_mean, loss, mask), rtol=1e-13)
  # with steps_per_generation = 2 × GA the count is the generation batch's (this step's + the next one's tokens)
  gen_tokens = mask.sum() + 37.0
  np.testing.assert_allclose(_trl_step_loss(loss, mask, "dapo", num_items_in_batch=gen_tokens, **kw),
                             _ours(O.token_mean, loss, mask) * mask.sum() / gen_tokens, rtol=1e-13)
  # 'bnpo' (per-micro-batch token mean / GA): not ours when token counts differ, ours when they are equal
  assert abs(_trl_step_loss(loss, mask, "bnpo", **kw) - _ours(O.token_mean, loss, mask)) > 1e-3
  full = np.ones_like(mask)
  np.testing.assert_allclose(_trl_step_loss(loss, full, "bnpo", **kw), _ours(O.token_mean, loss, full), rtol=1e-13)
  # 'grpo': ours (seq_mean_token_mean) for any token counts while no row is empty
  np.testing.assert_allclose(_trl_step_loss(loss, mask, "grpo", **kw), _ours(O.seq_mean_token_mean, loss, mask),
                             rtol=1e-13)
  # 'dr_grpo': ours with max_len = max_completion_length, for any token counts
  sum_norm = O.seq_mean_token_sum_norm(max_len=16)
  np.testing.assert_allclose(_trl_step_loss(loss, mask, "dr_grpo", max_completion_length=16, **kw),
                             _ours(sum_norm, loss, mask), rtol=1e-13)
  # 'luspo' on a sequence-constant loss: seq_mean_token_sum, every row counted
  seq_loss = np.repeat(loss[:, :1], loss.shape[1], axis=1)
  np.testing.assert_allclose(_trl_step_loss(seq_loss, mask, "luspo", **kw),
                             _ours(O.seq_mean_token_sum, seq_loss, mask), rtol=1e-13)
  # an empty row: TRL's 'grpo' / 'luspo' count it (÷ n_all), ours does not (÷ n_non-empty)
  mask[3] = 0.0
  n_all, n_non_empty = 8, 7
  np.testing.assert_allclose(_trl_step_loss(loss, mask, "grpo", **kw),
                             _ours(O.seq_mean_token_mean, loss, mask) * n_non_empty / n_all, rtol=1e-13)
  np.testing.assert_allclose(_trl_step_loss(loss, mask, "dr_grpo", max_completion_length=16, **kw),
                             _ours(sum_norm, loss, mask), rtol=1e-13)


def test_aggregation_records_name_trl_and_verl_091_default_trainer():
  for name in ("token_mean", "token_sum", "seq_mean_token_sum", "seq_mean_token_mean", "seq_mean_token_sum_norm"):
    fid = _fid(name)
    assert "v1/trainer_base.py:1827-1862" in fid.read and "use_v1 true" in fid.read, name
    assert "ray_trainer.py:1352-1362" in fid.read and "deprecated" in fid.read, name
    assert "TRL 1.9.0 PyPI wheel" in fid.read, name
    assert any(d.startswith("TRL 1.9.0") for d in fid.deviations), name
  dev = [d for d in _fid("token_mean").deviations if d.startswith("TRL")][0]
  assert "'dapo'" in dev and "steps_per_generation = gradient_accumulation_steps" in dev and "'bnpo'" in dev
  assert any("'grpo'" in d and "no row is empty" in d for d in _fid("seq_mean_token_mean").deviations)
  assert any("'dr_grpo'" in d and "max_completion_length" in d and "any micro-batching" in d
             for d in _fid("seq_mean_token_sum_norm").deviations)


# ----------------------------------------------------------------------------- (c) grpo / dr_grpo: the dispatch


def _verl_compute_advantage(scores, uid, adv_estimator, norm_adv_by_std_in_grpo, epsilon=1e-6):
  """verl ray_trainer.compute_advantage (0.9.1 :207-282, v0.7.0 :186-264) for the two GRPO estimators: the 'grpo'
  branch passes norm_adv_by_std_in_grpo; any other estimator is called with (token_level_rewards, response_mask,
  config, index) and keeps its own defaults (compute_grpo_vectorized_outcome_advantage: True)."""
  flag = norm_adv_by_std_in_grpo if adv_estimator == "grpo" else True
  out = np.zeros_like(scores)
  for g in np.unique(uid):
    rows = uid == g
    r = scores[rows]
    if r.size == 1:
      mean, std = 0.0, 1.0
    else:
      mean, std = r.mean(), r.std(ddof=1)
    out[rows] = (r - mean) / (std + epsilon) if flag else r - mean
  return out


def test_dr_grpo_is_verl_grpo_branch_only_not_grpo_vectorized():
  from rljax.advantages import dr_grpo  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(7)
  r = rng.normal(size=12)
  gid = np.repeat(np.arange(3), 4)
  with jax.enable_x64(True):
    ours = np.asarray(dr_grpo(jnp.asarray(r), jnp.asarray(gid), num_groups=3)[0], np.float64)
  np.testing.assert_allclose(ours, _verl_compute_advantage(r, gid, "grpo", False), rtol=1e-12, atol=1e-14)
  vec = _verl_compute_advantage(r, gid, "grpo_vectorized", False)  # the flag never reaches it
  assert np.max(np.abs(vec - ours)) > 1e-2
  np.testing.assert_allclose(vec, _verl_compute_advantage(r, gid, "grpo", True), rtol=1e-12)
  dev = " ".join(_fid("dr_grpo").deviations)
  assert "only on its 'grpo' branch" in dev and "does not read config" in dev
  assert "with norm_adv_by_std_in_grpo=False is the same r − mean" not in dev
  for name in ("grpo", "dr_grpo"):
    assert "v1/utils.py:148-217" in _fid(name).placement and "use_v1 true" in _fid(name).placement, name


# ----------------------------------------------------------------------------- (c) remax on verl 0.9.1


def test_remax_record_says_verl_091_default_trainer_cannot_run_it():
  fid = _fid("remax")
  assert "ray_trainer.py:1493-1535" in fid.read and "v1/trainer_base.py:1743-1784" in fid.read
  assert "no reward_baselines" in fid.read
  assert "trainer.use_v1=false" in fid.placement and "TypeError" in fid.placement
  assert any("cannot run adv_estimator remax" in d for d in fid.deviations)


# ----------------------------------------------------------------------------- (a) the in-reward / adaptive KL


def _verl_reward_kl(z_actor, z_ref, tokens, mask, temperature):
  """verl: old_log_prob / ref_log_prob = log softmax(z / T) at the sampled tokens (dp_actor.py:213, 298 ÷
  temperature), kl_penalty 'kl' = old − ref (k1) × mask; apply_kl_penalty's current_kl = the batch mean of the
  per-sequence masked means (masked_mean ÷ (Σm + 1e-8))."""
  take = lambda lp: np.take_along_axis(lp, tokens[..., None], -1)[..., 0]
  old = take(_log_softmax(z_actor / temperature))
  ref = take(_log_softmax(z_ref / temperature))
  kld = (old - ref) * mask
  return kld, float(np.mean(kld.sum(-1) / (mask.sum(-1) + 1e-8)))


def test_in_reward_and_adaptive_kl_log_probs_are_tempered_in_verl():
  from rljax.objectives import kl_in_reward  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(3)
  b, t, v = 4, 6, 9
  z_actor, z_ref = rng.normal(size=(b, t, v)) * 2, rng.normal(size=(b, t, v)) * 2
  tokens = rng.integers(0, v, size=(b, t))
  mask = np.ones((b, t))
  mask[1, 4:] = 0
  take = lambda lp: np.take_along_axis(lp, tokens[..., None], -1)[..., 0]
  logp_old, logp_ref = take(_log_softmax(z_actor)), take(_log_softmax(z_ref))  # ours: untempered
  with jax.enable_x64(True):
    rewards, metrics = kl_in_reward(jnp.zeros(b), jnp.asarray(logp_old), jnp.asarray(logp_ref), jnp.asarray(mask),
                                    beta=1.0, estimator="kl")
  ours_kl = -np.asarray(rewards, np.float64)
  kld1, cur1 = _verl_reward_kl(z_actor, z_ref, tokens, mask, 1.0)
  np.testing.assert_allclose(ours_kl, kld1, rtol=1e-10, atol=1e-12)  # T = 1: verl's default and their scripts'
  np.testing.assert_allclose(float(metrics["kl"]), cur1, rtol=1e-6)
  kld7, cur7 = _verl_reward_kl(z_actor, z_ref, tokens, mask, 0.7)
  assert np.max(np.abs(kld7 - ours_kl)) > 1e-2 and abs(cur7 - cur1) > 1e-3
  # 0.9.1's v1 trainer: a synthetic padding row (mask 0) counts in n_steps and enters current_kl as 0
  pad = np.concatenate([mask, np.zeros((1, t))])
  zp = lambda z: np.concatenate([z, z[:1]])
  _, cur_pad = _verl_reward_kl(zp(z_actor), zp(z_ref), np.concatenate([tokens, tokens[:1]]), pad, 1.0)
  np.testing.assert_allclose(cur_pad, cur1 * b / (b + 1), rtol=1e-12)
  for name in ("rloo", "reinforce_pp"):
    o, th = _defaults(name)["in-reward KL log-probs"]
    assert "untempered" in o and "rollout.temperature" in th and "T = 1.0" in th, name
  o, th = _defaults("adaptive_kl")["temperature of the KL's log-probs"]
  assert "untempered" in o and "rollout.temperature = 1.0" in th
  devs = " ".join(_fid("adaptive_kl").deviations)
  assert "tempered" in devs and "synthetic padding rows" in devs


# ----------------------------------------------------------------------------- (c) zero_variance on verl 0.9.1


def _verl091_dapo_filtered(values_by_uid):
  """verl 0.9.1 v1/replay_buffer.py:309-312: evicted when len > 1 and np.std(values) == 0.0."""
  return {u for u, v in values_by_uid.items() if len(v) > 1 and float(np.std(v)) == 0.0}


def test_zero_variance_against_verl_091_replay_buffer_filter():
  from rljax.filters import zero_variance  # pylint: disable=import-outside-toplevel
  groups = {0: [1.0, 1.0, 1.0], 1: [0.0, 1.0, 0.0], 2: [0.5], 3: [-0.25, -0.25]}
  metric = np.concatenate([groups[g] for g in sorted(groups)])
  gid = np.concatenate([[g] * len(groups[g]) for g in sorted(groups)])
  keep = np.asarray(zero_variance(jnp.asarray(metric, jnp.float32), jnp.asarray(gid), num_groups=4)[0])
  kept_groups = {int(g) for g in np.unique(gid[keep > 0])}
  assert kept_groups == set(groups) - _verl091_dapo_filtered(groups) == {1, 2}
  fid = _fid("zero_variance")
  assert "v1/replay_buffer.py:262-314" in fid.read and "max_num_gen_batches" in fid.read
  assert "'reward'" in _defaults("zero_variance")["metric"][1]
  assert any("replay buffer" in d and "without a limit" in d for d in fid.deviations)


# ----------------------------------------------------------------------------- (c) length_penalty: per process


def _open_r1_len_reward(lengths, correct):
  """open-r1 rewards.py:132-202 on one call's completions (the correctness given)."""
  lo, hi = min(lengths), max(lengths)
  if lo == hi:
    return [0.0] * len(lengths)
  lam = [0.5 - (n - lo) / (hi - lo) for n in lengths]
  return [x if c else min(0.0, x) for x, c in zip(lam, correct)]


def test_length_penalty_their_min_max_is_per_process():
  from rljax.rewards import length_penalty  # pylint: disable=import-outside-toplevel
  lengths = [10, 30, 50, 20, 80, 40, 60, 90]
  correct = [1, 0, 1, 1, 0, 1, 1, 0]
  one_process = _open_r1_len_reward(lengths, correct)
  two_processes = _open_r1_len_reward(lengths[:4], correct[:4]) + _open_r1_len_reward(lengths[4:], correct[4:])
  assert np.max(np.abs(np.subtract(one_process, two_processes))) > 0.1  # λ depends on the number of processes
  # ours per group: equal to theirs when each process's call holds exactly one group
  gid = np.repeat([0, 1], 4)
  with jax.enable_x64(True):
    ours = np.asarray(length_penalty(jnp.asarray(lengths, jnp.float64), jnp.asarray(correct), jnp.asarray(gid),
                                     num_groups=2)[0], np.float64)
  np.testing.assert_allclose(ours, two_processes, rtol=1e-12)
  o, th = _defaults("length_penalty")["min / max over"]
  assert "process's share" in th and "whole batch" not in th.replace("whole generation batch only on one", "")
  assert "trl[vllm]==0.18.0" in _fid("length_penalty").read and "'length' is opt-in" in _fid("length_penalty").read
