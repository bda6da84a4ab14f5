"""Multi-turn environments in the RL loop: episodes -> StepData (role rows for self-play), the scripted
demonstrations, and short end-to-end ``train()`` runs (the tool countdown with the real sandbox; a self-play game)."""
import types

import numpy as np
import pytest

from rljax import envs, sandbox
from rljax.envs._envtask import get_env_task, search_code, search_output
from rljax.envs._runner import EpisodeBatch
from rljax.train._rollout import Collector

_LAYERS = sandbox.probe()
_NO_SANDBOX = [k for k in sandbox.REQUIRED_LAYERS if _LAYERS[k]]


class _Chars:
  """One id per character (``ord + 3``); 1 = start token."""
  bos_id, eos_id = 1, 2

  def encode(self, text):
    return [3 + ord(c) for c in text]


def _batch(task, episodes, t=400):
  """An ``EpisodeBatch`` of played episodes, built from ``encode_episode`` (as the runner's rows are)."""
  rows = [envs.encode_episode(ep, _Chars())[0] for ep in episodes]
  st = envs.stack_rows(rows, t)
  arr = envs.turn_arrays(episodes, task.max_turns)
  b = len(episodes)
  mm = st["loss_mask"]
  return EpisodeBatch(
      episodes=tuple(episodes), tokens=st["tokens"], prompt_mask=(st["segment_ids"] > 0) & ~mm, model_mask=mm,
      logp_behavior=np.where(mm, -0.5, 0.0).astype(np.float32), entropy=np.where(mm, 1.0, 0.0).astype(np.float32),
      turn_ids=st["turn_ids"], turn_rewards=arr["turn_rewards"], turn_valid=arr["turn_valid"],
      episode_rewards=arr["episode_rewards"], roles=tuple(ep.roles for ep in episodes), failed=arr["failed"],
      truncated=np.zeros(b, bool), turns=np.asarray([ep.turns for ep in episodes], np.int32),
      tool_calls=np.zeros(b, np.int32), prefilled=0)


def _collector(task, group_size):
  exp = types.SimpleNamespace(task=task, runner=envs.RunnerConfig(max_turns=task.max_turns), multi_turn=True)
  return types.SimpleNamespace(exp=exp, rl=types.SimpleNamespace(group_size=group_size, num_prompts=1), lo=0)


def _game(moves):
  task = get_env_task("tictactoe")
  ep = envs.start(task.env, None, 0)
  for m in moves:
    ep = envs.advance(task.env, ep, f"{m}\n", task.episode_config)
  return ep


def test_self_play_gives_one_row_per_role_with_its_outcome():
  task = get_env_task("tictactoe")
  x_wins = _game([1, 4, 2, 5, 3])  # X: 1 2 3 wins
  illegal = _game([5, 5])  # O plays a taken cell: O loses
  batch = _batch(task, [x_wins, illegal])
  call = types.SimpleNamespace(episodes=lambda problems, **kw: batch, temperature=1.0, episode_sums={})
  import jax  # pylint: disable=import-outside-toplevel
  data = Collector.episodes(_collector(task, 4), call, [task.problems("train", 1, 0)[0]], np.array([0]), step=0,
                            key=jax.random.PRNGKey(0), side=jax.random.PRNGKey(1))
  assert data.batch_size == 4 and data.extras["role_id"].tolist() == [0, 1, 0, 1]
  assert data.task_id.tolist() == [0, 1, 0, 1] and data.num_tasks == 2  # the key of a role-conditioned baseline
  np.testing.assert_array_equal(data.rewards, [1.0, -1.0, 1.0, -1.0])  # X, O of each game
  np.testing.assert_array_equal(data.correct, [1.0, 1.0, 0.0, 0.0])  # the illegal game is no success
  for r, ep_i in enumerate([0, 0, 1, 1]):
    ep, role = [x_wins, illegal][ep_i], "XO"[r % 2]
    own_turns = {k for k, who in enumerate(ep.roles) if who == role}
    trained = set(np.unique(data.turn_ids[r][data.completion_mask[r]]).tolist())
    assert trained == own_turns  # only this role's moves are trained
    np.testing.assert_array_equal(data.step_mask[r, :ep.turns], [who == role for who in ep.roles])
    assert np.all(data.logp_behavior[r][~data.completion_mask[r]] == 0)
  assert data.turns[0] == ("1\n", "4\n", "2\n", "5\n", "3\n") and data.valid.all()
  assert call.episode_sums["turns"] == (7.0, 2)


