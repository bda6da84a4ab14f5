"""Issue #51 item 4, nineteenth draw (seed 20261224), part a: an independent re-audit of five in-full rows.

Rows drawn (five of the ten of ``random.Random(20261224).sample(rows, 10)`` over the 109 rows):
mis, passk, shortest_path_reward, tempo, difficulty_budget.

Held (3): ``mis`` (the TRL 1.9.0 PyPI wheel trl/trainer/grpo_trainer.py:2578-2621 token_mask / sequence_mask and
the verl 0.9.1 PyPI wheel rollout_corr_helper.py:197-413 / :522-657 as recorded; ours equals TRL's masks at
(0, 3.0), verl's IcePop 'L_U' and verl's token_k1 'L_U' as mis(1/U, 1/L, reweight=False) below), ``tempo``
(fatebreaker/tempo@0a1c273d verl/trainer/ppo/core_algos.py:261-352 as recorded; ours equals it at the defaults and
a one-row group is NaN there, below), ``difficulty_budget`` (LiaoMengqi/E3-RL4LLMs@7e90b8e9
e3/trainer/ray_trainer.py:391-433, :1208-1216, :1432-1448, e3/data/rl_dataset.py:125-171, scripts/train_7b.sh as
recorded; the record's two worked examples are checked against a transcription below). Not held (2), each error
fixed in the record and checked here. No implementation was changed and no implementation bug was found.

- ``shortest_path_reward`` (FALSE deviation, FALSE line pointer): the record said StepRewardManager's 'token' mode
  spreads the score "evenly over the response tokens" and 'step' puts it "on every response token". In
  xuyifan-0731/MobileRL-iclr@da92ec0c training/verl/workers/reward_manager/step.py both write
  reward_tensor[i, prompt_len : prompt_len + resp_len] (:166, :172) into a tensor shaped like responses (:147),
  prompt_len being the prompts tensor's width (:151): the values sit prompt_len columns right of the response, cut
  at the response width, and with a prompt width ≥ the response width (glm_mobilerl.yaml: 16384 vs 4096) nothing
  is written, a zero reward. The record also cited :95-170 for __call__ (it starts at :110; :95 is inside
  __init__) and :18-69 for check_uid_uuid_reward (:18-66); the rm_scores early return (:115-119) was not listed.
- ``passk`` (OMITTED): for a reward outside {0, 1} the record said only that theirs leaves that reward as its
  advantage; RUCAIBox/Passk_Training@c3ba575e code/passk_adv.py:11 also counts it as a failure (not in c), so ρ, σ
  and every other row of the group change (k = 2, [1, 0.5, 0, 0]: theirs [0.999998, 0.5, −0.333333, −0.333333],
  ours [0.894427, 0, −0.447214, −0.447214]).

Each numeric reference below is a float64 NumPy transcription of the cited lines, written for these tests.
"""
from itertools import combinations
from math import comb

import jax
import jax.numpy as jnp
import numpy as np

from rljax import objectives as O
from rljax.advantages import passk, tempo
from rljax.filters import difficulty_budget
from rljax.rewards import shortest_path_reward
from rljax.types import PolicyOutputs, TrainBatch
from _fidelity import any_deviation as _any_dev
from _fidelity import e3_rollout_n, fid as _fid, record as _record



# ----------------------------------------------------------------------------- mis (held)


def _batch(mask, old, behavior):
  b, t = mask.shape
  with jax.enable_x64(True):
    return TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask),
                      advantages=jnp.zeros((b, t)), group_id=jnp.arange(b, dtype=jnp.int32),
                      logp_old=jnp.asarray(old), logp_behavior=jnp.asarray(behavior))


def _ours_mis(mask, old, behavior, *args, **kw):
  with jax.enable_x64(True):
    w, keep, _ = O.mis(*args, **kw)(PolicyOutputs(logp=jnp.asarray(old)), _batch(mask, old, behavior))
  return np.asarray(w) * np.asarray(keep), np.asarray(keep)


