"""Issue #51, the error-class sweep (helper s2a): launch switches, the data-parallel dispatch, the caller.

Rows swept: gpg gmpo segment_ratio pspo decoupled_ppo exgrpo_policy erc clip_cov kl_cov rpg gft alol
delta_logp_reweight entropic bapo temperature_control qae passk vote task_normalized role_ema_baseline hadw canon
step_episode_mix. Each record fixed by the sweep is checked here for its corrected text and, where the correction
carries a number, for that number: a float64 NumPy transcription of the cited source lines (written for these
tests, not copied) against rljax.

Fixed (what the records missed):

- gpg: the token mean's denominator is each process's own micro-batch (gpg_trainer.py:303), × 1/grad-accumulation,
  processes averaged: a mean of micro-batch token means, not the step's token mean.
- gmpo: the script trains one rollout (128 prompts × 8) as 8 optimizer steps of 128 sequences (oat's grad_acc_step
  = 16); DeepSpeed's mean over sequences is seq_mean_token_mean.
- segment_ratio: Rank-GRPO's length shaping is on (getattr default True; TRL 0.21 has no such field), the record
  said off; bnpo's per-micro-batch mean is per process (4 processes).
- pspo: the runs sample at temperature 0.8 and TRL trains on log softmax(z/0.8): the smoothed ratio is tempered.
- decoupled_ppo: AReaL's configs run max_head_offpolicyness 2 / 4 and ppo_n_minibatches 1 / 4.
- exgrpo_policy: 2 optimizer steps per step; with use_dynamic_bsz and gradient_accumulation 1 the micro-batch losses
  are summed (Σ / (8192 × dp)); the entropy bonus is a sum of micro-batch means.
- erc / clip_cov / kl_cov / rpg: 8 / 8 / 8 / 16 mini-batches per step (ρ = 1, r = 1, w = 1 on the first); the
  per-micro-batch statistics are per data-parallel rank (DP_COMPUTE_PROTO) and per token-budget micro-batch.
- gft: token-mean per 16-row micro-batch per GPU ÷ 4; alol: 4 micro-batch means summed (4 × the 16-row mean).
- delta_logp_reweight, qae: the DAPO overlong penalty on the reward (buffer 4096, factor 1.0) was not listed.
- entropic: H at rollout.temperature 0.6 and one controller per data-parallel rank.
- temperature_control: the observed H is at the current T (update_actor sets meta_info['temperature']) and one
  scheduler per worker.
- bapo: 4 mini-batches per epoch × 2 epochs, top_k 100.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np

from rljax import objectives as O
from _fidelity import defaults as _defaults, fid as _fid, log_softmax as _log_softmax, record as _text


def _pick(logp, y):
  return np.take_along_axis(logp, y[..., None], -1)[..., 0]


def _batch(mask, adv, **kw):
  from rljax.types import TrainBatch  # pylint: disable=import-outside-toplevel
  b, t = mask.shape
  return TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask), advantages=jnp.asarray(adv),
                    group_id=jnp.arange(b, dtype=jnp.int32), **{k: jnp.asarray(v) for k, v in kw.items()})


def _out(logp, entropy=None):
  from rljax.types import PolicyOutputs  # pylint: disable=import-outside-toplevel
  return PolicyOutputs(logp=jnp.asarray(logp), entropy=None if entropy is None else jnp.asarray(entropy))


def _micro_mean_of_token_means(loss, mask, micro_rows):
  """The HF Trainer / verl dp_actor form: each micro-batch's own token mean, averaged over the micro-batches
  (1/gradient_accumulation per micro-step; the processes' gradients averaged: every micro-batch weighs the same)."""
  means = []
  for s in range(0, loss.shape[0], micro_rows):
    l, m = loss[s:s + micro_rows], mask[s:s + micro_rows]
    means.append((l * m).sum() / m.sum())
  return float(np.mean(means))


# ----------------------------------------------------------------------------- gpg


def test_gpg_token_mean_is_per_process_micro_batch():
  rng = np.random.default_rng(51)
  b, t = 16, 9  # 2 processes × 2 micro-steps × 4 rows
  logp = -rng.random((b, t)) * 3
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  mask = np.zeros((b, t), bool)
  lengths = rng.integers(2, t + 1, size=b)
  for i, n in enumerate(lengths):
    mask[i, :n] = True
  with jax.enable_x64(True):
    per_token, _ = O.gpg()(_out(logp), _batch(mask, adv))
    per_token = np.asarray(per_token)
    ours = float(np.asarray(O.token_mean(jnp.asarray(per_token), jnp.asarray(mask))[0])
                 / np.asarray(O.token_mean(jnp.asarray(per_token), jnp.asarray(mask))[1]))
  # their per-token loss: −log π · A (gpg_trainer.py:300)
  np.testing.assert_allclose(per_token[mask], (-logp * adv)[mask], rtol=1e-14)
  theirs = _micro_mean_of_token_means(-logp * adv, mask, 4)
  assert abs(ours - theirs) > 1e-3  # unequal token counts per micro-batch: a mean of means ≠ the step's mean
  # equal token counts in every micro-batch: the two agree
  mask_eq = np.zeros((b, t), bool)
  mask_eq[:, :5] = True
  with jax.enable_x64(True):
    num, den = O.token_mean(jnp.asarray(-logp * adv), jnp.asarray(mask_eq))
  np.testing.assert_allclose(float(num / den), _micro_mean_of_token_means(-logp * adv, mask_eq, 4), rtol=1e-13)
  d = _defaults("gpg")
  assert "each process's own micro-batch" in d["aggregation"][1]
  assert d["sampler temperature / top_p"][1].startswith("temperature 1.0, top_p 1.0")
  f = _fid("gpg")
  assert "gpg_trainer.py:303" in f.read and ":56-57" in f.read
  assert any("1/(P·K·n_pk)" in x for x in f.deviations)


# ----------------------------------------------------------------------------- gmpo


def _gmpo_code_loss(new, old, mask, adv, cliprange):
  """train_zero_math_gmpo.py:673-690, one sequence per micro-batch (scalar A)."""
  sgn = -1.0 if adv >= 0 else 1.0
  diff = new - old
  s = sgn * diff
  clamped = np.clip(s, -cliprange, cliprange)
  lr = sgn * np.maximum(s, clamped)
  ratio = np.exp(lr[mask].sum() / mask.sum())
  return -adv * ratio


def test_gmpo_step_is_the_mean_over_sequences():
  rng = np.random.default_rng(7)
  b, t = 8, 12
  old = -rng.random((b, t)) * 2
  new = old + rng.normal(scale=0.5, size=(b, t))
  mask = np.zeros((b, t), bool)
  for i, n in enumerate(rng.integers(3, t + 1, size=b)):
    mask[i, :n] = True
  a = rng.normal(size=b)
  adv = np.repeat(a[:, None], t, axis=1)
  # DeepSpeed: each micro-step (one sequence) × 1/grad_acc_step, the ranks averaged: the mean over sequences
  theirs = np.mean([_gmpo_code_loss(new[i], old[i], mask[i], a[i], 0.4) for i in range(b)])
  with jax.enable_x64(True):
    obj = O.chain(O.gmpo(0.4, 0.4), aggregate=O.seq_mean_token_mean)
    batch = _batch(mask, adv, logp_old=old)
    loss = obj(_out(new), batch)
    loss = float(np.asarray(loss[0] if isinstance(loss, tuple) else loss))
  np.testing.assert_allclose(loss, theirs, rtol=1e-12)
  d = _defaults("gmpo")
  assert d["optimizer steps per rollout batch"][1].startswith("8:")
  assert "rl.num_minibatches=8" in d["optimizer steps per rollout batch"][0]
  f = _fid("gmpo")
  assert "deepspeed.py:227-229" in f.read and "ppo.py:218-234" in f.read and ":620" in f.read
  assert any("8 optimizer steps" in x for x in f.deviations)
  assert any("seq_mean_token_mean" in x for x in f.deviations)


# ----------------------------------------------------------------------------- segment_ratio


def _rank_grpo_length_shaping(adv_tokens, overflow, eos, items_emitted, has_overflow, terminated, rec_num=20):
  """rank_grpo_trainer.py:1829-1848 with apply_extra_length_shaping True (its getattr default)."""
  adv = adv_tokens * (~eos)
  adv = adv + (-0.1) * overflow
  exact = (items_emitted >= rec_num) & ~has_overflow & terminated
  early = (items_emitted < rec_num) & terminated
  adv = adv + exact[:, None] * (0.1 * eos)
  adv = adv + early[:, None] * (-0.1 * eos)
  return adv


def test_segment_ratio_length_shaping_is_on_and_recorded():
  t = 6
  adv_tokens = np.ones((3, t)) * 0.5
  eos = np.zeros((3, t), bool)
  eos[0, 5] = eos[1, 3] = True
  overflow = np.zeros((3, t), bool)
  overflow[2, 4:] = True
  shaped = _rank_grpo_length_shaping(adv_tokens, overflow, eos, np.array([20, 7, 25]),
                                     np.array([False, False, True]), np.array([True, True, False]))
  assert shaped[0, 5] == 0.1 and shaped[1, 3] == -0.1  # EOS of an exact-length / early-stopped list
  np.testing.assert_allclose(shaped[2, 4:], 0.5 - 0.1)  # every overflow token
  d = _defaults("segment_ratio")
  assert "length shaping (not this term's)" in d
  assert "on (apply_extra_length_shaping defaults to True" in d["length shaping (not this term's)"][1]
  assert "shaping off" not in d["advantage (not this term's)"][1]
  f = _fid("segment_ratio")
  assert "783-787" in f.read and "INSTALL.SH" in f.read and "grpo_test_qwen25_0.5b_with_kl.py" in f.read
  assert any("one process and one micro-batch per update" in x for x in f.deviations)
  assert any("length shaping" in x and "not built" in x for x in f.deviations)


# ----------------------------------------------------------------------------- pspo


def test_pspo_ratio_is_tempered_at_their_temperature():
  rng = np.random.default_rng(3)
  b, t, v = 4, 7, 11
  z_old = rng.normal(size=(b, t, v)) * 2
  z_new = z_old + rng.normal(scale=0.4, size=(b, t, v))
  y = rng.integers(0, v, size=(b, t))
  mask = rng.random((b, t)) < 0.8
  mask[:, 0] = True
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)

  def theirs(temp):  # grpotrainer.patch 'pspo' on TRL's tempered log-probs (logits ÷ temperature)
    coef_1 = np.exp(_pick(_log_softmax(z_new / temp), y) - _pick(_log_softmax(z_old / temp), y))
    return -((1 - 0.1) * coef_1 + 0.1) * adv

  with jax.enable_x64(True):
    ours_untempered = np.asarray(O.pspo(0.1)(_out(_pick(_log_softmax(z_new), y)),
                                             _batch(mask, adv, logp_old=_pick(_log_softmax(z_old), y)))[0])
    ours_fed_tempered = np.asarray(O.pspo(0.1)(_out(_pick(_log_softmax(z_new / 0.8), y)),
                                               _batch(mask, adv, logp_old=_pick(_log_softmax(z_old / 0.8), y)))[0])
  np.testing.assert_allclose(ours_untempered[mask], theirs(1.0)[mask], rtol=1e-12)  # equal at T = 1
  np.testing.assert_allclose(ours_fed_tempered[mask], theirs(0.8)[mask], rtol=1e-12)  # the formula itself matches
  assert np.max(np.abs(ours_untempered - theirs(0.8))[mask]) > 1e-3  # their T = 0.8 run: another ratio
  d = _defaults("pspo")
  assert "temperature 0.8" in d["temperature in the ratio"][1] and "untempered" in d["temperature in the ratio"][0]
  assert "0.9" in d["top_p"][1]
  f = _fid("pspo")
  assert "maths_finetuning.py:201-207" in f.read and "1517-1519" in f.read
  assert any("temperature 0.8" in x for x in f.deviations)


