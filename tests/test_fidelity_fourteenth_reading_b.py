"""Issue #51 item 4, fourteenth draw (seed 20261219), part b: an independent re-audit of five in-full rows.

Rows drawn (five of the ten of ``random.Random(20261219).sample(rows, 10)`` over the 109 rows):
sign_preserving_modulation, bapo, dara, kl_cov, code_tests.

Held (2): sign_preserving_modulation, dara.

- ``sign_preserving_modulation``: arXiv 2608.04007v1 (TurnSight) re-read whole at the cited offsets of the stored
  text (Preliminaries eq. (1), 'Execution-Conditioned Hindsight Construction', 'Turn-Level Aggregation',
  'Multi-Lookahead Teacher Selection', 'Group-Normalized Weight Construction', 'Advantage Integration',
  'Implementation Details', Appendix B Table 4 and 'Prompt-Group Normalization'). Its code
  (github.com/quchangle1/TurnSight, linked from the abstract) is still in no store here (fetch: no snapshot;
  find_repos: only an unrelated TarunB1006/TurnSight). Checked below against a float64 transcription of
  δ̂ = (δ̄* − μ_q)/(σ_q + ε), w = 1 + ε_w tanh(sign(A) δ̂), Ã = A[(1 − λ) + λw]: equal when every turn holds one
  policy token (the token pool is then the turn pool), and different with multi-token turns (the recorded
  deviation is real).
- ``dara``: zhaihaotian/DARA@04591020 math/rdgdpo/advantages.py (standardize, normalize_responses,
  support_statistics, compute_advantages 'rdgdpo'), verl_adapter.py (epsilon forced to 1e-6),
  runtime/overlay/verl/trainer/config/ppo_trainer.yaml (algorithm.rdgdpo: w_max 5, epsilon 1e-6, tau 1e-8,
  calibration positive), scripts/train.py (dara_asym / dara_sym, --w-max 5, group size 16, prompt batch 512,
  filter_groups seq_reward), runtime/reward.py (correctness + length ≤ LENGTH_LIMIT 4000 tokens, score their sum:
  no gate). Checked below against a float64 transcription of compute_advantages('rdgdpo'), both calibrations,
  with and without the w_max cap binding.

Not held (3), each error fixed in the record and checked here (no implementation changed, no implementation bug
found):

- ``kl_cov`` (OMITTED): PRIME-RL/Entropy-Mechanism-of-RL@88505792 verl/trainer/ppo/core_algos.py:458 takes
  max(1, int(N·k_percent/100)) tokens (float64); ours ``_count`` takes max(⌊N·ratio·(1 + 1e-6)⌋, 1) in float32.
  From about a million masked tokens ours penalises one token more at some N: N = 1,004,999 at 2e-4 (the 32b
  recipe) gives 201 here, 200 there; N = 992,499 at 2e-3 (the 7b recipe) 1985 against 1984. The clip_cov row lists
  this nudge; the kl_cov row did not. Their N is one GPU micro-batch's (≤ 30,720 tokens), ours the whole update
  batch's, which reaches such N. Deviation and read added.
- ``bapo`` (OMITTED): WooooDyy/BAPO@7287044 recipe/bapo/bapo_worker.py:58-63 sets the Hydra actor config to struct
  mode and hands that DictConfig to DataParallelBAPOActor (their verl 0.7.0.dev's own worker converts it with
  omega_conf_to_dataclass, fsdp_workers.py:795), and recipe/bapo/policy_loss.py:158-161 stores its metrics as
  ``pl_config._bapo_metrics_buffer``, a key the struct config lacks: omegaconf 2.3.0 (hydra-core 1.3's; installed
  in a scratch directory for this check) raises ConfigAttributeError "Key '_bapo_metrics_buffer' is not in struct"
  (hasattr is False, the assignment raises). The released recipe stops at its first actor update; the record
  described it as running. Also omitted: the loss aggregation on the cited path (token-mean over each
  micro-batch, actor.yaml:72, × micro-batch rows / the GPU's mini-batch rows, dp_actor.py:417-418). Read, two
  defaults, a deviation and the summary added. The bound search itself (mode='code') is checked below against a
  float64 transcription of policy_loss.py:21-62, 100-152 at the yaml's and the script's settings: equal.
- ``code_tests`` (OMITTED): verl v0.7.0 prime_code/__init__.py:23 takes
  ``completion.split('```python')[-1].split('```')[0]``; ours (``_FENCE``) the last *closed* ```python / ```py /
  bare block. The record gave only "no fence" and "bare / py blocks accepted"; it did not say that (a) a bare block
  after the code (a sample output) is the program here and the ```python block there, (b) an unclosed last
  ```python block (a completion cut at the length limit) runs there to the end of the text and is skipped here,
  (c) ours also takes ```python3 and any tag case, theirs, without ```python, the text before the first fence.
  Defaults' extract entry, a deviation and read added.

Observed, no error: in the authors' BAPO criterion (our mode='code') raising c_low raises the clipped negative
tokens' max(r, c_low)·|A|, so it can only lower pos/neg: policy_loss.py's first loop never meets the target part-way
and c_low ends at its start or at its max (checked in the bapo test below, theirs and ours alike).

Each numeric reference below is a float64 NumPy transcription of the cited lines, written for these tests.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np

from _fidelity import defaults as _defaults, fid as _fid, record as _record, train_batch as _train_batch


def _out(logp):
  from rljax.types import PolicyOutputs  # pylint: disable=import-outside-toplevel
  return PolicyOutputs(logp=jnp.asarray(logp), entropy=None)


# ----------------------------------------------------------------------------- sign_preserving_modulation (held)


def _turnsight(adv_tok, gaps_tok, turn_tok, mask, group, lam=0.5, eps_w=0.5, eps=1e-6):
  """arXiv 2608.04007v1 'Group-Normalized Weight Construction' and 'Advantage Integration', float64: per query, μ and
  σ (population) over the selected gaps at every valid policy token of all its rollouts; the turn's gap δ̄* (the
  mean of its tokens' gaps) normalised; w = 1 + ε_w tanh(sign(A) δ̂); Ã = A[(1 − λ) + λ w]."""
  out = np.zeros_like(adv_tok)
  for g in np.unique(group):
    rows = np.nonzero(group == g)[0]
    pool = np.concatenate([gaps_tok[i][mask[i] > 0] for i in rows])
    mu, sd = pool.mean(), pool.std()
    for i in rows:
      for t in range(adv_tok.shape[1]):
        if mask[i, t] <= 0:
          continue
        k = turn_tok[i, t]
        turn_mean = gaps_tok[i][(turn_tok[i] == k) & (mask[i] > 0)].mean()
        z = (turn_mean - mu) / (sd + eps)
        w = 1 + eps_w * math.tanh(np.sign(adv_tok[i, t]) * z)
        out[i, t] = adv_tok[i, t] * ((1 - lam) + lam * w)
  return out


