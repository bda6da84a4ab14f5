"""How the RL loop runs each advantage estimator: the stage factories its catalog row names (``stage=``).

Each factory takes the estimator's hyper-parameters; the loop supplies the data (``rewards``, ``group_id``,
``valid``, ``num_groups``, masks, and whatever the estimator needs: answer keys, task ids, critic values, a
greedy baseline, reference log-probs). Outcome rewards are ``data.rewards [B]`` (the sum of the token rewards
when a shaping stage wrote token-level ones, as verl scores them); token-level estimators read
``data.token_rewards`` when present. Padding and filtered-out rows (``valid`` False) get zero advantage.

Transforms (``transform=True``: ``task_normalized``, ``hadw``, ``difficulty_weight``, ``gagar``, ``uniqueness``,
``sign_preserving_modulation``) read the advantages the estimator before them wrote. The multi-reward rows
(``gdpo``, ``dara``, ``sa_mrpo``, ``gd2po``) are ``MultiReward(produces="advantages")`` stages reading
``data.reward_components [B, K]`` (one column per reward of the recipe, in ``data.reward_names`` order; their
``weights`` are in that order). Every factory traces its stage once on a tiny step when it is built (``_checked``),
so a bad hyper-parameter fails at ``stage(...)`` time, never mid-run.
"""
from __future__ import annotations

import inspect

import jax
import numpy as np

from rljax.advantages import _outcome, _stateful, _token
from rljax.stages import (Advantage, MultiReward, _input, _signature, data_stage_factory, keyword,
                          probe_step)

_GROUP = {"rewards": "rewards", "group_id": "group_id", "valid": "valid", "num_groups": "num_groups"}
_ROWS = {"group_id": "group_id", "valid": "valid", "num_groups": "num_groups"}


def _completion(data) -> np.ndarray:
  """The tokens an advantage may sit on: completion tokens of valid rows."""
  return data.completion_mask & data.valid[:, None]


def _token_rewards(data):
  """Token rewards when a stage wrote them, else the outcome reward (placed on the last token by the estimator)."""
  return data.token_rewards if data.token_rewards is not None else data.rewards


def _passed(data) -> np.ndarray:
  """The task verifier's verdict as bool: ``correct > 0.5`` (``correct`` is its 0/1 score)."""
  return np.asarray(data.correct) > 0.5


def _absent(data):  # pylint: disable=unused-argument
  """An optional input the loop does not provide (the function's default, None)."""
  return None


def _prm_logp(data) -> np.ndarray:
  """``data.extras["logp_prm"] [B, T]``: a process reward model's log-probs of the rollout tokens (``oprl``)."""
  x = data.extras.get("logp_prm") if data.extras else None
  if x is None:
    raise ValueError("oprl(prm='extras') needs data.extras['logp_prm'] [B, T], the PRM's log-probs of the rollout "
                     "tokens, written by an earlier stage; use prm='policy' without a PRM")
  return np.asarray(x)


def _mean_entropy(data) -> np.ndarray:
  """Each row's mean sampler entropy over its completion tokens ``[B]``."""
  ent = data.require("entropy_behavior", "canon")
  m = data.completion_mask
  return (np.where(m, ent, 0.0).sum(1) / np.maximum(m.sum(1), 1)).astype(np.float32)


def _sequence_advantages(by: str):
  """Source of ``data.advantages`` as ``[B]``, for a transform defined on whole rows.

  Token-level advantages ``[B, T]`` are accepted when they are constant over each valid row's completion tokens
  (an outcome estimator broadcast over tokens: ``reinforce_pp_baseline``, ``remax`` without token rewards); the
  row's value on its first completion token is taken. Advantages that vary within a row (``gae``, ``tempo``, token
  rewards) are refused: a row-level transform of them is not defined.
  """
  def source(data):
    adv = np.asarray(data.require("advantages", by))
    adv = adv.astype(np.result_type(np.float32, adv.dtype))  # float32, or float64 under jax_enable_x64
    if adv.ndim == 1:
      return adv
    m = _completion(data)
    row = np.where(m.any(1), adv[np.arange(adv.shape[0]), np.argmax(m, 1)], 0.0).astype(adv.dtype)
    spread = np.abs(np.where(m, adv - row[:, None], 0.0)).max(initial=0.0)
    if spread > 1e-5 * (1.0 + np.abs(row).max(initial=0.0)):
      raise ValueError(f"{by} transforms sequence-level advantages [B], but the estimator before it wrote "
                       f"token-level ones that vary within a row (by up to {spread:.3g}); put {by} after an "
                       "outcome estimator (grpo, rloo, ...)")
    return row

  return source


