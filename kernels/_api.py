"""Public fused log-prob / entropy op: validation, dispatch and ``custom_vjp``."""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import mlir

from rljax.kernels import _config
from rljax.kernels._config import BlockSizes
from rljax.kernels._reference import logprob_and_entropy_reference

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class _Kernel:
  """One implementation with its static settings, as lowered for one platform."""
  impl: str            # "xla" | "pallas_tpu" | "pallas_gpu"
  block_n: int
  block_v: int
  block_h: int
  interpret: bool

  def kwargs(self, soft_cap, v_valid) -> dict:
    kw = dict(soft_cap=soft_cap, v_valid=v_valid, block_n=self.block_n, block_v=self.block_v)
    if self.impl == "pallas_gpu":
      kw["block_h"] = self.block_h
    if self.impl in ("pallas_tpu", "pallas_gpu"):
      kw["interpret"] = self.interpret
    return kw


@dataclasses.dataclass(frozen=True)
class _Static:
  """Hashable static configuration of one fused call (custom_vjp nondiff arg).

  ``kernels`` maps lowering platforms to the kernel lowered there:
  ``((platforms, _Kernel), ...)``, where ``platforms`` is a tuple of
  :func:`jax.lax.platform_dependent` names (``"cpu"``, ``"tpu"``, ``"cuda"``,
  ``"rocm"``) or ``None`` for every other platform (last entry only).
  """
  impl: str             # as the user asked ("auto", "xla", "pallas_tpu", "pallas_gpu")
  soft_cap: Optional[float]
  v_valid: int          # real (unpadded) columns of the weight given to the kernel
  v_total: int          # full vocabulary size (entropy upper bound log V)
  kernels: tuple

  @property
  def block_n(self) -> int:
    """Token block of the first platform's kernel (row chunks are rounded to it)."""
    return self.kernels[0][1].block_n


def _backend(impl: str):
  if impl == "xla":
    from rljax.kernels import _xla
    return _xla
  if impl == "pallas_tpu":
    from rljax.kernels import _pallas_tpu
    return _pallas_tpu
  if impl == "pallas_gpu":
    from rljax.kernels import _pallas_gpu
    return _pallas_gpu
  raise ValueError(f"impl must be one of {_config.IMPLS}; got {impl!r}")


def _pad_rows(a, rows: int, value):
  return a if a.shape[0] == rows else jnp.pad(
      a, ((0, rows - a.shape[0]),) + ((0, 0),) * (a.ndim - 1), constant_values=value)


def _pad_cols(k: _Kernel, w):
  """Only the Pallas GPU kernel, and only for a vocabulary smaller than its (power-of-two)
  block, needs the weight padded (to one block)."""
  v = w.shape[1]
  return w if k.impl != "pallas_gpu" or v >= k.block_v else jnp.pad(w, ((0, 0), (0, k.block_v - v)))


def _operand(k: _Kernel, x, w):
  """The weight as the kernel multiplies it: Mosaic's matmul takes one operand dtype, so a weight whose dtype
  differs from the hidden states' (float32 master weights, bfloat16 compute) is cast to the hidden states'
  dtype (the model's compute dtype, as every other matmul of the step); accumulation stays float32. The other
  implementations multiply mixed dtypes as they are."""
  return w.astype(x.dtype) if k.impl == "pallas_tpu" and w.dtype != x.dtype else w


def _stats_one(cfg: _Static, k: _Kernel, x, w, t, inv_temp):
  w = _operand(k, x, w)
  n = x.shape[0]
  rows = _config.round_up(n, k.block_n)
  out = _backend(k.impl).forward_stats(_pad_rows(x, rows, 0), _pad_cols(k, w),
                                       _pad_rows(t, rows, -1), inv_temp,
                                       **k.kwargs(cfg.soft_cap, cfg.v_valid))
  return tuple(a[:n] for a in out)