def _ours_spm(adv_tok, signal, turn_ids, mask, group, turn_valid):
  from rljax.advantages import sign_preserving_modulation  # pylint: disable=import-outside-toplevel
  with jax.enable_x64(True):
    adv, _ = sign_preserving_modulation(jnp.asarray(adv_tok), jnp.asarray(signal), jnp.asarray(turn_ids),
                                        jnp.asarray(group), mask=jnp.asarray(mask), turn_valid=jnp.asarray(turn_valid))
  return np.asarray(adv)


def test_sign_preserving_modulation_equals_the_paper_with_one_token_per_turn_and_differs_with_longer_turns():
  rng = np.random.default_rng(1401)
  b, m = 6, 3
  group = np.array([0, 0, 0, 1, 1, 1], np.int32)
  # one policy token per turn, an observation token (mask 0, no turn) after each of the first two turns
  t = 5
  turn_ids = np.tile(np.array([0, -1, 1, -1, 2], np.int32), (b, 1))
  mask = (turn_ids >= 0).astype(np.float64)
  signal = rng.normal(scale=1.5, size=(b, m))
  adv_tok = rng.normal(size=(b, t)) * mask
  gaps_tok = np.where(turn_ids >= 0, np.take_along_axis(signal, np.maximum(turn_ids, 0), 1), 0.0)
  theirs = _turnsight(adv_tok, gaps_tok, turn_ids, mask, group)
  ours = _ours_spm(adv_tok, signal, turn_ids, mask, group, np.ones((b, m), bool))
  np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-14)
  assert not np.allclose(ours, adv_tok)  # the modulation acts
  # turns of 1, 2 and 4 policy tokens: their pool is token-weighted, ours counts each turn once (the deviation)
  turn_ids = np.tile(np.array([0, 1, 1, 2, 2, 2, 2], np.int32), (b, 1))
  mask = np.ones(turn_ids.shape)
  adv_tok = rng.normal(size=turn_ids.shape)
  gaps_tok = np.take_along_axis(signal, turn_ids, 1)  # each token carries its turn's selected gap
  theirs = _turnsight(adv_tok, gaps_tok, turn_ids, mask, group)
  ours = _ours_spm(adv_tok, signal, turn_ids, mask, group, np.ones((b, m), bool))
  assert np.max(np.abs(ours - theirs)) > 1e-3
  d = _defaults("sign_preserving_modulation")
  assert d["lam"] == ("0.5", "λ = 0.5") and d["eps_w"] == ("0.5", "ε_w = 0.5")
  assert any("token-level gaps (token-weighted)" in x for x in _fid("sign_preserving_modulation").deviations)


