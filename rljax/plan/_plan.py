"""``plan``: compile a run's programs for a TPU slice with XLA:TPU and say whether each fits, and what it costs.

    rljax plan --target v5e:16x16 --set model.preset=qwen2.5-72b --set mesh.fsdp=-1 --prompt-len 1024 ...

Per program (the RL update, the update's input forward, the rollout): memory per chip as XLA:TPU assigns it
(arguments, temp, total), plus what the run keeps resident beside it (the train state, the reference
parameters), whether that fits the chip's HBM with 10% headroom, compile seconds; per step: model FLOPs and the
lower-bound time at the chip's published peak (``_estimate``), labelled as an estimate. ``max_rollout`` bisects
over compiles for the largest rollout batch that fits and prints it beside the KV-cache bound.
"""
from __future__ import annotations

import dataclasses
import math
import re
import time
from typing import Optional, Sequence

import jax
import numpy as np

from rljax.plan import _estimate
from rljax.plan._programs import (PlanSpec, compile_input_forward, compile_rollout, compile_train_step,
                                  input_forward_needed)

__all__ = ["HEADROOM", "ProgramPlan", "PlanReport", "plan_spec", "plan_model_config", "plan", "max_rollout",
           "format_report"]

GiB = 2 ** 30
HEADROOM = 0.10  # "fits": total <= (1 - HEADROOM) x HBM
PROGRAMS = ("train", "forward", "rollout")


@dataclasses.dataclass(frozen=True)
class ProgramPlan:
  """One compiled program's memory per chip (bytes) and cost.

  ``resident`` is what the run holds on each chip beside this program's own arguments while it runs (the train
  state during a rollout, the reference parameters during the update); ``need = total + resident``.
  """
  name: str
  what: str
  args: int
  out: int
  alias: int
  temp: int
  resident: int
  compile_s: float
  cost: _estimate.Cost
  mosaic: bool = False  # the program holds Pallas kernels compiled by Mosaic (the fused log-prob head on TPU)
  refused: bool = False  # XLA:TPU refused to compile it for lack of HBM (``temp``: the temporaries it named)

  @property
  def total(self) -> int:
    return self.args + self.out - self.alias + self.temp

  @property
  def need(self) -> int:
    return self.total + self.resident


@dataclasses.dataclass(frozen=True)
class PlanReport:
  target: str
  chip: object
  chips: int
  mesh: dict
  spec: PlanSpec
  programs: tuple
  notes: tuple = ()
  rollout_search: Optional[dict] = None

  @property
  def budget(self) -> float:
    return (1 - HEADROOM) * self.chip.hbm_bytes

  def failing(self) -> list:
    return [p for p in self.programs if p.need > self.budget]


def plan_model_config(cfg):
  """The policy's ``ModelConfig`` from a ``RunConfig`` without building a model or loading weights.

  ``model.preset`` (``rljax.models.presets``), ``model.hf_checkpoint`` (its ``config.json``; no weights read
  from a directory or a cached Hub snapshot),
  else the from-scratch decoder of ``model.*`` (its vocabulary from the task's tokenizer). Dtypes:
  ``model.dtype`` for the parameters, ``model.compute_dtype`` (or ``dtype``) for activations.
  """
  from rljax.models import ModelConfig, presets  # pylint: disable=import-outside-toplevel
  m = cfg.model
  common = dict(param_dtype=m.dtype, compute_dtype=m.compute_dtype or m.dtype, remat=m.remat,
                scan_layers=m.scan_layers, lora=m.lora, attention_query_chunk=m.attention_query_chunk)
  if m.preset:
    return presets.get(m.preset, **common)
  if m.hf_checkpoint:  # a directory, a .gguf file (its converted directory) or a Hub id (its cached snapshot)
    from rljax.models import config_from_hf, load_hf_config, resolve_checkpoint  # pylint: disable=import-outside-toplevel
    return config_from_hf(load_hf_config(resolve_checkpoint(m.hf_checkpoint, m.hf_revision)), **common)
  from rljax.train import build_codec, build_task  # pylint: disable=import-outside-toplevel
  codec = build_codec(cfg, build_task(cfg))
  return ModelConfig(vocab_size=int(codec.tok.vocab_size), hidden_size=m.hidden_size, num_layers=m.num_layers,
                     num_heads=m.num_heads, num_kv_heads=m.num_kv_heads, head_dim=m.hidden_size // m.num_heads,
                     intermediate_size=m.intermediate_size, max_position_embeddings=m.max_seq_len,
                     bos_token_id=codec.bos_id, eos_token_id=codec.eos_id, pad_token_id=codec.pad_id,
                     **(dict(num_experts=m.num_experts, num_experts_per_tok=m.num_experts_per_tok,
                             moe_intermediate_size=m.expert_width, moe_layers=m.moe_layers)
                        if m.num_experts else {}), **common)


