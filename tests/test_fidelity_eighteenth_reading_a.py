"""Issue #51 item 4, eighteenth draw (seed 20261223), part a: an independent re-audit of five rows.

Rows drawn: math_answer, sa_mrpo, step_episode_mix, sapo, gd2po.

Held (1): sapo; its "= theirs" claims are checked below against float64 NumPy transcriptions of verl v0.7.0
core_algos.py:1076-1158 compute_policy_loss_sapo with agg_loss 'seq-mean-token-mean' (:772-827) and the TRL 1.9.0
PyPI wheel grpo_trainer.py:3054-3066, 3092-3095, 3124-3128.

Not held (4), each error fixed in the record and checked here (no implementation changed, no implementation bug
found):

- ``math_answer`` (OMITTED, twice): our ``_math_equal`` compares two non-numeric answers with no LaTeX command by
  casefold ('\\boxed{A}' against 'a', '\\boxed{Yes}' against 'yes': ours 1), where verl v0.7.0
  math_reward.py:32-46 is_equiv compares strip_string outputs case-sensitively (0); and strip_string's '=' rule
  (:203-205: a single '=' whose left side has <= 2 characters keeps the right side, 'xy=3' -> '3', '10=5' -> '5':
  verl 1) where ours drops only '<one letter> =' (0). The record's equality row and deviations named neither.
- ``sa_mrpo`` (FALSE): the record gave the paper's batch as "global batch 256 prompts"; arXiv 2608.16072 Sec. 5.1
  says "a global batch size of 256" and Sec. 5.5 "a batch size of 256", neither saying prompts or responses (the
  whitening pool is 256 or 2048 rows). Also added: the γ of the runs other than Table 1's SA-MRPO_2obj is not
  stated. The paper's Eq. 1 / Algorithm 1 (population std) is checked against ours below.
- ``step_episode_mix`` (OMITTED, three): X-PLUG/MobileAgent UI-S1/verl/trainer/ppo/dapo_ray_trainer.py:379-387 raises
  ValueError when max_num_gen_batches = 10 generation batches leave fewer than train_batch_size kept uids (the run
  stops; the record said "resampling up to 10 generation batches"); the group size and batch the script sets
  (rollout.n = 8, data.train_batch_size = WORLD_SIZE x 8, train_example.sh:44, 59, 89) were not in the defaults;
  the second launch script UI-S1/scripts/train_example_32b.sh@6ea68d40 passes algorithm.PATCH_THRESHOLD (:95) and
  algorithm.filter_groups.std_DAPO_THRESHOLD (:98), keys their config lacks, which Hydra refuses (composing their
  traj_grpo.yaml over ppo_trainer.yaml with hydra-core 1.3.2: "Could not override
  'algorithm.PATCH_THRESHOLD'"): it does not start as released, and the record did not name it.
- ``gd2po`` (OMITTED): the ratio rule's ε. Qwen-Applications/GD2PO@f1ad765b tool-calling/verl/trainer/ppo/
  ray_trainer.py:263, 342-346 divides the token sums, Σ_k A_k·L / (Σ_k |A_k|·L + 1e-8) = Σ_k A_k / (Σ_k |A_k| +
  1e-8/L); ours adds 1e-8 to Σ_k |A_k|. The record listed "ratio eps: ours 1e-8 / theirs 1e-8" as equal; equal at
  L = 1 only. The hard and ratio rules, keep ratio and masked whitening are checked against a transcription below.
"""
import numpy as np
import jax
import jax.numpy as jnp

from _fidelity import defaults as _defaults, fid as _fid, record as _record
from test_fidelity_third_reading import _verl_math_score as _verl_compute_score  # verl's math_reward


# ----------------------------------------------------------------------------------------- math_answer (not held)
# verl v0.7.0 (f9c855f7) verl/utils/reward_score/math_reward.py:17-227 (compute_score, is_equiv, remove_boxed,
# last_boxed_only_string, strip_string and its helpers): the third reading's transcription.


def _ours_math(completion, reference):
  from rljax.rewards import math_answer  # pylint: disable=import-outside-toplevel
  return float(math_answer([completion], [reference], sources=("boxed",))[0])


