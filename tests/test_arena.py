"""``rljax arena``: entries, the plan (shared warm start, resume decisions), and a whole tiny arena run.

The end-to-end test runs 2 entries x 1 seed x 3 RL steps on the tiny config as separate processes, plus an
entry that fails at run time; then runs the arena again and checks nothing finished is redone. The arena notebook
(notebooks/02_arena.ipynb, quick mode) is executed here too, in the directory of that one arena: it asks for the
same runs (same config), so it reads them back instead of training them again (one tiny arena per test run; the
live run is the end-to-end test's)."""
import json
import os
import shutil

import pytest

from rljax import arena
from rljax.arena import ENTRIES, EXPERIMENTS, Entry
from rljax.train import apply_overrides, default_config

# issue #18, item 3: the techniques the default arena must hold (catalog stage names found in the entries)
REQUIRED = {"grpo": "kl_penalty", "dr_grpo": "dr_grpo", "dapo": "zero_variance", "gspo": "gspo", "gmpo": "gmpo",
            "cispo": "cispo", "sapo": "sapo", "rloo": "rloo", "reinforce_pp": "reinforce_pp_baseline",
            "ppo_gae": "gae", "qae": "qae", "passk": "passk", "rank": "rank", "erc": "erc", "clip_cov": "clip_cov",
            "kl_cov": "kl_cov", "entropic": "entropic", "bapo": "bapo", "grpo_lambda": "grpo_lambda",
            "greso": "greso", "cpgd": "cpgd", "pspo": "pspo", "gft": "gft"}


def test_default_arena_holds_the_required_techniques():
  assert len(ENTRIES) >= 20
  for name, stage in REQUIRED.items():
    assert name in ENTRIES, name
    assert any(stage in o for o in ENTRIES[name].overrides), (name, stage)
  for name, members in EXPERIMENTS.items():
    assert members and set(members) <= set(ENTRIES), name


def test_every_entry_builds_its_config_and_recipe():
  cfg0 = default_config()
  for name, entry in ENTRIES.items():
    cfg = apply_overrides(cfg0, list(entry.overrides))
    recipe = cfg.rl.recipe()
    for field in ("advantage", "loss", "aggregation"):  # the entry's, not the base config's
      assert getattr(cfg.rl, field) == dict(o.split("=", 1) for o in entry.overrides)[f"rl.{field}"]
    assert recipe.advantage and recipe.loss, name


def test_published_recipe_entries_equal_configs_recipes():
  """The entries of GRPO, DAPO, Dr.GRPO, GSPO and CISPO are configs/recipes.py's recipes (canonical specs)."""
  from rljax._config_files import configs_package
  configs_package()
  from rljax.configs.recipes import RECIPES
  for name, make in RECIPES.items():
    cfg = apply_overrides(default_config(), list(ENTRIES[name].overrides))
    assert cfg.rl.with_recipe(cfg.rl.recipe()) == default_config().rl.with_recipe(make()), name


def test_unknown_names_are_errors_listing_the_known_ones(capsys):
  with pytest.raises(ValueError, match=r"unknown arena entry 'grpoo'; known: grpo, dr_grpo, dapo"):
    arena.select_entries(["grpo", "grpoo"])
  with pytest.raises(ValueError, match=r"unknown arena experiment 'entropyy'; known: default, entropy"):
    arena.select_entries(experiment="entropyy")
  with pytest.raises(ValueError, match="not both"):
    arena.select_entries(["grpo"], experiment="entropy")
  assert [e.name for e in arena.select_entries(experiment="qae")] == ["grpo", "qae"]
  default = [e.name for e in arena.select_entries()]  # no names: the default experiment, not the claims' entries
  assert default == list(EXPERIMENTS["default"]) and "bf16_sampler" not in default and len(default) >= 20
  from rljax.cli import main
  assert main(["arena", "--recipes", "grpo,nope", "--out", "unused"]) == 2
  err = capsys.readouterr().err
  assert "rljax arena: error: unknown arena entry 'nope'; known: grpo" in err and not os.path.exists("unused")
  with pytest.raises(ValueError, match="arena --set: invalid config value rl.group_size=1"):
    arena.plan_arena("tiny", recipes=["grpo"], overrides=["rl.group_size=1"], out_dir="unused")
  with pytest.raises(ValueError, match="arena entry 'bad': invalid config value rl.group_size=1"):
    arena.plan_arena("tiny", entries={"bad": Entry("bad", ("rl.group_size=1",))}, out_dir="unused")
  with pytest.raises(ValueError, match="arena entry name"):
    Entry("_sft", ())


