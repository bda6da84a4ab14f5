"""Issue #51, twenty-first draw (seed 20261226), part a: an independent re-audit of five rows.

Rows drawn: kl_cov, tac, length_penalty, adhint, composite.

Held (3): tac, length_penalty, adhint.

- ``tac``, ``adhint``: abstract only, as recorded; the pages corpus still returns only the openings of
  arXiv 2606.25178v2 / 2512.13095v1-v2 (no method section); no code repository is stored. The record's seed facts
  and our stated rules are checked against the seed lines and our functions.
- ``length_penalty``: huggingface/open-r1@1416fa0c src/open_r1/rewards.py:132-202 (len_reward) read again; on one
  group of lengths ours equals a float64 transcription of it.

Not held (2), each fixed in the record (no implementation changed, no implementation bug found):

- ``kl_cov``: PRIME-RL/Entropy-Mechanism-of-RL@88505792 verl/trainer/ppo/core_algos.py:426-467 read again with
  dp_actor.py:417-455, ppo_trainer.yaml:51-52, recipe/dapo/config/dapo_trainer.yaml (defaults ppo_trainer),
  7b_kl_cov.sh / 32b_kl_cov.sh (every override key exists in the composed config: they start; they differ only in
  project name, max_token 30720 / 20480, k_percent 0.2 / 0.02, lr and total_epochs). Their loss is aggregated by
  agg_loss token-mean (core_algos.py:333-334) = verl_F.masked_mean, Σ x·m / (Σ m + 1e-8) (torch_functional.py:
  123-125 of their fork); ours Σ / n. The record OMITTED the 1e-8 (its aggregation default and deviations; the
  clip_cov row, same fork, lists it since the seventeenth draw). The per-token loss equals a float64 transcription
  of their function on one micro-batch (k_percent 0.2, 0.02, 1).

- ``composite``: the record's first deviation named the lenient switch as "composite(..., lenient=True)". That is
  the function's argument; the row's use is the stage ``rl.multi_reward=composite(weights=...)``, whose factory
  takes ``weights`` only (rljax/rewards/_safe.py _composite_stage). On the stage's path the components come from
  the rollout's reward guard, ``safe_reward(fn, lenient=exp.cfg.task.lenient_rewards)``
  (rljax/train/_rollout.py:101-107), ``TaskConfig.lenient_rewards`` default False (strict). The record said
  something FALSE of the stage (a switch it lacks) and OMITTED the real one. TRL's sum_then_normalize (TRL 1.9.0
  PyPI wheel grpo_trainer.py:2673-2730) checked numerically: the weighted sum with weights None equals ours, and the
  recorded inf example (inf, 1, 0, 0) gives advantages (0, 0, 0, 0) there.
"""
import dataclasses
import inspect
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _fidelity import defaults as _defaults, fid as _fid, record as _record, train_batch

SEED1 = pathlib.Path("/work/shared/seeds/001_5839a3671b0b4d92.txt")


# ----------------------------------------------------------------------------------------------- kl_cov (held)


def _prime_kl_cov(old, new, adv, mask, k_percent, ppo_kl_coef):
  """PRIME-RL/Entropy-Mechanism-of-RL@88505792 core_algos.py:426-467 compute_policy_loss_kl_cov, float64: per-token
  −A·r; cov over the valid tokens (flattened row-major) of A and log π (current); the max(1, int(N·k/100)) largest
  cov take −A·r + coef·|log r|; agg token-mean. Ties are avoided by the data."""
  neg_kl = new - old
  ratio = np.exp(neg_kl)
  loss = -adv * ratio
  kl_loss = -adv * ratio + ppo_kl_coef * np.abs(neg_kl)
  valid = mask.reshape(-1) > 0
  idx = np.flatnonzero(valid)
  a = adv.reshape(-1)[idx]
  lp = new.reshape(-1)[idx]
  cov = (a - a.mean()) * (lp - lp.mean())
  k = min(k_percent, len(a))
  n = 0
  if k != 0:
    n = max(1, int(len(cov) * k / 100))
    top = idx[np.argsort(-cov, kind="stable")[:n]]
    flat = loss.reshape(-1).copy()
    flat[top] = kl_loss.reshape(-1)[top]
    loss = flat.reshape(loss.shape)
  return loss, (loss * mask).sum() / mask.sum(), n


