"""Issue #51 item 4, eleventh draw (seed 20261216), slice b: an independent re-audit of five in-full rows.

Rows drawn: oprl, negative_advantage_drop, rapo_replay, prm_clip, tempo.

Held: none. Not held (5), each error fixed in the record and checked here (most serious first):

- ``tempo``: the record said "abstract only ... no code" and left eps / std_ddof, the root branch and the singleton
  group "not read". The authors' code exists (github.com/fatebreaker/tempo, linked as "Code:" by a summary in the
  code index, read_file id 51978558250; fetched at 0a1c273d): verl/trainer/ppo/core_algos.py:261-352
  compute_tempo_outcome_advantage. It gives (R_i − μ_g + mean R(branch) − mean R(ancestor)) / (torch.std(R_g) +
  1e-6), with torch.std unbiased (ddof 1), the root branch counted (the ancestor at token 0 is the whole group), and
  NaN on every token of a one-row group (torch.std of one value). That equals ours at the defaults (checked below
  against a float64 transcription, with norm_adv_by_std_in_grpo False = scale='none'); a one-row group gives NaN
  there and 0 here. Their launch scripts (train_math_tempo.sh, train_med_tempo.sh) use rollout.n 7 and
  max_response_length 8192 (2048 at 7ba09982), where the record gave only the paper's 1024. The record is now
  authors_code.
- ``negative_advantage_drop``: the record gave the second script (train_generation_task_with_off_policy_PG.py, the
  COMET / Reddit / FaithDial tasks) as "--train_sampling ∝ A+". That flag is store_true, off by default (:54), and
  none of the README's A-LoL commands (README.md:65, 92, 115) passes it. So those runs draw every row (DataLoader
  shuffle=True, :184), and A ≤ 0 only zeroes a row's loss inside a torch.mean over all rows (:695, :710): no row is
  dropped. Also not in the record: --baseline_update_threshold (default None), which refits the value head and
  recomputes the advantages mid-training (:783-830). And in all_priority a drawn rejected response gets the chosen
  response's reward (lolrl_qlora_llama_hh.py:708-709).
- ``oprl``: the record put the PRM's untempered log-probs at dp_rm.py:114, the padded branch. At the yaml's
  reward_model.model.use_remove_padding True (ppo_trainer.yaml:213) the log-probs come from :90-98. The record also
  did not name ray_trainer.py:44's unconditional ``from prgt import core_prgt``, nor the 'prgt' estimator it
  dispatches (:403-409): the snapshot has no prgt module, so the released trainer fails at import.
- ``rapo_replay``: the record did not say which of a group's several successes ours stores. success_store_plan
  stores the highest-reward one (ties: the lower row); the paper says "the most recent successful trajectory",
  and its G rollouts are equally recent. Under their Eq. 4 that picks a formatted success (1.0) over an unformatted
  one (0.9), and the stored reward moves every advantage of a group it refills whose other rewards differ
  (checked below). The 256-row
  bound's consequence at their settings (a prompt returns once per epoch) is now stated and checked.
- ``prm_clip``: "a description of its Clip figure agrees" cited no source in this record. Now: the machine
  descriptions of the paper's Clip/Delta figure (pages corpus, subtext.edge.nugit.net/image/4e28d956...); the
  reviews in the code index (id 63217475182; review 2 asks for the Clip threshold, so η is not in the submission);
  and a third party's restatement min(r_process − η, 0) (id 26158084682). The form matches ours (checked below).

No implementation bug was found: ours = theirs wherever the records claim it, at the stated settings. Each numeric
reference below is a float64 NumPy transcription of the cited lines, written for these tests (not copied).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rljax
import rljax.advantages as A
from rljax.catalog import describe
from rljax.replay import _stages as R
from test_replay import FACTS, _step  # the replay tests' StepData builder (row width T, RunFacts)
from _fidelity import ROWS, defaults as _defaults, fid as _fid


# ----------------------------------------------------------------------------------------------------------------
# tempo (not held): the authors' code exists; = ours at the defaults


def _tempo_authors(responses, response_mask, scores, uid, norm_adv_by_std_in_grpo=True, epsilon=1e-6):
  """fatebreaker/tempo@0a1c273d verl/trainer/ppo/core_algos.py:292-352 compute_tempo_outcome_advantage, in float64.

  First the GRPO pass (:299-317: per uid mean and torch.std, a singleton mean 0 / std 1), then the per-token loop,
  which overwrites it up to the row's first masked-out token: per uid the group mean and torch.std (unbiased; NaN
  for one value); for row i, token j: ``branch`` = the rows of the previous branch whose response token j equals
  row i's, ``ancestor`` = the previous branch; a previous branch of one row fills the rest of the row (:346-348);
  the result × response_mask (:351)."""
  scores = np.asarray(scores, np.float64)
  b, t = responses.shape
  members = {}
  for i in range(b):
    members.setdefault(uid[i], []).append(i)
  out = np.zeros((b, t))
  for i in range(b):  # the GRPO pass (token_level_scores = its copy, :318)
    g = scores[members[uid[i]]]
    mean, std = (g.mean(), g.std(ddof=1)) if g.size > 1 else (0.0, 1.0)
    out[i, :] = (scores[i] - mean) / (std + epsilon) if norm_adv_by_std_in_grpo else scores[i] - mean
  for i in range(b):
    group = members[uid[i]]
    g = scores[group]
    group_mean = g.mean()
    group_std = g.std(ddof=1) if len(group) > 1 else np.nan  # torch.std of one value: NaN
    previous = list(group)
    for j in range(t):
      if response_mask[i, j] == 0:
        break
      branch = [k for k in previous if responses[i, j] == responses[k, j]]
      v = scores[i] - group_mean + scores[branch].mean() - scores[previous].mean()
      out[i, j] = v / (group_std + epsilon) if norm_adv_by_std_in_grpo else v
      if len(previous) == 1:
        out[i, j:] = out[i, j]
        break
      previous = branch
  return out * response_mask


def _tempo_batch(seed, groups=3, n=7, t=12, pad=0):
  rng = np.random.default_rng(seed)
  b = groups * n
  resp = rng.integers(1, 3, size=(b, t))  # a two-token vocabulary: many branch points
  resp[:, :2] = 1                          # a shared opening
  lengths = rng.integers(3, t + 1, size=b)
  mask = (np.arange(t)[None, :] < lengths[:, None]).astype(np.int64)
  resp = np.where(mask > 0, resp, pad)     # right padding, as verl's responses
  scores = rng.integers(0, 2, size=b).astype(np.float64)
  scores[3], scores[b - 4] = 0.25, 0.75
  uid = np.repeat(np.arange(groups), n)
  return resp, mask, scores, uid


def _ours_tempo(resp, mask, scores, uid, **kw):
  with jax.enable_x64(True):
    adv, info = A.tempo(jnp.asarray(scores), jnp.asarray(resp), jnp.asarray(mask.astype(bool)), jnp.asarray(uid),
                        num_groups=int(uid.max()) + 1, **kw)
    return np.asarray(adv), info


def test_tempo_equals_the_authors_compute_tempo_outcome_advantage_at_the_defaults():
  for seed in (0, 1, 2):
    resp, mask, scores, uid = _tempo_batch(seed)
    theirs = _tempo_authors(resp, mask, scores, uid)
    ours, info = _ours_tempo(resp, mask, scores, uid)
    assert int(info["num_branch_tokens"]) > 10
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
    # norm_adv_by_std_in_grpo False (:344) = scale='none'
    theirs_raw = _tempo_authors(resp, mask, scores, uid, norm_adv_by_std_in_grpo=False)
    ours_raw, _ = _ours_tempo(resp, mask, scores, uid, scale="none")
    np.testing.assert_allclose(ours_raw, theirs_raw, rtol=1e-12, atol=1e-12)
  # theirs counts the root branch (ancestor at token 0 = the whole group): root_branch=False departs from it
  resp, mask, scores, uid = _tempo_batch(0)
  resp[0, 0] = 2  # row 0 branches right after the prompt
  ours_noroot, _ = _ours_tempo(resp, mask, scores, uid, root_branch=False)
  assert not np.allclose(ours_noroot, _tempo_authors(resp, mask, scores, uid))
  # population std without ε (the reading of review 1's 'std(r)') is not theirs
  ours_pop, _ = _ours_tempo(resp, mask, scores, uid, std_ddof=0, eps=0.0)
  assert not np.allclose(ours_pop, _tempo_authors(resp, mask, scores, uid), atol=1e-6)


def test_tempo_multi_turn_mask_hole_stops_their_walk():
  """With a loss_mask hole (multi-turn, ray_trainer.py:266-272) theirs breaks at the first masked-out token
  (core_algos.py:333-334): the later model tokens keep the GRPO pass; ours gives them TD terms."""
  resp, mask, scores, uid = _tempo_batch(3, groups=1, t=12)
  mask[:] = 1
  mask[:, 4:6] = 0  # a tool response inside every row
  resp[:, :6] = 1  # one shared prefix up to and through the hole
  resp[:, 6:] = np.where(np.arange(7)[:, None] % 2 == 0, 1, 2)  # rows branch after the hole
  scores[:] = [1, 0, 1, 1, 0, 0, 0]  # the two branches' means differ from the group's
  theirs = _tempo_authors(resp, mask, scores, uid)
  grpo = (scores - scores.mean()) / (scores.std(ddof=1) + 1e-6)
  np.testing.assert_allclose(theirs[:, 6:], np.repeat(grpo[:, None], 6, 1), rtol=1e-12)
  ours, _ = _ours_tempo(resp, mask, scores, uid)
  np.testing.assert_allclose(ours[:, :4], theirs[:, :4], rtol=1e-12, atol=1e-12)  # before the hole: equal
  assert not np.allclose(ours[:, 6:], theirs[:, 6:], atol=1e-6)
  assert any("multi-turn" in d and "core_algos.py:333-334" in d for d in _fid("tempo").deviations)


def test_tempo_one_row_group_is_nan_in_theirs_and_zero_here_and_the_record_is_authors_code():
  resp, mask, scores, uid = _tempo_batch(4, groups=2)
  uid = uid.copy()
  uid[-1] = 7  # the last row alone in its group
  with np.errstate(invalid="ignore"):
    theirs = _tempo_authors(resp, mask, scores, uid)
  assert np.isnan(theirs[-1][mask[-1] > 0]).all() and np.isfinite(theirs[:-1]).all()
  ours, _ = _ours_tempo(resp, mask, scores, np.where(uid == 7, 2, uid))
  np.testing.assert_array_equal(ours[-1], 0.0)
  np.testing.assert_allclose(ours[:-1], theirs[:-1], rtol=1e-12, atol=1e-12)
  f = _fid("tempo")
  assert f.basis == "authors_code" and f.reference.startswith("github.com/fatebreaker/tempo: verl/trainer/ppo/")
  assert "fatebreaker/tempo@0a1c273d" in f.read and "core_algos.py:261-352" in f.read and "51978558250" in f.read
  assert "Eleventh draw" in f.read and "no code" not in f.differences
  d = _defaults("tempo")
  assert "NaN" in d["singleton group"][1] and "not read" not in d["singleton group"][1]
  assert d["root branch"][1].startswith("counted") and "not read" not in d["root branch"][1]
  assert "1e-6" in d["eps, std_ddof"][1] and "ddof 1" in d["eps, std_ddof"][1]
  assert "8192" in d["max response length (their runs)"][1] and "1024" in d["max response length (their runs)"][1]
  assert "rollout.n 7" in d["group size (their runs)"][1]
  assert "ppo_trainer.yaml:847" in d["norm_adv_by_std_in_grpo"][1]
  devs = " ".join(f.deviations)
  assert "theirs NaN" in devs and "enable_tree_structure" in devs and "the paper's choice was not read" not in devs


# ----------------------------------------------------------------------------------------------------------------
# negative_advantage_drop (not held): the second script's launch default and its README commands


def _alol_second_script_batch_loss(per_response_loss, rewards, values):
  """train_generation_task_with_off_policy_PG.py:689-710 (a_lol, no -ts: every row drawn): advantage = rewards −
  val_outputs, clamp(min=0), loss = torch.mean(per_response_loss · advantage) over all B rows."""
  adv = np.maximum(np.asarray(rewards, np.float64) - np.asarray(values, np.float64), 0.0)
  return float(np.mean(per_response_loss * adv)), adv


def _set_sample_weights_support(weights):
  """utils/rl_utils.py:90-100 set_sample_weights (with -ts): probs = w / Σw, the rows with probs ≠ 0 are drawn."""
  w = np.asarray(weights, np.float64)
  return np.flatnonzero(w / w.sum() != 0.0)


def test_negative_advantage_drop_second_script_default_drops_no_row():
  rng = np.random.default_rng(11)
  b = 12
  rewards, values = rng.uniform(0, 1, b), rng.uniform(0, 1, b)
  values[4] = rewards[4]  # A = 0 exactly
  loss_rows = rng.uniform(0.5, 3.0, b)
  theirs, adv = _alol_second_script_batch_loss(loss_rows, rewards, values)
  keep, _ = rljax.filters.negative_advantage_drop(np.asarray(rewards - values, np.float32))
  keep = np.asarray(keep)
  # their loss-carrying rows are ours' kept rows ...
  np.testing.assert_array_equal(adv > 0, keep)
  # ... and with -ts the drawn set (∝ A+ = [e if e > 0 else 0], :509) is the same support
  np.testing.assert_array_equal(_set_sample_weights_support(np.where(rewards - values > 0, rewards - values, 0.0)),
                                np.flatnonzero(keep))
  # but by default (no -ts) every row is in their mean: B in the denominator, not the kept count
  assert keep.sum() < b
  np.testing.assert_allclose(theirs, np.sum(loss_rows[keep] * adv[keep]) / b, rtol=1e-12)
  assert not np.isclose(theirs, np.sum(loss_rows[keep] * adv[keep]) / keep.sum())
  f = _fid("negative_advantage_drop")
  d = _defaults("negative_advantage_drop")
  second = d["sampling (second script: COMET, Reddit, FaithDial)"][1]
  assert "store_true, default off (:54)" in second and "README.md:65, 92, 115" in second and "(:710)" in second
  assert "--baseline_update_threshold" in d["advantage"][1]
  devs = " ".join(f.deviations)
  assert "no row is dropped" in devs and ":783-830" in devs and "chosen response's reward" in devs
  assert "Eleventh draw" in f.read and "the README's commands (never on)" in f.read


def test_negative_advantage_drop_all_priority_scores_a_rejected_row_with_the_chosen_reward():
  """lolrl_qlora_llama_hh.py:702-709: batch_indices are remapped below len(good) (:706-708) before :709 tests
  idx < len(good), so a drawn rejected response (index ≥ len) takes the chosen response's reward."""
  good_r, bad_r = np.array([0.9, 0.8, 0.7]), np.array([0.1, 0.6, 0.2])
  n = good_r.size
  drawn = [1, 4]  # row 1's chosen response and row 1's rejected one (4 − 3)
  suffix = [0 if i < n else 1 for i in drawn]
  remapped = [i if i < n else i - n for i in drawn]
  rewards = [good_r[i] if i < n else bad_r[i - n] for i in remapped]  # :709 on the remapped indices
  assert suffix == [0, 1] and rewards == [0.8, 0.8] and rewards[1] != bad_r[1]


