"""Issue #51 item 4, sixteenth draw (seed 20261221), part a: an independent re-audit of five in-full rows.

Rows drawn: segment_ratio, format_regex, cpgd, code_tests, difficulty_weight.

Held (1): difficulty_weight (the record's own formula checked; the paper's weighting is still not stored, as the
record says; the quoted ICLR 2026 reviews were re-read and match). The "= theirs" claims of the rows below are
checked against float64 NumPy transcriptions (segment_ratio: yaochenzhu/Rank-GRPO@0808d82c
libs/trl/rank_grpo_trainer.py:2016-2088 with huggingface/trl@v0.21.0 trl/trainer/grpo_config.py's defaults,
loss_type 'bnpo', delta None, top_entropy_quantile 1.0: value and gradient equal at one micro-batch).

Not held (4), each error fixed in the record and checked here (no implementation changed, no implementation bug
found):

- ``segment_ratio`` (OMITTED): the record gave per_device_train_batch_size 16 and gradient_accumulation_steps 6 as
  the values of "the stored train_rank_grpo.py" it follows; those are the README's command-line flags. The stored
  script's own argparse defaults are 8 and 12 (train_rank_grpo.py:64, 68), which change bnpo's per-micro-batch
  denominators, and its accelerate config (configs/qwen25_0.5b_grpo.yaml) sets deepspeed gradient_accumulation_steps
  6, which transformers' DeepSpeed integration checks against TrainingArguments' 12 (fill_match /
  trainer_config_finalize raise on a mismatch; read in the installed transformers 5.25.0).

- ``format_regex`` (FALSE): the record's score row gave "0 invalid with no extracted answer" as one of their
  scores. The script trains on data built by scripts/data_process/qa_search_train_merge.py (nq_search.py the
  same), whose make_prefix (:26-39) puts "inside <answer> and </answer> ... For example, <answer> Beijing
  </answer>" in the prompt; compute_score_em runs extract_solution on the decoded prompt + response
  (qa_em_format.py:124-136: None only with ≤ 1 match), so an answer is always extracted: a response without an
  <answer> block is judged on 'Beijing' and scores final_format_score 0.1 (0.8 when a gold answer is 'Beijing'),
  never 0. The deviation's "0.2 / 0.1 / 0.8 / 0 blend" listed the same unreachable 0.
- ``cpgd`` (FALSE, a sign): the deviation read "the PG value is ours − (−A log π_old)"; siiRL's value
  (core_algos.py:600-618, −A·clamp(log π, ...)) is ours + (−A log π_old), i.e. ours = theirs + A log π_old
  (what tests/test_fidelity_eleventh_reading_a.py checks numerically). Everything else held: clip_ratio_low /
  _high 0.2 (model_args.py:283-284), policy_drift_coeff 0.001 and loss_mode=cpgd in all five scripts (:73-74),
  the drift clamp(r − 1, max=2) (dp_actor.py:488-494), token-mean ÷ (n + 1e-8).
- ``code_tests`` (OMITTED): the limits row listed ours as "5 s wall, 3 s CPU, 512 MiB, stdlib only". The row's
  DEFAULT_CONFIG (rljax/rewards/_code.py) also caps stdout and stderr at 16 KiB each (output_bytes 16 << 10;
  SandboxConfig's own default is 64 KiB), and a stream past the cap stops the run (rljax/sandbox/_config.py), so a
  program that prints 20,000 characters scores 0 here; verl's harness has no output cap. Their side's
  reliability_guard (prime_code/testing_util.py@v0.7.0:603-683) sets exit / quit, os.getcwd / chdir / remove /
  fork / ..., subprocess.Popen to None and blocks importing resource / psutil / joblib: a program calling
  os.getcwd() passes here and fails there. Neither was in the record.
"""
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _fidelity import ROWS, defaults as _defaults, fid as _fid, record as _record, train_batch
from test_fidelity_row_review_j import _their_is_valid_sequence as _is_valid_sequence  # Search-R1's checker


