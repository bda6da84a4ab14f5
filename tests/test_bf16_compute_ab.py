"""rljax's bfloat16 ``Linear`` accumulates in float32 (a float32-output dot in its program, cast), and
``benchmarks/bf16_compute_ab.py``'s old-form variant (a bfloat16-output dot) computes the same function (bfloat16
rounding apart), with the library's ``mm`` restored after."""
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from rljax.models import ModelConfig
from rljax.models import _layers

BENCH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def ab():
  sys.path.insert(0, str(BENCH))
  try:
    import importlib  # pylint: disable=import-outside-toplevel
    yield importlib.import_module("bf16_compute_ab")
  finally:
    sys.path.remove(str(BENCH))


def _linear():
  cfg = ModelConfig(vocab_size=16, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=2, head_dim=16,
                    intermediate_size=64, compute_dtype="bfloat16")
  return _layers.Linear((32,), (48,), ("embed",), ("mlp",), cfg=cfg, rngs=nnx.Rngs(0), std=0.2)


def test_bfloat16_linear_accumulates_in_float32_and_the_old_form_computes_the_same(ab):
  lin = _linear()
  x = jax.random.normal(jax.random.key(1), (3, 5, 32), jnp.float32)
  lib = lin(x)
  hlo = jax.jit(lambda v: lin(v)).lower(x).as_text()
  inner = _layers.mm
  with ab.bfloat16_output_dots():
    old = lin(x)
    old_hlo = jax.jit(lambda v: lin(v)).lower(x).as_text()
  assert _layers.mm is inner  # restored
  assert lib.dtype == old.dtype == jnp.bfloat16 and lib.shape == old.shape == (3, 5, 48)
  # both round one float32 accumulation to bfloat16: equal up to a bfloat16 step
  want = np.asarray(x, np.float64).reshape(-1, 32).astype(np.float32).astype(jnp.bfloat16).astype(np.float64) @ \
      np.asarray(lin.kernel[...].astype(jnp.bfloat16), np.float64)
  for y in (lib, old):
    np.testing.assert_allclose(np.asarray(y, np.float64).reshape(-1, 48), want, rtol=2 ** -7, atol=1e-2)
  dots = lambda text: [ln for ln in text.splitlines() if "stablehlo.dot_general" in ln]  # noqa: E731
  assert [d.endswith("-> tensor<15x48xf32>") for d in dots(hlo)] == [True]
  assert [d.endswith("-> tensor<15x48xbf16>") for d in dots(old_hlo)] == [True]


def test_float32_linear_is_a_plain_float32_dot():
  cfg = ModelConfig(vocab_size=16, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=2, head_dim=16,
                    intermediate_size=64)
  lin = _layers.Linear((32,), (48,), ("embed",), ("mlp",), cfg=cfg, rngs=nnx.Rngs(0), std=0.2)
  x = jax.random.normal(jax.random.key(1), (15, 32), jnp.float32)
  hlo = jax.jit(lambda v: lin(v)).lower(x).as_text()
  assert [ln.endswith("-> tensor<15x48xf32>") for ln in hlo.splitlines() if "stablehlo.dot_general" in ln] == [True]
  np.testing.assert_allclose(np.asarray(lin(x)), np.asarray(x, np.float64) @ np.asarray(lin.kernel[...], np.float64),
                             rtol=1e-5, atol=1e-5)


def test_the_float32_accumulated_form_is_lowered_for_cpu_only():
  """On the v5e compile of the Qwen2.5-7B update the CPU form cost 0.42 GiB per chip, so TPU and GPU lowerings keep
  the plain 16-bit dot (``jax.lax.platform_dependent``); float32 operands are a plain dot everywhere."""
  x = jax.ShapeDtypeStruct((15, 32), jnp.bfloat16)
  w = jax.ShapeDtypeStruct((32, 48), jnp.bfloat16)
  want = {"cpu": "tensor<15x48xf32>", "tpu": "tensor<15x48xbf16>", "cuda": "tensor<15x48xbf16>"}
  for platform, out in want.items():
    for fn, args in ((_layers.mm, (x, w)), (_layers.dot_t, (x, jax.ShapeDtypeStruct((48, 32), jnp.bfloat16)))):
      text = jax.jit(fn).trace(*args).lower(lowering_platforms=(platform,)).as_text()
      dots = [ln for ln in text.splitlines() if "stablehlo.dot_general" in ln]
      expect = out if fn is _layers.mm else out.replace("15x48", "48x15")
      assert len(dots) == 1 and dots[0].endswith(f"-> {expect}"), (platform, fn.__name__, dots)
  f32 = jax.ShapeDtypeStruct((15, 32), jnp.float32)
  text = jax.jit(_layers.mm).trace(f32, jax.ShapeDtypeStruct((32, 48), jnp.float32)).lower(
      lowering_platforms=("tpu",)).as_text()
  assert [ln.endswith("-> tensor<15x48xf32>") for ln in text.splitlines() if "stablehlo.dot_general" in ln] == [True]
