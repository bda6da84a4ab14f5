"""The seeds' agentic techniques (issue #20 item 5) against independent references, and the turn-level rows fed
with turn ids exactly as the environments' transcripts produce them (scripted FrozenLake and TicTacToe episodes
through ``encode_episode`` / ``stack_rows`` / ``turn_arrays``).

References: hand-derived values, float64 NumPy loops written from the docstring equations, brute force over the
buffer, and invariants (a shorter success scores higher; the tokens of turn k decode to the model's k-th turn).
"""
import math

import jax
import numpy as np
import pytest

from rljax import advantages as A
from rljax import envs
from rljax import replay as R
from rljax import rewards as W
from rljax.recipes import stage
from rljax.replay import _buffer as B
from rljax.stages import RunFacts, StepData, probe_step

EPS = 1e-6


class CharTok:
  """One token per character (as docs/agents.md's example)."""
  bos_id = 1

  def encode(self, text):
    return [ord(c) for c in text]


def _grpo64(r, gid, valid, eps=EPS):
  """float64 GRPO: (r − mean_g)/(std_g(ddof=1) + eps) over valid rows; groups of one valid row get 0."""
  out = np.zeros(len(r))
  for g in np.unique(gid):
    rows = np.flatnonzero((gid == g) & valid)
    if rows.size < 2:
      continue
    x = np.asarray(r, np.float64)[rows]
    out[rows] = (x - x.mean()) / (x.std(ddof=1) + eps)
  return out


# ----------------------------------------------------------------------------- scripted episodes

BOARD = ("SFF", "FHF", "FFG")
LAKE_SCRIPTS = (
    ["down\n", "down\n", "right\n", "right\n"],              # a shortest path: goal in 4
    ["up\n", "down\n", "down\n", "right\n", "right\n"],       # bumps the border first: goal in 5
    ["right\n", "down\n"],                                    # into the hole at (1, 1): 0 in 2
    ["jump\n", "right\n", "right\n", "down\n", "down\n"],    # an invalid turn first: goal in 5
)


def _lake_episodes():
  env, config = envs.FrozenLakeEnv(), envs.EpisodeConfig(stop_strings=("\n",), max_turns=6)
  eps = [envs.start(env, BOARD, seed) for seed in range(len(LAKE_SCRIPTS))]
  for k in range(max(map(len, LAKE_SCRIPTS))):
    eps = envs.step_batch(env, eps, [s[k] if k < len(s) else None for s in LAKE_SCRIPTS], config)
  return eps, config.max_turns


def _rows(episodes, role=None):
  rows = [envs.encode_episode(ep, CharTok(), role=role)[0] for ep in episodes]
  return envs.stack_rows(rows, length=max(len(r.tokens) for r in rows))


def test_scripted_lake_episodes_are_what_the_tests_assume():
  eps, _ = _lake_episodes()
  assert [ep.turns for ep in eps] == [4, 5, 2, 5]
  assert [ep.episode_reward for ep in eps] == [1.0, 1.0, 0.0, 1.0]
  assert len(envs.shortest_path(BOARD)) == 4


def test_turn_ids_of_real_transcripts_select_each_model_turn():
  """The invariant every turn-level row relies on: loss tokens with turn id k are exactly the model's k-th turn,
  observations carry the turn that caused them but no loss, the prompt and padding are -1."""
  eps, m = _lake_episodes()
  batch = _rows(eps)
  for b, ep in enumerate(eps):
    model = [s.text for s in ep.segments if s.source == "model"]
    for k, text in enumerate(model):
      sel = batch["loss_mask"][b] & (batch["turn_ids"][b] == k)
      assert "".join(chr(t) for t in batch["tokens"][b][sel]) == text
    assert np.all(batch["turn_ids"][b][~batch["loss_mask"][b]] < len(model))
    assert batch["turn_ids"][b][0] == -1  # BOS / opening prompt
  arrays = envs.turn_arrays(eps, m)
  assert arrays["turn_valid"].sum(1).tolist() == [ep.turns for ep in eps]


# ----------------------------------------------------------------------------- the turn-level rows on real ids


def _step_mix_ref(turn_r, tv, turn_ids, mask, ep_r, gid, w, gamma):
  """float64 loop: discounted returns over valid turns, standardised per (group, turn index), mixed with GRPO."""
  b, m = turn_r.shape
  g = np.zeros((b, m))
  for i in range(b):
    run = 0.0
    for k in reversed(range(m)):
      if tv[i, k]:
        run = turn_r[i, k] + gamma * run
        g[i, k] = run
  z = np.zeros((b, m))
  for grp in np.unique(gid):
    for k in range(m):
      rows = np.flatnonzero((gid == grp) & tv[:, k])
      if rows.size:
        x = g[rows, k]
        z[rows, k] = (x - x.mean()) / ((x.std(ddof=1) if rows.size > 1 else 0.0) + EPS)
  ep = _grpo64(ep_r, gid, np.ones(b, bool))
  out = np.zeros(turn_ids.shape)
  for i in range(b):
    for t in range(turn_ids.shape[1]):
      if mask[i, t]:
        k = turn_ids[i, t]
        out[i, t] = (w * z[i, k] if 0 <= k < m else 0.0) + (1 - w) * ep[i]
  return out


