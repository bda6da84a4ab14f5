"""``preview_step``: one RL step's data, advantages and loss terms for a recipe, without training.

For looking at what a recipe does before running it (``notebooks/03_your_own_recipe.ipynb``): it samples one
batch with the given parameters, scores, shapes, filters it, computes the advantages and evaluates the loss
terms on it, exactly as the RL loop's first step would, and returns all of it. No parameter changes and
nothing is written.
"""
from __future__ import annotations

import numpy as np
from flax import nnx

from rljax import parallel as par

__all__ = ["preview_step"]


def preview_step(cfg, recipe=None, *, params=None, model_state=None, step: int = 0) -> dict:
  """One RL step of ``recipe`` (default: ``cfg.rl``'s; the fields a partial recipe is not given are ``cfg.rl``'s,
  as in ``train``) on ``cfg``'s task, at ``params`` (default: a fresh model).

  Returns ``{"data": StepData (after the advantages), "batch": TrainBatch, "rollout": rollout statistics,
  "stages": the stages' metrics, "loss": float, "metrics": the loss terms' metrics}`` (host values).
  """
  from rljax.train._phases import compute_advantages, filter_advantages  # pylint: disable=import-outside-toplevel
  from rljax.train._experiment import NoWriter, build_experiment, run_mesh  # pylint: disable=import-outside-toplevel
  from rljax.train._inputs import train_batch  # pylint: disable=import-outside-toplevel
  from rljax.train._optim import make_optimizer  # pylint: disable=import-outside-toplevel
  from rljax.train._rl import RLLoop  # pylint: disable=import-outside-toplevel
  from rljax.train._run import run_recipe  # pylint: disable=import-outside-toplevel
  from rljax.train._step import init_train_state, trainable_filter  # pylint: disable=import-outside-toplevel

  recipe = run_recipe(cfg, recipe)
  cfg = cfg.replace(checkpoint=type(cfg.checkpoint)(enabled=False), progress=None)
  exp = build_experiment(cfg)
  if params is not None:
    graphdef, _, rest = nnx.split(exp.model, trainable_filter(exp.model), ...)
    exp.model = nnx.merge(graphdef, params, rest if model_state is None else model_state)
  graphdef, state = init_train_state(exp.model, make_optimizer(cfg.sft.optim, 1)[0])
  loop = RLLoop(exp, graphdef, state, recipe, run_mesh(cfg), resume=False, evals=[], writer=NoWriter())
  collected = loop.sample(step, loop.state.params, loop.state.model_state,
                          loop.controllers.temperature(loop.ctl_state), loop.stage_states["prompt_filters"])
  data = loop.inputs(collected.data, loop.state, getattr(loop.critic, "state", None))
  data, stage_metrics, _ = compute_advantages(loop.stages["advantages"], data, loop.stage_states["advantage"])
  stage_metrics = {**collected.stage_metrics, **stage_metrics}
  data = filter_advantages(loop.stages["advantage_filters"], data, stage_metrics)
  stats = collected.stats
  batch = train_batch(data, loop.rows_sh, cfg.rl.batch_size, routing=cfg.rl.routing_replay)
  from rljax.models import policy_outputs  # pylint: disable=import-outside-toplevel
  objective = loop.recipe.objective_builder()(loop.state.hparams)
  out = policy_outputs(nnx.merge(loop.graphdef, loop.state.params, loop.state.model_state), batch.tokens,
                       routing=batch.routing)
  loss, metrics = objective(out, batch)
  host = par.to_host({k: v for k, v in metrics.items() if np.ndim(v) == 0})
  return {"data": data, "batch": batch, "rollout": stats, "stages": stage_metrics, "loss": float(loss),
          "metrics": {k: float(v) for k, v in host.items()}}