def _trl_mask_ratio(old, sampling, mask, mode, clip_min=None, clip_max=3.0):
  """the TRL 1.9.0 PyPI wheel trl/trainer/grpo_trainer.py:2578-2621 (use_vllm, vllm_importance_sampling_correction):
  exp of the masked log-diff (summed per row for sequence_*), set to 0 outside [clip_min, clip_max] for *_mask."""
  d = (old - sampling) * mask
  if mode.startswith("sequence"):
    d = d.sum(-1, keepdims=True)
  r = np.exp(d)
  lo = -np.inf if clip_min is None else clip_min
  hi = np.inf if clip_max is None else clip_max
  return np.broadcast_to(np.where((r < lo) | (r > hi), 0.0, r), old.shape)


def _verl_icepop(log_ratio, mask, lower, upper, level):
  """the verl 0.9.1 PyPI wheel rollout_corr_helper.py:522-604: rollout_is_threshold 'L_U' (IcePop)."""
  m = mask.astype(np.float64)
  if level == "token":
    raw = np.exp(np.clip(log_ratio, -20.0, 20.0))
  else:
    raw = np.broadcast_to(np.exp(np.clip((log_ratio * m).sum(-1, keepdims=True), -20.0, 20.0)), log_ratio.shape)
  return np.where((raw >= lower) & (raw <= upper), raw, 0.0)


def _verl_token_k1_keep(log_ratio, lower, upper):
  """the verl 0.9.1 PyPI wheel rollout_corr_helper.py:262-316: token_k1 = −clamp(log_ratio, ±20), kept when
  log L ≤ token_k1 ≤ log U."""
  k1 = -np.clip(log_ratio, -20.0, 20.0)
  return (k1 >= np.log(lower)) & (k1 <= np.log(upper))


def _case(seed, b=6, t=9):
  rng = np.random.default_rng(seed)
  mask = rng.random((b, t)) < 0.8
  mask[:, 0] = True
  old = np.log(rng.uniform(0.05, 1.0, size=(b, t)))
  behavior = old + rng.normal(scale=0.6, size=(b, t))
  return mask, old, behavior


def test_mis_equals_trl_token_and_sequence_mask_at_trl_defaults():
  mask, old, behavior = _case(0)
  m = mask.astype(np.float64)
  for level, mode in (("token", "token_mask"), ("sequence", "sequence_mask")):
    ours, _ = _ours_mis(mask, old, behavior, 0.0, 3.0, level=level)
    theirs = _trl_mask_ratio(old, behavior, m, mode)
    assert ((theirs == 0) & mask).any() and ((theirs > 0) & mask).any()  # both kept and masked entries
    np.testing.assert_allclose(ours[mask], theirs[mask], rtol=1e-13, atol=0)


def test_mis_equals_verl_icepop_and_inverse_token_k1_bounds():
  mask, old, behavior = _case(1)
  log_ratio = np.where(mask, old - behavior, 0.0)
  for level in ("token", "sequence"):
    ours, _ = _ours_mis(mask, old, behavior, 0.5, 2.0, level=level)
    theirs = _verl_icepop(log_ratio, mask, 0.5, 2.0, level)
    np.testing.assert_allclose(ours[mask], theirs[mask], rtol=1e-13, atol=0)
  lo, hi = 0.6, 1.8  # verl rollout_rs token_k1 'L_U' = mis(1/U, 1/L, reweight=False) as a mask
  _, keep = _ours_mis(mask, old, behavior, 1 / hi, 1 / lo, level="token", reweight=False)
  theirs = _verl_token_k1_keep(log_ratio, lo, hi)
  assert (~theirs & mask).any()
  np.testing.assert_array_equal(keep[mask] > 0, theirs[mask])
  # and NOT mis(L, U): the direction matters
  _, keep_wrong = _ours_mis(mask, old, behavior, lo, hi, level="token", reweight=False)
  assert not np.array_equal(keep_wrong[mask] > 0, theirs[mask])