def test_step_episode_mix_segment_and_modulation_on_frozenlake_turn_ids():
  eps, m = _lake_episodes()
  batch, arr = _rows(eps), envs.turn_arrays(eps, m)
  # an intermediate per-turn reward so that the per-turn statistics are not degenerate
  turn_r = arr["turn_rewards"] + 0.1 * np.arange(m)[None, :] * arr["turn_valid"]
  gid, mask, tv = np.zeros(4, np.int32), batch["loss_mask"], arr["turn_valid"]
  adv, _ = A.step_episode_mix(turn_r, batch["turn_ids"], arr["episode_rewards"], gid, mask=mask, step_weight=0.3,
                              gamma=0.9, turn_valid=tv)
  ref = _step_mix_ref(turn_r, tv, batch["turn_ids"], mask, arr["episode_rewards"], gid, 0.3, 0.9)
  np.testing.assert_allclose(adv, ref, rtol=1e-5, atol=1e-6)
  assert np.all(np.asarray(adv)[~mask] == 0)  # observations (turn id >= 0, no loss) and the prompt get nothing

  seg, _ = A.segment(turn_r, batch["turn_ids"], gid, mask=mask, segment_valid=tv)
  ref = np.zeros(mask.shape)
  for k in range(m):  # per-turn GRPO over the episodes that have turn k, routed to turn k's tokens
    a_k = _grpo64(turn_r[:, k], gid, tv[:, k])
    ref += np.where(mask & (batch["turn_ids"] == k), a_k[:, None], 0.0)
  np.testing.assert_allclose(seg, ref, rtol=1e-5, atol=1e-6)

  ep_adv = _grpo64(arr["episode_rewards"], gid, np.ones(4, bool))
  mod, info = A.sign_preserving_modulation(ep_adv.astype(np.float32), turn_r, batch["turn_ids"], gid, mask=mask,
                                           lam=0.5, eps_w=1.0, signed=False, norm="turn_index", turn_valid=tv)
  z = np.zeros(turn_r.shape)
  for k in range(m):
    rows = np.flatnonzero(tv[:, k])
    if rows.size:
      z[rows, k] = (turn_r[rows, k] - turn_r[rows, k].mean()) / (turn_r[rows, k].std() + EPS)
  ref = np.zeros(mask.shape)
  for i in range(4):
    for t in np.flatnonzero(mask[i]):
      ref[i, t] = ep_adv[i] * (1 + 0.5 * np.tanh(z[i, batch["turn_ids"][i, t]]))
  np.testing.assert_allclose(mod, ref, rtol=1e-5, atol=1e-6)
  assert np.all(np.sign(np.asarray(mod))[mask] == np.sign(ep_adv)[:, None].repeat(mask.shape[1], 1)[mask])


def _ttt_games():
  env, config = envs.TicTacToeEnv(), envs.EpisodeConfig(stop_strings=("\n",), max_turns=9)
  scripts = (["1\n", "4\n", "2\n", "5\n", "3\n"],   # X wins on the top row
             ["5\n", "1\n", "9\n", "2\n", "4\n", "3\n"])  # O wins on the top row
  games = []
  for s in scripts:
    ep = envs.start(env, None, 0)
    for a in s:
      ep = envs.advance(env, ep, a, config)
    games.append(ep)
  return games, config.max_turns


def test_role_conditioned_baseline_on_self_play_rows_per_role():
  """SPIRAL RAE on the rows a self-play runner builds: one row per (game, role), key = role, the role's outcome
  as return; the EMA baselines against a hand-derived two-batch reference."""
  games, m = _ttt_games()
  assert [g.info["role_rewards"] for g in games] == [{"X": 1.0, "O": -1.0}, {"O": 1.0, "X": -1.0}]
  rets, keys = [], []
  for role, key in (("X", 0), ("O", 1)):
    rows = _rows(games, role=role)
    arr = envs.turn_arrays(games, m, role=role)
    for b, g in enumerate(games):  # the row trains exactly this role's moves
      mine = [s.text for s in g.segments if s.source == "model" and s.role == role]
      assert "".join(chr(t) for t in rows["tokens"][b][rows["loss_mask"][b]]) == "".join(mine)
    assert arr["turn_valid"].sum(1).tolist() == [sum(r == role for r in g.roles) for g in games]
    rets += list(arr["episode_rewards"])
    keys += [key] * len(games)
  rets, keys = np.asarray(rets, np.float32), np.asarray(keys, np.int32)
  assert rets.tolist() == [1.0, -1.0, -1.0, 1.0]  # zero-sum: each game's two rows sum to 0
  est = A.role_ema_baseline(num_keys=2, decay=0.5)
  state = est.init()
  adv1, _, state = est.update(state, rets, keys)
  np.testing.assert_allclose(adv1, rets)  # baselines start at 0 and are read before the update
  np.testing.assert_allclose(state.baseline, [0.5 * 0 + 0.5 * 0.0, 0.0])  # each role's mean return is 0 here
  rets2 = np.asarray([1.0, 1.0, -1.0, -1.0], np.float32)  # X won both games of the next batch
  adv2, _, state = est.update(state, rets2, keys)
  np.testing.assert_allclose(adv2, rets2 - 0.0)
  np.testing.assert_allclose(state.baseline, [0.5 * 0.0 + 0.5 * 1.0, 0.5 * 0.0 + 0.5 * -1.0])
  adv3, _, _ = est.update(state, rets2, keys)
  np.testing.assert_allclose(adv3, rets2 - np.array([0.5, 0.5, -0.5, -0.5]))


# ----------------------------------------------------------------------------- MobileRL shortest-path adjustment


def test_shortest_path_reward_hand_derived_on_frozenlake():
  eps, _ = _lake_episodes()
  r = np.array([ep.episode_reward for ep in eps])
  steps = np.array([ep.turns for ep in eps])
  out, info = W.shortest_path_reward(r, steps, np.zeros(4, int))
  # L = 4 (the fastest success); 5-turn successes: 1 − (5 − 4)/(2·5) = 0.9; the failure keeps 0
  np.testing.assert_allclose(out, [1.0, 0.9, 0.0, 0.9], rtol=1e-6)
  np.testing.assert_allclose(info["reference"], [4, 4, 4, 4])
  true = np.full(4, len(envs.shortest_path(BOARD)))
  np.testing.assert_allclose(W.shortest_path_reward(r, steps, np.zeros(4, int), shortest=true)[0], out)
  # (1 + L/l)/2 for a success, for any l >= L
  for l in range(4, 12):
    got = W.shortest_path_reward([1.0, 1.0], [4, l], [0, 0])[0][1]
    assert math.isclose(got, (1 + 4 / l) / 2, rel_tol=1e-6)


