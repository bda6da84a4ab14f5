"""rljax.models: one Flax NNX decoder family with Hugging Face import/export, LoRA and MoE routing replay.

Public calls::

  from rljax.models import from_pretrained, policy_outputs
  model = from_pretrained("/path/to/hf_checkpoint", dtype="bfloat16")   # load
  model = from_pretrained("/path/to/model.Q4_K_M.gguf")                 # a GGUF file: converted once, cached
  out = model(tokens, positions, return_logits=True)                    # out.logits [B, T, V]
  hidden = model(tokens, positions).hidden                              # [B, T, H] after final norm
  po = policy_outputs(model, tokens)                                    # fused per-token logp / entropy
  critic = with_value_head(model)                                       # trunk copied + zero value head
  values = policy_outputs(critic, tokens).values                        # [B, T] V(state before token t)
  sampler = with_dtype(model, "bfloat16")                               # a bfloat16 copy (rl.sampler_dtype)

See ``docs/models.md``.
"""
from rljax.models._config import LoRAConfig, ModelConfig, RopeScaling
from rljax.models._gguf import (SUPPORTED_GGUF_ARCHITECTURES, SUPPORTED_GGUF_PRE_TOKENIZERS,
                                SUPPORTED_GGUF_TENSOR_TYPES, checkpoint_directory, convert_gguf, gguf_checkpoint,
                                smollm2_checkpoint, smollm2_gguf_path, unpermute_qk)
from rljax.models._gemma3_package import GEMMA3_PACKAGES, gemma3_checkpoint, gemma3_gguf_path
from rljax.models._hf import (SUPPORTED_ARCHITECTURES, config_from_hf, config_to_hf, load_hf_config, param_count,
                              save_pretrained, shard_state)
from rljax.models._hub import is_hub_id, resolve_checkpoint
from rljax.models._init import fan_in_init
from rljax.models._load import from_gguf, from_pretrained
from rljax.models._layers import PrefixGroups, dot_t, rope_inv_freq
from rljax.models._lora import (LORA_FILTER, lora_mask, lora_modules, lora_state, merge_lora, save_lora_adapter,
                                unmerge_lora)
from rljax.models._transformer import (KVCache, ModelOutput, Transformer, ValueHead, convert_layout, expert_load,
                                       layer_runs, load_balancing_loss, policy_outputs, segment_positions,
                                       with_value_head)


def logical_axes(model):
  """``nnx.State``-shaped tree of the logical axis-name tuples of every parameter."""
  from flax import nnx  # pylint: disable=import-outside-toplevel
  flat = nnx.to_flat_state(nnx.state(model, nnx.Param))
  return {tuple(k): v.get_metadata("logical_axes", None) for k, v in flat}


def __getattr__(name):
  if name == "with_dtype":  # the sampler's copy of a model in another dtype: imported on first use
    from rljax.models._dtype import with_dtype  # pylint: disable=import-outside-toplevel
    return with_dtype
  raise AttributeError(f"module 'rljax.models' has no attribute {name!r}")


__all__ = ["fan_in_init", 
    "ModelConfig", "RopeScaling", "LoRAConfig", "Transformer", "KVCache", "ModelOutput",
    "policy_outputs", "segment_positions", "ValueHead", "with_value_head", "convert_layout", "layer_runs", "load_balancing_loss", "expert_load", "rope_inv_freq", "PrefixGroups", "dot_t",
    "from_pretrained", "save_pretrained", "config_from_hf", "config_to_hf", "load_hf_config",
    "SUPPORTED_ARCHITECTURES", "param_count", "shard_state", "logical_axes",
    "convert_gguf", "gguf_checkpoint", "checkpoint_directory", "from_gguf", "smollm2_gguf_path", "smollm2_checkpoint", "unpermute_qk",
    "gemma3_gguf_path", "gemma3_checkpoint", "GEMMA3_PACKAGES",
    "SUPPORTED_GGUF_ARCHITECTURES", "SUPPORTED_GGUF_TENSOR_TYPES", "SUPPORTED_GGUF_PRE_TOKENIZERS",
    "LORA_FILTER", "lora_mask", "lora_modules", "lora_state", "merge_lora", "unmerge_lora", "save_lora_adapter",
    "with_dtype", "resolve_checkpoint", "is_hub_id",
]
