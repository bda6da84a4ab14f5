"""The arena: recipes side by side on one task, several seeds each, one table and one plot (``rljax arena``).

    from rljax.arena import run_arena, ENTRIES, EXPERIMENTS
    rows = run_arena("tiny", recipes=["grpo", "dapo"], seeds=[0, 1], out_dir="runs/arena_demo",
                     overrides=["rl.steps=3"])

An entry is a name and a list of ``--set`` overrides (``_entries.py``); each run is a separate ``rljax train``
process into ``<out_dir>/<entry>/seed<k>`` starting from a shared SFT warm start per seed (``sft.init_from``);
``_metrics.py`` defines the table's figures, ``_results.py`` reads an arena directory (table, curves).
"""
from rljax.arena._entries import ENTRIES, EXPERIMENTS, Entry, recipe_overrides, select_entries
from rljax.arena._metrics import run_figures, spread, steps_to_fraction, grad_spike, clip_fraction, tail_mean
from rljax.arena._results import (markdown_table, plot_curves, read_results, read_run, table_pass_k, table_rows,
                                  write_table)
from rljax.arena._runner import ArenaStopped, default_jobs, plan_arena, run_arena, sft_key

__all__ = ["ENTRIES", "EXPERIMENTS", "Entry", "recipe_overrides", "select_entries", "run_figures", "spread",
           "steps_to_fraction", "grad_spike", "clip_fraction", "tail_mean", "markdown_table", "plot_curves",
           "read_results", "read_run", "table_pass_k", "table_rows", "write_table", "default_jobs", "plan_arena",
           "run_arena", "sft_key", "ArenaStopped"]
