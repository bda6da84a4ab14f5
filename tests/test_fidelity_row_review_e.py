"""Issue #51 per-row review, part e: an independent second reading of six records (chosen per row, not drawn).

Rows: qae, overlong_penalty, role_ema_baseline, rorecomp, rubric_dropout, sft_nll. Each cited source was read whole
at the cited commit (volcengine/verl@v0.7.0 (f9c855f7) and verl main at 26a734e7 (24 Sep 2025), the verl 0.9.1 and
TRL 1.9.0 PyPI wheels, spiral-rl/spiral@a02d0ed8 with sail-sg/oat@v0.1.3.post2, the QAE README (pages corpus), the
RoRecomp abstract and ICLR reviews, the Rubric Dropout abstract, reading report and third-party code); every "= theirs"
claim is checked below against a float64 NumPy transcription of the cited lines written for these tests.

Held (2): rorecomp (interpretation row: no code exists; its rule, tie and all-correct claims checked against a
transcription of the record's own statement), rubric_dropout (mode='exact' drops Python's round(p·C); the
third-party floor(f·C) / min_keep 3 example; the "normaliser cancels under GRPO" claim checked numerically).

Not held (4); each error fixed in the RECORD (no implementation changed, no implementation bug found):

- ``overlong_penalty`` (FALSE placement, OMITTED what runs): the record cited verl v0.7.0's legacy
  verl/workers/reward_manager/dapo.py as theirs and the DAPO script's overlong_buffer 4096 / 1.0 as their values.
  At v0.7.0 the default reward_model is dp_reward_loop (ppo_trainer.yaml:34, use_reward_loop True); the DAPO
  trainer generates through the agent loop (dapo_ray_trainer.py:159), whose _compute_score (agent_loop.py:385-393,
  689-718) scores every sample with the reward loop's DAPORewardManager, which reads
  reward_model.reward_kwargs.overlong_buffer_cfg / max_resp_len (reward_loop/reward_manager/dapo.py:33-35); the
  scripts set reward_model.overlong_buffer.* only (run_dapo_qwen2.5_32b.sh:117-120) and the legacy manager returns
  the rm_scores unchanged (reward_manager/dapo.py:57-59): as released their reward has NO overlong penalty.
- ``qae`` (FALSE at the cited version; OMITTED): the record said their runs' rewards carry the overlong penalty,
  citing the same v0.7.0 files (false there, as above). The QAE fork is not stored; its README's "core_algos.py
  (lines ~315-319)" fits verl main of 24-27 Sep 2025 (26a734e7: scores_tensor at :314, the mean at :315), where the
  DAPO trainer scored with the legacy manager (self.reward_fn, dapo_ray_trainer.py:181) and the penalty did apply:
  the record now says both and that the fork's version is an inference. Also omitted: stock verl passes no config to
  compute_grpo_outcome_advantage (DAPO trainer v0.7.0 :323-330; compute_advantage's GRPO branch ray_trainer.py:
  234-246), so the README's quoted lines alone read quantile_k = −1.0 and give the mean (their trainer change that
  reads quantile_k is not stored).
- ``role_ema_baseline`` (OMITTED, placement on which data and a scale): SPIRAL's actor plays whole games, each
  moving the EMA in prepare_trajectories, until ≥ 16 turns (rollout_batch_size_per_device in run.sh), then keeps a
  random 16 (train_spiral.py:186-200): the EMA moves with turns that never reach the batch; ours only with the
  batch's rows. And oat's PPOArgs.reward_scale (1.0, oat/algorithms/ppo.py:83-86, :358-362) multiplies the shaped
  reward again in the learner (train_spiral.py:820-824 removes oat's group baseline). Neither was listed.
- ``sft_nll`` (OMITTED, twice; the DPO review's finding one row over): TRL's SFTConfig max_length 1024 /
  truncation_mode 'keep_start' (sft_config.py:205-219) cuts prompt + completion to their first 1024 tokens in
  _prepare_dataset and drops examples left with no label (sft_trainer.py:1571-1598), so only completion tokens
  inside the first 1024 enter the loss and num_items_in_batch; and router_aux_loss_coef 0.001 (sft_config.py:
  156-162) adds an MoE policy's load-balancing loss (sft_trainer.py:1357-1365, :335-360). Neither was listed.
"""
import math
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np

