"""Issue #51 item 4, fifteenth draw (seed 20261220), part a: an independent re-audit of five in-full rows.

Rows drawn: difficulty_budget, decoupled_ppo, gdpo, exgrpo_policy, seq_mean_token_sum_norm (five of the ten of
``random.Random(20261220).sample(rows, 10)`` over the 109 rows).

Held (2): decoupled_ppo, gdpo.

- ``decoupled_ppo``: inclusionAI/AReaL@4aef98d8 areal/utils/functional/functional.py:185-425
  apply_rejection_sampling and :428-545 ppo_actor_loss_fn; areal/trainer/ppo/actor.py:145-249 (compute_advantages),
  :256-364 (_ppo_update: ppo_n_minibatches mini-batches, loss_weight_fn = the input loss_mask's count), :408-596
  (grpo_loss_fn: rejection_sampling passed whatever use_decoupled_loss says, _resolve_proximal_logp);
  areal/api/cli_args.py:1224-1330 (RejectionSamplingConfig), :1389-1570 (PPOActorConfig; its own
  ppo_n_minibatches default is 4, both launch configs set theirs), :2039-2045; examples/math/gsm8k_grpo.yaml and
  boba_grpo.yaml whole (eps_clip 0.4, kl_ctl 0.0, ppo_n_minibatches 1 / 4, rejection_sampling ratio upper 5.0,
  max_head_offpolicyness 2 / 4); areal/engine/core/train_engine.py:30-66 and fsdp_engine.py:2045 (micro-batch weight /
  all-reduced total). The per-token loss, the mask / clamp rejection, the dual clip (min(L, c|A|), active only for
  A < 0) and the original-mask denominator are checked below against a float64 transcription, on two micro-batches.
- ``gdpo``: NVlabs/GDPO@b080e63d trl-GDPO/trl-0.18.0-gdpo/trl/trainer/grpo_trainer.py:1150-1321 (the GDPO branch,
  K > 1 only, nan_to_num, the GRPO branch otherwise, the logging branch), :470-484; grpo_config.py:435-448;
  open-r1/run_gsm8k_gdpo.sh, recipes/.../gdpo_gsm8k/config.yaml, src/open_r1/gsm8k.py whole (three rewards);
  verl-GDPO ray_trainer.py:95-124, 160-199, 725-765, core_algos.py:105-155, torch_functional.py:112-136,
  train_gdpo.sh, README.md (the ToolRL dataset copy); the verl 0.9.1 PyPI wheel core_algos.py:268-331, 361-468,
  ray_trainer.py:187-279, v1/trainer_base.py:1743-1783, v1/utils.py:148-176, config/algorithm.py:668-673. The
  group step, the weighted sum and the whitening are checked below against float64 transcriptions.

Not held (3), each error fixed in the record and checked here (no implementation changed, no implementation bug
found):

- ``difficulty_budget`` (FALSE): the record said E3's scripts run the entropy-targeting temperature schedule ("from
  T 1, after the first step T ← T·(1 + T·ln(H*/H)/(ln V + ln ln V)) ...", deviation: "the rewards that set each
  prompt's difficulty rank are sampled at that adaptive temperature"). LiaoMengqi/E3-RL4LLMs@7e90b8e9 both scripts
  set actor.entropy_coeff=0 (train_7b.sh:10, 44; train_1_5b.sh:10, 46); e3/worker/actor/dp_actor.py:384-387
  computes entropy only when entropy_coeff ≠ 0 and :401-408 logs 'actor/entropy_loss' only then;
  e3/worker/fsdp_work.py:487 steps the scheduler on metrics.get('actor/entropy_loss', None) and
  temperature_scheduler.py:41-43 returns on None before counting a step: T stays at rollout.temperature 1 for the
  whole run. With entropy_coeff ≠ 0 (the yaml's 0.001) dp_actor.py:406 passes a set to append_to_dict
  (verl/verl/utils/py_functional.py:159-160 calls .items()): the first update raises AttributeError. So ours with
  rl.temperature=1 samples as theirs; the record's default and deviation are corrected.
- ``exgrpo_policy`` (FALSE, and OMITTED): the deviation said "the on-policy warm-up phase is a batch without
  extras['replay_mask'] (PPO clip, as the authors'); the switch at solve rate 0.35 belongs to the replay stage". The
  exgrpo replay stage builds no such switch (its record: "not built") and writes replay_mask on every step from
  the first (rljax/replay/_buffer.py insert: all False when it replays nothing), so in the exgrpo recipe every
  batch is "mixed" and the fresh rows are never clipped; ElliottYan/LUFFY@01f4ae06 mix_trainer_experience.py:
  429-438, 538-542 PPO-clip every row at [0.8, 1.2] until a step's batch/solved exceeds 0.35. With one mini-batch
  per step r = 1 and the clip changes nothing; with their 2 optimizer steps per step (the record's
  rl.num_minibatches=2) the second mini-batch's fresh rows differ wherever r leaves [0.8, 1.2] (tested). The
  "mini-batches per step" default said those rows are "unclipped (loss_remove_clip)" without the phase: clipped in
  warm-up batches.
- ``seq_mean_token_sum_norm`` (FALSE by omission): the verl 0.9.1 deviation said the engine worker's
  global_batch_size is "all rows, empty ones included, as our B, so with loss_scale_factor = max_len it is ours".
  The verl 0.9.1 PyPI wheel's default v1 trainer pads the step batch with synthetic rows of response_mask 0 up to
  a multiple of lcm(dp size, ppo_mini_batch_size × rollout.n) (trainer/ppo/v1/trainer_base.py:1589-1621,
  trainer/ppo/padding_utils.py:144-210), and agg_loss's sum-norm branch (core_algos.py:1181-1192) divides each
  mini-batch by global_batch_size = ppo_mini_batch_size × n with them counted: 100 real rows, 128 per mini-batch:
  ÷ 128·L there, ÷ 100·L here. The thirteenth draw had added these padding rows to the two seq-mean rows only.
  Also the pointer "utils/padding.py:113-119" (no such file in the wheel) is workers/utils/padding.py:113-119.
"""
import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _fidelity import defaults as _defaults, e3_rollout_n as _e3_rollout_n, fid as _fid, record as _record, train_batch


