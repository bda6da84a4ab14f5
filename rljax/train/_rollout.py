"""Collecting one RL batch: the collect side of ``rljax/train/_phases.py``'s ``PIPELINE`` (each round: prompts
-> rollouts, scored -> a replay stage's extra rollouts -> refill filters; then the batch filters).

``Collector(...)(params, model_state, step, temperature, prompt_states)`` returns a :class:`Collected`: the
step's :class:`rljax.stages.StepData` (host arrays of this process's rows: whole groups), rollout statistics,
the stages' metrics and the new prompt-filter states. Everything here runs on the host between jitted calls, except the sampler.

Multi-host: the loader yields this process's prompts ``[lo, hi)`` of each global batch; the sampler runs on
the global prompt batch (prompt ids gathered from every process) and this process keeps, scores and returns
its own rows; statistics are summed over processes. Refills run the same number of sampling rounds on every
process. Host stages see this process's rows (whole groups): a stage's batch-level statistic (a whitening,
a ranking of groups) is then per process.
"""
from __future__ import annotations

import dataclasses
import types
from typing import NamedTuple, Optional
import jax
import numpy as np

from rljax import parallel as par
from rljax.stages import PromptData, StepData, produced_by, scalar_metrics
from rljax.train._episodes import episode_step_data
from rljax.train._phases import check_handlers, phases
from rljax.train._producers import SCORING
from rljax.train._streams import stream

__all__ = ["Collector", "Collected", "concat_steps", "run_filters", "set_rewards", "reward_names"]


def concat_steps(parts) -> StepData:
  """Row-wise concatenation of ``StepData`` of the same step (every per-row field: ``StepData.concat``)."""
  return StepData.concat(parts)


def run_filters(filters, data: StepData, metrics: dict) -> StepData:
  """Applies row filters in order: a bool ``keep [B]`` gives ``valid &= keep``; an integer ``[N]`` result is a
  row selection (a resampling of the batch, padded with masked rows to ``B``)."""
  for f in filters:
    keep, m = f.fn(data)
    metrics.update(scalar_metrics(m, f.name))
    keep = np.asarray(keep)
    if keep.dtype == bool:
      if keep.shape != (data.batch_size,):
        raise ValueError(f"filter {f.name!r} returned keep of shape {keep.shape}, expected ({data.batch_size},)")
      data = data.replace(valid=data.valid & keep.astype(bool))
    else:
      rows = keep.astype(np.int64).reshape(-1)
      if rows.size > data.batch_size or (rows.size and (rows.min() < 0 or rows.max() >= data.batch_size)):
        raise ValueError(f"filter {f.name!r} returned {rows.size} row indices; expected at most "
                         f"{data.batch_size} indices in [0, {data.batch_size})")
      pad = np.arange(data.batch_size - rows.size) % data.batch_size  # filler rows, masked out below
      new_valid = np.concatenate([data.valid[rows], np.zeros(pad.size, bool)])
      data = data.take(np.concatenate([rows, pad])).replace(valid=new_valid)
    metrics[f"{f.name}/kept_rows"] = float(data.valid.sum())
  return data


class Collected(NamedTuple):
  """What ``Collector`` returns: the step's data, rollout statistics (logged as ``rollout/...``), the stages'
  metrics (``<stage>/<key>``) and the prompt filters' new states."""
  data: StepData
  stats: dict
  stage_metrics: dict
  prompt_states: dict


class _Call:
  """Per-call context of a ``Collector`` call (the sampler of these parameters, the temperature, metrics)."""

  def __init__(self, sample, temperature: float):
    self.sample, self.temperature = sample, temperature
    self.metrics: dict = {}
    self.reward_errors = 0
    self.reward_sums: dict = {}  # per reward function: (sum, count) over the step's sampled rows
    self.answer_index: dict = {}  # answer key -> id, shared by the step's sampling rounds
    self.episodes = None  # multi-turn tasks: the episode runner of these parameters (Experiment.episode_fn)
    self.episode_sums: dict = {}  # multi-turn: per statistic (sum, episodes) over the step's episodes


