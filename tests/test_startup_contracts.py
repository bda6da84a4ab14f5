"""The start-up check proves each stage's contract (issue #34, item 5): every stage runs once on a synthetic batch of
the run's shapes, its return is checked against its slot's contract (``rljax.train._contracts``), loss terms are
traced under ``jax.jit`` one by one, and the error names the slot, the stage, what it returned and what was expected.

Most tests run ``check_recipe`` on a stand-in experiment (the arithmetic task's problems, B = 4 x 4 = 16 rows,
T = 9 tokens); one runs ``train`` to show that nothing is written when the check fails."""
import dataclasses
import os
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rljax.envs import ArithmeticTask
from rljax.recipes import Critic, Recipe
from rljax.stages import Advantage, Controller, Filter, LossTerm, Shaping

B, T = 16, 9  # the stand-in run: 4 prompts x 4 samples, rows of 6 prompt + 3 completion tokens


def _exp():
  task = ArithmeticTask(digits=1)
  rl = SimpleNamespace(routing_replay=False, rollout_ahead=False, async_staleness=None, group_size=4, num_prompts=4,
                       max_new_tokens=3, temperature=1.0)
  return SimpleNamespace(cfg=SimpleNamespace(rl=rl), task=task, train_problems=task.problems("train", 12, 0),
                         model=SimpleNamespace(cfg=SimpleNamespace(is_moe=False)), seq_len=T)


def _check(recipe):
  from rljax.train._startup import check_recipe  # pylint: disable=import-outside-toplevel
  return check_recipe(_exp(), recipe)


def _centred(data):
  """A valid advantage: reward minus the group mean, [B] float32, with its info dict."""
  means = np.array([data.rewards[data.group_id == g].mean() for g in data.group_id], np.float32)
  return np.where(data.valid, data.rewards - means, 0.0).astype(np.float32), {"spread": float(means.std())}


def _jnp_term(out, batch):
  """A valid loss term in jax.numpy: -A * ratio on every token."""
  return -batch.advantages * jnp.exp(out.logp - batch.logp_old), {"ratio_mean": jnp.mean(out.logp)}


def test_an_advantage_without_its_info_dict_is_named_with_what_it_returned():
  """np.zeros(B) alone used to pass the check, then failed after SFT with 'too many values to unpack'."""
  no_info = Advantage(lambda data: np.zeros(data.batch_size), name="my_adv")
  with pytest.raises(ValueError, match=r"^rl\.advantage stage 'my_adv' returned ndarray float64 shape \(16,\) "
                                       r"\(not a tuple\); expected a tuple \(advantages \[B\] or \[B, T\] float "
                                       r"array, info dict\) with B = 16, T = 9$"):
    _check(Recipe(advantage=no_info))


def test_a_loss_term_calling_numpy_on_a_tracer_is_caught_under_jit():
  """np.asarray(out.logp) ran eagerly at start-up, then failed in the jitted update after SFT."""
  def numpy_term(out, batch):
    return np.asarray(out.logp) * 0.0, {}

  with pytest.raises(ValueError, match=r"^rl\.loss stage 'numpy_term' fails under jax\.jit on a synthetic batch at "
                                       r"start-up \(.*jax\.numpy.*\): TracerArrayConversionError: "):
    _check(Recipe(loss=("ppo_clip", numpy_term)))


def test_a_wrong_advantage_shape_names_the_stage_and_the_expected_shapes():
  """A [B + 1] advantage used to give a bare NumPy broadcast error."""
  wrong = Advantage(lambda data: (np.zeros(data.batch_size + 1, np.float32), {}), name="off_by_one")
  with pytest.raises(ValueError, match=r"^rl\.advantage stage 'off_by_one' returned a tuple of 2 \(ndarray float32 "
                                       r"shape \(17,\), dict\) \(advantages of shape \(17,\)\); expected .* with "
                                       r"B = 16, T = 9$"):
    _check(Recipe(advantage=wrong))
  token_level = Advantage(lambda data: (np.zeros((data.batch_size, 4), np.float32), {}), name="short_rows")
  with pytest.raises(ValueError, match=r"'short_rows' returned .*\(advantages of shape \(16, 4\)\)"):
    _check(Recipe(advantage=token_level))


