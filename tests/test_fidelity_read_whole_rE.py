"""Issue #51 "read whole" pass, slice rE: each row's cited source read whole at the cited commit, and every record
error found fixed, with a check here. References are float64 / plain-Python transcriptions of the cited lines
(written for these tests, not copied).

Rows and the errors fixed:
- tool_call_reward: SPEAR's second implementation (the ReTool runs, verl/recipe/spear/reward.py: +0.1 per
  assistant message with tool calls; the qwen3 run's binary bonus on correct answers) was not mentioned.
- clipped_linear_reward: the skill-discovery run's chance level (−1/code_arity, 128 in its script) and its
  placement (a Q-learning target on the last transition) were not in the record.
- composite: TRL leaves a row no reward function scored out of its group's mean and std (nanmean / nanstd), not
  only at advantage 0: that edge rule was not in the record; the TRL 1.9.0 release read.
- guide: their edge rule (no group of a loader batch passes the accuracy filter: the whole batch is hinted,
  all-solved groups included) and the trainer's other switches (mixin, roll_with_balanced_batch, use_ref_prompt,
  plain_adv_weight; filter_truncated script False / yaml True) were not in the record.
- oc_grpo: the trainer's second IS correction mode (per_token_uniform), the yaml's correction defaults ('none',
  clamp_min 0.3; the run: per_token, 0.01) and the n_train / trigger / curriculum switches were not in the record.
- exgrpo: the sampler's other modes (exp_metric ppl / random, argmax, bucket weightings linear / sqrt /
  linear_clip / none), the yaml defaults the script overrides, and their entropy metric's padding mask
  (~(responses != pad), row i mod 8 of the last chunk) were not in the record.
"""
import math

import numpy as np

import rljax
from rljax.catalog import describe

ROWS = {r.name: r for r in rljax.catalog()}


def _text(name):
  return describe(ROWS[name])


# ----------------------------------------------------------------------------------------------------------------
# tool_call_reward: SPEAR@7e843151 verl/recipe/spear/reward.py:89-163 (qwen2 ReTool run) and :166-248 (qwen3)

def _spear_retool_reward(score, n_calling_messages, global_steps, max_toolcall_steps=200, qwen3=False):
  res_toolcall = 0.0
  for _ in range(n_calling_messages):
    res_toolcall += 0.1
  res_toolcall = min(res_toolcall, 1.0)
  ratio = 1.0
  if global_steps <= max_toolcall_steps:
    ratio *= (np.cos((global_steps / max_toolcall_steps) * np.pi) + 1) / 2
  else:
    ratio = 0.0
  ratio = max(ratio, 0)
  if qwen3 and score > 0:
    return score + float(res_toolcall > 0) * ratio
  return score + float(res_toolcall) * ratio


def test_tool_call_reward_equals_the_retool_qwen2_rule_and_records_the_qwen3_variant():
  from rljax.rewards import tool_call_reward
  rng = np.random.default_rng(0)
  scores = rng.choice([-1.0, 0.0, 1.0], 64)
  calls = rng.integers(0, 14, 64)
  for t in (0, 1, 57, 199, 200, 201, 350):
    ours, _ = tool_call_reward(scores.astype(np.float64), calls, t, decay_steps=200, max_calls=10)
    ref = np.array([_spear_retool_reward(s, int(n), t) for s, n in zip(scores, calls)])
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12)
    ref3 = np.array([_spear_retool_reward(s, int(n), t, qwen3=True) for s, n in zip(scores, calls)])
    differs = (scores > 0) & (calls > 0) & (calls < 10) & (t < 200)
    if differs.any():  # the qwen3 run's binary bonus on correct answers is not ours
      assert not np.allclose(ours[differs], ref3[differs])
  rec = _text("tool_call_reward")
  assert "verl/recipe/spear/reward.py" in rec and "_qwen3" in rec
  assert "not built" in rec and "1[n > 0]·w when score > 0" in rec


# ----------------------------------------------------------------------------------------------------------------
# clipped_linear_reward: internally-rewarded-rl@f630fdbf skill-discovery/code/disdain.py:789-794, 834-835

def test_clipped_linear_reward_records_the_skill_discovery_chance_level():
  from rljax.rewards import clipped_linear_reward
  rng = np.random.default_rng(1)
  p = rng.dirichlet(np.ones(128), 32)[:, 0] * 20.0
  p = np.clip(p, 0.0, 1.0)
  ref = np.maximum(0.0, p - 1 / 128)  # jnp.maximum(0, skill_rewards_linear), code_arity 128 (their script)
  ours, _ = clipped_linear_reward(p.astype(np.float32), offset=-1 / 128)
  np.testing.assert_allclose(np.asarray(ours, np.float64), ref, rtol=0, atol=1e-6)
  rec = _text("clipped_linear_reward")
  assert "−1/128 in its script" in rec and "train_linear_clipping.sh" in rec


# ----------------------------------------------------------------------------------------------------------------
# composite: TRL 1.9.0 trl/trainer/grpo_trainer.py:2676-2684 (sum_then_normalize) and :2738-2740

def _trl_sum_then_normalize(rewards_per_func, w, g):
  unscorable = np.isnan(rewards_per_func).all(1)
  r = np.nansum(rewards_per_func * w[None], 1)
  r[unscorable] = np.nan
  grouped = r.reshape(-1, g)
  mean = np.repeat(np.nanmean(grouped, 1), g)
  std = np.repeat(np.nanstd(grouped, 1, ddof=1), g)
  return np.nan_to_num((r - mean) / (std + 1e-4), nan=0.0)


