"""Start-up checks of a recipe for a run, before SFT and before anything is compiled (``check_recipe``).

The recipe is bound to the run's static facts, every stage's needs are checked against what the run can
provide (``available_needs``: a refusal names the stage and the input), unsupported combinations are refused,
and every stage runs once on a synthetic batch of the run's shapes (``dry_run``), its return checked against its
slot's contract (``rljax.train._contracts``) and the loss terms traced under ``jax.jit``, so that a bad
hyper-parameter or a stage that cannot run fails now, naming the slot and the stage, rather than after SFT.
"""
from __future__ import annotations

import dataclasses

import jax
import numpy as np

from rljax.stages import (NEEDS, REPLAY_UNSTORED, ControlInputs, RunFacts, StepData, TaskGradients, check_needs,
                          produced_by)
from rljax.train._advantage import compute_advantages, initial_stage_states
from rljax.train._async import check_async
from rljax.train._contracts import Dims, check
from rljax.train._experiment import Experiment

__all__ = ["check_recipe", "bound_recipe", "available_needs", "dry_run"]

_SINGLE_TURN = "the task is single-turn (multi-turn environments and their turn/segment ids come with issue #20)"


def bound_recipe(exp: Experiment, recipe):
  """``recipe`` bound to the run's static facts (``rljax.stages.RunFacts``)."""
  rl = exp.cfg.rl
  task = exp.task
  task_ids = None
  if "task_id" in recipe.needs and hasattr(task, "task_id") and hasattr(task, "num_tasks"):
    task_ids = tuple(int(task.task_id(p)) for p in exp.train_problems)  # a curriculum's arms
  facts = RunFacts(num_prompts=rl.num_prompts, group_size=rl.group_size, max_new_tokens=rl.max_new_tokens,
                   temperature=rl.temperature, num_dataset_prompts=len(exp.train_problems),
                   num_tasks=getattr(task, "num_tasks", None), seq_len=exp.seq_len, task_ids=task_ids)
  return recipe.bind(facts), facts


def check_multi_turn(exp, recipe) -> None:
  """Refuses, at start-up, what the episode path of ``Collector`` (``rljax.train._rollout``) does not run, naming
  the stage."""
  name = exp.cfg.task.name
  unsupported = [(s.name, "rl.rewards (the environment gives the rewards)") for s in recipe.rewards]
  unsupported += [(s.name, "a multi-reward stage") for s in ([recipe.multi_reward] if recipe.multi_reward else [])]
  unsupported += [(s.name, "rollout-phase shaping") for s in (s for s in recipe.shaping if s.phase == "rollout")]
  unsupported += [(s.name, "a prompt filter") for s in recipe.prompt_filters]
  unsupported += [(r.name, "a hint stage") for r in recipe.replay if getattr(r, "hints", None) is not None]
  unsupported += [(n, "a greedy baseline rollout") for n in sorted(recipe.needs & produced_by("greedy rollout"))]
  if getattr(exp.task, "episode_config", None) is not None and exp.task.episode_config.context_budget is not None:
    unsupported += [(r.name, "a replay stage with task.context_budget: its buffer stores no attention packing "
                     "(segment_ids) for an episode's context windows packed in one row") for r in recipe.replay
                    if getattr(r, "hints", None) is None]
  if exp.cfg.rl.async_staleness:
    unsupported.append((f"rl.async_staleness={exp.cfg.rl.async_staleness}",
                        "the asynchronous runner's interruptible sampler (single-turn only)"))
  roles = tuple(getattr(exp.task, "roles", ()))
  if roles and exp.cfg.rl.group_size % len(roles):
    raise ValueError(f"task.name={name!r} is self-play with roles {roles}: rl.group_size={exp.cfg.rl.group_size} "
                     f"must be a multiple of {len(roles)} (one row per role of each game)")
  if unsupported:
    raise ValueError(f"task.name={name!r} is multi-turn: its episodes do not run "
                     + "; ".join(f"{n!r} ({why})" for n, why in unsupported) + " — remove them from the recipe")


