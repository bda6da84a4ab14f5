"""Issue #51, per-row review part d: an independent re-audit of six rows no draw had picked, read whole.

Rows reviewed: gd2po, implicit_progress_reward, key_baseline, kl_in_reward, math_answer, positive_replay.

Held (3): gd2po, kl_in_reward, positive_replay. Their "= theirs" claims are checked below against float64 NumPy
transcriptions written for these tests: Qwen-Applications/GD2PO@f1ad765b tool-calling/verl/trainer/ppo/
ray_trainer.py:243-317, 319-360, 451-519 with core_algos.py:250-310 and utils/torch_functional.py:188-223 (both
rules; the snr script's τ and eps are real Hydra keys of their ppo_trainer.yaml:139-141, so the scripts start); the
verl 0.9.1 PyPI wheel trainer/ppo/ray_trainer.py:78-117 apply_kl_penalty with core_algos.py:2188-2251 (reached by
the default v1 trainer, trainer_base.py:1743-1760; the same as volcengine/verl@v0.7.0 ray_trainer.py:126-165);
xuyifan-0731/MobileRL-iclr@da92ec0c training/verl/workers/agentic/replay_buffer.py (push / sample_for_training /
_evict_until_fits, one row per uuid). Also read for positive_replay, agreeing with the record: the caller
(training/verl/trainer/ppo/ray_trainer.py fit: the world-size cut, task_adv_normalize, mute_uid_all_zero_reward,
push, sample_for_training(len(batch)), the replayed rows concatenated first) and negative_sample_clip.py.

Not held (3), each error fixed in the record and checked here (no implementation changed, no implementation bug
found):

- ``math_answer`` (FALSE, and OMITTED): the record said verl's extraction reads ``\\fbox`` when there is no
  ``\\boxed`` ("theirs the last \\boxed{…} / \\boxed … / \\fbox only"; a deviation "\\fbox is read only when there
  is no \\boxed"). volcengine/verl@v0.7.0 verl/utils/reward_score/math_reward.py:63-70 does find a ``\\fbox{…}``,
  but remove_boxed (:49-60) asserts the ``\\boxed{`` prefix, the AssertionError is caught by compute_score
  (:19-26): every ``\\fbox`` answer scores 0.0 (the verl 0.9.1 PyPI wheel's file is the same). Ours reads it (1.0).
  OMITTED: "theirs the ground truth as given": verl's data preprocessing reduces the reference when the parquet is
  built (examples/data_preprocess/math_dataset.py:28-29, 69-75: remove_boxed(last_boxed_only_string(solution));
  gsm8k.py:27-32: the number after '#### ', ',' removed), which is what our extract_reference does at score time.
- ``implicit_progress_reward`` (OMITTED): the record read only the best-of-n runner and called the authors' use
  "best-of-n selection" with "their scripts' token mean and step min". deeplearning-wisc/progress-advantage's
  README (@6fae472f) names three uses, each with a script: UQ (scripts/tau2_uq_onpolicy.sh → runners.tau2_uq, own
  per-backbone/domain aggregations) and FA (scripts/fa.sh → runners/fa.py@b1253bdd: --token-aggs sum, beta 1.0;
  _step_rewards gives each action step β·(Σ log π − Σ log π_ref), non-action steps 0, no step aggregation: a
  per-step reward whose running sum locates the failing step), the use nearest to ours (a step's reward = the sum
  of our per-token rewards), and pa/merging.py's merged reference π_ref + α·τ.
- ``key_baseline`` (OMITTED, "authors' code exists"): the record said no code was found. The same authors'
  earlier version of the system, Evo-MARL (arXiv 2508.03864), has a repository, zhangyt-cn/Evo-MARL (mas-train.py,
  run_chain_ppo.sh): three roles (analyst, executor, verifier) in one chain of one shared actor, one reward per
  episode, OpenRLHF --advantage_estimator group_norm over --n_samples_per_prompt 2: no public / functional-group
  baseline and no REINFORCE++, so it does not settle AdvEvo-MARL's form; now in the record.

Each numeric reference below is a float64 NumPy (or plain Python, for text) transcription of the cited lines.
"""
import math
import pathlib
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _fidelity import any_deviation as _any_dev
from _fidelity import defaults as _defaults, fid as _fid, record as _record



