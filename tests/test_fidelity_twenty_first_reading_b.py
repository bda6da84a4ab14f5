"""Issue #51 item 4, twenty-first draw (seed 20261226), part b: an independent re-audit of five rows.

Rows drawn (five of the ten of ``random.Random(20261226).sample(rows, 10)``): rorecomp_compensation, mis,
role_ema_baseline, adaptive_kl, positive_replay.

Held (3), no record changed, no implementation bug found:

- ``mis``: the TRL 1.9.0 PyPI wheel trl/trainer/grpo_trainer.py:2561-2621 (old log-probs recomputed with use_vllm
  and the correction; the ratio exp(Σ m (old − sampling)) per token or per sequence, ``*_mask``: set to 0 below
  clip_min (None: −inf) or above clip_max, both bounds kept), :3117-3118 (per-token loss × the ratio, with
  loss_type ≠ 'vespo'; the default loss_type is 'dapo', grpo_config.py:791-792), grpo_config.py:915-951
  (correction True, mode 'sequence_mask', clip_max 3.0, clip_min None). The weight × keep of
  mis(0.0, 3.0, level='sequence') and mis(0.5, 2.0, level='token') is checked below against a float64 NumPy
  transcription. (TRL's mask is completion_mask × tool_mask; ours the loss_mask: the same where tool tokens are
  loss-masked.)
- ``role_ema_baseline``: spiral-rl/spiral@a02d0ed8 train_spiral.py:65-110 (filter_zero_adv True,
  use_role_baseline True, role_baseline_ema_gamma 0.95, reward_scaling 1.0, gamma 1.0,
  use_intermediate_rewards True), :158-162 (two EMAs per actor), :165-200 (whole games until ≥ 16 turns, then a
  random 16), :300-340 (invalid action −1.5 / 0.5, truncated game 0 / 0: the task's rewards), :465-540
  prepare_trajectories, :549-556 (the shaped reward on each turn's last token), spiral/utils.py:18-32 (EMA from
  0.0), run.sh (--gamma 1, --rollout_batch_size_per_device 16, --num_envs 1). One game per key per batch is
  checked below against a float64 transcription of prepare_trajectories' baseline lines.
- ``positive_replay``: xuyifan-0731/MobileRL-iclr@da92ec0c training/verl/workers/agentic/replay_buffer.py (whole:
  masked_row_mean, push, sample_for_training, _evict_until_fits; class defaults max_size 512, top_ratio 0.25,
  replay_ratio 0.25, balance_alpha 0.5, max_age_steps 4), training/configs/glm_mobilerl.yaml (max_size 256,
  top_ratio 0.25, replay_ratio 1.0, balance_alpha 0.5, task_adv_normalize True, mute_uid_all_zero_reward True,
  full_async True, multi_turn True), training/verl/trainer/ppo/ray_trainer.py RayPPOTrainer.fit (the cut to a
  multiple of the world size, old log-probs before the advantage, task_adv_normalize per data_source, mute, push,
  sample_for_training(len(batch)), replay rows cut and concatenated first). With one row per uuid, push's
  insertion / age purge / balanced eviction and the replay choice are checked below against a transcription.

Not held (2), each record fixed (implementation unchanged):

- ``adaptive_kl`` (OMITTED): verl's current_kl takes each row's token mean with masked_mean, the verl 0.9.1 PyPI
  wheel verl/utils/torch_functional.py:294-308 (Σ kl·mask / (Σ mask + 1e-8)), called by apply_kl_penalty
  (trainer/ppo/ray_trainer.py:108); ours (kl_reduction='sequence_mean', the record's 'verl's form') divides by
  the token count: each row's term is n/(n + 1e-8) times ours there. The record listed no such difference; a
  deviation now says so. Checked below with the numbers.
- ``rorecomp_compensation`` (OMITTED): our logp_old='recompute' (a replayed compensation row's proximal
  log-probs are the current policy's forward, so its PPO ratio starts at 1) is an argument of the row that
  changes the loss of every replayed row, but the record's defaults did not list it (the paper's value is not
  stated: the method section is still not stored; the ICLR reviews, read_file id 62147932634, quote no log-prob
  rule). The defaults now carry it.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np

from rljax import objectives as O
from rljax.control._controllers import adaptive_kl, observed_kl
from rljax.advantages import role_ema_baseline
from rljax.replay import _buffer as B
from rljax.types import PolicyOutputs, TrainBatch
from _fidelity import defaults as _defaults, fid as _fid, record as _record


# ----------------------------------------------------------------------------------------------- adaptive_kl


def _verl_current_kl(kld, mask):
  """the verl 0.9.1 PyPI wheel ray_trainer.py:100-112 apply_kl_penalty with kl_penalty 'kl' (k1), float64:
  kld = (old − ref)·mask; current_kl = mean over rows of masked_mean(kld, mask, -1), masked_mean =
  Σ v·m / (Σ m + 1e-8) (torch_functional.py:294-308)."""
  kld = kld * mask
  row = (kld * mask).sum(-1) / (mask.sum(-1) + 1e-8)
  return row.mean()


def _verl_update(beta, current_kl, n_steps, target=0.1, horizon=10000):
  """core_algos.py:164-174 AdaptiveKLController.update."""
  err = np.clip(current_kl / target - 1, -0.2, 0.2)
  return beta * (1 + err * n_steps / horizon)


def test_adaptive_kl_sequence_mean_differs_from_verl_by_its_1e8():
  rng = np.random.default_rng(20261226)
  b, t = 6, 5
  mask = np.ones((b, t))
  mask[1, 3:] = 0.0
  mask[4, 1:] = 0.0  # a one-token row: the largest relative gap
  old = rng.normal(size=(b, t)) * 0.3
  ref = old + rng.normal(size=(b, t)) * 0.2
  k1 = old - ref
  want_verl = _verl_current_kl(k1, mask)
  want_ours = ((k1 * mask).sum(-1) / mask.sum(-1)).mean()
  with jax.enable_x64(True):
    got, n = observed_kl(jnp.asarray(k1), jnp.asarray(mask > 0), "sequence_mean")
  got = float(got)
  assert float(n) == b
  np.testing.assert_allclose(got, want_ours, rtol=1e-13, atol=0)
  # theirs: each row's term times n/(n + 1e-8): a gap of order 1e-9 relative, which the record now states
  per_row = (k1 * mask).sum(-1) / mask.sum(-1)
  gap = (per_row * (1.0 - mask.sum(-1) / (mask.sum(-1) + 1e-8))).mean()
  np.testing.assert_allclose(got - want_verl, gap, rtol=1e-4)
  assert got != want_verl
  # the β update on top of it (float32 state): verl's form target=0.1
  beta = _verl_update(1e-3, want_verl, b)
  ctl = adaptive_kl(init_beta=1e-3, target=0.1, horizon=10000)
  np.testing.assert_allclose(float(ctl.update(ctl.init(), kl=got, n_steps=b).beta), beta, rtol=1e-6)


def test_adaptive_kl_record_lists_the_masked_mean_epsilon():
  devs = " ".join(_fid("adaptive_kl").deviations)
  assert "torch_functional.py:294-308" in devs and "(Σ mask + 1e-8)" in devs
  assert "n/(n + 1e-8)" in devs


# ----------------------------------------------------------------------------------------------- mis


def _trl_mask_ratio(old, sampling, mask, mode, clip_min, clip_max):
  """TRL 1.9.0 grpo_trainer.py:2578-2621, float64: diff = (old − sampling)·mask; sequence modes sum it per row;
  ratio = exp(diff); *_mask: ratio set to 0 where ratio < clip_min (None: −inf) or > clip_max (None: inf)."""
  diff = (old - sampling) * mask
  if mode.startswith("sequence"):
    diff = diff.sum(-1, keepdims=True)
  ratio = np.exp(diff)
  lo = -math.inf if clip_min is None else clip_min
  hi = math.inf if clip_max is None else clip_max
  ratio = np.where((ratio < lo) | (ratio > hi), 0.0, ratio)
  return np.broadcast_to(ratio, old.shape)


def _our_mis(corr, old, beh, mask):
  with jax.enable_x64(True):
    batch = TrainBatch(tokens=jnp.zeros(mask.shape, jnp.int32), loss_mask=jnp.asarray(mask),
                       advantages=jnp.ones(mask.shape), group_id=jnp.arange(mask.shape[0], dtype=jnp.int32),
                       logp_old=jnp.asarray(old), logp_behavior=jnp.asarray(beh))
    w, keep, _ = corr(PolicyOutputs(logp=jnp.asarray(old)), batch)
    return np.asarray(w, np.float64) * np.asarray(keep, np.float64)


def test_mis_equals_trls_mask_modes():
  rng = np.random.default_rng(1226)
  b, t = 8, 4
  mask = (rng.random((b, t)) < 0.85).astype(np.float64)
  mask[:, 0] = 1.0
  old = rng.normal(size=(b, t)) * 0.5 - 1.0
  beh = old + rng.normal(size=(b, t)) * 1.0
  want = _trl_mask_ratio(old, beh, mask, "sequence_mask", None, 3.0)
  got = _our_mis(O.mis(0.0, 3.0, level="sequence"), old, beh, mask)
  np.testing.assert_allclose(np.where(mask > 0, got, 0.0), np.where(mask > 0, want, 0.0), rtol=1e-12)
  assert (want[mask > 0] == 0).any() and (want[mask > 0] > 0).any()
  want = _trl_mask_ratio(old, beh, mask, "token_mask", 0.5, 2.0)
  got = _our_mis(O.mis(0.5, 2.0, level="token"), old, beh, mask)
  np.testing.assert_allclose(np.where(mask > 0, got, 0.0), np.where(mask > 0, want, 0.0), rtol=1e-12)


def test_mis_record_defaults():
  d = _defaults("mis")
  assert "clip_max = 3.0" in d["upper"][1] and "None" in d["lower"][1] and "'sequence_mask'" in d["level"][1]


# ----------------------------------------------------------------------------------------------- role_ema_baseline


def _spiral_games(rewards_by_game, decay=0.95, reward_scaling=1.0):
  """spiral-rl/spiral@a02d0ed8 train_spiral.py:486-492 with utils.py EMA (value 0.0), one role: per game the
  baseline is read, the EMA updated with the scaled reward, reward −= baseline."""
  value, out = 0.0, []
  for r in rewards_by_game:
    r = r * reward_scaling
    baseline = value
    value = decay * value + (1 - decay) * r
    out.append(r - baseline)
  return np.asarray(out), value


def test_role_ema_baseline_equals_spiral_with_one_game_per_key_per_batch():
  rng = np.random.default_rng(26)
  r0 = rng.choice([-1.0, 1.0, 0.0, -1.5, 0.5], size=7)
  r1 = -r0
  want0, v0 = _spiral_games(r0)
  want1, v1 = _spiral_games(r1)
  est = role_ema_baseline(num_keys=2)
  state = est.init()
  with jax.enable_x64(True):
    for i in range(r0.size):
      adv, _, state = est.update(state, jnp.asarray([r0[i], r1[i]]), jnp.asarray([0, 1]))
      np.testing.assert_allclose(np.asarray(adv, np.float64), [want0[i], want1[i]], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(np.asarray(state.baseline, np.float64), [v0, v1], rtol=1e-5, atol=1e-6)


def test_role_ema_baseline_record_defaults():
  d = _defaults("role_ema_baseline")
  assert "0.95" in d["decay"][1] and "0.0" in d["init"][1]
  assert "filter_zero_adv = True" in d["zero-advantage turns"][1]


# ----------------------------------------------------------------------------------------------- positive_replay


class _MobileRLBuffer:
  """xuyifan-0731/MobileRL-iclr@da92ec0c replay_buffer.py ReplayBuffer with one row per uuid (float64):
  push (age purge, top ceil(top_ratio·n) by mean advantage, balanced eviction) and sample_for_training's choice
  (the ceil(replay_ratio·B) highest, before its shuffle)."""

  def __init__(self, max_size, top_ratio=0.25, replay_ratio=1.0, balance_alpha=0.5, max_age_steps=4):
    self.max_size, self.top, self.rep, self.alpha, self.age = max_size, top_ratio, replay_ratio, balance_alpha, \
        max_age_steps
    self.adv, self.order, self.step = {}, {}, 0

  def push(self, uuids, advs):
    self.step += 1
    thr = self.step - self.age
    for u in [u for u, s in self.order.items() if s <= thr]:
      self.adv.pop(u), self.order.pop(u)
    k = max(1, math.ceil(self.top * len(uuids)))
    top = [u for u, _ in sorted(zip(uuids, advs), key=lambda kv: kv[1], reverse=True)[:k]]
    for u in top:
      self.adv.pop(u, None), self.order.pop(u, None)
      self.adv[u], self.order[u] = dict(zip(uuids, advs))[u], self.step
    while len(self.adv) > self.max_size:
      a, o = list(self.adv.values()), list(self.order.values())
      da, do = max(a) - min(a) + 1e-8, max(o) - min(o) + 1e-8
      sc = {u: self.alpha * (self.adv[u] - min(a)) / da + (1 - self.alpha) * (self.order[u] - min(o)) / do
            for u in self.adv}
      m = min(sc.values())
      cand = [u for u, s in sc.items() if abs(s - m) < 1e-12]
      u = min(cand, key=lambda x: self.order[x])
      self.adv.pop(u), self.order.pop(u)

  def sample(self, size_batch):
    k = max(1, math.ceil(self.rep * size_batch))
    return {u for u, _ in sorted(self.adv.items(), key=lambda kv: kv[1], reverse=True)[:k]}


class _Data:
  def __init__(self, n, t, adv, step, pidx):
    self.tokens = np.zeros((n, t), np.int32)
    self.prompt_mask = np.zeros((n, t), bool)
    self.completion_mask = np.ones((n, t), np.float32)
    self.logp_behavior = np.zeros((n, t), np.float32)
    self.entropy_behavior = None
    self.prompt_index = pidx
    self.rewards = np.zeros(n, np.float32)
    self.correct = np.zeros(n, np.float32)
    self.role_id = None
    self.adv = adv


def test_positive_replay_mobilerl_push_and_sample_equal_their_buffer():
  rng = np.random.default_rng(20261226)
  cap, n, t = 6, 8, 3
  theirs = _MobileRLBuffer(cap)
  buf = B.empty_buffer(cap, t)
  uid = 0
  for step in range(1, 9):
    adv = np.round(rng.normal(size=n), 3)
    ids = list(range(uid, uid + n))
    uid += n
    theirs.push(ids, list(adv))
    rows, drop = B.adapr_push_plan(buf, np.arange(n), adv, step=step, top_ratio=0.25, max_age=4,
                                   balance_alpha=0.5)
    data = _Data(n, t, adv, step, np.asarray(ids, np.int64))
    buf = B.store(B.remove(buf, drop), data, rows, step=step, advantages=np.repeat(adv[rows][:, None], t, 1))
    held = set(np.asarray(buf.prompt_index)[np.asarray(buf.prompt_index) >= 0].tolist())
    assert held == set(theirs.adv), step
    _, slots = B.adapr_sample_plan(buf, np.arange(n), math.ceil(1.0 * n))
    assert set(np.asarray(buf.prompt_index)[slots].tolist()) == theirs.sample(n), step


def test_positive_replay_record_defaults():
  d = _defaults("positive_replay")
  assert "max_size 256" in d["capacity"][1] and "1.0 (yaml" in d["replay_ratio"][1]
  assert "max_age_steps 4" in d["max_age"][1]


# ----------------------------------------------------------------------------------------------- rorecomp_compensation


def test_rorecomp_compensation_record_lists_logp_old():
  d = _defaults("rorecomp_compensation")
  assert "'recompute'" in d["logp_old"][0] and "ratio starts at 1" in d["logp_old"][0]
  assert "not stated" in d["logp_old"][1]


def test_rorecomp_compensation_takes_the_floor_of_c_freed_oldest():
  cap, t = 8, 2
  buf = B.empty_buffer(cap, t)
  for step, n in ((1, 3), (2, 4)):
    data = _Data(n, t, np.zeros(n), step, np.arange(10 * step, 10 * step + n, dtype=np.int64))
    buf = B.store(buf, data, np.arange(n), step=step)
  # 5 freed rows, c = 0.5: floor(2.5) = 2 of the 7 stored, the two oldest (step 1's first two)
  slots = B.compensation_plan(5, buf, compensation=0.5)
  assert np.asarray(buf.prompt_index)[slots].tolist() == [10, 11]
  assert B.compensation_plan(6, buf, compensation=0.5).size == 3
  assert "floor(c · #freed)" in _record("rorecomp_compensation")
