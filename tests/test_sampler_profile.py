"""The attribution and counts of ``benchmarks/sampler_profile.py`` and the table of ``benchmarks/cpu_dot_threads.py``
(issue #53 item 2), on hand-written inputs; neither benchmark runs here."""
import pathlib
import sys
import types

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"

# the shape of XLA:CPU's compiled text: fused computations, then fusions that call them with their op_name
HLO = """
%fused_computation.1 (param_0.1: f32[50,8], param_1.1: f32[4,8]) -> f32[50,4] {
  %param_0.1 = f32[50,8]{1,0} parameter(0)
  ROOT %dot_general.1 = f32[50,4]{1,0} dot(%param_0.1, %param_1.1), lhs_contracting_dims={1}, rhs_contracting_dims={1}
}

%fused_computation.2 (param_0.2: f32[16,8], param_1.2: f32[4,8]) -> f32[16,4] {
  ROOT %dot_general.2 = f32[16,4]{1,0} dot(%param_0.2, %param_1.2), lhs_contracting_dims={1}, rhs_contracting_dims={1}
}

%fused_computation.3 (param_0.3: f32[4,3,3,2], param_1.3: f32[4,3,9,2]) -> f32[4,3,3,9] {
  ROOT %dot_general.3 = f32[4,3,3,9]{3,2,1,0} dot(%param_0.3, %param_1.3), lhs_batch_dims={0,1}
}

%fused_computation.4 (param_0.4: f32[4,50]) -> f32[4] {
  ROOT %reduce.4 = f32[4]{0} reduce(%param_0.4, %c), dimensions={1}
}

%fused_computation.5 (param_0.5: f32[40,8], param_1.5: f32[8,16]) -> f32[40,16] {
  ROOT %dot_general.5 = f32[40,16]{1,0} dot(%param_0.5, %param_1.5), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

ENTRY %main.1 (p: f32[4,8]) -> f32[4] {
  %ynn_fusion.1 = f32[50,4]{1,0} fusion(%a, %b), kind=kCustom, calls=%fused_computation.1, metadata={op_name="jit(_generate_jit)/while/body/dot_general"}
  %ynn_fusion.2 = f32[16,4]{1,0} fusion(%a, %b), kind=kCustom, calls=%fused_computation.2, metadata={op_name="jit(_generate_jit)/while/body/dot_general"}
  %ynn_fusion.3 = f32[4,3,3,9]{3,2,1,0} fusion(%a, %b), kind=kCustom, calls=%fused_computation.3, metadata={op_name="jit(_generate_jit)/while/body/bkgd,bksd->bkgs/dot_general"}
  %reduce_fusion.4 = f32[4]{0} fusion(%a), kind=kLoop, calls=%fused_computation.4, metadata={op_name="jit(_generate_jit)/while/body/reduce_sum"}
  %ynn_fusion.5 = f32[40,16]{1,0} fusion(%a, %b), kind=kCustom, calls=%fused_computation.5, metadata={op_name="jit(_generate_jit)/dot_general"}
  %transpose_copy_fusion.6 = f32[16,8]{1,0} fusion(%w), kind=kLoop, calls=%fused_computation.6, metadata={op_name="jit(_generate_jit)/transpose"}
}
"""


@pytest.fixture(scope="module")
def mods():
  sys.path.insert(0, str(BENCH))
  try:
    import importlib  # pylint: disable=import-outside-toplevel
    yield {n: importlib.import_module(n) for n in ("sampler_profile", "cpu_dot_threads", "_peer_rules")}
  finally:
    sys.path.remove(str(BENCH))


def test_importing_the_profile_does_not_set_xla_dump_flags(mods):
  import os  # pylint: disable=import-outside-toplevel
  assert "rljax_sampler_hlo_" not in os.environ.get("XLA_FLAGS", "")
  assert mods["sampler_profile"]._DUMP == ""  # pylint: disable=protected-access
  with pytest.raises(SystemExit):
    mods["sampler_profile"].main(["--batch", "1"])


def test_instructions_are_attributed_to_their_parts(mods):
  parts = mods["sampler_profile"].instruction_parts(HLO, vocab=50)
  assert parts == {
      "ynn_fusion.1": "decode: LM head",              # a dot with the vocabulary among its dimensions
      "ynn_fusion.2": "decode: projections",
      "ynn_fusion.3": "decode: attention",            # batch dimensions
      "reduce_fusion.4": "decode: other",             # in the loop, no dot
      "ynn_fusion.5": "prefill and per-call copies",  # outside the loop
      "transpose_copy_fusion.6": "prefill and per-call copies",
  }


def test_projection_flops_is_the_hand_count(mods):
  cfg = types.SimpleNamespace(hidden_size=8, head_dim=2, num_heads=4, num_kv_heads=2, intermediate_size=12,
                              num_layers=3)
  # per layer: q 8x8, k 8x4, v 8x4, o 8x8, gate 8x12, up 8x12, down 12x8 weights
  per_layer = 64 + 32 + 32 + 64 + 96 + 96 + 96
  assert mods["sampler_profile"].projection_flops(cfg, rows=5) == 2 * 5 * 3 * per_layer


def _fake(threads, rate, stream):
  return {"threads": threads, "stream": {"bytes_per_s": stream},
          "dot_t": {str(m): rate for m in (1, 8, 32, 64, 128, 256, 512)},
          "x @ W": {str(m): rate for m in (1, 8, 32, 64, 128, 256, 512)}}


def test_dot_threads_table_gives_the_ratio_on_a_quiet_machine_and_withholds_it_under_load(mods):
  one, every = _fake(1, 40.0, 20e9), _fake(2, 60.0, 30e9)
  quiet = mods["_peer_rules"].LoadGuard(load=0.5, cores=2)
  text = mods["cpu_dot_threads"].table(one, every, quiet)
  assert "| 8 | dot_t | 40.0 | 60.0 | 1.50x |" in text
  assert "1 core 20.0 GB/s, 2 cores 30.0 GB/s (1.50x)" in text
  loaded = mods["_peer_rules"].LoadGuard(load=3.0, cores=2)
  text = mods["cpu_dot_threads"].table(one, every, loaded)
  assert "1.50x" not in text and "withheld" in text
