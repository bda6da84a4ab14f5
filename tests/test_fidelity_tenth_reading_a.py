"""Issue #51 item 4, tenth draw (seed 20261215), part a: an independent re-audit of five in-full rows.

Rows drawn: reinforce_pp, icepop, outcome_conditioned_baseline, token_sum, sign_preserving_modulation.

Held (3): reinforce_pp, token_sum, sign_preserving_modulation; their "= theirs" claims are checked below against
float64 NumPy transcriptions of the cited lines (verl 0.9.1 PyPI wheel / verl v0.7.0 for reinforce_pp and token_sum,
the TurnSight paper's equations for sign_preserving_modulation).

Not held (2), each error fixed in the record and checked here:

- ``icepop``: the record's k was "exp(old_log_probs − rollout_log_probs)" with no word on which distribution the
  two log-probs are taken under. In OpenRLHF v0.11.0 both are at the rollout temperature (models/actor.py:285,
  models/utils.py:139-141: the actor's logits ÷ rollout.temperature; train_ppo_ray.py:78: vLLM returns
  logprobs_mode='processed_logprobs', the log-prob of the temperature-scaled, top-p/top-k-truncated and
  renormalised distribution); rljax's logp_old and logp_behavior are untempered and untruncated. Equal at
  OpenRLHF's defaults (rollout.temperature 1.0, rollout.top_p 1.0, train_ppo_ray.py:398-399); at T ≠ 1 or
  top_p < 1 a token's k, and whether IcePop keeps it, differ. Neither setting was in the defaults.
- ``outcome_conditioned_baseline``: the record called scale='group' "ours" and listed neither std_ddof nor eps.
  arXiv 2602.10231 Sec. 4.3 forms Aˆ = r − bˆ "with optional variance normalization as in GRPO", and GRPO's σ
  (Sec. 3.1) is the population std + ϵ; ours divides by the ddof=1 stratum std + 1e-6 (std_ddof=0 gives the
  population form over the stratum).
"""
import math

import jax
import jax.numpy as jnp
import numpy as np

from _fidelity import ROWS, defaults as _defaults, log_softmax as _log_softmax, vllm_top_p as _vllm_top_p


# ----------------------------------------------------------------------------- reinforce_pp (held)


def _verl091_reinforce_pp_returns(r, m, gamma):
  """verl 0.9.1 PyPI wheel core_algos.py:716-725: the running return is carried through mask-0 tokens."""
  returns = np.zeros_like(r)
  running = np.zeros(r.shape[0])
  for t in reversed(range(r.shape[1])):
    new = r[:, t] + gamma * running
    returns[:, t] = new * m[:, t]
    running = new * m[:, t] + running * (1 - m[:, t])
  return returns


def _verl070_reinforce_pp_returns(r, m, gamma):
  """verl v0.7.0 core_algos.py:607-613: running_return reset after each mask-0 token (returns kept there)."""
  returns = np.zeros_like(r)
  running = np.zeros(r.shape[0])
  for t in reversed(range(r.shape[1])):
    running = r[:, t] + gamma * running
    returns[:, t] = running
    running = running * m[:, t]
  return returns


def _verl_masked_whiten(x, m):
  """verl utils/torch_functional.py masked_mean (÷ Σm + 1e-8), masked_var (unbiased), masked_whiten (+1e-8)."""
  mean = np.sum(x * m) / (m.sum() + 1e-8)
  var = np.sum((x - mean) ** 2 * m) / (m.sum() + 1e-8)
  var = var * m.sum() / (m.sum() - 1)
  return (x - mean) / np.sqrt(var + 1e-8)