# ----------------------------------------------------------------------------------------------------------------
# oprl (not held): the PRM log-prob line on the yaml's path, the missing prgt module


def _dp_rm_step_rewards(rm_log_labels, old_log_probs, response_mask, beta=0.05):
  """istar/dp_rm.py:158-204, ref_module None, lambda 0, step_granularity 'step': q = rm_log_labels − old_log_probs,
  zero past the response, r = β·q, the step's Σ r on its last response token; then istar_norm (:220-224) on the
  rank's rows: ÷ (max |reverse cumsum| + 1e-6)."""
  q = np.where(response_mask, rm_log_labels - old_log_probs, 0.0)
  r = beta * q
  score = np.zeros_like(r)
  last = response_mask.sum(1) - 1
  score[np.arange(r.shape[0]), last] = r.sum(1)
  rev = np.flip(np.cumsum(np.flip(score, 1), 1), 1)
  return score, score / (np.abs(rev).max() + 1e-6)


def test_oprl_prm_extras_step_reward_is_their_step_score_and_a_common_norm_cancels():
  rng = np.random.default_rng(21)
  # ours: 4 trajectories (one group) × 3 turns of 2 tokens; theirs: one step row per (trajectory, turn)
  b, turns, per = 4, 3, 2
  tid = np.repeat(np.arange(turns), per)[None, :].repeat(b, 0)
  mask = np.ones_like(tid, bool)
  prm = -rng.uniform(0.1, 3.0, tid.shape)
  old = -rng.uniform(0.1, 3.0, tid.shape)
  ep = np.array([1.0, 0.0, 1.0, 0.0])
  tv = np.ones((b, turns), bool)
  with jax.enable_x64(True):
    adv, info = A.oprl(prm, old, tid, ep, np.zeros(b, np.int32), mask=mask, turn_valid=tv, beta=0.05)
    rows_prm = prm.reshape(b * turns, per)
    rows_old = old.reshape(b * turns, per)
    score, normed = _dp_rm_step_rewards(rows_prm, rows_old, np.ones((b * turns, per), bool))
    np.testing.assert_allclose(np.asarray(info["step_rewards"]).reshape(-1), score.sum(1), rtol=1e-12, atol=1e-15)
    # istar_norm on one shard is one positive factor k for every step: feeding ours the normalised rewards
    # (logp − logp_ref scaled by k) changes nothing beyond ε (the record's claim), the episode term untouched
    factor = normed.sum(1) / score.sum(1)
    np.testing.assert_allclose(factor, factor[0], rtol=1e-12)  # one common factor on one shard
    k = factor[0]
    assert k > 0 and abs(k - 1.0) > 0.1
    scaled, sinfo = A.oprl(prm * k, old * k, tid, ep, np.zeros(b, np.int32), mask=mask, turn_valid=tv, beta=0.05,
                           eps=1e-12)
    np.testing.assert_allclose(np.asarray(sinfo["step_rewards"]).reshape(-1), normed.sum(1), rtol=1e-9)
    plain, _ = A.oprl(prm, old, tid, ep, np.zeros(b, np.int32), mask=mask, turn_valid=tv, beta=0.05, eps=1e-12)
  np.testing.assert_allclose(np.asarray(scaled), np.asarray(plain), rtol=1e-8, atol=1e-8)
  assert np.asarray(adv).shape == tid.shape
  d = _defaults("oprl")
  temp = d["sampling temperature / top_p (the log-probs in q)"][1]
  assert "dp_rm.py:90-98" in temp and "ppo_trainer.yaml:213" in temp and "dp_rm.py:114" in temp
  f = _fid("oprl")
  assert "Eleventh draw" in f.read and "ray_trainer.py:44" in f.read and "no prgt module" in f.read
  devs = " ".join(f.deviations)
  assert "'prgt'" in devs and "ray_trainer.py:403-409" in devs and "fail at import" in devs


