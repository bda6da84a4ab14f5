"""What each recipe slot's stage must return: the contracts the start-up check proves (``_startup.dry_run``).

Each contract is read off how the trainer consumes the slot's output (``_rollout.py``: rewards, multi-reward,
shaping, filters, prompt filters; ``_advantage.py``: the advantage; ``_rl.py``/``_step.py``: the loss, the critic,
the controllers) and written once, in :data:`CONTRACTS` (``key -> Contract``). ``check(key, label, value, dims)``
returns the parts of a stage's return the dry run passes on, or raises ``ValueError`` naming the slot and the
stage, what it returned (type, dtype, shape, keys, briefly) and what was expected, with the run's sizes::

    rl.advantage stage 'my_adv' returned ndarray float64 shape (32,) (not a tuple); expected a tuple
    (advantages [B] or [B, T] float array, info dict) with B = 32, T = 20

"Finite" is checked where the trainer reads the values: advantages on valid rows, a per-token loss on the loss
mask's tokens (the aggregations mask the rest), rewards, hparams and scalars everywhere. A metrics or info dict
may be ``None`` (the trainer reads ``dict(m or {})``); its values are logged, not checked.
"""
from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Callable, Mapping, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Dims", "Contract", "CONTRACTS", "check", "describe"]


class Dims(NamedTuple):
  """The synthetic batch's sizes and masks: ``b`` rows, ``t`` tokens, ``p`` prompts (groups) of ``g`` samples,
  ``n`` dataset prompts, ``pilot`` rows of a prompt filter's pilot; ``valid [B]`` bool, ``loss_mask [B, T]`` bool,
  ``hparams`` the names in ``state.hparams`` (None: any name, a controller's initial hparams join them)."""
  b: int
  t: int
  p: int
  g: int
  n: int
  valid: np.ndarray
  loss_mask: np.ndarray
  pilot: int = 0
  hparams: Optional[tuple] = ()


class Violation(Exception):
  """A return that breaks its contract; ``str`` says how (e.g. ``advantages of shape (17,)``)."""


@dataclasses.dataclass(frozen=True)
class Contract:
  """``expected``: what the stage returns, in words; ``parse(value, dims) -> parts`` raises :class:`Violation` when
  ``value`` breaks it; ``sizes``: the run's sizes ``expected`` names (``B`` rows, ``T`` tokens, ``P`` prompts, ``G``
  samples per prompt, ``N`` dataset prompts), given with their values in the error."""
  expected: str
  parse: Callable[[Any, Dims], Any]
  sizes: str = ""


# ----------------------------------------------------------------------------- describing a value


def _is_array(x) -> bool:
  return hasattr(x, "shape") and hasattr(x, "dtype")


def _array_name(x) -> str:
  return "Array" if isinstance(x, jax.Array) else type(x).__name__


def describe(x, top: bool = True) -> str:
  """``x`` in a few words: ``ndarray float64 shape (32,)``, ``a tuple of 2 (Array float32 shape (4, 9), dict)``,
  ``dict with keys ['a', 'b']``, ``float 0.5``, ``None``."""
  if x is None:
    return "None"
  if _is_array(x):
    return f"{_array_name(x)} {np.dtype(x.dtype).name} shape {tuple(x.shape)}"
  if isinstance(x, Mapping):
    return f"{type(x).__name__} with keys {sorted(map(str, x))[:8]}" if top else type(x).__name__
  if isinstance(x, (tuple, list)):
    inner = f" ({', '.join(describe(v, False) for v in x)})" if top and len(x) <= 4 else ""
    return f"a {type(x).__name__} of {len(x)}{inner}"
  if isinstance(x, (bool, int, float, np.number)):
    text = repr(x)
    return f"{type(x).__name__} {text if len(text) <= 20 else text[:17] + '...'}"
  return type(x).__name__


# ----------------------------------------------------------------------------- the parts of a return


def _tuple(x, n: int) -> tuple:
  if not isinstance(x, tuple):
    raise Violation("not a tuple")
  if len(x) != n:
    raise Violation(f"a tuple of {len(x)}, not {n}")
  return x


def _metrics(x, what: str = "metrics") -> dict:
  if x is not None and not isinstance(x, Mapping):
    raise Violation(f"{what} is {describe(x, False)}, not a dict")
  return dict(x or {})


