"""Issue #51 per-row review, part a: an independent re-audit of five rows no earlier draw picked (not a random draw).

Rows: cispo, gmpo, gspo, ppo_clip, reinforce. Every cited source was re-read at the cited commit, with the functions
on its path, the config defaults that reach it, the launch scripts the source or its README uses and the caller.

Held (0 of 5). Every implementation matched its source at the stated settings (each "= theirs" is checked below
against a float64 NumPy transcription of the cited lines); no implementation changed, no implementation bug found.
Errors, each fixed in the record and tested here (FALSE: the record said something false; OMITTED: it left out
something true):

- ``ppo_clip``: FALSE pointer: the read cited volcengine/verl@v0.7.0 core_algos.py:907-975, which stops before the
  dual clip (:976-982) the record describes (the function is :906-997; 0.9.1 wheel :1285-1376). FALSE placement:
  TRL's old log-probs were said to be recomputed when "num_iterations > 1 or steps_per_generation >
  gradient_accumulation_steps"; grpo_trainer.py:2561-2564 tests gradient_accumulation_steps % (steps_per_generation
  × num_iterations) ≠ 0 (num_iterations 2, steps_per_generation 2, gradient_accumulation_steps 4 keeps the detached
  current log-probs).
- ``cispo``: OMITTED launch script: verl's own CISPO example (v0.7.0 examples/cispo_trainer/
  run_cispo_qwen2_5_0_5b_gsm8k.sh:13-14) sets clip_ratio_low=10, clip_ratio_high=0.2, an upper-only weight with cap
  1.2 (= cispo(eps_low=None, eps_high=0.2)); the record gave verl's form as two-sided (0.8, 1.2), the actor.yaml
  defaults, which differ from the script's on every token with r < 0.8; its KL loss (0.001 low_var_kl) was not listed.
  FALSE placement: TRL's detached old log-probs "when num_iterations = 1" (the condition above).
- ``gspo``: OMITTED default: the cited TRL docs/source/paper_index.md:89-95 sets gradient_accumulation_steps 1 and
  steps_per_generation 4 (:94-95, the GSPO paper's four mini-batches per rollout batch); the record took epsilon,
  epsilon_high, loss_type and beta from those lines but not these. FALSE placement: "detached current log-probs when
  num_iterations = 1", while at that setting 1 % 4 ≠ 0 and TRL recomputes them (the only setting where s ≠ 1).
  FALSE attribution: the ±20 token clamp and the −20 floor on log s were called "verl's clamps"; verl's
  compute_policy_loss_gspo (v0.7.0 core_algos.py:1033-1045) clamps log s at max 10 only.
- ``reinforce``: OMITTED placement: verl v0.7.0's default legacy dp_actor replaces old_log_prob by the detached
  current log-prob with one mini-batch and one epoch (dp_actor.py:430-432, 475-481), bypass mode included, so w = 1
  there (importance_weight=False gives it). OMITTED launch script: verl's reinforce-bypass example
  (examples/rollout_correction/run_with_rollout_corr.sh) runs rollout_is 'sequence', threshold 2.0,
  rollout_is_batch_normalize true (the record gave False), 4 mini-batches, rloo; its normalisation (the mean over
  the micro-batch's rows) is not tis(normalize=True)'s token-weighted whole-batch mean. The equality "tis(2.0,
  level='sequence') = verl's sequence weight" held only while logp_old is the current policy. Claim with no
  citation: "(the MiniRL form)": the only text of arXiv 2512.01374 read is its abstract (seed 000 L7), which names no
  MiniRL and says clipping becomes essential off-policy.
- ``gmpo``: FALSE: the ±20 / [−20, 10] log-ratio clamps were called verl geo_mean's; geo_mean has none (v0.7.0
  core_algos.py:1426-1427 comment the ±20 clamp out; 0.9.1 :1972-1973). OMITTED route: the repository's readme.md:27
  names GMPO in verl first (examples/gmpo_trainer: clip 0.4 / 0.4, geo_mean, rollout.n 5, 4 mini-batches); geo_mean
  takes torch.mean over each micro-batch's rows (v0.7.0: × 1/gradient_accumulation, the mini-batch's row mean; 0.9.1
  engine: no 1/gradient_accumulation, so K × that mean, K = 10 in the authors' verl script).
"""
import math

