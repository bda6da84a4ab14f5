"""Dr.GRPO (arXiv:2503.20783): mean-only group advantage, constant normaliser (no length/std bias)."""
import dataclasses

from rljax.train import default_config


def get_config():
  cfg = default_config()
  rl = dataclasses.replace(cfg.rl, objective="dr_grpo", advantage="dr_grpo", aggregate="seq_mean_token_sum_norm",
                           kl_beta=0.0)
  return cfg.replace(rl=rl, out_dir="runs/dr_grpo")
