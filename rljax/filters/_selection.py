"""Host-side selections (NumPy): void turns, Shuffle-R1 pairs, RoRecomp batches.

Their outputs have data-dependent sizes (index lists) or read decoded text, so
they run on the host between jitted calls. Inputs may be NumPy or JAX arrays;
outputs are NumPy. Randomness comes from an explicit JAX PRNG key.
"""
from __future__ import annotations

import math
import re
from typing import Optional, Sequence

import jax
import numpy as np

__all__ = ["void_turn", "shuffle_pairs", "rorecomp", "DEFAULT_CODE_PATTERN", "DEFAULT_ANSWER_PATTERN"]

#: a fenced code block (```...```), any language tag
DEFAULT_CODE_PATTERN = r"```.*?```"
#: a final answer: \boxed{, <answer>...</answer> or GSM8K's ####
DEFAULT_ANSWER_PATTERN = r"\\boxed\s*\{|<answer>.*?</answer>|####"


def _vec(name: str, x, n: Optional[int] = None, *, integer: bool = False) -> np.ndarray:
  a = np.asarray(x)
  if a.ndim != 1 or (n is not None and a.shape[0] != n):
    want = f"({n},)" if n is not None else "[B]"
    raise ValueError(f"{name} must have shape {want}, got {a.shape}")
  if integer and a.dtype.kind not in "iu":
    raise ValueError(f"{name} must be integers, got dtype {a.dtype}")
  if not integer and a.dtype.kind == "f" and not np.all(np.isfinite(a)):
    raise ValueError(f"{name} contains non-finite values (NaN/inf)")
  return a


def void_turn(turns: Sequence[Sequence[str]], *, code_pattern: str = DEFAULT_CODE_PATTERN,
              answer_pattern: str = DEFAULT_ANSWER_PATTERN, flags: int = re.DOTALL):
  """SimpleTIR void-turn filter: drop trajectories with a turn that has neither code nor an answer.

  ``keep_i = prod_{turns k of i} 1[code(k) or answer(k)]`` over the *model's*
  turns of trajectory ``i`` (tool outputs are not turns). A trajectory with
  no model turn is kept (empty product). A turn that is not text is void
  (model output never raises). Apply to the loss with
  ``rljax.filters.apply_keep(loss_mask, keep)``: a dropped trajectory gets a
  zero loss mask on every token, others are untouched.

  Source: SimpleTIR (000_3e503271be254a43.txt L27): "filter out trajectories
  containing void turns, i.e. turns that yield neither a code block nor a
  final answer". The two regexes are our reading (parameters).

  Args:
    turns: ``B`` trajectories, each a sequence of decoded model turns.
    code_pattern / answer_pattern: regexes searched in each turn.
    flags: ``re`` flags.

  Returns:
    ``(keep [B] bool, {"void_turns" [B] int (per trajectory),
    "num_void_trajectories", "void_frac"})``.
  """
  if isinstance(turns, (str, bytes)):
    raise ValueError("turns must be a sequence of trajectories (each a sequence of turn strings)")
  try:
    code_re, ans_re = re.compile(code_pattern, flags), re.compile(answer_pattern, flags)
  except re.error as e:
    raise ValueError(f"code_pattern/answer_pattern is not a valid regex: {e}") from None
  b = len(turns)
  void = np.zeros((b,), np.int64)
  for i, traj in enumerate(turns):
    if isinstance(traj, (str, bytes)):
      raise ValueError(f"turns[{i}] must be a sequence of turn strings, got a single string")
    for turn in traj:
      if not isinstance(turn, str) or not (code_re.search(turn) or ans_re.search(turn)):
        void[i] += 1
  keep = void == 0
  return keep, {"void_turns": void, "num_void_trajectories": int((~keep).sum()),
                "void_frac": float((~keep).mean()) if b else 0.0}