def _backward_one(cfg: _Static, k: _Kernel, x, w, t, inv_temp, lse, mean_z, g_lp, g_h):
  n, v = x.shape[0], w.shape[1]
  rows = _config.round_up(n, k.block_n)
  per_tok = [_pad_rows(a, rows, 0) for a in (lse, mean_z, g_lp, g_h)]
  dx, dw = _backend(k.impl).backward(_pad_rows(x, rows, 0), _pad_cols(k, _operand(k, x, w)),
                                     _pad_rows(t, rows, -1), inv_temp, *per_tok,
                                     **k.kwargs(cfg.soft_cap, cfg.v_valid))
  # One output type for every platform's branch: dX in f32, dW in the weight's dtype.
  return dx[:n].astype(jnp.float32), dw[:, :v].astype(w.dtype)


def _refuse_lowering(ctx, *args, impl, platforms):
  raise ValueError(f"impl={impl!r} lowers for {', '.join(platforms)} only (interpreted when lowered for cpu); "
                   f"this program is lowered for {', '.join(ctx.module_context.platforms)}: use impl='auto' "
                   "or 'xla'")


# Identity whose lowering raises: the default branch of an explicit kernel, so that lowering it for a platform
# it has no branch for names the impl and the platforms instead of failing inside JAX.
_refuse_p = Primitive("rljax_kernel_wrong_platform")
_refuse_p.multiple_results = True
_refuse_p.def_abstract_eval(lambda *avals, **_: avals)
mlir.register_lowering(_refuse_p, _refuse_lowering)


def _refusing_branch(cfg: _Static, fn, k: _Kernel, platforms):
  def branch(*args):
    shapes = jax.eval_shape(functools.partial(fn, cfg, k), *args)
    leaves, tree = jax.tree.flatten(shapes)
    zeros = [jnp.zeros(a.shape, a.dtype) for a in leaves]
    return jax.tree.unflatten(tree, _refuse_p.bind(*zeros, impl=cfg.impl, platforms=platforms))
  return branch


def _per_platform(cfg: _Static, fn, *args):
  """``fn(cfg, kernel, *args)`` with the kernel of the platform being lowered for.

  One entry is called directly; several become a :func:`jax.lax.platform_dependent`,
  which traces every branch but lowers only the lowering platform's (and, run
  eagerly, calls the default backend's branch directly). A table without a
  default entry (an explicit Pallas kernel) refuses other platforms at lowering
  with a ``ValueError``.
  """
  if len(cfg.kernels) == 1 and cfg.kernels[0][0] is None:
    return fn(cfg, cfg.kernels[0][1], *args)
  branches, default = {}, None
  for platforms, k in cfg.kernels:
    branch = functools.partial(fn, cfg, k)
    if platforms is None:
      default = branch
    else:
      branches.update({p: branch for p in platforms})
  if default is None:
    default = _refusing_branch(cfg, fn, cfg.kernels[0][1], tuple(branches))
  return jax.lax.platform_dependent(*args, default=default, **branches)


def local_stats(cfg: _Static, x, w, t, inv_temp):
  """``(m, s, w, z_y)`` per token from the kernel of the lowering platform."""
  return _per_platform(cfg, _stats_one, x, w, t, inv_temp)


def local_backward(cfg: _Static, x, w, t, inv_temp, lse, mean_z, g_lp, g_h):
  """``(dx f32 [N, H], dw [H, V] w.dtype)`` from the kernel of the lowering platform."""
  return _per_platform(cfg, _backward_one, x, w, t, inv_temp, lse, mean_z, g_lp, g_h)


def finish(m, s, ws, zy, valid, v_total):
  """``(logp, entropy, lse, mean_z)`` from merged stats; masked rows give 0."""
  lse = m + jnp.log(s)
  mean_z = ws / s
  logp = jnp.where(valid, jnp.minimum(zy - lse, 0.0), 0.0)
  ent = jnp.where(valid, jnp.clip(lse - mean_z, 0.0, math.log(v_total)), 0.0)
  return logp, ent, lse, mean_z


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _fused(cfg: _Static, x, w, t, valid, inv_temp):
  return _fused_fwd(cfg, x, w, t, valid, inv_temp)[0]


def _fused_fwd(cfg, x, w, t, valid, inv_temp):
  m, s, ws, zy = local_stats(cfg, x, w, t, inv_temp)
  logp, ent, lse, mean_z = finish(m, s, ws, zy, valid, cfg.v_total)
  return (logp, ent), (x, w, t, valid, inv_temp, lse, mean_z)


