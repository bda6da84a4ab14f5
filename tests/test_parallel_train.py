"""The sharded train step, sampler, group statistics and loss aggregation on 8 fake CPU devices.

Every check compares a sharded run against the single-device run (or a float64
NumPy reference) of the same computation. One mesh per property runs by
default; the others are ``@pytest.mark.slow`` (each train-step compile costs
~30-60 s on the loaded 2-core machine).
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

from rljax.advantages import grpo
from rljax.models import ModelConfig, Transformer
from rljax.objectives import chain, token_mean
from rljax.parallel import (MeshConfig, batch_shardings, collectives, compute_spec, fsdp_loss_fn, logical_to_spec,
                            make_mesh, shard_train_step, train_state_shardings)
from rljax.parallel._hlo import mesh_axes_of_groups
from rljax.train import init_train_state, make_train_step, nll_loss
from rljax.types import PolicyOutputs, TrainBatch

D8 = MeshConfig(data=8, fsdp=1)
F2T4 = MeshConfig(fsdp=2, tensor=4)
D2F2T2 = MeshConfig(data=2, fsdp=2, tensor=2)
mesh_id = lambda c: f"d{c.data}f{c.fsdp}t{c.tensor}"
# (data 2, fsdp 2, tensor 2) exercises all three axes at once: it is the default-run mesh.
MESHES = [D2F2T2, pytest.param(D8, marks=pytest.mark.slow), pytest.param(F2T4, marks=pytest.mark.slow)]
LR = 1e-3
B, T = 8, 12


def _problem():
  cfg = ModelConfig.tiny()
  model = Transformer(cfg, rngs=nnx.Rngs(0))
  opt = optax.adam(LR)
  graphdef, state = init_train_state(model, opt)
  rng = np.random.default_rng(0)
  tokens = rng.integers(0, cfg.vocab_size, (B, T), dtype=np.int32)
  # ragged completions: rows hold 1..11 loss tokens, so per-shard token means differ from the global one
  lengths = np.array([1, 11, 3, 9, 2, 10, 5, 6])
  mask = np.arange(T)[None, :] >= (T - lengths)[:, None]
  batch = TrainBatch(tokens=jnp.asarray(tokens), loss_mask=jnp.asarray(mask),
                     advantages=jnp.zeros((B, T), jnp.float32), group_id=jnp.arange(B, dtype=jnp.int32))
  return cfg, graphdef, state, batch, opt


@functools.lru_cache(maxsize=None)
def _reference():
  cfg, graphdef, state, batch, opt = _problem()
  step = make_train_step(graphdef, nll_loss(), opt, donate=False)
  new_state, metrics = step(state, batch)
  return jax.device_get((new_state, metrics))


@functools.lru_cache(maxsize=None)
def _compiled(mesh_cfg):
  """(mesh, shardings, compiled step, placed state, placed batch): one compile per mesh per session."""
  cfg, graphdef, state, batch, opt = _problem()
  mesh = make_mesh(mesh_cfg)
  shardings = train_state_shardings(state, mesh)
  step = make_train_step(graphdef, fsdp_loss_fn(nll_loss(), mesh), opt, jit=False)
  fn = shard_train_step(step, shardings, mesh, donate=False)
  placed = jax.device_put(state, shardings)
  placed_batch = jax.device_put(batch, batch_shardings(batch, mesh))
  compiled = fn.lower(placed, placed_batch).compile()
  return mesh, shardings, compiled, placed, placed_batch


def _flat(tree):
  return {jax.tree_util.keystr(k): np.asarray(v) for k, v in jax.tree_util.tree_leaves_with_path(tree)}


@pytest.mark.long
@pytest.mark.parametrize("mesh_cfg", MESHES, ids=mesh_id)
def test_sharded_train_step_matches_single_device(mesh_cfg):
  ref_state, ref_metrics = _reference()
  mesh, shardings, compiled, placed, placed_batch = _compiled(mesh_cfg)
  new_state, metrics = compiled(placed, placed_batch)
  # loss: a sum over the batch in another reduction order -> float32 rounding only
  np.testing.assert_allclose(metrics["loss"], ref_metrics["loss"], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(metrics["train/grad_norm"], ref_metrics["train/grad_norm"], rtol=1e-5)
  # Adam's first moment after one step is mu = (1 - b1) g = 0.1 g: the gradients themselves
  mu, ref_mu = _flat(new_state.opt_state[0].mu), _flat(ref_state.opt_state[0].mu)
  assert mu.keys() == ref_mu.keys() and len(mu) > 10
  for k in ref_mu:
    np.testing.assert_allclose(mu[k], ref_mu[k], rtol=1e-5, atol=1e-8, err_msg=k)
  # params after Adam: the first update is lr * g / (|g| + eps), eps = 1e-8. Where |g| > 1e-5 its
  # sensitivity to float32 reduction-order noise in g is <= lr * eps / |g| * |dg / g| (<< 1e-6): tight.
  # Where |g| is tiny (a sum that nearly cancels), g's *relative* noise is large and the update can move
  # by up to its bound lr; there we check only that bound (g itself was checked tightly through mu).
  p, ref_p, old_p = _flat(new_state.params), _flat(ref_state.params), _flat(_problem()[2].params)
  for k in ref_p:
    conditioned = np.abs(ref_mu[k] / 0.1) > 1e-5
    assert conditioned.mean() > 0.3, k  # most entries are checked tightly (embed: ~half the rows are used)
    np.testing.assert_allclose(p[k][conditioned], ref_p[k][conditioned], rtol=1e-5, atol=1e-6, err_msg=k)
    assert np.all(np.abs(p[k] - old_p[k]) <= LR * (1 + 1e-5) + 1e-6 * np.abs(old_p[k])), k  # + f32 rounding of p
  assert int(new_state.step) == 1 and int(new_state.num_skipped) == 0


@pytest.mark.parametrize("mesh_cfg", MESHES, ids=mesh_id)
def test_parameter_and_optimizer_shardings_as_declared(mesh_cfg):
  mesh, shardings, compiled, placed, placed_batch = _compiled(mesh_cfg)
  new_state, _ = compiled(placed, placed_batch)
  f = "fsdp" if mesh.shape["fsdp"] > 1 else None
  t = "tensor" if mesh.shape["tensor"] > 1 else None
  layer = new_state.params["layers"][0]
  expected = {
      "q": (layer["attn"]["q"]["kernel"], P(f, t, None)),  # (embed, heads, head_dim), 4 heads
      "o": (layer["attn"]["o"]["kernel"], P(t, None, f)),  # (heads, head_dim, embed)
      "embed": (new_state.params["embed"], P(t, f)),  # (vocab, embed)
  }
  for name, (var, spec) in expected.items():
    assert var[...].sharding.spec == spec, name
  # 2 KV heads on tensor=4 are not divisible: replicated on that dimension
  k_spec = layer["attn"]["k"]["kernel"][...].sharding.spec
  assert k_spec == P(f, t if mesh.shape["tensor"] == 2 else None, None)
  # every parameter and its Adam moments carry the spec its logical axes declare
  adam = new_state.opt_state[0]
  for path, var in jax.tree_util.tree_leaves_with_path(new_state.params, is_leaf=lambda x: isinstance(x, nnx.Variable)):
    want = logical_to_spec(var.get_metadata("logical_axes"), mesh, var[...].shape)
    assert var[...].sharding.is_equivalent_to(NamedSharding(mesh, want), var[...].ndim), path
  for tree in (adam.mu, adam.nu):
    for (path, var), (_, pvar) in zip(
        jax.tree_util.tree_leaves_with_path(tree, is_leaf=lambda x: isinstance(x, nnx.Variable)),
        jax.tree_util.tree_leaves_with_path(new_state.params, is_leaf=lambda x: isinstance(x, nnx.Variable))):
      assert var[...].sharding.spec == pvar[...].sharding.spec, path
  assert adam.count.sharding.spec == P() and new_state.step.sharding.spec == P()


@pytest.mark.parametrize("mesh_cfg", MESHES, ids=mesh_id)
def test_compiled_step_all_gathers_follow_the_fsdp_pattern(mesh_cfg):
  """Every all-gather in the compiled step either (1) runs over exactly the ``fsdp`` mesh axis and
  produces the *compute* layout of a parameter (its stored shard gathered over ``fsdp``, still split
  over ``tensor``; checked on both operand and result shapes), or (2) reshards an activation inside a
  tensor group (not parameter-shaped). On a mesh without ``fsdp`` or ``tensor`` there is no all-gather
  at all. Gradients come back by reduce-scatter / all-reduce."""
  mesh, shardings, compiled, placed, placed_batch = _compiled(mesh_cfg)
  hlo = compiled.as_text()
  ops = collectives(hlo)
  assert any(c.op in ("all-reduce", "reduce-scatter") for c in ops), "no gradient reduction found"
  nf = mesh.shape["fsdp"]
  blocks = []  # (stored shard, compute shard) of every parameter
  for var in jax.tree.leaves(placed.params, is_leaf=lambda x: isinstance(x, nnx.Variable)):
    x = var[...]
    blocks.append((x.sharding.shard_shape(x.shape), NamedSharding(mesh, compute_spec(x.sharding.spec)).shard_shape(x.shape)))

  def divides(part, whole, dims):
    return len(part) == len(whole) and all(w % p == 0 for p, w in zip(part, whole)) and all(
        part[d] == whole[d] for d in dims)

  def is_weight_gather(result, dims):
    # operand = result with the gathered dimension(s) split nf ways; it must be (a block of) a parameter's
    # stored shard, complete along the gathered dimension, and the result (a block of) the same
    # parameter's compute shard (XLA may gather a weight in slices, e.g. one KV head at a time)
    if not dims or any(result[d] % nf for d in dims):
      return False
    operand = tuple(n // nf if i in dims else n for i, n in enumerate(result))
    return any(divides(operand, s, dims) and divides(result, c, dims) for s, c in blocks)

  gathers = [c for c in ops if c.op == "all-gather"]
  if nf == 1 and mesh.shape["tensor"] == 1:
    assert not gathers, [c.line[:200] for c in gathers]
  pos = {int(i): idx for idx, i in np.ndenumerate(np.arange(mesh.size).reshape(mesh.devices.shape))}
  t_axis = mesh.axis_names.index("tensor")

  def within_tensor(groups):  # every group differs only in its tensor coordinate (the axis or a sub-axis)
    return groups is not None and all(
        len({tuple(c for k, c in enumerate(pos[d]) if k != t_axis) for d in g}) == 1 for g in groups)

  param_shapes = {shape for pair in blocks for shape in pair} | {
      var[...].shape for var in jax.tree.leaves(placed.params, is_leaf=lambda x: isinstance(x, nnx.Variable))}
  for c in gathers:
    if mesh_axes_of_groups(c.groups, mesh) == frozenset({"fsdp"}):
      for shape in c.shapes:
        assert is_weight_gather(shape, c.dimensions), f"all-gather of {shape} is not a weight's fsdp gather: {c.line[:300]}"
    else:
      # the only other gathers allowed: activation reshards inside a tensor group (e.g. 2 KV heads on
      # tensor=4 are split 2 ways, so K/V activations are gathered over half the tensor ring) —
      # never a parameter-shaped array
      assert within_tensor(c.groups), f"all-gather outside the fsdp / tensor groups: {c.line[:300]}"
      for shape in c.shapes:
        assert shape not in param_shapes, f"parameter-like all-gather: {c.line[:300]}"
  if mesh.shape["fsdp"] > 1:
    assert gathers, "FSDP mesh but no weight all-gather: the weights were not used in the gathered layout"


def test_hlo_parser_on_handwritten_lines():
  mesh = make_mesh(F2T4)  # positions: fsdp * 4 + tensor
  text = "\n".join([
      "  %all-gather.1 = f32[64,4,16]{2,1,0} all-gather(f32[32,4,16]{2,1,0} %p), channel_id=1, "
      "replica_groups={{0,4},{1,5},{2,6},{3,7}}, dimensions={0}, use_global_device_ids=true",
      "  %all-reduce.2 = (f32[8]{0}, f32[]) all-reduce(%a, %b), replica_groups=[2,4]<=[8], to_apply=%add",
      "  %all-gather.3 = f32[8,64]{1,0} all-gather(%x), replica_groups=[4,2]<=[2,4]T(1,0), dimensions={0}",
      "  %all-reduce.5 = f32[] all-reduce(%r), replica_groups=mesh['axis_0'=4,'axis_1'=1,'axis_2'=2], "
      "device_ids=([2,4]T(1,0)) {'axis_0'}, use_global_device_ids=true, to_apply=%add",
      "  %add.4 = f32[8]{0} add(%all-reduce.2, %c)",
  ])
  ops = collectives(text)
  assert [c.op for c in ops] == ["all-gather", "all-reduce", "all-gather", "all-reduce"]
  assert mesh_axes_of_groups(ops[3].groups, mesh) == {"tensor"}
  assert ops[0].shapes == ((64, 4, 16),) and ops[0].dimensions == (0,)
  assert mesh_axes_of_groups(ops[0].groups, mesh) == {"fsdp"}
  assert ops[1].shapes == ((8,), ()) and mesh_axes_of_groups(ops[1].groups, mesh) == {"tensor"}
  assert ops[2].groups == ((0, 4), (1, 5), (2, 6), (3, 7))
  assert mesh_axes_of_groups(((0, 1), (2, 3), (4, 5), (6, 7)), mesh) is None  # half a tensor ring


def test_sampler_with_sharded_params_gives_the_same_samples():
  from rljax.sampling import SamplerConfig, generate  # pylint: disable=import-outside-toplevel
  cfg = ModelConfig.tiny()
  model = Transformer(cfg, rngs=nnx.Rngs(0))
  graphdef, state = nnx.split(model)
  config = SamplerConfig(max_new_tokens=6, prompt_buckets=(8,))
  prompts = [[3, 4, 5], [7, 8], [9, 10, 11, 12]]
  kw = dict(config=config, key=jax.random.key(3), n=2, temperature=1.0)
  ref = generate((graphdef, state), prompts, **kw)
  mesh = make_mesh(D2F2T2)
  from rljax.parallel import shard_state  # pylint: disable=import-outside-toplevel
  sharded = shard_state(state, mesh)
  assert sharded["layers"][0]["attn"]["q"]["kernel"][...].sharding.spec == P("fsdp", "tensor", None)
  out = generate((graphdef, sharded), prompts, **kw)
  np.testing.assert_array_equal(out.tokens, ref.tokens)
  np.testing.assert_array_equal(out.completion_mask, ref.completion_mask)
  np.testing.assert_allclose(out.logp_behavior, ref.logp_behavior, rtol=1e-5, atol=1e-5)


def test_sampler_constrains_the_kv_cache_to_the_logical_layout():
  """Rows of the KV cache over (data, fsdp) and KV heads over tensor (without the constraint XLA's
  propagation leaves the rows replicated)."""
  from rljax.parallel import shard_state  # pylint: disable=import-outside-toplevel
  from rljax.sampling import SamplerConfig, generate  # pylint: disable=import-outside-toplevel
  from rljax.sampling._state import CACHE_AXES  # pylint: disable=import-outside-toplevel
  cfg = ModelConfig.tiny()
  graphdef, state = nnx.split(Transformer(cfg, rngs=nnx.Rngs(0)))
  mesh = make_mesh(D2F2T2)
  config = SamplerConfig(max_new_tokens=4, prompt_buckets=(8,))
  prompts = [[3, 4, 5], [7, 8], [9, 10, 11, 12], [5, 6]]
  # (the samples equal the 1-device ones: test_sampler_with_sharded_params_gives_the_same_samples)
  _, st = generate((graphdef, shard_state(state, mesh)), prompts, return_state=True, config=config,
                   key=jax.random.key(3), n=2, temperature=1.0)
  want = NamedSharding(mesh, logical_to_spec(CACHE_AXES, mesh, st.cache.k.shape))
  assert want.spec[1] == ("data", "fsdp") and want.spec[3] == "tensor"
  for x in (st.cache.k, st.cache.v):
    assert x.sharding.is_equivalent_to(want, x.ndim), x.sharding


def _grpo_reference(r, gid, eps=1e-6):
  r = np.asarray(r, np.float64)
  out = np.zeros_like(r)
  for g in np.unique(gid):
    idx = gid == g
    if idx.sum() < 2:
      continue
    out[idx] = (r[idx] - r[idx].mean()) / (r[idx].std(ddof=1) + eps)
  return out


def test_group_statistics_when_a_group_spans_devices():
  mesh = make_mesh(D8)
  rng = np.random.default_rng(1)
  b = 32  # 4 rows per device; group g = b % 5 puts every group on several devices (ragged: 7 or 6 members)
  rewards = rng.normal(size=b).astype(np.float32)
  gid = (np.arange(b) % 5).astype(np.int32)
  sh = NamedSharding(mesh, P("data"))
  fn = jax.jit(lambda r, g: grpo(r, g, num_groups=5)[0], in_shardings=(sh, sh), out_shardings=sh)
  adv = fn(jax.device_put(rewards, sh), jax.device_put(gid, sh))
  assert adv.sharding.spec == P("data")
  np.testing.assert_allclose(adv, _grpo_reference(rewards, gid), rtol=1e-5, atol=1e-6)
  # a per-device computation would normalise within each 4-row shard instead: make sure that differs
  local = np.concatenate([_grpo_reference(rewards[i:i + 4], gid[i:i + 4]) for i in range(0, b, 4)])
  assert np.max(np.abs(local - np.asarray(adv))) > 0.1


def test_loss_aggregation_uses_the_global_token_count():
  mesh = make_mesh(D8)
  rng = np.random.default_rng(2)
  b, t = 16, 10
  logp = rng.normal(size=(b, t)).astype(np.float32)
  lengths = rng.integers(0, t + 1, size=b)  # some shards hold far more tokens than others
  lengths[:2] = 0  # a shard without any loss token
  mask = np.arange(t)[None, :] < lengths[:, None]
  objective = chain(lambda out, batch: (-out.logp, {}), aggregate=token_mean)
  sh = NamedSharding(mesh, P("data"))

  def loss(logp, mask):
    batch = TrainBatch(tokens=jnp.zeros(mask.shape, jnp.int32), loss_mask=mask,
                       advantages=jnp.zeros(mask.shape, jnp.float32), group_id=jnp.zeros(mask.shape[:1], jnp.int32))
    return objective(PolicyOutputs(logp=logp, entropy=None), batch)[0]

  got = jax.jit(loss, in_shardings=(sh, sh))(jax.device_put(logp, sh), jax.device_put(mask, sh))
  want = -np.sum(logp.astype(np.float64) * mask) / mask.sum()
  np.testing.assert_allclose(got, want, rtol=1e-6)
  # the mean of per-shard token means (what a naive per-device loss + gradient all-reduce gives) differs
  shard_means = [-(logp[i:i + 2] * mask[i:i + 2]).sum() / mask[i:i + 2].sum() for i in range(2, b, 2)]
  assert abs(np.mean(shard_means) - want) > 1e-3


def test_train_state_shardings_validation():
  mesh = make_mesh(D8)
  with pytest.raises(ValueError, match="TrainState"):
    train_state_shardings({"params": 1}, mesh)


def test_with_logical_constraint_and_batch_shardings():
  from rljax.parallel import with_logical_constraint  # pylint: disable=import-outside-toplevel
  mesh = make_mesh(D2F2T2)
  x = jnp.arange(4 * 6 * 2 * 8, dtype=jnp.float32).reshape(4, 6, 2, 8)  # a [B, S, K, D] cache slice
  axes = ("batch", "cache_seq", "kv_heads", "head_dim")
  assert with_logical_constraint(x, axes) is x  # no ambient mesh: unchanged
  y = jax.jit(lambda a: with_logical_constraint(a * 2, axes, mesh))(x)
  assert y.sharding.is_equivalent_to(NamedSharding(mesh, P(("data", "fsdp"), None, "tensor", None)), 4)
  np.testing.assert_array_equal(y, 2 * x)
  with jax.set_mesh(mesh):
    z = jax.jit(lambda a: with_logical_constraint(a + 1, axes))(x)
  assert z.sharding.is_equivalent_to(NamedSharding(mesh, P(("data", "fsdp"), None, "tensor", None)), 4)
  sh = batch_shardings({"tokens": jnp.zeros((8, 3)), "n": jnp.zeros(()), "odd": jnp.zeros((2, 3))}, mesh)
  assert sh["tokens"].spec == P(("data", "fsdp"), None) and sh["n"].spec == P() and sh["odd"].spec == P("data", None)


def test_fsdp_loss_fn_forwards_the_micro_batch_hooks():
  """``make_train_step`` finds ``denominator`` and ``with_aux_weight`` in the FSDP wrapper's ``hooks()`` too, so a
  sharded micro-batched step also uses the global denominator and averages the auxiliary loss."""
  mesh = make_mesh(MESHES[0])
  loss = nll_loss()
  hooks = fsdp_loss_fn(loss, mesh).hooks()
  assert hooks.denominator == loss.denominator
  half = hooks.with_aux_weight(0.5)
  assert isinstance(half, fsdp_loss_fn) and half.mesh is mesh and half.loss_fn._aux_weight == 0.5
  assert fsdp_loss_fn(lambda model, batch, hparams, denominator: None, mesh).hooks() == (None, None, None)
