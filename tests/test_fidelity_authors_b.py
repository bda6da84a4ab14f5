"""Fidelity against the authors' released code (issue #35, second pass, part b).

Each test checks an rljax function against a short float64 NumPy transcription (written here, not copied) of the
function the row's ``Fidelity.reference`` names, on random inputs. That every row has a ``Fidelity`` is tested in
test_catalog.py.
"""
import math

import numpy as np
import pytest

import rljax
import rljax.replay._buffer as B
from rljax.rewards import _shaping

ROWS = {r.name: r for r in rljax.catalog()}


# ----------------------------------------------------------------------------- ExGRPO vs ElliottYan/LUFFY


def _exgrpo_authors_first_draw(success_counts, n_rollout):
  """The probability that one draw of ``WeightedBucketSampler(weighting_method="normal").sample(1)`` returns each
  prompt: bucket ``k`` (its success count) weighs ``N(k; n_rollout / 2, 1)`` (``_normal_mapping``), the non-empty
  buckets' weights are normalised, ``np.random.multinomial(1, probs)`` picks a bucket, ``random.sample`` a prompt."""
  k = np.asarray(success_counts)
  buckets = sorted(set(k.tolist()))
  w = {b: np.exp(-((b - n_rollout / 2) ** 2) / 2.0) / np.sqrt(2 * np.pi) for b in buckets}
  total = sum(w.values())
  size = {b: int((k == b).sum()) for b in buckets}
  return np.array([w[int(b)] / total / size[int(b)] for b in k])


@pytest.mark.parametrize("n_rollout", [4, 8, 16])
def test_exgrpo_bucket_law_is_the_authors_normal_weighting(n_rollout):
  rng = np.random.default_rng(n_rollout)
  for _ in range(20):
    # stored prompts: 0 < k <= n - 1 (experience_lbound=0, experience_rbound=n-1 in run_exgrpo.sh)
    counts = rng.integers(1, n_rollout, size=int(rng.integers(1, 30)))
    ours = B.exgrpo_bucket_probs(counts / n_rollout, buckets=n_rollout)
    np.testing.assert_allclose(ours, _exgrpo_authors_first_draw(counts, n_rollout), rtol=1e-12, atol=0)
  assert ROWS["exgrpo"].fidelity.basis == "authors_code"


def test_exgrpo_stage_default_sigma_is_one_success_count():
  import inspect
  from rljax.replay import exgrpo
  assert inspect.signature(exgrpo).parameters["sigma"].default is None  # -> 1 / buckets (buckets = G)
  assert inspect.signature(B.exgrpo_pick).parameters["sigma"].default is None


# ----------------------------------------------------------------------------- IRRL vs mengdi-li/internally-rewarded-rl


def _irrl_authors_linear_clipping(p_true, num_classes):
  """trainer.py, ``linear_clipping``: ``torch.clamp(c_pis_gt - 0.1, min=0, max=None)`` for 10 classes; disdain.py:
  ``jnp.maximum(0, likelihood - 1 / num_skills)``."""
  return np.maximum(np.asarray(p_true, np.float64) - 1.0 / num_classes, 0.0)


@pytest.mark.parametrize("num_classes", [2, 10, 64])
def test_clipped_linear_reward_is_the_authors_linear_clipping(num_classes):
  rng = np.random.default_rng(num_classes)
  logits = rng.normal(size=(256, num_classes)) * 3
  p = np.exp(logits - logits.max(1, keepdims=True))
  p /= p.sum(1, keepdims=True)
  p_true = p[np.arange(256), rng.integers(0, num_classes, 256)]
  ours, _ = _shaping.clipped_linear_reward(p_true.astype(np.float32), offset=-1.0 / num_classes)
  np.testing.assert_allclose(np.asarray(ours, np.float64), _irrl_authors_linear_clipping(p_true, num_classes),
                             rtol=0, atol=1e-6)
  assert ROWS["clipped_linear_reward"].fidelity.basis == "authors_code"


# ----------------------------------------------------------------------------- SPEAR vs TencentYoutuResearch/SPEAR


