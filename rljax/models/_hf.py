"""Hugging Face checkpoint import/export (config.json + safetensors, single or sharded).

No torch needed: tensors are read with ``safetensors`` (NumPy) lazily, one at a
time. Every rljax parameter must be found in the checkpoint with the expected
shape, and every checkpoint tensor must be used; anything else raises a
``ValueError`` naming the tensor and the expected shape (never a silently
random-initialised layer).
"""
from __future__ import annotations

import json
import os
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from rljax.models._config import ModelConfig, RopeScaling
from rljax.models._layers import dtype_of
from rljax.models._safetensors_file import save_safetensors
from rljax.models._transformer import Transformer, layer_runs

__all__ = ["load_checkpoint_dir", "save_pretrained", "config_from_hf", "config_to_hf", "load_hf_config",
           "SUPPORTED_ARCHITECTURES", "param_count", "shard_state"]

SUPPORTED_ARCHITECTURES = (
    "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
    "Qwen3MoeForCausalLM", "MixtralForCausalLM", "GemmaForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM",
)
_MODEL_TYPES = {
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3", "Qwen3MoeForCausalLM": "qwen3_moe", "MixtralForCausalLM": "mixtral",
    "GemmaForCausalLM": "gemma", "Gemma2ForCausalLM": "gemma2", "Gemma3ForCausalLM": "gemma3_text",
}
_ACTS = {"silu": "silu", "swish": "silu", "gelu_pytorch_tanh": "gelu_tanh", "gelu_new": "gelu_tanh",
         "gelu_fast": "gelu_tanh", "gelu": "gelu"}
_ACTS_BACK = {"silu": "silu", "gelu_tanh": "gelu_pytorch_tanh", "gelu": "gelu"}
_IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


# ===================================================================== config
def load_hf_config(path: str) -> dict:
  fn = os.path.join(path, "config.json")
  if not os.path.isfile(fn):
    raise ValueError(f"no config.json in checkpoint directory {path!r}")
  with open(fn) as f:
    return json.load(f)


def _rope_from_hf(hf: dict) -> tuple[float, Optional[RopeScaling]]:
  params = hf.get("rope_parameters")
  if isinstance(params, dict) and "full_attention" in params and isinstance(params["full_attention"], dict):
    params = params["full_attention"]
  params = dict(params or {})
  if hf.get("rope_scaling"):
    params = {**dict(hf["rope_scaling"]), **params}
  theta = float(params.get("rope_theta", hf.get("rope_theta", 10000.0)))
  rtype = params.get("rope_type", params.get("type", "default")) or "default"
  if rtype == "default":
    return theta, None
  if rtype not in ("linear", "llama3", "yarn"):
    raise ValueError(f"config.json rope_type={rtype!r} is not supported (supported: default, linear, llama3, yarn)")
  kw = dict(rope_type=rtype, factor=float(params.get("factor", 1.0)))
  if rtype == "llama3":
    kw.update(low_freq_factor=float(params["low_freq_factor"]), high_freq_factor=float(params["high_freq_factor"]),
              original_max_position_embeddings=int(params["original_max_position_embeddings"]))
  if rtype == "yarn":
    if params.get("mscale") or params.get("mscale_all_dim"):
      raise ValueError("config.json yarn rope with mscale/mscale_all_dim is not supported")
    kw.update(original_max_position_embeddings=int(params.get("original_max_position_embeddings")
                                                  or hf.get("max_position_embeddings")),
              beta_fast=float(params.get("beta_fast") or 32.0), beta_slow=float(params.get("beta_slow") or 1.0),
              attention_factor=params.get("attention_factor"), truncate=bool(params.get("truncate", True)))
  return theta, RopeScaling(**kw)


def _gemma3_local_theta(hf: dict) -> float:
  """The RoPE base of Gemma 3's sliding layers: ``rope_parameters["sliding_attention"]`` (transformers 5) or
  ``rope_local_base_freq`` (older files), default 10,000; refuses a scaled local RoPE."""
  params = hf.get("rope_parameters")
  local = params.get("sliding_attention") if isinstance(params, dict) else None
  if isinstance(local, dict):
    rtype = local.get("rope_type", local.get("type", "default")) or "default"
    if rtype != "default":
      raise ValueError(f"config.json rope_parameters.sliding_attention.rope_type={rtype!r} is not supported for "
                       "Gemma 3 (supported: default)")
    if "rope_theta" in local:
      return float(local["rope_theta"])
  return float(hf.get("rope_local_base_freq") or 10000.0)