# ----------------------------------------------------------------------------- decoupled_ppo


def test_decoupled_ppo_records_staleness_and_minibatches():
  d = _defaults("decoupled_ppo")
  assert "max_head_offpolicyness 2" in d["staleness (π_behav's lag)"][1]
  assert "rl.async_staleness=2" in d["staleness (π_behav's lag)"][0]
  assert "ppo_n_minibatches 1 (gsm8k), 4" in d["mini-batches per step"][1]
  assert "reward_scaling" not in d["reward and advantage (not this term's)"][1]  # stated as values
  assert "(r − 0.5)·10" in d["reward and advantage (not this term's)"][1]
  f = _fid("decoupled_ppo")
  assert "gsm8k_grpo.yaml:28" in f.read and "train_engine.py:30-66" in f.read
  assert "all-reduced" in f.placement
  assert any("max_head_offpolicyness" in x for x in f.deviations)


# ----------------------------------------------------------------------------- exgrpo_policy


def test_exgrpo_summed_micro_batches_are_sum_norm_up_to_a_constant():
  rng = np.random.default_rng(5)
  n_gpu, rows_per_gpu, t, max_len = 2, 6, 10, 8192
  loss = rng.normal(size=(n_gpu * rows_per_gpu, t))
  mask = rng.random(loss.shape) < 0.7
  # theirs: per GPU, token-budget micro-batches of 2 and 4 rows, each Σ l·m / max_len, summed (÷ 1), GPUs averaged
  per_gpu = []
  for g in range(n_gpu):
    rows = slice(g * rows_per_gpu, (g + 1) * rows_per_gpu)
    l, m = loss[rows], mask[rows]
    per_gpu.append((l[:2] * m[:2]).sum() / max_len + (l[2:] * m[2:]).sum() / max_len)
  theirs = float(np.mean(per_gpu))
  with jax.enable_x64(True):
    num, den = O.seq_mean_token_sum_norm(max_len=max_len)(jnp.asarray(loss), jnp.asarray(mask))
  ours = float(num / den)
  b = loss.shape[0]
  np.testing.assert_allclose(theirs, ours * b / n_gpu, rtol=1e-13)
  d = _defaults("exgrpo_policy")
  assert "2 optimizer steps per step" in d["mini-batches per step"][1]
  assert "summed over the GPU's micro-batches" in d["entropy bonus"][1]
  assert "grpo_use_std False" in d["advantage (not this term's)"][1]
  assert "skip_grad_bound 500" in d["gradient-norm skip"][1]
  f = _fid("exgrpo_policy")
  assert "mix_actor.py:63" in f.read and "run_exgrpo.sh:40" in f.read