# ------------------------------------------------------------------------------------------------ gd2po (held)


def _gd2po_grpo(scores, index, eps=1e-6):
  """GD2PO@f1ad765b core_algos.py:250-310 (compute_grpo_outcome_advantage, norm_adv_by_std_in_grpo True): per uid
  mean and torch.std (unbiased), (s − mean)/(std + ε); a one-row uid: mean 0, std 1."""
  out = np.empty_like(scores)
  for g in np.unique(index):
    m = index == g
    if m.sum() == 1:
      out[m] = (scores[m] - 0.0) / (1.0 + eps)
    else:
      out[m] = (scores[m] - scores[m].mean()) / (scores[m].std(ddof=1) + eps)
  return out


def _masked_whiten(values, mask):
  """torch_functional.py:188-223: masked mean, unbiased masked var (× n/(n−1)), (x − mean)·rsqrt(var + 1e-8)."""
  n = mask.sum()
  mean = (values * mask).sum() / n
  var = (((values - mean) ** 2) * mask).sum() / n * (n / (n - 1))
  return (values - mean) / np.sqrt(var + 1e-8)


def _gd2po_theirs(token_scores, response_mask, index, tau=None, ratio_eps=1e-8):
  """ray_trainer.py:243-317 (_compute_active_gdpo_advantages: each active channel's GRPO, token advantages and
  their token sums; _get_mixed_sign_conflict_mask, eps 1e-8; _compute_gdpo_group_keep_ratio; _apply_gdpo_keep_mask
  with use_masked_whiten_in_gdpo True) for 'gdpo_filter_group_ratio' (:472-505, tau None) and, with tau,
  _compute_gdpo_ratio_conflict_advantages (:319-360, apply_group_keep_ratio True, :507-519).
  token_scores [K, B, T] (each channel's reward on its last token); returns [B, T] advantages."""
  tok, roll = [], []
  for k in range(token_scores.shape[0]):
    a = _gd2po_grpo(token_scores[k].sum(-1), index)[:, None] * response_mask
    tok.append(a)
    roll.append((a * response_mask).sum(-1))
  tok, roll = np.stack(tok), np.stack(roll)
  conflict = (roll > 1e-8).any(0) & (roll < -1e-8).any(0)
  if tau is not None:
    ratio = roll.sum(0) / (np.abs(roll).sum(0) + ratio_eps)
    conflict = conflict & (np.abs(ratio) < tau)
  keep = (~conflict).astype(np.float64)
  ratio_g = np.zeros_like(keep)
  for g in np.unique(index):
    m = index == g
    ratio_g[m] = keep[m].sum() / m.sum()
  new = tok.sum(0) * ratio_g[:, None]
  filtered = new * keep[:, None] * response_mask
  wm = keep[:, None] * response_mask
  return _masked_whiten(filtered, wm) * wm


def _gd2po_case():
  rng = np.random.default_rng(51)
  g, n, k = 6, 4, 2
  index = np.repeat(np.arange(g), n)
  r = rng.integers(0, 2, size=(g * n, k)).astype(np.float64) + rng.normal(scale=0.1, size=(g * n, k))
  return r, index


@pytest.mark.parametrize("tau", [None, 0.8, 0.2])
def test_gd2po_equals_their_rules_at_one_token_per_response(tau):
  from rljax.advantages import gd2po  # pylint: disable=import-outside-toplevel
  r, index = _gd2po_case()
  mask = np.ones((r.shape[0], 1))
  theirs = _gd2po_theirs(np.transpose(r)[:, :, None], mask, index, tau=tau)[:, 0]
  with jax.enable_x64(True):
    ours, info = gd2po(jnp.asarray(r), jnp.asarray(index), conflict_tol=1e-8, ratio_threshold=tau)
  keep = np.asarray(info["keep"])
  assert 0 < keep.sum() < keep.size  # the case has conflicts to drop
  np.testing.assert_allclose(np.asarray(ours), theirs, atol=1e-12)
  d = _defaults("gd2po")
  assert d["conflict_tol"] == ("1e-6 on A", "1e-8 on the token-summed A")
  assert "0.2 in the code" in d["ratio_threshold"][1] and "TAU = 0.8" in d["ratio_threshold"][1]


