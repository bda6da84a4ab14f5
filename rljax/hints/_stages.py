"""The hinted-rollout techniques as ``rljax.stages.Replay`` stages with a ``hints`` hook (recipe slot ``replay``).

Flow (``rljax.train._rollout.Collector``): after a sampling round is scored, ``hints(data, group_size,
answer_key)`` names the groups to hint and their hinted prompts; the collector samples ``g`` completions of each
hinted prompt with the same policy; the stage's ``splice`` (``_rules.splice_hinted``) moves each completion behind
its *unhinted* prompt (``_rules.unhinted_rows``) and picks the group's failed rows it replaces
(``_rules.replaced_rows``); the collector scores them against the original problem and puts them in place.
Those rows carry ``data.replay_mask`` (and, from ``fn``, ``data.hint_mask``: ``HINT_MASK`` below)
and the hinted sampler's log-probs as ``logp_behavior``. The stage's ``fn`` then only counts them (its state:
the number of hinted groups so far, checkpointed).

With ``logp_old="behavior"`` (default) a hinted row's proximal log-probs are its behaviour log-probs
``log pi_old(y_t | x + h, y_<t)`` while the update's log-probs are the forward of the trained row,
``log pi_theta(y_t | x, y_<t)``: the PPO ratio is the off-context importance ratio
``pi_theta(y | x) / pi_old(y | x + h)`` (Guide). ``"recompute"``: the ratio starts at 1 (``pi_old(y | x)``) and the
context gap stays in ``logp_behavior`` for a correction (``tis``, ``icepop``, ...).
"""
from __future__ import annotations

import math

import numpy as np

from rljax._technique import Fidelity, Technique
from rljax.hints import _rules as H
from rljax.stages import Extra, Replay, StepData

__all__ = ["guide", "oc_grpo", "lte", "adhint", "TECHNIQUES", "HINT_MASK"]

# The extra a hint stage's ``fn`` writes (``data.hint_mask``; gathered into ``rljax.stages.EXTRAS``); its hinted rows
# are also marked in the replay stages' ``replay_mask`` (``rljax.replay``), which the off-policy losses read.
HINT_MASK = Extra("hint_mask", "b", "B", "a hint stage (rljax.hints)", "True on the hinted rows")
EXTRAS = (HINT_MASK,)


def _unit(name: str, v, *, lo_open: bool = False) -> float:
  ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and (v > 0 if lo_open else v >= 0)
  if not ok or v > 1:
    raise ValueError(f"{name} must be a number in {'(0' if lo_open else '[0'}, 1], got {v!r}")
  return float(v)


def _logp_old(v: str) -> str:
  if v not in ("recompute", "behavior"):
    raise ValueError(f"logp_old must be 'recompute' or 'behavior', got {v!r}")
  return v


def _count(data: StepData, state):
  """``fn``: the hinted rows pass through; ``replay_mask`` is present for the losses; the state counts groups."""
  marked = data.hint_mask if data.hint_mask is not None else data.replay_mask
  hinted = np.asarray(np.zeros(data.batch_size, bool) if marked is None else marked, bool)
  data = data.with_extras(replay_mask=hinted.copy() if data.replay_mask is None else data.replay_mask,
                          hint_mask=hinted)
  rows = hinted & data.valid
  groups = np.unique(data.group_id[rows]).size
  state = np.asarray(state, np.int64) + groups
  return data, state, {
      "hinted_rows": float(rows.sum()), "hinted_groups": float(groups),
      "hinted_success": float(np.mean(data.correct[rows] > 0.5)) if rows.any() else 0.0,
      "hinted_groups_total": float(state[0])}


def _stage(name: str, *, hint_text, rows: float, max_success: float, template: str, logp_old: str):
  """A hint stage: ``hint_text(problem, completions keys [g], success rate) -> str or None`` is the hint of a
  chosen group (a group with success rate ``<= max_success``); ``ceil(rows * #failed)`` of its failed rows
  take hinted samples."""

  def hints(data: StepData, group_size: int, answer_key):
    chosen = H.hint_groups(data.correct, data.valid, group_size, max_success=max_success)
    ok = np.asarray(data.correct) > 0.5
    prompts, take = [], np.zeros(chosen.size, np.int64)
    for p, c in enumerate(chosen):
      r = slice(p * group_size, (p + 1) * group_size)
      problem = data.problems[p * group_size]
      hint = None
      if c:
        v = data.valid[r]
        keys = [answer_key(x) for x, vi in zip(data.completions[r], v) if vi]
        hint = hint_text(problem, keys, float(np.mean(ok[r][v])))
      if hint:
        failed = int((data.valid[r] & ~ok[r]).sum())
        take[p] = int(math.ceil(rows * failed - 1e-9))
        prompts.append(H.hinted_prompt(template, problem.prompt, hint))
      else:
        prompts.append(None)
    return prompts, take, {"hint_candidates": float(chosen.sum()), "hinted_prompts": float((take > 0).sum())}

  return Replay(lambda: np.zeros(1, np.int64), _count, name=name, logp_old=logp_old, hints=hints,
                splice=H.splice_hinted)


