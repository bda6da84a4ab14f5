"""chain / aggregation: exactness under micro-batching and data parallelism,
user-written terms, metric prefixes, jit, and the recipes in configs/recipes.py."""
import importlib.util
import inspect
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import rljax.objectives as O
from rljax.types import PolicyOutputs
from test_objectives_ratio import make_data, ref_cispo, ref_gspo, ref_ppo_clip, to_jax

ROOT = pathlib.Path(__file__).resolve().parents[1]

MODES = {
    "token_mean": O.token_mean,
    "token_sum": O.token_sum,
    "seq_mean_token_sum": O.seq_mean_token_sum,
    "seq_mean_token_mean": O.seq_mean_token_mean,
    "seq_mean_token_sum_norm": O.seq_mean_token_sum_norm,
    "seq_mean_token_sum_norm_16": O.seq_mean_token_sum_norm(max_len=16),
}


def _po(lp):
  return PolicyOutputs(logp=lp)


def ref_aggregate(loss, mask, mode):
  """float64 NumPy aggregation, written from the verl agg_loss table."""
  lm = loss * mask
  rows = mask.sum(1) > 0
  if mode == "token_mean":
    return lm.sum() / mask.sum()
  if mode == "token_sum":
    return lm.sum()
  if mode == "seq_mean_token_sum":
    return lm.sum(1)[rows].mean()
  if mode == "seq_mean_token_mean":
    return (lm.sum(1)[rows] / mask.sum(1)[rows]).mean()
  if mode == "seq_mean_token_sum_norm":
    return lm.sum() / (mask.shape[0] * mask.shape[1])
  if mode == "seq_mean_token_sum_norm_16":
    return lm.sum() / (mask.shape[0] * 16)
  raise AssertionError(mode)


def my_ppo_clip(out, batch):
  """A user-written PPO clip (eps 0.2 / 0.28), same signature as a built-in term."""
  ratio = jnp.exp(out.logp - batch.logp_old)
  adv = batch.advantages
  loss = jnp.maximum(-adv * ratio, -adv * jnp.clip(ratio, 0.8, 1.28))
  return loss * batch.loss_mask, {"ratio_mean": jnp.mean(ratio)}


def kl_k3(out, batch):
  """A user-written k3 penalty to the reference policy (beta = 0.05)."""
  delta = batch.logp_ref - out.logp
  return 0.05 * (jnp.exp(delta) - delta - 1.0), {}


def _objective(mode):
  return O.chain(O.ppo_clip(0.2, 0.28, correction=O.icepop(0.5, 2.0)), O.gspo(0.05), my_ppo_clip, kl_k3,
                 aggregate=MODES[mode])


def _data8():
  return make_data(seed=21, b=8, t=6, const_adv=False)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_aggregation_matches_numpy(mode):
  d = _data8()
  rng = np.random.default_rng(0)
  loss = rng.normal(size=d["mask"].shape)
  num, den = MODES[mode](jnp.asarray(loss, jnp.float32), jnp.asarray(d["mask"], jnp.float32))
  np.testing.assert_allclose(float(num) / float(den), ref_aggregate(loss, d["mask"], mode), rtol=1e-5)


def _all_modes(lp, b, dens):
  """Loss and gradient of the composite objective under every mode, in one jitted call."""
  res = {}
  for mode in sorted(MODES):
    objective = _objective(mode)
    den = None if dens is None else dens[mode]
    res[mode] = jax.value_and_grad(lambda x: objective(_po(x), b, denominator=den)[0])(lp)
  return res


_all_modes_jit = jax.jit(_all_modes)


def test_micro_batches_with_global_denominator_equal_full_batch():
  """Every mode: summing micro-batch losses taken over the global denominator is the full-batch loss."""
  d = _data8()
  out, batch = to_jax(d)
  full = _all_modes_jit(out.logp, batch, None)
  # the global denominator: the aggregation's denominator over the whole batch (what a DP all-reduce gives)
  dens = {mode: MODES[mode](jnp.zeros_like(batch.loss_mask), batch.loss_mask)[1] for mode in MODES}
  for split in ([3, 5], [2, 2, 2, 2]):
    parts, start = [], 0
    for size in split:
      sl = slice(start, start + size)
      mb = jax.tree_util.tree_map(lambda x: x[sl], batch)
      parts.append(_all_modes_jit(out.logp[sl], mb, dens))
      start += size
    for mode in MODES:
      total = sum(float(p[mode][0]) for p in parts)
      np.testing.assert_allclose(total, float(full[mode][0]), rtol=2e-6, atol=1e-7, err_msg=mode)
      grads = np.concatenate([np.asarray(p[mode][1]) for p in parts])
      np.testing.assert_allclose(grads, full[mode][1], rtol=2e-5, atol=1e-8, err_msg=mode)
  # and the un-micro-batched loss is the NumPy aggregation of the per-token losses
  per_token = sum(np.asarray(t(out, batch)[0], np.float64) for t in _objective("token_mean").terms)
  for mode in MODES:
    np.testing.assert_allclose(full[mode][0], ref_aggregate(per_token, d["mask"], mode), rtol=1e-5, err_msg=mode)


