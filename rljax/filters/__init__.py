"""Filters: keep-masks, selections and rollout allocation over groups and trajectories.

Where things run:

* **jit-able** (pure JAX, static ``num_groups``, ragged groups by ``group_id``):
  ``zero_variance``, ``variance_topp``, ``vcrl``, ``negative_advantage_drop``,
  ``apply_keep`` and the ``greso`` filter (``init``/``select``/``update`` over a
  ``GresoState`` of JAX arrays; also fine eagerly on the host).
* **host** (NumPy, data-dependent sizes or text): ``void_turn``,
  ``shuffle_pairs``, ``rorecomp`` (its compensation buffer: ``rljax.replay.rorecomp_compensation``),
  ``pilot_commit``, ``difficulty_budget``, and the curricula ``dump`` / ``tac`` (``CurriculumState``:
  ``curriculum_scores``, ``arm_probs``, ``draw_prompts``, ``curriculum_observe``, ``transfer_observe``).

Every filter returns ``(keep_or_selection, stats)`` where ``stats`` holds the
statistics the decision was based on. See ``docs/filters_and_rewards.md``. Each module declares its rows of
``TECHNIQUES`` beside its filters, each naming the stage that runs it in the RL loop (``stage=``: built with
``_stages.row_filter``, or a prompt filter's factory of its own).
"""
from rljax._technique import gather_room, split_at
from rljax.filters import _allocation, _curriculum, _greso, _selection, _variance
from rljax.filters._allocation import difficulty_budget, pilot_commit  # noqa: F401
from rljax.filters._curriculum import (CurriculumState, arm_probs, curriculum_init, curriculum_observe,  # noqa: F401
                                       curriculum_scores, draw_prompts, transfer_observe)
from rljax.filters._greso import Greso, GresoState, greso  # noqa: F401
from rljax.filters._selection import DEFAULT_ANSWER_PATTERN, DEFAULT_CODE_PATTERN, rorecomp, shuffle_pairs, void_turn  # noqa: F401
from rljax.filters._variance import apply_keep, negative_advantage_drop, variance_topp, vcrl, zero_variance  # noqa: F401

# each module declares its rows beside its filters; the catalog order interleaves them. ``__all__``: every
# technique module's ``__all__`` (gather_room; a new module is found there)
_VAR, _VAR_LATER = split_at(_variance.TECHNIQUES, "negative_advantage_drop")
_SEL, _SEL_LATER = split_at(_selection.TECHNIQUES, "shuffle_pairs")
TECHNIQUES, __all__ = gather_room(globals(), _VAR + _SEL + _greso.TECHNIQUES + _allocation.TECHNIQUES + _SEL_LATER
                                  + _VAR_LATER + _curriculum.TECHNIQUES)