def test_math_answer_equals_verl_on_boxed_answers_where_the_record_says_so():
  for sol, ref in (("so \\boxed{\\frac{1}{2}}", "\\frac12"), ("\\boxed{\\dfrac{3}{4}}", "\\frac{3}{4}"),
                   ("\\boxed{10^\\circ}", "10"), ("\\boxed{x = 5}", "5"), ("\\boxed{B}", "B"),
                   ("\\boxed{\\left(1,2\\right)}", "(1,2)"), ("no box, 42", "42"), ("\\boxed{7}", "8"),
                   ("\\boxed{50\\%}", "50")):
    assert _ours_math(sol, ref) == _verl_compute_score(sol, ref), (sol, ref)


def test_math_answer_case_and_assignment_rules_differ_from_verl_as_the_record_now_says():
  # case: ours casefolds two command-free non-numeric answers; strip_string keeps the case
  for sol, ref in (("so \\boxed{A}", "a"), ("\\boxed{Yes}", "yes")):
    assert _ours_math(sol, ref) == 1.0 and _verl_compute_score(sol, ref) == 0.0
  # '=': strip_string keeps the right side of a single '=' after <= 2 characters; ours only after one letter
  for sol, ref in (("\\boxed{xy=3}", "3"), ("\\boxed{10=5}", "5")):
    assert _ours_math(sol, ref) == 0.0 and _verl_compute_score(sol, ref) == 1.0
  f, d = _fid("math_answer"), _defaults("math_answer")
  assert "casefold" in d["equality"][0] and "case-sensitive" in d["equality"][1]
  assert any("case-insensitively" in x and "verl 0" in x for x in f.deviations)
  assert any("≤ 2 characters" in x and "verl 1, ours 0" in x for x in f.deviations)
  assert "Eighteenth draw" in f.read and "math_reward.py:32-46" in f.read and ":203-205" in f.read


# ------------------------------------------------------------------------------------------ sa_mrpo (not held)


def _paper_sa_mrpo(r, gid, lo, hi, gamma, w=None):
  """arXiv 2608.16072 Sec. 3 (population mean/std), Sec. 4.1 (A_k, s^(k), w̃_k), Eq. 1, Algorithm 1."""
  b, k = r.shape
  w = np.ones(k) if w is None else np.asarray(w, np.float64)
  a = np.zeros((b, k))
  for g in np.unique(gid):
    rows = gid == g
    a[rows] = (r[rows] - r[rows].mean(0)) / r[rows].std(0)
  s = (r.mean(0) - lo) / (hi - lo)
  agg = a @ (w * (1 - s) ** gamma)
  return (agg - agg.mean()) / agg.std(), s


def test_sa_mrpo_equals_the_papers_eq1_up_to_eps():
  from rljax.advantages import sa_mrpo  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(20261223)
  gid = np.repeat(np.arange(6), 8)  # G = 8 (Sec. 5.1)
  r = np.stack([rng.integers(0, 2, 48).astype(np.float64), rng.random(48)], 1)
  for g in range(6):  # every group has spread in both columns (the paper divides by σ)
    r[g * 8, 0], r[g * 8 + 1, 0] = 0.0, 1.0
  want, s = _paper_sa_mrpo(r, gid, 0.0, 1.0, 0.25, w=[1.0, 0.5])
  with jax.enable_x64(True):
    got, info = sa_mrpo(jnp.asarray(r), jnp.asarray(gid), weights=[1.0, 0.5], eps=1e-12)
  np.testing.assert_allclose(np.asarray(info["saturation"]), s, rtol=1e-13)
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-9, atol=1e-10)
  with jax.enable_x64(True):
    got6, _ = sa_mrpo(jnp.asarray(r), jnp.asarray(gid), weights=[1.0, 0.5])  # ours' default eps 1e-6
  assert 1e-8 < np.max(np.abs(np.asarray(got6) - want)) < 1e-4


def test_sa_mrpo_record_no_longer_says_256_prompts():
  f, d = _fid("sa_mrpo"), _defaults("sa_mrpo")
  theirs = d["group size / batch"][1]
  assert "256 prompts" not in theirs and "the record said '256 prompts'" in _record("sa_mrpo")
  assert "'a global batch size of 256'" in theirs and "does not say whether 256 counts prompts" in theirs
  assert "not stated for the other runs" in d["gamma"][1]
  assert "Eighteenth draw" in f.read


# ----------------------------------------------------------------------------------- step_episode_mix (not held)


