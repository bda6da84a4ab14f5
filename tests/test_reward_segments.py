"""``StepData.reward_segments`` (the ``segment`` advantage's per-token segment index) is not the attention packing:
``train_batch`` puts it in ``TrainBatch.extras["reward_segments"]`` and leaves ``TrainBatch.segment_ids`` (packing)
unset, so a segmented task's update computes the same log-probs as an unsegmented one."""
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from rljax import parallel as par
from rljax.models import ModelConfig, Transformer
from rljax.stages import StepData
from rljax.train._inputs import train_batch
from rljax.train._step import _policy_outputs


def _data(reward_segments=None):
  b, t = 2, 8
  rng = np.random.default_rng(0)
  pm = np.zeros((b, t), bool)
  pm[:, :3] = True
  cm = ~pm
  r = np.array([1.0, 0.0], np.float32)
  return StepData(tokens=rng.integers(1, 10, (b, t)).astype(np.int32), prompt_mask=pm, completion_mask=cm,
                  group_id=np.zeros(b, np.int32), num_groups=1, valid=np.ones(b, bool), lengths=cm.sum(1),
                  completions=("a", "b"), problems=(None, None), prompt_index=np.zeros(b, np.int64), rewards=r,
                  correct=r, logp_behavior=np.zeros((b, t), np.float32), advantages=np.array([0.5, -0.5], np.float32),
                  reward_segments=reward_segments)


def test_reward_segments_reach_extras_not_the_attention_packing():
  # segment 0 on the prompt and the first completion tokens, 1 after: as packing ids, 0 would be padding and
  # the two segments would not attend to each other
  seg = np.tile(np.array([0, 0, 0, 0, 0, 1, 1, 1], np.int32), (2, 1))
  sh = par.row_sharding(par.make_mesh(par.MeshConfig(1, 1, 1, 1), jax.devices()[:1]), 2)
  plain, segmented = train_batch(_data(), sh, 2), train_batch(_data(seg), sh, 2)
  assert segmented.segment_ids is None and plain.segment_ids is None
  np.testing.assert_array_equal(np.asarray(segmented.extras["reward_segments"]), seg)
  model = Transformer(ModelConfig(vocab_size=12, hidden_size=16, num_layers=1, num_heads=2, num_kv_heads=2,
                                  head_dim=8, intermediate_size=32, max_position_embeddings=16),
                      rngs=nnx.Rngs(0))
  graphdef, state = nnx.split(model)
  logp = jax.jit(lambda s, b: _policy_outputs(nnx.merge(graphdef, s), b, 1.0).logp)  # the update's forward
  got, want = logp(state, segmented), logp(state, plain)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  # the check can fail: the same ids used as packing change the log-probs
  packed = logp(state, segmented.replace(segment_ids=jnp.asarray(seg)))
  assert not np.allclose(np.asarray(packed)[:, 5:], np.asarray(want)[:, 5:])
