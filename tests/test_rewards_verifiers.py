"""Host-side verifiers, safe_reward and composite (rljax.rewards)."""
import functools
import random
import re
import time

import numpy as np
import pytest

import rljax
from rljax import rewards as R


# ----------------------------------------------------------------------------- exact_match

def test_exact_match_basic_normalisation():
  comps = ["  Paris. ", "paris", "PARIS!", "Lyon", "Pa ris", ""]
  refs = ["Paris"] * 6
  np.testing.assert_array_equal(R.exact_match(comps, refs), [1, 1, 1, 0, 0, 0])


def test_exact_match_modes_and_multiple_references():
  assert R.exact_match(["The  Cat"], ["cat"], normalize="squad")[0] == 1
  assert R.exact_match(["The Cat"], ["cat"], normalize="basic")[0] == 0
  assert R.exact_match(["Cat"], ["cat"], normalize="none")[0] == 0
  assert R.exact_match(["b"], [["a", "b"]])[0] == 1
  assert R.exact_match(["12"], [12])[0] == 1
  out = R.exact_match(["<answer> 42 </answer> trailing", "no tag"], ["42", "no tag"], extract="answer_tag")
  np.testing.assert_array_equal(out, [1, 0])
  assert R.exact_match(["work\n\n 7 \n"], ["7"], extract="last_line")[0] == 1
  assert R.exact_match(["x=7"], ["7"], extract=lambda s: s.split("=")[1])[0] == 1


def test_exact_match_malformed_output_scores_zero():
  comps = [None, 3, b"caf\xc3\xa9", ["list"], "ok"]
  out, info = R.exact_match(comps, ["a", "3", "café", "list", "ok"], return_info=True)
  np.testing.assert_array_equal(out, [0, 0, 1, 0, 1])
  assert info["parse_failures"] == 3
  assert out.dtype == np.float32 and out.shape == (5,)
  boom = lambda s: 1 / 0
  out, info = R.exact_match(["a"], ["a"], extract=boom, return_info=True)
  assert out[0] == 0 and info["parse_failures"] == 1


def test_exact_match_empty_output_and_none_references():
  # an empty completion (or one that normalises to "") scores 0, even against a reference that normalises to ""
  out, info = R.exact_match(["", "?", "  ", "", "<answer> </answer>"], ["?", "?", "", "", "x"], extract=None,
                            return_info=True)
  np.testing.assert_array_equal(out, [0, 0, 0, 0, 0])
  assert R.exact_match(["<answer>?</answer>"], [["?", "a"]], extract="answer_tag")[0] == 0
  assert R.exact_match(["a"], [["?", "a"]])[0] == 1  # the other references still count
  # None: a missing reference scores 0; None inside a list is an error, never the text "None"
  assert R.exact_match(["None"], [None])[0] == 0
  with pytest.raises(ValueError, match=r"references\[1\].*None"):
    R.exact_match(["a", "None"], ["a", ["b", None]])
  with pytest.raises(ValueError, match=r"references\[0\].*None"):
    R.math_answer(["None"], [[None]])


def test_exact_match_bad_arguments_raise():
  with pytest.raises(ValueError, match="references"):
    R.exact_match(["a", "b"], ["a"])
  with pytest.raises(ValueError, match="normalize"):
    R.exact_match(["a"], ["a"], normalize="fancy")
  with pytest.raises(ValueError, match="extract"):
    R.exact_match(["a"], ["a"], extract="middle")
  with pytest.raises(ValueError, match="completions"):
    R.exact_match("abc", ["a", "b", "c"])


# ----------------------------------------------------------------------------- math_answer

@pytest.mark.parametrize("completion", [
    r"so the answer is \boxed{0.5}", "#### 0.5", "thus we get 0.5", r"\boxed{\frac12}", r"\boxed{\dfrac{1}{2}}",
    "#### 1/2", r"$\boxed{ \frac{1}{2} }$.", "The final answer is: 0.50", r"\boxed{.5}",
])
def test_math_answer_equivalent_forms(completion):
  assert R.math_answer([completion], ["0.5"])[0] == 1


