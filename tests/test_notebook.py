"""Executes the notebooks on CPU at a tiny size (RLJAX_NOTEBOOK_QUICK=1).

Beyond running: the plots show inline (a PNG output: the trainer must not switch matplotlib's backend), and
the progress bars print no "IProgress not found" warning (this kernel has no ipywidgets).

The quickstart notebook runs in the default suite; the arena notebook too, in tests/test_arena.py (it reads back
the mini-arena that test file runs live, same config). The recipe notebook (1-3 min on 2 cores) is marked slow to keep the default run near
its 20-minute budget (`pytest -m slow tests/test_notebook.py` runs it); what it calls is tested in the default run
(tests/test_recipes_*.py)."""
import os

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NB = os.path.join(os.path.dirname(__file__), os.pardir, "notebooks", "01_quickstart.ipynb")
NB2 = os.path.join(os.path.dirname(__file__), os.pardir, "notebooks", "02_arena.ipynb")
NB3 = os.path.join(os.path.dirname(__file__), os.pardir, "notebooks", "03_your_own_recipe.ipynb")


def execute_notebook(path, tmp_path, monkeypatch):
  monkeypatch.setenv("RLJAX_NOTEBOOK_QUICK", "1")
  monkeypatch.delenv("XLA_FLAGS", raising=False)
  nb = nbformat.read(path, as_version=4)
  client = nbclient.NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
  client.execute()
  outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
  text = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in outputs)
  assert "IProgress" not in text and "TqdmWarning" not in text, "a progress bar warned about ipywidgets"
  assert any("image/png" in o.get("data", {}) for o in outputs), "no inline plot: was the backend switched to Agg?"
  return text


@pytest.mark.long
def test_quickstart_notebook_runs(tmp_path, monkeypatch):
  outputs = execute_notebook(NB, tmp_path, monkeypatch)
  assert "RL  greedy accuracy:" in outputs
  assert os.path.exists(tmp_path / "runs" / "quickstart" / "metrics.jsonl")


@pytest.mark.slow
def test_own_recipe_notebook_runs(tmp_path, monkeypatch):
  outputs = execute_notebook(NB3, tmp_path, monkeypatch)
  assert "group 0: rewards" in outputs and "advantages" in outputs  # the batch looked at before training
  assert "RL  greedy accuracy:" in outputs
  from rljax.train import read_jsonl  # pylint: disable=import-outside-toplevel
  rows = [r for r in read_jsonl(str(tmp_path / "runs" / "own_recipe" / "metrics.jsonl"))
          if r["stage"] == "rl" and r["step"] > 0]
  assert [r["step"] for r in rows] == [1, 2, 3] and all("some_good/kept_groups" in r for r in rows)
  assert any("median_baseline/abs_mean" in r for r in rows)


def test_notebooks_share_one_install_cell():
  cells = [[c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code" and
            "RLJAX_SOURCE" in c.source] for path in (NB, NB2, NB3)]
  assert cells[0] == cells[1] == cells[2] and len(cells[0]) == 1


def _install_cell():
  nb = nbformat.read(NB, as_version=4)
  cells = [c for c in nb.cells if c.cell_type == "code" and "RLJAX_SOURCE" in c.source]
  assert len(cells) == 1
  return cells[0].source


