"""The run's programs, compiled for a mesh from abstract inputs (nothing is allocated, nothing runs).

Each builder takes a :class:`PlanSpec` and a mesh (``rljax.parallel.topology_mesh`` for a TPU slice, or any
mesh) and returns the compiled program (``jax.stages.Compiled``: ``memory_analysis()``, ``as_text()``). The
pieces are the trainer's own: the recipe from ``rljax.train.recipe_from_config``, ``make_optimizer``,
``init_train_state``, ``objective_loss`` through ``fsdp_loss_fn`` and ``shard_train_step`` (as
``rljax.train``'s ``ShardedStep``), the update's input forward ``forward_fn`` (proximal / reference
log-probs), and the sampler's one jitted program (prefill, KV cache, decode loop: ``rljax.sampling.lower_generate``). Inputs
are ``jax.ShapeDtypeStruct``s carrying their shardings (``nnx.eval_shape`` / ``jax.eval_shape``).

Not compiled (said in the report): a separate critic model's programs, and the shared-prompt layout
(``rl.share_prompt_forward``: the plan scores every row whole, which is the larger program).
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import NamedSharding

__all__ = ["PlanSpec", "compile_train_step", "compile_input_forward", "compile_rollout", "input_forward_needed"]


@dataclasses.dataclass(frozen=True)
class PlanSpec:
  """What the programs are compiled for.

  Attributes:
    model: the policy's ``rljax.models.ModelConfig`` (parameter and compute dtypes included).
    rl: the run's ``rljax.train.RLConfig`` (recipe, optimizer, batch: ``num_prompts`` x ``group_size`` rows).
    prompt_len: prompt tokens per row (the sampler's prompt bucket).
    new_tokens: sampled tokens per row (``rl.max_new_tokens`` unless overridden).
    sampler_dtype: the sampler's parameter dtype (``rl.sampler_dtype`` or the model's).
    prompts: prompts per rollout (default ``rl.num_prompts``); rows = prompts x ``rl.group_size``.
  """
  model: object
  rl: object
  prompt_len: int
  new_tokens: int
  sampler_dtype: str
  prompts: int

  @property
  def rows(self) -> int:
    return self.prompts * self.rl.group_size

  @property
  def seq(self) -> int:
    return self.prompt_len + self.new_tokens

  @property
  def microbatches(self) -> int:
    return self.rl.num_microbatches or 1  # auto (0) is 1 on an accelerator (rljax.train resolve_auto_settings)

  def recipe(self):
    from rljax.train import recipe_from_config  # pylint: disable=import-outside-toplevel
    return recipe_from_config(self.rl)


def _abstract_model(model_cfg):
  from rljax.models import Transformer  # pylint: disable=import-outside-toplevel
  return nnx.eval_shape(lambda: Transformer(model_cfg, rngs=nnx.Rngs(0)))


def _check_rows(spec: PlanSpec, mesh):
  split = int(mesh.shape["data"]) * int(mesh.shape["fsdp"])
  if spec.rows % split:
    raise ValueError(f"the batch of {spec.rows} rows (rl.num_prompts={spec.prompts} x rl.group_size="
                     f"{spec.rl.group_size}) is not divisible by data x fsdp = {split}: every chip must hold "
                     "whole rows")


def _proximal_from_update(spec: PlanSpec, recipe) -> bool:
  from rljax.train import proximal_forward_reason  # pylint: disable=import-outside-toplevel
  return not proximal_forward_reason(recipe, spec.rl, spec.model)


def input_forward_needed(spec: PlanSpec) -> str:
  """Which forward the update's inputs need before it ("reference", "proximal", "reference + proximal", or "")."""
  from rljax.train import PROXIMAL_NEEDS, REFERENCE_NEEDS  # pylint: disable=import-outside-toplevel
  recipe = spec.recipe()
  parts = []
  if recipe.needs & REFERENCE_NEEDS:
    parts.append("reference")
  if recipe.needs & PROXIMAL_NEEDS and not _proximal_from_update(spec, recipe):
    parts.append("proximal")
  return " + ".join(parts)


def _train_batch(spec: PlanSpec, recipe, proximal_from_update: bool):
  from rljax.train import PROXIMAL_NEEDS, REFERENCE_NEEDS  # pylint: disable=import-outside-toplevel
  from rljax.types import TrainBatch  # pylint: disable=import-outside-toplevel
  b, t = spec.rows, spec.seq
  f32 = lambda: jax.ShapeDtypeStruct((b, t), jnp.float32)  # noqa: E731
  extra = {}
  if recipe.needs & PROXIMAL_NEEDS and not proximal_from_update:
    extra.update(logp_old=f32(), entropy_old=f32())
  if recipe.needs & REFERENCE_NEEDS:
    extra.update(logp_ref=f32())
  return TrainBatch(tokens=jax.ShapeDtypeStruct((b, t), jnp.int32),
                    loss_mask=jax.ShapeDtypeStruct((b, t), jnp.bool_), advantages=f32(),
                    group_id=jax.ShapeDtypeStruct((b,), jnp.int32), rewards=jax.ShapeDtypeStruct((b,), jnp.float32),
                    logp_behavior=f32(), **extra)