# ---------------------------------------------------------------------------------------------------- dara (held)


def _rdgdpo(scores, index, eps=1e-6, tau=1e-8, w_max=5.0, calibration="positive"):
  """zhaihaotian/DARA@04591020 math/rdgdpo/advantages.py compute_advantages('rdgdpo'), float64 (theirs float32):
  per-group, per-channel (r − mean)/(std_{ddof=1} + ε); density = share of groups with Σ|A_k| > τ; w = min(w_max,
  sqrt(max live density / density)) on live channels, 1 elsewhere; C = w·max(A, 0) + min(A, 0) (positive) or w·A;
  the sum over channels normalised over all responses by (x − mean)/(std_{ddof=1} + ε)."""
  groups = {}
  for row, uid in enumerate(index):
    groups.setdefault(int(uid), []).append(row)
  adv = np.zeros_like(scores)
  for rows in groups.values():
    v = scores[rows]
    adv[rows] = (v - v.mean(0)) / (v.std(0, ddof=1) + eps)
  active = np.stack([np.abs(adv[rows]).sum(0) > tau for rows in groups.values()])
  density = active.astype(np.float64).mean(0)
  w = np.ones(scores.shape[1])
  live = density > 0
  if live.any():
    w[live] = np.minimum(np.sqrt(density[live].max() / density[live]), w_max)
  cal = w * np.maximum(adv, 0) + np.minimum(adv, 0) if calibration == "positive" else w * adv
  s = cal.sum(-1)
  return (s - s.mean()) / (s.std(ddof=1) + eps) if len(s) > 1 else np.zeros_like(s), w


