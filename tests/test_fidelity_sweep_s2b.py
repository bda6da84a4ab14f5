"""Issue #51, error-class sweep (s2b): the authors' launch switches, the data-parallel dispatch and the caller.

Rows swept: implicit_progress_reward oprl gdpo dara gd2po variance_topp void_turn greso pilot_commit
difficulty_budget shuffle_pairs negative_advantage_drop dump format_regex gaussian_reward clipped_linear_reward
shortest_path_reward tool_call_reward exgrpo positive_replay spear_replay guide oc_grpo.

Records fixed here (each reference below is a float64 NumPy transcription of the cited lines, written for these
tests, not copied):

- implicit_progress_reward (caller): both scripts run runners/tau2_bon.py, which scores with its own _score_one.
- oprl (launch: temperature): rollout.temperature 1.0 / top_p 1 behind old_log_probs; the PRM's log-probs untempered.
- gdpo (launch: KL in the reward): verl-GDPO applies apply_kl_penalty (use_kl_loss False) into a field 'gdpo' skips.
- gd2po (caller): norm_adv_by_std_in_grpo (True) reaches every gdpo branch; use_kl_in_reward False.
- variance_topp (launch: penalty, normalisation): RAGEN's filter ranks R + format penalty, after the in-place
  group normalisation (mean_std in train_all.sh's GRPO runs).
- void_turn (launch: filters, duplication): the README command's group filters count the void trajectories.
- difficulty_budget (launch: temperature): E3's scripts run the entropy-targeting temperature scheduler.
- format_regex (caller): main_ppo_format's validation reward manager gets no format scores.
- gaussian_reward (launch: filter): stage 2 drops groups whose Gaussian term has std <= 0.001.
- tool_call_reward (launch: penalty, filter; placement): the invalid-action penalty after the bonus, GiGPO's step
  term without it, the std group filter and its power-of-2 row cut.
- exgrpo (launch: loss, temperature): run_exgrpo.sh's mixed-policy loss switches, T = 1.
- positive_replay (caller found; launch): fit's use_replay_buffer branch, task_adv_normalize, mute_uid_all_zero_reward.
- spear_replay (launch: penalty, filter): R carries the invalid-action penalty and the bonus; rows after the filter.
- guide (caller): apply_off_policy_shaping is read with `is not None`; off_policy_clip_ratio is unused.
- oc_grpo (launch: temperature / top_p; caller): the IS weight at T = 0.7; OC-GRPO-Fixed is prompt_masked.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np

from _fidelity import defaults as _defaults, fid as _fid, log_softmax as _log_softmax, record as _text


# ----------------------------------------------------------------------------- implicit_progress_reward


def _tau2_bon_score_one(policy_steps, reference_steps, token_agg, step_agg, beta=1.0):
  """progress-advantage runners/tau2_bon.py _score_one, branch 'progress_advantage' (pa/aggregations.py sum/mean)."""
  agg = {"sum": np.sum, "mean": np.mean, "min": np.min}
  rewards = []
  for p, r in zip(policy_steps, reference_steps):
    p_agg = agg[token_agg](p) if p.size > 0 else 0.0
    r_agg = agg[token_agg](r) if r.size > 0 else 0.0
    rewards.append(beta * (p_agg - r_agg))
  if not rewards:
    return float("-inf")
  return float(agg[step_agg](np.asarray(rewards)))


def test_implicit_progress_reward_scripts_caller_and_sum_equivalence():
  from rljax.advantages import implicit_progress_reward  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(51)
  t = 12
  steps = [(0, 3), (3, 8), (8, 12)]  # three action steps of one trajectory
  logp = -rng.random((1, t)) * 3.0
  logp_ref = -rng.random((1, t)) * 3.0
  mask = np.ones((1, t), bool)
  for beta in (1.0, 0.5):
    with jax.enable_x64(True):
      dense, _ = implicit_progress_reward(jnp.asarray(logp), jnp.asarray(logp_ref), jnp.asarray(mask), beta=beta)
    dense = np.asarray(dense)[0]
    ours_steps = [dense[a:b].sum() for a, b in steps]
    pol = [logp[0, a:b] for a, b in steps]
    ref = [logp_ref[0, a:b] for a, b in steps]
    # their token_agg='sum' per-step scores are our per-step sums; step_agg 'sum' adds them
    theirs = _tau2_bon_score_one(pol, ref, "sum", "sum", beta)
    np.testing.assert_allclose(sum(ours_steps), theirs, rtol=1e-12)
    np.testing.assert_allclose(min(ours_steps), _tau2_bon_score_one(pol, ref, "sum", "min", beta), rtol=1e-12)
    # the scripts' token mean differs (÷ step length)
    assert not math.isclose(_tau2_bon_score_one(pol, ref, "mean", "min", beta), min(ours_steps), rel_tol=1e-6)
  assert _tau2_bon_score_one([], [], "mean", "min") == float("-inf")
  fid = _fid("implicit_progress_reward")
  assert "runners.tau2_bon" in fid.read and "_score_one" in fid.read
  assert "_score_one" in fid.placement
  d = _defaults("implicit_progress_reward")
  assert "untempered" in d["log-prob temperature"][0] and "raw logits" in d["log-prob temperature"][1]
  assert "−inf" in d["trajectory without an action step"][1]


# ----------------------------------------------------------------------------- oprl, gdpo, gd2po


def test_oprl_records_the_sampling_temperature_behind_its_log_probs():
  d = _defaults("oprl")
  ours, theirs = d["sampling temperature / top_p (the log-probs in q)"]
  assert "untempered" in ours
  assert "rollout.temperature 1.0" in theirs and "top_p 1" in theirs and "ppo_trainer.yaml:104-106" in theirs
  assert "dp_rm.py:114" in theirs


def test_gdpo_records_the_kl_penalty_that_never_reaches_it():
  ours, theirs = _defaults("gdpo")["KL penalty in the reward"]
  assert "reward_components" in ours
  assert "apply_kl_penalty" in theirs and "ray_trainer.py:753-759" in theirs and "0.001" in theirs
  assert "token_level_scores_correctness" in theirs and "never reaches" in theirs


def _verl_grpo_outcome(r, gid, norm_by_std=True, eps=1e-6):
  """GD2PO tool-calling core_algos.py compute_grpo_outcome_advantage (per uid: mean, torch.std unbiased)."""
  a = np.zeros_like(r)
  for g in np.unique(gid):
    m = gid == g
    a[m] = r[m] - r[m].mean()
    if norm_by_std:
      a[m] = a[m] / (r[m].std(ddof=1) + eps)
  return a


def test_gd2po_norm_adv_by_std_reaches_its_branches_and_ours_is_the_true_setting():
  ours, theirs = _defaults("gd2po")["norm_adv_by_std_in_grpo"]
  assert "÷ (σ + ε)" in ours
  assert "True (ppo_trainer.yaml:155" in theirs and "1552-1554" in theirs and "447, 459, 480, 515" in theirs
  assert "use_kl_in_reward False" in _defaults("gd2po")["KL penalty in the reward"][1]
  # the per-reward step of ours (the weighted sum before the keep rule) is theirs at True, not at False
  from rljax.advantages import gd2po  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(3)
  gid = np.repeat(np.arange(3), 4)
  comps = rng.integers(0, 2, size=(12, 2)).astype(float) + rng.normal(scale=0.1, size=(12, 2))
  with jax.enable_x64(True):
    _, info = gd2po(jnp.asarray(comps), jnp.asarray(gid), num_groups=3, whiten=False, query_weight=False)
  per_reward, keep = np.asarray(info["per_reward"]), np.asarray(info["keep"])
  true_ = np.stack([_verl_grpo_outcome(comps[:, k], gid) for k in range(2)], 1)
  false_ = np.stack([_verl_grpo_outcome(comps[:, k], gid, norm_by_std=False) for k in range(2)], 1)
  assert keep.any()
  np.testing.assert_allclose(per_reward[keep], true_[keep], rtol=1e-9, atol=1e-12)
  assert not np.allclose(per_reward[keep], false_[keep])


# ----------------------------------------------------------------------------- variance_topp


def _ragen_filter_score(episode_rewards, penalties, group_size, method):
  """RAGEN 5eb79b82 ctx_manager.py:175-226 (penalty added, group-normalised, in place) → agent_trainer.py:466-478."""
  x = (np.asarray(episode_rewards, np.float32) + np.asarray(penalties, np.float32)).reshape(-1, group_size)
  if method == "mean_std":
    out = np.empty_like(x)
    for g in range(x.shape[0]):
      s = x[g].std(ddof=1)
      out[g] = (x[g] - x[g].mean()) / np.float32(s + 1e-6) if abs(s) > 1e-6 else 0.0
    x = out
  return x.std(axis=1, ddof=1)  # in_group_std, the filter's score


def _ragen_keep_groups(score, p):
  k = int(p * score.shape[0])
  return set(np.argsort(-score, kind="stable")[:k].tolist())


def test_variance_topp_their_score_holds_the_format_penalty_and_the_normalisation():
  from rljax.filters import variance_topp  # pylint: disable=import-outside-toplevel
  n, g = 4, 8
  # success 0/1 rewards; group 0 and 1 have the same successes, but group 1's failures made invalid actions
  r = np.array([[1, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0],
                [1, 1, 1, 0], [0, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]], float)
  pen = np.zeros_like(r)
  pen[1, 1:] = [-0.3, -0.5, -0.4]   # 3, 5, 4 invalid turns × −0.1
  pen[3, :2] = [-0.2, -0.1]         # an all-failed group made non-constant by the penalty
  gid = np.repeat(np.arange(g), n)
  theirs = _ragen_keep_groups(_ragen_filter_score(r.ravel(), pen.ravel(), n, "identity"), 0.25)
  keep_raw, _ = variance_topp(jnp.asarray(r.ravel()), jnp.asarray(gid), num_groups=g, top_p=0.25)
  ours_raw = set(np.unique(gid[np.asarray(keep_raw)]).tolist())
  keep_pen, _ = variance_topp(jnp.asarray((r + pen).ravel()), jnp.asarray(gid), num_groups=g, top_p=0.25)
  ours_pen = set(np.unique(gid[np.asarray(keep_pen)]).tolist())
  assert ours_pen == theirs          # the penalty composed into the reward: theirs
  assert ours_raw != theirs          # the raw episode reward: another kept set
  # train_all.sh's GRPO runs (mean_std): every non-constant group scores ≈ 1
  s = _ragen_filter_score(r.ravel(), pen.ravel(), n, "mean_std")
  nonconst = np.array([(r + pen)[k].std() > 0 for k in range(g)])
  np.testing.assert_allclose(s[nonconst], 1.0, atol=1e-4)
  assert np.all(s[~nonconst] == 0)
  # std/(std + 1e-6) keeps the order of well-separated stds: the same kept set here
  assert _ragen_keep_groups(s, 0.25) == theirs
  d = _defaults("variance_topp")
  assert "format_penalty −0.1" in d["format penalty in the score"][1]
  assert "original_rm_scores" in d["format penalty in the score"][1]
  assert "mean_std" in d["reward normalisation in the score"][1]
  fid = _fid("variance_topp")
  assert "ctx_manager.py" in fid.read and "es_manager.py:172-173" in fid.read and "train_all.sh" in fid.read
  assert any("format penalty" in x and "mean_std" in x for x in fid.deviations)


# ----------------------------------------------------------------------------- void_turn


def _simpletir_group_kept(rewards, acc_low=0.1, acc_high=0.9):
  """SimpleTIR simpletir_ray_trainer.py:1255-1275 (rejection_sample, acc_filter) on one uid group."""
  rewards = np.asarray(rewards, np.float32)
  if rewards.std(ddof=1) < 1e-3:
    return False
  return not (rewards.mean() < acc_low or rewards.mean() > acc_high)


def test_void_turn_their_group_filters_count_the_void_rows():
  from rljax.filters import zero_variance  # pylint: disable=import-outside-toplevel
  rewards = np.array([1, 1, 1, 1, 1, 1, 1, 0], float)  # 7 successes, the 8th trajectory void (no answer: 0)
  void = np.array([0, 0, 0, 0, 0, 0, 0, 1], bool)
  assert _simpletir_group_kept(rewards)  # theirs: mean 0.875, trained (the void row with a zero loss mask)
  keep, _ = zero_variance(jnp.asarray(rewards), jnp.zeros(8, jnp.int32), num_groups=1, valid=jnp.asarray(~void))
  assert not np.asarray(keep).any()    # ours: void_turn drops the row first; the rest is all-correct
  d = _defaults("void_turn")
  ours, theirs = d["group filters around the void mask (not this stage's)"]
  assert "after this stage" in ours and "--acc_filter 0.1_0.9" in theirs and "repeat_with_uid_suffix" in theirs
  fid = _fid("void_turn")
  assert "1261" in fid.read and "1362" in fid.read
  assert any("7 successes and 1 void" in x for x in fid.deviations)


# ----------------------------------------------------------------------------- difficulty_budget


def _e3_temperature_step(temp, entropy, target, vocab):
  """E3-RL4LLMs e3/worker/temperature_scheduler.py TemperatureScheduler.step (after the first step)."""
  factor = np.log(vocab) + np.log(np.log(vocab))
  return temp * (1 + temp * np.log(target / entropy) / factor)


def test_difficulty_budget_records_the_scripts_temperature_scheduler():
  # a step whose entropy is below the first step's raises the sampling temperature (their rewards move with it)
  assert _e3_temperature_step(1.0, 0.5, 0.6, 152064) > 1.0
  assert 480 - int(480 * 0.4) == 288  # annealing starts at step 288 of max_steps 480
  ours, theirs = _defaults("difficulty_budget")["sampling temperature (behind the rewards that rank the prompts)"]
  assert "fixed" in ours
  assert "enable_temperature_scheduler True" in theirs and "step 288" in theirs and "own shard" in theirs
  fid = _fid("difficulty_budget")
  assert "temperature_scheduler.py" in fid.read and "DP_COMPUTE_PROTO" in fid.read
  assert any("temperature schedule" in x and "not built" in x for x in fid.deviations)


# ----------------------------------------------------------------------------- format_regex


def _search_r1_compute_score_em(valid, answer_ok, has_answer, retrieval_ok, structure=0.0, final=0.0,
                                retrieval=0.0):
  """Search-R1 qa_em_format.py:154-197 compute_score_em's table (score 1)."""
  if not has_answer:
    return (structure + retrieval if retrieval_ok else structure) if valid else 0.0
  if answer_ok:
    return 1.0 if valid else 1.0 - structure
  if valid:
    return structure + retrieval if retrieval_ok else structure
  return final