@dataclasses.dataclass
class _Round:
  """One sampling round as its phases fill it: the prompts (``problems`` [P], dataset ``index`` [P], per group
  the valid ``counts`` and pilot ``blocks`` of a prompt filter, a replay stage's ``replay_slots``), the scored
  rows ``data`` and the refill filters' ``keep`` [B]."""
  call: _Call
  step: int
  key: object
  side: object
  prompt_states: dict
  replay_states: Optional[dict] = None
  problems: Optional[list] = None
  index: Optional[np.ndarray] = None
  counts: Optional[np.ndarray] = None
  blocks: Optional[list] = None
  replay_slots: Optional[np.ndarray] = None
  data: Optional[StepData] = None
  keep: Optional[np.ndarray] = None


class Collector:
  """Samples, scores, shapes and filters one RL batch (see the module docstring)."""

  def __init__(self, exp, recipe, loader, graphdef, *, prompt_rows, base_key, num_dataset_prompts: int, needs):
    rl = exp.cfg.rl
    self.exp, self.recipe, self.loader, self.rl, self.graphdef = exp, recipe, loader, rl, graphdef
    self.prompt_rows = prompt_rows
    self.lo, self.hi = prompt_rows[jax.process_index()]
    self.processes = tuple(sorted(prompt_rows))  # the processes holding rows: the host collectives' group
    self.base_key = base_key  # the sampler's keys: fold_in(fold_in(base_key, step), round), as ever
    self.side_key = jax.random.split(base_key)[1]  # every other random draw (stages, pilots), never the sampler's
    self.num_dataset_prompts = num_dataset_prompts
    self.needs = needs
    self.scoring_needs = tuple(n for n in SCORING if n in needs)  # SCORING: every need produced by "scoring"
    self.refill_filters = tuple(f for f in recipe.filters if f.refill)
    self.batch_filters = tuple(f for f in recipe.filters if f.phase == "rewards" and not f.refill)
    self.rollout_shaping = tuple(s for s in recipe.shaping if s.phase == "rollout")
    self.pilot = max([pf.pilot for pf in recipe.prompt_filters], default=0)
    self.replay_prompts = next((r for r in recipe.replay if r.prompts is not None), None)
    self.resample_stage = next((r for r in recipe.replay if r.hints is not None), None)
    self.round_phases, self.after_round_phases = phases("collect", per_round=True), phases("collect", per_round=False)
    own = {p.name: getattr(self, f"_phase_{p.name}", None) for p in phases("collect")}
    self._handlers = check_handlers("Collector", {k: h for k, h in own.items() if h is not None}, phases("collect"))
    from rljax.rewards import safe_reward  # pylint: disable=import-outside-toplevel
    task = exp.task
    lenient = exp.cfg.task.lenient_rewards
    verifier = f"{type(task).__name__}.score"
    self.reward_fns = [(name, safe_reward(fn, lenient=lenient, name=name))
                       for name, fn in zip(reward_names(recipe, verifier),
                                           [r.fn for r in recipe.rewards] or [task.score])]
    # the task's verdict (``data.correct``), guarded like a reward; the reward itself when it is the verifier
    self.verdict = None if not recipe.rewards else safe_reward(task.score, lenient=lenient, name=verifier)

  # ------------------------------------------------------------------------- sampling and scoring

  def _sample(self, call: _Call, problems, n: int, key, *, greedy: bool = False):
    """This process's rows of ``n`` samples of each of ``problems`` (the prompts of every process sampled)."""
    prompts = par.allgather_rows([self.exp.codec.prompt_ids(p) for p in problems], self.prompt_rows,
                                 self.rl.num_prompts, self.processes)
    return call.sample(prompts, n=n, greedy=greedy, temperature=1.0 if greedy else call.temperature, key=key,
                       rows=(self.lo * n, self.hi * n))

  def score(self, call: _Call, r, problems, index, *, step: int, key, greedy_rewards=None,
            record: bool = True) -> StepData:
    """A sampled batch (``r``: this process's rows; ``problems``: one per group) as ``StepData``: rewards (and
    their components), correctness, the multi-reward aggregation and the cheap host needs (answer ids, task
    ids, one turn per sample). ``record=False``: not counted in the step's reward statistics (the greedy
    baseline rollout)."""
    g = r.tokens.shape[0] // len(problems)
    exp = self.exp
    completions = exp.codec.decode_completions(r.tokens, r.completion_mask)
    expanded = tuple(p for p in problems for _ in range(g))
    components = []
    for name, fn in self.reward_fns:
      values, info = fn(completions, list(expanded))
      values = np.asarray(values, np.float32)
      if record:
        call.reward_errors += int(np.sum(info.get("errors", 0))) if isinstance(info, dict) else 0
        total, count = call.reward_sums.get(name, (0.0, 0))
        call.reward_sums[name] = (total + float(values.sum()), count + values.size)
      components.append(values)
    components = np.stack(components, 1)
    cm = np.asarray(r.completion_mask).astype(bool)
    data = StepData(
        tokens=np.asarray(r.tokens), prompt_mask=np.asarray(r.prompt_mask).astype(bool), completion_mask=cm,
        group_id=np.repeat(np.arange(self.lo, self.lo + len(problems), dtype=np.int32), g),
        num_groups=self.rl.num_prompts, valid=np.ones(cm.shape[0], bool), lengths=cm.sum(1).astype(np.int32),
        completions=tuple(completions), problems=expanded, prompt_index=np.repeat(np.asarray(index, np.int64), g),
        rewards=components.sum(1) if components.shape[1] > 1 else components[:, 0],
        correct=components[:, 0].copy() if self.verdict is None else
        np.asarray(self.verdict(completions, list(expanded))[0], np.float32),
        logp_behavior=np.asarray(r.logp_behavior, np.float32),
        entropy_behavior=None if r.entropy_behavior is None else np.asarray(r.entropy_behavior, np.float32),
        routing=None if r.routing is None else np.asarray(r.routing, np.int32),
        max_new_tokens=self.rl.max_new_tokens, step=step, key=key, greedy_rewards=greedy_rewards,
        reward_components=components if components.shape[1] > 1 else None,
        reward_names=tuple(n for n, _ in self.reward_fns), turns=tuple((c,) for c in completions))
    token_version = getattr(r, "token_version", None)  # [B, T] per-token policy versions (the async sampler's)
    if token_version is not None:
      data = data.replace(extras={"policy_version": np.asarray(token_version, np.int32)})
    for need in self.scoring_needs:  # each one's registered producer (rljax.train._producers)
      data = data.replace(**SCORING[need](exp.task, call.answer_index, completions, expanded))
    multi = self.recipe.multi_reward
    if multi is not None and multi.produces == "rewards":
      value, m = multi.fn(data.replace(key=stream(key, "multi_reward")))
      data = set_rewards(data, value, multi.name)
      call.metrics.update(scalar_metrics(m, multi.name))
    for i, s in enumerate(self.rollout_shaping):
      rewards, m = s.fn(data.replace(key=stream(key, "rollout_shaping", i)))
      data = set_rewards(data, rewards, s.name)
      call.metrics.update(scalar_metrics(m, s.name))
    return data.replace(key=key)

  def episodes(self, call: _Call, problems, index, *, step: int, key, side) -> StepData:
    """Multi-turn: ``group_size`` episodes of each problem as ``StepData`` (``rljax.train._episodes``)."""
    return episode_step_data(self, call, problems, index, step=step, key=key, side=side)

  # ------------------------------------------------------------------------- prompts

  def _next_prompts(self):
    batch = next(self.loader)
    return [p for p, _ in batch], np.asarray([i for _, i in batch], np.int64)

  def _select_prompts(self, call: _Call, step: int, key, prompt_states: dict):
    """Pre-rollout selection (single process): draws candidates until every group has an admitted prompt.

    Returns ``(problems, dataset indices, counts [P] valid rows per group, pilot blocks)``; a group left without an
    admitted prompt after ``rl.max_refills`` extra draws is padding (count 0), reported as
    ``prompt_filters/unfilled_groups``.
    """
    g, local = self.rl.group_size, self.hi - self.lo
    chosen, draws = [], 0
    while len(chosen) < local and draws <= self.rl.max_refills:
      problems, index = self._next_prompts()
      k = jax.random.fold_in(key, draws)
      problems, index = self._draw_prompts(call, step, k, prompt_states, problems, index)
      pilot = None
      if self.pilot:
        pilot = self.score(call, self._sample(call, problems, self.pilot, stream(k, "pilot_sample")), problems, index,
                           step=step, key=stream(k, "pilot_score"))
      counts = np.full(len(problems), g, np.int64)
      for j, pf in enumerate(self.recipe.prompt_filters):
        if pf.select is None:
          continue
        c, prompt_states[pf.name], m = pf.select(
            prompt_states[pf.name], PromptData(tuple(problems), index, self.num_dataset_prompts, step, pilot),
            stream(k, "prompt_select", j))
        c = np.asarray(c, np.int64).reshape(-1)
        limit = g - self.pilot
        if c.shape != (len(problems),) or c.min(initial=0) < 0 or c.max(initial=0) > limit:
          raise ValueError(f"prompt filter {pf.name!r} returned counts {c.tolist()}; expected {len(problems)} "
                           f"ints in [0, {limit}] (rollouts per prompt{' after the pilot' if self.pilot else ''})")
        counts = np.minimum(counts, c + self.pilot)
        call.metrics.update(scalar_metrics(m, pf.name))
      chosen += [(problems[p], int(index[p]), int(counts[p]), (pilot, p)) for p in range(len(problems))
                 if counts[p] > 0]
      draws += 1
    unfilled = max(0, local - len(chosen))
    filler = chosen[0][:2] if chosen else (problems[0], int(index[0]))
    chosen = chosen[:local] + [(*filler, 0, None)] * unfilled  # padding groups: count 0, masked out
    call.metrics["prompt_filters/draws"] = float(draws)
    call.metrics["prompt_filters/unfilled_groups"] = float(unfilled)
    return ([c[0] for c in chosen], np.asarray([c[1] for c in chosen], np.int64),
            np.asarray([c[2] for c in chosen], np.int64), [c[3] for c in chosen])

  def _draw_prompts(self, call: _Call, step: int, key, prompt_states: dict, problems, index):
    """A curriculum's ``draw`` (at most one prompt filter has one): the dataset prompts it picks replace the
    loader's candidates ``(problems, index)``."""
    for j, pf in enumerate(self.recipe.prompt_filters):
      if pf.draw is None:
        continue
      new, prompt_states[pf.name], m = pf.draw(
          prompt_states[pf.name], PromptData(tuple(problems), index, self.num_dataset_prompts, step),
          stream(key, "prompt_draw", j))
      new = np.asarray(new, np.int64).reshape(-1)
      if new.shape != (len(problems),) or new.min(initial=0) < 0 or new.max(initial=0) >= self.num_dataset_prompts:
        raise ValueError(f"prompt filter {pf.name!r} drew {new.tolist()}; expected {len(problems)} dataset indices "
                         f"in [0, {self.num_dataset_prompts})")
      problems, index = [self.exp.train_problems[int(i)] for i in new], new
      call.metrics.update(scalar_metrics(m, pf.name))
    return problems, index

  # ------------------------------------------------------------------------- one round

  def _replay_prompts(self, call: _Call, problems, index, side, replay_states):
    """A replay stage's pre-rollout swap of prompts: ``(problems, index, slots [P] or None)``."""
    stage = self.replay_prompts
    if stage is None or replay_states is None:
      return problems, index, None
    new, slots, m = stage.prompts(replay_states[stage.name], np.asarray(index, np.int64),
                                  stream(side, "replay_prompts"))
    new, slots = np.asarray(new, np.int64), np.asarray(slots, np.int64)
    if new.shape != (len(problems),) or slots.shape != (len(problems),):
      raise ValueError(f"replay stage {stage.name!r}: prompts returned {new.shape} indices and {slots.shape} slots; "
                       f"expected ({len(problems)},) each")
    problems = [p if int(i) == int(j) else self.exp.train_problems[int(i)] for p, i, j in zip(problems, new, index)]
    call.metrics.update(scalar_metrics(m, stage.name))
    return problems, new, slots

  def _round(self, call: _Call, step: int, key, side, prompt_states: dict, replay_states=None) -> _Round:
    """One sampling round: the per-round collect phases of ``PIPELINE`` (prompts -> rollouts, scored -> a
    replay stage's extra rollouts -> refill filters' verdicts), whole groups of ``group_size`` rows.

    ``key`` is the sampler's key of the round; ``side`` the root of every other random draw of the round."""
    r = _Round(call, step, key, side, prompt_states, replay_states)
    for phase in self.round_phases:
      self._handlers[phase.name](r)
    return r

  def _phase_prompts(self, r: _Round) -> None:
    """The round's prompts: the prompt filters' draw, pilot rollouts and select; a replay stage's prompt swap."""
    if self.recipe.prompt_filters:
      r.problems, r.index, r.counts, r.blocks = self._select_prompts(r.call, r.step, stream(r.side, "select"),
                                                                     r.prompt_states)
    else:
      r.problems, r.index = self._next_prompts()
    r.problems, r.index, r.replay_slots = self._replay_prompts(r.call, r.problems, r.index, r.side, r.replay_states)

  def _phase_rollouts(self, r: _Round) -> None:
    """The policy's rollouts (episodes for a multi-turn task), scored; greedy rollouts first when a stage needs
    ``greedy_rewards``; a prompt filter's pilot rows join their groups."""
    call, problems, index, step, side, g = r.call, r.problems, r.index, r.step, r.side, self.rl.group_size
    if self.exp.multi_turn:
      r.data = self.episodes(call, problems, index, step=step, key=r.key, side=side)
    else:
      greedy = None
      if self.needs & produced_by("greedy rollout"):
        gr = self._sample(call, problems, 1, stream(side, "greedy_sample"), greedy=True)
        greedy = np.repeat(self.score(call, gr, problems, index, step=step, key=stream(side, "greedy_score"),
                                      record=False).rewards, g)
      n = g - self.pilot
      r.data = self.score(call, self._sample(call, problems, n, r.key), problems, index, step=step,
                          key=stream(side, "score"),
                          greedy_rewards=None if greedy is None else np.repeat(greedy[::g], n))
      if self.pilot:
        r.data = self._with_pilots(r.data, r.blocks, n).replace(greedy_rewards=greedy)
      if r.counts is not None:
        r.data = r.data.replace(valid=(np.arange(g)[None, :] < r.counts[:, None]).reshape(-1))
    if r.replay_slots is not None:  # each group's stored row to replay (-1: none), read by the replay stage
      r.data = r.data.replace(extras={**r.data.extras, "replay_slot": np.repeat(r.replay_slots, g)})

  def _with_pilots(self, data: StepData, blocks, n: int) -> StepData:
    """Each group: its prompt's pilot rows (``blocks``: per group the pilot rollout and the prompt's place in
    it), then its ``n`` committed rows of ``data``."""
    parts, rows, offsets = [data], [], {}
    for p, block in enumerate(blocks):
      pilot_data, q = block if block and block[0] is not None else (None, None)
      if pilot_data is None:  # an unfilled group: any rows, masked out by its count 0
        rows.append(np.concatenate([np.full(self.pilot, p * n), np.arange(p * n, (p + 1) * n)]))
        continue
      if id(pilot_data) not in offsets:  # one pilot rollout per draw of candidates
        offsets[id(pilot_data)] = sum(d.batch_size for d in parts)
        parts.append(pilot_data)
      start = offsets[id(pilot_data)] + q * self.pilot
      rows.append(np.concatenate([np.arange(start, start + self.pilot), np.arange(p * n, (p + 1) * n)]))
    return concat_steps(parts).take(np.concatenate(rows)).replace(
        group_id=np.repeat(np.arange(self.lo, self.hi, dtype=np.int32), self.rl.group_size))

  def _phase_resample(self, r: _Round) -> None:
    if self.resample_stage is not None and not self.exp.multi_turn:
      r.data = self._resample(r.call, r.data, r.problems, r.index, r.step, r.side)

  def _phase_refill(self, r: _Round) -> None:
    """The refill filters' verdict on the round's rows (``r.keep``): a group none of whose rows is kept is
    dropped, and another round is drawn while groups are missing (``rl.max_refills``)."""
    keep = r.data.valid.copy()
    for f in self.refill_filters:
      kf, m = f.fn(r.data.replace(key=stream(r.side, "refill_filters")))
      r.call.metrics.update(scalar_metrics(m, f.name))
      keep &= np.asarray(kf, bool)
    r.keep = keep

  def _phase_filters(self, call: _Call, data: StepData, side) -> StepData:
    """The rewards-phase batch filters on the kept groups."""
    return run_filters(self.batch_filters, data.replace(key=stream(side, "batch_filters")), call.metrics)

  def _resample(self, call: _Call, data: StepData, problems, index, step: int, side) -> StepData:
    """A replay stage's extra rollouts after the scored round (its ``hints`` and ``splice`` hooks, e.g.
    ``rljax.hints``): the stage names a prompt per group and how many rows it takes; the collector samples
    ``group_size`` completions of each, the stage's ``splice`` picks the rows they replace and rebuilds them, and
    the collector scores them against the round's problems; ``extras["replay_mask"]`` marks them."""
    stage, g = self.resample_stage, self.rl.group_size
    answer_key = getattr(self.exp.task, "answer_key", None) or (lambda c: c.strip())
    prompts, take, m = stage.hints(data, g, answer_key)
    take = np.asarray(take, np.int64)
    if len(prompts) != len(problems) or take.shape != (len(problems),) or take.min(initial=0) < 0:
      raise ValueError(f"replay stage {stage.name!r}: hints returned {len(prompts)} prompts and take of shape "
                       f"{take.shape}; expected {len(problems)} each, take >= 0")
    limit = self.exp.sampler_config.prompt_buckets[-1]
    too_long = [t is not None and len(self.exp.codec.prompt_ids(t)) > limit for t in prompts]
    prompts = [None if x else t for t, x in zip(prompts, too_long)]  # counted, not sampled: no bucket fits
    take = np.where(too_long, 0, take)
    m = {**m, "too_long_prompts": float(sum(too_long))}
    call.metrics.update(scalar_metrics(m, stage.name))
    mask = np.zeros(data.batch_size, bool)
    if take.any():
      drawn = self._sample(call, [t if t is not None else p for t, p in zip(prompts, problems)], g,
                           stream(side, "hints"))
      rows, drawn_rows, rebuilt = stage.splice(data, drawn, take, pad_id=self.exp.codec.pad_id)
      rows, drawn_rows = np.asarray(rows, np.int64), np.asarray(drawn_rows, np.int64)
      if rows.size:
        # routing under the drawn prompt does not apply to the rebuilt rows
        new = self.score(call, types.SimpleNamespace(**rebuilt, routing=None), problems, index, step=step,
                         key=data.key, greedy_rewards=data.greedy_rewards, record=False)
        take_rows = np.arange(data.batch_size)
        take_rows[rows] = data.batch_size + drawn_rows
        mask[rows] = True
        extras = {k: np.asarray(v) for k, v in data.extras.items()}
        both = concat_steps([data.replace(extras=extras), new.replace(extras=dict(extras))])
        data = both.take(take_rows).replace(group_id=data.group_id, valid=data.valid)
    return data.replace(extras={**data.extras, "replay_mask": mask})

  # ------------------------------------------------------------------------- one step

  def __call__(self, params, model_state, step: int, temperature: float, prompt_states: dict, replay_states=None,
               sample_fn=None):
    """Samples the step's batch (a :class:`Collected`); ``replay_states``: the replay stage's buffer, for its
    pre-rollout prompt swap (ExGRPO's experience prompts). ``sample_fn``: the sampler to use instead of
    ``exp.sample_fn`` of ``params`` (the asynchronous runner's interruptible one, ``rljax.train._async``)."""
    if sample_fn is None:
      sample_fn = self.exp.sample_fn(self.graphdef, params, model_state, dtype=self.rl.sampler_dtype)
    call = _Call(sample_fn, temperature)
    if self.exp.multi_turn:
      call.episodes = self.exp.episode_fn(self.graphdef, params, model_state, dtype=self.rl.sampler_dtype)
    g, local = self.rl.group_size, self.hi - self.lo
    key = jax.random.fold_in(self.base_key, step)
    side = jax.random.fold_in(self.side_key, step)
    prompt_states = dict(prompt_states)
    kept, dropped, seen = [], [], []
    refills = zero_var = sampled = 0
    rounds = self.rl.max_refills + 1 if self.refill_filters else 1
    for attempt in range(rounds):
      k, side_k = jax.random.fold_in(key, attempt), jax.random.fold_in(side, attempt)
      r = self._round(call, step, k, side_k, prompt_states, replay_states)
      data, keep = r.data, r.keep
      refills += int(attempt > 0)
      seen.append(data)
      for p in range(local):
        rows = np.arange(p * g, (p + 1) * g)
        r = data.rewards[rows][data.valid[rows]]
        sampled += 1
        zero_var += int(r.size > 0 and np.all(r == r[0]))
        (kept if keep[rows].any() else dropped).append((len(seen) - 1, rows, keep[rows]))
      if not par.process_any(len(kept) < local, self.processes):
        break
    groups = kept[:local]
    num_real = len(groups)
    groups += [(s, rows, np.zeros(g, bool)) for s, rows, _ in dropped[:local - num_real]]  # padding, masked out
    offsets = np.cumsum([0] + [d.batch_size for d in seen])
    everything = concat_steps(seen)
    data = everything.take(np.concatenate([offsets[s] + r for s, r, _ in groups]))
    data = data.replace(valid=np.concatenate([k for _, _, k in groups]),
                        group_id=np.repeat(np.arange(self.lo, self.hi, dtype=np.int32), g))
    if data.answer_ids is not None:  # dense ids over this batch (the step's rounds numbered them together)
      data = data.replace(answer_ids=np.unique(data.answer_ids, return_inverse=True)[1].astype(np.int32))
    for phase in self.after_round_phases:
      data = self._handlers[phase.name](call, data, side)
    data = data.replace(key=stream(side, "advantages"))  # the root of the advantage phase's keys
    counts = {"refills": refills, "zero_var_groups": zero_var, "sampled_groups": sampled, "kept_groups": num_real,
              "reward_errors": call.reward_errors}
    sums = par.process_sum({f"{k}{name}": v for name, (t, c) in call.reward_sums.items()
                            for k, v in (("sum:", t), ("count:", c))}, self.processes)
    for name in call.reward_sums:  # each reward function's mean over the step's sampled rows (every process)
      call.metrics[f"{name}/mean"] = sums[f"sum:{name}"] / max(sums[f"count:{name}"], 1)
    stats = self._stats(data, everything, counts)
    for k, (total, count) in call.episode_sums.items():  # multi-turn: rollout/turns, .../void_turn_episodes, ...
      stats[k if k in ("turns", "tool_calls_per_episode", "windows_per_episode") else f"{k}_episodes"] = \
          total / max(count, 1)
    return Collected(data, stats, call.metrics, prompt_states)

  def _stats(self, data: StepData, everything: StepData, counts: dict) -> dict:
    """Global rollout statistics: rewards and accuracy over every sampled row, lengths and entropy over the
    batch's valid rows."""
    cm = data.completion_mask & data.valid[:, None]
    ent = data.entropy_behavior
    seen = everything.valid
    sums = par.process_sum({
        "reward": float(everything.rewards.astype(np.float64)[seen].sum()), "n": int(seen.sum()),
        "correct": float(everything.correct.astype(np.float64)[seen].sum()),
        "tokens": float(cm.sum()), "rows": int(data.valid.sum()),
        "entropy": 0.0 if ent is None else float((ent * cm).sum()), **counts}, self.processes)
    out = {k: (int(sums[k]) if k != "kept_groups" else float(sums[k])) for k in counts}
    out["refills"] = counts["refills"]
    out.update({"reward_mean": sums["reward"] / max(sums["n"], 1), "accuracy": sums["correct"] / max(sums["n"], 1),
                "completion_len": sums["tokens"] / max(sums["rows"], 1), "valid_rows": float(sums["rows"])})
    if ent is not None:
      out["entropy"] = sums["entropy"] / max(sums["tokens"], 1)
    return out


def reward_names(recipe, verifier: str = "task") -> tuple:
  """The recipe's reward names, made unique (``name``, ``name_1``, ...): metrics and ``data.reward_names``."""
  names = [r.name for r in recipe.rewards] or [verifier]
  seen: dict = {}
  out = []
  for n in names:
    seen[n] = seen.get(n, 0) + 1
    out.append(n if seen[n] == 1 else f"{n}_{seen[n] - 1}")
  return tuple(out)


def set_rewards(data: StepData, rewards, name: str) -> StepData:
  """``data`` with a stage's new rewards: ``[B]`` sequence rewards, or ``[B, T]`` token rewards (summed)."""
  rewards = np.asarray(rewards, np.float32)
  if rewards.shape == (data.batch_size,):
    return data.replace(rewards=rewards)
  if rewards.shape == data.tokens.shape:
    return data.replace(token_rewards=rewards, rewards=rewards.sum(1))
  raise ValueError(f"stage {name!r} returned rewards of shape {rewards.shape}; expected ({data.batch_size},) or "
                   f"{data.tokens.shape}")