def test_dara_equals_the_authors_rdgdpo_with_and_without_the_cap():
  from rljax.advantages import dara  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(1402)
  for n_groups, cap_binds in ((8, False), (30, True)):
    g = 4
    index = np.repeat(np.arange(n_groups), g)
    correct = rng.integers(0, 2, size=(n_groups, g)).astype(np.float64)
    correct[:, :2] = [1.0, 0.0]  # every group varies in correctness: density 1
    length = np.ones((n_groups, g))
    length[0] = [1.0, 0.0, 1.0, 1.0]  # length varies in one group only: density 1 / n_groups
    if not cap_binds:
      length[1:3] = rng.integers(0, 2, size=(2, g))
      length[1, :2] = [1.0, 0.0]
      length[2, :2] = [0.0, 1.0]
    scores = np.stack([correct.reshape(-1), length.reshape(-1)], 1)
    perm = rng.permutation(len(index))  # rows of a group need not be contiguous
    scores, index = scores[perm], index[perm]
    for calibration in ("positive", "symmetric"):
      theirs, w = _rdgdpo(scores, index, calibration=calibration)
      assert (w[1] == 5.0) == cap_binds
      with jax.enable_x64(True):
        ours, info = dara(jnp.asarray(scores), jnp.asarray(index, jnp.int32), calibration=calibration)
      np.testing.assert_allclose(np.asarray(ours), theirs, rtol=1e-10, atol=1e-12)
      np.testing.assert_allclose(np.asarray(info["weights"]), w, rtol=1e-12)
  d = _defaults("dara")
  assert d["eps"][1].startswith("epsilon = 1e-6") and d["active_tol"] == ("1e-8", "tau = 1e-8")
  assert d["w_max"] == ("5.0", "w_max = 5.0") and d["std_ddof"] == ("1", "correction=1")


# ------------------------------------------------------------------------------------------------ kl_cov (not held)


def _prime_kl_cov(old, new, adv, mask, k_percent, coef):
  """PRIME-RL/Entropy-Mechanism-of-RL@88505792 core_algos.py:426-467 compute_policy_loss_kl_cov, float64: per-token
  loss −A·r, and on the max(1, int(N·k/100)) valid tokens of largest (A − Ā)(log π − mean log π) the loss
  −A·r + coef·|log r|; token-mean (agg_loss, verl_F.masked_mean). Returns (per-token loss, token-mean, count)."""
  log_r = new - old
  r = np.exp(log_r)
  loss = -adv * r
  valid = mask.reshape(-1) > 0
  idx = np.nonzero(valid)[0]
  a, lp = adv.reshape(-1)[valid], new.reshape(-1)[valid]
  cov = (a - a.mean()) * (lp - lp.mean())
  k = min(k_percent, len(a))
  n = max(1, int(len(cov) * k / 100))
  top = idx[np.argsort(-cov, kind="stable")[:n]]
  flat = loss.reshape(-1).copy()
  flat[top] = (-adv * r + coef * np.abs(log_r)).reshape(-1)[top]
  per_tok = flat.reshape(loss.shape)
  return per_tok, (per_tok * mask).sum() / mask.sum(), n


def test_kl_cov_equals_the_authors_code_on_a_micro_batch():
  from rljax.objectives import kl_cov  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(1403)
  b, t = 40, 50
  mask = (rng.random((b, t)) < 0.8).astype(np.float64)
  adv = np.repeat(rng.normal(size=(b, 1)), t, 1) + rng.normal(scale=0.1, size=(b, t))
  new = -rng.random((b, t)) * 4
  old = new + rng.normal(scale=0.2, size=(b, t))
  for k_percent in (0.2, 2.0):  # the 7b recipe's, and ten times it (N ≈ 1600: 3 and 32 tokens)
    per_tok, mean, n = _prime_kl_cov(old, new, adv, mask, k_percent, 1.0)
    with jax.enable_x64(True):
      loss, metrics = kl_cov(kl_cov_ratio=k_percent / 100, ppo_kl_coef=1.0)(_out(new), _train_batch(mask, adv, old))
    loss = np.asarray(loss)
    np.testing.assert_allclose(loss * mask, per_tok * mask, rtol=1e-12, atol=1e-14)
    assert math.isclose((loss * mask).sum() / mask.sum(), mean, rel_tol=1e-12)
    assert round(float(metrics["frac_penalized"]) * mask.sum()) == n > 1