import jax
import jax.numpy as jnp
import numpy as np

from _fidelity import defaults as _defaults, fid as _fid, record as _record


def _train_batch(mask, adv, old=None, behavior=None):
  from rljax.types import TrainBatch  # pylint: disable=import-outside-toplevel
  b, t = mask.shape
  with jax.enable_x64(True):
    return TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask), advantages=jnp.asarray(adv),
                      group_id=jnp.arange(b, dtype=jnp.int32),
                      logp_old=None if old is None else jnp.asarray(old),
                      logp_behavior=None if behavior is None else jnp.asarray(behavior))


def _ours(term, new, batch, aggregate="token_mean"):
  """(per-token loss, aggregated loss, d aggregated / d log π) of one micro-batch holding the whole batch."""
  from rljax.types import PolicyOutputs  # pylint: disable=import-outside-toplevel
  with jax.enable_x64(True):
    m = jnp.asarray(batch.loss_mask, jnp.float64)

    def per_token(logp):
      return term(PolicyOutputs(logp=logp), batch)[0]

    def total(logp):
      loss = per_token(logp)
      if aggregate == "token_mean":
        return jnp.sum(loss * m) / jnp.sum(m)
      rows = jnp.sum(m, 1)
      has = rows > 0
      return jnp.sum(jnp.where(has, jnp.sum(loss * m, 1) / jnp.maximum(rows, 1.0), 0.0)) / jnp.sum(has)

    x = jnp.asarray(new)
    return np.asarray(per_token(x)), float(total(x)), np.asarray(jax.grad(total)(x))


def _data(seed, b=8, t=11, scale=0.5, lengths=None):
  rng = np.random.default_rng(seed)
  if lengths is None:
    mask = rng.random((b, t)) < 0.8
    mask[:, 0] = True
  else:
    mask = np.arange(t)[None, :] < np.asarray(lengths)[:, None]
  old = -rng.random((b, t)) * 2 - 0.05
  new = old + rng.normal(scale=scale, size=(b, t))
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  return rng, mask, old, new, adv


def _trl_recomputes_old_logps(gradient_accumulation_steps, steps_per_generation, num_iterations, use_vllm=False,
                              vllm_importance_sampling_correction=True):
  """TRL 1.9.0 grpo_trainer.py:2561-2576: the old log-probs are recomputed at generation, else None and
  per_token_logps.detach() is used (:3036-3037)."""
  generate_every = steps_per_generation * num_iterations
  return gradient_accumulation_steps % generate_every != 0 or (use_vllm and vllm_importance_sampling_correction)


# --------------------------------------------------------------------------------------------- ppo_clip (not held)


def _verl_vanilla(old, new, adv, mask, clip_low=0.2, clip_high=0.2, clip_c=3.0):
  """volcengine/verl@v0.7.0 core_algos.py:957-990 (the 0.9.1 wheel's :1336-1369), float64: per-token loss, its
  token-mean (agg_loss token-mean, one micro-batch) and the gradient w.r.t. log π (torch's: through r where the
  chosen branch is unclipped)."""
  nk = np.clip(new - old, -20.0, 20.0)
  r = np.exp(nk)
  pg1 = -adv * r
  pg2 = -adv * np.clip(r, 1 - clip_low, 1 + clip_high)
  c1 = np.maximum(pg1, pg2)
  g1 = np.where(pg1 >= pg2, -adv * r, 0.0)  # ties only inside the clip range, where both branches are −A r
  pg3 = -adv * clip_c
  c2 = np.minimum(pg3, c1)
  g2 = np.where(c1 <= pg3, g1, 0.0)
  loss = np.where(adv < 0, c2, c1)
  grad = np.where(adv < 0, g2, g1) * (np.abs(new - old) < 20)
  n = mask.sum()
  return loss, (loss * mask).sum() / n, grad * mask / n


