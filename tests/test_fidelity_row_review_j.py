"""Issue #51, per-row review j: an independent second reading of six records (not a random draw).

Rows: format_regex, code_tests, entropic, divergence_rejection, exgrpo, dump.

Held: none of the six. Each error is fixed in the record (no implementation changed, no implementation bug
found); the records' "= theirs" claims that survive are checked below against float64 NumPy / Python
transcriptions of the cited lines.

- ``format_regex`` OMITTED a difference of the default pattern. PeterGriffinJin/Search-R1@a14dc3a4
  verl/utils/reward_score/qa_em_format.py:85-104 (is_valid_sequence) rejects any of the eight tags inside a block
  ('Unexpected tag' in state in_think / in_answer); the default R1_FORMAT_PATTERN excludes only the block's own tag,
  so '<think>a <search>q</search></think><answer>x</answer>' (no search turn) scores 1 here and is invalid there.
  The record named only "no search turns" as the default's difference. SEARCH_R1_FORMAT_PATTERN = theirs (tested).
- ``code_tests`` OMITTED three differences (volcengine/verl@v0.7.0 verl/utils/reward_score/prime_code; the same in
  the verl 0.9.1 PyPI wheel): testing_util.py:114 runs the program after an import preamble (string, re, math,
  collections, itertools, ... star-imported; sys.setrecursionlimit(6*10**5)), so a program that calls sqrt or
  Counter without importing it passes there and fails here; run_test's reliability_guard() (:94, :603-617) sets no
  memory bound and the code runs in the trainer's environment (ours 512 MiB, stdlib only); prime_code/__init__.py
  :41-45 builds the continuous branch's per-case dicts without fn_name, so a call-based problem's per-case runs are
  stdin/stdout programs.
- ``entropic`` said something FALSE: "yaml −1: α = 0 while target_entropy < 0, the control off (plain dual-clip
  PPO)". yk7333/EntroPIC@2470730c dp_actor.py update_policy computes the entropy only when entropy_coeff != 0 or
  target_entropy > 0, then calls agg_loss on it with no guard (None with entropy_coeff 0: TypeError), and with
  target_entropy < 0 sets control_alpha = 0.0, a Python float, whose control_alpha.item() in the micro-batch metrics
  raises AttributeError: the yaml default (and ActorConfig's own target_entropy 0) does not run; there is no
  control-off setting.
- ``divergence_rejection`` OMITTED a numerical difference: verl's sequence mean is verl_F.masked_mean, Σ / (n + 1e-8)
  (the verl 0.9.1 PyPI wheel utils/torch_functional.py:294-308, used by compute_rollout_rejection_mask's
  _sequence_mean), ours Σ / max(n, 1): a mean within a relative 1e-8/n above a bound is rejected here, kept there.
- ``exgrpo`` OMITTED a term of the loss its defaults describe: ElliottYan/LUFFY@01f4ae06 ExGRPO/exp_scripts/
  run_exgrpo.sh:68 sets actor.entropy_coeff=0.001 (mix_ppo_trainer.yaml:41 too; use_adaptive_temperature False), so
  mix_actor.py:184, 208 make the loss pg_loss − 0.001·masked_mean(entropy); the record gave exgrpo_policy(beta=0.1)
  alone as theirs.
- ``dump`` said something FALSE and OMITTED when it runs: ZhentingWang/DUMP@235e85d4 verl/trainer/ppo/
  ray_trainer.py:705-732 feeds validation with "advantages = rewards", each sample's value the reward tensor's mean
  over the response mask (r/|y|), not an advantage (the record: "mean reward and mean advantage"); and the
  validation runs before training (val_before_train, default True, :1084) and every test_freq = 10 steps of the
  script, so their first training batch is drawn from weights already moved by it (ours: uniform at step 0).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rljax import control as Ctl
from rljax import filters as F  # noqa: F401  (the curriculum lives under rljax.filters)
from rljax import objectives as O
from rljax import rewards as W
from rljax import sandbox
from rljax.filters import _curriculum as Cur
from rljax.types import PolicyOutputs, TrainBatch
from _fidelity import defaults, fid, record


# ------------------------------------------------------------------------------ format_regex (not held)

_SR1_TAGS = ("think", "search", "information", "answer")


def _their_is_valid_sequence(text):
  """Search-R1@a14dc3a4 qa_em_format.py:49-121 (is_valid_sequence), transcribed."""
  import re
  m = re.search(r"<\|im_start\|>assistant\s*", text)
  if not m:
    return False
  content = text[m.end():]
  for tag in _SR1_TAGS:
    if len(re.findall(f"<{tag}>", content)) != len(re.findall(f"</{tag}>", content)):
      return False
  parts = re.split(r"(</?(?:think|search|information|answer)>)", content)
  state = "start"
  moves = {("<think>", "start"): "in_think", ("<think>", "information"): "in_think",
           ("</think>", "in_think"): "after_think", ("<search>", "after_think"): "in_search",
           ("</search>", "in_search"): "after_search", ("<information>", "after_search"): "in_information",
           ("</information>", "in_information"): "information", ("<answer>", "after_think"): "in_answer",
           ("</answer>", "in_answer"): "end"}
  for part in parts:
    if not part.strip():
      continue
    if re.match(r"</?(?:think|search|information|answer)>", part):
      if (part, state) not in moves:
        return False
      state = moves[(part, state)]
    elif state in ("in_think", "in_search", "in_information", "in_answer"):
      pass
    else:
      return False
  return state == "end"


_COMPLETIONS = [
    "<think>a</think><answer>x</answer>",
    " <think>a\nb</think>\n<answer> x </answer>\n",
    "<think>a</think><search>q</search><information>d</information><think>b</think><answer>x</answer>",
    "<think>a</think><search>q</search><information>d</information><answer>x</answer>",
    "<think>a</think>junk<answer>x</answer>",
    "<think>a</think><answer>x</answer> trailing",
    "<think>a <search>q</search></think><answer>x</answer>",
    "<think>a</think><answer><think>b</think>x</answer>",
    "<think>a</think><answer>x</answer><answer>y</answer>",
    "<answer>x</answer>",
    "<think>a</think><search>q</search><information>d</information>",
    "<think>a</think><search>q</search><information>d <answer>z</answer></information><think>b</think>"
    "<answer>x</answer>",
]


def test_format_regex_search_pattern_equals_is_valid_sequence():
  ours = W.format_regex(_COMPLETIONS, pattern=W.SEARCH_R1_FORMAT_PATTERN)
  theirs = [float(_their_is_valid_sequence("<|im_start|>assistant\n" + c)) for c in _COMPLETIONS]
  np.testing.assert_array_equal(ours, theirs)
  assert 0 < sum(theirs) < len(theirs)


def test_format_regex_default_pattern_accepts_tags_inside_a_block_theirs_rejects():
  no_search = ["<think>a <search>q</search></think><answer>x</answer>",
               "<think>a</think><answer><think>b</think>x</answer>",
               "<think>a <information>d</information></think><answer>x</answer>"]
  np.testing.assert_array_equal(W.format_regex(no_search), [1.0, 1.0, 1.0])
  assert not any(_their_is_valid_sequence("<|im_start|>assistant\n" + c) for c in no_search)
  # without a tag inside a block, the default and theirs agree on no-search completions
  plain = ["<think>a</think><answer>x</answer>", "<think>a</think> <answer>x</answer> "]
  np.testing.assert_array_equal(W.format_regex(plain), [1.0, 1.0])
  assert all(_their_is_valid_sequence("<|im_start|>assistant\n" + c) for c in plain)
  rec = record("format_regex")
  assert "even on a completion with no search turn" in rec and "qa_em_format.py:85-104" in rec
  assert "Per-row review j" in fid("format_regex").read


# ------------------------------------------------------------------------------ code_tests (not held)

# verl v0.7.0 prime_code/testing_util.py:114, transcribed
_PRIME_PREAMBLE = ("from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\n"
                   "from heapq import *\nfrom bisect import *\nfrom copy import *\nfrom math import *\n"
                   "from random import *\nfrom statistics import *\nfrom itertools import *\n"
                   "from functools import *\nfrom operator import *\nfrom io import *\nfrom sys import *\n"
                   "from json import *\nfrom builtins import *\nfrom typing import *\nimport string\nimport re\n"
                   "import datetime\nimport collections\nimport heapq\nimport bisect\nimport copy\nimport math\n"
                   "import random\nimport statistics\nimport itertools\nimport functools\nimport operator\n"
                   "import io\nimport sys\nimport json\nsys.setrecursionlimit(6*10**5)\n")


def _their_per_case_dicts(test_cases):
  """prime_code/__init__.py:41-45: the continuous branch's per-case dicts."""
  return [{"inputs": [i], "outputs": [o]} for i, o in zip(test_cases["inputs"], test_cases["outputs"])]


