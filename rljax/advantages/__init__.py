"""Advantage estimators: pure, jit-able functions of rewards, group ids and masks.

Conventions (the same for every estimator; see ``docs/advantages.md``):

* Groups are identified by ``group_id [B]`` (int in ``[0, num_groups)``) and
  may be ragged; nothing reshapes to ``[prompts, G]``. ``num_groups`` is a
  *static* int (default ``B``, always enough once ids are re-indexed to
  ``0..P-1``); statistics use ``jax.ops.segment_sum`` with that many segments.
* Every function returns ``(advantages, info)``. Outcome-level estimators give
  ``[B]`` (broadcast with ``to_tokens(adv, mask) -> [B, T]``); token-level
  ones give ``[B, T]``. ``info`` is a dict: scalar entries are logging
  metrics, array entries are documented auxiliary outputs (``returns``,
  ``keep``, ``weights``...). ``scalar_metrics(info)`` keeps the scalars.
* Stateful estimators (``role_ema_baseline``, ``hadw``) are factories returning
  ``StatefulEstimator(init, update)``; ``update(state, ...) -> (advantages,
  info, new_state)`` with NamedTuple array state.
* ``valid [B]`` (optional) removes rows from every statistic and gives them 0.
  Non-finite rewards on valid rows raise ``ValueError`` when concrete; under
  ``jit`` they are treated as invalid (advantage 0; ``info["num_valid"]`` drops).
  A group with one valid member gets 0 (``singleton="zero"``) or verl's raw
  reward (``singleton="raw"``). Never NaN.
"""
from __future__ import annotations

import jax.numpy as jnp

from rljax._technique import Fidelity, Technique
from rljax.advantages._common import masked_whiten, to_tokens
from rljax.advantages._multi import dara, gd2po, gdpo, per_reward_grpo, sa_mrpo
from rljax.advantages._outcome import (canon, difficulty_weight, dr_grpo, gae, gagar, grpo, key_baseline,
                                       outcome_to_token_rewards, passk, qae, rank, reinforce_pp,
                                       reinforce_pp_baseline, remax, rloo, task_normalized, uniqueness, vote)
from rljax.advantages import _stages as S
from rljax.advantages._stateful import HADWState, RoleEMAState, StatefulEstimator, hadw, role_ema_baseline
from rljax.advantages._token import (implicit_progress_reward, oprl, outcome_conditioned_baseline, segment,
                                     sign_preserving_modulation, step_episode_mix, tempo)


def scalar_metrics(info: dict) -> dict:
  """The scalar (logging) entries of an estimator's ``info`` dict."""
  return {k: v for k, v in info.items() if jnp.ndim(v) == 0}


__all__ = [
    "grpo", "dr_grpo", "rloo", "reinforce_pp", "reinforce_pp_baseline", "remax", "gae", "qae", "passk", "rank",
    "vote", "task_normalized", "key_baseline", "role_ema_baseline", "hadw", "difficulty_weight", "gagar",
    "uniqueness", "canon", "segment", "outcome_conditioned_baseline", "tempo", "step_episode_mix",
    "sign_preserving_modulation", "implicit_progress_reward", "oprl", "gdpo", "dara", "sa_mrpo", "gd2po",
    "per_reward_grpo", "to_tokens", "masked_whiten", "outcome_to_token_rewards", "scalar_metrics",
    "StatefulEstimator", "RoleEMAState", "HADWState", "TECHNIQUES",
]

_S0 = "seed 000_3e503271be254a43.txt"
_S1 = "seed 001_5839a3671b0b4d92.txt"


def _t(name, fn, formula, source, kind="advantage", stage=None, fidelity=None):
  return Technique(name=name, kind=kind, fn=fn, formula=formula, source=source, stage=stage, fidelity=fidelity)


_VERL = "verl 0.9.1 verl/trainer/ppo/core_algos.py"


