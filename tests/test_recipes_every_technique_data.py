"""Every data-side catalog technique (rewards, multi-reward, shaping, filters, prompt filters, replay, advantages)
trains end to end in its smallest recipe (see tests/_every_technique.py); rows the single-turn tasks cannot
train are refused at start-up, naming the technique and the missing input."""
import os

import pytest

from _every_technique import BASE, compile_cache, names, trains, warm_start  # noqa: F401 (fixtures)
from rljax.recipes._examples import SKIP, example
from rljax.recipes._spec import _catalog, slot_of
from rljax.stages import NeedError
from rljax.train import apply_overrides, tiny_config

KINDS = ("advantage", "multi_reward", "filter", "reward", "shaping", "policy_loss", "correction", "entropy", "kl",
         "supervised", "aggregation", "controller", "value", "replay")


@pytest.mark.long  # ~70 short training runs; the catalog sweep covers every row in the fast loop
@pytest.mark.parametrize("name", names(loss_side=False))
def test_technique_trains(name, warm_start, tmp_path):  # noqa: F811
  trains(name, warm_start, str(tmp_path))


def test_every_row_of_the_recipe_kinds_has_a_stage_and_the_skip_list_is_short():
  rows = _catalog()
  missing = [n for n, r in rows.items() if r.kind in KINDS and slot_of(r) is None]
  assert not missing, f"catalog rows without a stage: {missing}"
  assert len(SKIP) <= 5 and set(SKIP) <= set(rows)
  assert all("issue #20" in reason for reason in SKIP.values())  # only multi-turn rows wait


@pytest.mark.parametrize("name", sorted(SKIP))
def test_skipped_rows_are_refused_at_start_up(name, tmp_path):
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  cfg = apply_overrides(tiny_config(str(tmp_path)), BASE + [f"rl.{k}={v}" for k, v in example(name).items()])
  with pytest.raises(NeedError, match=rf"'{name}' needs .*'(reward_segments|turn_ids)'.*single-turn"):
    train(cfg)
  assert not os.path.exists(tmp_path / "config.json") and not os.path.exists(tmp_path / "metrics.jsonl")
