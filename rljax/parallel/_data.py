"""Process-local data for multi-host runs: which rows a process feeds, global arrays, host copies.

In a multi-controller JAX program every process runs the same code on a
*global* batch that no process holds in full. For a batch of ``N`` rows
sharded over the batch mesh axes (``('data', 'fsdp')`` by the rules),
process ``p`` owns the contiguous rows ``[lo_p, hi_p)`` of its addressable
devices (``process_rows``); it loads and prepares only those
(``process_batches``: a grain pipeline reading only this process's records
of each global batch), and the global ``jax.Array`` is assembled with
``jax.make_array_from_process_local_data`` (``global_batch``). The global
batch (which records, in which order) does not depend on the number of
processes, so a run on 1 or many hosts trains on the same data.

With one process all of this reduces to ``rows = [0, N)``, ``jax.device_put``
and ``jax.device_get``, without collectives.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding

from rljax.parallel._rules import DEFAULT_RULES, Rules, logical_to_spec

__all__ = ["row_sharding", "process_rows", "all_process_rows", "global_batch", "place_global", "to_host",
           "host_rows", "allgather_rows", "process_sum", "process_any", "group_allgather", "process_batches"]


def row_sharding(mesh: Mesh, num_rows: int, rules: Rules = DEFAULT_RULES) -> NamedSharding:
  """Sharding of a ``[num_rows, ...]`` batch: rows over the ``batch`` rule's mesh axes (the rest replicated).

  Raises ``ValueError`` when ``num_rows`` is not divisible by the batch mesh
  axes (``data * fsdp``), naming both: a silently replicated batch would
  make every device compute every row.
  """
  want = logical_to_spec(("batch",), mesh, None, rules)
  spec = logical_to_spec(("batch",), mesh, (num_rows,), rules)
  if spec != want:
    axes = want[0] if isinstance(want[0], tuple) else (want[0],)
    raise ValueError(f"batch of {num_rows} rows is not divisible by the batch mesh axes "
                     f"{dict((a, mesh.shape[a]) for a in axes)} (product "
                     f"{int(np.prod([mesh.shape[a] for a in axes]))})")
  return NamedSharding(mesh, spec)


def all_process_rows(sharding: NamedSharding, num_rows: int) -> dict:
  """``{process_index: (lo, hi)}``: the contiguous rows each process's devices hold (dimension 0)."""
  blocks: dict = {}
  for device, index in sharding.devices_indices_map((num_rows,)).items():
    lo, hi, _ = index[0].indices(num_rows)
    blocks.setdefault(device.process_index, set()).add((lo, hi))
  out = {}
  for p, spans in blocks.items():
    spans = sorted(spans)
    lo, hi = spans[0]
    for a, b in spans[1:]:
      if a > hi:
        raise ValueError(f"process {p} holds non-contiguous rows {spans} of a {num_rows}-row batch; "
                         "order the mesh so that each process's devices are adjacent on the batch axes")
      hi = max(hi, b)
    out[p] = (lo, hi)
  return out


def process_rows(sharding: NamedSharding, num_rows: int) -> tuple:
  """``(lo, hi)``: the rows of a ``num_rows`` batch this process feeds."""
  return all_process_rows(sharding, num_rows)[jax.process_index()]


def global_batch(local, sharding: NamedSharding, num_rows: int):
  """Global ``jax.Array`` leaves from this process's rows ``local`` (a pytree of ``[hi - lo, ...]`` arrays).

  ``jax.make_array_from_process_local_data``; with one process, ``jax.device_put``.
  """
  if jax.process_count() == 1:
    return jax.device_put(local, sharding)

  def one(x):
    x = np.asarray(x)
    return jax.make_array_from_process_local_data(sharding, x, (num_rows,) + x.shape[1:])
  return jax.tree.map(one, local)