def _fused_bwd(cfg, res, g):
  x, w, t, valid, inv_temp, lse, mean_z = res
  g_lp, g_h = g
  vf = valid.astype(jnp.float32)
  dx, dw = local_backward(cfg, x, w, t, inv_temp, lse, mean_z,
                          g_lp.astype(jnp.float32) * vf, g_h.astype(jnp.float32) * vf)
  return dx.astype(x.dtype), dw.astype(w.dtype), None, None, jnp.zeros_like(inv_temp)


_fused.defvjp(_fused_fwd, _fused_bwd)


# ----------------------------------------------------------------------------- validation


def _is_concrete(x) -> bool:
  return not isinstance(x, jax.core.Tracer)


def validate_inputs(hidden, weight, targets, temperature, mask, soft_cap, impl):
  """Shape/dtype/static-argument checks; value checks where arrays are concrete."""
  if impl not in _config.IMPLS:
    raise ValueError(f"impl must be one of {_config.IMPLS}; got {impl!r}")
  if jnp.ndim(hidden) != 2:
    raise ValueError(f"hidden must be [N, H]; got shape {jnp.shape(hidden)}")
  if jnp.ndim(weight) != 2:
    raise ValueError(f"weight must be [H, V]; got shape {jnp.shape(weight)}")
  if hidden.shape[1] != weight.shape[0]:
    raise ValueError(f"hidden [N, H] and weight [H, V] disagree on H: hidden {hidden.shape}, "
                     f"weight {weight.shape}")
  for name, a in (("hidden", hidden), ("weight", weight)):
    if not jnp.issubdtype(a.dtype, jnp.floating):
      raise ValueError(f"{name} must be floating point; got {a.dtype}")
  n, v = hidden.shape[0], weight.shape[1]
  if v < 1:
    raise ValueError(f"weight must have at least one vocabulary column; got shape {weight.shape}")
  if jnp.shape(targets) != (n,):
    raise ValueError(f"targets must be [N] = [{n}]; got shape {jnp.shape(targets)}")
  if not jnp.issubdtype(jnp.asarray(targets).dtype, jnp.integer):
    raise ValueError(f"targets must be integer token ids; got dtype {jnp.asarray(targets).dtype}")
  if mask is not None:
    if jnp.shape(mask) != (n,):
      raise ValueError(f"mask must be [N] = [{n}]; got shape {jnp.shape(mask)}")
    if _is_concrete(mask):
      mv = np.asarray(mask)
      if mv.dtype != np.bool_ and not np.all((mv == 0) | (mv == 1)):
        raise ValueError("mask must be boolean or 0/1-valued")
  if soft_cap is not None:
    if isinstance(soft_cap, jax.core.Tracer):
      raise ValueError("soft_cap must be a static Python float (or None), not a traced value")
    if not (float(soft_cap) > 0 and math.isfinite(float(soft_cap))):
      raise ValueError(f"soft_cap must be a positive finite float or None; got {soft_cap!r}")
  if jnp.ndim(temperature) != 0:
    raise ValueError(f"temperature must be a scalar; got shape {jnp.shape(temperature)}")
  if _is_concrete(temperature):
    tv = float(np.asarray(temperature))
    if not (tv > 0 and math.isfinite(tv)):
      raise ValueError(f"temperature must be positive and finite; got {tv}")
  if _is_concrete(targets) and n:
    tv = np.asarray(targets)
    # Under a traced mask the live rows are unknown, so nothing can be checked.
    live = None if mask is not None and not _is_concrete(mask) else (
        np.ones(n, bool) if mask is None else np.asarray(mask).astype(bool))
    bad = np.zeros(n, bool) if live is None else live & ((tv < 0) | (tv >= v))
    if np.any(bad):
      i = int(np.argmax(bad))
      raise ValueError(f"targets must lie in [0, V={v}) where unmasked; targets[{i}] = {int(tv[i])}")