# ------------------------------------------------------------------------------------- difficulty_budget (not held)


class _E3Scheduler:
  """LiaoMengqi/E3-RL4LLMs@7e90b8e9 e3/worker/temperature_scheduler.py:6-78, float64 (init_steps 1, annealing_ratio
  0.4, annealing_factor 0.9, target_entropy None)."""

  def __init__(self, t0, vocab, enable, anneal, max_steps):
    self.t, self.steps, self.init_entropy, self.target, self.initial_target = t0, 1, [], None, None
    self.factor = np.log(vocab) + np.log(np.log(vocab))
    self.enable, self.anneal, self.max_steps = enable, anneal, max_steps
    self.anneal_step = max_steps - int(max_steps * 0.4)

  def step(self, entropy):
    if entropy is None:
      return
    if self.steps <= 1:
      self.init_entropy.extend(entropy)
    elif self.enable:
      if self.target is None:
        self.target = self.initial_target = sum(self.init_entropy) / len(self.init_entropy)
      cur = sum(entropy) / len(entropy)
      self.t = self.t * (1 + self.t * np.log(self.target / cur) / self.factor)
      if self.anneal and self.steps >= self.anneal_step:
        progress = (self.steps - self.anneal_step) / (self.max_steps - self.anneal_step)
        self.target = self.initial_target * ((1 - 0.9) * 0.5 * (1 + math.cos(math.pi * progress)) + 0.9)
    self.steps += 1


def _append_to_dict(data, new_data):
  """verl/verl/utils/py_functional.py:159-163 (the E3 repository's vendored verl)."""
  for key, val in new_data.items():
    data.setdefault(key, []).append(val)


def _e3_update_policy_metrics(entropy_coeff, micro_batch_entropies):
  """e3/worker/actor/dp_actor.py:380-433: the metrics of one update (the entropy metric only when entropy_coeff ≠ 0,
  appended as the set literal of :406)."""
  metrics = {}
  for ent in micro_batch_entropies:
    if entropy_coeff != 0:
      _append_to_dict(metrics, {"actor/entropy_loss", ent})  # noqa: the authors' set literal
    _append_to_dict(metrics, {"actor/pg_loss": 0.0})
  return metrics