def _checked(fn, cls=Advantage, *, inputs, doc: str = "", **kw):
  """``data_stage_factory(fn, cls, inputs=inputs, **kw)`` whose stages are traced once when built.

  The trace (``jax.eval_shape`` on a tiny step: no compile, no run) runs ``fn``'s hyper-parameter checks, so a
  bad value fails at ``stage(...)`` time rather than mid-run. K (reward columns, segments, turns) is the length of
  a sequence hyper-parameter (``weights``, ``reward_min``), else 2.
  """
  base = data_stage_factory(fn, cls, inputs=inputs, **kw)
  sig = inspect.signature(base)

  def factory(*args, **kwargs):
    stage = base(*args, **kwargs)
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    hyper = dict(bound.arguments)
    k = next((len(v) for v in hyper.values() if isinstance(v, (list, tuple))), 2)
    tiny = probe_step(components=k, steps=k)
    values = {a: _input(tiny, s, fn.__name__) for a, s in inputs.items()}
    arrays = {a: v for a, v in values.items() if isinstance(v, np.ndarray)}
    static = {a: v for a, v in values.items() if a not in arrays}
    jax.eval_shape(lambda x: fn(**x, **static, **hyper), arrays)
    return stage

  factory.__signature__ = sig
  factory.__name__ = fn.__name__
  factory.__doc__ = doc or base.__doc__
  return factory


def _chosen(fn, arg: str, default: str, sources: dict, *, inputs, needs=None, doc: str = "", unprobed=()):
  """Stage factory of ``fn`` whose input ``arg`` comes from a source the recipe names by the keyword ``arg``.

  Args:
    sources: ``{choice: {argument: StepData field or fn(data)}}`` (``arg`` and any argument tied to it, such as
      ``num_keys``); inputs: the other loop-supplied arguments; needs: ``{choice: needs}`` beyond the inputs'.
    unprobed: choices whose source the tiny probe step lacks (e.g. an ``extras`` key): their hyper-parameters are
      checked by tracing the ``default`` choice's stage instead.
  """
  factories = {c: (data_stage_factory(fn, Advantage, inputs={**inputs, **src}, needs=(needs or {}).get(c, ()))
                   if c in unprobed else _checked(fn, inputs={**inputs, **src}, needs=(needs or {}).get(c, ())))
               for c, src in sources.items()}
  tied = {a for src in sources.values() for a in src}
  sig = _signature(fn, drop=(*inputs, *tied), add=(keyword(arg, default),))

  def factory(*args, **kwargs):
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    hyper = dict(bound.arguments)
    choice = hyper.pop(arg)
    if choice not in factories:
      raise ValueError(f"{fn.__name__}: {arg} must be one of {list(factories)}, got {choice!r}")
    if choice in unprobed:
      factories[default](**hyper)  # traces the default choice: checks the hyper-parameters now
    return factories[choice](**hyper)

  factory.__signature__ = sig
  factory.__name__ = fn.__name__
  factory.__doc__ = doc
  return factory


def group_estimator(fn, **extra_inputs):
  """Stage factory of an outcome estimator ``fn(rewards, group_id, *, valid, num_groups, ...)``."""
  return _checked(fn, inputs={**_GROUP, **extra_inputs})