def _uis1_turn_rows(turn_r, n_turns, uid, gamma, eps=1e-6, ep_w=1.0, step_w=1.0):
  """X-PLUG/MobileAgent@93afb003 UI-S1/uis1/core_uis1.py, mode 'mean_std_norm', extract_match all True: one row per
  (trajectory i, step m); compute_step_discounted_returns (G = r + γ G'), episode_norm_reward (the turn's reward over
  every row of the uid, torch.std unbiased; one row: mean 0, std 1), step_norm_reward (by (uid, step); one row:
  mean = itself, std 1); A = ep_w · episode + step_w · step. Returns {(i, m): A}."""
  rows = [(i, m) for i in range(len(n_turns)) for m in range(n_turns[i])]
  ret = {}
  for i in range(len(n_turns)):
    run = 0.0
    for m in reversed(range(n_turns[i])):
      run = turn_r[i, m] + gamma * run
      ret[i, m] = run
  out = {}
  for (i, m) in rows:
    pool = [turn_r[j, k] for (j, k) in rows if uid[j] == uid[i]]
    mu, sd = (0.0, 1.0) if len(pool) == 1 else (np.mean(pool), np.std(pool, ddof=1))
    ep = (turn_r[i, m] - mu) / (sd + eps)
    same = [ret[j, k] for (j, k) in rows if uid[j] == uid[i] and k == m]
    mu2, sd2 = (np.mean(same), 1.0) if len(same) == 1 else (np.mean(same), np.std(same, ddof=1))
    st = (ret[i, m] - mu2) / (sd2 + eps)
    out[i, m] = ep_w * ep + step_w * st
  return out


def test_step_episode_mix_at_their_script_settings_equals_compute_uis1_outcome_advantage():
  from rljax.advantages import step_episode_mix  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(20261223)
  n_turns = np.array([3, 2, 3, 1, 3, 3, 2, 3])  # step 2 of group 0 reached by one trajectory only (a singleton)
  uid = np.repeat([0, 1], 4)
  b, m_max, per = 8, 3, 4
  turn_r = np.round(rng.random((b, m_max)), 3)
  turn_valid = np.arange(m_max)[None, :] < n_turns[:, None]
  turn_r = np.where(turn_valid, turn_r, 0.0)
  turn_ids = np.repeat(np.arange(m_max), per)[None, :].repeat(b, 0)
  turn_ids = np.where(turn_ids < n_turns[:, None], turn_ids, -1)
  mask = turn_ids >= 0
  want = _uis1_turn_rows(turn_r, n_turns, uid, 0.5)
  with jax.enable_x64(True):
    adv, _ = step_episode_mix(jnp.asarray(turn_r), jnp.asarray(turn_ids), jnp.asarray(turn_r.sum(1)),
                              jnp.asarray(uid), mask=jnp.asarray(mask), step_weight=1.0, episode_weight=1.0,
                              episode="turns", gamma=0.5, turn_valid=jnp.asarray(turn_valid))
  adv = np.asarray(adv)
  for (i, m), a in want.items():
    np.testing.assert_allclose(adv[i, m * per:(m + 1) * per], a, rtol=1e-12, atol=1e-12)


def _uis1_filter_loop(kept_per_batch, train_batch_size, max_num_gen_batches=10):
  """dapo_ray_trainer.py:250-262, 379-387 (one step): generation batches until train_batch_size uids are kept;
  num_gen_batches >= max_num_gen_batches still short raises ValueError."""
  num_prompt, num_gen = 0, 0
  for kept in kept_per_batch:
    num_gen += 1
    num_prompt += kept
    if num_prompt < train_batch_size:
      if max_num_gen_batches <= 0 or num_gen < max_num_gen_batches:
        continue
      raise ValueError(f"{num_gen=} >= {max_num_gen_batches=}")
    return num_gen
  return None


def test_step_episode_mix_record_says_the_filter_stops_the_run_and_names_the_32b_script():
  assert _uis1_filter_loop([3, 3, 3], 8) == 3
  try:
    _uis1_filter_loop([0] * 10, 8)
    raised = False
  except ValueError:
    raised = True
  assert raised
  f, d = _fid("step_episode_mix"), _defaults("step_episode_mix")
  filt = d["group filter (not this stage's)"][1]
  assert "raises ValueError and the run stops" in filt and "resampling up to 10" not in filt
  assert "rollout.n = 8" in d["group size / batch"][1] and "WORLD_SIZE × 8" in d["group size / batch"][1]
  assert "train_example_32b.sh@6ea68d40" in f.read and "PATCH_THRESHOLD (:95)" in f.read
  assert "traj_grpo" in f.read and "dapo_ray_trainer.py:379-387" in f.read
  assert any("train_example_32b.sh, does not start as released" in x for x in f.deviations)


