"""Token/segment-level advantage estimators: return ``[B, T]`` advantages.

Same convention as the outcome estimators: ``(advantages, info)``; rows with
``valid`` False and tokens outside ``mask`` get 0.

Size: one family (token-level estimators); the catalog rows with their fidelity records are the last ~400 lines.
"""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from rljax import _groups as G
from rljax.advantages import _common as C
from rljax.advantages._outcome import _check_common, _grpo_core, _metrics, grpo
from rljax.types import check_mask, is_concrete

Array = jax.Array

__all__ = ["segment", "outcome_conditioned_baseline", "tempo", "step_episode_mix", "sign_preserving_modulation",
           "implicit_progress_reward", "oprl"]


def _token_mask(mask, b, v):
  shape = G.check_rank("mask", mask, 2)
  if shape[0] != b:
    raise ValueError(f"mask must be [B, T] with B={b}, got {shape}")
  check_mask("mask", mask)
  return jnp.asarray(mask).astype(bool) & (v[:, None] > 0), shape


def _check_ids_2d(name, ids, shape):
  G.check_shape(name, ids, shape)
  dtype = ids.dtype
  if not jnp.issubdtype(dtype, jnp.integer):
    raise ValueError(f"{name} must be an integer array, got dtype {dtype}")


@C.fast_path
def segment(rewards: Array, segment_ids: Array, group_id: Array, *, mask: Optional[Array] = None,
            valid: Optional[Array] = None, segment_valid: Optional[Array] = None, num_groups: Optional[int] = None,
            eps: float = 1e-6, std_ddof: int = 1, scale: str = "group", singleton: str = "zero"):
  """Segment-routed advantages: ``A_{i,t} = Σ_k 1[seg_{i,t} = k]·A_i^(k)``.

  ``A^(k) = grpo(rewards[:, k], group_id)``: each segment reward has its own
  group baseline (and, with ``scale="group"``, its own group std), and is
  routed to the tokens whose ``segment_ids`` equal k (hard masks). Tokens with
  a segment id outside ``[0, K)`` (e.g. -1 for prompt/observation) or outside
  ``mask`` get 0. Sources: Blockwise Advantage Estimation, SLCA-GRPO,
  DSS-GRPO (seed 001_5839a3671b0b4d92.txt L25, L57, L79). Paper (Blockwise
  AE, arXiv 2602.10231 Sec. 4.2-4.3, App. B Alg. 1): ``A^(k) = r_k − b_k``
  applied only to block k's tokens, the first block's baseline the group
  mean, "with optional variance normalization as in GRPO"; their main runs
  centre only (``scale="none"``), our default divides by the group std
  (GRPO's, as SLCA/DSS-GRPO's "group-relative advantages"). Their
  recommended baseline for later blocks is ``outcome_conditioned_baseline``
  (route it with ``to_tokens``); the group mean here is their "Group Mean
  Baseline" (Sec. 4.3 item 3). Their per-block token mean in the loss (each
  block's tokens averaged over the block) is not built: no aggregation in
  ``rljax.objectives`` sees the segment ids.

  Args:
    rewards: ``[B, K]`` one reward per segment.
    segment_ids: ``[B, T]`` int, the segment each token belongs to.
    group_id: ``[B]``; mask: optional ``[B, T]``; segment_valid: optional
      ``[B, K]`` bool (a rollout without segment k neither gets nor gives a
      baseline for it).

  Returns:
    ``(advantages [B, T], info)`` with ``info["per_segment"] [B, K]``.
  """
  _check_common(eps, std_ddof, scale, singleton)
  shape = G.check_rank("rewards", rewards, 2)
  b, k = shape
  seg_shape = G.check_rank("segment_ids", segment_ids, 2)
  _check_ids_2d("segment_ids", segment_ids, (b, seg_shape[1]))
  t = seg_shape[1]
  if segment_valid is not None:
    check_mask("segment_valid", segment_valid, (b, k))
  per = []
  for j in range(k):
    sv = None if segment_valid is None else jnp.asarray(segment_valid)[:, j].astype(bool)
    vj = sv if valid is None else (jnp.asarray(valid).astype(bool) if sv is None else sv & jnp.asarray(valid, bool))
    r, gid, v, ng = G.prepare(rewards[:, j], group_id, vj, num_groups, rewards_name=f"rewards[:, {j}]")
    per.append(_grpo_core(r, gid, v, ng, eps=eps, std_ddof=std_ddof, scale=scale, singleton=singleton)[0])
  per = jnp.stack(per, axis=1)  # [B, K]
  seg = jnp.asarray(segment_ids)
  inside = (seg >= 0) & (seg < k)
  if mask is not None:
    m, _ = _token_mask(mask, b, jnp.ones((b,)))
    if m.shape != (b, t):
      raise ValueError(f"mask must have shape {(b, t)}, got {m.shape}")
    inside = inside & m
  if valid is not None:
    inside = inside & jnp.asarray(valid, bool)[:, None]
  adv = jnp.where(inside, jnp.take_along_axis(per, jnp.clip(seg, 0, k - 1), axis=1), 0.0)
  return adv, {"per_segment": per, "adv_abs_max": jnp.max(jnp.abs(adv), initial=0.0), "num_tokens": jnp.sum(inside)}


@C.fast_path
def outcome_conditioned_baseline(rewards: Array, outcome: Array, group_id: Array, *,
                                 valid: Optional[Array] = None, num_groups: Optional[int] = None,
                                 scale: str = "none", eps: float = 1e-6, std_ddof: int = 1):
  """Outcome-conditioned baseline: ``A_i = r_i − mean{r_j : j ∈ g(i), o_j = o_i}``.

  Samples of a group are stratified by an intermediate outcome ``o`` (e.g.
  whether the first block's answer was correct) and each stratum is its own
  baseline, using within-group statistics only. ``scale="group"`` divides by
  the stratum's std (+ε). A stratum with one sample gets 0. Source: Blockwise
  Advantage Estimation (seed 001_5839a3671b0b4d92.txt L25); the paper's form
  (arXiv 2602.10231 Sec. 4.3 item 4, App. B Alg. 1 lines 7-10):
  ``b = |G_o|^{-1} Σ_{j∈G_o} r_j`` over the group's samples with the same
  intermediate outcome, ``A = r − b``, no std in their main runs (our default
  ``scale="none"``); a singleton stratum's mean is its own reward, so A = 0
  there too. Returns ``[B]``; route it to a block's tokens with
  ``segment``/``to_tokens``.

  Args:
    rewards: ``[B]``; outcome: ``[B]`` int (any values); group_id: ``[B]``.
  """
  G.check_choice("scale", scale, ("none", "group"))
  r, gid, v, ng = G.prepare(rewards, group_id, valid, num_groups)
  b = r.shape[0]
  G.check_shape("outcome", outcome, (b,))
  key, _ = G.dense_ids(gid, jnp.asarray(outcome), valid=v > 0)
  st = G.row_stats(r, key, v, b, ddof=std_ddof)
  denom = st.std + eps if scale == "group" else 1.0
  adv = (r - st.mean) / denom * v
  return adv, _metrics(adv, r, v, num_singleton_strata=jnp.sum(v * (st.count == 1)))


def _first_mismatch(a, b):
  """Index of the first position where rows of ``a`` and ``b`` differ (``T`` if none): ``[N]``."""
  t = a.shape[1]
  return jnp.min(jnp.where(a != b, jnp.arange(t, dtype=jnp.int32)[None, :], t), axis=1)


def _prefix_values(rv, v, root, tok):
  """``V[i, t]`` = mean reward of the valid rows sharing ``root`` and ``tok[:, :t+1]`` with row i.

  One lexicographic sort of the rows by (root, tok_0, ..., tok_{T-1}) makes
  every prefix class a contiguous block of the sorted order at every t; block
  boundaries at t are "root differs or some token <= t differs from the
  previous row", block sums are one ``segment_sum`` over ``[T, B]`` ids.
  """
  b, t = tok.shape
  ops = (root,) + tuple(tok[:, s] for s in range(t)) + (jnp.arange(b, dtype=jnp.int32),)
  perm = jax.lax.sort(ops, num_keys=t + 1, is_stable=True)[-1]
  stok, sroot = tok[perm], root[perm]
  first = jnp.concatenate([jnp.zeros((1,), jnp.int32), _first_mismatch(stok[1:], stok[:-1])])
  root_diff = jnp.concatenate([jnp.ones((1,), bool), sroot[1:] != sroot[:-1]])
  new_block = (jnp.arange(t)[None, :] >= first[:, None]) | root_diff[:, None]             # [B, T]
  block = jnp.cumsum(new_block.astype(jnp.int32), axis=0) - 1                             # [B, T] in [0, B)
  seg = (block.T + (jnp.arange(t, dtype=jnp.int32) * b)[:, None]).reshape(-1)              # sorted ids
  rv_s = jnp.broadcast_to(rv[perm][None, :], (t, b)).reshape(-1)
  v_s = jnp.broadcast_to(v[perm][None, :], (t, b)).reshape(-1)
  tot = jax.ops.segment_sum(rv_s, seg, num_segments=b * t, indices_are_sorted=True)
  cnt = jax.ops.segment_sum(v_s, seg, num_segments=b * t, indices_are_sorted=True)
  val = (tot / jnp.maximum(cnt, 1.0))[seg].reshape(t, b).T                                 # sorted rows
  return jnp.zeros_like(val).at[perm].set(val)


def _prefix_values_near(rv, v, root, tok, max_group_size):
  """Same as ``_prefix_values`` for groups of at most ``max_group_size`` valid rows.

  Rows are stably sorted by group, so each group is a contiguous run. For every
  pair of rows at most ``max_group_size − 1`` apart in that order we only need
  their first mismatching position F (0 across groups); then
  ``Σ_q [t < F_pq]·r_q = Σ_q r_q − Σ_{q: F_pq <= t} r_q`` is one scatter-add
  into ``[B, 2, T+1]`` and one prefix sum (a matmul with a triangular
  matrix): O(B·T·max_group_size) comparisons, no multi-key sort.
  """
  b, t = tok.shape
  order = jnp.argsort(root, stable=True)
  sroot, stok, srv, sv = root[order], tok[order], rv[order], v[order]
  rows, firsts, rvals, vvals = [], [], [], []
  for d in range(1, min(max_group_size, b)):
    same = sroot[d:] == sroot[:-d]
    f = jnp.where(same, _first_mismatch(stok[d:], stok[:-d]), 0)  # pair (p, p+d)
    rows += [jnp.arange(b - d), jnp.arange(d, b)]
    firsts += [f, f]
    # a pair across groups adds nothing (added at 0 and subtracted back, its rounding would stay behind)
    rvals += [jnp.where(same, srv[d:], 0), jnp.where(same, srv[:-d], 0)]
    vvals += [jnp.where(same, sv[d:], 0), jnp.where(same, sv[:-d], 0)]
  if rows:
    rows, firsts = jnp.concatenate(rows), jnp.concatenate(firsts)
    rvals, vvals = jnp.concatenate(rvals), jnp.concatenate(vvals)
    inc = jnp.zeros((b, 2, t + 1), rv.dtype).at[rows, :, firsts].add(jnp.stack([rvals, vvals], axis=1))
    # Σ_{s <= t} inc[:, :, s] as a matmul with a triangular 0/1 matrix (exact sums, fast on every backend)
    tri = (jnp.arange(t + 1)[:, None] <= jnp.arange(t)[None, :]).astype(rv.dtype)           # [T+1, T]
    below = jnp.einsum("bks,st->bkt", inc, tri, precision=jax.lax.Precision.HIGHEST)
    num = jnp.sum(inc[:, 0], axis=1, keepdims=True) + srv[:, None] - below[:, 0]
    den = jnp.sum(inc[:, 1], axis=1, keepdims=True) + sv[:, None] - below[:, 1]
  else:
    num, den = jnp.broadcast_to(srv[:, None], (b, t)), jnp.broadcast_to(sv[:, None], (b, t))
  val = num / jnp.maximum(den, 1.0)
  return jnp.zeros_like(val).at[order].set(val)


