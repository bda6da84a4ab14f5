"""rljax.kernels as lowered for the hardware, not the host: Mosaic for TPU topologies (XLA:TPU compiles
here with no TPU attached), Triton for cuda (``jax.export``); and the unpadded weight (a ragged last
vocabulary block) against the float64 reference."""
import functools
import importlib.util
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rljax.kernels import BlockSizes, logprob_and_entropy, logprob_and_entropy_sharded
from test_kernels_reference import make_inputs, reference, rel_err

# A program compiled for a TPU topology enters the session's persistent compilation cache (tests/conftest.py), but
# an executable without a TPU client cannot be read back: JAX warns and compiles again.
pytestmark = pytest.mark.filterwarnings("ignore:Error reading persistent compilation cache entry:UserWarning")

ROOT = pathlib.Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location("tpu_kernel_memory", ROOT / "benchmarks" / "tpu_kernel_memory.py")
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)


def _chips(topology: str):
  pytest.importorskip("libtpu", reason='compiling for TPU needs libtpu: pip install -e ".[tpu]"')
  return bench.topology_devices(topology)


# ----------------------------------------------------------------------------- ragged vocabulary, float64


@pytest.mark.parametrize("impl,v,blocks", [
    ("xla", 1000, BlockSizes(8, 256)),   # 3 whole blocks + 232 columns: the last window overlaps block 2
    ("xla", 151936, None),               # Qwen's V = 128 * 1187: default blocks 1024, last one 384 wide
    ("pallas_tpu", 1000, None),          # 512 + 488: the last block reads past the weight (NaN, interpreted)
    ("pallas_tpu", 151936, None),        # blocks of 512, the last 384 wide
    ("pallas_gpu", 1000, BlockSizes(16, 256, 16)),  # Triton, interpreted: the shifted last window as in XLA
])
def test_ragged_vocabulary_matches_float64(impl, v, blocks):
  n, h = 32, 16
  x, w, t, mask, a, b = make_inputs(21, n, h, v)
  # Targets in the last block, in the columns the XLA path's shifted last window re-reads, and column 0.
  t[:5] = [v - 1, v - 200, v - 300, 750, 0]
  mask[:5] = True
  def loss(x, w):
    lp, ent = logprob_and_entropy(x, w, jnp.asarray(t), mask=jnp.asarray(mask), impl=impl,
                                  block_sizes=blocks, temperature=0.9, soft_cap=6.0)
    return jnp.sum(lp * a) + jnp.sum(ent * b), (lp, ent)
  (_, (lp, ent)), (gx, gw) = jax.jit(jax.value_and_grad(loss, argnums=(0, 1), has_aux=True))(
      jnp.asarray(x), jnp.asarray(w))
  want = reference(x, w, t, temperature=0.9, soft_cap=6.0, mask=mask, a=a, b=b)
  for got, ref in zip((lp, ent, gx, gw), want):
    assert np.all(np.isfinite(np.asarray(got)))
    assert rel_err(got, ref) <= 1e-5


@pytest.mark.parametrize("program", bench.PROGRAMS)
def test_no_padded_weight_copy_on_cpu(program):
  # V = 100_003 is a multiple of no block: padding the weight would put a second [H, V] in temp.
  n, h, v = 64, 256, 100_003
  sds = jax.ShapeDtypeStruct
  fn = bench.program_fn(program, "auto")
  mem = jax.jit(fn).lower(sds((n, h), jnp.float32), sds((h, v), jnp.float32),
                          sds((n,), jnp.int32)).compile().memory_analysis()
  assert mem.temp_size_in_bytes < h * v * 4 / 4