def plan_spec(cfg, *, prompt_len: int, new_tokens: Optional[int] = None, prompts: Optional[int] = None) -> PlanSpec:
  """The :class:`PlanSpec` of a ``RunConfig`` (``new_tokens`` default ``rl.max_new_tokens``)."""
  for name, v in (("prompt_len", prompt_len), ("new_tokens", new_tokens), ("prompts", prompts)):
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
      raise ValueError(f"{name} must be a positive int, got {v!r}")
  model = plan_model_config(cfg)
  new = cfg.rl.max_new_tokens if new_tokens is None else new_tokens
  if prompt_len + new > model.max_position_embeddings:
    raise ValueError(f"prompt_len (--prompt-len) {prompt_len} + new tokens {new} exceed the model's max_position_embeddings "
                     f"{model.max_position_embeddings}")
  return PlanSpec(model=model, rl=cfg.rl, prompt_len=prompt_len, new_tokens=new,
                  sampler_dtype=cfg.rl.sampler_dtype or cfg.model.dtype,
                  prompts=cfg.rl.num_prompts if prompts is None else prompts)


def _shard_bytes(tree) -> int:
  """Bytes of ``tree``'s abstract arrays that one chip holds (their shardings' shard shapes)."""
  total = 0
  for x in jax.tree.leaves(tree):
    shape = x.sharding.shard_shape(x.shape) if getattr(x, "sharding", None) is not None else x.shape
    total += math.prod(shape) * np.dtype(x.dtype).itemsize
  return total


def _resident_bytes(spec: PlanSpec, mesh) -> dict:
  """Per chip: the train state (parameters + optimizer state), the parameters, the reference parameters."""
  from flax import nnx  # pylint: disable=import-outside-toplevel
  from rljax import parallel as par  # pylint: disable=import-outside-toplevel
  from rljax.models import Transformer  # pylint: disable=import-outside-toplevel
  from rljax.train import init_train_state  # pylint: disable=import-outside-toplevel
  from rljax.train import REFERENCE_NEEDS  # pylint: disable=import-outside-toplevel
  from rljax.train import make_optimizer  # pylint: disable=import-outside-toplevel
  recipe = spec.recipe()
  opt, _ = make_optimizer(spec.rl.optim, 1)
  state = jax.eval_shape(lambda: init_train_state(Transformer(spec.model, rngs=nnx.Rngs(0)), opt,
                                                  recipe.initial_hparams())[1])
  placed = par.abstract_with_shardings(state, par.train_state_shardings(state, mesh))
  params = _shard_bytes(placed.params)
  return {"state": _shard_bytes(placed), "params": params,
          "reference": params if recipe.needs & REFERENCE_NEEDS else 0}


def _analyse(name, what, compiled, seconds, resident, cost) -> ProgramPlan:
  m = compiled.memory_analysis()
  return ProgramPlan(name=name, what=what, args=int(m.argument_size_in_bytes), out=int(m.output_size_in_bytes),
                     alias=int(getattr(m, "alias_size_in_bytes", 0)), temp=int(m.temp_size_in_bytes),
                     resident=int(resident), compile_s=seconds, cost=cost,
                     mosaic="tpu_custom_call" in compiled.as_text(), refused=isinstance(compiled, _Refused))


_REQUIRED = re.compile(r"memory required for HLO temporaries \(([0-9.]+)([KMGT])\)")


def out_of_memory_bytes(error: Exception) -> Optional[int]:
  """The temporaries XLA:TPU says a refused program needs ("Ran out of memory on HBM, the total memory required
  for HLO temporaries (16.89G) exceeds available HBM (15.75G)"), or None when ``error`` is another error."""
  text = str(error)
  if "ran out of memory" not in text.lower() and "resource_exhausted" not in text.lower():
    return None
  m = _REQUIRED.search(text)
  return int(float(m.group(1)) * 1024 ** "KMGT".index(m.group(2)) * 1024) if m else -1