def test_tool_episodes_feed_void_turn():
  """SimpleTIR's void-turn filter reads the episodes' model turns (``StepData.turns``); with the tool env's
  ``VOID_TURN_PATTERNS`` it drops the episodes the environment counts."""
  import jax  # pylint: disable=import-outside-toplevel
  from rljax.filters._selection import void_turn  # pylint: disable=import-outside-toplevel
  task = get_env_task("tool_countdown", tool=lambda code: "1")
  problem = task.problems("train", 1, 0)[0]
  demo = task.demonstration_episode(problem)
  void = envs.advance(task.env, envs.start(task.env, problem, 0), "hello</answer>", task.episode_config)
  void = envs.advance(task.env, void, "<answer>1</answer>", task.episode_config)
  batch = _batch(task, [demo, void])
  call = types.SimpleNamespace(episodes=lambda problems, **kw: batch, temperature=1.0, episode_sums={})
  data = Collector.episodes(_collector(task, 2), call, [problem], np.array([0]), step=0, key=jax.random.PRNGKey(0),
                            side=jax.random.PRNGKey(1))
  keep, _ = void_turn(data.turns, **envs.VOID_TURN_PATTERNS)
  assert keep.tolist() == [True, False]
  assert call.episode_sums["void_turn"] == (1.0, 2)  # logged as rollout/void_turn_episodes: 1 of 2 episodes
  assert void.info["void_turns"] == 1 and demo.info["void_turns"] == 0
  np.testing.assert_array_equal(data.rewards, [1.0, 0.0])
  np.testing.assert_array_equal(data.step_rewards[:, :2], [[0.0, 1.0], [0.0, 0.0]])


def test_demonstrations_solve_their_problems():
  for name in envs.ENV_TASK_NAMES:
    task = get_env_task(name)
    for p in task.problems("train", 4, 1):
      ep = task.demonstration_episode(p)
      assert task.success(ep) == 1.0 and not ep.failed, (name, ep)
  tc = get_env_task("tool_countdown")
  ep = tc.demonstration_episode(tc.problems("train", 1, 0)[0])
  assert ep.turns == 2 and ep.info["tool_calls"] == 1  # one call, then the answer
  row = envs.encode_episode(ep, _Chars())[0]
  model_text = "".join(s.text for s in ep.segments if s.source == "model")
  assert int(row.loss_mask.sum()) == len(model_text)  # trained on the model's turns only


def test_tictactoe_demonstrations_play_uniformly_random_legal_moves():
  """The self-play warm start teaches the format and the rules, not strength: every move is legal, and the
  moves are uniform over the free cells (counts of the first two moves over 1800 seeded demonstrations)."""
  task = get_env_task("tictactoe")
  p = task.problems("train", 1, 0)[0]
  firsts, seconds = np.zeros(9), np.zeros(9)
  for s in range(1800):
    ep = task.demonstration_episode(p, np.random.default_rng(s))
    assert task.success(ep) == 1.0 and ep.finish == "env"
    moves = [int(t) - 1 for t in (x.text for x in ep.segments if x.source == "model")]
    firsts[moves[0]] += 1
    seconds[moves[1]] += 1
    assert len(set(moves)) == len(moves) == ep.turns  # no cell twice
  assert np.all(np.abs(firsts - 200) < 4 * np.sqrt(200 * 8 / 9))  # 1800 / 9 each, within 4 sd
  assert np.all(np.abs(seconds - 200) < 4 * np.sqrt(200 * 8 / 9))  # uniform over the 8 left, averaged over cells


def test_tictactoe_config_loads_and_its_held_out_games_are_balanced():
  from rljax.configs import tictactoe  # pylint: disable=import-outside-toplevel
  from rljax.train._experiment import build_task  # pylint: disable=import-outside-toplevel
  cfg = tictactoe.get_config()
  assert cfg.task.name == "tictactoe" and cfg.rl.advantage.startswith("role_ema_baseline")
  assert [s.name for s in cfg.rl.recipe().advantage] == ["role_ema_baseline"]
  task = build_task(cfg)
  test = task.problems("test", cfg.eval.num_problems, 0)
  assert task.problems("test", cfg.eval.num_problems, 0) == test  # a fixed held-out set
  combos = [(p.meta["opponent"], p.meta["model"]) for p in test]
  assert {c: combos.count(c) for c in set(combos)} == {(k, r): 16 for k in ("random", "minimax") for r in "XO"}
  assert len({(c, task.seed(p)) for c, p in zip(combos, test)}) == len(test)
  assert all(task.env_problem(p) is None and task.seed(p) == 0 for p in task.problems("train", 4, 1))  # self-play


