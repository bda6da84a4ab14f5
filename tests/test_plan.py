"""``rljax plan`` and TPU topology meshes: the run's programs compiled by XLA:TPU with no TPU attached (libtpu).

The fast loop compiles a tiny run's update, input forward and rollout for a ``v5e:2x2`` slice; the realistic shapes
(Qwen2.5-7B on v5e-64, 72B on v5e-256) are figures in docs/scaling.md, made with the command it gives.
"""
import dataclasses
import math

import numpy as np
import pytest
from flax import nnx

from rljax import cli
from rljax.models import ModelConfig, Transformer
from rljax.parallel import CHIPS, MeshConfig, chip_of, topology_devices, topology_mesh
from rljax.plan import (Cost, PlanReport, ProgramPlan, format_report, kv_bound_rows, matmul_params, max_rollout,
                        plan, plan_model_config, plan_spec, token_flops)
from rljax.plan import _plan as plan_module
from rljax.train import apply_overrides, tiny_config

GiB = 2 ** 30


def _tiny(tmp_path, *overrides):
  return apply_overrides(tiny_config(str(tmp_path / "run")), ["mesh.fsdp=-1", *overrides])


def test_topology_devices_are_tpu_compile_targets():
  devices = topology_devices("v5e:2x2")
  assert len(devices) == 4 and {d.platform for d in devices} == {"tpu"}
  assert devices[0].device_kind == CHIPS["v5e"].device_kind
  mesh = topology_mesh("v5e:2x2", MeshConfig(data=1, fsdp=-1))
  assert dict(mesh.shape) == {"data": 1, "fsdp": 4, "tensor": 1, "expert": 1}
  assert dict(topology_mesh("v5e:2x2", MeshConfig(fsdp=1), devices=1).shape)["fsdp"] == 1


@pytest.mark.parametrize("name", ["v9:2x2", "v5e", "v5e:2x2x2x2", "tpu:4"])
def test_unknown_topology_lists_valid_names(name):
  with pytest.raises(ValueError, match=r"unknown TPU topology .*valid names: .*v5e:16x16"):
    topology_mesh(name)


def test_topology_libtpu_refuses_with_its_reason():
  with pytest.raises(ValueError, match=r"libtpu refused topology 'v5e:1x1' \(.*divisible.*valid names"):
    topology_devices("v5e:1x1")


def test_mesh_that_does_not_divide_the_slice_is_refused():
  with pytest.raises(ValueError, match=r"does not fit v5e:2x2 \(4 chips\).*needs 3 devices"):
    topology_mesh("v5e:2x2", MeshConfig(data=1, fsdp=3))
  with pytest.raises(ValueError, match=r"not divisible by the fixed mesh axes"):
    topology_mesh("v5e:2x2", MeshConfig(data=3, fsdp=-1))


def test_libtpu_missing_is_one_line_with_the_install_command(monkeypatch):
  import sys  # pylint: disable=import-outside-toplevel
  topology_devices.cache_clear()
  monkeypatch.setitem(sys.modules, "libtpu", None)  # import libtpu -> ImportError
  with pytest.raises(ValueError, match=r'needs the TPU compiler \(libtpu\): pip install -e "\.\[tpu\]"'):
    topology_devices("v5e:2x2")
  topology_devices.cache_clear()


def test_chip_of():
  assert chip_of("v5e:16x16") is CHIPS["v5e"] and chip_of("v5p:8x8x4").hbm_bytes == 95 * GiB


def _reference_matmul_params(cfg) -> int:
  """Parameters a token multiplies by, counted from the built model's shapes (independent of the closed form):
  every parameter with 2+ dimensions except the embedding table, plus the head (the table itself when tied)."""
  model = nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0)))
  total = 0
  for path, x in nnx.to_flat_state(nnx.state(model, nnx.Param)):
    name = "/".join(map(str, path))
    if len(x.get_value().shape) >= 2 and "embed" not in name:
      total += math.prod(x.get_value().shape)
  return total + (cfg.vocab_size * cfg.hidden_size if cfg.tie_embeddings else 0)


@pytest.mark.parametrize("tie", [True, False])
def test_matmul_params_match_the_models_own_shapes(tie):
  cfg = ModelConfig(vocab_size=96, hidden_size=32, num_layers=3, num_heads=4, num_kv_heads=2, head_dim=8,
                    intermediate_size=48, tie_embeddings=tie)
  assert matmul_params(cfg) == _reference_matmul_params(cfg)


