"""The main job: SFT warm-start, then RL with a recipe, with evaluation, checkpoints and metrics.

``train(cfg, recipe=...)`` runs a whole experiment described by a ``RunConfig``:

1. task, tokenizer (SentencePiece, char level for the built-in tasks), model (``_experiment.py``);
2. SFT on task demonstrations with the NLL objective (``_sft.py``);
3. held-out evaluation of the SFT checkpoint (greedy accuracy, temperature-1 success rate, pass@k);
4. RL with the recipe's stages (``_rl.py``; the recipe is ``cfg.rl.recipe()``, with the fields of a recipe passed
   in over it);
5. evaluation after RL; ``metrics.jsonl``, TensorBoard events, ``metrics.png``, ``summary.json`` and orbax
   checkpoints under ``out_dir``.

Resume (``resume=True``) restores the latest readable checkpoint of the latest stage (parameters, optimizer
state, hparams, controller and stage states, data iterator state, step); PRNG keys are
``fold_in(seed_key, step)``, so a resumed run reproduces an uninterrupted one bit for bit. SIGTERM or Ctrl-C
saves a checkpoint after the current step and raises ``Preempted`` (``_signals.py``).
"""
from __future__ import annotations

import json
import os
import time
import warnings
from typing import Callable, Optional

import jax
from flax import nnx

from rljax.train._checkpoint import Checkpointer, CheckpointError, remove_partial_saves
from rljax.train._checkpoint_arch import with_checkpoint_architecture
from rljax.train._config import RunConfig, config_to_dict
from rljax.train._experiment import Experiment, NoWriter, build_experiment, log, run_mesh
from rljax.train._field_names import user_named_error
from rljax.train._metrics import MetricsWriter, check_trackers, plot_metrics, wandb_settings
from rljax.train._multiproc_async import check_multiprocess
from rljax.train._optim import make_optimizer
from rljax.train._recipes import marked_fields
from rljax.train._rl import check_group_batch
from rljax.train._runners import run_rl
from rljax.train._rundir import WALL_FILE, check_run_dir, clear_run, describe_changes, how, in_cli
from rljax.train._startup import check_recipe
from rljax.train._sft import check_init_from, evaluate_state, run_sft, sft_checkpoint_dir
from rljax.train._signals import Preempted, preempted, stop_flag
from rljax.train._step import init_train_state
from rljax import parallel as par

__all__ = ["train", "Preempted", "Experiment", "build_experiment", "load_run", "check_group_batch", "run_recipe"]


def run_recipe(cfg: RunConfig, recipe=None, *, objective_fn: Optional[Callable] = None,
               reward_fn: Optional[Callable] = None, objective_needs=None):
  """The recipe a run trains with: the config's, with the fields ``recipe`` was given over it (``Recipe.over``,
  as a config file's ``get_recipe()``: ``Recipe(rewards=(fn,))`` keeps the config's advantage and loss), then the
  ``train`` overrides applied.

  A recipe given every slot needs nothing of the config's (its fields may then record the Python stages of a
  run's recipe, which build no recipe). ``objective_fn`` (``hparams -> Objective``) replaces the loss: its
  hparams start at the loss's values, and the inputs it reads are ``objective_needs`` (default: the replaced
  loss's needs and ``logp_old``, so that a KL term in the replaced loss keeps its reference log-probs);
  ``reward_fn`` (``(completions, problems) -> [B]``) replaces the rewards.
  """
  from rljax.recipes import SLOTS, Recipe  # pylint: disable=import-outside-toplevel
  if recipe is not None and not isinstance(recipe, Recipe):
    raise ValueError(f"recipe must be a rljax.recipes.Recipe, got {type(recipe).__name__}")
  if recipe is None:
    recipe = cfg.rl.recipe()
  elif not set(SLOTS) <= recipe.replaces:  # a partial recipe: the config's recipe fills the rest
    recipe = recipe.over(cfg.rl.recipe())
  if objective_fn is not None:
    if objective_needs is None:
      loss_needs = frozenset().union(*(s.needs for s in recipe.stages() if s in recipe.loss or s.name == "objective"))
      objective_needs = tuple(sorted(loss_needs | {"logp_old"}))
    recipe = recipe.replace(objective=objective_fn, hparams={**recipe.loss_hparams(), **recipe.hparams},
                            objective_needs=tuple(objective_needs))
  if reward_fn is not None:
    recipe = recipe.replace(rewards=(reward_fn,), multi_reward=None)
  return recipe