def test_kl_cov_record_lists_the_count_nudge_and_ours_takes_one_token_more_at_a_million_tokens():
  from rljax.objectives import kl_cov  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(1404)
  for ratio, n_valid, theirs_n in ((2e-4, 1_004_999, 200), (2e-3, 992_499, 1984)):
    b, t = (n_valid + 1000) // 1000, 1000
    mask = np.ones((b * t,))
    mask[n_valid:] = 0.0
    mask = mask.reshape(b, t)
    adv = np.repeat(rng.normal(size=(b, 1)), t, 1)
    new = -rng.random((b, t)) * 3
    old = new - 0.01
    assert max(1, int(n_valid * (ratio * 100) / 100)) == theirs_n  # core_algos.py:458 with k_percent = ratio·100
    with jax.enable_x64(True):
      _, metrics = kl_cov(kl_cov_ratio=ratio, ppo_kl_coef=1.0)(_out(new), _train_batch(mask, adv, old))
    assert round(float(metrics["frac_penalized"]) * n_valid) == theirs_n + 1
  fid = _fid("kl_cov")
  dev = [x for x in fid.deviations if "1 + 1e-6" in x]
  assert len(dev) == 1 and "1,004,999 gives 201 against 200" in dev[0] and "992,499 gives 1985 against 1984" in dev[0]
  assert "core_algos.py:458" in fid.read and "1 + 1e-6" in fid.differences


# -------------------------------------------------------------------------------------------------- bapo (not held)


def _bapo_search(adv, ratio, mask, target, low, low_max, low_step, high, high_max, high_step, eps=1e-8):
  """WooooDyy/BAPO@7287044 recipe/bapo/policy_loss.py:21-62 (_compute_effective_advantage, one rank) and :100-152
  (compute_policy_loss_bapo's search), float64: r̃ = min(r, c_high) where A ≥ 0 else max(r, c_low); pos / neg sums
  of r̃·A·mask; ratio pos / (neg + eps), inf when neg ≤ 0; c_low raised by repeated addition to its max while the
  ratio is below target, then c_high."""
  def crit(lo, hi):
    eff = np.where(adv >= 0, np.minimum(ratio, hi), np.maximum(ratio, lo)) * adv * mask
    pos, neg = np.clip(eff, 0, None).sum(), (-np.clip(eff, None, 0)).sum()
    return math.inf if neg <= 0 else pos / (neg + eps)
  c = crit(low, high)
  while c < target and low < low_max and low_step > 0:
    low = min(low + low_step, low_max)
    c = crit(low, high)
    if c >= target:
      break
  while c < target and high < high_max and high_step > 0:
    high = min(high + high_step, high_max)
    c = crit(low, high)
    if c >= target:
      break
  return low, high, c


def test_bapo_code_mode_equals_the_authors_search_at_the_yaml_and_script_settings():
  from rljax.control import bapo  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(1405)
  settings = {"yaml": (1.0, (0.6, 0.8), (1.2, 2.0), 0.05, 0.05), "script": (0.5, (0.8, 0.95), (1.2, 2.0), 0.05, 0.1)}
  seen = set()
  for shift in np.linspace(-0.45, 0.15, 61):
    b, t = 16, 30
    mask = (rng.random((b, t)) < 0.9).astype(np.float64)
    adv = np.repeat(rng.normal(scale=0.3, size=(b, 1)) + shift, t, 1)
    ratio = np.exp(rng.normal(scale=0.6, size=(b, t)))
    for name, (rho0, lr, hr, ls, hs) in settings.items():
      lo, hi, c = _bapo_search(adv, ratio, mask, rho0, lr[0], lr[1], ls, hr[0], hr[1], hs)
      ctl = bapo(rho0, low_range=lr, high_range=hr, low_step=ls, high_step=hs, mode="code")
      with jax.enable_x64(True):
        o_lo, o_hi, o_c, signal = ctl.choose(jnp.asarray(adv), jnp.asarray(ratio), jnp.asarray(mask))
      assert bool(signal)
      assert math.isclose(float(o_lo), lo, abs_tol=1e-12) and math.isclose(float(o_hi), hi, abs_tol=1e-12)
      assert float(o_c) == c or math.isclose(float(o_c), c, rel_tol=1e-12)
      seen.add((name, round(lo, 6), round(hi, 6)))
  assert len(seen) >= 6 and any(1.2 < h < 2.0 for _, _, h in seen)  # several stops, the upper loop in between
  # raising c_low raises the negative tokens' max(r, c_low)·|A|, so it can only lower pos/neg: the code's first loop
  # never meets the target part-way, c_low ends at its start or at its max (theirs and ours alike)
  assert {lo for n, lo, _ in seen if n == "yaml"} == {0.6, 0.8}
  assert {lo for n, lo, _ in seen if n == "script"} == {0.8, 0.95}


