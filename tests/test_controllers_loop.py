"""Controllers wired into the RL loop (rljax/train/_controllers.py): config, update rules, runs, resume."""
import importlib.util
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rljax.train import RLConfig, TrainState, apply_overrides, read_jsonl, tiny_config
from rljax.train._controllers import make_controller
from rljax.train._recipes import build_objective, initial_hparams
from rljax.types import TrainBatch

CONFIGS = os.path.join(os.path.dirname(__file__), os.pardir, "configs")


# ----------------------------------------------------------------------------- config


@pytest.mark.parametrize("override, field", [
    ("rl.controller=pid", "RLConfig.controller"),
    ("rl.controller=adaptive_kl", "RLConfig.kl_beta"),       # kl_beta defaults to 0
    ("rl.controller=entropic", "RLConfig.target_entropy"),   # no target given
    ("rl.controller=temperature_control", "RLConfig.target_entropy"),
    ("rl.kl_target=0", "RLConfig.kl_target"),
    ("rl.kl_horizon=-1", "RLConfig.kl_horizon"),
    ("rl.bapo_rho0=1.5", "RLConfig.bapo_rho0"),
    ("rl.entropic_kp=-1", "RLConfig.entropic_kp"),
    ("rl.target_entropy=-0.5", "RLConfig.target_entropy"),
])
def test_invalid_controller_settings_name_the_field(override, field):
  with pytest.raises(ValueError, match=field.replace(".", r"\.")):
    apply_overrides(tiny_config(), [override])


def test_temperature_controller_needs_temperature_within_its_bounds():
  with pytest.raises(ValueError, match=r"RLConfig\.temperature"):
    RLConfig(controller="temperature_control", target_entropy=0.5, temperature=3.0)


@pytest.mark.parametrize("name", ["default", "tiny", "grpo", "dapo", "dr_grpo", "gspo", "qwen2_5_0_5b_gsm8k"])
def test_shipped_configs_stay_valid(name):
  spec = importlib.util.spec_from_file_location(f"cfg_{name}", os.path.join(CONFIGS, f"{name}.py"))
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  cfg = mod.get_config()
  assert cfg.rl.controller == "none"
  assert set(initial_hparams(cfg.rl)) == {"clip_low", "clip_high", "kl_beta", "entropy_coef"}
  # every controller is accepted on top of each shipped config
  for ov in (["rl.controller=adaptive_kl", "rl.kl_beta=0.01"], ["rl.controller=entropic", "rl.target_entropy=0.5"],
             ["rl.controller=bapo"], ["rl.controller=temperature_control", "rl.target_entropy=0.5"]):
    c = apply_overrides(cfg, ov)
    assert make_controller(c.rl).init() is not None


# ----------------------------------------------------------------------------- update rules (no training)


def _state(rl):
  hp = {k: jnp.asarray(v, jnp.float32) for k, v in initial_hparams(rl).items()}
  z = jnp.zeros((), jnp.int32)
  return TrainState(params={}, opt_state=(), model_state={}, step=z, num_skipped=z, hparams=hp)


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


def test_adaptive_kl_in_loop_matches_verl_rule_float64():
  rl = RLConfig(controller="adaptive_kl", kl_beta=0.05, kl_target=0.02, kl_horizon=40.0, kl_estimator="k3")
  ctl = make_controller(rl)
  st, cs = _state(rl), ctl.init()
  beta = 0.05
  for seed in range(4):
    batch = _batch(seed)
    d = np.asarray(batch.logp_old, np.float64) - np.asarray(batch.logp_ref, np.float64)
    m = np.asarray(batch.loss_mask, np.float64)
    kl = float(((np.exp(-d) + d - 1) * m).sum() / m.sum())   # k3 of KL(old || ref)
    n = int(np.asarray(batch.loss_mask).any(1).sum())
    st, cs, met = ctl.step(st, cs, batch=batch, rollout_stats={}, update_metrics={})
    assert met["control/kl_beta"] == pytest.approx(beta, rel=1e-6)
    assert met["control/kl_ref"] == pytest.approx(kl, rel=1e-5)
    beta *= 1 + np.clip(kl / 0.02 - 1, -0.2, 0.2) * n / 40.0
    np.testing.assert_allclose(float(cs.beta), beta, rtol=1e-5)
    np.testing.assert_allclose(float(st.hparams["kl_beta"]), beta, rtol=1e-5)
    assert st.hparams["kl_beta"].dtype == jnp.float32


