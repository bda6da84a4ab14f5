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
from rljax.hints._rules import (adhint_fraction, answer_prefix, hint_groups, hinted_prompt, mistakes_hint,  # noqa: F401
                                replaced_rows, splice_hinted, unhinted_rows)
from rljax._technique import gather_room
from rljax.hints import _stages
from rljax.hints._stages import adhint, guide, lte, oc_grpo  # noqa: F401

# ``__all__``: the rules, then every technique module's ``__all__`` (gather_room; a new module is found there)
TECHNIQUES, __all__ = gather_room(globals(), _stages.TECHNIQUES, extra=(
    "hint_groups", "answer_prefix", "mistakes_hint", "adhint_fraction", "hinted_prompt", "unhinted_rows",
    "replaced_rows", "splice_hinted"))
