"""The episode runner (rljax.envs.run_episodes) against a brute reference that recomputes every turn's prefix with
``generate`` on the whole text so far (greedy, one episode at a time), the overlapped schedule against the
lockstep one, and the sampler pieces the runner uses (``rewind``, ``compact``, per-row keys)."""
import dataclasses
import threading
import time

import jax
import numpy as np
import pytest
from flax import nnx

from rljax import envs
from rljax.envs._runner import RunnerConfig, run_episodes
from rljax.models import ModelConfig, Transformer, fan_in_init
from rljax.envs import _runner
from rljax.sampling import SamplerConfig, _decode, compact, feed_rows, generate, resume, rewind

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


def test_runner_refuses_bad_sizes(model):
  with pytest.raises(ValueError, match="max_turns"):
    run_episodes(model, Echo(), [1], tokenizer=CharTok(), runner_config=RC, key=jax.random.key(0),
                 episode_config=envs.EpisodeConfig(max_turns=9))
  with pytest.raises(ValueError, match="RunnerConfig.max_obs_tokens"):
    RunnerConfig(max_obs_tokens=0)


@pytest.mark.long
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


class SlowEcho(Echo):
  """``Echo`` whose steps sleep (longer for some problems and turns, so rows finish their steps at different
  times) and count the steps in flight."""

  def __init__(self):
    self.lock, self.in_flight = threading.Lock(), 0

  def step(self, state, action):
    with self.lock:
      self.in_flight += 1
    try:
      problem, t = state
      time.sleep(0.02 + 0.08 * ((len(action) + t + (problem if isinstance(problem, int) else 0)) % 3))
      return super().step(state, action)
    finally:
      with self.lock:
        self.in_flight -= 1


def _rows(out):
  return {k: getattr(out, k) for k in ("tokens", "prompt_mask", "model_mask", "turn_ids", "turn_rewards", "turns",
                                       "failed", "truncated", "tool_calls")}


