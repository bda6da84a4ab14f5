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

__all__ = ["task_gradient_gram"]


def task_gradient_gram(graphdef, loss, num_tasks: int):
  """See the module docstring."""
  k = int(num_tasks)

  @jax.jit
  def fn(params, model_state, batch, hparams):
    def task_grad(d):
      mask = batch.loss_mask & (batch.task_id == d)[:, None]
      sub = batch.replace(loss_mask=mask)
      denominator = loss.denominator(sub, hparams)

      def value(p):
        return loss(nnx.merge(graphdef, p, model_state), sub, hparams, denominator)[0]

      return jax.grad(value)(params), jnp.any(mask)

    grads, present = zip(*(task_grad(d) for d in range(k)))
    leaves = [jax.tree_util.tree_leaves(g) for g in grads]
    gram = jnp.stack([jnp.stack([sum(jnp.vdot(a.astype(jnp.float32), b.astype(jnp.float32))
                                     for a, b in zip(leaves[i], leaves[j])) for j in range(k)]) for i in range(k)])
    return gram, jnp.stack(present)

  return fn
