"""Issue #51 item 4, seventeenth draw (seed 20261222), part a: an independent re-audit of five in-full rows.

Rows drawn: tempo, rpg, decoupled_ppo, implicit_progress_reward, opd.

Held (2): tempo, decoupled_ppo. Their "= theirs" claims are checked below against float64 NumPy transcriptions
(tempo: fatebreaker/tempo@0a1c273d verl/trainer/ppo/core_algos.py:261-352 compute_tempo_outcome_advantage, its
GRPO pass, the prefix walk and the early fill; decoupled_ppo: inclusionAI/AReaL@4aef98d8
areal/utils/functional/functional.py:185-545 ppo_actor_loss_fn + apply_rejection_sampling at the example configs'
eps_clip 0.4, rejection_sampling ratio / token / mask / upper 5.0, the denominator counted before the rejection).

Not held (3), each error fixed in the record and checked here (no implementation changed, no implementation bug
found):

- ``rpg`` (OMITTED; a source not read): the record cites arXiv:2505.17508 as its source, yet its read field names
  code only. The paper (RPG.pdf, committed at the cited commit complex-reasoning/RPG@ec8e30bd, the ICLR 2026
  version) defines its RPG loss as a dual clip of w·Â with the KL inside the clipped advantage (Sec. 3.3 p. 6,
  Algorithm 1 p. 24: Â_RKL = (R − b) − β(log w + 1)); the released scripts' code adds the KL as a separate,
  unclipped kl_loss term (the form the record calls theirs). Where w leaves [1 − ε1, 1 + ε2] the two gradients
  differ (at A = 1, w = 1.5, β = 1e-4: the paper's ∂L/∂log π = 1.28·β, the code's β·w(log w + 1) = 2.108·β).
  The paper's runs (Sec. 5 p. 8, Table 3 p. 9, Appendix H pp. 25-26) use Qwen3-4B and Qwen2.5-7B-Instruct at 2K /
  4K / 8K context, 400 steps, lr 1e-6, "per-GPU mini-batch size 32"; the stored scripts are Qwen2.5-Math-7B or
  Qwen2.5-7B-Instruct at 2K only (no Qwen3-4B, 4K or 8K script), the rf scripts at lr 5e-7, and verl's
  ppo_mini_batch_size 32 is prompts over all GPUs (32 × 16 / 8 = 64 rows per GPU). The paper's reference update
  is "every K optimizer steps, or when a moving average of token-level KL exceeds a target κ" (p. 9); the code
  resets it each step (16 mini-batches). None of this was in the record.
- ``implicit_progress_reward`` (OMITTED): the cited commit deeplearning-wisc/progress-advantage@9284b4c0 (the
  record's scoring.py) also holds runners/sokoban_bon.py and runners/merged_bon.py, best-of-N runners the record
  did not read: their headline score is the "a-priori (token=mean, step=mean)" aggregation with no β (= 1), an
  empty span of either model scores 0 for that model, and the pair is an RL run's checkpoint and its base
  (merged_bon.py: --base-path "the base reference (Qwen2.5-3B)", or a weight-space merge π_α = base + α(π_θ −
  base), α in 0.1..0.9) — not MODEL_PAIRS' post-trained / base checkpoints the record gave as the only reference.
- ``opd`` (OMITTED): the record gives run-qwen3-8B-opd-megatron.sh as "GRPO + OPD". Its teacher is the student's
  own starting checkpoint: --opd-teacher-load /root/Qwen3-8B_torch_dist (:87) is the --ref-load (:29) the student
  starts from, and examples/on_policy_distillation/README.md:70 says "This example uses the same model as both
  student and teacher (for demonstration only)". The OPD term of that run is −coef·(log π_old − log π_init) per
  token, 0 on the first step, a k1 penalty toward the initial policy in the advantage, not a distillation signal.
  Neither side's teacher was in the record: here the RL loop's logp_teacher is the reference forward, the frozen
  policy at the start of RL (rljax/stages/_data.py:145-147, rljax/train/_rl.py:89), so ours reproduces the Megatron
  demo run; the SGLang script's teacher (Qwen3-32B, run-qwen3-8B-opd.sh:15) has no RL-loop setting here.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np

from _fidelity import ROWS, defaults as _defaults, fid as _fid, record as _record, train_batch


# ----------------------------------------------------------------------------------------------- tempo (held)


def _their_tempo(rewards, responses, response_mask, index, epsilon=1e-6, norm=True):
  """fatebreaker/tempo@0a1c273d core_algos.py:261-352 compute_tempo_outcome_advantage, float64 transcription.

  GRPO pass (:299-317; a one-row group mean 0 std 1), then per row: group_mean / torch.std (ddof 1) of the raw
  scores of the uid; the walk over j while response_mask[i, j] != 0: branch = rows of previous_branch whose token
  j equals row i's, value (R_i − mean + mean R(branch) − mean R(previous_branch)) / (std + eps); a previous
  branch of one row fills the rest of the row and stops; finally × response_mask."""
  scores = np.asarray(rewards, np.float64)
  b, t = responses.shape
  groups = {}
  for i in range(b):
    groups.setdefault(index[i], []).append(i)
  grpo = np.empty(b)
  for i in range(b):
    rows = groups[index[i]]
    if len(rows) == 1:
      mean, std = 0.0, 1.0
    else:
      mean, std = scores[rows].mean(), scores[rows].std(ddof=1)
    grpo[i] = (scores[i] - mean) / (std + epsilon) if norm else scores[i] - mean
  out = grpo[:, None] * response_mask
  for i in range(b):
    prev = groups[index[i]]
    gm = scores[prev].mean()
    gs = scores[prev].std(ddof=1) if len(prev) > 1 else float("nan")
    for j in range(t):
      if response_mask[i, j] == 0:
        break
      branch = [k for k in prev if responses[i, j] == responses[k, j]]
      val = scores[i] - gm + scores[branch].mean() - scores[prev].mean()
      out[i, j] = val / (gs + epsilon) if norm else val
      if len(prev) == 1:
        out[i, j:] = out[i, j]
        break
      prev = branch
  return out * response_mask


def _tempo_case(seed, n_groups=3, n=7, t=9, vocab=3, pad=0):
  rng = np.random.default_rng(seed)
  b = n_groups * n
  tokens = rng.integers(1, vocab + 1, size=(b, t))
  for g in range(n_groups):  # shared prefixes: copy a random prefix of an earlier row of the group
    for r in range(1, n):
      src = g * n + rng.integers(0, r)
      k = rng.integers(0, t)
      tokens[g * n + r, :k] = tokens[src, :k]
  lengths = rng.integers(2, t + 1, size=b)
  mask = (np.arange(t)[None, :] < lengths[:, None]).astype(np.float64)
  responses = np.where(mask > 0, tokens, pad)  # right-padded with the pad id (never a real token here)
  rewards = rng.integers(0, 2, size=b).astype(np.float64) + 0.25 * rng.random(b)
  gid = np.repeat(np.arange(n_groups), n)
  return rewards, responses, mask, gid


def test_tempo_equals_their_compute_tempo_outcome_advantage_at_the_defaults():
  from rljax.advantages import tempo  # pylint: disable=import-outside-toplevel
  for seed in (20261222, 1, 2):
    rewards, responses, mask, gid = _tempo_case(seed)
    theirs = _their_tempo(rewards, responses, mask, gid)
    with jax.enable_x64(True):
      ours, _ = tempo(jnp.asarray(rewards), jnp.asarray(responses), jnp.asarray(mask > 0), jnp.asarray(gid))
      ours_sort, _ = tempo(jnp.asarray(rewards), jnp.asarray(responses), jnp.asarray(mask > 0), jnp.asarray(gid),
                           max_group_size=None)
    np.testing.assert_allclose(np.asarray(ours), theirs, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(ours_sort), theirs, rtol=0, atol=1e-12)
    # the TD term is not trivially zero in these cases
    grpo = (rewards - np.array([rewards[gid == g].mean() for g in gid])) / (
        np.array([rewards[gid == g].std(ddof=1) for g in gid]) + 1e-6)
    assert np.abs(theirs - grpo[:, None] * mask).max() > 0.1


def test_tempo_without_std_equals_their_norm_adv_by_std_false():
  from rljax.advantages import tempo  # pylint: disable=import-outside-toplevel
  rewards, responses, mask, gid = _tempo_case(7)
  theirs = _their_tempo(rewards, responses, mask, gid, norm=False)
  with jax.enable_x64(True):
    ours, _ = tempo(jnp.asarray(rewards), jnp.asarray(responses), jnp.asarray(mask > 0), jnp.asarray(gid),
                    scale="none")
  np.testing.assert_allclose(np.asarray(ours), theirs, rtol=0, atol=1e-12)


def test_tempo_record_keeps_its_script_values():
  f = _fid("tempo")
  assert "rollout.n 7" in f.read and "train_batch_size 512" in f.read and "max_response_length 8192" in f.read
  d = _defaults("tempo")
  assert "NaN" in d["singleton group"][1] and "1e-6" in d["eps, std_ddof"][1]


# ------------------------------------------------------------------------------------------------ rpg (not held)


def _verl_dual_clip(logp, old, adv, lo=0.2, hi=0.28, c=10.0):
  """RPG@ec8e30bd core_algos.py compute_policy_loss (per token, before agg_loss): ratio = exp(log π − old),
  max(−A r, −A clamp(r, 1 − lo, 1 + hi)), then for A < 0 min(that, −A c)."""
  r = np.exp(logp - old)
  l1 = np.maximum(-adv * r, -adv * np.clip(r, 1 - lo, 1 + hi))
  return np.where(adv < 0, np.minimum(-adv * c, l1), l1)


def _rpg_rkl_value(logp, ref):
  """RPG@ec8e30bd core_algos.py kl_penalty 'rpg_rkl': clamp(w log w, ±10), w = exp(log π − ref)."""
  w = np.exp(logp - ref)
  return np.clip(w * (logp - ref), -10, 10)


def _paper_alg1_rkl(logp, old, r_minus_b, beta, lo=0.2, hi=0.28, c=10.0):
  """RPG.pdf@ec8e30bd Algorithm 1 (p. 24) lines 10-22 with the RKL advantage analogue of line 12:
  Â = (R − b) − β(log w + 1); L = max(−w Â, −clip(w, 1 − ε1, 1 + ε2) Â); if Â < 0: min(L, −c Â)."""
  log_w = logp - old
  w = np.exp(log_w)
  a_hat = r_minus_b - beta * (log_w + 1.0)
  l_clip = np.maximum(-w * a_hat, -np.clip(w, 1 - lo, 1 + hi) * a_hat)
  return np.where(a_hat >= 0, l_clip, np.minimum(l_clip, -c * a_hat))


def _num_grad(f, x, h=1e-6):
  return (f(x + h) - f(x - h)) / (2 * h)


def _ours_rpg_form(logp, old, adv, beta):
  """ppo_clip(0.2, 0.28, dual_clip=10) + rpg(beta, policy_gradient=False) with logp_ref = logp_old, one token."""
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  from rljax.types import PolicyOutputs  # pylint: disable=import-outside-toplevel
  mask = np.ones((1, 1))
  old_a = np.full((1, 1), old)
  adv_a = np.full((1, 1), adv)
  with jax.enable_x64(True):
    batch = train_batch(mask, adv_a, old_a).replace(logp_ref=jnp.asarray(old_a))
    pg, kl = O.ppo_clip(0.2, 0.28, dual_clip=10.0), O.rpg(beta, policy_gradient=False)

    def total(lp):
      out = PolicyOutputs(logp=lp)
      return jnp.sum(pg(out, batch)[0]) + jnp.sum(kl(out, batch)[0])

    x = jnp.full((1, 1), logp)
    return float(total(x)), float(jax.grad(total)(x)[0, 0])


def test_rpg_ours_equals_their_use_kl_loss_form_and_differs_from_the_papers_algorithm_1():
  beta, old, adv = 1e-4, -1.0, 1.0
  for log_w in (0.05, math.log(1.5), -0.5):  # inside the band, above 1 + ε2, below 1 − ε1
    logp = old + log_w
    code = lambda x: float(_verl_dual_clip(x, old, adv) + beta * _rpg_rkl_value(x, old))
    value, grad = _ours_rpg_form(logp, old, adv, beta)
    assert abs(value - code(logp)) < 1e-12
    assert abs(grad - _num_grad(code, logp)) < 1e-7
  # w = 1.5 > 1 + ε2, A = 1: the PG part is clipped in both; the paper clips the KL with it, the code does not
  logp = old + math.log(1.5)
  paper = lambda x: float(_paper_alg1_rkl(x, old, adv, beta))
  code = lambda x: float(_verl_dual_clip(x, old, adv) + beta * _rpg_rkl_value(x, old))
  g_paper, g_code = _num_grad(paper, logp), _num_grad(code, logp)
  assert abs(g_paper - 1.28 * beta) < 1e-9
  assert abs(g_code - beta * 1.5 * (math.log(1.5) + 1.0)) < 1e-9
  assert abs(g_code / beta - 2.108) < 1e-3
  _, g_ours = _ours_rpg_form(logp, old, adv, beta)
  assert abs(g_ours - g_code) < 1e-9 and abs(g_ours - g_paper) > 0.5 * beta


def test_rpg_record_now_reads_the_paper():
  f = _fid("rpg")
  assert "RPG.pdf" in f.read and "Algorithm 1" in f.read and "Appendix H" in f.read
  assert "Qwen3-4B" in f.read and "8K" in f.read and "400 steps" in f.read
  assert "per-GPU mini-batch size is 32" in f.read
  d = _defaults("rpg")
  assert "Qwen3-4B" in d["models / context (their runs)"][1]
  assert "5e-7" in d["learning rate (their runs)"][1] and "1e-6" in d["learning rate (their runs)"][1]
  devs = " ".join(f.deviations)
  assert "Algorithm 1" in devs and "1.28·β" in devs and "2.108·β" in devs
  assert "every K optimizer steps" in devs


# -------------------------------------------------------------------------------------- decoupled_ppo (held)


def _areal_loss(logp, prox, behav, adv, mask, eps_clip=0.4, upper=5.0):
  """AReaL@4aef98d8 functional.py ppo_actor_loss_fn with rejection_sampling(level token, action mask, metric
  ratio, upper 5.0, lower None) (apply_rejection_sampling :185-428; _check_bounds: metric <= upper), c_clip None,
  importance_sampling_level token: Σ_mask' w·max(−A r, −A clip(r)) / count(original mask)."""
  count = max(mask.sum(), 1)
  log_ratio = prox - behav
  log_ratio = np.where(np.isfinite(log_ratio), log_ratio, 0.0)
  w = np.exp(log_ratio)
  kept = mask * (w <= upper)
  w = np.where(kept > 0, w, 0.0)
  ratio = np.where(kept > 0, np.exp(logp - prox), 0.0)
  pg = np.maximum(-adv * ratio, -adv * np.clip(ratio, 1 - eps_clip, 1 + eps_clip)) * w
  return np.where(kept > 0, pg, 0.0).sum() / count


