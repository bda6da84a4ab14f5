"""Issue #51, per-row review o: an independent second reading of six records (not a random draw).

Rows: dara, sa_mrpo, zero_variance, greso, pilot_commit, shuffle_pairs.

Held (1): zero_variance; its "= theirs" claims are checked below against float64 NumPy transcriptions of verl
v0.7.0 recipe/dapo/dapo_ray_trainer.py:244-258 and the verl 0.9.1 PyPI wheel's trainer/ppo/v1/replay_buffer.py:
308-310. Not held (5), each error fixed in the record (no implementation changed, no implementation bug found); the
records' surviving "= theirs" claims are checked below against transcriptions of the cited lines.

- ``dara`` OMITTED on which data ρ_k is computed. zhaihaotian/DARA@04591020 math/runtime/overlay/verl/trainer/ppo/
  ray_trainer.py fit, PORT-4 (the filter_groups branch before compute_advantage; the record had read only the
  file's opening): each round generates data.gen_batch_size = 3·512//2 = 768 prompts (math/scripts/train.py), kept
  groups are concatenated and select_uid_groups keeps the first train_batch_size = 512 uids in first-seen order
  (the surplus kept groups are discarded) before compute_advantage; fewer than 512 after max_num_gen_batches (the
  profile's filter_cap, 2) rounds raises ValueError. The record said only "ρ_k is over the kept groups" and gave
  neither the generation batch, the truncation nor the raise. The rdgdpo arithmetic itself equals ours (tested).
- ``sa_mrpo`` said something FALSE about our own deviation: "s_k is clipped to [0, 1]". sa_mrpo clips each row's
  normalised reward (r − min)/(max − min) to [0, 1] before the batch mean: with rewards −1 and 1 in bounds [0, 1]
  ours gives s_k = 0.5, the paper's s^(k) = (0 − 0)/1 = 0 (and clip(s^(k)) = 0). Eq. 1 itself equals ours (tested).
- ``greso`` OMITTED that the README's commands do not start as released: README.md:64-86's data step, bash
  train-scripts/generate_dataset.sh, runs lighteval_math.py and openr1_math_default.py but never
  examples/data_preprocess/dapo_math.py, so ./data/dapo_math/train.parquet, the first train file of every train
  script, is missing and verl/utils/dataset/rl_dataset.py:128 pd.read_parquet fails. The admission law equals
  theirs on binary rewards and groups of 8 (tested). [Fourteenth draw (#51 item 4, seed 20261219): wrong, the
  file is committed in the repository (9f7f429, 2025-06-04), so the commands start; the record is corrected and
  the assertion below follows it; see tests/test_fidelity_fourteenth_reading_a.py.]
- ``pilot_commit`` said two things FALSE: (1) "at most 4 steps old" / "up to buffer_max_off_steps 4 steps earlier":
  databricks/pilot-commit@6def20ea recipe/pc/replay_buffer.py:70-87 evicts only when current_step − step > 4, and
  the flush (pc_ray_trainer.py:700) runs after the step's draw (:495), so an entry added at step s is still drawn
  at step s + 5 (tested); each epoch's end also empties the buffer and drops a partial batch (:843-851, omitted);
  (2) "(on in their scripts)" of the overlong penalty: train_scripts/pc_qwen3-4b_p16c48.sh:19 sets
  enable_overlong_buffer=False (on only in p32c96).
- ``shuffle_pairs`` said something FALSE and OMITTED a difference: the cited assert is custom_algos.py:108, not
  :104 (xiaomi-research/shuffle-r1@31d3ff03); and their stable descending sort (:102) reads the low end from the
  tail, so among tied lowest advantages they pair the highest row index and ours the lowest: advantages
  (a, −a, −a, a) keep rows (0, 2) there and (0, 1) here (tested). Without ties the pairing equals theirs (tested).
"""
import jax
import jax.numpy as jnp
import numpy as np

from rljax import advantages as A
from rljax.filters import pilot_commit, shuffle_pairs, zero_variance
from rljax.filters._greso import greso
from _fidelity import defaults, fid, record


# ------------------------------------------------------------------------------------------------ dara (not held)


def _dara_standardize(scores, groups, eps=1e-6):
  """advantages.py standardize: (v − mean) / (std(correction=1) + ε) per uid group, per channel (float64)."""
  out = np.zeros_like(scores)
  for rows in groups:
    v = scores[rows]
    out[rows] = (v - v.mean(0)) / (v.std(0, ddof=1) + eps)
  return out


