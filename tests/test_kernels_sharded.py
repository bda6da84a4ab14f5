"""Vocab-parallel rljax.kernels on 8 (fake) CPU devices equals the single-device op."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rljax.kernels import BlockSizes, logprob_and_entropy, logprob_and_entropy_sharded
from test_kernels_reference import make_inputs

pytestmark = pytest.mark.skipif(len(jax.devices()) < 8, reason="needs 8 (fake) devices")


def _grads(fn, x, w, a, b):
  def loss(x, w):
    lp, ent = fn(x, w)
    return jnp.sum(lp * a) + jnp.sum(ent * b), (lp, ent)
  (_, (lp, ent)), (gx, gw) = jax.jit(jax.value_and_grad(loss, (0, 1), has_aux=True))(x, w)
  return lp, ent, gx, gw


@pytest.mark.parametrize("shape,names,token_axes,axis_type,impl", [
    ((8,), ("tensor",), None, "explicit", "xla"),
    ((2, 4), ("data", "tensor"), "data", "auto", "xla"),
    ((8,), ("tensor",), None, "auto", "pallas_tpu"),
])
def test_sharded_equals_single_device(shape, names, token_axes, axis_type, impl):
  n, h, v = 20, 16, 8 * 48  # V/8 = 48 columns per shard, padded to 128 locally
  x, w, t, mask, a, b = make_inputs(20, n, h, v)
  x, w, t, mask = map(jnp.asarray, (x, w, t, mask))
  kinds = {"explicit": jax.sharding.AxisType.Explicit, "auto": jax.sharding.AxisType.Auto}
  mesh = jax.make_mesh(shape, names, axis_types=(kinds[axis_type],) * len(shape))
  kw = dict(temperature=0.9, soft_cap=6.0, mask=mask, block_sizes=BlockSizes(8, 128))
  single = _grads(lambda x, w: logprob_and_entropy(x, w, t, impl="xla", **kw), x, w, a, b)
  sharded = _grads(lambda x, w: logprob_and_entropy_sharded(
      x, w, t, mesh=mesh, token_axes=token_axes, impl=impl, **kw), x, w, a, b)
  for s, r in zip(sharded, single):
    np.testing.assert_allclose(np.asarray(s), np.asarray(r), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,names,token_axes,axis_name,n,chunk_rows,axis_type", [
    # FSDP layout: rows over (data, fsdp), columns over (tensor, fsdp); 17 rows per device padded to
    # 3 chunks of 8, each gathered over fsdp and reduce-scattered back
    ((2, 2, 2), ("data", "fsdp", "tensor"), ("data", "fsdp"), ("tensor", "fsdp"), 68, 8, "explicit"),
    # rows over (fsdp, data), columns over (fsdp, tensor): the shared axis major in both; default chunk (one)
    ((2, 2, 2), ("fsdp", "data", "tensor"), ("fsdp", "data"), ("fsdp", "tensor"), 36, None, "auto"),
])
def test_sharded_with_rows_gathered_over_a_vocab_axis_equals_single_device(shape, names, token_axes, axis_name, n,
                                                                           chunk_rows, axis_type):
  h, v = 16, 8 * 48
  x, w, t, mask, a, b = make_inputs(21, n, h, v)
  x, w, t, mask = map(jnp.asarray, (x, w, t, mask))
  kinds = {"explicit": jax.sharding.AxisType.Explicit, "auto": jax.sharding.AxisType.Auto}
  mesh = jax.make_mesh(shape, names, axis_types=(kinds[axis_type],) * len(shape))
  kw = dict(temperature=0.9, soft_cap=6.0, mask=mask, block_sizes=BlockSizes(8, 128))
  single = _grads(lambda x, w: logprob_and_entropy(x, w, t, impl="xla", **kw), x, w, a, b)
  sharded = _grads(lambda x, w: logprob_and_entropy_sharded(
      x, w, t, mesh=mesh, axis_name=axis_name, token_axes=token_axes, impl="xla", chunk_rows=chunk_rows, **kw),
                   x, w, a, b)
  for name, s, r in zip(("logp", "entropy", "dx", "dw"), sharded, single):
    np.testing.assert_allclose(np.asarray(s), np.asarray(r), rtol=1e-5, atol=1e-6, err_msg=name)


def test_sharded_bad_input():
  mesh = jax.make_mesh((8,), ("tensor",))
  x, w, t = np.zeros((8, 16), np.float32), np.zeros((16, 100), np.float32), np.zeros(8, np.int32)
  with pytest.raises(ValueError, match="divisible"):
    logprob_and_entropy_sharded(x, w, t, mesh=mesh)
  with pytest.raises(ValueError, match="axis_name"):
    logprob_and_entropy_sharded(x, np.zeros((16, 128), np.float32), t, mesh=mesh, axis_name="model")
  with pytest.raises(ValueError, match="twice"):
    logprob_and_entropy_sharded(x, np.zeros((16, 128), np.float32), t, mesh=mesh, axis_name=("tensor", "tensor"))
  with pytest.raises(ValueError, match="chunk_rows"):
    logprob_and_entropy_sharded(x, np.zeros((16, 128), np.float32), t, mesh=mesh, token_axes="tensor", chunk_rows=0)
  with pytest.raises(ValueError, match="token_axes"):
    logprob_and_entropy_sharded(x, np.zeros((16, 128), np.float32), t, mesh=mesh, token_axes="data")
