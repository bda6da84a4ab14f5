"""Issue #51, per-row review i: an independent second reading of six records (not a random draw).

Rows: decoupled_ppo, adaptive_kl, seq_mean_token_sum, seq_mean_token_sum_norm, top_entropy_mask,
delta_logp_reweight.

Held (4): decoupled_ppo (inclusionAI/AReaL@4aef98d8 areal/utils/functional/functional.py:167-545
ppo_actor_loss_fn, apply_rejection_sampling, _check_bounds; areal/trainer/ppo/actor.py:142-365 compute_advantages,
_ppo_update, :408-480 grpo_loss_fn; cli_args.py RejectionSamplingConfig and PPOActorConfig; the README command
examples/math/gsm8k_rl.py --config examples/math/gsm8k_grpo.yaml and boba_grpo.yaml), seq_mean_token_sum and
seq_mean_token_sum_norm (verl v0.7.0 core_algos.py:772-827 agg_loss and dp_actor.py:436-470, 530-548; the verl 0.9.1
PyPI wheel core_algos.py:1140-1206, workers/utils/losses.py:57-145, v1/trainer_base.py:1827-1862,
engine/fsdp/transformer_impl.py:724-740; the TRL 1.9.0 PyPI wheel grpo_trainer.py:3124-3150), delta_logp_reweight
(Hesse73/RLVR-Directions@af8f20a6 verl/recipe/logprl/logp_ray_trainer.py:296-565, logp_trainer.yaml,
scripts/run_7B.sh and run_8B.sh, the README's two commands; main_logp.py:140-155 passes the overlong buffer to the
DAPO reward manager of the vendored verl 0.5.0.dev). Their "= theirs" claims are checked below against float64
NumPy transcriptions of the cited lines.

Not held (2); each error fixed in the record (no implementation changed, no implementation bug found):

- ``adaptive_kl`` OMITTED what Ziegler et al.'s 6.0 measures, a number the record attributed to them with no source
  read. openai/lm-human-preferences@cbfd210b launch.py:129-131, 142-144 set adaptive_kl.target 6.0 (and kl_coef
  0.15) for the books tasks, response_length 24 (:11), policy.temperature 0.7 (:17); train_policy.py:221 observes
  objective/kl = the batch mean of each response's k1 SUMMED over its 24 tokens, and :118-124 / :305 update with
  it. Ours compared a token mean with the same 6.0: 6 nats per token against their 0.25, so at any usual KL the
  error was clipped at −0.2 every step and β only shrank. Since then (2026-12-07, the decision this review left
  open) the controller observes their quantity by default, ``kl_reduction='sequence_sum'``; verl's is
  ``'sequence_mean'``, the old form ``'token_mean'`` (tested below).
- ``top_entropy_mask`` OMITTED which loss terms TRL's entropy mask covers. The TRL 1.9.0 PyPI wheel
  trl/trainer/grpo_trainer.py:3114-3115 multiply the policy loss by the mask, then :3120-3121 add β·KL (beta,
  grpo_config.py:671-672 default 0.0) on every token, unmasked; and :3155-3181 apply the same mask to the entropy
  bonus (entropy_coef, default 0.0, or use_adaptive_entropy): effective_mask = mask · entropy_mask, the mean
  entropy taken over the KEPT tokens (÷ effective_mask.sum() for loss types other than cispo / dapo / vespo; ÷ the
  global token count for those), and the adaptive controller observes the kept tokens' entropy (:3190). Ours masks
  only the wrapped term (an entropy_bonus or kl_penalty outside the wrapper acts on every token, aggregated over
  every token). Equal at TRL's defaults (beta 0.0, entropy_coef 0.0); the record said nothing of the other terms.

adaptive_kl's verl claims hold (the verl 0.9.1 PyPI wheel core_algos.py:153-212, ray_trainer.py:78-117,
v1/trainer_base.py:126-127, 1743-1760, ppo_trainer.yaml algorithm.kl_ctrl; verl v0.7.0 the same), checked below.
"""
import types