def _fit(units: int, max_units: int) -> int:
  """Largest divisor of ``units`` not above ``max_units`` if it is at least half
  of ``max_units`` (no ragged block needed), else ``max_units``."""
  if units <= max_units:
    return units
  for d in range(max_units, max_units // 2 - 1, -1):
    if d > 0 and units % d == 0:
      return d
  return max_units


def _fit_vmem(blocks: BlockSizes, h: int, itemsize: int) -> BlockSizes:
  """Halves ``block_v`` down to 512, then ``block_n`` down to 8, then ``block_v``
  down to 128, until one Pallas TPU grid step fits the VMEM budget."""
  bn, bv = blocks.block_n, blocks.block_v
  while _config.tpu_vmem_bytes(bn, bv, h, itemsize) > _config.TPU_VMEM_BUDGET_BYTES:
    if bv > 4 * _config.LANE:
      bv = _config.round_up(bv // 2, _config.LANE)
    elif bn > _config.SUBLANE:
      bn = _config.round_up(bn // 2, _config.SUBLANE)
    elif bv > _config.LANE:
      bv = _config.round_up(bv // 2, _config.LANE)
    else:
      break  # H alone is too large: validate_for names the limit
  return dataclasses.replace(blocks, block_n=bn, block_v=bv)


def plan_blocks(block_sizes, impl, n, v, h, itemsize, platform="cpu", fit_vmem=False) -> BlockSizes:
  """User blocks are honoured (clamped to the problem); defaults (for ``platform``)
  are fitted to divide ``N`` and ``V`` when that costs at most a factor 2 in tile
  size. ``fit_vmem`` shrinks Pallas TPU blocks, the user's too, to the VMEM budget
  (``impl="auto"``: blocks chosen for another platform must not fail the TPU's)."""
  given = block_sizes
  if fit_vmem and impl == "pallas_tpu" and (given is None or isinstance(given, BlockSizes)):
    block_sizes = _fit_vmem(given or _config.default_block_sizes(impl, platform), h, itemsize)
  blocks = _config.resolve_blocks(block_sizes, impl, n, v, h, itemsize, platform)
  if given is None and impl in ("xla", "pallas_tpu"):
    bn = _config.SUBLANE * _fit(_config.round_up(n, 8) // 8, blocks.block_n // 8)
    bv = _config.LANE * _fit(_config.round_up(v, 128) // 128, blocks.block_v // 128)
    blocks = dataclasses.replace(blocks, block_n=bn, block_v=bv)
  return blocks


# Per impl: (lowering platforms or None for the rest, kernel, platform whose block defaults apply, interpret)
_TABLES = {
    "auto": ((("tpu",), "pallas_tpu", "tpu", False), (("cuda", "rocm"), "xla", "gpu", False),
             (None, "xla", "cpu", False)),
    "xla": ((("cuda", "rocm"), "xla", "gpu", False), (None, "xla", "cpu", False)),
    "pallas_tpu": ((("tpu",), "pallas_tpu", "tpu", False), (("cpu",), "pallas_tpu", "tpu", True)),
    "pallas_gpu": ((("cuda", "rocm"), "pallas_gpu", "gpu", False),
                   (("cpu",), "pallas_gpu", "gpu", True)),
}


def kernel_table(impl, block_sizes, n, v, h, itemsize) -> tuple:
  """``((platforms, _Kernel), ...)`` for ``impl`` (not ``"reference"``): what each
  lowering platform runs. ``auto``: Mosaic on TPU, chunked XLA elsewhere (GPU
  blocks on cuda/rocm). ``pallas_tpu`` / ``pallas_gpu``: the kernel on its
  platform, interpreted on CPU, no lowering elsewhere. Entries with equal
  kernels are merged (the default entry absorbs them). The unpadded-weight
  kernels get ``block_v <= V`` (a block spanning the whole vocabulary is always
  a legal Mosaic block, aligned or not)."""
  merged = []
  for platforms, name, blocks_for, interpret in _TABLES[impl]:
    b = plan_blocks(block_sizes, name, n, v, h, itemsize, blocks_for, fit_vmem=impl == "auto")
    bv = b.block_v if name == "pallas_gpu" else min(b.block_v, v)
    k = _Kernel(name, b.block_n, bv, b.block_h, interpret)
    for i, (ps, other) in enumerate(merged):
      if other == k:
        merged[i] = (None if ps is None or platforms is None else ps + platforms, k)
        break
    else:
      merged.append((platforms, k))
  default = [e for e in merged if e[0] is None]
  return tuple([e for e in merged if e[0] is not None] + default)


def logprob_and_entropy(hidden: Array, weight: Array, targets: Array, *, temperature=1.0,
                        mask: Optional[Array] = None, soft_cap: Optional[float] = None,
                        impl: str = "auto", block_sizes: Optional[BlockSizes] = None):
  """Fused per-token log-prob of ``targets`` and entropy of the LM head.

  ``z = soft_cap(hidden @ weight) / temperature``, with ``soft_cap(r) =
  cap * tanh(r / cap)`` (Gemma-2) when ``soft_cap`` is given;
  ``logp_i = z_{i, y_i} - lse_i`` and ``entropy_i = lse_i - sum_j p_ij z_ij``
  with ``lse_i = log sum_j e^{z_ij}`` and ``p = softmax(z)``.

  The vocabulary is streamed in blocks with an online log-sum-exp (Milakov &
  Gimelshein 2018, arXiv:1805.02867) and one extra accumulator
  ``sum_j e^{z_j - m} z_j`` for the entropy; the ``[N, V]`` logits are never
  materialised (Cut Cross-Entropy, arXiv:2411.09009, adds the entropy as in
  verl / Liger). A ``jax.custom_vjp`` saves only ``lse`` and ``E_p[z]`` per
  token and recomputes logit tiles in the backward:
  ``dz = g_logp (onehot(y) - p) - g_entropy p (z - E_p[z])``, chained through
  ``1 / temperature`` and ``1 - tanh^2`` (soft cap) into ``dX = dz W^T`` and
  ``dW = X^T dz``. Accumulation is float32 for every input dtype.

  Args:
    hidden: ``[N, H]`` float hidden states (bf16 or f32).
    weight: ``[H, V]`` float unembedding.
    targets: ``[N]`` integer ids in ``[0, V)`` (anything where ``mask`` is False).
    temperature: positive scalar (Python float or traced f32); not differentiated.
    mask: optional ``[N]`` bool; False rows give ``logp = entropy = 0`` and zero
      gradient.
    soft_cap: optional static positive float.
    impl: ``"auto"`` (Pallas Mosaic on TPU, chunked XLA elsewhere), ``"xla"``,
      ``"pallas_tpu"``, ``"pallas_gpu"`` (Triton-lowered Pallas), or
      ``"reference"`` (materialising, autodiff). The choice follows the
      platform the program is lowered for (``jax.lax.platform_dependent``),
      not the host: ``auto`` compiled for TPU devices from a CPU host gets the
      Mosaic kernel. Pallas kernels run in interpret mode when lowered for CPU.
    block_sizes: optional :class:`BlockSizes`.

  Returns:
    ``(logp [N] float32, entropy [N] float32)``; ``logp <= 0`` and
    ``0 <= entropy <= log V``.

  Raises:
    ValueError: on shape/dtype mismatch, non-static ``soft_cap``, non-positive
      temperature, out-of-range unmasked targets (checked when concrete), or
      invalid block sizes.
  """
  validate_inputs(hidden, weight, targets, temperature, mask, soft_cap, impl)
  if impl == "reference":
    if block_sizes is not None and not isinstance(block_sizes, BlockSizes):
      raise ValueError(f"block_sizes must be a rljax.kernels.BlockSizes or None; got {type(block_sizes).__name__}")
    return logprob_and_entropy_reference(hidden, weight, targets, temperature=temperature,
                                         mask=mask, soft_cap=soft_cap)
  n, h = hidden.shape
  v = weight.shape[1]
  kernels = kernel_table(impl, block_sizes, n, v, h, jnp.dtype(hidden.dtype).itemsize)
  if n == 0:
    z = jnp.zeros((0,), jnp.float32)
    return z, z
  valid = jnp.ones((n,), bool) if mask is None else jnp.asarray(mask).astype(bool)
  t = jnp.where(valid, jnp.asarray(targets).astype(jnp.int32), -1)
  cfg = _Static(impl=impl, soft_cap=None if soft_cap is None else float(soft_cap), v_valid=v,
                v_total=v, kernels=kernels)
  inv_temp = 1.0 / jnp.asarray(temperature, jnp.float32)
  with jax.named_scope("logprob_and_entropy"):  # names its ops, forward and backward, in profiles and HLO dumps
    return _fused(cfg, hidden, weight, t, valid, inv_temp)