def _trl_clip(old, new, adv, mask, epsilon=0.2, epsilon_high=None, delta=None):
  """TRL 1.9.0 grpo_trainer.py:3054-3091 (importance_sampling_level 'token') and :3139-3142 (dapo: Σ ÷
  num_items_in_batch, one process, one micro-step), float64."""
  eps_high = epsilon if epsilon_high is None else epsilon_high
  coef1 = np.exp(new - old)
  coef2 = np.clip(coef1, 1 - epsilon, 1 + eps_high)
  d_coef1 = coef1.copy()
  if delta is not None:
    d_coef1 = np.where(coef1 > delta, 0.0, coef1)
    coef1 = np.minimum(coef1, delta)
  l1, l2 = coef1 * adv, coef2 * adv
  loss = -np.minimum(l1, l2)
  inside = (np.exp(new - old) > 1 - epsilon) & (np.exp(new - old) < 1 + eps_high)
  grad = -np.where(l1 <= l2, d_coef1 * adv, np.where(inside, np.exp(new - old) * adv, 0.0))
  n = mask.sum()
  return loss, (loss * mask).sum() / n, grad * mask / n


def test_ppo_clip_equals_verl_vanilla_and_trl_and_the_record_points_at_the_dual_clip():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  _, mask, old, new, adv = _data(51)
  new[0, :4] = old[0, :4] + np.array([1.2, 1.5, 0.1, -0.9])  # r ≈ 3.3, 4.5: past verl's clip_ratio_c 3.0
  adv[0] = -abs(adv[0])  # A < 0 there: the dual clip acts
  mask[0, :4] = True
  batch = _train_batch(mask, adv, old)
  ours = _ours(O.ppo_clip(0.2, dual_clip=3.0), new, batch)
  theirs = _verl_vanilla(old, new, adv, mask)
  dual = (adv < 0) & (np.exp(new - old) > 3.0) & mask
  assert dual.sum() == 2
  np.testing.assert_allclose(ours[0][mask], theirs[0][mask], rtol=1e-13, atol=1e-13)
  assert math.isclose(ours[1], theirs[1], rel_tol=1e-12)
  np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-10, atol=1e-15)
  # without the dual clip (ours' default): those two tokens differ from verl, = TRL's dapo
  plain = _ours(O.ppo_clip(0.2), new, batch)
  np.testing.assert_allclose((plain[0] - theirs[0])[dual], (np.abs(adv) * (np.exp(new - old) - 3.0))[dual], rtol=1e-12)
  np.testing.assert_allclose(plain[0][mask & ~dual], theirs[0][mask & ~dual], rtol=1e-13, atol=1e-13)
  trl = _trl_clip(old, new, adv, mask)
  np.testing.assert_allclose(plain[0][mask], trl[0][mask], rtol=1e-13, atol=1e-13)
  np.testing.assert_allclose(plain[2], trl[2], rtol=1e-10, atol=1e-15)
  # TRL's delta (≥ 1 + epsilon_high) is dual_clip=delta, per token and in the gradient
  trl_delta = _trl_clip(old, new, adv, mask, delta=3.0)
  np.testing.assert_allclose(ours[0][mask], trl_delta[0][mask], rtol=1e-13, atol=1e-13)
  np.testing.assert_allclose(ours[2], trl_delta[2], rtol=1e-10, atol=1e-15)
  f = _fid("ppo_clip")
  assert "core_algos.py:906-997" in f.read and "dual clip at :976-982" in f.read and ":907-975" not in f.read.split(
      "Row review a")[0]
  assert "core_algos.py:1285-1376" in f.read
  assert "gradient_accumulation_steps % (steps_per_generation × num_iterations) ≠ 0" in f.placement
  assert "num_iterations > 1 or steps_per_generation >" not in f.placement
  # the counterexample the record now names: a reused generation batch that keeps the detached log-probs
  assert not _trl_recomputes_old_logps(4, 2, 2) and _trl_recomputes_old_logps(1, 1, 2)
  assert "Row review a" in _record("ppo_clip")