def compile_train_step(spec: PlanSpec, mesh):
  """The RL update (one optimizer step on ``rows x seq`` tokens, the recipe's loss, ``rl.num_microbatches``)."""
  from rljax import parallel as par  # pylint: disable=import-outside-toplevel
  from rljax.models import Transformer  # pylint: disable=import-outside-toplevel
  from rljax.train import init_train_state, make_train_step, objective_loss  # pylint: disable=import-outside-toplevel
  from rljax.train import make_optimizer  # pylint: disable=import-outside-toplevel
  _check_rows(spec, mesh)
  par.check_mesh_divides(mesh.shape, spec.model)
  rl, recipe = spec.rl, spec.recipe()
  total = max(rl.steps * rl.updates_per_batch * rl.num_minibatches, 1)
  opt, sched = make_optimizer(rl.optim, total)
  graphdef = nnx.split(_abstract_model(spec.model), nnx.Param, ...)[0]
  state = jax.eval_shape(lambda: init_train_state(Transformer(spec.model, rngs=nnx.Rngs(0)), opt,
                                                  recipe.initial_hparams())[1])
  from_update = _proximal_from_update(spec, recipe)
  loss = objective_loss(recipe.objective_builder(), temperature=1.0, group_size=rl.group_size,
                        proximal_from_update=from_update, clip_hparams=recipe.clip_hparams())
  batch = _train_batch(spec, recipe, from_update)
  shardings = par.train_state_shardings(state, mesh)
  b_sh = par.batch_shardings(batch, mesh)
  step = make_train_step(graphdef, par.fsdp_loss_fn(loss, mesh), opt, jit=False,
                         num_microbatches=spec.microbatches, schedule=sched)
  fn = par.shard_train_step(step, shardings, mesh, batch_sharding=b_sh)
  return fn.lower(par.abstract_with_shardings(state, shardings), par.abstract_with_shardings(batch, b_sh)).compile()


def compile_input_forward(spec: PlanSpec, mesh):
  """The update's input forward (reference / proximal log-probs and entropies of the rollout's rows)."""
  from rljax import parallel as par  # pylint: disable=import-outside-toplevel
  from rljax.train import forward_fn  # pylint: disable=import-outside-toplevel
  _check_rows(spec, mesh)
  graphdef, params, model_state = nnx.split(_abstract_model(spec.model), nnx.Param, ...)
  p_sh = par.state_shardings(params, mesh)
  rows_sh = par.row_sharding(mesh, spec.rows)
  tokens = jax.ShapeDtypeStruct((spec.rows, spec.seq), jnp.int32,
                                sharding=NamedSharding(mesh, par.logical_to_spec(("batch", None), mesh,
                                                                                 (spec.rows, spec.seq))))
  ms_sh = par.state_shardings(model_state, mesh)
  fn = forward_fn(graphdef, out_shardings=rows_sh)
  return fn.lower(par.abstract_with_shardings(params, p_sh), par.abstract_with_shardings(model_state, ms_sh),
                  tokens).compile()


def compile_rollout(spec: PlanSpec, mesh, prompts: Optional[int] = None):
  """The sampler's program for one rollout: prefill of ``prompts`` prompts, their KV caches repeated to
  ``prompts x group_size`` rows, and the decode loop to ``new_tokens`` (``rljax.sampling.generate``'s one call)."""
  from rljax import parallel as par  # pylint: disable=import-outside-toplevel
  from rljax.sampling import SamplerConfig, lower_generate  # pylint: disable=import-outside-toplevel
  p = spec.prompts if prompts is None else prompts
  n = spec.rl.group_size
  split = int(mesh.shape["data"]) * int(mesh.shape["fsdp"])
  if (p * n) % split:
    raise ValueError(f"the rollout's {p * n} rows ({p} prompts x {n} samples) are not divisible by data x fsdp "
                     f"= {split}")
  model_cfg = dataclasses.replace(spec.model, param_dtype=spec.sampler_dtype, compute_dtype=spec.sampler_dtype,
                                  lora=None)
  par.check_mesh_divides(mesh.shape, model_cfg)
  graphdef, params = nnx.split(_abstract_model(model_cfg))
  p_sh = par.state_shardings(params, mesh)
  config = SamplerConfig(max_new_tokens=spec.new_tokens, prompt_buckets=(spec.prompt_len,),
                         cache_size=spec.seq, return_routing=False)
  return lower_generate(graphdef, par.abstract_with_shardings(params, p_sh), config=config, prompts=p, n=n,
                        mesh=mesh).compile()