def _check_start(cfg: RunConfig, recipe, described: dict, *, resume: bool, overwrite: bool):
  """Every check of a start, writing nothing: the run directory and resume compatibility, the recipe of a resumed
  RL stage, the mesh, the task and model (built), and the recipe against them. Returns ``(config changes,
  experiment, mesh)``."""
  changes = check_run_dir(cfg, resume=resume, overwrite=overwrite)
  recipe_path = os.path.join(cfg.out_dir, "recipe.json")
  rl_trained = Checkpointer(os.path.join(cfg.out_dir, "checkpoints", "rl")).exists()
  if resume and rl_trained and os.path.exists(recipe_path):  # the RL stage of this run has begun
    with open(recipe_path, encoding="utf-8") as f:
      before = json.load(f)
    same = lambda d: {k: v for k, v in d.items() if k != "name"}
    if same(before) != same(described):
      if before.get("python"):
        hint = ("its recipe has Python stages: pass the config file defining its get_recipe() with --config"
                if in_cli() else "its recipe has Python stages: pass that recipe again "
                "(train(cfg, recipe=..., resume=True))")
      else:
        hint = f"resume with the same recipe (or train into a new {how('out_dir')})"
      raise ValueError(f"{how('resume')}: {cfg.out_dir!r} was trained with the recipe {same(before)}, not "
                       f"{same(described)}; " + hint)
  check_init_from(cfg)  # a shared SFT warm start exists, finished, for this model and task
  mesh = run_mesh(cfg)  # the mesh fits the devices
  exp = build_experiment(cfg)
  par.check_mesh_divides(mesh.shape, exp.model.cfg)  # ... and its axes divide the model's dimensions
  r = cfg.rl.async_rollout_devices
  if cfg.rl.steps > 0 and cfg.rl.async_staleness is not None and r:
    rollout_mesh, train_mesh = par.split_mesh(mesh, r, "RLConfig.async_rollout_devices")
    try:  # both sub-meshes split the model, and the training sub-mesh the rollout batch
      for sub in (rollout_mesh, train_mesh):
        par.check_mesh_divides(sub.shape, exp.model.cfg)
      par.row_sharding(train_mesh, cfg.rl.batch_size)
    except ValueError as e:
      raise ValueError(f"RLConfig.async_rollout_devices={r} gives the rollout sub-mesh {dict(rollout_mesh.shape)} "
                       f"and the training sub-mesh {dict(train_mesh.shape)}: {e}") from None
  if cfg.rl.steps > 0 and cfg.rl.async_staleness is not None and jax.process_count() > 1:
    check_multiprocess(cfg, mesh, exp, recipe)  # rollout processes and training processes (_multiproc_async)
  if cfg.rl.steps > 0:
    check_recipe(exp, recipe)  # before SFT: a recipe this run cannot train fails now, not after the warm start
  return changes, exp, mesh


