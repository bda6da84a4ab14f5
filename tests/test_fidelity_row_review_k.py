"""Issue #51, per-row review k: an independent second reading of six records (not a random draw).

Rows: gspo_token, cpgd, pspo, exgrpo_policy, icepop, erc.

Held (2): pspo, icepop. Their "= theirs" claims are checked below against float64 NumPy transcriptions of the
cited lines (MCDwyer/GR-PSPO@16d89d53 grpotrainer.patch on huggingface/trl@v0.25.1 grpo_trainer.py; OpenRLHF@v0.11.0
openrlhf/models/loss.py).

Not held (4). Each error is fixed in the record (no implementation changed, no implementation bug found):

- ``gspo_token`` OMITTED a launch script and a numerical difference. volcengine/verl@v0.7.0 examples/gspo_trainer
  holds four scripts, the record named two: test_gspo_qwen30b_a3b_ep.sh (clip 3e-4 / 4e-4, clip_ratio_c 10,
  loss_agg_mode token-mean, 256 ÷ 32 = 8 optimizer steps, ppo_megatron_trainer.yaml with the legacy Megatron worker,
  whose megatron_actor.py:444-541, 693-703 hands each token-budget micro-batch's loss to Megatron's schedule;
  $HDFS_ROOT / $DATA_ROOT under set -u: it stops unless the caller exports them) and test_gspo_3b_math_slurm.sh (the
  3B script's values). And verl's seq-mean-token-mean divides each row by (n + 1e-8) (core_algos.py@v0.7.0:814), so
  chain(aggregate=seq_mean_token_mean), which the record called verl's, is verl's × (n + 1e-8)/n per row.
- ``cpgd`` OMITTED the scripts' schedule: sii-research/siiRL@af00a771 examples/cpgd_trainer/*.sh set
  train_batch_size 512 and ppo_mini_batch_size 256 per node (128 in run_qwen2_5_vl-72b.sh), ppo_epochs 1
  (model_args.py:290), and dp_actor.py:370-382, 432-439 train one optimizer step per mini-batch against the stored
  log π_old: 2 (4) steps per batch, r = 1 on the first (no clip, drift 0). Also its token-mean is Σ / (n + 1e-8)
  (torch_functional.py:154-168): the record's "equal with one micro-batch" is equal to a relative 1e-8/n.
- ``exgrpo_policy`` said something FALSE (a pointer off the path) and OMITTED switches: the advantage it cites,
  mix_trainer.py:88-116, is MIXRayPPOTrainer's (trainer.experience False); run_exgrpo.sh:28 sets
  trainer.experience=True, so main_mix_ppo.py:232-234 runs ExperienceMixRayPPOTrainer, whose advantage is
  mix_trainer_helper.py:38-67 (the same code) × the prefix weights 1.0 / 1.0 (mix_trainer_experience.py:456-470).
  mix_trainer_experience.py:429-438 sets loss_remove_clip False and off_policy_reshape 'no_reshape' on every
  warm-up batch whatever the script says, the warm-up clip's upper bound is max(clip_upper_bound 1.0, 1 + 0.2)
  (mix_core_alg.py:117; = ours), and a replayed row's recorded log π_old is used only with trainer.exp_is_correct
  (run_exgrpo.sh:35 True) and a recorded row whose sum ≠ 0 (experience_trainer_ops.py:76-99). The same mix_trainer.py
  pointer is in the ``exgrpo`` row's record (rljax/replay/_stages.py; not drawn here).
- ``erc`` OMITTED that the released code does not run as released: Kwai-Klear/ERC@f1885c53 verl/workers/actor/
  dp_actor.py:480-506 os.makedirs a hard-coded /mmu_nlp_hdd/panleiyu/... directory and torch.save's every
  micro-batch's log-probs, entropies and advantages there (PermissionError for a user who cannot create /mmu_nlp_hdd);
  all four erc recipes launch /share/miniconda3/envs/verl_szp_py310/bin/ray and .../bin/python under set -e; README.md
  :188's GPPO command names recipe/dapo/perf_run_dapo_ours_code.sh, which the repository lacks. Also their token-mean
  is Σ / (n + 1e-8) (torch_functional.py:184-185 of their fork).
"""
import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rljax import objectives as O
from rljax.types import PolicyOutputs
from _fidelity import defaults, fid, log_softmax, pick, record, train_batch