@pytest.mark.parametrize("blocks,h", [(None, 8192), (BlockSizes(block_n=4096, block_v=8192), 4096)])
def test_auto_fits_the_tpu_kernel_to_vmem(blocks, h):
  # The TPU branch of "auto" is planned on every host: blocks that would exceed the Mosaic kernel's VMEM
  # (a 72B head's H = 8192 at the default blocks; blocks meant for the XLA path) are shrunk, not refused,
  # while an explicit "pallas_tpu" still refuses them (tests/test_kernels.py::test_pallas_tpu_vmem_limit).
  from rljax.kernels import _api, _config
  (platforms, k), = [e for e in _api.kernel_table("auto", blocks, 8192, 151936, h, 2) if e[1].impl == "pallas_tpu"]
  assert platforms == ("tpu",) and not k.interpret
  assert _config.tpu_vmem_bytes(k.block_n, k.block_v, h, 2) <= _config.TPU_VMEM_BUDGET_BYTES
  assert k.block_n % 8 == 0 and k.block_v % 128 == 0
  sds = jax.ShapeDtypeStruct
  jax.eval_shape(functools.partial(logprob_and_entropy, impl="auto", block_sizes=blocks),
                 sds((8192, h), jnp.bfloat16), sds((h, 151936), jnp.bfloat16), sds((8192,), jnp.int32))


@pytest.mark.parametrize("impl,platform", [("pallas_tpu", "cuda"), ("pallas_gpu", "tpu")])
def test_explicit_kernel_lowered_for_another_platform_is_refused(impl, platform):
  sds = jax.ShapeDtypeStruct
  fn = jax.jit(bench.program_fn("forward+backward", impl))
  with pytest.raises(ValueError, match=f"impl='{impl}' lowers for .* lowered for {platform}"):
    jax.export.export(fn, platforms=[platform])(sds((64, 64), jnp.float32), sds((64, 256), jnp.float32),
                                               sds((64,), jnp.int32))


# ----------------------------------------------------------------------------- TPU (XLA:TPU + Mosaic)


@pytest.fixture(scope="module")
def v5e():
  return _chips("v5e:2x2")


@pytest.mark.parametrize("program", bench.PROGRAMS)
def test_auto_compiles_the_mosaic_kernel_for_tpu(v5e, program):
  # Host backend "cpu", target a v5e chip: auto must lower Mosaic, not the chunked XLA loop or the
  # interpreter's loop, and no copy of the (ragged: 1000 = 512 + 488) weight.
  n, h, v = 256, 128, 1000
  got = bench.compile_program(v5e[0], program, "auto", n, h, v)
  assert got["mosaic"] and got["loops"] == 0
  assert got["temp"] < h * v * 2
  assert not bench.compile_program(v5e[0], program, "xla", n, h, v)["mosaic"]


def test_explicit_pallas_tpu_is_mosaic_when_lowered_for_tpu(v5e):
  got = bench.compile_program(v5e[0], "forward+backward", "pallas_tpu", 256, 128, 1000)
  assert got["mosaic"] and got["loops"] == 0


def test_mixed_precision_head_compiles_for_tpu(v5e):
  """bfloat16 hidden states with float32 master weights (the pod-scale step's head): Mosaic's matmul takes one
  operand dtype, so the weight is multiplied in the hidden states' dtype (it refused "Bad lhs type" before)."""
  x = jax.ShapeDtypeStruct((256, 128), jnp.bfloat16, sharding=jax.sharding.SingleDeviceSharding(v5e[0]))
  w = jax.ShapeDtypeStruct((128, 1000), jnp.float32, sharding=jax.sharding.SingleDeviceSharding(v5e[0]))
  t = jax.ShapeDtypeStruct((256,), jnp.int32, sharding=jax.sharding.SingleDeviceSharding(v5e[0]))

  def loss(x, w, t):
    logp, ent = logprob_and_entropy(x, w, t)
    return jnp.sum(logp) + jnp.sum(ent)
  text = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(x, w, t).compile().as_text()
  assert "tpu_custom_call" in text


