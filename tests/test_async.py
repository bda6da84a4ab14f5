"""The asynchronous runner (``rl.async_staleness``, rljax/train/_async.py): staleness, the producer's gate and
faults, the interruptible sampler (partial and restarted rollouts, per-token versions and behaviour log-probs),
and the runner in ``train`` (eta = 0 equals the synchronous loop bit for bit; SIGTERM + resume loses and
duplicates no prompt)."""
import functools
import os
import signal
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from _rewards import dense_reward
from rljax.models import ModelConfig, Transformer
from rljax.sampling import FinishReason, SamplerConfig
from rljax.train import apply_overrides, read_jsonl, tiny_config
from rljax.train._async import (InterruptibleSampler, Producer, WeightBox, Weights, continuation_buckets,
                                drop_stale, row_staleness)

EOS = 1


def test_row_staleness_is_the_oldest_completion_token():
  version = np.array([[-1, 3, 4, 5], [-1, -1, 7, 7], [-1, -1, -1, -1]], np.int32)
  cm = np.array([[0, 1, 1, 1], [0, 0, 1, 0], [0, 0, 0, 0]], bool)
  np.testing.assert_array_equal(row_staleness(version, cm, current=7), [4, 0, 0])  # hand-derived
  assert continuation_buckets((8,), 6, 2) == (8, 10, 12)  # after 0, 1, 2 chunks of 2 (< 6 generated)


def test_the_trainer_drops_and_counts_rows_older_than_eta():
  from rljax.stages import probe_step  # pylint: disable=import-outside-toplevel
  data = probe_step()  # 4 rows; completion tokens at columns 1..3 (row 1: 1..2)
  version = np.array([[-1, 5, 6, 6], [-1, 3, 6, -1], [-1, 4, 4, 4], [-1, 6, 6, 6]], np.int32)
  data = data.replace(extras={"policy_version": version}, valid=np.array([True, True, True, False]))
  out, dropped, m = drop_stale(data, 6, 2, start_version=0)
  assert dropped == 1 and out.valid.tolist() == [True, False, True, False]  # row 1 (3 < 6 - 2) dropped; row 3 invalid
  np.testing.assert_allclose(m["async/staleness_mean"], np.mean([1, 0, 0, 2, 2, 2]))  # rows 0 and 2
  assert m["async/staleness_max"] == 2
  same, dropped, m = drop_stale(data.replace(extras={}), 6, 0, start_version=6)  # no tags: the batch's version
  assert dropped == 0 and same.valid.tolist() == data.valid.tolist() and m["async/staleness_max"] == 0


def _box(version=0):
  box = WeightBox()
  box.publish(Weights(version, None, None, {}))
  return box


def test_producer_gate_keeps_at_most_eta_plus_one_batches_ahead():
  box, produced = _box(0), []

  def produce(k, w):
    produced.append((k, w.version))
    return k

  prod = Producer(produce, box, start=0, stop_at=6, staleness=1, poll_s=0.01)
  try:
    time.sleep(0.3)
    assert produced == [(0, 0), (1, 0)]  # batch 2 waits for version 1
    assert prod.get(0) == 0 and prod.get(1) == 1
    box.publish(Weights(1, None, None, {}))
    assert prod.get(2) == 2
    time.sleep(0.2)
    assert [k for k, _ in produced] == [0, 1, 2]
    assert all(v >= k - 1 for k, v in produced)
  finally:
    prod.close()


def test_producer_that_raises_stops_the_consumer_with_the_error():
  def produce(k, w):
    if k == 1:
      raise KeyError("reward server down")
    return k

  prod = Producer(produce, _box(5), start=0, stop_at=4, staleness=0, poll_s=0.01)
  try:
    assert prod.get(0) == 0
    t = time.perf_counter()
    with pytest.raises(RuntimeError, match="failed on batch 1: KeyError") as err:
      prod.get(1)
    assert isinstance(err.value.__cause__, KeyError) and time.perf_counter() - t < 5
    with pytest.raises(RuntimeError, match="stopped before batch 2"):  # the thread is gone: no hang
      prod.get(2)
  finally:
    prod.close()


def test_close_releases_a_producer_waiting_at_the_gate():
  prod = Producer(lambda k, w: k, _box(0), start=5, stop_at=9, staleness=0, poll_s=0.01)
  done = threading.Event()
  threading.Thread(target=lambda: (prod.close(), done.set()), daemon=True).start()
  assert done.wait(5)