def _transform(fn, **inputs):
  """Stage factory of a row-level advantage transform ``fn(advantages, ..., group_id, *, valid, num_groups)``."""
  return _checked(fn, inputs={"advantages": _sequence_advantages(fn.__name__), **inputs}, transform=True,
                  doc=f"Stage factory of the ``{fn.__name__}`` transform: reads the estimator's advantages "
                      f"(``[B]``, or ``[B, T]`` constant within each row), its hyper-parameters as arguments.")


def role_ema_baseline(*, decay: float = 0.95, update_first: bool = False, init: str = "zero"):
  """SPIRAL role-conditioned EMA baseline, one baseline per task id: ``A_i = R_i − b_(task_i)``.

  The key is ``data.task_id`` (the paper's key is a (game, role) pair; task ids are our stand-in), so
  ``num_keys`` is the run's ``num_tasks``, bound at start-up (a task without task ids is refused then). The
  state (``RoleEMAState``: per-task EMA baselines) is checkpointed.
  """
  _stateful.role_ema_baseline(num_keys=1, decay=decay, update_first=update_first, init=init)  # validates now

  def unbound(*_):
    raise ValueError("role_ema_baseline keeps one baseline per task id: bind it to the run's facts first "
                     "(Recipe.bind / stage.bind(RunFacts(..., num_tasks=...)))")

  def bind(stage, facts):  # pylint: disable=unused-argument
    if not facts.num_tasks:
      raise ValueError("role_ema_baseline keeps one baseline per task id, but this run's task defines none "
                       "(task.task_id / task.num_tasks); use key_baseline(key='group_id') or a multi-task task")
    est = _stateful.role_ema_baseline(num_keys=int(facts.num_tasks), decay=decay, update_first=update_first,
                                      init=init)

    def fn(data, state):
      return est.update(state, data.rewards, data.require("task_id", "role_ema_baseline"), valid=data.valid)

    return Advantage(fn, name="role_ema_baseline", init=est.init, needs={"task_id"}, bind_fn=bind)

  return Advantage(unbound, name="role_ema_baseline", init=unbound, needs={"task_id"}, bind_fn=bind)


def hadw(*, decay: float = 0.9, strength: float = 1.0, signed: bool = True, window: int = 0, scale: float = 1.0):
  """HA-DW transform: ``A' = s·A·exp(λ·sgn(A)·(anchor − acc_g))`` (``signed=False``: no ``sgn(A)``), ``acc_g`` the
  group's mean of ``data.correct``.

  The anchor (``HADWState``: an EMA of the batch accuracy, or with ``window=k`` the mean of the last k batch
  accuracies as in the authors' code; ``hadw(window=10, scale=1.5)`` after ``grpo`` is their estimator) is
  checkpointed. Advantages as in ``_sequence_advantages``.
  """
  est = _stateful.hadw(decay=decay, strength=strength, signed=signed, window=window, scale=scale)  # validates now
  advantages = _sequence_advantages("hadw")

  def fn(data, state):
    return est.update(state, advantages(data), data.correct, data.group_id, valid=data.valid,
                      num_groups=data.num_groups)

  return Advantage(fn, name="hadw", init=est.init, transform=True)


_MULTI = {"rewards": "reward_components", **_ROWS}


def multi_reward(fn):
  """Stage factory of a multi-reward advantage ``fn(rewards [B, K], group_id, *, valid, num_groups, ...)``."""
  return _checked(fn, MultiReward, inputs=_MULTI, produces="advantages",
                  doc=f"Stage factory of ``{fn.__name__}``: ``MultiReward(produces='advantages')`` over "
                      "``data.reward_components [B, K]`` (columns in ``data.reward_names`` order: per-reward "
                      "``weights`` follow it); its hyper-parameters as arguments.")


reinforce_pp_baseline = group_estimator(_outcome.reinforce_pp_baseline, mask=_completion)
reinforce_pp = _checked(_outcome.reinforce_pp, inputs={"rewards": _token_rewards, "mask": _completion})
# critic PPO: needs the critic's values at sampling time; info["returns"] are the critic's targets
gae = _checked(_outcome.gae, inputs={"rewards": _token_rewards, "values": "values", "mask": _completion},
               returns=True)
