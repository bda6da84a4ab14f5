"""Vocab-parallel fused log-prob / entropy over a ``tensor`` mesh axis.

The weight ``[H, V]`` is split by columns across ``axis_name``; every shard
runs the single-device kernel on its ``V / k`` columns and the shards combine
per-token statistics only: one ``pmax`` of the running max ``m`` and one
``psum`` of the rescaled ``(s, w, z_y)`` stacked together (sum-exp, entropy
accumulator, and the target logit, which lives on exactly one shard) -- 4
floats per token in 2 collectives, never logits. The backward recomputes each
shard's tiles from the global ``lse`` and ``E_p[z]``; ``dW`` stays sharded,
``dX`` partials are ``psum``-ed over ``axis_name`` (the usual column-parallel
backward). Tokens may additionally be split over ``token_axes`` (e.g. data
parallelism), in which case ``dW`` is also ``psum``-ed over those axes.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Optional, Sequence, Union

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import Mesh, PartitionSpec as P

from rljax.kernels import _api, _config
from rljax.kernels._config import BlockSizes


@dataclasses.dataclass(frozen=True)
class _ShardStatic:
  cfg: _api._Static
  mesh: Mesh
  axis_name: str
  token_axes: Optional[tuple]
  v_local: int
  v_local_pad: int


def _specs(s: _ShardStatic):
  tok = P(s.token_axes) if s.token_axes else P()
  return tok, P(None, s.axis_name)


def _place(s: _ShardStatic, args, specs):
  """With Explicit mesh axes shard_map demands matching input shardings, so
  reshard there; Auto axes let shard_map insert the resharding itself."""
  explicit = any(t == jax.sharding.AxisType.Explicit for t in getattr(s.mesh, "axis_types", ()))
  if not explicit:
    return args
  return tuple(jax.reshard(a, jax.sharding.NamedSharding(s.mesh, sp)) for a, sp in zip(args, specs))


def _local_targets(s: _ShardStatic, t, valid):
  lo = lax.axis_index(s.axis_name) * s.v_local
  own = valid & (t >= lo) & (t < lo + s.v_local)
  return jnp.where(own, t - lo, -1)


def _pad_w(s: _ShardStatic, w):
  return w if s.v_local_pad == s.v_local else jnp.pad(w, ((0, 0), (0, s.v_local_pad - s.v_local)))


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _sharded(s: _ShardStatic, x, w, t, valid, inv_temp):
  return _sharded_fwd(s, x, w, t, valid, inv_temp)[0]


def _sharded_fwd(s, x, w, t, valid, inv_temp):
  tok, col = _specs(s)

  def body(x, w, t, valid, inv_temp):
    m, sx, ws, zy = _api.local_stats(s.cfg, x, _pad_w(s, w), _local_targets(s, t, valid), inv_temp)
    m_all = lax.pmax(m, s.axis_name)
    scale = jnp.exp(m - m_all)
    sx, ws, zy = lax.psum(jnp.stack([sx * scale, ws * scale, zy]), s.axis_name)
    return _api.finish(m_all, sx, ws, zy, valid, s.cfg.v_total)

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
    dx, dw = _api.local_backward(s.cfg, x, _pad_w(s, w), _local_targets(s, t, valid), inv_temp,
                                 lse, mean_z, g_lp.astype(jnp.float32) * vf,
                                 g_h.astype(jnp.float32) * vf)
    dx = lax.psum(dx, s.axis_name)
    dw = dw[:, :s.v_local].astype(jnp.float32)
    if s.token_axes:
      dw = lax.psum(dw, s.token_axes)
    return dx.astype(x.dtype), dw.astype(w.dtype)

  in_specs = (tok, col, tok, tok, P(), tok, tok, tok, tok)
  dx, dw = jax.shard_map(
      body, mesh=s.mesh, in_specs=in_specs, out_specs=(tok, col), check_vma=False)(
          *_place(s, (x, w, t, valid, inv_temp, lse, mean_z) + tuple(g), in_specs))
  return dx, dw, None, None, jnp.zeros_like(inv_temp)


_sharded.defvjp(_sharded_fwd, _sharded_bwd)


def logprob_and_entropy_sharded(hidden, weight, targets, *, mesh: Mesh, axis_name: str = "tensor",
                                token_axes: Union[None, str, Sequence[str]] = None,
                                temperature=1.0, mask=None, soft_cap: Optional[float] = None,
                                impl: str = "auto", block_sizes: Optional[BlockSizes] = None):
  """Vocab-parallel :func:`rljax.kernels.logprob_and_entropy`.

  Same math, arguments and outputs as the single-device op; ``weight [H, V]``
  is (or will be) split by columns over ``mesh`` axis ``axis_name``, and rows
  of ``hidden``/``targets``/``mask`` over ``token_axes`` (replicated if None).
  Per token the shards exchange ``max_j z`` (pmax) and the rescaled
  ``sum e^(z-m)``, ``sum e^(z-m) z`` and target logit (one psum of 3 floats).

  Raises:
    ValueError: ``axis_name``/``token_axes`` not in the mesh, ``V`` not
      divisible by the axis size, ``N`` not divisible by the token shards, or
      any error of the single-device op.
  """
  _api.validate_inputs(hidden, weight, targets, temperature, mask, soft_cap, impl)
  if axis_name not in mesh.axis_names:
    raise ValueError(f"axis_name={axis_name!r} is not a mesh axis; mesh axes: {mesh.axis_names}")
  if isinstance(token_axes, str):
    token_axes = (token_axes,)
  token_axes = tuple(token_axes) if token_axes else None
  for a in token_axes or ():
    if a not in mesh.axis_names or a == axis_name:
      raise ValueError(f"token_axes entry {a!r} must be a mesh axis other than {axis_name!r}; "
                       f"mesh axes: {mesh.axis_names}")
  impl = _api.resolve_impl(impl)
  if impl == "reference":
    raise ValueError("impl='reference' has no sharded version; use 'auto', 'xla', 'pallas_tpu' "
                     "or 'pallas_gpu'")
  n, h = hidden.shape
  v = weight.shape[1]
  k = mesh.shape[axis_name]
  if v % k:
    raise ValueError(f"vocabulary V={v} must be divisible by the {axis_name!r} axis size {k}")
  n_shards = 1
  for a in token_axes or ():
    n_shards *= mesh.shape[a]
  if n % n_shards:
    raise ValueError(f"N={n} tokens must be divisible by the token_axes {token_axes} size {n_shards}")
  v_local, n_local = v // k, n // n_shards
  blocks = _api.plan_blocks(block_sizes, impl, n_local, v_local, h,
                            jnp.dtype(hidden.dtype).itemsize)
  if n == 0:
    z = jnp.zeros((0,), jnp.float32)
    return z, z
  valid = jnp.ones((n,), bool) if mask is None else jnp.asarray(mask).astype(bool)
  t = jnp.where(valid, jnp.asarray(targets).astype(jnp.int32), -1)
  # Rows are padded per token shard so every shard's slice is a block multiple.
  n_local_pad = _config.round_up(n_local, blocks.block_n)
  if n_local_pad != n_local:
    pad = lambda a, c: jnp.pad(a.reshape((n_shards, n_local) + a.shape[1:]),
                               ((0, 0), (0, n_local_pad - n_local)) + ((0, 0),) * (a.ndim - 1),
                               constant_values=c).reshape((n_shards * n_local_pad,) + a.shape[1:])
    xp, tp, vp = pad(hidden, 0), pad(t, -1), pad(valid, False)
  else:
    xp, tp, vp = hidden, t, valid
  cfg = _api._Static(impl=impl, soft_cap=None if soft_cap is None else float(soft_cap),
                     v_valid=v_local, v_total=v, block_n=blocks.block_n, block_v=blocks.block_v,
                     block_h=blocks.block_h, interpret=jax.default_backend() == "cpu")
  s = _ShardStatic(cfg=cfg, mesh=mesh, axis_name=axis_name, token_axes=token_axes,
                   v_local=v_local, v_local_pad=_config.round_up(v_local, blocks.block_v))
  inv_temp = 1.0 / jnp.asarray(temperature, jnp.float32)
  logp, ent = _sharded(s, xp, weight, tp, vp, inv_temp)
  if n_local_pad != n_local:
    unpad = lambda a: a.reshape(n_shards, n_local_pad)[:, :n_local].reshape(n)
    logp, ent = unpad(logp), unpad(ent)
  return logp, ent
