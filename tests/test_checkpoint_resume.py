"""SIGKILL + --resume gives bitwise the same parameters as an uninterrupted run; SIGTERM and Ctrl-C save first
(exit 143 / 130, one line with the resume command); a second Ctrl-C stops at once; resume clears partial saves."""
import os
import re
import shlex
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


@pytest.mark.long
def test_sigterm_saves_a_checkpoint_and_exits_143(tmp_path):
  out = str(tmp_path / "term")
  proc = subprocess.Popen(_cmd(out, "--set", "sft.steps=100000"), env=_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
  _wait_for(os.path.join(out, "checkpoints", "sft", "2", "commit_success.txt"), proc)  # during SFT
  proc.send_signal(signal.SIGTERM)
  _, err = proc.communicate(timeout=600)
  assert proc.returncode == 143, err[-2000:]
  m = re.fullmatch(r"\[rljax\] SIGTERM: saved SFT checkpoint at step (\d+); resume with: rljax train --resume "
                   r"--out-dir (.*)", err.strip())
  assert m and m.group(2) == out, err[-2000:]
  assert os.path.exists(os.path.join(out, "checkpoints", "sft", m.group(1), "commit_success.txt"))


def _partial_saves(out):
  return [os.path.join(d, n) for d, dirs, _ in os.walk(out) for n in dirs if "orbax-checkpoint-tmp" in n]


@pytest.mark.long
@pytest.mark.usefixtures("ctrl_c_enabled")
def test_sigint_saves_a_checkpoint_and_exits_130(tmp_path):
  out = str(tmp_path / "int")
  proc = subprocess.Popen(_cmd(out, "--set", "rl.steps=1000", "--set", "checkpoint.every=1000"), env=_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  for line in proc.stdout:  # Ctrl-C once RL has trained 2 steps
    if line.startswith("[rljax] RL step 2/"):
      break
  proc.send_signal(signal.SIGINT)
  _, err = proc.communicate(timeout=600)
  assert proc.returncode == 130, err[-2000:]
  said = [l for l in err.splitlines() if l.startswith("[rljax]")]
  assert len(said) == 1 and "Traceback" not in err, err[-2000:]
  m = re.fullmatch(r"\[rljax\] Ctrl-C: saved RL checkpoint at step (\d+); resume with: (rljax train .*)", said[0])
  assert m, said
  step, resume = int(m.group(1)), shlex.split(m.group(2))
  assert resume == ["rljax", "train", "--resume", "--out-dir", out]
  assert os.listdir(os.path.join(out, "checkpoints", "rl")) == [str(step)] and not _partial_saves(out)
  # what a second Ctrl-C during a save leaves: the resume removes it, with a notice
  os.makedirs(os.path.join(out, "checkpoints", "rl", f"{step + 1}.orbax-checkpoint-tmp-1733360000", "state"))
  res = subprocess.run([sys.executable, "-m", "rljax.cli", *resume[1:], "--set", f"rl.steps={step + 2}"], env=_env(),
                       capture_output=True, text=True)
  assert res.returncode == 0, res.stderr[-2000:]
  assert f"resumed RL from step {step}" in res.stdout
  assert f"removed checkpoints/rl/{step + 1}.orbax-checkpoint-tmp-1733360000" in res.stdout
  assert sorted(map(int, os.listdir(os.path.join(out, "checkpoints", "rl"))))[-1] == step + 2
  assert not _partial_saves(out)


# Ctrl-C from another thread while the start-up builds the model (XLA compiles its initialisers)
_CTRL_C_AT_START_UP = """
import os, signal, sys, threading
import rljax.train._run as run
build = run.build_experiment
def build_with_ctrl_c(cfg):
  threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
  return build(cfg)
run.build_experiment = build_with_ctrl_c
from rljax.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.long  # ~10 s on 2 cores (a subprocess that compiles): the fast loop's budget
@pytest.mark.usefixtures("ctrl_c_enabled")
def test_sigint_during_start_up_exits_130_without_a_traceback(tmp_path):
  out = str(tmp_path / "early")
  res = subprocess.run([sys.executable, "-c", _CTRL_C_AT_START_UP, *_cmd(out)[3:]], env=_env(), capture_output=True,
                       text=True, timeout=600)
  assert res.returncode == 130, res.stderr[-2000:]
  assert res.stderr.strip() == "[rljax] Ctrl-C: stopped during the start-up checks: nothing written", res.stderr
  assert not os.path.exists(out)


# a second Ctrl-C from another thread as the RL checkpoint of the first one starts being written
_SECOND_CTRL_C_IN_THE_SAVE = """
import os, signal, sys, threading
import orbax.checkpoint as ocp
save = ocp.CheckpointManager.save
def save_with_ctrl_c(self, *args, **kwargs):
  if str(self.directory).endswith("rl"):
    threading.Timer(0.0, os.kill, (os.getpid(), signal.SIGINT)).start()
  return save(self, *args, **kwargs)
ocp.CheckpointManager.save = save_with_ctrl_c
from rljax.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.long
@pytest.mark.usefixtures("ctrl_c_enabled")
def test_a_second_sigint_stops_at_once_and_resume_clears_the_partial_save(tmp_path):
  out = str(tmp_path / "twice")
  cmd = [sys.executable, "-c", _SECOND_CTRL_C_IN_THE_SAVE,
         *_cmd(out, "--set", "rl.steps=1000", "--set", "checkpoint.every=1000")[3:]]
  proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  for line in proc.stdout:  # the first Ctrl-C once RL has trained 2 steps; the second in the save it asks for
    if line.startswith("[rljax] RL step 2/"):
      break
  proc.send_signal(signal.SIGINT)
  _, err = proc.communicate(timeout=600)
  assert proc.returncode == 130, err[-2000:]
  assert err.strip() == f"[rljax] Ctrl-C again: stopped at once, without saving; resume with: rljax train --resume " \
                        f"--out-dir {out}", err[-3000:]  # no orbax traceback from its writer threads
  left = _partial_saves(out)  # the save cut short (none if the second Ctrl-C came before orbax's first write)
  res = subprocess.run(_cmd(out, "--resume", "--set", "rl.steps=4"), env=_env(), capture_output=True, text=True)
  assert res.returncode == 0, res.stderr[-2000:]
  assert not _partial_saves(out)
  if left:
    assert "removed checkpoints/rl/" in res.stdout
  assert "4" in os.listdir(os.path.join(out, "checkpoints", "rl"))


def test_resume_without_checkpoints_is_a_clear_error(tmp_path):
  res = subprocess.run(_cmd(str(tmp_path / "none"), "--resume"), env=_env(), capture_output=True, text=True)
  assert res.returncode == 2 and "does not exist" in res.stderr, res.stderr
  assert not os.path.exists(tmp_path / "none")  # and it is not created
