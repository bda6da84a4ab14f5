"""Per-task gradients of a step's loss, as a Gram matrix (the ``task_gradients`` need: TAC's transferability).

``task_gradient_gram(graphdef, loss, num_tasks)`` returns a jitted ``fn(params, model_state, batch, hparams) ->
(gram [K, K] float32, present [K] bool)``: for each task ``d``, ``g_d = grad_theta L_d(theta)`` with ``L_d`` the
recipe's loss (``loss``, an ``objective_loss``) on the batch with its loss mask restricted to the rows of
task ``d`` (``batch.task_id``) and its own aggregation denominator; ``gram[d, d'] = <g_d, g_d'>`` summed over
every parameter (float32), ``present[d]`` = task ``d`` has a trained token. It costs one backward pass per task
(``K`` of them, on the whole batch, without micro-batching), so it runs only when a stage needs it.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from rljax.types import loss_hooks

__all__ = ["task_gradient_gram"]


def task_gradient_gram(graphdef, loss, num_tasks: int):
  """See the module docstring."""
  k = int(num_tasks)
  denominator_of = loss_hooks(loss).denominator
  if denominator_of is None:
    raise ValueError(f"task_gradient_gram needs a loss with a denominator hook (rljax.train.objective_loss), got "
                     f"{loss!r}")

  @jax.jit
  def fn(params, model_state, batch, hparams):
    def task_grad(d):
      mask = batch.loss_mask & (batch.task_id == d)[:, None]
      sub = batch.replace(loss_mask=mask)
      denominator = denominator_of(sub, hparams)

      def value(p):
        return loss(nnx.merge(graphdef, p, model_state), sub, hparams, denominator)[0]

      return jax.grad(value)(params), jnp.any(mask)

    grads, present = jax.vmap(task_grad)(jnp.arange(k))  # one batched backward: [K, ...] per parameter
    flat = [g.reshape(k, -1).astype(jnp.float32) for g in jax.tree_util.tree_leaves(grads)]
    gram = sum(f @ f.T for f in flat)
    return gram, present

  return fn