def guide(*, fraction: float = 1.0, rows: float = 1.0, template: str = "Hint: the answer is {hint}\n{prompt}",
          logp_old: str = "behavior"):
  """Guide (seed 001 L183): an all-failed group is sampled again with a hint in its prompt; the hinted
  samples train as rows of the unhinted prompt with the off-context ratio ``pi_theta(y | x) / pi_old(y | x + h)``.

  The hint ``h``: the first ``ceil(fraction * len(a))`` characters of the reference answer ``a`` in ``template``
  (the paper: natural-language guidance; ours: the answer, or a prefix of it). ``rows``: the fraction of the
  group's (failed) rows replaced by hinted samples, rounded up (1: the whole group is hinted samples).

  The authors' code (github.com/vaskar-open-source-research/guide_rl: ``ray_trainer._roll_with_prompt_variant``,
  ``core_algos.compute_policy_loss``): a group with accuracy <= 0.001 is re-sampled whole (``n`` samples) from
  the prompt with its dataset ``hint``; the samples train under the original prompt, ``pi_old`` taken under the
  hinted prompt (``importance_weighted_reroll``: this stage's ``logp_old="behavior"``), with the off-policy loss
  ``-A r / (r + gamma)``, unclipped, PPO clip on the other rows: the loss
  ``exgrpo_policy(beta=gamma, clip_fresh=True)`` (the hinted rows carry ``replay_mask``). Their default ``gamma``
  is 1 (``gamma_strategy: constant``); their paper scripts set ``gamma`` to the 0.9 quantile of the
  off-policy ratios of each micro-batch (one sequence per GPU in their scripts; not built). They also drop every
  group, unhinted or hinted, whose accuracy is 0 or 1 (refilling the batch from the loader) and hint only a
  multiple of ``world_size`` of the failed groups; here every failed group is hinted and 0/1 groups stay (no
  gradient, but counted by a token-mean)."""
  fraction, rows = _unit("fraction", fraction, lo_open=True), _unit("rows", rows, lo_open=True)
  return _stage("guide", hint_text=lambda problem, keys, p: H.answer_prefix(problem.answer, fraction), rows=rows,
                max_success=0.0, template=H.check_template(template), logp_old=_logp_old(logp_old))


def oc_grpo(*, fraction: float = 0.5, rows: float = 0.5,
            template: str = "Hint: the solution starts with {hint}\n{prompt}", logp_old: str = "behavior"):
  """OC-GRPO, off-context GRPO (seed 001 L235): guided rollouts of all-failed groups from a prompt that contains
  a solution prefix, trained under the original prompt with the importance-corrected ratio
  ``pi_theta(y | x) / pi_old(y | x + h)``.

  Ours: the guidance is the first ``ceil(fraction * len(a))`` characters of the reference answer; ``rows`` of
  the failed group (rounded up) take guided samples, so the group mixes unguided and guided rows.

  The authors' code (github.com/AgPriyank/OC-GRPO: verl_grpo/trainer/ray_trainer.py, their "OC-GRPO-Adaptive"
  runs): an all-failed group is re-sampled from prompts with 20%, 40%, ... 100% of the reference solution (by
  characters, cut at a word boundary) until one level yields a success, whose ``n`` samples then replace the whole
  group under the original prompt; ``pi_old`` is taken under the original prompt and each replaced token's
  advantage is multiplied by ``clamp(pi_old(y_t | x) / pi_old(y_t | x + h), 0.01, 1)``. Here: ``rows=1``,
  ``logp_old="recompute"`` and the loss's ``correction=tis(1.0, lower=0.01)`` (which also weighs fresh rows, by
  their train/sampler ratio, about 1); the cascade is not built (one ``fraction``)."""
  fraction, rows = _unit("fraction", fraction, lo_open=True), _unit("rows", rows, lo_open=True)
  return _stage("oc_grpo", hint_text=lambda problem, keys, p: H.answer_prefix(problem.answer, fraction), rows=rows,
                max_success=0.0, template=H.check_template(template), logp_old=_logp_old(logp_old))


def lte(*, max_mistakes: int = 3, rows: float = 1.0, template: str = "Hint: the answer is not {hint}\n{prompt}",
        logp_old: str = "behavior"):
  """LTE, learning from trial and error (seed 001 L199): an all-failed group is sampled again with its own
  mistakes in the prompt, no reference answer.

  Ours: the mistakes are the distinct answer keys (``task.answer_key``, default the stripped completion) of the
  group's failed rows, at most ``max_mistakes``; the off-context correction is Guide's (the abstract states
  none). A group with no non-empty wrong answer is not hinted."""
  if isinstance(max_mistakes, bool) or not isinstance(max_mistakes, int) or max_mistakes < 1:
    raise ValueError(f"max_mistakes must be an int >= 1, got {max_mistakes!r}")
  rows = _unit("rows", rows, lo_open=True)
  return _stage("lte", hint_text=lambda problem, keys, p: H.mistakes_hint(keys, max_mistakes=max_mistakes),
                rows=rows, max_success=0.0, template=H.check_template(template), logp_old=_logp_old(logp_old))


