"""Issue #51 per-row review, part c: an independent second reading of six records (chosen per row, not drawn).

Rows: adhint, alol, difficulty_budget, difficulty_weight, exact_match, gagar. Each cited source was read whole at the
cited commit (abaheti95/LoL-RL@9f8d8166, LiaoMengqi/E3-RL4LLMs@7e90b8e9 with its dataset/ parquet files,
volcengine/verl@v0.7.0 (f9c855f7) and the verl 0.9.1 PyPI wheel, kekmodel/mimo-verl@0d88bb36 gar.py and its caller
trainer_base.py, the arXiv / OpenReview pages the abstract rows cite); every "= theirs" claim is checked below
against a float64 NumPy transcription of the cited lines written for these tests.

Held (2): difficulty_weight (the stored arXiv pages and the ICLR 2026 reviews say what the record says, no code
exists; ours is A·(1 + s(2(1 − acc_g) − 1)) / A·exp(s(2d − 1)) as recorded), exact_match (normalize='squad',
extract='answer_tag' equals verl's search_r1_like_qa_em.compute_score, identical in v0.7.0 and the 0.9.1 wheel, on
every case but the two recorded deviations: the > 10 tag score/4 and an empty normalised answer).

Not held (4); each error fixed in the RECORD (no implementation changed, no implementation bug found):

- ``adhint`` (FALSE): the defaults gave theirs as "not stated" (min / max fraction, max_success, rows, the form of
  the schedule) although the record itself says the method section of arXiv 2512.13095 was never reached (the
  pages corpus returns only a page's opening): the values are "not read", not "not stated".
- ``alol`` (OMITTED): lolrl_qlora_llama_hh.py:714-729 tokenises each batch in the loop, the prompt left-truncated to
  768 − 128 = 640 tokens and the response (the data set's suffix + tokenizer.eos_token) right-truncated to 128
  tokens (hard-coded; the argparse max_prompt_length / max_length, :70-71, are not read there): Σ_t log π, the
  sequence ratio and the loss run over at most 128 response tokens, ours over every loss-mask token. No row.
- ``difficulty_budget`` (FALSE, twice; OMITTED): (1) "max_per_prompt: theirs 8 ... up to n_high 12" as a cap: their
  get_rollout_n_per_prompt floors min + (R − P·min)·rank/(Σrank + 1e-8) with no cap (ray_trainer.py:402-418); the
  max bounds only the leftover loop (:419-431), so rank [0, .1, .1, .9], 32 rollouts, min 4, max 12 gives theirs
  [4, 6, 5, 17], ours (max_per_prompt=12) [4, 8, 8, 12]. (2) "unseen prompts weight 0": every prompt of the
  released dataset/train_data.parquet carries a float 'rank' in [0, 1) (the initial rank, rl_dataset.py:128-140;
  −100 only without one), and after update_rank a never-sampled prompt counts as mean 0, among the hardest
  (:161-171). (3) Omitted: neither launch script starts as released (TRAIN_DATADIR=./dataset/train_data_10k.parquet,
  train_7b.sh:17 / train_1_5b.sh:17, is not in the repository, which holds train_data.parquet, 10,240 prompts =
  160 steps × 64 × 3 epochs = rollout.max_steps 480; the README's `bash ./scripts/train.sh` names no file).
- ``gagar`` (OMITTED: a factor the caller applies around the term): mimo-verl's trainer_base.py@0d88bb36
  _compute_advantage calls advantage_fixes.group_size_correction after gar_step.redistribute for adv_estimator grpo
  (algorithm.group_size_correction, default True): each group × (1 − 1/rollout.n)/(1 − 1/n_valid) (stored
  advantage_fixes.py copies @5e0138b4, @2343c133), so a GAR-graded group with infrastructure-invalid rows is
  rescaled (4 valid of 8: × 7/6; one valid: × 0); ours is not. Full groups are unchanged (the record's equality
  holds there, tested).
"""
import math
import re
import string

import jax
import jax.numpy as jnp
import numpy as np

from rljax import advantages as A
from rljax import filters as F
from rljax import objectives as O
from rljax.hints import _rules as H
from rljax.rewards import exact_match
from rljax.types import PolicyOutputs, TrainBatch
from _fidelity import any_deviation as _any_dev
from _fidelity import defaults as _defaults, fid as _fid, record as _record, e3_rollout_n



# ----------------------------------------------------------------------------------------------- adhint (not held)