def test_gd2po_token_weighted_whitening_is_the_listed_deviation():
  from rljax.advantages import gd2po  # pylint: disable=import-outside-toplevel
  r, index = _gd2po_case()
  lengths = 1 + (np.arange(r.shape[0]) * 7) % 5  # responses of 1-5 tokens
  mask = (np.arange(5)[None, :] < lengths[:, None]).astype(np.float64)
  tok_scores = np.zeros((2, r.shape[0], 5))
  tok_scores[:, np.arange(r.shape[0]), lengths - 1] = np.transpose(r)
  theirs = _gd2po_theirs(tok_scores, mask, index)
  with jax.enable_x64(True):
    ours, _ = gd2po(jnp.asarray(r), jnp.asarray(index), conflict_tol=1e-8)
  row = theirs.sum(1) / lengths  # their per-token advantage is constant over a row
  assert np.max(np.abs(row - np.asarray(ours))) > 1e-3
  assert _any_dev("gd2po", "whitening over kept rows", "kept response tokens")


# ------------------------------------------------------------------------------------------ kl_in_reward (held)


def _verl_apply_kl_penalty(scores, old, ref, mask, beta, kl_penalty):
  """The verl 0.9.1 PyPI wheel ray_trainer.py:78-117 with core_algos.py:2188-2251 (kl_penalty / _forward):
  kld = k(old, ref)·mask; rewards = scores − β·kld; current_kl = mean over rows of masked_mean(kld, axis −1)."""
  if kl_penalty in ("kl", "k1"):
    kld = old - ref
  elif kl_penalty in ("low_var_kl", "k3"):
    kl = np.clip(ref - old, -20, 20)
    kld = np.clip(np.exp(kl) - kl - 1, -10, 10)
  elif kl_penalty in ("mse", "k2"):
    kld = 0.5 * (old - ref) ** 2
  else:
    kld = np.abs(old - ref)
  kld = kld * mask
  cur = ((kld * mask).sum(-1) / (mask.sum(-1) + 1e-8)).mean()
  return scores - beta * kld, cur


@pytest.mark.parametrize("estimator", ["kl", "low_var_kl", "k2", "abs"])
def test_kl_in_reward_equals_verl_apply_kl_penalty(estimator):
  from rljax.objectives import kl_in_reward  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(2188)
  b, t = 5, 7
  mask = (np.arange(t)[None, :] < np.array([7, 3, 5, 1, 6])[:, None]).astype(np.float64)
  old = rng.normal(-1.5, 1.0, (b, t))
  ref = old + rng.normal(0, 0.8, (b, t))
  ref[0, 0] = old[0, 0] + 30.0  # the ±20 / ±10 clamps of k3
  scores = rng.normal(size=(b, t)) * mask
  theirs, cur = _verl_apply_kl_penalty(scores, old, ref, mask, 0.001, estimator)
  with jax.enable_x64(True):
    ours, metrics = kl_in_reward(jnp.asarray(scores), jnp.asarray(old), jnp.asarray(ref), jnp.asarray(mask),
                                 beta=0.001, estimator=estimator)
  np.testing.assert_allclose(np.asarray(ours), theirs, atol=1e-15)
  np.testing.assert_allclose(float(metrics["kl"]), cur, rtol=1e-7)  # verl's masked_mean ÷ (n + 1e-8)
  d = _defaults("kl_in_reward")
  assert d["beta"] == ("0.001", "kl_ctrl.kl_coef 0.001 (fixed controller)")
  assert d["estimator"] == ("'kl' (k1)", "algorithm.kl_penalty 'kl'")