# ----------------------------------------------------------------------------- the interruptible sampler

CFG = ModelConfig.tiny(vocab_size=24, hidden_size=32, intermediate_size=64, num_heads=2, num_layers=1)
SCFG = SamplerConfig(max_new_tokens=6, prompt_buckets=(8,), pad_id=0)
PROMPTS = [np.array([3, 4, 5]), np.array([6, 7, 8, 9, 10])]


@functools.lru_cache(maxsize=None)
def _weights():
  """``(graphdef, w0, w1)``: two policies of one architecture (two initialisations)."""
  graphdef, params, rest = nnx.split(Transformer(CFG, rngs=nnx.Rngs(0)), nnx.Param, ...)
  _, other, _ = nnx.split(Transformer(CFG, rngs=nnx.Rngs(1)), nnx.Param, ...)
  return graphdef, Weights(0, params, rest, {}), Weights(1, other, rest, {})


def _sample(graphdef, schedule, *, chunk, partial=True, max_new=None, stop_tokens=(EOS,)):
  """``schedule(call_index) -> Weights`` read before each chunk."""
  calls = []

  def latest():
    calls.append(None)
    return schedule(len(calls) - 1)

  sampler = InterruptibleSampler(graphdef, latest, config=SCFG, chunk=chunk, partial=partial,
                                 stop_tokens=list(stop_tokens))
  out = sampler(PROMPTS, n=3, greedy=False, temperature=1.0, key=jax.random.PRNGKey(7), max_new=max_new)
  return out, sampler.stats


def _reference_logp(graphdef, w, tokens):
  model = nnx.merge(graphdef, w.params, w.model_state)
  positions = jnp.broadcast_to(jnp.arange(tokens.shape[1]), tokens.shape)
  logits = model(jnp.asarray(tokens), positions, return_logits=True).logits
  logp = jax.nn.log_softmax(logits.astype(jnp.float32), -1)
  out = np.zeros(tokens.shape, np.float32)
  out[:, 1:] = np.take_along_axis(np.asarray(logp[:, :-1]), tokens[:, 1:, None], -1)[..., 0]
  return out


@pytest.mark.long
def test_chunking_does_not_change_the_samples():
  graphdef, w0, _ = _weights()
  one, _ = _sample(graphdef, lambda i: w0, chunk=6, stop_tokens=())
  chunked, stats = _sample(graphdef, lambda i: w0, chunk=3, stop_tokens=())
  assert stats["chunks"] == 2 and stats["switches"] == 0
  np.testing.assert_array_equal(chunked.tokens, one.tokens)
  np.testing.assert_array_equal(chunked.completion_mask, one.completion_mask)
  np.testing.assert_allclose(chunked.logp_behavior, one.logp_behavior, atol=2e-5)
  assert one.completion_mask.sum(1).tolist() == [6] * 6 and (one.token_version[one.completion_mask] == 0).all()
  ref = _reference_logp(graphdef, w0, one.tokens)  # the behaviour log-probs are the policy's
  np.testing.assert_allclose(one.logp_behavior[one.completion_mask], ref[one.completion_mask], atol=2e-5)


def test_partial_rollouts_record_each_tokens_version_and_logp():
  """New weights after the first chunk: unfinished rows continue under them; every token's behaviour log-prob
  is the log-prob of the weights its version names, given the whole prefix (an independent forward)."""
  graphdef, w0, w1 = _weights()
  out, stats = _sample(graphdef, lambda i: w0 if i < 2 else w1, chunk=3, stop_tokens=())
  cm = out.completion_mask
  assert stats["switches"] == 1 and stats["interrupted_rows"] == 6 and stats["restarted_rows"] == 0
  plen = np.repeat([3, 5], 3)
  for r in range(6):  # 3 tokens of version 0, then 3 of version 1
    np.testing.assert_array_equal(out.token_version[r, plen[r]:plen[r] + 6], [0] * 3 + [1] * 3)
  np.testing.assert_array_equal(out.policy_version, [0] * 6)
  ref0, ref1 = _reference_logp(graphdef, w0, out.tokens), _reference_logp(graphdef, w1, out.tokens)
  ref = np.where(out.token_version == 0, ref0, ref1)
  np.testing.assert_allclose(out.logp_behavior[cm], ref[cm], atol=2e-5)
  assert np.abs(ref0 - ref1)[out.token_version == 1].max() > 0.05  # the two policies really differ there
  only0, _ = _sample(graphdef, lambda i: w0, chunk=3, stop_tokens=())
  first = cm & (out.token_version == 0)
  np.testing.assert_array_equal(out.tokens[first], only0.tokens[first])  # the first chunk is v0's draw