def test_difficulty_budget_their_temperature_scheduler_never_steps_with_their_entropy_coeff_0():
  rng = np.random.default_rng(20261220)
  # train_7b.sh: rollout.temperature 1, enable_temperature_scheduler / enable_annealing True, max_steps 480,
  # entropy_coeff 0 -> update_actor's metrics have no 'actor/entropy_loss' and the scheduler gets None each step
  sched = _E3Scheduler(1.0, 152064, True, True, 480)
  for _ in range(480):
    metrics = _e3_update_policy_metrics(0, list(rng.uniform(0.3, 0.9, 4)))
    sched.step(metrics.get("actor/entropy_loss", None))
  assert sched.t == 1.0 and sched.steps == 1 and sched.init_entropy == []
  # what the record described (a scheduler fed the entropy): T moves off 1 after the first step
  fed = _E3Scheduler(1.0, 152064, True, True, 480)
  for h in ([0.6, 0.6], [0.5, 0.5], [0.55, 0.45]):
    fed.step(h)
  assert abs(fed.t - 1.0) > 1e-3
  # any entropy_coeff ≠ 0 (the yaml's 0.001): the set literal of dp_actor.py:406 stops the first update
  with pytest.raises(AttributeError):
    _e3_update_policy_metrics(0.001, [0.5])
  # the allocation itself (rank-based) at their epoch-3 bounds (min 4, max 12): their floors, ours largest remainder
  np.testing.assert_array_equal(_e3_rollout_n([0.0, 0.25, 0.5, 0.75], 32, 2, 16), [2, 5, 9, 16])
  np.testing.assert_array_equal(_e3_rollout_n([0.0, 0.1, 0.1, 0.9], 32, 4, 12), [4, 6, 5, 17])
  from rljax.filters import difficulty_budget  # pylint: disable=import-outside-toplevel
  ours, _ = difficulty_budget(1.0 - np.array([0.0, 0.25, 0.5, 0.75]), budget=32, min_per_prompt=2,
                              max_per_prompt=16)
  np.testing.assert_array_equal(np.asarray(ours), [2, 6, 10, 14])


def test_difficulty_budget_record_says_the_scripts_sample_at_temperature_1():
  ours, theirs = _defaults("difficulty_budget")["sampling temperature (behind the rewards that rank the prompts)"]
  assert "rl.temperature=1 is theirs" in ours
  assert theirs.startswith("rollout.temperature 1 for the whole run, as released")
  assert "actor.entropy_coeff=0 (train_7b.sh:10, 44; train_1_5b.sh:10, 46)" in theirs
  assert "dp_actor.py:384-387" in theirs and "step(None), which returns at once" in theirs
  assert "raises AttributeError" in theirs and "py_functional.py:159-160" in theirs
  dev = [x for x in _fid("difficulty_budget").deviations if "temperature schedule" in x]
  assert len(dev) == 1 and "never steps" in dev[0] and "as ours with rl.temperature=1" in dev[0]
  assert "fifteenth draw" in dev[0] and "sampled at that adaptive temperature" not in _record("difficulty_budget")
  assert "e3/worker/actor/dp_actor.py:380-408" in _fid("difficulty_budget").read


# ------------------------------------------------------------------------------------------- decoupled_ppo (held)


def _areal_ppo_actor_loss(new, prox, behav, adv, mask, eps, eps_high=None, c_clip=None, action="mask", upper=5.0):
  """inclusionAI/AReaL@4aef98d8 areal/utils/functional/functional.py:428-545 ppo_actor_loss_fn with
  apply_rejection_sampling (:185-425; level token, metric ratio, lower None), 2D padded, float64: returns the
  micro-batch loss Σ / loss_mask_count (the count of the mask before rejection)."""
  m = mask > 0
  count = max(int(np.count_nonzero(m)), 1)
  lr = prox - behav
  lr = np.where(np.isfinite(lr), lr, 0.0)
  w = np.exp(lr)
  if action == "mask":
    m2 = m & (w <= upper)
  else:
    w = np.clip(w, 0.0, upper)
    m2 = m
  w = np.where(m2, w, 0.0)
  ratio = np.where(m2, np.exp(new - prox), 0.0)
  clipped = np.clip(ratio, 1.0 - eps, 1.0 + (eps if eps_high is None else eps_high))
  pg = np.maximum(-adv * ratio, -adv * clipped)
  if c_clip is not None:
    pg = np.minimum(pg, np.sign(adv) * c_clip * adv)
  pg = pg * w
  return np.where(m2, pg, 0.0).sum() / count


