"""The projections' matmul forms: ``mm`` (``x @ w``) and ``dot_t`` (``x @ w_t.T`` with the weight as the left
operand, the decode loop's form), each with its 16-bit form chosen per lowering platform."""
from __future__ import annotations

import jax
import jax.numpy as jnp


_HALF = (jnp.bfloat16, jnp.float16)


def _f32_out(x, w):
  return jnp.dot(x, w, preferred_element_type=jnp.float32).astype(x.dtype)


def _plain_dot(x, w):
  return x @ w


def mm(x, w):
  """``x @ w`` (``[M, K] x [K, N]``, one dtype) in the operands' dtype. With 16-bit operands in a program lowered
  for CPU: ``dot(x, w, preferred_element_type=float32)`` cast back, the only form XLA:CPU runs on a CPU's bfloat16
  units (AVX512-BF16 / AMX: 1.83x its float32 dot on a Zen 4, a bfloat16-output dot 0.85x). Elsewhere the plain
  16-bit dot (TPU and GPU accumulate in float32 anyway): on the v5e compile of the Qwen2.5-7B update the CPU form
  costs 0.42 GiB more per chip (4.79 against 4.37, docs/benchmarks.md), so it is chosen per lowering platform
  (``jax.lax.platform_dependent``, which lowers only the target's branch)."""
  if x.dtype not in _HALF:
    return x @ w
  return jax.lax.platform_dependent(x, w, cpu=_f32_out, default=_plain_dot)


def dot_t(x, w_t, preferred_element_type=None):
  """``x @ w_t.T`` (``x [M, K]``, ``w_t [N, K]`` -> ``[M, N]``) computed as ``(w_t @ x.T).T``: the decode loop's
  few-row matmuls with the weight stored ``[N, K]`` as the left operand. On XLA:CPU (YNNPACK) that form streams
  the weight 1.5-3x faster at 8-32 rows than ``x @ W`` with ``W [K, N]`` (docs/benchmarks.md, issue #53).
  16-bit operands without ``preferred_element_type``: as :func:`mm`, float32-accumulated and cast back when lowered
  for CPU."""
  # the barrier keeps XLA from folding the outer transpose into the dot (back to ``x @ w_t.T``, the slow form)
  if preferred_element_type is None and x.dtype in _HALF:
    return jax.lax.platform_dependent(
        x, w_t, cpu=lambda x, w_t: jax.lax.optimization_barrier(_f32_out(w_t, x.T)).T,
        default=lambda x, w_t: jax.lax.optimization_barrier(jnp.dot(w_t, x.T)).T)
  return jax.lax.optimization_barrier(jnp.dot(w_t, x.T, preferred_element_type=preferred_element_type)).T
