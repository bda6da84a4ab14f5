"""One registry (issue #34 item 4): every catalog row declares its stage beside it, and the catalog is unchanged.

``tests/data/registry.json`` holds, for every row of ``rljax.catalog()`` in catalog order, its name, kind, whether
it has a stage, that stage factory's signature (``str(inspect.signature(row.stage))``: the technique's
hyper-parameters and their defaults) and its recipe slot (``slot_of``), as computed before the stages moved from
each room's ``STAGES`` dict onto the rows. Regenerate it only for a deliberate catalog change:
``python tests/test_registry.py --write``.
"""
import inspect
import json
import os
import sys

import rljax
from rljax._technique import slot_of

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "registry.json")


def snapshot() -> list:
  """``[{name, kind, has_stage, signature, slot}, ...]``: what the catalog says of each row, in catalog order."""
  return [{"name": r.name, "kind": r.kind, "has_stage": r.stage is not None,
           "signature": str(inspect.signature(r.stage)) if r.stage is not None else None, "slot": slot_of(r)}
          for r in rljax.catalog()]


def test_catalog_rows_and_stage_signatures_are_unchanged():
  with open(DATA) as f:
    expected = json.load(f)
  got = snapshot()
  assert [r["name"] for r in got] == [r["name"] for r in expected], "catalog rows or their order changed"
  for g, e in zip(got, expected):
    assert g == e, f"{g['name']}: {g} != recorded {e}"


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
  with open(DATA, "w") as f:
    json.dump(snapshot(), f, indent=1, ensure_ascii=False)
    f.write("\n")
