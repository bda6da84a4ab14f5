"""The record every catalogued technique is described by, and the recipe slot a row goes in (``slot_of``)."""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
from typing import Callable, Optional

KINDS = (
    "policy_loss", "correction", "kl", "entropy", "aggregation", "supervised",
    "controller", "advantage", "filter", "reward", "shaping", "multi_reward", "value",
    "replay", "kernel", "sampler", "model",
)

# the kinds that are not a stage of the RL step: their rows have no ``stage``; every other kind's row must
NO_STAGE_KINDS = ("kernel", "sampler", "model")

# a row's recipe slot (``rljax.recipes.SLOTS``) when its stage factory does not say otherwise (``factory.slot``)
_KIND_SLOT = {
    "reward": "rewards", "multi_reward": "multi_reward", "shaping": "shaping", "filter": "filters", "replay": "replay",
    "advantage": "advantage", "policy_loss": "loss", "correction": "loss", "entropy": "loss", "kl": "loss",
    "supervised": "loss", "aggregation": "aggregation", "controller": "controllers", "value": "critic",
}


def _default_text(value) -> str:
  text = repr(value)
  if len(text) > 60 and not isinstance(value, str):  # e.g. a whole SandboxConfig: its type says enough
    return f"{type(value).__name__}(...)"
  return text


def argument_texts(fn: Callable) -> tuple:
  """``("quantile=0.5", "eps=1e-06", "k")``: ``fn``'s named arguments, each with its default (a required one bare);
  ``*args`` / ``**kwargs`` are left out."""
  try:
    params = inspect.signature(fn).parameters.values()
  except (TypeError, ValueError):
    return ()
  return tuple(p.name if p.default is p.empty else f"{p.name}={_default_text(p.default)}"
               for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))


FIDELITY_BASES = ("authors_code", "peer", "paper_formula", "abstract")


@dataclasses.dataclass(frozen=True)
class Fidelity:
  """What a technique's implementation and tests were checked against.

  Attributes:
    basis: one of ``FIDELITY_BASES``, strongest first:
      ``"authors_code"``: the paper authors' released code (``reference`` names repository and file);
      ``"peer"``: a peer implementation (verl, TRL, AReaL, OpenRLHF; ``reference`` names it);
      ``"paper_formula"``: an equation in the paper's body (``reference`` gives the equation number);
      ``"abstract"``: only the abstract is available, so the formula is our interpretation
      (``differences`` says what was interpreted).
    reference: where the checked-against form lives, e.g. ``"github.com/owner/repo: path/file.py"``,
      ``"verl core_algos.compute_grpo_outcome_advantage"`` or ``"arXiv 2503.14476 Eq. 8"``.
    differences: how rljax's default departs from that reference and why, and which parameter
      selects the reference's form; ``""`` when the default matches it.

    The four questions (issue #51; optional while rows move to this form, ``in_full`` says whether a row has them):
    read: the exact source that was read: ``"owner/repo@commit:path:line"`` (or ``@tag``) for code, or
      ``"arXiv ID Eq. N / Algorithm N (page read: URL)"`` for a paper.
    defaults: every hyper-parameter the source sets, side by side: ``(("quantile", "0.5", "0.4"), ...)``,
      each ``(name, ours, theirs)``.
    placement: where in the step and on which data the source computes it, and where rljax does
      (``"theirs: ...; ours: ..."``).
    deviations: each difference between rljax and the source, with why (and the argument that selects theirs);
      ``()`` when there is none.
  """
  basis: str
  reference: str
  differences: str = ""
  read: str = ""
  defaults: tuple = ()
  placement: str = ""
  deviations: tuple = ()

  def __post_init__(self):
    if self.basis not in FIDELITY_BASES:
      raise ValueError(f"Fidelity.basis must be one of {FIDELITY_BASES}, got {self.basis!r}")
    if not self.reference.strip():
      raise ValueError("Fidelity.reference must name the code, peer or equation checked against")
    if self.basis == "abstract" and not self.differences.strip():
      raise ValueError("Fidelity.differences must say what was interpreted when basis='abstract'")
    if not isinstance(self.defaults, tuple) or not all(
        isinstance(d, tuple) and len(d) == 3 and all(isinstance(x, str) for x in d) for d in self.defaults):
      raise ValueError("Fidelity.defaults must be a tuple of (name, ours, theirs) string triples, got "
                       f"{self.defaults!r}")
    if not isinstance(self.deviations, tuple) or not all(isinstance(d, str) and d.strip() for d in self.deviations):
      raise ValueError(f"Fidelity.deviations must be a tuple of non-empty strings, got {self.deviations!r}")
    if self.read or self.placement or self.defaults or self.deviations:
      missing = [f for f in ("read", "placement") if not getattr(self, f).strip()]
      if missing:
        raise ValueError(f"Fidelity.{missing[0]} must be filled once a record is in the four-question form "
                         "(read, defaults, placement, deviations)")

  @property
  def in_full(self) -> bool:
    """Whether the record answers the four questions (``read`` and ``placement`` given; ``defaults`` and
    ``deviations`` may be empty when the source sets no hyper-parameter / nothing differs)."""
    return bool(self.read.strip() and self.placement.strip())


