"""The episode path of the Collector: a multi-turn task's episodes (``rljax.envs.run_episodes``) as ``StepData``.

``Collector.episodes`` calls :func:`episode_step_data`; the rows, rewards and per-turn fields are described
there and in docs/agents.md ("Training on an environment").
"""
from __future__ import annotations

import numpy as np

from rljax.envs import pack_windows
from rljax.stages import Extra, StepData
from rljax.train._streams import stream

__all__ = ["episode_step_data", "ROLE_ID"]

# The extra a self-play episode's rows carry (``data.role_id``; gathered into ``rljax.stages.EXTRAS``); a replay
# stage gives a replayed row the stored row's (``rljax.replay``).
ROLE_ID = Extra("role_id", "iu", "B", "self-play episodes (rljax.train._episodes); a replayed row takes the stored "
                "row's", "the row's self-play role (-1: none)")
EXTRAS = (ROLE_ID,)


def episode_step_data(collector, call, problems, index, *, step: int, key, side) -> StepData:
  """Multi-turn: ``group_size`` episodes of each problem (``rljax.envs.run_episodes``) as ``StepData``.

  A row is an episode: ``completion_mask`` = its model-written tokens (observations and tool output are
  context), ``logp_behavior`` the sampler's over them, ``turn_ids`` (0-based model turn, -1 on the opening
  prompt and padding), ``step_rewards [B, max_turns]`` = the per-turn rewards with ``step_mask`` = the turns
  played, ``rewards`` = the episode's reward, ``correct`` = ``task.success``, ``turns`` = the model turns'
  texts (``void_turn`` reads them). A failed episode's row is invalid. An environment that counts void
  turns (``info["void_turns"]``, the tool countdown) also gives the share of episodes with one (``void_turn``). A self-play task (``task.roles``) gives
  one row per role of each of ``group_size / len(roles)`` games: only that role's turns are trained and its
  reward is the game's outcome for it (``data.role_id`` and ``task_id``: the role's index, ``num_tasks`` =
  the number of roles: the key of a role-conditioned baseline, SPIRAL's RAE).

  With a context budget (``EpisodeConfig.context_budget``) an episode that moved to new context windows is
  still one row: its windows packed side by side (``rljax.envs.pack_windows``; ``segment_ids`` = the window,
  the attention packing), each model token trained once, in the window that first wrote it.
  """
  task, g = collector.exp.task, collector.rl.group_size
  roles = tuple(task.roles)
  n = g // len(roles) if roles else g
  out = call.episodes(problems, n=n, greedy=False, temperature=call.temperature, key=key,
                      group_ids=np.arange(collector.lo, collector.lo + len(problems), dtype=np.int32))
  windows = None
  if task.episode_config.context_budget is not None:  # an episode's context windows: one packed row
    windows = np.bincount(out.row_episode, minlength=len(out.episodes))  # the runner's rows (windows) per episode
    out = pack_windows(out, collector.exp.seq_len, pad_id=collector.exp.runner.pad_id)
  eps = list(out.episodes)
  # each model turn once: text carried into a later window is context there (trainable=False)
  texts = [tuple(s.text for w in ep.windows for s in w if s.source == "model" and s.trainable) for ep in eps]
  success = np.asarray([task.success(ep) for ep in eps], np.float32)
  b_eps = len(eps)
  if roles:  # rows: for each game, one row per role (rows of a group stay consecutive)
    rows = np.repeat(np.arange(b_eps), len(roles))
    role_of_row = np.tile(np.arange(len(roles)), b_eps)
    turn_role = np.full((b_eps, out.turn_rewards.shape[1]), -1, np.int32)
    for i, ep in enumerate(eps):
      turn_role[i, :len(ep.roles)] = [roles.index(r) if r in roles else -1 for r in ep.roles]
    tid = out.turn_ids[rows]
    own = np.take_along_axis(turn_role[rows], np.maximum(tid, 0), 1) == role_of_row[:, None]
    model_mask = out.model_mask[rows] & (tid >= 0) & own
    step_mask = out.turn_valid[rows] & (turn_role[rows] == role_of_row[:, None])
    rewards = np.asarray([0.0 if eps[i].failed else float(dict(eps[i].info).get("role_rewards", {}).get(
        roles[r], 0.0)) for i, r in zip(rows, role_of_row)], np.float32)
    role = role_of_row.astype(np.int32)
    task_id = {"task_id": role_of_row.astype(np.int32), "num_tasks": len(roles)}  # a role-conditioned baseline's key
  else:
    rows = np.arange(b_eps)
    model_mask, step_mask, rewards, role, task_id = out.model_mask, out.turn_valid, out.episode_rewards, None, {}
  b = rows.size
  expanded = tuple(problems[i // n] for i in rows)
  cm = np.asarray(model_mask, bool)
  summary = out.summary()
  if windows is not None:
    summary["windows_per_episode"] = float(np.mean(windows))
  if any("void_turns" in dict(ep.info) for ep in eps):  # the environment counts void turns (tool countdown)
    summary["void_turn"] = float(np.mean([dict(ep.info).get("void_turns", 0) > 0 for ep in eps]))
  for k in ("turns", "tool_calls_per_episode", "failed", "truncated", "void_turn", "windows_per_episode"):
    if k not in summary:
      continue
    total, count = call.episode_sums.get(k, (0.0, 0))
    call.episode_sums[k] = (total + summary[k] * b_eps, count + b_eps)
  return StepData(
      tokens=out.tokens[rows], prompt_mask=out.prompt_mask[rows], completion_mask=cm,
      group_id=np.repeat(np.arange(collector.lo, collector.lo + len(problems), dtype=np.int32), g),
      num_groups=collector.rl.num_prompts, valid=~out.failed[rows], lengths=cm.sum(1).astype(np.int32),
      completions=tuple("".join(texts[i]) for i in rows), problems=expanded,
      prompt_index=np.repeat(np.asarray(index, np.int64), g), rewards=np.asarray(rewards, np.float32),
      correct=success[rows], logp_behavior=np.where(cm, out.logp_behavior[rows], 0.0).astype(np.float32),
      entropy_behavior=np.where(cm, out.entropy[rows], 0.0).astype(np.float32),
      max_new_tokens=collector.exp.runner.max_turns * collector.exp.runner.max_new_tokens, step=step, key=key,
      step_rewards=np.where(step_mask, out.turn_rewards[rows], 0.0).astype(np.float32),
      step_mask=np.asarray(step_mask, bool), turn_ids=out.turn_ids[rows], turns=tuple(texts[i] for i in rows), reward_names=("environment",),
      segment_ids=None if out.segment_ids is None else out.segment_ids[rows],
      **task_id).with_extras(role_id=role).replace(key=stream(side, "score"))
