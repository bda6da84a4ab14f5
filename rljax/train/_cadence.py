"""The RL stage's loop over steps, written once for every runner: ``run_steps``, with its per-step cadence
(evaluate, log, checkpoint, stop) and console lines.

``run_steps(exp, loop, runner, flag, evals)`` asks the runner (``rljax/train/_runners.py``: synchronous,
``rl.rollout_ahead``, ``rl.async_staleness``; or the training side of the multi-process runner,
``rljax/train/_multiproc_async.py``) for each step's batch, trains it (``RLLoop.step``), and after step ``s``
(0-based; ``s + 1`` steps trained) runs :meth:`StepCadence.finish` on the step's metrics row:

* evaluation on the held-out problems every ``eval.every`` steps and after the last (``eval/...`` in the row);
* ``time/rl_s``: this process's RL stage wall time so far;
* the row written every ``log_every`` steps and at each evaluation (``stage="rl"``, ``step=s + 1``);

and :meth:`StepCadence.checkpoint_due` says whether to save now (every ``checkpoint.every`` steps, after the last,
on a stop the runner reports (``runner.stop_requested``: a signal), on reaching ``rl.target_accuracy``).
``NoSignalWatch`` and ``step_line`` are the console's.
"""
from __future__ import annotations

import time

import jax
import numpy as np

from rljax.train._experiment import log
from rljax.train._progress import progress_bar
from rljax.train._signals import preempted, stop_note

__all__ = ["run_steps", "StepCadence", "NoSignalWatch", "NO_SIGNAL_STEPS", "step_line", "seconds"]


def run_steps(exp, loop, runner, flag: dict, evals: list):
  """Steps ``loop.start .. rl.steps - 1`` of ``loop`` (an ``RLLoop``) on the batches of ``runner``; returns
  ``(graphdef, state)``. On a stop the runner reports (``runner.stop_requested(flag)``) the step's checkpoint is
  saved and ``Preempted`` raised; the runner is closed either way, the loop's checkpointer on a normal end."""
  cfg, rl = exp.cfg, exp.cfg.rl
  bar = progress_bar(total=rl.steps, initial=loop.start, desc="RL", disable=not cfg.progress or jax.process_index() != 0,
                     leave=True)
  cadence = StepCadence(exp, loop, evals)
  no_signal = NoSignalWatch()
  try:
    for s in range(loop.start, rl.steps):
      t0 = time.perf_counter()
      collected, data_state, runner_row = runner.next(s)
      t1 = time.perf_counter()
      row = loop.step(s, collected)
      runner.after_step(s, row)
      row["time/sample_s"] = t1 - t0  # the wait for the batch (a runner may say otherwise: its own row)
      row.update(runner_row)
      row["rollout/reward_mean"] = collected.stats["reward_mean"]
      cadence.finish(s, row)
      bar.set_postfix(reward=f"{collected.stats['reward_mean']:.2f}", acc=f"{cadence.last_eval:.2f}",
                      rollout=seconds(row["time/sample_s"]), update=seconds(row.get("time/update_s", 0.0)))
      bar.update(1)
      if bar.disable and (s + 1) % cfg.log_every == 0:  # no bar (a log file, a pipe): one line per logged step
        log(cfg, step_line(s + 1, rl.steps, row, collected.stats["reward_mean"]))
      said = no_signal.observe(collected.stats, collected.data.rewards[collected.data.valid])
      if said and bar.disable:
        log(cfg, said)
      elif said:
        bar.write(said)
      stop_early = cadence.reached_target(row)
      preempt = runner.stop_requested(flag)  # every process stops (and saves) at the same step
      if cadence.checkpoint_due(s, stop=preempt or stop_early):
        loop.save(s + 1, data_state, cadence.done(s) or stop_early)
      if preempt:
        bar.close()
        loop.ckpt.close()
        raise preempted(flag, stop_note("RL", s + 1, cfg.checkpoint.enabled))
      if stop_early:
        log(cfg, f"[rljax] reached target accuracy {rl.target_accuracy:.2f} at RL step {s + 1}")
        break
  finally:
    runner.close()
  bar.close()
  loop.ckpt.close()
  return loop.graphdef, loop.state


