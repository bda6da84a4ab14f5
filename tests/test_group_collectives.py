"""Host collectives over a process group (``rljax.parallel.process_any`` / ``process_sum`` / ``allgather_rows``
with ``processes`` a proper subset, through ``group_allgather``: the coordination service's key-value store).

3 processes x 1 CPU device (``jax.distributed``); processes 0 and 2 make a sequence of group collectives over
``[0, 2]`` on random values, process 1 takes no part (it only meets the others at the end: a collective that
needed it would wait forever, and the test fails on its timeout). The results are compared with NumPy on the
values every process drew (the same seeds here).
"""
import json
import os
import sys
import time

import numpy as np
import pytest
from _workers import launch_workers, wait_workers

GROUP, N, ROUNDS = (0, 2), 3, 4


def _values(p: int, r: int) -> dict:
  """Process ``p``'s values in round ``r`` (the test recomputes them)."""
  rng = np.random.default_rng(100 * p + r)
  rows = [[int(t) for t in rng.integers(0, 1000, size=int(rng.integers(0, 6)))] for _ in range(3)]
  return {"flag": bool(rng.random() < 0.3), "sums": {"a": float(rng.normal()), "b": float(rng.normal() * 1e8),
                                                     "nan" if r == 3 else "c": float("nan") if r == 3 else 0.1},
          "rows": rows}


def _worker(process_id: int, port: int, out: str) -> None:
  import jax  # pylint: disable=import-outside-toplevel
  from jax._src import distributed  # pylint: disable=import-outside-toplevel
  from rljax import parallel as par  # pylint: disable=import-outside-toplevel
  jax.distributed.initialize(f"localhost:{port}", N, process_id)
  client = distributed.global_state.client
  got = []
  if process_id in GROUP:
    row_map = {p: (3 * i, 3 * i + 3) for i, p in enumerate(GROUP)}  # the group's 6 rows, 3 per process
    for r in range(ROUNDS):
      v = _values(process_id, r)
      got.append({"any": par.process_any(v["flag"], GROUP), "sum": par.process_sum(v["sums"], list(GROUP)),
                  "rows": par.allgather_rows(v["rows"], row_map, 6, GROUP)})
    # each member keeps only its key of the last call (earlier ones are deleted once every member read them)
    prefix = "rljax/group/" + ",".join(map(str, GROUP))
    left = sorted(k for k, _ in client.key_value_dir_get(prefix))
    assert len(left) <= 2 * len(GROUP), left
  else:
    assert par.process_any(True, [process_id]) and par.process_sum({"a": 1.5}, (process_id,)) == {"a": 1.5}
  client.wait_at_barrier("test_group_collectives_done", timeout_in_ms=120_000)
  if process_id in GROUP:  # after the barrier: every member is done reading
    left = sorted(k for k, _ in client.key_value_dir_get("rljax/group/"))
    got.append({"left": left})
  with open(os.path.join(out, f"p{process_id}.json"), "w", encoding="utf-8") as f:
    json.dump(got, f)


@pytest.mark.multiprocess
def test_group_collectives_over_two_of_three_processes_match_numpy(tmp_path):
  out = str(tmp_path)
  # a group collective that waited for the process outside the group would run into the deadline
  procs = launch_workers(__file__, lambda i, port: ["--worker", i, port, out], processes=N, devices_per_process=1)
  wait_workers(procs, time.time() + 180)
  got = {p: json.load(open(os.path.join(out, f"p{p}.json"), encoding="utf-8")) for p in GROUP}
  for r in range(ROUNDS):
    vals = [_values(p, r) for p in GROUP]
    want_any = any(v["flag"] for v in vals)
    keys = sorted(vals[0]["sums"])
    want_sum = {k: float(np.sum(np.asarray([v["sums"][k] for v in vals], np.float64))) for k in keys}
    want_rows = vals[0]["rows"] + vals[1]["rows"]
    for p in GROUP:
      g = got[p][r]
      assert g["any"] == want_any
      assert g["sum"].keys() == want_sum.keys()
      for k in keys:  # exact (float64, process order); NaN propagates
        np.testing.assert_array_equal(g["sum"][k], want_sum[k], err_msg=k)
      assert g["rows"] == want_rows
  assert any(_values(p, r)["flag"] for p in GROUP for r in range(ROUNDS))  # the draws exercise both answers
  assert not all(any(_values(p, r)["flag"] for p in GROUP) for r in range(ROUNDS))
  # after the last call, each member's key of that call alone is left (2 keys: no growth with the calls)
  for p in GROUP:
    assert got[p][-1]["left"] == [f"rljax/group/0,2/{3 * ROUNDS - 1}/{q}" for q in GROUP]


def test_group_collective_refusals():
  """One process: a group naming a process that does not exist, or excluding this process, is refused."""
  from rljax import parallel as par  # pylint: disable=import-outside-toplevel
  with pytest.raises(ValueError, match=r"processes \[0, 1\] of 1: each must be one of 0 .. 0"):
    par.process_any(True, [0, 1])
  with pytest.raises(ValueError, match=r"processes \[0, 3\] of 1"):
    par.process_sum({"a": 1.0}, [0, 3])
  assert par.allgather_rows([[1]], {0: (0, 1)}, 1, [0]) == [[1]]


if __name__ == "__main__" and len(sys.argv) == 5 and sys.argv[1] == "--worker":
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  _worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
