"""benchmarks/gemma3_head_memory.py at a small vocabulary: the figures it prints are the compiler's, and they say
what the fused head is for. Independent reference: the byte size of one ``[N, V]`` float32 logits block.

- the materialising reference's temporaries hold at least one ``[N, V]`` float32 block, the fused path's stay
  under a tenth of one (CPU, XLA:CPU ``memory_analysis()``);
- the arguments are exactly hidden + weight + targets, the outputs ``(logp, entropy)`` or ``(dX, dW)`` (and the
  few bytes of XLA's result tuple);
- the measured peak RSS of a reference run grows by at least one logits block over the same process compiling
  only, and the fused run's growth is smaller by at least half a block.
"""
import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location("gemma3_head_memory", ROOT / "benchmarks" / "gemma3_head_memory.py")
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)

_N, _H, _V = 512, 64, 65536
_LOGITS = _N * _V * 4  # one [N, V] float32 block: 128 MiB


@pytest.mark.parametrize("program", ["forward", "forward+backward"])
def test_cpu_compiled_reference_holds_the_logits_and_fused_does_not(program):
  ref = bench.cpu_compiled(program, "reference", _N, _H, _V)
  fused = bench.cpu_compiled(program, "auto", _N, _H, _V)
  args = _N * _H * 4 + _H * _V * 4 + _N * 4
  assert ref["arguments"] == fused["arguments"] == args
  payload = 2 * _N * 4 if program == "forward" else _N * _H * 4 + _H * _V * 4  # (logp, entropy) or (dX, dW)
  assert ref["outputs"] == fused["outputs"] and payload <= ref["outputs"] <= payload + 64  # + the result tuple
  assert ref["temp"] >= _LOGITS > 10 * fused["temp"]


@pytest.mark.slow  # four fresh processes
def test_measured_rss_of_a_reference_run_grows_by_the_logits():
  peak = bench._peak_rss  # pylint: disable=protected-access
  added = {}
  for impl in ("reference", "auto"):
    added[impl] = peak("forward+backward", impl, _N, _H, _V, run=True) - peak("forward+backward", impl, _N, _H, _V,
                                                                            run=False)
  assert added["reference"] >= _LOGITS and added["auto"] < added["reference"] - _LOGITS // 2, added


def test_bad_rows_are_refused():
  with pytest.raises(SystemExit, match="positive ints"):
    bench._rows("1024,-1")  # pylint: disable=protected-access