def _spear_authors_recalibrated(steps, stored_rewards, baseline_buffer_size):
  """``TrajectoryBufferBatch`` (verl-agent/verl/trainer/ppo/ray_trainer_hybrid.py): ``update_batch`` appends the
  step's per-group mean rewards to ``reward_mean_history`` (whole old steps popped while more than
  ``baseline_buffer_size`` group means are held); ``maintain_reward_statistics`` takes ``reward_mean_50p =
  np.percentile(flattened history, 50)``; ``prepare_for_selection`` recomputes the stored rows' advantages with
  ``compute_grpo_outcome_advantage(custom_reward_mean_std=...)``, ``norm_adv_by_std_in_grpo=False``:
  ``A = R - reward_mean_50p``, and keeps the rows with ``A >= 0``."""
  history = []
  for rewards, group_id in steps:
    means = [float(np.mean(rewards[group_id == g])) for g in dict.fromkeys(group_id.tolist())]
    while sum(len(h) for h in history) > baseline_buffer_size and history:
      history.pop(0)
    history.append(means)
  p50 = np.percentile([m for h in history for m in h], 50)
  adv = np.asarray(stored_rewards, np.float64) - p50
  return p50, adv, adv >= 0


def test_spear_recalibration_is_the_authors_percentile_baseline():
  rng = np.random.default_rng(0)
  for trial in range(20):
    steps = []
    for _ in range(int(rng.integers(1, 6))):
      groups, size = int(rng.integers(1, 6)), int(rng.integers(2, 6))
      steps.append((rng.random(groups * size) * (1 + trial % 3), np.repeat(np.arange(groups), size)))
    window, count = np.zeros(10240), 0
    for rewards, group_id in steps:
      window, count, baseline = B.spear_baseline_update(
          window, count, B.spear_group_means(rewards, group_id, np.ones(rewards.size, bool)))
    buf = B.empty_buffer(6, 4)
    buf.prompt_index[:5] = 0
    buf.reward[:5] = rng.random(5) * 2
    ours = B.spear_recalibrate(buf, baseline, step=0)
    p50, adv, keep = _spear_authors_recalibrated(steps, buf.reward[:5], 10240)
    assert baseline == pytest.approx(p50, rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(ours[:5], adv, rtol=0, atol=1e-6)  # buffer rewards are float32
    assert ours[5] == -np.inf
    np.testing.assert_array_equal(ours[:5] > 0, keep)  # no ties at 0 here (ours drops A = 0, no gradient anyway)
  assert ROWS["spear_replay"].fidelity.basis == "authors_code"


def test_spear_defaults_follow_the_authors_code():
  import inspect
  from rljax.replay import spear_replay
  params = inspect.signature(spear_replay).parameters
  # update_batch keeps advantages.mean(-1) > 0; the baseline is the median of per-group mean rewards
  assert params["threshold"].default == 0.0 and params["baseline"].default == "group"
  assert params["recalibrate"].default == "median" and params["ramp_steps"].default == 200


# ----------------------------------------------------------------------------- format reward vs Search-R1

_SR1_TAGS = ("think", "search", "information", "answer")
_SR1_MOVES = {("<think>", "start"): "in_think", ("<think>", "information"): "in_think",
              ("</think>", "in_think"): "after_think", ("<search>", "after_think"): "in_search",
              ("</search>", "in_search"): "after_search", ("<information>", "after_search"): "in_information",
              ("</information>", "in_information"): "information", ("<answer>", "after_think"): "in_answer",
              ("</answer>", "in_answer"): "end"}


def _search_r1_is_valid_sequence(content):
  """``is_valid_sequence`` (verl/utils/reward_score/qa_em_format.py) on the text after the assistant marker: equal
  opening/closing counts per tag, then a walk over the pieces split at the tags: a tag must be a legal move of
  the state machine, text outside a block must be blank, and the walk must end in state ``end``."""
  import re
  for tag in _SR1_TAGS:
    if len(re.findall(f"<{tag}>", content)) != len(re.findall(f"</{tag}>", content)):
      return False
  state = "start"
  for part in re.split(r"(</?(?:think|search|information|answer)>)", content):
    if not part.strip():
      continue
    if re.match(r"</?(?:think|search|information|answer)>", part):
      if (part, state) not in _SR1_MOVES:
        return False
      state = _SR1_MOVES[(part, state)]
    elif state not in ("in_think", "in_search", "in_information", "in_answer"):
      return False
  return state == "end"


def _search_r1_like_text(rng):
  """Mostly well-formed Search-R1 transcripts, then a few random edits (tags dropped, swapped, duplicated, text or
  whitespace inserted between blocks), so both verdicts occur often."""
  words = ["a", "b c", "\n", " ", "x<y", "</b>", "<thinking>", "\t", "answer", "<", ">"]
  blocks = ["think"]
  for _ in range(int(rng.integers(0, 3))):
    blocks += ["search", "information", "think"]
  blocks.append("answer")
  pieces = []
  for tag in blocks:
    pieces += [str(rng.choice(["", " ", "\n"])), f"<{tag}>", "".join(rng.choice(words, int(rng.integers(0, 4)))),
               f"</{tag}>"]
  pieces.append(str(rng.choice(["", "\n", " tail"])))
  for _ in range(int(rng.integers(0, 3))):
    i, op = int(rng.integers(0, len(pieces))), int(rng.integers(0, 4))
    if op == 0:
      pieces.pop(i)
    elif op == 1:
      pieces.insert(i, f"<{rng.choice(_SR1_TAGS)}>" if rng.random() < 0.5 else f"</{rng.choice(_SR1_TAGS)}>")
    elif op == 2:
      pieces.insert(i, str(rng.choice(words)))
    else:
      j = int(rng.integers(0, len(pieces)))
      pieces[i], pieces[j] = pieces[j], pieces[i]
  return "".join(pieces)


def test_search_r1_format_pattern_is_the_authors_is_valid_sequence():
  from rljax.rewards import SEARCH_R1_FORMAT_PATTERN, format_regex
  rng = np.random.default_rng(0)
  texts = [_search_r1_like_text(rng) for _ in range(3000)]
  ref = np.array([_search_r1_is_valid_sequence(t) for t in texts], np.float32)
  assert 0.2 < ref.mean() < 0.8  # both verdicts are well represented
  np.testing.assert_array_equal(format_regex(texts, pattern=SEARCH_R1_FORMAT_PATTERN), ref)
  assert ROWS["format_regex"].fidelity.basis == "authors_code"


# ----------------------------------------------------------------------------- AdaPR vs xuyifan-0731/MobileRL-iclr


class _MobileRLBuffer:
  """``ReplayBuffer`` (training/verl/workers/agentic/replay_buffer.py), one row per trajectory: ``push`` purges by
  age, inserts the top ``ceil(top_ratio * n)`` trajectories by mean advantage, evicts by the balanced score;
  ``sample_for_training`` takes the top ``ceil(replay_ratio * B)`` by stored advantage."""

  def __init__(self, max_size, top_ratio, replay_ratio, balance_alpha, max_age_steps):
    self.max_size, self.top_ratio, self.replay_ratio = max_size, top_ratio, replay_ratio
    self.alpha, self.max_age = balance_alpha, max_age_steps
    self.adv, self.order, self.counter = {}, {}, 0  # dicts keep insertion order, as the authors' OrderedDict

  def push(self, uuids, adv):
    self.counter += 1
    if self.max_age and self.max_age > 0:
      for u in [u for u, o in self.order.items() if o <= self.counter - self.max_age]:
        del self.adv[u], self.order[u]
    k = max(1, math.ceil(self.top_ratio * len(uuids)))
    for u, a in sorted(zip(uuids, adv), key=lambda kv: kv[1], reverse=True)[:k]:
      self.adv[u], self.order[u] = a, self.counter
    while len(self.adv) > self.max_size:
      a, o = list(self.adv.values()), list(self.order.values())
      da, do = max(a) - min(a) + 1e-8, max(o) - min(o) + 1e-8
      score = {u: self.alpha * (self.adv[u] - min(a)) / da + (1 - self.alpha) * (self.order[u] - min(o)) / do
               for u in self.adv}
      lo = min(score.values())
      victim = min([u for u, s_ in score.items() if abs(s_ - lo) < 1e-12], key=lambda u: self.order[u])
      del self.adv[victim], self.order[victim]

  def sample(self, batch_size):
    k = max(1, math.ceil(self.replay_ratio * batch_size))
    return [u for u, _ in sorted(self.adv.items(), key=lambda kv: kv[1], reverse=True)[:k]]


def _apply_push(buf, ids, step, rows, adv, insert, remove):
  """Our buffer after ``adapr_push_plan``: ``remove`` emptied, ``insert`` written (ids kept alongside)."""
  buf = B.remove(buf, remove)
  for r in insert:
    slot = int(B.free_slots(buf, 1)[0])
    buf.prompt_index[slot], buf.step[slot] = 0, step
    buf.seq[slot] = int(buf.seq.max(initial=-1)) + 1
    buf.completion_mask[slot] = [False, True, True, True]
    buf.advantages[slot] = adv[list(rows).index(r)] * buf.completion_mask[slot]
    ids[slot] = (step, int(r))
  return buf


@pytest.mark.parametrize("capacity,top_ratio,max_age,alpha", [(6, 0.25, 4, 0.5), (4, 0.5, 2, 0.3), (10, 1.0, 0, 1.0)])
def test_adapr_buffer_is_the_authors_push_and_sample(capacity, top_ratio, max_age, alpha):
  rng = np.random.default_rng(capacity)
  authors = _MobileRLBuffer(capacity, top_ratio, 1.0, alpha, max_age)
  buf, ids = B.empty_buffer(capacity, 4), {}
  for step in range(12):
    n = int(rng.integers(1, 12))
    adv = rng.normal(size=n).astype(np.float32).astype(np.float64)  # float32-exact: stored as float32
    rows = np.arange(n)
    insert, remove = B.adapr_push_plan(buf, rows, adv, step=step, top_ratio=top_ratio, max_age=max_age,
                                       balance_alpha=alpha)
    buf = _apply_push(buf, ids, step, rows, adv, insert, remove)
    authors.push([(step, int(r)) for r in rows], adv.tolist())
    held = {ids[s] for s in np.flatnonzero(buf.prompt_index >= 0)}
    assert held == set(authors.adv), step
    free = np.arange(int(rng.integers(0, 2 * capacity)))
    rows_r, slots_r = B.adapr_sample_plan(buf, free, k=math.ceil(1.0 * n))
    expected = authors.sample(n)[:free.size]
    assert [ids[int(s)] for s in slots_r] == expected and rows_r.tolist() == free[:len(expected)].tolist()


def _step(rewards, advantages, *, step, t=5):
  from rljax.stages import StepData
  rewards = np.asarray(rewards, np.float32)
  b = rewards.size
  cm = np.zeros((b, t), bool)
  cm[:, 2:] = True
  tokens = np.repeat((100 * step + np.arange(b) + 1)[:, None], t, 1).astype(np.int32)
  return StepData(tokens=tokens, prompt_mask=~cm, completion_mask=cm, group_id=np.arange(b, dtype=np.int32) // 4,
                  num_groups=b // 4, valid=np.ones(b, bool), lengths=cm.sum(1).astype(np.int32),
                  completions=("",) * b, problems=(None,) * b, prompt_index=np.arange(b, dtype=np.int64) // 4,
                  rewards=rewards, correct=(rewards > 0.5) * 1.0, logp_behavior=np.full((b, t), -1.0, np.float32) * cm,
                  max_new_tokens=3, step=step, advantages=np.asarray(advantages, np.float32))


def test_positive_replay_mobilerl_mode_stores_the_top_advantages_and_fills_gradient_free_rows():
  from rljax.replay import positive_replay
  from rljax.stages import RunFacts
  st = positive_replay(mode="mobilerl", capacity=4, top_ratio=0.25).bind(
      RunFacts(num_prompts=2, group_size=4, max_new_tokens=3, seq_len=5))
  assert st.phase == "advantages"
  state = st.init()
  # step 0: group 0 has one success (A = 1.5), group 1 is all-failed (A = 0, no gradient)
  adv0 = [1.5, -0.5, -0.5, -0.5, 0, 0, 0, 0]
  out, state, m = st.fn(_step([1, 0, 0, 0, 0, 0, 0, 0], adv0, step=0), state)
  assert m["stored"] == 2 and state.prompt_index[state.prompt_index >= 0].size == 2  # ceil(0.25 * 8) = 2
  # the stored rows (A = 1.5, then the first A = 0 row 4 beats -0.5) replay into the gradient-free rows 4..7
  assert m["replayed"] == 2 and out.extras["replay_mask"].tolist() == [False] * 4 + [True, True, False, False]
  np.testing.assert_allclose(out.advantages[4], 1.5 * out.completion_mask[4])
  assert out.tokens[4, 0] == 1  # row 0's tokens
  # four steps later the step-0 rows are purged by age (max_age 4)
  for s in range(1, 5):
    _, state, m = st.fn(_step([0] * 8, [0.0] * 8, step=s), state)
  assert 0 not in set(state.step[state.prompt_index >= 0].tolist())
  with pytest.raises(ValueError, match="mode"):
    positive_replay(mode="x")


def test_positive_replay_logp_old_defaults_per_mode():
  from rljax.replay import positive_replay
  assert positive_replay().logp_old == "recompute"
  assert positive_replay(mode="mobilerl").logp_old == "behavior"  # their rows keep the pushing step's old logp
  assert positive_replay(mode="mobilerl", logp_old="recompute").logp_old == "recompute"


# ------------------------------------------------------------------------ Guide vs vaskar-open-source-research/guide_rl


def _guide_authors_loss(logp, old, adv, mask, on_policy, cliprange=0.2, gamma=1.0):
  """``compute_policy_loss`` (verl/verl/trainer/ppo/core_algos.py), ``gamma_strategy="constant"`` (their
  ppo_trainer.yaml): ``r = exp(logp - old)`` with ``old`` the hinted-prompt log-prob of a hinted row
  (``importance_weighted_reroll``); off-policy rows ``r <- r / (r + gamma)``, unclipped; on-policy rows PPO clip;
  ``max`` of the two losses, masked token mean over the call's rows. This is the function; their trainer calls it
  on micro-batches of ONE sequence (dp_actor.py:247-249, 311), so their step's loss is ``seq_mean_token_mean`` of
  it, not this batch token mean (per-row review r, ``tests/test_fidelity_row_review_r.py``)."""
  r = np.exp(logp - old)
  off = ~on_policy[:, None]
  r = np.where(off, r / (r + gamma), r)
  pg1 = -adv * r
  pg2 = -adv * np.where(off, r, np.clip(r, 1 - cliprange, 1 + cliprange))
  return (np.maximum(pg1, pg2) * mask).sum() / mask.sum()


@pytest.mark.parametrize("gamma", [1.0, 0.3])
def test_guide_off_context_loss_is_the_authors_constant_gamma_shaping(gamma):
  import jax
  import jax.numpy as jnp
  import rljax.objectives as O
  from rljax.types import PolicyOutputs, TrainBatch
  rng = np.random.default_rng(int(gamma * 10))
  b, t = 8, 6
  hinted = np.array([False] * 4 + [True] * 4)  # a failed group re-sampled with the hint: rows 4..7
  old = -rng.uniform(0.1, 2.0, (b, t))  # hinted rows: log pi_old(y | x + h), as the hints stage's logp_old
  logp = old + rng.normal(scale=0.5, size=(b, t))
  mask = (rng.uniform(size=(b, t)) < 0.85).astype(np.float64)
  mask[:, 0] = 1
  adv = np.repeat(rng.normal(size=(b, 1)), t, 1)
  batch = TrainBatch.create(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask > 0),
                            advantages=jnp.asarray(adv, jnp.float32), group_id=jnp.arange(b) // 4,
                            logp_old=jnp.asarray(old, jnp.float32), extras={"replay_mask": jnp.asarray(hinted)})
  # their on-policy rows are PPO-clipped: clip_fresh=True
  obj = O.chain(O.exgrpo_policy(0.2, 0.2, beta=gamma, clip_fresh=True), aggregate=O.token_mean)
  f = lambda lp: obj(PolicyOutputs.create(logp=lp), batch)[0]
  got = float(f(jnp.asarray(logp, jnp.float32)))
  np.testing.assert_allclose(got, _guide_authors_loss(logp, old, adv, mask, ~hinted, gamma=gamma), rtol=1e-5)
  grad = np.asarray(jax.grad(f)(jnp.asarray(logp, jnp.float32)))
  h = 1e-6
  ref_grad = np.zeros_like(logp)
  for idx in np.ndindex(logp.shape):
    e = np.zeros_like(logp)
    e[idx] = h
    ref_grad[idx] = (_guide_authors_loss(logp + e, old, adv, mask, ~hinted, gamma=gamma)
                     - _guide_authors_loss(logp - e, old, adv, mask, ~hinted, gamma=gamma)) / (2 * h)
  np.testing.assert_allclose(grad, ref_grad, rtol=1e-4, atol=1e-6)