def test_shortest_path_reward_groups_invalid_rows_and_partial_rewards():
  r = np.array([1.0, 1.0, 0.5, 0.0, 1.0, 0.5, 1.0])
  steps = np.array([3, 6, 9, 2, 2, 4, 1])
  gid = np.array([0, 0, 0, 0, 1, 1, 1])
  valid = np.array([True, True, True, True, True, True, False])
  out, info = W.shortest_path_reward(r, steps, gid, valid=valid)
  # group 0: L = 3; the partial reward is adjusted too (authors: any non-zero reward); group 1: L = 2 (the invalid
  # 1-step success is neither a reference nor changed)
  exp = [1.0, 1.0 - 3 / 12, 0.5 - 6 / 18, 0.0, 1.0, 0.5 - 2 / 8, 1.0]
  np.testing.assert_allclose(out, exp, rtol=1e-6)
  out2, _ = W.shortest_path_reward([0.5, 0.0], [3, 5], [0, 0])  # no success in the group: unchanged
  np.testing.assert_allclose(out2, [0.5, 0.0])
  # invariant: within a group of successes, fewer steps never scores lower
  rng = np.random.default_rng(0)
  s = rng.integers(1, 20, 30)
  o, _ = W.shortest_path_reward(np.ones(30), s, np.zeros(30, int))
  order = np.argsort(s)
  assert np.all(np.diff(o[order]) <= 1e-7)
  with pytest.raises(ValueError, match="num_steps"):
    W.shortest_path_reward([1.0], [-1], [0])
  with pytest.raises(ValueError, match="shortest"):
    W.shortest_path_reward([1.0], [2], [0], shortest=[0])


def test_shortest_path_reward_stage_counts_turns_from_the_step_mask():
  d = probe_step(steps=4).replace(rewards=np.array([1.0, 1.0, 1.0, 0.0], np.float32),
                                  step_mask=np.array([[1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, 0], [1, 0, 0, 0]], bool))
  st = stage("shortest_path_reward")
  assert st.needs == {"step_rewards"}
  out, m = st.fn(d)
  np.testing.assert_allclose(out, [1.0, 1.0 - 2 / 8, 1.0, 0.0])  # groups (0, 1) with L = 2 and (2, 3) with L = 3
  assert m["mean_penalty"] == pytest.approx(0.25 / 4)


# ----------------------------------------------------------------------------- SPEAR tool-call reward


def test_tool_call_reward_cosine_decay_hand_derived():
  r = np.array([1.0, 0.0, 0.0, 1.0])
  n = np.array([0, 1, 3, 2])
  for t, w in ((0, 1.0), (25, 0.5 * (1 + math.cos(math.pi / 4))), (50, 0.5), (100, 0.0), (400, 0.0)):
    out, info = W.tool_call_reward(r, n, t, coef=0.4, decay_steps=100, max_calls=1)
    np.testing.assert_allclose(out, r + 0.4 * w * (n > 0), rtol=1e-6, atol=1e-7)
    assert info["weight"] == pytest.approx(0.4 * w)
  out, _ = W.tool_call_reward(r, n, 7, coef=1.0, decay_steps=100, max_calls=2)
  np.testing.assert_allclose(out, r + W.cosine_weight(7, 100) * np.minimum(n, 2) / 2, rtol=1e-6)
  out, _ = W.tool_call_reward(r, n, 10_000, schedule="constant", max_calls=1)
  np.testing.assert_allclose(out, r + (n > 0))
  assert W.cosine_weight(50, 100, increasing=True) == pytest.approx(0.5)
  with pytest.raises(ValueError, match="schedule"):
    W.tool_call_reward(r, n, 0, schedule="linear")


def test_tool_call_reward_stage_counts_calls_in_the_model_turns():
  turns = (("<call>print(1)</call>", "<answer>3</answer>"), ("<answer>1</answer>",),
           ("<call>a</call><call>b</call>",), ("",))
  d = probe_step().replace(turns=turns, step=50)
  assert W.count_calls(turns).tolist() == [1, 0, 2, 0]
  out, m = stage("tool_call_reward", coef=1.0, decay_steps=100, max_calls=2, count="calls").fn(d)
  np.testing.assert_allclose(out, d.rewards + 0.5 * np.array([0.5, 0.0, 1.0, 0.0]))
  assert m["call_rate"] == 0.5 and m["weight"] == pytest.approx(0.5)
  with pytest.raises(ValueError, match="count"):
    stage("tool_call_reward", count="tokens")


def _spear_episode_reward(score, episode_lengths, global_steps, use_toolcall_reward="cosine", max_toolcall_steps=200):
  """SPEAR's EpisodeRewardManager bonus (verl-agent/agent_system/reward_manager/episode.py L143-159), float64."""
  if use_toolcall_reward == "none":
    return score
  if use_toolcall_reward == "constant":
    return score + min(1.0, episode_lengths * 0.1) * 1
  if global_steps <= max_toolcall_steps:
    score_toolcall = min(1.0, episode_lengths * 0.1)
    score_toolcall *= (np.cos((global_steps / max_toolcall_steps) * np.pi) + 1) / 2
    score += max(0, score_toolcall)
  return score


def test_tool_call_reward_defaults_equal_the_authors_code_in_float64():
  rng = np.random.default_rng(3)
  r = rng.uniform(-1.0, 1.0, 9)
  n = np.array([0, 1, 2, 3, 5, 9, 10, 11, 40])
  for t in (0, 1, 37, 100, 150, 199, 200, 201, 5000):
    out, info = W.tool_call_reward(r, n, t)  # defaults: coef 1, K = 10, T = 200, cosine
    ref = np.array([_spear_episode_reward(float(r[i]), int(n[i]), t) for i in range(r.size)])
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(info["bonus"], ref - r, rtol=1e-12, atol=1e-15)
  out, _ = W.tool_call_reward(r, n, 10_000, schedule="constant")
  ref = np.array([_spear_episode_reward(float(r[i]), int(n[i]), 0, "constant") for i in range(r.size)])
  np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-15)
  # the old default (T = 100, K = 1: any call) would give the bonus 1.0 to a 1-step episode at t = 0; the authors 0.1
  assert W.tool_call_reward(np.zeros(1), np.ones(1), 0)[0][0] == pytest.approx(0.1, abs=1e-15)
  assert W.tool_call_reward(np.zeros(1, np.float32), np.ones(1), 0)[0].dtype == np.float32


