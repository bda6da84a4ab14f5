"""Exact micro-batching for terms that read a whole-batch statistic (the statistics pre-pass).

Each test runs the jitted ``make_train_step`` with ``num_microbatches=4`` and
``1`` on the same batch and compares the loss, the metrics and the gradients
(recorded by a pass-through "optimizer") at rtol 1e-5; then it runs the old
path -- the same loss without its ``statistics`` hook, so every micro-batch
computes the statistic from its own rows -- and checks that it differs, so the
test can fail.
"""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from rljax.models import ModelConfig, Transformer
from rljax.objectives import (advantage_sign_weighting, chain, clip_cov, delta_logp_reweight, dpo,
                              entropy_gated_contrastive, kl_cov, ppo_clip, tis, top_entropy_mask)
from rljax.train import HookedLoss, LossHooks, init_train_state, make_train_step, objective_loss, split_statistics
from rljax.types import PolicyOutputs, TrainBatch

K = 4
RTOL = 1e-5


class TinyLM(nnx.Module):
  """logits(t) = 3 W tanh(mean_{s<t} E[tok(s)]): a float32 policy whose log-probs and entropies depend on
  the whole prefix, so they differ from token to token."""

  def __init__(self, vocab=7, dim=8, *, rngs):
    self.emb = nnx.Embed(vocab, dim, rngs=rngs)
    self.out = nnx.Linear(dim, vocab, rngs=rngs)


def forward(model, batch):
  e = model.emb(batch.tokens[:, :-1])
  h = jnp.cumsum(e, axis=1) / jnp.arange(1, e.shape[1] + 1, dtype=jnp.float32)[None, :, None]
  logits = 3.0 * model.out(jnp.tanh(h))
  logp_all = jax.nn.log_softmax(logits.astype(jnp.float32), -1)
  lp = jnp.take_along_axis(logp_all, batch.tokens[:, 1:, None], -1)[..., 0]
  ent = -jnp.sum(jnp.exp(logp_all) * logp_all, -1)
  pad = jnp.zeros((lp.shape[0], 1), jnp.float32)
  return PolicyOutputs(logp=jnp.concatenate([pad, lp], 1), entropy=jnp.concatenate([pad, ent], 1))


def make_batch(b=8, t=10, vocab=7, seed=0):
  """Ragged completions (micro-batches of unequal token counts), per-token advantages, old / behaviour
  log-probs around the policy's, a base entropy and 0/1 rewards."""
  rng = np.random.default_rng(seed)
  tokens = rng.integers(0, vocab, (b, t)).astype(np.int32)
  lengths = rng.integers(2, t, b)
  mask = np.arange(t)[None, :] >= (t - lengths)[:, None]
  mask[:, 0] = False
  logp_old = rng.normal(-2.0, 0.4, (b, t)).astype(np.float32)
  return TrainBatch.create(
      tokens=jnp.asarray(tokens), loss_mask=jnp.asarray(mask),
      advantages=jnp.asarray(rng.normal(size=(b, t)).astype(np.float32)),
      logp_old=jnp.asarray(logp_old),
      logp_behavior=jnp.asarray(logp_old + rng.normal(0.0, 0.5, (b, t)).astype(np.float32)),
      rewards=jnp.asarray(rng.integers(0, 2, b).astype(np.float32)), group_id=jnp.arange(b, dtype=jnp.int32),
      extras={"entropy_base": jnp.asarray(rng.uniform(0.0, 2.0, (b, t)).astype(np.float32))})


def record_grads():
  """An "optimizer" whose state is the last gradient and whose update is 0: ``opt_state`` = the step's gradient."""
  return optax.GradientTransformation(lambda params: jax.tree_util.tree_map(jnp.zeros_like, params),
                                      lambda g, state, params=None: (jax.tree_util.tree_map(jnp.zeros_like, g), g))


