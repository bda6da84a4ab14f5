"""The RL stage's runners (issue #34 item 2): one ``Runner`` protocol, chosen in one place (``make_runner``).

The runners' behaviour is tested where it lives: ``test_rollout_ahead.py`` (one-step off-policy),
``test_async.py`` (the asynchronous runner, bit-for-bit equal to the synchronous loop at eta 0),
``test_multiproc_async.py`` (across processes); here only the choice and the protocol."""
import types

from rljax.train._async import AsyncRunner
from rljax.train._multiproc_async import _Trainer
from rljax.train._runners import AheadRunner, Runner, SyncRunner, make_runner


def _loop(**rl):
  return types.SimpleNamespace(rl=types.SimpleNamespace(**{"async_staleness": None, "rollout_ahead": False,
                                                           "steps": 3, **rl}))


def test_make_runner_picks_the_configured_runner():
  assert type(make_runner(_loop())) is SyncRunner
  ahead = make_runner(_loop(rollout_ahead=True))
  try:
    assert type(ahead) is AheadRunner and ahead.stop_at == 3
  finally:
    ahead.close()
  for runner in (SyncRunner, AheadRunner, AsyncRunner, _Trainer):  # _Trainer: the multi-process training side
    assert issubclass(runner, Runner), runner  # next, after_step, stop_requested, close


def test_the_sync_runner_samples_with_the_current_state():
  calls = []
  loop = _loop()
  loop.state = types.SimpleNamespace(params="P", model_state="M")
  loop.controllers = types.SimpleNamespace(temperature=lambda ctl: ("T", ctl))
  loop.ctl_state = "C"
  loop.stage_states = {"prompt_filters": {"pf": 1}}
  loop.loader = types.SimpleNamespace(get_state=lambda: "after step s")
  loop.sample = lambda *args: calls.append(args) or "batch"
  runner = SyncRunner(loop)
  assert runner.next(4) == ("batch", "after step s", {})
  assert calls == [(4, "P", "M", ("T", "C"), {"pf": 1}, None)]
  row = {"x": 1.0}
  runner.after_step(4, row)
  assert row == {"x": 1.0}
  assert runner.stop_requested({"set": False}) is False and runner.stop_requested({"set": True}) is True
