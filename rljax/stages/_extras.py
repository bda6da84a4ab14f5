"""The declared extras: entries of ``StepData.extras`` / ``TrainBatch.extras`` that the library's stages and runners
write and read, each declared by the module that writes it, gathered into one table (:data:`EXTRAS`).

A writer declares its extras beside its code, as a module-level ``EXTRAS`` tuple of :class:`Extra` (the replay stages
``replay_mask`` and ``replay_slot`` in ``rljax/replay/_stages.py``, the hint stages ``hint_mask``, the self-play
episodes ``role_id``, the asynchronous sampler ``policy_version``, ...), as a technique declares its row in its
module's ``TECHNIQUES``. The table is gathered the way a room gathers its techniques (``rljax._technique``): every
module of the catalog's rooms and of ``rljax.train`` is imported and its ``EXTRAS`` joined, on the table's first use
(never at import: the writers import ``rljax.stages``). A name declared twice raises, naming both modules.
"""
from __future__ import annotations

import importlib
import pkgutil
import sys
from typing import Iterator, Mapping, NamedTuple, Optional

__all__ = ["Extra", "EXTRAS", "EXTRA_ROOMS"]


class Extra(NamedTuple):
  """A declared extra: its ``name`` (the ``extras`` key), its dtype ``kinds`` (NumPy kinds: ``"b"`` bool, ``"iu"``
  int, ``"f"`` float), its ``shape`` (``"B"``: ``[B]``, ``"BT"``: ``[B, T]``), who writes it (``by``) and what it
  holds (``doc``). Declared in its writer's module (``EXTRAS = (Extra(...), ...)``); ``extra.of(record)`` is the
  typed read of a ``StepData`` or a ``TrainBatch`` (inside the jitted update too)."""
  name: str
  kinds: str
  shape: str
  by: str
  doc: str

  def of(self, record):
    """``record.extras[name]`` (a ``StepData`` or ``TrainBatch``), or None when the record has none."""
    extras = record.extras
    return None if not extras else extras.get(self.name)


# The rooms whose modules may declare extras: the catalog's rooms (their stages; the same list as ``rljax.catalog``'s,
# tested) and the trainer (its runners and episodes).
EXTRA_ROOMS = ("rljax.objectives", "rljax.control", "rljax.advantages", "rljax.filters", "rljax.rewards",
               "rljax.replay", "rljax.hints", "rljax.train")


def _initializing(module) -> bool:
  return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def _room_modules(room: str, importing: bool) -> Iterator:
  """Every module of ``room`` (file-name order); ``importing``: imported if not yet, else only the loaded ones."""
  package = sys.modules.get(room) if not importing else importlib.import_module(room)
  if package is None:
    return
  yield package
  for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
    if info.name == "__main__":  # a command, not a module to import
      continue
    name = f"{room}.{info.name}"
    module = importlib.import_module(name) if importing else sys.modules.get(name)
    if module is not None:
      yield module


def gather() -> tuple:
  """``({name: Extra}, complete)``: the ``EXTRAS`` of every module of :data:`EXTRA_ROOMS`. While some ``rljax``
  module is being imported (a stage read at import time), only the modules already loaded are read, nothing is
  imported, and the table is not ``complete`` (not kept)."""
  importing = not any(_initializing(m) for n, m in list(sys.modules.items()) if n.split(".")[0] == "rljax")
  table, where = {}, {}
  for room in EXTRA_ROOMS:
    for module in _room_modules(room, importing):
      for extra in getattr(module, "EXTRAS", ()):
        if not isinstance(extra, Extra):
          raise TypeError(f"{module.__name__}.EXTRAS must hold rljax.stages.Extra records, got {extra!r}")
        if extra.name in table and table[extra.name] is not extra:
          raise ValueError(f"extra {extra.name!r} is declared twice: in {where[extra.name]} and {module.__name__}")
        table[extra.name], where[extra.name] = extra, module.__name__
  return table, importing


class _Table(Mapping):
  """:data:`EXTRAS`: ``{name: Extra}``, gathered on first use (:func:`gather`) and then kept."""

  def __init__(self):
    self._kept: Optional[dict] = None

  def _table(self) -> dict:
    if self._kept is not None:
      return self._kept
    table, complete = gather()
    if complete:
      self._kept = table
    return table

  def __getitem__(self, name: str) -> Extra:
    return self._table()[name]

  def __iter__(self):
    return iter(self._table())

  def __len__(self) -> int:
    return len(self._table())

  def __repr__(self) -> str:
    return f"EXTRAS({sorted(self._table())})"


# ``{name: Extra}`` of every declared extra (each declared in its writer's module; see the module docstring).
EXTRAS: Mapping[str, Extra] = _Table()
