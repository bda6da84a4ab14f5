"""docs/recipes.md and the README's recipe section: every Python block runs; the table of needs is current."""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "recipes.md")


def test_python_blocks_run(tmp_path, monkeypatch, capsys):
  monkeypatch.chdir(tmp_path)
  with open(DOC, encoding="utf-8") as f:
    blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
  assert len(blocks) == 2
  for i, block in enumerate(blocks):
    exec(compile(block, f"docs/recipes.md block {i}", "exec"), {"__name__": f"docs_block_{i}"})
  out = capsys.readouterr().out
  assert "ppo_clip(eps_low=0.2, eps_high=0.28)" in out  # the first block's describe()
  assert os.path.exists(tmp_path / "runs" / "my_recipe" / "metrics.jsonl")


def test_needs_table_is_current():
  from rljax.recipes.__main__ import table  # pylint: disable=import-outside-toplevel
  with open(DOC, encoding="utf-8") as f:
    assert table(markdown=True) in f.read(), "docs/recipes.md is stale: python -m rljax.recipes --markdown"


def test_readme_recipe_block_runs(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    text = f.read()
  section = text[text.index("## Compose the whole RL step"):text.index("## The main job")]
  blocks = re.findall(r"```python\n(.*?)```", section, re.S)
  assert len(blocks) == 1
  exec(compile(blocks[0], "README recipe block", "exec"), {"__name__": "readme_block"})
  assert os.path.exists(tmp_path / "runs" / "readme" / "summary.json")