import jax
import jax.numpy as jnp
import numpy as np

from rljax import objectives as O
from rljax.control._controllers import _adaptive_kl_stage
from rljax.types import PolicyOutputs, TrainBatch
from _fidelity import defaults, fid, record


def _batch(mask, adv, **logps):
  b, t = mask.shape
  with jax.enable_x64(True):
    return TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask),
                      advantages=jnp.asarray(adv, jnp.float64), group_id=jnp.arange(b, dtype=jnp.int32),
                      **{k: jnp.asarray(v, jnp.float64) for k, v in logps.items()})


def _out(logp, entropy=None):
  with jax.enable_x64(True):
    return PolicyOutputs(logp=jnp.asarray(logp, jnp.float64),
                         entropy=None if entropy is None else jnp.asarray(entropy, jnp.float64))


def _call(term, out, batch):
  with jax.enable_x64(True):
    loss, metrics = term(out, batch)
  return np.asarray(loss, np.float64), metrics


def _data(seed, b=6, t=10, scale=0.3):
  rng = np.random.default_rng(seed)
  mask = rng.random((b, t)) < 0.8
  mask[:, 0] = True
  behav = -rng.random((b, t)) * 2.5 - 0.02
  prox = np.minimum(behav + rng.normal(scale=scale, size=(b, t)), -1e-3)  # log-probs: ≤ 0
  cur = np.minimum(prox + rng.normal(scale=scale, size=(b, t)), -1e-3)
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  return mask, behav, prox, cur, adv


# ------------------------------------------------------------------------------------ decoupled_ppo (held)


def _areal_ppo_actor_loss(logprobs, proximal, old, adv, mask, eps_clip, eps_clip_higher=None, c_clip=None,
                          upper=None, action="mask"):
  """AReaL@4aef98d8 functional.py:429-545 ppo_actor_loss_fn with apply_rejection_sampling (:185-330, token level,
  metric 'ratio'): count = the original mask's; w = exp(prox − behave) (non-finite log ratio -> 0), mask mode drops
  w > upper (_check_bounds :167-183: metric <= upper kept), clamp mode clamps to [0, upper]; loss Σ / count."""
  count = max(int(mask.sum()), 1)
  if upper is not None:
    lr = proximal - old
    lr = np.where(np.isfinite(lr), lr, 0.0)
    w = np.exp(lr)
    if action == "mask":
      mask = mask & (w <= upper)
    else:
      w = np.clip(w, 0.0, upper)
    w = np.where(mask, w, 0.0)
  ratio = np.where(mask, np.exp(logprobs - proximal), 0.0)
  clipped = np.clip(ratio, 1 - eps_clip, 1 + (eps_clip if eps_clip_higher is None else eps_clip_higher))
  pg = np.maximum(-adv * ratio, -adv * clipped)
  if c_clip is not None:
    pg = np.minimum(pg, np.sign(adv) * c_clip * adv)
  if upper is not None:
    pg = pg * w
  return np.where(mask, pg, 0.0).sum() / count


