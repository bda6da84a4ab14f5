"""``model.hf_checkpoint`` as a Hugging Face Hub id (``Qwen/Qwen2.5-0.5B-Instruct``), resolved as transformers does.

``resolve_checkpoint(path, revision)`` gives the local Hugging Face directory a checkpoint reference names:

- a local directory: itself; a ``.gguf`` file: its converted cached directory (``checkpoint_directory``);
- otherwise ``ORG/NAME``, a Hub id: the snapshot directory in ``huggingface_hub``'s cache
  (``snapshot_download``: ``HF_HUB_CACHE``, else ``HF_HOME/hub``, else ``~/.cache/huggingface/hub``; the layout
  ``models--ORG--NAME/snapshots/<commit>/`` with ``refs/<branch>`` naming the commit), downloaded on first use
  unless ``HF_HUB_OFFLINE=1``; ``revision`` is a branch, tag or commit (default ``main``). Only the files a
  checkpoint needs are fetched (``*.json``, ``*.safetensors``, the tokenizer and the chat template), not
  PyTorch ``.bin``, ONNX or GGUF copies.

A Hub id not in the cache while offline (or with no network) is one ``ValueError`` line saying so and the command
that downloads it (``hf download ORG/NAME``); it says that a local path that does not exist reads the same (a
misspelled ``runs/model`` is an ``ORG/NAME``). A local path that is neither a directory nor a ``.gguf`` file is
refused naming ``model.hf_checkpoint``. ``huggingface_hub`` comes with ``tokenizers`` (a core dependency);
it is imported only for a Hub id.
"""
from __future__ import annotations

import os
import re
from typing import Optional

__all__ = ["is_hub_id", "resolve_checkpoint", "HUB_PATTERNS"]

# the files of a checkpoint (config, weights, tokenizer, chat template, generation config): nothing else is fetched
HUB_PATTERNS = ("*.json", "*.safetensors", "*.jinja", "tokenizer.model", "*.txt")

_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")


def is_hub_id(path: str) -> bool:
  """Whether ``path`` reads as a Hub id ``ORG/NAME`` and names nothing on the local disk."""
  path = str(path)
  return bool(_HUB_ID.fullmatch(path)) and not os.path.exists(path) and not path.endswith(".gguf")


def _offline() -> bool:
  """``HF_HUB_OFFLINE`` as ``huggingface_hub`` reads it (read now, so a value set after import counts too)."""
  from huggingface_hub import constants  # pylint: disable=import-outside-toplevel
  env = os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE")
  return env or bool(constants.HF_HUB_OFFLINE)


def _cache_dir() -> str:
  """``huggingface_hub``'s cache folder: ``HF_HUB_CACHE``, else ``HF_HOME/hub``, else its default."""
  from huggingface_hub import constants  # pylint: disable=import-outside-toplevel
  if os.environ.get("HF_HUB_CACHE"):
    return os.environ["HF_HUB_CACHE"]
  if os.environ.get("HF_HOME"):
    return os.path.join(os.environ["HF_HOME"], "hub")
  return constants.HF_HUB_CACHE


def _download_hint(repo_id: str, revision: Optional[str]) -> str:
  rev = f" --revision {revision}" if revision else ""
  return f"`hf download {repo_id}{rev}` (or `huggingface-cli download {repo_id}{rev}`)"


def resolve_checkpoint(path: str, revision: Optional[str] = None) -> str:
  """The local Hugging Face checkpoint directory of ``model.hf_checkpoint=path`` (``model.hf_revision=revision``)."""
  from rljax.models._gguf import checkpoint_directory  # pylint: disable=import-outside-toplevel
  path = str(path)
  if not is_hub_id(path):
    if revision:
      raise ValueError(f"model.hf_revision={revision!r} is set, but model.hf_checkpoint={path!r} is a local path, "
                       "not a Hugging Face Hub id (ORG/NAME): a revision applies to a Hub id only")
    if not os.path.exists(path):  # named as the user set it, before any reader's own message
      raise ValueError(f"model.hf_checkpoint {path!r} does not exist (a Hugging Face checkpoint directory, a .gguf "
                       "file or a Hub id ORG/NAME)")
    gguf = path.endswith(".gguf")  # the readers go by the name: a .gguf file, else a checkpoint directory
    if (gguf and not os.path.isfile(path)) or (not gguf and not os.path.isdir(path)):
      what = "a directory whose name ends in .gguf" if gguf else "a file whose name does not end in .gguf"
      raise ValueError(f"model.hf_checkpoint {path!r} is not a .gguf file or a checkpoint directory ({what})")
    return checkpoint_directory(path)
  try:
    from huggingface_hub import snapshot_download  # pylint: disable=import-outside-toplevel
    from huggingface_hub import errors  # pylint: disable=import-outside-toplevel
  except ImportError:
    raise ValueError(f"model.hf_checkpoint={path!r} is a Hugging Face Hub id, which needs the huggingface_hub "
                     "package: pip install huggingface_hub") from None
  cache, offline = _cache_dir(), _offline()
  what = f"model.hf_checkpoint={path!r}" + (f" (model.hf_revision={revision!r})" if revision else "")
  try:
    return snapshot_download(path, revision=revision, cache_dir=cache, allow_patterns=list(HUB_PATTERNS),
                             local_files_only=offline)
  except errors.RevisionNotFoundError:
    raise ValueError(f"{what}: the Hub has no revision {revision!r} of {path}") from None
  except errors.RepositoryNotFoundError:  # gated and private repositories included
    raise ValueError(f"{what}: no such model on the Hugging Face Hub, or it is private or gated (log in with "
                     "`hf auth login` and accept its terms on its page)") from None
  except errors.LocalEntryNotFoundError:
    why = "HF_HUB_OFFLINE is set" if offline else "the Hub could not be reached"
    hint = _download_hint(path, revision)
    raise ValueError(f"{what} (a Hub id, or a local path that does not exist) is not in the Hugging Face cache "
                     f"({cache}) and {why}: download it with {hint}, then run again") from None