class without_statistics(HookedLoss):  # pylint: disable=invalid-name
  """The old path: the same loss, without the ``statistics`` hook (each micro-batch uses its own rows'
  statistics; a batch-level auxiliary loss is averaged with weight 1/k)."""

  def __init__(self, loss):
    self.loss = loss

  def hooks(self):
    return LossHooks(self.loss.denominator, None, lambda w: without_statistics(self.loss.with_aux_weight(w)))

  def __call__(self, model, batch, hparams, denominator):
    return self.loss(model, batch, hparams, denominator)


def run(model, loss, batch, k):
  graphdef, state = init_train_state(model, record_grads())
  new, metrics = make_train_step(graphdef, loss, record_grads(), num_microbatches=k, donate=False)(state, batch)
  return {n: float(v) for n, v in metrics.items()}, [np.asarray(g) for g in jax.tree_util.tree_leaves(new.opt_state)]


def max_rel(a, b):
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-6)))


# per-row (not per-token) means: combined over micro-batches by token weights, so not exact by design
NOT_PER_TOKEN = ("entropy_gated_contrastive/frac_correct",  # dpo's below: per-pair means
                 "dpo/loss_pair", "dpo/rewards/chosen", "dpo/rewards/rejected", "dpo/rewards/margins",
                 "dpo/rewards/accuracies")


def check_exact(make_model, loss, batch, metrics=None):
  """The ``K`` micro-batch step equals the full-batch step (every per-token metric, the gradient), and the old
  path without the statistics pre-pass does not; returns the old path's largest relative error. ``metrics``: a
  dict that receives the full-batch step's metrics (``"full"``)."""
  m1, g1 = run(make_model(), loss, batch, 1)
  if metrics is not None:
    metrics["full"] = m1
  m4, g4 = run(make_model(), loss, batch, K)
  assert set(m4) == set(m1)
  for name in m1:
    if name not in NOT_PER_TOKEN:
      np.testing.assert_allclose(m4[name], m1[name], rtol=RTOL, atol=1e-7, err_msg=name)
  for a, b in zip(g4, g1):
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=1e-7)
  assert any(np.max(np.abs(g)) > 1e-3 for g in g1)  # the gradient is not trivially zero
  # the old path (no pre-pass) is measurably off, so the checks above can fail
  m_old, g_old = run(make_model(), without_statistics(loss), batch, K)
  off = max(max_rel(m_old["loss"], m1["loss"]), max(max_rel(a, b) for a, b in zip(g_old, g1)))
  assert off > 1e-3, f"the old path already matches (max rel diff {off:.2e}): the test cannot fail"
  return off


TERMS = {
    "clip_cov": lambda: clip_cov(0.2, 0.2, clip_cov_ratio=0.2, clip_cov_lb=-10.0, clip_cov_ub=10.0),
    "clip_cov_random": lambda: clip_cov(0.2, 0.2, clip_cov_ratio=0.2, clip_cov_lb=-10.0, clip_cov_ub=10.0,
                                        key=jax.random.key(3)),
    "kl_cov": lambda: kl_cov(kl_cov_ratio=0.2, ppo_kl_coef=1.0),
    "top_entropy_mask": lambda: top_entropy_mask(ppo_clip(0.2), rho=0.3),
    "tis_normalize": lambda: ppo_clip(0.2, correction=tis(1.5, normalize=True)),
    "delta_logp_reweight_normalize": lambda: delta_logp_reweight(ppo_clip(0.2), form="power", gamma=2.0,
                                                                 normalize=True),
    "entropy_gated_contrastive_rho": lambda: entropy_gated_contrastive(rho=0.3),
    # statistics of nested terms are forwarded through wrappers
    "nested": lambda: advantage_sign_weighting(
        top_entropy_mask(delta_logp_reweight(ppo_clip(0.2, correction=tis(1.5, normalize=True))), rho=0.5),
        pos_weight=1.0, neg_weight=0.5),
}


