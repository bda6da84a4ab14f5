"""The decoder-only transformer, its KV cache and the policy-outputs call.

Size: one concern, the decoder (its blocks, KV cache and policy-outputs call share private helpers).
"""
from __future__ import annotations

import dataclasses
import numbers
from typing import Optional

import jax
import jax.numpy as jnp
from flax import nnx

from rljax.models._config import ModelConfig
from rljax.models._layers import (MLP, Attention, MoE, PrefixGroups, RMSNorm, _plain, dtype_of, lora_modules, param,
                                  rope_cos_sin)
from rljax.models._masks import attention_masks, decode_masks
from rljax.types import PolicyOutputs

__all__ = ["Transformer", "KVCache", "ModelOutput", "ValueHead", "policy_outputs", "segment_positions",
           "with_value_head", "convert_layout", "layer_runs"]

Array = jax.Array


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class KVCache:
  """Key/value cache: ``k, v [L, B, S, K, D]`` (layer, batch, slot, kv head, head dim)."""
  k: Array
  v: Array

  @property
  def max_len(self) -> int:
    return self.k.shape[2]


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class ModelOutput:
  """Result of :meth:`Transformer.__call__`.

  Attributes:
    hidden: ``[B, T, H]`` final hidden states after the final norm (compute dtype).
    logits: ``[B, T, V]`` float32 (soft-capped when ``final_logit_softcap``) or None.
    cache: the updated :class:`KVCache` or None.
    routing: ``[B, T, L_moe, k]`` int32 expert ids used by each MoE layer, or None.
    aux_loss: scalar float32 load-balancing loss (Switch, arXiv 2101.03961, pooled
      over MoE layers as in Hugging Face): ``E * sum_e f_e P_e`` with ``f_e`` the
      fraction of (token, layer) top-k assignments to expert ``e`` and ``P_e`` the
      mean router probability; unweighted (``cfg.router_aux_loss_coef`` is the
      usual weight); 0 for dense models.
  """
  hidden: Array
  logits: Optional[Array] = None
  cache: Optional[KVCache] = None
  routing: Optional[Array] = None
  aux_loss: Optional[Array] = None


def segment_positions(segment_ids):
  """Position of each token inside its segment: ``t - start(segment containing t)``."""
  t = segment_ids.shape[-1]
  idx = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), segment_ids.shape)
  change = jnp.concatenate([jnp.ones_like(segment_ids[..., :1], bool),
                            segment_ids[..., 1:] != segment_ids[..., :-1]], axis=-1)
  start = jax.lax.cummax(jnp.where(change, idx, 0), axis=segment_ids.ndim - 1)
  return idx - start


class Block(nnx.Module):
  """Pre-norm decoder layer (Gemma-2: sandwich norms around attention and MLP)."""

  def __init__(self, cfg: ModelConfig, layer: int, *, rngs: nnx.Rngs):
    h = cfg.hidden_size
    self.attn_norm = RMSNorm(h, cfg=cfg)
    self.attn = Attention(cfg, rngs=rngs)
    self.mlp_norm = RMSNorm(h, cfg=cfg)
    self.is_moe = layer in cfg.moe_layer_indices
    self.mlp = MoE(cfg, rngs=rngs) if self.is_moe else MLP(cfg, rngs=rngs)
    if cfg.sandwich_norm:
      self.attn_post_norm = RMSNorm(h, cfg=cfg)
      self.mlp_post_norm = RMSNorm(h, cfg=cfg)
    else:
      self.attn_post_norm = self.mlp_post_norm = None
    self.sliding = cfg.is_sliding(layer)

  def _mlp(self, x, routing, fused: bool = False, w_t=None):
    y = self.mlp_norm(x)
    if self.is_moe:
      y, ids, probs = self.mlp(y, routing)
    else:
      y, ids, probs = self.mlp(y, fused=fused, w_t=w_t), None, None
    if self.mlp_post_norm is not None:
      y = self.mlp_post_norm(y)
    return x + y, ids, probs

  def __call__(self, x, cos, sin, mask, routing=None):
    """Uncached: ``x [B, T, H]``, ``mask [B, T, T]``."""
    y = self.attn_norm(x)
    q, k, v = self.attn.qkv(y, cos, sin)
    y = self.attn.out(q, k, v, mask)
    if self.attn_post_norm is not None:
      y = self.attn_post_norm(y)
    return self._mlp(x + y, routing)

  def cached(self, x, cos, sin, mask, k_all, v_all, layer, cache_index, routing=None):
    """Cached: writes this layer's keys/values at ``cache_index`` in ``k_all, v_all [L, B, S, K, D]``."""
    y = self.attn_norm(x)
    q, k, v = self.attn.qkv(y, cos, sin)
    start = (layer, 0, cache_index, 0, 0)
    k_all = jax.lax.dynamic_update_slice(k_all, k[None].astype(k_all.dtype), start)
    v_all = jax.lax.dynamic_update_slice(v_all, v[None].astype(v_all.dtype), start)
    cd = q.dtype
    y = self.attn.out(q, k_all[layer].astype(cd), v_all[layer].astype(cd), mask)
    if self.attn_post_norm is not None:
      y = self.attn_post_norm(y)
    x, ids, probs = self._mlp(x + y, routing)
    return x, ids, probs, k_all, v_all


  def cached_layer(self, x, cos, sin, mask, k_l, v_l, cache_index, routing=None):
    """:meth:`cached` over this layer's own cache ``k_l, v_l [B, S, K, D]`` (the scanned path)."""
    y = self.attn_norm(x)
    q, k, v = self.attn.qkv(y, cos, sin)
    start = (0, cache_index, 0, 0)
    k_l = jax.lax.dynamic_update_slice(k_l, k.astype(k_l.dtype), start)
    v_l = jax.lax.dynamic_update_slice(v_l, v.astype(v_l.dtype), start)
    cd = q.dtype
    y = self.attn.out(q, k_l.astype(cd), v_l.astype(cd), mask)
    if self.attn_post_norm is not None:
      y = self.attn_post_norm(y)
    x, ids, probs = self._mlp(x + y, routing)
    return x, ids, probs, k_l, v_l

  def decode_weights(self) -> dict:
    """This layer's decode-loop matmul weights stored ``[out, in]`` in compute dtype (a transposed copy, made once
    before the loop; :func:`rljax.models._dots.dot_t`): ``qkv`` (the fused q/k/v weight), ``o``, and for a dense
    MLP ``mlp`` = ``(fused gate/up, down)``; a projection with an unmerged LoRA adapter is left out (it runs as
    stored)."""
    attn, out = self.attn, {}
    if _plain(attn.q, attn.k, attn.v):
      out["qkv"] = attn.fused_qkv_weight().T
    if _plain(attn.o) and attn.o.bias is None:
      k_in = attn.o.kernel.shape[0] * attn.o.kernel.shape[1]
      out["o"] = attn.o.kernel[...].astype(attn.o.compute_dtype).reshape(k_in, -1).T
    mlp = self.mlp
    if not self.is_moe and _plain(mlp.gate, mlp.up, mlp.down) and mlp.gate.bias is None and mlp.down.bias is None:
      out["mlp"] = (mlp.fused_gate_up_weight().T, mlp.down.kernel[...].astype(mlp.down.compute_dtype).T)
    return out

  def decode(self, x, cos, sin, mask, k_l, v_l, cache_index, routing=None, fused: bool = True, w_t=None):
    """One decode token per row over this layer's own cache ``k_l, v_l [B, K, S, D]``.

    Same math as :meth:`cached` with ``T = 1``. The per-layer, head-major
    cache lets the attention read it in place (on CPU a slice of the stacked
    ``[L, ...]`` cache, or a ``[B, S, K, D]`` cache under a ``(B, K)``-batched
    matmul, is a full copy every step). ``mask`` ``[B, 1, A]`` with ``A <= S``:
    the attention reads the first ``A`` slots only (``A`` > ``cache_index``). ``fused``: q/k/v and gate/up
    each from one matmul against their stacked weights (a stacked copy of the weights: see ``decode_step``).
    ``w_t``: :meth:`decode_weights` (or None: the stored weights).
    """
    w_t = w_t or {}
    y = self.attn_norm(x)
    q, k, v = self.attn.qkv(y, cos, sin, fused=fused, w_t=w_t.get("qkv"))  # one matmul (decode: 64-row operands)
    start = (0, 0, cache_index, 0)
    k_l = jax.lax.dynamic_update_slice(k_l, k.transpose(0, 2, 1, 3).astype(k_l.dtype), start)
    v_l = jax.lax.dynamic_update_slice(v_l, v.transpose(0, 2, 1, 3).astype(v_l.dtype), start)
    a = mask.shape[-1]
    y = self.attn.out_decode(q, k_l[:, :, :a] if a < k_l.shape[2] else k_l,
                             v_l[:, :, :a] if a < v_l.shape[2] else v_l, mask, o_t=w_t.get("o"))
    if self.attn_post_norm is not None:
      y = self.attn_post_norm(y)
    x, ids, probs = self._mlp(x + y, routing, fused=fused, w_t=w_t.get("mlp"))
    return x, ids, probs, k_l, v_l