def _dara_rdgdpo(scores, uids, *, eps=1e-6, tau=1e-8, w_max=5.0, calibration="positive"):
  """advantages.py compute_advantages('rdgdpo'): support_statistics' density over groups, sqrt(max ρ / ρ).clamp(w_max)
  on live channels (1 elsewhere), positive / symmetric calibration, normalize_responses (ddof 1, + ε)."""
  groups = {}
  for i, u in enumerate(uids):
    groups.setdefault(u, []).append(i)
  groups = list(groups.values())
  ch = _dara_standardize(scores, groups, eps)
  active = np.stack([np.abs(ch[rows]).sum(0) > tau for rows in groups])
  rho = active.mean(0)
  w = np.ones_like(rho)
  live = rho > 0
  if live.any():
    w[live] = np.minimum(np.sqrt(rho[live].max() / rho[live]), w_max)
  cal = w * np.maximum(ch, 0) + np.minimum(ch, 0) if calibration == "positive" else w * ch
  s = cal.sum(-1)
  return (s - s.mean()) / (s.std(ddof=1) + eps), rho, w


def _dara_batch(rng, n_groups=24, g=16):
  corr = (rng.random((n_groups, g)) < rng.random((n_groups, 1))).astype(np.float64)
  length = (rng.random((n_groups, g)) < 0.97).astype(np.float64)   # the sparse channel: mostly all-1 groups
  corr[:3] = 1.0
  length[3:5] = 0.0
  r = np.stack([corr.ravel(), length.ravel()], -1)
  gid = np.repeat(np.arange(n_groups), g)
  return r, gid


def test_dara_equals_rdgdpo_transcription_at_the_defaults_both_calibrations():
  rng = np.random.default_rng(20261218)
  r, gid = _dara_batch(rng)
  for cal in ("positive", "symmetric"):
    ref, rho, w = _dara_rdgdpo(r, list(gid), calibration=cal)
    with jax.enable_x64(True):
      adv, info = A.dara(jnp.asarray(r), jnp.asarray(gid), calibration=cal)
    np.testing.assert_allclose(np.asarray(info["density"]), rho, rtol=0, atol=1e-15)
    np.testing.assert_allclose(np.asarray(info["weights"]), w, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(adv), ref, rtol=1e-12, atol=1e-12)
    assert w[1] > 1.0  # the sparse channel is up-weighted: the comparison is not vacuous


def test_dara_record_gives_the_update_batch_their_density_is_computed_on():
  """PORT-4: ρ_k is over the first 512 kept groups (uid first-seen order) of the step's 768-prompt rounds; the
  surplus kept groups are discarded. On a 4-group toy with train_batch_size 2 the truncation changes ρ."""
  r = np.array([[1, 1], [0, 1], [1, 1], [0, 1],      # group 0: correctness varies
                [1, 1], [1, 0], [1, 1], [1, 0],      # group 1: length varies
                [1, 1], [1, 0], [0, 1], [1, 1],      # group 2: both vary
                [1, 0], [1, 1], [1, 0], [1, 1]], np.float64)
  uids = list(np.repeat(np.arange(4), 4))
  kept_first_two = [i for i, u in enumerate(uids) if u in (0, 1)]
  _, rho_all, _ = _dara_rdgdpo(r, uids)
  _, rho_cut, _ = _dara_rdgdpo(r[kept_first_two], [uids[i] for i in kept_first_two])
  assert not np.allclose(rho_all, rho_cut)   # [0.5, 0.75] over all kept groups, [0.5, 0.5] over the batch
  np.testing.assert_allclose(rho_cut, [0.5, 0.5])
  f = fid("dara")
  assert "first train_batch_size = 512 in uid first-seen order" in f.placement
  assert "surplus kept groups are discarded before the advantage" in f.placement
  theirs = defaults("dara")["zero-variance filter (not this stage's)"][1]
  assert "3·512//2 = 768" in theirs and "raises ValueError" in theirs and "filter_cap" in theirs
  assert "PORT-4" in f.read and "select_uid_groups" in f.read
  assert 3 * 512 // 2 == 768


# --------------------------------------------------------------------------------------------- sa_mrpo (not held)