@pytest.mark.long
@pytest.mark.parametrize("greedy", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_overlapped_schedule_equals_lockstep(model, monkeypatch, greedy):
  """Env steps run while other rows decode (a sampler call is made while a step is in flight), the rows come out
  the same as lockstep: greedy, and sampling (each row samples turn t with fold_in(key, t) in either schedule),
  for both rejoin rules ("chunk": rows join while others decode, through ``feed_rows``). Chunks of 4 tokens with
  turns of up to 6: a chunk can run past the turn's limit, the host cuts it there."""
  seen = []
  real_resume = _runner.resume

  def spy(*a, **k):
    seen.append(env.in_flight)
    return real_resume(*a, **k)

  monkeypatch.setattr(_runner, "resume", spy)
  env, cfg = SlowEcho(), envs.EpisodeConfig(stop_strings=("c",), max_turns=4)
  problems, seeds, n = [1, 3, 4, "boom"], [0, 1, 2, 3], 2
  key = jax.random.key(5) if greedy else jax.random.PRNGKey(5)  # typed or raw keys
  kw = dict(tokenizer=CharTok(), episode_config=cfg, key=key, n=n, seeds=seeds, greedy=greedy, temperature=1.0)
  lock = run_episodes(model, env, problems, runner_config=dataclasses.replace(RC, threads=8), **kw)
  assert max(seen) == 0  # lockstep: no call while an environment steps
  for rejoin in ("turn", "chunk"):
    seen.clear()
    over = run_episodes(model, env, problems, runner_config=dataclasses.replace(
        RC, threads=8, chunk_tokens=4, rejoin=rejoin), **kw)
    assert over.sampler_calls > lock.sampler_calls
    if rejoin == "chunk":  # (with "turn", a step overlaps a call only if turns end in different chunks)
      assert max(seen) > 0
    for k, v in _rows(lock).items():
      np.testing.assert_array_equal(getattr(over, k), v, err_msg=f"{rejoin} {k}")
    np.testing.assert_allclose(over.logp_behavior, lock.logp_behavior, atol=2e-5)
    np.testing.assert_allclose(over.entropy, lock.entropy, atol=2e-5)
    assert [ep.windows for ep in over.episodes] == [ep.windows for ep in lock.episodes]
    assert over.prefilled == lock.prefilled and sorted(set(over.turns.tolist())) == [0, 1, 3, 4]
    assert over.failed.tolist() == [False] * 6 + [True] * 2


def test_compact_frees_gaps_and_changes_nothing(model):
  """Rows that sit out calls leave masked slots; ``compact`` moves each row's keys to the front, and the next
  call samples the same tokens (log-probs up to float summation order) as without it."""
  cfg = dataclasses.replace(RC, chunk_tokens=4).sampler_config
  _, st = generate(model, [[1, 4, 5], [1, 6, 7, 8, 9]], config=cfg, key=jax.random.key(0), greedy=True,
                   return_state=True)
  _, st = resume(model, st, [[10, 11], []], config=cfg, key=jax.random.key(1), greedy=True, active=[True, False])
  _, st = resume(model, st, [[], [12]], config=cfg, key=jax.random.key(2), greedy=True, active=[False, True])
  kv = np.asarray(st.kv_mask)
  count = kv.sum(1)
  np.testing.assert_array_equal(count, np.asarray(st.length) - 1)  # the pending token is not in the cache
  assert int(st.slot) > count.max()  # there are gaps
  small = compact(st)
  assert int(small.slot) == count.max()
  np.testing.assert_array_equal(np.asarray(small.kv_mask), np.arange(kv.shape[1])[None] < count[:, None])
  for layer in range(2):  # each row's keys, in order, moved to the front
    for b in range(2):
      np.testing.assert_array_equal(np.asarray(small.cache.k)[layer, b, :count[b]],
                                    np.asarray(st.cache.k)[layer, b][kv[b]])
  r1, _ = resume(model, st, [[4], [5, 6]], config=cfg, key=jax.random.key(3), greedy=True)
  r2, _ = resume(model, small, [[4], [5, 6]], config=cfg, key=jax.random.key(3), greedy=True)
  np.testing.assert_array_equal(np.asarray(r1.tokens), np.asarray(r2.tokens))
  np.testing.assert_allclose(np.asarray(r1.logp_behavior), np.asarray(r2.logp_behavior), atol=2e-5)


def test_feed_rows_equals_resume_appending(model):
  """Prefilling only some rows (``feed_rows``) then resuming with nothing appended samples what ``resume`` with
  those rows' appended tokens samples (greedy; log-probs up to float summation order)."""
  cfg = dataclasses.replace(RC, chunk_tokens=4).sampler_config
  _, st = generate(model, [[1, 4, 5], [1, 6, 7, 8], [1, 9]], config=cfg, key=jax.random.key(0), greedy=True,
                   return_state=True)
  app = [[], [10, 11, 12], [4]]
  r1, _ = resume(model, st, app, config=cfg, key=jax.random.key(1), greedy=True, active=[False, True, True])
  fed = feed_rows(model, st, [2, 1], [[4], [10, 11, 12]], config=cfg)
  np.testing.assert_array_equal(np.asarray(fed.length), np.asarray(st.length) + [0, 3, 1])
  r2, _ = resume(model, fed, None, config=cfg, key=jax.random.key(1), greedy=True, active=[False, True, True])
  for name in ("tokens", "prompt_mask", "completion_mask"):
    np.testing.assert_array_equal(np.asarray(getattr(r1, name)), np.asarray(getattr(r2, name)), err_msg=name)
  np.testing.assert_allclose(np.asarray(r1.logp_behavior), np.asarray(r2.logp_behavior), atol=2e-5)
  with pytest.raises(ValueError, match="distinct"):
    feed_rows(model, st, [1, 1], [[4], [5]], config=cfg)
  with pytest.raises(ValueError, match="at least one token"):
    feed_rows(model, st, [1], [[]], config=cfg)


@pytest.mark.long
def test_resume_with_one_key_per_row(model):
  """Row b of a call with keys [k_0, k_1] samples what it samples in a call with the single key k_b."""
  cfg = dataclasses.replace(RC, chunk_tokens=4).sampler_config
  _, st = generate(model, [[1, 4, 5], [1, 6, 7]], config=cfg, key=jax.random.key(0), return_state=True)
  ka, kb = jax.random.key(7), jax.random.key(8)
  both, _ = resume(model, st, [[9], [10]], config=cfg, key=jax.numpy.stack([ka, kb]))
  for b, k in enumerate((ka, kb)):
    one, _ = resume(model, st, [[9], [10]], config=cfg, key=k)
    np.testing.assert_array_equal(np.asarray(both.tokens[b]), np.asarray(one.tokens[b]))
  g, i = jax.numpy.array([3, 4]), jax.numpy.array([0, 1])
  for keys in (jax.random.split(jax.random.key(1), 2), jax.random.split(jax.random.PRNGKey(1), 2)):  # typed, raw
    per_row = jax.random.key_data(_decode._seq_keys(keys, g, i))
    for b in range(2):
      np.testing.assert_array_equal(per_row[b], jax.random.key_data(_decode._seq_keys(keys[b], g, i))[b])
  with pytest.raises(ValueError, match="one per row"):
    resume(model, st, [[9], [10]], config=cfg, key=jax.random.split(jax.random.PRNGKey(0), 3))
  with pytest.raises(ValueError, match="RunnerConfig.chunk_tokens"):
    RunnerConfig(chunk_tokens=-1)
  with pytest.raises(ValueError, match="RunnerConfig.rejoin"):
    RunnerConfig(rejoin="now")


def _reference_windows(model, env, problem, seed, cfg: envs.EpisodeConfig):
  """One episode with a context budget through ``envs.advance``, every turn sampled by ``generate`` on the
  current window's whole sequence (nothing cached); a new window starts from ``[bos]`` and its segments, each
  encoded on its own. Returns the episode and, per window, ``(tokens, model mask, logp, turn ids)``."""
  tok = CharTok()
  ep = envs.start(env, problem, seed)
  seq = [tok.bos_id] + tok.encode(ep.context)
  mm, logp, tids = [False] * len(seq), [0.0] * len(seq), [-1] * len(seq)
  rows = []
  for t in range(cfg.max_turns):
    r = generate(model, [seq], config=BIG, key=jax.random.key(0), greedy=True, stop_tokens=[tok.eos_id])
    cm = np.asarray(r.completion_mask[0])
    ids, lps = np.asarray(r.tokens[0])[cm].tolist(), np.asarray(r.logp_behavior[0])[cm].tolist()
    if tok.eos_id in ids:
      ids = ids[:ids.index(tok.eos_id) + 1]
    stop = tok.encode("c")[0]
    if stop in ids:
      ids = ids[:ids.index(stop) + 1]
    seq, mm, logp, tids = seq + ids, mm + [True] * len(ids), logp + lps[:len(ids)], tids + [t] * len(ids)
    before = len(ep.windows)
    ep = envs.advance(env, ep, tok.decode([i for i in ids if i != tok.eos_id]), cfg)
    if ep.done:
      break
    obs = tok.encode(ep.windows[before - 1][-1].text)  # the observation ends the turn's window
    seq, mm, logp, tids = seq + obs, mm + [False] * len(obs), logp + [0.0] * len(obs), tids + [t] * len(obs)
    if len(ep.windows) > before:  # a new window: its own row, from its segments
      rows.append((seq, mm, logp, tids))
      seq, tids = [tok.bos_id], [-1]
      for s in ep.segments:
        seq, tids = seq + tok.encode(s.text), tids + [s.turn] * len(tok.encode(s.text))
      mm, logp = [False] * len(seq), [0.0] * len(seq)
  rows.append((seq, mm, logp, tids))
  return ep, rows


@pytest.mark.parametrize("chunk", [0, pytest.param(4, marks=pytest.mark.slow)])
def test_context_budget_windows_equal_the_advance_path(model, chunk):
  """With a context budget, an episode that goes over it continues in a new window (``fit_context``'s segments,
  re-prefilled for that row only): the transcripts and each window's row equal ``advance`` with every turn
  sampled on the current window's text (greedy), and ``encode_episode``'s rows; lockstep and overlapped."""
  cfg = envs.EpisodeConfig(stop_strings=("c",), max_turns=4, context_budget=12)
  problems, seeds = [4, 3, 1], [0, 1, 2]
  refs = [_reference_windows(model, Echo(), p, s, cfg) for p, s in zip(problems, seeds)]
  # the budget is hit twice in one episode; in another, nothing fits (finish="context")
  assert max(len(ep.windows) for ep, _ in refs) == 3 and "context" in [ep.finish for ep, _ in refs]
  rc = dataclasses.replace(RC, max_prompt_tokens=24, chunk_tokens=chunk, rejoin="chunk")
  out = run_episodes(model, Echo(), problems, tokenizer=CharTok(), episode_config=cfg, runner_config=rc,
                     key=jax.random.key(0), seeds=seeds, greedy=True)
  assert out.tokens.shape[0] == 3 + 2  # the two earlier windows of problem 4's episode: their own rows
  assert [ep.windows for ep in out.episodes] == [ep.windows for ep, _ in refs]
  assert [ep.rewards for ep in out.episodes] == [ep.rewards for ep, _ in refs]
  rows = {(int(e), int(w)): r for r, (e, w) in enumerate(zip(out.row_episode, out.row_window))}
  assert sorted(rows) == sorted((e, w) for e, (ep, _) in enumerate(refs) for w in range(len(ep.windows)))
  for e, (ep, ref_rows) in enumerate(refs):
    for w, (seq, mm, lp, tid) in enumerate(ref_rows):
      r, k = rows[(e, w)], len(seq)
      assert out.row_lengths[r] == k
      np.testing.assert_array_equal(out.tokens[r, :k], seq)
      assert (out.tokens[r, k:] == 0).all() and not out.model_mask[r, k:].any()
      np.testing.assert_array_equal(out.model_mask[r, :k], mm)
      np.testing.assert_allclose(out.logp_behavior[r, :k], lp, atol=2e-5)
      np.testing.assert_array_equal(out.turn_ids[r, :k], tid)
    sel = lambda r: out.model_mask[r]
    model_ids = {}
    for w in range(len(ep.windows)):
      r = rows[(e, w)]
      for t in set(out.turn_ids[r][sel(r)].tolist()):
        model_ids[t] = out.tokens[r][sel(r) & (out.turn_ids[r] == t)].tolist()
    enc = envs.encode_episode(ep, CharTok(), model_ids=model_ids)
    for row in enc:  # the runner's row is encode_episode's up to the observation a finished episode ends with
      k = len(ref_rows[row.window][0])
      assert not row.loss_mask[k:].any()
      np.testing.assert_array_equal(out.tokens[rows[(e, row.window)], :k], row.tokens[:k])
      np.testing.assert_array_equal(out.model_mask[rows[(e, row.window)], :k], row.loss_mask[:k])
      np.testing.assert_array_equal(out.turn_ids[rows[(e, row.window)], :k], row.turn_ids[:k])