def _gemma3_refusals(hf: dict) -> None:
  """Gemma 3 config features rljax does not implement, refused by name."""
  if hf.get("use_bidirectional_attention"):
    raise ValueError("config.json use_bidirectional_attention=True (Gemma 3 encoder mode) is not supported; "
                     "supported: False (causal)")
  if hf.get("attn_logit_softcapping") is not None:
    raise ValueError(f"config.json attn_logit_softcapping={hf['attn_logit_softcapping']!r} is not supported for "
                     "Gemma 3 (transformers' Gemma3Attention does not apply it); supported: None")
  if hf.get("vision_config") or hf.get("text_config"):
    raise ValueError("config.json vision_config/text_config (Gemma3ForConditionalGeneration, multimodal) is not "
                     "supported; supported: the text-only Gemma3ForCausalLM")


def config_from_hf(hf: dict, *, param_dtype: str = "float32", compute_dtype: Optional[str] = None,
                   **overrides) -> ModelConfig:
  """Maps a Hugging Face ``config.json`` dict to a :class:`ModelConfig`."""
  archs = hf.get("architectures") or []
  arch = archs[0] if archs else None
  if arch not in SUPPORTED_ARCHITECTURES:
    raise ValueError(f"config.json architectures={archs!r} is not supported; supported: {SUPPORTED_ARCHITECTURES}")
  fam = _MODEL_TYPES[arch]
  n_heads, hidden = int(hf["num_attention_heads"]), int(hf["hidden_size"])
  head_dim = hf.get("head_dim") or hidden // n_heads
  layers = int(hf["num_hidden_layers"])
  theta, scaling = _rope_from_hf(hf)
  gemma = fam in ("gemma", "gemma2", "gemma3_text")
  if fam == "gemma3_text":
    _gemma3_refusals(hf)
  act_name = ((hf.get("hidden_activation") or hf.get("hidden_act") or "gelu_pytorch_tanh")
              if fam in ("gemma2", "gemma3_text") else hf.get("hidden_act", "silu"))
  if act_name not in _ACTS:
    raise ValueError(f"config.json activation {act_name!r} is not supported (supported: {sorted(_ACTS)})")
  if hf.get("mlp_bias"):
    raise ValueError("config.json mlp_bias=True is not supported")
  if fam != "qwen2" and hf.get("attention_bias"):
    raise ValueError("config.json attention_bias=True (with an o_proj bias) is not supported")
  kw: dict[str, Any] = dict(
      vocab_size=int(hf["vocab_size"]), hidden_size=hidden, num_layers=layers, num_heads=n_heads,
      num_kv_heads=int(hf.get("num_key_value_heads") or n_heads), head_dim=int(head_dim),
      intermediate_size=int(hf["intermediate_size"]), rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
      rope_theta=theta, rope_scaling=scaling, max_position_embeddings=int(hf.get("max_position_embeddings", 4096)),
      tie_embeddings=bool(hf.get("tie_word_embeddings", gemma)), qkv_bias=(fam == "qwen2"),
      qk_norm=fam in ("qwen3", "qwen3_moe", "gemma3_text"), activation=_ACTS[act_name], norm_plus_one=gemma,
      embed_scale=gemma,
      architecture=arch, bos_token_id=hf.get("bos_token_id"), eos_token_id=hf.get("eos_token_id"),
      pad_token_id=hf.get("pad_token_id"), param_dtype=param_dtype, compute_dtype=compute_dtype or param_dtype)
  sliding = hf.get("sliding_window")
  if fam in ("qwen2", "qwen3", "qwen3_moe") and hf.get("use_sliding_window"):
    raise ValueError("config.json use_sliding_window=True is not supported for Qwen models")
  if fam in ("mistral", "mixtral") and sliding:
    kw.update(sliding_window=int(sliding), layer_types=("sliding_attention",) * layers)
  if fam in ("gemma2", "gemma3_text"):
    if fam == "gemma2":
      default = tuple("sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers))
    else:  # transformers' Gemma3TextConfig: every sliding_window_pattern-th layer (default 6) is global
      pattern = int(hf.get("sliding_window_pattern") or 6)
      default = tuple("sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers))
      kw.update(rope_local_theta=_gemma3_local_theta(hf))
    types = hf.get("layer_types") or default
    kw.update(sandwich_norm=True, query_pre_attn_scalar=float(hf.get("query_pre_attn_scalar") or head_dim),
              attn_logit_softcap=hf.get("attn_logit_softcapping"), final_logit_softcap=hf.get("final_logit_softcapping"),
              sliding_window=int(sliding) if sliding else None,
              layer_types=tuple(types) if sliding else None)
    if fam == "gemma3_text" and not sliding:
      kw.update(rope_local_theta=None)  # no sliding layers: every layer uses the global RoPE
  if fam == "qwen3_moe":
    n_exp = int(hf.get("num_experts") or hf.get("num_local_experts") or 0)
    step = int(hf.get("decoder_sparse_step", 1) or 1)
    only = set(hf.get("mlp_only_layers") or ())
    moe = tuple(i for i in range(layers) if i not in only and n_exp > 0 and (i + 1) % step == 0)
    kw.update(num_experts=n_exp, num_experts_per_tok=int(hf["num_experts_per_tok"]),
              moe_intermediate_size=int(hf["moe_intermediate_size"]), norm_topk_prob=bool(hf.get("norm_topk_prob", False)),
              moe_layers=moe, router_aux_loss_coef=float(hf.get("router_aux_loss_coef", 0.001)))
  if fam == "mixtral":
    kw.update(num_experts=int(hf["num_local_experts"]), num_experts_per_tok=int(hf["num_experts_per_tok"]),
              moe_intermediate_size=int(hf["intermediate_size"]), norm_topk_prob=True,
              router_aux_loss_coef=float(hf.get("router_aux_loss_coef", 0.001)))
  kw.update(overrides)
  return ModelConfig(**kw)


def config_to_hf(cfg: ModelConfig) -> dict:
  """A Hugging Face ``config.json`` dict for ``cfg`` (inverse of :func:`config_from_hf`)."""
  arch = cfg.architecture
  if arch not in SUPPORTED_ARCHITECTURES:
    raise ValueError(f"ModelConfig.architecture={arch!r}: expected one of {SUPPORTED_ARCHITECTURES}")
  fam = _MODEL_TYPES[arch]
  rope: dict[str, Any] = {"rope_theta": cfg.rope_theta, "rope_type": "default"}
  if cfg.rope_scaling is not None:
    s = cfg.rope_scaling
    rope.update(rope_type=s.rope_type, factor=s.factor)
    if s.rope_type == "llama3":
      rope.update(low_freq_factor=s.low_freq_factor, high_freq_factor=s.high_freq_factor,
                  original_max_position_embeddings=s.original_max_position_embeddings)
    if s.rope_type == "yarn":
      rope.update(original_max_position_embeddings=s.original_max_position_embeddings, beta_fast=s.beta_fast,
                  beta_slow=s.beta_slow, truncate=s.truncate)
      if s.attention_factor is not None:
        rope["attention_factor"] = s.attention_factor
  hf: dict[str, Any] = dict(
      architectures=[arch], model_type=fam, vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size,
      num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads, num_key_value_heads=cfg.num_kv_heads,
      head_dim=cfg.head_dim, intermediate_size=cfg.intermediate_size, rms_norm_eps=cfg.rms_norm_eps,
      max_position_embeddings=cfg.max_position_embeddings, tie_word_embeddings=cfg.tie_embeddings,
      rope_parameters=rope, rope_theta=cfg.rope_theta, hidden_act=_ACTS_BACK[cfg.activation],
      bos_token_id=cfg.bos_token_id, eos_token_id=(list(cfg.eos_token_id) if isinstance(cfg.eos_token_id, tuple)
                                                   else cfg.eos_token_id),
      pad_token_id=cfg.pad_token_id, dtype=cfg.param_dtype, attention_bias=False)
  if cfg.rope_scaling is not None:
    hf["rope_scaling"] = {k: v for k, v in rope.items() if k != "rope_theta"}
  if fam == "qwen2":
    hf.pop("attention_bias")
  if fam == "gemma3_text":
    local = cfg.rope_local_theta if cfg.rope_local_theta is not None else cfg.rope_theta
    rope = {"full_attention": rope, "sliding_attention": {"rope_type": "default", "rope_theta": local}}
    hf.update(rope_parameters=rope, rope_local_base_freq=rope["sliding_attention"]["rope_theta"])
    if cfg.rope_scaling is not None and cfg.rope_local_theta is None and "sliding_attention" in (cfg.layer_types or ()):
      raise ValueError("ModelConfig.rope_local_theta=None with rope_scaling is not expressible as a Gemma 3 "
                       "config: expected a rope_local_theta (the sliding layers' unscaled base)")
  if fam in ("gemma2", "gemma3_text"):
    qpas = cfg.query_pre_attn_scalar
    if qpas is not None and float(qpas).is_integer():
      qpas = int(qpas)
    hf.update(hidden_activation=_ACTS_BACK[cfg.activation], query_pre_attn_scalar=qpas,
              attn_logit_softcapping=cfg.attn_logit_softcap, final_logit_softcapping=cfg.final_logit_softcap,
              sliding_window=cfg.sliding_window, layer_types=list(cfg.layer_types) if cfg.layer_types else None)
  elif cfg.sliding_window is not None:
    hf["sliding_window"] = cfg.sliding_window
  if fam == "qwen3_moe":
    moe = set(cfg.moe_layer_indices)
    hf.update(num_experts=cfg.num_experts, num_local_experts=cfg.num_experts,
              num_experts_per_tok=cfg.num_experts_per_tok, moe_intermediate_size=cfg.moe_intermediate_size,
              norm_topk_prob=cfg.norm_topk_prob, decoder_sparse_step=1,
              mlp_only_layers=[i for i in range(cfg.num_layers) if i not in moe],
              router_aux_loss_coef=cfg.router_aux_loss_coef)
  if fam == "mixtral":
    hf.update(num_local_experts=cfg.num_experts, num_experts_per_tok=cfg.num_experts_per_tok,
              router_aux_loss_coef=cfg.router_aux_loss_coef)
  return hf


# ==================================================================== mapping
class _Entry:
  """One rljax parameter <-> one or more HF tensors."""

  def __init__(self, path: tuple, hf_names: list, hf_shapes: list, load: Callable, save: Callable):
    self.path, self.hf_names, self.hf_shapes, self.load, self.save = path, hf_names, hf_shapes, load, save


def _mapping(cfg: ModelConfig) -> list:
  h, n, kh, d, f = cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.intermediate_size
  fam = _MODEL_TYPES.get(cfg.architecture, "llama")
  out = []

  def linear(path, name, in_shape, out_shape):
    n_in, n_out = int(np.prod(in_shape)), int(np.prod(out_shape))
    kshape = tuple(in_shape) + tuple(out_shape)
    out.append(_Entry(path, [name], [(n_out, n_in)], lambda ws, s=kshape: ws[0].T.reshape(s),
                      lambda w, a=n_in: [np.asarray(w).reshape(a, -1).T]))

  def plain(path, name, shape):
    flat = (int(np.prod(shape)),) if len(shape) > 1 else tuple(shape)
    out.append(_Entry(path, [name], [flat], lambda ws, s=tuple(shape): ws[0].reshape(s),
                      lambda w: [np.asarray(w).reshape(-1)]))

  out.append(_Entry(("embed",), ["model.embed_tokens.weight"], [(cfg.vocab_size, h)], lambda ws: ws[0],
                    lambda w: [np.asarray(w)]))
  plain(("final_norm", "scale"), "model.norm.weight", (h,))
  if not cfg.tie_embeddings:
    out.append(_Entry(("lm_head",), ["lm_head.weight"], [(cfg.vocab_size, h)], lambda ws: ws[0].T,
                      lambda w: [np.asarray(w).T]))
  moe = set(cfg.moe_layer_indices)
  for i in range(cfg.num_layers):
    p, L = ("layers", i), f"model.layers.{i}."
    a = L + "self_attn."
    linear(p + ("attn", "q", "kernel"), a + "q_proj.weight", (h,), (n, d))
    linear(p + ("attn", "k", "kernel"), a + "k_proj.weight", (h,), (kh, d))
    linear(p + ("attn", "v", "kernel"), a + "v_proj.weight", (h,), (kh, d))
    linear(p + ("attn", "o", "kernel"), a + "o_proj.weight", (n, d), (h,))
    if cfg.qkv_bias:
      plain(p + ("attn", "q", "bias"), a + "q_proj.bias", (n, d))
      plain(p + ("attn", "k", "bias"), a + "k_proj.bias", (kh, d))
      plain(p + ("attn", "v", "bias"), a + "v_proj.bias", (kh, d))
    if cfg.qk_norm:
      plain(p + ("attn", "q_norm", "scale"), a + "q_norm.weight", (d,))
      plain(p + ("attn", "k_norm", "scale"), a + "k_norm.weight", (d,))
    plain(p + ("attn_norm", "scale"), L + "input_layernorm.weight", (h,))
    if cfg.sandwich_norm:
      plain(p + ("attn_post_norm", "scale"), L + "post_attention_layernorm.weight", (h,))
      plain(p + ("mlp_norm", "scale"), L + "pre_feedforward_layernorm.weight", (h,))
      plain(p + ("mlp_post_norm", "scale"), L + "post_feedforward_layernorm.weight", (h,))
    else:
      plain(p + ("mlp_norm", "scale"), L + "post_attention_layernorm.weight", (h,))
    if i in moe:
      e, fe = cfg.num_experts, cfg.moe_intermediate_size
      if fam == "mixtral":
        m, names = L + "block_sparse_moe.", ("w1", "w3", "w2")
      else:
        m, names = L + "mlp.", ("gate_proj", "up_proj", "down_proj")
      out.append(_Entry(p + ("mlp", "router"), [m + "gate.weight"], [(e, h)], lambda ws: ws[0].T,
                        lambda w: [np.asarray(w).T]))
      for ours, theirs, shp in (("gate", names[0], (fe, h)), ("up", names[1], (fe, h)), ("down", names[2], (h, fe))):
        out.append(_Entry(p + ("mlp", ours), [f"{m}experts.{j}.{theirs}.weight" for j in range(e)], [shp] * e,
                          lambda ws: np.stack([w.T for w in ws]),
                          lambda w: [np.asarray(x).T for x in np.asarray(w)]))
    else:
      linear(p + ("mlp", "gate", "kernel"), L + "mlp.gate_proj.weight", (h,), (f,))
      linear(p + ("mlp", "up", "kernel"), L + "mlp.up_proj.weight", (h,), (f,))
      linear(p + ("mlp", "down", "kernel"), L + "mlp.down_proj.weight", (f,), (h,))
  return out


# ==================================================================== reading
class _Reader:
  """Lazy tensor access over single or sharded safetensors files."""

  def __init__(self, path: str):
    from safetensors import safe_open  # pylint: disable=import-outside-toplevel
    self._open = safe_open
    index = os.path.join(path, "model.safetensors.index.json")
    single = os.path.join(path, "model.safetensors")
    if os.path.isfile(index):
      with open(index) as f:
        wm = json.load(f)["weight_map"]
      self.where = {k: os.path.join(path, v) for k, v in wm.items()}
      for fn in set(self.where.values()):
        if not os.path.isfile(fn):
          raise ValueError(f"sharded checkpoint index names {os.path.basename(fn)!r}, which is missing in {path!r}")
    elif os.path.isfile(single):
      with safe_open(single, framework="numpy") as fh:
        self.where = {k: single for k in fh.keys()}
    else:
      raise ValueError(f"no model.safetensors or model.safetensors.index.json in {path!r}")
    self._handles: dict = {}

  def get(self, name: str) -> np.ndarray:
    fn = self.where[name]
    if fn not in self._handles:
      self._handles[fn] = self._open(fn, framework="numpy")
    return self._handles[fn].get_tensor(name)


def _cast(name: str, arr: np.ndarray, dtype) -> np.ndarray:
  """Casts to ``dtype``, raising on non-finite results from finite inputs (overflow)."""
  target = np.dtype(dtype)
  with np.errstate(over="ignore", invalid="ignore"):
    out = arr.astype(target)
  if np.issubdtype(arr.dtype, np.floating) or arr.dtype.name == "bfloat16":
    src_finite = np.isfinite(arr.astype(np.float32))
    if not np.all(np.isfinite(out.astype(np.float32)) | ~src_finite):
      big = float(np.max(np.abs(arr.astype(np.float32)[src_finite])))
      raise ValueError(f"tensor {name!r} overflows {target.name} (max |value| {big:.4g} > {float(np.finfo(target).max):.4g})")
    if not np.all(src_finite):
      raise ValueError(f"tensor {name!r} contains non-finite values")
  return out


def _flat(state) -> dict:
  return {tuple(k): v for k, v in nnx.to_flat_state(state)}


def _stack_values(cfg: ModelConfig, values: dict) -> dict:
  """Arrays keyed by per-layer paths ``("layers", i, ...)`` -> keyed by the stacked storage's paths
  ``("layer_stacks", r, ...)`` (``np.stack`` over the layers of run ``r``, see ``layer_runs``)."""
  out = {k: v for k, v in values.items() if k[0] != "layers"}
  for r, (a, b) in enumerate(layer_runs(cfg)):
    for suffix in [k[2:] for k in values if k[:2] == ("layers", a)]:
      out[("layer_stacks", r) + suffix] = np.stack([values[("layers", i) + suffix] for i in range(a, b)])
  return out


def _unstack_values(cfg: ModelConfig, values: dict) -> dict:
  """Inverse of :func:`_stack_values`: stacked ``[n, ...]`` arrays -> one array per layer."""
  runs = layer_runs(cfg)
  out = {k: v for k, v in values.items() if k[0] != "layer_stacks"}
  for k, v in values.items():
    if k[0] == "layer_stacks":
      start, stop = runs[k[1]]
      out.update({("layers", start + j) + k[2:]: v[j] for j in range(stop - start)})
  return out


def param_count(model_or_state) -> int:
  """Total number of parameter elements."""
  state = nnx.state(model_or_state, nnx.Param) if isinstance(model_or_state, nnx.Module) else model_or_state
  return int(sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(state)))


_DEFAULT_RULES = (("vocab", "tensor"), ("embed", "fsdp"), ("heads", "tensor"), ("kv_heads", "tensor"),
                  ("mlp", "tensor"), ("expert", "expert"))


def _spec(shape, axes, mesh, rules) -> jax.sharding.PartitionSpec:
  rules = dict(rules)
  used, spec = set(), []
  for dim, ax in zip(shape, axes or (None,) * len(shape)):
    m = rules.get(ax)
    if m is not None and m in mesh.shape and m not in used and dim % mesh.shape[m] == 0 and mesh.shape[m] > 1:
      spec.append(m)
      used.add(m)
    else:
      spec.append(None)
  return jax.sharding.PartitionSpec(*spec)


def shard_state(model: Transformer, mesh, rules=_DEFAULT_RULES) -> None:
  """Places every parameter of ``model`` on ``mesh`` following its ``logical_axes`` (in place).

  ``rules``: ``(logical_name, mesh_axis)`` pairs; a dimension is sharded when
  its mesh axis exists, has size > 1, divides it and is not used twice.
  Default: vocab/heads/kv_heads/mlp -> ``tensor``, embed -> ``fsdp``,
  expert -> ``expert``.
  """
  flat = []
  for path, var in nnx.to_flat_state(nnx.state(model, nnx.Param)):
    axes = var.get_metadata("logical_axes", None)
    value = var[...]
    sh = jax.sharding.NamedSharding(mesh, _spec(value.shape, axes, mesh, rules))
    flat.append((path, var.replace(jax.device_put(value, sh))))
  nnx.update(model, nnx.from_flat_state(flat))


def load_checkpoint_dir(path: str, dtype: str = "float32", *, compute_dtype: Optional[str] = None, mesh=None,
                        rules=_DEFAULT_RULES, **config_overrides) -> Transformer:
  """Loads a local Hugging Face checkpoint directory into a :class:`Transformer` (``rljax.models.from_pretrained``
  also takes a GGUF file, through its converted directory).

  Args:
    path: directory with ``config.json`` and ``model.safetensors`` or
      ``model.safetensors.index.json`` + shards.
    dtype: parameter dtype (``float32``/``bfloat16``/``float16``); overflow raises.
    compute_dtype: activation dtype (default: ``dtype``).
    mesh: optional ``jax.sharding.Mesh``; parameters are placed with
      ``NamedSharding`` from their logical axes and ``rules`` (see :func:`shard_state`).
    config_overrides: extra :class:`ModelConfig` fields (e.g. ``remat="full"``, ``lora=...``).
      LoRA adapters (if requested) start fresh (``B = 0``); so does a value head
      (``value_head=True``: zero, see :class:`rljax.models.ValueHead`), which a
      causal-LM checkpoint does not hold.
  """
  if isinstance(dtype, str) is False:
    dtype = jnp.dtype(dtype).name
  cfg = config_from_hf(load_hf_config(path), param_dtype=dtype, compute_dtype=compute_dtype, **config_overrides)
  reader = _Reader(path)
  abstract = nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0)))
  graphdef, state = nnx.split(abstract)
  flat = _flat(state)
  per_layer = set(flat)  # the mapping's (per-layer) paths
  if cfg.scan_layers:
    runs = layer_runs(cfg)
    per_layer = {k for k in flat if k[0] != "layer_stacks"} | {
        ("layers", i) + k[2:] for k in flat if k[0] == "layer_stacks" for i in range(*runs[k[1]])}
  np_dtype = np.dtype(dtype_of(cfg.param_dtype))
  used = set()
  values = {}
  for entry in _mapping(cfg):
    if entry.path not in per_layer:
      raise ValueError(f"internal: no rljax parameter at {entry.path}")
    arrs = []
    for name, shape in zip(entry.hf_names, entry.hf_shapes):
      if name not in reader.where:
        raise ValueError(f"checkpoint is missing tensor {name!r} (expected shape {shape})")
      a = reader.get(name)
      if tuple(a.shape) != tuple(shape):
        raise ValueError(f"tensor {name!r} has shape {tuple(a.shape)}, expected {tuple(shape)}")
      arrs.append(_cast(name, a, np_dtype))
      used.add(name)
    values[entry.path] = entry.load(arrs)
  leftovers = sorted(k for k in reader.where if k not in used and not k.endswith(_IGNORED_SUFFIXES)
                     and not (cfg.tie_embeddings and k == "lm_head.weight"))
  if leftovers:
    raise ValueError(f"checkpoint tensors not used by {cfg.architecture} config: {leftovers[:8]}"
                     f"{' ...' if len(leftovers) > 8 else ''}")
  if cfg.scan_layers:  # the layers are stored stacked per run
    values = _stack_values(cfg, values)
  for path_key, var in flat.items():
    if path_key in values:
      v = values[path_key]
      if tuple(v.shape) != tuple(var.shape):
        raise ValueError(f"parameter {'.'.join(map(str, path_key))} expected shape {tuple(var.shape)}, got {v.shape}")
      if mesh is None:
        var.set_value(jnp.asarray(v))
      else:  # straight into sharded arrays: each device reads only its slice of the host array
        sh = jax.sharding.NamedSharding(mesh, _spec(v.shape, var.get_metadata("logical_axes", None), mesh, rules))
        var.set_value(jax.make_array_from_callback(v.shape, sh, lambda idx, v=v: v[idx]))
    elif isinstance(var, nnx.LoRAParam) or (hasattr(var, "type") and var.type is nnx.LoRAParam):
      pass  # filled below
    elif path_key[0] == "value_head":
      var.set_value(jnp.zeros(var.shape, var.dtype))  # a fresh zero head (placed below with a mesh)
    else:
      raise ValueError(f"parameter {'.'.join(map(str, path_key))} (shape {tuple(var.shape)}) has no checkpoint tensor")
  if cfg.lora is not None:
    fresh = _flat(nnx.state(Transformer(cfg, rngs=nnx.Rngs(0)), nnx.LoRAParam))
    for path_key, val in fresh.items():
      flat[path_key].set_value(val[...])
  model = nnx.merge(graphdef, nnx.from_flat_state(list(flat.items())))
  if mesh is not None and (cfg.lora is not None or cfg.value_head):
    shard_state(model, mesh, rules)  # places the fresh adapters / value head too
  return model


