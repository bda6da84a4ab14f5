"""Issue #51 item 4, twelfth draw (seed 20261217), slice b: an independent re-audit of five in-full rows.

Rows drawn (five of the ten of ``random.Random(20261217).sample(rows, 10)`` over the 109 rows):
seq_mean_token_mean, gae, kl_penalty, gaussian_reward, gspo_token.

Held (2): seq_mean_token_mean, gae. Their "= theirs" claims are checked below against float64 NumPy transcriptions
of the cited lines (volcengine/verl@v0.7.0 core_algos.py:772-827 agg_loss and :212-260 compute_gae_advantage_return,
torch_functional.py:287-340; the same branches in the verl 0.9.1 PyPI wheel; the TRL 1.9.0 PyPI wheel
grpo_trainer.py:3124-3128). Also read for gae, not in the record and changing nothing: verl 0.9.1's default v1 trainer
reaches the same ray_trainer.compute_advantage through trainer_base.py:1743-1802 and v1/utils.py:167-176 (GAE
delegated unchanged), and v0.7.0's critic zeroes the values outside the mask (dp_critic.py:188), which the carry
never reads.

Not held (3), each error fixed in the record and checked here (no implementation changed, no implementation bug
found):

- ``kl_penalty`` (OMITTED): with ``bias_correction=True`` ours multiplies k by exp(log r) with log r clamped to ±20
  (objectives/_kl.py ``_log_ratio``); TRL's coef_1 = exp(log r) is not clamped (the TRL 1.9.0 PyPI wheel
  grpo_trainer.py:3054, 3066). The record had no such deviation (ppo_clip's record lists the same clamp). It also
  left out TRL's reference sync (grpo_config.py:834-855 sync_ref_model False, α 0.6, every 512 steps;
  grpo_trainer.py:1145-1161), off by default and not offered here.
- ``gspo_token`` (OMITTED): the GSPO launch scripts the record cites train each rollout batch as several optimizer
  steps against log π_old fixed before the first: test_gspo_3b_math.sh:74-75 (train_batch_size 512 ÷
  ppo_mini_batch_size 128 = 4, "maintain 4 mini-batches as recommended by the paper"; the record cited :44-73, up to
  the line before), run_qwen30b_gspo.sh:45-46 (256 ÷ 32 = 8), verl's defaults 1024 ÷ 256 = 4. On the first step
  s_i = 1 and the 3e-4 / 4e-4 clip does nothing; it acts from the second. Ours: rl.num_minibatches ×
  rl.updates_per_batch (1 × 2 by default). The record had no row for it (gmpo's, erc's records have one). It also
  did not say that run_qwen30b_gspo.sh runs the engine worker (:180 use_legacy_worker_impl=disable), where the forced
  seq-mean-token-mean divides by global_batch_size = ppo_mini_batch_size × n.
- ``gaussian_reward`` (OMITTED): both OmniQuality-R launch scripts export WANDB_API_KEY="" (RLstage1.sh:24,
  RLstage2.sh:24, "optional") and pass ``--use_wandb ${WANDB_API_KEY}`` unquoted (:129, :132); train_ppo_ray.py:410 /
  train_ppo_ray_improved.py:410 declare --use_wandb type=str, so argparse stops ("expected one argument", exit 2):
  neither script starts as released, and README.md:97, 102 point at examples/scripts/VisualScore/, a folder the
  snapshot does not have. With a key set, sigma 0.8 runs as the record says (the reward values are unchanged).
  Also FALSE: a deviation said "a callable parse gives theirs". The parse also reads problem.answer ('2.971' in
  their data), so a callable reading only the tag raises there (_shaping.py _numbers); theirs needs the references
  stored as '<answer>2.971</answer>', or a callable that falls back to float(text), which then scores a tagless
  bare-number completion that theirs scores 0. Sharpened at the same time: the parsed prediction and target are
  float32 too (< 1e-6 at their 0-5 scores).

Each numeric reference below is a float64 NumPy transcription of the cited lines, written for these tests.
"""
import argparse
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _fidelity import defaults as _defaults, fid as _fid, record as _record