def place_global(tree, shardings):
  """``jax.device_put`` of a host/local value that is *the same on every process* onto global shardings.

  Leaves that already are global arrays (spanning processes) are resharded.

  ``shardings`` may be a prefix tree (one ``NamedSharding`` per ``nnx.Variable``).
  Multi-process: each process places the shards of its addressable devices
  (``jax.make_array_from_callback``).
  """
  if jax.process_count() == 1:
    return jax.device_put(tree, shardings)

  def one(x, sharding):
    if isinstance(x, jax.Array) and not x.is_fully_addressable:  # already global: reshard (collective)
      return x if x.sharding == sharding else jax.device_put(x, sharding)
    host = np.asarray(jax.device_get(x))  # dtype: a process without devices in `sharding` makes no shard
    return jax.make_array_from_callback(host.shape, sharding, lambda idx: host[idx], dtype=host.dtype)

  return jax.tree.map(lambda sh, sub: jax.tree.map(lambda x: one(x, sh), sub), shardings, tree,
                      is_leaf=lambda x: isinstance(x, NamedSharding))


def _fully_addressable(x) -> bool:
  return not isinstance(x, jax.Array) or x.is_fully_addressable


def to_host(tree):
  """NumPy copies of every leaf on every process (``process_allgather`` of arrays no process holds whole)."""
  if all(_fully_addressable(x) for x in jax.tree.leaves(tree)):
    return jax.device_get(tree)
  from jax.experimental import multihost_utils  # pylint: disable=import-outside-toplevel
  return jax.tree.map(lambda x: np.asarray(x) if _fully_addressable(x) else
                      np.asarray(multihost_utils.process_allgather(x, tiled=True)), tree)


def _local_rows(x, lo: int, hi: int) -> np.ndarray:
  if _fully_addressable(x):
    return np.asarray(jax.device_get(x))[lo:hi]
  out = np.empty((hi - lo,) + x.shape[1:], x.dtype)
  covered = np.zeros(hi - lo, bool)
  for shard in x.addressable_shards:
    idx = shard.index
    if any(s.indices(d)[:2] != (0, d) for s, d in zip(idx[1:], x.shape[1:])):
      continue  # split on a later dimension: not a whole-row shard
    a, b, _ = idx[0].indices(x.shape[0])
    a2, b2 = max(a, lo), min(b, hi)
    if a2 < b2:
      out[a2 - lo:b2 - lo] = np.asarray(shard.data)[a2 - a:b2 - a]
      covered[a2 - lo:b2 - lo] = True
  if covered.all():
    return out
  from jax.experimental import multihost_utils  # pylint: disable=import-outside-toplevel
  return np.asarray(multihost_utils.process_allgather(x, tiled=True))[lo:hi]


def host_rows(tree, lo: int, hi: int):
  """NumPy rows ``[lo, hi)`` (dimension 0) of every leaf, from this process's shards where it holds them."""
  return jax.tree.map(lambda x: None if x is None else _local_rows(x, lo, hi), tree)


GROUP_TIMEOUT_S = 600.0  # how long a group collective waits for the group's other processes


def _group(processes: Optional[Sequence[int]]):
  """How a host collective over ``processes`` runs here: ``"local"`` (this process alone, or one process in
  all), ``"all"`` (every process: ``multihost_utils.process_allgather``) or the sorted tuple of a proper
  subset (the coordination service's key-value store, :func:`group_allgather`). Raises ``ValueError`` when this
  process is not in ``processes``."""
  if processes is None:
    return "local" if jax.process_count() == 1 else "all"
  group = tuple(sorted(set(int(p) for p in processes)))
  if not group or group[0] < 0 or group[-1] >= jax.process_count():
    raise ValueError(f"a host collective over processes {list(group)} of {jax.process_count()}: each must be one of "
                     f"0 .. {jax.process_count() - 1}")
  if jax.process_index() not in group:
    raise ValueError(f"process {jax.process_index()} takes part in a host collective over processes {list(group)}, "
                     "which do not include it")
  if len(group) == 1:
    return "local"
  return "all" if group == tuple(range(jax.process_count())) else group


_GROUP_CALLS: dict = {}  # group -> how many group collectives this process has made over it


