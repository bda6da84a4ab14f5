"""The asynchronous runner across processes: rollout processes sample, training processes train (multi-controller).

``rl.async_staleness = eta`` with several processes (``jax.distributed``) and ``rl.async_rollout_devices = R``
(a multiple of the devices per process): the mesh is cut by ``rljax.parallel.split_mesh`` into a rollout
sub-mesh (its first ``R`` devices: whole processes) and a training sub-mesh (the other processes). Each
process runs only its side's programs:

* a **rollout process** draws the prompts of batch ``k`` from its own copy of the deterministic data loader
  (same seed and config as the trainer's: the same prompts), samples them with the sampler key of the
  synchronous loop, and sends the sampled arrays to the training side;
* a **training process** runs the rest of the recipe on them (rewards, shaping, filters, forwards,
  advantages, the update, controllers, held-out evaluations) and sends each weight version the rollout side
  needs.

The two sides exchange **only** ``jax.device_put`` reshards between the sub-meshes (JAX's cross-host
transfer; there is no RPC of ours): the batch (tokens, masks, behaviour log-probs and entropies, finish reasons,
per-token versions) rollout -> training, a version's parameters, model state and sampling temperature training
-> rollout.

**Staleness: a deterministic schedule.** Batch ``k`` is sampled with version :func:`sample_version` ``(k, eta)
= max(0, k - eta)``, and its tokens are tagged with it (``StepData.extras["policy_version"]``, ``eta >= 1``). The
one-process runner's gate (``rljax.train._async``) starts batch ``k`` once version ``k - eta`` is published and
samples it with the *latest* version, possibly newer, and its chunked sampler may switch versions inside a
row; here batch ``k`` always uses exactly version ``max(0, k - eta)``, so the staleness of every row of step
``k >= eta`` is exactly ``eta``, and a run is reproducible bit for bit for every ``eta``. ``eta = 0`` is the
synchronous loop: the same prompts, keys and programs on the training sub-mesh's shape, hence the same
metrics and parameters (tested). Generation is not interruptible across processes: ``rl.async_chunk_tokens``
is refused.

**The order of transfers** (:func:`transfer_schedule`) is one sequence both sides walk, because JAX matches a
cross-host ``device_put`` by its position in each process's sequence of transfers (measured, jax 0.10 on CPU:
two processes whose next transfers differ both wait forever). The sequence is ``W0, B0, ..., B(eta), W1,
B(eta+1), W2, ...`` and finally ``W(steps)``: version ``v`` is sent just before the batch sampled with it. The
sender's ``device_put`` returns at once (the data goes in the background, measured); the receiver's waits for
the data. No deadlock: each side's work before its next transfer needs only transfers earlier in the
sequence (the trainer sends ``Wv`` after training ``v`` steps, on batches ``0 .. v - 1``, all received
earlier). The trainer trains a received batch before blocking on the next one, but never past the next
version it must send (that version's parameters would be gone), so sampling batch ``k + eta`` overlaps the
update of step ``k``. The final ``W(steps)`` gives the rollout side the trained parameters, which both sides
then place on the whole mesh for the run's last evaluation (``train``), after meeting at a barrier of JAX's
coordination service. Not a device collective: one entered while a send is still being served can block the
sender's device before it serves the data, and both sides wait forever (seen in 1 or 2 of 6 runs before the
fix). Within the loop neither side runs a program with devices of the other side, so this cannot happen there.

**Checkpoints** (``checkpoint.every``, the final one, SIGTERM) are written by the training processes alone
(``RLLoop.save``, the one-process loop's format; ``Checkpointer(processes=...)``: orbax's barriers over the
training processes only). The rollout side holds no train state and never reads the checkpoint. Assumed:
``out_dir`` is on a filesystem every training process sees.

**The stop protocol (SIGTERM).** A run stops only at a version transfer ``Wv`` with ``start < v < steps``
(:func:`stop_points`). The trainer decides there, after training ``v`` steps: SIGTERM on a training process (its
flag) or on a rollout process (which sets the key :func:`_sigterm_key` in JAX's coordination-service key-value
store at its next batch or version), OR-ed over the training processes. The decision travels in the ``Wv``
message (an int32 pair ``[stop, start]`` beside the temperature), so both sides leave the schedule after the
same transfer and no transfer is left unpaired. Then the trainer saves checkpoint ``v``, both sides meet at a
coordination-service barrier, and both raise ``Preempted``. In-flight rollouts (batches ``v .. v + eta - 1``,
received and scored, not trained) are discarded: the checkpoint's loader state is the one after batch
``v - 1``, so a resumed run draws those prompts again (none lost, none duplicated; tested). A SIGTERM after the
last stop point (within ``eta`` steps of the end) lets the run finish.

**Resume.** From checkpoint ``s0`` batch ``k`` is sampled with version ``max(s0, k - eta)`` and the transfers
are ``transfer_schedule(steps, eta, s0)``. The trainer restores ``s0`` (``RLLoop(resume=True)``); the rollout
side learns it from the first message, ``W(s0)``, and moves its loader to batch ``s0``. ``eta = 0``: a stopped
and resumed run equals the uninterrupted one bit for bit (tested); ``eta >= 1``: the same prompts at every step,
but batches ``s0 .. s0 + eta - 1`` use version ``s0`` (less stale than ``k - eta``), so the run differs from an
uninterrupted one from step ``s0`` on.

What each side holds: rollout processes hold the sampler's copy of the weights only (no optimizer state,
reference or train state); training processes hold the train state and never run the sampler on the rollout
batch. Each side keeps the arrays it sent alive until its next receive (by then the peer has them).

Limits, refused at start-up (``check_multiprocess``, naming the field): the sub-meshes must lie on disjoint
processes and have the same shape (``jax.device_put`` between processes needs the same layout on both sides),
and each side is one process (the loop's host-side collectives, ``rljax.parallel.process_any`` /
``process_sum``, run over one side only when that side is one process); no
``rl.routing_replay``, nor ``rl.sampler_dtype`` with an MoE model (the sampler's routing is not sent); no
recipes whose sampling depends on the trainer's state within a step (prompt filters, refill filters, replay and
hint stages, greedy baselines), nor the shared critic; no multi-turn tasks.

Faults: a process that dies closes its transfer sockets, and the other side's pending ``device_put`` raises
(``SocketServer: Connection closed``); JAX's distributed runtime also stops every process after its heartbeat
timeout (``jax.distributed.initialize(heartbeat_timeout_seconds=...)``, 100 s by default). The first transfer
exchanges the transfer servers' addresses, with a timeout of ``jax_cross_host_transfer_timeout_seconds`` (60 s):
it is made right after the start-up both sides run together.
"""
from __future__ import annotations

