"""Model FLOPs, bytes moved and lower-bound times of a run's programs (estimates, at a chip's published peak).

Counting (stated once, used by every row):

* A token's forward through the network is ``2 N`` FLOPs for the ``N`` matmul parameters it meets (every
  projection, the MLP — for MoE the ``k`` routed experts only — and the LM head; not the embedding lookup), plus
  attention: ``4 L d_q`` FLOPs per (query, key) pair (``QK^T`` and ``PV``, ``d_q = num_heads x head_dim``), with
  ``S/2`` keys on average for a causal row of ``S`` tokens (``window`` keys at most on sliding-window layers).
* The update's forward + backward is 3 forwards (the usual MFU convention: recomputation under remat is not
  counted as model work).
* A decode step reads, on each chip, the weights it multiplies by (with FSDP every chip gathers the whole model:
  ``P x bytes`` per step, over ICI, bounded here by HBM) and its rows' KV cache (half full on average).

The lower bound of a program's time is ``max(FLOPs / (chips x peak), bytes / (chips x bandwidth))`` — no
overlap loss, no communication cost, no idle chip. It is an estimate, not a measurement.
"""
from __future__ import annotations

import dataclasses

__all__ = ["Cost", "matmul_params", "token_flops", "train_cost", "forward_cost", "rollout_cost", "kv_bytes_per_row"]


@dataclasses.dataclass(frozen=True)
class Cost:
  """``flops`` (total over all chips) and ``bytes_per_chip`` (HBM bytes each chip moves) of one program run."""
  flops: float
  bytes_per_chip: float

  def seconds(self, chip, chips: int) -> float:
    """The lower bound at ``chip``'s peak rates over ``chips`` chips."""
    return max(self.flops / (chips * chip.bf16_flops), self.bytes_per_chip / chip.hbm_bytes_per_s)


def matmul_params(cfg) -> int:
  """Parameters a token multiplies by (projections, the routed experts' MLPs, the LM head); not the embedding."""
  h, d = cfg.hidden_size, cfg.head_dim
  attn = h * d * (2 * cfg.num_heads + 2 * cfg.num_kv_heads)
  moe = set(cfg.moe_layer_indices)
  total = cfg.vocab_size * h  # the LM head (tied or not, it is one [H, V] matmul)
  for i in range(cfg.num_layers):
    total += attn + (cfg.num_experts_per_tok * 3 * h * cfg.moe_intermediate_size + h * cfg.num_experts
                     if i in moe else 3 * h * cfg.intermediate_size)
  return total


def _attention_keys(cfg, seq: int) -> float:
  """Sum over layers of the average keys a query of a causal ``seq``-token row attends to."""
  total = 0.0
  for i in range(cfg.num_layers):
    keys = seq / 2
    if cfg.sliding_window and cfg.is_sliding(i):
      keys = min(keys, cfg.sliding_window)
    total += keys
  return total


def token_flops(cfg, seq: int) -> float:
  """Forward FLOPs of one token in a causal row of ``seq`` tokens."""
  return 2 * matmul_params(cfg) + 4 * cfg.num_heads * cfg.head_dim * _attention_keys(cfg, seq)


def _itemsize(dtype: str) -> int:
  return 2 if dtype in ("bfloat16", "float16") else 4


def train_cost(cfg, rows: int, seq: int, chips: int) -> Cost:
  """One optimizer step on ``rows x seq`` tokens: forward + backward = 3 forwards."""
  from rljax.models import presets  # pylint: disable=import-outside-toplevel
  return Cost(3 * rows * seq * token_flops(cfg, seq),
              presets.num_params(cfg) * _itemsize(cfg.param_dtype) * 4 / chips)  # params, 2 moments, grads


def forward_cost(cfg, rows: int, seq: int, chips: int) -> Cost:
  from rljax.models import presets  # pylint: disable=import-outside-toplevel
  return Cost(rows * seq * token_flops(cfg, seq), presets.num_params(cfg) * _itemsize(cfg.compute_dtype))


def kv_bytes_per_row(cfg, seq: int, itemsize: int = 2) -> float:
  """KV cache bytes of one row of ``seq`` slots (all layers, K and V)."""
  return cfg.num_layers * 2 * cfg.num_kv_heads * cfg.head_dim * seq * itemsize


def rollout_cost(cfg, prompts: int, samples: int, prompt_len: int, new_tokens: int, chips: int,
                 weight_bytes: float) -> Cost:
  """Prefill of ``prompts`` prompts, then ``new_tokens`` decode steps of ``prompts x samples`` rows.

  ``weight_bytes``: the sampler's weights (all of them: FSDP gathers the model on every chip per step)."""
  rows = prompts * samples
  # a decoded token sees prompt_len + new_tokens / 2 keys on average: token_flops counts seq / 2 keys
  decode = token_flops(cfg, 2 * prompt_len + new_tokens)
  flops = prompts * prompt_len * token_flops(cfg, prompt_len) + rows * new_tokens * decode
  kv_per_chip = rows * kv_bytes_per_row(cfg, prompt_len + new_tokens / 2) / chips
  return Cost(flops, new_tokens * (weight_bytes + kv_per_chip))