def test_reinforce_pp_equals_verl_091_and_reset_is_v070():
  from rljax.advantages import reinforce_pp  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(20261215)
  b, t = 6, 11
  mask = rng.random((b, t)) < 0.7  # holes inside the responses (multi-turn observations)
  mask[:, 0] = True
  r = rng.normal(size=(b, t))
  m = mask.astype(float)
  for gamma in (1.0, 0.9):
    with jax.enable_x64(True):
      ours, info = reinforce_pp(jnp.asarray(r), jnp.asarray(mask), gamma=gamma)
      reset, _ = reinforce_pp(jnp.asarray(r), jnp.asarray(mask), gamma=gamma, reset_at_mask=True)
    ret091 = _verl091_reinforce_pp_returns(r, m, gamma)
    np.testing.assert_allclose(np.asarray(info["returns"]), ret091, atol=1e-12)
    # the deviation: verl's Σm + 1e-8 in the mean and the variance, ≤ 1e-8 / Σm relative
    np.testing.assert_allclose(np.asarray(ours), _verl_masked_whiten(ret091, m) * m, atol=1e-8)
    ret070 = _verl070_reinforce_pp_returns(r, m, gamma)
    np.testing.assert_allclose(np.asarray(reset), _verl_masked_whiten(ret070, m) * m, atol=1e-8)
    assert not np.allclose(np.asarray(ours), np.asarray(reset), atol=1e-3)  # the holes matter
  # hole-free masks: all three agree
  hole_free = np.arange(t)[None, :] < rng.integers(2, t + 1, size=(b, 1))
  with jax.enable_x64(True):
    a, _ = reinforce_pp(jnp.asarray(r), jnp.asarray(hole_free))
  hf = hole_free.astype(float)
  np.testing.assert_allclose(np.asarray(a), _verl_masked_whiten(_verl070_reinforce_pp_returns(r, hf, 1.0), hf) * hf,
                             atol=1e-8)
  d = _defaults("reinforce_pp")
  assert d["gamma"] == ("1.0", "algorithm.gamma = 1.0") and d["whiten_eps"][0] == "1e-8"


# ----------------------------------------------------------------------------- icepop (not held: fixed)


def _openrlhf_icepop_ppo(new, old, rollout, adv, low=0.5, high=5.0, eps=0.2):
  """OpenRLHF v0.11.0 openrlhf/models/loss.py:166-205, policy_loss_type 'ppo', dual_clip None, 'icepop'."""
  ratio = np.exp(np.clip(new - old, -20.0, 20.0))
  loss = -np.minimum(ratio * adv, np.clip(ratio, 1 - eps, 1 + eps) * adv)
  vllm_is = np.exp(old - rollout)
  vllm_is = vllm_is * ((vllm_is >= low) & (vllm_is <= high))
  return vllm_is * loss


def _icepop_case(seed=11, b=6, t=9, v=7):
  rng = np.random.default_rng(seed)
  z_train = rng.normal(size=(b, t, v)) * 2.0
  z_infer = z_train + rng.normal(size=(b, t, v)) * 0.9
  # the sampled token: the inference engine's argmax (inside any top-p nucleus)
  y = np.argmax(z_infer, -1) if seed % 2 else rng.integers(0, v, size=(b, t))
  mask = rng.random((b, t)) < 0.85
  mask[:, 0] = True
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  return rng, z_train, z_infer, y, mask, adv


def _pick(logp, y):
  return np.take_along_axis(logp, y[..., None], -1)[..., 0]