@C.fast_path
def tempo(rewards: Array, tokens: Array, mask: Array, group_id: Array, *, valid: Optional[Array] = None,
          num_groups: Optional[int] = None, eps: float = 1e-6, std_ddof: int = 1, scale: str = "group",
          singleton: str = "zero", td_coef: float = 1.0, root_branch: bool = True,
          max_group_size: Optional[int] = 16):
  """TEMPO: GRPO plus branch-gated TD corrections from the group's prefix tree (P2T).

  ``A_{i,t} = A_i^GRPO + c·(V(s_{i,t+1}) − V(s_{i,t})) / d_i`` on valid tokens,
  where ``s_{i,t}`` is the prefix ``tokens[i, :t]`` and ``V(s)`` the mean
  reward of the group's valid responses that share prefix ``s`` (the
  descendants of the tree node). At a non-branch token every response sharing
  ``s_{i,t}`` also emits ``tokens[i, t]``, so the TD term is exactly 0 and
  TEMPO equals GRPO there. ``d_i`` is GRPO's denominator (σ_g + ε for
  ``scale="group"``, 1 for ``"none"``) so the TD term is on the advantage's
  scale; ``c = td_coef``. ``root_branch=False`` drops the TD at each row's
  first completion token (branching right after the prompt).

  Source: TEMPO / Prefix-to-Tree (seed 001_5839a3671b0b4d92.txt L23). The
  abstract gives V as "aggregating descendant outcomes" and the branch gating;
  the TD scale and root handling are our reading (parameters).

  Implementation: one lexicographic sort of the rows by (group, tokens) makes
  every prefix class contiguous at every position; block sums are one
  ``segment_sum`` over ``[T, B]`` ids. No ``[B, B, T]`` pairwise tensor and no
  hashing, so it is exact; memory O(B·T). When every group has at most
  ``max_group_size`` valid rows (checked at run time with ``lax.cond``), a
  faster exact path compares each row with its group's other rows after one
  sort by group (O(B·T·max_group_size)); ``max_group_size=None`` always
  uses the sort path. The result does not depend on this setting. Tokens outside ``mask`` are compared
  as a sentinel (-1): responses are assumed aligned (same prompt length per
  group, completions starting at the same column), as the sampler produces.

  Args:
    rewards: ``[B]``; tokens: ``[B, T]`` int; mask: ``[B, T]`` completion mask;
    group_id: ``[B]``; max_group_size: static int or None (speed only).

  Returns:
    ``(advantages [B, T], info)`` with ``info["td"] [B, T]`` (scaled TD term)
    and ``info["num_branch_tokens"]``.
  """
  _check_common(eps, std_ddof, scale, singleton)
  if np.shape(rewards)[:1] == (0,):
    raise ValueError("tempo: an empty batch, B = 0, is not supported (its prefix-tree pass needs one row)")
  r, gid, v, ng = G.prepare(rewards, group_id, valid, num_groups)
  b = r.shape[0]
  m, (_, t) = _token_mask(mask, b, v)
  _check_ids_2d("tokens", tokens, (b, t))
  adv_seq, _, denom = _grpo_core(r, gid, v, ng, eps=eps, std_ddof=std_ddof, scale=scale, singleton=singleton)
  tok = jnp.where(m, jnp.asarray(tokens, jnp.int32), -1)
  root = jnp.where(v > 0, gid, ng)
  # V is a mean of the group's rewards, so the TD term (a difference of two such means) is unchanged by a shift of
  # the group's rewards: shifted by the group's largest valid reward, an equal-reward group sums exact zeros (its
  # TD is then exactly 0 before the division by σ_g + ε) and the sums carry less rounding
  top = jax.ops.segment_max(jnp.where(v > 0, r, -jnp.inf), root, num_segments=ng + 1)
  rv = jnp.where(v > 0, r - top[root], 0.0) * v
  cnt0 = jax.ops.segment_sum(v, root, num_segments=ng + 1)
  v0 = (jax.ops.segment_sum(rv, root, num_segments=ng + 1) / jnp.maximum(cnt0, 1.0))[root]
  if max_group_size is None:
    v_after = _prefix_values(rv, v, root, tok)                                             # V(s_{t+1})
  else:
    largest = jnp.max(jax.ops.segment_sum(v, root, num_segments=ng + 1)[:ng]) if ng else 0.0
    v_after = jax.lax.cond(largest <= max_group_size,
                           lambda: _prefix_values_near(rv, v, root, tok, max_group_size),
                           lambda: _prefix_values(rv, v, root, tok))
  v_before = jnp.concatenate([v0[:, None], v_after[:, :-1]], axis=1)   # V(s_t)
  gate = m
  if not root_branch:
    first = m & ~jnp.concatenate([jnp.zeros((b, 1), bool), m[:, :-1]], axis=1)
    gate = gate & ~first
  safe = jnp.where(denom > 0, denom, 1.0)
  td = jnp.where(gate & (denom[:, None] > 0), (v_after - v_before) / safe[:, None], 0.0)
  mf = m.astype(r.dtype)
  adv = adv_seq[:, None] * mf + td_coef * td
  return adv, {"td": td, "num_branch_tokens": jnp.sum(td != 0), "adv_abs_max": jnp.max(jnp.abs(adv), initial=0.0),
               "num_tokens": jnp.sum(mf)}


def _turn_gather(per_turn, turn_ids, m):
  """``[B, M]`` per-turn values -> ``[B, T]`` by ``turn_ids`` (0 outside [0, M) or mask)."""
  nturn = per_turn.shape[1]
  tid = jnp.asarray(turn_ids)
  inside = (tid >= 0) & (tid < nturn) & m
  return jnp.where(inside, jnp.take_along_axis(per_turn, jnp.clip(tid, 0, nturn - 1), axis=1), 0.0), inside


def _turn_group_normalize(x, tv, gid, ng, *, eps, ddof):
  """Standardise ``x [B, M]`` across the group's rows at the same turn index."""
  b, nturn = x.shape
  key = jnp.where(tv, gid[:, None] * nturn + jnp.arange(nturn)[None, :], ng * nturn).reshape(-1)
  st = G.row_stats(x.reshape(-1), key, tv.reshape(-1).astype(x.dtype), ng * nturn, ddof=ddof)
  z = C.safe_div(x.reshape(-1) - st.mean, st.std + eps)
  return (z * tv.reshape(-1)).reshape(b, nturn)


def _turn_pool_normalize(x, tv, gid, ng, *, eps, ddof):
  """Standardise ``x [B, M]`` over all the group's valid turns pooled (every row, every turn index)."""
  b, nturn = x.shape
  key = jnp.where(tv, gid[:, None], ng).reshape(-1)
  st = G.row_stats(x.reshape(-1), key, tv.reshape(-1).astype(x.dtype), ng, ddof=ddof)
  z = C.safe_div(x.reshape(-1) - st.mean, st.std + eps)
  return (z * tv.reshape(-1)).reshape(b, nturn)


def _check_finite_turns(name: str, x, turn_valid) -> None:
  """``G.check_finite`` on the turns that exist (``turn_valid``): padded turns may hold anything."""
  if turn_valid is not None and is_concrete(x) and is_concrete(turn_valid):
    x = np.where(np.asarray(turn_valid).astype(bool), np.asarray(x), 0.0)
  G.check_finite(name, x)


@C.fast_path
def step_episode_mix(turn_rewards: Array, turn_ids: Array, episode_rewards: Array, group_id: Array, *,
                     mask: Array, step_weight: float = 0.5, gamma: float = 1.0,
                     episode_weight: Optional[float] = None, episode: str = "outcome",
                     turn_valid: Optional[Array] = None, valid: Optional[Array] = None,
                     num_groups: Optional[int] = None, eps: float = 1e-6, std_ddof: int = 1):
  """Mixed step/episode advantages with discounted returns over turns.

  ``G_{i,m} = Σ_{k≥m} γ^{k−m}·r_{i,k}`` over trajectory i's valid turns (never
  crossing trajectories); ``A^step_{i,m}`` standardises G across the group's
  trajectories at the same turn index m; each token of turn m gets
  ``w·A^step_{i,m} + w_ep·A^ep_{i,m}`` (``w = step_weight``, ``w_ep =
  episode_weight``, default ``1 − w``). The episode term:

  * ``episode="outcome"`` (default): ``A^ep_i = grpo(episode_rewards)_i``, the
    trajectory's outcome advantage on every turn; ``w = 0`` is episode-level
    GRPO broadcast over tokens.
  * ``episode="turns"``: the authors' code: the turn's own reward ``r_{i,m}``
    standardised over all valid turns of the group's trajectories pooled.

  Authors' code (UI-S1, github.com/X-PLUG/MobileAgent: UI-S1/uis1/core_uis1.py,
  ``compute_uis1_outcome_advantage``; one training row per turn):
  ``episode_advantage_w·(r − μ_pool)/(σ_pool + ε) + step_advantage_w·(G − μ_m)/(σ_m + ε)``
  with both weights 1 (``UI-S1/scripts/train_example.sh``: ``mode=mean_std_norm``, γ = 0.5) — here
  ``step_episode_mix(step_weight=1, episode_weight=1, episode="turns", gamma=0.5)``. Two differences remain:
  their return chain restarts at a turn whose action did not match the expert (``extract_match``), and a
  pooled group with a single turn gets ``r/(1+ε)`` there, 0 here. Our default keeps a convex mix with the
  outcome advantage, the abstract's "weighted step-level and episode-level advantages".
  Sources: Semi-online RL / UI-S1 (seed 001_5839a3671b0b4d92.txt L127, arXiv 2509.11543), OPRL
  (seed 000_3e503271be254a43.txt L67).

  Args:
    turn_rewards: ``[B, M]`` per-turn rewards; turn_ids: ``[B, T]`` int (turn of
      each token; -1 = none); episode_rewards: ``[B]``; mask: ``[B, T]``;
      turn_valid: optional ``[B, M]`` bool (turns that exist).

  Returns:
    ``(advantages [B, T], info)`` with ``info["returns"] [B, M]``.
  """
  if not 0.0 <= step_weight <= 1.0:
    raise ValueError(f"step_weight must be in [0, 1], got {step_weight!r}")
  if episode_weight is not None and not (np.ndim(episode_weight) == 0 and 0.0 <= float(episode_weight) < np.inf):
    raise ValueError(f"episode_weight must be a finite scalar >= 0 or None, got {episode_weight!r}")
  G.check_choice("episode", episode, ("outcome", "turns"))
  w_ep = 1.0 - step_weight if episode_weight is None else float(episode_weight)
  b, nturn = G.check_rank("turn_rewards", turn_rewards, 2)
  _check_finite_turns("turn_rewards", turn_rewards, turn_valid)
  ep, _ = grpo(
      episode_rewards, group_id, valid=valid, num_groups=num_groups, eps=eps, std_ddof=std_ddof)
  r, gid, v, ng = G.prepare(episode_rewards, group_id, valid, num_groups, rewards_name="episode_rewards")
  m, (_, t) = _token_mask(mask, b, v)
  _check_ids_2d("turn_ids", turn_ids, (b, t))
  tv = jnp.ones((b, nturn), bool) if turn_valid is None else jnp.asarray(turn_valid).astype(bool)
  if turn_valid is not None:
    check_mask("turn_valid", turn_valid, (b, nturn))
  tv = tv & (v[:, None] > 0)
  tr = jnp.where(tv, jnp.asarray(turn_rewards, r.dtype), 0.0)

  def step(running, x):
    r_m, tv_m = x
    new = r_m + gamma * running
    return jnp.where(tv_m, new, running), new * tv_m

  _, ret = jax.lax.scan(step, jnp.zeros((b,), r.dtype), (tr.T, tv.T), reverse=True)
  returns = ret.T
  a_step = _turn_group_normalize(returns, tv, gid, ng, eps=eps, ddof=std_ddof)
  step_tok, inside = _turn_gather(a_step, turn_ids, m)
  if episode == "outcome":
    ep_tok = ep[:, None] * m
  else:
    ep_tok, _ = _turn_gather(_turn_pool_normalize(tr, tv, gid, ng, eps=eps, ddof=std_ddof), turn_ids, m)
  adv = step_weight * step_tok + w_ep * ep_tok
  return adv, {"returns": returns, "adv_abs_max": jnp.max(jnp.abs(adv), initial=0.0), "num_tokens": jnp.sum(m)}


