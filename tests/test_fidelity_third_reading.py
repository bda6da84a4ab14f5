"""Fidelity, issue #51 (the four-question records), filter / reward / shaping / replay rows: each test compares an
rljax function, set to the cited source's form, with a float64 NumPy (or plain Python) transcription of the source
lines its record's ``read`` names (written here, not copied, and not calling rljax), on random inputs.
"""
import collections
import re

import numpy as np
import pytest

import rljax
from rljax import filters as F
from _fidelity import e3_rollout_n

ROWS = {r.name: r for r in rljax.catalog()}


# ----------------------------------------------------------------------------- zero_variance vs verl DAPO
# volcengine/verl@v0.7.0 recipe/dapo/dapo_ray_trainer.py:243-266 (the filter_groups branch)

def _verl_filter_groups(uids, metric):
  vals = collections.defaultdict(list)
  for uid, m in zip(uids, metric):
    vals[uid].append(m)
  std = {uid: np.std(v) for uid, v in vals.items()}
  kept_uids = [uid for uid, s in std.items() if s > 0 or len(vals[uid]) == 1]
  return [i for i, uid in enumerate(uids) if uid in kept_uids]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_zero_variance_keeps_the_rows_verl_filter_groups_keeps(seed):
  rng = np.random.default_rng(seed)
  sizes = rng.integers(1, 6, size=8)
  gid = rng.permutation(np.repeat(np.arange(8), sizes)).astype(np.int32)
  metric = rng.integers(0, 2, size=gid.size).astype(np.float64)
  metric[gid == 0] = 0.75                                   # an equal group of non-binary scores
  metric[gid == 1] = rng.normal(size=int((gid == 1).sum()))  # continuous scores
  kept = _verl_filter_groups(gid.tolist(), metric.tolist())
  keep, _ = F.zero_variance(metric, gid, num_groups=8)
  assert np.flatnonzero(np.asarray(keep)).tolist() == kept
  assert ROWS["zero_variance"].fidelity.in_full


def test_zero_variance_equal_values_are_zero_spread_where_verls_std_rounds_above_zero():
  """The recorded deviation: np.std([0.1] * 3) = 1.4e-17 > 0, so verl keeps the group; max − min drops it."""
  metric = np.array([0.1, 0.1, 0.1, 0.0, 1.0])
  gid = np.array([0, 0, 0, 1, 1], np.int32)
  assert _verl_filter_groups(gid.tolist(), metric.tolist()) == [0, 1, 2, 3, 4]
  keep, _ = F.zero_variance(metric, gid, num_groups=2)
  assert np.asarray(keep).tolist() == [False, False, False, True, True]


# ----------------------------------------------------------------------------- void_turn vs SimpleTIR
# ltzheng/SimpleTIR@e7b5b443 recipe/simpletir/agent_utils.py:554-605 (execute_predictions) and :441-451

def _simpletir_void(turns):
  """One trajectory: the rollout loop stops at \\boxed{ or at a turn without a code block (void when no boxed)."""
  pattern = r"```(?:py|python)?\n(.*?)\n```"
  for prediction in turns:
    done = "\\boxed{" in prediction
    code = re.search(pattern, prediction, re.DOTALL)
    if code is None and not done:
      return True                      # is_void_turn = 1, and the episode ends
    if done:
      return False
  return False


def test_void_turn_with_the_authors_patterns_is_their_void_turn_mask():
  pieces = ["```python\nprint(1)\n```", "```py\nx=1\n```", "```\ny\n```", "```print(2)```", "\\boxed{3}",
            "\\boxed {3}", "<answer>3</answer>", "#### 3", "just text", ""]
  rng = np.random.default_rng(0)
  trajs = []
  for _ in range(300):
    n = int(rng.integers(1, 4))
    turns = [" ".join(pieces[j] for j in rng.choice(len(pieces), size=int(rng.integers(1, 3))))
             for _ in range(n)]
    # a rollout stops at the first void turn or \boxed{: only such prefixes are trajectories of theirs
    cut = next((k + 1 for k, t in enumerate(turns) if "\\boxed{" in t
                or re.search(r"```(?:py|python)?\n(.*?)\n```", t, re.DOTALL) is None), n)
    trajs.append(turns[:cut])
  keep, _ = F.void_turn(trajs, code_pattern=r"```(?:py|python)?\n(.*?)\n```", answer_pattern=r"\\boxed\{")
  assert np.asarray(keep).tolist() == [not _simpletir_void(t) for t in trajs]
  default, _ = F.void_turn(trajs)
  assert not np.array_equal(default, keep)  # the wider default patterns differ on these turns (recorded)