def test_format_regex_validation_reward_has_no_format_scores():
  train = dict(structure=0.2, final=0.1, retrieval=0.0)  # train_grpo_format.sh:81-83 → reward_fn
  case = dict(valid=True, answer_ok=False, has_answer=True, retrieval_ok=False)
  assert _search_r1_compute_score_em(**case, **train) == 0.2
  assert _search_r1_compute_score_em(**case) == 0.0  # val_reward_fn: RewardManager(tokenizer, num_examine=1)
  assert _search_r1_compute_score_em(valid=False, answer_ok=True, has_answer=True, retrieval_ok=False) == 1.0
  fid = _fid("format_regex")
  assert "main_ppo_format" in fid.read and ":189" in fid.read
  assert "pure EM" in fid.placement
  assert any("validation reward is EM alone" in x for x in fid.deviations)


# ----------------------------------------------------------------------------- gaussian_reward


def test_gaussian_reward_stage_two_group_filter():
  from rljax.filters import zero_variance  # pylint: disable=import-outside-toplevel
  from rljax.rewards import gaussian_reward  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(7)
  target = np.full(32, 3.2)
  pred = np.concatenate([3.2 + rng.uniform(-0.01, 0.01, 16),   # group 0: every prediction within 0.01
                         3.2 + rng.uniform(-1.0, 1.0, 16)])    # group 1: spread predictions
  r, _ = gaussian_reward(jnp.asarray(pred), jnp.asarray(target), sigma=0.8)
  r = np.asarray(r, np.float64)
  ref = np.exp(-(pred - target) ** 2 / (2 * 0.8 ** 2))
  np.testing.assert_allclose(r, ref, rtol=1e-6)
  # their stage-2 filter (experience_maker_improved.py:449-492): torch.std of the 16 Gaussian rewards <= 0.001
  their_keep = [r[16 * g:16 * (g + 1)].std(ddof=1) > 0.001 for g in range(2)]
  assert their_keep == [False, True]
  keep, _ = zero_variance(jnp.asarray(r), jnp.repeat(jnp.arange(2), 16), num_groups=2)
  assert np.asarray(keep).reshape(2, 16).all(axis=1).tolist() == [True, True]  # ours keeps group 0
  ours, theirs = _defaults("gaussian_reward")["group filter on the Gaussian term"]
  assert "zero_variance" in ours and "--min_gaussian_std 0.001" in theirs and "stage 1: none" in theirs
  fid = _fid("gaussian_reward")
  assert "RLstage2.sh" in fid.read and "train_ppo_ray_improved" in fid.read and ":449-492" in fid.read


