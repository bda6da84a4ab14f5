"""The multi-process tests' workers: free local ports, launching a test file as worker processes, waiting for them.

Each multi-process test runs its own file as a script (``python tests/test_x.py --worker ...``), one process per
``jax.distributed`` task, on the CPU backend with fake devices; a worker that does not finish by the deadline
fails the test (every worker killed, the logs' tails shown), never the suite.
"""
import os
import random
import signal
import socket
import subprocess
import sys
import time
from typing import Callable, Optional, Sequence

import pytest


_GIVEN: set = set()  # the ports this test process handed out (each once)


def free_port() -> int:
  """A free local TCP port (a coordinator's or a transfer server's address), drawn at random below the kernel's
  ephemeral range (32768+ on Linux) and never the same twice in this process: the worker binds it only later,
  and a port from bind(0) could meanwhile be taken by an outgoing connection or a gloo listener of a process
  running beside it (seen once in CI: a transfer server got a foreign packet and aborted)."""
  rng = random.SystemRandom()
  for _ in range(1000):
    port = rng.randrange(20000, 32000)
    if port in _GIVEN:
      continue
    with socket.socket() as s:
      try:
        s.bind(("localhost", port))
      except OSError:
        continue
    _GIVEN.add(port)
    return port
  raise RuntimeError("no free port in 20000-31999")


def launch_workers(script: str, worker_args: Callable[[int, int], Sequence[str]], *, processes: int = 2,
                   devices_per_process: int = 2, transfer: bool = False,
                   env: Optional[dict] = None) -> list:
  """Starts ``processes`` copies of ``script`` with arguments ``worker_args(process_id, coordinator_port)``:
  CPU backend, ``devices_per_process`` fake devices each, unbuffered output; ``transfer``: each gets its own
  ``TRANSFER_ADDRESS`` (a free ``127.0.0.1`` port: the CPU backend's cross-host transfer server). ``env``:
  more variables. Python's faulthandler is on (``PYTHONFAULTHANDLER``): a worker that hangs shows where (see
  :func:`wait_workers`). Returns the ``subprocess.Popen`` objects (stdout and stderr together)."""
  port = free_port()
  flags = [f"--xla_force_host_platform_device_count={devices_per_process}"]
  flags += [f for f in os.environ.get("XLA_FLAGS", "").split() if "collective_call" in f or "optimization_level" in f]
  procs = []
  for i in range(processes):
    e = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1", XLA_FLAGS=" ".join(flags),
             **(env or {}))
    if transfer:
      e["TRANSFER_ADDRESS"] = f"127.0.0.1:{free_port()}"
    procs.append(subprocess.Popen([sys.executable, os.path.abspath(script), *map(str, worker_args(i, port))],
                                  env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
  return procs


def _hang_report(log: str) -> str:
  """A hung worker's log: its output's tail, then the Python stacks faulthandler wrote on SIGABRT, less the
  threads that only wait in the standard library (idle pool threads)."""
  out, _, dump = log.partition("Fatal Python error: Aborted")
  stacks = [t for t in dump.split("\n\n") if t.strip() and not t.startswith("Extension modules")]
  busy = [t for t in stacks if t.startswith("Current thread")
          or any("File " in line and ("/lib/python3." not in line or "-packages/" in line) for line in t.splitlines())]
  return out[-3000:] + ("\n[stacks at the deadline]\n" + "\n\n".join(busy) if busy else "")


def wait_workers(procs: list, deadline: float, *, expect_codes: Optional[Sequence[int]] = None) -> list:
  """Each worker's output, once all have exited by ``deadline`` (``time.time()``) with exit codes
  ``expect_codes`` (default: all 0; an entry may be a tuple of the codes allowed); otherwise fails the test
  with the logs' tails (killing the rest)."""
  logs = [""] * len(procs)
  try:
    for i, p in enumerate(procs):
      try:
        logs[i] = p.communicate(timeout=max(1.0, deadline - time.time()))[0]
      except subprocess.TimeoutExpired:
        for q in procs:  # SIGABRT: faulthandler writes every thread's Python stack to the log, then the abort
          if q.poll() is None:
            q.send_signal(signal.SIGABRT)
        for j in range(i, len(procs)):  # the logs of the workers before i are read
          try:
            logs[j] = procs[j].communicate(timeout=30)[0] or ""
          except subprocess.TimeoutExpired:
            procs[j].kill()
            logs[j] = procs[j].communicate()[0] or ""
        pytest.fail("workers did not finish in time\n" +
                    "\n".join(f"--- process {j} ---\n{_hang_report(log)}" for j, log in enumerate(logs)))
  finally:
    for q in procs:
      if q.poll() is None:
        q.kill()
  codes = [p.returncode for p in procs]
  want = list(expect_codes) if expect_codes is not None else [0] * len(procs)
  ok = len(codes) == len(want) and all(c in (w if isinstance(w, tuple) else (w,)) for c, w in zip(codes, want))
  assert ok, f"worker exit codes {codes}, expected {want}\n" + "\n".join(
      f"--- process {j} ---\n{log[-4000:]}" for j, log in enumerate(logs))
  return logs