def test_icepop_equals_openrlhf_at_temperature_one_and_differs_at_their_other_settings():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  from rljax.types import PolicyOutputs, TrainBatch  # pylint: disable=import-outside-toplevel
  rng, z_train, z_infer, y, mask, adv = _icepop_case(seed=11)
  b, t = y.shape
  old = _pick(_log_softmax(z_train), y)          # rljax: logp_old, untempered
  behavior = _pick(_log_softmax(z_infer), y)     # rljax: logp_behavior, untempered and untruncated
  new = old + rng.normal(scale=0.3, size=(b, t))
  with jax.enable_x64(True):
    batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask), advantages=jnp.asarray(adv),
                       group_id=jnp.arange(b, dtype=jnp.int32), logp_old=jnp.asarray(old),
                       logp_behavior=jnp.asarray(behavior))
    ours, _ = O.ppo_clip(0.2, correction=O.icepop())(PolicyOutputs(logp=jnp.asarray(new)), batch)
  ours = np.asarray(ours)
  keep_ours = (np.exp(old - behavior) >= 0.5) & (np.exp(old - behavior) <= 5.0)
  assert (mask & ~keep_ours).any() and (mask & keep_ours).any()
  # OpenRLHF at its defaults (rollout.temperature 1.0, rollout.top_p 1.0): processed = raw log-probs, = ours
  np.testing.assert_allclose(ours[mask], _openrlhf_icepop_ppo(new, old, behavior, adv)[mask], rtol=1e-12,
                             atol=1e-12)
  # at another rollout temperature OpenRLHF's k is the ratio of the tempered probabilities (actor logits ÷ T and
  # vLLM's processed_logprobs at T): other tokens are kept
  for temp, top_p in ((0.6, 1.0), (1.0, 0.9)):
    old_t = _pick(_log_softmax(z_train / temp), y)
    roll_t = _pick(_log_softmax(_vllm_top_p(z_infer / temp, top_p)), y)
    k_t = np.exp(old_t - roll_t)
    keep_theirs = (k_t >= 0.5) & (k_t <= 5.0)
    assert (mask & (keep_theirs != keep_ours)).any(), (temp, top_p)
  # the fixed record names both settings and the deviation
  d = _defaults("icepop")
  assert "rollout.temperature" in d["temperature in k"][1] and "processed_logprobs" in d["temperature in k"][1]
  assert "untempered" in d["temperature in k"][0]
  assert "rollout.top_p" in d["top-p / top-k in k"][1]
  f = ROWS["icepop"].fidelity
  assert "processed_logprobs" in f.read and "train_ppo_ray.py:78" in f.read and "utils.py:139-141" in f.read
  assert "398-399" in f.read and "256-271" in f.read
  assert any("untempered" in x and "top_p < 1" in x for x in f.deviations)
  assert "rollout temperature" in f.placement


def test_icepop_topp_on_the_sampled_token_lowers_k():
  """With y inside the nucleus, vLLM's renormalised processed log-prob is log p_y − log Z_p ≥ log p_y: OpenRLHF's k
  shrinks by the nucleus mass Z_p (a token at k = 0.6 is dropped under top_p when Z_p < 0.83)."""
  z = np.log(np.array([[0.5, 0.3, 0.15, 0.05]]))
  proc = _log_softmax(_vllm_top_p(z, 0.75))  # nucleus {0.5, 0.3}: Z = 0.8
  assert math.isclose(float(np.exp(proc[0, 0])), 0.5 / 0.8, rel_tol=1e-12)
  k_ours, k_theirs = 0.6, 0.6 * 0.8
  assert 0.5 <= k_ours and not 0.5 <= k_theirs


# ----------------------------------------------------------------------------- outcome_conditioned_baseline


def _bae_ocb(r, outcome, gid):
  """arXiv 2602.10231 App. B Algorithm 1 lines 7-10: b = the mean of r over the group's rows with the same outcome,
  A = r − b (a singleton stratum: its own reward, A = 0)."""
  a = np.zeros_like(r)
  for g in np.unique(gid):
    for o in np.unique(outcome[gid == g]):
      sel = (gid == g) & (outcome == o)
      a[sel] = r[sel] - r[sel].mean()
  return a


