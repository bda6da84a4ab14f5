"""The SFT warm-start stage and held-out evaluation of a train state."""
from __future__ import annotations

import os

import jax
import numpy as np

from rljax import parallel as par
from rljax.train._checkpoint import Checkpointer
from rljax.train._codec import sft_batch
from rljax.train._eval import evaluate
from rljax.train._experiment import Experiment, ShardedStep, host_scalars, log
from rljax.train._optim import make_optimizer
from rljax.train._progress import progress_bar
from rljax.train._rundir import in_cli
from rljax.train._signals import preempted, stop_note
from rljax.train._step import init_train_state, nll_loss

__all__ = ["run_sft", "evaluate_state", "check_init_from", "sft_checkpoint_dir"]


def sft_checkpoint_dir(run_dir: str) -> str:
  return os.path.join(run_dir, "checkpoints", "sft")


def check_init_from(cfg):
  """Validates ``cfg.sft.init_from`` (writes nothing); returns the source run's config, or None when unset.

  The source must be a run directory with a finished SFT checkpoint, trained with this run's model and task
  (its parameters must fit this model, and a warm start on another task would be another experiment).
  """
  src = cfg.sft.init_from
  if src is None:
    return None
  from rljax.train._config import config_to_dict  # pylint: disable=import-outside-toplevel
  from rljax.train._rundir import saved_config  # pylint: disable=import-outside-toplevel
  if os.path.abspath(src) == os.path.abspath(cfg.out_dir):
    raise ValueError(f"sft.init_from={src!r} is this run's own directory; name another run's directory")
  try:
    source = saved_config(src)
  except ValueError as e:
    raise ValueError(f"sft.init_from={src!r}: {e}") from None
  for section in ("model", "task"):
    mine, theirs = config_to_dict(getattr(cfg, section)), config_to_dict(getattr(source, section))
    diff = [f"{k} {theirs.get(k)} → {mine.get(k)}" for k in mine if mine.get(k) != theirs.get(k)]
    if diff:
      raise ValueError(f"sft.init_from={src!r} was trained with another {section} config ({', '.join(diff)}); "
                       f"a run that starts from it keeps its {section}")
  ckpt = Checkpointer(sft_checkpoint_dir(src))
  try:
    if not ckpt.exists():
      raise ValueError(f"sft.init_from={src!r} has no SFT checkpoint (under {ckpt.directory})")
    if not ckpt.read_meta().get("done"):
      raise ValueError(f"sft.init_from={src!r}: its SFT did not finish (latest checkpoint: step "
                       f"{ckpt.latest_step()} of {source.sft.steps}); finish it with "
                       + (f"rljax train --resume --out-dir {src}" if in_cli()
                          else f"train(cfg, resume=True) where cfg is that run's config (out_dir={src!r})"))
  finally:
    ckpt.close()
  return source


def _load_sft(exp: Experiment, mesh):
  """The finished SFT state of the run ``exp.cfg.sft.init_from`` (``(graphdef, state, meta)``)."""
  cfg = exp.cfg
  source = check_init_from(cfg)
  opt, sched = make_optimizer(source.sft.optim, max(source.sft.steps, 1))  # the template of the source's state
  graphdef, state = init_train_state(exp.model, opt)
  state = ShardedStep(graphdef, state, nll_loss(), opt, mesh, schedule=sched).state
  ckpt = Checkpointer(sft_checkpoint_dir(cfg.sft.init_from))
  tree, meta, step = ckpt.restore({"state": state})
  ckpt.close()
  log(cfg, f"[rljax] SFT: starting from {cfg.sft.init_from} (its SFT checkpoint, step {step})")
  return graphdef, tree["state"], {**meta, "init_from": cfg.sft.init_from}


def evaluate_state(exp: Experiment, graphdef, state, key, *, full: bool = True) -> dict:
  """Held-out greedy accuracy of ``state`` (``full``: also the sampled success rate and pass@k). A multi-turn
  task: the success rate of greedy episodes (``greedy_accuracy``, ``task.success``) and their ``turns``,
  ``tool_calls_per_episode``, ``failed`` and ``truncated`` means."""
  e = exp.cfg.eval
  if exp.multi_turn:
    return evaluate_episodes(exp, exp.episode_fn(graphdef, state.params, state.model_state),
                             exp.test_problems[:e.num_problems], batch_size=e.batch_size, key=key)
  fn = exp.sample_fn(graphdef, state.params, state.model_state)
  return evaluate(fn, exp.task, exp.codec, exp.test_problems[:e.num_problems], batch_size=e.batch_size, key=key,
                  num_samples=e.num_samples if full else 0, pass_k=e.pass_k if full else (),
                  temperature=e.temperature)


