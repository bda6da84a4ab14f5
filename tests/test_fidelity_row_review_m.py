"""Issue #51, per-row review m: an independent second reading of six records (not a random draw).

Rows: passk, vote, task_normalized, hadw, uniqueness, canon.

Held (2): ``passk`` (RUCAIBox/Passk_Training@c3ba575e code/passk_adv.py calc_adv, compute_advantage; the repository
holds no training script) and ``hadw`` (yangfengkai/HA-DW@8b087945 core_algos.py:742-805, ray_trainer.py:138-225,
322-331, 1445-1462, examples/hadw_trainer/gspo_hadw.sh, the DAPO reward manager); their "= theirs" claims are
checked below against float64 NumPy transcriptions written for this file.

Not held (4), each error fixed in the record (no implementation changed, no implementation bug found):

- ``vote`` said something FALSE and OMITTED a launch script. HanYiton/VAA-CSEC, both plugin copies
  (YuYi/glpo/glpo_swift_plugin.py@e2a32547:59-79, YuYi/glpo_swift_plugin.py@9bb6a1ff:36-56, stored copies) count
  the think tags in ``_extract_answer`` with an empty pattern, ``to = len(re.findall(r"", c))`` (:63-64 / :40-41),
  i.e. len(c) + 1, so ``perfect`` is never True and the vote reward R(G) never has the 0.3 format reward, while the
  run's individual reward (src/rewards/zh_grammar_reward.py extract_answer, which counts '<think>') gives 0.3. The
  record said R(G) has the 0.3 when a majority rollout is well formatted ("equal when the majority rollouts'
  rewards are equal"); there a well-formatted rollout with the majority answer gets a bonus of 0.3 (a unanimous,
  well-formatted group: 0.3 on every row; ours 0). The plugin's no-<answer> fallback also always returns ''.
  YuYi/glpo/run_glpo.sh at the plugin's commit e2a32547 loads src/rewards/zh_grammar_reward_v3.py, which the
  repository does not hold, and no file there registers zh_gec_reward: it does not start as released (the record
  cited the 9bb6a1ff script only).
- ``task_normalized`` OMITTED the authors' code of its second source and made a claim on the abstract alone: seed
  000 L55 (AgentRL's abstract) names github.com/THUDM/AgentRL; the record said "AgentRL's task normalisation gives
  no form" without reading the code or the paper body (arXiv 2510.04206; neither is stored here, so the check
  stays open and the record now says so). The QwenLong-L1.5 form holds (tested).
- ``uniqueness`` OMITTED part of the judge: arXiv 2601.08763v2 Appendix A is a 3-stage clustering pipeline (Stage 1
  the Qwen-family judge groups the K solutions in prose; Stages 2-3, GPT/o3, extract the groups and the K integer
  labels); the record described one judge query. Eq. 5 = scope='all' holds (tested).
- ``canon`` said something FALSE and OMITTED a temperature. biuboomc/CANON@7d6f814f dapo_ray_trainer.py:275 reads
  config.algorithm.beta, a key neither dapo_trainer.yaml (:185-199) nor setups.sh sets: composing their config with
  setups.sh's overrides (hydra-core 1.3.8, omegaconf 2.3.1) and reading it raises ConfigAttributeError ("Key 'beta'
  is not in struct"), so setups.sh as released stops at its first advantage step; the record gave "beta = 0.0 (the
  functions' default)" as what runs. Their entropy metric is of softmax(z / rollout.temperature)
  (fsdp_workers.py:536-542, dp_actor.py:117-120, 154-157; T = 1.0 in setups.sh), ours untempered: not in the
  record. The "= ours with intra=1, inter=2λ, scale='none'" claim holds for both variants (tested).
"""
import math
import re
import unicodedata

import jax
import jax.numpy as jnp
import numpy as np

import rljax.advantages as A
from _fidelity import defaults, fid, record


def _x64(fn, *args, **kw):
  with jax.enable_x64(True):
    out = fn(*(jnp.asarray(a) for a in args), **kw)
  return out


# ----------------------------------------------------------------------------------------------- passk (held)


def _comb(n, k):
  """scipy.special.comb(n, k) (exact=False): 0 when k > n or either is negative."""
  if n < 0 or k < 0 or k > n:
    return 0.0
  return float(math.comb(n, k))


