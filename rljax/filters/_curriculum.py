"""Distribution-level curricula (host side, NumPy): DUMP's UCB bandit over task distributions, and TAC's
transferability term.

The arms are task distributions: the task ids of a task (``task.task_id``: the arithmetic task's carry counts,
a difficulty bucket each). Everything here is a pure function of a ``CurriculumState`` (fixed-shape arrays: it
is checkpointed with the run) and explicit inputs; the one random draw takes an explicit PRNG key.

DUMP (001_5839a3671b0b4d92.txt L33, arXiv 2504.09710), checked against the authors' code
(github.com/ZhentingWang/DUMP: verl/utils/curriculum_learning.py, ``LearnabilityEstimator``,
``CurriculumController.compute_sampling_weights``, ``CurriculumSampler.__iter__``; the update in
verl/trainer/ppo/ray_trainer.py after ``compute_advantage``):

* learnability of arm ``j``: ``L_j = mean |A|`` over the last ``window`` (300) samples drawn from it, each
  sample's ``A`` the mean of its token advantages over its completion (0 while the arm is unseen);
* ``score_j = L_j + c * sqrt(2 ln(N + 1) / (n_j + 1))``, ``n_j`` the samples (rollouts) observed from arm ``j``,
  ``N = max(1, sum_j n_j)`` (authors: ``c = 1``);
* ``p = softmax(score / tau)`` (authors: ``tau = 0.1``); every prompt of a batch draws its arm from ``p`` and a
  prompt uniformly, with replacement, from that arm's prompts.

The authors also update the estimates from validation batches (with rewards standing in for advantages); ours
learns from the training batches only. ``tau = 0`` is ours: the plain UCB argmax (every prompt of the step from
the best arm; ties to the lowest arm id).

TAC (001_5839a3671b0b4d92.txt L97, arXiv 2606.25178; abstract only, our interpretation): a bandit over domains
whose score adds, to DUMP's learnability score, a *transferability* term from the alignment of per-domain
gradients of the GRPO step being computed: ``T_d = mean_{d' != d} cos(g_d, g_d')`` over the domains present in
the step, smoothed over steps by an EMA (``T_d <- decay * T_d + (1 - decay) * T_d^step``; domains absent from
the step keep theirs), and ``score_d = L_d + lambda * T_d + c * sqrt(2 ln(N + 1) / (n_d + 1))``. The paper
projects the gradients to a low dimension to stay cheap at scale; ours takes the exact inner products of the
per-domain gradients (``rljax.train`` computes the Gram matrix ``G_dd' = <g_d, g_d'>``), which the random
projection estimates. ``lambda = 0`` is DUMP. With two domains ``T_0 = T_1`` (one cosine), so the term only
discriminates from three domains on (the arithmetic task has ``digits + 1``).
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import jax
import numpy as np

__all__ = ["CurriculumState", "curriculum_init", "learnability", "curriculum_scores", "arm_probs",
           "curriculum_observe", "transfer_observe", "draw_prompts", "row_mean_advantages", "arm_pools"]


class CurriculumState(NamedTuple):
  window: np.ndarray    # [K, W] float64: ring buffer of the arm's most recent |A| values
  filled: np.ndarray    # [K] int32: entries of the window in use (<= W)
  head: np.ndarray      # [K] int32: next write position in the ring
  count: np.ndarray     # [K] int32: samples observed from the arm (n_j)
  transfer: np.ndarray  # [K] float64: TAC's smoothed transferability T_d (0 for DUMP)


def _pos(name: str, value, *, integer: bool = False, allow_zero: bool = False) -> float:
  ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
  ok = ok and math.isfinite(float(value)) and (float(value) >= 0 if allow_zero else float(value) > 0)
  if integer:
    ok = ok and float(value) == int(value)
  if not ok:
    raise ValueError(f"{name} must be a finite {'int' if integer else 'number'} {'>=' if allow_zero else '>'} 0, "
                     f"got {value!r}")
  return float(value)


def curriculum_init(num_arms: int, window: int = 300) -> CurriculumState:
  """The state of a curriculum over ``num_arms`` arms with ``window`` recent samples per arm."""
  k, w = int(_pos("num_arms", num_arms, integer=True)), int(_pos("window", window, integer=True))
  # host state in float64 (issue #51: the window was float32, rounding the |A| it averages)
  return CurriculumState(np.zeros((k, w), np.float64), np.zeros(k, np.int32), np.zeros(k, np.int32),
                         np.zeros(k, np.int32), np.zeros(k, np.float64))


def learnability(state: CurriculumState) -> np.ndarray:
  """``[K]`` float64: mean of each arm's window (``mean |A|`` of its last ``W`` samples), 0 for an unseen arm."""
  w = np.asarray(state.window, np.float64)
  filled = np.asarray(state.filled, np.int64)
  used = np.arange(w.shape[1])[None, :] < filled[:, None]  # the ring's used slots (all of them once full)
  return np.where(filled > 0, (w * used).sum(1) / np.maximum(filled, 1), 0.0)