def _array(x, what: str, kinds: str) -> np.ndarray:
  """``x`` as a host array whose dtype kind is in ``kinds`` (``"f"`` floating, ``"biuf"`` numbers, ``"b"`` bool,
  ``"iu"`` integers)."""
  if isinstance(x, (str, bytes, Mapping)) or x is None:
    raise Violation(f"{what} is {describe(x, False)}, not an array")
  try:
    a = np.asarray(jax.device_get(x))
  except (TypeError, ValueError) as e:
    raise Violation(f"{what} is not an array ({type(e).__name__}: {e})") from None
  floating = a.dtype == jnp.bfloat16 or a.dtype.kind == "f"
  if not (a.dtype.kind in kinds or ("f" in kinds and floating)):
    names = {"f": "float", "b": "bool", "i": "int", "u": "int"}
    allowed = " or ".join(dict.fromkeys(names[k] for k in kinds))
    raise Violation(f"{what} of dtype {a.dtype.name}, not {allowed}")
  return a.astype(np.float32) if a.dtype == jnp.bfloat16 else a


def _shape(a: np.ndarray, what: str, *shapes: tuple) -> np.ndarray:
  if a.shape not in shapes:
    raise Violation(f"{what} of shape {a.shape}")
  return a


def _finite(a: np.ndarray, what: str, where: Optional[np.ndarray] = None, on: str = "") -> np.ndarray:
  values = a if where is None else a[where]
  bad = int(np.size(values) - np.count_nonzero(np.isfinite(values)))
  if bad:
    raise Violation(f"{what}: {bad} NaN/inf value{'s' if bad != 1 else ''}{' ' + on if on else ''}")
  return a


def _rows_where(a: np.ndarray, dims: Dims) -> np.ndarray:
  return dims.valid if a.ndim == 1 else np.broadcast_to(dims.valid[:, None], a.shape)


def _sequence_or_token(x, dims: Dims, what: str, kinds: str) -> np.ndarray:
  a = _shape(_array(x, what, kinds), what, (dims.b,), (dims.b, dims.t))
  return _finite(a.astype(np.float64), what, _rows_where(a, dims), "on valid rows of the synthetic batch")


# ----------------------------------------------------------------------------- the contracts, slot by slot


def _reward(x, dims):
  if isinstance(x, tuple) and len(x) == 2 and isinstance(x[1], Mapping):  # (rewards, info), as safe_reward reads
    x = x[0]
  a = _shape(_array(x, "rewards", "biuf"), "rewards", (dims.b,))
  return _finite(a.astype(np.float64), "rewards", on="on the reference answers")


def _multi_rewards(x, dims):
  values, metrics = _tuple(x, 2)
  a = _shape(_array(values, "rewards", "biuf"), "rewards", (dims.b,))
  return _finite(a.astype(np.float64), "rewards", dims.valid, "on valid rows"), _metrics(metrics)


def _shaping(x, dims):
  values, metrics = _tuple(x, 2)
  a = _shape(_array(values, "rewards", "biuf"), "rewards", (dims.b,), (dims.b, dims.t))
  return _finite(a.astype(np.float64), "rewards", _rows_where(a, dims), "on valid rows"), _metrics(metrics)


def _keep(x, dims):
  keep, metrics = _tuple(x, 2)
  return _shape(_array(keep, "keep", "b"), "keep", (dims.b,)), _metrics(metrics)


def _keep_or_rows(x, dims):
  keep, metrics = _tuple(x, 2)
  a = _array(keep, "keep", "biu")
  if a.dtype == bool:
    return _shape(a, "keep", (dims.b,)), _metrics(metrics)
  if a.ndim != 1 or a.size > dims.b or (a.size and (a.min() < 0 or a.max() >= dims.b)):
    raise Violation(f"row indices of shape {a.shape} in [{a.min(initial=0)}, {a.max(initial=0)}]")
  return a, _metrics(metrics)


def _ints_in(x, what: str, n: int, lo: int, hi: int) -> np.ndarray:
  a = _shape(_array(x, what, "iu"), what, (n,))
  if a.size and (a.min() < lo or a.max() > hi):
    raise Violation(f"{what} {a.tolist()[:8]} out of [{lo}, {hi}]")
  return a


