"""A new technique is its module, its test and the regenerated files (issue #50 item 5).

In a copy of the package and of the derived files, a throwaway advantage module (function, ``__all__``, row) and
its test file are added; ``python -m rljax.recipes --regenerate --root COPY`` (run by the copy's own Python) then
makes every derived file current, and nothing else changes: the room exports the function, the catalog, the recipe
table and the registry list the row, a recipe trains nothing new to the trainer (``stage("half_grpo")`` resolves),
and the checks that read the derived files pass in the copy.
"""
import filecmp
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from rljax.recipes._regenerate import DERIVED, regenerate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODULE = '''\
"""A throwaway technique: half of GRPO's advantage (the test of ``python -m rljax.recipes --regenerate``)."""
from rljax._technique import Fidelity, Technique
from rljax.advantages import _stages as S
from rljax.advantages._outcome import grpo

__all__ = ["half_grpo"]


def half_grpo(rewards, group_id, *, valid=None, num_groups=None):
  """``A_i = (r_i - mu_g) / (2 (sigma_g + eps))``: GRPO's advantage halved."""
  adv, info = grpo(rewards, group_id, valid=valid, num_groups=num_groups)
  return adv / 2, info


TECHNIQUES = (Technique("half_grpo", "advantage", half_grpo, "A_i = grpo_i / 2", "a test",
                        stage=S.group_estimator(half_grpo), fidelity=Fidelity("paper_formula", "a test")),)
'''

TEST = '''\
import numpy as np

import rljax.advantages as A


def test_half_grpo_is_half_of_grpo():
  r, g = np.array([1.0, 0.0, 2.0, 2.0]), np.array([0, 0, 1, 1])
  np.testing.assert_allclose(np.asarray(A.half_grpo(r, g)[0]), np.asarray(A.grpo(r, g)[0]) / 2)
'''

CHECK = textwrap.dedent('''\
    import json, os, sys
    root = sys.argv[1]
    import rljax, rljax.advantages as A
    assert rljax.__file__.startswith(root), rljax.__file__
    from rljax.catalog import as_table
    from rljax.recipes._regenerate import registry_snapshot, regenerate
    from rljax.recipes import stage
    from rljax.recipes.__main__ import table
    assert "half_grpo" in A.__all__ and A.half_grpo.__module__ == "rljax.advantages._half_grpo"
    names = [r.name for r in rljax.catalog()]
    assert names[-1] != "half_grpo" and "half_grpo" in names  # after the advantages room's rows
    assert stage("half_grpo").name == "half_grpo"
    docs = {p: open(os.path.join(root, p), encoding="utf-8").read() for p in ("docs/catalog.md", "docs/recipes.md")}
    assert "| `half_grpo` | advantage |" in docs["docs/catalog.md"]
    assert as_table(markdown=True) in docs["docs/catalog.md"] and table(markdown=True) in docs["docs/recipes.md"]
    assert "| `half_grpo` | `rl.advantage` |" in docs["docs/recipes.md"]
    with open(os.path.join(root, "tests/data/registry.json"), encoding="utf-8") as f:
      assert json.load(f) == registry_snapshot()
    assert regenerate(root, check=True) == []
    sys.path.insert(0, os.path.join(root, "tests"))
    import test_half_grpo
    test_half_grpo.test_half_grpo_is_half_of_grpo()
    print("ok")
    ''')


def _copy(dst):
  ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
  shutil.copytree(os.path.join(ROOT, "rljax"), os.path.join(dst, "rljax"), ignore=ignore)
  shutil.copytree(os.path.join(ROOT, "kernels"), os.path.join(dst, "rljax", "kernels"), ignore=ignore)
  shutil.copytree(os.path.join(ROOT, "configs"), os.path.join(dst, "rljax", "configs"), ignore=ignore)
  for path in DERIVED:
    os.makedirs(os.path.dirname(os.path.join(dst, path)), exist_ok=True)
    shutil.copy(os.path.join(ROOT, path), os.path.join(dst, path))


