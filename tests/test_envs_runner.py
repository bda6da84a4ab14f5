"""The episode runner (rljax.envs.run_episodes) against a brute reference that recomputes every turn's prefix with
``generate`` on the whole text so far (greedy, one episode at a time), and ``rljax.sampling.rewind``."""
import dataclasses

import jax
import numpy as np
import pytest
from flax import nnx

from rljax import envs
from rljax.envs._runner import RunnerConfig, run_episodes
from rljax.models import ModelConfig, Transformer, fan_in_init
from rljax.sampling import SamplerConfig, generate, resume, rewind

CHARS = "abcdefghko:.\n"


class CharTok:
  """pad 0, bos 1, eos 2, then one id per character of CHARS."""
  bos_id, eos_id, pad_id = 1, 2, 0
  vocab_size = 3 + len(CHARS)

  def encode(self, text):
    return [3 + CHARS.index(c) for c in text]

  def decode(self, ids):
    return "".join(CHARS[i - 3] for i in ids if i >= 3)


@dataclasses.dataclass(frozen=True)
class Echo:
  """Problem k: the episode ends after k model turns. Observations of varying length; reward = turn length;
  ``problem == "boom"`` raises in step; ``problem == "long"`` answers with a too-long observation."""
  stop_strings: tuple = ("c",)

  def reset(self, problem, seed):
    return (problem, 0), "go:" + "a" * (seed % 3) + "\n"

  def step(self, state, action):
    problem, t = state
    if problem == "boom":
      raise RuntimeError("environment bug")
    t += 1
    if problem == "long":
      return envs.StepResult((problem, t), "h" * 40, 0.0, False, {"tool_calls": t})
    done = t >= problem
    obs = "" if done else "ok" + "." * ((t + problem) % 3) + "\n"
    return envs.StepResult((problem, t), obs, float(len(action)), done, {"tool_calls": t})


@pytest.fixture(scope="module")
def model():
  m = Transformer(ModelConfig(vocab_size=CharTok.vocab_size, hidden_size=32, num_layers=2, num_heads=2,
                              num_kv_heads=2, head_dim=16, intermediate_size=64, max_position_embeddings=256),
                  rngs=nnx.Rngs(3))
  fan_in_init(m)
  return m


RC = RunnerConfig(max_turns=4, max_new_tokens=6, max_prompt_tokens=8, max_obs_tokens=6, threads=2)
BIG = SamplerConfig(max_new_tokens=RC.max_new_tokens, prompt_buckets=(64,), cache_size=64 + RC.max_new_tokens)


def _reference(model, env, problem, seed, cfg: envs.EpisodeConfig):
  """One episode, every turn sampled by ``generate`` on the whole sequence so far (nothing cached)."""
  tok = CharTok()
  big = BIG
  ep = envs.start(env, problem, seed)
  seq = [tok.bos_id] + tok.encode(ep.context)
  model_mask, logp, turn_ids = [False] * len(seq), [0.0] * len(seq), [-1] * len(seq)
  for t in range(cfg.max_turns):
    r = generate(model, [seq], config=big, key=jax.random.key(0), greedy=True, stop_tokens=[tok.eos_id])
    cm = np.asarray(r.completion_mask[0])
    ids, lps = np.asarray(r.tokens[0])[cm].tolist(), np.asarray(r.logp_behavior[0])[cm].tolist()
    if tok.eos_id in ids:
      ids = ids[:ids.index(tok.eos_id) + 1]
    stop = tok.encode("c")[0]  # the stop string is one token: the turn ends after its first occurrence
    if stop in ids:
      ids = ids[:ids.index(stop) + 1]
    text = tok.decode([i for i in ids if i != tok.eos_id])
    seq += ids
    model_mask += [True] * len(ids)
    logp += lps[:len(ids)]
    turn_ids += [t] * len(ids)
    ep = envs.advance(env, ep, text, cfg)
    if ep.done:
      break
    obs = tok.encode(ep.segments[-1].text)
    seq += obs
    model_mask += [False] * len(obs)
    logp += [0.0] * len(obs)
    turn_ids += [t] * len(obs)
  return ep, seq, model_mask, logp, turn_ids


