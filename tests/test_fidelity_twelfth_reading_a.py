"""Issue #51 item 4, twelfth draw (seed 20261217), part a: an independent re-audit of five in-full rows.

Rows drawn: pspo, zero_variance, grpo, passk, segment_ratio (five of the ten of
``random.Random(20261217).sample(rows, 10)`` over the 109 rows).

Held (1): segment_ratio; its "= theirs" claims are checked below against a float64 NumPy transcription of
yaochenzhu/Rank-GRPO@0808d82c libs/trl/rank_grpo_trainer.py:2016-2088 (importance_sampling_level 'item', loss_type
'bnpo') at train_rank_grpo.py's eps 0.06 / 0.08.

Not held (4), each error fixed in the record and checked here (no implementation changed, no implementation bug
found; every implementation matched its source at the stated settings):

- ``pspo`` (OMITTED): the record said the patches' base, TRL 0.25.1, "is not stored here" and cited TRL 1.9.0 for
  the tempered log-probs. huggingface/trl@v0.25.1 (1cf8d56c) is fetchable and both patches apply to it cleanly;
  they fail on requirements.txt's pinned trl==0.21.0 (grpotrainer.patch hunk 1, grpoconfig.patch hunk 2
  rejected), which has neither the two GRPOConfig fields (maths_finetuning.py:188-224 stops with a TypeError) nor
  loss_type 'dapo': the pinned install does not start. README.md's command (--model / --trust_region_method /
  --seed flags) exits at maths_finetuning.py:260-263 (len(sys.argv) != 4). The advantage their loss receives, TRL
  0.25.1's (r − mean_g)/(std_g + 1e-4) (grpo_trainer.py:1598-1620), was not listed (the grpo stage's default
  eps is 1e-6; grpo(eps=1e-4) is theirs).
- ``zero_variance`` (FALSE + OMITTED): the record called the DAPO scripts' overlong buffer on and cited the legacy
  reward_manager/dapo.py:97-125 as where their reward is computed. At verl v0.7.0 the default reward_model config
  is dp_reward_loop (use_reward_loop True): the agent loop scores every sample with the reward loop's
  DAPORewardManager, which reads reward_model.reward_kwargs.overlong_buffer_cfg (experimental/reward_loop/
  reward_manager/dapo.py:33-35), not the reward_model.overlong_buffer the scripts set; the legacy manager returns
  those rm_scores unchanged (reward_manager/dapo.py:57-59). As released their reward is the ±1 score with no
  overlong penalty, so acc and score filter the same groups.
- ``grpo`` (FALSE): a deviation said "verl has no padding rows". verl 0.9.1's default (v1) trainer pads the batch
  before the advantage (v1/trainer_base.py:582, 600, 1619-1621; padding_utils.py:72-210) with synthetic rows under
  one fresh pad uid, rm_scores 0 and response_mask 0: they form their own group and get A = 0, as ours.
- ``passk`` (FALSE, below 1e-6): the deviation said the groups with σ ≤ sigma_eps are the all-equal and
  c > n − k ones, which get 0 "as theirs". 0 < σ ≤ 1e-6 also occurs (n = 64, k = 16, c = 46..48), where ours is 0
  and calc_adv's (1 − ρ)/(σ + 1e-6) is not (|A| < 1e-6).

Noticed, not this draw's rows: the authors' maths_finetuning.py:161-184 sets epsilon 0.0 for its 'clip' runs too
(the 'noclip' test's else branch overrides the 'clip' branch's values), and its 'noclip' branch leaves
smoothing_alpha unassigned; rows citing the DAPO recipe's overlong penalty at verl v0.7.0 (overlong_penalty, qae)
may share the zero_variance finding.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rljax.catalog import describe
from _fidelity import ROWS, defaults as _defaults, fid as _fid, log_softmax as _log_softmax, pick, train_batch


def _ours_term(term, new, batch):
  """Our per-token loss and d(token_mean)/d(log π) on one micro-batch holding the whole step batch."""
  from rljax.types import PolicyOutputs  # pylint: disable=import-outside-toplevel
  with jax.enable_x64(True):
    def total(logp):
      loss, _ = term(PolicyOutputs(logp=logp), batch)
      return jnp.sum(loss) / jnp.sum(batch.loss_mask.astype(logp.dtype))
    g = jax.grad(total)(jnp.asarray(new))
    per_token, _ = term(PolicyOutputs(logp=jnp.asarray(new)), batch)
  return np.asarray(per_token), np.asarray(g)


# ----------------------------------------------------------------------------------------------- pspo (not held)


def _trl0251_pspo_loss(logits, logits_old, y, adv, mask, alpha=0.1, temperature=1.0, num_items=None,
                       num_processes=1):
  """huggingface/trl@v0.25.1 patched with MCDwyer/GR-PSPO@16d89d53 grpotrainer.patch, one micro-batch:
  grpo_trainer.py:910 (logits ÷ temperature before the log-softmax, current and old), :1822 coef_1 = exp(log r),
  the patch's 'pspo' branch coef_2 = (1 − α)·coef_1 + α, −coef_2·A; :1851 loss_type 'dapo':
  Σ(per_token_loss·mask) ÷ (num_items_in_batch / num_processes). Returns (loss, per-token loss, coef_1)."""
  lp = pick(_log_softmax(logits / temperature), y)
  old = pick(_log_softmax(logits_old / temperature), y)
  coef_1 = np.exp(lp - old)
  per_token = -((1.0 - alpha) * coef_1 + alpha) * adv[:, None]
  n = mask.sum() if num_items is None else num_items
  return (per_token * mask).sum() / (n / num_processes), per_token, coef_1


def _trl0251_advantage(rewards, num_generations):
  """grpo_trainer.py@v0.25.1:1598-1620, scale_rewards 'group' (grpo_config.py:566-567): torch.std is unbiased."""
  r = np.asarray(rewards, np.float64).reshape(-1, num_generations)
  return ((r - r.mean(1, keepdims=True)) / (r.std(1, ddof=1, keepdims=True) + 1e-4)).reshape(-1)


def test_pspo_equals_patched_trl_0251_at_temperature_one_and_records_its_base_and_advantage():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  import rljax.advantages as A  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(20261217)
  b, t, v = 8, 7, 6  # num_generations 4: two prompts
  z_old = rng.normal(size=(b, t, v)) * 1.5
  z = z_old + rng.normal(scale=0.4, size=(b, t, v))  # the second of num_iterations 2 passes: θ ≠ θ_old
  y = rng.integers(0, v, size=(b, t))
  mask = rng.random((b, t)) < 0.85
  mask[:, 0] = True
  rewards = np.array([1.0, 0.05, 0.0, 1.0, 0.0, 0.0, 0.05, 1.0])  # gsm8k_numeric_reward's reachable values
  adv_theirs = _trl0251_advantage(rewards, 4)
  with jax.enable_x64(True):
    adv_ours = np.asarray(A.grpo(jnp.asarray(rewards), jnp.repeat(jnp.arange(2), 4), eps=1e-4)[0])
    adv_default = np.asarray(A.grpo(jnp.asarray(rewards), jnp.repeat(jnp.arange(2), 4))[0])
  np.testing.assert_allclose(adv_ours, adv_theirs, rtol=1e-12, atol=1e-12)  # grpo(eps=1e-4) is theirs
  assert np.abs(adv_default - adv_theirs).max() > 1e-5  # the default eps 1e-6 is not
  adv_tok = np.repeat(adv_theirs[:, None], t, axis=1)
  new = pick(_log_softmax(z), y)
  old = pick(_log_softmax(z_old), y)
  per_token, g = _ours_term(O.pspo(0.1), new, train_batch(mask, adv_tok, old))
  loss_t1, per_t1, coef = _trl0251_pspo_loss(z, z_old, y, adv_theirs, mask)
  assert coef[mask].min() < 0.8 and coef[mask].max() > 1.25  # ratios away from 1 (no clip in either)
  np.testing.assert_allclose(per_token[mask], per_t1[mask], rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(per_token.sum() / mask.sum(), loss_t1, rtol=1e-12)  # dapo on one process = token mean
  # d(dapo)/d(log π) = −(1 − α)·coef_1·A / N: ours
  np.testing.assert_allclose(g[mask], (-(0.9) * coef * adv_tok / mask.sum())[mask], rtol=1e-10, atol=1e-14)
  # their runs' temperature 0.8 is a recorded deviation
  _, per_t08, _ = _trl0251_pspo_loss(z, z_old, y, adv_theirs, mask, temperature=0.8)
  assert np.abs(per_t08 - per_token)[mask].max() > 1e-2
  f = _fid("pspo")
  assert "huggingface/trl@v0.25.1 (1cf8d56c)" in f.read and "grpo_trainer.py:910" in f.read
  assert "is not stored" not in f.read
  assert "hunk 1" in f.read and "hunk 2 rejected" in f.read and "TypeError" in f.read
  assert "maths_finetuning.py:260-263 (len(sys.argv) != 4" in f.read
  adv_row = _defaults("pspo")["advantage (not this term's)"]
  assert "σ_g + 1e-6" in adv_row[0] and "(r − mean_g)/(std_g + 1e-4)" in adv_row[1]
  assert any("grpo(eps=1e-4)' gives theirs" in x for x in f.deviations)
  assert any("does not run as documented" in x for x in f.deviations)
  assert "Twelfth draw" in describe(ROWS["pspo"])


def test_pspo_readme_command_fails_the_scripts_argument_check():
  """maths_finetuning.py:260: ``if len(sys.argv) != 4`` (usage, exit 1); README.md's flag form has 7 entries."""
  readme = ["maths_finetuning.py", "--model", "Qwen2.5-0.5B", "--trust_region_method", "pspo", "--seed", "0"]
  positional = ["maths_finetuning.py", "Qwen2.5-0.5B", "pspo", "0"]
  assert len(readme) != 4 and len(positional) == 4