def test_entropic_in_loop_matches_pi_rule_and_weights_the_loss():
  rl = RLConfig(controller="entropic", target_entropy=1.0, entropic_kp=0.5, entropic_ki=0.1)
  ctl = make_controller(rl)
  st, cs = _state(rl), ctl.init()
  assert float(st.hparams["pos_weight"]) == float(st.hparams["neg_weight"]) == 1.0
  integral = 0.0
  for h in (0.4, 0.7, 1.3, 0.9):
    st, cs, met = ctl.step(st, cs, batch=_batch(), rollout_stats={"entropy": h}, update_metrics={})
    e = 1.0 - h
    integral += e
    u = 0.5 * e + 0.1 * integral
    np.testing.assert_allclose([float(st.hparams["pos_weight"]), float(st.hparams["neg_weight"])],
                               [np.clip(1 - u, 0, 2), np.clip(1 + u, 0, 2)], rtol=1e-6)
    assert met["control/integral"] == pytest.approx(integral, rel=1e-6)
  # the recipe applies the weights: loss = sum_t w(sign A_t) * l_t / count with l_t the PPO-clip loss
  obj = build_objective(rl)
  batch = _batch(7)
  hp = dict(st.hparams, pos_weight=jnp.float32(2.0), neg_weight=jnp.float32(0.5))
  from rljax.types import PolicyOutputs
  out = PolicyOutputs(logp=batch.logp_old, entropy=None)
  loss, _ = obj(hp)(out, batch)
  adv, m = np.asarray(batch.advantages, np.float64), np.asarray(batch.loss_mask, np.float64)
  w = np.where(adv > 0, 2.0, np.where(adv < 0, 0.5, 1.0))
  np.testing.assert_allclose(float(loss), (w * -adv * m).sum() / m.sum(), rtol=1e-5)  # ratio 1: l_t = -A_t


def test_bapo_in_loop_sets_clip_hparams_from_brute_force_search():
  rl = RLConfig(controller="bapo", bapo_rho0=0.6)
  ctl = make_controller(rl)
  st, cs = _state(rl), ctl.init()
  np.testing.assert_allclose([float(st.hparams["clip_low"]), float(st.hparams["clip_high"])], [0.4, 0.2], rtol=1e-6)
  batch = _batch(3)
  rng = np.random.default_rng(1)
  logp_new = np.asarray(batch.logp_old) + rng.normal(scale=0.4, size=batch.logp_old.shape)
  st, cs, met = ctl.step(st, cs, batch=batch, rollout_stats={}, update_metrics={},
                         policy_logp=lambda _: jnp.asarray(logp_new, jnp.float32))
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
  assert met["control/clip_low"] == pytest.approx(0.4, rel=1e-6)
  np.testing.assert_allclose([float(st.hparams["clip_low"]), float(st.hparams["clip_high"])],
                             [1 - chosen[0], chosen[1] - 1], rtol=1e-5)


def test_temperature_control_in_loop():
  rl = RLConfig(controller="temperature_control", target_entropy=0.8, temperature=1.0, temperature_kappa=0.5)
  ctl = make_controller(rl)
  st, cs = _state(rl), ctl.init()
  t = 1.0
  assert ctl.temperature(cs) == 1.0
  for h in (0.2, 0.3, 1.5):
    st, cs, met = ctl.step(st, cs, batch=_batch(), rollout_stats={"entropy": h}, update_metrics={})
    assert met["control/temperature"] == pytest.approx(t, rel=1e-6)
    t = float(np.clip(t * np.exp(0.5 * (0.8 - h)), 0.1, 2.0))
    assert ctl.temperature(cs) == pytest.approx(t, rel=1e-6)
  assert set(st.hparams) == set(initial_hparams(rl))  # the temperature is not a loss hparam


def test_no_controller_is_a_no_op():
  rl = RLConfig()
  ctl = make_controller(rl)
  st = _state(rl)
  st2, cs, met = ctl.step(st, ctl.init(), batch=_batch(), rollout_stats={}, update_metrics={})
  assert st2 is st and cs == {} and met == {} and ctl.temperature(cs) == rl.temperature