def test_composite_records_that_trl_leaves_an_unscorable_row_out_of_its_group_baseline():
  rpf = np.array([[1.0, 0.5], [0.0, 0.5], [np.nan, np.nan], [1.0, 0.0]])
  w = np.ones(2)
  adv = _trl_sum_then_normalize(rpf, w, 4)
  r3 = np.array([1.5, 0.5, 1.0])  # the three scorable rows: the baseline is theirs alone
  np.testing.assert_allclose(adv[[0, 1, 3]], (r3 - r3.mean()) / (r3.std(ddof=1) + 1e-4), rtol=1e-12)
  assert adv[2] == 0.0
  adv0 = _trl_sum_then_normalize(np.nan_to_num(rpf), w, 4)  # scoring the row 0 (lenient) moves the baseline
  assert not np.allclose(adv0[[0, 1, 3]], adv[[0, 1, 3]])
  rec = _text("composite")
  assert "left out of its group's mean and std" in rec and "TRL 1.9.0" in rec


# ----------------------------------------------------------------------------------------------------------------
# guide: guide_rl@2f277152 verl/verl/trainer/ppo/ray_trainer.py:1615-1699 (_apply_filters, accuracy part)

def _guide_apply_filters(acc, lb, ub, reroll_threshold, world_size):
  """Returns (kept group ids, hinted group ids) of one loader batch."""
  keep = [i for i, a in enumerate(acc) if lb <= a <= ub]
  reroll = [i for i, a in enumerate(acc) if a <= reroll_threshold]
  if not keep:  # :1678-1683: the whole batch, one row per prompt, becomes the reroll set
    return [], list(range(len(acc)))
  if len(reroll) >= world_size:
    return keep, reroll[:(len(reroll) // world_size) * world_size]
  return keep, []


def test_guide_records_their_no_group_passes_edge_rule_and_other_switches():
  # the script's bounds: a batch of all-failed and all-solved groups only
  keep, hinted = _guide_apply_filters([0.0, 1.0, 0.0, 1.0, 1.0], 0.001, 0.999, 0.001, world_size=8)
  assert keep == [] and hinted == [0, 1, 2, 3, 4]  # all-solved groups hinted too, no world_size rounding
  keep, hinted = _guide_apply_filters([0.0, 0.5, 0.0, 1.0, 1.0], 0.001, 0.999, 0.001, world_size=8)
  assert keep == [1] and hinted == []  # two failed groups < world_size: none hinted
  ours = [i for i, a in enumerate([0.0, 1.0, 0.0, 1.0, 1.0]) if a == 0.0]  # guide hints the all-failed groups
  assert ours == [0, 2]
  rec = _text("guide")
  assert "returns the whole batch as the reroll set" in rec
  for switch in ("mixin", "roll_with_balanced_batch", "use_ref_prompt", "plain_adv_weight", "filter_truncated"):
    assert switch in rec, switch


# ----------------------------------------------------------------------------------------------------------------
# oc_grpo: OC-GRPO@54d61030 verl_grpo/trainer/ray_trainer.py:5225-5300 (the two IS correction modes)

def test_oc_grpo_records_per_token_uniform_and_the_yaml_correction_defaults():
  rng = np.random.default_rng(2)
  diff = rng.normal(0.0, 1.0, (3, 7))  # log π_old(y_t | x̃) − log π_old(y_t | x) on the replaced rows
  per_token = np.clip(np.exp(-diff), 0.01, 1.0)  # the run's mode (clamp_min 0.01)
  uniform = np.clip(np.exp(-diff.mean(1)), 0.01, 1.0)[:, None] * np.ones_like(diff)  # per_token_uniform
  assert not np.allclose(per_token, uniform)  # a distinct estimator, so it has to be named
  rec = _text("oc_grpo")
  assert "per_token_uniform" in rec and "is_correction_mode 'none'" in rec and "clamp_min 0.3" in rec
  assert "n_train" in rec and "two_phase" in rec


# ----------------------------------------------------------------------------------------------------------------
# exgrpo: LUFFY@01f4ae06 ExGRPO/.../experience/weighted_bucket_sampler.py:26-54, experience_helpers.py:137-147

def _exgrpo_bucket_weights(method, keys, n):
  if method == "linear":
    return {k: k / n for k in keys}
  if method == "normal":
    return {k: np.exp(-((k - n / 2) ** 2) / 2) / np.sqrt(2 * np.pi) for k in keys}
  if method == "sqrt":
    return {k: np.sqrt(k / n) for k in keys}
  return {k: 0.5 if k > n / 2 else k / n for k in keys}  # linear_clip


def test_exgrpo_records_the_other_bucket_weightings_metrics_and_the_entropy_mask():
  keys = range(1, 8)
  laws = {}
  for m in ("linear", "normal", "sqrt", "linear_clip"):
    w = _exgrpo_bucket_weights(m, keys, 8)
    tot = sum(w.values())
    laws[m] = np.array([w[k] / tot for k in keys])
  for m in ("linear", "sqrt", "linear_clip"):  # each a different bucket law from the run's 'normal'
    assert np.abs(laws[m] - laws["normal"]).max() > 0.05
  # their mask ~(responses != pad) keeps the padding positions, not the response tokens
  pad = 0
  responses = np.array([5, 7, 9, pad, pad])
  ents = np.array([0.1, 0.2, 0.3, 2.0, 4.0])
  theirs = ents[~(responses != pad)].mean()
  assert theirs == 3.0 and ents[responses != pad].mean() != theirs
  rec = _text("exgrpo")
  for word in ("'ppl'", "'argmax'", "'linear_clip'", "'sqrt'", "exp_metric 'random'", "~(responses != pad)"):
    assert word in rec, word
