"""Vocab-parallel fused log-prob / entropy over mesh axes.

The weight ``[H, V]`` is split by columns across ``axis_name`` (one mesh axis or
several, major first); every shard runs the single-device kernel on its
``V / k`` columns and the shards combine per-token statistics only: one
``pmax`` of the running max ``m`` and one ``psum`` of the rescaled
``(s, w, z_y)`` stacked together (sum-exp, entropy accumulator, and the target
logit, which lives on exactly one shard) -- 4 floats per token in 2
collectives, never logits. The backward recomputes each shard's tiles from the
global ``lse`` and ``E_p[z]``; ``dW`` stays sharded, ``dX`` partials are
``psum``-ed over ``axis_name`` (the usual column-parallel backward). Tokens may
additionally be split over ``token_axes`` (e.g. data parallelism), in which
case ``dW`` is also ``psum``-ed over those axes.

A token axis that also splits the vocabulary (``shared``; e.g. ``fsdp`` in
``token_axes=('data', 'fsdp')``, ``axis_name=('tensor', 'fsdp')``) is handled
sequence-parallel style (Megatron's all-gather before the column-parallel
head, reduce-scatter after it): each device's rows are cut into chunks of
``chunk_rows``; per chunk the rows of every device of the shared axes are
all-gathered, every device scores them against its columns, and the combined
statistics (forward) or ``dX`` partials (backward) are reduce-scattered back
to the rows' owners. Only one chunk's gathered rows, ``[|shared| * chunk_rows,
H]``, and its float32 ``dX`` exist at a time; ``dW`` needs no reduction over
the shared axes (each device saw every row of its group).
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Optional, Sequence, Union

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import Mesh, PartitionSpec as P

from rljax.kernels import _api, _config
from rljax.kernels._config import BlockSizes

# default gathered rows per chunk when token rows are gathered over shared axes
_GATHER_ROWS = 8192


@dataclasses.dataclass(frozen=True)
class _ShardStatic:
  cfg: _api._Static
  mesh: Mesh
  vocab_axes: tuple  # the weight's columns are split over these (major first)
  token_axes: tuple  # rows are split over these (() = replicated)
  shared: tuple  # token axes that also split the vocabulary: rows gathered over them per chunk
  v_local: int
  chunk: int  # local rows per chunk (a block multiple; the padded local rows are a multiple of it)


def _specs(s: _ShardStatic):
  tok = P(s.token_axes) if s.token_axes else P()
  return tok, P(None, s.vocab_axes)


def _place(s: _ShardStatic, args, specs):
  """With Explicit mesh axes shard_map demands matching input shardings, so
  reshard there; Auto axes let shard_map insert the resharding itself."""
  explicit = any(t == jax.sharding.AxisType.Explicit for t in getattr(s.mesh, "axis_types", ()))
  if not explicit:
    return args
  return tuple(jax.reshard(a, jax.sharding.NamedSharding(s.mesh, sp)) for a, sp in zip(args, specs))


def _local_targets(s: _ShardStatic, t, valid):
  lo = lax.axis_index(s.vocab_axes) * s.v_local
  own = valid & (t >= lo) & (t < lo + s.v_local)
  return jnp.where(own, t - lo, -1)


def _gather(s: _ShardStatic, a):
  """``[c, ...]`` -> ``[|shared| c, ...]``: the chunk's rows of every device of the shared axes."""
  return lax.all_gather(a, s.shared, axis=0, tiled=True) if s.shared else a


def _sum_to_owner(s: _ShardStatic, a, axis: int):
  """Sum over the vocabulary shards; with shared axes each row's sum lands on the row's owner only."""
  rest = tuple(x for x in s.vocab_axes if x not in s.shared)
  if s.shared:
    a = lax.psum_scatter(a, s.shared, scatter_dimension=axis, tiled=True)
  return lax.psum(a, rest) if rest else a


def _own_rows(s: _ShardStatic, a):
  """This device's ``[c]`` slice of gathered ``[|shared| c]`` per-row values."""
  if not s.shared:
    return a
  return lax.dynamic_slice_in_dim(a, lax.axis_index(s.shared) * s.chunk, s.chunk)


