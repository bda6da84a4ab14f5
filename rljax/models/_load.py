"""``from_pretrained`` / ``from_gguf``: the one entry point that reads a Hugging Face checkpoint directory or a
llama.cpp GGUF file into a :class:`rljax.models.Transformer`.

It sits above both readers so that they do not import each other: ``_gguf`` (GGUF file -> cached Hugging Face
directory) uses ``_hf``'s config and tensor mapping, and ``_hf`` knows nothing of GGUF.
"""
from __future__ import annotations

from typing import Optional

from rljax.models._gguf import checkpoint_directory, gguf_checkpoint
from rljax.models._hf import load_checkpoint_dir

__all__ = ["from_pretrained", "from_gguf"]


def from_pretrained(path: str, dtype: str = "float32", **kw):
  """Loads a local checkpoint into a :class:`Transformer`.

  ``path``: a Hugging Face directory (``config.json`` + ``model.safetensors`` or an index and its shards), or a
  llama.cpp ``.gguf`` file, read through its converted directory (converted once and cached,
  ``rljax.models.gguf_checkpoint``). ``dtype`` and the keywords (``compute_dtype``, ``mesh``, ``rules``, extra
  :class:`ModelConfig` fields such as ``remat="full"`` or ``lora=...``) are those of
  ``rljax.models._hf.load_checkpoint_dir``: parameter dtype (overflow raises), activation dtype, placement on a
  mesh from the parameters' logical axes; LoRA adapters and a value head (``value_head=True``) start fresh.
  """
  return load_checkpoint_dir(checkpoint_directory(str(path)), dtype, **kw)


def from_gguf(gguf_path: str, *, dtype: str = "float32", cache_dir: Optional[str] = None, **kw):
  """``from_pretrained(gguf_checkpoint(gguf_path, cache_dir), dtype=dtype, **kw)``: a ``Transformer``."""
  return load_checkpoint_dir(gguf_checkpoint(gguf_path, cache_dir), dtype, **kw)
