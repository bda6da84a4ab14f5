"""Stopping on SIGTERM / Ctrl-C (``rljax.train._signals``): the flag, a second Ctrl-C, restored handlers; the
partial saves a hard stop leaves (``remove_partial_saves``); a Python caller of ``train`` gets ``Preempted``.
The command line's behaviour (exit 130, the resume line) is tested in test_checkpoint_resume.py."""
import os
import signal
import threading

import pytest

from rljax.train._checkpoint import remove_partial_saves
from rljax.train._signals import Preempted, preempted, stop_flag, stop_note


def _handlers():
  return {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}


@pytest.mark.usefixtures("ctrl_c_enabled")
def test_first_ctrl_c_sets_the_flag_a_second_raises_and_the_handlers_come_back():
  before = _handlers()
  with stop_flag() as flag:
    assert not flag["set"]
    signal.raise_signal(signal.SIGINT)  # handled before raise_signal returns
    assert flag == {"set": True, "signal": signal.SIGINT}
    signal.raise_signal(signal.SIGTERM)  # a later SIGTERM changes nothing
    assert flag["signal"] == signal.SIGINT
    with pytest.raises(KeyboardInterrupt, match="Ctrl-C again"):
      signal.raise_signal(signal.SIGINT)
    assert _handlers() == before  # restored by the second Ctrl-C already
  assert _handlers() == before


@pytest.mark.usefixtures("ctrl_c_enabled")
def test_sigterm_sets_the_flag_then_ctrl_c_stops_at_once():
  before = _handlers()
  with stop_flag() as flag:
    signal.raise_signal(signal.SIGTERM)
    signal.raise_signal(signal.SIGTERM)  # the save is under way: ignored
    assert flag == {"set": True, "signal": signal.SIGTERM}
    with pytest.raises(KeyboardInterrupt):
      signal.raise_signal(signal.SIGINT)
  assert _handlers() == before


def test_handlers_restored_without_a_signal_or_after_an_error():
  before = _handlers()
  with pytest.raises(ValueError):
    with stop_flag():
      assert _handlers() != before
      raise ValueError("boom")
  assert _handlers() == before


def test_an_ignored_sigint_stays_ignored():
  previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
  try:
    with stop_flag() as flag:
      assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
      signal.raise_signal(signal.SIGINT)
      assert not flag["set"]
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
  finally:
    signal.signal(signal.SIGINT, previous)


def test_outside_the_main_thread_no_handler_is_installed():
  before, seen = _handlers(), {}

  def body():
    with stop_flag() as flag:
      seen["handlers"], seen["flag"] = _handlers(), dict(flag)

  t = threading.Thread(target=body)
  t.start()
  t.join()
  assert seen == {"handlers": before, "flag": {"set": False, "signal": None}}


def test_preempted_names_the_signal_and_its_exit_code():
  e = preempted({"set": True, "signal": signal.SIGINT}, stop_note("RL", 3, True))
  assert isinstance(e, Preempted) and str(e) == "Ctrl-C: saved RL checkpoint at step 3"
  assert e.signal == signal.SIGINT and e.exit_code == 130
  e = preempted({"set": True, "signal": None}, stop_note("SFT", 2, False))  # another process got the signal
  assert str(e) == "SIGTERM: stopped at SFT step 2 (checkpoint.enabled=false: nothing saved)"
  assert e.exit_code == 143


def test_remove_partial_saves(tmp_path):
  for name in ("2", "4", "6.orbax-checkpoint-tmp", "8.orbax-checkpoint-tmp-1733360000"):
    os.makedirs(tmp_path / name / "state.orbax-checkpoint-tmp")
  assert remove_partial_saves(str(tmp_path)) == ["6.orbax-checkpoint-tmp", "8.orbax-checkpoint-tmp-1733360000"]
  assert sorted(os.listdir(tmp_path)) == ["2", "4"]
  assert remove_partial_saves(str(tmp_path / "missing")) == []


@pytest.mark.long
@pytest.mark.usefixtures("ctrl_c_enabled")
def test_python_caller_gets_preempted_on_ctrl_c_at_start_up_and_keeps_its_handler(tmp_path):
  from _rewards import dense_reward  # pylint: disable=import-outside-toplevel
  from rljax.train import apply_overrides, tiny_config, train  # pylint: disable=import-outside-toplevel
  calls = []

  def reward(completions, problems):  # the first call: the start-up's recipe check, before anything is written
    calls.append(None)
    if len(calls) == 1:
      os.kill(os.getpid(), signal.SIGINT)
    return dense_reward(completions, problems)

  before = _handlers()
  cfg = apply_overrides(tiny_config(str(tmp_path / "run")), ["rl.steps=2", "sft.steps=2"])
  with pytest.raises(Preempted, match="^Ctrl-C: stopped during the start-up checks: nothing written$") as err:
    train(cfg, reward_fn=reward)
  assert err.value.signal == signal.SIGINT and err.value.exit_code == 130
  assert _handlers() == before
  assert not os.path.exists(tmp_path / "run")
