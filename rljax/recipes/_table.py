"""The table of every catalog technique with its recipe slot, needs and smallest recipe (``python -m rljax.recipes``;
its Markdown form is the table of ``docs/recipes.md``, "What each technique needs")."""
from __future__ import annotations

from rljax.recipes._examples import DENSE_REWARD, SKIP, example, trainable_names
from rljax.recipes._recipe import Recipe
from rljax.recipes._spec import _catalog, slot_of


def _needs(name: str) -> list:
  """The needs of the example recipe's stage for ``name`` (its own, nested loss terms included)."""
  fields = example(name)
  recipe = Recipe(**{k: v for k, v in fields.items() if k in ("rewards", "multi_reward", "shaping", "prompt_filters",
                                                                "filters", "replay", "advantage", "loss", "aggregation",
                                                                "controllers")})
  own = [s for s in recipe.stages() if s.name == name]
  if not own and "critic" in fields:
    from rljax.recipes._spec import resolve  # pylint: disable=import-outside-toplevel
    own = list(resolve(fields["critic"], "critic"))
  return sorted(set().union(*(s.needs for s in own))) if own else []


def table(markdown: bool = False) -> str:
  rows = _catalog()
  body = []
  for name in trainable_names():
    fields = example(name)
    recipe = "; ".join(f"{k}={v}" for k, v in fields.items() if not (k == "rewards" and v == DENSE_REWARD
                                                                      and len(fields) > 1))
    body.append((name, slot_of(rows[name]), ", ".join(_needs(name)) or "-",
                 f"not on single-turn tasks: {SKIP[name]}" if name in SKIP else recipe))
  header = ("technique", "rl field", "needs", "smallest recipe (besides the dense test reward)")
  if markdown:
    esc = lambda s: s.replace("|", "\\|")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += [f"| `{n}` | `rl.{sl}` | {esc(nd)} | `{esc(r)}` |" if n not in SKIP else
              f"| `{n}` | `rl.{sl}` | {esc(nd)} | {esc(r)} |" for n, sl, nd, r in body]
    return "\n".join(lines)
  width = [max(len(str(x)) for x in col) for col in zip(header, *body)]
  return "\n".join("  ".join(str(x).ljust(w) for x, w in zip(row, width)) for row in [header, *body])