# ------------------------------------------------------------------------------------------------ cispo (not held)


def _trl_cispo(old, new, adv, mask, epsilon_high=5.0):
  """TRL 1.9.0 grpo_trainer.py:3054-3056, 3066, 3080-3082 (token level) and :3139-3142 (Σ ÷ num_items_in_batch)."""
  w = np.minimum(np.exp(new - old), epsilon_high)
  loss = -w * adv * new
  n = mask.sum()
  return loss, (loss * mask).sum() / n, -w * adv * mask / n


def _verl_cispo(old, new, adv, mask, clip_ratio_low, clip_ratio_high):
  """volcengine/verl@v0.7.0 core_algos.py:1486-1516 (the 0.9.1 wheel's :2064-2094), agg_loss token-mean."""
  r = np.exp(np.clip(new - old, -20.0, 20.0))
  w = np.clip(r, 1 - clip_ratio_low, 1 + clip_ratio_high)
  loss = -w * adv * new
  n = mask.sum()
  return loss, (loss * mask).sum() / n, -w * adv * mask / n


def test_cispo_equals_trl_and_both_verl_forms_and_the_record_names_verls_script():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  _, mask, old, new, adv = _data(52, scale=1.0)
  new[1, :3] = old[1, :3] + np.array([1.8, 2.0, -0.5])  # r ≈ 6.0, 7.4 > TRL's cap 5; r ≈ 0.61 < 0.8
  mask[1, :3] = True
  batch = _train_batch(mask, adv, old)
  r = np.exp(new - old)
  assert (mask & (r < 0.8)).sum() > 3 and (mask & (r > 5)).any()
  for ours_kw, theirs in (({}, _trl_cispo(old, new, adv, mask, 5.0)),  # our default = TRL's recommended 5
                          (dict(eps_low=0.2, eps_high=0.2), _verl_cispo(old, new, adv, mask, 0.2, 0.2)),  # actor.yaml
                          (dict(eps_low=None, eps_high=0.2), _verl_cispo(old, new, adv, mask, 10, 0.2))):  # its script
    ours = _ours(O.cispo(**ours_kw), new, batch)
    np.testing.assert_allclose(ours[0][mask], theirs[0][mask], rtol=1e-13, atol=1e-13)
    assert math.isclose(ours[1], theirs[1], rel_tol=1e-12)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-12, atol=1e-15)
  # verl's two forms differ exactly on the tokens with r < 0.8: the record's "verl: two-sided" was the yaml's only
  yaml_form = _verl_cispo(old, new, adv, mask, 0.2, 0.2)[2]
  script_form = _verl_cispo(old, new, adv, mask, 10, 0.2)[2]
  differs = np.abs(yaml_form - script_form) > 1e-15
  np.testing.assert_array_equal(differs, mask & (r < 0.8) & (adv != 0))
  f = _fid("cispo")
  assert "examples/cispo_trainer/run_cispo_qwen2_5_0_5b_gsm8k.sh:11-14" in f.read
  assert "actor.clip_ratio_low=10" in f.read and "actor.clip_ratio_high=0.2" in f.read
  d = _defaults("cispo")
  assert "clip_ratio_low=10, a bound of −9: no lower clip" in d["eps_low"][1]
  assert "kl_loss_coef 0.001, low_var_kl" in d["KL to the reference (not this term's)"][1]
  assert "paper_index.md:487-498" in d["advantage (not this term's)"][1]
  # TRL's ScaleRL advantage, scale_rewards 'batch' (grpo_trainer.py:2684-2706: r − the group mean, ÷ the batch's
  # nanstd, Bessel-corrected, trainer/utils.py:857-880, + 1e-4), 16 generations: the record's grpo(scale='batch')
  import rljax.advantages as A  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(5216)
  gid = np.repeat(np.arange(4), 16)
  rew = (rng.random(gid.size) < rng.random(4)[gid]).astype(np.float64)
  group_mean = np.array([rew[gid == g].mean() for g in gid])
  with jax.enable_x64(True):
    ours_adv = np.asarray(A.grpo(jnp.asarray(rew), jnp.asarray(gid), scale="batch", eps=1e-4)[0])
  np.testing.assert_allclose(ours_adv, (rew - group_mean) / (rew.std(ddof=1) + 1e-4), rtol=1e-6, atol=1e-6)
  assert any("eps_low=None, eps_high=0.2 (a cap of 1.2, not TRL's 5)" in x for x in f.deviations)
  assert "steps_per_generation × num_iterations" in f.placement and "when num_iterations = 1" not in f.placement
  assert "CISPO example upper-only cap 1.2 (eps_low=None, eps_high=0.2)" in f.differences


