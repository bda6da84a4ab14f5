"""Orbax checkpointer: round trip, corrupt-latest fallback, clear errors."""
import glob
import os
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rljax.train import Checkpointer, CheckpointError
from rljax.train._checkpoint import CheckpointMismatch, CheckpointWarning


def _tree(scale=1.0):
  return {"params": {"w": jnp.arange(6.0).reshape(2, 3) * scale, "b": jnp.ones((3,), jnp.bfloat16)},
          "step": jnp.asarray(int(scale), jnp.int32), "rng": jax.random.PRNGKey(int(scale)),
          "typed_key": jax.random.key(int(scale)), "opt": (jnp.zeros(()), {"mu": jnp.full((2,), scale)})}


def _assert_equal(a, b):
  for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
      x, y = jax.random.key_data(x), jax.random.key_data(y)
    assert x.dtype == y.dtype
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_roundtrip_latest_and_specific_step(tmp_path):
  ck = Checkpointer(str(tmp_path / "ck"), max_to_keep=2)
  for s in (1, 2, 3):
    ck.save(s, _tree(float(s)), {"stage": "rl", "data": {"next_index": s}})
  assert ck.all_steps() == [2, 3]  # max_to_keep
  tree, meta, step = ck.restore(_tree(0.0))
  assert step == 3 and meta["data"] == {"next_index": 3}
  _assert_equal(tree, _tree(3.0))
  tree, _, step = ck.restore(_tree(0.0), step=2)
  assert step == 2
  _assert_equal(tree, _tree(2.0))
  ck.close()


def test_corrupt_latest_falls_back_with_warning(tmp_path):
  d = str(tmp_path / "ck")
  ck = Checkpointer(d)
  ck.save(1, _tree(1.0), {"s": 1})
  ck.save(2, _tree(2.0), {"s": 2})
  ck.close()
  # corrupt every data file of step 2
  for f in glob.glob(os.path.join(d, "2", "state", "**", "*"), recursive=True):
    if os.path.isfile(f):
      with open(f, "wb") as fh:
        fh.write(b"garbage")
  ck = Checkpointer(d)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    tree, meta, step = ck.restore(_tree(0.0))
  assert step == 1 and meta == {"s": 1}
  _assert_equal(tree, _tree(1.0))
  # one warning, naming the step and the file that does not parse
  assert [w.category for w in caught] == [CheckpointWarning], [str(w.message) for w in caught]
  assert re.match(r"checkpoint step 2 is unreadable: .*/ck/2/state/_METADATA \(JSONDecodeError", str(caught[0].message))
  assert "restored step 1 instead" in str(caught[0].message)
  with pytest.raises(CheckpointError, match="unreadable"):
    ck.restore(_tree(0.0), step=2)
  # saving step 2 again replaces the unreadable checkpoint (a readable step is never overwritten)
  ck.save(2, _tree(5.0), {"s": 5})
  ck.save(1, _tree(9.0), {"s": 9})
  ck.close()
  ck = Checkpointer(d)
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    tree, meta, step = ck.restore(_tree(0.0))
  assert step == 2 and meta == {"s": 5}
  _assert_equal(tree, _tree(5.0))
  _assert_equal(ck.restore(_tree(0.0), step=1)[0], _tree(1.0))


def test_missing_and_empty_directory_errors(tmp_path):
  with pytest.raises(CheckpointError, match="does not exist"):
    Checkpointer(str(tmp_path / "nope")).restore(_tree())
  os.makedirs(tmp_path / "empty")
  with pytest.raises(CheckpointError, match="no checkpoints"):
    Checkpointer(str(tmp_path / "empty")).restore(_tree())


def test_structure_mismatch_is_an_error(tmp_path):
  """Another model's checkpoint: one line from the stored metadata, no fallback, no array read."""
  ck = Checkpointer(str(tmp_path / "ck"))
  ck.save(1, {"w": jnp.zeros((2,))})
  ck.save(2, {"w": jnp.zeros((2,))})
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    with pytest.raises(CheckpointMismatch, match=r"checkpoint step 2 .* array 0 is \(2,\) float32, this run's is "
                                                 r"\(3,\) float32"):
      ck.restore({"w": jnp.zeros((3,))})
    with pytest.raises(CheckpointMismatch, match="has 1 arrays, this run's state has 2"):
      ck.restore({"w": jnp.zeros((2,)), "v": jnp.zeros((2,))})