@pytest.mark.parametrize("completion,reference,expected", [
    (r"\boxed{\frac{\sqrt{3}}{2}}", r"\frac{\sqrt{3}}{2}", 1),    # nested braces, symbolic
    (r"\boxed{\frac{\sqrt{3}}{2}}", r"\frac{\sqrt{2}}{2}", 0),
    (r"first \boxed{3} then \boxed{4}", "4", 1),                    # last boxed wins
    (r"\boxed{1,234}", "1234", 1),                                  # thousands separator
    (r"\boxed{-7}", "−7", 1),                                       # unicode minus
    (r"\boxed{50\%}", "50", 1),
    (r"\boxed{x = 3}", "3", 1),
    (r"\boxed{5 \text{ cm}}", "5", 1),
    (r"\boxed{90^\circ}", "90", 1),
    (r"\boxed{\text{(B)}}", "(B)", 1),
    (r"\boxed{(1,2)}", "(1, 2)", 1),
    (r"\boxed{2}", "3", 0),
    ("I think 12 apples, no wait 13", "13", 1),                      # last number fallback
    ("1e-3 is small", "0.001", 1),
    ("the result #### 72", "Natalia sold 48/2 = 24 clips.\n#### 72", 1),  # GSM8K reference extracted
    (r"\boxed{0.3333}", "1/3", 0),                                  # beyond rel_tol = 1e-6
    (r"\boxed{0.3333333}", "1/3", 1),                               # within rel_tol
    (r"\boxed{YES}", "yes", 1),
    (r"\boxed 5", "5", 1),
])
def test_math_answer_cases(completion, reference, expected):
  assert R.math_answer([completion], [reference])[0] == expected


def test_math_answer_malformed_and_info():
  comps = [r"\boxed{0.5", "no digits here", None, "", r"\boxed{}", "#### 3", r"\boxed{{{{"]
  out, info = R.math_answer(comps, ["0.5", "1", "1", "1", "1", "3", "1"], return_info=True)
  np.testing.assert_array_equal(out, [0, 0, 0, 0, 0, 1, 0])
  assert info["parse_failures"] == 6


def test_math_answer_numeric_tolerances_are_relative_then_absolute():
  """``math.isclose(rel_tol, abs_tol)``: a large answer off by 5e-7 relative matches, a tiny one off by 1e-7 does not."""
  import math
  assert math.isclose(1000000, 1000000.5, rel_tol=1e-6, abs_tol=1e-9)        # the reference rule itself
  assert not math.isclose(1e-7, 2e-7, rel_tol=1e-6, abs_tol=1e-9)
  out = R.math_answer([r"\boxed{1000000.5}", r"\boxed{0.0000001}", r"\boxed{0.0000001}"],
                      ["1000000", "0.0000002", "0.0000001"])
  np.testing.assert_array_equal(out, [1.0, 0.0, 1.0])
  # the tolerances are parameters: a looser absolute tolerance accepts the tiny difference
  np.testing.assert_array_equal(R.math_answer([r"\boxed{0.0000001}"], ["0.0000002"], abs_tol=1e-6), [1.0])
  np.testing.assert_array_equal(R.math_answer([r"\boxed{1000000.5}"], ["1000000"], rel_tol=1e-9), [0.0])


def test_math_answer_sources_order_is_a_parameter():
  text = "#### 4\n" + r"and \boxed{5}"
  assert R.math_answer([text], ["5"])[0] == 1
  assert R.math_answer([text], ["4"], sources=("hash", "boxed"))[0] == 1
  assert R.math_answer(["just 9"], ["9"], sources=("boxed",))[0] == 0
  with pytest.raises(ValueError, match="sources"):
    R.math_answer(["1"], ["1"], sources=("magic",))
  with pytest.raises(ValueError, match="references"):
    R.math_answer(["1"], ["1", "2"])