def test_an_own_loss_terms_failure_names_that_term_not_the_first():
  """A failing second term used to be reported against recipe.loss[0] ('ppo_clip')."""
  def broken(out, batch):
    return out.logp / 0 + {}["missing"], {}

  with pytest.raises(ValueError, match=r"^rl\.loss stage 'broken' fails under jax\.jit .*KeyError: 'missing'"):
    _check(Recipe(loss=("ppo_clip", broken)))

  def per_sequence(out, batch):  # [B]: not a per-token loss
    return jnp.sum(out.logp, 1), {}

  with pytest.raises(ValueError, match=r"^rl\.loss stage 'per_sequence' returned a tuple of 2 \(Array float32 shape "
                                       r"\(16,\), dict\) \(per-token loss of shape \(16,\)\); expected a tuple "
                                       r"\(per_token_loss \[B, T\] float array, metrics dict\) with B = 16, T = 9$"):
    _check(Recipe(loss=("ppo_clip", per_sequence)))

  def loss_only(out, batch):  # no metrics dict
    return out.logp * 0.0

  with pytest.raises(ValueError, match=r"^rl\.loss stage 'loss_only' returned Array float32 shape \(16, 9\) "
                                       r"\(not a tuple\)"):
    _check(Recipe(loss=("ppo_clip", loss_only)))


@pytest.mark.parametrize("slot", ["advantage", "shaping", "loss", "critic", "controllers"])
def test_a_stage_returning_nan_on_the_legal_synthetic_batch_is_named(slot):
  nan = float("nan")
  if slot == "advantage":
    recipe = Recipe(advantage=Advantage(lambda d: (np.full(d.batch_size, nan, np.float32), {}), name="nan_stage"))
  elif slot == "shaping":
    recipe = Recipe(shaping=Shaping(lambda d: (np.where(d.rewards > 0, nan, d.rewards), {}), name="nan_stage"))
  elif slot == "loss":
    def nan_stage(out, batch):
      return jnp.log(out.logp), {}  # log of a negative log-prob: NaN on every completion token
    recipe = Recipe(loss=("ppo_clip", nan_stage))
  elif slot == "critic":
    term = LossTerm(lambda: (lambda out, batch: (jnp.sqrt(-jnp.abs(out.values) - 1.0), {})), name="nan_stage",
                    needs={"values", "returns"})
    recipe = Recipe(advantage="gae", critic=Critic(loss=term))
  else:
    ctl = Controller(init=lambda: 0.0, update=lambda s, inputs: (s, {}), hparams=lambda s: {"clip_low": nan},
                     writes=("clip_low",), name="nan_stage")
    recipe = Recipe(controllers=ctl)
  expected = {"advantage": "advantages", "shaping": "rewards", "loss": "per-token loss", "critic": "per-token loss",
              "controllers": "hparams"}[slot]
  with pytest.raises(ValueError, match=rf"^rl\.{slot} stage 'nan_stage' returned .*\({expected}: \d+ NaN/inf values? "
                                       r".*\); expected"):
    _check(recipe)


def test_other_slots_contracts_name_the_stage():
  keep_ints = Filter(lambda d: (np.ones(d.batch_size, np.int64), {}), name="counts_not_keep", refill=True)
  with pytest.raises(ValueError, match=r"^rl\.filters stage 'counts_not_keep' returned .*int64.*expected a tuple "
                                       r"\(keep \[B\] bool, metrics dict\)"):
    _check(Recipe(filters=keep_ints))
  shaped = Shaping(lambda d: ({"reward": d.rewards}, {}), name="dict_reward")
  with pytest.raises(ValueError, match=r"^rl\.shaping stage 'dict_reward' returned a tuple of 2 \(dict, dict\)"):
    _check(Recipe(shaping=shaped))
  ctl = Controller(init=lambda: 0.0, update=lambda s, inputs: s, name="no_metrics")
  with pytest.raises(ValueError, match=r"^rl\.controllers stage 'no_metrics' returned float 0\.0 \(not a tuple\); "
                                       r"expected a tuple \(state, metrics dict\)"):
    _check(Recipe(controllers=ctl))


