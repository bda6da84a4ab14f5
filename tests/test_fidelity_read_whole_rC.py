"""Issue #51 "read whole" pass, slice rC: each row's implementation and its cited source read whole at the cited
commit, the record fixed where it was wrong. One check per record error fixed (a float64 NumPy transcription of the
cited lines where a number is involved, else an assertion on the record's text).

Rows and the errors fixed:
- rpg: the record said every kl_penalty rpg_* value is clamped to ±10 (rpg_fkl and rpg_rf_fkl are not); the rf
  scripts' reward coefficient was given as 1e-4 (the *_rf_clip_ppo_* scripts set algorithm.kl_ctrl.kl_coef 0.0);
  the rpg_js / rpg_ujs forms in the cited kl_penalty were not mentioned; the rpg advantage was not stated.
- gmpo: the actor's reward 0 for truncated outputs and the clip0.8 ablation script were not listed.
- segment_ratio: the per-item advantage their loss reads (rank-k reward normalized over the group, 0 on overflow
  and EOS tokens) was not stated.
- alol: the authors' prioritized sampling (sampling_strategy good_priority, the README's method) and their
  second implementation (train_generation_task_with_off_policy_PG.py: ppo_clip None, unclipped) were not listed.
- temperature_control: at the cited commit their scheduler is never fed in their own runs (entropy_coeff 0: no
  actor/entropy_loss metric; with a non-zero coefficient the metric line raises); the record said it steps on the
  update's entropy.
- variance_topp: rollout_filter.py's EntropyRolloutFilter (entropy / entropy_variance metrics) and its
  turn-level episode mode were not mentioned.
- delta_logp_reweight: the cited trainer's logp_diff token masks (method clip / reweight, eight mask_by modes;
  the scripts run method 'none') were not mentioned.
- shuffle_pairs: odd-sized groups (theirs: an assertion error; ours: the median row unpaired) were not listed.
"""
import numpy as np

import rljax

ROWS = {r.name: r for r in rljax.catalog()}


def _record(name):
  f = ROWS[name].fidelity
  defaults = {d[0]: d for d in f.defaults}
  return f, defaults, " ".join(f.deviations)


# ----------------------------------------------------------------------------------------------------------------
# rpg: complex-reasoning/RPG@ec8e30bd verl/trainer/ppo/core_algos.py kl_penalty, recipe/rpg/7b scripts

def _rpg_kl_penalty(logp, ref, kind):
  """float64 transcription of core_algos.py kl_penalty's rpg forms (ec8e30bd)."""
  lr = logp - ref
  w = np.exp(lr)
  if kind == "rpg_fkl":
    return -logp + ref
  if kind == "rpg_rf_fkl":
    return -np.ones_like(logp)
  forms = {"rpg_rkl": w * lr, "rpg_ufkl": w - lr - 1, "rpg_urkl": w * (lr - 1) + 1,
           "rpg_js": 0.5 * (w * lr + lr), "rpg_ujs": 0.5 * (w * lr - lr)}
  return np.clip(forms[kind], -10, 10)


def test_rpg_record_names_the_unclamped_forms():
  logp, ref = np.array([-0.1, -20.0]), np.array([-20.0, -0.1])
  assert np.abs(_rpg_kl_penalty(logp, ref, "rpg_fkl")).max() > 10  # the code does not clamp rpg_fkl
  assert np.abs(_rpg_kl_penalty(logp, ref, "rpg_rkl")).max() <= 10
  f, d, dev = _record("rpg")
  assert "rpg_fkl" in d["clamp"][2] and "unclamped" in d["clamp"][2]
  assert "except rpg_fkl" in f.read


def test_rpg_record_gives_the_rf_scripts_zero_reward_coefficient_and_the_js_forms():
  f, d, dev = _record("rpg")
  assert "0.0 in every *_rf_clip_ppo_* script (no KL" in d["beta"][2]
  assert "rpg_js" in dev and "rpg_ujs" in dev
  # with use_iterative_ref_model the rf values of old vs old are constants (as the deviation says)
  z = np.zeros(3)
  np.testing.assert_array_equal(_rpg_kl_penalty(z, z, "rpg_rf_fkl"), -1.0)
  assert "rkl 1, fkl −1, ufkl and urkl 0" in dev
  assert "r − mean_g, no std" in d["advantage (not this term's)"][2]


# ----------------------------------------------------------------------------------------------------------------
# gmpo: callsys/GMPO@205b2bf4 train_zero_math_gmpo.py (the actor zeroes the reward of truncated outputs) and
# scripts/ablation/qwen2.5-math-7b-gmpo-clip0.8.sh

def test_gmpo_record_lists_the_truncation_reward_and_the_clip_ablation():
  _, d, _ = _record("gmpo")
  assert "reward 0" in d["truncated responses (not this term's)"][2]
  assert "CLIPRANGE 0.8" in d["cliprange ablation"][2]


# ----------------------------------------------------------------------------------------------------------------
# segment_ratio: yaochenzhu/Rank-GRPO@0808d82c rank_grpo_trainer.py:1781-1851 (the per-item advantage the loss reads)

def test_segment_ratio_record_states_their_per_item_advantage():
  _, d, _ = _record("segment_ratio")
  theirs = d["advantage (not this term's)"][2]
  assert "std + 1e-4" in theirs and "overflow" in theirs and "EOS" in theirs


