"""Issue #51 per-row review, part b: an independent second reading of five records no earlier draw picked.

Rows: dpo, mis, opd, rpg, value_loss (chosen per row, not a random draw). Each cited source was read whole at the
cited commit (the TRL 1.9.0 and verl 0.9.1 PyPI wheels, volcengine/verl@v0.7.0 (f9c855f7), THUDM/slime@624b824a,
complex-reasoning/RPG@ec8e30bd, OpenRLHF/OpenRLHF@v0.11.0 (3c3be623)); every "= theirs" claim is checked below
against a float64 NumPy transcription of the cited lines written for these tests.

Held (1): mis. TRL's vllm_importance_sampling_mode token_mask / sequence_mask (grpo_trainer.py:2578-2621,
3117-3118), verl 0.9.1's IcePop rollout_is_threshold 'L_U' (rollout_corr_helper.py:522-657), its rollout_rs
token_k1 / seq_mean_k1 'L_U' bounds on the inverse ratio (:132-413) and verl v0.7.0's rollout_rs 'geometric' with
lower = 1/upper (rollout_corr_helper.py:82-193) each equal the mis setting the record names.

Not held (4); each error fixed in the RECORD (no implementation changed, no implementation bug found):

- ``dpo`` (OMITTED, twice; one FALSE detail): TRL's DPOConfig sets max_length 1024 with truncation_mode
  'keep_start' (dpo_config.py:188-202): DataCollatorForPreference cuts prompt + completion to their first 1024
  tokens (dpo_trainer.py:152-169), so h sums only the completion tokens inside them, and _prepare_dataset drops an
  example whose prompt alone has ≥ 1024 tokens (:1073-1079); ours sums every loss-mask token. Its
  router_aux_loss_coef 0.001 (dpo_config.py:170-177) adds 0.001 × an MoE policy's load-balancing loss
  (dpo_trainer.py:881-884, 1580-1582); the recipe's chain adds none. Neither was listed. The WPO deviation called
  the weight "the length-normalised probabilities"; the code's is exp(mean of log p − log Σ_v p_v²) (:1565-1576).
- ``opd`` (FALSE; OMITTED): "task reward in the published runs: 0.0 for every sample ... pure distillation" holds
  for run-qwen3-8B-opd.sh only; run-qwen3-8B-opd-megatron.sh:50-52 passes --rm-type math (rm_hub/__init__.py:81-82:
  1 / 0) with no custom post-process, so slime/ray/rollout.py:608-633 group-normalises it ((r − mean)/(std +
  1e-6)): that run is GRPO + OPD. And slime's student log-probs at --rollout-top-p < 1 (default 1.0,
  arguments.py:348-350) are renormalised over the rollout's top-p nucleus (loss.py:83-95, :977; actor.py:357-372;
  ppo_utils.py:251-275): the record had a temperature row and no top-p row.
- ``rpg`` (OMITTED: a component assumed): the record said ours equals theirs "with logp_ref = logp_old" and that
  "rl.num_minibatches=16 with logp_ref = logp_old is theirs" as if that were a setting; the RL loop's logp_ref is
  always the frozen reference's forward (rljax/train/_inputs.py:5-6), and no setting makes it the step's old
  policy (a Python term on batch.replace(logp_ref=batch.logp_old) does). Also omitted: run_rpg_7b_rkl1e-4_rf.sh,
  the one rf script with a KL coefficient, has kld = w(log w + 1) = 1 per response token (reference = old), i.e.
  a reward of R − 1e-4·|y| (ray_trainer.py:147-172, core_algos.py:153-192).
- ``value_loss`` (OMITTED, twice): a shared critic's value loss is × rl.critic_coef (Critic.coef, default 0.5;
  rljax/recipes/_recipe.py:88-90, 349-350, 441-447) on top of coef, so the weight is 0.5, not the record's "coef
  1.0"; and TRL's PPO value loss (cited for the 0.2 default and its denominator) is masked by ~padding_mask_p1,
  the response plus the position after it (trl/experimental/ppo/ppo_trainer.py:727, 762-769, 837).
"""
import math

import jax
import jax.numpy as jnp
import numpy as np

from rljax import objectives as O
from rljax.types import PolicyOutputs, TrainBatch
from _fidelity import any_deviation as _any_dev
from _fidelity import defaults as _defaults, fid as _fid, log_softmax as _log_softmax, record as _record
from _fidelity import vllm_top_p as _vllm_top_p