def _batch(mask, adv=None, old=None, ref=None):
  from rljax.types import TrainBatch  # pylint: disable=import-outside-toplevel
  b, t = mask.shape
  with jax.enable_x64(True):
    return TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask),
                      advantages=jnp.asarray(np.zeros((b, t)) if adv is None else adv),
                      group_id=jnp.arange(b, dtype=jnp.int32),
                      logp_old=None if old is None else jnp.asarray(old),
                      logp_ref=None if ref is None else jnp.asarray(ref))


def _out(logp):
  from rljax.types import PolicyOutputs  # pylint: disable=import-outside-toplevel
  return PolicyOutputs(logp=logp, entropy=None)


# ------------------------------------------------------------------------------------ seq_mean_token_mean (held)


def _verl_seq_mean_token_mean(loss, mask, dp_size=1, global_batch_size=None):
  """verl@v0.7.0 core_algos.py:812-818 (the 0.9.1 wheel's :1196-1203 is the same branch)."""
  count = mask.sum(-1)
  seq_losses = (loss * mask).sum(-1) / (count + 1e-8)
  seq_mask = (count > 0).astype(np.float64)
  if global_batch_size is None:
    global_batch_size = seq_mask.sum()
  return (np.where(seq_mask > 0, seq_losses, 0.0) * seq_mask).sum() / global_batch_size * dp_size


def _trl_grpo(loss, mask, ga):
  """TRL 1.9.0 grpo_trainer.py:3124-3128, loss_type 'grpo', one micro-batch, ÷ gradient_accumulation_steps."""
  return ((loss * mask).sum(-1) / np.maximum(mask.sum(-1), 1.0)).mean() / ga


def _ours_agg(loss, mask, slices):
  """chain's form: Σ over micro-batches of the numerator ÷ the whole batch's denominator."""
  from rljax.objectives import seq_mean_token_mean  # pylint: disable=import-outside-toplevel
  with jax.enable_x64(True):
    den = float(seq_mean_token_mean(jnp.asarray(loss), jnp.asarray(mask))[1])
    num = sum(float(seq_mean_token_mean(jnp.asarray(loss[s]), jnp.asarray(mask[s]))[0]) for s in slices)
  return num / den