def test_code_tests_their_preamble_runs_a_program_ours_does_not():
  program = "x = sqrt(16) + Counter('aab')['a']\n"
  ns = {}
  exec(compile(_PRIME_PREAMBLE + program, "<theirs>", "exec"), ns)  # their run: no NameError
  assert ns["x"] == 6.0
  with pytest.raises(NameError):
    exec(compile(program, "<bare>", "exec"), {})
  try:
    got = W.code_tests([f"```python\n{program}```", f"```python\nfrom math import sqrt\nfrom collections import "
                        f"Counter\n{program}```"], ["assert x == 6.0", "assert x == 6.0"])
  except sandbox.SandboxUnavailable:
    pytest.skip("this host cannot sandbox")
  np.testing.assert_array_equal(got, [0.0, 1.0])


def test_code_tests_record_lists_preamble_memory_and_fn_name():
  d = defaults("code_tests")
  assert "testing_util.py:114" in d["program run"][1] and "setrecursionlimit(6*10**5)" in d["program run"][1]
  assert "no memory bound" in d["limits"][1]
  assert "drop fn_name" in d["call-based cases (fn_name)"][1]
  cases = _their_per_case_dicts({"fn_name": "f", "inputs": [[1], [2]], "outputs": [[2], [4]]})
  assert all("fn_name" not in c for c in cases) and len(cases) == 2
  devs = " ".join(fid("code_tests").deviations)
  assert "import preamble" in devs and "without fn_name" in devs and "512 MiB" in devs


