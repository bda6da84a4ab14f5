"""A catalog-wide edge-case sweep: every row of ``rljax.catalog()`` x every case, as one parametrized test.

Entry point (the choice: one harness covers every row): each row's ``stage``, built by name through
``rljax.recipes`` with the arguments of its example recipe (``rljax.recipes._examples._spec``), run the way the RL
loop runs its kind (``rljax/stages/``): a loss term ``build(hparams)(out, batch)`` inside ``chain`` (a correction
inside ``ppo_clip(correction=...)``), an aggregation ``fn(per_token_loss, mask)``, a controller
``init``/``update``/``hparams``, a data stage ``fn(data)`` (``fn(data, state)`` with ``init``), a prompt filter's
``observe``/``select``/``draw``, a replay buffer's ``prompts``/``hints``/``fn`` (twice: store, then replay), a reward
``fn(completions, problems)``. Every row has a stage, its hyper-parameters default, and the stage receives exactly
what the loop passes, so ``fn``'s loop-supplied arguments need no per-row wiring here. The inputs are built per kind
from one synthetic step (``_step``: 3 groups x 4 rows, ragged completions, one padded row, every need filled).

Cases (``CASES``): an empty batch (B = 0); a batch whose rows are all padding (``valid`` all False); -inf log-probs
and NaN entropies / values / advantages in the padded positions; all-equal rewards in every group; single-member
groups (12 groups of 1); float64 inputs under ``jax.enable_x64(True)``. Every case runs with clean (zero) padding and
with poisoned padding (padded tokens: -inf log-probs, NaN token values; padded rows: other rewards, correctness,
advantages), and checks:

* the primary outputs (the loss and per-token loss, an aggregation's numerator, a data stage's values) are finite
  and no other output (metrics, info, state) is NaN (``+inf`` is a quantile's documented "nothing selected"), or the
  stage raises a ``ValueError`` naming the technique (``ERROR_BY_DESIGN``);
* padding never leaks: every output on real positions (valid rows; completion tokens of valid rows) is equal
  (``READS_PADDED_ROWS``: slots that read padded rows by design, whose padded tokens only are poisoned);
* float64 in gives float64 out on the primary outputs, an aggregation's denominator and the entropy metrics
  (``F32_BY_DESIGN``: slots and rows whose float32 is by design, with the reason);
* jit equals eager for the stages that run inside the jitted update (loss terms, critic, aggregations; ``HOST_ONLY``
  lists the slots that run on the host with NumPy and are never traced, with the reason).

A row whose kind has no runner fails ``test_every_kind_has_a_runner`` (kernels, samplers and models have no stage:
``NO_STAGE_KINDS``). ``python tests/test_catalog_sweep.py --table`` prints the outcome table of ``docs/catalog.md``.
"""
from __future__ import annotations

import functools
import inspect
import re
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rljax
from rljax.envs import ArithmeticTask
from rljax.objectives import chain, ppo_clip
from rljax.objectives._statistics import call_with_statistics
from rljax.recipes._examples import _spec
from rljax.recipes._spec import resolve, slot_of
from rljax.stages import ControlInputs, PromptData, RunFacts, StepData, TaskGradients
from rljax.objectives import preference_pairs
from rljax.types import PolicyOutputs, TrainBatch

CASES = ("empty", "all_padding", "poisoned_padding", "equal_rewards", "single_member", "float64")
T, P = 6, 2  # tokens per row, prompt tokens
NO_STAGE_KINDS = {k: "not a stage of the RL step (no inputs of the loop): covered by its own tests"
                  for k in ("kernel", "sampler", "model")}

# Recipe slots whose stages run on the host between jitted programs, on the StepData's NumPy arrays (rljax/stages/):
# jit-vs-eager applies to the slots that run inside the jitted update (loss terms, critic, aggregation).
HOST_ONLY = {
    "rewards": "a host function of completion text",
    "multi_reward": "a host stage of the step's NumPy arrays (StepData)",
    "shaping": "a host stage of the step's NumPy arrays (StepData)",
    "filters": "a host stage of the step's NumPy arrays (StepData)",
    "prompt_filters": "pre-rollout selection on the host (NumPy state)",
    "replay": "a host buffer of NumPy arrays",
    "advantage": "a host stage of the step's NumPy arrays (StepData)",
    "controllers": "updated on the host after each step (its observations are jitted inside it)",
}

