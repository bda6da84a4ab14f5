"""Stateful controllers with ``init``/``update`` and array state (no recompiles).

``TECHNIQUES`` are the catalog rows: each names its controller (``rljax.control._controllers``) and the stage
that runs it in the RL loop (``stage=``, from ``rljax.control._stages``).
"""
from rljax.control import _controllers
from rljax.control._controllers import *  # noqa: F401,F403

from rljax._technique import Fidelity, Technique
from rljax.control import _stages

TECHNIQUES = (
    Technique("adaptive_kl", "controller", _controllers.adaptive_kl, "β ← β·(1 + clip(KL/target − 1, ±0.2)·n/horizon)",
              "verl AdaptiveKLController; Ziegler et al. arXiv:1909.08593", stage=_stages.adaptive_kl,
              fidelity=Fidelity("peer", "verl 0.9.1 core_algos.AdaptiveKLController.update")),
    Technique("entropic", "controller", _controllers.entropic, "u = K_p·e + K_i·Σe, e = H* − H; w± = clip(1 ∓ u)",
              "000_3e503271be254a43.txt L107", stage=_stages.entropic,
              fidelity=Fidelity("authors_code", "github.com/yk7333/EntroPIC: core_algos.py "
                                "compute_policy_loss_entropic, dp_actor.py",
                                "code reweights only tokens with p > 0.95, via an added α·r·|A| token-mean; we "
                                "scale every token's loss by 1 ± α; integral includes the current error")),
    Technique("bapo", "controller", _controllers.bapo,
              "first (c_low, c_high) on a relaxation grid with positive share ≥ ρ₀",
              "000_3e503271be254a43.txt L53; WooooDyy/BAPO README and recipe", stage=_stages.bapo,
              fidelity=Fidelity("authors_code", "github.com/WooooDyy/BAPO: recipe/bapo/policy_loss.py "
                                "compute_policy_loss_bapo",
                                "default mode='share' is the README's rule; mode='code', rho0=1 and the recipe "
                                "yaml's ranges (0.6, 0.8)/(1.2, 2.0) give the code's search")),
    Technique("temperature_control", "controller", _controllers.temperature_control, "T ← T·exp(κ(H* − H))",
              "001_5839a3671b0b4d92.txt L203", stage=_stages.temperature_control,
              fidelity=Fidelity("authors_code", "github.com/LiaoMengqi/E3-RL4LLMs: e3/worker/"
                                "temperature_scheduler.py",
                                "default rule 'exp' is ours (the code's needs V: rule='e3', vocab_size=V); "
                                "T clipped to [T_min, T_max]; target given, no first-step skip or annealing")),
)
