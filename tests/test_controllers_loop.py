"""Controllers in the RL loop (rljax/control/_controllers.py, rljax/train/_controllers.py): config, update rules,
runs, resume."""
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rljax.recipes import Recipe, stage
from rljax.stages import ControlInputs, RunFacts
from rljax.train import TrainState, apply_overrides, read_jsonl, tiny_config
from rljax.train._controllers import LoopControllers
from rljax.types import TrainBatch


# ----------------------------------------------------------------------------- config


@pytest.mark.parametrize("override, match", [
    ("rl.controllers=pid", r"rl\.controllers.*unknown controller 'pid'"),
    ("rl.controllers=adaptive_kl", "moves \\['kl_beta'\\], which no loss term reads"),   # no KL term in the loss
    ("rl.controllers=entropic", "missing required argument 'target_entropy'"),
    ("rl.controllers=temperature_control", "missing required argument 'target_entropy'"),
    ("rl.controllers=adaptive_kl(target=0)", "target"),
    ("rl.controllers=adaptive_kl(kl_reduction='sum')", "adaptive_kl: kl_reduction must be one of"),
    ("rl.controllers=bapo(rho0=1.5)", "rho0"),
    ("rl.controllers=entropic(target_entropy=0.5, kp=-1)", "kp"),
    ("rl.controllers=entropic(target_entropy=-0.5)", "target_entropy"),
    ("rl.controllers=bapo, bapo", "several controllers move the same"),
    ("rl.loss=gpg", None),  # fine alone
    ("rl.kl_target=0.1", "replaced by the recipe fields.*adaptive_kl\\(target"),
])
def test_invalid_controller_settings_are_named(override, match):
  if match is None:
    apply_overrides(tiny_config(), [override])
    return
  with pytest.raises(ValueError, match=match):
    apply_overrides(tiny_config(), [override])


def test_temperature_controller_needs_temperature_within_its_bounds():
  from rljax.train._experiment import build_experiment  # pylint: disable=import-outside-toplevel
  from rljax.train._startup import bound_recipe  # pylint: disable=import-outside-toplevel
  cfg = apply_overrides(tiny_config(), ["rl.temperature=3.0", "rl.controllers=temperature_control(target_entropy=0.5)"])
  with pytest.raises(ValueError, match=r"rl\.temperature=3\.0 is outside its bounds"):
    bound_recipe(build_experiment(cfg), cfg.rl.recipe())


@pytest.mark.parametrize("name", ["default", "tiny", "grpo", "dapo", "dr_grpo", "gspo", "qwen2_5_0_5b_gsm8k"])
def test_shipped_configs_stay_valid(name):
  from rljax.cli import load_config  # pylint: disable=import-outside-toplevel
  cfg = load_config(name)  # rljax.configs.<name> (the configs/ folder)
  assert cfg.rl.controllers == ""
  assert {"clip_low", "clip_high"} <= set(cfg.rl.recipe().initial_hparams())
  # every controller is accepted on top of each shipped config (adaptive KL with a KL term in the loss)
  policy = cfg.rl.recipe().loss[0].spec
  for ov in (["rl.controllers=entropic(target_entropy=0.5)"], ["rl.controllers=bapo"],
             ["rl.controllers=temperature_control(target_entropy=0.5)"],
             [f"rl.loss={policy}, kl_penalty(beta=0.01)", "rl.controllers=adaptive_kl(target=0.1)"]):
    c = apply_overrides(cfg, ov)
    assert LoopControllers(c.rl.recipe().controllers, 1.0).init()


# ----------------------------------------------------------------------------- update rules (no training)


def _controller(spec, loss="ppo_clip", temperature=1.0):
  recipe = Recipe(loss=loss, controllers=spec).bind(RunFacts(num_prompts=2, group_size=3, max_new_tokens=4,
                                                             temperature=temperature))
  ctl = LoopControllers(recipe.controllers, temperature)
  hp = {k: jnp.asarray(v, jnp.float32) for k, v in recipe.initial_hparams().items()}
  z = jnp.zeros((), jnp.int32)
  return recipe, ctl, TrainState(params={}, opt_state=(), model_state={}, step=z, num_skipped=z, hparams=hp)