def curriculum_scores(state: CurriculumState, *, exploration: float = 1.0, transfer_weight: float = 0.0) -> dict:
  """Each arm's score and its parts (``[K]`` float64 each): ``learnability``, ``bonus`` (the UCB exploration
  term ``c * sqrt(2 ln(N + 1) / (n + 1))``), ``transfer`` (``lambda * T``) and ``score``, their sum."""
  n = np.asarray(state.count, np.float64)
  total = max(1.0, float(n.sum()))
  bonus = float(exploration) * np.sqrt(2.0 * math.log(total + 1.0) / (n + 1.0))
  learn = learnability(state)
  transfer = float(transfer_weight) * np.asarray(state.transfer, np.float64)
  return {"learnability": learn, "bonus": bonus, "transfer": transfer, "score": learn + bonus + transfer}


def arm_probs(scores: np.ndarray, available: np.ndarray, temperature: float) -> np.ndarray:
  """``[K]`` float64 sampling probabilities: ``softmax(score / temperature)`` over the available arms (0 for
  the others); ``temperature = 0``: all mass on the best available arm (ties: the lowest arm id)."""
  s = np.asarray(scores, np.float64)
  ok = np.asarray(available, bool)
  if not ok.any():
    raise ValueError("no arm has prompts to draw from")
  if temperature == 0:
    p = np.zeros_like(s)
    p[int(np.argmax(np.where(ok, s, -np.inf)))] = 1.0
    return p
  z = np.where(ok, (s - s[ok].max()) / float(temperature), -np.inf)
  e = np.exp(z)
  return e / e.sum()


def row_mean_advantages(advantages: np.ndarray, completion_mask: np.ndarray) -> np.ndarray:
  """``[B]``: each row's advantage: ``advantages [B]`` as they are, or the mean of ``[B, T]`` token advantages
  over the row's completion tokens (the authors' per-sample advantage; 0 for a row without completion)."""
  a = np.asarray(advantages, np.float64)
  if a.ndim == 1:
    return a
  m = np.asarray(completion_mask, bool)
  return np.where(m.any(1), (a * m).sum(1) / np.maximum(m.sum(1), 1), 0.0)


def curriculum_observe(state: CurriculumState, arms: np.ndarray, values: np.ndarray,
                       valid: Optional[np.ndarray] = None) -> CurriculumState:
  """The state after observing ``|values|`` of the valid rows (``arms [B]`` int in ``[0, K)``): each arm's
  values enter its window in row order (the oldest drop out beyond ``W``) and ``n_j`` grows by their number."""
  arms = np.asarray(arms, np.int64).reshape(-1)
  values = np.abs(np.asarray(values, np.float64).reshape(-1))
  k, w = state.window.shape
  valid = np.ones(arms.shape, bool) if valid is None else np.asarray(valid, bool).reshape(-1)
  if values.shape != arms.shape or valid.shape != arms.shape:
    raise ValueError(f"arms, values and valid must have one entry per row, got {arms.shape}, {values.shape}, "
                     f"{valid.shape}")
  if arms[valid].size and (arms[valid].min() < 0 or arms[valid].max() >= k):
    raise ValueError(f"arm ids must lie in [0, {k}), got {sorted(set(arms[valid].tolist()))}")
  if not np.all(np.isfinite(values[valid])):
    raise ValueError("advantages of valid rows must be finite")
  window, filled, head, count = (np.array(x) for x in (state.window, state.filled, state.head, state.count))
  window = window.astype(np.float64)  # a state built with a float32 window (before issue #51) is widened
  for j in np.unique(arms[valid]):
    new = values[valid & (arms == j)][-w:]  # only the last W can stay
    pos = (head[j] + np.arange(new.size)) % w
    window[j, pos] = new
    head[j] = (head[j] + new.size) % w
    filled[j] = min(w, filled[j] + new.size)
    count[j] += int((valid & (arms == j)).sum())
  return state._replace(window=window, filled=filled, head=head, count=count)