def _changed(a, b) -> list:
  """Files that differ or exist on one side only, under the two trees."""
  out, todo = [], [""]
  while todo:
    rel = todo.pop()
    cmp = filecmp.dircmp(os.path.join(a, rel), os.path.join(b, rel), ignore=["__pycache__"])
    out += [os.path.join(rel, n) for n in cmp.left_only + cmp.right_only + cmp.diff_files]
    todo += [os.path.join(rel, n) for n in cmp.common_dirs]
  return sorted(out)


def test_the_derived_files_of_this_checkout_are_current():
  assert regenerate(ROOT, check=True) == [], "python -m rljax.recipes --regenerate"


def test_a_new_technique_is_its_module_its_test_and_the_regenerated_files(tmp_path):
  before, work = tmp_path / "before", tmp_path / "work"
  _copy(before)
  shutil.copytree(before, work)
  (work / "rljax" / "advantages" / "_half_grpo.py").write_text(MODULE)
  (work / "tests" / "test_half_grpo.py").write_text(TEST)
  env = {**os.environ, "PYTHONPATH": str(work), "JAX_PLATFORMS": "cpu"}
  run = subprocess.run([sys.executable, "-m", "rljax.recipes", "--regenerate", "--root", str(work)], cwd=str(work),
                       env=env, capture_output=True, text=True, timeout=600)
  assert run.returncode == 0, run.stderr
  assert run.stdout.strip() == f"rewritten: {', '.join(DERIVED)}"
  assert _changed(before, work) == sorted(["rljax/advantages/_half_grpo.py", "tests/test_half_grpo.py", *DERIVED])
  check = subprocess.run([sys.executable, "-c", CHECK, str(work)], cwd=str(work), env=env, capture_output=True,
                         text=True, timeout=600)
  assert check.returncode == 0 and check.stdout.strip() == "ok", check.stderr[-3000:]


def test_check_and_root_are_refused_without_regenerate(capsys):
  from rljax.recipes.__main__ import main  # pylint: disable=import-outside-toplevel
  with pytest.raises(SystemExit) as e:
    main(["--check"])
  assert e.value.code == 2 and "--check and --root go with --regenerate" in capsys.readouterr().err


def test_a_folder_that_is_not_a_checkout_is_refused_naming_the_missing_files(tmp_path):
  with pytest.raises(FileNotFoundError, match="docs/catalog.md, docs/recipes.md, tests/data/registry.json missing"):
    regenerate(str(tmp_path))


def test_gather_room_appends_a_new_modules_rows_and_names_and_refuses_an_unbound_extra(tmp_path, monkeypatch):
  """``gather_room`` on a two-module room: the room's own order first, then the rows of the module it does not
  name; that module's ``__all__`` is bound in the room; an ``extra`` name the room does not bind is refused."""
  room = tmp_path / "fakeroom"
  room.mkdir()
  (room / "_a.py").write_text("__all__ = ['fa']\ndef fa():\n  pass\nTECHNIQUES = ('row_a1', 'row_a2')\n")
  (room / "_b.py").write_text("__all__ = ['fb']\ndef fb():\n  pass\nTECHNIQUES = ('row_b',)\n")
  (room / "_helpers.py").write_text("X = 1\n")
  init = ("from rljax._technique import gather_room\nfrom fakeroom import _a\n"
          "TECHNIQUES, __all__ = gather_room(globals(), _a.TECHNIQUES[::-1], extra={extra})\n")
  (room / "__init__.py").write_text(init.format(extra="()"))
  monkeypatch.syspath_prepend(str(tmp_path))
  import importlib  # pylint: disable=import-outside-toplevel
  mod = importlib.import_module("fakeroom")
  assert mod.TECHNIQUES == ("row_a2", "row_a1", "row_b")
  assert mod.__all__ == ["TECHNIQUES", "fa", "fb"] and mod.fb() is None
  for name in [n for n in sys.modules if n.startswith("fakeroom")]:
    del sys.modules[name]
  (room / "__init__.py").write_text(init.format(extra="('not_bound',)"))
  with pytest.raises(ImportError, match=r"fakeroom: extra names \['not_bound'\] are not bound in the room"):
    importlib.import_module("fakeroom")
  for name in [n for n in sys.modules if n.startswith("fakeroom")]:
    del sys.modules[name]
