"""Public fused log-prob / entropy op: validation, dispatch and ``custom_vjp``."""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from rljax.kernels import _config
from rljax.kernels._config import BlockSizes
from rljax.kernels._reference import logprob_and_entropy_reference

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class _Static:
  """Hashable static configuration of one fused call (custom_vjp nondiff arg)."""
  impl: str
  soft_cap: Optional[float]
  v_valid: int          # real (unpadded) columns of the weight given to the kernel
  v_total: int          # full vocabulary size (entropy upper bound log V)
  block_n: int
  block_v: int
  block_h: int
  interpret: bool

  def kwargs(self) -> dict:
    kw = dict(soft_cap=self.soft_cap, v_valid=self.v_valid, block_n=self.block_n,
              block_v=self.block_v)
    if self.impl == "pallas_gpu":
      kw["block_h"] = self.block_h
    if self.impl in ("pallas_tpu", "pallas_gpu"):
      kw["interpret"] = self.interpret
    return kw


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


def local_stats(cfg: _Static, x, w, t, inv_temp):
  """``(m, s, w, z_y)`` per token from the implementation named by ``cfg``."""
  return _backend(cfg.impl).forward_stats(x, w, t, inv_temp, **cfg.kwargs())


def local_backward(cfg: _Static, x, w, t, inv_temp, lse, mean_z, g_lp, g_h):
  """``(dx f32 [Np, H], dw [H, Vp])`` from the implementation named by ``cfg``."""
  return _backend(cfg.impl).backward(x, w, t, inv_temp, lse, mean_z, g_lp, g_h, **cfg.kwargs())


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


def resolve_impl(impl: str) -> str:
  """``"auto"``: Pallas Mosaic on TPU, chunked XLA elsewhere.

  The Pallas GPU kernel is opt-in (``impl="pallas_gpu"``) until
  ``benchmarks/gpu_kernels_check.py`` has validated it on hardware.
  """
  backend = jax.default_backend()
  if impl == "auto":
    return "pallas_tpu" if backend == "tpu" else "xla"
  needs = {"pallas_tpu": "tpu", "pallas_gpu": "gpu"}.get(impl)
  if needs is not None and backend not in (needs, "cpu"):
    raise ValueError(f"impl={impl!r} runs on {needs} (or interpreted on cpu); the default "
                     f"backend is {backend!r}")
  return impl


def _fit(units: int, max_units: int) -> int:
  """Largest divisor of ``units`` not above ``max_units`` if it is at least half
  of ``max_units`` (no padding needed), else ``max_units`` (pad)."""
  if units <= max_units:
    return units
  for d in range(max_units, max_units // 2 - 1, -1):
    if d > 0 and units % d == 0:
      return d
  return max_units


def plan_blocks(block_sizes, impl, n, v, h, itemsize) -> BlockSizes:
  """User blocks are honoured (clamped to the problem); defaults are fitted to
  divide ``N`` and ``V`` when that costs at most a factor 2 in tile size."""
  blocks = _config.resolve_blocks(block_sizes, impl, n, v, h, itemsize)
  if block_sizes is None and impl in ("xla", "pallas_tpu"):
    bn = _config.SUBLANE * _fit(_config.round_up(n, 8) // 8, blocks.block_n // 8)
    bv = _config.LANE * _fit(_config.round_up(v, 128) // 128, blocks.block_v // 128)
    blocks = dataclasses.replace(blocks, block_n=bn, block_v=bv)
  return blocks


def pad_problem(hidden, weight, targets, valid, block_n, block_v):
  """Pads rows (zero hidden, target -1, invalid) and columns (zero weight)."""
  n, v = hidden.shape[0], weight.shape[1]
  n_pad, v_pad = _config.round_up(n, block_n), _config.round_up(v, block_v)
  if n_pad != n:
    hidden = jnp.pad(hidden, ((0, n_pad - n), (0, 0)))
    targets = jnp.pad(targets, (0, n_pad - n), constant_values=-1)
    valid = jnp.pad(valid, (0, n_pad - n))
  if v_pad != v:
    weight = jnp.pad(weight, ((0, 0), (0, v_pad - v)))
  return hidden, weight, targets, valid


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
      ``"reference"`` (materialising, autodiff). Pallas kernels run in
      interpret mode when the default backend is CPU.
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
  impl = resolve_impl(impl)
  if impl == "reference":
    if block_sizes is not None and not isinstance(block_sizes, BlockSizes):
      raise ValueError(f"block_sizes must be a rljax.kernels.BlockSizes or None; got {type(block_sizes).__name__}")
    return logprob_and_entropy_reference(hidden, weight, targets, temperature=temperature,
                                         mask=mask, soft_cap=soft_cap)
  n, h = hidden.shape
  v = weight.shape[1]
  blocks = plan_blocks(block_sizes, impl, n, v, h, jnp.dtype(hidden.dtype).itemsize)
  if n == 0:
    z = jnp.zeros((0,), jnp.float32)
    return z, z
  valid = jnp.ones((n,), bool) if mask is None else jnp.asarray(mask).astype(bool)
  t = jnp.where(valid, jnp.asarray(targets).astype(jnp.int32), -1)
  xp, wp, tp, vp = pad_problem(hidden, weight, t, valid, blocks.block_n, blocks.block_v)
  cfg = _Static(impl=impl, soft_cap=None if soft_cap is None else float(soft_cap), v_valid=v,
                v_total=v, block_n=blocks.block_n, block_v=blocks.block_v,
                block_h=blocks.block_h, interpret=jax.default_backend() == "cpu")
  inv_temp = 1.0 / jnp.asarray(temperature, jnp.float32)
  with jax.named_scope("logprob_and_entropy"):  # names its ops, forward and backward, in profiles and HLO dumps
    logp, ent = _fused(cfg, xp, wp, tp, vp, inv_temp)
  return logp[:n], ent[:n]
