"""Seconds-long smoke config (tests, CI): 2-digit addition, 1-layer d=32 model, a few SFT and RL steps."""
from rljax.train import tiny_config


def get_config():
  return tiny_config()
