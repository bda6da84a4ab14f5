"""Orbax checkpoints of a whole run state, with fallback past corrupt checkpoints.

Multi-host: every process calls ``save`` / ``restore`` with the same global
(sharded) arrays; orbax writes each shard once, from the process that holds
it, and the JSON ``meta`` from the primary process only. ``processes``: when
the arrays live on some processes only (the multi-process asynchronous
runner's training side), only those processes call ``save`` / ``restore``:
orbax's barriers then run over them alone (``MultiprocessingOptions``, the
first of them the primary host, which writes the meta). Orbax refuses to
save a ``jax.Array`` whose shards are all on this process in a multi-process
job (it takes it for a ``pmap`` output): with ``processes``, such arrays (a
training side of one process) are saved and restored as host arrays, then
placed on the template's sharding (the same values).

A checkpoint holds one pytree (parameters, optimizer state, controller states,
PRNG key, step, ...) saved leaf by leaf under stable names, plus a JSON
``meta`` dict (stage, data-iterator state, config). ``restore`` takes a
*template* pytree of the same structure (e.g. a freshly initialised state) and
returns the saved values in that structure.

``restore`` tries the latest step first; if it cannot be read (a corrupt or
half-written directory) it falls back to the previous one and warns once
(``CheckpointWarning``), naming the unreadable steps and files. Saving such a
step again replaces it. A checkpoint whose arrays do not match the template's
shapes (another model) is a ``CheckpointMismatch`` at once, found from the
stored metadata before any array is read. A missing directory or one without
any readable checkpoint is a clear error.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import types
import warnings
from typing import Any, Optional

import jax
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

__all__ = ["Checkpointer", "CheckpointError", "CheckpointMismatch", "CheckpointWarning", "remove_partial_saves"]

# orbax writes checkpoint ``<step>`` into ``<step>.orbax-checkpoint-tmp`` (some versions add ``-<time>``) and
# renames it when complete
_PARTIAL = ".orbax-checkpoint-tmp"


class CheckpointError(ValueError):
  """No usable checkpoint (missing directory, none saved, all corrupt, wrong structure)."""


class CheckpointMismatch(CheckpointError):
  """A readable checkpoint whose arrays do not fit the template (another model or state layout)."""


_LAYOUT_HINT = ("(another model, or the same model with its layers stored the other way: ModelConfig.scan_layers "
                "stores them stacked; restore with the saving run's layout, then rljax.models.convert_layout)")


class CheckpointWarning(RuntimeWarning):
  """Some checkpoints were unreadable and an earlier one was restored."""


class _Unreadable(Exception):
  """A checkpoint item that cannot be read; the message names the file (when a JSON file is the culprit) or the
  item's directory."""

  def __init__(self, path: str, error: Exception):
    path = (_bad_json_file(path) or path) if isinstance(error, ValueError) else path
    super().__init__(f"{path} ({type(error).__name__}: {str(error)[:200]})")


def remove_partial_saves(directory: str) -> list[str]:
  """Removes the temporary directories of saves that never completed (a process stopped at once mid-save, e.g. a
  second Ctrl-C) from the checkpoint ``directory``; returns their names. Orbax never reads them, so they are only
  litter. Call it only when no save into ``directory`` is under way (``train`` calls it on resume, before any)."""
  if not os.path.isdir(directory):
    return []
  names = sorted(n for n in os.listdir(directory) if _PARTIAL in n)
  for name in names:
    path = os.path.join(directory, name)
    if os.path.isdir(path):
      shutil.rmtree(path, ignore_errors=True)
    else:
      os.remove(path)
  return names


def _bad_json_file(directory: str) -> Optional[str]:
  """The first of orbax's JSON files (``_METADATA``, ``_CHECKPOINT_METADATA``, ...) under ``directory`` that does
  not parse, if any."""
  for root, _, files in sorted(os.walk(directory)):
    for name in sorted(files):
      if not name.startswith("_") or name.endswith(".txt"):
        continue
      path = os.path.join(root, name)
      try:
        with open(path, encoding="utf-8") as f:
          json.load(f)
      except (ValueError, UnicodeDecodeError):
        return path
  return None


