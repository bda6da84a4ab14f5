"""rljax.sampling: one jitted rollout sampler (prefill + ``lax.while_loop`` decode).

Signatures (the cross-room contract)::

  SamplerConfig(max_new_tokens=128, prompt_buckets=(16, 32, 64, 128, 256, 512), cache_size=None,
                max_stop_tokens=8, return_entropy=True, return_routing=True, pad_id=0,
                cache_dtype=None)                       # frozen, hashable, static

  generate(model, prompts, *, config, key, n=1, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0,
           greedy=False, stop_tokens=None, max_new_tokens=None, policy_version=0,
           prompt_ids=None, return_state=False) -> Rollout | (Rollout, SamplerState)
    model: Transformer or (graphdef, state) = nnx.split(model)   (the latter skips a per-call split)
    prompts: P non-empty int sequences (ragged); temperature/top_k/top_p/min_p/policy_version:
    scalar or [P] (traced: changing them never recompiles); stop_tokens: [ids] or [[ids] per prompt].
    -> B = P * n rows, row p * n + i = sample i of prompt p, group_id = prompt_ids[p] (default p);
       T = bucket + config.max_new_tokens columns, LEFT-aligned: tokens[b] = prompt + completion +
       pad, positions = arange(T), so the trainer calls policy_outputs(model, rollout.tokens).

  resume(model, state, appended=None, *, config, key, active=None, temperature=1.0, top_k=0,
         top_p=1.0, min_p=0.0, greedy=False, max_new_tokens=None, policy_version=0)
         -> (Rollout [B, cache_size], SamplerState)     # multi-turn: reuses the cached prefix
    key: one PRNG key, or [B] keys (one per row)
  rewind(state, length, *, config) -> SamplerState     # cut rows back (host-side stop strings)
  compact(state) -> SamplerState                       # free the masked gaps between a row's cached keys
  feed_rows(model, state, rows, appended, *, config) -> SamplerState   # prefill only some rows, no sampling
  restart(state, rows, first, *, config) -> SamplerState   # rows start over from one token (a new context window)

  truncate_at_stop_strings(rollout, stop_strings, detokenize, pad_id=0) -> Rollout   # host side
  first_stop_hit(ids, stops, detokenize) -> int   # host side: smallest j with a stop in detokenize(ids[:j]), or -1
  FinishReason: LENGTH = 0, STOP_TOKEN = 1, STOP_STRING = 2

Rollout fields: tokens, prompt_mask, completion_mask, logp_behavior (untempered policy),
logp_sampling (truncated/tempered distribution actually sampled), entropy_behavior (if
config.return_entropy), routing (MoE), finish_reason, group_id, policy_version.
Also exported: ``sampling_step`` (one step's sampling math) and the exact sort-free
``truncation_mask`` / ``top_k_mask`` / ``top_p_mask``. See ``docs/sampling.md``.
"""
from rljax.sampling._config import FinishReason, SamplerConfig, default_buckets
from rljax.sampling._cache import compact, restart, rewind
from rljax.sampling._sampler import feed_rows, generate, lower_generate, resume
from rljax.sampling._state import SamplerState
from rljax.sampling._step import sampling_step
from rljax.sampling._stop import first_stop_hit, truncate_at_stop_strings
from rljax.sampling._truncation import top_k_mask, top_p_mask, truncate_logits, truncation_mask

__all__ = [
    "lower_generate",
    "FinishReason", "SamplerConfig", "SamplerState", "compact", "default_buckets", "feed_rows", "generate",
    "restart", "resume", "rewind",
    "sampling_step", "first_stop_hit", "truncate_at_stop_strings", "top_k_mask", "top_p_mask", "truncate_logits",
    "truncation_mask",
]