import json
import os
import time
import types
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from rljax import parallel as par
from rljax.train._async import drop_stale, tagged
from rljax.train._experiment import log
from rljax.train._metrics import MetricsWriter

__all__ = ["sample_version", "transfer_schedule", "stop_points", "check_multiprocess", "run_rl_multiprocess"]

_BATCH_FIELDS = ("tokens", "prompt_mask", "completion_mask", "logp_behavior", "entropy_behavior", "finish_reason",
                 "policy_version", "token_version")


def sample_version(k: int, eta: int, start: int = 0) -> int:
  """The weight version batch ``k`` is sampled with, in a run (or resumed run) that starts at step ``start``:
  ``max(start, k - eta)``."""
  return max(start, k - eta)


def transfer_schedule(steps: int, eta: int, start: int = 0) -> tuple:
  """The transfers of a run of ``steps`` steps that starts at step ``start`` (0, or the step of the checkpoint it
  resumes from), in the order both sides make them: ``("weights", v)`` (version ``v``, training -> rollout) and
  ``("batch", k)`` (rollout -> training). ``W(start)`` first, ``Wv`` right before the first batch sampled with
  it (:func:`sample_version`), the final ``W(steps)`` last (when ``steps > start``)."""
  ops = [("weights", start)]
  for k in range(start, steps):
    v = sample_version(k, eta, start)
    if v > start and k - eta == v:  # the first batch of version v
      ops.append(("weights", v))
    ops.append(("batch", k))
  if steps > start:
    ops.append(("weights", steps))
  return tuple(ops)