# ----------------------------------------------------------------------------- erc


def test_erc_masks_nothing_on_their_first_mini_batch():
  rng = np.random.default_rng(9)
  b, t = 4, 6
  old = -rng.random((b, t)) * 2
  new = old + rng.normal(scale=0.3, size=(b, t))
  ent = rng.random((b, t)) * 2
  mask = np.ones((b, t), bool)
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  term = O.ppo_clip(0.2, 0.28, dual_clip=10.0)
  wrapped = O.erc(term)

  def value_and_grad(fn, ent_new):
    def f(lp):
      l, _ = fn(_out(lp, ent_new), _batch(mask, adv, logp_old=old, entropy_old=ent))
      return jnp.sum(l)
    return jax.value_and_grad(f)(jnp.asarray(new))

  with jax.enable_x64(True):
    v0, g0 = value_and_grad(term, ent)
    v1, g1 = value_and_grad(wrapped, ent)  # H = H_old: ρ = 1 everywhere, nothing detached
    v2, g2 = value_and_grad(wrapped, ent * 1.5)  # H moved by 50 %: every token detached
  np.testing.assert_allclose(float(v1), float(v0), rtol=1e-14)
  np.testing.assert_allclose(np.asarray(g1), np.asarray(g0), rtol=1e-14)
  np.testing.assert_allclose(float(v2), float(v0), rtol=1e-14)
  assert np.all(np.asarray(g2) == 0)
  d = _defaults("erc")
  assert "8 optimizer steps" in d["mini-batches per step"][1] and "ρ = 1" in d["mini-batches per step"][1]
  assert "token-budget micro-batch" in d["aggregation (the wrapped term's)"][1]
  f = _fid("erc")
  assert "fsdp_workers.py:843-845" in f.read and "dp_actor.py:416-418" in f.read
  assert "data-parallel rank" in f.placement


