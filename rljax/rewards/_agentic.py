"""Reward shaping of the multi-turn agent papers: MobileRL's shortest-path adjustment, SPEAR's tool-call reward.

Host NumPy functions of per-episode quantities (the number of model turns, the number of tool calls, the RL
step); the ``Shaping`` stages that run them are at the end of this module. Shapes: ``[B]`` per episode row.
"""
from __future__ import annotations

import math
import re
from typing import Optional, Sequence

import numpy as np

__all__ = ["shortest_path_reward", "tool_call_reward", "cosine_weight", "count_calls", "DEFAULT_CALL_PATTERN",
           "SCHEDULES"]

DEFAULT_CALL_PATTERN = r"<call>"  # rljax.envs' tool-call convention (<call>code</call>)
SCHEDULES = ("cosine", "constant")


def _vector(name: str, x, b: Optional[int] = None, dtype=np.float64) -> np.ndarray:
  a = np.asarray(x)
  if a.ndim != 1 or (b is not None and a.shape[0] != b):
    raise ValueError(f"{name} must have shape [B]{'' if b is None else f' = ({b},)'}, got {a.shape}")
  if np.issubdtype(a.dtype, np.number) and not np.all(np.isfinite(a.astype(np.float64))):
    raise ValueError(f"{name} contains non-finite values (NaN or inf)")
  return a.astype(dtype)


def shortest_path_reward(rewards, num_steps, group_id, *, shortest=None, success: float = 1.0, valid=None):
  """MobileRL shortest-path reward adjustment (ADAGRPO, seed 000_3e503271be254a43.txt L37).

      r'_i = r_i − 1[r_i ≠ 0] · max(l_i − L_i, 0) / (2 l_i)

  ``l_i`` is episode i's number of steps (model turns) and ``L_i`` the reference length: by default (the authors'
  code) the fewest steps of a *successful* episode (``r_j >= success``) among the valid episodes of i's group (the
  same task); an episode whose group has no success, or whose reward is 0, is unchanged. ``shortest [B]`` gives
  the reference instead (e.g. the true shortest path, ``rljax.envs.shortest_path``); then every episode with a
  non-zero reward is adjusted. For a success (r = 1) the adjusted reward is ``(1 + L/l) / 2``: 1 on a shortest
  episode, falling towards 1/2 as the episode gets longer, so a shorter success always scores higher.

  Source: the abstract names "shortest-path reward adjustment ... reshape rewards concerning the task length";
  the form is the authors' code (github.com/xuyifan-0731/MobileRL-iclr, training/verl/workers/reward_manager/
  step.py, ``check_uid_uuid_reward``), where a group is a task id (uid) and an episode's length its step count.
  Ours: ``success`` (authors: ``r == 1``) and ``shortest=`` are parameters; invalid rows are unchanged and no
  reference.

  Args:
    rewards: ``[B]`` episode rewards. num_steps: ``[B]`` steps (turns) per episode, >= 0 (0: unchanged).
    group_id: ``[B]`` int, episodes of the same task. shortest: optional ``[B]`` reference lengths (> 0).
    success: reward at or above which an episode counts as a success. valid: optional ``[B]`` bool.

  Returns:
    ``(rewards [B] float32, info)`` with ``penalty [B]``, ``reference [B]`` (0 = none) and ``mean_penalty``.
  """
  r = _vector("rewards", rewards)
  b = r.shape[0]
  steps = _vector("num_steps", num_steps, b)
  gid = _vector("group_id", group_id, b, np.int64)
  if np.any(steps < 0):
    raise ValueError("num_steps must be >= 0")
  v = np.ones(b, bool) if valid is None else _vector("valid", valid, b, bool)
  if not math.isfinite(success):
    raise ValueError(f"success must be a finite number, got {success!r}")
  if shortest is not None:
    ref = _vector("shortest", shortest, b)
    if np.any(ref[v] <= 0):
      raise ValueError("shortest must be > 0 on valid rows")
  else:
    ref = np.zeros(b)
    won = v & (r >= success) & (steps > 0)
    for g in np.unique(gid[v]):
      rows = v & (gid == g)
      if np.any(won & rows):
        ref[rows] = steps[won & rows].min()
  adjust = v & (r != 0) & (ref > 0) & (steps > 0)
  penalty = np.where(adjust, np.maximum(steps - ref, 0.0) / (2.0 * np.maximum(steps, 1.0)), 0.0)
  out = (r - penalty).astype(np.result_type(np.float32, np.asarray(rewards).dtype))  # float64 stays (x64)
  return out, {"penalty": penalty.astype(np.float32), "reference": ref.astype(np.float32),
               "mean_penalty": float(penalty[v].mean()) if v.any() else 0.0}