def test_seq_mean_token_mean_equals_verl_and_trl_without_empty_rows_and_the_recorded_weights_with_them():
  rng = np.random.default_rng(20261217)
  b, t, k = 12, 9, 3
  lengths = rng.integers(1, t + 1, size=b)
  mask = (np.arange(t)[None] < lengths[:, None]).astype(np.float64)
  loss = rng.random((b, t)) + 0.1  # positive: the relative bound below is per sequence and per total
  slices = [slice(i * b // k, (i + 1) * b // k) for i in range(k)]
  ours = _ours_agg(loss, mask, slices)
  one = _verl_seq_mean_token_mean(loss, mask)
  legacy = sum(_verl_seq_mean_token_mean(loss[s], mask[s]) / k for s in slices)  # dp_actor: × 1/gradient_accum.
  dynamic = sum(_verl_seq_mean_token_mean(loss[s], mask[s]) * (mask[s].shape[0] / b) for s in slices)
  engine = sum(_verl_seq_mean_token_mean(loss[s], mask[s], global_batch_size=b) for s in slices)
  trl = sum(_trl_grpo(loss[s], mask[s], k) for s in slices)
  for theirs in (one, legacy, dynamic, engine, trl):
    assert abs(ours - theirs) <= 1e-8 * abs(theirs)  # "each sequence mean differs by ≤ 1e-8 relative"
  assert abs(ours - trl) <= 1e-14  # TRL's max(Σm, 1) has no + 1e-8
  # empty rows: ours ÷ n_non-empty; verl's engine worker and TRL ÷ n_all; the legacy worker 1/(k·n_m) per row
  mask[[1, 2, 3]] = 0.0  # three empty rows, all in the first micro-batch
  ours = _ours_agg(loss, mask, slices)
  engine = sum(_verl_seq_mean_token_mean(loss[s], mask[s], global_batch_size=b) for s in slices)
  trl = sum(_trl_grpo(loss[s], mask[s], k) for s in slices)
  np.testing.assert_allclose(ours * (b - 3) / b, engine, rtol=1e-8)
  np.testing.assert_allclose(ours * (b - 3) / b, trl, rtol=1e-12)
  per_seq = (loss * mask).sum(-1) / np.maximum(mask.sum(-1), 1.0)
  legacy = sum(_verl_seq_mean_token_mean(loss[s], mask[s]) / k for s in slices)
  weights = np.array([1 / (k * 1)] * 1 + [0.0] * 3 + [1 / (k * 4)] * 8)  # first micro-batch: one non-empty row
  np.testing.assert_allclose(legacy, (weights * per_seq).sum(), rtol=1e-8)
  assert abs(legacy - ours) > 1e-3
  f = _fid("seq_mean_token_mean")
  assert any("1/(k·n_m)" in x and "1/n_all" in x for x in f.deviations)
  assert any("an empty row: ours ÷ n_non-empty, TRL ÷ n_all" in x for x in f.deviations)


# ------------------------------------------------------------------------------------------------------ gae (held)


def _verl_gae(rewards, values, mask, gamma, lam):
  """verl@v0.7.0 core_algos.py:212-260 compute_gae_advantage_return, values × mask (dp_critic.py:188) and
  torch_functional.py:287-340 masked_whiten (masked_mean ÷ (Σm + 1e-8), unbiased masked_var, rsqrt(var + 1e-8))."""
  b, t = rewards.shape
  values = values * mask
  nextvalues, lastgaelam, out = np.zeros(b), np.zeros(b), []
  for i in reversed(range(t)):
    delta = rewards[:, i] + gamma * nextvalues - values[:, i]
    new = delta + gamma * lam * lastgaelam
    nextvalues = values[:, i] * mask[:, i] + (1 - mask[:, i]) * nextvalues
    lastgaelam = new * mask[:, i] + (1 - mask[:, i]) * lastgaelam
    out.append(lastgaelam)
  adv = np.stack(out[::-1], axis=1)
  returns = adv + values
  n = mask.sum()
  mean = (adv * mask).sum() / (n + 1e-8)
  var = (((adv - mean) ** 2) * mask).sum() / (n + 1e-8) * (n / (n - 1))
  return (adv - mean) / np.sqrt(var + 1e-8), returns


@pytest.mark.parametrize("gamma,lam", [(1.0, 1.0), (0.99, 0.95)])
def test_gae_equals_verl_on_the_mask_with_observation_tokens_and_nan_padding(gamma, lam):
  from rljax.advantages import gae  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(17)
  b, t = 6, 10
  lengths = rng.integers(3, t + 1, size=b)
  mask = (np.arange(t)[None] < lengths[:, None]).astype(np.float64)
  mask[0, 2:4] = 0.0  # multi-turn observation tokens inside a response
  mask[3, 1] = 0.0
  values = rng.normal(size=(b, t))
  outcome = rng.random(b)
  last = np.array([np.flatnonzero(row)[-1] for row in mask])
  token_rewards = np.zeros((b, t))
  token_rewards[np.arange(b), last] = outcome  # verl's token_level_scores: the score on the last response token
  theirs_adv, theirs_ret = _verl_gae(token_rewards, values, mask, gamma, lam)
  padded = np.where(mask > 0, values, np.nan)  # ours never reads V outside the mask
  with jax.enable_x64(True):
    for rewards in (outcome, token_rewards):
      adv, info = gae(jnp.asarray(rewards), jnp.asarray(padded), jnp.asarray(mask), gamma=gamma, lam=lam)
      adv, ret = np.asarray(adv), np.asarray(info["returns"])
      on = mask > 0
      np.testing.assert_allclose(adv[on], theirs_adv[on], rtol=1e-7, atol=1e-9)  # verl's + 1e-8 in Σm
      np.testing.assert_allclose(ret[on], theirs_ret[on], rtol=1e-12, atol=1e-12)
      assert np.all(adv[~on] == 0.0)  # recorded: ours multiplies the whitened A by the mask
  assert np.abs(theirs_adv[mask == 0]).max() > 0.1  # verl leaves whitened values there
  d = _defaults("gae")
  assert d["gamma"] == ("1.0", "algorithm.gamma = 1.0") and d["whiten_eps"] == ("1e-8", "1e-8")


# ----------------------------------------------------------------------------------------- kl_penalty (not held)


def _verl091_kl_value(logp, ref, name):
  """the verl 0.9.1 PyPI wheel core_algos.py:2188-2251: the '+' stripped, kl_penalty_forward's value."""
  base = name[:-1] if name.endswith("+") else name
  d = logp - ref
  if base in ("kl", "k1"):
    return d
  if base == "abs":
    return np.abs(d)
  if base in ("mse", "k2"):
    return 0.5 * d ** 2
  kl = np.clip(ref - logp, -20, 20)
  return np.clip(np.exp(kl) - kl - 1, -10, 10)


def _trl_kl(logp, ref, old=None):
  """TRL 1.9.0 grpo_trainer.py:3069-3076: k3, × coef_1 = exp(log π_θ − log π_old) (:3054, 3066) with
  use_bias_correction_kl; with its d/d log π_θ (coef_1 is not detached)."""
  k3 = np.exp(ref - logp) - (ref - logp) - 1
  dk3 = 1 - np.exp(ref - logp)
  if old is None:
    return k3, dk3
  r = np.exp(logp - old)
  return k3 * r, dk3 * r + k3 * r


def _ours_kl(logp, ref, old=None, **kw):
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  mask = np.ones_like(logp)
  batch = _batch(mask, old=old, ref=ref)
  term = O.kl_penalty(beta=1.0, **kw)
  with jax.enable_x64(True):
    f = lambda lp: term(_out(lp), batch)[0]  # noqa: E731
    value = np.asarray(f(jnp.asarray(logp)))
    grad = np.asarray(jax.grad(lambda lp: jnp.sum(f(lp)))(jnp.asarray(logp)))
  return value, grad


def test_kl_penalty_estimators_equal_verl_and_trl_and_the_bias_correction_clamp_is_now_recorded():
  rng = np.random.default_rng(51)
  ref = -rng.random((4, 7)) * 3
  logp = ref + rng.normal(scale=0.5, size=ref.shape)
  for name in ("kl", "abs", "k2", "low_var_kl", "k3+", "low_var_kl+", "k1+"):
    value, grad = _ours_kl(logp, ref, estimator=name)
    np.testing.assert_allclose(value, _verl091_kl_value(logp, ref, name), rtol=1e-12, atol=1e-12)
    if name.endswith("+"):  # verl's straight-through: k2's gradient, Δ
      np.testing.assert_allclose(grad, logp - ref, rtol=1e-12, atol=1e-12)
  trl_value, trl_grad = _trl_kl(logp, ref)
  value, grad = _ours_kl(logp, ref, estimator="k3", clamp=False)
  np.testing.assert_allclose(value, trl_value, rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(grad, trl_grad, rtol=1e-10, atol=1e-12)
  # TRL's use_bias_correction_kl: equal while |log r| ≤ 20 ...
  old = logp - rng.normal(scale=0.3, size=ref.shape)
  trl_value, trl_grad = _trl_kl(logp, ref, old)
  value, grad = _ours_kl(logp, ref, old, estimator="k3", clamp=False, bias_correction=True)
  np.testing.assert_allclose(value, trl_value, rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(grad, trl_grad, rtol=1e-10, atol=1e-12)
  # ... and past it ours weighs k by e^20 with no gradient through the ratio; TRL by the full ratio
  lp, rf, od = np.array([[-1.0]]), np.array([[-1.2]]), np.array([[-26.0]])  # log r = 25
  trl_value, trl_grad = _trl_kl(lp, rf, od)
  value, grad = _ours_kl(lp, rf, od, estimator="k3", clamp=False, bias_correction=True)
  k3, dk3 = _trl_kl(lp, rf)
  np.testing.assert_allclose(value, k3 * math.exp(20.0), rtol=1e-12)
  np.testing.assert_allclose(grad, dk3 * math.exp(20.0), rtol=1e-10)
  np.testing.assert_allclose(trl_value / value, math.exp(5.0), rtol=1e-10)
  assert abs(trl_grad[0, 0] - grad[0, 0]) > 1e7
  d = _defaults("kl_penalty")
  assert d["bias_correction ratio clamp"] == ("log r clamped to ±20 before exp", "TRL coef_1 = exp(log r), no clamp")
  assert "sync_ref_model False" in d["reference-model sync"][1] and "every 512 steps" in d["reference-model sync"][1]
  f = _fid("kl_penalty")
  assert any("equal while |log r| ≤ 20" in x and "e^{±20}" in x for x in f.deviations)
  assert any("sync_ref_model" in x and "not offered" in x for x in f.deviations)
  assert "Twelfth draw" in f.read and "grpo_trainer.py:3037, 3054, 3066" in f.read
  assert "grpo_config.py:834-855" in f.read


# ------------------------------------------------------------------------------------ gaussian_reward (not held)

_THEIR_FORMAT = (r"^(?=(?:.*<think>){1})(?=(?:.*<\/think>){1})"
                 r"(?=(?:.*<answer>){1})(?=(?:.*<\/answer>){1})"
                 r"(?!.*<think>.*<think>)"
                 r"(?!.*<\/think>.*<\/think>)"
                 r"(?!.*<answer>.*<answer>)"
                 r"(?!.*<\/answer>.*<\/answer>)"
                 r".*<think>(.+?)</think>\s*<answer>.+?</answer>.*$")


def _their_reward(response, sol, sigma=0.8):
  """yeppp27/VisualScore@479b9f3b math_verifier_wolatex_regress_specifc.py: get_reward gaussian_rbf (:160-195,
  0.0 on no tag or a failed float()), verify_format (:249-260, 0.5), rewards = format + acc (:331-354)."""
  fmt = 0.5 if re.search(_THEIR_FORMAT, response, re.DOTALL) else 0.0
  match = re.search(r"<answer>(.*?)</answer>", response, re.DOTALL)
  try:
    acc = 0.0 if not match else math.exp(-((float(match.group(1).strip()) - float(sol.strip())) ** 2)
                                         / (2 * sigma ** 2))
  except ValueError:
    acc = 0.0
  return fmt + acc, acc


def _tag_number(text):
  m = re.search(r"<answer>(.*?)</answer>", text, re.DOTALL)
  try:
    return None if not m else float(m.group(1).strip())
  except ValueError:
    return None


def _tag_or_float(text):
  if "<answer>" in text:
    return _tag_number(text)
  try:
    return float(text.strip())
  except ValueError:
    return None


def test_gaussian_reward_equals_their_kernel_and_their_scripts_do_not_start_as_released():
  from rljax import recipes  # pylint: disable=import-outside-toplevel
  from rljax.envs import Problem  # pylint: disable=import-outside-toplevel
  completions = ["<think>sharp, well lit</think><answer>3.817</answer>",
                 "<think>a</think> <answer>2.1</answer> then 4.9",
                 "<think>blurry</think><answer>about three</answer>",
                 "no tags, 2.971",
                 "<think>x</think><answer>4.123456789</answer>",
                 " 3.25"]
  problems = [Problem("q", "2.971")] * len(completions)
  theirs = np.array([_their_reward(c, "2.971") for c in completions])
  # the record said "a callable parse gives theirs": the parse also reads problem.answer, so a tag-only one raises
  with pytest.raises(ValueError, match="reference answer '2.971'"):
    recipes.stage("gaussian_reward", sigma=0.8, parse=_tag_number).fn(completions, problems)
  wrapped = [Problem("q", "<answer>2.971</answer>")] * len(completions)  # the references stored in the tag
  ours_tag = np.asarray(recipes.stage("gaussian_reward", sigma=0.8, parse=_tag_number).fn(completions, wrapped))
  np.testing.assert_allclose(ours_tag, theirs[:, 1], rtol=0, atol=1e-6)  # float32 pred, target and reward
  assert np.abs(ours_tag.astype(np.float64) - theirs[:, 1]).max() > 0  # not bit-equal: float32
  fallback = np.asarray(recipes.stage("gaussian_reward", sigma=0.8, parse=_tag_or_float).fn(completions, problems))
  np.testing.assert_allclose(fallback[:5], theirs[:5, 1], rtol=0, atol=1e-6)
  assert theirs[5, 1] == 0.0 and fallback[5] == pytest.approx(math.exp(-(3.25 - 2.971) ** 2 / 1.28), abs=1e-6)
  ours_number = np.asarray(recipes.stage("gaussian_reward", sigma=0.8).fn(completions, problems))
  np.testing.assert_allclose(ours_number[[0, 4]], theirs[[0, 4], 1], atol=1e-6)  # one tag, nothing after it
  assert ours_number[1] != pytest.approx(theirs[1, 1], abs=1e-3)  # 'number' reads the last number (recorded)
  assert ours_number[3] > 0.99 and theirs[3, 1] == 0.0  # no tag: theirs 0, 'number' reads 2.971
  assert theirs[0, 0] == pytest.approx(0.5 + theirs[0, 1])  # their total adds the format term
  # the launch scripts: WANDB_API_KEY="" (:24), --use_wandb ${WANDB_API_KEY} unquoted (:129 / :132), and
  # train_ppo_ray.py:410 / train_ppo_ray_improved.py:410 --use_wandb type=str
  parser = argparse.ArgumentParser(exit_on_error=False)
  parser.add_argument("--use_wandb", type=str, default=None)
  parser.add_argument("--wandb_run_name", type=str, default=None)
  parser.add_argument("--wandb_group", type=str, default=None)
  key = ""
  argv = ["--use_wandb", *key.split(), "--wandb_run_name", "iqa-r1-ava-evalmuse-koniq-grpo-score-7B-rl-stage1",
          "--wandb_group", "iqa-r1-training"]
  with pytest.raises(argparse.ArgumentError, match="expected one argument"):
    parser.parse_args(argv)
  assert parser.parse_args(["--use_wandb", "some-key", *argv[1:]]).use_wandb == "some-key"
  f = _fid("gaussian_reward")
  assert "Twelfth draw" in f.read and "neither script starts as released" in f.read
  assert "RLstage1.sh:129 and RLstage2.sh:132" in f.read and "README.md:97, 102" in f.read
  assert _defaults("gaussian_reward")["sigma"] == ("1.0", "0.8 (train scripts, once started: a WandB key must be "
                                                          "set); CLI default 1.0")
  assert any("stop at argparse" in x and "not a difference of the reward" in x for x in f.deviations)
  assert any("the parsed prediction and target are float32" in x for x in f.deviations)
  assert any("'<answer>2.971</answer>'" in x and "a bare number (theirs 0)" in x for x in f.deviations)


# ----------------------------------------------------------------------------------------- gspo_token (not held)


def _verl_gspo(old, new, adv, mask, clip_low=3e-4, clip_high=4e-4):
  """verl@v0.7.0 core_algos.py:1030-1061 compute_policy_loss_gspo with the forced agg_loss 'seq-mean-token-mean'
  (:812-818, one micro-batch): (loss, d loss / d log π). The token ratio is exp(min(sg(seq mean log r), 10)) with
  d s_t / d log π_t = s_t below the cap; torch.maximum passes the gradient of the unclipped branch unless the clipped
  one is strictly larger (ties split, summing to the same)."""
  seq = ((new - old) * mask).sum(-1) / np.maximum(mask.sum(-1), 1.0)
  log_s = np.minimum(np.broadcast_to(seq[:, None], new.shape), 10.0)
  s = np.exp(log_s)
  pg1 = -adv * s
  pg2 = -adv * np.clip(s, 1 - clip_low, 1 + clip_high)
  pg = np.maximum(pg1, pg2)
  count = mask.sum(-1)
  w = mask / (count + 1e-8)[:, None] / (count > 0).sum()
  loss = (pg * w).sum()
  live = (pg1 >= pg2) & (seq[:, None] < 10.0)
  return loss, np.where(live, -adv * s, 0.0) * w


def _ours_gspo(old, new, adv, mask):
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  batch = _batch(mask, adv=adv, old=old)
  obj = O.chain(O.gspo_token(), aggregate=O.seq_mean_token_mean)
  with jax.enable_x64(True):
    f = lambda lp: obj(_out(lp), batch)[0]  # noqa: E731
    return float(f(jnp.asarray(new))), np.asarray(jax.grad(f)(jnp.asarray(new)))


def test_gspo_token_equals_verl_and_the_clip_only_acts_after_the_first_of_their_mini_batches():
  rng = np.random.default_rng(2507)
  b, t = 8, 12
  lengths = rng.integers(2, t + 1, size=b)
  mask = (np.arange(t)[None] < lengths[:, None]).astype(np.float64)
  old = -rng.random((b, t)) * 2 - 0.05
  adv = np.repeat(np.where(np.arange(b) % 2 == 0, 1.0, -1.0)[:, None] * (rng.random((b, 1)) + 0.5), t, axis=1)
  # the first optimizer step of a rollout batch: π_θ = π_old, s_i = 1, no clip anywhere
  loss, grad = _ours_gspo(old, old.copy(), adv, mask)
  t_loss, t_grad = _verl_gspo(old, old.copy(), adv, mask)
  assert loss == pytest.approx(t_loss, rel=1e-8)
  np.testing.assert_allclose(grad, t_grad, rtol=1e-7, atol=1e-15)
  assert np.all(t_grad[mask > 0] != 0)  # every token has a gradient: the clip does not act
  # a later step (their 2nd-4th mini-batch): π_θ has moved by ~1e-3 per token against the same π_old
  drift = rng.normal(scale=1e-3, size=(b, t))
  new = old + drift
  loss, grad = _ours_gspo(old, new, adv, mask)
  t_loss, t_grad = _verl_gspo(old, new, adv, mask)
  assert loss == pytest.approx(t_loss, rel=1e-8)
  np.testing.assert_allclose(grad, t_grad, rtol=1e-7, atol=1e-15)
  seq = (drift * mask).sum(-1) / mask.sum(-1)
  clipped = ((adv[:, 0] > 0) & (seq > math.log(1 + 4e-4))) | ((adv[:, 0] < 0) & (seq < math.log(1 - 3e-4)))
  assert clipped.any() and not clipped.all()
  assert np.all(t_grad[clipped] == 0) and np.all(t_grad[~clipped][mask[~clipped] > 0] != 0)
  d = _defaults("gspo_token")
  ours, theirs = d["optimizer steps per rollout batch"]
  assert "1 × 2" in ours and "rl.num_minibatches=4, rl.updates_per_batch=1" in ours
  assert theirs.startswith("4 in test_gspo_3b_math.sh") and "8 in run_qwen30b_gspo.sh" in theirs
  assert "clip acts from the second" in theirs
  f = _fid("gspo_token")
  assert "test_gspo_3b_math.sh:74-77" in f.read and "run_qwen30b_gspo.sh:45-47" in f.read and ":180" in f.read
  assert any("rl.num_minibatches=4 with rl.updates_per_batch=1 is theirs" in x for x in f.deviations)
  assert any("use_legacy_worker_impl=disable" in x and "global_batch_size" in x for x in f.deviations)
  assert "optimizer steps against that log π_old" in f.placement
  assert "Twelfth draw" in _record("gspo_token")