def test_kl_in_reward_sequence_score_goes_on_the_last_mask_token():
  from rljax.objectives import kl_in_reward  # pylint: disable=import-outside-toplevel
  mask = np.array([[1, 1, 1, 0], [1, 0, 0, 0]], np.float64)
  old = np.array([[-1.0, -2.0, -0.5, 0.0], [-0.3, 0.0, 0.0, 0.0]])
  ref = np.array([[-1.2, -1.0, -0.5, 0.0], [-0.1, 0.0, 0.0, 0.0]])
  token = np.zeros((2, 4))
  token[0, 2], token[1, 0] = 1.0, 0.5  # verl's token_level_scores: the score on the last response token
  theirs, _ = _verl_apply_kl_penalty(token, old, ref, mask, 0.001, "kl")
  with jax.enable_x64(True):
    ours, _ = kl_in_reward(jnp.asarray([1.0, 0.5]), jnp.asarray(old), jnp.asarray(ref), jnp.asarray(mask))
  np.testing.assert_allclose(np.asarray(ours), theirs, atol=1e-15)


# ------------------------------------------------------------------------------------ positive_replay (held)


class _MobileRLBuffer:
  """MobileRL-iclr@da92ec0c replay_buffer.py ReplayBuffer with one row per uuid (masked_row_mean of a row's
  token advantages): push (age purge, top max(1, ceil(top_ratio·n)) by mean advantage, balanced eviction) and
  sample_for_training (the max(1, ceil(replay_ratio·size)) highest)."""

  def __init__(self, max_size, top_ratio, replay_ratio, balance_alpha, max_age):
    self.max_size, self.top, self.rep, self.alpha, self.age = max_size, top_ratio, replay_ratio, balance_alpha, max_age
    self.adv, self.order, self.step = {}, {}, 0  # dict insertion order = OrderedDict order

  def push(self, uuids, row_adv):
    self.step += 1
    thr = self.step - self.age
    for u in [u for u, s in self.order.items() if s <= thr]:
      del self.adv[u], self.order[u]
    k = max(1, math.ceil(self.top * len(uuids)))
    for u, a in sorted(zip(uuids, row_adv), key=lambda kv: kv[1], reverse=True)[:k]:
      self.adv[u], self.order[u] = a, self.step
    while len(self.adv) > self.max_size:
      a = np.array(list(self.adv.values()))
      o = np.array([self.order[u] for u in self.adv], np.float64)
      score = (self.alpha * (a - a.min()) / (a.max() - a.min() + 1e-8)
               + (1 - self.alpha) * (o - o.min()) / (o.max() - o.min() + 1e-8))
      cand = [u for u, s in zip(self.adv, score) if abs(s - score.min()) < 1e-12]
      u = min(cand, key=lambda x: self.order[x])
      del self.adv[u], self.order[u]

  def sample(self, size):
    k = max(1, math.ceil(self.rep * size))
    return {u for u, _ in sorted(self.adv.items(), key=lambda kv: kv[1], reverse=True)[:k]}


def test_positive_replay_mobilerl_plans_equal_their_buffer_one_row_per_uuid():
  from rljax.replay import _buffer as B  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(37)
  n, t, cap = 8, 3, 5
  theirs = _MobileRLBuffer(cap, 0.25, 0.25, 0.5, 4)
  buf = B.empty_buffer(cap, t)
  for step in range(1, 10):
    adv = rng.normal(size=(n, t)).astype(np.float32).astype(np.float64)
    cm = np.ones((n, t), bool)
    cm[:, 2] = rng.random(n) < 0.5  # rows of 2 or 3 completion tokens
    adv = adv * cm
    row_adv = (adv * cm).sum(1) / cm.sum(1)
    uuids = [f"s{step}r{i}" for i in range(n)]
    theirs.push(uuids, row_adv)
    data = types.SimpleNamespace(tokens=np.zeros((n, t), np.int32), prompt_mask=np.zeros((n, t), bool),
                                 completion_mask=cm, logp_behavior=np.zeros((n, t), np.float32),
                                 entropy_behavior=None, prompt_index=np.arange(n) + 100 * step,
                                 rewards=np.zeros(n, np.float32), correct=np.zeros(n, np.float32), role_id=None)
    new, drop = B.adapr_push_plan(buf, np.arange(n), row_adv, step=step, top_ratio=0.25, max_age=4,
                                  balance_alpha=0.5)
    buf = B.store(B.remove(buf, drop), data, new, step=step, advantages=adv[new])
    held = np.flatnonzero(buf.prompt_index >= 0)
    ours = {f"s{buf.prompt_index[s] // 100}r{buf.prompt_index[s] % 100}" for s in held}
    assert ours == set(theirs.adv), step
    rows, slots = B.adapr_sample_plan(buf, np.arange(n), math.ceil(0.25 * n))
    assert {f"s{buf.prompt_index[s] // 100}r{buf.prompt_index[s] % 100}" for s in slots} == theirs.sample(n)
  d = _defaults("positive_replay")
  assert d["capacity"] == ("256", "max_size 256 (yaml; class default 512)")
  assert d["replay_ratio"] == ("1.0", "1.0 (yaml; class default 0.25)")