# ----------------------------------------------------------------------------------------------------------------
# rapo_replay (not held): which success is stored; the 256-row bound at their settings


def _pop_grpo(r):
  """Fathom-DeepResearch Eq. 3 (arXiv 2509.24107v1 Sec. 2.2): (r − μ_R)/σ_R, population σ, no ε."""
  r = np.asarray(r, np.float64)
  return (r - r.mean()) / r.std()


def test_rapo_replay_stores_the_highest_reward_success_and_it_moves_the_refilled_advantages():
  stage = R.rapo_replay(capacity=8, per_prompt=1).bind(FACTS)
  state = stage.init()
  # prompt 1: two successes, unformatted first (0.9, row 0) then formatted (1.0, row 2) (their Eq. 4 values)
  d0 = _step([1, 0, 1, 0], prompts=[1], rewards=[0.9, 0.0, 1.0, 0.1], step=0)
  _, state, m = stage.fn(d0, state)
  assert m["stored"] == 1 and state.reward[state.seq >= 0].tolist() == [np.float32(1.0)]
  np.testing.assert_array_equal(state.tokens[state.seq >= 0][0], d0.tokens[2])
  # the next visit fails: the lowest-reward row takes the stored success
  d1 = _step([0, 0, 0, 0], prompts=[1], rewards=[0.1, 0.0, 0.1, 0.0], step=1)
  out, state, m = stage.fn(d1, state)
  assert m["replayed"] == 1 and out.rewards.tolist() == [np.float32(x) for x in (0.1, 0.0, 0.1, 1.0)]
  # had the unformatted success been stored ("the most recent" is not defined among one step's rollouts), every
  # advantage of the refilled group differs (their Eq. 3 and our grpo alike) ...
  ours = _pop_grpo([0.1, 0.0, 0.1, 1.0])
  other = _pop_grpo([0.1, 0.0, 0.1, 0.9])
  assert np.all(np.abs(ours - other) > 1e-3)
  with jax.enable_x64(True):
    g1 = np.asarray(A.grpo(jnp.asarray([0.1, 0.0, 0.1, 1.0]), jnp.zeros(4, jnp.int32), num_groups=1)[0])
    g2 = np.asarray(A.grpo(jnp.asarray([0.1, 0.0, 0.1, 0.9]), jnp.zeros(4, jnp.int32), num_groups=1)[0])
  assert np.all(np.abs(g1 - g2) > 1e-3)
  # ... unless the group's other rows share one reward: standardising two values removes the stored reward's scale
  np.testing.assert_allclose(_pop_grpo([0.1, 1.0, 0.1, 0.1]), _pop_grpo([0.1, 0.9, 0.1, 0.1]), atol=1e-12)
  f = _fid("rapo_replay")
  d = _defaults("rapo_replay")
  assert d["stored row of a group with several successes"][0].startswith("the highest-reward correct fresh row")
  assert "not stated" in d["stored row of a group with several successes"][1]
  assert any("of a group's several successes ours stores the highest-reward one" in x for x in f.deviations)
  assert "Eleventh draw" in f.read