def _batch(mask, *, adv=None, logp_old=None, logp_behavior=None, logp_ref=None, rewards=None, values_old=None,
           returns=None, extras=None, group_id=None):
  b, t = mask.shape
  f = lambda x: None if x is None else jnp.asarray(x, jnp.float64)  # noqa: E731
  return TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask),
                    advantages=f(np.zeros((b, t)) if adv is None else adv),
                    group_id=jnp.asarray(np.arange(b) if group_id is None else group_id, jnp.int32),
                    logp_old=f(logp_old), logp_behavior=f(logp_behavior), logp_ref=f(logp_ref), rewards=f(rewards),
                    values_old=f(values_old), returns=f(returns),
                    extras={k: jnp.asarray(v) for k, v in (extras or {}).items()})


def _log_sigmoid(x):
  return -np.logaddexp(0.0, -x)


# ================================================================================================== dpo (not held)
# the TRL 1.9.0 PyPI wheel trl/trainer/dpo_trainer.py, DPOConfig defaults in trl/trainer/dpo_config.py


def _trl_collate_sum(lp_prompt, lp_completion, max_length):
  """DataCollatorForPreference (dpo_trainer.py:152-169, keep_start) then _compute_loss's per-sequence sum
  (:1341-1350): the completion mask is cut with the ids, shifted by one; log-probs of masked positions zeroed."""
  lp_full = np.concatenate([lp_prompt, lp_completion])  # lp_full[i]: log p of token i given tokens < i
  mask = np.array([0] * len(lp_prompt) + [1] * len(lp_completion))
  if max_length is not None:
    lp_full, mask = lp_full[:max_length], mask[:max_length]
  return float((lp_full[1:] * mask[1:]).sum())


def _trl_dpo(h_pol_c, h_pol_r, h_ref_c, h_ref_r, beta=0.1, loss_type="sigmoid", eps=0.0):
  """_compute_loss :1386-1434 (reverse_kl scores = log ratios) and :1578 (per_sequence_loss.mean()), loss_weight 1."""
  cs, rs = h_pol_c - h_ref_c, h_pol_r - h_ref_r
  if loss_type == "sigmoid":
    per = -_log_sigmoid(beta * (cs - rs))
  elif loss_type == "aot":  # :1500-1509: sort the policy and reference log-ratio differences over the batch
    delta = np.sort(h_pol_c - h_pol_r) - np.sort(h_ref_c - h_ref_r)
    per = -_log_sigmoid(beta * delta) * (1 - eps) - _log_sigmoid(-beta * delta) * eps
  else:
    raise ValueError(loss_type)
  return float(per.mean())


def _ours_dpo(logp, ref, mask, pair, chosen, beta=0.1, label_smoothing=0.0):
  with jax.enable_x64(True):
    batch = _batch(mask, logp_ref=ref, extras={"dpo_pair_id": pair, "dpo_chosen": chosen})
    obj = O.chain(O.dpo(beta, label_smoothing=label_smoothing), aggregate="seq_mean_token_mean")
    return float(obj(PolicyOutputs(logp=jnp.asarray(logp)), batch)[0])


def test_dpo_sigmoid_is_trls_pair_mean_and_label_smoothing_is_its_aot_form():
  rng = np.random.default_rng(51_201)
  b, t = 8, 7
  mask = rng.random((b, t)) < 0.75
  mask[:, 0] = True
  logp, ref = -rng.uniform(0.1, 2.5, (b, t)), -rng.uniform(0.1, 2.5, (b, t))
  pair = np.array([0, 0, 1, 1, 2, 2, -1, -1])  # two unpaired rows share the batch (pair_scale undoes them)
  chosen = np.array([1, 0, 0, 1, 1, 0, 0, 0], bool)
  h_pol, h_ref = (logp * mask).sum(1), (ref * mask).sum(1)
  w, l = np.array([0, 3, 4]), np.array([1, 2, 5])
  theirs = _trl_dpo(h_pol[w], h_pol[l], h_ref[w], h_ref[l])
  # pair_scale = N / N_paired = 8/6 is a float32 statistic (its last bit, ~3e-8): the only inexact factor
  np.testing.assert_allclose(_ours_dpo(logp, ref, mask, pair, chosen), theirs, rtol=1e-7)
  np.testing.assert_allclose(_ours_dpo(logp[:6], ref[:6], mask[:6], pair[:6], chosen[:6]), theirs, rtol=1e-12)
  # label smoothing: ours (cDPO) = TRL 'aot' on one pair (its sort is then the identity), not 'robust'
  for k in range(3):
    rows = np.array([w[k], l[k]])
    ours = _ours_dpo(logp[rows], ref[rows], mask[rows], np.array([0, 0]), chosen[rows], label_smoothing=0.2)
    aot = _trl_dpo(h_pol[w[k:k + 1]], h_pol[l[k:k + 1]], h_ref[w[k:k + 1]], h_ref[l[k:k + 1]], loss_type="aot",
                   eps=0.2)
    np.testing.assert_allclose(ours, aot, rtol=1e-12)
  assert _defaults("dpo")["beta"] == ("0.1", "0.1")