# --------------------------------------------------------------------------------- math_answer (not held)


def _verl_last_boxed_only_string(string):
  """volcengine/verl@v0.7.0 verl/utils/reward_score/math_reward.py:63-87."""
  idx = string.rfind("\\boxed")
  if "\\boxed " in string:
    return "\\boxed " + string.split("\\boxed ")[-1].split("$")[0]
  if idx < 0:
    idx = string.rfind("\\fbox")
    if idx < 0:
      return None
  depth, right = 0, None
  for i in range(idx, len(string)):
    if string[i] == "{":
      depth += 1
    if string[i] == "}":
      depth -= 1
      if depth == 0:
        right = i
        break
  return None if right is None else string[idx:right + 1]


def _verl_remove_boxed(s):
  """math_reward.py:49-60 (the asserts kept)."""
  if "\\boxed " in s:
    assert s[:7] == "\\boxed "
    return s[7:]
  assert s[:7] == "\\boxed{"
  assert s[-1] == "}"
  return s[7:-1]


def _verl_math_compute_score(solution, ground_truth):
  """math_reward.py:17-29; is_equiv (:32-46) compares strip_string of both, the identity on the plain digit
  strings used here."""
  try:
    last = _verl_last_boxed_only_string(solution)
    if last is not None and _verl_remove_boxed(last) == ground_truth:
      return 1.0
  except Exception:  # pylint: disable=broad-except
    pass
  return 0.0


def test_math_answer_fbox_scores_zero_in_verl_and_the_record_says_so():
  from rljax.rewards import math_answer  # pylint: disable=import-outside-toplevel
  texts = ["so the result is \\fbox{5}", "so the result is \\boxed{5}", "\\boxed{3} then \\fbox{5}"]
  theirs = [_verl_math_compute_score(x, "5") for x in texts]
  assert theirs == [0.0, 1.0, 0.0]
  ours = np.asarray(math_answer(texts, ["5"] * 3, sources=("boxed",))).tolist()
  assert ours == [1.0, 1.0, 1.0]
  d = _defaults("math_answer")
  assert "\\fbox only" not in d["sources"][1] and "remove_boxed's assertion" in d["sources"][1]
  assert "caught: 0.0" in d["sources"][1]
  assert _any_dev("math_answer", "a \\fbox answer scores 0 in verl", "ours reads \\fbox{…}")
  assert not _any_dev("math_answer", "\\fbox is read only when there is no \\boxed")
  assert "math_reward.py:49-60" in _fid("math_answer").read


def test_math_answer_reference_is_reduced_by_verls_preprocessing():
  from rljax.rewards import math_answer  # pylint: disable=import-outside-toplevel
  solution = "We add: $2+3=\\boxed{5}$."
  gt = _verl_remove_boxed(_verl_last_boxed_only_string(solution))  # math_dataset.py:28-29 extract_solution
  assert gt == "5" and _verl_math_compute_score("\\boxed{5}", gt) == 1.0
  ours = np.asarray(math_answer(["\\boxed{5}"], [solution], sources=("boxed",))).tolist()
  assert ours == [1.0]  # extract_reference does at score time what verl's preprocessing does when the data is built
  ref = _defaults("math_answer")["reference"][1]
  assert ref != "the ground truth as given"
  assert "math_dataset.py" in ref and "gsm8k.py" in ref and "when the data is built" in ref
  assert "math_dataset.py:28-29, 69-75" in _fid("math_answer").read


