"""Issue #51, per-row review p: an independent second reading of six records (not a random draw).

Rows: negative_advantage_drop, vcrl, tac, grpo_lambda, prm_clip, prm_delta.

Held (3): vcrl, tac, grpo_lambda (their sources are an abstract, reviews and write-ups; what the records say of them
was found in the stored text, and their "= theirs" / "differs" claims are checked below against float64 NumPy
transcriptions). Not held (3): negative_advantage_drop, prm_clip, prm_delta. Each error is fixed in the record (no
implementation changed, no implementation bug found).

- ``negative_advantage_drop`` said something FALSE and OMITTED a launch that does not start.
  abaheti95/LoL-RL@9f8d8166 lolrl_qlora_llama_hh.py:953-962: the README's "A-LoL ref-free" (--algorithm
  a_lol_ref_free) computes loss = torch.mean(Σ NLL · batch_advantages) with the precomputed A NOT clamped, so at
  the default sampling_strategy None an A < 0 row is trained with a negative weight (its likelihood pushed down);
  the record said "theirs zero a row in the loss (A clamped at 0, :876-877, whatever the sampling strategy, the
  default None included)", true of a_lol and a_lol_seq only. And the README's WoW A-LoL command (README.md:115,
  TASK_NAME wow) does not start: utils/rl_utils.py:136 lists 'WOW', not 'wow', so every non-nll batch reaches
  breakpoint() (:139) and an unbound rewards (:140); the record cited README.md:115 as a command that runs.
- ``prm_clip`` and ``prm_delta`` OMITTED a coefficient around the term and the paper's combined mechanism. The
  ICLR reviews the records cite (code index, read_file id 63217475182), read whole: review 6 "The paper does not
  tell us about the hyperparameter choice of α" (a weight on the learned reward added to the success reward; the
  CoDeR-RL restatement, id 26158084682, writes Delta as α × (r_k − r_{k+1})): ours adds Σ r'_s at weight 1, and
  neither record listed α. Reviews 1, 5, 6: the paper's mechanism is Clip then Delta ("clipping and then
  delta-ing", "delta is applied on top of clipping", "PRM-clip is the potential function"; "none of them work
  well on their own"): the two stages here do not compose into it (each reads the raw data.step_rewards), while
  the functions do.

Also read: vcrl's reviews (ids 58338692717, 58210577306, 62124547176) and the themoonlight restatement; TAC's v2
abstract (arxiv.org/html/2606.25178v2, pages corpus; still only the abstract and §1's start), the write-up id
58540357430 and github.com/YangYongJin/transfer-aware-curriculum (no snapshot); GRPO-λ's translated method
(id 49297942322), the arXiv v1 and hf-mirror pages (their openings only).
"""
import math

import numpy as np
import pytest

from rljax import filters as F
from rljax import recipes
from rljax import rewards as W
from rljax.filters import _curriculum as Cur
from rljax.train._rows import set_rewards
from _fidelity import defaults, fid, record


# ------------------------------------------------------------------------------ negative_advantage_drop (not held)

def _their_hh_weights(adv, algorithm):
  """lolrl_qlora_llama_hh.py: a_lol :876-877 and a_lol_seq :948-949 clamp A at 0; a_lol_ref_free :960-962 multiplies
  the per-response NLL by the precomputed batch_advantages as they are."""
  adv = np.asarray(adv, np.float64)
  return adv if algorithm == "a_lol_ref_free" else np.maximum(adv, 0.0)


def _their_hh_loss(nll, adv, algorithm):
  """loss = torch.mean(per-response loss · weight) over the B rows (:905, :952, :962; importance weight 1)."""
  return float(np.mean(np.asarray(nll, np.float64) * _their_hh_weights(adv, algorithm)))


