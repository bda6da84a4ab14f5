"""Issue #51, per-row review l: an independent second reading of six records (not a random draw).

Rows: entropy_bonus, kl_penalty, gft, entropy_gated_contrastive, token_sum, reinforce_pp.

Held (5): entropy_bonus, kl_penalty, gft, token_sum, reinforce_pp. Their "= theirs" claims are checked below
against float64 NumPy transcriptions of the cited lines: the TRL 1.9.0 PyPI wheel trl/trainer/grpo_trainer.py
(:3066-3076 the k3 KL and use_bias_correction_kl, :3124-3181 the loss_type normalisers and the entropy bonus), the
verl 0.9.1 PyPI wheel (trainer/ppo/core_algos.py:1140-1206 agg_loss, :693-731 REINFORCE++, :2188-2251 kl_penalty;
workers/utils/losses.py:57-145 ppo_loss; utils/torch_functional.py:294-345 masked_whiten), volcengine/verl@v0.7.0
(core_algos.py:581-616 REINFORCE++, :819-823 seq-mean-token-sum-norm) and ZJU-OmniAI/GFT@763384de
(core_algos.py:668-712 compute_gft_loss). gft holds at its stated settings (the authors' launch script); one
omission outside them is added to its record: the repository's second entry point, verl/trainer/fsdp_gft_trainer.py
(gft_trainer.yaml; no README command or script runs it), trains data-set responses with −sg(p)·log p (no τ, no
advantage: gft(tau=1.0) here), its gradient the sum of the micro-batches' token means (:470-475; the
÷ n_micro_batches at :493 follows the backward).

Not held (1), fixed in the record (no implementation changed; no implementation bug found):

- ``entropy_gated_contrastive`` said something FALSE twice and OMITTED the authors' recipe. (1) It called its
  source "a public copy; authorship unconfirmed" (Arka04bro/ReasonMaxxer). The authors' repository is
  farukakgul/ReasonMaxxer: the fork ansz42/ReasonMaxxer (fetched) carries its history, 4725111 "Initial public
  release" 2026-05-07 to 72182e9 2026-05-08, every commit by farukakgul, and its README names farukakgul's
  repository the official one (the README's BibTeX: Ömer Faruk Akgül first author of arXiv 2605.06241).
  Arka04bro/ReasonMaxxer is a fork of it (its stored files sit at the authors' commits 47251115, 69c47bd3,
  1a8646b7 and at later ones); reasonmaxxer/gating.py, the 0.5B pilot scripts, clipped_ratio,
  --behavior_temperature and --kl_decision_weight are the fork's, not the authors'. (2) It said the base entropies
  "come from outside the public scripts": the authors' scripts/score_rollouts.py computes them (a teacher-forced
  forward of the base model, log_softmax of the float32 logits, untempered), run by the README's
  examples/qwen25_1p5b/02_generate_score_3x100x20.sh. (3) OMITTED: the README's recipe
  examples/qwen25_1p5b/04_train_tau1p4.sh (τ_pos = τ_neg = 1.4, pass range [0, 1] over the pool that
  03_select_mid50_trim80.sh makes: 50 problems with a correct and a wrong rollout closest to pass rate 0.5, then
  the shortest 80% of their rollouts; --batch_size 1 --grad_accum_steps 8 --kl_weight 0.2 --adv_clip 2.5
  --curriculum_ordering --curriculum_key signal_clarity, 149 optimizer steps); the record gave the argparse
  defaults and the fork's pilot only, and never said that a micro-batch is one rollout (--batch_size 1 in argparse
  and every script), so theirs averages each rollout's gated-token mean over the 8 rollouts of an optimizer step.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rljax import advantages as A
from rljax import objectives as O
from rljax.types import PolicyOutputs, TrainBatch
from _fidelity import ROWS, defaults, fid, record


def _batch(mask, *, adv=None, logp_old=None, logp_ref=None, rewards=None, extras=None):
  b, t = mask.shape
  f = lambda x: None if x is None else jnp.asarray(x, jnp.float64)  # noqa: E731
  return TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask),
                    advantages=f(np.zeros((b, t)) if adv is None else adv), group_id=jnp.arange(b, dtype=jnp.int32),
                    logp_old=f(logp_old), logp_ref=f(logp_ref), rewards=f(rewards),
                    extras={k: jnp.asarray(v, jnp.float64) for k, v in (extras or {}).items()})


def _microbatched(obj, mbs, mask, logp, entropy=None, **fields):
  """make_train_step's accumulation: Σ over micro-batches of chain(...)(mb) with the whole batch's denominator.
  Returns (loss, d loss / d logp, d loss / d entropy)."""
  with jax.enable_x64(True):
    denom = float(obj.denominator(_batch(mask, **fields)))

    def total(lp, ent):
      s = 0.0
      for sl in mbs:
        sub = {k: (v if v is None else ({kk: vv[sl] for kk, vv in v.items()} if k == "extras" else v[sl]))
               for k, v in fields.items()}
        out = PolicyOutputs(logp=lp[sl], entropy=None if ent is None else ent[sl])
        s = s + obj(out, _batch(mask[sl], **sub), denominator=denom)[0]
      return s

    lp = jnp.asarray(logp, jnp.float64)
    ent = None if entropy is None else jnp.asarray(entropy, jnp.float64)
    loss = float(total(lp, ent))
    g_lp = np.asarray(jax.grad(lambda x: total(x, ent))(lp))
    g_ent = None if ent is None else np.asarray(jax.grad(lambda e: total(lp, e))(ent))
  return loss, g_lp, g_ent


def _unequal(seed=0, b=6, t=9):
  """Three micro-batches of two rows with unequal loss-token counts."""
  rng = np.random.default_rng(seed)
  mask = np.zeros((b, t), bool)
  lens = [9, 8, 3, 2, 6, 1]
  for i, n in enumerate(lens[:b]):
    mask[i, :n] = True
  mbs = (slice(0, 2), slice(2, 4), slice(4, 6))
  return rng, mask, mbs


# ------------------------------------------------------------------------------------ entropy_bonus (held)


def _trl_entropy_term(ent, mask, mbs, loss_type, coef, num_processes=1):
  """TRL 1.9.0 grpo_trainer.py:3155-3181, static coef, top_entropy_quantile 1.0 (effective_mask = mask), summed over
  the micro-batches of one optimizer step (the Trainer's own 1/GA is disabled, :945-950): cispo / dapo / vespo
  Σ H·m ÷ (num_items_in_batch / num_processes) (:3140, :3168), num_items_in_batch the generation batch's loss
  tokens (:2427; = the step's with steps_per_generation = gradient_accumulation_steps); the other loss types
  Σ H·m ÷ max(Σ m, 1) ÷ gradient_accumulation_steps (:3171)."""
  total = 0.0
  ga = len(mbs)
  for s in mbs:
    h, m = ent[s], mask[s].astype(float)
    if loss_type in ("cispo", "dapo", "vespo"):
      normalizer = max(mask.sum(), 1.0) / num_processes
      total += -coef * (h * m).sum() / normalizer
    else:
      total += -coef * (h * m).sum() / max(m.sum(), 1.0) / ga
  return total


def _verl091_agg_token_mean(loss_mat, mask, mbs, dp_size=1):
  """The verl 0.9.1 PyPI wheel core_algos.py:1176-1180 agg_loss 'token-mean' with the global counts ppo_loss passes
  (losses.py:64-67; batch_num_tokens the mini-batch's loss tokens all-reduced over dp, transformer_impl.py:729-735),
  each micro-batch backpropagated unscaled (:760-767), one rank."""
  n = mask.sum()
  return sum((loss_mat[s] * mask[s]).sum() / n * dp_size for s in mbs)


def test_entropy_bonus_equals_trl_dapo_and_verl091_and_differs_from_trl_per_microbatch_types():
  rng, mask, mbs = _unequal(51)
  ent = rng.uniform(0.1, 4.0, mask.shape)
  logp = -rng.uniform(0.1, 3.0, mask.shape)
  c = 0.003
  ours, _, g_ent = _microbatched(O.chain(O.entropy_bonus(coef=c)), mbs, mask, logp, entropy=ent)
  np.testing.assert_allclose(ours, _trl_entropy_term(ent, mask, mbs, "dapo", c), rtol=1e-12)
  np.testing.assert_allclose(ours, -c * _verl091_agg_token_mean(ent, mask, mbs), rtol=1e-12)
  # ∂/∂H_t = −c / N on every loss token, 0 elsewhere (TRL dapo / verl 0.9.1 alike)
  np.testing.assert_allclose(g_ent, np.where(mask, -c / mask.sum(), 0.0), rtol=1e-12, atol=1e-15)
  for lt in ("grpo", "bnpo", "dr_grpo", "sapo", "luspo"):  # each micro-batch's own token mean ÷ GA
    assert abs(ours - _trl_entropy_term(ent, mask, mbs, lt, c)) > 1e-3 * abs(ours), lt
  # with equal token counts per micro-batch the per-micro-batch form agrees as well
  eq = np.zeros_like(mask)
  eq[:, :4] = True
  ours_eq, _, _ = _microbatched(O.chain(O.entropy_bonus(coef=c)), mbs, eq, logp, entropy=ent)
  np.testing.assert_allclose(ours_eq, _trl_entropy_term(ent, eq, mbs, "grpo", c), rtol=1e-12)
  assert defaults("entropy_bonus")["coef"] == ("1e-3", "verl entropy_coeff 0; TRL entropy_coef 0.0")
  assert any("cispo / dapo" in d and "grpo, sapo, bnpo, dr_grpo, luspo" in d for d in fid("entropy_bonus").deviations)


def test_entropy_bonus_record_cites_trl_adaptive_defaults():
  """TRL 1.9.0 grpo_config.py:866-900 (the fields): entropy_coef 0.0, use_adaptive_entropy False, entropy_coef_min
  0.0, entropy_coef_max 1.0, entropy_coef_delta 0.005, entropy_target 0.2; the controller applies the coefficient
  only while the last window's entropy ≤ entropy_target (grpo_trainer.py:3176-3179)."""
  adaptive = defaults("entropy_bonus")["adaptive coef"][1]
  for s in ("use_adaptive_entropy False", "entropy_coef_delta 0.005", "entropy_coef_min 0.0", "entropy_coef_max 1.0",
            "entropy_target 0.2"):
    assert s in adaptive, s


# ------------------------------------------------------------------------------------- kl_penalty (held)


def _verl_kl(logp, ref, name):
  """The verl 0.9.1 PyPI wheel core_algos.py:2188-2251 kl_penalty: (value, d value / d logp). A trailing '+' is
  stripped for the forward; '+' (except mse+ / k2+, whose forward is k2 itself) passes the gradient of ½Δ²."""
  d = logp - ref
  base = name[:-1] if name.endswith("+") else name
  if base in ("kl", "k1"):
    val, grad = d, np.ones_like(d)
  elif base == "abs":
    val, grad = np.abs(d), np.sign(d)
  elif base in ("mse", "k2"):
    val, grad = 0.5 * d ** 2, d
  else:  # low_var_kl / k3: kl = clamp(ref − logp, ±20); clamp(e^kl − kl − 1, ±10)
    kl_raw = ref - logp
    kl = np.clip(kl_raw, -20, 20)
    v = np.exp(kl) - kl - 1
    val = np.clip(v, -10, 10)
    inner = (np.abs(kl_raw) < 20) & (v < 10)
    grad = np.where(inner, -np.exp(kl) + 1.0, 0.0)
  if name.endswith("+") and name not in ("mse", "k2"):
    grad = d
  return val, grad


@pytest.mark.parametrize("name", ["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3",
                                  "kl+", "abs+", "mse+", "low_var_kl+", "k3+"])
def test_kl_penalty_equals_verl_091_values_and_gradients(name):
  rng = np.random.default_rng(52)
  ref = -rng.uniform(0.05, 3.0, (5, 7))
  logp = ref + rng.normal(scale=1.5, size=ref.shape)
  logp[0, :3] = ref[0, :3] + np.array([-25.0, -4.0, 30.0])  # the k3 clamps (−Δ > 20, value > 10, −Δ < −20)
  beta = 0.002
  term = O.kl_penalty(beta=beta, estimator=name)
  with jax.enable_x64(True):
    batch = _batch(np.ones(ref.shape, bool), logp_ref=ref)
    f = lambda lp: term(PolicyOutputs(logp=lp), batch)[0]  # noqa: E731
    val = np.asarray(f(jnp.asarray(logp)))
    grad = np.asarray(jax.grad(lambda lp: jnp.sum(f(lp)))(jnp.asarray(logp)))
  v, g = _verl_kl(logp, ref, name)
  np.testing.assert_allclose(val, beta * v, rtol=1e-12, atol=1e-15)
  np.testing.assert_allclose(grad, beta * g, rtol=1e-12, atol=1e-15)


def test_kl_penalty_bias_correction_equals_trl_inside_the_clamps():
  """TRL 1.9.0 grpo_trainer.py:3066-3076: per_token_kl = e^{ref−logp} − (ref−logp) − 1, × coef_1 = e^{logp − old}
  with use_bias_correction_kl (importance_sampling_level 'token'); unclamped. Ours clamp=False, bias_correction."""
  rng = np.random.default_rng(53)
  ref = -rng.uniform(0.05, 3.0, (4, 6))
  old = ref + rng.normal(scale=0.3, size=ref.shape)
  logp = old + rng.normal(scale=0.5, size=ref.shape)
  beta = 0.04
  term = O.kl_penalty(beta=beta, estimator="k3", clamp=False, bias_correction=True)
  with jax.enable_x64(True):
    batch = _batch(np.ones(ref.shape, bool), logp_ref=ref, logp_old=old)
    f = lambda lp: term(PolicyOutputs(logp=lp), batch)[0]  # noqa: E731
    val = np.asarray(f(jnp.asarray(logp)))
    grad = np.asarray(jax.grad(lambda lp: jnp.sum(f(lp)))(jnp.asarray(logp)))
  x = ref - logp
  k3 = np.exp(x) - x - 1
  coef_1 = np.exp(logp - old)
  np.testing.assert_allclose(val, beta * k3 * coef_1, rtol=1e-12)
  dk3 = -np.exp(x) + 1.0
  np.testing.assert_allclose(grad, beta * (dk3 * coef_1 + k3 * coef_1), rtol=1e-12)
  d = defaults("kl_penalty")
  assert d["beta"] == ("0.001", "verl kl_loss_coef 0.001 (use_kl_loss False); TRL beta 0.0")
  assert "TRL use_bias_correction_kl False" in d["bias_correction"][1]


# ------------------------------------------------------------------------------------------- gft (held)


def _gft_authors(log_prob, adv, mask, tao):
  """ZJU-OmniAI/GFT@763384de verl/trainer/ppo/core_algos.py:668-712 compute_gft_loss: −log π · sg(where(p > tao, 1,
  p)) · A, agg_loss 'token-mean' = masked_mean (Σ ÷ (Σm + 1e-8)); p = softmax(z)[y] (dp_actor.py:185-200) = e^{log π}
  at their hard-coded temperature 1.0. Returns (loss, d loss / d log π)."""
  p = np.exp(log_prob)
  coef = np.where(p > tao, 1.0, p)
  mat = -log_prob * coef * adv
  den = mask.sum() + 1e-8
  return (mat * mask).sum() / den, np.where(mask, -coef * adv / den, 0.0)


def test_gft_with_advantages_equals_compute_gft_loss():
  rng = np.random.default_rng(54)
  mask = np.ones((6, 8), bool)
  for i in range(6):
    mask[i, rng.integers(2, 9):] = False
  logp = np.log(rng.uniform(0.01, 0.999, mask.shape))
  logp[0, :3] = np.log([0.05, 0.1, 0.2])  # below, at and above τ = 0.1 (p > tao is strict: p = τ keeps p)
  adv = np.repeat(rng.normal(size=(6, 1)), 8, axis=1)
  ours, g, _ = _microbatched(O.chain(O.gft(0.1, use_advantages=True)), (slice(0, 6),), mask, logp, adv=adv)
  theirs, g_theirs = _gft_authors(logp, adv, mask, 0.1)
  np.testing.assert_allclose(ours, theirs, rtol=1e-7)  # Σm + 1e-8 against Σm
  np.testing.assert_allclose(g, g_theirs, rtol=1e-7, atol=1e-15)
  assert defaults("gft")["tau"] == ("0.1", "tao 0.1 (function default 0.5)")


def test_gft_record_names_the_second_trainer_and_tau_one_is_its_loss():
  """ZJU-OmniAI/GFT@763384de verl/trainer/fsdp_gft_trainer.py:393-403: loss = CrossEntropy(z, y) · sg(softmax(z)[y])
  per token: ours gft(tau=1.0) (every p ≤ 1 keeps p) per token."""
  rng = np.random.default_rng(55)
  z = rng.normal(size=(3, 5, 11))
  y = rng.integers(0, 11, (3, 5))
  lsm = z - z.max(-1, keepdims=True)
  lsm = lsm - np.log(np.exp(lsm).sum(-1, keepdims=True))
  logp = np.take_along_axis(lsm, y[..., None], -1)[..., 0]
  theirs = -logp * np.exp(logp)
  with jax.enable_x64(True):
    per_tok = np.asarray(O.gft(1.0)(PolicyOutputs(logp=jnp.asarray(logp)), _batch(np.ones(y.shape, bool)))[0])
  np.testing.assert_allclose(per_tok, theirs, rtol=1e-12)
  f = fid("gft")
  assert "fsdp_gft_trainer.py" in f.read and "gft_dataset.py" in f.read
  assert any("fsdp_gft_trainer.py" in d and "gft(tau=1.0)" in d and "n_micro" in d for d in f.deviations)


# ------------------------------------------------------------------------- entropy_gated_contrastive (not held)


def _reasonmaxxer_step(logp, mask, gate, adv, grad_accum, adv_clip=2.5):
  """farukakgul/ReasonMaxxer@72182e90 scripts/train_reasonmaxxer.py 'adv_ce' (kl_weight 0 here): --batch_size 1, so
  each micro-batch is one rollout; per rollout: pos / neg = gated ∧ A ≷ 0, Σ CE·clip(A) ÷ their count (0 with none);
  (loss / grad_accum_steps).backward() summed over the step's rollouts."""
  total = 0.0
  for i in range(logp.shape[0]):
    a = np.clip(adv[i], -adv_clip, adv_clip)
    eff = gate[i] & mask[i] & (a != 0)
    if eff.sum() == 0:
      continue
    total += (-logp[i] * a)[eff].sum() / eff.sum() / grad_accum
  return total


def test_entropy_gated_contrastive_per_rollout_mean_of_the_authors_recipe():
  rng = np.random.default_rng(56)
  b, t = 8, 12  # one optimizer step of the recipe: 8 rollouts (--grad_accum_steps 8, --batch_size 1)
  mask = np.zeros((b, t), bool)
  for i in range(b):
    mask[i, :rng.integers(6, t + 1)] = True
  logp = -rng.uniform(0.05, 3.0, (b, t))
  h = rng.uniform(0.0, 1.0, (b, t))
  rewards = np.array([1, 0, 1, 0, 1, 0, 1, 0], float)
  adv = np.where(rewards > 0.5, 1.0, -1.0)  # |A| = 1: c = ±1 is theirs
  # equal gated counts per rollout (3 each): ours = theirs × gated / loss tokens
  h_eq = h.copy()
  for i in range(b):
    h_eq[i, :3] = 2.0
  gate_eq = (h_eq > 1.4) & mask
  obj = O.chain(O.entropy_gated_contrastive(tau=1.4))
  ours, _, _ = _microbatched(obj, tuple(slice(i, i + 1) for i in range(b)), mask, logp, rewards=rewards,
                             extras={"entropy_base": h_eq})
  theirs = _reasonmaxxer_step(logp, mask, gate_eq, adv, grad_accum=8)
  np.testing.assert_allclose(ours, theirs * gate_eq.sum() / mask.sum(), rtol=1e-12)
  # unequal gated counts: theirs weighs each rollout equally, ours each token: no constant relates them
  h_un = h.copy()
  for i in range(b):
    h_un[i, :1 + i % 4] = 2.0
  gate_un = (h_un > 1.4) & mask
  ours_un, _, _ = _microbatched(obj, (slice(0, b),), mask, logp, rewards=rewards, extras={"entropy_base": h_un})
  theirs_un = _reasonmaxxer_step(logp, mask, gate_un, adv, grad_accum=8)
  assert abs(ours_un - theirs_un * gate_un.sum() / mask.sum()) > 1e-3
  # their per-rollout mean is Σ_b mean_gated(b) / 8
  per_row = [(-logp[i] * adv[i])[gate_un[i]].mean() for i in range(b)]
  np.testing.assert_allclose(theirs_un, np.sum(per_row) / 8, rtol=1e-12)


def test_entropy_gated_contrastive_record_names_the_authors_repository_and_recipe():
  row = ROWS["entropy_gated_contrastive"]
  f = row.fidelity
  assert f.basis == "authors_code" and f.reference.startswith("github.com/farukakgul/ReasonMaxxer: ")
  text = record("entropy_gated_contrastive")
  assert "authorship unconfirmed)" not in f.reference and not any("unconfirmed" in d for d in f.deviations)
  assert "outside the public scripts" not in text and "score_rollouts.py" in text
  for s in ("farukakgul/ReasonMaxxer@72182e90", "ansz42/ReasonMaxxer", "04_train_tau1p4.sh", "--tau_pos 1.4",
            "--grad_accum_steps 8", "--kl_weight 0.2", "--curriculum_ordering", "--require_both_signs",
            "--trim_fraction 0.8"):
    assert s in f.read, s
  d = defaults("entropy_gated_contrastive")
  assert "τ 1.4" in d["tau / rho"][1] and "kl_weight 0.2" in d["KL anchor off the gate"][1]
  assert "--batch_size 1" in d["aggregation"][1] and "grad_accum_steps 8" in d["aggregation"][1]
  assert "signal_clarity" in d["data order"][1]
  assert "untempered" in d["log-probs / entropy temperature"][1]
  assert any("curriculum" in x for x in f.deviations)


# --------------------------------------------------------------------------------------- token_sum (held)


def test_token_sum_equals_verl_091_token_sum_on_devices_and_microbatches():
  """The verl 0.9.1 PyPI wheel core_algos.py:1176-1180: 'token-sum' = masked_sum(l, m)·dp_size per micro-batch; the
  engine backpropagates each micro-batch unscaled and FSDP averages the dp ranks' gradients: Σ over every token."""
  rng, mask, mbs = _unequal(57)
  loss_tok = rng.normal(size=mask.shape)
  dp = 2
  ranks = (mbs[:2], mbs[2:])  # rank 0: two micro-batches, rank 1: one
  theirs = sum(sum((loss_tok[s] * mask[s]).sum() * dp for s in r) for r in ranks) / dp
  # ours: an identity per-token term (l = logp) aggregated with token_sum over the micro-batches
  ident = lambda out, batch: (out.logp, {})  # noqa: E731
  ours, g, _ = _microbatched(O.chain(ident, aggregate=O.token_sum), mbs, mask, loss_tok)
  np.testing.assert_allclose(ours, theirs, rtol=1e-12)
  np.testing.assert_allclose(g, mask.astype(float), rtol=0, atol=0)


def test_token_sum_is_verl_070_legacy_sum_norm_times_t_ga_dp():
  """volcengine/verl@v0.7.0 core_algos.py:819-823 'seq-mean-token-sum-norm': Σ l·m ÷ loss_scale_factor (None:
  loss_mask.shape[-1] = T); the legacy dp_actor multiplies each micro-batch by 1/gradient_accumulation
  (dp_actor.py:463-467, 541-543); FSDP averages dp ranks. Ours (token_sum) = theirs × T × GA × dp."""
  rng, mask, mbs = _unequal(58)
  loss_tok = rng.normal(size=mask.shape)
  t, ga, dp = mask.shape[1], len(mbs), 1
  theirs = sum((loss_tok[s] * mask[s]).sum() / t / ga for s in mbs) / dp
  ident = lambda out, batch: (out.logp, {})  # noqa: E731
  ours, _, _ = _microbatched(O.chain(ident, aggregate=O.token_sum), mbs, mask, loss_tok)
  np.testing.assert_allclose(ours, theirs * t * ga * dp, rtol=1e-12)
  assert any("sum_bt l*m / T (ours ÷ T)" in d for d in fid("token_sum").deviations)


# ------------------------------------------------------------------------------------ reinforce_pp (held)


def _verl_masked_whiten(x, m):
  """verl utils/torch_functional.py (the 0.9.1 wheel :294-345, v0.7.0 the same): mean Σ/(Σm + 1e-8); var
  masked_mean of centred² × n/(n−1); (x − mean)·rsqrt(var + 1e-8)."""
  n = m.sum()
  mean = (x * m).sum() / (n + 1e-8)
  var = (((x - mean) ** 2) * m).sum() / (n + 1e-8) * n / (n - 1)
  return (x - mean) / np.sqrt(var + 1e-8)


def _verl_rpp(r, m, gamma, version):
  """REINFORCE++ returns and advantages: the verl 0.9.1 wheel core_algos.py:693-731 (carry through mask-0) or
  v0.7.0 core_algos.py:581-616 (running_return reset by × mask after each step)."""
  b, t = r.shape
  ret = np.zeros_like(r)
  run = np.zeros(b)
  for j in reversed(range(t)):
    if version == "0.9.1":
      new = r[:, j] + gamma * run
      ret[:, j] = new * m[:, j]
      run = new * m[:, j] + run * (1 - m[:, j])
    else:
      run = r[:, j] + gamma * run
      ret[:, j] = run
      run = run * m[:, j]
  return _verl_masked_whiten(ret, m) * m, ret


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_reinforce_pp_equals_verl_091_and_reset_equals_v070(gamma):
  rng = np.random.default_rng(59)
  b, t = 6, 10
  m = np.zeros((b, t))
  for i in range(b):
    m[i, :rng.integers(3, t + 1)] = 1
  m[0, 3:5] = 0  # holes: multi-turn observation spans
  m[1, 2] = 0
  r = np.where(m > 0, rng.normal(scale=0.3, size=(b, t)), 0.0)
  last = m.shape[1] - 1 - np.argmax(m[:, ::-1], axis=1)
  r[np.arange(b), last] += rng.integers(0, 2, b)  # an outcome reward on each row's last token
  with jax.enable_x64(True):
    ours, info = A.reinforce_pp(jnp.asarray(r), jnp.asarray(m > 0), gamma=gamma)
    ours_reset, _ = A.reinforce_pp(jnp.asarray(r), jnp.asarray(m > 0), gamma=gamma, reset_at_mask=True)
  theirs, ret = _verl_rpp(r, m, gamma, "0.9.1")
  theirs_070, _ = _verl_rpp(r, m, gamma, "0.7.0")
  np.testing.assert_allclose(np.asarray(ours), theirs, rtol=1e-7, atol=1e-9)  # Σm + 1e-8 against Σm
  np.testing.assert_allclose(np.asarray(info["returns"]), ret, rtol=1e-12, atol=1e-15)
  np.testing.assert_allclose(np.asarray(ours_reset), theirs_070, rtol=1e-7, atol=1e-9)
  assert np.abs(theirs - theirs_070).max() > 1e-3  # the holes matter
  # hole-free rows agree between the two verl versions
  assert defaults("reinforce_pp")["gamma"] == ("1.0", "algorithm.gamma = 1.0")


def test_reinforce_pp_record_lists_the_example_runs_in_reward_kl():
  """volcengine/verl@v0.7.0 examples/reinforce_plus_plus_trainer/run_qwen2-7b_math_rf.sh: use_kl_in_reward True,
  rollout.n 8; ppo_trainer.yaml:75-108: kl_penalty kl, kl_ctrl fixed, kl_coef 0.001."""
  d = defaults("reinforce_pp")
  assert "True in run_qwen2-7b_math_rf.sh" in d["use_kl_in_reward"][1] and "kl_coef 0.001" in d["use_kl_in_reward"][1]
  assert "rollout.n = 8" in d["group size"][1]