def test_mixed_precision_pallas_tpu_matches_the_bf16_weight(v5e):
  """Interpreted on CPU: a float32 weight gives what its bfloat16 rounding gives (the cast above), gradient
  returned in float32."""
  x, w, t, mask, _, _ = make_inputs(3, 64, 32, 300)
  x = jnp.asarray(x, jnp.bfloat16)
  w32 = jnp.asarray(w) + 1e-3  # not representable in bf16: the cast is what is compared
  f = lambda w_: logprob_and_entropy(x, w_, jnp.asarray(t), mask=jnp.asarray(mask), impl="pallas_tpu")  # noqa: E731
  np.testing.assert_array_equal(np.asarray(f(w32)[0]), np.asarray(f(w32.astype(jnp.bfloat16))[0]))
  g = jax.grad(lambda w_: jnp.sum(f(w_)[0]))(w32)
  assert g.dtype == jnp.float32 and g.shape == w32.shape


@pytest.mark.parametrize("shape,token_axes,axis_name,chunk_rows", [
    ((1, 1, 4), "data", "tensor", None),                           # vocab-parallel over 4 chips
    ((1, 2, 2), ("data", "fsdp"), ("tensor", "fsdp"), 128),        # the FSDP layout: rows gathered in 2 chunks
])
def test_sharded_head_compiles_mosaic_inside_shard_map(v5e, shape, token_axes, axis_name, chunk_rows):
  from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
  mesh = Mesh(np.array(v5e).reshape(shape), ("data", "fsdp", "tensor"))
  n, h, v = 1024, 128, 4 * 1000
  sds = jax.ShapeDtypeStruct
  rows = NamedSharding(mesh, P(token_axes))
  args = (sds((n, h), jnp.bfloat16, sharding=rows),
          sds((h, v), jnp.bfloat16, sharding=NamedSharding(mesh, P(None, axis_name))),
          sds((n,), jnp.int32, sharding=rows))

  def loss(x, w, t):
    lp, ent = logprob_and_entropy_sharded(x, w, t, mesh=mesh, axis_name=axis_name, token_axes=token_axes,
                                          chunk_rows=chunk_rows)
    return jnp.sum(lp) + jnp.sum(ent)

  text = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(*args).compile().as_text()
  assert "tpu_custom_call" in text
  if chunk_rows is None:  # one chunk: no loop at all (the interpreter's would be one)
    assert " while(" not in text


# ----------------------------------------------------------------------------- long guards: realistic shapes


@pytest.mark.long
@pytest.mark.parametrize("topology", ["v5e:2x2", "v6e:2x2", "v5p:2x2x1"])
@pytest.mark.parametrize("n,h", [(4096, 896), (8192, 3584)])
def test_qwen_head_compiles_for_tpu_without_weight_copy(topology, n, h):
  chip = _chips(topology)[0]
  v = bench.V_QWEN
  weight = h * v * 2
  for program in bench.PROGRAMS:
    got = bench.compile_program(chip, program, "auto", n, h, v)
    assert "error" not in got, got
    assert got["mosaic"] and got["loops"] == 0
    # No padded weight copy (was exactly one weight of temp in the forward) and no f32 dW (two weights).
    assert got["temp"] < weight / 8, (program, got["temp"] / 2 ** 30)


@pytest.mark.long
@pytest.mark.parametrize("h", [896, 3584])
def test_pallas_gpu_kernel_exports_triton_for_cuda(h):
  n, v = 4096, bench.V_QWEN
  sds = jax.ShapeDtypeStruct
  args = (sds((n, h), jnp.bfloat16), sds((h, v), jnp.bfloat16), sds((n,), jnp.int32))
  triton = "__gpu$xla.gpu.triton"
  for impl, want in (("pallas_gpu", True), ("auto", False)):
    fn = jax.jit(bench.program_fn("forward+backward", impl))
    exported = jax.export.export(fn, platforms=["cuda"], disabled_checks=[
        jax.export.DisabledSafetyCheck.custom_call(triton)])(*args)
    assert (triton in exported.mlir_module()) == want, impl