def test_tool_call_reward_stage_counts_environment_steps_by_default():
  turns = (("<call>print(1)</call>", "<answer>3</answer>"), ("<answer>1</answer>",),
           ("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"), ("",))
  for dt in (np.float32, np.float64):
    d = probe_step().replace(turns=turns, step=50, rewards=np.array([1.0, 0.0, 1.0, 0.0], dt))
    out, m = stage("tool_call_reward").fn(d)
    ref = np.array([_spear_episode_reward(float(d.rewards[i]), len(turns[i]), 50) for i in range(4)])
    assert out.dtype == dt
    np.testing.assert_allclose(out, ref, rtol=1e-12 if dt == np.float64 else 1e-6)
    assert m["call_rate"] == 1.0


# ----------------------------------------------------------------------------- OPRL


def test_oprl_equals_a_float64_reference_on_frozenlake_turn_ids():
  eps, m = _lake_episodes()
  batch, arr = _rows(eps), envs.turn_arrays(eps, m)
  rng = np.random.default_rng(5)
  mask, tid, tv = batch["loss_mask"], batch["turn_ids"], arr["turn_valid"]
  logp = -rng.uniform(0.1, 3.0, mask.shape)
  ref_lp = -rng.uniform(0.1, 3.0, mask.shape)
  logp[~mask] = np.nan  # only model tokens are read
  gid = np.array([0, 0, 1, 1], np.int32)
  adv, info = A.oprl(logp.astype(np.float32), ref_lp.astype(np.float32), tid, arr["episode_rewards"], gid,
                     mask=mask, turn_valid=tv, beta=0.5, step_weight=0.4, gamma=0.8)
  step_r = np.zeros((4, m))
  for i in range(4):
    for t in np.flatnonzero(mask[i]):
      step_r[i, tid[i, t]] += 0.5 * (logp[i, t] - ref_lp[i, t])
  np.testing.assert_allclose(info["step_rewards"], step_r, rtol=1e-5, atol=1e-5)
  ref = _step_mix_ref(step_r, tv, tid, mask, arr["episode_rewards"], gid, 0.4, 0.8)
  np.testing.assert_allclose(adv, ref, rtol=1e-4, atol=1e-5)
  # step_weight = 0: episode-level GRPO on every model token; π = π_ref: no step signal
  adv0, _ = A.oprl(np.nan_to_num(logp).astype(np.float32), ref_lp.astype(np.float32), tid, arr["episode_rewards"],
                   gid, mask=mask, turn_valid=tv, step_weight=0.0)
  np.testing.assert_allclose(adv0, _grpo64(arr["episode_rewards"], gid, np.ones(4, bool))[:, None] * mask, atol=1e-6)
  same, info = A.oprl(ref_lp, ref_lp, tid, arr["episode_rewards"], gid, mask=mask, turn_valid=tv, step_weight=1.0)
  assert np.all(np.asarray(info["step_rewards"]) == 0) and np.all(np.asarray(same) == 0)
  with pytest.raises(ValueError, match="beta"):
    A.oprl(ref_lp, ref_lp, tid, arr["episode_rewards"], gid, mask=mask, turn_valid=tv, beta=0.0)


def test_oprl_has_no_gradient_and_its_stage_reads_the_loop_inputs():
  logp = np.log(np.array([[0.5, 0.5, 0.25]], np.float32))
  g = jax.grad(lambda lp: A.oprl(lp, np.zeros((1, 3)), np.array([[0, 0, 1]]), np.ones(1), np.zeros(1, np.int32),
                                 mask=np.ones((1, 3), bool), turn_valid=np.ones((1, 2), bool),
                                 step_weight=1.0)[0].sum())(logp)
  assert np.all(np.asarray(g) == 0)
  st = stage("oprl", beta=2.0)
  assert st.needs == {"logp_old", "logp_ref", "turn_ids", "step_rewards"}
  d = probe_step(steps=3)
  d = d.replace(logp_old=np.full(d.tokens.shape, -0.5, np.float32), logp_ref=np.full(d.tokens.shape, -1.0,
                                                                                   np.float32))
  adv, info = st.fn(d)
  mask = d.completion_mask & d.valid[:, None]
  exp, _ = A.oprl(d.logp_old, d.logp_ref, d.turn_ids, d.rewards, d.group_id, mask=mask, turn_valid=d.step_mask,
                  beta=2.0, num_groups=2)
  np.testing.assert_allclose(adv, exp)
  np.testing.assert_allclose(np.asarray(info["step_rewards"])[1], [1.0, 1.0, 0.0])  # 2·(−0.5 + 1) per turn token


def _istar_step_rewards(logp_prm, old_log_probs, mask, turn_ids, beta, m):
  """The iStar step reward (github.com/Tongyi-ConvAI/Tongyi-Character, CharacterRL-iStar/istar/dp_rm.py
  ``_forward_micro_batch`` with lambda = 0, step_granularity="step", no ref_module): ``q = rm_log_labels −
  old_log_probs`` on a step's response tokens, ``r = q·beta`` summed over the step, float64. A step = a turn."""
  b = logp_prm.shape[0]
  out = np.zeros((b, m))
  for i in range(b):
    for k in range(m):
      tok = mask[i] & (turn_ids[i] == k)
      q = logp_prm[i, tok] - old_log_probs[i, tok]
      out[i, k] = (q * beta).sum()
  return out


