"""The RL step's random streams (rljax.train._streams): the table pins the numbers runs have always used."""
import pathlib
import re

import jax
import numpy as np
import pytest

from rljax.train._streams import STREAMS, stream

# the fold_in numbers of the trainer before the table (rljax/train/_rollout.py, _advantage.py, _episodes.py,
# _eval.py at e223152), written out by hand: changing one changes every run's numbers
PINNED = {
    "select": ("round side", 1), "greedy_sample": ("round side", 2), "greedy_score": ("round side", 3),
    "score": ("round side", 4), "replay_prompts": ("round side", 5), "hints": ("round side", 6),
    "refill_filters": ("round side", 200), "batch_filters": ("step side", 300),
    "advantages": ("step side", 1048576), "pilot_sample": ("select", 1), "pilot_score": ("select", 2),
    "prompt_select": ("select", 10), "prompt_draw": ("select", 40), "multi_reward": ("score", 1),
    "rollout_shaping": ("score", 100), "forward_shaping": ("advantages", 400),
    "multi_reward_advantages": ("advantages", 500), "advantage": ("advantages", 600),
    "advantage_filters": ("advantages", 700), "eval_samples": ("eval", 1048576),
}
TRAIN = pathlib.Path(__file__).resolve().parents[1] / "rljax" / "train"


def test_the_table_pins_todays_numbers():
  assert {n: (s.parent, s.number) for n, s in STREAMS.items()} == PINNED


@pytest.mark.parametrize("name,i", [("score", 0), ("rollout_shaping", 3), ("advantage", 2), ("prompt_select", 29),
                                    ("advantages", 0)])
def test_stream_is_fold_in_of_number_plus_index(name, i):
  key = jax.random.PRNGKey(7)
  want = jax.random.fold_in(key, PINNED[name][1] + i)
  np.testing.assert_array_equal(np.asarray(stream(key, name, i)), np.asarray(want))


def test_no_two_streams_of_a_parent_share_a_number():
  """Brute force over each parent's numbers: bounded ranges are disjoint; an unbounded one is its parent's last."""
  parents = {}
  for name, s in STREAMS.items():
    parents.setdefault(s.parent, []).append((name, s))
  for parent, rows in parents.items():
    taken = {}
    for name, s in rows:
      if s.count is None:
        assert all(o.number < s.number for n, o in rows if n != name), (parent, name)
        continue
      for x in range(s.number, s.number + s.count):
        assert x not in taken, f"{parent}: {name} and {taken[x]} both use {x}"
        taken[x] = name


def test_bad_names_and_indices_are_refused():
  key = jax.random.PRNGKey(0)
  with pytest.raises(ValueError, match="unknown random stream 'scores'.*'score'"):
    stream(key, "scores")
  with pytest.raises(ValueError, match=r"'prompt_select': index 30 outside \[0, 30\)"):
    stream(key, "prompt_select", 30)
  with pytest.raises(ValueError, match="'score': index 1 outside"):
    stream(key, "score", 1)
  with pytest.raises(ValueError, match="index -1"):
    stream(key, "rollout_shaping", -1)


def test_no_literal_fold_in_number_left_in_the_trainer():
  """Every constant fold_in of rljax/train/ goes through the table (counters such as the step stay literal)."""
  found = []
  for path in sorted(TRAIN.glob("*.py")):
    for n, line in enumerate(path.read_text().splitlines(), 1):
      if re.search(r"random\.fold_in\([^,()]+(\([^()]*\))?,\s*[0-9(]", line):
        found.append(f"{path.name}:{n}: {line.strip()}")
  assert not found, found
