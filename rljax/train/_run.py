"""The main job: SFT warm-start, then RL (GRPO family), with evaluation, checkpoints and metrics.

``train(cfg)`` runs a whole experiment described by a ``RunConfig``:

1. task, tokenizer (SentencePiece, char level for the built-in tasks), model;
2. SFT on task demonstrations with the NLL objective (same jitted train step);
3. held-out evaluation of the SFT checkpoint (greedy accuracy, temperature-1
   success rate, pass@k);
4. RL: prompts from a grain loader -> jitted sampler -> rewards on the host
   (``rljax.rewards.safe_reward``) -> optional overlong shaping and DAPO
   dynamic sampling (bounded refills) -> group advantages -> proximal (and
   reference) log-probs recomputed -> ``updates_per_batch`` epochs of
   ``num_minibatches`` jitted updates;
5. evaluation after RL; ``metrics.jsonl``, TensorBoard events, ``metrics.png``,
   ``summary.json`` and orbax checkpoints under ``out_dir``.

Resume (``resume=True``) restores the latest readable checkpoint of the
latest stage (parameters, optimizer state, hparams/controller state, data
iterator state, step); PRNG keys are ``fold_in(seed_key, step)``, so a resumed
run reproduces an uninterrupted one bit for bit. SIGTERM saves a checkpoint
after the current step and raises ``Preempted``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import signal
import time
import warnings
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from rljax.train._ahead import RolloutAhead
from rljax.train._checkpoint import Checkpointer, CheckpointError
from rljax.train._codec import Codec, sft_batch
from rljax.train._config import RunConfig, config_to_dict
from rljax.train._eval import evaluate
from rljax.train._metrics import MetricsWriter, plot_metrics
from rljax.train._optim import make_optimizer
from rljax.train._controllers import make_controller
from rljax.train._recipes import build_objective, initial_hparams
from rljax.train._step import init_train_state, make_train_step, nll_loss, objective_loss
from rljax.types import TrainBatch
from rljax import parallel as par

__all__ = ["train", "Preempted", "Experiment", "build_experiment", "load_run", "check_group_batch"]


class Preempted(RuntimeError):
  """Raised after SIGTERM once a checkpoint has been saved."""


def _log(cfg, *msg):
  if cfg.progress is not None and jax.process_index() == 0:
    print(*msg, flush=True)


# ----------------------------------------------------------------------------- mesh / multi-host


def run_mesh(cfg: RunConfig):
  """The run's device mesh from ``cfg.mesh`` (``rljax.parallel.make_mesh``).

  A mesh with fixed axis sizes whose product is smaller than the number of
  devices uses the first devices (one process only: a multi-process mesh
  must cover every device). The default ``MeshConfig(1, 1, 1, 1)`` is one device.
  """
  devices = jax.devices()
  sizes = cfg.mesh.sizes
  n = int(np.prod(sizes))
  if -1 not in sizes and n < len(devices):
    if jax.process_count() > 1:
      raise ValueError(f"mesh {cfg.mesh} uses {n} of the {len(devices)} devices of {jax.process_count()} "
                       "processes; a multi-process mesh must cover every device (set one mesh axis to -1)")
    devices = devices[:n]
  return par.make_mesh(cfg.mesh, devices)


class _Sharded:
  """A train state placed on the mesh and its sharded, jitted step (``rljax.parallel``)."""

  def __init__(self, graphdef, state, loss, opt, mesh, **step_kwargs):
    self.mesh = mesh
    self.shardings = par.train_state_shardings(state, mesh)
    self.state = par.place_global(state, self.shardings)
    self.step = par.shard_train_step(
        make_train_step(graphdef, par.fsdp_loss_fn(loss, mesh), opt, jit=False, **step_kwargs),
        self.shardings, mesh)


class _NoWriter:
  """Stands in for ``MetricsWriter`` on processes other than 0 (rows computed, nothing written)."""

  def truncate(self, stage, step):
    pass

  def write(self, stage, step, metrics):
    return {"stage": stage, "step": int(step), **metrics}

  def close(self):
    pass


# ----------------------------------------------------------------------------- building blocks


@dataclasses.dataclass
class Experiment:
  """Everything ``train`` builds from a config (also used by ``rljax eval/sample``)."""
  cfg: RunConfig
  task: object
  tokenizer: object
  codec: Codec
  model: nnx.Module
  sampler_config: object
  train_problems: list
  test_problems: list
  seq_len: int

  def sample_fn(self, graphdef=None, params=None, model_state=None):
    """``fn(prompt_ids, *, n, greedy, temperature, key, rows=None) -> Rollout`` for given parameters.

    The rollout comes back as NumPy arrays: all rows (gathered from every
    process in a multi-host run), or only rows ``rows = (lo, hi)``.
    """
    from rljax.sampling import generate  # pylint: disable=import-outside-toplevel
    model = self.model if graphdef is None else nnx.merge(graphdef, params, model_state)
    eos = self.codec.eos_id
    cfg = self.sampler_config

    def fn(prompts, *, n, greedy, temperature, key, rows=None):
      rollout = generate(model, prompts, config=cfg, key=key, n=n, greedy=greedy,
                         temperature=1.0 if greedy else temperature, stop_tokens=[eos])
      return par.to_host(rollout) if rows is None else par.host_rows(rollout, *rows)
    return fn


def build_task(cfg: RunConfig):
  from rljax.envs import get_task  # pylint: disable=import-outside-toplevel
  t = cfg.task
  if t.name == "arithmetic":
    return get_task("arithmetic", digits=t.digits, sloppy_carry_prob=t.sloppy_carry_prob,
                    reverse_operands=t.reverse_operands)
  kwargs = {}
  if t.tfds_dir is not None:
    kwargs["data_dir"] = t.tfds_dir
  if t.chat_template is not None:
    kwargs["chat_template"] = t.chat_template
  return get_task(t.name, **kwargs)


def build_experiment(cfg: RunConfig, *, model_seed: Optional[int] = None) -> Experiment:
  """Task, tokenizer, problems, a freshly initialised model and the sampler config."""
  from rljax.data import load_tokenizer, train_sentencepiece  # pylint: disable=import-outside-toplevel
  from rljax.models import fan_in_init, ModelConfig, Transformer  # pylint: disable=import-outside-toplevel
  from rljax.sampling import SamplerConfig  # pylint: disable=import-outside-toplevel

  task = build_task(cfg)
  if cfg.model.hf_checkpoint:
    tokenizer = load_tokenizer(cfg.model.hf_checkpoint)
  else:
    # deterministic: every process trains the same tokenizer; process 0 writes it
    tokenizer = train_sentencepiece(task.corpus(), os.path.join(cfg.out_dir, "tokenizer")
                                    if jax.process_index() == 0 else None, model_type="char")
  codec = Codec(tokenizer)
  train_problems = task.problems("train", cfg.task.num_train, cfg.seed)
  test_problems = task.problems("test", cfg.task.num_test, 0)  # fixed held-out set across seeds
  m = cfg.model
  if m.hf_checkpoint:
    from rljax.models import from_pretrained  # pylint: disable=import-outside-toplevel
    model = from_pretrained(m.hf_checkpoint, dtype=m.dtype)
  else:
    mcfg = ModelConfig(vocab_size=int(tokenizer.vocab_size), hidden_size=m.hidden_size, num_layers=m.num_layers,
                       num_heads=m.num_heads, num_kv_heads=m.num_kv_heads, head_dim=m.hidden_size // m.num_heads,
                       intermediate_size=m.intermediate_size, max_position_embeddings=m.max_seq_len,
                       param_dtype=m.dtype, compute_dtype=m.dtype, bos_token_id=codec.bos_id,
                       eos_token_id=codec.eos_id, pad_token_id=codec.pad_id)
    model = Transformer(mcfg, rngs=nnx.Rngs(cfg.seed if model_seed is None else model_seed))
    if m.init == "fan_in":
      fan_in_init(model)
  longest = max(len(codec.prompt_ids(p)) for p in train_problems[:2000] + test_problems)
  bucket = int(-(-longest // 4) * 4)
  sampler_config = SamplerConfig(max_new_tokens=cfg.rl.max_new_tokens, prompt_buckets=(bucket,),
                                 pad_id=codec.pad_id, return_entropy=True, return_routing=False,
                                 concurrent_chunks=cfg.rl.concurrent_rollouts)
  return Experiment(cfg=cfg, task=task, tokenizer=tokenizer, codec=codec, model=model,
                    sampler_config=sampler_config, train_problems=train_problems, test_problems=test_problems,
                    seq_len=bucket + cfg.rl.max_new_tokens)


@contextlib.contextmanager
def _sigterm_flag():
  flag = {"set": False}
  previous = None

  def handler(signum, frame):  # pylint: disable=unused-argument
    flag["set"] = True

  try:
    previous = signal.signal(signal.SIGTERM, handler)
  except ValueError:  # not in the main thread
    previous = None
  try:
    yield flag
  finally:
    if previous is not None:
      signal.signal(signal.SIGTERM, previous)


def _scalars(metrics) -> dict:
  return {k: float(v) for k, v in par.to_host(metrics).items()}


# ----------------------------------------------------------------------------- rewards / advantages


def _rewards(exp: Experiment, reward_fn, completions, problems, lenient):
  from rljax.rewards import safe_reward  # pylint: disable=import-outside-toplevel
  fn = reward_fn if reward_fn is not None else exp.task.score
  name = getattr(fn, "__name__", None) or (f"{type(exp.task).__name__}.score" if reward_fn is None else repr(fn))
  wrapped = safe_reward(fn, lenient=lenient, name=name)
  rewards, info = wrapped(completions, problems)
  return np.asarray(rewards, np.float32), int(np.sum(info.get("errors", 0))) if isinstance(info, dict) else 0


def check_group_batch(batch_size: int, group_size: int) -> None:
  """Raises ``ValueError`` unless a rollout batch splits into whole groups."""
  if group_size < 1 or batch_size % group_size:
    raise ValueError(f"rollout batch of {batch_size} sequences is not divisible by group_size={group_size}")


def _advantages(rl, rewards, group_id):
  from rljax import advantages as adv  # pylint: disable=import-outside-toplevel
  rewards = jnp.asarray(rewards)
  gid = jnp.asarray(group_id)
  if rl.advantage == "grpo":
    a, _ = adv.grpo(rewards, gid, eps=rl.adv_eps)
  elif rl.advantage == "dr_grpo":
    a, _ = adv.dr_grpo(rewards, gid)
  elif rl.advantage == "rloo":
    a, _ = adv.rloo(rewards, gid)
  else:
    raise ValueError(f"unknown advantage {rl.advantage!r}")
  return np.asarray(a, np.float32)


# ----------------------------------------------------------------------------- stages


def _run_sft(exp: Experiment, cfg: RunConfig, writer, resume: bool, flag, mesh):
  opt, sched = make_optimizer(cfg.sft.optim, max(cfg.sft.steps, 1))
  graphdef, state = init_train_state(exp.model, opt)
  sharded = _Sharded(graphdef, state, nll_loss(), opt, mesh, schedule=sched)
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
    _log(cfg, f"[rljax] resumed SFT from step {start}")
  if start >= cfg.sft.steps and meta.get("done"):
    ckpt.close()
    return graphdef, state, meta
  from tqdm.auto import tqdm  # pylint: disable=import-outside-toplevel
  bar = tqdm(total=cfg.sft.steps, initial=start, desc="SFT", disable=not cfg.progress or jax.process_index() != 0,
             leave=True)
  for s in range(start, cfg.sft.steps):
    # the (cheap, deterministic) host batch; this process places only its rows [lo, hi)
    batch = sft_batch(exp.task, exp.codec, exp.train_problems, step=s, seed=cfg.seed,
                      batch_size=b, seq_len=exp.seq_len)
    batch = par.global_batch(jax.tree_util.tree_map(lambda x: x[lo:hi], batch), rows_sh, b)
    state, metrics = step_fn(state, batch)
    if (s + 1) % cfg.log_every == 0 or s + 1 == cfg.sft.steps:
      row = writer.write("sft", s + 1, _scalars(metrics))
      bar.set_postfix(loss=f"{row['loss']:.3f}")
    bar.update(1)
    last = s + 1 == cfg.sft.steps
    preempt = par.process_any(flag["set"])  # every process stops (and saves) at the same step
    if cfg.checkpoint.enabled and ((s + 1) % cfg.checkpoint.every == 0 or preempt or last):
      ckpt.save(s + 1, {"state": state}, {"stage": "sft", "step": s + 1, "done": last})
    if preempt:
      bar.close()
      ckpt.close()
      raise Preempted(f"SIGTERM: saved SFT checkpoint at step {s + 1}")
  bar.close()
  meta = {"stage": "sft", "step": cfg.sft.steps, "done": True}
  if cfg.checkpoint.enabled and cfg.sft.steps > 0:
    ckpt.save(cfg.sft.steps, {"state": state}, meta)
  ckpt.close()
  return graphdef, state, meta


def _evaluate(exp, cfg, graphdef, state, key, *, full=True):
  fn = exp.sample_fn(graphdef, state.params, state.model_state)
  e = cfg.eval
  return evaluate(fn, exp.task, exp.codec, exp.test_problems[:e.num_problems], batch_size=e.batch_size, key=key,
                  num_samples=e.num_samples if full else 0, pass_k=e.pass_k if full else (),
                  temperature=e.temperature)


def _proximal_fn(graphdef, temperature=1.0, out_shardings=None, shared_prefix_len=0, group_size=1):
  from rljax.models import policy_outputs  # pylint: disable=import-outside-toplevel

  @functools.partial(jax.jit, out_shardings=out_shardings)
  def fn(params, model_state, tokens):
    model = nnx.merge(graphdef, params, model_state)
    out = policy_outputs(model, tokens, temperature=temperature, shared_prefix_len=shared_prefix_len,
                         group_size=group_size)
    return out.logp, out.entropy

  return fn


def _shared_prompt_len(exp, rl) -> int:
  """Prompt columns shared by each group's rows (``rl.share_prompt_forward``), or 0.

  Rollout rows are ``prompt | completion | padding`` (left-aligned), a group's
  ``G`` rows consecutive: every group's rows agree on (at least) their first
  ``min(len(prompt))`` tokens over the training prompts, the static shared
  length (checked on every batch by :func:`_check_shared_prefix`).
  Row shuffling into mini-batches would split groups, so sharing needs
  ``num_minibatches == 1`` and micro-batches of whole groups.
  """
  if not rl.share_prompt_forward:
    return 0
  if rl.num_minibatches != 1 or (rl.batch_size // rl.num_microbatches) % rl.group_size:
    _log(exp.cfg, "[rljax] share_prompt_forward unused: needs num_minibatches=1 and micro-batches of whole groups")
    return 0
  shortest = min(len(exp.codec.prompt_ids(p)) for p in exp.train_problems)
  return max(0, min(shortest, exp.seq_len - 1))


def _check_shared_prefix(tokens: np.ndarray, prefix_len: int, group_size: int) -> None:
  """Raises unless every group of ``group_size`` rows agrees on its first ``prefix_len`` tokens."""
  if prefix_len:
    head = tokens[:, :prefix_len].reshape(-1, group_size, prefix_len)
    if not np.all(head == head[:, :1]):
      raise ValueError(f"rollout rows of a group differ in their first {prefix_len} tokens; "
                       "set rl.share_prompt_forward=false")


def _collect(exp, cfg, sample, loader, key, step, reward_fn, temperature=None, prompt_rows=None):
  """Samples one RL batch (with DAPO dynamic-sampling refills); returns host arrays + stats.

  Multi-host: ``loader`` yields this process's prompts ``[lo, hi)`` of each
  global batch (``prompt_rows = {process: (lo, hi)}``); the sampler runs on
  the global prompt batch (prompt ids gathered from every process) and this
  process keeps, scores and returns its own rows. Statistics are global.
  With dynamic sampling each process refills until it holds its share of
  groups with non-zero reward variance (all processes sample the same number
  of times).
  """
  rl = cfg.rl
  g = rl.group_size
  if prompt_rows is None:
    prompt_rows = {jax.process_index(): (0, rl.num_prompts)}
  lo, hi = prompt_rows[jax.process_index()]
  local_prompts = hi - lo
  kept, dropped = [], []
  stats = {"refills": 0, "reward_errors": 0, "zero_var_groups": 0, "sampled_groups": 0}
  all_rewards, all_correct = [], []
  for attempt in range(rl.max_refills + 1 if rl.dynamic_sampling else 1):
    problems = next(loader)
    if attempt:
      stats["refills"] += 1
    prompts = par.allgather_rows([exp.codec.prompt_ids(p) for p in problems], prompt_rows, rl.num_prompts)
    r = sample(prompts, n=g, greedy=False, temperature=rl.temperature if temperature is None else temperature,
               key=jax.random.fold_in(key, attempt), rows=(lo * g, hi * g))
    check_group_batch(r.tokens.shape[0], g)
    completions = exp.codec.decode_completions(r.tokens, r.completion_mask)
    expanded = [p for p in problems for _ in range(g)]
    rewards, errors = _rewards(exp, reward_fn, completions, expanded, cfg.task.lenient_rewards)
    stats["reward_errors"] += errors
    all_correct.append(np.asarray(exp.task.score(completions, expanded), np.float32) if reward_fn else rewards)
    lengths = np.asarray(r.completion_mask).sum(1)
    if rl.overlong_buffer > 0:
      from rljax.rewards import overlong_penalty  # pylint: disable=import-outside-toplevel
      pen, _ = overlong_penalty(jnp.asarray(lengths), max_len=rl.max_new_tokens, buffer_len=rl.overlong_buffer,
                                penalty_factor=rl.overlong_penalty)
      rewards = rewards + np.asarray(pen, np.float32)
    all_rewards.append(rewards)
    for p in range(len(problems)):
      rows = slice(p * g, (p + 1) * g)
      grp = (r, rows, rewards[rows])
      stats["sampled_groups"] += 1
      if np.std(rewards[rows]) > 0 or not rl.dynamic_sampling:
        kept.append(grp)
      else:
        stats["zero_var_groups"] += 1
        dropped.append(grp)
    if not par.process_any(len(kept) < local_prompts):
      break
  if not rl.dynamic_sampling:
    stats["zero_var_groups"] = sum(np.std(k[2]) == 0 for k in kept)
  groups = kept[:local_prompts]
  num_real = len(groups)
  groups = groups + dropped[:local_prompts - num_real]  # pad to a fixed shape; masked out below
  fields = ("tokens", "completion_mask", "logp_behavior")
  out = {f: np.concatenate([np.asarray(getattr(r, f))[rows] for r, rows, _ in groups], 0) for f in fields}
  ent = [np.asarray(r.entropy_behavior)[rows] for r, rows, _ in groups if r.entropy_behavior is not None]
  out["rewards"] = np.concatenate([rw for _, _, rw in groups], 0).astype(np.float32)
  out["group_id"] = np.repeat(np.arange(lo, hi, dtype=np.int32), g)
  out["valid"] = np.repeat(np.arange(local_prompts) < num_real, g)
  cm = out["completion_mask"].astype(bool)
  rewards_seen = np.concatenate(all_rewards)
  correct = np.concatenate(all_correct)
  e = np.concatenate(ent, 0) if ent else np.zeros(cm.shape, np.float32)
  # global statistics: sums over every process's rows (no collective with one process)
  sums = par.process_sum({
      "reward": float(rewards_seen.astype(np.float64).sum()), "n_reward": rewards_seen.size,
      "correct": float(correct.astype(np.float64).sum()), "n_correct": correct.size,
      "tokens": float(cm.sum()), "rows": cm.shape[0], "kept_groups": num_real,
      "entropy": float((e * cm).sum()), "reward_errors": stats["reward_errors"],
      "zero_var_groups": stats["zero_var_groups"], "sampled_groups": stats["sampled_groups"]})
  stats.update({k: int(sums[k]) for k in ("reward_errors", "zero_var_groups", "sampled_groups")})
  stats.update({
      "reward_mean": sums["reward"] / sums["n_reward"],
      "accuracy": sums["correct"] / sums["n_correct"],
      "completion_len": sums["tokens"] / sums["rows"],
      "kept_groups": float(sums["kept_groups"]),
  })
  if ent:
    stats["entropy"] = sums["entropy"] / max(sums["tokens"], 1)
  return out, stats


def _run_rl(exp: Experiment, cfg: RunConfig, sft_state, graphdef, writer, resume, flag, mesh, objective_fn,
            reward_fn, evals):
  rl = cfg.rl
  total_updates = max(rl.steps * rl.updates_per_batch * rl.num_minibatches, 1)
  opt, sched = make_optimizer(rl.optim, total_updates)
  model = nnx.merge(graphdef, sft_state.params, sft_state.model_state)
  graphdef, state = init_train_state(model, opt, initial_hparams(rl))
  builder = objective_fn if objective_fn is not None else build_objective(rl)
  prefix = _shared_prompt_len(exp, rl)
  sharded = _Sharded(graphdef, state, objective_loss(builder, temperature=1.0, shared_prefix_len=prefix,
                                                     group_size=rl.group_size), opt, mesh,
                     num_microbatches=rl.num_microbatches, schedule=sched)
  state, step_fn = sharded.state, sharded.step
  controller = make_controller(rl)
  ctl_state = controller.init()
  need_ref = rl.kl_beta > 0
  ref_params = jax.tree_util.tree_map(jnp.copy, state.params) if need_ref else {}
  # rows of the global rollout batch this process samples, scores and feeds (whole groups)
  rows_sh = par.row_sharding(mesh, rl.batch_size)
  row_ranges = par.all_process_rows(rows_sh, rl.batch_size)
  for p, (a, b) in row_ranges.items():
    if a % rl.group_size or b % rl.group_size:
      raise ValueError(f"process {p} holds rollout rows [{a}, {b}), which split groups of "
                       f"rl.group_size={rl.group_size}; change mesh or rl.num_prompts")
  prompt_rows = {p: (a // rl.group_size, b // rl.group_size) for p, (a, b) in row_ranges.items()}
  records = [{"prompt": p.prompt, "answer": p.answer, "meta": dict(p.meta)} for p in exp.train_problems]
  loader = par.process_batches(records, global_batch_size=rl.num_prompts, rows=prompt_rows[jax.process_index()],
                               seed=cfg.seed)
  ckpt = Checkpointer(os.path.join(cfg.out_dir, "checkpoints", "rl"), max_to_keep=cfg.checkpoint.max_to_keep)
  start = 0
  if resume and ckpt.exists():
    tree, meta, start = ckpt.restore({"state": state, "ref": ref_params, "controller": ctl_state})
    state, ref_params, ctl_state = tree["state"], tree["ref"], tree["controller"]
    loader.set_state(meta["data"])
    evals[:] = meta.get("evals", evals)
    writer.truncate("rl", start)
    _log(cfg, f"[rljax] resumed RL from step {start}")
  prox = _proximal_fn(graphdef, out_shardings=rows_sh, shared_prefix_len=prefix, group_size=rl.group_size)
  base_key = jax.random.PRNGKey(cfg.seed)
  from tqdm.auto import tqdm  # pylint: disable=import-outside-toplevel
  bar = tqdm(total=rl.steps, initial=start, desc="RL", disable=not cfg.progress or jax.process_index() != 0,
             leave=True)
  mb = rl.batch_size // rl.num_minibatches
  take_rows = jax.jit(lambda tree, idx: jax.tree_util.tree_map(lambda x: x[idx], tree),
                      out_shardings=par.row_sharding(mesh, mb) if rl.num_minibatches > 1 else None)
  last_eval = evals[-1]["greedy_accuracy"] if evals else float("nan")
  s = start

  def collect(params, model_state, step, temperature):
    sample = exp.sample_fn(graphdef, params, model_state)
    return _collect(exp, cfg, sample, loader, jax.random.fold_in(base_key, step), step, reward_fn, temperature,
                    prompt_rows)

  ahead = RolloutAhead() if rl.rollout_ahead else None
  try:
    for s in range(start, rl.steps):
      t0 = time.perf_counter()
      lag = 0
      if ahead is not None and ahead.pending:
        data, stats = ahead.result()  # sampled from the parameters before step s - 1's updates
        lag = 1
      else:
        data, stats = collect(state.params, state.model_state, s, controller.temperature(ctl_state))
      data_state = loader.get_state()  # batches consumed through step s (before any look-ahead)
      if ahead is not None and s + 1 < rl.steps:
        ahead.submit(collect, *RolloutAhead.snapshot((state.params, state.model_state)), s + 1,
                     controller.temperature(ctl_state))
      t1 = time.perf_counter()
      _check_shared_prefix(data["tokens"], prefix, rl.group_size)
      adv = _advantages(rl, data["rewards"], data["group_id"]) * data["valid"]
      loss_mask = data["completion_mask"].astype(bool) & data["valid"][:, None]
      t_shape = data["tokens"].shape
      # this process's rows -> global arrays sharded over the batch mesh axes
      host = dict(tokens=data["tokens"], loss_mask=loss_mask,
                  advantages=(np.broadcast_to(adv[:, None], t_shape) * loss_mask).astype(np.float32),
                  group_id=data["group_id"], rewards=data["rewards"], logp_behavior=data["logp_behavior"])
      g_batch = par.global_batch(host, rows_sh, rl.batch_size)
      tokens = g_batch["tokens"]
      logp_old, _ = prox(state.params, state.model_state, tokens)
      logp_ref = prox(ref_params, state.model_state, tokens)[0] if need_ref else None
      batch = TrainBatch(**g_batch, logp_old=logp_old, logp_ref=logp_ref)
      update_metrics = []
      perm_rng = np.random.default_rng([cfg.seed, 11, s])
      for _ in range(rl.updates_per_batch):
        order = perm_rng.permutation(rl.batch_size) if rl.num_minibatches > 1 else None
        for j in range(rl.num_minibatches):
          if order is None:
            mbatch = batch
          else:
            mbatch = take_rows(batch, np.asarray(order[j * mb:(j + 1) * mb]))
          state, m = step_fn(state, mbatch)
          update_metrics.append(m)
      t2 = time.perf_counter()
      um = _scalars(jax.tree_util.tree_map(lambda *xs: jnp.mean(jnp.stack(xs)), *update_metrics))
      row = {**um, **{f"rollout/{k}": v for k, v in stats.items()},
             "time/sample_s": t1 - t0, "time/update_s": t2 - t1}
      if ahead is not None:
        row["rollout/lag"] = float(lag)
      row["rollout/reward_mean"] = stats["reward_mean"]
      state, ctl_state, ctl_metrics = controller.step(state, ctl_state, batch=batch, rollout_stats=stats,
                                                      update_metrics=um,
                                                      policy_logp=lambda st: prox(st.params, st.model_state, tokens)[0])
      row.update(ctl_metrics)
      done = s + 1 == rl.steps
      if (cfg.eval.every and (s + 1) % cfg.eval.every == 0) or done:
        ev = _evaluate(exp, cfg, graphdef, state, jax.random.PRNGKey(10_000 + s), full=False)
        last_eval = ev["greedy_accuracy"]
        evals.append({"step": s + 1, **ev})
        row["eval/greedy_accuracy"] = last_eval
      if (s + 1) % cfg.log_every == 0 or "eval/greedy_accuracy" in row:
        writer.write("rl", s + 1, row)
      bar.set_postfix(reward=f"{stats['reward_mean']:.2f}", acc=f"{last_eval:.2f}")
      bar.update(1)
      stop_early = rl.target_accuracy is not None and "eval/greedy_accuracy" in row and last_eval >= rl.target_accuracy
      preempt = par.process_any(flag["set"])  # every process stops (and saves) at the same step
      if cfg.checkpoint.enabled and ((s + 1) % cfg.checkpoint.every == 0 or preempt or done or stop_early):
        ckpt.save(s + 1, {"state": state, "ref": ref_params, "controller": ctl_state},
                  {"stage": "rl", "step": s + 1, "data": data_state, "evals": evals, "done": done or stop_early})
      if preempt:
        bar.close()
        ckpt.close()
        raise Preempted(f"SIGTERM: saved RL checkpoint at step {s + 1}")
      if stop_early:
        _log(cfg, f"[rljax] reached target accuracy {rl.target_accuracy:.2f} at RL step {s + 1}")
        break
  finally:
    if ahead is not None:
      ahead.close()
  bar.close()
  ckpt.close()
  return graphdef, state


def train(cfg: RunConfig, *, resume: bool = False, objective_fn: Optional[Callable] = None,
          reward_fn: Optional[Callable] = None) -> dict:
  """Runs SFT then RL as configured; returns the summary dict (also written to ``summary.json``).

  Args:
    cfg: the run config.
    resume: continue from the latest checkpoints in ``cfg.out_dir``.
    objective_fn: ``hparams -> rljax.objectives.Objective`` (``rl.objective="custom"``
      or to override the recipe).
    reward_fn: ``fn(completions, problems) -> [B]`` rewards (default: the
      task's verifier ``task.score``).
  """
  if cfg.rl.objective == "custom" and objective_fn is None:
    raise ValueError("RLConfig.objective='custom' needs objective_fn=...")
  t_start = time.perf_counter()
  os.makedirs(cfg.out_dir, exist_ok=True)
  if resume and not os.path.isdir(os.path.join(cfg.out_dir, "checkpoints")):
    raise CheckpointError(f"--resume: no checkpoint directory under {cfg.out_dir!r}")
  if cfg.rl.rollout_ahead and jax.process_count() > 1:
    raise ValueError("RLConfig.rollout_ahead=true runs on one process only (its background sampling would "
                     f"interleave collectives with the update's); this run has {jax.process_count()} processes")
  main = jax.process_index() == 0  # host-side files and console output: process 0 only
  if main:
    with open(os.path.join(cfg.out_dir, "config.json"), "w", encoding="utf-8") as f:
      json.dump(config_to_dict(cfg), f, indent=2)
  mesh = run_mesh(cfg)
  exp = build_experiment(cfg)
  writer = MetricsWriter(cfg.out_dir, tensorboard=cfg.tensorboard, append=resume) if main else _NoWriter()
  summary = {"out_dir": cfg.out_dir, "seed": cfg.seed}
  n_params = sum(x.size for x in jax.tree_util.tree_leaves(nnx.state(exp.model, nnx.Param)))
  _log(cfg, f"[rljax] task={cfg.task.name} train={len(exp.train_problems)} test={len(exp.test_problems)} "
            f"vocab={exp.tokenizer.vocab_size} params={n_params:,} out_dir={cfg.out_dir}")
  evals: list = []
  try:
    with _sigterm_flag() as flag:
      graphdef, state, sft_meta = _run_sft(exp, cfg, writer, resume, flag, mesh)
      eval_path = os.path.join(cfg.out_dir, "sft_eval.json")
      if resume and os.path.exists(eval_path):
        with open(eval_path, encoding="utf-8") as f:
          sft_eval = json.load(f)
      else:
        sft_eval = _evaluate(exp, cfg, graphdef, state, jax.random.PRNGKey(999))
        if main:
          with open(eval_path, "w", encoding="utf-8") as f:
            json.dump(sft_eval, f)
        writer.write("sft", cfg.sft.steps, {f"eval/{k}": v for k, v in sft_eval.items()})
        writer.write("rl", 0, {"eval/greedy_accuracy": sft_eval["greedy_accuracy"]})
      summary["sft"] = sft_eval
      _log(cfg, "[rljax] after SFT: held-out greedy accuracy {:.1%}, temperature-{:g} success {:.1%}{}".format(
          sft_eval["greedy_accuracy"], cfg.eval.temperature, sft_eval.get("sample_accuracy", float("nan")),
          "".join(f", {k} {v:.1%}" for k, v in sft_eval.items() if k.startswith("pass@"))))
      evals.append({"step": 0, "greedy_accuracy": sft_eval["greedy_accuracy"]})
      if cfg.rl.steps > 0:
        graphdef, state = _run_rl(exp, cfg, state, graphdef, writer, resume, flag, mesh, objective_fn,
                                  reward_fn, evals)
      rl_eval = _evaluate(exp, cfg, graphdef, state, jax.random.PRNGKey(999))
  finally:
    writer.close()
  summary["rl"] = rl_eval
  summary["gain_points"] = 100.0 * (rl_eval["greedy_accuracy"] - sft_eval["greedy_accuracy"])
  summary["evals"] = evals
  summary["wall_s"] = time.perf_counter() - t_start
  _log(cfg, "[rljax] after RL:  held-out greedy accuracy {:.1%} ({:+.1f} points over SFT), temperature-{:g} "
            "success {:.1%}{}".format(rl_eval["greedy_accuracy"], summary["gain_points"], cfg.eval.temperature,
                                      rl_eval.get("sample_accuracy", float("nan")),
                                      "".join(f", {k} {v:.1%}" for k, v in rl_eval.items() if k.startswith("pass@"))))
  if cfg.plot:
    summary["plot"] = os.path.join(cfg.out_dir, "metrics.png")
    if main:
      plot_metrics(os.path.join(cfg.out_dir, "metrics.jsonl"), summary["plot"])
  if main:
    with open(os.path.join(cfg.out_dir, "summary.json"), "w", encoding="utf-8") as f:
      json.dump(summary, f, indent=2)
  _log(cfg, f"[rljax] done in {summary['wall_s']:.0f} s; metrics: {cfg.out_dir}/metrics.jsonl"
            f"{', plot: ' + summary['plot'] if cfg.plot else ''}")
  summary["params"] = state.params
  summary["graphdef"] = graphdef
  summary["model_state"] = state.model_state
  return summary


def load_run(run_dir: str, *, stage: Optional[str] = None, step: Optional[int] = None, mesh=None):
  """Rebuilds a finished/interrupted run from ``run_dir`` and restores a checkpoint.

  Args:
    run_dir: a directory written by ``train`` (has ``config.json``, ``checkpoints/``).
    stage: ``"rl"`` or ``"sft"``; default: RL if it has a checkpoint, else SFT.
    step: a specific step (default: latest readable).
    mesh: a ``rljax.parallel.MeshConfig`` to restore onto (default: the run's
      ``cfg.mesh``; if that does not fit the devices here, one device, with a
      warning). The state comes back sharded over it.

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
  for st in stages:
    if st not in ("rl", "sft"):
      raise ValueError(f"stage must be 'rl' or 'sft', got {st!r}")
    ckpt = Checkpointer(os.path.join(run_dir, "checkpoints", st))
    if ckpt.exists() or stage is not None:
      break
  else:
    raise CheckpointError(f"no checkpoints under {os.path.join(run_dir, 'checkpoints')!r}")
  exp = build_experiment(cfg)
  if st == "rl":
    opt, _ = make_optimizer(cfg.rl.optim, max(cfg.rl.steps * cfg.rl.updates_per_batch * cfg.rl.num_minibatches, 1))
    graphdef, state = init_train_state(exp.model, opt, initial_hparams(cfg.rl))
    ref = jax.tree_util.tree_map(jnp.copy, state.params) if cfg.rl.kl_beta > 0 else {}
    template = {"state": state, "ref": ref, "controller": make_controller(cfg.rl).init()}
  else:
    opt, _ = make_optimizer(cfg.sft.optim, max(cfg.sft.steps, 1))
    graphdef, state = init_train_state(exp.model, opt)
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
  template["state"] = par.place_global(template["state"], shardings)
  if template.get("ref"):
    template["ref"] = par.place_global(template["ref"], shardings.params)
  tree, meta, got = ckpt.restore(template, step=step)
  ckpt.close()
  return exp, graphdef, tree["state"], {"stage": st, "step": got, "meta": meta}
