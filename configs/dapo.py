"""DAPO (arXiv:2503.14476): clip-higher, token mean, dynamic sampling, overlong shaping, no KL (recipes.dapo)."""
from rljax.configs import recipes
from rljax.train import default_config


def get_config():
  cfg = default_config()
  return cfg.replace(rl=cfg.rl.with_recipe(recipes.dapo()), out_dir="runs/dapo")