from rljax import advantages as A
from rljax import filters as F
from rljax import objectives as O
from rljax import rewards as R
from rljax.types import PolicyOutputs, TrainBatch
from _fidelity import any_deviation as _any_dev
from _fidelity import ROWS, defaults as _defaults, fid as _fid, record as _record



# ============================================================================================ overlong_penalty


def _verl_reward_loop_dapo(score, valid_response_length, overlong_buffer_cfg, max_resp_len):
  """verl v0.7.0 experimental/reward_loop/reward_manager/dapo.py:101-109 (run_single's reward), float32 as torch
  computes it (an int64 length tensor ÷ a Python int is float32; the reward lands in a float32 tensor)."""
  reward = np.float32(score)
  if overlong_buffer_cfg is not None and overlong_buffer_cfg["enable"]:
    buf = overlong_buffer_cfg["len"]
    expected = max_resp_len - buf
    exceed = np.int64(valid_response_length) - expected
    over = np.float32(np.float32(-exceed) / np.float32(buf)) * np.float32(overlong_buffer_cfg["penalty_factor"])
    reward = np.float32(reward + min(over, np.float32(0.0)))
  return reward


def _v070_reward_loop_cfg(cli_overrides):
  """What the reward loop's DAPORewardManager reads at v0.7.0 (reward_loop/reward_manager/dapo.py:33-35) from the
  Hydra overrides a script passes: only reward_model.reward_kwargs.* reaches it."""
  kw = {k[len("+reward_model.reward_kwargs."):]: v for k, v in cli_overrides.items()
        if k.startswith("+reward_model.reward_kwargs.")}
  cfg = {k[len("overlong_buffer_cfg."):]: v for k, v in kw.items() if k.startswith("overlong_buffer_cfg.")}
  return (cfg or None), kw.get("max_resp_len")


_DAPO_32B_SCRIPT = {  # recipe/dapo/run_dapo_qwen2.5_32b.sh:18-21, 117-120 at v0.7.0
    "data.max_response_length": 20480, "reward_model.reward_manager": "dapo",
    "reward_model.overlong_buffer.enable": True, "reward_model.overlong_buffer.len": 4096,
    "reward_model.overlong_buffer.penalty_factor": 1.0}
_GMPO_SCRIPT_FORM = {  # examples/gmpo_trainer/test_dapo_7b_math.sh:120-125 at v0.7.0 (the form that reaches it)
    "+reward_model.reward_kwargs.overlong_buffer_cfg.enable": True,
    "+reward_model.reward_kwargs.overlong_buffer_cfg.len": 4096,
    "+reward_model.reward_kwargs.overlong_buffer_cfg.penalty_factor": 1.0,
    "+reward_model.reward_kwargs.overlong_buffer_cfg.log": False,
    "+reward_model.reward_kwargs.max_resp_len": 20480}


def _overlong_stage(**kw):
  return ROWS["overlong_penalty"].stage(**kw)


