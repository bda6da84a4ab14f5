"""Context-budget windows as training data (``rljax.envs.pack_windows`` and the episode path of the Collector).

A scripted environment with a tiny budget gives episodes of 1, 2 and 3 windows whatever the model writes: prompt 4
characters, observations 10, turns at most 2 characters, budget 16, so every turn after the second starts a new
window that keeps the prompt and the last turn. The fast tests build the runner's window rows from scripted
episodes with ``encode_episode`` (``tests/test_envs_runner.py`` checks that the runner's rows are those); one slow
test plays the episodes with the runner on a model. References: the episode records (``Episode.windows``), a
forward of each window alone, float64 GRPO per episode, and the per-turn estimator on a one-token-per-turn layout.
Invariant: a budget that never triggers gives today's rows and advantages bit for bit.
"""
import dataclasses
import types

import jax
import numpy as np
import pytest
from flax import nnx

from rljax import envs
from rljax.advantages import grpo, step_episode_mix
from rljax.envs._envtask import get_env_task
from rljax.envs._runner import EpisodeBatch, RunnerConfig, run_episodes
from rljax.models import ModelConfig, Transformer, fan_in_init, policy_outputs
from rljax.train._rollout import Collector
from test_envs_runner import CharTok  # the runner tests' character tokenizer

@dataclasses.dataclass(frozen=True)
class Script:
  """Problem k: k model turns. Prompt ``go:\\n`` (4 characters), observations ``o * 9 + \\n`` (10); reward of
  turn t = len(action) + t / 4 (so a group's episodes differ)."""
  stop_strings: tuple = ("\n",)

  def reset(self, problem, seed):
    return (problem, 0), "go:\n"

  def step(self, state, action):
    k, t = state
    done = t + 1 >= k
    obs = "" if done else "o" * (29 if k == 9 and t == 1 else 9) + "\n"  # problem 9: a long second observation
    return envs.StepResult((k, t + 1), obs, len(action) + t / 4, done, {})


RC = RunnerConfig(max_turns=4, max_new_tokens=2, max_prompt_tokens=20, max_obs_tokens=10, threads=1)
PROBLEMS, N = [1, 3, 4], 2  # windows: 1 (one turn), 2 (three turns), 3 (four turns); two episodes each
BUDGET = 16


def _config(budget):
  return envs.EpisodeConfig(stop_strings=("\n",), max_turns=4, context_budget=budget)


@pytest.fixture(scope="module")
def model():
  m = Transformer(ModelConfig(vocab_size=CharTok.vocab_size, hidden_size=32, num_layers=2, num_heads=2,
                              num_kv_heads=2, head_dim=16, intermediate_size=64, max_position_embeddings=256),
                  rngs=nnx.Rngs(5))
  fan_in_init(m)
  return m


def _scripted(actions, budget=BUDGET):
  """``EpisodeBatch`` in the runner's layout (rows ``0..B-1`` the episodes' last windows, then their earlier
  windows) of Script episodes, problem ``len(a)`` playing the actions ``a``, rows from ``encode_episode``;
  behaviour log-probs ``-0.1 * (1 + position % 7)`` on model tokens."""
  cfg, tok = _config(budget), CharTok()
  eps = []
  for acts in actions:
    ep = envs.start(Script(), len(acts), 0)
    for a in acts:
      ep = envs.advance(Script(), ep, a, cfg)
    eps.append(ep)
  rows = [(e, row) for e, ep in enumerate(eps) for row in envs.encode_episode(ep, tok)]
  last = {e: max(w.window for f, w in rows if f == e) for e in range(len(eps))}
  order = [r for r in rows if r[1].window == last[r[0]]] + [r for r in rows if r[1].window != last[r[0]]]
  t = RC.row_length
  st = envs.stack_rows([row for _, row in order], t)
  mm = st["loss_mask"]
  lp = np.where(mm, -0.1 * (1 + np.arange(t) % 7), 0.0).astype(np.float32)
  arr = envs.turn_arrays(eps, RC.max_turns)
  b = len(eps)
  return EpisodeBatch(
      episodes=tuple(eps), tokens=st["tokens"], prompt_mask=(st["segment_ids"] > 0) & ~mm, model_mask=mm,
      logp_behavior=lp, entropy=np.where(mm, 1.0, 0.0).astype(np.float32), turn_ids=st["turn_ids"],
      turn_rewards=arr["turn_rewards"], turn_valid=arr["turn_valid"], episode_rewards=arr["episode_rewards"],
      roles=tuple(ep.roles for ep in eps), failed=arr["failed"], truncated=np.zeros(b, bool),
      turns=np.asarray([ep.turns for ep in eps], np.int32), tool_calls=np.zeros(b, np.int32), prefilled=0,
      row_episode=np.asarray([e for e, _ in order], np.int32),
      row_window=np.asarray([row.window for _, row in order], np.int32),
      row_lengths=np.asarray([row.tokens.size for _, row in order], np.int32))


