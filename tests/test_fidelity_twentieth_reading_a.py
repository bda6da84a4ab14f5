"""Issue #51 item 4, twentieth draw (seed 20261225), part a: an independent re-audit of five rows.

Rows drawn: passk, gaussian_reward, decoupled_ppo, token_mean, shortest_path_reward (five of the ten drawn by
``random.Random(20261225).sample(rows, 10)`` over the 109 rows).

Held (4): passk, gaussian_reward, token_mean, shortest_path_reward; their "= theirs" claims are checked below against
float64 NumPy transcriptions of the cited lines (RUCAIBox/Passk_Training@c3ba575e code/passk_adv.py:10-43;
yeppp27/VisualScore@479b9f3b openrlhf/models/remote_rm/math_verifier_wolatex_regress_specifc.py:138-235, 353-354
with RLstage1.sh's --initial_sigma 0.8; the verl 0.9.1 PyPI wheel core_algos.py:1140-1206 agg_loss with
transformer_impl.py:729-735 and the TRL 1.9.0 PyPI wheel grpo_trainer.py:3139-3142; xuyifan-0731/MobileRL-iclr@
da92ec0c training/verl/workers/reward_manager/step.py:18-66 on one step row per step).

Not held (1), the error fixed in the record and checked here (no implementation changed, no implementation bug
found):

- ``decoupled_ppo`` (FALSE line pointers): the record read "functional.py:429-545 ppo_actor_loss_fn and :185-330
  apply_rejection_sampling". At inclusionAI/AReaL@4aef98d8 apply_rejection_sampling runs :185-426 (its return at
  :422-426) and :330 lies inside the sequence-level branch for packed (1D) inputs: the token-level branch that
  their launch configs take (level 'token' by default, metric ratio, upper 5.0: :391-401), the mask update
  (:403-420) and the zeroing of the weight outside the updated mask (:421) lie after the cited range;
  ppo_actor_loss_fn runs :429-559 (its stat.update and return at :552-559). The record now cites :429-559 and
  :185-426. The values the record states are right (checked numerically below against the token-level lines).

Also read and found right (no change): passk's calc_adv counts only rewards == 1 as successes and leaves any other
value (the record's [1, 0.5, 0, 0] example reproduced); gaussian_reward's server reads the first <answer> tag and
float()s it, 0.0 on a ValueError, the dataset multipliers off (enable_dataset_specific is store_true and not passed),
update_curriculum_parameters a placeholder ('pass') so σ stays 0.8, and --normalize_reward in RLstage1.sh reaches
only a local reward model's head (launcher.py:125), not the remote server's rewards; verl 0.9.1's only worker passes
the all-reduced batch_num_tokens and dp_size to agg_loss, so token-mean is Σ_microbatch masked_sum / N_total × dp,
averaged over dp by FSDP: ours; MobileRL's load_reward_manager ('step': length_normalise default 'step',
success_penalty default False) and compute_reward's fallback (StepRewardManager returns no 'reward_extra_info', so
the KeyError path calls it again without return_dict) give the same tensor.
"""
import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _fidelity import fid as _fid, record as _record, train_batch


# ------------------------------------------------------------------------------------------------- passk (held)


def _comb(n, k):
  """scipy.special.comb(n, k) (exact=False) on the integers calc_adv passes: 0 when k > n or n < 0 or k < 0."""
  if k < 0 or n < 0 or k > n:
    return 0.0
  return float(math.comb(int(n), int(k)))


def _calc_adv(val, k):
  """RUCAIBox/Passk_Training@c3ba575e code/passk_adv.py:10-19 calc_adv, float64."""
  val = np.asarray(val, np.float64)
  c = int(np.sum(val == 1))
  n = len(val)
  rho = 1 - _comb(n - c, k) / _comb(n, k)
  sigma = math.sqrt(rho * (1 - rho))
  adv_p = (1 - rho) / (sigma + 1e-6)
  adv_n = (1 - rho - _comb(n - c - 1, k - 1) / _comb(n - 1, k - 1)) / (sigma + 1e-6)
  new = np.where(val == 1, adv_p, val)
  return np.where(new == 0, adv_n, new), sigma


def _ours_passk(r, k):
  from rljax.advantages import passk  # pylint: disable=import-outside-toplevel
  with jax.enable_x64(True):
    adv, _ = passk(jnp.asarray(r, jnp.float64), jnp.zeros(len(r), jnp.int32), k=k)
  return np.asarray(adv, np.float64)


