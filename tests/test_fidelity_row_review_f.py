"""Issue #51, per-row review f: an independent second reading of seven records (not a random draw).

Rows: shortest_path_reward, spear_replay, step_episode_mix, temperature_control, token_mean, variance_topp,
void_turn.

Held (4): step_episode_mix (X-PLUG/MobileAgent@93afb003 UI-S1/uis1/core_uis1.py; the script's config traj_grpo.yaml
only inherits ppo_trainer.yaml), token_mean (the verl 0.9.1 PyPI wheel core_algos.py:1140-1206 with the engine's
batch_num_tokens, verl v0.7.0 core_algos.py:802, the TRL 1.9.0 PyPI wheel's 'dapo' branch), variance_topp
(RAGEN-AI/RAGEN@5eb79b82 agent_trainer.py:461-485, base.yaml:54-55), void_turn (ltzheng/SimpleTIR@e7b5b443
agent_utils.py:554-605, the README command). Their "= theirs" claims are checked below against float64 NumPy
transcriptions of the cited lines.

Not held (3); each error fixed in the record (no implementation changed, no implementation bug found):

- ``shortest_path_reward`` OMITTED which episodes form a group in their runs. xuyifan-0731/MobileRL-iclr@da92ec0c
  training/verl/trainer/ppo/ray_trainer.py fit() builds the async Buffer with group size rollout.n only when
  trainer.strict_group is set, else 1; glm_mobilerl.yaml sets full_async True and no strict_group, and
  training/verl/workers/agentic/buffer.py Buffer.get pops every finished episode (its round-down to a multiple is
  commented out), so a training batch holds whichever episodes finished and a uid's 16 rollouts can straddle two
  batches: check_uid_uuid_reward's L is the fewest steps of a success among the uid's episodes in this batch. The
  batch is then cut to a multiple of the actor world size in step rows (batch[:len // ws · ws], before
  compute_reward), which can shorten the last episodes' l. The record said "fewest step rows of a successful uuid
  in the uid" with no word of the batch composition.
- ``spear_replay`` OMITTED three numerical differences. (1) TencentYoutuResearch/SPEAR@7e843151
  verl-agent/verl/trainer/ppo/ray_trainer_hybrid.py replays (get_buffer, :1029-1035, the p50 computed there)
  before update_batch appends the step's group means (:1062-1069, :483-488), so a step-t replay uses the means of
  earlier steps; ours (spear_baseline_update) appends step t's means first. Their window drops whole steps. (2) The
  ramp's global_steps counts from 1 (:858; dp_actor.py:592-599), ours data.step from 0: our coefficient is theirs
  of the step before. (3) remove_old (:181-186) ages rows against the newest stored batch's step, ours against the
  current step.
- ``temperature_control`` OMITTED where their T goes besides the sampler: LiaoMengqi/E3-RL4LLMs@7e90b8e9
  e3/worker/fsdp_work.py:446-450 and :552 pass the scheduler's T to update_actor and compute_log_prob, and
  e3/worker/actor/dp_actor.py:150, 225, 274, 320 divide the logits by it, so their old_log_probs, log π and the PPO
  ratio are of softmax(z/T_t); ours moves only the sampler's T (the trainer's log-probs stay untempered). The
  record's read field listed these lines, but only the entropy's temperature reached the defaults and deviations.
  Also OMITTED (no value changes): the README's training command, bash ./scripts/train.sh (README.md:93-96), names
  a script the repository does not have (scripts/ holds train_1_5b.sh and train_7b.sh, whose scheduler switches the
  record already gives).
"""
import re
from collections import defaultdict

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rljax import advantages as A
from rljax import control as Ctl
from rljax import filters as F
from rljax import objectives as O
from rljax import replay as R
from rljax import rewards as W
from rljax.replay import _buffer as B
from rljax.stages import RunFacts, StepData
from _fidelity import defaults, fid, record


# ------------------------------------------------------------------------------ shortest_path_reward (not held)