def test_mis_record_keeps_trl_defaults_and_inverse_bound():
  d = {k: (o, t) for k, o, t in _fid("mis").defaults}
  assert "clip_max = 3.0" in d["upper"][1] and "clip_min = None" in d["lower"][1]
  assert "'sequence_mask'" in d["level"][1]
  assert _any_dev("mis", "mis(1/U, 1/L, reweight=False)")


# ----------------------------------------------------------------------------- passk (not held: fixed)


def _authors_calc_adv(val, k):
  """RUCAIBox/Passk_Training@c3ba575e code/passk_adv.py:10-19 calc_adv (scipy comb, exact=False, as floats)."""
  val = np.asarray(val, np.float64)
  c = int((val == 1).sum())
  n = len(val)
  cb = lambda a, b: float(comb(a, b)) if a >= 0 and b >= 0 else 0.0  # scipy comb gives 0 for a < 0
  rho = 1 - cb(n - c, k) / cb(n, k)
  sigma = np.sqrt(rho * (1 - rho))
  adv_p = (1 - rho) / (sigma + 1e-6)
  adv_n = (1 - rho - cb(n - c - 1, k - 1) / cb(n - 1, k - 1)) / (sigma + 1e-6)
  new = np.where(val == 1, adv_p, val)
  return np.where(new == 0, adv_n, new)


def _ours_passk(r, k):
  with jax.enable_x64(True):
    a, _ = passk(jnp.asarray(r, jnp.float64), jnp.zeros(len(r), jnp.int32), k=k)
  return np.asarray(a)


def _brute(r, k):
  r = np.asarray(r, np.float64)
  subs = list(combinations(range(len(r)), k))
  mx = np.array([r[list(s)].max() for s in subs])
  rho, sig = mx.mean(), mx.std()
  return np.array([(np.mean([mx[j] for j, s in enumerate(subs) if i in s]) - rho) / sig for i in range(len(r))])


def test_passk_binary_equals_authors_up_to_their_sigma_plus_1e6():
  rng = np.random.default_rng(2)
  for n, k in ((8, 2), (8, 4), (16, 4), (6, 3)):
    for c in range(1, n - k + 1):
      r = np.zeros(n)
      r[rng.choice(n, c, replace=False)] = 1.0
      theirs = _authors_calc_adv(r, k)
      ours = _ours_passk(r, k)
      rho = 1 - comb(n - c, k) / comb(n, k)
      sigma = np.sqrt(rho * (1 - rho))
      np.testing.assert_allclose(ours * sigma / (sigma + 1e-6), theirs, rtol=1e-12, atol=1e-15)


def test_passk_non_binary_reward_changes_the_other_rows_too():
  r = [1.0, 0.5, 0.0, 0.0]
  theirs = _authors_calc_adv(r, 2)
  ours = _ours_passk(r, 2)
  np.testing.assert_allclose(theirs, [0.5 / 0.500001, 0.5, (0.5 - 2 / 3) / 0.500001, (0.5 - 2 / 3) / 0.500001],
                             rtol=1e-12)
  np.testing.assert_allclose(ours, _brute(r, 2), rtol=1e-12, atol=1e-14)
  np.testing.assert_allclose(ours, [0.894427, 0.0, -0.447214, -0.447214], atol=1e-6)
  # the rows with rewards 1 and 0 differ too, not only the 0.5 row
  assert abs(ours[0] - theirs[0]) > 0.1 and abs(ours[2] - theirs[2]) > 0.1
  assert _any_dev("passk", "counts it as a failure", "every other row of its group",
                  "[0.999998, 0.5, −0.333333, −0.333333]", "[0.894427, 0, −0.447214, −0.447214]", "nineteenth draw")


# ----------------------------------------------------------------------------- shortest_path_reward (not held: fixed)


