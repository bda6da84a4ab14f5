"""Issue #51 "read whole" pass, slice rA: each row's cited source read whole, the record errors fixed here.

Rows and errors (each test below fails on the old record, or on a wrong transcription of the cited lines):
  - tis, mis, icepop: the verl 0.9.1 PyPI wheel not read: its rollout_is_threshold 'L_U' string is
    IcePop (ratio inside [L, U], 0 outside; token or sequence; response_mask kept) = mis(L, U, level), a mode in
    none of the records; its rollout_rs has no ratio bounds (token_k1 'L_U' bounds the inverse ratio); tis's "verl
    rollout_is: no default" omitted the dataclass default 'sequence'. mis: OpenRLHF seq-mask-tis (cited as a source)
    is not one mis: geometric mask × token ratio.
  - token_mean, token_sum, seq_mean_token_sum, seq_mean_token_mean, seq_mean_token_sum_norm: verl 0.9.1 has no legacy
    worker (only the engine path with global counts); seq_mean_token_sum_norm's 0.9.1 deviation was wrong (the worker
    passes global_batch_size = all rows, as our B; T is the micro-batch's padded width when loss_scale_factor is null).
  - gspo: TRL's loss_type 'luspo' (a GSPO modification in the cited file) and 'vespo' not mentioned;
    luspo = gspo + seq_mean_token_sum. gspo_token: verl 0.9.1 no longer forces seq-mean-token-mean; the gspo scripts
    were not cited. sapo, cispo: TRL importance_sampling_level='sequence' for these loss types not mentioned.
  - cpgd: siiRL's advantage (adv_estimator cpgd, STD_weight = grpo(eps=1e-6, singleton='raw'), the modes
    clip_filter_like_weight / naive), the KL in three of the five scripts and the per-micro-batch token-mean missing.
  - entropy_bonus: TRL's bonus has its own normaliser (always the token mean); its adaptive mode (Skywork-OR1) is
    not built (the record said a controller can drive coef). kl_penalty, kl_in_reward: the '+' estimators raise in
    the cited verl v0.7.0 (they are 0.9.1's).
  - sft_nll: TRL's loss_type 'dft' not mentioned (= gft(tau=1.0)). dpo: TRL's use_weighting (WPO) and
    sync_ref_model (TR-DPO) not mentioned.
  - ppo_clip: TRL not read (its delta = dual_clip, no log-ratio clamp). reinforce: verl 0.9.1's IcePop preset.
  - adaptive_kl: credited TRL with target 6.0 (TRL 1.9.0 has no adaptive KL controller).
  - opd: slime's published runs (pure distillation: task reward 0) not in the record.
  - entropy_gated_contrastive: the launch scripts (KL_WEIGHT 0.2), the gate / advantage of prepare_training_data.py
    and the gate variants of gating.py not read.
Each numeric reference is a float64 NumPy transcription of the cited lines, written for these tests.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rljax
from rljax.catalog import describe

ROWS = {r.name: r for r in rljax.catalog()}


def _record(name):
  return describe(ROWS[name])


def _corr_inputs(seed, b=5, t=7, scale=0.6):
  from rljax.types import PolicyOutputs, TrainBatch  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(seed)
  mask = rng.random((b, t)) < 0.8
  mask[:, 0] = True
  old = -rng.random((b, t)) * 2
  roll = old + rng.normal(scale=scale, size=(b, t))
  batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask), advantages=jnp.zeros((b, t)),
                     group_id=jnp.arange(b, dtype=jnp.int32), logp_old=jnp.asarray(old),
                     logp_behavior=jnp.asarray(roll))
  return PolicyOutputs(logp=jnp.asarray(old), entropy=None), batch, old, roll, mask.astype(np.float64)


# ----------------------------------------------------------------------------------------------------------------
# verl 0.9.1 rollout_corr_helper.py:522-657 compute_rollout_correction_weights with rollout_is_threshold 'L_U'

def _verl091_icepop(log_ratio, mask, level, lower, upper):
  if level == "token":
    raw = np.exp(np.clip(log_ratio, -20.0, 20.0))
  else:
    s = (log_ratio * mask).sum(-1, keepdims=True)
    raw = np.broadcast_to(np.exp(np.clip(s, -20.0, 20.0)), log_ratio.shape)
  raw = raw * mask
  keep = (raw >= lower) & (raw <= upper)
  return np.where(keep, raw, 0.0)


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_mis_is_verl_091_icepop_threshold_string(level):
  from rljax.objectives import mis  # pylint: disable=import-outside-toplevel
  with jax.enable_x64(True):
    out, batch, old, roll, m = _corr_inputs(3)
    lower, upper = (0.5, 5.0) if level == "token" else (0.2, 3.0)
    w, keep, _ = mis(lower, upper, level=level)(out, batch)
    assert w.dtype == jnp.float64
    ours = np.asarray(w) * np.asarray(keep) * m
  theirs = _verl091_icepop(old - roll, m, level, lower, upper)
  assert 0 < (theirs == 0).sum() < m.sum()  # the band bites
  np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=0)


def test_correction_records_name_the_verl_091_modes():
  for row in ("tis", "mis", "icepop"):
    text = _record(row)
    assert "0.9.1" in text and "'L_U'" in text, row
  assert "dataclass default is 'sequence'" in _record("tis")
  assert "mis(1/U, 1/L" in _record("mis")
  assert "level='sequence'" in _record("icepop")


# ----------------------------------------------------------------------------------------------------------------
# verl 0.9.1 core_algos.py:1140-1206 agg_loss, called by its only worker (workers/utils/losses.py ppo_loss) with
# batch_num_tokens = the mini-batch's tokens, global_batch_size = all its rows, dp_size; each micro-batch's loss is
# backpropagated unscaled, so the mini-batch loss is the sum of the micro-batch losses (dp_size = 1 here).

def _verl091_agg(l, m, mode, batch_num_tokens, global_batch_size, loss_scale_factor=None, dp_size=1):
  if mode == "token-mean":
    return (l * m).sum() / batch_num_tokens * dp_size
  if mode == "token-sum":
    return (l * m).sum() * dp_size
  seq_mask = (m.sum(-1) > 0).astype(np.float64)
  if mode in ("seq-mean-token-sum", "seq-mean-token-sum-norm"):
    loss = ((l * m).sum(-1) * seq_mask).sum() / global_batch_size * dp_size
    if mode == "seq-mean-token-sum-norm":
      loss /= (m.shape[-1] if loss_scale_factor is None else loss_scale_factor)
    return loss
  seq = (l * m).sum(-1) / (m.sum(-1) + 1e-8)
  return (seq * seq_mask).sum() / global_batch_size * dp_size


def _micro_batches(seed, rows=8, t=9, empty_row=False):
  rng = np.random.default_rng(seed)
  loss = rng.normal(size=(rows, t))
  lens = rng.integers(1, t + 1, size=rows)
  if empty_row:
    lens[2] = 0
  mask = (np.arange(t)[None] < lens[:, None]).astype(np.float64)
  return loss, mask


@pytest.mark.parametrize("mode,ours_name", [("token-mean", "token_mean"), ("token-sum", "token_sum"),
                                            ("seq-mean-token-sum", "seq_mean_token_sum")])
def test_aggregations_equal_verl_091_engine_worker_over_micro_batches(mode, ours_name):
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  loss, mask = _micro_batches(5)
  theirs = sum(_verl091_agg(loss[i:i + 2], mask[i:i + 2], mode, mask.sum(), loss.shape[0]) for i in range(0, 8, 2))
  with jax.enable_x64(True):
    num, den = getattr(O, ours_name)(jnp.asarray(loss), jnp.asarray(mask))
    ours = float(num / den)
  np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_seq_mean_token_sum_norm_is_verl_091_with_empty_rows_and_a_fixed_scale():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  loss, mask = _micro_batches(6, empty_row=True)
  # the engine worker's micro-batch is padded to its longest response (to_padded_tensor): trim each to that width
  def trimmed(i, scale):
    l, m = loss[i:i + 2], mask[i:i + 2]
    w = max(int(m.sum(-1).max()), 1)
    return _verl091_agg(l[:, :w], m[:, :w], "seq-mean-token-sum-norm", mask.sum(), loss.shape[0], scale)
  with jax.enable_x64(True):
    num, den = O.seq_mean_token_sum_norm(max_len=9)(jnp.asarray(loss), jnp.asarray(mask))
    ours = float(num / den)
  np.testing.assert_allclose(ours, sum(trimmed(i, 9) for i in range(0, 8, 2)), rtol=1e-12)  # empty row counted
  assert abs(ours - sum(trimmed(i, None) for i in range(0, 8, 2))) > 1e-3  # null scale: per-micro-batch width


def test_aggregation_records_read_verl_091():
  for row in ("token_mean", "token_sum", "seq_mean_token_sum", "seq_mean_token_mean", "seq_mean_token_sum_norm"):
    text = _record(row)
    assert "no legacy worker at all" in text and "ppo_mini_batch_size × rollout.n" in text, row
  assert "the only worker of verl 0.9.1: there token-mean is ours" in _record("token_mean")
  assert "longest response of that micro-batch" in _record("seq_mean_token_sum_norm")
  assert "over the non-empty rows (global_batch_size)" not in _record("seq_mean_token_sum_norm")
  assert "on any number of devices and micro-batches" in _record("token_sum")


# ----------------------------------------------------------------------------------------------------------------
# TRL v1.9.0 grpo_trainer.py:3054-3091, 3143-3148: loss_type 'luspo' with importance_sampling_level 'sequence'

def _trl_luspo(new, old, adv, mask, eps_low, eps_high):
  log_w = ((new - old) * mask).sum(-1) / np.maximum(mask.sum(-1), 1.0)
  coef_1 = np.exp(log_w)[:, None]
  coef_2 = np.clip(coef_1, 1 - eps_low, 1 + eps_high)
  per_token_loss = -np.minimum(coef_1 * adv[:, None], coef_2 * adv[:, None])  # (B, 1)
  return (per_token_loss * mask.sum(1, keepdims=True)).mean()


def test_gspo_with_seq_mean_token_sum_is_trl_luspo():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  from rljax.types import PolicyOutputs, TrainBatch  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(11)
  b, t = 6, 8
  mask = (np.arange(t)[None] < rng.integers(1, t + 1, size=b)[:, None]).astype(np.float64)
  old = -rng.random((b, t)) * 2
  new = old + rng.normal(scale=1e-3, size=(b, t))
  adv = rng.normal(size=b)
  theirs = _trl_luspo(new, old, adv, mask, 3e-4, 4e-4)
  with jax.enable_x64(True):
    batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask > 0),
                       advantages=jnp.asarray(adv[:, None] * mask), group_id=jnp.arange(b, dtype=jnp.int32),
                       logp_old=jnp.asarray(old))
    out = PolicyOutputs(logp=jnp.asarray(new), entropy=None)
    loss, _ = O.chain(O.gspo(3e-4, 4e-4), aggregate=O.seq_mean_token_sum)(out, batch)
    assert loss.dtype == jnp.float64
  np.testing.assert_allclose(float(loss), theirs, rtol=1e-10)
  ratio_dev = np.abs(np.exp(((new - old) * mask).sum(-1) / mask.sum(-1)) - 1)
  assert (ratio_dev > 4e-4).any() and (ratio_dev < 3e-4).any()  # some rows clipped, some not


def test_ratio_records_name_the_variants_read_whole():
  assert "'luspo'" in _record("gspo") and "aggregate=seq_mean_token_sum" in _record("gspo")
  assert "'vespo'" in _record("gspo")
  text = _record("gspo_token")
  assert "0.9.1" in text and "test_gspo_3b_math.sh" in text and "verl 0.9.1 uses loss_agg_mode" in text
  assert "importance_sampling_level='sequence' with loss_type 'sapo'" in _record("sapo")


# ----------------------------------------------------------------------------------------------------------------
# siiRL@af00a771 siirl/dag_worker/core_algos.py:461-515 compute_cpgd_outcome_advantage (the scripts' 'STD_weight')

def _siirl_cpgd_std_weight(scores, index, eps=1e-6):
  out = np.empty_like(scores)
  for g in np.unique(index):
    rows = np.where(index == g)[0]
    mean, std = (0.0, 1.0) if rows.size == 1 else (scores[rows].mean(), scores[rows].std(ddof=1))
    out[rows] = (scores[rows] - mean) / (std + eps)
  return out


def test_cpgd_std_weight_advantage_is_grpo_with_raw_singletons():
  import rljax.advantages as A  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(2)
  gid = np.array([0, 0, 0, 1, 2, 2, 2, 2, 3, 3], np.int32)  # group 1 is a singleton
  r = rng.normal(size=gid.size)
  with jax.enable_x64(True):
    ours = np.asarray(A.grpo(jnp.asarray(r), jnp.asarray(gid), eps=1e-6, singleton="raw")[0])
  np.testing.assert_allclose(ours, _siirl_cpgd_std_weight(r, gid), rtol=1e-12)
  text = _record("cpgd")
  assert "weight_factor_in_cpgd" in text and "clip_filter_like_weight" in text and "'naive'" in text
  assert "kl_loss_coef 0.01" in text and "singleton='raw'" in text and "1/gradient_accumulation" in text


def test_entropy_bonus_record_read_whole():
  text = _record("entropy_bonus")
  assert "a controller can drive coef" not in text  # no rljax controller drives it
  assert "use_adaptive_entropy (Skywork-OR1" in text and "entropy_target 0.2" in text
  assert "whatever loss_type" in text and "0.9.1" in text


# ----------------------------------------------------------------------------------------------------------------
# verl 0.9.1 core_algos.py:2188-2251 kl_penalty: '+' stripped for the value, k2's gradient (v0.7.0 raises on '+')

def test_kl_plus_estimators_are_verl_091_and_recorded():
  from rljax.objectives import kl_estimate  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(4)
  logp, ref = -rng.random(7) * 3, -rng.random(7) * 3
  kl = ref - logp
  k3 = np.clip(np.exp(np.clip(kl, -20, 20)) - np.clip(kl, -20, 20) - 1, -10, 10)
  with jax.enable_x64(True):
    value = np.asarray(kl_estimate(jnp.asarray(logp), jnp.asarray(ref), "k3+"))
    grad = np.asarray(jax.grad(lambda x: kl_estimate(x, jnp.asarray(ref), "k3+").sum())(jnp.asarray(logp)))
  np.testing.assert_allclose(value, k3, rtol=1e-12)
  np.testing.assert_allclose(grad, logp - ref, rtol=1e-12)  # d/dlogp of 0.5 (logp - ref)^2
  assert "raises NotImplementedError" in _record("kl_penalty")
  assert "raises NotImplementedError" in _record("kl_in_reward") and "0.9.1" in _record("kl_in_reward")


# ----------------------------------------------------------------------------------------------------------------
# TRL v1.9.0 sft_trainer.py:773-787 dft_loss (loss_type='dft'): −sg(p)·log p summed over valid tokens ÷ their count

def test_trl_sft_dft_mode_is_gft_tau_1():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  from rljax.types import PolicyOutputs, TrainBatch  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(8)
  b, t = 3, 6
  logp = -rng.random((b, t)) * 4
  mask = rng.random((b, t)) < 0.7
  mask[:, 0] = True
  theirs = (-np.exp(logp) * logp * mask).sum() / mask.sum()
  with jax.enable_x64(True):
    batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask),
                       advantages=jnp.zeros((b, t)), group_id=jnp.arange(b, dtype=jnp.int32))
    loss, _ = O.chain(O.gft(1.0))(PolicyOutputs(logp=jnp.asarray(logp), entropy=None), batch)
  np.testing.assert_allclose(float(loss), theirs, rtol=1e-12)
  assert "gft(tau=1.0)" in _record("sft_nll") and "'dft'" in _record("sft_nll")


def test_dpo_record_names_trl_weighting_and_ref_sync():
  text = _record("dpo")
  assert "use_weighting (WPO" in text and "sync_ref_model (TR-DPO" in text


# ----------------------------------------------------------------------------------------------------------------
# OpenRLHF@3c3be623 (v0.11.0) openrlhf/models/loss.py:209-216 seq-mask-tis

def test_openrlhf_seq_mask_tis_is_geometric_mis_times_token_tis():
  from rljax.objectives import mis, tis  # pylint: disable=import-outside-toplevel
  with jax.enable_x64(True):
    out, batch, old, roll, m = _corr_inputs(9, b=8, scale=1.2)
    w1, k1, _ = mis(0.8, 1.25, level="geometric", reweight=False)(out, batch)
    w2, k2, _ = tis(threshold=1e30)(out, batch)
    ours = np.asarray(w1 * k1 * w2 * k2) * m
  log_r = old - roll
  seq = np.exp((log_r * m).sum(-1) / m.sum(-1))
  seq_mask = (seq >= 0.8) & (seq <= 1.25)
  theirs = seq_mask[:, None] * np.exp(log_r) * m
  assert 0 < seq_mask.sum() < seq_mask.size  # the band bites
  np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=0)
  assert "seq-mask-tis" in _record("mis") and "tis(threshold=1e30)" in _record("mis")


# ----------------------------------------------------------------------------------------------------------------
# TRL v1.9.0 grpo_trainer.py:3083-3091: two-sided clip with delta; verl v0.7.0 / 0.9.1 vanilla dual clip

@pytest.mark.parametrize("delta", [1.5, 3.0])
def test_ppo_clip_dual_clip_equals_trl_delta(delta):
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  from rljax.types import PolicyOutputs, TrainBatch  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(12)
  b, t = 6, 9
  old = -rng.random((b, t)) * 2
  new = old + rng.normal(scale=0.9, size=(b, t))
  adv = rng.normal(size=(b, t))
  mask = np.ones((b, t), bool)
  eps_low, eps_high = 0.2, 0.28
  coef_1 = np.exp(new - old)
  coef_2 = np.clip(coef_1, 1 - eps_low, 1 + eps_high)
  theirs = -np.minimum(np.minimum(coef_1, delta) * adv, coef_2 * adv)
  with jax.enable_x64(True):
    batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask), advantages=jnp.asarray(adv),
                       group_id=jnp.arange(b, dtype=jnp.int32), logp_old=jnp.asarray(old))
    ours, _ = O.ppo_clip(eps_low, eps_high, dual_clip=delta)(PolicyOutputs(logp=jnp.asarray(new), entropy=None), batch)
  assert ((coef_1 > delta) & (adv < 0)).any() and ((coef_1 > delta) & (adv > 0)).any()
  np.testing.assert_allclose(np.asarray(ours), theirs, rtol=1e-12, atol=1e-15)
  text = _record("ppo_clip")
  assert "TRL not re-read" not in text and "TRL's delta" in text and "TRL none" in text


def test_reinforce_record_names_verl_091_presets():
  text = _record("reinforce")
  assert "bypass_pg_token_icepop" in text and "correction=icepop(0.5, 5.0)" in text and "0.9.1" in text


def test_adaptive_kl_record_does_not_credit_trl_190():
  text = _record("adaptive_kl")
  assert "Ziegler et al. / TRL)" not in text and "Ziegler et al.'s and TRL's)" not in text
  assert "TRL 1.9.0 no longer has" in text and "no adaptive KL controller" in text


def test_cispo_record_names_trl_sequence_level():
  text = _record("cispo")
  assert "importance_sampling_level='sequence' with loss_type 'cispo'" in text and "0.9.1" in text


def test_opd_record_names_the_pure_distillation_runs():
  text = _record("opd")
  assert "post_process_rewards" in text and "run-qwen3-8B-opd.sh" in text and "0.0 for every sample" in text


def test_entropy_gated_contrastive_record_read_the_launch_scripts():
  text = _record("entropy_gated_contrastive")
  assert "KL_WEIGHT 0.2" in text and "prepare_training_data.py" in text and "gating.py" in text
  assert "τ_pos / τ_neg" in text and "entropy_quantile" in text and "pstdev" in text
