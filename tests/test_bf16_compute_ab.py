"""``benchmarks/bf16_compute_ab.py``'s float32-output variant: the same function as rljax's bfloat16 ``Linear``
(bfloat16 rounding apart), a float32-output dot in its program, and the library's ``Linear`` restored after."""
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


def test_float32_output_dots_compute_the_same_linear(ab):
  lin = _linear()
  x = jax.random.normal(jax.random.key(1), (3, 5, 32), jnp.float32)
  plain = lin(x)
  plain_hlo = jax.jit(lambda v: lin(v)).lower(x).as_text()
  inner = _layers.Linear.__call__
  with ab.float32_output_dots():
    mixed = lin(x)
    hlo = jax.jit(lambda v: lin(v)).lower(x).as_text()
  assert _layers.Linear.__call__ is inner  # restored
  assert plain.dtype == mixed.dtype == jnp.bfloat16 and plain.shape == mixed.shape == (3, 5, 48)
  # both round one float32 accumulation to bfloat16: equal up to a bfloat16 step
  want = np.asarray(x, np.float64).reshape(-1, 32).astype(np.float32).astype(jnp.bfloat16).astype(np.float64) @ \
      np.asarray(lin.kernel[...].astype(jnp.bfloat16), np.float64)
  for y in (plain, mixed):
    np.testing.assert_allclose(np.asarray(y, np.float64).reshape(-1, 48), want, rtol=2 ** -7, atol=1e-2)
  dots = lambda text: [ln for ln in text.splitlines() if "stablehlo.dot_general" in ln]  # noqa: E731
  assert [d.endswith("-> tensor<15x48xbf16>") for d in dots(plain_hlo)] == [True]
  assert [d.endswith("-> tensor<15x48xf32>") for d in dots(hlo)] == [True]
