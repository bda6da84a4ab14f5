"""Issue #52's small items: user-facing field names in errors, ``eval --step`` lists the steps there are, exported
safetensors get the mode other files get, a plot and the whole run's ``wall_s`` after Ctrl-C and a resume, plot
panels chosen from what the run measures, a small held-out split said with its size."""
import json
import os
import signal
import stat
import time

import numpy as np
import pytest

from rljax import cli
from rljax.train import apply_overrides, tiny_config


def _umask_mode() -> int:
  umask = os.umask(0)
  os.umask(umask)
  return 0o666 & ~umask  # what open() gives a new file


def test_a_missing_checkpoint_is_named_model_hf_checkpoint_and_nothing_is_written(tmp_path, capsys):
  out = tmp_path / "run"
  assert cli.main(["train", "--config", "tiny", "--out-dir", str(out), "--set",
                   f"model.hf_checkpoint={tmp_path / 'no_such_model'}"]) == 2
  err = capsys.readouterr().err
  assert f"model.hf_checkpoint '{tmp_path / 'no_such_model'}' does not exist" in err, err
  assert "model_path" not in err and not out.exists()


@pytest.mark.parametrize("kind", ["directory named .gguf", "file not .gguf"])
def test_a_checkpoint_that_is_neither_a_gguf_file_nor_a_directory_is_named_and_nothing_is_written(tmp_path, capsys,
                                                                                                  kind):
  if kind == "directory named .gguf":
    path, what = tmp_path / "x.gguf", "a directory whose name ends in .gguf"
    path.mkdir()
  else:
    path, what = tmp_path / "model.bin", "a file whose name does not end in .gguf"
    path.write_bytes(b"not a checkpoint")
  before = sorted(os.listdir(tmp_path))
  out = tmp_path / "run"
  assert cli.main(["train", "--config", "tiny", "--out-dir", str(out), "--set", f"model.hf_checkpoint={path}"]) == 2
  err = capsys.readouterr().err
  assert f"model.hf_checkpoint '{path}' is not a .gguf file or a checkpoint directory ({what})" in err, err
  assert "gguf_path" not in err and "no config.json" not in err
  assert sorted(os.listdir(tmp_path)) == before


def test_a_misspelled_relative_path_reads_as_a_hub_id_and_the_refusal_says_so(tmp_path, capsys, monkeypatch):
  monkeypatch.chdir(tmp_path)
  monkeypatch.setenv("HF_HUB_OFFLINE", "1")
  monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
  (tmp_path / "runs").mkdir()  # the user's runs/ folder holds no "model"
  assert cli.main(["train", "--config", "tiny", "--out-dir", str(tmp_path / "run"), "--set",
                   "model.hf_checkpoint=runs/model"]) == 2
  err = capsys.readouterr().err
  assert "model.hf_checkpoint='runs/model' (a Hub id, or a local path that does not exist) is not in the" in err, err
  assert sorted(os.listdir(tmp_path)) == ["runs"]  # no run directory, no cache entry


def test_a_missing_tfds_directory_is_named_task_tfds_dir_and_nothing_is_written(tmp_path, capsys):
  out = tmp_path / "run"
  assert cli.main(["train", "--config", "tiny", "--out-dir", str(out), "--set", "task.name=gsm8k", "--set",
                   f"task.tfds_dir={tmp_path / 'no_such_dir'}"]) == 2
  err = capsys.readouterr().err
  assert f"task.tfds_dir '{tmp_path / 'no_such_dir'}' does not exist" in err, err
  assert "data_dir '" not in err and not out.exists()


def test_exported_safetensors_have_the_mode_open_gives(tmp_path):
  from flax import nnx
  from rljax.models import LoRAConfig, ModelConfig, Transformer, save_lora_adapter, save_pretrained
  model = Transformer(ModelConfig.tiny(lora=LoRAConfig(rank=2, alpha=4.0, targets=("q",))), rngs=nnx.Rngs(0))
  save_pretrained(model, str(tmp_path / "full"))
  save_lora_adapter(model, str(tmp_path / "adapter"))
  want = _umask_mode()
  for path in (tmp_path / "full" / "model.safetensors", tmp_path / "full" / "config.json",
               tmp_path / "adapter" / "adapter_model.safetensors", tmp_path / "adapter" / "adapter_config.json"):
    assert stat.S_IMODE(os.stat(path).st_mode) == want, (path, oct(os.stat(path).st_mode))
  assert want != 0o600  # the test's umask (022 as usual) tells safetensors' own 0600 apart


def test_plot_panels_are_what_the_run_measures():
  from rljax.train import plot_panels
  rows = [{"stage": "rl", "step": s, "rollout/reward_mean": 0.0, "eval/greedy_accuracy": 0.1 * s,
           "eval/greedy_format": 0.5, "policy/entropy": 1.0, "policy/kl": 0.0, "policy/clip_frac": 0.0,
           "loss": 0.3} for s in range(3)]
  # one update per batch, no KL term: no flat-zero KL or clip-fraction panel; the task's format rate is drawn;
  # a reward of 0 throughout is still drawn (a run that learns nothing)
  assert plot_panels(rows) == [("reward", "rollout/reward_mean"), ("held-out accuracy", "eval/greedy_accuracy"),
                               ("held-out format", "eval/greedy_format"), ("entropy", "policy/entropy"),
                               ("loss", "loss")]
  rows[1].update({"policy/kl": 1e-4, "policy/clip_frac": 0.25, "kl/kl": 2e-3})  # two updates, a KL penalty
  del rows[0]["eval/greedy_format"], rows[1]["eval/greedy_format"], rows[2]["eval/greedy_format"]
  assert [t for t, _ in plot_panels(rows)] == ["reward", "held-out accuracy", "entropy", "KL to the reference",
                                               "KL(old || new)", "clip fraction", "loss"]
  assert plot_panels([{"stage": "rl", "step": 0, "rollout/entropy": 0.7}]) == [("entropy", "rollout/entropy")]