class _Refused:
  """Stands in for a compiled program XLA:TPU refused for lack of HBM: its temporaries as the error gives them."""

  def __init__(self, temp: int):
    self.temp = temp

  def memory_analysis(self):
    return type("Memory", (), dict(argument_size_in_bytes=0, output_size_in_bytes=0, alias_size_in_bytes=0,
                                   temp_size_in_bytes=max(self.temp, 0)))()

  def as_text(self) -> str:
    return ""


def _compile_or_refused(fn, *args, **kw):
  """``(compiled, seconds)``; a program refused for HBM comes back as :class:`_Refused` (the report says so)."""
  t0 = time.perf_counter()
  try:
    out = fn(*args, **kw)
  except Exception as e:  # pylint: disable=broad-except  (XLA:TPU's refusal is a JaxRuntimeError)
    need = out_of_memory_bytes(e)
    if need is None:
      raise
    out = _Refused(need)
  return out, time.perf_counter() - t0


def _sampler_weight_bytes(spec: PlanSpec) -> float:
  from rljax.models import presets  # pylint: disable=import-outside-toplevel
  return presets.num_params(spec.model) * (2 if spec.sampler_dtype in ("bfloat16", "float16") else 4)


def plan(spec: PlanSpec, mesh, target: str, *, programs: Sequence[str] = PROGRAMS, log=None) -> PlanReport:
  """Compiles ``programs`` of ``spec`` over ``mesh`` (a TPU slice's, ``rljax.parallel.topology_mesh``)."""
  from rljax.parallel import chip_of  # pylint: disable=import-outside-toplevel
  bad = [p for p in programs if p not in PROGRAMS]
  if bad or not programs:
    raise ValueError(f"programs must be a non-empty subset of {PROGRAMS}, got {list(programs)}")
  say = log or (lambda *_: None)
  chip, chips = chip_of(target), int(mesh.size)
  cfg, rl = spec.model, spec.rl
  res = _resident_bytes(spec, mesh)
  notes = ["the shared-prompt layout (rl.share_prompt_forward) is not planned: every row is scored whole"]
  if spec.recipe().critic is not None:
    notes.append("a critic's programs are not planned")
  out = []
  if "train" in programs:
    say("compiling the RL update ...")
    compiled, s = _compile_or_refused(compile_train_step, spec, mesh)
    mb = f", {spec.microbatches} micro-batches" if spec.microbatches > 1 else ""
    out.append(_analyse("train", f"RL update: {spec.rows} x {spec.seq} tokens{mb}", compiled, s, res["reference"],
                        _estimate.train_cost(cfg, spec.rows, spec.seq, chips)))
  which = input_forward_needed(spec)
  if "forward" in programs and which:
    say(f"compiling the {which} forward ...")
    compiled, s = _compile_or_refused(compile_input_forward, spec, mesh)
    passes = len(which.split(" + "))
    cost = _estimate.forward_cost(cfg, spec.rows, spec.seq, chips)
    out.append(_analyse("forward", f"{which} forward: {spec.rows} x {spec.seq} tokens", compiled, s,
                        res["state"] + res["reference"] - res["params"],
                        _estimate.Cost(cost.flops * passes, cost.bytes_per_chip * passes)))
  elif "forward" in programs:
    notes.append("no input forward: the recipe needs no reference log-probs and the proximal ones come from "
                 "the update's own forward")
  if "rollout" in programs:
    say("compiling the rollout ...")
    compiled, s = _compile_or_refused(compile_rollout, spec, mesh)
    same = spec.sampler_dtype == cfg.param_dtype and cfg.lora is None
    resident = res["state"] + res["reference"] - (res["params"] if same else 0)
    out.append(_analyse("rollout", f"rollout: {spec.prompts} prompts x {rl.group_size} samples, "
                        f"{spec.prompt_len} + {spec.new_tokens} tokens, {spec.sampler_dtype} weights", compiled, s,
                        resident, _estimate.rollout_cost(cfg, spec.prompts, rl.group_size, spec.prompt_len,
                                                         spec.new_tokens, chips, _sampler_weight_bytes(spec))))
  return PlanReport(target=target, chip=chip, chips=chips, mesh=dict(mesh.shape), spec=spec, programs=tuple(out),
                    notes=tuple(notes))


