"""The model family sharded over meshes gives the single-device result."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

from rljax.models import ModelConfig, Transformer, policy_outputs
from rljax.parallel import MeshConfig, make_mesh
from rljax.parallel._shard import batch_sharding, shard_state, state_shardings

# (data 2, fsdp 2, tensor 2) covers every axis at once and runs by default; each mesh costs a compile
# (~60-80 s on the loaded 2-core machine), so the other two are slow-marked.
MESHES = [MeshConfig(data=2, fsdp=2, tensor=2),
          pytest.param(MeshConfig(data=8, fsdp=1), marks=pytest.mark.slow),
          pytest.param(MeshConfig(fsdp=2, tensor=4), marks=pytest.mark.slow)]


def _model():
  cfg = ModelConfig.tiny()
  return cfg, Transformer(cfg, rngs=nnx.Rngs(0))


@pytest.mark.parametrize("mesh_cfg", MESHES, ids=lambda c: f"d{c.data}f{c.fsdp}t{c.tensor}")
def test_sharded_policy_outputs_and_grads_equal_single_device(mesh_cfg):
  cfg, model = _model()
  graphdef, state = nnx.split(model)
  tokens = jax.random.randint(jax.random.key(1), (8, 12), 0, cfg.vocab_size)

  def loss(state, tokens):
    out = policy_outputs(nnx.merge(graphdef, state), tokens)
    return jnp.sum(out.logp) + 0.1 * jnp.sum(out.entropy), out.logp

  ref_grad_fn = jax.jit(jax.value_and_grad(loss, has_aux=True))
  (ref_loss, ref_logp), ref_grads = ref_grad_fn(state, tokens)

  mesh = make_mesh(mesh_cfg)
  shardings = state_shardings(state, mesh)
  sharded = shard_state(state, mesh)
  fn = jax.jit(jax.value_and_grad(loss, has_aux=True), in_shardings=(shardings, batch_sharding(mesh)),
               out_shardings=((NamedSharding(mesh, P()), batch_sharding(mesh)), shardings))
  (s_loss, s_logp), s_grads = fn(sharded, jax.device_put(tokens, batch_sharding(mesh)))
  np.testing.assert_allclose(s_loss, ref_loss, rtol=1e-5)
  np.testing.assert_allclose(s_logp, ref_logp, rtol=1e-5, atol=1e-5)
  for a, b in zip(jax.tree.leaves(s_grads), jax.tree.leaves(ref_grads)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
  # parameter shardings are as declared by the logical-axis rules
  q = sharded["layers"][0]["attn"]["q"]["kernel"]
  expected = P("fsdp" if mesh.shape["fsdp"] > 1 else None, "tensor" if mesh.shape["tensor"] > 1 else None, None)
  assert jax.tree.leaves(q)[0].sharding.spec == expected
