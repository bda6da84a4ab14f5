"""Filters: keep-masks, selections and rollout allocation over groups and trajectories.

Where things run:

* **jit-able** (pure JAX, static ``num_groups``, ragged groups by ``group_id``):
  ``zero_variance``, ``variance_topp``, ``vcrl``, ``negative_advantage_drop``,
  ``apply_keep`` and the ``greso`` filter (``init``/``select``/``update`` over a
  ``GresoState`` of JAX arrays; also fine eagerly on the host).
* **host** (NumPy, data-dependent sizes or text): ``void_turn``,
  ``shuffle_pairs``, ``rorecomp``, ``pilot_commit``, ``difficulty_budget``.

Every filter returns ``(keep_or_selection, stats)`` where ``stats`` holds the
statistics the decision was based on. See ``docs/filters_and_rewards.md``.
"""
from rljax._technique import Technique
from rljax.filters._stages import with_stages as _with_stages
from rljax.filters._allocation import difficulty_budget, pilot_commit
from rljax.filters._greso import Greso, GresoState, greso
from rljax.filters._selection import DEFAULT_ANSWER_PATTERN, DEFAULT_CODE_PATTERN, rorecomp, shuffle_pairs, void_turn
from rljax.filters._variance import apply_keep, negative_advantage_drop, variance_topp, vcrl, zero_variance

__all__ = [
    "zero_variance", "variance_topp", "void_turn", "greso", "Greso", "GresoState", "pilot_commit",
    "difficulty_budget", "shuffle_pairs", "rorecomp", "negative_advantage_drop", "vcrl", "apply_keep",
    "DEFAULT_CODE_PATTERN", "DEFAULT_ANSWER_PATTERN", "TECHNIQUES",
]

_S0 = "000_3e503271be254a43.txt"
_S1 = "001_5839a3671b0b4d92.txt"

TECHNIQUES = _with_stages((
    Technique("zero_variance", "filter", zero_variance, "keep_g = 1[std_g(metric) > 0]",
              "DAPO arXiv:2503.14476; verl algorithm.filter_groups"),
    Technique("variance_topp", "filter", variance_topp, "keep the ceil(p * #groups) groups with the largest reward std",
              f"{_S0} L13 (StarPO-S, unverified)"),
    Technique("void_turn", "filter", void_turn, "keep_i = prod_turns 1[code block or final answer]",
              f"{_S0} L27 (SimpleTIR)"),
    Technique("greso", "filter", greso, "admit_j ~ Bernoulli(p_kind^z_j), z_j = zero-variance streak",
              f"{_S0} L71 (GRESO, arXiv:2506.02177, interpretation)"),
    Technique("pilot_commit", "filter", pilot_commit, "n_g proportional to pilot std_g, 0 if std_g = 0, sum <= budget",
              f"{_S1} L37 (Pilot-Commit, interpretation)"),
    Technique("difficulty_budget", "filter", difficulty_budget,
              "n_j = min + largest-remainder(R * w_j / sum w), w_j = (1 - acc_j)^power",
              f"{_S1} L203 (E3, interpretation)"),
    Technique("shuffle_pairs", "filter", shuffle_pairs, "pair k-th max/min advantage per group; draw rows with p ~ |A|",
              f"{_S1} L43 (Shuffle-R1, interpretation)"),
    Technique("rorecomp", "filter", rorecomp, "priority = short-correct | long-incorrect (within-group rank)",
              f"{_S1} L163 (RoRecomp, interpretation)"),
    Technique("negative_advantage_drop", "filter", negative_advantage_drop, "keep_i = 1[A_i >= 0]",
              f"{_S1} L191 (A-LoL)"),
    Technique("vcrl", "filter", vcrl, "score_g = var_g / ((hi - lo)^2 / 4); keep score_g >= threshold",
              f"{_S1} L115 (VCRL, interpretation)"),
))