def adhint(*, min_fraction: float = 0.25, max_fraction: float = 1.0, max_success: float = 0.5, rows: float = 0.5,
           template: str = "Hint: the answer starts with {hint}\n{prompt}", logp_old: str = "behavior"):
  """ADHint's adaptive hint with a sample-difficulty prior (seed 001 L95): a hard group (success rate
  ``p <= max_success``) is hinted with a prefix of the reference answer whose ratio grows with the difficulty
  ``1 - p``: ``min_fraction + (max_fraction - min_fraction)(1 - p)``; ``ceil(rows * #failed)`` of its failed
  rows take hinted samples.

  Ours: the difficulty is the group's success rate in this round; the hint is in the prompt (the paper: a
  prefix of the reference trajectory), so no hint token is trained and the paper's gradient modulation and
  selective masking of hint tokens have nothing to act on; its posterior advantage estimation is not built
  (the group's advantage is the recipe's estimator)."""
  min_fraction = _unit("min_fraction", min_fraction)
  max_fraction = _unit("max_fraction", max_fraction, lo_open=True)
  if min_fraction > max_fraction:
    raise ValueError(f"min_fraction must be <= max_fraction, got {min_fraction} > {max_fraction}")
  max_success = _unit("max_success", max_success)
  if max_success >= 1:
    raise ValueError(f"max_success must be < 1 (a group without a failed row has nothing to hint), got {max_success}")
  rows = _unit("rows", rows, lo_open=True)

  def text(problem, keys, p):
    f = H.adhint_fraction(p, min_fraction=min_fraction, max_fraction=max_fraction)
    return H.answer_prefix(problem.answer, f) if f > 0 else None

  return _stage("adhint", hint_text=text, rows=rows, max_success=max_success, template=H.check_template(template),
                logp_old=_logp_old(logp_old))


# the rows of the catalog, beside their stage factories
_S1 = "001_5839a3671b0b4d92.txt"
_RATIO = "trained row = x ++ y (y ~ pi_old(. | x + h)); ratio pi_theta(y | x) / pi_old(y | x + h)"

