"""How the RL loop runs each reward and shaping row: the helpers that build the stages the rows name (``stage=``,
declared beside each function).

Rewards are host functions ``(completions, problems) -> [B]`` (``rljax.stages.Reward``): the text verifiers
compare each completion with its problem's reference answer (``problem.answer``). Shaping stages
(``rljax.stages.Shaping``) return new rewards from the step's data: lengths are completion token counts,
``correct`` is the task's verifier (0/1) whatever the reward.

Numeric rewards (``gaussian_reward``, ``clipped_linear_reward``) compare the number a completion gives with its
problem's reference, both read by a ``parse`` argument (see :func:`gaussian_reward`). Process-reward shaping
(``prm_clip``, ``prm_delta``, ``correctness_gated``) reads ``data.step_rewards [B, S]`` / ``step_mask`` (the
task's ``step_rewards``) and returns one sequence reward: for the PRM refinements the outcome plus the sum of
the refined valid steps, ``data.rewards + sum_s r'_s`` (Gao et al. add the success reward to the dense
process return); for ``correctness_gated`` ``r_outcome + w * 1[correct] * mean_s(process)`` over valid steps.
``length_penalty`` adds its length reward to ``data.rewards``; ``grpo_lambda`` and ``rubric_dropout``
(criteria: the recipe's reward columns ``data.reward_components``; its key: ``data.key``) replace it.
Every data stage runs once on a tiny step when built (``rljax.filters._stages.checked``): bad
hyper-parameters fail at start-up.
"""
from __future__ import annotations

import numpy as np

from rljax.stages import Reward, Shaping, _signature, checked, data_stage_factory


def verifier(fn):
  """Stage factory of a text verifier ``fn(completions, references, **hyper)``: references = answers."""
  sig = _signature(fn, drop=("completions", "references", "return_info"))

  def factory(**hyper):
    bound = sig.bind(**hyper)
    fn([""], [""], **bound.arguments)  # validates the hyper-parameters now

    def reward(completions, problems):
      return fn(list(completions), [p.answer for p in problems], **bound.arguments)

    reward.__name__ = fn.__name__
    return Reward(reward, name=fn.__name__)

  factory.__signature__ = sig
  factory.__name__ = fn.__name__
  factory.__doc__ = f"Stage factory of the ``{fn.__name__}`` verifier (references: each problem's answer)."
  return factory


# ----------------------------------------------------------------------------- shaping from the step's data


def process_mean(data) -> np.ndarray:
  """``[B]`` mean of each row's valid process (step) rewards; 0 for a row without a valid step."""
  r = np.asarray(data.require("step_rewards", "correctness_gated"))
  r = r.astype(np.result_type(np.float32, r.dtype))  # float64 stays float64 (x64)
  m = np.asarray(data.step_mask if data.step_mask is not None else np.ones(r.shape, bool), bool)
  return np.where(m, r, 0.0).sum(1) / np.maximum(m.sum(1), 1)


def plus_outcome_steps(out, data):
  """Shaped step rewards ``[B, S]`` -> the sequence reward ``data.rewards + sum_s r'_s`` (outcome + process)."""
  steps, metrics = out
  steps = np.asarray(steps)
  return data.rewards + steps.astype(np.result_type(np.float32, steps.dtype)).sum(1), metrics


def shaping_stage(fn, inputs, probe=None, **kw):
  """The stage factory of a shaping function ``fn``: ``data_stage_factory(fn, Shaping, inputs=inputs, **kw)``,
  whose stages run once on a tiny step when built (``probe(hyper_parameters)`` gives that step, if passed)."""
  build = data_stage_factory(fn, Shaping, inputs=inputs, **kw)
  return checked(build) if probe is None else checked(build, probe)


GROUP = {"group_id": "group_id", "num_groups": "num_groups", "valid": "valid"}
STEPS = {"step_rewards": "step_rewards", "step_mask": "step_mask"}