def test_outcome_conditioned_baseline_paper_and_optional_normalization():
  from rljax.advantages import outcome_conditioned_baseline  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(2602)
  gid = np.repeat(np.arange(4), 8)
  outcome = rng.integers(0, 2, size=gid.shape[0])
  outcome[31] = 1 - outcome[24:31].max() if outcome[24:31].min() == outcome[24:31].max() else outcome[31]
  r = rng.normal(size=gid.shape[0])
  with jax.enable_x64(True):
    a, _ = outcome_conditioned_baseline(jnp.asarray(r), jnp.asarray(outcome), jnp.asarray(gid), num_groups=4)
    a_pop, _ = outcome_conditioned_baseline(jnp.asarray(r), jnp.asarray(outcome), jnp.asarray(gid), num_groups=4,
                                            scale="group", std_ddof=0)
    a_ddof1, _ = outcome_conditioned_baseline(jnp.asarray(r), jnp.asarray(outcome), jnp.asarray(gid), num_groups=4,
                                              scale="group")
  np.testing.assert_allclose(np.asarray(a), _bae_ocb(r, outcome, gid), atol=1e-12)
  theirs_norm = np.zeros_like(r)
  for g in range(4):
    for o in (0, 1):
      sel = (gid == g) & (outcome == o)
      if sel.sum():
        theirs_norm[sel] = (r[sel] - r[sel].mean()) / (r[sel].std(ddof=0) + 1e-6)
  np.testing.assert_allclose(np.asarray(a_pop), theirs_norm, atol=1e-9)
  # the default std_ddof=1 is not the paper's population σ
  assert not np.allclose(np.asarray(a_ddof1), theirs_norm, atol=1e-3)
  d = _defaults("outcome_conditioned_baseline")
  assert d["std_ddof (scale='group' only)"][0] == "1" and "population" in d["std_ddof (scale='group' only)"][1]
  assert d["eps (scale='group' only)"][0] == "1e-6"
  assert "optional variance normalization as in GRPO" in d["scale"][1]
  f = ROWS["outcome_conditioned_baseline"].fidelity
  assert "scale='group' (÷ stratum std + ε) is ours" not in f.deviations
  assert any("std_ddof=0 gives the population std" in x for x in f.deviations)
  assert "our option" not in f.differences and "std_ddof=0" in f.differences


# ----------------------------------------------------------------------------- token_sum (held)


def _verl070_sum_norm(l, m, loss_scale_factor=None):
  """verl v0.7.0 core_algos.py:819-823 agg_loss 'seq-mean-token-sum-norm'."""
  lsf = m.shape[-1] if loss_scale_factor is None else loss_scale_factor
  return np.sum(np.sum(l * m, -1)) / lsf


def _verl091_token_sum(l, m, dp_size=1):
  """verl 0.9.1 PyPI wheel core_algos.py:1176-1180 agg_loss 'token-sum': masked_sum(l, m) · dp_size."""
  return np.sum(np.where(m > 0, l, 0.0) * m) * dp_size


def test_token_sum_equals_verl_091_token_sum_over_devices_and_micro_batches():
  from rljax.objectives import token_sum  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(1176)
  b, t = 8, 12
  l = rng.normal(size=(b, t))
  m = (rng.random((b, t)) < 0.7).astype(float)
  m[3] = 0.0  # an empty row
  with jax.enable_x64(True):
    num, den = token_sum(jnp.asarray(l), jnp.asarray(m))
  ours = float(num) / float(den)
  assert float(den) == 1.0
  np.testing.assert_allclose(ours, np.sum(l * m), rtol=1e-12)
  # verl 0.9.1: 2 dp ranks × 2 micro-batches each, each micro-batch's loss backpropagated unscaled
  # (engine/fsdp/transformer_impl.py:760-767), FSDP averaging the ranks' gradients: the loss the update sees
  dp = 2
  ranks = np.split(np.arange(b), dp)
  per_rank = [sum(_verl091_token_sum(l[mb], m[mb], dp) for mb in np.split(rows, 2)) for rows in ranks]
  np.testing.assert_allclose(np.mean(per_rank), ours, rtol=1e-12)
  # v0.7.0: seq-mean-token-sum-norm with loss_scale_factor=1 is the formula; its default (None) divides by T
  np.testing.assert_allclose(_verl070_sum_norm(l, m, 1), ours, rtol=1e-12)
  np.testing.assert_allclose(_verl070_sum_norm(l, m), ours / t, rtol=1e-12)
  # the v0.7.0 legacy dp_actor (÷ T, × 1/gradient_accumulation per micro-batch, averaged over dp): a constant factor
  ga = 2
  legacy = np.mean([sum(_verl070_sum_norm(l[mb], m[mb]) / ga for mb in np.split(rows, ga)) for rows in ranks])
  np.testing.assert_allclose(legacy * t * ga * dp, ours, rtol=1e-12)
  assert _defaults("token_sum")["scale"][0] == "1"