def test_dpo_trl_max_length_1024_truncates_the_summed_completion():
  rng = np.random.default_rng(51_202)
  prompt = -rng.uniform(0.1, 3.0, 1000)
  comp_c, comp_r = -rng.uniform(0.1, 3.0, 60), -rng.uniform(0.1, 3.0, 20)
  ref_c, ref_r = -rng.uniform(0.1, 3.0, 60), -rng.uniform(0.1, 3.0, 20)
  ref_prompt = -rng.uniform(0.1, 3.0, 1000)
  mask = np.zeros((2, 60), bool)
  mask[0], mask[1, :20] = True, True
  logp = np.zeros((2, 60))
  ref = np.zeros((2, 60))
  logp[0], logp[1, :20], ref[0], ref[1, :20] = comp_c, comp_r, ref_c, ref_r
  ours = _ours_dpo(logp, ref, mask, np.array([0, 0]), np.array([True, False]))

  def trl(max_length):
    hs = [_trl_collate_sum(p, c, max_length) for p, c in ((prompt, comp_c), (prompt, comp_r),
                                                           (ref_prompt, ref_c), (ref_prompt, ref_r))]
    return _trl_dpo(*(np.array([x]) for x in hs))

  np.testing.assert_allclose(trl(None), ours, rtol=1e-12)  # no truncation: equal
  truncated = trl(1024)  # the default: 1000 + 60 > 1024, the chosen completion keeps 24 tokens
  assert abs(truncated - ours) > 1e-3
  cut = mask.copy()
  cut[0, 24:] = False
  np.testing.assert_allclose(_ours_dpo(logp, ref, cut, np.array([0, 0]), np.array([True, False])), truncated,
                             rtol=1e-12)
  # _prepare_dataset :1076-1079 keeps an example only when len(prompt_ids) < max_length
  assert not len(np.zeros(1024)) < 1024
  d = _defaults("dpo")
  assert d["max_length / truncation_mode"][1].startswith("1024, 'keep_start'")
  assert "prompt has ≥ 1024 tokens is dropped" in d["max_length / truncation_mode"][1]
  assert _any_dev("dpo", "max_length 1024 (keep_start)", "equal when every prompt + completion fits in 1024")
  assert "dpo_config.py:170-177" in _fid("dpo").read and ":188-202" in _fid("dpo").read


def test_dpo_record_names_the_moe_aux_loss_and_the_aligned_wpo_weight():
  from rljax.recipes import Recipe  # pylint: disable=import-outside-toplevel
  # ours: the RL loop's objective (the recipe's chain) carries no auxiliary-loss weight
  recipe = Recipe(advantage="grpo", loss="dpo")
  assert recipe.objective_builder()(recipe.initial_hparams()).aux_loss_coef == 0.0
  d = _defaults("dpo")
  assert d["router_aux_loss_coef (MoE policies)"][1].startswith("0.001")
  assert "aux_loss_coef 0" in d["router_aux_loss_coef (MoE policies)"][0]
  assert _any_dev("dpo", "MoE policy", "router_aux_loss_coef (0.001)")
  # WPO, dpo_trainer.py:1565-1576: log_denom = lse(2z) − 2·lse(z) = log Σ_v p_v²; weight exp(mean(log p − it))
  rng = np.random.default_rng(51_203)
  z = rng.normal(size=(5, 9)) * 2.0
  y = rng.integers(0, 9, 5)
  lp = _log_softmax(z)[np.arange(5), y]
  log_denom = np.logaddexp.reduce(2 * z, -1) - 2 * np.logaddexp.reduce(z, -1)
  np.testing.assert_allclose(log_denom, np.log((np.exp(_log_softmax(z)) ** 2).sum(-1)), rtol=1e-12)
  aligned, plain = np.exp((lp - log_denom).mean()), np.exp(lp.mean())
  assert aligned > 1.5 * plain  # not the length-normalised probability the record named
  assert _any_dev("dpo", "use_weighting (WPO", "log p_t − log Σ_v p_v²")


# ======================================================================================================= mis (held)


def _trl_vllm_is(old, samp, mask, mode, cmin, cmax):
  """The TRL 1.9.0 PyPI wheel grpo_trainer.py:2578-2617: the ratio (B, T) or (B, 1) that multiplies the per-token
  loss at :3117-3118."""
  diff = (old - samp) * mask
  lr = diff.sum(-1, keepdims=True) if mode.startswith("sequence") else diff
  ratio = np.exp(lr)
  if mode.endswith("truncate"):
    return np.clip(ratio, cmin, cmax)
  lo = -math.inf if cmin is None else cmin
  hi = math.inf if cmax is None else cmax
  return np.where((ratio < lo) | (ratio > hi), 0.0, ratio)


