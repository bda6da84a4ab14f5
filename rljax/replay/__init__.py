"""Replay buffers: past rollouts re-enter the batch (ExGRPO, RAPO, MobileRL positive replay, RoRecomp, SPEAR).

Host-side (NumPy) and stateful: each technique is a ``rljax.stages.Replay`` stage (recipe slot ``replay``,
``--set rl.replay='exgrpo(ratio=0.5)'``) whose state is a fixed-capacity ``ReplayBuffer`` kept in the
checkpoint. The selection rules are pure functions in ``_buffer`` (``rapo_plan``, ``positive_replay_plan``,
``exgrpo_pick``/``exgrpo_trajectory``, ``compensation_plan``); the stages in ``_stages`` apply them and declare
the catalog rows (``TECHNIQUES``). A replayed row enters the batch with its *stored* behaviour log-probs
(``logp_behavior``), so the corrections (``tis``, ``icepop``, ``decoupled_ppo``, ...) see the true off-policy gap;
its proximal ``logp_old`` is recomputed under the current policy or set to the stored behaviour log-probs (the
stage's ``logp_old``).
See ``docs/recipes.md`` (replay).
"""
from rljax._technique import gather_room
from rljax.replay import _stages
from rljax.replay._buffer import (ReplayBuffer, adapr_push_plan, adapr_sample_plan, compensation_plan, empty_buffer,  # noqa: F401
                                  exgrpo_bucket_probs, exgrpo_pick, exgrpo_trajectory, positive_replay_plan, rapo_plan,
                                  spear_plan, spear_recalibrate)
from rljax.replay._stages import SpearState, exgrpo, positive_replay, rapo_replay, rorecomp_compensation, spear_replay  # noqa: F401

# declared in _stages, beside the stage factories. ``__all__``: these rules of _buffer, then every technique module's
# ``__all__`` (gather_room; a new module is found there)
TECHNIQUES, __all__ = gather_room(globals(), _stages.TECHNIQUES, extra=(
    "ReplayBuffer", "empty_buffer", "rapo_plan", "positive_replay_plan", "exgrpo_pick", "exgrpo_bucket_probs",
    "exgrpo_trajectory", "adapr_push_plan", "adapr_sample_plan", "compensation_plan", "spear_plan", "spear_recalibrate"))
