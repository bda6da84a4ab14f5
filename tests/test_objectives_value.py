"""Tests for rljax.objectives._value: the (clipped) PPO value loss against a float64 NumPy reference."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rljax.objectives as O
from rljax.types import PolicyOutputs, TrainBatch

B, T = 4, 9


def _data(seed=0):
  rng = np.random.default_rng(seed)
  v = rng.normal(size=(B, T)).astype(np.float32)
  old = (v + rng.normal(scale=0.4, size=(B, T))).astype(np.float32)  # many tokens outside old ± 0.2
  ret = rng.normal(size=(B, T)).astype(np.float32)
  mask = rng.random((B, T)) < 0.7
  mask[:, 0] = False
  return v, old, ret, mask


def _make(v, old, ret, mask, **kw):
  out = PolicyOutputs.create(logp=jnp.zeros((B, T), jnp.float32), values=jnp.asarray(v))
  fields = dict(tokens=jnp.zeros((B, T), jnp.int32), loss_mask=jnp.asarray(mask),
                advantages=jnp.zeros((B, T), jnp.float32), group_id=jnp.arange(B),
                values_old=None if old is None else jnp.asarray(old), returns=jnp.asarray(ret))
  fields.update(kw)
  return out, TrainBatch.create(**fields)


def _np_loss(v, old, ret, eps, coef):
  v, old, ret = (np.asarray(x, np.float64) for x in (v, old, ret))
  l1 = (v - ret) ** 2
  if eps is None:
    return coef * 0.5 * l1, np.zeros(v.shape, bool)
  l2 = (np.clip(v, old - eps, old + eps) - ret) ** 2
  return coef * 0.5 * np.maximum(l1, l2), l2 > l1


@pytest.mark.parametrize("eps,coef", [(0.2, 1.0), (0.5, 0.25), (None, 2.0)])
def test_per_token_loss_matches_numpy(eps, coef):
  v, old, ret, mask = _data()
  out, batch = _make(v, old, ret, mask)
  loss, _ = O.value_loss(clip_eps=eps, coef=coef)(out, batch)
  want, clipped = _np_loss(v, old, ret, eps, coef)
  assert loss.shape == (B, T) and loss.dtype == jnp.float32
  np.testing.assert_allclose(loss, want, rtol=1e-6, atol=1e-7)
  if eps is not None:  # both branches occur, so a max/min swap or a missing clip is caught
    assert 0 < clipped[mask].mean() < 1


def test_gradient_zero_where_clip_binds():
  v, old, ret, mask = _data(1)
  eps = 0.2
  _, batch = _make(v, old, ret, mask)
  term = O.value_loss(clip_eps=eps)

  def total(values):
    out = PolicyOutputs.create(logp=jnp.zeros((B, T), jnp.float32), values=values)
    return jnp.sum(term(out, batch)[0])

  g = np.asarray(jax.grad(total)(jnp.asarray(v)))
  v64, old64, ret64 = (np.asarray(x, np.float64) for x in (v, old, ret))
  l1 = (v64 - ret64) ** 2
  l2 = (np.clip(v64, old64 - eps, old64 + eps) - ret64) ** 2
  binds = (l2 > l1) & (np.abs(v64 - old64) > eps)
  assert binds.sum() >= 3 and (~binds).sum() >= 3
  want = np.where(binds, 0.0, v64 - ret64)  # d/dv ½(v − R)² elsewhere
  np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)
  unclipped = jax.grad(lambda x: jnp.sum(O.value_loss(clip_eps=None)(
      PolicyOutputs.create(logp=jnp.zeros((B, T), jnp.float32), values=x), batch)[0]))(jnp.asarray(v))
  np.testing.assert_allclose(unclipped, v64 - ret64, rtol=1e-5, atol=1e-6)


def test_metrics_match_numpy():
  v, old, ret, mask = _data(2)
  out, batch = _make(v, old, ret, mask)
  _, m = O.value_loss(clip_eps=0.2)(out, batch)
  _, clipped = _np_loss(v, old, ret, 0.2, 1.0)
  v64, ret64 = np.asarray(v, np.float64)[mask], np.asarray(ret, np.float64)[mask]
  np.testing.assert_allclose(m["clip_frac"], clipped[mask].mean(), rtol=1e-6)
  np.testing.assert_allclose(m["value_mean"], v64.mean(), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(m["return_mean"], ret64.mean(), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(m["explained_variance"], 1 - np.var(ret64 - v64) / np.var(ret64), rtol=1e-5)
  perfect = _make(ret, old, ret, mask)
  assert abs(float(O.value_loss()(*perfect)[1]["explained_variance"]) - 1.0) < 1e-6
  _, m_none = O.value_loss(clip_eps=None)(out, batch)
  assert float(m_none["clip_frac"]) == 0.0


def test_metrics_carry_no_gradient():
  v, old, ret, mask = _data(3)
  _, batch = _make(v, old, ret, mask)

  def metric_sum(values):
    out = PolicyOutputs.create(logp=jnp.zeros((B, T), jnp.float32), values=values)
    m = O.value_loss()(out, batch)[1]
    return m["value_mean"] + m["explained_variance"] + m["clip_frac"]

  np.testing.assert_array_equal(jax.grad(metric_sum)(jnp.asarray(v)), 0.0)


def test_missing_fields_raise():
  v, old, ret, mask = _data()
  out, batch = _make(v, old, ret, mask)
  with pytest.raises(ValueError, match="out.values"):
    O.value_loss()(out.replace(values=None), batch)
  with pytest.raises(ValueError, match="batch.returns"):
    O.value_loss()(out, batch.replace(returns=None))
  with pytest.raises(ValueError, match="batch.values_old"):
    O.value_loss(clip_eps=0.2)(out, batch.replace(values_old=None))
  O.value_loss(clip_eps=None)(out, batch.replace(values_old=None))  # unclipped: values_old not needed
  with pytest.raises(ValueError, match="clip_eps"):
    O.value_loss(clip_eps=-0.1)
  with pytest.raises(ValueError, match="coef"):
    O.value_loss(coef=-1.0)


def test_jit_and_traced_hyper_parameters():
  v, old, ret, mask = _data(4)
  out, batch = _make(v, old, ret, mask)

  @jax.jit
  def run(out, batch, eps, coef):
    return O.value_loss(clip_eps=eps, coef=coef)(out, batch)

  loss, m = run(out, batch, jnp.float32(0.3), jnp.float32(0.5))
  np.testing.assert_allclose(loss, _np_loss(v, old, ret, 0.3, 0.5)[0], rtol=1e-6, atol=1e-7)
  eager_loss, eager_m = O.value_loss(clip_eps=0.3, coef=0.5)(out, batch)
  np.testing.assert_allclose(loss, eager_loss, rtol=1e-6)
  for k in eager_m:
    np.testing.assert_allclose(m[k], eager_m[k], rtol=1e-5, atol=1e-7)


def test_chain_with_token_mean():
  v, old, ret, mask = _data(5)
  out, batch = _make(v, old, ret, mask)
  obj = O.chain(O.value_loss(clip_eps=0.2, coef=0.5), aggregate=O.token_mean)
  loss, metrics = obj(out, batch)
  per_token, _ = _np_loss(v, old, ret, 0.2, 0.5)
  np.testing.assert_allclose(loss, per_token[mask].mean(), rtol=1e-5)  # verl: ½ · token-mean of the max
  assert {"value_loss/clip_frac", "value_loss/value_mean", "value_loss/return_mean",
          "value_loss/explained_variance"} <= set(metrics)
  assert O.value_loss().name == "value_loss"
  import rljax
  row = [r for r in rljax.catalog() if r.name == "value_loss"]
  assert len(row) == 1 and row[0].kind == "value" and row[0].fn is O.value_loss