# ----------------------------------------------------------------------------- tiny runs


def _run(out, *overrides, resume=False):
  from rljax.train import train
  cfg = apply_overrides(tiny_config(str(out)), ["eval.every=0", "eval.num_problems=8", "eval.batch_size=8",
                                                 *overrides])
  return cfg, train(cfg, resume=resume)


def _rl_rows(out):
  return [r for r in read_jsonl(os.path.join(out, "metrics.jsonl")) if r["stage"] == "rl" and "loss" in r]


def test_adaptive_kl_moves_beta_and_resume_restores_the_controller_state(tmp_path):
  """One tiny run with adaptive KL (3 RL steps, checkpoints at 2 and 3), then --resume from step 2."""
  # step 1: KL(old || ref) = 0 exactly (old = ref) < target -> beta *= 1 - 0.2 * 16/16 (16 sequences, horizon 16);
  # then the policy has moved away from the reference: KL > target -> beta *= 1 + 0.2
  ov = ["rl.steps=3", "checkpoint.every=2", "rl.controller=adaptive_kl", "rl.kl_beta=0.1", "rl.kl_target=1e-12",
        "rl.kl_horizon=16", "rl.kl_estimator=k2", "rl.optim.learning_rate=0.01",
        "mesh.fsdp=2"]  # controller values placed on a 2-device FSDP mesh
  out = str(tmp_path)
  _, s_full = _run(out, *ov)
  rows = _rl_rows(out)
  np.testing.assert_allclose([r["control/kl_beta"] for r in rows], [0.1, 0.08, 0.096], rtol=1e-5)
  for r in rows:  # the value the controller set is the one the loss used
    assert r["kl_penalty/beta"] == pytest.approx(r["control/kl_beta"], rel=1e-6)
  assert rows[0]["control/kl_ref"] == 0.0 and all(r["control/kl_ref"] > 1e-9 for r in rows[1:])
  from rljax.train import load_run
  _, _, state, info = load_run(out, stage="rl")
  assert info["step"] == 3
  np.testing.assert_allclose(float(state.hparams["kl_beta"]), 0.096 * 1.2, rtol=1e-5)

  # drop the last checkpoint: --resume continues from step 2 with the controller state saved there
  # (the logged control/kl_beta is read from the controller state: init() would log 0.1)
  shutil.rmtree(os.path.join(out, "checkpoints", "rl", "3"))
  _, s_res = _run(out, *ov, resume=True)
  resumed = _rl_rows(out)
  assert [r["step"] for r in resumed] == [1, 2, 3]
  for k in ("control/kl_beta", "control/kl_ref", "kl_penalty/beta", "loss"):
    assert resumed[2][k] == rows[2][k], k
  for x, y in zip(jax.tree_util.tree_leaves(s_full["params"]), jax.tree_util.tree_leaves(s_res["params"])):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
  _, _, state2, _ = load_run(out, stage="rl")
  assert float(state2.hparams["kl_beta"]) == float(state.hparams["kl_beta"])


@pytest.mark.slow
@pytest.mark.parametrize("ov, keys", [
    (["rl.controller=entropic", "rl.target_entropy=2.5"], ("control/pos_weight", "control/neg_weight")),
    (["rl.controller=bapo"], ("control/clip_low", "control/clip_high", "control/balance")),
    (["rl.controller=temperature_control", "rl.target_entropy=0.1", "rl.temperature_kappa=1.0"],
     ("control/temperature",)),
])
def test_other_controllers_run_in_the_loop(tmp_path, ov, keys):
  _run(tmp_path, "rl.steps=2", "checkpoint.enabled=false", *ov)
  rows = _rl_rows(str(tmp_path))
  assert len(rows) == 2
  for r in rows:
    assert all(np.isfinite(r[k]) for k in keys) and r["train/skipped"] == 0.0
  if "control/temperature" in keys:  # entropy above a tiny target: the temperature falls
    assert rows[1]["control/temperature"] < rows[0]["control/temperature"] == 1.0
  if "control/clip_low" in keys:  # starts at the lowest bounds (0.6, 1.2)
    assert rows[0]["control/clip_low"] == pytest.approx(0.4) and rows[0]["control/clip_high"] == pytest.approx(0.2)