def test_decoupled_ppo_equals_areal_with_the_launch_configs_rejection_sampling():
  mask, behav, prox, cur, adv = _data(429, scale=0.9)
  batch = _batch(mask, adv, logp_old=prox, logp_behavior=behav)
  # gsm8k_grpo.yaml / boba_grpo.yaml: eps_clip 0.4, rejection_sampling metric ratio upper 5.0 (level token, mask)
  theirs = _areal_ppo_actor_loss(cur, prox, behav, adv, mask, 0.4, upper=5.0)
  ours, _ = _call(O.decoupled_ppo(eps_low=0.4, behavior_cap=5.0), _out(cur), batch)
  np.testing.assert_allclose((ours * mask).sum() / mask.sum(), theirs, rtol=1e-12)
  assert (np.exp(prox - behav)[mask] > 5.0).any()  # the cap drops tokens here, which stay in the denominator
  # clamp mode and the dual clip (c_clip 3)
  theirs = _areal_ppo_actor_loss(cur, prox, behav, adv, mask, 0.2, 0.28, c_clip=3.0, upper=2.0, action="clamp")
  ours, _ = _call(O.decoupled_ppo(eps_low=0.2, eps_high=0.28, dual_clip=3.0, behavior_cap=2.0, cap_mode="clamp"),
                  _out(cur), batch)
  np.testing.assert_allclose((ours * mask).sum() / mask.sum(), theirs, rtol=1e-12)
  # without rejection_sampling (cli_args default None) AReaL applies no w: ours differs unless π_prox = π_behav
  theirs = _areal_ppo_actor_loss(cur, prox, behav, adv, mask, 0.2)
  ours, _ = _call(O.decoupled_ppo(), _out(cur), batch)
  assert abs((ours * mask).sum() / mask.sum() - theirs) > 1e-3
  ours, _ = _call(O.decoupled_ppo(), _out(cur), _batch(mask, adv, logp_old=prox, logp_behavior=prox))
  np.testing.assert_allclose((ours * mask).sum() / mask.sum(), theirs, rtol=1e-12)
  d = defaults("decoupled_ppo")
  assert "0.4 in the math example configs" in d["eps_low"][1]
  assert "max_head_offpolicyness 2 (gsm8k_grpo.yaml), 4 (boba_grpo.yaml)" in d["staleness (π_behav's lag)"][1]


# -------------------------------------------------------------------------------------- adaptive_kl (held)


def _verl_adaptive_step(beta, old, ref, mask, target=0.1, horizon=10000.0):
  """The verl 0.9.1 PyPI wheel ray_trainer.py:78-117 apply_kl_penalty (kl_penalty 'kl': k1 = old − ref) and
  core_algos.py:153-176 AdaptiveKLController.update(current_kl = batch mean of per-row token means, n = rows)."""
  kld = (old - ref) * mask
  cur = ((kld * mask).sum(-1) / (mask.sum(-1) + 1e-8)).mean()
  return beta * (1 + np.clip(cur / target - 1, -0.2, 0.2) * mask.shape[0] / horizon), cur


def test_adaptive_kl_stage_equals_verl_with_sequence_mean_also_on_ragged_rows():
  rng = np.random.default_rng(153)
  b, t = 8, 7
  verl_form = _adaptive_kl_stage(init_beta=1e-3, target=0.1, estimator="k1", kl_reduction="sequence_mean")
  token_mean = _adaptive_kl_stage(init_beta=1e-3, target=0.1, estimator="k1", kl_reduction="token_mean")
  state, s_tok = verl_form.init(), token_mean.init()
  beta = 1e-3
  for step in range(4):
    old = -rng.random((b, t)) * 2
    ref = old - rng.normal(scale=0.3 + 0.2 * step, size=(b, t))
    mask = np.ones((b, t), bool)
    mask[0, 2:] = step % 2 == 0  # ragged rows on every other step
    beta, cur = _verl_adaptive_step(beta, old, ref, mask)
    inputs = types.SimpleNamespace(batch=types.SimpleNamespace(logp_old=jnp.asarray(old), logp_ref=jnp.asarray(ref),
                                                               loss_mask=jnp.asarray(mask)))
    state, met = verl_form.update(state, inputs)
    np.testing.assert_allclose(float(state.beta), beta, rtol=1e-6)
    np.testing.assert_allclose(met["kl_ref"], cur, rtol=1e-5)
    s_tok, met_tok = token_mean.update(s_tok, inputs)
    if not mask.all():  # the token mean weighs longer rows more: another number on ragged rows
      assert abs(met_tok["kl_ref"] - cur) > 1e-3
  assert "kl_ctrl.target_kl = 0.1" in defaults("adaptive_kl")["target"][1]
  assert "kl_ctrl.type = 'fixed'" in defaults("adaptive_kl")["type"][1]
  assert "('sequence_mean')" in defaults("adaptive_kl")["kl_reduction"][1]