# problems 1, 3, 4 (two episodes each): 1, 2 and 3 windows; actions of 0-2 characters (rewards differ in a group)
ACTIONS = [["a"], ["ab"], ["a", "b\n", "ab"], ["", "a", "a"], ["ab", "a", "b\n", "a"], ["a", "a", "", "ab"]]


@pytest.fixture(scope="module")
def played():
  return _scripted(ACTIONS)


def _run(model, budget):
  return run_episodes(model, Script(), PROBLEMS, tokenizer=CharTok(), episode_config=_config(budget),
                      runner_config=RC, key=jax.random.key(1), n=N, temperature=1.0)


@pytest.mark.parametrize("source", ["scripted", pytest.param("runner", marks=pytest.mark.slow)])
def test_packed_rows_train_each_model_token_once(source, played, request):
  out = played if source == "scripted" else _run(request.getfixturevalue("model"), BUDGET)
  assert [len(ep.windows) for ep in out.episodes] == [1, 1, 2, 2, 3, 3]
  assert np.bincount(out.row_episode).tolist() == [1, 1, 2, 2, 3, 3]  # the runner: one row per window
  packed = envs.pack_windows(out, RC.packed_row_length)
  assert packed.tokens.shape == (6, RC.packed_row_length) and packed.row_episode.tolist() == list(range(6))
  tok = CharTok()
  for e, ep in enumerate(out.episodes):
    rows = sorted(np.flatnonzero(out.row_episode == e), key=lambda r: out.row_window[r])
    lo = 0
    for w, r in enumerate(rows):  # window w's row lies at [lo, lo + n) with segment id w + 1
      n = int(out.row_lengths[r])
      assert (out.tokens[r, n:] == 0).all() and not out.model_mask[r, n:].any() and not out.prompt_mask[r, n:].any()
      assert (out.prompt_mask[r, :n] | out.model_mask[r, :n]).all()  # every token of a row is context or model
      np.testing.assert_array_equal(packed.segment_ids[e, lo:lo + n], w + 1)
      for k in ("tokens", "prompt_mask", "model_mask", "logp_behavior", "turn_ids"):
        np.testing.assert_array_equal(getattr(packed, k)[e, lo:lo + n], getattr(out, k)[r, :n])
      # the window's text is its Segments' (a new window starts with [bos] and the kept prompt and turn)
      text = tok.decode(out.tokens[r, :n][out.tokens[r, :n] != tok.eos_id])
      assert text == "".join(s.text for s in ep.windows[w])
      # carried-over text is context: the window's model tokens are exactly its trainable model segments
      own = "".join(s.text for s in ep.windows[w] if s.source == "model" and s.trainable)
      mm = out.model_mask[r, :n]
      assert tok.decode(out.tokens[r, :n][mm]) == own
      lo += n
    assert packed.row_lengths[e] == lo and (packed.segment_ids[e, lo:] == 0).all()
    assert (packed.tokens[e, lo:] == 0).all() and (packed.turn_ids[e, lo:] == -1).all()
    # each model turn trained exactly once, under its global turn id, with the sampler's log-probs there only
    mm, tid = packed.model_mask[e], packed.turn_ids[e]
    written = set()  # the turns that wrote something (an empty action has no tokens)
    for t in range(ep.turns):
      first = next(s for w in ep.windows for s in w if s.source == "model" and s.turn == t)
      sel = mm & (tid == t)
      assert tok.decode(packed.tokens[e][sel][packed.tokens[e][sel] != tok.eos_id]) == first.text
      written |= {t} if sel.any() else set()
    assert written and set(tid[mm].tolist()) == written and not packed.logp_behavior[e][~mm].any()
    assert (packed.logp_behavior[e][mm] < 0).all()
  if source == "runner":  # the sampler's log-probs are the model's on each window's own context
    lp = np.asarray(policy_outputs(request.getfixturevalue("model"), packed.tokens,
                                   segment_ids=packed.segment_ids).logp)
    np.testing.assert_allclose(lp[packed.model_mask], packed.logp_behavior[packed.model_mask], atol=1e-4)
  with pytest.raises(ValueError, match="packed_row_length"):
    envs.pack_windows(out, RC.row_length - 30)


