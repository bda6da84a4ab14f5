"""Issue #51, sweep s3 (paper conventions): the error classes found around the cited function of 21 rows.

Classes: (a) a convention inherited from the method the paper builds on (GRPO's σ, REINFORCE++'s batch
normalisation), (b) the paper's experimental settings, (c) the text actually read (a record that said 'abstract
only' / 'not reached' when more was stored). Each corrected record is checked here; where the source gives a number,
a float64 NumPy transcription of the source's rule (written for these tests, not copied) is compared with ours.
"""
import jax
import jax.numpy as jnp
import numpy as np

from rljax.replay import _buffer as B
from test_replay import _buffer_with, _step  # the replay tests' StepData / buffer builders
from _fidelity import defaults as _defaults, fid as _fid


def _grpo_pop(r):
  """Fathom-DeepResearch Eq. 3 (arXiv 2509.24107v1 Sec. 2.2): (r − μ_R)/σ_R, σ_R the population std, no ε."""
  r = np.asarray(r, np.float64)
  return (r - r.mean()) / r.std()


# ----------------------------------------------------------------------------- rapo_replay (class c: text read)


def test_rapo_replay_record_reads_the_paper_text_and_the_random_row():
  f = _fid("rapo_replay")
  assert f.basis == "paper_formula" and "61329118727" in f.reference and "Sec. 2.4" in f.reference
  assert "randomly replaced with o⋆" in f.read and "R(q, o⋆) > 0.5" in f.read
  assert "arxiv.org/html/2509.24107" in f.read  # the pages corpus page, still named
  d = _defaults("rapo_replay")
  assert d["replaced row"] == ("the lowest-reward row (ties: the later row)", "a random rollout of the group")
  assert "population σ, no ε" in d["advantage of the refilled group (the estimator's, not this stage's)"][1]
  assert "5 rollouts per group" in d["group size / batch (their runs)"][1]
  assert any("a random one" in x and "0.1 by format" in x for x in f.deviations)
  assert "method section was not reached (the corpus" not in f.read


def test_rapo_replay_replaced_row_ours_is_one_of_their_random_draws():
  """Their rule: one random rollout of an all-failed group takes o⋆. Ours takes the lowest-reward row: the same
  advantages as their draw of that row; other draws differ when the failed rewards differ (format 0 / 0.1)."""
  failed = [0.1, 0.0, 0.1, 0.1, 0.0]  # their Eq. 4 for 5 incorrect rollouts: 0.1 × format
  data = _step([0, 0, 0, 0, 0], group_size=5, prompts=[3], rewards=failed)
  buf = _buffer_with([{"prompt": 3, "correct": 1.0, "seq": 0}])
  rows, slots = B.rapo_plan(data, buf, per_group=1)
  assert rows.tolist() == [4] and slots.tolist() == [0]  # lowest reward, ties to the later row
  success = 0.1 + 0.9  # o⋆: correct, formatted
  ours = np.array(failed, np.float64)
  ours[rows[0]] = success
  draws = []
  for i in range(5):  # each of their equally likely draws
    r = np.array(failed, np.float64)
    r[i] = success
    draws.append(_grpo_pop(r))
  np.testing.assert_allclose(_grpo_pop(ours), draws[4], rtol=0, atol=1e-15)
  np.testing.assert_allclose(np.sort(_grpo_pop(ours)), np.sort(draws[1]), rtol=0, atol=1e-15)  # the other 0.0 row
  assert not np.allclose(draws[0][1:], draws[4][1:], atol=1e-3)  # replacing a 0.1 row: other advantages
  # equal failed rewards: every draw gives the same advantages as ours
  same = [_grpo_pop(np.where(np.arange(5) == i, success, 0.0)) for i in range(5)]
  for a in same[1:]:
    np.testing.assert_allclose(np.sort(a), np.sort(same[0]), atol=1e-15)


# ----------------------------------------------------------------------------- rorecomp, rorecomp_compensation (c)


def test_rorecomp_records_read_the_reviews_alpha_and_the_compensation_step():
  for name in ("rorecomp", "rorecomp_compensation"):
    f = _fid(name)
    assert "62147932634" in f.read and "arxiv.org/html/2509.25958" in f.read, name
    assert "α" in _defaults(name)["fraction"][1] and "not stated" in _defaults(name)["fraction"][1], name
  f = _fid("rorecomp_compensation")
  assert "an additional training step" in f.read and "p_comp" in f.read
  d = _defaults("rorecomp_compensation")
  assert "p_comp" in d["compensation"][1]
  assert "additional training step on B_comp" in d["when compensation rows train"][1]
  assert "additional step" in f.placement
  assert not any("how they are scheduled is not stated" in x for x in f.deviations)
  assert any("separate optimizer steps there, one here" in x for x in f.deviations)
  assert "not stated (review 1 asks)" in _defaults("rorecomp")["all-correct / all-incorrect group"][1]


