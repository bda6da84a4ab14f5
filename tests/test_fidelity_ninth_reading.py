"""Issue #51 item 4, ninth draw (seed 20261214): an independent re-audit of ten in-full rows.

Rows drawn (109 in-full rows): decoupled_ppo, entropic, dr_grpo, cpgd, gspo_token, entropy_gated_contrastive,
top_entropy_mask, code_tests, pspo, adaptive_kl.

Held (7): decoupled_ppo, entropic, dr_grpo, gspo_token, top_entropy_mask, pspo, adaptive_kl; their "= theirs"
claims are checked below against float64 NumPy transcriptions of the cited lines.

Not held (3), each error fixed in the record and checked here:

- ``cpgd``: the record said siiRL's clip_ratio_low / clip_ratio_high "default to" clip_ratio. siiRL@af00a771
  siirl/params/model_args.py:283-284 give them their own default 0.2 (not None), so the scripts' clip_ratio=0.2
  never reaches compute_policy_loss_cpgd's bounds (a clip_ratio set alone is ignored).
- ``code_tests``: the record said verl's compute_score with its own default continuous=False "gives 1 / 0". At
  v0.7.0 (and in the 0.9.1 PyPI wheel) a failing completion reaches ``return success, metadata_list`` with
  metadata_list unassigned: UnboundLocalError, never 0.
- ``entropy_gated_contrastive``: train_reasonmaxxer.py's other switches of the 'adv_ce' path (--variant fullseq,
  --separate_pos_neg_norm, --balance_pos_neg, --pos_only_decisions, --neg_prob_floor, --normalize_by_problem,
  --adaptive_betaneg, --kl_on_generated_only, --kl_decision_weight) and our negative='unlikelihood' were not in
  the deviations.
"""
import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rljax
from rljax.catalog import describe

ROWS = {r.name: r for r in rljax.catalog()}


def _record(name):
  return describe(ROWS[name])


def _batch(seed, b=6, t=9, scale=0.5, **extra):
  from rljax.types import TrainBatch  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(seed)
  mask = rng.random((b, t)) < 0.8
  mask[:, 0] = True
  old = -rng.random((b, t)) * 2 - 0.05
  new = old + rng.normal(scale=scale, size=(b, t))
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  with jax.enable_x64(True):  # float64 arrays, kept after the context
    extra = {k: (jax.tree_util.tree_map(jnp.asarray, v)) for k, v in extra.items()}
    batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask), advantages=jnp.asarray(adv),
                       group_id=jnp.arange(b, dtype=jnp.int32), logp_old=jnp.asarray(old), **extra)
  return batch, old, new, adv, mask


def _out(new, entropy=None):
  from rljax.types import PolicyOutputs  # pylint: disable=import-outside-toplevel
  with jax.enable_x64(True):
    return PolicyOutputs(logp=jnp.asarray(new), entropy=None if entropy is None else jnp.asarray(entropy))


# ----------------------------------------------------------------------------- the three errors


def _siirl_cpgd(old, new, adv, clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=0.2):
  """siiRL@af00a771 core_algos.py:600-618 compute_policy_loss_cpgd (per-token loss) with model_args.py:282-284's
  config: clip_ratio_low / clip_ratio_high fall back to clip_ratio only when None (their defaults are 0.2)."""
  low = clip_ratio_low if clip_ratio_low is not None else clip_ratio
  high = clip_ratio_high if clip_ratio_high is not None else clip_ratio
  clipped = np.where(adv > 0, np.minimum(new, math.log(1 + high) + old), np.maximum(new, math.log(1 - low) + old))
  return -clipped * adv