# ------------------------------------------------------------------------------------- zero_variance (not held)


def _verl07_keep(metric_vals, uid):
  """volcengine/verl@v0.7.0 recipe/dapo/dapo_ray_trainer.py:245-259: keep a uid when np.std(vals) > 0 or one row."""
  keep = np.zeros(len(uid), bool)
  for u in np.unique(uid):
    rows = uid == u
    vals = list(np.asarray(metric_vals)[rows])
    keep[rows] = np.std(vals) > 0 or len(vals) == 1
  return keep


def _overlong(lengths, max_resp_len, buffer_len, factor=1.0):
  """reward_manager/dapo.py@v0.7.0 :116-122 (and the reward loop's :103-109 when its cfg is set)."""
  exceed = np.asarray(lengths, np.float64) - (max_resp_len - buffer_len)
  return np.minimum(-exceed / buffer_len * factor, 0.0)


def test_zero_variance_their_released_reward_has_no_overlong_penalty_so_acc_equals_score():
  from rljax.filters import zero_variance  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(20261217)
  n, groups = 16, 12  # rollout.n 16
  uid = np.repeat(np.arange(groups), n)
  p = np.concatenate([[0.0, 1.0, 1.0, 0.0], rng.random(groups - 4)])  # two all-correct, two all-wrong groups
  acc = rng.random(groups * n) < p[uid]
  score = np.where(acc, 1.0, -1.0)  # math_dapo.compute_score :265
  lengths = rng.integers(100, 2048, groups * n)  # test_dapo_7b.sh: max_response_length 2048, buffer 512
  # as released (reward loop, reward_kwargs unset: reward_manager/dapo.py:33-35, 103): reward = score
  released = score
  # what the record assumed (the legacy manager's overlong penalty): score + penalty
  legacy = score + _overlong(lengths, 2048, 512)
  assert (_overlong(lengths, 2048, 512) < 0).any()
  keep_acc = _verl07_keep(acc, uid)
  np.testing.assert_array_equal(_verl07_keep(released, uid), keep_acc)  # acc = score as the filter metric
  assert (_verl07_keep(legacy, uid) & ~keep_acc).any()  # the penalty would have kept all-correct groups
  with jax.enable_x64(True):
    ours_released, _ = zero_variance(jnp.asarray(released), jnp.asarray(uid), num_groups=groups)
    ours_legacy, _ = zero_variance(jnp.asarray(legacy), jnp.asarray(uid), num_groups=groups)
  np.testing.assert_array_equal(np.asarray(ours_released), keep_acc)  # ours = theirs on the verifier's reward
  np.testing.assert_array_equal(np.asarray(ours_legacy), _verl07_keep(legacy, uid))
  # the recorded zero-test deviation: np.std([0.1] * 3) > 0 keeps that group, max − min = 0 drops it
  assert np.std([0.1] * 3) > 0
  with jax.enable_x64(True):
    k, _ = zero_variance(jnp.asarray([0.1, 0.1, 0.1]), jnp.zeros(3, jnp.int32), num_groups=1)
  assert not np.asarray(k).any()
  f = _fid("zero_variance")
  assert "dp_reward_loop.yaml:5" in f.read and "reward_manager/dapo.py:33-35" in f.read
  assert "reward_manager/dapo.py:57-59, abstract.py:64-70" in f.read
  assert "examples/gmpo_trainer/test_dapo_7b_math.sh:121-124" in f.read
  assert "The record called the scripts' overlong buffer on" in f.read
  assert "at v0.7.0 the scripts' reward has none either" in _defaults("zero_variance")["metric"][1]
  assert not any("overlong_buffer on in run_dapo_qwen2.5_32b.sh" in x for x in f.deviations)
  assert any("acc = score as a filter metric" in x for x in f.deviations)
  assert "Twelfth draw" in describe(ROWS["zero_variance"])