def test_install_cell_without_a_url(tmp_path, monkeypatch):
  """The install cell invents no URL: checkout -> pip install <checkout>; else RLJAX_SOURCE or a clear error."""
  import importlib.util
  import subprocess
  src = _install_cell()
  assert "github.com" not in src and 'RLJAX_SOURCE = ""' in src
  calls = []
  real_find_spec = importlib.util.find_spec
  monkeypatch.setattr(importlib.util, "find_spec",
                      lambda name, *a: None if name == "rljax" else real_find_spec(name, *a))
  monkeypatch.setattr(subprocess, "check_call", lambda cmd, *a, **k: calls.append(cmd))
  # 1. not a checkout, no source: error naming each way out (clone, wheel, the variable), nothing installed
  monkeypatch.chdir(tmp_path)
  with pytest.raises(RuntimeError, match=r"git clone.*rljax-\*\.whl.*set RLJAX_SOURCE"):
    exec(compile(src, "install_cell", "exec"), {})
  assert calls == []
  # 2. inside a checkout (<repo>/notebooks): installs the checkout (then asks for a restart: still not importable here)
  repo = tmp_path / "repo"
  (repo / "rljax").mkdir(parents=True)
  (repo / "rljax" / "__init__.py").write_text("")
  (repo / "setup.py").write_text("")
  (repo / "notebooks").mkdir()
  monkeypatch.chdir(repo / "notebooks")
  with pytest.raises(RuntimeError, match="restart"):
    exec(compile(src, "install_cell", "exec"), {})
  assert calls[-1][-4:] == ["pip", "install", "-q", str(repo)]
  # 3. the user's source wins
  monkeypatch.chdir(tmp_path)
  with pytest.raises(RuntimeError, match="restart"):
    exec(compile(src.replace('RLJAX_SOURCE = ""', 'RLJAX_SOURCE = "/wheels/rljax.whl"'), "install_cell", "exec"), {})
  assert calls[-1][-1] == "/wheels/rljax.whl"
  # 4. Colab after `!git clone <url>`: the checkout ./rljax below the working folder
  colab = tmp_path / "content"
  (colab / "rljax" / "rljax").mkdir(parents=True)
  (colab / "rljax" / "rljax" / "__init__.py").write_text("")
  (colab / "rljax" / "setup.py").write_text("")
  monkeypatch.chdir(colab)
  with pytest.raises(RuntimeError, match="restart"):
    exec(compile(src, "install_cell", "exec"), {})
  assert calls[-1][-1] == str(colab / "rljax")
  # 5. a wheel uploaded into the working folder (the last name in sort order wins)
  uploads = tmp_path / "uploads"
  uploads.mkdir()
  for name in ("rljax-0.1.0-py3-none-any.whl", "rljax-0.2.0-py3-none-any.whl"):
    (uploads / name).write_text("")
  monkeypatch.chdir(uploads)
  with pytest.raises(RuntimeError, match="restart"):
    exec(compile(src, "install_cell", "exec"), {})
  assert calls[-1][-1] == str(uploads / "rljax-0.2.0-py3-none-any.whl")


# the install cell in a fresh Python without site-packages (no rljax installed, as a Colab runtime), pip replaced by
# a stand-in that records the command and makes the package it names importable, as `pip install <checkout>` would
_COLAB = """
import json, subprocess, sys
calls = []
def pip(cmd, *a, **k):
  calls.append(cmd)
  sys.path.insert(0, cmd[-1])
subprocess.check_call = pip
exec(compile(sys.stdin.read(), "install_cell", "exec"), {})
import importlib.util
print(json.dumps({"calls": calls, "origin": importlib.util.find_spec("rljax").origin}))
"""


def test_install_cell_in_colab_installs_the_clone_its_folder_shadows(tmp_path):
  """Colab after `!git clone <url>`: ./rljax is the clone, which ``find_spec("rljax")`` finds as a namespace
  package (the folder has no __init__.py); the cell sees through it and installs the clone."""
  import json
  import subprocess
  import sys
  repo = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir))
  content = tmp_path / "content"
  content.mkdir()
  os.symlink(repo, content / "rljax")  # the clone: a copy of the repository
  shadow = subprocess.run([sys.executable, "-S", "-c", "import importlib.util; s = importlib.util.find_spec('rljax'); "
                           "print(s is not None, s.origin)"], cwd=content, capture_output=True, text=True, check=True)
  assert shadow.stdout.split() == ["True", "None"]  # the shadow this test is about: found, but not a package
  done = subprocess.run([sys.executable, "-S", "-c", _COLAB], input=_install_cell(), cwd=content,
                        capture_output=True, text=True)
  assert done.returncode == 0, done.stderr[-3000:]
  out = json.loads(done.stdout.strip().splitlines()[-1])
  assert out["calls"] == [[sys.executable, "-m", "pip", "install", "-q", str(content / "rljax")]]
  assert out["origin"] == str(content / "rljax" / "rljax" / "__init__.py")
