"""Train/inference mismatch in the RL loop: ``rl.sampler_dtype`` (a bfloat16 sampler next to a float32 trainer),
the mismatch metrics (``rljax/train/_mismatch.py``), the toy MoE of ``ModelSpec`` and rollout routing replay
(``rl.routing_replay``, R3)."""
import functools
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from rljax.models import ModelConfig, Transformer, policy_outputs
from rljax.models._dtype import with_dtype
from rljax.train import _mismatch, apply_overrides, config_from_dict, config_to_dict, tiny_config


@functools.partial(jax.jit, static_argnums=0)
def _forward(graphdef, state, tokens, routing=None):
  out = policy_outputs(nnx.merge(graphdef, state), tokens, routing=routing)
  return out.logp, out.routing


def _outputs(model, tokens, routing=None):
  """``(logp, routing)`` of ``policy_outputs(model, tokens, routing=routing)``, jitted."""
  graphdef, state = nnx.split(model)
  return _forward(graphdef, state, jnp.asarray(tokens), None if routing is None else jnp.asarray(routing))


# ----------------------------------------------------------------------------- config


def test_config_fields_validate_and_default_dense(tmp_path):
  cfg = tiny_config(str(tmp_path))
  assert cfg.model.num_experts == 0 and cfg.rl.sampler_dtype == "" and cfg.rl.routing_replay is False
  moe = apply_overrides(cfg, ["model.num_experts=4", "model.moe_layers=[0]"]).model
  assert (moe.num_experts, moe.num_experts_per_tok, moe.expert_width, moe.moe_layers) == (4, 2, 32, (0,))
  again = apply_overrides(cfg, ["model.num_experts=4", "model.moe_layers=[0]", "rl.sampler_dtype=bfloat16",
                                "rl.routing_replay=true"])
  assert config_from_dict(json.loads(json.dumps(config_to_dict(again)))) == again  # config.json round trip
  bad = {"model.num_experts_per_tok=5": "model.num_experts_per_tok",  # > num_experts (with num_experts=4)
         "model.moe_layers=[1]": "model.moe_layers",  # the tiny model has 1 layer
         "model.num_experts=-1": "model.num_experts",
         "rl.sampler_dtype=float16": "rl.sampler_dtype",
         "rl.routing_replay=maybe": "rl.routing_replay"}
  for item, field in bad.items():
    extra = [] if item.startswith(("rl.", "model.num_experts=")) else ["model.num_experts=4"]
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
      apply_overrides(cfg, extra + [item])
  for item in ("model.num_experts_per_tok=1", "model.moe_intermediate_size=8"):  # MoE fields on a dense model
    with pytest.raises(ValueError, match="when num_experts=0"):
      apply_overrides(cfg, [item])
  assert apply_overrides(cfg, ["rl.sampler_dtype=none"]).rl.sampler_dtype == ""


def test_with_dtype_casts_a_copy():
  model = Transformer(ModelConfig.tiny(num_layers=1), rngs=nnx.Rngs(0))  # (MoE copies: the loop tests)
  assert with_dtype(model, "float32") is model
  low = with_dtype(model, "bfloat16")
  assert low.cfg.compute_dtype == low.cfg.param_dtype == "bfloat16"
  pairs = zip(nnx.to_flat_state(nnx.state(model, nnx.Param)), nnx.to_flat_state(nnx.state(low, nnx.Param)))
  for (path, a), (_, b) in pairs:
    assert a[...].dtype == jnp.float32 and b[...].dtype == jnp.bfloat16, path
    np.testing.assert_array_equal(np.asarray(b[...]), np.asarray(a[...].astype(jnp.bfloat16)))
  tokens = jnp.asarray(np.random.default_rng(0).integers(0, 128, (2, 12)))
  gap = np.abs(np.asarray(_outputs(model, tokens)[0]) - np.asarray(_outputs(low, tokens)[0]))[:, 1:]
  assert 1e-5 < gap.max() < 0.1  # bfloat16 numerics: close, not equal


