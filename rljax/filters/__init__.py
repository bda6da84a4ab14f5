"""Filters: keep-masks, selections and rollout allocation over groups and trajectories.

Where things run:

* **jit-able** (pure JAX, static ``num_groups``, ragged groups by ``group_id``):
  ``zero_variance``, ``variance_topp``, ``vcrl``, ``negative_advantage_drop``,
  ``apply_keep`` and the ``greso`` filter (``init``/``select``/``update`` over a
  ``GresoState`` of JAX arrays; also fine eagerly on the host).
* **host** (NumPy, data-dependent sizes or text): ``void_turn``,
  ``shuffle_pairs``, ``rorecomp`` (its compensation buffer: ``rljax.replay.rorecomp_compensation``),
  ``pilot_commit``, ``difficulty_budget``, and the curricula ``dump`` / ``tac`` (``CurriculumState``:
  ``curriculum_scores``, ``arm_probs``, ``draw_prompts``, ``curriculum_observe``, ``transfer_observe``).

Every filter returns ``(keep_or_selection, stats)`` where ``stats`` holds the
statistics the decision was based on. See ``docs/filters_and_rewards.md``. Each row of ``TECHNIQUES`` names
the stage that runs it in the RL loop (``stage=``: built here with ``_stages.row_filter``, or a prompt filter's
factory in ``_stages``).
"""
from rljax._technique import Fidelity, Technique
from rljax.filters import _stages as S
from rljax.filters._allocation import difficulty_budget, pilot_commit
from rljax.filters._curriculum import (CurriculumState, arm_probs, curriculum_init, curriculum_observe,
                                       curriculum_scores, draw_prompts, transfer_observe)
from rljax.filters._greso import Greso, GresoState, greso
from rljax.filters._selection import DEFAULT_ANSWER_PATTERN, DEFAULT_CODE_PATTERN, rorecomp, shuffle_pairs, void_turn
from rljax.filters._variance import apply_keep, negative_advantage_drop, variance_topp, vcrl, zero_variance

__all__ = [
    "zero_variance", "variance_topp", "void_turn", "greso", "Greso", "GresoState", "pilot_commit",
    "difficulty_budget", "shuffle_pairs", "rorecomp", "negative_advantage_drop", "vcrl", "apply_keep",
    "DEFAULT_CODE_PATTERN", "DEFAULT_ANSWER_PATTERN", "TECHNIQUES", "CurriculumState", "curriculum_init",
    "curriculum_scores", "arm_probs", "curriculum_observe", "transfer_observe", "draw_prompts",
]

_S0 = "000_3e503271be254a43.txt"
_S1 = "001_5839a3671b0b4d92.txt"

_VERL_DAPO = "verl 0.9.1 verl/trainer/ppo/v1/replay_buffer.py (DAPO filter_groups_metric)"