def test_adhint_schedule_is_as_recorded():
  # the record's formula: p <= 0.5 groups hinted; ratio f_min + (f_max − f_min)(1 − p); ceil(f·|a|) characters
  for p, want in ((0.0, 1.0), (0.25, 0.8125), (0.5, 0.625)):
    assert math.isclose(H.adhint_fraction(p, min_fraction=0.25, max_fraction=1.0), want, rel_tol=0, abs_tol=1e-15)
  correct = np.array([0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0], float)
  valid = np.ones(16, bool)
  rates = correct.reshape(4, 4).mean(1)  # 0, .25, .5, .75
  np.testing.assert_array_equal(H.hint_groups(correct, valid, 4, max_success=0.5), rates <= 0.5)
  answer = "123456789"
  assert H.answer_prefix(answer, 0.625) == answer[:math.ceil(0.625 * 9)]


def test_adhint_record_says_not_read_for_the_unread_method_section():
  d = _defaults("adhint")
  for key in ("min_fraction / max_fraction", "max_success", "rows"):
    assert d[key][1].startswith("not read"), key
  assert "unread method section" in d["schedule"][1]
  assert "not stated" not in _record("adhint").split("defaults:", 1)[1].split("placement:", 1)[0]
  assert "method section was not reached" in _fid("adhint").read


# ----------------------------------------------------------------------------------------------- alol (not held)


def _lolrl_loss(logp, ref, mask, adv, ppo_clip=0.9, per_token=False, max_resp=128):
  """abaheti95/LoL-RL@9f8d8166 lolrl_qlora_llama_hh.py, one 4-row micro-batch, float64: the response mask cut to its
  first 128 tokens (:727-729); per_token_log_probs = −log π (:748); a_lol :865-870 (ratio exp(Σ base_neg − Σ
  neg)), clamp(1 ± ppo_clip) (:871-875), loss mean(Σ_t neg·mask · ratio · clamp(A, 0)) (:896, :905); a_lol_seq
  :929-952 (per-token ratio × mask, clamped, × mask; reduce_sum)."""
  mask = mask.copy()
  mask[:, max_resp:] = 0  # right truncation of the response to max_length=128 tokens
  neg, base_neg = -logp, -ref
  a = np.maximum(adv, 0.0)
  if per_token:
    w = np.exp(base_neg - neg) * mask
    w = np.clip(w, 1 - ppo_clip, 1 + ppo_clip) * mask
    per = (neg * w * mask).sum(1)
  else:
    w = np.exp((base_neg * mask).sum(1) - (neg * mask).sum(1))
    w = np.clip(w, 1 - ppo_clip, 1 + ppo_clip)
    per = (neg * mask).sum(1) * w
  return float(np.mean(per * a))


def _ours_alol(logp, ref, mask, adv, ratio):
  b, t = logp.shape
  with jax.enable_x64(True):
    batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask > 0),
                       advantages=jnp.asarray(np.repeat(adv[:, None], t, 1)), group_id=jnp.arange(b, dtype=jnp.int32),
                       logp_ref=jnp.asarray(ref))
    obj = O.chain(O.alol(ratio=ratio), aggregate=O.seq_mean_token_sum)
    return float(obj(PolicyOutputs(logp=jnp.asarray(logp)), batch)[0])


def test_alol_equals_the_code_up_to_128_response_tokens_and_differs_beyond():
  rng = np.random.default_rng(51_301)
  adv = np.array([0.4, -0.2, 0.9, 0.1])
  for t, same in ((120, True), (150, False)):
    logp = -rng.uniform(0.0005, 0.01, (4, t))
    ref = logp + rng.normal(scale=0.004, size=(4, t))
    mask = np.ones((4, t))
    mask[1, t - 30:] = 0
    mask[3, 100:] = 0
    for ratio, per_token in (("sequence", False), ("token", True)):
      theirs = _lolrl_loss(logp, ref, mask, adv, per_token=per_token)
      ours = _ours_alol(logp, ref, mask, adv, ratio)
      if same:
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)
      else:
        assert abs(ours - theirs) > 1e-3 * abs(theirs)
        cut = mask.copy()
        cut[:, 128:] = 0  # ours on the tokens their 128-token truncation keeps = theirs
        np.testing.assert_allclose(_ours_alol(logp, ref, cut, adv, ratio), theirs, rtol=1e-12)


def test_alol_record_lists_the_128_token_truncation():
  assert "128" in _defaults("alol")["truncation"][1] and "640" in _defaults("alol")["truncation"][1]
  assert _defaults("alol")["truncation"][0] == "none: every loss-mask token of the row"
  assert _any_dev("alol", "first 128", "lolrl_qlora_llama_hh.py:724-729")
  assert ":714-729" in _fid("alol").read and ":70-71" in _fid("alol").read


# -------------------------------------------------------------------------------------- difficulty_budget (not held)


