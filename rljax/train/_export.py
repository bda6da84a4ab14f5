"""A trained run as a Hugging Face checkpoint directory (``rljax export``): weights, config and tokenizer files
that transformers loads as they are."""
from __future__ import annotations

import os
import shutil
from typing import Optional

import jax
from flax import nnx

__all__ = ["export_run", "TOKENIZER_FILES"]

# what a Hugging Face tokenizer and generation setup are made of (copied from the run's checkpoint when present)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                   "generation_config.json", "tokenizer.model", "vocab.json", "merges.txt")


def export_run(run_dir: str, out_dir: str, *, stage: Optional[str] = None, step: Optional[int] = None,
               dtype: Optional[str] = None) -> str:
  """Writes the run's checkpoint (``stage``/``step``: default the latest RL one) to ``out_dir`` as a Hugging Face
  checkpoint: ``rljax.models.save_pretrained`` (LoRA adapters merged into the weights; ``dtype`` default the
  model's) plus the tokenizer and generation files of the checkpoint the run started from
  (``model.hf_checkpoint``; a GGUF file's converted directory). Refuses a non-empty ``out_dir`` and a run of a
  model trained from scratch (its SentencePiece tokenizer has no Hugging Face form here). Returns ``out_dir``.
  """
  from rljax.models import save_pretrained  # pylint: disable=import-outside-toplevel
  from rljax.train._run import load_run  # pylint: disable=import-outside-toplevel
  if os.path.isdir(out_dir) and os.listdir(out_dir):
    raise ValueError(f"export: {out_dir!r} is not empty; export into a new directory")
  exp, graphdef, state, info = load_run(run_dir, stage=stage, step=step, weights_only=True)
  source = exp.cfg.model.hf_checkpoint
  if not source:
    raise ValueError(f"export: {run_dir!r} trained a model from scratch (model.hf_checkpoint unset); export writes "
                     "Hugging Face checkpoints of runs that started from one")
  from rljax.models import resolve_checkpoint  # pylint: disable=import-outside-toplevel
  source = resolve_checkpoint(source, exp.cfg.model.hf_revision)
  model = nnx.merge(graphdef, jax.device_get(state.params), jax.device_get(state.model_state))
  tmp = out_dir.rstrip("/") + ".tmp-export"
  shutil.rmtree(tmp, ignore_errors=True)
  save_pretrained(model, tmp, dtype=dtype)
  for name in TOKENIZER_FILES:
    if os.path.exists(os.path.join(source, name)):
      shutil.copy2(os.path.join(source, name), os.path.join(tmp, name))
  if os.path.isdir(out_dir):
    os.rmdir(out_dir)  # empty (checked above)
  os.replace(tmp, out_dir)
  print(f"[rljax] exported {run_dir} ({info['stage']} step {info['step']}) to {out_dir}")
  return out_dir

