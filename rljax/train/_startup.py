"""Start-up checks of a recipe for a run, before SFT and before anything is compiled (``check_recipe``).

The recipe is bound to the run's static facts, every stage's needs are checked against what the run can
provide (``available_needs``: a refusal names the stage and the input), unsupported combinations are refused,
and every stage runs once on a synthetic batch of the run's shapes (``dry_run``), its return checked against its
slot's contract (``rljax.train._contracts``) and the loss terms traced under ``jax.jit``, so that a bad
hyper-parameter or a stage that cannot run fails now, naming the slot and the stage, rather than after SFT.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import jax
import numpy as np

from rljax.stages import NEEDS, REPLAY_UNSTORED, ControlInputs, RunFacts, StepData, check_needs, produced_by
from rljax.train._advantage import initial_stage_states
from rljax.train._async import check_async
from rljax.train._contracts import Dims, check
from rljax.train._experiment import Experiment
from rljax.train._inputs import with_batch_extras
from rljax.train._phases import PIPELINE, compute_advantages, score_tail, select_all, walk
from rljax.train._producers import FACTS

__all__ = ["check_recipe", "bound_recipe", "available_needs", "dry_run"]

_SINGLE_TURN = "the task is single-turn (multi-turn environments and their turn/segment ids come with issue #20)"


def bound_recipe(exp: Experiment, recipe):
  """``recipe`` bound to the run's static facts (``rljax.stages.RunFacts``)."""
  rl = exp.cfg.rl
  task = exp.task
  given = {}  # the facts the needs' producers give over the training set (``_producers.FACTS``: task_ids)
  for need in sorted(recipe.needs & set(FACTS)):
    given.update(FACTS[need](task, exp.train_problems))
  facts = RunFacts(num_prompts=rl.num_prompts, group_size=rl.group_size, max_new_tokens=rl.max_new_tokens,
                   temperature=rl.temperature, num_dataset_prompts=len(exp.train_problems),
                   num_tasks=getattr(task, "num_tasks", None), seq_len=exp.seq_len, **given)
  return recipe.bind(facts), facts


def check_multi_turn(exp, recipe) -> None:
  """Refuses, at start-up, what the episode path of ``Collector`` (``rljax.train._rollout``) does not run, naming
  the stage."""
  name = exp.cfg.task.name
  unsupported = [(s.name, "rl.rewards (the environment gives the rewards)") for s in recipe.rewards]
  unsupported += [(s.name, "a multi-reward stage") for s in ([recipe.multi_reward] if recipe.multi_reward else [])]
  unsupported += [(s.name, "rollout-phase shaping") for s in (s for s in recipe.shaping if s.phase == "rollout")]
  unsupported += [(s.name, "a prompt filter") for s in recipe.prompt_filters]
  unsupported += [(r.name, "a hint stage") for r in recipe.replay if r.hints is not None]
  unsupported += [(n, "a greedy baseline rollout") for n in sorted(recipe.needs & produced_by("greedy rollout"))]
  if getattr(exp.task, "episode_config", None) is not None and exp.task.episode_config.context_budget is not None:
    unsupported += [(r.name, "a replay stage with task.context_budget: its buffer stores no attention packing "
                     "(segment_ids) for an episode's context windows packed in one row") for r in recipe.replay
                    if r.hints is None]
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
  """Runs every phase of ``rljax.train._phases.PIPELINE`` once, in order, on a synthetic batch of the run's shapes
  (``_synthetic``): the step's own phase functions, walked by its executor in the checking context ``_DryRun`` —
  prompt filters, rewards (on reference answers), multi-reward, shaping, filters, replay, the forwards' extras, the
  advantage, the TrainBatch, the controllers' initial hparams, each loss term, the aggregation, the composed
  objective, the critic's loss and the controllers' updates — and checks each stage's return against its slot's
  contract (``rljax.train._contracts``: type, keys, dtype, shape, finite values). Loss terms, the aggregation, the
  objective and the critic's loss are traced under ``jax.jit`` first (as in the update), one by one, then
  evaluated. Errors name the slot and the stage, what it returned and what was expected."""
  run = _DryRun(exp, recipe, facts)
  walk(PIPELINE, run, run.record)


