"""One RL step of a recipe (``RLLoop``): its stages in the order of the data flow, its state and checkpoints.

The stage's loop over steps (which batch, when to evaluate, log and save) is ``rljax/train/_runners.py``'s
``run_rl``, with the cadence of ``rljax/train/_cadence.py``.

One step (``RLLoop.step``) walks the train side of ``rljax/train/_phases.py``'s ``PIPELINE``, after the
collector walked its collect side (prompts -> rollouts, scored -> a replay stage's extra rollouts -> filters)::

    observe_rewards      prompt filters observe every sampled row
    replay_rewards       a replay stage (phase "rewards"): stored rows in, fresh rows stored
    inputs               the forwards the recipe needs (proximal, reference, critic)
    advantages           forward-phase shaping -> multi-reward -> advantage (estimator + transforms)
    advantage_filters    advantage-phase filters
    replay_advantages    a replay stage of phase "advantages"
    train_batch          the global TrainBatch
    task_gradients       the per-task gradients, when a stage needs them
    observe_advantages   prompt filters observe the rows trained on
    update               updates_per_batch epochs x num_minibatches jitted steps (+ critic)
    controllers          hparams / temperature of the next step

The recipe is checked at start-up (``_startup.check_recipe``). A step whose batch has no valid row (a filter
emptied it) is not trained on: it is counted (``train/empty_steps``) and logged.
"""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from rljax import parallel as par
from rljax.stages import ControlInputs, produced_by
from rljax.train._advantage import initial_stage_states
from rljax.train._checkpoint import CheckpointError, CheckpointMismatch, Checkpointer
from rljax.train._controllers import LoopControllers
from rljax.train._critic import CriticTrainer, SharedCritic
from rljax.train._experiment import Experiment, ShardedStep, host_means, log
from rljax.train._inputs import PROXIMAL_NEEDS, REFERENCE_NEEDS, StepInputs, proximal_forward_reason
from rljax.train._optim import make_optimizer
from rljax.train._phases import phases, select_all, walk
from rljax.train._rollout import Collector
from rljax.train._rows import unchecked
from rljax.train._rundir import how
from rljax.train._startup import bound_recipe, check_recipe
from rljax.train._step import init_train_state, objective_loss

__all__ = ["RLLoop", "run_rl", "check_group_batch", "rl_templates"]


def check_group_batch(batch_size: int, group_size: int) -> None:
  """Raises ``ValueError`` unless a rollout batch splits into whole groups."""
  if group_size < 1 or batch_size % group_size:
    raise ValueError(f"rollout batch of {batch_size} sequences is not divisible by group_size={group_size}")


def prompt_loader(exp: Experiment, rows: tuple):
  """The RL stage's prompt loader: ``(problem, dataset index)`` of prompts ``rows = (lo, hi)`` of each global batch
  of ``rl.num_prompts`` (``rljax.parallel.process_batches``, seed ``cfg.seed``: the same batches on every process
  and in every run of the config)."""
  from rljax.data import to_problem  # pylint: disable=import-outside-toplevel
  records = [{"prompt": p.prompt, "answer": p.answer, "meta": dict(p.meta), "index": i}
             for i, p in enumerate(exp.train_problems)]
  return par.process_batches(records, global_batch_size=exp.cfg.rl.num_prompts, rows=rows, seed=exp.cfg.seed,
                             transform=lambda rec: (to_problem({k: v for k, v in rec.items() if k != "index"}),
                                                    rec["index"]))


def rl_templates(exp: Experiment, cfg, recipe, graphdef_sft=None, sft_state=None, model=None):
  """The RL stage's initial pieces: ``(graphdef, state, opt, sched, ref_params, critic)``.

  Used by the run (from the SFT state) and by ``load_run`` (as the restore template).
  """
  rl = cfg.rl
  total_updates = max(rl.steps * rl.updates_per_batch * rl.num_minibatches, 1)
  opt, sched = make_optimizer(rl.optim, total_updates)
  if model is None:
    model = nnx.merge(graphdef_sft, sft_state.params, sft_state.model_state)
  critic = None
  if recipe.critic is not None and recipe.critic.shared:
    from rljax.models import with_value_head  # pylint: disable=import-outside-toplevel
    model = with_value_head(model)
    critic = SharedCritic()
  graphdef, state = init_train_state(model, opt, recipe.initial_hparams())
  ref = jax.tree_util.tree_map(jnp.copy, state.params) if recipe.needs & REFERENCE_NEEDS else {}
  return graphdef, state, opt, sched, ref, critic, model, total_updates