def train(cfg: RunConfig, *, resume: bool = False, overwrite: bool = False, recipe=None,
          objective_fn: Optional[Callable] = None, reward_fn: Optional[Callable] = None,
          objective_needs=None) -> dict:
  """Runs SFT then RL as configured; returns the summary dict (also written to ``summary.json``): ``sft`` (the
  evaluation RL starts from), ``rl`` and ``gain_points`` (after RL; absent when ``rl.steps=0``), ``evals``, ...

  A run directory holds one run. Everything (the config, the recipe, the task, the run directory, the resume
  compatibility) is checked before anything is written, so a start that fails leaves the directory as it was.

  Args:
    cfg: the run config.
    resume: continue the run in ``cfg.out_dir`` from its latest readable checkpoints. ``cfg`` must keep the
      run's model, task and seed (``rljax.train._rundir.FIXED_SECTIONS``); the fields it changes are printed. A
      finished run (nothing left to train for ``cfg``) is said to be so and left byte for byte as it was; its
      ``summary.json`` is returned, with the final parameters.
      ``rljax train --resume`` starts from the run's own ``config.json``.
    overwrite: replace the run already in ``cfg.out_dir`` (its run files only; other files stay). Without it a
      fresh start into a directory that holds a run is refused.
    recipe: a ``rljax.recipes.Recipe`` (default: the one ``cfg.rl``'s recipe fields describe). The fields it is
      not given come from ``cfg.rl`` (``Recipe.over``), as for a config file's ``get_recipe()``:
      ``Recipe(rewards=(fn,))`` keeps the config's advantage and loss. ``config.json`` records the recipe that
      runs, a slot holding a Python function as a marker naming it (``rljax.recipes.python_marker``).
    objective_fn: ``hparams -> rljax.objectives.Objective`` replacing the recipe's loss.
    objective_needs: the batch inputs ``objective_fn`` reads (``rljax.stages.NEEDS``; default: the replaced
      loss's and ``logp_old``).
    reward_fn: ``fn(completions, problems) -> [B]`` replacing the recipe's rewards (default: the task's
      verifier ``task.score``).

  SIGTERM or Ctrl-C (SIGINT) stops the run cleanly (``rljax.train._signals``): the current step finishes, a
  checkpoint is saved and ``Preempted`` is raised (its message names the step; ``e.signal``); a signal before the
  first step stops with nothing new saved. ``train(cfg, resume=True)`` continues the run. A second Ctrl-C stops
  at once (``KeyboardInterrupt``). The handlers are installed first (a signal during an XLA compilation waits
  for it to end) and the previous ones restored on return.

  A refused config names its fields by their paths in ``cfg`` (``rl.loss``, ``model.hidden_size``), not by their
  classes (``rljax.train._field_names``).
  """
  with stop_flag() as flag:
    try:
      return _train(cfg, flag, resume=resume, overwrite=overwrite, recipe=recipe, objective_fn=objective_fn,
                    reward_fn=reward_fn, objective_needs=objective_needs)
    except ValueError as e:  # config errors name rl.loss, model.hidden_size, ... as cfg's user knows them
      raise user_named_error(e)


def _stop_if_asked(flag, what: str) -> None:
  """Raises ``Preempted`` (``what`` happened) when a signal has set ``flag`` on any process."""
  if par.process_any(flag["set"]):
    raise preempted(flag, what)


