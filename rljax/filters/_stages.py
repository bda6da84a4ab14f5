"""How the RL loop runs each filter: ``rljax.stages.Filter`` / ``PromptFilter`` stages (each row's ``stage``,
declared beside its filter) and the helpers that build them.

Row filters return ``keep [B]`` (dropped rows leave the batch: no loss, no statistics); padding and
filtered-out rows (``valid`` False) never enter a statistic and are never kept. The group filters
(``zero_variance``, ``variance_topp``, ``vcrl``) take ``refill=True``: the loop then replaces dropped groups
with newly sampled ones (DAPO dynamic sampling, up to ``rl.max_refills`` extra sampling rounds; verl
``max_num_gen_batches``). ``void_turn`` reads ``data.turns`` (single-turn tasks: one turn, the completion);
``rorecomp`` keeps its priority rows (short-correct | long-incorrect).

Advantage-phase filters (``negative_advantage_drop``, ``shuffle_pairs``) read ``data.advantages``. A row's
advantage, when the estimator wrote token-level ``[B, T]`` ones, is the one on its first completion token
(``R - V(prompt)`` for GAE with ``gamma = lambda = 1``, A-LoL's sequence-level advantage; the value itself for
estimators that broadcast one advantage over the row); a row with no completion token reads 0.
``shuffle_pairs`` returns row indices (a resampling of the batch) drawn with ``data.key``.

Prompt filters (``PromptFilter``, recipe slot ``prompt_filters``): ``greso``, ``pilot_commit``,
``difficulty_budget``. The loop keeps a static layout: every group has ``group_size`` rows and the rows beyond
a prompt's count are sampled but masked out; a budget re-allocates the valid rows within that layout (it does
not save sampling compute). Their ``observe`` reads every row of the step's batch, masked or not (each is a
rollout of the prompt at ``data.prompt_index``), so a group dropped by a row filter still counts.

Every factory runs its stage once on a tiny step (``probe_step``) when it is built: bad hyper-parameters fail
at start-up, not mid-run.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from rljax.stages import Filter, StepData, checked, data_stage_factory, keyword

GROUP = {"group_id": "group_id", "num_groups": "num_groups", "valid": "valid"}
REFILL = (keyword("refill", False),)


def row_advantages(data: StepData) -> np.ndarray:
  """``[B]`` advantages: ``data.advantages``, or its value on each row's first completion token if ``[B, T]``."""
  adv = np.asarray(data.require("advantages", "an advantage-phase filter"), np.float32)
  if adv.ndim == 1:
    return adv
  cm = np.asarray(data.completion_mask, bool)
  first = adv[np.arange(adv.shape[0]), np.argmax(cm, axis=1)]
  return np.where(cm.any(1), first, 0.0).astype(np.float32)


# ----------------------------------------------------------------------------- prompt filters


def per_prompt(data: StepData):
  """``(prompt ids [P'] unique dataset indices, row -> position in ids [B])`` over every row of the batch."""
  return np.unique(np.asarray(data.prompt_index, np.int64), return_inverse=True)


def layout(group_size: Optional[int], name: str) -> int:
  """The run's ``group_size`` (bound from ``RunFacts``), or an error naming the unbound prompt filter."""
  if group_size is None:
    raise ValueError(f"prompt filter {name!r} is not bound to the run (stage.bind(RunFacts)): its group_size "
                     "is unknown")
  return int(group_size)


def row_filter(fn, inputs, **kw):
  """The stage factory of a row filter ``fn``: ``data_stage_factory(fn, Filter, inputs=inputs, **kw)``, whose
  stages run once on a tiny step when built (``checked``)."""
  return checked(data_stage_factory(fn, Filter, inputs=inputs, **kw))