def group_allgather(value, processes: Sequence[int], timeout_s: float = GROUP_TIMEOUT_S) -> list:
  """``[value of process p for p in sorted(processes)]`` on each process of ``processes``: a host all-gather of a
  JSON-serialisable ``value`` over a process group, through the key-value store of JAX's coordination service
  (``jax.distributed``'s client), no device.

  Every process of the group must make the same sequence of group collectives over it (the n-th call of each
  process meets the n-th of the others: a per-group counter names the keys); processes outside the group do not
  take part. Each process writes its key ``rljax/group/<group>/<n>/<p>``, reads the others' (waiting at most
  ``timeout_s``: a missing process fails with the coordination service's DEADLINE_EXCEEDED naming the key), then
  deletes its key of call ``n - 1`` (every member has read it: each wrote its key of call ``n`` after finishing
  call ``n - 1``). Exact: values travel as JSON text (floats by ``repr``, which round-trips).

  Why the key-value store and not a jitted reduction over the group's devices: it runs no device program, so it
  cannot meet a cross-host ``jax.device_put`` being served on the same devices (the multi-process asynchronous
  runner's hazard, ``rljax.train._multiproc_async``); it needs no compilation per shape (ragged prompt rows,
  varying key sets); and it is exact for every type (no XLA reduction order, no padding of ragged rows). The
  price is a round trip to the coordinator per call, which the RL loop makes a few times per step on small
  values.
  """
  import json  # pylint: disable=import-outside-toplevel
  from jax._src import distributed  # pylint: disable=import-outside-toplevel
  group = tuple(sorted(set(int(p) for p in processes)))
  me = jax.process_index()
  if me not in group:
    raise ValueError(f"process {me} is not in the group {list(group)}")
  client = distributed.global_state.client
  if client is None:
    raise ValueError("a host collective over a process group needs jax.distributed.initialize")
  n = _GROUP_CALLS.get(group, 0)
  _GROUP_CALLS[group] = n + 1
  prefix = "rljax/group/" + ",".join(map(str, group))
  client.key_value_set(f"{prefix}/{n}/{me}", json.dumps(value))
  out = [value if p == me else json.loads(client.blocking_key_value_get(f"{prefix}/{n}/{p}", int(timeout_s * 1000)))
         for p in group]
  if n > 0:
    client.key_value_delete(f"{prefix}/{n - 1}/{me}")
  return out


def allgather_rows(local_rows: Sequence, rows: dict, num_rows: int, processes: Optional[Sequence[int]] = None) -> list:
  """The global list of ``num_rows`` ragged integer rows from each process's ``local_rows``.

  Args:
    local_rows: this process's rows ``[lo, hi)`` (sequences of ints, e.g. prompt token ids).
    rows: ``all_process_rows(...)`` of the batch.
    num_rows: global row count.
    processes: the processes taking part (a sub-mesh's; None: every process). A proper subset gathers through
      :func:`group_allgather` (the other processes do not take part).
  """
  group = _group(processes)
  if group == "local":
    return list(local_rows)
  if group != "all":
    got = dict(zip(group, group_allgather([[int(t) for t in r] for r in local_rows], group)))
    out: list = [None] * num_rows
    for p, (lo, hi) in rows.items():
      for r in range(lo, hi):
        if out[r] is None and p in got:
          out[r] = got[p][r - lo]
    if any(o is None for o in out):
      raise ValueError(f"rows {[i for i, o in enumerate(out) if o is None][:8]} are held by no process of "
                       f"{list(group)}")
    return out
  from jax.experimental import multihost_utils  # pylint: disable=import-outside-toplevel
  lengths = np.asarray([len(r) for r in local_rows], np.int32)
  width = int(np.max(multihost_utils.process_allgather(np.asarray(lengths.max(initial=0), np.int32))))
  counts = np.asarray(multihost_utils.process_allgather(np.asarray(len(local_rows), np.int32))).reshape(-1)
  most = int(counts.max())
  pad = np.zeros((most, max(width, 1)), np.int64)
  lens = np.zeros((most,), np.int32)
  for i, r in enumerate(local_rows):
    pad[i, :len(r)] = np.asarray(r, np.int64)
    lens[i] = len(r)
  all_pad = np.asarray(multihost_utils.process_allgather(pad))  # [P, most, width]
  all_len = np.asarray(multihost_utils.process_allgather(lens))  # [P, most]
  out = [None] * num_rows
  for p, (lo, hi) in rows.items():
    for r in range(lo, hi):
      if out[r] is None:
        out[r] = [int(t) for t in all_pad[p, r - lo, :all_len[p, r - lo]]]
  if any(o is None for o in out):
    raise ValueError(f"rows {[i for i, o in enumerate(out) if o is None][:8]} are held by no process")
  return out