def test_restarted_rollouts_are_the_new_policys_draws():
  graphdef, w0, w1 = _weights()
  out, stats = _sample(graphdef, lambda i: w0 if i < 2 else w1, chunk=3, partial=False, stop_tokens=())
  assert stats["restarted_rows"] == 6 and stats["discarded_tokens"] == 18
  assert (out.token_version[out.completion_mask] == 1).all() and out.policy_version.tolist() == [1] * 6
  only1, _ = _sample(graphdef, lambda i: w1, chunk=3, stop_tokens=())
  np.testing.assert_array_equal(out.tokens, only1.tokens)
  np.testing.assert_allclose(out.logp_behavior, only1.logp_behavior, atol=2e-5)


def test_per_row_caps_and_stop_tokens():
  graphdef, w0, _ = _weights()
  caps = np.array([1, 6, 2, 5, 3, 4])
  out, _ = _sample(graphdef, lambda i: w0, chunk=3, max_new=caps, stop_tokens=())
  np.testing.assert_array_equal(out.completion_mask.sum(1), caps)
  assert (out.finish_reason == int(FinishReason.LENGTH)).all()
  full, _ = _sample(graphdef, lambda i: w0, chunk=3, stop_tokens=())
  np.testing.assert_array_equal(np.where(out.completion_mask, out.tokens, 0), np.where(out.completion_mask,
                                                                                      full.tokens, 0))
  stopped, _ = _sample(graphdef, lambda i: w0, chunk=3, stop_tokens=[int(full.tokens[0, 4])])  # row 0's 2nd token
  row = stopped.completion_mask[0]
  assert row.sum() <= 2 and stopped.finish_reason[0] == int(FinishReason.STOP_TOKEN)
  with pytest.raises(ValueError, match="max_new must hold 6 ints in \\[1, 6\\]"):
    _sample(graphdef, lambda i: w0, chunk=3, max_new=np.full(6, 7))


def _sample_rows(graphdef, schedule, *, reuse, n, caps=None, chunk=2, stop_tokens=()):
  calls = []

  def latest():
    calls.append(None)
    return schedule(len(calls) - 1)

  sampler = InterruptibleSampler(graphdef, latest, config=SCFG, chunk=chunk, partial=True,
                                 stop_tokens=list(stop_tokens), reuse_cache=reuse)
  out = sampler(PROMPTS, n=n, greedy=False, temperature=1.0, key=jax.random.PRNGKey(3), max_new=caps)
  return out, sampler.stats


@pytest.mark.parametrize("switch", [pytest.param(False, marks=pytest.mark.long), True])
def test_reusing_the_cache_between_chunks_equals_prefilling_every_chunk(switch):
  """Chunks of one version continue the cached rows (no prefill); new weights, or few enough rows left for a
  smaller batch, prefill again. Tokens equal the prefill-every-chunk sampler's, log-probs to float rounding, and
  each token's log-prob is its version's (an independent forward)."""
  graphdef, w0, w1 = _weights()
  schedule = (lambda i: w0 if i < 2 else w1) if switch else (lambda i: w0)  # read before chunks 1, 2, 3: i = 1..3
  # 12 rows (prompt lengths 3 and 5, n = 6), chunks of 2: 10 rows go on after chunk 1 (a batch of 12 still),
  # 6 after chunk 2 (a batch of 8 < 12: prefilled again)
  caps = np.array([6, 2, 6, 4, 4, 6, 6, 2, 4, 4, 6, 6])
  ref, ref_stats = _sample_rows(graphdef, schedule, reuse=False, n=6, caps=caps)
  out, stats = _sample_rows(graphdef, schedule, reuse=True, n=6, caps=caps)
  np.testing.assert_array_equal(out.tokens, ref.tokens)
  np.testing.assert_array_equal(out.completion_mask, ref.completion_mask)
  np.testing.assert_array_equal(out.token_version, ref.token_version)
  np.testing.assert_allclose(out.logp_behavior, ref.logp_behavior, atol=2e-5)
  np.testing.assert_array_equal(out.completion_mask.sum(1), caps)
  assert ref_stats["prefills"] == ref_stats["chunks"] == stats["chunks"] == 3
  assert ref_stats["prefilled_tokens"] == 6 * (3 + 5) + 5 * (5 + 7) + 3 * (7 + 9)
  # chunk 1 prefills the prompts; chunk 2 continues the cache (same weights) or prefills 10 rows (new weights);
  # chunk 3 prefills the 6 rows left
  assert stats["prefills"] == (3 if switch else 2)
  assert stats["prefilled_tokens"] == 6 * (3 + 5) + (5 * (5 + 7) if switch else 0) + 3 * (7 + 9)
  ref0, ref1 = _reference_logp(graphdef, w0, out.tokens), _reference_logp(graphdef, w1, out.tokens)
  cm = out.completion_mask
  expect = np.where(out.token_version == 0, ref0, ref1)
  np.testing.assert_allclose(out.logp_behavior[cm], expect[cm], atol=2e-5)
  assert (out.token_version[cm] == 1).any() == switch