# float64 in -> float64 out is checked on each stage's primary outputs (the loss and per-token loss, an aggregation's
# numerator, a data stage's values); metrics are logged as Python floats. Slots and rows whose primary output is
# float32 by design, with the reason:
F32_BY_DESIGN = {
    "rewards": "a host reward is float32 by the StepData contract (rewards [B] float32)",
    "controllers": "the controller state is float32 arrays (checkpointed; hparams are float32 in state.hparams)",
    "replay": "the buffer stores float32 rows (fixed-shape arrays, checkpointed)",
    "prompt_filters": "outputs are prompt indices and counts (ints); the state is float32 (checkpointed)",
    "grpo_lambda": "its reward is built from 0/1 correctness and integer lengths (no float reward is read)",
}

# Outputs besides the primary ones that must keep float64 (issue #51 error-class sweep: these were float32): an
# aggregation's denominator and every entropy metric (a mean of the float64 entropies). Count-valued metrics (fractions
# of tokens or rows, numbers of valid groups) stay float32 and are not checked.
X64_ALSO = {"/denominator"}

# Slots whose stages read the padded rows' values by design (only their padded *tokens* are poisoned), with the reason
READS_PADDED_ROWS = {
    "prompt_filters": "observe reads every row, masked or not: a row dropped by a filter is still a rollout of its "
                      "prompt (rljax/filters/_stages.py)",
}

# (row, case) -> a regex the ValueError raised must match (it must also name the row)
_EMPTY = r"an empty batch, B = 0, is not supported"
ERROR_BY_DESIGN = {
    ("tempo", "empty"): _EMPTY,
    ("passk", "single_member"): r"k=2 exceeds the valid size \(1\) of group 0",
    ("pilot_commit", "single_member"): r"pilot=2 must be < group_size=1",
}


TASK = ArithmeticTask(digits=1)
PROBLEMS = tuple(TASK._make(a, b) for a, b in ((3, 4), (1, 2), (4, 5), (2, 2)))  # pylint: disable=protected-access


def _layout(case: str) -> tuple:
  """(groups, rows per group). The empty batch keeps ``num_groups=1``: a static segment count is positive (the
  library's default for B = 0 is ``max(B, 1)``, ``rljax._groups.resolve_num``)."""
  return {"empty": (0, 4), "single_member": (12, 1)}.get(case, (3, 4))


