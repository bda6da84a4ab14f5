"""The rules every peer benchmark follows (``benchmarks/_peer_rules.py``; docs/benchmarks.md, "How we compare") and
the roofline counting (``benchmarks/roofline.py``): thread defaults, the load guard, the missing-peer line, and the
FLOP and byte counts against hand counts on a tiny config. No peer runs here."""
import json
import os
import pathlib
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"
# benchmark -> its peer thread flags (dest names)
PEER_THREAD_FLAGS = {"real_model_bench": ("trl_threads", "hf_threads"), "sampler_bench": ("hf_threads",),
                     "objectives_bench": ("threads",), "advantages_bench": ("verl_threads",),
                     "model_bench": ("hf_threads",)}
PEER_BENCHES = tuple(PEER_THREAD_FLAGS) + ("grpo_step_bench",)


@pytest.fixture(scope="module")
def bench():
  """The benchmark modules, imported as ``python benchmarks/x.py`` sees them (benchmarks/ on the path)."""
  sys.path.insert(0, str(BENCH))
  try:
    import importlib  # pylint: disable=import-outside-toplevel
    yield {name: importlib.import_module(name) for name in PEER_BENCHES + ("_peer_rules", "roofline")}
  finally:
    sys.path.remove(str(BENCH))


@pytest.mark.parametrize("cores", [2, 7])
def test_every_peer_thread_flag_defaults_to_the_core_count(bench, monkeypatch, cores):
  rules = bench["_peer_rules"]
  monkeypatch.setattr(rules, "core_count", lambda: cores)
  for name, flags in PEER_THREAD_FLAGS.items():
    args = bench[name].build_parser().parse_args([])
    for flag in flags:
      assert int(getattr(args, flag)) == cores, (name, flag, getattr(args, flag))
      assert getattr(args, "allow_load") is False


def test_every_peer_benchmark_has_allow_load(bench):
  for name in PEER_BENCHES:
    assert bench[name].build_parser().parse_args(["--allow-load"]).allow_load is True, name


def test_core_count_is_the_affinity_mask():
  sys.path.insert(0, str(BENCH))
  try:
    import _peer_rules  # pylint: disable=import-outside-toplevel
  finally:
    sys.path.remove(str(BENCH))
  if hasattr(os, "sched_getaffinity"):
    assert _peer_rules.core_count() == len(os.sched_getaffinity(0))
  assert 1 <= _peer_rules.core_count() <= (os.cpu_count() or 1)


def test_load_guard_refuses_a_ratio_above_the_core_count_without_allow_load(bench):
  guard = bench["_peer_rules"].LoadGuard
  loaded = guard(load=2.5, cores=2)
  assert loaded.loaded and not loaded.ratios_allowed
  assert "5.45" not in loaded.ratio(5.45) and "withheld" in loaded.ratio(5.45)
  assert loaded.header().startswith("LOADED MACHINE") and "2.50" in loaded.header() and "--allow-load" in \
      loaded.header()
  allowed = guard(load=2.5, cores=2, allow_load=True)
  assert allowed.ratio(5.45) == "5.45x" and allowed.header().startswith("LOADED MACHINE")
  quiet = guard(load=2.0, cores=2)  # at the core count: not above it
  assert not quiet.loaded and quiet.ratio(2.26) == "2.26x" and quiet.ratio(31.84, "{:.1f}x") == "31.8x"
  assert "LOADED" not in quiet.header()


@pytest.mark.skipif(not os.path.exists("/proc/cpuinfo"), reason="the CPU line reads /proc/cpuinfo (Linux)")
def test_report_header_names_the_cpu_and_its_bf16_matrix_units(bench):
  """A peer's bfloat16 row depends on the CPU's AMX / AVX512-BF16 units: each header names them as cpuinfo does."""
  rules = bench["_peer_rules"]
  flags = set(next(ln for ln in open("/proc/cpuinfo") if ln.startswith("flags")).split(":", 1)[1].split())
  line = rules.cpu_line()
  assert line.startswith("CPU ") and rules.LoadGuard(load=0.0, cores=2).header().endswith(line)
  present = {u for u in ("amx_bf16", "avx512_bf16", "avx512f", "avx2") if u in flags}
  listed = line.split("units: ", 1)[1]
  assert set(listed.split(", ")) == present if present else listed.startswith("none of")