def test_cached_runner_equals_recomputing_the_prefix(model):
  env, cfg = Echo(), envs.EpisodeConfig(stop_strings=("c",), max_turns=4)  # _reference assumes this stop
  problems, seeds, n = [1, 3, 4], [0, 1, 2], 2
  out = run_episodes(model, env, problems, tokenizer=CharTok(), episode_config=cfg, runner_config=RC,
                     key=jax.random.key(0), n=n, seeds=seeds, greedy=True)
  t = RC.row_length
  assert out.tokens.shape == (6, t) and out.turn_rewards.shape == (6, 4)
  cut_turns = 0
  for b in range(6):
    ep, seq, mm, lp, tid = _reference(model, env, problems[b // n], seeds[b // n], cfg)
    k = len(seq)
    np.testing.assert_array_equal(out.tokens[b, :k], seq)
    assert (out.tokens[b, k:] == 0).all() and not out.model_mask[b, k:].any()
    np.testing.assert_array_equal(out.model_mask[b, :k], mm)
    np.testing.assert_allclose(out.logp_behavior[b, :k], lp, atol=2e-5)
    np.testing.assert_array_equal(out.turn_ids[b, :k], tid)
    assert out.episodes[b].rewards == ep.rewards and out.turns[b] == ep.turns == problems[b // n]
    np.testing.assert_array_equal(out.turn_rewards[b, :ep.turns], ep.rewards)
    assert out.tool_calls[b] == ep.turns
    cut_turns += sum(t.text.endswith("c") for t in ep.segments if t.source == "model")
  # episodes finish at different turns (1, 3 and 4) and some turns were cut at the stop string
  assert sorted(set(out.turns.tolist())) == [1, 3, 4] and cut_turns > 0
  # equal to encode_episode's rows with the sampled ids
  for b in range(6):
    ep = out.episodes[b]
    sel = out.model_mask[b]
    model_ids = {k: out.tokens[b][sel & (out.turn_ids[b] == k)].tolist() for k in range(ep.turns)}
    row = envs.encode_episode(ep, CharTok(), model_ids=model_ids)[0]
    np.testing.assert_array_equal(out.tokens[b, :row.tokens.size], row.tokens)
    np.testing.assert_array_equal(out.model_mask[b, :row.tokens.size], row.loss_mask)
    np.testing.assert_array_equal(out.turn_ids[b, :row.tokens.size], row.turn_ids)


def test_failing_env_and_overlong_observation_end_only_their_episodes(model):
  cfg = envs.EpisodeConfig(stop_strings=("c",), max_turns=4)
  out = run_episodes(model, Echo(), [2, "boom", "long"], tokenizer=CharTok(), episode_config=cfg, runner_config=RC,
                     key=jax.random.key(1), n=1, greedy=True)  # greedy: the compiled sampler of the test above
  assert out.failed.tolist() == [False, True, False] and out.truncated.tolist() == [False, False, True]
  assert out.episodes[1].finish == "failed" and "environment bug" in out.episodes[1].error
  assert out.episodes[2].finish == "truncated" and out.turns[2] == 1
  assert out.turns[0] == 2 and out.episodes[0].finish == "env"
  # the failing turn's tokens are in its row (turn 0), the overlong observation is not appended
  assert out.model_mask[1].any() and (out.turn_ids[1][out.model_mask[1]] == 0).all()
  assert not (out.prompt_mask[2] & (out.turn_ids[2] >= 0)).any()
  summary = out.summary()
  assert summary["failed"] == pytest.approx(1 / 3) and summary["truncated"] == pytest.approx(1 / 3)


def test_runner_refuses_a_context_budget(model):
  with pytest.raises(ValueError, match="context_budget"):
    run_episodes(model, Echo(), [1], tokenizer=CharTok(), runner_config=RC, key=jax.random.key(0),
                 episode_config=envs.EpisodeConfig(max_turns=2, context_budget=100))
  with pytest.raises(ValueError, match="max_turns"):
    run_episodes(model, Echo(), [1], tokenizer=CharTok(), runner_config=RC, key=jax.random.key(0),
                 episode_config=envs.EpisodeConfig(max_turns=9))
  with pytest.raises(ValueError, match="RunnerConfig.max_obs_tokens"):
    RunnerConfig(max_obs_tokens=0)


def test_rewind_continues_as_if_the_row_had_stopped_there(model):
  """Greedy: rewinding rows then resuming equals generating from the shortened sequences."""
  cfg = RC.sampler_config  # the runner's compiled sampler (and BIG for the reference)
  prompts = [[1, 4, 5], [1, 6, 7, 8]]
  r, st = generate(model, prompts, config=cfg, key=jax.random.key(0), greedy=True, return_state=True)
  length = np.asarray(st.length)
  new = length - np.array([3, 0])  # row 0 cut 3 tokens back, row 1 unchanged
  st = rewind(st, new, config=cfg)
  assert np.asarray(st.completion_mask)[0].sum() == RC.max_new_tokens - 3
  assert (np.asarray(st.tokens)[0, new[0]:] == 0).all()
  r2, _ = resume(model, st, [[9, 10], [11]], config=cfg, key=jax.random.key(1), greedy=True)
  for b, app in enumerate(([9, 10], [11])):
    seq = np.asarray(r.tokens[b])[:new[b]].tolist() + app
    ref = generate(model, [seq], config=BIG, key=jax.random.key(0), greedy=True)
    k = len(seq) + RC.max_new_tokens
    np.testing.assert_array_equal(np.asarray(r2.tokens[b, :k]), np.asarray(ref.tokens[0, :k]))
    new_turn = slice(len(seq), k)  # the first turn's kept tokens are context in the reference
    np.testing.assert_allclose(np.asarray(r2.logp_behavior[b, new_turn]), np.asarray(ref.logp_behavior[0, new_turn]),
                               atol=2e-5)
  with pytest.raises(ValueError, match="length"):
    rewind(st, length + 1, config=cfg)