def test_decoupled_ppo_equals_areal_at_the_example_configs():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  from rljax.types import PolicyOutputs  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(20261222)
  b, t = 6, 8
  mask = (rng.random((b, t)) < 0.8).astype(np.float64)
  prox = -rng.random((b, t)) * 2
  behav = prox - rng.normal(0, 1.0, (b, t))  # some w > 5 are masked out
  logp = prox + rng.normal(0, 0.3, (b, t))
  adv = rng.normal(0, 1, (b, t))
  assert ((np.exp(prox - behav) > 5) & (mask > 0)).any()
  with jax.enable_x64(True):
    batch = train_batch(mask, adv, prox).replace(logp_behavior=jnp.asarray(behav))
    term = O.decoupled_ppo(0.4, behavior_cap=5.0)

    def total(lp):
      loss, _ = term(PolicyOutputs(logp=lp), batch)
      return jnp.sum(loss) / jnp.sum(batch.loss_mask)

    ours = float(total(jnp.asarray(logp)))
    g = np.asarray(jax.grad(total)(jnp.asarray(logp)))
  assert abs(ours - _areal_loss(logp, prox, behav, adv, mask)) < 1e-12
  h = 1e-6
  for (i, j) in [(0, 0), (2, 3), (5, 7)]:
    e = np.zeros((b, t))
    e[i, j] = h
    num = (_areal_loss(logp + e, prox, behav, adv, mask) - _areal_loss(logp - e, prox, behav, adv, mask)) / (2 * h)
    assert abs(g[i, j] - num) < 1e-7