def _inputs(batch, entropy=None, policy_logp=None):
  stats = {} if entropy is None else {"entropy": entropy}
  return ControlInputs(batch=batch, data=None, rollout_stats=stats, update_metrics={}, policy_logp=policy_logp)


def _batch(seed=0, b=6, t=5):
  rng = np.random.default_rng(seed)
  mask = rng.random((b, t)) < 0.7
  mask[-1] = False  # one row without loss tokens: not counted in n_steps
  adv = rng.normal(size=(b, 1)) * np.ones((1, t)) * mask
  lo = rng.normal(scale=0.3, size=(b, t)) - 1.0
  lr = lo + rng.normal(scale=0.2, size=(b, t))
  return TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask),
                    advantages=jnp.asarray(adv, jnp.float32), group_id=jnp.arange(b, dtype=jnp.int32),
                    logp_old=jnp.asarray(lo, jnp.float32), logp_ref=jnp.asarray(lr, jnp.float32))


def _observed_kl_f64(kl_tok, m, reduction):
  """Float64 reference of the three observed KLs over rows with a loss token (m [B, T] float)."""
  rows = m.sum(1) > 0
  per_row = (kl_tok * m).sum(1)[rows]
  return {"sequence_sum": per_row.mean(),                                   # Ziegler et al. train_policy.py:221
          "sequence_mean": (per_row / m.sum(1)[rows]).mean(),               # verl apply_kl_penalty current_kl
          "token_mean": per_row.sum() / m.sum()}[reduction]


@pytest.mark.parametrize("reduction,target", [("sequence_sum", 0.1), ("sequence_mean", 0.02), ("token_mean", 0.02)])
def test_adaptive_kl_in_loop_matches_verl_rule_float64(reduction, target):
  _, ctl, st = _controller(f"adaptive_kl(target={target}, horizon=40.0, estimator='k3', kl_reduction={reduction!r})",
                           loss="ppo_clip, kl_penalty(beta=0.05)")  # beta_0 comes from the KL term
  cs = ctl.init()
  beta = 0.05
  assert float(cs["adaptive_kl"].beta) == pytest.approx(beta)
  for seed in range(4):
    batch = _batch(seed)
    d = np.asarray(batch.logp_old, np.float64) - np.asarray(batch.logp_ref, np.float64)
    m = np.asarray(batch.loss_mask, np.float64)
    kl = float(_observed_kl_f64(np.exp(-d) + d - 1, m, reduction))   # k3 of KL(old || ref)
    n = int(np.asarray(batch.loss_mask).any(1).sum())
    st, cs, met = ctl.step(st, cs, _inputs(batch))
    assert met["adaptive_kl/kl_beta"] == pytest.approx(beta, rel=1e-6)
    assert met["adaptive_kl/kl_ref"] == pytest.approx(kl, rel=1e-5)
    beta *= 1 + np.clip(kl / target - 1, -0.2, 0.2) * n / 40.0
    np.testing.assert_allclose(float(cs["adaptive_kl"].beta), beta, rtol=1e-5)
    np.testing.assert_allclose(float(st.hparams["kl_beta"]), beta, rtol=1e-5)
    assert st.hparams["kl_beta"].dtype == jnp.float32


