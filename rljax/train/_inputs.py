"""The policy-side inputs a recipe needs, computed once per step and only when some stage declares them.

* ``logp_old`` / ``entropy_old``: a forward of the current parameters (the proximal policy, before this
  step's updates) on the rollout tokens — and, with a shared critic, its value head's ``values``;
* ``logp_ref`` / ``entropy_ref`` / ``logp_teacher``: a forward of the frozen reference (the policy at the
  start of RL; it is also the teacher, ``logp_teacher``);
* ``values``: the separate critic's forward;
* the extras the recipe's loss terms build themselves (``LossTerm.batch_extras``: e.g. preference pairs), and the
  inputs that declare an extras key (``StepData.extras_fields``).

Nothing here runs when nothing needs it (no reference forward without a KL term, ...). Results are host arrays
of this process's rows, put into the step's ``StepData``; ``train_batch`` turns the ``StepData`` into the
global ``TrainBatch`` of the update.

With ``replay`` (``rl.routing_replay``, R3) the policy's forwards here (proximal, reference) replay the sampler's
MoE routing ``data.routing``; the separate critic is another model and routes with its own router. With
``diagnose`` (``rl.sampler_dtype`` or ``rl.routing_replay`` set) the train/inference mismatch metrics
(``rljax/train/_mismatch.py``) are computed every step, running the trainer's forward for them when the recipe
needs no proximal one; without it they are computed whenever the proximal forward runs anyway. The routing
mismatch of an MoE model needs the trainer's own routing: the forward without replay (the proximal one when
nothing is replayed, else one extra forward).
"""
from __future__ import annotations

import functools

import jax
import numpy as np
from flax import nnx

from rljax import parallel as par
from rljax.stages import LossTerm, StepData, produced_by
from rljax.train import _mismatch
from rljax.types import TrainBatch

__all__ = ["StepInputs", "forward_fn", "train_batch", "host_batch", "with_batch_extras", "proximal_forward_reason",
           "REFERENCE_NEEDS", "PROXIMAL_NEEDS"]

# the needs each forward produces, as their StepData fields declare them (``by=``)
PROXIMAL_NEEDS = produced_by("policy forward")
REFERENCE_NEEDS = produced_by("reference forward")
CRITIC_NEEDS = produced_by("critic forward")
# the fields a forward writes whenever it runs, from its outputs (log-probs, entropies, values); every other need
# it produces is its log-probs under another name (``logp_teacher``: the teacher is the reference)
_POLICY_OUT, _REFERENCE_OUT = ("logp_old", "entropy_old"), ("logp_ref", "entropy_ref")


def proximal_forward_reason(recipe, rl, model_cfg) -> str:
  """Why this run needs the separate proximal forward (``logp_old`` / ``entropy_old`` before the update), or ""
  when the update's own forward gives them (``rl.proximal_forward="auto"``, ``objective_loss(proximal_from_update=
  True)``): one optimizer step per batch (``updates_per_batch = num_minibatches = 1``), so the update's parameters
  are the proximal policy's; only the policy loss reads them (not a host stage such as an advantage or a
  controller); no replay stage (it swaps in stored rows' behaviour log-probs as ``logp_old``);
  not an MoE model (its routing metrics need the trainer's own router before the update)."""
  needs = recipe.needs & PROXIMAL_NEEDS
  if not needs:
    return "nothing reads logp_old / entropy_old"
  if rl.proximal_forward == "separate":
    return "rl.proximal_forward=separate"
  if rl.updates_per_batch != 1 or rl.num_minibatches != 1:
    return (f"{rl.updates_per_batch} update(s) x {rl.num_minibatches} mini-batch(es) per batch: the proximal policy "
            "is the first update's")
  critic = None if recipe.critic is None else recipe.critic.loss
  outside = [s.name for s in recipe.stages()
             if (not isinstance(s, LossTerm) or s is critic) and s.needs & PROXIMAL_NEEDS]
  if outside:
    return f"stage(s) {outside} read {sorted(needs)} outside the loss"
  if recipe.replay:
    return f"replay stage {recipe.replay[0].name!r} sets logp_old of its stored rows"
  if getattr(model_cfg, "is_moe", False):
    return "an MoE model (its routing metrics need the trainer's router before the update)"
  return ""


