"""Recipe specs in configs: parsing, resolution through the catalog, errors naming the field and the valid
choices, round trips through config.json, and old configs read with their fields rewritten as specs."""
import json

import pytest

from rljax.recipes import Recipe, parse, resolve, stage
from rljax.recipes._spec import Call
from rljax.train import apply_overrides, config_from_dict, config_to_dict, default_config


def test_parse_specs():
  assert parse("") == []
  assert parse("grpo") == [Call("grpo")]
  assert parse("qae(quantile=0.7), rank") == [Call("qae", (), (("quantile", 0.7),)), Call("rank")]
  (c,) = parse("ppo_clip(eps_high=0.28, correction=icepop(beta=5.0))")
  assert c.kwargs[1] == ("correction", Call("icepop", (), (("beta", 5.0),)))
  assert parse(str(c)) == [c]  # a spec prints as itself
  for bad, match in [("qae(", "cannot parse"), ("qae(q=x)", "technique as a call"), ("a.b()", "technique name"),
                     ("qae(**d)", r"\*\*kwargs"), ("qae(q=1 + 2)", "not a literal")]:
    with pytest.raises(ValueError, match=match):
      parse(bad)
  # nothing in a spec is executed: a call is data, and only catalog names resolve
  assert parse("qae(quantile=__import__('os'))")[0].kwargs[0][1] == Call("__import__", ("os",))
  with pytest.raises(ValueError, match="unknown loss term '__import__'"):
    resolve("ppo_clip(correction=__import__('os'))", "loss")


@pytest.mark.parametrize("field, value, match", [
    ("advantage", "qea", r"rl\.advantage='qea'.*valid names for rl\.advantage: grpo, dr_grpo"),
    ("advantage", "qae(quantil=0.7)", r"qae: unknown argument 'quantil'; its arguments are \[quantile=0\.5, eps=1e-06"),
    ("advantage", "passk", r"passk: missing required argument 'k'.*its arguments are \[k, sigma_eps=1e-06\]"),
    ("advantage", "qae(quantile=7)", r"rl\.advantage.*quantile"),  # checked when built, not mid-run
    ("advantage", "zero_variance", r"'zero_variance' is a filter \(rl\.filters\), not an advantage estimator"),
    ("loss", "ppo_clip, icepop()", r"'icepop' is a correction: pass it to the policy loss"),
    ("loss", "ppo_clip(correction=grpo())", r"'grpo' is an advantage estimator or transform \(rl\.advantage\), not a loss term"),
    ("filters", "zero_variance(refill=True, phase=1)", r"unknown argument 'phase'"),
    ("aggregation", "token_mean, token_sum", r"takes one stage"),
    ("advantage", "difficulty_weight", r"must start with an estimator"),
    ("advantage", "grpo, rloo", r"several estimators"),
])
def test_bad_specs_name_the_field_and_the_choices(field, value, match):
  with pytest.raises(ValueError, match=match):
    apply_overrides(default_config(), [f"rl.{field}={value}"])


def test_spec_and_python_give_the_same_recipe():
  a = Recipe(advantage="qae(quantile=0.7)", loss="ppo_clip(eps_high=0.28), kl_penalty(beta=0.001)")
  b = Recipe(advantage=stage("qae", quantile=0.7),
             loss=(stage("ppo_clip", eps_high=0.28), stage("kl_penalty", beta=0.001)))
  assert a.describe() == b.describe()
  assert a.initial_hparams() == b.initial_hparams() == {"clip_low": 0.2, "clip_high": 0.28, "kl_beta": 0.001}
  assert a.needs == b.needs == {"logp_old", "logp_ref"}
  assert resolve("qae(quantile=0.7)", "advantage")[0].spec == "qae(quantile=0.7)"


def test_recipe_config_round_trip_and_with_recipe():
  recipe = Recipe(shaping="overlong_penalty(buffer_len=2)", filters="zero_variance(refill=True)",
                  advantage="grpo, difficulty_weight(strength=0.5)", loss="cispo(eps_high=4.0)",
                  controllers="entropic(target_entropy=0.5)", critic=None)
  cfg = default_config()
  cfg = cfg.replace(rl=cfg.rl.with_recipe(recipe))
  again = config_from_dict(json.loads(json.dumps(config_to_dict(cfg))))
  assert again == cfg
  assert again.rl.recipe().describe() == {**recipe.describe(), "name": "config"}
  with pytest.raises(ValueError, match="not a catalog technique"):
    cfg.rl.with_recipe(Recipe(advantage=lambda data: (data.rewards, {})))


def test_old_config_json_is_read_with_recipe_specs():
  d = config_to_dict(default_config())
  for k in ("loss", "aggregation", "advantage", "filters", "shaping", "controllers"):
    d["rl"].pop(k)
  d["rl"].update(objective="dapo", advantage="grpo", adv_eps=1e-4, clip_low=0.2, clip_high=0.28, kl_beta=0.01,
                 kl_estimator="k3", dynamic_sampling=True, overlong_buffer=2, overlong_penalty=1.0,
                 aggregate="token_mean", controller="adaptive_kl", kl_target=0.1, kl_horizon=10000.0)
  recipe = config_from_dict(d).rl.recipe()
  assert recipe.describe()["loss"] == ["ppo_clip(eps_low=0.2, eps_high=0.28)",
                                       "kl_penalty(beta=0.01, estimator='k3')"]
  assert [f.spec for f in recipe.filters] == ["zero_variance(refill=True)"]
  assert [s.spec for s in recipe.shaping] == ["overlong_penalty(buffer_len=2, penalty_factor=1.0)"]
  assert [c.name for c in recipe.controllers] == ["adaptive_kl"]
  assert "kl_reduction='token_mean'" in recipe.describe()["controllers"][0]  # the old kl_target was a token mean's
  with pytest.raises(ValueError, match="replaced by the recipe fields.*rl.filters='zero_variance"):
    apply_overrides(default_config(), ["rl.dynamic_sampling=true"])