# ----------------------------------------------------------------------------------------------- grpo (not held)


def _verl091_grpo(scores, index, epsilon=1e-6):
  """the verl 0.9.1 PyPI wheel trainer/ppo/core_algos.py:268-331 compute_grpo_outcome_advantage (float64
  transcription): a one-row uid gets mean 0 / std 1, else torch.mean / torch.std (unbiased)."""
  scores = np.asarray(scores, np.float64)
  out = np.empty_like(scores)
  for u in dict.fromkeys(index):
    rows = np.array([i == u for i in index])
    s = scores[rows]
    mean, std = (0.0, 1.0) if s.size == 1 else (s.mean(), s.std(ddof=1))
    out[rows] = (s - mean) / (std + epsilon)
  return out


@pytest.mark.parametrize("pad_size", [1, 3])
def test_grpo_verl091_padding_rows_are_their_own_group_with_zero_advantage(pad_size):
  import rljax.advantages as A  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(20261217 + pad_size)
  n, groups = 4, 5
  real_uid = [f"u{g}" for g in range(groups) for _ in range(n)]
  real = (rng.random(groups * n) < 0.5).astype(np.float64) + rng.normal(scale=0.1, size=groups * n)
  # padding_utils.py:144-210: pad_size rows under one fresh 'pad…' uid, rm_scores 0 (:124), response_mask 0 (:101)
  uid = real_uid + ["pad0123"] * pad_size
  scores = np.concatenate([real, np.zeros(pad_size)])
  theirs = _verl091_grpo(scores, uid)
  assert np.all(theirs[groups * n:] == 0.0)  # 0/(0 + ε) or, for one row, 0/(1 + ε)
  gid = np.concatenate([np.repeat(np.arange(groups), n), np.full(pad_size, groups)])
  valid = np.concatenate([np.ones(groups * n, bool), np.zeros(pad_size, bool)])  # ours: padded rows not valid
  with jax.enable_x64(True):
    ours, _ = A.grpo(jnp.asarray(scores), jnp.asarray(gid), valid=jnp.asarray(valid), num_groups=groups + 1)
  ours = np.asarray(ours)
  np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)  # real groups unchanged, padding 0 on both
  f = _fid("grpo")
  dev = next(x for x in f.deviations if x.startswith("padded rows"))
  assert "verl v0.7.0 has no padding rows" in dev and "padding_utils.py:144-210" in dev and "as ours" in dev
  assert "v1/trainer_base.py:582, 600, 1619-1621" in dev
  assert "the record said verl has no padding rows" in f.read
  assert "verl has no padding rows" not in " ".join(x for x in f.deviations).replace("verl v0.7.0 has no", "")
  # dr_grpo shares the read constant, not the twelfth-draw note
  assert "Twelfth draw" not in _fid("dr_grpo").read


