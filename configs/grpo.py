"""GRPO (DeepSeekMath, arXiv:2402.03300) on the demo task, with the paper's KL penalty.

Group-normalised advantage ``(r - mean) / (std + eps)``, PPO-clip 0.2,
per-sequence token mean (``seq_mean_token_mean``), KL to the SFT reference
with the k3 estimator.
"""
import dataclasses

from rljax.train import default_config


def get_config():
  cfg = default_config()
  rl = dataclasses.replace(cfg.rl, objective="grpo", advantage="grpo", aggregate="seq_mean_token_mean",
                           kl_beta=0.04, kl_estimator="k3")
  return cfg.replace(rl=rl, out_dir="runs/grpo")