def _train(cfg: RunConfig, flag, *, resume, overwrite, recipe, objective_fn, reward_fn, objective_needs) -> dict:
  """``train`` with the stop flag set up."""
  recipe = run_recipe(cfg, recipe, objective_fn=objective_fn, reward_fn=reward_fn, objective_needs=objective_needs)
  cfg = with_checkpoint_architecture(cfg)  # config.json records the checkpoint's shape, not the toy defaults
  check_trackers(cfg)  # wandb=true without wandb: the install command, nothing written
  t_start = time.perf_counter()
  if cfg.rl.rollout_ahead and jax.process_count() > 1:
    raise ValueError("RLConfig.rollout_ahead=true runs on one process only (its background sampling would "
                     f"interleave collectives with the update's); this run has {jax.process_count()} processes")
  main = jax.process_index() == 0  # host-side files and console output: process 0 only
  # config.json records the recipe that runs: each slot of catalog stages as its specs, a slot with Python stages
  # as a marker naming them (never the config's value of that field)
  cfg = cfg.replace(rl=cfg.rl.with_recipe(recipe, mark_python=True))
  described = {**recipe.describe(), "python": bool(marked_fields(cfg.rl))}
  # ---- checks: nothing is written until all of them pass (on every process: the start is refused everywhere)
  try:
    changes, exp, mesh = _check_start(cfg, recipe, described, resume=resume, overwrite=overwrite)
    refused = None
  except ValueError as e:
    refused = e
  if par.process_any(refused is not None):  # also a barrier: no process writes before every one has checked
    raise refused or ValueError("another process refused this start (its error says why)")
  _stop_if_asked(flag, "stopped during the start-up checks: nothing written")
  if resume:  # a finished run: nothing to train, so nothing is evaluated or written again
    finished = _finished_run(cfg, changes)
    if finished is not None:
      return finished
  # ---- the start is valid: write
  recipe_path = os.path.join(cfg.out_dir, "recipe.json")
  if main:
    if overwrite:
      removed = clear_run(cfg.out_dir)
      if removed:
        log(cfg, f"[rljax] --overwrite: removed the previous run's {', '.join(removed)} from {cfg.out_dir}")
    if changes:
      log(cfg, f"[rljax] resuming {cfg.out_dir} with changes to its config: {describe_changes(changes)}")
    for stage in ("sft", "rl") if resume else ():  # what a hard stop (a second Ctrl-C) left half-written
      for name in remove_partial_saves(os.path.join(cfg.out_dir, "checkpoints", stage)):
        log(cfg, f"[rljax] removed checkpoints/{stage}/{name}, a checkpoint left half-written by an interrupted save")
    os.makedirs(cfg.out_dir, exist_ok=True)
    if hasattr(exp.tokenizer, "save") and not cfg.model.hf_checkpoint:
      os.makedirs(os.path.join(cfg.out_dir, "tokenizer"), exist_ok=True)
      exp.tokenizer.save(os.path.join(cfg.out_dir, "tokenizer", "tokenizer.model"))
    with open(os.path.join(cfg.out_dir, "config.json"), "w", encoding="utf-8") as f:
      json.dump(config_to_dict(cfg), f, indent=2)
    with open(recipe_path, "w", encoding="utf-8") as f:
      json.dump(described, f, indent=2)
  if exp.auto_settings:
    log(cfg, f"[rljax] {exp.auto_settings}")
  if exp.codec.template is not None:
    log(cfg, f"[rljax] prompts in {exp.codec.template_name}; completions end at the token ids "
             f"{list(exp.codec.stop_ids)}")
  writer = (MetricsWriter(cfg.out_dir, tensorboard=cfg.tensorboard, append=resume,
                          wandb=wandb_settings(cfg, config_to_dict(cfg))) if main else NoWriter())
  summary = {"out_dir": cfg.out_dir, "seed": cfg.seed, "recipe": recipe.describe(),
             "settings": {k: getattr(exp.cfg.rl, k) for k in ("num_microbatches", "concurrent_rollouts")}}
  n_params = sum(x.size for x in jax.tree_util.tree_leaves(nnx.state(exp.model, nnx.Param)))
  lora = cfg.model.lora
  trained = (f" (LoRA r={lora.rank}: {sum(x.size for x in jax.tree_util.tree_leaves(nnx.state(exp.model, nnx.LoRAParam))):,}"
             " trained)" if lora is not None else "")
  log(cfg, f"[rljax] task={cfg.task.name} train={len(exp.train_problems)} test={len(exp.test_problems)} "
            f"vocab={exp.tokenizer.vocab_size} params={n_params:,}{trained} out_dir={cfg.out_dir}")
  small = held_out_warning(cfg, len(exp.test_problems))
  if small:
    log(cfg, small)
  evals: list = []
  prior_s = _wall_so_far(cfg.out_dir) if resume else 0.0  # the parts of the run before this resume
  try:
    graphdef, state, _ = run_sft(exp, writer, resume, flag, mesh)
    eval_path = os.path.join(cfg.out_dir, "sft_eval.json")
    if resume and os.path.exists(eval_path):
      with open(eval_path, encoding="utf-8") as f:
        sft_eval = json.load(f)
    else:
      sft_eval = evaluate_state(exp, graphdef, state, jax.random.PRNGKey(999))
      if main:
        with open(eval_path, "w", encoding="utf-8") as f:
          json.dump(sft_eval, f)
      writer.write("sft", cfg.sft.steps, {f"eval/{k}": v for k, v in sft_eval.items()})
      writer.write("rl", 0, {f"eval/{k}": sft_eval[k] for k in ("greedy_accuracy", "greedy_format") if k in sft_eval})
    summary["sft"] = sft_eval
    if cfg.sft.init_from is not None:
      summary["sft_from"] = cfg.sft.init_from
    log(cfg, "[rljax] {}: held-out greedy accuracy {:.1%}{}".format(
        start_label(cfg), sft_eval["greedy_accuracy"], eval_extras(sft_eval, cfg.eval.temperature)))
    evals.append({"step": 0, "greedy_accuracy": sft_eval["greedy_accuracy"]})
    if cfg.rl.steps > 0:
      graphdef, state = run_rl(exp, graphdef, state, recipe, writer, resume, flag, mesh, evals, checked=True)
      _stop_if_asked(flag, "stopped after the RL steps, before the final evaluation ("
                     + ("the last RL checkpoint is saved)" if cfg.checkpoint.enabled else "checkpoint.enabled=false: "
                        "nothing saved)"))
    # no RL steps (an SFT-only run): no after-RL evaluation, no gain, in the log, the summary or summary.json
    rl_eval = evaluate_state(exp, graphdef, state, jax.random.PRNGKey(999)) if cfg.rl.steps > 0 else None
  except Preempted:  # stopped cleanly: the plot of what ran, and the time so far for the resume's wall_s
    if main:
      _write_wall(cfg.out_dir, prior_s + time.perf_counter() - t_start)
      if cfg.plot:
        plot_metrics(os.path.join(cfg.out_dir, "metrics.jsonl"), os.path.join(cfg.out_dir, "metrics.png"))
    raise
  finally:
    writer.close()
  if rl_eval is not None:
    summary["rl"] = rl_eval
    summary["gain_points"] = 100.0 * (rl_eval["greedy_accuracy"] - sft_eval["greedy_accuracy"])
  summary["evals"] = evals
  summary["wall_s"] = prior_s + time.perf_counter() - t_start  # every part of a resumed run
  if cfg.rl.steps > 0:
    log(cfg, "[rljax] after RL:  held-out greedy accuracy {:.1%} ({:+.1f} points over {}){}".format(
        rl_eval["greedy_accuracy"], summary["gain_points"], start_label(cfg, short=True),
        eval_extras(rl_eval, cfg.eval.temperature)))
  if cfg.plot:
    summary["plot"] = os.path.join(cfg.out_dir, "metrics.png")
    if main:
      plot_metrics(os.path.join(cfg.out_dir, "metrics.jsonl"), summary["plot"])
  if main:
    _write_wall(cfg.out_dir, summary["wall_s"])
    with open(os.path.join(cfg.out_dir, "summary.json"), "w", encoding="utf-8") as f:
      json.dump(summary, f, indent=2)
  log(cfg, f"[rljax] done in {summary['wall_s']:.0f} s; metrics: {cfg.out_dir}/metrics.jsonl"
            f"{', plot: ' + summary['plot'] if cfg.plot else ''}")
  summary["params"] = state.params
  summary["graphdef"] = graphdef
  summary["model_state"] = state.model_state
  return summary