def transfer_observe(state: CurriculumState, gram: np.ndarray, present: np.ndarray,
                     decay: float = 0.9) -> tuple:
  """TAC's transferability update from the Gram matrix ``gram [K, K]`` (``<g_d, g_d'>``) of the step's
  per-domain gradients; ``present [K]`` marks the domains with rows in the step (a zero gradient is absent).

  ``T_d^step = mean_{d' present, d' != d} cos(g_d, g_d')`` for each present ``d`` with another present domain;
  ``T_d <- decay * T_d + (1 - decay) * T_d^step`` for those, the others unchanged.
  Returns ``(state, T^step [K] float64, NaN where not updated)``."""
  g = np.asarray(gram, np.float64)
  k = state.transfer.shape[0]
  if g.shape != (k, k) or not np.all(np.isfinite(g)):
    raise ValueError(f"gram must be a finite [{k}, {k}] matrix, got shape {g.shape}")
  norms = np.sqrt(np.clip(np.diag(g), 0.0, None))
  on = np.asarray(present, bool) & (norms > 0)
  cos = g / np.where(norms[:, None] * norms[None, :] > 0, norms[:, None] * norms[None, :], 1.0)
  others = on[None, :] & ~np.eye(k, dtype=bool)
  n_other = others.sum(1)
  step = np.where(on & (n_other > 0), (cos * others).sum(1) / np.maximum(n_other, 1), np.nan)
  upd = ~np.isnan(step)
  t = np.asarray(state.transfer, np.float64)
  t = np.where(upd, float(decay) * t + (1.0 - float(decay)) * np.nan_to_num(step), t)
  return state._replace(transfer=t), step


def arm_pools(arm_of: np.ndarray, num_arms: int) -> list:
  """``[K]`` arrays: the dataset indices of each arm's prompts (ascending)."""
  arm_of = np.asarray(arm_of, np.int64)
  return [np.flatnonzero(arm_of == j) for j in range(num_arms)]


def draw_prompts(key, probs: np.ndarray, pools: list, num: int) -> tuple:
  """``num`` prompts: each draws its arm from ``probs [K]`` and then a prompt uniformly from that arm's pool
  (``pools[j]``, dataset indices), with replacement. Returns ``(index [num] int64, arms [num] int64)``.

  The draws are two ``jax.random.uniform`` vectors from ``key``: ``arm = #{j: cumsum(p)_j <= u_1}`` (inverse
  CDF), ``prompt = pools[arm][floor(u_2 * len(pool))]``."""
  p = np.asarray(probs, np.float64)
  if any(p[j] > 0 and len(pools[j]) == 0 for j in range(p.size)):
    raise ValueError("an arm with probability > 0 has no prompts")
  u = np.asarray(jax.random.uniform(key, (2, int(num))), np.float64)
  cdf = np.cumsum(p)
  arms = np.minimum(np.searchsorted(cdf / cdf[-1], u[0], side="right"), p.size - 1)
  arms = np.array([a if p[a] > 0 else int(np.flatnonzero(p > 0)[-1]) for a in arms], np.int64)  # float edge
  index = np.array([pools[a][min(int(v * len(pools[a])), len(pools[a]) - 1)] for a, v in zip(arms, u[1])], np.int64)
  return index, arms


# ----------------------------------------------------------------------------- the stages (the rows' ``stage``)

