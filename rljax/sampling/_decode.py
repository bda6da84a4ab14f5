"""The sampler's jitted programs: prefill + ``lax.while_loop`` decode over a preallocated KV cache
(``generate``), and appending a chunk to rows then decoding (``resume``) or not (``feed_rows``).

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

import functools
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from rljax.sampling._config import FinishReason, SamplerConfig
from rljax.sampling._state import (SamplerState, _constrain_cache, _constrain_layers, _constrain_rows, _fit_slots,
                                   _from_layers, _row_split, _to_layers)
from rljax.sampling._step import _logits, sampling_step

Array = jax.Array


def _set_rows(buf: Array, pos: Array, values: Array, valid: Array) -> Array:
  """``buf[b, pos[b, t]] = values[b, t]`` where ``valid[b, t]`` (``pos`` [B, T])."""
  b_idx = jnp.broadcast_to(jnp.arange(buf.shape[0])[:, None], pos.shape)
  safe = jnp.where(valid, pos, buf.shape[1])  # out of range -> dropped
  return buf.at[b_idx, safe].set(values.astype(buf.dtype), mode="drop")


def _prefill(model, cache, kv_mask, slot, chunk, chunk_len, base_pos, pad_id, mesh=None):
  """Feeds each row's left-aligned ``chunk[b, :chunk_len[b]]`` (positions
  ``base_pos[b] + t``) right-aligned into slots ``[slot, slot + Lb)``; with a ``mesh`` the rows are split
  over its batch axes (the activations follow: no chip holds every row's).

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
  tok, pos = _constrain_rows(tok.astype(jnp.int32), mesh), _constrain_rows(pos.astype(jnp.int32), mesh)
  out = model(tok, pos, cache=cache,
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


def prefill_rows(prompts: int, n: int, split: int):
  """Which prompt each prefill row holds when the ``B = prompts x n`` rows are split ``split`` ways over a mesh
  and the prompts are not (``prompts % split != 0``; else None: the prompts' own order, each chip holding whole
  groups).

  Chip ``c`` holds rows ``[c r, (c + 1) r)`` (``r = B / split``), the samples of prompts ``first_c .. last_c``; it
  prefills those ``q = max_c (last_c - first_c + 1)`` prompts itself (the last one repeated where it needs fewer),
  so every chip prefills a whole share and its rows' caches are copied from its own prefill, never gathered
  across chips. A prompt whose samples span ``k`` chips is prefilled ``k`` times (at most ``n / r + 1``).

  Returns ``(index [split * q] prompt of each prefill row, local [split, r] prefill slot 0..q-1 of each row on
  its chip)`` (numpy).
  """
  b = prompts * n
  if split <= 1 or prompts % split == 0 or b % split:
    return None
  r = b // split
  first = (np.arange(split) * r) // n
  last = (np.arange(split) * r + r - 1) // n
  q = int((last - first).max()) + 1
  index = np.minimum(first[:, None] + np.arange(q)[None, :], last[:, None]).reshape(-1)
  local = np.arange(b).reshape(split, r) // n - first[:, None]
  return index.astype(np.int32), local


def _rows_of(x, n: int, layout):
  """``x`` ``[prefill rows, ...]`` -> ``[B, ...]``: each row's copy of its prompt's entry (``layout`` of
  :func:`prefill_rows`; None: every prompt repeated ``n`` times)."""
  if layout is None:
    return _repeat(x, n)
  local = layout[1]
  split, r = local.shape
  q = x.shape[0] // split
  x = x.reshape((split, q) + x.shape[1:])
  out = jnp.broadcast_to(x[:, :1], (split, r) + x.shape[2:])
  for j in range(1, q):
    pick = jnp.asarray(local == j).reshape((split, r) + (1,) * (x.ndim - 2))
    out = jnp.where(pick, x[:, j:j + 1], out)
  return out.reshape((split * r,) + x.shape[2:])


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


def _decode_loop(model, st: SamplerState, active, sp, max_new, key, greedy: bool, mesh=None,
            phase_ends: Optional[tuple] = None, in_place: bool = False,
            transposed: bool = False) -> SamplerState:
  """Loops ``feed pending token -> logits -> sample`` until every active row
  has sampled a stop token or ``max_new`` tokens (the last sampled token of a
  row stays pending: it is never fed, so no forward pass is wasted).

  ``st.cache`` is in the per-layer layout of :func:`_to_layers` (in and out).
  ``phase_ends`` (static, increasing; see :func:`decode_phase_ends`): the loop
  is split into one loop per entry ``e``, which runs while the slot written is
  below ``e`` and attends over ``e`` slots only, so early steps do not read the
  empty tail of the cache (same values: the slots after are empty): over a
  cache padded to ``e`` slots at each phase (a new buffer), or with
  ``in_place`` over the first ``e`` slots of one cache padded once to
  ``phase_ends[-1]`` and written in place (``SamplerConfig.phase_cache``). The
  cache comes out with ``phase_ends[-1]`` slots (at least its input size).
  ``None``: one loop over the cache as given.
  With a ``mesh`` the rows' logits stay split over its batch axes.
  ``transposed`` (no mesh): the matmul weights are read as ``[out, in]`` copies made once before the loop
  (``Transformer.decode_weights``, ``SamplerConfig.decode_weights``).
  """
  temperature, top_k, top_p, min_p = sp
  from rljax.models import convert_layout  # pylint: disable=import-outside-toplevel
  # Layers stored stacked: on one device they are sliced once here (slicing in the loop would copy every
  # layer every step on CPU); over a mesh, in the loop body, so that no per-layer copy of the weights lives
  # beside the stored shards for the whole loop (XLA keeps the slices taken here as buffers: 1.1 GiB per
  # chip for the 72B rollout on v5e-256, docs/scaling.md).
  stacked = model
  per_step = model.cfg.scan_layers and mesh is not None
  if model.cfg.scan_layers and not per_step:
    model = convert_layout(model, False, copy=False)
  weights_t, head_t = model.decode_weights() if transposed and mesh is None else (None, None)
  seq_keys = _seq_keys(key, st.group_id, st.sample_index)
  b = st.pending.shape[0]
  want_entropy = st.entropy is not None

  def cond(carry):
    _, done, _ = carry
    return ~jnp.all(done)

  def body(carry, attend=None):
    st, done, n_gen = carry
    act = ~done
    a2 = act[:, None]
    # Feed each active row's pending token (position length - 1) at the shared slot.
    kv_mask = jax.lax.dynamic_update_slice(st.kv_mask, a2, (0, st.slot))
    fed_pos = (st.length - 1)[:, None]
    ks, vs = st.cache
    m = convert_layout(stacked, False, copy=False) if per_step else model
    hidden, ks, vs, routing = m.decode_step(st.pending[:, None], fed_pos, ks, vs, st.slot, kv_mask,
                                                attend=attend, fused=mesh is None, weights_t=weights_t)
    ks, vs = _constrain_layers(ks, mesh), _constrain_layers(vs, mesh)
    upd = {}
    if st.routing is not None and routing is not None:
      upd["routing"] = _set_rows(st.routing, fed_pos, routing, a2)
    logits = _logits(m, hidden[:, 0], mesh, head_t)
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
  if in_place:
    carry = (_fit_slots(carry[0], phase_ends[-1], mesh),) + carry[1:]
  for end in phase_ends:
    if not in_place:
      carry = (_fit_slots(carry[0], end, mesh),) + carry[1:]
    size = carry[0].kv_mask.shape[1]
    carry = jax.lax.while_loop(lambda c, end=end: cond(c) & (c[0].slot < end),
                               functools.partial(body, attend=min(end, size)), carry)
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
  if mesh is not None:  # the prefill's rows stay split over the mesh, one layer's weights gathered at a time
    from rljax.parallel import gather_per_layer  # pylint: disable=import-outside-toplevel
    gather_per_layer(model, mesh)
  p, w = prompt.shape  # w = bucket; the prefill chunk is prompt[:, :len - 1]
  lp = w - 1
  s = config.cache_size
  dtype = None if config.cache_dtype is None else jnp.dtype(config.cache_dtype)
  # Over a mesh whose row split the prompts do not divide, each chip prefills the prompts of its own rows
  # (``prefill_rows``); otherwise the P prompts are prefilled once and repeated to their n rows.
  layout = prefill_rows(p, n, _row_split(mesh))
  pre_prompt, pre_len = (prompt, prompt_len) if layout is None else (prompt[layout[0]], prompt_len[layout[0]])
  q = pre_prompt.shape[0]
  # The prefill fills a cache of only the chunk's slots; it is laid out for decoding below and padded once
  # to the decode loop's size, so the empty slots are never transposed.
  s_pre = max(lp, 1)
  cache = _constrain_cache(model.init_cache(q, s_pre, dtype=dtype), mesh)
  kv_mask = jnp.zeros((q, s_pre), bool)
  c = 0 if model.cfg.is_moe else len(config.common_prefix)  # (generate checked every prompt starts with it)
  if c:  # the common tokens once, into slots [0, c) of every prompt's cache
    one = model(prompt[:1, :c], jnp.arange(c, dtype=jnp.int32)[None], cache=model.init_cache(1, c, dtype=dtype),
                cache_index=jnp.zeros((), jnp.int32), kv_mask=jnp.ones((1, c), bool)).cache
    cache = type(cache)(*(full.at[:, :, :c].set(jnp.broadcast_to(x, x.shape[:1] + (q,) + x.shape[2:]))
                          for full, x in ((cache.k, one.k), (cache.v, one.v))))
    kv_mask = kv_mask.at[:, :c].set(True)
  cache, kv_mask, routing = _prefill(
      model, cache, kv_mask, jnp.asarray(c, jnp.int32), pre_prompt[:, c:lp], pre_len - 1 - c,
      jnp.full((q,), c, jnp.int32), config.pad_id, mesh)
  pending = jnp.take_along_axis(prompt, (prompt_len - 1)[:, None], axis=1)[:, 0]
  want_routing = config.return_routing and routing is not None
  bufs = _empty_buffers(p, s, config.return_entropy, None, None)
  t = jnp.arange(w)
  in_prompt = t[None, :] < prompt_len[:, None]
  bufs["tokens"] = bufs["tokens"].at[:, :w].set(jnp.where(in_prompt, prompt, config.pad_id))
  bufs["prompt_mask"] = bufs["prompt_mask"].at[:, :w].set(in_prompt)
  # Broadcast the P prompts to the B = P * n rows of their groups.
  per_prompt = dict(bufs, length=prompt_len.astype(jnp.int32),
                    group_id=prompt_ids.astype(jnp.int32), stop=stop,
                    policy_version=policy_version, pending=pending, sp=sp)
  rows = _repeat(per_prompt, n)
  if want_routing:
    in_chunk = (t[None, :lp] < (rows["length"] - 1)[:, None])
    routing = _rows_of(routing, n, layout)
    rows["routing"] = jnp.zeros((p * n, s) + routing.shape[2:], routing.dtype).at[:, :lp].set(
        jnp.where(in_chunk.reshape(in_chunk.shape + (1,) * (routing.ndim - 2)), routing, 0))
  # per-layer head-major layout made on the prefilled rows' s_pre slots, then copied to the B rows; the
  # decode loop pads it once to its size (``s`` slots only if the state is returned)
  ks, vs = (_constrain_layers(tuple(_rows_of(x, n, layout) for x in layers), mesh)
            for layers in _to_layers(cache, mesh))
  st = SamplerState(
      cache=(ks, vs), kv_mask=_rows_of(kv_mask, n, layout),
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
  in_place = config.phase_cache == "in_place" or (config.phase_cache == "auto" and mesh is not None)
  st = _decode_loop(model, st, active, rows["sp"], max_new, key, greedy, mesh, phase_ends=ends, in_place=in_place,
                    transposed=config.decode_weights == "transposed")
  rollout = st.to_rollout(w + config.max_new_tokens)
  if not want_state:
    return None, rollout
  st = _fit_slots(st, s, mesh)
  return st.replace(cache=_from_layers(st.cache, type(cache))), rollout


def _feed_chunk(model, st: SamplerState, rows, appended: Array, appended_len: Array, pad_id: int) -> SamplerState:
  """Feeds row ``b``'s pending token and ``appended[b, :appended_len[b] - 1]`` (one prefill chunk at the shared
  slot counter, context: ``prompt_mask``) and makes ``appended[b, appended_len[b] - 1]`` its pending token; a row
  with ``appended_len[b] = 0`` feeds nothing and keeps its pending token.

  Args:
    st: the state, its cache stacked (``KVCache`` ``[L, B, S, K, D]``; so it comes out).
    rows: None (every row feeds) or ``[J]`` int32 distinct row indices: only those rows are gathered, fed and
      scattered back (``appended`` then has ``J`` rows), the others are untouched.
    appended: ``[B or J, La]`` int32 left-aligned chunks, ``La`` = bucket - 1 of ``[pending] + appended``.
    appended_len: ``[B or J]`` int32 lengths.
  Returns:
    the state with ``La`` more slots used (``slot + La``).
  """
  la = appended.shape[1]
  pick = (lambda x: x) if rows is None else (lambda x: None if x is None else x[rows])
  full = jnp.concatenate([pick(st.pending)[:, None], appended.astype(jnp.int32)], axis=1)
  base_pos = pick(st.length) - 1  # position of the old pending token
  cache = st.cache if rows is None else type(st.cache)(st.cache.k[:, rows], st.cache.v[:, rows])
  cache, kv_mask, routing = _prefill(model, cache, pick(st.kv_mask), st.slot, full[:, :la], appended_len, base_pos,
                                     pad_id)
  pending = jnp.take_along_axis(full, appended_len[:, None], axis=1)[:, 0]
  t = jnp.arange(la)
  valid = t[None, :] < appended_len[:, None]
  pos = pick(st.length)[:, None] + t[None, :]
  upd = dict(tokens=_set_rows(pick(st.tokens), pos, appended, valid),
             prompt_mask=_set_rows(pick(st.prompt_mask), pos, jnp.ones_like(valid), valid))
  if st.routing is not None and routing is not None:
    upd["routing"] = _set_rows(pick(st.routing), base_pos[:, None] + t[None, :], routing, valid)
  upd.update(kv_mask=kv_mask, pending=pending, length=pick(st.length) + appended_len)
  if rows is None:
    return st.replace(cache=cache, slot=st.slot + la, **upd)
  return st.replace(cache=type(st.cache)(st.cache.k.at[:, rows].set(cache.k), st.cache.v.at[:, rows].set(cache.v)),
                    slot=st.slot + la, **{k: getattr(st, k).at[rows].set(v) for k, v in upd.items()})


@functools.partial(jax.jit, static_argnames=("graphdef", "pad_id", "config", "greedy", "mesh"))
def _append_jit(graphdef, params, st: SamplerState, rows, appended, appended_len, turn=None, *, pad_id: int,
                config: Optional[SamplerConfig] = None, greedy: bool = False, mesh=None):
  """Appends a chunk to rows of ``st`` (:func:`_feed_chunk`), then with ``turn`` samples a turn: ``feed_rows``
  and ``resume`` in one program.

  ``turn = None`` (``feed_rows``): ``rows`` ``[J]`` rows feed, nothing is sampled; returns the state. Static:
  ``graphdef`` and ``pad_id`` only (``config`` / ``greedy`` / ``mesh`` keep their defaults).

  ``turn = (active [B] bool, key, sp, max_new, policy_version [B])`` (``resume``, ``rows = None``): every active
  row feeds its chunk, then decodes as in ``generate``; returns ``(state, rollout [B, S])``. Static: ``graphdef``,
  ``pad_id = config.pad_id``, ``config``, ``greedy``, ``mesh``.
  """
  model = nnx.merge(graphdef, params)
  if turn is None:
    return _feed_chunk(model, st, rows, appended, appended_len, pad_id)
  active, key, sp, max_new, policy_version = turn
  alen = jnp.where(active, appended_len, 0).astype(jnp.int32)
  cache_type = type(st.cache)
  st = _feed_chunk(model, st.replace(cache=_constrain_cache(st.cache, mesh)), rows, appended, alen, pad_id)
  st = st.replace(cache=_to_layers(st.cache, mesh), policy_version=policy_version)
  st = _decode_loop(model, st, active, sp, max_new, key, greedy, mesh, transposed=config.decode_weights == "transposed")
  return st.replace(cache=_from_layers(st.cache, cache_type)), st.to_rollout()
