"""rljax._groups: the group statistics and checks shared by advantages, rewards and filters.

References are float64 NumPy loops over each group written here.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rljax import _groups as G


def _data(seed=0, b=23, g=6):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=b).astype(np.float32)
  gid = rng.integers(0, g - 1, b).astype(np.int32)  # group g-1 stays empty
  gid[0] = 0
  valid = rng.random(b) > 0.25
  return x, gid, valid, g


def _ref_group(x, gid, valid, g, ddof):
  out = np.zeros((5, g))
  for k in range(g):
    sel = x[(gid == k) & valid].astype(np.float64)
    if sel.size:
      dev = sel - sel.mean()
      out[:, k] = (sel.size, sel.mean(), np.sqrt(np.sum(dev * dev) / max(sel.size - ddof, 1)), sel.min(), sel.max())
  return out


@pytest.mark.parametrize("ddof", [0, 1])
@pytest.mark.parametrize("jit", [False, True])
def test_group_stats_matches_float64_loop(ddof, jit):
  x, gid, valid, g = _data()
  fn = lambda x, gid, valid: G.group_stats(x, gid, g, valid, ddof=ddof)
  fn = jax.jit(fn) if jit else fn
  st = fn(jnp.asarray(x), jnp.asarray(gid), jnp.asarray(valid))
  got = np.stack([np.asarray(a, np.float64) for a in st])
  np.testing.assert_allclose(got, _ref_group(x, gid, valid, g, ddof), rtol=1e-5, atol=1e-6)
  assert got[0, g - 1] == 0 and np.all(got[1:, g - 1] == 0)  # empty group: zeros, not NaN


@pytest.mark.parametrize("singleton", ["zero", "raw"])
@pytest.mark.parametrize("jit", [False, True])
def test_row_stats_after_prepare_matches_loop(singleton, jit):
  x, gid, valid, g = _data(1)
  x[3], valid[3] = np.nan, False  # a masked NaN never enters a statistic
  r, sid, v, ng = G.prepare(x, gid, valid, g)
  assert np.all(np.asarray(sid)[~valid] == g)  # invalid rows routed to the extra segment
  fn = lambda r, sid, v: G.row_stats(r, sid, v, ng, ddof=1, singleton=singleton)
  fn = jax.jit(fn) if jit else fn
  st = fn(r, sid, v)
  ref = _ref_group(np.where(valid, x, 0.0), gid, valid, g, 1)
  for i in np.flatnonzero(valid):
    count, mean, std = ref[0, gid[i]], ref[1, gid[i]], ref[2, gid[i]]
    if singleton == "raw" and count <= 1:
      mean, std = 0.0, 1.0
    np.testing.assert_allclose([st.count[i], st.mean[i], st.std[i]], [count, mean, std], rtol=1e-5, atol=1e-6)
  assert np.all(np.isfinite(np.asarray(st.mean))) and np.all(np.isfinite(np.asarray(st.std)))


def test_row_stats_permutation_equivariant():
  x, gid, valid, g = _data(2)
  perm = np.random.default_rng(3).permutation(x.shape[0])
  a = G.row_stats(*G.prepare(x, gid, valid, g))
  b = G.row_stats(*G.prepare(x[perm], gid[perm], valid[perm], g))
  for u, w in zip(a, b):
    np.testing.assert_allclose(np.asarray(u)[perm], np.asarray(w), rtol=1e-6, atol=1e-7)


def test_top_groups_and_group_any():
  score = jnp.asarray([0.5, 2.0, 2.0, -1.0, 3.0])
  present = jnp.asarray([True, True, True, True, False])
  # ceil(0.5 * 4) = 2 of the present groups; tie between 1 and 2 goes to the lower index
  np.testing.assert_array_equal(G.top_groups(score, present, 0.5), [False, True, True, False, False])
  np.testing.assert_array_equal(G.top_groups(score, present, 0.25), [False, True, False, False, False])
  flag = jnp.asarray([False, True, False, False])
  np.testing.assert_array_equal(G.group_any(flag, jnp.asarray([0, 1, 1, 2]), 3), [False, True, False])


def test_checks_raise_naming_the_argument():
  with pytest.raises(ValueError, match="group_id values must lie in"):
    G.check_group_id(np.array([0, 3]), 3)
  with pytest.raises(ValueError, match="group_id must be an integer"):
    G.check_group_id(np.array([0.0, 1.0]), 3)
  with pytest.raises(ValueError, match="group_id must be a \\[B\\] vector"):
    G.check_group_id(np.zeros((2, 2), np.int32), 3)
  with pytest.raises(ValueError, match="num_groups must be a positive Python int"):
    G.check_group_id(np.array([0]), True)
  with pytest.raises(ValueError, match="prompt_ids values must lie in \\[0, inf\\)"):
    G.check_ids("prompt_ids", np.array([0, -1]), 2, None)
  G.check_ids("prompt_ids", np.array([0, 10**6]), 2, None)  # no upper bound without num
  with pytest.raises(ValueError, match="valid must contain only 0 and 1"):
    G.check_valid(np.array([1.0, 0.5]), 2)
  with pytest.raises(ValueError, match="valid must have shape \\(3,\\)"):
    G.check_valid(np.array([True, False]), 3)
  with pytest.raises(ValueError, match="rewards contains non-finite values .* \\[1\\]"):
    G.check_float_vector("rewards", np.array([0.0, np.inf]))
  with pytest.raises(ValueError, match="scores contains non-finite"):  # bf16 has numpy kind "V"
    G.check_finite("scores", jnp.asarray([1.0, np.nan], jnp.bfloat16))
  with pytest.raises(ValueError, match="fraction must be in \\(0, 1\\]"):
    G.check_fraction("fraction", 0.0, allow_zero=False)
  assert G.check_group_id(np.array([0, 2], np.int64), 3).dtype == jnp.int32
  assert G.resolve_num(None, 0) == 1 and G.resolve_num(4, 10) == 4


def test_checks_are_shape_only_under_jit():
  @jax.jit
  def f(gid, valid, x):
    g = G.check_group_id(gid, 2)  # values unseen at trace time: no raise
    v = G.check_valid(valid, 3)
    return G.group_stats(G.check_float_vector("x", x), g, 2, v).mean

  out = f(jnp.asarray([0, 1, 1]), jnp.asarray([1.0, 1.0, 0.0]), jnp.asarray([1.0, 2.0, 4.0]))
  np.testing.assert_allclose(out, [1.0, 2.0])


@pytest.mark.parametrize("value", [0.3, 0.1, 1.7, -2.9, 123.456])
def test_equal_values_have_their_value_as_mean_and_std_zero_in_float32(value):
  """Summed unshifted, seven float32 rewards of 0.3 have a mean one ulp off (and ``grpo``'s ÷ (σ + 1e-6) made 0.029
  of it, as torch's mean/std do); shifted by the group's largest value the sums are exact zeros."""
  from rljax.advantages import grpo
  sizes = np.arange(2, 18)
  x = np.full(int(sizes.sum()), value, np.float32)
  seg = np.repeat(np.arange(len(sizes)), sizes)
  count, mean, std = G.segment_moments(jnp.asarray(x), jnp.asarray(seg), len(sizes) + 1, jnp.ones(len(x), bool), ddof=1)
  np.testing.assert_array_equal(np.asarray(mean)[:-1], np.float32(value))
  np.testing.assert_array_equal(np.asarray(std)[:-1], 0.0)
  assert float(count[-1]) == 0.0 and float(mean[-1]) == 0.0 and float(std[-1]) == 0.0  # an empty segment
  np.testing.assert_array_equal(np.asarray(grpo(x, seg)[0]), 0.0)


def test_shifted_moments_keep_mixed_groups_accurate():
  rng = np.random.default_rng(3)
  x = (rng.normal(size=40) * 3 + 1000).astype(np.float32)  # a large offset: the shift removes most of it
  seg = rng.integers(0, 5, 40)
  _, mean, std = G.segment_moments(jnp.asarray(x), jnp.asarray(seg), 5, jnp.ones(40, bool), ddof=1)
  for g in range(5):
    ref = x[seg == g].astype(np.float64)
    np.testing.assert_allclose(float(mean[g]), ref.mean(), rtol=1e-7)
    np.testing.assert_allclose(float(std[g]), ref.std(ddof=1), rtol=1e-4)
