"""rljax.kernels Pallas kernels (TPU Mosaic and GPU Triton) in interpret mode on CPU."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rljax.kernels import BlockSizes, logprob_and_entropy
from test_kernels_reference import make_inputs, reference, rel_err

_BLOCKS = {"pallas_tpu": BlockSizes(8, 128), "pallas_gpu": BlockSizes(16, 128, 16)}


def _run(impl, x, w, t, mask, a, b, jit, **kw):
  def loss(x, w):
    lp, ent = logprob_and_entropy(x, w, t, mask=mask, impl=impl, block_sizes=_BLOCKS[impl], **kw)
    return jnp.sum(lp * a) + jnp.sum(ent * b), (lp, ent)
  fn = jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)
  if jit:
    fn = jax.jit(fn)
  (_, (lp, ent)), (gx, gw) = fn(x, w)
  return lp, ent, gx, gw


@pytest.mark.parametrize("impl,jit", [("pallas_tpu", False), ("pallas_gpu", True)])
def test_f32_forward_and_grads_match_float64(impl, jit):
  # V = 200 is padded to 256 (masked columns); N = 24 spans several token blocks.
  x, w, t, mask, a, b = make_inputs(10, 24, 32, 200)
  got = _run(impl, jnp.asarray(x), jnp.asarray(w), jnp.asarray(t), jnp.asarray(mask), a, b, jit,
             temperature=0.8, soft_cap=4.0)
  want = reference(x, w, t, temperature=0.8, soft_cap=4.0, mask=mask, a=a, b=b)
  for g, r in zip(got, want):
    assert rel_err(g, r) <= 1e-5
  lp, ent = np.asarray(got[0]), np.asarray(got[1])
  assert np.all(lp <= 0) and np.all(ent >= 0) and np.all(ent <= np.log(200) + 1e-6)
  np.testing.assert_array_equal(np.asarray(got[2])[~mask], 0.0)


@pytest.mark.parametrize("impl", ["pallas_tpu", "pallas_gpu"])
def test_bf16_inputs_match_float64(impl):
  x, w, t, mask, a, b = make_inputs(11, 16, 32, 256)
  xb, wb = jnp.asarray(x, jnp.bfloat16), jnp.asarray(w, jnp.bfloat16)
  got = _run(impl, xb, wb, jnp.asarray(t), jnp.asarray(mask), a, b, True, temperature=1.3)
  assert got[2].dtype == jnp.bfloat16 and got[3].dtype == jnp.bfloat16
  want = reference(np.asarray(xb, np.float64), np.asarray(wb, np.float64), t, temperature=1.3,
                   mask=mask, a=a, b=b)
  for g, r in zip(got, want):
    assert rel_err(g, r) <= 1e-2


@pytest.mark.parametrize("platform", ["tpu", "cuda"])
def test_kernels_lower_for_hardware(platform):
  # Cross-platform lowering (no device needed) checks the real Mosaic / Triton
  # lowering rules -- block shapes, dot forms, atomics -- that interpret mode skips.
  from rljax.kernels import _pallas_gpu, _pallas_tpu
  mod, kw = ((_pallas_tpu, dict(block_n=256, block_v=512)) if platform == "tpu" else
             (_pallas_gpu, dict(block_n=64, block_v=128, block_h=64)))
  n, h, v = 512, 896, 1024
  sds = jax.ShapeDtypeStruct
  x, w = sds((n, h), jnp.bfloat16), sds((h, v), jnp.bfloat16)
  t, f, s = sds((n,), jnp.int32), sds((n,), jnp.float32), sds((), jnp.float32)
  for fn, args in (("forward_stats", (x, w, t, s)), ("backward", (x, w, t, s, f, f, f, f))):
    g = jax.jit(lambda *a, fn=fn: getattr(mod, fn)(*a, soft_cap=30.0, v_valid=1000,
                                                   interpret=False, **kw))
    text = g.trace(*args).lower(lowering_platforms=(platform,)).as_text()
    assert "logprob_entropy" in text