def test_difficulty_budget_their_max_does_not_cap_the_proportional_share():
  rank = np.array([0.0, 0.1, 0.1, 0.9])
  theirs = e3_rollout_n(rank, 32, 4, 12)
  np.testing.assert_array_equal(theirs, [4, 6, 5, 17])
  assert theirs.max() > 12 and theirs.sum() == 32
  ours, _ = F.difficulty_budget(1.0 - rank, budget=32, min_per_prompt=4, max_per_prompt=12)
  np.testing.assert_array_equal(np.asarray(ours), [4, 8, 8, 12])
  # epoch 1 of their scripts (min = max = rollout.n = 8): uniform, whatever the rank (the data's rank column)
  np.testing.assert_array_equal(e3_rollout_n(np.array([0.19, 0.44, 0.58, 0.9]), 32, 8, 8), [8, 8, 8, 8])


def test_difficulty_budget_record_states_the_uncapped_share_the_data_rank_and_the_missing_data_file():
  d = _defaults("difficulty_budget")
  assert "bounds only the rounding leftover" in d["max_per_prompt"][1]
  assert "unseen prompts weight 0" not in d["difficulty estimate"][1]
  assert "'rank' column" in d["difficulty estimate"][1] and "among the hardest" in d["difficulty estimate"][1]
  assert _any_dev("difficulty_budget", "[4, 6, 5, 17]", "[4, 8, 8, 12]")
  assert _any_dev("difficulty_budget", "train_data_10k.parquet", "scripts/train.sh", "10,240")
  assert "README.md:93-96" in _fid("difficulty_budget").read


# ------------------------------------------------------------------------------------------ difficulty_weight (held)


def test_difficulty_weight_is_the_recorded_linear_and_exp_weight():
  rng = np.random.default_rng(51_302)
  gid = np.repeat(np.arange(4), 5)
  correct = (rng.random(20) < np.repeat([0.1, 0.4, 0.7, 1.0], 5)).astype(float)
  valid = np.ones(20, bool)
  valid[[3, 11]] = False
  adv = rng.normal(size=20)
  acc = np.array([correct[(gid == g) & valid].mean() for g in range(4)])[gid]
  for form, s in (("linear", 0.5), ("exp", 0.5), ("linear", 0.3)):
    d = 2 * (1 - acc) - 1
    w = 1 + s * d if form == "linear" else np.exp(s * d)
    with jax.enable_x64(True):
      ours, _ = A.difficulty_weight(jnp.asarray(adv), jnp.asarray(correct), jnp.asarray(gid), strength=s, form=form,
                                    valid=jnp.asarray(valid), num_groups=4)
    np.testing.assert_allclose(np.asarray(ours), adv * w * valid, rtol=1e-13, atol=1e-15)
  assert _defaults("difficulty_weight")["strength s"] == ("0.5", "not read")


# ------------------------------------------------------------------------------------------------ exact_match (held)


def _verl_normalize(s):
  """verl/utils/reward_score/search_r1_like_qa_em.py:23-37 (v0.7.0 = the 0.9.1 wheel)."""
  s = s.lower()
  s = "".join(ch for ch in s if ch not in set(string.punctuation))
  s = re.sub(r"\b(a|an|the)\b", " ", s)
  return " ".join(s.split())


def _verl_em(solution_str, targets, score=1.0, format_score=0.0):
  """compute_score :96-128 (extract_solution :66-86, em_check :40-50, count_answer_tags :89-93)."""
  found = list(re.finditer(r"<answer>(.*?)</answer>", solution_str, re.DOTALL))
  if not found:
    return 0.0
  answer = found[-1].group(1).strip()
  if any(_verl_normalize(g) == _verl_normalize(answer) for g in targets):
    if solution_str.count("<answer>") > 10 or solution_str.count("</answer>") > 10:
      return score / 4
    return score
  return format_score


def test_exact_match_squad_answer_tag_is_verl_em_except_the_recorded_deviations():
  cases = [
      ("<think>x</think><answer> The Beatles </answer>", ["the beatles"]),
      ("<answer>New-York</answer>", ["new york"]),            # punctuation deleted: 'newyork' != 'new york'
      ("<answer>New-York</answer>", ["NewYork"]),
      ("<answer>a</answer> then <answer>Paris.</answer>", ["paris"]),  # the last tag
      ("<answer>\nan apple\n</answer>", ["Apple"]),
      ("no tag: Paris", ["paris"]),
      ("<answer>Émile Zola</answer>", ["émile zola!"]),
      ("<answer>London</answer>", ["Paris", "london"]),
      ("<answer>42</answer>", ["41"]),
      ("<answer>the the</answer>", ["a"]),                      # both normalise to '' (recorded deviation)
      ("<answer>x</answer>" * 11, ["x"]),                       # > 10 tags: verl score/4 (recorded deviation)
  ]
  ours = exact_match([c for c, _ in cases], [r for _, r in cases], normalize="squad", extract="answer_tag")
  theirs = np.array([_verl_em(c, r) for c, r in cases])
  assert theirs.tolist() == [1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.25]
  np.testing.assert_array_equal(ours[:-2], theirs[:-2])
  assert ours[-2] == 0.0 and ours[-1] == 1.0
  assert _any_dev("exact_match", "no score/4") and _any_dev("exact_match", "normalises to ''")