_REMAT_POLICIES = {
    "full": None,
    "dots": jax.checkpoint_policies.checkpoint_dots,
    "dots_no_batch": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}


def _call_block(block, x, cos, sin, mask, routing):
  return block(x, cos, sin, mask, routing)


def _block_with_static_mask(mask):
  def call(block, x, cos, sin, routing):
    return block(x, cos, sin, mask, routing)
  return call


def rope_tables(positions, cfg: ModelConfig) -> dict:
  """``{sliding: (cos, sin)}`` for ``sliding`` in ``(False, True)``: the RoPE tables of full-attention
  and of sliding-window layers (the same arrays unless ``cfg.rope_local_theta`` is set, Gemma 3)."""
  full = rope_cos_sin(positions, cfg)
  local = rope_cos_sin(positions, cfg, sliding=True) if cfg.rope_local_theta is not None else full
  return {False: full, True: local}


def layer_runs(cfg: ModelConfig) -> list:
  """``[(start, stop)]``: maximal runs of consecutive layers with the same structure (MoE or dense,
  sliding or full attention; LoRA targets are the same in every layer), each of which is stored
  stacked and scanned when ``cfg.scan_layers``. A homogeneous model (Llama, Qwen2/3) is one run;
  Gemma-2's alternating sliding / full layers are runs of one."""
  if not isinstance(cfg, ModelConfig):
    raise ValueError(f"layer_runs takes a ModelConfig, got {type(cfg).__name__}")
  moe = set(cfg.moe_layer_indices)
  kinds = [(i in moe, cfg.is_sliding(i)) for i in range(cfg.num_layers)]
  runs, start = [], 0
  for i in range(1, len(kinds) + 1):
    if i == len(kinds) or kinds[i] != kinds[start]:
      runs.append((start, i))
      start = i
  return runs


def _with_axes(var, axes):
  """``var`` (same value) with ``logical_axes`` metadata ``axes``."""
  return var.replace(var.get_value(), logical_axes=axes)


def stack_blocks(blocks) -> "Block":
  """One :class:`Block` whose parameters are those of ``blocks`` (one structure) stacked on a new
  leading axis ``[n, ...]``, logical axis ``layers`` (the scanned storage). LoRA merge flags must agree."""
  graphdef = nnx.split(blocks[0])[0]
  if any(nnx.split(b)[0] != graphdef for b in blocks[1:]):
    raise ValueError("stack_blocks: the layers differ in structure (MoE/dense, sliding, LoRA targets or merge state)")
  flats = [nnx.to_flat_state(nnx.split(b)[1]) for b in blocks]
  stacked = []
  for i, (path, var) in enumerate(flats[0]):
    value = jnp.stack([f[i][1].get_value() for f in flats])
    axes = var.get_metadata().get("logical_axes")
    stacked.append((path, var.replace(value, **({} if axes is None else {"logical_axes": ("layers",) + tuple(axes)}))))
  return nnx.merge(graphdef, nnx.from_flat_state(stacked))


def _layer_state(stack: "Block"):
  """``(graphdef, state)`` of a stacked block with the leading ``layers`` axis dropped from every
  variable's ``logical_axes`` (values unchanged, still ``[n, ...]``): slicing a leaf of ``state``
  gives one layer's variable with its per-layer metadata."""
  graphdef, state = nnx.split(stack)

  def drop(v):
    axes = v.get_metadata().get("logical_axes")
    if axes is None:
      return v
    if axes[:1] != ("layers",):
      raise ValueError(f"a stacked layer variable must lead with the 'layers' axis, got {axes}")
    return _with_axes(v, tuple(axes[1:]))

  return graphdef, jax.tree.map(drop, state, is_leaf=lambda x: isinstance(x, nnx.Variable))