@pytest.mark.parametrize("name", sorted(TERMS))
def test_batch_statistic_terms_are_exact(name):
  loss = objective_loss(chain(TERMS[name]()), forward=forward)
  check_exact(lambda: TinyLM(rngs=nnx.Rngs(0)), loss, make_batch())


def test_statistics_hooks_and_direct_calls():
  """Terms called directly (no statistics) compute them from their rows; given the whole batch's statistics
  sliced to a micro-batch, a term's loss is the whole batch's loss on those rows."""
  batch = make_batch()
  out = forward(TinyLM(rngs=nnx.Rngs(0)), batch)
  term = TERMS["nested"]()
  full, _ = term(out, batch)
  stats = term.batch_statistics(out, batch)
  rows = slice(2, 4)
  out_mb, batch_mb = jax.tree_util.tree_map(lambda x: x[rows], (out, batch))  # every leaf has leading dim B
  stats_mb = jax.tree_util.tree_map(lambda x: x[1], split_statistics(stats, batch.loss_mask.shape, K))
  part, _ = term(out_mb, batch_mb, statistics=stats_mb)
  np.testing.assert_allclose(part, full[rows], rtol=1e-6, atol=1e-7)
  local, _ = term(out_mb, batch_mb)
  assert not np.allclose(local, full[rows], rtol=1e-3)
  assert not hasattr(ppo_clip(0.2), "batch_statistics") and not hasattr(tis(2.0), "batch_statistics")


def moe_model(dtype="float32"):
  cfg = ModelConfig.tiny_moe(vocab_size=32, router_aux_loss_coef=0.5, param_dtype=dtype, compute_dtype=dtype)
  model = Transformer(cfg, rngs=nnx.Rngs(0))
  rng = np.random.RandomState(1)
  for path, var in nnx.to_flat_state(nnx.state(model, nnx.Param)):
    if "mlp" in path and path[-1] in ("router", "gate", "up", "down"):  # routes and experts that matter
      var.set_value(jnp.asarray(0.3 * rng.standard_normal(var.shape), dtype))
  return model


@pytest.mark.long
def test_moe_load_balancing_loss_is_exact():
  """``E sum_e f_e P_e`` over the whole batch: each micro-batch contributes its share with the whole batch's f
  (rows padded by ``segment_ids``, so micro-batches hold unequal token counts).

  In float64 (model, batch, gradients): in float32 the whole batch and the micro-batches sum in different orders
  and one of 2048 gradient elements may differ by a float32 ulp (1.19e-7, host-dependent), which says nothing
  about exactness; in float64 the same order difference is ~1e-16 and the tolerance stays the file's."""
  with jax.enable_x64(True):
    b0 = make_batch(vocab=32, seed=5)
    lengths = np.asarray([10, 4, 9, 3, 10, 6, 2, 8])
    seg = (np.arange(10)[None, :] < lengths[:, None]).astype(np.int32)
    batch = b0.replace(segment_ids=jnp.asarray(seg), loss_mask=b0.loss_mask & jnp.asarray(seg > 0))
    batch = jax.tree.map(lambda x: x.astype(jnp.float64) if jnp.issubdtype(x.dtype, jnp.floating) else x, batch)
    loss = objective_loss(chain(ppo_clip(0.2), aux_loss_coef=1.0))
    metrics = {}
    off = check_exact(lambda: moe_model("float64"), loss, batch, metrics)  # aux_loss equal to the full batch's
    assert off > 1e-3
    assert metrics["full"]["aux_loss"] > 0.1  # the auxiliary loss is really in the loss
    assert all(g.dtype == np.float64 for g in run(moe_model("float64"), loss, batch, 1)[1])


