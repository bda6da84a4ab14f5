"""The asynchronous runner across processes: rollout processes sample, training processes train (multi-controller).

``rl.async_staleness = eta`` with several processes (``jax.distributed``) and ``rl.async_rollout_devices = R``
(a multiple of the devices per process): the mesh is cut by ``rljax.parallel.split_mesh`` into a rollout
sub-mesh (its first ``R`` devices: whole processes) and a training sub-mesh (the other processes). Each
process runs only its side's programs:

* a **rollout process** runs the trainer's Collector on its own copy of the deterministic data loader (same
  seed and config as the trainer's: the same prompts, the synchronous loop's sampler keys, the same reward
  functions) and sends each sampler call's rollouts to the training side: one call per batch, or more with a
  greedy baseline (ReMax's greedy rows) or a refill filter (DAPO's dynamic sampling: the refill rounds follow
  from the rewards, which both sides compute from the same completions, so reward functions must be
  deterministic);
* a **training process** runs the same Collector, whose sampler calls receive those rollouts in order (each
  checked to hold the prompts asked for), then the rest of the recipe (rewards, shaping, filters, forwards,
  advantages, the update, controllers, held-out evaluations), and sends each weight version the rollout side
  needs.

The two sides exchange **only** ``jax.device_put`` reshards between the sub-meshes (JAX's cross-host
transfer; there is no RPC of ours): the batch (tokens, masks, behaviour log-probs and entropies, finish reasons,
per-token versions, and an MoE sampler's routing ``[B, T, L_moe, k]`` when the experiment records it:
``rl.routing_replay`` replays it in the update, ``rl.sampler_dtype`` measures the routing mismatch) rollout ->
training, a version's parameters, model state and sampling temperature training
-> rollout.

**Staleness: a deterministic schedule.** Batch ``k`` is sampled with version :func:`sample_version` ``(k, eta)
= max(0, k - eta)``, and its tokens are tagged with it (``StepData.policy_version``, ``eta >= 1``). The
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
B(eta+1), W2, ...`` and finally ``W(steps)``: version ``v`` is sent just before the batch sampled with it
(``Bk`` is one transfer per sampler call of batch ``k``; both sides' Collectors make the same calls). The
sender's ``device_put`` returns at once (the data goes in the background, measured); the receiver's waits for
the data. No deadlock: each side's work before its next transfer needs only transfers earlier in the
sequence (the trainer sends ``Wv`` after training ``v`` steps, on batches ``0 .. v - 1``, all received
earlier). The training side is a runner of the one-process RL loop (``rljax/train/_runners.py``,
``run_steps``): it trains step ``s`` once batch ``s`` is received, and right after step ``v - 1`` it receives the
batches the schedule puts before ``Wv`` and sends ``Wv`` (later, that version's parameters would be gone), so
sampling batch ``k + eta`` overlaps the update of step ``k``. The final ``W(steps)`` gives the rollout side the trained parameters, which both sides
then place on the whole mesh for the run's last evaluation (``train``), after meeting at a barrier of JAX's
coordination service. Not a device collective: one entered while a send is still being served can block the
sender's device before it serves the data, and both sides wait forever (seen in 1 or 2 of 6 runs before the
fix). Within the loop neither side runs a program with devices of the other side, so this cannot happen there.

**Checkpoints** (``checkpoint.every``, the final one, SIGTERM) are written by the training processes alone
(``RLLoop.save``, the one-process loop's format; ``Checkpointer(processes=...)``: orbax's barriers over the
training processes only). The rollout side holds no train state and never reads the checkpoint. Assumed:
``out_dir`` is on a filesystem every training process sees.

**The stop protocol (SIGTERM or Ctrl-C: ``rljax.train._signals``).** A run stops only at a version transfer ``Wv``
with ``start < v < steps`` (:func:`stop_points`). The trainer decides there, after training ``v`` steps: SIGTERM or
Ctrl-C on a training process (its flag) or on a rollout process (which sets the key :func:`_sigterm_key` in JAX's
coordination-service key-value store at its next batch or version), OR-ed over the training processes. The decision
travels in the ``Wv`` message (an int32 pair ``[stop, start]`` beside the temperature), so both sides leave the
schedule after the same transfer and no transfer is left unpaired. Then the trainer saves checkpoint ``v``, both
sides meet at a coordination-service barrier, and both raise ``Preempted``. In-flight rollouts (batches ``v .. v +
eta - 1``, received and scored, not trained) are discarded: the checkpoint's loader state is the one after batch
``v - 1``, so a resumed run draws those prompts again (none lost, none duplicated; tested). A SIGTERM after the
last stop point (within ``eta`` steps of the end) lets RL finish (``train`` then stops before its final evaluation).

**Resume.** From checkpoint ``s0`` batch ``k`` is sampled with version ``max(s0, k - eta)`` and the transfers
are ``transfer_schedule(steps, eta, s0)``. The trainer restores ``s0`` (``RLLoop(resume=True)``); the rollout
side learns it from the first message, ``W(s0)``, and moves its loader to batch ``s0``. ``eta = 0``: a stopped
and resumed run equals the uninterrupted one bit for bit (tested); ``eta >= 1``: the same prompts at every step,
but batches ``s0 .. s0 + eta - 1`` use version ``s0`` (less stale than ``k - eta``), so the run differs from an
uninterrupted one from step ``s0`` on.

What each side holds: rollout processes hold the sampler's copy of the weights only (no optimizer state,
reference or train state); training processes hold the train state and never run the sampler on the rollout
batch. Each side keeps the arrays it sent alive until its next receive (by then the peer has them).

**Several processes per side.** Each side is any number of whole processes. The loop's host collectives
within a side (``rljax.parallel.process_any`` / ``process_sum`` / ``allgather_rows``: the Collector's prompts and
metric sums, the update's "any row left") run over that side's processes only (``RLLoop.processes``, the
sampler's ``processes``) through ``rljax.parallel.group_allgather``, the key-value store of JAX's coordination
service: no device program, so nothing there can meet a cross-host send (see the barrier above). Each rollout
process loads its rows of the prompts, the rollout side gathers the batch's prompts, and each samples its rows
of the rollout sub-mesh's sampler call; each training process receives its rows. The first training process
writes the RL metrics, each rollout process its ``rollout_<process>.jsonl``; ``finish`` gathers the final
parameters with a program on its own side's devices only. Tested: 4 processes x 1 device, 2 per side (the
synchronous one-process run's parameters and device-computed metrics bit for bit; host-side statistics follow the
row split, as in any multi-process run). The weights' temperature is placed with ``par.place_global``: a
``jax.device_put`` of a process-local array onto a sharding over several processes made an array whose
``addressable_shards`` fail ("input arrays must have one shard each") and whose cross-host send then failed
("CopyArrays only supports destination device list of the same size as the array device lists"), jax 0.10.2 CPU.

Limits, refused at start-up (``check_multiprocess``, naming the field): the sub-meshes must lie on disjoint
processes and have the same shape (``jax.device_put`` between processes needs the same layout on both sides);
no interruptible generation (``rl.async_chunk_tokens``: a version may reach the rollout side only at its place
in the schedule); no recipe stages with state the training side updates every step (prompt filters, replay and
hint stages), nor the shared critic; no multi-turn tasks (an episode is Python objects, not arrays).

Faults: an error on either side ends that process at once (:func:`fail_fast`: the traceback, the error
recorded in the coordination service's key-value store, ``os._exit(1)``); its transfer sockets close, the
other side's pending ``device_put`` raises, and that side ends the same way, printing the first side's error
(or JAX's error polling aborts it first). Tested: a crash on either side ends both processes within seconds
(before, a raising side waited in JAX's shutdown barrier and both were aborted after 300 s). A process that
is killed closes its sockets the same way; JAX's distributed runtime also stops every process after its
heartbeat timeout (``jax.distributed.initialize(heartbeat_timeout_seconds=...)``, 100 s by default). The first transfer
exchanges the transfer servers' addresses, with a timeout of ``jax_cross_host_transfer_timeout_seconds`` (60 s):
it is made right after the start-up both sides run together.

Size: one concern, the two-process asynchronous runner (its protocol is the 110-line docstring above).
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
from rljax.train._cadence import run_steps
from rljax.train._experiment import log
from rljax.train._metrics import MetricsWriter
from rljax.train._rl import RLLoop, prompt_loader
from rljax.train._rollout import Collector
from rljax.train._signals import Preempted, preempted, stop_note
from rljax.train._step import trainable_filter

__all__ = ["sample_version", "transfer_schedule", "stop_points", "check_multiprocess", "run_rl_multiprocess",
           "fail_fast"]

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
  if rl.async_chunk_tokens:
    raise ValueError(f"invalid config value RLConfig.async_chunk_tokens={rl.async_chunk_tokens!r} with "
                     f"rl.async_staleness and {n} processes: must be 0 (generation is not interruptible across "
                     "processes)")
  stages = ([f"prompt filter {pf.name!r}" for pf in recipe.prompt_filters]
            + [f"replay stage {s.name!r}" for s in recipe.replay]
            + (["a shared critic"] if recipe.critic is not None and recipe.critic.shared else []))
  if stages:
    raise ValueError(f"rl.async_staleness with {n} processes collects each batch on the rollout side, which holds "
                     f"no stage state; {stages[0]} keeps state the training side updates every step: use one "
                     "process")
  if exp.multi_turn:
    raise ValueError(f"task.name={cfg.task.name!r} (a multi-turn environment) runs on one process only")
  if rl.target_accuracy is not None:
    raise ValueError(f"invalid config value RLConfig.target_accuracy={rl.target_accuracy!r} with rl.async_staleness "
                     f"and {n} processes: must be None (both sides follow a fixed schedule of rl.steps batches; an "
                     "early stop would leave the rollout side waiting)")


# ----------------------------------------------------------------------------- both sides

def _rows_spec(exp, rl, prompts, n: int):
  """Global shapes and dtypes of a sampler call's message (``[B, T]`` and ``[B]`` arrays, ``B = len(prompts) *
  n``), from the prompts sampled."""
  b = len(prompts) * n
  t = exp.sampler_config.bucket(max(len(p) for p in prompts), "prompts") + rl.max_new_tokens
  spec = {"tokens": ((b, t), np.int32), "prompt_mask": ((b, t), np.uint8), "completion_mask": ((b, t), np.uint8),
          "logp_behavior": ((b, t), np.float32), "finish_reason": ((b,), np.int32), "policy_version": ((b,), np.int32)}
  if exp.sampler_config.return_entropy:
    spec["entropy_behavior"] = ((b, t), np.float32)
  if rl.async_staleness >= 1:
    spec["token_version"] = ((b, t), np.int32)
  m = exp.model.cfg
  if exp.sampler_config.return_routing and m.is_moe:  # the sampler's experts per token (replay / mismatch metrics)
    spec["routing"] = ((b, t, m.num_moe_layers, m.num_experts_per_tok), np.int32)
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
  cfg = exp.cfg
  flag = {"set": False} if flag is None else flag
  rollout, train, rp, tp = _sides(mesh, cfg.rl.async_rollout_devices)
  host = par.to_host((sft_state.params, sft_state.model_state))  # every process: the SFT state, whole
  host_state = types.SimpleNamespace(params=host[0], model_state=host[1])
  name, side = "training" if jax.process_index() in tp else "rollout", None
  client = _client()
  try:
    stopped = None
    if name == "training":  # the RL loop of every runner (run_steps), with this side as its runner
      side = _Trainer(exp, sft_graphdef, host_state, recipe, writer, rollout, train, evals, checked=checked,
                      train_processes=tp, resume=resume, flag=flag)
      start = side.begin()  # the first transfer, W(start), carries start
      try:
        run_steps(exp, side.loop, side, flag, evals)
      except Preempted:  # saved checkpoint `side.stopped`
        stopped = side.stopped
    else:
      side = _Sampler(exp, sft_graphdef, host_state, recipe, rollout, train, flag=flag)
      start = side.begin()  # the rollout side learns start from W(start)
      for kind, j in transfer_schedule(cfg.rl.steps, cfg.rl.async_staleness, start)[1:]:
        if kind == "batch":
          side.batch(j)
        elif side.weights(j):  # the stop flag travelled with this version: both sides stop here
          stopped = j
          break
    if stopped is not None:
      # as below: the coordination service's barrier (no device), reached by the trainer once it saved; after it
      # the last version is received and the sent arrays may go
      client.wait_at_barrier(f"rljax_async_stop:{os.path.abspath(cfg.out_dir)}:{start}:{stopped}",
                             timeout_in_ms=600_000)
      side.sent.clear()
      raise preempted(flag, stop_note("RL", stopped, cfg.checkpoint.enabled))
    graphdef, params, model_state = side.finish()
    # The rollout side has received the last version (finish waited for it); the trainer may still be serving
    # it. A device collective now (sync_global_devices) can block the trainer's device before it serves the
    # data, and both processes wait forever (seen in 1 or 2 of 6 runs before the fix): meet at the coordination
    # service's barrier instead, which uses no device. After it, no transfer is in flight and the sent arrays
    # may go.
    client.wait_at_barrier(f"rljax_async_done:{os.path.abspath(cfg.out_dir)}:{start}:{cfg.rl.steps}",
                           timeout_in_ms=600_000)
  except Preempted:  # a stop both sides agreed on: the caller's normal exit
    raise
  except Exception as err:  # pylint: disable=broad-except
    fail_fast(client, f"rljax_async_error:{os.path.abspath(cfg.out_dir)}",
              f"process {jax.process_index()} ({name} side)", err, getattr(side, "writer", None))
  side.sent.clear()
  full = (par.place_global(params, par.state_shardings(params, mesh)),
          par.place_global(model_state, par.state_shardings(model_state, mesh)))
  return graphdef, types.SimpleNamespace(params=full[0], model_state=full[1])


def fail_fast(client, key: str, who: str, err: BaseException, writer=None) -> None:
  """Ends this process at once after ``err`` on one side (``os._exit(1)``), so that the other side does not
  wait: its pending transfer raises as soon as this process's sockets close ("recv() failed ... Transport
  endpoint is not connected", measured within 0.1 s) and it comes here too, unless JAX's error polling, which
  sees this process disconnect, aborts it first (SIGABRT, "the JAX distributed service detected fatal
  errors"); either way within seconds. Returning normally instead would
  hold both processes in JAX's shutdown barrier for ``shutdown_timeout_seconds`` (300 s; measured: 322 s
  until both were aborted). Before exiting, it prints the traceback, records ``who: error`` in the
  coordination service's key-value store under ``key`` and prints the other side's record if there is one
  (the first failure, when this side only saw the connection close), and closes ``writer`` (TensorBoard's
  buffer; the JSONL rows are already flushed)."""
  import sys  # pylint: disable=import-outside-toplevel
  import traceback  # pylint: disable=import-outside-toplevel
  traceback.print_exception(err)
  first = None
  try:
    client.key_value_set(f"{key}/{jax.process_index()}", f"{who}: {type(err).__name__}: {err}"[:2000])
    first = [v for k, v in client.key_value_dir_get(key) if not k.endswith(f"/{jax.process_index()}")]
  except Exception:  # pylint: disable=broad-except
    pass  # the coordination service may be gone with the other process
  msg = f"[rljax] {who} failed: {type(err).__name__}: {err}"
  if first:
    msg += f"\n[rljax] the run failed first on {first[0]}"
  print(msg + "\n[rljax] ending this process now (the other side stops too)", file=sys.stderr, flush=True)
  try:
    if writer is not None:
      writer.close()
  finally:
    sys.stdout.flush()
    os._exit(1)  # pylint: disable=protected-access


class _Sampler:
  """The rollout side: receives versions, collects batches, sends every sampler call's rollouts (the order of
  versions and batches is the caller's).

  It runs the trainer's :class:`~rljax.train._rollout.Collector` (the same loader, keys, reward functions and
  recipe), so it makes the sampler calls the training side's Collector will ask for, in the same order: a
  greedy baseline's call, refill rounds (decided from the rewards, which both sides compute from the same
  completions: reward functions must be deterministic). Each call's rollouts are sent as they come; the
  Collector's own result here is not used."""

  def __init__(self, exp, sft_graphdef, host_state, recipe, rollout, train, *, flag):
    cfg, rl = exp.cfg, exp.cfg.rl
    self.exp, self.rl, self.eta, self.flag, self.start, self.reported = exp, rl, rl.async_staleness, flag, None, False
    self.meshes = (rollout, train)
    model = nnx.merge(sft_graphdef, host_state.params, host_state.model_state)
    self.graphdef, params, model_state = nnx.split(model, trainable_filter(model), ...)  # init_train_state's split
    self.to_here = (par.state_shardings(params, rollout), par.state_shardings(model_state, rollout),
                    par.replicated(rollout), par.replicated(rollout))
    scalars = _empty({"t": ((), np.float32), "c": ((2,), np.int32)}, par.replicated(train))
    self.handle = (par.place_global(params, par.state_shardings(params, train)),  # no shard here
                   par.place_global(model_state, par.state_shardings(model_state, train)), scalars["t"], scalars["c"])
    g = rl.group_size
    prompt_rows = {p: (lo // g, hi // g)
                   for p, (lo, hi) in par.all_process_rows(par.row_sharding(rollout, rl.batch_size),
                                                           rl.batch_size).items()}
    loader = prompt_loader(exp, prompt_rows[jax.process_index()])  # the trainer's prompts
    self.collect = Collector(exp, recipe, loader, self.graphdef, prompt_rows=prompt_rows,
                             base_key=jax.random.PRNGKey(cfg.seed), num_dataset_prompts=len(exp.train_problems),
                             needs=recipe.needs)
    self.weights_v, self.sent, self.log = None, [], []
    self.path = os.path.join(cfg.out_dir, f"rollout_{jax.process_index()}.jsonl")

  def begin(self) -> int:
    """Receives the first version, ``W(start)``, and with it ``start``; sets the loader to batch ``start``."""
    self.weights(None)
    assert self.start == self.weights_v[0] and not self.stop_flag, (self.start, self.stop_flag)
    if self.start:
      state = self.collect.loader.get_state()  # the global batch counter (rljax.parallel.process_batches)
      if set(state) != {"next_index"}:
        raise RuntimeError(f"unexpected prompt loader state {state}: cannot move it to batch {self.start}")
      self.collect.loader.set_state({"next_index": self.start})  # the trainer's, restored from checkpoint `start`
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

  def batch(self, k: int) -> None:
    self._report_sigterm()
    v, params, model_state, temperature = self.weights_v
    assert v == sample_version(k, self.eta, self.start), (v, k)
    sample = self.exp.sample_fn(self.graphdef, params, model_state, dtype=self.rl.sampler_dtype)
    if self.eta >= 1:
      sample = tagged(sample, v)
    row = {"step": k, "version": v, "weights_wait_s": self.wait_s, "calls": 0, "sample_s": 0.0, "batch_send_s": 0.0,
           "batch_bytes": 0}

    def sample_and_send(prompts, *, n, rows, **kwargs):  # the Collector's sampler call
      t = time.perf_counter()
      r = sample(prompts, n=n, rows=rows, **kwargs)
      t_sample = time.perf_counter() - t
      spec = _rows_spec(self.exp, self.rl, prompts, n)
      local = {f: np.asarray(getattr(r, f)).astype(spec[f][1]) for f in spec}
      t = time.perf_counter()
      b = len(prompts) * n
      msg = par.global_batch(local, par.row_sharding(self.meshes[0], b), b)
      self.sent.append(jax.device_put(msg, par.row_sharding(self.meshes[1], b)))  # returns at once
      self.sent.append(msg)
      row.update(calls=row["calls"] + 1, sample_s=row["sample_s"] + t_sample,
                 batch_send_s=row["batch_send_s"] + time.perf_counter() - t,
                 batch_bytes=row["batch_bytes"] + par.tree_bytes(msg))
      return r

    self.collect(None, None, k, temperature, {}, None, sample_fn=sample_and_send)
    self.wait_s = 0.0
    with open(self.path, "a", encoding="utf-8") as f:
      f.write(json.dumps(row) + "\n")

  def finish(self):
    _, params, model_state, _ = self.weights_v  # received: every send of this side was received before it
    return self.graphdef, *par.to_host((params, model_state))  # several processes: a gather on this side only


class _Trainer:
  """The training side, a ``Runner`` of the RL loop (``rljax/train/_runners.py``): ``next(s)`` receives batches
  (through the Collector's sampler call) until step ``s``'s is in hand; ``after_step(s)`` sends version ``s + 1``
  when the schedule has it (after receiving the batches that precede it), with the stop decision at a stop point.

  The transfers are made in the order of :func:`transfer_schedule`, as the rollout side makes them: the loop
  trains step ``s`` once its batch is received, and ``Wv`` is sent right after step ``v - 1`` trained, so the
  update of step ``k`` overlaps the sampling of batch ``k + eta``."""

  def __init__(self, exp, sft_graphdef, host_state, recipe, writer, rollout, train, evals, *, checked,
               train_processes, resume, flag):
    cfg, rl = exp.cfg, exp.cfg.rl
    self.exp, self.cfg, self.rl, self.eta, self.evals = exp, cfg, rl, rl.async_staleness, evals
    self.first = jax.process_index() == min(train_processes)  # the training side's writer and log
    if isinstance(writer, MetricsWriter) or not self.first:
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
    self.rollout_mesh = rollout
    self.received: dict = {}  # k -> (collected, data_state, receive metrics)
    self.version, self.sent, self.publish_row, self.stopped = self.start, [], {}, None
    self.idle_s, self.t0 = 0.0, time.perf_counter()

  # --------------------------------------------------------------------------- the Runner protocol

  def begin(self) -> int:
    """Sends the first version, ``W(start)`` (it carries ``start``); returns ``start``."""
    assert self.ops[0] == ("weights", self.start), self.ops[:1]
    self.i = 1
    self.weights(self.start)
    return self.start

  def next(self, s: int) -> tuple:
    """Receives the schedule's batches until batch ``s``'s is in hand; returns it (stale rows dropped), the loader
    state after it, and the ``async/...`` metrics."""
    while s not in self.received:
      kind, k = self.ops[self.i]
      assert kind == "batch", (s, self.ops[self.i])  # Wv goes right after step v - 1 (after_step)
      self.i += 1
      self.batch(k)
    collected, data_state, recv = self.received.pop(s)
    v = sample_version(s, self.eta, self.start)
    data, dropped, stale = drop_stale(collected.data, s, self.eta, v)
    row = {"async/dropped": float(dropped), **stale, "async/version_lag": float(s - v),
           "async/trainer_idle_fraction": self.idle_s / max(time.perf_counter() - self.t0, 1e-9),
           **recv, "time/sample_s": recv["async/batch_transfer_s"]}
    return collected._replace(data=data), data_state, row

  def after_step(self, s: int, row: dict) -> None:
    """Step ``s`` trained: sends ``W(s + 1)`` if the schedule has it next (receiving the batches before it
    first), with the stop decision at a stop point; adds the last send's metrics to ``row``."""
    self.version = s + 1
    at = next((j for j in range(self.i, len(self.ops)) if self.ops[j][0] == "weights"), None)  # the next send
    if at is not None and self.ops[at][1] == self.version:
      while self.i < at:  # batches sampled with versions already sent
        self.i += 1
        self.batch(self.ops[self.i - 1][1])
      self.i += 1
      if self.weights(self.version):
        self.stopped = self.version
    row.update(self.publish_row)

  def stop_requested(self, flag: dict) -> bool:
    """The stop decided at the last version sent (``flag`` and the rollout side's report were read there, at a
    stop point: both sides leave the schedule after that transfer)."""
    del flag
    return self.stopped is not None

  def close(self) -> None:
    if self.stopped is not None:
      log(self.cfg, f"[rljax] RL across processes stopped at step {self.stopped} (a signal); received batches "
                    f"{sorted(self.received)} are not trained (their prompts are drawn again on resume)")
    if self.own_writer:
      self.writer.close()

  # --------------------------------------------------------------------------- transfers

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
    """Sends version ``v``, the parameters now (a copy: the next update donates their buffers), with the stop
    flag (decided here, at a stop point) and ``start``; returns the stop flag."""
    assert self.version == v, (self.version, v)
    loop = self.loop
    stop = self.start < v < self.rl.steps and self._stop_requested()
    t = time.perf_counter()
    temperature = np.float32(par.to_host(loop.controllers.temperature(loop.ctl_state)))
    ctl = np.asarray([int(stop), self.start], np.int32)
    tree = jax.tree_util.tree_map(jnp.copy, (loop.state.params, loop.state.model_state))
    # place_global, not jax.device_put: with several training processes a host value goes to each process's
    # devices (a device_put of this process's array onto the side's replicated sharding made a broken array)
    tree = jax.block_until_ready((*tree, par.place_global(temperature, par.replicated(loop.mesh)),
                                  par.place_global(ctl, par.replicated(loop.mesh))))
    self.sent.append(tree)
    self.sent.append(jax.device_put(tree, self.to_there))  # returns at once; the data goes in the background
    self.publish_row = {"async/weight_transfer_s": time.perf_counter() - t,
                        "async/weight_transfer_bytes": float(par.tree_bytes(tree[:2]))}
    return stop

  def batch(self, k: int) -> None:
    """Receives batch ``k`` and runs the recipe's collection on it (rewards, shaping, filters)."""
    loop, got = self.loop, {"s": 0.0, "bytes": 0, "calls": 0}

    def receive(prompts, *, n, greedy, temperature, key, rows):  # the Collector's sampler call
      del greedy, temperature, key  # the rollout side's Collector made the same call
      t = time.perf_counter()
      b = len(prompts) * n
      spec = _rows_spec(self.exp, self.rl, prompts, n)
      msg = jax.device_put(_empty(spec, par.row_sharding(self.rollout_mesh, b)), par.row_sharding(loop.mesh, b))
      out = {f: np.asarray(x) for f, x in par.host_rows(msg, *rows).items()}
      self.sent.clear()  # the peer sent this after receiving everything this side sent before
      got.update(s=got["s"] + time.perf_counter() - t, bytes=got["bytes"] + par.tree_bytes(msg),
                 calls=got["calls"] + 1)
      mine = [prompts[i // n] for i in range(*rows)]
      pm = out["prompt_mask"].astype(bool)
      if any(list(out["tokens"][i][pm[i]]) != list(p) for i, p in enumerate(mine)):
        raise RuntimeError(f"batch {k}, sampler call {got['calls']}: the rollout side sampled other prompts than "
                           "this side's Collector asked for (the two sides' loaders or reward decisions differ)")
      for f in ("prompt_mask", "completion_mask"):
        out[f] = out[f].astype(bool)
      out.setdefault("entropy_behavior", None)
      out.setdefault("routing", None)
      return types.SimpleNamespace(**out)

    collected = loop.collect(None, None, k, loop.controllers.temperature(loop.ctl_state),
                             loop.stage_states["prompt_filters"], loop.stage_states.get("replay"), sample_fn=receive)
    self.idle_s += got["s"]
    self.received[k] = (collected, loop.loader.get_state(),
                        {"async/batch_transfer_s": got["s"], "async/batch_transfer_bytes": float(got["bytes"]),
                         "async/sampler_calls": float(got["calls"])})

  def finish(self):
    loop = self.loop  # run_steps closed its checkpointer; close() the writer
    if self.first and self.cfg.progress is not None:  # log() prints on process 0, a rollout process
      print(f"[rljax] RL across processes done: {self.version} steps, trainer idle fraction "
            f"{self.idle_s / max(time.perf_counter() - self.t0, 1e-9):.2f}", flush=True)
    # several training processes: a gather on the training devices only, like the updates' collectives (the
    # rollout side runs no program with them), while the final version may still be in flight
    return loop.graphdef, *par.to_host((loop.state.params, loop.state.model_state))
