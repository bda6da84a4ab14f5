"""A Hugging Face checkpoint brings its own architecture: ``ModelSpec``'s shape fields follow it.

``model.hidden_size``, ``model.num_layers``, ... describe a model trained from scratch. With
``model.hf_checkpoint`` the checkpoint's ``config.json`` decides them: a field the user set to another value than
the checkpoint's is refused, naming the field, its value and the checkpoint's (it would otherwise be ignored
without a word), and the run's ``config.json`` records the checkpoint's real values instead of the config's
from-scratch ones, which a checkpoint run never reads.

Which fields the user set: every route gives them as plain ``int`` (``--set model.hidden_size=64``, a config
file's ``ModelSpec(hidden_size=64)``, ``dataclasses.replace(cfg.model, num_layers=2)`` before ``train(cfg)``),
even at the default's value; the values the user did not choose are ``ShapeDefault`` ints (``ModelSpec``'s
defaults, ``tiny_config``'s shape, a saved run's record of its checkpoint), which ``dataclasses.replace`` and
``--set`` of other fields carry along unchanged. Comparing with the dataclass default would not do: the toy
default ``hidden_size=64`` is a value a user may well write.
"""
from __future__ import annotations

import dataclasses

__all__ = ["ARCHITECTURE_FIELDS", "ShapeDefault", "checkpoint_architecture", "with_checkpoint_architecture",
           "as_shape_defaults", "user_set_architecture"]

# ModelSpec field -> rljax.models.ModelConfig field of the checkpoint
ARCHITECTURE_FIELDS = {"num_layers": "num_layers", "hidden_size": "hidden_size", "num_heads": "num_heads",
                       "num_kv_heads": "num_kv_heads", "intermediate_size": "intermediate_size",
                       "max_seq_len": "max_position_embeddings"}


class ShapeDefault(int):
  """An architecture field's value the user did not choose (a default, a library config's, a record): an ``int``
  in every other respect (equal, hashed, printed and written to JSON as its value). A checkpoint replaces it
  without a word; a plain ``int`` other than the checkpoint's is refused."""
  __slots__ = ()


def as_shape_defaults(spec):
  """``spec`` (a ``ModelSpec``) with its architecture fields marked as not chosen by the user (``ShapeDefault``):
  for shapes a library config or a saved run gives."""
  return dataclasses.replace(spec, **{f: ShapeDefault(getattr(spec, f)) for f in ARCHITECTURE_FIELDS})


def user_set_architecture(spec) -> tuple:
  """The architecture fields of ``spec`` (a ``ModelSpec``) the user set: those not ``ShapeDefault``."""
  return tuple(f for f in ARCHITECTURE_FIELDS if not isinstance(getattr(spec, f), ShapeDefault))


def checkpoint_architecture(checkpoint: str, revision=None) -> dict:
  """``{ModelSpec field: value}`` of a checkpoint (a Hugging Face directory, a ``.gguf`` file or a Hub id at
  ``revision``), read from its ``config.json`` (the weights are not loaded)."""
  from rljax.models import config_from_hf, load_hf_config, resolve_checkpoint  # pylint: disable=import-outside-toplevel
  mcfg = config_from_hf(load_hf_config(resolve_checkpoint(checkpoint, revision)))
  return {field: int(getattr(mcfg, name)) for field, name in ARCHITECTURE_FIELDS.items()}


def with_checkpoint_architecture(cfg):
  """``cfg`` (a ``RunConfig``) with ``ModelSpec``'s architecture fields set to ``model.hf_checkpoint``'s (``cfg``
  itself without a checkpoint). Raises ``ValueError`` naming every field the user set (``user_set_architecture``)
  to a value other than the checkpoint's, with both values; reads only the checkpoint's ``config.json``."""
  spec = cfg.model
  if not spec.hf_checkpoint:
    return cfg
  real = checkpoint_architecture(spec.hf_checkpoint, spec.hf_revision)
  bad = [f for f in user_set_architecture(spec) if getattr(spec, f) != real[f]]
  if bad:
    sets = " and ".join(f"model.{f}={getattr(spec, f)}" for f in bad)
    whose = " and ".join(f"{f} is {real[f]}" for f in bad)
    raise ValueError(f"{sets} {'is' if len(bad) == 1 else 'are'} set with model.hf_checkpoint="
                     f"{spec.hf_checkpoint!r}, whose {whose}: a checkpoint brings its own architecture, so leave "
                     f"{' and '.join(f'model.{f}' for f in bad)} unset (the model.* shape fields describe a model "
                     "trained from scratch)")
  return cfg.replace(model=as_shape_defaults(dataclasses.replace(spec, **real)))