def _step(case: str, poison=False) -> StepData:
  """The synthetic step of ``case``: ``G x N`` rows, ragged completions, row 1 of group 0 padding (valid False),
  every need filled. ``poison``: -inf log-probs and NaN token values in the padded positions (``"tokens"``), and
  (``"rows"``) other rewards, correctness, advantages and greedy rewards for the padded rows (what a stage reads
  there must not matter)."""
  g, n = _layout(case)
  b = g * n
  dtype = np.float64 if case == "float64" else np.float32
  rng = np.random.default_rng(0)
  cm = np.zeros((b, T), bool)
  cm[:, P:] = True
  cm[np.arange(b) % 3 == 2, T - 2:] = False
  valid = np.ones(b, bool)
  if case == "all_padding":
    valid[:] = False
  elif b > 1 and n > 1:
    valid[1] = False
  group_id = np.repeat(np.arange(g), n).astype(np.int32)
  rewards = rng.integers(0, 2, b).astype(dtype)
  if n > 1 and b:
    rewards[:n] = [1.0, 0.0, 0.0, 1.0][:n]
  if case == "equal_rewards":
    rewards = (group_id % 2).astype(dtype)
  f = lambda *shape: rng.normal(size=shape).astype(dtype)
  real = cm & valid[:, None]
  k, s = 2, 2
  turn = np.where(cm, (np.arange(T) >= P + 2).astype(np.int32), -1).astype(np.int32)
  step_mask = np.ones((b, s), bool)
  step_mask[np.arange(b) % 3 == 2, 1] = False
  tok = lambda x: np.where(real, x, 0).astype(dtype)
  data = dict(
      tokens=rng.integers(1, 9, (b, T)).astype(np.int32), prompt_mask=~cm, completion_mask=cm, group_id=group_id,
      num_groups=max(g, 1), valid=valid, lengths=cm.sum(1).astype(np.int32),
      completions=tuple(str(i % 9) for i in range(b)),
      problems=tuple(PROBLEMS[int(i) % 4] for i in group_id), prompt_index=group_id.astype(np.int64) + 1,
      rewards=rewards, correct=rewards.copy(), logp_behavior=tok(-np.abs(f(b, T))),
      entropy_behavior=tok(np.abs(f(b, T))), max_new_tokens=T - P, key=jax.random.PRNGKey(0),
      logp_old=tok(-np.abs(f(b, T))), entropy_old=tok(np.abs(f(b, T))), logp_ref=tok(-np.abs(f(b, T))),
      entropy_ref=tok(np.abs(f(b, T))), logp_teacher=tok(-np.abs(f(b, T))), values=tok(f(b, T)),
      greedy_rewards=rng.integers(0, 2, b).astype(dtype), answer_ids=rng.integers(0, 3, b).astype(np.int32),
      task_id=(group_id % 2).astype(np.int32), num_tasks=2,
      reward_components=np.stack([rewards, rng.integers(0, 2, b).astype(dtype)], 1).reshape(b, k),
      reward_names=("r0", "r1"), step_rewards=np.where(step_mask, f(b, s), 0).astype(dtype), step_mask=step_mask,
      reward_segments=turn, turn_ids=turn, turns=tuple(("1",) if i % 2 else ("1", "2") for i in range(b)),
      advantages=f(b), returns=tok(f(b, T)),
      task_gradients=TaskGradients(np.eye(2, dtype=np.float64), np.ones(2, bool)))
  if poison:
    pad = ~real
    for name in ("logp_behavior", "logp_old", "logp_ref", "logp_teacher"):
      data[name] = np.where(pad, -np.inf, data[name]).astype(dtype)
    for name in ("entropy_behavior", "entropy_old", "entropy_ref", "values", "returns"):
      data[name] = np.where(pad, np.nan, data[name]).astype(dtype)
    data["step_rewards"] = np.where(step_mask, data["step_rewards"], np.nan).astype(dtype)
  if poison == "rows":
    for name in ("rewards", "greedy_rewards", "advantages"):
      data[name] = np.where(valid, data[name], 7.0).astype(dtype)
    data["correct"] = np.where(valid, data["correct"], 1 - data["correct"]).astype(dtype)
    data["reward_components"] = np.where(valid[:, None], data["reward_components"], 3.0).astype(dtype)
  return StepData(**data)


def _facts(case: str, **kw) -> RunFacts:
  g, n = _layout(case)
  return RunFacts(num_prompts=max(g, 1), group_size=n, max_new_tokens=T - P, num_dataset_prompts=16, num_tasks=2,
                  seq_len=T, task_ids=tuple(i % 2 for i in range(16)), **kw)


# ----------------------------------------------------------------------------- runners, one per kind of stage


def _batch(data: StepData) -> TrainBatch:
  """``rljax.train._inputs.train_batch`` without the sharding and keeping the float dtype, plus the extras the
  loop adds (DPO pairs, ``entropy_base``, ``logp_teacher``, reward segments)."""
  dtype = data.logp_old.dtype
  loss_mask = data.completion_mask & data.valid[:, None]
  adv = np.where(loss_mask, data.advantages[:, None], 0).astype(dtype)
  extras = {**preference_pairs(data), "entropy_base": data.entropy_ref, "logp_teacher": data.logp_teacher,
            "reward_segments": data.reward_segments}
  return TrainBatch(tokens=data.tokens, loss_mask=loss_mask, advantages=adv, group_id=data.group_id,
                    rewards=data.rewards, logp_behavior=data.logp_behavior, logp_old=data.logp_old,
                    logp_ref=data.logp_ref, entropy_old=data.entropy_old, values_old=data.values,
                    returns=data.returns, turn_ids=data.turn_ids, task_id=data.task_id, extras=extras)