def unstack_block(stack: "Block") -> list:
  """The ``n`` per-layer :class:`Block` s of a stacked block (inverse of :func:`stack_blocks`;
  each layer's arrays are slices of the stacked ones)."""
  graphdef, state = _layer_state(stack)
  n = jax.tree.leaves(state)[0].shape[0]
  return [nnx.merge(graphdef, jax.tree.map(lambda x, j=j: x[j], state)) for j in range(n)]


def _scan_run(stack, x, mask, cos, sin, *, policy, routing=None, cache=None, cache_index=None, weights_fn=None):
  """The layers of the stacked block ``stack`` (``[n, ...]`` parameters) applied in order under
  ``jax.lax.scan`` over the leading layer axis.

  The body is the graph-merged :class:`Block` on one layer's slice of the stored
  stacked parameters (no copy of the weights is made for the scan), wrapped in
  ``jax.checkpoint(policy=policy)`` unless ``policy`` is the string ``"none"``.
  ``weights_fn`` maps one layer's sliced state inside the body (the FSDP gather, see
  ``rljax.parallel.fsdp_loss_fn``); its variables carry their per-layer logical axes.

  Args:
    x: ``[B, T, H]``; ``mask``: ``[B, T, S]`` bool or a static :class:`PrefixGroups`.
    routing: ``[n, B, T, k]`` replayed expert ids (MoE runs) or None.
    cache: ``(k, v)`` each ``[n, B, S, K, D]`` (cached calls) or None.
  Returns:
    ``(x, ids [n, B, T, k] or None, probs [n, B, T, E] or None, cache [n, ...] pair or None)``.
  """
  graphdef, stacked = _layer_state(stack)
  is_moe = stack.is_moe

  def layer(x, xs):
    st, r, kv = xs
    if weights_fn is not None:
      st = weights_fn(st)
    block = nnx.merge(graphdef, st)
    if kv is None:
      x, ids, probs = block(x, cos, sin, mask, r)
      kv_out = None
    else:
      x, ids, probs, k_l, v_l = block.cached_layer(x, cos, sin, mask, kv[0], kv[1], cache_index, r)
      kv_out = (k_l, v_l)
    return x, ((ids, probs) if is_moe else None, kv_out)

  if policy != "none":
    layer = jax.checkpoint(layer, policy=policy, prevent_cse=False)
  x, (moe_out, kv_out) = jax.lax.scan(layer, x, (stacked, routing, cache))
  ids, probs = moe_out if is_moe else (None, None)
  return x, ids, probs, kv_out


class ValueHead(nnx.Module):
  """Scalar state-value head of a critic: ``V(h) = h . w + b`` (float32).

  ``kernel [H, 1] (embed, None)``, ``bias [1] (None,)``. Both start at zero, so
  a fresh head predicts ``V = 0`` for every state: the scale of the returns is
  unknown when the head is created (a random head would add noise of arbitrary
  sign to the first advantages), and a zero head is where verl / OpenRLHF
  critics effectively start after a fresh score head on a pre-trained trunk.
  Its gradient w.r.t. ``w`` is ``h`` (non-zero), so it learns from the first
  step; the trunk receives gradient from the second step on.
  """

  def __init__(self, cfg: ModelConfig):
    pdt = dtype_of(cfg.param_dtype)
    self.compute_dtype = dtype_of(cfg.compute_dtype)
    self.kernel = param(jnp.zeros((cfg.hidden_size, 1), pdt), ("embed", None))
    self.bias = param(jnp.zeros((1,), pdt), (None,))

  def __call__(self, hidden) -> Array:
    """``hidden [..., H]`` -> ``[...]`` float32 values."""
    cd = self.compute_dtype
    v = jnp.dot(hidden.astype(cd), self.kernel[...].astype(cd), preferred_element_type=jnp.float32)
    return v[..., 0] + self.bias[...].astype(jnp.float32)[0]