def _ziegler_step(beta, old, ref, target=6.0, horizon=10000.0):
  """openai/lm-human-preferences@cbfd210b train_policy.py:221 (objective/kl = batch mean of Σ_t (logprobs −
  ref_logprobs), every one of the response_length positions) and :118-124 / :305 (update with n = ppo.batch_size)."""
  cur = (old - ref).sum(-1).mean()
  return beta * (1 + np.clip(cur / target - 1, -0.2, 0.2) * old.shape[0] / horizon), cur


def test_adaptive_kl_default_observes_ziegler_s_per_response_sum_for_their_target_6():
  rng = np.random.default_rng(221)
  b, t = 512, 24  # the books tasks: ppo.batch_size 512, response_length 24
  beta_z, beta_tok = 0.15, 0.15
  ours_k1 = _adaptive_kl_stage(init_beta=0.15, estimator="k1")  # target 6.0, kl_reduction 'sequence_sum'
  ours_default = _adaptive_kl_stage(init_beta=0.15)  # k3 (the default estimator), per-response sum
  before = _adaptive_kl_stage(init_beta=0.15, kl_reduction="token_mean")  # the form before 2026-12-07
  s_k1, s_default, s_before = ours_k1.init(), ours_default.init(), before.init()
  for step in range(3):
    old = -rng.random((b, t)) * 2
    ref = old - np.abs(rng.normal(loc=0.25, scale=0.05 * (step + 1), size=(b, t)))  # ≈ 6 nats per response
    beta_z, cur = _ziegler_step(beta_z, old, ref)
    assert 4.0 < cur < 8.0  # their KL, per response, near their target
    inputs = types.SimpleNamespace(batch=types.SimpleNamespace(logp_old=jnp.asarray(old), logp_ref=jnp.asarray(ref),
                                                               loss_mask=jnp.ones((b, t), bool)))
    s_k1, met = ours_k1.update(s_k1, inputs)
    np.testing.assert_allclose(float(s_k1.beta), beta_z, rtol=1e-5)
    np.testing.assert_allclose(met["kl_ref"], cur, rtol=1e-5)
    s_default, met_d = ours_default.update(s_default, inputs)
    d = old - ref  # k3's per-response sum (equal to k1's in expectation over sampled tokens, not per sample)
    np.testing.assert_allclose(met_d["kl_ref"], (np.exp(-d) + d - 1).sum(-1).mean(), rtol=1e-5)
    s_before, _ = before.update(s_before, inputs)
    beta_tok *= 1 - 0.2 * b / 10000.0  # a token-mean KL ≈ 0.25 ≪ 6: the error clipped at −0.2 each step
    np.testing.assert_allclose(float(s_before.beta), beta_tok, rtol=1e-5)
  assert abs(float(s_before.beta) - beta_z) > 1e-3
  f = fid("adaptive_kl")
  assert "openai/lm-human-preferences@cbfd210b" in f.read and "train_policy.py:26-28" in f.read
  assert "kl_reduction='sequence_sum'" in defaults("adaptive_kl")["target"][0]
  assert "SUMMED over its tokens" in defaults("adaptive_kl")["kl_reduction"][0] or \
      "summed over its loss tokens" in defaults("adaptive_kl")["kl_reduction"][0]
  devs = " ".join(f.deviations)
  assert "target=0.1, kl_reduction='sequence_mean', estimator='k1'" in devs and "kl_reduction='token_mean'" in devs


# ---------------------------------------------------------------------------- seq_mean_token_sum(_norm) (held)