def _authors_penalty(uids, uuids, scores):
  """xuyifan-0731/MobileRL-iclr@da92ec0c training/verl/workers/reward_manager/step.py:18-66 check_uid_uuid_reward."""
  groups = {}
  for uid, uu, r in zip(uids, uuids, scores):
    groups.setdefault(uid, {}).setdefault(uu, []).append(r)
  pen = {}
  for d in groups.values():
    lens = [len(rs) for rs in d.values() if any(r == 1 for r in rs)]
    for uu, rs in d.items():
      l = len(rs)
      pen[uu] = 0.0 if all(r == 0 for r in rs) or not lens else max(l - min(lens), 0) / (2 * l)
  return pen


def _authors_write(mode, final, prompt_width, resp_len, resp_width, steps=1):
  """step.py:147-174: one row of the reward tensor (shaped like responses) in each length_normalise mode."""
  out = np.zeros(resp_width)
  if mode == "token":
    out[prompt_width:prompt_width + resp_len] = final / resp_len
  elif mode == "step":
    out[prompt_width:prompt_width + resp_len] = final / steps
  else:
    out[resp_len - 1] = final
  return out


def test_shortest_path_equals_authors_no_normalisation_branch():
  # three tasks; episodes (uuid) with their step counts and scores
  eps = [("a", 3, 1.0), ("a", 5, 1.0), ("a", 4, 0.0), ("a", 6, 0.5), ("b", 2, 0.0), ("b", 7, 0.5),
         ("c", 4, 1.0), ("c", 4, 1.0), ("c", 9, 1.0)]
  uids, uuids, scores = [], [], []
  for j, (uid, l, r) in enumerate(eps):  # one row per step, each holding the episode's score
    uids += [uid] * l
    uuids += [f"e{j}"] * l
    scores += [r] * l
  pen = _authors_penalty(uids, uuids, scores)
  theirs = np.array([r - pen[f"e{j}"] for j, (_, _, r) in enumerate(eps)])
  gid = np.array([ord(u) for u, _, _ in eps])
  ours, _ = shortest_path_reward(np.array([r for *_, r in eps]), np.array([l for _, l, _ in eps], np.float64), gid)
  np.testing.assert_allclose(np.asarray(ours, np.float64), theirs, rtol=1e-6)
  np.testing.assert_allclose(theirs[:4], [1.0, 1 - 2 / 10, 0.0, 0.5 - 3 / 12])
  # the last step row of each episode carries it on its last response token (step.py:174)
  np.testing.assert_array_equal(_authors_write(None, 0.8, 5, 3, 6), [0, 0, 0.8, 0, 0, 0])


def test_shortest_path_token_and_step_modes_do_not_land_on_the_response():
  resp = _authors_write("token", 1.0, prompt_width=2, resp_len=3, resp_width=6)
  np.testing.assert_allclose(resp, [0, 0, 1 / 3, 1 / 3, 1 / 3, 0])  # shifted by the prompt width
  cut = _authors_write("step", 1.0, prompt_width=4, resp_len=3, resp_width=6, steps=2)
  np.testing.assert_allclose(cut, [0, 0, 0, 0, 0.5, 0.5])  # shifted and cut at the response width
  none = _authors_write("token", 1.0, prompt_width=16384, resp_len=40, resp_width=4096)
  assert none.sum() == 0.0  # glm_mobilerl.yaml's widths: nothing written
  assert _any_dev("shortest_path_reward", "reward_tensor[i, P : P + resp_len]", "step.py:166, 172",
                  "nothing is written", "16384", "nineteenth draw", ":115-119")
  assert not any("spread evenly over the response tokens) and" in d for d in _fid("shortest_path_reward").deviations)
  rd = _fid("shortest_path_reward").read
  assert "step.py:18-66 (check_uid_uuid_reward) and :110-174" in rd and "the record had :18-69 and :95-170" in rd


# ----------------------------------------------------------------------------- tempo (held)


