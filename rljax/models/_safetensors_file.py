"""Writing a safetensors file with the mode rljax's other files get (``_hf`` checkpoints, ``_lora`` adapters share
it)."""
import os
from typing import Optional

__all__ = ["save_safetensors"]


def save_safetensors(tensors: dict, filename: str, metadata: Optional[dict] = None) -> None:
  """``safetensors.numpy.save_file`` with the file mode ``open()`` gives (0644 under the usual umask 022), the mode
  of the export's ``config.json`` and tokenizer files beside it. safetensors writes through a private temporary file
  (mode 0600), which transformers keeps: its ``save_pretrained`` (transformers 5.25, safetensors 0.8) leaves
  ``model.safetensors`` at 0600, so rljax's export differs from transformers' here, on purpose."""
  from safetensors.numpy import save_file as _write  # pylint: disable=import-outside-toplevel
  _write(tensors, filename, metadata=metadata)
  umask = os.umask(0)
  os.umask(umask)
  os.chmod(filename, 0o666 & ~umask)
