"""``ModelConfig.attention_query_chunk``: attention over the query rows in chunks equals one block (each row's
softmax runs over all its keys either way), forward and gradient, sliding windows and soft-capping included."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from rljax.models import ModelConfig, Transformer


def _loss_and_grad(cfg, tokens):
  model = Transformer(cfg, rngs=nnx.Rngs(0))
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  positions = jnp.broadcast_to(jnp.arange(tokens.shape[1]), tokens.shape)

  def loss(p):
    logits = nnx.merge(graphdef, p, rest)(tokens, positions, return_logits=True).logits
    return jnp.sum(jax.nn.log_softmax(logits)[..., 3]), logits
  (value, logits), grad = jax.value_and_grad(loss, has_aux=True)(params)
  return logits, grad


@pytest.mark.parametrize("extra", [{}, dict(sliding_window=3, layer_types=("sliding_attention", "full_attention"),
                                           attn_logit_softcap=20.0)])
@pytest.mark.parametrize("chunk", [2, 4])
def test_chunked_attention_equals_one_block(chunk, extra):
  cfg = ModelConfig(vocab_size=50, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=8,
                    intermediate_size=48, remat="full", **extra)
  tokens = jnp.asarray(np.random.default_rng(0).integers(0, 50, size=(2, 8)), jnp.int32)
  ref_logits, ref_grad = _loss_and_grad(cfg, tokens)
  logits, grad = _loss_and_grad(cfg.replace(attention_query_chunk=chunk), tokens)
  np.testing.assert_allclose(np.asarray(logits), np.asarray(ref_logits), rtol=1e-6, atol=1e-6)
  for a, b in zip(jax.tree.leaves(grad), jax.tree.leaves(ref_grad)):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_chunk_that_does_not_divide_the_rows_is_one_block_and_a_bad_value_is_refused():
  cfg = ModelConfig(vocab_size=50, hidden_size=32, num_layers=1, num_heads=4, num_kv_heads=2, head_dim=8,
                    intermediate_size=48)
  tokens = jnp.zeros((1, 6), jnp.int32)
  a, _ = _loss_and_grad(cfg, tokens)
  b, _ = _loss_and_grad(cfg.replace(attention_query_chunk=4), tokens)  # 4 does not divide 6: unchunked
  np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  with pytest.raises(ValueError, match="attention_query_chunk"):
    cfg.replace(attention_query_chunk=-1)