# ----------------------------------------------------------------------------------------------- passk (not held)


def _calc_adv(val, k):
  """RUCAIBox/Passk_Training@c3ba575e code/passk_adv.py:10-19 calc_adv (scipy.special.comb, exact=False)."""
  from scipy.special import comb  # pylint: disable=import-outside-toplevel
  val = np.asarray(val, np.float64)
  c = len(np.where(val == 1)[0])
  n = len(val)
  rho = 1 - comb(n - c, k) / comb(n, k)
  sigma = np.sqrt(rho * (1 - rho))
  adv_p = (1 - rho) / (sigma + 1e-6)
  adv_n = (1 - rho - comb(n - c - 1, k - 1) / comb(n - 1, k - 1)) / (sigma + 1e-6)
  new_val = np.where(val == 1, adv_p, val)
  new_val = np.where(new_val == 0, adv_n, new_val)
  return new_val, sigma


def _ours_passk(val, k):
  import rljax.advantages as A  # pylint: disable=import-outside-toplevel
  with jax.enable_x64(True):
    adv, _ = A.passk(jnp.asarray(np.asarray(val, np.float64)), jnp.zeros(len(val), jnp.int32), k=k)
  return np.asarray(adv)


def test_passk_equals_calc_adv_times_sigma_ratio_and_the_small_sigma_groups():
  checked = 0
  for n in (4, 8, 16):
    for k in range(1, n + 1):
      for c in range(0, n + 1):
        val = np.array([1.0] * c + [0.0] * (n - c))
        theirs, sigma = _calc_adv(val, k)
        ours = _ours_passk(val, k)
        if sigma > 1e-3:  # ours ÷ σ, theirs ÷ (σ + 1e-6): the recorded relative difference 1e-6/σ
          np.testing.assert_allclose(ours * sigma, theirs * (sigma + 1e-6), rtol=1e-9, atol=1e-12)
          checked += 1
        elif sigma == 0.0:  # all equal, or c > n − k: 0 on both
          assert np.all(ours == 0.0) and np.allclose(theirs, 0.0, atol=1e-12)
  assert checked > 100
  # 0 < σ ≤ 1e-6: ours 0, theirs small but not 0 (the record's corrected deviation)
  for c, sig, pos, neg in ((46, 5.6e-7, 2.0e-7, -5.1e-7), (47, 1.9e-7, 2.9e-8, -8.1e-8), (48, 4.5e-8, 1.9e-9,
                                                                                            -5.9e-9)):
    val = np.array([1.0] * c + [0.0] * (64 - c))
    theirs, sigma = _calc_adv(val, 16)
    assert 0 < sigma <= 1e-6 and math.isclose(sigma, sig, rel_tol=0.02)
    assert math.isclose(theirs[0], pos, rel_tol=0.05) and math.isclose(theirs[-1], neg, rel_tol=0.05)
    assert np.all(_ours_passk(val, 16) == 0.0)
  # a non-binary reward is left as its own advantage there (the recorded extension)
  mixed, _ = _calc_adv(np.array([1.0, 0.0, 0.5, 0.0]), 2)
  assert mixed[2] == 0.5
  f = _fid("passk")
  dev = f.deviations[0]
  assert "0 < σ ≤ 1e-6 needs C(n, k) ≳ 1e12" in dev and "n = 64, k = 16, c = 46 / 47 / 48" in dev
  assert "(all equal, or c > n − k) get 0, as theirs" not in dev
  assert "maze_verifier.py compute_score returns 1 / 0 only" in f.read
  assert "Twelfth draw" in describe(ROWS["passk"])