def test_plan_shares_one_warm_start_per_seed_and_model(tmp_path):
  pool = {"a": Entry("a", arena.recipe_overrides()), "b": Entry("b", arena.recipe_overrides(advantage="rloo")),
          "wide": Entry("wide", ("model.hidden_size=64",))}
  chosen, plan = arena.plan_arena("tiny", seeds=[0, 1], out_dir=str(tmp_path), entries=pool)
  sft = [r for r in plan if r.entry is None]
  rl = [r for r in plan if r.entry is not None]
  assert [e.name for e in chosen] == ["a", "b", "wide"] and len(rl) == 6
  assert len(sft) == 4  # seeds 0 and 1, for the tiny model and for the wide one
  assert plan[:4] == sft  # warm starts first
  by = {(r.entry, r.seed): r for r in rl}
  assert by[("a", 0)].after == by[("b", 0)].after != by[("a", 1)].after
  assert by[("wide", 0)].after not in (by[("a", 0)].after, by[("a", 1)].after)
  for r in rl:
    assert r.config.sft.init_from == r.after and r.config.seed == r.seed
    assert r.out_dir == os.path.join(str(tmp_path), r.entry, f"seed{r.seed}") and r.action == "start"
  for s in sft:
    assert s.config.rl.steps == 0 and s.config.seed == s.seed


def test_an_entry_that_cannot_run_on_the_base_is_refused_and_the_others_run(tmp_path, capsys):
  """Issue #37 (bad input): an MoE entry on a checkpoint's config is refused with its reason; the others plan."""
  base = apply_overrides(default_config(), ["model.hf_checkpoint=/ckpt/not_read_by_the_plan", "sft.steps=0"])
  out = str(tmp_path / "a")
  _, plan = arena.plan_arena(base, recipes=["grpo", "moe", "bf16_tis"], seeds=[0, 1], out_dir=out)
  assert [(r.entry, r.seed, r.action) for r in plan] == [
      ("grpo", 0, "start"), ("grpo", 1, "start"), ("moe", 0, "refused"), ("moe", 1, "refused"),
      ("bf16_tis", 0, "start"), ("bf16_tis", 1, "start")]  # no SFT: no warm-start runs
  moe = plan[2]
  assert moe.config is None and moe.status == "refused"
  assert moe.error == ("refused: invalid config value model.num_experts=4: must be 0 with hf_checkpoint (the "
                       "checkpoint's config decides)")
  assert all(r.config.sft.init_from is None for r in plan if r.config is not None)
  rows, run_rows = arena.table_rows(out, ["grpo", "moe"], [0, 1], (1,),
                                    {("moe", 0): {"status": "refused", "error": moe.error},
                                     ("moe", 1): {"status": "refused", "error": moe.error}})
  assert [r["status"] for r in rows] == ["partial 0/2", "refused"]
  assert rows[1]["error"] == moe.error[len("refused: "):]
  assert "| moe | refused: invalid config value model.num_experts=4" in arena.markdown_table(rows, (1,))
  assert not os.path.exists(out)  # planning writes nothing
  # run_arena: the refusal is printed once per entry, nothing of the refused entry is written, and a checkpoint's
  # runs go one at a time (jobs=None); the runs themselves are not started here (the arena's own python fails)
  rows = arena.run_arena(base, recipes=["moe", "grpo"], seeds=[0], out_dir=out, progress=False, plot=False,
                         python="/bin/false")
  err = capsys.readouterr().err
  assert err.count("[rljax arena] moe: refused: invalid config value model.num_experts=4") == 1
  assert "the other entries run" in err
  assert [r["status"] for r in rows] == ["refused", "failed 1/1"] and not os.path.exists(os.path.join(out, "moe"))
  # every entry refused: the error names the first
  with pytest.raises(ValueError, match="arena entry 'moe': invalid config value model.num_experts=4"):
    arena.plan_arena(base, experiment="routing_replay", out_dir=out)