# verl's token form: A_t = Σ_{s≥t} r_s − b on completion tokens (= r − b everywhere with an outcome reward)
remax = _checked(_outcome.remax, inputs={"rewards": _token_rewards, "baseline_rewards": "greedy_rewards",
                                         "mask": _completion})
task_normalized = _transform(_outcome.task_normalized, task_id="task_id", rewards="rewards", valid="valid",
                             num_tasks="num_tasks")
key_baseline = _chosen(
    _outcome.key_baseline, "key", "task_id", {
        "task_id": {"key": "task_id", "num_keys": "num_tasks"},
        "answer_ids": {"key": "answer_ids", "num_keys": "batch_size"},
        "group_id": {"key": "group_id", "num_keys": "num_groups"}},
    inputs={"rewards": "rewards", "valid": "valid"},
    doc="AdvEvo-MARL shared baseline ``A_i = R_i − mean{R_j : key_j = key_i}`` over the batch. The paper's key "
        "is an agent's functional group; ours is ``key='task_id'`` (default: one baseline per task), "
        "``'answer_ids'`` (rows with the same extracted answer, across prompts) or ``'group_id'`` (= dr_grpo).")
difficulty_weight = _transform(_outcome.difficulty_weight, correct="correct", **_ROWS)
# passing = the task verifier's verdict; the grader's ranking scores = the step's reward
gagar = _transform(_outcome.gagar, passed=_passed, scores="rewards", **_ROWS)
# strategy clusters = extracted-answer classes (the paper clusters with an LLM judge)
uniqueness = _transform(_outcome.uniqueness, correct=_passed, cluster_id="answer_ids", **_ROWS)
canon = _chosen(
    _outcome.canon, "metric", "length", {
        "length": {"metric": lambda data: np.asarray(data.lengths, np.float32)},
        "entropy": {"metric": _mean_entropy}},
    inputs={**_GROUP}, needs={"entropy": ("entropy_behavior",)},
    doc="CANON: strata by a metric of each row, ``metric='length'`` (completion tokens, default) or "
        "``'entropy'`` (mean sampler entropy over the completion: the paper's main choice); ``inter_coef`` and "
        "``intra_coef`` weigh the inter- and intra-stratum terms (the decomposition is our reading).")
# segments="rewards": reward k (column k of reward_components) scores segment k of each completion
# (reward_segments [B, T]); segments="turns" (episodes): turn k's step reward scores turn k (turn_ids), and a row
# without turn k (step_mask) neither gets nor gives a baseline for it
segment = _chosen(
    _token.segment, "segments", "rewards", {
        "rewards": {"rewards": "reward_components", "segment_ids": "reward_segments", "segment_valid": _absent},
        "turns": {"rewards": "step_rewards", "segment_ids": "turn_ids", "segment_valid": "step_mask"}},
    inputs={"mask": _completion, **_ROWS},
    doc="Segment-routed advantages ``A_{i,t} = Σ_k 1[seg_{i,t} = k]·grpo(r^(k))_i``. ``segments='rewards'`` "
        "(default): the reward components and the reward segments of each completion; ``'turns'``: a "
        "multi-turn task's per-turn step rewards routed by ``turn_ids``, ``segment_valid`` = the turns each "
        "episode played (``step_mask``).")
outcome_conditioned_baseline = _chosen(
    _token.outcome_conditioned_baseline, "outcome", "correct", {
        "correct": {"outcome": lambda data: _passed(data).astype(np.int32)},
        "answer_ids": {"outcome": "answer_ids"}},
    inputs={**_GROUP},
    doc="Blockwise Advantage Estimation's outcome-conditioned baseline ``A_i = r_i − mean{r_j : same group, "
        "same outcome}``. The paper's outcome is an intermediate (prefix) result; single-turn, ours is "
        "``outcome='correct'`` (the verifier's verdict, default: when the reward is exactly that verdict every "
        "stratum is constant and A = 0; it ranks rows by the reward's other parts) or ``'answer_ids'``.")
