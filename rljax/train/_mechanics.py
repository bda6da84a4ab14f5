"""Technique mechanics of a sampling round, apart from sampling, scoring and padding (``Collector``): each runs
only when a stage declares it (the ``"prompts"``, ``"rollouts"`` and ``"resample"`` rows' selectors,
``rljax.train._phases``).

* a curriculum's draw (a prompt filter's ``draw``): the dataset prompts it picks replace the loader's candidates;
* a replay stage's prompt swap (its ``prompts``): some of the round's prompts replaced by stored ones, and per
  group the stored row to replay;
* a greedy baseline (``greedy_rewards``, ReMax's): one greedy rollout of each prompt, scored and not counted in
  the step's statistics, its reward repeated over the group's rows;
* pilot rollouts (a prompt filter's ``pilot=n``): ``n`` scored rollouts of each candidate prompt shown to its
  ``select``; a committed group's pilot rows then join its ``group_size - n`` committed rows;
* hinted rollouts (a replay stage's ``hints`` and ``splice``, ``rljax.hints``): hinted prompts sampled and spliced
  behind the unhinted ones in place of some failed rows (a prompt longer than the sampler's largest prompt bucket
  is counted, not sampled).

``ctx`` is a context of ``rljax.train._phases`` (the draw and the swap run in the start-up check's too): ``call``,
``num_dataset_prompts``, ``train_problems``, ``group_size``; the collector's sampling ones: ``sample(call, problems,
n, key)`` (this process's rows of ``n`` samples of each prompt), ``score(call, rows, problems, index, ...)``,
``sample_scored(r, problems, index, n, sample_key, score_key, greedy=, record=)`` (both), ``exp``, ``multi_turn``,
``lo``, ``hi``. ``r`` is the round (``rljax.train._rollout._Round``).
"""
from __future__ import annotations

import types

import numpy as np

from rljax.stages import PromptData, StepData, scalar_metrics
from rljax.train._rows import concat_steps
from rljax.train._streams import stream

__all__ = ["curriculum_draw", "replay_swap", "greedy_baseline", "pilot_rollouts", "join_pilots", "hint_rollouts"]


def curriculum_draw(ctx, r, prompt_filters, key, problems, index):
  """A curriculum's ``draw`` (at most one of ``prompt_filters`` has one): the dataset prompts it picks replace the
  candidates ``(problems, index)``; ``(problems, index)``."""
  for j, pf in enumerate(prompt_filters):
    if pf.draw is None:
      continue
    new, r.prompt_states[pf.name], m = ctx.call(
        "prompt_filters.draw", pf,
        lambda pf=pf, problems=problems, index=index: pf.draw(
            r.prompt_states[pf.name], PromptData(tuple(problems), index, ctx.num_dataset_prompts, r.step),
            stream(key, "prompt_draw", j)))
    new = np.asarray(new, np.int64).reshape(-1)
    n = ctx.num_dataset_prompts
    if new.shape != (len(problems),) or new.min(initial=0) < 0 or new.max(initial=0) >= n:
      raise ValueError(f"prompt filter {pf.name!r} drew {new.tolist()}; expected {len(problems)} dataset indices "
                       f"in [0, {n})")
    problems, index = [ctx.train_problems[int(i)] for i in new], new
    r.metrics.update(scalar_metrics(m, pf.name))
  return problems, index


def replay_swap(ctx, r, stage):
  """A replay stage's pre-rollout swap of the round's prompts: ``(problems, index, slots [P])``."""
  problems = r.problems
  new, slots, m = ctx.call("replay.prompts", stage, lambda: stage.prompts(
      r.replay_states[stage.name], np.asarray(r.index, np.int64), stream(r.side, "replay_prompts")))
  new, slots = np.asarray(new, np.int64), np.asarray(slots, np.int64)
  if new.shape != (len(problems),) or slots.shape != (len(problems),):
    raise ValueError(f"replay stage {stage.name!r}: prompts returned {new.shape} indices and {slots.shape} slots; "
                     f"expected ({len(problems)},) each")
  problems = [p if int(i) == int(j) else ctx.train_problems[int(i)] for p, i, j in zip(problems, new, r.index)]
  r.metrics.update(scalar_metrics(m, stage.name))
  return problems, new, slots


def greedy_baseline(ctx, r) -> np.ndarray:
  """``[P g]``: each prompt's greedy rollout's reward, repeated over its group's ``g`` rows."""
  rows = ctx.sample_scored(r, r.problems, r.index, 1, stream(r.side, "greedy_sample"), stream(r.side, "greedy_score"),
                           greedy=True, record=False)
  return np.repeat(rows.rewards, ctx.group_size)