def test_a_valid_own_advantage_and_loss_term_pass_on_the_runs_shapes():
  seen = []

  def centred(data):
    seen.append(data.tokens.shape)
    return _centred(data)

  recipe = _check(Recipe(advantage=Advantage(centred, name="centred"), loss=(_jnp_term, "kl_penalty(beta=0.01)")))
  assert [s.name for s in recipe.advantage] == ["centred"]
  assert seen == [(B, T)]  # B = num_prompts x group_size rows, T = the run's row width (seq_len)
  # a token-level [B, T] advantage, a stateful one, and catalog stages in every slot pass too
  token = Advantage(lambda d: (np.repeat(_centred(d)[0][:, None], d.tokens.shape[1], 1), {}), name="token")
  counted = Advantage(lambda d, s: (*_centred(d), s + 1), init=lambda: 0, name="counted")
  _check(Recipe(advantage=token))
  _check(Recipe(advantage=counted, filters="zero_variance", shaping="overlong_penalty(buffer_len=2)",
                controllers="adaptive_kl", loss="ppo_clip, kl_penalty(beta=0.01)"))


def test_a_failed_check_writes_nothing(tmp_path):
  """Through ``train``: the advantage without its info dict fails before SFT, and the run directory stays empty
  (no config, no checkpoint, no metrics)."""
  from rljax.train import apply_overrides, tiny_config, train  # pylint: disable=import-outside-toplevel
  out = tmp_path / "run"
  cfg = apply_overrides(tiny_config(str(out)), ["task.digits=1", "rl.steps=1", "rl.num_prompts=2", "rl.group_size=2",
                                                "progress=false"])
  no_info = Advantage(lambda data: np.zeros(data.batch_size), name="my_adv")
  with pytest.raises(ValueError, match=r"^rl\.advantage stage 'my_adv' returned ndarray float64 shape \(4,\)"):
    train(cfg, recipe=Recipe(advantage=no_info))
  assert not os.path.exists(out) or not os.listdir(out)


@pytest.fixture(scope="module")
def tiny_experiment(tmp_path_factory):
  """The every-technique runs' experiment (tests/_every_technique.py: 8 prompts x 4 samples), built once."""
  from rljax.train import apply_overrides, tiny_config  # pylint: disable=import-outside-toplevel
  from rljax.train._experiment import build_experiment  # pylint: disable=import-outside-toplevel
  from _every_technique import BASE  # pylint: disable=import-outside-toplevel
  return build_experiment(apply_overrides(tiny_config(str(tmp_path_factory.mktemp("run"))), BASE))


def _example_names():
  from rljax.recipes._examples import SKIP, trainable_names  # pylint: disable=import-outside-toplevel
  return [n for n in trainable_names() if n not in SKIP]


@pytest.mark.long  # 104 cases, ~35 s on one worker: the fast loop's budget (the every-technique runs check it too)
@pytest.mark.parametrize("name", _example_names())
def test_every_catalog_techniques_example_recipe_passes_the_contract_check(name, tiny_experiment):
  """The start-up check of each catalog technique's smallest recipe (``rljax.recipes._examples.example``, the one the
  long every-technique runs train) on the tiny run's real shapes: every catalog stage keeps its slot's contract."""
  from rljax.recipes._examples import example  # pylint: disable=import-outside-toplevel
  from rljax.train import apply_overrides  # pylint: disable=import-outside-toplevel
  from rljax.train._recipes import recipe_from_config  # pylint: disable=import-outside-toplevel
  from rljax.train._startup import check_recipe  # pylint: disable=import-outside-toplevel
  cfg = apply_overrides(tiny_experiment.cfg, [f"rl.{k}={v}" for k, v in example(name).items()])
  exp = SimpleNamespace(**{**vars(tiny_experiment), "cfg": cfg})
  check_recipe(exp, recipe_from_config(cfg.rl))