TECHNIQUES = (
    Technique("zero_variance", "filter", zero_variance, "keep_g = 1[std_g(metric) > 0]",
              "DAPO arXiv:2503.14476; verl algorithm.filter_groups",
              stage=S.row_filter(zero_variance, {"metric": "rewards", **S.GROUP}, loop_args=S.REFILL),
              fidelity=Fidelity("peer", _VERL_DAPO,
                                "ours returns the keep mask (std tested as max − min > atol); verl evicts and "
                                "refills the groups (refill=True in the stage)")),
    Technique("variance_topp", "filter", variance_topp, "keep the ceil(p * #groups) groups with the largest reward std",
              f"{_S0} L13 (StarPO-S)",
              stage=S.row_filter(variance_topp, {"rewards": "rewards", **S.GROUP}, loop_args=S.REFILL),
              fidelity=Fidelity("authors_code", "github.com/RAGEN-AI/RAGEN: ragen/trainer/agent_trainer.py "
                                "(_filter_rollout, rollout_filter_type='std')",
                                "ours keeps ceil(p·#groups) groups, authors int(p·#groups) (floor); ties: ours "
                                "lower group id, authors torch.topk order; equal when p·#groups is an integer")),
    Technique("void_turn", "filter", void_turn, "keep_i = prod_turns 1[code block or final answer]",
              f"{_S0} L27 (SimpleTIR)",
              stage=S.row_filter(void_turn, {"turns": "turns"}),
              fidelity=Fidelity("authors_code", "github.com/ltzheng/SimpleTIR: recipe/simpletir/agent_utils.py "
                                "(execute_predictions, mask_void_turns)",
                                "authors: code = ```(py|python)?\\n…\\n```, answer = \\boxed{; our default "
                                "patterns also accept any ``` block, <answer>, #### (code_pattern/answer_pattern)")),
    Technique("greso", "filter", greso, "admit_j ~ Bernoulli(max(p_kind^z_j, 0.01)), z_j = zero-variance streak",
              f"{_S0} L71 (GRESO, arXiv:2506.02177)",
              stage=S.greso,
              fidelity=Fidelity("authors_code", "github.com/Infini-AI-Lab/GRESO: verl/trainer/ttis/"
                                "presampling_selector.py (*_probabilistic_skip)",
                                "authors' defaults (floor 0.01; p adapts ±0.01 to 1/12, 1/6, in [0.05, 0.95]); we "
                                "adapt from the first step (authors: epoch 2); easy/hard = all-equal rewards")),
    Technique("pilot_commit", "filter", pilot_commit, "n_g proportional to pilot std_g, 0 if std_g = 0, sum <= budget",
              f"{_S1} L37 (Pilot-Commit, arXiv 2605.26606)",
              stage=S.pilot_commit,
              fidelity=Fidelity("authors_code", "github.com/databricks/pilot-commit: recipe/pc/pc_ray_trainer.py "
                                "(filter_batch)",
                                "default n ∝ pilot std; window=(0.125, 0.75), rule='uniform', max_per_prompt=n is "
                                "the authors' rule, except their overflow waits in a replay buffer")),
    Technique("difficulty_budget", "filter", difficulty_budget,
              "n_j = min + largest-remainder(R * w_j / sum w), w_j = (1 - acc_j)^power",
              f"{_S1} L203 (E3, arXiv 2505.18573)",
              stage=S.difficulty_budget,
              fidelity=Fidelity("authors_code", "github.com/LiaoMengqi/E3-RL4LLMs: e3/trainer/ray_trainer.py "
                                "(get_rollout_n_per_prompt)",
                                "same min + proportional split; authors weight by the dataset-wide difficulty rank "
                                "(sorted mean reward), leftover to the hardest; ours (1 − acc)^power, largest remainder")),
    Technique("shuffle_pairs", "filter", shuffle_pairs, "pair k-th max/min advantage per group; draw rows with p ~ |A|",
              f"{_S1} L43 (Shuffle-R1)",
              stage=S.row_filter(shuffle_pairs, {"advantages": S.row_advantages, "group_id": "group_id",
                                                 "valid": "valid", "key": "key"},
                                 needs=("advantages",), phase="advantages", resamples=True),
              fidelity=Fidelity("authors_code", "github.com/xiaomi-research/shuffle-r1: shuffle_r1/custom_algos.py "
                                "(compute_pairwise_purning_grpo_advantage)",
                                "same k-th max/min pairing; ours keeps pairs_per_group pairs (authors int(n/2·(1−0.5))) "
                                "and redraws rows ∝ |A| (authors redraw pairs ∝ pair |A| sum^p)")),
    Technique("rorecomp", "filter", rorecomp, "priority = short-correct | long-incorrect (within-group rank)",
              f"{_S1} L163 (RoRecomp, interpretation)",
              stage=S.row_filter(rorecomp, {"correct": "correct", "lengths": "lengths", "group_id": "group_id",
                                            "valid": "valid"}),
              fidelity=Fidelity("abstract", f"{_S1} L163 (RoRecomp abstract, arXiv 2509.25958)",
                                "short/long = within-group length rank among correct (incorrect) responses at "
                                "`fraction` (ours). Searched 2026-12 (2 passes) code/pages/repos ('RoRecomp', "
                                "title, 'compensation batch'): no code; intro only")),
    Technique("negative_advantage_drop", "filter", negative_advantage_drop, "keep_i = 1[A_i > 0]",
              f"{_S1} L191 (A-LoL)",
              stage=S.row_filter(negative_advantage_drop, {"advantages": S.row_advantages, "valid": "valid"},
                                 needs=("advantages",), phase="advantages"),
              fidelity=Fidelity("authors_code", "github.com/abaheti95/LoL-RL: lolrl_qlora_llama_hh.py (sample_weights)",
                                "authors clip A < 0 to 0 and sample rows ∝ A (or uniformly over A > 0); ours is the "
                                "keep mask only; keep_zero=True also keeps A = 0")),
    Technique("vcrl", "filter", vcrl, "score_g = var_g / ((hi - lo)^2 / 4); keep score_g >= threshold",
              f"{_S1} L115 (VCRL, arXiv 2509.19803)",
              stage=S.row_filter(vcrl, {"rewards": "rewards", **S.GROUP}, loop_args=S.REFILL),
              fidelity=Fidelity("abstract", f"{_S1} L115 (VCRL abstract)",
                                "score = var/var_max per a review of the paper; ours equals it for even G, lower "
                                "for odd G; threshold rule ours. Searched 2026-12 (2 passes) code/pages/repos "
                                "('VCRL', title): no code, no paper body")),
    Technique("dump", "filter", curriculum_scores,
              "p = softmax((mean_W |A|_j + c sqrt(2 ln(N+1)/(n_j+1))) / tau); arm ~ p, prompt ~ U(arm)",
              f"{_S1} L33 (DUMP, arXiv 2504.09710)",
              stage=S.dump,
              fidelity=Fidelity("authors_code", "github.com/ZhentingWang/DUMP: verl/utils/curriculum_learning.py "
                                "(compute_sampling_weights, CurriculumSampler)",
                                "authors' defaults (c = 1, tau = 0.1, window 300); arms = task ids (authors: a "
                                "data_source column); authors also learn from validation batches, ours from "
                                "training batches only; temperature=0 (argmax) is ours")),
    Technique("tac", "filter", transfer_observe,
              "score_d = L_d + lambda T_d + UCB bonus, T_d = EMA of mean_{d' != d} cos(g_d, g_d')",
              f"{_S1} L97 (TAC, arXiv 2606.25178)",
              stage=S.tac,
              fidelity=Fidelity("abstract", f"{_S1} L97 (TAC abstract, arXiv 2606.25178)",
                                "UCB score + λ·T_d, T_d = EMA of mean cos(g_d, g_d') (exact; paper: projected); λ, "
                                "decay ours. Searched code/pages/repos ('Transfer-Aware Curriculum', TAC, authors' "
                                "lab): no code stored (2026-12)")),
)
