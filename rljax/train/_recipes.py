"""``RLConfig`` recipe fields -> a ``rljax.recipes.Recipe`` (names resolved through ``rljax.catalog()``).

Configs written before the recipe fields existed are read through ``rljax.train._legacy``.
"""
from __future__ import annotations

from rljax.recipes import SLOTS, Critic, Recipe, resolve

__all__ = ["recipe_from_config"]

# the RLConfig fields of the recipe's slots (RECIPE_FIELDS), the critic aside: it is built from four fields
_SPEC_SLOTS = tuple(slot for slot in SLOTS if slot != "critic")


def recipe_from_config(rl) -> Recipe:
  """The recipe of an ``RLConfig``; a bad spec raises ``ValueError`` naming its ``RLConfig`` field."""
  fields = {}
  for slot in _SPEC_SLOTS:
    text = getattr(rl, slot)
    try:
      fields[slot] = resolve(text, slot)  # a str: RLConfig checks every recipe field is one
    except ValueError as e:
      raise ValueError(f"invalid config value RLConfig.{slot}={text!r}: {e}") from None
  critic = None
  if rl.critic:
    try:
      critic = Critic(loss=rl.critic, shared=rl.critic_shared, coef=rl.critic_coef, learning_rate=rl.critic_lr)
    except ValueError as e:
      raise ValueError(f"invalid config value RLConfig.critic={rl.critic!r}: {e}") from None
  try:
    return Recipe(rewards=fields["rewards"], multi_reward=fields["multi_reward"] or None,
                  shaping=fields["shaping"], prompt_filters=fields["prompt_filters"], filters=fields["filters"],
                  replay=fields["replay"],
                  advantage=fields["advantage"], loss=fields["loss"], aggregation=fields["aggregation"] or None,
                  controllers=fields["controllers"], critic=critic, name="config")
  except ValueError as e:
    raise ValueError(f"invalid recipe in RLConfig: {e}") from None