class Transformer(nnx.Module):
  """Decoder-only transformer (Llama-3 / Qwen2 / Qwen3 / Qwen3-MoE / Gemma / Gemma-2 family).

  Parameters (logical axes in brackets): ``embed [V, H] (vocab, embed)``;
  per layer ``attn.q.kernel [H, N, D] (embed, heads, head_dim)``,
  ``attn.k/v.kernel [H, K, D] (embed, kv_heads, head_dim)``,
  ``attn.o.kernel [N, D, H] (heads, head_dim, embed)``, dense MLP
  ``gate/up [H, F] (embed, mlp)``, ``down [F, H] (mlp, embed)``, MoE
  ``router [H, E] (embed, None)``, ``gate/up [E, H, F] (expert, embed, mlp)``,
  ``down [E, F, H] (expert, mlp, embed)``, norms ``[H] (norm,)``;
  ``lm_head [H, V] (embed, vocab)`` when untied; ``value_head.kernel [H, 1]
  (embed, None)`` and ``value_head.bias [1]`` when ``cfg.value_head`` (a
  :class:`ValueHead`, built after every trunk parameter so that the trunk's
  initial weights do not depend on it).

  With ``cfg.scan_layers`` the layers are stored stacked: ``layers`` is None and
  ``layer_stacks[r]`` is one :class:`Block` per :func:`layer_runs` run whose every
  parameter has a leading layer axis (``[n, ...]``, logical axis ``layers``, e.g.
  ``attn.q.kernel [n, H, N, D] (layers, embed, heads, head_dim)``), with the values a
  per-layer init gives for the same seed. The uncached forward and the cached prefill
  run each stack under one ``jax.lax.scan`` (``cfg.remat`` is the scan body's
  ``jax.checkpoint`` policy); :meth:`decode_step` keeps its per-layer loop over slices
  of the stacks. :func:`convert_layout` converts a model between the two layouts.
  ``layer_weights_fn`` / ``embed_lookup_fn`` / ``head_logprob_fn`` are optional hooks (default None)
  that a sharded loss installs on the model it builds inside the step (see
  ``rljax.parallel.fsdp_loss_fn``).
  """

  def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
    if not isinstance(cfg, ModelConfig):
      raise ValueError(f"cfg must be a ModelConfig, got {type(cfg).__name__}")
    self.cfg = cfg
    pdt = dtype_of(cfg.param_dtype)
    self.embed = param((0.02 * jax.random.normal(rngs.params(), (cfg.vocab_size, cfg.hidden_size))).astype(pdt),
                       ("vocab", "embed"))
    blocks = [Block(cfg, i, rngs=rngs) for i in range(cfg.num_layers)]  # per-layer init (same values either way)
    if cfg.scan_layers:
      self.layers = None
      self.layer_stacks = nnx.List([stack_blocks(blocks[a:b]) for a, b in layer_runs(cfg)])
    else:
      self.layers = nnx.List(blocks)
      self.layer_stacks = None
    self.final_norm = RMSNorm(cfg.hidden_size, cfg=cfg)
    if cfg.tie_embeddings:
      self.lm_head = None
    else:
      self.lm_head = param((0.02 * jax.random.normal(rngs.params(), (cfg.hidden_size, cfg.vocab_size))).astype(pdt),
                           ("embed", "vocab"))
    self.value_head = ValueHead(cfg) if cfg.value_head else None
    # Scanned layers only: a map of one layer's sliced state applied inside the (remat'ed) scan body,
    # e.g. the per-layer FSDP all-gather that rljax.parallel.fsdp_loss_fn installs; None = identity.
    self.layer_weights_fn = None
    # ``(table [V, H], tokens [...]) -> [..., H]``: the embedding lookup (None: ``jnp.take``), e.g. a lookup
    # that never gathers the table (rljax.parallel.fsdp_loss_fn installs one on scanned models).
    self.embed_lookup_fn = None
    # ``(hidden [N, H], weight [H, V], targets [N], *, temperature, mask, soft_cap, impl) -> (logp, entropy)``:
    # the LM head's fused log-prob / entropy in ``policy_outputs`` (None: ``rljax.kernels.logprob_and_entropy``),
    # e.g. a vocabulary-sharded one (rljax.parallel.fsdp_loss_fn installs one on scanned models).
    self.head_logprob_fn = None

  # ---------------------------------------------------------------- helpers
  def lm_head_weight(self) -> Array:
    """The unembedding ``[H, V]`` (``embed.T`` when tied), in parameter dtype."""
    return self.embed[...].T if self.lm_head is None else self.lm_head[...]

  def value(self, hidden) -> Array:
    """``[...]`` float32 values ``V(hidden)`` of the value head (``hidden [..., H]``)."""
    if self.value_head is None:
      raise ValueError("the model has no value head (ModelConfig.value_head=False); see rljax.models.with_value_head")
    return self.value_head(hidden)

  def init_cache(self, batch_size: int, max_len: int, dtype=None) -> KVCache:
    """Zeroed :class:`KVCache` with ``k, v [L, batch_size, max_len, K, D]`` (default compute dtype)."""
    cfg = self.cfg
    dtype = dtype_of(cfg.compute_dtype) if dtype is None else dtype
    shape = (cfg.num_layers, batch_size, max_len, cfg.num_kv_heads, cfg.head_dim)
    return KVCache(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype))

  def embed_tokens(self, tokens):
    cd = dtype_of(self.cfg.compute_dtype)
    lookup = self.embed_lookup_fn or (lambda table, ids: jnp.take(table, ids, axis=0))
    x = lookup(self.embed[...], tokens).astype(cd)
    if self.cfg.embed_scale:
      x = x * jnp.asarray(self.cfg.hidden_size ** 0.5, cd)
    return x

  def logits(self, hidden) -> Array:
    """``[.., V]`` float32 logits (soft-capped when the config says so)."""
    w = self.lm_head_weight()
    cd = dtype_of(self.cfg.compute_dtype)
    z = jnp.dot(hidden.astype(cd), w.astype(cd), preferred_element_type=jnp.float32)
    cap = self.cfg.final_logit_softcap
    if cap is not None:
      z = cap * jnp.tanh(z / cap)
    return z

  # ---------------------------------------------------------------- forward
  def decode_step(self, tokens, positions, k_layers, v_layers, cache_index, kv_mask, attend=None, fused=True,
                  weights_t=None):
    """One token per row with a per-layer KV cache (the sampler's decode loop).

    Equals ``self(tokens, positions, cache=KVCache(stack(k_layers),
    stack(v_layers)), cache_index=cache_index, kv_mask=kv_mask)`` for
    ``T = 1`` (same math, summation order may differ), but keeps one
    head-major ``[B, K, S, D]`` array per layer so that no step copies a layer's cache.

    Args:
      tokens, positions: ``[B, 1]`` int.
      k_layers, v_layers: tuples of ``L`` head-major arrays ``[B, K, S, D]``
        (``KVCache.k[l].transpose(0, 2, 1, 3)``).
      cache_index: int32 scalar slot written by this token.
      kv_mask: ``[B, S]`` bool valid slots (including ``cache_index``).
      attend: static int in ``(cache_index, S]`` or None (``S``): attend over the first ``attend`` slots only
        (the sampler's decode phases: the cache is written in place at its full size, and early steps do
        not read its empty tail; same values, the slots after are empty).
      fused: q/k/v and gate/up each from one matmul (fewer, larger matmuls; same values). The stacked
        weights are a copy of them that XLA keeps beside the stored ones through a decode loop (on a pod,
        4x the sharded gate/up in TPU tiles): the sampler turns it off over a mesh.
      weights_t: None, or one :meth:`Block.decode_weights` dict per layer (made before the decode loop: the
        layers' matmuls then read their weights as ``[out, in]``, see ``rljax.models._dots.dot_t``; same math).
    Returns:
      ``(hidden [B, 1, H] after the final norm, k_layers, v_layers, routing [B, 1, L_moe, k] or None)``.
    """
    cfg = self.cfg
    b, t = tokens.shape
    if t != 1:
      raise ValueError(f"tokens must be [B, 1] for decode_step, got shape {tokens.shape}")
    s_len = k_layers[0].shape[2] if attend is None else int(attend)
    cache_index = jnp.asarray(cache_index, jnp.int32)
    base, sliding_mask = decode_masks(cfg, kv_mask[:, :s_len], cache_index, s_len)
    rope = rope_tables(positions, cfg)
    x = self.embed_tokens(tokens)
    ids_all = []
    ks, vs = list(k_layers), list(v_layers)
    for i, block in enumerate(self.blocks()):
      mask = sliding_mask if block.sliding else base
      x, ids, _, ks[i], vs[i] = block.decode(x, *rope[block.sliding], mask, ks[i], vs[i], cache_index,
                                             fused=fused, w_t=None if weights_t is None else weights_t[i])
      if block.is_moe:
        ids_all.append(ids)
    routing_out = jnp.stack(ids_all, axis=2) if ids_all else None
    return self.final_norm(x), tuple(ks), tuple(vs), routing_out

  def decode_weights(self) -> tuple:
    """``(per-layer Block.decode_weights dicts, head [V, H])``: the decode loop's weights stored ``[out, in]``
    (``decode_step(weights_t=...)`` and the head's ``dot_t``): a transposed copy of the layers' matmul weights;
    the head is the embedding itself when tied (no copy), else ``lm_head.T``."""
    head = self.embed[...] if self.lm_head is None else self.lm_head[...].T
    return tuple(b.decode_weights() for b in self.blocks()), head

  def blocks(self) -> list:
    """The ``L`` per-layer :class:`Block` s: ``layers``, or the slices of ``layer_stacks`` (scanned storage)."""
    if self.layer_stacks is None:
      return list(self.layers)
    return [b for stack in self.layer_stacks for b in unstack_block(stack)]

  def _scanned_layers(self, x, rope, base, sliding_mask, routing, k_all, v_all, cache_index):
    """The stored layer stacks (:func:`layer_runs`), each under :func:`_scan_run` (``cfg.scan_layers``).

    Same values as the unrolled loop (tested to float32 rounding). Returns ``(x, ids, probs, k_all,
    v_all)`` with ``ids``/``probs`` lists of per-MoE-layer ``[B, T, k]`` / ``[B, T, E]`` arrays.
    """
    cfg = self.cfg
    ids_all, probs_all, ks, vs = [], [], [], []
    moe_i = 0
    for stack, (start, stop) in zip(self.layer_stacks, layer_runs(cfg)):
      n = stop - start
      mask = sliding_mask if stack.sliding else base
      r = None
      if routing is not None and stack.is_moe:
        r = jnp.moveaxis(routing[:, :, moe_i:moe_i + n], 2, 0)  # [n, B, T, k]
      kv = None if k_all is None else (k_all[start:stop], v_all[start:stop])
      policy = "none" if (kv is not None or cfg.remat == "none") else _REMAT_POLICIES[cfg.remat]
      x, ids, probs, kv = _scan_run(stack, x, mask, *rope[stack.sliding], policy=policy, routing=r, cache=kv,
                                    cache_index=cache_index, weights_fn=self.layer_weights_fn)
      if ids is not None:
        ids_all.extend(list(ids))
        probs_all.extend(list(probs))
        moe_i += n
      if kv is not None:
        ks.append(kv[0])
        vs.append(kv[1])
    if k_all is not None:
      k_all = ks[0] if len(ks) == 1 else jnp.concatenate(ks)
      v_all = vs[0] if len(vs) == 1 else jnp.concatenate(vs)
    return x, ids_all, probs_all, k_all, v_all

  def __call__(self, tokens, positions=None, *, segment_ids=None, cache: Optional[KVCache] = None,
               cache_index=None, kv_mask=None, routing=None, return_logits: bool = False,
               prefix_groups: Optional[PrefixGroups] = None, batch_load=None) -> ModelOutput:
    """Forward pass.

    Args:
      tokens: ``[B, T]`` int.
      positions: ``[B, T]`` int RoPE positions (None: ``segment_positions(segment_ids)``
        or ``arange(T)``; with a cache, ``cache_index + arange(T)``).
      segment_ids: ``[B, T]`` int (uncached only); 0 = padding; token ``i`` attends
        ``j <= i`` with ``seg[j] == seg[i] != 0``.
      cache: :class:`KVCache` ``[L, B, S, K, D]``; the T new keys/values go to slots
        ``cache_index .. cache_index + T - 1``.
      cache_index: int32 scalar (required with ``cache``).
      kv_mask: ``[B, S]`` bool valid cache slots (incl. the ones written now); query
        ``t`` (slot ``q = cache_index + t``) attends slot ``j`` iff ``j <= q`` and
        ``kv_mask[b, j]`` (and, on sliding-window layers, fewer than ``W`` valid slots
        in ``(j, q]``: masked slots are not tokens, so a padding gap inside a row does
        not shrink the window; without ``kv_mask``, ``q - j < W``).
      routing: ``[B, T, L_moe, k]`` int expert ids to replay, or None (router decides).
      return_logits: also return ``[B, T, V]`` float32 logits.
      prefix_groups: a :class:`PrefixGroups`: ``tokens``/``positions`` are in the
        grouped shared-prefix layout ``[P, Tp + G * Tc]`` (one prompt, then its
        G continuations; ``positions`` required; with ``common_len`` one row
        ``[1, C + P * (Tp + G * Tc)]``) and attention follows that pattern
        instead of the causal mask (dense models, uncached, no segment_ids).
        :func:`policy_outputs` builds this layout.
      batch_load: ``(f [E], R)`` = :func:`expert_load` of a batch these rows are a
        slice of (a micro-batch): ``aux_loss`` is then the slice's share of that
        batch's load-balancing loss (see :func:`load_balancing_loss`).
    """
    cfg = self.cfg
    if tokens.ndim != 2:
      raise ValueError(f"tokens must be [B, T], got shape {tokens.shape}")
    b, t = tokens.shape
    for name, arr in (("positions", positions), ("segment_ids", segment_ids)):
      if arr is not None and tuple(arr.shape) != (b, t):
        raise ValueError(f"{name} must have shape {(b, t)}, got {tuple(arr.shape)}")
    n_moe, k = cfg.num_moe_layers, cfg.num_experts_per_tok
    if routing is not None:
      if n_moe == 0:
        raise ValueError("routing was given but the model has no MoE layers")
      if tuple(routing.shape) != (b, t, n_moe, k):
        raise ValueError(f"routing must have shape {(b, t, n_moe, k)} = [B, T, L_moe, k], got {tuple(routing.shape)}")
    if cache is not None:
      if segment_ids is not None:
        raise ValueError("segment_ids cannot be combined with cache; use kv_mask for cached calls")
      if cache_index is None:
        raise ValueError("cache_index is required with cache")
      want = (cfg.num_layers, b, cache.max_len, cfg.num_kv_heads, cfg.head_dim)
      if tuple(cache.k.shape) != want or tuple(cache.v.shape) != want:
        raise ValueError(f"cache.k/v must have shape {want} = [L, B, S, K, D], got {tuple(cache.k.shape)}")
      if kv_mask is not None and tuple(kv_mask.shape) != (b, cache.max_len):
        raise ValueError(f"kv_mask must have shape {(b, cache.max_len)}, got {tuple(kv_mask.shape)}")
    elif cache_index is not None or kv_mask is not None:
      raise ValueError("cache_index / kv_mask need a cache")
    if prefix_groups is not None:
      if cache is not None or segment_ids is not None or positions is None:
        raise ValueError("prefix_groups needs explicit positions and no cache / segment_ids")
      if n_moe:
        raise ValueError("prefix_groups is not supported for MoE models (routing is per sequence)")
      prefix_groups.split(t)  # validates the row width
      if prefix_groups.common_len and b != 1:
        raise ValueError(f"prefix_groups with common_len={prefix_groups.common_len} takes one row [1, T], got {b} rows")

    # Positions and masks.
    if cache is not None:
      cache_index = jnp.asarray(cache_index, jnp.int32)
      if positions is None:
        positions = jnp.broadcast_to(cache_index + jnp.arange(t, dtype=jnp.int32), (b, t))
    elif positions is None:  # (prefix_groups requires positions)
      positions = (segment_positions(segment_ids) if segment_ids is not None
                   else jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t)))
    base, sliding_mask = attention_masks(cfg, b, t, cache_len=None if cache is None else cache.max_len,
                                         cache_index=cache_index, kv_mask=kv_mask, segment_ids=segment_ids,
                                         prefix_groups=prefix_groups)
    rope = rope_tables(positions, cfg)

    x = self.embed_tokens(tokens)
    ids_all, probs_all = [], []
    moe_i = 0
    k_all = v_all = None
    if cache is not None:
      k_all, v_all = cache.k, cache.v
    if cfg.scan_layers:
      x, ids_all, probs_all, k_all, v_all = self._scanned_layers(x, rope, base, sliding_mask, routing,
                                                                 k_all, v_all, cache_index)
    for i, block in enumerate(() if cfg.scan_layers else self.layers):
      mask = sliding_mask if block.sliding else base
      cos, sin = rope[block.sliding]
      r = None
      if routing is not None and block.is_moe:
        r = routing[:, :, moe_i]
      if cache is not None:
        x, ids, probs, k_all, v_all = block.cached(x, cos, sin, mask, k_all, v_all, i, cache_index, r)
      elif cfg.remat != "none":
        if isinstance(mask, PrefixGroups):  # static: closed over, not a remat argument
          fn = nnx.remat(_block_with_static_mask(mask), policy=_REMAT_POLICIES[cfg.remat])
          x, ids, probs = fn(block, x, cos, sin, r)
        else:
          fn = nnx.remat(_call_block, policy=_REMAT_POLICIES[cfg.remat])
          x, ids, probs = fn(block, x, cos, sin, mask, r)
      else:
        x, ids, probs = block(x, cos, sin, mask, r)
      if block.is_moe:
        ids_all.append(ids)
        probs_all.append(probs)
        moe_i += 1
    hidden = self.final_norm(x)

    routing_out, aux = None, jnp.zeros((), jnp.float32)
    if ids_all:
      routing_out = jnp.stack(ids_all, axis=2)  # [B, T, L_moe, k]
      if cache is None:
        valid = (jnp.ones((b, t), jnp.float32) if segment_ids is None
                 else (segment_ids != 0).astype(jnp.float32))
      else:
        valid = jnp.ones((b, t), jnp.float32)
      aux = load_balancing_loss(routing_out, jnp.stack(probs_all, axis=2), valid, cfg.num_experts, batch_load)
    return ModelOutput(
        hidden=hidden,
        logits=self.logits(hidden) if return_logits else None,
        cache=KVCache(k_all, v_all) if cache is not None else None,
        routing=routing_out,
        aux_loss=aux,
    )