def _areal_step(new, prox, behav, adv, mask, splits, **kw):
  """areal/engine/core/train_engine.py:30-66 and fsdp_engine.py:2045: each micro-batch's loss × its loss-mask
  count / the total (all micro-batches, all-reduced), summed."""
  total = float(np.count_nonzero(mask))
  return sum(_areal_ppo_actor_loss(new[s], prox[s], behav[s], adv[s], mask[s], **kw) * np.count_nonzero(mask[s])
             / total for s in splits)


def _ours_decoupled(new, prox, behav, adv, mask, **kw):
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  from rljax.types import PolicyOutputs  # pylint: disable=import-outside-toplevel
  base = train_batch(mask, adv, prox)
  with jax.enable_x64(True):
    batch = dataclasses.replace(base, logp_behavior=jnp.asarray(behav))
    loss, _ = O.chain(O.decoupled_ppo(**kw))(PolicyOutputs(logp=jnp.asarray(new), entropy=None), batch)
  return float(loss)


def test_decoupled_ppo_equals_areal_with_rejection_mask_clamp_and_dual_clip():
  rng = np.random.default_rng(2505_24298)
  b, t = 8, 10
  mask = (np.arange(t)[None] < rng.integers(2, t + 1, size=(b, 1))).astype(np.float64)
  behav = -rng.uniform(0.05, 3.0, (b, t))
  prox = behav + rng.normal(scale=1.2, size=(b, t))  # π_prox/π_behav spans [e^-3, e^3]: some above 5
  new = prox + rng.normal(scale=0.5, size=(b, t))
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  assert np.any((np.exp(prox - behav) > 5) & (mask > 0))
  splits = (slice(0, 3), slice(3, 8))
  for kw, ours_kw in (({"eps": 0.4, "action": "mask"}, {"eps_low": 0.4, "behavior_cap": 5.0}),
                      ({"eps": 0.4, "action": "clamp"}, {"eps_low": 0.4, "behavior_cap": 5.0, "cap_mode": "clamp"}),
                      ({"eps": 0.2, "eps_high": 0.28, "c_clip": 3.0, "action": "mask"},
                       {"eps_low": 0.2, "eps_high": 0.28, "dual_clip": 3.0, "behavior_cap": 5.0})):
    theirs = _areal_step(new, prox, behav, adv, mask, splits, **kw)
    assert _ours_decoupled(new, prox, behav, adv, mask, **ours_kw) == pytest.approx(theirs, rel=1e-12, abs=1e-15)
  # without rejection_sampling AReaL applies no w: ours is ppo_clip with logp_old = π_prox, as recorded
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  from rljax.types import PolicyOutputs  # pylint: disable=import-outside-toplevel
  m = mask > 0
  ratio = np.exp(new - prox)
  no_w = np.where(m, np.maximum(-adv * ratio, -adv * np.clip(ratio, 0.6, 1.4)), 0.0).sum() / m.sum()
  with jax.enable_x64(True):
    ppo, _ = O.chain(O.ppo_clip(eps_low=0.4))(PolicyOutputs(logp=jnp.asarray(new), entropy=None),
                                              train_batch(mask, adv, prox))
  assert float(ppo) == pytest.approx(no_w, rel=1e-12)
  d = _defaults("decoupled_ppo")
  assert d["mini-batches per step"][1].startswith("ppo_n_minibatches 1 (gsm8k), 4 (boba)")
  assert d["behavior_cap, cap_mode"][1].startswith("rejection_sampling upper 5.0")


# --------------------------------------------------------------------------------------------------- gdpo (held)


def _trl_gdpo(rewards, g, weights):
  """NVlabs/GDPO@b080e63d trl-0.18.0-gdpo/trl/trainer/grpo_trainer.py:1222-1248, float64 (K > 1)."""
  r = np.nan_to_num(rewards)
  cols = []
  for i in range(r.shape[1]):
    v = r[:, i].reshape(-1, g)
    mean = np.repeat(v.mean(1), g)
    std = np.repeat(v.std(1, ddof=1), g)
    cols.append((r[:, i] - mean) / (std + 1e-4))
  pre = (np.stack(cols, 1) * weights[None]).sum(1)
  return pre, (pre - pre.mean()) / (pre.std(ddof=1) + 1e-4)


