"""Fidelity, third pass (issue #51): the defects an independent audit found in records that were numerically right at
their cited settings, each fixed or recorded, and the record's four questions (source read, defaults, placement,
deviations). Each reference here is a float64 NumPy transcription of the cited code or equation (written for these
tests, not copied) or a hand value.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rljax
import rljax.advantages as A
from rljax._technique import Fidelity
from rljax.catalog import describe, records_markdown

ROWS = {r.name: r for r in rljax.catalog()}


# ----------------------------------------------------------------------------------------------------------------
# QAE: github.com/junkangwu/QAE, verl compute_grpo_outcome_advantage with the mean swapped for torch.quantile(K)
# (K = 1: the mean); verl's singleton rule (mean 0, std 1).

def _qae_authors(scores, index, k, eps=1e-6):
  scores = np.asarray(scores, np.float64)
  out = np.zeros_like(scores)
  for g in np.unique(index):
    rows = np.where(index == g)[0]
    grp = scores[rows]
    if len(rows) == 1:
      base, std = 0.0, 1.0
    else:
      base = np.quantile(grp, k) if k < 1 else grp.mean()  # numpy's default = torch.quantile's linear
      std = grp.std(ddof=1)
    out[rows] = (grp - base) / (std + eps)
  return out


@pytest.mark.parametrize("k", [0.4, 0.5, 0.8, 1.0])
def test_qae_authors_mode_matches_their_code_with_singletons(k):
  rng = np.random.default_rng(1)
  gid = np.array([0, 0, 0, 0, 0, 1, 2, 2, 2, 3, 3, 3, 3, 4], np.int32)  # groups 1 and 4 are singletons
  r = rng.normal(size=gid.size).round(1)
  with jax.enable_x64(True):
    got = np.asarray(jax.jit(lambda x, g: A.qae(x, g, quantile=k, mode="authors")[0])(r, gid))
    assert got.dtype == np.float64
  np.testing.assert_allclose(got, _qae_authors(r, gid, k), rtol=1e-12, atol=1e-12)


def test_qae_rljax_mode_differs_only_where_recorded():
  gid = np.array([0, 0, 0, 1], np.int32)
  r = np.array([0.0, 1.0, 3.0, 2.0])
  with jax.enable_x64(True):
    ours = np.asarray(A.qae(r, gid, quantile=1.0)[0])
    theirs = np.asarray(A.qae(r, gid, quantile=1.0, mode="authors")[0])
  std = np.std([0.0, 1.0, 3.0], ddof=1) + 1e-6
  np.testing.assert_allclose(ours, [(0 - 3) / std, (1 - 3) / std, 0.0, 0.0], rtol=1e-12)  # K=1: max; singleton 0
  np.testing.assert_allclose(theirs, [(0 - 4 / 3) / std, (1 - 4 / 3) / std, (3 - 4 / 3) / std, 2 / (1 + 1e-6)],
                             rtol=1e-12)
  with pytest.raises(ValueError, match="mode"):
    A.qae(r, gid, mode="paper")


@pytest.mark.parametrize("mode", ["rljax", "authors"])
def test_qae_eps_zero_on_equal_rewards_gives_zero_not_nan(mode):
  r, gid = jnp.array([1.0, 1.0, 1.0, 0.0, 1.0]), jnp.array([0, 0, 0, 1, 1])
  for f in (lambda x, g: A.qae(x, g, eps=0.0, mode=mode)[0], jax.jit(lambda x, g: A.qae(x, g, eps=0.0, mode=mode)[0])):
    adv = np.asarray(f(r, gid))
    assert np.all(np.isfinite(adv)), adv
    np.testing.assert_array_equal(adv[:3], 0.0)
    # the unequal group keeps its value: K = 0.5 of {0, 1} is 0.5, σ (ddof 1) = 1/sqrt(2)
    np.testing.assert_allclose(adv[3:], [-0.5 * np.sqrt(2), 0.5 * np.sqrt(2)], rtol=1e-6)


@pytest.mark.parametrize("name,kw", [("qae", {}), ("passk", {"k": 2}), ("rank", {}), ("rank", {"normalize": "std"})])
@pytest.mark.parametrize("num_groups", [None, 1, 3])
def test_group_order_estimators_on_an_empty_batch_give_an_empty_result(name, kw, num_groups):
  fn = getattr(A, name)
  adv, info = fn(jnp.zeros((0,)), jnp.zeros((0,), jnp.int32), num_groups=num_groups, **kw)
  assert adv.shape == (0,)
  assert all(np.all(np.isfinite(np.asarray(v))) for v in info.values() if np.ndim(v) == 0)


# ----------------------------------------------------------------------------------------------------------------
# The record format: the four questions

def test_four_question_fields_are_validated():
  with pytest.raises(ValueError, match="placement"):
    Fidelity("peer", "verl x", read="verl@v0.5.0:a.py:1")
  with pytest.raises(ValueError, match="defaults"):
    Fidelity("peer", "verl x", read="verl@v0.5.0:a.py:1", placement="p", defaults=(("eps", 0.2, 0.2),))
  with pytest.raises(ValueError, match="deviations"):
    Fidelity("peer", "verl x", read="verl@v0.5.0:a.py:1", placement="p", deviations=("",))
  assert not Fidelity("peer", "verl x").in_full
  assert Fidelity("peer", "verl x", read="r", placement="p").in_full


def test_describe_and_docs_show_the_four_questions():
  text = describe(ROWS["qae"])
  for label in ("read:", "defaults:", "placement:", "deviation:"):
    assert label in text
  assert "quantile (K): ours 0.5 / theirs 0.4" in text
  md = records_markdown()
  n = sum(r.fidelity is not None and r.fidelity.in_full for r in ROWS.values())
  assert md.startswith(f"{n} of {len(ROWS)} rows are in the four-question form.")
  assert "### `qae`" in md


def test_docs_render_the_records_section():
  import os  # pylint: disable=import-outside-toplevel
  with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "catalog.md")) as f:
    docs = f.read()
  assert records_markdown() in docs, "docs/catalog.md is stale: python -m rljax.catalog --records"


# ----------------------------------------------------------------------------------------------------------------
# BAPO: github.com/WooooDyy/BAPO recipe/bapo/policy_loss.py compute_policy_loss_bapo: inside the loss, on each
# micro-batch, c_low raised from low_min by step to low_max, then c_high, until pos/(neg + eps) >= target.

def _bapo_code_bounds(a, r, m, target, lo=0.6, lo_max=0.9, hi=1.2, hi_max=3.0, step=0.05, eps=1e-8):
  a, r, m = (np.asarray(x, np.float64) for x in (a, r, m))

  def crit(c_lo, c_hi):
    eff = np.where(a >= 0, np.minimum(r, c_hi), np.maximum(r, c_lo)) * a * m
    pos, neg = np.maximum(eff, 0).sum(), np.maximum(-eff, 0).sum()
    return pos / (neg + eps) if neg > 0 else np.inf

  cands = []
  c = lo
  while c < lo_max - 1e-9:
    cands.append((c, hi))
    c = min(c + step, lo_max)
  cands.append((lo_max, hi))
  h = hi
  while h < hi_max - 1e-9:
    h = min(h + step, hi_max)
    cands.append((lo_max, h))
  for c_lo, c_hi in cands:
    if crit(c_lo, c_hi) >= target:
      return c_lo, c_hi
  return cands[-1]


def _micro(seed, b=4, t=6):
  from rljax.types import PolicyOutputs, TrainBatch  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(seed)
  mask = rng.random((b, t)) < 0.8
  adv = (rng.normal(size=(b, 1)) + (0.4, 0.0, -0.4, -0.8)[seed % 4]) * np.ones((1, t)) * mask
  lo = rng.normal(scale=0.3, size=(b, t)) - 1.0
  new = lo + rng.normal(scale=0.5, size=(b, t))
  batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask),
                     advantages=jnp.asarray(adv), group_id=jnp.arange(b, dtype=jnp.int32), logp_old=jnp.asarray(lo))
  return PolicyOutputs(logp=jnp.asarray(new), entropy=None), batch, (adv, np.exp(new - lo), mask.astype(float))


def test_bapo_loss_placement_chooses_bounds_per_micro_batch_like_the_authors_code():
  from rljax.recipes import Recipe  # pylint: disable=import-outside-toplevel
  from rljax.stages import RunFacts  # pylint: disable=import-outside-toplevel
  recipe = Recipe(loss="ppo_clip", aggregation="token_sum",
                  controllers="bapo(1.0, mode='code', placement='loss')").bind(
                      RunFacts(num_prompts=2, group_size=2, max_new_tokens=6, temperature=1.0))
  with jax.enable_x64(True):
    hp = {k: jnp.asarray(v, jnp.float64) for k, v in recipe.initial_hparams().items()}
    objective = jax.jit(lambda h, out, batch: recipe.objective_builder()(h)(out, batch)[0])
    chosen = []
    for seed in range(4):
      out, batch, (a, r, m) = _micro(seed)
      c_lo, c_hi = _bapo_code_bounds(a, r, m, 1.0)
      chosen.append((c_lo, c_hi))
      want = (np.maximum(-a * r, -a * np.clip(r, c_lo, c_hi)) * m).sum()
      np.testing.assert_allclose(float(objective(hp, out, batch)), want, rtol=1e-10)
  assert len(set(chosen)) > 1, "the micro-batches should need different bounds (the test would not see a lag)"


@pytest.mark.parametrize("mode", ["share", "code"])
def test_bapo_batch_without_signal_keeps_the_previous_bounds(mode):
  from rljax import control as C  # pylint: disable=import-outside-toplevel
  ctl = C.bapo(mode=mode)
  prev = C.BAPOState(clip_low=jnp.float32(0.75), clip_high=jnp.float32(1.5), balance=jnp.float32(0.3))
  b, t = 3, 4
  cases = {"zero advantages": (np.zeros((b, t)), np.ones((b, t), bool)),
           "all padding": (np.ones((b, t)), np.zeros((b, t), bool)),
           "B = 0": (np.zeros((0, t)), np.zeros((0, t), bool))}
  for name, (adv, mask) in cases.items():
    logp = np.zeros(adv.shape)
    new = jax.jit(lambda s, a, l, m: ctl.update(s, advantages=a, logp=l, logp_old=l, mask=m))(prev, adv, logp, mask)
    assert (float(new.clip_low), float(new.clip_high)) == (0.75, 1.5), (name, new)
    assert new.clip_low.dtype == jnp.float32
  # a batch with signal moves them (from the starting grid, not from the previous bounds)
  new = ctl.update(prev, advantages=np.ones((b, t)), logp=np.zeros((b, t)), logp_old=np.zeros((b, t)),
                   mask=np.ones((b, t), bool))
  assert (float(new.clip_low), float(new.clip_high)) == pytest.approx((0.6, 1.2))


def test_bapo_statistics_keep_float64():
  from rljax import control as C  # pylint: disable=import-outside-toplevel
  with jax.enable_x64(True):
    a = np.array([[1.0, -2.0, 0.5]])
    r = np.array([[1.1, 0.7, 1.3]])
    m = np.ones((1, 3))
    share = C.bapo_positive_share(a, r, m, 0.6 + 1e-12, 1.2)
    ratio = C.bapo_pos_neg_ratio(a, r, m, 0.6, 1.2)
    assert share.dtype == ratio.dtype == jnp.float64
    # hand values: active = A>0 & r<=1.2 -> token 0 (|A| r = 1.1); A<0 & r>=0.6 -> token 1 (2*0.7 = 1.4)
    np.testing.assert_allclose(float(share), 1.1 / 2.5, rtol=1e-14)
    # effective: 1*min(1.1,1.2)=1.1, -2*max(0.7,0.6)=-1.4, 0.5*min(1.3,1.2)=0.6 -> 1.7/1.4
    np.testing.assert_allclose(float(ratio), 1.7 / (1.4 + 1e-8), rtol=1e-14)


# ----------------------------------------------------------------------------------------------------------------
# GPG: the authors' GPG trainer (open_r1 GPGTrainer, compute_loss / _generate_and_score_completions): A = r − mean_g
# (/(std_g + 1e-4) with scale_rewards), inverse_alpha = min(1, groups with std > 0 / groups), loss =
# token-mean(−logp·A) / inverse_alpha (adjust_gd).

def _gpg_authors(rewards, n_gen, logp, mask, scale_rewards):
  r = np.asarray(rewards, np.float64).reshape(-1, n_gen)
  mean, std = r.mean(1, keepdims=True), r.std(1, ddof=1, keepdims=True)
  adv = r - mean
  if scale_rewards:
    adv = adv / (std + 1e-4)
  inverse_alpha = min(1.0, float((std[:, 0] != 0).sum()) / r.shape[0])
  per_token = -logp * adv.reshape(-1)[:, None]
  return (per_token * mask).sum() / mask.sum() / inverse_alpha


@pytest.mark.parametrize("scale_rewards", [False, True])
def test_gpg_alpha_valid_groups_with_grpo_is_the_authors_loss(scale_rewards):
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  from rljax.types import PolicyOutputs, TrainBatch  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(3)
  groups, n, t = 5, 4, 6
  rewards = rng.integers(0, 2, size=(groups, n)).astype(float)
  rewards[1] = 1.0  # two groups without signal: alpha = 5/3
  rewards[3] = 0.0
  rewards[0] = [0.0, 1.0, 1.0, 0.0]
  rewards = rewards.reshape(-1)
  gid = np.repeat(np.arange(groups), n).astype(np.int32)
  mask = rng.random((groups * n, t)) < 0.8
  mask[:, 0] = True
  logp = -rng.random((groups * n, t)) * 2
  with jax.enable_x64(True):
    adv, _ = A.grpo(rewards, gid, eps=1e-4, scale="group" if scale_rewards else "none")
    batch = TrainBatch(tokens=jnp.zeros(mask.shape, jnp.int32), loss_mask=jnp.asarray(mask),
                       advantages=jnp.asarray(np.asarray(adv)[:, None] * mask), group_id=jnp.asarray(gid))
    out = PolicyOutputs(logp=jnp.asarray(logp), entropy=None)
    objective = O.chain(O.gpg(alpha="valid_groups"), aggregate=O.token_mean)
    loss, metrics = jax.jit(objective)(out, batch)
    assert loss.dtype == jnp.float64
    np.testing.assert_allclose(float(loss), _gpg_authors(rewards, n, logp, mask, scale_rewards), rtol=1e-12)
    # exact under micro-batching: the factor is a whole-batch statistic (the halves hold 2 and 3 groups)
    stats, denom = objective.statistics(out, batch), objective.denominator(batch)
    cut = lambda x, s: x[s] if getattr(x, "ndim", 0) and x.shape[0] == mask.shape[0] else x
    parts = [objective(jax.tree.map(lambda x, s=s: cut(x, s), out), jax.tree.map(lambda x, s=s: cut(x, s), batch),
                       denominator=denom, statistics=stats)[0] for s in (slice(0, 8), slice(8, None))]
    np.testing.assert_allclose(float(sum(parts)), float(loss), rtol=1e-6)
    plain = O.chain(O.gpg(), aggregate=O.token_mean)(out, batch)[0]
  valid = int((rewards.reshape(groups, n).std(1) > 0).sum())
  assert 0 < valid <= groups - 2
  np.testing.assert_allclose(float(loss) * valid / groups, float(plain), rtol=1e-12)
  np.testing.assert_allclose(float(metrics["gpg/gpg_alpha"]), groups / valid, rtol=1e-12)
  with pytest.raises(ValueError, match="gpg: alpha"):
    O.gpg(alpha="paper")


# ----------------------------------------------------------------------------------------------------------------
# Aggregations: volcengine/verl@v0.7.0 verl/trainer/ppo/core_algos.py agg_loss (dp_size 1, no global counts).

def _verl_agg_loss(loss_mat, loss_mask, mode, loss_scale_factor=None):
  loss_mat, loss_mask = np.asarray(loss_mat, np.float64), np.asarray(loss_mask, np.float64)
  if mode == "token-mean":
    return (loss_mat * loss_mask).sum() / loss_mask.sum()
  seq_losses = (loss_mat * loss_mask).sum(-1)
  if mode == "seq-mean-token-sum":
    seq_mask = (loss_mask.sum(-1) > 0).astype(float)
    return (seq_losses * seq_mask).sum() / seq_mask.sum()
  if mode == "seq-mean-token-mean":
    count = loss_mask.sum(-1)
    seq_mask = (count > 0).astype(float)
    return (seq_losses / (count + 1e-8) * seq_mask).sum() / seq_mask.sum()
  assert mode == "seq-mean-token-sum-norm"
  return seq_losses.sum() / (loss_mask.shape[-1] if loss_scale_factor is None else loss_scale_factor)


def test_aggregations_against_verl_agg_loss():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(5)
  loss = rng.normal(size=(5, 7))
  mask = rng.random((5, 7)) < 0.6
  mask[2] = False  # a row without tokens
  with jax.enable_x64(True):
    value = lambda agg: float(np.divide(*[np.asarray(x, np.float64) for x in agg(jnp.asarray(loss), jnp.asarray(mask))]))
    np.testing.assert_allclose(value(O.token_mean), _verl_agg_loss(loss, mask, "token-mean"), rtol=1e-14)
    np.testing.assert_allclose(value(O.token_sum), _verl_agg_loss(loss, mask, "seq-mean-token-sum-norm", 1),
                               rtol=1e-14)
    np.testing.assert_allclose(value(O.seq_mean_token_sum), _verl_agg_loss(loss, mask, "seq-mean-token-sum"),
                               rtol=1e-14)
    np.testing.assert_allclose(value(O.seq_mean_token_mean), _verl_agg_loss(loss, mask, "seq-mean-token-mean"),
                               rtol=1e-8)
    # the recorded deviation: verl's seq-mean-token-sum-norm is B times ours
    np.testing.assert_allclose(value(O.seq_mean_token_sum_norm) * loss.shape[0],
                               _verl_agg_loss(loss, mask, "seq-mean-token-sum-norm"), rtol=1e-14)
  assert "no 'token-sum' mode" in ROWS["token_sum"].fidelity.differences


# ----------------------------------------------------------------------------------------------------------------
# float64 in, float64 out (issue #51: these were float32 under x64)

def test_float64_is_kept_by_delta_logp_reweight_length_penalty_and_variance_topp():
  from rljax import filters as F, objectives as O, rewards as R  # pylint: disable=import-outside-toplevel
  from rljax.types import PolicyOutputs, TrainBatch  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(7)
  with jax.enable_x64(True):
    logp_old = -rng.random((3, 4)) * 1e-9  # p_old within 1e-9 of 1: float32 rounds 1 − p to 0 or 6e-8
    batch = TrainBatch(tokens=jnp.zeros((3, 4), jnp.int32), loss_mask=jnp.ones((3, 4), bool),
                       advantages=jnp.ones((3, 4)), group_id=jnp.arange(3, dtype=jnp.int32),
                       logp_old=jnp.asarray(logp_old))
    out = PolicyOutputs(logp=jnp.asarray(logp_old), entropy=None)
    loss, metrics = O.delta_logp_reweight(O.gpg(), form="linear", c=0.2)(out, batch)
    assert loss.dtype == jnp.float64 and metrics["delta_logp/weight_mean"].dtype == jnp.float64
    w = 1 + 0.2 * (1 - np.exp(logp_old))
    np.testing.assert_allclose(np.asarray(loss), -w * logp_old, rtol=1e-12)

    lengths = np.array([10.0, 10.0 + 1e-9, 30.0, 7.0])
    r, _ = R.length_penalty(lengths, np.array([1, 1, 1, 0]), np.array([0, 0, 0, 1]), num_groups=2)
    assert r.dtype == jnp.float64
    np.testing.assert_allclose(np.asarray(r)[:2], [0.5, 0.5 - 1e-9 / 20], rtol=0, atol=1e-15)

    rewards = np.array([0.0, 1e-9, 1.0, 1.0, 0.2, 0.3])
    keep, stats = F.variance_topp(rewards, np.array([0, 0, 1, 1, 2, 2]), num_groups=3, top_p=0.34)
    assert stats["group_std"].dtype == jnp.float64
    np.testing.assert_allclose(np.asarray(stats["group_std"]), [0.5e-9, 0.0, 0.05], rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(keep), [True, True, False, False, True, True])  # ceil(1.02) = 2


def _verl_grpo(scores, index, epsilon=1e-6, norm_adv_by_std_in_grpo=True):
  """volcengine/verl@v0.7.0 core_algos.py:265-330 compute_grpo_outcome_advantage, float64."""
  scores = np.asarray(scores, np.float64).copy()
  groups = {}
  for i, g in enumerate(index):
    groups.setdefault(g, []).append(scores[i])
  stats = {g: (0.0, 1.0) if len(v) == 1 else (np.mean(v), np.std(v, ddof=1)) for g, v in groups.items()}
  for i, g in enumerate(index):
    mean, std = stats[g]
    scores[i] = (scores[i] - mean) / (std + epsilon) if norm_adv_by_std_in_grpo else scores[i] - mean
  return scores


@pytest.mark.parametrize("std", [True, False])
def test_grpo_and_dr_grpo_with_verl_singletons_match_verl(std):
  rng = np.random.default_rng(11)
  gid = np.array([0, 0, 0, 1, 2, 2, 3, 3, 3, 3], np.int32)
  r = rng.normal(size=gid.size)
  with jax.enable_x64(True):
    fn = (lambda x, g: A.grpo(x, g, singleton="raw")[0]) if std else (lambda x, g: A.dr_grpo(x, g, singleton="raw")[0])
    got = np.asarray(jax.jit(fn)(r, gid))
  np.testing.assert_allclose(got, _verl_grpo(r, gid, norm_adv_by_std_in_grpo=std), rtol=1e-12)


# ----------------------------------------------------------------------------------------------------------------
# variance_topp(rule="mass"): RAGEN-AI/RAGEN@4ec25747 ragen/trainer/rollout_filter.py RolloutFilter._select_top_groups,
# strategy "top_p", top_p_prob_mode "linear", filter_type "largest", include_zero True, metric reward_variance.

def _ragen_top_p_linear(scores, value, selection_eps=0.01):
  scores = np.asarray(scores, np.float64)
  if value >= 1.0:
    return set(range(len(scores)))
  order = np.argsort(-scores, kind="stable")
  threshold = value * scores.sum() - selection_eps
  cumulative, count = 0.0, 0
  for score in scores[order]:
    if cumulative >= threshold or score <= 0:
      break
    cumulative += score
    count += 1
  return set(order[:count].tolist()) if cumulative >= threshold else set()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("top_p", [0.25, 0.5, 0.9, 1.0])
def test_variance_topp_mass_rule_matches_ragens_rollout_filter(seed, top_p):
  from rljax import filters as F  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(seed)
  groups, n = 8, 4
  rewards = rng.integers(0, 3, size=(groups, n)).astype(float)
  rewards[seed % groups] = 1.0  # a zero-std group
  gid = np.repeat(np.arange(groups), n).astype(np.int32)
  with jax.enable_x64(True):
    keep, stats = F.variance_topp(rewards.reshape(-1), gid, num_groups=groups, top_p=top_p, rule="mass")
  want = _ragen_top_p_linear(rewards.std(1, ddof=1), top_p)
  assert set(np.flatnonzero(np.asarray(stats["group_keep"])).tolist()) == want
  np.testing.assert_array_equal(np.asarray(keep), np.isin(gid, list(want)))
  with pytest.raises(ValueError, match="variance_topp: rule"):
    F.variance_topp(rewards.reshape(-1), gid, num_groups=groups, rule="top_k")


def _verl_rloo(scores, index):
  """volcengine/verl@v0.7.0 core_algos.py:475-525 compute_rloo_outcome_advantage, float64."""
  scores = np.asarray(scores, np.float64).copy()
  groups = {}
  for i, g in enumerate(index):
    groups.setdefault(g, []).append(scores[i])
  for i, g in enumerate(index):
    n = len(groups[g])
    if n > 1:
      scores[i] = scores[i] * n / (n - 1) - np.mean(groups[g]) * n / (n - 1)
  return scores


def test_rloo_with_verl_singletons_matches_verl():
  rng = np.random.default_rng(12)
  gid = np.array([0, 0, 0, 1, 2, 2, 3, 3, 3, 3], np.int32)
  r = rng.normal(size=gid.size)
  with jax.enable_x64(True):
    got = np.asarray(jax.jit(lambda x, g: A.rloo(x, g, singleton="raw")[0])(r, gid))
  np.testing.assert_allclose(got, _verl_rloo(r, gid), rtol=1e-12)


def test_ppo_clip_with_dual_clip_matches_verl_vanilla():
  """volcengine/verl@v0.7.0 core_algos.py:906-997 compute_policy_loss_vanilla (per-token pg_losses), float64."""
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  from rljax.types import PolicyOutputs, TrainBatch  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(13)
  b, t = 6, 5
  old = -rng.random((b, t)) * 2
  new = old + rng.normal(scale=0.8, size=(b, t))
  adv = rng.normal(size=(b, 1)) * np.ones((1, t))
  mask = np.ones((b, t), bool)
  ratio = np.exp(np.clip(new - old, -20, 20))
  l1 = np.maximum(-adv * ratio, -adv * np.clip(ratio, 0.8, 1.28))
  want = np.where(adv < 0, np.minimum(-adv * 3.0, l1), l1)
  with jax.enable_x64(True):
    batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask), advantages=jnp.asarray(adv),
                       group_id=jnp.arange(b, dtype=jnp.int32), logp_old=jnp.asarray(old))
    per_token, _ = O.ppo_clip(0.2, 0.28, dual_clip=3.0)(PolicyOutputs(logp=jnp.asarray(new), entropy=None), batch)
  assert ((adv < 0) & (ratio > 3)).any()  # the dual clip is exercised
  np.testing.assert_allclose(np.asarray(per_token), want, rtol=1e-12)