def _to_numpy_dict(tree) -> dict:
  """``{leaf_00000: array}``; ``jax.Array`` leaves stay (possibly sharded over several hosts) jax arrays, and
  ``jax.ShapeDtypeStruct`` leaves of a restore template (arrays not to read) stay as they are."""
  leaves = jax.tree_util.tree_leaves(tree)
  out = {}
  for i, x in enumerate(leaves):
    if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
      x = jax.random.key_data(x)
    out[f"leaf_{i:05d}"] = x if isinstance(x, (jax.Array, jax.ShapeDtypeStruct)) else np.asarray(x)
  return out


@contextlib.contextmanager
def _host_arrays_written_by(primary: int):
  """orbax 0.12.8's ``NumpyHandler`` writes host (numpy) arrays from process 0 only (``multihost.process_index() ==
  0``, hard-coded in ``orbax/checkpoint/_src/serialization/type_handlers.py``), which takes no part when the
  active processes are others (the training side): within this context that module sees ``primary`` as process 0
  (and process 0, if it were active, as another). Nothing else of orbax is changed."""
  from orbax.checkpoint._src.serialization import type_handlers as th  # pylint: disable=import-outside-toplevel
  real = th.multihost
  if primary == 0:
    yield
    return
  shim = types.SimpleNamespace(**{k: getattr(real, k) for k in dir(real) if not k.startswith("__")})
  shim.process_index = lambda: 0 if real.process_index() == primary else (real.process_index() or primary)
  th.multihost = shim
  try:
    yield
  finally:
    th.multihost = real


def _abstract(x):
  if isinstance(x, jax.Array):
    return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)
  return jax.ShapeDtypeStruct(x.shape, x.dtype)


def _fill(step: int, name: str, template, target: dict, arrays: dict):
  """The restored ``arrays`` (``{leaf_i: array}``) put back into ``template``'s structure, dtypes and shardings."""
  leaves, treedef = jax.tree_util.tree_flatten(template)
  wanted = {k for k, x in target.items() if not isinstance(x, jax.ShapeDtypeStruct)}
  if set(arrays) != wanted:
    raise CheckpointError(f"checkpoint {step} part {name!r} has {len(arrays)} arrays, expected {len(wanted)}")
  new_leaves = []
  for i, old in enumerate(leaves):
    if isinstance(old, jax.ShapeDtypeStruct):  # not read: stays abstract
      new_leaves.append(old)
      continue
    value = arrays[f"leaf_{i:05d}"]
    if not isinstance(value, jax.Array):
      value = np.asarray(value)
    ref = target[f"leaf_{i:05d}"]
    if value.shape != ref.shape or value.dtype != ref.dtype:
      raise CheckpointError(f"checkpoint {step} part {name!r} leaf {i} is {value.shape} {value.dtype}, "
                            f"expected {ref.shape} {ref.dtype}")
    if isinstance(old, jax.Array) and jax.dtypes.issubdtype(old.dtype, jax.dtypes.prng_key):
      new_leaves.append(jax.random.wrap_key_data(value, impl=jax.random.key_impl(old)))
    elif isinstance(old, jax.Array):
      # restored onto the template's sharding (every process reads its own shards)
      new_leaves.append(value if isinstance(value, jax.Array) and value.sharding == old.sharding
                        else jax.device_put(value, old.sharding))
    else:
      new_leaves.append(np.asarray(value))
  return jax.tree_util.tree_unflatten(treedef, new_leaves)


