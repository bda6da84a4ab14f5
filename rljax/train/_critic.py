"""A separate critic model for critic-based advantages (``Recipe.critic`` with ``shared=False``).

The critic has the policy's architecture and starting weights (the SFT policy: verl and OpenRLHF initialise
the critic from the actor) with a fresh zero value head (``rljax.models.with_value_head``), its own Adam
optimizer and its own jitted step, run on the same mini-batches as the policy update. Its loss is the
recipe's value loss (``value_loss``: PPO's clipped squared error against the GAE returns), token mean. With
``shared=True`` there is no separate model: the value head sits on the policy trunk and the value loss is part
of the policy loss (``Recipe.objective_builder``).
"""
from __future__ import annotations

from rljax.train._config import OptimConfig
from rljax.train._experiment import ShardedStep
from rljax.train._optim import make_optimizer
from rljax.train._step import init_train_state, objective_loss

__all__ = ["CriticTrainer", "SharedCritic", "init_critic_state"]


def init_critic_state(critic, policy_model, total_updates: int):
  """``(graphdef, TrainState, optimizer, schedule)`` of a separate critic built from ``policy_model``."""
  from rljax.models import with_value_head  # pylint: disable=import-outside-toplevel
  opt, sched = make_optimizer(OptimConfig(learning_rate=critic.learning_rate), total_updates)
  graphdef, state = init_train_state(with_value_head(policy_model), opt, critic.loss.initial_hparams())
  return graphdef, state, opt, sched


class CriticTrainer:
  """``state`` (a ``TrainState`` of the critic) and ``step(state, batch) -> (state, metrics)``."""

  shared = False

  def __init__(self, critic, policy_model, mesh, *, total_updates: int, num_microbatches: int,
               shared_prefix_len: int = 0, group_size: int = 1, common_prefix_len: int = 0):
    from rljax.objectives import chain, token_mean  # pylint: disable=import-outside-toplevel
    self.graphdef, state, opt, sched = init_critic_state(critic, policy_model, total_updates)
    term = critic.loss
    loss = objective_loss(lambda hp: chain(term.build(hp), aggregate=token_mean), shared_prefix_len=shared_prefix_len,
                          group_size=group_size, common_prefix_len=common_prefix_len)
    sharded = ShardedStep(self.graphdef, state, loss, opt, mesh, num_microbatches=num_microbatches, schedule=sched)
    self.state, self.step = sharded.state, sharded.step
    self.shardings = sharded.shardings


class SharedCritic:
  """The value head on the policy trunk: nothing to train separately (its loss is in the policy loss)."""

  shared = True
  graphdef = None
  state = None
