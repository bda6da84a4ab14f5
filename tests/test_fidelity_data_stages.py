"""Every row of the advantages, filters and rewards rooms says what it was checked against (issue #23 item 2)."""
import re

import pytest

from rljax import advantages, filters, rewards
from rljax._technique import FIDELITY_BASES, Fidelity

ROOMS = {"advantages": advantages.TECHNIQUES, "filters": filters.TECHNIQUES, "rewards": rewards.TECHNIQUES}
ROWS = [(room, t) for room, rows in ROOMS.items() for t in rows]


def test_the_three_rooms_hold_the_52_task_b_rows():
  assert len(ROWS) == 52
  assert len({t.name for _, t in ROWS}) == 52


@pytest.mark.parametrize("room,row", ROWS, ids=[t.name for _, t in ROWS])
def test_every_row_has_a_fidelity(room, row):
  f = row.fidelity
  assert isinstance(f, Fidelity), f"{room}.{row.name} has no Fidelity"
  assert f.basis in FIDELITY_BASES
  assert f.reference.strip()
  assert len(f.reference) <= 130 and len(f.differences) <= 220, f"{row.name}: keep the fidelity text short"
  if f.basis == "abstract":
    assert f.differences.strip(), f"{row.name}: say what was interpreted"
  if f.basis == "authors_code":
    # "github.com/<owner>/<repo>: <path/to/file>": a repository and a file
    m = re.match(r"github\.com/([\w.-]+)/([\w.-]+): (\S+)", f.reference)
    assert m, f"{row.name}: authors_code reference must name the repository and file, got {f.reference!r}"
    assert "." in m.group(3) and not m.group(3).endswith(":"), f"{row.name}: {m.group(3)!r} is not a file"
  if f.basis == "peer":
    assert re.search(r"verl|TRL|AReaL|OpenRLHF|open-r1", f.reference), f"{row.name}: name the peer"


def test_fidelity_rejects_incomplete_records():
  with pytest.raises(ValueError, match="basis"):
    Fidelity("paper", "x")
  with pytest.raises(ValueError, match="reference"):
    Fidelity("peer", " ")
  with pytest.raises(ValueError, match="interpreted"):
    Fidelity("abstract", "seed L1")