@pytest.mark.parametrize("capacity,refilled", [(4, False), (10, True)])
def test_rapo_replay_capacity_below_the_prompt_count_evicts_before_the_prompt_returns(capacity, refilled):
  """Their schedule: each prompt once per epoch. Ten prompts, each solved once in epoch 1 (two per step); in epoch
  2 prompt 0's group fails. With capacity 4 its success was evicted by the later prompts' (FIFO); with capacity ≥
  the prompt count it is kept and the group is refilled, as the paper's unbounded per-prompt buffer does."""
  stage = R.rapo_replay(capacity=capacity, per_prompt=1).bind(FACTS)
  state = stage.init()
  for s in range(5):  # epoch 1: prompts 2s, 2s + 1, one success each
    d = _step([1, 0, 1, 0], group_size=2, prompts=[2 * s, 2 * s + 1], rewards=[1, 0, 1, 0], step=s)
    _, state, _ = stage.fn(d, state)
  d = _step([0, 0, 0, 0], group_size=2, prompts=[0, 1], rewards=[0.1, 0, 0.1, 0], step=5)
  out, state, m = stage.fn(d, state)
  assert (m["replayed"] == 2) == refilled and (m["replayed"] == 0) == (not refilled)
  dev = next(x for x in _fid("rapo_replay").deviations if x.startswith("the buffer holds at most capacity"))
  assert "4,988 prompts" in dev and "capacity ≥ the number of prompts" in dev