def kv_bound_rows(spec: PlanSpec, mesh, chip) -> int:
  """The rollout rows whose KV cache, with the sampler weights' shard, fills ``1 - HEADROOM`` of a chip's HBM.

  Each chip holds ``rows / (data x fsdp)`` rows, each with ``num_kv_heads / tensor`` heads of ``prompt_len +
  new_tokens`` slots in bfloat16 (the sampler's cache), and ``1 / chips`` of the weights."""
  cfg = spec.model
  split = int(mesh.shape["data"]) * int(mesh.shape["fsdp"])
  heads = min(int(mesh.shape["tensor"]), cfg.num_kv_heads)
  row = _estimate.kv_bytes_per_row(cfg, spec.seq) / heads
  room = (1 - HEADROOM) * chip.hbm_bytes - _sampler_weight_bytes(spec) / mesh.size
  return max(int(room * split // row), 0)


def max_rollout(spec: PlanSpec, mesh, target: str, *, max_rows: int = 1 << 16, log=None,
                known: Optional[dict] = None) -> dict:
  """The largest rollout (prompts x ``group_size`` rows) whose program fits, by bisection over compiles.

  Rollouts are planned alone (the train state elsewhere or offloaded is the user's choice): the figure is the
  rollout program's own ``total`` against the budget. The search starts at the KV-cache bound's last multiple of the
  row unit (one more unit must then fail: two compiles where the bound is close), bisects below it when that does not
  fit, doubles above it when the next does, and stops at ``max_rows`` (``capped``: even that many rows fit).
  ``known``: ``{prompts: total bytes}`` of rollouts already compiled (``math.inf``: refused), e.g. the plan's own
  rollout, so that the search does not compile them again; ``compiles`` counts the search's own.
  Returns ``{"rows", "prompts", "total", "bound_rows", "bound_share", "compiles", "capped"}``."""
  from rljax.parallel import chip_of  # pylint: disable=import-outside-toplevel
  say = log or (lambda *_: None)
  chip = chip_of(target)
  budget = (1 - HEADROOM) * chip.hbm_bytes
  n = spec.rl.group_size
  split = int(mesh.shape["data"]) * int(mesh.shape["fsdp"])
  unit = split // math.gcd(n, split)  # prompts per step that keep rows divisible by data x fsdp
  bound = kv_bound_rows(spec, mesh, chip)
  tried = {p // unit: t for p, t in (known or {}).items() if p % unit == 0}
  reused = len(tried)

  def total_of(k):
    if k not in tried:
      say(f"rollout of {k * unit} prompts x {n} ...")
      compiled, _ = _compile_or_refused(compile_rollout, spec, mesh, prompts=k * unit)
      m = compiled.memory_analysis()
      tried[k] = (math.inf if isinstance(compiled, _Refused) else
                  m.argument_size_in_bytes + m.output_size_in_bytes - getattr(m, "alias_size_in_bytes", 0)
                  + m.temp_size_in_bytes)
    return tried[k]

  cap = max(1, max_rows // (unit * n))
  # The KV-cache bound is an upper estimate (the cache alone at the budget), so the search starts at its last
  # multiple of the row unit: where the estimate is close, two compiles (that one fits, the next does not) decide.
  start = min(cap, max(1, int(bound) // (unit * n)))
  if total_of(start) <= budget:
    lo, hi = start, min(cap, start + 1)
  else:
    lo, hi = 0, start
  capped = False
  if hi == lo:  # start == cap and it fits
    lo, capped = hi, True
  while not capped and total_of(hi) <= budget:  # the bound is an estimate: make sure hi does not fit
    if hi >= cap:
      lo, capped = hi, True
      break
    lo, hi = hi, min(hi * 2, cap)
  while not capped and hi - lo > 1:
    mid = (lo + hi) // 2
    if total_of(mid) <= budget:
      lo = mid
    else:
      hi = mid
  rows = lo * unit * n
  return {"rows": rows, "prompts": lo * unit, "total": tried.get(lo, 0), "bound_rows": bound,
          "bound_share": rows / bound if bound else 0.0, "compiles": len(tried) - reused, "capped": capped}


def _advice(p: ProgramPlan, spec: PlanSpec, mesh_shape: dict) -> str:
  """The first two things to try when ``p`` does not fit."""
  cfg = spec.model
  tips = []
  if p.name == "rollout":
    tips += ["fewer rollout rows (rl.num_prompts; --max-rollout finds the largest that fits)"]
    if spec.sampler_dtype == "float32":
      tips.append("rl.sampler_dtype=bfloat16")
  if p.name == "train":
    if cfg.remat == "none":
      tips.append("model.remat=full")
    if not cfg.attention_query_chunk and spec.seq >= 1024:  # the 72B step on v5e-256: 15.51 -> 13.94 GiB at 512
      tips.append("model.attention_query_chunk=512")
    if spec.rows // (int(mesh_shape["data"]) * int(mesh_shape["fsdp"])) > spec.microbatches:
      tips.append(f"rl.num_microbatches={2 * spec.microbatches}")
    if not cfg.scan_layers:
      tips.append("model.scan_layers=true")
  if int(mesh_shape["fsdp"]) < math.prod(int(v) for v in mesh_shape.values()):
    tips.append("a larger fsdp axis (mesh.fsdp=-1)")
  if cfg.lora is None:
    tips.append("LoRA (model.lora_rank=16)")
  tips.append("a larger slice")
  return "; ".join(tips[:2])


def _loss_text(rl) -> str:
  return f"{rl.loss} ({rl.aggregation}), {rl.num_prompts} prompts x {rl.group_size}, AdamW"


def format_report(report: PlanReport) -> str:
  """The report as printed by ``rljax plan``."""
  chip, spec = report.chip, report.spec
  cfg = spec.model
  from rljax.models import presets  # pylint: disable=import-outside-toplevel
  lines = [f"rljax plan: {report.target} ({report.chips} x {chip.device_kind}, {chip.hbm_bytes / GiB:.0f} GiB HBM "
           f"per chip; fits = within {1 - HEADROOM:.0%}: {report.budget / GiB:.2f} GiB), compiled by XLA:TPU",
           f"model: {presets.num_params(cfg) / 1e9:.2f}B parameters ({cfg.num_layers} layers, H {cfg.hidden_size}, "
           f"V {cfg.vocab_size}), {cfg.param_dtype} parameters, {cfg.compute_dtype} compute, remat {cfg.remat}, "
           f"{'scanned' if cfg.scan_layers else 'unrolled'} layers{', LoRA r=%d' % cfg.lora.rank if cfg.lora else ''}",
           f"mesh: {', '.join(f'{k}={v}' for k, v in report.mesh.items())}; loss: {_loss_text(spec.rl)}",
           "",
           "| program | memory per chip (GiB): args / temp / total | + resident | need | fits | compile s | "
           "model TFLOPs | lower bound s (est.) |",
           "|---|---|---|---|---|---|---|---|"]
  for p in report.programs:
    fits = "yes" if p.need <= report.budget else f"NO (over by {(p.need - report.budget) / GiB:.2f})"
    if p.refused:
      fits = "NO: XLA:TPU refused it (temporaries alone exceed the HBM; args not known)"
    head = " (Pallas head)" if p.mosaic else ""
    lines.append(f"| {p.what}{head} | {p.args / GiB:.3f} / {p.temp / GiB:.3f} / {p.total / GiB:.3f} | "
                 f"{p.resident / GiB:.3f} | {p.need / GiB:.3f} | {fits} | {p.compile_s:.0f} | "
                 f"{p.cost.flops / 1e12:,.1f} | {p.cost.seconds(chip, report.chips):.3g} |")
  lines.append("")
  lines.append("lower bound = max(model FLOPs / (chips x bf16 peak), bytes per chip / HBM bandwidth) at the "
               f"chip's published {chip.bf16_flops / 1e12:.0f} TFLOP/s and {chip.hbm_bytes_per_s / 1e9:.0f} GB/s: "
               "an estimate, not a measured time")
  lines += [f"note: {n}" for n in report.notes]
  if report.rollout_search:
    r = report.rollout_search
    lines.append(f"largest rollout that fits: {'at least ' if r['capped'] else ''}{r['rows']} rows ({r['prompts']} "
                 f"prompts x {spec.rl.group_size}), {r['total'] / GiB:.2f} GiB per chip; KV-cache bound "
                 f"{r['bound_rows']} rows ({r['bound_share']:.1%} of it; the search compiled {r['compiles']} "
                 "rollout(s) beyond the plan's own)")
  for p in report.failing():
    lines.append(f"DOES NOT FIT: {p.name} needs {p.need / GiB:.2f} GiB per chip, {(p.need - report.budget) / GiB:.2f} "
                 f"GiB over; try {_advice(p, spec, report.mesh)}")
  return "\n".join(lines)

