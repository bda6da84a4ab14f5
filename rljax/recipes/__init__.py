"""Recipes: one RL step described as composable stages, resolved by name through ``rljax.catalog()``.

    from rljax.recipes import Recipe
    recipe = Recipe(advantage="qae(quantile=0.7)", filters="zero_variance(refill=True)",
                    loss="ppo_clip(eps_high=0.28), kl_penalty(beta=1e-3)", aggregation="token_mean")
    rljax.train.train(cfg, recipe=recipe)

The calling convention of each kind of stage is in ``rljax.stages``; ``docs/recipes.md`` walks through it.
"""
from rljax.recipes._recipe import Critic, Recipe, stage
from rljax.recipes._spec import SLOTS, Call, is_python_marker, names_for, parse, python_marker, resolve

__all__ = ["Recipe", "Critic", "stage", "parse", "resolve", "names_for", "SLOTS", "Call", "python_marker",
           "is_python_marker"]