def check_recipe(exp: Experiment, recipe):
  """Start-up checks of a recipe for this run, before anything is compiled or trained: binds it to the run's
  facts, refuses needs the run cannot meet (naming the stage and the input) and combinations the loop does
  not support, and dry-runs every stage on a synthetic batch, checking each return against its slot's contract
  (``dry_run``). Returns the bound recipe."""
  rl = exp.cfg.rl
  recipe, facts = bound_recipe(exp, recipe)
  if rl.routing_replay and not exp.model.cfg.is_moe:
    raise ValueError("invalid config value RLConfig.routing_replay=True: needs an MoE model (this one is dense); "
                     "set model.num_experts (e.g. --set model.num_experts=4) or rl.routing_replay=false")
  if getattr(exp, "multi_turn", False):
    check_multi_turn(exp, recipe)
  check_needs(recipe.stages(), available_needs(exp, recipe))
  if recipe.prompt_filters and jax.process_count() > 1:
    raise ValueError("prompt filters (rl.prompt_filters) run on one process only; this run has "
                     f"{jax.process_count()}")
  stateful = [a.name for a in recipe.advantage if a.init is not None]
  if stateful and jax.process_count() > 1:
    raise ValueError(f"stateful advantage stages {stateful} keep their state from each process's rows; they run "
                     f"on one process only, and this run has {jax.process_count()}")
  if recipe.prompt_filters and rl.rollout_ahead:
    raise ValueError("prompt filters (rl.prompt_filters) observe each step's rewards before the next "
                     "selection; rl.rollout_ahead samples the next step before that: use one or the other")
  learning = [pf.name for pf in recipe.prompt_filters if pf.observe_phase == "advantages"]
  if learning and recipe.replay:
    raise ValueError(f"prompt filter(s) {learning} learn from the trained rows' task ids, which the replay stage "
                     f"{recipe.replay[0].name!r} (rl.replay) does not store for its rows: use one or the other")
  check_async(rl, recipe)
  if recipe.replay:
    _check_replay(recipe, rl)
  if sum(pf.pilot > 0 for pf in recipe.prompt_filters) > 1:
    raise ValueError("at most one prompt filter may take a pilot rollout")
  drawing = [pf.name for pf in recipe.prompt_filters if pf.draw is not None]
  if len(drawing) > 1:
    raise ValueError(f"at most one prompt filter may draw the step's prompts (a curriculum); got {drawing}")
  if any(pf.pilot >= rl.group_size for pf in recipe.prompt_filters):
    raise ValueError(f"a prompt filter's pilot must be smaller than rl.group_size={rl.group_size}")
  dry_run(exp, recipe, facts)
  return recipe


def _after_replay(recipe) -> list:
  """The stages that see replayed rows: every stage of the recipe that runs after its replay stage (the order of
  ``rljax.stages``). Stages before it (prompt filters, rewards, rollout-phase shaping, rewards-phase filters; and,
  for a replay in phase ``"advantages"``, forward-phase shaping, the advantage and advantage-phase filters) have
  run on the fresh rows only, so what the buffer does not store does not matter to them."""
  replay = recipe.replay[0]
  early = [*recipe.prompt_filters, *recipe.rewards, *([recipe.multi_reward] if recipe.multi_reward else []),
           *(s for s in recipe.shaping if s.phase == "rollout"), *(f for f in recipe.filters if f.phase == "rewards")]
  if replay.phase == "advantages":
    early += [*(s for s in recipe.shaping if s.phase == "forward"), *recipe.advantage,
              *(f for f in recipe.filters if f.phase == "advantages")]
  seen = {id(s) for s in early} | {id(replay)}
  return [s for s in recipe.stages() if id(s) not in seen]


