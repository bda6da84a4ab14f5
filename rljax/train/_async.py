"""The asynchronous runner: a rollout producer thread and the trainer, with bounded staleness (``rl.async_staleness``).

Staleness model (AReaL, arXiv:2505.24298, Sec. 5; docs/async.md). The policy *version* is the number of RL
steps applied to the parameters: the trainer at step ``k`` holds version ``k`` and trains on batch ``k``. With
a bound ``eta``:

* the producer starts batch ``k`` only once version ``k - eta`` is published (AReaL's gate on new rollout
  requests), so at most ``eta + 1`` batches are sampled ahead of the trainer;
* every sampled token carries the version of the weights that produced it (``StepData.policy_version [B, T]``,
  -1 off the completion: :data:`POLICY_VERSION`), and its sampler log-prob stays in ``logp_behavior``;
* a row's staleness at step ``k`` is ``k - min_t version_t`` over its completion tokens; the trainer never trains
  on a row with staleness ``> eta``: such rows are dropped (``valid = False``) and counted (``async/dropped``).
  The gate makes this a guard: the runner's own rows are never older than ``eta``.

Interruptible generation (``eta >= 1``): the producer's sampler (:class:`InterruptibleSampler`) decodes in
chunks of ``rl.async_chunk_tokens`` tokens and looks for new weights between chunks. A chunk re-reads each
unfinished sequence (prompt and completion so far) under the chunk's weights, as AReaL recomputes the KV cache
after a weight update, so every token is an exact draw from ``pi_{version}(. | prefix)`` and its log-prob is
that policy's. When new weights arrive, unfinished rows continue under them (``rl.async_partial_rollouts``:
a partial rollout, tokens of mixed versions) or restart from their prompt (their tokens are discarded and
counted, ``async/restarted_rows``).

The loss is the recipe's: its PPO ratio uses the proximal log-probs ``logp_old`` the loop recomputes with the
trainer's current parameters (decoupled PPO, AReaL's Eq. 5), and a correction (``tis``, ``mis``, ``icepop``,
``decoupled_ppo``'s weight) reads the per-token ``logp_behavior``, so it applies per token whatever version each
token came from.

``eta = 0`` is the synchronous loop run on a thread: batch ``k`` waits for version ``k`` and is sampled by the
ordinary sampler with the same arguments, so results equal the synchronous runner's bit for bit (CPU).

Faults: an exception in the producer stops the run with that error (the trainer's wait polls the thread and
re-raises; it never hangs). A checkpoint stores the data loader's position right after the batch it trained
on; batches in flight are discarded at a preemption and their prompts drawn again on resume, so a resumed run
loses no prompt and duplicates none.

Devices: by default the producer shares the trainer's mesh (separate jitted programs on one machine), and a
published version is a copy of the parameters on the same devices (the update donates its buffers). With
``rl.async_rollout_devices = r`` the mesh is split (``rljax.parallel.split_mesh``) into a rollout sub-mesh (its
first ``r`` devices) and a training sub-mesh (the rest): the train state lives on the training sub-mesh, the
sampler's weights on the rollout sub-mesh, and each published version is an explicit reshard between them
(``jax.device_put`` onto the parameters' shardings on the rollout sub-mesh, ``rljax.parallel.transfer``), timed
and byte-counted (``async/weight_transfer_s``, ``async/weight_transfer_bytes``; with shared devices they measure
the copy). One process only: the producer thread's collectives would interleave with the trainer's on other
processes. With several processes, the rollout and training sides are separate processes
(``rljax.train._multiproc_async``).
"""
from __future__ import annotations

import dataclasses
import queue
import threading
import time
import types
from typing import Any, Callable, NamedTuple, Optional

import numpy as np
from flax import nnx

from rljax import parallel as par
from rljax.sampling import FinishReason, SamplerConfig, generate, resume
from rljax.stages import Extra

__all__ = ["Weights", "WeightBox", "InterruptibleSampler", "Producer", "ProducerStopped", "AsyncRunner",
           "row_staleness", "drop_stale", "continuation_buckets", "auto_chunk_tokens", "POLICY_VERSION"]

# The extra the asynchronous sampler's rows carry (``data.policy_version``; gathered into ``rljax.stages.EXTRAS``):
# its per-token versions (``token_version``), which the collector writes into the scored rows.
POLICY_VERSION = Extra("policy_version", "iu", "BT", "the asynchronous sampler (rljax.train._async)",
                       "the policy version that sampled each token")