def _calc_adv(val, k):
  """Passk_Training@c3ba575e code/passk_adv.py:10-19 calc_adv, float64."""
  val = np.asarray(val, np.float64)
  c = int((val == 1).sum())
  n = val.size
  rho = 1 - _comb(n - c, k) / _comb(n, k)
  sigma = math.sqrt(rho * (1 - rho))
  adv_p = (1 - rho) / (sigma + 1e-6)
  adv_n = (1 - rho - _comb(n - c - 1, k - 1) / _comb(n - 1, k - 1)) / (sigma + 1e-6)
  new = np.where(val == 1, adv_p, val)
  return np.where(new == 0, adv_n, new), sigma


def test_passk_equals_calc_adv_up_to_the_sigma_floor():
  rng = np.random.default_rng(51013)
  for n, k in ((8, 4), (16, 3), (12, 1), (6, 6), (32, 8)):
    for c in range(0, n + 1):
      r = np.zeros(n)
      r[rng.permutation(n)[:c]] = 1.0
      theirs, sigma = _calc_adv(r, k)
      ours = np.asarray(_x64(A.passk, r, np.zeros(n, np.int32), k=k)[0])
      if sigma > 1e-6:
        # ours ÷ σ, theirs ÷ (σ + 1e-6): the recorded relative difference 1e-6/σ
        np.testing.assert_allclose(ours * sigma / (sigma + 1e-6), theirs, rtol=1e-8, atol=1e-12)
      else:  # σ = 0: all equal, or c > n − k
        assert sigma == 0.0 and (c in (0, n) or c > n - k)
        np.testing.assert_array_equal(ours, 0.0)
        np.testing.assert_allclose(theirs, 0.0, atol=0.0)


def test_passk_record_numbers_for_the_tiny_sigma_groups():
  n, k = 64, 16
  got = []
  for c in (46, 47, 48):
    r = np.r_[np.ones(c), np.zeros(n - c)]
    theirs, sigma = _calc_adv(r, k)
    ours = np.asarray(_x64(A.passk, r, np.zeros(n, np.int32), k=k)[0])
    assert 0 < sigma <= 1e-6
    np.testing.assert_array_equal(ours, 0.0)  # ours: σ ≤ sigma_eps → 0
    got.append((sigma, theirs[0], theirs[-1]))
  np.testing.assert_allclose([g[0] for g in got], [5.6e-7, 1.9e-7, 4.5e-8], rtol=0.05)
  np.testing.assert_allclose([g[1] for g in got], [2.0e-7, 2.9e-8, 1.9e-9], rtol=0.05)
  np.testing.assert_allclose([g[2] for g in got], [-5.1e-7, -8.1e-8, -5.9e-9], rtol=0.05)
  dev = fid("passk").deviations[0]
  assert "5.6e-7 / 1.9e-7 / 4.5e-8" in dev and "2.0e-7 / 2.9e-8 / 1.9e-9" in dev
  assert "−5.1e-7 / −8.1e-8 / −5.9e-9" in dev
  assert defaults("passk")["k"] == ("required", "K, required (compute_advantage argument)")


# ------------------------------------------------------------------------------------------------ vote (not held)

_SRC = '王羲之被后世称为"书圣"，王献之则被后世评价认为可与其父比肩的书法家。'
_REF = '王羲之被后世称为"书圣"，王献之则被后世评价认为是可与其父比肩的书法家。'


def _norm(t):
  return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", t)).strip() if t else ""


def _strip(t):
  if not t:
    return ""
  t = re.sub(r"<\|im_start\|>.*?\n?", "", t)
  t = re.sub(r"<\|im_end\|>", "", t)
  return re.sub(r"<\|endoftext\|>", "", t).strip()


def _plugin_extract(raw):
  """VAA-CSEC glpo_swift_plugin.py _extract_answer as stored (both copies): the think-tag counts and the
  plain-text fallback use patterns without the tags."""
  c = _strip(raw)
  if not c:
    return "", 0.0
  to = len(re.findall(r"", c))
  tc = len(re.findall(r"", c))
  ao = len(re.findall(r"<answer>", c))
  ac = len(re.findall(r"</answer>", c))
  perfect = to == 1 and tc == 1 and ao == 1 and ac == 1
  m = re.search(r"<answer>(.*?)</answer>", c, flags=re.DOTALL)
  if m:
    return _norm(m.group(1)), (0.3 if perfect else 0.0)
  m2 = re.search(r"<answer>(.*)", c, flags=re.DOTALL)
  if m2 and _norm(m2.group(1)):
    return _norm(m2.group(1)), 0.0
  t = re.sub(r"[\s\S]*$", "", re.sub(r"[\s\S]*?\s*", "", c))
  return (_norm(t), 0.0) if _norm(t) else ("", 0.0)