class StepCadence:
  """Evaluation, metrics rows and checkpoint decisions of the RL stage (module docstring).

  ``exp``: the run's ``Experiment``; ``loop``: the ``RLLoop`` (its ``graphdef``, ``state``, ``writer``);
  ``evals``: the run's evaluation list, appended to (``{"step", **figures}``)."""

  def __init__(self, exp, loop, evals: list):
    self.exp, self.cfg, self.loop, self.evals = exp, exp.cfg, loop, evals
    self.last_eval = evals[-1]["greedy_accuracy"] if evals else float("nan")
    self.t0 = time.perf_counter()

  def done(self, s: int) -> bool:
    return s + 1 == self.cfg.rl.steps

  def finish(self, s: int, row: dict) -> None:
    """Evaluates when due (``eval/...`` into ``row``), sets ``time/rl_s`` and writes ``row`` when due."""
    from rljax.train._sft import evaluate_state  # pylint: disable=import-outside-toplevel
    cfg, loop = self.cfg, self.loop
    if (cfg.eval.every and (s + 1) % cfg.eval.every == 0) or self.done(s):
      ev = evaluate_state(self.exp, loop.graphdef, loop.state, jax.random.PRNGKey(10_000 + s), full=False)
      self.last_eval = ev["greedy_accuracy"]
      self.evals.append({"step": s + 1, **ev})
      row["eval/greedy_accuracy"] = self.last_eval
      row.update({f"eval/{k}": v for k, v in ev.items() if k not in ("greedy_accuracy", "failed", "truncated")})
    row["time/rl_s"] = time.perf_counter() - self.t0  # wall time of this process's RL stage so far
    if self.logged(s, row):
      loop.writer.write("rl", s + 1, row)

  def logged(self, s: int, row: dict) -> bool:
    """Whether step ``s``'s row is written (every ``log_every`` steps, and at each evaluation)."""
    return (s + 1) % self.cfg.log_every == 0 or "eval/greedy_accuracy" in row

  def reached_target(self, row: dict) -> bool:
    """``rl.target_accuracy`` reached by this step's evaluation (the run stops early)."""
    target = self.cfg.rl.target_accuracy
    return target is not None and "eval/greedy_accuracy" in row and self.last_eval >= target

  def checkpoint_due(self, s: int, *, stop: bool = False) -> bool:
    """Save after step ``s``: every ``checkpoint.every`` steps, after the last, or when the run stops (``stop``:
    a signal, or the target accuracy reached)."""
    ck = self.cfg.checkpoint
    return ck.enabled and ((s + 1) % ck.every == 0 or self.done(s) or stop)


NO_SIGNAL_STEPS = 3  # consecutive RL steps in which every group's rewards were equal before the console says so


class NoSignalWatch:
  """Says once, on the console, that RL has no learning signal: ``steps`` consecutive steps in which every sampled
  group's rewards were all equal (``rollout/zero_var_groups == rollout/sampled_groups``), so every group-relative
  (GRPO-style) advantage is zero. ``observe`` returns the message the step it is first due, else None."""

  def __init__(self, steps: int = NO_SIGNAL_STEPS):
    self.steps, self.run, self.values, self.said = steps, 0, set(), False

  def observe(self, stats: dict, rewards) -> "str | None":
    """``stats``: the step's rollout statistics (``zero_var_groups``, ``sampled_groups``); ``rewards``: its valid
    rows' rewards (the values the message quotes)."""
    if self.said or self.steps <= 0:
      return None
    sampled = int(stats.get("sampled_groups", 0))
    if sampled == 0 or int(stats.get("zero_var_groups", 0)) < sampled:
      self.run, self.values = 0, set()
      return None
    self.run += 1
    self.values |= {float(v) for v in np.unique(np.asarray(rewards, np.float64))}
    if self.run < self.steps:
      return None
    self.said = True
    values = sorted(self.values)
    shown = ", ".join(str(round(v, 4)) for v in values[:6])
    seen = f"all {shown}" if len(values) == 1 else f"values {shown}"
    if len(values) == 1 and values[0] <= 0:
      cause = "the task may be too hard for the start policy (more SFT steps? an easier task?)"
    elif len(values) == 1:
      cause = "the task may be too easy for the start policy (a harder task? fewer SFT steps?)"
    else:
      cause = "each prompt is always solved or always failed (a harder or easier task mix? more samples per group?)"
    return (f"[rljax] no learning signal: every group's rewards were equal for {self.run} steps ({seen}); {cause}. "
            f"Group-relative (GRPO-style) advantages are zero, so the policy does not move")


def step_line(step: int, steps: int, row: dict, reward: float) -> str:
  """The console line of one RL step: rollout and update seconds (``time/sample_s``, ``time/update_s``: the
  sampler call with rewards and filters; the forwards, advantages and every optimizer step), the mean reward, and
  the held-out greedy accuracy when the step evaluated."""
  acc = f", held-out greedy {row['eval/greedy_accuracy']:.1%}" if "eval/greedy_accuracy" in row else ""
  return (f"[rljax] RL step {step}/{steps}: rollout {seconds(row['time/sample_s'])}, update "
          f"{seconds(row.get('time/update_s', 0.0))}, reward {reward:.3f}{acc}")


def seconds(t: float) -> str:
  """``2.7 s``, or milliseconds under a second (a small model's steps: ``38 ms``, not ``0.0 s``)."""
  return f"{t:.1f} s" if t >= 1.0 else f"{t * 1000:.0f} ms"