EXTRAS = (POLICY_VERSION,)


class ProducerStopped(Exception):
  """Raised inside the producer when the runner closes it (not an error)."""


class Weights(NamedTuple):
  """A published policy: its ``version`` (RL steps applied), parameters, model state and the sampling context
  of that version (``temperature``, the prompt filters' and replay stages' states)."""
  version: int
  params: Any
  model_state: Any
  context: dict


class WeightBox:
  """The latest published :class:`Weights` (the trainer publishes, the producer reads; thread-safe)."""

  def __init__(self):
    self._cond = threading.Condition()
    self._latest: Optional[Weights] = None

  def publish(self, weights: Weights) -> None:
    with self._cond:
      self._latest = weights
      self._cond.notify_all()

  def latest(self) -> Weights:
    with self._cond:
      return self._latest

  def wait_for(self, version: int, stop: threading.Event) -> Optional[Weights]:
    """The latest weights once their version is ``>= version``; None if ``stop`` is set first."""
    with self._cond:
      while not stop.is_set() and (self._latest is None or self._latest.version < version):
        self._cond.wait(0.1)
      return None if stop.is_set() else self._latest

  def wake(self) -> None:
    with self._cond:
      self._cond.notify_all()


def row_staleness(token_version: np.ndarray, completion_mask: np.ndarray, current: int) -> np.ndarray:
  """``[B]`` staleness of each row at version ``current``: ``current - min_t version[b, t]`` over the row's
  completion tokens (0 for a row without completion tokens)."""
  v = np.where(completion_mask, token_version, np.iinfo(np.int32).max).min(1)
  return np.where(completion_mask.any(1), current - v, 0).astype(np.int64)


def drop_stale(data, current: int, eta: int, start_version: int):
  """The trainer's guard: ``(data, dropped, metrics)`` with ``valid = False`` on every valid row whose
  staleness at version ``current`` (:func:`row_staleness` of ``data.policy_version``; without it,
  every token is ``start_version``'s) is above ``eta``; ``dropped`` counts them; ``metrics``:
  ``async/staleness_mean`` (over the kept rows' completion tokens) and ``async/staleness_max`` (kept rows)."""
  version = data.policy_version
  if version is None:  # the ordinary sampler (eta = 0): every token of the batch's starting version
    version = np.full(data.tokens.shape, start_version, np.int32)
  stale = row_staleness(version, data.completion_mask, current)
  drop = data.valid & (stale > eta)
  if drop.any():
    data = data.replace(valid=data.valid & ~drop)
  kept = data.valid[:, None] & data.completion_mask
  return data, int(drop.sum()), {
      "async/staleness_mean": float((current - version)[kept].mean()) if kept.any() else 0.0,
      "async/staleness_max": float(stale[data.valid].max(initial=0))}


