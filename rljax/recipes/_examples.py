"""The smallest sensible recipe that trains each catalog technique on the built-in arithmetic task.

``example(name)`` gives the ``RLConfig`` recipe fields (technique specs) of a recipe in which technique ``name``
does its job: a transform after an estimator, a correction inside a policy loss, a wrapper around one, a
critic loss with GAE, a multi-reward stage over two rewards, ``adaptive_kl`` with a KL term to move. Every
other field keeps the config's default (GRPO, PPO clip, token mean). ``SKIP`` lists the rows that the
single-turn built-in tasks cannot train, with the reason. The parametrized test
``tests/test_recipes_every_technique_*.py`` trains each example for two steps; ``docs/recipes.md`` tabulates their
needs; the arena (issue #18) can reuse them.
"""
from __future__ import annotations

from rljax.recipes._spec import _catalog, resolve, slot_of

__all__ = ["example", "SKIP", "DENSE_REWARD", "trainable_names"]

_MULTI_TURN = "needs turn or segment ids: multi-turn environments (issue #20)"

# rows the single-turn built-in tasks cannot train, with the reason
SKIP = {
    "segment_ratio": _MULTI_TURN,
    "segment": _MULTI_TURN,
    "step_episode_mix": _MULTI_TURN,
    "sign_preserving_modulation": _MULTI_TURN,
    "oprl": _MULTI_TURN,
}

# a reward with within-group variance even for a barely trained model: how close the completion's number is
# to the answer (rljax.rewards.gaussian_reward on the arithmetic task's lowest-digit-first numbers)
DENSE_REWARD = "gaussian_reward(sigma=5.0, parse='arithmetic')"

# the spec of a row when its own defaults are not enough (required arguments, or values that do something on
# the tiny task)
_SPEC = {
    # hinted prompts must fit the tiny sampler's prompt bucket (8 tokens) and its vocabulary (digits, '+', '=')
    "guide": "guide(template='{hint}={prompt}')",
    "oc_grpo": "oc_grpo(template='{hint}={prompt}')",
    "lte": "lte(max_mistakes=1, template='{hint}={prompt}')",
    "adhint": "adhint(template='{hint}={prompt}')",
    "passk": "passk(k=2)",
    "canon": "canon(inter_coef=1.0, intra_coef=1.0)",
    "divergence_rejection": "divergence_rejection(threshold=1.0)",
    "erc": "erc(ppo_clip())",
    "top_entropy_mask": "top_entropy_mask(ppo_clip(), rho=0.5)",
    "delta_logp_reweight": "delta_logp_reweight(ppo_clip())",
    "entropy_gated_contrastive": "entropy_gated_contrastive(rho=0.5)",
    "entropic": "entropic(target_entropy=1.0)",
    "temperature_control": "temperature_control(target_entropy=1.0)",
    "overlong_penalty": "overlong_penalty(buffer_len=2)",
    "rubric_dropout": "rubric_dropout(drop_prob=0.5)",
    "vcrl": "vcrl(threshold=0.01)",  # keeps groups whose reward variance is at least 1% of the maximum
    "void_turn": "void_turn(answer_pattern='[0-9]')",  # arithmetic answers have no code block or \\boxed{}
    "format_regex": "format_regex(pattern='[0-9]+')",
    "gaussian_reward": DENSE_REWARD,
    "clipped_linear_reward": "clipped_linear_reward(scale=0.1, parse='arithmetic')",
    "clip_cov": "clip_cov(clip_cov_ratio=0.2)",  # the default 2e-4 of N tokens selects none on a tiny batch
    "kl_cov": "kl_cov(kl_cov_ratio=0.2)",
}


# loss terms that act on replayed rows: their example recipe has the replay stage that feeds them
_WITH_REPLAY = {"exgrpo_policy": "exgrpo"}


def _spec(name: str) -> str:
  return _SPEC.get(name, name)


def trainable_names() -> list:
  """Every catalog row with a stage, in catalog order (``SKIP`` rows included)."""
  return [n for n, r in _catalog().items() if slot_of(r) is not None]


def example(name: str) -> dict:
  """``{RLConfig field: spec}`` of the smallest recipe that trains ``name`` (see the module docstring)."""
  rows = _catalog()
  if name not in rows or slot_of(rows[name]) is None:
    raise ValueError(f"{name!r} is not a catalog technique with a stage; techniques: {trainable_names()}")
  slot, spec = slot_of(rows[name]), _spec(name)
  built = resolve(spec, slot)[0]
  fields = {"rewards": DENSE_REWARD}
  if slot == "rewards":
    fields["rewards"] = spec if spec == DENSE_REWARD else f"{spec}, {DENSE_REWARD}"
  elif slot == "multi_reward":
    fields.update(rewards=f"{DENSE_REWARD}, {_spec('format_regex')}", multi_reward=spec)
    if built.produces == "advantages":
      fields["advantage"] = ""
  elif slot == "advantage":
    fields["advantage"] = f"grpo, {spec}" if built.transform else spec
    if "values" in built.needs:
      fields["critic"] = "value_loss"
  elif slot == "critic":
    fields.update(advantage="gae", critic=spec)
  elif slot == "loss" and name in _WITH_REPLAY:
    fields.update(loss=spec, replay=_WITH_REPLAY[name])
  elif slot == "loss":
    if built.role == "correction":
      fields["loss"] = f"ppo_clip(correction={spec if '(' in spec else spec + '()'})"
    else:
      fields["loss"] = spec if built.role == "policy" else f"ppo_clip, {spec}"
  elif slot == "controllers":
    fields["controllers"] = spec
    if name == "adaptive_kl":
      fields["loss"] = "ppo_clip, kl_penalty(beta=0.01)"
  else:  # shaping, filters, prompt_filters, replay, aggregation
    fields[slot] = spec
    if "reward_components" in built.needs:  # rubric criteria: one column per reward
      fields["rewards"] = f"{DENSE_REWARD}, {_spec('format_regex')}"
  return fields