def forward_fn(graphdef, *, out_shardings=None, shared_prefix_len: int = 0, group_size: int = 1,
               common_prefix_len: int = 0):
  """``fn(params, model_state, tokens, routing=None, segment_ids=None) -> (logp, entropy, values or None, routing
  or None)`` jitted (``policy_outputs``; ``routing [B, T, L_moe, k]`` is replayed when given; the routing used
  comes back; ``segment_ids [B, T]``: the attention packing, e.g. an episode's context windows). With a shared
  prompt its columns are 0 (``prompt_scores=False``): the stages read completion tokens only."""
  from rljax.models import policy_outputs  # pylint: disable=import-outside-toplevel

  mesh = getattr(out_shardings, "mesh", None)

  @functools.partial(jax.jit, out_shardings=out_shardings)
  def fn(params, model_state, tokens, routing=None, segment_ids=None):
    model = nnx.merge(graphdef, params, model_state)
    if mesh is not None:  # on a multi-chip TPU mesh the fused head runs vocabulary-sharded (Mosaic needs shard_map)
      par.sharded_head(model, mesh)
    out = policy_outputs(model, tokens, routing=routing, segment_ids=segment_ids,
                         shared_prefix_len=shared_prefix_len, group_size=group_size, prompt_scores=False,
                         common_prefix_len=common_prefix_len)
    return out.logp, out.entropy, out.values, out.routing

  return fn


class StepInputs:
  """Computes a step's needs (see the module docstring) into its ``StepData``."""

  def __init__(self, graphdef, needs, *, rows_sharding, batch_size: int, shared_prefix_len: int, group_size: int,
               common_prefix_len: int = 0, ref_params=None, critic=None, replay: bool = False, diagnose: bool = False,
               batch_extras=()):
    self.needs = frozenset(needs)
    self.batch_extras = tuple(batch_extras)  # the recipe's LossTerm.batch_extras
    self.replay, self.diagnose = replay, diagnose
    self.rows_sh, self.batch_size = rows_sharding, batch_size
    self.lo, self.hi = par.process_rows(rows_sharding, batch_size)
    self.processes = tuple(sorted(par.all_process_rows(rows_sharding, batch_size)))  # the host collectives' group
    kw = dict(out_shardings=rows_sharding, shared_prefix_len=shared_prefix_len, group_size=group_size,
              common_prefix_len=common_prefix_len)
    self.forward = forward_fn(graphdef, **kw)
    self.ref_params = ref_params
    self.critic = critic  # a CriticTrainer (separate critic) or None
    self.shared_values = critic is not None and critic.shared
    self.critic_forward = forward_fn(critic.graphdef, **kw) if critic is not None and not critic.shared else None

  def _host(self, x):
    return None if x is None else np.asarray(par.host_rows(x, self.lo, self.hi), np.float32)

  def policy_logp(self, state, tokens, routing=None, segment_ids=None):
    """``logp [B, T]`` (global array) of ``state``'s policy on ``tokens`` (``routing`` replayed when given;
    ``segment_ids``: the attention packing)."""
    return self.forward(state.params, state.model_state, tokens, routing, segment_ids)[0]

  def __call__(self, data: StepData, state, critic_state=None, metrics: dict | None = None) -> StepData:
    """``data`` with the needed forwards' results; the mismatch metrics (if any) go into ``metrics``."""
    needs = self.needs
    if self.replay and data.routing is None:
      raise ValueError("rl.routing_replay: the rollout has no routing (the sampler records it for MoE models only)")
    placed = par.global_batch({"tokens": data.tokens, "routing": data.routing if self.replay else None,
                               "segment_ids": data.segment_ids}, self.rows_sh, self.batch_size)
    tokens, replayed, seg = placed["tokens"], placed["routing"], placed["segment_ids"]
    changes, trainer = {}, None  # trainer: (logp, routing used) of the current parameters on the rollout
    if needs & PROXIMAL_NEEDS or (self.shared_values and needs & CRITIC_NEEDS):
      logp, ent, values, routing = self.forward(state.params, state.model_state, tokens, replayed, seg)
      changes.update(zip(_POLICY_OUT, (self._host(logp), self._host(ent))))
      changes.update({n: changes[_POLICY_OUT[0]] for n in needs & PROXIMAL_NEEDS - set(_POLICY_OUT)})
      trainer = (logp, routing)
      if self.shared_values:
        changes.update({n: self._host(values) for n in CRITIC_NEEDS})
    if needs & REFERENCE_NEEDS:
      logp, ent, _, _ = self.forward(self.ref_params, state.model_state, tokens, replayed, seg)
      changes.update(zip(_REFERENCE_OUT, (self._host(logp), self._host(ent))))
      changes.update({n: changes[_REFERENCE_OUT[0]] for n in needs & REFERENCE_NEEDS - set(_REFERENCE_OUT)})
    if self.critic_forward is not None and needs & CRITIC_NEEDS:
      values = self._host(self.critic_forward(critic_state.params, critic_state.model_state, tokens, None, seg)[2])
      changes.update({n: values for n in CRITIC_NEEDS})
    if metrics is not None and (self.diagnose or trainer is not None):
      metrics.update(self._mismatch(data, state, tokens, replayed, trainer, seg))
    return with_batch_extras(data.replace(**changes), self.batch_extras)

  def _mismatch(self, data: StepData, state, tokens, replayed, trainer, seg=None) -> dict:
    """The train/inference mismatch metrics (``rljax/train/_mismatch.py``) of this step's valid rows."""
    if trainer is None:
      logp, _, _, routing = self.forward(state.params, state.model_state, tokens, replayed, seg)
      trainer = (logp, routing)
    mask = data.completion_mask & data.valid[:, None]
    sums = _mismatch.logp_gap_sums(data.logp_behavior, self._host(trainer[0]), mask)
    if data.routing is not None:
      own = trainer[1]
      if replayed is not None:  # the trainer's own routing: one more forward, without replay
        logp, _, _, own = self.forward(state.params, state.model_state, tokens, None, seg)
        sums.update(_mismatch.logp_gap_sums(data.logp_behavior, self._host(logp), mask, "_no_replay"))
      own = np.asarray(par.host_rows(own, self.lo, self.hi))
      routed = _mismatch.routed_positions(data.prompt_mask, data.completion_mask, data.valid)
      sums.update(_mismatch.routing_sums(data.routing, own, routed))
    return _mismatch.finish(sums, self.processes)


