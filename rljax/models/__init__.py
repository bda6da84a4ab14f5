"""rljax.models: one Flax NNX decoder family with Hugging Face import/export, LoRA and MoE routing replay.

Public calls::

  from rljax.models import from_pretrained, policy_outputs
  model = from_pretrained("/path/to/hf_checkpoint", dtype="bfloat16")   # load
  out = model(tokens, positions, return_logits=True)                    # out.logits [B, T, V]
  hidden = model(tokens, positions).hidden                              # [B, T, H] after final norm
  po = policy_outputs(model, tokens)                                    # fused per-token logp / entropy

See ``docs/models.md``.
"""
from rljax.models._config import LoRAConfig, ModelConfig, RopeScaling
from rljax.models._layers import rope_inv_freq
from rljax.models._transformer import (KVCache, ModelOutput, Transformer, load_balancing_loss,
                                       policy_outputs, segment_positions)

__all__ = [
    "ModelConfig", "RopeScaling", "LoRAConfig", "Transformer", "KVCache", "ModelOutput",
    "policy_outputs", "segment_positions", "load_balancing_loss", "rope_inv_freq",
]
