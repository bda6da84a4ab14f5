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
import os
import sys
from types import ModuleType
from typing import Optional

__all__ = ["configs_package", "configs_dir", "available_configs", "import_config"]

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