def test_math_answer_fuzz_never_raises():
  rng = random.Random(0)
  alphabet = list("0123456789{}\\$#,./-+eE boxedfrac\n%^()") + ["\\boxed{", "####", "\\frac", "}", "{"]
  comps = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))) for _ in range(300)]
  out = R.math_answer(comps, ["1"] * len(comps))
  assert out.shape == (300,) and set(np.unique(out)) <= {0.0, 1.0}
  out = R.exact_match(comps, comps)
  nonempty = np.array([R.normalize_text(c, "basic") != "" for c in comps])
  assert (~nonempty).any() and nonempty.any()
  np.testing.assert_array_equal(out, nonempty.astype(np.float32))  # an empty answer never scores 1


def test_math_answer_long_output_is_bounded():
  text = ("\\frac{1}{" * 2000) + "7 " * 200_000 + r"\boxed{3}"
  t0 = time.perf_counter()
  out = R.math_answer([text], ["3"])
  assert time.perf_counter() - t0 < 5.0
  assert out[0] == 1


# ----------------------------------------------------------------------------- format_regex

def test_format_regex_default_r1_pattern():
  comps = ["<think>reason</think>\n<answer>4</answer>", "<think>a</think><answer>4</answer> extra",
           "<answer>4</answer>", "<think>a</think><think>b</think><answer>4</answer>", 17,
           "  <think>\nmulti\nline</think> <answer>x</answer>\n"]
  out, info = R.format_regex(comps, return_info=True)
  np.testing.assert_array_equal(out, [1, 0, 0, 0, 0, 1])
  assert info["parse_failures"] == 1


def test_format_regex_modes_and_errors():
  assert R.format_regex(["abc 42"], pattern=r"\d+", mode="search")[0] == 1
  assert R.format_regex(["abc 42"], pattern=r"\d+", mode="match")[0] == 0
  assert R.format_regex(["abc 42"], pattern=re.compile(r"abc \d+"))[0] == 1
  assert R.format_regex(["x" * 50], pattern=r"x+", max_chars=10)[0] == 0
  assert R.format_regex(["x" * 10, "x" * 11], pattern=r"x+", max_chars=10).tolist() == [1.0, 0.0]  # <= max_chars
  with pytest.raises(ValueError, match="pattern"):
    R.format_regex(["a"], pattern="(")
  with pytest.raises(ValueError, match="mode"):
    R.format_regex(["a"], mode="sometimes")


def test_format_regex_bounded_time_on_long_adversarial_output():
  text = "<think>" + ("</think> <answer>" * 20_000) + "y" * 500_000
  t0 = time.perf_counter()
  out = R.format_regex([text, "<think>" + "z" * 1_000_000 + "</think><answer>1</answer>"])
  assert time.perf_counter() - t0 < 5.0
  np.testing.assert_array_equal(out, [0, 1])


# ----------------------------------------------------------------------------- safe_reward

def test_safe_reward_passes_good_rewards_and_merges_info():
  fn = R.safe_reward(functools.partial(R.math_answer, return_info=True), lenient=False)
  r, info = fn(["#### 1", "none"], ["1", "2"])
  np.testing.assert_array_equal(r, [1, 0])
  assert r.dtype == np.float32 and info["errors"] == 0 and info["parse_failures"] == 1


def _raises(c, r):
  raise KeyError("boom")


def _nan(c, r):
  return np.array([1.0, np.nan, 0.0])


def _short(c, r):
  return [1.0]


def _text(c, r):
  return ["a", "b", "c"]


@pytest.mark.parametrize("fn,pattern", [(_raises, "raised KeyError"), (_nan, "non-finite"),
                                        (_short, "shape"), (_text, "not numbers")])
def test_safe_reward_strict_raises_naming_the_function(fn, pattern):
  wrapped = R.safe_reward(fn, lenient=False)
  with pytest.raises(R.RewardError, match=rf"'{fn.__name__}'.*{pattern}"):
    wrapped(["a", "b", "c"], ["x", "y", "z"])
  with pytest.raises(ValueError, match="my_reward"):  # RewardError is a ValueError; custom name
    R.safe_reward(fn, lenient=False, name="my_reward")(["a", "b", "c"], None)