def _verl091_agg(loss, mask, mode, dp_size=1, global_batch_size=None, loss_scale_factor=None):
  """The verl 0.9.1 PyPI wheel core_algos.py:1140-1206 agg_loss, the two seq-mean-token-sum branches."""
  seq = (loss * mask).sum(-1)
  has = (mask.sum(-1) > 0).astype(float)
  gbs = has.sum() if global_batch_size is None else global_batch_size
  out = (seq * has).sum() / gbs * dp_size
  if mode == "seq-mean-token-sum-norm":
    out /= mask.shape[-1] if loss_scale_factor is None else loss_scale_factor
  return out


def _ratio(pair):
  num, den = pair
  return float(num) / float(den)


def test_seq_mean_token_sum_equals_verl_engine_path_without_empty_rows():
  rng = np.random.default_rng(1140)
  loss = rng.normal(size=(8, 9))
  mask = rng.random((8, 9)) < 0.7
  mask[:, 0] = True
  with jax.enable_x64(True):
    ours = _ratio(O.seq_mean_token_sum(jnp.asarray(loss), jnp.asarray(mask)))
  # the engine worker: global_batch_size = ppo_mini_batch_size × rollout.n, here the 8 rows as 2 micro-batches
  theirs = sum(_verl091_agg(loss[s], mask[s], "seq-mean-token-sum", global_batch_size=8) for s in (slice(0, 3),
                                                                                                   slice(3, 8)))
  np.testing.assert_allclose(ours, theirs, rtol=1e-12)
  # an empty row: verl still divides by 8, ours by the 7 non-empty rows
  mask[5] = False
  with jax.enable_x64(True):
    ours = _ratio(O.seq_mean_token_sum(jnp.asarray(loss), jnp.asarray(mask)))
  theirs = _verl091_agg(loss, mask, "seq-mean-token-sum", global_batch_size=8)
  np.testing.assert_allclose(ours * 7 / 8, theirs, rtol=1e-12)
  # TRL 1.9.0 'luspo' (grpo_trainer.py:3143-3148) with a sequence-constant loss: (l_b·|y_b|).mean() / GA
  mask[5, 0] = True
  seq_loss = rng.normal(size=(8, 1))
  tok = np.broadcast_to(seq_loss, (8, 9))
  luspo = sum((seq_loss[s] * mask[s].sum(1, keepdims=True)).mean() / 2 for s in (slice(0, 4), slice(4, 8)))
  with jax.enable_x64(True):
    ours = _ratio(O.seq_mean_token_sum(jnp.asarray(tok), jnp.asarray(mask)))
  np.testing.assert_allclose(ours, luspo, rtol=1e-12)


def test_seq_mean_token_sum_norm_equals_verl_091_and_trl_dr_grpo_with_max_len():
  rng = np.random.default_rng(1181)
  loss = rng.normal(size=(8, 9))
  mask = rng.random((8, 9)) < 0.6
  mask[3] = False  # an empty row: counted in B on both sides
  max_len = 12
  with jax.enable_x64(True):
    ours = _ratio(O.seq_mean_token_sum_norm(max_len=max_len)(jnp.asarray(loss), jnp.asarray(mask)))
  theirs = sum(_verl091_agg(loss[s], mask[s], "seq-mean-token-sum-norm", global_batch_size=8,
                            loss_scale_factor=max_len) for s in (slice(0, 4), slice(4, 8)))
  np.testing.assert_allclose(ours, theirs, rtol=1e-12)
  # loss_scale_factor null: verl divides each micro-batch by its own padded width (here 6 and 9), ours by max_len
  mask[:4, 6:] = False
  null = sum(_verl091_agg(l, m, "seq-mean-token-sum-norm", global_batch_size=8)
             for l, m in ((loss[:4, :6], mask[:4, :6]), (loss[4:], mask[4:])))
  with jax.enable_x64(True):
    ours = _ratio(O.seq_mean_token_sum_norm(max_len=max_len)(jnp.asarray(loss), jnp.asarray(mask)))
  assert abs(null - ours) > 1e-3
  # TRL 1.9.0 'dr_grpo' (grpo_trainer.py:3134-3138): per micro-batch Σ l·m / (rows × max_completion_length) / GA
  dr = sum((loss[s] * mask[s]).sum() / (4 * max_len) / 2 for s in (slice(0, 4), slice(4, 8)))
  np.testing.assert_allclose(ours, dr, rtol=1e-12)
  assert "loss_scale_factor=None: T" in defaults("seq_mean_token_sum_norm")["max_len"][1]