# ------------------------------------------------------------------------------------------------- gspo (not held)


def _trl_gspo_grpo(old, new, adv, mask, epsilon=3e-4, epsilon_high=4e-4):
  """TRL 1.9.0 grpo_trainer.py:3054-3059 (importance_sampling_level 'sequence': the masked mean of log r, count
  clamped at 1), :3066, :3083-3091, :3124-3128 (loss_type 'grpo': the mean of row means, ÷ gradient_accumulation_steps
  = 1), float64; A constant per row. Returns (per-row loss, loss, d loss / d log π)."""
  n = np.maximum(mask.sum(-1), 1.0)
  s = np.exp(((new - old) * mask).sum(-1) / n)
  a = adv[:, 0]
  coef2 = np.clip(s, 1 - epsilon, 1 + epsilon_high)
  row = -np.minimum(s * a, coef2 * a)
  inside = (s > 1 - epsilon) & (s < 1 + epsilon_high)
  d_row_d_s = -np.where(s * a <= coef2 * a, a, np.where(inside, a, 0.0))
  b = len(a)
  grad = (d_row_d_s * s / n)[:, None] * mask / b
  return row, row.mean(), grad


def test_gspo_equals_trl_sequence_level_and_the_record_has_the_papers_four_mini_batches():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  _, mask, old, new, adv = _data(53, b=10, scale=1e-3)  # sequence ratios within ~1e-3 of 1: both clip branches
  batch = _train_batch(mask, adv, old)
  ours = _ours(O.gspo(), new, batch, aggregate="seq_mean_token_mean")
  row, loss, grad = _trl_gspo_grpo(old, new, adv, mask)
  s = np.exp(((new - old) * mask).sum(-1) / mask.sum(-1))
  a = adv[:, 0]
  clipped = ((a > 0) & (s > 1 + 4e-4)) | ((a < 0) & (s < 1 - 3e-4))
  assert clipped.any() and (~clipped).any()
  np.testing.assert_allclose(ours[0][:, 0], row, rtol=1e-12, atol=1e-14)
  assert math.isclose(ours[1], loss, rel_tol=1e-12)
  np.testing.assert_allclose(ours[2], grad, rtol=1e-9, atol=1e-14)
  # TRL's defaults are on-policy on every update (s = 1, the clip never acts); the paper index's setting is not
  assert not _trl_recomputes_old_logps(gradient_accumulation_steps=1, steps_per_generation=1, num_iterations=1)
  assert _trl_recomputes_old_logps(gradient_accumulation_steps=1, steps_per_generation=4, num_iterations=1)
  on_policy = _ours(O.gspo(), old, batch, aggregate="seq_mean_token_mean")  # π_old = π_θ detached: s = 1
  np.testing.assert_allclose(on_policy[0][:, 0], -a, rtol=1e-12)
  # the ±20 token clamp (and the −20 floor) is ours: TRL and verl's compute_policy_loss_gspo (core_algos.py:1038-1045:
  # the masked mean of the unclamped log r, then clamp(max=10)) take a token at log r = −25 as it is
  i = int(np.flatnonzero(a > 0)[0])  # A > 0: below 1 − ε the unclipped branch −A s is the loss
  new2 = new.copy()
  new2[i, 0] = old[i, 0] - 25.0
  ours2 = _ours(O.gspo(eps_low=0.2, eps_high=0.2), new2, batch, aggregate="seq_mean_token_mean")[0][:, 0]
  n_i = mask[i].sum()
  verl_log_s = min(((new2[i] - old[i]) * mask[i]).sum() / n_i, 10.0)
  trl_row = _trl_gspo_grpo(old, new2, adv, mask, 0.2, 0.2)[0][i]
  assert math.exp(verl_log_s) < 0.8
  assert math.isclose(trl_row, -a[i] * math.exp(verl_log_s), rel_tol=1e-12)
  assert math.isclose(ours2[i], -a[i] * math.exp(verl_log_s + 5.0 / n_i), rel_tol=1e-12)
  f = _fid("gspo")
  assert any("clamps log s at max 10 only, v0.7.0 core_algos.py:1045" in x for x in f.deviations)
  assert "verl's clamps" not in f.differences and not any("(verl's clamps)" in x for x in f.deviations)
  assert "paper_index.md:83-99" in f.read and "gradient_accumulation_steps 1, steps_per_generation 4" in f.read
  d = _defaults("gspo")["optimizer steps per rollout batch"]
  assert "rl.num_minibatches=4, rl.updates_per_batch=1" in d[0] and "steps_per_generation 4: four" in d[1]
  assert "(the paper index's 1 % 4)" in f.placement and "when num_iterations = 1" not in f.placement
  assert any("rl.num_minibatches=4 with rl.updates_per_batch=1" in x for x in f.deviations)