# ----------------------------------------------------------------------------- clip_cov / kl_cov


def test_cov_selection_count_per_rank_micro_batch():
  """verl's k = max(1, int(N·k%/100)) per GPU micro-batch: 8 micro-batches of 125 tokens at 2e-4 select 8 tokens,
  the whole batch of 1000 selects 1 (ours)."""
  rng = np.random.default_rng(13)
  b, t = 8, 125
  logp = -rng.random((b, t)) * 2
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  mask = np.ones((b, t), bool)
  theirs_count = sum(max(1, int(t * 0.02 / 100)) for _ in range(b))  # one row per GPU micro-batch
  with jax.enable_x64(True):
    _, metrics = O.kl_cov(kl_cov_ratio=2e-4)(_out(logp), _batch(mask, adv, logp_old=logp))
  ours_count = round(float(metrics["frac_penalized"]) * b * t)
  assert (theirs_count, ours_count) == (8, 1)
  for name in ("clip_cov", "kl_cov"):
    d = _defaults(name)
    assert "8 optimizer steps" in d["mini-batches per step"][1]
    assert "per GPU per token-budget micro-batch" in d["aggregation"][1]
    f = _fid(name)
    assert "fsdp_workers.py:562-563" in f.read and "DP_COMPUTE_PROTO" in f.read
    assert "data-parallel rank separately" in f.placement
    assert any("per data-parallel rank" in x for x in f.deviations)
  assert "log r = 0 on the first" in _defaults("kl_cov")["mini-batches per step"][1]
  # the s2a sweep found ours adding a penalty gradient at r = 1 (jnp.abs's derivative at 0); fixed since, so no
  # deviation says so
  assert not any("jnp.abs" in x for x in _fid("kl_cov").deviations)