def stop_points(steps: int, eta: int, start: int = 0) -> tuple:
  """The versions at whose transfer a run may stop on SIGTERM (module docstring): every ``Wv`` of the schedule
  with ``start < v < steps``."""
  return tuple(j for kind, j in transfer_schedule(steps, eta, start) if kind == "weights" and start < j < steps)


def _sides(mesh, rollout_devices: int):
  """``(rollout_mesh, train_mesh, rollout processes, training processes)``."""
  rollout, train = par.split_mesh(mesh, rollout_devices, "RLConfig.async_rollout_devices")
  procs = lambda m: tuple(sorted({d.process_index for d in m.devices.flat}))
  return rollout, train, procs(rollout), procs(train)


def check_multiprocess(cfg, mesh, exp, recipe) -> None:
  """Refuses what the multi-process asynchronous runner cannot run (module docstring), naming the field."""
  rl, n = cfg.rl, jax.process_count()
  r = rl.async_rollout_devices
  per = jax.local_device_count()
  allowed = [a for a in par.split_sizes(mesh.shape, "RLConfig.async_rollout_devices")[1] if a % per == 0]
  if not r:
    raise ValueError(f"RLConfig.async_rollout_devices=0 with {n} processes: the rollout and training sides must be "
                     f"disjoint sets of processes; set it to one of {allowed} (whole processes of {per} devices)")
  rollout, train, rp, tp = _sides(mesh, r)
  if set(rp) & set(tp):
    raise ValueError(f"invalid config value RLConfig.async_rollout_devices={r}: processes {sorted(set(rp) & set(tp))} "
                     f"would hold both rollout and training devices (jax.device_put cannot reshard between them); "
                     f"must be one of {allowed} (whole processes of {per} devices)")
  if dict(rollout.shape) != dict(train.shape):
    raise ValueError(f"invalid config value RLConfig.async_rollout_devices={r}: the rollout sub-mesh "
                     f"{dict(rollout.shape)} and the training sub-mesh {dict(train.shape)} differ; a cross-process "
                     f"jax.device_put needs the same layout on both: use {mesh.devices.size // 2}")
  if len(tp) != 1 or len(rp) != 1:
    raise ValueError(f"RLConfig.async_rollout_devices={r} puts the rollout side on processes {list(rp)} and the "
                     f"training side on {list(tp)}: each side must be one process (the loop's host collectives over "
                     f"one side's processes are not written), i.e. 2 processes")
  bad = [(f, v, want) for f, v, want in [
      ("RLConfig.async_chunk_tokens", rl.async_chunk_tokens, "0 (generation is not interruptible across processes)"),
      ("RLConfig.sampler_dtype", rl.sampler_dtype if exp.model.cfg.is_moe else "",
       "'' with an MoE model (the sampler's routing is not sent)"),
      ("RLConfig.routing_replay", rl.routing_replay, "false")] if v]
  if bad:
    f, v, want = bad[0]
    raise ValueError(f"invalid config value {f}={v!r} with rl.async_staleness and {n} processes: must be {want}")
  stages = ([f"prompt filter {pf.name!r}" for pf in recipe.prompt_filters]
            + [f"refill filter {f.name!r}" for f in recipe.filters if f.refill]
            + [f"replay stage {s.name!r}" for s in recipe.replay]
            + (["a greedy baseline (greedy_rewards)"] if "greedy_rewards" in recipe.needs else [])
            + (["a shared critic"] if recipe.critic is not None and recipe.critic.shared else []))
  if stages:
    raise ValueError(f"rl.async_staleness with {n} processes samples each batch on the rollout side from the "
                     f"loader alone; {stages[0]} needs the trainer's state within a step: use one process")
  if exp.multi_turn:
    raise ValueError(f"task.name={cfg.task.name!r} (a multi-turn environment) runs on one process only")