def _verl091_icepop(lr, mask, level, lower, upper):
  """The verl 0.9.1 PyPI wheel rollout_corr_helper.py:569-599 (rollout_is_threshold 'L_U')."""
  if level == "token":
    raw = np.exp(np.clip(lr, -20, 20))
  else:
    raw = np.broadcast_to(np.exp(np.clip((lr * mask).sum(-1, keepdims=True), -20, 20)), lr.shape)
  raw = raw * mask
  return np.where((raw >= lower) & (raw <= upper), raw, 0.0)


def _verl091_rs_k1(lr, mask, option, lower, upper):
  """rollout_corr_helper.py:242-313 token_k1 / seq_mean_k1 'L_U': the keep mask on −log ratio (π_rollout/π_train)."""
  k1 = -np.clip(lr, -20, 20)
  if option == "seq_mean_k1":
    k1 = np.broadcast_to(((k1 * mask).sum(-1) / mask.sum(-1))[:, None], lr.shape)
  return (k1 >= math.log(lower)) & (k1 <= math.log(upper))


def _verl070_rs_geometric(lr, mask, upper, lower=None):
  """volcengine/verl@v0.7.0 rollout_corr_helper.py:82-193 rollout_rs 'geometric' (lower None → 1/upper)."""
  lower = 1.0 / upper if lower is None else lower
  w = np.exp(np.clip(((lr * mask).sum(-1) / mask.sum(-1))[:, None], -20, 20))
  return np.broadcast_to((w >= lower) & (w <= upper), lr.shape)


def _ours_mis(old, roll, mask, *args, **kw):
  with jax.enable_x64(True):
    w, keep, _ = O.mis(*args, **kw)(PolicyOutputs(logp=jnp.asarray(old)), _batch(mask, logp_old=old,
                                                                                 logp_behavior=roll))
  return np.asarray(w), np.asarray(keep)


def test_mis_equals_trl_mask_modes_verl_icepop_and_the_rejection_bounds():
  rng = np.random.default_rng(51_204)
  b, t = 12, 7
  mask = (rng.random((b, t)) < 0.85).astype(np.float64)
  mask[:, 0] = 1.0
  old = -rng.uniform(0.05, 2.0, (b, t))
  roll = old + rng.normal(scale=0.5, size=(b, t))
  lr = (old - roll) * mask
  m = mask > 0
  # TRL's default sequence_mask (clip_min None, clip_max 3.0) = mis(0.0, 3.0, level='sequence')
  theirs = np.broadcast_to(_trl_vllm_is(old, roll, mask, "sequence_mask", None, 3.0), (b, t))
  w, keep = _ours_mis(old, roll, mask, 0.0, 3.0, level="sequence")
  assert 0 < (theirs[:, 0] == 0).sum() < b  # some sequences masked, some kept
  np.testing.assert_allclose((w * keep)[m], theirs[m], rtol=1e-12)
  # token_mask
  theirs = _trl_vllm_is(old, roll, mask, "token_mask", 0.5, 2.0)
  w, keep = _ours_mis(old, roll, mask, 0.5, 2.0)
  assert 0 < (theirs[m] == 0).sum() < m.sum()
  np.testing.assert_allclose((w * keep)[m], theirs[m], rtol=1e-12)
  # verl 0.9.1 IcePop 'L_U' = mis(L, U, level) as is
  for level in ("token", "sequence"):
    theirs = _verl091_icepop(lr, mask, level, 0.5, 2.0)
    w, keep = _ours_mis(old, roll, mask, 0.5, 2.0, level=level)
    np.testing.assert_allclose((w * keep)[m], theirs[m], rtol=1e-12)
  # verl 0.9.1 rollout_rs token_k1 '0.7_1.6' / seq_mean_k1 '0.9_1.1' bound the inverse ratio:
  # mis(1/U, 1/L, reweight=False)
  for option, level, lo, hi in (("token_k1", "token", 0.7, 1.6), ("seq_mean_k1", "geometric", 0.9, 1.1)):
    theirs = _verl091_rs_k1(lr, mask, option, lo, hi)
    _, keep = _ours_mis(old, roll, mask, 1 / hi, 1 / lo, level=level, reweight=False)
    assert 0 < (~theirs[m]).sum() < m.sum()
    np.testing.assert_array_equal(keep[m] > 0, theirs[m])
  # verl v0.7.0 rollout_rs 'geometric', threshold 1.1 (lower 1/1.1)
  theirs = _verl070_rs_geometric(lr, mask, 1.1)
  _, keep = _ours_mis(old, roll, mask, 1 / 1.1, 1.1, level="geometric", reweight=False)
  assert 0 < (~theirs[m]).sum() < m.sum()
  np.testing.assert_array_equal(keep[m] > 0, theirs[m])
  d = _defaults("mis")
  assert "clip_max = 3.0" in d["upper"][1] and "'sequence_mask'" in d["level"][1]
  assert "mis(1/U, 1/L, reweight=False)" in _record("mis")