def test_kl_cov_penalty_has_no_gradient_at_ratio_one():
  """At r = 1 the |log r| penalty adds no gradient, as torch's abs backward (sign(0) = 0) in the authors'
  compute_policy_loss_kl_cov: the loss's gradient with ppo_kl_coef = 1 equals the one with 0 (found by the s2a
  sweep: jnp.abs's derivative at 0 is 1)."""
  rng = np.random.default_rng(17)
  b, t = 2, 5
  logp = -rng.random((b, t))
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  mask = np.ones((b, t), bool)
  with jax.enable_x64(True):
    def f(coef):
      def g(lp):
        l, _ = O.kl_cov(kl_cov_ratio=0.5, ppo_kl_coef=coef)(_out(lp), _batch(mask, adv, logp_old=logp))
        return jnp.sum(l)
      return np.asarray(jax.grad(g)(jnp.asarray(logp)))
    np.testing.assert_allclose(f(1.0), f(0.0), rtol=1e-14)  # |log r| at r = 1 adds no gradient (torch: sign(0) = 0)


# ----------------------------------------------------------------------------- rpg


def test_rpg_kl_value_zero_when_reference_is_the_old_policy():
  rng = np.random.default_rng(19)
  b, t = 3, 5
  logp = -rng.random((b, t))
  adv = np.zeros((b, t))
  mask = np.ones((b, t), bool)
  with jax.enable_x64(True):
    loss, _ = O.rpg(beta=1e-4, policy_gradient=False)(_out(logp), _batch(mask, adv, logp_old=logp, logp_ref=logp))
  # their rpg_rkl: w·log w with w = exp(log π − ref) = 1 on the first mini-batch: 0
  w = np.exp(logp - logp)
  np.testing.assert_allclose(np.asarray(loss), 1e-4 * w * np.log(w), atol=1e-15)
  d = _defaults("rpg")
  assert "16 optimizer steps" in d["mini-batches per step"][1]
  assert "per GPU per token-budget micro-batch" in d["aggregation"][1]
  f = _fid("rpg")
  assert "run_rpg_7b_rkl1e-4.sh:33-36" in f.read and "fsdp_workers.py:466-467" in f.read
  assert any("16 mini-batches" in x for x in f.deviations)


# ----------------------------------------------------------------------------- gft / alol