def test_cpgd_siirl_bounds_ignore_clip_ratio():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  batch, old, new, adv, mask = _batch(51)
  with jax.enable_x64(True):
    ours02, _ = O.cpgd(0.2, drift_coef=0.0)(_out(new), batch)
    ours03, _ = O.cpgd(0.3, drift_coef=0.0)(_out(new), batch)
  # the PG value: ours = theirs + A·log π_old (the record's "same gradient, a different logged value")
  theirs_default = _siirl_cpgd(old, new, adv) + adv * old
  np.testing.assert_allclose(np.asarray(ours02)[mask], theirs_default[mask], rtol=1e-12, atol=1e-12)
  # a clip_ratio=0.3 set alone leaves siiRL at 0.2 / 0.2: ours eps_low=0.2, not 0.3
  theirs_cr03 = _siirl_cpgd(old, new, adv, clip_ratio=0.3) + adv * old
  np.testing.assert_allclose(np.asarray(ours02)[mask], theirs_cr03[mask], rtol=1e-12, atol=1e-12)
  assert not np.allclose(np.asarray(ours03)[mask], theirs_cr03[mask])
  f = ROWS["cpgd"].fidelity
  eps = dict((k, (o, t)) for k, o, t in f.defaults)["eps_low / eps_high"][1]
  assert "default to it" not in eps and "283-284" in eps and "clip_ratio_high 0.2" in eps
  assert any("clip_ratio moves neither" in d for d in f.deviations)


class _StubApps:
  """Stands in for prime_code.utils.check_correctness: per-case pass/fail from a list."""

  def __init__(self, passes):
    self.passes = passes

  def __call__(self, in_outs, generation, timeout, debug):
    del generation, timeout, debug
    idx = [int(x) for x in in_outs["inputs"]]
    return [self.passes[i] for i in idx], [{}]


def _verl_prime_code(completion, test_cases, check, continuous=False):
  """Transcription of verl v0.7.0 verl/utils/reward_score/prime_code/__init__.py:21-73 (the 0.9.1 wheel's is the
  same file), with the check injected; Python's own scoping gives the UnboundLocalError."""
  solution = completion.split("```python")[-1].split("```")[0]
  try:
    try:
      res, metadata = check(in_outs=test_cases, generation=solution, timeout=5, debug=False)
      metadata = dict(enumerate(metadata))[0]
      success = all(map(lambda x: x is True, res))
      if success:
        return success, metadata
    except Exception:  # pylint: disable=broad-except
      pass
    test_cases_list = []
    inputs = test_cases["inputs"]
    outputs = test_cases["outputs"]
    for i in range(len(inputs)):
      test_cases_list.append({"inputs": [inputs[i]], "outputs": [outputs[i]]})
    if continuous:
      metadata_list = []
      res_list = []
      for test_case_id, test_case in enumerate(test_cases_list):
        res, metadata = check(in_outs=test_case, generation=solution, timeout=10, debug=False)
        metadata_list.append(metadata)
        res_list.extend(res)
        if test_case_id >= 9:
          break
      res_count = len(res_list) if len(res_list) > 0 else 1
      success = sum(map(lambda x: x is True, res_list)) / res_count
  except Exception:  # pylint: disable=broad-except
    success = False
    metadata_list = None
  return success, metadata_list


def test_code_tests_verl_default_continuous_false_raises_on_failure():
  cases = {"inputs": [str(i) for i in range(12)], "outputs": ["x"] * 12}
  text = "```python\nprint(1)\n```"
  assert _verl_prime_code(text, cases, _StubApps([True] * 12))[0] is True
  with pytest.raises(UnboundLocalError):
    _verl_prime_code(text, cases, _StubApps([True, False] + [True] * 10))
  assert _verl_prime_code(text, cases, _StubApps([True, False] + [True] * 10), continuous=True)[0] == 0.9
  # a failure past the first 10 cases still scores 1.0 under continuous=True
  assert _verl_prime_code(text, cases, _StubApps([True] * 11 + [False]), continuous=True)[0] == 1.0
  f = ROWS["code_tests"].fidelity
  score = dict((k, t) for k, _, t in f.defaults)["score"]
  assert "gives 1 / 0" not in score and "UnboundLocalError" in score
  assert any("UnboundLocalError" in d for d in f.deviations)


