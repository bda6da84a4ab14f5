"""A Hugging Face checkpoint brings its own architecture: ``ModelSpec``'s shape fields follow it.

``model.hidden_size``, ``model.num_layers``, ... describe a model trained from scratch. With
``model.hf_checkpoint`` the checkpoint's ``config.json`` decides them: a field the command line sets
(``rljax train --set model.hidden_size=64``) to another value than the checkpoint's is refused, naming the field
and the checkpoint's value (it would otherwise be ignored without a word), and the run's ``config.json`` records
the checkpoint's real values instead of the config's from-scratch ones (``tiny_config``'s, ``ModelSpec``'s
defaults), which a checkpoint run never reads.
"""
from __future__ import annotations

import dataclasses

from rljax.train._config import RunConfig

__all__ = ["ARCHITECTURE_FIELDS", "checkpoint_architecture", "with_checkpoint_architecture"]

# ModelSpec field -> rljax.models.ModelConfig field of the checkpoint
ARCHITECTURE_FIELDS = {"num_layers": "num_layers", "hidden_size": "hidden_size", "num_heads": "num_heads",
                       "num_kv_heads": "num_kv_heads", "intermediate_size": "intermediate_size",
                       "max_seq_len": "max_position_embeddings"}

def checkpoint_architecture(checkpoint: str, revision=None) -> dict:
  """``{ModelSpec field: value}`` of a checkpoint (a Hugging Face directory, a ``.gguf`` file or a Hub id at
  ``revision``), read from its ``config.json`` (the weights are not loaded)."""
  from rljax.models import config_from_hf, load_hf_config, resolve_checkpoint  # pylint: disable=import-outside-toplevel
  mcfg = config_from_hf(load_hf_config(resolve_checkpoint(checkpoint, revision)))
  return {field: int(getattr(mcfg, name)) for field, name in ARCHITECTURE_FIELDS.items()}


def with_checkpoint_architecture(cfg: RunConfig, set_fields=()) -> RunConfig:
  """``cfg`` with ``ModelSpec``'s architecture fields set to ``model.hf_checkpoint``'s (``cfg`` itself without a
  checkpoint). Raises ``ValueError`` naming the first of ``set_fields`` (``ModelSpec`` field names the caller knows
  were set, e.g. by ``--set``) whose value is not the checkpoint's."""
  spec = cfg.model
  if not spec.hf_checkpoint:
    return cfg
  real = checkpoint_architecture(spec.hf_checkpoint, spec.hf_revision)
  for field in set_fields:
    if getattr(spec, field) != real[field]:
      raise ValueError(f"model.{field}={getattr(spec, field)} is set with model.hf_checkpoint="
                       f"{spec.hf_checkpoint!r}, whose {field} is {real[field]}: a checkpoint brings its own "
                       f"architecture, so leave model.{field} unset (the model.* shape fields describe a model "
                       "trained from scratch)")
  return cfg.replace(model=dataclasses.replace(spec, **real))