def test_reused_cache_rows_that_stop_stay_stopped():
  graphdef, w0, _ = _weights()
  full, _ = _sample_rows(graphdef, lambda i: w0, reuse=True, n=3)
  stop = int(full.tokens[1, 3 + 2])  # row 1's third token (row 1 has prompt 0, 3 tokens)
  ref, _ = _sample_rows(graphdef, lambda i: w0, reuse=False, n=3, stop_tokens=[stop])
  out, stats = _sample_rows(graphdef, lambda i: w0, reuse=True, n=3, stop_tokens=[stop])
  np.testing.assert_array_equal(out.tokens, ref.tokens)
  np.testing.assert_array_equal(out.completion_mask, ref.completion_mask)
  np.testing.assert_array_equal(out.finish_reason, ref.finish_reason)
  assert (out.finish_reason == int(FinishReason.STOP_TOKEN)).any() and stats["prefills"] == 1


# ----------------------------------------------------------------------------- the runner in train()

def _train(out, extra, reward_fn=dense_reward, resume=False):
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  cfg = apply_overrides(tiny_config(str(out)), ["rl.steps=4", "checkpoint.every=100", "sft.steps=2"] + extra)
  train(cfg, reward_fn=reward_fn, resume=resume)
  return [r for r in read_jsonl(os.path.join(cfg.out_dir, "metrics.jsonl")) if r["stage"] == "rl" and "loss" in r]


def test_config_errors_name_the_field(tmp_path):
  cfg = tiny_config(str(tmp_path))
  with pytest.raises(ValueError, match="rl.async_staleness"):
    apply_overrides(cfg, ["rl.async_staleness=-1"])
  with pytest.raises(ValueError, match="rl.async_staleness.*rollout_ahead"):
    apply_overrides(cfg, ["rl.async_staleness=1", "rl.rollout_ahead=true"])
  with pytest.raises(ValueError, match="rl.async_chunk_tokens"):
    apply_overrides(cfg, ["rl.async_chunk_tokens=-2"])
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  with pytest.raises(ValueError, match="rl.async_staleness=2"):
    train(apply_overrides(cfg, ["rl.async_staleness=2", "rl.replay=rapo_replay"]), reward_fn=dense_reward)


@pytest.mark.long
def test_staleness_zero_equals_the_synchronous_loop_bit_for_bit(tmp_path):
  sync = _train(tmp_path / "sync", [])
  eta0 = _train(tmp_path / "eta0", ["rl.async_staleness=0"])
  assert len(sync) == len(eta0) == 4
  for a, b in zip(sync, eta0):
    assert b["async/dropped"] == 0 and b["async/staleness_max"] == 0 and b["async/version_lag"] == 0
    for key, value in a.items():
      if not key.startswith("time/") and key not in ("wall_s", "time"):
        assert b[key] == value, key
  from rljax.train import load_run  # pylint: disable=import-outside-toplevel
  leaves = [jax.tree_util.tree_leaves(load_run(str(tmp_path / d), stage="rl")[2].params) for d in ("sync", "eta0")]
  for x, y in zip(*leaves):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.long