# the prefix tree is built from the tokens of each group's valid completions
tempo = _checked(_token.tempo, inputs={**_GROUP, "tokens": "tokens", "mask": _completion})
# per-turn rewards = the task's step rewards (one per turn, step_mask = turns that exist); episode = rewards
step_episode_mix = _checked(_token.step_episode_mix, inputs={
    "turn_rewards": "step_rewards", "turn_ids": "turn_ids", "episode_rewards": "rewards", "mask": _completion,
    "turn_valid": "step_mask", **_ROWS})
# per-turn signal = the task's step rewards (TurnSight's hindsight score); advantages [B] or [B, T]
sign_preserving_modulation = _checked(_token.sign_preserving_modulation, inputs={
    "advantages": "advantages", "signal": "step_rewards", "turn_ids": "turn_ids", "mask": _completion,
    "turn_valid": "step_mask", **_ROWS}, transform=True)
# OPRL / iStar: implicit step rewards β·log(π_φ/π_θold) summed per turn (turn_ids), step_mask = the turns that
# exist. rljax trains no PRM: prm="policy" (default) reads β·log(π_old/π_ref), prm="extras" a PRM's log-probs
# from data.extras["logp_prm"] [B, T] over π_old (the paper's reward)
oprl = _chosen(
    _token.oprl, "prm", "policy", {
        "policy": {"logp": "logp_old", "logp_ref": "logp_ref"},
        "extras": {"logp": _prm_logp, "logp_ref": "logp_old"}},
    inputs={"turn_ids": "turn_ids", "episode_rewards": "rewards", "mask": _completion, "turn_valid": "step_mask",
            **_ROWS},
    needs={"policy": ("step_rewards",), "extras": ("step_rewards",)}, unprobed=("extras",),
    doc="OPRL / iStar (``rljax.advantages.oprl``): implicit per-turn step rewards mixed with episode-level "
        "GRPO. The paper's step reward is ``β·log π_φ/π_θold`` with π_φ a PRM trained by trajectory DPO; "
        "``prm='policy'`` (default, our interpretation: no PRM is trained) uses ``β·log π_old/π_ref``, "
        "``prm='extras'`` the PRM log-probs a stage put in ``data.extras['logp_prm'] [B, T]`` over π_old.")


def implicit_progress_reward(beta: float = 1.0):
  """The implicit progress reward as a dense reward (a ``Shaping`` stage, phase ``"forward"``).

      r_t = score_t + β·(log π_old(y_t) − log π_ref(y_t))        on completion tokens of valid rows

  The abstract (seed 001 L167) gives the dense reward β·log(π/π_ref); how it joins the outcome reward is ours:
  it is added to the step's token rewards (the outcome reward on the last token when no stage wrote token
  rewards), as ``kl_in_reward`` subtracts its KL. Token-level estimators (``reinforce_pp``, ``gae``, ``remax``)
  then credit each token; outcome estimators see the summed reward. π_old is the policy that sampled the step.
  """
  from rljax.stages import Shaping  # pylint: disable=import-outside-toplevel
  _token.implicit_progress_reward(np.zeros((1, 1)), np.zeros((1, 1)), np.ones((1, 1)), beta=beta)  # validates

  def fn(data):
    mask = _completion(data)
    dense, info = _token.implicit_progress_reward(data.require("logp_old", "implicit_progress_reward"),
                                                  data.require("logp_ref", "implicit_progress_reward"), mask,
                                                  beta=beta)
    if data.token_rewards is not None:
      scores = data.token_rewards
    else:
      last = np.where(mask.any(1), mask.shape[1] - 1 - np.argmax(mask[:, ::-1], 1), 0)
      scores = np.zeros(mask.shape, np.result_type(np.float32, data.rewards.dtype))
      scores[np.arange(mask.shape[0]), last] = np.where(mask.any(1), data.rewards, 0.0)
    dense = np.asarray(dense)
    return scores + dense.astype(np.result_type(np.float32, dense.dtype)), {"mean": info["mean"]}

  return Shaping(fn, name="implicit_progress_reward", phase="forward", needs={"logp_old", "logp_ref"})


implicit_progress_reward.slot = "shaping"
