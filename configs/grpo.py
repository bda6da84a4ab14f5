"""GRPO (DeepSeekMath, arXiv:2402.03300) on the demo task, with the paper's KL penalty (recipes.grpo)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import recipes  # noqa: E402  (configs/recipes.py)
from rljax.train import default_config  # noqa: E402


def get_config():
  cfg = default_config()
  return cfg.replace(rl=cfg.rl.with_recipe(recipes.grpo()), out_dir="runs/grpo")