def test_passk_equals_calc_adv_times_the_epsilon_factor_on_binary_groups():
  rng = np.random.default_rng(2508_10751)
  for n, k in ((8, 1), (8, 2), (16, 4), (16, 8), (32, 5)):
    for c in range(0, n + 1):
      r = rng.permutation(np.r_[np.ones(c), np.zeros(n - c)])
      theirs, sigma = _calc_adv(r, k)
      ours = _ours_passk(r, k)
      if sigma <= 1e-6:
        assert np.all(ours == 0.0) and np.all(np.abs(theirs) < 1e-6)
      else:  # ours ÷ σ, theirs ÷ (σ + 1e-6): ours = theirs · (σ + 1e-6)/σ
        np.testing.assert_allclose(ours, theirs * (sigma + 1e-6) / sigma, rtol=1e-9, atol=1e-12)
  # the record's non-binary example: theirs keeps 0.5 and counts it as a failure in c
  theirs, _ = _calc_adv([1, 0.5, 0, 0], 2)
  np.testing.assert_allclose(theirs, [0.999998, 0.5, -0.333333, -0.333333], atol=1e-6)
  np.testing.assert_allclose(_ours_passk([1, 0.5, 0, 0], 2), [0.894427, 0, -0.447214, -0.447214], atol=1e-6)
  # the record's tiny-σ groups (n = 64, k = 16, c = 46): σ ≈ 5.6e-7, ours 0, theirs |A| < 1e-6
  r = np.r_[np.ones(46), np.zeros(18)]
  theirs, sigma = _calc_adv(r, 16)
  assert 5.5e-7 < sigma < 5.7e-7 and np.all(np.abs(theirs) < 1e-6) and np.all(_ours_passk(r, 16) == 0.0)
  assert "code/passk_adv.py:10-19 calc_adv, 21-43 compute_advantage" in _fid("passk").read


# --------------------------------------------------------------------------------------- gaussian_reward (held)


def _visualscore_gaussian(content, sol, sigma=0.8):
  """VisualScore@479b9f3b math_verifier_wolatex_regress_specifc.py:160-235 get_reward, reward_type 'gaussian_rbf'
  (enable_dataset_specific off: σ = current_sigma = --initial_sigma)."""
  import re  # pylint: disable=import-outside-toplevel
  m = re.search(r"<answer>(.*?)</answer>", content, re.DOTALL)
  if not m:
    return 0.0
  try:
    err = float(m.group(1).strip()) - float(sol.strip())
  except ValueError:
    return 0.0
  return math.exp(-(err ** 2) / (2 * sigma ** 2))


def test_gaussian_reward_equals_their_kernel_at_sigma_0_8_within_float32():
  from rljax.rewards import gaussian_reward  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(2510_10609)
  target = np.round(rng.uniform(0, 5, 400), 3)
  pred = np.round(np.clip(target + rng.normal(scale=1.0, size=400), 0, 5), 3)
  theirs = np.array([_visualscore_gaussian(f"<think>x</think><answer>{p}</answer>", f"{t}") for p, t in
                     zip(pred, target)])
  ours, _ = gaussian_reward(jnp.asarray(pred), jnp.asarray(target), sigma=0.8)
  assert np.max(np.abs(np.asarray(ours, np.float64) - theirs)) < 1e-6
  assert _visualscore_gaussian("no tag", "2.971") == 0.0 == float(
      gaussian_reward(jnp.asarray([np.nan]), jnp.asarray([2.971]), sigma=0.8)[0][0])
  assert "sigma: ours 1.0 / theirs 0.8" in _record("gaussian_reward")


# ----------------------------------------------------------------------------------- decoupled_ppo (not held)


def _areal_token_level(new, prox, behav, adv, mask, eps_clip=0.4, upper=5.0):
  """inclusionAI/AReaL@4aef98d8 functional.py:185-426 apply_rejection_sampling (level token, metric ratio, action
  mask, lower None: :391-394 in_bounds = w <= upper, :403-406 mask update, :421 w zeroed outside it) and :429-559
  ppo_actor_loss_fn (count before rejection, token ratio, clip, w, Σ / count), float64, one micro-batch."""
  m = mask > 0
  count = max(int(m.sum()), 1)
  lr = prox - behav
  lr = np.where(np.isfinite(lr), lr, 0.0)
  w = np.exp(lr)
  m = m & (w <= upper)
  w = np.where(m, w, 0.0)
  ratio = np.where(m, np.exp(new - prox), 0.0)
  pg = np.maximum(-adv * ratio, -adv * np.clip(ratio, 1 - eps_clip, 1 + eps_clip)) * w
  return np.where(m, pg, 0.0).sum() / count


def test_decoupled_ppo_pointer_covers_the_token_level_branch_and_the_loss_matches():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  from rljax.types import PolicyOutputs  # pylint: disable=import-outside-toplevel
  read = _fid("decoupled_ppo").read
  assert "functional.py:429-559 ppo_actor_loss_fn and :185-426 apply_rejection_sampling" in read
  assert "twentieth draw" in read and ":391-401" in read
  assert "functional.py:429-545 ppo_actor_loss_fn and :185-330" not in read
  rng = np.random.default_rng(20261225)
  b, t = 6, 9
  mask = (np.arange(t)[None] < rng.integers(3, t + 1, size=(b, 1))).astype(np.float64)
  behav = -rng.uniform(0.1, 2.5, (b, t))
  prox = behav + rng.normal(scale=1.0, size=(b, t))
  new = prox + rng.normal(scale=0.4, size=(b, t))
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  assert np.any((np.exp(prox - behav) > 5.0) & (mask > 0))
  theirs = _areal_token_level(new, prox, behav, adv, mask)
  with jax.enable_x64(True):
    batch = dataclasses.replace(train_batch(mask, adv, prox), logp_behavior=jnp.asarray(behav))
    ours, _ = O.chain(O.decoupled_ppo(eps_low=0.4, behavior_cap=5.0))(
        PolicyOutputs(logp=jnp.asarray(new), entropy=None), batch)
  assert float(ours) == pytest.approx(theirs, rel=1e-12, abs=1e-15)