def _draw(x, dims):
  index, state, metrics = _tuple(x, 3)
  return _ints_in(index, "index", dims.p, 0, dims.n - 1), state, _metrics(metrics)


def _select(x, dims):
  counts, state, metrics = _tuple(x, 3)
  return _ints_in(counts, "counts", dims.p, 0, dims.g - dims.pilot), state, _metrics(metrics)


def _state_and_metrics(x, dims):  # pylint: disable=unused-argument
  state, metrics = _tuple(x, 2)
  return state, _metrics(metrics)


def _advantage(x, dims):
  adv, info = _tuple(x, 2)
  return _sequence_or_token(adv, dims, "advantages", "f"), _metrics(info, "info")


def _stateful_advantage(x, dims):
  adv, info, state = _tuple(x, 3)
  return _sequence_or_token(adv, dims, "advantages", "f"), _metrics(info, "info"), state


def _critic_targets(x, dims):
  a = _shape(_array(x, "critic targets", "f"), "critic targets", (dims.b, dims.t))
  return _finite(a, "critic targets", _rows_where(a, dims), "on valid rows")


def _declared_extras(extras: Mapping, dims) -> None:
  """The entries of ``extras`` declared in ``rljax.stages.EXTRAS`` have their declared dtype and shape; a key of
  the stage's own that is a near miss of a declared one (``replay_masks``) is a misspelling, refused."""
  from rljax.stages import EXTRAS  # pylint: disable=import-outside-toplevel
  for key in extras:
    near = [] if key in EXTRAS else difflib.get_close_matches(str(key), EXTRAS, n=1, cutoff=0.85)
    if near:
      raise Violation(f"extras[{key!r}] is not declared in rljax.stages.EXTRAS; did you mean {near[0]!r} "
                      f"({EXTRAS[near[0]].doc})?")
  for key, spec in EXTRAS.items():
    if key in extras:
      what = f"extras[{key!r}] ({spec.doc}; written by {spec.by})"
      _shape(_array(extras[key], what, spec.kinds), what, (dims.b,) if spec.shape == "B" else (dims.b, dims.t))


def _replay(x, dims):
  from rljax.stages import StepData  # pylint: disable=import-outside-toplevel
  data, state, metrics = _tuple(x, 3)
  if not isinstance(data, StepData):
    raise Violation(f"data is {describe(data, False)}, not a StepData")
  if data.batch_size != dims.b:
    raise Violation(f"data of {data.batch_size} rows")
  _declared_extras(data.extras, dims)
  return data, state, _metrics(metrics)


def _replay_prompts(x, dims):
  index, slots, metrics = _tuple(x, 3)
  return (_ints_in(index, "index", dims.p, 0, dims.n - 1), _ints_in(slots, "slots", dims.p, -1, np.iinfo(np.int64).max),
          _metrics(metrics))


def _loss_term(x, dims):
  per_token, metrics = _tuple(x, 2)
  a = _shape(_array(per_token, "per-token loss", "f"), "per-token loss", (dims.b, dims.t))
  return _finite(a, "per-token loss", dims.loss_mask, "on loss-mask tokens"), _metrics(metrics)


def _scalar(x, what: str) -> float:
  return float(_finite(_shape(_array(x, what, "f"), what, ()), what))


def _aggregation(x, dims):  # pylint: disable=unused-argument
  numerator, denominator = _tuple(x, 2)
  return _scalar(numerator, "numerator"), _scalar(denominator, "denominator")


def _objective(x, dims):  # pylint: disable=unused-argument
  loss, metrics = _tuple(x, 2)
  return _scalar(loss, "loss"), _metrics(metrics)


def _controller_hparams(x, dims):
  if not isinstance(x, Mapping):
    raise Violation("not a dict")
  unknown = [] if dims.hparams is None else sorted(set(map(str, x)) - set(dims.hparams))
  if unknown:
    raise Violation(f"hparams {unknown} that no loss term reads (state.hparams has {sorted(dims.hparams)})")
  values = {k: _array(v, f"hparams[{k!r}]", "biuf") for k, v in x.items()}
  wrong = [k for k, v in values.items() if v.shape != ()]
  if wrong:
    raise Violation(f"hparams {wrong} that are not scalars")
  bad = [k for k, v in values.items() if not np.isfinite(v)]
  if bad:
    raise Violation(f"hparams: {len(bad)} NaN/inf value{'s' if len(bad) != 1 else ''} in {bad}")
  return {k: float(v) for k, v in values.items()}