def _sa_mrpo_paper(rewards, gid, r_min, r_max, gamma, w):
  """arXiv 2608.16072 Sec. 4.1: population group std, s^(k) = (batch mean − min)/(max − min), w̃ = w(1 − s)^γ,
  Eq. 1 batch standardisation (population std, no ε)."""
  a = np.zeros_like(rewards)
  for g in np.unique(gid):
    m = gid == g
    a[m] = (rewards[m] - rewards[m].mean(0)) / rewards[m].std(0)
  s = (rewards.mean(0) - r_min) / (r_max - r_min)
  agg = a @ (w * (1.0 - s) ** gamma)
  return (agg - agg.mean()) / agg.std(), s


def test_sa_mrpo_equation_one_and_the_row_wise_clip_record():
  rng = np.random.default_rng(20261219)
  b, g = 12, 8
  gid = np.repeat(np.arange(b), g)
  r = np.stack([(rng.random(b * g) < 0.4).astype(float), rng.uniform(0.5, 1.0, b * g)], -1)
  ref, s_ref = _sa_mrpo_paper(r, gid, 0.0, 1.0, 0.25, np.ones(2))
  with jax.enable_x64(True):
    ours, info = A.sa_mrpo(jnp.asarray(r), jnp.asarray(gid), eps=0.0)
  np.testing.assert_allclose(np.asarray(ours), ref, rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(np.asarray(info["saturation"]), s_ref, rtol=1e-14)
  # rewards outside the bounds: ours clips each row before the mean, the paper's ratio (and its clip) gives 0
  r2 = np.stack([np.tile([-1.0, 1.0], 8), np.tile([0.0, 1.0, 1.0, 0.0], 4)], -1)
  gid2 = np.repeat(np.arange(4), 4)
  _, s_paper = _sa_mrpo_paper(r2, gid2, 0.0, 1.0, 0.25, np.ones(2))
  with jax.enable_x64(True):
    _, info2 = A.sa_mrpo(jnp.asarray(r2), jnp.asarray(gid2))
  assert s_paper[0] == 0.0 and np.clip(s_paper[0], 0, 1) == 0.0
  assert float(np.asarray(info2["saturation"])[0]) == 0.5
  f = fid("sa_mrpo")
  dev = " ".join(f.deviations)
  assert "s_k is clipped to [0, 1]" not in dev and "clips s_k" not in f.differences
  assert "clipped to [0, 1] before the batch mean, not s_k after it" in dev
  assert "s_k = 0.5 here, the paper's s^(k) = 0" in dev


# ----------------------------------------------------------------------------------------- zero_variance (held)


def _verl070_kept(metric, uids):
  """verl v0.7.0 recipe/dapo/dapo_ray_trainer.py:244-258: keep a uid when np.std(vals) > 0 or len(vals) == 1."""
  vals = {}
  for u, m in zip(uids, metric):
    vals.setdefault(u, []).append(m)
  return {u for u, v in vals.items() if np.std(v) > 0 or len(v) == 1}


def _verl091_evicted(metric, uids):
  """The verl 0.9.1 PyPI wheel trainer/ppo/v1/replay_buffer.py:308-310: evict when len > 1 and np.std == 0.0."""
  vals = {}
  for u, m in zip(uids, metric):
    vals.setdefault(u, []).append(float(m))
  return {u for u, v in vals.items() if len(v) > 1 and float(np.std(v)) == 0.0}


def test_zero_variance_equals_verl_on_correctness_metrics_and_differs_only_on_rounding():
  rng = np.random.default_rng(20261220)
  sizes = [16] * 20 + [1, 1, 3]
  gid = np.repeat(np.arange(len(sizes)), sizes)
  acc = (rng.random(gid.size) < rng.random(len(sizes))[gid]).astype(np.float64)
  acc[gid == 0] = 1.0
  acc[gid == 1] = 0.0
  acc[gid == len(sizes) - 1] = [0.0, 1.0, 0.0]
  keep, _ = zero_variance(jnp.asarray(acc), jnp.asarray(gid), num_groups=len(sizes))
  ours = {int(g) for g in np.unique(gid[np.asarray(keep)])}
  assert ours == _verl070_kept(acc, gid)
  assert ours == set(range(len(sizes))) - _verl091_evicted(acc, gid)
  assert 0 not in ours and 1 not in ours and len(sizes) - 1 in ours
  # the recorded rounding deviation: three equal 0.1 values have np.std 1.4e-17 > 0 in verl, spread 0 here
  gid3 = np.zeros(3, np.int64)
  keep3, _ = zero_variance(jnp.asarray(np.full(3, 0.1)), jnp.asarray(gid3), num_groups=1)
  assert _verl070_kept([0.1] * 3, [0] * 3) == {0} and not np.asarray(keep3).any()
  assert "np.std([0.1] * 3) = 1.4e-17" in " ".join(fid("zero_variance").deviations)


# ------------------------------------------------------------------------------------------------ greso (not held)


def _greso_skip_prob(trace, p_easy, p_hard):
  """presampling_selector.py:102-147 through filter_examples_all_probabilistic (:238-247): the easy draw first
  (count of trailing means ≥ 0.98), then the hard draw (last mean ≤ 0.11; count of trailing means ≤ 0.11)."""
  if not trace:
    return 0.0
  c_easy = 0
  for m in reversed(trace):
    if m < 0.98:
      break
    c_easy += 1
  skip_easy = 1 - max(p_easy ** c_easy, 0.01)
  skip_hard = 0.0
  if trace[-1] <= 0.11:
    c_hard = 0
    for m in reversed(trace):
      if m > 0.11:
        break
      c_hard += 1
    skip_hard = 1 - max(p_hard ** c_hard, 0.01)
  return skip_easy + (1 - skip_easy) * skip_hard


def test_greso_admission_equals_theirs_on_binary_groups_of_eight_and_the_record_says_the_readme_stops():
  g = greso(adapt_step=0.0)  # fixed p: the adaptation is a recorded deviation (epoch > 0 there)
  histories = {0: [1, 1, 1], 1: [0, 0], 2: [1, 0.5, 0], 3: [0.5], 4: [1, 1, 0, 0, 0, 0, 0, 0, 0], 5: [0, 1]}
  n_prompts = len(histories)
  state = g.init(n_prompts)
  trace = {j: [] for j in histories}
  for step in range(max(len(h) for h in histories.values())):
    ids = [j for j, h in histories.items() if step < len(h)]
    rewards, rows = [], []
    for k, j in enumerate(ids):
      frac = histories[j][step]
      group = np.array([1.0] * int(round(8 * frac)) + [0.0] * (8 - int(round(8 * frac))))
      rewards.extend(group)
      rows.extend([k] * 8)
      trace[j].append(group.mean())
    state, _ = g.update(state, jnp.asarray(ids), jnp.asarray(np.array(rewards, np.float32)), jnp.asarray(rows))
  _, stats = g.select(state, jax.random.PRNGKey(0), jnp.arange(n_prompts))
  ours = 1.0 - np.asarray(stats["admit_prob"], np.float64)
  theirs = np.array([_greso_skip_prob(trace[j], 0.5, 0.5) for j in range(n_prompts)])
  np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)   # float32 state: the recorded deviation
  assert theirs[4] > 0.99 - 1e-12 and theirs[0] == 0.875 and theirs[2] == 0.5
  f = fid("greso")
  dev = " ".join(f.deviations)
  # fourteenth draw (#51 item 4, seed 20261219): the file is committed (9f7f429), the commands start
  assert "the README's commands start as released" in dev and "dapo_math.py" in dev
  assert "generate_dataset.sh" in f.read and "rl_dataset.py:118-128" in f.read


