"""What the objective rows' stages read: the needs and controller-movable arguments of the loss terms.

Each objective module declares its rows with the stage beside the function: ``stage=loss_term_factory(fn, ...)``
(``rljax.stages.loss_term_factory``: a ``LossTerm`` stage factory with ``fn``'s arguments), with these helpers.
Every term reads ``PolicyOutputs`` (the current policy: ``logp``, ``entropy``) and ``TrainBatch`` fields; the
factory declares which batch inputs the loop must compute (``rljax.stages.NEEDS``, here ``*_needs``) and which
arguments a controller may move (``hparams``: ``eps_low -> clip_low``, ``eps_high -> clip_high``, ``beta ->
kl_beta``, ``coef -> entropy_coef``). A ratio term reads ``logp_old`` (the proximal policy, recomputed before the
update); corrections compare it with the sampler's ``logp_behavior``. The aggregation stages are in
``_aggregation``, ``kl_in_reward``'s shaping stage in ``_kl``.
"""
from __future__ import annotations

from rljax.objectives import _ratio_utils as U

CLIP = {"eps_low": "clip_low", "eps_high": "clip_high"}  # hparams of a clipped ratio term
EPS_HIGH = {"eps_high": "eps_low"}  # fill: eps_high=None takes eps_low's value (both stay movable)


def logp_needs(*names):
  """Needs of a term that reads log-prob sources given by argument ``names`` (``None`` = proximal)."""
  def needs(arguments):
    return {need for need in (U.logp_need(arguments.get(n)) for n in names) if need}
  return needs


def segment_needs(arguments):
  """``segment_ratio``'s ids: the step's reward segments (default) or turn ids; other sources need nothing."""
  src = arguments.get("segment_ids", "reward_segments")
  return {src} if src in ("reward_segments", "turn_ids") else set()


def source_needs(extra=()):
  """Needs of a term with an entropy ``source`` argument: ``entropy_old`` when ``source="old"``, plus ``extra``."""
  def needs(arguments):
    return ({"entropy_old"} if arguments.get("source") == "old" else set()) | set(extra)
  return needs


def delta_logp_needs(arguments):
  """``delta_logp_reweight`` reads ``batch.logp_old`` when its probabilities come from the old policy."""
  default = "old" if arguments.get("form", "linear") == "linear" else "current"
  return {"logp_old"} if (arguments.get("source") or default) == "old" else set()


def entropy_gated_needs(arguments):
  """``entropy_gated_contrastive`` reads the reference's entropy when its ``entropy_key`` names it."""
  return {"entropy_ref"} if arguments.get("entropy_key") in ("entropy_base", "entropy_ref") else set()


def entropy_base_extras(data) -> dict:
  """``entropy_gated_contrastive``'s ``batch_extras``: ``{"entropy_base": entropy_ref [B, T]}`` (its default
  ``entropy_key``: the frozen reference's token entropies) when the step computed them, else nothing."""
  return {} if data.entropy_ref is None else {"entropy_base": data.entropy_ref}
