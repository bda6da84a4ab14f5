"""``benchmarks/demo_roofline.py`` (issue #53 item 2, the demo's shape): the model shape it counts, the batch
lengths it reads, the phases' bounds against hand counts on a tiny shape, the withheld percentages on a loaded
machine, and one short run of the tiny config."""
import pathlib
import sys

import numpy as np
import pytest

from rljax.models import ModelConfig

BENCH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def demo():
  sys.path.insert(0, str(BENCH))
  try:
    import importlib  # pylint: disable=import-outside-toplevel
    yield importlib.import_module("demo_roofline")
  finally:
    sys.path.remove(str(BENCH))


def _cfg(**kw):
  base = dict(vocab_size=16, hidden_size=8, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=4,
              intermediate_size=12)
  return ModelConfig(**{**base, **kw})


def test_shape_of_counts_the_body_matmuls_by_hand(demo):
  s = demo.shape_of(_cfg())
  # per layer: q 8x(2*4) + o (2*4)x8 = 128, k and v 8x4 each = 64, gate/up/down 3 * 8 * 12 = 288 -> 480; 2 layers
  assert s == dict(H=8, L=2, heads=2, head_dim=4, kv=1, V=16, N=960)


def test_shape_of_refuses_a_mixture_of_experts(demo):
  with pytest.raises(SystemExit, match="mixture of experts"):
    demo.shape_of(_cfg(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=6))


def test_batch_lengths_reads_prompt_and_completion_from_the_loss_mask(demo):
  m = np.zeros((3, 10), bool)
  m[0, 4:7] = True  # prompt 4, completion 3
  m[1, 6:10] = True  # prompt 6, completion 4
  # row 2: no loss token (an invalid row): left out
  assert demo.batch_lengths(m) == (5.0, 3.5)
  assert demo.batch_lengths(np.zeros((2, 4), bool)) == (0.0, 0.0)


def _run(**kw):
  base = dict(prompts=2, group=3, prompt_len=4.0, completion_len=3.0, prefix=0, common=0, rollout_common=0,
              chunks=1, microbatches=1, separate_proximal=False)
  return {**base, **kw}


def _fwd(s, ctx_from, tokens, head):  # the roofline formula, written out again for the hand counts
  ctx = sum(ctx_from + j for j in range(1, tokens + 1))
  return 2 * s["N"] * tokens + 2 * s["V"] * s["H"] * head + 4 * s["L"] * s["heads"] * s["head_dim"] * ctx


def test_update_bound_without_sharing_is_three_forwards_of_every_row(demo):
  s = demo.shape_of(_cfg())
  b = demo.phase_bounds(s, _run(), matmul_rate=1e9, bandwidth=1e9)
  want = 6 * 3 * _fwd(s, 0, 7, 3)  # 6 rows, 3 passes, prompt 4 + completion 3, logits on the 3
  assert b["update_flops"] == pytest.approx(want)
  assert b["update_bound_s"] == pytest.approx(want / 1e9)
  assert b["passes"] == 3
  b4 = demo.phase_bounds(s, _run(separate_proximal=True), matmul_rate=1e9, bandwidth=1e9)
  assert b4["update_flops"] == pytest.approx(4 / 3 * want)


def test_update_bound_with_a_shared_prompt_runs_it_once_per_group(demo):
  s = demo.shape_of(_cfg())
  b = demo.phase_bounds(s, _run(prefix=4, common=1, microbatches=2), matmul_rate=1e9, bandwidth=1e9)
  # per pass: the common token once per micro-batch (2), each group's other 3 prompt tokens once (2 groups), every
  # row's 3 completion tokens after its 4 prompt tokens (6 rows)
  one = 2 * _fwd(s, 0, 1, 0) + 2 * _fwd(s, 1, 3, 0) + 6 * _fwd(s, 4, 3, 3)
  assert b["update_flops"] == pytest.approx(3 * one)


def test_rollout_bound_by_hand(demo):
  s = demo.shape_of(_cfg())
  rate, bw = 1e6, 1e3  # a slow memory: every decode step is bandwidth-bound here
  b = demo.phase_bounds(s, _run(), matmul_rate=rate, bandwidth=bw)["rollout"]
  prefill = 2 * _fwd(s, 0, 4, 1)  # each distinct prompt once (its cache repeated for the group), logits at its end
  steps = []
  for j in (1, 2):  # completion 3: the first token from the prefill, then 2 decode steps at context 4, 5
    nbytes = 4 * (s["N"] + s["V"] * s["H"]) + 6 * 4 * 2 * s["L"] * s["kv"] * s["head_dim"] * (4 + j - 1)
    steps.append(max(nbytes / bw, 6 * _fwd(s, 4 + j - 1, 1, 1) / rate))
  assert b["prefill"] == pytest.approx(prefill / rate)
  assert b["decode"] == pytest.approx(sum(steps))
  assert b["bandwidth_bound_steps"] == 2


def test_report_withholds_percentages_on_a_loaded_machine(demo):
  rules = sys.modules["_peer_rules"]
  s = demo.shape_of(_cfg())
  res = dict(shape=s, run=_run(settings="", rollout_s=1.0, update_s=2.0, rollout_all=[1.0], update_all=[2.0]))
  bw = dict(bytes_per_s=1e9, one_call=1e9, per_part=0.9e9, parts=2)
  quiet = demo.report("tiny", res, 1e9, bw, rules.LoadGuard(load=0.5, cores=2))
  loaded = demo.report("tiny", res, 1e9, bw, rules.LoadGuard(load=5.0, cores=2))
  want = demo.phase_bounds(s, res["run"], 1e9, 1e9)["update_bound_s"] / 2.0
  assert f"{want:.0%} of the matmul roofline" in quiet[-2]
  assert "withheld" in loaded[-2] and "withheld" in loaded[-1]
  assert "%" not in loaded[-2].split("measured")[1].replace("(goal 80%)", "")


@pytest.mark.long  # a whole (tiny) training run: 15-30 s
def test_one_short_run_of_the_tiny_config(demo, tmp_path, monkeypatch):
  import tempfile  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
  res = demo.run_config("tiny", 3, [])
  assert not list(tmp_path.iterdir())  # its run directory is removed
  run = res["run"]
  assert len(run["rollout_all"]) == 2 and len(run["update_all"]) == 2  # steps 2 and 3
  assert run["prompt_len"] > 0 and 0 < run["completion_len"] <= 8
  assert res["shape"]["L"] >= 1 and res["shape"]["N"] > 0
