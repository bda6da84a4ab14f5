"""The jitted train step: ``step(state, batch) -> (state, metrics)``.

Functional core (Flax performance guide): the model is split once with
``nnx.split`` into a static ``graphdef``, its trainable ``params`` and the rest
of its state; the step is a plain ``jax.jit`` of a pure function with the
``TrainState`` donated, explicit in/out shardings (parameters replicated, batch
sharded over the ``data`` mesh axis).

Inside one step the batch is split into ``num_microbatches`` equal slices whose
gradients are accumulated (in float32) with ``lax.scan``. Aggregation is exact: the
loss function receives the *global* denominator of the whole batch (e.g. its token
count for ``token_mean``) and the whole batch's *statistics*, so the per-micro-batch
losses sum to the full-batch loss and their gradients sum to the full-batch gradient.
Statistics serve the terms normalised by a statistic of the rows they see
(``clip_cov`` / ``kl_cov`` top-k selections, ``top_entropy_mask`` and
``entropy_gated_contrastive(rho=)`` quantiles, ``tis`` / ``delta_logp_reweight``
mean-1 normalisation) and the MoE load-balancing loss ``E sum_e f_e P_e``: a
*pre-pass* — one forward of the current parameters over the whole batch, without
gradient — computes them before the micro-batches (parameters do not change within
a step, so they are what the full-batch step sees), and each micro-batch receives
its slice of them (``split_statistics``). The pre-pass runs only with
``num_microbatches > 1`` and only when a term or the MoE auxiliary loss needs it.

Non-finite guard: when the loss or any gradient is NaN/inf, the update is
skipped — parameters and optimizer state are kept bit-for-bit — and
``state.num_skipped`` is incremented (reported as ``train/skipped``).

Hyper-parameters that change during training (KL beta, clip bounds, entropy
coefficient, ...) live in ``state.hparams`` as float32 scalars and are passed to
the loss function, so changing them never recompiles.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional, Protocol

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

from rljax.train._mismatch import OUT_LOG_BOUND
from rljax.types import HookedLoss, LossHooks, PolicyOutputs, TrainBatch, loss_hooks

__all__ = ["TrainState", "LossFn", "LossHooks", "HookedLoss", "init_train_state", "make_train_step", "objective_loss", "nll_loss",
           "make_mesh", "merge_model", "split_microbatches", "split_statistics",
           "combine_microbatch_metrics"]


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TrainState:
  """Everything the train step updates (a pytree; donated to the step).

  Attributes:
    params: ``nnx.State`` of the trained variables (``trainable_filter``: every ``nnx.Param``, or the LoRA adapters).
    opt_state: the optax state.
    model_state: the model's non-trainable state (buffers), not differentiated.
    step: int32 scalar, number of step calls (applied or skipped).
    num_skipped: int32 scalar, updates skipped by the non-finite guard.
    hparams: dict of float32 scalars passed to the loss (controller outputs).
  """
  params: Any
  opt_state: Any
  model_state: Any
  step: jax.Array
  num_skipped: jax.Array
  hparams: Mapping[str, jax.Array]

  def replace(self, **changes) -> "TrainState":
    return dataclasses.replace(self, **changes)

  def with_hparams(self, **values) -> "TrainState":
    """New state with some hparams replaced (same dtype/shape, so no recompile)."""
    hp = dict(self.hparams)
    for k, v in values.items():
      if k not in hp:
        raise ValueError(f"unknown hparam {k!r}; state has {sorted(hp)}")
      hp[k] = jnp.asarray(v, jnp.float32)
    return self.replace(hparams=hp)


class LossFn(Protocol):
  """``loss_fn(model, batch, hparams, denominator) -> (loss, metrics)``.

  ``denominator`` is the global aggregation denominator of the whole batch
  (or ``None``). A loss function may declare micro-batching hooks: it is then a
  ``HookedLoss`` whose ``hooks()`` returns a ``LossHooks`` record. Its
  ``denominator(batch, hparams) -> scalar`` makes micro-batching exact; without
  it the per-micro-batch losses are averaged (exact only when micro-batches have
  equal denominators).

  Its ``statistics(model, batch, hparams) -> pytree``: with
  ``num_microbatches > 1`` the step calls it once on the whole batch (the
  pre-pass, no gradient) and calls ``loss_fn(model, mb, hparams, denominator,
  statistics=s)`` with each micro-batch's slice ``s`` (``split_statistics``);
  the loss must then be the micro-batch's exact share of the whole batch's
  loss, batch-level auxiliary terms included. Without it, its
  ``with_aux_weight(w) -> LossFn``: the same loss with its batch-level
  auxiliary term (an MoE load-balancing loss) scaled by ``w``: micro-batching
  uses ``w = 1 / num_microbatches`` so that term is averaged over the
  micro-batches instead of counted once per micro-batch (exact for a mean over
  rows, not for ``E sum_e f_e P_e``).
  """

  def __call__(self, model, batch, hparams, denominator): ...


def merge_model(graphdef, params, model_state):
  """Rebuilds the NNX module from its split parts (inside or outside jit)."""
  return nnx.merge(graphdef, params, model_state)


def trainable_filter(model: nnx.Module):
  """What the optimizer trains: ``nnx.LoRAParam`` when the model carries LoRA adapters (``ModelConfig.lora``:
  the base weights then ride in ``TrainState.model_state``, frozen, with no gradient or optimizer moments), else
  every ``nnx.Param``."""
  return nnx.LoRAParam if getattr(getattr(model, "cfg", None), "lora", None) is not None else nnx.Param


def init_train_state(model: nnx.Module, optimizer: optax.GradientTransformation,
                     hparams: Optional[Mapping[str, float]] = None):
  """Splits ``model`` once (``trainable_filter``: the adapters alone with LoRA); returns ``(graphdef, TrainState)``."""
  graphdef, params, model_state = nnx.split(model, trainable_filter(model), ...)
  opt_state = optimizer.init(params)
  hp = {k: jnp.asarray(v, jnp.float32) for k, v in dict(hparams or {}).items()}
  state = TrainState(params=params, opt_state=opt_state, model_state=model_state,
                     step=jnp.zeros((), jnp.int32), num_skipped=jnp.zeros((), jnp.int32), hparams=hp)
  return graphdef, state


def make_mesh(num_devices: int = 1):
  """Deprecated: ``rljax.parallel.make_mesh(MeshConfig(data=n, fsdp=1), jax.devices()[:n])``.

  A data-parallel mesh over the first ``num_devices`` devices (0 = all); its
  ``fsdp``/``tensor``/``expert`` axes have size 1, so ``make_train_step(mesh=...)``
  replicates parameters and splits the batch over ``data`` as before.
  """
  import warnings  # pylint: disable=import-outside-toplevel

  from rljax.parallel import MeshConfig, make_mesh as parallel_make_mesh  # pylint: disable=import-outside-toplevel
  warnings.warn("rljax.train.make_mesh is deprecated; use rljax.parallel.make_mesh(MeshConfig(data=n, fsdp=1))",
                DeprecationWarning, stacklevel=2)
  devices = jax.devices()
  n = len(devices) if num_devices in (0, None) else int(num_devices)
  if n > len(devices):
    raise ValueError(f"num_devices={n} but only {len(devices)} devices are available")
  return parallel_make_mesh(MeshConfig(data=n, fsdp=1), devices[:n])


def split_microbatches(batch, num: int):
  """Reshapes every leaf ``[B, ...]`` to ``[num, B // num, ...]`` (raises if B % num)."""
  leaves = jax.tree_util.tree_leaves(batch)
  b = leaves[0].shape[0]
  if b % num:
    raise ValueError(f"batch size {b} is not divisible by num_microbatches={num}")
  return jax.tree_util.tree_map(lambda x: x.reshape((num, b // num) + x.shape[1:]), batch)


def split_statistics(statistics, token_shape, num: int):
  """Slices whole-batch statistics for ``num`` micro-batches: every leaf gets a leading ``[num]`` axis.

  Leaves whose shape starts with the batch's token shape ``[B, T]`` (per-token
  selections) are reshaped to ``[num, B // num, T, ...]`` like the batch
  (``split_microbatches``); every other leaf (a mean, a threshold, an expert
  load) is shared: repeated ``num`` times.
  """
  b, t = token_shape

  def one(x):
    x = jnp.asarray(x)
    if x.shape[:2] == (b, t):
      return x.reshape((num, b // num) + x.shape[1:])
    return jnp.broadcast_to(x, (num,) + x.shape)

  return jax.tree_util.tree_map(one, statistics)


def _all_finite(tree) -> jax.Array:
  leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree_util.tree_leaves(tree)
            if jnp.issubdtype(x.dtype, jnp.inexact)]
  return jnp.all(jnp.stack(leaves)) if leaves else jnp.asarray(True)


def _token_count(batch) -> jax.Array:
  mask = getattr(batch, "loss_mask", None)
  return jnp.asarray(1.0 if mask is None else jnp.sum(mask.astype(jnp.float32)), jnp.float32)


def combine_microbatch_metrics(stacked: Mapping[str, jax.Array], tokens: jax.Array) -> dict:
  """Per-micro-batch metrics (stacked on axis 0) -> the batch's: ``loss/numerator`` and
  ``loss/denominator`` summed, keys ending in ``_max`` / ``_min`` reduced by max / min, every other
  metric averaged with each micro-batch weighted by its loss-token count ``tokens [k]`` (exact for
  the per-token means the objectives report: entropy, KL, clip fraction, ...)."""
  w = tokens / jnp.maximum(jnp.sum(tokens), 1e-8)
  out = {}
  for k, v in stacked.items():
    if k in ("loss/numerator", "loss/denominator"):
      out[k] = jnp.sum(v, 0)
    elif k.endswith("_max"):
      out[k] = jnp.max(v, 0)
    elif k.endswith("_min"):
      out[k] = jnp.min(v, 0)
    elif jnp.ndim(v) == 1:
      out[k] = jnp.sum(w * v.astype(jnp.float32))
    else:
      out[k] = jnp.mean(v, 0)
  return out


def make_train_step(graphdef, loss_fn: LossFn, optimizer: optax.GradientTransformation, *,
                    num_microbatches: int = 1, mesh=None, schedule: Optional[Callable] = None,
                    donate: bool = True, jit: bool = True):
  """Builds ``step(state: TrainState, batch) -> (TrainState, metrics)``.

  Args:
    graphdef: from ``init_train_state``.
    loss_fn: see ``LossFn``; ``objective_loss(...)`` adapts an objective.
    optimizer: an optax transformation (``make_optimizer``).
    num_microbatches: gradient-accumulation slices per step (B must divide).
    mesh: a mesh with a ``data`` axis (``rljax.parallel.make_mesh``); parameters are
      replicated and the batch split over ``data``; ``None`` = one device. For FSDP /
      tensor parallelism use ``rljax.parallel.shard_train_step`` instead.
    schedule: learning-rate schedule, only to report ``train/lr``.
    donate: donate the state buffers to the step.
    jit: ``False`` returns the un-jitted function (for tests / debugging).

  With ``num_microbatches > 1`` and a loss function with a ``statistics`` hook
  (``objective_loss`` has one), the step first computes the whole batch's
  statistics (see ``LossFn``; for ``objective_loss`` a forward without gradient
  when a term or the MoE auxiliary loss needs them) and gives each micro-batch
  its slice, so batch-normalised terms and the MoE load-balancing loss are exact.

  Returns the step function. Metrics (float32 scalars): the loss function's
  metrics (over micro-batches: token-weighted means, ``*_max``/``*_min`` by
  max/min, see ``combine_microbatch_metrics``; ``loss`` summed, which is exact
  with a global denominator, and ``loss/denominator`` the global one),
  ``train/grad_norm``, ``train/skipped`` (1 if this update was skipped),
  ``train/num_skipped``, ``train/lr``. Gradients are accumulated over
  micro-batches in float32.
  """
  if num_microbatches < 1:
    raise ValueError(f"num_microbatches must be >= 1, got {num_microbatches}")
  hooks = loss_hooks(loss_fn)
  denominator_fn = hooks.denominator
  statistics_fn = hooks.statistics if num_microbatches > 1 else None
  if num_microbatches > 1 and statistics_fn is None and denominator_fn is not None and hooks.with_aux_weight:
    # (without a global denominator mb_loss below already divides the whole loss by num_microbatches)
    loss_fn = hooks.with_aux_weight(1.0 / num_microbatches)

  def mb_loss(params, model_state, mb, hparams, denominator, statistics=None):
    # copy=True: the frozen variables (model_state; with LoRA the base weights) enter from outside grad_fn's trace,
    # and a loss that constrains them in place (rljax.parallel.fsdp_loss_fn) needs Variables of this trace level
    model = nnx.merge(graphdef, params, model_state, copy=True)
    if statistics is None:
      loss, metrics = loss_fn(model, mb, hparams, denominator)
    else:
      loss, metrics = loss_fn(model, mb, hparams, denominator, statistics=statistics)
    if denominator is None and num_microbatches > 1:
      loss = loss / num_microbatches
    return loss, metrics

  grad_fn = jax.value_and_grad(mb_loss, has_aux=True)

  def step(state: TrainState, batch):
    denominator = denominator_fn(batch, state.hparams) if denominator_fn is not None else None
    if num_microbatches == 1:
      (loss, metrics), grads = grad_fn(state.params, state.model_state, batch, state.hparams, denominator)
    else:
      mbs = split_microbatches(batch, num_microbatches)
      mb_statistics = None
      if statistics_fn is not None:
        # the pre-pass: the whole batch's statistics under the current parameters (outside grad_fn: no gradient)
        statistics = statistics_fn(nnx.merge(graphdef, state.params, state.model_state), batch, state.hparams)
        mb_statistics = split_statistics(statistics, batch.loss_mask.shape, num_microbatches)
      # accumulate in float32 whatever the parameters' dtype (bf16 sums lose precision with k)
      zeros = jax.tree_util.tree_map(lambda p: jnp.zeros(p.shape, jnp.float32), state.params)

      def body(carry, xs):
        (g_acc, l_acc), (mb, s) = carry, xs
        (l, m), g = grad_fn(state.params, state.model_state, mb, state.hparams, denominator, s)
        g_acc = jax.tree_util.tree_map(lambda a, x: a + x.astype(jnp.float32), g_acc, g)
        return (g_acc, l_acc + l), (m, _token_count(mb))

      (grads, loss), (stacked, tokens) = jax.lax.scan(body, (zeros, jnp.zeros((), jnp.float32)),
                                                      (mbs, mb_statistics))
      grads = jax.tree_util.tree_map(lambda g, p: g.astype(p.dtype), grads, state.params)
      metrics = combine_microbatch_metrics(stacked, tokens)
      if denominator is not None:  # the global one (a sum of local denominators is not it for token_sum)
        metrics["loss/denominator"] = jnp.asarray(denominator, jnp.float32)
    metrics = {k: jnp.asarray(v, jnp.float32) for k, v in dict(metrics).items() if jnp.ndim(v) == 0}
    metrics["loss"] = loss.astype(jnp.float32)
    with jax.named_scope("optimizer"):  # names its ops in profiles (benchmarks/real_model_profile.py)
      ok = jnp.isfinite(loss) & _all_finite(grads)
      updates, new_opt = optimizer.update(grads, state.opt_state, state.params)
      new_params = optax.apply_updates(state.params, updates)
      keep = lambda new, old: jax.tree_util.tree_map(lambda n, o: jnp.where(ok, n, o), new, old)
      new_state = state.replace(
          params=keep(new_params, state.params), opt_state=keep(new_opt, state.opt_state),
          step=state.step + 1, num_skipped=state.num_skipped + jnp.where(ok, 0, 1).astype(jnp.int32))
    metrics["train/grad_norm"] = optax.tree.norm(grads).astype(jnp.float32)
    metrics["train/skipped"] = jnp.where(ok, 0.0, 1.0)
    metrics["train/num_skipped"] = new_state.num_skipped.astype(jnp.float32)
    if schedule is not None:
      metrics["train/lr"] = jnp.asarray(schedule(state.step - state.num_skipped), jnp.float32)
    return new_state, metrics

  if not jit:
    return step
  if mesh is None:
    return jax.jit(step, donate_argnums=(0,) if donate else ())
  replicated = NamedSharding(mesh, P())
  data = NamedSharding(mesh, P("data"))
  return jax.jit(step, in_shardings=(replicated, data), out_shardings=(replicated, replicated),
                 donate_argnums=(0,) if donate else ())


# ----------------------------------------------------------------------------- loss adapters


def _policy_outputs(model, batch: TrainBatch, temperature, shared_prefix_len: int = 0, group_size: int = 1,
                    common_prefix_len: int = 0, batch_load=None):
  """The update's ``policy_outputs``: with a shared prompt, its columns are not scored (``prompt_scores=False``:
  every loss reads the completion tokens of ``loss_mask`` only)."""
  from rljax.models import policy_outputs  # pylint: disable=import-outside-toplevel
  return policy_outputs(model, batch.tokens, segment_ids=batch.segment_ids, temperature=temperature,
                        routing=getattr(batch, "routing", None), shared_prefix_len=shared_prefix_len,
                        group_size=group_size, batch_load=batch_load, prompt_scores=False,
                        common_prefix_len=common_prefix_len)


def _num_moe_layers(model) -> int:
  return int(getattr(getattr(model, "cfg", None), "num_moe_layers", 0) or 0)


class objective_loss(HookedLoss):  # pylint: disable=invalid-name
  """Adapts an objective to a ``LossFn``: model forward -> ``PolicyOutputs`` -> objective.

      loss = objective(policy_outputs(model, batch.tokens), batch, denominator)

  Args:
    objective: an ``rljax.objectives.Objective`` (from ``chain``), or a builder
      ``hparams -> Objective`` called inside the trace so that its
      hyper-parameters can be traced arrays from ``state.hparams``.
    temperature: the policy temperature used for log-probs (keep it equal to
      the sampling temperature's training convention; 1.0 = untempered).
    forward: optional ``forward(model, batch) -> PolicyOutputs`` replacing the
      default ``rljax.models.policy_outputs`` call.
    shared_prefix_len, group_size: passed to ``policy_outputs``: every
      ``group_size`` consecutive rows of each (micro-)batch share their first
      ``shared_prefix_len`` tokens (a GRPO group's prompt), which are then run
      once per group and not scored (their ``logp`` / ``entropy`` columns are
      0: a loss reads the ``loss_mask`` tokens, never the prompt). 0 = off.
    common_prefix_len: passed to ``policy_outputs``: every row of each
      (micro-)batch also shares its first ``common_prefix_len`` tokens
      (``< shared_prefix_len``), run once per batch. 0 = off.
    aux_weight: scale of the objective's auxiliary-loss term (see
      ``with_aux_weight``).
    proximal_from_update: the proximal inputs are this forward's own,
      detached: ``batch.logp_old = stop_gradient(out.logp)`` and
      ``batch.entropy_old = stop_gradient(out.entropy)`` before the objective
      (and its statistics) read them. Exact when one optimizer step trains on
      the batch (``updates_per_batch = num_minibatches = 1``; micro-batches
      share the step's parameters): the separate proximal forward would compute
      the same numbers with the same parameters (verl's on-policy path, TRL with
      ``num_iterations = 1``). The train/inference mismatch metrics that forward
      gave (``rollout/logp_gap``, ``rollout/mismatch_kl``, see
      ``rljax/train/_mismatch.py``) then come from this forward, per loss token.
    clip_hparams: the hparam names ``(low, high)`` of the policy term's clip bounds, which the
      ``policy/clip_frac`` diagnostic reads (``Recipe.clip_hparams``); ``()``: the PPO default 0.2, 0.2.

  Micro-batching (``make_train_step(num_microbatches=k > 1)``) calls
  ``statistics`` on the whole batch and each micro-batch with its slice; see
  ``statistics`` for what makes each term exact.
  """

  def __init__(self, objective, *, temperature: float = 1.0, forward: Optional[Callable] = None,
               shared_prefix_len: int = 0, group_size: int = 1, common_prefix_len: int = 0, aux_weight: float = 1.0,
               proximal_from_update: bool = False, clip_hparams: tuple = ()):
    self._objective = objective
    self._clip_hparams = tuple(clip_hparams)
    self._temperature = temperature
    self._forward = forward
    self._shared = (shared_prefix_len, group_size, common_prefix_len)
    self._aux_weight = float(aux_weight)
    self._proximal_from_update = bool(proximal_from_update)

  def with_aux_weight(self, weight: float) -> "objective_loss":
    """The same loss with the auxiliary term (``aux_loss_coef * out.aux_loss``) scaled by ``weight``
    (on top of this loss's own ``aux_weight``)."""
    return objective_loss(self._objective, temperature=self._temperature, forward=self._forward,
                          shared_prefix_len=self._shared[0], group_size=self._shared[1],
                          common_prefix_len=self._shared[2],
                          aux_weight=self._aux_weight * weight, proximal_from_update=self._proximal_from_update,
                          clip_hparams=self._clip_hparams)

  def hooks(self) -> LossHooks:
    """All three: the global denominator, the whole batch's statistics and the auxiliary term's weight."""
    return LossHooks(self.denominator, self.statistics, self.with_aux_weight)

  def _build(self, hparams):
    if hasattr(self._objective, "aggregate"):
      return self._objective
    return self._objective(hparams)

  def denominator(self, batch: TrainBatch, hparams):
    objective = self._build(hparams)
    mask = batch.loss_mask
    return objective.aggregate(jnp.zeros(mask.shape, jnp.float32), mask)[1]

  def _outputs(self, model, batch: TrainBatch, batch_load=None) -> PolicyOutputs:
    if self._forward is not None:
      return self._forward(model, batch)
    return _policy_outputs(model, batch, self._temperature, *self._shared, batch_load=batch_load)

  def _with_proximal(self, out: PolicyOutputs, batch: TrainBatch) -> TrainBatch:
    """``batch`` with the proximal inputs taken from ``out`` (``proximal_from_update``), else unchanged."""
    if not self._proximal_from_update:
      return batch
    entropy = batch.entropy_old if out.entropy is None else jax.lax.stop_gradient(out.entropy)
    return batch.replace(logp_old=jax.lax.stop_gradient(out.logp), entropy_old=entropy)

  def statistics(self, model, batch: TrainBatch, hparams) -> dict:
    """The whole batch's statistics, for exact micro-batching (the pre-pass of ``make_train_step``).

    * ``rows``: B. Without ``batch_load`` an auxiliary loss is taken as a mean
      over rows and enters a micro-batch of ``b`` rows with weight ``b / B``.
    * ``terms``: ``objective.statistics(out, batch)`` — the top-k selections of
      ``clip_cov`` / ``kl_cov``, the entropy quantiles of ``top_entropy_mask`` /
      ``entropy_gated_contrastive(rho=)``, the mean weights of
      ``tis(normalize=True)`` / ``delta_logp_reweight(normalize=True)`` — when a
      term reads one.
    * ``batch_load``, ``aux_loss``: MoE models with ``aux_loss_coef > 0`` (default
      forward): ``(f [E], R) = expert_load`` of the whole batch and its auxiliary
      loss. With f the whole batch's, a micro-batch's load-balancing loss is its
      share ``E sum_e f_e (sum_mb valid p_e) / R`` of the whole batch's
      ``E sum_e f_e P_e``: f carries no gradient and P_e is a token sum over the
      micro-batches, so the shares' values and gradients sum to the whole
      batch's (``rljax.models.load_balancing_loss``). The ``aux_loss`` metric is
      the whole batch's.

    ``terms`` and ``batch_load`` need one forward of the whole batch (no
    gradient, parameters of the step); it runs only when one of them is needed.
    A custom ``forward`` cannot take ``batch_load``: its auxiliary loss is
    weighted by rows.
    """
    objective = self._build(hparams)
    stats = {"rows": jnp.asarray(batch.loss_mask.shape[0], jnp.float32)}
    moe = bool(objective.aux_loss_coef) and self._forward is None and _num_moe_layers(model) > 0
    if objective.needs_statistics or moe:
      out = jax.lax.stop_gradient(self._outputs(model, batch))
      if objective.needs_statistics:
        stats["terms"] = objective.statistics(out, self._with_proximal(out, batch))
      if moe:
        from rljax.models import expert_load  # pylint: disable=import-outside-toplevel
        valid = (jnp.ones(batch.tokens.shape, jnp.float32) if batch.segment_ids is None
                 else (batch.segment_ids != 0).astype(jnp.float32))
        stats["batch_load"] = expert_load(out.routing, valid, model.cfg.num_experts)
        stats["aux_loss"] = out.aux_loss
    return stats

  def __call__(self, model, batch: TrainBatch, hparams, denominator, statistics: Optional[dict] = None):
    objective = self._build(hparams)
    statistics = statistics or {}
    batch_load = statistics.get("batch_load")
    out = self._outputs(model, batch, batch_load)
    batch = self._with_proximal(out, batch)
    extra = {} if self._aux_weight == 1.0 else {"aux_weight": self._aux_weight}
    if "rows" in statistics and batch_load is None:  # an auxiliary loss averaged over rows: this slice's share
      extra["aux_weight"] = self._aux_weight * batch.loss_mask.shape[0] / statistics["rows"]
    if "terms" in statistics:
      extra["statistics"] = statistics["terms"]
    loss, metrics = objective(out, batch, denominator=denominator, **extra)
    metrics = dict(metrics)
    if "aux_loss" in statistics:
      metrics["aux_loss"] = statistics["aux_loss"]
    m = batch.loss_mask.astype(jnp.float32)
    count = jnp.maximum(jnp.sum(m), 1.0)
    if out.entropy is not None:
      metrics["policy/entropy"] = jax.lax.stop_gradient(jnp.sum(out.entropy * m) / count)
    if batch.logp_old is not None:
      # diagnostics: k3 estimate of KL(old || new) and the PPO clip fraction
      log_ratio = jax.lax.stop_gradient(out.logp - batch.logp_old) * m
      ratio = jnp.exp(log_ratio)
      metrics["policy/kl"] = jnp.sum(((ratio - 1.0) - log_ratio) * m) / count
      lo, hi = (hparams[n] for n in self._clip_hparams) if self._clip_hparams else (0.2, 0.2)
      clipped = ((ratio < 1.0 - lo) & (batch.advantages < 0)) | ((ratio > 1.0 + hi) & (batch.advantages > 0))
      metrics["policy/clip_frac"] = jnp.sum(clipped * m) / count
    if self._proximal_from_update and batch.logp_behavior is not None:
      # the train/inference mismatch (rljax/train/_mismatch.py) from this forward: d = logp_trainer - logp_sampler
      d = jax.lax.stop_gradient(out.logp - batch.logp_behavior) * m
      metrics["rollout/logp_gap"] = jnp.sum(jnp.abs(d)) / count
      metrics["rollout/mismatch_kl"] = jnp.sum((jnp.expm1(d) - d) * m) / count
      metrics["rollout/mismatch_out_frac"] = jnp.sum((jnp.abs(d) > OUT_LOG_BOUND) * m) / count
    return loss, metrics


def nll_term(out: PolicyOutputs, batch: TrainBatch):
  """Supervised NLL per token: ``l_t = -log pi(y_t | y_<t)`` on ``loss_mask``."""
  return -out.logp, {}


nll_term.name = "nll"


def nll_loss(*, forward: Optional[Callable] = None) -> objective_loss:
  """The SFT loss: token-mean NLL of the masked (completion) tokens."""
  from rljax.objectives import chain, token_mean  # pylint: disable=import-outside-toplevel
  return objective_loss(chain(nll_term, aggregate=token_mean), forward=forward)