# ------------------------------------------------------------------------------------------- segment_ratio (held)


def _rank_grpo_item_loss(new, old, adv, item_seg_ids, loss_mask, rec_num=20, eps_low=0.06, eps_high=0.08):
  """yaochenzhu/Rank-GRPO@0808d82c libs/trl/rank_grpo_trainer.py:2016-2088, importance_sampling_level 'item'
  (beta's KL term left out: a separate kl_penalty here): seg ids clamped to [0, rec_num] (the last bin the
  overflow), per-row scatter means of log r over loss_mask, coef_1 = exp(mean) gathered back, coef_2 =
  clamp(coef_1, 1 − ε_low, 1 + ε_high), −min(coef_1·A, coef_2·A); loss_type 'bnpo' (trl 0.21.0's default):
  Σ(per_token·mask) ÷ Σmask (one micro-batch). Returns (loss, per-token loss, coef_1)."""
  log_ratio = new - old
  seg = np.clip(item_seg_ids, 0, rec_num)
  b = seg.shape[0]
  sums = np.zeros((b, rec_num + 1))
  counts = np.zeros((b, rec_num + 1))
  for i in range(b):
    np.add.at(sums[i], seg[i], log_ratio[i] * loss_mask[i])
    np.add.at(counts[i], seg[i], loss_mask[i].astype(np.float64))
  means = sums / np.maximum(counts, 1.0)
  coef_1 = np.exp(np.take_along_axis(means, seg, 1))
  coef_2 = np.clip(coef_1, 1 - eps_low, 1 + eps_high)
  per_token = -np.minimum(coef_1 * adv, coef_2 * adv)
  return (per_token * loss_mask).sum() / loss_mask.sum(), per_token, coef_1