# ----------------------------------------------------------------------------------------------------------------
# prm_clip (not held): the figure description, now cited


def test_prm_clip_matches_the_clip_figure_and_the_restatement():
  """The Clip panel (subtext.edge.nugit.net/image/4e28d956...): steps above the dashed η drop out of the clipped
  reward, steps below it appear below zero; the restatement (code index id 26158084682): min(r_process − η, 0)."""
  steps = np.array([[0.7, 0.2, 0.4, 0.8]])  # the gemini-2.0-flash reading's bar heights for s1..s4
  eta = 0.5
  theirs = np.minimum(steps - eta, 0.0)
  ours, info = rljax.rewards.prm_clip(steps, eta=eta)
  np.testing.assert_allclose(np.asarray(ours), theirs, rtol=0, atol=1e-7)
  assert (np.asarray(ours)[0, [0, 3]] == 0).all() and (np.asarray(ours)[0, [1, 2]] < 0).all()
  assert float(info["clipped_frac"]) == 0.5
  f = _fid("prm_clip")
  assert "subtext.edge.nugit.net/image/4e28d956" in f.read and "63217475182" in f.read and "26158084682" in f.read
  assert "Eleventh draw" in f.read
  assert "review 2" in _defaults("prm_clip")["eta"][1]


def test_the_five_records_print():
  for name in ("oprl", "negative_advantage_drop", "rapo_replay", "prm_clip", "tempo"):
    assert "Eleventh draw" in describe(ROWS[name])
