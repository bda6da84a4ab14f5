"""Executes notebooks/01_quickstart.ipynb on CPU at a tiny size (RLJAX_NOTEBOOK_QUICK=1)."""
import os

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NB = os.path.join(os.path.dirname(__file__), os.pardir, "notebooks", "01_quickstart.ipynb")


def test_quickstart_notebook_runs(tmp_path, monkeypatch):
  monkeypatch.setenv("RLJAX_NOTEBOOK_QUICK", "1")
  monkeypatch.delenv("XLA_FLAGS", raising=False)
  nb = nbformat.read(NB, as_version=4)
  client = nbclient.NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
  client.execute()
  outputs = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
  assert "RL  greedy accuracy:" in outputs
  assert os.path.exists(tmp_path / "runs" / "quickstart" / "metrics.jsonl")
