"""The replay techniques as ``rljax.stages.Replay`` stages (recipe slot ``replay``).

Each factory validates its hyper-parameters and returns a stage that the loop binds to the run
(``RunFacts.seq_len``: the buffer's row width; ``group_size``: ExGRPO's accuracy buckets). The buffer is the
stage's state (``init()``): a ``ReplayBuffer`` of fixed-shape arrays, kept in the checkpoint and restored bit for
bit. ``fn(data, state)`` first plans from the buffer as it was before the step (which fresh rows take which
stored rows: ``_buffer``'s pure rules), puts the stored rows into the batch (``data.replay_mask`` marks
them), then stores the step's fresh rows. Replayed rows are never stored again. The catalog rows (``TECHNIQUES``, at
the end) are declared beside these factories; each names the ``_buffer`` rule its stage applies as its ``fn``.

Size: five stages and their five fidelity records (each citing its source line by line: 230 of the lines); a record
stays beside the stage it describes, as in every room.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import jax
import numpy as np

from rljax.filters import rorecomp as _rorecomp
from rljax.replay import _buffer as B
from rljax.stages import Extra, Replay, RunFacts, StepData

__all__ = ["rapo_replay", "positive_replay", "exgrpo", "rorecomp_compensation", "spear_replay", "SpearState",
           "REPLAY_MASK", "REPLAY_SLOT"]

# The extras a replay stage writes and reads (``data.replay_mask``, ``data.replay_slot``; gathered into
# ``rljax.stages.EXTRAS``). A hint stage (``rljax.hints``) marks its hinted rows in ``replay_mask`` too.
REPLAY_MASK = Extra("replay_mask", "b", "B", "a replay or hint stage (rljax.replay, rljax.hints)",
                    "True on the rows the stage put into the batch (stored or hinted rows); the off-policy loss "
                    "terms read it (exgrpo_policy)")
REPLAY_SLOT = Extra("replay_slot", "iu", "B", "the collector, from a replay stage's prompts()",
                    "the stored row each sampled row's group replays (-1: none); the stage's fn reads it")
EXTRAS = (REPLAY_MASK, REPLAY_SLOT)


def _width(facts: Optional[RunFacts], name: str) -> int:
  if facts is None or not facts.seq_len:
    raise ValueError(f"replay stage {name!r} is not bound to the run (stage.bind(RunFacts) with seq_len): its "
                     "buffer's row width is unknown")
  return int(facts.seq_len)


def _start(data: StepData) -> StepData:
  """``data`` with ``replay_mask`` present (all False for the fresh rows) and no ``replay_slot``."""
  mask = np.zeros(data.batch_size, bool) if data.replay_mask is None else data.replay_mask
  return data.with_extras(replay_slot=None, replay_mask=mask)


def _fresh_groups(data: StepData) -> dict:
  """``{group id: rows}`` over the valid rows that were sampled this step (not replayed)."""
  fresh = data.valid & ~np.asarray(data.replay_mask, bool)
  return B.group_rows(data.group_id, fresh)


def _buffer_metrics(buf: B.ReplayBuffer) -> dict:
  used = np.asarray(buf.prompt_index) >= 0
  return {"buffer_rows": float(used.sum()), "buffer_prompts": float(np.unique(buf.prompt_index[used]).size)}


def _logp_old(v: str) -> str:
  if v not in ("recompute", "behavior"):
    raise ValueError(f"logp_old must be 'recompute' or 'behavior', got {v!r}")
  return v


def _per_prompt_stage(name: str, *, capacity: int, per_prompt: int, logp_old: str, plan, store_group):
  """A same-prompt replay stage: ``plan(data, buf) -> (rows, slots)``; ``store_group(p) -> bool`` says which
  fresh groups (by success rate ``p``) store their successes."""

  def build(facts):
    def init():
      return B.empty_buffer(capacity, _width(facts, name))

    def fn(data, state):
      data = _start(data)
      rows, slots = plan(data, state)
      out = B.insert(data, state, rows, slots)
      groups = _fresh_groups(data)
      rate = {g: float(np.mean(data.correct[r] > 0.5)) for g, r in groups.items()}
      chosen = {g: r for g, r in groups.items() if store_group(rate[g])}
      new_rows, drop = B.success_store_plan(data, state, chosen, per_prompt=per_prompt)
      score = np.asarray([rate[int(data.group_id[r])] for r in new_rows], np.float32)
      state = B.store(B.remove(state, drop), data, new_rows, step=data.step, score=score)
      return out, state, {"replayed": float(rows.size), "replayed_groups": float(np.unique(data.group_id[rows]).size),
                          "stored": float(new_rows.size), **_buffer_metrics(state)}

    return Replay(init, fn, name=name, logp_old=logp_old, bind_fn=lambda stage, f: build(f))

  return build(None)


def rapo_replay(*, capacity: int = 256, per_prompt: int = 1, per_group: int = 1, logp_old: str = "recompute"):
  """RAPO per-prompt replay (Fathom-DeepResearch, seed 000 L23): an all-failed group takes its prompt's stored
  success (``_buffer.rapo_plan``); every group with a success stores up to ``per_prompt`` of them (its prompt
  keeps only its latest ``per_prompt``). ``capacity``: rows in the buffer (the oldest are evicted)."""
  B.check_int("capacity", capacity)
  B.check_int("per_prompt", per_prompt)
  B.check_int("per_group", per_group)
  return _per_prompt_stage("rapo_replay", capacity=capacity, per_prompt=per_prompt, logp_old=_logp_old(logp_old),
                           plan=lambda data, buf: B.rapo_plan(data, buf, per_group=per_group),
                           store_group=lambda p: p > 0)


def positive_replay(*, mode: str = "prompt", capacity: int = 256, per_prompt: int = 2, ratio: float = 0.5,
                    max_success: float = 0.5, top_ratio: float = 0.25, replay_ratio: float = 1.0,
                    balance_alpha: float = 0.5, max_age: int = 4, logp_old: Optional[str] = None):
  """MobileRL difficulty-adaptive positive replay (ADAGRPO, seed 000 L37).

  ``mode="prompt"`` (default, ours): the successes of *hard* groups (success rate ``0 < p <= max_success``) are
  stored (``per_prompt`` latest per prompt); a later hard group of the same prompt takes ``ceil(ratio (1 - p) n)``
  of them in place of failed rows (``_buffer.positive_replay_plan``), before the advantages, so the group's
  advantages see the replayed successes.

  ``mode="mobilerl"``: the authors' buffer (github.com/xuyifan-0731/MobileRL-iclr:
  training/verl/workers/agentic/replay_buffer.py, with their ``glm_mobilerl.yaml``: ``max_size`` 256 =
  ``capacity``, ``top_ratio`` 0.25, ``replay_ratio`` 1.0, ``balance_alpha`` 0.5, ``max_age_steps`` 4), after the
  advantages: each step the fresh rows of highest mean advantage (the top ``top_ratio``; with group-normalised
  advantages a success weighs more the harder its group, hence "difficulty-adaptive") are stored with their
  advantages (``_buffer.adapr_push_plan``: age purge, balanced advantage/recency eviction); then the
  ``ceil(replay_ratio * B)`` stored rows of highest advantage (``_buffer.adapr_sample_plan``) train with their
  stored advantages. The authors append them to the batch (which grows); here they fill the rows that carry no
  gradient (filtered-out rows, fresh rows whose advantages are all 0), as ``spear_replay``'s do.

  ``logp_old``: default ``"recompute"`` for ``mode="prompt"``, ``"behavior"`` for ``mode="mobilerl"`` (the
  authors' stored rows keep the ``old_log_probs`` of the step that pushed them).
  """
  if mode not in ("prompt", "mobilerl"):
    raise ValueError(f"mode must be 'prompt' or 'mobilerl', got {mode!r}")
  B.check_int("capacity", capacity)
  B.check_int("per_prompt", per_prompt)
  ratio = B.check_unit("ratio", ratio, lo_open=True)
  max_success = B.check_unit("max_success", max_success)
  top_ratio = B.check_unit("top_ratio", top_ratio, lo_open=True)
  replay_ratio = B.check_unit("replay_ratio", replay_ratio, lo_open=True)
  balance_alpha = B.check_unit("balance_alpha", balance_alpha)
  B.check_int("max_age", max_age, minimum=0)
  logp_old = _logp_old(logp_old if logp_old is not None else ("behavior" if mode == "mobilerl" else "recompute"))
  if mode == "mobilerl":
    return _adapr_stage(capacity=capacity, top_ratio=top_ratio, replay_ratio=replay_ratio,
                        balance_alpha=balance_alpha, max_age=max_age, logp_old=logp_old)
  return _per_prompt_stage("positive_replay", capacity=capacity, per_prompt=per_prompt, logp_old=logp_old,
                           plan=lambda data, buf: B.positive_replay_plan(data, buf, ratio=ratio,
                                                                         max_success=max_success),
                           store_group=lambda p: 0 < p <= max_success)


def _adapr_stage(*, capacity: int, top_ratio: float, replay_ratio: float, balance_alpha: float, max_age: int,
                 logp_old: str):
  """``positive_replay(mode="mobilerl")``: MobileRL's Adaptive Positive Replay buffer, after the advantages."""

  def build(facts):
    def init():
      return B.empty_buffer(capacity, _width(facts, "positive_replay"))

    def fn(data, state):
      data = _start(data)
      fresh = np.flatnonzero(data.valid & ~np.asarray(data.replay_mask, bool))
      adv = np.asarray(data.require("advantages", "positive_replay"), np.float32)
      adv_t = (adv[:, None] if adv.ndim == 1 else adv) * data.completion_mask
      row_adv = B._row_means(adv_t, data.completion_mask)  # pylint: disable=protected-access
      new_rows, drop = B.adapr_push_plan(state, fresh, row_adv[fresh], step=int(data.step), top_ratio=top_ratio,
                                         max_age=max_age, balance_alpha=balance_alpha)
      state = B.store(B.remove(state, drop), data, new_rows, step=int(data.step),
                      score=np.asarray(data.correct)[new_rows], advantages=adv_t[new_rows])
      silent = ~data.valid | (data.valid & ~np.any(adv_t != 0, axis=1))
      rows, slots = B.adapr_sample_plan(state, np.flatnonzero(silent),
                                        math.ceil(replay_ratio * data.batch_size - 1e-9))
      out = B.insert(data, state, rows, slots, advantages=True)
      return out, state, {"replayed": float(rows.size), "stored": float(new_rows.size),
                          "evicted": float(drop.size), **_buffer_metrics(state)}

    return Replay(init, fn, name="positive_replay", phase="advantages", logp_old=logp_old,
                  bind_fn=lambda stage, f: build(f))

  return build(None)


def exgrpo(*, capacity: int = 512, ratio: float = 0.5, per_prompt: int = 2, mu: float = 0.5,
           sigma: Optional[float] = None, buckets: Optional[int] = None, logp_old: str = "behavior"):
  """ExGRPO experience replay (arXiv 2510.02245; seed 000 L19, seed 001 L241).

  Management: after each step a prompt's fresh success rate ``p`` becomes the score of its stored rows; a prompt
  solved by every fresh row (``p = 1``) is retired (its rows leave the buffer); ``0 < p < 1`` stores up to
  ``per_prompt`` of its fresh successes (the prompt keeps its latest ``per_prompt``).

  Selection, before the rollout (``prompts``): ``floor(ratio * P)`` of the step's ``P`` prompts (the last ones of
  the loader's batch) are replaced by experience prompts drawn by accuracy bucket with Gaussian weights
  ``N(acc_b; mu, sigma)`` (``_buffer.exgrpo_pick``; ``buckets`` default the group size, so a bucket is a
  success count; ``sigma`` default one bucket, ``1 / buckets``: the authors' ``N(k; G/2, 1)`` over success counts,
  ``exp_bucket_manager=normal`` in their ``exp_scripts/run_exgrpo.sh``), never a prompt already in the batch.
  Each experience group is sampled as usual and its last
  valid row is then replaced by the prompt's stored success with the lowest mean behaviour entropy
  (``_buffer.exgrpo_trajectory``): a mixed group of ``G - 1`` fresh rows and one replayed row, whose advantage
  is computed in that group. The displaced loader prompts are not trained on this epoch (counted:
  ``exgrpo/displaced_prompts``); with a refilling filter each sampling round draws its own experience prompts.

  The mixed objective: ``logp_old="behavior"`` (default) gives the replayed row the ratio
  ``w = pi_theta / pi_behavior`` against its stored log-probs; ``exgrpo_policy`` shapes it as ``w / (w + beta)``.
  """
  B.check_int("capacity", capacity)
  B.check_int("per_prompt", per_prompt)
  ratio = B.check_unit("ratio", ratio, lo_open=True)
  if isinstance(mu, bool) or not isinstance(mu, (int, float)) or not math.isfinite(mu):
    raise ValueError(f"mu must be a finite number, got {mu!r}")
  if sigma is not None and (isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or not sigma > 0
                            or not math.isfinite(sigma)):
    raise ValueError(f"sigma must be None or a finite number > 0, got {sigma!r}")
  if buckets is not None:
    B.check_int("buckets", buckets)
  logp_old = _logp_old(logp_old)

  def build(facts):
    nb = buckets or (facts.group_size if facts is not None else 1)

    def init():
      return B.empty_buffer(capacity, _width(facts, "exgrpo"))

    def prompts(state, index, key):
      index = np.asarray(index, np.int64)
      n = int(math.floor(ratio * index.size + 1e-9))
      pid = np.asarray(state.prompt_index)
      ok = (pid >= 0) & (np.asarray(state.correct) > 0.5) & ~np.isin(pid, index)
      pool, first = np.unique(pid[ok], return_index=True)
      scores = np.asarray(state.score)[np.flatnonzero(ok)[first]]
      u = np.asarray(jax.random.uniform(key, (n, 2)), np.float64)
      picked = B.exgrpo_pick(pool, scores, u, buckets=nb, mu=mu, sigma=sigma)
      slots = np.full(index.size, -1, np.int64)
      new = index.copy()
      if picked.size:
        new[index.size - picked.size:] = picked
        slots[index.size - picked.size:] = [B.exgrpo_trajectory(state, int(p)) for p in picked]
      return new, slots, {"experience_prompts": float(picked.size), "displaced_prompts": float(picked.size),
                          "pool_prompts": float(pool.size)}

    def fn(data, state):
      slot_of_row = np.asarray(np.full(data.batch_size, -1) if data.replay_slot is None else data.replay_slot,
                               np.int64)
      data = _start(data)
      rows, slots = [], []
      for g, r in B.group_rows(data.group_id, data.valid).items():
        s = int(slot_of_row[r[0]])
        if s >= 0 and r.size >= 2 and state.prompt_index[s] == data.prompt_index[r[0]] and state.correct[s] > 0.5:
          rows.append(int(r[-1]))
          slots.append(s)
      out = B.insert(data, state, rows, slots)
      groups = _fresh_groups(out)  # the experience groups' fresh rows only
      rate = {g: float(np.mean(out.correct[r] > 0.5)) for g, r in groups.items()}
      pid = np.array(state.prompt_index)
      retire = [int(out.prompt_index[r[0]]) for g, r in groups.items() if rate[g] == 1.0]
      state = B.remove(state, np.flatnonzero(np.isin(pid, retire)))
      score = np.array(state.score)
      for g, r in groups.items():
        score[np.asarray(state.prompt_index) == out.prompt_index[r[0]]] = rate[g]
      state = state._replace(score=score)
      chosen = {g: r for g, r in groups.items() if 0 < rate[g] < 1}
      new_rows, drop = B.success_store_plan(out, state, chosen, per_prompt=per_prompt)
      new_score = np.asarray([rate[int(out.group_id[r])] for r in new_rows], np.float32)
      state = B.store(B.remove(state, drop), out, new_rows, step=data.step, score=new_score)
      return out, state, {"replayed": float(len(rows)), "stored": float(new_rows.size),
                          "retired_prompts": float(len(retire)), **_buffer_metrics(state)}

    return Replay(init, fn, name="exgrpo", logp_old=logp_old, prompts=prompts, bind_fn=lambda stage, f: build(f))

  return build(None)


def rorecomp_compensation(*, capacity: int = 256, fraction: float = 0.5, compensation: float = 1.0,
                          logp_old: str = "recompute"):
  """RoRecomp with compensation batches (seed 001 L163), after the advantages.

  The fresh valid rows split into priority rows (short-correct | long-incorrect, ``rljax.filters.rorecomp`` at
  ``fraction``) and the rest, which go to a FIFO buffer with their token advantages (computed in their own
  group). The freed rows of the batch take the ``floor(compensation * #freed)`` oldest buffered rows
  (``_buffer.compensation_plan``; each used once) with their stored advantages; the remaining freed rows
  leave the batch. Our reading: the paper trains compensation batches of buffered responses next to the
  priority batches; here they share the step's static batch. Rows of other prompts enter a group, so the
  shared-prompt forward is off.
  """
  B.check_int("capacity", capacity)
  fraction = B.check_unit("fraction", fraction, lo_open=True)
  compensation = B.check_unit("compensation", compensation)
  logp_old = _logp_old(logp_old)

  def build(facts):
    def init():
      return B.empty_buffer(capacity, _width(facts, "rorecomp_compensation"))

    def fn(data, state):
      data = _start(data)
      fresh = data.valid & ~np.asarray(data.replay_mask, bool)
      priority, _ = _rorecomp(data.correct, data.lengths, data.group_id, fraction=fraction, valid=fresh)
      freed = np.flatnonzero(fresh & ~priority)
      adv = np.asarray(data.require("advantages", "rorecomp_compensation"), np.float32)
      adv = (adv[:, None] if adv.ndim == 1 else adv) * data.completion_mask
      slots = B.compensation_plan(freed.size, state, compensation=compensation)
      out = B.insert(data.replace(valid=data.valid & ~(fresh & ~priority)), state, freed[:slots.size], slots,
                     advantages=True)
      state = B.store(B.remove(state, slots), data, freed, step=data.step, score=data.correct[freed],
                      advantages=adv[freed])
      return out, state, {"priority_rows": float((fresh & priority).sum()), "replayed": float(slots.size),
                          "stored": float(freed.size), **_buffer_metrics(state)}

    return Replay(init, fn, name="rorecomp_compensation", phase="advantages", logp_old=logp_old,
                  mixes_prompts=True, bind_fn=lambda stage, f: build(f))

  return build(None)


class SpearState(NamedTuple):
  """``spear_replay``'s checkpointed state: the trajectory buffer and a ring of the latest ``N`` group mean rewards
  (``baseline="reward"``: fresh rewards) (the baseline's window: ``rewards [N]`` float32, ``count []`` int64 values
  seen so far)."""
  buffer: B.ReplayBuffer
  rewards: np.ndarray
  count: np.ndarray


def _row_advantages(data) -> np.ndarray:
  """``[B]``: each row's mean advantage over its completion tokens (``[B]`` advantages as they are)."""
  adv = np.asarray(data.require("advantages", "spear_replay"), np.float32)
  if adv.ndim == 1:
    return adv
  cm = np.asarray(data.completion_mask, np.float32)
  return (adv * cm).sum(1) / np.maximum(cm.sum(1), 1.0)


def spear_replay(*, capacity: int = 256, threshold: float = 0.0, ratio: float = 0.25, ramp_steps: int = 200,
                 max_age: int = 10, baseline_size: int = 1024, baseline: str = "group", recalibrate: str = "median",
                 decay: float = 1.0, logp_old: str = "behavior"):
  """SPEAR self-imitation replay (seed 000_3e503271be254a43.txt L75), after the advantages.

  *Store*: every fresh valid row whose advantage (mean over its completion) exceeds ``threshold`` (0: the authors'
  ``TrajectoryBufferBatch.update_batch`` keeps ``advantages.mean(-1) > 0``; their README's
  ``trajectory_score_threshold`` = 1 is not read there), with its tokens, behaviour log-probs, reward and
  advantages. *Recalibrate* (``_buffer.spear_recalibrate``): a stored row's advantage is re-estimated against the
  current policy's level, ``A = R − median(the latest baseline_size group mean rewards)`` (``baseline="group"``,
  the authors' 50th percentile of per-group means, ``baseline_buffer_size``; ``baseline="reward"``: of the latest
  fresh rewards), or its stored advantage times ``decay^age`` (``recalibrate="decay"``; the authors multiply by
  ``weight_decay_trajectory_replay`` once). *Replay with the advantage filter*
  (``_buffer.spear_plan``): stored rows with ``A > 0``, at most ``max_age`` steps old (the README's
  ``trajectory_tolerate_steps`` = 10; older rows leave the buffer), best first, take the place of rows that carry
  no gradient (filtered-out rows, and fresh rows whose advantages are all 0, e.g. zero-variance groups), at most
  ``floor(ratio * B)`` of them. *Curriculum*: a replayed row's advantage is ``c(t)·A`` with ``c(t) =
  ½(1 − cos(π·min(t, ramp_steps)/ramp_steps))`` rising from 0 to 1: the self-imitation loss coefficient of the
  README (``replay_loss_coef`` 1 reached over ``max_replay_loss_steps`` = 200 steps by a cosine schedule); for a
  loss linear in the advantage (the PPO clip family) scaling the advantage scales that row's loss exactly.

  Ours: replayed rows share the step's batch and aggregation (SPEAR adds a separate self-imitation PPO loss, run
  when its buffer exceeds 1.5 × ``trajectory_buffer_size`` rows, on a random power-of-2 subset of the rows with
  ``A >= 0``, and then emptied), and fill rows without gradient instead of enlarging the batch;
  ``logp_old="behavior"`` (default) gives them
  the ratio against their stored behaviour log-probs, as an off-policy PPO update does. Rows stay in the buffer
  after a replay until they age out or are evicted (FIFO at ``capacity``).
  """
  B.check_int("capacity", capacity)
  B.check_int("ramp_steps", ramp_steps)
  B.check_int("max_age", max_age, minimum=0)
  B.check_int("baseline_size", baseline_size)
  ratio = B.check_unit("ratio", ratio, lo_open=True)
  if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
    raise ValueError(f"threshold must be a finite number, got {threshold!r}")
  if recalibrate not in ("median", "decay"):
    raise ValueError(f"recalibrate must be 'median' or 'decay', got {recalibrate!r}")
  if baseline not in ("group", "reward"):
    raise ValueError(f"baseline must be 'group' or 'reward', got {baseline!r}")
  decay = B.check_unit("decay", decay, lo_open=True)
  logp_old = _logp_old(logp_old)

  def build(facts):
    def init():
      return SpearState(B.empty_buffer(capacity, _width(facts, "spear_replay")),
                        np.zeros(baseline_size, np.float32), np.zeros((), np.int64))

    def fn(data, state):
      data = _start(data)
      buf, step = state.buffer, int(data.step)
      fresh = data.valid & ~np.asarray(data.replay_mask, bool)
      row_adv = _row_advantages(data)
      new = (B.spear_group_means(data.rewards, data.group_id, fresh) if baseline == "group"
             else np.asarray(data.rewards, np.float32)[fresh])
      ring, count, level = B.spear_baseline_update(state.rewards, int(state.count), new)
      stale = np.flatnonzero((np.asarray(buf.prompt_index) >= 0) & (step - np.asarray(buf.step) > max_age))
      buf = B.remove(buf, stale)
      rec = B.spear_recalibrate(buf, level, step=step, mode=recalibrate, decay=decay)
      adv = np.asarray(data.require("advantages", "spear_replay"), np.float32)
      adv_t = (adv[:, None] if adv.ndim == 1 else adv) * data.completion_mask
      silent = ~data.valid | (fresh & ~np.any(adv_t != 0, axis=1))
      rows, slots = B.spear_plan(np.flatnonzero(silent), rec, buf, step=step, max_age=max_age,
                                 limit=int(math.floor(ratio * data.batch_size + 1e-9)))
      coef = 1.0 - 0.5 * (1.0 + math.cos(math.pi * min(step, ramp_steps) / ramp_steps))
      scaled = B._copy(buf)  # pylint: disable=protected-access
      scaled.advantages[slots] = (coef * rec[slots])[:, None] * scaled.completion_mask[slots]
      out = B.insert(data, scaled, rows, slots, advantages=True)
      keep = np.flatnonzero(fresh & (row_adv > threshold))
      buf = B.store(buf, data, keep, step=step, score=np.asarray(data.correct)[keep], advantages=adv_t[keep])
      return out, SpearState(buf, ring, np.asarray(count, np.int64)), {
          "replayed": float(rows.size), "stored": float(keep.size), "aged_out": float(stale.size),
          "baseline": level, "coef": coef,
          "replayed_advantage": float(rec[slots].mean()) if slots.size else 0.0, **_buffer_metrics(buf)}

    return Replay(init, fn, name="spear_replay", phase="advantages", logp_old=logp_old,
                  bind_fn=lambda stage, f: build(f))

  return build(None)


_S0 = "000_3e503271be254a43.txt"
_S1 = "001_5839a3671b0b4d92.txt"


def _technique_rows():
  from rljax._technique import Fidelity, Technique
  return (
      Technique("exgrpo", "replay", B.exgrpo_pick,
                "P(q) ∝ N(acc_b(q); 0.5, 1/G) / |b(q)|; replay argmin_entropy success of q in a group of G-1 fresh "
                "rows",
                f"{_S0} L19, {_S1} L241 (ExGRPO, arXiv 2510.02245)",
                stage=exgrpo,
                fidelity=Fidelity("authors_code", "github.com/ElliottYan/LUFFY: ExGRPO/exgrpo/verl/verl/mix_src/"
                                  "experience/weighted_bucket_sampler.py (normal)",
                                  "entropy: the sampler's (theirs: the current policy's); draws without "
                                  "replacement; a mixed group rescored on its G − 1 fresh rows (theirs: all G); "
                                  "retired prompts stay in the loader (theirs: dropped)",
                                  read="ElliottYan/LUFFY@01f4ae06 ExGRPO/exgrpo/verl/verl/mix_src/experience/"
                                       "weighted_bucket_sampler.py:18-110 (normal mapping, multinomial draw), "
                                       "experience_trainer_ops.py:20-100 (storing successes with the "
                                       "trainer's old_log_probs, :51-52; lbound/rbound; exp_is_correct), "
                                       "experience_collate_fn.py:20-183 (exp_ratio, argmin entropy, no check against "
                                       "the batch's own prompts), experience_helpers.py:15-38 (bucket sampling), "
                                       "mix_trainer_experience.py:370-392 (all-solved prompts retired to "
                                       "skip_uid_set, all-fail / all-solved groups masked), :228-262 (each epoch's "
                                       "loader rebuilt without skip_uid_set: rl_dataset_with_experience.py:40-45) "
                                       "and :538-542 (switch to mixed policy); #51 read-whole pass: "
                                       "weighted_bucket_sampler.py:18-54 (weightings linear / normal / sqrt / "
                                       "linear_clip), experience_helpers.py:41-169 (the metric inputs, "
                                       "compute_postcal_metrics, select_best_experiences), "
                                       "config/mix_ppo_trainer.yaml:231-242 (trainer experience defaults); "
                                       "ExGRPO/exp_scripts/run_exgrpo.sh:27-40, 63, 92 (grpo_use_std False: "
                                       "mix_trainer.py:88-116 → core_algos.py:110-160 use_std; with trainer.experience True, as run_exgrpo.sh:28 "
                                       "sets, main_mix_ppo.py:232-234 runs ExperienceMixRayPPOTrainer, whose advantage "
                                       "is the same code at mix_trainer_helper.py:38-67, per-row review k). Per-row review j "
                                       "(#51): run_exgrpo.sh:26-100 whole (:68 actor.entropy_coeff=0.001), "
                                       "mix_actor.py:40-50, 110-115, 183-208 (the entropy term), "
                                       "config/mix_ppo_trainer.yaml:41, 82-85; experience_bucket_manager.py:1-80 "
                                       "(buckets keyed by num_success, a uid moved on each store). Thirteenth draw (#51 item 4, seed "
                                       "20261218): experience_trainer_ops.py:7-12 (collect_experience_entries returns "
                                       "unless the collate function is in mixed-policy mode), mix_trainer_experience."
                                       "py:150-156 (the collate function starts on-policy), :335-420 (the per-group "
                                       "loop, batch/solved at :402, storage at :418), :538-542 (the switch), "
                                       "experience_collate_fn.py:109-183 (an empty pool: n_exp = 0). Eighteenth draw (#51 item "
                                       "4, seed 20261223): experience_trainer_ops.py:14-68 (a success stored as "
                                       "decoded text, .rstrip(eos_token) at :50), experience_helpers.py:172-237 "
                                       "build_off_policy_sample (re-tokenised), mix_vllm_rollout_exp.py:152-166, "
                                       "235, 280-292 (eos appended, the prefix and prefix_mask)",
                                  defaults=(("ratio", "0.5", "experience_ratio 0.5 (int(B·ratio))"),
                                            ("mu / sigma", "0.5 of the group / one bucket",
                                             "N(k; n/2, 1) over success counts (exp_bucket_manager normal)"),
                                            ("buckets stored", "0 < p < 1", "experience_lbound 0 < k ≤ rbound 7 "
                                             "(n = 8)"),
                                            ("per_prompt", "2 latest successes", "every distinct success text"),
                                            ("capacity", "512 rows", "none (a dict over the dataset)"),
                                            ("selection", "lowest mean behaviour entropy",
                                             "exp_metric ent, exp_select_mode argmin (current policy)"),
                                            ("logp_old", "'behavior' (the sampler's log-probs, stored)",
                                             "exp_is_correct True: the recorded old_log_probs (the trainer's "
                                             "recomputed π_old of the storing step)"),
                                            ("start", "the first step (stored and replayed)",
                                             "experience_start_sratio 0.35: once a step's batch/solved, the "
                                             "fraction of its responses with reward 1 (mix_trainer_experience.py:"
                                             "402), exceeds it (:538-540, after that step); nothing is stored "
                                             "before (collect_experience_entries returns unless is_mixed_policy, "
                                             "experience_trainer_ops.py:11-12), so the first mixed step's batch "
                                             "finds an empty pool and is all fresh prompts; replay begins the step "
                                             "after, from successes stored since the switch (thirteenth draw, "
                                             "#51)"),
                                            ("sample range", "every stored prompt",
                                             "exp_sample_range all (first_half / last_half not built)"),
                                            ("yaml defaults (the script overrides)", "(as above)",
                                             "mix_ppo_trainer.yaml: experience False, exp_metric 'random', "
                                             "exp_bucket_manager null (uniform random.sample over the stored "
                                             "prompts), exp_is_weighting False; run_exgrpo.sh: ent, normal"),
                                            ("advantage (not this stage's)", "the recipe's advantage stage",
                                             "adv_estimator grpo with grpo_use_std False (run_exgrpo.sh:92; the "
                                             "yaml's True): r − mean_g, no ÷ std, a singleton keeps r: "
                                             "dr_grpo(singleton='raw') (tested)"),
                                            ("loss (not this stage's)", "the recipe's loss term (the exgrpo_policy "
                                             "recipe composes this stage with it)",
                                             "run_exgrpo.sh:88-94: use_off_policy_loss True, off_policy_reshape "
                                             "p_div_p_0.1, loss_remove_clip True, loss_remove_token_mean True "
                                             "(mix_core_alg.py:36-219: a replayed row's tokens (prefix_mask) take "
                                             "−A·w/(w + 0.1), w = π_θ/π_old with π_old the recorded log-probs, "
                                             "fresh rows −A·r unclipped, Σ over tokens ÷ the response length): "
                                             "exgrpo_policy(beta=0.1) with its aggregation row; plus an entropy "
                                             "bonus the record had not listed: run_exgrpo.sh:68 "
                                             "actor.entropy_coeff=0.001 (also mix_ppo_trainer.yaml:41), "
                                             "use_adaptive_temperature False (:82), so mix_actor.py:184, 208 "
                                             "make each micro-batch's loss pg_loss − 0.001·masked_mean(entropy, "
                                             "response_mask) (the entropy at rollout.temperature 1.0): "
                                             "exgrpo_policy alone has none; theirs adds entropy_bonus(coef=0.001) "
                                             "(per-row review j, #51)"),
                                            ("sampling temperature (entropy, log-probs)", "untempered (the "
                                             "sampler's entropy_behavior and logp_behavior)",
                                             "rollout.temperature 1.0 (run_exgrpo.sh:60): the entropy that picks "
                                             "the replayed success and the recorded old_log_probs are at T = 1; "
                                             "use_kl_loss False with kl_ctrl.kl_coef 0.000 (:67, 79): no KL term "
                                             "(error-class sweep #51, s2b)")),
                                  placement="theirs: successes stored after the reward from each group with "
                                            "0 < k ≤ 7 successes; the collate function (before the rollout) swaps "
                                            "int(B·ratio) prompts for bucket-sampled experience prompts whose "
                                            "lowest-entropy stored success joins G − 1 fresh rollouts; the "
                                            "recorded old log-probs replace the recomputed ones; ours: the same "
                                            "stage split (store after the step, prompt swap before the rollout, "
                                            "splice after it), the replayed row's ratio against its stored "
                                            "behaviour log-probs",
                                  deviations=(
                                      "experience mixing starts at the first step; theirs once a step's "
                                      "batch/solved (the fraction of its responses with reward 1) exceeds "
                                      "experience_start_sratio 0.35 (not built); theirs also store no success "
                                      "before that switch (experience_trainer_ops.py:11-12), so their pool holds "
                                      "only successes found after it and their first mixed step replays nothing; "
                                      "ours stores and replays from the first step (thirteenth draw, #51: the "
                                      "record had omitted the storage gate)",
                                      "the entropy that picks the replayed success is the sampler's at storage "
                                      "time; theirs recomputed by the current policy",
                                      "per_prompt (2) and capacity (512) bound the buffer; theirs keep every "
                                      "distinct success",
                                      "draws one prompt at a time without replacement (the same law for the "
                                      "first draw as their multinomial over buckets)",
                                      "a mixed group (G − 1 fresh + 1 replayed success) is rescored on its fresh rows "
                                      "(bucket round(p·G), p = k_fresh/(G − 1)); theirs count all G rows, the replayed "
                                      "success included: 0 fresh successes gives bucket 0 here, 1 there; 3 of 7: 3, 4",
                                      "a prompt solved by every fresh row leaves the buffer, not the loader; theirs "
                                      "also leave the training data (skip_uid_set, when an epoch's loader is built)",
                                      "their trainer also masks all-fail and all-solved groups out of the loss; "
                                      "here that is the zero_variance filter, composed separately",
                                      "the stored log-probs are the sampler's (logp_behavior); theirs the trainer's "
                                      "recomputed old_log_probs of the storing step (experience_trainer_ops.py:51-52), "
                                      "so theirs carry no sampler-trainer mismatch",
                                      "a stored prompt whose fresh group (a loader group too) has no success is "
                                      "rescored to 0 here (bucket 0); theirs skip such a group (k ≤ "
                                      "experience_lbound) and the prompt keeps its bucket",
                                      "an experience prompt is never one of the batch's own prompts here; theirs "
                                      "can draw a prompt that is also among the batch's fresh prompts",
                                      "their other modes are not built: exp_metric 'ppl' (lowest perplexity) and "
                                      "'random' (a random stored success, the yaml default), exp_select_mode "
                                      "'argmax', bucket weightings 'linear' (k/n), 'sqrt' (√(k/n)), 'linear_clip' "
                                      "(k/n, 0.5 above n/2) and none (uniform over prompts), exp_is_weighting",
                                      "their entropy metric is not the mean over the success's own tokens: the "
                                      "mask is ~(responses != pad), i.e. the padding positions, of row i mod 8 of "
                                      "the last chunk of 8 (experience_helpers.py:137-147), over the entropies of "
                                      "the last max_target_length positions of the left-padded prompt + success; "
                                      "ours averages the stored row's valid response tokens",
                                      "a success is stored as text and replayed re-tokenised; ours stores and "
                                      "replays the sampled token ids: theirs decode the response "
                                      "(skip_special_tokens=False) and .rstrip(tokenizer.eos_token) "
                                      "(experience_trainer_ops.py:50), which strips every trailing character in "
                                      "the eos string's character set, not the string (for '<|im_end|>' a "
                                      "success ending 'is done' is stored as 'is do'); at replay the text is "
                                      "tokenised again (add_special_tokens=False; a leading '<think>\\n' dropped "
                                      "when the chat template ends with it, experience_helpers.py:172-237 "
                                      "build_off_policy_sample) and the eos id appended (mix_vllm_rollout_exp.py:"
                                      "157-166) as a prefix of ratio 1.0 (:235, :286-289); where the round trip "
                                      "changes the tokens, the replayed row is another sequence and its recorded "
                                      "old log-probs, padded and copied by position (experience_trainer_ops.py:"
                                      "76-99), belong to other tokens (eighteenth draw, #51: omitted)"))),
      Technique("rapo_replay", "replay", B.rapo_plan,
                "all-failed group g of prompt q: its lowest-reward row <- q's latest stored success",
                f"{_S0} L23 (Fathom-DeepResearch / RAPO)",
                stage=rapo_replay,
                fidelity=Fidelity("paper_formula",
                                  "arXiv 2509.24107v1 Sec. 2.4 'Replay buffer' (paper text stored in the code index, "
                                  "file id 61329118727)",
                                  "per_prompt=1, per_group=1 = theirs; the replaced row (ours the lowest-reward one, "
                                  "theirs a random one) and the 256-row bound are ours; the authors' repo has no "
                                  "RAPO code",
                                  read="arXiv 2509.24107v1 paper text (code index, read_file id 61329118727, offsets "
                                       "0-32000; #51 paper-conventions sweep s3): Sec. 2.2 Eqs. 2-4 (token-level "
                                       "clipped loss; GRPO advantage (r − μ_R)/σ_R with σ_R the population std "
                                       "(1/G), no ε; r = 0.1·R_format + 0.9·R_answer), Sec. 2.4 RAPO (dataset pruning "
                                       "Eq. 5: prompts with SolveRate ≥ 0.9 pruned at each epoch's end; advantage "
                                       "scaling Eq. 6: Â·G/G_good; replay buffer: 'a per-prompt buffer B containing "
                                       "the most recent successful trajectory o⋆ with R(q, o⋆) > 0.5. If all "
                                       "rollouts for a prompt fail in the current epoch, one trajectory is randomly "
                                       "replaced with o⋆ from B'), Sec. 2.5 Eq. 8 (stage-2 reward: a correct rollout "
                                       "≥ 0.5, an incorrect one ≤ 0.5), Sec. 2.6 (stage 1: 10 epochs, lr 1e-6, "
                                       "batch 32, mini-batch 16, 5 rollouts per group, top-p 1.0, temperature 1.4; "
                                       "stage 2: 2 more epochs). Before (issue #51 passes): Fathom-DeepResearch "
                                       "abstract (seed 000 L23); arXiv 2509.24107v1 (pages corpus, "
                                       "arxiv.org/html/2509.24107v1: the abstract only, the corpus returns a page's "
                                       "opening) and the OpenReview forum (openreview.net/forum?id=X2oH64LWHO: 'a "
                                       "per-prompt replay buffer that injects the latest successful rollout into "
                                       "failed groups'); the record said the method section was not reached: its "
                                       "text is in the code index. FractalAIResearchLabs/Fathom-DeepResearch (code "
                                       "index, 6 files): no RAPO. Eleventh draw (#51 item 4, seed 20261216): "
                                       "the record did not say which of a group's successes ours stores "
                                       "(rljax/replay/_buffer.py success_store_plan: the highest reward first)",
                                  defaults=(("capacity", "256 rows (the oldest evicted)",
                                             "one success per prompt, no bound stated"),
                                            ("per_prompt", "1 (latest success per prompt)",
                                             "1: the most recent successful trajectory o⋆"),
                                            ("stored row of a group with several successes",
                                             "the highest-reward correct fresh row (ties: the lower row; "
                                             "_buffer.success_store_plan)",
                                             "not stated: 'the most recent successful trajectory o⋆' (the G "
                                             "rollouts of one step are equally recent)"),
                                            ("per_group", "1 row replaced", "1 ('one trajectory is randomly replaced')"),
                                            ("replaced row", "the lowest-reward row (ties: the later row)",
                                             "a random rollout of the group"),
                                            ("stored success", "a row with correct > 0.5 (the verifier's verdict)",
                                             "R(q, o⋆) > 0.5 on the reward (stage 1, Eq. 4: ⇔ correct; stage 2, "
                                             "Eq. 8: a correct rollout ≥ 0.5)"),
                                            ("trigger", "no valid row of the group correct",
                                             "all rollouts for the prompt fail in the current epoch"),
                                            ("logp_old", "'recompute'", "not stated"),
                                            ("advantage of the refilled group (the estimator's, not this stage's)",
                                             "the recipe's (grpo: (r − μ)/(σ ddof 1 + 1e-6))",
                                             "Eq. 3: (r − μ_R)/σ_R, population σ, no ε; then × G/G_good (Eq. 6)"),
                                            ("group size / batch (their runs)", "the recipe's",
                                             "5 rollouts per group, batch 32, lr 1e-6, temperature 1.4")),
                                  placement="theirs (Sec. 2.4): after a prompt's G rollouts are scored, before the "
                                            "group advantage, once per epoch per prompt: a prompt whose rollouts "
                                            "all fail has one random rollout replaced by its stored o⋆, which "
                                            "then enters the group's advantage (Eq. 3); the buffer keeps each "
                                            "prompt's most recent success with R > 0.5; ours: a replay stage "
                                            "after the reward, before the advantages: a group with no correct "
                                            "row swaps its lowest-reward row for its prompt's latest stored "
                                            "success, which then joins the group's advantage",
                                  deviations=(
                                      "the replaced row is the group's lowest-reward row (deterministic); theirs "
                                      "a random one: when the failed rows' rewards differ (their Eq. 4 gives 0 or "
                                      "0.1 by format) the refilled group's mean and σ, so every advantage of the "
                                      "group, differ from a draw that replaced another row; equal when the failed "
                                      "rows share one reward",
                                      "the buffer holds at most capacity = 256 rows (the oldest evicted); theirs "
                                      "keeps one success per prompt with no stated bound. At their settings "
                                      "(4,988 prompts, 32 per step, each prompt once per epoch) a prompt's "
                                      "success is evicted before the prompt returns once 256 other prompts' "
                                      "successes were written in between (roughly: a per-epoch share of "
                                      "succeeding prompts above 256/4,988 ≈ 5%); then the all-failed groups "
                                      "theirs would refill find nothing here; capacity ≥ the number of "
                                      "prompts keeps every prompt's latest success, as theirs",
                                      "of a group's several successes ours stores the highest-reward one (ties: "
                                      "the lower row); the paper does not say which (its G rollouts are equally "
                                      "recent). Under their Eq. 4 a formatted success (1.0) is stored before an "
                                      "unformatted one (0.9); the stored reward then moves every advantage of "
                                      "a group it refills whose other rows' rewards differ (0 / 0.1 by format), "
                                      "not one whose other rows share one reward",
                                      "a stored success is a row with correct > 0.5; theirs R > 0.5 on the shaped "
                                      "reward (the same under their stage-1 reward, Eq. 4)",
                                      "RAPO's dataset pruning (Eq. 5) and reward-aware advantage scaling (Eq. 6) "
                                      "are not part of this row",
                                      "logp_old='recompute' (the replayed row's ratio against the current "
                                      "π_old) is ours; the paper does not say"))),
      Technique("positive_replay", "replay", B.positive_replay_plan,
                "p_g <= max_success: k = ceil(ratio (1 - p_g) n_g) failed rows <- stored successes of the prompt",
                f"{_S0} L37 (MobileRL / ADAGRPO)",
                stage=positive_replay,
                fidelity=Fidelity("authors_code", "github.com/xuyifan-0731/MobileRL-iclr: "
                                  "training/verl/workers/agentic/replay_buffer.py (ReplayBuffer)",
                                  "theirs: mode='mobilerl' (top 25% mean-A rows stored, balanced eviction, age 4), "
                                  "replayed into gradient-free rows (theirs: appended); default mode='prompt' "
                                  "(same-prompt successes, before the advantages) ours",
                                  read="xuyifan-0731/MobileRL-iclr@da92ec0c (code index) training/verl/workers/"
                                       "agentic/replay_buffer.py (ReplayBuffer: __init__, push, sample_for_training, "
                                       "_evict_until_fits; masked_row_mean) and training/configs/glm_mobilerl.yaml "
                                       "(algorithm.replay_buffer). Error-class sweep (#51, s2b): the caller, "
                                       "found: training/verl/trainer/ppo/ray_trainer.py RayPPOTrainer.fit (stored "
                                       "copy, read_file): the buffer is built only when algorithm.use_replay_buffer "
                                       "(max_size / top_ratio / replay_ratio / balance_alpha from "
                                       "algorithm.replay_buffer, max_age_steps .get default 4); each step the batch "
                                       "is cut to a multiple of the actor world size, rewarded, compute_advantage "
                                       "(GRPO by uid), then the per-data_source re-standardisation of the advantages "
                                       "when actor_rollout_ref.task_adv_normalize, then mute_uid_all_zero_reward "
                                       "(training/verl/workers/agentic/negative_sample_clip.py), then push(batch), "
                                       "sample_for_training(len(batch)), the replayed rows (cut to a multiple of the "
                                       "world size) concatenated before the step's rows into one update_actor call; "
                                       "glm_mobilerl.yaml: use_replay_buffer True, task_adv_normalize True, "
                                       "mute_uid_all_zero_reward True, trace_level_kl_clip False, full_async True",
                                  defaults=(("mode", "'prompt' (ours)", "the buffer = mode='mobilerl'"),
                                            ("capacity", "256", "max_size 256 (yaml; class default 512)"),
                                            ("top_ratio", "0.25", "0.25 (yaml)"),
                                            ("replay_ratio", "1.0", "1.0 (yaml; class default 0.25)"),
                                            ("balance_alpha", "0.5", "0.5"),
                                            ("max_age", "4", "max_age_steps 4 (class default; not in the yaml)"),
                                            ("logp_old", "'recompute' (prompt) / 'behavior' (mobilerl)",
                                             "the stored rows' old_log_probs"),
                                            ("per-task advantage re-standardisation (before push)", "none: the "
                                             "advantages as the advantage stage gives them",
                                             "actor_rollout_ref.task_adv_normalize True (glm_mobilerl.yaml): after "
                                             "GRPO, each data_source's rows (android_world, android_lab) get "
                                             "(A − mean)/(std + 1e-6), mean and std over that source's response "
                                             "tokens (attention mask); push ranks, and the buffer stores and "
                                             "replays, these advantages"),
                                            ("mute_uid_all_zero_reward (before push)", "none",
                                             "True (yaml): a uid whose rm_final_scores are all 0 has its rows' "
                                             "loss_mask and response_mask zeroed, and in other uids the "
                                             "non-positive rows beyond twice the positive ones are muted at "
                                             "random; muted rows are still ranked and stored (push reads the "
                                             "attention mask) and replay without gradient"),
                                            ("batch cut", "none (the static layout)",
                                             "the step's batch cut to a multiple of the actor world size before "
                                             "the reward (rows dropped from the end, a uid group can lose rows); "
                                             "the replay batch likewise before the concatenation")),
                                  placement="theirs (RayPPOTrainer.fit, use_replay_buffer True): after "
                                            "compute_advantage, task_adv_normalize and mute_uid_all_zero_reward, "
                                            "push(batch) reads the batch's advantages: the top "
                                            "ceil(top_ratio·#uuids) uuids by mean "
                                            "advantage are stored; sample_for_training(B) returns the "
                                            "ceil(replay_ratio·B) stored uuids of highest advantage, shuffled, "
                                            "to be concatenated; ours (mobilerl): a replay stage after the "
                                            "advantages, stored rows fill the step's gradient-free rows with "
                                            "their stored advantages; ours (prompt): before the advantages, "
                                            "same-prompt successes replace failed rows of hard groups",
                                  deviations=(
                                      "the default mode='prompt' is ours (the abstract's 'difficulty-adaptive "
                                      "positive replay' read per prompt); mode='mobilerl' is their buffer",
                                      "mobilerl: replayed rows take the gradient-free rows (filtered, all-zero "
                                      "advantage) of a fixed-size batch; theirs are appended (the batch grows)",
                                      "an episode is one row; theirs a uuid of step rows, scored by the mean of "
                                      "its rows' token-mean advantages",
                                      "mobilerl: their launch re-standardises the advantages per data source "
                                      "(task_adv_normalize) before push, so which trajectories enter the top 25% "
                                      "and the advantages they replay with are the per-task standardised ones "
                                      "(a row of a task whose advantages are all small can rank high); ours "
                                      "ranks and stores the advantage stage's output; the per-task step is not "
                                      "built",
                                      "mobilerl: their mute_uid_all_zero_reward (loss masks zeroed for all-0 "
                                      "groups and for surplus negatives) and the world-size cuts of the batch "
                                      "and of the replayed rows are not built"))),
      Technique("rorecomp_compensation", "replay", B.compensation_plan,
                "non-priority rows -> FIFO buffer (with A); freed rows <- floor(c · #freed) oldest buffered rows",
                f"{_S1} L163 (RoRecomp)",
                stage=rorecomp_compensation,
                fidelity=Fidelity("abstract", f"{_S1} L163 (RoRecomp: 'compensation batches ... from a replay buffer')",
                                  'compensation rows fill freed rows (paper: separate batches); FIFO, replayed once, '
                                  'stored A: ours. No code; the pages corpus (arXiv 2509.25958v1 HTML, summaries) gave '
                                  'the abstract and the opening of §1, not the method',
                                  read="arXiv 2509.25958v1 (page read: arxiv.org/html/2509.25958v1, pages corpus: abstract "
                                       "and the opening of §1; also summarxiv.com/en/paper/2509.25958 and "
                                       "sciencestack.ai/paper/2509.25958: abstract and a summary; seed 001 L163); "
                                       "the corpus returns a page's opening, so the method section was not "
                                       "reached; no code found. #51 paper-conventions sweep (s3): the paper's ICLR "
                                       "2026 reviews (code index, read_file id 62147932634; the paper text itself "
                                       "is not stored): review 1 quotes the paper, 'Once the buffer is full, the "
                                       "oldest experiences are popped to form a compensation batch B_comp for an "
                                       "additional training step', and asks what the role of its p_comp is; it "
                                       "also asks whether the total batch size is reduced at each step; review 2: "
                                       "'compensation batch scheduling' tuned empirically",
                                  defaults=(("fraction", "0.5 (rorecomp's split)",
                                             "α, value not stated (review 1)"),
                                            ("compensation", "1.0 (freed rows filled)",
                                             "p_comp, value and role not stated (review 1)"),
                                            ("capacity", "256 rows, FIFO, each replayed once",
                                             "a buffer whose filling triggers a compensation batch of the oldest "
                                             "experiences (size not stated)"),
                                            ("when compensation rows train", "every step, in the freed rows of the "
                                             "same update", "once the buffer is full: an additional training step "
                                             "on B_comp (the paper, as quoted by review 1)"),
                                            ("logp_old",
                                             "'recompute' (replayed rows' proximal log-probs: the current policy's forward at the replaying step), so "
                                             "a compensation row's PPO ratio starts at 1 (its sampling-time "
                                             "log-probs stay in logp_behavior, used only by a correction); "
                                             "'behavior' is the option",
                                             "not stated (neither the abstract nor review 1's quotation gives the "
                                             "log-probs of B_comp's additional step)")),
                                  placement="theirs (abstract; the paper as quoted by review 1): compensation "
                                            "batches are built from the remaining (non-priority) responses held "
                                            "in a replay buffer; once the buffer is full its oldest experiences "
                                            "are popped into a compensation batch B_comp trained in an additional "
                                            "step, apart from the priority batches; ours: a replay stage after "
                                            "the advantages: the non-priority fresh rows enter a FIFO buffer with "
                                            "their advantages and the freed rows of the same step take the oldest "
                                            "buffered rows",
                                  deviations=(
                                      "buffered rows (advantages, rewards, log-probs) are stored as float32, also "
                                      "under x64 (a fixed-shape checkpointed buffer): a replayed row is "
                                      "float32-rounded",
                                      "compensation rows share the step's static batch and its one update, every "
                                      "step; theirs pops the oldest experiences into a separate compensation batch "
                                      "for an additional training step once the buffer is full (the paper, as "
                                      "quoted by review 1): the priority rows and the compensation rows get "
                                      "separate optimizer steps there, one here; their p_comp is not stated",
                                      "buffered rows keep the advantages computed in their own group; FIFO, each "
                                      "replayed once, floor(c·#freed) of them: our reading",
                                      "rows of other prompts enter a group, so the shared-prompt forward is off"))),
      Technique("spear_replay", "replay", B.spear_plan,
                "store A > τ; replay stored rows with A' = R − median(group mean R) > 0 as c(t)·A', c: cosine 0 → 1",
                f"{_S0} L75 (SPEAR, arXiv 2509.22601)",
                stage=spear_replay,
                fidelity=Fidelity("authors_code", "github.com/TencentYoutuResearch/SPEAR: verl-agent/verl/trainer/ppo/"
                                  "ray_trainer_hybrid.py (TrajectoryBufferBatch)",
                                  "replayed rows fill gradient-free rows each step, coef as an advantage scale "
                                  "(theirs: a SIL loss on a random 2^k subset when the buffer passes 1.5x size); A' > "
                                  "0 (theirs >= 0); decay^age",
                                  read="TencentYoutuResearch/SPEAR@7e843151 verl-agent/verl/trainer/ppo/"
                                       "ray_trainer_hybrid.py:154-434 (TrajectoryBufferBatch: remove_old, "
                                       "is_full_capacity, maintain_reward_statistics, prepare_for_selection, "
                                       "get_buffer: a random power-of-2 subset), :439-553 (update_batch), :555-577 "
                                       "(get_buffer_size), :862-874 and :1029-1070 (call sites); the second copy "
                                       "verl/verl/trainer/ppo/ray_trainer_hybrid.py:149-528 and verl/recipe/spear/"
                                       "run_qwen2-32b_spear.sh, run_qwen3-32b_spear.sh:56-80 (read in the #51 read-"
                                       "whole pass); verl-agent/verl/"
                                       "trainer/ppo/core_algos.py:240-287 (GRPO advantage with the custom mean / "
                                       "std); verl-agent/verl/workers/actor/dp_actor.py:501-614 (the replay pass: "
                                       "its own loss and optimizer step; :590-599 the coefficient ramp); verl-agent/"
                                       "verl/trainer/config/ppo_trainer.yaml:53-71, 95-98, 273; "
                                       "examples/gigpo_trainer/run_alfworld_spear.sh:38-74, 114-118, 145-155. "
                                       "Error-class sweep (#51, s2b): what the buffer's R holds and which rows feed "
                                       "it: ray_trainer_hybrid.py:1062-1069 (update_batch(messages, batch, "
                                       "reward_tensor, ...) after update_actor), :451 (the baseline's rm_scores = "
                                       "reward_tensor.sum(−1)), :252-278 (prepare_for_selection: R = the stored "
                                       "reward_tensor), :927-1005 (reward_tensor = the episode reward manager's "
                                       "score, tool-call bonus included: agent_system/reward_manager/episode.py:"
                                       "136-163; then _filter_rollout, :1001 → ray_trainer.py:1234-1364: the "
                                       "int(0.75·#groups) groups of largest std kept and their rows cut at random "
                                       "to the largest power of 2), :643 (adjust_batch's duplicated rows), "
                                       ":725-731 with ray_trainer.py:214-239 (apply_invalid_action_penalty: 0.1 per "
                                       "invalid step row subtracted in place from token_level_scores, the tensor "
                                       "fit then passes on as reward_tensor); the scripts' rollout_filter_ratio "
                                       "0.75, rollout_filter_type std, use_invalid_action_penalty True, "
                                       "invalid_action_penalty_coef 0.1, use_toolcall_reward cosine "
                                       "(run_alfworld_spear.sh:59-60, 83-84, 143-144, 152-153, 161-162). #51 "
                                       "per-row review f: ray_trainer_hybrid.py:1029-1035 (get_buffer, so the p50, "
                                       "before update_actor) against :1059-1069 (remove_old, then update_batch "
                                       "appends the step's group means, after it), :483-488 (the baseline window "
                                       "trimmed by whole steps before the append), :181-186 (remove_old: ages "
                                       "against the newest stored batch's step), :858 with :644, 656 and "
                                       "verl-agent/verl/workers/actor/dp_actor.py:374, 592-599 (the ramp's "
                                       "global_steps counts from 1)",
                                  defaults=(("threshold", "0 (store mean A > 0)", "mean A > 0 (update_batch); "
                                             "trajectory_score_threshold 1 (the scripts' advantage_threshold) is "
                                             "set but never read"),
                                            ("capacity", "256 rows (FIFO)", "trajectory_buffer_size 2048; replay "
                                             "once more than 1.5 × 2048 stored rows have R above the p50 of group "
                                             "means (get_buffer_size), then emptied"),
                                            ("max_age", "10 steps", "tolerate_steps 5 (scripts; class min(·, 10))"),
                                            ("baseline_size", "1024 group means", "baseline_buffer_size 10240"),
                                            ("recalibrate", "'median' (R − p50 of group means)",
                                             "weight_decay_trajectory_replay −1: R − p50, keep A ≥ 0"),
                                            ("recalibration scale", "none (R − p50)",
                                             "norm_adv_by_std_in_grpo False (scripts; ppo_trainer.yaml True: "
                                             "(R − p50) / (p50 of the group stds + 1e-6))"),
                                            ("ramp_steps", "200", "max_replay_loss_steps 200 (ppo_trainer.yaml:98; "
                                             "the scripts' max_replay_loss_ascending_steps 100 / 200 is never "
                                             "passed)"),
                                            ("coef", "1 (c(t) → 1)", "replay_loss_coef 1 (scripts)"),
                                            ("ratio", "0.25 of B", "a power-of-2 subset of the buffer"),
                                            ("replay loss", "the step's loss term and aggregation",
                                             "loss_mode clip_cov with clip_cov_ratio_replay 0.02, "
                                             "clip_cov_lb_replay 2, clip_cov_ub_replay 60 (scripts), "
                                             "loss_agg_mode seq-mean-token-sum-norm, its own optimizer step"),
                                            ("replayed log π_old", "'behavior': the sampler's stored log-probs",
                                             "the stored batch's old_log_probs (recomputed by the trainer at the "
                                             "storing step)"),
                                            ("what R holds", "data.rewards after the shaping stages (the tool-call "
                                             "bonus only if tool_call_reward is composed; no invalid-action "
                                             "penalty)",
                                             "the episode score + the tool-call bonus (use_toolcall_reward cosine, "
                                             "T 200) − 0.1 per invalid step row (use_invalid_action_penalty True, "
                                             "coef 0.1): every verl-agent spear script"),
                                            ("rows behind the baseline and the buffer", "the step's valid rows",
                                             "those left by the std group filter (rollout_filter_ratio 0.75: the "
                                             "lowest-std quarter of the groups dropped) and its random cut of the "
                                             "kept rows to the largest power of 2, adjust_batch's duplicates "
                                             "included: the p50 of group means is over those groups' (partly "
                                             "subsampled) trajectories")),
                                  placement="theirs: after the actor update, update_batch stores the step's rows "
                                            "with mean A > 0; at the start of a later step's update, when the buffer "
                                            "passes 1.5 × size, a separate self-imitation PPO loss (clip_cov) runs "
                                            "inside update_actor after the main mini-batches on the recalibrated "
                                            "rows with A ≥ 0, scaled by the cosine ramp of the coefficient, then "
                                            "the buffer is emptied; "
                                            "ours: a replay stage after the advantages every step, recalibrated "
                                            "rows with A' > 0 fill the gradient-free rows of the same batch and "
                                            "loss, their advantage scaled by c(t)",
                                  deviations=(
                                      "buffered rows (advantages, rewards, log-probs) are stored as float32, also "
                                      "under x64 (a fixed-shape checkpointed buffer): a replayed row is "
                                      "float32-rounded",
                                      "replayed rows share the step's batch and loss (theirs: a separate SIL "
                                      "loss pass); the ramp scales the advantage, which scales a PPO-clip row's "
                                      "loss exactly",
                                      "replay every step into gradient-free rows, up to ratio·B; theirs only when "
                                      "the buffer passes 1.5 × 2048 rows, on a power-of-2 subset, then emptied",
                                      "A' > 0 kept (theirs ≥ 0: rows exactly at the median also replay)",
                                      "the repository's second SPEAR implementation, verl/verl/trainer/ppo/"
                                      "ray_trainer_hybrid.py (TrajectoryBufferBatch, the ReTool / DR.BoT math runs "
                                      "of verl/recipe/spear/run_qwen{2,3}-32b_spear.sh), is not the record's "
                                      "reference: it keeps A > 0 (:268, as ours), asserts adv_estimator GRPO, and "
                                      "its scripts pass max_replay_loss_steps 300 (max_replay_loss_ascending_steps, "
                                      "passed there), clip_cov_ratio_replay 0.02, clip_cov_lb_replay 1, "
                                      "clip_cov_ub_replay 40, kl_cov_ratio_replay 0.02, tolerate_steps 5, "
                                      "weight_decay_trajectory_replay −1, trajectory_buffer_size / "
                                      "baseline_buffer_size 2048 / 10240 (qwen3) and 32 / 32 (qwen2); ours "
                                      "follows verl-agent's (ramp_steps 200)",
                                      "defaults sized for small runs: capacity 256, baseline 1024 means, max_age "
                                      "10 (theirs 2048, 10240, 5)",
                                      "recalibrate='decay' multiplies by decay^age (theirs: by the factor once)",
                                      "replayed rows take the step's loss term (and its clip range); theirs a "
                                      "clip_cov loss with the replay settings (0.02, 2, 60) and a separate "
                                      "optimizer step after the main update",
                                      "the replayed ratio is against the sampler's stored log-probs; theirs "
                                      "against the trainer's recomputed old_log_probs of the storing step",
                                      "their R (stored rows and baseline alike) carries the invalid-action "
                                      "penalty (0.1 per invalid step row) and the tool-call bonus of the same "
                                      "scripts; ours reads data.rewards (compose tool_call_reward for the bonus; "
                                      "the penalty is not built), so a row with invalid steps recalibrates "
                                      "higher here; their group means come from the groups their std filter "
                                      "kept (75%) after a random power-of-2 row cut, ours from every valid row "
                                      "of the step",
                                      "the baseline's steps: theirs replays (get_buffer, ray_trainer_hybrid.py:"
                                      "1029-1035) before update_batch appends the step's group means (:1062-1069), "
                                      "so a replay at step t recalibrates against the p50 of the means of steps "
                                      "before t; ours appends the step's group means first "
                                      "(spear_baseline_update), so its median includes step t's own groups; "
                                      "their window drops whole steps while more than baseline_buffer_size means "
                                      "are held, before the append (:483-488: up to that many plus one step's "
                                      "groups), ours keeps exactly the latest baseline_size means",
                                      "the ramp's step: theirs global_steps, 1 on the first step (:858; "
                                      "dp_actor.py:592-599: ½(1 − cos(π·t/200)) while t ≤ 200); ours data.step, 0 on "
                                      "the first step, so at the k-th step our c is theirs of step k − 1 (0 on the "
                                      "first step, 1 from the 201st, theirs from the 200th)",
                                      "the age limit: theirs keeps rows within tolerate_steps of the newest "
                                      "stored batch's step (remove_old, :181-186, after the update), ours within "
                                      "max_age of the current step, so after steps that store nothing theirs "
                                      "keeps rows ours has aged out"))),
  )


TECHNIQUES = _technique_rows()
