"""Bit-for-bit identity of the RL step across a refactor: tiny runs' ``metrics.jsonl`` before and after.

Each case is a tiny run (1-digit addition, 50 SFT steps, 3 RL steps of 8 prompts x 4) of a recipe that walks
some phase of ``rljax.train._phases.PIPELINE`` in a particular way (pilots, a curriculum's draw, refills, replay
and its prompt swap, hints, the greedy baseline, critics, controllers, multi-reward, shaping, advantage filters,
a multi-turn task): the group ``recipes``. The group ``arena`` is the arena's default entries
(``rljax.arena.EXPERIMENTS["default"]``, 26), each with the entry's own overrides at the same tiny sizes, so that
every entry runs its real code path (its loss, advantage, critic, controllers, filters with refills, prompt filter,
shaping). They run on the cases' task, not the arena's countdown: at these sizes countdown's rewards are all 0
(advantages 0, nothing filtered or refilled), while 1-digit addition gives mixed groups. ``run`` writes each case's RL rows, without the
wall-clock keys (``time/...``), to ``OUT/<case>.jsonl``; ``compare`` says which cases differ, key by key (exactly:
``==`` on the parsed JSON)::

    JAX_PLATFORMS=cpu python benchmarks/step_identity.py run /tmp/before      # on the old commit
    JAX_PLATFORMS=cpu python benchmarks/step_identity.py run /tmp/after       # on the new one
    python benchmarks/step_identity.py compare /tmp/before /tmp/after        # exit 1 on any difference

``run OUT NAME...`` runs only the named cases or groups (``recipes``: the default; ``arena``; ``all``), e.g.
``run /tmp/before-arena arena``; ``list [GROUP]`` prints the cases.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile

BASE = ["task.digits=1", "sft.steps=50", "sft.optim.learning_rate=0.01", "rl.steps=3", "rl.num_prompts=8",
        "rl.group_size=4", "eval.num_problems=4", "eval.batch_size=4", "eval.num_samples=1", "eval.pass_k=1",
        "checkpoint.enabled=false", "progress=false"]

# techniques whose catalog example recipe (``rljax.recipes._examples.example``) exercises one phase's path
EXAMPLES = ("pilot_commit", "dump", "greso", "difficulty_budget", "shuffle_pairs", "negative_advantage_drop", "exgrpo",
            "guide", "positive_replay", "remax", "opd", "entropy_gated_contrastive", "role_ema_baseline", "prm_clip",
            "gae", "temperature_control", "adaptive_kl", "composite", "gdpo", "overlong_penalty", "kl_in_reward",
            "vote")

# hand-written cases: {name: overrides}
EXTRA = {
    "dapo_refill": ["rl.filters=zero_variance(refill=True)", "rl.shaping=overlong_penalty(buffer_len=2)",
                    "rl.rewards=gaussian_reward(sigma=5.0, parse='arithmetic')"],
    "frozenlake": ["task.name=frozenlake", "rl.num_prompts=2", "rl.group_size=2"],
}


GROUPS = ("recipes", "arena")


def cases(group: str = "recipes") -> dict:
  """``{case: overrides after BASE}`` of ``group`` (``"recipes"``, ``"arena"``, ``"all"``)."""
  if group == "all":
    return {n: o for g in GROUPS for n, o in cases(g).items()}
  if group == "arena":
    from rljax.arena import ENTRIES, EXPERIMENTS  # pylint: disable=import-outside-toplevel
    return {f"arena_{n}": list(ENTRIES[n].overrides) for n in EXPERIMENTS["default"]}
  if group != "recipes":
    raise SystemExit(f"unknown group {group!r}; groups: {list(GROUPS) + ['all']}")
  from rljax.recipes._examples import example  # pylint: disable=import-outside-toplevel
  out = {n: [f"rl.{k}={v}" for k, v in example(n).items()] for n in EXAMPLES}
  out.update(EXTRA)
  return out


def run(out: str, names=()) -> None:
  import jax  # pylint: disable=import-outside-toplevel
  from rljax.train import apply_overrides, read_jsonl, tiny_config, train  # pylint: disable=import-outside-toplevel
  jax.config.update("jax_compilation_cache_dir", os.path.join(tempfile.gettempdir(), "rljax_step_identity_cache"))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
  os.makedirs(out, exist_ok=True)
  every = cases("all")
  groups = [n for n in names if n in (*GROUPS, "all")] or ([] if names else ["recipes"])
  todo = {n: o for g in groups for n, o in cases(g).items()}
  unknown = sorted(set(names) - set(every) - {*GROUPS, "all"})
  if unknown:
    raise SystemExit(f"unknown cases {unknown}; cases: {sorted(every)}; groups: {list(GROUPS) + ['all']}")
  todo.update({n: every[n] for n in names if n in every})
  for name, overrides in todo.items():
    with tempfile.TemporaryDirectory() as d:
      train(apply_overrides(tiny_config(d), BASE + overrides))
      rows = [{k: v for k, v in r.items() if not k.startswith("time/")}
              for r in read_jsonl(os.path.join(d, "metrics.jsonl")) if r["stage"] == "rl"]
    with open(os.path.join(out, f"{name}.jsonl"), "w", encoding="utf-8") as f:
      f.writelines(json.dumps(r, sort_keys=True) + "\n" for r in rows)
    print(f"{name}: {len(rows)} rows", flush=True)


def compare(a: str, b: str) -> int:
  names = sorted(set(os.listdir(a)) | set(os.listdir(b)))
  bad = 0
  for n in names:
    paths = [os.path.join(a, n), os.path.join(b, n)]
    if not all(os.path.exists(p) for p in paths):
      print(f"{n}: only in {[p for p in paths if os.path.exists(p)]}")
      bad += 1
      continue
    rows = []
    for p in paths:
      with open(p, encoding="utf-8") as f:
        rows.append([json.loads(line) for line in f])
    if rows[0] == rows[1]:
      print(f"{n}: identical ({len(rows[0])} rows)")
      continue
    bad += 1
    diffs = [(i, k) for i, (x, y) in enumerate(zip(*rows)) for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k)]
    print(f"{n}: DIFFERS ({len(rows[0])} vs {len(rows[1])} rows); first keys: {diffs[:8]}")
  print(f"{len(names) - bad} identical, {bad} differ")
  return int(bad > 0)


if __name__ == "__main__":
  cmd, args = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
  if cmd == "run" and args:
    run(args[0], args[1:])
  elif cmd == "compare" and len(args) == 2:
    sys.exit(compare(*args))
  elif cmd == "list" and len(args) <= 1:
    print("\n".join(cases(*args)))
  else:
    sys.exit(__doc__)