def shuffle_pairs(advantages, group_id, *, pairs_per_group: int = 1, min_gap: float = 0.0,
                  key: Optional[jax.Array] = None, num_samples: Optional[int] = None, replace: bool = True,
                  valid=None):
  """Shuffle-R1: high-contrast pairs per group, then an |A|-weighted reshuffle.

  Pairwise Trajectory Sampling: within each group sort the valid rows by
  advantage (descending; ties to the lower row index) and pair the k-th
  highest with the k-th lowest, ``k < pairs_per_group``, keeping a pair only
  if its gap ``A_hi - A_lo > min_gap`` (so all-equal groups give no pair).
  Advantage-based Trajectory Shuffle (when ``key`` is given): draw
  ``num_samples`` (default: the number of selected rows) rows from the
  selected ones with probability ``|A_i| / sum |A|`` (with or without
  replacement), so zero-advantage rows are never drawn; without a key the
  order is the selected rows, pair by pair.

  Source: Shuffle-R1 (001_5839a3671b0b4d92.txt L43): "selects high-contrast
  trajectories with large advantages" and "informed batch reshuffling";
  the max/min pairing and the ``|A|``-proportional draw are our
  interpretation.

  Args:
    advantages: ``[B]`` sequence-level advantages.
    group_id: ``[B]`` ints (any non-negative ids; groups may be ragged).
    pairs_per_group: pairs kept per group (>= 1).
    min_gap: minimum advantage gap of a pair (>= 0).
    key: optional JAX PRNG key for the reshuffle.
    num_samples: rows drawn by the reshuffle.
    replace: draw with replacement (without: at most the non-zero-|A| rows).
    valid: optional ``[B]`` row mask.

  Returns:
    ``(order [N] int64 row indices, {"pairs" [n, 2] (hi, lo), "keep" [B] bool,
    "num_pairs", "mean_gap", "zero_adv_frac" (advantage collapsing),
    "selected_frac"})``.
  """
  adv = _vec("advantages", advantages).astype(np.float64)
  b = adv.shape[0]
  gid = _vec("group_id", group_id, b, integer=True)
  if isinstance(pairs_per_group, bool) or not isinstance(pairs_per_group, (int, np.integer)) or pairs_per_group < 1:
    raise ValueError(f"pairs_per_group must be an int >= 1, got {pairs_per_group!r}")
  if not (math.isfinite(float(min_gap)) and min_gap >= 0):
    raise ValueError(f"min_gap must be finite and >= 0, got {min_gap!r}")
  v = np.ones((b,), bool) if valid is None else _vec("valid", valid, b).astype(bool)
  pairs = []
  rows = np.flatnonzero(v)
  for g in np.unique(gid[rows]):
    idx = rows[gid[rows] == g]
    desc = idx[np.lexsort((idx, -adv[idx]))]   # high -> low, ties to the lower index
    asc = idx[np.lexsort((idx, adv[idx]))]     # low -> high, ties to the lower index
    used = set()
    for k in range(min(pairs_per_group, len(idx) // 2)):
      hi, lo = int(desc[k]), int(asc[k])
      if hi == lo or hi in used or lo in used or not adv[hi] - adv[lo] > min_gap:
        break
      used.update((hi, lo))
      pairs.append((hi, lo))
  pairs_arr = np.asarray(pairs, np.int64).reshape(-1, 2)
  keep = np.zeros((b,), bool)
  keep[pairs_arr.ravel()] = True
  selected = pairs_arr.ravel()
  if key is not None and selected.size:
    weight = np.abs(adv[selected])
    n = selected.size if num_samples is None else int(num_samples)
    if n < 0:
      raise ValueError(f"num_samples must be >= 0, got {num_samples!r}")
    if not replace:
      n = min(n, int((weight > 0).sum()))
    if weight.sum() > 0 and n > 0:
      draw = jax.random.choice(key, selected.size, shape=(n,), replace=replace, p=weight / weight.sum())
      order = selected[np.asarray(draw)]
    else:
      order = np.zeros((0,), np.int64)
  else:
    order = selected
  stats = {"pairs": pairs_arr, "keep": keep, "num_pairs": int(pairs_arr.shape[0]),
           "mean_gap": float(np.mean(adv[pairs_arr[:, 0]] - adv[pairs_arr[:, 1]])) if pairs else 0.0,
           "zero_adv_frac": float(np.mean(adv[v] == 0)) if v.any() else 0.0,
           "selected_frac": float(keep.sum() / max(int(v.sum()), 1))}
  return order, stats


def rorecomp(correct, lengths, group_id, *, fraction: float = 0.5, valid=None):
  """RoRecomp: split an online batch into a priority batch and a compensation buffer.

  Within each group, a correct response is *short* if fewer than
  ``ceil(fraction * n_correct_g)`` correct responses of its group are strictly
  shorter; an incorrect one is *long* if fewer than
  ``ceil(fraction * n_incorrect_g)`` incorrect ones are strictly longer
  (length ties are all included, so the split is invariant to row order).
  ``priority = short-correct | long-incorrect`` (a clear brevity signal);
  every other valid response goes to ``buffer`` (replayed in compensation
  rows by ``rljax.replay.rorecomp_compensation``). Each valid response
  lands in exactly one of the two.

  Source: RoRecomp (001_5839a3671b0b4d92.txt L163): "priority batches, which
  combine short-correct and long-incorrect responses selected from online
  batches ... compensation batches, which utilize remaining responses from a
  replay buffer". The within-group length rank and ``fraction`` are our
  interpretation.

  Args:
    correct: ``[B]`` bool or 0/1; lengths: ``[B]`` token counts.
    group_id: ``[B]`` ints; fraction: in (0, 1].
    valid: optional ``[B]`` row mask (invalid rows are in neither batch).

  Returns:
    ``(priority [B] bool, {"buffer" [B] bool, "num_priority", "num_buffer",
    "priority_correct", "priority_incorrect"})``.
  """
  fraction = float(fraction)
  if not (0 < fraction <= 1):
    raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
  c = _vec("correct", correct)
  b = c.shape[0]
  c = c.astype(np.float64) > 0.5
  length = _vec("lengths", lengths, b).astype(np.float64)
  gid = _vec("group_id", group_id, b, integer=True)
  v = np.ones((b,), bool) if valid is None else _vec("valid", valid, b).astype(bool)
  priority = np.zeros((b,), bool)
  for g in np.unique(gid[v]):
    for is_correct in (True, False):
      idx = np.flatnonzero(v & (gid == g) & (c == is_correct))
      if idx.size == 0:
        continue
      k = math.ceil(fraction * idx.size - 1e-9)
      sorted_len = np.sort(length[idx])
      if is_correct:
        rank = np.searchsorted(sorted_len, length[idx], side="left")  # strictly shorter
      else:
        rank = idx.size - np.searchsorted(sorted_len, length[idx], side="right")  # strictly longer
      priority[idx] = rank < k
  buffer = v & ~priority
  return priority, {"buffer": buffer, "num_priority": int(priority.sum()), "num_buffer": int(buffer.sum()),
                    "priority_correct": int((priority & c).sum()), "priority_incorrect": int((priority & ~c).sum())}


_S0 = "000_3e503271be254a43.txt"
_S1 = "001_5839a3671b0b4d92.txt"


def _technique_rows():
  from rljax._technique import Fidelity, Technique
  from rljax.filters import _stages as S
  return (
      Technique("void_turn", "filter", void_turn, "keep_i = prod_turns 1[code block or final answer]",
                f"{_S0} L27 (SimpleTIR)",
                stage=S.row_filter(void_turn, {"turns": "turns"}),
                fidelity=Fidelity("authors_code", "github.com/ltzheng/SimpleTIR: recipe/simpletir/agent_utils.py "
                                  "(execute_predictions, mask_void_turns)",
                                  "authors: code = ```(py|python)?\\n…\\n```, answer = \\boxed{; our default "
                                  "patterns also accept any ``` block, <answer>, #### (code_pattern/answer_pattern)",
                                  read="ltzheng/SimpleTIR@e7b5b443 recipe/simpletir/agent_utils.py:554-605 "
                                       "(execute_predictions: the void-turn rule) and :379-450 (void_turn_mask over "
                                       "the turns); recipe/simpletir/simpletir_ray_trainer.py:1146-1165 (loss_mask "
                                       "× void_turn_mask) and :1431-1437 (compute_advantage afterwards, on the "
                                       "whole batch); recipe/simpletir/config/simpletir_trainer.yaml:38; train.sh:47, "
                                       "420; README.md:53-71 (the training command). Error-class sweep (#51, s2b): "
                                       "the launch's other row switches around the void mask: "
                                       "simpletir_ray_trainer.py:1249-1330 (rejection_sample: a uid group whose "
                                       "summed rewards have std < 1e-3 dropped, :1261; acc_filter: group mean outside "
                                       "[low, high] dropped, :1264-1275; remove_clip: a group with fewer than min_n "
                                       "non-truncated rows dropped, :1305), :1344 (batch[valid_mask]), :1362 "
                                       "(repeat_with_uid_suffix: the kept groups duplicated up to train_batch_size), "
                                       ":1391 (a random subset of groups when there are more), :564 (loader batch × "
                                       "oversample); train.sh:33-48 (REJECTION_SAMPLE True, OVERSAMPLE 2), :306-322, "
                                       "395-398",
                                  defaults=(("code_pattern", "```.*?``` (any fenced block)",
                                             "```(?:py|python)?\\n(.*?)\\n``` (re.DOTALL)"),
                                            ("answer_pattern", "\\boxed\\s*\\{ | <answer>…</answer> | ####",
                                             "the substring \\boxed{"),
                                            ("mask_void_turns", "on (the stage)",
                                             "True (trainer yaml; README's training command passes "
                                             "--mask_void_turns True; train.sh's own default is False)"),
                                            ("group filters around the void mask (not this stage's)",
                                             "none (compose zero_variance / an accuracy filter; they run after "
                                             "this stage, on the rows it kept)",
                                             "README command: rejection_sample True (train.sh default; group "
                                             "reward std < 1e-3 dropped), --acc_filter 0.1_0.9 (group mean reward "
                                             "outside [0.1, 0.9] dropped), --remove_clip True, --oversample 3 "
                                             "(3 × train_batch_size prompts sampled); the kept groups are "
                                             "duplicated (repeat_with_uid_suffix) or subsampled to exactly "
                                             "train_batch_size; the void trajectories (reward as scored, "
                                             "typically 0: the episode ended without an answer) count in these "
                                             "group statistics")),
                                  placement="theirs: during the multi-turn rollout, per active trajectory and "
                                            "turn (a void turn also ends the episode); the trainer multiplies the "
                                            "whole trajectory's loss_mask by 0, training only; ours: a row filter "
                                            "after the rollout on each row's decoded model turns (data.turns), "
                                            "before the advantage: a dropped row gets valid False, so it leaves "
                                            "its group's statistics as well as the loss",
                                  deviations=(
                                      "the default patterns are wider (any ``` block; \\boxed with spaces, "
                                      "<answer>, ####); code_pattern=r'```(?:py|python)?\\n(.*?)\\n```', "
                                      "answer_pattern=r'\\\\boxed\\{' give theirs",
                                      "every model turn of the row is tested; theirs stop the episode at the "
                                      "first void turn or \\boxed, so the turns they test are the same",
                                      "a turn that is not text counts as void; a row with no model turn is kept",
                                      "a void row leaves before the advantage (valid False), so its reward no "
                                      "longer enters its group's mean and std and the other rows' advantages "
                                      "change; theirs keep the void trajectory in compute_advantage (GRPO over "
                                      "the whole batch) and only zero its loss mask",
                                      "their launch's group filters see the void rows: a group's accuracy for "
                                      "--acc_filter 0.1_0.9 and its std for rejection_sample count every "
                                      "trajectory, void ones included (e.g. 7 successes and 1 void trajectory "
                                      "of 8: mean 0.875, std > 1e-3, kept and trained; ours drops the void row "
                                      "first, so a composed zero_variance / accuracy filter sees 7 of 7 correct "
                                      "and drops the group); their kept groups are duplicated to fill "
                                      "train_batch_size, ours has no duplicates"))),
      Technique("shuffle_pairs", "filter", shuffle_pairs,
                "pair k-th max/min advantage per group; draw rows with p ~ |A|",
                f"{_S1} L43 (Shuffle-R1)",
                stage=S.row_filter(shuffle_pairs, {"advantages": S.row_advantages, "group_id": "group_id",
                                                   "valid": "valid", "key": "key"},
                                   needs=("advantages",), phase="advantages", resamples=True),
                fidelity=Fidelity("authors_code", "github.com/xiaomi-research/shuffle-r1: shuffle_r1/custom_algos.py "
                                  "(compute_pairwise_purning_grpo_advantage)",
                                  "same k-th max/min pairing (ties at the low end aside); ours keeps pairs_per_group pairs (authors "
                                  "int(n/2·(1−0.5))) and redraws rows ∝ |A| (authors redraw pairs ∝ pair |A| sum^p)",
                                  read="xiaomi-research/shuffle-r1@31d3ff03 shuffle_r1/custom_algos.py:71-146 "
                                       "(pairing and pruning) and :148-167 (normalize_advantage); shuffle_r1/"
                                       "ray_trainer.py:167-226 (compute_advantage → pairs) and :574-606 "
                                       "(experience_resampling); shuffle_r1/config.py:95-100; examples/"
                                       "qwen2_5_vl_7b.sh:24-36",
                                  defaults=(("pairs_per_group", "1", "int(n/2 · (1 − purning_ratio 0.5)) = 4 for "
                                             "rollout.n 16"),
                                            ("min_gap", "0 (a pair needs A_hi − A_lo > 0)", "none (equal pairs "
                                             "kept)"),
                                            ("draw unit / weight", "rows ∝ |A|", "pairs ∝ adv_sum^p, "
                                             "sampling_weight 'sum', sampling_method 'power', p 1"),
                                            ("draws", "num_samples = selected rows, replace=True",
                                             "replay_times 8 subsets, each without replacement"),
                                            ("ties", "lower row index first, at both ends (desc and asc lexsort)",
                                             "Python's stable sort by adv, descending (custom_algos.py:102): tied "
                                             "advantages keep row order, so the high end takes the lowest tied "
                                             "index and the low end, read from the tail, the highest")),
                                  placement="theirs: inside the advantage step (GRPO advantage, then pairs per "
                                            "uid), the pairs replace the batch; experience_resampling then draws "
                                            "pair subsets for the update; ours: an advantage-phase row filter on "
                                            "the step's rows (the advantages already computed), returning the "
                                            "rows to train in order",
                                  deviations=(
                                      "pairs_per_group is a count (default 1); theirs keep a fraction of each "
                                      "group's n/2 pairs (pairs_per_group=4 gives theirs for n = 16, tested)",
                                      "a pair needs a positive gap: an all-equal group gives no pair (theirs keep "
                                      "its pairs, which then weigh 0 in the draw)",
                                      "the reshuffle draws rows ∝ |A| with replacement; theirs draw whole pairs ∝ "
                                      "|A_hi| + |A_lo| without replacement, replay_times times",
                                      "their other pair weights, trainer.sampling_weight 'max' / 'mean' / 'pos' "
                                      "(ray_trainer.py:584-594), and draw laws, sampling_method 'softmax' / "
                                      "'log_softmax' (a step-scheduled temperature) / 'inverse' "
                                      "(custom_algos.py:148-167), are not built; the script uses the defaults "
                                      "'sum' and 'power' (p 1)",
                                      "an odd-sized group leaves its median row unpaired here; theirs asserts an "
                                      "even group size (custom_algos.py:108: 'Number of responses in a group "
                                      "should be even'); both scripts (qwen2_5_vl_3b.sh, qwen2_5_vl_7b.sh) use "
                                      "rollout.n 16",
                                      "ties among the lowest advantages: ours pairs the lowest tied row index, "
                                      "theirs the highest (the tail of their stable descending sort, "
                                      "custom_algos.py:102-121): a group with advantages (a, −a, −a, a) keeps rows "
                                      "(0, 1) here and (0, 2) there with one pair (tested); the kept advantages are "
                                      "equal, the kept responses differ"))),
      Technique("rorecomp", "filter", rorecomp, "priority = short-correct | long-incorrect (within-group rank)",
                f"{_S1} L163 (RoRecomp, interpretation)",
                stage=S.row_filter(rorecomp, {"correct": "correct", "lengths": "lengths", "group_id": "group_id",
                                              "valid": "valid"}),
                fidelity=Fidelity("abstract", f"{_S1} L163 (RoRecomp abstract, arXiv 2509.25958)",
                                  "short/long = within-group length rank among correct (incorrect) responses at "
                                  "`fraction` (ours). Searched 2026-12 (2 passes) code/pages/repos ('RoRecomp', "
                                  "title, 'compensation batch'): no code; intro only",
                                  read="arXiv 2509.25958v1 (page read: arxiv.org/html/2509.25958v1, pages corpus: abstract "
                                       "and the opening of §1; also summarxiv.com/en/paper/2509.25958 and "
                                       "sciencestack.ai/paper/2509.25958: abstract and a summary; seed 001 L163); "
                                       "the corpus returns a page's opening, so the method section was not "
                                       "reached; no code found. #51 paper-conventions sweep (s3): the paper's ICLR "
                                       "2026 reviews (code index, read_file id 62147932634; the paper text itself "
                                       "is not stored): review 1: 'it is not clearly stated how many samples per "
                                       "question RoRecomp uses, what value α is set to', 'How is the case handled "
                                       "when a question's responses are all correct or all incorrect?', and it "
                                       "quotes the paper: 'Once the buffer is full, the oldest experiences are "
                                       "popped to form a compensation batch B_comp for an additional training "
                                       "step' (with a p_comp whose role it calls unclear); review 2: 'the α "
                                       "selection ratio and compensation batch scheduling are tuned empirically'; "
                                       "review 3: the experiments include truncation penalties and length limits",
                                  defaults=(("fraction", "0.5 (the short / long share per group)",
                                             "α, the selection ratio; its value is not stated in the paper's "
                                             "setup (review 1)"),
                                            ("all-correct / all-incorrect group", "its short (long) share kept, "
                                             "the rest buffered", "not stated (review 1 asks)"),
                                            ("rollouts per question", "the recipe's group size",
                                             "not stated (review 1)")),
                                  placement="theirs (abstract): priority batches of short-correct and long-"
                                            "incorrect responses are selected from the online batches; the "
                                            "remaining responses go to a replay buffer for compensation batches; "
                                            "ours: a row filter after the reward that keeps the priority rows of "
                                            "each group (the rest leave the step; rorecomp_compensation replays "
                                            "them)",
                                  deviations=(
                                      "short / long is a within-group length rank at `fraction` among the "
                                      "correct (incorrect) responses: our reading; the abstract gives no rule and "
                                      "the reviews name only a selection ratio α, value not stated",
                                      "length ties are all kept (the split does not depend on row order)"))),
  )


TECHNIQUES = _technique_rows()
