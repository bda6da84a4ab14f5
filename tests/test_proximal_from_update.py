"""The proximal log-probs from the update's own forward (``rl.proximal_forward="auto"``,
``objective_loss(proximal_from_update=True)``): when one optimizer step trains on each batch, the separate proximal
forward computes the numbers the update's forward computes; the update then reads its own, detached."""
import numpy as np
import optax
import pytest
import jax
import jax.numpy as jnp
from flax import nnx

from rljax.models import ModelConfig, Transformer, policy_outputs
from rljax.objectives import chain, ppo_clip, token_mean
from rljax.train import apply_overrides, tiny_config
from rljax.train._inputs import proximal_forward_reason
from rljax.train._step import init_train_state, make_train_step, objective_loss
from rljax.types import TrainBatch


def _reason(tmp_path, overrides):
  cfg = apply_overrides(tiny_config(str(tmp_path)), overrides)
  return proximal_forward_reason(cfg.rl.recipe(), cfg.rl, cfg.model)


@pytest.mark.parametrize("overrides, expected", [
    (["rl.updates_per_batch=1"], ""),
    (["rl.updates_per_batch=2"], "2 update(s) x 1 mini-batch(es)"),
    (["rl.updates_per_batch=1", "rl.num_minibatches=2"], "1 update(s) x 2 mini-batch(es)"),
    (["rl.updates_per_batch=1", "rl.proximal_forward=separate"], "rl.proximal_forward=separate"),
    (["rl.updates_per_batch=1", "rl.controllers=bapo"], "stage(s) ['bapo'] read ['logp_old'] outside the loss"),
    (["rl.updates_per_batch=1", "rl.replay=positive_replay"], "replay stage 'positive_replay'"),
    (["rl.updates_per_batch=1", "rl.loss=reinforce"], "nothing reads"),
])
def test_when_the_update_gives_the_proximal_inputs(tmp_path, overrides, expected):
  reason = _reason(tmp_path, overrides)
  assert (reason == "") if expected == "" else expected in reason, reason


def test_an_moe_model_keeps_the_separate_forward(tmp_path):
  cfg = apply_overrides(tiny_config(str(tmp_path)), ["rl.updates_per_batch=1"])
  moe = ModelConfig.tiny_moe()
  assert "MoE" in proximal_forward_reason(cfg.rl.recipe(), cfg.rl, moe)


def test_bad_value_is_refused(tmp_path):
  with pytest.raises(ValueError, match=r"rl\.proximal_forward.*'auto' or 'separate'"):
    apply_overrides(tiny_config(str(tmp_path)), ["rl.proximal_forward=later"])