# ------------------------------------------------------------------------------------------ segment_ratio (held)


def _rank_grpo_item_loss(logp, old, adv, seg_ids, mask, rec_num, eps_low=0.06, eps_high=0.08):
  """Rank-GRPO@0808d82c rank_grpo_trainer.py:2016-2088, importance_sampling_level 'item', beta 0 (the KL is a
  separate term here), delta None, loss_type 'bnpo' (TRL 0.21.0's default), one micro-batch: seg ids clamped to
  [0, rec_num] (rec_num = the overflow bin), per-(row, bin) mean of the masked log-ratios (÷ max(count, 1)), gathered
  back to the tokens, exp, clamp(1 − ε_l, 1 + ε_h), −min(c1·A, c2·A), Σ(loss·mask) / max(Σmask, 1)."""
  log_ratio = logp - old
  b, t = logp.shape
  segs = np.clip(seg_ids, 0, rec_num)
  sums = np.zeros((b, rec_num + 1))
  counts = np.zeros((b, rec_num + 1))
  for i in range(b):
    for j in range(t):
      sums[i, segs[i, j]] += log_ratio[i, j] * mask[i, j]
      counts[i, segs[i, j]] += mask[i, j]
  means = sums / np.maximum(counts, 1.0)
  lw = np.take_along_axis(means, segs, 1)
  c1 = np.exp(lw)
  c2 = np.clip(c1, 1 - eps_low, 1 + eps_high)
  per_token = -np.minimum(c1 * adv, c2 * adv)
  return (per_token * mask).sum() / max(mask.sum(), 1.0)


def test_segment_ratio_equals_rank_grpo_item_level_bnpo_one_micro_batch():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  from rljax.types import PolicyOutputs  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(20261221)
  b, t, rec_num = 3, 9, 3
  mask = np.ones((b, t))
  mask[2, 7:] = 0.0  # a shorter completion
  # natural item ids (a newline closes an item); ids ≥ rec_num are their overflow tokens
  seg = np.array([[0, 0, 1, 1, 1, 2, 2, 3, 4], [0, 1, 1, 2, 2, 2, 2, 2, 2], [0, 0, 0, 1, 1, 2, 2, 0, 0]])
  old = -rng.random((b, t)) - 0.1
  logp = old + rng.normal(scale=0.12, size=(b, t))
  adv = rng.normal(size=(b, t))
  ours_ids = np.minimum(seg, rec_num)  # the record's deviation: give the overflow tokens their own (spare) id
  batch = train_batch(mask, adv, old)
  term = O.segment_ratio(segment_ids=lambda _b: jnp.asarray(ours_ids, jnp.int32), max_segments=rec_num + 1)
  with jax.enable_x64(True):
    def total(lp):
      loss, _ = term(PolicyOutputs(logp=lp), batch)
      return jnp.sum(loss) / jnp.sum(batch.loss_mask.astype(lp.dtype))
    v_ours = float(total(jnp.asarray(logp)))
    g_ours = np.asarray(jax.grad(total)(jnp.asarray(logp)))
  v_theirs = _rank_grpo_item_loss(logp, old, adv, seg, mask, rec_num)
  assert abs(v_ours - v_theirs) < 1e-12
  # the clip is exercised: some item ratios fall outside [0.94, 1.08]
  item_rho = [np.exp(np.mean((logp - old)[i][(seg[i] == s) & (mask[i] > 0)]))
              for i in range(b) for s in range(5) if ((seg[i] == s) & (mask[i] > 0)).any()]
  assert any(x < 0.94 or x > 1.08 for x in item_rho) and any(0.94 <= x <= 1.08 for x in item_rho)
  h = 1e-6
  g_theirs = np.zeros_like(logp)
  for i in range(b):
    for j in range(t):
      e = np.zeros_like(logp)
      e[i, j] = h
      g_theirs[i, j] = (_rank_grpo_item_loss(logp + e, old, adv, seg, mask, rec_num)
                        - _rank_grpo_item_loss(logp - e, old, adv, seg, mask, rec_num)) / (2 * h)
  np.testing.assert_allclose(g_ours, g_theirs, atol=1e-8)
  d = _defaults("segment_ratio")
  assert d["eps_low"] == ("0.06", "epsilon 0.06") and d["eps_high"] == ("0.08", "epsilon_high 0.08")
  assert "'bnpo'" in d["aggregation"][1]
  assert "train_rank_grpo.py's own defaults: 8 rows, 12 steps" in d["aggregation"][1]
  assert "train_rank_grpo.py:64, 68" in _fid("segment_ratio").read


