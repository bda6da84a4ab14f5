"""Stateful advantage estimators: ``init() -> state``, ``update(state, ...) -> (advantages, info, state)``.

State is a NamedTuple of arrays (a pytree), so it can be carried through a
jitted train step and checkpointed; changing it never recompiles. The
factories close over static hyper-parameters (optax pattern).
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from rljax import _groups as G
from rljax.advantages._outcome import _metrics

Array = jax.Array

__all__ = ["StatefulEstimator", "RoleEMAState", "HADWState", "role_ema_baseline", "hadw"]


class StatefulEstimator(NamedTuple):
  """``init() -> state``; ``update(state, ...) -> (advantages, info, new_state)``."""
  init: Callable
  update: Callable


class RoleEMAState(NamedTuple):
  baseline: Array  # [num_keys] float32 EMA of the mean return per key
  seen: Array      # [num_keys] bool, key has been updated at least once


def role_ema_baseline(*, num_keys: int, decay: float = 0.95, update_first: bool = False,
                      init: str = "zero") -> StatefulEstimator:
  """Role-conditioned EMA baseline (SPIRAL RAE): ``A_i = R_i − b_(key_i)``.

  Per key k (e.g. a dense id of (game, role)):
  ``b_k ← α·b_k + (1−α)·mean{R_i : key_i = k}`` for keys present in the batch
  (others unchanged). ``update_first=False`` (default) uses the baseline from
  before this batch; ``True`` updates first. ``init="zero"`` (default): every
  baseline starts at 0, as in the authors' code; ``"batch_mean"``: a key never
  seen before uses the batch mean of its returns (then its EMA starts there).
  With α = 0 and ``update_first=True`` this equals ``key_baseline``. Source:
  SPIRAL role-conditioned advantage estimation (seed 000_3e503271be254a43.txt
  L91); authors' code github.com/spiral-rl/spiral (train_spiral.py,
  ``role_baseline_ema_gamma = 0.95``, read before update; spiral/utils.py ``EMA``
  starting at 0.0). Difference: the authors update once per game (one return
  per role), we once per batch with the key's mean return; with one game per
  batch the two agree.

  ``update(state, rewards [B], key [B] int in [0, num_keys), valid=None)``
  returns ``(advantages [B], info, new_state)``.
  """
  num_keys = G.resolve_num(num_keys, 1, "num_keys")
  if not 0.0 <= decay < 1.0:
    raise ValueError(f"decay must be in [0, 1), got {decay!r}")
  G.check_choice("init", init, ("zero", "batch_mean"))

  def init_state() -> RoleEMAState:
    # "zero": every baseline counts as seen at b = 0 (the authors' EMA(0.0))
    return RoleEMAState(jnp.zeros((num_keys,), jnp.float32), jnp.full((num_keys,), init == "zero", bool))

  def update(state: RoleEMAState, rewards: Array, key: Array, valid: Optional[Array] = None):
    r, kid, v, nk = G.prepare(rewards, key, valid, num_keys, group_name="key")
    cnt = G.seg_sum(v, kid, nk)[:nk]
    mean = G.seg_sum(r * v, kid, nk)[:nk] / jnp.maximum(cnt, 1.0)
    present = cnt > 0
    b_old = state.baseline.astype(r.dtype)
    b_new = jnp.where(present, jnp.where(state.seen, decay * b_old + (1 - decay) * mean, mean), b_old)
    used = b_new if update_first else jnp.where(state.seen, b_old, mean)
    used = jnp.concatenate([used, jnp.zeros((1,), r.dtype)])
    adv = (r - used[kid]) * v
    new_state = RoleEMAState(b_new.astype(state.baseline.dtype), state.seen | present)
    return adv, _metrics(adv, r, v), new_state

  return StatefulEstimator(init_state, update)


class HADWState(NamedTuple):
  anchor: Array   # [] float32 the difficulty anchor (EMA, or window mean, of the batch accuracy)
  seen: Array     # [] bool
  history: Array  # [max(window, 1)] float32 the last ``window`` batch accuracies, newest last (window > 0)
  count: Array    # [] int32 how many of ``history`` are filled


def hadw(*, decay: float = 0.9, strength: float = 1.0, signed: bool = True, window: int = 0,
         scale: float = 1.0) -> StatefulEstimator:
  """HA-DW: history-anchored difficulty weighting of group-relative advantages.

  With ``acc_g`` the group's accuracy and ``a`` the difficulty anchor:

      A'_i = s · A_i · exp(λ·sgn(A_i)·(a − acc_g(i)))          (signed=True, default)

  On prompts harder than the anchor (acc < a) positive advantages are up-weighted and negative ones
  down-weighted, the reverse on easier prompts. ``signed=False``: ``s·exp(λ·(a − acc_g))`` for every row (hard
  prompts amplified in both directions). Weights are positive, so signs never flip.

  The anchor:

  * ``window=0`` (default): an EMA of past batch accuracies, used before it is updated: after weighting,
    ``a ← α·a + (1−α)·acc_batch`` (``acc_batch`` = mean of ``correct`` over valid rows; the first call
    initialises ``a = acc_batch``, weighting with it).
  * ``window=k > 0``: the authors' anchor, the mean of the last k batch accuracies *including* the current
    batch's (their ``trainer.reward_window_k``: default 0, which anchors on the current batch's mean alone, i.e.
    ``window=1``; their GSPO script means 10 but passes it without Hydra's ``+``, so it needs
    ``+trainer.reward_window_k=10``).

  Authors' code (github.com/yangfengkai/HA-DW: verl/trainer/ppo/core_algos.py,
  ``compute_ha_dw_outcome_advantage``): ``1.5·exp(−sgn(μ_g − μ_hist)·sgn(r_i − μ_g)·|μ_g − μ_hist|)`` times the
  GRPO advantage, i.e. ``s = 1.5``, λ = 1, ``a = μ_hist`` (window mean of batch-mean rewards), signed: equal to
  ``hadw(window=k, scale=1.5)`` applied to ``grpo`` with ``correct`` = the rewards (their statistics are of
  the reward; k = 1 at their trainer's default, 10 with ``+trainer.reward_window_k=10``). The paper's own
  description (TRL PR #4872's summary) has a Kalman-style anchor step η·σ_t, which their released code does not
  implement. Our default keeps the EMA anchor and ``s = 1`` (a factor
  1.5 on every advantage is a learning-rate change, not a reweighting).
  Source: HA-DW (seed 001_5839a3671b0b4d92.txt L177, arXiv 2601.08521).

  ``update(state, advantages [B], correct [B], group_id [B], valid=None,
  num_groups=None)`` returns ``(advantages [B], info, new_state)``;
  ``info["weights"]`` holds the per-row weights.
  """
  if not 0.0 <= decay < 1.0:
    raise ValueError(f"decay must be in [0, 1), got {decay!r}")
  if not strength >= 0:
    raise ValueError(f"strength must be >= 0, got {strength!r}")
  if not (isinstance(window, int) and window >= 0):
    raise ValueError(f"window must be an int >= 0, got {window!r}")
  if not scale > 0:
    raise ValueError(f"scale must be > 0, got {scale!r}")
  slots = max(window, 1)

  def init() -> HADWState:
    return HADWState(jnp.zeros((), jnp.float32), jnp.zeros((), bool), jnp.zeros((slots,), jnp.float32),
                     jnp.zeros((), jnp.int32))

  def update(state: HADWState, advantages: Array, correct: Array, group_id: Array,
             valid: Optional[Array] = None, num_groups: Optional[int] = None):
    a, gid, v, ng = G.prepare(advantages, group_id, valid, num_groups, rewards_name="advantages")
    G.check_shape("correct", correct, a.shape)
    c = jnp.asarray(correct).astype(a.dtype)
    acc_g = G.row_stats(c, gid, v, ng, ddof=0).mean
    acc_b = jnp.sum(c * v) / jnp.maximum(jnp.sum(v), 1.0)
    any_valid = jnp.sum(v) > 0
    history, count = state.history, state.count
    if window > 0:
      history = jnp.where(any_valid, jnp.roll(history, -1).at[-1].set(acc_b.astype(history.dtype)), history)
      count = jnp.where(any_valid, jnp.minimum(count + 1, window), count)
      filled = jnp.arange(window) >= window - count
      anchor = jnp.where(count > 0, jnp.sum(jnp.where(filled, history, 0.0)) / jnp.maximum(count, 1), acc_b)
      anchor = anchor.astype(a.dtype)
      new_anchor = anchor
    else:
      anchor = jnp.where(state.seen, state.anchor.astype(a.dtype), acc_b)
      new_anchor = jnp.where(state.seen, decay * anchor + (1 - decay) * acc_b, acc_b)
    direction = jnp.sign(a) if signed else 1.0
    w = scale * jnp.exp(strength * direction * (anchor - acc_g))
    adv = a * w * v
    new_state = HADWState(jnp.where(any_valid, new_anchor, state.anchor).astype(state.anchor.dtype),
                          state.seen | any_valid, history, count.astype(jnp.int32))
    return adv, _metrics(adv, a, v, weights=w * v, anchor=anchor), new_state

  return StatefulEstimator(init, update)


def _role_ema_baseline_stage(*, decay: float = 0.95, update_first: bool = False, init: str = "zero"):
  """SPIRAL role-conditioned EMA baseline, one baseline per task id: ``A_i = R_i − b_(task_i)``.

  The key is ``data.task_id`` (the paper's key is a (game, role) pair; task ids are our stand-in), so
  ``num_keys`` is the run's ``num_tasks``, bound at start-up (a task without task ids is refused then). The
  state (``RoleEMAState``: per-task EMA baselines) is checkpointed.
  """
  from rljax.stages import Advantage  # pylint: disable=import-outside-toplevel
  role_ema_baseline(num_keys=1, decay=decay, update_first=update_first, init=init)  # validates now

  def unbound(*_):
    raise ValueError("role_ema_baseline keeps one baseline per task id: bind it to the run's facts first "
                     "(Recipe.bind / stage.bind(RunFacts(..., num_tasks=...)))")

  def bind(stage, facts):  # pylint: disable=unused-argument
    if not facts.num_tasks:
      raise ValueError("role_ema_baseline keeps one baseline per task id, but this run's task defines none "
                       "(task.task_id / task.num_tasks); use key_baseline(key='group_id') or a multi-task task")
    est = role_ema_baseline(num_keys=int(facts.num_tasks), decay=decay, update_first=update_first, init=init)

    def fn(data, state):
      return est.update(state, data.rewards, data.require("task_id", "role_ema_baseline"), valid=data.valid)

    return Advantage(fn, name="role_ema_baseline", init=est.init, needs={"task_id"}, bind_fn=bind)

  return Advantage(unbound, name="role_ema_baseline", init=unbound, needs={"task_id"}, bind_fn=bind)


def _hadw_stage(*, decay: float = 0.9, strength: float = 1.0, signed: bool = True, window: int = 0, scale: float = 1.0):
  """HA-DW transform: ``A' = s·A·exp(λ·sgn(A)·(anchor − acc_g))`` (``signed=False``: no ``sgn(A)``), ``acc_g`` the
  group's mean of ``data.correct``.

  The anchor (``HADWState``: an EMA of the batch accuracy, or with ``window=k`` the mean of the last k batch
  accuracies as in the authors' code; ``hadw(window=1, scale=1.5)`` after ``grpo`` is their estimator at their
  trainer's default, ``window=10`` with ``+trainer.reward_window_k=10``) is
  checkpointed. Advantages as in ``_stages.sequence_advantages``.
  """
  from rljax.advantages import _stages as S  # pylint: disable=import-outside-toplevel
  from rljax.stages import Advantage  # pylint: disable=import-outside-toplevel
  est = hadw(decay=decay, strength=strength, signed=signed, window=window, scale=scale)  # validates now
  advantages = S.sequence_advantages("hadw")

  def fn(data, state):
    return est.update(state, advantages(data), data.correct, data.group_id, valid=data.valid,
                      num_groups=data.num_groups)

  return Advantage(fn, name="hadw", init=est.init, transform=True)


_S0 = "seed 000_3e503271be254a43.txt"
_S1 = "seed 001_5839a3671b0b4d92.txt"


def _technique_rows():
  from rljax._technique import Fidelity, Technique
  return (
      Technique("role_ema_baseline", "advantage", role_ema_baseline, "b_k ← αb_k + (1−α)mean_k R; A = R − b_key",
                f"{_S0} L91",
                stage=_role_ema_baseline_stage,
                fidelity=Fidelity("authors_code", "github.com/spiral-rl/spiral: train_spiral.py (role_baseline_ema), "
                                  "spiral/utils.py (EMA)",
                                  "authors update once per game, ours once per batch with the key's mean return (equal "
                                  "with one game per batch); init='batch_mean' starts at the first batch mean",
                                  read="spiral-rl/spiral@a02d0ed8 (2025-07-15) train_spiral.py:75-79 "
                                       "(filter_zero_adv=True, use_role_baseline=True, role_baseline_ema_gamma=0.95), "
                                       "99-100 (reward_scaling, gamma), 105 (use_intermediate_rewards), 158-162 "
                                       "(one EMA per player id 0/1 in each actor), "
                                       "486-514 "
                                       "prepare_trajectories (baseline read before its update, reward −= baseline, "
                                       "× gamma^(turns to the end), a turn with 0 dropped); run.sh (--gamma 1); "
                                       "spiral/utils.py:18-32 EMA (value starts at 0.0). Per-row review e (#51): "
                                       "train_spiral.py:186-200 (step: whole games are played, each through "
                                       "prepare_trajectories and so through the EMA, until at least "
                                       "rollout_batch_size_per_device turns are collected (16 in run.sh), then a "
                                       "random 16 are kept without replacement: the EMA has moved with turns that "
                                       "never reach the batch), 820-824 (SelfPlayLearner.compute_monte_carlo_"
                                       "advantages: the summed token reward, no baseline), run.sh "
                                       "(--rollout_batch_size_per_device 16, --num_samples 1, --gpus 8); the "
                                       "learner is oat's PPOLearner (README.md:55 pins oat-llm==0.1.3.post1; read at "
                                       "sail-sg/oat@v0.1.3.post2 (78d6f95) oat/algorithms/ppo.py:83-86 reward_scale "
                                       "1.0, :79-82 whiten_adv False, :358-362 (final reward × reward_scale), "
                                       ":449-458 (on the last response token; critic_type 'drgrpo', oat/args.py:103, "
                                       "calls the override)): the turn's A is its shaped reward × oat's "
                                       "reward_scale",
                                  defaults=(("decay", "0.95", "role_baseline_ema_gamma = 0.95"),
                                            ("update_first", "False (read before the update)",
                                             "read before the update ('to be unbiased')"),
                                            ("init", "'zero'", "EMA.value = 0.0"),
                                            ("key", "the stage's task_id", "the player id (role 0/1) in each actor"),
                                            ("reward scale", "none (the task's reward)",
                                             "reward_scaling = 1.0 (the baseline tracks the scaled reward); oat's "
                                             "PPOArgs.reward_scale = 1.0 multiplies the shaped reward again in the "
                                             "learner, after the baseline"),
                                            ("EMA updates per actor step", "the batch's valid rows",
                                             "every game played in the step (until ≥ 16 turns, "
                                             "rollout_batch_size_per_device in run.sh), of which a random 16 turns "
                                             "are kept"),
                                            ("turn discount", "none",
                                             "gamma = 1.0 (run.sh --gamma 1), use_intermediate_rewards True: "
                                             "turn i gets (R − b)·γ^(turns after it)"),
                                            ("zero-advantage turns", "kept",
                                             "filter_zero_adv = True: a turn whose shaped reward is exactly 0 is "
                                             "dropped")),
                                  placement="theirs: in each actor's prepare_trajectories, once per finished game "
                                            "and per trained role, on that role's scaled final reward, before the "
                                            "turns are turned into token rewards (the shaped reward then broadcast "
                                            "to every turn); ours: the advantage stage, once per step on the step's "
                                            "rows keyed by task_id, b_k moved once with the key's mean return over "
                                            "the batch's valid rows",
                                  deviations=(
                                      "one update per batch with the key's mean return; theirs one update per "
                                      "game (equal with one game per key per batch)",
                                      "the stage keys by task_id (our stand-in for (game, role)); theirs by player "
                                      "id inside each actor process (baselines not shared across actors)",
                                      "decay = 0 is allowed (then b = the last batch mean); theirs asserts "
                                      "0 < decay < 1",
                                      "the baselines are float32 state (checkpointed), also under x64",
                                      "no turn discount (theirs γ^(turns to the end), γ = 1 in their defaults and "
                                      "script: equal there); no reward scale (theirs 1.0)",
                                      "rows with A = 0 stay in the batch (they add no gradient but count in the "
                                      "aggregation's denominator); theirs drop such turns (filter_zero_adv)",
                                      "their EMA moves with every game an actor plays in a step, also the games "
                                      "whose turns are dropped when the actor subsamples its turns to 16 "
                                      "(train_spiral.py:193-200); ours moves only with the rows in the batch"))),
      Technique("hadw", "advantage", hadw,
                "A' = s·A·exp(λ·sgn(A)·(anchor − acc_g)); anchor = EMA or window mean of batch acc",
                f"{_S1} L177; arXiv 2601.08521",
                stage=_hadw_stage,
                fidelity=Fidelity("authors_code", "github.com/yangfengkai/HA-DW: verl/trainer/ppo/core_algos.py "
                                  "(compute_ha_dw_outcome_advantage)",
                                  "authors = window=k, scale=1.5 (k = trainer.reward_window_k, default 0: the "
                                  "current batch's mean, window=1; 10 with +trainer.reward_window_k=10); default EMA "
                                  "anchor and s=1: ×1.5 is a learning-rate change",
                                  read="yangfengkai/HA-DW@8b087945 (2026-05-01) verl/trainer/ppo/core_algos.py:742-805 "
                                       "compute_ha_dw_outcome_advantage, 154-159 compute_reward_history_stats; "
                                       "verl/trainer/ppo/ray_trainer.py:330-331 (deque(maxlen=reward_window_k)), "
                                       "1452-1462 (the batch's mean reward appended before the advantage step); "
                                       "examples/hadw_trainer/gspo_hadw.sh:17-61 (REWARD_WINDOW_K=10, adv_estimator="
                                       "ha-dw, loss_mode gspo, rollout.n 8, loss_agg_mode seq-mean-token-mean, "
                                       "reward_manager dapo; grpo_hadw.sh and dapo_hadw.sh are empty at this "
                                       "commit); verl/utils/reward_score/__init__.py:59-62, math_dapo.py:265 "
                                       "(math / math_dapo / aime data: +1 correct, −1 wrong); #51 read-whole pass "
                                       "(rB): gspo_hadw.sh:14-15 (MODEL_PATH Qwen/Qwen3-4B-Base, TRAIN_FILE "
                                       "/data/gsm8k/train.parquet, the data made by examples/data_preprocess/"
                                       "gsm8k.py:47, data_source 'openai/gsm8k'), reward_score/__init__.py:44-47 "
                                       "and gsm8k.py:52-72 (1.0 correct, 0 otherwise); the record said the script "
                                       "names no training file. Eleventh draw (#51 item 4, seed 20261216): "
                                       "ray_trainer.py:330 (reward_window_k = trainer.get('reward_window_k', "
                                       "trainer.get('acc_window_k', 0))) with verl/trainer/config/ppo_trainer.yaml:"
                                       "113-202 (no trainer.reward_window_k key): the default is 0, "
                                       "batch_reward_history None, and core_algos.py:765-767 then takes hist_mean = "
                                       "torch.mean(scores), the current batch's mean reward; gspo_hadw.sh:45 passes "
                                       "trainer.reward_window_k=${REWARD_WINDOW_K} without '+', which Hydra refuses "
                                       "for a key not in the struct config ('Could not override "
                                       "trainer.reward_window_k ... use +trainer.reward_window_k=10', checked by "
                                       "composing their config with hydra-core 1.3.8): the script does not start as "
                                       "released, and its 10 is reached only with +trainer.reward_window_k=10; "
                                       "README.md:29 (their training data DigitalLearningGmbH/MATH-lighteval, scored "
                                       "by reward_score/__init__.py:47-50 math_reward: 1.0 / 0.0). The record gave "
                                       "reward_window_k = 10 as theirs and listed neither the default nor the "
                                       "fallback",
                                  defaults=(("window", "0 (EMA anchor)",
                                             "trainer.reward_window_k, default 0 (ray_trainer.py:330; not in "
                                             "ppo_trainer.yaml): no history, the anchor is the current batch's mean "
                                             "reward (core_algos.py:765-767) = window=1; gspo_hadw.sh:45 sets 10 "
                                             "without '+', refused by Hydra (the script fails at start-up), "
                                             "+trainer.reward_window_k=10 gives 10"),
                                            ("scale", "1.0", "1.5, hard-coded"),
                                            ("strength (λ)", "1.0", "1 (exp(direction·|μ_g − μ_hist|))"),
                                            ("signed", "True", "signed (−sgn(μ_g − μ_hist)·sgn(r − μ_g))"),
                                            ("decay", "0.9 (EMA, window=0)", "no EMA"),
                                            ("group step", "the incoming advantages (e.g. grpo, eps 1e-6, ddof 1)",
                                             "GRPO in the same function: (r − μ_g)/(std_g + 1e-6), singleton "
                                             "mean 0 std 1"),
                                            ("policy loss (not this stage's)", "the recipe's",
                                             "loss_mode gspo at actor.yaml's clip_ratio 0.2 / 0.2, "
                                             "seq-mean-token-mean (gspo_hadw.sh)"),
                                            ("reward the statistics read", "data.correct (0/1)",
                                             "the summed token reward; reward_manager dapo → default_compute_score "
                                             "on the script's default TRAIN_FILE /data/gsm8k/train.parquet "
                                             "(openai/gsm8k): 1 / 0 (= acc); on math, math_dapo and aime data "
                                             "+1 / −1")),
                                  placement="theirs: verl's advantage step, once per step on the whole batch; the "
                                            "anchor is the mean of the last k = trainer.reward_window_k batch-mean "
                                            "rewards, the current batch's appended in the reward step before it "
                                            "(k = 0, the default: no history, the current batch's mean reward); the "
                                            "statistics are of "
                                            "the summed token reward; ours: a transform of the advantage stage's "
                                            "output, once per step, acc_g = group mean of data.correct over valid "
                                            "rows; the EMA anchor (window=0) is moved after weighting, a window "
                                            "(window=k) takes the current batch's accuracy first, as theirs",
                                  deviations=(
                                      "default anchor is an EMA used before its update (decay 0.9) and s = 1; "
                                      "hadw(window=1, scale=1.5) on grpo is theirs at their trainer's default "
                                      "(reward_window_k 0: the current batch's mean reward), hadw(window=10, "
                                      "scale=1.5) with +trainer.reward_window_k=10 (the value gspo_hadw.sh means; "
                                      "as written, without '+', Hydra refuses it and the run does not start)",
                                      "the stage reads data.correct for accuracies; theirs the summed reward "
                                      "(equal for a 0/1 reward, as on their script's default gsm8k data; with "
                                      "verl's ±1 math reward (math_dapo / aime data) μ = 2·acc − 1, so "
                                      "|μ_g − μ_hist| and the weight exp(λ·|Δ|) are those of acc with 2λ: "
                                      "strength=2 there)",
                                      "batch accuracy over valid rows only; theirs over every row",
                                      "a singleton group: ours follows the incoming estimator (grpo: 0); theirs "
                                      "r/(1+ε)·1.5·exp(...)",
                                      "norm_adv_by_std_in_grpo=False in theirs drops the weight (A = r − μ_g); ours "
                                      "weights whatever advantages it gets",
                                      "anchor state float32 (theirs: np.float32 history, a Python float mean)"))),
  )


TECHNIQUES = _technique_rows()