def test_guide_defaults_are_the_authors_reroll():
  import inspect
  from rljax.hints import guide
  params = inspect.signature(guide).parameters
  # reroll_threshold 0.001 (all-failed groups), the whole group re-sampled, pi_old under the hinted prompt
  assert params["rows"].default == 1.0 and params["logp_old"].default == "behavior"
  assert ROWS["guide"].fidelity.basis == "authors_code"


# ----------------------------------------------------------------------------- OC-GRPO vs AgPriyank/OC-GRPO


def _oc_grpo_authors_loss(logp, old_x, old_hinted, adv, mask, replaced, clamp_min=0.01, eps=0.2, clip_c=3.0):
  """verl_grpo/trainer/ray_trainer.py, ``is_correction_mode: per_token``: on the hint-replaced rows the advantages
  are multiplied by ``w_t = clamp(exp(-(log pi_old(y_t | x~) - log pi_old(y_t | x))), clamp_min, 1)`` (``1`` on the
  other rows); then verl 0.4.1's vanilla ``compute_policy_loss`` (``r = exp(logp - log pi_old(y | x))``, PPO clip,
  dual clip ``clip_ratio_c = 3`` on negative advantages), token mean."""
  w = np.where(replaced[:, None], np.clip(np.exp(old_x - old_hinted), clamp_min, 1.0), 1.0)
  a = adv * w
  r = np.exp(logp - old_x)
  pg = np.maximum(-a * r, -a * np.clip(r, 1 - eps, 1 + eps))
  pg = np.where(a < 0, np.minimum(-a * clip_c, pg), pg)
  return (pg * mask).sum() / mask.sum()