def test_bounded_staleness_runs_and_never_trains_stale_rows(tmp_path):
  """eta = 2 in train(): rows carry per-token versions, none older than eta is trained on. (One chunk per
  batch here, to keep compilations few: the interruptions are tested on the sampler above.)"""
  from rljax.train._rl import RLLoop  # pylint: disable=import-outside-toplevel
  seen = []
  step = RLLoop.step

  def recording_step(self, s, collected):
    version = collected.data.extras["policy_version"]
    cm = collected.data.completion_mask
    seen.append((s, int(self.state.step), version[cm].min(), version[cm].max(), (version[~cm] == -1).all()))
    return step(self, s, collected)

  with pytest.MonkeyPatch.context() as mp:
    mp.setattr(RLLoop, "step", recording_step)
    rows = _train(tmp_path / "x", ["rl.async_staleness=2", "rl.async_chunk_tokens=4", "rl.optim.learning_rate=0.05"])
  assert len(rows) == 4 and [s for s, *_ in seen] == [0, 1, 2, 3]
  for (s, _, lo, hi, off), r in zip(seen, rows):
    assert s - 2 <= lo <= hi <= s and off  # versions of this batch: within eta of the trainer's
    assert r["async/dropped"] == 0 and r["async/staleness_max"] == s - lo
    assert 0 <= r["async/staleness_mean"] <= r["async/staleness_max"] and 0 <= r["async/trainer_idle_fraction"] <= 1
    assert np.isfinite(r["loss"])


@pytest.mark.long  # ~25 s on 2 cores: the fast loop's budget
def test_producer_crash_stops_the_run(tmp_path):
  calls = []

  def reward(completions, problems):
    calls.append(None)
    if len(calls) == 3:
      raise KeyError("verifier crashed")
    return dense_reward(completions, problems)

  t = time.perf_counter()
  with pytest.raises(RuntimeError, match="rollout producer failed on batch") as err:
    _train(tmp_path / "x", ["rl.async_staleness=1"], reward_fn=reward)
  assert "verifier crashed" in str(err.value) and time.perf_counter() - t < 120


@pytest.mark.long  # ~25-29 s on 2 cores: a kill-and-resume guard, the fast loop's budget
def test_sigterm_then_resume_loses_and_duplicates_no_prompt(tmp_path, monkeypatch):
  from rljax.train import Preempted  # pylint: disable=import-outside-toplevel
  from rljax.train._rl import RLLoop  # pylint: disable=import-outside-toplevel
  trained = []
  step = RLLoop.step

  def recording_step(self, s, collected):
    trained.append((s, sorted(np.unique(collected.data.prompt_index).tolist())))
    return step(self, s, collected)

  monkeypatch.setattr(RLLoop, "step", recording_step)
  extra = ["rl.async_staleness=2", "rl.steps=6"]
  _train(tmp_path / "full", extra)
  full, trained[:] = list(trained), []
  calls = []

  def reward(completions, problems):  # SIGTERM while the producer samples batch 2
    calls.append(None)
    if len(calls) == 3:
      os.kill(os.getpid(), signal.SIGTERM)
    return dense_reward(completions, problems)

  from rljax.train._rollout import Collector  # pylint: disable=import-outside-toplevel
  sampled = []
  collect = Collector.__call__

  def recording_collect(self, params, model_state, step, *args, **kwargs):
    sampled.append(step)
    return collect(self, params, model_state, step, *args, **kwargs)

  monkeypatch.setattr(Collector, "__call__", recording_collect)
  saves = []
  save = RLLoop.save

  def recording_save(self, s, *args):
    saves.append((s, max(sampled)))
    return save(self, s, *args)

  monkeypatch.setattr(RLLoop, "save", recording_save)
  with pytest.raises(Preempted):
    _train(tmp_path / "cut", extra, reward_fn=reward)
  first = list(trained)
  assert 0 < len(first) < 6, first
  assert saves[-1][0] == len(first) and saves[-1][1] >= len(first), saves  # batches in flight at the save
  _train(tmp_path / "cut", extra, reward_fn=reward, resume=True)  # the same recipe (no more signals)
  resumed = trained[len(first):]
  assert [s for s, _ in first + resumed] == list(range(6))
  want = [i for _, p in full for i in p]
  got = [i for _, p in first + resumed for i in p]
  lost = len(set(want) - set(got)) + sum(max(0, want.count(i) - got.count(i)) for i in set(got))
  duplicated = sum(max(0, got.count(i) - want.count(i)) for i in set(got))
  assert (lost, duplicated) == (0, 0)
  assert [p for _, p in first + resumed] == [p for _, p in full]  # the same prompts, step by step
