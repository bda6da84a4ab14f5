"""Technique specs: ``"qae(quantile=0.7)"`` -> a stage, through ``rljax.catalog()``.

A spec is a comma-separated list of techniques, each a catalog name, optionally called with Python literal
arguments; an argument may itself be a technique call (``ppo_clip(eps_high=0.28, correction=icepop(beta=5.0))``,
``erc(ppo_clip(), low=0.9)``)::

    grpo
    qae(quantile=0.7)
    zero_variance(refill=True), vcrl(threshold=0.3)
    ppo_clip(eps_high=0.28), kl_penalty(beta=0.001, estimator="k3")

Parsing uses Python's ``ast`` and evaluates literals only (numbers, strings, booleans, None, tuples, lists,
dicts): nothing in a spec is executed. Names resolve through ``rljax.catalog()``; each row's ``stage``
factory builds the stage, so a new catalog row is usable here with no other change.
"""
from __future__ import annotations

import ast
import dataclasses
import inspect
from typing import Any, Optional

from rljax._technique import Technique, slot_of

__all__ = ["Call", "parse", "SLOTS", "slot_of", "names_for", "resolve_call", "resolve", "python_marker",
           "is_python_marker"]

# slot -> what it holds (the rl.* config field / Recipe field of the same name)
SLOTS = {
    "rewards": "reward functions (host verifiers)",
    "multi_reward": "multi-reward aggregation",
    "shaping": "reward shaping",
    "prompt_filters": "pre-rollout prompt selection",
    "filters": "filters over the sampled groups or rows",
    "replay": "a replay buffer (past rollouts re-enter the batch)",
    "advantage": "advantage estimator (then advantage transforms)",
    "loss": "loss terms (policy loss, corrections, KL, entropy, supervised)",
    "aggregation": "loss aggregation",
    "controllers": "controllers",
    "critic": "value loss of the critic",
}

# what one stage of each slot is called in messages
_NOUN = {"rewards": "reward", "multi_reward": "multi-reward aggregation", "shaping": "shaping stage",
         "prompt_filters": "prompt filter", "filters": "filter",
         "replay": "replay buffer", "advantage": "advantage estimator or transform",
         "loss": "loss term", "aggregation": "aggregation", "controllers": "controller", "critic": "value loss"}


@dataclasses.dataclass(frozen=True)
class Call:
  """One parsed technique: ``name(*args, **kwargs)``; arguments may be nested ``Call``s."""
  name: str
  args: tuple = ()
  kwargs: tuple = ()  # ((key, value), ...)

  def __str__(self) -> str:
    parts = [_show(a) for a in self.args] + [f"{k}={_show(v)}" for k, v in self.kwargs]
    return f"{self.name}({', '.join(parts)})" if parts else self.name


def _show(v) -> str:
  """An argument as spec text; a technique inside another is always a call (``icepop()``, not ``icepop``)."""
  if isinstance(v, Call) or hasattr(v, "needs") and hasattr(v, "name"):  # a Call, or a stage from stage(...)
    text = str(v) if isinstance(v, Call) else (getattr(v, "spec", None) or f"<{v.name}>")
    return text if text.endswith(")") or text.startswith("<") else text + "()"
  return repr(v)


def _value(node: ast.AST, text: str):
  if isinstance(node, (ast.Call, ast.Name)):
    if isinstance(node, ast.Name) and node.id in ("True", "False", "None"):
      return ast.literal_eval(node)
    if isinstance(node, ast.Name):
      raise ValueError(f"{ast.get_source_segment(text, node)!r} in {text!r}: write a technique as a call "
                       f"({node.id}()) or a string as '{node.id}'")
    return _call(node, text)
  try:
    return ast.literal_eval(node)
  except ValueError:
    raise ValueError(f"{ast.get_source_segment(text, node)!r} in {text!r} is not a literal (numbers, strings, "
                     "True/False/None, tuples, lists, dicts) or a technique call") from None


def _call(node: ast.AST, text: str) -> Call:
  if isinstance(node, ast.Name):
    return Call(node.id)
  if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
    if any(k.arg is None for k in node.keywords):
      raise ValueError(f"{text!r}: **kwargs are not allowed in a spec")
    if any(isinstance(a, ast.Starred) for a in node.args):
      raise ValueError(f"{text!r}: *args are not allowed in a spec")
    return Call(node.func.id, tuple(_value(a, text) for a in node.args),
                tuple((k.arg, _value(k.value, text)) for k in node.keywords))
  raise ValueError(f"{ast.get_source_segment(text, node)!r} in {text!r} is not a technique name or call "
                   "such as qae(quantile=0.7)")


