"""Dr.GRPO (arXiv:2503.20783): mean-only group advantage, constant normaliser (recipes.dr_grpo)."""
from rljax.configs import recipes
from rljax.train import default_config


def get_config():
  cfg = default_config()
  return cfg.replace(rl=cfg.rl.with_recipe(recipes.dr_grpo()), out_dir="runs/dr_grpo")