# ================================================================================================= opd (not held)
# THUDM/slime@624b824a


def _slime_group_norm(r, n):
  """slime/ray/rollout.py:608-633 (grpo, rewards_normalization, grpo_std_normalization): per group of
  n_samples_per_prompt, r − mean, ÷ (torch.std (unbiased) + 1e-6)."""
  g = r.reshape(-1, n)
  g = g - g.mean(-1, keepdims=True)
  return (g / (g.std(-1, ddof=1, keepdims=True) + 1e-6)).reshape(-1)


def _slime_grad(rewards_norm, old, teacher, mask, coef=1.0):
  """d(loss)/d(log π) at log π = log π_old (on-policy, ratio 1) of one optimizer step:
  get_grpo_returns (ppo_utils.py:361-368) and apply_opd_kl_to_advantages (loss.py:663-701): A = r' − c·(old − T);
  compute_policy_loss (ppo_utils.py:125-148): −A·ratio inside the clip; sum_of_sample_mean with the
  step_global_batch_size scaling (loss.py:1317-1360): Σ_i (Σ_t x·m / Σ_t m) / B."""
  adv = rewards_norm[:, None] * np.ones_like(old) - coef * (old - teacher)
  return -adv * mask / mask.sum(1, keepdims=True) / mask.shape[0]


def _ours_opd_grad(adv, old, teacher, mask):
  with jax.enable_x64(True):
    batch = _batch(mask, adv=adv, logp_old=old, extras={"logp_teacher": teacher})
    obj = O.chain(O.ppo_clip(0.2), O.opd(1.0), aggregate="seq_mean_token_mean")
    return np.asarray(jax.grad(lambda lp: obj(PolicyOutputs(logp=lp), batch)[0])(jnp.asarray(old)))