# ----------------------------------------------------------------------------------------- pilot_commit (not held)


def test_pilot_commit_buffer_entries_are_drawn_up_to_five_steps_after_exploration():
  """replay_buffer.py:70-87 flush (evict when current_step − step > max_off_steps) runs once per step after the
  draw (pc_ray_trainer.py:495, 700): the last step at which an entry added at step s can be drawn."""
  def last_drawable(added, max_off=4):
    alive, t = True, added
    last = None
    while alive:
      last = t                         # drawn in step t (before the flush)
      if t - added > max_off:          # the flush at the end of step t
        alive = False
      t += 1
    return last
  assert last_drawable(10) == 15 and last_drawable(0, 4) - 0 == 5
  f = fid("pilot_commit")
  dev = " ".join(f.deviations)
  assert "at most 4 steps old" not in f.placement and "buffer_max_off_steps 4 steps earlier" not in dev
  assert "up to 5" in f.placement and "up to 5 steps earlier" in dev
  assert "the buffer is emptied and a partial batch dropped" in f.placement
  assert "(on in their scripts)" not in dev and "off in p16c48, enable_overlong_buffer=False" in dev
  assert "replay_buffer.py:70-87" in f.read and "pc_qwen3-4b_p16c48.sh:19" in f.read


def test_pilot_commit_window_equals_filter_batch_on_acc():
  """pc_ray_trainer.py:287-328 filter_batch: lower ≤ mean acc ≤ 1 − upper (inclusive), 0.125 / 0.25 (scripts)."""
  accs = [0.0, 0.125, 0.25, 0.5, 0.75, 0.8125, 1.0]
  idx = np.repeat(np.arange(len(accs)), 16)
  acc = np.concatenate([np.r_[np.ones(int(a * 16)), np.zeros(16 - int(a * 16))] for a in accs])
  theirs = [g for g, a in enumerate(accs) if 0.125 <= a <= 1 - 0.25]
  n, _ = pilot_commit(acc, idx, num_groups=len(accs), budget=96 * len(accs), rule="uniform", window=(0.125, 0.75),
                      max_per_prompt=96)
  assert [g for g in range(len(accs)) if n[g] > 0] == theirs == [1, 2, 3, 4]
  assert all(n[g] == 96 for g in theirs)