def cosine_weight(step, decay_steps: int, *, schedule: str = "cosine", increasing: bool = False) -> float:
  """``w(t) = ½(1 + cos(π·min(t, T)/T))`` (1 at t = 0, 0 from t = T on); ``increasing``: ``1 − w(t)``.
  ``schedule="constant"``: 1 (``increasing``: 1 too)."""
  if schedule not in SCHEDULES:
    raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
  if isinstance(decay_steps, bool) or not isinstance(decay_steps, int) or decay_steps < 1:
    raise ValueError(f"decay_steps must be an int >= 1, got {decay_steps!r}")
  if schedule == "constant":
    return 1.0
  w = 0.5 * (1.0 + math.cos(math.pi * min(max(int(step), 0), decay_steps) / decay_steps))
  return 1.0 - w if increasing else w


def count_calls(turns: Sequence[Sequence[str]], pattern: str = DEFAULT_CALL_PATTERN) -> np.ndarray:
  """``[B]`` int: matches of ``pattern`` over each trajectory's model turns (a turn that is not text counts 0)."""
  if isinstance(turns, (str, bytes)):
    raise ValueError("turns must be a sequence of trajectories (each a sequence of turn strings)")
  try:
    rx = re.compile(pattern, re.DOTALL)
  except re.error as e:
    raise ValueError(f"pattern is not a valid regex: {e}") from None
  out = np.zeros(len(turns), np.int64)
  for i, traj in enumerate(turns):
    if isinstance(traj, (str, bytes)):
      raise ValueError(f"turns[{i}] must be a sequence of turn strings, got a single string")
    out[i] = sum(len(rx.findall(t)) for t in traj if isinstance(t, str))
  return out


def _out_dtype(rewards):
  """float64 when ``rewards`` is float64 (e.g. under ``jax_enable_x64``), else float32."""
  return np.float64 if np.asarray(rewards).dtype == np.float64 else np.float32


def tool_call_reward(rewards, num_steps, step: int, *, coef: float = 1.0, decay_steps: int = 200,
                     schedule: str = "cosine", max_calls: int = 10):
  """SPEAR's auxiliary tool-call reward with its curriculum (seed 000_3e503271be254a43.txt L75).

      r'_i = r_i + coef · min(1, n_i / K) · w(t),    w(t) = ½(1 + cos(π·min(t, T)/T))

  ``n_i`` is episode i's count (the authors: its environment steps, ``episode_lengths``; or its tool calls),
  ``K = max_calls`` (authors: 10, i.e. ``min(1, 0.1·n)``), ``t`` the RL step and ``T = decay_steps`` (authors'
  example scripts: 200): the intrinsic reward drives tool use early ("skill-level exploration") and fades to 0
  at step T, leaving the task reward. ``schedule="constant"``: ``w = 1`` throughout (the authors' "constant").

  Source: the authors' code (github.com/TencentYoutuResearch/SPEAR, verl-agent/agent_system/reward_manager/
  episode.py L143-159, ``use_toolcall_reward`` ∈ {none, constant, cosine}, ``max_toolcall_steps``):
  ``score += min(1, 0.1·episode_lengths)·(cos(π·global_steps/T) + 1)/2`` while ``global_steps <= T``, with
  T = 200 in every example script (``examples/*/run_*_spear.sh``; the yaml/README default is 100). Ours: ``coef``
  (authors 1) and ``K`` are parameters; the authors' ``global_steps`` counts from 1, ``step`` is rljax's RL step.

  Args:
    rewards: ``[B]`` episode rewards; num_steps: ``[B]`` count >= 0 per episode (environment steps, the authors'
      counter, or tool calls); step: the RL step (>= 0).

  Returns:
    ``(rewards [B], info)`` (float64 when ``rewards`` is float64, else float32) with ``bonus [B]``, ``weight``
    and ``call_rate`` (share of rows with a count > 0).
  """
  r = _vector("rewards", rewards)
  n = _vector("num_steps", num_steps, r.shape[0])
  if np.any(n < 0):
    raise ValueError("num_steps must be >= 0")
  if not (isinstance(coef, (int, float)) and not isinstance(coef, bool) and math.isfinite(coef) and coef >= 0):
    raise ValueError(f"coef must be a finite number >= 0, got {coef!r}")
  if isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 1:
    raise ValueError(f"max_calls must be an int >= 1, got {max_calls!r}")
  w = coef * cosine_weight(step, decay_steps, schedule=schedule)
  bonus = w * np.minimum(1.0, n / max_calls)
  dt = _out_dtype(rewards)
  return (r + bonus).astype(dt), {"bonus": bonus.astype(dt), "weight": float(w),
                                  "call_rate": float((n > 0).mean()) if n.size else 0.0}


