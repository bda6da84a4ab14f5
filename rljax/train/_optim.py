"""The optax chain used by every stage: global-norm clipping + Adam(W) + schedule."""
from __future__ import annotations

import optax

from rljax.train._config import OptimConfig

__all__ = ["make_schedule", "make_optimizer"]


def make_schedule(cfg: OptimConfig, total_steps: int) -> optax.Schedule:
  """Learning rate per optimizer step: linear warm-up then constant / cosine / linear decay.

  ``lr(s) = lr0 * s / W`` for ``s < W``; afterwards ``lr0`` (constant),
  ``lr0 * (f + (1 - f) * (1 + cos(pi * u)) / 2)`` (cosine) or
  ``lr0 * (1 - (1 - f) * u)`` (linear), with ``u = (s - W) / (S - W)`` and
  ``f = end_factor``.
  """
  lr = float(cfg.learning_rate)
  warm = int(cfg.warmup_steps)
  decay_steps = max(int(total_steps) - warm, 1)
  if cfg.schedule == "constant":
    main = optax.constant_schedule(lr)
  elif cfg.schedule == "cosine":
    main = optax.cosine_decay_schedule(lr, decay_steps, alpha=cfg.end_factor)
  elif cfg.schedule == "linear":
    main = optax.linear_schedule(lr, lr * cfg.end_factor, decay_steps)
  else:  # validated by OptimConfig
    raise ValueError(f"unknown schedule {cfg.schedule!r}")
  if warm == 0:
    return main
  return optax.join_schedules([optax.linear_schedule(0.0, lr, warm), main], [warm])


def make_optimizer(cfg: OptimConfig, total_steps: int) -> tuple[optax.GradientTransformation, optax.Schedule]:
  """``clip_by_global_norm(grad_clip) -> adamw(schedule)``; returns ``(optimizer, schedule)``.

  ``grad_clip=0`` disables clipping. The schedule is returned so the train
  step can log the learning rate it used.
  """
  schedule = make_schedule(cfg, total_steps)
  parts = []
  if cfg.grad_clip > 0:
    parts.append(optax.clip_by_global_norm(cfg.grad_clip))
  parts.append(optax.adamw(schedule, b1=cfg.b1, b2=cfg.b2, eps=cfg.eps, weight_decay=cfg.weight_decay))
  return optax.chain(*parts), schedule
