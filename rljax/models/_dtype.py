"""A copy of a model in another dtype (a bfloat16 sampler next to a float32 trainer)."""
from __future__ import annotations

import functools

import jax.numpy as jnp
from flax import nnx

from rljax.models._config import ModelConfig

__all__ = ["with_dtype"]


@functools.lru_cache(maxsize=8)
def _template(cfg: ModelConfig):
  """``(graphdef, {path: dtype})`` of a :class:`Transformer` built with ``cfg`` (abstract: no arrays)."""
  from rljax.models._transformer import Transformer  # pylint: disable=import-outside-toplevel
  graphdef, abstract = nnx.split(nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0))))
  return graphdef, {tuple(k): v.dtype for k, v in nnx.to_flat_state(abstract)}


def with_dtype(model, dtype: str):
  """``model`` with ``param_dtype = compute_dtype = dtype``: its arrays cast to the dtypes a model built in
  ``dtype`` holds, and every matmul in ``dtype`` (norms, softmax and logits stay float32, as in any
  ``ModelConfig``). The same model is returned when it already is in ``dtype``.

  Used by the RL loop's rollout sampler (``rl.sampler_dtype``): a bfloat16 inference copy of a float32
  trainer, the train/inference precision mismatch of the seed papers (TIS / MIS / IcePop correct for it).
  The copy shares nothing with ``model`` that it could write to (new arrays; ``model`` is not changed).
  """
  cfg = model.cfg
  if cfg.param_dtype == dtype and cfg.compute_dtype == dtype:
    return model
  graphdef, dtypes = _template(cfg.replace(param_dtype=dtype, compute_dtype=dtype))
  flat = []
  for path, var in nnx.to_flat_state(nnx.state(model)):
    path = tuple(path)
    if path not in dtypes:
      raise ValueError(f"internal: {'.'.join(map(str, path))} has no counterpart in the {dtype} model")
    flat.append((path, var.replace(jnp.asarray(var[...]).astype(dtypes[path]))))
  out = nnx.merge(graphdef, nnx.from_flat_state(flat))
  from rljax.models._lora import lora_modules  # pylint: disable=import-outside-toplevel
  for (_, src), (_, dst) in zip(lora_modules(model), lora_modules(out)):
    dst.lora_merged = src.lora_merged
  return out