def test_segment_ratio_bnpo_denominators_depend_on_the_micro_batch_size():
  """The fact behind the fix: with unequal token counts, 16-row micro-batches × 6 and 8-row micro-batches × 12 give
  different bnpo losses (mean over accumulation steps of each micro-batch's token mean) for the same 96 rows."""
  rng = np.random.default_rng(3)
  lengths = rng.integers(5, 60, size=96).astype(np.float64)
  per_row_sum = rng.normal(size=96) * lengths

  def bnpo(rows):
    parts = [per_row_sum[i:i + rows].sum() / lengths[i:i + rows].sum() for i in range(0, 96, rows)]
    return float(np.mean(parts))
  assert abs(bnpo(16) - bnpo(8)) > 1e-6
  assert abs(bnpo(96) - per_row_sum.sum() / lengths.sum()) < 1e-12  # one micro-batch: chain's token_mean


# ------------------------------------------------------------------------------------------ format_regex (not held)

_NQ_PREFIX = ("Answer the given question. You must conduct reasoning inside <think> and </think> first every time you "
              "get new information. After reasoning, if you find you lack some knowledge, you can call a search engine "
              "by <search> query </search> and it will return the top searched results between <information> and "
              "</information>. You can search as many times as your want. If you find no further external knowledge "
              "needed, you can directly provide the answer inside <answer> and </answer>, without detailed "
              "illustrations. For example, <answer> Beijing </answer>. Question: {q}\n")


def _prompt(q):
  """Search-R1@a14dc3a4 scripts/data_process/qa_search_train_merge.py:26-39 make_prefix (template 'base') under
  Qwen2.5's chat template with the generation prompt (rl_dataset.py:128-129)."""
  return ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n" + _NQ_PREFIX.format(q=q)
          + "<|im_end|>\n<|im_start|>assistant\n")