# ----------------------------------------------------------------------------------------------- gagar (not held)


def _gar_redistribute(scores, passed, f, lambda_max=1.5):
  """kekmodel/mimo-verl@0d88bb36 verl/trainer/ppo/gar.py redistribute (Eqs. 7-8), one group's valid sessions."""
  n = len(scores)
  a = np.asarray(scores, np.float64) - np.mean(scores)
  pos = np.where(passed, np.maximum(a, 0.0), 0.0)
  num, den = pos.sum(), (np.where(passed, f, 0.0) * pos).sum()
  if den <= 0:
    return a
  lam = min(num / den, lambda_max)
  b = np.where(passed, lam * np.asarray(f) * pos, a)
  return b - b.sum() / n


def _group_size_correction(adv, n_valid, n_ref):
  """advantage_fixes.group_size_correction (stored copies @5e0138b4, @2343c133): × (1 − 1/n_ref)/(1 − 1/n_valid)."""
  if n_valid == 1:
    return adv * 0.0
  return adv if n_valid == n_ref else adv * (1 - 1 / n_ref) / (1 - 1 / n_valid)


def _ours_gagar(scores, passed, f, valid, gid, ng):
  r = np.asarray(scores, np.float64)
  with jax.enable_x64(True):
    base, _ = A.grpo(jnp.asarray(r), jnp.asarray(gid), scale="none", valid=jnp.asarray(valid), num_groups=ng)
    out, _ = A.gagar(base, jnp.asarray(passed), jnp.asarray(np.where(passed, f, 1.0)), jnp.asarray(gid),
                     weight="factor", lambda_max=1.5, valid=jnp.asarray(valid), num_groups=ng)
  return np.asarray(out)


def test_gagar_factor_form_equals_their_redistribute_on_full_groups_not_after_their_group_size_correction():
  f_all = np.array([1.0, 0.9, 0.85, 0.4, 0.2, 0.625, 1.0, 0.2])
  passed = np.array([1, 1, 1, 0, 1, 0, 1, 0], bool)
  scores = passed.astype(float)
  gid = np.zeros(8, np.int32)
  # a full group of 8 (rollout.n = 8): ours = theirs (λ = 5/3.95 < 1.5), group_size_correction is the identity
  theirs = _group_size_correction(_gar_redistribute(scores, passed, f_all), 8, 8)
  np.testing.assert_allclose(_ours_gagar(scores, passed, f_all, np.ones(8, bool), gid, 1), theirs, rtol=1e-13,
                             atol=1e-15)
  # a λ-capped group: f all 0.2 -> λ = 5 capped to 1.5, B − mean B
  f_low = np.full(8, 0.2)
  np.testing.assert_allclose(_ours_gagar(scores, passed, f_low, np.ones(8, bool), gid, 1),
                             _gar_redistribute(scores, passed, f_low), rtol=1e-13, atol=1e-15)
  # 4 valid sessions of 8 (infrastructure failures): theirs × (7/8)/(3/4) = 7/6 after GAR, ours unscaled
  valid = np.array([1, 1, 0, 1, 0, 1, 0, 0], bool)
  v = np.flatnonzero(valid)
  red = _gar_redistribute(scores[v], passed[v], f_all[v])
  theirs = _group_size_correction(red, 4, 8)
  ours = _ours_gagar(scores, passed, f_all, valid, gid, 1)[v]
  np.testing.assert_allclose(ours, red, rtol=1e-13, atol=1e-15)
  np.testing.assert_allclose(theirs, red * 7 / 6, rtol=1e-13)
  assert np.max(np.abs(ours - theirs)) > 1e-2


def test_gagar_record_names_the_group_size_correction():
  assert _any_dev("gagar", "group_size_correction", "7/6")
  assert "group_size_correction" in _fid("gagar").placement
  assert "trainer_base.py@0d88bb36" in _fid("gagar").read


def test_docs_catalog_has_this_review_section():
  import pathlib  # pylint: disable=import-outside-toplevel
  doc = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "catalog.md").read_text()
  section = doc.split("#### Per-row review, part c", 1)[1].split("####", 1)[0]
  assert "**2 of 6 held**" in section
  for row in ("`adhint`", "`alol`", "`difficulty_budget`", "`gagar`"):
    assert row + " (" in section, row
