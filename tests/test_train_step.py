"""Train step: exact micro-batching, non-finite guard, no-recompile hparams, optax chain."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from rljax.objectives import chain, token_mean, seq_mean_token_mean
from rljax.train import (OptimConfig, init_train_state, make_optimizer, make_schedule, make_train_step,
                         objective_loss)
from rljax.types import PolicyOutputs, TrainBatch


class TinyLM(nnx.Module):
  """A bigram-ish LM: logits(t) = W[tok(t-1)] ; enough to test the step."""

  def __init__(self, vocab=7, dim=8, *, rngs):
    self.emb = nnx.Embed(vocab, dim, rngs=rngs)
    self.out = nnx.Linear(dim, vocab, rngs=rngs)


def forward(model, batch):
  logits = model.out(jnp.tanh(model.emb(batch.tokens[:, :-1])))
  logp_all = jax.nn.log_softmax(logits.astype(jnp.float32), -1)
  lp = jnp.take_along_axis(logp_all, batch.tokens[:, 1:, None], -1)[..., 0]
  ent = -jnp.sum(jnp.exp(logp_all) * logp_all, -1)
  pad = jnp.zeros((lp.shape[0], 1), jnp.float32)
  return PolicyOutputs(logp=jnp.concatenate([pad, lp], 1), entropy=jnp.concatenate([pad, ent], 1))


def pg_term(out, batch):
  return -batch.advantages * out.logp * batch.extras["scale"][:, None], {"mean_logp": jnp.mean(out.logp)}


def make_batch(b=8, t=6, seed=0, nan=False):
  rng = np.random.default_rng(seed)
  tokens = rng.integers(0, 7, (b, t)).astype(np.int32)
  lengths = rng.integers(1, t, b)
  mask = np.arange(t)[None, :] >= (t - lengths)[:, None]   # ragged completion lengths
  mask[:, 0] = False
  adv = np.repeat(rng.normal(size=(b, 1)), t, 1).astype(np.float32)
  if nan:
    adv[0, -1] = np.nan
  return TrainBatch.create(tokens=jnp.asarray(tokens), loss_mask=jnp.asarray(mask), advantages=jnp.asarray(adv),
                           group_id=jnp.asarray(np.arange(b) // 4, jnp.int32),
                           extras={"scale": jnp.ones((b,), jnp.float32)})


def setup(num_microbatches=1, aggregate=token_mean, jit=True, objective=None):
  model = TinyLM(rngs=nnx.Rngs(0))
  opt, sched = make_optimizer(OptimConfig(learning_rate=1e-2), 10)
  graphdef, state = init_train_state(model, opt, {"beta": 0.5})
  loss = objective_loss(objective or chain(pg_term, aggregate=aggregate), forward=forward)
  step = make_train_step(graphdef, loss, opt, num_microbatches=num_microbatches, schedule=sched, jit=jit,
                         donate=False)
  return state, step


def leaves(tree):
  return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


@pytest.mark.parametrize("aggregate", [token_mean, seq_mean_token_mean])
def test_microbatching_is_exact(aggregate):
  batch = make_batch()
  s1, step1 = setup(1, aggregate)
  s4, step4 = setup(4, aggregate)
  n1, m1 = step1(s1, batch)
  n4, m4 = step4(s4, batch)
  np.testing.assert_allclose(float(m1["loss"]), float(m4["loss"]), rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(float(m1["train/grad_norm"]), float(m4["train/grad_norm"]), rtol=1e-5)
  for a, b in zip(leaves(n1.params), leaves(n4.params)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("aggregate", [token_mean, "token_sum"])
def test_microbatched_metrics_equal_the_full_batch_ones(aggregate):
  """Micro-batches with very unequal token counts: per-token metrics are token-weighted, *_max/*_min are
  max/min, and loss/denominator is the global denominator (token_sum's is 1, not k) -- each checked against
  the full-batch step and, for entropy and the ratio max, against float64 NumPy."""
  from rljax.objectives import kl_penalty, ppo_clip  # pylint: disable=import-outside-toplevel
  b0 = make_batch(b=8, t=6, seed=1)
  rng = np.random.default_rng(0)
  mask = np.zeros((8, 6), bool)
  mask[:4, 1:] = True  # micro-batch 0 of 2: 20 tokens; micro-batch 1: 4 tokens
  mask[4:, -1] = True
  batch = TrainBatch.create(tokens=b0.tokens, loss_mask=jnp.asarray(mask), advantages=b0.advantages,
                            logp_old=jnp.asarray(rng.normal(-2, 0.5, (8, 6)).astype(np.float32)),
                            logp_ref=jnp.asarray(rng.normal(-2, 0.5, (8, 6)).astype(np.float32)),
                            group_id=b0.group_id, extras=b0.extras)
  res = {}
  for k in (1, 2):
    opt, _ = make_optimizer(OptimConfig(learning_rate=1e-2), 10)
    graphdef, state = init_train_state(TinyLM(rngs=nnx.Rngs(0)), opt, {"clip_low": 0.2, "clip_high": 0.2})
    loss = objective_loss(chain(ppo_clip(0.2), kl_penalty(0.1, "k3"), aggregate=aggregate), forward=forward)
    res[k] = {n: float(v) for n, v in make_train_step(graphdef, loss, opt, num_microbatches=k,
                                                      donate=False)(state, batch)[1].items()}
  for n in ("loss", "policy/entropy", "policy/kl", "policy/clip_frac", "ppo_clip/clip_frac", "ppo_clip/ratio_max",
            "ppo_clip/ratio_min", "kl_penalty/kl", "loss/denominator", "loss/numerator"):
    np.testing.assert_allclose(res[2][n], res[1][n], rtol=1e-5, atol=1e-7, err_msg=n)
  out = forward(TinyLM(rngs=nnx.Rngs(0)), batch)
  m = mask.astype(np.float64)
  np.testing.assert_allclose(res[2]["policy/entropy"], (np.asarray(out.entropy, np.float64) * m).sum() / m.sum(),
                             rtol=1e-5)
  ratio = np.exp(np.asarray(out.logp, np.float64) - np.asarray(batch.logp_old, np.float64))
  np.testing.assert_allclose(res[2]["ppo_clip/ratio_max"], ratio[mask].max(), rtol=1e-5)
  assert res[2]["loss/denominator"] == (1.0 if aggregate == "token_sum" else 24.0)


def forward_with_aux(model, batch):
  # a batch-level auxiliary loss (as an MoE load-balancing loss): a mean over the rows, so the mean of equal
  # slices' values equals the full batch's
  out = forward(model, batch)
  aux = jnp.mean(jnp.square(model.emb(batch.tokens)))
  return PolicyOutputs(logp=out.logp, entropy=out.entropy, aux_loss=aux)


@pytest.mark.parametrize("aggregate", [token_mean, seq_mean_token_mean])
def test_microbatching_averages_the_auxiliary_loss(aggregate):
  """Micro-batches sum their losses, so the auxiliary term must enter each with weight 1/k: the step equals
  the full-batch step (it used to count the auxiliary loss k times)."""
  batch = make_batch(seed=4)
  results = {}
  for k in (1, 4):
    model = TinyLM(rngs=nnx.Rngs(0))
    opt, _ = make_optimizer(OptimConfig(learning_rate=1e-2), 10)
    graphdef, state = init_train_state(model, opt, {"beta": 0.5})
    loss = objective_loss(chain(pg_term, aggregate=aggregate, aux_loss_coef=0.7), forward=forward_with_aux)
    results[k] = make_train_step(graphdef, loss, opt, num_microbatches=k, donate=False)(state, batch)
  (n1, m1), (n4, m4) = results[1], results[4]
  np.testing.assert_allclose(float(m4["loss"]), float(m1["loss"]), rtol=1e-6)
  np.testing.assert_allclose(float(m4["train/grad_norm"]), float(m1["train/grad_norm"]), rtol=1e-5)
  for a, b in zip(leaves(n1.params), leaves(n4.params)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
  # the auxiliary term is really in the loss (coefficient 0.7), so the check above can fail
  no_aux = objective_loss(chain(pg_term, aggregate=aggregate), forward=forward_with_aux)
  model = TinyLM(rngs=nnx.Rngs(0))
  ref, _ = no_aux(model, batch, {"beta": 0.5}, None)
  aux = float(forward_with_aux(model, batch).aux_loss)
  np.testing.assert_allclose(float(m1["loss"]), float(ref) + 0.7 * aux, rtol=1e-6)
  assert 0.7 * aux > 1e-2


def test_loss_matches_numpy_reference_and_jit():
  batch = make_batch(seed=3)
  state, step = setup(jit=False)
  _, m_eager = step(state, batch)
  state, stepj = setup(jit=True)
  _, m_jit = stepj(state, batch)
  # independent reference: token mean of -A * logp over the mask, in float64
  model = TinyLM(rngs=nnx.Rngs(0))
  out = forward(model, batch)
  lp = np.asarray(out.logp, np.float64)
  m = np.asarray(batch.loss_mask, np.float64)
  ref = np.sum(-np.asarray(batch.advantages, np.float64) * lp * m) / m.sum()
  np.testing.assert_allclose(float(m_eager["loss"]), ref, rtol=1e-5)
  np.testing.assert_allclose(float(m_jit["loss"]), ref, rtol=1e-5)


def test_step_descends():
  batch = make_batch(seed=1)
  state, step = setup()
  losses = []
  for _ in range(5):
    state, m = step(state, batch)
    losses.append(float(m["loss"]))
  assert losses[-1] < losses[0]
  assert int(state.step) == 5 and int(state.num_skipped) == 0


def test_nonfinite_guard_skips_and_counts():
  state, step = setup()
  before_p, before_o = leaves(state.params), leaves(state.opt_state)
  new, m = step(state, make_batch(nan=True))
  assert float(m["train/skipped"]) == 1.0 and int(new.num_skipped) == 1 and int(new.step) == 1
  for a, b in zip(before_p, leaves(new.params)):
    np.testing.assert_array_equal(a, b)
  for a, b in zip(before_o, leaves(new.opt_state)):
    np.testing.assert_array_equal(a, b)
  new2, m2 = step(new, make_batch())
  assert float(m2["train/skipped"]) == 0.0 and int(new2.num_skipped) == 1


def test_hparams_change_without_recompile():
  def build(hp):
    def term(out, batch):
      return -hp["beta"] * batch.advantages * out.logp, {}
    return chain(term)

  state, step = setup(objective=build)
  batch = make_batch()
  _, m1 = step(state, batch)
  state2 = state.with_hparams(beta=1.0)
  _, m2 = step(state2, batch)
  np.testing.assert_allclose(float(m2["loss"]), 2 * float(m1["loss"]), rtol=1e-6)
  assert step._cache_size() == 1
  with pytest.raises(ValueError, match="unknown hparam"):
    state.with_hparams(gamma=1.0)


def test_donated_state_and_microbatch_divisibility():
  model = TinyLM(rngs=nnx.Rngs(0))
  opt, _ = make_optimizer(OptimConfig(), 10)
  graphdef, state = init_train_state(model, opt)
  step = make_train_step(graphdef, objective_loss(chain(pg_term), forward=forward), opt, num_microbatches=3)
  with pytest.raises(ValueError, match="num_microbatches"):
    step(state, make_batch(b=8))


def test_schedule_and_clipping():
  cfg = OptimConfig(learning_rate=1.0, schedule="cosine", warmup_steps=2, end_factor=0.1)
  s = make_schedule(cfg, 12)
  np.testing.assert_allclose([float(s(0)), float(s(1)), float(s(2)), float(s(12))], [0.0, 0.5, 1.0, 0.1],
                             atol=1e-6)
  lin = make_schedule(OptimConfig(learning_rate=2.0, schedule="linear", end_factor=0.5), 10)
  np.testing.assert_allclose(float(lin(5)), 1.5, rtol=1e-6)
  opt, _ = make_optimizer(OptimConfig(learning_rate=1.0, grad_clip=1.0, b1=0.0, b2=0.0, eps=0.0), 10)
  g = {"w": jnp.asarray([30.0, 40.0])}
  upd, _ = opt.update(g, opt.init(g), g)
  # clipped to norm 1 then Adam with b1=b2=0 -> sign(g) * lr
  np.testing.assert_allclose(np.asarray(upd["w"]), [-1.0, -1.0], rtol=1e-5)
  assert float(optax.tree.norm(optax.clip_by_global_norm(1.0).update(g, None)[0])) == pytest.approx(1.0)


def test_sharded_step_matches_single_device():
  from rljax.parallel import MeshConfig, make_mesh  # pylint: disable=import-outside-toplevel
  if len(jax.devices()) < 2:
    pytest.skip("needs several (fake) devices")
  n = 8 if len(jax.devices()) >= 8 else 2
  batch = make_batch(b=8, seed=5)
  s1, step1 = setup(1)
  n1, m1 = step1(s1, batch)
  model = TinyLM(rngs=nnx.Rngs(0))
  opt, sched = make_optimizer(OptimConfig(learning_rate=1e-2), 10)
  graphdef, state = init_train_state(model, opt, {"beta": 0.5})
  mesh = make_mesh(MeshConfig(data=n, fsdp=1), jax.devices()[:n])
  step = make_train_step(graphdef, objective_loss(chain(pg_term), forward=forward), opt, mesh=mesh, schedule=sched)
  n2, m2 = step(state, batch)
  np.testing.assert_allclose(float(m1["loss"]), float(m2["loss"]), rtol=1e-6)
  for a, b in zip(leaves(n1.params), leaves(n2.params)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
  assert len(jax.tree_util.tree_leaves(n2.params)[0].sharding.device_set) == n


def test_legacy_make_mesh_is_a_deprecated_data_mesh():
  from rljax.train import make_mesh  # pylint: disable=import-outside-toplevel
  with pytest.warns(DeprecationWarning, match="rljax.parallel.make_mesh"):
    mesh = make_mesh(2)
  assert dict(mesh.shape) == {"data": 2, "fsdp": 1, "tensor": 1, "expert": 1}
  with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="only"):
    make_mesh(len(jax.devices()) + 1)


def test_the_generic_clip_fraction_reads_the_policy_terms_declared_bounds():
  """``policy/clip_frac`` uses the hparams the recipe's policy term declares for its clip bounds
  (``Recipe.clip_hparams``): with asymmetric bounds 0.05 / 0.5 in ``state.hparams`` it equals the term's own
  ``ppo_clip/clip_frac`` and a float64 NumPy count, and differs from the count at the default 0.2 / 0.2."""
  from rljax.objectives import ppo_clip  # pylint: disable=import-outside-toplevel
  from rljax.recipes import Recipe  # pylint: disable=import-outside-toplevel
  from rljax.stages import loss_term_factory  # pylint: disable=import-outside-toplevel
  assert Recipe().clip_hparams() == ("clip_low", "clip_high")  # the default policy term: ppo_clip
  own = loss_term_factory(ppo_clip, role="policy")
  assert Recipe(loss=(own(),)).clip_hparams() == ()  # a policy term that declares no bounds
  b0 = make_batch(b=8, t=6, seed=1)
  rng = np.random.default_rng(0)
  near = np.asarray(forward(TinyLM(rngs=nnx.Rngs(0)), b0).logp) + rng.normal(0, 0.2, (8, 6))  # ratios near 1
  batch = TrainBatch.create(tokens=b0.tokens, loss_mask=b0.loss_mask, advantages=b0.advantages,
                            logp_old=jnp.asarray(near.astype(np.float32)), group_id=b0.group_id, extras=b0.extras)
  opt, _ = make_optimizer(OptimConfig(learning_rate=1e-2), 10)
  graphdef, state = init_train_state(TinyLM(rngs=nnx.Rngs(0)), opt, {"clip_low": 0.05, "clip_high": 0.5})
  builder = lambda hp: chain(ppo_clip(hp["clip_low"], hp["clip_high"]), aggregate=token_mean)
  loss = objective_loss(builder, forward=forward, clip_hparams=Recipe().clip_hparams())
  m = {n: float(v) for n, v in make_train_step(graphdef, loss, opt, donate=False)(state, batch)[1].items()}
  out = forward(TinyLM(rngs=nnx.Rngs(0)), batch)
  ratio = np.exp(np.asarray(out.logp, np.float64) - np.asarray(batch.logp_old, np.float64))
  adv, mask = np.asarray(batch.advantages, np.float64), np.asarray(batch.loss_mask, bool)
  adv = adv[:, None] if adv.ndim == 1 else adv
  frac = lambda lo, hi: (((ratio < 1 - lo) & (adv < 0)) | ((ratio > 1 + hi) & (adv > 0)))[mask].mean()
  np.testing.assert_allclose(m["policy/clip_frac"], frac(0.05, 0.5), rtol=1e-5)
  np.testing.assert_allclose(m["policy/clip_frac"], m["ppo_clip/clip_frac"], rtol=1e-6)
  assert abs(frac(0.05, 0.5) - frac(0.2, 0.2)) > 0.02