def test_entropic_in_loop_matches_pi_rule_and_weights_the_loss():
  recipe, ctl, st = _controller("entropic(target_entropy=1.0, kp=0.5, ki=0.1)")
  cs = ctl.init()
  assert float(st.hparams["pos_weight"]) == float(st.hparams["neg_weight"]) == 1.0
  integral = 0.0
  for h in (0.4, 0.7, 1.3, 0.9):
    st, cs, met = ctl.step(st, cs, _inputs(_batch(), entropy=h))
    e = 1.0 - h
    integral += e
    u = 0.5 * e + 0.1 * integral
    np.testing.assert_allclose([float(st.hparams["pos_weight"]), float(st.hparams["neg_weight"])],
                               [np.clip(1 - u, 0, 2), np.clip(1 + u, 0, 2)], rtol=1e-6)
    assert met["entropic/integral"] == pytest.approx(integral, rel=1e-6)
  # the recipe applies the weights: loss = sum_t w(sign A_t) * l_t / count with l_t the PPO-clip loss
  obj = recipe.objective_builder()
  batch = _batch(7)
  hp = dict(st.hparams, pos_weight=jnp.float32(2.0), neg_weight=jnp.float32(0.5))
  from rljax.types import PolicyOutputs  # pylint: disable=import-outside-toplevel
  out = PolicyOutputs(logp=batch.logp_old, entropy=None)
  loss, _ = obj(hp)(out, batch)
  adv, m = np.asarray(batch.advantages, np.float64), np.asarray(batch.loss_mask, np.float64)
  w = np.where(adv > 0, 2.0, np.where(adv < 0, 0.5, 1.0))
  np.testing.assert_allclose(float(loss), (w * -adv * m).sum() / m.sum(), rtol=1e-5)  # ratio 1: l_t = -A_t


def test_bapo_in_loop_sets_clip_hparams_from_brute_force_search():
  _, ctl, st = _controller("bapo(rho0=0.6)")
  cs = ctl.init()
  np.testing.assert_allclose([float(st.hparams["clip_low"]), float(st.hparams["clip_high"])], [0.4, 0.2], rtol=1e-6)
  batch = _batch(3)
  rng = np.random.default_rng(1)
  logp_new = np.asarray(batch.logp_old) + rng.normal(scale=0.4, size=batch.logp_old.shape)
  st, cs, met = ctl.step(st, cs, _inputs(batch, policy_logp=lambda: jnp.asarray(logp_new, jnp.float32)))
  # brute force, float64: lock-step grid from (0.6, 1.2) by 0.05, first candidate with positive share >= rho0
  a, m = np.asarray(batch.advantages, np.float64), np.asarray(batch.loss_mask, np.float64)
  r = np.exp(logp_new.astype(np.float64) - np.asarray(batch.logp_old, np.float64))
  chosen = None
  for k in range(37):
    lo, hi = min(0.6 + 0.05 * k, 0.9), min(1.2 + 0.05 * k, 3.0)
    mag = np.abs(a) * r * m
    p = mag[(a > 0) & (r <= hi)].sum()
    n = mag[(a < 0) & (r >= lo)].sum()
    share = p / (p + n) if p + n > 0 else 0.0
    chosen = (lo, hi)
    if share >= 0.6:
      break
  assert met["bapo/clip_low"] == pytest.approx(0.4, rel=1e-6)
  np.testing.assert_allclose([float(st.hparams["clip_low"]), float(st.hparams["clip_high"])],
                             [1 - chosen[0], chosen[1] - 1], rtol=1e-5)


def test_temperature_control_in_loop():
  recipe, ctl, st = _controller("temperature_control(target_entropy=0.8, kappa=0.5)")
  cs = ctl.init()
  t = 1.0
  assert ctl.temperature(cs) == 1.0
  for h in (0.2, 0.3, 1.5):
    st, cs, met = ctl.step(st, cs, _inputs(_batch(), entropy=h))
    assert met["temperature_control/temperature"] == pytest.approx(t, rel=1e-6)
    t = float(np.clip(t * np.exp(0.5 * (0.8 - h)), 0.1, 2.0))
    assert ctl.temperature(cs) == pytest.approx(t, rel=1e-6)
  assert set(st.hparams) == set(recipe.loss_hparams())  # the temperature is not a loss hparam


def test_no_controller_is_a_no_op():
  _, ctl, st = _controller("")
  st2, cs, met = ctl.step(st, ctl.init(), _inputs(_batch()))
  assert st2 is st and cs == {} and met == {} and ctl.temperature(cs) == 1.0


# ----------------------------------------------------------------------------- tiny runs


def _run(out, *overrides, resume=False):
  from rljax.train import train
  cfg = apply_overrides(tiny_config(str(out)), ["eval.every=0", "eval.num_problems=8", "eval.batch_size=8",
                                                 *overrides])
  return cfg, train(cfg, resume=resume)