def _batch(rng, b=8, t=10, prompt=4):
  tokens = rng.integers(1, 60, (b, t)).astype(np.int32)
  mask = np.zeros((b, t), bool)
  mask[:, prompt:] = True
  mask[1, t - 2:] = False  # a shorter row: padding inside the loss mask's shape
  adv = (rng.normal(size=(b, 1)) * mask).astype(np.float32)
  behavior = (-np.abs(rng.normal(size=(b, t))) * mask).astype(np.float32)
  return TrainBatch(tokens=jnp.asarray(tokens), loss_mask=jnp.asarray(mask), advantages=jnp.asarray(adv),
                    group_id=jnp.asarray(np.repeat(np.arange(b // 2), 2).astype(np.int32)), rewards=jnp.zeros(b),
                    logp_behavior=jnp.asarray(behavior))


@pytest.mark.parametrize("microbatches", [pytest.param(1, marks=pytest.mark.long), 2])
def test_update_equals_the_separate_proximal_forward(microbatches):
  """One update from the same state: the loss, gradient norm and new parameters with ``proximal_from_update``
  equal those with ``logp_old`` from a separate forward (float tolerance: two programs), and the mismatch
  metrics equal a float64 NumPy recomputation over the loss tokens."""
  model = Transformer(ModelConfig.tiny(num_layers=2, vocab_size=64), rngs=nnx.Rngs(0))
  opt = optax.sgd(0.1)
  graphdef, state = init_train_state(model, opt, {})
  batch = _batch(np.random.default_rng(0))
  out = jax.jit(lambda s, tok: policy_outputs(nnx.merge(graphdef, s.params, s.model_state), tok))(state, batch.tokens)
  objective = chain(ppo_clip(eps_low=0.2, eps_high=0.28), aggregate=token_mean)
  own = make_train_step(graphdef, objective_loss(objective, proximal_from_update=True), opt,
                        num_microbatches=microbatches, donate=False)
  separate = make_train_step(graphdef, objective_loss(objective), opt, num_microbatches=microbatches, donate=False)
  new_own, m_own = own(state, batch)
  new_sep, m_sep = separate(state, batch.replace(logp_old=out.logp, entropy_old=out.entropy))
  assert float(m_own["loss"]) == pytest.approx(float(m_sep["loss"]), rel=1e-5, abs=1e-7)
  assert float(m_own["train/grad_norm"]) == pytest.approx(float(m_sep["train/grad_norm"]), rel=1e-4)
  assert float(m_sep["train/grad_norm"]) > 1e-3  # a real gradient
  for a, b in zip(jax.tree_util.tree_leaves(new_own.params), jax.tree_util.tree_leaves(new_sep.params)):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
  assert float(m_own["policy/kl"]) == 0.0 and float(m_own["policy/clip_frac"]) == 0.0  # ratio exactly 1
  mask = np.asarray(batch.loss_mask)
  d = np.asarray(out.logp, np.float64)[mask] - np.asarray(batch.logp_behavior, np.float64)[mask]
  assert float(m_own["rollout/logp_gap"]) == pytest.approx(np.mean(np.abs(d)), rel=1e-5)
  assert float(m_own["rollout/mismatch_kl"]) == pytest.approx(np.mean(np.expm1(d) - d), rel=1e-4)
  assert float(m_own["rollout/mismatch_out_frac"]) == pytest.approx(np.mean(np.abs(d) > np.log(2.0)), abs=1e-7)
  assert "rollout/logp_gap" not in m_sep


@pytest.mark.long  # two loops built and one step trained (~15 s): the fast loop keeps the unit equalities above
def test_the_loop_skips_the_separate_forward(tmp_path):
  """``updates_per_batch=1``: the loop's forwards compute no ``logp_old`` (the update reads its own) and the step
  still logs the mismatch metrics, equal to a float64 recomputation from an independent forward; with
  ``updates_per_batch=2`` the separate forward runs as before."""
  from rljax.train._experiment import NoWriter, build_experiment, run_mesh  # pylint: disable=import-outside-toplevel
  from rljax.train._optim import make_optimizer  # pylint: disable=import-outside-toplevel
  from rljax.train._rl import RLLoop  # pylint: disable=import-outside-toplevel

  def loop_of(updates):
    cfg = apply_overrides(tiny_config(str(tmp_path / str(updates))),
                          ["progress=false", "rl.num_microbatches=2", f"rl.updates_per_batch={updates}"])
    exp = build_experiment(cfg)
    graphdef, state = init_train_state(exp.model, make_optimizer(cfg.rl.optim, 1)[0])
    return RLLoop(exp, graphdef, state, cfg.rl.recipe(), run_mesh(cfg), resume=False, evals=[], writer=NoWriter())

  two = loop_of(2)
  assert not two.proximal_from_update and "logp_old" in two.inputs.needs
  loop = loop_of(1)
  assert loop.proximal_from_update and "logp_old" not in loop.inputs.needs and "logp_old" in loop.needs
  collected = loop.sample(0, loop.state.params, loop.state.model_state, 1.0, loop.stage_states["prompt_filters"])
  data = collected.data
  model = nnx.merge(loop.graphdef, loop.state.params, loop.state.model_state)
  logp = np.asarray(jax.jit(lambda tok: policy_outputs(model, tok).logp)(jnp.asarray(data.tokens)), np.float64)
  row = loop.step(0, collected)
  m = data.completion_mask & data.valid[:, None]
  d = logp[m] - data.logp_behavior.astype(np.float64)[m]
  assert row["rollout/logp_gap"] == pytest.approx(np.mean(np.abs(d)), rel=1e-3, abs=1e-7)
  assert row["policy/kl"] == 0.0