def _grad(obj, batch, logp, entropy=None):
  """(loss, d loss / d logp) of ``obj`` at ``logp`` (float64)."""
  with jax.enable_x64(True):
    ent = None if entropy is None else jnp.asarray(entropy)
    f = lambda lp: obj(PolicyOutputs(logp=lp, entropy=ent), batch)[0]  # noqa: E731
    lp = jnp.asarray(logp)
    return float(f(lp)), np.asarray(jax.grad(f)(lp))


def _per_token(term, batch, logp, entropy=None):
  with jax.enable_x64(True):
    ent = None if entropy is None else jnp.asarray(entropy)
    loss, _ = term(PolicyOutputs(logp=jnp.asarray(logp), entropy=ent), batch)
  return np.asarray(loss)


def _ragged_mask(rng, b, t, lo=2):
  lengths = rng.integers(lo, t + 1, size=b)
  return (np.arange(t)[None] < lengths[:, None]).astype(np.float64)


# --------------------------------------------------------------------------------------- gspo_token (not held)


def _verl_gspo_grad(old, new, adv, mask, clip_low=3e-4, clip_high=4e-4):
  """volcengine/verl@v0.7.0 core_algos.py:1041-1061 compute_policy_loss_gspo and agg_loss 'seq-mean-token-mean'
  (:812-818: Σ_t ℓ·m / (Σ_t m + 1e-8) per row, Σ over non-empty rows ÷ their count), one micro-batch: d loss /
  d log π. s_t = exp(min(log π − sg(log π) + sg(seq mean log r), 10)) has d s_t / d log π_t = s_t below the cap."""
  seq = ((new - old) * mask).sum(-1) / np.maximum(mask.sum(-1), 1.0)
  s = np.exp(np.minimum(np.broadcast_to(seq[:, None], new.shape), 10.0))
  pg1, pg2 = -adv * s, -adv * np.clip(s, 1 - clip_low, 1 + clip_high)
  count = mask.sum(-1)
  w = mask / (count + 1e-8)[:, None] / (count > 0).sum()
  live = (pg1 >= pg2) & (seq[:, None] < 10.0)
  return np.where(live, -adv * s, 0.0) * w


def test_gspo_token_seq_mean_token_mean_is_verls_times_n_plus_1e8_over_n_per_row():
  rng = np.random.default_rng(51_11)
  b, t = 6, 9
  mask = _ragged_mask(rng, b, t)
  old = -rng.random((b, t)) * 2 - 0.05
  new = old + rng.normal(scale=1e-4, size=(b, t))  # inside the 3e-4 / 4e-4 band: no token clipped
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  obj = O.chain(O.gspo_token(), aggregate=O.seq_mean_token_mean)
  _, g = _grad(obj, train_batch(mask, adv, old), new)
  theirs = _verl_gspo_grad(old, new, adv, mask)
  on = mask > 0
  assert np.all(theirs[on] != 0)
  ratio = g[on] / theirs[on]
  n = np.broadcast_to(mask.sum(-1, keepdims=True), mask.shape)[on]
  np.testing.assert_allclose(ratio, (n + 1e-8) / n, rtol=1e-13)  # exactly verl's × (n + 1e-8)/n
  assert np.all(ratio - 1.0 > 1e-10)  # not 1: the record's "gives it" is exact only to a relative 1e-8/n
  text = record("gspo_token")
  assert "(n + 1e-8)" in text and "core_algos.py@v0.7.0:814" in text


