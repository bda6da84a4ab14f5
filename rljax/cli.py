"""``rljax`` command line: ``rljax train | eval | sample | export | arena | plan``.

    rljax train                                   # the default demo (SFT + GRPO on 3-digit addition, CPU)
    rljax train --config dapo --set rl.steps=100 --set seed=1
    rljax train --resume --out-dir runs/default   # continue the run (its own config.json) from its latest checkpoint
    rljax train --overwrite                       # replace the run in runs/default (its run files only)
    rljax train --set mesh.fsdp=-1                # shard over every device (of every host; docs/scaling.md)
    rljax eval --run-dir runs/default --num-samples 8 --k 1 4 8
    rljax sample --run-dir runs/default "730+580=" "215+994=" --n 4 --temperature 1.0
    rljax sample --run-dir runs/gsm8k "What is 7 + 12?"     # in the run's chat template (--raw: the text as is)
    rljax export --run-dir runs/smollm2_addition exported/   # a Hugging Face checkpoint of a real-model run
    rljax arena --recipes grpo,dapo --seeds 0,1,2 --out runs/arena   # recipes side by side (docs/arena.md)
    rljax plan --target v5e:16x16 --set model.preset=qwen2.5-72b --prompt-len 1024   # fits a pod? (docs/scaling.md)

``--config`` takes a name from the ``configs/`` folder, installed as ``rljax.configs``
(``default``, ``grpo``, ``dapo``, ``dr_grpo``, ``gspo``, ``tiny``,
``qwen2_5_0_5b_gsm8k``; ``available_configs()`` lists them) or a path to a Python file defining
``get_config() -> rljax.train.RunConfig`` and, optionally, ``get_recipe() ->
rljax.recipes.Recipe`` (a recipe with your own Python stages; ``--resume`` needs
the same file for it). ``--set key=value`` overrides any field (dotted path);
invalid values are errors naming the field.

A run directory holds one run: ``train`` into a directory that holds one is
refused unless ``--resume`` (continue it: its ``config.json`` with your
``--set`` changes, printed as a diff) or ``--overwrite`` (replace it). Every
check runs before anything is written.

Ctrl-C (or SIGTERM) during ``train`` finishes the current step, saves a checkpoint and prints one line with the
resume command; the exit code is 130 (143 for SIGTERM). A second Ctrl-C stops at once.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
import warnings
from typing import Optional, Sequence

from rljax._config_files import available_configs, load_config, load_config_and_recipe
from rljax.host_allocator import configure_host_allocator

__all__ = ["main", "load_config", "load_config_and_recipe", "available_configs"]


def _recipe_keys() -> set:
  """The ``--set`` keys that a config file's own recipe holds (the recipe slots and the critic's settings)."""
  from rljax.recipes import SLOTS  # pylint: disable=import-outside-toplevel
  return {f"rl.{k}" for k in tuple(SLOTS) + ("critic_shared", "critic_coef", "critic_lr")}


def _parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog="rljax", description="JAX-native RL post-training for language models.")
  sub = p.add_subparsers(dest="command")
  t = sub.add_parser("train", help="SFT warm-start then RL (default: the CPU demo)",
                     description="SFT warm-start, then RL with a recipe; writes metrics, a plot and checkpoints "
                                 "into the run directory.",
                     epilog=f"configs: {', '.join(available_configs())} (or a path to a .py file defining "
                            "get_config())")
  t.add_argument("--config", default=None,
                 help="config name in configs/ (listed below) or a .py path; default: default")
  t.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                 help="override a config field, e.g. --set rl.steps=100 (repeatable)")
  t.add_argument("--out-dir", default=None, help="run directory (same as --set out_dir=...); default: the "
                                                 "config's out_dir, runs/default")
  mode = t.add_mutually_exclusive_group()
  mode.add_argument("--resume", action="store_true",
                    help="continue the run in the run directory from its latest checkpoint, with its own "
                         "config.json (--set changes it; the model, task and seed stay)")
  mode.add_argument("--overwrite", action="store_true",
                    help="replace the run already in the run directory (removes its run files only)")
  t.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
  e = sub.add_parser("eval", help="held-out accuracy and unbiased pass@k from a checkpoint",
                     description="Evaluates a run's checkpoint on the task's held-out problems: greedy accuracy, "
                                 "sampled success rate and unbiased pass@k; prints JSON. The prompts are encoded "
                                 "as in training (the run's chat template, task.chat_template).")
  e.add_argument("--run-dir", default="runs/default", help="the run directory written by rljax train (default: %(default)s)")
  e.add_argument("--stage", choices=("rl", "sft"), default=None,
                 help="which checkpoints to read (default: RL if the run has any, else SFT)")
  e.add_argument("--step", type=int, default=None, help="checkpoint step (default: the latest readable)")
  e.add_argument("--num-problems", type=int, default=None,
                 help="held-out problems to evaluate (default: the run's eval.num_problems)")
  e.add_argument("--num-samples", type=int, default=None,
                 help="samples per problem for pass@k (default: the run's eval.num_samples: the programs the run "
                      "compiled, loaded from the compile cache)")
  e.add_argument("--k", type=int, nargs="+", default=None,
                 help="the k of pass@k, each <= --num-samples (default: the run's eval.pass_k up to --num-samples)")
  e.add_argument("--temperature", type=float, default=None,
                 help="sampling temperature of the pass@k samples (default: the run's eval.temperature)")
  e.add_argument("--seed", type=int, default=0, help="PRNG seed of the samples (default: %(default)s)")
  s = sub.add_parser("sample", help="generate completions from a checkpoint",
                     description="Generates completions for prompts from a run's checkpoint; prints "
                                 "'prompt<TAB>completion' lines. Each prompt is sent as the run's prompts were: "
                                 "in its chat template (task.chat_template of its config.json) unless --raw.")
  s.add_argument("prompts", nargs="+", help="prompt texts, e.g. '730+580='")
  s.add_argument("--run-dir", default="runs/default", help="the run directory written by rljax train (default: %(default)s)")
  s.add_argument("--stage", choices=("rl", "sft"), default=None,
                 help="which checkpoints to read (default: RL if the run has any, else SFT)")
  s.add_argument("--n", type=int, default=1, help="completions per prompt (default: %(default)s)")
  s.add_argument("--temperature", type=float, default=1.0, help="sampling temperature, > 0 (default: "
                                                                "%(default)s; for greedy decoding use --greedy)")
  s.add_argument("--greedy", action="store_true", help="greedy decoding (argmax) instead of sampling")
  s.add_argument("--seed", type=int, default=0, help="PRNG seed of the samples (default: %(default)s)")
  s.add_argument("--raw", action="store_true",
                 help="send the prompt text as is, without the run's chat template (the tokenizer's own start "
                      "token is still put first)")
  x = sub.add_parser("export", help="write a run's checkpoint as a Hugging Face checkpoint directory",
                     description="Writes a run's checkpoint (default: the latest RL one) as a Hugging Face checkpoint "
                                 "directory (config.json, safetensors, the tokenizer files of the checkpoint the run "
                                 "started from; LoRA adapters merged) that transformers loads.")
  x.add_argument("out", help="the directory to write (must not exist or be empty)")
  x.add_argument("--run-dir", default="runs/default", help="the run directory written by rljax train (default: %(default)s)")
  x.add_argument("--stage", choices=("rl", "sft"), default=None, help="which checkpoints (default: RL if any, else SFT)")
  x.add_argument("--step", type=int, default=None, help="checkpoint step (default: the latest readable)")
  x.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default=None,
                 help="the weights' dtype (default: the model's)")
  a = sub.add_parser("arena", help="run recipes x seeds side by side and tabulate them",
                     description="Runs arena entries (named lists of --set overrides, rljax.arena.ENTRIES) x seeds "
                                 "on one base config, each run a separate `rljax train` process sharing one SFT "
                                 "warm start per seed; writes arena.csv, arena.md and curves.png into --out. "
                                 "Finished runs are not redone; interrupted ones resume.")
  a.add_argument("--config", default=None, help="base config name in configs/ or a .py path; default: arena (countdown)")
  pick = a.add_mutually_exclusive_group()
  pick.add_argument("--recipes", default=None, metavar="A,B", help="comma-separated entry names (default: the default experiment)")
  pick.add_argument("--experiment", default=None, help="a named group of entries (see --list)")
  a.add_argument("--seeds", default="0", metavar="0,1,2", help="comma-separated seeds (default: %(default)s)")
  a.add_argument("--jobs", type=int, default=None, help="runs at once (default: one per core)")
  a.add_argument("--out", default="runs/arena", help="the arena directory (default: %(default)s)")
  a.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                 help="override a config field of every run, after the entry's own (repeatable)")
  a.add_argument("--list", action="store_true", help="list the entries and experiments and exit")
  _plan_parser(sub)
  return p


def _plan_parser(sub) -> None:
  pl = sub.add_parser("plan", help="compile a run's programs for a TPU slice (no TPU needed): fits? cost?",
                      description="Compiles the run's programs (the RL update with the recipe's loss, the update's "
                                  "reference/proximal forward, the rollout's prefill + KV cache + decode) with "
                                  "XLA:TPU for a TPU topology, with no TPU attached, and prints per program the "
                                  "memory per chip, whether it fits the chip's HBM with 10%% headroom, compile "
                                  "seconds, model FLOPs and a lower-bound time at the chip's published peak "
                                  "(an estimate). Exit code 1 when a program does not fit. Needs libtpu: "
                                  "pip install -e \".[tpu]\".")
  pl.add_argument("--target", required=True, help="TPU topology, e.g. v5e:16x16, v5e:8x8, v6e:16x16, v5p:8x8x4, v4:4x4x4")
  pl.add_argument("--config", default=None, help="config name in configs/ or a .py path; default: default")
  pl.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                  help="override a config field (model.preset, model.hf_checkpoint, mesh.*, rl.*; repeatable)")
  pl.add_argument("--prompt-len", type=int, default=512, help="prompt tokens per row (default: %(default)s)")
  pl.add_argument("--new-tokens", type=int, default=None, help="sampled tokens per row (default: rl.max_new_tokens)")
  pl.add_argument("--programs", default="train,forward,rollout",
                  help="comma list of train, forward, rollout (default: %(default)s)")
  pl.add_argument("--max-rollout", action="store_true",
                  help="also find the largest rollout batch that fits (bisection over compiles) and the KV-cache bound")


def _cmd_plan(args) -> int:
  from rljax.parallel import chip_of, topology_mesh  # pylint: disable=import-outside-toplevel
  # pylint: disable-next=import-outside-toplevel
  from rljax.plan import PROGRAMS, format_report, max_rollout, plan, plan_spec
  from rljax.train import apply_overrides  # pylint: disable=import-outside-toplevel
  chip_of(args.target)  # a typo in the target or the programs is refused before anything is built
  programs = [p.strip() for p in args.programs.split(",") if p.strip()]
  if not programs or set(programs) - set(PROGRAMS):
    raise ValueError(f"--programs must be a comma list of {', '.join(PROGRAMS)}, got {args.programs!r}")
  cfg, _ = load_config_and_recipe(args.config)
  cfg = apply_overrides(cfg, list(args.overrides))
  mesh = topology_mesh(args.target, cfg.mesh)
  spec = plan_spec(cfg, prompt_len=args.prompt_len, new_tokens=args.new_tokens)
  say = lambda msg: print(f"[rljax] {msg}", file=sys.stderr, flush=True)  # noqa: E731
  report = plan(spec, mesh, args.target, programs=programs, log=say)
  if args.max_rollout:
    import dataclasses  # pylint: disable=import-outside-toplevel
    # the plan's own rollout (cfg.rl.num_prompts) is one point of the search: not compiled twice
    known = {spec.rl.num_prompts: float("inf") if p.refused else p.total for p in report.programs
             if p.name == "rollout"}
    report = dataclasses.replace(report, rollout_search=max_rollout(spec, mesh, args.target, log=say, known=known))
  print(format_report(report))
  return 1 if report.failing() else 0


def _cmd_arena(args) -> int:
  from rljax import arena  # pylint: disable=import-outside-toplevel
  if args.list:
    for e in arena.ENTRIES.values():
      changed = [o for o in e.overrides if o not in arena.recipe_overrides()]  # what differs from plain GRPO
      print(f"{e.name:16s} {e.about}\n{'':16s} {'; '.join(changed) or '(the default recipe)'}")
    print("\nexperiments:")
    for name, members in arena.EXPERIMENTS.items():
      print(f"  {name:14s} {', '.join(members)}")
    return 0
  split = lambda text: [x.strip() for x in text.split(",") if x.strip()]
  try:
    seeds = [int(x) for x in split(args.seeds)]
  except ValueError:
    raise ValueError(f"--seeds must be comma-separated integers, got {args.seeds!r}") from None
  try:
    rows = arena.run_arena(args.config, recipes=split(args.recipes or ""), experiment=args.experiment, seeds=seeds,
                           jobs=args.jobs, out_dir=args.out, overrides=args.overrides)
  except (KeyboardInterrupt, arena.ArenaStopped):
    print(f"[rljax] arena stopped: the running runs saved a checkpoint; the partial table is in {args.out}/arena.md; "
          "run the same command again to resume", file=sys.stderr)
    return 130
  print(arena.markdown_table(rows, arena.table_pass_k(rows)))
  print(f"[rljax] arena: {args.out}/arena.md, arena.csv, curves.png")
  return 0 if all(r["status"] == "ok" for r in rows) else 1


def _out_dir_of(args) -> Optional[str]:
  """The run directory the command line names (``--out-dir``, else the last ``--set out_dir=``)."""
  if args.out_dir:
    return args.out_dir
  named = [o.split("=", 1)[1].strip() for o in args.overrides if o.split("=", 1)[0].strip() == "out_dir"]
  return named[-1] if named else None


def _resume_config(args):
  """``(cfg, recipe)`` of ``--resume``: the run's own ``config.json`` with the ``--set`` changes; ``--config``
  gives only its ``get_recipe()`` (a recipe with Python stages)."""
  from rljax.train import apply_overrides, default_config  # pylint: disable=import-outside-toplevel
  from rljax.train import saved_config  # pylint: disable=import-outside-toplevel
  out_dir = _out_dir_of(args) or default_config().out_dir
  cfg = saved_config(out_dir)
  recipe = None
  if args.config is not None:
    _, recipe = load_config_and_recipe(args.config)
    if recipe is None:
      print(f"[rljax] --resume continues {out_dir} with its own config.json; --config {args.config} is not "
            "used (change fields with --set)", file=sys.stderr)
  cfg = apply_overrides(cfg, [o for o in args.overrides if o.split("=", 1)[0].strip() != "out_dir"])
  return cfg, recipe


def _cmd_train(args) -> int:
  if not args.print_config:
    from rljax.parallel import maybe_initialize_distributed  # pylint: disable=import-outside-toplevel
    # Multi-host (TPU pod slice, SLURM, or RLJAX_COORDINATOR/NUM_PROCESSES/PROCESS_ID): join the distributed
    # runtime before any device is used (building a recipe may already run JAX); a no-op for one process.
    maybe_initialize_distributed()
  from rljax.train import apply_overrides, config_to_dict  # pylint: disable=import-outside-toplevel
  from rljax.train import Preempted, from_cli, train  # pylint: disable=import-outside-toplevel
  from rljax.train import with_checkpoint_architecture  # pylint: disable=import-outside-toplevel
  if args.resume:
    cfg, recipe = _resume_config(args)
  else:
    cfg, recipe = load_config_and_recipe(args.config)
    cfg = apply_overrides(cfg, list(args.overrides) + ([f"out_dir={args.out_dir}"] if args.out_dir else []))
  if recipe is not None and any(o.split("=", 1)[0].strip() in _recipe_keys() for o in args.overrides):
    raise ValueError(f"--config {args.config}: its get_recipe() gives the recipe, so --set of a recipe field "
                     "(rl.advantage, rl.loss, ...) would be ignored; change the recipe in the file")
  # model.hidden_size=64 (--set or the config file) on a checkpoint: refused, even at the default; --print-config
  # shows the checkpoint's shape, as config.json records it
  cfg = with_checkpoint_architecture(cfg)
  if args.print_config:
    print(json.dumps(config_to_dict(cfg), indent=2))
    return 0
  try:
    with from_cli():  # refusals name --resume / --overwrite / --out-dir, not train()'s keyword arguments
      train(cfg, resume=args.resume, overwrite=args.overwrite, recipe=recipe)
  except Preempted as e:  # SIGTERM (143) or Ctrl-C (130): stopped after a step and saved (the message says)
    print(f"[rljax] {e}{_resume_hint(cfg, args, recipe)}", file=sys.stderr)
    return e.exit_code
  except KeyboardInterrupt as e:  # a second Ctrl-C: stopped at once
    print(f"[rljax] {e or 'Ctrl-C: stopped at once'}{_resume_hint(cfg, args, recipe)}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    # no interpreter shutdown: a save cut short has orbax threads running, which would print its tracebacks
    os._exit(130)  # pylint: disable=protected-access
  return 0


def _resume_hint(cfg, args, recipe) -> str:
  """``"; resume with: rljax train --resume --out-dir DIR"`` when ``cfg.out_dir`` holds a run, else ``""``
  (``--config`` too when its ``get_recipe()`` gives the recipe: ``--resume`` needs it)."""
  if not os.path.exists(os.path.join(cfg.out_dir, "config.json")):
    return ""
  config = f" --config {shlex.quote(args.config)}" if recipe is not None else ""
  return f"; resume with: rljax train --resume --out-dir {shlex.quote(cfg.out_dir)}{config}"


def _cmd_eval(args) -> int:
  import jax  # pylint: disable=import-outside-toplevel
  from rljax.train import evaluate, load_run  # pylint: disable=import-outside-toplevel
  exp, graphdef, state, info = load_run(args.run_dir, stage=args.stage, step=args.step, weights_only=True)
  run_eval = exp.cfg.eval  # the defaults: the run's own evaluation (its figures, its compiled programs)
  n = run_eval.num_samples if args.num_samples is None else args.num_samples
  ks = args.k if args.k is not None else ([k for k in run_eval.pass_k if k <= n] or [n])
  if n < 1 or any(not 1 <= k <= n for k in ks):
    raise ValueError(f"--k values must be in [1, --num-samples={n}], got {ks}")
  problems = exp.test_problems[:args.num_problems or run_eval.num_problems]
  res = evaluate(exp.sample_fn(graphdef, state.params, state.model_state), exp.task, exp.codec, problems,
                 batch_size=run_eval.batch_size, key=jax.random.PRNGKey(args.seed), num_samples=n, pass_k=ks,
                 temperature=run_eval.temperature if args.temperature is None else args.temperature)
  res = {"run_dir": args.run_dir, "stage": info["stage"], "step": info["step"], "num_problems": len(problems),
         **res}
  print(json.dumps(res, indent=2))
  return 0


def _cmd_sample(args) -> int:
  import jax  # pylint: disable=import-outside-toplevel
  from rljax.envs import Problem  # pylint: disable=import-outside-toplevel
  from rljax.train import load_run  # pylint: disable=import-outside-toplevel
  if args.n < 1:
    raise ValueError(f"--n must be >= 1, got {args.n}")
  if not args.greedy and args.temperature <= 0:
    raise ValueError(f"--temperature must be > 0, got {args.temperature:g}; for greedy decoding use --greedy")
  exp, graphdef, state, info = load_run(args.run_dir, stage=args.stage, weights_only=True)
  unknown = getattr(exp.tokenizer, "unknown_characters", None)
  for p in args.prompts if unknown else ():
    missing = unknown(p)
    if missing:
      print(f"[rljax] warning: prompt {p!r} has characters outside the model's vocabulary "
            f"({', '.join(map(repr, missing))}); they become <unk>", file=sys.stderr)
  fn = exp.sample_fn(graphdef, state.params, state.model_state)
  problems = [Problem(prompt=p, answer="", meta={}) for p in args.prompts]
  encode = (lambda p: exp.codec.text_ids(p.prompt)) if args.raw else exp.codec.prompt_ids
  rollout = fn([encode(p) for p in problems], n=args.n, greedy=args.greedy,
               temperature=args.temperature, key=jax.random.PRNGKey(args.seed))
  texts = exp.codec.decode_completions(rollout.tokens, rollout.completion_mask)
  template = "raw prompts" if args.raw or exp.codec.template is None else exp.codec.template_name
  print(f"# {args.run_dir} ({info['stage']} step {info['step']}; {template})")
  for i, p in enumerate(args.prompts):
    for j in range(args.n):
      print(f"{p}\t{texts[i * args.n + j]}")
  return 0


def _cmd_export(args) -> int:
  from rljax.train import export_run  # pylint: disable=import-outside-toplevel
  export_run(args.run_dir, args.out, stage=args.stage, step=args.step, dtype=args.dtype)
  return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Entry point of the ``rljax`` console script."""
  args = _parser().parse_args(argv)
  if args.command is None:
    _parser().print_help()
    return 2
  if args.command == "plan":  # compiles for TPU devices described by libtpu; runs nothing, on no accelerator
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
  try:
    # before JAX starts: XLA:CPU's freed step buffers stay in the process (rljax/host_allocator.py)
    configure_host_allocator()
    if args.command in ("train", "eval", "sample", "export"):  # a second run of the same shapes loads its programs
      from rljax.train import enable_compile_cache  # pylint: disable=import-outside-toplevel
      enable_compile_cache(os.environ.get("RLJAX_COMPILE_CACHE"))
    with _one_line_warnings():
      return {"train": _cmd_train, "eval": _cmd_eval, "sample": _cmd_sample, "export": _cmd_export,
              "arena": _cmd_arena, "plan": _cmd_plan}[args.command](args)
  except (ValueError, FileNotFoundError) as e:  # config / checkpoint / input errors: one clear line, no traceback
    from rljax.train import user_field_names  # pylint: disable=import-outside-toplevel
    print(f"rljax {args.command}: error: {user_field_names(str(e))}", file=sys.stderr)  # rl.loss, not RLConfig.loss
    return 2
  except KeyboardInterrupt:  # Ctrl-C outside a run's own handling (train() stops cleanly, _signals.py)
    print(f"[rljax] Ctrl-C: stopped{' before the run started (nothing written)' if args.command == 'train' else ''}",
          file=sys.stderr)
    return 130


@contextlib.contextmanager
def _one_line_warnings():
  """rljax's own warnings (unreadable checkpoints, ...) print as one ``[rljax] warning:`` line each."""
  from rljax.train import CheckpointWarning  # pylint: disable=import-outside-toplevel
  with warnings.catch_warnings():
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
      if issubclass(category, CheckpointWarning):
        print(f"[rljax] warning: {message}", file=sys.stderr)
      else:
        shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    yield


if __name__ == "__main__":
  sys.exit(main())