@pytest.mark.long
def test_packed_forward_scores_each_window_on_its_own_context(model, played):
  """The training forward of a packed row (``segment_ids``) equals each window's row scored alone: every window
  is trained on exactly the context it was sampled in."""
  out = played
  packed = envs.pack_windows(out, RC.packed_row_length)
  lp = np.asarray(policy_outputs(model, packed.tokens, segment_ids=packed.segment_ids).logp)
  alone = np.asarray(policy_outputs(model, out.tokens).logp)  # each window's row alone (padding after it)
  for e in range(len(out.episodes)):
    rows = sorted(np.flatnonzero(out.row_episode == e), key=lambda r: out.row_window[r])
    lo = 0
    for r in rows:
      n = int(out.row_lengths[r])
      np.testing.assert_allclose(lp[e, lo + 1:lo + n], alone[r, 1:n], atol=1e-5)
      lo += n


def _collector(budget, seq_len):
  task = types.SimpleNamespace(episode_config=_config(budget), roles=(), success=lambda ep: float(ep.turns > 1))
  exp = types.SimpleNamespace(task=task, runner=RC, seq_len=seq_len, multi_turn=True)
  return types.SimpleNamespace(exp=exp, rl=types.SimpleNamespace(group_size=N, num_prompts=len(PROBLEMS)), lo=0)


def _step_data(out, budget, seq_len):
  call = types.SimpleNamespace(episodes=lambda problems, **kw: out, temperature=1.0, episode_sums={})
  data = Collector.episodes(_collector(budget, seq_len), call, PROBLEMS, np.arange(len(PROBLEMS)), step=0,
                            key=jax.random.PRNGKey(0), side=jax.random.PRNGKey(1))
  return data, call.episode_sums


def _advantages(data):
  ng = len(PROBLEMS)
  traj, _ = grpo(data.rewards, data.group_id, valid=data.valid, num_groups=ng)
  turn, _ = step_episode_mix(data.step_rewards, data.turn_ids, data.rewards, data.group_id,
                             mask=data.completion_mask, turn_valid=data.step_mask, valid=data.valid, num_groups=ng)
  return np.asarray(traj), np.asarray(turn)


def test_group_statistics_are_over_episodes_and_turns_land_on_their_tokens(played):
  out = played
  data, sums = _step_data(out, BUDGET, RC.packed_row_length)
  assert data.batch_size == 6 and data.group_id.tolist() == [0, 0, 1, 1, 2, 2]  # one row per episode
  assert sums["windows_per_episode"] == (12.0, 6)  # (1 + 1 + 2 + 2 + 3 + 3) windows over 6 episodes
  assert [len(t) for t in data.turns] == [ep.turns for ep in out.episodes]  # carried-over turns not repeated
  np.testing.assert_array_equal(data.segment_ids, envs.pack_windows(out, RC.packed_row_length).segment_ids)
  # trajectory level: float64 GRPO over each prompt's episodes (unbiased std, eps 1e-6)
  r = np.asarray([sum(ep.rewards) for ep in out.episodes], np.float64)
  np.testing.assert_array_equal(data.rewards, r.astype(np.float32))
  ref = np.zeros(6)
  for g in range(3):
    x = r[2 * g:2 * g + 2]
    ref[2 * g:2 * g + 2] = (x - x.mean()) / (x.std(ddof=1) + 1e-6)
  traj, turn = _advantages(data)
  np.testing.assert_allclose(traj, ref, rtol=1e-5, atol=1e-6)
  assert np.abs(ref).max() > 0.5  # the groups' episodes differ: a test that can fail
  # turn level: the same estimator on a layout of one token per turn; every model token of turn t, in whichever
  # window wrote it, gets that turn's advantage
  m = data.step_rewards.shape[1]
  ids = np.where(data.step_mask, np.arange(m)[None, :], -1).astype(np.int32)
  per_turn, _ = step_episode_mix(data.step_rewards, ids, data.rewards, data.group_id, mask=data.step_mask,
                                 turn_valid=data.step_mask, valid=data.valid, num_groups=3)
  per_turn = np.asarray(per_turn)
  for e, ep in enumerate(out.episodes):
    for t in range(ep.turns):
      sel = data.completion_mask[e] & (data.turn_ids[e] == t)
      assert sel.any() or ACTIONS[e][t] == ""
      np.testing.assert_allclose(turn[e][sel], per_turn[e, t], rtol=1e-6)
    assert not turn[e][~data.completion_mask[e]].any()