def _outputs(data: StepData) -> PolicyOutputs:
  """The current policy: ``logp_old`` moved a little on real tokens (padding keeps what the step has there)."""
  real = data.completion_mask & data.valid[:, None]
  shift = np.where(real, 0.1 * np.sin(np.arange(data.logp_old.size).reshape(data.logp_old.shape)), 0)
  return PolicyOutputs(logp=(data.logp_old + shift).astype(data.logp_old.dtype),
                       entropy=data.entropy_old, values=data.values)


_RUNS = {}  # id(stage) -> (eager, jitted) runner: cases of equal shapes and dtypes share one compile


def _loss_term(stage, case, data, jit):
  if id(stage) not in _RUNS:
    hparams = {k: jnp.asarray(v, jnp.float32) for k, v in stage.initial_hparams().items()}
    term = stage.build(hparams)
    if stage.role == "correction":
      term = ppo_clip(correction=term)
    objective = chain(term)

    def run(out, batch):
      per_token, _ = call_with_statistics(term, out, batch, None)
      loss, metrics = objective(out, batch)
      return {"primary": {"loss": loss, "per_token": per_token}, "metrics": metrics}

    _RUNS[id(stage)] = (run, jax.jit(run))
  return _RUNS[id(stage)][int(jit)](_outputs(data), _batch(data))


def _aggregation(stage, case, data, jit):
  fn = stage.bind(_facts(case)).fn
  loss = np.where(data.completion_mask & data.valid[:, None], data.values, np.nan if case != "empty" else 0)

  def run(loss, mask):
    num, den = fn(loss, mask)
    return {"primary": {"numerator": num, "loss": num / jnp.maximum(den, 1e-8)}, "denominator": den}

  return (jax.jit(run) if jit else run)(loss.astype(data.values.dtype), data.completion_mask & data.valid[:, None])


def _controller(stage, case, data, jit):
  del jit
  hp = {"kl_beta": 0.01, "clip_low": 0.2, "clip_high": 0.28}
  ctl = stage.bind(_facts(case, hparams=hp))
  batch = _batch(data)
  real = data.completion_mask & data.valid[:, None]
  ent = float(np.sum(np.where(real, data.entropy_behavior, 0)) / max(real.sum(), 1))
  inputs = ControlInputs(batch=batch, data=data, rollout_stats={"entropy": ent}, update_metrics={},
                         policy_logp=lambda: _outputs(data).logp)
  state = ctl.init()
  state, metrics = ctl.update(state, inputs)
  out = {"state": state, "metrics": metrics, "hparams": ctl.hparams(state)}
  if ctl.temperature is not None:
    out["temperature"] = ctl.temperature(state)
  return out


def _data_stage(stage, case, data, jit):
  stage = stage.bind(_facts(case))
  if getattr(stage, "init", None) is not None:  # a stateful advantage
    state = stage.init()
    out = stage.fn(data, state)
  else:
    out = stage.fn(data)
  return {"primary": out[0], "rest": out[1:]}


def _prompt_data(case: str, data: StepData, pilot: int) -> PromptData:
  """The candidates of the next step (one when the batch is empty: a selection always has candidates)."""
  g = max(_layout(case)[0], 1)
  index = np.arange(g, dtype=np.int64) + 1
  pilot_data = None
  if pilot:
    full = _step("equal_rewards" if case == "empty" else case)
    pilot_data = full.take(np.concatenate([np.flatnonzero(full.group_id == p)[:pilot] for p in range(g)]))
  return PromptData(problems=tuple(PROBLEMS[i % 4] for i in range(g)), index=index, num_dataset_prompts=16,
                    pilot=pilot_data)


def _prompt_filter(stage, case, data, jit):
  del jit
  stage = stage.bind(_facts(case))
  state = stage.init(16)
  prompts = _prompt_data(case, data, stage.pilot)
  key = jax.random.PRNGKey(1)
  out = {}
  if stage.observe is not None:
    state, out["observe"] = stage.observe(state, data)
  if stage.select is not None:
    out["select"] = stage.select(state, prompts, key)
  if stage.draw is not None:
    out["draw"] = stage.draw(state, prompts, key)
  return out


