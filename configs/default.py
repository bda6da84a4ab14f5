"""The main job: SFT warm-start of a ~130K-parameter decoder, then GRPO on 3-digit addition (CPU).

    rljax train                      # this config
    rljax train --set seed=1         # another seed
"""
from rljax.train import default_config


def get_config():
  return default_config()