# -------------------------------------------------------------------------------------------- reinforce (not held)


def _verl_bypass_reinforce(rollout, new, adv, mask, rollout_is=None, threshold=2.0, batch_normalize=False,
                           on_policy_legacy=False):
  """volcengine/verl@v0.7.0, one micro-batch, float64: dp_actor.py:478-481 (on_policy: old_log_prob = log_prob
  detached), core_algos.py:1893-1931 (bypass: rollout_log_prob = old_log_prob; the weights from the current
  log_prob, no_grad), rollout_corr_helper.py:367-430 (token: exp(clamp(log r, ±20)); sequence: exp(clamp(Σ log r,
  ±20)); × response_mask; clamp(max=threshold); batch normalisation: token ÷ the masked mean, sequence ÷ the mean of
  the per-row means over non-empty rows), core_algos.py:1785-1798 (−A·log π·w, agg_loss token-mean)."""
  if on_policy_legacy:
    rollout = new.copy()
  if rollout_is is None:
    w = np.ones_like(new)
  else:
    lr = new - rollout
    if rollout_is == "token":
      w = np.exp(np.clip(lr, -20, 20))
    else:
      w = np.repeat(np.exp(np.clip((lr * mask).sum(-1, keepdims=True), -20, 20)), new.shape[1], 1)
    w = np.minimum(w * mask, threshold)
    if batch_normalize:
      if rollout_is == "token":
        w = w / ((w * mask).sum() / mask.sum())
      else:
        rows = mask.sum(-1) > 0
        seq_w = (w * mask).sum(-1) / np.maximum(mask.sum(-1), 1)
        w = w / (seq_w[rows].mean())
  loss = -adv * new * w
  n = mask.sum()
  return loss, (loss * mask).sum() / n, -adv * w * mask / n