# ----------------------------------------------------------------------------- greso vs Infini-AI-Lab/GRESO
# presampling_selector.py:102-148: the skip probability 1 − max(p^count, 0.01) from a prompt's reward trace

def _greso_skip_probability(trace, p_easy, p_hard):
  if not trace:
    return 0.0
  count = 0                                      # easy_probabilistic_skip: consecutive means >= 0.98
  for r in reversed(trace):
    if r < 0.98:
      break
    count += 1
  easy = 1 - max(p_easy ** count, 0.01)
  if easy > 0:
    return easy  # one uniform draw against it (the hard test never runs when count > 0)
  if trace[-1] > 0.11:
    return 0.0
  count = 0                                      # hard_probabilistic_skip: consecutive means <= 0.11
  for r in reversed(trace):
    if r > 0.11:
      break
    count += 1
  return 1 - max(p_hard ** count, 0.01)


@pytest.mark.parametrize("seed", [0, 1])
def test_greso_admission_is_the_authors_skip_rule_over_reward_traces(seed):
  rng = np.random.default_rng(seed)
  n_prompts, n, p_easy, p_hard = 12, 8, 0.5, 0.3
  gr = F.greso(p_easy=p_easy, p_hard=p_hard, adapt_step=0.0)
  state = gr.init(n_prompts)
  traces = [[] for _ in range(n_prompts)]
  ids = np.arange(n_prompts)
  for _ in range(10):
    kind = rng.integers(0, 3, size=n_prompts)  # all correct, all wrong, mixed; rewards 1 / 0.1 as theirs
    r = np.where(kind[:, None] == 0, 1.0, 0.1) * np.ones((n_prompts, n))
    mixed = kind == 2
    r[mixed] = np.where(rng.uniform(size=(int(mixed.sum()), n)) < 0.5, 1.0, 0.1)
    r[mixed, 0], r[mixed, 1] = 1.0, 0.1
    for j in range(n_prompts):
      traces[j].append(float(r[j].mean()))
    state, _ = gr.update(state, ids, r.reshape(-1), np.repeat(ids, n).astype(np.int32))
    _, st = gr.select(state, np.array([0, seed], np.uint32), ids)
    want = [1.0 - _greso_skip_probability(t, p_easy, p_hard) for t in traces]
    np.testing.assert_allclose(np.asarray(st["admit_prob"], np.float64), want, rtol=1e-6)


# ----------------------------------------------------------------------------- shortest_path_reward vs MobileRL
# xuyifan-0731/MobileRL-iclr training/verl/workers/reward_manager/step.py:18-69 (check_uid_uuid_reward)