def test_overlong_penalty_the_dapo_script_adds_none_at_v070_and_the_stage_matches_the_form_that_reaches_it():
  lengths = np.array([100, 16384, 16385, 18000, 20000, 20480], np.int32)
  scores = np.array([1.0, -1.0, 1.0, 1.0, -1.0, -1.0], np.float32)
  # as released: nothing under reward_kwargs -> the manager's overlong_buffer_cfg is None -> the score alone
  cfg, max_resp = _v070_reward_loop_cfg(_DAPO_32B_SCRIPT)
  assert cfg is None and max_resp is None
  as_released = np.array([_verl_reward_loop_dapo(s, n, cfg, max_resp) for s, n in zip(scores, lengths)])
  np.testing.assert_array_equal(as_released, scores)
  # the reward_kwargs form: the penalty; our stage (float32, the loop's reward dtype) equals it
  cfg, max_resp = _v070_reward_loop_cfg(_GMPO_SCRIPT_FORM)
  theirs = np.array([_verl_reward_loop_dapo(s, n, cfg, max_resp) for s, n in zip(scores, lengths)])
  stage = _overlong_stage(buffer_len=4096, max_len=20480)
  data = SimpleNamespace(lengths=lengths, rewards=scores.copy())
  ours, _ = stage.fn(data)
  assert np.asarray(ours).dtype == np.float32
  np.testing.assert_array_equal(np.asarray(ours), theirs)
  assert not np.array_equal(theirs, as_released)  # the two readings differ: the record must say which runs
  # the corrected record
  f = _fid("overlong_penalty")
  assert "reward_model.reward_kwargs.overlong_buffer_cfg" in f.read and "dapo_ray_trainer.py:159" in f.read
  assert "reward_manager/dapo.py:57-59" in f.read and "run_dapo_qwen2.5_32b.sh:117-120" in f.read
  assert "reward_loop/reward_manager/dapo.py (default)" in f.reference
  assert "no penalty as released" in _defaults("overlong_penalty")["buffer_len"][1]
  assert "agent loop" in f.placement and "only when reward_kwargs.overlong_buffer_cfg is set" in f.placement
  assert _any_dev("overlong_penalty", "as released add no penalty", "reward_kwargs.max_resp_len")


def test_overlong_penalty_float64_function_equals_verl_formula_exactly():
  lengths = np.arange(16000, 20481, 37, dtype=np.float64)
  with jax.enable_x64(True):
    ours = np.asarray(R.overlong_penalty(jnp.asarray(lengths), max_len=20480, buffer_len=4096)[0])
  theirs = np.minimum(-(lengths - (20480 - 4096)) / 4096 * 1.0, 0.0)
  assert ours.dtype == np.float64
  np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-15)


# ========================================================================================================= qae


def _torch_quantile_linear(x, q):
  """torch.quantile's default ('linear'): sorted s, h = q·(n − 1), s[⌊h⌋] + (h − ⌊h⌋)(s[⌈h⌉] − s[⌊h⌋])."""
  s = np.sort(np.asarray(x, np.float64))
  h = q * (len(s) - 1)
  lo, hi = int(math.floor(h)), int(math.ceil(h))
  return s[lo] + (h - lo) * (s[hi] - s[lo])


def _verl_grpo_qae(scores, index, config=None, eps=1e-6):
  """verl's compute_grpo_outcome_advantage (v0.7.0 core_algos.py:301-328) with the README's lines in place of :317
  (quantile_k = config.get('quantile_k', -1.0) if config else -1.0; the quantile only for 0 < K < 1)."""
  scores = np.asarray(scores, np.float64)
  out = np.empty_like(scores)
  for g in np.unique(index):
    m = index == g
    s = scores[m]
    if len(s) == 1:
      mean, std = 0.0, 1.0
    else:
      k = config.get("quantile_k", -1.0) if config else -1.0
      mean = _torch_quantile_linear(s, k) if 0 < k < 1 else s.mean()
      std = s.std(ddof=1)
    out[m] = (s - mean) / (std + eps)
  return out