# ------------------------------------------------------------------------------- top_entropy_mask (not held)


def _trl_loss(cur, old, adv, ent, mask, rho, loss_type="dapo", beta=0.0, ref=None, entropy_coef=0.0, eps=0.2):
  """The TRL 1.9.0 PyPI wheel grpo_trainer.py _compute_loss on one micro-batch, one process, GA 1: the entropy mask
  (get_high_entropy_mask :1396-1432, threshold 1 − ρ, :3020-3021), the clipped per-token loss, × mask (:3114-3115),
  + β·k3 KL after it (:3120-3121), the loss_type's reduction (:3124-3150), the entropy bonus over
  effective_mask = mask · entropy_mask (:3155-3181)."""
  q = np.quantile(ent[mask].astype(np.float32), np.float32(1 - rho)) if rho < 1 else None
  emask = None if q is None else ((ent * mask) >= q) & mask
  r = np.exp(cur - old)
  per = -np.minimum(r * adv, np.clip(r, 1 - eps, 1 + eps) * adv)
  if emask is not None:
    per = per * emask
  if beta != 0.0:
    per = per + beta * (np.exp(ref - cur) - (ref - cur) - 1)
  if loss_type == "dapo":
    normalizer = max(mask.sum(), 1.0)
    loss = (per * mask).sum() / normalizer
  else:  # grpo
    normalizer = 1.0
    loss = ((per * mask).sum(-1) / np.maximum(mask.sum(-1), 1.0)).mean()
  if entropy_coef != 0.0:
    eff = mask if emask is None else mask * emask
    if loss_type == "dapo":
      bonus = (ent * eff).sum() / normalizer
    else:
      bonus = (ent * eff).sum() / max(eff.sum(), 1.0) / normalizer
    loss = loss - entropy_coef * bonus
  return loss


def test_top_entropy_mask_equals_trl_on_the_policy_term_and_leaves_beta_kl_unmasked():
  mask, _, old, cur, adv = _data(3114, b=5, t=12)
  ref = old - np.random.default_rng(1).normal(scale=0.4, size=old.shape)
  ent = np.random.default_rng(2).random(mask.shape) * 3
  batch = _batch(mask, adv, logp_old=old, logp_ref=ref)
  out = _out(cur, ent)
  pol, _ = _call(O.top_entropy_mask(O.ppo_clip(), rho=0.2), out, batch)
  np.testing.assert_allclose((pol * mask).sum() / mask.sum(), _trl_loss(cur, old, adv, ent, mask, 0.2), rtol=1e-12)
  # β·KL outside the wrapper = TRL's (KL added after the mask, on every token)
  kl, _ = _call(O.kl_penalty(beta=0.04, estimator="k3", clamp=False), out, batch)
  theirs = _trl_loss(cur, old, adv, ent, mask, 0.2, beta=0.04, ref=ref)
  np.testing.assert_allclose(((pol + kl) * mask).sum() / mask.sum(), theirs, rtol=1e-10)