def _chunked(s: _ShardStatic, rows):
  """``[n, ...]`` local rows -> ``[n / chunk, chunk, ...]``."""
  return tuple(a.reshape((a.shape[0] // s.chunk, s.chunk) + a.shape[1:]) for a in rows)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _sharded(s: _ShardStatic, x, w, t, valid, inv_temp):
  return _sharded_fwd(s, x, w, t, valid, inv_temp)[0]


def _sharded_fwd(s, x, w, t, valid, inv_temp):
  tok, col = _specs(s)

  def body(x, w, t, valid, inv_temp):
    def chunk(args):
      xg, tg, vg = (_gather(s, a) for a in args)
      m, sx, ws, zy = _api.local_stats(s.cfg, xg, w, _local_targets(s, tg, vg), inv_temp)
      m_all = lax.pmax(m, s.vocab_axes)
      scale = jnp.exp(m - m_all)
      sx, ws, zy = _sum_to_owner(s, jnp.stack([sx * scale, ws * scale, zy]), axis=1)
      return _api.finish(_own_rows(s, m_all), sx, ws, zy, args[2], s.cfg.v_total)

    if x.shape[0] == s.chunk:
      return chunk((x, t, valid))
    return tuple(a.reshape(-1) for a in lax.map(chunk, _chunked(s, (x, t, valid))))

  in_specs = (tok, col, tok, tok, P())
  logp, ent, lse, mean_z = jax.shard_map(
      body, mesh=s.mesh, in_specs=in_specs, out_specs=(tok,) * 4,
      check_vma=False)(*_place(s, (x, w, t, valid, inv_temp), in_specs))
  return (logp, ent), (x, w, t, valid, inv_temp, lse, mean_z)


def _sharded_bwd(s, res, g):
  x, w, t, valid, inv_temp, lse, mean_z = res
  tok, col = _specs(s)

  def body(x, w, t, valid, inv_temp, lse, mean_z, g_lp, g_h):
    vf = valid.astype(jnp.float32)
    rows = (x, t, valid, lse, mean_z, g_lp.astype(jnp.float32) * vf, g_h.astype(jnp.float32) * vf)

    def chunk(dw, args):
      xg, tg, vg, lg, mg, glg, ghg = (_gather(s, a) for a in args)
      dx, dwc = _api.local_backward(s.cfg, xg, w, _local_targets(s, tg, vg), inv_temp, lg, mg, glg, ghg)
      dx = _sum_to_owner(s, dx, axis=0)
      return dw + dwc.astype(jnp.float32), dx.astype(x.dtype)

    dw0 = jnp.zeros((x.shape[1], s.v_local), jnp.float32)
    if x.shape[0] == s.chunk:
      dw, dx = chunk(dw0, rows)
    else:
      dw, dx = lax.scan(chunk, dw0, _chunked(s, rows))
      dx = dx.reshape(x.shape)
    unshared = tuple(a for a in s.token_axes if a not in s.shared)
    if unshared:
      dw = lax.psum(dw, unshared)
    return dx, dw.astype(w.dtype)

  in_specs = (tok, col, tok, tok, P(), tok, tok, tok, tok)
  dx, dw = jax.shard_map(
      body, mesh=s.mesh, in_specs=in_specs, out_specs=(tok, col), check_vma=False)(
          *_place(s, (x, w, t, valid, inv_temp, lse, mean_z) + tuple(g), in_specs))
  return dx, dw, None, None, jnp.zeros_like(inv_temp)


_sharded.defvjp(_sharded_fwd, _sharded_bwd)


def _axes(value, name: str, mesh: Mesh) -> tuple:
  axes = (value,) if isinstance(value, str) else tuple(value or ())
  for a in axes:
    if not isinstance(a, str) or a not in mesh.axis_names:
      raise ValueError(f"{name} entry {a!r} is not a mesh axis; mesh axes: {mesh.axis_names}")
  if len(set(axes)) != len(axes):
    raise ValueError(f"{name}={axes} names a mesh axis twice")
  return axes


def logprob_and_entropy_sharded(hidden, weight, targets, *, mesh: Mesh,
                                axis_name: Union[str, Sequence[str]] = "tensor",
                                token_axes: Union[None, str, Sequence[str]] = None,
                                temperature=1.0, mask=None, soft_cap: Optional[float] = None,
                                impl: str = "auto", block_sizes: Optional[BlockSizes] = None,
                                chunk_rows: Optional[int] = None):
  """Vocab-parallel :func:`rljax.kernels.logprob_and_entropy`.

  Same math, arguments and outputs as the single-device op; ``weight [H, V]``
  is (or will be) split by columns over the mesh axes ``axis_name`` (one name
  or a sequence, major first: ``PartitionSpec(None, axis_name)``), and rows of
  ``hidden``/``targets``/``mask`` over ``token_axes`` (replicated if None).
  Per token the shards exchange ``max_j z`` (pmax) and the rescaled
  ``sum e^(z-m)``, ``sum e^(z-m) z`` and target logit (one psum of 3 floats).

  A token axis may also be in ``axis_name`` (e.g. ``token_axes=('data',
  'fsdp')``, ``axis_name=('tensor', 'fsdp')``: the FSDP layout where neither
  the head nor its gradient may be whole on a device): the rows are then
  all-gathered over it ``chunk_rows`` local rows at a time and the results
  reduce-scattered back (see the module docstring). ``chunk_rows`` (default:
  about 8192 gathered rows per chunk) is rounded up to the token block.

  Raises:
    ValueError: an ``axis_name``/``token_axes`` entry not in the mesh or named
      twice, ``V`` not divisible by the ``axis_name`` sizes, ``N`` not
      divisible by the token shards, ``chunk_rows`` not a positive int, or any
      error of the single-device op.
  """
  _api.validate_inputs(hidden, weight, targets, temperature, mask, soft_cap, impl)
  vocab_axes = _axes(axis_name, "axis_name", mesh)
  if not vocab_axes:
    raise ValueError("axis_name must name at least one mesh axis")
  token_axes = _axes(token_axes, "token_axes", mesh)
  shared = tuple(a for a in token_axes if a in vocab_axes)
  if chunk_rows is not None and (isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int)
                                 or chunk_rows < 1):
    raise ValueError(f"chunk_rows must be a positive int or None; got {chunk_rows!r}")
  if impl == "reference":
    raise ValueError("impl='reference' has no sharded version; use 'auto', 'xla', 'pallas_tpu' "
                     "or 'pallas_gpu'")
  n, h = hidden.shape
  v = weight.shape[1]
  k = math.prod(mesh.shape[a] for a in vocab_axes)
  if v % k:
    raise ValueError(f"vocabulary V={v} must be divisible by the {vocab_axes} axis size {k}")
  n_shards = math.prod(mesh.shape[a] for a in token_axes)
  if n % n_shards:
    raise ValueError(f"N={n} tokens must be divisible by the token_axes {token_axes} size {n_shards}")
  v_local, n_local = v // k, n // n_shards
  kernels = _api.kernel_table(impl, block_sizes, n_local, v_local, h,
                              jnp.dtype(hidden.dtype).itemsize)
  cfg = _api._Static(impl=impl, soft_cap=None if soft_cap is None else float(soft_cap),
                     v_valid=v_local, v_total=v, kernels=kernels)
  if n == 0:
    z = jnp.zeros((0,), jnp.float32)
    return z, z
  valid = jnp.ones((n,), bool) if mask is None else jnp.asarray(mask).astype(bool)
  t = jnp.where(valid, jnp.asarray(targets).astype(jnp.int32), -1)
  n_gather = math.prod(mesh.shape[a] for a in shared)
  if shared:
    want = chunk_rows or -(-_GATHER_ROWS // n_gather)
    chunk = _config.round_up(min(want, n_local), cfg.block_n)
  else:
    chunk = _config.round_up(n_local, cfg.block_n)
  # Rows are padded per token shard so every shard's slice is a whole number of chunks.
  n_local_pad = _config.round_up(n_local, chunk)
  if n_local_pad != n_local:
    pad = lambda a, c: jnp.pad(a.reshape((n_shards, n_local) + a.shape[1:]),
                               ((0, 0), (0, n_local_pad - n_local)) + ((0, 0),) * (a.ndim - 1),
                               constant_values=c).reshape((n_shards * n_local_pad,) + a.shape[1:])
    xp, tp, vp = pad(hidden, 0), pad(t, -1), pad(valid, False)
  else:
    xp, tp, vp = hidden, t, valid
  s = _ShardStatic(cfg=cfg, mesh=mesh, vocab_axes=vocab_axes, token_axes=token_axes, shared=shared,
                   v_local=v_local, chunk=chunk)
  inv_temp = 1.0 / jnp.asarray(temperature, jnp.float32)
  logp, ent = _sharded(s, xp, weight, tp, vp, inv_temp)
  if n_local_pad != n_local:
    unpad = lambda a: a.reshape(n_shards, n_local_pad)[:, :n_local].reshape(n)
    logp, ent = unpad(logp), unpad(ent)
  return logp, ent