SMALL_HELD_OUT = 50  # fewer held-out problems than this: one problem moves the accuracy by more than 2 points


def held_out_warning(cfg: RunConfig, n_test: int) -> Optional[str]:
  """A ``[rljax] warning:`` line when the task's data gave fewer than ``SMALL_HELD_OUT`` held-out problems and
  fewer than ``task.num_test`` asked for (a small JSONL file split by ``task.eval_fraction``, a short
  ``task.eval_path``), else ``None``. A generated task gives ``num_test``: a small one there is the user's choice."""
  if n_test >= min(SMALL_HELD_OUT, cfg.task.num_test):
    return None
  t = cfg.task
  source = (f"task.eval_path {t.eval_path!r}" if t.name == "jsonl" and t.eval_path
            else f"task.eval_fraction={t.eval_fraction:g} of task.path" if t.name == "jsonl" else f"task {t.name!r}")
  return (f"[rljax] warning: the held-out split has only {n_test} problem{'s' * (n_test != 1)} ({source}): one "
          f"problem is {100 / max(n_test, 1):.1f} points of held-out accuracy; give more held-out problems "
          f"(at least {SMALL_HELD_OUT}) for a figure to compare")


def _wall_so_far(out_dir: str) -> float:
  """Seconds the run in ``out_dir`` ran before this resume (``wall.json``; 0 when a hard stop left none)."""
  try:
    with open(os.path.join(out_dir, WALL_FILE), encoding="utf-8") as f:
      return float(json.load(f)["wall_s"])
  except (OSError, ValueError, KeyError, TypeError):
    return 0.0


