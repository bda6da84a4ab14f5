"""Machine-readable list of every technique rljax implements.

``rljax.catalog()`` returns a tuple of ``Technique`` rows gathered from the
``TECHNIQUES`` tuple each room (objectives, control, advantages, filters,
rewards, ...) declares explicitly; there is no global registry to mutate.
``python -m rljax.catalog`` prints it as a table; ``python -m rljax.catalog NAME``
prints one technique in full, with its arguments and their defaults; ``--markdown``
writes the table used in ``docs/catalog.md``. ``python -m rljax.recipes --regenerate`` rewrites every file derived
from the catalog (docs/catalog.md, docs/recipes.md's table, tests/data/registry.json).
"""
from __future__ import annotations

import difflib
import importlib
import re
import sys

from rljax._technique import Technique, slot_of

_ROOMS = (
    "rljax.objectives", "rljax.control", "rljax.advantages", "rljax.filters",
    "rljax.rewards", "rljax.replay", "rljax.hints",
)


def catalog() -> tuple[Technique, ...]:
  """Every implemented technique, in room order. Names are unique."""
  rows: list[Technique] = []
  for room in _ROOMS:
    try:
      module = importlib.import_module(room)
    except ImportError as e:  # a room not built yet must not hide the others
      if f"No module named '{room}'" in str(e):
        continue
      raise
    rows.extend(getattr(module, "TECHNIQUES", ()))
  seen: dict[str, str] = {}
  for row in rows:
    if row.name in seen:
      raise ValueError(f"technique name {row.name!r} is declared twice")
    seen[row.name] = row.kind
  return tuple(rows)


FIDELITY_LABELS = {"authors_code": "authors' code", "peer": "peer implementation",
                   "paper_formula": "paper formula", "abstract": "abstract only (interpretation)"}


def fidelity_text(row: Technique, with_differences: bool = True) -> str:
  """``"authors' code: owner/repo: path; differs: ..."``: what ``row`` was checked against (``"unchecked"``)."""
  f = row.fidelity
  if f is None:
    return "unchecked"
  text = f"{FIDELITY_LABELS[f.basis]}: {f.reference}"
  if with_differences and f.differences:
    text += f"; {'interpreted' if f.basis == 'abstract' else 'differs'}: {f.differences}"
  return text


def record_lines(f) -> list:
  """The four questions of a ``Fidelity`` in the four-question form (``[]`` for a row not yet in it): the source
  read, the defaults side by side, the placement, the deviations."""
  if f is None or not f.in_full:
    return []
  lines = [f"read:       {f.read}"]
  if f.defaults:
    lines.append("defaults:   " + "; ".join(f"{n}: ours {ours} / theirs {theirs}" for n, ours, theirs in f.defaults))
  else:
    lines.append("defaults:   the source sets no hyper-parameter of this row")
  lines.append(f"placement:  {f.placement}")
  lines += [f"deviation:  {d}" for d in f.deviations] or ["deviations: none"]
  return lines


def records_markdown(rows=None) -> str:
  """The records in the four-question form, one block per row (the section of ``docs/catalog.md`` after the
  table)."""
  rows = catalog() if rows is None else rows
  full = [r for r in rows if r.fidelity is not None and r.fidelity.in_full]
  out = [f"{len(full)} of {len(rows)} rows are in the four-question form."]
  for r in full:
    f = r.fidelity
    out += ["", f"### `{r.name}`", "", f"- **source read**: {f.read}"]
    if f.defaults:
      out.append("- **defaults** (ours / theirs): " + "; ".join(f"`{n}` {o} / {t}" for n, o, t in f.defaults))
    else:
      out.append("- **defaults**: the source sets no hyper-parameter of this row")
    out.append(f"- **placement**: {f.placement}")
    if f.deviations:
      out.append("- **deviations**:")
      out += [f"  - {d}" for d in f.deviations]
    else:
      out.append("- **deviations**: none")
  return "\n".join(out)


def _code(text: str) -> str:
  """``text`` as one Markdown code span, whatever backticks it holds."""
  longest = max((len(part) for part in re.findall(r"`+", text)), default=0)
  fence = "`" * (longest + 1)
  pad = " " if text.startswith("`") or text.endswith("`") else ""
  return f"{fence}{pad}{text}{pad}{fence}"


