"""Config errors in the names the user writes: ``rl.loss``, not the class attribute ``RLConfig.loss``.

The config dataclasses validate themselves and name a field by its class (``invalid config value
RLConfig.loss='ppo2': ...``): right for a Python user who constructs ``RLConfig(loss=...)`` directly and sees the
error at that line. A user who writes ``--set rl.loss=ppo2``, a config file or ``train(cfg)`` knows the field by
its dotted path in ``RunConfig``, so those routes (``apply_overrides``, ``load_config_and_recipe``, ``train``, the
``rljax`` command line) rewrite the message with ``user_field_names``: ``RLConfig.loss`` -> ``rl.loss``,
``RunConfig.seed`` -> ``seed``. ``OptimConfig`` is both ``rl.optim`` and ``sft.optim``: it is rewritten only where
the route knows which (an override's key), and kept as the class name elsewhere.
"""
from __future__ import annotations

import re
from typing import Optional

__all__ = ["SECTIONS", "user_field_names", "user_named_error"]

# config class -> its dotted path in RunConfig ("" = RunConfig itself)
SECTIONS = {"RunConfig": "", "TaskConfig": "task", "ModelSpec": "model", "SFTConfig": "sft", "RLConfig": "rl",
            "EvalConfig": "eval", "CheckpointConfig": "checkpoint", "MeshConfig": "mesh"}

# a class name not preceded by a word or a dot (``rljax.train.RLConfig.loss`` in a hint stays as written)
_NAME = re.compile(r"(?<![\w.])(" + "|".join([*SECTIONS, "OptimConfig"]) + r")\.([a-z_][a-z0-9_]*)")


def user_field_names(message: str, optim: Optional[str] = None) -> str:
  """``message`` with every ``ConfigClass.field`` written as the field's dotted path (``RLConfig.loss`` ->
  ``rl.loss``); ``OptimConfig.field`` becomes ``{optim}.field`` when ``optim`` (``"rl.optim"`` or
  ``"sft.optim"``) is given, else stays."""
  def path(m):
    cls, field = m.group(1), m.group(2)
    prefix = optim if cls == "OptimConfig" else SECTIONS[cls]
    if prefix is None:
      return m.group(0)
    return f"{prefix}.{field}" if prefix else field
  return _NAME.sub(path, message)


def user_named_error(error: Exception, optim: Optional[str] = None) -> Exception:
  """``error`` itself (same type, traceback kept) with a string message rewritten by ``user_field_names``."""
  if error.args and isinstance(error.args[0], str):
    error.args = (user_field_names(error.args[0], optim), *error.args[1:])
  return error
