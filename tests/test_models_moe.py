"""MoE layers: ragged vs dense experts, routing capture, routing replay (R3/R2), aux loss."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from rljax.models import ModelConfig, Transformer, load_balancing_loss, policy_outputs


def _tokens(b, t, seed=0):
  return jnp.asarray(np.random.RandomState(seed).randint(0, 128, (b, t)), jnp.int32)


def _model(seed=0, expert_std=0.3, **kw):
  cfg = ModelConfig.tiny_moe(**kw)
  m = Transformer(cfg, rngs=nnx.Rngs(seed))
  rng = np.random.RandomState(seed + 1)
  for path, var in nnx.to_flat_state(nnx.state(m, nnx.Param)):
    if path[-1] in ("gate", "up", "down") and "mlp" in path:  # experts matter: a flipped route changes the output
      var.set_value(jnp.asarray(expert_std * rng.standard_normal(var.shape), jnp.float32))
  return m


def _jit(fn):
  """``fn(model, *args)`` jitted through nnx.split/merge (one compile instead of eager op dispatch)."""
  def call(model, *args):
    graphdef, state = nnx.split(model)
    return jax.jit(lambda st, *a: fn(nnx.merge(graphdef, st), *a))(state, *args)
  return call


_logits = _jit(lambda m, tok: m(tok, return_logits=True))
_replay_logits = _jit(lambda m, tok, r: m(tok, routing=r, return_logits=True))
_po = _jit(lambda m, tok: policy_outputs(m, tok))
_po_replay = _jit(lambda m, tok, r: policy_outputs(m, tok, routing=r))


def test_ragged_equals_dense_experts():
  tok = _tokens(2, 9)
  ragged = _model(moe_impl="ragged")
  dense = _model(moe_impl="dense")
  a, b = _logits(ragged, tok), _logits(dense, tok)
  np.testing.assert_array_equal(a.routing, b.routing)
  np.testing.assert_allclose(a.logits, b.logits, rtol=1e-5, atol=1e-5)


def test_routing_capture_is_router_top_k():
  m = _model()
  x = jax.random.normal(jax.random.PRNGKey(0), (2, 5, 64))
  moe = m.layers[0].mlp
  ids, gates, probs = moe.route(x)
  # Reference: float64 NumPy softmax + argsort.
  z = np.asarray(x, np.float64) @ np.asarray(moe.router[...], np.float64)
  p = np.exp(z - z.max(-1, keepdims=True))
  p /= p.sum(-1, keepdims=True)
  top = np.argsort(-p, -1)[..., :2]
  np.testing.assert_array_equal(np.asarray(ids), top)
  g = np.take_along_axis(p, top, -1)
  np.testing.assert_allclose(gates, g / g.sum(-1, keepdims=True), rtol=1e-5)
  out = _logits(m, _tokens(2, 5))
  assert out.routing.shape == (2, 5, 2, 2) and out.routing.dtype == jnp.int32


def test_moe_layers_subset_and_routing_shape():
  m = _model(moe_layers=(1,))
  out = _logits(m, _tokens(1, 4))
  assert out.routing.shape == (1, 4, 1, 2)
  assert not m.layers[0].is_moe and m.layers[1].is_moe


def test_replay_own_routing_is_identity():
  m = _model()
  tok = _tokens(2, 7, seed=2)
  a = _logits(m, tok)
  b = _replay_logits(m, tok, a.routing)
  np.testing.assert_allclose(a.logits, b.logits, rtol=1e-6, atol=1e-6)
  np.testing.assert_array_equal(a.routing, b.routing)


@pytest.mark.parametrize("perturb", ["noise", "bf16_router"])
def test_routing_replay_recovers_sampler_logprobs(perturb):
  """R3: the sampler's routing, replayed in the training forward, reproduces the sampler's
  token log-probs although the training router is perturbed; without replay they differ."""
  sampler = _model(seed=3)
  trainer = _model(seed=3)
  tok = _tokens(4, 16, seed=4)
  rng = np.random.RandomState(5)
  for i in (0, 1):
    r = trainer.layers[i].mlp.router
    w = np.asarray(r[...])
    if perturb == "noise":
      w = w + 2e-4 * rng.standard_normal(w.shape)
    else:  # the router weights at lower precision
      w = np.asarray(jnp.asarray(w, jnp.bfloat16).astype(jnp.float32))
    r.set_value(jnp.asarray(w, jnp.float32))
  ref = _po(sampler, tok)
  free = _po(trainer, tok)
  replay = _po_replay(trainer, tok, ref.routing)
  flipped = np.mean(np.any(np.asarray(free.routing) != np.asarray(ref.routing), axis=(2, 3)))
  assert flipped > 0  # the perturbation changes some routing decisions
  np.testing.assert_array_equal(replay.routing, ref.routing)
  err_replay = float(jnp.max(jnp.abs(replay.logp - ref.logp)))
  err_free = float(jnp.max(jnp.abs(free.logp - ref.logp)))
  assert err_replay < 5e-3, err_replay  # only the (continuous) gate values move
  assert err_free > 20 * err_replay, (err_free, err_replay)


def test_replay_gradient_reaches_router():
  m = _model(moe_impl="dense")  # the gradient path is impl-independent; dense compiles fastest on CPU
  tok = _tokens(2, 6)
  routing = m(tok).routing

  graphdef, state = nnx.split(m)

  def loss(st):
    return jnp.sum(policy_outputs(nnx.merge(graphdef, st), tok, routing=routing).logp)

  g = jax.jit(jax.grad(loss))(state)
  assert float(jnp.max(jnp.abs(g["layers"][0]["mlp"]["router"][...]))) > 0


def test_aux_loss_hand_values():
  # Perfect balance: E=2, k=1, each token routed to a different expert with p=0.5 -> 2 * (0.5*0.5*2) = 1.
  ids = jnp.asarray([[[[0]], [[1]]]], jnp.int32)  # [B=1, T=2, L=1, k=1]
  probs = jnp.full((1, 2, 1, 2), 0.5)
  np.testing.assert_allclose(load_balancing_loss(ids, probs, jnp.ones((1, 2)), 2), 1.0, rtol=1e-6)
  # Collapse: both to expert 0 with p=(1,0) -> 2 * 1 * 1 = 2; the masked token is ignored.
  ids = jnp.asarray([[[[0]], [[0]], [[1]]]], jnp.int32)
  probs = jnp.asarray([[[[1.0, 0.0]], [[1.0, 0.0]], [[0.0, 1.0]]]])
  np.testing.assert_allclose(load_balancing_loss(ids, probs, jnp.asarray([[1.0, 1.0, 0.0]]), 2), 2.0, rtol=1e-6)


def test_policy_outputs_moe_fields():
  m = _model()
  po = _po(m, _tokens(2, 5))
  assert po.routing.shape == (2, 5, 2, 2)
  out = _logits(m, _tokens(2, 5))
  np.testing.assert_allclose(po.aux_loss, m.cfg.router_aux_loss_coef * out.aux_loss, rtol=1e-6)


def test_moe_cache_decode_equals_uncached():
  m = _model()
  tok = _tokens(1, 6, seed=7)
  full = _logits(m, tok)
  kv = jnp.ones((1, 8), bool)
  step = _jit(lambda mm, x, c, i: mm(x, cache=c, cache_index=i, kv_mask=kv, return_logits=True))
  a = step(m, tok[:, :4], m.init_cache(1, 8), jnp.int32(0))
  b = step(m, tok[:, 4:], a.cache, jnp.int32(4))
  np.testing.assert_allclose(jnp.concatenate([a.logits, b.logits], 1), full.logits, rtol=2e-5, atol=2e-5)
  np.testing.assert_array_equal(jnp.concatenate([a.routing, b.routing], 1), full.routing)