@dataclasses.dataclass
class _StepRun:
  """What the train-side phases of one step pass on: the step's rows, the update's batch and the metrics."""
  s: int
  data: object
  stats: dict
  metrics: dict
  batch: object = None
  update_metrics: Optional[dict] = None
  controller_metrics: dict = dataclasses.field(default_factory=dict)


class RLLoop:
  """Everything the RL stage runs: built once (start-up checks included), then ``step(s)`` per step; the live
  context of the train phases of ``rljax.train._phases.PIPELINE`` (what it provides: that module's docstring)."""

  call = staticmethod(unchecked)  # the live step's stage call

  def __init__(self, exp: Experiment, sft_graphdef, sft_state, recipe, mesh, *, resume: bool, evals: list, writer,
               checked: bool = False):
    cfg, rl = exp.cfg, exp.cfg.rl
    self.exp, self.cfg, self.rl, self.mesh, self.writer, self.evals = exp, cfg, rl, mesh, writer, evals
    recipe = bound_recipe(exp, recipe)[0] if checked else check_recipe(exp, recipe)
    self.recipe, self.needs = recipe, recipe.needs
    log(cfg, f"[rljax] recipe: {recipe.describe()}")

    graphdef, state, opt, sched, ref, critic, model, total = rl_templates(exp, cfg, recipe, sft_graphdef, sft_state)
    self.graphdef = graphdef
    self.prefix = _shared_prompt_len(exp, rl)
    resampling = [f.name for f in recipe.filters if f.resamples] + [r.name for r in recipe.replay if r.mixes_prompts]
    if self.prefix and exp.model.cfg.is_moe:
      log(cfg, "[rljax] share_prompt_forward unused: the model is an MoE (the shared-prompt layout routes per "
          "sequence, and rl.routing_replay replays per-row routing)")
      self.prefix = 0
    if self.prefix and resampling:
      log(cfg, f"[rljax] share_prompt_forward unused: filter(s) {resampling} resample rows across groups")
      self.prefix = 0
    self.common = _common_prompt_len(exp, self.prefix, mesh)
    if self.common:
      log(cfg, f"[rljax] prompt forward: each group's {self.prefix} prompt columns once per group, of which the "
          f"{self.common} every prompt starts with once per batch (rl.share_prompt_forward)")
    # the proximal log-probs from the update's own forward when they are provably the same numbers
    reason = proximal_forward_reason(recipe, rl, exp.model.cfg)
    self.proximal_from_update = not reason
    if self.proximal_from_update:
      log(cfg, "[rljax] proximal log-probs: the update's own, detached (one update per batch; "
          "rl.proximal_forward=auto)")
    elif rl.updates_per_batch == 1 and rl.num_minibatches == 1 and recipe.needs & PROXIMAL_NEEDS:
      log(cfg, f"[rljax] proximal log-probs: a separate forward before each update ({reason})")
    loss = objective_loss(recipe.objective_builder(), temperature=1.0, shared_prefix_len=self.prefix,
                          group_size=rl.group_size, common_prefix_len=self.common,
                          proximal_from_update=self.proximal_from_update, clip_hparams=recipe.clip_hparams())
    sharded = ShardedStep(graphdef, state, loss, opt, mesh, num_microbatches=rl.num_microbatches, schedule=sched)
    self.state, self.update_step = sharded.state, sharded.step
    if recipe.critic is not None and not recipe.critic.shared:
      critic = CriticTrainer(recipe.critic, model, mesh, total_updates=total, num_microbatches=rl.num_microbatches,
                             shared_prefix_len=self.prefix, group_size=rl.group_size, common_prefix_len=self.common)
    self.critic = critic
    self.ref = ref
    self.task_grads = None
    if self.needs & produced_by("task gradients"):
      from rljax.train._task_grads import task_gradient_gram  # pylint: disable=import-outside-toplevel
      self.task_grads = task_gradient_gram(graphdef, loss, exp.task.num_tasks)
    self.controllers = LoopControllers(recipe.controllers, rl.temperature)
    self.ctl_state = self.controllers.init()
    self.stage_states = initial_stage_states(recipe, len(exp.train_problems))
    self.train_phases, self.stages = phases("train"), select_all(recipe)
    self.routing_replay = rl.routing_replay

    self.rows_sh = par.row_sharding(mesh, rl.batch_size)
    row_ranges = par.all_process_rows(self.rows_sh, rl.batch_size)
    for p, (a, b) in row_ranges.items():
      if a % rl.group_size or b % rl.group_size:
        raise ValueError(f"process {p} holds rollout rows [{a}, {b}), which split groups of "
                         f"rl.group_size={rl.group_size}; change mesh or rl.num_prompts")
    prompt_rows = {p: (a // rl.group_size, b // rl.group_size) for p, (a, b) in row_ranges.items()}
    self.processes = tuple(sorted(row_ranges))  # the processes of the (training) mesh: the host collectives' group
    self.loader = prompt_loader(exp, prompt_rows[jax.process_index()])
    self.collect = Collector(exp, recipe, self.loader, graphdef, prompt_rows=prompt_rows,
                             base_key=jax.random.PRNGKey(cfg.seed), num_dataset_prompts=len(exp.train_problems),
                             needs=self.needs)
    self.inputs = StepInputs(graphdef, self.needs - (PROXIMAL_NEEDS if self.proximal_from_update else frozenset()),
                             rows_sharding=self.rows_sh, batch_size=rl.batch_size,
                             shared_prefix_len=self.prefix, group_size=rl.group_size,
                             common_prefix_len=self.common, ref_params=ref,
                             critic=critic, replay=rl.routing_replay, batch_extras=recipe.batch_extras(),
                             # (with the proximal log-probs from the update, the update reports the mismatch)
                             diagnose=bool(rl.routing_replay or (rl.sampler_dtype and not self.proximal_from_update)))
    mb = rl.batch_size // rl.num_minibatches
    self.take_rows = jax.jit(lambda tree, idx: jax.tree_util.tree_map(lambda x: x[idx], tree),
                             out_shardings=par.row_sharding(mesh, mb) if rl.num_minibatches > 1 else None)
    self.ckpt = Checkpointer(os.path.join(cfg.out_dir, "checkpoints", "rl"), max_to_keep=cfg.checkpoint.max_to_keep,
                             processes=self.processes)  # the training processes only (all but across processes)
    self.start = 0
    self.empty_steps = 0
    if resume and self.ckpt.exists():
      try:
        tree, meta, self.start = self.ckpt.restore(self._tree(), parts=True)
      except CheckpointMismatch:
        raise
      except CheckpointError as e:
        d = self.ckpt.directory
        raise CheckpointError(f"{e}. To restart RL from the SFT checkpoint, move the RL checkpoints aside "
                              f"(mv {d} {d}.unreadable) and resume again ({how('resume')})") from None
      self._load(tree)
      self.loader.set_state(meta["data"])
      evals[:] = meta.get("evals", evals)
      self.empty_steps = int(meta.get("empty_steps", 0))
      writer.truncate("rl", self.start)
      log(cfg, f"[rljax] resumed RL from step {self.start}")
    elif resume:
      writer.truncate("rl", 0)  # rows of an RL stage that saved no checkpoint are written again

  # ------------------------------------------------------------------------- checkpoint tree

  def _tree(self) -> dict:
    tree = {"state": self.state, "ref": self.ref, "controller": self.ctl_state, "stages": self.stage_states}
    if isinstance(self.critic, CriticTrainer):
      tree["critic"] = self.critic.state
    return tree

  def _load(self, tree: dict) -> None:
    self.state, self.ref, self.ctl_state = tree["state"], tree["ref"], tree["controller"]
    self.stage_states = tree["stages"]
    self.inputs.ref_params = self.ref
    if "critic" in tree:
      self.critic.state = tree["critic"]

  def save(self, s: int, data_state, done: bool) -> None:
    """Checkpoint ``s``: the train state, reference, controller, stage and critic states as separate parts
    (``load_run`` reads the state alone: the hparam names and the value head are in the meta)."""
    meta = {"stage": "rl", "step": s, "data": data_state, "evals": self.evals, "done": done,
            "empty_steps": self.empty_steps, "hparams": sorted(self.state.hparams),
            "value_head": bool(self.recipe.critic is not None and self.recipe.critic.shared)}
    self.ckpt.save(s, self._tree(), meta, parts=True)

  # ------------------------------------------------------------------------- one step

  def sample(self, s: int, params, model_state, temperature, prompt_states, replay_states=None):
    """The step's collected batch (``Collector``)."""
    return self.collect(params, model_state, s, temperature, prompt_states, replay_states)

  def step(self, s: int, collected) -> dict:
    """One RL step on a collected batch: the train rows of ``rljax.train._phases.PIPELINE``, walked in order by
    its executor in this context; returns its metrics row."""
    data, stats, metrics, prompt_states = collected
    t0 = time.perf_counter()
    self.stage_states = {**self.stage_states, "prompt_filters": dict(prompt_states)}
    run = _StepRun(s=s, data=data, stats=stats, metrics=dict(metrics))
    walk(self.train_phases, self, run)
    row = {f"rollout/{k}": v for k, v in stats.items()}
    if run.update_metrics is None:  # nothing left to train on: no update, no controller
      self.empty_steps += 1
      log(self.cfg, f"[rljax] RL step {s + 1}: the filters left no valid sample; the step is skipped")
      return {**row, **run.metrics, "train/empty_steps": float(self.empty_steps)}
    return {**row, **run.update_metrics, **run.metrics, **run.controller_metrics,
            "time/update_s": time.perf_counter() - t0, "train/empty_steps": float(self.empty_steps)}

  # ------------------------------------------------------------------------- the context of the train phases

  @property
  def states(self) -> dict:
    """The stage states (``"advantage"``, ``"prompt_filters"``, ``"replay"``), checkpointed with the run."""
    return self.stage_states

  def any_rows(self, data) -> bool:
    """Whether some row of the step's batch is valid on some process (one host collective)."""
    return par.process_any(data.valid.any(), self.processes)

  def forwards(self, data, metrics: dict):
    """The forwards the recipe needs, and the update's extras (``StepInputs``)."""
    return self.inputs(data, self.state, getattr(self.critic, "state", None), metrics)

  def place(self, host: dict) -> dict:
    """The ``TrainBatch`` fields of this process's rows on the run's mesh (the shared-prompt layout checked)."""
    _check_shared_prefix(host["tokens"], self.prefix, self.rl.group_size, self.common)
    return par.global_batch(host, self.rows_sh, self.rl.batch_size)

  def task_gradients(self, batch):
    """``(gram [K, K], present [K])`` of this step's loss, per task, at the current parameters."""
    return jax.device_get(self.task_grads(self.state.params, self.state.model_state, batch, self.state.hparams))

  def control_inputs(self, run) -> ControlInputs:
    batch = run.batch
    return ControlInputs(batch=batch, data=run.data, rollout_stats=run.stats, update_metrics=run.update_metrics,
                         policy_logp=lambda: self.inputs.policy_logp(self.state, batch.tokens, batch.routing,
                                                                     batch.segment_ids))

  def set_controllers(self, new: dict) -> None:
    """The controllers' new states, and their hparams written into the train state."""
    self.state, self.ctl_state = self.controllers.apply(self.state, new), new

  def optimize(self, run) -> None:
    """``updates_per_batch`` epochs of ``num_minibatches`` jitted updates (``update``): ``run``'s metrics."""
    run.update_metrics = self.update(run.batch, run.s)

  def update(self, batch, s: int) -> dict:
    """``updates_per_batch`` epochs of ``num_minibatches`` jitted updates (policy, then the separate critic)."""
    rl = self.rl
    mb = rl.batch_size // rl.num_minibatches
    metrics, critic_metrics = [], []
    perm_rng = np.random.default_rng([self.cfg.seed, 11, s])
    critic = self.critic if isinstance(self.critic, CriticTrainer) else None
    for _ in range(rl.updates_per_batch):
      order = perm_rng.permutation(rl.batch_size) if rl.num_minibatches > 1 else None
      for j in range(rl.num_minibatches):
        mbatch = batch if order is None else self.take_rows(batch, np.asarray(order[j * mb:(j + 1) * mb]))
        self.state, m = self.update_step(self.state, mbatch)
        metrics.append(m)
        if critic is not None:  # another model, with its own router: the sampler's routing is not replayed there
          critic.state, cm = critic.step(critic.state, mbatch.replace(routing=None))
          critic_metrics.append(cm)
    out = host_means(metrics)
    if critic_metrics:
      cm = host_means(critic_metrics)
      out.update({f"critic/{k}": v for k, v in cm.items()})
    return out


def _shared_prompt_len(exp: Experiment, rl) -> int:
  """Prompt columns shared by each group's rows (``rl.share_prompt_forward``), or 0.

  Rollout rows are ``prompt | completion | padding`` (left-aligned), a group's ``G`` rows consecutive: every
  group's rows agree on (at least) their first ``min(len(prompt))`` tokens over the training prompts, the
  static shared length (checked on every batch by :func:`_check_shared_prefix`). Row shuffling into
  mini-batches would split groups, so sharing needs ``num_minibatches == 1`` and micro-batches of whole groups.
  """
  if not rl.share_prompt_forward:
    return 0
  episode_config = getattr(getattr(exp, "task", None), "episode_config", None)
  if episode_config is not None and episode_config.context_budget is not None:
    log(exp.cfg, "[rljax] share_prompt_forward unused: a context budget packs each episode's windows into its row "
        "(segment_ids), which the shared-prompt layout does not take")
    return 0
  if rl.num_minibatches != 1 or (rl.batch_size // max(rl.num_microbatches, 1)) % rl.group_size:
    log(exp.cfg, "[rljax] share_prompt_forward unused: needs num_minibatches=1 and micro-batches of whole groups")
    return 0
  shortest = getattr(exp, "shortest_train_prompt", None)  # counted when the experiment was built
  if shortest is None:
    shortest = min(len(exp.codec.prompt_ids(p)) for p in exp.train_problems)
  return max(0, min(shortest, exp.seq_len - 1))


def _common_prompt_len(exp: Experiment, prefix_len: int, mesh) -> int:
  """Prompt columns shared by *every* row (``rl.share_prompt_forward``): the tokens every prompt of the task starts
  with (``exp.sampler_config.common_prefix``: a system prompt, the chat template's header; an environment's
  ``exp.common_train_prefix``, counted over its openings: a few-shot preamble), at most
  ``prefix_len - 1``, or 0.

  Run once per batch, not once per group (``policy_outputs(common_prefix_len=...)``). That layout makes the whole
  batch one row, which a mesh would have to gather onto each device, so it is used on a one-device mesh only.
  """
  if prefix_len < 2 or mesh.devices.size != 1:
    return 0
  common = getattr(exp, "common_train_prefix", None)  # counted over an environment's openings
  if common is None:
    common = len(exp.sampler_config.common_prefix)
  return min(common, prefix_len - 1)


def _check_shared_prefix(tokens: np.ndarray, prefix_len: int, group_size: int, common_len: int = 0) -> None:
  """Raises unless every group of ``group_size`` rows agrees on its first ``prefix_len`` tokens, and every row on
  its first ``common_len`` (checked on the batch the update gets: a filter that resamples rows without saying so
  (``Filter(resamples=True)``) fails here rather than training rows under another row's prompt)."""
  if common_len and not np.all(tokens[:, :common_len] == tokens[:1, :common_len]):
    raise ValueError(f"the update's rows differ in their first {common_len} tokens, which every training prompt "
                     "starts with; or set rl.share_prompt_forward=false")
  if prefix_len:
    head = tokens[:, :prefix_len].reshape(-1, group_size, prefix_len)
    if not np.all(head == head[:, :1]):
      raise ValueError(f"rows {group_size} by {group_size} of the update's batch differ in their first {prefix_len} "
                       "tokens (a filter reordered rows: declare it Filter(resamples=True)); or set "
                       "rl.share_prompt_forward=false")