def _reward_extract(raw):
  """VAA-CSEC src/rewards/zh_grammar_reward.py extract_answer (the run's individual reward zh_gec_reward)."""
  c = _strip(raw)
  if not c:
    return "", 0.0
  perfect = all(len(re.findall(p, c)) == 1 for p in (r"<think>", r"</think>", r"<answer>", r"</answer>"))
  m = re.search(r"<answer>(.*?)</answer>", c, flags=re.DOTALL)
  if m:
    return _norm(m.group(1)), (0.3 if perfect else 0.0)
  m2 = re.search(r"<answer>(.*)", c, flags=re.DOTALL)
  if m2 and _norm(m2.group(1)):
    return _norm(m2.group(1)), 0.0
  t = _norm(re.sub(r"<think>[\s\S]*$", "", re.sub(r"<think>[\s\S]*?</think>\s*", "", c)))
  return (t, 0.0) if t else ("", 0.0)


def _edit(a, b):
  prev = list(range(len(b) + 1))
  for i in range(1, len(a) + 1):
    cur = [i] + [0] * len(b)
    for j in range(1, len(b) + 1):
      cur[j] = min(cur[j - 1] + 1, prev[j] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
    prev = cur
  return prev[-1]


def _score(pred, ref, src, fmt):
  """_score / _score_single_ref (the same in the plugin and zh_grammar_reward.py)."""
  if pred == ref:
    return 3.4 + fmt
  sr, sp, pr = _edit(src, ref), _edit(src, pred), _edit(pred, ref)
  if sr == 0 or sp == 0:
    return fmt
  useful = (sr + sp - pr) / 2.0
  if useful < 0:
    return -1.5 * min(-useful / sr, 1.0) + fmt
  if useful == 0:
    return fmt
  prec, rec = min(useful / sp, 1.0), min(useful / sr, 1.0)
  base = 2.0 * 1.25 * prec * rec / (0.25 * prec + rec)
  if sp > sr:
    return max(-1.5, base - min((sp - sr) / sr, 2.0) * 0.8) + fmt
  return base + fmt


def _glpo_run(completions, k=8, eps=1e-4):
  """The plugin's pipeline on one batch: column 0 zh_gec_reward, column 1 _compute_group_per_sample (R(G) =
  _score of Counter.most_common over non-empty answers, + 0.3 if a well-formatted rollout gave it), then
  _glpo_compute_advantages Steps 5-7 (base (R − mean_K)/clamp(std_K ddof 1, 1e-4), bonus max(0, R − R(G)))."""
  from collections import Counter  # pylint: disable=import-outside-toplevel
  ind = []
  for raw in completions:
    pred, fmt = _reward_extract(raw)
    ind.append(_score(pred, _norm(_REF), _norm(_SRC), fmt))
  grp = []
  for g in range(0, len(completions), k):
    ans = [_plugin_extract(x) for x in completions[g:g + k]]
    valid = [a for a, _ in ans if a]
    vote = Counter(valid).most_common(1)[0][0] if valid else ""
    bonus = 0.3 if vote and any(f > 0 and a == vote for a, f in ans) else 0.0
    grp += [_score(vote, _norm(_REF), _norm(_SRC), bonus) if vote else 0.0] * k
  r = np.asarray(ind).reshape(-1, k)
  gr = np.asarray(grp).reshape(-1, k)
  base = (r - r.mean(1, keepdims=True)) / np.maximum(r.std(1, ddof=1, keepdims=True), eps)
  return (base + np.maximum(r - gr[:, :1], 0.0)).reshape(-1), np.asarray(ind), np.asarray(grp)


def test_vote_their_vote_reward_never_has_the_format_reward():
  good = f"<think>加“是”</think><answer>{_REF}</answer>"
  assert _plugin_extract(good) == (_norm(_REF), 0.0)     # their format check never passes
  assert _reward_extract(good) == (_norm(_REF), 0.3)     # the individual reward's does
  assert len(re.findall(r"", good)) == len(good) + 1
  assert _plugin_extract(_REF) == ("", 0.0) and _reward_extract(_REF) == (_norm(_REF), 0.0)  # no <answer> tag
  bare = f"<answer>{_REF}</answer>"  # not well formatted: no think tags
  partial = '<think>改</think><answer>王羲之被后世称为"书圣"，王献之则被后世评价为是可与其父比肩的书法家。</answer>'
  group1 = [good] * 8                                # unanimous, well formatted
  group2 = [good] * 5 + [partial] * 2 + [f"<think>x</think><answer>{_SRC}</answer>"]  # majority well formatted
  group3 = [bare] * 5 + [partial] * 3                # majority without the format reward
  theirs, r, rg = _glpo_run(group1 + group2 + group3)
  assert np.allclose(r[:8], 3.7) and np.allclose(rg[:8], 3.4)
  answers = np.array([0] * 8 + [0] * 5 + [1] * 2 + [2] + [0] * 5 + [1] * 3)
  gid = np.repeat(np.arange(3), 8)
  ours = np.asarray(_x64(A.vote, r, answers, gid, eps=1e-4)[0])
  np.testing.assert_allclose(theirs[:8], 0.3, rtol=1e-12)       # theirs: 0.3 on every row of a unanimous group
  np.testing.assert_allclose(ours[:8], 0.0, atol=1e-12)          # ours: 0
  np.testing.assert_allclose((theirs - ours)[8:13], 0.3, rtol=1e-9)  # the well-formatted majority rows
  np.testing.assert_allclose(theirs[13:], ours[13:], rtol=1e-9, atol=1e-12)  # elsewhere equal
  # the record now says so
  f = fid("vote")
  d = defaults("vote")
  assert d["format reward in r_vote"][0].startswith("as in the majority rollouts' rewards")
  assert "never in R(G)" in d["format reward in r_vote"][1] and "len(c) + 1" in d["format reward in r_vote"][1]
  assert any("theirs 0.3 on every row, ours 0" in x for x in f.deviations)
  assert not any("with the 0.3 format bonus if any of those rollouts" in x for x in f.deviations)
  assert "re.findall(r'', c)" in f.read and "Row review m" in f.read
  assert "unless a majority rollout has the format reward" in f.differences and len(f.differences) <= 220


def test_vote_record_names_the_launch_script_at_the_plugins_commit():
  f = fid("vote")
  assert "run_glpo.sh@e2a32547" in f.read and "zh_grammar_reward_v3.py" in f.read
  assert "zh_gec_individual_reward" in f.read and "glpo_swift_plugin_v3.py" in f.read
  assert any(x.startswith("their launch script at the plugin's commit (run_glpo.sh@e2a32547)")
             and "does not start as released" in x for x in f.deviations)
  assert "does not start as released" in defaults("vote")["run_glpo.sh environment"][1]


# --------------------------------------------------------------------------------------- task_normalized (not held)


def _qwenlong(scores, index, source, eps=1e-6, norm=True):
  """Tongyi-Zhiwen/Qwen-Doc@12489b07 QwenLong-L1.5/README.md compute_grpo_task_norm_outcome_advantage, float64:
  task2std torch.std (unbiased) over the batch's rows of a data_source (one row: 0), id2mean per uid (one row: 0)."""
  scores = np.asarray(scores, np.float64)
  std = {t: (0.0 if (source == t).sum() == 1 else scores[source == t].std(ddof=1)) for t in set(source.tolist())}
  mean = {u: (0.0 if (index == u).sum() == 1 else scores[index == u].mean()) for u in set(index.tolist())}
  out = np.empty_like(scores)
  for i, s in enumerate(scores):
    out[i] = (s - mean[index[i]]) / (std[source[i]] + eps) if norm else s - mean[index[i]]
  return out


def test_task_normalized_equals_their_readme_function_and_record_leaves_agentrl_open():
  rng = np.random.default_rng(51023)
  gid = np.array([0] * 4 + [1] * 4 + [2] * 3 + [3] + [4] * 5 + [5])
  task = np.array([0] * 8 + [1] * 4 + [2] * 5 + [3])   # task 3: one row, a singleton uid too
  r = rng.normal(size=gid.size) * np.where(task == 1, 10.0, 1.0)
  theirs = _qwenlong(r, gid, task)
  base = _x64(A.grpo, r, gid, scale="none", singleton="raw")[0]
  ours = np.asarray(_x64(A.task_normalized, base, task, rewards=r, scale="rewards", center=False)[0])
  np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-10)
  assert abs(theirs[-1]) > 1e4  # the one-row task: r / (0 + 1e-6) in both
  # with grpo's default singleton 0 only the singleton-uid rows differ (the recorded deviation)
  base0 = _x64(A.grpo, r, gid, scale="none")[0]
  ours0 = np.asarray(_x64(A.task_normalized, base0, task, rewards=r, scale="rewards", center=False)[0])
  single = np.isin(gid, [3, 5])
  np.testing.assert_allclose(ours0[~single], theirs[~single], rtol=1e-10, atol=1e-10)
  assert np.all(ours0[single] == 0.0) and np.all(theirs[single] != 0.0)
  f = fid("task_normalized")
  assert "github.com/THUDM/AgentRL" in f.read and "arXiv 2510.04206" in f.read and "Row review m" in f.read
  assert any("github.com/THUDM/AgentRL" in x and "unchecked" in x for x in f.deviations)
  assert not any("AgentRL's task normalisation gives no form" in x for x in f.deviations)


