"""Rewards: host-side verifiers, the trainer's reward guard, and jit-able shaping.

Where things run:

* **host** (plain Python over decoded text, between jitted calls):
  ``exact_match``, ``math_answer``, ``format_regex``, ``code_tests`` (the
  completion's code against the reference's tests in ``rljax.sandbox``)
  (verifiers ``(completions, references) -> [B] float32``, never raising on
  model output), ``safe_reward`` (strict/lenient guard, ``RewardError``) and
  ``composite`` (weighted sum that logs each component).
* **jit-able** (pure array functions, ``(values, metrics)``):
  ``overlong_penalty``, ``length_penalty``, ``grpo_lambda``,
  ``rubric_dropout``, ``prm_clip``, ``prm_delta``, ``correctness_gated``,
  ``gaussian_reward``, ``clipped_linear_reward``; lengths are token counts
  (``token_counts(completion_mask)``), never characters.

See ``docs/filters_and_rewards.md``.
"""
from rljax.rewards import _agentic, _code, _safe, _shaping, _verifiers
from rljax.rewards._agentic import count_calls, cosine_weight, shortest_path_reward, tool_call_reward
from rljax.rewards._code import code_tests, extract_code
from rljax.rewards._safe import RewardError, composite, safe_reward
from rljax.rewards._shaping import (clipped_linear_reward, correctness_gated, gaussian_reward, grpo_lambda,
                                    length_penalty, overlong_penalty, prm_clip, prm_delta, rubric_dropout,
                                    token_counts)
from rljax.rewards._verifiers import (R1_FORMAT_PATTERN, SEARCH_R1_FORMAT_PATTERN, exact_match, extract_math_answer,
                                      format_regex, math_answer, normalize_math_answer, normalize_text)

__all__ = [
    "RewardError", "safe_reward", "composite", "exact_match", "math_answer", "format_regex", "code_tests",
    "extract_code",
    "normalize_text", "normalize_math_answer", "extract_math_answer", "R1_FORMAT_PATTERN", "SEARCH_R1_FORMAT_PATTERN",
    "token_counts", "overlong_penalty", "length_penalty", "grpo_lambda", "rubric_dropout", "prm_clip",
    "prm_delta", "correctness_gated", "gaussian_reward", "clipped_linear_reward", "shortest_path_reward",
    "tool_call_reward", "cosine_weight", "count_calls", "TECHNIQUES",
]

# each module declares its rows beside its functions
TECHNIQUES = (_verifiers.TECHNIQUES + _code.TECHNIQUES + _shaping.TECHNIQUES + _agentic.TECHNIQUES
              + _safe.TECHNIQUES)