def _verl091_gdpo_pre_whiten(rewards, index, weights, eps=1e-6):
  """the verl 0.9.1 PyPI wheel core_algos.py:268-331 per key, weighted (:444-464), before masked_whiten."""
  out = np.zeros(rewards.shape[0])
  for k in range(rewards.shape[1]):
    col = rewards[:, k]
    for gid in np.unique(index):
      rows = index == gid
      if rows.sum() == 1:
        mean, std = 0.0, 1.0
      else:
        mean, std = col[rows].mean(), col[rows].std(ddof=1)
      out[rows] += weights[k] * (col[rows] - mean) / (std + eps)
  return out


def test_gdpo_equals_trl_group_step_and_verl091_sum_and_whitening_within_the_recorded_eps():
  from rljax.advantages import gdpo  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(2601_05242)
  g, p, k = 16, 6, 3
  rewards = (rng.random((g * p, k)) < rng.random((1, k)) * 0.8 + 0.1).astype(np.float64)
  rewards[:g, 1] = 1.0  # a group with one all-equal reward: 0 / (0 + ε) on both sides
  w = np.array([1.0, 0.5, 2.0])
  gid = np.repeat(np.arange(p), g).astype(np.int32)
  with jax.enable_x64(True):
    adv, info = gdpo(jnp.asarray(rewards), jnp.asarray(gid), weights=w, eps=1e-4)
    adv6, info6 = gdpo(jnp.asarray(rewards), jnp.asarray(gid), weights=w)
  pre, theirs = _trl_gdpo(rewards, g, w)
  np.testing.assert_allclose(np.asarray(info["per_reward"]) @ w, pre, rtol=1e-12, atol=1e-12)
  ours = np.asarray(adv)
  sd = pre.std(ddof=1)
  assert np.max(np.abs(ours / theirs - 1)) <= 1e-4 / sd + 1e-8  # rsqrt(var + 1e-8) vs ÷ (std + 1e-4)
  assert not np.allclose(ours, theirs, rtol=1e-9, atol=0)
  np.testing.assert_allclose(np.asarray(info6["per_reward"]) @ w, _verl091_gdpo_pre_whiten(rewards, gid, w),
                             rtol=1e-12, atol=1e-12)
  # their masked_whiten over response tokens (unbiased, + 1e-8): a row weighs its length; ours each row once
  lengths = rng.integers(1, 9, size=g * p)
  x = _verl091_gdpo_pre_whiten(rewards, gid, w)
  tok = np.repeat(x, lengths)
  tok_white = (x - tok.mean()) / np.sqrt(tok.var(ddof=1) + 1e-8)
  seq_white = (x - x.mean()) / np.sqrt(x.var(ddof=1) + 1e-8)
  np.testing.assert_allclose(np.asarray(adv6), seq_white, rtol=1e-10, atol=1e-12)
  assert np.max(np.abs(tok_white - seq_white)) > 1e-3
  d = _defaults("gdpo")
  assert d["eps (group std)"][1].startswith("1e-4 (TRL)")
  assert "K = 1: TRL applies GDPO only when there is more than one reward" in _record("gdpo")


# ----------------------------------------------------------------------------------------- exgrpo_policy (not held)


def _luffy_token_loss(old, new, adv, prefix, mixed, clip_ratio=0.2, clip_upper_bound=1.0, beta=0.1):
  """ElliottYan/LUFFY@01f4ae06 ExGRPO/exgrpo/verl/verl/mix_src/mix_core_alg.py:86-197 per token, float64: on-policy
  no_reshape; loss_remove_clip = the batch's meta_info (mix_trainer_experience.py:429-438: the script's True in mixed
  batches, False in warm-up ones), the upper clip max(clip_upper_bound, 1 + clip_ratio) (:117); off-policy
  p_div_p_0.1 in mixed batches, no_reshape in warm-up ones; mixed by prefix_mask (:197)."""
  r = np.exp(new - old)
  on = -adv * r
  if not mixed:
    on = np.maximum(on, -adv * np.clip(r, 1.0 - clip_ratio, max(clip_upper_bound, 1.0 + clip_ratio)))
  off = -adv * (r / (r + beta) if mixed else r)
  p = prefix.astype(np.float64)
  return off * p + on * (1 - p)


def _ours_token_loss(term, batch, new):
  from rljax.types import PolicyOutputs  # pylint: disable=import-outside-toplevel
  with jax.enable_x64(True):
    loss, _ = term(PolicyOutputs(logp=jnp.asarray(new), entropy=None), batch)
  return np.asarray(loss)