def _check_replay(recipe, rl) -> None:
  """Refuses what a replay stage cannot run with (several processes, a look-ahead rollout, per-row inputs the
  buffer does not store)."""
  name = recipe.replay[0].name
  if jax.process_count() > 1:
    raise ValueError(f"replay stage {name!r} (rl.replay) keeps one buffer of this process's rows; it runs on one "
                     f"process only, and this run has {jax.process_count()}")
  if rl.routing_replay:
    what = "samples hinted rows under another prompt" if recipe.replay[0].hints is not None else \
        "stores no expert routing for its rows"
    raise ValueError(f"replay stage {name!r} (rl.replay) {what}, so a replayed or hinted row has no routing that "
                     "rl.routing_replay could replay: use one or the other")
  if rl.rollout_ahead:
    raise ValueError(f"replay stage {name!r} (rl.replay) stores each step's rows before the next step samples; "
                     "rl.rollout_ahead samples the next step before that: use one or the other")
  later = _after_replay(recipe)
  unstored = sorted(frozenset().union(*(s.needs for s in later)) & set(REPLAY_UNSTORED))
  if unstored:
    users = [s.name for s in later if s.needs & set(unstored)]
    raise ValueError(f"replay stage {name!r} (rl.replay) stores no {unstored} for its rows, which stage(s) {users} "
                     "need: a replayed row could not carry them")


def available_needs(exp: Experiment, recipe) -> dict:
  """``{need: ""}`` for what this run can provide, ``{need: reason}`` for what it cannot."""
  task = exp.task
  out = {n: "" for n in NEEDS}
  if getattr(exp, "multi_turn", False):  # episodes: turn ids and per-turn rewards (rljax.train._rollout.episodes)
    out["reward_segments"] = ("multi-turn episodes give turn_ids and per-turn step_rewards, not reward segments "
                              "(use turn_ids)")
  else:
    out.update(reward_segments=_SINGLE_TURN, turn_ids=_SINGLE_TURN)
  if recipe.critic is None:
    out["values"] = "the recipe has no critic (Recipe.critic / --set rl.critic='value_loss(clip_eps=0.2)')"
  self_play = getattr(exp, "multi_turn", False) and bool(getattr(task, "roles", ()))  # task_id = the role's index
  if not (hasattr(task, "task_id") and hasattr(task, "num_tasks")) and not self_play:
    out["task_id"] = f"the {type(task).__name__} task defines no task ids (task_id / num_tasks)"
    out["task_gradients"] = out["task_id"]
  if not any(a.returns for a in recipe.advantage):
    out["returns"] = "no advantage stage writes critic targets (gae does: --set rl.advantage=gae)"
  if len(recipe.rewards) < 2:
    out["reward_components"] = "the recipe has one reward; give several in rl.rewards"
  if not hasattr(task, "step_rewards") and not getattr(exp, "multi_turn", False):
    out["step_rewards"] = f"the {type(task).__name__} task gives no process (step) rewards"
  return out