def _replay(stage, case, data, jit):
  del jit
  stage = stage.bind(_facts(case))
  state = stage.init()
  out = {}
  g, n = _layout(case)
  if stage.prompts is not None:
    out["prompts"] = stage.prompts(state, np.arange(max(g, 1), dtype=np.int64) + 1, jax.random.PRNGKey(1))
  if stage.hints is not None:
    out["hints"] = stage.hints(data, n, str.strip)
  first, state, out["metrics0"] = stage.fn(data, state)
  second, state, out["metrics1"] = stage.fn(data, state)  # the stored rows replayed
  for i, d in enumerate((first, second)):
    out[f"data{i}"] = {k: getattr(d, k) for k in ("rewards", "correct", "advantages", "logp_behavior", "valid")}
    out[f"data{i}"]["extras"] = dict(d.extras)
  return out


def _reward(stage, case, data, jit):
  del jit
  return {"rewards": np.asarray(stage.fn(list(data.completions), list(data.problems)))}


RUNNERS = {
    "loss": _loss_term, "critic": _loss_term, "aggregation": _aggregation, "controllers": _controller,
    "advantage": _data_stage, "multi_reward": _data_stage, "shaping": _data_stage, "filters": _data_stage,
    "prompt_filters": _prompt_filter, "replay": _replay, "rewards": _reward,
}


# ----------------------------------------------------------------------------- checks


def _leaves(tree, prefix=""):
  """``{path: leaf}`` of a nested output (dicts, tuples, lists, NamedTuples)."""
  if isinstance(tree, dict):
    items = tree.items()
  elif isinstance(tree, (tuple, list)):
    items = enumerate(tree)
  elif hasattr(tree, "_asdict"):
    items = tree._asdict().items()
  else:
    return {prefix: tree}
  out = {}
  for k, v in items:
    out.update(_leaves(v, f"{prefix}/{k}"))
  return out


def _real(x, data: StepData):
  """The real positions of an output ``x``: valid rows of a ``[B, ...]`` array (completion tokens of valid rows of
  a ``[B, T]`` one); everything for other shapes."""
  x = np.asarray(x)
  b = data.batch_size
  if x.ndim >= 1 and x.shape[0] == b and b > 0:
    if x.ndim == 2 and x.shape[1] == T:
      return x[data.completion_mask & data.valid[:, None]]
    return x[data.valid]
  return x


def _is_array(x) -> bool:
  return isinstance(x, (np.ndarray, np.generic, jax.Array, float, int, bool))


@functools.lru_cache(maxsize=None)
def _stage(name: str):
  """The row's stage, built once (a built stage is immutable; its state, if any, comes from ``init()``)."""
  return resolve(_spec(name), slot_of(ROWS[name]))[0]


def run(name: str, case: str, poison: bool, jit: bool = False):
  row = ROWS[name]
  slot = slot_of(row)
  stage = _stage(name)
  data = _step(case, poison and ("tokens" if slot in READS_PADDED_ROWS else "rows"))
  if case == "float64":
    with jax.enable_x64(True):
      return _leaves(RUNNERS[slot](stage, case, data, jit)), data
  return _leaves(RUNNERS[slot](stage, case, data, jit)), data


def _f32_reason(name: str):
  return F32_BY_DESIGN.get(name) or F32_BY_DESIGN.get(slot_of(ROWS[name]))