def test_plot_draws_one_axis_per_panel(tmp_path, monkeypatch):
  from matplotlib.figure import Figure
  from rljax.train import plot_metrics
  path = tmp_path / "m.jsonl"
  with open(path, "w", encoding="utf-8") as f:
    for s in range(1, 4):
      f.write(json.dumps({"stage": "rl", "step": s, "rollout/reward_mean": 0.1 * s, "policy/kl": 0.0,
                          "kl/kl": 0.01 * s, "loss": 1.0 / s}) + "\n")
  titles = []
  save = Figure.savefig
  monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: (titles.extend(
      ax.get_title() for ax in fig.axes if ax.axison), save(fig, *a, **k))[1])
  plot_metrics(str(path), str(tmp_path / "m.png"))
  assert titles == ["reward", "KL to the reference", "loss"]


def test_a_small_held_out_split_is_a_warning_with_its_size(tmp_path, capsys, monkeypatch):
  from rljax.train._run import held_out_warning
  data = tmp_path / "d.jsonl"
  with open(data, "w", encoding="utf-8") as f:
    for i in range(20):
      f.write(json.dumps({"prompt": f"{i}+1=", "answer": str(i + 1)}) + "\n")
  cfg = apply_overrides(tiny_config(str(tmp_path / "run")), [
      "task.name=jsonl", f"task.path={data}", "task.verifier=exact_match", "task.eval_fraction=0.3",
      "task.num_test=500"])
  line = held_out_warning(cfg, 6)
  assert line.startswith("[rljax] warning: the held-out split has only 6 problems (task.eval_fraction=0.3 of "
                         "task.path)"), line
  assert "16.7 points" in line
  assert held_out_warning(cfg, 50) is None  # 50 or more: no warning
  assert held_out_warning(apply_overrides(cfg, ["task.num_test=6"]), 6) is None  # as many as asked for
  assert held_out_warning(apply_overrides(cfg, [f"task.eval_path={data}"]), 3).startswith(
      f"[rljax] warning: the held-out split has only 3 problems (task.eval_path '{data}')")
  import rljax.train._run as run  # the run prints it with the split the data gave, then stops (nothing to train)

  class Stop(Exception):
    pass

  def stop(*a, **k):
    raise Stop

  monkeypatch.setattr(run, "run_sft", stop)
  capsys.readouterr()
  with pytest.raises(Stop):
    run.train(cfg)
  n_test = len(run.build_experiment(cfg).test_problems)
  assert n_test < 20 and f"[rljax] warning: the held-out split has only {n_test} problem" in capsys.readouterr().out


@pytest.mark.usefixtures("ctrl_c_enabled")
def test_ctrl_c_writes_the_plot_and_the_resume_counts_both_parts_and_eval_step_lists_the_steps(tmp_path, capsys):
  from rljax.train import Preempted, train
  out = str(tmp_path / "run")
  cfg = apply_overrides(tiny_config(out), ["sft.steps=1", "rl.steps=4", "checkpoint.every=1", "eval.every=0",
                                           "plot=true"])
  calls = []

  def ctrl_c_at_step_2(completions, problems):  # pylint: disable=unused-argument
    calls.append(1)
    if len(calls) == 2:
      os.kill(os.getpid(), signal.SIGINT)  # the run stops cleanly after this step
    return np.zeros(len(completions), np.float32)

  t0 = time.perf_counter()
  with pytest.raises(Preempted):
    train(cfg, reward_fn=ctrl_c_at_step_2)
  first = time.perf_counter() - t0
  assert os.path.exists(os.path.join(out, "metrics.png")) and not os.path.exists(os.path.join(out, "summary.json"))
  with open(os.path.join(out, "wall.json"), encoding="utf-8") as f:
    assert 0 < json.load(f)["wall_s"] <= first
  with open(os.path.join(out, "wall.json"), "w", encoding="utf-8") as f:
    json.dump({"wall_s": 1000.0}, f)  # a known first part: the resume adds its own time to it
  t0 = time.perf_counter()
  summary = train(cfg, resume=True, reward_fn=ctrl_c_at_step_2)  # the same recipe (no second Ctrl-C: one call only)
  second = time.perf_counter() - t0
  with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
    written = json.load(f)["wall_s"]
  assert written == summary["wall_s"] and 1000.0 < written <= 1000.0 + second
  capsys.readouterr()
  steps = sorted(int(s) for s in os.listdir(os.path.join(out, "checkpoints", "rl")) if s.isdigit())
  assert 7 not in steps and steps
  assert cli.main(["eval", "--run-dir", out, "--step", "7"]) == 2
  err = capsys.readouterr().err
  assert f"checkpoint step 7 not in {os.path.join(out, 'checkpoints', 'rl')!r} (have {steps})" in err, err
  # eval's defaults are the run's own evaluation (tiny: 2 samples, pass@1 and pass@2), not 8 samples
  assert cli.main(["eval", "--run-dir", out, "--num-problems", "4"]) == 0
  res = json.loads(capsys.readouterr().out)
  assert sorted(k for k in res if k.startswith("pass@")) == ["pass@1", "pass@2"], res
