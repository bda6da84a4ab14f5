"""``Recipe``: one RL step described as composable stages (see ``rljax.stages`` for each calling convention)."""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Mapping, Optional

from rljax import stages as S
from rljax.recipes._spec import python_marker, resolve

__all__ = ["Recipe", "Critic", "stage"]

# slot -> the stage class a plain callable in that slot becomes
_CLASS = {"rewards": S.Reward, "multi_reward": S.MultiReward, "shaping": S.Shaping, "prompt_filters": S.PromptFilter,
          "filters": S.Filter, "replay": S.Replay,
          "advantage": S.Advantage, "loss": S.LossTerm, "aggregation": S.Aggregation,
          "controllers": S.Controller, "critic": S.LossTerm}


def stage(name: str, *args, **kwargs):
  """The stage of catalog technique ``name`` with these arguments: ``stage("qae", quantile=0.7)``.

  Same as the spec ``"qae(quantile=0.7)"``; the slot is the technique's own.
  """
  from rljax.recipes._spec import Call, _catalog, resolve_call, slot_of  # pylint: disable=import-outside-toplevel
  rows = _catalog()
  if name not in rows or slot_of(rows[name]) is None:
    usable = [n for n, r in rows.items() if slot_of(r) is not None]
    raise ValueError(f"unknown technique {name!r}; techniques with a stage: {', '.join(usable)}")
  return resolve_call(Call(name, args, tuple(kwargs.items())), slot_of(rows[name]), rows)


def _constant_term(term):
  def factory():
    return term
  factory.__name__ = getattr(term, "name", None) or getattr(term, "__name__", "term")
  return factory


def _normalize(value, slot: str, *, many: bool = True) -> tuple:
  """A slot's value (spec string, stage, plain callable, or a sequence of those) -> a tuple of stages."""
  if value is None:
    return ()
  if isinstance(value, str):
    return resolve(value, slot)
  items = list(value) if isinstance(value, (list, tuple)) else [value]
  cls = _CLASS[slot]
  out = []
  for item in items:
    if isinstance(item, str):
      out.extend(resolve(item, slot))
    elif isinstance(item, cls):
      out.append(item)
    elif isinstance(item, S.Stage):
      raise ValueError(f"Recipe.{slot} takes {cls.__name__} stages, got a {type(item).__name__} ({item.name!r})")
    elif callable(item) and cls is S.LossTerm and slot == "critic":  # a plain value loss: reads the values
      out.append(S.LossTerm(_constant_term(item), name=_constant_term(item).__name__, needs={"values", "returns"}))
    elif callable(item) and cls is S.LossTerm:  # a plain term: it may read the proximal log-probs
      out.append(S.LossTerm(_constant_term(item), name=_constant_term(item).__name__,
                            role="policy" if not out else "term", needs={"logp_old"}))
    elif callable(item) and cls is S.PromptFilter:
      raise ValueError("Recipe.prompt_filters takes rljax.stages.PromptFilter stages (init/select/observe)")
    elif callable(item) and cls is S.Replay:
      raise ValueError("Recipe.replay takes rljax.stages.Replay stages (init/fn)")
    elif callable(item) and cls is S.Controller:
      raise ValueError("Recipe.controllers takes rljax.stages.Controller stages (init/update/hparams)")
    elif callable(item):
      out.append(cls(item))
    else:
      raise ValueError(f"Recipe.{slot}: {item!r} is not a technique spec, a stage or a callable")
  if not many and len(out) > 1:
    raise ValueError(f"Recipe.{slot} takes one stage, got {len(out)}: {[s.name for s in out]}")
  return tuple(out)


