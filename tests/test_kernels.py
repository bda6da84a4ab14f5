"""rljax.kernels: chunked XLA path, reference, validation and invariants."""
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rljax.kernels import BlockSizes, logprob_and_entropy, logprob_and_entropy_reference
from test_kernels_reference import make_inputs, reference, rel_err


def _loss_fn(impl, t, mask, a, b, **kw):
  def loss(x, w):
    lp, ent = logprob_and_entropy(x, w, t, mask=mask, impl=impl, **kw)
    return jnp.sum(lp * a) + jnp.sum(ent * b), (lp, ent)
  return jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)


@pytest.mark.parametrize("impl,soft_cap,temperature,jit", [
    ("xla", None, 1.0, True), ("xla", 4.0, 0.7, True), ("xla", None, 1.6, True),
    ("xla", 4.0, 0.7, False), ("reference", 4.0, 0.7, True)])
def test_f32_matches_float64(impl, soft_cap, temperature, jit):
  n, h, v = 37, 32, 300  # neither N nor V a block multiple: exercises padding
  x, w, t, mask, a, b = make_inputs(1, n, h, v)
  fn = _loss_fn(impl, jnp.asarray(t), jnp.asarray(mask), a, b, temperature=temperature,
                soft_cap=soft_cap, block_sizes=None if impl == "reference" else BlockSizes(8, 128))
  if jit:
    fn = jax.jit(fn)
  (_, (lp, ent)), (gx, gw) = fn(jnp.asarray(x), jnp.asarray(w))
  assert lp.dtype == jnp.float32 and ent.dtype == jnp.float32 and lp.shape == (n,)
  want = reference(x, w, t, temperature=temperature, soft_cap=soft_cap, mask=mask, a=a, b=b)
  for got, ref in zip((lp, ent, gx, gw), want):
    assert rel_err(got, ref) <= 1e-5


def test_default_blocks_larger_problem():
  n, h, v = 300, 64, 5000
  x, w, t, mask, a, b = make_inputs(2, n, h, v)
  (_, (lp, ent)), (gx, gw) = jax.jit(_loss_fn("auto", jnp.asarray(t), jnp.asarray(mask), a, b,
                                              temperature=0.9))(jnp.asarray(x), jnp.asarray(w))
  want = reference(x, w, t, temperature=0.9, mask=mask, a=a, b=b)
  for got, ref in zip((lp, ent, gx, gw), want):
    assert rel_err(got, ref) <= 1e-5


def test_bf16_inputs_f32_accumulation():
  n, h, v = 40, 64, 512
  x, w, t, mask, a, b = make_inputs(3, n, h, v)
  xb, wb = jnp.asarray(x, jnp.bfloat16), jnp.asarray(w, jnp.bfloat16)
  (_, (lp, ent)), (gx, gw) = jax.jit(_loss_fn("xla", jnp.asarray(t), jnp.asarray(mask), a, b,
                                              soft_cap=5.0, block_sizes=BlockSizes(16, 128)))(xb, wb)
  assert gx.dtype == jnp.bfloat16 and gw.dtype == jnp.bfloat16
  want = reference(np.asarray(xb, np.float64), np.asarray(wb, np.float64), t, soft_cap=5.0,
                   mask=mask, a=a, b=b)
  for got, ref in zip((lp, ent, gx, gw), want):
    assert rel_err(got, ref) <= 1e-2


def test_traced_temperature_matches_static():
  x, w, t, mask, _, _ = make_inputs(4, 24, 16, 256)
  f = jax.jit(lambda x, w, tau: logprob_and_entropy(x, w, t, temperature=tau, mask=mask, impl="xla",
                                                    block_sizes=BlockSizes(8, 128)))
  got = f(x, w, jnp.float32(0.6))
  want = reference(x, w, t, temperature=0.6, mask=mask)
  for g, r in zip(got, want):
    assert rel_err(g, r) <= 1e-5


def test_mask_gives_zero_loss_and_gradient():
  n, h, v = 16, 16, 256
  x, w, t, mask, a, b = make_inputs(5, n, h, v, masked_frac=0.5)
  assert (~mask).sum() >= 3
  fn = jax.jit(_loss_fn("xla", jnp.asarray(t), jnp.asarray(mask), a, b,
                        block_sizes=BlockSizes(8, 128)))
  (_, (lp, ent)), (gx, gw) = fn(jnp.asarray(x), jnp.asarray(w))
  np.testing.assert_array_equal(np.asarray(lp)[~mask], 0.0)
  np.testing.assert_array_equal(np.asarray(ent)[~mask], 0.0)
  np.testing.assert_array_equal(np.asarray(gx)[~mask], 0.0)
  assert np.all(np.asarray(lp)[mask] < 0)
  # dW only sees the live rows: same as dropping the masked rows entirely.
  keep = np.flatnonzero(mask)
  fn2 = jax.jit(_loss_fn("xla", jnp.asarray(t[keep]), None, a[keep], b[keep],
                         block_sizes=BlockSizes(8, 128)))
  _, (_, gw2) = fn2(jnp.asarray(x[keep]), jnp.asarray(w))
  np.testing.assert_allclose(gw, gw2, rtol=1e-5, atol=1e-6)


