"""The ready-to-run config files: the top-level ``configs/`` folder, installed as ``rljax.configs``.

``setup.py`` maps ``configs/`` to the subpackage ``rljax.configs`` (as it maps ``kernels/`` to
``rljax.kernels``): a top-level package named ``configs`` would collide with a user's own ``configs/``
folder. So ``rljax train --config dapo`` and ``from rljax.configs.recipes import dapo`` work from a wheel,
an editable install and a checkout alike. A checkout run without installing (only the repository on
``PYTHONPATH``), or an editable install made before the mapping existed, gets the checkout's ``configs/``
registered as ``rljax.configs`` on first use (``configs_package``).
"""
from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from types import ModuleType
from typing import Optional

__all__ = ["configs_package", "configs_dir", "available_configs", "import_config", "load_config",
           "load_config_and_recipe"]

_BUILTIN = ("default", "tiny")  # built into rljax.train: loadable without the configs folder

_PACKAGE = "rljax.configs"


def configs_package() -> Optional[ModuleType]:
  """The ``rljax.configs`` package, or None when neither an install nor the checkout provides one."""
  try:
    return importlib.import_module(_PACKAGE)
  except ModuleNotFoundError as e:
    if e.name != _PACKAGE:
      raise
  folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")
  init = os.path.join(folder, "__init__.py")
  if not os.path.isfile(init):
    return None
  spec = importlib.util.spec_from_file_location(_PACKAGE, init, submodule_search_locations=[folder])
  module = importlib.util.module_from_spec(spec)
  sys.modules[_PACKAGE] = module
  spec.loader.exec_module(module)
  setattr(sys.modules["rljax"], "configs", module)
  return module


def configs_dir() -> Optional[str]:
  """The folder the config files are read from (None when there is none)."""
  package = configs_package()
  return None if package is None else list(package.__path__)[0]


def available_configs() -> list[str]:
  """Names accepted by ``rljax train --config NAME``: the modules of ``rljax.configs`` that define
  ``get_config()`` (``recipes`` is a library of recipes, not a config), sorted."""
  folder = configs_dir()
  if folder is None:
    return []
  names = []
  for fname in os.listdir(folder):
    if not fname.endswith(".py") or fname.startswith("_"):
      continue
    with open(os.path.join(folder, fname), encoding="utf-8") as f:
      if "\ndef get_config(" in "\n" + f.read():
        names.append(fname[:-3])
  return sorted(names)


def import_config(name: str) -> ModuleType:
  """The module ``rljax.configs.<name>``; an unknown name is a ``ValueError`` listing the available ones."""
  avail = available_configs()
  if name not in avail:
    raise ValueError(f"--config {name!r}: no such config; available: {avail} (or a path to a .py file)")
  configs_package()
  return importlib.import_module(f"{_PACKAGE}.{name}")


def load_config(name_or_path: Optional[str]):
  """A ``RunConfig`` from a config name (``rljax.configs.<name>``, the ``configs/`` folder), a ``.py`` path or a
  ``.json`` file (a run's ``config.json``)."""
  return load_config_and_recipe(name_or_path)[0]


def load_config_and_recipe(name_or_path: Optional[str]):
  """``(RunConfig, Recipe or None)`` from a config file: its ``get_config()``, and its optional
  ``get_recipe() -> rljax.recipes.Recipe`` (a recipe with Python functions, which no config field can hold).

  The fields ``get_recipe()`` gives replace the config's (``Recipe.over``); the others are the config's:
  ``Recipe(rewards=(fn,))`` keeps the config's advantage and loss, as ``train(cfg, reward_fn=fn)`` does."""
  from rljax import train as tr  # pylint: disable=import-outside-toplevel
  name_or_path = name_or_path or "default"
  if name_or_path.endswith(".json"):  # a run's config.json (or one rljax arena wrote)
    if not os.path.exists(name_or_path):
      raise ValueError(f"--config {name_or_path!r}: no such config file")
    with open(name_or_path, encoding="utf-8") as f:
      try:
        cfg = tr.config_from_dict(json.load(f))
      except json.JSONDecodeError as e:
        raise ValueError(f"--config {name_or_path}: not a JSON config ({e})") from None
    # a written config's shape is a record (a run's, or the defaults an arena config carries), not a user's choice
    return cfg.replace(model=tr.as_shape_defaults(cfg.model)), None
  if name_or_path in _BUILTIN and configs_package() is None:
    return (tr.default_config() if name_or_path == "default" else tr.tiny_config()), None
  if not name_or_path.endswith(".py"):
    module = import_config(name_or_path)
    path = module.__file__
  else:
    path = name_or_path
    if not os.path.exists(path):
      raise ValueError(f"--config {name_or_path!r}: no such config file; available names: {available_configs()}")
    configs_package()  # config files may import rljax.configs (e.g. its recipes)
    spec = importlib.util.spec_from_file_location(f"rljax_config_{os.path.basename(path)[:-3]}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
  if not hasattr(module, "get_config"):
    raise ValueError(f"config file {path} must define get_config() -> rljax.train.RunConfig")
  try:
    cfg = module.get_config()
  except ValueError as e:  # RLConfig(loss=...) refused: named rl.loss, the field's path in the config
    raise tr.user_named_error(e)
  if not isinstance(cfg, tr.RunConfig):
    raise ValueError(f"{path}: get_config() must return a RunConfig, got {type(cfg).__name__}")
  recipe = module.get_recipe() if hasattr(module, "get_recipe") else None
  from rljax.recipes import Recipe  # pylint: disable=import-outside-toplevel
  if recipe is not None and not isinstance(recipe, Recipe):
    raise ValueError(f"{path}: get_recipe() must return a rljax.recipes.Recipe, got {type(recipe).__name__}")
  if recipe is not None:  # the fields get_recipe() gives, over the config's recipe (as train(reward_fn=) does)
    recipe = recipe.over(cfg.rl.recipe())
  return cfg, recipe