# ------------------------------------------------------------------------------ entropic (not held)

def _their_update_step(target_entropy, entropy_coeff, h, accumulated=0.0, k_p=1.0, k_i=0.01):
  """EntroPIC@2470730c dp_actor.py update_policy, one micro-batch's control path, transcribed (H a token-mean)."""
  calculate_entropy = entropy_coeff != 0 or target_entropy > 0
  entropy = np.array([h, h]) if calculate_entropy else None
  mask = np.ones(2)
  entropy_loss_item = float((entropy * mask).sum() / mask.sum())  # agg_loss, token-mean: None raises TypeError
  if target_entropy >= 0:
    alpha = np.clip(accumulated * k_i + (entropy_loss_item - target_entropy) * k_p, -1.0, 1.0)
  else:
    alpha = 0.0
  return alpha.item()  # micro_batch_metrics["actor/control_alpha"]


def test_entropic_their_yaml_default_does_not_run():
  with pytest.raises(TypeError):  # target −1 (yaml), entropy_coeff 0 (run_entropic.sh): no entropy computed
    _their_update_step(-1.0, 0.0, 0.3)
  with pytest.raises(TypeError):  # ActorConfig's own default target 0
    _their_update_step(0.0, 0.0, 0.3)
  with pytest.raises(AttributeError):  # entropy computed, but control_alpha = 0.0 has no .item()
    _their_update_step(-1.0, 1e-3, 0.3)
  assert _their_update_step(0.1, 0.0, 0.3) == pytest.approx(0.2)
  # ours runs at target 0 (and the weights move)
  st = Ctl.entropic(0.0).update(Ctl.entropic(0.0).init(), entropy=0.3)
  assert float(st.pos_weight) > 1.0 > float(st.neg_weight)
  d = defaults("entropic")
  assert "does not run" in d["target_entropy"][1] and "AttributeError" in d["target_entropy"][1]
  assert "plain dual-clip PPO" not in d["target_entropy"][1]
  assert any("no control-off setting" in x for x in fid("entropic").deviations)


def test_entropic_first_step_differs_by_the_recorded_integral_term():
  # their α on the first micro-batch (nothing accumulated) vs ours: w⁺ − 1 = −u = (K_p + K_i)(H − H*)
  h, target = 0.35, 0.1
  alpha = _their_update_step(target, 0.0, h)
  st = Ctl.entropic(target).update(Ctl.entropic(target).init(), entropy=h)
  np.testing.assert_allclose(float(st.pos_weight) - 1.0, alpha + 0.01 * (h - target), rtol=1e-6)
  np.testing.assert_allclose(1.0 - float(st.neg_weight), alpha + 0.01 * (h - target), rtol=1e-6)
  assert any("integral includes the current error" in x for x in fid("entropic").deviations)


# ------------------------------------------------------------------------------ divergence_rejection (not held)

def _their_seq_mean_k1_keep(log_ratio, mask, lower, upper):
  """verl 0.9.1 compute_rollout_rejection_mask, seq_mean_k1 branch, transcribed (masked_mean: Σ / (n + 1e-8))."""
  k1 = -np.clip(log_ratio, -20.0, 20.0)
  stat = (k1 * mask).sum(-1) / (mask.sum(-1) + 1e-8)
  return ((stat >= np.log(lower)) & (stat <= np.log(upper))).astype(float)


def _one_row(k1_values):
  x = np.asarray(k1_values, np.float64)[None, :]
  b, t = x.shape
  out = PolicyOutputs(logp=jnp.zeros((b, t), jnp.float64))
  batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.ones((b, t), jnp.float64),
                     advantages=jnp.ones((b, t), jnp.float64), group_id=jnp.zeros((b,), jnp.int32),
                     logp_old=jnp.zeros((b, t), jnp.float64), logp_behavior=jnp.asarray(x))  # log ρ = 0 − x
  return out, batch, -x, np.ones((b, t))