def test_data_parallel_psum_equals_full_batch():
  if len(jax.devices()) < 8:
    pytest.skip("needs 8 (fake) devices")
  d = _data8()
  out, batch = to_jax(d)
  mesh = jax.make_mesh((8,), ("data",))
  modes = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm")
  dens = {m: MODES[m](jnp.zeros_like(batch.loss_mask), batch.loss_mask)[1] for m in modes}

  def local(lp, b):
    return [jax.lax.psum(_objective(m)(_po(lp), b, denominator=dens[m])[0], "data") for m in modes]

  sharded = jax.shard_map(local, mesh=mesh, in_specs=(P("data"), P("data")), out_specs=P())
  shard = jax.sharding.NamedSharding(mesh, P("data"))
  lp_s, batch_s = jax.device_put(out.logp, shard), jax.device_put(batch, shard)
  full = _all_modes_jit(out.logp, batch, None)
  for i, mode in enumerate(modes):
    dp_loss, dp_grad = jax.jit(jax.value_and_grad(lambda lp, b: sharded(lp, b)[i]))(lp_s, batch_s)
    np.testing.assert_allclose(dp_loss, full[mode][0], rtol=2e-6, err_msg=mode)
    np.testing.assert_allclose(dp_grad, full[mode][1], rtol=2e-5, atol=1e-8, err_msg=mode)


def test_user_function_composes_exactly_like_builtin():
  d = make_data(seed=22)
  out, batch = to_jax(d)
  for mode in ("token_mean", "seq_mean_token_mean"):
    mine = O.chain(my_ppo_clip, aggregate=mode)
    builtin = O.chain(O.ppo_clip(0.2, 0.28), aggregate=mode)
    (l0, m0), g0 = jax.value_and_grad(lambda lp: mine(_po(lp), batch), has_aux=True)(out.logp)
    (l1, m1), g1 = jax.value_and_grad(lambda lp: builtin(_po(lp), batch), has_aux=True)(out.logp)
    np.testing.assert_allclose(l0, l1, rtol=1e-6)
    np.testing.assert_allclose(g0, g1, rtol=1e-6, atol=1e-8)
    expected = ref_aggregate(ref_ppo_clip(d["logp"], None, d, 0.2, 0.28), d["mask"], mode)
    np.testing.assert_allclose(l0, expected, rtol=1e-5)
    assert "my_ppo_clip/ratio_mean" in m0 and "ppo_clip/ratio_mean" in m1
  # a chain of several terms is the sum of the single-term chains (one aggregation, linear)
  both = O.chain(O.ppo_clip(0.2, 0.28), kl_k3, my_ppo_clip)(out, batch)[0]
  parts = sum(O.chain(t)(out, batch)[0] for t in (O.ppo_clip(0.2, 0.28), kl_k3, my_ppo_clip))
  np.testing.assert_allclose(both, parts, rtol=1e-6)


def test_metric_prefixes():
  d = make_data(seed=23)
  out, batch = to_jax(d)
  objective = O.chain(O.ppo_clip(0.2, correction=O.tis(2.0)), O.ppo_clip(0.1), my_ppo_clip,
                      lambda o, b: (jnp.zeros_like(b.loss_mask), {"z": 0.0}), O.named("kl", kl_k3))
  _, m = objective(out, batch)
  assert {"ppo_clip/clip_frac_low", "ppo_clip/clip_frac_high", "ppo_clip/ratio_mean", "ppo_clip/ratio_max",
          "ppo_clip/approx_kl", "ppo_clip/correction/weight_mean", "ppo_clip/correction/masked_frac",
          "ppo_clip_1/ratio_mean", "my_ppo_clip/ratio_mean", "term3/z", "loss", "loss/numerator",
          "loss/denominator"} <= set(m)
  assert not any(k.startswith("kl/") for k in m)  # kl_k3 reports no metrics, but composes
  assert objective.names == ("ppo_clip", "ppo_clip_1", "my_ppo_clip", "term3", "kl")