def test_oprl_paper_reward_from_prm_log_probs_in_float64():
  """float64 in gives float64 out; logp = a PRM's log-probs, logp_ref = π_old is the paper's β·log π_φ/π_θold."""
  eps_, m = _lake_episodes()
  batch, arr = _rows(eps_), envs.turn_arrays(eps_, m)
  rng = np.random.default_rng(9)
  mask, tid, tv = batch["loss_mask"], batch["turn_ids"], arr["turn_valid"]
  prm = -rng.uniform(0.1, 3.0, mask.shape)
  old = -rng.uniform(0.1, 3.0, mask.shape)
  prm[~mask] = np.nan
  gid = np.array([0, 0, 1, 1], np.int32)
  ep_r = np.asarray(arr["episode_rewards"], np.float64) + rng.normal(0, 0.3, 4)
  with jax.enable_x64(True):
    adv, info = A.oprl(prm, old, tid, ep_r, gid, mask=mask, turn_valid=tv, beta=0.05, step_weight=0.4, gamma=0.8)
    assert adv.dtype == np.float64 and info["step_rewards"].dtype == np.float64 and info["returns"].dtype == np.float64
    step_r = _istar_step_rewards(prm, old, mask, tid, 0.05, m) * tv
    np.testing.assert_allclose(np.asarray(info["step_rewards"]), step_r, rtol=1e-12, atol=1e-15)
    ref = _step_mix_ref(step_r, tv, tid, mask, ep_r, gid, 0.4, 0.8)
    np.testing.assert_allclose(np.asarray(adv), ref, rtol=1e-9, atol=1e-12)
    # the stage: prm="policy" (default) reads β·log π_old/π_ref; prm="extras" the PRM's log-probs over π_old
    d = probe_step(steps=3)
    lp_old = np.full(d.tokens.shape, -0.5)
    d = d.replace(logp_old=lp_old, logp_ref=np.full(d.tokens.shape, -1.0), rewards=np.asarray(d.rewards, np.float64),
                  extras={"logp_prm": np.full(d.tokens.shape, -0.25)})
    st = stage("oprl", prm="extras", beta=2.0)
    assert st.needs == {"logp_old", "turn_ids", "step_rewards"}
    a_x, i_x = st.fn(d)
    a_p, i_p = stage("oprl", beta=2.0).fn(d)
    assert a_x.dtype == np.float64 and a_p.dtype == np.float64
    np.testing.assert_allclose(np.asarray(i_x["step_rewards"])[1], [0.5, 0.5, 0.0], rtol=1e-12)  # 2·(−0.25 + 0.5)
    np.testing.assert_allclose(np.asarray(i_p["step_rewards"])[1], [1.0, 1.0, 0.0], rtol=1e-12)  # 2·(−0.5 + 1)
  with pytest.raises(ValueError, match="logp_prm"):
    stage("oprl", prm="extras").fn(d.replace(extras={}))
  with pytest.raises(ValueError, match="prm"):
    stage("oprl", prm="teacher")


# ----------------------------------------------------------------------------- SPEAR self-imitation replay

T = 5
FACTS = RunFacts(num_prompts=2, group_size=4, max_new_tokens=3, seq_len=T)


def _data(rewards, advantages, *, step, valid=None):
  rewards = np.asarray(rewards, np.float32)
  b = rewards.size
  cm = np.zeros((b, T), bool)
  cm[:, 2:] = True
  tokens = np.repeat((100 * step + np.arange(b) + 1)[:, None], T, 1).astype(np.int32)
  return StepData(tokens=tokens, prompt_mask=~cm, completion_mask=cm, group_id=np.arange(b, dtype=np.int32) // 4,
                  num_groups=b // 4, valid=np.ones(b, bool) if valid is None else np.asarray(valid, bool),
                  lengths=cm.sum(1).astype(np.int32), completions=("",) * b, problems=(None,) * b,
                  prompt_index=np.arange(b, dtype=np.int64) // 4, rewards=rewards, correct=(rewards > 0.5) * 1.0,
                  logp_behavior=np.full((b, T), -1.0 - step, np.float32) * cm, max_new_tokens=3, step=step,
                  advantages=np.asarray(advantages, np.float32))


def test_spear_plan_matches_a_brute_force_reference():
  rng = np.random.default_rng(1)
  for _ in range(20):
    buf = B.empty_buffer(8, T)
    used = rng.random(8) < 0.8
    buf.prompt_index[used] = 0
    buf.seq[used] = rng.permutation(100)[:used.sum()]
    buf.step[:] = rng.integers(0, 12, 8)
    rec = np.where(used, rng.choice([-1.0, 0.0, 0.5, 1.0, 2.0], 8), -np.inf)
    free = rng.choice(16, rng.integers(0, 6), replace=False)
    limit = int(rng.integers(0, 5))
    rows, slots = B.spear_plan(free, rec, buf, step=12, max_age=5, limit=limit)
    cand = [s for s in range(8) if used[s] and 12 - buf.step[s] <= 5 and rec[s] > 0]
    cand.sort(key=lambda s: (-rec[s], -buf.seq[s]))
    n = min(limit, len(free), len(cand))
    assert slots.tolist() == cand[:n] and rows.tolist() == sorted(free)[:n]