def test_reinforce_equals_verl_bypass_and_the_record_has_the_on_policy_replacement_and_the_example():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  rng, mask, _, new, adv = _data(54, lengths=[11, 9, 7, 11, 5, 8, 10, 6])
  rollout = new + rng.normal(scale=0.6, size=new.shape)  # the sampler's log-probs (train/inference mismatch)
  batch = _train_batch(mask, adv, behavior=rollout)
  w = np.exp(new - rollout)
  assert (mask & (w > 2.0)).any()
  ours_untruncated = _ours(O.reinforce(), new, batch)
  np.testing.assert_allclose(ours_untruncated[2], -adv * w * mask / mask.sum(), rtol=1e-12)
  for ours_kw, theirs_kw in ((dict(max_weight=2.0), dict(rollout_is="token")),
                             (dict(importance_weight=False), {}),
                             (dict(importance_weight=False), dict(rollout_is="token", on_policy_legacy=True)),
                             (dict(importance_weight=False), dict(rollout_is="sequence", on_policy_legacy=True,
                                                                  batch_normalize=True))):
    ours = _ours(O.reinforce(**ours_kw), new, batch)
    theirs = _verl_bypass_reinforce(rollout, new, adv, mask, **theirs_kw)
    np.testing.assert_allclose(ours[0][mask], theirs[0][mask], rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-12, atol=1e-15)
  # v0.7.0's on-policy replacement drops the correction the record's placement described: w = 1, not π_θ/π_rollout
  replaced = _verl_bypass_reinforce(rollout, new, adv, mask, rollout_is="token", on_policy_legacy=True)[2]
  corrected = _verl_bypass_reinforce(rollout, new, adv, mask, rollout_is="token")[2]
  assert np.abs(replaced - corrected).max() > 1e-3
  # the sequence weight with logp_old absent (the current policy): tis(2.0, level='sequence') = verl's
  seq = _ours(O.reinforce(importance_weight=False, correction=O.tis(2.0, level="sequence")), new, batch)
  np.testing.assert_allclose(seq[2], _verl_bypass_reinforce(rollout, new, adv, mask, rollout_is="sequence")[2],
                             rtol=1e-12, atol=1e-15)
  # their example's batch normalisation (the mean over rows) is not tis(normalize=True)'s (token-weighted): unequal
  # lengths make them differ; equal lengths make them equal
  example = _verl_bypass_reinforce(rollout, new, adv, mask, rollout_is="sequence", batch_normalize=True)[2]
  norm = _ours(O.reinforce(importance_weight=False, correction=O.tis(2.0, level="sequence", normalize=True)), new,
               batch)[2]
  assert np.abs(norm - example).max() > 1e-4
  full = np.ones_like(mask)
  eq_batch = _train_batch(full, adv, behavior=rollout)
  np.testing.assert_allclose(
      _ours(O.reinforce(importance_weight=False, correction=O.tis(2.0, level="sequence", normalize=True)), new,
            eq_batch)[2],
      _verl_bypass_reinforce(rollout, new, adv, full, rollout_is="sequence", batch_normalize=True)[2], rtol=1e-12)
  f = _fid("reinforce")
  assert "dp_actor.py:430-432, 475-481" in f.read and "run_with_rollout_corr.sh" in f.read
  assert "dp_actor.py:478-479" in f.placement and "so w = 1" in f.placement
  d = _defaults("reinforce")
  assert "1 on v0.7.0's legacy dp_actor with one mini-batch and one epoch" in d["importance weight"][1]
  assert "verl's reinforce example: true" in d["rollout_is_batch_normalize"][1]
  assert "= 4, ppo_epochs 1, rloo" in d["mini-batches per step (verl's example)"][1]
  assert not any("(the MiniRL form)" in x for x in f.deviations)
  assert any("replaces the rollout log-probs by the detached current ones" in x for x in f.deviations)
  assert any("equal while tis's train side logp_old is the current policy" in x for x in f.deviations)
  assert any("token-weighted mean over the whole batch" in x for x in f.deviations)


# ------------------------------------------------------------------------------------------------- gmpo (not held)


def _oat_gmpo_row(old, new, a, m, cliprange=0.4):
  """callsys/GMPO@205b2bf4 train_zero_math_gmpo.py:675-701, one sequence per micro-batch (its script), float64:
  (the row's loss −A·ρ, d loss / d log π)."""
  sgn = -1.0 if a >= 0 else 1.0
  diff = new - old
  sd = sgn * diff
  sdc = np.clip(sd, -cliprange, cliprange)
  lr = sgn * np.maximum(sd, sdc)
  keep = sd >= sdc  # torch.max picks the unclamped branch (ties: inside the range, gradient 1 either way)
  n = m.sum()
  ratio = np.exp(lr[m].sum() / n)
  return -a * ratio, np.where(m & keep, -a * ratio / n, 0.0)