def test_multi_turn_techniques_pass_the_contract_check_on_episode_rows(tmp_path):
  """The techniques only multi-turn runs train (``SKIP`` of the single-turn examples) on a frozenlake run's episode
  rows: per-step returns in an advantage's info (``oprl``, ``step_episode_mix``) are not critic targets."""
  from rljax.recipes._examples import SKIP, example  # pylint: disable=import-outside-toplevel
  from rljax.train import apply_overrides, tiny_config  # pylint: disable=import-outside-toplevel
  from rljax.train._experiment import build_experiment  # pylint: disable=import-outside-toplevel
  from rljax.train._recipes import recipe_from_config  # pylint: disable=import-outside-toplevel
  from rljax.train._startup import check_recipe  # pylint: disable=import-outside-toplevel
  cfg = apply_overrides(tiny_config(str(tmp_path)), ["task.name=frozenlake", "rl.num_prompts=2", "rl.group_size=2"])
  exp = build_experiment(cfg)
  for name in ("oprl", "step_episode_mix", "sign_preserving_modulation"):
    assert name in SKIP
    fields = {k: v for k, v in example(name).items() if k != "rewards"}  # the environment gives the rewards
    exp.cfg = apply_overrides(cfg, [f"rl.{k}={v}" for k, v in fields.items()])
    recipe = check_recipe(exp, recipe_from_config(exp.cfg.rl))
    assert name in [s.name for s in recipe.stages()]


def _same(a, b, where: str) -> None:
  """``a`` and ``b`` equal exactly: arrays by dtype, shape and value (NaN equal to NaN), containers item by item."""
  if isinstance(a, dict) or isinstance(b, dict):
    assert isinstance(a, dict) and isinstance(b, dict) and sorted(a) == sorted(b), (where, a, b)
    for k in a:
      _same(a[k], b[k], f"{where}[{k!r}]")
  elif hasattr(a, "shape") or hasattr(b, "shape"):
    a, b = np.asarray(a), np.asarray(b)
    assert (a.dtype, a.shape) == (b.dtype, b.shape), (where, a.dtype, a.shape, b.dtype, b.shape)
    np.testing.assert_array_equal(a, b, err_msg=where)
  elif dataclasses.is_dataclass(a) and not isinstance(a, type):
    assert type(a) is type(b), where
    for f in dataclasses.fields(a):
      _same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
  elif isinstance(a, tuple) and hasattr(a, "_fields"):  # a NamedTuple (a stage's state)
    assert type(a) is type(b), where
    for f in a._fields:
      _same(getattr(a, f), getattr(b, f), f"{where}.{f}")
  elif isinstance(a, (tuple, list)):
    assert type(a) is type(b) and len(a) == len(b), (where, a, b)
    for i, (x, y) in enumerate(zip(a, b)):
      _same(x, y, f"{where}[{i}]")
  else:
    assert a == b, (where, a, b)


def _walked(cls, recipe, facts, exp):
  from rljax.train._phases import PIPELINE, walk  # pylint: disable=import-outside-toplevel
  run = cls(exp, recipe, facts)
  walk(PIPELINE, run, run.record)
  return run


def _live_context():
  """The start-up check's context with the live step's stage call (``unchecked``) and the live step's placement
  of the TrainBatch (``RLLoop.place``, on one device)."""
  from rljax.train._rl import RLLoop  # pylint: disable=import-outside-toplevel
  from rljax.train._rows import unchecked  # pylint: disable=import-outside-toplevel
  from rljax.train._startup import _DryRun  # pylint: disable=import-outside-toplevel
  loop = SimpleNamespace(prefix=0, common=0, rl=SimpleNamespace(group_size=4, batch_size=B),
                         rows_sh=jax.sharding.SingleDeviceSharding(jax.devices()[0]))

  class Live(_DryRun):
    call = staticmethod(unchecked)

    def place(self, host):
      return RLLoop.place(loop, host)

  return Live


