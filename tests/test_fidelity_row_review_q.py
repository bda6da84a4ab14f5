"""Issue #51, per-row review q: an independent second reading of five records (not a random draw).

Rows: correctness_gated, gaussian_reward, clipped_linear_reward, tool_call_reward, composite.

Held (1): ``correctness_gated``. Its source is the SCOPE-RL abstract (seed 001 L219, read whole); the paper body is
not stored (pages corpus: no arXiv HTML of it; a reading list in the code index names it arXiv 2607.11506, a
summary of the same abstract) and github.com/tokencraft-lab/SCOPE-RL has no snapshot and no indexed file, as the
record says. Its gate is tested below against a float64 transcription of its reading.

Not held (4), each error fixed in the record (no implementation changed, no implementation bug found); the
records' "= theirs" claims that survive are checked below against float64 NumPy / Python transcriptions:

- ``gaussian_reward`` OMITTED that their reward is float32 too, and cited an inexact line range.
  yeppp27/VisualScore@479b9f3b openrlhf/utils/remote_rm_utils.py:39-40 turns the server's JSON lists into
  torch.tensor(v), float32 (the server computes math.exp in float64), so "the reward is float32" is not a difference;
  the one that remains is the float32 parse of prediction and target before the kernel (< 4e-7 at sigma 0.8 on 0-5
  scores). The record cited math_verifier_wolatex_regress_specifc.py:331-352 for "reward = format + accuracy"; the
  sum is at :353-354.
- ``clipped_linear_reward`` OMITTED the README's own training command. mengdi-li/internally-rewarded-rl@f630fdbf
  README.md:17-22 runs ./scripts/training/ram_linear_clipping.sh (RAM, --dynamic_exploration_time False, 18
  glimpses; the shipped checkpoint ram_18_4x4_1_ckpt_1400 is that run's): trainer.py:594-752 gives every one of the
  18 steps the same undiscounted R = max(p_y − 0.1, 0) (minus the baseline); the record gave only
  dtram_linear_clipping.sh's placement (the stop step, 0.99^(stop step)·R).
- ``tool_call_reward`` said something FALSE about the placement ("on each episode's row") and OMITTED what follows.
  TencentYoutuResearch/SPEAR@7e843151 verl-agent/agent_system/multi_turn_rollout/rollout_loop.py:236-295 trains one
  row per environment step, each carrying its episode's episode_rewards / episode_lengths, and episode.py:108-163
  writes the score (bonus included) on every such row; verl-agent/verl/trainer/ppo/core_algos.py:208-287
  (compute_grpo_outcome_advantage, compute_mean_std_cross_all_data True by default, not passed by
  ray_trainer.py:330-336) and core_gigpo.py:146-213 (the same default) take a group's mean and std over the step
  rows: an episode weighs in proportion to its step count, the count the bonus grows with (example below: theirs
  1.897 / −0.474, per episode equal and opposite).
- ``composite`` cited a FALSE line (TRL 1.9.0 grpo_trainer.py:2738-2740 for the advantage's nan_to_num, which is
  at :2730; 2738-2740 is the process slice) and OMITTED ±inf: nansum skips NaN only, so a function returning inf
  makes its group's nanmean / nanstd inf and every advantage of the group NaN → 0 (the group silenced); ours strict
  raises, lenient scores it 0 and the group trains.
"""
import json
import math

import numpy as np
import pytest

from rljax import recipes
from rljax import rewards as W
from rljax.stages import probe_step
from _fidelity import defaults, fid, record


# ----------------------------------------------------------------------------------- correctness_gated (held)