TECHNIQUES: tuple[Technique, ...] = (
    _t("grpo", grpo, "A_i = (r_i − μ_g)/(σ_g + ε); scale group|batch|none", "arXiv 2402.03300; verl grpo",
       stage=S.group_estimator(grpo),
       fidelity=Fidelity("peer", f"{_VERL}: compute_grpo_outcome_advantage",
                         "singleton group: ours A = 0; verl mean 0, std 1, i.e. A = r/(1+ε) (singleton='raw')")),
    _t("dr_grpo", dr_grpo, "A_i = r_i − μ_g", "arXiv 2503.20783; verl norm_adv_by_std_in_grpo=False",
       stage=S.group_estimator(dr_grpo),
       fidelity=Fidelity("peer", f"{_VERL}: compute_grpo_outcome_advantage(norm_adv_by_std_in_grpo=False)",
                         "singleton group: ours A = 0; verl A = r (singleton='raw')")),
    _t("rloo", rloo, "A_i = r_i − mean_{j≠i} r_j = n/(n−1)(r_i − μ_g)", "arXiv 2402.14740; verl rloo",
       stage=S.group_estimator(rloo),
       fidelity=Fidelity("peer", f"{_VERL}: compute_rloo_outcome_advantage",
                         "singleton group: ours A = 0; verl A = r (singleton='raw')")),
    _t("reinforce_pp", reinforce_pp, "A = whiten_tokens(G_t), G_t = r_t + γG_{t+1}",
       "arXiv 2501.03262; verl reinforce_plus_plus",
       stage=S.reinforce_pp,
       fidelity=Fidelity("peer", f"{_VERL}: compute_reinforce_plus_plus_outcome_advantage",
                         "mask-0 tokens inside a response carry the running return (verl resets it there: "
                         "running_return * response_mask); equal on hole-free masks; reset_at_mask=True: verl's")),
    _t("reinforce_pp_baseline", reinforce_pp_baseline, "A = whiten(r_i − μ_g)",
       "arXiv 2501.03262; verl reinforce_plus_plus_baseline",
       stage=S.reinforce_pp_baseline,
       fidelity=Fidelity("peer", f"{_VERL}: compute_reinforce_plus_plus_baseline_outcome_advantage",
                         "equal with mask [B,T] and singleton='raw' (verl: singleton mean 0); default singleton "
                         "'zero'; without a mask ours whitens over sequences, not tokens")),
    _t("remax", remax, "A = r − r_greedy (token: Σ_{s≥t} r_s − b·m_t)", "arXiv 2310.10505; verl remax",
       stage=S.remax,
       fidelity=Fidelity("peer", f"{_VERL}: compute_remax_outcome_advantage",
                         "token form identical; the [B] form (no mask) is r − b per sequence")),
    _t("gae", gae, "A_t = δ_t + γλA_{t+1}, δ_t = r_t + γV_{t+1} − V_t; returns = A + V; whiten",
       "arXiv 1506.02438; verl gae",
       stage=S.gae,
       fidelity=Fidelity("peer", f"{_VERL}: compute_gae_advantage_return",
                         "ours multiplies the whitened A by the mask (verl leaves values outside it); "
                         "equal on masked tokens")),
    _t("qae", qae, "A_i = (r_i − Q_K(g))/(σ_g + ε), K-quantile baseline (torch.quantile linear default)",
       f"{_S0} L21; arXiv 2509.22611",
       stage=S.group_estimator(qae),
       fidelity=Fidelity("authors_code", "github.com/junkangwu/QAE: README.md (quotes its verl/trainer/ppo/"
                         "core_algos.py L315-319)",
                         "default = authors' torch.quantile (linear interpolation) in verl grpo (σ+1e-6); "
                         "interpolation='inverted_cdf' gives the abstract's exact two-regime gate")),
    _t("passk", passk, "A_i = (E[max_{S∋i} r] − ρ)/σ over k-subsets; ρ = 1 − C(n−c,k)/C(n,k)",
       f"{_S1} L169; arXiv 2508.10751",
       stage=S.group_estimator(passk),
       fidelity=Fidelity("authors_code", "github.com/RUCAIBox/Passk_Training: code/passk_adv.py (calc_adv)",
                         "ours divides by σ (authors σ + 1e-6); rewards outside {0,1}: ours exact subset-max "
                         "expectation, authors leave them unchanged")),
    _t("rank", rank, "A_i = (midrank_i − (n+1)/2)/((n−1)/2)", f"{_S1} L229",
       stage=S.group_estimator(rank),
       fidelity=Fidelity("abstract", f"{_S1} L229 (RLRR abstract, arXiv 2601.23058)",
                         "centred mid-ranks, tie sharing, [−1, 1] scale ours (normalize='std'|'none'). Searched "
                         "2026-12 code/pages ('RLRR', 'Ranking Reward Model', title): no code or paper body "
                         "(yale-nlp/RLRR is another paper)")),
    _t("vote", vote, "A_i = (r_i − μ_g)/max(σ_g, ε) + b·max(0, r_i − r_vote(g)), r_vote = majority answer's reward",
       f"{_S1} L135",
       stage=S.group_estimator(vote, answer_id="answer_ids"),
       fidelity=Fidelity("authors_code", "github.com/HanYiton/VAA-CSEC: YuYi/glpo/glpo_swift_plugin.py "
                         "(_glpo_compute_advantages)",
                         "default = theirs with eps=1e-4 (their σ floor); tied majority answers: ours averages "
                         "their rewards, theirs takes the first; form='margin': (r − r_vote)/(σ + ε)")),
    _t("task_normalized", task_normalized, "A' = (A − mean_task A)/(std_task A + ε)", f"{_S0} L5, L55",
       stage=S.task_normalized,
       fidelity=Fidelity("paper_formula", "arXiv 2512.12967 (QwenLong-L1.5) Sec. 4.2 Eq. 7 (paper text: "
                         "Tongyi-Zhiwen/Qwen-Doc QwenLong_1_5.pdf)",
                         "paper: (r − mean_group r)/std(r ∈ B_task) = task_normalized(grpo(scale='none'), "
                         "scale='rewards', center=False); default std of the advantages, +ε, ddof 1: ours")),
    _t("key_baseline", key_baseline, "A_i = R_i − mean{R_j : key_j = key_i}", f"{_S0} L33",
       stage=S.key_baseline,
       fidelity=Fidelity("abstract", f"{_S0} L33 (AdvEvo-MARL abstract: shared mean-return baseline; arXiv 2510.01586)",
                         "mean over rows with the same key, no std, singleton 0: ours. Searched 2026-12 code/pages "
                         "('AdvEvo-MARL', 'public baseline', title): no code or paper body found")),
    _t("role_ema_baseline", role_ema_baseline, "b_k ← αb_k + (1−α)mean_k R; A = R − b_key", f"{_S0} L91",
       stage=S.role_ema_baseline,
       fidelity=Fidelity("authors_code", "github.com/spiral-rl/spiral: train_spiral.py (role_baseline_ema), "
                         "spiral/utils.py (EMA)",
                         "authors update once per game, ours once per batch with the key's mean return (equal "
                         "with one game per batch); init='batch_mean' starts at the first batch mean")),
    _t("hadw", hadw, "A' = s·A·exp(λ·sgn(A)·(anchor − acc_g)); anchor = EMA or window mean of batch acc",
       f"{_S1} L177; arXiv 2601.08521",
       stage=S.hadw,
       fidelity=Fidelity("authors_code", "github.com/yangfengkai/HA-DW: verl/trainer/ppo/core_algos.py "
                         "(compute_ha_dw_outcome_advantage)",
                         "authors = window=10, scale=1.5 (anchor: mean of the last k batch rewards incl. the current); "
                         "default EMA anchor (decay) and s=1: a ×1.5 on every advantage is a learning-rate change")),
    _t("difficulty_weight", difficulty_weight, "A' = A·(1 + s(2(1 − acc_g) − 1))", f"{_S1} L59",
       stage=S.difficulty_weight,
       fidelity=Fidelity("abstract", f"{_S1} L59 (arXiv 2505.13261; OpenReview 0xewM6o97m)",
                         "weight f(difficulty) (linear 1 + s(2d − 1) or exp) ours; reviewers: the paper's 'steep "
                         "exponential' is in words only. Searched 2026-12 (2 passes) code/pages: no code; paper "
                         "body not stored")),
    _t("gagar", gagar, "A'_i = A_i w_i Σ_pass A / Σ_pass wA (passing only)", f"{_S1} L65; arXiv 2609.32577",
       stage=S.gagar,
       fidelity=Fidelity("peer", "github.com/kekmodel/mimo-verl: verl/trainer/ppo/gar.py (redistribute, factors: "
                         "GAGAR arXiv 2609.32577 Eqs. 6-8, App. A.1-A.2)",
                         "weight='factor', lambda_max=1.5 on grpo(scale='none') = theirs (a⁺, λ capped, B − mean B); "
                         "tier factors f: the caller's; default: rank weights (midrank/n_pass)^power, no cap (ours)")),
    _t("uniqueness", uniqueness, "A'_i = A_i·w_i, w ∝ 1/|cluster(i)|^α, mean 1 over correct", f"{_S1} L61",
       stage=S.uniqueness,
       fidelity=Fidelity("paper_formula", "arXiv 2601.08763v2 Sec. 3, Eqs. 1, 3–5 (A' = z/f^α); paper text stored "
                                          "in the code index (file id 61124452340)",
                         "scope='all', alpha=α gives Eq. 5 (every rollout, f over all K, no renormalising); default "
                         "scope='correct' (correct rows only, mean-1 weights) ours. Authors' repo "
                         "zhiyuanhubj/Uniqueness-Aware-RL: README only")),
    _t("canon", canon, "A = (intra(r − μ_s) + inter(μ_s − μ_g))/(σ_g + ε), strata by metric", f"{_S1} L193",
       stage=S.canon,
       fidelity=Fidelity("authors_code", "github.com/biuboomc/CANON: verl/trainer/ppo/core_algos.py "
                         "(compute_dr_entropy_per_token_group_outcome_advantage)",
                         "authors: A = r − λμ_other − (1−λ)μ_own, /max_length, median to the upper half; "
                         "= ours with intra=1, inter=2λ, scale='none' (even n, no ties)")),
    _t("segment", segment, "A_{i,t} = Σ_k 1[seg_{i,t}=k]·grpo(r^(k))_i", f"{_S1} L25, L57, L79; arXiv 2602.10231",
       stage=S.segment,
       fidelity=Fidelity("paper_formula", "arXiv 2602.10231 (Blockwise AE) Sec. 4.2-4.3, App. B Alg. 1 (paper text; "
                         "no code found)",
                         "paper: A_k = r_k − group mean on block k, std optional (main runs none: scale='none'); "
                         "default divides by the group std (GRPO, as SLCA/DSS-GRPO); later blocks: "
                         "outcome_conditioned_baseline")),
    _t("outcome_conditioned_baseline", outcome_conditioned_baseline, "A_i = r_i − mean{r_j : g_j = g_i, o_j = o_i}",
       f"{_S1} L25; arXiv 2602.10231",
       stage=S.outcome_conditioned_baseline,
       fidelity=Fidelity("paper_formula", "arXiv 2602.10231 (Blockwise AE) Sec. 4.3 item 4, App. B Alg. 1 lines 7-10 "
                         "(paper text; no code found)",
                         "the default (stratum mean, no std) is the paper's; scale='group' (stratum std) is our "
                         "option")),
    _t("tempo", tempo, "A_{i,t} = A_i^GRPO + (V(s_{t+1}) − V(s_t))/(σ_g + ε), V = mean descendant reward",
       f"{_S1} L23",
       stage=S.tempo,
       fidelity=Fidelity("abstract", f"{_S1} L23 (TEMPO abstract, arXiv 2509.18314)",
                         "V(s) = mean reward below the prefix is the abstract's; TD scale (÷σ_g), root handling "
                         "ours. Searched 2026-12 (2 passes) code/pages ('TEMPO', 'Prefix-to-Tree', title): no code; "
                         "summaries, intro only")),
    _t("step_episode_mix", step_episode_mix, "A = w·norm_m(Σ_k γ^k r_{m+k}) + w_ep·A_ep, A_ep = grpo(R) | norm(r_m)",
       f"{_S1} L127 (UI-S1, arXiv 2509.11543); {_S0} L67",
       stage=S.step_episode_mix,
       fidelity=Fidelity("authors_code", "github.com/X-PLUG/MobileAgent: UI-S1/uis1/core_uis1.py "
                         "(compute_uis1_outcome_advantage)",
                         "authors = step_weight=1, episode_weight=1, episode='turns', γ=0.5 (their A_ep: turn reward "
                         "over the group's pooled turns); default: convex mix with grpo(R); no expert-mismatch "
                         "restart")),
    _t("sign_preserving_modulation", sign_preserving_modulation,
       "A' = A·(1 + λ ε_w tanh(sgn(A)·z_turn)), z = signal standardised over the group's turns", f"{_S1} L3",
       stage=S.sign_preserving_modulation,
       fidelity=Fidelity("paper_formula", "arXiv 2608.04007 (TurnSight) 'Group-Normalized Weight Construction', "
                         "'Advantage Integration' (paper text)",
                         "defaults = paper's (λ = ε_w = 0.5, signed); it pools token-level gaps, we pool per-turn "
                         "values; code (github.com/quchangle1/TurnSight) not in our store")),
    _t("implicit_progress_reward", implicit_progress_reward, "r_t = β(log π − log π_ref), stop-gradient",
       f"{_S1} L167; arXiv 2606.26080",
       stage=S.implicit_progress_reward,
       fidelity=Fidelity("authors_code", "github.com/deeplearning-wisc/progress-advantage: pa/scoring.py "
                         "(per_step_progress_advantage)",
                         "authors score a step by β·(agg log π − agg log π_ref), agg = token sum (= our per-step "
                         "sum) or mean (their scripts); they score trajectories at test time, using it as a "
                         "training reward is ours")),
    _t("oprl", oprl, "r_k = β Σ_{t∈turn k} log(π_φ/π_old) (default π_φ/π_old := π_old/π_ref); "
       "A = w·norm(Σ_j γ^{j−k} r_j) + (1−w)·grpo(R)", f"{_S0} L67 (OPRL / iStar, arXiv 2509.19199)",
       stage=S.oprl,
       fidelity=Fidelity("authors_code", "github.com/Tongyi-ConvAI/Tongyi-Character: CharacterRL-iStar/istar/dp_rm.py, "
                         "istar/core_istar.py",
                         "no PRM trained: default β·log π_old/π_ref (prm='extras': a PRM's log-probs over π_old, "
                         "theirs); authors β=0.05, batch max-norm, A = RLOO(R) + w·RLOO(step r); ours "
                         "step_episode_mix")),
    _t("gdpo", gdpo, "A = whiten(Σ_k w_k (r_k − μ_{g,k})/(σ_{g,k} + ε))", f"{_S1} L5, L77, L85; verl gdpo",
       kind="multi_reward",
       stage=S.multi_reward(gdpo),
       fidelity=Fidelity("peer", f"{_VERL}: compute_gdpo_outcome_advantage",
                         "verl whitens over response tokens (token-weighted), ours over valid sequences; "
                         "singleton group: ours 0, verl r/(1+ε)")),
    _t("dara", dara, "A = whiten(Σ_k [w_k max(A_k, 0) + min(A_k, 0)]), w_k = min(5, sqrt(max ρ / ρ_k)) "
       "(ρ = active-group density)", f"{_S1} L77; authors' code github.com/zhaihaotian/DARA math/rdgdpo/advantages.py",
       kind="multi_reward",
       stage=S.multi_reward(dara),
       fidelity=Fidelity("authors_code", "github.com/zhaihaotian/DARA: math/rdgdpo/advantages.py (rdgdpo, "
                         "dara_asym)")),
    _t("sa_mrpo", sa_mrpo, "A = whiten(Σ_k w_k (1 − s_k)^γ Â_k), s_k = batch-mean normalised reward k",
       f"{_S1} L85; arXiv 2608.16072", kind="multi_reward",
       stage=S.multi_reward(sa_mrpo),
       fidelity=Fidelity("paper_formula", "arXiv 2608.16072 (SA-MRPO) Sec. 4.1 Eq. 1, Algorithm 1 (paper text; "
                         "no code released)",
                         "defaults = the paper's (γ=0.25 as its Table 1, population std, batch whitening); ours adds "
                         "ε to each std and clips s_k to [0, 1]")),
    _t("gd2po", gd2po, "A = whiten_kept(keep_i·q_g·Σ_k w_k A_{i,k}), keep = no sign conflict", f"{_S1} L5",
       kind="multi_reward",
       stage=S.multi_reward(gd2po),
       fidelity=Fidelity("authors_code", "github.com/Qwen-Applications/GD2PO: tool-calling/verl/trainer/ppo/"
                         "ray_trainer.py",
                         "authors whiten over kept tokens, ours over kept rows; sign tolerance conflict_tol=1e-6 "
                         "(authors 1e-8 on token sums); ratio_threshold selects their soft rule")),
)
