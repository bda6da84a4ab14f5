"""Every file derived from the catalog, written again by one command: ``python -m rljax.recipes --regenerate``.

A technique is its module (function, row in the module's ``TECHNIQUES``, name in its ``__all__``) and its test; the
room finds the module (``rljax._technique.gather_room``), and these files follow from ``rljax.catalog()``:

* ``docs/catalog.md``: the table (``--markdown``), the count of rows per fidelity basis in the sentence before it,
  and the records in the four-question form (``--records``, between the ``<!-- records`` and ``<!-- end of
  records -->`` lines); the sections written by hand are kept;
* ``docs/recipes.md``: the table of needs and smallest recipes (``python -m rljax.recipes --markdown``);
* ``tests/data/registry.json``: every row's name, kind, stage signature and slot (``tests/test_registry.py``
  compares the live catalog with it, so a change to them is seen in review).

``--check`` writes nothing and exits 1 naming the stale files; ``--root DIR`` regenerates a checkout other than the
one the package is imported from (its ``docs/`` and ``tests/data/``).
"""
from __future__ import annotations

import inspect
import json
import os
import re

DERIVED = ("docs/catalog.md", "docs/recipes.md", "tests/data/registry.json")

_RECORDS_START = "<!-- records: python -m rljax.catalog --records -->\n"
_RECORDS_END = "\n<!-- end of records -->"
_COUNTS = re.compile(r"Today: \d+ rows against the\nauthors' code, \d+ against a peer, \d+ against the paper's "
                     r"formula, \d+ from the abstract alone")


def default_root() -> str:
  """The checkout the package is imported from (the folder holding ``rljax/``)."""
  return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def registry_snapshot(rows=None) -> list:
  """``[{name, kind, has_stage, signature, slot}, ...]``: what the catalog says of each row, in catalog order (the
  content of ``tests/data/registry.json``)."""
  from rljax._technique import slot_of  # pylint: disable=import-outside-toplevel
  from rljax.catalog import catalog  # pylint: disable=import-outside-toplevel
  return [{"name": r.name, "kind": r.kind, "has_stage": r.stage is not None,
           "signature": str(inspect.signature(r.stage)) if r.stage is not None else None, "slot": slot_of(r)}
          for r in (catalog() if rows is None else rows)]


def _replace_table(text: str, header: str, table: str, path: str) -> str:
  """``text`` with the Markdown table that starts at the line ``header`` replaced by ``table``."""
  lines = text.split("\n")
  starts = [i for i, line in enumerate(lines) if line.startswith(header)]
  if len(starts) != 1:
    raise ValueError(f"{path}: expected one table starting {header!r}, found {len(starts)}")
  end = starts[0]
  while end < len(lines) and lines[end].startswith("|"):
    end += 1
  return "\n".join(lines[:starts[0]] + table.split("\n") + lines[end:])


def catalog_md(text: str) -> str:
  """``docs/catalog.md`` with its generated parts (table, basis counts, records) made current."""
  from rljax._technique import FIDELITY_BASES  # pylint: disable=import-outside-toplevel
  from rljax.catalog import as_table, catalog, records_markdown  # pylint: disable=import-outside-toplevel
  rows = catalog()
  text = _replace_table(text, "| name | kind | formula |", as_table(rows, markdown=True), "docs/catalog.md")
  counts = {b: sum(r.fidelity is not None and r.fidelity.basis == b for r in rows) for b in FIDELITY_BASES}
  if not _COUNTS.search(text):
    raise ValueError("docs/catalog.md: the sentence 'Today: N rows against the\\nauthors' code, ...' is missing")
  text = _COUNTS.sub(f"Today: {counts['authors_code']} rows against the\nauthors' code, {counts['peer']} against a "
                     f"peer, {counts['paper_formula']} against the paper's formula, {counts['abstract']} from the "
                     "abstract alone", text)
  start, end = text.find(_RECORDS_START), text.find(_RECORDS_END)
  if start < 0 or end < start:
    raise ValueError(f"docs/catalog.md: the records block ({_RECORDS_START.strip()} ... {_RECORDS_END.strip()}) "
                     "is missing")
  return text[:start + len(_RECORDS_START)] + records_markdown(rows) + text[end:]


def recipes_md(text: str) -> str:
  """``docs/recipes.md`` with the table of needs and smallest recipes made current."""
  from rljax.recipes._table import table  # pylint: disable=import-outside-toplevel
  return _replace_table(text, "| technique | rl field | needs |", table(markdown=True), "docs/recipes.md")


def registry_json(_text: str) -> str:
  return json.dumps(registry_snapshot(), indent=1, ensure_ascii=False) + "\n"


_MAKERS = {"docs/catalog.md": catalog_md, "docs/recipes.md": recipes_md, "tests/data/registry.json": registry_json}


def regenerate(root: str | None = None, check: bool = False) -> list:
  """Makes every file of ``DERIVED`` under ``root`` current; returns the ones that were stale (``check``: writes
  nothing). Every file is computed before any is written."""
  root = default_root() if root is None else root
  missing = [p for p in DERIVED if not os.path.isfile(os.path.join(root, p))]
  if missing:
    raise FileNotFoundError(f"{root} is not an rljax checkout: {', '.join(missing)} missing (--root DIR)")
  new = {}
  for path in DERIVED:
    with open(os.path.join(root, path), encoding="utf-8") as f:
      old = f.read()
    text = _MAKERS[path](old)
    if text != old:
      new[path] = text
  if not check:
    for path, text in new.items():
      with open(os.path.join(root, path), "w", encoding="utf-8") as f:
        f.write(text)
  return list(new)
