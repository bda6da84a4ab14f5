"""Collectives of a compiled program, parsed from its HLO text (for tests and audits).

``collectives(compiled.as_text())`` lists every all-gather / all-reduce /
reduce-scatter / all-to-all / collective-permute with its result shape,
dtype, gathered/scattered dimensions and replica groups (both the explicit
``{{0,1},{2,3}}`` and the iota ``[2,2]<=[4]`` / ``[2,4]<=[4,2]T(1,0)`` forms,
expanded to device-id lists). ``mesh_axes_of_groups`` names the mesh axes a set
of replica groups runs over, so a test can state e.g. "every all-gather runs
over the ``fsdp`` axis only".
"""
from __future__ import annotations

import dataclasses
import re
from typing import Optional

import numpy as np

__all__ = ["Collective", "collectives", "mesh_axes_of_groups", "loop_computations"]

_KINDS = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute")
# "%name = f32[8,64]{1,0} all-gather(" or "(f32[..], f32[..]) all-reduce(" (tuple results)
_LINE = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<type>.+?)\s+"
                   r"(?P<op>all-gather|all-reduce|reduce-scatter|all-to-all|collective-permute)(?:-start)?\(")
_SHAPE = re.compile(r"(?P<dtype>[a-z]+\d*)\[(?P<dims>[\d,]*)\]")
_EXPLICIT = re.compile(r"replica_groups=\{(?P<g>(?:\{[\d,]*\},?)*)\}")
_IOTA = re.compile(r"replica_groups=\[(?P<shape>[\d,]+)\]<=\[(?P<dims>[\d,]+)\](?:T\((?P<perm>[\d,]+)\))?")
# XLA's mesh form: replica_groups=mesh['axis_0'=2,'axis_1'=4], device_ids=([2,4]T(1,0)) {'axis_0'}
_MESH = re.compile(r"replica_groups=mesh\[(?P<axes>[^\]]*)\]"
                   r"(?:,\s*device_ids=\((?P<ids>\[[\d,]+\](?:T\([\d,]+\))?|[\d,\s]+)\))?\s*\{(?P<sel>[^}]*)\}")