def test_a_base_without_sft_starts_every_run_from_the_model_as_loaded(tmp_path):
  _, plan = arena.plan_arena("tiny", recipes=["grpo", "rloo"], seeds=[0, 1], out_dir=str(tmp_path),
                             overrides=["sft.steps=0"])
  assert [r.entry for r in plan] == ["grpo", "grpo", "rloo", "rloo"]  # no "_sft" runs
  assert all(r.config.sft.init_from is None and r.config.sft.steps == 0 and r.after is None for r in plan)


# the arena notebook's quick-mode runs (notebooks/02_arena.ipynb: base "tiny", these overrides, runs/mini_arena)
NOTEBOOK_QUICK_OVERRIDES = ["rl.steps=3", "eval.num_problems=8", "eval.batch_size=8"]


@pytest.fixture(scope="module")
def mini_arena(tmp_path_factory):
  """One live tiny arena (grpo, dapo and an entry that fails) in ``<root>/runs/mini_arena``, where the arena
  notebook, run from ``<root>``, finds it: ``(root, arena dir, run_arena's keyword arguments, its rows)``."""
  root = tmp_path_factory.mktemp("arena_root")
  out = str(root / "runs" / "mini_arena")
  missing = str(root / "no_such_run")
  pool = {"grpo": ENTRIES["grpo"], "dapo": ENTRIES["dapo"],
          "broken": Entry("broken", (f"sft.init_from={missing}",), "fails at start-up in its process")}
  kw = dict(recipes=["grpo", "dapo", "broken"], seeds=[0], jobs=2, out_dir=out, entries=pool, progress=False,
            overrides=list(NOTEBOOK_QUICK_OVERRIDES))
  return root, out, kw, arena.run_arena("tiny", **kw)


@pytest.mark.long
def test_arena_end_to_end_resume_and_a_failing_entry(mini_arena, tmp_path):
  _, out, kw, rows = mini_arena
  status = {r["entry"]: r["status"] for r in rows}
  assert status == {"grpo": "ok", "dapo": "ok", "broken": "failed 1/1"}
  broken = next(r for r in rows if r["entry"] == "broken")
  assert "no_such_run" in broken["error"] and broken["gain_mean"] is None  # its error's last line, no figures
  for name in ("arena.csv", "arena_runs.csv", "arena.md", "curves.png"):
    assert os.path.getsize(os.path.join(out, name)) > 0, name
  md = open(os.path.join(out, "arena.md"), encoding="utf-8").read()
  assert "| grpo | ok |" in md and "| broken | failed 1/1: seed0:" in md and "pass@2 change" in md
  with open(os.path.join(out, "arena.csv"), encoding="utf-8") as f:
    header = f.readline()
  assert "gain_mean" in header and "pass@1_change_min" in header and "wall_s_max" in header
  # both RL runs started from the one warm start of seed 0 (same state, same evaluation key: same figures)
  summaries = {n: json.load(open(os.path.join(out, n, "seed0", "summary.json"))) for n in ("grpo", "dapo")}
  sft_dir = summaries["grpo"]["sft_from"]
  assert summaries["dapo"]["sft_from"] == sft_dir and os.path.dirname(os.path.dirname(sft_dir)) == os.path.join(out, "_sft")
  assert summaries["grpo"]["sft"] == summaries["dapo"]["sft"] == json.load(open(os.path.join(sft_dir, "sft_eval.json")))
  assert not os.path.exists(os.path.join(out, "grpo", "seed0", "checkpoints", "sft"))  # loaded, not copied
  for n in ("grpo", "dapo"):
    rl_rows = [r for r in map(json.loads, open(os.path.join(out, n, "seed0", "metrics.jsonl")))
               if r["stage"] == "rl" and r["step"] > 0]
    assert [r["step"] for r in rl_rows] == [1, 2, 3]
  # again: finished runs (and the warm start) are not redone (no process starts: the files stay untouched)
  stamps = {p: os.path.getmtime(p) for p in
            [os.path.join(out, n, "seed0", f) for n in ("grpo", "dapo") for f in ("summary.json", "arena.log")]
            + [os.path.join(sft_dir, "summary.json")]}
  rows2 = arena.run_arena("tiny", **{**kw, "recipes": ["grpo", "dapo"]})
  assert {r["entry"]: r["status"] for r in rows2} == {"grpo": "ok", "dapo": "ok"}
  assert {p: os.path.getmtime(p) for p in stamps} == stamps
  assert [r["gain_mean"] for r in rows2] == [r["gain_mean"] for r in rows[:2]]
  # an interrupted run is resumed with the same config, restarted with another; a finished one is never mixed
  # (on a copy: the arena notebook test reads the finished arena)
  out = str(tmp_path / "arena_copy")
  shutil.copytree(kw["out_dir"], out)
  kw = {**kw, "out_dir": out}
  os.remove(os.path.join(out, "dapo", "seed0", "summary.json"))
  _, plan = arena.plan_arena("tiny", **{k: v for k, v in kw.items() if k not in ("jobs", "progress")})
  actions = {r.entry: r.action for r in plan}
  assert actions == {None: "done", "grpo": "done", "dapo": "resume", "broken": "start"}
  _, plan = arena.plan_arena("tiny", **{**{k: v for k, v in kw.items() if k not in ("jobs", "progress")},
                                        "recipes": ["dapo"], "overrides": kw["overrides"] + ["rl.optim.learning_rate=0.001"]})
  assert {r.entry: r.action for r in plan} == {None: "done", "dapo": "restart"}
  with pytest.raises(ValueError, match=r"grpo/seed0 holds a finished run of another config \(rl.optim.learning_rate"):
    arena.plan_arena("tiny", **{**{k: v for k, v in kw.items() if k not in ("jobs", "progress")},
                                "overrides": kw["overrides"] + ["rl.optim.learning_rate=0.001"]})