def test_spear_stage_stores_recalibrates_and_replays_into_gradient_free_rows():
  st = R.spear_replay(capacity=8, threshold=0.5, ratio=0.5, ramp_steps=4, max_age=2, baseline="reward").bind(FACTS)
  state = st.init()
  # step 0: group 0 learns (rows 0 and 1 are above the threshold), group 1 has no signal
  d0 = _data([1, 1, 0, 0, 0, 0, 0, 0], [0.9, 0.6, -0.7, -0.8, 0, 0, 0, 0], step=0)
  out0, state, m0 = st.fn(d0, state)
  assert m0["stored"] == 2 and m0["replayed"] == 0  # an empty buffer replays nothing
  assert m0["coef"] == 0.0 and m0["baseline"] == 0.0  # median of {1, 1, 0 x 6}
  np.testing.assert_array_equal(out0.advantages, d0.advantages)  # nothing replayed: the batch is unchanged
  # step 2: baseline = median of the 16 rewards seen = 0; both stored rows have A' = 1 − 0 > 0; the gradient-free
  # rows are 4..7 (zero advantages) and row 3 (filtered out); limit floor(0.5·8) = 4; c(2) = ½(1 − cos(π/2)) = ½
  d2 = _data([0, 0, 0, 1, 0, 0, 0, 0], [0.5, -0.5, 0.5, 0, 0, 0, 0, 0], step=2,
             valid=[1, 1, 1, 0, 1, 1, 1, 1])
  out2, state, m2 = st.fn(d2, state)
  assert m2["replayed"] == 2 and m2["coef"] == pytest.approx(0.5) and m2["baseline"] == 0.0
  replayed = np.flatnonzero(out2.extras["replay_mask"])
  assert replayed.tolist() == [3, 4]  # free rows in ascending order
  assert sorted(out2.tokens[replayed, 0].tolist()) == [1, 2]  # step 0's rows 0 and 1 (equal A': newest first)
  np.testing.assert_allclose(out2.advantages[replayed], 0.5 * 1.0 * d2.completion_mask[replayed])
  np.testing.assert_allclose(out2.logp_behavior[replayed], d0.logp_behavior[:2])  # their stored behaviour log-probs
  assert out2.valid.all() and m2["stored"] == 0  # nothing fresh above the threshold; replayed rows are not stored
  np.testing.assert_array_equal(out2.advantages[:3], d2.advantages[:3, None] * d2.completion_mask[:3])
  # step 3: step 0's rows are 3 > max_age = 2 steps old: they leave the buffer, nothing is replayed
  _, state, m3 = st.fn(_data([0] * 8, [0] * 8, step=3), state)
  assert m3["aged_out"] == 2 and m3["replayed"] == 0 and m3["buffer_rows"] == 0


def test_spear_advantage_filter_drops_stored_rows_no_better_than_the_median():
  st = R.spear_replay(capacity=8, threshold=0.5, ratio=1.0, ramp_steps=1, max_age=100, baseline_size=8,
                      baseline="reward").bind(FACTS)
  state = st.init()
  _, state, _ = st.fn(_data([1, 0, 0, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0], step=0), state)
  out, state, m = st.fn(_data([0.5] * 8, [0] * 8, step=1), state)  # median 0.5: A' = 1 − 0.5 = 0.5 > 0
  assert m["replayed"] == 1 and m["coef"] == 1.0 and m["baseline"] == 0.5
  np.testing.assert_allclose(out.advantages[0], 0.5 * out.completion_mask[0])
  _, state, m = st.fn(_data([1.0] * 8, [0] * 8, step=2), state)  # the window is now all ones: A' = 0 is filtered
  assert m["baseline"] == 1.0 and m["replayed"] == 0 and m["buffer_rows"] == 1


def test_spear_decay_recalibration_and_state_through_a_checkpoint(tmp_path):
  buf = B.empty_buffer(3, T)
  buf.prompt_index[:2] = 0
  buf.completion_mask[:2, 2:] = True
  buf.advantages[0, 2:] = [1.0, 2.0, 3.0]
  buf.advantages[1, 2:] = -1.0
  buf.step[:2] = [1, 3]
  buf.reward[:2] = [1.0, 0.25]
  rec = B.spear_recalibrate(buf, 0.5, step=4, mode="decay", decay=0.5)
  np.testing.assert_allclose(rec[:2], [2.0 * 0.5 ** 3, -1.0 * 0.5])
  assert rec[2] == -np.inf
  np.testing.assert_allclose(B.spear_recalibrate(buf, 0.5, step=4)[:2], [0.5, -0.25])
  from rljax.train._checkpoint import Checkpointer  # pylint: disable=import-outside-toplevel
  st = R.spear_replay(capacity=6, threshold=0.0).bind(FACTS)
  state = st.init()
  rng = np.random.default_rng(2)
  for s in range(3):
    _, state, _ = st.fn(_data(rng.random(8), rng.normal(size=8), step=s), state)
  ckpt = Checkpointer(str(tmp_path / "ckpt"))
  ckpt.save(3, {"stages": {"advantage": {}, "prompt_filters": {}, "replay": {st.name: state}}}, {"step": 3},
            parts=True)
  ckpt.close()
  template = {"stages": {"advantage": {}, "prompt_filters": {}, "replay": {st.name: st.init()}}}
  got = Checkpointer(str(tmp_path / "ckpt")).restore(template, parts=True)[0]["stages"]["replay"][st.name]
  for a, b in zip(jax.tree_util.tree_leaves(state), jax.tree_util.tree_leaves(got)):
    assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
  assert int(got.count) == 6  # 3 steps x 2 group means (baseline="group")


@pytest.mark.parametrize("kwargs", [{"ratio": 0.0}, {"ramp_steps": 0}, {"recalibrate": "mean"}, {"decay": 0.0},
                                    {"baseline": "x"},
                                    {"threshold": float("nan")}, {"logp_old": "proximal"}])
def test_spear_bad_hyper_parameters_name_the_argument(kwargs):
  with pytest.raises(ValueError, match=list(kwargs)[0]):
    R.spear_replay(**kwargs)


# ----------------------------------------------------------------------------- StarPO-S as a composition