def as_table(rows=None, markdown: bool = False) -> str:
  """The catalog as a console table, or (``markdown``) the table of ``docs/catalog.md`` with the fidelity column
  (what each technique was checked against, and how rljax's default differs)."""
  rows = catalog() if rows is None else rows
  if markdown:
    header = ("name", "kind", "formula", "arguments (defaults)", "source", "checked against")
    body = [(r.name, r.kind, r.formula, ", ".join(_code(a) for a in r.arguments), r.source, fidelity_text(r))
            for r in rows]
  else:
    header = ("name", "kind", "formula", "checked against")
    body = [(r.name, r.kind, r.formula, FIDELITY_LABELS.get(getattr(r.fidelity, "basis", None), "unchecked"))
            for r in rows]
  if markdown:
    esc = lambda s: s.replace("|", "\\|")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| `" + n + "` | " + " | ".join(esc(x) for x in rest) + " |" for n, *rest in body]
    return "\n".join(lines)
  widths = [max(len(str(x)) for x in col) for col in zip(header, *body)]
  widths[2] = min(widths[2], 70)
  fmt = lambda row: "  ".join(str(x)[:w].ljust(w) for x, w in zip(row, widths))
  return "\n".join([fmt(header), fmt(tuple("-" * w for w in widths))] + [fmt(r) for r in body])


def describe(row: Technique) -> str:
  """One technique in full: kind, recipe slot, formula, arguments with their defaults, source, fidelity."""
  slot = slot_of(row)
  required = [a for a in row.arguments if "=" not in a]
  first = row.arguments[0] if row.arguments else ""
  if required:
    example = f"{row.name}({', '.join(a + '=...' for a in required)})"
  else:
    example = f"{row.name}({first})" if first and '"' not in first else row.name
  lines = [f"{row.name} ({row.kind})", f"  formula:   {row.formula}",
           f"  arguments: {', '.join(row.arguments) if row.arguments else 'none'}"]
  if slot is not None:
    lines.append(f'  use:       rl.{slot}, e.g. --set "rl.{slot}={example}" '
                 f"(Python: rljax.recipes.stage({row.name!r}, ...))")
  lines += [f"  source:    {row.source}", f"  checked against: {fidelity_text(row)}"]
  lines += ["  " + line for line in record_lines(row.fidelity)]
  return "\n".join(lines)


def main(argv=None) -> int:
  """``python -m rljax.catalog [NAME ...] [--kind KIND] [--markdown] [--records]``."""
  import argparse  # pylint: disable=import-outside-toplevel
  from rljax._technique import KINDS  # pylint: disable=import-outside-toplevel
  parser = argparse.ArgumentParser(prog="python -m rljax.catalog",
                                   description="Every technique rljax implements: name, kind, formula and what it "
                                               "was checked against (--markdown adds arguments, sources and "
                                               "differences; NAME shows one technique with its arguments).")
  parser.add_argument("names", nargs="*", metavar="NAME",
                      help="show these techniques in full: formula, arguments with their defaults, source")
  parser.add_argument("--kind", action="append", choices=KINDS, metavar="KIND",
                      help=f"only rows of this kind (repeatable); one of: {', '.join(KINDS)}")
  parser.add_argument("--markdown", action="store_true", help="a Markdown table (the one in docs/catalog.md)")
  parser.add_argument("--records", action="store_true",
                      help="the records in the four-question form as Markdown (the section in docs/catalog.md)")
  args = parser.parse_args(sys.argv[1:] if argv is None else argv)
  rows = [r for r in catalog() if not args.kind or r.kind in args.kind]
  if args.records:
    print(records_markdown(rows))
    return 0
  if args.names:
    by_name = {r.name: r for r in rows}
    unknown = [n for n in args.names if n not in by_name]
    if unknown:
      near = difflib.get_close_matches(unknown[0], list(by_name), n=3)
      hint = f"; did you mean {', '.join(near)}?" if near else "; `python -m rljax.catalog` lists every name"
      parser.error(f"unknown technique {unknown[0]!r}{' among --kind ' + ', '.join(args.kind) if args.kind else ''}"
                   f"{hint}")
    rows = [by_name[n] for n in args.names]
    if not args.markdown:
      print("\n\n".join(describe(r) for r in rows))
      return 0
  print(as_table(rows, markdown=args.markdown))
  return 0