def test_chain_jit_equals_eager_and_grad():
  d = make_data(seed=24)
  out, batch = to_jax(d)
  objective = _objective("seq_mean_token_mean")
  f = lambda lp: objective(_po(lp), batch)  # noqa: E731
  (l0, m0), g0 = jax.value_and_grad(f, has_aux=True)(out.logp)
  (l1, m1), g1 = jax.jit(jax.value_and_grad(f, has_aux=True))(out.logp)
  np.testing.assert_allclose(l0, l1, rtol=1e-6)
  np.testing.assert_allclose(g0, g1, rtol=1e-5, atol=1e-8)
  assert set(m0) == set(m1)


def test_chain_rejects_bad_terms():
  d = make_data(seed=25)
  out, batch = to_jax(d)
  with pytest.raises(ValueError):
    O.chain()
  with pytest.raises(ValueError):
    O.chain(O.ppo_clip(), aggregate="mean")
  with pytest.raises(ValueError, match="per-token"):
    O.chain(lambda o, b: (jnp.zeros((2,)), {}))(out, batch)


# ----------------------------------------------------------------------------- recipes


def _recipes():
  spec = importlib.util.spec_from_file_location("rljax_recipes", ROOT / "configs" / "recipes.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_recipes_are_short_compositions_with_the_papers_values():
  """configs/recipes.py: each published recipe is a few lines of catalog techniques, and its loss (built from
  the recipe's initial hparams, as the jitted step does) equals the float64 reference."""
  from rljax.stages import RunFacts  # pylint: disable=import-outside-toplevel
  recipes = _recipes()
  d = make_data(seed=26)
  out, batch = to_jax(d)
  mask = d["mask"]
  k3 = lambda: np.exp(d["ref"] - d["logp"]) - (d["ref"] - d["logp"]) - 1.0
  t = mask.shape[1]
  expected = {
      "grpo": ref_aggregate(ref_ppo_clip(d["logp"], None, d, 0.2, 0.2) + 0.04 * k3(), mask, "seq_mean_token_mean"),
      "dapo": ref_aggregate(ref_ppo_clip(d["logp"], None, d, 0.2, 0.28), mask, "token_mean"),
      "dr_grpo": ref_aggregate(ref_ppo_clip(d["logp"], None, d, 0.2, 0.2), mask, "seq_mean_token_sum_norm"),
      "gspo": ref_aggregate(ref_gspo(d["logp"], None, d, 3e-4, 4e-4), mask, "seq_mean_token_mean"),
      "cispo": ref_aggregate(ref_cispo(d["logp"], d["logp"], d, None, 4.0), mask, "token_mean"),
  }
  assert set(recipes.RECIPES) == set(expected)
  facts = RunFacts(num_prompts=5, group_size=1, max_new_tokens=t)
  for name, fn in recipes.RECIPES.items():
    assert len(inspect.getsource(fn).strip().splitlines()) <= 6, name
    recipe = fn().bind(facts)
    hp = {k: jnp.asarray(v, jnp.float32) for k, v in recipe.initial_hparams().items()}
    loss, _ = jax.jit(lambda h: recipe.objective_builder()(h)(out, batch))(hp)
    np.testing.assert_allclose(loss, expected[name], rtol=1e-5, err_msg=name)
  dapo = recipes.dapo()
  assert [s.name for s in dapo.filters] == ["zero_variance"] and dapo.filters[0].refill
  assert [s.name for s in dapo.shaping] == ["overlong_penalty"]


def test_chain_aux_loss_coef_and_denominator():
  import jax.numpy as jnp
  from rljax import objectives as O
  from rljax.types import PolicyOutputs, TrainBatch
  mask = jnp.array([[1, 1, 0], [1, 0, 0]], jnp.float32)
  batch = TrainBatch(tokens=jnp.zeros((2, 3), jnp.int32), loss_mask=mask, advantages=jnp.ones((2, 3)),
                     group_id=jnp.zeros(2, jnp.int32))
  out = PolicyOutputs(logp=jnp.full((2, 3), -1.0), aux_loss=jnp.asarray(2.0))
  term = lambda o, b: (-o.logp, {})
  plain = O.chain(term)
  weighted = O.chain(term, aux_loss_coef=0.5)
  loss_plain, m = plain(out, batch)
  loss_weighted, _ = weighted(out, batch)
  assert float(loss_plain) == 1.0 and float(m["aux_loss"]) == 2.0
  assert float(loss_weighted) == 1.0 + 0.5 * 2.0
  assert float(plain.denominator(batch)) == 3.0
  assert float(O.chain(term, aggregate="seq_mean_token_mean").denominator(batch)) == 2.0
  import pytest
  with pytest.raises(ValueError, match="aux_loss_coef"):
    O.chain(term, aux_loss_coef=-1.0)


# ----------------------------------------------------------------------------- float64 in, float64 out


def test_float64_inputs_give_float64_losses_under_x64():
  """Under jax_enable_x64 the KL estimates, chain, every aggregation, clip_cov and dpo keep float64 inputs in
  float64 (checked against float64 NumPy at a precision float32 cannot reach)."""
  d = make_data(seed=4)
  with jax.enable_x64(True):
    out, batch = to_jax(d, jnp.float64)
    lp, ref, m = d["logp"], d["ref"], d["mask"]
    # kl_estimate: a difference of 1e-9 between log-probs near −1 vanishes in float32
    a = jnp.asarray([-1.0, -0.5], jnp.float64)
    b = a - 1e-9
    k1 = O.kl_estimate(a, b, "k1")
    assert k1.dtype == jnp.float64
    np.testing.assert_allclose(np.asarray(k1), 1e-9, rtol=1e-6)
    assert float(O.kl_estimate(a.astype(jnp.float32), b.astype(jnp.float32), "k1")[0]) == 0.0
    for est, fn in (("k2", lambda x: 0.5 * x * x), ("k3", lambda x: np.exp(-x) + x - 1), ("abs", np.abs)):
      got = O.kl_estimate(jnp.asarray(lp), jnp.asarray(ref), est)
      assert got.dtype == jnp.float64
      np.testing.assert_allclose(np.asarray(got), fn(lp - ref), rtol=1e-12, atol=1e-15)
    # chain + every aggregation: a float64 kl_penalty loss
    per_tok = 0.1 * (np.exp(-(lp - ref)) + (lp - ref) - 1)
    for name, agg in MODES.items():
      loss, metrics = O.chain(O.kl_penalty(0.1, "k3"), aggregate=agg)(out, batch)
      assert loss.dtype == jnp.float64, name
      num, den = agg(jnp.asarray(per_tok), jnp.asarray(m))
      assert num.dtype == jnp.float64, name
      np.testing.assert_allclose(np.asarray(metrics["loss/numerator"]), np.asarray(num), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(O.chain(O.kl_penalty(0.1, "k3"))(out, batch)[0]),
                               (per_tok * m).sum() / m.sum(), rtol=1e-12)
    # clip_cov: float64 per-token losses (0 on padding)
    cc, _ = O.clip_cov(clip_cov_ratio=0.2)(out, batch)
    assert cc.dtype == jnp.float64 and np.all(np.asarray(cc)[m == 0] == 0)
    assert O.chain(O.clip_cov())(out, batch)[0].dtype == jnp.float64
    # dpo: two pairs, the last row unpaired
    pairs, chosen = np.array([0, 0, 1, 1, -1]), np.array([True, False, False, True, False])
    dpo_batch = batch.replace(extras={"dpo_pair_id": jnp.asarray(pairs), "dpo_chosen": jnp.asarray(chosen)})
    loss, _ = O.chain(O.dpo(0.5), aggregate=O.seq_mean_token_mean)(out, dpo_batch)
    assert loss.dtype == jnp.float64
    h = ((lp - ref) * m).sum(1)
    margins = 0.5 * np.array([h[0] - h[1], h[3] - h[2]])
    np.testing.assert_allclose(float(loss), np.mean(np.log1p(np.exp(-margins))), rtol=1e-12)
  # without x64, float32 as before
  out32, batch32 = to_jax(d, jnp.float32)
  assert O.chain(O.kl_penalty(0.1))(out32, batch32)[0].dtype == jnp.float32


def test_seq_mean_token_sum_norm_counts_all_padding_rows():
  """Dr.GRPO / TRL: the denominator is B·L whatever the rows hold; verl's (non-empty rows)·T differs by (B−E)/B."""
  loss = jnp.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))
  mask = jnp.asarray([[1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]], bool)  # row 1: all padding
  num, den = O.seq_mean_token_sum_norm(loss, mask)
  assert float(num) == 0 + 1 + 8 + 9 + 10 + 11 and float(den) == 3 * 4
  num16, den16 = O.seq_mean_token_sum_norm(max_len=16)(loss, mask)
  assert float(num16) == float(num) and float(den16) == 3 * 16
  verl = float(num) / 2 / 4  # seq-mean-token-sum over the 2 non-empty rows, / loss_scale_factor T
  np.testing.assert_allclose(float(num) / float(den), verl * 2 / 3, rtol=1e-7)
  assert float(O.seq_mean_token_sum(loss, mask)[1]) == 2 and float(O.seq_mean_token_mean(loss, mask)[1]) == 2