def test_correctness_gated_stage_is_the_records_gate_on_the_mean_valid_step_reward():
  steps = np.array([[0.2, 0.4, 0.9], [0.5, 0.5, 0.5], [-1.0, 0.3, 7.0], [0.1, 0.2, 0.3]])
  mask = np.array([[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 1]], bool)
  outcome = np.array([1.0, 0.0, 1.0, 1.0])
  correct = np.array([1.0, 0.0, 1.0, 1.0])
  valid = np.array([True, True, True, False])
  d = probe_step(steps=3).replace(step_rewards=steps.astype(np.float32), step_mask=mask,
                                  rewards=outcome.astype(np.float32), correct=correct.astype(np.float32),
                                  valid=valid)
  r, _ = recipes.stage("correctness_gated", weight=0.5).fn(d)
  # the record's reading, in float64: r = r_outcome + w·1[correct]·(mean of the row's valid step rewards); an
  # invalid row is not gated
  mean_steps = np.array([np.mean(s[m]) for s, m in zip(steps, mask)])
  expected = outcome + 0.5 * ((correct > 0.5) & valid) * mean_steps
  np.testing.assert_allclose(np.asarray(r, np.float64), expected, rtol=0, atol=1e-6)
  np.testing.assert_allclose(expected, [1.15, 0.0, 0.5, 1.0], rtol=0, atol=1e-12)
  f = fid("correctness_gated")
  assert f.basis == "abstract" and "no paper body found" in f.read and "no snapshot" in f.differences
  assert defaults("correctness_gated")["weight"] == ("1.0", "not stated")


# ------------------------------------------------------------------------------- gaussian_reward (not held)


def _visualscore_gaussian_rbf(content, sol, sigma):
  """VisualScore@479b9f3b math_verifier_wolatex_regress_specifc.py:160-235 (RewardCalculator.get_reward,
  reward_type 'gaussian_rbf', dataset multipliers off), transcribed: the first <answer>(.*?)</answer>, float(), 0
  when absent or not a number."""
  import re  # pylint: disable=import-outside-toplevel
  m = re.search(r"<answer>(.*?)</answer>", content, re.DOTALL)
  if not m:
    return 0.0
  try:
    pred, gt = float(m.group(1).strip()), float(sol.strip())
  except ValueError:
    return 0.0
  return math.exp(-((pred - gt) ** 2) / (2 * sigma ** 2))


def test_gaussian_reward_their_reward_reaches_the_trainer_as_float32_too():
  rng = np.random.default_rng(0)
  pred = np.round(rng.uniform(0, 5, 4000), 3)
  target = np.round(rng.uniform(0, 5, 4000), 3)
  server = [_visualscore_gaussian_rbf(f"<think>x</think><answer>{p}</answer>", f"{t}", 0.8)
            for p, t in zip(pred, target)]
  # remote_rm_utils.py:39-40: response.json() then torch.tensor(v): Python floats -> float32
  sent = json.loads(json.dumps({"rewards": server}))["rewards"]
  torch = pytest.importorskip("torch")
  theirs = torch.tensor(sent)
  assert theirs.dtype == torch.float32
  ours, _ = W.gaussian_reward(pred.astype(np.float32), target.astype(np.float32), sigma=0.8)
  ours = np.asarray(ours)
  assert ours.dtype == np.float32
  gap = np.abs(ours.astype(np.float64) - theirs.numpy().astype(np.float64)).max()
  assert 0 < gap < 4e-7  # the float32 parse of prediction and target: the one difference left
  # an unparsed answer: 0 there (no tag), invalid_value 0 here (NaN prediction)
  assert _visualscore_gaussian_rbf("<answer>n/a</answer>", "2.971", 0.8) == 0.0
  assert float(np.asarray(W.gaussian_reward(np.array([np.nan]), np.array([2.971]), sigma=0.8)[0])[0]) == 0.0
  f = fid("gaussian_reward")
  assert "as theirs is when it reaches the trainer" in " ".join(f.deviations)
  assert "remote_rm_utils.py:11-45" in f.read and ":331-354" in f.read and "the sum at :353-354" in f.read


# ------------------------------------------------------------------------- clipped_linear_reward (not held)


def _irrl_r_certainty(p_gt):
  """internally-rewarded-rl@f630fdbf trainer.py:495-496 / 643-644 (linear_clipping): clamp(p_y − 0.1, min=0)."""
  return np.maximum(p_gt - 0.1, 0.0)


