"""LoRA helpers: trainable-parameter masks, merge/unmerge, adapter export (PEFT layout).

Adapters live on the projections named in ``ModelConfig.lora.targets`` as
``nnx.LoRAParam`` variables (``lora_a [in, r]``, ``lora_b [r, out]``); the
forward adds ``s (x A) B`` with ``s = alpha / r`` (``alpha / sqrt(r)`` with
rsLoRA, arXiv 2312.03732). Train only adapters with
``optax.masked(tx, lora_mask(params))`` or ``nnx.Optimizer(model, tx, wrt=LORA_FILTER)``.
"""
from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from rljax.models._layers import lora_modules
from rljax.models._transformer import layer_runs

__all__ = ["LORA_FILTER", "lora_mask", "lora_modules", "merge_lora", "unmerge_lora", "save_lora_adapter",
           "lora_state"]

LORA_FILTER = nnx.LoRAParam  # nnx filter selecting adapter parameters only

_HF_NAMES = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
             "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj"}


def lora_mask(state):
  """Pytree of bools (same structure as ``state``, an ``nnx.State`` of parameters): True on
  adapter parameters. Use with ``optax.masked`` so only adapters are updated."""
  flat = nnx.to_flat_state(state)
  masked = [(k, isinstance(v, nnx.LoRAParam) if isinstance(v, nnx.Variable) else False) for k, v in flat]
  return nnx.from_flat_state(masked)


def lora_state(model):
  """``nnx.State`` of the adapter parameters only."""
  return nnx.state(model, nnx.LoRAParam)


def merge_lora(model) -> None:
  """Folds adapters into the base kernels in place: ``W <- W + s A B`` (adapters then inactive)."""
  for _, mod in lora_modules(model):
    if not mod.lora_merged:
      w = mod.kernel[...]
      mod.kernel.set_value((w.astype(jnp.float32) + mod.lora_delta()).astype(w.dtype))
      mod.lora_merged = True


def unmerge_lora(model) -> None:
  """Inverse of :func:`merge_lora`: ``W <- W - s A B`` and adapters active again."""
  for _, mod in lora_modules(model):
    if mod.lora_merged:
      w = mod.kernel[...]
      mod.kernel.set_value((w.astype(jnp.float32) - mod.lora_delta()).astype(w.dtype))
      mod.lora_merged = False


def save_lora_adapter(model, path: str) -> None:
  """Writes the adapter alone in the PEFT layout (``adapter_config.json`` +
  ``adapter_model.safetensors`` with ``...q_proj.lora_A.weight [r, in]`` /
  ``lora_B.weight [out, r]``)."""
  from rljax.models._safetensors_file import save_safetensors  # pylint: disable=import-outside-toplevel
  cfg = model.cfg
  if cfg.lora is None:
    raise ValueError("model has no LoRA adapters (cfg.lora is None)")
  os.makedirs(path, exist_ok=True)
  tensors = {}
  runs = layer_runs(cfg)
  for mpath, mod in lora_modules(model):
    a, b = np.asarray(jax.device_get(mod.lora_a[...])), np.asarray(jax.device_get(mod.lora_b[...]))
    if mpath[0] == "layer_stacks":  # stacked layers: [n, in, r] / [n, r, out], layers start .. stop - 1
      start, stop = runs[mpath[1]]
      per_layer = [(start + j, a[j], b[j]) for j in range(stop - start)]
    else:
      per_layer = [(mpath[1], a, b)]
    for layer, la, lb in per_layer:
      base = f"base_model.model.model.layers.{layer}.{_HF_NAMES[mpath[-1]]}"
      tensors[base + ".lora_A.weight"] = np.ascontiguousarray(la.T)
      tensors[base + ".lora_B.weight"] = np.ascontiguousarray(lb.T)
  save_safetensors(tensors, os.path.join(path, "adapter_model.safetensors"), metadata={"format": "pt"})
  lc = cfg.lora
  with open(os.path.join(path, "adapter_config.json"), "w") as f:
    json.dump({"peft_type": "LORA", "r": lc.rank, "lora_alpha": lc.alpha, "use_rslora": lc.rslora,
               "target_modules": sorted({_HF_NAMES[t].split(".")[-1] for t in lc.targets}),
               "lora_dropout": 0.0, "bias": "none", "task_type": "CAUSAL_LM"}, f, indent=2)
