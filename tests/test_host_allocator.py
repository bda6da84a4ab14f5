"""rljax.configure_host_allocator: XLA:CPU's freed step buffers reused without page faults (glibc only)."""
import json
import os
import platform
import subprocess
import sys

import jax.numpy as jnp
import pytest

import rljax
from rljax import host_allocator

GLIBC = sys.platform == "linux" and platform.libc_ver()[0] == "glibc"

# One jitted step whose 4096 x 4096 float32 intermediate (64 MiB: glibc serves it from a fresh mmap unless told
# otherwise) is freed at the end of every call; prints the page faults of each of 20 calls. Kept, the heap may
# still grow by a buffer on some of the first calls (fragmentation) before every call reuses it.
_STEP = """
import json, os, resource, sys
import rljax
message = rljax.configure_host_allocator()
import jax, jax.numpy as jnp
@jax.jit
def step(x, v):
  y = jnp.tanh(x @ x.T)
  return y @ v
x, v = jnp.ones((4096, 64), jnp.float32) / 64, jnp.ones((4096, 1), jnp.float32)
faults = []
for _ in range(20):
  before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
  step(x, v).block_until_ready()
  faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"faults": faults, "message": message}))
"""
_PAGES = 64 * 2 ** 20 // 4096  # pages of the 64 MiB intermediate


def _step_faults(mode: str, glibc_env=None) -> dict:
  env = {k: v for k, v in os.environ.items() if k not in host_allocator.GLIBC_ENV}
  env.update(RLJAX_HOST_ALLOCATOR=mode, JAX_PLATFORMS="cpu", **(glibc_env or {}))
  out = subprocess.run([sys.executable, "-c", _STEP], capture_output=True, text=True, env=env, check=True,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt options")
def test_kept_memory_is_reused_without_page_faults():
  kept, system = _step_faults("keep"), _step_faults("system")
  assert kept["message"] == host_allocator._KEPT  # pylint: disable=protected-access
  assert "glibc defaults" in system["message"]
  # glibc's defaults map (and fault in) the 64 MiB intermediate again on every call; kept, it is reused
  assert min(system["faults"]) >= _PAGES, system
  assert min(kept["faults"]) < _PAGES // 10, kept
  assert sorted(kept["faults"])[len(kept["faults"]) // 2] < _PAGES // 10, kept  # and on most calls
  # KEEP_ENV (the same options as start-up environment variables, for processes started from outside) does the same
  by_env = _step_faults("system", host_allocator.KEEP_ENV)
  assert min(by_env["faults"]) < _PAGES // 10, by_env
  assert sorted(by_env["faults"])[len(by_env["faults"]) // 2] < _PAGES // 10, by_env


def test_too_late_once_jax_has_started(monkeypatch):
  jnp.ones(2).block_until_ready()  # this process's backend is up
  monkeypatch.setattr(host_allocator, "_applied", [])
  for k in host_allocator.GLIBC_ENV:
    monkeypatch.delenv(k, raising=False)
  message = rljax.configure_host_allocator("keep")
  assert "unchanged" in message
  if GLIBC:
    assert "already started" in message


def test_environment_settings_win_and_bad_modes_are_named(monkeypatch):
  monkeypatch.setattr(host_allocator, "_applied", [])
  monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
  if GLIBC:
    assert "MALLOC_ARENA_MAX set in the environment" in rljax.configure_host_allocator("keep")
  assert "glibc defaults" in rljax.configure_host_allocator("system")
  with pytest.raises(ValueError, match=r"must be one of \('keep', 'system'\), got 'fast'"):
    rljax.configure_host_allocator("fast")
  monkeypatch.setenv("RLJAX_HOST_ALLOCATOR", "fast")
  with pytest.raises(ValueError, match="RLJAX_HOST_ALLOCATOR"):
    rljax.configure_host_allocator()


def test_cli_names_a_bad_mode(monkeypatch, capsys):
  from rljax.cli import main  # pylint: disable=import-outside-toplevel
  monkeypatch.setenv("RLJAX_HOST_ALLOCATOR", "fast")
  assert main(["train", "--config", "tiny"]) == 2
  assert "RLJAX_HOST_ALLOCATOR" in capsys.readouterr().err
