"""Test-session setup: 8 fake CPU devices (before JAX is imported) and marks.

The fake devices' collectives meet in in-process rendezvous, and XLA aborts
the whole process when a participant is later than
``xla_cpu_collective_call_terminate_timeout_seconds`` (40 s by default). On a
loaded 2-core CI machine one thread of eight can be starved that long: it
killed a pytest-xdist worker once (and hung the session). The tests allow
20 minutes instead; a real deadlock still fails, through the CI timeout. The
flag names were checked on jaxlib 0.10 (an unknown XLA flag is fatal, so they
are only added where known).
"""
import importlib.metadata
import os
import tempfile

_COLLECTIVE_PATIENCE = ("--xla_cpu_collective_call_warn_stuck_timeout_seconds=300 "
                        "--xla_cpu_collective_call_terminate_timeout_seconds=1200")


def _jaxlib_minor() -> tuple:
  try:
    return tuple(int(p) for p in importlib.metadata.version("jaxlib").split(".")[:2])
  except (importlib.metadata.PackageNotFoundError, ValueError):
    return ()


os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
if _jaxlib_minor() == (0, 10) and "collective_call_terminate" not in os.environ["XLA_FLAGS"]:
  os.environ["XLA_FLAGS"] += " " + _COLLECTIVE_PATIENCE
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# A persistent compilation cache per test process: the many tiny runs (every catalog technique, the loop tests)
# compile the same sampler, forwards and update steps again and again; a program that took >= 0.3 s to compile
# is loaded instead (the cache key covers the program, the compile options and the XLA flags).
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", tempfile.mkdtemp(prefix="rljax-test-jax-cache-"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.3")