# --------------------------------------------------------------------------- implicit_progress_reward (not held)


def _pa_score_mean_mean(pol_spans, ref_spans):
  """progress-advantage@9284b4c0 runners/sokoban_bon.py _pa_score (and merged_bon.py _pa_mean_mean) at the
  headline (token mean, step mean): per action span, mean(log π) − mean(log π_ref), an empty span 0 for that
  model; no β; the steps' mean."""
  steps = []
  for i, p in enumerate(pol_spans):
    pa = float(np.mean(p)) if p.size else 0.0
    ra = float(np.mean(ref_spans[i])) if i < len(ref_spans) and ref_spans[i].size else 0.0
    steps.append(pa - ra)
  return float(np.mean(steps)) if steps else float("-inf")


def test_implicit_progress_reward_step_sums_are_their_token_sum_and_not_the_sokoban_headline():
  from rljax.advantages import implicit_progress_reward  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(5)
  spans = [(0, 3), (5, 11)]  # two action steps of one trajectory (a 2-token observation between)
  t = 11
  logp, ref = -rng.random((1, t)) * 3, -rng.random((1, t)) * 3
  mask = np.zeros((1, t), bool)
  for s, e in spans:
    mask[0, s:e] = True
  with jax.enable_x64(True):
    rew, _ = implicit_progress_reward(jnp.asarray(logp), jnp.asarray(ref), jnp.asarray(mask), beta=1.0)
  rew = np.asarray(rew)[0]
  ours_steps = [rew[s:e].sum() for s, e in spans]
  theirs_sum = [logp[0, s:e].sum() - ref[0, s:e].sum() for s, e in spans]  # scoring.py token_agg 'sum', β 1
  np.testing.assert_allclose(ours_steps, theirs_sum, rtol=0, atol=1e-12)
  headline = _pa_score_mean_mean([logp[0, s:e] for s, e in spans], [ref[0, s:e] for s, e in spans])
  assert abs(np.mean(ours_steps) - headline) > 1e-3
  assert abs(_pa_score_mean_mean([np.zeros(0)], [np.array([-1.0])]) - 1.0) < 1e-12  # an empty policy span: 0 − (−1)