def _verl_geo_mean_rows(old, new, adv, mask, clip_low=0.4, clip_high=0.4):
  """volcengine/verl@v0.7.0 core_algos.py:1425-1442 (the 0.9.1 wheel's :1971-1988), float64: the per-row losses
  (no log-ratio clamp; the masked means over Σ m + 1e-8)."""
  diff = new - old
  sgn = np.sign(adv)
  lr = sgn * np.minimum(sgn * diff, sgn * np.clip(diff, -clip_low, clip_high))
  n = mask.sum(-1)
  ratio = np.exp((lr * mask).sum(-1) / (n + 1e-8))
  a = (adv * mask).sum(-1) / (n + 1e-8)
  return -a * ratio


def test_gmpo_equals_the_authors_code_and_verl_geo_mean_and_the_clamps_are_ours():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  _, mask, old, new, adv = _data(55, b=8, scale=0.4)
  batch = _train_batch(mask, adv, old)
  ours = _ours(O.gmpo(), new, batch, aggregate="seq_mean_token_mean")
  rows, grads = zip(*(_oat_gmpo_row(old[i], new[i], adv[i, 0], mask[i]) for i in range(len(mask))))
  clipped = mask & (np.where(adv > 0, new - old > 0.4, new - old < -0.4))
  assert clipped.any()
  # DeepSpeed's 1/grad_acc_step over one rank's micro-steps and the ranks' mean: the mean over sequences
  np.testing.assert_allclose(ours[0][:, 0], rows, rtol=1e-12)
  assert math.isclose(ours[1], np.mean(rows), rel_tol=1e-12)
  np.testing.assert_allclose(ours[2], np.stack(grads) / len(rows), rtol=1e-10, atol=1e-15)
  # verl geo_mean, per row (to its +1e-8) and its micro-batch mean
  verl_rows = _verl_geo_mean_rows(old, new, adv, mask)
  np.testing.assert_allclose(ours[0][:, 0], verl_rows, rtol=1e-7)
  # v0.7.0: each micro-batch's torch.mean × 1/gradient_accumulation = the mini-batch's row mean; 0.9.1's engine sums
  # the micro-batches' means: K × that (K = 4 micro-batches of 2 rows here; 10 in the authors' verl script)
  k = 4
  micro_means = [verl_rows[j::k].mean() for j in range(k)]
  assert math.isclose(sum(m / k for m in micro_means), ours[1], rel_tol=1e-7)
  assert math.isclose(sum(micro_means), k * ours[1], rel_tol=1e-7)
  # the ±20 clamp is ours, not verl geo_mean's nor the code's: a token at log r = 25 in an A < 0 row (lower clip
  # only) enters their means unclamped, ours at 20
  new2, adv2 = new.copy(), adv.copy()
  adv2[2] = -abs(adv2[2])
  new2[2, 0] = old[2, 0] + 25.0
  batch2 = _train_batch(mask, adv2, old)
  ours2 = _ours(O.gmpo(), new2, batch2, aggregate="seq_mean_token_mean")[0][:, 0]
  code2 = _oat_gmpo_row(old[2], new2[2], adv2[2, 0], mask[2])[0]
  verl2 = _verl_geo_mean_rows(old, new2, adv2, mask)[2]
  assert math.isclose(code2, verl2, rel_tol=1e-7)
  n2 = mask[2].sum()
  assert math.isclose(ours2[2] / code2, math.exp(-5.0 / n2), rel_tol=1e-9)
  f = _fid("gmpo")
  assert any("neither the code nor verl geo_mean clamps" in x for x in f.deviations)
  assert not any("(verl geo_mean's)" in x for x in f.deviations)
  assert "compute_policy_loss_geo_mean" in f.read and "run_qwen2_5-7b_math.sh" in f.read and "readme.md:26-27" in f.read
  d = _defaults("gmpo")
  assert d["log-ratio clamps"][1] == "none (the code; verl geo_mean: none either)"
  assert "loss_mode geo_mean" in d["verl route (readme.md's first; examples/gmpo_trainer)"][1]
  assert any("K × that mean" in x and "10 in the authors' verl script" in x for x in f.deviations)