def test_gspo_token_record_names_verl_v070s_other_two_gspo_scripts():
  f = fid("gspo_token")
  assert "test_gspo_qwen30b_a3b_ep.sh" in f.read and "test_gspo_3b_math_slurm.sh" in f.read
  assert "$HDFS_ROOT" in f.read and "legacy Megatron worker" in f.read and "megatron_actor.py:444-541" in f.read
  assert "Per-row review k" in f.read
  dev = [x for x in f.deviations if "test_gspo_qwen30b_a3b_ep.sh" in x]
  assert dev and "rl.num_minibatches=8" in dev[0] and "set -u" in dev[0]
  assert 256 // 32 == 8 and 512 // 128 == 4  # the a3b script's and the 3B script's optimizer steps per batch


# --------------------------------------------------------------------------------------------- cpgd (not held)


def _siirl_cpgd_grad(old, new, adv, mask, eps=0.2, coef=0.001):
  """sii-research/siiRL@af00a771 core_algos.py:600-618 (−A·clamp(log π, max=log(1+ε)+log π_old) for A > 0, min=
  log(1−ε)+log π_old otherwise) + dp_actor.py:488-494 (coef·clamp(exp(sg(log π) − log π_old) − 1, max=2)·log π),
  each agg_loss token-mean = masked_sum / (Σm + 1e-8) (torch_functional.py:154-168): d loss / d log π."""
  inside = np.where(adv > 0, new <= math.log(1 + eps) + old, new >= math.log(1 - eps) + old)
  drift = np.minimum(np.exp(new - old) - 1.0, 2.0)
  return (-adv * inside + coef * drift) * mask / (mask.sum() + 1e-8)


def test_cpgd_first_of_their_two_mini_batches_has_r_1_and_later_ones_match_up_to_1e8():
  rng = np.random.default_rng(51_12)
  b, t = 8, 10
  mask = _ragged_mask(rng, b, t)
  old = -rng.random((b, t)) * 3 - 0.05
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  obj = O.chain(O.cpgd(drift_coef=0.001))
  batch = train_batch(mask, adv, old)
  # their first mini-batch: π_θ = π_old, r = 1: no token clipped and the drift's gradient is 0
  _, g0 = _grad(obj, batch, old.copy())
  t0 = _siirl_cpgd_grad(old, old.copy(), adv, mask)
  np.testing.assert_allclose(t0, -adv * mask / (mask.sum() + 1e-8), rtol=0, atol=0)
  np.testing.assert_allclose(g0, t0 * (mask.sum() + 1e-8) / mask.sum(), rtol=1e-13, atol=1e-300)
  # the second: π_θ has moved (r ≤ 3 everywhere), some tokens clipped
  new = old + rng.normal(scale=0.3, size=(b, t))
  new = np.minimum(new, old + math.log(3.0) - 1e-3)
  _, g1 = _grad(obj, batch, new)
  t1 = _siirl_cpgd_grad(old, new, adv, mask)
  clipped = (mask > 0) & (((adv > 0) & (new > old + math.log(1.2))) | ((adv < 0) & (new < old + math.log(0.8))))
  assert clipped.any() and not clipped[mask > 0].all()
  n = mask.sum()
  np.testing.assert_allclose(g1, t1 * (n + 1e-8) / n, rtol=1e-12, atol=1e-300)
  assert not np.allclose(g1[mask > 0], t1[mask > 0], rtol=1e-11, atol=0)  # a relative 1e-8/n apart
  d = defaults("cpgd")
  ours, theirs = d["optimizer steps per batch"]
  assert "1 × 2" in ours and "rl.num_minibatches=2 (4)" in ours
  assert "ppo_mini_batch_size 256 = 2" in theirs and "512 ÷ 128 = 4" in theirs and "r = 1 there" in theirs
  f = fid("cpgd")
  assert "dp_actor.py:370-382" in f.read and "model_args.py:290" in f.read and "Per-row review k" in f.read
  assert any("(n + 1e-8)" in x for x in f.deviations)
  assert any("rl.num_minibatches=2 (4) with rl.updates_per_batch=1 is theirs" in x for x in f.deviations)


# ------------------------------------------------------------------------------------------------ pspo (held)