def test_implicit_progress_reward_record_names_the_sokoban_and_merged_runners():
  f = _fid("implicit_progress_reward")
  assert "runners/sokoban_bon.py" in f.read and "runners/merged_bon.py" in f.read
  assert "Qwen2.5-3B" in f.read
  d = _defaults("implicit_progress_reward")
  assert "sokoban_bon.py" in d["token aggregation"][1] and "sokoban_bon.py" in d["step aggregation"][1]
  assert "merged_bon.py" in d["reference model"][1]
  assert any("sokoban_bon.py" in x for x in f.deviations)


# ------------------------------------------------------------------------------------------------ opd (not held)


def test_opd_gradient_equals_slime_on_policy_and_the_megatron_run_is_a_kl_to_the_start():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  from rljax.types import PolicyOutputs  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(11)
  b, t = 4, 6
  mask = (rng.random((b, t)) < 0.85).astype(np.float64)
  old = -rng.random((b, t)) * 2
  teacher = -rng.random((b, t)) * 2
  grpo_adv = np.repeat(rng.normal(0, 1, (b, 1)), t, 1)

  def slime(lp, teach, adv0, coef=1.0, eps=0.2):
    """slime@624b824a loss.py:663-701 A ← A − coef·(log π_old − log π_T), then the PPO clip loss of each sample,
    its token mean, the mean over the step's samples (calculate_per_token_loss False)."""
    a = adv0 - coef * (old - teach)
    r = np.exp(lp - old)
    per_tok = np.maximum(-a * r, -a * np.clip(r, 1 - eps, 1 + eps))
    return np.mean((per_tok * mask).sum(1) / mask.sum(1))

  # on-policy (θ = old): our ppo_clip(0.2) + opd(1.0) under seq_mean_token_mean has slime's gradient
  with jax.enable_x64(True):
    batch = train_batch(mask, grpo_adv, old)
    batch = batch.replace(extras={"logp_teacher": jnp.asarray(teacher)})
    pg, kd = O.ppo_clip(0.2), O.opd(1.0)

    def total(lp):
      out = PolicyOutputs(logp=lp)
      per_tok = (pg(out, batch)[0] + kd(out, batch)[0] * batch.loss_mask)
      return jnp.mean(jnp.sum(per_tok, 1) / jnp.sum(batch.loss_mask, 1))

    g = np.asarray(jax.grad(total)(jnp.asarray(old)))
  h = 1e-6
  for (i, j) in [(0, 0), (1, 2), (3, 5)]:
    if mask[i, j] == 0:
      continue
    e = np.zeros((b, t))
    e[i, j] = h
    num = (slime(old + e, teacher, grpo_adv) - slime(old - e, teacher, grpo_adv)) / (2 * h)
    assert abs(g[i, j] - num) < 1e-7
  # the Megatron-teacher script: teacher = the student's starting checkpoint, so at the first step
  # log π_T = log π_old and the OPD part of the advantage is exactly 0 (only the math-reward GRPO advantage)
  e = np.zeros((b, t))
  e[0, 0] = h
  with_self_teacher = (slime(old + e, old, grpo_adv) - slime(old - e, old, grpo_adv)) / (2 * h)
  grpo_only = (slime(old + e, old, grpo_adv, coef=0.0) - slime(old - e, old, grpo_adv, coef=0.0)) / (2 * h)
  assert abs(with_self_teacher - grpo_only) < 1e-12


def test_opd_record_says_the_megatron_teacher_is_the_students_start():
  f = _fid("opd")
  assert "README.md:70" in f.read and "same model as both student and teacher" in f.read
  d = _defaults("opd")
  assert "/root/Qwen3-8B_torch_dist" in d["teacher model (their runs)"][1]
  devs = " ".join(f.deviations)
  assert "log π_init" in devs and "0 on the first step" in devs
  assert "opd" in ROWS and "README.md:70" in _record("opd")
  assert "start of RL" in d["teacher model (their runs)"][0]
  # the fact behind "ours": the RL loop's logp_teacher comes from the reference forward, the frozen start policy
  from rljax.train._inputs import PROXIMAL_NEEDS, REFERENCE_NEEDS  # pylint: disable=import-outside-toplevel
  assert "logp_teacher" in REFERENCE_NEEDS and "logp_teacher" not in PROXIMAL_NEEDS