# ----------------------------------------------------------------------------- tool_call_reward / spear_replay


def _spear_episode_score(episode_reward, episode_length, global_steps, t_max=200):
  """SPEAR verl-agent agent_system/reward_manager/episode.py:136-163, use_toolcall_reward 'cosine'."""
  score = episode_reward
  if global_steps <= t_max:
    bonus = min(1.0, episode_length * 0.1) * (np.cos(global_steps / t_max * np.pi) + 1) / 2
    score += max(0.0, bonus)
  return score


def test_tool_call_reward_their_invalid_action_penalty_follows_the_bonus():
  from rljax.rewards import tool_call_reward  # pylint: disable=import-outside-toplevel
  rewards = np.array([1.0, 0.0, 0.0, 1.0])
  lengths = np.array([3, 12, 5, 7])
  invalid = np.array([0, 1, 1, 0], float)  # the step row's action was invalid
  step = 40
  with jax.enable_x64(True):
    ours, _ = tool_call_reward(jnp.asarray(rewards), jnp.asarray(lengths), step)
  ours = np.asarray(ours)
  bonus_only = np.array([_spear_episode_score(r, n, step) for r, n in zip(rewards, lengths)])
  np.testing.assert_allclose(ours, bonus_only, rtol=1e-12)  # global_steps = our step (their count from 1)
  theirs = bonus_only - 0.1 * invalid  # verl-agent ray_trainer.py:214-239, after the reward manager
  assert not np.allclose(ours, theirs)
  d = _defaults("tool_call_reward")
  assert "invalid_action_penalty_coef 0.1" in d["invalid-action penalty (after the bonus)"][1]
  assert "episode term only" in d["where the bonus enters the advantage"][1]
  assert "power of 2" in d["group filter that sees the bonus"][1]
  assert "core_gigpo.py" in _fid("tool_call_reward").read


