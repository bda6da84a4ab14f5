"""The host allocator for XLA on CPU: freed buffers stay in the process for the next step.

XLA:CPU takes a step's large buffers (a real model's activations and temporaries: hundreds of MB to GB) from the
C library's ``malloc``, on whichever thread runs the operation. glibc serves a request of 64 MB or more from a
thread's own arena with a fresh ``mmap`` and hands it back with ``munmap`` once freed, so every step the kernel
maps and zeroes the same gigabytes again, one 4 KB page fault at a time. One RL update of SmolLM2-135M on the
2-core CPU takes 557,000 page faults (2.2 GB) that way; a 4096 x 4096 matmul chain in
``benchmarks/host_allocator_bench.py`` spends half its time in them.

:func:`configure_host_allocator` sets three glibc ``mallopt`` options so freed memory stays in the heap and the
next step reuses it without a fault: one arena for every thread (``M_ARENA_MAX=1``: a thread's own arena would
still ``mmap`` a request that large), no ``mmap``-served chunks (``M_MMAP_MAX=0``) and no trimming of the heap's
top (``M_TRIM_THRESHOLD``). The costs: the process keeps its peak heap until it exits (a training run's
resident memory is at its peak every step anyway; the demo's peak RSS went down, 10.6 -> 8.2 GB), the heap can
grow by a buffer on some of the first steps before freed space fits every request (fragmentation), and threads
share one arena's lock for large requests (small ones go through glibc's per-thread cache).

It must run before JAX starts its CPU client: the client's threads pick their arena at their first ``malloc``
and keep it. The ``rljax`` command line calls it first thing (``RLJAX_HOST_ALLOCATOR=system`` leaves glibc's
defaults); from Python, call it before creating any JAX array. No JAX import here.
"""
from __future__ import annotations

import ctypes
import os
import platform
import sys
from typing import Optional

__all__ = ["configure_host_allocator", "MODES", "GLIBC_ENV", "KEEP_ENV"]

MODES = ("keep", "system")
# glibc's mallopt parameter numbers (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_MAX, _M_ARENA_MAX = -1, -4, -8
_NO_TRIM = -1  # M_TRIM_THRESHOLD=-1: never trim (mallopt(3))
_KEPT = "host allocator: freed memory kept for reuse (one malloc arena, no mmap chunks, no trimming)"
_applied: list = []  # the options are process-wide: set once, reported as set afterwards
# the environment variables glibc reads at start-up for the same options: a user's own setting wins
GLIBC_ENV = ("MALLOC_ARENA_MAX", "MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_",
             "GLIBC_TUNABLES")
# the same three options as glibc environment variables, for a process started from outside (a peer's process
# in a benchmark, a launcher): glibc reads them at start-up, so they hold for every thread
KEEP_ENV = {"MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(2 ** 62)}


def _jax_backend_started() -> bool:
  if "jax" not in sys.modules:
    return False
  try:
    from jax._src import xla_bridge  # pylint: disable=import-outside-toplevel
    return bool(getattr(xla_bridge, "_backends", {}))
  except Exception:  # pylint: disable=broad-except  # another JAX layout: assume started (change nothing)
    return True


def configure_host_allocator(mode: Optional[str] = None) -> str:
  """Sets glibc's allocator so that XLA:CPU's freed buffers are reused without page faults (module docstring).

  Args:
    mode: ``"keep"`` (freed memory stays in the process) or ``"system"`` (glibc's defaults, nothing changed);
      default ``$RLJAX_HOST_ALLOCATOR``, else ``"keep"``.

  Returns:
    One line saying what was done, or why nothing was: not Linux with glibc, glibc's malloc options already set
    in the environment, or JAX's backend already started (too late: its threads have their arenas).

  Raises:
    ValueError: ``mode`` (or ``$RLJAX_HOST_ALLOCATOR``) is not one of :data:`MODES`.
  """
  mode = (os.environ.get("RLJAX_HOST_ALLOCATOR") or "keep") if mode is None else mode
  if mode not in MODES:
    raise ValueError(f"host allocator mode (RLJAX_HOST_ALLOCATOR) must be one of {MODES}, got {mode!r}")
  if _applied:  # process-wide and not undone
    return _KEPT + (" (set earlier in this process)" if mode == "system" else "")
  if mode == "system":
    return "host allocator: glibc defaults (RLJAX_HOST_ALLOCATOR=system)"
  if sys.platform != "linux" or platform.libc_ver()[0] != "glibc":
    return f"host allocator: unchanged (not Linux with glibc: {sys.platform}, {platform.libc_ver()[0] or 'no libc'})"
  user = [k for k in GLIBC_ENV if k in os.environ]
  if user:
    return f"host allocator: unchanged ({', '.join(user)} set in the environment)"
  if _jax_backend_started():
    return ("host allocator: unchanged (JAX's backend had already started; call configure_host_allocator() "
            "before creating any JAX array)")
  mallopt = ctypes.CDLL(None).mallopt
  mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
  ok = [mallopt(_M_ARENA_MAX, 1), mallopt(_M_MMAP_MAX, 0), mallopt(_M_TRIM_THRESHOLD, _NO_TRIM)]
  if not all(ok):
    return f"host allocator: glibc refused an option (mallopt returned {ok}); defaults may be partly in place"
  _applied.append(True)
  return _KEPT