@dataclasses.dataclass
class _Record:
  """The dry run's one batch through every phase (the fields the live step's ``_Round`` and ``_StepRun`` have)."""
  data: StepData
  prompt_states: dict
  replay_states: Optional[dict]
  step: int = 0
  s: int = 0
  key: object = None
  side: object = None
  metrics: dict = dataclasses.field(default_factory=dict)
  stats: dict = dataclasses.field(default_factory=lambda: {"entropy": 0.5})
  problems: Optional[list] = None
  index: Optional[np.ndarray] = None
  counts: Optional[np.ndarray] = None
  blocks: Optional[list] = None
  replay_slots: Optional[np.ndarray] = None
  keep: Optional[np.ndarray] = None
  batch: object = None
  update_metrics: Optional[dict] = None
  controller_metrics: dict = dataclasses.field(default_factory=dict)


class _DryRun:
  """The start-up check's context of the step's phase functions (``rljax.train._phases``; what a context provides:
  that module's docstring): one synthetic batch, every stage call checked against its slot's contract
  (``call``), the sampler replaced by the synthetic rows (rewards are checked on the reference answers), the
  forwards by the synthetic batch's inputs, the update by tracing the loss."""

  routing_replay = False
  max_refills = 0  # one draw of candidates

  def __init__(self, exp: Experiment, recipe, facts: RunFacts):
    data = _synthetic(exp, recipe, facts)
    b, t = data.tokens.shape
    # a replay stage bound to the synthetic rows' width
    recipe = dataclasses.replace(recipe, replay=tuple(r.bind(dataclasses.replace(facts, seq_len=t))
                                                      for r in recipe.replay))
    self.recipe, self.facts = recipe, facts
    self.n = max(facts.num_dataset_prompts, 1)
    self.dims = Dims(b=b, t=t, p=facts.num_prompts, g=facts.group_size, n=self.n, valid=data.valid.copy(),
                     loss_mask=data.completion_mask.copy())
    self.checker = _Checker(self.dims)
    self.label = self.checker.label
    self.stages = select_all(recipe)
    self.group_size, self.local_groups, self.num_dataset_prompts = facts.group_size, facts.num_prompts, self.n
    self.pilot = max([pf.pilot for pf in recipe.prompt_filters], default=0)
    self.train_problems = exp.train_problems
    self.states = self.checker.run("the init() of a stage of rl.advantage, rl.prompt_filters or rl.replay",
                                   lambda: initial_stage_states(recipe, self.n))
    from rljax.train._controllers import LoopControllers  # pylint: disable=import-outside-toplevel
    self.ctl_state = self.checker.run("rl.controllers (init)",
                                      LoopControllers(recipe.controllers, facts.temperature).init)
    self.out = None
    key = jax.random.PRNGKey(0)
    if recipe.replay:  # the walk is the second step: its replay buffer holds the first step's rows
      self._first_replay_step(data, key)
      data = data.replace(step=1)
    self.record = _Record(data, self.states["prompt_filters"], self.states.get("replay"), step=data.step,
                          s=data.step, key=key, side=key)

  def _first_replay_step(self, data: StepData, key) -> None:
    """A replay stage's ``prompts`` and ``fn`` on its empty buffer, at step 0. A stage of phase ``"advantages"``
    gets the step's advantages first, computed by the step's own estimators (their states are not kept: the walk
    that follows is the checked step)."""
    if self.stages["replay_advantages"]["replay"] and data.advantages is None:
      data, _, _ = compute_advantages(self.stages["advantages"], data, self.states["advantage"])
    for stage in self.recipe.replay:
      state = self.states["replay"][stage.name]
      if stage in self.stages["prompts"]["swap"]:  # its prompt swap
        _, slots, _ = self.call("replay.prompts", stage,
                                lambda st=state: stage.prompts(st, data.prompt_index[::self.group_size], key))
        data = data.with_extras(replay_slot=np.repeat(np.asarray(slots), self.group_size))
      _, self.states["replay"][stage.name], _ = self.call("replay", stage, lambda st=state: stage.fn(data, st))

  def call(self, key: str, stage, fn):
    """``fn()`` checked against contract ``key``, naming the slot and the stage. A filter's verdict is checked,
    not applied: the synthetic batch keeps every row, so that every later stage sees a full batch."""
    dims = self.dims._replace(pilot=stage.pilot) if key == "prompt_filters.select" else None
    out = self.checker(key, self.label(key.split(".")[0], stage), fn, dims)
    if key in ("filters", "filters.refill"):
      return np.ones(self.dims.b, bool), out[1]
    return out

  @staticmethod
  def any_rows(data) -> bool:
    del data
    return True  # every row of the synthetic batch stays valid: every phase runs

  # ------------------------------------------------------------------------- the collect side's sources

  def next_prompts(self):
    """The synthetic batch's prompts (one per group) and dataset indices."""
    data = self.record.data
    return list(data.problems[::self.group_size]), np.arange(self.facts.num_prompts) % self.n

  def pilot_rows(self, r, problems, index, key):
    del problems, index, key
    return r.data  # the synthetic rows stand for the pilot rollouts

  def roll_out(self, r, st) -> StepData:
    """The rewards on the reference answers (strict: one that raises on them is broken), then the scoring's
    tail (``score_tail``: multi-reward, rollout-phase shaping) on the synthetic rows (which carry a greedy
    baseline's rewards, and stand for pilot rows)."""
    answers = [p.answer for p in r.data.problems]
    for reward in st["rewards"]:
      self.call("rewards", reward, lambda reward=reward: reward.fn(answers, list(r.data.problems)))
    return score_tail(self, r.data, r.side, st, r.metrics)

  @staticmethod
  def resample(r, stage):
    """A replay stage's ``hints``/``splice`` need a sampler: the collector checks their returns at run time."""
    del stage
    return r.data

  # ------------------------------------------------------------------------- the train side's devices

  def forwards(self, data: StepData, metrics: dict) -> StepData:
    """The synthetic batch carries every input a need can ask (``_synthetic``); the extras the update reads are
    added as the step adds them (``rljax.train._inputs.with_batch_extras``: the loss terms' ``batch_extras``)."""
    del metrics
    return self.checker.run("the batch_extras of a term of rl.loss",
                            lambda: with_batch_extras(data, self.recipe.batch_extras()))

  @staticmethod
  def place(host: dict) -> dict:
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    return jax.tree.map(jnp.asarray, host)

  def task_gradients(self, batch):
    """A synthetic Gram matrix: every task present, unit gradients at 60 degrees."""
    del batch
    k = int(self.facts.num_tasks)
    return np.full((k, k), 0.5) + 0.5 * np.eye(k), np.ones(k, bool)

  def optimize(self, run) -> None:
    """The hparams the loss reads at the first step (the loss's values, then each controller's initial ones),
    then each loss term, the aggregation, the objective and the critic's loss, traced as in the update, on the
    policy outputs ``logp_old + 0.01``."""
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    from rljax.objectives import call_with_statistics  # pylint: disable=import-outside-toplevel
    from rljax.types import PolicyOutputs  # pylint: disable=import-outside-toplevel
    recipe, checker, label, batch = self.recipe, self.checker, self.label, run.batch
    self.out = out = PolicyOutputs(logp=batch.logp_old + 0.01, entropy=batch.entropy_old, values=batch.values_old)
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
    run.update_metrics = {}

  def control_inputs(self, run) -> ControlInputs:
    return ControlInputs(batch=run.batch, data=run.data, rollout_stats=run.stats, update_metrics={},
                         policy_logp=lambda: self.out.logp)

  def set_controllers(self, new: dict) -> None:
    """Each controller's hparams and temperature of its new state, checked."""
    for c in self.recipe.controllers:
      c_label = self.label("controllers", c)
      self.checker("controllers.hparams", c_label, lambda c=c: c.hparams(new[c.name]))
      if c.temperature is not None:
        self.checker("controllers.temperature", c_label, lambda c=c: c.temperature(new[c.name]))
    self.ctl_state = new