def test_evaluate_episodes_adds_the_tasks_own_metrics():
  """``evaluate_episodes`` (the held-out eval of an environment task) reports ``task.eval_metrics`` of its
  greedy episodes, padding chunks excluded."""
  from rljax.train._sft import evaluate_episodes  # pylint: disable=import-outside-toplevel
  task = get_env_task("tictactoe")
  problems = task.problems("test", 6, 0)
  seen = []

  def episode_fn(chunk, *, n, greedy, temperature, key):
    assert n == 1 and greedy
    eps = []
    for p in chunk:
      ep = envs.start(task.env, task.env_problem(p), task.seed(p))
      while not ep.done:
        ep = envs.advance(task.env, ep, f"{ep.state.board.index('.') + 1}\n", task.episode_config)
      eps.append(ep)
    seen.extend(eps)
    z = np.zeros(len(eps))
    return types.SimpleNamespace(episodes=eps, turns=z, tool_calls=z, failed=z, truncated=z)

  import jax  # pylint: disable=import-outside-toplevel
  out = evaluate_episodes(types.SimpleNamespace(task=task), episode_fn, problems, batch_size=4,
                          key=jax.random.PRNGKey(0))
  assert len(seen) == 8  # two chunks of 4, the last padded
  expected = task.eval_metrics(problems, seen[:6])
  assert expected and {k: out[k] for k in expected} == expected
  assert out["greedy_accuracy"] == pytest.approx(np.mean([task.success(ep) for ep in seen[:6]]))


@pytest.mark.skipif(bool(_NO_SANDBOX), reason=f"sandbox layers missing: {_NO_SANDBOX}")
def test_demonstration_tool_output_is_what_the_sandbox_prints():
  env = get_env_task("tool_countdown").env
  for nums, target in (([3, 7], 10), ([9, 9], 81), ([1, 8], 7), ([2, 2], 4)):
    problem = envs.Problem(prompt="", answer="", meta={"numbers": nums, "target": target})
    res = sandbox.run_python(env.tool_code(problem, search_code()), config=sandbox.SandboxConfig())
    assert res.ok and res.stdout == search_output(nums, target)
  assert search_output([3, 7], 10) == "3+7\n" and search_output([3, 7], 4) == "7-3\n"  # by hand
  with pytest.raises(ValueError, match="no x op y"):
    search_output([4, 2], 99)


def test_bind_inputs_sets_numbers_and_target_before_the_models_code():
  seen = []
  task = get_env_task("tool_countdown", tool=lambda code: seen.append(code) or "ok")
  problem = envs.Problem(prompt="", answer="", meta={"numbers": [4, 6], "target": 24})
  ep = envs.start(task.env, problem, 0)
  assert "<call>code</call> has n, t;" in ep.context
  envs.advance(task.env, ep, "<call>print(t)</call>", task.episode_config)
  assert seen == ["n, t = [4, 6], 24\nprint(t)"]
  plain = envs.ToolCountdownEnv(task=task.countdown, tool=lambda code: seen.append(code) or "ok")
  envs.advance(plain, envs.start(plain, problem, 0), "<call>print(1)</call>", task.episode_config)
  assert seen[-1] == "print(1)" and "has n, t" not in plain.prompt(problem)  # off by default


def _model_text(ep):
  return "".join(s.text for s in ep.segments if s.source == "model")


def test_demo_tool_prob_mixes_direct_answers_into_the_demonstrations():
  task = get_env_task("tool_countdown", tool=lambda code: pytest.fail("a demonstration ran the tool"),
                      demo_tool_prob=0.3)
  problems = task.problems("train", 50, 0)
  rng = np.random.default_rng(0)
  eps = [task.demonstration_episode(problems[i % 50], rng) for i in range(2000)]
  tool = np.array([ep.info["tool_calls"] == 1 for ep in eps])
  assert abs(tool.mean() - 0.3) < 4 * np.sqrt(0.3 * 0.7 / 2000)  # 4 binomial standard deviations
  for ep, used, i in zip(eps, tool, range(2000)):
    text, nums = _model_text(ep), problems[i % 50].meta["numbers"]
    if used:
      assert ep.turns == 2 and text.startswith("<call>") and task.success(ep) == 1.0
    else:  # a direct answer: one turn, no call, the two numbers in order joined by + - or *
      assert ep.turns == 1 and ep.info["tool_calls"] == 0 and "<call>" not in text and ep.done
      assert text in {f"<answer>{nums[0]}{o}{nums[1]}</answer>" for o in "+-*"}
  direct = [task.success(ep) for ep, used in zip(eps, tool) if not used]
  assert 0.1 < np.mean(direct) < 0.6  # a plausible guess: right in about a third of problems
  assert {next(c for c in _model_text(ep) if c in "+-*") for ep, used in zip(eps, tool) if not used} == set("+-*")
  # without an rng a problem always gets the same demonstration; 0 and 1 are all direct and all tool
  p = problems[0]
  assert len({_model_text(task.demonstration_episode(p)) for _ in range(3)}) == 1
  for prob, calls in ((0.0, 0), (1.0, 1)):
    t = get_env_task("tool_countdown", tool=lambda code: "", demo_tool_prob=prob)
    assert {t.demonstration_episode(q, rng).info["tool_calls"] for q in problems} == {calls}


