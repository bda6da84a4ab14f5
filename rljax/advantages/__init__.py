"""Advantage estimators: pure, jit-able functions of rewards, group ids and masks.

Conventions (the same for every estimator; see ``docs/advantages.md``):

* Groups are identified by ``group_id [B]`` (int in ``[0, num_groups)``) and
  may be ragged; nothing reshapes to ``[prompts, G]``. ``num_groups`` is a
  *static* int (default ``B``, always enough once ids are re-indexed to
  ``0..P-1``); statistics use ``jax.ops.segment_sum`` with that many segments.
* Every function returns ``(advantages, info)``. Outcome-level estimators give
  ``[B]`` (broadcast with ``to_tokens(adv, mask) -> [B, T]``); token-level
  ones give ``[B, T]``. ``info`` is a dict: scalar entries are logging
  metrics, array entries are documented auxiliary outputs (``returns``,
  ``keep``, ``weights``...). ``scalar_metrics(info)`` keeps the scalars.
* Stateful estimators (``role_ema_baseline``, ``hadw``) are factories returning
  ``StatefulEstimator(init, update)``; ``update(state, ...) -> (advantages,
  info, new_state)`` with NamedTuple array state.
* ``valid [B]`` (optional) removes rows from every statistic and gives them 0.
  Non-finite rewards on valid rows raise ``ValueError`` when concrete; under
  ``jit`` they are treated as invalid (advantage 0; ``info["num_valid"]`` drops).
  A group with one valid member gets 0 (``singleton="zero"``) or verl's raw
  reward (``singleton="raw"``). Never NaN.
"""
from __future__ import annotations

import jax.numpy as jnp

from rljax._technique import gather_room, split_at
from rljax.advantages import _multi, _outcome, _stateful, _token
from rljax.advantages._common import masked_whiten, to_tokens  # noqa: F401
from rljax.advantages._multi import dara, gd2po, gdpo, per_reward_grpo, sa_mrpo  # noqa: F401
from rljax.advantages._outcome import (canon, difficulty_weight, dr_grpo, gae, gagar, grpo, key_baseline,  # noqa: F401
                                       outcome_to_token_rewards, passk, qae, rank, reinforce_pp,
                                       reinforce_pp_baseline, remax, rloo, task_normalized, uniqueness, vote)
from rljax.advantages._stateful import HADWState, RoleEMAState, StatefulEstimator, hadw, role_ema_baseline  # noqa: F401
from rljax.advantages._token import (implicit_progress_reward, oprl, outcome_conditioned_baseline, segment,  # noqa: F401
                                     sign_preserving_modulation, step_episode_mix, tempo)


def scalar_metrics(info: dict) -> dict:
  """The scalar (logging) entries of an estimator's ``info`` dict."""
  return {k: v for k, v in info.items() if jnp.ndim(v) == 0}


# each module declares its rows beside its estimators; the catalog order puts the stateful rows after key_baseline.
# ``__all__``: these names, then every technique module's ``__all__`` (gather_room; a new module is found there)
_OUTCOME, _TRANSFORMS = split_at(_outcome.TECHNIQUES, "difficulty_weight")
TECHNIQUES, __all__ = gather_room(
    globals(), _OUTCOME + _stateful.TECHNIQUES + _TRANSFORMS + _token.TECHNIQUES + _multi.TECHNIQUES,
    extra=("to_tokens", "masked_whiten", "scalar_metrics"))