# ----------------------------------------------------------------------------- the stages (the rows' ``stage``)


def _turn_counts(data) -> np.ndarray:
  """``[B]`` model turns of each episode: its valid step (turn) columns, ``data.step_mask [B, S]``."""
  r = data.require("step_rewards", "a turn-count shaping stage")
  m = data.step_mask if data.step_mask is not None else np.ones(np.shape(r), bool)
  return np.asarray(m, bool).sum(1).astype(np.float64)


def _shortest_path_reward_stage(*, success: float = 1.0):
  """MobileRL shortest-path adjustment as a ``Shaping`` stage: the episode reward ``data.rewards`` less
  ``max(l − L, 0)/(2l)``, ``l`` = the episode's turns (``data.step_mask``), ``L`` = the fewest turns of a
  success in its group (``rljax.rewards.shortest_path_reward``)."""
  from rljax.stages import Shaping  # pylint: disable=import-outside-toplevel
  shortest_path_reward(np.zeros(1), np.ones(1), np.zeros(1, int), success=success)  # validates now

  def fn(data):
    out, info = shortest_path_reward(data.rewards, _turn_counts(data), data.group_id, success=success,
                                     valid=data.valid)
    return out, {"mean_penalty": info["mean_penalty"]}

  return Shaping(fn, name="shortest_path_reward", needs={"step_rewards"})


TOOL_CALL_COUNTS = ("turns", "calls")


def _tool_call_reward_stage(*, coef: float = 1.0, decay_steps: int = 200, schedule: str = "cosine",
                            max_calls: int = 10, count: str = "turns", pattern: str = DEFAULT_CALL_PATTERN):
  """SPEAR's tool-call reward as a ``Shaping`` stage: ``data.rewards + coef·min(1, n/K)·w(step)``, ``w`` the cosine
  decay over ``decay_steps`` RL steps (``rljax.rewards.tool_call_reward``; defaults are the authors': K = 10,
  T = 200).

  ``count="turns"`` (default, the authors' counter ``episode_lengths``): ``n`` = the episode's environment steps,
  i.e. its model turns (``len(data.turns[i])``); ``count="calls"``: ``n`` = matches of ``pattern`` in the
  episode's model turns (default ``<call>``, rljax.envs' tool calls).
  """
  from rljax.stages import Shaping  # pylint: disable=import-outside-toplevel
  if count not in TOOL_CALL_COUNTS:
    raise ValueError(f"count must be one of {TOOL_CALL_COUNTS}, got {count!r}")
  tool_call_reward(np.zeros(1), np.zeros(1), 0, coef=coef, decay_steps=decay_steps, schedule=schedule,
                   max_calls=max_calls)  # validates now
  count_calls([[""]], pattern)

  def fn(data):
    turns = data.require("turns", "tool_call_reward")
    if count == "calls":
      n = count_calls(turns, pattern)
    else:
      if any(isinstance(t, (str, bytes)) for t in turns):
        raise ValueError("tool_call_reward: data.turns must hold one sequence of turn strings per row")
      n = np.array([len(t) for t in turns], np.int64)
    out, info = tool_call_reward(data.rewards, n, data.step, coef=coef, decay_steps=decay_steps,
                                 schedule=schedule, max_calls=max_calls)
    return out, {"weight": info["weight"], "call_rate": info["call_rate"]}

  return Shaping(fn, name="tool_call_reward", needs={"turns"})