def test_negative_advantage_drop_ref_free_keeps_negative_rows_in_the_loss():
  adv = np.array([0.3, -0.2, 0.0, 0.5])
  nll = np.array([2.0, 3.0, 1.0, 4.0])
  # a_lol zeroes the A < 0 row; a_lol_ref_free trains it with weight −0.2: the losses differ by 3·(−0.2)/4
  assert _their_hh_loss(nll, adv, "a_lol_ref_free") - _their_hh_loss(nll, adv, "a_lol") == pytest.approx(-0.15)
  keep, _ = F.negative_advantage_drop(adv)
  assert np.asarray(keep).tolist() == [True, False, False, True]  # ours drops it
  dev = [d for d in fid("negative_advantage_drop").deviations if "a_lol_ref_free" in d]
  assert dev and ":953-962" in dev[0] and "does not clamp" in dev[0] and "negative" in dev[0]
  # the corrected clamp deviation names the algorithms it holds for
  assert any("a_lol and a_lol_seq" in d and ":876-877" in d for d in fid("negative_advantage_drop").deviations)


def _their_support(adv, strategy):
  """lolrl_qlora_llama_hh.py:590-600 (A < 0 → 0; good_random: A > 0 → 1) and :612-620 (indices with probability
  ≠ 0): the rows their draw can return."""
  w = np.asarray(adv, np.float64).copy()
  w[w < 0] = 0.0
  if strategy == "good_random":
    w[w > 0] = 1.0
  probs = w / w.sum()
  return np.where(probs != 0.0)[0]


def test_negative_advantage_drop_kept_set_is_their_draws_support():
  rng = np.random.default_rng(5)
  adv = np.round(rng.normal(size=40), 1)  # some exact zeros
  assert np.any(adv == 0.0)
  keep = np.flatnonzero(np.asarray(F.negative_advantage_drop(adv)[0]))
  for strategy in ("good_priority", "good_random"):
    np.testing.assert_array_equal(keep, _their_support(adv, strategy))
  keep_zero = np.flatnonzero(np.asarray(F.negative_advantage_drop(adv, keep_zero=True)[0]))
  assert len(keep_zero) > len(keep)  # keep_zero=True is ours (a listed deviation)


# utils/rl_utils.py:132-139 (LanguageGenerationCollator.__call__): the task names whose rewards it reads
_THEIR_COLLATOR_TASKS = ("Xsum", "CNNDailyMail", "IWSLT2017EnDe", "IMDBForSeq2Seq", "DailyDialog", "COMET", "WOW",
                         "faithdial", "faithdial_wow", "reddit_pos", "reddit_neg")
_README_FAITHFUL_TASKS = ("wow", "faithdial", "faithdial_wow")  # README.md:109, 112, 116


def test_negative_advantage_drop_record_says_the_wow_command_does_not_start():
  missing = [t for t in _README_FAITHFUL_TASKS if t not in _THEIR_COLLATOR_TASKS]
  assert missing == ["wow"]
  dev = [d for d in fid("negative_advantage_drop").deviations if "WoW" in d]
  assert dev and "README.md:115" in dev[0] and "'WOW'" in dev[0] and "breakpoint()" in dev[0]
  assert "rl_utils.py:131-141" in fid("negative_advantage_drop").read


# ------------------------------------------------------------------------------ vcrl (held)

def _their_p(k, g):
  """VCRL (themoonlight restatement; ICLR reviews' Eq. 12): σ² = k(G−k)/(G(G−1)) (unbiased), σ²_max = G/(4(G−1))
  for even G, (G+1)/(4G) for odd G; p = σ²/σ²_max."""
  var = k * (g - k) / (g * (g - 1))
  vmax = g / (4 * (g - 1)) if g % 2 == 0 else (g + 1) / (4 * g)
  return var / vmax


def _groups(g, ks):
  rewards = np.concatenate([np.r_[np.ones(k), np.zeros(g - k)] for k in ks]).astype(np.float32)
  return rewards, np.repeat(np.arange(len(ks)), g).astype(np.int32)


@pytest.mark.parametrize("g", [4, 5, 7, 8, 16])
def test_vcrl_score_equals_their_p_for_even_groups_lower_for_odd(g):
  ks = list(range(g + 1))
  rewards, gid = _groups(g, ks)
  _, st = F.vcrl(rewards, gid, num_groups=len(ks), threshold=0.0)
  ours = np.asarray(st["group_score"], np.float64)
  theirs = np.array([_their_p(k, g) for k in ks])
  expected = theirs if g % 2 == 0 else theirs * (g * g - 1) / (g * g)  # 4k(G−k)/G² vs 4k(G−k)/(G²−1)
  np.testing.assert_allclose(ours, expected, rtol=1e-6, atol=1e-7)
  if g % 2:
    assert np.all(ours[1:-1] < theirs[1:-1])
  assert "lower for odd G" in fid("vcrl").deviations[0]


