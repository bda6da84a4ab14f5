"""One registry (issue #34 item 4): every catalog row declares its stage beside it, and the catalog is unchanged.

``tests/data/registry.json`` holds, for every row of ``rljax.catalog()`` in catalog order, its name, kind, whether
it has a stage, that stage factory's signature (``str(inspect.signature(row.stage))``: the technique's
hyper-parameters and their defaults) and its recipe slot (``slot_of``), as computed before the stages moved from
each room's ``STAGES`` dict onto the rows. Regenerate it (with every other file derived from the catalog) only for
a deliberate catalog change: ``python -m rljax.recipes --regenerate``.
"""
import ast
import json
import os

import rljax
from rljax.recipes._regenerate import registry_snapshot

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "registry.json")
ROOMS = ("objectives", "control", "advantages", "filters", "rewards", "replay", "hints")


def test_catalog_rows_and_stage_signatures_are_unchanged():
  with open(DATA) as f:
    expected = json.load(f)
  got = registry_snapshot()
  assert [r["name"] for r in got] == [r["name"] for r in expected], "catalog rows or their order changed"
  for g, e in zip(got, expected):
    assert g == e, f"{g['name']}: {g} != recorded {e}"


def _room_edges(room: str) -> dict:
  """``{module: modules of the room it imports}`` (module-level and lazy imports; ``__init__`` for a name imported
  from the package)."""
  folder = os.path.join(os.path.dirname(rljax.__file__), room)
  edges = {}
  for name in sorted(os.listdir(folder)):
    if not name.endswith(".py"):
      continue
    with open(os.path.join(folder, name), encoding="utf-8") as f:
      tree = ast.parse(f.read())
    for node in ast.walk(tree):
      if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith(f"rljax.{room}."):
        edges.setdefault(name[:-3], set()).add(node.module.split(".")[2])
      elif isinstance(node, ast.ImportFrom) and node.module == f"rljax.{room}":
        edges.setdefault(name[:-3], set()).update(
            a.name if os.path.exists(os.path.join(folder, a.name + ".py")) else "__init__" for a in node.names)
  return edges


def test_no_import_cycle_inside_a_catalog_room():
  """A row names its stage factory directly, so the module of the rows imports the stages' module: neither may
  import the other back (directly or through other modules of the room)."""
  for room in ROOMS:
    edges = _room_edges(room)
    assert edges, room  # the walk sees the room's imports
    for start in edges:
      seen, todo = set(), [start]
      while todo:
        for nxt in edges.get(todo.pop(), ()):
          assert nxt != start, f"rljax.{room}: {start} imports itself through the room's modules"
          if nxt not in seen:
            seen.add(nxt)
            todo.append(nxt)
