"""JAX's persistent compilation cache for runs: a second run of the same shapes loads its programs instead of
compiling them again.

A real checkpoint's first RL update compiles for 45-51 s on a 2-core CPU (SmolLM2-135M, docs/real_models.md);
with the cache, a later run of the same model, batch shapes and XLA flags reads the compiled programs from disk.
The cache key covers the program, the compile options and the XLA flags, so a stale entry is never used.

Every program is stored, however fast it compiled (``min_compile_time_s=0``): JAX's default threshold of 1 s left
the ~85 small programs a launch compiles besides the sampler and the update (initialisers, reward and advantage
stages, the evaluation's sampler variants) to compile again at every launch, a resume, ``rljax sample`` and
``rljax eval`` included; on the tiny config they are 1.7 MB together. tests/test_compile_cache.py counts JAX's
cache events: after a first run, a second run of the same shapes, a resume, ``eval`` and a repeated ``sample``
compile nothing (a first ``sample`` of a new prompts x ``--n`` shape compiles that sampler once). What no cache
skips is tracing each program in Python before its key is known (most of a real model's first update when warm).
"""
from __future__ import annotations

import os
from typing import Optional

import jax

__all__ = ["enable_compile_cache", "default_compile_cache_dir"]


def default_compile_cache_dir() -> str:
  """``$JAX_COMPILATION_CACHE_DIR`` if set, else ``$RLJAX_CACHE/jax-compile``, else ``~/.cache/rljax/jax-compile``."""
  if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
    return os.environ["JAX_COMPILATION_CACHE_DIR"]
  root = os.environ.get("RLJAX_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "rljax")
  return os.path.join(root, "jax-compile")


def enable_compile_cache(path: Optional[str] = None, *, min_compile_time_s: Optional[float] = None) -> Optional[str]:
  """Turns on JAX's persistent compilation cache in ``path`` (default ``default_compile_cache_dir()``); programs
  that took at least ``min_compile_time_s`` to compile are stored (default
  ``$JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS``, else 0: every program). ``path=""`` turns nothing on (returns
  None).

  This sets process-wide JAX options (``jax_compilation_cache_dir``,
  ``jax_persistent_cache_min_compile_time_secs``): the ``rljax`` command line calls it before anything compiles
  (``RLJAX_COMPILE_CACHE=""`` disables it there); from Python, call it yourself before ``train``.
  Returns the directory used.
  """
  path = default_compile_cache_dir() if path is None else path
  if not path:
    return None
  path = os.path.expanduser(path)
  os.makedirs(path, exist_ok=True)
  jax.config.update("jax_compilation_cache_dir", path)
  if min_compile_time_s is None:
    min_compile_time_s = float(os.environ.get("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS") or 0.0)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_time_s))
  return path