def _norm(s):
  s = "".join(ch for ch in s.lower() if ch not in set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"))
  return " ".join(re.sub(r"\b(a|an|the)\b", " ", s).split())


def _compute_score_em(text, targets, structure=0.2, final=0.1, retrieval=0.0, score=1.0):
  """qa_em_format.py:124-197 compute_score_em (extract_solution: the last of ≥ 2 <answer> blocks, else None)."""
  valid = _is_valid_sequence(text)
  infos = [x.strip() for x in re.findall(r"<information>(.*?)</information>", text, re.DOTALL)]
  ret_ok = valid and any(_norm(g) in _norm(x) for x in infos for g in targets)
  ms = re.findall(r"<answer>(.*?)</answer>", text, re.DOTALL)
  answer = ms[-1].strip() if len(ms) > 1 else None
  if answer is None:
    return (structure + retrieval if ret_ok else structure) if valid else 0.0
  if any(_norm(answer) == _norm(g) for g in targets):
    return score if valid else score - structure
  if valid:
    return structure + retrieval if ret_ok else structure
  return final


def test_format_regex_search_r1_no_answer_block_scores_final_format_score_not_zero():
  from rljax.rewards import SEARCH_R1_FORMAT_PATTERN, format_regex  # pylint: disable=import-outside-toplevel
  p = _prompt("who wrote hamlet?")
  assert len(re.findall(r"<answer>(.*?)</answer>", p, re.DOTALL)) == 2  # the prompt's own two blocks
  no_answer = "<think>hmm</think> I am not sure."
  assert _compute_score_em(p + no_answer, ["William Shakespeare"]) == pytest.approx(0.1)
  assert _compute_score_em(p + no_answer, ["Beijing"]) == pytest.approx(0.8)  # the prompt's example is judged
  assert _compute_score_em(p + "<think>a</think><answer>William Shakespeare</answer>",
                           ["William Shakespeare"]) == 1.0
  assert _compute_score_em(p + "<think>a</think><answer>Marlowe</answer>", ["William Shakespeare"]) == 0.2
  assert format_regex([no_answer])[0] == 0.0
  # the equality claim: SEARCH_R1_FORMAT_PATTERN (fullmatch) = is_valid_sequence on the text after the marker
  cases = ["<think>a</think><answer>x</answer>", " <think>a</think>\n<answer>x</answer>\n",
           "<think>a</think><search>q</search><information>d</information><think>b</think><answer>x</answer>",
           "<think>a <search>q</search></think><answer>x</answer>", "<answer>x</answer>",
           "<think>a</think>text<answer>x</answer>", "<think>a</think><answer>x</answer> tail",
           "<think>a</think><think>b</think><answer>x</answer>", "<think></think><answer></answer>",
           "<think>a</think><search>q</search><think>b</think><answer>x</answer>"]
  got = format_regex(cases, pattern=SEARCH_R1_FORMAT_PATTERN)
  want = [float(_is_valid_sequence("<|im_start|>assistant\n" + c)) for c in cases]
  np.testing.assert_array_equal(got, want)
  d = _defaults("format_regex")
  assert "0 invalid with no extracted answer" not in d["score"][1]
  assert "never 0" in d["score"][1] and "'Beijing'" in d["score"][1]
  assert "qa_search_train_merge.py:26-39" in _fid("format_regex").read
  assert any("1 / 0.8 / 0.2 / 0.1 blend" in x for x in _fid("format_regex").deviations)


# ------------------------------------------------------------------------------------------ cpgd (not held: a sign)


def test_cpgd_pg_value_relation_sign():
  from rljax import objectives as O  # pylint: disable=import-outside-toplevel
  from rljax.types import PolicyOutputs  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(7)
  b, t = 4, 6
  mask = np.ones((b, t))
  old = -rng.random((b, t)) - 0.2
  logp = old + rng.normal(scale=0.3, size=(b, t))
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  # siiRL core_algos.py:609-614: −A·clamp(log π, max=log(1.2)+log π_old) (A > 0), min=log(0.8)+log π_old else
  clipped = np.where(adv > 0, np.minimum(logp, math.log(1.2) + old), np.maximum(logp, math.log(0.8) + old))
  theirs = -clipped * adv
  term = O.cpgd(eps_low=0.2, drift_coef=0.0)
  with jax.enable_x64(True):
    ours, _ = term(PolicyOutputs(logp=jnp.asarray(logp)), train_batch(mask, adv, old))
  ours = np.asarray(ours)
  np.testing.assert_allclose(theirs, ours + (-adv * old), rtol=1e-12, atol=1e-12)
  assert not np.allclose(theirs, ours - (-adv * old))  # the old line's relation
  dev = _fid("cpgd").deviations[0]
  assert dev.startswith("siiRL's PG value is ours + (−A log π_old)")
  # the held parts: siiRL's drift at the scripts' 0.001, per-token gradient (r − 1 capped at 2) = ours' k3 below r = 3
  r = np.exp(logp - old)
  assert (r < 3).all()
  term_d = O.cpgd(eps_low=0.2, drift_coef=0.001)
  with jax.enable_x64(True):
    batch = train_batch(mask, adv, old)

    def total(lp):
      loss, _ = term_d(PolicyOutputs(logp=lp), batch)
      return jnp.sum(loss) / jnp.sum(batch.loss_mask.astype(lp.dtype))
    g = np.asarray(jax.grad(total)(jnp.asarray(logp)))
  inside = np.where(adv > 0, logp <= math.log(1.2) + old, logp >= math.log(0.8) + old)
  g_theirs = (-adv * inside + 0.001 * np.minimum(r - 1.0, 2.0)) / (mask.sum() + 1e-8)
  np.testing.assert_allclose(g, g_theirs, rtol=1e-9)
  d = _defaults("cpgd")
  assert d["eps_low / eps_high"][1].startswith("clip_ratio_low 0.2 / clip_ratio_high 0.2")


# ------------------------------------------------------------------------------------------ code_tests (not held)


def test_code_tests_output_cap_and_their_guard_in_the_record():
  from rljax import sandbox  # pylint: disable=import-outside-toplevel
  from rljax.rewards import _code  # pylint: disable=import-outside-toplevel
  assert _code.DEFAULT_CONFIG.output_bytes == 16384 and _code.DEFAULT_CONFIG.allow_fork is False
  assert sandbox.SandboxConfig().output_bytes == 65536
  d = _defaults("code_tests")
  assert "16 KiB" in d["limits"][0] and "allow_fork False" in d["limits"][0]
  assert "reliability_guard (testing_util.py:603-683)" in d["limits"][1] and "no output cap" in d["limits"][1]
  assert any("20,000 characters" in x and "os.getcwd()" in x for x in _fid("code_tests").deviations)
  assert "Sixteenth draw" in _fid("code_tests").read


def test_code_tests_run_past_the_output_cap_scores_zero():
  from rljax import sandbox  # pylint: disable=import-outside-toplevel
  from rljax.rewards import code_tests  # pylint: disable=import-outside-toplevel
  prog = "```python\ndef f(x):\n    return x + 1\nprint('a' * {n})\nimport os\nos.getcwd()\n```"
  try:
    out = code_tests([prog.format(n=20000), prog.format(n=2000)], ["assert f(1) == 2"] * 2)
  except sandbox.SandboxUnavailable:
    pytest.skip("this host cannot sandbox")
  # 20,001 bytes of stdout pass the 16 KiB cap: 0 here; verl's harness (no cap) would run the tests
  np.testing.assert_array_equal(out, [0.0, 1.0])


# ------------------------------------------------------------------------------------------ difficulty_weight (held)


def test_difficulty_weight_formula_and_ranges():
  from rljax.advantages import difficulty_weight  # pylint: disable=import-outside-toplevel
  adv = np.array([1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 0.3, 0.7])
  correct = np.array([1, 0, 1, 1, 0, 0, 0, 1], np.float64)
  gid = np.array([0, 0, 1, 1, 2, 2, 3, 3])
  acc = np.array([0.5, 0.5, 1.0, 1.0, 0.0, 0.0, 0.5, 0.5])
  with jax.enable_x64(True):
    lin, _ = difficulty_weight(jnp.asarray(adv), jnp.asarray(correct), jnp.asarray(gid), strength=0.5)
    ex, _ = difficulty_weight(jnp.asarray(adv), jnp.asarray(correct), jnp.asarray(gid), strength=0.5, form="exp")
  np.testing.assert_allclose(np.asarray(lin), adv * (1 + 0.5 * (2 * (1 - acc) - 1)), rtol=1e-12)
  np.testing.assert_allclose(np.asarray(ex), adv * np.exp(0.5 * (2 * (1 - acc) - 1)), rtol=1e-12)
  assert math.exp(-0.5) == pytest.approx(0.607, abs=5e-4) and math.exp(0.5) == pytest.approx(1.649, abs=5e-4)
  assert any("0.607 to 1.649 at s = 0.5" in x for x in _fid("difficulty_weight").deviations)
  assert ROWS["difficulty_weight"].fidelity.basis == "abstract"