def test_bounds_extreme_and_uniform_logits():
  n, h, v = 32, 16, 384
  x, w, t, _, _, _ = make_inputs(6, n, h, v, scale=300.0, masked_frac=0.0)
  lp, ent = logprob_and_entropy(x, w, t, impl="xla", block_sizes=BlockSizes(8, 128))
  lp, ent = np.asarray(lp), np.asarray(ent)
  assert np.all(np.isfinite(lp)) and np.all(np.isfinite(ent))
  assert np.all(lp <= 0) and np.all(ent >= 0) and np.all(ent <= math.log(v) + 1e-6)
  lp0, ent0 = logprob_and_entropy(x, np.zeros((h, v), np.float32), t, impl="xla",
                                  block_sizes=BlockSizes(8, 128))
  np.testing.assert_allclose(lp0, -math.log(v), rtol=1e-6)
  np.testing.assert_allclose(ent0, math.log(v), rtol=1e-6)


def test_reference_export_matches_numpy():
  x, w, t, mask, _, _ = make_inputs(7, 12, 8, 50)
  got = logprob_and_entropy_reference(x, w, t, mask=mask, temperature=1.3, soft_cap=3.0)
  for g, r in zip(got, reference(x, w, t, mask=mask, temperature=1.3, soft_cap=3.0)):
    assert rel_err(g, r) <= 1e-5


_X = np.zeros((8, 16), np.float32)
_W = np.zeros((16, 256), np.float32)
_T = np.zeros((8,), np.int32)


@pytest.mark.parametrize("args,kwargs,match", [
    ((_X[0], _W, _T), {}, "hidden"),
    ((_X, _W[:8], _T), {}, "disagree on H"),
    ((_X, _W, _T[:4]), {}, "targets must be"),
    ((_X, _W, _T.astype(np.float32)), {}, "integer"),
    ((_X, _W, _T + 256), {}, "targets"),
    ((_X, _W, _T - 1), {}, "targets"),
    ((_X, _W, _T), {"mask": np.ones(4, bool)}, "mask"),
    ((_X, _W, _T), {"temperature": 0.0}, "temperature"),
    ((_X, _W, _T), {"soft_cap": -1.0}, "soft_cap"),
    ((_X, _W, _T), {"impl": "cuda"}, "impl"),
    ((_X, _W, _T), {"block_sizes": (8, 128)}, "block_sizes"),
    ((_X, _W, _T), {"impl": "pallas_gpu", "block_sizes": BlockSizes(16, 128, 48)}, "block_h"),
    ((_X, _W, _T), {"impl": "pallas_gpu", "block_sizes": BlockSizes(24, 128, 16)}, "power of two"),
])
def test_bad_input_raises(args, kwargs, match):
  with pytest.raises(ValueError, match=match):
    logprob_and_entropy(*args, **kwargs)


def test_out_of_range_target_allowed_where_masked():
  t = _T.copy()
  t[3] = 10_000
  mask = np.ones(8, bool)
  mask[3] = False
  lp, _ = logprob_and_entropy(_X, _W, t, mask=mask, impl="xla")
  assert float(lp[3]) == 0.0


@pytest.mark.parametrize("kwargs,match", [
    ({"block_n": 12}, "multiple of 8"),
    ({"block_v": 100}, "multiple of 128"),
    ({"block_n": 1 << 20}, "block_n"),
    ({"block_v": 0}, "block_v"),
    ({"block_h": 2.0}, "int"),
])
def test_block_sizes_validation(kwargs, match):
  with pytest.raises(ValueError, match=match):
    BlockSizes(**kwargs)


def test_pallas_tpu_vmem_limit():
  sds = jax.ShapeDtypeStruct
  f = functools.partial(logprob_and_entropy, impl="pallas_tpu",
                        block_sizes=BlockSizes(block_n=4096, block_v=8192))
  with pytest.raises(ValueError, match="VMEM"):
    jax.eval_shape(f, sds((8192, 4096), jnp.bfloat16), sds((4096, 16384), jnp.bfloat16),
                   sds((8192,), jnp.int32))