def _write_wall(out_dir: str, wall_s: float) -> None:
  with open(os.path.join(out_dir, WALL_FILE), "w", encoding="utf-8") as f:
    json.dump({"wall_s": wall_s}, f)


def _finished_run(cfg: RunConfig, changes) -> Optional[dict]:
  """The summary of the run in ``cfg.out_dir`` (its ``summary.json``, with the final parameters) when it is finished
  for ``cfg``: ``summary.json`` written and the last stage's newest checkpoint, at ``rl.steps`` (``sft.steps`` for
  an SFT-only run) or beyond, readable. Else ``None``: resuming has training to do, or a checkpoint to re-train."""
  path = os.path.join(cfg.out_dir, "summary.json")
  stage, steps = ("rl", cfg.rl.steps) if cfg.rl.steps > 0 else ("sft", cfg.sft.steps)
  if not os.path.exists(path) or (stage == "sft" and cfg.sft.init_from is not None):
    return None
  ckpt = Checkpointer(os.path.join(cfg.out_dir, "checkpoints", stage))
  try:
    latest = ckpt.latest_step()
  finally:
    ckpt.close()
  if latest is None or latest < steps:
    return None
  with warnings.catch_warnings():  # an unreadable newest checkpoint: the resume that follows warns, once
    warnings.simplefilter("ignore")
    try:
      _, graphdef, state, info = load_run(cfg.out_dir, stage=stage, weights_only=True)
    except CheckpointError:
      return None
  if info["step"] != latest:
    return None
  with open(path, encoding="utf-8") as f:
    summary = json.load(f)
  unapplied = f"; its config is not changed ({describe_changes(changes)} not applied)" if changes else ""
  further = "resume with a larger rl.steps" if stage == "rl" else "resume with rl.steps > 0"
  log(cfg, f"[rljax] {cfg.out_dir} is finished ({stage.upper()} step {latest} of {steps}): nothing to train, "
           f"nothing written{unapplied}. To train further, {further}")
  summary.update(params=state.params, graphdef=graphdef, model_state=state.model_state)
  return summary


def start_label(cfg: RunConfig, short: bool = False) -> str:
  """What the RL stage starts from, for the log: ``"zero-shot"`` (a checkpoint with no SFT: the model as loaded),
  ``"after SFT"``, or the shared warm start of ``sft.init_from``. ``short``: the noun of "points over ..."."""
  if cfg.sft.init_from is not None:
    return "the shared SFT" if short else f"after SFT (from {cfg.sft.init_from})"
  if cfg.sft.steps == 0:
    return "zero-shot" if short else "zero-shot (no SFT)"
  return "SFT" if short else "after SFT"


def eval_extras(ev: dict, temperature: float) -> str:
  """The rest of an evaluation's log line, only what it measured: ``", temperature-T success x%"`` when it sampled
  (``sample_accuracy``), then each ``pass@k`` (an environment task's eval plays greedy episodes only: nothing)."""
  out = [f", {ev['greedy_format']:.1%} of greedy answers in the asked format"] if "greedy_format" in ev else []
  out += [f", temperature-{temperature:g} success {ev['sample_accuracy']:.1%}"] if "sample_accuracy" in ev else []
  return "".join(out + [f", {k} {v:.1%}" for k, v in ev.items() if k.startswith("pass@")])