@dataclasses.dataclass(frozen=True)
class Critic:
  """A learned value function for critic-based advantages (``gae``).

  Attributes:
    loss: the value loss (a ``LossTerm`` of kind ``value``, spec or stage; default ``value_loss``).
    shared: ``True`` puts a value head on the policy trunk and adds ``coef * loss`` to the policy loss;
      ``False`` trains a separate critic model (the policy's architecture and starting weights, a fresh
      value head) with its own Adam optimizer.
    coef: weight of the value loss in the shared loss (``shared=True``).
    learning_rate: the separate critic's learning rate (``shared=False``).
  """
  loss: Any = "value_loss"
  shared: bool = False
  coef: float = 0.5
  learning_rate: float = 1e-3

  def __post_init__(self):
    loss = _normalize(self.loss, "critic", many=False)
    if not loss:
      raise ValueError("Critic.loss is empty: give a value loss (e.g. 'value_loss(clip_eps=0.2)')")
    object.__setattr__(self, "loss", loss[0])
    if not isinstance(self.shared, bool):
      raise ValueError(f"Critic.shared must be True or False, got {self.shared!r}")
    for name in ("coef", "learning_rate"):
      v = getattr(self, name)
      if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
        raise ValueError(f"Critic.{name} must be a positive number, got {v!r}")


