"""Stage factories for catalog rows: the adapters a room's ``_stages.py`` builds its rows' stages with
(``loss_term_factory``, ``data_stage_factory``, ``checked``, ``probe_step``)."""
from __future__ import annotations

import inspect
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from rljax.stages._data import NEEDS, NeedError, StepData
from rljax.stages._kinds import LossTerm



def _signature(fn, drop: Sequence[str] = (), add: Sequence[inspect.Parameter] = ()) -> inspect.Signature:
  """``fn``'s signature without the loop-supplied parameters ``drop``, plus ``add`` (keyword-only)."""
  params = [p for p in inspect.signature(fn).parameters.values() if p.name not in drop]
  params += list(add)
  order = {inspect.Parameter.POSITIONAL_ONLY: 0, inspect.Parameter.POSITIONAL_OR_KEYWORD: 1,
           inspect.Parameter.VAR_POSITIONAL: 2, inspect.Parameter.KEYWORD_ONLY: 3, inspect.Parameter.VAR_KEYWORD: 4}
  return inspect.Signature(sorted(params, key=lambda p: order[p.kind]))


def keyword(name: str, default) -> inspect.Parameter:
  """A keyword-only parameter a stage factory adds to its technique's own (e.g. a filter's ``refill``)."""
  return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)


def loss_term_factory(fn: Callable, *, hparams: Mapping[str, str] = None, needs=(), role: str = "term",
                      fill: Mapping[str, str] = None, slot: Optional[str] = None,
                      batch_extras: Optional[Callable] = None) -> Callable:
  """The ``Technique.stage`` of an objective row: ``factory(*args, **kwargs) -> LossTerm``.

  Args:
    fn: the term factory (``rljax.objectives.ppo_clip``, ...); the stage factory has its signature.
    hparams: ``{argument: hparam name}`` of the controller-movable arguments; an argument left at
      ``None`` is not movable.
    needs: the term's needs, or ``needs(arguments: dict) -> iterable`` when they depend on the arguments
      (e.g. ``top_entropy_mask(source="old")`` needs ``entropy_old``).
    role: ``"policy"``, ``"term"`` or ``"correction"`` (see :class:`LossTerm`); a wrapper of a policy term
      (``erc``, ``top_entropy_mask``) is ``"policy"``.
    fill: ``{argument: other argument}``: a ``None`` argument takes the other's value (``ppo_clip``'s
      ``eps_high`` defaults to ``eps_low``), so that both are movable.
    slot: the recipe slot when it is not the kind's (``kl_in_reward`` is a shaping stage).
    batch_extras: the inputs the term provides itself (see :class:`LossTerm`).
  """
  sig = inspect.signature(fn)
  hparams = dict(hparams or {})

  def factory(*args, **kwargs):
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    for arg, other in (fill or {}).items():
      if arguments.get(arg) is None:
        arguments[arg] = arguments[other]
    positional = [p.name for p in sig.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    call_args = tuple(arguments.pop(n) for n in positional)
    movable = {a: r for a, r in hparams.items()
               if arguments.get(a) is not None and not isinstance(arguments.get(a), LossTerm)}
    for a in movable:
      arguments[a] = float(arguments[a])
    declared = needs(dict(bound.arguments)) if callable(needs) else needs
    return LossTerm(fn, args=call_args, kwargs=arguments, hparams=movable, role=role, name=fn.__name__,
                    needs=frozenset(declared), batch_extras=batch_extras)

  factory.__signature__ = sig
  factory.__name__ = fn.__name__
  factory.__doc__ = f"Stage factory of ``{fn.__name__}``: the same arguments, returns a ``LossTerm``."
  if slot:
    factory.slot = slot
  return factory


def _input(data: StepData, source, by: str):
  if callable(source):
    return source(data)
  if source in NEEDS:
    return data.require(source, by)
  return getattr(data, source)


def data_stage_factory(fn: Callable, cls: type, *, inputs: Mapping[str, Any], needs=(), loop_args=(),
                       result: Optional[Callable] = None, slot: Optional[str] = None, **fixed) -> Callable:
  """The ``Technique.stage`` of a row whose function takes the step's data as arguments.

  ``factory(**hyper_parameters) -> cls(call, ...)`` where ``call(data)`` is
  ``fn(**{arg: data.<field>}, **hyper_parameters)``.

  Args:
    fn: the technique's function (``rljax.advantages.qae``, ``rljax.filters.vcrl``, ...).
    cls: the stage class (``Advantage``, ``Filter``, ``Shaping``, ``MultiReward``).
    inputs: ``{argument of fn: StepData field name, or fn(data) -> value}``; these arguments are supplied by
      the loop and are not hyper-parameters. A field named in ``NEEDS`` (``answer_ids``, ``logp_ref``, ...)
      becomes a need of the stage.
    needs: further needs, or ``needs(hyper_parameters) -> iterable``.
    loop_args: extra keyword parameters (``keyword(name, default)``) passed to ``cls`` instead of ``fn``
      (a filter's ``refill``).
    result: ``result(output, data) -> output`` post-processing ``fn``'s return value into the stage's
      convention (default: unchanged, e.g. ``(advantages, info)``).
    slot: the recipe slot when it is not the kind's.
    **fixed: further ``cls`` fields (``phase="advantages"``, ``transform=True``, ...).
  """
  loop_args = tuple(loop_args)
  sig = _signature(fn, drop=tuple(inputs), add=loop_args)
  loop_names = {p.name for p in loop_args}

  def factory(*args, **kwargs):
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    hyper = dict(bound.arguments)
    loop = {n: hyper.pop(n) for n in loop_names}
    declared = set(needs(hyper) if callable(needs) else needs)
    declared |= {src for src in inputs.values() if isinstance(src, str) and src in NEEDS}
    name = fn.__name__

    def call(data):
      try:
        out = fn(**{arg: _input(data, src, name) for arg, src in inputs.items()}, **hyper)
      except ValueError as e:  # an illegal input: the message names the technique (NeedError already does)
        if isinstance(e, NeedError) or str(e).startswith(f"{name}:"):
          raise
        empty = " (an empty batch, B = 0, is not supported)" if data.batch_size == 0 else ""
        raise ValueError(f"{name}: {e}{empty}") from e
      return out if result is None else result(out, data)

    call.__name__ = name
    return cls(call, name=name, needs=frozenset(declared), **fixed, **loop)

  factory.__signature__ = sig
  factory.__name__ = fn.__name__
  factory.__doc__ = f"Stage factory of ``{fn.__name__}`` ({cls.__name__}); its hyper-parameters as arguments."
  if slot:
    factory.slot = slot
  return factory


def probe_step(*, components: int = 2, steps: int = 3) -> StepData:
  """A tiny step (2 groups x 2 rows, 3 completion tokens, one row shorter) with every input filled.

  Stage factories run their stage once on it when they are built (``checked``), so a bad hyper-parameter fails
  when the recipe is built, not mid-run. ``components``: reward columns (and segment ids); ``steps``: process
  (step) reward columns (and turn ids).
  """
  b, t = 4, 4
  cm = np.array([[0, 1, 1, 1], [0, 1, 1, 0], [0, 1, 1, 1], [0, 1, 1, 1]], bool)  # token 0 is the prompt
  r = np.array([1.0, 0.0, 1.0, 0.0], np.float32)
  zeros = np.zeros((b, t), np.float32)
  ids = lambda k: np.where(cm, np.minimum(np.arange(t) - 1, k - 1), -1).astype(np.int32)
  # a raw uint32[2] PRNG key: building the probe (at import, for the default config) must not start a backend
  return StepData(
      tokens=np.ones((b, t), np.int32), prompt_mask=~cm, completion_mask=cm,
      group_id=np.array([0, 0, 1, 1], np.int32), num_groups=2, valid=np.ones(b, bool),
      lengths=cm.sum(1).astype(np.int32), completions=("1",) * b, problems=(None,) * b,
      prompt_index=np.array([0, 0, 1, 1], np.int64), rewards=r, correct=r.copy(), logp_behavior=zeros,
      entropy_behavior=zeros + 0.5, max_new_tokens=3, key=np.zeros(2, np.uint32), logp_old=zeros, entropy_old=zeros,
      logp_ref=zeros, entropy_ref=zeros, logp_teacher=zeros, values=zeros, greedy_rewards=r[::-1].copy(),
      answer_ids=np.array([0, 1, 0, 0], np.int32), task_id=np.array([0, 0, 1, 1], np.int32), num_tasks=2,
      reward_components=np.repeat(r[:, None], components, 1), reward_names=tuple(f"r{j}" for j in range(components)),
      step_rewards=np.repeat(r[:, None], steps, 1), step_mask=np.ones((b, steps), bool),
      reward_segments=ids(components), turn_ids=ids(steps), turns=(("1",),) * b,
      advantages=np.array([0.5, -0.5, 0.5, -0.5], np.float32))


def checked(factory: Callable, probe: Callable = lambda kwargs: probe_step()) -> Callable:
  """``factory`` whose stage runs once on ``probe(kwargs)`` (a tiny step) when built: bad hyper-parameters raise
  then, not mid-run."""
  import functools  # pylint: disable=import-outside-toplevel

  @functools.wraps(factory)
  def build(*args, **kwargs):
    stage = factory(*args, **kwargs)
    stage.fn(probe(kwargs))
    return stage

  return build
