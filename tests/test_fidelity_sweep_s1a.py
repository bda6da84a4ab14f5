"""Issue #51, error-class sweep s1a: what surrounds the cited function, for 21 rows.

Rows: ppo_clip reinforce gspo gspo_token cispo sapo cpgd tis mis icepop divergence_rejection entropy_bonus
top_entropy_mask kl_penalty kl_in_reward sft_nll opd dpo entropy_gated_contrastive value_loss.

The three classes swept (the tenth draw's errors were all of them):

(a) the log-probs convention: every peer computes its log-probs (old, current, reference) and entropies from the
    logits ÷ the rollout temperature (verl v0.7.0 dp_actor.py:213, 298 / 0.9.1 transformer_impl.py:98-103; TRL
    grpo_trainer.py:1517-1519; siiRL dp_actor.py:176, 254; slime loss.py:540-543) and its rollout log-probs are
    vLLM's processed_logprobs (tempered, top-k / top-p truncated, renormalised; verl rollout.yaml logprobs_mode, TRL
    vllm_generation.py:365); the RL loop's are untempered and untruncated. Equal at T = 1, top_p = 1, top_k off (every
    peer's default), unequal otherwise: now a default and a deviation in each row it touches.
(b) the micro-batch denominator: chain divides every micro-batch by the step batch's denominator (make_train_step).
    That is verl 0.9.1's global counts, TRL's dapo / cispo / vespo, TRL SFT's num_items_in_batch, OpenRLHF v0.11.0's
    per-step counts; verl v0.7.0's default legacy dp_actor / dp_critic, TRL's bnpo, TRL's PPO and TRL's DPO take each
    micro-batch's own mean ÷ the number of micro-batches. Rows fixed: ppo_clip, reinforce, cispo, kl_penalty,
    value_loss, sft_nll (the record called ours per micro-batch), dpo, opd (slime averages per sample), gspo / sapo /
    gspo_token (the seq-mean equalities hold only with no empty row), entropy_gated_contrastive.
(c) the default path: verl 0.9.1's default v1 trainer (use_v1 true) never calls apply_bypass_mode, so the bypass_*
    presets (loss_type 'reinforce', IcePop REINFORCE, bypass rejection) do not reach the actor there (reinforce, tis,
    mis, icepop, divergence_rejection); TRL's vLLM IS correction runs only with use_vllm (default False: tis, mis);
    OpenRLHF's icepop needs is_correction_enable and is_correction_type (defaults False, 'tis'); verl v0.7.0 /
    b178a3cd need rollout.calculate_log_probs True for any rollout correction; kl_in_reward's v1 path.

No implementation bug found. Each numeric reference is a float64 NumPy transcription of the cited lines, written for
these tests (not copied from the sources).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rljax import objectives as O
from rljax.catalog import describe
from rljax.types import PolicyOutputs, TrainBatch
from _fidelity import any_deviation as _any_dev
from _fidelity import (ROWS, defaults as _defaults, fid as _fid, log_softmax as _log_softmax,
                       vllm_top_p as _vllm_top_p)


SWEPT = ("ppo_clip reinforce gspo gspo_token cispo sapo cpgd tis mis icepop divergence_rejection entropy_bonus "
         "top_entropy_mask kl_penalty kl_in_reward sft_nll opd dpo entropy_gated_contrastive value_loss").split()



def _pick(logp, y):
  return np.take_along_axis(logp, y[..., None], -1)[..., 0]


def _entropy(z):
  lp = _log_softmax(z)
  return -(np.exp(lp) * lp).sum(-1)


def _batch(mask, *, adv=None, logp_old=None, logp_behavior=None, logp_ref=None, rewards=None, values_old=None,
           returns=None, extras=None):
  b, t = mask.shape
  f = lambda x: None if x is None else jnp.asarray(x, jnp.float64)  # noqa: E731
  return TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask),
                    advantages=f(np.zeros((b, t)) if adv is None else adv), group_id=jnp.arange(b, dtype=jnp.int32),
                    logp_old=f(logp_old), logp_behavior=f(logp_behavior), logp_ref=f(logp_ref), rewards=f(rewards),
                    values_old=f(values_old), returns=f(returns),
                    extras={k: jnp.asarray(v) for k, v in (extras or {}).items()})


def _sl(x, s):
  return None if x is None else x[s]


def _ours_microbatched(obj, mbs, mask, logp, **fields):
  """Σ over micro-batches of chain(...)(mb, denominator = the whole batch's): make_train_step's accumulation."""
  out_kw = {k: fields.pop(k) for k in ("entropy", "values") if k in fields}
  with jax.enable_x64(True):
    whole = _batch(mask, **fields)
    denom = float(obj.denominator(whole))
    total = 0.0
    for s in mbs:
      sub = {k: (v if k == "extras" else _sl(v, s)) for k, v in fields.items()}
      if "extras" in sub:
        sub["extras"] = {k: v[s] for k, v in sub["extras"].items()}
      out = PolicyOutputs(logp=jnp.asarray(logp[s]), **{k: jnp.asarray(v[s]) for k, v in out_kw.items()})
      total += float(obj(out, _batch(mask[s], **sub), denominator=denom)[0])
  return total


def _unequal_mask():
  """Two micro-batches of two rows: 15 loss tokens, then 3."""
  mask = np.zeros((4, 8), bool)
  mask[0, :8] = mask[1, :7] = True
  mask[2, :2] = mask[3, :1] = True
  return mask, (slice(0, 2), slice(2, 4))


def _token_mean_mb(per_tok, mask, mbs):
  """verl v0.7.0 legacy dp_actor / TRL bnpo: Σ_mb (micro-batch token mean) / #micro-batches."""
  return sum((per_tok[s] * mask[s]).sum() / mask[s].sum() for s in mbs) / len(mbs)


def _token_mean_global(per_tok, mask):
  """verl 0.9.1 (global batch_num_tokens), TRL dapo / cispo (num_items_in_batch), OpenRLHF v0.11.0."""
  return (per_tok * mask).sum() / mask.sum()


# ----------------------------------------------------------------------------------------------------------- (a)


def _verl_vanilla(logp, old, adv, eps=0.2, c=3.0):
  """verl compute_policy_loss_vanilla per token (before agg_loss): log r clamped ±20, PPO clip, dual clip c."""
  ratio = np.exp(np.clip(logp - old, -20.0, 20.0))
  l1, l2 = -adv * ratio, -adv * np.clip(ratio, 1 - eps, 1 + eps)
  clip1 = np.maximum(l1, l2)
  return np.where(adv < 0, np.minimum(-adv * c, clip1), clip1)


def _case(seed=0, b=4, t=8, v=6):
  rng = np.random.default_rng(seed)
  z_new = rng.normal(size=(b, t, v)) * 1.5
  z_old = z_new + rng.normal(size=(b, t, v)) * 0.3
  z_inf = z_old + rng.normal(size=(b, t, v)) * 0.6
  y = rng.integers(0, v, size=(b, t))
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  return z_new, z_old, z_inf, y, adv


def test_ppo_clip_equals_verl_vanilla_at_temperature_one_only():
  z_new, z_old, _, y, adv = _case(1)
  mask = np.ones(y.shape, bool)
  logp, old = _pick(_log_softmax(z_new), y), _pick(_log_softmax(z_old), y)
  with jax.enable_x64(True):
    ours = np.asarray(O.ppo_clip(0.2, dual_clip=3.0)(PolicyOutputs(logp=jnp.asarray(logp)),
                                                      _batch(mask, adv=adv, logp_old=old))[0])
  np.testing.assert_allclose(ours, _verl_vanilla(logp, old, adv), rtol=1e-12, atol=1e-12)  # T = 1
  for temp in (0.6, 1.4):  # verl feeds the same loss log softmax(z / T)
    theirs = _verl_vanilla(_pick(_log_softmax(z_new / temp), y), _pick(_log_softmax(z_old / temp), y), adv)
    assert not np.allclose(ours, theirs, atol=1e-6), temp
  d = _defaults("ppo_clip")
  assert "untempered" in d["temperature in the log-probs"][0]
  assert "rollout.temperature (default 1.0)" in d["temperature in the log-probs"][1]
  assert "TRL temperature (default 1.0)" in d["temperature in the log-probs"][1]
  assert _any_dev("ppo_clip", "untempered", "T = 1")
  assert "grpo_trainer.py:1517-1519" in _fid("ppo_clip").read and "transformer_impl.py:98-103" in _fid("ppo_clip").read


def test_ppo_clip_denominator_is_verl_091_and_trl_dapo_not_verl_070():
  z_new, z_old, _, y, adv = _case(2)
  mask, mbs = _unequal_mask()
  adv[2:] += 1.5  # the short micro-batch carries different losses
  logp, old = _pick(_log_softmax(z_new), y), _pick(_log_softmax(z_old), y)
  obj = O.chain(O.ppo_clip(0.2, dual_clip=3.0))
  ours = _ours_microbatched(obj, mbs, mask, logp, adv=adv, logp_old=old)
  per_tok = _verl_vanilla(logp, old, adv)
  np.testing.assert_allclose(ours, _token_mean_global(per_tok, mask), rtol=1e-12)  # verl 0.9.1, TRL dapo
  assert abs(ours - _token_mean_mb(per_tok, mask, mbs)) > 1e-3                     # verl v0.7.0 legacy dp_actor
  d = _defaults("ppo_clip")
  assert "step batch" in d["micro-batch denominator"][0]
  assert "verl v0.7.0 (legacy dp_actor" in d["micro-batch denominator"][1]
  assert "bnpo each micro-batch's token mean" in d["micro-batch denominator"][1]
  assert _any_dev("ppo_clip", "micro-batch denominator", "verl v0.7.0's default legacy dp_actor", "same number")
  assert "dp_actor.py:444-467" in _fid("ppo_clip").read and "losses.py:57-67" in _fid("ppo_clip").read


def test_reinforce_w_against_processed_logprobs_and_the_v1_bypass_path():
  z_new, _, z_inf, y, adv = _case(3)
  mask = np.ones(y.shape, bool)
  logp = _pick(_log_softmax(z_new), y)
  with jax.enable_x64(True):
    ours = np.asarray(O.reinforce(max_weight=2.0)(PolicyOutputs(logp=jnp.asarray(logp)),
                                                  _batch(mask, adv=adv, logp_behavior=_pick(_log_softmax(z_inf), y)))[0])

  def verl(temp, top_p):
    """compute_policy_loss_reinforce in bypass mode: w = min(exp(log π_T − rollout), 2.0), −A·w·log π_T."""
    lp = _pick(_log_softmax(z_new / temp), y)
    roll = _pick(_log_softmax(_vllm_top_p(z_inf / temp, top_p)), y)
    w = np.minimum(np.exp(np.clip(lp - roll, -20, 20)), 2.0)
    return -adv * w * lp

  np.testing.assert_allclose(ours, verl(1.0, 1.0), rtol=1e-12, atol=1e-12)
  for temp, top_p in ((0.7, 1.0), (1.0, 0.8)):
    assert not np.allclose(ours, verl(temp, top_p), atol=1e-6), (temp, top_p)
  d = _defaults("reinforce")
  assert "processed_logprobs" in d["top-p / top-k in the rollout log-probs"][1]
  assert "default v1 trainer" in d["verl 0.9.1 trainer running the bypass_* presets"][1]
  assert _any_dev("reinforce", "v1 trainer", "bypass_mode", "legacy trainer")
  f = _fid("reinforce")
  assert "trainer_base.py:1634-1647" in f.read and "rollout_corr_helper.py:1109-1145" in f.read
  assert "ray_trainer.py:1575-1583" in f.read and "workers/config/actor.py:94-101" in f.read
  assert "which verl 0.9.1's default v1 trainer never calls" in f.placement


# ----------------------------------------------------------------------------------------------------------- (b)


def _seq_means(per_tok, mask):
  cnt = mask.sum(1)
  return (per_tok * mask).sum(1) / np.maximum(cnt, 1), cnt > 0


def _trl_grpo_mb(per_tok, mask, mbs):
  """TRL loss_type grpo / sapo: each micro-batch's mean of row means (clamp(min=1): an empty row counts 0), ÷ GA."""
  return sum(_seq_means(per_tok[s], mask[s])[0].mean() for s in mbs) / len(mbs)


def _verl070_seq_mean_mb(per_tok, mask, mbs):
  """verl v0.7.0 agg_loss seq-mean-token-mean without global counts: ÷ the micro-batch's non-empty rows, × 1/GA."""
  total = 0.0
  for s in mbs:
    means, has = _seq_means(per_tok[s], mask[s])
    total += (means * has).sum() / has.sum()
  return total / len(mbs)


def _trl_sapo(logp, old, adv, tau_pos=1.0, tau_neg=1.05):
  r = np.exp(logp - old)
  tau = np.where(adv > 0, tau_pos, tau_neg)
  return -(1 / (1 + np.exp(-tau * (r - 1)))) * 4 / tau * adv


@pytest.mark.parametrize("row", ["sapo", "gspo_token"])
def test_seq_mean_equalities_hold_only_without_empty_rows(row):
  z_new, z_old, _, y, adv = _case(4)
  mask, mbs = _unequal_mask()
  logp, old = _pick(_log_softmax(z_new), y), _pick(_log_softmax(z_old), y)
  term = O.sapo() if row == "sapo" else O.gspo_token(0.2, 0.2)
  obj = O.chain(term, aggregate="seq_mean_token_mean")
  with jax.enable_x64(True):
    per_tok = np.asarray(term(PolicyOutputs(logp=jnp.asarray(logp)), _batch(mask, adv=adv, logp_old=old))[0])
  if row == "sapo":
    np.testing.assert_allclose(per_tok[mask], _trl_sapo(logp, old, adv)[mask], rtol=1e-12)
  ours = _ours_microbatched(obj, mbs, mask, logp, adv=adv, logp_old=old)
  np.testing.assert_allclose(ours, _trl_grpo_mb(per_tok, mask, mbs), rtol=1e-12)        # no empty row: equal
  np.testing.assert_allclose(ours, _verl070_seq_mean_mb(per_tok, mask, mbs), rtol=1e-12)
  mask2 = mask.copy()
  mask2[3] = False  # an empty row in the second micro-batch
  ours2 = _ours_microbatched(obj, mbs, mask2, logp, adv=adv, logp_old=old)
  assert abs(ours2 - _trl_grpo_mb(per_tok, mask2, mbs)) > 1e-3
  assert abs(ours2 - _verl070_seq_mean_mb(per_tok, mask2, mbs)) > 1e-3
  assert _any_dev(row, "seq_mean_token_mean", "no row is empty")
  assert "step batch" in _defaults(row)["micro-batch denominator"][0]


def test_gspo_records_trl_grpo_condition_and_its_temperature():
  assert _any_dev("gspo", "loss_type='grpo'", "empty rows as 0", "no row is empty")
  assert _any_dev("gspo", "for any micro-batching")
  d = _defaults("gspo")
  assert d["importance_sampling_level"][1].startswith("'token'")
  assert "TRL temperature" in d["temperature in the log-probs"][1]
  assert "grpo_config.py:750" in _fid("gspo").read


def _trl_cispo(logp, old, adv, cap=5.0):
  return -np.minimum(np.exp(logp - old), cap) * adv * logp


def test_cispo_denominator_equals_trl_cispo_and_verl_091_not_verl_070():
  z_new, z_old, _, y, adv = _case(5)
  mask, mbs = _unequal_mask()
  adv[2:] -= 2.0
  logp, old = _pick(_log_softmax(z_new), y), _pick(_log_softmax(z_old), y)
  ours = _ours_microbatched(O.chain(O.cispo()), mbs, mask, logp, adv=adv, logp_old=old)
  per_tok = _trl_cispo(logp, old, adv)  # TRL epsilon_high=5 is our eps_high=4
  np.testing.assert_allclose(ours, _token_mean_global(per_tok, mask), rtol=1e-12)
  assert abs(ours - _token_mean_mb(per_tok, mask, mbs)) > 1e-3
  assert _any_dev("cispo", "TRL's cispo (num_items_in_batch)", "verl v0.7.0's default legacy dp_actor")
  assert "untempered" in _defaults("cispo")["temperature in the log-probs"][0]


def test_cpgd_records_siirl_temperature():
  d = _defaults("cpgd")
  assert "rollout.temperature" in d["temperature in the log-probs"][1]
  assert "dp_actor.py:176, 254" in _fid("cpgd").read and "model_args.py:442-444" in _fid("cpgd").read
  assert _any_dev("cpgd", "untempered", "siiRL")


def _verl_low_var_kl(logp, ref):
  kl = np.clip(ref - logp, -20, 20)
  return np.clip(np.exp(kl) - kl - 1, -10, 10)


def test_kl_penalty_separate_agg_in_verl_070_is_per_micro_batch():
  z_new, _, z_ref, y, _ = _case(6)
  mask, mbs = _unequal_mask()
  logp, ref = _pick(_log_softmax(z_new), y), _pick(_log_softmax(z_ref * 1.5), y)
  ours = _ours_microbatched(O.chain(O.kl_penalty(1.0)), mbs, mask, logp, logp_ref=ref)
  kld = _verl_low_var_kl(logp, ref)
  np.testing.assert_allclose(ours, _token_mean_global(kld, mask), rtol=1e-10)  # verl 0.9.1 losses.py:132-142
  assert abs(ours - _token_mean_mb(kld, mask, mbs)) > 1e-3                     # verl v0.7.0 dp_actor.py:527-536
  temp = 0.7
  kld_t = _verl_low_var_kl(_pick(_log_softmax(z_new / temp), y), _pick(_log_softmax(z_ref * 1.5 / temp), y))
  assert abs(_token_mean_global(kld_t, mask) - ours) > 1e-3
  assert _any_dev("kl_penalty", "verl v0.7.0's default legacy dp_actor", "same number of loss tokens")
  assert _any_dev("kl_penalty", "log π_ref are at T")


def test_kl_in_reward_v1_path_temperature_and_bypass():
  f = _fid("kl_in_reward")
  assert "trainer_base.py:64" in f.read and ":1743-1760" in f.read
  assert "rollout.temperature" in _defaults("kl_in_reward")["temperature in the log-probs"][1]
  assert _any_dev("kl_in_reward", "bypass mode", "processed_logprobs")


def test_sft_nll_denominator_is_trl_num_items_in_batch_for_any_micro_batching():
  rng = np.random.default_rng(7)
  mask, mbs = _unequal_mask()
  logp = -rng.uniform(0.1, 3.0, mask.shape)
  logp[2:] -= 2.0
  ours = _ours_microbatched(O.chain(O.sft_nll()), mbs, mask, logp)
  # TRL: each micro-batch Σ(−log p) / num_items_in_batch (the window's valid tokens over all processes)
  theirs = sum((-logp[s] * mask[s]).sum() / mask.sum() for s in mbs)
  np.testing.assert_allclose(ours, theirs, rtol=1e-12)
  d = _defaults("sft_nll")
  assert "step batch" in d["aggregation"][0] and "micro-batch's" not in d["aggregation"][0]
  assert "average_tokens_across_devices" in d["aggregation"][1]
  assert _any_dev("sft_nll", "equal for any micro-batching")
  assert "trainer.py:2343-2395" in _fid("sft_nll").read


def test_opd_aggregation_is_slimes_per_sample_mean():
  rng = np.random.default_rng(8)
  mask, mbs = _unequal_mask()
  logp = -rng.uniform(0.1, 2.0, mask.shape)
  teacher = logp - rng.uniform(-0.5, 1.5, mask.shape)
  extras = {"logp_teacher": teacher}
  # slime on-policy: per-token −A'·ratio with A' = −c·(log π − log π_T), ratio 1; Σ sample means / global batch size
  kl = logp - teacher
  theirs = (((kl * mask).sum(1) / mask.sum(1)).sum()) / mask.shape[0]
  seq = _ours_microbatched(O.chain(O.opd(1.0), aggregate="seq_mean_token_mean"), mbs, mask, logp, logp_old=logp,
                           extras=extras)
  tok = _ours_microbatched(O.chain(O.opd(1.0)), mbs, mask, logp, logp_old=logp, extras=extras)
  np.testing.assert_allclose(seq, theirs, rtol=1e-12)
  assert abs(tok - theirs) > 1e-3
  assert "each sample's token mean" in _defaults("opd")["aggregation"][1]
  assert _any_dev("opd", "chain(aggregate=seq_mean_token_mean) gives slime's")
  assert "loss.py:1317-1360" in _fid("opd").read and "cp_utils.py:47-80" in _fid("opd").read


def _dpo_pair_loss(logp, ref, mask, w, l, beta=0.1):
  h = ((logp - ref) * mask).sum(1)
  return np.logaddexp(0.0, -beta * (h[w] - h[l]))  # −log σ(β Δ)


def test_dpo_pair_mean_equals_trl_only_with_equal_pairs_per_micro_batch():
  rng = np.random.default_rng(9)
  b, t = 6, 5
  mask = rng.random((b, t)) < 0.8
  mask[:, 0] = True
  logp, ref = -rng.uniform(0.1, 3, (b, t)), -rng.uniform(0.1, 3, (b, t))
  pair = np.array([0, 0, 1, 1, 2, 2])
  chosen = np.array([1, 0, 0, 1, 1, 0], bool)
  extras = {"dpo_pair_id": pair, "dpo_chosen": chosen}
  obj = O.chain(O.dpo(0.1), aggregate="seq_mean_token_mean")
  losses = [_dpo_pair_loss(logp, ref, mask, *((2 * k, 2 * k + 1) if chosen[2 * k] else (2 * k + 1, 2 * k)))
            for k in range(3)]
  # micro-batches of 1 pair, then 2 pairs: TRL (L1 + (L2 + L3)/2)/2; ours the mean over the three pairs
  mbs = (slice(0, 2), slice(2, 6))
  ours = _ours_microbatched(obj, mbs, mask, logp, logp_ref=ref, extras=extras)
  np.testing.assert_allclose(ours, np.mean(losses), rtol=1e-10)
  assert abs(ours - (losses[0] + (losses[1] + losses[2]) / 2) / 2) > 1e-4
  assert _any_dev("dpo", "micro-batch denominator", "same number of pairs")


def test_entropy_gated_contrastive_is_theirs_times_the_gated_share():
  rng = np.random.default_rng(10)
  mask, mbs = _unequal_mask()
  logp = -rng.uniform(0.1, 3, mask.shape)
  ent = rng.uniform(0.0, 0.5, mask.shape)
  gated = np.zeros(mask.shape, bool)
  gated[0, 2] = gated[1, 5] = gated[2, 1] = gated[3, 0] = True  # two gated tokens per micro-batch
  ent[gated] = 2.0
  rewards = np.array([1.0, 0.0, 1.0, 0.0])
  c = np.where(rewards > 0.5, 1.0, -1.0)[:, None]
  ours = _ours_microbatched(O.chain(O.entropy_gated_contrastive(tau=1.0)), mbs, mask, logp, rewards=rewards,
                            extras={"entropy_base": ent})
  # train_reasonmaxxer.py 'adv_ce' with |A| = 1: Σ_gated CE·A / gated count per micro-batch, ÷ grad_accum_steps
  theirs = sum(((-logp * c)[s] * gated[s]).sum() / gated[s].sum() for s in mbs) / len(mbs)
  np.testing.assert_allclose(ours, theirs * gated.sum() / mask.sum(), rtol=1e-12)
  assert "÷ grad_accum_steps" in _defaults("entropy_gated_contrastive")["aggregation"][1]
  assert _any_dev("entropy_gated_contrastive", "gated ÷ loss tokens")


def _verl_value_loss(v, v_old, ret, eps=0.5):
  vc = np.clip(v, v_old - eps, v_old + eps)
  return 0.5 * np.maximum((v - ret) ** 2, (vc - ret) ** 2)


def test_value_loss_denominator_is_openrlhf_and_verl_091_not_verl_070():
  rng = np.random.default_rng(11)
  mask, mbs = _unequal_mask()
  v, v_old, ret = rng.normal(size=(3,) + mask.shape)
  ret[2:] += 2.0
  ours = _ours_microbatched(O.chain(O.value_loss(clip_eps=0.5)), mbs, mask, np.zeros(mask.shape), values=v,
                            values_old=v_old, returns=ret)
  per_tok = _verl_value_loss(v, v_old, ret)
  np.testing.assert_allclose(ours, _token_mean_global(per_tok, mask), rtol=1e-12)
  assert abs(ours - _token_mean_mb(per_tok, mask, mbs)) > 1e-3
  assert "verl v0.7.0 (legacy dp_critic" in _defaults("value_loss")["micro-batch denominator"][1]
  assert _any_dev("value_loss", "OpenRLHF v0.11.0", "legacy dp_critic")
  assert "dp_critic.py:210-245" in _fid("value_loss").read


# ----------------------------------------------------------------------------------------------------------- (a) rollout


def _trl_token_truncate(old, sampling, cap=3.0):
  return np.minimum(np.exp(old - sampling), cap)


def test_tis_k_is_trls_only_untempered_and_untruncated():
  z_new, _, z_inf, y, _ = _case(12)
  mask = np.ones(y.shape, bool)
  old, beh = _pick(_log_softmax(z_new), y), _pick(_log_softmax(z_inf), y)
  with jax.enable_x64(True):  # the correction's weight (tis returns (w, keep, metrics))
    w = np.asarray(O.tis(3.0)(PolicyOutputs(logp=jnp.asarray(old)), _batch(mask, logp_old=old, logp_behavior=beh))[0])
  np.testing.assert_allclose(w, _trl_token_truncate(old, beh), rtol=1e-12)
  for temp, top_p in ((0.7, 1.0), (1.0, 0.8)):
    theirs = _trl_token_truncate(_pick(_log_softmax(z_new / temp), y),
                                 _pick(_log_softmax(_vllm_top_p(z_inf / temp, top_p)), y))
    assert not np.allclose(w, theirs, atol=1e-6)
  for row in ("tis", "mis", "divergence_rejection"):
    d = _defaults(row)
    assert "processed_logprobs" in d["top-p / top-k in the rollout log-probs"][1], row
    assert _any_dev(row, "processed_logprobs", "T = 1"), row
    assert _any_dev(row, "v1 trainer", "legacy trainer"), row
  for row in ("tis", "mis"):
    assert "use_vllm=True" in _defaults(row)["trainer reaching it"][1]
    assert _any_dev(row, "use_vllm=True", "applies none")
    assert "use_vllm=True" in _fid(row).placement and "legacy trainer only" in _fid(row).placement
  assert "calculate_log_probs True" in _defaults("divergence_rejection")["trainer reaching it"][1]
  assert ":206 (calculate_log_probs False)" in _fid("divergence_rejection").read


def test_mis_sequence_mask_flips_under_top_p():
  """TRL sequence_mask keeps a row iff exp(Σ_t (old − sampling)) ≤ clip_max; the nucleus renormalisation raises
  the sampling log-probs, so rows near the bound flip."""
  z_new, _, z_inf, y, _ = _case(13, b=64, t=6, v=5)
  y = np.argmax(z_inf, -1)  # inside any nucleus
  old, beh = _pick(_log_softmax(z_new), y), _pick(_log_softmax(z_inf), y)
  cap = float(np.median(np.exp((old - beh).sum(1))))  # a clip_max inside the rows' range
  with jax.enable_x64(True):  # ours: mis(0, cap, level='sequence') on the untempered, untruncated log-probs
    w, keep, _ = O.mis(0.0, cap, level="sequence")(PolicyOutputs(logp=jnp.asarray(old)),
                                                   _batch(np.ones(y.shape, bool), logp_old=old, logp_behavior=beh))
  keep_ours = np.asarray(keep)[:, 0] > 0
  del w
  np.testing.assert_array_equal(keep_ours, np.exp((old - beh).sum(1)) <= cap)
  roll = _pick(_log_softmax(_vllm_top_p(z_inf, 0.7)), y)
  keep_theirs = np.exp((old - roll).sum(1)) <= cap
  assert (keep_ours != keep_theirs).any()
  assert np.all(roll >= beh - 1e-12)


def test_icepop_default_path_and_v1_bypass():
  d = _defaults("icepop")
  assert d["is_correction_enable / is_correction_type"][1].startswith("False / 'tis'")
  assert "legacy trainer" in d["verl 0.9.1 trainer running the bypass_* presets"][1]
  assert _any_dev("icepop", "is_correction_enable", "no correction")
  assert _any_dev("icepop", "bypass_pg_token_icepop", "legacy trainer")
  assert "train_ppo_ray.py:257" in _fid("icepop").read


# ----------------------------------------------------------------------------------------------------------- entropy


def test_entropy_bonus_and_top_entropy_mask_use_untempered_entropies():
  rng = np.random.default_rng(14)
  v = 8
  # a two-way tie (flat under any T) and a peaked distribution whose long tail flattens at T = 3
  z = np.full((1, 2, v), -30.0)
  z[0, 0, :2] = 0.0
  z[0, 1, :] = 0.0
  z[0, 1, 0] = 4.0
  h1, h3 = _entropy(z), _entropy(z / 3.0)
  assert h1[0, 0] > h1[0, 1] and h3[0, 0] < h3[0, 1]  # the temperature reverses the order
  mask = np.ones((1, 2), bool)
  ones = lambda out, batch: (jnp.ones(batch.loss_mask.shape, jnp.float64), {})  # noqa: E731
  with jax.enable_x64(True):
    out = PolicyOutputs(logp=jnp.zeros((1, 2), jnp.float64), entropy=jnp.asarray(h1))
    kept = np.asarray(O.top_entropy_mask(ones, rho=0.5)(out, _batch(mask))[0]) > 0
    bonus = np.asarray(O.entropy_bonus(1.0)(out, _batch(mask))[0])
  np.testing.assert_allclose(bonus, -h1, rtol=1e-12)
  # TRL at temperature 3: quantile_{0.5} of the tempered entropies keeps the other token
  q = np.quantile(h3[mask], 0.5)
  kept_trl = h3 >= q
  assert kept.tolist() == [[True, False]] and kept_trl.tolist() == [[False, True]]
  assert "softmax(z/T)" in _defaults("entropy_bonus")["temperature of H"][1]
  assert _any_dev("entropy_bonus", "untempered entropy", "T = 1")
  assert "TRL temperature" in _defaults("top_entropy_mask")["temperature of H"][1]
  assert _any_dev("top_entropy_mask", "kept tokens differ")
  del rng


def test_every_swept_row_is_in_full_and_cites_the_sweep():
  for name in SWEPT:
    f = _fid(name)
    assert f.in_full, name
    text = describe(ROWS[name])
    assert "s1a" in f.read or "sweep" in f.read, name
    assert text.count("deviation:") >= 2, name