def with_batch_extras(data: StepData, batch_extras=()) -> StepData:
  """``data`` with the ``extras`` the update reads that the step's inputs provide: each loss term's own
  (``LossTerm.batch_extras``, ``fn(data) -> {key: [B, ...]}``: preference pairs, the reference's entropy under a
  term's own key), then each set input that declares an extras key (``StepData.extras_fields``:
  ``logp_teacher``). The live inputs phase and the start-up check both build them here."""
  extras = dict(data.extras)
  for build in batch_extras:
    extras.update(build(data))
  for field, key in StepData.extras_fields().items():
    value = getattr(data, field)
    if value is not None:
      extras[key] = value
  return data.replace(extras=extras)


def train_batch(data: StepData, rows_sharding, batch_size: int, *, routing: bool = False) -> TrainBatch:
  """The update's global ``TrainBatch`` from this process's ``StepData`` rows (``host_batch``, placed on
  ``rows_sharding``)."""
  return TrainBatch(**par.global_batch(host_batch(data, routing=routing), rows_sharding, batch_size))


def host_batch(data: StepData, *, routing: bool = False) -> dict:
  """The ``TrainBatch`` fields (host arrays) of this process's ``StepData`` rows: what ``train_batch`` places, and
  what the start-up check builds its batch from.

  ``loss_mask`` = completion tokens of valid rows; ``advantages`` ``[B]`` are broadcast over it (``[B, T]``
  ones are masked by it); optional fields are copied when set, as ``StepData`` declares them
  (``StepData.train_batch_fields``: ``logp_old``, ``logp_ref``, ``entropy_old``, ``values`` -> ``values_old``,
  ``returns``, ``turn_ids``, ``task_id``, ``segment_ids``);
  ``reward_segments`` -> ``extras["reward_segments"]``. ``TrainBatch.segment_ids`` is the attention packing:
  ``data.segment_ids`` when the rows pack several sequences (an episode's context windows), else None (one row =
  one sequence). ``routing``: the sampler's MoE
  routing goes into ``TrainBatch.routing``, so the update replays it (``rl.routing_replay``).
  """
  loss_mask = data.completion_mask & data.valid[:, None]
  adv = np.asarray(data.advantages, np.float32)
  adv = (adv[:, None] if adv.ndim == 1 else adv) * loss_mask
  host = {"tokens": data.tokens, "loss_mask": loss_mask, "advantages": adv.astype(np.float32, copy=False),
          "group_id": data.group_id, "rewards": np.asarray(data.rewards, np.float32),
          "logp_behavior": data.logp_behavior}
  optional = {to: getattr(data, field) for field, to in StepData.train_batch_fields().items()}
  optional["routing"] = data.routing if routing else None
  if routing and data.routing is None:
    raise ValueError("rl.routing_replay: the rollout has no routing (the sampler records it for MoE models only)")
  host.update({k: v for k, v in optional.items() if v is not None})
  extras = {k: np.asarray(v) for k, v in data.extras.items()
            if np.ndim(v) >= 1 and np.shape(v)[0] == data.batch_size}
  if data.reward_segments is not None:  # a reward-segment index, not the attention packing (TrainBatch.segment_ids)
    extras["reward_segments"] = np.asarray(data.reward_segments, np.int32)
  return {**host, "extras": extras}