@C.fast_path
def sign_preserving_modulation(advantages: Array, signal: Array, turn_ids: Array, group_id: Array, *,
                               mask: Array, lam: float = 0.5, eps_w: float = 0.5, signed: bool = True,
                               norm: str = "pooled", turn_valid: Optional[Array] = None,
                               valid: Optional[Array] = None, num_groups: Optional[int] = None,
                               eps: float = 1e-6):
  """TurnSight sign-preserving modulation of advantages by a per-turn hindsight signal.

      z_{i,k} = (δ_{i,k} − μ_g) / (σ_g + ε)
      w_{i,t} = 1 + ε_w·tanh(sgn(A_{i,t})·z_{i,turn(t)})          (``signed=False``: tanh(z))
      A'_{i,t} = A_{i,t}·[(1 − λ) + λ·w_{i,t}] = A_{i,t}·(1 + λ ε_w tanh(·))

  ``norm="pooled"`` (default): μ_g, σ_g (population) over all valid turns of
  the group's sibling rollouts; ``"turn_index"``: across the group's
  trajectories at the same turn index. Since λ, ε_w ∈ [0, 1] the factor is
  positive, so every token keeps the sign of its advantage; λ = 0 or ε_w = 0
  is the identity. With ``signed=True`` a hindsight signal agreeing with the
  update direction enlarges it, a disagreeing one shrinks it.

  Paper (TurnSight, arXiv 2608.04007, "Group-Normalized Weight Construction"
  and "Advantage Integration"): exactly this with λ = ε_w = 0.5, except that
  its μ, σ run over the selected *token-level* gaps of all valid turns
  (token-weighted), ours over the per-turn signal (each turn once). Its code
  (github.com/quchangle1/TurnSight) is not in our store.
  ``signed=False, norm="turn_index", eps_w=1`` is our earlier reading
  ``A·(1 + λ tanh(z))``. Source: seed 001_5839a3671b0b4d92.txt L3.

  Args:
    advantages: ``[B]`` (broadcast over tokens) or ``[B, T]``; signal: ``[B, M]``
      (turn-level hindsight δ̄*); turn_ids: ``[B, T]`` int (-1 = no turn: factor 1); mask: ``[B, T]``.

  Returns:
    ``(advantages [B, T], info)`` with ``info["factor"] [B, T]``.
  """
  if not 0.0 <= eps_w <= 1.0:
    raise ValueError(f"eps_w must be in [0, 1] to preserve signs, got {eps_w!r}")
  G.check_choice("norm", norm, ("pooled", "turn_index"))
  if not 0.0 <= lam <= 1.0:
    raise ValueError(f"lam must be in [0, 1] to preserve signs, got {lam!r}")
  b, nturn = G.check_rank("signal", signal, 2)
  _check_finite_turns("signal", signal, turn_valid)
  G.check_finite("advantages", advantages)
  dummy = jnp.zeros((b,), jnp.float32)
  _, gid, v, ng = G.prepare(dummy, group_id, valid, num_groups)
  m, (_, t) = _token_mask(mask, b, v)
  _check_ids_2d("turn_ids", turn_ids, (b, t))
  dtype = jnp.promote_types(G.float_dtype(advantages), G.float_dtype(signal))  # float64 stays float64 (x64)
  a = jnp.asarray(advantages, dtype)
  if a.ndim == 1:
    G.check_shape("advantages", a, (b,))
    a = a[:, None] * m
  else:
    G.check_shape("advantages", a, (b, t))
    a = a * m
  tv = jnp.ones((b, nturn), bool) if turn_valid is None else jnp.asarray(turn_valid).astype(bool)
  tv = tv & (v[:, None] > 0)
  sig = jnp.where(tv, jnp.asarray(signal, dtype), 0.0)
  normalize = _turn_pool_normalize if norm == "pooled" else _turn_group_normalize
  z = normalize(sig, tv, gid, ng, eps=eps, ddof=0)
  z_tok, inside = _turn_gather(z, turn_ids, m)
  arg = jnp.sign(a) * z_tok if signed else z_tok
  factor = jnp.where(inside, 1 + lam * eps_w * jnp.tanh(arg), 1.0)
  adv = a * factor
  return adv, {"factor": factor, "adv_abs_max": jnp.max(jnp.abs(adv), initial=0.0)}


@C.fast_path
def implicit_progress_reward(logp: Array, logp_ref: Array, mask: Array, *, beta: float = 1.0):
  """Implicit progress reward ``r_t = β·(log π(a_t|s_t) − log π_ref(a_t|s_t))`` as a dense reward.

  The log-probability ratio of the RL policy to the reference recovers the
  optimal advantage under the KL-regularised objective; it is returned with
  ``stop_gradient`` (no gradient flows into the policy through it) and 0
  outside ``mask``. It is additive over a step's tokens (sum over a turn's
  tokens gives the step reward). Source: progress advantage (seed
  001_5839a3671b0b4d92.txt L167, arXiv 2606.26080; related: OPRL, seed
  000_3e503271be254a43.txt L67).

  Authors' code (github.com/deeplearning-wisc/progress-advantage:
  ``pa/scoring.py``, ``per_step_progress_advantage``): a step's score is
  ``β·(agg_t log π − agg_t log π_ref)`` over the step's action tokens, ``agg``
  = sum (the sum of these rewards over the step) or mean (their scripts:
  ``--token-agg mean``, the sum divided by the step's length). They use it to
  score and rank trajectories at test time; the dense training reward is ours.

  Only positions in ``mask`` are read: padding may hold anything (NaN, −inf)
  and gives 0, eagerly and under ``jit`` alike. A non-finite log-prob inside
  ``mask`` raises ``ValueError`` when concrete (under ``jit`` it gives a
  non-finite reward there).

  Args:
    logp, logp_ref: ``[B, T]``; mask: ``[B, T]``; beta: KL-regularisation scale,
      finite and > 0 (checked when concrete).

  Returns:
    ``(rewards [B, T], info)`` with ``info["sequence_sum"] [B]``.
  """
  if is_concrete(beta) and not (np.ndim(beta) == 0 and np.isfinite(beta) and float(beta) > 0):
    raise ValueError(f"beta must be a finite scalar > 0, got {beta!r}")
  shape = G.check_rank("logp", logp, 2)
  G.check_shape("logp_ref", logp_ref, shape)
  G.check_shape("mask", mask, shape)
  check_mask("mask", mask)
  m = jnp.asarray(mask).astype(bool)
  diff = jnp.where(m, jnp.asarray(logp) - jnp.asarray(logp_ref), 0.0)
  rew = jax.lax.stop_gradient(jnp.where(m, beta * diff, 0.0))
  return rew, {"sequence_sum": jnp.sum(rew, axis=1), "mean": jnp.sum(rew) / jnp.maximum(jnp.sum(m), 1.0)}


def _turn_sums(x, turn_ids, m, nturn):
  """``[B, M]``: ``Σ_t x[b, t]·1[turn_ids[b, t] = k]`` over tokens in ``m`` (ids outside [0, M) add nothing)."""
  onehot = (jnp.asarray(turn_ids)[:, :, None] == jnp.arange(nturn)[None, None, :]) & m[:, :, None]
  return jnp.sum(jnp.where(onehot, x[:, :, None], 0.0), axis=1)


@C.fast_path
def oprl(logp: Array, logp_ref: Array, turn_ids: Array, episode_rewards: Array, group_id: Array, *,
         mask: Array, turn_valid: Array, beta: float = 1.0, step_weight: float = 0.5, gamma: float = 1.0,
         valid: Optional[Array] = None, num_groups: Optional[int] = None, eps: float = 1e-6, std_ddof: int = 1):
  """OPRL / iStar: implicit per-turn step rewards, their step-level advantages mixed with episode-level GRPO.

      r_{i,k} = β · Σ_{t in turn k of i} (logp_t − logp_ref_t)                     (implicit step reward)
      A_{i,t} = step_episode_mix(r, turn_ids, R)_{i,t}
              = w · norm_k(Σ_{j≥k} γ^{j−k} r_{i,j}) + (1 − w) · grpo(R)_i           (token t in turn k)

  Source: seed 000_3e503271be254a43.txt L67 (OPRL; arXiv 2509.19199, renamed iStar). The paper's step reward is
  ``β·log π_φ(a_t|o_{1:t}, x) / π_θold(a_t|o_{1:t}, x)``: ``logp`` = the log-probs of π_φ, an implicit PRM trained
  alternately with the policy by a trajectory-level DPO loss, ``logp_ref`` = those of π_θold, the policy snapshot
  that sampled the rollouts (authors' code: ``q = rm_log_labels − old_log_probs``, ``r = β·q`` summed over a step,
  β = ``beta_train`` = 0.05, then divided by the batch's largest |reverse cumulative sum| (``istar_norm``)). Pass
  a PRM's log-probs as ``logp`` and the sampling policy's as ``logp_ref`` to get the paper's reward. rljax trains
  no PRM: its stage (``rljax.recipes.stage("oprl")``) feeds ``logp`` = π_θold (the policy as its own implicit
  PRM) and ``logp_ref`` = the frozen reference, our interpretation (``prm="extras"`` reads a PRM's log-probs from
  ``data.extras["logp_prm"]`` over π_θold instead). The step reward of a turn sums the turn's model tokens
  (``turn_ids``: 0-based turn per token, -1 none; only tokens in ``mask`` count), so it is potential-based over
  the turns of a trajectory. ``R`` is the outcome (episode) reward; see ``step_episode_mix`` for the
  per-turn-index normalisation and ``w = step_weight``. The authors combine ``A = RLOO(R) + w·RLOO(Σ step r)``
  per step row (``core_istar.compute_istar_rloo_advantage``, w = 1); ours is ``step_episode_mix``'s
  discounted-return mix. Returned with ``stop_gradient`` (advantages are data).

  Args:
    logp: ``[B, T]`` numerator log-probs (paper: the PRM π_φ; our stage: π_θold), read only inside ``mask``;
    logp_ref: ``[B, T]`` denominator log-probs (paper: π_θold; our stage: the reference); turn_ids: ``[B, T]`` int;
    episode_rewards: ``[B]``; group_id: ``[B]``; mask: ``[B, T]`` model (loss) tokens; turn_valid: ``[B, M]``
    bool, the turns that exist (M: the most turns); beta: > 0.

  Returns:
    ``(advantages [B, T], info)`` with ``info["step_rewards"] [B, M]`` and ``info["returns"] [B, M]``; float64
    when the log-probs and rewards are (under ``jax_enable_x64``), else float32.
  """
  if is_concrete(beta) and not (np.ndim(beta) == 0 and np.isfinite(beta) and float(beta) > 0):
    raise ValueError(f"beta must be a finite scalar > 0, got {beta!r}")
  shape = G.check_rank("logp", logp, 2)
  G.check_shape("logp_ref", logp_ref, shape)
  G.check_shape("mask", mask, shape)
  _check_ids_2d("turn_ids", turn_ids, shape)
  b, nturn = G.check_rank("turn_valid", turn_valid, 2)
  check_mask("turn_valid", turn_valid, (shape[0], nturn))
  m = jnp.asarray(mask).astype(bool)
  dt = jnp.result_type(G.float_dtype(logp), G.float_dtype(logp_ref), G.float_dtype(episode_rewards))
  diff = jnp.where(m, jnp.asarray(logp, dt) - jnp.asarray(logp_ref, dt), 0.0)
  tv = jnp.asarray(turn_valid).astype(bool)
  step_r = jax.lax.stop_gradient(beta * _turn_sums(diff, turn_ids, m, nturn) * tv)
  adv, info = step_episode_mix(step_r, turn_ids, jnp.asarray(episode_rewards, dt), group_id, mask=mask,
                               step_weight=step_weight, gamma=gamma, turn_valid=tv, valid=valid,
                               num_groups=num_groups, eps=eps, std_ddof=std_ddof)
  return jax.lax.stop_gradient(adv), {**info, "step_rewards": step_r,
                                      "step_reward_mean": jnp.sum(step_r) / jnp.maximum(jnp.sum(tv), 1)}