def _out(logp):
  from rljax.types import PolicyOutputs  # pylint: disable=import-outside-toplevel
  return PolicyOutputs(logp=jnp.asarray(logp), entropy=None)


@pytest.mark.parametrize("k_percent", [0.2, 0.02, 1.0])
def test_kl_cov_equals_the_authors_function_on_one_micro_batch(k_percent):
  from rljax.objectives import kl_cov  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(2126)
  b, t = 64, 120
  mask = (rng.random((b, t)) < 0.85).astype(np.float64)
  adv = np.repeat(rng.normal(size=(b, 1)), t, 1)
  new = -rng.random((b, t)) * 5
  old = new + rng.normal(scale=0.3, size=(b, t))
  per_tok, mean, n = _prime_kl_cov(old, new, adv, mask, k_percent, 1.0)
  with jax.enable_x64(True):
    loss, metrics = kl_cov(kl_cov_ratio=k_percent / 100, ppo_kl_coef=1.0)(_out(new), train_batch(mask, adv, old))
  loss = np.asarray(loss)
  np.testing.assert_allclose(loss * mask, per_tok * mask, rtol=1e-12, atol=1e-14)
  assert math.isclose(float((loss * mask).sum() / mask.sum()), mean, rel_tol=1e-12)
  assert round(float(metrics["frac_penalized"]) * mask.sum()) == n >= 1


def test_kl_cov_their_token_mean_has_the_1e8_and_the_record_lists_it():
  """agg_loss token-mean (core_algos.py:333-334) = verl_F.masked_mean (torch_functional.py:123-125 of their fork):
  Σ x·m / (Σ m + 1e-8); ours Σ / n. On a 3-token micro-batch the relative gap is 1e-8/3."""
  from rljax.objectives import kl_cov, token_mean  # pylint: disable=import-outside-toplevel
  mask = np.array([[1.0, 1.0, 1.0, 0.0]])
  adv = np.full((1, 4), 0.7)
  new = np.array([[-1.0, -2.0, -0.5, -3.0]])
  old = new + np.array([[0.1, -0.2, 0.05, 0.0]])
  per_tok, _, _ = _prime_kl_cov(old, new, adv, mask, 20.0, 1.0)
  theirs = (per_tok * mask).sum() / (mask.sum() + 1e-8)
  with jax.enable_x64(True):
    loss, _ = kl_cov(kl_cov_ratio=0.2, ppo_kl_coef=1.0)(_out(new), train_batch(mask, adv, old))
    num, den = token_mean(loss, jnp.asarray(mask))
  ours = float(num / den)
  assert math.isclose(theirs / ours, 3 / (3 + 1e-8), rel_tol=1e-14)
  assert not math.isclose(ours, theirs, rel_tol=1e-10, abs_tol=0.0)
  f = _fid("kl_cov")
  agg = _defaults("kl_cov")["aggregation"]
  assert "Σ / n" in agg[0] and "(n + 1e-8)" in agg[1] and "torch_functional.py:125" in agg[1]
  dev = [x for x in f.deviations if "twenty-first draw" in x]
  assert len(dev) == 1 and "n/(n + 1e-8)" in dev[0] and "core_algos.py:457" in dev[0]
  assert "torch_functional.py:123-125" in f.read and "Twenty-first draw" in f.read


def test_kl_cov_record_defaults_are_the_recipes():
  d = _defaults("kl_cov")
  assert d["kl_cov_ratio"][0] == "2e-4" or d["kl_cov_ratio"][0].startswith("2e-4")
  assert "0.02" in d["kl_cov_ratio"][1] and "0.2 %" in d["kl_cov_ratio"][1]
  assert d["ppo_kl_coef"] == ("1.0", "1")
  # 32b_kl_cov.sh:54 k_percent=0.02 and 7b_kl_cov.sh:54 k_percent=0.2 (percent): the fractions 2e-4 / 2e-3
  assert math.isclose(0.02 / 100, 2e-4) and math.isclose(0.2 / 100, 2e-3)
  assert "core_algos.py:426-467" in _fid("kl_cov").read and "dp_actor.py:417-426" in _fid("kl_cov").read


# ------------------------------------------------------------------------------------------ length_penalty (held)