_KEEP_ALL = lambda data: (np.ones(data.batch_size, bool), {"seen": float(data.valid.sum())})

WRITTEN_ONCE = {
    "loss side": dict(
        rewards="gaussian_reward(sigma=5.0, parse='arithmetic')", shaping="overlong_penalty(buffer_len=2), kl_in_reward",
        advantage="grpo, hadw(decay=0.5)", prompt_filters="greso",
        filters=(Filter(_KEEP_ALL, name="refill_all", refill=True), Filter(_KEEP_ALL, name="keep_all"),
                 Filter(_KEEP_ALL, name="late_all", phase="advantages")),
        loss="ppo_clip, opd, entropy_gated_contrastive(rho=0.5), dpo, kl_penalty(beta=0.01)",
        controllers="temperature_control(target_entropy=1.0)"),
    "replay": dict(rewards="gaussian_reward(sigma=5.0, parse='arithmetic')", replay="exgrpo", advantage="grpo",
                   loss="ppo_clip"),
}


@pytest.mark.parametrize("case", sorted(WRITTEN_ONCE))
def test_the_dry_run_builds_every_field_the_live_step_builds(case):
  """Written once (issue #50 item 2): the start-up check walks the step's own phase functions; only its context
  differs (every stage call checked against its contract; the TrainBatch left on the host). Walked on the same
  synthetic batch with the live step's stage call and placement instead, every phase builds the same thing: the
  rewards, needs, extras, advantages and every other ``StepData`` field, the ``TrainBatch``, the stages' metrics,
  the stage states and the controllers' states, field by field, exactly. A contract check that changed a value
  on its way through (the dry run once built the batch by hand and filled ``returns`` from ``values``) fails
  here."""
  from rljax.train._startup import _DryRun, bound_recipe  # pylint: disable=import-outside-toplevel
  exp = _exp()
  recipe, facts = bound_recipe(exp, Recipe(**WRITTEN_ONCE[case]))
  dry, live = (_walked(cls, recipe, facts, exp) for cls in (_DryRun, _live_context()))
  _same(dry.record.data, live.record.data, "data")
  _same(dry.record.batch, live.record.batch, "batch")
  _same(dry.record.metrics, live.record.metrics, "metrics")
  _same(dry.states, live.states, "states")
  _same(dry.ctl_state, live.ctl_state, "controller states")
  assert dry.record.batch is not live.record.batch and np.abs(np.asarray(dry.record.batch.advantages)).sum() > 0
  if case == "loss side":
    assert set(dry.record.batch.extras) == {"entropy_base", "logp_teacher", "dpo_pair_id", "dpo_chosen"}
    assert dry.record.batch.returns is None
  else:
    assert dry.record.data.extras["replay_mask"].shape == (B,)


def test_the_written_once_comparison_sees_a_value_the_check_changes(monkeypatch):
  """The comparison above can fail: a checked call that hands on the advantages scaled by 2 is caught, naming
  the field."""
  from rljax.train._startup import _DryRun, bound_recipe  # pylint: disable=import-outside-toplevel
  exp = _exp()
  recipe, facts = bound_recipe(exp, Recipe(**WRITTEN_ONCE["replay"]))
  checked = _DryRun.call

  def doubling(self, key, stage, fn):
    out = checked(self, key, stage, fn)
    return (out[0] * 2, *out[1:]) if key == "advantage" else out

  monkeypatch.setattr(_DryRun, "call", doubling)
  dry = _walked(_DryRun, recipe, facts, exp)
  monkeypatch.undo()
  live = _walked(_live_context(), recipe, facts, exp)
  with pytest.raises(AssertionError, match="data.advantages"):
    _same(dry.record.data, live.record.data, "data")