def expert_load(ids, valid, num_experts: int):
  """``(f [E], R)``: the share of (token, layer) top-k assignments routed to each expert,
  ``f_e = sum_{b,t,l,j} valid 1[ids = e] / R``, and ``R = L sum valid`` (``ids [B, T, L, k]``,
  ``valid [B, T]``). No gradient flows through ``f`` (it counts ids)."""
  rows = jnp.maximum(jnp.sum(valid) * ids.shape[2], 1.0)
  w = valid[:, :, None, None, None]
  counts = jnp.sum(jax.nn.one_hot(ids, num_experts, dtype=jnp.float32) * w, axis=(0, 1, 2, 3))
  return counts / rows, rows


def load_balancing_loss(ids, probs, valid, num_experts: int, batch_load=None):
  """Switch load-balancing loss pooled over MoE layers (as Hugging Face).

  ``ids [B, T, L, k]``, ``probs [B, T, L, E]``, ``valid [B, T]``:
  ``f_e = sum_{b,t,l,j} valid 1[ids = e] / R``, ``P_e = sum valid probs_e / R`` with
  ``R = L sum valid``; loss ``= E sum_e f_e P_e``.

  Micro-batching: with ``batch_load = (f, R)`` = :func:`expert_load` of a batch
  whose slice these rows are, the result is the slice's share of that batch's loss,
  ``E sum_e f_e (sum_slice valid probs_e) / R``. ``f`` is a constant and the batch's
  ``P_e`` is the sum of its slices' ``(sum_slice valid probs_e) / R``, so the shares
  of the slices sum to the batch's loss, and their gradients to its gradient.
  """
  f, rows = expert_load(ids, valid, num_experts) if batch_load is None else batch_load
  psum = jnp.sum(probs * valid[:, :, None, None], axis=(0, 1, 2))
  return num_experts * jnp.sum(f * (psum / rows))


