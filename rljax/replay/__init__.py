"""Replay buffers: past rollouts re-enter the batch (ExGRPO, RAPO, MobileRL positive replay, RoRecomp, SPEAR).

Host-side (NumPy) and stateful: each technique is a ``rljax.stages.Replay`` stage (recipe slot ``replay``,
``--set rl.replay='exgrpo(ratio=0.5)'``) whose state is a fixed-capacity ``ReplayBuffer`` kept in the
checkpoint. The selection rules are pure functions in ``_buffer`` (``rapo_plan``, ``positive_replay_plan``,
``exgrpo_pick``/``exgrpo_trajectory``, ``compensation_plan``); the stages in ``_stages`` apply them. A
replayed row enters the batch with its *stored* behaviour log-probs (``logp_behavior``), so the corrections
(``tis``, ``icepop``, ``decoupled_ppo``, ...) see the true off-policy gap; its proximal ``logp_old`` is
recomputed under the current policy or set to the stored behaviour log-probs (the stage's ``logp_old``).
See ``docs/recipes.md`` (replay).
"""
from rljax._technique import Fidelity, Technique
from rljax.replay._buffer import (ReplayBuffer, adapr_push_plan, adapr_sample_plan, compensation_plan, empty_buffer,
                                  exgrpo_bucket_probs, exgrpo_pick, exgrpo_trajectory, positive_replay_plan, rapo_plan,
                                  spear_plan, spear_recalibrate)
from rljax.replay._stages import SpearState, exgrpo, positive_replay, rapo_replay, rorecomp_compensation, spear_replay

__all__ = ["ReplayBuffer", "empty_buffer", "rapo_plan", "positive_replay_plan", "exgrpo_pick", "exgrpo_bucket_probs",
           "exgrpo_trajectory", "adapr_push_plan", "adapr_sample_plan", "compensation_plan", "rapo_replay",
           "positive_replay", "exgrpo", "rorecomp_compensation", "spear_replay", "spear_plan", "spear_recalibrate",
           "SpearState", "TECHNIQUES"]

_S0 = "000_3e503271be254a43.txt"
_S1 = "001_5839a3671b0b4d92.txt"

TECHNIQUES = (
    Technique("exgrpo", "replay", exgrpo_pick,
              "P(q) ∝ N(acc_b(q); 0.5, 1/G) / |b(q)|; replay argmin_entropy success of q in a group of G-1 fresh rows",
              f"{_S0} L19, {_S1} L241 (ExGRPO, arXiv 2510.02245)",
              stage=exgrpo,
              fidelity=Fidelity("authors_code", "github.com/ElliottYan/LUFFY: ExGRPO/exgrpo/verl/verl/mix_src/"
                                "experience/weighted_bucket_sampler.py (normal)",
                                "entropy: the sampler's (theirs: recomputed by the current policy); draws one by "
                                "one without replacement (same first-draw law); a 0-success group rescores (theirs: "
                                "kept); mu=, sigma= reachable")),
    Technique("rapo_replay", "replay", rapo_plan,
              "all-failed group g of prompt q: its lowest-reward row <- q's latest stored success",
              f"{_S0} L23 (Fathom-DeepResearch / RAPO)",
              stage=rapo_replay,
              fidelity=Fidelity("abstract", f"{_S0} L23 (RAPO: 'per-prompt replay buffers')",
                                "trigger (all-failed group), per_group=1, per_prompt=1: ours. The authors' repo "
                                "FractalAIResearchLabs/Fathom-DeepResearch holds inference/eval code only, no RAPO "
                                "or replay (2026-12)")),
    Technique("positive_replay", "replay", positive_replay_plan,
              "p_g <= max_success: k = ceil(ratio (1 - p_g) n_g) failed rows <- stored successes of the prompt",
              f"{_S0} L37 (MobileRL / ADAGRPO)",
              stage=positive_replay,
              fidelity=Fidelity("authors_code", "github.com/xuyifan-0731/MobileRL-iclr: "
                                "training/verl/workers/agentic/replay_buffer.py (ReplayBuffer)",
                                "theirs: mode='mobilerl' (top 25% mean-A rows stored, balanced eviction, age 4), "
                                "replayed into gradient-free rows (theirs: appended); default mode='prompt' "
                                "(same-prompt successes, before the advantages) ours")),
    Technique("rorecomp_compensation", "replay", compensation_plan,
              "non-priority rows -> FIFO buffer (with A); freed rows <- floor(c · #freed) oldest buffered rows",
              f"{_S1} L163 (RoRecomp)",
              stage=rorecomp_compensation,
              fidelity=Fidelity("abstract", f"{_S1} L163 (RoRecomp: 'compensation batches ... from a replay buffer')",
                                'compensation rows fill freed rows (paper: separate batches); FIFO, replayed once, '
                                'stored A: ours. Searched 2026-12 (2 passes) code/pages, TencentYoutuResearch '
                                'repos: no code; intro only')),
    Technique("spear_replay", "replay", spear_plan,
              "store A > τ; replay stored rows with A' = R − median(group mean R) > 0 as c(t)·A', c: cosine 0 → 1",
              f"{_S0} L75 (SPEAR, arXiv 2509.22601)",
              stage=spear_replay,
              fidelity=Fidelity("authors_code", "github.com/TencentYoutuResearch/SPEAR: verl-agent/verl/trainer/ppo/"
                                "ray_trainer_hybrid.py (TrajectoryBufferBatch)",
                                "replayed rows fill gradient-free rows each step, coef as an advantage scale (theirs: "
                                "a SIL loss on a random 2^k subset when the buffer passes 1.5x size); A' > 0 (theirs "
                                ">= 0); decay^age")),
)