def _implicit_progress_reward_stage(beta: float = 1.0):
  """The implicit progress reward as a dense reward (a ``Shaping`` stage, phase ``"forward"``).

      r_t = score_t + β·(log π_old(y_t) − log π_ref(y_t))        on completion tokens of valid rows

  The abstract (seed 001 L167) gives the dense reward β·log(π/π_ref); how it joins the outcome reward is ours:
  it is added to the step's token rewards (the outcome reward on the last token when no stage wrote token
  rewards), as ``kl_in_reward`` subtracts its KL. Token-level estimators (``reinforce_pp``, ``gae``, ``remax``)
  then credit each token; outcome estimators see the summed reward. π_old is the policy that sampled the step.
  """
  from rljax.advantages import _stages as S  # pylint: disable=import-outside-toplevel
  from rljax.stages import Shaping  # pylint: disable=import-outside-toplevel
  implicit_progress_reward(np.zeros((1, 1)), np.zeros((1, 1)), np.ones((1, 1)), beta=beta)  # validates

  def fn(data):
    mask = S.completion(data)
    dense, info = implicit_progress_reward(data.require("logp_old", "implicit_progress_reward"),
                                           data.require("logp_ref", "implicit_progress_reward"), mask, beta=beta)
    if data.token_rewards is not None:
      scores = data.token_rewards
    else:
      last = np.where(mask.any(1), mask.shape[1] - 1 - np.argmax(mask[:, ::-1], 1), 0)
      scores = np.zeros(mask.shape, np.result_type(np.float32, data.rewards.dtype))
      scores[np.arange(mask.shape[0]), last] = np.where(mask.any(1), data.rewards, 0.0)
    dense = np.asarray(dense)
    return scores + dense.astype(np.result_type(np.float32, dense.dtype)), {"mean": info["mean"]}

  return Shaping(fn, name="implicit_progress_reward", phase="forward", needs={"logp_old", "logp_ref"})


_implicit_progress_reward_stage.slot = "shaping"


_S0 = "seed 000_3e503271be254a43.txt"
_S1 = "seed 001_5839a3671b0b4d92.txt"


_BAE_READ = ("arXiv 2602.10231 Sec. 3.1 (GRPO: population σ + ϵ), Sec. 4.2 (blockwise decomposition, per-block "
             "token mean in the loss), Sec. 4.3 (baselines 1-4, OCB), Sec. 5.2 (main runs: centred, no std, β = 0), "
             "Table 4 (group_size 32, batch 2048), App. B Algorithm 1 (page read: the paper text in the code index, "
             "file id 60886396402, offsets 8000-24000 and 42300-58300)")