def _synthetic(exp: Experiment, recipe, facts: RunFacts) -> StepData:
  """A fake batch of the run's shapes with every need filled, to dry-run the stages at start-up (bad
  hyper-parameters and broken stages fail here, before any compile, not mid-run).

  ``B = num_prompts * group_size`` rows (the global batch; each process's host stages see its own groups of it) of
  ``T = facts.seq_len`` tokens: the rollout rows' real width, the longest tokenized prompt of the task (the sampler's
  prompt bucket, computed by ``build_experiment``) plus ``max_new_tokens`` (``4 + max_new_tokens`` when the run
  gives no width). The last ``min(T - 1, max_new_tokens)`` tokens are the completion, one token shorter on every
  other row (ragged, as sampled rows are); every row is valid."""
  rng = np.random.default_rng(0)
  g, p = facts.group_size, facts.num_prompts
  b = p * g
  t = facts.seq_len if facts.seq_len and facts.seq_len > 1 else 4 + facts.max_new_tokens
  p0 = min(max(1, t - facts.max_new_tokens), t - 1)  # prompt tokens
  ends = t - (np.arange(b) % 2) * (t - p0 > 1)  # completion ends: ragged by one token on odd rows
  cm = (np.arange(t)[None, :] >= p0) & (np.arange(t)[None, :] < ends[:, None])
  f = lambda *shape: rng.normal(size=shape).astype(np.float32)
  problems = tuple(exp.train_problems[i % len(exp.train_problems)] for i in range(p) for _ in range(g))
  rewards = rng.integers(0, 2, b).astype(np.float32)
  pm = np.broadcast_to(np.arange(t) < p0, (b, t)).copy()
  data = StepData(tokens=rng.integers(1, 8, (b, t)).astype(np.int32), prompt_mask=pm, completion_mask=cm,
                  group_id=np.repeat(np.arange(p, dtype=np.int32), g), num_groups=p, valid=np.ones(b, bool),
                  lengths=cm.sum(1).astype(np.int32), completions=tuple(str(i % 3) for i in range(b)),
                  problems=problems, prompt_index=np.repeat(np.arange(p), g), rewards=rewards,
                  correct=rewards.copy(), logp_behavior=-np.abs(f(b, t)) * cm,
                  entropy_behavior=np.abs(f(b, t)) * cm, max_new_tokens=facts.max_new_tokens,
                  key=jax.random.PRNGKey(0), logp_old=-np.abs(f(b, t)) * cm, entropy_old=np.abs(f(b, t)) * cm,
                  logp_ref=-np.abs(f(b, t)) * cm, entropy_ref=np.abs(f(b, t)) * cm, logp_teacher=-np.abs(f(b, t)) * cm,
                  values=f(b, t) * cm, greedy_rewards=rng.integers(0, 2, b).astype(np.float32),
                  answer_ids=rng.integers(0, 3, b).astype(np.int32), turns=tuple((str(i),) for i in range(b)))
  if facts.num_tasks:
    data = data.replace(task_id=rng.integers(0, facts.num_tasks, b).astype(np.int32), num_tasks=facts.num_tasks)
  if getattr(exp, "multi_turn", False):  # episodes: per-turn rewards [B, M], two turns per row
    m = exp.runner.max_turns
    data = data.replace(step_rewards=f(b, m), step_mask=np.arange(m)[None, :] < np.minimum(m, 2),
                        turn_ids=np.where(cm, np.minimum((np.arange(t) - p0) // 2, min(m, 2) - 1), -1).astype(np.int32),
                        turns=tuple((str(i), "x") for i in range(b)))
    data = data.replace(step_mask=np.broadcast_to(data.step_mask, (b, m)).copy())
  elif hasattr(exp.task, "step_rewards"):
    step_rewards, step_mask = exp.task.step_rewards(data.completions, data.problems)
    data = data.replace(step_rewards=np.asarray(step_rewards, np.float32), step_mask=np.asarray(step_mask, bool))
  k = max(len(recipe.rewards), 1)
  if k > 1:
    from rljax.train._rollout import reward_names  # pylint: disable=import-outside-toplevel
    data = data.replace(reward_components=rng.integers(0, 2, (b, k)).astype(np.float32),
                        reward_names=reward_names(recipe))
  return data


_JIT_HINT = ("loss terms run inside the jitted update: compute with jax.numpy on the arrays, not NumPy, float(), "
             "int() or a Python if on them")


class _Checker:
  """Runs a stage's call once and checks its return against the slot's contract (``_contracts.CONTRACTS``);
  every error names the slot and the stage (``rl.advantage stage 'my_adv' ...``)."""

  def __init__(self, dims: Dims):
    self.dims = dims

  @staticmethod
  def label(slot: str, stage) -> str:
    return f"rl.{slot} stage {stage.name!r}"

  @staticmethod
  def run(label: str, fn, under: str = ""):
    """``fn()``; an exception is re-raised as ``ValueError`` naming ``label``."""
    try:
      return fn()
    except Exception as e:  # noqa: BLE001 - re-raised with the stage named
      tracer = isinstance(e, (jax.errors.JAXTypeError, jax.errors.UnexpectedTracerError))
      text = str(e).strip().splitlines()[0] if tracer and str(e).strip() else str(e)
      hint = f" ({_JIT_HINT})" if tracer else ""
      raise ValueError(f"{label} fails{under} on a synthetic batch at start-up{hint}: {type(e).__name__}: "
                       f"{text}") from e

  def __call__(self, key: str, label: str, fn, dims: Dims = None):
    """``fn()``'s return, parsed by contract ``key`` (``_contracts.check``)."""
    return check(key, label, self.run(label, fn), dims or self.dims)

  def traced(self, key: str, label: str, fn, *args):
    """``fn(*args)`` traced under ``jax.jit`` (``jax.eval_shape``: a NumPy call or a Python conversion of a traced
    array fails here, as in the jitted update, without compiling), then run for its values, and checked."""
    self.run(label, lambda: jax.eval_shape(fn, *args), " under jax.jit")
    return self(key, label, lambda: fn(*args))


def _dry_replay(stage, data: StepData, key, checker: _Checker) -> None:
  """A replay stage's ``prompts`` and ``fn`` on ``data``, twice (the second step sees a non-empty buffer)."""
  label = checker.label("replay", stage)
  state = checker.run(label, stage.init)
  for step in range(2):
    step_data = data.replace(step=step)
    if stage.prompts is not None:
      g = int(np.sum(data.group_id == data.group_id[0]))
      _, slots, _ = checker("replay.prompts", label, lambda st=state: stage.prompts(st, data.prompt_index[::g], key))
      step_data = step_data.replace(extras={**data.extras, "replay_slot": np.repeat(np.asarray(slots), g)})
    _, state, _ = checker("replay", label, lambda sd=step_data, st=state: stage.fn(sd, st))


def _objective_label(recipe) -> str:
  if recipe.objective is not None:
    return "the objective builder (Recipe.objective)"
  label = f"the objective composed of rl.loss {[t.name for t in recipe.loss]}"
  wraps = [c.name for c in recipe.controllers if c.wrap_policy is not None]
  if wraps:
    label += f" wrapped by rl.controllers {wraps}"
  if recipe.critic is not None and recipe.critic.shared:
    label += f" with the shared rl.critic {recipe.critic.loss.name!r}"
  return label + f" and rl.aggregation {recipe.aggregation.name!r}"


def dry_run(exp: Experiment, recipe, facts: RunFacts) -> None:
  """Runs every stage of ``recipe`` once on a synthetic batch of the run's shapes (``_synthetic``), walking every
  phase of ``rljax.train._phases.PIPELINE`` in order (``_DryRun``) — rewards (on reference answers),
  multi-reward, shaping, filters, prompt filters, the advantage, replay, the controllers' initial hparams, each
  loss term, the aggregation, the composed objective, the critic's loss and the controllers' updates — and checks
  each return against its slot's contract (``rljax.train._contracts``: type, keys, dtype, shape, finite values).
  Loss terms, the aggregation, the objective and the critic's loss are traced under ``jax.jit`` first (as in the
  update), one by one, then evaluated. Errors name the slot and the stage, what it returned and what was
  expected."""
  run = _DryRun(exp, recipe, facts)
  for phase in run.phases:
    run.handlers[phase.name]()


class _DryRun:
  """The start-up check's walk: one handler per phase (``_phase_<name>``), on one synthetic batch."""

  def __init__(self, exp: Experiment, recipe, facts: RunFacts):
    from rljax.train._phases import check_handlers, phases  # pylint: disable=import-outside-toplevel
    self.recipe, self.facts = recipe, facts
    self.data = data = _synthetic(exp, recipe, facts)
    b, t = data.tokens.shape
    self.n = max(facts.num_dataset_prompts, 1)
    self.dims = Dims(b=b, t=t, p=facts.num_prompts, g=facts.group_size, n=self.n, valid=data.valid.copy(),
                     loss_mask=data.completion_mask.copy())
    self.checker = _Checker(self.dims)
    self.label = self.checker.label
    self.states = self.hp = self.batch = self.out = None
    self.phases = phases("all")
    own = {p.name: getattr(self, f"_phase_{p.name}", None) for p in self.phases}
    self.handlers = check_handlers("the start-up check", {k: h for k, h in own.items() if h is not None},
                                   self.phases)

  # ------------------------------------------------------------------------- the collect side

  def _phase_prompts(self) -> None:
    """Prompt filters' ``draw`` and ``select`` (the replay stages' ``prompts`` run with their ``fn``, below)."""
    from rljax.stages import PromptData  # pylint: disable=import-outside-toplevel
    recipe, facts, checker, label, data = self.recipe, self.facts, self.checker, self.label, self.data
    self.states = states = checker.run("the init() of a stage of rl.advantage, rl.prompt_filters or rl.replay",
                                       lambda: initial_stage_states(recipe, self.n))
    index = np.arange(facts.num_prompts) % self.n
    prompts = PromptData(tuple(data.problems[::facts.group_size]), index, self.n,
                         pilot=data if any(pf.pilot for pf in recipe.prompt_filters) else None)
    for pf in recipe.prompt_filters:
      state, pf_label = states["prompt_filters"][pf.name], label("prompt_filters", pf)
      if pf.draw is not None:
        state = checker("prompt_filters.draw", pf_label,
                        lambda pf=pf, st=state: pf.draw(st, prompts, jax.random.PRNGKey(0)))[1]
      if pf.select is not None:
        state = checker("prompt_filters.select", pf_label,
                        lambda pf=pf, st=state: pf.select(st, prompts, jax.random.PRNGKey(0)),
                        self.dims._replace(pilot=pf.pilot))[1]
      states["prompt_filters"][pf.name] = state

  def _phase_rollouts(self) -> None:
    """Rewards (strict: one that raises on the reference answers is broken), multi-reward, shaping."""
    from rljax.train._rollout import set_rewards  # pylint: disable=import-outside-toplevel
    recipe, checker, label = self.recipe, self.checker, self.label
    answers = [p.answer for p in self.data.problems]
    for r in recipe.rewards:
      checker("rewards", label("rewards", r), lambda r=r: r.fn(answers, list(self.data.problems)))
    multi = recipe.multi_reward
    if multi is not None and multi.produces == "rewards":
      values, _ = checker("multi_reward", label("multi_reward", multi), lambda: multi.fn(self.data))
      self.data = set_rewards(self.data, values, multi.name)
    for s in (s for s in recipe.shaping if s.phase == "rollout"):  # forward-phase shaping: compute_advantages
      values, _ = checker("shaping", label("shaping", s), lambda s=s: s.fn(self.data))
      self.data = set_rewards(self.data, values, s.name)

  def _phase_resample(self) -> None:
    """A replay stage's ``hints``/``splice`` need a sampler: the collector checks their returns at run time."""

  def _rewards_filters(self, refill: bool) -> None:
    for f in self.recipe.filters:  # the synthetic batch keeps every row: later stages see a full batch
      if f.phase == "rewards" and f.refill == refill:
        self.checker("filters.refill" if f.refill else "filters", self.label("filters", f),
                     lambda f=f: f.fn(self.data))

  def _phase_refill(self) -> None:
    self._rewards_filters(refill=True)

  def _phase_filters(self) -> None:
    self._rewards_filters(refill=False)

  # ------------------------------------------------------------------------- the train side

  def _observe(self, phase: str) -> None:
    for pf in self.recipe.prompt_filters:
      if pf.observe is not None and pf.observe_phase == phase:
        self.checker("prompt_filters.observe", self.label("prompt_filters", pf),
                     lambda pf=pf: pf.observe(self.states["prompt_filters"][pf.name], self.data))

  def _phase_observe_rewards(self) -> None:
    self._observe("rewards")

  def _replay(self, phase: str) -> None:
    for r in self.recipe.replay:  # twice on the synthetic batch: the second call replays what the first stored
      if r.phase == phase:
        r = r.bind(dataclasses.replace(self.facts, seq_len=self.data.tokens.shape[1]))
        _dry_replay(r, self.data, jax.random.PRNGKey(0), self.checker)

  def _phase_replay_rewards(self) -> None:
    self._replay("rewards")

  def _phase_inputs(self) -> None:
    """The synthetic batch carries every input a need can ask (``_synthetic``); the extras the update reads are
    added as the step adds them (``rljax.train._inputs.with_batch_extras``: the loss terms' ``batch_extras``)."""
    from rljax.train._inputs import with_batch_extras  # pylint: disable=import-outside-toplevel
    self.data = self.checker.run("the batch_extras of a term of rl.loss",
                                 lambda: with_batch_extras(self.data, self.recipe.batch_extras()))

  def _phase_advantages(self) -> None:
    """The step's own ``compute_advantages`` (forward-phase shaping, multi-reward advantages, the estimator and
    its transforms), each stage call checked against its slot's contract."""
    checker, label = self.checker, self.label
    call = lambda key, stage, fn: checker(key, label(key.split(".")[0], stage), fn)
    self.data, _, _ = compute_advantages(self.recipe, self.data, self.states["advantage"], call)

  def _phase_advantage_filters(self) -> None:
    for f in self.recipe.filters:
      if f.phase == "advantages":
        self.checker("filters", self.label("filters", f), lambda f=f: f.fn(self.data))

  def _phase_replay_advantages(self) -> None:
    self._replay("advantages")

  def _phase_train_batch(self) -> None:
    """The update's batch from the synthetic rows, built by the step's own ``host_batch`` (``train_batch``
    without the placement on the mesh), and the policy outputs the loss terms see."""
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    from rljax.train._inputs import host_batch  # pylint: disable=import-outside-toplevel
    from rljax.types import PolicyOutputs, TrainBatch  # pylint: disable=import-outside-toplevel
    self.batch = TrainBatch(**jax.tree.map(jnp.asarray, host_batch(self.data)))
    self.out = PolicyOutputs(logp=self.batch.logp_old + 0.01, entropy=self.batch.entropy_old,
                             values=self.batch.values_old)

  def _phase_task_gradients(self) -> None:
    if self.facts.num_tasks:  # a synthetic Gram matrix: every task present, unit gradients at 60 degrees
      k = int(self.facts.num_tasks)
      self.data = self.data.replace(task_gradients=TaskGradients(np.full((k, k), 0.5) + 0.5 * np.eye(k),
                                                                 np.ones(k, bool)))

  def _phase_observe_advantages(self) -> None:
    self._observe("advantages")

  def _phase_update(self) -> None:
    """The hparams the loss reads at the first step (the loss's values, then each controller's initial ones),
    then each loss term, the aggregation, the objective and the critic's loss, traced as in the update."""
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    from rljax.objectives import call_with_statistics  # pylint: disable=import-outside-toplevel
    recipe, checker, label, out, batch = self.recipe, self.checker, self.label, self.out, self.batch
    hp = checker.run("rl.loss (its hyper-parameters)", recipe.loss_hparams)
    for c in recipe.controllers:
      hp.update(checker("controllers.hparams", label("controllers", c), lambda c=c: c.hparams(c.init()),
                        self.dims._replace(hparams=None)))  # its initial hparams join state.hparams
    self.dims = checker.dims = self.dims._replace(hparams=tuple(hp))
    hparams = {k: jnp.asarray(v, jnp.float32) for k, v in hp.items()}
    for term in recipe.loss:  # each term alone, built from traced hparams as in the jitted update
      checker.traced("loss", label("loss", term),
                     lambda h, o, bt, term=term: call_with_statistics(term.build(h), o, bt), hparams, out, batch)
    if recipe.objective is None:
      agg = recipe.aggregation
      checker.traced("aggregation", label("aggregation", agg), lambda o, bt: agg.fn(jnp.abs(o.logp), bt.loss_mask),
                     out, batch)
    builder = recipe.objective_builder()
    checker.traced("objective", _objective_label(recipe), lambda h, o, bt: builder(h)(o, bt), hparams, out, batch)
    if recipe.critic is not None:
      critic = recipe.critic.loss
      critic_hp = {**{k: jnp.asarray(v, jnp.float32) for k, v in critic.initial_hparams().items()}, **hparams}
      checker.traced("critic", label("critic", critic),
                     lambda h, o, bt: call_with_statistics(critic.build(h), o, bt), critic_hp, out, batch)

  def _phase_controllers(self) -> None:
    from rljax.train._controllers import LoopControllers  # pylint: disable=import-outside-toplevel
    recipe, checker, label, out = self.recipe, self.checker, self.label, self.out
    controllers = LoopControllers(recipe.controllers, self.facts.temperature)
    inputs = ControlInputs(batch=self.batch, data=self.data, rollout_stats={"entropy": 0.5}, update_metrics={},
                           policy_logp=lambda: out.logp)
    states = checker.run("rl.controllers (init)", controllers.init)
    for c in recipe.controllers:
      c_label = label("controllers", c)
      new, _ = checker("controllers", c_label, lambda c=c: c.update(states[c.name], inputs))
      checker("controllers.hparams", c_label, lambda c=c, new=new: c.hparams(new))
      if c.temperature is not None:
        checker("controllers.temperature", c_label, lambda c=c, new=new: c.temperature(new))
