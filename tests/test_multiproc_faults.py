"""Faults of the asynchronous runner across processes (``rljax.train._multiproc_async.fail_fast``): an error on
either side ends both processes within seconds; the side that raised names its error.

Two pairs of workers, one after the other (this file as a script, 2 processes x 1 CPU device each, mesh ``fsdp=2`` split
1 / 1, ``eta = 1``): in one pair the rollout process raises while sampling batch 2, in the other the training
process raises before its second update. Without ``fail_fast`` the raising process waits in JAX's shutdown
barrier while the other waits for its next transfer, and both are aborted after 300 s (measured: 322 s); the
deadline here is below that.
"""
import os
import sys
import time

import pytest
from _workers import launch_workers, wait_workers

OVERRIDES = ["rl.steps=4", "sft.steps=0", "eval.num_problems=8", "eval.batch_size=8", "eval.num_samples=1",
             "eval.pass_k=1", "checkpoint.enabled=false", "rl.num_microbatches=1", "mesh.fsdp=2",
             "rl.async_staleness=1", "rl.async_rollout_devices=1"]


def _worker(process_id: int, port: int, out: str, crash: str) -> None:
  """``train`` on 2 processes with the ``crash`` side raising mid-run."""
  from rljax import parallel as par  # pylint: disable=import-outside-toplevel
  import rljax.train._multiproc_async as M  # pylint: disable=import-outside-toplevel
  from rljax.train import apply_overrides, tiny_config, train  # pylint: disable=import-outside-toplevel
  assert par.maybe_initialize_distributed(env={"RLJAX_COORDINATOR": f"localhost:{port}", "RLJAX_NUM_PROCESSES": "2",
                                               "RLJAX_PROCESS_ID": str(process_id),
                                               "RLJAX_TRANSFER_ADDRESS": os.environ["TRANSFER_ADDRESS"]})
  if crash == "rollout":
    batch = M._Sampler.batch

    def crashing_batch(self, k):
      if k == 2:
        raise RuntimeError("sampler crashed on batch 2")
      return batch(self, k)
    M._Sampler.batch = crashing_batch
  else:
    from rljax.train._rl import RLLoop  # pylint: disable=import-outside-toplevel
    update = RLLoop.update  # only the training side updates

    def crashing_update(self, batch, s):
      if s == 1:
        raise RuntimeError("update crashed at step 1")
      return update(self, batch, s)
    RLLoop.update = crashing_update
  train(apply_overrides(tiny_config(out), OVERRIDES))
  print("train returned", flush=True)  # never reached


@pytest.mark.multiprocess
def test_a_crash_on_either_side_ends_both_processes(tmp_path):
  error = {"rollout": "RuntimeError: sampler crashed on batch 2", "training": "RuntimeError: update crashed at step 1"}
  for crash, first in {"rollout": 0, "training": 1}.items():  # one pair at a time
    procs = launch_workers(__file__, lambda i, port, c=crash: ["--worker", i, port, tmp_path / c, c],
                           devices_per_process=1, transfer=True)
    deadline = time.time() + 240  # under JAX's 300 s shutdown barrier, which is what a hang would end in
    # the other side: 1 when its failed transfer reached fail_fast first, SIGABRT (-6) when JAX's error polling
    # (the first process's disconnect) aborted it first; both are immediate
    second = 1 - first
    expect = [0, 0]
    expect[first], expect[second] = 1, (1, -6)
    out = wait_workers(procs, deadline, expect_codes=expect)
    assert f"process {first} ({crash} side) failed: {error[crash]}" in out[first], out[first][-3000:]
    assert (f"the run failed first on process {first} ({crash} side): {error[crash]}" in out[second]
            or "the JAX distributed service detected fatal errors" in out[second]), out[second][-3000:]
    assert "train returned" not in out[0] + out[1]


if __name__ == "__main__" and len(sys.argv) == 6 and sys.argv[1] == "--worker":
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  _worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
