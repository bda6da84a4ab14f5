"""rljax.sampling: one jitted rollout sampler (prefill + ``lax.while_loop`` decode).

Public API::

  from rljax.sampling import SamplerConfig, generate, resume, FinishReason
  config = SamplerConfig(max_new_tokens=128, prompt_buckets=(16, 32, 64))   # static, hashable
  rollout = generate(model, prompts, config=config, key=key, n=8,
                     temperature=1.0, top_k=0, top_p=1.0, min_p=0.0,     # traced: no recompiles
                     stop_tokens=[eos_id], policy_version=step)
  # rollout: rljax.types.Rollout, B = P * n rows (row p * n + i = sample i of prompt p),
  # T = bucket + max_new_tokens columns, LEFT-aligned: tokens[b] = prompt + completion + pad,
  # positions = arange(T) -> the trainer calls policy_outputs(model, rollout.tokens).
  rollout, state = generate(..., return_state=True)
  rollout, state = resume(model, state, appended=tool_outputs, config=config, key=key2)  # multi-turn

Also ``truncate_at_stop_strings`` (host-side stop strings), ``sampling_step``
(one step's sampling math) and the exact sort-free ``truncation_mask``.
See ``docs/sampling.md``.
"""
from rljax.sampling._config import FinishReason, SamplerConfig, default_buckets
from rljax.sampling._sampler import SamplerState, generate, resume, sampling_step
from rljax.sampling._stop import truncate_at_stop_strings
from rljax.sampling._truncation import top_k_mask, top_p_mask, truncate_logits, truncation_mask

__all__ = [
    "FinishReason", "SamplerConfig", "SamplerState", "default_buckets", "generate", "resume",
    "sampling_step", "truncate_at_stop_strings", "top_k_mask", "top_p_mask", "truncate_logits",
    "truncation_mask",
]