def pilot_rollouts(ctx, r, problems, index, key, pilot: int) -> StepData:
  """``pilot`` scored rollouts of each candidate prompt (``key``: the draw's), for a prompt filter's ``select``."""
  return ctx.sample_scored(r, problems, index, pilot, stream(key, "pilot_sample"), stream(key, "pilot_score"))


def join_pilots(ctx, data: StepData, blocks, n: int, pilot: int) -> StepData:
  """Each group: its prompt's ``pilot`` pilot rows (``blocks``: per group the pilot rollout and the prompt's place
  in it), then its ``n`` committed rows of ``data``; group ids ``lo .. hi - 1``."""
  parts, rows, offsets = [data], [], {}
  for p, block in enumerate(blocks):
    pilot_data, q = block if block and block[0] is not None else (None, None)
    if pilot_data is None:  # an unfilled group: any rows, masked out by its count 0
      rows.append(np.concatenate([np.full(pilot, p * n), np.arange(p * n, (p + 1) * n)]))
      continue
    if id(pilot_data) not in offsets:  # one pilot rollout per draw of candidates
      offsets[id(pilot_data)] = sum(d.batch_size for d in parts)
      parts.append(pilot_data)
    start = offsets[id(pilot_data)] + q * pilot
    rows.append(np.concatenate([np.arange(start, start + pilot), np.arange(p * n, (p + 1) * n)]))
  return concat_steps(parts).take(np.concatenate(rows)).replace(
      group_id=np.repeat(np.arange(ctx.lo, ctx.hi, dtype=np.int32), ctx.group_size))


def hint_rollouts(ctx, r, stage) -> StepData:
  """A replay stage's extra rollouts after the scored round (its ``hints`` and ``splice`` hooks, e.g.
  ``rljax.hints``): the stage names a prompt per group and how many rows it takes; ``group_size`` completions of
  each are sampled, the stage's ``splice`` picks the rows they replace and rebuilds them, and they are scored
  against the round's problems; ``data.replay_mask`` marks them. A hinted prompt longer than the sampler's largest
  prompt bucket is counted (``too_long_prompts``), not sampled. A multi-turn task's episodes are not resampled
  (refused at start-up)."""
  call, data, problems, index, step, side, g = r.call, r.data, r.problems, r.index, r.step, r.side, ctx.group_size
  if ctx.multi_turn:
    return data
  exp = ctx.exp
  answer_key = getattr(exp.task, "answer_key", None) or (lambda c: c.strip())
  prompts, take, m = stage.hints(data, g, answer_key)
  take = np.asarray(take, np.int64)
  if len(prompts) != len(problems) or take.shape != (len(problems),) or take.min(initial=0) < 0:
    raise ValueError(f"replay stage {stage.name!r}: hints returned {len(prompts)} prompts and take of shape "
                     f"{take.shape}; expected {len(problems)} each, take >= 0")
  limit = exp.sampler_config.prompt_buckets[-1]
  too_long = [t is not None and len(exp.codec.prompt_ids(t)) > limit for t in prompts]
  prompts = [None if x else t for t, x in zip(prompts, too_long)]  # counted, not sampled: no bucket fits
  take = np.where(too_long, 0, take)
  m = {**m, "too_long_prompts": float(sum(too_long))}
  call.metrics.update(scalar_metrics(m, stage.name))
  mask = np.zeros(data.batch_size, bool)
  if take.any():
    drawn = ctx.sample(call, [t if t is not None else p for t, p in zip(prompts, problems)], g, stream(side, "hints"))
    rows, drawn_rows, rebuilt = stage.splice(data, drawn, take, pad_id=exp.codec.pad_id)
    rows, drawn_rows = np.asarray(rows, np.int64), np.asarray(drawn_rows, np.int64)
    if rows.size:
      # routing under the drawn prompt does not apply to the rebuilt rows
      new = ctx.score(call, types.SimpleNamespace(**rebuilt, routing=None), problems, index, step=step,
                      key=data.key, greedy_rewards=data.greedy_rewards, record=False)
      take_rows = np.arange(data.batch_size)
      take_rows[rows] = data.batch_size + drawn_rows
      mask[rows] = True
      extras = {k: np.asarray(v) for k, v in data.extras.items()}
      both = concat_steps([data.replace(extras=extras), new.replace(extras=dict(extras))])
      data = both.take(take_rows).replace(group_id=data.group_id, valid=data.valid)
  return data.with_extras(replay_mask=mask)
