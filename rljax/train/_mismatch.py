"""Train/inference mismatch diagnostics of one RL step (host, float64): the log-prob gap and the routing gap.

The sampler and the trainer score the same rollout tokens; where they run different numerics (``rl.sampler_dtype``:
a bfloat16 sampler next to a float32 trainer) or route an MoE's tokens to other experts, their log-probs differ.
Logged per RL step (``RLLoop.step``), each a mean over this step's valid rows of every process:

* ``rollout/logp_gap``  = mean over completion tokens of ``|logp_sampler - logp_trainer|``;
* ``rollout/mismatch_kl`` = mean over completion tokens of the k3 estimate ``r - 1 - log r``,
  ``r = pi_trainer(y_t) / pi_sampler(y_t)``: with ``y_t`` drawn by the sampler it estimates
  ``KL(pi_sampler || pi_trainer)`` per token (verl's rollout-correction ``k3`` metric; exact for the
  untempered, untruncated sampling of the default ``rl.temperature=1``, ``top_k=0``, ``top_p=1``);
* ``rollout/mismatch_out_frac`` = the share of completion tokens whose ratio ``r`` lies outside ``[1/2, 2]``
  (``|log r| > log 2``): the tokens a token-level correction with those bounds (MIS ``[0.5, 2]``, TIS cap 2)
  would change;
* ``rollout/routing_mismatch`` (MoE models) = the share of routing decisions, one per (token, MoE layer), whose
  set of ``k`` experts differs between the sampler and the trainer's own router on the same tokens. The tokens
  are those the sampler fed through the model: every prompt and completion token except each row's last one
  (sampled, never fed, so never routed).

``logp_trainer`` is the trainer's forward with the current parameters (the proximal forward): the parameters that
sampled the batch, except with ``rl.rollout_ahead``, whose sampler ran one update earlier, and with
``rl.async_staleness >= 1``, whose tokens may come from up to that many updates earlier (the gap then includes
those updates). Under ``rl.routing_replay`` it replays the sampler's routing; then
``rollout/logp_gap_no_replay`` and ``rollout/mismatch_kl_no_replay`` come from the forward without replay that
the routing metric needs.
"""
from __future__ import annotations

import numpy as np

from rljax import parallel as par

__all__ = ["logp_gap_sums", "routing_sums", "routed_positions", "finish", "OUT_LOG_BOUND"]

OUT_LOG_BOUND = float(np.log(2.0))  # rollout/mismatch_out_frac: |log r| beyond this, r outside [1/2, 2]


def logp_gap_sums(logp_sampler, logp_trainer, mask, prefix: str = "") -> dict:
  """Sums (float64) over ``mask [B, T]`` of ``|d|``, ``exp(d) - 1 - d`` and ``|d| > log 2``,
  ``d = logp_trainer - logp_sampler``, and the token count, keyed for :func:`finish`."""
  m = np.asarray(mask, bool)
  d = (np.asarray(logp_trainer, np.float64) - np.asarray(logp_sampler, np.float64))[m]
  return {f"gap{prefix}": float(np.abs(d).sum()), f"k3{prefix}": float(np.sum(np.expm1(d) - d)),
          f"out{prefix}": float(np.sum(np.abs(d) > OUT_LOG_BOUND)), f"tokens{prefix}": float(m.sum())}


def routed_positions(prompt_mask, completion_mask, valid) -> np.ndarray:
  """``[B, T]`` bool: the tokens the sampler routed (prompt and completion tokens of ``valid`` rows, without each
  row's last token). Rows are left-aligned: ``prompt | completion | padding``."""
  real = np.asarray(prompt_mask, bool) | np.asarray(completion_mask, bool)
  last = real.sum(1) - 1
  routed = real.copy()
  rows = np.flatnonzero(last >= 0)
  routed[rows, last[rows]] = False
  return routed & np.asarray(valid, bool)[:, None]


def routing_sums(routing_sampler, routing_trainer, positions) -> dict:
  """Counts of (token, MoE layer) decisions at ``positions [B, T]`` and of those whose expert *sets* differ
  (``routing_* [B, T, L_moe, k]``; the order of the ``k`` ids does not matter)."""
  a = np.sort(np.asarray(routing_sampler), axis=-1)
  b = np.sort(np.asarray(routing_trainer), axis=-1)
  differ = np.any(a != b, axis=-1)  # [B, T, L]
  pos = np.asarray(positions, bool)
  return {"routing_differ": float(differ[pos].sum()), "routing_decisions": float(pos.sum() * a.shape[2])}


def finish(sums: dict, processes=None) -> dict:
  """The ``rollout/...`` metrics from the sums of every process (``rljax.parallel.process_sum``; ``processes``:
  those taking part, None = every process)."""
  total = par.process_sum(sums, processes)
  out = {}
  for suffix in ("", "_no_replay"):
    if f"tokens{suffix}" in total:
      n = max(total[f"tokens{suffix}"], 1.0)
      out[f"rollout/logp_gap{suffix}"] = total[f"gap{suffix}"] / n
      out[f"rollout/mismatch_kl{suffix}"] = total[f"k3{suffix}"] / n
      if f"out{suffix}" in total:
        out[f"rollout/mismatch_out_frac{suffix}"] = total[f"out{suffix}"] / n
  if "routing_decisions" in total:
    out["rollout/routing_mismatch"] = total["routing_differ"] / max(total["routing_decisions"], 1.0)
  return out
