"""``rl.num_microbatches`` / ``rl.concurrent_rollouts`` = 0 (auto): what is chosen, when, and that it is logged."""
import os

import jax
import pytest

from rljax.train import apply_overrides, default_config, tiny_config
from rljax.train._experiment import resolve_auto_settings


def _resolve(cfg, n_params, *, backend="cpu", cores=2, monkeypatch):
  monkeypatch.setattr(jax, "default_backend", lambda: backend)
  monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
  resolved, why = resolve_auto_settings(cfg, n_params)
  print(why)
  return resolved.rl.num_microbatches, resolved.rl.concurrent_rollouts


def test_defaults_are_auto_and_resolve_by_backend_cores_and_model_size(monkeypatch, capsys):
  cfg = default_config().replace(progress=True)
  assert (cfg.rl.num_microbatches, cfg.rl.concurrent_rollouts) == (0, 0)
  # the demo (133K parameters, 256-row batch, groups of 8): micro-batches yes, rollout chunks no
  assert _resolve(cfg, 133_440, monkeypatch=monkeypatch) == (4, 1)
  assert "rl.num_microbatches=auto -> 4" in capsys.readouterr().out
  # the GRPO benchmark's size: both, on 2 cores; one core: no chunks
  assert _resolve(cfg, 4_400_000, monkeypatch=monkeypatch) == (4, 2)
  assert _resolve(cfg, 4_400_000, cores=1, monkeypatch=monkeypatch) == (4, 1)
  # a real model's size (SmolLM2-135M): 2 micro-batches; 4 rows (one group of 4) cannot be cut in 2 slices
  assert _resolve(cfg, 134_515_008, monkeypatch=monkeypatch) == (2, 2)
  one_group = apply_overrides(cfg, ["rl.num_prompts=1", "rl.group_size=4"])
  assert _resolve(one_group, 134_515_008, monkeypatch=monkeypatch)[0] == 1
  # accelerators: neither
  assert _resolve(cfg, 4_400_000, backend="gpu", monkeypatch=monkeypatch) == (1, 1)
  # micro-batches must hold whole groups: 2 prompts x 8 samples = 16 rows -> 4-row slices would split groups
  odd = apply_overrides(cfg, ["rl.num_prompts=2", "rl.group_size=8"])
  assert _resolve(odd, 133_440, monkeypatch=monkeypatch)[0] == 1


def test_explicit_values_are_kept(monkeypatch):
  cfg = apply_overrides(default_config(), ["rl.num_microbatches=2", "rl.concurrent_rollouts=3"])
  assert _resolve(cfg, 4_400_000, monkeypatch=monkeypatch) == (2, 3)
  with pytest.raises(ValueError, match="rl.num_microbatches"):
    apply_overrides(default_config(), ["rl.num_microbatches=-1"])


def test_a_run_records_what_was_chosen(tmp_path):
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  cfg = apply_overrides(tiny_config(str(tmp_path)), ["rl.steps=1", "sft.steps=1", "checkpoint.enabled=false"])
  summary = train(cfg)
  assert summary["settings"] == {"num_microbatches": 4, "concurrent_rollouts": 1}  # CPU, tiny model