def test_qae_equals_readme_lines_when_config_reaches_them_and_stock_verl_gives_the_mean():
  rng = np.random.default_rng(51)
  gid = np.repeat(np.arange(6), 16)
  score = np.where(rng.random(96) < 0.35, 1.0, -1.0)  # math_dapo ±1 (v0.7.0 as released: no overlong penalty)
  score[:16] = -1.0
  score[3] = 1.0  # a hard group
  with jax.enable_x64(True):
    ours = np.asarray(A.qae(jnp.asarray(score), jnp.asarray(gid), quantile=0.4, mode="authors")[0])
    grpo_like = np.asarray(A.qae(jnp.asarray(score), jnp.asarray(gid), quantile=1.0, mode="authors")[0])
  theirs = _verl_grpo_qae(score, gid, config={"quantile_k": 0.4})
  np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
  # stock verl: the DAPO trainer / compute_advantage pass config=None -> quantile_k = -1.0 -> the mean baseline
  stock = _verl_grpo_qae(score, gid, config=None)
  np.testing.assert_allclose(grpo_like, stock, rtol=1e-12, atol=1e-12)  # mode='authors', K = 1: their mean fallback
  assert np.abs(stock - theirs).max() > 0.5  # the plumbing decides which estimator runs
  d = _defaults("qae")
  assert "±1 only" in d["reward the quantile is over"][1] and "v0.7.0" in d["reward the quantile is over"][1]
  assert "quantile_k = −1.0" in d["quantile_k reaching the advantage"][1]
  f = _fid("qae")
  assert "26a734e7" in f.read and "reward_model.reward_kwargs.overlong_buffer_cfg" in f.read
  assert "ray_trainer.py:234-246" in f.read and "dapo_ray_trainer.py:323-330" in f.read
  assert _any_dev("qae", "v0.7.0 as released", "±1 only")
  assert _any_dev("qae", "passes no config", "mean baseline")