def test_exgrpo_policy_with_the_exgrpo_stage_never_has_their_clipped_warm_up():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  from rljax import replay as R  # pylint: disable=import-outside-toplevel
  from rljax.stages import RunFacts, StepData  # pylint: disable=import-outside-toplevel
  # the exgrpo replay stage on its first step (an empty buffer: nothing replayed) still writes replay_mask
  t, b = 5, 8
  cm = np.zeros((b, t), bool)
  cm[:, 2:] = True
  data = StepData(tokens=np.ones((b, t), np.int32), prompt_mask=~cm, completion_mask=cm,
                  group_id=np.repeat(np.arange(2, dtype=np.int32), 4), num_groups=2, valid=np.ones(b, bool),
                  lengths=cm.sum(1).astype(np.int32), completions=("",) * b, problems=(None,) * b,
                  prompt_index=np.repeat(np.arange(2, dtype=np.int64), 4),
                  rewards=np.array([1, 0, 1, 0, 0, 0, 1, 0], np.float32),
                  correct=np.array([1, 0, 1, 0, 0, 0, 1, 0], np.float32),
                  logp_behavior=-np.ones((b, t), np.float32) * cm, entropy_behavior=np.ones((b, t), np.float32) * cm,
                  max_new_tokens=3, step=0, key=jax.random.PRNGKey(0), extras={})
  stage = R.exgrpo(capacity=8).bind(RunFacts(num_prompts=2, group_size=4, max_new_tokens=3, seq_len=t))
  out, _, m = stage.fn(data, stage.init())
  assert m["replayed"] == 0 and "replay_mask" in out.extras and not np.any(out.extras["replay_mask"])
  # the second mini-batch of a warm-up step: π_θ has moved, r leaves [0.8, 1.2]
  rng = np.random.default_rng(2510_02245)
  bb, tt = 6, 7
  mask = (np.arange(tt)[None] < rng.integers(2, tt + 1, size=(bb, 1))).astype(np.float64)
  old = -rng.uniform(0.05, 2.0, (bb, tt))
  new = old + rng.normal(scale=0.5, size=(bb, tt))
  adv = np.repeat(rng.normal(size=(bb, 1)), tt, axis=1)
  base = train_batch(mask, adv, old)
  with jax.enable_x64(True):
    stage_batch = dataclasses.replace(base, extras={"replay_mask": jnp.zeros((bb,), bool)})
  theirs_warm = _luffy_token_loss(old, new, adv, np.zeros((bb, tt), bool), mixed=False) * mask
  ours_stage = _ours_token_loss(O.exgrpo_policy(), stage_batch, new)  # what the exgrpo recipe computes
  ours_no_mask = _ours_token_loss(O.exgrpo_policy(), base, new)  # a recipe without a replay stage
  ours_clip = _ours_token_loss(O.exgrpo_policy(clip_fresh=True), stage_batch, new)
  np.testing.assert_allclose(ours_no_mask, theirs_warm, rtol=1e-13, atol=1e-15)
  np.testing.assert_allclose(ours_clip, theirs_warm, rtol=1e-13, atol=1e-15)
  r = np.exp(new - old)
  active = (mask > 0) & ((r < 0.8) | (r > 1.2)) & (np.abs(theirs_warm - (-adv * r) * mask) > 1e-12)  # clip bites
  assert np.any(active)
  np.testing.assert_allclose(ours_stage[~active], theirs_warm[~active], rtol=1e-13, atol=1e-15)
  assert np.max(np.abs(ours_stage - theirs_warm)) > 1e-2
  np.testing.assert_allclose(ours_stage, _luffy_token_loss(old, new, adv, np.zeros((bb, tt), bool), mixed=True) * mask,
                             rtol=1e-13, atol=1e-15)  # = their mixed phase
  # at r = 1 (one mini-batch per step) the phases agree
  np.testing.assert_allclose(_ours_token_loss(O.exgrpo_policy(), stage_batch, old),
                             _luffy_token_loss(old, old, adv, np.zeros((bb, tt), bool), mixed=False) * mask,
                             rtol=1e-13, atol=1e-15)