# ---------------------------------------------------------------------------------------- shuffle_pairs (not held)


def _shuffle_r1_kept_pairs(scores, uids, purning_ratio=0.5, eps=1e-6):
  """custom_algos.py:71-146: GRPO advantage (unbiased std, + 1e-6) per uid, stable descending sort by adv, pair
  left with right from both ends, keep the first int(len(pairs)·(1 − ratio)) pairs."""
  groups = {}
  for i, u in enumerate(uids):
    groups.setdefault(u, []).append(i)
  adv = np.zeros(len(scores))
  kept = []
  for rows in groups.values():
    v = scores[rows]
    a = (v - v.mean()) / (v.std(ddof=1) + eps)
    adv[rows] = a
    order = sorted(range(len(rows)), key=lambda k: a[k], reverse=True)   # Python's stable sort
    assert len(rows) % 2 == 0
    pairs = []
    left, right = 0, len(rows) - 1
    while left < right:
      pairs.append((rows[order[left]], rows[order[right]]))
      left += 1
      right -= 1
    kept.extend(pairs[:int(len(pairs) * (1.0 - purning_ratio))])
  return kept, adv


def test_shuffle_pairs_equals_their_pairing_without_ties_and_differs_on_tied_minima():
  rng = np.random.default_rng(20261221)
  gid = np.repeat(np.arange(6), 16)
  scores = rng.normal(size=gid.size)                       # continuous rewards: no ties
  theirs, adv = _shuffle_r1_kept_pairs(scores, list(gid))
  _, st = shuffle_pairs(adv, gid, pairs_per_group=4)
  assert sorted(map(tuple, np.asarray(st["pairs"]).tolist())) == sorted(theirs)
  # tied minima: advantages (a, −a, −a, a), one pair kept (n = 4)
  tied, adv4 = _shuffle_r1_kept_pairs(np.array([1.0, 0.0, 0.0, 1.0]), [0, 0, 0, 0])
  _, st4 = shuffle_pairs(adv4, np.zeros(4, np.int64), pairs_per_group=1)
  assert tied == [(0, 2)] and np.asarray(st4["pairs"]).tolist() == [[0, 1]]
  f = fid("shuffle_pairs")
  dev = " ".join(f.deviations)
  assert "custom_algos.py:104" not in record("shuffle_pairs") and "custom_algos.py:108" in dev
  assert "keeps rows (0, 1) here and (0, 2) there" in dev
  assert "the low end, read from the tail, the highest" in defaults("shuffle_pairs")["ties"][1]


def test_sa_mrpo_record_lists_the_papers_group_size_and_batch():
  # eighteenth draw (#51, seed 20261223): the paper gives "a global batch size of 256" without a unit
  ours, theirs = defaults("sa_mrpo")["group size / batch"]
  assert ours == "the step's groups" and theirs.startswith("G = 8 rollouts per prompt (Sec. 5.1")
  assert "'a global batch size of 256'" in theirs and "256 prompts" not in theirs