def test_qae_over_the_two_readings_of_their_reward():
  """v0.7.0 as released (±1) = the qae stage alone; the Sep-2025 legacy manager (+ penalty) = with the stage."""
  rng = np.random.default_rng(7)
  gid = np.repeat(np.arange(4), 16)
  score = np.where(rng.random(64) < 0.5, 1.0, -1.0)
  lengths = rng.integers(12000, 20481, 64)
  legacy = score + np.minimum(-(lengths - (20480 - 4096)) / 4096.0, 0.0)  # verl 26a734e7 reward_manager/dapo.py:116-122
  with jax.enable_x64(True):
    pen = np.asarray(R.overlong_penalty(jnp.asarray(lengths, jnp.float64), max_len=20480, buffer_len=4096)[0])
    a_plain = np.asarray(A.qae(jnp.asarray(score), jnp.asarray(gid), quantile=0.4, mode="authors")[0])
    a_shaped = np.asarray(A.qae(jnp.asarray(score + pen), jnp.asarray(gid), quantile=0.4, mode="authors")[0])
  np.testing.assert_allclose(a_plain, _verl_grpo_qae(score, gid, {"quantile_k": 0.4}), rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(a_shaped, _verl_grpo_qae(legacy, gid, {"quantile_k": 0.4}), rtol=1e-12, atol=1e-12)
  assert np.abs(a_plain - a_shaped).max() > 1e-3


# =========================================================================================== role_ema_baseline


class _SpiralEMA:  # spiral/utils.py:18-32
  def __init__(self, decay):
    assert 0.0 < decay < 1.0
    self.decay, self.value = decay, 0.0

  def update(self, x):
    self.value = self.decay * self.value + (1 - self.decay) * x
    return self.value


def _spiral_game(emas, rewards, turns, *, reward_scaling=1.0, gamma=1.0, oat_reward_scale=1.0):
  """train_spiral.py:484-514 (prepare_trajectories) then oat's learner (ppo.py:358-362, :449-458 and the
  compute_monte_carlo_advantages override, train_spiral.py:820-824): per trained role, its turns' advantages."""
  out = {}
  for pid in (0, 1):
    r = rewards[pid] * reward_scaling
    b = emas[pid].value  # read before the update
    emas[pid].update(r)
    r -= b
    advs = [r * gamma ** (turns[pid] - i - 1) * oat_reward_scale for i in range(turns[pid])]
    out[pid] = [a for a in advs if a != 0]  # filter_zero_adv
  return out


def test_role_ema_equals_spiral_with_one_game_per_key_per_batch_and_differs_after_their_subsample():
  rng = np.random.default_rng(3)
  emas = {0: _SpiralEMA(0.95), 1: _SpiralEMA(0.95)}
  est = A.role_ema_baseline(num_keys=2, decay=0.95)
  state = est.init()
  for _ in range(6):  # one Kuhn-poker-like game per batch, 2 turns per role, rows keyed by role (task_id)
    rew = {0: float(rng.choice([-1.0, 1.0])), 1: 0.0}
    rew[1] = -rew[0]
    theirs = _spiral_game(emas, rew, {0: 2, 1: 2})
    r = np.array([rew[0], rew[0], rew[1], rew[1]], np.float32)
    adv, _, state = est.update(state, jnp.asarray(r), jnp.asarray([0, 0, 1, 1]))
    adv = np.asarray(adv)
    np.testing.assert_allclose(adv[:2], theirs[0] if theirs[0] else [0.0, 0.0], rtol=0, atol=1e-6)
    np.testing.assert_allclose(adv[2:], theirs[1] if theirs[1] else [0.0, 0.0], rtol=0, atol=1e-6)
  np.testing.assert_allclose(np.asarray(state.baseline), [emas[0].value, emas[1].value], rtol=0, atol=1e-6)
  # their step: games until >= 16 turns, a random 16 kept (train_spiral.py:186-200); the EMA moved with all games.
  e2 = {0: _SpiralEMA(0.95), 1: _SpiralEMA(0.95)}
  games = [({0: 1.0, 1: -1.0}, {0: 3, 1: 3}), ({0: -1.0, 1: 1.0}, {0: 3, 1: 3}), ({0: 1.0, 1: -1.0}, {0: 3, 1: 3})]
  for rew, turns in games:
    _spiral_game(e2, rew, turns)  # 18 turns played, 16 kept: the third game's turns partly dropped
  kept_game_ids = [0] * 6 + [1] * 6 + [2] * 4  # one possible subsample: two of game 2's turns (role 1) dropped
  kept_roles = [0, 0, 0, 1, 1, 1] * 2 + [0, 0, 0, 1]
  s2 = est.init()
  r2 = np.array([games[g][0][k] for g, k in zip(kept_game_ids, kept_roles)], np.float32)
  _, _, s2 = est.update(s2, jnp.asarray(r2), jnp.asarray(kept_roles))
  assert abs(float(np.asarray(s2.baseline)[1]) - e2[1].value) > 1e-3  # the next step's baselines differ
  d = _defaults("role_ema_baseline")
  assert "reward_scale = 1.0" in d["reward scale"][1]
  assert "every game played" in d["EMA updates per actor step"][1]
  assert "train_spiral.py:186-200" in _fid("role_ema_baseline").read and "v0.1.3.post2" in _fid("role_ema_baseline").read
  assert _any_dev("role_ema_baseline", "subsamples its turns to 16")


# =================================================================================================== rorecomp


def _rorecomp_rule(correct, lengths, gid, fraction):
  """The record's rule, written from its text: per group, a correct response is short if fewer than
  ceil(fraction·n_correct) correct ones are strictly shorter; an incorrect one long if fewer than
  ceil(fraction·n_incorrect) incorrect ones are strictly longer (ties all kept)."""
  pri = np.zeros(len(correct), bool)
  for g in np.unique(gid):
    for c in (True, False):
      idx = [i for i in range(len(correct)) if gid[i] == g and bool(correct[i]) == c]
      if not idx:
        continue
      k = math.ceil(fraction * len(idx) - 1e-9)
      for i in idx:
        better = sum(1 for j in idx if (lengths[j] < lengths[i] if c else lengths[j] > lengths[i]))
        pri[i] = better < k
  return pri


def test_rorecomp_rule_ties_and_all_correct_groups_as_recorded():
  rng = np.random.default_rng(163)
  gid = np.repeat(np.arange(8), 8)
  correct = rng.random(64) < 0.5
  correct[:8] = True  # an all-correct group
  correct[8:16] = False  # an all-incorrect group
  lengths = rng.integers(1, 6, 64).astype(np.int64)  # many ties
  for frac in (0.25, 0.5, 0.75, 1.0):
    pri, info = F.rorecomp(correct, lengths, gid, fraction=frac)
    np.testing.assert_array_equal(pri, _rorecomp_rule(correct, lengths, gid, frac))
    assert not np.any(pri & info["buffer"]) and np.all(pri | info["buffer"])
  # permutation invariance (ties all kept)
  perm = rng.permutation(64)
  p1 = F.rorecomp(correct, lengths, gid, fraction=0.5)[0]
  p2 = F.rorecomp(correct[perm], lengths[perm], gid[perm], fraction=0.5)[0]
  np.testing.assert_array_equal(p1[perm], p2)
  # an all-correct group keeps its short share
  pri = F.rorecomp(np.ones(4, bool), np.array([5, 1, 3, 9]), np.zeros(4, np.int64), fraction=0.5)[0]
  np.testing.assert_array_equal(pri, [False, True, True, False])
  d = _defaults("rorecomp")
  assert "its short (long) share kept" in d["all-correct / all-incorrect group"][0]
  assert "not stated" in d["fraction"][1]
  assert _any_dev("rorecomp", "length ties are all kept")


# ============================================================================================== rubric_dropout


def test_rubric_dropout_exact_drop_count_is_pythons_round_and_the_groups_share_a_mask():
  for c in range(1, 13):
    for p in (0.1, 0.3, 0.5, 0.7, 0.9):
      scores = np.ones((6, c), np.float32)
      _, keep, _ = R.rubric_dropout(jax.random.PRNGKey(c), scores, np.array([0, 0, 0, 1, 1, 1]), drop_prob=p,
                                    mode="exact")
      keep = np.asarray(keep)
      assert (keep[:3] == keep[0]).all() and (keep[3:] == keep[3]).all()
      assert int(c - keep[0].sum()) == round(p * c), (c, p)
  # the third-party implementation (read_file id 71015215527, dropout_keep): keep n − floor(f·n), at least 3
  third_party_keep = lambda n, f, min_keep=3: min(n, max(min_keep, n - int(f * n)))  # noqa: E731
  assert third_party_keep(5, 0.3) == 4 and 5 - round(0.3 * 5) == 3
  assert any("C = 5, f = 0.3 it keeps 4 criteria where ours keeps 3" in x for x in _fid("rubric_dropout").deviations)


def test_rubric_dropout_mean_over_kept_cancels_against_a_full_rubric_normaliser_under_grpo():
  rng = np.random.default_rng(81)
  b, c = 32, 7
  gid = np.repeat(np.arange(4), 8)
  s = (rng.random((b, c)) < 0.5).astype(np.float64)
  w = rng.random(c) + 0.1
  with jax.enable_x64(True):
    r, keep, _ = R.rubric_dropout(jax.random.PRNGKey(0), jnp.asarray(s), jnp.asarray(gid), drop_prob=0.5,
                                  weights=jnp.asarray(w), mode="exact")
  r, keep = np.asarray(r, np.float64), np.asarray(keep)
  kept_w = w[None, :] * keep
  np.testing.assert_allclose(r, (kept_w * s).sum(1) / kept_w.sum(1), rtol=1e-6)
  theirs = (kept_w * s).sum(1) / w.sum()  # Σ kept w·v / Σ positive w (the third party's score, no clip reached)

  def grpo(x):
    out = np.empty_like(x)
    for g in np.unique(gid):
      m = gid == g
      out[m] = (x[m] - x[m].mean()) / x[m].std(ddof=1)
    return out

  np.testing.assert_allclose(grpo(r), grpo(theirs), rtol=1e-5, atol=1e-5)  # the group-shared normaliser cancels
  assert "cancels" in _defaults("rubric_dropout")["aggregate"][1]


# ====================================================================================================== sft_nll


def _trl_sft_loss(lp_prompt, lp_completion, max_length=1024):
  """TRL 1.9.0 for one example: _prepare_dataset truncates input_ids / labels to the first max_length tokens
  (sft_trainer.py:1571-1598, keep_start; completion-only labels), drops an example left with no label; the chunked
  CE is Σ −log p over the valid shifted labels ÷ num_items_in_batch (their count) (:117-234). Returns (sum, count)."""
  mask = np.array([0] * len(lp_prompt) + [1] * len(lp_completion), bool)
  lp = np.concatenate([lp_prompt, lp_completion])  # lp[i]: log p of token i given tokens < i
  if max_length is not None:
    mask, lp = mask[:max_length], lp[:max_length]
  if not mask.any():
    return 0.0, 0
  return float(-(lp * mask).sum()), int(mask.sum())


def _ours_sft_token_mean(lp_completions):
  t = max(len(x) for x in lp_completions)
  logp = np.zeros((len(lp_completions), t))
  mask = np.zeros((len(lp_completions), t), bool)
  for i, x in enumerate(lp_completions):
    logp[i, :len(x)], mask[i, :len(x)] = x, True
  with jax.enable_x64(True):
    batch = TrainBatch(tokens=jnp.zeros(logp.shape, jnp.int32), loss_mask=jnp.asarray(mask),
                       advantages=jnp.zeros(logp.shape), group_id=jnp.arange(len(lp_completions), dtype=jnp.int32))
    loss, _ = O.sft_nll()(PolicyOutputs(logp=jnp.asarray(logp)), batch)
    return float(jnp.sum(loss * mask) / mask.sum())


def test_sft_nll_equals_trl_when_sequences_fit_and_differs_past_max_length():
  rng = np.random.default_rng(49)
  prompts = [-rng.random(n) for n in (20, 900, 1030)]
  comps = [-rng.random(n) * 3 for n in (40, 300, 50)]
  # all fit (the first example alone): equal
  s, n = _trl_sft_loss(prompts[0], comps[0])
  assert math.isclose(_ours_sft_token_mean([comps[0]]), s / n, rel_tol=1e-12)
  # example 2: 900 + 300 > 1024, only 124 completion tokens count; example 3: prompt alone > 1024, dropped
  parts = [_trl_sft_loss(p, c) for p, c in zip(prompts, comps)]
  assert [k for _, k in parts] == [40, 124, 0]
  theirs = sum(x for x, _ in parts) / sum(k for _, k in parts)
  ours = _ours_sft_token_mean(comps)
  assert abs(ours - theirs) > 1e-3
  np.testing.assert_allclose(ours, sum(-c.sum() for c in comps) / sum(len(c) for c in comps), rtol=1e-12)
  # with max_length=None: equal
  parts = [_trl_sft_loss(p, c, max_length=None) for p, c in zip(prompts, comps)]
  np.testing.assert_allclose(ours, sum(x for x, _ in parts) / sum(k for _, k in parts), rtol=1e-12)
  d = _defaults("sft_nll")
  assert "max_length 1024" in d["sequence length"][1] and "keep_start" in d["sequence length"][1]
  assert "0.001" in d["MoE load-balancing loss"][1]
  f = _fid("sft_nll")
  assert "sft_trainer.py:1571-1598" in f.read and "sft_config.py:156-162" in f.read
  assert _any_dev("sft_nll", "max_length 1024", "first 1024") and _any_dev("sft_nll", "router_aux_loss_coef")
  assert "max_length" in _record("sft_nll")
