"""Building blocks: projections (with optional LoRA), RMSNorm, RoPE, attention, MLP, MoE.

Every parameter carries a ``logical_axes`` metadata tuple (see
``rljax.models.logical_axes``) naming its dimensions with the logical names
``vocab, embed, heads, kv_heads, head_dim, mlp, expert, norm, lora`` so that a
sharding helper can map them to mesh axes.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Iterator, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from rljax.models._config import LoRAConfig, ModelConfig, RopeScaling
from rljax.models._dots import dot_t, mm  # noqa: F401  (dot_t re-exported: rljax.models.dot_t)

_NEG = -0.7 * float(np.finfo(np.float32).max)  # finite "minus infinity": a fully masked row stays finite


def dtype_of(name: str):
  return {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16, "float64": jnp.float64}[name]


def param(value, axes: Sequence[Optional[str]], kind=nnx.Param):
  """An ``nnx.Param`` (or subclass) annotated with logical axis names."""
  axes = tuple(axes)
  if len(axes) != np.ndim(value):
    raise ValueError(f"logical axes {axes} do not match parameter shape {np.shape(value)}")
  return kind(value, logical_axes=axes)


def _normal(rngs: nnx.Rngs, shape, std: float, dtype):
  return (std * jax.random.normal(rngs.params(), shape, jnp.float32)).astype(dtype)


class Linear(nnx.Module):
  """``y = x . W (+ b)`` contracting the trailing ``len(in_shape)`` axes of ``x``.

  ``kernel``: ``in_shape + out_shape``. With ``lora`` the output gains
  ``s * ((x_flat @ lora_a) @ lora_b)`` reshaped to ``out_shape``
  (``lora_a [prod(in), r]``, ``lora_b [r, prod(out)]``, both ``nnx.LoRAParam``).
  """

  def __init__(self, in_shape, out_shape, in_axes, out_axes, *, cfg: ModelConfig, rngs: nnx.Rngs,
               bias: bool = False, lora: Optional[LoRAConfig] = None, std: float = 0.02):
    self.in_shape = tuple(in_shape)
    self.out_shape = tuple(out_shape)
    self.compute_dtype = dtype_of(cfg.compute_dtype)
    pdt = dtype_of(cfg.param_dtype)
    self.kernel = param(_normal(rngs, self.in_shape + self.out_shape, std, pdt), tuple(in_axes) + tuple(out_axes))
    self.bias = param(jnp.zeros(self.out_shape, pdt), out_axes) if bias else None
    self.lora_scale = None
    self.lora_merged = False
    if lora is not None:
      n_in, n_out = int(np.prod(self.in_shape)), int(np.prod(self.out_shape))
      bound = math.sqrt(6.0 / n_in)  # He-uniform, fan_in = n_in
      a = jax.random.uniform(rngs.params(), (n_in, lora.rank), jnp.float32, -bound, bound).astype(pdt)
      self.lora_a = param(a, ("lora_in", "lora"), nnx.LoRAParam)
      self.lora_b = param(jnp.zeros((lora.rank, n_out), pdt), ("lora", "lora_out"), nnx.LoRAParam)
      self.lora_scale = float(lora.scale)

  def __call__(self, x):
    n_in = len(self.in_shape)
    x = x.astype(self.compute_dtype)
    lead = x.shape[: x.ndim - n_in]
    # One 2-D matmul over flattened rows: a dot_general with several batch-like
    # contracting dims (the tensordot's weight gradient contracts over B and T)
    # runs ~2.5x slower on XLA:CPU than the same FLOPs as a plain [M, K] @ [K, N].
    k_in, k_out = math.prod(self.in_shape), math.prod(self.out_shape)
    y = mm(x.reshape(-1, k_in), self.kernel[...].astype(self.compute_dtype).reshape(k_in, k_out))
    y = y.reshape(lead + self.out_shape)
    if self.bias is not None:
      y = y + self.bias[...].astype(self.compute_dtype)
    if self.lora_scale is not None and not self.lora_merged:
      xa = x.reshape(lead + (-1,)) @ self.lora_a[...].astype(self.compute_dtype)
      delta = (xa @ self.lora_b[...].astype(self.compute_dtype)).reshape(lead + self.out_shape)
      y = y + (self.lora_scale * delta).astype(y.dtype)
    return y

  def lora_delta(self):
    """``s * A @ B`` reshaped like ``kernel`` (float32); per layer ``[n, ...]`` on stacked layers
    (``A [n, in, r]``, ``B [n, r, out]``)."""
    d = self.lora_scale * (self.lora_a[...].astype(jnp.float32) @ self.lora_b[...].astype(jnp.float32))
    return d.reshape(d.shape[:-2] + self.in_shape + self.out_shape)


def lora_modules(model) -> Iterator[tuple[tuple, Linear]]:
  """Yields ``(path, Linear)`` for every projection carrying an adapter (one per layer, or one per
  layer stack ``("layer_stacks", r, ...)`` with ``[n, ...]`` adapters when the layers are stored stacked)."""
  for path, node in nnx.iter_graph(model):
    if isinstance(node, Linear) and node.lora_scale is not None:
      yield tuple(path), node


class RMSNorm(nnx.Module):
  """``y = x / sqrt(mean(x^2) + eps) * (w + offset)`` computed in float32.

  ``offset`` is 1 for Gemma (weights stored as ``w``, initialised at 0) and 0
  otherwise (weights initialised at 1).
  """

  def __init__(self, dim: int, *, cfg: ModelConfig, plus_one: Optional[bool] = None):
    self.eps = float(cfg.rms_norm_eps)
    self.offset = 1.0 if (cfg.norm_plus_one if plus_one is None else plus_one) else 0.0
    self.compute_dtype = dtype_of(cfg.compute_dtype)
    init = jnp.zeros if self.offset else jnp.ones
    self.scale = param(init((dim,), dtype_of(cfg.param_dtype)), ("norm",))

  def __call__(self, x):
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
    return (y * (self.scale[...].astype(jnp.float32) + self.offset)).astype(self.compute_dtype)


# ----------------------------------------------------------------------- RoPE
def rope_inv_freq(head_dim: int, theta: float, scaling: Optional[RopeScaling]) -> tuple[np.ndarray, float]:
  """Inverse frequencies ``[D/2]`` (float64 NumPy) and the cos/sin multiplier.

  Default: ``inv_freq_i = theta^(-2i/D)``. Scaling variants follow the
  Hugging Face ``rope_type`` definitions (see :class:`RopeScaling`).
  """
  d = head_dim
  inv = 1.0 / (theta ** (np.arange(0, d, 2, dtype=np.float64) / d))
  if scaling is None or scaling.rope_type == "default":
    return inv, 1.0
  f = scaling.factor
  if scaling.rope_type == "linear":
    return inv / f, 1.0
  if scaling.rope_type == "llama3":
    old = scaling.original_max_position_embeddings
    low_wl, high_wl = old / scaling.low_freq_factor, old / scaling.high_freq_factor
    wl = 2 * math.pi / inv
    out = np.where(wl > low_wl, inv / f, inv)
    smooth = (old / wl - scaling.low_freq_factor) / (scaling.high_freq_factor - scaling.low_freq_factor)
    smoothed = (1 - smooth) * out / f + smooth * out
    medium = ~(wl < high_wl) & ~(wl > low_wl)
    return np.where(medium, smoothed, out), 1.0
  # yarn
  attn = scaling.attention_factor
  if attn is None:
    attn = 0.1 * math.log(f) + 1.0 if f > 1 else 1.0
  old = scaling.original_max_position_embeddings

  def corr_dim(rot):
    return (d * math.log(old / (rot * 2 * math.pi))) / (2 * math.log(theta))

  low, high = corr_dim(scaling.beta_fast), corr_dim(scaling.beta_slow)
  if scaling.truncate:
    low, high = math.floor(low), math.ceil(high)
  low, high = max(low, 0), min(high, d - 1)
  if low == high:
    high += 0.001
  ramp = np.clip((np.arange(d // 2, dtype=np.float64) - low) / (high - low), 0, 1)
  extra = 1 - ramp
  pos = theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
  inv = (1.0 / (f * pos)) * (1 - extra) + (1.0 / pos) * extra
  return inv, float(attn)


def rope_cos_sin(positions, cfg: ModelConfig, sliding: bool = False):
  """``cos, sin [B, T, D]`` float32 for integer ``positions [B, T]`` (halves convention).

  ``sliding``: the tables of a sliding-window layer, which differ only when
  ``cfg.rope_local_theta`` is set (Gemma 3: base ``rope_local_theta``, no scaling).

  On CPU the tables are materialised once (:func:`_materialized`): otherwise
  XLA fuses ``cos``/``sin`` into every consumer — q and k of every layer,
  forward and backward — and evaluates them again for every head (on a 2-core
  CPU ~15% of a GRPO train step went to those transcendentals; in the decode
  loop, one position per row, materialising made a 48-token rollout ~9% faster).
  """
  if sliding and cfg.rope_local_theta is not None:
    inv, mult = rope_inv_freq(cfg.head_dim, cfg.rope_local_theta, None)
  else:
    inv, mult = rope_inv_freq(cfg.head_dim, cfg.rope_theta, cfg.rope_scaling)
  inv = jnp.asarray(inv, jnp.float32)
  ang = positions.astype(jnp.float32)[..., None] * inv  # [B, T, D/2]
  ang = jnp.concatenate([ang, ang], axis=-1)
  tables = lambda a: (jnp.cos(a) * mult, jnp.sin(a) * mult)
  return jax.lax.platform_dependent(ang, cpu=_materialized(tables), default=tables)


def _materialized(fn):
  """``fn`` computed behind a fusion boundary (XLA:CPU drops ``optimization_barrier`` before fusion).

  Both branches of the ``cond`` are ``fn``, so the result never depends on the
  predicate; the predicate is data-dependent only so that XLA cannot fold the
  conditional away and fuse ``fn``'s elementwise work into its consumers.
  """
  def run(x):
    flat = x.reshape(-1)[:1]
    return jax.lax.cond(jnp.all(flat == flat), fn, fn, x)
  return run


def apply_rope(x, cos, sin):
  """``x [B, T, N, D]``: ``x cos + rotate_half(x) sin`` with ``rotate_half(x) = [-x2, x1]``."""
  x32 = x.astype(jnp.float32)
  x1, x2 = jnp.split(x32, 2, axis=-1)
  rot = jnp.concatenate([-x2, x1], axis=-1)
  return (x32 * cos[:, :, None] + rot * sin[:, :, None]).astype(x.dtype)


# ------------------------------------------------------------------ attention
def attention(q, k, v, mask, *, scale: float, softcap: Optional[float], query_chunk: int = 0):
  """Grouped-query attention.

  ``q [B, T, N, D]``, ``k, v [B, S, K, D]``, ``mask [B, T, S]`` bool.
  ``s = scale q.k`` (float32), ``s = cap tanh(s / cap)`` if soft-capped, masked
  slots get a large finite negative value, ``o = softmax(s) v``.

  ``query_chunk`` (``ModelConfig.attention_query_chunk``; used when it is smaller than ``T`` and divides it): the
  query rows in chunks under ``lax.map``, each chunk checkpointed, so one chunk's ``[B, N, chunk, S]`` float32
  scores are alive at a time in the forward and the backward; each row's softmax still runs over all its keys.
  """
  t = q.shape[1]
  if query_chunk and query_chunk < t and t % query_chunk == 0:
    b, _, n, d = q.shape
    c = t // query_chunk
    qs = jnp.moveaxis(q.reshape(b, c, query_chunk, n, d), 1, 0)
    ms = jnp.moveaxis(mask.reshape(b, c, query_chunk, mask.shape[-1]), 1, 0)
    one = jax.checkpoint(lambda qm: attention(qm[0], k, v, qm[1], scale=scale, softcap=softcap))
    return jnp.moveaxis(jax.lax.map(one, (qs, ms)), 0, 1).reshape(b, t, n, d)
  b, t, n, d = q.shape
  kh = k.shape[2]
  qg = q.reshape(b, t, kh, n // kh, d)
  s = jnp.einsum("btkgd,bskd->bkgts", qg, k, preferred_element_type=jnp.float32) * scale
  if softcap is not None:
    s = softcap * jnp.tanh(s / softcap)
  s = jnp.where(mask[:, None, None], s, _NEG)
  p = jax.nn.softmax(s, axis=-1).astype(v.dtype)
  o = jnp.einsum("bkgts,bskd->btkgd", p, v)
  return o.reshape(b, t, n, d)


@dataclasses.dataclass(frozen=True)
class PrefixGroups:
  """Attention pattern of the grouped shared-prefix layout (a static "mask").

  A row of ``T' = prefix_len + group_size * Tc`` columns holds one prompt
  (``prefix_len`` columns, stored once) followed by the ``group_size``
  continuations of that prompt (``Tc`` columns each). Prefix column ``i``
  attends prefix columns ``j <= i``; column ``t`` of continuation ``g`` (its
  sequence column ``prefix_len + t``) attends every prefix column and columns
  ``s <= t`` of the same continuation; with ``window`` W, key column ``j`` is
  seen only when ``query column - j < W`` (sequence columns). This is exactly
  the causal attention of the ``group_size`` full sequences ``prompt +
  continuation_g``, computed without repeating the prompt.

  With ``common_len = C > 0`` the prompts of all ``num_groups = P`` groups also
  share their first ``C`` tokens (a system prompt, a chat template's header),
  stored once for the whole batch: the input is one row of ``C + P * T'``
  columns, the common tokens then the ``P`` grouped rows above, whose
  ``prefix_len`` columns are each prompt's tokens after the common ones
  (sequence columns ``C ..``). Every column of a group also attends the
  ``C`` common columns, which attend causally among themselves.
  """
  prefix_len: int
  group_size: int
  window: Optional[int] = None
  common_len: int = 0
  num_groups: int = 1

  def split(self, total: int) -> int:
    """``Tc`` for a grouped row of ``total`` columns (raises when it does not divide)."""
    rest = total - self.common_len
    if self.common_len:
      if rest <= 0 or rest % self.num_groups:
        raise ValueError(f"a row of {total} columns is not common_len={self.common_len} + "
                         f"num_groups={self.num_groups} grouped rows")
      rest //= self.num_groups
    rest -= self.prefix_len
    if rest <= 0 or rest % self.group_size:
      raise ValueError(f"a grouped row of {total} columns is not prefix_len={self.prefix_len} + "
                       f"group_size={self.group_size} * Tc")
    return rest // self.group_size


def _causal(n_q: int, n_k: int, offset: int, window: Optional[int]):
  """``[n_q, n_k]`` bool: key ``j`` visible to query ``i`` iff ``j <= i + offset`` (and in the window)."""
  qi = np.arange(n_q)[:, None] + offset
  kj = np.arange(n_k)[None, :]
  m = kj <= qi
  if window is not None:
    m &= (qi - kj) < window
  return jnp.asarray(m)


def _attend_blocks(q, lead: str, blocks, *, scale: float, softcap: Optional[float]):
  """One softmax over several key blocks, each read as stored (no key is broadcast to the queries' leading dims).

  ``q [*lead, T, K, h, D]`` (``lead``: einsum letters of its leading dims); ``blocks``: ``(k, v, k_lead,
  visible)`` with ``k, v [*k_lead, S, K, D]`` (``k_lead`` a subset of ``lead``: keys shared by those
  queries) and ``visible [T, S]`` bool. Scores ``scale q.k`` in float32 (soft-capped), masked, one softmax
  over the concatenated blocks; returns ``o [*lead, T, K, h, D]``.
  """
  scores = [jnp.einsum(f"{lead}tkhd,{kl}skd->{lead}khts", q, k, preferred_element_type=jnp.float32) * scale
            for k, _, kl, _ in blocks]
  s = jnp.concatenate(scores, axis=-1) if len(scores) > 1 else scores[0]
  if softcap is not None:
    s = softcap * jnp.tanh(s / softcap)
  visible = jnp.concatenate([m for *_, m in blocks], axis=-1)
  s = jnp.where(visible, s, _NEG)
  prob = jax.nn.softmax(s, axis=-1)
  out, lo = 0, 0
  for k, v, kl, _ in blocks:
    n = k.shape[-3]
    out = out + jnp.einsum(f"{lead}khts,{kl}skd->{lead}tkhd", prob[..., lo:lo + n].astype(v.dtype), v)
    lo += n
  return out


def attention_prefix_groups(q, k, v, groups: PrefixGroups, *, scale: float, softcap: Optional[float]):
  """:func:`attention` over the grouped shared-prefix layout (see :class:`PrefixGroups`).

  ``q [P, T', N, D]``, ``k, v [P, T', K, D]`` with ``T' = Tp + G * Tc`` (with
  ``common_len = C``: ``[1, C + P * T', ...]``). The prefix block is ordinary
  causal attention over ``Tp`` columns; each continuation's scores are
  ``[prefix keys ; own keys]`` with one softmax over both, so the prefix
  keys/values are read by all ``G`` continuations without being copied; the
  common keys, when any, are one more block read by every column. Same float32
  scores/softmax as :func:`attention`.
  """
  n, d = q.shape[2:]
  kh = k.shape[2]
  tp, g, c, w = groups.prefix_len, groups.group_size, groups.common_len, groups.window
  tc = groups.split(q.shape[1])
  kw = dict(scale=scale, softcap=softcap)

  def heads(x):  # [..., T, N, D] -> [..., T, K, h, D]
    return x.reshape(x.shape[:-2] + (kh, n // kh, d))

  shared = []  # the common block, seen by every column of every group: (k, v, its einsum lead)
  if c:
    q0, k0, v0 = q[0, :c], k[0, :c], v[0, :c]
    o_common = _attend_blocks(heads(q0), "", [(k0, v0, "", _causal(c, c, 0, w))], **kw).reshape(c, n, d)
    p = groups.num_groups
    q, k, v = (x[0, c:].reshape((p, -1) + x.shape[2:]) for x in (q, k, v))
    shared = [(k0, v0, "")]
  p = q.shape[0]
  kp, vp = k[:, :tp], v[:, :tp]
  kc, vc = k[:, tp:].reshape(p, g, tc, kh, d), v[:, tp:].reshape(p, g, tc, kh, d)
  # sequence columns: common 0..C-1, prefix C..C+Tp-1, continuation column t at C+Tp+t
  o_pre = _attend_blocks(heads(q[:, :tp]), "p", [(ks, vs, kl, _causal(tp, c, c, w)) for ks, vs, kl in shared]
                         + [(kp, vp, "p", _causal(tp, tp, 0, w))], **kw)
  o_c = _attend_blocks(heads(q[:, tp:].reshape(p, g, tc, n, d)), "pg",
                       [(ks, vs, kl, _causal(tc, c, c + tp, w)) for ks, vs, kl in shared]
                       + [(kp, vp, "p", _causal(tc, tp, tp, w)), (kc, vc, "pg", _causal(tc, tc, 0, w))], **kw)
  out = jnp.concatenate([o_pre.reshape(p, tp, n, d), o_c.reshape(p, g * tc, n, d)], axis=1).astype(q.dtype)
  if c:
    out = jnp.concatenate([o_common.astype(q.dtype), out.reshape(-1, n, d)])[None]
  return out


def attention_decode(q, k, v, mask, *, scale: float, softcap: Optional[float]):
  """:func:`attention` for one query per row over a head-major cache.

  ``q [B, 1, N, D]``, ``k, v [B, K, S, D]`` (kv head before slot: the
  decode loop's layout), ``mask [B, 1, S]``. Same math as :func:`attention`
  (float32 scores and softmax). In this layout both matmuls have their batch
  dims ``(B, K)`` leading, so XLA reads the cache in place; with the
  ``[B, S, K, D]`` layout it transposes the whole layer cache every step.
  """
  b, t, n, d = q.shape
  kh = k.shape[1]
  qg = q.reshape(b, kh, n // kh, d)  # t == 1
  s = jnp.einsum("bkgd,bksd->bkgs", qg, k, preferred_element_type=jnp.float32) * scale
  if softcap is not None:
    s = softcap * jnp.tanh(s / softcap)
  s = jnp.where(mask[:, :, None], s, _NEG)  # mask [B, 1, S] -> [B, 1, 1, S]
  p = jax.nn.softmax(s, axis=-1).astype(v.dtype)
  o = jnp.einsum("bkgs,bksd->bkgd", p, v)
  return o.reshape(b, t, n, d)


def _lora_for(cfg: ModelConfig, name: str) -> Optional[LoRAConfig]:
  return cfg.lora if (cfg.lora is not None and name in cfg.lora.targets) else None


class Attention(nnx.Module):
  """Multi-head GQA with RoPE, optional QKV bias, QK-norm and logit soft-capping."""

  def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
    h, n, kh, d = cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    kw = dict(cfg=cfg, rngs=rngs, bias=cfg.qkv_bias)
    self.q = Linear((h,), (n, d), ("embed",), ("heads", "head_dim"), lora=_lora_for(cfg, "q"), **kw)
    self.k = Linear((h,), (kh, d), ("embed",), ("kv_heads", "head_dim"), lora=_lora_for(cfg, "k"), **kw)
    self.v = Linear((h,), (kh, d), ("embed",), ("kv_heads", "head_dim"), lora=_lora_for(cfg, "v"), **kw)
    self.o = Linear((n, d), (h,), ("heads", "head_dim"), ("embed",), cfg=cfg, rngs=rngs,
                    lora=_lora_for(cfg, "o"))
    if cfg.qk_norm:
      self.q_norm = RMSNorm(d, cfg=cfg)
      self.k_norm = RMSNorm(d, cfg=cfg)
    else:
      self.q_norm = self.k_norm = None
    self.scale = cfg.attn_scale
    self.softcap = cfg.attn_logit_softcap
    self.query_chunk = cfg.attention_query_chunk

  def qkv(self, x, cos, sin, fused: bool = False, w_t=None):
    """RoPE'd ``q [.., N, D]``, ``k, v [.., K, D]``. ``fused``: one matmul against the kernels
    concatenated per kv head (``[H, K, G + 2, D]``: a K-sharded layout stays K-sharded), used by
    the decode loop where three small matmuls cost more than one; same values. ``w_t``: that fused
    weight already transposed (``fused_qkv_weight().T``, the decode loop's, see :func:`dot_t`)."""
    if w_t is not None or (fused and _plain(self.q, self.k, self.v)):
      q, k, v = self._qkv_fused(x, w_t)
    else:
      q, k, v = self.q(x), self.k(x), self.v(x)
    if self.q_norm is not None:
      q, k = self.q_norm(q), self.k_norm(k)
    return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

  def fused_qkv_weight(self):
    """``[H, K * (G + 2) * D]`` in compute dtype: per kv head its G query heads' kernels, then k's and v's."""
    h, n, d = self.q.kernel.shape
    kh = self.k.kernel.shape[1]
    w = jnp.concatenate([self.q.kernel[...].reshape(h, kh, n // kh, d), self.k.kernel[...][:, :, None],
                         self.v.kernel[...][:, :, None]], axis=2).astype(self.q.compute_dtype)
    return w.reshape(h, -1)

  def _qkv_fused(self, x, w_t=None):
    """q, k, v from one matmul against ``[H, K, G + 2, D]`` (per kv head: its G query heads, k, v); ``w_t``:
    :meth:`fused_qkv_weight` transposed."""
    cd = self.q.compute_dtype
    h, n, d = self.q.kernel.shape
    kh = self.k.kernel.shape[1]
    g = n // kh
    lead = x.shape[:-1]
    x2 = x.astype(cd).reshape(-1, h)
    y = mm(x2, self.fused_qkv_weight()) if w_t is None else dot_t(x2, w_t)
    y = y.reshape(lead + (kh, g + 2, d))
    if self.q.bias is not None:
      bias = jnp.concatenate([self.q.bias[...].reshape(kh, g, d), self.k.bias[...][:, None],
                              self.v.bias[...][:, None]], axis=1).astype(cd)
      y = y + bias
    return y[..., :g, :].reshape(lead + (n, d)), y[..., g, :], y[..., g + 1, :]

  def out(self, q, k, v, mask):
    """``mask``: ``[B, T, S]`` bool, or a :class:`PrefixGroups` for the grouped shared-prefix layout."""
    if isinstance(mask, PrefixGroups):
      return self.o(attention_prefix_groups(q, k, v, mask, scale=self.scale, softcap=self.softcap))
    return self.o(attention(q, k, v, mask, scale=self.scale, softcap=self.softcap, query_chunk=self.query_chunk))

  def out_decode(self, q, k, v, mask, o_t=None):
    """:meth:`out` for a single query token per row over a KV cache; ``o_t``: the output projection's kernel as
    ``[H, N * D]`` in compute dtype (the decode loop's transposed weight, see :func:`dot_t`)."""
    a = attention_decode(q, k, v, mask, scale=self.scale, softcap=self.softcap)
    if o_t is None:
      return self.o(a)
    return dot_t(a.astype(o_t.dtype).reshape(-1, o_t.shape[1]), o_t).reshape(a.shape[:-2] + (o_t.shape[0],))


def _act(name: str, x):
  if name == "silu":
    return jax.nn.silu(x)
  if name == "gelu_tanh":
    return jax.nn.gelu(x, approximate=True)
  return jax.nn.gelu(x, approximate=False)


class MLP(nnx.Module):
  """Gated MLP ``down(act(gate(x)) * up(x))`` (SwiGLU with silu, GeGLU with gelu)."""

  def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
    h, f = cfg.hidden_size, cfg.intermediate_size
    self.gate = Linear((h,), (f,), ("embed",), ("mlp",), cfg=cfg, rngs=rngs, lora=_lora_for(cfg, "gate"))
    self.up = Linear((h,), (f,), ("embed",), ("mlp",), cfg=cfg, rngs=rngs, lora=_lora_for(cfg, "up"))
    self.down = Linear((f,), (h,), ("mlp",), ("embed",), cfg=cfg, rngs=rngs, lora=_lora_for(cfg, "down"))
    self.activation = cfg.activation

  def fused_gate_up_weight(self):
    """``stack([gate, up], -1)`` as ``[H, 2 F]`` in compute dtype (column ``2 j``: gate ``j``, ``2 j + 1``: up)."""
    h, f = self.gate.kernel.shape
    return jnp.stack([self.gate.kernel[...], self.up.kernel[...]], axis=-1).astype(self.gate.compute_dtype).reshape(
        h, 2 * f)

  def __call__(self, x, fused: bool = False, w_t=None):
    """``fused``: gate and up from one matmul against ``stack([gate, up], -1)`` (``[H, F, 2]``, an
    F-sharded layout stays F-sharded); same values. ``w_t``: ``(fused_gate_up_weight().T [2 F, H], down [H, F])``
    in compute dtype (the decode loop's transposed weights, see :func:`dot_t`)."""
    if w_t is not None:
      gu_t, down_t = w_t
      f = down_t.shape[1]
      gu = dot_t(x.astype(gu_t.dtype).reshape(-1, gu_t.shape[1]), gu_t).reshape(x.shape[:-1] + (f, 2))
      y = _act(self.activation, gu[..., 0]) * gu[..., 1]
      return dot_t(y.reshape(-1, f), down_t).reshape(x.shape[:-1] + (down_t.shape[0],))
    if fused and _plain(self.gate, self.up) and self.gate.bias is None:  # (the MLP's projections have no bias)
      f = self.gate.kernel.shape[1]
      w = self.fused_gate_up_weight()
      gu = mm(x.astype(w.dtype).reshape(-1, w.shape[0]), w).reshape(x.shape[:-1] + (f, 2))
      return self.down(_act(self.activation, gu[..., 0]) * gu[..., 1])
    return self.down(_act(self.activation, self.gate(x)) * self.up(x))


def _plain(*layers) -> bool:
  """Layers whose outputs are just ``x @ kernel (+ bias)`` (no unmerged LoRA), all with or all without bias."""
  return (all(l.lora_scale is None or l.lora_merged for l in layers)
          and len({l.bias is None for l in layers}) == 1)


class MoE(nnx.Module):
  """Top-k routed experts (Qwen3-MoE / Mixtral).

  Router: ``p = softmax(x W_r)`` (float32, ``W_r [H, E]``); chosen experts
  ``ids = top_k(p)`` (or the replayed ``routing`` ids); gates
  ``g = p[ids]`` renormalised to sum 1 when ``norm_topk_prob``;
  ``y = sum_j g_j * down_e(act(gate_e(x)) * up_e(x))`` with ``e = ids_j``.
  Mixtral's ``softmax(top_k(logits))`` equals ``norm_topk_prob=True``.
  Experts are stacked: ``gate, up [E, H, F]``, ``down [E, F, H]``.
  """

  def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
    h, f, e = cfg.hidden_size, cfg.moe_intermediate_size, cfg.num_experts
    pdt = dtype_of(cfg.param_dtype)
    self.router = param(_normal(rngs, (h, e), 0.02, pdt), ("embed", None))
    self.gate = param(_normal(rngs, (e, h, f), 0.02, pdt), ("expert", "embed", "mlp"))
    self.up = param(_normal(rngs, (e, h, f), 0.02, pdt), ("expert", "embed", "mlp"))
    self.down = param(_normal(rngs, (e, f, h), 0.02, pdt), ("expert", "mlp", "embed"))
    self.k = cfg.num_experts_per_tok
    self.num_experts = e
    self.norm_topk_prob = cfg.norm_topk_prob
    self.activation = cfg.activation
    self.impl = cfg.moe_impl
    self.compute_dtype = dtype_of(cfg.compute_dtype)

  def route(self, x, routing=None):
    """``(ids [..., k] int32, gates [..., k] f32, probs [..., E] f32)``."""
    logits = jnp.dot(x.astype(self.compute_dtype), self.router[...].astype(self.compute_dtype),
                     preferred_element_type=jnp.float32)
    probs = jax.nn.softmax(logits.astype(jnp.float32), axis=-1)
    if routing is None:
      gates, ids = jax.lax.top_k(probs, self.k)
    else:
      ids = routing.astype(jnp.int32)
      gates = jnp.take_along_axis(probs, ids, axis=-1)
    if self.norm_topk_prob:
      gates = gates / jnp.sum(gates, axis=-1, keepdims=True)
    return ids.astype(jnp.int32), gates, probs

  def __call__(self, x, routing=None):
    """``x [B, T, H]`` -> ``(y [B, T, H], ids [B, T, k], probs [B, T, E])``."""
    b, t, h = x.shape
    ids, gates, probs = self.route(x, routing)
    cd = self.compute_dtype
    xf = x.reshape(b * t, h).astype(cd)
    idf = ids.reshape(b * t, self.k)
    gf = gates.reshape(b * t, self.k).astype(cd)
    wg, wu, wd = (w[...].astype(cd) for w in (self.gate, self.up, self.down))
    if self.impl == "dense":
      hg = jnp.einsum("nh,ehf->enf", xf, wg)
      hu = jnp.einsum("nh,ehf->enf", xf, wu)
      ye = jnp.einsum("enf,efh->enh", _act(self.activation, hg) * hu, wd)  # [E, N, H]
      comb = jnp.sum(jax.nn.one_hot(idf, self.num_experts, dtype=cd) * gf[..., None], axis=1)  # [N, E]
      y = jnp.einsum("enh,ne->nh", ye, comb)
    else:
      flat = idf.reshape(-1)
      order = jnp.argsort(flat, stable=True)
      xs = xf[order // self.k]
      sizes = jnp.bincount(flat, length=self.num_experts).astype(jnp.int32)
      hg = jax.lax.ragged_dot(xs, wg, sizes)
      hu = jax.lax.ragged_dot(xs, wu, sizes)
      ys = jax.lax.ragged_dot(_act(self.activation, hg) * hu, wd, sizes)
      yk = jnp.zeros_like(ys).at[order].set(ys).reshape(b * t, self.k, h)
      y = jnp.sum(yk * gf[..., None], axis=1)
    return y.reshape(b, t, h).astype(cd), ids, probs