def test_clipped_linear_reward_the_readme_run_is_undiscounted_ram():
  p = np.array([0.0, 0.05, 0.1, 0.55, 0.999, 1.0])
  stop = np.array([0, 3, 5, 5, 17, 2])
  r = _irrl_r_certainty(p)
  ours, _ = W.clipped_linear_reward(p.astype(np.float32), offset=-0.1)
  np.testing.assert_allclose(np.asarray(ours, np.float64), r, rtol=0, atol=1e-6)  # the kernel: = theirs
  ram = np.repeat(r[:, None], 18, 1)  # :734, :739: R on all 18 steps (README.md:17-22's script), no discount
  dtram = 0.99 ** stop * r  # :548-552: dtram_linear_clipping.sh, R·0.99^(stop step)
  assert np.all(ram[:, -1] == r) and not np.allclose(dtram, r)
  assert math.isclose(dtram[3], 0.99 ** 5 * 0.45, rel_tol=1e-12) and math.isclose(ram[3, 0], 0.45, rel_tol=1e-12)
  f = fid("clipped_linear_reward")
  assert "README.md:17-22" in f.read and "trainer.py:594-752" in f.read
  assert "ram_linear_clipping.sh" in f.placement and "undiscounted" in f.placement
  assert any("the README's training command is the RAM script" in d for d in f.deviations)


# ------------------------------------------------------------------------------ tool_call_reward (not held)


def _spear_bonus(episode_lengths, global_steps, max_toolcall_steps=200, mode="cosine"):
  """SPEAR@7e843151 verl-agent/agent_system/reward_manager/episode.py:143-159, transcribed."""
  if mode == "none":
    return 0.0
  if mode == "constant":
    return min(1.0, episode_lengths * 0.1)
  if global_steps > max_toolcall_steps:
    return 0.0
  s = min(1.0, episode_lengths * 0.1) * (np.cos((global_steps / max_toolcall_steps) * np.pi) + 1) / 2
  return max(0, s)


def _verl_agent_grpo(scores, uid, epsilon=1e-6):
  """verl-agent core_algos.py:208-287 compute_grpo_outcome_advantage with its defaults
  (compute_mean_std_cross_all_data True: every row of the uid counted; torch.std unbiased)."""
  scores = np.asarray(scores, np.float64)
  out = np.empty_like(scores)
  for u in set(uid):
    rows = [i for i, x in enumerate(uid) if x == u]
    s = scores[rows]
    mean, std = (0.0, 1.0) if len(rows) == 1 else (s.mean(), s.std(ddof=1))
    out[rows] = (s - mean) / (std + epsilon)
  return out


def test_tool_call_reward_bonus_equals_theirs():
  n = np.array([0, 1, 3, 10, 25])
  for t in (0, 1, 57, 199, 200, 201, 500):
    ours, _ = W.tool_call_reward(np.zeros(5), n, t)
    np.testing.assert_allclose(np.asarray(ours, np.float64), [_spear_bonus(k, t) for k in n], rtol=0, atol=1e-6)
  ours, _ = W.tool_call_reward(np.zeros(5), n, 57, schedule="constant")
  np.testing.assert_allclose(np.asarray(ours, np.float64), [_spear_bonus(k, 57, mode="constant") for k in n],
                             rtol=0, atol=1e-6)


def test_tool_call_reward_their_bonus_sits_on_every_step_row_and_weighs_by_steps():
  # t = 0: episode A, 2 steps, environment reward 1; episode B, 8 steps, reward 0 (one uid)
  score_a = 1.0 + _spear_bonus(2, 0)
  score_b = 0.0 + _spear_bonus(8, 0)
  assert math.isclose(score_a, 1.2) and math.isclose(score_b, 0.8)
  rows = [score_a] * 2 + [score_b] * 8  # rollout_loop.py:236-295: one row per environment step
  adv = _verl_agent_grpo(rows, ["u"] * 10)
  assert math.isclose(np.mean(rows), 0.88, rel_tol=1e-12)
  assert math.isclose(np.std(rows, ddof=1), 0.16865, rel_tol=1e-4)
  assert round(adv[0], 3) == 1.897 and round(adv[-1], 3) == -0.474
  ours, _ = W.tool_call_reward(np.array([1.0, 0.0]), np.array([2, 8]), 0)  # one row per episode here
  ours = np.asarray(ours, np.float64)
  np.testing.assert_allclose(ours, [score_a, score_b], rtol=0, atol=1e-6)
  per_episode = _verl_agent_grpo(ours, ["u"] * 2)
  assert math.isclose(ours.mean(), 1.0, rel_tol=1e-6) and math.isclose(per_episode[0], -per_episode[1])
  f = fid("tool_call_reward")
  assert "every step row of each episode" in f.placement and "on each episode's row" not in f.placement
  dev = " ".join(f.deviations)
  assert "1.897 / −0.474" in dev and "mean 0.88" in dev
  assert "rollout_loop.py:355-445" in f.read and "core_algos.py:208-287" in f.read


