"""GRPO (DeepSeekMath, arXiv:2402.03300) on the demo task, with the paper's KL penalty (recipes.grpo)."""
from rljax.configs import recipes
from rljax.train import default_config


def get_config():
  cfg = default_config()
  return cfg.replace(rl=cfg.rl.with_recipe(recipes.grpo()), out_dir="runs/grpo")
