"""Hinted and off-context rollouts for failed groups (Guide, OC-GRPO, LTE, ADHint).

A failed group is sampled again from a *hinted* prompt ``x + h`` (a prefix of the reference answer, or the
model's own wrong answers); each hinted sample ``y`` trains as a row of the *unhinted* prompt ``x`` (its tokens
are ``x`` followed by ``y``), so every forward of the RL step is under ``x``, and it keeps the hinted sampler's
log-probs as its behaviour log-probs. The off-context importance ratio is then
``pi_theta(y | x) / pi_old(y | x + h) = exp(logp - logp_behavior)``: the PPO ratio with ``logp_old="behavior"``
(default), or a correction (``tis``, ``icepop``) against ``logp_behavior`` with ``logp_old="recompute"``.

Each technique is a ``rljax.stages.Replay`` stage with a ``hints`` hook (recipe slot ``replay``,
``--set rl.replay='guide'``). The rules are pure functions in ``_rules``. See ``docs/recipes.md`` (hints).
"""
from rljax._technique import Fidelity, Technique
from rljax.hints._rules import (adhint_fraction, answer_prefix, hint_groups, hinted_prompt, mistakes_hint,
                                replaced_rows, splice_hinted, unhinted_rows)
from rljax.hints._stages import adhint, guide, lte, oc_grpo

__all__ = ["hint_groups", "answer_prefix", "mistakes_hint", "adhint_fraction", "hinted_prompt", "unhinted_rows",
           "replaced_rows", "splice_hinted", "guide", "oc_grpo", "lte", "adhint", "TECHNIQUES"]

_S1 = "001_5839a3671b0b4d92.txt"
_RATIO = "trained row = x ++ y (y ~ pi_old(. | x + h)); ratio pi_theta(y | x) / pi_old(y | x + h)"

TECHNIQUES = (
    Technique("guide", "replay", unhinted_rows,
              f"all-failed group: h = ceil(f·|a|)-prefix of the answer a; {_RATIO}",
              f"{_S1} L183 (Guide)",
              stage=guide,
              fidelity=Fidelity("authors_code", "github.com/vaskar-open-source-research/guide_rl: "
                                "verl/verl/trainer/ppo/core_algos.py (compute_policy_loss)",
                                "theirs = guide + loss exgrpo_policy(beta=γ, clip_fresh=True) (γ = 1; paper scripts: "
                                "γ = q0.9 of the ratios, not built); hint = the answer (theirs: a dataset hint); "
                                "hinted 0/1-accuracy groups kept (theirs: dropped)")),
    Technique("oc_grpo", "replay", unhinted_rows,
              f"all-failed group: ceil(rows·G) rows <- samples of x + solution prefix (f=0.5); {_RATIO}",
              f"{_S1} L235 (OC-GRPO)",
              stage=oc_grpo,
              fidelity=Fidelity("authors_code", "github.com/AgPriyank/OC-GRPO: verl_grpo/trainer/ray_trainer.py "
                                "(is_correction_mode per_token)",
                                "theirs = oc_grpo(rows=1, logp_old='recompute') + correction tis(1.0, lower=0.01); "
                                "their prefix cascade 0.2→1.0 (first level solved) not built; f=0.5, rows=0.5, "
                                "ratio vs hinted logp: our defaults")),
    Technique("lte", "replay", mistakes_hint,
              f"all-failed group: h = 'not k1, k2, ...' (distinct wrong answer keys, <= 3); {_RATIO}",
              f"{_S1} L199 (LTE)",
              stage=lte,
              fidelity=Fidelity("abstract", f"{_S1} L199 (LTE abstract: hints from self-made mistakes)",
                                "mistakes = this round's wrong answer keys (paper: previous); correction as "
                                "Guide's. Code github.com/JamyDon/LTE (arXiv 2510.26109 v4): no snapshot, not "
                                "indexed; anonymous.4open.science: not stored (2026-12)")),
    Technique("adhint", "replay", adhint_fraction,
              "p <= 0.5: hint = answer prefix of ratio f_min + (f_max - f_min)(1 - p); " + _RATIO,
              f"{_S1} L95 (ADHint)",
              stage=adhint,
              fidelity=Fidelity("abstract", f"{_S1} L95 (ADHint abstract, arXiv 2512.13095)",
                                "built: hint ratio from the round's 1 − p (linear: ours), hint in the prompt; not "
                                "built: gradient modulation, masking, posterior advantages. Code 'upon acceptance': "
                                "none found (2026-12)")),
)