def _save_tensors(tensors: dict, path: str, max_shard_bytes: int) -> None:
  names = list(tensors)
  shards, cur, size = [], {}, 0
  for name in names:
    nb = tensors[name].nbytes
    if cur and size + nb > max_shard_bytes:
      shards.append(cur)
      cur, size = {}, 0
    cur[name] = tensors[name]
    size += nb
  shards.append(cur)
  meta = {"format": "pt"}
  if len(shards) == 1:
    save_safetensors(shards[0], os.path.join(path, "model.safetensors"), metadata=meta)
    return
  weight_map = {}
  total = 0
  for i, shard in enumerate(shards):
    fn = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
    save_safetensors(shard, os.path.join(path, fn), metadata=meta)
    for k, v in shard.items():
      weight_map[k] = fn
      total += v.nbytes
  with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def save_pretrained(model: Transformer, path: str, *, dtype: Optional[str] = None,
                    max_shard_bytes: int = 5 * 2 ** 30, merge_lora: bool = True) -> None:
  """Writes ``model`` as a Hugging Face checkpoint (``config.json`` + safetensors, sharded above
  ``max_shard_bytes``). LoRA adapters are merged into the written weights (``merge_lora``)
  unless already merged; use ``rljax.models.save_lora_adapter`` to export the adapter alone.

  A value head (``cfg.value_head``) is not part of a Hugging Face causal LM and
  is not written: the checkpoint holds the trunk and LM head (the actor of a
  shared-trunk actor-critic), and its ``config.json`` has no value head. Save a
  critic's head with the orbax checkpoints of ``rljax.train``."""
  cfg = model.cfg
  os.makedirs(path, exist_ok=True)
  weights = {k: np.asarray(jax.device_get(v[...])) for k, v in _flat(nnx.state(model, nnx.Param)).items()}
  if merge_lora and cfg.lora is not None:
    from rljax.models._lora import lora_modules  # pylint: disable=import-outside-toplevel
    for mpath, mod in lora_modules(model):
      if not mod.lora_merged:
        k = tuple(mpath) + ("kernel",)
        weights[k] = (weights[k].astype(np.float32) + np.asarray(mod.lora_delta())).astype(weights[k].dtype)
  if cfg.scan_layers:
    weights = _unstack_values(cfg, weights)
  out_dtype = np.dtype(dtype_of(dtype or cfg.param_dtype))
  tensors = {}
  for entry in _mapping(cfg):
    w = weights[entry.path]
    for name, arr in zip(entry.hf_names, entry.save(w)):
      tensors[name] = np.ascontiguousarray(_cast(name, np.asarray(arr), out_dtype))
  if _MODEL_TYPES[cfg.architecture] == "qwen2" and not cfg.qkv_bias:
    # a Hugging Face Qwen2 layer always has q/k/v biases: zero biases compute the same function, and the
    # checkpoint then loads back (here and in transformers) without missing tensors
    n_q, n_kv = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
    for i in range(cfg.num_layers):
      for proj, size in (("q", n_q), ("k", n_kv), ("v", n_kv)):
        tensors[f"model.layers.{i}.self_attn.{proj}_proj.bias"] = np.zeros((size,), out_dtype)
  _save_tensors(tensors, path, max_shard_bytes)
  hf = config_to_hf(cfg.replace(param_dtype=out_dtype.name if out_dtype.name in ("float32", "bfloat16", "float16")
                                else cfg.param_dtype))
  with open(os.path.join(path, "config.json"), "w") as f:
    json.dump(hf, f, indent=2)
