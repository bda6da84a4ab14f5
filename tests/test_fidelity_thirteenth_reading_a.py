"""Issue #51 item 4, thirteenth draw (seed 20261218), part a: an independent re-audit of five in-full rows.

Rows drawn: qae, reinforce, adhint, variance_topp, token_sum (five of the ten of
``random.Random(20261218).sample(rows, 10)`` over the 109 rows).

Held (3): qae, adhint, variance_topp.

- ``qae``: the authors' repository (github.com/junkangwu/QAE) is still not stored (fetch, find_files: none); its
  README (pages corpus: gitblind.noratr.app/junkangwu/QAE, skillagent.dev) says what the record says (quantile_k =
  config.get('quantile_k', -1.0), the quantile only for 0 < K < 1, ++algorithm.quantile_k=0.4, 'only changes the
  DAPO recipe'); arXiv 2509.22611v2 (pages corpus) names the same repository. mode='authors' is checked below against
  a float64 transcription of verl's compute_grpo_outcome_advantage with the README's lines swapped in.
- ``adhint``: an abstract-only record that says so; the method section is still out of reach (the pages corpus
  returns page openings and summaries only), no ADHint repository is in the code index (find_repos 'adhint': none
  of the authors'); our side (the linear hint ratio, the answer prefix) is checked below.
- ``variance_topp``: RAGEN-AI/RAGEN@5eb79b82 ragen/trainer/agent_trainer.py:463-500 (_filter_rollout, int(p·G) by
  torch.topk of the unbiased in-group std of original_rm_scores, called right after the rollout, :514-515) and
  config/base.yaml:54-55, 104-115; @4ec25747 ragen/trainer/rollout_filter.py _select_top_groups ('top_p',
  'linear'); both rules are checked below against float64 transcriptions.

Not held (2), each error fixed in the record and checked here (no implementation changed, no implementation bug
found; every implementation matched its source at the stated settings):

- ``reinforce`` (OMITTED, two): (1) the record takes its 'verl reinforce example' values (rollout_is 'sequence',
  batch-normalised, 4 mini-batches, rloo) from volcengine/verl@v0.7.0 examples/rollout_correction/
  run_with_rollout_corr.sh, which does not start as released: it sets no actor.ppo_micro_batch_size(_per_gpu) and no
  use_dynamic_bsz (null / false, _generated_ppo_trainer.yaml:51-53), so validate_config (main_ppo.py:292-296,
  utils/config.py:151) builds the actor config and ActorConfig.__post_init__ (workers/config/actor.py:184-187)
  fails its assertion before training. (2) the verl 0.9.1 PyPI wheel has three more loss_type 'reinforce' presets
  the record did not list: bypass_pg_geo_rs, bypass_pg_geo_rs_seq_tis, bypass_pg_geo_rs_token_tis
  (trainer/config/algorithm.py:400-421, 474-499, 502-529: rollout_rs 'seq_mean_k1', '0.999_1.001', a row kept when
  log 0.999 ≤ mean(−log r) ≤ log 1.001, rollout_corr_helper.py:342-349); reinforce(importance_weight=False,
  correction=(mis(1/1.001, 1/0.999, level='geometric', reweight=False), tis(2.0, level='sequence'))) gives the
  _seq_tis one (checked below). volcengine/verl@v0.7.0 has its own such presets (algorithm.py:336-367 bypass_pg_rs,
  :405-439 bypass_pg_geo_rs_seq_tis: rollout_rs 'geometric' 1.001 and rollout_token_veto_threshold 1e-4): the
  geometric band is mis(1/1.001, 1.001, level='geometric', reweight=False); the veto (a row with any token ratio
  below 1e-4 dropped, rollout_corr_helper.py:656-677) is not built here (recorded as a deviation; checked below).
- ``token_sum`` (FALSE): a deviation said verl v0.7.0's legacy dp_actor differs from ours "by that constant factor
  (a learning-rate factor)". With use_dynamic_bsz the legacy dp_actor scales each micro-batch's loss by its rows /
  ppo_mini_batch_size (dp_actor.py:463-467) and the micro-batches (token-budget packed, :440-442) hold different
  numbers of rows, so their token sums are weighted unequally: no constant factor gives theirs. The same deviation
  also gave the legacy worker's divisor as loss_scale_factor, which that worker never passes (÷ T there, as the
  record's placement says). verl 0.9.1's 'token-sum' is ours on any micro-batching (checked below).

Noticed, not this draw's rows: seq_mean_token_sum_norm shares the token_sum deviation text (_SUM_NORM_SCALE in
rljax/objectives/_aggregation.py) and so the same "constant factor" claim under use_dynamic_bsz; rows citing
run_with_rollout_corr.sh (tis, the rollout-correction rows) may share the reinforce finding (1).
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rljax.catalog import describe
from _fidelity import ROWS, defaults as _defaults, fid as _fid


# ------------------------------------------------------------------------------------------------ qae (held)


def _qae_verl(scores, index, quantile_k=0.4, epsilon=1e-6):
  """volcengine/verl compute_grpo_outcome_advantage (v0.7.0 core_algos.py:265-330) with the QAE README's lines
  (quantile_k = config.get('quantile_k', -1.0); 0 < K < 1: torch.quantile(scores, K) (linear), else the mean), float64:
  a singleton group: mean 0, std 1; else torch.std (unbiased); A = (s − baseline)/(std + ε)."""
  scores = np.asarray(scores, np.float64)
  out = np.empty_like(scores)
  for g in np.unique(index):
    sel = index == g
    s = scores[sel]
    if s.size == 1:
      base, std = 0.0, 1.0
    else:
      srt = np.sort(s)
      if 0 < quantile_k < 1:
        h = quantile_k * (s.size - 1)
        lo = int(math.floor(h))
        hi = min(lo + 1, s.size - 1)
        base = srt[lo] + (h - lo) * (srt[hi] - srt[lo])
      else:
        base = s.mean()
      std = s.std(ddof=1)
    out[sel] = (s - base) / (std + epsilon)
  return out


def test_qae_authors_mode_equals_verl_grpo_with_the_readme_quantile():
  import rljax.advantages as A  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(20261218)
  # binary (their ±1 math_dapo score) and overlong-shaped groups, sizes 16, 5, 1 (a singleton), 7
  sizes = (16, 5, 1, 7)
  gid = np.repeat(np.arange(len(sizes)), sizes)
  r = np.where(rng.random(gid.size) < 0.3, 1.0, -1.0)
  r[-7:] += -rng.random(7) * 0.8  # overlong penalty in (−1, 0]
  for k in (0.4, 0.5, 1.0):
    theirs = _qae_verl(r, gid, quantile_k=k)
    with jax.enable_x64(True):
      ours = np.asarray(A.qae(jnp.asarray(r), jnp.asarray(gid), quantile=k, mode="authors")[0])
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
  with jax.enable_x64(True):
    rl = np.asarray(A.qae(jnp.asarray(r), jnp.asarray(gid), quantile=0.4)[0])
  assert rl[16 + 5] == 0.0 and abs(_qae_verl(r, gid)[16 + 5] - r[16 + 5] / (1 + 1e-6)) < 1e-15  # singleton rule
  d = _defaults("qae")
  assert "0.4" in d["quantile (K)"][1] and "1e-6" in d["eps"][1]
  assert "quantile_k = config.get('quantile_k', -1.0)" in _fid("qae").read


# --------------------------------------------------------------------------------------------- adhint (held)


def test_adhint_hint_ratio_and_prefix_and_the_record_says_abstract_only():
  from rljax.hints import _rules as H  # pylint: disable=import-outside-toplevel
  for p, want in ((0.0, 1.0), (0.25, 0.25 + 0.75 * 0.75), (0.5, 0.625)):
    assert abs(H.adhint_fraction(p, min_fraction=0.25, max_fraction=1.0) - want) < 1e-15
  answer = "3.14159"
  assert H.answer_prefix(answer, 0.625) == answer[:math.ceil(0.625 * 7)]
  f = _fid("adhint")
  assert f.basis == "abstract" and "method section was not reached" in f.read
  assert all("not read" in t or "unread" in t for _, _, t in f.defaults)


# -------------------------------------------------------------------------------------- variance_topp (held)


def _ragen_std_filter(rewards, num_groups, group_size, ratio):
  """RAGEN-AI/RAGEN@5eb79b82 agent_trainer.py:463-478: torch.std (unbiased) per group, int(ratio·G) by topk."""
  s = np.asarray(rewards, np.float64).reshape(num_groups, group_size).std(axis=1, ddof=1)
  if ratio == 1:
    return np.ones(num_groups, bool)
  top = np.argsort(-s, kind="stable")[:int(ratio * num_groups)]
  keep = np.zeros(num_groups, bool)
  keep[top] = True
  return keep


def _ragen_mass(std, value, eps=0.01):
  """RAGEN-AI/RAGEN@4ec25747 rollout_filter.py _select_top_groups: 'top_p', 'linear', 'largest', include_zero."""
  if value >= 1.0:
    return np.ones(std.size, bool)
  order = np.argsort(-std, kind="stable")
  threshold = value * std.sum() - eps
  cum, n = 0.0, 0
  for s in std[order]:
    if cum >= threshold or s <= 0:
      break
    cum += s
    n += 1
  keep = np.zeros(std.size, bool)
  if cum >= threshold:
    keep[order[:n]] = True
  return keep


@pytest.mark.parametrize("ratio", [0.25, 0.5, 0.75, 1.0])
def test_variance_topp_count_rule_equals_ragen_at_base_yaml_groups(ratio):
  from rljax.filters import variance_topp  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(7)
  g, n = 8, 16  # base.yaml es_manager.train env_groups 8, group_size 16
  r = rng.random(g * n) * rng.integers(1, 5, size=g * n)  # distinct group stds
  theirs = _ragen_std_filter(r, g, n, ratio)
  with jax.enable_x64(True):
    keep, _ = variance_topp(jnp.asarray(r), jnp.repeat(jnp.arange(g), n), num_groups=g, top_p=ratio)
  np.testing.assert_array_equal(np.asarray(keep).reshape(g, n)[:, 0], theirs)
  # int(p·G) vs ceil(p·G): equal at these G; p·G < 1 keeps one group here and none there
  assert int(0.1 * g) == 0 and math.ceil(0.1 * g) == 1


def test_variance_topp_mass_rule_equals_ragen_rollout_filter():
  from rljax.filters import variance_topp  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(11)
  g, n = 12, 6
  for trial in range(20):
    r = rng.random(g * n) * rng.integers(0, 3, size=g * n)
    r[:n] = 0.5  # a zero-std group
    std = r.reshape(g, n).std(axis=1, ddof=1)
    p = (0.25, 0.5, 0.75, 0.9)[trial % 4]
    with jax.enable_x64(True):
      keep, _ = variance_topp(jnp.asarray(r), jnp.repeat(jnp.arange(g), n), num_groups=g, top_p=p, rule="mass")
    np.testing.assert_array_equal(np.asarray(keep).reshape(g, n)[:, 0], _ragen_mass(std, p))


# ----------------------------------------------------------------------------------------- reinforce (not held)


def _verl091_geo_rs_seq_tis_loss(logp, rollout, adv, mask, rs=(0.999, 1.001), is_threshold=2.0):
  """The verl 0.9.1 PyPI wheel, preset bypass_pg_geo_rs_seq_tis (trainer/config/algorithm.py:474-499), float64:
  rollout_corr_helper.py:262-263, 342-349 (log r clamped ±20, k1 = −log r, a row kept when log L ≤ mean k1 ≤ log U),
  :575-590 (sequence weight exp(clamp(Σ log r, ±20)) × response_mask, truncated at 2.0), core_algos
  compute_policy_loss_reinforce (−A·log π·w on the rejection-modified mask). Returns the per-token loss × mask."""
  log_r = np.clip(logp - rollout, -20, 20)
  k1_mean = (-log_r * mask).sum(1) / mask.sum(1)
  keep = (k1_mean >= math.log(rs[0])) & (k1_mean <= math.log(rs[1]))
  w = np.exp(np.clip(((logp - rollout) * mask).sum(1), -20, 20))
  w = np.minimum(w[:, None] * mask, is_threshold)
  eff = mask * keep[:, None]
  return -adv * logp * w * eff, keep


def test_reinforce_verl091_geo_rs_presets_are_mis_geometric_with_tis():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  from rljax.types import PolicyOutputs, TrainBatch  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(20261218)
  b, t = 8, 9
  mask = rng.random((b, t)) < 0.85
  mask[:, 0] = True
  logp = -rng.random((b, t)) * 3.0
  # half the rows within the ±0.1% geometric band, half outside (both sides)
  shift = np.where(np.arange(b)[:, None] % 2 == 0, rng.normal(scale=3e-4, size=(b, 1)),
                   np.where(np.arange(b)[:, None] % 4 == 1, 0.01, -0.01))
  rollout = logp - shift + rng.normal(scale=1e-5, size=(b, t))
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  theirs, keep = _verl091_geo_rs_seq_tis_loss(logp, rollout, adv, mask.astype(np.float64))
  assert 0 < keep.sum() < b
  corr = (O.mis(1 / 1.001, 1 / 0.999, level="geometric", reweight=False), O.tis(2.0, level="sequence"))
  term = O.reinforce(importance_weight=False, correction=corr)
  with jax.enable_x64(True):
    batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask),
                       advantages=jnp.asarray(adv), group_id=jnp.arange(b, dtype=jnp.int32),
                       logp_behavior=jnp.asarray(rollout))
    ours, _ = term(PolicyOutputs(logp=jnp.asarray(logp)), batch)
  np.testing.assert_allclose(np.asarray(ours), theirs, rtol=1e-12, atol=1e-14)
  f = _fid("reinforce")
  assert "bypass_pg_geo_rs_seq_tis" in f.read and "algorithm.py:400-421, 474-499, 502-529" in f.read
  assert any("mis(1/1.001, 1/0.999, level='geometric'" in d for d in f.deviations)


def _verl07_bypass_pg_rs_keep(logp, rollout, mask, upper=1.001, veto=1e-4):
  """volcengine/verl@v0.7.0 preset bypass_pg_rs (trainer/config/algorithm.py:336-367), float64:
  rollout_corr_helper.py:150-157, :164 (exp(clamp(mean log r, ±20)) in [1/upper, upper]) and :656-677 (the veto:
  a row with any loss token whose log r < log veto is dropped)."""
  log_r = logp - rollout
  g = np.exp(np.clip((log_r * mask).sum(1) / mask.sum(1), -20, 20))
  keep = (g >= 1.0 / upper) & (g <= upper)
  vetoed = ((log_r < math.log(veto)) & (mask > 0)).any(1)
  return keep & ~vetoed, vetoed


def test_reinforce_geometric_rejection_matches_verl07_except_the_veto_and_091_via_divergence_rejection():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  from rljax.types import PolicyOutputs, TrainBatch  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(5)
  b, t = 6, 40
  mask = np.ones((b, t))
  logp = -rng.random((b, t)) * 2.0
  rollout = logp - rng.normal(scale=1e-4, size=(b, t))
  rollout[0, 3] = logp[0, 3] + 12.0  # one catastrophic token (ratio e^-12 < 1e-4) ...
  rollout[0, 4] = logp[0, 4] - 12.0  # ... offset so the row's geometric mean stays inside the band
  keep07, vetoed = _verl07_bypass_pg_rs_keep(logp, rollout, mask)
  assert vetoed[0] and not vetoed[1:].any()
  with jax.enable_x64(True):
    batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask > 0),
                       advantages=jnp.ones((b, t)), group_id=jnp.arange(b, dtype=jnp.int32),
                       logp_behavior=jnp.asarray(rollout))
    out = PolicyOutputs(logp=jnp.asarray(logp))
    _, keep_mis, _ = O.mis(1 / 1.001, 1.001, level="geometric", reweight=False)(out, batch)
    _, keep_div, _ = O.divergence_rejection((math.log(0.999), math.log(1.001)), estimator="k1",
                                            level="sequence_mean")(out, batch)
  ours07 = np.asarray(keep_mis)[:, 0] > 0
  np.testing.assert_array_equal(ours07[1:], keep07[1:])  # = theirs on rows without a vetoed token
  assert ours07[0] and not keep07[0]  # the veto is not built
  k1_mean = (-np.clip(logp - rollout, -20, 20) * mask).sum(1) / mask.sum(1)  # verl 0.9.1 seq_mean_k1
  keep091 = (k1_mean >= math.log(0.999)) & (k1_mean <= math.log(1.001))
  np.testing.assert_array_equal(np.asarray(keep_div)[:, 0] > 0, keep091)
  f = _fid("reinforce")
  assert "rollout_token_veto_threshold 1e-4" in f.read and "algorithm.py:336-367 and :405-439" in f.read
  assert any("(not built)" in d and "veto" in d for d in f.deviations)


def test_reinforce_record_says_verls_example_does_not_start():
  f = _fid("reinforce")
  assert "verl/workers/config/actor.py:184-187" in f.read and "stops before training as released" in f.read
  assert any("does not start as released" in d and "ppo_micro_batch_size_per_gpu" in d for d in f.deviations)
  # the script's settings (run_with_rollout_corr.sh:47-49, 63-89) with the v0.7.0 defaults reaching the check
  settings = {"ppo_micro_batch_size": None, "ppo_micro_batch_size_per_gpu": None, "use_dynamic_bsz": False}
  starts = settings["use_dynamic_bsz"] or not (settings["ppo_micro_batch_size"] is None
                                               and settings["ppo_micro_batch_size_per_gpu"] is None)
  assert not starts
  assert "Thirteenth draw" in describe(ROWS["reinforce"])


# ----------------------------------------------------------------------------------------- token_sum (not held)


def _verl07_legacy_sum_norm_grad_weights(mask, micro_rows, mini_rows):
  """volcengine/verl@v0.7.0 legacy dp_actor, loss_agg_mode 'seq-mean-token-sum-norm' (agg_loss :819-823: Σ l·m ÷
  T, T = loss_mask.shape[-1], no loss_scale_factor on this worker), use_dynamic_bsz: each micro-batch's loss × its
  rows / ppo_mini_batch_size (dp_actor.py:463-467): d(mini-batch loss)/d(l_bt) per token."""
  t = mask.shape[1]
  w = np.zeros(mask.shape)
  start = 0
  for n in micro_rows:
    w[start:start + n] = mask[start:start + n] / t * (n / mini_rows)
    start += n
  return w


def _verl091_token_sum(loss, mask, dp_ranks):
  """The verl 0.9.1 PyPI wheel core_algos.py:1176-1180 'token-sum': masked_sum · dp_size per micro-batch, each
  micro-batch backpropagated unscaled (engine/fsdp/transformer_impl.py:760-767), gradients averaged over dp."""
  dp = len(dp_ranks)
  total = 0.0
  for micro_batches in dp_ranks:
    total += sum((loss[sl] * mask[sl]).sum() * dp for sl in micro_batches)
  return total / dp


def test_token_sum_legacy_dynamic_bsz_is_not_a_constant_factor_and_verl091_token_sum_is_ours():
  from rljax.objectives import token_sum  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(3)
  b, t = 8, 6
  mask = (rng.random((b, t)) < 0.8).astype(np.float64)
  mask[:, 0] = 1.0
  loss = rng.normal(size=(b, t))
  with jax.enable_x64(True):
    num, den = token_sum(jnp.asarray(loss), jnp.asarray(mask))
  ours = float(num) / float(den)
  np.testing.assert_allclose(ours, (loss * mask).sum(), rtol=1e-13)
  # verl 0.9.1 'token-sum' on 2 dp ranks, uneven micro-batches: = ours
  ranks = [[slice(0, 3), slice(3, 4)], [slice(4, 5), slice(5, 8)]]
  np.testing.assert_allclose(_verl091_token_sum(loss, mask, ranks), ours, rtol=1e-13)
  # legacy dp_actor: fixed micro-batches of 2 rows (gradient_accumulation 4): one factor for every token
  fixed = _verl07_legacy_sum_norm_grad_weights(mask, (2, 2, 2, 2), b)
  ratios = fixed[mask > 0]
  assert np.ptp(ratios) < 1e-15 and abs(ratios[0] - 1 / (t * 4)) < 1e-15
  # use_dynamic_bsz: token-budget micro-batches of 3, 1, 4 rows: weights 3/8, 1/8, 4/8 (÷ T): not one factor
  dyn = _verl07_legacy_sum_norm_grad_weights(mask, (3, 1, 4), b)
  assert np.ptp(dyn[mask > 0]) > 0.05 / t
  d = [x for x in _fid("token_sum").deviations if "learning-rate factor" in x]
  assert len(d) == 1 and "use_dynamic_bsz" in d[0] and "no constant factor gives theirs" in d[0]
  assert "÷ loss_scale_factor scaled by" not in d[0]
  assert "Thirteenth draw" in describe(ROWS["token_sum"])


def test_seq_mean_token_sum_norm_shares_the_dynamic_bsz_caveat():
  """The same legacy-worker weights (÷ T per micro-batch, × its rows ÷ N) apply to seq-mean-token-sum-norm: one
  factor with fixed micro-batches, none with token-budget ones (the lead's follow-up to the token_sum finding)."""
  rng = np.random.default_rng(5)
  mask = (rng.random((8, 6)) < 0.8).astype(np.float64)
  mask[:, 0] = 1.0
  assert np.ptp(_verl07_legacy_sum_norm_grad_weights(mask, (2, 2, 2, 2), 8)[mask > 0]) < 1e-15
  assert np.ptp(_verl07_legacy_sum_norm_grad_weights(mask, (3, 1, 4), 8)[mask > 0]) > 0.05 / 6
  d = [x for x in _fid("seq_mean_token_sum_norm").deviations if "a learning-rate factor" in x]
  assert len(d) == 1 and "use_dynamic_bsz" in d[0] and "no constant factor gives theirs" in d[0]