class Checkpointer:
  """Saves/restores ``(pytree, meta)`` at integer steps with ``orbax.checkpoint``.

  Args:
    directory: where step folders live (created on first save).
    max_to_keep: how many recent checkpoints to keep.
    processes: the processes that call this checkpointer's methods (default: every process). A strict subset
      (the training processes of ``rljax.train._multiproc_async``) takes part in orbax's barriers alone.
  """

  def __init__(self, directory: str, *, max_to_keep: int = 3, processes=None):
    self.directory = os.path.abspath(os.fspath(directory))
    self.processes = None if processes is None else tuple(sorted(int(p) for p in processes))
    if self.processes is not None and set(self.processes) == set(range(jax.process_count())):
      self.processes = None  # every process: orbax's default (one code path with the single-side loops)
    if self.processes is None:
      self._options = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True,
                                                   enable_async_checkpointing=False)
    else:
      if jax.process_index() not in self.processes:
        raise ValueError(f"Checkpointer({self.directory!r}, processes={list(self.processes)}) used on process "
                         f"{jax.process_index()}, which does not take part")
      # orbax refuses create=True with active_processes: the manager property creates the directory
      mp = ocp.options.MultiprocessingOptions(primary_host=self.processes[0], active_processes=set(self.processes),
                                              barrier_sync_key_prefix="rljax_p" + "_".join(map(str, self.processes)))
      self._options = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=False,
                                                   enable_async_checkpointing=False, multiprocessing_options=mp)
      # the item handlers take the options too (the manager does not pass them on): the primary host writes the
      # arrays' metadata, the barriers run over the active processes
      self._registry = ocp.handlers.DefaultCheckpointHandlerRegistry()
      standard, js = ocp.StandardCheckpointHandler(multiprocessing_options=mp), ocp.JsonCheckpointHandler(
          multiprocessing_options=mp)
      for args, handler in ((ocp.args.StandardSave, standard), (ocp.args.StandardRestore, standard),
                            (ocp.args.JsonSave, js), (ocp.args.JsonRestore, js)):
        self._registry.add(None, args, handler)
    self._manager = None
    self.unreadable: set[int] = set()  # steps ``restore`` could not read (``save`` replaces them)

  @property
  def manager(self) -> ocp.CheckpointManager:
    if self._manager is None:
      if self.processes is not None:
        os.makedirs(self.directory, exist_ok=True)  # every active process: a filesystem all of them see
      extra = {} if self.processes is None else {"handler_registry": self._registry}
      self._manager = ocp.CheckpointManager(self.directory, options=self._options, **extra)
    return self._manager

  def exists(self) -> bool:
    return os.path.isdir(self.directory) and bool(self.all_steps())

  def all_steps(self) -> list[int]:
    if not os.path.isdir(self.directory):
      return []
    return sorted(self.manager.all_steps())

  def latest_step(self) -> Optional[int]:
    steps = self.all_steps()
    return steps[-1] if steps else None

  def save(self, step: int, tree: Any, meta: Optional[dict] = None, *, parts: bool = False) -> None:
    """Writes checkpoint ``step`` (synchronously; overwrites nothing).

    ``parts=True`` (``tree`` a dict): each top-level entry is its own orbax item, so a reader can restore
    some entries without the others' structure (``load_run`` restores a run's ``"state"`` alone).
    """
    if step in self.all_steps():
      if step not in self.unreadable:
        return  # this step's state is already saved
      self.manager.delete(int(step))  # a corrupt checkpoint is replaced by the re-trained one
      self.unreadable.discard(step)
    if parts and "meta" in tree:
      raise ValueError("a checkpoint part cannot be named 'meta'")
    items = tree if parts else {"state": tree}
    items = {k: v for k, v in items.items() if jax.tree_util.tree_leaves(v) or not parts}  # no empty parts
    args = ocp.args.Composite(**{k: ocp.args.StandardSave(self._host_local(_to_numpy_dict(v)))
                                 for k, v in items.items()},
                              meta=ocp.args.JsonSave(dict(meta or {})))
    with self._host_writer():
      self.manager.save(int(step), args=args, force=True)
      self.manager.wait_until_finished()

  def _host_writer(self):
    """The context of orbax calls: host arrays written by this checkpointer's primary process."""
    if self.processes is None or jax.process_count() == 1:
      return contextlib.nullcontext()
    return _host_arrays_written_by(self.processes[0])

  def _host_local(self, arrays: dict) -> dict:
    """With ``processes`` in a multi-process job: this process's whole arrays as numpy (see the module docstring)."""
    if self.processes is None or jax.process_count() == 1:
      return arrays
    return {k: np.asarray(x) if isinstance(x, jax.Array) and x.is_fully_addressable else x for k, x in arrays.items()}

  def _abstract(self, x):
    """The restore target of ``x``: a host array where ``_host_local`` saved one (placed by ``_fill``)."""
    if (self.processes is not None and jax.process_count() > 1 and isinstance(x, jax.Array)
        and x.is_fully_addressable):
      return jax.ShapeDtypeStruct(x.shape, x.dtype)
    return _abstract(x)

  def _check_stored(self, step: int, name: str, target: dict) -> None:
    """Compares the stored arrays' shapes and dtypes (metadata only) with ``target``'s."""
    path = os.path.join(self.directory, str(step), name)
    try:
      stored = dict(ocp.StandardCheckpointHandler().metadata(epath.Path(path)).items())
    except Exception as e:  # pylint: disable=broad-except
      raise _Unreadable(path, e) from e
    if set(stored) != set(target):
      raise CheckpointMismatch(f"checkpoint step {step} in {self.directory!r}: part {name!r} has {len(stored)} "
                               f"arrays, this run's state has {len(target)} {_LAYOUT_HINT}")
    for key in sorted(target):
      have, want = stored[key], target[key]
      if tuple(have.shape) != tuple(want.shape) or np.dtype(have.dtype) != np.dtype(want.dtype):
        raise CheckpointMismatch(f"checkpoint step {step} in {self.directory!r}: part {name!r} array "
                                 f"{int(key[5:])} is {tuple(have.shape)} {np.dtype(have.dtype)}, this run's is "
                                 f"{tuple(want.shape)} {np.dtype(want.dtype)} {_LAYOUT_HINT}")

  def _restore_args(self, target: dict):
    """Orbax's restore arguments of one part: every array, or (``jax.ShapeDtypeStruct`` leaves in ``target``: the
    arrays a caller does not need, e.g. the optimizer state for sampling) only the others, never read from disk."""
    wanted = {n: self._abstract(x) for n, x in target.items() if not isinstance(x, jax.ShapeDtypeStruct)}
    if len(wanted) == len(target):
      return ocp.args.StandardRestore(wanted)
    return ocp.args.PyTreeRestore(item=wanted, restore_args=ocp.checkpoint_utils.construct_restore_args(wanted),
                                  partial_restore=True)

  def _restore_step(self, step: int, template, parts: bool = False):
    items = template if parts else {"state": template}
    targets = {k: _to_numpy_dict(v) for k, v in items.items()}
    stored = {k: t for k, t in targets.items() if t or not parts}  # empty parts are not stored
    for k, t in stored.items():
      self._check_stored(step, k, t)
    try:
      with self._host_writer():
        restored = self.manager.restore(step, args=ocp.args.Composite(
            **{k: self._restore_args(t) for k, t in stored.items()}, meta=ocp.args.JsonRestore()))
    except Exception as e:  # pylint: disable=broad-except
      raise _Unreadable(os.path.join(self.directory, str(step)), e) from e
    out = {k: _fill(step, k, items[k], targets[k], restored[k]) if k in stored else items[k] for k in items}
    return (out if parts else out["state"]), dict(restored["meta"] or {})

  def restore(self, template: Any, step: Optional[int] = None, *, parts: bool = False):
    """Returns ``(tree, meta, step)`` from ``step`` or the latest readable checkpoint.

    ``parts=True``: ``template`` is a dict of parts saved with ``parts=True``; only those parts are read.

    Raises ``CheckpointError`` when the directory is missing, empty, or every
    candidate is unreadable, and ``CheckpointMismatch`` when a checkpoint's arrays
    do not fit ``template``. With ``step=None`` unreadable latest checkpoints are
    skipped for the newest readable one, with one ``CheckpointWarning``.
    """
    if not os.path.isdir(self.directory):
      raise CheckpointError(f"checkpoint directory {self.directory!r} does not exist")
    steps = self.all_steps()
    if not steps:
      raise CheckpointError(f"checkpoint directory {self.directory!r} holds no checkpoints")
    if step is not None:
      if step not in steps:
        raise CheckpointError(f"checkpoint step {step} not in {self.directory!r} (have {steps})")
      candidates = [step]
    else:
      candidates = steps[::-1]
    errors = []
    for s in candidates:
      try:
        tree, meta = self._restore_step(s, template, parts)
      except _Unreadable as e:
        self.unreadable.add(s)
        errors.append(f"step {s} is unreadable: {e}")
        continue
      if errors:
        warnings.warn(f"checkpoint {'; '.join(errors)}; restored step {s} instead (a step saved again replaces "
                      "its unreadable checkpoint)", CheckpointWarning, stacklevel=2)
      return tree, meta, s
    raise CheckpointError(f"no readable checkpoint in {self.directory!r}: " + "; ".join(errors))

  def read_meta(self, step: Optional[int] = None) -> dict:
    """The JSON meta of checkpoint ``step`` (default: the latest), without reading any array."""
    steps = self.all_steps()
    step = (steps[-1] if steps else None) if step is None else step
    if step is None:
      raise CheckpointError(f"checkpoint directory {self.directory!r} holds no checkpoints")
    if step not in steps:
      raise CheckpointError(f"checkpoint step {step} not in {self.directory!r} (have {steps})")
    restored = self.manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
    return dict(restored["meta"] or {})

  def close(self):
    if self._manager is not None:
      self._manager.wait_until_finished()
      self._manager.close()
      self._manager = None