def test_demo_tool_prob_is_validated_and_reaches_the_sft_batches():
  from rljax.train import apply_overrides, tiny_config  # pylint: disable=import-outside-toplevel
  from rljax.train._codec import Codec, sft_batch  # pylint: disable=import-outside-toplevel
  from rljax.train._experiment import build_task  # pylint: disable=import-outside-toplevel
  for bad in (-0.1, 1.5, "x", True):
    with pytest.raises(ValueError, match="EnvTask.demo_tool_prob"):
      get_env_task("tool_countdown", demo_tool_prob=bad)
  with pytest.raises(ValueError, match="EnvTask.demo_tool_prob.*'frozenlake'"):
    get_env_task("frozenlake", demo_tool_prob=0.5)
  with pytest.raises(ValueError, match="task.demo_tool_prob"):
    apply_overrides(tiny_config("/tmp/x"), ["task.name=tool_countdown", "task.demo_tool_prob=2.0"])
  with pytest.raises(ValueError, match="task.demo_tool_prob.*'arithmetic'"):
    apply_overrides(tiny_config("/tmp/x"), ["task.demo_tool_prob=0.5"])
  cfg = apply_overrides(tiny_config("/tmp/x"), ["task.name=tool_countdown", "task.demo_tool_prob=0.5"])
  task = build_task(cfg)
  assert task.demo_tool_prob == 0.5
  codec = Codec(_CharTok())
  problems = task.problems("train", 20, 0)
  batches = [sft_batch(task, codec, problems, step=s, seed=0, batch_size=32, seq_len=400) for s in (0, 0, 1)]
  np.testing.assert_array_equal(batches[0].tokens, batches[1].tokens)  # a step's batch is deterministic
  calls = [np.any(np.all(np.lib.stride_tricks.sliding_window_view(b.tokens, 8, axis=1) == codec.tok.encode("<output>"),
                         axis=-1), axis=1) for b in batches]
  assert 0 < calls[0].sum() < 32 and not np.array_equal(batches[0].tokens, batches[2].tokens)


class _CharTok:
  """A character tokenizer with the interface ``Codec`` reads."""
  bos_id, eos_id, pad_id, vocab_size = 1, 2, 0, 259

  def encode(self, text):
    return [3 + ord(c) for c in text]

  def decode(self, ids):
    return "".join(chr(i - 3) for i in ids if i >= 3)


def _train(tmp_path, name, new_tokens, obs, extra=()):
  from rljax.train import apply_overrides, tiny_config, train  # pylint: disable=import-outside-toplevel
  cfg = apply_overrides(tiny_config(str(tmp_path)), [
      f"task.name={name}", "task.num_train=32", "task.num_test=2", f"task.max_obs_tokens={obs}", "rl.steps=2",
      "rl.num_prompts=2", "rl.group_size=2", f"rl.max_new_tokens={new_tokens}", "sft.steps=1", "sft.batch_size=2",
      "eval.num_problems=2", "eval.batch_size=2", *extra])
  summary = train(cfg, overwrite=True)
  import json  # pylint: disable=import-outside-toplevel
  rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl", encoding="utf-8")]
  return summary, [r for r in rows if r.get("stage") == "rl" and "rollout/turns" in r]  # the steps' rows