def _kernel_fn(model=None):
  """``model.head_logprob_fn`` when set, else ``rljax.kernels.logprob_and_entropy``."""
  fn = getattr(model, "head_logprob_fn", None)
  if fn is not None:
    return fn
  from rljax.kernels import logprob_and_entropy  # pylint: disable=import-outside-toplevel
  return logprob_and_entropy


def policy_outputs(model: Transformer, tokens, *, positions=None, segment_ids=None, temperature=1.0,
                   routing=None, impl: str = "auto", shared_prefix_len: int = 0,
                   group_size: int = 1, batch_load=None, prompt_scores: bool = True,
                   common_prefix_len: int = 0) -> PolicyOutputs:
  """Per-token log-probs and entropies of ``tokens`` under ``model`` (never full logits).

  ``logp[b, t] = log softmax(z_{b, t-1} / temperature)[tokens[b, t]]`` and
  ``entropy[b, t] = H(softmax(z_{b, t-1} / temperature))`` with
  ``z = softcap(hidden @ lm_head_weight())``, computed by
  ``rljax.kernels.logprob_and_entropy`` (or ``model.head_logprob_fn``) from the hidden states; column 0 (no
  context) is 0, and so is every position whose token starts a new segment
  or is padding (``segment_ids`` 0). ``routing`` (``[B, T, L_moe, k]``) is
  replayed when given; the routing used is returned. ``aux_loss`` is the load
  balancing loss weighted by ``cfg.router_aux_loss_coef`` (0 when dense).

  Critic values (models with ``cfg.value_head``, else ``values = None``) are
  aligned like ``logp``: ``values[b, t] = V(hidden[b, t-1])`` is the value of
  the state *before* token ``t`` (the state in which ``tokens[b, t]`` was
  chosen), so ``values`` lines up with the ``loss_mask`` of completion tokens;
  column 0 and segment starts / padding are 0 as for ``logp``. ``temperature``
  does not affect them.

  Shared prompts (GRPO-style groups): with ``shared_prefix_len = Tp > 0`` the
  caller promises that every ``group_size`` consecutive rows hold the same
  first ``Tp`` tokens (and positions). The prompt is then run once per group
  (the grouped layout of :class:`rljax.models.PrefixGroups`) and its
  continuations attend to its keys/values, so the prompt's forward and
  backward cost is paid once instead of ``group_size`` times. The result
  equals the ungrouped call up to float summation order (tested); prompt
  positions' outputs are computed once and repeated over the group. Dense
  models, no ``segment_ids``/``routing``; a violated promise is not detected
  under ``jit`` (each group's first row's prompt is used for the whole group).

  With ``common_prefix_len = C`` (``1 <= C < Tp``) the caller also promises
  that *every* row holds the same first ``C`` tokens (a system prompt, the chat
  template's header): they are run once for the whole batch, and each group's
  prompt after them once per group (``PrefixGroups.common_len``; the whole
  batch is then one row of the model's input, which a batch sharded over
  devices would have to gather: the trainer uses it on one device only). The
  same equality up to float summation order holds (tested); a violated promise
  is not detected under ``jit`` either (row 0's first ``C`` tokens are used).

  Args:
    model: a :class:`Transformer`.
    tokens: ``[B, T]`` int.
    positions: ``[B, T]`` int or None (see :meth:`Transformer.__call__`).
    segment_ids: ``[B, T]`` int or None (packing; 0 = padding).
    temperature: scalar (float or traced array).
    routing: ``[B, T, L_moe, k]`` int or None.
    impl: kernel implementation passed to ``logprob_and_entropy``.
    shared_prefix_len: ``Tp``, 0 (off) or ``1 <= Tp < T``.
    group_size: ``G``, rows per group sharing the prefix (``B % G == 0``).
    batch_load: MoE: the expert load of the batch these rows are a micro-batch of
      (see :meth:`Transformer.__call__`); ``aux_loss`` is then this slice's share.
    prompt_scores: with ``shared_prefix_len``: ``False`` scores only the
      continuation columns ``[Tp, T)``; the shared prompt's columns ``[1, Tp)`` of
      ``logp`` / ``entropy`` / ``values`` are then 0 (the LM head and its
      log-softmax skip ``P * (Tp - 1)`` rows). For a caller whose every reader
      masks the prompt out, as the trainer's losses and forwards do
      (``loss_mask`` = completion tokens). Ignored without a shared prefix.
    common_prefix_len: ``C``, 0 (off) or ``1 <= C < shared_prefix_len``.
  """
  if shared_prefix_len:
    return _grouped_policy_outputs(model, tokens, positions, temperature, impl, shared_prefix_len, group_size,
                                   segment_ids, routing, prompt_scores, common_prefix_len)
  if common_prefix_len:
    raise ValueError("common_prefix_len needs shared_prefix_len (the grouped layout it extends)")
  out = model(tokens, positions, segment_ids=segment_ids, routing=routing, batch_load=batch_load)
  b, t = tokens.shape
  h = out.hidden[:, :-1].reshape(b * (t - 1), -1)
  targets = tokens[:, 1:].reshape(-1)
  mask = None
  if segment_ids is not None:
    mask = ((segment_ids[:, 1:] == segment_ids[:, :-1]) & (segment_ids[:, 1:] != 0)).reshape(-1)
  logp, ent = _kernel_fn(model)(h, model.lm_head_weight(), targets, temperature=temperature, mask=mask,
                           soft_cap=model.cfg.final_logit_softcap, impl=impl)
  zeros = jnp.zeros((b, 1), jnp.float32)
  logp = jnp.concatenate([zeros, logp.reshape(b, t - 1).astype(jnp.float32)], axis=1)
  ent = jnp.concatenate([zeros, ent.reshape(b, t - 1).astype(jnp.float32)], axis=1)
  values = None
  if model.value_head is not None:
    v = model.value(out.hidden[:, :-1])  # [B, T-1]: V of the state before tokens[:, 1:]
    if mask is not None:
      v = jnp.where(mask.reshape(b, t - 1), v, 0.0)
    values = jnp.concatenate([zeros, v], axis=1)
  aux = None
  if out.routing is not None:
    aux = model.cfg.router_aux_loss_coef * out.aux_loss
  return PolicyOutputs(logp=logp, entropy=ent, routing=out.routing, values=values, aux_loss=aux)