def load_run(run_dir: str, *, stage: Optional[str] = None, step: Optional[int] = None, mesh=None,
             weights_only: bool = False):
  """Rebuilds a finished/interrupted run from ``run_dir`` and restores a checkpoint.

  Args:
    run_dir: a directory written by ``train`` (has ``config.json``, ``checkpoints/``).
    stage: ``"rl"`` or ``"sft"``; default: RL if it has a checkpoint, else SFT.
    step: a specific step (default: latest readable).
    mesh: a ``rljax.parallel.MeshConfig`` to restore onto (default: the run's
      ``cfg.mesh``; if that does not fit the devices here, one device, with a
      warning). The state comes back sharded over it.
    weights_only: the parameters and model state alone (``rljax sample`` / ``eval``): the optimizer state is
      neither built nor read (``state.opt_state`` is ``None``), so memory holds the model once, not three times
      (Adam's two moments).

  Returns ``(experiment, graphdef, state, info)``; raises ``CheckpointError``
  (a ``ValueError``) with a clear message when the directory or checkpoint is
  missing or unreadable.
  """
  from rljax.train._config import config_from_dict  # pylint: disable=import-outside-toplevel
  cfg_path = os.path.join(run_dir, "config.json")
  if not os.path.isdir(run_dir):
    raise CheckpointError(f"run directory {run_dir!r} does not exist")
  if not os.path.exists(cfg_path):
    raise CheckpointError(f"{run_dir!r} is not an rljax run directory (no config.json)")
  with open(cfg_path, encoding="utf-8") as f:
    cfg = config_from_dict(json.load(f))
  cfg = cfg.replace(out_dir=run_dir)
  stages = ("rl", "sft") if stage is None else (stage,)
  sft_cfg = cfg  # whose SFT optimizer the SFT checkpoint holds
  for st in stages:
    if st not in ("rl", "sft"):
      raise ValueError(f"stage must be 'rl' or 'sft', got {st!r}")
    ckpt = Checkpointer(os.path.join(run_dir, "checkpoints", st))
    if st == "sft" and not ckpt.exists() and cfg.sft.init_from is not None:  # the shared warm start it began from
      ckpt = Checkpointer(sft_checkpoint_dir(cfg.sft.init_from))
      sft_cfg = check_init_from(cfg)
    if ckpt.exists() or stage is not None:
      break
  else:
    raise CheckpointError(f"no checkpoints under {os.path.join(run_dir, 'checkpoints')!r}")
  exp = build_experiment(cfg)
  if st == "rl":
    # the train state alone (its parts are separate): hparam names and the value head come from the meta
    meta = ckpt.read_meta(step)
    opt, _ = make_optimizer(cfg.rl.optim, 1)
    model = exp.model
    if meta.get("value_head"):
      from rljax.models import with_value_head  # pylint: disable=import-outside-toplevel
      model = with_value_head(model)
    if "hparams" not in meta:
      raise CheckpointError(f"{ckpt.directory!r} was written by an older rljax (no recipe metadata); "
                            "evaluate its SFT checkpoint with --stage sft")
    graphdef, state = init_train_state(model, _shapes_only(opt) if weights_only else opt,
                                       {k: 0.0 for k in meta["hparams"]})
    template = {"state": state}
  else:
    opt, _ = make_optimizer(sft_cfg.sft.optim, max(sft_cfg.sft.steps, 1))
    graphdef, state = init_train_state(exp.model, _shapes_only(opt) if weights_only else opt)
    template = {"state": state}
  if mesh is None:
    try:
      device_mesh = run_mesh(cfg)
    except ValueError as e:
      warnings.warn(f"load_run: the run's mesh does not fit here ({e}); restoring onto one device", RuntimeWarning)
      device_mesh = run_mesh(cfg.replace(mesh=type(cfg.mesh)(1, 1, 1, 1)))
  else:
    device_mesh = run_mesh(cfg.replace(mesh=mesh))
  shardings = par.train_state_shardings(template["state"], device_mesh)
  opt_state = template["state"].opt_state  # abstract with weights_only: not placed, not read
  template["state"] = par.place_global(template["state"].replace(opt_state=None), shardings.replace(opt_state=None))
  template["state"] = template["state"].replace(opt_state=opt_state if weights_only else par.place_global(
      opt_state, shardings.opt_state))
  tree, meta, got = ckpt.restore(template, step=step, parts=st == "rl")
  ckpt.close()
  state = tree["state"].replace(opt_state=None) if weights_only else tree["state"]
  return exp, graphdef, state, {"stage": st, "step": got, "meta": meta}


def _shapes_only(opt):
  """``opt`` whose ``init`` gives the state's shapes (``jax.ShapeDtypeStruct`` leaves) without allocating it."""
  import optax  # pylint: disable=import-outside-toplevel
  return optax.GradientTransformation(lambda params: jax.eval_shape(opt.init, params), opt.update)
