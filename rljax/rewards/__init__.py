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
from rljax._technique import gather_room
from rljax.rewards import _agentic, _code, _safe, _shaping, _verifiers
from rljax.rewards._agentic import count_calls, cosine_weight, shortest_path_reward, tool_call_reward  # noqa: F401
from rljax.rewards._code import code_tests, extract_code  # noqa: F401
from rljax.rewards._safe import RewardError, composite, safe_reward  # noqa: F401
from rljax.rewards._shaping import (clipped_linear_reward, correctness_gated, gaussian_reward, grpo_lambda,  # noqa: F401
                                    length_penalty, overlong_penalty, prm_clip, prm_delta, rubric_dropout,
                                    token_counts)
from rljax.rewards._verifiers import (R1_FORMAT_PATTERN, SEARCH_R1_FORMAT_PATTERN, exact_match, extract_math_answer,  # noqa: F401
                                      format_regex, math_answer, normalize_math_answer, normalize_text)

# each module declares its rows beside its functions. ``__all__``: every technique module's ``__all__``
# (gather_room; a new module is found there)
TECHNIQUES, __all__ = gather_room(globals(), _verifiers.TECHNIQUES + _code.TECHNIQUES + _shaping.TECHNIQUES
                                  + _agentic.TECHNIQUES + _safe.TECHNIQUES)