def test_a_budget_that_never_triggers_gives_todays_rows_bit_for_bit():
  """The same episodes (one window each) through today's path (no budget: the runner's rows) and the budget's
  (packed rows, ``segment_ids``): the same StepData on the first ``row_length`` columns, padding after, and the
  same advantages, bit for bit."""
  wide = _scripted(ACTIONS, 10 ** 6)
  assert [len(ep.windows) for ep in wide.episodes] == [1] * 6 and wide.tokens.shape[0] == 6
  today, _ = _step_data(wide, None, RC.row_length)
  packed, sums = _step_data(wide, 10 ** 6, RC.packed_row_length)
  assert today.segment_ids is None and sums["windows_per_episode"] == (6.0, 6)
  t = RC.row_length
  assert packed.tokens.shape == (6, RC.packed_row_length) and today.tokens.shape == (6, t)
  for k in ("tokens", "prompt_mask", "completion_mask", "logp_behavior", "entropy_behavior", "turn_ids"):
    np.testing.assert_array_equal(getattr(packed, k)[:, :t], getattr(today, k))
    pad = getattr(packed, k)[:, t:]
    assert (pad == -1).all() if k == "turn_ids" else not pad.any()
  np.testing.assert_array_equal(packed.segment_ids[:, :t], (np.arange(t)[None, :] < wide.row_lengths[:, None]))
  for k in ("rewards", "step_rewards", "step_mask", "valid", "group_id", "lengths", "correct"):
    np.testing.assert_array_equal(getattr(packed, k), getattr(today, k))
  assert packed.turns == today.turns and packed.completions == today.completions
  a_today, a_packed = _advantages(today), _advantages(packed)
  np.testing.assert_array_equal(a_packed[0], a_today[0])
  np.testing.assert_array_equal(a_packed[1][:, :t], a_today[1])
  assert not a_packed[1][:, t:].any()


@pytest.mark.slow
def test_a_budget_that_never_triggers_samples_todays_episodes(model):
  """The runner with a budget that never triggers plays the same episodes as without one: the same tokens and
  masks; the log-probs agree to float rounding only (a budget sizes the KV cache larger, which changes the
  attention's summation)."""
  plain, wide = _run(model, None), _run(model, 10 ** 6)
  for k in ("tokens", "prompt_mask", "model_mask", "turn_ids", "row_lengths"):
    np.testing.assert_array_equal(getattr(plain, k), getattr(wide, k))
  np.testing.assert_allclose(plain.logp_behavior, wide.logp_behavior, atol=2e-6)
  assert [ep.windows for ep in plain.episodes] == [ep.windows for ep in wide.episodes]


def test_the_steps_forwards_and_batch_carry_the_packing(model, played):
  """``StepInputs`` (the proximal forward) and ``train_batch`` on packed rows: ``logp_old`` is the packed
  forward's (each window on its own context, not the whole row's), and ``TrainBatch.segment_ids`` is the packing
  the update's forward reads."""
  import optax  # pylint: disable=import-outside-toplevel
  from rljax.parallel import MeshConfig, make_mesh, row_sharding  # pylint: disable=import-outside-toplevel
  from rljax.train._inputs import StepInputs, train_batch  # pylint: disable=import-outside-toplevel
  from rljax.train._step import init_train_state  # pylint: disable=import-outside-toplevel
  data, _ = _step_data(played, BUDGET, RC.packed_row_length)
  sh = row_sharding(make_mesh(MeshConfig(fsdp=1), jax.devices()[:1]), 6)
  graphdef, state = init_train_state(model, optax.sgd(0.1))
  got = StepInputs(graphdef, {"logp_old"}, rows_sharding=sh, batch_size=6, shared_prefix_len=0, group_size=N)(
      data, state)
  mm = data.completion_mask
  packed = np.asarray(policy_outputs(model, data.tokens, segment_ids=data.segment_ids).logp)
  np.testing.assert_allclose(got.logp_old[mm], packed[mm], atol=1e-6)
  whole = np.asarray(policy_outputs(model, data.tokens).logp)  # windows attending across each other: differs
  assert np.abs(whole[mm] - packed[mm]).max() > 1e-2
  batch = train_batch(got.replace(advantages=np.zeros(6, np.float32)), sh, 6)
  np.testing.assert_array_equal(np.asarray(batch.segment_ids), data.segment_ids)
  np.testing.assert_array_equal(np.asarray(batch.loss_mask), mm & data.valid[:, None])