def test_spear_replay_r_carries_the_penalty_and_the_bonus():
  """ray_trainer_hybrid.py update_batch / prepare_for_selection: R − p50 of group means, both from reward_tensor."""
  rng = np.random.default_rng(11)
  groups = rng.integers(0, 2, size=(6, 8)).astype(float)
  bonus = 0.35
  invalid = rng.integers(0, 3, size=(6, 8)) * 0.1
  r_theirs = groups + bonus - invalid
  r_ours = groups + bonus  # tool_call_reward composed, no penalty
  p50_theirs = np.percentile(r_theirs.mean(axis=1), 50)
  p50_ours = np.percentile(r_ours.mean(axis=1), 50)
  a_theirs = r_theirs[0] - p50_theirs
  a_ours = r_ours[0] - p50_ours
  assert not np.allclose(a_theirs, a_ours)
  d = _defaults("spear_replay")
  assert "− 0.1 per invalid step row" in d["what R holds"][1] and "tool-call bonus" in d["what R holds"][1]
  assert "power of 2" in d["rows behind the baseline and the buffer"][1]
  fid = _fid("spear_replay")
  assert ":451" in fid.read and "214-239" in fid.read and "1234-1364" in fid.read
  assert any("invalid-action penalty" in x for x in fid.deviations)


