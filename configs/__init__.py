"""Ready-to-run experiment configs, installed as ``rljax.configs`` (``rljax train --config NAME``).

Each ``<name>.py`` defines ``get_config() -> rljax.train.RunConfig``; ``recipes.py`` holds the published
recipes (``from rljax.configs.recipes import dapo``). ``rljax.cli.available_configs()`` lists the names.
"""