def _grouped_policy_outputs(model, tokens, positions, temperature, impl, tp: int, g: int, segment_ids, routing,
                            prompt_scores: bool = True, c: int = 0):
  """:func:`policy_outputs` over the grouped shared-prefix layout ``[P, Tp + G * Tc]`` (with ``c`` common
  columns: one row, ``[1, c + P * (Tp - c + G * Tc)]``)."""
  b, t = tokens.shape
  if not (isinstance(tp, numbers.Integral) and 1 <= tp < t):
    raise ValueError(f"shared_prefix_len must be an int in [1, T) = [1, {t}), got {tp!r}")
  if not (isinstance(g, numbers.Integral) and g >= 1 and b % g == 0):
    raise ValueError(f"group_size must be a positive int dividing the batch B={b}, got {g!r}")
  tp, g = int(tp), int(g)
  if not (isinstance(c, numbers.Integral) and 0 <= c < tp):
    raise ValueError(f"common_prefix_len must be an int in [0, shared_prefix_len) = [0, {tp}), got {c!r}")
  c = int(c)
  if segment_ids is not None or routing is not None:
    raise ValueError("shared_prefix_len cannot be combined with segment_ids or routing")
  p, tc = b // g, t - tp
  if positions is None:
    positions = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t))

  def grouped(x):  # [B, T] -> [P, Tp - c + G * Tc]: group's prompt once, then its G continuations
    return jnp.concatenate([x[::g, c:tp], x[:, tp:].reshape(p, g * tc)], axis=1)

  groups = PrefixGroups(tp - c, g, common_len=c, num_groups=p)
  if c:  # the common columns once, then the P grouped rows, as one row
    def flat(x):
      return jnp.concatenate([x[0, :c], grouped(x).reshape(-1)])[None]
    full = model(flat(tokens), flat(positions), prefix_groups=groups).hidden[0]
    h_dim = full.shape[-1]
    hid = full[c:].reshape(p, -1, h_dim)
    h_pre = jnp.concatenate([jnp.broadcast_to(full[None, :c], (p, c, h_dim)), hid[:, :tp - c]], axis=1)
  else:
    hid = model(grouped(tokens), grouped(positions), prefix_groups=groups).hidden
    h_dim = hid.shape[-1]
    h_pre = hid[:, :tp]  # [P, Tp, H]
  h_cont = hid[:, tp - c:].reshape(p, g, tc, h_dim)
  # scores of continuation column t come from the hidden state before it: the prompt's last
  # column for t = 0, the continuation's own column t - 1 after that
  h_cont = jnp.concatenate([jnp.broadcast_to(h_pre[:, None, -1:], (p, g, 1, h_dim)), h_cont[:, :, :-1]], axis=2)
  rows_pre = p * (tp - 1) if prompt_scores else 0  # the prompt's own scores: once per group, or none
  h = h_cont.reshape(b * tc, h_dim)
  targets = tokens[:, tp:].reshape(-1)
  if prompt_scores:
    h = jnp.concatenate([h_pre[:, :-1].reshape(rows_pre, h_dim), h], axis=0)
    targets = jnp.concatenate([tokens[::g, 1:tp].reshape(-1), targets])
  logp, ent = _kernel_fn(model)(h, model.lm_head_weight(), targets, temperature=temperature,
                           soft_cap=model.cfg.final_logit_softcap, impl=impl)

  def ungroup(x):  # kernel rows -> [B, T] (prompt columns repeated over the group)
    x = x.astype(jnp.float32)
    pre = (jnp.repeat(x[:rows_pre].reshape(p, tp - 1), g, axis=0) if prompt_scores
           else jnp.zeros((b, tp - 1), jnp.float32))
    return jnp.concatenate([jnp.zeros((b, 1), jnp.float32), pre, x[rows_pre:].reshape(b, tc)], axis=1)

  values = ungroup(model.value(h)) if model.value_head is not None else None
  return PolicyOutputs(logp=ungroup(logp), entropy=ungroup(ent), values=values)