# a computation header: "%name (p: f32[2]) -> f32[2] {" or "ENTRY %main.1 (...) -> ... {"
_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?(?P<name>[\w.\-]+)\s*(?:\(.*\))?\s*->.*\{\s*$")
_CALLED = re.compile(r"(?:body|condition|to_apply|calls|branch_computations|called_computations)=%?([\w.\-]+)")
_CALLED_LIST = re.compile(r"(?:calls|branch_computations|called_computations)=\{([^}]*)\}")
_DIMS = re.compile(r"dimensions=\{(?P<d>[\d,]*)\}")


@dataclasses.dataclass(frozen=True)
class Collective:
  """One collective op of an HLO module."""
  op: str  # all-gather, all-reduce, reduce-scatter, all-to-all, collective-permute
  name: str
  dtype: str  # result element type (first of a tuple result)
  shapes: tuple  # result shapes (one per tuple element)
  groups: Optional[tuple]  # replica groups as tuples of device ids (None: not stated / permute)
  dimensions: Optional[tuple]  # gathered / scattered dimensions
  line: str
  computation: str = ""  # the HLO computation holding the op (see ``loop_computations``)


def _iota_groups(shape, dims, perm) -> tuple:
  ids = np.arange(int(np.prod(dims))).reshape(dims)
  if perm is not None:
    ids = ids.transpose(perm)
  return tuple(tuple(int(i) for i in row) for row in ids.reshape(shape))


def _mesh_groups(m) -> tuple:
  axes = [(a.split("=")[0].strip().strip("'\""), a.split("=")[1]) for a in m.group("axes").split(",") if a.strip()]
  if any(not size.strip().isdigit() for _, size in axes):
    raise ValueError(f"unsupported mesh replica groups {m.group(0)!r}")
  names = [n for n, _ in axes]
  dims = [int(size) for _, size in axes]
  n = int(np.prod(dims))
  ids_spec = m.group("ids")
  if ids_spec is None:
    ids = np.arange(n)
  elif ids_spec.startswith("["):
    i = re.match(r"\[(?P<dims>[\d,]+)\](?:T\((?P<perm>[\d,]+)\))?", ids_spec)
    ids = np.arange(n).reshape(_ints(i.group("dims")))
    if i.group("perm"):
      ids = ids.transpose(_ints(i.group("perm")))
    ids = ids.reshape(-1)
  else:
    ids = np.asarray(_ints(ids_spec.replace(" ", "")))
  ids = ids.reshape(dims)
  sel = [x.strip().strip("'\"") for x in m.group("sel").split(",") if x.strip()]
  if any(x not in names for x in sel):
    raise ValueError(f"unsupported mesh replica groups {m.group(0)!r}")
  keep = [names.index(x) for x in sel]
  rest = [k for k in range(len(names)) if k not in keep]
  grouped = ids.transpose(rest + keep).reshape(-1, int(np.prod([dims[k] for k in keep])) if keep else 1)
  return tuple(tuple(int(i) for i in row) for row in grouped)


def _ints(s: str) -> list:
  return [int(x) for x in s.split(",") if x]


def collectives(hlo_text: str, ops=_KINDS) -> list:
  """All collectives of ``hlo_text`` (``compiled.as_text()``) whose op is in ``ops``.

  ``-start`` async forms count once (their ``-done`` halves are skipped).
  """
  out = []
  comp = ""
  for line in hlo_text.splitlines():
    c = _COMPUTATION.match(line)
    if c:
      comp = c.group("name")
      continue
    m = _LINE.match(line)
    if not m or m.group("op") not in ops:
      continue
    shapes = [(s.group("dtype"), tuple(_ints(s.group("dims")))) for s in _SHAPE.finditer(m.group("type"))]
    groups = None
    e = _EXPLICIT.search(line)
    if e:
      groups = tuple(tuple(_ints(g)) for g in re.findall(r"\{([\d,]*)\}", e.group("g")))
      if groups == ((),) or not groups:
        groups = None
    i = _IOTA.search(line)
    if i:
      perm = _ints(i.group("perm")) if i.group("perm") else None
      groups = _iota_groups(_ints(i.group("shape")), _ints(i.group("dims")), perm)
    ms = _MESH.search(line)
    if ms:
      groups = _mesh_groups(ms)
    elif "replica_groups=" in line and not (e or i):
      raise ValueError(f"cannot parse the replica groups of: {line.strip()[:300]}")
    d = _DIMS.search(line)
    out.append(Collective(op=m.group("op"), name=m.group("name"), dtype=shapes[0][0] if shapes else "",
                          shapes=tuple(s for _, s in shapes), groups=groups,
                          dimensions=tuple(_ints(d.group("d"))) if d else None, line=line.strip(),
                          computation=comp))
  return out


def loop_computations(hlo_text: str) -> frozenset:
  """Names of the computations that run inside a ``while`` loop: every loop body and condition and
  whatever they call (fusions, reductions, nested loops), transitively. A collective whose
  ``computation`` is in this set runs once per iteration (e.g. per scanned layer)."""
  calls: dict = {}
  roots = set()
  comp = ""
  for line in hlo_text.splitlines():
    c = _COMPUTATION.match(line)
    if c:
      comp = c.group("name")
      calls.setdefault(comp, set())
      continue
    refs = set(_CALLED.findall(line))
    for group in _CALLED_LIST.findall(line):
      refs |= {x.strip().lstrip("%") for x in group.split(",") if x.strip()}
    calls.setdefault(comp, set()).update(refs)
    if re.search(r"\swhile\(", line):
      roots |= set(re.findall(r"(?:body|condition)=%?([\w.\-]+)", line))
  seen, todo = set(), list(roots)
  while todo:
    name = todo.pop()
    if name not in seen:
      seen.add(name)
      todo.extend(calls.get(name, ()))
  return frozenset(seen)


def mesh_axes_of_groups(groups, mesh) -> Optional[frozenset]:
  """The set of mesh axis names that ``groups`` (device-id tuples) span, or None if no axis set fits.

  Device ids are positions in ``mesh.devices.flat`` (the program's device
  assignment under ``jax.jit`` with ``NamedSharding``s of ``mesh``). A set of axes ``A`` fits
  when every group is exactly the devices that share all mesh coordinates
  outside ``A`` (i.e. the collective runs over the sub-mesh of axes ``A``).
  With ``groups`` None (all devices) the answer is every axis of size > 1.
  """
  names = tuple(mesh.axis_names)
  ids = np.arange(mesh.devices.size).reshape(mesh.devices.shape)
  if groups is None:
    return frozenset(a for a in names if mesh.shape[a] > 1)
  coord = {int(ids[idx]): idx for idx in np.ndindex(ids.shape)}
  want = sorted(tuple(sorted(g)) for g in groups)
  # try every subset of axes of size > 1
  big = [i for i, a in enumerate(names) if mesh.shape[a] > 1]
  for mask in range(1 << len(big)):
    axes = [big[j] for j in range(len(big)) if mask >> j & 1]
    buckets: dict = {}
    for dev, c in coord.items():
      key = tuple(c[k] for k in range(len(names)) if k not in axes)
      buckets.setdefault(key, []).append(dev)
    if sorted(tuple(sorted(v)) for v in buckets.values()) == want:
      return frozenset(names[k] for k in axes)
  return None