def evaluate_episodes(exp: Experiment, episode_fn, problems, *, batch_size: int, key) -> dict:
  """Greedy episodes on ``problems`` in chunks of ``batch_size`` (the last padded: one compilation):
  ``greedy_accuracy`` = mean ``task.success``, the episodes' ``turns``, ``tool_calls_per_episode``,
  ``failed``, ``truncated``, and the task's own metrics of them (``task.eval_metrics(problems, episodes)``,
  when the task has it)."""
  batch_size = min(batch_size, len(problems))
  success, sums, episodes = [], {}, []
  for lo in range(0, len(problems), batch_size):
    chunk = list(problems[lo:lo + batch_size])
    real = len(chunk)
    out = episode_fn(chunk + [chunk[0]] * (batch_size - real), n=1, greedy=True, temperature=1.0,
                     key=jax.random.fold_in(key, lo))
    success += [exp.task.success(ep) for ep in out.episodes[:real]]
    episodes += list(out.episodes[:real])
    for k, v in (("turns", out.turns), ("tool_calls_per_episode", out.tool_calls), ("failed", out.failed),
                 ("truncated", out.truncated)):
      sums[k] = sums.get(k, 0.0) + float(np.sum(np.asarray(v, np.float64)[:real]))
  n = max(len(success), 1)
  extra = getattr(exp.task, "eval_metrics", None)
  extra = extra(list(problems), episodes) if extra is not None else {}
  return {"greedy_accuracy": float(np.mean(success)) if success else 0.0, **{k: v / n for k, v in sums.items()},
          **extra}


def run_sft(exp: Experiment, writer, resume: bool, flag, mesh):
  """SFT on task demonstrations (NLL); returns ``(graphdef, state, meta)``. Checkpoints under ``checkpoints/sft``.

  With ``cfg.sft.init_from``, loads that run's finished SFT checkpoint instead (no SFT rows, no checkpoint here)."""
  cfg = exp.cfg
  if cfg.sft.init_from is not None:
    return _load_sft(exp, mesh)
  opt, sched = make_optimizer(cfg.sft.optim, max(cfg.sft.steps, 1))
  graphdef, state = init_train_state(exp.model, opt)
  sharded = ShardedStep(graphdef, state, nll_loss(), opt, mesh, schedule=sched)
  state, step_fn = sharded.state, sharded.step
  b = cfg.sft.batch_size
  rows_sh = par.row_sharding(mesh, b)
  lo, hi = par.process_rows(rows_sh, b)
  ckpt = Checkpointer(os.path.join(cfg.out_dir, "checkpoints", "sft"), max_to_keep=cfg.checkpoint.max_to_keep)
  start, meta = 0, {}
  if resume and ckpt.exists():
    tree, meta, start = ckpt.restore({"state": state})
    state = tree["state"]
    writer.truncate("sft", start)
    log(cfg, f"[rljax] resumed SFT from step {start}")
  elif resume:
    writer.truncate("sft", 0)  # rows of an SFT that saved no checkpoint are written again
  if start >= cfg.sft.steps and meta.get("done"):
    ckpt.close()
    return graphdef, state, meta
  if par.process_any(flag["set"]):  # a signal before the first step of this start: no step to finish
    ckpt.close()
    raise preempted(flag, f"stopped before SFT step {start + 1}: nothing {'new ' if start else ''}saved")
  bar = progress_bar(total=cfg.sft.steps, initial=start, desc="SFT", disable=not cfg.progress or jax.process_index() != 0,
                     leave=True)
  for s in range(start, cfg.sft.steps):
    # the (cheap, deterministic) host batch; this process places only its rows [lo, hi)
    batch = sft_batch(exp.task, exp.codec, exp.train_problems, step=s, seed=cfg.seed,
                      batch_size=b, seq_len=exp.seq_len)
    batch = par.global_batch(jax.tree_util.tree_map(lambda x: x[lo:hi], batch), rows_sh, b)
    state, metrics = step_fn(state, batch)
    if (s + 1) % cfg.log_every == 0 or s + 1 == cfg.sft.steps:
      row = writer.write("sft", s + 1, host_scalars(metrics))
      bar.set_postfix(loss=f"{row['loss']:.3f}")
    bar.update(1)
    last = s + 1 == cfg.sft.steps
    preempt = par.process_any(flag["set"])  # every process stops (and saves) at the same step
    if cfg.checkpoint.enabled and ((s + 1) % cfg.checkpoint.every == 0 or preempt or last):
      ckpt.save(s + 1, {"state": state}, {"stage": "sft", "step": s + 1, "done": last})
    if preempt:
      bar.close()
      ckpt.close()
      raise preempted(flag, stop_note("SFT", s + 1, cfg.checkpoint.enabled))
  bar.close()
  meta = {"stage": "sft", "step": cfg.sft.steps, "done": True}
  if cfg.checkpoint.enabled and cfg.sft.steps > 0:
    ckpt.save(cfg.sft.steps, {"state": state}, meta)
  ckpt.close()
  return graphdef, state, meta
