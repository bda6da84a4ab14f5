"""Mutation check of the test suite's strength for the technique catalog (issue #23, item 3).

Each entry of ``MUTANTS`` is a hand-written, deliberate change to a technique's
core formula (a flipped sign, a dropped mask, swapped hyper-parameters, an
off-by-one on a boundary, ddof 0<->1, ...) together with the narrow test
selection that must catch it. For every mutant the runner

1. refuses to start if the source file differs from git HEAD (it never mutates
   uncommitted work),
2. checks that the original snippet occurs exactly once in the file (else the
   mutant is *stale*: the table must follow the code, it cannot silently rot),
3. writes the mutated file, runs
   ``python -m pytest -q -x -p no:cacheprovider <tests> [-k SEL]`` in a
   subprocess with a timeout, and
4. restores the original bytes and modification time in ``finally`` (also on
   Ctrl-C / SIGTERM),

and records *caught* (the tests failed), *survived* (they passed), *stale*,
*timeout* or *error* (pytest could not run, e.g. a collection error). Before
the mutants, each distinct test selection is run once on the unmutated code
(the baseline; ``--no-baseline`` skips it): a selection that fails or selects
no test would make every mutant look caught.

The subprocesses run with ``PYTHONDONTWRITEBYTECODE=1`` so no bytecode of a
mutated file is ever cached. The fast test suite does not run this script;
``tests/test_catalog_mutants.py`` only checks the table is well-formed and not
stale, and that every catalog row is either covered or listed in
``NOT_COVERED``.

Usage:
  python benchmarks/catalog_mutants.py [--list] [--technique NAME ...] [--module MODULE ...]
                                       [--timeout S] [--no-baseline] [--markdown]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
MODULES = ("advantages", "filters", "rewards", "objectives", "control", "replay", "hints")


@dataclasses.dataclass(frozen=True)
class Mutant:
  """One deliberate change to a technique's core formula.

  Attributes:
    technique: the catalog row name (``rljax.catalog()``).
    file: source file, relative to the repository root.
    original: exact snippet; must occur exactly once in ``file``.
    mutated: its replacement.
    kind: what kind of change (``sign``, ``mask``, ``swap``, ``off_by_one``, ``ddof``, ``boundary``, ...).
    tests: test files (relative to the root) to run.
    k: optional pytest ``-k`` expression.
  """
  technique: str
  file: str
  original: str
  mutated: str
  kind: str
  tests: tuple
  k: Optional[str] = None

  @property
  def ident(self) -> str:
    return f"{self.technique}:{self.kind}"


_OUT = "rljax/advantages/_outcome.py"
_TOK = "rljax/advantages/_token.py"
_MULTI = "rljax/advantages/_multi.py"
_STATE = "rljax/advantages/_stateful.py"
_T_OUT = ("tests/test_advantages_outcome.py",)
_T_TOK = ("tests/test_advantages_token.py",)
_AGT = "rljax/rewards/_agentic.py"
_T_AGT = ("tests/test_agentic_techniques.py",)
_T_MULTI = ("tests/test_advantages_multi.py",)
_VAR = "rljax/filters/_variance.py"
_SEL = "rljax/filters/_selection.py"
_ALLOC = "rljax/filters/_allocation.py"
_CURR = "rljax/filters/_curriculum.py"
_T_CURR = ("tests/test_curricula.py",)
_T_FIL = ("tests/test_filters.py",)
_SHAPE = "rljax/rewards/_shaping.py"
_VERI = "rljax/rewards/_verifiers.py"
_MATH = "rljax/rewards/_math_text.py"
_T_SHAPE = ("tests/test_rewards_shaping.py",)
_T_VERI = ("tests/test_rewards_verifiers.py",)
_CTRL = "rljax/control/_controllers.py"
_T_CTRL = ("tests/test_control.py",)
_AGG = "rljax/objectives/_aggregation.py"
_T_AGG = ("tests/test_objectives_chain.py",)
_RATIO = "rljax/objectives/_ratio.py"
_CORR = "rljax/objectives/_corrections.py"
_ENT = "rljax/objectives/_entropy.py"
_KL = "rljax/objectives/_kl.py"
_SUP = "rljax/objectives/_supervised.py"
_VAL = "rljax/objectives/_value.py"
_BUF = "rljax/replay/_buffer.py"
_RSTAGE = "rljax/replay/_stages.py"
_T_REPLAY = ("tests/test_replay.py",)
_HRULE = "rljax/hints/_rules.py"
_HSTAGE = "rljax/hints/_stages.py"
_T_HINTS = ("tests/test_hints.py",)
_T_RATIO = ("tests/test_objectives_ratio.py",)
_T_CORR = ("tests/test_objectives_corrections.py",)
_T_ENT = ("tests/test_objectives_entropy.py",)
_T_KL = ("tests/test_objectives_kl.py",)
_T_SUP = ("tests/test_objectives_supervised.py",)
_T_VAL = ("tests/test_objectives_value.py",)

M = Mutant
MUTANTS: tuple = (
    # ------------------------------------------------------------------ advantages
    M("grpo", _OUT, "adv = jnp.where(denom > 0, (r - st.mean) / jnp.where(denom > 0, denom, 1.0), 0.0) * v",
      "adv = jnp.where(denom > 0, (r + st.mean) / jnp.where(denom > 0, denom, 1.0), 0.0) * v", "sign", _T_OUT,
      "grpo"),
    M("grpo", _OUT, 'eps: float = 1e-6, std_ddof: int = 1, scale: str = "group", singleton: str = "zero"):\n'
      '  """GRPO group-normalised',
      'eps: float = 1e-6, std_ddof: int = 0, scale: str = "group", singleton: str = "zero"):\n'
      '  """GRPO group-normalised', "ddof", _T_OUT, "grpo"),
    M("dr_grpo", _OUT, 'eps=0.0, scale="none", singleton=singleton)', 'eps=0.0, scale="group", singleton=singleton)',
      "swap", _T_OUT, "grpo"),
    M("rloo", _OUT, "n / jnp.maximum(n - 1.0, 1.0) * (r - st.mean)", "n / jnp.maximum(n, 1.0) * (r - st.mean)",
      "off_by_one", _T_OUT, "rloo"),
    M("reinforce_pp", _OUT, "carry = new * m_t if reset else new * m_t + running * (1 - m_t)", "carry = new * m_t",
      "mask", _T_OUT, "reinforce_pp"),
    M("reinforce_pp", "rljax/advantages/_common.py", "eps: float = 1e-8, ddof: int = 1, shift_mean",
      "eps: float = 1e-8, ddof: int = 0, shift_mean", "ddof", _T_OUT, "reinforce_pp"),
    M("reinforce_pp_baseline", _OUT, "centred = (r - st.mean) * v", "centred = r * v", "drop_baseline", _T_OUT,
      "reinforce_pp_baseline"),
    M("remax", _OUT, "adv = returns - base[:, None] * m", "adv = returns - base[:, None]", "mask", _T_OUT, "remax"),
    M("remax", _OUT, "    adv = r - base\n", "    adv = base - r\n", "sign", _T_OUT, "remax"),
    M("gae", _OUT, "delta = r_t + gamma * next_v - v_t", "delta = r_t + lam * next_v - v_t", "swap", _T_OUT, "gae"),
    M("gae", _OUT, "last = new * m_t + (1 - m_t) * last", "last = new * m_t", "mask", _T_OUT, "gae"),
    M("qae", _OUT, "h = quantile * jnp.maximum(n - 1, 0.0)", "h = quantile * jnp.maximum(n, 0.0)", "off_by_one_linear",
      _T_OUT, "qae"),
    M("qae", _OUT, "j = jnp.clip(jnp.ceil(quantile * n - 1e-6 * n), 1,",
      "j = jnp.clip(jnp.ceil(quantile * n - 1e-6 * n) + 1, 1,", "off_by_one_inverted_cdf", _T_OUT, "qae"),
    M("passk", _OUT, "m_sorted = short[sg] - (ss * w_self + above)", "m_sorted = short[sg] - (ss * w_self - above)",
      "sign", _T_OUT, "passk"),
    M("passk", _OUT, "for m_ in range(2, k):", "for m_ in range(1, k):", "off_by_one", _T_OUT, "passk"),
    M("rank", _OUT, "centred = mid - (n + 1) / 2", "centred = mid - n / 2", "off_by_one", _T_OUT, "rank"),
    M("vote", _OUT, "adv = C.safe_div(r - r_vote[gid], denom) * v", "adv = C.safe_div(r - st.mean, denom) * v",
      "drop_anchor", _T_OUT,
      "vote"),
    M("task_normalized", _OUT, "num_tasks: Optional[int] = None, eps: float = 1e-6, std_ddof: int = 1,",
      "num_tasks: Optional[int] = None, eps: float = 1e-6, std_ddof: int = 0,", "ddof", _T_OUT, "task_normalized"),
    M("key_baseline", _OUT, 'adv, _, _ = _grpo_core(r, kid, v, nk, eps=0.0, std_ddof=0, scale="none",',
      'adv, _, _ = _grpo_core(r, kid, v, nk, eps=0.0, std_ddof=0, scale="group",', "swap", _T_OUT, "key_baseline"),
    M("role_ema_baseline", _STATE, "decay * b_old + (1 - decay) * mean", "(1 - decay) * b_old + decay * mean",
      "swap", _T_OUT, "role_ema"),
    M("role_ema_baseline", _STATE, "used = b_new if update_first else jnp.where(state.seen, b_old, mean)",
      "used = b_new", "boundary", _T_OUT, "role_ema"),
    M("hadw", _STATE, "w = scale * jnp.exp(strength * direction * (anchor - acc_g))",
      "w = scale * jnp.exp(strength * direction * (acc_g - anchor))", "sign", _T_OUT, "hadw"),
    M("difficulty_weight", _OUT, "d = 2 * (1 - acc) - 1", "d = 2 * acc - 1", "sign", _T_OUT, "difficulty_weight"),
    M("gagar", _OUT, "w = jnp.where(p, (mid / n) ** power, 1.0)", "w = jnp.where(p, ((mid - 1) / n) ** power, 1.0)",
      "off_by_one", _T_OUT, "gagar"),
    M("gagar", _OUT, "adv = jnp.where(ok, a * w * total / jnp.where(ok, wtotal, 1.0), a) * v",
      "adv = jnp.where(ok, a * w, a) * v", "drop_norm", _T_OUT, "gagar"),
    M("uniqueness", _OUT, "raw = jnp.where(c, jnp.maximum(size, 1.0) ** (-alpha), 0.0)",
      "raw = jnp.where(c, jnp.maximum(size + 1.0, 1.0) ** (-alpha), 0.0)", "off_by_one", _T_OUT, "uniqueness"),
    M("canon", _OUT, "adv = C.safe_div(intra_coef * (r - mu_s) + inter_coef * (mu_s - st.mean)",
      "adv = C.safe_div(inter_coef * (r - mu_s) + intra_coef * (mu_s - st.mean)", "swap", _T_OUT, "canon"),
    M("segment", _TOK, "inside = (seg >= 0) & (seg < k)", "inside = (seg >= 0) & (seg <= k)", "boundary", _T_TOK,
      "segment"),
    M("outcome_conditioned_baseline", _TOK, "st = G.row_stats(r, key, v, b, ddof=std_ddof)",
      "st = G.row_stats(r, gid, v, b, ddof=std_ddof)", "drop_condition", _T_TOK, "outcome_conditioned"),
    M("tempo", _TOK, "(v_after - v_before) / safe[:, None]", "(v_before - v_after) / safe[:, None]", "sign", _T_TOK,
      "tempo"),
    M("step_episode_mix", _TOK, "adv = step_weight * step_tok + w_ep * ep_tok",
      "adv = w_ep * step_tok + step_weight * ep_tok", "swap", _T_TOK, "step_episode_mix"),
    M("step_episode_mix", _TOK, "    new = r_m + gamma * running\n", "    new = r_m + gamma * gamma * running\n",
      "discount", _T_TOK, "step_episode_mix"),
    M("sign_preserving_modulation", _TOK, "factor = jnp.where(inside, 1 + lam * eps_w * jnp.tanh(arg), 1.0)",
      "factor = jnp.where(inside, 1 - lam * eps_w * jnp.tanh(arg), 1.0)", "sign", _T_TOK, "sign_preserving"),
    M("gdpo", _MULTI, "  total = per @ w\n  adv = C.masked_whiten(total, v,",
      "  total = per @ jnp.ones_like(w)\n  adv = C.masked_whiten(total, v,", "drop_weights", _T_MULTI, "gdpo"),
    M("sa_mrpo", _MULTI, "w = w0 * (1.0 - sat) ** gamma\n", "w = w0 * sat ** gamma\n", "sign", _T_MULTI, "sa_mrpo"),
    M("gd2po", _MULTI, "conflict = pos & neg", "conflict = pos & ~neg", "sign", _T_MULTI, "gd2po"),
    M("gd2po", _MULTI, "total = kf * q * (per @ w)", "total = kf * (per @ w)", "drop_weight", _T_MULTI, "gd2po"),
    # ------------------------------------------------------------------ filters
    M("zero_variance", _VAR, "spread = (st.max - st.min) > atol", "spread = (st.max - st.min) >= atol", "boundary",
      _T_FIL, "zero_variance"),
    M("variance_topp", "rljax/_groups.py", "return present & (rank.astype(jnp.float32) < k)",
      "return present & (rank.astype(jnp.float32) <= k)", "off_by_one", _T_FIL, "variance_topp"),
    M("variance_topp", "rljax/_groups.py", "order = jnp.argsort(-key, stable=True)",
      "order = jnp.argsort(key, stable=True)", "sign", _T_FIL, "variance_topp"),
    M("void_turn", _SEL, "not (code_re.search(turn) or ans_re.search(turn))",
      "not (code_re.search(turn) and ans_re.search(turn))", "or_and", _T_FIL, "void_turn"),
    M("greso", "rljax/filters/_greso.py", "jnp.maximum(base ** z.astype(jnp.float32), admit_floor)",
      "jnp.maximum(base ** (z + 1).astype(jnp.float32), admit_floor)", "off_by_one", _T_FIL, "greso"),
    M("greso", "rljax/filters/_greso.py", "base = jnp.where(state.kind[ids] == EASY, state.p_easy, state.p_hard)",
      "base = jnp.where(state.kind[ids] == EASY, state.p_hard, state.p_easy)", "swap", _T_FIL, "greso"),
    M("pilot_commit", _ALLOC, 'w = np.where(kept, s if rule == "proportional" else 1.0, 0.0)',
      'w = np.where(kept, s * s if rule == "proportional" else 1.0, 0.0)', "std_var", _T_FIL, "pilot_commit"),
    M("pilot_commit", _ALLOC, "(r[v] - mean[gid[v]]) ** 2, minlength=num_groups) / np.maximum(cnt, 1)",
      "(r[v] - mean[gid[v]]) ** 2, minlength=num_groups) / np.maximum(cnt - 1, 1)", "ddof", _T_FIL, "pilot_commit"),
    M("difficulty_budget", _ALLOC, "w = (1.0 - acc) ** float(power) + float(smoothing)",
      "w = acc ** float(power) + float(smoothing)", "sign", _T_FIL, "difficulty_budget"),
    M("shuffle_pairs", _SEL, "not adv[hi] - adv[lo] > min_gap", "not adv[hi] - adv[lo] >= min_gap", "boundary",
      _T_FIL, "shuffle_pairs"),
    M("shuffle_pairs", _SEL, "weight = np.abs(adv[selected])", "weight = np.ones_like(adv[selected])",
      "drop_weight", _T_FIL, "shuffle_pairs"),
    M("rorecomp", _SEL, 'rank = np.searchsorted(sorted_len, length[idx], side="left")',
      'rank = np.searchsorted(sorted_len, length[idx], side="right")', "boundary", _T_FIL, "rorecomp"),
    M("rorecomp", _SEL, "k = math.ceil(fraction * idx.size - 1e-9)", "k = math.floor(fraction * idx.size - 1e-9)",
      "off_by_one", _T_FIL, "rorecomp"),
    M("negative_advantage_drop", _VAR, "ok = adv >= 0 if keep_zero else adv > 0",
      "ok = adv >= 0 if keep_zero else adv >= 0", "boundary", _T_FIL, "negative_advantage_drop"),
    M("vcrl", _VAR, "(st.std * st.std) / ((hi - lo) ** 2 / 4.0)", "(st.std * st.std) / ((hi - lo) ** 2 / 2.0)",
      "constant", _T_FIL, "vcrl"),
    M("vcrl", _VAR, "group_keep = present & (score >= threshold)", "group_keep = present & (score > threshold)",
      "boundary", _T_FIL, "vcrl"),
    # ------------------------------------------------------------------ rewards
    M("math_answer", _MATH, "if any(ch.isdigit() for ch in m.group(0))]\n  return found[-1] if found else None",
      "if any(ch.isdigit() for ch in m.group(0))]\n  return found[0] if found else None", "first_number", _T_VERI,
      "math_answer"),
    M("math_answer", _MATH, 'idx = max(s.rfind("\\\\boxed"), s.rfind("\\\\fbox"))',
      'idx = max(s.find("\\\\boxed"), s.find("\\\\fbox"))', "first_boxed", _T_VERI, "math_answer"),
    M("math_answer", _MATH, "rel_tol=rel_tol, abs_tol=abs_tol)", "rel_tol=abs_tol, abs_tol=rel_tol)", "swap",
      _T_VERI, "math_answer"),
    M("format_regex", _VERI, "matcher = getattr(compiled, mode)", 'matcher = getattr(compiled, "search")',
      "anchor", _T_VERI, "format_regex"),
    M("code_tests", "rljax/rewards/_code.py", 'out[i] = float(res.ok and res.stdout.rstrip("\\n").endswith(marker))',
      "out[i] = float(res.ok)", "no_marker", ("tests/test_sandbox.py",), "code_tests_reward"),
    M("overlong_penalty", _SHAPE, "exceed = safe_len - float(max_len - buffer_len)",
      "exceed = safe_len - float(max_len - buffer_len + 1)", "off_by_one", _T_SHAPE, "overlong"),
    M("overlong_penalty", _SHAPE, "penalty = jnp.maximum(penalty, -factor)", "penalty = jnp.maximum(penalty, -1.0)",
      "swap", _T_SHAPE, "overlong"),
    M("length_penalty", _SHAPE, "r = jnp.where(correct, lam, jnp.minimum(lam, 0.0))",
      "r = jnp.where(correct, lam, jnp.maximum(lam, 0.0))", "min_max", _T_SHAPE, "length_penalty"),
    M("length_penalty", _SHAPE, "lam = jnp.where(flat, 0.0, 0.5 - (lengths - lo)", "lam = jnp.where(flat, 0.0, 0.5 - (hi - lengths)",
      "sign", _T_SHAPE, "length_penalty"),
    M("rubric_dropout", _SHAPE, "kept_w = w[None, :] * (keep & applicable_f)", "kept_w = w[None, :] * keep", "mask",
      _T_SHAPE, "rubric_dropout"),
    M("rubric_dropout", _SHAPE, "return jax.random.bernoulli(k, 1.0 - p, (c,))",
      "return jax.random.bernoulli(k, p, (c,))", "swap", _T_SHAPE, "rubric_dropout"),
    M("rubric_dropout", _SHAPE, "k = jax.random.fold_in(key, gid)", "k = jax.random.fold_in(key, 0)",
      "drop_group", _T_SHAPE, "rubric_dropout"),
    M("prm_clip", _SHAPE, "jnp.minimum(r - eta, 0.0), 0.0)", "jnp.minimum(r + eta, 0.0), 0.0)", "sign", _T_SHAPE,
      "prm_clip"),
    M("prm_delta", _SHAPE, "out = jnp.where(m, r0 - nxt_val, 0.0)", "out = jnp.where(m, r0 + nxt_val, 0.0)", "sign",
      _T_SHAPE, "prm_delta"),
    M("prm_delta", _SHAPE, "nxt = jnp.concatenate([nxt_ge[:, 1:], jnp.full((r.shape[0], 1), s, jnp.int32)], axis=1)",
      "nxt = jnp.concatenate([nxt_ge[:, 2:], jnp.full((r.shape[0], 2), s, jnp.int32)], axis=1)", "off_by_one",
      _T_SHAPE, "prm_delta"),
    M("correctness_gated", _SHAPE, "r = outcome + jnp.where(gate & finite, weight",
      "r = outcome + jnp.where(finite, weight", "mask", _T_SHAPE, "correctness_gated"),
    M("gaussian_reward", _SHAPE, "jnp.exp(-(err * err) / (2.0 * sigma * sigma))",
      "jnp.exp(-(err * err) / (sigma * sigma))", "constant", _T_SHAPE, "gaussian"),
    M("clipped_linear_reward", _SHAPE, "lin = scale * jnp.where(finite, d, 0.0) + offset",
      "lin = scale * (jnp.where(finite, d, 0.0) + offset)", "precedence", _T_SHAPE, "clipped_linear"),
    M("clipped_linear_reward", _SHAPE, "r = jnp.where(finite, jnp.clip(lin, low, high), low)",
      "r = jnp.where(finite, jnp.minimum(lin, high), low)", "drop_clip", _T_SHAPE, "clipped_linear"),
    M("composite", "rljax/rewards/_safe.py", "total += wk * matrix[:, k].astype(np.float64)",
      "total += matrix[:, k].astype(np.float64)", "drop_weight", _T_VERI, "composite"),
    # ------------------------------------------------------------------ control
    M("adaptive_kl", _CTRL, "state.beta * (1.0 + err * _f32(n_steps) / self.horizon)",
      "state.beta * (1.0 - err * _f32(n_steps) / self.horizon)", "sign", _T_CTRL, "adaptive_kl"),
    M("adaptive_kl", _CTRL, "err = jnp.clip(_f32(kl) / self.target - 1.0, -self.clip, self.clip)",
      "err = _f32(kl) / self.target - 1.0", "drop_clip", _T_CTRL, "adaptive_kl"),
    M("entropic", _CTRL, "u = self.kp * err + self.ki * integral", "u = self.ki * err + self.kp * integral", "swap",
      _T_CTRL, "entropic"),
    M("entropic", _CTRL, "pos = jnp.clip(1.0 - u, self.w_min, self.w_max)",
      "pos = jnp.clip(1.0 + u, self.w_min, self.w_max)", "sign", _T_CTRL, "entropic"),
    M("bapo", _CTRL, "neg = (a < 0) & (r >= lo)\n  mag", "neg = (a < 0) & (r <= lo)\n  mag", "boundary", _T_CTRL,
      "bapo"),
    M("bapo", _CTRL, "mag = jnp.abs(a) * r * m", "mag = jnp.abs(a) * m", "drop_ratio", _T_CTRL, "bapo"),
    M("temperature_control", _CTRL, "jnp.exp(self.kappa * (self.target_entropy - _f32(entropy)))",
      "jnp.exp(self.kappa * (_f32(entropy) - self.target_entropy))", "sign", _T_CTRL, "temperature"),
    # ------------------------------------------------------------------ objectives: aggregation rows only
    M("token_mean", _AGG, "  return jnp.sum(loss * mask), jnp.sum(mask)\n", "  return jnp.sum(loss), jnp.sum(mask)\n",
      "mask", _T_AGG, "aggregation_matches_numpy"),
    M("token_sum", _AGG, "return jnp.sum(loss * mask), jnp.ones((), mask.dtype)",
      "return jnp.sum(loss), jnp.ones((), mask.dtype)", "mask", _T_AGG, "aggregation_matches_numpy"),
    M("seq_mean_token_sum", _AGG, "  return jnp.sum(loss * mask), jnp.sum(has)\n",
      "  return jnp.sum(loss * mask), jnp.asarray(loss.shape[0], jnp.float32)\n", "mask", _T_AGG,
      "aggregation_matches_numpy"),
    M("seq_mean_token_mean", _AGG, "per_seq = jnp.sum(loss * mask, axis=1) / jnp.maximum(count, 1.0)",
      "per_seq = jnp.sum(loss * mask, axis=1) / jnp.maximum(count + 1.0, 1.0)", "off_by_one", _T_AGG,
      "aggregation_matches_numpy"),
    M("seq_mean_token_sum_norm", _AGG, "jnp.asarray(loss.shape[0] * norm, mask.dtype)",
      "jnp.asarray(norm, mask.dtype)", "drop_batch", _T_AGG, "aggregation_matches_numpy"),
    # ------------------------------------------------------------------ second mutants (masks, options)
    # (dropping the final ``* v`` of _grpo_core is an equivalent mutant: ``prepare`` zeroes invalid rewards and
    # routes them to an empty segment, so their advantage is 0 anyway; the batch-scale swap replaced it)
    M("grpo", _OUT, "denom = jnp.broadcast_to(bstd + eps, r.shape)", "denom = jnp.broadcast_to(st.std + eps, r.shape)",
      "batch_scale", _T_OUT, "grpo"),
    M("reinforce_pp_baseline", _OUT, "m = jnp.asarray(mask).astype(r.dtype) * v[:, None]",
      "m = jnp.asarray(mask).astype(r.dtype)", "mask", _T_OUT, "reinforce_pp_baseline"),
    M("rank", _OUT, "mid = rk.less.astype(r.dtype) + (rk.equal.astype(r.dtype) + 1) / 2\n  centred",
      "mid = rk.less.astype(r.dtype) + (rk.equal.astype(r.dtype) - 1) / 2\n  centred", "ties", _T_OUT, "rank"),
    M("rank", _OUT, "adv = centred / jnp.maximum((n - 1) / 2, 0.5)", "adv = centred / jnp.maximum(n / 2, 0.5)",
      "off_by_one_scale", _T_OUT, "rank"),
    M("vote", _OUT, 'num_groups: Optional[int] = None, eps: float = 1e-6, std_ddof: int = 1, scale: str = "group",\n'
      '         form', 'num_groups: Optional[int] = None, eps: float = 1e-6, std_ddof: int = 0, scale: str = "group",\n'
      '         form', "ddof", _T_OUT, "vote"),
    M("hadw", _STATE, "new_anchor = jnp.where(state.seen, decay * anchor + (1 - decay) * acc_b, acc_b)",
      "new_anchor = jnp.where(state.seen, (1 - decay) * anchor + decay * acc_b, acc_b)", "swap", _T_OUT, "hadw"),
    M("difficulty_weight", _OUT, "else jnp.exp(strength * d)", "else jnp.exp(-strength * d)", "sign_exp", _T_OUT,
      "difficulty_weight"),
    M("uniqueness", _OUT, "w = jnp.where(c, raw / jnp.where(c, mean_w, 1.0), 1.0)", "w = jnp.where(c, raw, 1.0)",
      "drop_norm", _T_OUT, "uniqueness"),
    M("canon", _OUT, "stratum = jnp.sign(mid - (n + 1) / 2)", "stratum = jnp.sign(mid - n / 2)", "off_by_one",
      _T_OUT, "canon"),
    M("tempo", _TOK, "gate = gate & ~first", "gate = gate & first", "mask", _T_TOK, "tempo"),
    M("sign_preserving_modulation", _TOK, "tv, gid, ng, eps=eps, ddof=0)", "tv, gid, ng, eps=eps, ddof=1)", "ddof",
      _T_TOK, "sign_preserving"),
    M("gdpo", _MULTI, "adv = C.masked_whiten(total, v, eps=whiten_eps) if whiten else total * v",
      "adv = total * v if whiten else total * v", "drop_whiten", _T_MULTI, "gdpo"),
    M("sa_mrpo", _MULTI, "sat = jnp.sum(rn * v[:, None], axis=0) / jnp.maximum(jnp.sum(v), 1.0)",
      "sat = jnp.sum(rn * v[:, None], axis=0) / jnp.maximum(jnp.sum(v) + 1.0, 1.0)", "off_by_one", _T_MULTI,
      "sa_mrpo"),
    M("zero_variance", _VAR, "(single if keep_singletons else False)", "(single if not keep_singletons else False)",
      "flag", _T_FIL, "zero_variance"),
    M("void_turn", _SEL, "keep = void == 0", "keep = void <= 1", "off_by_one", _T_FIL, "void_turn"),
    M("difficulty_budget", _ALLOC, "n = lo + extra", "n = extra", "drop_min", _T_FIL, "difficulty_budget"),
    M("negative_advantage_drop", _VAR, "keep = valid & finite & ok", "keep = finite & ok", "mask", _T_FIL,
      "negative_advantage_drop"),
    M("format_regex", _VERI, "if text is None or (max_chars is not None and len(text) > max_chars):",
      "if text is None or (max_chars is not None and len(text) >= max_chars):", "boundary", _T_VERI,
      "format_regex"),
    M("correctness_gated", _SHAPE, "weight * jnp.where(finite, process, 0.0)", "jnp.where(finite, process, 0.0)",
      "drop_weight", _T_SHAPE, "correctness_gated"),
    M("gaussian_reward", _SHAPE, "(2.0 * sigma * sigma)), invalid_value)", "(2.0 * sigma * sigma)), 0.0)",
      "drop_option", _T_SHAPE, "gaussian"),
    M("prm_clip", _SHAPE, "out = jnp.where(m & finite, jnp.minimum(r - eta, 0.0), 0.0)",
      "out = jnp.where(finite, jnp.minimum(r - eta, 0.0), 0.0)", "mask", _T_SHAPE, "prm_clip"),
    M("temperature_control", _CTRL, "TemperatureState(temperature=jnp.clip(t, self.t_min, self.t_max))",
      "TemperatureState(temperature=jnp.minimum(t, self.t_max))", "drop_clip", _T_CTRL, "temperature"),
    M("seq_mean_token_sum_norm", _AGG, "norm = loss.shape[1] if max_len is None else max_len",
      "norm = loss.shape[1]", "drop_option", _T_AGG, "aggregation_matches_numpy"),
    # ------------------------------------------------------------------ rows added by the second pass
    M("dara", _MULTI, "w = jnp.where(live, jnp.sqrt(jnp.max(rho) / safe), 1.0)",
      "w = jnp.where(live, jnp.max(rho) / safe, 1.0)", "drop_sqrt", _T_MULTI, "dara"),
    M("dara", _MULTI, "combined = jnp.maximum(per, 0.0) @ w + jnp.sum(jnp.minimum(per, 0.0), axis=1)",
      "combined = per @ w", "symmetric", _T_MULTI, "dara"),
    M("grpo_lambda", _SHAPE, "r = jnp.where(on[group_id], penalized, correct01)",
      "r = jnp.where(on[group_id], correct01, penalized)", "swap", _T_SHAPE, "grpo_lambda"),
    M("grpo_lambda", _SHAPE, "on = present & (st.mean >= threshold)", "on = present & (st.mean > threshold)",
      "boundary", _T_SHAPE, "grpo_lambda"),
    M("exact_match", _VERI, 'return float(answer in {normalize_text(r, normalize) for r in refs_i} - {""})',
      'return float(answer in {normalize_text(r, normalize) for r in refs_i[:1]} - {""})', "first_reference", _T_VERI,
      "exact_match"),
    M("exact_match", _VERI, "    answer = normalize_text(answer, normalize)\n",
      "    answer = answer.strip()\n", "drop_normalize", _T_VERI, "exact_match"),
    M("implicit_progress_reward", _TOK, "rew = jax.lax.stop_gradient(jnp.where(m, beta * diff, 0.0))",
      "rew = jax.lax.stop_gradient(jnp.where(m, diff, 0.0))", "drop_beta", _T_TOK, "implicit_progress"),
    M("implicit_progress_reward", _TOK, "diff = jnp.where(m, jnp.asarray(logp) - jnp.asarray(logp_ref), 0.0)",
      "diff = jnp.where(m, jnp.asarray(logp_ref) - jnp.asarray(logp), 0.0)", "sign", _T_TOK, "implicit_progress"),
    # ------------------------------------------------------------------ objectives: ratio terms
    M("ppo_clip", _RATIO, "loss = jnp.maximum(-adv * ratio, -adv * jnp.clip(ratio, lo, hi))",
      "loss = jnp.minimum(-adv * ratio, -adv * jnp.clip(ratio, lo, hi))", "min_max", _T_RATIO, "ppo_clip"),
    M("ppo_clip", _RATIO, "loss = jnp.where(adv < 0, jnp.minimum(loss, -adv * dual_clip), loss)",
      "loss = jnp.where(adv > 0, jnp.minimum(loss, -adv * dual_clip), loss)", "sign", _T_RATIO, "ppo_clip"),
    M("reinforce", _RATIO, "log_w = jnp.where(mask > 0, jnp.clip(sg(logp) - behav,",
      "log_w = jnp.where(mask > 0, jnp.clip(behav - sg(logp),", "sign", _T_RATIO, "reinforce"),
    M("gpg", _RATIO, "loss = -sg(batch.advantages.astype(dtype)) * logp",
      "loss = sg(batch.advantages.astype(dtype)) * logp", "sign", _T_RATIO, "gpg"),
    M("gspo", _RATIO, "log_s = jnp.clip(U.seq_mean(log_ratio, mask), -LOG_RATIO_CLAMP, SEQ_LOG_RATIO_MAX)",
      "log_s = jnp.clip(U.seq_sum(log_ratio, mask), -LOG_RATIO_CLAMP, SEQ_LOG_RATIO_MAX)", "sum_mean", _T_RATIO,
      "gspo"),
    M("gspo_token", _RATIO, "log_s = jnp.minimum(logp - sg(logp) + log_s_seq, SEQ_LOG_RATIO_MAX)",
      "log_s = jnp.minimum(log_s_seq, SEQ_LOG_RATIO_MAX)", "drop_token_grad", _T_RATIO, "gspo_token"),
    M("gmpo", _RATIO, "lr = sgn * jnp.minimum(sgn * log_ratio, sgn * clipped)",
      "lr = sgn * jnp.maximum(sgn * log_ratio, sgn * clipped)", "min_max", _T_RATIO, "gmpo"),
    M("segment_ratio", _RATIO, "log_rho = jnp.clip(U.segment_mean(log_ratio, mask, ids, n),",
      "log_rho = jnp.clip(U.segment_mean(log_ratio, mask, jnp.zeros_like(ids), n),", "drop_segments", _T_RATIO,
      "segment_ratio"),
    M("cispo", _RATIO, "    w = jnp.minimum(ratio, hi)\n", "    w = ratio\n", "drop_clip", _T_RATIO, "cispo"),
    M("sapo", _RATIO, "tau = jnp.where(adv > 0, tau_pos, tau_neg)", "tau = jnp.where(adv > 0, tau_neg, tau_pos)",
      "swap", _T_RATIO, "sapo"),
    M("cpgd", _RATIO, "pg = jnp.maximum(-adv * log_ratio, -adv * jnp.clip(log_ratio, lo, hi))",
      "pg = jnp.maximum(-adv * log_ratio, -adv * jnp.clip(log_ratio, -hi, hi))", "bound", _T_RATIO, "cpgd"),
    M("cpgd", _RATIO, "drift = jnp.exp(log_ratio) - 1.0 - log_ratio", "drift = jnp.exp(log_ratio) - 1.0 + log_ratio",
      "sign", _T_RATIO, "cpgd"),
    M("pspo", _RATIO, "smoothed = (1.0 - alpha) * jnp.exp(log_ratio) + alpha",
      "smoothed = alpha * jnp.exp(log_ratio) + (1.0 - alpha)", "swap", _T_RATIO, "pspo"),
    M("decoupled_ppo", _RATIO, "log_w = jnp.where(mask > 0, jnp.clip(prox - behav,",
      "log_w = jnp.where(mask > 0, jnp.clip(behav - prox,", "sign", _T_RATIO, "decoupled_ppo"),
    M("decoupled_ppo", _RATIO, "keep = (w <= behavior_cap).astype(w.dtype)", "keep = (w >= behavior_cap).astype(w.dtype)",
      "boundary", _T_RATIO, "decoupled_ppo"),
    # ------------------------------------------------------------------ objectives: corrections
    M("tis", _CORR, "    w = jnp.minimum(raw, threshold)\n", "    w = raw\n", "drop_truncation", _T_CORR, "tis"),
    M("tis", _CORR, "agg = jnp.broadcast_to(U.seq_sum(log_k, mask)[:, None], log_k.shape)",
      "agg = jnp.broadcast_to(U.seq_mean(log_k, mask)[:, None], log_k.shape)", "sum_mean", _T_CORR, "tis"),
    M("mis", _CORR, "keep = ((k >= lower) & (k <= upper)).astype(mask.dtype)",
      "keep = ((k >= lower) | (k <= upper)).astype(mask.dtype)", "and_or", _T_CORR, "mis"),
    M("icepop", _CORR, "inner = mis(alpha, beta, level=\"token\", reweight=reweight,",
      "inner = mis(alpha, beta, level=\"token\", reweight=False,", "drop_reweight", _T_CORR, "icepop"),
    M("divergence_rejection", _CORR, "  return jnp.exp(log_k) - 1.0 - log_k\n",
      "  return jnp.exp(log_k) - 1.0 + log_k\n", "sign", _T_CORR, "divergence_rejection"),
    M("divergence_rejection", _CORR, "reject = (jnp.abs(stat) > hi) if est == \"k1\" else (stat > hi)",
      "reject = (stat > hi) if est == \"k1\" else (stat > hi)", "drop_abs", _T_CORR, "divergence_rejection"),
    # ------------------------------------------------------------------ objectives: entropy
    M("entropy_bonus", _ENT, "return -c * ent, {", "return c * ent, {", "sign", _T_ENT, "entropy_bonus"),
    M("erc", _ENT, "loss = jnp.where(out_of_band, jax.lax.stop_gradient(loss), loss)",
      "loss = jnp.where(below, jax.lax.stop_gradient(loss), loss)", "drop_high", _T_ENT, "erc"),
    M("clip_cov", _ENT, "cand = (mask > 0) & ~clipped & (cov > clip_cov_lb)", "cand = (mask > 0) & (cov > clip_cov_lb)",
      "mask", _T_ENT, "clip_cov"),
    M("kl_cov", _ENT, "abs_log_r = jnp.sign(log_r) * log_r", "abs_log_r = log_r", "drop_abs", _T_ENT, "kl_cov"),
    M("kl_cov", _ENT, "return (adv - _masked_mean(adv, mask)) * (logp - _masked_mean(logp, mask))",
      "return adv * (logp - _masked_mean(logp, mask))", "drop_centring", _T_ENT, "kl_cov"),
    M("top_entropy_mask", _ENT, "threshold = masked_quantile(ent, mask, 1.0 - jnp.asarray(rho, jnp.float32))",
      "threshold = masked_quantile(ent, mask, jnp.asarray(rho, jnp.float32))", "complement", _T_ENT,
      "top_entropy_mask"),
    # ------------------------------------------------------------------ objectives: KL
    M("kl_penalty", _KL, "  value = jnp.exp(neg) - neg - 1.0\n", "  value = jnp.exp(neg) + neg - 1.0\n", "sign",
      _T_KL, "kl_penalty"),
    M("kl_penalty", _KL, "    return b * kl, metrics\n", "    return kl, metrics\n", "drop_beta", _T_KL, "kl_penalty"),
    M("kl_in_reward", _KL, "return scores - b * kl, {", "return scores + b * kl, {", "sign", _T_KL, "kl_in_reward"),
    M("kl_in_reward", _KL, "last = jnp.max(jnp.where(m > 0, idx[None, :], -1), axis=1)",
      "last = jnp.min(jnp.where(m > 0, idx[None, :], shape[1]), axis=1)", "first_token", _T_KL, "kl_in_reward"),
    M("rpg", _KL, "div = w * log_q if normalized else w * log_q - w + w_ref",
      "div = log_q if normalized else w * log_q - w + w_ref", "drop_weight", _T_KL, "rpg"),
    M("rpg", _KL, "coef = wt * (log_q + 1.0) if normalized else wt * log_q",
      "coef = wt * log_q if normalized else wt * log_q", "drop_constant", _T_KL, "rpg"),
    # ------------------------------------------------------------------ objectives: supervised
    M("sft_nll", _SUP, "return -c * logp, {", "return -logp, {", "drop_coef", _T_SUP, "sft_nll"),
    M("gft", _SUP, "coef = jnp.where(rectified, p, 1.0)", "coef = jnp.where(rectified, 1.0, p)", "swap", _T_SUP,
      "gft"),
    M("opd", _SUP, "diff = _sg(logp - teacher)", "diff = _sg(teacher - logp)", "sign", _T_SUP, "opd"),
    M("dpo", _SUP, "sign = jnp.where(chosen, 1.0, -1.0)", "sign = jnp.where(chosen, -1.0, 1.0)", "sign", _T_SUP,
      "dpo"),
    M("dpo", _SUP, "pair_loss = -(1.0 - eps) * jax.nn.log_sigmoid(z) - eps * jax.nn.log_sigmoid(-z)",
      "pair_loss = -(1.0 - eps) * jax.nn.log_sigmoid(z) - eps * jax.nn.log_sigmoid(z)", "sign_smoothing", _T_SUP,
      "dpo"),
    # (``a_seq > 0`` -> ``>= 0`` is equivalent: a kept zero-advantage sequence contributes ``0 * w * logp``)
    M("alol", _SUP, "a_seq = _seq_sum(adv, mask) / jnp.maximum(n, 1.0)", "a_seq = _seq_sum(adv, mask)",
      "drop_mean", _T_SUP, "alol"),
    M("alol", _SUP, "w = jnp.clip(jnp.exp(jnp.clip(log_r, -20.0, 20.0)), 1.0 - e, 1.0 + e)",
      "w = jnp.exp(jnp.clip(log_r, -20.0, 20.0))", "drop_clip", _T_SUP, "alol"),
    M("entropy_gated_contrastive", _SUP, "loss = gate * jnp.where(correct[:, None], -logp, neg)",
      "loss = gate * jnp.where(correct[:, None], neg, -logp)", "swap", _T_SUP, "entropy_gated"),
    M("entropy_gated_contrastive", _SUP, "gate = ((ent >= threshold) & (mask > 0)).astype(jnp.float32)",
      "gate = ((ent <= threshold) & (mask > 0)).astype(jnp.float32)", "sign", _T_SUP, "entropy_gated"),
    M("delta_logp_reweight", _SUP, "return 1.0 + jnp.asarray(c, dtype) * q",
      "return 1.0 + jnp.asarray(c, dtype) * p", "complement", _T_SUP, "delta_logp"),
    M("delta_logp_reweight", _SUP, "w = jnp.where(norm > 0, w / jnp.where(norm > 0, norm, 1.0), 1.0)",
      "w = jnp.where(norm > 0, w, 1.0)", "drop_norm", _T_SUP, "delta_logp"),
    # ------------------------------------------------------------------ objectives: value
    M("value_loss", _VAL, "per_token, clipped = jnp.maximum(err, err_clip), err_clip > err",
      "per_token, clipped = jnp.minimum(err, err_clip), err_clip > err", "min_max", _T_VAL, None),
    M("value_loss", _VAL, "return jnp.asarray(coef).astype(jnp.promote_types(per_token.dtype, jnp.float32)) * 0.5 * "
      "per_token, metrics",
      "return jnp.asarray(coef).astype(jnp.promote_types(per_token.dtype, jnp.float32)) * per_token, metrics",
      "constant", _T_VAL, None),
    # ------------------------------------------------------------------ second pass: second mutants
    M("reinforce", _RATIO, "w = jnp.minimum(w, max_weight)", "w = jnp.maximum(w, max_weight)", "min_max", _T_RATIO,
      "reinforce"),
    M("gspo_token", _RATIO, "log_s_seq = _seq_broadcast(sg(U.seq_mean(log_ratio, mask)), shape)",
      "log_s_seq = _seq_broadcast(sg(U.seq_sum(log_ratio, mask)), shape)", "sum_mean", _T_RATIO, "gspo_token"),
    M("gmpo", _RATIO, "adv_bar = _seq_broadcast(U.seq_mean(adv, m), shape)",
      "adv_bar = _seq_broadcast(U.seq_sum(adv, m), shape)", "sum_mean", _T_RATIO, "gmpo"),
    M("cispo", _RATIO, "w = jnp.maximum(w, 1.0 - eps_low)", "w = jnp.maximum(w, 1.0 + eps_low)", "sign", _T_RATIO,
      "cispo"),
    M("sapo", _RATIO, "gate = jax.nn.sigmoid(tau * (ratio - 1.0)) * (4.0 / tau)",
      "gate = jax.nn.sigmoid(tau * (ratio - 1.0)) * 4.0", "drop_scale", _T_RATIO, "sapo"),
    M("pspo", _RATIO, "loss, low, high, _ = ppo_clip_loss(smoothed, adv, clip_eps, clip_eps)",
      "loss, low, high, _ = ppo_clip_loss(jnp.exp(log_ratio), adv, clip_eps, clip_eps)", "drop_smoothing",
      _T_RATIO, "pspo"),
    M("tis", _CORR, "      w = jnp.maximum(w, lower)\n", "      w = jnp.minimum(w, lower)\n", "min_max", _T_CORR, "tis"),
    M("mis", _CORR, "w = k if reweight else jnp.ones_like(k)", "w = jnp.ones_like(k)", "drop_reweight", _T_CORR,
      "mis"),
    M("icepop", _CORR, "inner = mis(alpha, beta, level=\"token\"",
      "inner = mis(alpha, beta, level=\"geometric\"", "level", _T_CORR, "icepop"),
    M("divergence_rejection", _CORR, "reject = (stat < lo) | (stat > hi)", "reject = (stat < lo) & (stat > hi)",
      "or_and", _T_CORR, "divergence_rejection"),
    M("entropy_bonus", _ENT, "return -c * ent, {**_entropy_metric", "return -ent, {**_entropy_metric", "drop_coef", _T_ENT, "entropy_bonus"),
    M("erc", _ENT, "above = ratio >= jnp.asarray(high).astype(dt)", "above = ratio >= jnp.asarray(low).astype(dt)",
      "swap", _T_ENT, "erc"),
    M("clip_cov", _ENT, " & (cov > clip_cov_lb) & (cov < clip_cov_ub)", " & (cov > clip_cov_lb)", "drop_bound",
      _T_ENT, "clip_cov"),
    M("top_entropy_mask", _ENT, "return (ent >= threshold) & (mask > 0), threshold",
      "return (ent > threshold) & (mask > 0), threshold", "boundary", _T_ENT, "top_entropy_mask"),
    M("gft", _SUP, "coef = jnp.minimum(1.0, p / t)", "coef = jnp.minimum(1.0, p)", "drop_tau", _T_SUP, "gft"),
    M("opd", _SUP, "return c * diff * jnp.exp(log_w), metrics", "return diff * jnp.exp(log_w), metrics",
      "drop_coef", _T_SUP, "opd"),
    M("gpg", _RATIO, "logp = jnp.where(mask > 0, out.logp.astype(dtype), 0.0)\n    loss = -sg(",
      "logp = jnp.where(mask > 0, out.logp.astype(dtype), 0.0)\n    loss = -0.5 * sg(", "scale", _T_RATIO, "gpg"),
    # replay buffers (rljax/replay): the selection rules and ExGRPO's mixed objective
    M("exgrpo_policy", _RATIO, "shaped = -adv * ratio / (ratio + beta)", "shaped = -adv * ratio", "drop_shaping",
      _T_REPLAY, "exgrpo_policy"),
    M("exgrpo_policy", _RATIO, "loss = jnp.where(rep, shaped, fresh)", "loss = jnp.where(rep, fresh, shaped)",
      "swap", _T_REPLAY, "exgrpo_policy"),
    M("exgrpo", _BUF, "np.exp(-0.5 * ((centers - mu) / sigma) ** 2)", "np.exp(-0.5 * ((centers - mu) * sigma) ** 2)",
      "formula", _T_REPLAY, "exgrpo"),
    M("exgrpo", _BUF, "return int(slots[int(np.argmin(ent))])", "return int(slots[int(np.argmax(ent))])", "sign",
      _T_REPLAY, "exgrpo"),
    M("exgrpo", _RSTAGE, "if rate[g] == 1.0]", "if rate[g] >= 0.5]", "boundary", _T_REPLAY, "exgrpo"),
    M("rapo_replay", _BUF, "if rows.size < 2 or np.any(correct[rows] > 0.5):",
      "if rows.size < 2 or np.all(correct[rows] > 0.5):", "trigger", _T_REPLAY, "rapo"),
    M("rapo_replay", _BUF, "k = min(per_group, stored.size, rows.size - 1)",
      "k = min(per_group, stored.size, rows.size)",
      "off_by_one", _T_REPLAY, "rapo"),
    M("positive_replay", _BUF, "k = min(math.ceil(ratio * (1.0 - p) * rows.size - 1e-9)",
      "k = min(math.floor(ratio * (1.0 - p) * rows.size - 1e-9)", "off_by_one", _T_REPLAY, "positive_replay"),
    M("positive_replay", _BUF, "if p > max_success or rows.size < 2:", "if p >= max_success or rows.size < 2:",
      "boundary", _T_REPLAY, "positive_replay"),
    M("rorecomp_compensation", _BUF, "fifo = used[np.argsort(np.asarray(buf.seq)[used]",
      "fifo = used[np.argsort(-np.asarray(buf.seq)[used]", "order", _T_REPLAY, "rorecomp_compensation"),
    M("rorecomp_compensation", _RSTAGE, "advantages=adv[freed])", "advantages=None)", "drop", _T_REPLAY,
      "rorecomp_compensation"),
    # the seeds' agentic techniques (issue #20 item 5)
    M("shortest_path_reward", _AGT, "np.maximum(steps - ref, 0.0) / (2.0 * np.maximum(steps, 1.0))",
      "np.maximum(steps - ref, 0.0) / (np.maximum(steps, 1.0))", "scale", _T_AGT, "shortest_path"),
    M("shortest_path_reward", _AGT, "ref[rows] = steps[won & rows].min()", "ref[rows] = steps[won & rows].max()",
      "min_max", _T_AGT, "shortest_path"),
    M("tool_call_reward", _AGT, "bonus = w * np.minimum(1.0, n / max_calls)", "bonus = w * n / max_calls",
      "cap", _T_AGT, "tool_call"),
    M("tool_call_reward", _AGT, "w = 0.5 * (1.0 + math.cos(", "w = 0.5 * (1.0 - math.cos(", "sign", _T_AGT,
      "tool_call"),
    M("oprl", _TOK, "step_r = jax.lax.stop_gradient(beta * _turn_sums(diff, turn_ids, m, nturn) * tv)",
      "step_r = jax.lax.stop_gradient(_turn_sums(diff, turn_ids, m, nturn) * tv)", "drop_beta", _T_AGT, "oprl"),
    M("oprl", _TOK, "onehot = (jnp.asarray(turn_ids)[:, :, None] == jnp.arange(nturn)[None, None, :])",
      "onehot = (jnp.asarray(turn_ids)[:, :, None] == 1 + jnp.arange(nturn)[None, None, :])", "off_by_one", _T_AGT,
      "oprl"),
    M("spear_replay", _BUF, "cand = np.flatnonzero(used & fresh & (recalibrated > 0))",
      "cand = np.flatnonzero(used & fresh & (recalibrated >= 0))", "boundary", _T_AGT, "spear"),
    M("spear_replay", _BUF, "adv = np.asarray(buf.reward, np.float64) - float(baseline)",
      "adv = np.asarray(buf.reward, np.float64)", "drop_baseline", _T_AGT, "spear"),
    M("spear_replay", _RSTAGE, "coef = 1.0 - 0.5 * (1.0 + math.cos(", "coef = 0.5 * (1.0 + math.cos(", "ramp",
      _T_AGT, "spear"),
    # hinted rollouts (rljax/hints): the rules, and the mechanics' row that trains behind the unhinted prompt
    M("guide", "rljax/train/_mechanics.py", "take_rows[rows] = data.batch_size + drawn_rows",
      "take_rows[rows] = drawn_rows", "swap", _T_HINTS, "unhinted_prompt"),
    M("guide", _HRULE, "start = int(np.flatnonzero(pm[i]).max()) + 1 if", "start = int(np.flatnonzero(pm[i]).max()) if",
      "off_by_one", _T_HINTS, "unhinted_rows"),
    M("guide", _HRULE, "return answer[:int(math.ceil(fraction * len(answer) - 1e-9))]",
      "return answer[:int(math.floor(fraction * len(answer) + 1e-9))]", "rounding", _T_HINTS, "answer_prefix"),
    M("oc_grpo", _HSTAGE, "take[p] = int(math.ceil(rows * failed - 1e-9))", "take[p] = int(math.floor(rows * failed))",
      "off_by_one", _T_HINTS, "each_stage"),
    M("oc_grpo", _HRULE, "chosen = failed[failed.size - min(int(k), failed.size):]",
      "chosen = failed[:min(int(k), failed.size)]", "order", _T_HINTS, "replaced_rows"),
    M("lte", _HRULE, "if k and k not in seen:", "if k:", "dedupe", _T_HINTS, "mistakes_hint"),
    M("lte", _HRULE, 'return ", ".join(seen[:max_mistakes])', 'return ", ".join(seen[:max_mistakes + 1])',
      "count", _T_HINTS, "mistakes_hint or each_stage"),
    M("adhint", _HRULE, "(max_fraction - min_fraction) * (1.0 - float(success_rate))",
      "(max_fraction - min_fraction) * float(success_rate)", "sign", _T_HINTS, "adhint_fraction or each_stage"),
    M("adhint", _HRULE, "return (n > 0) & (rate <= max_success + 1e-12)", "return (n > 0) & (rate < max_success)",
      "boundary", _T_HINTS, "hint_groups"),
    # curricula (rljax/filters/_curriculum.py): DUMP's UCB score and window, TAC's transferability and gradients
    M("dump", _CURR, "bonus = float(exploration) * np.sqrt(2.0 * math.log(total + 1.0) / (n + 1.0))",
      "bonus = float(exploration) * np.sqrt(2.0 * math.log(total) / (n + 1.0))", "off_by_one", _T_CURR),
    M("dump", _CURR, "values = np.abs(np.asarray(values, np.float64).reshape(-1))",
      "values = np.asarray(values, np.float64).reshape(-1)", "abs", _T_CURR),
    M("dump", _CURR, "new = values[valid & (arms == j)][-w:]", "new = values[valid & (arms == j)][:w]", "window",
      _T_CURR),
    M("tac", _CURR, "others = on[None, :] & ~np.eye(k, dtype=bool)", "others = on[None, :] & np.ones((k, k), bool)",
      "self_pair", _T_CURR),
    M("tac", _CURR, "t = np.where(upd, float(decay) * t + (1.0 - float(decay)) * np.nan_to_num(step), t)",
      "t = np.where(upd, (1.0 - float(decay)) * t + float(decay) * np.nan_to_num(step), t)", "swap", _T_CURR),
    M("tac", "rljax/train/_task_grads.py", "mask = batch.loss_mask & (batch.task_id == d)[:, None]",
      "mask = batch.loss_mask", "mask", _T_CURR, "gram"),
)

