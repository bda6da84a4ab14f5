"""Training: the jitted train step, SFT and RL loops, checkpoints, metrics, configs.

Public API::

    from rljax.train import RunConfig, default_config, apply_overrides, train
    graphdef, state = init_train_state(model, optimizer, hparams)
    step = make_train_step(graphdef, objective_loss(objective), optimizer, num_microbatches=2)
    state, metrics = step(state, batch)
"""
import importlib as _importlib

from rljax.train._config import *  # noqa: F401,F403
from rljax.train._codec import CHAT_TEMPLATE_CHOICES, Codec, resolve_chat_template
from rljax.train._optim import make_optimizer, make_schedule
from rljax.train._ahead import RolloutAhead
from rljax.train._checkpoint import Checkpointer, CheckpointError, CheckpointWarning
from rljax.train._compile_cache import enable_compile_cache
from rljax.train._metrics import MetricsWriter, plot_metrics, plot_panels, read_jsonl
from rljax.train._eval import evaluate, pass_at_k
from rljax.train._controllers import LoopControllers
from rljax.train._step import (HookedLoss, LossFn, LossHooks, TrainState, init_train_state, make_mesh,
                               make_train_step, merge_model, nll_loss, nll_term, objective_loss, split_microbatches, split_statistics,
                               trainable_filter)


# imported on first use: the run orchestration imports models/sampling/envs/data lazily, the rest is not needed to
# build a config or a train step
_LAZY = {
    "_run": ("train", "Preempted", "Experiment", "build_experiment", "load_run", "run_recipe"),
    "_preview": ("preview_step",),
    "_rundir": ("from_cli", "saved_config", "run_files", "config_changes", "describe_changes"),
    "_progress": ("progress_bar",),
    "_export": ("export_run",),
    "_checkpoint_arch": ("ARCHITECTURE_FIELDS", "ShapeDefault", "as_shape_defaults", "checkpoint_architecture",
                         "with_checkpoint_architecture"),
    "_field_names": ("user_field_names", "user_named_error"),
    "_experiment": ("build_task", "build_codec"),
    "_inputs": ("forward_fn", "proximal_forward_reason", "PROXIMAL_NEEDS", "REFERENCE_NEEDS"),
    "_recipes": ("recipe_from_config",),
}


def __getattr__(name):
  for module, names in _LAZY.items():
    if name in names:
      return getattr(_importlib.import_module(f"rljax.train.{module}"), name)
  raise AttributeError(f"module 'rljax.train' has no attribute {name!r}")