# ----------------------------------------------------------------------------- sign_preserving_modulation (held)


def _turnsight(adv_tok, gap_tok, turn_of_tok, gid, lam=0.5, eps_w=0.5, eps=1e-6):
  """arXiv 2608.04007v1 'Group-Normalized Weight Construction' and 'Advantage Integration', App. B 'Prompt-Group
  Normalization': one μ, σ per query over the selected gaps at every valid policy-token position; δ̄* the turn mean;
  w = 1 + ε_w tanh(sign(A)·(δ̄* − μ)/(σ + ε)); Ã = A[(1 − λ) + λw]. σ population (ddof not stated)."""
  out = adv_tok.copy()
  valid = turn_of_tok >= 0
  for g in np.unique(gid):
    rows = gid == g
    pool = gap_tok[rows][valid[rows]]
    mu, sd = pool.mean(), pool.std()
    for i in np.where(rows)[0]:
      for k in np.unique(turn_of_tok[i][valid[i]]):
        sel = turn_of_tok[i] == k
        dbar = gap_tok[i][sel].mean()
        w = 1 + eps_w * np.tanh(np.sign(adv_tok[i][sel]) * (dbar - mu) / (sd + eps))
        out[i][sel] = adv_tok[i][sel] * ((1 - lam) + lam * w)
  return out


def _turns_case(seed, turn_len):
  rng = np.random.default_rng(seed)
  b, nturn = 8, 3
  gid = np.repeat(np.arange(2), 4)
  lens = np.full((b, nturn), turn_len) if np.isscalar(turn_len) else rng.integers(1, 5, size=(b, nturn))
  t = int(lens.sum(1).max()) + 1
  turn_ids = np.full((b, t), -1)
  for i in range(b):
    pos = 0
    for k in range(nturn):
      turn_ids[i, pos:pos + lens[i, k]] = k
      pos += lens[i, k]
  signal = rng.normal(size=(b, nturn))
  adv = rng.normal(size=b)
  return gid, turn_ids, signal, adv


def test_sign_preserving_modulation_equals_turnsight_when_every_turn_has_the_same_length():
  from rljax.advantages import sign_preserving_modulation  # pylint: disable=import-outside-toplevel
  for seed, turn_len, equal in ((4007, 3, True), (4008, None, False)):
    gid, turn_ids, signal, adv = _turns_case(seed, turn_len)
    mask = turn_ids >= 0
    adv_tok = np.where(mask, adv[:, None], 0.0)
    gap_tok = np.where(mask, np.take_along_axis(signal, np.clip(turn_ids, 0, 2), 1), 0.0)  # δ constant in a turn
    with jax.enable_x64(True):
      ours, _ = sign_preserving_modulation(jnp.asarray(adv), jnp.asarray(signal), jnp.asarray(turn_ids),
                                           jnp.asarray(gid), mask=jnp.asarray(mask), num_groups=2)
    theirs = _turnsight(adv_tok, gap_tok, turn_ids, gid)
    if equal:  # equal-length turns: the token pool is each turn repeated alike, so μ, σ are the per-turn ones
      np.testing.assert_allclose(np.asarray(ours), theirs, atol=1e-12)
    else:  # the record's deviation: token-weighted pool (theirs) vs each turn once (ours)
      assert not np.allclose(np.asarray(ours), theirs, atol=1e-6)
      np.testing.assert_array_equal(np.sign(np.asarray(ours)), np.sign(theirs))  # both keep the sign
  d = _defaults("sign_preserving_modulation")
  assert d["lam"] == ("0.5", "λ = 0.5") and d["eps_w"] == ("0.5", "ε_w = 0.5") and d["std"][0] == "population"
