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
from typing import NamedTuple, Optional
import jax
import numpy as np

from rljax import parallel as par
from rljax.stages import StepData
from rljax.train._episodes import episode_step_data
from rljax.train._mechanics import greedy_baseline, hint_rollouts, join_pilots, pilot_rollouts
from rljax.train._phases import phases, score_tail, select_all, walk
from rljax.train._producers import SCORING
from rljax.train._rows import concat_steps, run_filters, set_rewards, unchecked
from rljax.train._streams import stream

__all__ = ["Collector", "Collected", "concat_steps", "run_filters", "set_rewards", "reward_names"]


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
  """One sampling round as its phases fill it (``rljax.train._phases``): the prompts (``problems`` [P], dataset
  ``index`` [P], per group the valid ``counts`` and pilot ``blocks`` of a prompt filter, a replay stage's
  ``replay_slots``), the scored rows ``data`` and the refill filters' ``keep`` [B]; ``metrics``: the call's.
  After the rounds, the kept groups walk the other collect phases in one more (``data``, ``side``, ``metrics``)."""
  call: _Call
  step: int
  key: object
  side: object
  prompt_states: dict
  replay_states: Optional[dict] = None
  metrics: dict = dataclasses.field(default_factory=dict)
  problems: Optional[list] = None
  index: Optional[np.ndarray] = None
  counts: Optional[np.ndarray] = None
  blocks: Optional[list] = None
  replay_slots: Optional[np.ndarray] = None
  data: Optional[StepData] = None
  keep: Optional[np.ndarray] = None


class Collector:
  """Samples, scores, shapes and filters one RL batch (see the module docstring): the live context of the collect
  phases of ``rljax.train._phases.PIPELINE`` (what it provides: that module's docstring)."""

  call = staticmethod(unchecked)  # the live step's stage call

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
    self.stages = select_all(recipe)  # what each phase runs (its row's selector)
    self.pilot = max([pf.pilot for pf in recipe.prompt_filters], default=0)
    self.group_size, self.local_groups, self.max_refills = rl.group_size, self.hi - self.lo, rl.max_refills
    self.train_problems, self.multi_turn = exp.train_problems, exp.multi_turn
    self.round_phases, self.after_round_phases = phases("collect", per_round=True), phases("collect", per_round=False)
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

  def sample(self, call: _Call, problems, n: int, key, *, greedy: bool = False):
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
      data = data.with_extras(policy_version=np.asarray(token_version, np.int32))
    for need in self.scoring_needs:  # each one's registered producer (rljax.train._producers)
      data = data.replace(**SCORING[need](exp.task, call.answer_index, completions, expanded))
    return score_tail(self, data, key, self.stages["rollouts"], call.metrics).replace(key=key)

  def episodes(self, call: _Call, problems, index, *, step: int, key, side) -> StepData:
    """Multi-turn: ``group_size`` episodes of each problem as ``StepData`` (``rljax.train._episodes``)."""
    return episode_step_data(self, call, problems, index, step=step, key=key, side=side)

  # ------------------------------------------------------------------------- prompts

  def next_prompts(self):
    """The loader's next candidates: ``(problems, dataset indices)``."""
    batch = next(self.loader)
    return [p for p, _ in batch], np.asarray([i for _, i in batch], np.int64)

  def pilot_rows(self, r: _Round, problems, index, key) -> StepData:
    """A prompt filter's pilot rollouts of ``problems`` (``rljax.train._mechanics``)."""
    return pilot_rollouts(self, r, problems, index, key, self.pilot)

  def sample_scored(self, r: _Round, problems, index, n: int, sample_key, score_key, *, greedy: bool = False,
                    record: bool = True, greedy_rewards=None) -> StepData:
    """This process's rows of ``n`` samples of each of ``problems`` (sampler key ``sample_key``), scored (stage
    keys from ``score_key``)."""
    return self.score(r.call, self.sample(r.call, problems, n, sample_key, greedy=greedy), problems, index,
                      step=r.step, key=score_key, greedy_rewards=greedy_rewards, record=record)

  # ------------------------------------------------------------------------- one round

  def _round(self, call: _Call, step: int, key, side, prompt_states: dict, replay_states=None) -> _Round:
    """One sampling round: the per-round collect phases of ``PIPELINE`` (prompts -> rollouts, scored -> a
    replay stage's extra rollouts -> refill filters' verdicts), whole groups of ``group_size`` rows.

    ``key`` is the sampler's key of the round; ``side`` the root of every other random draw of the round."""
    r = _Round(call, step, key, side, prompt_states, replay_states, call.metrics)
    walk(self.round_phases, self, r)
    return r

  def roll_out(self, r: _Round, st) -> StepData:
    """The round's rollouts (episodes for a multi-turn task), scored, and padding groups (a prompt filter's count
    0) masked out; the technique mechanics its stages declare (``st``: the ``"rollouts"`` row's selection) run
    from ``rljax.train._mechanics``: a greedy baseline first, a prompt filter's pilot rows joining their
    groups."""
    call, problems, index, step, side, g = r.call, r.problems, r.index, r.step, r.side, self.group_size
    if self.multi_turn:
      return self.episodes(call, problems, index, step=step, key=r.key, side=side)
    greedy = greedy_baseline(self, r) if st["greedy"] else None
    n = g - self.pilot
    data = self.sample_scored(r, problems, index, n, r.key, stream(side, "score"),
                              greedy_rewards=None if greedy is None else np.repeat(greedy[::g], n))
    for pf in st["pilot"]:
      data = join_pilots(self, data, r.blocks, n, pf.pilot).replace(greedy_rewards=greedy)
    if r.counts is not None:
      data = data.replace(valid=(np.arange(g)[None, :] < r.counts[:, None]).reshape(-1))
    return data

  def resample(self, r: _Round, stage) -> StepData:
    """A replay stage's hinted rollouts in place of some of the round's rows (``rljax.train._mechanics``)."""
    return hint_rollouts(self, r, stage)

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
    rounds = self.rl.max_refills + 1 if self.stages["refill"]["filters"] else 1
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
    after = _Round(call, step, key, side, prompt_states, replay_states, call.metrics, data=data)
    walk(self.after_round_phases, self, after)
    data = after.data
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