def _temperature(x, dims):  # pylint: disable=unused-argument
  t = float(_finite(_shape(_array(x, "temperature", "biuf"), "temperature", ()), "temperature"))
  if t <= 0:
    raise Violation(f"temperature {t}")
  return t


CONTRACTS: Mapping[str, Contract] = {
    "rewards": Contract("[B] numbers (or a tuple ([B] numbers, info dict)), finite on the reference answers",
                        _reward, "B"),
    "multi_reward": Contract("a tuple (rewards [B] numbers, metrics dict)", _multi_rewards, "B"),
    "multi_reward.advantages": Contract("a tuple (advantages [B] or [B, T] float array, metrics dict)",
                                        _advantage, "BT"),
    "shaping": Contract("a tuple (rewards [B] or token rewards [B, T] numbers, metrics dict)", _shaping, "BT"),
    "filters": Contract("a tuple (keep [B] bool or row indices [N] int in [0, B) with N <= B, metrics dict)",
                        _keep_or_rows, "B"),
    "filters.refill": Contract("a tuple (keep [B] bool, metrics dict)", _keep, "B"),
    "prompt_filters.draw": Contract("a tuple (index [P] int in [0, N), state, metrics dict)", _draw, "PN"),
    "prompt_filters.select": Contract("a tuple (counts [P] int in [0, G - pilot], state, metrics dict)", _select,
                                      "PG"),
    "prompt_filters.observe": Contract("a tuple (state, metrics dict)", _state_and_metrics),
    "advantage": Contract("a tuple (advantages [B] or [B, T] float array, info dict)", _advantage, "BT"),
    "advantage.stateful": Contract("a tuple (advantages [B] or [B, T] float array, info dict, state)",
                                   _stateful_advantage, "BT"),
    "advantage.returns": Contract("info['returns']: critic targets [B, T] float array (the stage declares "
                                  "returns=True)", _critic_targets, "BT"),
    "replay": Contract("a tuple (data: a StepData of B rows whose extras declared in rljax.stages.EXTRAS have "
                       "their declared dtype and shape, state, metrics dict)", _replay, "BT"),
    "replay.prompts": Contract("a tuple (index [P] int in [0, N), slots [P] int >= -1, metrics dict)",
                               _replay_prompts, "PN"),
    "loss": Contract("a tuple (per_token_loss [B, T] float array, metrics dict)", _loss_term, "BT"),
    "critic": Contract("a tuple (per_token_loss [B, T] float array, metrics dict)", _loss_term, "BT"),
    "aggregation": Contract("a tuple (numerator, denominator) of float scalars", _aggregation),
    "objective": Contract("a tuple (loss float scalar, metrics dict)", _objective),
    "controllers": Contract("a tuple (state, metrics dict)", _state_and_metrics),
    "controllers.hparams": Contract("a dict {hparam name: finite float scalar} of names in state.hparams",
                                    _controller_hparams),
    "controllers.temperature": Contract("a finite float > 0", _temperature),
}


def _sizes(contract: Contract, dims: Dims) -> str:
  values = {"B": dims.b, "T": dims.t, "P": dims.p, "G": dims.g, "N": dims.n}
  used = [f"{k} = {values[k]}" for k in contract.sizes]
  if "pilot" in contract.expected and dims.pilot:
    used.append(f"pilot = {dims.pilot}")
  return f" with {', '.join(used)}" if used else ""


def check(key: str, label: str, value, dims: Dims):
  """The parts of ``value`` (a stage's return) under contract ``CONTRACTS[key]``; a violation raises ``ValueError``
  ``"<label> returned <what> (<how>); expected <contract> with B = .., T = .."`` (``label``: the slot and the stage,
  e.g. ``rl.advantage stage 'my_adv'``)."""
  contract = CONTRACTS[key]
  try:
    return contract.parse(value, dims)
  except Violation as e:
    raise ValueError(f"{label} returned {describe(value)} ({e}); expected {contract.expected}"
                     f"{_sizes(contract, dims)}") from None