def test_rorecomp_all_correct_group_keeps_its_short_share():
  """The case review 1 asks about: ours keeps ceil(fraction · n) shortest rows of an all-correct group."""
  from rljax.filters import rorecomp  # pylint: disable=import-outside-toplevel
  priority, info = rorecomp(np.ones(4), np.array([9, 3, 7, 5]), np.zeros(4, np.int32), fraction=0.5)
  assert np.asarray(priority).tolist() == [False, True, False, True]
  assert np.asarray(info["buffer"]).tolist() == [True, False, True, False]


# ----------------------------------------------------------------------------- rank (class c: the transcription)


def _ranking_as_reward(rewards, gid, f_norm, ddof=0):
  """The transcription (code index id 552439543) of RLRR's 'Ranking as Reward': rank r = 1 best within the group,
  s = (r_max − r)/(r_max − 1), A = (s − mean s)/F_norm, F_norm 1 or std(s)."""
  out = np.zeros(len(rewards))
  for g in np.unique(gid):
    idx = np.flatnonzero(gid == g)
    n = idx.size
    r = np.empty(n)
    r[np.argsort(-rewards[idx])] = np.arange(1, n + 1)  # distinct rewards: 1 = best
    s = (n - r) / (n - 1)
    a = s - s.mean()
    out[idx] = a if f_norm == "1" else a / s.std(ddof=ddof)
  return out


def test_rank_against_the_transcribed_ranking_as_reward():
  from rljax.advantages import rank  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(2601)
  gid = np.repeat(np.arange(3), [4, 6, 5])
  rewards = rng.normal(size=gid.size)
  with jax.enable_x64(True):
    a_range, _ = rank(jnp.asarray(rewards), jnp.asarray(gid), num_groups=3)
    a_std, _ = rank(jnp.asarray(rewards), jnp.asarray(gid), num_groups=3, normalize="std")
  np.testing.assert_allclose(np.asarray(a_range), 2 * _ranking_as_reward(rewards, gid, "1"), atol=1e-12)
  np.testing.assert_allclose(np.asarray(a_std), _ranking_as_reward(rewards, gid, "std"), atol=1e-12)
  # with an unbiased std (the transcription does not say) theirs is ours × sqrt((n − 1)/n)
  n = np.bincount(gid)[gid]
  np.testing.assert_allclose(np.asarray(a_std) * np.sqrt((n - 1) / n), _ranking_as_reward(rewards, gid, "std", 1),
                             atol=1e-12)
  f = _fid("rank")
  assert "552439543" in f.read and "third party's reading, not the paper's text" in f.read
  d = _defaults("rank")
  assert "'range' is twice its F_norm = 1" in d["rank → advantage"][1]
  assert "ξ" in d["correctness clip of A"][1] and "τ" in d["rule reward in the rank reward"][1]
  assert any("doubles its F_norm = 1 form" in x for x in f.deviations)


# ----------------------------------------------------------------------------- key_baseline (class a: REINFORCE++)


def test_key_baseline_names_reinforce_pp_and_its_batch_whitening():
  from rljax.advantages import key_baseline, reinforce_pp_baseline  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(1586)
  key = np.array([0, 0, 1, 1, 1, 2, 0, 1])  # key 2: a one-agent group
  r = rng.normal(size=key.size)
  with jax.enable_x64(True):
    ours, _ = key_baseline(jnp.asarray(r), jnp.asarray(key), num_keys=3)
    whitened, _ = reinforce_pp_baseline(jnp.asarray(r), jnp.asarray(key), num_groups=3)
  base = r - np.array([r[key == k].mean() for k in key])  # the public baseline: the key's mean return
  np.testing.assert_allclose(np.asarray(ours), base, atol=1e-12)
  # REINFORCE++'s global-batch normalisation on top (rljax's whitening: unbiased var + 1e-8)
  np.testing.assert_allclose(np.asarray(whitened), (base - base.mean()) / np.sqrt(base.var(ddof=1) + 1e-8),
                             atol=1e-12)
  assert not np.allclose(np.asarray(ours), np.asarray(whitened), atol=1e-3)
  f = _fid("key_baseline")
  assert "62085690467" in f.read and "REINFORCE++" in f.read
  d = _defaults("key_baseline")
  assert "REINFORCE++" in d["std scaling"][1] and "global batch" in d["std scaling"][1]
  assert d["std scaling"][1] != "none stated in the abstract"
  assert any("reinforce_pp_baseline(rewards, key)" in x for x in f.deviations)


# ----------------------------------------------------------------------------- difficulty_weight (class a)