def test_sft_packs_a_demonstrations_windows_and_the_config_reaches_the_task():
  """A FrozenLake demonstration under a budget of 200 characters has several windows: its SFT row packs them
  (``segment_ids`` = window + 1) and trains each model turn once; ``task.context_budget`` builds that task."""
  from rljax.train import apply_overrides, tiny_config  # pylint: disable=import-outside-toplevel
  from rljax.train._codec import Codec, sft_batch  # pylint: disable=import-outside-toplevel
  from rljax.train._experiment import build_task  # pylint: disable=import-outside-toplevel
  task = build_task(apply_overrides(tiny_config("/tmp/x"), ["task.name=frozenlake", "task.context_budget=200"]))
  assert task.episode_config.context_budget == 200
  assert build_task(apply_overrides(tiny_config("/tmp/x"), ["task.name=frozenlake"])).episode_config.context_budget \
      is None
  tok = types.SimpleNamespace(bos_id=1, eos_id=2, pad_id=0, encode=lambda s: [3 + ord(c) for c in s])
  problems = task.problems("train", 8, 0)
  batch = sft_batch(task, Codec(tok), problems, step=0, seed=0, batch_size=8, seq_len=1200)
  rng = np.random.default_rng([0, 7, 0])  # sft_batch's draw of the problems
  idx = rng.integers(len(problems), size=8)
  windows = []
  for r, i in enumerate(idx):
    ep = task.demonstration_episode(problems[int(i)])
    rows = envs.encode_episode(ep, tok)
    windows.append(len(rows))
    seg, n = batch.segment_ids[r], sum(row.tokens.size for row in rows)
    np.testing.assert_array_equal(seg[:n], np.concatenate([np.full(row.tokens.size, row.window + 1) for row in rows]))
    assert not seg[n:].any()
    model_text = "".join(s.text for w in ep.windows for s in w if s.source == "model" and s.trainable)
    assert int(batch.loss_mask[r].sum()) == len(model_text) and len(model_text) > 0  # each turn once
  assert max(windows) > 1
  plain = sft_batch(get_env_task("frozenlake"), Codec(tok), problems, step=0, seed=0, batch_size=8, seq_len=1200)
  assert plain.segment_ids is None  # no budget: one window, one sequence per row, as before


@dataclasses.dataclass(frozen=True)
class Summarising(Script):
  """Script whose ``fit_context`` summarises: the prompt, then ``o\\n`` for everything before (the environment's
  choice; it always fits)."""

  def fit_context(self, segments, budget, measure):
    return (segments[0], envs.Segment("o\n", "env", max(s.turn for s in segments)))


@pytest.mark.slow
def test_an_observation_too_long_for_its_window_truncates_the_episode(model):
  """The observation that closes a window is held to ``max_obs_tokens`` like any other: problem 9's second
  observation (30 tokens, limit 10) closes its first window, and the episode ends as truncated (counted), its
  first window's row kept without it; the other episodes of the batch go on."""
  out = run_episodes(model, Summarising(), [9, 4], tokenizer=CharTok(), episode_config=_config(BUDGET),
                     runner_config=RC, key=jax.random.key(1), n=1, temperature=1.0)
  assert out.truncated.tolist() == [True, False] and out.episodes[0].turns == 2
  k = len(out.episodes[1].windows)  # problem 4: 2 or 3 windows (a summary and a turn may fit in the budget)
  assert k >= 2 and out.tokens.shape[0] == 2 + k - 1  # problem 9's first window is its row 0, without the observation
  assert (out.row_lengths <= RC.row_length).all()
  packed = envs.pack_windows(out, RC.packed_row_length)
  assert packed.model_mask[0].sum() == out.model_mask[0].sum()
