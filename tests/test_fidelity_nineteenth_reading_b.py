"""Issue #51 item 4, nineteenth draw (seed 20261224), part b: an independent re-audit of five in-full rows.

Rows drawn (five of the ten of ``random.Random(20261224).sample(rows, 10)`` over the 109 rows):
implicit_progress_reward, seq_mean_token_sum, gspo, bapo, code_tests.

Held (2): ``seq_mean_token_sum`` (volcengine/verl@v0.7.0 core_algos.py:806-811 and the verl 0.9.1 PyPI wheel
core_algos.py:1181-1188 agg_loss as recorded; ours equals the 0.9.1 engine path, the micro-batches' sums ÷
global_batch_size, with no empty row, and differs as the record says with one), ``gspo`` (the TRL 1.9.0 PyPI
wheel grpo_trainer.py:3054-3091, 3124-3148 as recorded; ours equals its 'dapo' per-token loss and its 'grpo'
normaliser below). Not held (3), each error fixed in the record and checked here. No implementation was changed.

- ``bapo`` (OMITTED source and defaults): the paper was committed in the cited repository as paper.pdf
  (WooooDyy/BAPO@602d517, deleted at b1cd33c; = arXiv 2510.18927) and never read. Its §5 sets ρ₀ = 0.4 (the
  README's 0.5 'as used in the paper' is not the paper's), steps δ₁ = 0.05 (c_high) / δ₂ = 0.02 (c_low),
  temperature 0.6, lr 2e-6; its Algorithm 1 relaxes c_high first up to b⁺ and then c_low (the code: c_low first;
  ours mode='share': both in lock step); its Eq. 8 counts a clipped token at its clipped surrogate value, ours
  mode='share' drops it. The code's loops themselves are as recorded (mode='code' equals them at the script's
  settings below). Read, defaults, a 'search order' row and a deviation added.
- ``implicit_progress_reward`` (FALSE default): the record gave our policy log-probs as "logp_old (the sampling
  policy, recorded)". logp_old is the proximal policy recomputed by the trainer's policy forward on the rollout
  tokens (rljax/stages/_data.py:133-135 'proximal log-probs: ... recomputed on the rollout tokens',
  rljax/train/_inputs.py:3-4), not the sampler's recorded logp_behavior; in async runs it is a newer version than
  the sampler's, and a replay stage with logp_old='behavior' swaps in the sampler's log-probs for its rows
  (rljax/train/_phases.py:186-191). The default and the 'which log-probs' deviation reworded. Also OMITTED:
  scripts/tau2_bon8.sh, whose --token-agg mean --step-agg min the record lists first as theirs, does not run as
  released (its data/tau2/bon8/ rollouts are 'not hosted yet', data/README.md@b1253bdd; it fetches none); the
  WebShop rollouts were sampled at T = 0.7. A deviation added, the temperature row extended.
- ``code_tests`` (FALSE default, OMITTED deviation): the record said our program is "the last closed ```python /
  ```py / ``` block". rljax/rewards/_code.py:23 _FENCE is matched left to right by findall and cannot open at a
  fence with another tag (```text, ```bash), so that block's closing fence opens a "block": for
  'Sample:\\n```text\\n5\\n```\\n```python\\nprint(5)\\n```' ours extracts nothing (score 0) where verl's
  prime_code/__init__.py:23 runs 'print(5)'; with prose between the blocks the prose is run. An implementation
  bug, fixed after this draw by the lead (test_code_tests_other_tag_block_is_skipped_as_verl_skips_it below). The
  default amended and a deviation added.

Each numeric reference below is a float64 NumPy transcription of the cited lines, written for these tests.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rljax.control as C
import rljax.objectives as O
from rljax.advantages import implicit_progress_reward
from rljax.objectives import seq_mean_token_sum
from rljax.rewards._code import extract_code
from rljax.stages._data import StepData
from rljax.types import PolicyOutputs
from _fidelity import any_deviation as _any_dev
from _fidelity import defaults as _defaults, fid as _fid, record as _record, train_batch



# ----------------------------------------------------------------------------- implicit_progress_reward


def test_implicit_progress_reward_record_says_logp_old_is_recomputed_not_recorded():
  ours, _ = _defaults("implicit_progress_reward")["policy log-probs"]
  assert "recorded)" not in ours and "the sampling policy, recorded" not in ours.split("had said")[0]
  assert "proximal" in ours and "recomputed by the trainer's policy forward" in ours and "logp_behavior" in ours
  assert "async" in ours and "logp_old='behavior'" in ours
  assert _any_dev("implicit_progress_reward", "proximal policy (recomputed", "not the sampler's log-probs")
  assert "nineteenth draw" in _record("implicit_progress_reward")
  # the fact itself, from the field's own documentation (independent of the record)
  need = StepData.__dataclass_fields__["logp_old"].metadata
  text = " ".join(str(v) for v in need.values())
  assert "recomputed on the rollout tokens" in text and "policy forward" in text


def _score_one_pa(p_steps, r_steps, token_agg, beta=1.0):
  """deeplearning-wisc/progress-advantage@b1253bdd runners/tau2_bon.py _score_one, 'progress_advantage' branch:
  per action step β·(agg p − agg r), an empty span of either model counts as 0 for that model."""
  agg = {"sum": np.sum, "mean": np.mean}[token_agg]
  out = []
  for p, r in zip(p_steps, r_steps):
    pa = agg(p) if p.size else 0.0
    ra = agg(r) if r.size else 0.0
    out.append(beta * (pa - ra))
  return out


def test_implicit_progress_reward_step_sums_equal_their_token_sum_scores():
  rng = np.random.default_rng(19)
  lens = [3, 5, 2, 4]
  t = sum(lens)
  logp = -rng.uniform(0.05, 3.0, (1, t))
  logp_ref = -rng.uniform(0.05, 3.0, (1, t))
  with jax.enable_x64(True):
    rew, _ = implicit_progress_reward(jnp.asarray(logp), jnp.asarray(logp_ref), jnp.ones((1, t), bool), beta=0.7)
    rew = np.asarray(rew)[0]
  cuts = np.cumsum([0] + lens)
  ours_steps = [rew[a:b].sum() for a, b in zip(cuts[:-1], cuts[1:])]
  theirs = _score_one_pa([logp[0, a:b] for a, b in zip(cuts[:-1], cuts[1:])],
                         [logp_ref[0, a:b] for a, b in zip(cuts[:-1], cuts[1:])], "sum", beta=0.7)
  np.testing.assert_allclose(ours_steps, theirs, rtol=1e-12)
  # their scripts' token mean is not the step sum (the recorded deviation)
  theirs_mean = _score_one_pa([logp[0, a:b] for a, b in zip(cuts[:-1], cuts[1:])],
                              [logp_ref[0, a:b] for a, b in zip(cuts[:-1], cuts[1:])], "mean", beta=0.7)
  assert not np.allclose(ours_steps, theirs_mean)


# ----------------------------------------------------------------------------- seq_mean_token_sum


def _verl_agg_seq_mean_token_sum(loss, mask, global_batch_size=None, dp_size=1):
  """verl 0.9.1 PyPI wheel core_algos.py:1181-1188 (= v0.7.0 core_algos.py:806-811 without the dp check)."""
  seq = (loss * mask).sum(-1)
  seq_mask = (mask.sum(-1) > 0).astype(np.float64)
  if global_batch_size is None:
    global_batch_size = seq_mask.sum()
  return (seq * seq_mask).sum() / global_batch_size * dp_size


def _ours(loss, mask, micro):
  """Ours as chain runs it: the micro-batches' numerators over the whole batch's denominator."""
  with jax.enable_x64(True):
    _, den = seq_mean_token_sum(jnp.asarray(loss), jnp.asarray(mask))
    num = sum(float(seq_mean_token_sum(jnp.asarray(loss[s]), jnp.asarray(mask[s]))[0]) for s in micro)
  return num / float(den)


def test_seq_mean_token_sum_equals_verl_engine_path_without_empty_rows():
  rng = np.random.default_rng(1219)
  b, t = 8, 9
  loss = rng.normal(size=(b, t))
  mask = (rng.random((b, t)) < 0.7).astype(np.float64)
  mask[:, 0] = 1.0
  micro = [slice(0, 3), slice(3, 5), slice(5, 8)]
  theirs = sum(_verl_agg_seq_mean_token_sum(loss[s], mask[s], global_batch_size=b) for s in micro)
  np.testing.assert_allclose(_ours(loss, mask, micro), theirs, rtol=1e-12)
  # v0.7.0's legacy worker: each micro-batch ÷ its own rows, × its share of the rows (1/gradient_accumulation
  # with use_dynamic_bsz): equal here too (no empty row)
  legacy = sum(_verl_agg_seq_mean_token_sum(loss[s], mask[s]) * (s.stop - s.start) / b for s in micro)
  np.testing.assert_allclose(_ours(loss, mask, micro), legacy, rtol=1e-12)


def test_seq_mean_token_sum_with_an_empty_row_differs_as_recorded():
  rng = np.random.default_rng(7)
  b, t = 6, 5
  loss = rng.normal(size=(b, t))
  mask = np.ones((b, t))
  mask[2] = 0.0  # one empty row
  micro = [slice(0, 3), slice(3, 6)]
  engine = sum(_verl_agg_seq_mean_token_sum(loss[s], mask[s], global_batch_size=b) for s in micro)
  ours = _ours(loss, mask, micro)
  np.testing.assert_allclose(ours * (b - 1) / b, engine, rtol=1e-12)  # 1/n_non-empty here, 1/n_all there
  assert _any_dev("seq_mean_token_sum", "each row weighs 1/n_all there (ours: 1/n_non-empty)")


# ----------------------------------------------------------------------------- gspo


def _trl_gspo_per_token(new, old, adv_row, mask, eps_low, eps_high):
  """TRL 1.9.0 PyPI wheel grpo_trainer.py:3054-3091 (importance_sampling_level 'sequence', delta None)."""
  log_w = ((new - old) * mask).sum(-1) / np.maximum(mask.sum(-1), 1.0)
  coef_1 = np.exp(log_w)[:, None]
  coef_2 = np.clip(coef_1, 1 - eps_low, 1 + eps_high)
  return -np.minimum(coef_1 * adv_row[:, None], coef_2 * adv_row[:, None])


def test_gspo_equals_trl_sequence_level_loss():
  rng = np.random.default_rng(2507)
  b, t = 5, 7
  mask = (rng.random((b, t)) < 0.8).astype(np.float64)
  mask[:, 0] = 1.0
  old = -rng.uniform(0.1, 2.0, (b, t))
  new = old + rng.normal(scale=2e-3, size=(b, t))
  adv_row = rng.normal(size=b)
  adv = np.repeat(adv_row[:, None], t, 1)
  theirs = _trl_gspo_per_token(new, old, adv_row, mask, 3e-4, 4e-4) * mask
  with jax.enable_x64(True):
    ours, _ = O.gspo()(PolicyOutputs(logp=jnp.asarray(new)), train_batch(mask, adv, old))
    ours = np.asarray(ours)
  np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15)
  assert np.any(np.abs(np.exp(((new - old) * mask).sum(-1) / mask.sum(-1)) - 1) > 4e-4)  # the clip acts
  # loss_type 'dapo': Σ / num_items (= our token_mean); 'grpo': mean of row means (= our seq_mean_token_mean)
  np.testing.assert_allclose(ours.sum() / mask.sum(), theirs.sum() / mask.sum(), rtol=1e-12)
  grpo = ((theirs * mask).sum(-1) / np.maximum(mask.sum(-1), 1.0)).mean()
  np.testing.assert_allclose((ours.sum(-1) / mask.sum(-1)).mean(), grpo, rtol=1e-12)


# ----------------------------------------------------------------------------- bapo


def _bapo_released(ratio, adv, mask, target, lo, lo_max, lo_step, hi, hi_max, hi_step, eps=1e-8):
  """WooooDyy/BAPO@7287044 recipe/bapo/policy_loss.py:21-62, 100-152, literally (accumulated bounds)."""
  def pn(lo, hi):
    eff = np.where(adv >= 0, np.minimum(ratio, hi), np.maximum(ratio, lo)) * adv * mask
    p, n = np.clip(eff, 0, None).sum(), (-np.clip(eff, None, 0)).sum()
    return np.inf if n <= 0 else p / (n + eps)
  v = pn(lo, hi)
  while v < target and lo < lo_max and lo_step > 0:
    lo = min(lo + lo_step, lo_max)
    v = pn(lo, hi)
    if v >= target:
      break
  while v < target and hi < hi_max and hi_step > 0:
    hi = min(hi + hi_step, hi_max)
    v = pn(lo, hi)
    if v >= target:
      break
  return lo, hi, v


@pytest.mark.parametrize("seed,shift", [(0, -0.2), (0, -0.3), (2, -0.5), (5, 0.8), (11, -1.5)])
def test_bapo_code_mode_equals_the_released_loop_at_the_scripts_settings(seed, shift):
  rng = np.random.default_rng(seed)
  b, t = 8, 10
  adv = rng.normal(size=(b, t)) + shift
  logp_old = -rng.uniform(0.1, 2.0, (b, t))
  logp = logp_old + rng.normal(scale=0.5, size=(b, t))
  mask = rng.random((b, t)) < 0.85
  ratio = np.exp(np.clip(logp - logp_old, -20, 20))
  lo, hi, v = _bapo_released(ratio, adv, mask, 0.5, 0.8, 0.95, 0.05, 1.2, 2.0, 0.1)
  ctl = C.bapo(0.5, mode="code", low_range=(0.8, 0.95), high_range=(1.2, 2.0), low_step=0.05, high_step=0.1)
  with jax.enable_x64(True):
    s = ctl.update(ctl.init(), advantages=jnp.asarray(adv), logp=jnp.asarray(logp),
                   logp_old=jnp.asarray(logp_old), mask=jnp.asarray(mask))
  np.testing.assert_allclose([float(s.clip_low), float(s.clip_high)], [lo, hi], rtol=1e-6)
  if np.isfinite(v):
    np.testing.assert_allclose(float(s.balance), v, rtol=1e-5)


def test_bapo_record_defaults_are_the_released_values():
  d = _defaults("bapo")
  assert "1.0 (yaml); 0.5 (run_bapo_example.sh)" in d["rho0 (target)"][1]
  assert "(0.6, 0.8) (yaml); (0.8, 0.95) (script)" in d["low_range"][1]
  assert "0.05 / 0.1 (script)" in d["low_step / high_step"][1]
  assert "clip_ratio_c = 3" in d["dual clip"][1]


# ----------------------------------------------------------------------------- code_tests


def _verl_extract(completion):
  """volcengine/verl@v0.7.0 verl/utils/reward_score/prime_code/__init__.py:23."""
  return completion.split("```python")[-1].split("```")[0]


def test_code_tests_other_tag_block_is_skipped_as_verl_skips_it():
  """The bug this draw found, fixed: a ```text / ```bash block before the code used to desynchronise our fence
  regex (t1 extracted nothing, t2 the prose between the blocks); each block now pairs with its own closing fence."""
  t1 = "Sample:\n```text\n5\n```\n```python\nprint(5)\n```"
  assert _verl_extract(t1) == "\nprint(5)\n" and extract_code(t1) == "print(5)\n"
  t2 = "Run:\n```bash\npython a.py\n```\nThe code:\n```python\nprint(5)\n```\n"
  assert _verl_extract(t2) == "\nprint(5)\n" and extract_code(t2) == "print(5)\n"
  t3 = "```python\nprint(5)\n```\nOutput:\n```text\n5\n```\n"  # after the code: skipped by both
  assert extract_code(t3) == "print(5)\n" and _verl_extract(t3) == "\nprint(5)\n"
  t4 = "```json\n{}\n```\n```PY\nx = 1\n```\n```python\nunclosed"  # the last closed code block, any case
  assert extract_code(t4) == "x = 1\n"


def test_code_tests_record_states_the_fence_pairing_and_the_fix():
  ours, _ = _defaults("code_tests")["extract"]
  assert "fenced_blocks pairs each opening fence" in ours and "skipped whole" in ours and "_FENCE" not in ours
  assert _any_dev("code_tests", "is skipped by both", "a leading newline")
  assert not _any_dev("code_tests", "desynchronises _FENCE")
  assert "nineteenth draw" in _record("code_tests") and "fixed after that draw" in _record("code_tests")


def _paper_algorithm1_candidates(a_lo=0.6, b_lo=0.9, a_hi=1.2, b_hi=3.0, d1=0.05, d2=0.02):
  """BAPO paper (WooooDyy/BAPO@602d517 paper.pdf = arXiv 2510.18927) Algorithm 1 lines 9-17: the bounds tried in
  order when the condition is never met (c_high first by δ₁ while c_high + δ₁ ≤ b⁺, else c_low by δ₂, while
  c_low + δ₂ ≤ b⁻)."""
  lo, hi, out = a_lo, a_hi, [(a_lo, a_hi)]
  while lo + d2 <= b_lo + 1e-12:
    if hi + d1 <= b_hi + 1e-12:
      hi += d1
    else:
      lo += d2
    out.append((lo, hi))
  return out


def test_bapo_paper_search_order_and_values_differ_from_share_mode():
  paper = _paper_algorithm1_candidates()
  np.testing.assert_allclose(paper[1], (0.6, 1.25))
  np.testing.assert_allclose(paper[36], (0.6, 3.0))  # c_high reaches b⁺ before c_low moves
  np.testing.assert_allclose(paper[-1], (0.9, 3.0), atol=1e-9)
  low, high = C.bapo().grid()
  np.testing.assert_allclose([float(low[1]), float(high[1])], (0.65, 1.25), rtol=1e-6)  # ours: lock step
  assert not np.allclose([float(low[1]), float(high[1])], paper[1])


def test_bapo_share_mode_drops_clipped_tokens_that_eq8_counts():
  from rljax.control._controllers import bapo_positive_share  # pylint: disable=import-outside-toplevel
  adv = np.array([[1.0, 1.0, -1.0]])
  ratio = np.array([[1.0, 2.0, 1.0]])  # the second token is clipped at c_high = 1.2
  mask = np.ones_like(adv)
  # Eq. 8's per-token terms min(r·A, clip(r, c_low, c_high)·A): 1, 1.2, -1 -> positive share 2.2 / 3.2
  term = np.minimum(ratio * adv, np.clip(ratio, 0.6, 1.2) * adv)
  eq8 = term[term > 0].sum() / np.abs(term).sum()
  with jax.enable_x64(True):
    ours = float(bapo_positive_share(jnp.asarray(adv), jnp.asarray(ratio), jnp.asarray(mask), 0.6, 1.2))
  np.testing.assert_allclose(eq8, 2.2 / 3.2, rtol=1e-12)
  np.testing.assert_allclose(ours, 0.5, rtol=1e-12)  # the clipped token counts 0 here


def test_bapo_record_reads_the_paper():
  d = _defaults("bapo")
  assert "ρ₀ = 0.4" in d["rho0 (target)"][1]
  assert "0.02 / 0.05 (δ₂ for c_low, δ₁ for c_high" in d["low_step / high_step"][1]
  assert "c_high first, up to b⁺" in d["search order"][1]
  assert "temperature 0.6" in d["sampler"][1]
  assert "paper.pdf (WooooDyy/BAPO@602d517" in _fid("bapo").read
  assert _any_dev("bapo", "Algorithm 1", "(0.65, 1.25) where the paper's is (0.6, 1.25)", "Eq. 8")


def test_implicit_progress_reward_record_says_tau2_bon8_does_not_run_as_released():
  assert _any_dev("implicit_progress_reward", "tau2_bon8.sh", "does not", "run as released", "not hosted yet",
                  "webshop_bon8.sh")
  assert "T = 0.7" in _defaults("implicit_progress_reward")["log-prob temperature"][1]