def _gr_pspo_step_loss(old, new, adv_row, mask, micro=4, alpha=0.1, processes=1):
  """GR-PSPO@16d89d53 grpotrainer.patch:36-42 on huggingface/trl@v0.25.1 grpo_trainer.py _compute_loss: coef_1 =
  exp(log π − log π_old) (token level, unclamped), coef_2 = (1 − α)·coef_1 + α, per-token −coef_2·A; loss_type
  'dapo' (:1850-1852): Σ over the micro-batch ÷ (num_items_in_batch / num_processes), num_items_in_batch = the
  generation batch's completion tokens (:1408); compute_loss_func set (:455-460): the micro-batches' losses are
  summed into one optimizer step without a further ÷ gradient_accumulation_steps."""
  coef_1 = np.exp(new - old)
  coef_2 = (1.0 - alpha) * coef_1 + alpha
  per_token = -(coef_2 * adv_row[:, None])
  normalizer = mask.sum() / processes
  total = 0.0
  for lo in range(0, len(mask), micro):
    total += (per_token[lo:lo + micro] * mask[lo:lo + micro]).sum() / normalizer
  return total


def _trl_group_advantage(rewards, g):
  """huggingface/trl@v0.25.1 grpo_trainer.py:1598-1620 with scale_rewards 'group' (grpo_config.py:566-567)."""
  r = rewards.reshape(-1, g)
  mean = np.repeat(r.mean(1), g)
  std = np.repeat(r.std(1, ddof=1), g)
  return (rewards - mean) / (std + 1e-4)


