"""GSPO (arXiv:2507.18071): sequence-level importance ratio (geometric mean), sequence clipping (recipes.gspo)."""
from rljax.configs import recipes
from rljax.train import default_config


def get_config():
  cfg = default_config()
  return cfg.replace(rl=cfg.rl.with_recipe(recipes.gspo()), out_dir="runs/gspo")