@dataclasses.dataclass(frozen=True)
class Recipe:
  """One RL step as stages, in the order of the data flow (``rljax.train.train(cfg, recipe=...)``).

  Every field takes catalog specs (``"qae(quantile=0.7)"``; several comma-separated), stages
  (``rljax.stages.*`` or ``rljax.recipes.stage("qae", quantile=0.7)``), plain callables with the slot's
  calling convention (``rljax.stages``), or a sequence of those.

  Attributes:
    rewards: reward functions ``(completions, problems) -> [B]``; empty = the task's verifier. With
      several, ``multi_reward`` combines them (``data.reward_components [B, K]``); without one the reward is
      their sum.
    multi_reward: one multi-reward stage (``composite``: weighted sum; ``gdpo``, ``dara``, ``sa_mrpo``,
      ``gd2po``: straight to advantages, so ``advantage`` may then hold only transforms).
    shaping: reward shaping, in order (phase ``"rollout"`` before the filters, ``"forward"`` after the
      policy forwards).
    prompt_filters: pre-rollout selection (GRESO, Pilot-Commit, difficulty budgets) and curricula (DUMP, TAC).
    filters: filters over the sampled batch (phase ``"rewards"``, before the advantage; ``refill=True``
      resamples dropped groups) or over the advantages (phase ``"advantages"``).
    replay: at most one replay buffer (``exgrpo``, ``rapo_replay``, ``positive_replay``,
      ``rorecomp_compensation``): stored rollouts re-enter the batch (``rljax.stages.Replay``).
    advantage: an estimator, then advantage transforms (``difficulty_weight``, ``task_normalized``, ...).
    loss: objective terms; the first ``"policy"`` term is the policy loss (corrections go inside it:
      ``ppo_clip(correction=icepop())``). Built from ``state.hparams`` inside the jitted step.
    aggregation: the loss aggregation (``token_mean``, ``seq_mean_token_mean``, ...).
    objective: instead of ``loss``/``aggregation``, a builder ``hparams -> rljax.objectives.Objective``;
      ``hparams`` gives the initial values of the hparams it reads, ``objective_needs`` the batch inputs it
      reads (default ``("logp_old",)``: the proximal log-probs; add ``"logp_ref"`` for a KL term, ...). A plain
      term function in ``loss`` is assumed to read ``logp_old`` too; wrap it in ``rljax.stages.LossTerm`` to
      say otherwise.
    hparams: initial ``state.hparams`` (with ``objective``; for ``loss`` they come from the terms' arguments).
    controllers: controllers run after each step (they move hparams or the sampling temperature).
    critic: a :class:`Critic` (needed by ``gae``).
    name: a label for logs.
  """
  rewards: Any = ()
  multi_reward: Any = None
  shaping: Any = ()
  prompt_filters: Any = ()
  filters: Any = ()
  replay: Any = ()
  advantage: Any = "grpo"
  loss: Any = "ppo_clip"
  aggregation: Any = "token_mean"
  objective: Optional[Callable] = None
  objective_needs: tuple = ("logp_old",)
  hparams: Mapping[str, float] = dataclasses.field(default_factory=dict)
  controllers: Any = ()
  critic: Optional[Critic] = None
  name: str = "recipe"

  def __post_init__(self):
    set_ = lambda k, v: object.__setattr__(self, k, v)
    set_("rewards", _normalize(self.rewards, "rewards"))
    multi = _normalize(self.multi_reward, "multi_reward", many=False)
    set_("multi_reward", multi[0] if multi else None)
    for slot in ("shaping", "prompt_filters", "filters", "advantage", "controllers"):
      set_(slot, _normalize(getattr(self, slot), slot))
    set_("replay", _normalize(self.replay, "replay", many=False))
    if self.objective is not None:
      if not callable(self.objective):
        raise ValueError(f"Recipe.objective must be a builder hparams -> Objective, got {self.objective!r}")
      set_("loss", ())
    else:
      set_("loss", _normalize(self.loss, "loss"))
    agg = _normalize(self.aggregation, "aggregation", many=False)
    set_("aggregation", agg[0] if agg else None)
    set_("hparams", {k: float(v) for k, v in dict(self.hparams or {}).items()})
    if self.critic is not None and not isinstance(self.critic, Critic):
      raise ValueError(f"Recipe.critic must be a rljax.recipes.Critic, got {self.critic!r}")
    self._check()

  def _check(self):
    to_adv = self.multi_reward is not None and self.multi_reward.produces == "advantages"
    estimators = [a.name for a in self.advantage if not a.transform]
    if to_adv and estimators:
      raise ValueError(f"multi_reward {self.multi_reward.name!r} already gives the advantages; "
                       f"Recipe.advantage may then hold only transforms, got estimators {estimators}")
    if not to_adv:
      if not self.advantage or self.advantage[0].transform:
        first = self.advantage[0].name if self.advantage else None
        raise ValueError("Recipe.advantage must start with an estimator (e.g. grpo)"
                         + (f"; {first!r} transforms advantages an estimator wrote" if first else ""))
      if len(estimators) > 1:
        raise ValueError(f"Recipe.advantage has several estimators {estimators}: one estimator, then "
                         "transforms (each later estimator would overwrite the advantages)")
    if self.objective is None:
      if not self.loss:
        raise ValueError("Recipe.loss is empty: give at least a policy loss (e.g. ppo_clip) or an objective")
      for term in self.loss:
        if term.role == "correction":
          raise ValueError(f"{term.name!r} is a correction: pass it to the policy loss, e.g. "
                           f"ppo_clip(correction={term.name}())")
      if self.aggregation is None:
        raise ValueError("Recipe.aggregation is empty (e.g. token_mean)")
    wraps = [c.name for c in self.controllers if c.wrap_policy is not None]
    if wraps and self.objective is not None:
      raise ValueError(f"controller(s) {wraps} wrap the policy loss, which a custom objective builder does not "
                       "expose: use Recipe.loss, or apply the wrapper in your builder")
    if wraps and not any(t.role == "policy" for t in self.loss):
      raise ValueError(f"controller(s) {wraps} wrap the policy loss, but Recipe.loss has no policy term")
    writes = [w for c in self.controllers for w in c.writes]
    twice = sorted({w for w in writes if writes.count(w) > 1})
    if twice:
      raise ValueError(f"several controllers move the same value(s) {twice}")
    read = set(self.loss_hparams()) if self.objective is None else set(self.hparams)
    for c in self.controllers:
      unread = sorted(set(c.writes) - read - {"temperature"}) if c.wrap_policy is None else []
      if unread:
        raise ValueError(f"controller {c.name!r} moves {unread}, which no loss term reads; add a term with that "
                         "hyper-parameter (kl_penalty(beta=...) for kl_beta, a clipped policy loss such as "
                         "ppo_clip for clip_low/clip_high)")

  # ------------------------------------------------------------------------- views

  def replace(self, **changes) -> "Recipe":
    new = dataclasses.replace(self, **changes)
    object.__setattr__(new, "_given", self.given | frozenset(changes))
    return new

  @property
  def given(self) -> frozenset:
    """The fields this recipe was given (constructor arguments and ``replace`` changes); the others hold
    ``Recipe``'s defaults. A recipe copied with ``dataclasses.replace`` counts every field as given."""
    return getattr(self, "_given", frozenset(f.name for f in dataclasses.fields(self)))

  def over(self, base: "Recipe") -> "Recipe":
    """This recipe's given fields over ``base``: the fields it was not given come from ``base``.

    What a config file's ``get_recipe()`` means next to its ``get_config()``: ``Recipe(rewards=(fn,))`` over
    the config's recipe replaces the rewards and keeps the config's advantage, loss (its KL term), shaping, ...,
    exactly as ``train(cfg, reward_fn=fn)`` does. Given ``rewards`` without ``multi_reward`` clears the base's
    multi-reward stage (it combined the base's rewards); a given ``objective`` brings its ``loss``,
    ``aggregation``, ``hparams`` and ``objective_needs`` with it (a builder replaces the whole loss): the fields
    ``replaces`` names.
    """
    given = set(self.replaces)
    if "loss" in given and base.objective is not None:  # a loss replaces the base's builder
      given.update(("objective", "objective_needs", "hparams"))
    changes = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name in given}
    return base.replace(**changes)

  @property
  def replaces(self) -> frozenset:
    """The fields ``over`` takes from this recipe: the given ones, ``multi_reward`` with given ``rewards``, and
    a given ``objective``'s ``loss``, ``aggregation``, ``hparams`` and ``objective_needs``."""
    given = set(self.given)
    if "rewards" in given:
      given.add("multi_reward")
    if "objective" in given:
      given.update(("loss", "aggregation", "hparams", "objective_needs"))
    return frozenset(given)

  def stages(self) -> list:
    """Every stage of the recipe, in data-flow order (nested loss terms included)."""
    out = [*self.prompt_filters, *self.rewards, *([self.multi_reward] if self.multi_reward else []),
           *self.shaping, *self.filters, *self.replay, *self.advantage]

    def walk(term):
      out.append(term)
      for child in term.children():
        walk(child)

    for term in self.loss:
      walk(term)
    if self.objective is not None:
      out.append(S.LossTerm(_constant_term(self.objective), name="objective", needs=self.objective_needs))
    if self.aggregation is not None:
      out.append(self.aggregation)
    if self.critic is not None:
      walk(self.critic.loss)
    out.extend(self.controllers)
    return out

  def batch_extras(self) -> tuple:
    """The ``LossTerm.batch_extras`` of the recipe's loss terms (nested ones and the critic's included), each
    once, in data-flow order: the per-row inputs the terms build themselves (``TrainBatch.extras``)."""
    return tuple(dict.fromkeys(s.batch_extras for s in self.stages()
                               if isinstance(s, S.LossTerm) and s.batch_extras is not None))

  @property
  def needs(self) -> frozenset:
    """Every input some stage needs (``rljax.stages.NEEDS``)."""
    return frozenset().union(*(s.needs for s in self.stages()))

  def bind(self, facts: S.RunFacts) -> "Recipe":
    """The recipe with every stage bound to the run's static facts (and controllers to the loss's hparams)."""
    one = lambda s: _with_spec(s.bind(facts), s)
    b = lambda items: tuple(one(s) for s in items)
    bound = dataclasses.replace(
        self, rewards=b(self.rewards), multi_reward=one(self.multi_reward) if self.multi_reward else None,
        shaping=b(self.shaping), prompt_filters=b(self.prompt_filters), filters=b(self.filters),
        replay=b(self.replay),
        advantage=b(self.advantage), aggregation=one(self.aggregation) if self.aggregation else None)
    facts = dataclasses.replace(facts, hparams=bound.loss_hparams())
    return dataclasses.replace(bound, controllers=b(self.controllers))

  def loss_hparams(self) -> dict:
    """The hparams the loss reads, with their values from the terms' arguments (and ``Recipe.hparams``)."""
    hp: dict = {}
    for term in self.loss:
      S._merge_hparams(hp, term.initial_hparams(), "Recipe.loss")  # pylint: disable=protected-access
    if self.critic is not None and self.critic.shared:
      S._merge_hparams(hp, self.critic.loss.initial_hparams(), "Recipe.critic")  # pylint: disable=protected-access
    hp.update(self.hparams)
    return hp

  def initial_hparams(self) -> dict:
    """``state.hparams`` at the start of RL: the loss's values, then each controller's initial ones.

    (``Recipe`` refuses a controller that moves a value no loss term reads.)
    """
    hp = self.loss_hparams()
    for c in self.controllers:
      hp.update({k: float(v) for k, v in c.hparams(c.init()).items()})
    return hp

  def clip_hparams(self) -> tuple:
    """The hparam names ``(low, high)`` of the policy term's clip bounds: the names its ``eps_low`` and
    ``eps_high`` arguments take in ``LossTerm.hparams`` (``ppo_clip``: ``("clip_low", "clip_high")``); ``()``
    when the policy term declares no such bounds or the recipe has its own ``objective``. The generic
    ``policy/clip_frac`` diagnostic of the update reads them (the PPO default 0.2 without)."""
    policy = next((t for t in self.loss if t.role == "policy"), None) if self.objective is None else None
    names = dict(policy.hparams) if policy is not None else {}
    return (names["eps_low"], names["eps_high"]) if {"eps_low", "eps_high"} <= set(names) else ()

  def objective_builder(self) -> Callable:
    """``builder(hparams) -> rljax.objectives.Objective``, called inside the jitted step."""
    from rljax.objectives import chain  # pylint: disable=import-outside-toplevel
    if self.objective is not None:
      return self.objective
    loss, controllers, critic = self.loss, self.controllers, self.critic
    aggregate = self.aggregation.fn
    policy = next((i for i, t in enumerate(loss) if t.role == "policy"), None)

    def builder(hp):
      terms = [t.build(hp) for t in loss]
      for c in controllers:
        if c.policy_hparams is not None:
          terms[policy] = _chosen_in_loss(loss[policy], terms[policy], c.policy_hparams, hp)
      for c in controllers:
        if c.wrap_policy is not None:
          terms[policy] = c.wrap_policy(terms[policy], hp)
      if critic is not None and critic.shared:
        terms.append(_scaled(critic.loss.build(hp), critic.coef))
      return chain(*terms, aggregate=aggregate)

    return builder

  def specs(self, *, mark_python: bool = False) -> dict:
    """``{RLConfig field: spec string}`` writing this recipe as config fields (``RLConfig.with_recipe``).

    Raises ``ValueError`` when a stage is not a catalog technique (a user function): such a recipe is passed
    to ``rljax.train.train(cfg, recipe=...)`` instead. With ``mark_python=True`` such a slot is written as a
    marker naming its stages instead (``rljax.recipes.python_marker``: ``"<python: my_reward>"``), and so are
    the loss and aggregation of a custom objective builder and a loss with ``hparams`` set directly: what a
    run's ``config.json`` records, each slot as it ran.
    """
    show = lambda s: getattr(s, "spec", None) or s.name  # a stage in a marker: its spec, else its name

    def unwritable(message: str) -> None:
      if not mark_python:
        raise ValueError(message)

    if self.objective is not None:
      unwritable(f"recipe {self.name!r} has a custom objective builder, which no config field can hold")
    elif self.hparams:
      unwritable(f"recipe {self.name!r} sets hparams {sorted(self.hparams)} directly, which no config field "
                 "holds; give them as the loss terms' arguments")

    def spec(items, slot):
      items = list(items)
      python = [s for s in items if getattr(s, "spec", None) is None]
      if not python:
        return ", ".join(s.spec for s in items)
      unwritable(f"recipe {self.name!r}: {slot} stage {python[0].name!r} is not a catalog technique, so no "
                 "config field can hold it; pass the recipe to rljax.train.train(cfg, recipe=...)")
      return python_marker(show(s) for s in items)

    fields = {slot: spec(getattr(self, slot), slot) for slot in
              ("rewards", "shaping", "prompt_filters", "filters", "replay", "advantage", "loss", "controllers")}
    fields["multi_reward"] = spec([self.multi_reward] if self.multi_reward else [], "multi_reward")
    fields["aggregation"] = spec([self.aggregation], "aggregation")
    if self.objective is not None:  # the builder gives the whole loss, its aggregation included
      builder = python_marker([f"objective {getattr(self.objective, '__name__', 'builder')}"])
      fields.update(loss=builder, aggregation=builder)
    elif self.hparams:
      fields["loss"] = python_marker([*(show(t) for t in self.loss), f"hparams {self.hparams}"])
    if self.critic is not None:
      fields.update(critic=spec([self.critic.loss], "critic"), critic_shared=self.critic.shared,
                    critic_coef=self.critic.coef, critic_lr=self.critic.learning_rate)
    else:
      fields["critic"] = ""
    return fields

  def describe(self) -> dict:
    """The stage names per slot (for logs, ``summary.json`` and the arena)."""
    show = lambda s: getattr(s, "spec", None) or s.name  # the spec (with arguments) of a catalog stage
    names = lambda items: [show(s) for s in items]
    critic = None
    if self.critic is not None:
      critic = {"loss": show(self.critic.loss), "shared": self.critic.shared, "coef": self.critic.coef,
                "learning_rate": self.critic.learning_rate}
    return {"name": self.name, "rewards": names(self.rewards) or ["task"],
            "multi_reward": show(self.multi_reward) if self.multi_reward else None,
            "shaping": names(self.shaping), "prompt_filters": names(self.prompt_filters),
            "filters": names(self.filters),
            **({"replay": names(self.replay)} if self.replay else {}),  # absent without one: older runs' recipe.json
            "advantage": names(self.advantage),
            "loss": names(self.loss) if self.objective is None else ["custom objective"],
            "aggregation": show(self.aggregation) if self.aggregation else None,
            "controllers": names(self.controllers), "critic": critic}