def _mobilerl_penalty(uids, uuids, scores):
  """check_uid_uuid_reward (MobileRL-iclr@da92ec0c training/verl/workers/reward_manager/step.py:18-69): one score
  per step row; per uid, L = min step rows of a uuid with any score == 1; p = 0 if every score of the uuid is 0,
  else max(l − L, 0)/(2l) when the uid has a success."""
  per = defaultdict(lambda: defaultdict(list))
  for uid, uuid, r in zip(uids, uuids, scores):
    per[uid][uuid].append(r)
  pen = {}
  for d in per.values():
    lens = [len(rs) for rs in d.values() if any(r == 1 for r in rs)]
    for uuid, rs in d.items():
      l = len(rs)
      pen[uuid] = 0.0 if all(r == 0 for r in rs) or not lens else max(l - min(lens), 0) / (2 * l)
  return pen


def _step_rows(rewards, steps, groups, episodes):
  uids, uuids, scores = [], [], []
  for e in episodes:
    uids += [groups[e]] * steps[e]
    uuids += [e] * steps[e]
    scores += [rewards[e]] * steps[e]
  return uids, uuids, scores


def test_shortest_path_reward_equals_their_penalty_on_a_whole_group():
  rewards = np.array([1.0, 1.0, 0.5, 0.0, -1.0, 1.0, 0.0, 0.25])
  steps = np.array([3, 5, 6, 4, 7, 2, 2, 9])
  groups = np.array([0, 0, 0, 0, 0, 1, 1, 1])
  pen = _mobilerl_penalty(*_step_rows(rewards, steps, groups, range(8)))
  theirs = rewards - np.array([pen[e] for e in range(8)])
  ours, _ = W.shortest_path_reward(rewards, steps, groups, success=1.0)
  np.testing.assert_allclose(np.asarray(ours, np.float64), theirs, rtol=0, atol=1e-7)


def test_shortest_path_reward_their_group_is_the_uids_episodes_in_the_batch():
  # one task (uid 0), four episodes; their async buffer (group size 1) hands episodes 1 and 2 to one training
  # batch and 0 and 3 to the next: in the first batch L = 5 (episode 1), for ours (the whole group) L = 3
  rewards = np.array([1.0, 1.0, 0.5, 1.0])
  steps = np.array([3, 5, 6, 4])
  groups = np.zeros(4, int)
  split = _mobilerl_penalty(*_step_rows(rewards, steps, groups, [1, 2]))
  assert split[1] == 0.0 and split[2] == pytest.approx(1 / 12)
  ours, info = W.shortest_path_reward(rewards, steps, groups, success=1.0)
  assert float(info["reference"][1]) == 3.0
  np.testing.assert_allclose(np.asarray(ours)[1:3], [1 - 2 / 10, 0.5 - 3 / 12], atol=1e-7)
  # the world-size cut: 2 ranks, 5 + 6 = 11 step rows -> 10 kept, episode 2 loses its last step row (l 6 -> 5)
  uids, uuids, scores = _step_rows(rewards, steps, groups, [1, 2])
  cut = len(uids) // 2 * 2
  trimmed = _mobilerl_penalty(uids[:cut], uuids[:cut], scores[:cut])
  assert trimmed[2] == 0.0 and split[2] > 0.0
  text = record("shortest_path_reward")
  assert "straddle two batches" in text and "group size 1" in text
  assert "batch[:len // world_size · world_size]" in text
  assert "among the uid's rows in the training batch" in defaults("shortest_path_reward")["reference L"][1]
  assert "buffer.py" in fid("shortest_path_reward").read


# -------------------------------------------------------------------------------------- spear_replay (not held)

_T = 5
_FACTS = RunFacts(num_prompts=2, group_size=4, max_new_tokens=3, seq_len=_T)


def _data(rewards, advantages, *, step):
  rewards = np.asarray(rewards, np.float32)
  b = rewards.size
  cm = np.zeros((b, _T), bool)
  cm[:, 2:] = True
  tokens = np.repeat((100 * step + np.arange(b) + 1)[:, None], _T, 1).astype(np.int32)
  return StepData(tokens=tokens, prompt_mask=~cm, completion_mask=cm, group_id=np.arange(b, dtype=np.int32) // 4,
                  num_groups=b // 4, valid=np.ones(b, bool), lengths=cm.sum(1).astype(np.int32),
                  completions=("",) * b, problems=(None,) * b, prompt_index=np.arange(b, dtype=np.int64) // 4,
                  rewards=rewards, correct=(rewards > 0.5) * 1.0,
                  logp_behavior=np.full((b, _T), -1.0 - step, np.float32) * cm, max_new_tokens=3, step=step,
                  advantages=np.asarray(advantages, np.float32))


