"""The mutation table of ``benchmarks/catalog_mutants.py`` is well-formed and not stale.

Running the mutants takes minutes (``python benchmarks/catalog_mutants.py``); the
fast suite only checks that every mutant can still be applied (its original snippet
occurs exactly once in its file), names a real catalog row and existing test files,
and that every row of ``rljax.catalog()`` has a mutant or is listed, with a reason,
in ``NOT_COVERED`` (the list of what remains).
"""
import importlib.util
import sys
from pathlib import Path

import pytest

import rljax

ROOT = Path(__file__).resolve().parents[1]


def _load():
  spec = importlib.util.spec_from_file_location("catalog_mutants", ROOT / "benchmarks" / "catalog_mutants.py")
  mod = importlib.util.module_from_spec(spec)
  sys.modules[spec.name] = mod  # dataclasses look their module up there
  spec.loader.exec_module(mod)
  return mod


cm = _load()


@pytest.mark.parametrize("m", cm.MUTANTS, ids=lambda m: m.ident)
def test_mutant_applies_exactly_once_and_is_well_formed(m):
  assert cm.stale_reason(m, ROOT) is None, f"stale mutant {m.ident}: {cm.stale_reason(m, ROOT)}"
  assert m.kind and m.tests
  for t in m.tests:
    assert (ROOT / t).is_file(), f"{m.ident}: test file {t} does not exist"
  assert m.file.startswith("rljax/") and m.file.endswith(".py")


def test_mutant_idents_unique_and_names_in_catalog():
  names = {row.name for row in rljax.catalog()}
  unknown = sorted({m.technique for m in cm.MUTANTS} - names)
  assert not unknown, f"MUTANTS name techniques not in rljax.catalog(): {unknown}"
  pairs = [(m.technique, m.file, m.original) for m in cm.MUTANTS]
  assert len(pairs) == len(set(pairs)), "a mutant is listed twice"
  idents = [m.ident for m in cm.MUTANTS]
  assert len(idents) == len(set(idents)), sorted(i for i in idents if idents.count(i) > 1)


def test_every_catalog_row_has_a_mutant_or_is_listed_as_not_covered():
  names = [row.name for row in rljax.catalog()]
  covered = {m.technique for m in cm.MUTANTS}
  missing = [n for n in names if n not in covered and n not in cm.NOT_COVERED]
  assert not missing, f"catalog rows with no mutant and not in NOT_COVERED: {missing}"
  both = sorted(covered & set(cm.NOT_COVERED))
  assert not both, f"rows with mutants are still listed in NOT_COVERED: {both}"
  gone = sorted(set(cm.NOT_COVERED) - set(names))
  assert not gone, f"NOT_COVERED names rows that are not in the catalog: {gone}"
  assert all(isinstance(r, str) and r for r in cm.NOT_COVERED.values())


def test_module_of_matches_the_rooms():
  mods = cm.module_of()
  assert mods["grpo"] == "advantages" and mods["vcrl"] == "filters" and mods["composite"] == "rewards"
  assert mods["token_mean"] == "objectives" and mods["adaptive_kl"] == "control"


def test_runner_restores_the_file_and_reports_stale(tmp_path):
  src = tmp_path / "rljax" / "x.py"
  src.parent.mkdir()
  src.write_text("a = 1\nb = a + 1\n")
  before = src.stat().st_mtime_ns
  m = cm.Mutant("grpo", "rljax/x.py", "a + 1", "a - 1", "sign", ("tests/none.py",))
  assert cm.stale_reason(m, tmp_path) is None
  twice = cm.Mutant("grpo", "rljax/x.py", "a", "c", "sign", ("tests/none.py",))
  assert "2 times" in cm.stale_reason(twice, tmp_path)
  with pytest.raises(RuntimeError):
    with cm._Restore(src):
      src.write_text("broken")
      raise RuntimeError("interrupted")
  assert src.read_text() == "a = 1\nb = a + 1\n" and src.stat().st_mtime_ns == before