def test_gft_aggregation_is_a_mean_of_micro_batch_means():
  rng = np.random.default_rng(23)
  b, t, tau = 32, 8, 0.1
  logp = np.log(rng.uniform(0.01, 0.99, size=(b, t)))
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  mask = np.zeros((b, t), bool)
  for i, n in enumerate(rng.integers(1, t + 1, size=b)):
    mask[i, :n] = True
  with jax.enable_x64(True):
    per_token, _ = O.gft(tau, use_advantages=True)(_out(logp), _batch(mask, adv))
  per_token = np.asarray(per_token)
  p = np.exp(logp)
  code = -logp * np.where(p > tau, 1.0, p) * adv  # compute_gft_loss before agg_loss
  np.testing.assert_allclose(per_token[mask], code[mask], rtol=1e-13)
  theirs = _micro_mean_of_token_means(code, mask, 16)  # 16-row micro-batches ÷ gradient_accumulation, GPUs averaged
  ours = (code * mask).sum() / mask.sum()
  assert abs(theirs - ours) > 1e-4
  d = _defaults("gft")
  assert "16-row micro-batch" in d["aggregation"][1]
  assert d["mini-batches per step"][1].startswith("4:")
  assert "dp_actor.py:479-484" in _fid("gft").read


def test_alol_step_sums_four_micro_batch_means():
  rng = np.random.default_rng(29)
  seq_loss = rng.normal(size=(16, 5))
  mask = np.ones((16, 5), bool)
  theirs = sum(seq_loss[s:s + 4].sum(1).mean() for s in range(0, 16, 4))  # :905 mean of 4 rows, no ÷ GA
  with jax.enable_x64(True):
    num, den = O.seq_mean_token_sum(jnp.asarray(seq_loss), jnp.asarray(mask))
  np.testing.assert_allclose(theirs, 4 * float(num / den), rtol=1e-13)
  d = _defaults("alol")
  assert "4 × the mean over its 16 rows" in d["aggregation"][1]
  assert "max_grad_norm 0.3 (:50)" in _fid("alol").read
  assert any("no ÷ gradient_accumulation_steps" in x for x in _fid("alol").deviations)


# ----------------------------------------------------------------------------- delta_logp_reweight / qae


def _verl_dapo_overlong(lengths, max_len, buffer_len, factor):
  """verl v0.7.0 workers/reward_manager/dapo.py:116-127."""
  expected = max_len - buffer_len
  exceed = lengths - expected
  return np.minimum(-exceed / buffer_len * factor, 0.0)


def test_qae_over_their_shaped_rewards():
  from rljax.advantages import qae  # pylint: disable=import-outside-toplevel
  from rljax.rewards import overlong_penalty  # pylint: disable=import-outside-toplevel
  lengths = np.array([1000, 17000, 20480, 5000, 19000, 300, 16500, 12000])
  score = np.array([1, 1, -1, -1, 1, -1, 1, 1], np.float64)  # math_dapo: ±1
  pen = _verl_dapo_overlong(lengths, 20480, 4096, 1.0)
  with jax.enable_x64(True):
    ours_pen = np.asarray(overlong_penalty(jnp.asarray(lengths, jnp.float64), max_len=20480, buffer_len=4096)[0])
    r = score + pen
    gid = jnp.zeros(8, jnp.int32)
    a_shaped = np.asarray(qae(jnp.asarray(r), gid, quantile=0.4, num_groups=1)[0])
    a_raw = np.asarray(qae(jnp.asarray(score), gid, quantile=0.4, num_groups=1)[0])
  np.testing.assert_allclose(ours_pen, pen, rtol=1e-6, atol=1e-6)
  theirs = (r - np.quantile(r, 0.4)) / (np.std(r, ddof=1) + 1e-6)  # torch.quantile linear, unbiased std
  np.testing.assert_allclose(a_shaped, theirs, rtol=1e-10)
  assert np.max(np.abs(a_shaped - a_raw)) > 0.1  # the penalty changes the advantages
  d = _defaults("qae")
  assert "overlong penalty" in d["reward the quantile is over"][1]
  assert "overlong_penalty(buffer_len=4096)" in d["reward the quantile is over"][0]
  assert ":18-21" in _fid("qae").read
  assert any("overlong" in x for x in _fid("qae").deviations)
  d = _defaults("delta_logp_reweight")
  assert "overlong penalty (buffer 4096" in d["reward / filter (not this term's)"][1]
  assert ":34-37" in _fid("delta_logp_reweight").read


