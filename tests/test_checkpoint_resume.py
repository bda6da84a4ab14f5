"""SIGKILL + --resume gives bitwise the same parameters as an uninterrupted run; SIGTERM saves first."""
import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

ARGS = ["--config", "tiny", "--set", "rl.steps=6", "--set", "checkpoint.every=2", "--set", "eval.every=0",
        "--set", "sft.steps=4"]


def _cmd(out, *extra):
  return [sys.executable, "-m", "rljax.cli", "train", "--out-dir", out, *ARGS, *extra]


def _env():
  env = dict(os.environ)
  env.pop("XLA_FLAGS", None)  # one CPU device, as a user run
  env["JAX_PLATFORMS"] = "cpu"
  return env


def _params(out):
  from rljax.train import load_run
  _, _, state, info = load_run(out, stage="rl")
  return info["step"], [np.asarray(x) for x in jax.tree_util.tree_leaves(state.params)]


def _wait_for(path, proc, timeout=900):
  t0 = time.time()
  while not os.path.exists(path):
    if proc.poll() is not None:
      raise AssertionError(f"run exited early with code {proc.returncode}")
    if time.time() - t0 > timeout:
      raise AssertionError(f"timed out waiting for {path}")
    time.sleep(0.05)


@pytest.mark.long
def test_sigkill_then_resume_is_bitwise_identical(tmp_path):
  full, killed = str(tmp_path / "full"), str(tmp_path / "killed")
  ref = subprocess.Popen(_cmd(full), env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  proc = subprocess.Popen(_cmd(killed), env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
  _wait_for(os.path.join(killed, "checkpoints", "rl", "2", "commit_success.txt"), proc)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  assert ref.wait() == 0
  steps = sorted(int(s) for s in os.listdir(os.path.join(killed, "checkpoints", "rl")) if s.isdigit())
  assert steps and max(steps) < 6, f"the kill came too late to test anything: {steps}"
  res = subprocess.run(_cmd(killed, "--resume"), env=_env(), capture_output=True, text=True)
  assert res.returncode == 0, res.stderr[-2000:]
  assert "resumed RL from step" in res.stdout
  s_full, p_full = _params(full)
  s_res, p_res = _params(killed)
  assert s_full == s_res == 6
  for a, b in zip(p_full, p_res):
    np.testing.assert_array_equal(a, b)


def test_sigterm_saves_a_checkpoint_and_exits_143(tmp_path):
  out = str(tmp_path / "term")
  proc = subprocess.Popen(_cmd(out, "--set", "rl.steps=1000", "--set", "checkpoint.every=1000"), env=_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  _wait_for(os.path.join(out, "checkpoints", "sft", "4", "commit_success.txt"), proc)
  time.sleep(1.0)
  proc.send_signal(signal.SIGTERM)
  _, err = proc.communicate(timeout=600)
  assert proc.returncode == 143, err[-2000:]
  assert "SIGTERM: saved" in err
  rl_dir = os.path.join(out, "checkpoints", "rl")
  if "RL checkpoint" in err:
    assert os.listdir(rl_dir)


def test_resume_without_checkpoints_is_a_clear_error(tmp_path):
  res = subprocess.run(_cmd(str(tmp_path / "none"), "--resume"), env=_env(), capture_output=True, text=True)
  assert res.returncode == 2 and "does not exist" in res.stderr, res.stderr
  assert not os.path.exists(tmp_path / "none")  # and it is not created
