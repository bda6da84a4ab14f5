"""GRESO: probabilistic pre-rollout skipping of prompts from their reward history.

``greso(...)`` returns ``Greso(init, select, update)`` (the optax pattern):

* ``state = init(num_prompts)`` — a ``GresoState`` of JAX arrays, one entry per
  dataset prompt;
* ``admit, stats = select(state, key, prompt_ids)`` — before rollout: which of
  the candidate prompts to roll out;
* ``state, stats = update(state, prompt_ids, rewards, group_id)`` — after
  rollout: record which groups had zero reward variance.

All three are pure and jit-able (``select``/``update`` can also run eagerly on
the host with tiny cost); the state changes only through ``update``.

Reading (GRESO, 000_3e503271be254a43.txt L71, arXiv:2506.02177): prompts that
were uninformative (zero-variance group: all correct = "easy", all wrong =
"hard") tend to stay so. Checked against the authors' code
(github.com/Infini-AI-Lab/GRESO: verl/trainer/ttis/presampling_selector.py,
``easy_probabilistic_skip``/``hard_probabilistic_skip``; adaptation in
verl/trainer/ppo/ray_trainer.py): a prompt with ``z`` consecutive most recent
zero-variance observations is admitted with probability
``max(p_kind ** z, admit_floor)`` (authors: floor 0.01; ``z = 0``: always
admitted), so skipped prompts keep a chance of re-admission; optionally
``p_easy``/``p_hard`` adapt by ``adapt_step`` towards target zero-variance
fractions (``p -= step`` when the observed fraction is >= the target, else
``+=``). Defaults = the authors' run: ``p_easy = p_hard = 0.5``,
``adapt_step = 0.01``, ``target_easy = 0.25/3``, ``target_hard = 0.25·2/3``,
``p_min = 0.05``, ``p_max = 0.95`` (``adapt_step = 0`` keeps the probabilities
fixed); they adapt from the second epoch on, we from the first update. The streak
``z`` counts the most recent observations of one kind (a hard observation after
easy ones starts a hard streak of 1), as the authors count easy and hard runs. They classify a
prompt as easy/hard by its group mean (>= 0.98 / <= 0.11), which for binary
rewards and groups of fewer than 10 is our all-equal test.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from rljax._groups import (check_float_vector, check_fraction, check_group_id, check_ids, check_num_groups, check_valid,
                          group_stats)
from rljax.types import is_concrete

Array = jax.Array

__all__ = ["GresoState", "Greso", "greso"]

INFORMATIVE, EASY, HARD = 0, 1, 2


class GresoState(NamedTuple):
  zero_streak: Array  # [N] int32: consecutive most recent zero-variance observations
  kind: Array         # [N] int32: 0 informative/unseen, 1 easy (all high), 2 hard (all low)
  p_easy: Array       # [] float32 base admission probability of easy prompts
  p_hard: Array       # [] float32 base admission probability of hard prompts


class Greso(NamedTuple):
  init: Callable
  select: Callable
  update: Callable


def _check_prompt_ids(prompt_ids, n: int) -> Array:
  check_ids("prompt_ids", prompt_ids, None, n, "num_prompts")
  if is_concrete(prompt_ids) and np.size(prompt_ids):
    ids = np.asarray(prompt_ids)
    if len(np.unique(ids)) != len(ids):
      raise ValueError("prompt_ids must be unique within one call")
  return jnp.asarray(prompt_ids).astype(jnp.int32)


def greso(*, p_easy: float = 0.5, p_hard: float = 0.5, easy_threshold: float = 0.5,
          target_easy: Optional[float] = 0.25 / 3, target_hard: Optional[float] = 0.25 * 2 / 3,
          adapt_step: float = 0.01, p_min: float = 0.05, p_max: float = 0.95, admit_floor: float = 0.01) -> Greso:
  """GRESO pre-rollout filter (see the module docstring for the reading).

  Admission probability of prompt ``j``: ``q_j = 1`` if ``z_j = 0`` else
  ``max(p_{kind_j} ** z_j, admit_floor)``; ``admit_j ~ Bernoulli(q_j)`` from an
  explicit key.
  ``update``: for every group with >= 2 valid rollouts whose rewards are all
  equal, ``kind_j <- easy if mean >= easy_threshold else hard`` and
  ``z_j <- z_j + 1`` if the kind is unchanged, else ``z_j <- 1`` (an easy
  streak and a hard streak are counted apart, as the authors' traces);
  otherwise ``z_j <- 0``; prompts not rolled out (or with one
  rollout) are untouched. With ``adapt_step > 0`` and a target, after each
  update ``p_easy -= adapt_step`` if the observed easy zero-variance fraction
  is >= ``target_easy`` (skip more), else ``+= adapt_step``; same for hard;
  both clipped to ``[p_min, p_max]``.

  Args:
    p_easy, p_hard: base admission probabilities in (0, 1].
    easy_threshold: group mean separating "easy" from "hard".
    target_easy, target_hard: target zero-variance fractions in [0, 1] (None: that
      probability stays fixed); defaults the authors' 1/12 and 1/6.
    adapt_step: step of the adaptation (0: fixed probabilities; authors 0.01).
    p_min, p_max: bounds of the adapted probabilities, 0 < p_min <= p_max <= 1.
    admit_floor: smallest admission probability of a prompt with a streak, in
      [0, 1] (the authors' 0.01; 0 gives the bare ``p ** z``).

  Returns:
    ``Greso(init, select, update)``:
    ``init(num_prompts) -> GresoState``;
    ``select(state, key, prompt_ids [P]) -> (admit [P] bool, {"admit_prob" [P],
    "num_skipped", "skip_frac"})``;
    ``update(state, prompt_ids [P], rewards [B], group_id [B] (index into
    prompt_ids), valid=None) -> (state, {"zero_var_easy_frac",
    "zero_var_hard_frac", "p_easy", "p_hard"})``.
  """
  p_easy = check_fraction("p_easy", p_easy, allow_zero=False)
  p_hard = check_fraction("p_hard", p_hard, allow_zero=False)
  easy_threshold = float(easy_threshold)
  p_min = check_fraction("p_min", p_min, allow_zero=False)
  p_max = check_fraction("p_max", p_max, allow_zero=False)
  if p_min > p_max:
    raise ValueError(f"p_min must be <= p_max, got {p_min} > {p_max}")
  targets = {}
  for name, t in (("target_easy", target_easy), ("target_hard", target_hard)):
    targets[name] = None if t is None else check_fraction(name, t)
  admit_floor = check_fraction("admit_floor", admit_floor)
  adapt_step = float(adapt_step)
  if not adapt_step >= 0.0:
    raise ValueError(f"adapt_step must be >= 0, got {adapt_step!r}")

  def init(num_prompts: int) -> GresoState:
    num_prompts = check_num_groups(num_prompts, "num_prompts")
    return GresoState(jnp.zeros((num_prompts,), jnp.int32), jnp.zeros((num_prompts,), jnp.int32),
                      jnp.asarray(p_easy, jnp.float32), jnp.asarray(p_hard, jnp.float32))

  def select(state: GresoState, key: Array, prompt_ids: Array):
    ids = _check_prompt_ids(prompt_ids, state.zero_streak.shape[0])
    return _select(state, key, ids)

  @jax.jit
  def _select(state, key, ids):
    z = state.zero_streak[ids]
    base = jnp.where(state.kind[ids] == EASY, state.p_easy, state.p_hard)
    q = jnp.where(z == 0, 1.0, jnp.maximum(base ** z.astype(jnp.float32), admit_floor))
    u = jax.random.uniform(key, ids.shape)
    admit = u < q
    n = jnp.maximum(ids.shape[0], 1)
    return admit, {"admit_prob": q, "num_skipped": jnp.sum(~admit), "skip_frac": jnp.sum(~admit) / n}

  def update(state: GresoState, prompt_ids: Array, rewards: Array, group_id: Array,
             valid: Optional[Array] = None):
    ids = _check_prompt_ids(prompt_ids, state.zero_streak.shape[0])
    p = ids.shape[0]
    rewards = check_float_vector("rewards", rewards)
    b = rewards.shape[0]
    group_id = check_group_id(group_id, p, b)
    return _update(state, ids, rewards, group_id, check_valid(valid, b))

  @jax.jit
  def _update(state, ids, rewards, group_id, valid):
    p = ids.shape[0]
    valid = valid & jnp.isfinite(rewards)
    st = group_stats(rewards, group_id, p, valid)
    observed = st.count >= 2
    zero_var = observed & (st.max <= st.min)
    easy = zero_var & (st.mean >= easy_threshold)
    old_z, old_kind = state.zero_streak[ids], state.kind[ids]
    new_kind = jnp.where(observed, jnp.where(zero_var, jnp.where(easy, EASY, HARD), INFORMATIVE), old_kind)
    # the streak counts the most recent observations of the same kind (the authors count easy and hard apart)
    new_z = jnp.where(observed, jnp.where(zero_var, jnp.where(new_kind == old_kind, old_z + 1, 1), 0), old_z)
    n_obs = jnp.maximum(jnp.sum(observed), 1)
    easy_frac = jnp.sum(easy) / n_obs
    hard_frac = jnp.sum(zero_var & ~easy) / n_obs
    pe, ph = state.p_easy, state.p_hard
    if adapt_step > 0.0 and targets["target_easy"] is not None:
      pe = jnp.clip(jnp.where(easy_frac >= targets["target_easy"], pe - adapt_step, pe + adapt_step), p_min, p_max)
    if adapt_step > 0.0 and targets["target_hard"] is not None:
      ph = jnp.clip(jnp.where(hard_frac >= targets["target_hard"], ph - adapt_step, ph + adapt_step), p_min, p_max)
    new_state = GresoState(state.zero_streak.at[ids].set(new_z), state.kind.at[ids].set(new_kind), pe, ph)
    return new_state, {"zero_var_easy_frac": easy_frac, "zero_var_hard_frac": hard_frac,
                       "p_easy": pe, "p_hard": ph}

  return Greso(init, select, update)


# ----------------------------------------------------------------------------- the stage (the row's ``stage``)

def _greso_stage(*, p_easy: float = 0.5, p_hard: float = 0.5, easy_threshold: float = 0.5,
                 target_easy: Optional[float] = 0.25 / 3, target_hard: Optional[float] = 0.25 * 2 / 3,
                 adapt_step: float = 0.01, p_min: float = 0.05, p_max: float = 0.95, admit_floor: float = 0.01):
  """GRESO as a prompt filter: admitted prompts get ``group_size`` rollouts, skipped ones 0.

  State: the ``GresoState`` over the dataset prompts (``init(num_dataset_prompts)``). ``select`` draws the
  admissions of the candidates' dataset indices with the loop's key; ``observe`` records each prompt's
  zero-variance streak from ``data.rewards`` of its rows (grouped by ``data.prompt_index``).
  ``group_size`` comes from the run (``bind``).
  """
  from rljax.filters import _stages as S  # pylint: disable=import-outside-toplevel
  from rljax.stages import PromptFilter  # pylint: disable=import-outside-toplevel
  g = greso(p_easy=p_easy, p_hard=p_hard, easy_threshold=easy_threshold, target_easy=target_easy,
            target_hard=target_hard, adapt_step=adapt_step, p_min=p_min, p_max=p_max,
            admit_floor=admit_floor)  # validates

  def build(group_size):
    def select(state, prompts, key):
      n = S.layout(group_size, "greso")
      ids, inv = np.unique(np.asarray(prompts.index, np.int64), return_inverse=True)
      admit, stats = g.select(state, key, ids)
      skipped = ~np.asarray(admit)[inv]
      kind = np.asarray(state.kind)[np.asarray(prompts.index, np.int64)]
      report = {"skipped": float(skipped.sum()),  # per candidate; why: its zero-variance streak's kind
                "skipped_easy": float((skipped & (kind == EASY)).sum()),
                "skipped_hard": float((skipped & (kind == HARD)).sum())}
      return np.where(skipped, 0, n).astype(np.int64), state, {**stats, **report}

    def observe(state, data):
      if data.batch_size == 0:  # an empty batch: nothing observed
        return state, {}
      ids, rows = S.per_prompt(data)
      return g.update(state, ids, data.rewards, rows.astype(np.int32))

    return PromptFilter(g.init, select, observe, name="greso", bind_fn=lambda stage, facts: build(facts.group_size))

  return build(None)


_greso_stage.slot = "prompt_filters"


_S0 = "000_3e503271be254a43.txt"


def _technique_rows():
  from rljax._technique import Fidelity, Technique
  return (
      Technique("greso", "filter", greso, "admit_j ~ Bernoulli(max(p_kind^z_j, 0.01)), z_j = zero-variance streak",
                f"{_S0} L71 (GRESO, arXiv:2506.02177)",
                stage=_greso_stage,
                fidelity=Fidelity("authors_code", "github.com/Infini-AI-Lab/GRESO: verl/trainer/ttis/"
                                  "presampling_selector.py (*_probabilistic_skip)",
                                  "authors' defaults (floor 0.01; p adapts ±0.01 to 1/12, 1/6, in [0.05, 0.95]); we "
                                  "adapt from the first step (authors: epoch 2); easy/hard = all-equal rewards",
                                  read="Infini-AI-Lab/GRESO@b2778431 verl/trainer/ttis/presampling_selector.py:102-148 "
                                       "(easy_/hard_probabilistic_skip) and :230-256 (filter_examples_all_"
                                       "probabilistic); verl/trainer/ppo/ray_trainer.py:298-299, 988-993, 1112-1132, "
                                       "1197-1219 (targets, placement, traces, adaptation); verl/trainer/ppo/"
                                       "metric_utils.py:205-212; train-scripts/math_qwen_7b_dm_greso.sh:19-21; "
                                       "read whole "
                                       "(#51, rG): ray_trainer.py:325-345, 938-1237 (fit), verl/utils/reward_score/"
                                       "latex_math.py:85-124 (1 correct, 0.1 wrong answer, 0 no answer extracted), "
                                       "train-scripts/{math_qwen_1_5b,deepseek_qwen_1_5b}_dm_greso.sh. Per-row "
                                       "review o (#51): README.md:64-86 (data: bash train-scripts/"
                                       "generate_dataset.sh; training: bash train-scripts/math_qwen_{1_5b,7b}_dm_"
                                       "greso.sh), train-scripts/generate_dataset.sh (runs examples/data_preprocess/"
                                       "lighteval_math.py and openr1_math_default.py, not dapo_math.py), "
                                       "examples/data_preprocess/dapo_math.py:40, 62, 86 (./data/dapo_math/"
                                       "train.parquet, data_source 'dapo_math'), verl/utils/dataset/"
                                       "rl_dataset.py:118-128 (pd.read_parquet of every train file), "
                                       "verl/utils/reward_score/__init__.py:17-50 (both train sets reach latex_math). "
                                       "Fourteenth draw (#51 item 4, seed 20261219): git ls-tree b2778431 data/ "
                                       "(data/dapo_math/train.parquet is committed: 3,186,333 bytes, added by "
                                       "9f7f429 'update data', 2025-06-04, an ancestor of b2778431; read: 17,917 "
                                       "rows, data_source 'dapo_math', extra_info.index 0-17916); "
                                       "ray_trainer.py:996-1013 (the filtered dataloader batches accumulate until "
                                       "sampling_batch_size, then are cut to a multiple of n_gpus_per_node)",
                                  defaults=(("p_easy / p_hard", "0.5 / 0.5", "0.5 / 0.5 (train scripts)"),
                                            ("admit_floor", "0.01", "0.01 (skip = 1 − max(p^count, 0.01))"),
                                            ("target_easy / target_hard", "0.25/3, 0.25·2/3",
                                             "target_zero_variance 0.25: /3 and ·2/3"),
                                            ("adapt_step, p_min, p_max", "0.01, 0.05, 0.95", "0.01, 0.05, 0.95"),
                                            ("easy / hard", "all-equal group, mean ≥ easy_threshold 0.5 / < 0.5",
                                             "group mean ≥ 0.98 / ≤ 0.11 (latex_math rewards: 1 correct, 0.1 wrong "
                                             "answer, 0 no answer extracted)")),
                                  placement="theirs: before rollout, on each dataloader batch (skipped prompts are "
                                            "not generated); the trace gets each rolled-out prompt's mean reward "
                                            "after the reward; p adapts once per training step from epoch 2, from "
                                            "the fraction of all-1 / all-0.1 groups of the step's generations; "
                                            "ours: a prompt filter before rollout (skipped prompts get 0 rows), "
                                            "observe after the reward on every row of the step's batch, p adapts "
                                            "on every update from the first",
                                  deviations=(
                                      "p_easy, p_hard and the admission probabilities are float32 state, also under "
                                      "x64 (checkpointed host state); theirs Python floats",
                                      "easy/hard is an all-equal group split at the mean easy_threshold; theirs "
                                      "is the group mean ≥ 0.98 / ≤ 0.11, which differs for groups of 10 or more "
                                      "(one success of 10 is 'hard' to them) or for non-binary rewards",
                                      "at their own rewards (1 / 0.1 / 0): a group mixing 0 and 0.1 (mean ≤ 0.11) "
                                      "starts or extends a hard streak to them and is informative (streak 0) to "
                                      "ours; an all-0 group is hard to both in the skip, but their adaptation "
                                      "counts as hard only groups all exactly 0.1 (max = min = 0.1)",
                                      "adaptation from the first update (theirs: epoch > 0); the observed fraction "
                                      "is over the groups with ≥ 2 valid rows (theirs: reshaped [-1, 8])",
                                      "a group with one valid row is not observed (theirs: its mean joins the trace)",
                                      "the streak before issue #51 counted easy and hard observations together; "
                                      "it now counts one kind, as theirs",
                                      "their other selection strategy, data.dynamic_filtering_strategy "
                                      "'linear_backoff' (skip a prompt solved by every sample within the last "
                                      "filter_easy_n epochs, plus a random back-off for hard ones whose call lacks "
                                      "its k argument at this commit; ray_trainer.py:988-996, "
                                      "presampling_selector.py:38-100, 169-188), is not built; their scripts "
                                      "select all_probabilistic, ours",
                                      "their scripts also run dynamic sampling after the reward (ttis.type "
                                      "dynamic_sampling, ray_trainer.py:1140-1175: zero-variance groups dropped "
                                      "and more prompts generated, the generation batch sized from the observed "
                                      "zero-variance ratio × 1.25 up to sampling_batch_size 384, until "
                                      "real_train_batch_size 256 prompts; 192 / 128 in "
                                      "deepseek_qwen_1_5b_dm_greso.sh); compose zero_variance(refill=True) "
                                      "for the drop; the adaptive generation batch is not built",
                                      "the README's commands start as released: generate_dataset.sh does not run "
                                      "examples/data_preprocess/dapo_math.py, but ./data/dapo_math/train.parquet, "
                                      "the first train file of every train script (math_qwen_7b_dm_greso.sh:6), is "
                                      "committed in the repository (added by 9f7f429, 2025-06-04: 17,917 rows, "
                                      "data_source 'dapo_math', which reaches latex_math's 1 / 0.1 / 0), so the "
                                      "values above are what runs. Fourteenth draw (#51 item 4): per-row review o "
                                      "had said the file is missing and the commands do not start",
                                      "their filtered dataloader batches (train_batch_size 32 prompts) accumulate "
                                      "until sampling_batch_size (384, or the adaptive size) and the accumulated "
                                      "batch is then cut to a multiple of trainer.n_gpus_per_node "
                                      "(ray_trainer.py:1006-1013; data.full_sampling_bs unset in every script): up "
                                      "to n_gpus − 1 admitted prompts (7 at 8 GPUs, 3 at 4) are dropped with no "
                                      "rollout and no trace entry in that pass; ours rolls out every admitted "
                                      "prompt. Fourteenth draw (#51 item 4): not in the record"))),
  )


TECHNIQUES = _technique_rows()