def test_bapo_record_says_the_released_recipe_raises_at_its_first_loss_call():
  fid = _fid("bapo")
  assert "bapo_worker.py:58-63" in fid.read and "policy_loss.py:158-161" in fid.read
  assert "'_bapo_metrics_buffer' is not in struct" in fid.read and "omega_conf_to_dataclass" in fid.read
  d = _defaults("bapo")
  ours, theirs = d["runs as released"]
  assert ours == "yes" and theirs.startswith("no: the first loss call raises ConfigAttributeError")
  ours, theirs = d["loss aggregation (not this controller's)"]
  assert "token-mean (actor.yaml:72" in theirs and "dp_actor.py:417-418" in theirs
  assert any(x.startswith("their released recipe does not run its loss") for x in fid.deviations)
  assert fid.differences.endswith("; raises as released")
  assert "Key '_bapo_metrics_buffer' is not in struct" in _record("bapo")


# -------------------------------------------------------------------------------------------- code_tests (not held)


def _verl_extract(completion):
  """volcengine/verl@v0.7.0 verl/utils/reward_score/prime_code/__init__.py:23."""
  return completion.split("```python")[-1].split("```")[0]


def test_code_tests_extraction_equals_verl_on_one_block_and_differs_where_the_record_now_says():
  from rljax.rewards import extract_code  # pylint: disable=import-outside-toplevel
  code = "def f(x):\n    return x + 1\n"
  one = f"Here it is:\n```python\n{code}```\nDone."
  assert extract_code(one) == _verl_extract(one).lstrip("\n") == code
  sample = f"```python\n{code}```\nExample output:\n```\n5\n```\n"
  assert _verl_extract(sample).strip() == code.strip() and extract_code(sample) == "5\n"
  cut = f"Let me write it.\n```python\n{code}"  # cut at the length limit: no closing fence
  assert _verl_extract(cut).strip() == code.strip() and extract_code(cut) is None
  earlier = f"```python\nprint(0)\n```\nBetter:\n```python\n{code}"
  assert _verl_extract(earlier).strip() == code.strip() and extract_code(earlier) == "print(0)\n"
  bare = f"The code:\n```\n{code}```\n"
  assert _verl_extract(bare) == "The code:\n" and extract_code(bare) == code
  assert extract_code(f"```Python3\n{code}```") == code and _verl_extract(f"```Python3\n{code}```") == ""
  fid = _fid("code_tests")
  dev = [x for x in fid.deviations if "unclosed last ```python block" in x]
  assert len(dev) == 1 and "a bare block after the code" in dev[0] and "skipped here" in dev[0]
  ours, theirs = _defaults("code_tests")["extract"]
  assert "last closed block tagged ```python / ```python3 / ```py or bare ```" in ours
  assert "to the end when that block is unclosed" in theirs and "the text before the first fence" in theirs
  assert "prime_code/__init__.py:23" in fid.read