def test_vcrl_threshold_keeps_their_groups_for_even_g_not_always_for_odd():
  g = 8
  rewards, gid = _groups(g, range(g + 1))
  keep = np.asarray(F.vcrl(rewards, gid, num_groups=g + 1, threshold=0.8)[1]["group_keep"])
  np.testing.assert_array_equal(keep, [_their_p(k, g) >= 0.8 for k in range(g + 1)])  # their later κ = 0.8
  g = 7  # k = 2: theirs 40/48 = 0.833, ours 40/49 = 0.816
  rewards, gid = _groups(g, [2])
  assert _their_p(2, g) >= 0.83
  assert not bool(np.asarray(F.vcrl(rewards, gid, num_groups=1, threshold=0.83)[1]["group_keep"])[0])
  assert defaults("vcrl")["threshold κ"][1].startswith("0.3 for the first 20 steps, then 0.8")


# ------------------------------------------------------------------------------ tac (held)

def _state(learn, transfer, count=10, window=4):
  k = len(learn)
  st = Cur.curriculum_init(k, window)
  w = np.repeat(np.asarray(learn, np.float64)[:, None], window, 1)
  return st._replace(window=w, filled=np.full(k, window, np.int32), count=np.full(k, count, np.int32),
                     transfer=np.asarray(transfer, np.float64))


def test_tac_transfer_is_the_ema_of_the_mean_cosine():
  rng = np.random.default_rng(0)
  grads = rng.normal(size=(4, 6))
  gram = grads @ grads.T
  present = np.array([True, True, False, True])
  st = _state([0.1] * 4, [0.2, -0.1, 0.5, 0.0])
  new, step = Cur.transfer_observe(st, gram, present, decay=0.9)
  unit = grads / np.linalg.norm(grads, axis=1, keepdims=True)
  for d in range(4):
    if not present[d]:
      assert np.isnan(step[d]) and new.transfer[d] == 0.5
      continue
    cos = [unit[d] @ unit[e] for e in range(4) if e != d and present[e]]
    assert step[d] == pytest.approx(np.mean(cos))
    assert new.transfer[d] == pytest.approx(0.9 * st.transfer[d] + 0.1 * np.mean(cos))


def test_tac_additive_score_is_not_the_write_ups_multiplicative_form():
  learn, transfer = np.array([0.05, 0.5, 0.2]), np.array([0.9, 0.0, 0.1])
  ours = Cur.curriculum_scores(_state(learn, transfer), exploration=0.0, transfer_weight=1.0)["score"]
  np.testing.assert_allclose(ours, learn + transfer)
  write_up = learn * (1 + 1.0 * transfer)  # code index id 58540357430: Ā_d · (1 + α · mean cos)
  assert int(np.argmax(ours)) == 0 and int(np.argmax(write_up)) == 1
  assert any("not built" in d and "(1 + α·mean cos)" in d for d in fid("tac").deviations)


# ------------------------------------------------------------------------------ grpo_lambda (held)

def _their_grpo_lambda(correct, lengths, groups, lam, alpha):
  """GRPO-λ as the stored translation of its method gives it (id 49297942322): the batch's groups sorted by
  correctness ratio, the top λ fraction get r = 1 − α·σ((L − mean_correct L)/std_correct L) if correct else 0
  (mean and std over the group's correct completions; np.std), the others r = 1[correct]."""
  correct, lengths, groups = (np.asarray(x) for x in (correct, lengths, groups))
  ids = np.unique(groups)
  acc = np.array([correct[groups == g].mean() for g in ids])
  top = set(ids[np.argsort(-acc, kind="stable")[:math.ceil(lam * len(ids))]].tolist())
  r = correct.astype(np.float64).copy()
  for g in top:
    m = groups == g
    ls = lengths[m & (correct > 0)].astype(np.float64)
    z = (lengths[m] - ls.mean()) / ls.std()
    r[m] = np.where(correct[m] > 0, 1 - alpha / (1 + np.exp(-z)), 0.0)
  return r