# ----------------------------------------------------------------------------- exgrpo


def test_exgrpo_records_the_loss_and_temperature_switches():
  d = _defaults("exgrpo")
  ours, theirs = d["loss (not this stage's)"]
  assert "exgrpo_policy" in ours
  assert "p_div_p_0.1" in theirs and "loss_remove_clip True" in theirs and "loss_remove_token_mean True" in theirs
  assert "rollout.temperature 1.0" in d["sampling temperature (entropy, log-probs)"][1]


# ----------------------------------------------------------------------------- positive_replay


def _mobilerl_task_adv_normalize(adv, source):
  """MobileRL-iclr ray_trainer.py fit: per data_source (A − mean)/(std + 1e-6) over response tokens (unbiased std)."""
  out = adv.copy()
  for s in np.unique(source):
    m = source == s
    out[m] = (adv[m] - adv[m].mean()) / (adv[m].std(ddof=1) + 1e-6)
  return out


def _mobilerl_push_top(adv_row, uuid, top_ratio=0.25):
  """replay_buffer.py ReplayBuffer.push: uuid mean of row means, the top ceil(top_ratio · #uuids) inserted."""
  uu = np.unique(uuid)
  means = {u: adv_row[uuid == u].mean() for u in uu}
  k = max(1, math.ceil(top_ratio * len(uu)))
  return set(sorted(means, key=lambda u: -means[u])[:k])


