"""Issue #51 item 4, thirteenth draw (seed 20261218), part b: an independent re-audit of five in-full rows.

Rows drawn (five of the ten of ``random.Random(20261218).sample(rows, 10)`` over the 109 rows):
seq_mean_token_sum, gspo_token, exgrpo, seq_mean_token_mean, difficulty_weight.

Held (1): gspo_token. Its "= theirs" claims are checked below against a float64 NumPy transcription of
volcengine/verl@v0.7.0 core_algos.py:1000-1073 compute_policy_loss_gspo with agg_loss :772-827 (the verl 0.9.1 PyPI
wheel's :1546-1619 and :1140-1206), with per-token advantages, the 10 cap on log s, the ±20 token clamp of ours, and
verl 0.9.1's token-mean over micro-batches with the global batch_num_tokens. Also read, changing nothing:
run_qwen30b_gspo.sh's ACTOR_CONFIG (:89-101) has no backslash at :98, inside a double-quoted string, so the
newline only separates words and every override there reaches Hydra; verl 0.9.1's algorithm.rollout_correction
defaults (rollout_is null, bypass_mode false) leave the gspo loss unweighted, its old log-probs recomputed.

Not held (4), each error fixed in the record and checked here (no implementation changed, no implementation bug
found):

- ``seq_mean_token_sum`` and ``seq_mean_token_mean`` (OMITTED, the same fact): verl 0.9.1's default v1 trainer pads
  the step batch with synthetic rows of response_mask 0 up to a multiple of lcm(dp size, ppo_mini_batch_size ×
  rollout.n) (the verl 0.9.1 PyPI wheel trainer/ppo/v1/trainer_base.py:1589-1621 _get_required_batch_multiple /
  _balance_batch, trainer/ppo/padding_utils.py:72-141, 144-210) before the update, whose seq-mean branches divide
  every mini-batch by global_batch_size = ppo_mini_batch_size × n. The records said the engine path is "ours when
  no row is empty"; with a step batch that is not such a multiple, verl adds empty rows although ours has none, and
  a real row weighs 1/(ppo_mini_batch_size × n) there against 1/(its mini-batch's rows) here (100 rows, mini-batch
  64: ÷ 64 on both padded mini-batches; ours with two mini-batches ÷ 50). The grpo row's record already had these
  padding rows (twelfth draw); the aggregation rows had not.
- ``exgrpo`` (OMITTED): the record's start row said theirs mixes in experience "once a batch's solved ratio passes"
  0.35 and ours from the first step, as if only replay were delayed. ElliottYan/LUFFY@01f4ae06
  ExGRPO/.../experience/experience_trainer_ops.py:11-12: collect_experience_entries returns unless the collate
  function is in mixed-policy mode, which mix_trainer_experience.py:538-540 turns on after a step whose batch/solved
  (:402, the fraction of the batch's responses with reward 1, not of its prompts) exceeds 0.35: nothing is stored
  before the switch, the first mixed step's collate (experience_collate_fn.py:117-141) finds an empty pool and trains
  fresh prompts only, and replay begins one step later from successes found after the switch. Ours stores (and
  replays) from step 1.
- ``difficulty_weight`` (FALSE): a deviation gave the weights of both forms as [1 − s, 1 + s]; form='exp' is
  exp(s(2d − 1)), in [e^−s, e^s] (0.607 to 1.649 at s = 0.5), outside [0.5, 1.5] at both ends. Searched again for
  the paper's function (pages corpus: arXiv HTML v1/v2, emergentmind, tomesphere; find_string '2505.13261' over the
  code index): still no formula and no code.

Each numeric reference below is a float64 NumPy transcription of the cited lines, written for these tests.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _fidelity import defaults as _defaults, fid as _fid, record as _record


def _verl_agg(loss, mask, mode, dp_size=1, batch_num_tokens=None, global_batch_size=None):
  """verl agg_loss (volcengine/verl@v0.7.0 core_algos.py:802-818; the 0.9.1 wheel :1167-1203, the same for these
  three modes on one data-parallel rank), float64."""
  if mode == "token-mean":
    n = mask.sum() if batch_num_tokens is None else batch_num_tokens
    return (loss * mask).sum() / n * dp_size
  if mode == "seq-mean-token-sum":
    seq = (loss * mask).sum(-1)
  elif mode == "seq-mean-token-mean":
    seq = (loss * mask).sum(-1) / (mask.sum(-1) + 1e-8)
  else:
    raise ValueError(mode)
  has = (mask.sum(-1) > 0).astype(np.float64)
  n = has.sum() if global_batch_size is None else global_batch_size
  return (seq * has).sum() / n * dp_size


def _verl_agg_weights(mask, mode, dp_size=1, batch_num_tokens=None, global_batch_size=None):
  """d agg_loss / d loss_mat of the three branches above (agg_loss is linear in loss_mat)."""
  if mode == "token-mean":
    return mask / (mask.sum() if batch_num_tokens is None else batch_num_tokens) * dp_size
  count = mask.sum(-1, keepdims=True)
  n = (count > 0).sum() if global_batch_size is None else global_batch_size
  per_row = 1.0 if mode == "seq-mean-token-sum" else 1.0 / (count + 1e-8)
  return mask * per_row * (count > 0) / n * dp_size


def _ours(fn, loss, mask):
  with jax.enable_x64(True):
    num, den = fn(jnp.asarray(loss), jnp.asarray(mask))
  return float(num) / float(den)


def _padded_step(fn_name, mode):
  """One verl 0.9.1 step of 100 real rows (none empty), ppo_mini_batch_size × n = 64, dp 1: padded to 128 by
  upsample_batch_to_divisible_size (response_mask 0), two mini-batches each ÷ global_batch_size 64; ours: the 100
  rows in rl.num_minibatches=2 mini-batches of 50, each ÷ its own denominator. Returns (Σ theirs, Σ ours, loss,
  mask)."""
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  fn = getattr(O, fn_name)
  rng = np.random.default_rng(20261218)
  real, m, t = 100, 64, 7
  lengths = rng.integers(1, t + 1, size=real)
  mask = (np.arange(t)[None] < lengths[:, None]).astype(np.float64)
  loss = rng.random((real, t)) + 0.1
  pad = 128 - real
  mask_p = np.concatenate([mask, np.zeros((pad, t))])
  loss_p = np.concatenate([loss, np.zeros((pad, t))])
  theirs = sum(_verl_agg(loss_p[i:i + m], mask_p[i:i + m], mode, global_batch_size=m) for i in (0, m))
  ours = sum(_ours(fn, loss[i:i + 50], mask[i:i + 50]) for i in (0, 50))
  return theirs, ours, loss, mask


# -------------------------------------------------------------------------------- seq_mean_token_sum (not held)


def test_seq_mean_token_sum_equals_verl_and_trl_on_full_batches_and_differs_on_verl091_padded_ones():
  from rljax.objectives import seq_mean_token_sum  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(806)
  b, t, k = 12, 8, 3
  lengths = rng.integers(1, t + 1, size=b)
  mask = (np.arange(t)[None] < lengths[:, None]).astype(np.float64)
  loss = rng.normal(size=(b, t))
  ours = _ours(seq_mean_token_sum, loss, mask)
  sl = [slice(i * b // k, (i + 1) * b // k) for i in range(k)]
  legacy = sum(_verl_agg(loss[s], mask[s], "seq-mean-token-sum") / k for s in sl)  # dp_actor: × 1/grad. accum.
  engine = sum(_verl_agg(loss[s], mask[s], "seq-mean-token-sum", global_batch_size=b) for s in sl)
  # TRL 1.9.0 'luspo' (grpo_trainer.py:3143-3148) on a sequence-constant loss: (l_b · |y_b|).mean() ÷ GA
  seq_const = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  trl = sum((seq_const[s][:, :1] * mask[s].sum(1, keepdims=True)).mean() / k for s in sl)
  for theirs in (legacy, engine):
    assert ours == pytest.approx(theirs, rel=1e-12)
  assert _ours(seq_mean_token_sum, seq_const, mask) == pytest.approx(trl, rel=1e-12)
  # verl 0.9.1's padding rows: 100 real rows ÷ 64 per mini-batch there, ÷ 50 here
  theirs, ours, loss, mask = _padded_step("seq_mean_token_sum", "seq-mean-token-sum")
  total = (loss * mask).sum()
  assert theirs == pytest.approx(total / 64, rel=1e-12)
  assert ours == pytest.approx(total / 50, rel=1e-12)
  assert ours / theirs == pytest.approx(64 / 50, rel=1e-12)
  f = _fid("seq_mean_token_sum")
  pad = [x for x in f.deviations if "padding rows" in x]
  assert len(pad) == 1
  assert "lcm(dp size, ppo_mini_batch_size × rollout.n)" in pad[0] and "padding_utils.py:72-141, 144-210" in pad[0]
  assert "divides each of its two mini-batches by 64, ours with rl.num_minibatches=2 each by 50" in pad[0]
  assert "thirteenth draw" in pad[0]


# ------------------------------------------------------------------------------- seq_mean_token_mean (not held)


def test_seq_mean_token_mean_equals_verl_within_1e_8_and_differs_on_verl091_padded_batches():
  from rljax.objectives import seq_mean_token_mean  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(812)
  b, t, k = 12, 8, 4
  lengths = rng.integers(1, t + 1, size=b)
  mask = (np.arange(t)[None] < lengths[:, None]).astype(np.float64)
  loss = rng.random((b, t)) + 0.2
  ours = _ours(seq_mean_token_mean, loss, mask)
  sl = [slice(i * b // k, (i + 1) * b // k) for i in range(k)]
  legacy = sum(_verl_agg(loss[s], mask[s], "seq-mean-token-mean") / k for s in sl)
  engine = sum(_verl_agg(loss[s], mask[s], "seq-mean-token-mean", global_batch_size=b) for s in sl)
  trl = sum(((loss[s] * mask[s]).sum(-1) / np.maximum(mask[s].sum(-1), 1.0)).mean() / k for s in sl)  # 'grpo'
  for theirs in (legacy, engine):
    assert abs(ours - theirs) <= 1e-8 * abs(theirs) and ours != theirs  # verl's n + 1e-8
  assert ours == pytest.approx(trl, rel=1e-13)
  theirs, ours, loss, mask = _padded_step("seq_mean_token_mean", "seq-mean-token-mean")
  total = ((loss * mask).sum(-1) / mask.sum(-1)).sum()
  assert theirs == pytest.approx(total / 64, rel=1e-7)
  assert ours == pytest.approx(total / 50, rel=1e-12)
  assert ours / theirs == pytest.approx(64 / 50, rel=1e-7) and abs(ours / theirs - 1) > 0.2
  f = _fid("seq_mean_token_mean")
  pad = [x for x in f.deviations if "padding rows" in x]
  assert len(pad) == 1 and "although no row of ours is empty" in pad[0]
  assert "trainer/ppo/v1/trainer_base.py:1589-1621" in pad[0]
  assert f.deviations.index(pad[0]) == [i for i, x in enumerate(f.deviations) if "1/n_all" in x][0] + 1


# ------------------------------------------------------------------------------------------ gspo_token (held)


def _verl_gspo(old, new, adv, mask, mode="seq-mean-token-mean", clip_low=3e-4, clip_high=4e-4, **agg):
  """verl@v0.7.0 core_algos.py:1030-1061 (0.9.1 wheel :1575-1606): log s_t = log π − sg(log π) + sg(Σ m(log π −
  log π_old) / max(Σm, 1)), clamp(max=10), PPO max of the two branches, then agg_loss. Returns (loss, dloss/dlogπ):
  d s_t / d log π_t = s_t below the clamp, 0 above it; the max passes the unclipped branch's gradient unless the
  clipped one is larger."""
  seq = ((new - old) * mask).sum(-1) / np.maximum(mask.sum(-1), 1.0)
  log_s = np.broadcast_to(seq[:, None], new.shape)
  capped = log_s > 10.0
  s = np.exp(np.minimum(log_s, 10.0))
  pg1, pg2 = -adv * s, -adv * np.clip(s, 1 - clip_low, 1 + clip_high)
  pg = np.maximum(pg1, pg2)
  loss = _verl_agg(pg, mask, mode, **agg)
  dpg = np.where((pg1 >= pg2) & ~capped, -adv * s, 0.0)
  w = _verl_agg_weights(mask, mode, **agg)
  return loss, dpg * w


def _ours_gspo_token(old, new, adv, mask, aggregate):
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  from rljax.types import PolicyOutputs, TrainBatch  # pylint: disable=import-outside-toplevel
  b, t = mask.shape
  with jax.enable_x64(True):
    batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask),
                       advantages=jnp.asarray(adv), group_id=jnp.arange(b, dtype=jnp.int32),
                       logp_old=jnp.asarray(old))
    obj = O.chain(O.gspo_token(), aggregate=aggregate)
    f = lambda lp: obj(PolicyOutputs(logp=lp, entropy=None), batch)[0]  # noqa: E731
    return float(f(jnp.asarray(new))), np.asarray(jax.grad(f)(jnp.asarray(new)))


def test_gspo_token_equals_verl_with_per_token_advantages_the_cap_and_091_token_mean():
  rng = np.random.default_rng(2507_18071)
  b, t = 6, 10
  lengths = rng.integers(3, t + 1, size=b)
  mask = (np.arange(t)[None] < lengths[:, None]).astype(np.float64)
  old = -rng.random((b, t)) * 3 - 0.01
  new = old + rng.normal(scale=2e-3, size=(b, t))
  adv = rng.normal(size=(b, t))  # per-token advantages (gspo_token's reason to exist)
  new[5, :lengths[5]] = old[5, :lengths[5]] + 11.0  # row 5: seq mean log r 11 > 10: capped, no gradient
  loss, grad = _ours_gspo_token(old, new, adv, mask, "seq_mean_token_mean")
  t_loss, t_grad = _verl_gspo(old, new, adv, mask)
  assert loss == pytest.approx(t_loss, rel=1e-7)
  np.testing.assert_allclose(grad, t_grad, rtol=1e-5, atol=1e-9)
  assert np.all(grad[5] == 0)
  clipped = (t_grad == 0) & (mask > 0)
  assert clipped[:5].any() and not clipped[:5].all()  # the 3e-4 / 4e-4 clip acts on some tokens
  # verl 0.9.1: loss_agg_mode token-mean (actor.yaml:86) ÷ the mini-batch's global batch_num_tokens on each
  # micro-batch (losses.py:57-67, transformer_impl.py:729-735), summed: ours token_mean, any micro-batching
  n = mask.sum()
  parts = [_verl_gspo(old[s], new[s], adv[s], mask[s], mode="token-mean", batch_num_tokens=n)
           for s in (slice(0, 1), slice(1, 4), slice(4, 6))]
  loss, grad = _ours_gspo_token(old, new, adv, mask, "token_mean")
  assert loss == pytest.approx(sum(p[0] for p in parts), rel=1e-7)
  np.testing.assert_allclose(grad, np.concatenate([p[1] for p in parts]), rtol=1e-5, atol=1e-9)
  # the ±20 token clamp before the sequence mean (ours; verl has none): a token with log r = 25 in row 0
  new2 = new.copy()
  new2[0, 0] = old[0, 0] + 25.0
  loss, _ = _ours_gspo_token(old, new2, adv, mask, "seq_mean_token_mean")
  t_loss, _ = _verl_gspo(old, new2, adv, mask)
  assert abs(loss - t_loss) > 1e-4
  clamped = new2.copy()
  clamped[0, 0] = old[0, 0] + 20.0
  assert loss == pytest.approx(_verl_gspo(old, clamped, adv, mask)[0], rel=1e-7)
  d = _defaults("gspo_token")
  assert d["log s clamp"] == ("max 10", "max 10")
  assert d["token log r clamp"] == ("±20 before the mean", "none")
  f = _fid("gspo_token")
  assert any("equal while |log r| ≤ 20" in x for x in f.deviations)
  assert "core_algos.py:1546-1619" in f.read and "actor default token-mean" in f.read


# ----------------------------------------------------------------------------------------------- exgrpo (not held)


def _luffy_bucket_probs(success_counts, n_rollout):
  """ElliottYan/LUFFY@01f4ae06 weighted_bucket_sampler.py:26-31, 45-67 (normal): bucket weight N(k; n/2, 1) over the
  non-empty buckets, normalised; a prompt then uniformly within its bucket (experience_helpers.py:21-32 builds the
  buckets; the multinomial's first draw, :103)."""
  ks = np.asarray(success_counts)
  buckets = sorted(set(ks.tolist()))
  w = {k: np.exp(-((k - n_rollout / 2) ** 2) / 2) / np.sqrt(2 * np.pi) for k in buckets}
  total = sum(w.values())
  return np.array([w[k] / total / (ks == k).sum() for k in ks])


def _luffy_store_schedule(solved_fracs):
  """mix_trainer_experience.py:538-540 and experience_trainer_ops.py:11-12 as a schedule: per step, whether it
  stores successes (only in mixed-policy mode) and how many stored-success steps its collate could draw from
  (the pool is filled only by earlier storing steps)."""
  mixed, stores, pool_before = False, [], []
  stored_steps = 0
  for frac in solved_fracs:
    pool_before.append(stored_steps)
    stores.append(mixed)
    if mixed:
      stored_steps += 1
    if not mixed and frac > 0.35:
      mixed = True
  return stores, pool_before


def test_exgrpo_bucket_law_equals_theirs_and_theirs_stores_nothing_before_the_switch():
  from test_replay import FACTS, _step  # pylint: disable=import-outside-toplevel
  from rljax.replay import _buffer as B  # pylint: disable=import-outside-toplevel
  from rljax.replay import _stages as R  # pylint: disable=import-outside-toplevel
  counts = np.array([1, 2, 2, 4, 4, 4, 5, 7, 7, 3])
  np.testing.assert_allclose(B.exgrpo_bucket_probs(counts / 8, buckets=8), _luffy_bucket_probs(counts, 8),
                             rtol=1e-12)
  # theirs: steps with batch/solved 0.2, 0.3, 0.4, 0.5: no storage on the first three (the switch comes after the
  # third), the fourth's collate finds an empty pool; ours stores on the first step already
  stores, pool_before = _luffy_store_schedule([0.2, 0.3, 0.4, 0.5, 0.5])
  assert stores == [False, False, False, True, True] and pool_before == [0, 0, 0, 0, 1]
  stage = R.exgrpo(capacity=16, ratio=0.5, per_prompt=2).bind(FACTS)
  d0 = _step([1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0], prompts=[1, 2, 3], step=0)  # 2 of 12 rows solved: 0.17
  assert float(np.mean(d0.correct)) < 0.35
  _, state, m = stage.fn(d0, stage.init())
  assert m["stored"] == 2  # ours: stored at the first step, below their 0.35 switch
  d = _defaults("exgrpo")
  ours, theirs = d["start"]
  assert ours == "the first step (stored and replayed)"
  assert "experience_trainer_ops.py:11-12" in theirs and "nothing is stored before" in theirs
  assert "fraction of its responses with reward 1" in theirs and ":538-540" in theirs
  assert "first mixed step's batch finds an empty pool" in theirs
  f = _fid("exgrpo")
  assert any(x.startswith("experience mixing starts at the first step") and "store no success before that "
             "switch" in x and "first mixed step replays nothing" in x for x in f.deviations)
  assert "Thirteenth draw" in f.read and "experience_trainer_ops.py:7-12" in f.read


# ------------------------------------------------------------------------------------ difficulty_weight (not held)


def test_difficulty_weight_exp_form_weights_lie_in_e_minus_s_to_e_s_not_one_minus_s_to_one_plus_s():
  import rljax.advantages as A  # pylint: disable=import-outside-toplevel
  g = 8
  acc_counts = np.arange(g + 1)  # one group per success count 0..8
  correct = (np.arange(g)[None] < acc_counts[:, None]).astype(np.float64).reshape(-1)
  gid = np.repeat(np.arange(g + 1), g)
  adv = np.ones_like(correct)
  s = 0.5
  with jax.enable_x64(True):
    _, info = A.difficulty_weight(jnp.asarray(adv), jnp.asarray(correct), jnp.asarray(gid), strength=s,
                                  form="exp", num_groups=g + 1)
    _, lin = A.difficulty_weight(jnp.asarray(adv), jnp.asarray(correct), jnp.asarray(gid), strength=s,
                                 form="linear", num_groups=g + 1)
  w = np.asarray(info["weights"]).reshape(g + 1, g)[:, 0]
  d = 1 - acc_counts / g
  np.testing.assert_allclose(w, np.exp(s * (2 * d - 1)), rtol=1e-12)
  np.testing.assert_allclose(np.asarray(lin["weights"]).reshape(g + 1, g)[:, 0], 1 + s * (2 * d - 1), rtol=1e-12)
  assert w.min() == pytest.approx(math.exp(-s)) and w.max() == pytest.approx(math.exp(s))
  assert w.min() > 1 - s and w.max() > 1 + s  # outside [1 − s, 1 + s] at both ends
  assert f"{math.exp(-s):.3f}" == "0.607" and f"{math.exp(s):.3f}" == "1.649"
  f = _fid("difficulty_weight")
  dev = f.deviations[0]
  assert "form='exp': exp(s(2d − 1)), weights in [e^−s, e^s], 0.607 to 1.649 at s = 0.5" in dev
  assert "form='linear': 1 + s(2d − 1), weights in [1 − s, 1 + s]" in dev
  assert "Thirteenth draw" in f.read and "no weighting formula" in f.read
  assert "Thirteenth draw" in _record("difficulty_weight")