def test_token_flops_hand_count():
  cfg = ModelConfig(vocab_size=10, hidden_size=8, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=4,
                    intermediate_size=16, tie_embeddings=True)
  per_layer = 8 * 4 * (2 * 2 + 2 * 1) + 3 * 8 * 16  # q, o: H x 8; k, v: H x 4; gate, up, down
  n = 10 * 8 + 2 * per_layer
  # seq 6: a query sees 3 keys on average (causal), 4 x (2 heads x 4) FLOPs per (query, key) pair per layer
  assert token_flops(cfg, 6) == 2 * n + 4 * 8 * (2 * 3)
  local = dataclasses.replace(cfg, sliding_window=2, layer_types=("sliding_attention", "full_attention"))
  assert token_flops(local, 6) == 2 * n + 4 * 8 * (2 + 3)


def test_kv_bound_rows_hand_count(tmp_path):
  spec = plan_spec(_tiny(tmp_path), prompt_len=12)  # seq 16, 1 layer, 2 KV heads x 16, bf16 cache
  mesh = topology_mesh("v5e:2x2", MeshConfig(fsdp=-1))
  row = 1 * 2 * 2 * 16 * 16 * 2  # layers x (K, V) x heads x head_dim x slots x 2 bytes
  weights = sum(math.prod(x.get_value().shape) for _, x in nnx.to_flat_state(nnx.state(
      nnx.eval_shape(lambda: Transformer(spec.model, rngs=nnx.Rngs(0))), nnx.Param))) * 4 / 4
  assert kv_bound_rows(spec, mesh, CHIPS["v5e"]) == int((0.9 * 16 * GiB - weights) * 4 // row)


def test_tiny_run_compiles_for_v5e(tmp_path):
  """The update with the recipe's loss (PPO clip + k3 KL), the reference + proximal forward, and the rollout, all
  compiled by XLA:TPU for a 4-chip v5e slice; each has a TPU memory figure, a cost, and fits."""
  cfg = _tiny(tmp_path, "rl.loss=ppo_clip(), kl_penalty(beta=0.001)")
  spec = plan_spec(cfg, prompt_len=12)
  report = plan(spec, topology_mesh("v5e:2x2", cfg.mesh), "v5e:2x2")
  assert [p.name for p in report.programs] == ["train", "forward", "rollout"]
  assert "reference + proximal" in report.programs[1].what
  for p in report.programs:
    assert p.args > 0 and p.total > 0 and p.cost.flops > 0 and p.need <= report.budget
  assert report.programs[0].resident > 0  # the reference parameters beside the update
  # the fused log-prob head is the Mosaic kernel in the update and the forward (the platform lowered for decides,
  # not this CPU host); the rollout's sampler scores with plain logits
  assert [p.mosaic for p in report.programs] == [True, True, False]
  assert not report.failing()
  text = format_report(report)
  assert "compiled by XLA:TPU" in text and "an estimate, not a measured time" in text and "DOES NOT FIT" not in text


def _fake_program(name, need_gib, resident_gib=0.0):
  return ProgramPlan(name=name, what=name, args=int(GiB), out=0, alias=0, temp=int((need_gib - 1 - resident_gib) * GiB),
                     resident=int(resident_gib * GiB), compile_s=1.0, cost=Cost(1e15, 1e9))


def test_report_names_the_program_the_excess_and_two_things_to_try(tmp_path):
  cfg = _tiny(tmp_path)
  spec = plan_spec(cfg, prompt_len=12)
  report = PlanReport(target="v5e:2x2", chip=CHIPS["v5e"], chips=4, mesh={"data": 1, "fsdp": 4, "tensor": 1,
                      "expert": 1}, spec=spec, programs=(_fake_program("train", 15.4), _fake_program("rollout", 3.0)))
  assert [p.name for p in report.failing()] == ["train"]
  line = [l for l in format_report(report).splitlines() if l.startswith("DOES NOT FIT")]
  assert line == ["DOES NOT FIT: train needs 15.40 GiB per chip, 1.00 GiB over; try model.remat=full; "
                  "rl.num_microbatches=2"]


def test_cli_plan_exit_code_is_1_when_a_program_does_not_fit(tmp_path, monkeypatch, capsys):
  import rljax.plan  # pylint: disable=import-outside-toplevel

  def fake_plan(spec, mesh, target, **_):
    return PlanReport(target=target, chip=CHIPS["v5e"], chips=4, mesh=dict(mesh.shape), spec=spec,
                      programs=(_fake_program("rollout", 20.0),))
  monkeypatch.setattr(rljax.plan, "plan", fake_plan)
  rc = cli.main(["plan", "--target", "v5e:2x2", "--config", "tiny", "--set", "mesh.fsdp=-1", "--prompt-len", "12"])
  out = capsys.readouterr().out
  assert rc == 1 and "DOES NOT FIT: rollout needs 20.00 GiB per chip, 5.60 GiB over; try fewer rollout rows" in out


def test_cli_plan_refuses_bad_input(capsys):
  assert cli.main(["plan", "--target", "v7x:2x2", "--config", "tiny"]) == 2
  assert "rljax plan: error: unknown TPU topology 'v7x:2x2'" in capsys.readouterr().err
  assert cli.main(["plan", "--target", "v5e:2x2", "--config", "tiny", "--set", "mesh.fsdp=1"]) == 2
  assert "does not fit v5e:2x2 (4 chips)" in capsys.readouterr().err
  assert cli.main(["plan", "--target", "v5e:2x2", "--config", "tiny", "--set", "mesh.fsdp=-1",
                   "--programs", "train,backward"]) == 2
  assert "--programs must be a comma list of train, forward, rollout, got 'train,backward'" in capsys.readouterr().err


def test_model_dimension_the_axis_does_not_divide_is_refused(tmp_path):
  cfg = _tiny(tmp_path, "mesh.fsdp=1", "mesh.tensor=4")  # 2 heads over tensor=4
  spec = plan_spec(cfg, prompt_len=12)
  with pytest.raises(ValueError, match=r"mesh axis tensor=4 does not divide the model's num_heads=2"):
    plan(spec, topology_mesh("v5e:2x2", cfg.mesh), "v5e:2x2", programs=("train",))


def test_max_rollout_bisection_finds_the_largest_batch_that_fits(tmp_path, monkeypatch):
  """Against brute force: the program's total is made a known function of the prompts, and the search must land on
  the largest multiple of the row unit under the budget (checked by enumerating every multiple)."""
  cfg = _tiny(tmp_path)
  spec = plan_spec(cfg, prompt_len=12)
  mesh = topology_mesh("v5e:2x2", cfg.mesh)
  budget = 0.9 * 16 * GiB
  per_prompt = 0.37 * GiB

  class Fake:
    def __init__(self, prompts):
      self.prompts = prompts
      if prompts * per_prompt > 2 * budget:  # as XLA:TPU refuses a program over HBM
        raise RuntimeError("RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for HLO "
                           f"temporaries ({prompts * per_prompt / GiB:.2f}G) exceeds available HBM (15.75G).")

    def memory_analysis(self):
      total = self.prompts * per_prompt
      return type("M", (), dict(argument_size_in_bytes=int(total), output_size_in_bytes=0, alias_size_in_bytes=0,
                                temp_size_in_bytes=0))()
  monkeypatch.setattr(plan_module, "compile_rollout", lambda spec, mesh, prompts: Fake(prompts))
  got = max_rollout(spec, mesh, "v5e:2x2")
  unit = 1  # 4 chips, groups of 4: one prompt keeps rows divisible by data x fsdp
  best = max(k for k in range(1, 200) if k * unit * per_prompt <= budget)
  assert got["prompts"] == best and got["rows"] == best * 4 and not got["capped"]
  capped = max_rollout(spec, mesh, "v5e:2x2", max_rows=16)
  assert capped["capped"] and capped["rows"] == 16
  assert np.isclose(got["total"], best * per_prompt, rtol=1e-9)
  # Every start the KV-cache bound can give (below, at and above the answer) lands on the same batch.
  for bound_prompts in (1, best - 3, best, best + 1, best + 7, 3 * best):
    monkeypatch.setattr(plan_module, "kv_bound_rows", lambda *_, b=bound_prompts: b * 4)
    assert max_rollout(spec, mesh, "v5e:2x2")["prompts"] == best, bound_prompts
  # Where the bound is the answer, two compiles decide (it fits, one more unit does not): a 72B compile is minutes.
  monkeypatch.setattr(plan_module, "kv_bound_rows", lambda *_: best * 4 + 3)
  assert max_rollout(spec, mesh, "v5e:2x2")["compiles"] == 2
  # a rollout the plan already compiled is not compiled again (and is trusted: a wrong total would steer the search)
  assert max_rollout(spec, mesh, "v5e:2x2", known={best: best * per_prompt})["compiles"] == 1
  assert max_rollout(spec, mesh, "v5e:2x2", known={best: math.inf})["prompts"] == best - 1


_POD = ["model.compute_dtype=bfloat16", "model.remat=full", "model.scan_layers=true", "mesh.fsdp=-1",
        "rl.max_new_tokens=1024"]


@pytest.mark.long
@pytest.mark.parametrize("target,programs", [("v5e:8x8", ("train", "rollout")), ("v6e:8x8", ("train",)),
                                             ("v5p:4x4x4", ("train",))])
def test_qwen2_5_7b_grpo_step_fits_v5e_v6e_v5p(tmp_path, target, programs):
  """The realistic shape: Qwen2.5-7B, 64 x 2048 tokens, float32 parameters and Adam, bf16 compute, fsdp over 64
  chips, compiled by XLA:TPU with the Pallas head inside the update (docs/scaling.md has the figures)."""
  cfg = apply_overrides(tiny_config(str(tmp_path / "run")), ["model.preset=qwen2.5-7b", "rl.num_prompts=8",
                                                             "rl.group_size=8", *_POD])
  spec = plan_spec(cfg, prompt_len=1024)
  report = plan(spec, topology_mesh(target, cfg.mesh), target, programs=programs)
  print(format_report(report))
  train = report.programs[0]
  assert train.name == "train" and train.mosaic and not report.failing()


def test_plan_reads_a_checkpoint_directorys_config_json(tmp_path):
  """``model.hf_checkpoint``: the architecture from config.json alone (no weights read), dtypes from the run; a
  missing path named as the user set it."""
  import json  # pylint: disable=import-outside-toplevel
  from rljax.models import presets  # pylint: disable=import-outside-toplevel
  from rljax.models._hf import config_to_hf  # pylint: disable=import-outside-toplevel
  ckpt = tmp_path / "ckpt"
  ckpt.mkdir()
  (ckpt / "config.json").write_text(json.dumps(config_to_hf(presets.get("qwen2.5-0.5b"))))
  cfg = apply_overrides(tiny_config(str(tmp_path / "run")), [f"model.hf_checkpoint={ckpt}",
                                                             "model.compute_dtype=bfloat16"])
  model = plan_model_config(cfg)
  assert (model.hidden_size, model.num_layers, model.vocab_size) == (896, 24, 151936)
  assert (model.param_dtype, model.compute_dtype) == ("float32", "bfloat16")
  missing = apply_overrides(cfg, [f"model.hf_checkpoint={tmp_path / 'nowhere'}"])
  with pytest.raises(ValueError, match="model.hf_checkpoint .*nowhere.* does not exist"):
    plan_model_config(missing)


def test_a_program_xla_tpu_refuses_is_reported_not_raised(tmp_path, monkeypatch):
  """XLA:TPU refuses a program whose temporaries exceed the HBM: the plan reports it as not fitting, with the
  temporaries the error names, and exit code 1; any other compile error is raised."""
  cfg = _tiny(tmp_path)
  spec = plan_spec(cfg, prompt_len=12)

  def refused(*_, **__):
    raise RuntimeError("RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for HLO temporaries "
                       "(16.89G) exceeds available HBM (15.75G).")
  monkeypatch.setattr(plan_module, "compile_rollout", refused)
  report = plan(spec, topology_mesh("v5e:2x2", cfg.mesh), "v5e:2x2", programs=("rollout",))
  (p,) = report.programs
  assert p.refused and p.temp == int(16.89 * GiB) and report.failing() == [p]
  assert "NO: XLA:TPU refused it" in format_report(report)

  def broken(*_, **__):
    raise RuntimeError("INTERNAL: something else")
  monkeypatch.setattr(plan_module, "compile_rollout", broken)
  with pytest.raises(RuntimeError, match="something else"):
    plan(spec, topology_mesh("v5e:2x2", cfg.mesh), "v5e:2x2", programs=("rollout",))


def test_train_refuses_a_preset_instead_of_ignoring_it(tmp_path, capsys):
  """``model.preset`` is an architecture for ``rljax plan``; ``rljax train`` says so and writes nothing."""
  out = tmp_path / "run"
  assert cli.main(["train", "--config", "tiny", "--out-dir", str(out), "--set", "model.preset=qwen2.5-7b"]) == 2
  assert "model.preset='qwen2.5-7b' is read by `rljax plan` only" in capsys.readouterr().err
  assert not out.exists()