# ----------------------------------------------------------------------------------------------------------------
# alol: abaheti95/LoL-RL@9f8d8166 lolrl_qlora_llama_hh.py:539-600 (sampling_strategy) and
# train_generation_task_with_off_policy_PG.py:52 (--ppo_clip default None)

def test_alol_record_lists_prioritized_sampling_and_the_unclipped_second_script():
  f, d, dev = _record("alol")
  assert "good_priority" in d["sampling"][2]
  assert "None, no clip" in d["eps"][2]
  assert "good_priority" in dev and "--ppo_clip None" in dev
  assert "train_generation_task_with_off_policy_PG.py" in f.read


# ----------------------------------------------------------------------------------------------------------------
# temperature_control: LiaoMengqi/E3-RL4LLMs@7e90b8e9 e3/worker/actor/dp_actor.py:380-406, fsdp_work.py:487,
# temperature_scheduler.py step()

class _E3Scheduler:
  """float64 transcription of temperature_scheduler.py TemperatureScheduler.step (annealing off)."""

  def __init__(self, t0, vocab, enabled=True, init_steps=1):
    self.t, self.steps, self.init, self.target, self.on = t0, 1, [], None, enabled
    self.init_steps, self.factor = init_steps, np.log(vocab) + np.log(np.log(vocab))

  def step(self, entropy):
    if entropy is None:
      return
    if self.steps <= self.init_steps:
      self.init.append(entropy)
    elif self.on:
      if self.target is None:
        self.target = sum(self.init) / len(self.init)
      self.t = self.t * (1 + self.t * np.log(self.target / entropy) / self.factor)
    self.steps += 1


def _e3_update_policy_metrics(entropy_coeff, entropy):
  """dp_actor.py:380-406 at 7e90b8e9: the metric exists only with entropy_coeff ≠ 0, and that line raises."""
  metrics = {}
  if entropy_coeff != 0:
    new = {"actor/entropy_loss", entropy}  # a set literal, as in the source
    for key, val in new.items():  # verl append_to_dict
      metrics.setdefault(key, []).append(val)
  return metrics


def test_temperature_control_record_says_their_scripts_never_move_t():
  s = _E3Scheduler(1.0, 152064)
  for h in (0.5, 0.3, 0.2, 0.9):  # entropy_coeff 0 (their scripts): fsdp_work steps with metrics.get(...) = None
    s.step(_e3_update_policy_metrics(0, h).get("actor/entropy_loss"))
  assert s.t == 1.0
  try:
    _e3_update_policy_metrics(0.001, 0.5)
    raised = False
  except AttributeError:
    raised = True
  assert raised
  s.step(0.5), s.step(0.25)  # fed directly, the rule moves T (what ours implements)
  assert s.t > 1.0
  f, _, dev = _record("temperature_control")
  assert "never moves T in their own runs" in dev and "entropy_coeff 0" in dev
  assert "dp_actor.py:380-406" in f.read


# ----------------------------------------------------------------------------------------------------------------
# variance_topp: RAGEN-AI/RAGEN@4ec25747 ragen/trainer/rollout_filter.py (EntropyRolloutFilter, episode_ids mode)

def test_variance_topp_record_names_the_entropy_filter():
  _, _, dev = _record("variance_topp")
  assert "EntropyRolloutFilter" in dev and "entropy_variance" in dev and "episode_ids" in dev


# ----------------------------------------------------------------------------------------------------------------
# delta_logp_reweight: Hesse73/RLVR-Directions@af8f20a6 logp_ray_trainer.py:296-480 (logp_diff masks), run_7B.sh

def test_delta_logp_reweight_record_names_the_logp_diff_masks():
  f, d, dev = _record("delta_logp_reweight")
  assert "method 'none'" in d["logp_diff token mask"][2]
  assert "logp_diff token masks are not built" in dev and "old-prob-middle" in dev
  assert "logp_ray_trainer.py:296-480" in f.read


# ----------------------------------------------------------------------------------------------------------------
# shuffle_pairs: xiaomi-research/shuffle-r1@31d3ff03 custom_algos.py:71-146 (the pairing asserts an even group)

def _shuffle_r1_pairs(adv):
  """float64 transcription of compute_pairwise_purning_grpo_advantage's pairing (one group, purning_ratio 0.5)."""
  order = sorted(range(len(adv)), key=lambda i: adv[i], reverse=True)
  assert len(order) % 2 == 0, "Number of responses in a group should be even for pairing"
  pairs, left, right = [], 0, len(order) - 1
  while left < right:
    pairs.append((order[left], order[right]))
    left, right = left + 1, right - 1
  return pairs[:int(len(pairs) * 0.5)]


def test_shuffle_pairs_record_lists_the_odd_group_rule():
  assert _shuffle_r1_pairs([0.5, -1.0, 2.0, 0.1]) == [(2, 1)]
  try:
    _shuffle_r1_pairs([0.5, -1.0, 2.0])
    raised = False
  except AssertionError:
    raised = True
  assert raised
  _, _, dev = _record("shuffle_pairs")
  assert "odd-sized group" in dev and "asserts an even group size" in dev