def test_train_takes_a_json_config(tmp_path, capsys):
  """The arena's runs are `rljax train --config <arena_config.json>`: a config.json is a config file."""
  from rljax.cli import main
  from rljax.train import config_to_dict, tiny_config
  cfg = apply_overrides(tiny_config(str(tmp_path / "run")), ["rl.advantage=rloo", "seed=3"])
  path = tmp_path / "c.json"
  path.write_text(json.dumps(config_to_dict(cfg)))
  assert main(["train", "--config", str(path), "--print-config"]) == 0
  assert json.loads(capsys.readouterr().out) == config_to_dict(cfg)
  path.write_text("{not json")
  assert main(["train", "--config", str(path), "--print-config"]) == 2
  assert "not a JSON config" in capsys.readouterr().err


def test_cli_lists_entries_and_experiments(capsys):
  from rljax.cli import main
  assert main(["arena", "--list"]) == 0
  out = capsys.readouterr().out
  assert all(f"\n{name} " in "\n" + out for name in ENTRIES)
  assert "rl.advantage=qae(quantile=0.8)" in out and "entropy        grpo_nokl, grpo, erc, clip_cov, kl_cov, entropic, entropic_h04" in out


@pytest.mark.long
def test_arena_notebook_runs(mini_arena, monkeypatch):
  """The arena notebook (quick mode) runs: its mini-arena (the fixture's, same config: read back, not trained
  again) is tabled, read back and the chosen entries are plotted."""
  from test_notebook import NB2, execute_notebook  # pylint: disable=import-outside-toplevel
  root, out, _, _ = mini_arena
  stamps = {n: os.path.getmtime(os.path.join(out, n, "seed0", "summary.json")) for n in ("grpo", "dapo")}
  outputs = execute_notebook(NB2, root, monkeypatch)
  assert "grpo ok greedy accuracy gain:" in outputs and "dapo ok" in outputs
  for name in ("arena.md", "arena.csv", "curves.png", "chosen.png", "grpo/seed0/summary.json"):
    assert os.path.exists(os.path.join(out, name)), name
  assert stamps == {n: os.path.getmtime(os.path.join(out, n, "seed0", "summary.json")) for n in ("grpo", "dapo")}