# ----------------------------------------------------------------------------- both sides

def _rows_spec(exp, rl, prompts):
  """Global shapes and dtypes of a batch message (``[B, T]`` and ``[B]`` arrays), from the prompts sampled."""
  b = len(prompts) * rl.group_size
  t = exp.sampler_config.bucket(max(len(p) for p in prompts), "prompts") + rl.max_new_tokens
  spec = {"tokens": ((b, t), np.int32), "prompt_mask": ((b, t), np.uint8), "completion_mask": ((b, t), np.uint8),
          "logp_behavior": ((b, t), np.float32), "finish_reason": ((b,), np.int32), "policy_version": ((b,), np.int32)}
  if exp.sampler_config.return_entropy:
    spec["entropy_behavior"] = ((b, t), np.float32)
  if rl.async_staleness >= 1:
    spec["token_version"] = ((b, t), np.int32)
  return spec


def _empty(spec: dict, sharding) -> dict:
  """Arrays of ``spec`` on ``sharding`` that this process holds no shard of (the receiving side's handle on the
  sender's arrays: zeros that are never placed; ``make_array_from_callback`` calls back only for a replicated
  sharding, whose value it then places on none of this process's devices)."""
  return {k: jax.make_array_from_callback(shape, sharding, lambda idx, s=shape, d=dtype: np.zeros(s, d)[idx],
                                          dtype=dtype)
          for k, (shape, dtype) in spec.items()}


def _client():
  """JAX's coordination-service client (its key-value store and barriers; no device takes part)."""
  from jax._src import distributed  # pylint: disable=import-outside-toplevel
  return distributed.global_state.client


def _sigterm_key(cfg, start: int) -> str:
  """The key-value store key a rollout process sets on SIGTERM (the run's directory and start step: unique to
  this run and this resume of it)."""
  return f"rljax_async_sigterm:{os.path.abspath(cfg.out_dir)}:{start}"


def run_rl_multiprocess(exp, sft_graphdef, sft_state, recipe, writer, mesh, evals: list, *, resume: bool = False,
                        flag=None, checked: bool = False):
  """The RL stage across processes (module docstring); returns ``(graphdef, state)`` with the trained parameters
  and model state on the whole ``mesh`` on every process (``state``: a namespace of ``params``, ``model_state``).
  ``resume``: the training side restores the latest RL checkpoint of ``cfg.out_dir`` (the rollout side learns
  its step from the first weights message). ``flag``: the SIGTERM flag (``flag["set"]``); on SIGTERM both sides
  stop at one stop point, the training side saves, and both raise ``Preempted``."""
  from rljax.train._experiment import Preempted  # pylint: disable=import-outside-toplevel
  cfg = exp.cfg
  flag = {"set": False} if flag is None else flag
  rollout, train, rp, tp = _sides(mesh, cfg.rl.async_rollout_devices)
  host = par.to_host((sft_state.params, sft_state.model_state))  # every process: the SFT state, whole
  host_state = types.SimpleNamespace(params=host[0], model_state=host[1])
  if jax.process_index() in tp:
    side = _Trainer(exp, sft_graphdef, host_state, recipe, writer, rollout, train, evals, checked=checked,
                    resume=resume, flag=flag)
  else:
    side = _Sampler(exp, sft_graphdef, host_state, rollout, train, flag=flag)
  start = side.begin()  # the first transfer, W(start): the trainer sends it, the rollout side learns start from it
  stopped = None
  for kind, j in transfer_schedule(cfg.rl.steps, cfg.rl.async_staleness, start)[1:]:
    if kind == "batch":
      side.batch(j)
    elif side.weights(j):  # the stop flag travelled with this version: both sides stop here
      stopped = j
      break
  if stopped is not None:
    side.stop(stopped)  # the training side saves checkpoint `stopped`
    # as below: the coordination service's barrier (no device), reached by the trainer once it saved; after it
    # the last version is received and the sent arrays may go
    _client().wait_at_barrier(f"rljax_async_stop:{os.path.abspath(cfg.out_dir)}:{start}:{stopped}",
                              timeout_in_ms=600_000)
    side.sent.clear()
    if cfg.checkpoint.enabled:
      raise Preempted(f"SIGTERM: saved RL checkpoint at step {stopped}")
    raise Preempted(f"SIGTERM: stopped at RL step {stopped} (checkpoint.enabled=false: nothing saved)")
  graphdef, params, model_state = side.finish()
  # The rollout side has received the last version (finish waited for it); the trainer may still be serving it.
  # A device collective now (sync_global_devices) can block the trainer's device before it serves the data,
  # and both processes wait forever (seen in 1 or 2 of 6 runs before the fix): meet at the coordination service's
  # barrier instead, which uses no device. After it, no transfer is in flight and the sent arrays may go.
  _client().wait_at_barrier(f"rljax_async_done:{os.path.abspath(cfg.out_dir)}:{start}:{cfg.rl.steps}",
                            timeout_in_ms=600_000)
  side.sent.clear()
  full = (par.place_global(params, par.state_shardings(params, mesh)),
          par.place_global(model_state, par.state_shardings(model_state, mesh)))
  return graphdef, types.SimpleNamespace(params=full[0], model_state=full[1])