_S0 = "000_3e503271be254a43.txt"


def _technique_rows():
  from rljax._technique import Fidelity, Technique
  return (
      Technique("shortest_path_reward", "shaping", shortest_path_reward,
                "r' = r − 1[r ≠ 0]·max(l − L, 0)/(2l), L = fewest steps of a success in the group",
                f"{_S0} L37 (MobileRL / ADAGRPO)",
                stage=_shortest_path_reward_stage,
                fidelity=Fidelity("authors_code", "github.com/xuyifan-0731/MobileRL-iclr: training/verl/workers/"
                                  "reward_manager/step.py (check_uid_uuid_reward)",
                                  "steps = model turns (authors: step rows of an episode); success = r >= 1 "
                                  "(authors r == 1); shortest= (e.g. a true shortest path) is our option",
                                  read="xuyifan-0731/MobileRL-iclr@da92ec0c (code index) training/verl/workers/"
                                       "reward_manager/step.py:18-66 (check_uid_uuid_reward) and :110-174 "
                                       "(StepRewardManager.__call__, off in validation; nineteenth draw, #51: "
                                       "the record had :18-69 and :95-170, which starts inside __init__; "
                                       ":115-119 return rm_scores unchanged, :147 the reward tensor shaped like "
                                       "responses, :151 prompt_len = the prompts tensor's width, :163-174 the "
                                       "'token' / 'step' / no-normalisation writes); training/configs/"
                                       "glm_mobilerl.yaml (reward_model); training/verl/trainer/ppo/reward.py "
                                       "(load_reward_manager), training/verl/trainer/main_ppo.py "
                                       "(reward_fn = load_reward_manager(config, ...)); #51 per-row review f: "
                                       "training/verl/trainer/ppo/ray_trainer.py fit() (Buffer(real_bsz·2, "
                                       "rollout.n if trainer.strict_group else 1, algorithm.dapo_sampling); "
                                       "full_async: get_async_seqs(buffer, minimum=real_bsz, multiple=world_size); "
                                       "batch[:len(batch) // world_size · world_size] before compute_reward), "
                                       "training/verl/workers/agentic/buffer.py (Buffer.add / get: strict_group = "
                                       "group_size > 1; get pops every queued episode, the round-down to "
                                       "`multiple` commented out), training/verl/workers/fsdp_workers.py "
                                       "get_async_seqs (one uuid4 per episode, one row per step: make_batch)",
                                  defaults=(("success", "r >= 1.0", "any step score == 1"),
                                            ("reference L", "fewest turns of a success in the group",
                                             "fewest step rows of a successful uuid among the uid's rows in the "
                                             "training batch (not the task's whole group: see the deviations)"),
                                            ("penalty", "max(l − L, 0)/(2l) when r ≠ 0",
                                             "max(l − L, 0)/(2l) unless every score of the uuid is 0"),
                                            ("reward manager switches", "(none: the penalty is the stage)",
                                             "glm_mobilerl.yaml: reward_manager 'android', length_normalise "
                                             "False, success_penalty True; load_reward_manager's fallbacks for "
                                             "reward_manager 'step': length_normalise 'step', success_penalty "
                                             "False; StepRewardManager's own defaults: 'token', True")),
                                  placement="theirs: the reward manager after the rollout, on each step row of "
                                            "the training batch (episode = uuid, task = uid; under "
                                            "glm_mobilerl.yaml's full_async a batch holds the finished episodes "
                                            "the async buffer returns, not whole groups); raw − penalty goes on the "
                                            "row's last token (training/configs/glm_mobilerl.yaml: "
                                            "length_normalise False, success_penalty True); training only; "
                                            "ours: a shaping stage on the episode reward data.rewards, l = the "
                                            "row's model turns, groups = group_id, invalid rows unchanged",
                                  deviations=(
                                      "success is r >= success (1.0); theirs r == 1 exactly (a reward above 1 "
                                      "counts for us only)",
                                      "an episode is one row with its turns counted; theirs one row per step, "
                                      "each holding the episode's adjusted score",
                                      "shortest= (a true shortest path) is ours",
                                      "their StepRewardManager's length_normalise modes 'token' (the class "
                                      "default: final_score/resp_len) and 'step' (final_score ÷ the episode's "
                                      "step rows in the batch) are not built; neither lands on the response "
                                      "tokens: both write reward_tensor[i, P : P + resp_len] (step.py:166, 172) "
                                      "into a tensor shaped like responses (:147), P = the prompts tensor's "
                                      "width (:151), so the values sit P columns right of the response, cut at "
                                      "the response width, and with P ≥ the response width (glm_mobilerl.yaml: "
                                      "max_prompt_length 16384, max_response_length 4096) nothing is written: a "
                                      "zero reward on every row (nineteenth draw, #51: the record had said 'spread "
                                      "evenly over the response tokens' / 'on every response token'); "
                                      "glm_mobilerl.yaml sets False (the score on the row's last response token, "
                                      ":174), ours; with a reward model's rm_scores in the batch __call__ returns "
                                      "them unchanged, no penalty (:115-119; reward_model.enable False in the "
                                      "yaml)",
                                      "the stored code does not show how glm_mobilerl.yaml reaches this manager: "
                                      "its reward_manager 'android' is not one load_reward_manager registers "
                                      "(naive, prime, batch, dapo, step; anything else raises "
                                      "NotImplementedError), and with 'step' and the keys absent the penalty "
                                      "is off (success_penalty False); the record takes the yaml's "
                                      "success_penalty True and length_normalise False as their runs'",
                                      "their group is the uid's episodes in this training batch, not the task's "
                                      "whole group: glm_mobilerl.yaml sets trainer.full_async True and no "
                                      "strict_group, so fit() builds the async Buffer with group size 1 and each "
                                      "step trains on whichever episodes have finished (Buffer.get pops them "
                                      "all): a uid's rollout.n = 16 episodes can straddle two batches, L is the "
                                      "fewest steps of a success among the uid's episodes in this batch (a uid "
                                      "whose successes landed in another batch gets no penalty), and "
                                      "batch[:len // world_size · world_size], applied to the step rows before "
                                      "compute_reward, can drop the last step rows of the last episodes, "
                                      "shortening their l (and L); ours: every group of the step whole, l = all "
                                      "of the row's turns"))),
      Technique("tool_call_reward", "shaping", tool_call_reward,
                "r' = r + coef·min(1, n/K)·½(1 + cos(π·min(t, T)/T)), n = environment steps, K = 10, T = 200",
                f"{_S0} L75 (SPEAR, arXiv 2509.22601)",
                stage=_tool_call_reward_stage,
                fidelity=Fidelity("authors_code", "github.com/TencentYoutuResearch/SPEAR: verl-agent/agent_system/"
                                  "reward_manager/episode.py L143-159; T=200: examples/*/*_spear.sh",
                                  "n = model turns (authors: episode_lengths, the env steps); count='calls' (regex "
                                  "tool calls) and coef (authors 1) are ours; step = rljax's RL step (authors' "
                                  "global_steps starts at 1)",
                                  read="TencentYoutuResearch/SPEAR@7e843151 verl-agent/agent_system/reward_manager/"
                                       "episode.py:136-163 (score += min(1, 0.1·episode_lengths)·(cos(π·t/T) + 1)/2 "
                                       "while t <= T); verl-agent/verl/trainer/main_ppo.py:159 (normalize_by_length "
                                       "False); verl-agent/verl/trainer/ppo/ray_trainer_hybrid.py:830-858 "
                                       "(global_steps from 1); examples/gigpo_trainer/run_alfworld_spear.sh:59-60; "
                                       "README.md:172-182; the second implementation, the ReTool runs (read in the "
                                       "#51 read-whole pass): verl/recipe/spear/reward.py:89-163 "
                                       "default_compute_score_enforce_toolcall_posneg_decay (+0.1 per assistant "
                                       "message with tool_calls, capped at 1, × the same cosine, t <= T), :166-248 "
                                       "..._qwen3 (a correct answer, score > 0, gets 1[any call]·w instead); "
                                       "verl/recipe/spear/run_qwen{2,3}-32b_spear.sh:79-80, 128-131, 181-182 "
                                       "(cosine, T = 200, agentConcurrent); verl/verl/workers/reward_manager/"
                                       "agentConcurrent.py:96-146; verl/recipe/spear/retool.py:152-195 (compute_score"
                                       ", _wtool, _wtool_neg: (num_turns − 2)/2·0.1 variants, not in a script). "
                                       "Error-class sweep (#51, s2b): what surrounds the bonus in verl-agent's spear "
                                       "scripts (examples/{gigpo,grpo}_trainer/run_{alfworld,webshop}_spear.sh): "
                                       "verl-agent/verl/trainer/ppo/ray_trainer_hybrid.py:636-641 (gigpo: "
                                       "step_rewards = core_gigpo.compute_step_discounted_returns of the environment "
                                       "rewards, before the reward manager), :643 (adjust_batch), :927-1005 "
                                       "(compute_reward, the four response filters zeroing response_mask, "
                                       "_filter_rollout), :725-731 (apply_invalid_action_penalty, after the reward); "
                                       "verl-agent/verl/trainer/ppo/ray_trainer.py:214-239 (0.1 subtracted in place "
                                       "from token_level_scores and from step_rewards), :1234-1364 (_filter_rollout: "
                                       "groups ranked by the std of their trajectories' mean reward_tensor, the "
                                       "kept rows then cut to a power of 2); "
                                       "verl-agent/gigpo/core_gigpo.py:72-105, 115-145 (episode term from "
                                       "token_level_rewards, step term from step_rewards). Per-row review q (#51): "
                                       "verl-agent/agent_system/multi_turn_rollout/rollout_loop.py:355-445 "
                                       "(vanilla_multi_turn_loop: one batch row per environment step, "
                                       "episode_lengths[active] += 1 per step) and :236-295 (gather_rollout_data: "
                                       "every active step row kept, each given its episode's episode_rewards and "
                                       "episode_lengths); episode.py:108-163 (the score, bonus included, on the "
                                       "last response token of every such row); verl-agent/verl/trainer/ppo/"
                                       "core_algos.py:208-287 (compute_grpo_outcome_advantage: "
                                       "compute_mean_std_cross_all_data True by default, so every row of the uid "
                                       "enters its mean and std; ray_trainer.py:320-336 does not pass it); "
                                       "core_gigpo.py:134, 146-213 (episode_norm_reward, the same default)",
                                  defaults=(("coef", "1.0", "1 (fixed)"),
                                            ("max_calls K", "10", "10 (0.1·episode_lengths, fixed)"),
                                            ("decay_steps T", "200", "200 (run_*_spear.sh); README yaml 100"),
                                            ("schedule", "'cosine'", "'cosine' (scripts); 'constant', 'none'"),
                                            ("count", "'turns' (model turns)", "episode_lengths (environment "
                                             "steps); ReTool runs: assistant messages carrying tool_calls"),
                                            ("bonus on a correct answer", "min(1, n/K)·w as on any row",
                                             "the same (verl-agent, qwen2 ReTool); run_qwen3-32b_spear.sh: "
                                             "1[n > 0]·w when score > 0"),
                                            ("invalid-action penalty (after the bonus)", "none",
                                             "use_invalid_action_penalty True, invalid_action_penalty_coef 0.1 "
                                             "(every verl-agent spear script): 0.1 subtracted from the score "
                                             "(bonus included) of each step row whose action was invalid, after the "
                                             "reward manager"),
                                            ("where the bonus enters the advantage", "data.rewards, read by "
                                             "whatever advantage stage follows",
                                             "gigpo scripts (adv_estimator gigpo, gamma 0.95, mean_std_norm, "
                                             "step_advantage_w 1): the episode term only; the step term's "
                                             "discounted returns are the environment rewards', computed before the "
                                             "reward manager, so they carry no bonus (but do carry the "
                                             "invalid-action penalty); grpo scripts: the GRPO advantage of the "
                                             "score"),
                                            ("group filter that sees the bonus", "none (compose variance_topp after "
                                             "the shaping)",
                                             "rollout_filter_ratio 0.75, rollout_filter_type std (every spear "
                                             "script): the int(0.75·#groups) groups of largest std of the "
                                             "trajectory-mean score (bonus in, penalty not yet) are kept, then "
                                             "their rows cut at random to the largest power of 2 "
                                             "(ray_trainer.py:1315-1330), before the advantage")),
                                  placement="theirs: the episode reward manager after the rollout, on every "
                                            "step row of each episode (verl-agent trains one row per environment "
                                            "step, rollout_loop.py:236-295; each row carries its episode's "
                                            "episode_rewards and episode_lengths), added to the episode reward (the "
                                            "score on each row's last response token), so an episode of n steps "
                                            "holds its score n times in the batch, and GRPO's group mean and std "
                                            "(and GiGPO's episode term) are taken over these step rows "
                                            "(core_algos.py:208-287, compute_mean_std_cross_all_data True), with "
                                            "t = the trainer's global_steps; also in "
                                            "validation (val_reward_fn gets the same meta_info, "
                                            "ray_trainer.py:945-950); ReTool runs: the custom reward function "
                                            "per response, called by the agentConcurrent manager; ours: a "
                                            "shaping stage after the reward on data.rewards, t = rljax's RL step",
                                  deviations=(
                                      "t counts from 0 (rljax's step); theirs from 1: ours at step t is theirs "
                                      "at global_steps t (one step later in their run)",
                                      "n = the episode's model turns; one model turn is one environment step, as "
                                      "their episode_lengths; count='calls' (regex matches) is ours",
                                      "coef and K are parameters (theirs fixed at 1 and 10)",
                                      "their ReTool runs' rule (verl/recipe/spear/reward.py) counts assistant "
                                      "messages with tool calls: count='calls' with one match per calling turn "
                                      "equals the qwen2 run's; the qwen3 run's binary bonus on correct answers "
                                      "(1[n > 0]·w when score > 0) is not built, nor their un-masking of an "
                                      "incomplete row that called a tool (is_incomplete 0)",
                                      "their validation scores also carry the bonus (val_reward_fn, "
                                      "ray_trainer.py:945-950); this row is a stage of the RL step (rl.shaping)",
                                      "around the bonus their spear scripts subtract the invalid-action penalty "
                                      "(0.1 per invalid step row) afterwards and, with GiGPO, leave it out of the "
                                      "step-level term (its returns are the environment rewards'); ours adds the "
                                      "bonus to data.rewards, which every later stage reads, and has no "
                                      "invalid-action penalty; their std group filter (keep 75%) ranks groups on "
                                      "the score with the bonus, as variance_topp composed after this stage does",
                                      "an episode is one row here; theirs one row per environment step, each "
                                      "holding the episode's score with the bonus, and their GRPO advantage (and "
                                      "GiGPO's episode term) takes the group's mean and std over those step rows "
                                      "(compute_mean_std_cross_all_data True, core_algos.py:215, 249-261): an "
                                      "episode weighs in proportion to its step count n, the count the bonus "
                                      "grows with. E.g. at t = 0 a group of a 2-step episode with environment "
                                      "reward 1 (score 1.2) and an 8-step one with reward 0 (score 0.8): theirs "
                                      "mean 0.88, GRPO advantages 1.897 / −0.474 (std 0.1687 over the 10 rows); "
                                      "over the two episodes the mean is 1.0 and the advantages are equal and "
                                      "opposite. Not built (the advantage stages group episode rows). Per-row "
                                      "review q (#51): the record said 'on each episode's row'"))),
  )


TECHNIQUES = _technique_rows()