def check(name: str, case: str) -> str:
  """Runs the checks of (``name``, ``case``); returns ``"pass"``, ``"error"`` (a ValueError by design) or
  ``"allowed"`` (float64 case of a row whose primary output is float32 by design)."""
  expected = ERROR_BY_DESIGN.get((name, case))
  try:
    clean, data = run(name, case, poison=False)
  except ValueError as e:
    if expected and re.search(expected, str(e)) and name in str(e):
      return "error"
    raise
  assert expected is None, f"{name}/{case}: expected a ValueError matching {expected!r}"
  poisoned, pdata = run(name, case, poison=True)
  assert clean.keys() == poisoned.keys(), f"{name}/{case}: outputs differ in structure"
  f32 = case == "float64" and _f32_reason(name)
  for k, v in clean.items():
    if not _is_array(v):
      assert v == poisoned[k] or v is poisoned[k], f"{name}/{case}: {k} changed with the padding"
      continue
    a, p = np.asarray(v), np.asarray(poisoned[k])
    if np.issubdtype(a.dtype, np.floating):
      ok = np.isfinite if k.startswith("/primary") else lambda x: ~np.isnan(x)  # a metric may be +-inf ("none")
      assert np.all(ok(a)), f"{name}/{case}: {k} is not finite: {a}"
      assert np.all(ok(_real(p, pdata))), f"{name}/{case}: {k} is not finite with poisoned padding: {p}"
      if case == "float64" and not f32 and (k.startswith("/primary") or k in X64_ALSO or k.endswith("/entropy")):
        assert a.dtype == np.float64, f"{name}/{case}: {k} is {a.dtype} under float64 inputs"
    np.testing.assert_array_equal(_real(a, data), _real(p, pdata), err_msg=f"{name}/{case}: padding leaks into {k}")
  if slot_of(ROWS[name]) not in HOST_ONLY:
    jitted, _ = run(name, case, poison=True, jit=True)
    for k, v in poisoned.items():
      if _is_array(v):
        np.testing.assert_allclose(_real(jitted[k], pdata), _real(v, pdata), rtol=1e-5, atol=1e-6,
                                   err_msg=f"{name}/{case}: jit differs from eager in {k}")
  return "allowed" if f32 else "pass"


ROWS = {r.name: r for r in rljax.catalog()}
NAMES = [r.name for r in rljax.catalog() if r.kind not in NO_STAGE_KINDS]


def test_every_kind_has_a_runner():
  missing = [(r.name, r.kind) for r in rljax.catalog()
             if r.kind not in NO_STAGE_KINDS and (r.stage is None or slot_of(r) not in RUNNERS)]
  assert not missing, f"catalog rows whose kind has no input builder in tests/test_catalog_sweep.py: {missing}"


def test_the_lists_name_catalog_rows():
  for (name, case) in ERROR_BY_DESIGN:
    assert name in ROWS and case in CASES, (name, case)
  assert all(k in ROWS or k in RUNNERS for k in F32_BY_DESIGN) and all(k in RUNNERS for k in HOST_ONLY)


def _params():
  for name in NAMES:
    for case in CASES:
      yield pytest.param(name, case, id=f"{name}-{case}")


@pytest.mark.parametrize("name,case", list(_params()))
def test_sweep(name, case):
  check(name, case)


def table() -> str:
  """The outcome table of ``docs/catalog.md``: rows x cases (pass / error by design / allow-listed)."""
  label = {"pass": "pass", "error": "error by design", "allowed": "allow-listed (float32)"}
  lines = ["| row | kind | " + " | ".join(CASES) + " | jit = eager |", "|" + "---|" * (len(CASES) + 3)]
  for name in NAMES:
    cells = []
    for case in CASES:
      try:
        cells.append(label[check(name, case)])
      except Exception:  # pylint: disable=broad-except
        cells.append("FAIL")
    jit = "host stage" if slot_of(ROWS[name]) in HOST_ONLY else "checked"
    lines.append(f"| `{name}` | {ROWS[name].kind} | " + " | ".join(cells) + f" | {jit} |")
  return "\n".join(lines)


if __name__ == "__main__":
  if sys.argv[1:] == ["--table"]:
    print(table())
    sys.exit(0)
  for n in NAMES:
    for c in CASES:
      t0 = time.time()
      try:
        r = check(n, c)
        print(n, c, "ok", f"{time.time() - t0:.2f}", r)
      except Exception as e:  # pylint: disable=broad-except
        print(n, c, "FAIL", f"{time.time() - t0:.2f}", type(e).__name__, str(e)[:300].replace("\n", " "))


# ----------------------------------------------------------------------------------------------------------------
# The cases an independent audit hit (issue #51), on each row's function called directly (the loop always passes
# ``num_groups`` and the stage's own ``eps``): an empty batch without ``num_groups``, and ``eps=0`` on groups of equal
# rewards. Either a number (no NaN anywhere in the result) or a ValueError naming the technique.