def test_positive_replay_their_push_ranks_task_normalised_advantages():
  # one row per uuid (an episode of one step), two tasks of different advantage scales
  adv = np.array([2.0, 1.8, 1.6, -1.0, -2.0, -2.4, 0.30, 0.25, -0.1, -0.2, -0.1, -0.15])
  source = np.array(["android_world"] * 6 + ["android_lab"] * 6)
  uuid = np.arange(12)
  raw_top = _mobilerl_push_top(adv, uuid)
  norm_top = _mobilerl_push_top(_mobilerl_task_adv_normalize(adv, source), uuid)
  assert raw_top == {0, 1, 2}
  assert norm_top != raw_top and (6 in norm_top)  # a small-scale task's best row enters the buffer
  d = _defaults("positive_replay")
  assert "task_adv_normalize True" in d["per-task advantage re-standardisation (before push)"][1]
  assert "mute" in d["mute_uid_all_zero_reward (before push)"][1]
  assert "world size" in d["batch cut"][1]
  fid = _fid("positive_replay")
  assert "RayPPOTrainer.fit" in fid.read and "was not found" not in fid.read
  assert "use_replay_buffer True" in fid.placement


# ----------------------------------------------------------------------------- guide


def test_guide_records_how_the_shaping_switch_is_read():
  fid = _fid("guide")
  assert "is not None" in fid.read and "ppo_trainer.yaml:34" in fid.read
  d = _defaults("guide")
  assert "is not None" in d["gamma (loss)"][1]
  assert "unused" in d["off_policy_clip_ratio"][1] and "core_algos.py:353" in d["off_policy_clip_ratio"][1]


# ----------------------------------------------------------------------------- oc_grpo


def test_oc_grpo_is_weight_is_a_temperature_07_ratio():
  """OC-GRPO ray_trainer.py:4831-4900 and :5262-5300: w_t = clamp(exp(−(log π(y|x̃) − log π(y|x))), 0.01, 1)."""
  rng = np.random.default_rng(852)
  t, v = 40, 9
  z_orig = rng.normal(size=(t, v)) * 2.0
  z_hint = z_orig + rng.normal(size=(t, v)) * 1.5
  y = np.argmax(z_hint, -1)  # a hinted sample's tokens

  def weight(temp):
    lp_hint = np.take_along_axis(_log_softmax(z_hint / temp), y[:, None], -1)[:, 0]
    lp_orig = np.take_along_axis(_log_softmax(z_orig / temp), y[:, None], -1)[:, 0]
    return np.clip(np.exp(-(lp_hint - lp_orig)), 0.01, 1.0)

  w_theirs, w_untempered = weight(0.7), weight(1.0)
  assert not np.allclose(w_theirs, w_untempered)
  assert ((w_theirs == 0.01) != (w_untempered == 0.01)).any() or ((w_theirs == 1) != (w_untempered == 1)).any()
  ours, theirs = _defaults("oc_grpo")["sampling temperature / top_p (the log-probs in the IS weight)"]
  assert "untempered" in ours and "temperature 0.7, top_p 0.95" in theirs
  fid = _fid("oc_grpo")
  assert "verl_run_901_masked_IS_n16" in fid.read and "fsdp_workers.py:701" in fid.read
  assert any("OC-GRPO-Fixed" in x and "prompt_masked" in x for x in fid.deviations)


# ----------------------------------------------------------------------------- rows that held


def test_rows_that_held_keep_their_records():
  for name in ("dara", "greso", "pilot_commit", "shuffle_pairs", "negative_advantage_drop", "dump",
               "clipped_linear_reward", "shortest_path_reward"):
    assert _fid(name).read and _fid(name).defaults, name
  assert "filter_groups" in _text("dara") and "max_num_gen_batches" in _text("dara")
  assert "success_penalty" in _text("shortest_path_reward")
