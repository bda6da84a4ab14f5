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