# -------------------------------------------------------------------------------------------- token_mean (held)


def _verl091_token_mean_step(loss, mask, ranks, micro):
  """The verl 0.9.1 PyPI wheel: transformer_impl.py:729-735 (batch_num_tokens = the mini-batch's loss_mask sum,
  all-reduced over dp), core_algos.py:1170-1175 agg_loss token-mean masked_sum / batch_num_tokens × dp_size per
  micro-batch, summed over a rank's micro-batches (backward), gradients averaged over the dp ranks (FSDP)."""
  total = mask.sum()
  dp = len(ranks)
  per_rank = []
  for rows in ranks:
    per_rank.append(sum((loss[rows][s] * mask[rows][s]).sum() / total * dp for s in micro))
  return float(np.mean(per_rank))


def test_token_mean_equals_verl091_engine_path_and_trl_dapo():
  from rljax.objectives import token_mean  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(2503_20783)
  b, t = 8, 12
  mask = (np.arange(t)[None] < rng.integers(1, t + 1, size=(b, 1))).astype(np.float64)
  loss = rng.normal(size=(b, t))
  with jax.enable_x64(True):
    num, den = token_mean(jnp.asarray(loss), jnp.asarray(mask))
  ours = float(num) / float(den)
  theirs = _verl091_token_mean_step(loss, mask, [np.arange(0, 4), np.arange(4, 8)], [slice(0, 1), slice(1, 4)])
  assert ours == pytest.approx(theirs, rel=1e-12)
  # TRL 1.9.0 'dapo': each micro-batch's Σ / (num_items_in_batch / num_processes), gradients averaged over processes
  n_items = mask.sum()
  trl = np.mean([sum((loss[r][s] * mask[r][s]).sum() / (n_items / 2) for s in (slice(0, 2), slice(2, 4)))
                 for r in (np.arange(0, 4), np.arange(4, 8))])
  assert ours == pytest.approx(trl, rel=1e-12)
  assert "core_algos.py:1140-1206 agg_loss" in _fid("token_mean").read


# ------------------------------------------------------------------------------------ shortest_path_reward (held)


def _mobilerl_penalty(uids, uuids, scores):
  """xuyifan-0731/MobileRL-iclr@da92ec0c training/verl/workers/reward_manager/step.py:18-66 check_uid_uuid_reward:
  per uid, the step-row counts of its uuids with any score == 1; min; p = max(l − min, 0)/(2l) unless every score
  of the uuid is 0 or the uid has no success."""
  table = {}
  for uid, uuid, r in zip(uids, uuids, scores):
    table.setdefault(uid, {}).setdefault(uuid, []).append(r)
  pen = {}
  for d in table.values():
    lens = [len(rs) for rs in d.values() if any(r == 1 for r in rs)]
    for uuid, rs in d.items():
      l = len(rs)
      pen[uuid] = 0.0 if all(r == 0 for r in rs) or not lens else max(l - min(lens), 0) / (2 * l)
  return pen


def test_shortest_path_reward_equals_the_step_rows_penalty():
  from rljax.rewards import shortest_path_reward  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(2509_18119)
  g, n = 5, 6
  gid = np.repeat(np.arange(g), n)
  steps = rng.integers(1, 12, g * n)
  r = rng.choice([0.0, 1.0, 0.5, -0.2], size=g * n, p=[0.4, 0.4, 0.1, 0.1])
  r[gid == 4] = np.where(r[gid == 4] == 1.0, 0.0, r[gid == 4])  # a task without a success
  uids, uuids, scores = [], [], []
  for i in range(g * n):  # one row per step, each holding the episode's score (the whole group in one batch)
    uids += [int(gid[i])] * int(steps[i])
    uuids += [i] * int(steps[i])
    scores += [float(r[i])] * int(steps[i])
  pen = _mobilerl_penalty(uids, uuids, scores)
  theirs = np.array([r[i] - pen[i] for i in range(g * n)])
  with jax.enable_x64(True):
    ours, _ = shortest_path_reward(r, steps, gid)
  np.testing.assert_allclose(np.asarray(ours, np.float64), theirs, rtol=0, atol=1e-12)
  assert "training/verl/workers/reward_manager/step.py:18-66 (check_uid_uuid_reward)" in _fid(
      "shortest_path_reward").read