def test_no_pre_pass_without_micro_batches_or_statistics():
  """``num_microbatches=1`` never calls the hook; a loss whose terms read no statistic runs no forward in it."""
  calls = []

  class spy(objective_loss):  # pylint: disable=invalid-name
    def statistics(self, model, batch, hparams):
      calls.append(1)
      return super().statistics(model, batch, hparams)

  batch = make_batch()
  run(TinyLM(rngs=nnx.Rngs(0)), spy(chain(TERMS["kl_cov"]()), forward=forward), batch, 1)
  assert not calls
  forwards = []
  counting = lambda model, b: forwards.append(1) or forward(model, b)
  stats = objective_loss(chain(ppo_clip(0.2)), forward=counting).statistics(TinyLM(rngs=nnx.Rngs(0)), batch, {})
  assert not forwards and set(stats) == {"rows"}
  objective_loss(chain(TERMS["kl_cov"]()), forward=counting).statistics(TinyLM(rngs=nnx.Rngs(0)), batch, {})
  assert forwards == [1]


def test_data_parallel_fsdp_wrapper_forwards_the_statistics():
  """``fsdp_loss_fn`` forwards the ``statistics`` hook: a data-parallel (2 devices) micro-batched step with a
  batch-statistic term equals the single-device full-batch step."""
  from rljax.parallel import MeshConfig, fsdp_loss_fn, make_mesh  # pylint: disable=import-outside-toplevel
  mesh = make_mesh(MeshConfig(data=2, fsdp=1), jax.devices()[:2])
  loss = objective_loss(chain(TERMS["nested"]()), forward=forward)
  wrapped = fsdp_loss_fn(loss, mesh)
  assert callable(wrapped.hooks().statistics) and fsdp_loss_fn(without_statistics(loss), mesh).hooks().statistics is None
  batch = make_batch()
  m1, g1 = run(TinyLM(rngs=nnx.Rngs(0)), loss, batch, 1)
  graphdef, state = init_train_state(TinyLM(rngs=nnx.Rngs(0)), record_grads())
  step = make_train_step(graphdef, wrapped, record_grads(), num_microbatches=K, mesh=mesh, donate=False)
  new, m4 = step(state, batch)
  np.testing.assert_allclose(float(m4["loss"]), m1["loss"], rtol=RTOL)
  for a, b in zip(jax.tree_util.tree_leaves(new.opt_state), g1):
    np.testing.assert_allclose(np.asarray(a), b, rtol=RTOL, atol=1e-7)


def test_dpo_pair_scale_is_exact_with_unpaired_rows():
  """dpo's pair_scale (rows / paired rows) is a whole-batch statistic: micro-batches of 2 rows, some holding only
  unpaired rows, give the full batch's mean over pairs under seq_mean_token_mean."""
  rng = np.random.default_rng(5)
  batch = make_batch(seed=4)
  pairs = np.array([0, 0, -1, -1, 1, 1, -1, -1], np.int32)
  chosen = np.array([1, 0, 0, 0, 0, 1, 0, 0], bool)
  noise = jnp.asarray(rng.normal(0.0, 0.3, batch.logp_old.shape), jnp.float32)
  batch = batch.replace(logp_ref=batch.logp_old + noise,
                        extras={"dpo_pair_id": jnp.asarray(pairs), "dpo_chosen": jnp.asarray(chosen)})
  loss = objective_loss(chain(dpo(0.5), aggregate="seq_mean_token_mean"), forward=forward)
  check_exact(lambda: TinyLM(rngs=nnx.Rngs(0)), loss, batch)


def test_a_hook_set_as_an_attribute_is_refused_not_ignored():
  """``make_train_step`` reads a loss's hooks from ``HookedLoss.hooks()`` only: a plain callable carrying one as an
  attribute (the convention before) would lose exact micro-batching without a word, so it is refused."""
  def plain(model, batch, hparams, denominator):  # pylint: disable=unused-argument
    return jnp.zeros(()), {}
  plain.denominator = lambda batch, hparams: jnp.ones(())
  graphdef, _ = init_train_state(TinyLM(rngs=nnx.Rngs(0)), record_grads())
  with pytest.raises(TypeError, match=r"\['denominator'\].*HookedLoss"):
    make_train_step(graphdef, plain, record_grads(), num_microbatches=2)