class _SpearBaseline:
  """TrajectoryBufferBatch's baseline (SPEAR@7e843151 ray_trainer_hybrid.py): update_batch (:451-488) appends one
  mean per uid after the update, dropping whole oldest steps first while more than baseline_buffer_size means are
  held; get_buffer's p50 (maintain_reward_statistics, np.percentile(·, 50) of the flattened history) is taken
  before that step's update_batch (:1029-1035 vs :1062-1069)."""

  def __init__(self, size):
    self.size, self.history = size, []

  def p50(self):
    flat = [m for _, ms in self.history for m in ms]
    return float(np.percentile(flat, 50))

  def update_batch(self, step, rewards, uids):
    by = defaultdict(list)
    for u, r in zip(uids, rewards):
      by[u].append(r)
    while sum(len(ms) for _, ms in self.history) > self.size and self.history:
      self.history.pop(0)
    self.history.append((step, [float(np.mean(v)) for v in by.values()]))


def test_spear_replay_baseline_includes_the_current_steps_groups_theirs_does_not():
  r0 = [1, 1, 1, 0, 0, 0, 0, 0]          # group means 0.75, 0
  r1 = [1, 1, 1, 1, 1, 1, 1, 0]          # group means 1, 0.75
  st = R.spear_replay(capacity=8, threshold=0.0, ratio=0.5, ramp_steps=1, max_age=10, baseline_size=1024).bind(_FACTS)
  state = st.init()
  _, state, m0 = st.fn(_data(r0, [1, 1, 1, 0, 0, 0, 0, 0], step=0), state)
  _, state, m1 = st.fn(_data(r1, [0] * 8, step=1), state)
  theirs = _SpearBaseline(10240)
  theirs.update_batch(1, r0, np.arange(8) // 4)
  p50_at_step_2 = theirs.p50()                       # their replay at the second step: step 1's means only
  assert p50_at_step_2 == pytest.approx(0.375)
  assert m1["baseline"] == pytest.approx(float(np.median([0.75, 0.0, 1.0, 0.75])))  # 0.75: this step's too
  assert m1["baseline"] != pytest.approx(p50_at_step_2)
  # their window drops whole steps (before the append): size 4, three steps of 3 means -> 6 held, ours 4
  w = _SpearBaseline(4)
  for s in range(3):
    w.update_batch(s, np.arange(12) * 0.1, np.arange(12) // 4)
  assert sum(len(ms) for _, ms in w.history) == 6
  ring, count, _ = B.spear_baseline_update(np.zeros(4, np.float32), 0, np.zeros(9))
  assert min(count, ring.size) == 4
  text = record("spear_replay")
  assert "so a replay at step t recalibrates against the p50 of the means of steps before t" in text
  assert "up to that many plus one step's groups" in text


def test_spear_replay_ramp_counts_steps_from_zero_theirs_from_one():
  def theirs(global_steps, coef=1.0, max_steps=200):  # verl-agent dp_actor.py:592-599
    return coef * (-np.cos(global_steps / max_steps * np.pi) + 1) / 2 if global_steps <= max_steps else coef

  st = R.spear_replay(capacity=8, ramp_steps=200).bind(_FACTS)
  state = st.init()
  coefs = []
  for s in (0, 1, 199, 200):
    _, state, m = st.fn(_data([0.0] * 8, [0.0] * 8, step=s), state)
    coefs.append(m["coef"])
  # the k-th step: ours data.step = k − 1, theirs global_steps = k
  assert coefs[0] == 0.0 and theirs(1) == pytest.approx(6.168375e-05, rel=1e-5)
  np.testing.assert_allclose(coefs, [theirs(k) for k in (0, 1, 199, 200)], rtol=1e-12, atol=1e-15)
  assert coefs[2] < 1.0 and theirs(200) == 1.0
  text = record("spear_replay")
  assert "so at the k-th step our c is theirs of step k − 1" in text
  assert "the newest stored batch's step (remove_old, :181-186" in text


# ------------------------------------------------------------------------------------ step_episode_mix (held)


def _uis1_reference(trajs, gamma=0.5, eps=1e-6):
  """core_uis1.py (MobileAgent@93afb003) with mode='mean_std_norm', both weights 1, extract_match True: rows
  (uid, traj, step, r); G_t = r_t + γ·G_{t+1}; episode term pooled over every row of the uid (torch.std unbiased),
  step term over (uid, step_id) rows (a single row: mean = itself)."""
  rows = []
  for uid, traj, rs in trajs:
    g, ret = 0.0, []
    for r in reversed(rs):
      g = r + gamma * g
      ret.append(g)
    for t, (r, gt) in enumerate(zip(rs, reversed(ret))):
      rows.append((uid, traj, t, r, gt))
  pool, step = defaultdict(list), defaultdict(list)
  for uid, _, t, r, g in rows:
    pool[uid].append(r)
    step[(uid, t)].append(g)

  def z(x, xs, single_mean):
    if len(xs) == 1:
      return (x - (single_mean if single_mean is not None else x)) / (1.0 + eps)
    return (x - np.mean(xs)) / (np.std(xs, ddof=1) + eps)

  out = {}
  for uid, traj, t, r, g in rows:
    out[(traj, t)] = z(r, pool[uid], 0.0) + z(g, step[(uid, t)], None)
  return out


def test_step_episode_mix_equals_uis1_at_their_script_settings():
  rng = np.random.default_rng(7)
  lengths = [3, 2, 4, 3, 1, 4, 2, 3]
  uid = [0, 0, 0, 0, 1, 1, 1, 1]
  m = max(lengths)
  tr = np.zeros((8, m))
  tv = np.zeros((8, m), bool)
  for i, n in enumerate(lengths):
    tr[i, :n] = rng.choice([0.0, 0.5, 1.0], n) + rng.normal(0, 0.1, n)
    tv[i, :n] = True
  ref = _uis1_reference([(uid[i], i, list(tr[i, :lengths[i]])) for i in range(8)])
  turn_ids = np.tile(np.arange(m), (8, 1))
  mask = tv.copy()
  with jax.enable_x64(True):
    adv, _ = A.step_episode_mix(jnp.asarray(tr), jnp.asarray(np.where(tv, turn_ids, -1)), jnp.zeros(8),
                                jnp.asarray(uid), mask=jnp.asarray(mask), step_weight=1.0, episode_weight=1.0,
                                episode="turns", gamma=0.5, turn_valid=jnp.asarray(tv), eps=1e-6, std_ddof=1)
  adv = np.asarray(adv)
  for (i, t), v in ref.items():
    assert adv[i, t] == pytest.approx(v, abs=1e-9)
  assert defaults("step_episode_mix")["gamma"] == ("1.0", "algorithm.gamma = 0.5 (script)")


# ----------------------------------------------------------------------------- temperature_control (not held)


def test_temperature_control_e3_rule_equals_their_scheduler_step():
  def sched(t, h_target, h, v):  # e3/worker/temperature_scheduler.py:59-62
    return t * (1 + t * np.log(h_target / h) / (np.log(v) + np.log(np.log(v))))

  ctl = Ctl.temperature_control(0.6, init_temperature=1.0, rule="e3", vocab_size=151936, t_min=0.1, t_max=2.0)
  st = ctl.init()
  t = 1.0
  for h in (0.4, 0.5, 0.9, 0.3):
    st = ctl.update(st, entropy=h)
    t = sched(t, 0.6, h, 151936)
    assert float(st.temperature) == pytest.approx(t, rel=1e-6)


def test_temperature_control_record_says_their_T_tempers_the_trainers_log_probs():
  # at T = 1.3 their π_old / π are of softmax(z/T); ours of softmax(z): a token's log-prob differs
  z = np.array([2.0, 0.5, -1.0, 0.0])
  lp = lambda x: x - np.log(np.exp(x).sum())  # noqa: E731
  assert abs(lp(z / 1.3)[0] - lp(z)[0]) > 0.1
  where = defaults("temperature_control")["where the new T goes"]
  assert where[0].startswith("the sampler only") and "compute_log_prob (old_log_probs, fsdp_work.py:552)" in where[1]
  assert "the controller's T reaches only our sampler" in record("temperature_control")
  assert "bash ./scripts/train.sh, names a script the repository does not have" in fid("temperature_control").read


# -------------------------------------------------------------------------------------------- token_mean (held)


def test_token_mean_equals_verl_091_engine_and_trl_dapo():
  rng = np.random.default_rng(3)
  loss = rng.normal(size=(8, 6))
  mask = rng.random((8, 6)) < 0.6
  mask[3] = False
  # verl 0.9.1 engine path: 2 dp ranks × 2 micro-batches; batch_num_tokens = the mini-batch's tokens (all-reduced);
  # agg_loss token-mean = masked_sum / batch_num_tokens × dp_size; FSDP averages the ranks' gradients (÷ dp_size)
  n = mask.sum()
  verl = sum(((loss[i] * mask[i]).sum() / n * 2) for i in range(8)) / 2
  # TRL 1.9.0 'dapo' (grpo_trainer.py:3139-3142): each micro-batch ÷ (num_items_in_batch / num_processes), then
  # averaged over processes; one generation batch per optimizer step
  trl = sum((loss[i] * mask[i]).sum() / (n / 2) for i in range(8)) / 2
  with jax.enable_x64(True):
    num, den = O.token_mean(jnp.asarray(loss), jnp.asarray(mask))
  ours = float(num) / float(den)
  assert ours == pytest.approx(verl, rel=1e-12) and ours == pytest.approx(trl, rel=1e-12)
  assert ours != pytest.approx(float(np.mean([(loss[i] * mask[i]).sum() / max(mask[i].sum(), 1) for i in range(8)])))


# ----------------------------------------------------------------------------------------- variance_topp (held)


def test_variance_topp_equals_ragen_std_filter_when_p_times_groups_is_whole():
  rng = np.random.default_rng(5)
  groups, size = 8, 4
  rewards = rng.random(groups * size).round(2)
  gid = np.arange(groups * size) // size
  # agent_trainer.py:461-485 (5eb79b82): view(num_groups, group_size).std(-1) (unbiased); topk(int(p·G))
  std = rewards.reshape(groups, size).std(-1, ddof=1)
  top = np.argsort(-std, kind="stable")[:int(0.25 * groups)]
  theirs = np.isin(gid, top)
  keep, _ = F.variance_topp(rewards, gid, num_groups=groups, top_p=0.25)
  np.testing.assert_array_equal(np.asarray(keep), theirs)
  assert defaults("variance_topp")["top_p"] == ("0.25", "rollout_filter_ratio 0.25 (base.yaml)")


# --------------------------------------------------------------------------------------------- void_turn (held)


def _simpletir_void(turns):
  """execute_predictions (SimpleTIR@e7b5b443 agent_utils.py:569-605, mask_void_turns True): a turn is void when it
  has no '\\boxed{' and no ```(py|python)?\\n(.*?)\\n``` block; the trajectory's loss mask is × 0 if any turn is."""
  pat = r"```(?:py|python)?\n(.*?)\n```"
  return any(("\\boxed{" not in t) and re.search(pat, t, re.DOTALL) is None for t in turns)


def test_void_turn_with_their_patterns_equals_execute_predictions():
  trajs = [["```python\nprint(1)\n```", "so \\boxed{2}"], ["I think", "\\boxed{3}"], ["```py\nx=1\n```"],
           ["```print(1)```"], ["#### 4"], ["<answer>5</answer>"], ["\\boxed {6}"], ["```\ny\n```", "done"]]
  keep, _ = F.void_turn(trajs, code_pattern=r"```(?:py|python)?\n(.*?)\n```", answer_pattern=r"\\boxed\{")
  np.testing.assert_array_equal(np.asarray(keep), [not _simpletir_void(t) for t in trajs])
  default_keep, _ = F.void_turn(trajs)
  assert list(np.asarray(default_keep)) != list(np.asarray(keep))  # the wider defaults are a listed deviation


def test_rows_reviewed_here_name_their_fixes():
  for name in ("shortest_path_reward", "spear_replay", "temperature_control"):
    assert "per-row review f" in fid(name).read or "per-row review f" in record(name)