class _Sampler:
  """The rollout side: receives versions, samples batches, sends them (the order is the caller's)."""

  def __init__(self, exp, sft_graphdef, host_state, rollout, train, *, flag):
    cfg, rl = exp.cfg, exp.cfg.rl
    self.exp, self.rl, self.eta, self.flag, self.start, self.reported = exp, rl, rl.async_staleness, flag, None, False
    model = nnx.merge(sft_graphdef, host_state.params, host_state.model_state)
    self.graphdef, params, model_state = nnx.split(model, nnx.Param, ...)  # init_train_state's split
    self.to_here = (par.state_shardings(params, rollout), par.state_shardings(model_state, rollout),
                    par.replicated(rollout), par.replicated(rollout))
    scalars = _empty({"t": ((), np.float32), "c": ((2,), np.int32)}, par.replicated(train))
    self.handle = (par.place_global(params, par.state_shardings(params, train)),  # no shard here
                   par.place_global(model_state, par.state_shardings(model_state, train)), scalars["t"], scalars["c"])
    b = rl.batch_size
    self.rows_here, self.rows_there = par.row_sharding(rollout, b), par.row_sharding(train, b)
    lo, hi = par.all_process_rows(self.rows_here, b)[jax.process_index()]
    self.rows = (lo, hi)
    from rljax.train._rl import prompt_loader  # pylint: disable=import-outside-toplevel
    self.loader = prompt_loader(exp, (lo // rl.group_size, hi // rl.group_size))  # the trainer's prompts
    self.base_key = jax.random.PRNGKey(cfg.seed)  # the Collector's sampler keys
    self.weights_v, self.sent, self.log = None, [], []
    self.path = os.path.join(cfg.out_dir, f"rollout_{jax.process_index()}.jsonl")

  def begin(self) -> int:
    """Receives the first version, ``W(start)``, and with it ``start``; sets the loader to batch ``start``."""
    self.weights(None)
    assert self.start == self.weights_v[0] and not self.stop_flag, (self.start, self.stop_flag)
    if self.start:
      state = self.loader.get_state()  # the global batch counter (rljax.parallel.process_batches)
      if set(state) != {"next_index"}:
        raise RuntimeError(f"unexpected prompt loader state {state}: cannot move it to batch {self.start}")
      self.loader.set_state({"next_index": self.start})  # the trainer's, restored from checkpoint `start`
      log(self.exp.cfg, f"[rljax] rollout side: resuming RL at step {self.start}")
    return self.start

  def _report_sigterm(self) -> None:
    """A SIGTERM of this process goes to the training side through the coordination service's key-value store
    (read by the trainer at its next stop point)."""
    if self.flag["set"] and not self.reported and self.start is not None:
      _client().key_value_set(_sigterm_key(self.exp.cfg, self.start), str(jax.process_index()), allow_overwrite=True)
      self.reported = True

  def weights(self, v) -> bool:
    """Receives version ``v`` (``None``: the first, whichever it is); returns the stop flag it carries."""
    self._report_sigterm()
    t = time.perf_counter()
    params, model_state, temperature, ctl = jax.block_until_ready(jax.device_put(self.handle, self.to_here))
    self.sent.clear()  # the peer sent this after receiving everything this side sent before
    stop, start = (int(x) for x in np.asarray(ctl.addressable_data(0)))
    if self.start is None:
      self.start = start
    assert start == self.start, (start, self.start)
    v = start if v is None else v
    self.weights_v = (v, params, model_state, float(np.asarray(temperature.addressable_data(0))))
    self.stop_flag = bool(stop)
    self.wait_s = time.perf_counter() - t
    self._report_sigterm()
    return self.stop_flag

  def stop(self, v: int) -> None:
    del v  # the rollout side holds no train state; its in-flight batches are the trainer's to discard

  def batch(self, k: int) -> None:
    self._report_sigterm()
    v, params, model_state, temperature = self.weights_v
    assert v == sample_version(k, self.eta, self.start), (v, k)
    t = time.perf_counter()
    problems = next(self.loader)
    prompts = [self.exp.codec.prompt_ids(p) for p, _ in problems]
    sample = self.exp.sample_fn(self.graphdef, params, model_state, dtype=self.rl.sampler_dtype)
    if self.eta >= 1:
      sample = tagged(sample, v)
    key = jax.random.fold_in(jax.random.fold_in(self.base_key, k), 0)  # Collector: fold_in(step), round 0
    g = self.rl.group_size
    r = sample(prompts, n=g, greedy=False, temperature=temperature, key=key, rows=self.rows)
    t_sample = time.perf_counter() - t
    spec = _rows_spec(self.exp, self.rl, prompts)
    local = {f: np.asarray(getattr(r, f)).astype(spec[f][1]) for f in spec}
    t = time.perf_counter()
    msg = par.global_batch(local, self.rows_here, self.rl.batch_size)
    self.sent.append(jax.device_put(msg, self.rows_there))  # returns at once; the data goes in the background
    self.sent.append(msg)
    row = {"step": k, "version": v, "weights_wait_s": self.wait_s, "sample_s": t_sample,
           "batch_send_s": time.perf_counter() - t, "batch_bytes": par.tree_bytes(msg)}
    self.wait_s = 0.0
    with open(self.path, "a", encoding="utf-8") as f:
      f.write(json.dumps(row) + "\n")

  def finish(self):
    _, params, model_state, _ = self.weights_v
    return self.graphdef, jax.device_get(params), jax.device_get(model_state)


class _Trainer:
  """The training side: receives batches (through the Collector's sampler call), trains, sends versions."""

  def __init__(self, exp, sft_graphdef, host_state, recipe, writer, rollout, train, evals, *, checked, resume, flag):
    from rljax.train._rl import RLLoop  # pylint: disable=import-outside-toplevel
    cfg, rl = exp.cfg, exp.cfg.rl
    self.exp, self.cfg, self.rl, self.eta, self.evals = exp, cfg, rl, rl.async_staleness, evals
    if isinstance(writer, MetricsWriter) or jax.process_index() == 0:
      self.writer, self.own_writer = writer, False
    else:  # the first training process writes the RL rows (process 0 rolls out)
      self.writer, self.own_writer = MetricsWriter(cfg.out_dir, tensorboard=cfg.tensorboard, append=True), True
    self.loop = RLLoop(exp, sft_graphdef, host_state, recipe, train, resume=resume, evals=evals, writer=self.writer,
                       checked=checked)
    self.flag, self.start = flag, self.loop.start
    self.ops = transfer_schedule(rl.steps, self.eta, self.start)
    self.i = 0  # the next op of self.ops
    p, ms = self.loop.state.params, self.loop.state.model_state
    self.to_there = (par.state_shardings(p, rollout), par.state_shardings(ms, rollout), par.replicated(rollout),
                     par.replicated(rollout))
    self.rows_there = par.row_sharding(rollout, rl.batch_size)
    self.rows_here = par.row_sharding(train, rl.batch_size)
    self.lo, self.hi = par.all_process_rows(self.rows_here, rl.batch_size)[jax.process_index()]
    self.received: dict = {}  # k -> (collected, data_state, receive metrics)
    self.version, self.sent, self.publish_row = self.start, [], {}
    self.data_state = self.loop.loader.get_state()  # the loader after the batches of the steps trained
    self.idle_s, self.t0 = 0.0, time.perf_counter()
    self.last_eval = evals[-1]["greedy_accuracy"] if evals else float("nan")

  # --------------------------------------------------------------------------- transfers

  def begin(self) -> int:
    """Sends the first version, ``W(start)`` (it carries ``start``); returns ``start``."""
    self.weights(self.start)
    return self.start

  def _stop_requested(self) -> bool:
    """SIGTERM on this side (its flag) or on the rollout side (the key-value store), agreed by every training
    process (``process_any``: the same answer on each)."""
    key = _sigterm_key(self.cfg, self.start)
    try:
      remote = bool(_client().key_value_try_get(key))
    except Exception:  # pylint: disable=broad-except  (NOT_FOUND: no rollout process set it)
      remote = False
    stop = par.process_any(bool(self.flag["set"]) or remote, self.loop.processes)
    if stop and jax.process_index() == self.loop.processes[0]:
      try:
        _client().key_value_delete(key)
      except Exception:  # pylint: disable=broad-except
        pass
    return stop

  def weights(self, v: int) -> bool:
    """Trains up to version ``v``, then sends it (a copy: the next update donates the parameters' buffers) with
    the stop flag (decided here, at a stop point) and ``start``; returns the stop flag."""
    self._advance()
    while self.version < v:
      self._train_one()
    loop = self.loop
    stop = self.start < v < self.rl.steps and self._stop_requested()
    t = time.perf_counter()
    temperature = jnp.asarray(loop.controllers.temperature(loop.ctl_state), jnp.float32)
    ctl = jnp.asarray([int(stop), self.start], jnp.int32)
    tree = jax.tree_util.tree_map(jnp.copy, (loop.state.params, loop.state.model_state))
    tree = jax.block_until_ready((*tree, jax.device_put(temperature, par.replicated(loop.mesh)),
                                  jax.device_put(ctl, par.replicated(loop.mesh))))
    self.sent.append(tree)
    self.sent.append(jax.device_put(tree, self.to_there))  # returns at once; the data goes in the background
    self.publish_row = {"async/weight_transfer_s": time.perf_counter() - t,
                        "async/weight_transfer_bytes": float(par.tree_bytes(tree[:2]))}
    return stop

  def stop(self, v: int) -> None:
    """Saves checkpoint ``v`` (``v`` steps trained; the loader state after their batches, so the batches received
    and not trained are drawn again on resume)."""
    assert self.version == v, (self.version, v)
    if self.cfg.checkpoint.enabled:
      self.loop.save(v, self.data_state, False)
    self.loop.ckpt.close()
    log(self.cfg, f"[rljax] SIGTERM: RL across processes stopped at step {v}; received batches "
                  f"{sorted(self.received)} are not trained (their prompts are drawn again on resume)")
    if self.own_writer:
      self.writer.close()

  def batch(self, k: int) -> None:
    """Receives batch ``k`` and runs the recipe's collection on it (rewards, shaping, filters); before blocking,
    trains what is received, up to the next version to send."""
    self._advance()
    nxt = next(j for kind, j in self.ops[self.i:] if kind == "weights")
    while self.version < nxt and self.version in self.received:
      self._train_one()
    loop, got = self.loop, {}

    def receive(prompts, *, n, greedy, temperature, key, rows=None):  # the Collector's sampler call
      del temperature, key  # the rollout side's: the version's temperature, the same key
      if greedy or n != self.rl.group_size or got:
        raise ValueError("the multi-process runner receives one sampled batch per step (n=group_size, not greedy)")
      t = time.perf_counter()
      spec = _rows_spec(self.exp, self.rl, prompts)
      msg = jax.device_put(_empty(spec, self.rows_there), self.rows_here)
      out = {f: np.asarray(x) for f, x in par.host_rows(msg, *rows).items()}
      self.sent.clear()  # the peer sent this after receiving everything this side sent before
      got["s"], got["bytes"] = time.perf_counter() - t, par.tree_bytes(msg)
      mine = [prompts[i // n] for i in range(*rows)]
      pm = out["prompt_mask"].astype(bool)
      if any(list(out["tokens"][i][pm[i]]) != list(p) for i, p in enumerate(mine)):
        raise RuntimeError(f"batch {k}: the rollout side sampled other prompts than this side's loader drew "
                           "(the two sides' data loaders differ)")
      for f in ("prompt_mask", "completion_mask"):
        out[f] = out[f].astype(bool)
      out.setdefault("entropy_behavior", None)
      return types.SimpleNamespace(routing=None, **out)

    collected = loop.collect(None, None, k, loop.controllers.temperature(loop.ctl_state),
                             loop.stage_states["prompt_filters"], loop.stage_states.get("replay"), sample_fn=receive)
    self.idle_s += got["s"]
    self.received[k] = (collected, loop.loader.get_state(),
                        {"async/batch_transfer_s": got["s"], "async/batch_transfer_bytes": float(got["bytes"])})

  def _advance(self) -> None:
    self.i += 1

  # --------------------------------------------------------------------------- one step (run_rl's)

  def _train_one(self) -> None:
    from rljax.train._sft import evaluate_state  # pylint: disable=import-outside-toplevel
    loop, rl, cfg, s = self.loop, self.rl, self.cfg, self.version
    collected, self.data_state, recv = self.received.pop(s)
    v = sample_version(s, self.eta, self.start)
    data, dropped, stale = drop_stale(collected.data, s, self.eta, v)
    collected = collected._replace(data=data)
    row = loop.step(s, collected)
    self.version = s + 1
    row.update({"async/dropped": float(dropped), **stale, "async/version_lag": float(s - v),
                "async/trainer_idle_fraction": self.idle_s / max(time.perf_counter() - self.t0, 1e-9),
                **recv, **self.publish_row})
    row["time/sample_s"] = recv["async/batch_transfer_s"]
    row["rollout/reward_mean"] = collected.stats["reward_mean"]
    done = s + 1 == rl.steps
    if (cfg.eval.every and (s + 1) % cfg.eval.every == 0) or done:
      ev = evaluate_state(self.exp, loop.graphdef, loop.state, jax.random.PRNGKey(10_000 + s), full=False)
      self.last_eval = ev["greedy_accuracy"]
      self.evals.append({"step": s + 1, **ev})
      row["eval/greedy_accuracy"] = self.last_eval
    row["time/rl_s"] = time.perf_counter() - self.t0
    if (s + 1) % cfg.log_every == 0 or "eval/greedy_accuracy" in row:
      self.writer.write("rl", s + 1, row)
    if cfg.checkpoint.enabled and ((s + 1) % cfg.checkpoint.every == 0 or done):  # the training processes only
      loop.save(s + 1, self.data_state, done)

  def finish(self):
    loop = self.loop
    log(self.cfg, f"[rljax] RL across processes done: {self.version} steps, trainer idle fraction "
                  f"{self.idle_s / max(time.perf_counter() - self.t0, 1e-9):.2f}")
    loop.ckpt.close()
    if self.own_writer:
      self.writer.close()
    return loop.graphdef, jax.device_get(loop.state.params), jax.device_get(loop.state.model_state)