def test_oc_grpo_correction_is_the_authors_per_token_is_weight():
  import jax
  import jax.numpy as jnp
  import rljax.objectives as O
  from rljax.types import PolicyOutputs, TrainBatch
  rng = np.random.default_rng(7)
  b, t = 8, 6
  replaced = np.array([False] * 4 + [True] * 4)  # an all-failed group whose responses came from x + prefix
  old_x = -rng.uniform(0.1, 2.0, (b, t))  # log pi_old(y | x): logp_old="recompute"
  old_hinted = np.where(replaced[:, None], old_x + rng.normal(scale=1.5, size=(b, t)), old_x)  # the sampler's
  old_hinted[5, 1] = old_x[5, 1] + 6.0  # w = e^-6 < 0.01: the lower clamp binds
  logp = old_x + rng.normal(scale=0.4, size=(b, t))
  mask = (rng.uniform(size=(b, t)) < 0.85).astype(np.float64)
  mask[:, 0] = 1
  adv = np.repeat(rng.normal(size=(b, 1)), t, 1)
  batch = TrainBatch.create(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask > 0),
                            advantages=jnp.asarray(adv, jnp.float32), group_id=jnp.arange(b) // 4,
                            logp_old=jnp.asarray(old_x, jnp.float32),
                            logp_behavior=jnp.asarray(old_hinted, jnp.float32))
  obj = O.chain(O.ppo_clip(0.2, 0.2, dual_clip=3.0, correction=O.tis(1.0, lower=0.01)), aggregate=O.token_mean)
  f = lambda lp: obj(PolicyOutputs.create(logp=lp), batch)[0]
  ref = lambda lp: _oc_grpo_authors_loss(lp, old_x, old_hinted, adv, mask, replaced)
  np.testing.assert_allclose(float(f(jnp.asarray(logp, jnp.float32))), ref(logp), rtol=1e-5)
  grad = np.asarray(jax.grad(f)(jnp.asarray(logp, jnp.float32)))
  h, ref_grad = 1e-6, np.zeros_like(logp)
  for idx in np.ndindex(logp.shape):
    e = np.zeros_like(logp)
    e[idx] = h
    ref_grad[idx] = (ref(logp + e) - ref(logp - e)) / (2 * h)
  np.testing.assert_allclose(grad, ref_grad, rtol=1e-4, atol=1e-6)
  w = np.clip(np.exp(old_x - old_hinted), 0.01, 1.0)[replaced]
  assert (w == 1).any() and (w == 0.01).any() and ((w > 0.01) & (w < 1)).any()  # both bounds and between
  assert ROWS["oc_grpo"].fidelity.basis == "authors_code"