# ----------------------------------------------------------------------------- entropic / temperature_control


def test_entropy_observed_untempered_vs_theirs_tempered():
  from rljax.sampling import sampling_step  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(31)
  z = rng.normal(size=(5, 13)) * 2
  keys = jax.random.split(jax.random.PRNGKey(0), 5)
  f32 = lambda x: jnp.full((5,), x, jnp.float32)  # noqa: E731
  _, _, _, ent = sampling_step(jnp.asarray(z, jnp.float32), keys, f32(0.6), jnp.zeros((5,), jnp.int32), f32(1.0),
                               f32(0.0))

  def h(zz):
    lp = _log_softmax(zz)
    return -(np.exp(lp) * lp).sum(-1)

  np.testing.assert_allclose(np.asarray(ent), h(z), rtol=1e-5)  # ours: untempered even when sampling at T = 0.6
  assert np.all(h(z / 0.6) < h(z))  # theirs: H(softmax(z/0.6)), lower
  d = _defaults("entropic")
  assert "rollout.temperature 0.6" in d["entropy's temperature"][1]
  assert "one per data-parallel rank" in d["controller state"][1]
  f = _fid("entropic")
  assert "accumulate_entropy_error" in f.read and "data-parallel rank" in f.placement


def test_temperature_control_e3_rule_fed_their_tempered_entropy():
  import rljax.control as C  # pylint: disable=import-outside-toplevel
  v, target, t0 = 151936, 0.6, 1.2
  rng = np.random.default_rng(37)
  z = rng.normal(size=(64, 50)) * 3

  def h(zz):
    lp = _log_softmax(zz)
    return float((-(np.exp(lp) * lp).sum(-1)).mean())

  def their_step(t, entropy):  # temperature_scheduler.py step (no annealing)
    factor = np.log(v) + np.log(np.log(v))
    return t * (1 + t * np.log(target / entropy) / factor)

  ctl = C.temperature_control(target, init_temperature=t0, rule="e3", vocab_size=v, t_min=0.1, t_max=5.0)
  st = ctl.init()
  h_theirs = h(z / t0)  # their update's entropy at the current T
  h_ours = h(z)  # ours: untempered
  t_fed_theirs = float(ctl.update(st, entropy=h_theirs).temperature)
  t_fed_ours = float(ctl.update(st, entropy=h_ours).temperature)
  np.testing.assert_allclose(t_fed_theirs, their_step(t0, h_theirs), rtol=1e-6)
  assert abs(t_fed_ours - t_fed_theirs) > 1e-3
  d = _defaults("temperature_control")
  assert "H(softmax(z/T))" in d["observed entropy's temperature"][1]
  assert "one TemperatureScheduler per" in d["scheduler state"][1]
  f = _fid("temperature_control")
  assert "fsdp_work.py:446-450" in f.read
  assert any("one scheduler per data-parallel worker" in x for x in f.deviations)


# ----------------------------------------------------------------------------- bapo


def test_bapo_records_minibatches_and_top_k():
  d = _defaults("bapo")
  assert "= 4 per epoch: 8 optimizer steps" in d["mini-batches (not this controller's)"][1]
  # per-row review h: the script's top_k=100 is never passed (tests/test_fidelity_row_review_h.py)
  assert "top_k -1 (off" in d["sampler"][1] and "top_k=100 at :43 is never passed" in d["sampler"][1]
  assert "run_bapo_example.sh:16-18" in _fid("bapo").read


def test_swept_rows_keep_the_four_question_form():
  for name in ("gpg", "gmpo", "segment_ratio", "pspo", "decoupled_ppo", "exgrpo_policy", "erc", "clip_cov", "kl_cov",
               "rpg", "gft", "alol", "delta_logp_reweight", "entropic", "bapo", "temperature_control", "qae"):
    f = _fid(name)
    assert f.read and f.defaults and f.placement and f.deviations, name
    assert "Error-class sweep (#51, s2a" in f.read, name
    assert math.isfinite(len(_text(name)))
