"""The sampler's model-running entries: ``generate`` (prefill + decode of new prompts), ``resume`` (append to
every row, then decode again) and ``feed_rows`` (append to some rows, no sampling). Each validates and pads its
inputs on the host (``_host``) and calls one jitted program (``_decode``).

Layout (what comes out): every sequence is LEFT-aligned and contiguous, ``tokens[b] = prompt + completion
(+ appended + completion ...) + padding``, and the RoPE position of ``tokens[b, t]`` is ``t``; see ``_decode``
for how the KV cache is laid out to produce it. The state they return is a ``SamplerState`` (``_state``); the
entries that edit it without the model (``rewind``, ``restart``, ``compact``) are in ``_cache``.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from rljax.sampling._config import SamplerConfig
from rljax.sampling._decode import _append_jit, _generate_jit, _per_row_keys
from rljax.sampling._host import (_compiled_config, _generate_concurrently, _max_new, _on_cpu, _pad, _per_row,
                                  _ragged, _sampling_params, _split, _stop_table)
from rljax.sampling._state import SamplerState, _params_mesh

Array = jax.Array

__all__ = ["feed_rows", "generate", "lower_generate", "resume"]


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
  compiled = _compiled_config(config, params, mesh)
  c = len(config.common_prefix)
  if c and (mesh is not None or not all(s.size > c and np.array_equal(s[:c], config.common_prefix) for s in seqs)):
    compiled = dataclasses.replace(compiled, common_prefix=())  # prefill every prompt whole
  call = functools.partial(_generate_jit, graphdef, params, config=compiled, n=int(n),
                           greedy=bool(greedy), mesh=mesh, want_state=bool(return_state))

  def prompts_slice(lo, hi):  # the call for prompts lo:hi (rows lo * n to hi * n)
    r = slice(lo, hi)
    return call(prompt[r], plen[r], ids[r], key, tuple(a[r] for a in sp), stop[r], max_new, version[r])

  chunks = min(config.concurrent_chunks, p)
  if chunks > 1 and not return_state and mesh is None and _on_cpu(params):
    return _generate_concurrently(prompts_slice, p, chunks)
  st, rollout = prompts_slice(0, p)
  return (rollout, st) if return_state else rollout


def lower_generate(graphdef, params, *, config: SamplerConfig, prompts: int, n: int, mesh=None):
  """``generate``'s one jitted program lowered for abstract inputs (nothing allocated, nothing run): ``prompts``
  prompts in ``config.prompt_buckets[-1]`` columns, ``n`` samples each, sampled (not greedy), no state returned.

  ``params``: ``jax.ShapeDtypeStruct``s (with their shardings over ``mesh``, e.g. a TPU topology's). Returns a
  ``jax.stages.Lowered``; ``.compile().memory_analysis()`` is the rollout's memory on the devices it targets
  (``rljax plan``)."""
  width = config.prompt_buckets[-1]
  spec_of = lambda a: jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype)  # noqa: E731
  i32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.int32)  # noqa: E731
  sp = tuple(spec_of(a) for a in _sampling_params(prompts, 1.0, 0, 1.0, 0.0, False))
  stop = spec_of(_stop_table(None, prompts, config.max_stop_tokens))
  return _generate_jit.lower(graphdef, params, i32(prompts, width), i32(prompts), i32(prompts),
                             jax.ShapeDtypeStruct((2,), jnp.uint32), sp, stop, jax.ShapeDtypeStruct((), jnp.int32),
                             i32(prompts), config=_compiled_config(config, params, mesh), n=int(n), greedy=False,
                             mesh=mesh, want_state=False)


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
  turn = (act, key, sp, _max_new(config, max_new_tokens), version)
  st, rollout = _append_jit(graphdef, params, state, None, app, alen, turn, pad_id=config.pad_id,
                            config=_compiled_config(config, params, _params_mesh(params)), greedy=bool(greedy),
                            mesh=_params_mesh(params))
  return rollout, st


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
  return _append_jit(graphdef, params, state, jnp.asarray(rows, jnp.int32), app, alen, pad_id=config.pad_id)