def with_value_head(model: Transformer) -> Transformer:
  """A critic built from ``model``: its trunk weights copied and a fresh zero :class:`ValueHead`.

  Returns a new :class:`Transformer` with ``cfg.replace(value_head=True)``
  whose every trunk parameter (embedding, layers, final norm, LM head, LoRA
  adapters and their merged state) is a copy of ``model``'s (new buffers: the
  two models can be updated, donated and checkpointed independently) and whose
  value head is zero, so ``V = 0`` everywhere at the start. Used for a separate
  critic initialised from the SFT policy (PPO with a learned critic,
  arXiv:1707.06347; verl / OpenRLHF initialise the critic from the actor's
  checkpoint) and for a shared-trunk actor-critic. A value head already on
  ``model`` is not copied (the new one is fresh). Copied arrays keep their
  placement; the new head is on the default device (``shard_state`` places it).
  """
  if not isinstance(model, Transformer):
    raise ValueError(f"model must be a Transformer, got {type(model).__name__}")
  cfg = model.cfg.replace(value_head=True)
  graphdef, abstract = nnx.split(nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0))))
  source = {tuple(k): v for k, v in nnx.to_flat_state(nnx.state(model))}
  flat = []
  for path, var in nnx.to_flat_state(abstract):
    path = tuple(path)
    if path[0] == "value_head":
      var.set_value(jnp.zeros(var.shape, var.dtype))
    elif path in source:
      var.set_value(jnp.array(source[path][...], copy=True))
    else:
      raise ValueError(f"internal: {'.'.join(map(str, path))} has no counterpart in the source model")
    flat.append((path, var))
  critic = nnx.merge(graphdef, nnx.from_flat_state(flat))
  for (_, src), (_, dst) in zip(lora_modules(model), lora_modules(critic)):
    dst.lora_merged = src.lora_merged
  return critic


def convert_layout(model: Transformer, scan_layers: bool, *, copy: bool = True) -> Transformer:
  """A copy of ``model`` with its layers stored the other way: stacked per :func:`layer_runs` run
  (``scan_layers=True``, ``layer_stacks``) or one :class:`Block` per layer (``False``, ``layers``).

  Returns a new :class:`Transformer` with ``cfg.replace(scan_layers=scan_layers)`` and the same
  parameter values (new buffers; stacking is ``jnp.stack`` over the layers of a run, unstacking its
  slices), LoRA adapters and merge flags included. Both layouts compute the same function (the
  scanned and unrolled forward agree to float32 rounding). Use it to load a checkpoint saved with
  the other layout: restore into a model of that layout, then convert. ``copy=False`` (inside ``jit``)
  reuses the arrays that need no stacking or slicing: the sampler's decode loop runs on a per-layer
  view of a stacked model, sliced once before the loop (slicing the stacks in every step copies them).
  """
  if not isinstance(model, Transformer):
    raise ValueError(f"model must be a Transformer, got {type(model).__name__}")
  if not isinstance(scan_layers, bool):
    raise ValueError(f"scan_layers must be a bool, got {scan_layers!r}")
  cfg = model.cfg.replace(scan_layers=scan_layers)
  blocks = model.blocks()
  if scan_layers:
    layer_mods = {("layer_stacks", r): stack_blocks(blocks[a:b]) for r, (a, b) in enumerate(layer_runs(cfg))}
  else:
    layer_mods = {("layers", i): b for i, b in enumerate(blocks)}
  source = {tuple(k): v for k, v in nnx.to_flat_state(nnx.state(model)) if k[0] not in ("layers", "layer_stacks")}
  for prefix, mod in layer_mods.items():
    source.update({prefix + tuple(k): v for k, v in nnx.to_flat_state(nnx.state(mod))})
  graphdef, abstract = nnx.split(nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0))))
  flat = []
  for path, var in nnx.to_flat_state(abstract):
    src = source.pop(tuple(path), None)
    if src is None or tuple(src.shape) != tuple(var.shape):
      raise ValueError(f"internal: {'.'.join(map(str, path))} has no counterpart of shape {var.shape} in the source")
    var.set_value(jnp.array(src.get_value(), copy=True) if copy else src.get_value())
    flat.append((path, var))
  if source:
    raise ValueError(f"internal: source parameters without a place in the converted model: {sorted(source)[:4]}")
  out = nnx.merge(graphdef, nnx.from_flat_state(flat))
  targets = dict(lora_modules(out))
  for prefix, mod in layer_mods.items():
    for mpath, lin in lora_modules(mod):
      targets[prefix + mpath].lora_merged = lin.lora_merged
  return out
