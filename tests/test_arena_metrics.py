"""The arena's figures (rljax/arena/_metrics.py) on hand-written metric rows, against hand-derived values; the curves' colours."""
import os

import pytest

from rljax.arena import _metrics as M


def _rows(**series):
  """RL rows for steps 1..n from ``key=[values]`` (a None value leaves the key out of that row)."""
  n = max(len(v) for v in series.values())
  rows = []
  for i in range(n):
    row = {"stage": "rl", "step": i + 1}
    for key, values in series.items():
      if i < len(values) and values[i] is not None:
        row[key.replace("__", "/")] = values[i]
    rows.append(row)
  return rows


def test_final_window_and_tail_mean():
  assert [M.final_window(n) for n in (0, 1, 4, 5, 10, 14, 15, 20, 100)] == [0, 1, 1, 1, 1, 1, 2, 2, 10]
  assert M.tail_mean([]) is None
  assert M.tail_mean([3.0]) == 3.0
  assert M.tail_mean([1.0] * 18 + [2.0, 4.0]) == 3.0  # 20 steps: the last 2


def test_steps_to_90_percent_of_final_reward():
  steps = list(range(1, 11))
  # 10 steps: window 1, final = 1.0, first value >= 0.9 is at step 9
  assert M.steps_to_fraction(steps, [0.1 * i for i in range(1, 11)]) == 9
  # 20 steps: window 2, final = 1; the 2-step trailing mean reaches 0.9 first at step 12 (steps 11 and 12)
  assert M.steps_to_fraction(list(range(1, 21)), [0.0] * 10 + [1.0] * 10) == 12
  # a single noisy early spike does not count once smoothed: mean(1.0, 0.0) = 0.5 < 0.9 at step 3
  assert M.steps_to_fraction(list(range(1, 21)), [0.0, 0.0, 1.0] + [0.0] * 7 + [1.0] * 10) == 12
  # a decreasing reward is at 90% of its (lower) final value from the start
  assert M.steps_to_fraction(steps, [1.0] * 5 + [0.5] * 5) == 1
  # a non-positive final reward has no 90% target
  assert M.steps_to_fraction(steps, [-1.0] * 10) is None
  assert M.steps_to_fraction(steps, [0.0] * 10) is None
  assert M.steps_to_fraction([], []) is None
  # steps are reported as logged (a run logging every other step)
  assert M.steps_to_fraction([2, 4, 6, 8, 10], [0.0, 0.5, 0.95, 1.0, 1.0]) == 6


def test_grad_spike_is_max_over_median():
  assert M.grad_spike([1.0, 1.0, 2.0, 1.0, 10.0]) == 10.0
  assert M.grad_spike([2.0, 4.0]) == pytest.approx(4.0 / 3.0)  # median of two = their mean
  assert M.grad_spike([]) is None
  assert M.grad_spike([0.0, 0.0, 1.0]) is None  # a zero median: no ratio


def test_clip_fraction_prefers_the_policy_terms_own_metric():
  own = _rows(ppo_clip__clip_frac=[0.1, 0.3], policy__clip_frac=[0.5, 0.5], value_loss__clip_frac=[0.9, 0.9])
  assert M.clip_key(own) == "ppo_clip/clip_frac"
  assert M.clip_fraction(own) == pytest.approx(0.2)
  generic = _rows(policy__clip_frac=[0.0, 0.5, 0.1], value_loss__clip_frac=[0.9, 0.9, 0.9])
  assert M.clip_key(generic) == "policy/clip_frac"
  assert M.clip_fraction(generic) == pytest.approx(0.2)
  none = _rows(value_loss__clip_frac=[0.9], loss=[1.0])
  assert M.clip_key(none) is None and M.clip_fraction(none) is None  # n/a, never 0


