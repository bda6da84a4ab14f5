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
from rljax.hints._rules import (adhint_fraction, answer_prefix, hint_groups, hinted_prompt, mistakes_hint,
                                replaced_rows, splice_hinted, unhinted_rows)
from rljax.hints._stages import TECHNIQUES, adhint, guide, lte, oc_grpo

__all__ = ["hint_groups", "answer_prefix", "mistakes_hint", "adhint_fraction", "hinted_prompt", "unhinted_rows",
           "replaced_rows", "splice_hinted", "guide", "oc_grpo", "lte", "adhint", "TECHNIQUES"]
