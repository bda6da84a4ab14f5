"""``python -m rljax.recipes [--markdown]``: every catalog technique with its recipe slot, needs and smallest recipe.

The Markdown table is the one in ``docs/recipes.md`` ("What each technique needs"); a test checks it is current.
``python -m rljax.recipes --regenerate [--check] [--root DIR]`` rewrites every file derived from the catalog
(``rljax.recipes._regenerate``: docs/catalog.md, this table, tests/data/registry.json).
"""
from __future__ import annotations

import sys

from rljax.recipes._table import table


def main(argv=None) -> int:
  import argparse  # pylint: disable=import-outside-toplevel
  parser = argparse.ArgumentParser(prog="python -m rljax.recipes",
                                   description="Every catalog technique with its recipe slot, needs and smallest "
                                               "recipe; --regenerate rewrites every file derived from the catalog.")
  parser.add_argument("--markdown", action="store_true", help="the Markdown table of docs/recipes.md")
  parser.add_argument("--regenerate", action="store_true",
                      help="rewrite docs/catalog.md (table, fidelity counts, records), the table of docs/recipes.md "
                           "and tests/data/registry.json from the catalog")
  parser.add_argument("--check", action="store_true", help="with --regenerate: write nothing, exit 1 if one is stale")
  parser.add_argument("--root", metavar="DIR", help="with --regenerate: the checkout to regenerate (default: the one "
                                                    "this package is imported from)")
  args = parser.parse_args(sys.argv[1:] if argv is None else argv)
  if (args.check or args.root) and not args.regenerate:
    parser.error("--check and --root go with --regenerate")
  if args.regenerate:
    from rljax.recipes._regenerate import regenerate  # pylint: disable=import-outside-toplevel
    stale = regenerate(args.root, check=args.check)
    print(f"{'stale' if args.check else 'rewritten'}: {', '.join(stale)}" if stale else "every derived file is current")
    return 1 if args.check and stale else 0
  print(table(markdown=args.markdown))
  return 0


if __name__ == "__main__":
  sys.exit(main())