def _authors_tempo(rewards, responses, mask, index, eps=1e-6):
  """fatebreaker/tempo@0a1c273d verl/trainer/ppo/core_algos.py:261-352 compute_tempo_outcome_advantage,
  norm_adv_by_std_in_grpo True (ppo_trainer.yaml:847); the GRPO pass (:299-317) then the prefix walk (:318-348)."""
  b, t = responses.shape
  r = np.asarray(rewards, np.float64)
  groups = {}
  for i in range(b):
    groups.setdefault(index[i], []).append(i)
  out = np.zeros((b, t))
  for i in range(b):  # GRPO pass
    g = groups[index[i]]
    mean, std = (0.0, 1.0) if len(g) == 1 else (r[g].mean(), r[g].std(ddof=1))
    out[i] = (r[i] - mean) / (std + eps) * mask[i]
  for i in range(b):
    prev = groups[index[i]]
    gm = r[prev].mean()
    gs = r[prev].std(ddof=1) if len(prev) > 1 else np.nan
    for j in range(t):
      if mask[i, j] == 0:
        break
      branch = [k for k in prev if responses[i, j] == responses[k, j]]
      out[i, j] = (r[i] - gm + r[branch].mean() - r[prev].mean()) / (gs + eps)
      if len(prev) == 1:
        out[i, j:] = out[i, j]
        break
      prev = branch
  return out * mask


def test_tempo_equals_authors_at_the_defaults_and_singleton_is_nan_there():
  rng = np.random.default_rng(5)
  b, t, pad = 14, 7, 0
  tokens = rng.integers(1, 3, size=(b, t))  # a small vocabulary: shared prefixes and branches
  tokens[:, 0] = 1
  lens = rng.integers(2, t + 1, size=b)
  mask = (np.arange(t)[None, :] < lens[:, None]).astype(np.float64)
  tokens = np.where(mask > 0, tokens, pad)
  gid = np.array([0] * 7 + [1] * 6 + [2])
  r = rng.integers(0, 2, size=b).astype(np.float64)
  r[13] = 1.0
  theirs = _authors_tempo(r, tokens, mask, gid)
  with jax.enable_x64(True):
    ours, info = tempo(jnp.asarray(r), jnp.asarray(tokens), jnp.asarray(mask > 0), jnp.asarray(gid))
  ours = np.asarray(ours)
  assert float(info["num_branch_tokens"]) > 0
  np.testing.assert_allclose(ours[:13], theirs[:13], rtol=1e-12, atol=1e-12)
  assert np.isnan(theirs[13]).all() and np.all(ours[13] == 0)  # one-row group: theirs NaN on every token, ours 0
  d = {k: (o, tt) for k, o, tt in _fid("tempo").defaults}
  assert "NaN on every token" in d["singleton group"][1]


# ----------------------------------------------------------------------------- difficulty_budget (held)


def test_difficulty_budget_record_examples_against_e3_transcription():
  assert list(e3_rollout_n([0, 0.1, 0.1, 0.9], 32, 4, 12)) == [4, 6, 5, 17]
  ours, _ = difficulty_budget(np.array([1.0, 0.9, 0.9, 0.1]), budget=32, min_per_prompt=4, max_per_prompt=12)
  assert list(ours) == [4, 8, 8, 12]
  assert _any_dev("difficulty_budget", "[4, 6, 5, 17]", "[4, 8, 8, 12]")
  # epoch 1 of their scripts (min = max = rollout.n = 8): uniform, whatever the ranks
  assert list(e3_rollout_n([0.3, 0.9, 0.1, 0.5], 32, 8, 8)) == [8, 8, 8, 8]
  d = {k: (o, t) for k, o, t in _fid("difficulty_budget").defaults}
  assert "rollout.n 8 at epoch 1" in d["min_per_prompt"][1] and "n_low 4" in d["min_per_prompt"][1]


def test_records_print():
  for name in ("mis", "passk", "shortest_path_reward", "tempo", "difficulty_budget"):
    assert name in _record(name)