# ----------------------------------------------------------------------------- formulas


def test_mismatch_formulas_by_hand():
  ls = np.array([[0.0, -1.0, -2.0, 0.0]])
  lt = np.array([[5.0, -1.5, -1.0, 7.0]])  # columns 0 and 3 are off the mask
  mask = np.array([[False, True, True, False]])
  s = _mismatch.logp_gap_sums(ls, lt, mask)
  # d = (-0.5, 1.0): |d| sums to 1.5; k3 = (e^-0.5 - 1 + 0.5) + (e - 1 - 1)
  assert s["tokens"] == 2 and s["gap"] == pytest.approx(1.5)
  assert s["k3"] == pytest.approx(np.exp(-0.5) - 0.5 + np.e - 2.0, rel=1e-12)
  assert s["out"] == 1  # |d| = 1.0 > log 2 (ratio e, outside [1/2, 2]); |d| = 0.5 inside
  m = _mismatch.finish(s)
  assert m == pytest.approx({"rollout/logp_gap": 0.75, "rollout/mismatch_kl": (np.exp(-0.5) - 0.5 + np.e - 2) / 2,
                             "rollout/mismatch_out_frac": 0.5})
  # the bound is log 2 itself: a ratio of exactly 2 or 1/2 is inside
  edge = _mismatch.logp_gap_sums(np.zeros((1, 3)), np.array([[np.log(2.0), -np.log(2.0), np.log(2.0) + 1e-9]]),
                                 np.ones((1, 3), bool))
  assert edge["out"] == 1
  # rows: prompt | completion | padding; the last real token of a row was never fed to the sampler
  pm = np.array([[1, 1, 0, 0, 0], [1, 0, 0, 0, 0], [1, 1, 0, 0, 0]], bool)
  cm = np.array([[0, 0, 1, 1, 0], [0, 1, 0, 0, 0], [0, 0, 1, 0, 0]], bool)
  pos = _mismatch.routed_positions(pm, cm, np.array([True, True, False]))
  np.testing.assert_array_equal(pos, [[1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [0, 0, 0, 0, 0]])
  a = np.zeros((3, 5, 2, 2), np.int32)
  a[..., 1] = 1  # experts {0, 1} everywhere
  b = a.copy()
  b[0, 0, 0] = [1, 0]  # the same set in another order: not a different decision
  b[0, 1, 1] = [0, 3]  # a different set (layer 1 of token 1)
  b[0, 3, 0] = [2, 3]  # different, but at an unrouted position
  r = _mismatch.routing_sums(a, b, pos)
  assert r == {"routing_differ": 1.0, "routing_decisions": 8.0}  # 4 routed tokens x 2 layers
  assert _mismatch.finish(r)["rollout/routing_mismatch"] == 0.125


# ----------------------------------------------------------------------------- in the loop


def _loop(tmp_path, overrides, near_ties: bool = False):
  """An ``RLLoop`` of the tiny config (no SFT) and its first step's data after the forwards, with the metrics."""
  from rljax.train._experiment import NoWriter, build_experiment, run_mesh  # pylint: disable=import-outside-toplevel
  from rljax.train._optim import make_optimizer  # pylint: disable=import-outside-toplevel
  from rljax.train._rl import RLLoop  # pylint: disable=import-outside-toplevel
  from rljax.train._step import init_train_state  # pylint: disable=import-outside-toplevel
  cfg = apply_overrides(tiny_config(str(tmp_path)), ["progress=false", "rl.num_microbatches=1"] + overrides)
  exp = build_experiment(cfg)
  if near_ties:  # router columns (experts) nearly equal: bfloat16 rounding of each column flips some top-k choices
    for layer in exp.model.layers:
      w = layer.mlp.router[...]
      layer.mlp.router[...] = w[:, :1] + 1e-3 * w
  graphdef, state = init_train_state(exp.model, make_optimizer(cfg.rl.optim, 1)[0])
  loop = RLLoop(exp, graphdef, state, cfg.rl.recipe(), run_mesh(cfg), resume=False, evals=[], writer=NoWriter())
  collected = loop.sample(0, loop.state.params, loop.state.model_state, 1.0, loop.stage_states["prompt_filters"])
  metrics = {}
  data = loop.inputs(collected.data, loop.state, None, metrics)
  return loop, data, metrics, collected


def _trainer(loop, data, routing=None):
  """``(logp, routing)``: the float32 trainer's own forward (``policy_outputs``, not the loop's forwards)."""
  return _outputs(nnx.merge(loop.graphdef, loop.state.params, loop.state.model_state), data.tokens, routing)


def _reference_metrics(data, logp_trainer):
  m = data.completion_mask & data.valid[:, None]
  d = np.asarray(logp_trainer, np.float64)[m] - data.logp_behavior.astype(np.float64)[m]
  return np.mean(np.abs(d)), np.mean(np.exp(d) - 1.0 - d)


def test_sampler_dtype_gap(tmp_path):
  """bfloat16 sampler, float32 trainer (a dense model): a gap, logged as the float64 recomputation from the
  sampler's log-probs and an independent trainer forward. (A float32 sampler gives a gap of float32 summation
  order only: test_routing_replay_float32_sampler_matches_trainer.)"""
  loop, data, m16, _ = _loop(tmp_path / "bf16", ["rl.sampler_dtype=bfloat16"])
  gap, kl = _reference_metrics(data, _trainer(loop, data)[0])
  assert m16["rollout/logp_gap"] > 1e-4  # bfloat16 rounding: ~2^-8 relative in every matmul
  assert m16["rollout/logp_gap"] == pytest.approx(gap, rel=1e-4)
  assert m16["rollout/mismatch_kl"] == pytest.approx(kl, rel=1e-3)
  assert "rollout/routing_mismatch" not in m16  # a dense model


@pytest.mark.long
def test_routing_replay_float32_sampler_matches_trainer(tmp_path):
  """A tiny MoE, float32 sampler, replay: the sampler's recorded routing is the trainer's own (so it is aligned
  with the tokens) and the replayed trainer log-probs equal the sampler's to float tolerance."""
  loop, data, m, _ = _loop(tmp_path, ["model.num_experts=4", "rl.routing_replay=true", "rl.sampler_dtype=float32"])
  assert loop.prefix == 0  # the shared-prompt forward does not route per row
  cm = data.completion_mask & data.valid[:, None]
  np.testing.assert_allclose(data.logp_old[cm], data.logp_behavior[cm], atol=2e-5)
  assert m["rollout/routing_mismatch"] == 0.0
  assert m["rollout/logp_gap"] < 2e-6 and abs(m["rollout/mismatch_kl"]) < 1e-10
  logp, own = _trainer(loop, data)
  # the gap without replay is float32 rounding here (~2e-7): another compiled forward (this test's own) rounds
  # differently by a few 1e-9 depending on the rows' width, so the float64 recomputation reads the loop's
  # forward without replay; the independent forward checks the routing below
  no_replay = loop.inputs.forward(loop.state.params, loop.state.model_state, jnp.asarray(data.tokens))[0]
  gap, _ = _reference_metrics(data, np.asarray(no_replay))
  assert m["rollout/logp_gap_no_replay"] == pytest.approx(gap, rel=1e-6, abs=1e-12)
  np.testing.assert_allclose(np.asarray(no_replay)[cm], np.asarray(logp)[cm], atol=2e-6)
  pos = _mismatch.routed_positions(data.prompt_mask, data.completion_mask, data.valid)
  np.testing.assert_array_equal(np.sort(np.asarray(own), -1)[pos], np.sort(data.routing, -1)[pos])


@pytest.mark.long
def test_routing_replay_bfloat16_sampler(tmp_path):
  """bfloat16 sampler, near-tie routers: the trainer's own router disagrees with the sampler's on some tokens;
  replayed, the trainer uses exactly the sampler's experts (the update's forward included) and its log-prob gap
  shrinks to the bfloat16 numerics alone. Then one RL step (2 micro-batches) trains on the replayed batch."""
  from rljax.train._inputs import train_batch  # pylint: disable=import-outside-toplevel
  from rljax.train._step import _policy_outputs  # pylint: disable=import-outside-toplevel
  loop, data, m, collected = _loop(tmp_path, ["model.num_experts=4", "rl.routing_replay=true",
                                              "rl.sampler_dtype=bfloat16", "rl.num_microbatches=2"], near_ties=True)
  pos = _mismatch.routed_positions(data.prompt_mask, data.completion_mask, data.valid)
  own = np.sort(np.asarray(_trainer(loop, data)[1]), -1)
  differ = np.any(own != np.sort(data.routing, -1), -1)[pos]
  assert m["rollout/routing_mismatch"] == pytest.approx(differ.mean()) and m["rollout/routing_mismatch"] > 0
  batch = train_batch(data, loop.rows_sh, loop.rl.batch_size, routing=True)
  np.testing.assert_array_equal(np.asarray(batch.routing), data.routing)
  replayed = _trainer(loop, data, batch.routing)
  np.testing.assert_array_equal(np.asarray(replayed[1]), data.routing)
  gap, _ = _reference_metrics(data, replayed[0])
  assert m["rollout/logp_gap"] == pytest.approx(gap, rel=1e-4)
  assert m["rollout/logp_gap"] < m["rollout/logp_gap_no_replay"]
  assert train_batch(data, loop.rows_sh, loop.rl.batch_size).routing is None  # replayed only when asked
  update_forward = jax.jit(lambda p, b: _policy_outputs(nnx.merge(loop.graphdef, p, loop.state.model_state), b, 1.0))
  out = update_forward(loop.state.params, batch)  # the forward of objective_loss (the update and its pre-pass)
  np.testing.assert_array_equal(np.asarray(out.routing), data.routing)
  np.testing.assert_allclose(np.asarray(out.logp), np.asarray(replayed[0]), atol=1e-6)
  row = loop.step(0, collected)
  assert np.isfinite(row["loss"]) and row["train/skipped"] == 0.0
  assert row["rollout/routing_mismatch"] == m["rollout/routing_mismatch"]


def test_routing_replay_refused_on_a_dense_model(tmp_path):
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  cfg = apply_overrides(tiny_config(str(tmp_path / "run")), ["rl.routing_replay=true"])
  with pytest.raises(ValueError, match=r"rl\.routing_replay=True: needs an MoE model"):
    train(cfg)
  assert not os.path.exists(cfg.out_dir)  # refused before anything is written


@pytest.mark.slow  # ~50-100 s on 2 busy cores; test_routing_replay_bfloat16_sampler runs the loop's step
def test_two_step_moe_run_logs_the_metrics(tmp_path):
  from rljax.train import read_jsonl, train  # pylint: disable=import-outside-toplevel
  cfg = apply_overrides(tiny_config(str(tmp_path)), [
      "model.num_experts=4", "rl.routing_replay=true", "rl.sampler_dtype=bfloat16", "rl.steps=2", "sft.steps=1",
      "checkpoint.enabled=false", "eval.num_problems=4", "eval.batch_size=4", "eval.num_samples=1", "eval.pass_k=1",
      "progress=false"])
  train(cfg)
  rows = [r for r in read_jsonl(os.path.join(cfg.out_dir, "metrics.jsonl")) if r["stage"] == "rl" and "loss" in r]
  assert len(rows) == 2
  for r in rows:
    for key in ("rollout/logp_gap", "rollout/mismatch_kl", "rollout/routing_mismatch", "rollout/logp_gap_no_replay"):
      assert np.isfinite(r[key]), key
    assert r["rollout/logp_gap"] > 0 and np.isfinite(r["loss"])