#: catalog rows not (yet) covered by a mutant, with the reason; the fast test checks that every
#: row of ``rljax.catalog()`` has a mutant or is listed here, so this is the list of what remains.
NOT_COVERED: dict = {}


def module_of() -> dict:
  """``{technique name: room}`` (``advantages``, ``filters``, ...) from each room's ``TECHNIQUES``."""
  import importlib  # pylint: disable=import-outside-toplevel
  out = {}
  for room in MODULES:
    for row in importlib.import_module(f"rljax.{room}").TECHNIQUES:
      out[row.name] = room
  return out


def stale_reason(m: Mutant, root: Path = ROOT) -> Optional[str]:
  """Why ``m`` cannot be applied to the current file (``None`` when it can)."""
  path = root / m.file
  if not path.is_file():
    return f"{m.file} does not exist"
  if m.original == m.mutated:
    return "mutated snippet equals the original"
  n = path.read_text(encoding="utf-8").count(m.original)
  if n != 1:
    return f"original snippet occurs {n} times in {m.file} (must be exactly once)"
  return None


def _dirty(paths, root: Path) -> list:
  """Files among ``paths`` that differ from git HEAD (or are not tracked)."""
  out = []
  for p in sorted(set(paths)):
    tracked = subprocess.run(["git", "ls-files", "--error-unmatch", p], cwd=root, capture_output=True).returncode == 0
    same = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", p], cwd=root).returncode == 0
    if not (tracked and same):
      out.append(p)
  return out


