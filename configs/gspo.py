"""GSPO (arXiv:2507.18071): sequence-level importance ratio (geometric mean), sequence clipping."""
import dataclasses

from rljax.train import default_config


def get_config():
  cfg = default_config()
  rl = dataclasses.replace(cfg.rl, objective="gspo", advantage="grpo", aggregate="seq_mean_token_mean",
                           clip_low=3e-4, clip_high=4e-4, kl_beta=0.0)
  return cfg.replace(rl=rl, out_dir="runs/gspo")