def _curriculum_stage(name: str, *, exploration: float, temperature: float, window: int, transfer_weight: float,
                      decay: float):
  """The ``PromptFilter`` of DUMP (``transfer_weight = 0``) and TAC: ``draw`` picks the step's prompts from the
  arms' probabilities, ``observe`` (phase ``"advantages"``) learns from the trained rows' advantages (and, for
  TAC, the per-task gradients)."""
  from rljax.stages import PromptFilter  # pylint: disable=import-outside-toplevel
  _pos("exploration", exploration, allow_zero=True)
  _pos("temperature", temperature, allow_zero=True)
  _pos("window", window, integer=True)
  _pos("transfer_weight", transfer_weight, allow_zero=True)
  if not 0.0 <= float(decay) < 1.0:
    raise ValueError(f"decay must be in [0, 1), got {decay!r}")
  tac = name == "tac"
  needs = {"task_id", "advantages"} | ({"task_gradients"} if tac else set())

  def scores(state):
    return curriculum_scores(state, exploration=exploration, transfer_weight=transfer_weight)

  def build(facts):
    # a task without task ids leaves the stage unbound: the start-up refuses its task_id need first
    task_ids = None if facts is None or not facts.num_tasks else facts.task_ids
    k = 1 if task_ids is None else int(facts.num_tasks)
    pools = None if task_ids is None else arm_pools(np.asarray(task_ids, np.int64), k)

    def init(num_dataset_prompts):  # pylint: disable=unused-argument
      return curriculum_init(k, window)

    def draw(state, prompts, key):
      if pools is None:
        raise ValueError(f"{name} is not bound to a run with task ids (stage.bind(RunFacts(num_tasks=..., "
                         "task_ids=...))): its arms, the task's task ids, are unknown")
      sc = scores(state)
      p = arm_probs(sc["score"], np.array([len(q) > 0 for q in pools]), temperature)
      index, arms = draw_prompts(key, p, pools, len(prompts.problems))
      chosen = np.bincount(arms, minlength=k)
      metrics = {"skipped": 0.0, "replaced": float(len(index))}
      for j in range(k):  # what it chose (per arm) and why: the probability and the score's parts
        metrics.update({f"chosen_{j}": float(chosen[j]), f"prob_{j}": float(p[j]), f"score_{j}": float(sc["score"][j]),
                        f"learnability_{j}": float(sc["learnability"][j]), f"bonus_{j}": float(sc["bonus"][j]),
                        f"samples_{j}": float(state.count[j])})
        if tac:
          metrics[f"transfer_{j}"] = float(state.transfer[j])
      return index, state, metrics

    def observe(state, data):
      arms = np.asarray(data.require("task_id", name), np.int64)
      adv = row_mean_advantages(data.require("advantages", name), data.completion_mask)
      state = curriculum_observe(state, arms, adv, data.valid)
      metrics = {"observed_rows": float(np.sum(data.valid))}
      if tac:
        grads = data.require("task_gradients", name)
        state, step = transfer_observe(state, grads.gram, grads.present, decay)
        metrics.update({f"step_transfer_{j}": float(v) for j, v in enumerate(step) if np.isfinite(v)})
      return state, metrics

    return PromptFilter(init, observe=observe, draw=draw, observe_phase="advantages", name=name,
                        needs=frozenset(needs), bind_fn=lambda stage, f: build(f))

  return build(None)


def _dump_stage(*, exploration: float = 1.0, temperature: float = 0.1, window: int = 300):
  """DUMP as a prompt filter that draws the step's prompts (``rljax.filters._curriculum``; the arms are the task's
  task ids).

  ``draw``: each of the step's ``P`` prompts draws its arm from ``p = softmax(score / temperature)`` with
  ``score_j = mean_window |A|_j + exploration * sqrt(2 ln(N + 1) / (n_j + 1))`` and a prompt uniformly from that
  arm's training prompts (with replacement), with the loop's key; the loader's candidates are replaced.
  ``observe`` (after the advantages): each trained row's ``|A|`` (mean over its completion tokens) enters its
  arm's window of the last ``window`` samples, and ``n_j`` counts them. Defaults = the authors' (c = 1,
  tau = 0.1, 300); ``temperature=0``: the UCB argmax. The state is checkpointed. Metrics, per arm ``j``:
  ``chosen_j`` (prompts drawn this step), ``prob_j``, ``score_j`` = ``learnability_j + bonus_j``, ``samples_j``.
  """
  return _curriculum_stage("dump", exploration=exploration, temperature=temperature, window=window,
                           transfer_weight=0.0, decay=0.0)


