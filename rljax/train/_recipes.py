"""``RLConfig`` recipe fields -> a ``rljax.recipes.Recipe`` (names resolved through ``rljax.catalog()``).

Configs written before the recipe fields existed are read through ``rljax.train._legacy``.
"""
from __future__ import annotations

from rljax.recipes import SLOTS, Critic, Recipe, is_python_marker, resolve

__all__ = ["recipe_from_config", "check_recipe_fields", "marked_fields"]

# the RLConfig fields of the recipe's slots (RECIPE_FIELDS), the critic aside: it is built from four fields
_SPEC_SLOTS = tuple(slot for slot in SLOTS if slot != "critic")


def marked_fields(rl) -> list:
  """The recipe fields of an ``RLConfig`` that record a Python stage (``rljax.recipes.python_marker``)."""
  return [slot for slot in SLOTS if is_python_marker(getattr(rl, slot))]


def check_recipe_fields(rl) -> None:
  """Every spec of an ``RLConfig`` resolves (a ``ValueError`` names the field): the whole recipe is built, unless
  some field records a Python stage of a run (its ``config.json``), when each other field is resolved alone."""
  if not marked_fields(rl):
    recipe_from_config(rl)
    return
  for slot in SLOTS:
    text = getattr(rl, slot)
    if not is_python_marker(text):
      try:
        resolve(text, slot)
      except ValueError as e:
        raise ValueError(f"invalid config value RLConfig.{slot}={text!r}: {e}") from None


def recipe_from_config(rl) -> Recipe:
  """The recipe of an ``RLConfig``; a bad spec raises ``ValueError`` naming its ``RLConfig`` field, and so does a
  field that records a Python stage (a run's ``config.json`` after a recipe with Python functions): no recipe
  can be built from it."""
  marked = marked_fields(rl)
  if marked:
    slot = marked[0]
    raise ValueError(f"RLConfig.{slot}={getattr(rl, slot)!r} records a Python stage of the recipe a run trained "
                     "with, which a config cannot hold: pass that recipe again (rljax.train.train(cfg, recipe=...), "
                     "or --config with the file whose get_recipe() gives it)")
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