def _rl_rows(out):
  return [r for r in read_jsonl(os.path.join(out, "metrics.jsonl")) if r["stage"] == "rl" and "loss" in r]


@pytest.mark.long
def test_adaptive_kl_moves_beta_and_resume_restores_the_controller_state(tmp_path):
  """One tiny run with adaptive KL (3 RL steps, checkpoints at 2 and 3), then --resume from step 2."""
  # step 1: KL(old || ref) = 0 exactly (old = ref) < target -> beta *= 1 - 0.2 * 16/16 (16 sequences, horizon 16);
  # then the policy has moved away from the reference: KL > target -> beta *= 1 + 0.2
  ov = ["rl.steps=3", "checkpoint.every=2", "rl.loss=ppo_clip, kl_penalty(beta=0.1, estimator='k2')",
        "rl.controllers=adaptive_kl(target=1e-12, horizon=16, estimator='k2')", "rl.optim.learning_rate=0.01",
        "mesh.fsdp=2"]  # controller values placed on a 2-device FSDP mesh
  out = str(tmp_path)
  _, s_full = _run(out, *ov)
  rows = _rl_rows(out)
  np.testing.assert_allclose([r["adaptive_kl/kl_beta"] for r in rows], [0.1, 0.08, 0.096], rtol=1e-5)
  for r in rows:  # the value the controller set is the one the loss used
    assert r["kl_penalty/beta"] == pytest.approx(r["adaptive_kl/kl_beta"], rel=1e-6)
  assert rows[0]["adaptive_kl/kl_ref"] == 0.0 and all(r["adaptive_kl/kl_ref"] > 1e-9 for r in rows[1:])
  from rljax.train import load_run
  _, _, state, info = load_run(out, stage="rl")
  assert info["step"] == 3
  np.testing.assert_allclose(float(state.hparams["kl_beta"]), 0.096 * 1.2, rtol=1e-5)

  # drop the last checkpoint: --resume continues from step 2 with the controller state saved there
  # (the logged adaptive_kl/kl_beta is read from the controller state: init() would log 0.1)
  shutil.rmtree(os.path.join(out, "checkpoints", "rl", "3"))
  _, s_res = _run(out, *ov, resume=True)
  resumed = _rl_rows(out)
  assert [r["step"] for r in resumed] == [1, 2, 3]
  for k in ("adaptive_kl/kl_beta", "adaptive_kl/kl_ref", "kl_penalty/beta", "loss"):
    assert resumed[2][k] == rows[2][k], k
  for x, y in zip(jax.tree_util.tree_leaves(s_full["params"]), jax.tree_util.tree_leaves(s_res["params"])):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
  _, _, state2, _ = load_run(out, stage="rl")
  assert float(state2.hparams["kl_beta"]) == float(state.hparams["kl_beta"])


@pytest.mark.slow
@pytest.mark.parametrize("ov, keys", [
    (["rl.controllers=entropic(target_entropy=2.5)"], ("entropic/pos_weight", "entropic/neg_weight")),
    (["rl.controllers=bapo"], ("bapo/clip_low", "bapo/clip_high", "bapo/balance")),
    (["rl.controllers=temperature_control(target_entropy=0.1, kappa=1.0)"], ("temperature_control/temperature",)),
])
def test_other_controllers_run_in_the_loop(tmp_path, ov, keys):
  _run(tmp_path, "rl.steps=2", "checkpoint.enabled=false", *ov)
  rows = _rl_rows(str(tmp_path))
  assert len(rows) == 2
  for r in rows:
    assert all(np.isfinite(r[k]) for k in keys) and r["train/skipped"] == 0.0
  if "temperature_control/temperature" in keys:  # entropy above a tiny target: the temperature falls
    assert rows[1]["temperature_control/temperature"] < rows[0]["temperature_control/temperature"] == 1.0
  if "bapo/clip_low" in keys:  # starts at the lowest bounds (0.6, 1.2)
    assert rows[0]["bapo/clip_low"] == pytest.approx(0.4) and rows[0]["bapo/clip_high"] == pytest.approx(0.2)