# ----------------------------------------------------------------------- implicit_progress_reward (not held)


def _fa_step_rewards(policy_steps, ref_steps, is_action, token_agg, beta=1.0):
  """deeplearning-wisc/progress-advantage@b1253bdd runners/fa.py _step_rewards ('progress_advantage')."""
  agg = {"sum": np.sum, "mean": np.mean, "min": np.min, "max": np.max}[token_agg]
  out = []
  for i, p in enumerate(policy_steps):
    if not is_action[i]:
      out.append(0.0)
      continue
    p_agg = agg(p) if p.size > 0 else 0.0
    r_agg = agg(ref_steps[i]) if ref_steps[i].size > 0 else 0.0
    out.append(beta * (p_agg - r_agg))
  return out


def test_implicit_progress_reward_step_sum_is_fa_sh_step_reward():
  from rljax.advantages import implicit_progress_reward  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(26080)
  lengths = np.array([4, 2, 6])  # three action steps, one per row
  mask = np.arange(6)[None, :] < lengths[:, None]
  lp = rng.normal(-1.0, 0.7, (3, 6))
  lr = rng.normal(-1.3, 0.7, (3, 6))
  steps_p = [lp[i, :lengths[i]] for i in range(3)]
  steps_r = [lr[i, :lengths[i]] for i in range(3)]
  with jax.enable_x64(True):
    rew, _ = implicit_progress_reward(jnp.asarray(lp), jnp.asarray(lr), jnp.asarray(mask), beta=1.0)
  ours = np.asarray(rew).sum(1)
  np.testing.assert_allclose(ours, _fa_step_rewards(steps_p, steps_r, [True] * 3, "sum"), atol=1e-12)
  assert np.max(np.abs(ours - _fa_step_rewards(steps_p, steps_r, [True] * 3, "mean"))) > 1e-3
  d = _defaults("implicit_progress_reward")
  assert "fa.sh: sum (= ours)" in d["token aggregation"][1]
  assert "tau2_uq_onpolicy.sh" in d["token aggregation"][1] and "fa.sh: none" in d["step aggregation"][1]
  read = _fid("implicit_progress_reward").read
  for part in ("runners/fa.py@b1253bdd", "tau2_uq_onpolicy.sh@b1253bdd", "MergedReference", "@6fae472f"):
    assert part in read, part
  assert "failure attribution (fa.sh" in _fid("implicit_progress_reward").placement
  assert _any_dev("implicit_progress_reward", "fa.sh's step reward")


# ---------------------------------------------------------------------------------- key_baseline (not held)


def test_key_baseline_record_names_the_authors_earlier_code():
  from rljax.advantages import key_baseline  # pylint: disable=import-outside-toplevel
  key = np.array([0, 0, 1, 1, 1, 2])
  r = np.array([0.5, -1.0, 1.5, 0.25, -0.5, 2.0])
  with jax.enable_x64(True):
    ours, _ = key_baseline(jnp.asarray(r), jnp.asarray(key), num_keys=3)
  np.testing.assert_allclose(np.asarray(ours), r - np.array([r[key == k].mean() for k in key]), atol=1e-15)
  f = _fid("key_baseline")
  assert "No code found;" not in f.differences and "zhangyt-cn/Evo-MARL" in f.differences
  for part in ("arXiv 2508.03864", "zhangyt-cn/Evo-MARL@ca39bca4", "run_chain_ppo.sh", "group_norm",
               "--n_samples_per_prompt 2", "No public / functional-group baseline there"):
    assert part in f.read, part


# ------------------------------------------------------------------------------------------------------ docs


def test_docs_catalog_has_this_review_section():
  doc = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "catalog.md").read_text()
  section = doc.split("#### Per-row review, part d", 1)[1].split("####", 1)[0]
  assert "**3 of 6 held**" in section
  for row in ("`math_answer`", "`implicit_progress_reward`", "`key_baseline`"):
    assert row + " (" in section, row
  assert "math_answer" in _record("math_answer")