def test_segment_ratio_equals_rank_grpo_item_level_loss_with_the_overflow_bin_as_its_own_id():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(20261217)
  b, t, rec_num = 6, 40, 4  # rec_num 4 here (20 in theirs) so that rows overflow within 40 tokens
  seg = np.zeros((b, t), np.int64)
  mask = np.zeros((b, t), bool)
  for i in range(b):  # natural item ids (a newline ends an item, the EOS belongs to the item it ends)
    valid = int(rng.integers(15, t + 1))
    ids = np.cumsum(rng.random(valid) < 0.25)
    ids = np.concatenate([[0], ids[:-1]])
    seg[i, :valid] = ids
    mask[i, :valid] = True
    seg[i, valid:] = -1  # padding after EOS: seg −1, outside the loss mask
  assert (seg[mask] >= rec_num).any()  # some overflow tokens
  old = -rng.random((b, t)) * 2 - 0.05
  new = old + rng.normal(scale=0.15, size=(b, t))
  adv = rng.normal(size=(b, t)) * mask  # per-item advantages broadcast to tokens (their normalisation upstream)
  loss_theirs, per_theirs, coef = _rank_grpo_item_loss(new, old, adv, seg, mask, rec_num=rec_num)
  inside = mask & (np.abs(coef - 1) > 0.0)
  assert (mask & ((coef < 0.94) | (coef > 1.08))).any() and inside.any()  # the clip is exercised
  ours_ids = np.where(mask, np.minimum(seg, rec_num), 0)  # the overflow bin: one spare id (rec_num)
  term = O.segment_ratio(0.06, 0.08, segment_ids=lambda batch: jnp.asarray(ours_ids), max_segments=rec_num + 1)
  per_ours, g = _ours_term(term, new, train_batch(mask, adv, old))
  np.testing.assert_allclose(per_ours[mask], per_theirs[mask], rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(per_ours.sum() / mask.sum(), loss_theirs, rtol=1e-12)  # bnpo on one micro-batch
  # the gradient through the item mean: finite differences of their loss on a few tokens
  h = 1e-6
  for i, j in zip(*np.nonzero(mask)):
    if (i * t + j) % 23:
      continue
    e = np.zeros_like(new)
    e[i, j] = h
    fd = (_rank_grpo_item_loss(new + e, old, adv, seg, mask, rec_num)[0]
          - _rank_grpo_item_loss(new - e, old, adv, seg, mask, rec_num)[0]) / (2 * h)
    assert math.isclose(g[i, j], fd, rel_tol=1e-5, abs_tol=1e-9)
  # on-policy (mu = 1: old = the detached current log-probs): coef 1, the loss is −A on both sides
  _, per_on, _ = _rank_grpo_item_loss(new, new, adv, seg, mask, rec_num=rec_num)
  per_on_ours, _ = _ours_term(term, new, train_batch(mask, adv, new))
  np.testing.assert_allclose(per_on_ours[mask], per_on[mask], rtol=1e-12, atol=1e-12)
  d = _defaults("segment_ratio")
  assert d["eps_low"] == ("0.06", "epsilon 0.06") and d["eps_high"] == ("0.08", "epsilon_high 0.08")
  assert "'bnpo'" in d["aggregation"][1]