TECHNIQUES = (
    Technique("guide", "replay", H.unhinted_rows,
              f"all-failed group: h = ceil(f·|a|)-prefix of the answer a; {_RATIO}",
              f"{_S1} L183 (Guide)",
              stage=guide,
              fidelity=Fidelity("authors_code", "github.com/vaskar-open-source-research/guide_rl: "
                                "verl/verl/trainer/ppo/core_algos.py (compute_policy_loss)",
                                "theirs = guide + loss exgrpo_policy(beta=γ, clip_fresh=True) with "
                                "seq_mean_token_mean (γ = 1; scripts: q0.9 of ratios, not built); hint = the answer (theirs: a dataset hint); "
                                "0/1-accuracy groups kept (theirs: dropped)",
                                read="vaskar-open-source-research/guide_rl@2f277152 verl/verl/trainer/ppo/"
                                     "core_algos.py:279-360 (compute_policy_loss: gamma shaping of off-policy "
                                     "rows, clip on on-policy rows only); verl/verl/trainer/ppo/ray_trainer.py:"
                                     "1620-1632 (accuracy filter, reroll mask); verl/verl/trainer/config/"
                                     "ppo_trainer.yaml:15-20, 32-36, 240; verl/experiments/math_reasoning/configs/"
                                     "guide_paper_experiments/guide_grpo_qwen.sh:67-84; ray_trainer.py:1488-1586 "
                                     "(batches drawn until train_batch_size groups pass, excess buffered), "
                                     ":1686-1693 (hinted groups: a multiple of world_size). Sixth draw (#51 item "
                                     "4): the unhinted groups' accuracy filter (:67-70) was not in the record. "
                                     "#51 read-whole pass: ray_trainer.py:1366-1459 (_roll_with_prompt_variant, "
                                     "mixin), :1615-1699 (_apply_filters whole: truncation filter; no group "
                                     "passing returns the whole batch as the reroll set), :1295-1365 "
                                     "(_roll_with_balanced_batch), :143-178 (plain_adv_weight); ppo_trainer.yaml:"
                                     "231-244 (scale_reasoning); dp_actor.py:240-290; guide_grpo_llama.sh (the "
                                     "same settings). Error-class sweep (#51, s2b), the caller of the shaping: "
                                     "dp_actor.py:231-232 and :269-276 switch it on when "
                                     "config.get('apply_off_policy_shaping', None) is not None, so the yaml's "
                                     "apply_off_policy_shaping: false (ppo_trainer.yaml:34) shapes too "
                                     "(gamma_strategy constant, γ 1.0, :35-36); core_algos.py:352-353 (the off-policy "
                                     "clip with off_policy_clip_ratio, 0.8 in the scripts and yaml:46, is "
                                     "commented out: read, never used); ppo_trainer.yaml:81-83 (rollout "
                                     "temperature 1.0, top_p 1: the actor's log-probs untempered, as ours). Per-row review r (#51), one layer "
                                     "out: dp_actor.py:247-249, 311 with core_algos.py:364 and fsdp_workers.py:"
                                     "123-124 (each micro-batch of ppo_micro_batch_size_per_gpu 1 sequence gives "
                                     "masked_mean over its tokens, ÷ gradient_accumulation = ppo_mini_batch_size·n "
                                     "/ world_size: a per-sequence token mean averaged over the mini-batch's "
                                     "sequences); ppo_trainer.yaml:166 (reward_manager rift), :234, main_ppo.py:"
                                     "127, workers/reward_manager/rift_grader.py:58-118, format_grader.py:200-215 "
                                     "(do_verify_format True and response_format qwen_format in the scripts: a "
                                     "response without exactly one '\\boxed{' or with more than 3 trailing "
                                     "spaces / newlines is graded as '' (0) before verify_scores, the accuracy "
                                     "of the trigger and both filters); ray_trainer.py:1479-1485, 1576-1584 and "
                                     "utils/dataset/rl_dataset.py:378-391 (passing groups beyond "
                                     "train_batch_size·n rows go to the loader's buffer and fill the next step "
                                     "first)",
                                defaults=(("trigger", "all-failed group (acc 0)", "reroll_threshold 0.001 "
                                           "(acc ≤ 0.001; yaml 0.0)"),
                                          ("accuracy of the trigger and filters", "the recipe's verdict "
                                           "(correct > 0.5)", "verify_scores of the rift reward manager: "
                                           "do_verify_format True, response_format qwen_format (scripts): a "
                                           "correct answer without exactly one '\\boxed{' or with > 3 trailing "
                                           "whitespace characters scores 0"),
                                          ("loss aggregation", "the recipe's (default token_mean: one token mean "
                                           "over the batch)", "per micro-batch of 1 sequence "
                                           "(ppo_micro_batch_size_per_gpu 1, scripts and yaml) masked_mean, ÷ "
                                           "gradient_accumulation: each sequence's token mean, averaged over the "
                                           "mini-batch (= seq_mean_token_mean); mini-batch 64 of 128 prompts: "
                                           "two optimizer steps per step"),
                                          ("rows", "1.0 (the whole group)", "the whole group re-sampled"),
                                          ("hint", "the reference answer (fraction 1.0) in template",
                                           "the dataset's hint field (use_hint)"),
                                          ("logp_old", "'behavior' (log π_old(y | x + h))",
                                           "importance_weighted_reroll True: the hinted prompt's log-probs"),
                                          ("gamma (loss)", "exgrpo_policy beta = 1 (constant)",
                                           "scripts: gamma_strategy percentile, gamma_value 0.9; yaml: "
                                           "constant 1.0, applied even with the yaml's apply_off_policy_shaping "
                                           "false (dp_actor.py tests the key for `is not None`)"),
                                          ("off_policy_clip_ratio", "none",
                                           "0.8 (scripts; yaml:46): passed to compute_policy_loss but unused "
                                           "(its clip line is commented out, core_algos.py:353): off-policy rows "
                                           "unclipped"),
                                          ("clip", "0.2 on fresh rows (clip_fresh=True)", "clip_ratio 0.2 "
                                           "on-policy rows; off-policy unclipped"),
                                          ("accuracy filter", "none", "filter_accuracy True, accuracy bounds "
                                           "0.001 / 0.999 on the unhinted groups (script :67-70; yaml 0.2 / 0.8) "
                                           "and hint_accuracy bounds 0.001 / 0.999 on the hinted ones: groups of "
                                           "accuracy 0 or 1 dropped, the batch refilled from the loader"),
                                          ("groups hinted", "every all-failed group", "only when at least "
                                           "world_size groups failed: floor(#failed / world_size)·world_size of "
                                           "them, the other failed groups dropped"),
                                          ("truncation filter", "none", "filter_truncated: scripts False; yaml "
                                           "True (a group with a response of max_response_length dropped)"),
                                          ("other switches", "(not built)", "scale_reasoning mixin False, "
                                           "roll_with_balanced_batch False, use_ref_prompt False, "
                                           "plain_adv_weight 1.0 (yaml; the scripts leave them)")),
                                placement="theirs: after the reward, unhinted groups with accuracy outside "
                                          "[0.001, 0.999] are dropped and those with accuracy ≤ 0.001 (a "
                                          "multiple of world_size of them) re-sampled with the hint, scored, the "
                                          "hinted groups outside [0.001, 0.999] dropped, until the batch holds "
                                          "train_batch_size groups; in the loss the hinted rows are off-policy: "
                                          "r/(r + γ), "
                                          "unclipped; ours: a replay stage after the reward re-samples all-failed "
                                          "groups from the hinted prompt and splices the rows in as rows of the "
                                          "unhinted prompt; the loss is a separate row (exgrpo_policy)",
                                deviations=(
                                    "the hint is the reference answer (a prefix of fraction f); theirs a "
                                    "dataset-provided natural-language hint",
                                    "the loss is composed separately: guide + exgrpo_policy(beta=1, "
                                    "clip_fresh=True) with aggregation seq_mean_token_mean is their constant-γ "
                                    "loss; their runs' γ = the 0.9 "
                                    "quantile of the off-policy ratios (of each micro-batch: one sequence per "
                                    "GPU, ppo_micro_batch_size_per_gpu 1) is not built",
                                    "groups whose accuracy is 0 or 1 are kept, unhinted (all correct) and hinted "
                                    "alike (theirs dropped by the two accuracy filters, the batch refilled from "
                                    "the loader; compose zero_variance for the drop)",
                                    "every all-failed group is hinted; theirs hints floor(#failed / world_size)·"
                                    "world_size of them (none when fewer than world_size failed) and drops the "
                                    "rest",
                                    "their gamma_strategy 'power' (off-policy ratio r^γ, core_algos.py:339-340) "
                                    "and scale_reasoning.reroll_with_cot (a second re-sampling of still-failed "
                                    "groups from the prompt's chain-of-thought variant, ray_trainer.py:1536-1549; "
                                    "False in the scripts) are not built",
                                    "their edge rule: when no group of a loader batch passes the accuracy filter, "
                                    "_apply_filters returns the whole batch as the reroll set "
                                    "(ray_trainer.py:1678-1683), so every group of it is hinted, all-solved "
                                    "groups included and without the world_size rounding; ours hints only "
                                    "all-failed groups",
                                    "their other switches are not built: mixin (:1434-1453, a hinted group's "
                                    "wrong samples replaced by the unhinted group's wrong ones), "
                                    "roll_with_balanced_batch (:1295, n/2 samples of every prompt from the "
                                    "hinted prompt), use_ref_prompt (log-probs under a dataset reference "
                                    "prompt, :1602-1611) and plain_adv_weight (advantages of the unhinted rows "
                                    "× w, :156-171); all off in their runs",
                                    "their loss is a per-sequence token mean (one sequence per micro-batch, "
                                    "masked_mean ÷ gradient_accumulation, dp_actor.py:247-311); the recipe's "
                                    "default token_mean weighs each row by its length instead, so the loss and "
                                    "its gradient differ whenever the rows' lengths differ: compose "
                                    "aggregation seq_mean_token_mean for theirs",
                                    "their trigger and filters count a correct answer as failed when the "
                                    "qwen_format check fails (not exactly one '\\boxed{', or > 3 trailing "
                                    "whitespace characters; do_verify_format True): such a group is hinted "
                                    "there, not here (ours: the recipe's verdict)",
                                    "passing groups beyond the step's train_batch_size·n rows are kept in the "
                                    "loader's buffer and trained first at the next step (sampled by the "
                                    "previous policy, π_old recomputed then, on-policy-clipped; "
                                    "ray_trainer.py:1479-1485, 1576-1584); ours trains every group in the step "
                                    "that sampled it"))),
    Technique("oc_grpo", "replay", H.unhinted_rows,
              f"all-failed group: ceil(rows·G) rows <- samples of x + solution prefix (f=0.5); {_RATIO}",
              f"{_S1} L235 (OC-GRPO)",
              stage=oc_grpo,
              fidelity=Fidelity("authors_code", "github.com/AgPriyank/OC-GRPO: verl_grpo/trainer/ray_trainer.py "
                                "(hint_mode prefix, is_correction_mode per_token)",
                                "theirs ≈ oc_grpo(rows=1, logp_old='recompute') + correction tis(1.0, lower=0.01), "
                                "applied only when a hinted sample is correct; their cascade 0.2→1.0 and prompt "
                                "not built; f=0.5, rows=0.5: ours",
                                read="AgPriyank/OC-GRPO@54d61030 verl_grpo/trainer/ray_trainer.py:3951-4188 "
                                     "(hint_mode 'prefix': the prefix cascade; at the first level where one of the "
                                     "n hinted samples is correct, all n rows of the group are replaced by the n "
                                     "hinted samples, rewards recomputed) and :5262-5300 (is_correction_mode "
                                     "per_token: advantages × clamp(exp(−Δ_t), clamp_min, 1)); "
                                     "verl_grpo/hints/prompt_builder.py:100-150 (build_prefix_prompt_text); "
                                     "verl_grpo/config/verl_run_852_n16.yaml:54-69 (hints). Second reading (#51 "
                                     "item 4): the earlier record cited :3082-3090 and :3315-3420, the "
                                     "'replacement2' mode, which the yaml does not select. Fifth draw: "
                                     "ray_trainer.py:4831-4900 (compute_is_ratio: log π_old(y | x̃) from an extra "
                                     "actor forward of the hinted prompt + response, replaced rows only; "
                                     "is_log_diff_token = that − old_log_probs); verl_grpo/hints/hint_generator.py:"
                                     "461-490 (get_solution_prefix: int(f·len) characters, Asymptote stripped, cut "
                                     "back to a word boundary); ppo_trainer_7b.yaml:352-392 (hints defaults: "
                                     "hint_trigger_threshold 0, is_weight_power 1.0). Error-class sweep (#51, s2b): "
                                     "ppo_trainer_7b.yaml:145-149 (rollout temperature 0.7, top_k −1, top_p 0.95; "
                                     "the run's yaml leaves them, README.md:64, 132: 'temperature 0.7', 'top-p "
                                     "0.95'), :361 (hint_temperature 0.7, read by other hint modes; the prefix "
                                     "branch's regen (:4039-4046) samples with the rollout's parameters); the "
                                     "IS log-probs come from the actor's compute_log_prob at the rollout "
                                     "temperature (their verl fork, branch custom-patches-v0.4.1: verl v0.4.1 "
                                     "fsdp_workers.py:701, dp_actor.py:187, 264: logits ÷ 0.7, no top-p); the "
                                     "launcher's two named runs, scripts/run_training.sh:9-10 and README.md:71, 73: "
                                     "OC-GRPO-Adaptive = verl_run_852_n16 (this record), OC-GRPO-Fixed = "
                                     "verl_run_901_masked_IS_n16.yaml (hint_mode prompt_masked, the offline "
                                     "prefix-augmented data verl_grpo/data_offline_guided_prefix, prompt_mode "
                                     "original, per_token IS, clamp_min 0.01; ray_trainer.py:1540-1640). Per-row "
                                     "review r (#51), the loss the weight enters: volcengine/verl@v0.4.1 "
                                     "(8d9e350e) verl/workers/actor/dp_actor.py:427-429, 461, 473-484, 511 "
                                     "(micro-batches of ppo_micro_batch_size_per_gpu sequences; each gives its "
                                     "loss ÷ gradient_accumulation), trainer/ppo/core_algos.py:607-621 (vanilla: "
                                     "PPO clip, dual clip −A·clip_ratio_c on A < 0) and :539-540 (token-mean = "
                                     "masked_mean over the micro-batch), workers/fsdp_workers.py:156-157 "
                                     "(mini-batch ·n ÷ world size); ppo_trainer_7b.yaml:79, 85-86, 313 (loss_mode "
                                     "vanilla, clip_ratio_c 3.0, loss_agg_mode token-mean, trainer.balance_batch "
                                     "True); verl_run_852_n16.yaml:28, 42-47 (4 GPUs, ppo_mini_batch_size 32, "
                                     "ppo_micro_batch_size_per_gpu 4, n 16)",
                                defaults=(("fraction", "0.5 (one level)", "prefix_fractions 0.2, 0.4, 0.6, 0.8, "
                                           "1.0: the lowest level with a correct sample"),
                                          ("rows", "0.5 (ceil(0.5·G) rows, any outcome, always)",
                                           "all n rows of the group, by the level's n hinted samples (any "
                                           "outcome), once one of them is correct"),
                                          ("trigger", "all-failed group", "zero-accuracy group, hint_probability "
                                           "1.0"),
                                          ("prompt", "template 'Hint: the solution starts with {hint}\\n{prompt}', "
                                           "no system prompt", "build_prefix_prompt_text ('Partial reference "
                                           "solution: …'), anti_repetition_system_prompt for levels < 1.0"),
                                          ("logp_old", "'behavior' (ratio vs log π_old(y | x + h))",
                                           "log π_old(y | x) recomputed under the original prompt (prompt_mode "
                                           "original)"),
                                          ("correction", "none (compose tis(1.0, lower=0.01))",
                                           "per_token, compute_is_ratio true, is_correction_clamp_min 0.01, "
                                           "is_weight_power 1 (the run's yaml); ppo_trainer_7b.yaml defaults: "
                                           "is_correction_mode 'none', compute_is_ratio false, clamp_min 0.3"),
                                          ("loss (the term the weight enters)", "the recipe's (ppo_clip: no dual "
                                           "clip by default; aggregation token_mean over the whole batch)",
                                           "verl v0.4.1 vanilla: clip 0.2, dual clip clip_ratio_c 3.0; "
                                           "token-mean within each micro-batch of 4 sequences, ÷ "
                                           "gradient_accumulation 32 (32·16 = 512 sequences over 4 GPUs: 128 "
                                           "each): the mean of the 128 micro-batch token means, the micro-batches "
                                           "cut after balance_batch's reordering by length"),
                                          ("other hint switches", "(not built)", "hint_trigger_mode 'simple', "
                                           "n_train null (= n), curriculum skip_all_correct / skip_unhintable "
                                           "false (yaml defaults, the run leaves them)"),
                                          ("sampling temperature / top_p (the log-probs in the IS weight)",
                                           "untempered: logp_old, logp_behavior (tis) are the untempered "
                                           "policy's, whatever rl.temperature sampled",
                                           "rollout temperature 0.7, top_p 0.95 (ppo_trainer_7b.yaml:147, 149): "
                                           "hinted and fresh samples drawn at T 0.7 within the 0.95 nucleus; "
                                           "log π_old(y | x̃) and log π_old(y | x) of the weight "
                                           "clamp(exp(−Δ_t), 0.01, 1) are the actor's at T 0.7 (logits ÷ 0.7, "
                                           "not truncated)")),
                                placement="theirs: after the reward, each zero-accuracy group is re-sampled with "
                                          "solution prefixes of growing length (0.2 → 1.0); at the first level "
                                          "where one of the n samples is correct, the group's n rows become those "
                                          "n samples (rewards recomputed), trained under the original prompt with "
                                          "advantages × the clamped per-token IS weight; a group no level solves "
                                          "stays as it was; ours: a replay stage after the reward re-samples "
                                          "all-failed groups from one prefix level and splices ceil(rows·G) "
                                          "samples in as rows of the unhinted prompt",
                                deviations=(
                                    "one prefix level (fraction 0.5); their cascade 0.2 → 1.0 (lowest level "
                                    "solved) is not built",
                                    "the hinted samples replace ceil(rows·G) rows whether or not one of them is "
                                    "correct; theirs replace the whole group (all n rows, by all n hinted "
                                    "samples) and only when at least one hinted sample is correct",
                                    "the default ratio is against the hinted log-prob (logp_old='behavior'); "
                                    "logp_old='recompute' plus correction tis(1.0, lower=0.01) is their weight "
                                    "clamp(π_old(y_t | x)/π(y_t | x̃), 0.01, 1) on the hinted rows",
                                    "that composition's weight differs from theirs in two ways: tis divides by "
                                    "the sampler's log-prob under x + h (logp_behavior), theirs by an extra "
                                    "trainer forward of log π_old(y | x̃); and tis also weighs every fresh row by "
                                    "min(π_old/π_sampler, 1) (≈ 1), theirs leaves fresh rows at weight 1",
                                    "the guidance is the first ceil(f·|a|) characters of the reference answer; "
                                    "theirs the first int(f·|s|) characters of the dataset solution s (Asymptote "
                                    "stripped), cut back to a word boundary",
                                    "the hinted prompt is our template without a system prompt; theirs is "
                                    "build_prefix_prompt_text with their anti-repetition system prompt",
                                    "their trainer's other hint_mode branches are not built (ray_trainer.py:1545, "
                                    "1664, 1974, 2789, 3070, 3572, 4180, 4333-4339): prompt_masked, hierarchical, "
                                    "hierarchical2, hierarchical_replacement, replacement2, hint_SFT, "
                                    "prefix_continuation_cascade and the single-hint solution_aware / solution_blind "
                                    "/ solution_aware_failed_conditional; their config selects prefix",
                                    "their other IS correction mode, per_token_uniform (one weight per replaced "
                                    "row, clamp(exp(−mean_t Δ_t), clamp_min, 1), ray_trainer.py:5225-5260), "
                                    "is not built; their run uses per_token",
                                    "their n_train subsampling (:4567-4600, n_explore rows drawn, n_train "
                                    "trained), hint_trigger_threshold / hint_trigger_mode 'two_phase' "
                                    "(:1489-1514) and curriculum skips are not built (off in their run)",
                                    "their IS weight is a ratio of temperature-0.7 probabilities "
                                    "(π_0.7(y_t | x)/π_0.7(y_t | x̃), clamped to [0.01, 1]); the composed tis "
                                    "takes untempered log-probs, so the weights (and which tokens hit the 0.01 "
                                    "floor or the cap 1) differ unless rl.temperature is 1 in both; their "
                                    "rollouts are also top-p 0.95 truncated",
                                    "the paper's second variant, OC-GRPO-Fixed (verl_run_901_masked_IS_n16, the "
                                    "launcher's first example): guided rows come from an offline "
                                    "prefix-augmented data set, are rolled out from their augmented prompts as "
                                    "groups of their own, and are swapped to the original prompt before "
                                    "training with the same per-token IS weight (hint_mode prompt_masked); not "
                                    "built (this row follows OC-GRPO-Adaptive's online cascade)",
                                    "the loss the weight enters: theirs is verl v0.4.1's vanilla PPO with dual "
                                    "clip 3.0 (compose ppo_clip(dual_clip=3.0)), aggregated as a token mean "
                                    "within each micro-batch of 4 sequences averaged over the micro-batches "
                                    "(dp_actor.py:511); ours aggregates by the recipe (token_mean: one mean over "
                                    "all the batch's tokens), so a token of a micro-batch with fewer tokens "
                                    "weighs more there: the losses differ whenever the micro-batches' token counts differ (no "
                                    "aggregation mode here cuts the batch into micro-batches of 4)"))),
    Technique("lte", "replay", H.mistakes_hint,
              f"all-failed group: h = 'not k1, k2, ...' (distinct wrong answer keys, <= 3); {_RATIO}",
              f"{_S1} L199 (LTE)",
              stage=lte,
              fidelity=Fidelity("abstract", f"{_S1} L199 (LTE abstract: hints from self-made mistakes)",
                                "mistakes = this step's wrong answers (as theirs, per write-ups); not built: "
                                "replacing only with correct hinted samples, f(r) = r/(r+γ), Concise hints. Code "
                                "(JamyDon/LTE) not stored",
                                read="LTE abstract (seed 001 L199, read in full: hints LMs 'with their previously "
                                     "self-made mistakes', no external guidance, against exploration stagnation); "
                                     "arXiv 2510.26109 v1, v3 and the unversioned page (pages corpus, "
                                     "arxiv.org/html/2510.26109v1, v3, 2510.26109: abstract and the opening of §1; "
                                     "the corpus returns a page's opening, the method section was not reached); "
                                     "v1's abstract: hints from 'previously self-generated incorrect answers and "
                                     "problem of overlong responses'; code (anonymous.4open.science, "
                                     "github.com/JamyDon/LTE) not stored (find_repos JamyDon: no LTE). Two "
                                     "write-ups of the method (code index, read_file ids 36716036164 on v1 with "
                                     "its Algorithm 1 and J_Mixed, 54620211176 on the ACL 2026 version): G initial "
                                     "rollouts; a none-pass group gets G extra rollouts with a hint chosen by its "
                                     "failure mode (all truncated: Concise(·) 'think concisely', no answers; some "
                                     "truncated: ConciseHint(·), the untruncated rows' wrong answers + concise; "
                                     "none truncated: Hint(·), the wrong answers; the model told not to mention "
                                     "the hint); the G' correct hinted samples replace G' randomly chosen failed "
                                     "rollouts; off-policy rows take f(r̂') · Â' with r̂' = π_θ(o'|q)/π_old(o'|H_q, "
                                     "q) and f(r) = r/(r + γ), no clip, the rest GRPO's clip; one group advantage "
                                     "over all; LTE† adds an entropy loss; verl, G = 8, temperature 1.0, max "
                                     "response 8192, 500 steps. Per-row review r (#51): J_Mixed in the v1 write-up "
                                     "(id 36716036164) has two normalisers, 1/Z' on the sum over the G' "
                                     "off-policy rows' tokens and 1/Z on the sum over the G − G' on-policy rows' "
                                     "tokens (Z, Z' not defined there); ours' answer keys: "
                                     "rljax/train/_mechanics.py:111 (task.answer_key, else the stripped "
                                     "completion; of the built-in tasks only small_addition defines answer_key, "
                                     "rljax/envs/_small_addition.py:103)",
                                defaults=(("max_mistakes", "3 distinct wrong answer keys (task.answer_key; a task without one: "
                                           "the whole stripped completion)", "all the wrong answers (a set), "
                                           "from the untruncated rows"),
                                          ("loss normalisation", "the recipe's aggregation over all rows "
                                           "(default token_mean)", "J_Mixed: 1/Z' on the off-policy rows' sum, "
                                           "1/Z on the on-policy rows' sum (two normalisers)"),
                                          ("rows", "1.0 (every failed row takes a hinted sample, right or wrong)",
                                           "only the G' correct hinted samples replace failed rows (random rows)"),
                                          ("logp_old", "'behavior' (log π_old(y | x + h))",
                                           "π_old(o' | H_q, q) in the ratio (as 'behavior')"),
                                          ("off-policy shaping", "the recipe's loss (PPO clip)",
                                           "f(r) = r/(r + γ), no clip (γ not in the write-ups)"),
                                          ("hint modes", "wrong answers only",
                                           "Hint / ConciseHint / Concise by truncation"),
                                          ("entropy loss", "the recipe's", "none (LTE), added in LTE†"),
                                          ("G / temperature / max length / steps", "the recipe's",
                                           "8 / 1.0 / 8192 / 500")),
                                placement="theirs (write-ups): in the rollout step, after the G initial rollouts "
                                          "are verified, a none-pass group is re-sampled G times with its wrong "
                                          "answers of this step in the prompt; the correct hinted samples "
                                          "replace failed rollouts, trained as rows of the unhinted prompt with "
                                          "the group advantage over the mixed group; ours: a replay stage after "
                                          "the reward: an all-failed group is re-sampled with its own wrong "
                                          "answers of this round in the prompt, and ceil(rows·#failed) failed "
                                          "rows (the last ones) take hinted samples whether correct or not "
                                          "(Guide's off-context ratio)",
                                deviations=(
                                    "the mistakes are this round's distinct wrong answer keys, as theirs (the "
                                    "G initial rollouts of the same step); at most max_mistakes = 3 (theirs: all); "
                                    "the hint template is ours (their Hint(·) template is an image, not read)",
                                    "every chosen failed row takes a hinted sample, correct or not; theirs "
                                    "replaces failed rollouts only with the correct hinted ones (G' of them, "
                                    "random rows), so an unsolved hinted group trains nothing new there but "
                                    "here trains G hinted failures (zero advantage when all fail): selecting "
                                    "only correct hinted samples is not built",
                                    "their off-policy rows take f(r) = r/(r + γ) without clip (LUFFY-style); "
                                    "ours the recipe's loss on the off-context ratio: a regularised-ratio loss "
                                    "must be chosen in the recipe (e.g. exgrpo_policy's β, as for Guide)",
                                    "LTE† (their entropy-loss variant) is the recipe's entropy term, not part "
                                    "of this row",
                                    "the off-context correction (ratio against the hinted prompt's log-prob) is "
                                    "Guide's; the abstract states none",
                                    "a group with no non-empty wrong answer is not hinted",
                                    "their Concise(·) (all rollouts truncated: 'think concisely', no answers) "
                                    "and ConciseHint(·) (some truncated) modes are not built; ours hints wrong "
                                    "answer keys only: with a task's answer_key a truncated response with no "
                                    "extracted answer gives no hint; a task without answer_key (every built-in "
                                    "task but small_addition) keys each failed row by its whole stripped "
                                    "completion, so the hint quotes up to 3 whole failed completions, truncated "
                                    "ones included, not their answers",
                                    "their J_Mixed normalises the off-policy rows' sum (1/Z') and the on-policy "
                                    "rows' sum (1/Z) separately; ours one aggregation over all the batch's rows, "
                                    "so the hinted rows' share of the loss differs (with token normalisers: "
                                    "theirs gives the off-policy tokens together the weight of the on-policy "
                                    "ones, whatever their counts)"))),
    Technique("adhint", "replay", H.adhint_fraction,
              "p <= 0.5: hint = answer prefix of ratio f_min + (f_max - f_min)(1 - p); " + _RATIO,
              f"{_S1} L95 (ADHint)",
              stage=adhint,
              fidelity=Fidelity("abstract", f"{_S1} L95 (ADHint abstract, arXiv 2512.13095)",
                                "built: hint ratio from the round's 1 − p (linear: ours), hint in the prompt; not "
                                "built: gradient modulation, masking, posterior advantages. Code 'upon acceptance': "
                                "none found (2026-12)",
                                read="ADHint abstract (seed 001 L95, arXiv 2512.13095, read in full: hint = a prefix "
                                     "of a complete reasoning trajectory; hint ratio scheduled from each sample's "
                                     "difficulty under the policy; gradient modulation and selective masking of "
                                     "hint tokens; advantages from the rollout-difficulty posterior); arXiv "
                                     "2512.13095 v1 and v2 (pages corpus, arxiv.org/html/2512.13095v1, v2: "
                                     "abstract and the opening of §1; the corpus returns a page's opening, the "
                                     "method section was not reached); code 'upon acceptance' (v2), none found. "
                                     "Per-row review c (#51): the pages corpus again returns only page openings "
                                     "(arxiv.org/html/2512.13095v1, v2; alphapapers.xyz, gist.science, "
                                     "catalyzex.com summaries of the abstract); no ADHint repository in the code "
                                     "index; the defaults said 'not stated' of a method section no one read",
                                defaults=(("min_fraction / max_fraction", "0.25 / 1.0",
                                           "not read (the method section was not reached; the abstract gives "
                                           "no value)"),
                                          ("max_success", "0.5 (hard groups hinted)", "not read (as above)"),
                                          ("rows", "0.5 of the failed rows", "not read (as above)"),
                                          ("schedule", "linear in 1 − p", "'schedules an appropriate hint "
                                           "ratio' from each sample's difficulty (abstract); the form is in the "
                                           "unread method section")),
                                placement="theirs (abstract): the hint prefix is part of the trained rollout "
                                          "(hint tokens modulated / masked), its ratio set per sample from its "
                                          "difficulty; ours: a replay stage after the reward: a hard group's "
                                          "failed rows take samples drawn with an answer prefix in the prompt, "
                                          "trained as rows of the unhinted prompt",
                                deviations=(
                                    "the hint is a prefix of the reference answer in the prompt, not a prefix of "
                                    "a reasoning trajectory in the response: no hint token is trained, so their "
                                    "gradient modulation and masking have nothing to act on (not built)",
                                    "difficulty = the group's success rate in this round; the linear schedule is "
                                    "ours",
                                    "their posterior advantage estimation is not built (the recipe's estimator)"))),
)