def parse(text: str) -> list:
  """``"a(x=1), b"`` -> ``[Call("a", (), (("x", 1),)), Call("b")]`` (an empty string -> ``[]``)."""
  if not isinstance(text, str):
    raise ValueError(f"a technique spec must be a string, got {text!r}")
  if not text.strip():
    return []
  try:
    tree = ast.parse(text.strip(), mode="eval").body
  except SyntaxError as e:
    raise ValueError(f"cannot parse technique spec {text!r}: {e.msg} (expected e.g. 'qae(quantile=0.7)' or "
                     "'zero_variance, vcrl(threshold=0.3)')") from None
  items = tree.elts if isinstance(tree, ast.Tuple) else [tree]
  return [_call(node, text) for node in items]


def _catalog() -> dict:
  from rljax.catalog import catalog  # pylint: disable=import-outside-toplevel
  return {r.name: r for r in catalog()}


def names_for(slot: str) -> list:
  """Every catalog name usable in ``slot``, in catalog order."""
  return [name for name, row in _catalog().items() if slot_of(row) == slot]


def _check_arguments(row: Technique, args: tuple, kwargs: dict) -> None:
  sig = inspect.signature(row.stage)
  # with their defaults: "[quantile=0.5, eps=1e-06, ...]"
  accepted = "[" + ", ".join(row.arguments) + "]" if row.arguments else "none"
  try:
    sig.bind(*args, **kwargs)
  except TypeError as e:
    msg = str(e)
    if "unexpected keyword argument" in msg:
      bad = msg.split("'")[1] if "'" in msg else msg
      raise ValueError(f"{row.name}: unknown argument {bad!r}; its arguments are {accepted}") from None
    if "missing a required argument" in msg:
      bad = msg.split("'")[1] if "'" in msg else msg
      raise ValueError(f"{row.name}: missing required argument {bad!r} (e.g. {row.name}({bad}=...)); "
                       f"its arguments are {accepted}") from None
    raise ValueError(f"{row.name}: {msg}; its arguments are {accepted}") from None


def resolve_call(call: Call, slot: str, rows: Optional[dict] = None) -> Any:
  """Builds the stage of ``call`` for ``slot`` (nested calls are resolved for the ``loss`` slot)."""
  rows = _catalog() if rows is None else rows
  row = rows.get(call.name)
  what = _NOUN.get(slot, slot)
  if row is None or slot_of(row) != slot:
    valid = [n for n, r in rows.items() if slot_of(r) == slot]
    if row is not None and slot_of(row) is not None:
      an = lambda noun: ("an " if noun[0] in "aeiou" else "a ") + noun
      raise ValueError(f"{call.name!r} is {an(_NOUN[slot_of(row)])} (rl.{slot_of(row)}), not {an(what)} "
                       f"(rl.{slot}); valid names for rl.{slot}: {', '.join(valid)}")
    if row is not None:
      raise ValueError(f"{call.name!r} ({row.kind}) is not a stage of the RL step; valid names for "
                       f"rl.{slot}: {', '.join(valid)}")
    raise ValueError(f"unknown {what} {call.name!r}; valid names for rl.{slot}: {', '.join(valid)}")
  inner = "loss" if slot in ("loss", "critic") else slot

  def value(v):
    return resolve_call(v, inner, rows) if isinstance(v, Call) else v

  args = tuple(value(a) for a in call.args)
  kwargs = {k: value(v) for k, v in call.kwargs}
  _check_arguments(row, args, kwargs)
  try:
    built = row.stage(*args, **kwargs)
  except (TypeError, ValueError) as e:
    raise ValueError(f"{call}: {e}") from None
  object.__setattr__(built, "spec", str(call))  # how to write it again (RLConfig fields, config.json)
  return built


def resolve(spec, slot: str) -> tuple:
  """A spec string (or a list of ``Call``s) -> a tuple of stages for ``slot``."""
  if slot not in SLOTS:
    raise ValueError(f"unknown recipe slot {slot!r}; slots: {list(SLOTS)}")
  calls = parse(spec) if isinstance(spec, str) else list(spec)
  rows = _catalog()
  return tuple(resolve_call(c, slot, rows) for c in calls)


def python_marker(names) -> str:
  """What a run's ``config.json`` records in a recipe field that no spec can hold (a Python function, a custom
  objective builder, hparams set directly): ``"<python: my_reward, exact_match>"``, the slot's stages by name
  (catalog ones by their spec). It is not a spec, so it cannot be read as the config's own value of the field:
  ``RLConfig`` keeps it, and refuses to build a recipe from it (``Recipe.specs(mark_python=True)``)."""
  return f"<python: {', '.join(names)}>"


def is_python_marker(text) -> bool:
  """Whether ``text`` is a ``python_marker``."""
  return isinstance(text, str) and text.startswith("<python: ") and text.endswith(">")
