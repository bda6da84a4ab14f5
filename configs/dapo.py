"""DAPO (arXiv:2503.14476): clip-higher, token-level mean, dynamic sampling, overlong shaping, no KL."""
import dataclasses

from rljax.train import default_config


def get_config():
  cfg = default_config()
  rl = dataclasses.replace(cfg.rl, objective="dapo", advantage="grpo", aggregate="token_mean", clip_low=0.2,
                           clip_high=0.28, kl_beta=0.0, dynamic_sampling=True, max_refills=3,
                           overlong_buffer=2, overlong_penalty=1.0)
  return cfg.replace(rl=rl, out_dir="runs/dapo")