def test_difficulty_weight_base_is_grpo_without_its_std():
  """Review 3 of arXiv 2505.13261: the difficulty weight replaces GRPO's std normalisation, so their advantage is
  (r − μ_g)·f(acc_g); ours multiplies the incoming estimator's output: dr_grpo gives theirs, grpo adds ÷ σ."""
  from rljax.advantages import difficulty_weight, dr_grpo, grpo  # pylint: disable=import-outside-toplevel
  gid = np.repeat(np.arange(3), 4)
  correct = np.array([1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0], np.float64)
  r = correct.copy()
  with jax.enable_x64(True):
    base_dr, _ = dr_grpo(jnp.asarray(r), jnp.asarray(gid), num_groups=3)
    base_grpo, _ = grpo(jnp.asarray(r), jnp.asarray(gid), num_groups=3)
    on_dr, _ = difficulty_weight(base_dr, jnp.asarray(correct), jnp.asarray(gid), num_groups=3)
    on_grpo, _ = difficulty_weight(base_grpo, jnp.asarray(correct), jnp.asarray(gid), num_groups=3)
  acc = np.array([correct[gid == g].mean() for g in gid])
  f = 1 + 0.5 * (2 * (1 - acc) - 1)  # ours, linear, s = 0.5 (the paper's f is not stated)
  mu = np.array([r[gid == g].mean() for g in gid])
  np.testing.assert_allclose(np.asarray(on_dr), (r - mu) * f, atol=1e-12)
  sd = np.array([r[gid == g].std(ddof=1) for g in gid])
  np.testing.assert_allclose(np.asarray(on_grpo), (r - mu) / (sd + 1e-6) * f, atol=1e-9)
  assert not np.allclose(np.asarray(on_dr), np.asarray(on_grpo), atol=1e-3)
  fid = _fid("difficulty_weight")
  assert "62307804185" in fid.read and "Steep Exponential" in fid.read
  d = _defaults("difficulty_weight")
  assert "std normalisation replaced" in d["base advantage"][1] and "Steep Exponential" in d["form"][1]
  assert any("chain it after dr_grpo" in x for x in fid.deviations)


# ----------------------------------------------------------------------------- tempo (class b, c: the reviews)


def test_tempo_td_divided_by_the_reward_std_as_the_reviews_report():
  """Review 1 of arXiv 2509.18314: the paper divides the TD error by std(r). A float64 transcription of GRPO + TD
  of the prefix-tree values ÷ std(r) (population std, no ε) equals tempo(std_ddof=0, eps=0)."""
  from rljax.advantages import tempo  # pylint: disable=import-outside-toplevel
  tokens = np.array([[5, 1, 2, 3], [5, 1, 2, 4], [5, 7, 2, 3], [6, 1, 1, 1], [5, 1, 9, 9]])
  r = np.array([1.0, 0.0, 1.0, 0.0, 1.0])
  n, t = tokens.shape

  def value(prefix):  # P2T: the mean outcome of the responses below the prefix
    return np.mean([r[i] for i in range(n) if tuple(tokens[i, :len(prefix)]) == tuple(prefix)])

  sd = r.std()
  ref = np.array([[(r[i] - r.mean()) / sd + (value(tokens[i, :k + 1]) - value(tokens[i, :k])) / sd
                   for k in range(t)] for i in range(n)])
  with jax.enable_x64(True):
    args = (jnp.asarray(r), jnp.asarray(tokens), jnp.ones((n, t), bool), jnp.zeros(n, jnp.int32))
    pop, _ = tempo(*args, num_groups=1, std_ddof=0, eps=0.0)
    default, _ = tempo(*args, num_groups=1)
  np.testing.assert_allclose(np.asarray(pop), ref, atol=1e-12)
  np.testing.assert_allclose(np.asarray(default), ref * sd / (r.std(ddof=1) + 1e-6), atol=1e-9)
  f = _fid("tempo")
  assert "61930317164" in f.read and "line 299" in f.read
  d = _defaults("tempo")
  assert "std(r)" in d["TD scale"][1] and d["TD scale"][1] != "not read"
  assert "1024" in d["max response length (their runs)"][1] and "220" in d["training steps (their runs)"][1]
  assert any("std_ddof=0, eps=0 gives the population std(r)" in x for x in f.deviations)


# ----------------------------------------------------------------------------- rubric_dropout (class b, c)


def _third_party_keep_count(n, frac, min_keep=3):
  """The unattributed implementation (code index id 71015215527, 'arXiv 2608.11669, section 3'):
  n_keep = min(n, max(min_keep, n − floor(frac · n)))."""
  return min(n, max(min_keep, n - int(frac * n)))


def test_rubric_dropout_exact_count_against_the_fixed_fraction():
  from rljax.rewards import rubric_dropout  # pylint: disable=import-outside-toplevel
  for c, p, ours_kept, theirs_kept in ((5, 0.3, 3, 4), (10, 0.5, 5, 5), (4, 0.5, 2, 3), (7, 0.5, 3, 4)):
    scores = np.ones((2, c), np.float32)
    _, keep, _ = rubric_dropout(jax.random.PRNGKey(c), scores, np.array([0, 1]), drop_prob=p, mode="exact")
    keep = np.asarray(keep)
    assert keep.sum(1).tolist() == [ours_kept, ours_kept], (c, p)
    assert c - round(p * c) == ours_kept and _third_party_keep_count(c, p) == theirs_kept
  f = _fid("rubric_dropout")
  assert "2608.11669" in f.reference and "62378977393" in f.read and "71015215527" in f.read
  d = _defaults("rubric_dropout")
  assert "exact count" in d["mode"][1] and "positive-weight" in d["which criteria may be dropped"][1]
  assert "16 rollouts" in d["group size / steps (their runs)"][1]
  assert any("keeps 4 criteria where ours keeps 3" in x for x in f.deviations)