def test_run_figures_from_a_summary_and_rows():
  summary = {"sft": {"greedy_accuracy": 0.25, "pass@1": 0.2, "pass@8": 0.5},
             "rl": {"greedy_accuracy": 0.5, "pass@1": 0.45, "pass@8": 0.75}, "wall_s": 12.5}
  rows = [{"stage": "sft", "step": 5, "loss": 1.0, "train/grad_norm": 1000.0},  # SFT rows are not RL's
          {"stage": "rl", "step": 0, "eval/greedy_accuracy": 0.25}]
  rows += _rows(rollout__reward_mean=[0.2] * 5 + [0.8] * 5, policy__entropy=[1.0] * 9 + [0.4],
                train__grad_norm=[1.0, 1.0, 3.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
                gspo__clip_frac=[0.0, 0.2] * 5, rollout__logp_gap=[0.01] * 5 + [0.03] * 5,
                rollout__mismatch_out_frac=[0.0] * 8 + [0.05, 0.15])
  f = M.run_figures(summary, rows, pass_k=(1, 8, 16))
  assert f["logp_gap"] == pytest.approx(0.02) and f["ratio_out"] == pytest.approx(0.02)  # means over the 10 steps
  assert M.run_figures(summary, rows[:2])["logp_gap"] is None  # not logged: n/a
  assert f["gain"] == pytest.approx(25.0)
  assert f["pass@1_change"] == pytest.approx(25.0) and f["pass@8_change"] == pytest.approx(25.0)
  assert f["pass@16_change"] is None  # not evaluated
  assert f["entropy"] == pytest.approx(0.4)  # the last 10% of 10 steps: step 10
  assert f["steps_to_90"] == 6  # final 0.8, target 0.72: step 6
  assert f["grad_spike"] == pytest.approx(3.0)
  assert f["clip_frac"] == pytest.approx(0.1) and f["clip_key"] == "gspo/clip_frac"
  assert f["wall_s"] == 12.5


def test_rl_rows_keep_one_row_per_step_in_order():
  rows = [{"stage": "rl", "step": 2, "x": 1.0}, {"stage": "rl", "step": 1, "x": 0.0}, {"stage": "sft", "step": 1},
          {"stage": "rl", "step": 2, "x": 2.0}]
  assert [(r["step"], r["x"]) for r in M.rl_rows(rows)] == [(1, 0.0), (2, 2.0)]  # the last row of a step wins


def test_spread_is_mean_min_max_over_present_values():
  assert M.spread([1.0, None, 3.0, 2.0]) == {"mean": 2.0, "min": 1.0, "max": 3.0, "n": 3}
  assert M.spread([None, None]) == {"mean": None, "min": None, "max": None, "n": 0}


def test_curves_keep_one_colour_per_entry_when_a_panel_misses_an_entry(tmp_path, monkeypatch):
  """An entry that logged nothing for a panel must not shift the colours of the entries after it there, and the
  legend names every entry drawn anywhere (here ``x`` is logged by ``b`` only, ``y`` by ``a`` only)."""
  import json  # pylint: disable=import-outside-toplevel
  from matplotlib.figure import Figure  # pylint: disable=import-outside-toplevel
  from rljax.arena import plot_curves  # pylint: disable=import-outside-toplevel
  for name, series in (("a", {"y": [1.0, 2.0], "z": [0.0, 1.0]}), ("b", {"x": [3.0, 4.0], "z": [1.0, 0.0]})):
    os.makedirs(tmp_path / name / "seed0")
    with open(tmp_path / name / "seed0" / "metrics.jsonl", "w", encoding="utf-8") as f:
      f.writelines(json.dumps(r) + "\n" for r in _rows(**series))
  drawn = []
  monkeypatch.setattr(Figure, "savefig", lambda self, *args, **kwargs: drawn.append(self))
  plot_curves(str(tmp_path), ["a", "b"], [0], panels=(("x", "x"), ("y", "y"), ("z", "z")))
  (fig,) = drawn
  x, y, z = fig.axes[:3]
  colour = {line.get_label(): line.get_color() for line in z.get_lines()}
  assert colour["a"] != colour["b"]
  assert [(line.get_label(), line.get_color()) for line in x.get_lines()] == [("b", colour["b"])]
  assert [(line.get_label(), line.get_color()) for line in y.get_lines()] == [("a", colour["a"])]
  assert [t.get_text() for t in fig.legends[0].get_texts()] == ["a", "b"]