def test_starpo_s_recipe_is_the_existing_rows_composed():
  import importlib.util  # pylint: disable=import-outside-toplevel
  import pathlib  # pylint: disable=import-outside-toplevel
  spec = importlib.util.spec_from_file_location(
      "rljax_recipes_file", pathlib.Path(__file__).resolve().parents[1] / "configs" / "recipes.py")
  recipes = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(recipes)
  starpo_s = recipes.starpo_s
  assert recipes.AGENT_RECIPES["starpo_s"] is starpo_s
  r = starpo_s()
  assert [s.name for s in r.filters] == ["variance_topp"] and [a.name for a in r.advantage] == ["gae"]
  assert r.critic is not None and r.critic.loss.name == "value_loss"
  (policy,) = r.loss
  assert policy.name == "ppo_clip" and policy.kwargs["eps_low"] == 0.2 and policy.kwargs["eps_high"] == 0.28
  d = probe_step().replace(rewards=np.array([1.0, 0.0, 0.5, 0.5], np.float32))
  keep, _ = r.filters[0].fn(d)
  want, _ = stage("variance_topp", top_p=0.25).fn(d)
  np.testing.assert_array_equal(keep, want)
  assert keep.tolist() == [True, True, False, False]  # the group with reward spread
  no_critic = starpo_s(critic=False)
  assert no_critic.critic is None and [a.name for a in no_critic.advantage] == ["grpo"]


def test_the_forwards_before_an_advantages_phase_replay_stage_need_no_replay_mask():
  """Regression: the loop's first forwards run before an ``advantages``-phase replay stage has marked any row; with
  ``logp_old="behavior"`` (spear_replay's default) they must leave ``logp_old`` as computed, then give the rows the
  stage replays their stored behaviour log-probs."""
  from types import SimpleNamespace  # pylint: disable=import-outside-toplevel
  from rljax.recipes import Recipe  # pylint: disable=import-outside-toplevel
  from rljax.train import _phases as P  # pylint: disable=import-outside-toplevel

  class Loop:  # the live context's forwards (RLLoop.forwards), stood in for
    @staticmethod
    def forwards(data, metrics):  # pylint: disable=unused-argument
      return data.replace(logp_old=np.full(data.tokens.shape, -9.0, np.float32))

  st = R.spear_replay().bind(FACTS)
  selected = P.select_all(Recipe(replay=st))["inputs"]
  assert selected["behavior_logp_old"] == (st,)

  def inputs(data):
    run = SimpleNamespace(data=data, metrics={})
    P.PIPELINE[[p.name for p in P.PIPELINE].index("inputs")].fn(Loop, run, selected)
    return run.data

  d = _data([1] * 8, [0] * 8, step=0)
  out = inputs(d)
  assert np.all(out.logp_old == -9.0)
  marked = d.replace(extras={"replay_mask": np.arange(8) == 2})
  out = inputs(marked)
  np.testing.assert_array_equal(out.logp_old[2], d.logp_behavior[2])
  assert np.all(out.logp_old[np.arange(8) != 2] == -9.0)


def test_starpo_s_loss_is_decoupled_ppo_clip_against_float64():
  """The recipe's loss, built from its initial hparams as the jitted step does, equals a float64 PPO clip with
  ε_low = 0.2, ε_high = 0.28, token mean (the clip-higher part of StarPO-S)."""
  import importlib.util  # pylint: disable=import-outside-toplevel
  import pathlib  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  from rljax.types import PolicyOutputs, TrainBatch  # pylint: disable=import-outside-toplevel
  spec = importlib.util.spec_from_file_location(
      "rljax_recipes_file2", pathlib.Path(__file__).resolve().parents[1] / "configs" / "recipes.py")
  recipes = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(recipes)
  rng = np.random.default_rng(4)
  b, t = 4, 6
  old = -rng.uniform(0.2, 2.0, (b, t))
  logp = old + rng.normal(0, 0.4, (b, t))  # ratios well outside [0.8, 1.28] on some tokens
  adv = rng.normal(size=(b, t))
  mask = rng.random((b, t)) < 0.8
  ratio = np.exp(logp - old)
  ref = np.maximum(-adv * ratio, -adv * np.clip(ratio, 0.8, 1.28))
  ref = (ref * mask).sum() / mask.sum()
  recipe = recipes.starpo_s().bind(RunFacts(num_prompts=2, group_size=2, max_new_tokens=t))
  hp = {k: jnp.asarray(v, jnp.float32) for k, v in recipe.initial_hparams().items()}
  f32 = lambda x: jnp.asarray(x, jnp.float32)
  batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=f32(mask), advantages=f32(adv),
                     group_id=jnp.arange(b) // 2, logp_old=f32(old), logp_behavior=f32(old))
  loss, _ = recipe.objective_builder()(hp)(PolicyOutputs(logp=f32(logp), entropy=None), batch)
  np.testing.assert_allclose(float(loss), ref, rtol=1e-5)
  assert hp["clip_low"] == pytest.approx(0.2) and hp["clip_high"] == pytest.approx(0.28)


def _episode_step(episodes, max_turns, *, group_id, role=None, task_id=None, num_tasks=None):
  """A StepData as a multi-turn runner builds it from episodes: loss tokens are the completion, turn ids as the
  transcript gives them, per-turn rewards as step rewards, the episode (role) outcome as the reward."""
  batch, arr = _rows(episodes, role=role), envs.turn_arrays(episodes, max_turns, role=role)
  b, t = batch["tokens"].shape
  cm = batch["loss_mask"]
  rng = np.random.default_rng(7)
  r = arr["episode_rewards"].astype(np.float32)
  return StepData(tokens=batch["tokens"], prompt_mask=~cm & (batch["segment_ids"] > 0), completion_mask=cm,
                  group_id=np.asarray(group_id, np.int32), num_groups=int(np.max(group_id)) + 1,
                  valid=~arr["failed"], lengths=cm.sum(1).astype(np.int32), completions=("",) * b,
                  problems=(None,) * b, prompt_index=np.asarray(group_id, np.int64), rewards=r, correct=r.copy(),
                  logp_behavior=np.zeros((b, t), np.float32), logp_old=-rng.uniform(0.1, 2, (b, t)).astype(np.float32),
                  logp_ref=-rng.uniform(0.1, 2, (b, t)).astype(np.float32),
                  step_rewards=arr["turn_rewards"] + 0.1 * np.arange(max_turns) * arr["turn_valid"],
                  step_mask=arr["turn_valid"], turn_ids=batch["turn_ids"],
                  task_id=None if task_id is None else np.asarray(task_id, np.int32), num_tasks=num_tasks,
                  turns=tuple(tuple(s.text for s in ep.segments if s.source == "model") for ep in episodes))