_DATACLASS_INIT = Recipe.__init__


@functools.wraps(_DATACLASS_INIT)
def _recording_init(self, *args, **kwargs):
  """``Recipe``'s dataclass constructor, recording which fields the caller gave (``Recipe.given``)."""
  _DATACLASS_INIT(self, *args, **kwargs)
  names = [f.name for f in dataclasses.fields(Recipe)]
  object.__setattr__(self, "_given", frozenset(names[:len(args)]) | frozenset(kwargs))


Recipe.__init__ = _recording_init


def _with_spec(new, old):
  """``new`` (a bound copy of stage ``old``) keeping ``old``'s catalog spec."""
  if getattr(old, "spec", None) is not None and getattr(new, "spec", None) is None:
    object.__setattr__(new, "spec", old.spec)
  return new


def _scaled(term, coef: float):
  """``coef * term`` (the shared critic's value loss inside the policy loss)."""
  def scaled(out, batch):
    loss, metrics = term(out, batch)
    return coef * loss, metrics
  scaled.name = getattr(term, "name", "value_loss")
  return scaled


def _chosen_in_loss(spec, built, choose: Callable, hp):
  """The policy term ``spec`` rebuilt on every call with the hparams ``choose(out, batch, hp)`` picks from that
  (micro-)batch (a controller's ``policy_hparams``); ``built`` (``spec.build(hp)``) lends its name and batch
  statistics (which read no hparam)."""
  def term(out, batch, **kw):
    chosen = choose(out, batch, hp)
    return spec.build({**hp, **chosen})(out, batch, **kw)
  from rljax.objectives import has_statistics, with_statistics  # pylint: disable=import-outside-toplevel
  term.name = getattr(built, "name", spec.name)
  return with_statistics(term, built.batch_statistics if has_statistics(built) else None)