_INT_ARGS = {"group_id", "answer_id", "cluster_id", "task_id", "segment_ids", "turn_ids", "outcome", "tokens"}
_BOOL_ARGS = {"mask", "turn_valid", "passed", "correct"}
_TOKEN_ARGS = {"tokens", "mask", "logp", "logp_ref", "turn_ids", "turn_rewards", "signal", "segment_ids",
               "turn_valid"}
_SCALAR_ARGS = {"k": 2, "inter_coef": 0.5, "intra_coef": 0.5}
_RANK2_REWARDS = {"segment", "gdpo", "dara", "sa_mrpo", "gd2po"}  # rewards [B, T] or [B, K]


def _direct_args(row, b: int) -> dict:
  """The required arguments of ``row.fn`` for ``b`` rows: ids 0,0,1,1,... (ints), masks True, floats 1."""
  out = {}
  for p in inspect.signature(row.fn).parameters.values():
    if p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
      continue
    name = p.name
    if name in _SCALAR_ARGS:
      out[name] = _SCALAR_ARGS[name]
      continue
    token = name in _TOKEN_ARGS or (name == "rewards" and row.name in _RANK2_REWARDS)
    shape = (b, T) if token else (b,)
    if name in _INT_ARGS:
      ids = (np.arange(b) // 2).astype(np.int32)
      out[name] = np.broadcast_to(ids[:, None], shape).copy() if token else ids
    elif name in _BOOL_ARGS:
      out[name] = np.ones(shape, bool)
    else:
      out[name] = np.ones(shape, np.float32)
  return out


def _params_of(row) -> dict:
  try:
    return dict(inspect.signature(row.fn).parameters)
  except (TypeError, ValueError):
    return {}


EMPTY_NO_NUM_GROUPS = [r.name for r in rljax.catalog()
                       if "num_groups" in _params_of(r) and _params_of(r)["num_groups"].default is None]
EPS_ZERO = [r.name for r in rljax.catalog()
            if "eps" in _params_of(r) and ({"group_id", "task_id"} & set(_params_of(r)))]


def _no_nan(name: str, case: str, result) -> None:
  for path, leaf in _leaves(result).items():
    if _is_array(leaf) and np.issubdtype(np.asarray(leaf).dtype, np.floating):
      assert not np.any(np.isnan(np.asarray(leaf))), f"{name}/{case}: NaN in {path}: {leaf}"


def _direct(name: str, case: str, **kw):
  row = ROWS[name]
  try:
    return row.fn(**kw)
  except ValueError as e:
    assert name in str(e) or name.replace("_", "-") in str(e), f"{name}/{case}: a ValueError not naming it: {e}"
    return None


def test_the_audit_lists_hold_the_rows_it_named():
  assert {"qae", "passk", "rank", "grpo"} <= set(EMPTY_NO_NUM_GROUPS)
  assert {"qae", "grpo", "vote"} <= set(EPS_ZERO)


@pytest.mark.parametrize("name", EMPTY_NO_NUM_GROUPS)
def test_empty_batch_without_num_groups(name):
  result = _direct(name, "empty_no_num_groups", **_direct_args(ROWS[name], 0))
  if result is not None:
    _no_nan(name, "empty_no_num_groups", result)


@pytest.mark.parametrize("name", EPS_ZERO)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_eps_zero_on_equal_rewards(name, jit):
  args = _direct_args(ROWS[name], 4)
  fn = lambda **kw: ROWS[name].fn(**kw, eps=0.0)
  if jit:
    arrays = {k: v for k, v in args.items() if isinstance(v, np.ndarray)}
    rest = {k: v for k, v in args.items() if k not in arrays}
    try:
      result = jax.jit(lambda a: fn(**a, **rest))(arrays)
    except ValueError as e:
      assert name in str(e), f"{name}/eps_zero: a ValueError not naming it: {e}"
      return
    except jax.errors.ConcretizationTypeError:
      pytest.skip(f"{name} needs concrete inputs (a host stage)")
  else:
    result = _direct(name, "eps_zero", **args, eps=0.0)
    if result is None:
      return
  _no_nan(name, "eps_zero", result)