# --------------------------------------------------------------------------------------------------- sapo (held)


def _verl_sapo(old, new, adv, mask, tau_pos=1.0, tau_neg=1.05):
  """verl v0.7.0 core_algos.py:1108-1144: log r clamped to ±20, tau by A > 0, −A σ(τ(r − 1))·4/τ, then agg_loss
  'seq-mean-token-mean' without global counts (:814-819: row sum / (n + 1e-8), mean over non-empty rows)."""
  r = np.exp(np.clip(new - old, -20.0, 20.0))
  tau = np.where(adv > 0, tau_pos, tau_neg)
  pg = -(1 / (1 + np.exp(-tau * (r - 1.0)))) * (4.0 / tau) * adv
  n = mask.sum(-1)
  seq = (pg * mask).sum(-1) / (n + 1e-8)
  keep = (n > 0).astype(np.float64)
  return (seq * keep).sum() / keep.sum(), pg


def _trl_sapo(old, new, adv, mask, tau_pos=1.0, tau_neg=1.05):
  """The TRL 1.9.0 PyPI wheel grpo_trainer.py:3054-3056, 3066, 3092-3095, 3124-3125 (token level, no clamp)."""
  r = np.exp(new - old)
  tau = np.where(adv > 0, tau_pos, tau_neg)
  pg = -(1 / (1 + np.exp(-tau * (r - 1)))) * 4 / tau * adv
  return ((pg * mask).sum(-1) / np.maximum(mask.sum(-1), 1.0)).mean()


def test_sapo_equals_verl_and_trl_at_the_defaults():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  from rljax.objectives import seq_mean_token_mean  # pylint: disable=import-outside-toplevel
  from rljax.types import PolicyOutputs, TrainBatch  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(18)
  b, t = 7, 10
  mask = (rng.random((b, t)) < 0.75).astype(np.float64)
  mask[:, 0] = 1.0
  adv = np.repeat(rng.normal(size=(b, 1)), t, 1)
  adv[1] = 0.0  # A = 0 takes tau_neg
  old = -rng.random((b, t)) * 3
  new = old + rng.normal(scale=0.5, size=(b, t))
  new[2, 0] = old[2, 0] + 25.0  # past verl's ±20 clamp (and ours)
  adv[2] = -0.3
  with jax.enable_x64(True):
    batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask), advantages=jnp.asarray(adv),
                       group_id=jnp.arange(b, dtype=jnp.int32), logp_old=jnp.asarray(old))
    loss, _ = O.chain(O.sapo(), aggregate=seq_mean_token_mean)(PolicyOutputs(logp=jnp.asarray(new)), batch)
    per_tok, _ = O.sapo()(PolicyOutputs(logp=jnp.asarray(new)), batch)
  v_loss, v_pg = _verl_sapo(old, new, adv, mask)
  np.testing.assert_allclose(np.asarray(per_tok)[mask > 0], v_pg[mask > 0], rtol=1e-12)
  np.testing.assert_allclose(float(loss), v_loss, rtol=1e-7)  # verl's (n + 1e-8), listed in the record
  assert abs(float(loss) - v_loss) > 0.0
  keep = np.ones(b, bool)
  keep[2] = False  # TRL has no clamp: equal on the rows that stay inside ±20
  np.testing.assert_allclose(
      _trl_sapo(old[keep], new[keep], adv[keep], mask[keep]),
      _verl_sapo(old[keep], new[keep], adv[keep], mask[keep])[0], rtol=1e-7)
  d = _defaults("sapo")
  assert d["tau_pos"] == ("1.0", "1.0 (verl tau_pos, TRL sapo_temperature_pos)")
  assert d["tau_neg"][0] == "1.05" and d["tau_neg"][1].startswith("1.05")


# ------------------------------------------------------------------------------------------------ gd2po (not held)


