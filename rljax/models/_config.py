"""Frozen, validated configuration of the rljax decoder family.

One :class:`ModelConfig` covers Llama-3, Qwen2/2.5 (QKV bias), Qwen3 (QK-norm),
Qwen3-MoE / Mixtral (top-k routed experts), Gemma / Gemma-2 (scaled
embeddings, ``(1 + w)`` RMSNorm, GeGLU, sandwich norms, logit soft-capping,
sliding-window layers) and Gemma 3 (Gemma-2 plus QK-norm and a second RoPE base
for the sliding-window layers). Every field is validated in ``__post_init__`` and an
invalid value raises ``ValueError`` naming the field and the allowed values.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Optional

__all__ = ["ModelConfig", "RopeScaling", "LoRAConfig"]

_DTYPES = ("float32", "bfloat16", "float16", "float64")  # float64: reference checks under jax.enable_x64
_ACTIVATIONS = ("silu", "gelu_tanh", "gelu")
_REMAT = ("none", "full", "dots", "dots_no_batch")
_ROPE_TYPES = ("default", "linear", "llama3", "yarn")
_LAYER_TYPES = ("full_attention", "sliding_attention")
_MOE_IMPLS = ("ragged", "dense")
_LORA_TARGETS = ("q", "k", "v", "o", "gate", "up", "down")


def _err(field: str, value, allowed: str) -> ValueError:
  return ValueError(f"ModelConfig.{field}={value!r} is invalid: expected {allowed}")


@dataclasses.dataclass(frozen=True)
class RopeScaling:
  """RoPE frequency scaling (Hugging Face ``rope_parameters`` / ``rope_scaling``).

  ``rope_type``: ``"linear"`` divides every inverse frequency by ``factor``;
  ``"llama3"`` (Llama-3.1) keeps high frequencies, divides low ones by
  ``factor`` and interpolates in between (wavelength thresholds
  ``original_max_position_embeddings / {low,high}_freq_factor``); ``"yarn"``
  (arXiv 2309.00071) blends interpolated and extrapolated frequencies with a
  linear ramp between ``beta_slow`` and ``beta_fast`` rotations and scales
  cos/sin by ``attention_factor`` (default ``0.1 ln(factor) + 1``).
  """
  rope_type: str = "default"  # one of _ROPE_TYPES
  factor: float = 1.0  # context extension factor
  low_freq_factor: float = 1.0  # llama3
  high_freq_factor: float = 4.0  # llama3
  original_max_position_embeddings: int = 8192  # llama3 / yarn
  beta_fast: float = 32.0  # yarn
  beta_slow: float = 1.0  # yarn
  attention_factor: Optional[float] = None  # yarn (None: 0.1 ln(factor) + 1)
  truncate: bool = True  # yarn: floor/ceil the correction range (HF default)

  def __post_init__(self):
    if self.rope_type not in _ROPE_TYPES:
      raise ValueError(f"RopeScaling.rope_type={self.rope_type!r}: expected one of {_ROPE_TYPES}")
    if not self.factor > 0:
      raise ValueError(f"RopeScaling.factor={self.factor!r}: expected > 0")
    if self.rope_type == "llama3" and not self.high_freq_factor > self.low_freq_factor:
      raise ValueError("RopeScaling.high_freq_factor must be > low_freq_factor for llama3")


@dataclasses.dataclass(frozen=True)
class LoRAConfig:
  """Low-rank adapters ``W x + s B A x`` on chosen projections (arXiv 2106.09685).

  ``s = alpha / rank`` or, with ``rslora`` (arXiv 2312.03732), ``alpha / sqrt(rank)``.
  ``A`` starts He-uniform and ``B`` at zero, so a fresh adapter leaves the model
  unchanged.
  """
  rank: int = 8  # adapter rank r
  alpha: float = 16.0  # scaling numerator
  rslora: bool = False  # alpha / sqrt(r) instead of alpha / r
  targets: tuple = ("q", "k", "v", "o", "gate", "up", "down")  # subset of _LORA_TARGETS

  def __post_init__(self):
    if not (isinstance(self.rank, int) and self.rank > 0):
      raise ValueError(f"LoRAConfig.rank={self.rank!r}: expected a positive int")
    object.__setattr__(self, "targets", tuple(self.targets))
    bad = [t for t in self.targets if t not in _LORA_TARGETS]
    if bad or not self.targets:
      raise ValueError(f"LoRAConfig.targets={self.targets!r}: expected a non-empty subset of {_LORA_TARGETS}")

  @property
  def scale(self) -> float:
    return self.alpha / (math.sqrt(self.rank) if self.rslora else self.rank)


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Architecture, numerics and adapter settings of one decoder-only model."""
  vocab_size: int  # V
  hidden_size: int  # H
  num_layers: int  # L
  num_heads: int  # N query heads
  num_kv_heads: int  # K key/value heads (GQA: N % K == 0)
  head_dim: int  # D
  intermediate_size: int  # F of the dense MLP
  rms_norm_eps: float = 1e-6  # RMSNorm epsilon
  rope_theta: float = 10000.0  # RoPE base
  rope_scaling: Optional[RopeScaling] = None  # frequency scaling variant
  rope_local_theta: Optional[float] = None  # Gemma 3: unscaled RoPE base of sliding layers (None: as full layers)
  max_position_embeddings: int = 4096  # informational (exported to HF)
  tie_embeddings: bool = False  # unembedding = embedding^T
  qkv_bias: bool = False  # Qwen2: bias on q/k/v projections
  qk_norm: bool = False  # Qwen3: RMSNorm over head_dim of q and k
  activation: str = "silu"  # gated MLP activation: silu (SwiGLU) / gelu_tanh (GeGLU) / gelu
  norm_plus_one: bool = False  # Gemma: RMSNorm scale is (1 + w)
  embed_scale: bool = False  # Gemma: embeddings times sqrt(H)
  sandwich_norm: bool = False  # Gemma-2: post-attention and post-MLP norms
  query_pre_attn_scalar: Optional[float] = None  # attention scale = scalar^-1/2 (None: D^-1/2)
  attn_logit_softcap: Optional[float] = None  # Gemma-2: s = cap tanh(s / cap)
  final_logit_softcap: Optional[float] = None  # Gemma-2: z = cap tanh(z / cap)
  sliding_window: Optional[int] = None  # window W for sliding layers (key j seen by q iff q - j < W)
  layer_types: Optional[tuple] = None  # per-layer "full_attention"/"sliding_attention" (None: all full)
  # Mixture of experts (num_experts == 0: dense everywhere).
  num_experts: int = 0  # E
  num_experts_per_tok: int = 0  # k
  moe_intermediate_size: int = 0  # F of each expert
  moe_layers: Optional[tuple] = None  # indices of MoE layers (None: all when num_experts > 0)
  norm_topk_prob: bool = True  # renormalise the k gate probabilities to sum to 1
  router_aux_loss_coef: float = 0.001  # weight folded into ModelOutput.aux_loss
  moe_impl: str = "ragged"  # "ragged" (sorted grouped matmul) or "dense" (all experts, reference)
  # Numerics.
  param_dtype: str = "float32"  # storage dtype of parameters
  compute_dtype: str = "float32"  # activation / matmul dtype (norms, softmax, logits in f32)
  remat: str = "none"  # per-layer rematerialisation: none / full / dots / dots_no_batch
  scan_layers: bool = False  # run runs of identical layers under jax.lax.scan (see Transformer)
  # attention over T query rows in chunks of this many (0 = one block): each chunk's [N, chunk, S] scores and softmax
  # are alive alone (lax.map, each chunk checkpointed); every row's softmax is over all its keys, as unchunked
  attention_query_chunk: int = 0
  lora: Optional[LoRAConfig] = None  # adapters (None: no adapters)
  value_head: bool = False  # critic: a zero-initialised linear head hidden -> 1 (see Transformer.value)
  # Bookkeeping for export.
  architecture: str = "Qwen2ForCausalLM"  # Hugging Face class written by save_pretrained
  bos_token_id: Optional[int] = None
  eos_token_id: Optional[object] = None  # int or tuple of ints
  pad_token_id: Optional[int] = None

  def __post_init__(self):
    for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "num_kv_heads",
                 "head_dim", "intermediate_size", "max_position_embeddings"):
      value = getattr(self, name)
      if not (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        raise _err(name, value, "a positive int")
    if self.num_heads % self.num_kv_heads:
      raise _err("num_kv_heads", self.num_kv_heads, f"a divisor of num_heads={self.num_heads}")
    if self.head_dim % 2:
      raise _err("head_dim", self.head_dim, "an even int (RoPE rotates pairs)")
    if not self.rms_norm_eps > 0:
      raise _err("rms_norm_eps", self.rms_norm_eps, "> 0")
    if not self.rope_theta > 0:
      raise _err("rope_theta", self.rope_theta, "> 0")
    if self.rope_local_theta is not None and not self.rope_local_theta > 0:
      raise _err("rope_local_theta", self.rope_local_theta, "None or > 0")
    if self.rope_scaling is not None and not isinstance(self.rope_scaling, RopeScaling):
      raise _err("rope_scaling", self.rope_scaling, "a RopeScaling or None")
    if self.activation not in _ACTIVATIONS:
      raise _err("activation", self.activation, f"one of {_ACTIVATIONS}")
    for name in ("query_pre_attn_scalar", "attn_logit_softcap", "final_logit_softcap"):
      value = getattr(self, name)
      if value is not None and not value > 0:
        raise _err(name, value, "None or > 0")
    if self.layer_types is not None:
      object.__setattr__(self, "layer_types", tuple(self.layer_types))
      if len(self.layer_types) != self.num_layers or any(t not in _LAYER_TYPES for t in self.layer_types):
        raise _err("layer_types", self.layer_types, f"None or {self.num_layers} entries from {_LAYER_TYPES}")
      if "sliding_attention" in self.layer_types and self.sliding_window is None:
        raise _err("sliding_window", None, "a positive int when layer_types has sliding_attention")
    if self.sliding_window is not None and not (isinstance(self.sliding_window, int) and self.sliding_window > 0):
      raise _err("sliding_window", self.sliding_window, "None or a positive int")
    if self.num_experts < 0:
      raise _err("num_experts", self.num_experts, ">= 0")
    if self.num_experts > 0:
      if not 0 < self.num_experts_per_tok <= self.num_experts:
        raise _err("num_experts_per_tok", self.num_experts_per_tok, f"in [1, num_experts={self.num_experts}]")
      if self.moe_intermediate_size <= 0:
        raise _err("moe_intermediate_size", self.moe_intermediate_size, "> 0 when num_experts > 0")
      if self.moe_layers is not None:
        object.__setattr__(self, "moe_layers", tuple(int(i) for i in self.moe_layers))
        if any(not 0 <= i < self.num_layers for i in self.moe_layers) or len(set(self.moe_layers)) != len(self.moe_layers):
          raise _err("moe_layers", self.moe_layers, f"distinct layer indices in [0, {self.num_layers})")
    elif self.moe_layers:
      raise _err("moe_layers", self.moe_layers, "None or empty when num_experts == 0")
    if self.moe_impl not in _MOE_IMPLS:
      raise _err("moe_impl", self.moe_impl, f"one of {_MOE_IMPLS}")
    for name in ("param_dtype", "compute_dtype"):
      if getattr(self, name) not in _DTYPES:
        raise _err(name, getattr(self, name), f"one of {_DTYPES}")
    if self.remat not in _REMAT:
      raise _err("remat", self.remat, f"one of {_REMAT}")
    if not isinstance(self.scan_layers, bool):
      raise _err("scan_layers", self.scan_layers, "a bool")
    if isinstance(self.attention_query_chunk, bool) or not isinstance(self.attention_query_chunk, int) \
        or self.attention_query_chunk < 0:
      raise _err("attention_query_chunk", self.attention_query_chunk, "an int >= 0 (0 = unchunked)")
    if self.lora is not None and not isinstance(self.lora, LoRAConfig):
      raise _err("lora", self.lora, "a LoRAConfig or None")
    if not isinstance(self.value_head, bool):
      raise _err("value_head", self.value_head, "a bool")
    if isinstance(self.eos_token_id, list):
      object.__setattr__(self, "eos_token_id", tuple(self.eos_token_id))

  # ----------------------------------------------------------------- helpers
  def replace(self, **changes) -> "ModelConfig":
    return dataclasses.replace(self, **changes)

  @property
  def is_moe(self) -> bool:
    return self.num_experts > 0

  @property
  def moe_layer_indices(self) -> tuple:
    """Sorted indices of the layers whose MLP is a routed MoE."""
    if not self.is_moe:
      return ()
    if self.moe_layers is None:
      return tuple(range(self.num_layers))
    return tuple(sorted(self.moe_layers))

  @property
  def num_moe_layers(self) -> int:
    return len(self.moe_layer_indices)

  def is_sliding(self, layer: int) -> bool:
    return self.layer_types is not None and self.layer_types[layer] == "sliding_attention"

  @property
  def attn_scale(self) -> float:
    return (self.query_pre_attn_scalar if self.query_pre_attn_scalar is not None else self.head_dim) ** -0.5

  @classmethod
  def tiny(cls, **overrides) -> "ModelConfig":
    """A fast test size: V=128, H=64, 2 layers, 4 heads, 2 KV heads, D=16, F=128."""
    base = dict(vocab_size=128, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2,
                head_dim=16, intermediate_size=128, max_position_embeddings=512)
    base.update(overrides)
    return cls(**base)

  @classmethod
  def tiny_moe(cls, **overrides) -> "ModelConfig":
    """Tiny Qwen3-MoE-shaped config: 4 experts, top-2, expert F=32, QK-norm."""
    base = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, qk_norm=True,
                norm_topk_prob=True, architecture="Qwen3MoeForCausalLM")
    base.update(overrides)
    return cls.tiny(**base)