def _technique_rows():
  from rljax._technique import Fidelity, Technique
  from rljax.advantages import _stages as S
  return (
      Technique("segment", "advantage", segment, "A_{i,t} = Σ_k 1[seg_{i,t}=k]·grpo(r^(k))_i",
                f"{_S1} L25, L57, L79; arXiv 2602.10231",
                # segments="rewards": reward k (column k of reward_components) scores segment k of each completion
                # (reward_segments [B, T]); segments="turns" (episodes): turn k's step reward scores turn k (turn_ids),
                # and a row without turn k (step_mask) neither gets nor gives a baseline for it
                stage=S.chosen(
                    segment, "segments", "rewards", {
                        "rewards": {"rewards": "reward_components", "segment_ids": "reward_segments",
                                    "segment_valid": S.absent},
                        "turns": {"rewards": "step_rewards", "segment_ids": "turn_ids", "segment_valid": "step_mask"}},
                    inputs={"mask": S.completion, **S.ROWS},
                    doc="Segment-routed advantages ``A_{i,t} = Σ_k 1[seg_{i,t} = k]·grpo(r^(k))_i``. "
                        "``segments='rewards'`` (default): the reward components and the reward segments of each "
                        "completion; ``'turns'``: a multi-turn task's per-turn step rewards routed by ``turn_ids``, "
                        "``segment_valid`` = the turns each episode played (``step_mask``)."),
                fidelity=Fidelity("paper_formula", "arXiv 2602.10231 (Blockwise AE) Sec. 4.2-4.3, App. B Alg. 1 "
                                  "(paper text; no code found)",
                                  "paper: A_k = r_k − group mean on block k, std optional (main runs none: "
                                  "scale='none'); default divides by the group std (GRPO's; SLCA/DSS-GRPO's "
                                  "abstracts state no std rule); later blocks: outcome_conditioned_baseline",
                                  read=_BAE_READ + ". Seventeenth draw (#51 item 4, seed 20261222): seed 001 L57 "
                                       "(SLCA-GRPO) and L79 (DSS-GRPO) are abstracts only: 'decouples advantage "
                                       "estimation at the structural segment level within a single group of "
                                       "rollouts', 'computes group-relative advantages per segment ... "
                                       "difficulty-aware scaling'; neither states a std division, which the record "
                                       "said ours shares with them ('as SLCA/DSS-GRPO')",
                                  defaults=(("scale", "'group' (÷ σ_g + ε)", "none in the main runs (Sec. 5.2); "
                                                                            "'optional variance normalization'"),
                                            ("eps", "1e-6", "ϵ, value not stated"),
                                            ("std_ddof", "1", "population σ (Sec. 3.1), when used"),
                                            ("later-block baseline", "the group mean (their item 3)",
                                             "the OCB stratum mean (Algorithm 1 lines 6-8)"),
                                            ("group size", "the step's groups", "group_size 32 (Table 4)"),
                                            ("entropy control (not this stage's)", "none (the recipe's)",
                                             "dynamic entropy regularisation (Sec. 5.2): target_entropy 0.2, "
                                             "eta_delta 5e-4 (Table 4; #51 rI)")),
                                  placement="theirs: per prompt group, block k's advantage applied only to block "
                                            "k's tokens, each block's token loss averaged over the block; ours: the "
                                            "advantage stage, once per step, each reward column routed to its "
                                            "segment's tokens (reward_segments, or turn_ids with segments='turns'), "
                                            "padded rows excluded; the loss aggregates every token alike (the "
                                            "recipe's aggregation: no aggregation sees the segment ids)",
                                  deviations=(
                                      "default divides by the group std (GRPO's; the SLCA-GRPO and DSS-GRPO "
                                      "abstracts, seed L57 / L79, say group-relative advantages per segment and "
                                      "give no std rule); scale='none' is the paper's main runs",
                                      "every block's baseline is its group mean (their 'Group Mean Baseline'); "
                                      "their Algorithm 1 uses the outcome-conditioned stratum mean for blocks "
                                      "k > 1: compute it with outcome_conditioned_baseline and route it",
                                      "a singleton group gives 0 (singleton='zero'); the paper has G ≥ 2",
                                      "std_ddof=1 by default; the paper's σ is the population std",
                                      "their loss averages each block's tokens over that block (Σ_k |T_k|⁻¹ "
                                      "Σ_{t∈T_k}, w_k = 1, Sec. 4.2), so a short block weighs as much as a long "
                                      "one; no rljax aggregation does (they take (loss, mask), not the segment "
                                      "ids): token_mean weighs blocks by their length. Fifth draw (#51 item 4): "
                                      "the record called it 'the aggregation's choice'"))),
      Technique("outcome_conditioned_baseline", "advantage", outcome_conditioned_baseline,
                "A_i = r_i − mean{r_j : g_j = g_i, o_j = o_i}",
                f"{_S1} L25; arXiv 2602.10231",
                stage=S.chosen(
                    outcome_conditioned_baseline, "outcome", "correct", {
                        "correct": {"outcome": lambda data: S.passed(data).astype(np.int32)},
                        "answer_ids": {"outcome": "answer_ids"}},
                    inputs={**S.GROUP},
                    doc="Blockwise Advantage Estimation's outcome-conditioned baseline ``A_i = r_i − mean{r_j : same "
                        "group, same outcome}``. The paper's outcome is an intermediate (prefix) result; single-turn, "
                        "ours is ``outcome='correct'`` (the verifier's verdict, default: when the reward is exactly "
                        "that verdict every stratum is constant and A = 0; it ranks rows by the reward's other parts) "
                        "or ``'answer_ids'``."),
                fidelity=Fidelity("paper_formula", "arXiv 2602.10231 (Blockwise AE) Sec. 4.3 item 4, App. B Alg. 1 "
                                  "lines 7-10 (paper text; no code found)",
                                  "default (stratum mean, no std) = the main runs; scale='group' (stratum std, "
                                  "ddof 1) is our form of the paper's optional GRPO normalization (population σ, "
                                  "Sec. 3.1/4.3): std_ddof=0 for theirs",
                                  read=_BAE_READ + ". Tenth draw (#51 item 4): Sec. 4.3's 'Aˆ = r − bˆ (with "
                                       "optional variance normalization as in GRPO)' was read as 'scale=group is "
                                       "ours'; the record listed neither std_ddof nor eps",
                                  defaults=(("scale", "'none'", "none in the main runs (A = r − b, Sec. 5.2: no "
                                                                "advantage standardization); Sec. 4.3 allows "
                                                                "'optional variance normalization as in GRPO'"),
                                            ("std_ddof (scale='group' only)", "1",
                                             "population σ (GRPO's, Sec. 3.1), when the optional normalization is "
                                             "used; over which set (stratum or group) not stated"),
                                            ("eps (scale='group' only)", "1e-6", "ϵ, value not stated (Sec. 3.1)"),
                                            ("outcome", "'correct' (the verifier's verdict)",
                                             "o ∈ {correct, incorrect} of the prefix block (main experiments)"),
                                            ("group size", "the step's groups", "group_size 32 (Table 4)"),
                                            ("entropy control (not this stage's)", "none (the recipe's)",
                                             "dynamic entropy regularisation (Sec. 5.2): target_entropy 0.2, "
                                             "eta_delta 5e-4 (Table 4; #51 rI)")),
                                  placement="theirs: for each block k > 1 of each prompt group, the group's rollouts "
                                            "stratified by the intermediate outcome of their prefix X_<k, b = the "
                                            "stratum mean of r_k, A applied to block k's tokens; ours: the advantage "
                                            "stage, once per step on the step's rows grouped by group_id, stratified "
                                            "by the verifier's verdict (or answer_ids), the [B] result broadcast over "
                                            "completion tokens (route it to a block with segment/to_tokens)",
                                  deviations=(
                                      "single-turn use stratifies by the final verdict, not by a prefix block's "
                                      "outcome: when the reward is exactly that verdict every stratum is constant "
                                      "and A = 0",
                                      "scale='group' divides by the stratum's std with ddof=1 (default std_ddof) "
                                      "+ 1e-6; the paper's optional normalization 'as in GRPO' (Sec. 4.3) uses the "
                                      "population σ + ϵ (Sec. 3.1) and does not say whether over the stratum or the "
                                      "group, nor ϵ: std_ddof=0 gives the population std over the stratum; off in "
                                      "their main runs and in our default",
                                      "a singleton stratum gives 0, as the paper's own-reward mean"))),
      Technique("tempo", "advantage", tempo,
                "A_{i,t} = A_i^GRPO + (V(s_{t+1}) − V(s_t))/(σ_g + ε), V = mean descendant reward",
                f"{_S1} L23",
                # the prefix tree is built from the tokens of each group's valid completions
                stage=S.checked(tempo, inputs={**S.GROUP, "tokens": "tokens", "mask": S.completion}),
                fidelity=Fidelity("authors_code", "github.com/fatebreaker/tempo: verl/trainer/ppo/core_algos.py "
                                  "(compute_tempo_outcome_advantage)",
                                  "= theirs at the defaults (σ_g torch.std ddof 1 + 1e-6 on both terms, the root "
                                  "branch counted, c = 1); a one-row group: theirs NaN, ours 0",
                                  read="fatebreaker/tempo@0a1c273d (2025-11-17, fetched snapshot; the authors' code, "
                                       "linked as 'Code: github.com/fatebreaker/tempo' by a summary in the code "
                                       "index, read_file id 51978558250) verl/trainer/ppo/core_algos.py:261-352 "
                                       "compute_tempo_outcome_advantage (R = Σ token_level_rewards; per uid "
                                       "group_mean and group_std = torch.std (unbiased) of the raw R; for each "
                                       "row, token j: branch = the rows of the previous branch whose response "
                                       "token j equals the row's, ancestor = the previous branch, A = (R_i − "
                                       "group_mean + mean R(branch) − mean R(ancestor)) / (group_std + 1e-6) "
                                       "(epsilon default, :269), or without the ÷ when norm_adv_by_std_in_grpo "
                                       "is False; a branch of one row fills the rest of the row, :346-348; "
                                       "the GRPO pass at :299-317 is overwritten token by token), :204-258 "
                                       "compute_grpo_outcome_advantage; verl/trainer/ppo/ray_trainer.py:264-284 "
                                       "(dispatch: response_mask, loss_mask when multi-turn), :1055-1060 (one uid "
                                       "per prompt, repeat rollout.n interleaved), :1082, :1086, :1155-1168 "
                                       "(compute_advantage after the reward and the old log-probs, "
                                       "norm_adv_by_std_in_grpo from algorithm config); "
                                       "verl/trainer/config/ppo_trainer.yaml:388-399 (rollout temperature 1.0, "
                                       "top_k −1, top_p 1, enable_tree_structure False), :847 "
                                       "(norm_adv_by_std_in_grpo True); train_math_tempo.sh and "
                                       "train_med_tempo.sh (adv_estimator tempo, rollout.n 7, train_batch_size "
                                       "512, max_response_length 8192, lr 1e-6, clip_ratio 0.2 / 0.28, no KL, "
                                       "entropy_coeff 0, 15 epochs, Qwen3-1.7B; at 7ba09982 (2025-09-19): "
                                       "max_response_length 2048, train_batch_size 256); "
                                       "verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py:300-398 "
                                       "(enable_tree_structure: each further rollout restarts from the "
                                       "highest-entropy position so far; off in the yaml, commented out in the "
                                       "scripts). Eleventh draw (#51 item 4, seed 20261216): the record said "
                                       "'abstract only ... no code' and left eps / std_ddof, the root branch and "
                                       "the singleton group 'not read'; the code answers each. Before: arXiv "
                                       "2509.18314v2 (page read: arxiv.org/html/2509.18314v2, pages corpus: title, "
                                       "abstract), openreview.net/forum?id=GRbI7kqA6S, alphaxiv.org/overview/"
                                       "2509.18314 (secondary), and the paper's ICLR 2026 reviews (code index, "
                                       "read_file id 61930317164; 'Withdrawn'): review 1, 'the rationale for "
                                       "standardizing the TD error by dividing it by std(r) is unclear' (the "
                                       "advantage at the paper's line 299), small group sizes (≤ 9); review 3, "
                                       "'the authors set the maximum response length to 1024 tokens'; review 4, "
                                       "'the maximum response length is only around 1k tokens' (Table 2) and 'the "
                                       "number of training iterations on Math is 220'",
                                  defaults=(("V(s)", "mean raw reward of the group's valid responses below s",
                                             "mean raw R of the rows sharing the prefix (core_algos.py:335-340: "
                                             "the branch / ancestor means of response_scores)"),
                                            ("TD scale", "÷ (σ_g + ε) (scale='group'), c = td_coef = 1.0",
                                             "÷ (group_std + 1e-6), group_std = torch.std (ddof 1) of the "
                                             "group's raw R (core_algos.py:329, 342; review 1: 'std(r)'); "
                                             "no coefficient"),
                                            ("norm_adv_by_std_in_grpo", "scale='group' (÷ σ_g + ε); "
                                             "scale='none' drops it from both terms",
                                             "True (ppo_trainer.yaml:847; neither script sets it); False: "
                                             "R_i − group_mean + mean R(branch) − mean R(ancestor), undivided "
                                             "(:344)"),
                                            ("root branch", "counted (root_branch=True)",
                                             "counted: at token 0 the ancestor is the whole group, so V(root) "
                                             "= group mean (core_algos.py:326-337)"),
                                            ("eps, std_ddof", "1e-6, 1 (GRPO's)",
                                             "epsilon 1e-6 (:269), torch.std unbiased (ddof 1) (:309, 329)"),
                                            ("singleton group", "0 (singleton='zero'; 'raw': r/(1 + ε))",
                                             "NaN on every token: torch.std of one value (ddof 1) is NaN "
                                             "(:329, 342); the GRPO pass's mean 0 / std 1 (:304-306) is "
                                             "overwritten"),
                                            ("group size (their runs)", "the recipe's",
                                             "rollout.n 7 (both scripts); the paper studies group sizes ≤ 9 "
                                             "(review 1)"),
                                            ("max response length (their runs)", "the recipe's max_new_tokens",
                                             "8192 in the scripts at 0a1c273d (2048 at 7ba09982); the paper "
                                             "≈ 1k tokens, 1024 (Table 2; reviews 3, 4)"),
                                            ("training steps (their runs)", "the recipe's",
                                             "15 epochs of 512 prompts (scripts); 220 on MATH (review 4)"),
                                            ("sampling (their runs)", "the recipe's",
                                             "temperature 1.0, top_k −1, top_p 1 (ppo_trainer.yaml:388-394); "
                                             "enable_tree_structure False")),
                                  placement="theirs: verl's ray_trainer fit, once per step after the reward and "
                                            "the old log-probs, on the whole batch grouped by uid (one uid per "
                                            "prompt, rollout.n rows), comparing the right-padded response "
                                            "tokens column by column from the response's first token, over "
                                            "each row's response_mask; ours: the advantage stage, once per "
                                            "step on the step's valid rows grouped by group_id, prefixes "
                                            "compared token by token from the completion's first column "
                                            "(responses aligned; tokens outside the completion mask compared "
                                            "as −1)",
                                  deviations=(
                                      "a one-row group gets 0 here (singleton='zero'); theirs NaN on every "
                                      "token (torch.std of one value with ddof 1; their runs, rollout.n 7, "
                                      "never have one); singleton='raw' gives r/(1 + ε), the GRPO pass they "
                                      "overwrite",
                                      "the TD term and the GRPO term share σ_g + ε with ddof 1, theirs; the "
                                      "paper's text (review 1: 'dividing it by std(r)') leaves the ddof open: "
                                      "std_ddof=0, eps=0 gives the population std(r)",
                                      "rows outside `valid` (filtered, padded) are not in the group or its tree "
                                      "here; theirs has no such rows",
                                      "theirs compares a row's token with the other rows' raw response tokens "
                                      "(pad ids past their end); ours compares −1 past the completion mask: the "
                                      "same classes unless a row's real token equals the pad id where another "
                                      "row has ended",
                                      "their entropy-branching rollout (enable_tree_structure, "
                                      "vllm_rollout_spmd.py:300-398: each further rollout restarts from the "
                                      "highest-entropy position of the earlier ones) is not built; off in the "
                                      "yaml and in both scripts",
                                      "root_branch=False (drop the TD at each row's first completion token) "
                                      "is ours; theirs always counts it",
                                      "with multi-turn rollouts (rollout.multi_turn.enable; off in their "
                                      "scripts) their mask is the loss_mask (ray_trainer.py:266-272) and the "
                                      "walk stops at a row's first masked-out token (core_algos.py:333-334): the "
                                      "later model tokens keep the GRPO pass, no TD; ours keeps comparing past "
                                      "masked tokens (as −1) and gives them TD terms"))),
      Technique("step_episode_mix", "advantage", step_episode_mix,
                "A = w·norm_m(Σ_k γ^k r_{m+k}) + w_ep·A_ep, A_ep = grpo(R) | norm(r_m)",
                f"{_S1} L127 (UI-S1, arXiv 2509.11543); {_S0} L67",
                # per-turn rewards = the task's step rewards (one per turn, step_mask = turns that exist); episode =
                # rewards
                stage=S.checked(step_episode_mix, inputs={
                    "turn_rewards": "step_rewards", "turn_ids": "turn_ids", "episode_rewards": "rewards",
                    "mask": S.completion, "turn_valid": "step_mask", **S.ROWS}),
                fidelity=Fidelity("authors_code", "github.com/X-PLUG/MobileAgent: UI-S1/uis1/core_uis1.py "
                                  "(compute_uis1_outcome_advantage)",
                                  "authors = step_weight=1, episode_weight=1, episode='turns', γ=0.5 (their A_ep: "
                                  "turn reward over the group's pooled turns); default: convex mix with grpo(R); no "
                                  "expert-mismatch restart",
                                  read="X-PLUG/MobileAgent@93afb003 UI-S1/uis1/core_uis1.py (stored copy, read_file): "
                                       "compute_step_discounted_returns (γ return per trajectory, restarted at a turn "
                                       "with extract_match False), compute_uis1_outcome_advantage, "
                                       "episode_norm_reward (pooled over every row of the uid, singleton mean 0 std "
                                       "1), "
                                       "step_norm_reward (grouped by uid and step id, singleton mean = itself); "
                                       "UI-S1/scripts/train_example.sh@12d958e9 (mode=mean_std_norm, GAMMA=0.5, "
                                       "step_advantage_w=1.0, rollout.n=8). #51 read-whole pass (rB): the same "
                                       "script also sets DAPO=True: algorithm.filter_groups.enable=True, metric "
                                       "'seq_future_reward', std_threshold=0.3, and patch_threshold=2, run by "
                                       "verl.trainer.main_dapo; UI-S1/verl/trainer/ppo/dapo_ray_trainer.py@f7702e46 "
                                       "RayTrajDAPOTrainer.fit (compute_step_discounted_returns on the generated "
                                       "turns, then the filter: per uid the np.std (ddof 0) of the step-0 discounted "
                                       "returns, groups kept when std > std_threshold or a single trajectory, "
                                       "generation repeated until train_batch_size uids, at most "
                                       "max_num_gen_batches = 10; then compute_advantage with the yaml's "
                                       "uis1.episode_advantage_w); UI-S1/verl/trainer/config/ppo_trainer.yaml@"
                                       "f7702e46 (algorithm.uis1: episode_advantage_w 1.0, step_advantage_w 1.0, mode "
                                       "'mean_norm'; filter_groups enable false, metric seq_final_reward, "
                                       "std_threshold 0.1, max_num_gen_batches 10; patch_threshold 0). "
                                       "Eighteenth draw (#51 item 4, seed 20261223): dapo_ray_trainer.py:379-387 "
                                       "(with fewer than train_batch_size kept uids after max_num_gen_batches = 10 "
                                       "generation batches, fit raises ValueError: the run stops); "
                                       "UI-S1/scripts/train_example.sh@d3de2cf4 (the same values as @12d958e9): :44, "
                                       ":59 (data.train_batch_size = WORLD_SIZE × 8 prompts), :53-55 (main_dapo with "
                                       "--config-name traj_grpo: UI-S1/examples/qwen_gui_static_grpo/config/"
                                       "traj_grpo.yaml, whose defaults take ppo_trainer.yaml's algorithm block "
                                       "unchanged), :89 (rollout.n = 8); the second script UI-S1/scripts/"
                                       "train_example_32b.sh@6ea68d40 (Qwen2.5-VL-32B, BATCH_SIZE = WORLD_SIZE, the "
                                       "same uis1, gamma and filter values) passes algorithm.PATCH_THRESHOLD (:95) "
                                       "and algorithm.filter_groups.std_DAPO_THRESHOLD (:98), keys the config does not "
                                       "have: Hydra refuses them ('Could not override', composing traj_grpo with "
                                       "hydra-core 1.3.2), so it does not start as released; the record said "
                                       "'resampling up to 10 generation batches', gave no group size or batch, and "
                                       "did not name the 32B script",
                                  defaults=(("step_weight", "0.5", "step_advantage_w = 1.0"),
                                            ("episode_weight", "1 − step_weight = 0.5",
                                             "episode_advantage_w = 1.0 (function default)"),
                                            ("episode", "'outcome' (grpo of the episode reward)",
                                             "the turn's own reward over the uid's pooled turns ('turns')"),
                                            ("gamma", "1.0", "algorithm.gamma = 0.5 (script)"),
                                            ("std", "÷ (std + 1e-6), ddof 1",
                                             "mode = 'mean_std_norm' (script; function default 'mean_norm', no σ), "
                                             "torch.std unbiased, + 1e-6"),
                                            ("group filter (not this stage's)", "none",
                                             "filter_groups on (script DAPO=True; yaml false): keep a uid when "
                                             "np.std of its trajectories' step-0 discounted returns > 0.3 "
                                             "(script; yaml 0.1), regenerating until train_batch_size uids are kept; "
                                             "after max_num_gen_batches = 10 batches still short, fit raises "
                                             "ValueError and the run stops (dapo_ray_trainer.py:379-387)"),
                                            ("group size / batch", "the step's groups (group_id)",
                                             "rollout.n = 8 trajectories per task; data.train_batch_size = "
                                             "WORLD_SIZE × 8 tasks (train_example.sh:44, 59, 89; "
                                             "train_example_32b.sh: WORLD_SIZE, and it does not start as "
                                             "released)"),
                                            ("expert patching (rollout, not this stage's)", "none",
                                             "patch_threshold = 2 (script; yaml 0): MultiRoundGenerator's "
                                             "expert-action patches of mismatched turns")),
                                  placement="theirs: the driver's advantage step, once per step on the batch of "
                                            "turn rows (one row per (trajectory, step)), grouped by uid (pooled "
                                            "episode term) and by (uid, step id) (step term), each row's advantage "
                                            "broadcast over its response tokens; ours: the advantage stage, once per "
                                            "step on the step's multi-turn rows (one row per trajectory, turn_ids "
                                            "map tokens to turns), padded rows and turns excluded; theirs runs "
                                            "AFTER the script's group filter (uids whose step-0 discounted returns "
                                            "have std ≤ 0.3 dropped and regenerated), so every trained group has "
                                            "spread; ours on every group of the step",
                                  deviations=(
                                      "defaults are a convex mix with the outcome GRPO (the abstract's weighted "
                                      "step- and episode-level advantages); step_weight=1, episode_weight=1, "
                                      "episode='turns', gamma=0.5 is their script",
                                      "their return chain restarts at a turn whose action did not match the expert "
                                      "(extract_match False: G = r there); ours never restarts",
                                      "a pooled group with a single turn: theirs r/(1+ε), ours 0",
                                      "the std is always used (÷ σ + ε); their function default mode='mean_norm' "
                                      "drops it (their script uses mean_std_norm)",
                                      "their script's group filter (std of the step-0 discounted returns > 0.3, "
                                      "ddof 0, before the advantage) is not built: rljax's zero_variance filter "
                                      "tests a range > atol on the metric it is given, not a std threshold; "
                                      "patch_threshold (their semi-online expert patching during the rollout) is "
                                      "not built either",
                                      "their second launch script, train_example_32b.sh, does not start as "
                                      "released: algorithm.PATCH_THRESHOLD and algorithm.filter_groups."
                                      "std_DAPO_THRESHOLD are not keys of their config (Hydra refuses the override); "
                                      "its values are train_example.sh's but for BATCH_SIZE = WORLD_SIZE"))),
      Technique("sign_preserving_modulation", "advantage", sign_preserving_modulation,
                "A' = A·(1 + λ ε_w tanh(sgn(A)·z_turn)), z = signal standardised over the group's turns",
                f"{_S1} L3",
                # per-turn signal = the task's step rewards (TurnSight's hindsight score); advantages [B] or [B, T]
                stage=S.checked(sign_preserving_modulation, inputs={
                    "advantages": "advantages", "signal": "step_rewards", "turn_ids": "turn_ids", "mask": S.completion,
                    "turn_valid": "step_mask", **S.ROWS}, transform=True),
                fidelity=Fidelity("paper_formula", "arXiv 2608.04007 (TurnSight) 'Group-Normalized Weight "
                                  "Construction', 'Advantage Integration' (paper text)",
                                  "defaults = paper's (λ = ε_w = 0.5, signed); it pools token-level gaps, we pool "
                                  "per-turn values; code (github.com/quchangle1/TurnSight) not in our store",
                                  read="arXiv 2608.04007v1 'Group-Normalized Weight Construction' (δ̂ = (δ̄* − μ_q)/(σ_q "
                                       "+ ε), μ, σ over the selected token-level gaps of all valid turns and policy "
                                       "tokens of the query's sibling rollouts; w = 1 + ε_w tanh(sign(A_base)·δ̂)), "
                                       "'Advantage Integration' (Ã = A_base[(1 − λ) + λw]), 'Implementation Details' "
                                       "(λ = ε_w = 0.5, 16 trajectories per query, ≤ 10 turns, MatchTIR as the base) "
                                       "(page read: the paper text in the code index, file id 70801290449, offsets "
                                       "20500-36500). #51 read-whole pass (rF): the same offsets re-read "
                                       "(Objective Function, Implementation Details: batch, KL). Per-row review n "
                                       "(#51): Appendix B (offsets 64950-68982), unread before: Table 4 (query "
                                       "batch 32, PPO mini-batch 32, rollouts per query 16, ≤ 10 turns, sampling "
                                       "temperature 1.0, lr 1e-6, max prompt / response 10,000 / 13,000 tokens, "
                                       "3 epochs, KL 0, D_H = {1, 2, 3}, λ = ε_w = 0.5) and 'Prompt-Group "
                                       "Normalization' (one pool per query: the selected gaps at every valid "
                                       "policy-token position of all 16 rollouts, observation tokens excluded, "
                                       "not partitioned by turn index)",
                                  defaults=(("lam", "0.5", "λ = 0.5"), ("eps_w", "0.5", "ε_w = 0.5"),
                                            ("signed", "True", "sign(A_base) inside the tanh"),
                                            ("norm", "'pooled' (per-turn values)",
                                             "pooled over the token-level gaps of all valid turns"),
                                            ("eps", "1e-6", "ε, value not stated"),
                                            ("std", "population", "'standard deviation', ddof not stated"),
                                            ("signal", "the step's step_rewards (stage)",
                                             "the selected hindsight gap δ̄* of execution-conditioned teachers "
                                             "(3 lookahead depths)"),
                                            ("group size", "the step's groups (group_id)",
                                             "16 trajectories per query, 32 queries per batch, ≤ 10 turns "
                                             "(Implementation Details)"),
                                            ("KL", "not part of the row", "none ('We do not apply an explicit "
                                             "KL-divergence regularizer')"),
                                            ("loss aggregation", "the recipe's (not part of the row)",
                                             "1/G Σ_i 1/|τ_i| Σ_t (per-trajectory token mean, J_TurnSight); clip ε "
                                             "value not stated"),
                                            ("sampling temperature (their runs)", "the recipe's (rl.temperature)",
                                             "1.0 (Appendix B Table 4; per-row review n)"),
                                            ("PPO mini-batch (their runs)", "the recipe's",
                                             "32 queries = the query batch: one policy update per batch (Table 4)"),
                                            ("lr, lengths, epochs (their runs)", "the recipe's",
                                             "lr 1e-6, max prompt 10,000 / response 13,000 tokens, 3 epochs "
                                             "(Table 4)")),
                                  placement="theirs: inside the GRPO-style step, after the base advantage "
                                            "(MatchTIR's), per token of turn k from that turn's selected hindsight "
                                            "gap, normalised per query over the sibling rollouts; ours: a transform "
                                            "of the advantage stage's output, once per step, the per-turn signal "
                                            "= the task's step rewards (turn_valid = step_mask), normalised per "
                                            "group_id",
                                  deviations=(
                                      "μ, σ over the per-turn signal (each turn once); the paper's over the "
                                      "token-level gaps (token-weighted)",
                                      "the hindsight teachers are not part of rljax: the stage's signal is the "
                                      "task's step rewards",
                                      "norm='turn_index', signed=False and eps_w=1 (our earlier reading) are "
                                      "options, not the paper's"))),
      Technique("implicit_progress_reward", "advantage", implicit_progress_reward,
                "r_t = β(log π − log π_ref), stop-gradient",
                f"{_S1} L167; arXiv 2606.26080",
                stage=_implicit_progress_reward_stage,
                fidelity=Fidelity("authors_code", "github.com/deeplearning-wisc/progress-advantage: pa/scoring.py "
                                  "(per_step_progress_advantage); runners/tau2_bon.py (_score_one)",
                                  "authors score a step by β·(agg log π − agg log π_ref), agg = token sum (= our "
                                  "per-step sum) or mean (their scripts); they score trajectories at test time, using "
                                  "it as a training reward is ours",
                                  read="deeplearning-wisc/progress-advantage@9284b4c0 pa/scoring.py (stored copy, "
                                       "read_file): LogprobScorer.score (one forward pass, gathered token log-probs "
                                       "per action span), per_step_progress_advantage, "
                                       "score_trajectory_progress_advantage; scripts/tau2_bon8.sh@b1253bdd "
                                       "(--token-agg mean --step-agg min, β not set: 1.0), scripts/webshop_bon8.sh "
                                       "(per-backbone aggregations), pa/aggregations.py (the choices). #51 "
                                       "read-whole pass (rB): runners/tau2_bon.py@b1253bdd (methods "
                                       "progress_advantage / policy_logprob / self_certainty / deepconf_*; π_ref "
                                       "loaded only for progress_advantage; max_length 16384, beta 1.0), "
                                       "pa/models.py@b1253bdd MODEL_PAIRS (policy / reference checkpoints: "
                                       "Qwen3.5-9B / Qwen3.5-9B-Base, Qwen3-14B / Qwen3-14B-Base, gemma-4-E4B-it / "
                                       "gemma-4-E4B, Olmo-3-7B-Instruct / Olmo-3-7B-Instruct-DPO); scoring.py "
                                       "LogprobScorer.score: each message tokenized alone (no chat template) and "
                                       "concatenated after BOS, left-truncated to max_length; reference None: "
                                       "β·agg log π alone. Error-class sweep (#51, s2b): the caller: both scripts "
                                       "(tau2_bon8.sh, webshop_bon8.sh with --domain webshop) run python -m "
                                       "runners.tau2_bon, whose run() scores each simulation with its own "
                                       "_score_one (branch 'progress_advantage'), not with scoring.py's "
                                       "per_step_progress_advantage / score_trajectory_progress_advantage; "
                                       "LogprobScorer.score's log-probs are log_softmax of the raw logits (no "
                                       "temperature, --dtype bfloat16 forward). Per-row review d (#51): the README "
                                       "(@6fae472f) names three uses, each with its own script and runner: TTS "
                                       "(webshop_bon8.sh, the record's), UQ (scripts/tau2_uq_onpolicy.sh@b1253bdd "
                                       "→ runners.tau2_uq: per backbone and domain --token-aggs / --step-aggs "
                                       "gemma4-4b airline max / min, retail min / last; qwen3.5-9b airline max / "
                                       "mean, retail max / last; AUROC of the trajectory score) and FA "
                                       "(scripts/fa.sh@b1253bdd → runners/fa.py@b1253bdd: --token-aggs sum, "
                                       "run()'s default min, beta 1.0; _step_rewards gives every action step "
                                       "β·(Σ log π − Σ log π_ref) over its tokens, a non-action step 0, a step "
                                       "whose reference span is empty β·Σ log π; no step aggregation: the running "
                                       "sum cumsum(A) and its argmin (or the sharpest drop) predict the failing "
                                       "step); pa/merging.py@6fae472f MergedReference (the reference may be the "
                                       "weight-space merge π_α = π_ref + α·τ of the two checkpoints, README 6.2; "
                                       "linear, ties, dare_linear, dare_ties or emr); the "
                                       "record read only the TTS runner and called the scripts' use best-of-n. "
                                       "Seventeenth draw (#51 item 4, seed 20261222): the cited commit 9284b4c0 "
                                       "also holds runners/sokoban_bon.py and runners/merged_bon.py (with "
                                       "runners/combine_sokoban_bon.py, combine_merged_bon.py; no script and no "
                                       "README entry launches them), best-of-N over Sokoban rollouts (agent_r1 "
                                       "simulations, reward 1 / 0): sokoban_bon.py takes any policy / reference "
                                       "checkpoint paths ('Sokoban RL checkpoints are not in "
                                       "pa.models.MODEL_PAIRS'), scores pa_{token}_{step} over token mean / min / "
                                       "max / last × step mean / min / last / max, and its headline "
                                       "progress_advantage is 'the a-priori (mean, mean) cell (length-"
                                       "normalised, no oracle tuning)' (PRIMARY_TOKEN_AGG / PRIMARY_STEP_AGG "
                                       "'mean'); _pa_score has no β (= 1) and scores an empty span of either "
                                       "model as 0 for that model (a trajectory without an action step: −inf); "
                                       "--max-length 16384, --dtype bfloat16; merged_bon.py scores the same "
                                       "(mean, mean) against a merged reference π_α = base + α(π_θ − base) "
                                       "(α 0.1..0.9, every pa.merging method, density 0.2, --max-length 8192), "
                                       "--base-path 'the base reference (Qwen2.5-3B)': the pair is an RL run's "
                                       "checkpoint and its starting model",
                                  defaults=(("beta", "1.0", "beta = 1.0"),
                                            ("token aggregation", "sum over a step's tokens (the dense rewards "
                                             "summed)", "--token-agg mean (tau2_bon8.sh); webshop_bon8.sh per "
                                             "backbone: min (qwen3.5-9b, its default), max (gemma4-4b), mean "
                                             "otherwise; tau2_uq_onpolicy.sh: max / min per backbone and domain; "
                                             "fa.sh: sum (= ours); sokoban_bon.py / merged_bon.py headline: mean"),
                                            ("step aggregation", "none (dense per-token reward)",
                                             "--step-agg min (tau2_bon8.sh; a trajectory score); webshop_bon8.sh: "
                                             "last (qwen3.5-9b), min (gemma4-4b), mean otherwise; "
                                             "tau2_uq_onpolicy.sh: min / last / mean per backbone and domain; "
                                             "fa.sh: none (the per-step A_t, "
                                             "their running sum); sokoban_bon.py / merged_bon.py headline: mean"),
                                            ("policy log-probs", "logp_old: the proximal policy (the parameters "
                                             "before this step's update) recomputed by the trainer's policy forward "
                                             "on the rollout tokens (rljax/stages/_data.py:133-135, "
                                             "rljax/train/_inputs.py:3-4), not the sampler's recorded log-probs "
                                             "(logp_behavior); the sampler's parameters in the synchronous loop, a "
                                             "newer version than the sampler's in async runs (rl.async eta ≥ 1); a "
                                             "replay stage with logp_old='behavior' puts the sampler's log-probs "
                                             "there for its stored rows (rljax/train/_phases.py:186-191) "
                                             "(nineteenth draw, #51: the record had said 'the sampling policy, "
                                             "recorded')",
                                             "a fresh forward pass of the policy model over the trajectory"),
                                            ("reference model", "the RL reference (logp_ref; usually the initial "
                                             "policy, so the reward is 0 until the policy moves)",
                                             "MODEL_PAIRS' reference: the policy checkpoint's pre-post-training base "
                                             "(…-Base; Olmo: the DPO checkpoint), a different model from the "
                                             "policy; sokoban_bon.py: any checkpoint pair (a Sokoban RL "
                                             "checkpoint and its reference); merged_bon.py: base Qwen2.5-3B or "
                                             "its merge toward the policy, π_α = base + α(π_θ − base)"),
                                            ("log-prob temperature", "none: logp_old and logp_ref are untempered "
                                             "log-probs of the sampled tokens",
                                             "none: LogprobScorer.score takes log_softmax of the raw logits of a "
                                             "bf16 forward (runners.tau2_bon --dtype bfloat16), whatever temperature "
                                             "sampled the cached rollouts (WebShop bon8: T = 0.7, data/README.md"
                                             "@b1253bdd)"),
                                            ("trajectory without an action step", "no completion token: no reward",
                                             "_score_one returns −inf (never selected unless every candidate has "
                                             "none)")),
                                  placement="theirs: at test time, a scoring pass over finished trajectories: "
                                            "best-of-n selection (tau2_bon8.sh, webshop_bon8.sh: runners/tau2_bon.py "
                                            "run() → _score_one, which re-implements scoring.py's formula) and "
                                            "success prediction (tau2_uq_onpolicy.sh), each action step scored "
                                            "β·(agg log π − agg log π_ref) and the steps aggregated to one score per "
                                            "trajectory; failure attribution (fa.sh: runners/fa.py) keeps the "
                                            "per-step scores (token sum) as a step reward and locates the failing "
                                            "step by their running sum; "
                                            "ours: a Shaping stage once per step after the forward passes, the "
                                            "per-token β·(log π_old − log π_ref) added to the step's token rewards "
                                            "on completion tokens of valid rows, before the advantage",
                                  deviations=(
                                      "used as a dense training reward (ours); theirs ranks trajectories at test "
                                      "time",
                                      "the Sokoban / merged-reference runners (runners/sokoban_bon.py, "
                                      "runners/merged_bon.py@9284b4c0) rank by the mean over steps of each step's "
                                      "token mean of log π − log π_ref (no β): the step mean of our per-token "
                                      "rewards' token means, not their sum; the merged reference (π_α between "
                                      "the base and the policy) is not built: ours compares with the RL "
                                      "reference alone",
                                      "per-token rewards whose per-step sum is their token_agg='sum' score (fa.sh's "
                                      "step reward); their best-of-n and UQ scripts' token mean / min / max and "
                                      "step min / last / mean are not offered, nor the "
                                      "other choices of pa/aggregations.py (tokens last / min / max; steps mean / "
                                      "sum / last / max / bottom10)",
                                      "a truncated action span scores 0 in theirs; here every completion token in "
                                      "the mask is scored",
                                      "which log-probs: theirs compare a post-trained checkpoint with its base (two "
                                      "fixed models, the trajectory re-tokenized message by message without a chat "
                                      "template); ours compare the proximal policy (recomputed by the trainer's "
                                      "forward, not the sampler's log-probs) with the RL reference on the sampled "
                                      "tokens, so at the first step (π_old = π_ref, both trainer forwards of the "
                                      "same parameters) the reward is 0",
                                      "scripts/tau2_bon8.sh (the first 'theirs' above: --token-agg mean --step-agg min) does not "
                                      "run as released: it reads cached rollouts at data/tau2/bon8/<pair>/ and fetches "
                                      "none, and data/README.md@b1253bdd says the τ²-Airline (and BFCLv4-MT, "
                                      "AgentDojo) best-of-8 rollouts 'are not hosted yet' (pa/data.py SCENARIOS: tts = "
                                      "webshop/** only); the TTS run that starts is webshop_bon8.sh (the README's), "
                                      "with its per-backbone aggregations (nineteenth draw, #51)",
                                      "their other scoring modes in the same runner, policy_logprob (β·agg log π, no "
                                      "reference; also per_step_progress_advantage with reference None) and the "
                                      "certainty baselines (self_certainty, deepconf_tail / b10), are not built"))),
      Technique("oprl", "advantage", oprl, "r_k = β Σ_{t∈turn k} log(π_φ/π_old) (default π_φ/π_old := π_old/π_ref); "
                "A = w·norm(Σ_j γ^{j−k} r_j) + (1−w)·grpo(R)", f"{_S0} L67 (OPRL / iStar, arXiv 2509.19199)",
                # OPRL / iStar: implicit step rewards β·log(π_φ/π_θold) summed per turn (turn_ids), step_mask = the
                # turns that exist. rljax trains no PRM: prm="policy" (default) reads β·log(π_old/π_ref), prm="extras" a
                # PRM's log-probs from data.extras["logp_prm"] [B, T] over π_old (the paper's reward)
                stage=S.chosen(
                    oprl, "prm", "policy", {
                        "policy": {"logp": "logp_old", "logp_ref": "logp_ref"},
                        "extras": {"logp": S.prm_logp, "logp_ref": "logp_old"}},
                    inputs={"turn_ids": "turn_ids", "episode_rewards": "rewards", "mask": S.completion,
                            "turn_valid": "step_mask", **S.ROWS},
                    needs={"policy": ("step_rewards",), "extras": ("step_rewards",)}, unprobed=("extras",),
                    doc="OPRL / iStar (``rljax.advantages.oprl``): implicit per-turn step rewards mixed with "
                        "episode-level GRPO. The paper's step reward is ``β·log π_φ/π_θold`` with π_φ a PRM trained by "
                        "trajectory DPO; ``prm='policy'`` (default, our interpretation: no PRM is trained) uses "
                        "``β·log π_old/π_ref``, ``prm='extras'`` the PRM log-probs a stage put in "
                        "``data.extras['logp_prm'] [B, T]`` over π_old."),
                fidelity=Fidelity("authors_code", "github.com/Tongyi-ConvAI/Tongyi-Character: "
                                  "CharacterRL-iStar/istar/dp_rm.py, istar/core_istar.py",
                                  "no PRM trained: default β·log π_old/π_ref (prm='extras': a PRM's log-probs over "
                                  "π_old, theirs); authors β=0.05, per-shard max-norm, A = RLOO(R) + w·RLOO(step r); "
                                  "ours step_episode_mix",
                                  read="Tongyi-ConvAI/Tongyi-Character@dfee104e (2025-12-25, fetched snapshot) "
                                       "CharacterRL-iStar/istar/dp_rm.py:53-208 _forward_micro_batch (q = "
                                       "rm_log_labels − old_log_probs when ref_module is None, r = β·q, "
                                       "step_granularity 'step': summed onto the step's last token), 220-224 "
                                       "istar_norm ('batch_norm': ÷ (max |reverse cumsum| over the rows it is given, "
                                       "one data-parallel rank's shard + 1e-6)); istar/core_istar.py:28-149 "
                                       "compute_istar_rloo_advantage, episode_rloo_reward, step_rloo_reward; "
                                       "verl/trainer/config/ppo_trainer.yaml:233-236, 267-273; "
                                       "examples/istar_trainer/run_sokoban.sh:22-78; "
                                       "verl/trainer/ppo/ray_trainer.py:373-396 (dispatch), 1242-1262 (update=after "
                                       "with loss_type eto: update_rm_eto returns the scores of its update forward), "
                                       "1289-1303 (compute_advantage's arguments, use_process_only from "
                                       "algorithm.istar). Eighth draw (#51 item 4): use_process_only was not in the "
                                       "record. Tenth draw (#51 item 4, seed 20261215): ray_trainer.py:204-239 "
                                       "apply_invalid_action_penalty, called at 1271-1276 "
                                       "(use_invalid_action_penalty True, invalid_action_penalty_coef 0.1: "
                                       "yaml:57-58, run_sokoban.sh:53-54, run_webshop.sh:50-51), "
                                       "agent_system/reward_manager/episode.py:79-100 (every step row's "
                                       "token_level_scores = its trajectory's episode_rewards on the row's last "
                                       "response token), agent_system/multi_turn_rollout/utils.py:71-108 "
                                       "adjust_batch (called at ray_trainer.py:1158) and "
                                       "istar/rm_fsdp_workers.py:351-365 (update_rm_eto, Dispatch.DP_COMPUTE_PROTO: "
                                       "each data-parallel rank runs istar_norm on its own shard); the "
                                       "invalid-action penalty, the per-shard istar_norm and adjust_batch were not "
                                       "in the record. Eleventh draw (#51 item 4, seed 20261216): dp_rm.py:62-98 "
                                       "(use_remove_padding True, ppo_trainer.yaml:213: the PRM's log-probs come "
                                       "from the unpadded forward at :90-94, not :114) and ray_trainer.py:44 "
                                       "(`from prgt import core_prgt`, unconditional) with :403-409 (a fifth "
                                       "estimator, 'prgt', compute_prgt_rloo_advantage): the snapshot has no prgt "
                                       "module anywhere (git ls-tree), so its ray_trainer.py fails at import and "
                                       "neither script runs from the snapshot as released; the record cited "
                                       ":114 for the PRM's log-probs and named neither. Fourteenth draw (#51 "
                                       "item 4, seed 20261219): dp_rm.py:377-448 update_rm_eto (the path of "
                                       "update=after with loss_type eto, both scripts): each micro-batch's q is "
                                       "stored detached (:417 q_lst.append(q.detach())) and the trajectory DPO loss "
                                       "is computed on that detached copy (:419-434), istar/rm_utils.py:43-135 "
                                       "compute_eto_loss_rm (:56-57 requires_grad_ on the detached tensor makes it "
                                       "a leaf; :75 step Q = β·Σ q, :92 the mean over a trajectory's active steps, "
                                       ":126 −log σ(Q_succ − Q_fail)), so loss.backward() reaches no PRM "
                                       "parameter and the AdamW step (rm_fsdp_workers.py:214-219) skips them: the "
                                       "PRM keeps its initial weights (update_rm, the 'ce' path, :300-354, keeps q "
                                       "attached); run_webshop.sh:11, 30, 54 (reward_model.model.path = "
                                       "actor_rollout_ref.model.path = Qwen2.5-7B-Instruct), run_sokoban.sh:11-12 "
                                       "(PRM Qwen2.5-7B-Instruct, policy Qwen2.5-VL-7B-Instruct); the record said "
                                       "the PRM is trained",
                                  defaults=(("beta", "1.0", "beta_train = 0.05 (yaml, script)"),
                                            ("step_weight", "0.5 (A = w·A_step + (1 − w)·A_ep)",
                                             "step_advantage_w = 1.0 (A = A_ep + 1.0·A_step)"),
                                            ("estimator", "step_episode_mix (grpo(R) + per-turn-index "
                                             "standardised step returns)",
                                             "adv_estimator = istar_rloo: RLOO(R) + w·RLOO(step r)"),
                                            ("gamma", "1.0 (returns over later turns)", "none: a step's own reward"),
                                            ("step reward normalisation", "none",
                                             "istar_norm = batch_norm (÷ (max |r| over the rows of one "
                                             "data-parallel rank's shard + 1e-6); update_rm_eto is "
                                             "DP_COMPUTE_PROTO, 8 shards in both scripts)"),
                                            ("invalid-action penalty", "none",
                                             "use_invalid_action_penalty True, "
                                             "invalid_action_penalty_coef 0.1 (yaml:57-58, both "
                                             "scripts): 0.1 subtracted from the episode score "
                                             "(token_level_scores) of each step row whose action was "
                                             "invalid (is_action_valid); rm_scores untouched "
                                             "(the penalty goes to a summed copy, :209, 232)"),
                                            ("step reward numerator", "prm='policy': log π_old (no PRM)",
                                             "the PRM π_φ (Qwen2.5-7B-Instruct in both scripts; in run_webshop.sh "
                                             "the policy's own initial model) with loss_type eto, lr 1e-6, which "
                                             "as released is never trained: update_rm_eto's DPO loss is on "
                                             "q.detach() (dp_rm.py:417-434), so π_φ stays its initial weights"),
                                            ("step reward denominator", "log π_ref (prm='policy'); log π_old "
                                             "(prm='extras')", "old_log_probs (ref_path null)"),
                                            ("step_granularity", "per turn (turn_ids)", "step (a step = one "
                                             "environment turn)"),
                                            ("lambda (GAE over q)", "none", "0.0 (config.get default)"),
                                            ("use_process_only", "none (the episode term is always in the mix)",
                                             "algorithm.istar.use_process_only = False (yaml:272-273)"),
                                            ("group size", "the step's groups", "env.rollout.n = 8"),
                                            ("eps, std_ddof", "1e-6, 1 (step_episode_mix)", "none (RLOO)"),
                                            ("singleton group (one trajectory per uid)",
                                             "0 on every token: the episode term 0 (grpo's singleton rule) and the "
                                             "step term 0 (each turn index standardised over one trajectory; "
                                             "per-row review n: the record named the episode term only)",
                                             "the raw scores: A = R + w·r_step (episode_rloo_reward / "
                                             "step_rloo_reward leave response_num = 1 unchanged; "
                                             "#51 rI)"),
                                            ("sampling temperature / top_p (the log-probs in q)",
                                             "none: logp_old and logp_ref are untempered (rl.temperature 1 samples "
                                             "untempered; at another rl.temperature the recorded log-probs stay "
                                             "untempered)",
                                             "actor_rollout_ref.rollout.temperature 1.0, top_k −1, top_p 1 "
                                             "(ppo_trainer.yaml:104-106; neither script sets them): old_log_probs "
                                             "are the actor's at temperature 1, the PRM's rm_log_labels the "
                                             "log_softmax of its raw logits, no temperature: dp_rm.py:90-98 on "
                                             "the path the yaml selects (reward_model.model.use_remove_padding "
                                             "True, ppo_trainer.yaml:213; neither script sets it), dp_rm.py:114 "
                                             "on the padded branch; a rollout.temperature T ≠ 1 would temper "
                                             "old_log_probs (logits ÷ T) but not the PRM's (error-class sweep "
                                             "#51, s2b; eleventh draw: the line)")),
                                  placement="theirs: verl-agent trainer, one batch row per environment step of a "
                                            "trajectory (uid = prompt group, traj_uid = trajectory); each training "
                                            "step after the rollout the PRM scores the batch (update=after: the "
                                            "same forward feeds its DPO update on that batch, an update that "
                                            "as released changes no PRM weight), rm_scores are "
                                            "max-normalised per data-parallel rank's shard (istar_norm "
                                            "inside update_rm_eto, DP_COMPUTE_PROTO over the 8 GPUs), the "
                                            "invalid-action penalty (0.1) is subtracted from the episode "
                                            "score of each invalid-action row, then the advantage groups "
                                            "rows by uid; before all this adjust_batch pads the step rows "
                                            "to a multiple of 128 (lcm of log_prob_micro_batch_size_per_gpu "
                                            "16 × 8 GPUs and ppo_mini_batch_size 64) by duplicating randomly "
                                            "chosen rows, and _balance_batch reorders them; ours: the "
                                            "advantage stage, once per step on the step's rows (one row per "
                                            "trajectory, turn_ids map tokens to turns), no PRM trained, padded "
                                            "rows and turns excluded",
                                  deviations=(
                                      "no PRM is trained: prm='policy' (default, our reading) uses β·log π_old/π_ref; "
                                      "prm='extras' reads a PRM's log-probs over π_old, their step reward "
                                      "(transcribed in tests/test_agentic_techniques.py::"
                                      "test_oprl_paper_reward_from_prm_log_probs_in_float64)",
                                      "as released their PRM is not trained either: update_rm_eto computes the "
                                      "trajectory DPO loss on the detached q (dp_rm.py:417-434, rm_utils.py:56-57), "
                                      "no gradient reaches the PRM and it keeps its initial weights, so their step "
                                      "reward is β·Σ(log π_φ0 − log π_old) with π_φ0 the initial PRM; in "
                                      "run_webshop.sh π_φ0 is the policy's initial model, i.e. the reference, so "
                                      "theirs is β·Σ log(π_ref/π_old), the negative of prm='policy' at equal β; "
                                      "prm='extras' with logp_prm = the reference's log-probs gives it (before "
                                      "their max-norm and RLOO). Fourteenth draw (#51 item 4, seed 20261219): the "
                                      "record said their PRM is trained by the trajectory DPO loss",
                                      "the advantage is step_episode_mix's convex mix of grpo(R) and per-turn-index "
                                      "standardised discounted step returns; their RLOO(R) + 1.0·RLOO(step r) per "
                                      "step row (no return, no σ) is not offered",
                                      "their step RLOO baseline is the mean over the first row seen of each "
                                      "(uid, traj_uid) pair, i.e. one step per trajectory (core_istar.py:127-146), "
                                      "applied to every step row; ours standardises each turn index across the "
                                      "group's trajectories",
                                      "their max-norm of step rewards and β = 0.05 are not applied: under our per-turn "
                                      "standardisation a positive factor common to a turn index's rows "
                                      "cancels up to ε; theirs is not batch-wide: each data-parallel rank "
                                      "divides its own shard by the shard's max |r| + 1e-6 "
                                      "(rm_fsdp_workers.py:351-365, dp_rm.py:220-224, 439), so rows of one "
                                      "uid group on different ranks get different divisors",
                                      "their invalid-action penalty is not built: an invalid-action step "
                                      "row's episode score is R − 0.1 there (ray_trainer.py:204-239, "
                                      "1271-1276; on in the yaml and both scripts), so its episode RLOO "
                                      "term drops by 0.1·n/(n − 1), n the uid group's trajectories (by 0.1 "
                                      "when it is the row the baseline reads: the mean drops by 0.1/n and "
                                      "every other row of the group rises by 0.1/(n − 1)); ours scores the "
                                      "trajectory's outcome R only",
                                      "their adjust_batch (mode 'copy') duplicates randomly chosen step rows "
                                      "to reach a multiple of 128 rows: a duplicate gets its row's "
                                      "advantage and enters the loss and the PRM's shard max twice (the "
                                      "RLOO baselines read each (uid, traj_uid) once); ours has no "
                                      "duplicated rows",
                                      "their core_istar.py has three more estimators, none built: istar_grpo "
                                      "(mode mean_std_norm / mean_norm), istar_reinforce_plus_baseline and "
                                      "process_outcome_combined (RLOO of the outcome reward + w·step reward) "
                                      "(core_istar.py:153-350, ray_trainer.py:373-400); both scripts "
                                      "(run_sokoban.sh, run_webshop.sh) select istar_rloo",
                                      "their ray_trainer.py also dispatches a fifth estimator, 'prgt' "
                                      "(core_prgt.compute_prgt_rloo_advantage, ray_trainer.py:403-409), whose "
                                      "module the snapshot does not contain: the unconditional `from prgt import "
                                      "core_prgt` (ray_trainer.py:44) makes the released trainer fail at import, "
                                      "so the scripts' settings above are read, not run; not built",
                                      "their use_process_only switch (algorithm.istar.use_process_only, read at "
                                      "ray_trainer.py:1302; core_istar.py:39-40: the step RLOO alone, no episode "
                                      "term) is not built (step_weight=1 is the step term alone but standardised per "
                                      "turn index, not RLOO); False in the yaml, set by neither script"))),
  )


TECHNIQUES = _technique_rows()