def auto_chunk_tokens(max_new_tokens: int) -> int:
  """``rl.async_chunk_tokens = 0``: ``max(16, ceil(M / 4))`` decode steps between looks for new weights (each
  chunk re-reads the prefix and each continued length is one more compiled bucket: short responses (``M <=
  16``) are sampled in one chunk, uninterrupted)."""
  return max(16, -(-max_new_tokens // 4))


def continuation_buckets(prompt_buckets: tuple, max_new_tokens: int, chunk: int) -> tuple:
  """Prompt buckets of the chunked sampler: a sequence continued after ``j`` whole chunks has at most
  ``bucket + j * chunk`` tokens (``j < ceil(M / chunk)``)."""
  chunks = -(-max_new_tokens // chunk)
  return tuple(sorted({b + j * chunk for b in prompt_buckets for j in range(chunks)}))


class InterruptibleSampler:
  """The producer's sampler: ``fn(prompts, *, n, greedy, temperature, key, rows=None, max_new=None)``, the
  signature of ``Experiment.sample_fn``'s sampler, returning host arrays.

  Decodes in chunks of ``chunk`` tokens under ``latest()`` (a :class:`Weights`), read before every chunk.
  Row ``b = p * n + i`` draws its token at position ``t`` with ``fold_in(fold_in(fold_in(key, b), 0), t)``,
  so a row's tokens depend on (key, row, prefix, the weights of each chunk), not on the chunking.

  KV cache: after new weights (and for the first chunk) the unfinished rows are prefilled by one ``generate``
  call (padded to a power of two, at least 8 and at most ``B``), their prompt being the sequence so far: the
  cache is recomputed under the new weights, as AReaL does. While the weights stay the same, the next chunk
  continues that call's cache (``resume``: nothing is recomputed) unless so few rows are left that a fresh
  prefill of a smaller batch is cheaper (the padded unfinished count below the cached batch's size).
  ``reuse_cache=False`` prefills every chunk (the same tokens; log-probs equal up to float summation order).
  The cache has ``max(prompt_buckets) + max_new_tokens + chunk`` slots (about one ``generate`` call's).

  Returns a namespace with the ``Rollout`` fields ``tokens``, ``prompt_mask``, ``completion_mask``,
  ``logp_behavior``, ``entropy_behavior`` ``[B, T]`` (``T = bucket + config.max_new_tokens``, the run's layout),
  ``finish_reason [B]``, ``policy_version [B]`` (each row's oldest token) and ``token_version [B, T]`` (-1 off
  the completion). ``max_new``: optional ``[B]`` per-row caps ``<= config.max_new_tokens`` (a stop at a drawn
  length; the benchmark's). ``stats`` counts chunks, weight switches, interrupted and restarted rows, the
  discarded tokens of restarted rows, the prefilling chunks (``prefills``) and the prefilled tokens
  (``prefilled_tokens``: the sequences' lengths so far, over the real rows of each prefilling chunk).
  """

  def __init__(self, graphdef, latest: Callable[[], Weights], *, config: SamplerConfig, chunk: int,
               partial: bool, stop_tokens, dtype: str = "", stop: Optional[threading.Event] = None,
               reuse_cache: bool = True):
    if not isinstance(chunk, int) or chunk < 1:
      raise ValueError(f"chunk must be an int >= 1, got {chunk!r}")
    self.graphdef, self.latest, self.config, self.chunk = graphdef, latest, config, chunk
    self.partial, self.stop_tokens, self.dtype, self.stop = bool(partial), list(stop_tokens), dtype, stop
    self.reuse_cache = bool(reuse_cache)
    # bucket 1: a continuation with nothing appended prefills no slot (``resume`` feeds the pending token)
    buckets = continuation_buckets(config.prompt_buckets, config.max_new_tokens, chunk)
    self.cont_config = SamplerConfig(
        max_new_tokens=chunk, prompt_buckets=tuple(sorted({1, *buckets})),
        cache_size=max(*buckets, max(config.prompt_buckets) + config.max_new_tokens) + chunk,
        max_stop_tokens=config.max_stop_tokens, return_entropy=config.return_entropy, return_routing=False,
        pad_id=config.pad_id, cache_dtype=config.cache_dtype, decode_phases=config.decode_phases,
        concurrent_chunks=config.concurrent_chunks)
    self.stats = {"chunks": 0, "switches": 0, "interrupted_rows": 0, "restarted_rows": 0, "discarded_tokens": 0,
                  "prefills": 0, "prefilled_tokens": 0}
    self._model_version, self._model = None, None

  def _split_model(self, w: Weights):
    if self._model_version != w.version:
      from rljax.models import with_dtype  # pylint: disable=import-outside-toplevel
      model = nnx.merge(self.graphdef, w.params, w.model_state)
      if self.dtype:
        model = with_dtype(model, self.dtype)
      self._model, self._model_version = nnx.split(model), w.version
    return self._model

  def __call__(self, prompts, *, n: int, greedy: bool, temperature, key, rows=None, max_new=None):
    cfg, pad = self.config, self.config.pad_id
    seqs = [np.asarray(p, np.int32).reshape(-1) for p in prompts]
    b, m = len(seqs) * n, cfg.max_new_tokens
    width = cfg.bucket(max(s.size for s in seqs), "prompts") + m
    plen = np.repeat([s.size for s in seqs], n).astype(np.int64)
    tokens = np.full((b, width), pad, np.int32)
    for r in range(b):
      tokens[r, :plen[r]] = seqs[r // n]
    prompt_mask = np.arange(width)[None, :] < plen[:, None]
    cm = np.zeros((b, width), bool)
    logp = np.zeros((b, width), np.float32)
    ent = np.zeros((b, width), np.float32) if cfg.return_entropy else None
    version = np.full((b, width), -1, np.int32)
    gen, done = np.zeros(b, np.int64), np.zeros(b, bool)
    finish = np.full(b, int(FinishReason.LENGTH), np.int32)
    cap = np.full(b, m, np.int64) if max_new is None else np.asarray(max_new, np.int64).reshape(-1)
    if cap.shape != (b,) or cap.min() < 1 or cap.max() > m:
      raise ValueError(f"max_new must hold {b} ints in [1, {m}], got shape {cap.shape}")
    temp = np.repeat(np.broadcast_to(np.asarray(1.0 if greedy else temperature, np.float32), (len(seqs),)), n)
    w = self.latest()
    state, state_rows = None, None  # the cache of the last prefill (this version) and the batch rows it holds
    while not done.all():
      if self.stop is not None and self.stop.is_set():
        raise ProducerStopped()
      new = self.latest()
      if new.version != w.version:
        state = None  # the cache was computed under the old weights
        moving = ~done & (gen > 0)
        self.stats["switches"] += 1
        self.stats["interrupted_rows"] += int(moving.sum())
        if not self.partial:  # restart: the rows' tokens so far are discarded
          self.stats["restarted_rows"] += int(moving.sum())
          self.stats["discarded_tokens"] += int(gen[moving].sum())
          tokens[moving] = np.where(prompt_mask[moving], tokens[moving], pad)
          cm[moving], logp[moving], version[moving], gen[moving] = False, 0.0, -1, 0
          if ent is not None:
            ent[moving] = 0.0
        w = new
      act = np.flatnonzero(~done)
      size = min(max(1 << (len(act) - 1).bit_length(), 8), b)  # few distinct shapes: few compilations
      if (state is None or not self.reuse_cache or size < len(state_rows)
          or int(state.slot) + 1 + self.chunk > self.cont_config.cache_size):  # prefill the sequences so far
        idx = np.concatenate([act, np.full(size - len(act), act[0])])
        out, state = generate(self._split_model(w), [tokens[r, :plen[r] + gen[r]] for r in idx],
                              config=self.cont_config, key=key, n=1, greedy=greedy, temperature=temp[idx],
                              stop_tokens=self.stop_tokens, max_new_tokens=self.chunk, policy_version=w.version,
                              prompt_ids=idx, return_state=True)
        state_rows = idx
        self.stats["prefills"] += 1
        self.stats["prefilled_tokens"] += int((plen[act] + gen[act]).sum())
      else:  # the same weights: continue the cached rows that are unfinished (padding duplicates stay idle)
        first = np.zeros(len(state_rows), bool)
        first[np.unique(state_rows, return_index=True)[1]] = True
        out, state = resume(self._split_model(w), state, None, config=self.cont_config, key=key,
                            active=first & ~done[state_rows], greedy=greedy, temperature=temp[state_rows],
                            max_new_tokens=self.chunk, policy_version=w.version)
      self.stats["chunks"] += 1
      o_tok, o_cm = np.asarray(out.tokens), np.asarray(out.completion_mask).astype(bool)
      o_lp, o_fin = np.asarray(out.logp_behavior), np.asarray(out.finish_reason)
      o_ent = None if ent is None else np.asarray(out.entropy_behavior)
      slot_of = {int(r): j for j, r in reversed(list(enumerate(state_rows)))}  # a row's first slot in the call
      for r in act:
        j = slot_of[int(r)]
        start = plen[r] + gen[r]
        k = int(o_cm[j, start:].sum())  # the tokens this call sampled (both calls lay sequences out from 0)
        keep = int(min(k, cap[r] - gen[r]))
        sl = slice(start, start + keep)
        tokens[r, sl], cm[r, sl], logp[r, sl], version[r, sl] = o_tok[j, sl], True, o_lp[j, sl], w.version
        if ent is not None:
          ent[r, sl] = o_ent[j, sl]
        gen[r] += keep
        stopped = keep == k and o_fin[j] == int(FinishReason.STOP_TOKEN)
        if stopped or gen[r] >= cap[r]:
          done[r] = True
          finish[r] = int(FinishReason.STOP_TOKEN if stopped else FinishReason.LENGTH)
    lo, hi = (0, b) if rows is None else rows
    oldest = np.where(cm, version, np.iinfo(np.int32).max).min(1)
    return types.SimpleNamespace(
        tokens=tokens[lo:hi], prompt_mask=prompt_mask[lo:hi], completion_mask=cm[lo:hi], logp_behavior=logp[lo:hi],
        entropy_behavior=None if ent is None else ent[lo:hi], routing=None, finish_reason=finish[lo:hi],
        policy_version=np.where(cm.any(1), oldest, w.version).astype(np.int32)[lo:hi], token_version=version[lo:hi])


def tagged(sample_fn: Callable, version: int) -> Callable:
  """``sample_fn`` (an ``Experiment.sample_fn`` sampler) whose rollouts carry ``token_version [B, T]``: ``version``
  on the completion tokens, -1 elsewhere (the tags of a batch sampled under one version)."""

  def fn(prompts, **kwargs):
    r = sample_fn(prompts, **kwargs)
    cm = np.asarray(r.completion_mask).astype(bool)
    fields = ("tokens", "prompt_mask", "completion_mask", "logp_behavior", "entropy_behavior", "routing",
              "finish_reason", "policy_version")
    return types.SimpleNamespace(**{f: getattr(r, f) for f in fields},
                                 token_version=np.where(cm, version, -1).astype(np.int32))
  return fn


@dataclasses.dataclass
class _Failure:
  k: int
  error: BaseException


class Producer:
  """Runs ``produce(k, weights)`` for ``k = start, ..., stop_at - 1`` on a thread, batch ``k`` once
  ``box`` holds version ``>= k - staleness``; ``get(k)`` returns batch ``k`` in order.

  An exception in ``produce`` is handed to ``get``, which raises it (wrapped in a ``RuntimeError`` naming the
  batch); ``get`` polls the thread, so a producer that died without a word is an error too, never a hang.
  ``close()`` sets ``stop`` (``produce`` may raise :class:`ProducerStopped` when it sees it) and joins.
  """

  def __init__(self, produce: Callable[[int, Weights], Any], box: WeightBox, *, start: int, stop_at: int,
               staleness: int, stop: Optional[threading.Event] = None, poll_s: float = 0.05):
    self.produce, self.box, self.staleness, self.poll_s = produce, box, staleness, poll_s
    self.stop = stop if stop is not None else threading.Event()
    self._queue: queue.Queue = queue.Queue()
    self._thread = threading.Thread(target=self._run, args=(start, stop_at), name="rljax-async-producer",
                                    daemon=True)
    self._thread.start()

  def _run(self, start: int, stop_at: int) -> None:
    k = start
    try:
      for k in range(start, stop_at):
        w = self.box.wait_for(k - self.staleness, self.stop)
        if w is None:
          return
        self._queue.put((k, self.produce(k, w)))
    except ProducerStopped:
      return
    except BaseException as e:  # pylint: disable=broad-except  (handed to the trainer, which raises it)
      self._queue.put(_Failure(k, e))

  def get(self, k: int) -> Any:
    while True:
      try:
        item = self._queue.get(timeout=self.poll_s)
      except queue.Empty:
        if not self._thread.is_alive() and self._queue.empty():
          raise RuntimeError(f"the rollout producer stopped before batch {k}") from None
        continue
      if isinstance(item, _Failure):
        raise RuntimeError(f"the rollout producer failed on batch {item.k}: {type(item.error).__name__}: "
                           f"{item.error}") from item.error
      got, value = item
      if got != k:
        raise RuntimeError(f"the rollout producer returned batch {got}, expected {k}")
      return value

  def close(self) -> None:
    self.stop.set()
    self.box.wake()
    self._thread.join()


class _Produced(NamedTuple):
  version: int  # the version the batch started under
  collected: Any  # the Collector's Collected
  data_state: Any  # the loader's state right after this batch's prompts were drawn
  sampler_stats: dict


class AsyncRunner:
  """``rl.async_staleness`` in the RL loop (``rljax/train/_runners.py``): ``next(s)`` gives step ``s``'s batch (stale rows
  dropped), the loader state to checkpoint with it and the ``async/...`` metrics; ``publish(v)`` hands the
  trainer's parameters after ``v`` steps to the producer (returning the transfer's metrics); ``close()`` stops it.

  ``rollout_mesh``: the rollout sub-mesh (``rljax.parallel.split_mesh``; ``loop`` trains on the other one): the
  producer samples with weights resharded onto it. None: the producer shares the trainer's devices."""

  def __init__(self, loop, *, start: int, stop_at: int, rollout_mesh=None):
    rl = loop.rl
    self.loop, self.eta = loop, rl.async_staleness
    self.chunk = rl.async_chunk_tokens or auto_chunk_tokens(rl.max_new_tokens)
    self.box = WeightBox()
    self.stop = threading.Event()
    self.rollout_shardings = None if rollout_mesh is None else (
        par.state_shardings(loop.state.params, rollout_mesh), par.state_shardings(loop.state.model_state, rollout_mesh))
    self.publish(start)
    self.dropped = 0
    self.totals = {"interrupted_rows": 0, "restarted_rows": 0, "discarded_tokens": 0}
    self.idle_s, self.t0 = 0.0, time.perf_counter()
    self.producer = Producer(self._produce, self.box, start=start, stop_at=stop_at, staleness=self.eta,
                             stop=self.stop)

  def publish(self, version: int) -> dict:
    """Hands version ``version`` (the trainer's parameters now) to the producer: a copy on the rollout sub-mesh
    (or on the same devices); returns ``async/weight_transfer_s`` (the copy's wall time, waited for) and
    ``async/weight_transfer_bytes`` (the parameters' and model state's bytes, each array once)."""
    loop = self.loop
    (params, model_state), seconds, nbytes = par.transfer((loop.state.params, loop.state.model_state),
                                                          self.rollout_shardings)
    context = {"temperature": loop.controllers.temperature(loop.ctl_state),
               "prompt_states": loop.stage_states["prompt_filters"], "replay_states": loop.stage_states.get("replay")}
    self.box.publish(Weights(version, params, model_state, context))
    return {"async/weight_transfer_s": seconds, "async/weight_transfer_bytes": float(nbytes)}

  def _produce(self, k: int, w: Weights) -> _Produced:
    loop, exp, ctx = self.loop, self.loop.exp, w.context
    sampler = None
    if self.eta > 0 and self.chunk < loop.rl.max_new_tokens:
      sampler = InterruptibleSampler(loop.graphdef, self.box.latest, config=exp.sampler_config, chunk=self.chunk,
                                     partial=loop.rl.async_partial_rollouts, stop_tokens=list(exp.codec.stop_ids),
                                     dtype=loop.rl.sampler_dtype, stop=self.stop)
    elif self.eta > 0:  # one chunk holds every response: nothing to interrupt, the ordinary sampler (tagged)
      sampler = tagged(exp.sample_fn(loop.graphdef, w.params, w.model_state, dtype=loop.rl.sampler_dtype), w.version)
    collected = loop.collect(w.params, w.model_state, k, ctx["temperature"], ctx["prompt_states"],
                             ctx["replay_states"], sample_fn=sampler)
    return _Produced(w.version, collected, loop.loader.get_state(), dict(getattr(sampler, "stats", {})))

  def next(self, s: int):
    """``(collected, data_state, metrics)`` of step ``s`` (waits for the producer)."""
    t = time.perf_counter()
    item = self.producer.get(s)
    self.idle_s += time.perf_counter() - t
    data, dropped, stale_metrics = drop_stale(item.collected.data, s, self.eta, item.version)
    self.dropped += dropped
    collected = item.collected._replace(data=data)
    for name in self.totals:
      self.totals[name] += item.sampler_stats.get(name, 0)
    metrics = {"async/dropped": float(self.dropped), **stale_metrics,
               "async/version_lag": float(s - item.version),
               "async/trainer_idle_fraction": self.idle_s / max(time.perf_counter() - self.t0, 1e-9),
               **{f"async/{k}": float(v) for k, v in self.totals.items()}}
    return collected, item.data_state, metrics

  def after_step(self, s: int, row: dict) -> None:
    """The ``Runner`` protocol (``rljax/train/_runners.py``): step ``s`` trained, so version ``s + 1`` goes to the
    producer; the transfer's metrics join ``row``."""
    row.update(self.publish(s + 1))

  def stop_requested(self, flag: dict) -> bool:
    return par.process_any(flag["set"])

  def close(self) -> None:
    self.producer.close()


def check_async(rl, recipe) -> None:
  """Refuses what ``rl.async_staleness >= 1`` cannot run with (state a stage updates from each step's rewards
  before the next selection, per-row MoE routing the chunked sampler does not record)."""
  eta = rl.async_staleness
  if eta is None or eta == 0:
    return
  if recipe.prompt_filters:
    raise ValueError(f"prompt filters (rl.prompt_filters) observe each step's rewards before the next selection; "
                     f"rl.async_staleness={eta} samples later steps before that: use one or the other (or "
                     "async_staleness=0)")
  if recipe.replay:
    raise ValueError(f"replay stage {recipe.replay[0].name!r} (rl.replay) stores each step's rows before the next "
                     f"step samples; rl.async_staleness={eta} samples later steps before that: use one or the other "
                     "(or async_staleness=0)")
  if rl.routing_replay:
    raise ValueError(f"rl.routing_replay needs the sampler's MoE routing, which rl.async_staleness={eta}'s chunked "
                     "sampler does not record: use one or the other")