def test_pspo_equals_gr_pspo_on_trl_0251_dapo_and_differs_at_their_temperature():
  rng = np.random.default_rng(51_13)
  b, t, v, g = 16, 7, 11, 4
  mask = _ragged_mask(rng, b, t, lo=1)
  rewards = rng.choice([0.0, 0.05, 1.0, 1.05], size=b)
  adv_row = _trl_group_advantage(rewards, g)
  from rljax.advantages import grpo  # pylint: disable=import-outside-toplevel
  with jax.enable_x64(True):
    ours_adv = np.asarray(grpo(jnp.asarray(rewards), jnp.asarray(np.arange(b) // g), eps=1e-4)[0])
  np.testing.assert_allclose(ours_adv, adv_row, rtol=1e-12, atol=1e-15)  # grpo(eps=1e-4) = TRL's 'group'
  adv = np.repeat(adv_row[:, None], t, axis=1)
  z_old = rng.normal(size=(b, t, v))
  z_new = z_old + rng.normal(scale=0.5, size=(b, t, v))
  y = rng.integers(0, v, size=(b, t))
  # at temperature 1: their coef_1 is ours; the loss over their 4 micro-batches is chain's token_mean over the batch
  old, new = pick(log_softmax(z_old), y), pick(log_softmax(z_new), y)
  loss, _ = _grad(O.chain(O.pspo()), train_batch(mask, adv, old), new)
  assert loss == pytest.approx(_gr_pspo_step_loss(old, new, adv_row, mask), rel=1e-13)
  # their runs: temperature 0.8 (maths_finetuning.py:206), both log-probs of softmax(z/0.8) (grpo_trainer.py:910)
  old_t, new_t = pick(log_softmax(z_old / 0.8), y), pick(log_softmax(z_new / 0.8), y)
  theirs_t = _gr_pspo_step_loss(old_t, new_t, adv_row, mask)
  assert abs(loss - theirs_t) > 1e-3  # the record's temperature deviation: ours stays at softmax(z)
  assert "Per-row review k" not in fid("pspo").read  # held: the record is unchanged


# -------------------------------------------------------------------------------------- exgrpo_policy (not held)


def _luffy_on_off_policy_losses(old, new, adv, prefix, mixed, clip_ratio=0.2, clip_upper_bound=1.0):
  """ElliottYan/LUFFY@01f4ae06 ExGRPO/.../mix_src/mix_core_alg.py:86-197 compute_token_on_off_policy_loss, per token:
  on-policy reshape 'no_reshape' (mix_ppo_trainer.yaml:75), loss_remove_clip from the batch's meta_info
  (mix_trainer_experience.py:429-438: the script's True in mixed batches, False in warm-up ones; the clip's upper bound
  max(clip_upper_bound, 1 + cliprange), :117), off_policy_reshape 'p_div_p_0.1' in mixed batches ('no_reshape' in
  warm-up ones), mixed by prefix_mask (:197)."""
  ratio = np.exp(new - old)
  on = -adv * ratio
  if not mixed:
    upper = max(clip_upper_bound, 1.0 + clip_ratio)
    on = np.maximum(on, -adv * np.clip(ratio, 1.0 - clip_ratio, upper))
  off_ratio = ratio / (ratio + 0.1) if mixed else ratio
  off = -adv * off_ratio
  p = prefix.astype(np.float64)
  return off * p + on * (1 - p)


def test_exgrpo_policy_per_token_equals_luffy_in_both_phases():
  rng = np.random.default_rng(51_14)
  b, t = 8, 9
  mask = _ragged_mask(rng, b, t)
  old = -rng.random((b, t)) * 2 - 0.05
  new = old + rng.normal(scale=0.4, size=(b, t))
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  replayed = np.arange(b) % 4 == 3
  prefix = np.broadcast_to(replayed[:, None], (b, t)) & (mask > 0)
  base = train_batch(mask, adv, old)
  with jax.enable_x64(True):
    mixed_batch = dataclasses.replace(base, extras={"replay_mask": jnp.asarray(replayed)})
  ours_mixed = _per_token(O.exgrpo_policy(), mixed_batch, new)
  theirs_mixed = _luffy_on_off_policy_losses(old, new, adv, prefix, mixed=True) * mask
  np.testing.assert_allclose(ours_mixed, theirs_mixed, rtol=1e-13, atol=1e-15)
  # warm-up (before the solve rate passes 0.35): no replayed rows, PPO clip at [0.8, max(1.0, 1.2)]
  ours_warm = _per_token(O.exgrpo_policy(), base, new)
  theirs_warm = _luffy_on_off_policy_losses(old, new, adv, np.zeros_like(prefix), mixed=False) * mask
  np.testing.assert_allclose(ours_warm, theirs_warm, rtol=1e-13, atol=1e-15)
  assert not np.allclose(ours_warm, ours_mixed)  # the phases differ; both match theirs
  f = fid("exgrpo_policy")
  assert "mix_trainer_helper.py:38-67" in f.read and "main_mix_ppo.py:232-234" in f.read
  assert "mix_trainer.py:88-116 is MIXRayPPOTrainer's" in f.read and "exp_is_correct" in f.read
  d = defaults("exgrpo_policy")
  assert d["warm-up clip upper bound"][1].startswith("max(clip_upper_bound 1.0, 1 + clip_ratio 0.2) = 1.2")
  assert "exp_is_correct True" in d["replayed rows' log π_old"][1]


# ------------------------------------------------------------------------------------------------ icepop (held)


def _openrlhf_icepop_ppo(old, new, rollout, adv, low=0.5, high=5.0, eps=0.2):
  """OpenRLHF@v0.11.0 openrlhf/models/loss.py:166-205 PolicyLoss.forward, policy_loss_type 'ppo', vllm_is_correction
  'icepop': ratio = exp(clamp(log π − log π_old, ±20)), −min(r·A, clip(r, 1 − ε, 1 + ε)·A); vllm_is =
  exp(old − rollout), zeroed outside [low, high] (inclusive), × the loss (per token, before aggregate_loss)."""
  ratio = np.exp(np.clip(new - old, -20.0, 20.0))
  loss = -np.minimum(ratio * adv, np.clip(ratio, 1 - eps, 1 + eps) * adv)
  k = np.exp(old - rollout)
  return k * ((k >= low) & (k <= high)) * loss


def test_icepop_equals_openrlhf_including_the_inclusive_bounds():
  rng = np.random.default_rng(51_15)
  b, t = 6, 10
  mask = np.ones((b, t))
  old = -rng.random((b, t)) * 2 - 0.05
  log_k = rng.uniform(-1.2, 2.0, size=(b, t))  # k from 0.30 to 7.4: both sides of both bounds
  log_k[0, :2] = math.log(0.5)  # on the lower bound: exp gives exactly 0.5 in NumPy and in XLA
  old[0, :2] = 0.0  # so that old − rollout is log_k exactly on both sides
  rollout = old - log_k
  new = old + rng.normal(scale=0.3, size=(b, t))
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  with jax.enable_x64(True):
    batch = dataclasses.replace(train_batch(mask, adv, old), logp_behavior=jnp.asarray(rollout))
  ours = _per_token(O.ppo_clip(correction=O.icepop()), batch, new)
  theirs = _openrlhf_icepop_ppo(old, new, rollout, adv)
  np.testing.assert_allclose(ours, theirs, rtol=1e-13, atol=1e-15)
  k = np.exp(old - rollout)
  assert ((k < 0.5) | (k > 5.0)).any() and np.all(ours[(k < 0.5) | (k > 5.0)] == 0)
  assert np.all(k[0, :2] == 0.5) and np.all(ours[0, :2] != 0)  # k on the bound is kept, as theirs (inclusive)
  d = defaults("icepop")
  assert d["alpha"] == ("0.5", "0.5") and d["beta"] == ("5.0", "5.0")


# --------------------------------------------------------------------------------------------- erc (not held)


def _erc_grpo_erc_grad(old, new, adv, mask, h, h_old, low=0.95, high=1.05, el=0.2, eh=0.28, c=10.0):
  """Kwai-Klear/ERC@f1885c53 verl/trainer/ppo/core_algos.py:968-1010 compute_policy_loss_grpo_erc (log r clamped
  ±20; max(−A r, −A clip(r, 1 − ε_l, 1 + ε_h)), for A < 0 min(that, −A c); detached where not low < ρ < high, ρ =
  (H + 1e-8)/(H_old + 1e-8)), agg_loss token-mean = masked_sum / (Σm + 1e-8) (torch_functional.py:184-185):
  d loss / d log π."""
  lr = np.clip(new - old, -20.0, 20.0)
  r = np.exp(lr)
  pg1, pg2 = -adv * r, -adv * np.clip(r, 1 - el, 1 + eh)
  unclipped = pg1 >= pg2
  grad = np.where(unclipped, -adv * r, 0.0)
  grad = np.where((adv < 0) & (-adv * c < np.maximum(pg1, pg2)), 0.0, grad)
  rho = (h + 1e-8) / (h_old + 1e-8)
  band = (rho > low) & (rho < high)
  return np.where(band, grad, 0.0) * mask / (mask.sum() + 1e-8)


def test_erc_gradient_equals_grpo_erc_up_to_1e8_and_the_record_says_the_code_does_not_run_as_released():
  rng = np.random.default_rng(51_16)
  b, t = 8, 10
  mask = _ragged_mask(rng, b, t)
  old = -rng.random((b, t)) * 2 - 0.05
  new = old + rng.normal(scale=0.3, size=(b, t))
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  h_old = rng.uniform(0.2, 2.0, size=(b, t))
  h = h_old * rng.uniform(0.9, 1.1, size=(b, t))
  with jax.enable_x64(True):
    batch = dataclasses.replace(train_batch(mask, adv, old), entropy_old=jnp.asarray(h_old))
  obj = O.chain(O.erc(O.ppo_clip(0.2, 0.28, dual_clip=10.0)))
  _, g = _grad(obj, batch, new, entropy=h)
  theirs = _erc_grpo_erc_grad(old, new, adv, mask, h, h_old)
  rho = h / h_old
  on = mask > 0
  assert ((rho <= 0.95) & on).any() and ((rho >= 1.05) & on).any() and (theirs[on] != 0).any()
  n = mask.sum()
  np.testing.assert_allclose(g, theirs * (n + 1e-8) / n, rtol=1e-12, atol=1e-300)
  f = fid("erc")
  assert "/mmu_nlp_hdd/" in f.read and "PermissionError" in f.read and "Per-row review k" in f.read
  assert "perf_run_dapo_ours_code.sh" in f.read and "/share/miniconda3/envs/verl_szp_py310/bin/ray" in f.read
  assert any("does not train as released" in x for x in f.deviations)
  assert any("(n + 1e-8)" in x for x in f.deviations)