def _gd2po_theirs(r, uid, lengths, ratio_threshold=None, ratio_eps=1e-8, eps=1e-6):
  """Qwen-Applications/GD2PO@f1ad765b tool-calling/verl/trainer/ppo/ray_trainer.py:243-270 (per-reward GRPO over
  response tokens, core_algos.py compute_grpo_outcome_advantage: unbiased std + 1e-6, a singleton mean 0 / std 1;
  token sums A·L), :273-277 (sign conflict at ±1e-8), :319-360 and :451-519 (the ratio rule, the group keep ratio
  kept/group size, applied before whitening), :280-295 (_apply_gdpo_keep_mask: masked_whiten over kept tokens,
  torch_functional.py:171-223: masked_mean ÷ (n + 1e-8), unbiased masked_var, rsqrt(var + 1e-8)). Returns the
  per-row advantage (constant over its L tokens) and the ratio."""
  b, k = r.shape
  a = np.zeros((b, k))
  for g in np.unique(uid):
    rows = uid == g
    if rows.sum() == 1:
      a[rows] = r[rows] / (1.0 + eps)
    else:
      a[rows] = (r[rows] - r[rows].mean(0)) / (r[rows].std(0, ddof=1) + eps)
  roll = a * lengths[:, None]
  conflict = (roll > 1e-8).any(1) & (roll < -1e-8).any(1)
  ratio = roll.sum(1) / (np.abs(roll).sum(1) + ratio_eps)
  if ratio_threshold is not None:
    conflict = conflict & (np.abs(ratio) < ratio_threshold)
  keep = ~conflict
  q = np.array([keep[uid == uid[i]].sum() / (uid == uid[i]).sum() for i in range(b)])
  x = a.sum(1) * q * keep
  m = keep * lengths  # token counts of the whitening mask
  n = m.sum()
  mean = (x * m).sum() / (n + 1e-8)
  var = ((x - mean) ** 2 * m).sum() / (n + 1e-8) * n / (n - 1)
  return (x - mean) / np.sqrt(var + 1e-8) * keep, ratio


def _gd2po_data():
  rng = np.random.default_rng(20261223)
  uid = np.repeat(np.arange(8), 4)  # rollout.n = 4
  r = np.stack([rng.integers(0, 2, 32), rng.integers(0, 2, 32), np.round(rng.random(32), 2)], 1).astype(np.float64)
  return r, uid


def test_gd2po_equals_their_hard_and_ratio_rules_at_one_token_per_row():
  from rljax.advantages import gd2po  # pylint: disable=import-outside-toplevel
  r, uid = _gd2po_data()
  ones = np.ones(32)
  for tau in (None, 0.2, 0.8):
    want, _ = _gd2po_theirs(r, uid, ones, ratio_threshold=tau)
    with jax.enable_x64(True):
      got, info = gd2po(jnp.asarray(r), jnp.asarray(uid), conflict_tol=1e-8, ratio_threshold=tau)
    assert 0 < np.sum(~np.asarray(info["keep"])) < 32
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-7, atol=1e-9)  # verl's (n + 1e-8) divisors


def test_gd2po_ratio_eps_is_on_the_token_sums_as_the_record_now_says():
  r, uid = _gd2po_data()
  lengths = np.arange(32) % 5 + 1.0
  _, ratio = _gd2po_theirs(r, uid, lengths)
  b, k = r.shape
  a = np.zeros((b, k))
  for g in np.unique(uid):
    rows = uid == g
    a[rows] = (r[rows] - r[rows].mean(0)) / (r[rows].std(0, ddof=1) + 1e-6)
  ours = a.sum(1) / (np.abs(a).sum(1) + 1e-8)  # rljax gd2po's ratio (its 1e-8 on Σ_k |A_k|)
  as_record = a.sum(1) / (np.abs(a).sum(1) + 1e-8 / lengths)
  np.testing.assert_allclose(ratio, as_record, rtol=1e-13, atol=1e-15)
  long_rows = (lengths > 1) & (np.abs(a).sum(1) > 0) & (a.sum(1) != 0)
  assert np.all(np.abs(ratio - ours)[long_rows] > 0)
  np.testing.assert_allclose(ratio, ours, rtol=1e-7)
  d, f = _defaults("gd2po"), _fid("gd2po")
  assert "on the token sums" in d["ratio eps"][1] and "1e-8/L" in d["ratio eps"][1]
  assert any("the ratio rule's ε" in x and "agree at L = 1" in x for x in f.deviations)