def test_entropy_gated_contrastive_record_lists_adv_ce_switches_and_fullseq_is_tau_zero():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(7)
  b, t = 4, 8
  h_base = rng.random((b, t)) * 2.0
  rewards = np.array([1.0, 0.0, 1.0, 0.0])
  batch, _, new, _, mask = _batch(7, b=b, t=t, rewards=jnp.asarray(rewards), extras={"entropy_base": h_base})
  tau = 0.8
  with jax.enable_x64(True):
    gated, _ = O.entropy_gated_contrastive(tau)(_out(new), batch)
    full, _ = O.entropy_gated_contrastive(0.0)(_out(new), batch)
  # the code's adv_ce per-token loss at |A| = 1: CE·A on the gate (H_base > τ), A = +1 correct / −1 wrong
  a = np.where(rewards > 0.5, 1.0, -1.0)[:, None]
  theirs = np.where((h_base > tau) & mask, -new * a, 0.0)
  np.testing.assert_allclose(np.asarray(gated), theirs, rtol=1e-12, atol=1e-12)
  # --variant fullseq (every generated token) ≈ tau=0.0 here
  np.testing.assert_allclose(np.asarray(full), np.where(mask, -new * a, 0.0), rtol=1e-12, atol=1e-12)
  devs = " ".join(ROWS["entropy_gated_contrastive"].fidelity.deviations)
  for switch in ("--variant fullseq", "--separate_pos_neg_norm", "--balance_pos_neg", "--pos_only_decisions",
                 "--neg_prob_floor", "--normalize_by_problem", "--adaptive_betaneg", "--kl_on_generated_only",
                 "--kl_decision_weight", "unlikelihood"):
    assert switch in devs, switch


# ----------------------------------------------------------------------------- the held rows' "= theirs" claims


def test_decoupled_ppo_equals_areal_with_rejection_sampling():
  """AReaL@4aef98d8 functional.py:185-545 (token level, metric ratio, action mask, upper 5.0) with c_clip 3."""
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(29)
  b, t = 6, 9
  batch0, prox, new, adv, mask = _batch(29, b=b, t=t)
  behav = prox + rng.normal(scale=1.2, size=(b, t))
  with jax.enable_x64(True):
    batch = dataclasses.replace(batch0, logp_behavior=jnp.asarray(behav))
  eps, c = 0.4, 3.0
  w = np.exp(prox - behav)
  keep = mask & (w <= 5.0)
  ratio = np.where(keep, np.exp(new - prox), 0.0)
  l1, l2 = -adv * ratio, -adv * np.clip(ratio, 1 - eps, 1 + eps)
  pg = np.minimum(np.maximum(l1, l2), np.sign(adv) * c * adv)
  theirs = np.where(keep, pg * np.where(keep, w, 0.0), 0.0)
  with jax.enable_x64(True):
    ours, _ = O.decoupled_ppo(eps, dual_clip=c, behavior_cap=5.0)(_out(new), batch)
  assert (mask & ~keep).any()
  np.testing.assert_allclose(np.asarray(ours), theirs, rtol=1e-12, atol=1e-12)


def test_gspo_token_equals_verl_per_token():
  """verl v0.7.0 core_algos.py:1033-1049 compute_policy_loss_gspo (per-token pg_losses) at 3e-4 / 4e-4."""
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  batch, old, new, adv, mask = _batch(18, scale=0.01)
  m = mask.astype(float)
  seq = (np.sum((new - old) * m, -1) / np.maximum(m.sum(-1), 1))[:, None]
  s = np.exp(np.minimum(seq + 0 * new, 10.0))
  theirs = np.maximum(-adv * s, -adv * np.clip(s, 1 - 3e-4, 1 + 4e-4))
  with jax.enable_x64(True):
    ours, _ = O.gspo_token()(_out(new), batch)
  np.testing.assert_allclose(np.asarray(ours)[mask], theirs[mask], rtol=1e-12, atol=1e-12)


def test_pspo_equals_gr_pspo_patch():
  """GR-PSPO@16d89d53 grpotrainer.patch: per_token_loss = −((1 − α)·coef_1 + α)·A."""
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  batch, old, new, adv, mask = _batch(119)
  theirs = -((1 - 0.1) * np.exp(new - old) + 0.1) * adv
  with jax.enable_x64(True):
    ours, _ = O.pspo()(_out(new), batch)
  np.testing.assert_allclose(np.asarray(ours)[mask], theirs[mask], rtol=1e-12, atol=1e-12)