def test_opd_sglang_run_is_pure_distillation_and_the_megatron_run_is_grpo_plus_opd():
  import rljax.advantages as A  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(51_205)
  b, t, n = 8, 6, 4  # two prompts × n_samples_per_prompt 4
  mask = rng.random((b, t)) < 0.8
  mask[:, 0] = True
  old = -rng.uniform(0.1, 2.0, (b, t))
  teacher = old - rng.uniform(-0.5, 1.5, (b, t))
  rewards = np.array([1, 0, 0, 1, 1, 1, 0, 1], np.float64)  # --rm-type math: 1 if correct else 0
  gid = np.repeat(np.arange(b // n), n)
  # run-qwen3-8B-opd.sh: post_process_rewards gives 0.0 to every sample
  sglang = _slime_grad(np.zeros(b), old, teacher, mask)
  np.testing.assert_allclose(_ours_opd_grad(np.zeros((b, t)), old, teacher, mask), sglang, rtol=1e-10, atol=1e-14)
  # run-qwen3-8B-opd-megatron.sh: the math reward, group-normalised, plus OPD
  norm = _slime_group_norm(rewards, n)
  ours_adv = np.asarray(A.grpo(rewards, gid)[0], np.float64)  # rljax grpo defaults: eps 1e-6, std_ddof 1
  np.testing.assert_allclose(ours_adv, norm, rtol=1e-6, atol=1e-6)
  megatron = _slime_grad(norm, old, teacher, mask)
  np.testing.assert_allclose(_ours_opd_grad(np.repeat(norm[:, None], t, 1), old, teacher, mask), megatron,
                             rtol=1e-10, atol=1e-14)
  assert np.abs(megatron - sglang).max() > 1e-2  # the task reward is not zero in that run
  theirs = _defaults("opd")["task reward in the published runs"][1]
  assert "run-qwen3-8B-opd.sh (SGLang teacher): 0.0 for every sample" in theirs
  assert "run-qwen3-8B-opd-megatron.sh (Megatron teacher): --rm-type math" in theirs
  assert "run-qwen3-8B-opd-megatron.sh:50-52" in _fid("opd").read and "rollout.py:608-633" in _fid("opd").read
  assert _any_dev("opd", "Megatron-teacher script", "ppo_clip(0.2) on the grpo advantage", "opd(1.0)")
  assert "0.0 for every sample" in _record("opd") and "post_process_rewards" in _record("opd")


def test_opd_slime_top_p_replay_renormalises_the_student_log_probs():
  rng = np.random.default_rng(51_206)
  b, v = 6, 12
  z = rng.normal(size=(b, v)) * 2.0
  y = np.argmax(z, -1)  # a token inside any nucleus
  ours = _log_softmax(z)[np.arange(b), y]  # the RL loop's untruncated log π (rollout temperature 1)
  for top_p in (1.0, 0.8):
    nucleus = np.isfinite(_vllm_top_p(z, top_p))  # the rollout's recorded nucleus at top-p
    # slime/utils/ppo_utils.py:261-275: logits outside the keep-mask −inf (the target kept), log-softmax
    slime = _log_softmax(np.where(nucleus, z, -np.inf))[np.arange(b), y]
    if top_p == 1.0:
      np.testing.assert_allclose(slime, ours, rtol=1e-12)
    else:
      mass = np.log((np.exp(_log_softmax(z)) * nucleus).sum(-1))
      np.testing.assert_allclose(slime, ours - mass, rtol=1e-12)
      assert (slime - ours).min() > 1e-3
  d = _defaults("opd")["top-p in the log-probs"]
  assert "untruncated" in d[0] and d[1].startswith("--rollout-top-p (default 1.0")
  assert _any_dev("opd", "--rollout-top-p < 1", "equal at top-p 1")
  assert "ppo_utils.py:251-275" in _fid("opd").read


# ================================================================================================= rpg (not held)
# complex-reasoning/RPG@ec8e30bd


def _rpg_kl_penalty(logp, ref, kind):
  """verl/trainer/ppo/core_algos.py:629-710 kl_penalty, the rpg_* forms the scripts select."""
  lr = logp - ref
  w = np.exp(lr)
  if kind == "rpg_fkl":
    return -lr
  val = {"rpg_rkl": w * lr, "rpg_urkl": w * (lr - 1) + 1, "rpg_ufkl": w - lr - 1,
         "rpg_rf_rkl": w * (lr + 1)}[kind]
  return np.clip(val, -10, 10)


def _rpg_kl_grad(logp, ref, kind):
  """d kl_penalty / d log π (inside the ±10 clamp)."""
  lr = logp - ref
  w = np.exp(lr)
  return {"rpg_fkl": -np.ones_like(w), "rpg_rkl": w * (lr + 1), "rpg_urkl": w * lr, "rpg_ufkl": w - 1}[kind]


def _rpg_dual_clip(logp, old, adv, lo=0.2, hi=0.28, c=10.0):
  """compute_policy_loss (core_algos.py:428-493) per token: value and d/d log π."""
  r = np.exp(logp - old)
  l1, l2 = -adv * r, -adv * np.clip(r, 1 - lo, 1 + hi)
  clip1 = np.maximum(l1, l2)
  g_clip1 = np.where(l1 >= l2, -adv * r, np.where((r > 1 - lo) & (r < 1 + hi), -adv * r, 0.0))
  l3 = -adv * c
  value = np.where(adv < 0, np.minimum(l3, clip1), clip1)
  grad = np.where((adv < 0) & (l3 < clip1), 0.0, g_clip1)
  return value, grad


def test_rpg_use_kl_loss_runs_equal_dual_clip_ppo_plus_rpg_only_with_the_old_policy_as_reference():
  rng = np.random.default_rng(51_207)
  b, t = 6, 8
  mask = rng.random((b, t)) < 0.85
  mask[:, 0] = True
  old = -rng.uniform(0.1, 2.0, (b, t))
  logp = old + rng.normal(scale=0.3, size=(b, t))  # a later mini-batch: w ≠ 1
  frozen_ref = old + rng.normal(scale=0.4, size=(b, t))  # the RL loop's reference: the initial policy
  adv = np.repeat(rng.normal(size=(b, 1)), t, 1)
  n = mask.sum()
  pg_v, pg_g = _rpg_dual_clip(logp, old, adv)
  for kind, kl, normalized in (("rpg_rkl", "reverse", True), ("rpg_urkl", "reverse", False),
                               ("rpg_fkl", "forward", True), ("rpg_ufkl", "forward", False)):
    # dp_actor.py:336-366: token-mean PPO + kl_loss_coef · token-mean(kl_penalty(log π, ref = old_log_probs))
    theirs_v = ((pg_v + 1e-4 * _rpg_kl_penalty(logp, old, kind)) * mask).sum() / n
    theirs_g = (pg_g + 1e-4 * _rpg_kl_grad(logp, old, kind)) * mask / n
    term = O.rpg(1e-4, kl, normalized=normalized, policy_gradient=False)
    obj = O.chain(O.ppo_clip(0.2, 0.28, dual_clip=10.0), term)
    with jax.enable_x64(True):
      batch = _batch(mask, adv=adv, logp_old=old, logp_ref=frozen_ref)
      as_theirs = batch.replace(logp_ref=batch.logp_old)  # what no RL-loop setting provides
      f = lambda lp, bt: obj(PolicyOutputs(logp=lp), bt)[0]  # noqa: E731
      v = float(f(jnp.asarray(logp), as_theirs))
      g = np.asarray(jax.grad(f)(jnp.asarray(logp), as_theirs))
      v_frozen = float(f(jnp.asarray(logp), batch))
    np.testing.assert_allclose(v, theirs_v, rtol=1e-10)
    np.testing.assert_allclose(g, theirs_g, rtol=1e-9, atol=1e-15)
    assert abs(v_frozen - theirs_v) > 1e-7, kind  # the RL loop's frozen reference is not theirs
  assert "no setting makes it the step's old policy" in _defaults("rpg")["reference"][0]
  assert _any_dev("rpg", "no RL-loop setting gives that", "batch.replace(logp_ref=batch.logp_old)")
  assert _any_dev("rpg", "16 mini-batches", "(the Python term above)")
  assert "rljax/train/_inputs.py:5-6" in _fid("rpg").read


def _rpg_outcome_advantage(token_rewards, mask, index):
  """core_algos.py:153-192 compute_rpg_outcome_advantage: scores = Σ token rewards; minus the group mean
  (a one-row group: mean 0)."""
  scores = token_rewards.sum(-1)
  out = scores.copy()
  for g in np.unique(index):
    rows = index == g
    out[rows] = scores[rows] - (0.0 if rows.sum() == 1 else scores[rows].mean())
  return out[:, None] * mask


def test_rpg_rf_rkl_script_reward_is_a_length_penalty():
  rng = np.random.default_rng(51_208)
  b, t = 8, 10
  lengths = rng.integers(2, t + 1, b)
  mask = (np.arange(t)[None, :] < lengths[:, None]).astype(np.float64)
  old = -rng.uniform(0.1, 2.0, (b, t))
  score = rng.integers(0, 2, b).astype(np.float64)
  token_scores = np.zeros((b, t))
  token_scores[np.arange(b), lengths - 1] = score
  index = np.repeat(np.arange(2), 4)
  # ray_trainer.py:147-172 apply_kl_penalty with kl_loss_type rpg_rf_rkl, ref_log_prob = old_log_probs
  kld = _rpg_kl_penalty(old, old, "rpg_rf_rkl") * mask
  np.testing.assert_array_equal(kld, mask)  # w(log w + 1) = 1 on every response token
  theirs = _rpg_outcome_advantage(token_scores - 1e-4 * kld, mask, index)
  as_length_penalty = _rpg_outcome_advantage(token_scores, mask, index)[:, 0] - 1e-4 * (
      lengths - np.array([lengths[index == g].mean() for g in index]))
  np.testing.assert_allclose(theirs[:, 0], as_length_penalty, rtol=1e-12, atol=1e-15)
  assert np.abs(theirs - _rpg_outcome_advantage(token_scores, mask, index)).max() > 1e-5
  assert _any_dev("rpg", "run_rpg_7b_rkl1e-4_rf.sh", "R − 1e-4·|y|")


# ========================================================================================== value_loss (not held)


def _verl_value_loss(v, v_old, ret, mask, eps=0.5):
  """volcengine/verl@v0.7.0 core_algos.py:1546-1585 compute_value_loss, token-mean (agg_loss)."""
  vc = np.clip(v, v_old - eps, v_old + eps)
  per = np.maximum((v - ret) ** 2, (vc - ret) ** 2)
  return 0.5 * (per * mask).sum() / mask.sum()


def _openrlhf_value_loss(v, v_old, ret, mask, eps):
  """OpenRLHF/OpenRLHF@v0.11.0 openrlhf/models/loss.py:233-269 ValueLoss (token_level_loss, no global counts)."""
  if eps is None:
    per = (v - ret) ** 2
  else:
    vc = v_old + np.clip(v - v_old, -eps, eps)
    per = np.maximum((vc - ret) ** 2, (v - ret) ** 2)
  return 0.5 * (per * mask).sum() / mask.sum()


def _ours_value(v, v_old, ret, mask, obj=None, **kw):
  obj = obj or O.chain(O.value_loss(**kw))
  with jax.enable_x64(True):
    out = PolicyOutputs(logp=jnp.zeros(mask.shape, jnp.float64), values=jnp.asarray(v))
    return float(obj(out, _batch(mask, logp_old=np.zeros(mask.shape), values_old=v_old, returns=ret))[0])


def _value_case(seed, b=5, t=9):
  rng = np.random.default_rng(seed)
  mask = rng.random((b, t)) < 0.8
  mask[:, 0] = True
  v_old = rng.normal(size=(b, t))
  v = v_old + rng.normal(scale=0.8, size=(b, t))
  ret = v_old + rng.normal(scale=1.0, size=(b, t))
  return v, v_old, ret, mask


def test_value_loss_equals_verl_and_openrlhf_at_their_clip():
  v, v_old, ret, mask = _value_case(51_209)
  ours = _ours_value(v, v_old, ret, mask, clip_eps=0.5)
  np.testing.assert_allclose(ours, _verl_value_loss(v, v_old, ret, mask), rtol=1e-12)
  np.testing.assert_allclose(ours, _openrlhf_value_loss(v, v_old, ret, mask, 0.5), rtol=1e-12)
  np.testing.assert_allclose(_ours_value(v, v_old, ret, mask, clip_eps=None),
                             _openrlhf_value_loss(v, v_old, ret, mask, None), rtol=1e-12)
  assert _defaults("value_loss")["clip_eps"] == ("0.2", "verl 0.5; OpenRLHF 0.5; TRL 0.2")


def test_value_loss_shared_critic_weight_is_critic_coef():
  from rljax.recipes import Critic, Recipe  # pylint: disable=import-outside-toplevel
  v, v_old, ret, mask = _value_case(51_210)
  verl = _verl_value_loss(v, v_old, ret, mask, eps=0.2)
  for critic, weight in ((Critic(shared=True), 0.5), (Critic(shared=True, coef=0.1), 0.1)):
    recipe = Recipe(advantage="gae", loss="ppo_clip", critic=critic)
    obj = recipe.objective_builder()(recipe.initial_hparams())
    # advantages 0: the ppo_clip part is 0, the loss is the shared critic's value-loss term alone
    np.testing.assert_allclose(_ours_value(v, v_old, ret, mask, obj=obj), weight * verl, rtol=1e-6)
  coef = _defaults("value_loss")["coef"]
  assert coef[0].startswith("1.0; a shared critic") and "rl.critic_coef" in coef[0] and "weight 0.5" in coef[0]
  assert _any_dev("value_loss", "vf_coef 0.1 is rl.critic_coef=0.1 with coef=1")


def _trl_ppo_value_loss(v, v_old, ret, responses, pad_id, eps=0.2):
  """The TRL 1.9.0 PyPI wheel trl/experimental/ppo/ppo_trainer.py:727 (sequence_length = first pad − 1, via
  first_true_indices, experimental/utils.py:723-745), :762-769 (padding_mask_p1), :828-837 (vpred masked to 0
  past it; 0.5·masked_mean of the max over ~padding_mask_p1)."""
  w = responses.shape[1]
  is_pad = responses == pad_id
  first = np.where(is_pad.any(1), is_pad.argmax(1), w)
  seq_len = first - 1
  idx = np.arange(w)[None, :]
  p1 = idx > (seq_len + 1)[:, None]
  vp = np.where(p1, 0.0, v)
  vc = np.clip(vp, v_old - eps, v_old + eps)
  per = np.maximum((vp - ret) ** 2, (vc - ret) ** 2)
  keep = ~p1
  return 0.5 * (per * keep).sum() / keep.sum(), seq_len, keep


def test_value_loss_trl_counts_the_position_after_the_response():
  rng = np.random.default_rng(51_211)
  b, w, pad = 4, 10, 0
  lengths = np.array([3, 6, 10, 8])  # one row fills the width: no position after it
  responses = np.where(np.arange(w)[None, :] < lengths[:, None], rng.integers(1, 50, (b, w)), pad)
  v_old = rng.normal(size=(b, w))
  v = v_old + rng.normal(scale=0.5, size=(b, w))
  ret = v_old + rng.normal(scale=1.0, size=(b, w))
  theirs, seq_len, keep = _trl_ppo_value_loss(v, v_old, ret, responses, pad)
  np.testing.assert_array_equal(seq_len, lengths - 1)
  response = np.arange(w)[None, :] < lengths[:, None]  # ours: the completion tokens (loss_mask)
  assert (keep.sum(1) - response.sum(1)).tolist() == [1, 1, 0, 1]
  ours = _ours_value(v, v_old, ret, response, clip_eps=0.2)
  assert abs(ours - theirs) > 1e-3
  np.testing.assert_allclose(_ours_value(v, v_old, ret, keep, clip_eps=0.2), theirs, rtol=1e-12)  # only the mask
  tokens = _defaults("value_loss")["value-loss tokens"]
  assert tokens[0] == "batch.loss_mask (the completion tokens)" and "~padding_mask_p1" in tokens[1]
  assert _any_dev("value_loss", "padding_mask_p1", "response tokens only")
  assert "ppo_trainer.py:727" in _fid("value_loss").read and ":762-769" in _fid("value_loss").read


def test_docs_catalog_has_this_review_section():
  import pathlib  # pylint: disable=import-outside-toplevel
  doc = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "catalog.md").read_text()
  section = doc.split("#### Per-row review, part b", 1)[1].split("####", 1)[0]
  assert "**1 of 5 held**" in section
  for row in ("`dpo`", "`opd`", "`rpg`", "`value_loss`"):
    assert row + " (" in section, row
