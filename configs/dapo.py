"""DAPO (arXiv:2503.14476): clip-higher, token mean, dynamic sampling, overlong shaping, no KL (recipes.dapo)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import recipes  # noqa: E402  (configs/recipes.py)
from rljax.train import default_config  # noqa: E402


def get_config():
  cfg = default_config()
  return cfg.replace(rl=cfg.rl.with_recipe(recipes.dapo()), out_dir="runs/dapo")