def _open_r1_len_reward(lengths, correct):
  """huggingface/open-r1@1416fa0c src/open_r1/rewards.py:182-202 (after the correctness pass), float64: min / max
  over the call's completions; all equal → 0; λ = 0.5 − (len − min)/(max − min); correct → λ, else min(0, λ)."""
  lo, hi = min(lengths), max(lengths)
  if hi == lo:
    return [0.0] * len(lengths)
  out = []
  for n, ok in zip(lengths, correct):
    lam = 0.5 - (n - lo) / (hi - lo)
    out.append(float(lam if ok else min(0, lam)))
  return out


def test_length_penalty_equals_open_r1_on_one_group_and_per_group_on_two():
  from rljax.rewards import length_penalty  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(2127)
  lengths = rng.integers(20, 900, size=16).astype(np.float64)
  correct = rng.random(16) < 0.5
  with jax.enable_x64(True):
    r, _ = length_penalty(jnp.asarray(lengths), jnp.asarray(correct), jnp.zeros(16, jnp.int32), num_groups=1)
  np.testing.assert_allclose(np.asarray(r), _open_r1_len_reward(list(lengths), list(correct)), rtol=0, atol=1e-12)
  # two groups of 8: ours is per group (Kimi's per-problem form), open-r1's one call spans both
  gid = np.repeat([0, 1], 8)
  with jax.enable_x64(True):
    r2, _ = length_penalty(jnp.asarray(lengths), jnp.asarray(correct), jnp.asarray(gid, jnp.int32), num_groups=2)
  per_group = _open_r1_len_reward(list(lengths[:8]), list(correct[:8])) + \
      _open_r1_len_reward(list(lengths[8:]), list(correct[8:]))
  np.testing.assert_allclose(np.asarray(r2), per_group, rtol=0, atol=1e-12)
  assert not np.allclose(np.asarray(r2), _open_r1_len_reward(list(lengths), list(correct)))
  # all equal → 0 (rewards.py:188-189)
  with jax.enable_x64(True):
    r3, _ = length_penalty(jnp.full(4, 7.0), jnp.asarray([1, 0, 1, 0]), jnp.zeros(4, jnp.int32), num_groups=1)
  assert np.all(np.asarray(r3) == 0.0)


def test_length_penalty_record_cites_the_read_lines():
  f = _fid("length_penalty")
  assert "rewards.py:132-202" in f.read and "configs.py:234-239" in f.read
  d = _defaults("length_penalty")
  assert "characters" in d["length unit"][1] and "tokens" in d["length unit"][0]


# ----------------------------------------------------------------------------------------------- tac (held)


def test_tac_record_is_abstract_only_and_its_seed_facts_hold():
  f = _fid("tac")
  assert "abstract only" in _record("tac")
  seed = SEED1.read_text().splitlines()[96]  # L97
  assert "Transfer-Aware Curriculum (TAC)" in seed and "projected gradients" in seed and "2.8 points" in seed
  assert "<1% wall-clock overhead" in seed
  assert "v2 2.8" in f.read


def test_tac_transfer_update_is_the_recorded_ema_of_mean_cosines():
  from rljax.filters._curriculum import curriculum_init, transfer_observe  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(2128)
  g = rng.normal(size=(3, 11))
  state = curriculum_init(3, 300)
  state, step = transfer_observe(state, g @ g.T, np.ones(3, bool), 0.9)
  u = g / np.linalg.norm(g, axis=1, keepdims=True)
  cos = u @ u.T
  want = np.array([(cos[d].sum() - 1.0) / 2 for d in range(3)])
  np.testing.assert_allclose(step, want, rtol=1e-12)
  np.testing.assert_allclose(state.transfer, 0.1 * want, rtol=1e-12)


# --------------------------------------------------------------------------------------------- adhint (held)


def test_adhint_record_is_abstract_only_and_the_linear_schedule_is_ours():
  from rljax.hints._rules import adhint_fraction  # pylint: disable=import-outside-toplevel
  seed = SEED1.read_text().splitlines()[94]  # L95
  assert "ADHint" in seed and "prefix segments of complete reasoning trajectories" in seed
  assert "upon paper acceptance" in seed
  rec = _record("adhint")
  assert "abstract only" in rec and "the linear schedule is ours" in rec
  for p in (0.0, 0.25, 0.5):
    assert math.isclose(adhint_fraction(p, min_fraction=0.25, max_fraction=1.0), 0.25 + 0.75 * (1 - p))


