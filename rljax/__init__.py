"""rljax: JAX-native, functional RL post-training for language models.

Objectives, advantages, filters and rewards are small pure functions composed in
Python (``rljax.objectives.chain``); see ``rljax.catalog()`` for every technique.
Subpackages are imported lazily so that ``import rljax`` stays cheap.
"""
import importlib

from rljax import types
from rljax._technique import Fidelity, Technique
from rljax.catalog import catalog
from rljax.host_allocator import configure_host_allocator

__version__ = "0.1.0"

_LAZY = ("objectives", "control", "advantages", "filters", "rewards", "models",
         "sampling", "data", "envs", "train", "parallel", "kernels", "cli", "sandbox")


def __getattr__(name):
  if name in _LAZY:
    return importlib.import_module(f"rljax.{name}")
  raise AttributeError(f"module 'rljax' has no attribute {name!r}")


__all__ = ["Fidelity", "Technique", "catalog", "configure_host_allocator", "types", *_LAZY]
