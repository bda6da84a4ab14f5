"""The arena's task: countdown (3 numbers in 1..20, reach the target with + - * /), the demo model and budgets.

    rljax train --config arena                    # one GRPO run on it
    rljax arena                                   # every arena entry x 3 seeds on it (docs/arena.md)

Why countdown and not the demo's 3-digit addition: after RL the demo saturates (greedy 30.6% -> 100.0%; 5-digit
addition too: 17.0% -> 100.0%, and with a 90%-sloppy teacher 6.2% -> 99.2%), so every technique ends at the same
number. On countdown the same 2-layer model, after the same 1200 SFT steps, starts at 31-35% held-out greedy
accuracy (seeds 0, 1, 2: 31.2%, 33.8%, 35.2%) and GRPO gains about 10 points in 100 steps without saturating (seed 0:
31.2% -> 40.4% at step 50 -> 41.6% at step 100), while pass@8 falls (73.8% -> 67.6%): RL sharpens, so techniques that
explore or keep entropy have something to show. Outcomes are exact (rational arithmetic on a parsed expression).
The SFT budget is the demo's: shorter warm starts sit on the loss plateau (docs/training.md). The RL budget is 60
steps (held-out evaluation every 30): most of the gain comes by step 50, and 24 entries x 3 seeds of 100 steps
would take hours on 2 cores.
"""
import dataclasses

from rljax.train import default_config


def get_config():
  cfg = default_config()
  return cfg.replace(task=dataclasses.replace(cfg.task, name="countdown"),
                     rl=dataclasses.replace(cfg.rl, max_new_tokens=10, steps=60),
                     eval=dataclasses.replace(cfg.eval, every=30), out_dir="runs/arena_task")