def test_exgrpo_policy_record_states_the_missing_warm_up_and_the_phase_of_the_second_mini_batch():
  f = _fid("exgrpo_policy")
  dev = [x for x in f.deviations if "on-policy warm-up phase" in x]
  assert len(dev) == 1
  assert "solve rate 0.35 belongs to the replay stage" not in dev[0] and "the fresh rows are never clipped" in dev[0]
  assert "writes replay_mask on every step from the first" in dev[0] and "not built" in dev[0]
  assert "mix_trainer_experience.py:429-438, 538-542" in dev[0] and "fifteenth draw" in dev[0]
  mb = _defaults("exgrpo_policy")["mini-batches per step"][1]
  assert "unclipped in mixed batches (loss_remove_clip), PPO-clipped at 1 ± 0.2 in warm-up ones" in mb
  assert "Fifteenth draw (#51 item 4, seed 20261220)" in f.read


# ------------------------------------------------------------------------------- seq_mean_token_sum_norm (not held)


def _verl091_sum_norm(loss, mask, global_batch_size, loss_scale_factor, dp_size=1):
  """the verl 0.9.1 PyPI wheel core_algos.py:1181-1192 agg_loss 'seq-mean-token-sum-norm', float64."""
  seq = (loss * mask).sum(-1)
  seq_mask = (mask.sum(-1) > 0).astype(np.float64)
  return (seq * seq_mask).sum() / global_batch_size * dp_size / loss_scale_factor


def _verl091_upsample(loss, mask, multiple):
  """trainer/ppo/padding_utils.py:144-210 upsample_batch_to_divisible_size: append rows of response_mask 0."""
  pad = (-loss.shape[0]) % multiple
  return (np.concatenate([loss, np.zeros((pad, loss.shape[1]))]),
          np.concatenate([mask, np.zeros((pad, mask.shape[1]))]))


def test_seq_mean_token_sum_norm_counts_verl091_padding_rows_ours_does_not():
  from rljax.objectives import seq_mean_token_sum_norm  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(20261220)
  real, t, max_len, gbs = 100, 7, 9, 128  # ppo_mini_batch_size × n = 128, dp 1: one mini-batch
  lengths = rng.integers(1, t + 1, size=real)
  mask = (np.arange(t)[None] < lengths[:, None]).astype(np.float64)
  loss = rng.normal(size=(real, t))
  with jax.enable_x64(True):
    num, den = seq_mean_token_sum_norm(max_len=max_len)(jnp.asarray(loss), jnp.asarray(mask))
  ours = float(num) / float(den)
  pl, pm = _verl091_upsample(loss, mask, gbs)
  assert pl.shape[0] == 128
  theirs = sum(_verl091_sum_norm(pl[i:i + 32], pm[i:i + 32], gbs, max_len) for i in range(0, 128, 32))  # 4 micro
  total = (loss * mask).sum()
  assert theirs == pytest.approx(total / (128 * max_len), rel=1e-12)
  assert ours == pytest.approx(total / (100 * max_len), rel=1e-12)
  assert ours / theirs == pytest.approx(1.28, rel=1e-12)
  # a step of 128 real rows (such a multiple): theirs = ours
  loss2, mask2 = rng.normal(size=(128, t)), (rng.random((128, t)) < 0.6).astype(np.float64)
  with jax.enable_x64(True):
    num, den = seq_mean_token_sum_norm(max_len=max_len)(jnp.asarray(loss2), jnp.asarray(mask2))
  theirs2 = sum(_verl091_sum_norm(loss2[i:i + 32], mask2[i:i + 32], gbs, max_len) for i in range(0, 128, 32))
  assert float(num) / float(den) == pytest.approx(theirs2, rel=1e-12)
  f = _fid("seq_mean_token_sum_norm")
  pad = [x for x in f.deviations if "padding rows" in x and "lcm(dp size" in x]
  assert len(pad) == 1 and "divides by 128·L, ours by 100·L" in pad[0] and "fifteenth draw" in pad[0]
  assert "trainer/ppo/padding_utils.py:72-141, 144-210" in pad[0]
  v091 = [x for x in f.deviations if x.startswith("the verl 0.9.1 PyPI wheel (core_algos.py:1181-1192")]
  assert len(v091) == 1 and "it is ours when the step's rows fill whole mini-batches" in v091[0]
  assert "workers/utils/padding.py:113-119" in v091[0] and "; utils/padding.py" not in v091[0]
  assert f.deviations.index(pad[0]) == f.deviations.index(v091[0]) + 1