@dataclasses.dataclass(frozen=True)
class Technique:
  """One row of ``rljax.catalog()``.

  Attributes:
    name: stable snake_case name (what issues, configs and docs call it).
    kind: one of ``KINDS``.
    fn: the public callable (usually a factory closing over hyper-parameters).
    formula: one-line formula.
    source: seed file + line and/or arXiv id.
    stage: ``stage(**hyper_parameters) -> rljax.stages.Stage``: how the RL loop runs the
      technique, declared in the row itself, beside ``fn``; required (a row without one raises)
      for every kind but ``NO_STAGE_KINDS`` (kernels, samplers, models: not a stage of the RL
      step, ``None``). Its keyword arguments are the technique's hyper-parameters; what the loop
      supplies (rewards, group ids, masks, ...) is not among them. A recipe names the row
      (``rljax.recipes.stage("qae", quantile=0.7)`` or ``--set rl.advantage='qae(quantile=0.7)'``)
      and this factory builds the stage: adding a row with a ``stage`` makes the technique
      usable from Python and the command line with no change to the trainer.
    fidelity: what the implementation was checked against (``Fidelity``).
  """
  name: str
  kind: str
  fn: Callable
  formula: str
  source: str
  stage: Optional[Callable] = None
  fidelity: Optional[Fidelity] = None

  @property
  def arguments(self) -> tuple:
    """The technique's hyper-parameters with their defaults, ``("quantile=0.5", ...)``: its ``stage`` factory's
    arguments (``fn``'s for a row without a stage); a required one is bare (``"k"``)."""
    return argument_texts(self.stage if self.stage is not None else self.fn)

  def __post_init__(self):
    if not self.name or not self.name.replace("_", "a").isalnum() or self.name.lower() != self.name:
      raise ValueError(f"Technique.name must be snake_case, got {self.name!r}")
    if self.kind not in KINDS:
      raise ValueError(f"Technique.kind must be one of {KINDS}, got {self.kind!r}")
    if not callable(self.fn):
      raise ValueError(f"Technique.fn of {self.name!r} must be callable")
    if self.stage is not None and not callable(self.stage):
      raise ValueError(f"Technique.stage of {self.name!r} must be callable or None")
    if self.stage is None and self.kind not in NO_STAGE_KINDS:
      raise ValueError(f"technique row {self.name!r} ({self.kind}) has no stage: every row but a "
                       f"{'/'.join(NO_STAGE_KINDS)} declares the stage factory that runs it (stage=...)")
    if self.fidelity is not None and not isinstance(self.fidelity, Fidelity):
      raise ValueError(f"Technique.fidelity of {self.name!r} must be a Fidelity or None")


def split_at(rows: tuple, name: str) -> tuple:
  """``(the rows before the one called name, the rest)``: for a room whose catalog order interleaves the rows its
  modules declare."""
  i = [row.name for row in rows].index(name)
  return rows[:i], rows[i:]


def gather_room(namespace: dict, ordered: tuple, extra: tuple = ()) -> tuple:
  """``(TECHNIQUES, __all__)`` of a catalog room, found from its modules: a new technique needs no edit here.

  ``namespace`` is the room's ``globals()`` (its ``__name__`` and ``__path__``); ``ordered`` the rows the room puts
  in a catalog order of its own (interleaving its modules' rows, ``split_at``). Every module of the room that
  declares ``TECHNIQUES`` is imported (file-name order): its rows not in ``ordered`` follow them, and each name of
  its ``__all__`` joins the room's namespace (unless the room binds it already) and the room's ``__all__``, after
  ``extra`` (the room's public names from modules without rows) and ``"TECHNIQUES"``. So a technique is its module
  (its function, its ``__all__`` entry, its row in ``TECHNIQUES``) and its test; ``python -m rljax.catalog
  --regenerate`` then rewrites every derived file (docs/recipes.md lists them).
  """
  package = namespace["__name__"]
  known = {id(row) for row in ordered}
  rows, names = list(ordered), [*extra, "TECHNIQUES"]
  for info in sorted(pkgutil.iter_modules(namespace["__path__"]), key=lambda m: m.name):
    module = importlib.import_module(f"{package}.{info.name}")
    if not hasattr(module, "TECHNIQUES"):
      continue
    rows += [row for row in module.TECHNIQUES if id(row) not in known]
    known.update(id(row) for row in module.TECHNIQUES)
    for name in getattr(module, "__all__", ()):
      namespace.setdefault(name, getattr(module, name))
      if name not in names:
        names.append(name)
  unbound = [name for name in names[:len(extra)] if name not in namespace]
  if unbound:
    raise ImportError(f"{package}: extra names {unbound} are not bound in the room")
  return tuple(rows), names


def slot_of(row: Technique) -> Optional[str]:
  """The recipe slot a catalog row goes in (its stage factory's ``slot``, else by kind); None if no stage."""
  if row.stage is None:
    return None
  return getattr(row.stage, "slot", None) or _KIND_SLOT.get(row.kind)
