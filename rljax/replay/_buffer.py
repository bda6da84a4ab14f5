"""A fixed-capacity replay buffer of rollout rows (host NumPy), and the selection rules of the replay techniques.

The buffer is a ``ReplayBuffer`` of arrays whose shapes never change (``capacity`` rows of width ``T``), so a
checkpoint restores it bit for bit into a freshly initialised template. A slot is empty when its
``prompt_index`` is -1. ``seq`` numbers the stored rows in insertion order (FIFO / recency order).

Every selection rule here is a pure function of arrays: it returns a *plan* (which batch row takes which stored
slot, which rows are stored) and changes nothing; ``insert`` and ``store`` apply a plan. Ties are broken by
row or slot index, as each docstring says, so a plan is a deterministic function of its inputs.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import numpy as np

__all__ = ["ReplayBuffer", "empty_buffer", "store", "remove", "insert", "group_rows", "free_slots",
           "rapo_plan", "positive_replay_plan", "exgrpo_bucket_probs", "exgrpo_pick", "exgrpo_trajectory",
           "adapr_push_plan", "adapr_sample_plan", "compensation_plan", "success_store_plan", "spear_group_means",
           "spear_baseline_update", "spear_recalibrate", "spear_plan", "check_int", "check_unit"]


class ReplayBuffer(NamedTuple):
  """``C`` stored rollout rows (``T`` = the rollout width).

  Attributes:
    tokens, prompt_mask, completion_mask: ``[C, T]`` the stored rows as sampled.
    logp_behavior, entropy_behavior: ``[C, T]`` float32, the sampler's log-probs / entropies when sampled.
    advantages: ``[C, T]`` float32, the row's advantages when stored (RoRecomp's compensation rows; else 0).
    prompt_index: ``[C]`` int64, the row's prompt in the training set; -1 = empty slot.
    reward, correct: ``[C]`` float32 the row's reward and verdict.
    score: ``[C]`` float32, the success rate of the row's prompt when last observed.
    step: ``[C]`` int64, the RL step that stored the row; seq: ``[C]`` int64 insertion number (-1 empty).
    role_id: ``[C]`` int32, the row's self-play role (``StepData.role_id``, rljax/train/_episodes.py); -1 none.
  """
  tokens: np.ndarray
  prompt_mask: np.ndarray
  completion_mask: np.ndarray
  logp_behavior: np.ndarray
  entropy_behavior: np.ndarray
  advantages: np.ndarray
  prompt_index: np.ndarray
  reward: np.ndarray
  correct: np.ndarray
  score: np.ndarray
  step: np.ndarray
  seq: np.ndarray
  role_id: np.ndarray


def empty_buffer(capacity: int, seq_len: int) -> ReplayBuffer:
  """An empty buffer of ``capacity`` rows of width ``seq_len``."""
  for name, v in (("capacity", capacity), ("seq_len", seq_len)):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
      raise ValueError(f"{name} must be an int >= 1, got {v!r}")
  c, t = int(capacity), int(seq_len)
  return ReplayBuffer(
      tokens=np.zeros((c, t), np.int32), prompt_mask=np.zeros((c, t), bool), completion_mask=np.zeros((c, t), bool),
      logp_behavior=np.zeros((c, t), np.float32), entropy_behavior=np.zeros((c, t), np.float32),
      advantages=np.zeros((c, t), np.float32), prompt_index=np.full(c, -1, np.int64),
      reward=np.zeros(c, np.float32), correct=np.zeros(c, np.float32), score=np.zeros(c, np.float32),
      step=np.zeros(c, np.int64), seq=np.full(c, -1, np.int64), role_id=np.full(c, -1, np.int32))


def _copy(buf: ReplayBuffer) -> ReplayBuffer:
  return ReplayBuffer(*(np.array(x) for x in buf))


def free_slots(buf: ReplayBuffer, n: int) -> np.ndarray:
  """``n`` slots to write into: the empty ones (lowest index first), then the oldest stored (lowest ``seq``)."""
  empty = np.flatnonzero(np.asarray(buf.prompt_index) < 0)
  used = np.flatnonzero(np.asarray(buf.prompt_index) >= 0)
  used = used[np.argsort(np.asarray(buf.seq)[used], kind="stable")]
  return np.concatenate([empty, used])[:n].astype(np.int64)


def remove(buf: ReplayBuffer, slots) -> ReplayBuffer:
  """``buf`` with ``slots`` emptied."""
  slots = np.asarray(slots, np.int64)
  out = _copy(buf)
  out.prompt_index[slots] = -1
  out.seq[slots] = -1
  return out


def store(buf: ReplayBuffer, data, rows, *, step: int, score=None, advantages=None) -> ReplayBuffer:
  """``buf`` with batch ``rows`` of ``data`` (a ``StepData``) written into ``free_slots`` (evicting the oldest).

  ``score [len(rows)]``: each row's prompt success rate (default its ``correct``); ``advantages [len(rows), T]``
  the rows' token advantages (default 0). More rows than the capacity: the last ``capacity`` rows are kept.
  """
  rows = np.asarray(rows, np.int64).reshape(-1)
  c, t = buf.tokens.shape
  if data.tokens.shape[1] != t:
    raise ValueError(f"replay buffer rows are {t} tokens wide, the batch's {data.tokens.shape[1]}")
  score = np.asarray(data.correct, np.float32)[rows] if score is None else np.asarray(score, np.float32)
  adv = np.zeros((rows.size, t), np.float32) if advantages is None else np.asarray(advantages, np.float32)
  if rows.size > c:
    rows, score, adv = rows[-c:], score[-c:], adv[-c:]
  out = _copy(buf)
  slots = free_slots(out, rows.size)
  nxt = int(out.seq.max(initial=-1)) + 1
  out.tokens[slots] = data.tokens[rows]
  out.prompt_mask[slots] = data.prompt_mask[rows]
  out.completion_mask[slots] = data.completion_mask[rows]
  out.logp_behavior[slots] = data.logp_behavior[rows]
  ent = data.entropy_behavior
  out.entropy_behavior[slots] = 0.0 if ent is None else np.asarray(ent, np.float32)[rows]
  out.advantages[slots] = adv
  out.prompt_index[slots] = np.asarray(data.prompt_index, np.int64)[rows]
  out.reward[slots] = np.asarray(data.rewards, np.float32)[rows]
  out.correct[slots] = np.asarray(data.correct, np.float32)[rows]
  out.score[slots] = score
  out.step[slots] = int(step)
  out.seq[slots] = nxt + np.arange(rows.size)
  role = data.role_id
  out.role_id[slots] = -1 if role is None else np.asarray(role, np.int32)[rows]
  return out


def insert(data, buf: ReplayBuffer, rows, slots, *, advantages: bool = False):
  """``data`` with stored ``slots`` put in place of batch ``rows`` (valid, ``data.replay_mask`` True).

  The rows take the stored tokens, masks, behaviour log-probs/entropies, reward, correctness and prompt index,
  and ``completions`` entry ``""`` (the text is not stored); ``group_id`` stays the row's. A multi-turn step's
  turn structure is not stored either: the rows get ``turn_ids`` -1, no ``step_mask`` turns, ``step_rewards`` 0
  and ``turns`` ``()`` (never the fresh row's, which describe other tokens). A batch with self-play roles
  (``data.role_id``) gives the rows the stored row's role (-1 if it had none). ``advantages=True``:
  the rows also take the stored token advantages (``data.advantages`` becomes ``[B, T]``).
  """
  rows, slots = np.asarray(rows, np.int64).reshape(-1), np.asarray(slots, np.int64).reshape(-1)
  b, t = data.tokens.shape
  mask = np.array(np.zeros(b, bool) if data.replay_mask is None else data.replay_mask, bool)
  if rows.size == 0:
    return data.with_extras(replay_mask=mask)
  if buf.tokens.shape[1] != t:
    raise ValueError(f"replay buffer rows are {buf.tokens.shape[1]} tokens wide, the batch's {t}")
  take = lambda field, dtype: np.array(field, dtype)
  tokens, pm, cm = take(data.tokens, data.tokens.dtype), take(data.prompt_mask, bool), take(data.completion_mask, bool)
  logp = take(data.logp_behavior, np.float32)
  ent = None if data.entropy_behavior is None else take(data.entropy_behavior, np.float32)
  rewards, correct = take(data.rewards, np.float32), take(data.correct, np.float32)
  pidx, valid = take(data.prompt_index, np.int64), take(data.valid, bool)
  tokens[rows], pm[rows], cm[rows] = buf.tokens[slots], buf.prompt_mask[slots], buf.completion_mask[slots]
  logp[rows] = buf.logp_behavior[slots]
  if ent is not None:
    ent[rows] = buf.entropy_behavior[slots]
  rewards[rows], correct[rows], pidx[rows] = buf.reward[slots], buf.correct[slots], buf.prompt_index[slots]
  valid[rows] = True
  mask[rows] = True
  completions = list(data.completions)
  for r in rows:
    completions[int(r)] = ""
  changes = dict(tokens=tokens, prompt_mask=pm, completion_mask=cm, logp_behavior=logp, entropy_behavior=ent,
                 rewards=rewards, correct=correct, prompt_index=pidx, valid=valid,
                 lengths=cm.sum(1).astype(np.int32), completions=tuple(completions))
  role = None if data.role_id is None else np.array(data.role_id, np.int32)
  if role is not None:  # a self-play row's role is the stored row's, not the fresh row's it replaces
    role[rows] = buf.role_id[slots]
  # the turn structure is not stored: a replayed row has none (turn -1 on every token, no turns), never the fresh
  # row's, which belongs to other tokens (a stage that needs it after the replay is refused at start-up)
  if data.turn_ids is not None:
    changes["turn_ids"] = take(data.turn_ids, np.int32)
    changes["turn_ids"][rows] = -1
  for name, empty in (("step_rewards", 0.0), ("step_mask", False)):
    if getattr(data, name) is not None:
      changes[name] = np.array(getattr(data, name))
      changes[name][rows] = empty
  if data.turns is not None:
    changes["turns"] = tuple(() if i in set(rows.tolist()) else t for i, t in enumerate(data.turns))
  if advantages:
    adv = np.asarray(data.require("advantages", "a replay stage"), np.float32)
    adv = np.array(np.broadcast_to(adv[:, None], (b, t)) if adv.ndim == 1 else adv, np.float32)
    adv[rows] = buf.advantages[slots]
    changes["advantages"] = adv * cm
  return data.replace(**changes).with_extras(replay_mask=mask, role_id=role)


def group_rows(group_id, valid) -> dict:
  """``{group id: its valid rows [n] in ascending order}`` over the valid rows."""
  gid, v = np.asarray(group_id), np.asarray(valid, bool)
  return {int(g): np.flatnonzero(v & (gid == g)) for g in np.unique(gid[v])}


def _stored_successes(buf: ReplayBuffer, prompt: int) -> np.ndarray:
  """Slots holding a correct row of ``prompt``, most recent first (highest ``seq``)."""
  slots = np.flatnonzero((np.asarray(buf.prompt_index) == prompt) & (np.asarray(buf.correct) > 0.5))
  return slots[np.argsort(-np.asarray(buf.seq)[slots], kind="stable")]


def _worst_first(rows: np.ndarray, rewards: np.ndarray) -> np.ndarray:
  """``rows`` by reward ascending, ties to the higher row index first (the last sampled rows go first)."""
  return rows[np.lexsort((-rows, rewards[rows]))]


def rapo_plan(data, buf: ReplayBuffer, *, per_group: int = 1):
  """RAPO per-prompt replay: an all-failed group takes stored successes of its own prompt.

  For each group whose valid rows are all incorrect (``correct <= 0.5``) and whose prompt has stored
  successes, the ``k = min(per_group, #stored, n_valid - 1)`` lowest-reward rows (ties: the later row) take
  the ``k`` most recently stored successes (at least one fresh row stays). Our reading of "per-prompt replay
  buffers" (Fathom-DeepResearch, seed 000 L23: the abstract names the mechanism only).

  Returns ``(rows [n], slots [n])`` int64.
  """
  rows_out, slots_out = [], []
  correct, rewards = np.asarray(data.correct, np.float64), np.asarray(data.rewards, np.float64)
  for g, rows in group_rows(data.group_id, data.valid).items():
    if rows.size < 2 or np.any(correct[rows] > 0.5):
      continue
    stored = _stored_successes(buf, int(data.prompt_index[rows[0]]))
    k = min(per_group, stored.size, rows.size - 1)
    rows_out += list(_worst_first(rows, rewards)[:k])
    slots_out += list(stored[:k])
  return np.asarray(rows_out, np.int64), np.asarray(slots_out, np.int64)


def positive_replay_plan(data, buf: ReplayBuffer, *, ratio: float = 0.5, max_success: float = 0.5):
  """MobileRL difficulty-adaptive positive replay: a hard group takes more stored successes the harder it is.

  A group with success rate ``p_g = mean(correct)`` over its ``n`` valid rows is *hard* when
  ``p_g <= max_success``; it takes ``k = min(ceil(ratio * (1 - p_g) * n), #failed rows, #stored successes of
  its prompt, n - 1)`` stored successes (most recent first) in place of its lowest-reward failed rows (ties:
  the later row). Our reading of "difficulty-adaptive positive replay" (MobileRL / ADAGRPO, seed 000 L37: the
  abstract names the mechanism only): the replay count grows with the difficulty ``1 - p_g``.

  Returns ``(rows [n], slots [n])`` int64.
  """
  rows_out, slots_out = [], []
  correct, rewards = np.asarray(data.correct, np.float64), np.asarray(data.rewards, np.float64)
  for g, rows in group_rows(data.group_id, data.valid).items():
    ok = correct[rows] > 0.5
    p = float(ok.mean())
    if p > max_success or rows.size < 2:
      continue
    stored = _stored_successes(buf, int(data.prompt_index[rows[0]]))
    failed = rows[~ok]
    k = min(math.ceil(ratio * (1.0 - p) * rows.size - 1e-9), failed.size, stored.size, rows.size - 1)
    rows_out += list(_worst_first(failed, rewards)[:k])
    slots_out += list(stored[:k])
  return np.asarray(rows_out, np.int64), np.asarray(slots_out, np.int64)


def _row_means(values, mask) -> np.ndarray:
  """``[C]`` each row's mean of ``values [C, T]`` over ``mask`` (0 for an empty mask; the authors' ``masked_row_mean``
  divides by ``max(count, 1e-8)``)."""
  m = np.asarray(mask, np.float64)
  return (np.asarray(values, np.float64) * m).sum(1) / np.maximum(m.sum(1), 1e-8)


def adapr_push_plan(buf: ReplayBuffer, rows, row_adv, *, step: int, top_ratio: float = 0.25, max_age: int = 4,
                    balance_alpha: float = 0.5):
  """MobileRL's Adaptive Positive Replay, the insertion (github.com/xuyifan-0731/MobileRL-iclr:
  training/verl/workers/agentic/replay_buffer.py, ``ReplayBuffer.push``), on the batch's fresh rows ``rows [n]``
  with mean advantages ``row_adv [n]`` (one row = one trajectory).

  1. *Age purge*: stored rows with ``stored step <= step - max_age`` leave.
  2. *Insert*: the ``k = max(1, ceil(top_ratio * n))`` rows of highest mean advantage (ties: the lower row).
  3. *Evict* while more than ``C`` (the buffer's capacity) rows are held: the lowest
     ``balance_alpha * adv_norm + (1 - balance_alpha) * recency_norm`` goes (both min-max normalised over the held
     rows, ``+1e-8`` in the denominators; ties within 1e-12: the oldest, then the first held: stored rows by
     ``seq``, then this step's by rank). A row inserted now may be evicted at once: it is then not inserted.

  A stored row's advantage is its mean stored advantage over its completion. Returns ``(insert [k'] batch rows in
  rank order, remove [m] slots)`` int64; ``store`` the first, ``remove`` the second.
  """
  rows, adv = np.asarray(rows, np.int64).reshape(-1), np.asarray(row_adv, np.float64).reshape(-1)
  used = np.flatnonzero(np.asarray(buf.prompt_index) >= 0)
  stored_step = np.asarray(buf.step)[used]
  purged = used[stored_step <= int(step) - int(max_age)] if max_age and max_age > 0 else used[:0]
  kept = np.setdiff1d(used, purged)
  kept = kept[np.argsort(np.asarray(buf.seq)[kept], kind="stable")]
  if rows.size == 0:
    return np.zeros(0, np.int64), np.asarray(purged, np.int64)
  k = max(1, math.ceil(top_ratio * rows.size - 1e-9))
  rank = np.lexsort((rows, -adv))[:k]
  cap = buf.tokens.shape[0]
  # held rows: (is_new, id, adv, order); stored rows first (by seq), then the new ones by rank
  held_adv = np.concatenate([_row_means(buf.advantages, buf.completion_mask)[kept], adv[rank]])
  held_order = np.concatenate([np.asarray(buf.step, np.float64)[kept], np.full(rank.size, float(step))])
  alive = np.ones(held_adv.size, bool)
  while alive.sum() > cap:
    a, o = held_adv[alive], held_order[alive]
    score = (balance_alpha * (a - a.min()) / (a.max() - a.min() + 1e-8)
             + (1.0 - balance_alpha) * (o - o.min()) / (o.max() - o.min() + 1e-8))
    idx = np.flatnonzero(alive)
    cand = idx[np.abs(score - score.min()) < 1e-12]
    alive[cand[np.argmin(held_order[cand])]] = False  # argmin: the first held among the oldest
  evicted = kept[~alive[:kept.size]]
  return rows[rank][alive[kept.size:]], np.concatenate([purged, evicted]).astype(np.int64)


def adapr_sample_plan(buf: ReplayBuffer, free_rows, k: int):
  """MobileRL's Adaptive Positive Replay, the replay (``ReplayBuffer.sample_for_training``): the ``k`` held rows
  of highest mean stored advantage (ties: the first stored) go to the batch's ``free_rows`` (ascending), as many
  as there are free rows. Returns ``(rows [n], slots [n])`` int64."""
  free = np.sort(np.asarray(free_rows, np.int64))
  used = np.flatnonzero(np.asarray(buf.prompt_index) >= 0)
  adv = _row_means(buf.advantages, buf.completion_mask)[used]
  order = used[np.lexsort((np.asarray(buf.seq)[used], -adv))]
  n = max(min(int(k), free.size, order.size), 0)
  return free[:n], order[:n].astype(np.int64)


def _bucket_weights(scores: np.ndarray, buckets: int, mu: float, sigma: Optional[float]):
  """``(bucket [N] int, weight [buckets + 1])``: bucket ``round(score * buckets)``, weight N(b / buckets; mu, sigma);
  ``sigma=None``: one bucket, ``1 / buckets`` (the authors' ``sigma = 1`` success count)."""
  sigma = 1.0 / buckets if sigma is None else float(sigma)
  b = np.rint(np.asarray(scores, np.float64) * buckets).astype(np.int64)
  centers = np.arange(buckets + 1) / buckets
  return b, np.exp(-0.5 * ((centers - mu) / sigma) ** 2)


def exgrpo_bucket_probs(scores, *, buckets: int, mu: float = 0.5, sigma: Optional[float] = None) -> np.ndarray:
  """``[N]`` probability that ``exgrpo_pick``'s first draw is each of ``N`` prompts with success rates ``scores``.

  ``P(j) = w(b_j) / sum_{non-empty b} w(b) / |b_j|``, ``b_j = round(score_j * buckets)``,
  ``w(b) = exp(-(b / buckets - mu)^2 / (2 sigma^2))``: a bucket is drawn by its Gaussian weight, then a
  prompt uniformly within it. The default ``sigma = 1 / buckets`` is the authors' ``normal`` bucket weighting
  (github.com/ElliottYan/LUFFY: ExGRPO/.../experience/weighted_bucket_sampler.py, ``_normal_mapping``:
  ``N(k; G/2, 1)`` over the success count ``k`` of ``G`` rollouts, i.e. ``mu = 0.5``, ``sigma = 1/G`` in accuracy).
  """
  b, w = _bucket_weights(scores, buckets, mu, sigma)
  if b.size == 0:
    return np.zeros(0)
  counts = np.bincount(b, minlength=buckets + 1)
  total = w[counts > 0].sum()
  return w[b] / total / counts[b]


def exgrpo_pick(prompts, scores, u, *, buckets: int, mu: float = 0.5, sigma: Optional[float] = None) -> np.ndarray:
  """ExGRPO's question sampling: ``n`` distinct prompts drawn by accuracy bucket, without replacement.

  Draw ``i`` (``u [n, 2]`` uniforms in [0, 1)): among the buckets still holding a prompt, bucket ``b`` with
  probability ``w(b) / sum w`` (inverse CDF of ``u[i, 0]``), then the prompt at position
  ``floor(u[i, 1] * |b|)`` of that bucket's remaining prompts in ascending prompt order; the prompt leaves the
  pool. Fewer than ``n`` prompts in the pool: every prompt, in draw order. See ``exgrpo_bucket_probs`` (the first
  draw's law, the authors' for one draw). The authors draw the ``n`` bucket counts at once (a multinomial, a full
  bucket's excess redrawn) and then prompts without replacement within each bucket: the same first-draw law, a
  slightly different joint law of the ``n`` draws.

  Returns ``[min(n, N)]`` int64 prompt ids.
  """
  prompts = np.asarray(prompts, np.int64)
  b, w = _bucket_weights(scores, buckets, mu, sigma)
  u = np.asarray(u, np.float64).reshape(-1, 2)
  left = np.ones(prompts.size, bool)
  out = []
  for u0, u1 in u:
    if not left.any():
      break
    present = np.zeros(buckets + 1, bool)
    present[b[left]] = True
    cdf = np.cumsum(np.where(present, w, 0.0))
    chosen = int(min(np.searchsorted(cdf, u0 * cdf[-1], side="right"), buckets))
    while not present[chosen]:  # u0 * total landed on a boundary of empty buckets (measure zero): step back
      chosen -= 1
    pool = np.flatnonzero(left & (b == chosen))
    pool = pool[np.argsort(prompts[pool], kind="stable")]
    j = pool[min(int(u1 * pool.size), pool.size - 1)]
    out.append(prompts[j])
    left[j] = False
  return np.asarray(out, np.int64)


def exgrpo_trajectory(buf: ReplayBuffer, prompt: int) -> int:
  """The stored success of ``prompt`` with the lowest mean behaviour entropy over its completion tokens (ties:
  the most recent), or -1 if it has none."""
  slots = _stored_successes(buf, prompt)  # most recent first: argmin keeps the first of equal entropies
  if slots.size == 0:
    return -1
  cm = np.asarray(buf.completion_mask, np.float64)[slots]
  ent = (np.asarray(buf.entropy_behavior, np.float64)[slots] * cm).sum(1) / np.maximum(cm.sum(1), 1.0)
  return int(slots[int(np.argmin(ent))])


def compensation_plan(num_freed: int, buf: ReplayBuffer, *, compensation: float = 1.0) -> np.ndarray:
  """RoRecomp compensation: the ``floor(compensation * num_freed)`` oldest stored rows (FIFO), oldest first."""
  used = np.flatnonzero(np.asarray(buf.prompt_index) >= 0)
  fifo = used[np.argsort(np.asarray(buf.seq)[used], kind="stable")]
  return fifo[:int(math.floor(compensation * num_freed + 1e-9))].astype(np.int64)


def success_store_plan(data, buf: ReplayBuffer, groups, *, per_prompt: int):
  """Which fresh successes to store for ``groups`` and which stored rows of their prompts make room.

  For each group in ``groups`` (``{group id: valid rows}``): its fresh (not replayed) correct rows, highest
  reward first (ties: the lower row), at most ``per_prompt``; its prompt then keeps its ``per_prompt - k``
  most recent stored successes and loses the rest (each prompt holds at most ``per_prompt`` successes).

  Returns ``(rows [n] to store, slots [m] to empty)`` int64.
  """
  fresh = ~np.asarray(np.zeros(data.batch_size, bool) if data.replay_mask is None else data.replay_mask, bool)
  correct, rewards = np.asarray(data.correct, np.float64), np.asarray(data.rewards, np.float64)
  rows_out, drop = [], []
  for rows in groups.values():
    ok = rows[fresh[rows] & (correct[rows] > 0.5)]
    ok = ok[np.lexsort((ok, -rewards[ok]))][:per_prompt]
    if ok.size == 0:
      continue
    rows_out += list(ok)
    drop += list(_stored_successes(buf, int(data.prompt_index[rows[0]]))[per_prompt - ok.size:])
  return np.asarray(rows_out, np.int64), np.asarray(drop, np.int64)


def check_int(name: str, v, minimum: int = 1) -> int:
  """``v`` as an int, or a ``ValueError`` naming ``name`` unless it is an int >= ``minimum``."""
  if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum:
    raise ValueError(f"{name} must be an int >= {minimum}, got {v!r}")
  return int(v)


def check_unit(name: str, v, *, lo_open: bool = False) -> float:
  """``v`` as a float, or a ``ValueError`` naming ``name`` unless it is in [0, 1] (``(0, 1]``: ``lo_open``)."""
  if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= 1 \
      or (lo_open and v == 0):
    raise ValueError(f"{name} must be a number in {'(0' if lo_open else '[0'}, 1], got {v!r}")
  return float(v)


def spear_group_means(rewards, group_id, valid) -> np.ndarray:
  """``[G]`` the mean reward of each group's valid rows, in ascending group id (SPEAR's baseline samples: the
  authors' ``TrajectoryBufferBatch.update_batch`` appends one mean reward per prompt group of the step)."""
  r = np.asarray(rewards, np.float64)
  return np.asarray([r[rows].mean() for rows in group_rows(group_id, valid).values()], np.float64)


def spear_baseline_update(window: np.ndarray, count: int, new) -> tuple:
  """``(window, count, baseline)``: ``new`` values appended to the ring ``window`` (its ``count`` values seen so
  far; the latest ``len(window)`` kept) and the median of the kept values (0 when none): the authors' 50th
  percentile of the flattened history (``maintain_reward_statistics``, ``reward_mean_50p``)."""
  window, n = np.array(window), window.shape[0]
  new = np.asarray(new, window.dtype).reshape(-1)[-n:]
  window[(int(count) + np.arange(new.size)) % n] = new
  count = int(count) + new.size
  return window, count, float(np.median(window[:min(count, n)])) if count else 0.0


def spear_recalibrate(buf: ReplayBuffer, baseline: float, *, step: int, mode: str = "median",
                      decay: float = 1.0) -> np.ndarray:
  """SPEAR's recalibrated advantage of every stored row ``[C]`` (empty slots: ``-inf``).

  ``mode="median"`` (the SPEAR README's default, ``weight_decay_trajectory_replay = -1``): ``A = R − b``, ``b`` the
  median of the recent group mean rewards (``baseline``; ``spear_baseline_update``): the authors'
  ``prepare_for_selection`` (github.com/TencentYoutuResearch/SPEAR: verl-agent/verl/trainer/ppo/ray_trainer_hybrid.py,
  ``compute_grpo_outcome_advantage`` with ``custom_reward_mean_std`` = the 50th percentiles and
  ``norm_adv_by_std_in_grpo=False`` as in their ``run_*_spear.sh``). ``mode="decay"`` (its
  ``weight_decay_trajectory_replay`` in (0, 1]):
  ``A = A_stored · decay^(step − stored step)``, ``A_stored`` the row's mean stored advantage over its completion.
  """
  used = np.asarray(buf.prompt_index) >= 0
  if mode == "median":
    adv = np.asarray(buf.reward, np.float64) - float(baseline)
  elif mode == "decay":
    cm = np.asarray(buf.completion_mask, np.float64)
    stored = (np.asarray(buf.advantages, np.float64) * cm).sum(1) / np.maximum(cm.sum(1), 1.0)
    adv = stored * float(decay) ** np.maximum(int(step) - np.asarray(buf.step), 0)
  else:
    raise ValueError(f"mode must be 'median' or 'decay', got {mode!r}")
  return np.where(used, adv, -np.inf)


def spear_plan(free_rows, recalibrated: np.ndarray, buf: ReplayBuffer, *, step: int, max_age: int, limit: int):
  """Which stored rows SPEAR's self-imitation replays: the *advantage filter*.

  Candidates are the stored rows with a positive recalibrated advantage (``recalibrated > 0``) stored at most
  ``max_age`` steps ago; the best ``min(limit, #free rows, #candidates)`` (highest advantage first, ties: the most
  recent) go, in that order, to ``free_rows`` in ascending order. Returns ``(rows [n], slots [n])`` int64.
  """
  free = np.sort(np.asarray(free_rows, np.int64))
  used = np.asarray(buf.prompt_index) >= 0
  fresh = (int(step) - np.asarray(buf.step)) <= max_age
  cand = np.flatnonzero(used & fresh & (recalibrated > 0))
  cand = cand[np.lexsort((-np.asarray(buf.seq)[cand], -recalibrated[cand]))]
  n = max(min(int(limit), free.size, cand.size), 0)
  return free[:n], cand[:n].astype(np.int64)