# ------------------------------------------------------------------------------------------ composite (not held)


def _trl_sum_then_normalize(rewards_per_func, weights, g):
  """TRL 1.9.0 PyPI wheel grpo_trainer.py:2673-2730 (sum_then_normalize, scale_rewards 'group'), float32 sum:
  nansum of r·w per row, all-NaN rows NaN; group nanmean, nanstd (utils.py:857-888, Bessel); (r − mean)/(std +
  1e-4); nan_to_num 0."""
  r = np.asarray(rewards_per_func, np.float32)
  w = np.asarray(weights, np.float32)
  unscorable = np.isnan(r).all(1)
  tot = np.nansum(r * w[None, :], axis=1).astype(np.float32)
  tot[unscorable] = np.nan
  grp = tot.reshape(-1, g).astype(np.float64)
  with np.errstate(invalid="ignore"):
    mean = np.nanmean(grp, 1)
    var = np.nanmean((grp - mean[:, None]) ** 2, 1) * (np.sum(~np.isnan(grp), 1) / (np.sum(~np.isnan(grp), 1) - 1))
    std = np.sqrt(var)
    adv = (grp - mean[:, None]) / (std[:, None] + 1e-4)
  return tot, np.nan_to_num(adv.reshape(-1), nan=0.0)


@dataclasses.dataclass
class _Data:
  reward_components: np.ndarray
  reward_names: tuple
  valid: np.ndarray

  def require(self, key, _who):
    return getattr(self, key)


def test_composite_equals_trls_weighted_sum_with_weights_none():
  from rljax.rewards import composite  # pylint: disable=import-outside-toplevel
  from rljax.rewards._safe import _composite_stage  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(2129)
  comps = rng.integers(0, 3, size=(8, 3)).astype(np.float32) * 0.5
  trl, _ = _trl_sum_then_normalize(comps, [1.0, 1.0, 1.0], 4)
  total, _ = composite({f"r{k}": (lambda c, refs, k=k: comps[:, k]) for k in range(3)})(["x"] * 8)
  np.testing.assert_array_equal(total, trl)
  stage_total, _ = _composite_stage().fn(_Data(comps, ("r0", "r1", "r2"), np.ones(8, bool)))
  np.testing.assert_array_equal(stage_total, trl)


def test_composite_inf_example_silences_the_group_in_trl():
  _, adv = _trl_sum_then_normalize(np.array([[np.inf], [1.0], [0.0], [0.0]]), [1.0], 4)
  assert np.all(adv == 0.0)
  _, adv_ours_lenient = _trl_sum_then_normalize(np.array([[0.0], [1.0], [0.0], [0.0]]), [1.0], 4)
  assert np.any(adv_ours_lenient != 0.0)


def test_composite_record_names_the_stages_lenient_switch():
  from rljax.rewards import safe_reward  # pylint: disable=import-outside-toplevel
  from rljax.rewards._safe import _composite_stage  # pylint: disable=import-outside-toplevel
  from rljax.train._config import TaskConfig  # pylint: disable=import-outside-toplevel
  assert list(inspect.signature(_composite_stage).parameters) == ["weights"]
  with pytest.raises(TypeError):
    _composite_stage(lenient=True)  # pylint: disable=unexpected-keyword-arg
  assert TaskConfig().lenient_rewards is False
  src = pathlib.Path(__file__).resolve().parents[1].joinpath("rljax/train/_rollout.py").read_text()
  assert "lenient = exp.cfg.task.lenient_rewards" in src and "safe_reward(fn, lenient=lenient" in src
  # the guard (strict) raises on inf; lenient scores that entry 0
  bad = lambda c, refs: [np.inf, 1.0, 0.0, 0.0]  # noqa: E731
  with pytest.raises(ValueError):
    safe_reward(bad)(["x"] * 4)
  np.testing.assert_array_equal(safe_reward(bad, lenient=True)(["x"] * 4)[0], [0.0, 1.0, 0.0, 0.0])
  dev = [x for x in _fid("composite").deviations if "Twenty-first draw" in x]
  assert len(dev) == 1 and "task.lenient_rewards" in dev[0] and "default False" in dev[0]
  assert "which the stage lacks" in dev[0]