def test_safe_reward_lenient_scores_zero_and_counts():
  r, info = R.safe_reward(_nan, lenient=True)(["a", "b", "c"])
  np.testing.assert_array_equal(r, [1, 0, 0])
  assert info["errors"] == 1 and "non-finite" in info["error"]
  r, info = R.safe_reward(_raises, lenient=True)(["a", "b", "c"])
  np.testing.assert_array_equal(r, [0, 0, 0])
  assert info["errors"] == 3
  r, info = R.safe_reward(_short, lenient=True)(["a", "b", "c"])
  assert r.shape == (3,) and info["errors"] == 3
  with pytest.raises(ValueError, match="fn"):
    R.safe_reward(3)


# ----------------------------------------------------------------------------- composite

def test_composite_weighted_sum_and_components():
  comps = ["<think>t</think><answer>\\boxed{2}</answer>", "<answer>2</answer>", "<think>t</think><answer>3</answer>"]
  refs = ["2", "2", "2"]
  fn = R.composite({"acc": R.math_answer, "fmt": R.format_regex}, {"acc": 1.0, "fmt": 0.25})
  total, info = fn(comps, refs)
  acc = np.array([1, 1, 0], np.float64)
  fmt = np.array([1, 0, 1], np.float64)
  np.testing.assert_allclose(total, 1.0 * acc + 0.25 * fmt, rtol=0, atol=1e-7)
  np.testing.assert_array_equal(info["components"]["acc"], acc)
  np.testing.assert_array_equal(info["matrix"], np.stack([acc, fmt], 1))
  assert info["names"] == ("acc", "fmt") and info["errors"] == 0
  assert info["mean/fmt"] == pytest.approx(2 / 3)


def test_composite_zero_weight_removes_effect_and_errors_name_component():
  fn = R.composite({"acc": R.math_answer, "bad": _nan}, {"acc": 1.0, "bad": 0.0}, lenient=True)
  total, info = fn(["1", "2", "3"], ["1", "0", "3"])
  np.testing.assert_array_equal(total, [1, 0, 1])
  assert info["errors/bad"] == 1 and info["errors"] == 1
  strict = R.composite({"acc": R.math_answer, "bad": _nan})
  with pytest.raises(R.RewardError, match="'bad'"):
    strict(["1", "2", "3"], ["1", "0", "3"])


def test_composite_validation():
  with pytest.raises(ValueError, match="weights"):
    R.composite({"a": R.exact_match}, {"b": 1.0})
  with pytest.raises(ValueError, match="weights"):
    R.composite({"a": R.exact_match}, {"a": float("nan")})
  with pytest.raises(ValueError, match="components"):
    R.composite({})
  with pytest.raises(ValueError, match="components"):
    R.composite({"a": 1})


def test_catalog_lists_rewards_and_filters():
  names = {t.name: t.kind for t in rljax.catalog()}
  for n in ["exact_match", "math_answer", "format_regex", "grpo_lambda", "overlong_penalty", "length_penalty",
            "rubric_dropout", "prm_clip", "prm_delta", "correctness_gated", "gaussian_reward",
            "clipped_linear_reward", "composite", "zero_variance", "variance_topp", "void_turn", "greso",
            "pilot_commit", "difficulty_budget", "shuffle_pairs", "rorecomp", "negative_advantage_drop", "vcrl"]:
    assert n in names
  for t in R.TECHNIQUES:
    assert t.fn.__doc__ and t.source


def test_verifiers_that_need_references_refuse_none():
  with pytest.raises(ValueError, match="references"):
    R.math_answer(["1"], None)
  with pytest.raises(ValueError, match="references"):
    R.exact_match(["1"], None)
  assert R.format_regex(["x"], None, pattern="x")[0] == 1
  assert R.math_answer(["Answer: 12 apples"], ["12"])[0] == 1
  assert R.math_answer(["The final answer is $-3.5$ meters."], ["-7/2"])[0] == 1
  assert R.math_answer(["#### 1,200 dollars"], ["1200"])[0] == 1
  assert R.math_answer(["The answer is x + 1."], ["x+1"])[0] == 1