def process_sum(values: dict, processes: Optional[Sequence[int]] = None) -> dict:
  """Sums of float ``values`` over the processes (identity with one process; ``processes``: the processes
  taking part, None = every process, see :func:`process_any`). Every process gets the same sums: float64, added
  in process order."""
  group = _group(processes)
  if group == "local":
    return dict(values)
  keys = sorted(values)
  v = np.asarray([float(values[k]) for k in keys], np.float64)
  if group == "all":
    from jax.experimental import multihost_utils  # pylint: disable=import-outside-toplevel
    total = np.asarray(multihost_utils.process_allgather(v)).reshape(jax.process_count(), -1).sum(0)
  else:
    got = group_allgather({"keys": keys, "values": [float(x) for x in v]}, group)
    if any(g["keys"] != keys for g in got):
      raise ValueError(f"process_sum over processes {list(group)}: the processes' keys differ "
                       f"({[g['keys'] for g in got]})")
    total = np.asarray([g["values"] for g in got], np.float64).reshape(len(group), -1).sum(0)
  return {k: float(t) for k, t in zip(keys, total)}


def process_any(flag: bool, processes: Optional[Sequence[int]] = None) -> bool:
  """True when ``flag`` is true on any process (every process gets the same answer).

  ``processes``: the processes taking part (None: every process). The multi-process asynchronous runner's
  sides pass their sub-mesh's processes, so that the other side's processes need not enter: this process
  alone, every process (``multihost_utils.process_allgather``, a device collective), or a proper subset
  (:func:`group_allgather`, the coordination service's key-value store)."""
  group = _group(processes)
  if group == "local":
    return bool(flag)
  if group != "all":
    return any(group_allgather(bool(flag), group))
  from jax.experimental import multihost_utils  # pylint: disable=import-outside-toplevel
  return bool(np.any(multihost_utils.process_allgather(np.asarray(bool(flag)))))


def process_batches(source: Sequence, *, global_batch_size: int, rows: tuple, seed: int, shuffle: bool = True,
                    num_epochs: Optional[int] = None, transform: Optional[Callable[[Any], Any]] = None):
  """A grain iterator of this process's rows ``[lo, hi)`` of each global batch of ``source``.

  Global batch ``k`` is records ``k * N .. (k + 1) * N - 1`` of the (per-epoch
  shuffled, repeated) record stream, ``N = global_batch_size``; this process
  reads only records ``k * N + lo .. k * N + hi - 1``. With ``rows = (0, N)``
  the batches equal ``rljax.data.prompt_loader(source, batch_size=N,
  seed=seed)``'s, and so does the iterator state (``get_state`` /
  ``set_state``: the global batch counter, the same on every process).
  Unlike ``prompt_loader``'s ``shard_index/shard_count`` (records ``i % count
  == index``), the global batches do not depend on the process count.

  Args:
    source: random-access records.
    global_batch_size: ``N``.
    rows: ``(lo, hi)`` with ``0 <= lo < hi <= N``.
    seed: shuffling seed (the same on every process).
    shuffle, num_epochs: as ``prompt_loader``.
    transform: applied to each record (default ``rljax.data.to_problem``).
  """
  import grain  # pylint: disable=import-outside-toplevel
  from rljax.data import to_problem  # pylint: disable=import-outside-toplevel
  lo, hi = (int(r) for r in rows)
  if global_batch_size < 1:
    raise ValueError(f"global_batch_size must be >= 1, got {global_batch_size}")
  if not 0 <= lo < hi <= global_batch_size:
    raise ValueError(f"rows must satisfy 0 <= lo < hi <= global_batch_size={global_batch_size}, got {rows}")
  if len(source) < global_batch_size:
    raise ValueError(f"global_batch_size {global_batch_size} exceeds the {len(source)} records of source")
  fn = to_problem if transform is None else transform
  ds = grain.MapDataset.source(source)
  if shuffle:
    ds = ds.shuffle(seed=seed)
  ds = ds.repeat(num_epochs)
  n = global_batch_size
  batches = grain.MapDataset.range(len(ds) // n).map(lambda k: [fn(ds[k * n + j]) for j in range(lo, hi)])
  return iter(batches)
