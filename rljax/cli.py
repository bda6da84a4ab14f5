"""``rljax`` command line: ``rljax train | eval | sample``.

    rljax train                                   # the default demo (SFT + GRPO on 3-digit addition, CPU)
    rljax train --config dapo --set rl.steps=100 --set seed=1
    rljax train --resume --out-dir runs/default   # continue from the latest checkpoint
    rljax train --set mesh.fsdp=-1                # shard over every device (of every host; docs/scaling.md)
    rljax eval --run-dir runs/default --num-samples 8 --k 1 4 8
    rljax sample --run-dir runs/default "730+580=" "215+994=" --n 4 --temperature 1.0

``--config`` takes a name from the ``configs/`` folder, installed as ``rljax.configs``
(``default``, ``grpo``, ``dapo``, ``dr_grpo``, ``gspo``, ``tiny``,
``qwen2_5_0_5b_gsm8k``; ``available_configs()`` lists them) or a path to a Python file defining
``get_config() -> rljax.train.RunConfig`` and, optionally, ``get_recipe() ->
rljax.recipes.Recipe`` (a recipe with your own Python stages; ``--resume`` needs
the same file). ``--set key=value`` overrides any
field (dotted path); invalid values are errors naming the field.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from typing import Optional, Sequence

from rljax._config_files import available_configs, configs_package, import_config

__all__ = ["main", "load_config", "load_config_and_recipe", "available_configs"]

_BUILTIN = ("default", "tiny")
_RECIPE_KEYS = {f"rl.{k}" for k in ("rewards", "multi_reward", "shaping", "prompt_filters", "filters", "advantage",
                                    "loss", "aggregation", "controllers", "critic", "critic_shared", "critic_coef",
                                    "critic_lr")}


def load_config(name_or_path: Optional[str]):
  """A ``RunConfig`` from a config name (``rljax.configs.<name>``, the ``configs/`` folder) or a ``.py`` path."""
  return load_config_and_recipe(name_or_path)[0]


def load_config_and_recipe(name_or_path: Optional[str]):
  """``(RunConfig, Recipe or None)`` from a config file: its ``get_config()``, and its optional
  ``get_recipe() -> rljax.recipes.Recipe`` (a recipe with Python functions, which no config field can hold)."""
  from rljax import train as tr  # pylint: disable=import-outside-toplevel
  name_or_path = name_or_path or "default"
  if name_or_path in _BUILTIN and configs_package() is None:
    return (tr.default_config() if name_or_path == "default" else tr.tiny_config()), None
  if not name_or_path.endswith(".py"):
    module = import_config(name_or_path)
    path = module.__file__
  else:
    path = name_or_path
    if not os.path.exists(path):
      raise ValueError(f"--config {name_or_path!r}: no such config file; available names: {available_configs()}")
    configs_package()  # config files may import rljax.configs (e.g. its recipes)
    spec = importlib.util.spec_from_file_location(f"rljax_config_{os.path.basename(path)[:-3]}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
  if not hasattr(module, "get_config"):
    raise ValueError(f"config file {path} must define get_config() -> rljax.train.RunConfig")
  cfg = module.get_config()
  if not isinstance(cfg, tr.RunConfig):
    raise ValueError(f"{path}: get_config() must return a RunConfig, got {type(cfg).__name__}")
  recipe = module.get_recipe() if hasattr(module, "get_recipe") else None
  from rljax.recipes import Recipe  # pylint: disable=import-outside-toplevel
  if recipe is not None and not isinstance(recipe, Recipe):
    raise ValueError(f"{path}: get_recipe() must return a rljax.recipes.Recipe, got {type(recipe).__name__}")
  return cfg, recipe


def _parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog="rljax", description="JAX-native RL post-training for language models.")
  sub = p.add_subparsers(dest="command")
  t = sub.add_parser("train", help="SFT warm-start then RL (default: the CPU demo)")
  t.add_argument("--config", default=None, help="config name in configs/ or a .py path (default: default)")
  t.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                 help="override a config field, e.g. --set rl.steps=100 (repeatable)")
  t.add_argument("--out-dir", default=None, help="run directory (same as --set out_dir=...)")
  t.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in the run directory")
  t.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
  e = sub.add_parser("eval", help="held-out accuracy and unbiased pass@k from a checkpoint")
  e.add_argument("--run-dir", default="runs/default")
  e.add_argument("--stage", choices=("rl", "sft"), default=None)
  e.add_argument("--step", type=int, default=None)
  e.add_argument("--num-problems", type=int, default=None)
  e.add_argument("--num-samples", type=int, default=8)
  e.add_argument("--k", type=int, nargs="+", default=[1, 4, 8])
  e.add_argument("--temperature", type=float, default=1.0)
  e.add_argument("--seed", type=int, default=0)
  s = sub.add_parser("sample", help="generate completions from a checkpoint")
  s.add_argument("prompts", nargs="+", help="prompt texts, e.g. '730+580='")
  s.add_argument("--run-dir", default="runs/default")
  s.add_argument("--stage", choices=("rl", "sft"), default=None)
  s.add_argument("--n", type=int, default=1)
  s.add_argument("--temperature", type=float, default=1.0)
  s.add_argument("--greedy", action="store_true")
  s.add_argument("--seed", type=int, default=0)
  return p


def _cmd_train(args) -> int:
  if not args.print_config:
    from rljax.parallel import maybe_initialize_distributed  # pylint: disable=import-outside-toplevel
    # Multi-host (TPU pod slice, SLURM, or RLJAX_COORDINATOR/NUM_PROCESSES/PROCESS_ID): join the distributed
    # runtime before any device is used (building a recipe may already run JAX); a no-op for one process.
    maybe_initialize_distributed()
  from rljax.train import apply_overrides, config_to_dict  # pylint: disable=import-outside-toplevel
  from rljax.train._run import Preempted, train  # pylint: disable=import-outside-toplevel
  cfg, recipe = load_config_and_recipe(args.config)
  overrides = list(args.overrides) + ([f"out_dir={args.out_dir}"] if args.out_dir else [])
  cfg = apply_overrides(cfg, overrides)
  if recipe is not None and any(o.split("=", 1)[0].strip() in _RECIPE_KEYS for o in overrides):
    raise ValueError(f"--config {args.config}: its get_recipe() gives the recipe, so --set of a recipe field "
                     "(rl.advantage, rl.loss, ...) would be ignored; change the recipe in the file")
  if args.print_config:
    print(json.dumps(config_to_dict(cfg), indent=2))
    return 0
  try:
    train(cfg, resume=args.resume, recipe=recipe)
  except Preempted as e:
    print(f"[rljax] {e}", file=sys.stderr)
    return 143
  return 0


def _cmd_eval(args) -> int:
  import jax  # pylint: disable=import-outside-toplevel
  from rljax.train._eval import evaluate  # pylint: disable=import-outside-toplevel
  from rljax.train._run import load_run  # pylint: disable=import-outside-toplevel
  exp, graphdef, state, info = load_run(args.run_dir, stage=args.stage, step=args.step)
  if args.num_samples < 1 or any(not 1 <= k <= args.num_samples for k in args.k):
    raise ValueError(f"--k values must be in [1, --num-samples={args.num_samples}], got {args.k}")
  problems = exp.test_problems[:args.num_problems or exp.cfg.eval.num_problems]
  res = evaluate(exp.sample_fn(graphdef, state.params, state.model_state), exp.task, exp.codec, problems,
                 batch_size=exp.cfg.eval.batch_size, key=jax.random.PRNGKey(args.seed),
                 num_samples=args.num_samples, pass_k=args.k, temperature=args.temperature)
  res = {"run_dir": args.run_dir, "stage": info["stage"], "step": info["step"], "num_problems": len(problems),
         **res}
  print(json.dumps(res, indent=2))
  return 0


def _cmd_sample(args) -> int:
  import jax  # pylint: disable=import-outside-toplevel
  from rljax.envs import Problem  # pylint: disable=import-outside-toplevel
  from rljax.train._run import load_run  # pylint: disable=import-outside-toplevel
  exp, graphdef, state, info = load_run(args.run_dir, stage=args.stage)
  if args.n < 1:
    raise ValueError(f"--n must be >= 1, got {args.n}")
  fn = exp.sample_fn(graphdef, state.params, state.model_state)
  problems = [Problem(prompt=p, answer="", meta={}) for p in args.prompts]
  rollout = fn([exp.codec.prompt_ids(p) for p in problems], n=args.n, greedy=args.greedy,
               temperature=args.temperature, key=jax.random.PRNGKey(args.seed))
  texts = exp.codec.decode_completions(rollout.tokens, rollout.completion_mask)
  print(f"# {args.run_dir} ({info['stage']} step {info['step']})")
  for i, p in enumerate(args.prompts):
    for j in range(args.n):
      print(f"{p}\t{texts[i * args.n + j]}")
  return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Entry point of the ``rljax`` console script."""
  args = _parser().parse_args(argv)
  if args.command is None:
    _parser().print_help()
    return 2
  try:
    return {"train": _cmd_train, "eval": _cmd_eval, "sample": _cmd_sample}[args.command](args)
  except ValueError as e:  # config / checkpoint / input errors: one clear line, no traceback
    print(f"rljax {args.command}: error: {e}", file=sys.stderr)
    return 2


if __name__ == "__main__":
  sys.exit(main())