# ------------------------------------------------------------------------------------------------ hadw (held)


def _hadw_theirs(scores, index, history):
  """yangfengkai/HA-DW@8b087945 core_algos.py:742-805 (norm_adv_by_std_in_grpo True, epsilon 1e-6): hist_mean = the
  history's mean (np.float32, compute_reward_history_stats :154-159), or the batch mean when the history is None /
  empty; per uid mean / torch.std (a singleton: 0 / 1); 1.5·exp(−sgn(μ_g − μ_h)·sgn(r − μ_g)·|μ_g − μ_h|)·z."""
  scores = np.asarray(scores, np.float64)
  h = scores.mean() if not history else float(np.mean(np.asarray(history, np.float32)))
  out = np.zeros_like(scores)
  for i, s in enumerate(scores):
    g = scores[index == index[i]]
    mu, sd = (0.0, 1.0) if g.size == 1 else (g.mean(), g.std(ddof=1))
    out[i] = 1.5 * math.exp(-np.sign(mu - h) * np.sign(s - mu) * abs(mu - h)) * (s - mu) / (sd + 1e-6)
  return out


def test_hadw_equals_theirs_at_their_default_and_with_a_window_and_the_pm1_reward_needs_strength_2():
  rng = np.random.default_rng(51033)
  gid = np.repeat(np.arange(5), 6)
  steps = [(rng.random(gid.size) < rng.random(5)[gid]).astype(np.float64) for _ in range(4)]
  for window, k in ((1, 0), (3, 3)):
    est = A.hadw(window=window, scale=1.5)
    state = est.init()
    hist = []
    for acc in steps:
      if k:
        hist = (hist + [acc.mean()])[-k:]  # ray_trainer.py:1453-1462, before the advantage
      theirs = _hadw_theirs(acc, gid, hist if k else None)
      ours, _, state = est.update(state, _x64(A.grpo, acc, gid)[0], acc, gid)
      np.testing.assert_allclose(np.asarray(ours, np.float64), theirs, rtol=1e-6, atol=1e-6)
  # verl's ±1 math reward (math_dapo / aime data): the weight is that of acc with 2λ (the recorded strength=2)
  acc = steps[0]
  pm = 2 * acc - 1
  theirs = _hadw_theirs(pm, gid, None)
  est = A.hadw(window=1, scale=1.5, strength=2.0)
  ours, _, _ = est.update(est.init(), _x64(A.grpo, pm, gid)[0], acc, gid)
  np.testing.assert_allclose(np.asarray(ours, np.float64), theirs, rtol=1e-5, atol=1e-6)
  assert any("strength=2 there" in x for x in fid("hadw").deviations)