def _pytest_cmd(m_or_sel) -> list:
  tests, k = m_or_sel
  cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests]
  return cmd + (["-k", k] if k else [])


def _run_tests(selection, root: Path, timeout: float) -> tuple:
  """Runs a test selection; returns (status, seconds, tail) with status pass|fail|empty|error|timeout."""
  env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1")
  t0 = time.time()
  try:
    p = subprocess.run(_pytest_cmd(selection), cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
  except subprocess.TimeoutExpired:
    return "timeout", time.time() - t0, ""
  dt = time.time() - t0
  tail = (p.stdout + p.stderr).strip().splitlines()[-3:]
  status = {0: "pass", 1: "fail", 5: "empty"}.get(p.returncode, "error")
  return status, dt, "\n".join(tail)


class _Restore:
  """Context manager: the file's original bytes and mtime come back on exit, whatever happens."""

  def __init__(self, path: Path):
    self.path = path

  def __enter__(self):
    self.data = self.path.read_bytes()
    st = self.path.stat()
    self.times = (st.st_atime_ns, st.st_mtime_ns)
    return self

  def __exit__(self, *exc):
    self.path.write_bytes(self.data)
    os.utime(self.path, ns=self.times)  # the cached bytecode of the original stays valid
    return False


def run_mutant(m: Mutant, root: Path = ROOT, timeout: float = 600.0) -> dict:
  reason = stale_reason(m, root)
  if reason:
    return {"mutant": m, "status": "stale", "detail": reason, "seconds": 0.0}
  path = root / m.file
  with _Restore(path) as saved:
    text = saved.data.decode("utf-8")
    path.write_text(text.replace(m.original, m.mutated, 1), encoding="utf-8")
    t = time.time_ns()
    os.utime(path, ns=(t, max(t, saved.times[1] + 2_000_000_000)))  # never the original's mtime
    status, dt, tail = _run_tests((m.tests, m.k), root, timeout)
  verdict = {"fail": "caught", "pass": "survived", "empty": "error", "error": "error", "timeout": "timeout"}[status]
  return {"mutant": m, "status": verdict, "detail": tail if verdict in ("error", "timeout") else "",
          "seconds": dt}


def _raise_interrupt(signum, frame):  # a signal -> KeyboardInterrupt, so every `finally` restores
  raise KeyboardInterrupt(f"signal {signum}")


def summary_markdown(results, modules: dict) -> str:
  by_mod: dict = {}
  for r in results:
    mod = modules.get(r["mutant"].technique, "?")
    d = by_mod.setdefault(mod, {"caught": 0, "total": 0, "rows": set()})
    d["total"] += 1
    d["caught"] += r["status"] == "caught"
    d["rows"].add(r["mutant"].technique)
  lines = ["| module | rows covered | mutants caught / total |", "|---|---|---|"]
  for mod in MODULES:
    if mod in by_mod:
      d = by_mod[mod]
      lines.append(f"| {mod} | {len(d['rows'])} | {d['caught']} / {d['total']} |")
  bad = [r for r in results if r["status"] != "caught"]
  lines.append("")
  if bad:
    lines.append("Not caught:")
    lines += [f"- `{r['mutant'].ident}` ({r['mutant'].file}): {r['status']}"
              + (f" — {r['detail']}" if r["detail"] else "") for r in bad]
  else:
    lines.append("Every mutant was caught.")
  return "\n".join(lines)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(prog="python benchmarks/catalog_mutants.py", description=__doc__.split("\n")[0])
  parser.add_argument("--technique", action="append", metavar="NAME", help="only this catalog row (repeatable)")
  parser.add_argument("--module", action="append", choices=MODULES, help="only rows of this room (repeatable)")
  parser.add_argument("--list", action="store_true", help="list the selected mutants and exit")
  parser.add_argument("--timeout", type=float, default=600.0, help="seconds per pytest run (default 600)")
  parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run of each test selection")
  parser.add_argument("--markdown", action="store_true", help="print a Markdown summary at the end")
  args = parser.parse_args(argv)
  sys.path.insert(0, str(ROOT))
  modules = module_of()
  unknown = sorted({m.technique for m in MUTANTS} - set(modules))
  if unknown:
    print(f"unknown technique names in MUTANTS: {unknown}", file=sys.stderr)
    return 2
  if args.technique:
    bad = sorted(set(args.technique) - set(modules))
    if bad:
      print(f"--technique: unknown catalog rows {bad}", file=sys.stderr)
      return 2
  chosen = [m for m in MUTANTS if (not args.technique or m.technique in args.technique)
            and (not args.module or modules[m.technique] in args.module)]
  if args.list:
    for m in chosen:
      sel = " ".join(m.tests) + (f" -k {m.k}" if m.k else "")
      print(f"{modules[m.technique]:<11} {m.ident:<40} {m.file:<34} {sel}")
    return 0
  if not chosen:
    print("no mutant selected", file=sys.stderr)
    return 2
  dirty = _dirty([m.file for m in chosen], ROOT)
  if dirty:
    print(f"refusing to mutate files that differ from git HEAD (commit or stash first): {dirty}", file=sys.stderr)
    return 2
  # SIGTERM, SIGHUP and SIGINT (even where the shell started us with it ignored) raise KeyboardInterrupt,
  # so the `finally` of every mutant restores its file before the runner exits
  caught_signals = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
  old_handlers = {s: signal.signal(s, _raise_interrupt) for s in caught_signals}
  results = []
  try:
    if not args.no_baseline:
      for sel in dict.fromkeys((m.tests, m.k) for m in chosen):
        status, dt, tail = _run_tests(sel, ROOT, args.timeout)
        print(f"baseline {' '.join(sel[0])}{f' -k {sel[1]}' if sel[1] else ''}: {status} ({dt:.0f}s)", flush=True)
        if status != "pass":
          print(f"baseline must pass before mutating:\n{tail}", file=sys.stderr)
          return 2
    for m in chosen:
      r = run_mutant(m, ROOT, args.timeout)
      results.append(r)
      print(f"{r['status']:<9} {m.ident:<40} ({r['seconds']:.0f}s) {r['detail']}", flush=True)
  except KeyboardInterrupt:
    print("interrupted; every mutated file was restored", file=sys.stderr)
    return 130
  finally:
    for s, h in old_handlers.items():
      signal.signal(s, h)
  caught = sum(r["status"] == "caught" for r in results)
  print(f"\n{caught} / {len(results)} mutants caught ({time.strftime('%Y-%m-%d', time.gmtime())})")
  if args.markdown:
    print()
    print(summary_markdown(results, modules))
  return 0 if caught == len(results) else 1


if __name__ == "__main__":
  sys.exit(main())