def test_grpo_lambda_sigmoid_equals_the_translated_method():
  correct = np.array([1, 1, 1, 0, 1, 1, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 0, 1], np.float32)
  lengths = np.array([30, 50, 80, 20, 10, 40, 60, 70, 25, 35, 45, 55, 12, 18, 27, 40, 5, 6, 7, 8, 60, 20, 30, 40,
                      50])
  groups = np.repeat(np.arange(5), 5)
  for lam in (0.2, 0.5):
    theirs = _their_grpo_lambda(correct, lengths, groups, lam, 0.6)
    ours, _ = W.grpo_lambda(correct, lengths, groups, num_groups=5, threshold=lam, penalty="sigmoid", alpha=0.6)
    np.testing.assert_allclose(np.asarray(ours, np.float64), theirs, rtol=1e-6, atol=1e-6)
  assert defaults("grpo_lambda")["threshold (λ)"] == ("0.5", "top 20 % in the method's example")


# ------------------------------------------------------------------------------ prm_clip, prm_delta (not held)

def _their_clip_delta_sum(r, m, eta):
  """Clip then Delta (reviews 1, 5, 6) summed over a row's valid steps: c = min(r − η, 0) per step, then
  c_t − c_{next(t)} with the last valid step keeping c_T (the records' Delta): Σ = c of the first valid step."""
  out = []
  for row, mask in zip(np.asarray(r, np.float64), np.asarray(m, bool)):
    c = np.minimum(row[mask] - eta, 0.0)
    d = np.r_[c[:-1] - c[1:], c[-1:]]
    out.append(d.sum())
  return np.array(out)


def _step_data():
  from test_stages_filters_rewards import _step  # pylint: disable=import-outside-toplevel
  return _step()


def test_prm_clip_delta_composes_as_functions_not_as_stages():
  d = _step_data()
  r, m, eta = np.asarray(d.step_rewards, np.float64), np.asarray(d.step_mask, bool), 0.5
  theirs = _their_clip_delta_sum(r, m, eta)
  clipped, _ = W.prm_clip(d.step_rewards, d.step_mask, eta=eta)
  delta, _ = W.prm_delta(clipped, d.step_mask)
  np.testing.assert_allclose(np.asarray(delta, np.float64).sum(1), theirs, rtol=1e-5, atol=1e-6)
  # the stages rl.shaping=[prm_clip, prm_delta], as the loop runs them (set_rewards after each)
  d1 = set_rewards(d, recipes.stage("prm_clip", eta=eta).fn(d)[0], "prm_clip")
  both = np.asarray(recipes.stage("prm_delta").fn(d1)[0], np.float64)
  first = r[np.arange(len(r)), np.argmax(m, 1)]
  clip_sum = np.where(m, np.minimum(r - eta, 0.0), 0.0).sum(1)
  np.testing.assert_allclose(both, np.asarray(d.rewards, np.float64) + clip_sum + first, rtol=1e-5, atol=1e-5)
  assert np.max(np.abs(both - (np.asarray(d.rewards, np.float64) + theirs))) > 0.1


@pytest.mark.parametrize("name", ["prm_clip", "prm_delta"])
def test_prm_records_list_the_process_weight_and_clip_delta(name):
  ours, theirs = defaults(name)["process-reward weight α"]
  assert "weight 1" in ours and "review 6" in theirs
  devs = fid(name).deviations
  assert any("Clip-Delta" in d and "r_first" in d and "min(r_first − η, 0)" in d for d in devs)
  assert "63217475182" in fid(name).read and "none of them work well on their own" in fid(name).read
  assert "process-reward weight α" in record(name)


def test_prm_stage_adds_the_process_reward_at_weight_one():
  d = _step_data()
  out, _ = recipes.stage("prm_clip", eta=0.5).fn(d)
  clipped = np.where(d.step_mask, np.minimum(np.asarray(d.step_rewards, np.float64) - 0.5, 0.0), 0.0).sum(1)
  np.testing.assert_allclose(np.asarray(out, np.float64), np.asarray(d.rewards, np.float64) + 1.0 * clipped,
                             rtol=1e-5, atol=1e-6)
  with pytest.raises((TypeError, ValueError)):
    recipes.stage("prm_clip", eta=0.5, alpha=2.0)  # no weight argument