def test_divergence_rejection_seq_mean_denominator_differs_at_the_bound():
  hi = np.log(1.001)
  with jax.enable_x64(True):
    corr = O.divergence_rejection((np.log(0.999), hi), estimator="k1", level="sequence_mean")
    for k1, ours_keep, their_keep in (([hi * (1 + 0.5e-8)], 0.0, 1.0),  # inside their 1e-8 margin
                                      ([hi * 0.5, hi * 0.9], 1.0, 1.0),
                                      ([hi * 1.5, hi * 1.2], 0.0, 0.0),
                                      ([-hi * 3.0], 0.0, 0.0)):
      out, batch, log_ratio, mask = _one_row(k1)
      _, keep, _ = corr(out, batch)
      assert float(np.asarray(keep)[0, 0]) == ours_keep
      assert _their_seq_mean_k1_keep(log_ratio, mask, 0.999, 1.001)[0] == their_keep
  assert any("1e-8" in x and "masked_mean" in x for x in fid("divergence_rejection").deviations)


# ------------------------------------------------------------------------------ exgrpo (not held)

def test_exgrpo_record_lists_their_entropy_bonus():
  loss = defaults("exgrpo")["loss (not this stage's)"][1]
  assert "entropy_coeff=0.001" in loss and "run_exgrpo.sh:68" in loss
  assert "entropy_bonus(coef=0.001)" in loss
  # the stage the record names for it has that coefficient by default: −c·token-mean(H) is their term
  import inspect
  assert inspect.signature(O.entropy_bonus).parameters["coef"].default == 0.001
  assert "mix_actor.py" in fid("exgrpo").read


# ------------------------------------------------------------------------------ dump (not held)

class _TheirEstimator:
  """DUMP@235e85d4 curriculum_learning.py:34-79 (LearnabilityEstimator, the parts the weights use), transcribed."""

  def __init__(self, window=300):
    self.window, self.adv, self.n, self.mu = window, [], 0, 0.0

  def update(self, advantages):
    self.adv = (self.adv + list(advantages))[-self.window:]
    self.mu = float(np.mean(np.abs(np.asarray(self.adv, np.float64))))
    self.n += len(advantages)


def _their_weights(estimators):
  """curriculum_learning.py:137-197 (compute_sampling_weights), transcribed."""
  total = max(1, sum(e.n for e in estimators))
  scores = np.array([e.mu + 1.0 * np.sqrt(2 * np.log(total + 1) / (e.n + 1)) for e in estimators])
  z = np.exp((scores - scores.max()) / 0.1)
  return z / z.sum()


def _our_probs(state):
  return Cur.arm_probs(Cur.curriculum_scores(state, exploration=1.0)["score"], np.ones(state.count.shape, bool), 0.1)


def test_dump_training_updates_equal_theirs():
  rng = np.random.default_rng(0)
  theirs = [_TheirEstimator() for _ in range(3)]
  state = Cur.curriculum_init(3, 300)
  for _ in range(4):
    arms = rng.integers(0, 3, 200)
    adv = rng.normal(size=200)
    state = Cur.curriculum_observe(state, arms, adv)
    for j in range(3):
      if np.any(arms == j):
        theirs[j].update(adv[arms == j])
    np.testing.assert_allclose(_our_probs(state), _their_weights(theirs), rtol=1e-12)


def test_dump_their_initial_validation_moves_the_first_draw():
  # validation before training: one sample per source, the mean over its responses of r/|y| (advantages = rewards)
  rewards = [np.array([3.0, -1.0]), np.array([-3.0, -3.0]), np.array([0.5, 3.0])]
  lengths = [np.array([40.0, 60.0]), np.array([50.0, 30.0]), np.array([20.0, 80.0])]
  theirs = [_TheirEstimator() for _ in range(3)]
  for e, r, n in zip(theirs, rewards, lengths):
    e.update([np.mean(r / n)])
  p_theirs = _their_weights(theirs)
  p_ours = _our_probs(Cur.curriculum_init(3, 300))  # ours: no observation before the first draw
  np.testing.assert_allclose(p_ours, np.full(3, 1 / 3), rtol=1e-12)
  assert np.abs(p_theirs - 1 / 3).max() > 0.02
  assert [e.n for e in theirs] == [1, 1, 1]
  rec = record("dump")
  assert "val_before_train" in rec and "r/|y|" in rec and "not an advantage" in rec
  assert "mean reward and mean advantage" not in rec