def test_the_turn_level_stages_on_a_step_built_from_frozenlake_transcripts():
  """The catalog stages (what a recipe runs) on a runner's StepData equal the pure functions fed the transcript's
  arrays, and give nothing to observation, prompt and padding tokens."""
  eps, m = _lake_episodes()
  d = _episode_step(eps, m, group_id=[0, 0, 1, 1])
  mask = d.completion_mask
  adv, _ = stage("step_episode_mix", step_weight=0.3).fn(d)
  ref = _step_mix_ref(d.step_rewards, d.step_mask, d.turn_ids, mask, d.rewards, d.group_id, 0.3, 1.0)
  np.testing.assert_allclose(adv, ref, rtol=1e-5, atol=1e-6)
  base = d.replace(advantages=_grpo64(d.rewards, d.group_id, d.valid).astype(np.float32))
  mod, _ = stage("sign_preserving_modulation", lam=0.5).fn(base)
  exp, _ = A.sign_preserving_modulation(base.advantages, d.step_rewards, d.turn_ids, d.group_id, mask=mask, lam=0.5,
                                        turn_valid=d.step_mask, num_groups=2)
  np.testing.assert_allclose(mod, exp)
  o, info = stage("oprl", beta=0.5, step_weight=0.5).fn(d)
  step_r = np.zeros((4, m))
  for i in range(4):
    for tt in np.flatnonzero(mask[i]):
      step_r[i, d.turn_ids[i, tt]] += 0.5 * (d.logp_old[i, tt] - d.logp_ref[i, tt])
  np.testing.assert_allclose(info["step_rewards"], step_r, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(o, _step_mix_ref(step_r, d.step_mask, d.turn_ids, mask, d.rewards, d.group_id, 0.5, 1.0),
                             rtol=1e-4, atol=1e-5)
  for a in (adv, mod, o):
    assert np.all(np.asarray(a)[~mask] == 0)
  shaped, _ = stage("shortest_path_reward").fn(d)
  np.testing.assert_allclose(shaped, [1.0, 1.0 - 1 / 10, 0.0, 1.0])  # groups (0, 1): L = 4; (2, 3): L = 5


def test_the_role_ema_stage_keys_self_play_rows_on_their_role():
  """SPIRAL RAE through the catalog stage: rows per (game, role), ``task_id`` = role index, ``num_tasks`` = 2."""
  games, m = _ttt_games()
  steps = [_episode_step(games, m, group_id=[0, 1], role=r, task_id=[k, k], num_tasks=2)
           for k, r in enumerate(("X", "O"))]
  st = stage("role_ema_baseline", decay=0.5).bind(RunFacts(num_prompts=2, group_size=2, max_new_tokens=1,
                                                           num_tasks=2))
  state = st.init()
  for d in steps:  # the X rows then the O rows: each role's baseline moves on its own rows only
    adv, _, state = st.fn(d, state)
    np.testing.assert_allclose(adv, d.rewards)  # read before the update, from 0
  np.testing.assert_allclose(state.baseline, [0.0, 0.0])  # each role won one game and lost one
  x_again = steps[0].replace(rewards=np.array([1.0, 1.0], np.float32))
  _, _, state = st.fn(x_again, state)
  np.testing.assert_allclose(state.baseline, [0.5, 0.0])


def test_a_replay_stage_refuses_only_the_unstored_inputs_of_stages_that_run_after_it():
  """SPEAR's parts compose: tool_call_reward (rollout-phase shaping, reads turns) runs on fresh rows before
  spear_replay, so the buffer need not store turns; MobileRL's shortest_path_reward with positive_replay
  likewise. A stage after the replay that reads what the buffer does not store is still refused."""
  import types  # pylint: disable=import-outside-toplevel
  from rljax.recipes import Recipe  # pylint: disable=import-outside-toplevel
  from rljax.train._startup import _check_replay  # pylint: disable=import-outside-toplevel
  rl = types.SimpleNamespace(rollout_ahead=False, routing_replay=False)
  _check_replay(Recipe(shaping="tool_call_reward", replay="spear_replay"), rl)
  _check_replay(Recipe(shaping="shortest_path_reward", replay="positive_replay"), rl)
  _check_replay(Recipe(advantage="oprl", replay="spear_replay"), rl)  # the advantage runs before this replay
  with pytest.raises(ValueError, match=r"stores no \['step_rewards', 'turn_ids'\].*'oprl'"):
    _check_replay(Recipe(advantage="oprl", replay="positive_replay"), rl)  # rewards phase: oprl sees its rows
  with pytest.raises(ValueError, match=r"stores no \['answer_ids'\].*'uniqueness'"):
    _check_replay(Recipe(advantage="grpo, uniqueness", replay="exgrpo"), rl)


def test_segment_stage_on_turns_routes_each_turns_grpo():
  """``segment(segments="turns")`` on a runner's StepData: turn k's step rewards normalised over the group's rows
  that played turn k (float64 reference), on that turn's model tokens only; rows without turn k give it no
  baseline (``segment_valid`` = ``step_mask``, a row that stopped earlier is not a 0 reward)."""
  eps, m = _lake_episodes()
  d = _episode_step(eps, m, group_id=[0, 0, 0, 0])
  adv, _ = stage("segment", segments="turns").fn(d)
  want = np.zeros(d.completion_mask.shape)
  for k in range(m):
    per = _grpo64(d.step_rewards[:, k], d.group_id, d.step_mask[:, k] & d.valid)
    on = d.completion_mask & (d.turn_ids == k) & d.valid[:, None]
    want = np.where(on, per[:, None], want)
  assert np.abs(want).max() > 0 and len({int(v) for v in d.step_mask.sum(1)}) > 1  # episodes of different lengths
  np.testing.assert_allclose(adv, want, rtol=1e-5, atol=1e-5)
  with pytest.raises(ValueError, match="segments"):
    stage("segment", segments="turn")