@pytest.mark.long
@pytest.mark.skipif(bool(_NO_SANDBOX), reason=f"sandbox layers missing: {_NO_SANDBOX}")
def test_tool_countdown_trains_end_to_end(tmp_path):
  summary, rows = _train(tmp_path, "tool_countdown", 24, 48)
  assert len(rows) == 2, rows
  for r in rows:  # an untrained model's void turns get a reminder longer than 48 tokens: truncated episodes
    assert r["rollout/turns"] >= 1 and "rollout/tool_calls_per_episode" in r and r["rollout/failed_episodes"] == 0
    assert 0 <= r["rollout/truncated_episodes"] <= 1 and np.isfinite(r["loss"])
  assert "tool_calls_per_episode" in summary["rl"] and 0.0 <= summary["rl"]["greedy_accuracy"] <= 1.0
  assert 0.0 <= rows[-1]["eval/tool_calls_per_episode"] <= 3.0 and "rollout/void_turn_episodes" in rows[-1]


@pytest.mark.slow  # about 40-80 s on 2 cores; tests/test_envs_windows.py guards the rows, forwards and batch
def test_context_budget_trains_end_to_end(tmp_path):
  """FrozenLake with a context budget of 200 characters (prompt 88, an observation about 66): a third turn
  starts a new window, so episodes have two; each trains as one packed row (``rljax.envs.pack_windows``)."""
  _, rows = _train(tmp_path, "frozenlake", 3, 80, ["task.max_turns=3", "task.context_budget=200",
                                                   "eval.num_problems=1", "eval.batch_size=1"])
  assert len(rows) == 2 and all(np.isfinite(r["loss"]) for r in rows)
  assert max(r["rollout/windows_per_episode"] for r in rows) > 1.0, rows  # windows did occur
  assert all(r["rollout/truncated_episodes"] == 0 for r in rows)


@pytest.mark.slow
def test_self_play_game_trains_end_to_end(tmp_path):
  """Two RL steps of self-play with the role-conditioned baseline; the held-out games against the fixed
  opponents are scored after SFT and at the last step (``eval/win_vs_random``, ...)."""
  summary, rows = _train(tmp_path, "tictactoe", 2, 24, ["task.num_test=4", "eval.num_problems=4",
                                                        "eval.batch_size=4", "rl.advantage=role_ema_baseline"])
  assert len(rows) == 2 and all(np.isfinite(r["loss"]) and r["rollout/turns"] >= 1 for r in rows)
  names = [f"{o}_vs_{k}" for k in ("random", "minimax") for o in ("win", "draw", "loss")] + ["illegal"]
  for ev in (summary["sft"], summary["rl"], {k[5:]: v for k, v in rows[-1].items() if k.startswith("eval/")}):
    assert all(0.0 <= ev[n] <= 1.0 for n in names), ev
    for k in ("random", "minimax"):
      assert sum(ev[f"{o}_vs_{k}"] for o in ("win", "draw", "loss")) == pytest.approx(1.0)


def test_multi_turn_refuses_what_its_episodes_do_not_run(tmp_path):
  from rljax.train import apply_overrides, tiny_config, train  # pylint: disable=import-outside-toplevel
  # context windows packed in one row: a replay buffer stores no packing (segment_ids) for its rows
  cfg = apply_overrides(tiny_config(str(tmp_path)), ["task.name=frozenlake", "task.context_budget=40",
                                                     "rl.replay=rapo_replay"])
  with pytest.raises(ValueError, match="multi-turn.*rapo_replay.*context_budget"):
    train(cfg, overwrite=True)
  cfg = apply_overrides(tiny_config(str(tmp_path)), ["task.name=frozenlake", "rl.rewards=exact_match"])
  with pytest.raises(ValueError, match="multi-turn.*exact_match"):
    train(cfg, overwrite=True)
  cfg = apply_overrides(tiny_config(str(tmp_path)), ["task.name=frozenlake", "rl.async_staleness=1"])
  with pytest.raises(ValueError, match="multi-turn.*async_staleness=1"):
    train(cfg, overwrite=True)
  with pytest.raises(ValueError, match="task.max_turns"):
    apply_overrides(tiny_config(str(tmp_path)), ["task.max_turns=3"])
  with pytest.raises(ValueError, match="task.context_budget"):
    apply_overrides(tiny_config(str(tmp_path)), ["task.context_budget=100"])


def test_eval_log_prints_only_what_was_measured():
  """An environment task's eval plays greedy episodes only: no "temperature-1 success nan%" in the log line."""
  from rljax.train._run import eval_extras  # pylint: disable=import-outside-toplevel
  assert eval_extras({"greedy_accuracy": 0.5, "turns": 2.0, "tool_calls_per_episode": 1.0}, 1.0) == ""
  assert (eval_extras({"greedy_accuracy": 0.5, "sample_accuracy": 0.25, "pass@4": 0.75}, 0.7)
          == ", temperature-0.7 success 25.0%, pass@4 75.0%")