def test_top_entropy_mask_trl_masks_its_entropy_bonus_over_the_kept_tokens():
  mask, _, old, cur, adv = _data(3155, b=5, t=12)
  ent = np.random.default_rng(4).random(mask.shape) * 3
  batch = _batch(mask, adv, logp_old=old)
  out = _out(cur, ent)
  pol, _ = _call(O.top_entropy_mask(O.ppo_clip(), rho=0.2), out, batch)
  bonus, _ = _call(O.entropy_bonus(0.01), out, batch)
  wrapped_bonus, _ = _call(O.top_entropy_mask(O.entropy_bonus(0.01), rho=0.2), out, batch)
  token_mean = lambda x: (x * mask).sum() / mask.sum()  # noqa: E731
  # loss_type 'dapo': TRL's bonus covers the kept tokens, ÷ every token: ours only with the bonus wrapped too
  theirs = _trl_loss(cur, old, adv, ent, mask, 0.2, entropy_coef=0.01)
  assert abs(token_mean(pol + bonus) - theirs) > 1e-4
  np.testing.assert_allclose(token_mean(pol + wrapped_bonus), theirs, rtol=1e-12)
  # loss_type 'grpo': the bonus is the kept tokens' MEAN entropy (÷ kept count); neither of ours
  theirs = _trl_loss(cur, old, adv, ent, mask, 0.2, loss_type="grpo", entropy_coef=0.01)
  pol_grpo = _trl_loss(cur, old, adv, ent, mask, 0.2, loss_type="grpo")
  q = np.quantile(ent[mask].astype(np.float32), np.float32(0.8))
  kept = ((ent * mask) >= q) & mask
  np.testing.assert_allclose(pol_grpo - theirs, 0.01 * ent[kept].mean(), rtol=1e-12)
  assert abs(0.01 * ent[kept].mean() - 0.01 * token_mean(ent)) > 1e-4
  # at TRL's defaults (entropy_coef 0.0) the two are equal
  np.testing.assert_allclose(token_mean(pol), _trl_loss(cur, old, adv, ent, mask, 0.2), rtol=1e-12)
  # the corrected record
  f = fid("top_entropy_mask")
  assert "grpo_trainer.py:3155-3181" in f.read and ":3120-3121" in f.read
  o, t = defaults("top_entropy_mask")["terms under the mask"]
  assert "the wrapped term only" in o and "entropy bonus" in t and "not β·KL" in t
  devs = " ".join(f.deviations)
  assert "effective_mask = mask · entropy_mask" in devs and "kept tokens" in devs
  assert "entropy_coef 0.0" in devs and "beta 0.0" in devs
  assert "entropy bonus" in record("top_entropy_mask")


# ---------------------------------------------------------------------------- delta_logp_reweight (held)


def _verl05_reweighted_loss(cur, old, adv, mask, c=0.2, low=0.2, high=0.28, clip_c=10.0):
  """RLVR-Directions@af8f20a6 logp_ray_trainer.py:493-562 (reshape_reversed: A ← A·(1 + c − c·exp(old_log_probs)),
  adv_mask 'none') then the vendored verl's vanilla PPO loss with the scripts' clip 0.2 / 0.28, clip_ratio_c 10,
  token-mean."""
  a = adv * (1 + c - c * np.exp(old))
  r = np.exp(cur - old)
  l1, l2 = -a * r, -a * np.clip(r, 1 - low, 1 + high)
  clip1 = np.maximum(l1, l2)
  l3 = -a * clip_c
  per = np.where(a < 0, np.minimum(l3, clip1), clip1)
  return (per * mask).sum() / mask.sum()


def test_delta_logp_reweight_equals_reshape_reversed_advantages():
  mask, _, old, cur, adv = _data(503, scale=0.5)
  adv[2] = -2.5
  batch = _batch(mask, adv, logp_old=old)
  for c in (0.2, 0.1):  # run_7B.sh, run_8B.sh
    term = O.delta_logp_reweight(O.ppo_clip(eps_low=0.2, eps_high=0.28, dual_clip=10.0), c=c)
    ours, _ = _call(term, _out(cur), batch)
    np.testing.assert_allclose((ours * mask).sum() / mask.sum(), _verl05_reweighted_loss(cur, old, adv, mask, c),
                               rtol=1e-12)
  d = defaults("delta_logp_reweight")
  assert "0.2 (run_7B.sh); 0.1 (run_8B.sh)" in d["c"][1]
