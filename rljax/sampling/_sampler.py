"""Jitted prefill + ``lax.while_loop`` decode over a preallocated KV cache.

Layout (what comes out): every sequence is LEFT-aligned and contiguous,
``tokens[b] = prompt + completion (+ appended + completion ...) + padding``,
and the RoPE position of ``tokens[b, t]`` is ``t``. The trainer therefore
scores a rollout with ``policy_outputs(model, rollout.tokens)`` (positions
``arange(T)``, the default) and masks with ``completion_mask``.

Cache bookkeeping (how it is produced): the model writes all rows of a call
at one shared slot (``cache_index`` is a scalar), so cache *slots* and token
*positions* are decoupled: positions are passed explicitly and ``kv_mask``
marks which slots hold a real key of that row. A prefill chunk is
right-aligned in its length bucket (left padding), so for ``generate`` every
row's prompt ends at slot ``bucket - 1`` and decode token ``s`` of every row
sits at slot ``bucket + s``: slot distance equals position distance (sliding
windows see the right keys). Rotary attention depends only on the positions
given, so the masked slot gaps change nothing numerically except summation
order. A ``resume`` chunk is right-aligned the same way after the slots
already used; rows with shorter appended chunks leave masked gaps (exact for
full attention; with a sliding window those rows see ``pad`` fewer keys).
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
from typing import Any, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from rljax.parallel import with_logical_constraint
from rljax.sampling import _truncation
from rljax.sampling._config import FinishReason, SamplerConfig
from rljax.types import Rollout

Array = jax.Array

__all__ = ["SamplerState", "compact", "feed_rows", "generate", "restart", "resume", "rewind", "sampling_step"]

# Logical axes of the KV cache (``rljax.parallel.DEFAULT_RULES``): rows over the batch mesh axes,
# KV heads over ``tensor``; the stacked ``[L, B, S, K, D]`` cache and the decode loop's per-layer
# head-major ``[B, K, S, D]`` arrays.
CACHE_AXES = ("layers", "batch", "cache_seq", "kv_heads", "head_dim")
LAYER_CACHE_AXES = ("batch", "kv_heads", "cache_seq", "head_dim")


def _params_mesh(params):
  """The mesh the parameters are sharded over (None: one device / unsharded)."""
  for x in jax.tree.leaves(params):
    sh = getattr(x, "sharding", None)
    if isinstance(sh, jax.sharding.NamedSharding) and sh.mesh.size > 1:
      return sh.mesh
  return None


def _constrain_cache(cache, mesh):
  if mesh is None:
    return cache
  return type(cache)(with_logical_constraint(cache.k, CACHE_AXES, mesh),
                     with_logical_constraint(cache.v, CACHE_AXES, mesh))


def _constrain_layers(layers, mesh):
  if mesh is None:
    return layers
  return tuple(with_logical_constraint(x, LAYER_CACHE_AXES, mesh) for x in layers)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class SamplerState:
  """Everything needed to continue a batch of sequences (pass to ``resume``).

  ``B`` sequences, ``S = config.cache_size`` slots/positions. The last sampled
  token of each row (``pending``) is not in the cache yet; ``resume`` feeds it
  together with the appended tokens. Arrays are device arrays; treat the
  state as consumed once passed to ``resume``.

  Attributes:
    cache: model ``KVCache`` (``[L, B, S, K, D]`` leaves).
    kv_mask: ``[B, S]`` bool, slots holding a real key of that row.
    slot: int32 scalar, first free cache slot (shared by all rows).
    pending: ``[B]`` int32 last sampled token (position ``length - 1``).
    length: ``[B]`` int32 tokens in the sequence, including ``pending``.
    tokens, prompt_mask, completion_mask, logp_behavior, logp_sampling:
      ``[B, S]`` left-aligned sequence buffers (see ``Rollout``).
    entropy: ``[B, S]`` float32 or None. routing: ``[B, S, L, k]`` or None.
    finish_reason: ``[B]`` int32 ``FinishReason`` of the last call.
    group_id, sample_index: ``[B]`` int32 (prompt id, index within group).
    policy_version: ``[B]`` int32. stop_tokens: ``[B, W]`` int32 (-1 = none).
  """
  cache: Any
  kv_mask: Array
  slot: Array
  pending: Array
  length: Array
  tokens: Array
  prompt_mask: Array
  completion_mask: Array
  logp_behavior: Array
  logp_sampling: Array
  finish_reason: Array
  group_id: Array
  sample_index: Array
  policy_version: Array
  stop_tokens: Array
  entropy: Optional[Array] = None
  routing: Optional[Array] = None

  def replace(self, **changes) -> "SamplerState":
    return dataclasses.replace(self, **changes)

  def to_rollout(self, length: Optional[int] = None) -> Rollout:
    """The sequences as a ``Rollout`` (first ``length`` columns; default all S)."""
    cut = (lambda x: x) if length is None else (lambda x: x[:, :length])
    return Rollout(
        tokens=cut(self.tokens), prompt_mask=cut(self.prompt_mask),
        completion_mask=cut(self.completion_mask), logp_behavior=cut(self.logp_behavior),
        group_id=self.group_id, policy_version=self.policy_version,
        logp_sampling=cut(self.logp_sampling),
        entropy_behavior=None if self.entropy is None else cut(self.entropy),
        routing=None if self.routing is None else cut(self.routing),
        finish_reason=self.finish_reason)


# ----------------------------------------------------------------------------
# Per-step sampling (pure, jittable).


def _logits(model, hidden: Array) -> Array:
  """Untempered float32 logits ``softcap(hidden @ W)`` exactly as the fused
  log-prob kernel computes them (``[..., H] -> [..., V]``)."""
  raw = jnp.dot(hidden, model.lm_head_weight(), preferred_element_type=jnp.float32)
  raw = raw.astype(jnp.float32)
  cap = model.cfg.final_logit_softcap
  if cap is not None:
    raw = cap * jnp.tanh(raw / cap)
  return raw


def sampling_step(logits: Array, keys: Array, temperature: Array, top_k: Array,
                  top_p: Array, min_p: Array, *, greedy: bool = False,
                  return_entropy: bool = True):
  """Samples one token per row and its log-probs.

  ``x ~ softmax(trunc(z / T))`` by Gumbel-max (``argmax(trunc(z/T) + g)``,
  ``g ~ Gumbel(0, 1)`` drawn from the row's own key), which is an exact draw
  from the truncated tempered distribution; ``greedy``: ``x = argmax z``.

  Args:
    logits: ``[B, V]`` untempered float32 logits z.
    keys: ``[B]`` PRNG keys (one per row).
    temperature, top_p, min_p: ``[B]`` float32; top_k: ``[B]`` int32.
  Returns:
    ``(token [B] int32, logp_behavior [B] = log softmax(z)[x], logp_sampling
    [B] = log softmax(trunc(z / T))[x] (0 when greedy), entropy [B] or None)``.
  """
  z = logits.astype(jnp.float32)
  logp_all = jax.nn.log_softmax(z, axis=-1)
  entropy = None
  if return_entropy:
    entropy = -jnp.sum(jnp.exp(logp_all) * logp_all, axis=-1)
  if greedy:
    tok = _argmax_last(z)
    logp_s = jnp.zeros(z.shape[:1], jnp.float32)
  else:
    zt = _truncation.truncate_logits(z, temperature, top_k, top_p, min_p)
    g = jax.vmap(lambda k: jax.random.gumbel(k, z.shape[-1:], jnp.float32))(keys)
    tok = _argmax_last(zt + g)
    logp_t = jax.nn.log_softmax(zt, axis=-1)
    logp_s = jnp.take_along_axis(logp_t, tok[:, None], axis=-1)[:, 0]
  logp_b = jnp.take_along_axis(logp_all, tok[:, None], axis=-1)[:, 0]
  return tok, logp_b, logp_s, entropy


def _argmax_last(x: Array) -> Array:
  """``argmax(x, -1)`` as int32 (first index among ties) from two plain reductions (max, then
  the smallest index attaining it): XLA:CPU runs the (value, index) reduce of ``jnp.argmax``
  unvectorised, ~2x slower per decode step on ``[64, 512]``. A row containing NaN (never the
  case for finite logits) gives the last index instead of the first NaN's."""
  v = x.shape[-1]
  m = jnp.max(x, axis=-1, keepdims=True)
  idx = jnp.min(jnp.where(x == m, jnp.arange(v, dtype=jnp.int32), v), axis=-1)
  return jnp.minimum(idx, v - 1)


# ----------------------------------------------------------------------------
# Jitted core.


def _set_rows(buf: Array, pos: Array, values: Array, valid: Array) -> Array:
  """``buf[b, pos[b, t]] = values[b, t]`` where ``valid[b, t]`` (``pos`` [B, T])."""
  b_idx = jnp.broadcast_to(jnp.arange(buf.shape[0])[:, None], pos.shape)
  safe = jnp.where(valid, pos, buf.shape[1])  # out of range -> dropped
  return buf.at[b_idx, safe].set(values.astype(buf.dtype), mode="drop")


def _prefill(model, cache, kv_mask, slot, chunk, chunk_len, base_pos, pad_id):
  """Feeds each row's left-aligned ``chunk[b, :chunk_len[b]]`` (positions
  ``base_pos[b] + t``) right-aligned into slots ``[slot, slot + Lb)``.

  Returns ``(cache, kv_mask, routing_left [B, Lb, ...] or None)`` where
  ``routing_left[b, t]`` belongs to ``chunk[b, t]``. The hidden states are not
  used: the last token of every sequence is fed by the decode loop, whose
  logits are the ones sampled from.
  """
  lb = chunk.shape[1]
  if lb == 0:  # nothing to prefill (bucket of 1)
    return cache, kv_mask, None
  t = jnp.arange(lb)
  shift = lb - chunk_len
  src = t[None, :] - shift[:, None]  # right-aligned column -> chunk index
  valid = src >= 0
  src_c = jnp.clip(src, 0, lb - 1)
  tok = jnp.where(valid, jnp.take_along_axis(chunk, src_c, axis=1), pad_id)
  pos = base_pos[:, None] + src_c
  kv_mask = jax.lax.dynamic_update_slice(kv_mask, valid, (0, slot))
  out = model(tok.astype(jnp.int32), pos.astype(jnp.int32), cache=cache,
              cache_index=slot, kv_mask=kv_mask, return_logits=False)
  routing = out.routing
  if routing is not None:  # back to the left-aligned chunk order
    dst = jnp.clip(t[None, :] + shift[:, None], 0, lb - 1)
    routing = jnp.take_along_axis(routing, dst.reshape(dst.shape + (1,) * (routing.ndim - 2)), axis=1)
  return out.cache, kv_mask, routing


def _repeat(tree, n: int):
  if n == 1:
    return tree
  return jax.tree.map(lambda x: jnp.repeat(x, n, axis=0), tree)


def _to_layers(cache, mesh):
  """``KVCache`` ``[L, B, S, K, D]`` -> ``(ks, vs)``: ``L``-tuples of head-major ``[B, K, S, D]``
  arrays, the decode loop's layout (one array per layer: slicing a layer out of the stacked cache
  would copy it every step; kv head before slot: no per-step transpose)."""
  split = lambda x: _constrain_layers(tuple(x[i].transpose(0, 2, 1, 3) for i in range(x.shape[0])), mesh)
  return split(cache.k), split(cache.v)


def _from_layers(layers, cache_type):
  """Inverse of :func:`_to_layers`."""
  ks, vs = layers
  return cache_type(jnp.stack(ks).transpose(0, 1, 3, 2, 4), jnp.stack(vs).transpose(0, 1, 3, 2, 4))


def _fit_slots(st: SamplerState, size: int, mesh) -> SamplerState:
  """``st`` with its per-layer cache and ``kv_mask`` zero-padded to ``size`` slots (never shrunk)."""
  ks, vs = st.cache
  extra = size - ks[0].shape[2]
  if extra <= 0:
    return st
  pad = lambda layers: _constrain_layers(tuple(jnp.pad(x, ((0, 0), (0, 0), (0, extra), (0, 0))) for x in layers),
                                         mesh)
  return st.replace(cache=(pad(ks), pad(vs)), kv_mask=jnp.pad(st.kv_mask, ((0, 0), (0, extra))))


def decode_phase_ends(first_slot: int, max_new: int, phases: int) -> tuple:
  """Cache sizes of the decode loop's phases: phase ``i`` of ``k`` runs while the slot it writes is
  below ``first_slot + ceil(i * max_new / k)``, attending only that many slots (``k`` =
  ``min(phases, max_new // 16)``, at least 1: a phase is one more compiled loop body)."""
  k = max(1, min(phases, max_new // 16))
  return tuple(sorted({first_slot + -(-i * max_new // k) for i in range(1, k + 1)}))


def _per_row_keys(key) -> bool:
  """Whether ``key`` holds one PRNG key per row (``[B]`` typed keys or ``[B, 2]`` raw ``uint32`` keys)."""
  typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
  return key.ndim == (1 if typed else 2)


def _seq_keys(key, group_id: Array, sample_index: Array) -> Array:
  """``[B]`` row streams ``fold_in(fold_in(key_b, group_id[b]), sample_index[b])``, where ``key_b`` is ``key``
  (one key for all rows) or ``key[b]`` (one key per row)."""
  f = lambda k, g, i: jax.random.fold_in(jax.random.fold_in(k, g), i)
  if _per_row_keys(key):
    return jax.vmap(f)(key, group_id, sample_index)
  return jax.vmap(lambda g, i: f(key, g, i))(group_id, sample_index)


def _decode(model, st: SamplerState, active, sp, max_new, key, greedy: bool, mesh=None,
            phase_ends: Optional[tuple] = None) -> SamplerState:
  """Loops ``feed pending token -> logits -> sample`` until every active row
  has sampled a stop token or ``max_new`` tokens (the last sampled token of a
  row stays pending: it is never fed, so no forward pass is wasted).

  ``st.cache`` is in the per-layer layout of :func:`_to_layers` (in and out).
  ``phase_ends`` (static, increasing; see :func:`decode_phase_ends`): the loop
  is split into one loop per entry ``e``, which runs while the slot written is
  below ``e`` over a cache padded to ``e`` slots, so early steps do not read
  the empty tail of the cache (same values: masked slots get zero weight).
  The cache comes out with ``phase_ends[-1]`` slots (at least its input size).
  ``None``: one loop over the cache as given.
  """
  temperature, top_k, top_p, min_p = sp
  if model.cfg.scan_layers:  # layers stored stacked: slice them once here, not in every step of the loop
    from rljax.models import convert_layout  # pylint: disable=import-outside-toplevel
    model = convert_layout(model, False, copy=False)
  seq_keys = _seq_keys(key, st.group_id, st.sample_index)
  b = st.pending.shape[0]
  want_entropy = st.entropy is not None

  def cond(carry):
    _, done, _ = carry
    return ~jnp.all(done)

  def body(carry):
    st, done, n_gen = carry
    act = ~done
    a2 = act[:, None]
    # Feed each active row's pending token (position length - 1) at the shared slot.
    kv_mask = jax.lax.dynamic_update_slice(st.kv_mask, a2, (0, st.slot))
    fed_pos = (st.length - 1)[:, None]
    ks, vs = st.cache
    hidden, ks, vs, routing = model.decode_step(st.pending[:, None], fed_pos, ks, vs, st.slot, kv_mask)
    ks, vs = _constrain_layers(ks, mesh), _constrain_layers(vs, mesh)
    upd = {}
    if st.routing is not None and routing is not None:
      upd["routing"] = _set_rows(st.routing, fed_pos, routing, a2)
    logits = _logits(model, hidden[:, 0])
    # Sample the token at position ``length``.
    pos = st.length
    keys = jax.vmap(jax.random.fold_in)(seq_keys, pos)
    tok, lb, ls, ent = sampling_step(logits, keys, temperature, top_k, top_p, min_p,
                                     greedy=greedy, return_entropy=want_entropy)
    p2 = pos[:, None]
    upd.update(
        tokens=_set_rows(st.tokens, p2, tok[:, None], a2),
        completion_mask=_set_rows(st.completion_mask, p2, jnp.ones_like(a2), a2),
        logp_behavior=_set_rows(st.logp_behavior, p2, lb[:, None], a2),
        logp_sampling=_set_rows(st.logp_sampling, p2, ls[:, None], a2))
    if want_entropy:
      upd["entropy"] = _set_rows(st.entropy, p2, ent[:, None], a2)
    n_gen = n_gen + act.astype(jnp.int32)
    hit_stop = act & jnp.any(tok[:, None] == st.stop_tokens, axis=-1)
    hit_len = act & ~hit_stop & (n_gen >= max_new)
    finish = jnp.where(hit_stop, int(FinishReason.STOP_TOKEN),
                       jnp.where(hit_len, int(FinishReason.LENGTH), st.finish_reason))
    st = st.replace(cache=(ks, vs), kv_mask=kv_mask, slot=st.slot + 1,
                    pending=jnp.where(act, tok, st.pending),
                    length=st.length + act.astype(jnp.int32),
                    finish_reason=finish.astype(jnp.int32), **upd)
    return st, done | hit_stop | hit_len, n_gen

  carry = (st, ~active, jnp.zeros((b,), jnp.int32))
  if phase_ends is None:
    return jax.lax.while_loop(cond, body, carry)[0]
  for end in phase_ends:
    carry = (_fit_slots(carry[0], end, mesh),) + carry[1:]
    carry = jax.lax.while_loop(lambda c, end=end: cond(c) & (c[0].slot < end), body, carry)
  return carry[0]


def _empty_buffers(b: int, s: int, want_entropy: bool, routing_shape, routing_dtype):
  f32 = lambda: jnp.zeros((b, s), jnp.float32)
  return dict(
      tokens=jnp.zeros((b, s), jnp.int32), prompt_mask=jnp.zeros((b, s), bool),
      completion_mask=jnp.zeros((b, s), bool), logp_behavior=f32(), logp_sampling=f32(),
      entropy=f32() if want_entropy else None,
      routing=None if routing_shape is None else jnp.zeros((b, s) + routing_shape, routing_dtype))


@functools.partial(jax.jit, static_argnames=("graphdef", "config", "n", "greedy", "mesh", "want_state"))
def _generate_jit(graphdef, params, prompt, prompt_len, prompt_ids, key, sp, stop,
                  max_new, policy_version, *, config, n, greedy, mesh=None, want_state=True):
  """``(state or None, rollout)``; without ``want_state`` the KV cache is never restacked."""
  model = nnx.merge(graphdef, params)
  p, w = prompt.shape  # w = bucket; the prefill chunk is prompt[:, :len - 1]
  lp = w - 1
  s = config.cache_size
  dtype = None if config.cache_dtype is None else jnp.dtype(config.cache_dtype)
  # The prefill fills a cache of only the chunk's slots; it is laid out for decoding below and padded
  # by the decode phases, so the empty slots are never transposed or copied.
  s_pre = max(lp, 1)
  cache = _constrain_cache(model.init_cache(p, s_pre, dtype=dtype), mesh)
  zero = jnp.zeros((), jnp.int32)
  cache, kv_mask, routing = _prefill(
      model, cache, jnp.zeros((p, s_pre), bool), zero, prompt[:, :lp], prompt_len - 1,
      jnp.zeros((p,), jnp.int32), config.pad_id)
  pending = jnp.take_along_axis(prompt, (prompt_len - 1)[:, None], axis=1)[:, 0]
  want_routing = config.return_routing and routing is not None
  bufs = _empty_buffers(p, s, config.return_entropy,
                        routing.shape[2:] if want_routing else None,
                        routing.dtype if want_routing else None)
  t = jnp.arange(w)
  in_prompt = t[None, :] < prompt_len[:, None]
  bufs["tokens"] = bufs["tokens"].at[:, :w].set(jnp.where(in_prompt, prompt, config.pad_id))
  bufs["prompt_mask"] = bufs["prompt_mask"].at[:, :w].set(in_prompt)
  if want_routing:
    in_chunk = (t[None, :lp] < (prompt_len - 1)[:, None])
    bufs["routing"] = bufs["routing"].at[:, :lp].set(
        jnp.where(in_chunk.reshape(in_chunk.shape + (1,) * (routing.ndim - 2)), routing, 0))
  # Broadcast the P prefilled prompts to the B = P * n rows of their groups.
  per_prompt = dict(bufs, kv_mask=kv_mask, length=prompt_len.astype(jnp.int32),
                    group_id=prompt_ids.astype(jnp.int32), stop=stop,
                    policy_version=policy_version, pending=pending, sp=sp)
  rows = _repeat(per_prompt, n)
  # per-layer head-major layout made on the P prompts' s_pre slots, then repeated to the B rows; the
  # decode phases pad it to growing prefixes of the cache (``s`` slots only if the state is returned)
  ks, vs = (_constrain_layers(tuple(_repeat(x, n) for x in layers), mesh) for layers in _to_layers(cache, mesh))
  st = SamplerState(
      cache=(ks, vs), kv_mask=rows["kv_mask"],
      slot=jnp.asarray(lp, jnp.int32),
      pending=rows["pending"], length=rows["length"], tokens=rows["tokens"],
      prompt_mask=rows["prompt_mask"], completion_mask=rows["completion_mask"],
      logp_behavior=rows["logp_behavior"], logp_sampling=rows["logp_sampling"],
      finish_reason=jnp.zeros((p * n,), jnp.int32), group_id=rows["group_id"],
      sample_index=jnp.tile(jnp.arange(n, dtype=jnp.int32), p),
      policy_version=rows["policy_version"], stop_tokens=rows["stop"],
      entropy=rows["entropy"], routing=rows["routing"])
  active = jnp.ones((p * n,), bool)
  ends = decode_phase_ends(lp, config.max_new_tokens, config.decode_phases)
  st = _decode(model, st, active, rows["sp"], max_new, key, greedy, mesh, phase_ends=ends)
  rollout = st.to_rollout(w + config.max_new_tokens)
  if not want_state:
    return None, rollout
  st = _fit_slots(st, s, mesh)
  return st.replace(cache=_from_layers(st.cache, type(cache))), rollout


@functools.partial(jax.jit, static_argnames=("graphdef", "config", "greedy", "mesh"))
def _resume_jit(graphdef, params, st, appended, appended_len, active, key, sp, max_new,
                policy_version, *, config, greedy, mesh=None):
  model = nnx.merge(graphdef, params)
  b, la = appended.shape  # la = bucket - 1 of [pending] + appended
  alen = jnp.where(active, appended_len, 0).astype(jnp.int32)
  # Feed [pending] + appended[:-1] now; appended[-1] becomes the new pending token.
  full = jnp.concatenate([st.pending[:, None], appended.astype(jnp.int32)], axis=1)
  base_pos = st.length - 1  # position of the old pending token
  cache, kv_mask, routing = _prefill(
      model, _constrain_cache(st.cache, mesh), st.kv_mask, st.slot, full[:, :la], alen, base_pos, config.pad_id)
  pending = jnp.take_along_axis(full, alen[:, None], axis=1)[:, 0]
  t = jnp.arange(la)
  app_valid = t[None, :] < alen[:, None]
  app_pos = st.length[:, None] + t[None, :]
  upd = dict(tokens=_set_rows(st.tokens, app_pos, appended, app_valid),
             prompt_mask=_set_rows(st.prompt_mask, app_pos, jnp.ones_like(app_valid), app_valid))
  if st.routing is not None and routing is not None:
    upd["routing"] = _set_rows(st.routing, base_pos[:, None] + t[None, :], routing, app_valid)
  st = st.replace(cache=_to_layers(cache, mesh), kv_mask=kv_mask, slot=st.slot + la, pending=pending,
                  length=st.length + alen, policy_version=policy_version, **upd)
  st = _decode(model, st, active, sp, max_new, key, greedy, mesh)
  return st.replace(cache=_from_layers(st.cache, type(cache))), st.to_rollout()


@functools.partial(jax.jit, static_argnames=("pad_id",))
def _rewind_jit(st: SamplerState, length, *, pad_id: int) -> SamplerState:
  s = st.tokens.shape[1]
  keep = jnp.arange(s)[None, :] < length[:, None]
  # the row's real cache slots, in slot order, hold positions 0, 1, ..., length - 2 (prefill and decode feed a
  # row's tokens in position order at increasing slots); keep the first new_length - 1 of them
  fed = jnp.cumsum(st.kv_mask.astype(jnp.int32), axis=1)
  kv_mask = st.kv_mask & (fed <= (length - 1)[:, None])
  zero = lambda x: None if x is None else jnp.where(keep.reshape(keep.shape + (1,) * (x.ndim - 2)), x, 0).astype(x.dtype)
  pending = jnp.take_along_axis(st.tokens, (length - 1)[:, None], axis=1)[:, 0]
  return st.replace(kv_mask=kv_mask, length=length, pending=pending,
                    tokens=jnp.where(keep, st.tokens, pad_id), prompt_mask=st.prompt_mask & keep,
                    completion_mask=st.completion_mask & keep, logp_behavior=zero(st.logp_behavior),
                    logp_sampling=zero(st.logp_sampling), entropy=zero(st.entropy), routing=zero(st.routing))


def rewind(state: SamplerState, length, *, config: SamplerConfig) -> SamplerState:
  """Cuts row ``b`` of ``state`` back to its first ``length[b]`` tokens, as if it had stopped there.

  Used when the host ends a turn inside what was sampled (a stop string completed before the sampler's stop
  token): the tokens after the cut become padding (masks and log-probs zeroed), their cache slots are masked out
  (``kv_mask``; the slots themselves stay used), and token ``length[b] - 1`` becomes the pending token, so the
  next ``resume`` continues exactly as from a sequence that ended there. Nothing is recomputed.

  Args:
    state: a ``SamplerState`` (consumed).
    length: ``[B]`` ints in ``[1, state.length[b]]`` (``state.length`` leaves the row unchanged).
    config: the ``SamplerConfig`` of the state (its ``pad_id``).
  """
  cur = np.asarray(state.length)
  new = _per_row(length, cur.shape[0], np.int32, "length")
  if np.any(new < 1) or np.any(new > cur):
    bad = int(np.flatnonzero((new < 1) | (new > cur))[0])
    raise ValueError(f"length[{bad}]={int(new[bad])} must be in [1, {int(cur[bad])}] (the row's current length)")
  return _rewind_jit(state, jnp.asarray(new), pad_id=config.pad_id)


@functools.partial(jax.jit, static_argnames=("pad_id",))
def _restart_jit(st: SamplerState, selected, first, *, pad_id: int) -> SamplerState:
  st = _rewind_jit(st, jnp.where(selected, 1, st.length), pad_id=pad_id)
  tokens = st.tokens.at[:, 0].set(jnp.where(selected, first, st.tokens[:, 0]))
  prompt_mask = st.prompt_mask.at[:, 0].set(st.prompt_mask[:, 0] | selected)
  return st.replace(tokens=tokens, prompt_mask=prompt_mask, pending=jnp.where(selected, first, st.pending),
                    completion_mask=st.completion_mask & ~selected[:, None])


def restart(state: SamplerState, rows, first, *, config: SamplerConfig) -> SamplerState:
  """Row ``rows[j]`` of ``state`` starts over as the one-token sequence ``[first[j]]`` (context: ``prompt_mask``).

  Its cached keys are masked out (as ``rewind`` to length 1 does; the slots stay used until ``compact``) and its
  buffers cleared, so a new prefix can be fed to that row alone (``feed_rows`` with the prefix's other tokens)
  while the other rows keep their caches: a multi-turn runner moving one episode to a new context window.

  Args:
    state: a ``SamplerState`` (consumed). rows: distinct row indices. first: one token id per row.
    config: the ``SamplerConfig`` of the state (its ``pad_id``).
  """
  b = state.pending.shape[0]
  rows = [int(r) for r in rows]
  if len(set(rows)) != len(rows) or (rows and (min(rows) < 0 or max(rows) >= b)):
    raise ValueError(f"rows must be distinct row indices in [0, {b}), got {rows}")
  if len(first) != len(rows):
    raise ValueError(f"first must have one token per row ({len(rows)}), got {len(first)}")
  selected, tok = np.zeros((b,), bool), np.zeros((b,), np.int32)
  selected[rows], tok[rows] = True, [int(t) for t in first]
  return _restart_jit(state, jnp.asarray(selected), jnp.asarray(tok), pad_id=config.pad_id)


@jax.jit
def _compact_jit(st: SamplerState) -> SamplerState:
  s = st.kv_mask.shape[1]
  order = jnp.argsort(jnp.where(st.kv_mask, 0, 1), axis=1, stable=True)  # [B, S]: real slots first, in order
  count = jnp.sum(st.kv_mask.astype(jnp.int32), axis=1)
  idx = order[None, :, :, None, None]  # the stacked cache [L, B, S, K, D]
  gather = lambda x: jnp.take_along_axis(x, idx, axis=2)
  cache = type(st.cache)(gather(st.cache.k), gather(st.cache.v))
  kv_mask = jnp.arange(s)[None, :] < count[:, None]
  return st.replace(cache=cache, kv_mask=kv_mask, slot=jnp.max(count).astype(jnp.int32))


def compact(state: SamplerState) -> SamplerState:
  """Moves each row's cached keys to the front of the cache, freeing the slots that masked gaps used.

  Every call feeds all rows at one shared slot counter, so rows that sit out a call (``active=False``), rows
  with shorter appended chunks and ``rewind`` leave masked slots that stay used. Row ``b``'s real slots (its
  ``kv_mask``) keep their order and move to slots ``[0, count_b)``; the counter becomes ``max_b count_b``.
  Positions are the tokens' own (they were given explicitly when the keys were written), so attention sees the
  same keys with the same positions: a full-attention layer gives the same values up to float summation order,
  and a sliding window (which counts valid slots) the same keys. The sequence buffers are per position and stay
  as they are. ``state`` is consumed.
  """
  return _compact_jit(state)


@functools.partial(jax.jit, static_argnames=("graphdef", "pad_id"))
def _feed_rows_jit(graphdef, params, st: SamplerState, rows, appended, appended_len, *, pad_id: int):
  model = nnx.merge(graphdef, params)
  la = appended.shape[1]  # bucket - 1 of [pending] + appended
  pick = lambda x: None if x is None else x[rows]
  full = jnp.concatenate([st.pending[rows][:, None], appended.astype(jnp.int32)], axis=1)
  base_pos = st.length[rows] - 1
  cache = type(st.cache)(st.cache.k[:, rows], st.cache.v[:, rows])
  cache, kv, routing = _prefill(model, cache, st.kv_mask[rows], st.slot, full[:, :la], appended_len, base_pos, pad_id)
  t = jnp.arange(la)
  valid = t[None, :] < appended_len[:, None]
  pos = st.length[rows][:, None] + t[None, :]
  upd = dict(tokens=_set_rows(pick(st.tokens), pos, appended, valid),
             prompt_mask=_set_rows(pick(st.prompt_mask), pos, jnp.ones_like(valid), valid))
  if st.routing is not None and routing is not None:
    upd["routing"] = _set_rows(pick(st.routing), base_pos[:, None] + t[None, :], routing, valid)
  put = lambda x, v: x.at[rows].set(v)
  return st.replace(cache=type(st.cache)(st.cache.k.at[:, rows].set(cache.k), st.cache.v.at[:, rows].set(cache.v)),
                    kv_mask=put(st.kv_mask, kv), slot=st.slot + la,
                    pending=put(st.pending, jnp.take_along_axis(full, appended_len[:, None], axis=1)[:, 0]),
                    length=put(st.length, st.length[rows] + appended_len),
                    **{k: put(getattr(st, k), v) for k, v in upd.items()})


def feed_rows(model, state: SamplerState, rows, appended, *, config: SamplerConfig) -> SamplerState:
  """Appends ``appended[j]`` to row ``rows[j]`` of ``state`` without sampling: a prefill of those rows only.

  ``resume(model, state, appended)`` prefills a ``[B, bucket]`` chunk, every row of the batch, even when only a
  few rows append anything. This feeds each listed row's pending token and ``appended[j][:-1]`` (context:
  ``prompt_mask``) at the shared slot counter and makes ``appended[j][-1]`` its pending token, exactly the
  prefill half of ``resume``, over ``J`` rows (padded to a power of two with other rows that feed nothing). A
  following ``resume`` with nothing appended samples from there. The other rows are untouched (the slots
  used become masked gaps for them; see ``compact``).

  Args:
    model: the model (or ``(graphdef, state)``). state: a ``SamplerState`` (consumed).
    rows: ``J`` distinct row indices. appended: ``J`` non-empty 1-D int sequences.
    config: the ``SamplerConfig`` of the state (its buckets, cache size and ``pad_id``).
  """
  b = state.pending.shape[0]
  rows = [int(r) for r in rows]
  seqs = _ragged(appended, "appended")
  if len(seqs) != len(rows) or not rows:
    raise ValueError(f"rows ({len(rows)}) and appended ({len(seqs)}) must have the same, non-zero length")
  if len(set(rows)) != len(rows) or min(rows) < 0 or max(rows) >= b:
    raise ValueError(f"rows must be distinct row indices in [0, {b}), got {rows}")
  if any(s.size == 0 for s in seqs):
    raise ValueError("appended: every listed row must append at least one token")
  lc = config.bucket(1 + max(s.size for s in seqs), "appended")
  used = int(state.slot)
  if used + lc > config.cache_size:
    raise ValueError(f"appended: {used} used cache slots + chunk bucket {lc} exceed the cache size "
                     f"{config.cache_size}")
  j = min(1 << (len(rows) - 1).bit_length(), b)  # pad with other rows appending nothing (one compile per power)
  rows = rows + [r for r in range(b) if r not in set(rows)][:j - len(rows)]
  seqs = seqs + [np.zeros((0,), np.int32)] * (j - len(seqs))
  app, alen = _pad(seqs, lc - 1, config.pad_id)
  graphdef, params = _split(model)
  return _feed_rows_jit(graphdef, params, state, jnp.asarray(rows, jnp.int32), app, alen, pad_id=config.pad_id)


# ----------------------------------------------------------------------------
# Host-side wrappers: validation, bucketing, padding.


def _split(model):
  if isinstance(model, tuple) and len(model) == 2:
    return model
  return nnx.split(model)


def _ragged(seqs, argname: str) -> list:
  if seqs is None:
    raise ValueError(f"{argname} must be a sequence of token-id sequences, got None")
  out = []
  for i, s in enumerate(seqs):
    a = np.asarray(s)
    if a.ndim != 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
      raise ValueError(f"{argname}[{i}] must be a 1-D sequence of int token ids, got shape {a.shape} dtype {a.dtype}")
    out.append(a.astype(np.int32))
  return out


def _pad(seqs: list, width: int, pad_id: int) -> tuple:
  arr = np.full((len(seqs), width), pad_id, np.int32)
  lens = np.zeros((len(seqs),), np.int32)
  for i, s in enumerate(seqs):
    arr[i, :len(s)] = s
    lens[i] = len(s)
  return arr, lens


def _per_row(value, rows: int, dtype, argname: str) -> np.ndarray:
  a = np.asarray(value, dtype=dtype)
  if a.ndim == 0:
    return np.full((rows,), a, dtype)
  if a.shape != (rows,):
    raise ValueError(f"{argname} must be a scalar or have shape ({rows},), got {a.shape}")
  return a


def _sampling_params(rows, temperature, top_k, top_p, min_p, greedy):
  temp = _per_row(temperature, rows, np.float32, "temperature")
  tk = _per_row(top_k, rows, np.int32, "top_k")
  tp = _per_row(top_p, rows, np.float32, "top_p")
  mp = _per_row(min_p, rows, np.float32, "min_p")
  if not greedy and not np.all(temp > 0):
    raise ValueError(f"temperature must be > 0 when sampling (greedy=False), got {temp.min()}")
  if not np.all(np.isfinite(temp)):
    raise ValueError("temperature must be finite")
  if np.any(tk < 0):
    raise ValueError(f"top_k must be >= 0 (0 = off), got {tk.min()}")
  if not np.all((tp > 0) & (tp <= 1)):
    raise ValueError(f"top_p must be in (0, 1], got values such as {tp[~((tp > 0) & (tp <= 1))][:3].tolist()}")
  if not np.all((mp >= 0) & (mp <= 1)):
    raise ValueError(f"min_p must be in [0, 1], got values such as {mp[~((mp >= 0) & (mp <= 1))][:3].tolist()}")
  return temp, tk, tp, mp


def _stop_table(stop_tokens, rows: int, width: int) -> np.ndarray:
  table = np.full((rows, width), -1, np.int32)
  if stop_tokens is None:
    return table
  scalar = lambda x: isinstance(x, (int, np.integer)) or (hasattr(x, "ndim") and x.ndim == 0)
  if scalar(stop_tokens):
    stop_tokens = [int(stop_tokens)]
  stop_tokens = list(stop_tokens)
  if all(scalar(x) for x in stop_tokens):
    stop_tokens = [stop_tokens] * rows  # one shared set (possibly empty)
  if len(stop_tokens) != rows:
    raise ValueError(f"stop_tokens must be one set of ids or one set per prompt ({rows}), got {len(stop_tokens)}")
  for i, ids in enumerate(stop_tokens):
    ids = np.asarray(ids, np.int32).reshape(-1)
    if ids.size > width:
      raise ValueError(f"stop_tokens[{i}] has {ids.size} ids > SamplerConfig.max_stop_tokens={width}")
    table[i, :ids.size] = ids
  return table


def _max_new(config: SamplerConfig, max_new_tokens) -> np.ndarray:
  m = config.max_new_tokens if max_new_tokens is None else int(max_new_tokens)
  if not 1 <= m <= config.max_new_tokens:
    raise ValueError(f"max_new_tokens must be in [1, SamplerConfig.max_new_tokens={config.max_new_tokens}], got {m}")
  return np.asarray(m, np.int32)


def generate(model, prompts: Sequence, *, config: SamplerConfig, key: Array, n: int = 1,
             temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, greedy: bool = False,
             stop_tokens=None, max_new_tokens: Optional[int] = None, policy_version=0,
             prompt_ids=None, return_state: bool = False):
  """Samples ``n`` completions for each of ``P`` prompts in one jitted call.

  The P distinct prompts are prefilled once (left-padded to the smallest
  ``config.prompt_buckets`` entry that fits), their KV caches are repeated
  ``n`` times, and a ``lax.while_loop`` decodes until every row has sampled a
  stop token or ``max_new_tokens`` tokens. Row ``b = p * n + i`` is sample
  ``i`` of prompt ``p``. Sampling is ``x_t ~ softmax(trunc(z_t / T))``
  (see ``rljax.sampling._truncation`` for top-k/top-p/min-p); row ``b`` draws
  with ``fold_in(fold_in(fold_in(key, prompt_ids[p]), i), position)``, so a
  sample depends only on (key, prompt id, sample index, its own prefix), not
  on the rest of the batch.

  With ``config.concurrent_chunks = c > 1`` the prompts are decoded as ``c``
  concurrent calls on host threads (CPU only) and the rollouts concatenated
  (rows keep their random streams; see ``SamplerConfig``).

  Compilation: static are ``config``, the model graph, ``n``, ``greedy``,
  ``P`` (per chunk) and the bucket; temperature / top_k / top_p / min_p / stop tokens /
  ``max_new_tokens`` / prompt lengths within a bucket are traced values.

  Args:
    model: a ``rljax.models.Transformer`` (or ``(graphdef, state)`` from
      ``nnx.split``, which skips the per-call split). With parameters
      sharded over a mesh (``rljax.parallel.shard_state``) the KV cache is
      constrained to ``CACHE_AXES`` (rows over ``data x fsdp``, KV heads over
      ``tensor``) through the rule table.
    prompts: P non-empty 1-D int token sequences (ragged).
    config: static ``SamplerConfig``.
    key: PRNG key.
    n: samples per prompt (group size), ``>= 1``.
    temperature, top_p, min_p: scalar or ``[P]`` floats; top_k: scalar or
      ``[P]`` ints (0 = off). ``top_p`` in (0, 1], ``min_p`` in [0, 1],
      ``temperature > 0`` unless ``greedy``.
    greedy: ``x_t = argmax z_t`` (``logp_sampling = 0``).
    stop_tokens: None, one set of ids for all prompts, or one set per prompt
      (at most ``config.max_stop_tokens`` each); the stop token is kept.
    max_new_tokens: traced per-call limit ``<= config.max_new_tokens``.
    policy_version: scalar or ``[P]`` int written to ``Rollout.policy_version``.
    prompt_ids: ``[P]`` ints, the group ids (default ``arange(P)``).
    return_state: also return the ``SamplerState`` for ``resume``.

  Returns:
    ``Rollout`` with ``[B, T]`` arrays, ``B = P n``, ``T = bucket +
    config.max_new_tokens``, left-aligned (positions ``arange(T)``), and
    ``finish_reason`` as ``FinishReason`` values; with ``return_state``,
    ``(rollout, state)``.
  """
  if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
    raise ValueError(f"n must be an int >= 1, got {n!r}")
  seqs = _ragged(prompts, "prompts")
  p = len(seqs)
  if p == 0:
    raise ValueError("prompts must contain at least one prompt")
  for i, s in enumerate(seqs):
    if s.size == 0:
      raise ValueError(f"prompts[{i}] is empty: every prompt needs at least one token")
  longest = max(s.size for s in seqs)
  lb = config.bucket(longest, "prompts")
  if lb + config.max_new_tokens > config.cache_size:
    raise ValueError(f"prompts: length {longest} (bucket {lb}) + max_new_tokens "
                     f"{config.max_new_tokens} exceeds the cache size {config.cache_size}: use "
                     f"SamplerConfig(cache_size={lb + config.max_new_tokens}) or larger")
  prompt, plen = _pad(seqs, lb, config.pad_id)
  ids = np.arange(p, dtype=np.int32) if prompt_ids is None else _per_row(prompt_ids, p, np.int32, "prompt_ids")
  sp = _sampling_params(p, temperature, top_k, top_p, min_p, greedy)
  stop = _stop_table(stop_tokens, p, config.max_stop_tokens)
  version = _per_row(policy_version, p, np.int32, "policy_version")
  graphdef, params = _split(model)
  mesh = _params_mesh(params)
  max_new = _max_new(config, max_new_tokens)
  call = functools.partial(_generate_jit, graphdef, params, config=_compiled_config(config), n=int(n),
                           greedy=bool(greedy), mesh=mesh, want_state=bool(return_state))

  def prompts_slice(lo, hi):  # the call for prompts lo:hi (rows lo * n to hi * n)
    r = slice(lo, hi)
    return call(prompt[r], plen[r], ids[r], key, tuple(a[r] for a in sp), stop[r], max_new, version[r])

  chunks = min(config.concurrent_chunks, p)
  if chunks > 1 and not return_state and mesh is None and _on_cpu(params):
    return _generate_concurrently(prompts_slice, p, chunks)
  st, rollout = prompts_slice(0, p)
  return (rollout, st) if return_state else rollout


def _compiled_config(config: SamplerConfig) -> SamplerConfig:
  """``config`` as a static jit argument: ``concurrent_chunks`` only matters on the host, so it is reset
  to 1 and does not compile a duplicate of the same program."""
  return config if config.concurrent_chunks == 1 else dataclasses.replace(config, concurrent_chunks=1)


def _on_cpu(params) -> bool:
  """Whether the parameters live on CPU devices (concurrent chunks are a CPU setting)."""
  for x in jax.tree.leaves(params):
    devices = getattr(x, "devices", None)
    if devices is not None:
      return all(d.platform == "cpu" for d in devices())
  return jax.default_backend() == "cpu"


def _generate_concurrently(prompts_slice, p: int, chunks: int) -> Rollout:
  """``prompts_slice(lo, hi)`` on ``chunks`` contiguous ranges of the ``p`` prompts at once, one host
  thread each (the first on the calling thread); the rollouts are concatenated in prompt order (row
  ``p * n + i``).

  Each thread waits for its chunk to finish: two programs dispatched from one thread ran one after the
  other on XLA:CPU (0.49 s against 0.31 s from two threads, 0.44 s as one call), so a thread must not
  take a second chunk while its first is running."""
  bounds = np.linspace(0, p, chunks + 1).round().astype(int)

  def run(j):
    return jax.block_until_ready(prompts_slice(bounds[j], bounds[j + 1])[1])

  with concurrent.futures.ThreadPoolExecutor(chunks - 1) as pool:
    rest = [pool.submit(run, j) for j in range(1, chunks)]
    parts = [run(0)] + [f.result() for f in rest]
  return jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=0), *parts)


def resume(model, state: SamplerState, appended=None, *, config: SamplerConfig, key: Array,
           active=None, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, greedy: bool = False,
           max_new_tokens: Optional[int] = None, policy_version=0):
  """Continues every row of ``state``: appends tokens, then samples again.

  Row ``b`` first feeds its pending last sampled token and ``appended[b]``
  (e.g. a tool's output, marked in ``prompt_mask`` as context), reusing the
  cached prefix (nothing before is recomputed), then decodes as in
  ``generate`` (same per-row key derivation; pass a fresh ``key``).

  Args:
    model: the model (or ``(graphdef, state)``); may hold new parameters.
    state: the ``SamplerState`` returned by ``generate``/``resume``.
    appended: None or B 1-D int sequences (possibly empty).
    config: the same ``SamplerConfig``.
    key: PRNG key for this turn, or ``[B]`` keys, one per row (row ``b`` then samples with ``key[b]`` in place
      of ``key``: rows of one call can continue different turns, each on its own turn's stream).
    active: ``[B]`` bool, rows that continue (default all); inactive rows keep
      their tokens and pending token and must have nothing appended.
    temperature, top_k, top_p, min_p, greedy, max_new_tokens, policy_version:
      as in ``generate`` (per row: scalar or ``[B]``).

  Returns:
    ``(rollout, state)``; ``rollout`` covers the whole sequences, ``[B, S]``.
  """
  b = state.pending.shape[0]
  seqs = [np.zeros((0,), np.int32)] * b if appended is None else _ragged(appended, "appended")
  if len(seqs) != b:
    raise ValueError(f"appended must have one sequence per row ({b}), got {len(seqs)}")
  act = np.ones((b,), bool) if active is None else _per_row(active, b, bool, "active")
  key = jnp.asarray(key)
  if _per_row_keys(key) and key.shape[0] != b:
    raise ValueError(f"key must be one PRNG key or one per row ({b}), got {key.shape[0]} keys")
  for i, s in enumerate(seqs):
    if s.size and not act[i]:
      raise ValueError(f"appended[{i}] is non-empty but active[{i}] is False")
  lc = config.bucket(1 + max(s.size for s in seqs), "appended")  # [pending] + appended
  la = lc - 1
  used = int(state.slot)
  if used + lc + config.max_new_tokens > config.cache_size:
    raise ValueError(f"appended: {used} used cache slots + chunk bucket {lc} + max_new_tokens "
                     f"{config.max_new_tokens} exceed the cache size {config.cache_size} (the default "
                     f"fits one turn): give generate and resume "
                     f"SamplerConfig(cache_size={used + lc + config.max_new_tokens}) or larger")
  app, alen = _pad(seqs, la, config.pad_id)
  sp = _sampling_params(b, temperature, top_k, top_p, min_p, greedy)
  version = _per_row(policy_version, b, np.int32, "policy_version")
  graphdef, params = _split(model)
  st, rollout = _resume_jit(graphdef, params, state, app, alen, act, key, sp,
                            _max_new(config, max_new_tokens), version,
                            config=_compiled_config(config), greedy=bool(greedy), mesh=_params_mesh(params))
  return rollout, st