def _tac_stage(*, transfer_weight: float = 1.0, decay: float = 0.9, exploration: float = 1.0,
               temperature: float = 0.1, window: int = 300):
  """TAC as a prompt filter: DUMP's bandit plus ``transfer_weight * T_d``, the smoothed mean cosine between task
  ``d``'s gradient and the other tasks' on each step's batch (``rljax.filters._curriculum``: abstract only, our
  interpretation; the loop computes the per-task gradients' Gram matrix, need ``task_gradients``, with one
  extra backward pass per task). ``transfer_weight=0`` is ``dump``. Metrics add ``transfer_j`` (the smoothed
  ``T_j`` behind the score) and ``step_transfer_j`` (the step's mean cosine).
  """
  return _curriculum_stage("tac", exploration=exploration, temperature=temperature, window=window,
                           transfer_weight=transfer_weight, decay=decay)


_dump_stage.slot = _tac_stage.slot = "prompt_filters"


_S1 = "001_5839a3671b0b4d92.txt"


def _technique_rows():
  from rljax._technique import Fidelity, Technique
  return (
      Technique("dump", "filter", curriculum_scores,
                "p = softmax((mean_W |A|_j + c sqrt(2 ln(N+1)/(n_j+1))) / tau); arm ~ p, prompt ~ U(arm)",
                f"{_S1} L33 (DUMP, arXiv 2504.09710)",
                stage=_dump_stage,
                fidelity=Fidelity("authors_code", "github.com/ZhentingWang/DUMP: verl/utils/curriculum_learning.py "
                                  "(compute_sampling_weights, CurriculumSampler)",
                                  "authors' defaults (c = 1, tau = 0.1, window 300); arms = task ids (authors: a "
                                  "data_source column); authors also learn from validation batches, ours from "
                                  "training batches only; temperature=0 (argmax) is ours",
                                  read="ZhentingWang/DUMP@235e85d4 verl/utils/curriculum_learning.py:40-80 (the "
                                       "estimator: window 300 of per-sample advantages, mu = mean |A|, n_samples), "
                                       ":137-197 (compute_sampling_weights: UCB, weights 1.0, temperature 0.1), "
                                       ":214-411 (CurriculumSampler; its __iter__ :325-407 draws: the source by "
                                       "rng.choices with the live self._weights :353-361, the index by "
                                       "rng.choice in that source :369; seventeenth draw, #51: the record cited "
                                       ":212-330, which ends before the draw); verl/"
                                       "trainer/ppo/ray_trainer.py:776-793 (validation update) and :1225-1250 "
                                       "(training update). Per-row review j (#51): ray_trainer.py:705-732 (the "
                                       "validation 'advantages' are the reward tensor itself: advantages = "
                                       "rewards, each sample's value its mean over the response mask, r/|y| with "
                                       "the score on the last token), :1084-1086 (val_before_train, default True: "
                                       "_validate before the first batch), :1268-1271 and :1302 (every test_freq "
                                       "steps and after the last); main_grpo_Qwen2.5-7B-Instruct-1M_combined_logic_"
                                       "longseq_combinedkk.sh whole (enable_curriculum_learning True, "
                                       "data_source_key data_source, train_batch_size 128, rollout.n 16, "
                                       "test_freq 10, total_epochs 2); DataLoader with num_workers 0 "
                                       "(:533-537), so each batch is drawn with the weights of the step before",
                                  defaults=(("exploration c", "1.0", "exploration_weight 1.0 (fixed)"),
                                            ("temperature", "0.1", "0.1 (fixed)"),
                                            ("window", "300", "window_size 300"),
                                            ("arms", "the task's task ids", "the data_source column"),
                                            ("sample advantage", "mean over the row's completion tokens",
                                             "mean over the response mask")),
                                  placement="theirs: the dataloader's sampler draws each index (source ~ "
                                            "softmax weights, index uniform in the source); after each training "
                                            "step's advantages the per-source estimators take every sample's "
                                            "advantage and the weights are recomputed; validation (before training, "
                                            "val_before_train default True, then every test_freq = 10 steps and "
                                            "after the last) feeds each source one sample whose 'advantage' is not "
                                            "an advantage: the mean over that source's validation responses of "
                                            "r/|y| (the reward tensor averaged over the response mask), and n_j "
                                            "grows by 1; so their first training batch is drawn from weights "
                                            "already moved by validation; ours: a "
                                            "prompt filter draws the step's prompts (arm ~ p, prompt uniform, with "
                                            "replacement); observe after the advantages on the trained rows",
                                  deviations=(
                                      "learns from training rows only; their validation update (one averaged "
                                      "sample per source) is not built",
                                      "their first training batch follows the initial validation "
                                      "(val_before_train): every source has n_j = 1 and a window holding |mean "
                                      "r/|y||, so p_j ∝ exp(|mean r/|y||_j / 0.1) (equal bonuses), not uniform; "
                                      "ours draws the first step uniformly (no observation yet); later, each "
                                      "validation adds that value to the window of 300 and 1 to n_j (per-row "
                                      "review j, #51)",
                                      "temperature=0 (argmax over arms) is ours",
                                      "the window and the transfer state are float64 (issue #51: they were "
                                      "float32); a checkpoint saved before holds float32 and is refused on restore"))),
      Technique("tac", "filter", transfer_observe,
                "score_d = L_d + lambda T_d + UCB bonus, T_d = EMA of mean_{d' != d} cos(g_d, g_d')",
                f"{_S1} L97 (TAC, arXiv 2606.25178)",
                stage=_tac_stage,
                fidelity=Fidelity("abstract", f"{_S1} L97 (TAC abstract, arXiv 2606.25178)",
                                  "UCB score + λ·T_d, T_d = EMA of mean cos(g_d, g_d') (exact; paper: projected); λ, "
                                  "decay ours. Code (github YangYongJin/transfer-aware-curriculum) not stored; a "
                                  "write-up reads Ā_d·(1 + α·mean cos), softmax",
                                  read="TAC abstract (seed 001 L97, arXiv 2606.25178, read in full: a bandit-style "
                                       "online curriculum over domains; per-domain advantages give learnability, "
                                       "projected gradients from the GRPO step estimate cross-domain "
                                       "transferability by gradient alignment, < 1% overhead); the arXiv HTML "
                                       "(2606.25178v2) is stored in the search tool's pages corpus, but its "
                                       "excerpts reach only the abstract and the start of §1 (the method section "
                                       "was not reached: searched 'Algorithm 1', 'projection', 'exploration "
                                       "bonus'); the code is github.com/YangYongJin/transfer-aware-curriculum (an "
                                       "author's publication list, code index), not stored (fetch: no snapshot; "
                                       "find_files: none); a third-party write-up (code index, read_file id "
                                       "58540357430) states score(d) = Ā_d·(1 + α·mean_{d'≠d} cos(g_d, g_d')) "
                                       "with a softmax over the scores as the next batch's domain distribution "
                                       "(not the paper's text; no α value); another note (id 66595927397) says "
                                       "the controller smooths the bandit arm values; the v1 abstract (ICML 2026 "
                                       "page) reports 3.7 points, v2 2.8",
                                  defaults=(("transfer_weight λ", "1.0", "not stated"),
                                            ("decay", "0.9 (EMA of T_d)", "not stated"),
                                            ("exploration / temperature / window", "1.0 / 0.1 / 300 (DUMP's)",
                                             "not stated")),
                                  placement="theirs (abstract): the domain sampling probabilities are updated "
                                            "online from each GRPO step's per-domain advantages and projected "
                                            "gradients taken from that same step; ours: a prompt filter draws "
                                            "the step's prompts; observe after the advantages takes the rows' "
                                            "|A| and the Gram matrix of per-task gradients that the loop computes "
                                            "with one extra backward pass per task",
                                  deviations=(
                                      "the score form (DUMP's UCB learnability + λ·T_d) and T_d = EMA of the "
                                      "mean cosine to the other domains are our reading; a stored write-up "
                                      "reads it multiplicatively, Ā_d·(1 + α·mean cos), sampled by softmax: "
                                      "that form is not built (ours adds λ·T_d to the UCB score)",
                                      "exact per-task gradients (an extra backward per task); theirs projected "
                                      "gradients from the step being computed (< 1% overhead)",
                                      "λ, decay and the bandit's settings are ours"))),
  )


TECHNIQUES = _technique_rows()