def test_dr_grpo_raw_equals_verl_norm_adv_false():
  """verl v0.7.0 core_algos.py:302-328 with norm_adv_by_std_in_grpo=False (singleton mean 0)."""
  from rljax.advantages import dr_grpo  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(20)
  gid = np.array([0, 0, 0, 1, 2, 2, 3, 3, 3, 3])
  r = rng.normal(size=gid.shape[0])
  theirs = r.copy()
  for g in np.unique(gid):
    sel = gid == g
    if sel.sum() > 1:
      theirs[sel] = r[sel] - r[sel].mean()
  with jax.enable_x64(True):
    raw, _ = dr_grpo(jnp.asarray(r), jnp.asarray(gid), num_groups=4, singleton="raw")
    zero, _ = dr_grpo(jnp.asarray(r), jnp.asarray(gid), num_groups=4)
  np.testing.assert_allclose(np.asarray(raw), theirs, atol=1e-12)
  assert np.asarray(zero)[3] == 0.0 and theirs[3] == r[3]


def test_top_entropy_mask_equals_trl_get_high_entropy_mask():
  """TRL v1.9.0 grpo_trainer.py:1413-1432: torch.quantile (linear) of the valid float32 entropies, keep H ≥ q."""
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  batch, old, new, _, mask = _batch(1396, b=5, t=11)
  ent = np.random.default_rng(3).random(mask.shape).astype(np.float32) * 3
  q = np.quantile(ent[mask].astype(np.float32), np.float32(1 - 0.2))
  keep = (ent * mask >= q) & mask
  inner = O.pspo()
  with jax.enable_x64(True):
    ours, _ = O.top_entropy_mask(inner, 0.2)(_out(new, ent), batch)
    base, _ = inner(_out(new, ent), batch)
  np.testing.assert_array_equal(np.asarray(ours) != 0, keep & (np.asarray(base) != 0))
  np.testing.assert_allclose(np.asarray(ours), np.where(keep, np.asarray(base), 0.0), atol=0)
  assert 0 < keep.sum() < mask.sum()


def test_adaptive_kl_equals_verl_update():
  """verl v0.7.0 core_algos.py:150-171 AdaptiveKLController.update, a few steps at its config (0.001, 0.1, 1e4)."""
  from rljax.control import adaptive_kl  # pylint: disable=import-outside-toplevel
  ctl = adaptive_kl(init_beta=1e-3, target=0.1, horizon=10000.0)
  state = ctl.init()
  beta = 1e-3
  for kl, n in ((0.05, 256), (0.3, 256), (0.11, 128), (0.0, 512)):
    beta *= 1 + np.clip(kl / 0.1 - 1, -0.2, 0.2) * n / 10000
    state = ctl.update(state, kl=kl, n_steps=n)
    np.testing.assert_allclose(float(state.beta), beta, rtol=1e-6)


def test_entropic_weights_are_one_plus_minus_alpha_up_to_the_current_error():
  """EntroPIC@2470730c dp_actor.py (README quote): α = clip(K_i·acc + K_p·(H − H*), ±1), acc += (H − H*) after use
  (micro = mini batch: scale 1); on p > 0.95 tokens positive rows weigh 1 + α, negative 1 − α. Ours includes the
  current error in the integral: w⁺ = 1 + α − K_i·(H* − H)."""
  from rljax.control import entropic  # pylint: disable=import-outside-toplevel
  ctl = entropic(target_entropy=0.1, kp=1.0, ki=0.01)
  state = ctl.init()
  acc = 0.0
  for h in (0.3, 0.25, 0.12, 0.05, 0.02, 0.2):
    alpha = float(np.clip(acc * 0.01 + (h - 0.1) * 1.0, -1.0, 1.0))
    acc += h - 0.1
    state = ctl.update(state, entropy=h)
    e = 0.1 - h
    np.testing.assert_allclose(float(state.pos_weight), 1 + alpha - 0.01 * e, atol=1e-6)
    np.testing.assert_allclose(float(state.neg_weight), 1 - alpha + 0.01 * e, atol=1e-6)