# ----------------------------------------------------------------------------------------- uniqueness (not held)


def test_uniqueness_scope_all_is_eq5_and_record_names_the_three_stage_judge():
  rng = np.random.default_rng(51043)
  gid = np.repeat(np.arange(4), 8)
  r = (rng.random(gid.size) < 0.5).astype(np.float64)
  cluster = rng.integers(0, 3, gid.size)
  z = np.empty_like(r)
  theirs = np.empty_like(r)
  for g in range(4):  # Eq. 1, Eq. 3 (f over all K), Eq. 4-5, α = 0.5
    m = gid == g
    z[m] = (r[m] - r[m].mean()) / (r[m].std(ddof=1) + 1e-6)
    f = np.array([(cluster[m] == c).sum() for c in cluster[m]], np.float64)
    theirs[m] = z[m] / f ** 0.5
  ours = np.asarray(_x64(A.uniqueness, _x64(A.grpo, r, gid)[0], r > 0.5, cluster, gid, alpha=0.5, scope="all")[0])
  np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)
  judge = defaults("uniqueness")["judge"][1]
  assert "Qwen2.5-72B" in judge and "3-stage" in judge and "GPT/o3" in judge and "Appendix A" in judge
  f = fid("uniqueness")
  assert "Stages 2-3" in f.placement and "Appendix A" in f.read and "Row review m" in f.read