def _mobilerl_penalty(uids, uuids, scores):
  by_uid = collections.defaultdict(lambda: collections.defaultdict(list))
  for uid, uuid, r in zip(uids, uuids, scores):
    by_uid[uid][uuid].append(r)
  penalty = {}
  for uuid_dict in by_uid.values():
    success_lens = [len(rs) for rs in uuid_dict.values() if any(r == 1 for r in rs)]
    min_len = min(success_lens) if success_lens else 0
    for uuid, rs in uuid_dict.items():
      l = len(rs)
      if all(r == 0 for r in rs) or not success_lens:
        penalty[uuid] = 0.0
      else:
        penalty[uuid] = max(l - min_len, 0) / (2 * l)
  return penalty


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shortest_path_reward_is_the_authors_uuid_penalty(seed):
  from rljax import rewards as R
  rng = np.random.default_rng(seed)
  n_ep = 40
  gid = rng.integers(0, 8, size=n_ep)
  steps = rng.integers(1, 9, size=n_ep)
  r = rng.choice([0.0, 1.0, 0.5], size=n_ep, p=[0.4, 0.4, 0.2])
  uids, uuids, scores = [], [], []   # theirs: one row per step, every row of an episode holds its reward
  for e in range(n_ep):
    for _ in range(int(steps[e])):
      uids.append(int(gid[e])); uuids.append(e); scores.append(float(r[e]))
  pen = _mobilerl_penalty(uids, uuids, scores)
  ours, _ = R.shortest_path_reward(r, steps, gid)
  np.testing.assert_allclose(np.asarray(ours, np.float64), r - np.array([pen[e] for e in range(n_ep)]),
                             rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- tool_call_reward vs SPEAR
# TencentYoutuResearch/SPEAR verl-agent/agent_system/reward_manager/episode.py:136-163 ("cosine")

def _spear_episode_score(episode_reward, episode_length, global_steps, max_toolcall_steps):
  score = float(episode_reward)
  if global_steps <= max_toolcall_steps:
    bonus = min(1.0, episode_length * 0.1)
    bonus *= (np.cos((global_steps / max_toolcall_steps) * np.pi) + 1) / 2
    score += max(0, bonus)
  return score


@pytest.mark.parametrize("t", [0, 1, 57, 199, 200, 201, 1000])
def test_tool_call_reward_is_spears_cosine_toolcall_score(t):
  from rljax import rewards as R
  rng = np.random.default_rng(t)
  r = rng.choice([0.0, 1.0], size=32).astype(np.float64)
  n = rng.integers(0, 25, size=32)
  ours, _ = R.tool_call_reward(r, n, t)
  want = [_spear_episode_score(a, b, t, 200) for a, b in zip(r, n)]
  np.testing.assert_allclose(np.asarray(ours, np.float64), want, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- pilot_commit vs databricks/pilot-commit
# recipe/pc/pc_ray_trainer.py:287-328 (filter_batch)

def _pc_filter_batch(indices, metric, upper, lower):
  agg = collections.defaultdict(list)
  for idx, m in zip(indices, metric):
    agg[idx].append(m)
  return [idx for idx, vals in agg.items() if lower <= np.mean(vals) <= 1 - upper]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pilot_commit_window_rule_commits_the_prompts_filter_batch_passes(seed):
  rng = np.random.default_rng(seed)
  num, pilot, n = 20, 16, 48
  gid = np.repeat(np.arange(num), pilot).astype(np.int32)
  acc = (rng.uniform(size=num * pilot) < np.repeat(rng.uniform(size=num), pilot)).astype(np.float64)
  acc[:pilot] = 0.0
  acc[:2] = 1.0          # 2/16 = 0.125, exactly the lower bound: passes (>=)
  acc[pilot:2 * pilot] = 0.0
  acc[pilot:pilot + 12] = 1.0   # 12/16 = 0.75 = 1 − upper: passes (<=)
  passed = _pc_filter_batch(gid.tolist(), acc.tolist(), upper=0.25, lower=0.125)
  counts, _ = F.pilot_commit(acc, gid, num_groups=num, budget=num * n, window=(0.125, 0.75), rule="uniform",
                             max_per_prompt=n)
  want = np.array([n if g in passed else 0 for g in range(num)])
  np.testing.assert_array_equal(np.asarray(counts), want)
  assert 0 in passed and 1 in passed


# ----------------------------------------------------------------------------- difficulty_budget vs E3-RL4LLMs
# LiaoMengqi/E3-RL4LLMs e3/trainer/ray_trainer.py:391-433 (get_rollout_n_per_prompt)

def test_difficulty_budget_first_epoch_is_e3s_uniform_allocation_and_the_rounding_differs_as_recorded():
  rank = np.array([0.0, 0.25, 0.5, 0.75])   # update_rank: index / P over prompts sorted by mean reward, hardest last
  # the first epoch (n_min = n_max = rollout.n = 8): every prompt gets 8, as ours with min = max = 8
  np.testing.assert_array_equal(e3_rollout_n(rank, 32, 8, 8), [8, 8, 8, 8])
  ours, _ = F.difficulty_budget(1.0 - rank, budget=32, min_per_prompt=8, max_per_prompt=8)
  np.testing.assert_array_equal(np.asarray(ours), [8, 8, 8, 8])
  # a later epoch (min 2, max 16 here): the same proportional split, but their + 1e-8 floors the exact shares
  # 4, 8, 12 one lower and the leftover goes to the hardest prompt first; ours rounds by largest remainder
  np.testing.assert_array_equal(e3_rollout_n(rank, 32, 2, 16), [2, 5, 9, 16])
  ours, _ = F.difficulty_budget(1.0 - rank, budget=32, min_per_prompt=2, max_per_prompt=16)
  np.testing.assert_array_equal(np.asarray(ours), [2, 6, 10, 14])


# ----------------------------------------------------------------------------- shuffle_pairs vs Shuffle-R1
# xiaomi-research/shuffle-r1 shuffle_r1/custom_algos.py:98-138 (the pairing of compute_pairwise_purning_grpo_advantage)

def _shuffle_r1_pairs(adv, index, purning_ratio):
  groups = collections.defaultdict(list)
  for i, (a, g) in enumerate(zip(adv, index)):
    groups[g].append({"adv": a, "index": i})
  out = []
  for g in groups:
    rows = sorted(groups[g], key=lambda x: x["adv"], reverse=True)
    pairs, left, right = [], 0, len(rows) - 1
    while left < right:
      pairs.append((rows[left]["index"], rows[right]["index"]))
      left += 1
      right -= 1
    out += pairs[:int(len(pairs) * (1.0 - purning_ratio))]
  return out


@pytest.mark.parametrize("seed", [0, 1])
def test_shuffle_pairs_pairing_is_the_authors_pairwise_pruning(seed):
  rng = np.random.default_rng(seed)
  n, groups = 16, 6                       # their scripts: rollout.n 16, purning_ratio 0.5 -> 4 pairs per group
  gid = np.repeat(np.arange(groups), n).astype(np.int32)
  adv = rng.normal(size=n * groups)       # distinct advantages (no ties, no all-equal group)
  want = _shuffle_r1_pairs(adv.tolist(), gid.tolist(), 0.5)
  _, info = F.shuffle_pairs(adv, gid, pairs_per_group=4)
  got = [tuple(int(x) for x in p) for p in np.asarray(info["pairs"])]
  assert sorted(got) == sorted(want)


# ----------------------------------------------------------------------------- negative_advantage_drop vs A-LoL
# abaheti95/LoL-RL lolrl_qlora_llama_hh.py:589-620 (good_priority / good_random: the rows that can be drawn)

def test_negative_advantage_drop_keeps_the_support_of_a_lols_sampler():
  rng = np.random.default_rng(0)
  adv = rng.normal(size=200)
  adv[:10] = 0.0
  for strategy in ("good_priority", "good_random"):
    w = np.array(adv)
    w[w < 0] = 0.0
    if strategy == "good_random":
      w[w > 0] = 1.0
    probs = w / np.sum(w)
    support = np.where(probs != 0.0)[0]
    keep, _ = F.negative_advantage_drop(adv.astype(np.float32))
    np.testing.assert_array_equal(np.flatnonzero(np.asarray(keep)), support)


# ----------------------------------------------------------------------------- dump vs ZhentingWang/DUMP
# verl/utils/curriculum_learning.py:50-80 (the estimator's update) and :137-185 (compute_sampling_weights)

class _DumpAuthors:
  def __init__(self, sources, window_size=300):
    self.recent = {s: [] for s in sources}
    self.n = {s: 0 for s in sources}
    self.mu = {s: 0.0 for s in sources}
    self.window_size = window_size

  def update(self, source_advantages):
    for s, adv in source_advantages.items():
      if not adv:
        continue
      self.recent[s] = (self.recent[s] + list(adv))[-self.window_size:]
      self.mu[s] = float(np.mean(np.abs(np.array(self.recent[s]))))
      self.n[s] += len(adv)

  def weights(self):
    total = max(1, sum(self.n.values()))
    scores = np.array([self.mu[s] + 1.0 * np.sqrt(2 * np.log(total + 1) / (self.n[s] + 1)) for s in self.recent])
    e = np.exp((scores - scores.max()) / 0.1)
    return e / e.sum()


def test_dump_arm_probabilities_are_the_authors_sampling_weights_over_steps():
  from rljax.filters import _curriculum as C
  rng = np.random.default_rng(0)
  k, window = 4, 30                      # a short window so that it fills and slides
  authors = _DumpAuthors(range(k), window_size=window)
  state = C.curriculum_init(k, window)
  for _ in range(12):
    arms = rng.integers(0, k - 1, size=int(rng.integers(4, 20)))   # arm 3 never drawn: its bonus grows
    adv = rng.normal(size=arms.size) * (1 + arms)                   # float64, not float32-exact
    authors.update({j: adv[arms == j].tolist() for j in range(k)})
    state = C.curriculum_observe(state, arms, adv)
    sc = C.curriculum_scores(state, exploration=1.0)
    p = C.arm_probs(sc["score"], np.ones(k, bool), 0.1)
    np.testing.assert_allclose(p, authors.weights(), rtol=1e-12, atol=1e-15)
  assert state.window.dtype == np.float64


# ----------------------------------------------------------------------------- overlong_penalty vs verl DAPO
# volcengine/verl@v0.7.0 verl/workers/reward_manager/dapo.py:116-122

def test_overlong_penalty_is_verls_overlong_buffer_reward():
  import jax
  from rljax import rewards as R
  max_resp_len, buffer_len, factor = 20480, 4096, 1.0   # recipe/dapo/run_dapo_qwen2.5_32b.sh
  lengths = np.array([1, 16383, 16384, 16385, 18000, 20479, 20480])
  want = [min(-(n - (max_resp_len - buffer_len)) / buffer_len * factor, 0) for n in lengths]
  with jax.enable_x64(True):
    pen, _ = R.overlong_penalty(lengths.astype(np.float64), max_len=max_resp_len, buffer_len=buffer_len,
                                penalty_factor=factor)
    np.testing.assert_allclose(np.asarray(pen, np.float64), want, rtol=0, atol=1e-15)


def test_overlong_penalty_keeps_float64_under_x64():
  """Second reading (#51 item 4): the record says the function keeps float64 under x64; it cast to float32.
  A setting whose penalties are not float32-exact (L_buf = 3, factor 0.7) shows the difference."""
  import jax
  from rljax import rewards as R
  max_len, buffer_len, factor = 10, 3, 0.7
  lengths = np.array([0.0, 7.0, 8.0, 9.0, 10.0, 11.0])
  want = [min(-(n - (max_len - buffer_len)) / buffer_len * factor, 0) for n in lengths]
  with jax.enable_x64(True):
    pen, _ = R.overlong_penalty(lengths, max_len=max_len, buffer_len=buffer_len, penalty_factor=factor)
    assert pen.dtype == np.float64
    np.testing.assert_allclose(np.asarray(pen), want, rtol=0, atol=1e-15)
    pen32, _ = R.overlong_penalty(lengths.astype(np.int32), max_len=max_len, buffer_len=buffer_len,
                                  penalty_factor=factor)
    assert pen32.dtype == np.float32  # integer token counts: float32, as the loop's rewards


# ----------------------------------------------------------------------------- exact_match vs verl search_r1 EM
# volcengine/verl@v0.7.0 verl/utils/reward_score/search_r1_like_qa_em.py:23-128

def _verl_normalize_answer(s):
  import string
  s = s.lower()
  s = "".join(ch for ch in s if ch not in set(string.punctuation))
  s = re.sub(r"\b(a|an|the)\b", " ", s)
  return " ".join(s.split())


def _verl_em_score(solution_str, targets):
  matches = list(re.finditer(r"<answer>(.*?)</answer>", solution_str, re.DOTALL))
  if not matches:
    return 0.0
  answer = _verl_normalize_answer(matches[-1].group(1).strip())
  hit = any(_verl_normalize_answer(t) == answer for t in targets)
  if not hit:
    return 0.0
  if solution_str.count("<answer>") > 10 or solution_str.count("</answer>") > 10:
    return 0.25
  return 1.0


def test_exact_match_squad_answer_tag_is_verls_search_r1_em():
  from rljax import rewards as R
  rng = np.random.default_rng(0)
  answers = ["New-York", "new york", "The Beatles", "beatles!", "U.S.A.", "usa", "an apple", "Apple", "42", "4 2"]
  refs, comps = [], []
  for _ in range(300):
    a, b, c = (answers[int(i)] for i in rng.integers(0, len(answers), 3))
    refs.append([a] if rng.uniform() < 0.5 else [a, b])
    body = f"<think>x</think><answer> {c} </answer>"
    if rng.uniform() < 0.3:
      body = f"<answer>{b}</answer> then " + body      # the last tag counts
    if rng.uniform() < 0.1:
      body = "no tag: " + c
    comps.append(body)
  want = [_verl_em_score(c, r) for c, r in zip(comps, refs)]
  got = np.asarray(R.exact_match(comps, refs, normalize="squad", extract="answer_tag"), np.float64)
  np.testing.assert_array_equal(got, want)
  assert R.exact_match(["New-York"], ["new york"], normalize="squad")[0] == 0      # deleted, as verl
  assert R.exact_match(["New-York"], ["new york"], normalize="squad_space")[0] == 1  # the old 'squad'


# ----------------------------------------------------------------------------- math_answer vs verl math_reward
# volcengine/verl@v0.7.0 verl/utils/reward_score/math_reward.py:17-227 (compute_score, is_equiv, strip_string)

def _verl_last_boxed(s):
  idx = s.rfind("\\boxed")
  if "\\boxed " in s:
    return "\\boxed " + s.split("\\boxed ")[-1].split("$")[0]
  if idx < 0:
    idx = s.rfind("\\fbox")
    if idx < 0:
      return None
  depth = 0
  for i in range(idx, len(s)):
    depth += (s[i] == "{") - (s[i] == "}")
    if s[i] == "}" and depth == 0:
      return s[idx:i + 1]
  return None


def _verl_fix_fracs(s):
  parts = s.split("\\frac")
  out = parts[0]
  for sub in parts[1:]:
    out += "\\frac"
    if sub[:1] == "{":
      out += sub
      continue
    if len(sub) < 2:
      return s
    a, b, rest = sub[0], sub[1], sub[2:]
    out += ("{" + a + "}{" + b + "}" + rest) if b != "{" else ("{" + a + "}" + b + rest)
  return out


def _verl_fix_a_slash_b(s):
  if len(s.split("/")) != 2:
    return s
  a, b = s.split("/")
  try:
    ia, ib = int(a), int(b)
    assert s == f"{ia}/{ib}"
    return "\\frac{" + str(ia) + "}{" + str(ib) + "}"
  except (ValueError, AssertionError):
    return s


def _verl_fix_sqrt(s):
  if "\\sqrt" not in s:
    return s
  parts = s.split("\\sqrt")
  return parts[0] + "".join(("\\sqrt{" + p[0] + "}" + p[1:]) if p[0] != "{" else ("\\sqrt" + p) for p in parts[1:])


def _verl_strip_string(s):
  for a, b in (("\n", ""), ("\\!", ""), ("\\\\", "\\"), ("tfrac", "frac"), ("dfrac", "frac"), ("\\left", ""),
               ("\\right", ""), ("^{\\circ}", ""), ("^\\circ", ""), ("\\$", "")):
    s = s.replace(a, b)
  if "\\text{ " in s:
    parts = s.split("\\text{ ")
    assert len(parts) == 2
    s = parts[0]
  s = s.replace("\\\\%", "").replace("\\%", "").replace(" .", " 0.").replace("{.", "{0.")
  if not s:
    return s
  if s[0] == ".":
    s = "0" + s
  if len(s.split("=")) == 2 and len(s.split("=")[0]) <= 2:
    s = s.split("=")[1]
  s = _verl_fix_fracs(_verl_fix_sqrt(s).replace(" ", ""))
  if s == "0.5":
    s = "\\frac{1}{2}"
  return _verl_fix_a_slash_b(s)


def _verl_math_score(solution, ground_truth):
  try:
    boxed = _verl_last_boxed(solution)
    if boxed is None:
      return 0.0
    if "\\boxed " in boxed:
      answer = boxed[len("\\boxed "):]
    else:
      assert boxed.startswith("\\boxed{") and boxed.endswith("}")
      answer = boxed[len("\\boxed{"):-1]
    try:
      return float(_verl_strip_string(answer) == _verl_strip_string(ground_truth))
    except Exception:  # pylint: disable=broad-except
      return float(answer == ground_truth)
  except Exception:  # pylint: disable=broad-except
    return 0.0


# (completion's boxed answer, reference): both normalisers agree on these
_MATH_AGREE = [("\\frac{1}{2}", "\\frac12"), ("\\dfrac{3}{4}", "3/4"), ("0.5", "\\frac{1}{2}"), ("x = 5", "5"),
               ("5^{\\circ}", "5"), ("10\\%", "10"), ("\\left( 1, 2 \\right)", "(1,2)"), ("7", "8"),
               ("\\sqrt{2}", "\\sqrt{2}"), ("-3", "-3"), ("\\pi", "\\pi"), ("2", "\\frac{4}{2}"),
               ("12", "12.0"), ("1/3", "0.333333")]


def test_math_answer_boxed_is_verls_math_reward_where_recorded_equal():
  from rljax import rewards as R
  comps = [f"so the answer is \\boxed{{{a}}}." for a, _ in _MATH_AGREE]
  refs = [r for _, r in _MATH_AGREE]
  ours = np.asarray(R.math_answer(comps, refs, sources=("boxed",)), np.float64)
  theirs = np.array([_verl_math_score(c, r) for c, r in zip(comps, refs)])
  # the recorded difference: ours compares numbers by value (2 = 4/2, 12 = 12.0, 1/3 ≈ 0.333333 at rel_tol 1e-6);
  # verl compares normalised strings
  by_value = (("2", "\\frac{4}{2}"), ("12", "12.0"), ("1/3", "0.333333"))
  differ = [i for i, pair in enumerate(_MATH_AGREE) if pair in by_value]
  np.testing.assert_array_equal(np.delete(ours, differ), np.delete(theirs, differ))
  assert ours[differ].tolist() == [1.0] * 3 and theirs[differ].tolist() == [0.0] * 3
  assert theirs.sum() >= 7  # the agreeing set holds matches as well as misses
  # no boxed answer: verl scores 0; ours (default sources) falls back to ####, 'the answer is', the last number
  assert _verl_math_score("#### 5", "5") == 0.0
  assert R.math_answer(["#### 5"], ["5"])[0] == 1.0 and R.math_answer(["#### 5"], ["5"], sources=("boxed",))[0] == 0
  # recorded: verl's fix_sqrt rewrites \sqrt2 as \sqrt{2}; our normaliser does not
  assert _verl_math_score("\\boxed{\\sqrt2}", "\\sqrt{2}") == 1.0
  assert R.math_answer(["\\boxed{\\sqrt2}"], ["\\sqrt{2}"], sources=("boxed",))[0] == 0.0


# ----------------------------------------------------------------------------- code_tests vs verl prime_code
# volcengine/verl@v0.7.0 verl/utils/reward_score/prime_code/__init__.py:23 (the program a completion holds)

def test_code_tests_program_is_verls_prime_code_solution_on_fenced_python():
  from rljax.rewards import _code
  cases = ["Here:\n```python\ndef f(x):\n    return x + 1\n```\nDone.",
           "first\n```python\nx = 1\n```\nthen a fix\n```python\nx = 2\nprint(x)\n```\n",
           "```python\nimport math\nprint(math.pi)\n```"]
  for text in cases:
    theirs = text.split("```python")[-1].split("```")[0]
    assert _code.extract_code(text) == theirs.lstrip("\n")   # the same program (theirs keeps the fence's newline)
  # recorded: no fence -> theirs run the whole text, ours score 0; a bare ``` block: ours take it
  assert "no code".split("```python")[-1].split("```")[0] == "no code" and _code.extract_code("no code") is None
  assert _code.extract_code("```\nprint(1)\n```") == "print(1)\n"


# ----------------------------------------------------------------------------- length_penalty vs open-r1 len_reward
# huggingface/open-r1@1416fa0c src/open_r1/rewards.py:183-202 (after correctness is decided)

def _open_r1_len_reward(contents, correctness):
  lengths = [len(c) for c in contents]
  lo, hi = min(lengths), max(lengths)
  if hi == lo:
    return [0.0] * len(contents)
  out = []
  for length, ok in zip(lengths, correctness):
    lam = 0.5 - (length - lo) / (hi - lo)
    out.append(float(lam if ok else min(0, lam)))
  return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_length_penalty_one_group_of_character_lengths_is_open_r1_len_reward(seed):
  import jax
  from rljax import rewards as R
  rng = np.random.default_rng(seed)
  contents = ["x" * int(n) for n in rng.integers(1, 400, size=24)]
  correct = rng.uniform(size=24) < 0.5
  want = _open_r1_len_reward(contents, correct.tolist())
  with jax.enable_x64(True):   # the whole call's batch is one group; lengths = characters
    r, _ = R.length_penalty(np.array([len(c) for c in contents], np.float64), correct, np.zeros(24, np.int32),
                            num_groups=1)
    np.testing.assert_allclose(np.asarray(r, np.float64), want, rtol=0, atol=1e-15)