# ------------------------------------------------------------------------------------- composite (not held)


def _trl_nanstd(x, axis):
  """TRL 1.9.0 trl/trainer/utils.py:857-888 nanstd, transcribed (Bessel-corrected nanmean of squares)."""
  mean = np.nanmean(x, axis=axis, keepdims=True)
  var = np.nanmean((x - mean) ** 2, axis=axis, keepdims=True)
  count = np.sum(~np.isnan(x), axis=axis, keepdims=True)
  corr = np.where(count > 1, count / np.maximum(count - 1, 1), np.nan)
  return np.sqrt(var * corr).squeeze(axis)


def _trl_sum_then_normalize(rewards_per_func, w, g):
  """TRL 1.9.0 grpo_trainer.py:2679-2707 and :2730 (scale_rewards 'group'), transcribed in float64."""
  with np.errstate(invalid="ignore"):
    unscorable = np.isnan(rewards_per_func).all(1)
    r = np.nansum(rewards_per_func * w[None], 1)
    r[unscorable] = np.nan
    mean = np.repeat(np.nanmean(r.reshape(-1, g), 1), g)
    std = np.repeat(_trl_nanstd(r.reshape(-1, g), 1), g)
    adv = (r - mean) / (std + 1e-4)
  return r, np.nan_to_num(adv, nan=0.0)


def test_composite_equals_trls_weighted_sum_on_finite_rewards():
  rng = np.random.default_rng(1)
  cols = rng.normal(size=(8, 3))
  w = np.array([1.0, 0.5, -2.0])
  fns = {f"c{k}": (lambda k: lambda completions, refs: cols[:, k])(k) for k in range(3)}
  total, _ = W.composite(fns, dict(zip(fns, w)))(["x"] * 8)
  theirs, _ = _trl_sum_then_normalize(cols.astype(np.float32).astype(np.float64), w, 4)
  np.testing.assert_allclose(np.asarray(total, np.float64), theirs, rtol=0, atol=1e-5)
  total1, _ = W.composite(fns)(["x"] * 8)  # weights None: ones, as TRL's reward_weights None
  np.testing.assert_allclose(np.asarray(total1, np.float64), cols.sum(1), rtol=0, atol=1e-5)


def test_composite_an_infinite_reward_silences_its_trl_group():
  rpf = np.array([[np.inf], [1.0], [0.0], [0.0], [1.0], [0.0], [0.0], [0.0]])
  r, adv = _trl_sum_then_normalize(rpf, np.ones(1), 4)
  assert np.isinf(r[0]) and np.all(adv[:4] == 0.0)  # the group with inf: every advantage 0
  assert adv[4] > 0 and np.all(adv[5:] < 0)  # the other group trains
  vals = np.array([np.inf, 1.0, 0.0, 0.0])
  with pytest.raises(W.RewardError, match="non-finite"):
    W.composite({"r": lambda c, refs: vals})(["x"] * 4)
  total, info = W.composite({"r": lambda c, refs: vals}, lenient=True)(["x"] * 4)
  np.testing.assert_array_equal(np.asarray(total), [0.0, 1.0, 0.0, 0.0])
  assert info["errors"] == 1
  f = fid("composite")
  assert ":2730 (advantage nan_to_num 0" in f.read and "2738-2740 (unscorable" not in f.read
  assert any("±inf" in d and "the whole group is silenced" in d for d in f.deviations)
  assert "left out of its group's mean and std" in record("composite")
