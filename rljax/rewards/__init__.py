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
from rljax._technique import Fidelity, Technique
from rljax.rewards._agentic import count_calls, cosine_weight, shortest_path_reward, tool_call_reward
from rljax.rewards._code import code_tests, extract_code
from rljax.rewards._safe import RewardError, composite, safe_reward
from rljax.rewards import _stages as S
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

_S0 = "000_3e503271be254a43.txt"
_S1 = "001_5839a3671b0b4d92.txt"

TECHNIQUES = (
    Technique("exact_match", "reward", exact_match,
              "r = 1[norm(extract(y)) in {norm(a)}]", f"{_S1} L225 (binary correctness); normaliser ours",
              stage=S.verifier(exact_match),
              fidelity=Fidelity("peer", "verl 0.9.1 verl/utils/reward_score/search_r1_like_qa_em.py (compute_score)",
                                "≈ normalize='squad', extract='answer_tag', but our 'squad' maps punctuation to a "
                                "space (verl deletes it: 'New-York' = 'newyork'); no /4 for > 10 tags")),
    Technique("math_answer", "reward", math_answer,
              "r = 1[equiv(last boxed | #### | answer is | last number, ref)]",
              "task B design (MATH/GSM8K conventions)",
              stage=S.verifier(math_answer),
              fidelity=Fidelity("peer", "verl 0.9.1 verl/utils/reward_score/math_reward.py (compute_score, "
                                "is_equiv)",
                                "verl: last \\boxed only, strip_string equality; ours also ####, 'answer is', last "
                                "number (sources=('boxed',) for verl's), exact/tolerant numeric equality")),
    Technique("format_regex", "reward", format_regex, "r = 1[regex matches y]",
              f"{_S1} L161 (Search-R1); {_S0} L15 (Gazal-R1)",
              stage=S.verifier(format_regex),
              fidelity=Fidelity("authors_code", "github.com/PeterGriffinJin/Search-R1: verl/utils/reward_score/"
                                "qa_em_format.py (is_valid_sequence)",
                                "pattern=SEARCH_R1_FORMAT_PATTERN is theirs (on the completion, not after an "
                                "assistant marker); default R1_FORMAT_PATTERN (think then answer, no search) ours; "
                                "Gazal-R1's: no code")),
    Technique("code_tests", "reward", code_tests,
              "r = 1[program(y) + tests(a) exits 0 in rljax.sandbox and prints the marker after the tests]",
              "issue #20 item 3 (code verifiers; PRIME-style unit-test reward)",
              stage=S.verifier(code_tests),
              fidelity=Fidelity("peer", "verl verl/utils/reward_score/prime_code/__init__.py (compute_score)",
                                "verl: APPS in/out test cases, last ```python block; ours: assert tests appended "
                                "to the last fenced block, all-pass only, a marker after the tests")),
    Technique("grpo_lambda", "shaping", grpo_lambda,
              "r_i = penalized_i if group g is in the batch's top-lambda fraction by acc_g else 1[correct_i]",
              f"{_S0} L9 (GRPO-lambda, arXiv:2505.18086)",
              stage=S.grpo_lambda,
              fidelity=Fidelity("paper_formula", "arXiv 2505.18086 GRPO-λ method (top-λ fraction of groups by "
                                "correctness ratio)",
                                "λ = 0.5 default and the length-penalty form inside the selected groups "
                                "(length_weight) are ours; selection='threshold' gives an absolute acc ≥ τ rule")),
    Technique("overlong_penalty", "shaping", overlong_penalty,
              "p = min(-(len - (L_max - L_buf)) / L_buf * factor, 0)",
              "DAPO arXiv:2503.14476; verl reward_manager/dapo.py overlong_buffer",
              stage=S.overlong_penalty,
              fidelity=Fidelity("peer", "verl 0.9.1 verl/workers/reward_manager/dapo.py (overlong_buffer)",
                                "clip=True gives TRL's clamp at −factor beyond L_max")),
    Technique("length_penalty", "shaping", length_penalty,
              "lam = 0.5 - (len - min_g)/(max_g - min_g); r = lam if correct else min(0, lam)",
              f"Kimi k1.5 arXiv:2501.12599; {_S1} L79 (interpretation)",
              stage=S.length_penalty,
              fidelity=Fidelity("peer", "github.com/huggingface/open-r1: src/open_r1/rewards.py (len_reward, "
                                "Kimi k1.5 form)",
                                "ours: token lengths, min/max per prompt group (Kimi); open-r1: character lengths "
                                "over the whole call's batch")),
    Technique("rubric_dropout", "shaping", rubric_dropout,
              "r_i = sum_c w_c k_gc s_ic / sum_c w_c k_gc, k_g shared by group g", f"{_S1} L81",
              stage=S.rubric_dropout,
              fidelity=Fidelity("abstract", f"{_S1} L81 (Rubric Dropout abstract)",
                                "weighted mean over kept criteria (or sum), Bernoulli or exact-count masks: ours. "
                                "Searched code/pages ('Rubric Dropout', rubric criteria dropout GRPO), repos "
                                "'Rubric-Dropout': no code (2026-12)")),
    Technique("prm_clip", "shaping", prm_clip, "r'_t = min(r_t - eta, 0)", f"{_S1} L157 (arXiv:2410.15115)",
              stage=S.shaping_stage(prm_clip, S.STEPS, result=S.plus_outcome_steps),
              fidelity=Fidelity("abstract", f"{_S1} L157 (arXiv 2410.15115 abstract)",
                                'min(r − η, 0) recalled (a description of its Clip figure agrees); η ours. Searched '
                                '2026-12 (2 passes) pages, code, openpsi-project/ReaLHF (all branches): no code; '
                                'only abstract and reviews stored')),
    Technique("prm_delta", "shaping", prm_delta, "r'_t = r_t - r_{t+1}, r'_T = r_T",
              f"{_S1} L157 (arXiv:2410.15115)",
              stage=S.shaping_stage(prm_delta, S.STEPS, result=S.plus_outcome_steps),
              fidelity=Fidelity("abstract", f"{_S1} L157 (arXiv 2410.15115 abstract)",
                                'r_t − r_{t+1} recalled; r_T kept on the last step unverified (a figure description '
                                'crosses it out). Searched 2026-12 (2 passes) pages, code, ReaLHF: no code; only '
                                'abstract and reviews stored')),
    Technique("correctness_gated", "shaping", correctness_gated, "r = r_outcome + w 1[correct] r_process",
              f"{_S1} L219 (SCOPE-RL, interpretation)",
              stage=S.correctness_gated,
              fidelity=Fidelity("abstract", f"{_S1} L219 (SCOPE-RL abstract)",
                                "gate r_outcome + w·1[correct]·r_process ours; process terms the caller's. Its link "
                                "github.com/tokencraft-lab/SCOPE-RL: no snapshot, not indexed; code search "
                                "'SCOPE-RL': other projects (2026-12)")),
    Technique("gaussian_reward", "reward", gaussian_reward, "r = exp(-(s_hat - s)^2 / (2 sigma^2))",
              f"{_S0} L109 (OmniQuality-R, arXiv 2510.10609)",
              stage=S.gaussian_reward,
              fidelity=Fidelity("authors_code", "github.com/yeppp27/VisualScore: openrlhf/models/remote_rm/"
                                "math_verifier_wolatex_regress_specifc.py (gaussian_rbf)",
                                "same kernel; their scripts: sigma=0.8 (default 1.0 = their CLI default); unparsed → "
                                "0 (invalid_value=0); their +0.5 format term: a separate reward (format_regex); "
                                "per-dataset σ multipliers (off): not built")),
    Technique("clipped_linear_reward", "reward", clipped_linear_reward, "r = clip(a d + b, low, high)",
              f"{_S0} L39 (IRRL, arXiv:2302.00270, interpretation)",
              stage=S.clipped_linear_reward,
              fidelity=Fidelity("authors_code", "github.com/mengdi-li/internally-rewarded-rl: trainer.py "
                                "(linear_clipping: clamp(p_y - 0.1, min=0))",
                                "theirs: r = max(p_y − 1/K, 0), K classes (MNIST: 0.1); offset=-1/K gives it; "
                                "default offset 0 (the class count is the caller's); high=1 never binds on p")),
    Technique("shortest_path_reward", "shaping", shortest_path_reward,
              "r' = r − 1[r ≠ 0]·max(l − L, 0)/(2l), L = fewest steps of a success in the group",
              f"{_S0} L37 (MobileRL / ADAGRPO)",
              stage=S.shortest_path_reward,
              fidelity=Fidelity("authors_code", "github.com/xuyifan-0731/MobileRL-iclr: training/verl/workers/"
                                "reward_manager/step.py (check_uid_uuid_reward)",
                                "steps = model turns (authors: step rows of an episode); success = r >= 1 "
                                "(authors r == 1); shortest= (e.g. a true shortest path) is our option")),
    Technique("tool_call_reward", "shaping", tool_call_reward,
              "r' = r + coef·min(1, n/K)·½(1 + cos(π·min(t, T)/T)), n = environment steps, K = 10, T = 200",
              f"{_S0} L75 (SPEAR, arXiv 2509.22601)",
              stage=S.tool_call_reward,
              fidelity=Fidelity("authors_code", "github.com/TencentYoutuResearch/SPEAR: verl-agent/agent_system/"
                                "reward_manager/episode.py L143-159; T=200: examples/*/*_spear.sh",
                                "n = model turns (authors: episode_lengths, the env steps); count='calls' (regex tool "
                                "calls) and coef (authors 1) are ours; step = rljax's RL step (authors' global_steps "
                                "starts at 1)")),
    Technique("composite", "multi_reward", composite, "r = sum_c w_c r_c (each r_c logged)",
              f"{_S0} L15, L79; {_S1} L41, L105 (interpretation)",
              stage=S.composite,
              fidelity=Fidelity("peer", "TRL grpo_trainer.py: (rewards_per_func * reward_weights).nansum(dim=1)",
                                "a failing component raises (strict) or scores 0 (lenient) instead of TRL's "
                                "NaN-skip")),
)