# ---------------------------------------------------------------------------------------------- canon (not held)


def _canon_theirs(scores, metric, index, lam, variant, alpha=1.0, beta=0.0, max_length=8192):
  """biuboomc/CANON@7d6f814f core_algos.py:281-367 (variant 'length') / 369-455 ('entropy'): a stable sort by the
  metric, the first n//2 'short', the rest 'long'; means per half; the λ mix ÷ max_length."""
  scores = np.asarray(scores, np.float64)
  out = np.empty_like(scores)
  for u in np.unique(index):
    rows = np.flatnonzero(index == u)
    order = rows[np.argsort(metric[rows], kind="stable")]
    mid = rows.size // 2
    short, long_ = order[:mid], order[mid:]
    ms, ml = scores[short].mean(), scores[long_].mean()
    for i in rows:
      s = scores[i]
      if i in long_:
        first = alpha * s - ms + beta if variant == "length" else s - alpha * ms + beta
        out[i] = (lam * first + (1 - lam) * (s - ml)) / max_length
      else:
        first = s - alpha * ml - beta if variant == "length" else alpha * s - ml - beta
        out[i] = (lam * first + (1 - lam) * (s - ms)) / max_length
  return out


def _entropy(z, t):
  p = np.exp((z - z.max()) / t)
  p /= p.sum()
  return float(-(p * np.log(np.maximum(p, 1e-300))).sum())


def test_canon_equals_theirs_in_both_variants_and_record_states_the_beta_failure_and_the_temperature():
  rng = np.random.default_rng(51053)
  gid = np.repeat(np.arange(4), 8)
  r = rng.choice([-1.0, 1.0], gid.size)
  metric = rng.permutation(gid.size).astype(np.float64) + rng.random(gid.size)  # no ties
  for lam in (1.0, 0.3):
    ours = np.asarray(_x64(A.canon, r, metric, gid, intra_coef=1.0, inter_coef=2 * lam, scale="none")[0]) / 8192
    for variant in ("length", "entropy"):  # α = 1, β = 0: the two variants coincide
      np.testing.assert_allclose(ours, _canon_theirs(r, metric, gid, lam, variant), rtol=1e-10, atol=1e-15)
  # the entropy metric: theirs at rollout.temperature, ours untempered; the order can flip at T ≠ 1
  tail = np.r_[0.0, np.full(50, -2.0)]   # one likely token and a long tail
  pair = np.r_[0.0, 0.0, np.full(49, -30.0)]  # two equal tokens
  assert _entropy(tail, 1.0) > _entropy(pair, 1.0) and _entropy(tail, 0.3) < _entropy(pair, 0.3)
  d = defaults("canon")
  beta = d["α / β"][1]
  assert "ConfigAttributeError" in beta and "+algorithm.beta=0.0" in beta
  assert "config.algorithm.beta" in beta and "set by neither dapo_trainer.yaml nor setups.sh" in beta
  temp = d["entropy metric's temperature"]
  assert temp[0].startswith("none: entropy_behavior") and "rollout.temperature" in temp[1]
  assert "1.0 in setups.sh, where the two agree" in temp[1]
  f = fid("canon")
  assert any(x.startswith("setups.sh as released stops at its first advantage step") for x in f.deviations)
  assert any(x.startswith("the entropy metric: theirs of softmax(z/T)") for x in f.deviations)
  assert "Key 'beta' is not in struct" in f.read and "dapo_trainer.yaml:185-199" in f.read
  assert "at rollout.temperature" in f.placement
  assert "Row review m" in record("canon")