def test_an_auto_probe_runs_only_on_a_quiet_machine(bench, capsys):
  rules, rmb = bench["_peer_rules"], bench["real_model_bench"]
  assert rmb._threads("3", rules.LoadGuard(9.0, 2)) == 3  # an explicit count stands
  assert rmb._threads("auto", rules.LoadGuard(0.5, 2)) is None  # probe
  assert capsys.readouterr().out == ""
  assert rmb._threads("auto", rules.LoadGuard(2.5, 2)) == 2  # loaded: the cores, said so
  assert "probe skipped" in capsys.readouterr().out
  assert rules.probe_counts() == sorted({1, max(1, rules.core_count() // 2), rules.core_count()})


def _fake_python(tmp_path, code: int) -> str:
  path = tmp_path / f"python{code}"
  path.write_text(f"#!/bin/sh\nexit {code}\n")
  path.chmod(0o755)
  return str(path)


def test_missing_peer_line(bench, tmp_path):
  rules = bench["_peer_rules"]
  gone = str(tmp_path / "trl-venv" / "bin" / "python")
  line = rules.missing_peer(gone, "trl")
  assert line == (f"no trl peer: {gone} not found; make its venv with: python3 -m venv {tmp_path}/trl-venv && "
                  f"{tmp_path}/trl-venv/bin/pip install torch==2.13.0 trl transformers accelerate gguf")
  assert "cannot import tunix" in rules.missing_peer(_fake_python(tmp_path, 1), "tunix")
  assert "pip install google-tunix" in rules.missing_peer(_fake_python(tmp_path, 1), "tunix")
  assert "verl==0.9.1" in rules.missing_peer(_fake_python(tmp_path, 1), "verl")
  assert rules.missing_peer(_fake_python(tmp_path, 0), "verl") is None


@pytest.mark.parametrize("name,flag,peer", [("real_model_bench", "--trl-python", "trl"),
                                            ("sampler_bench", "--tunix-python", "tunix"),
                                            ("grpo_step_bench", "--tunix-python", "tunix"),
                                            ("objectives_bench", "--verl-python", "verl"),
                                            ("advantages_bench", "--verl-python", "verl")])
def test_a_benchmark_without_its_peer_prints_one_line_and_fails(bench, tmp_path, capsys, name, flag, peer):
  with pytest.raises(SystemExit) as e:
    bench[name].main([flag, _fake_python(tmp_path, 1)])
  msg = str(e.value.code)
  assert e.value.code not in (0, None) and msg.startswith(f"no {peer} peer:") and "\n" not in msg
  assert "pip install" in msg
  out = capsys.readouterr()
  assert out.out == "" and out.err == ""  # nothing else (SystemExit's message goes to stderr at exit)


def test_trl_precision_rows(bench, tmp_path):
  rmb = bench["real_model_bench"]
  assert rmb.build_parser().parse_args([]).trl_precisions.split(",") == ["float32", "bfloat16"]
  assert rmb.TRL_ROWS == {"float32": False, "bfloat16": True}
  with pytest.raises(SystemExit):
    rmb.main(["--trl-precisions", "float32,fp8", "--trl-python", _fake_python(tmp_path, 1)])


# ------------------------------------------------------------------------------------------ roofline counting

# a tiny Llama: 2 layers, hidden 8, 2 query heads x 4, 1 key/value head, MLP 16, vocabulary 10
TINY = dict(num_hidden_layers=2, hidden_size=8, num_attention_heads=2, head_dim=4, num_key_value_heads=1,
            intermediate_size=16, vocab_size=10)
# per layer by hand: q 8x8 + k 8x4 + v 8x4 + o 8x8 + gate 8x16 + up 8x16 + down 16x8 = 576
N_TINY = 2 * (64 + 32 + 32 + 64 + 128 + 128 + 128)


@pytest.fixture()
def tiny(bench, tmp_path):
  (tmp_path / "config.json").write_text(json.dumps(TINY))
  return bench["real_model_bench"].model_shape(str(tmp_path))


def test_model_shape_counts_the_matmul_parameters(tiny):
  assert tiny == dict(H=8, L=2, heads=2, head_dim=4, kv=1, V=10, N=N_TINY)


def _brute_forward(s, context_from, tokens, head_tokens):
  total = 0
  for c in range(context_from + 1, context_from + tokens + 1):  # each position, attending to c positions
    total += 2 * N_TINY  # every matmul weight once: a multiply and an add
    total += s["L"] * s["heads"] * (2 * s["head_dim"] * c + 2 * s["head_dim"] * c)  # scores + weighted sum
  return total + head_tokens * 2 * s["V"] * s["H"]


def test_flop_counts_against_a_hand_count(bench, tiny):
  roof = bench["roofline"]
  # 3 positions x 2N, attention 4 x 2 layers x 2 heads x 4 per attended position (1 + 2 + 3), one LM head
  assert roof.fwd_flops(tiny, 0, 3, 1) == 3 * 2 * 1152 + 64 * (1 + 2 + 3) + 2 * 10 * 8 == 7456
  for args in [(0, 3, 1), (4, 5, 2), (7, 1, 1)]:
    assert roof.fwd_flops(tiny, *args) == _brute_forward(tiny, *args)
  # update: 3 x the forward of each row (3 prompt + 2 completion tokens, logits on the 2): 2 rows
  assert roof.update_flops(tiny, 2, 3, 2) == 2 * 3 * (5 * 2304 + 64 * 15 + 2 * 160) == 76800
  # rollout: prefill (logits of the last prompt token) + 2 decoded tokens after the first
  assert roof.rollout_flops(tiny, 2, 3, 3) == 2 * (_brute_forward(tiny, 0, 3, 1) + _brute_forward(tiny, 3, 2, 2))


def test_byte_counts_against_a_hand_count(bench, tiny):
  roof = bench["roofline"]
  assert roof.weight_bytes(tiny) == (1152 + 10 * 8) * 4 == 4928
  assert roof.weight_bytes(tiny, 2) == 2464
  # K and V, 2 layers, 1 head of 4, 5 positions, float32
  assert roof.kv_bytes(tiny, 5) == 2 * 2 * 1 * 4 * 5 * 4 == 320
  assert roof.decode_step_bytes(tiny, 3, 5) == 4928 + 3 * 320
  assert roof.bytes_per_decoded_token(tiny, 3, 5) == pytest.approx((4928 + 960) / 3)


def test_rollout_bound_takes_the_slower_limit_per_decode_step(bench, tiny):
  roof = bench["roofline"]
  # 2 rows, 3 prompt tokens, 3 generated: decode steps read caches of 3 and 4 positions
  step_bytes = [4928 + 2 * (2 * 2 * 1 * 4 * c * 4) for c in (3, 4)]  # weights + 2 rows' K/V: 5312, 5440
  step_flops = [2 * _brute_forward(tiny, c, 1, 1) for c in (3, 4)]
  prefill = 2 * _brute_forward(tiny, 0, 3, 1)
  slow_memory = roof.rollout_bound(tiny, 2, 3, 3, matmul_rate=1e6, bandwidth=1e3)
  assert slow_memory["decode"] == pytest.approx(sum(step_bytes) / 1e3)
  assert slow_memory["prefill"] == pytest.approx(prefill / 1e6)
  assert slow_memory["total"] == pytest.approx(sum(step_bytes) / 1e3 + prefill / 1e6)
  assert slow_memory["decode_bytes"] == sum(step_bytes) and slow_memory["bandwidth_bound_steps"] == 2
  slow_math = roof.rollout_bound(tiny, 2, 3, 3, matmul_rate=1.0, bandwidth=1e12, prefill_flops=100.0)
  assert slow_math["decode"] == pytest.approx(sum(step_flops)) and slow_math["prefill"] == 100.0
  assert slow_math["bandwidth_bound_steps"] == 0 and slow_math["decode_steps"] == 2


def test_roofline_line(bench):
  line = bench["roofline"].roofline_line(50e9, 1.0, 0.7, 1.0, 100e9)
  assert line == "update: 50% of the matmul roofline, rollout: 70% of the bandwidth bound"


def test_stream_read_measures_both_ways_and_keeps_the_faster(bench):
  out = bench["roofline"].stream_read(nbytes=1 << 20, repeats=2, parts=2)
  assert out["bytes"] == 1 << 20 and out["parts"] == 2
  assert out["bytes_per_s"] == max(out["one_call"], out["per_part"]) > 0


def _synthetic_run(tiny: dict, load: float) -> dict:
  """A ``--json`` file of a run: its figures made up (round numbers), its shape the tiny model's."""
  rl = dict(step_s=3.0, sample_s=1.0, update_s=2.0, inputs_s=0.0, proximal_separate=False, completion_len=16.0,
            reward_mean=0.5, prompt_len=40.0, settings="", shape=dict(common=30, chunks=2, microbatches=2))
  trl = dict(step_s=9.0, rollout_s=3.0, completion_len=16.0, reward_mean=0.5, prompt_len=40.0,
             gradient_checkpointing=True, torch="t", transformers="tf", trl="trl")
  gen = {f"{k} b{b}": [float(b) / 8] * 2 for b in (8, 32) for k in ("rljax c1", "rljax c2")}
  gen.update({f"generate b{b}": [float(b) / 4] * 2 for b in (8, 32)})
  return {"shape": tiny, "run_args": [2, 2, 1], "load_guard": dict(load=load, cores=2, allow_load=False),
          "sampler": dict(hf_versions={"torch": "t"}, hf_threads=2, gen_times=gen, prompt_len={"8": 40.0, "32": 40.0},
                          peak_flops={"jax": dict(median=1e11, max=1e11), "torch_1": dict(median=5e10, max=5e10),
                                      "torch_2": dict(median=1e11, max=1e11)},
                          bandwidth=dict(median=1e10, max=1e10)),
          "grpo": {"rljax train": [[rl, rl], [rl, rl]], "TRL float32, 2 thread(s)": [[trl, trl], [trl, trl]],
                   "TRL bfloat16, 2 thread(s)": [[dict(trl, step_s=6.0)] * 2] * 2, "warmup": {}, "trl_probe": {}}}


def test_the_sampler_report_takes_the_best_variant_and_reads_older_files(bench, tiny, tmp_path, capsys):
  run = _synthetic_run(tiny, 1.0)
  path = tmp_path / "old.json"  # a file from before the common-prefix variants: two rljax columns
  path.write_text(json.dumps(run))
  assert bench["real_model_bench"].main(["--report-from", str(path)]) == 0
  out = capsys.readouterr().out
  assert "| rljax 1 call tok/s | rljax 2 chunks tok/s | generate tok/s |" in out and "common prefix" not in out
  assert "**2.00x** (per round 2.00–2.00)" in out
  gen = run["sampler"]["gen_times"]  # the common prefix once: half the time at batch 8, a quarter at 32
  gen.update({f"rljax c1 prefix b{b}": [b / 8 / (2 if b == 8 else 4)] * 2 for b in (8, 32)})
  gen.update({f"rljax c2 prefix b{b}": [b / 8] * 2 for b in (8, 32)})
  run["sampler"]["common_prefix_len"] = 26
  path.write_text(json.dumps(run))
  assert bench["real_model_bench"].main(["--report-from", str(path)]) == 0
  out = capsys.readouterr().out
  assert "common prefix: 26 tokens" in out and "| 1 call, common prefix tok/s | 2 chunks, common prefix tok/s |" in out
  assert "| 8 | 512 | 512 | 1,024 | 512 | 256 | **4.00x** (per round 4.00–4.00) |" in out
  assert "| 32 | 512 | 512 | 2,048 | 512 | 256 | **8.00x** (per round 8.00–8.00) |" in out


@pytest.mark.parametrize("load,allow", [(3.0, False), (3.0, True), (1.0, False)])
def test_the_report_withholds_ratios_on_a_loaded_machine(bench, tiny, tmp_path, capsys, load, allow):
  path = tmp_path / "run.json"
  path.write_text(json.dumps(_synthetic_run(tiny, load)))
  assert bench["real_model_bench"].main(["--report-from", str(path)] + (["--allow-load"] if allow else [])) == 0
  out = capsys.readouterr().out
  shown = load <= 2 or allow
  assert out.startswith("LOADED MACHINE") == (load > 2)
  # raw times always; one ratio per TRL precision row (9 / 3 and 6 / 3), and generate's (2x), only when allowed
  assert "rljax 3.00 s vs TRL float32, 2 thread(s) 9.00 s" in out and "TRL bfloat16, 2 thread(s) 6.00 s" in out
  assert ("**3.00x**" in out) == shown and ("**2.00x**" in out) == shown and ("**2.00x** (per round" in out) == shown
  assert ("ratio withheld" in out) == (not shown)
  assert "update: " in out and "% of the matmul roofline, rollout: " in out and "% of the bandwidth bound" in out


def test_a_file_without_its_load_withholds_ratios(bench, tiny, tmp_path, capsys):
  run = _synthetic_run(tiny, 0.5)
  del run["load_guard"]  # files written before the load guard
  path = tmp_path / "old.json"
  path.write_text(json.dumps(run))
  assert bench["real_model_bench"].main(["--report-from", str(path)]) == 0
  out = capsys.readouterr().out
  assert out.startswith("this file does not record the load") and "**3.00x**" not in out and "withheld" in out


def test_the_limits_command_prints_the_load_and_both_limits(bench, capsys):
  assert bench["roofline"].main(["--n", "64", "--stream-bytes", str(1 << 20), "--repeats", "1"]) == 0
  out = capsys.readouterr().out.splitlines()
  assert out[0].startswith("load average ") and out[1].startswith("float32 matmul 64^3, best of 1: ")
  assert out[2].startswith("streaming read of 1 MiB, best of 1: ")


def test_shared_counts_refuse_a_common_prefix_longer_than_the_prompt(bench):
  """The real-model bench once counted a 51-token common prefix against 45.6-token prompts (its trainer had applied
  the chat template a second time): negative prompt work, an update 20% under its executed FLOPs."""
  roof = bench["roofline"]
  s = dict(H=8, L=2, heads=2, head_dim=4, kv=1, V=16, N=960)
  with pytest.raises(ValueError, match="common prefix of 51"):
    roof.forward_shared(s, 8, 4, 45.6, 13.0, 51, 2)
  with pytest.raises(ValueError, match="common prefix of 51"):
    roof.rollout_flops_shared(s, 8, 4, 45.6, 13.0, 51, 2)
  assert roof.forward_shared(s, 8, 4, 45.6, 13.0, 45, 2) > 0
