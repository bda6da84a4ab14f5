"""What a run is built from: the task, tokenizer, model, sampler config and device mesh (``build_experiment``).

Also the small pieces every stage of a run shares: the sharded train step (``ShardedStep``), console logging
on process 0 and the metrics writer stand-in on other processes (stopping on a signal: ``_signals.py``).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Optional

import jax
import numpy as np
from flax import nnx

from rljax import parallel as par
from rljax.train._codec import Codec
from rljax.train._config import RunConfig
from rljax.train._step import make_train_step

__all__ = ["Experiment", "build_task", "build_codec", "build_experiment", "run_mesh", "ShardedStep", "NoWriter",
           "log", "host_scalars", "resolve_auto_settings"]


def log(cfg: RunConfig, *msg) -> None:
  """Prints on process 0 when the run shows progress."""
  if cfg.progress is not None and jax.process_index() == 0:
    print(*msg, flush=True)


def host_scalars(metrics) -> dict:
  """A dict of (possibly sharded) scalar arrays -> floats on every process."""
  return {k: float(v) for k, v in par.to_host(metrics).items()}


def host_means(metrics: list) -> dict:
  """Each key's mean over ``metrics`` (dicts of scalar arrays with the same keys, e.g. one per update), as
  floats on every process: one transfer of every value, then each key's mean on the host in its own float
  dtype (integer counts in float32, as ``jnp.mean``).

  Not ``tree_map(lambda *xs: jnp.mean(jnp.stack(xs)), *metrics)``: that launches two small programs per key,
  and on a mesh of several CPU devices each launch takes one of a device's 32 in-flight slots (XLA:CPU's
  ``max_inflight_computations_per_device``) before it waits for the update's outputs. With ~20 keys the later
  launches can take every slot of one device while the update's own launch there still waits for a slot, and
  the update's other devices wait for it in their collectives: a hang, seen in CI and reproduced on a loaded
  2-core machine (gdb: the second training device's launch blocked in the in-flight semaphore, the first in the
  update's gloo all-gather, Python in a metric's ``jnp.stack``)."""
  host = par.to_host(list(metrics))
  out = {}
  for k in host[0]:
    values = np.asarray([m[k] for m in host])
    dtype = values.dtype if np.issubdtype(values.dtype, np.floating) else np.float32  # as jnp.mean promotes
    out[k] = float(np.mean(values.astype(dtype), dtype=dtype))
  return out


def run_mesh(cfg: RunConfig):
  """The run's device mesh from ``cfg.mesh`` (``rljax.parallel.make_mesh``).

  A mesh with fixed axis sizes whose product is smaller than the number of
  devices uses the first devices (one process only: a multi-process mesh
  must cover every device). The default ``MeshConfig(1, 1, 1, 1)`` is one device.
  """
  devices = jax.devices()
  sizes = cfg.mesh.sizes
  n = int(np.prod(sizes))
  if -1 not in sizes and n < len(devices):
    if jax.process_count() > 1:
      raise ValueError(f"mesh {cfg.mesh} uses {n} of the {len(devices)} devices of {jax.process_count()} "
                       "processes; a multi-process mesh must cover every device (set one mesh axis to -1)")
    devices = devices[:n]
  return par.make_mesh(cfg.mesh, devices)


class ShardedStep:
  """A train state placed on the mesh and its sharded, jitted step (``rljax.parallel``)."""

  def __init__(self, graphdef, state, loss, opt, mesh, **step_kwargs):
    self.mesh = mesh
    self.shardings = par.train_state_shardings(state, mesh)
    self.state = par.place_global(state, self.shardings)
    self.step = par.shard_train_step(
        make_train_step(graphdef, par.fsdp_loss_fn(loss, mesh), opt, jit=False, **step_kwargs),
        self.shardings, mesh)


class NoWriter:
  """Stands in for ``MetricsWriter`` on processes other than 0 (rows computed, nothing written)."""

  def truncate(self, stage, step):
    pass

  def write(self, stage, step, metrics):
    return {"stage": stage, "step": int(step), **metrics}

  def close(self):
    pass


LARGE_MODEL_PARAMS = 25_000_000  # from here up, auto takes 2 update micro-batches on a CPU (not 4)


def resolve_auto_settings(cfg: RunConfig, n_params: int):
  """``cfg`` with ``rl.num_microbatches`` / ``rl.concurrent_rollouts`` = 0 (auto) chosen for this machine.

  Measured on a 2-core CPU (``benchmarks/cpu_settings_bench.py``, docs/training.md): 4 update micro-batches made
  the GRPO step 4-23% faster in every condition tried (1 or 2 cores, another busy process, 133K and 4.4M
  parameter models, 16 or 32 prompts); on SmolLM2-135M (32 rows, groups of 4; the update alone, interleaved in one
  process) 2 micro-batches took 4.49 s, 4 took 4.81 s, 1 took 6.5 s and 8 took 5.7 s, hence 2 from
  ``LARGE_MODEL_PARAMS`` (25M) parameters up; 2 concurrent rollout chunks helped only the 4.4M-parameter model on 2
  cores (with micro-batches: 0.85-0.89x the default step) and were slower on 1 core (1.04x) and neutral to
  slower on the 133K demo model. Hence, on a CPU backend: ``num_microbatches = 4`` (2 from 25M parameters)
  when each micro-batch holds whole groups (else 1), ``concurrent_rollouts = 2`` with at least 2 usable cores, one process and a
  model of at least 1M parameters (else 1). Accelerators: 1 and 1. Explicit values are kept.

  Returns ``(cfg, what was chosen and why)`` (``Experiment.auto_settings``; ``train`` logs it).
  """
  rl = cfg.rl
  cpu = jax.default_backend() == "cpu"
  cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
  mini = rl.batch_size // rl.num_minibatches
  changes, why = {}, []
  if rl.num_microbatches == 0:
    k = 2 if n_params >= LARGE_MODEL_PARAMS else 4
    whole = mini % k == 0 and (mini // k) % rl.group_size == 0
    changes["num_microbatches"] = k if cpu and whole else 1
    why.append(f"rl.num_microbatches=auto -> {changes['num_microbatches']} "
               f"({'CPU' if cpu else jax.default_backend()}, mini-batch {mini} rows, groups of {rl.group_size})")
  if rl.concurrent_rollouts == 0:
    big = n_params >= 1_000_000
    changes["concurrent_rollouts"] = 2 if cpu and cores >= 2 and big and jax.process_count() == 1 else 1
    why.append(f"rl.concurrent_rollouts=auto -> {changes['concurrent_rollouts']} "
               f"({'CPU' if cpu else jax.default_backend()}, {cores} cores, {n_params:,} parameters)")
  return (cfg.replace(rl=dataclasses.replace(rl, **changes)) if changes else cfg), "; ".join(why)


@dataclasses.dataclass
class Experiment:
  """Everything ``train`` builds from a config (also used by ``rljax eval/sample``)."""
  cfg: RunConfig
  task: object
  tokenizer: object
  codec: Codec
  model: nnx.Module
  sampler_config: object
  train_problems: list
  test_problems: list
  seq_len: int
  auto_settings: str = ""  # what rl.num_microbatches / rl.concurrent_rollouts = 0 (auto) resolved to, and why
  runner: Optional[object] = None  # multi-turn env tasks: the episode runner's RunnerConfig (else None)
  shortest_train_prompt: Optional[int] = None  # tokens of the shortest training prompt (None: not counted)
  # tokens every training prompt starts with, for the update (None: the sampler's ``common_prefix``)
  common_train_prefix: Optional[int] = None

  @property
  def multi_turn(self) -> bool:
    return self.runner is not None

  def episode_fn(self, graphdef=None, params=None, model_state=None, *, dtype: str = ""):
    """Multi-turn tasks: ``fn(problems, *, n, greedy, temperature, key, group_ids=None) -> EpisodeBatch``, the
    episodes of ``n`` samples of each problem on these parameters (``rljax.envs.run_episodes``)."""
    from rljax.envs import run_episodes  # pylint: disable=import-outside-toplevel
    from rljax.models import with_dtype  # pylint: disable=import-outside-toplevel
    model = self.model if graphdef is None else nnx.merge(graphdef, params, model_state)
    if dtype:
      model = with_dtype(model, dtype)
    task, rc = self.task, self.runner
    split = nnx.split(model)

    def fn(problems, *, n, greedy, temperature, key, group_ids=None):
      return run_episodes(split, task.env, [task.env_problem(p) for p in problems], tokenizer=self.codec,
                          episode_config=task.episode_config, runner_config=rc, key=key, n=n,
                          seeds=[task.seed(p) for p in problems], temperature=temperature, greedy=greedy,
                          group_ids=group_ids)
    return fn

  def sample_fn(self, graphdef=None, params=None, model_state=None, *, dtype: str = ""):
    """``fn(prompt_ids, *, n, greedy, temperature, key, rows=None) -> Rollout`` for given parameters.

    The rollout comes back as NumPy arrays: all rows (gathered from every
    process in a multi-host run), or only rows ``rows = (lo, hi)``. ``dtype``
    (``rl.sampler_dtype``; "" = the model's): the sampler runs a copy of the
    model in that dtype (``rljax.models.with_dtype``). MoE models
    return the routing they used (``Rollout.routing``) when ``rl.routing_replay``
    or ``rl.sampler_dtype`` is set (replay and the mismatch metrics read it).
    """
    from rljax.models import with_dtype  # pylint: disable=import-outside-toplevel
    from rljax.sampling import generate  # pylint: disable=import-outside-toplevel
    model = self.model if graphdef is None else nnx.merge(graphdef, params, model_state)
    if dtype:
      model = with_dtype(model, dtype)
    stops = list(self.codec.stop_ids)
    cfg = self.sampler_config

    def fn(prompts, *, n, greedy, temperature, key, rows=None):
      rollout = generate(model, prompts, config=cfg, key=key, n=n, greedy=greedy,
                         temperature=1.0 if greedy else temperature, stop_tokens=stops)
      return par.to_host(rollout) if rows is None else par.host_rows(rollout, *rows)
    return fn


def build_task(cfg: RunConfig):
  """The task of ``cfg.task`` (``rljax.envs.get_task``)."""
  from rljax.envs import get_task  # pylint: disable=import-outside-toplevel
  t = cfg.task
  from rljax.envs import (ENV_TASK_NAMES, OWN_ENV_TASK, get_env_task,  # pylint: disable=import-outside-toplevel
                          own_env_task)
  if t.name == OWN_ENV_TASK:  # your own environment: its factory, called now (at start-up, before any write)
    return own_env_task(t.env, max_turns=t.max_turns or None, context_budget=t.context_budget or None,
                        need_demonstrations=cfg.sft.steps > 0 and cfg.sft.init_from is None)
  if t.name in ENV_TASK_NAMES:
    return get_env_task(t.name, max_turns=t.max_turns or None, demo_tool_prob=t.demo_tool_prob,
                        context_budget=t.context_budget or None)
  if t.name == "arithmetic":
    return get_task("arithmetic", digits=t.digits, sloppy_carry_prob=t.sloppy_carry_prob,
                    reverse_operands=t.reverse_operands)
  if t.name == "jsonl":
    return get_task("jsonl", path=t.path, verifier=t.verifier, eval_path=t.eval_path, eval_fraction=t.eval_fraction,
                    prompt_field=t.prompt_field, answer_field=t.answer_field)
  if t.name == "tfds":
    return get_task("tfds", data_dir=t.tfds_dir, dataset=t.dataset, verifier=t.verifier, train_split=t.train_split,
                    eval_split=t.eval_split, prompt_field=t.prompt_field, answer_field=t.answer_field)
  kwargs = {}
  if t.tfds_dir is not None:
    kwargs["data_dir"] = t.tfds_dir
  task = get_task(t.name, **kwargs)  # the chat template is the Codec's (build_experiment), not the task's
  data_dir = getattr(task, "data_dir", None)  # a task read from a local TFDS directory (gsm8k): named as set
  if isinstance(data_dir, str) and not os.path.isdir(os.path.expanduser(data_dir)):
    raise ValueError(f"task.tfds_dir {data_dir!r}{' (the default)' if t.tfds_dir is None else ''} does not exist: "
                     f"the local TFDS directory of the {t.name} task; prepare it with `tfds build {t.name} "
                     "--data_dir=<dir> --file_format=array_record` on a machine with internet and copy it here")
  return task


def build_codec(cfg: RunConfig, task, tokenizer=None) -> Codec:
  """The run's tokenizer and ``Codec``: the checkpoint's tokenizer (``model.hf_checkpoint``) or a character
  SentencePiece model trained on the task's corpus, with the chat template ``task.chat_template`` resolves to
  (``resolve_chat_template``) and the checkpoint's end tokens (``checkpoint_eos_ids``). A template on a tokenizer
  trained here: its text is part of the corpus (every character gets an id)."""
  from rljax.data import load_tokenizer, train_sentencepiece  # pylint: disable=import-outside-toplevel
  from rljax.train._codec import checkpoint_eos_ids, resolve_chat_template  # pylint: disable=import-outside-toplevel
  hf = cfg.model.hf_checkpoint
  if hf:
    from rljax.models import resolve_checkpoint  # pylint: disable=import-outside-toplevel
    hf = resolve_checkpoint(hf, cfg.model.hf_revision)  # a .gguf file: its converted directory; a Hub id: its snapshot
    if not os.path.exists(hf):  # named as the user set it, not as the tokenizer loader's argument
      raise ValueError(f"model.hf_checkpoint {cfg.model.hf_checkpoint!r} does not exist (a Hugging Face checkpoint "
                       "directory, a .gguf file or a Hub id)")
  if tokenizer is None and hf:
    tokenizer = load_tokenizer(hf)
  template, described = resolve_chat_template(cfg.task.chat_template, tokenizer, task_name=cfg.task.name,
                                              hf_checkpoint=hf)
  if tokenizer is None:
    # deterministic: every process trains the same tokenizer (``train`` writes it into the run directory)
    corpus = task.corpus()
    if template is not None:
      corpus = corpus + [_template_text(template)]
    tokenizer = train_sentencepiece(corpus, None, model_type="char")
  return Codec(tokenizer, template, extra_stop_ids=checkpoint_eos_ids(hf), template_name=described)


def _template_text(template: str) -> str:
  """Everything a built-in template writes around a system, user and assistant message (the characters a
  tokenizer trained here needs)."""
  from rljax.data import SPECIAL_TOKEN_NAMES, TEMPLATES, ChatTemplate  # pylint: disable=import-outside-toplevel
  msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]
  t = ChatTemplate(TEMPLATES.get(template, template))
  specials = dict.fromkeys(SPECIAL_TOKEN_NAMES, "")  # the tokenizer's special pieces are ids, not characters
  return "".join(t.render(m, add_generation_prompt=True, special_tokens=specials) for m in (msgs, msgs[1:]))


def build_experiment(cfg: RunConfig, *, model_seed: Optional[int] = None) -> Experiment:
  """Task, tokenizer, problems, a freshly initialised model and the sampler config."""
  from rljax.models import fan_in_init, ModelConfig, Transformer  # pylint: disable=import-outside-toplevel
  from rljax.envs import MULTI_TURN_TASKS  # pylint: disable=import-outside-toplevel
  from rljax.sampling import SamplerConfig  # pylint: disable=import-outside-toplevel

  task = build_task(cfg)
  codec = build_codec(cfg, task)
  tokenizer = codec.tok
  train_problems = task.problems("train", cfg.task.num_train, cfg.seed)
  test_problems = task.problems("test", cfg.task.num_test, 0)  # fixed held-out set across seeds
  m = cfg.model
  if m.preset:  # an architecture without weights: `rljax plan` compiles it; training it from scratch is not wired
    raise ValueError(f"model.preset={m.preset!r} is read by `rljax plan` only; to train, set model.hf_checkpoint "
                     "(a checkpoint of that model) or the from-scratch model.* fields")
  if m.hf_checkpoint:
    from rljax.models import from_pretrained, resolve_checkpoint  # pylint: disable=import-outside-toplevel
    model = from_pretrained(resolve_checkpoint(m.hf_checkpoint, m.hf_revision), dtype=m.dtype,
                            compute_dtype=m.compute_dtype or None, remat=m.remat,
                            scan_layers=m.scan_layers, lora=m.lora, attention_query_chunk=m.attention_query_chunk)
    rows = int(model.cfg.vocab_size)
    if int(tokenizer.vocab_size) > rows:
      raise ValueError(f"the tokenizer of {m.hf_checkpoint!r} has ids 0..{int(tokenizer.vocab_size) - 1} "
                       f"({int(tokenizer.vocab_size)} ids, added tokens included) but the model's embedding has "
                       f"{rows} rows (config.json vocab_size): a token id past row {rows - 1} has no embedding; "
                       "use the tokenizer the checkpoint was trained with")
  else:
    mcfg = ModelConfig(vocab_size=int(tokenizer.vocab_size), hidden_size=m.hidden_size, num_layers=m.num_layers,
                       num_heads=m.num_heads, num_kv_heads=m.num_kv_heads, head_dim=m.hidden_size // m.num_heads,
                       intermediate_size=m.intermediate_size, max_position_embeddings=m.max_seq_len,
                       param_dtype=m.dtype, compute_dtype=m.compute_dtype or m.dtype, remat=m.remat,
                       scan_layers=m.scan_layers, attention_query_chunk=m.attention_query_chunk,
                       bos_token_id=codec.bos_id, eos_token_id=codec.eos_id, pad_token_id=codec.pad_id, lora=m.lora,
                       **(dict(num_experts=m.num_experts, num_experts_per_tok=m.num_experts_per_tok,
                               moe_intermediate_size=m.expert_width, moe_layers=m.moe_layers)
                          if m.num_experts else {}))
    model = Transformer(mcfg, rngs=nnx.Rngs(cfg.seed if model_seed is None else model_seed))
    if m.init == "fan_in":
      fan_in_init(model)
  n_params = sum(x.size for x in jax.tree_util.tree_leaves(nnx.state(model, nnx.Param)))
  cfg, auto_settings = resolve_auto_settings(cfg, n_params)
  if cfg.task.name in MULTI_TURN_TASKS:
    return _env_experiment(cfg, task, tokenizer, codec, model, train_problems, test_problems, auto_settings)
  prompt_ids = [codec.prompt_ids(p) for p in train_problems + test_problems]
  # the rows are as wide as the longest prompt plus the new tokens: a wider bucket would only add padding columns
  # that every forward and backward of the update runs through. A second bucket (rounded up to a multiple of 4)
  # leaves the longer prompts of a hint stage (rljax.hints) a little room, as the one rounded bucket did.
  bucket = max(len(ids) for ids in prompt_ids)
  buckets = tuple(sorted({bucket, -(-bucket // 4) * 4}))
  routing = bool(model.cfg.is_moe and (cfg.rl.routing_replay or cfg.rl.sampler_dtype))  # replay / mismatch metrics
  sampler_config = SamplerConfig(max_new_tokens=cfg.rl.max_new_tokens, prompt_buckets=buckets,
                                 pad_id=codec.pad_id, return_entropy=True, return_routing=routing,
                                 concurrent_chunks=cfg.rl.concurrent_rollouts,
                                 common_prefix=common_prompt_prefix(prompt_ids),
                                 max_stop_tokens=max(8, len(codec.stop_ids)))
  return Experiment(cfg=cfg, task=task, tokenizer=tokenizer, codec=codec, model=model,
                    sampler_config=sampler_config, train_problems=train_problems, test_problems=test_problems,
                    seq_len=bucket + cfg.rl.max_new_tokens, auto_settings=auto_settings,
                    shortest_train_prompt=min(len(ids) for ids in prompt_ids[:len(train_problems)]))


def common_prompt_prefix(prompts) -> tuple:
  """The token ids every prompt of ``prompts`` (lists of ids) starts with (a system prompt, the chat template's
  header), at most the shortest prompt's length - 1, so that every prompt has a token of its own after them:
  the sampler prefills them once per call (``SamplerConfig.common_prefix``) and the update runs them once per
  batch (``RLLoop``, ``policy_outputs(common_prefix_len=...)``)."""
  first = list(prompts[0])
  common = min(len(ids) for ids in prompts) - 1
  for ids in prompts[1:]:
    common = next((i for i in range(common) if ids[i] != first[i]), common)
    if common <= 0:
      return ()
  return tuple(int(t) for t in first[:common])


def _env_experiment(cfg: RunConfig, task, tokenizer, codec, model, train_problems, test_problems, auto_settings):
  """A multi-turn task's experiment: the runner's sizes from the config (``rl.max_new_tokens`` per turn,
  ``task.max_obs_tokens``) and the opening prompts, its sampler config, rows of ``RunnerConfig.row_length``
  (``packed_row_length`` with a context budget: an episode's windows in one row)."""
  from rljax.envs import RunnerConfig  # pylint: disable=import-outside-toplevel
  from rljax.envs import start  # pylint: disable=import-outside-toplevel
  if jax.process_count() > 1:
    raise ValueError(f"task.name={cfg.task.name!r} (a multi-turn environment) runs on one process only; this run "
                     f"has {jax.process_count()}")
  firsts = {}
  for p in train_problems[:200] + test_problems:
    ep = start(task.env, task.env_problem(p), task.seed(p))
    firsts[ep.context] = len(codec.prompt_ids(ep.context))
  longest = max(firsts.values())
  budget = task.episode_config.context_budget
  # a context budget: a new window's prefix is [bos] + at most `budget` characters (one token each with a character
  # tokenizer; a longer prefix ends the episode as truncated, counted), and the episode's windows are packed into
  # one row (rljax.envs.pack_windows, docs/agents.md)
  windows = budget is not None
  rc = RunnerConfig(max_turns=task.max_turns, max_new_tokens=cfg.rl.max_new_tokens,
                    max_prompt_tokens=max(longest + 8, budget + 1) if windows else longest + 8,
                    max_obs_tokens=cfg.task.max_obs_tokens, pad_id=codec.pad_id)
  return Experiment(cfg=cfg, task=task, tokenizer=tokenizer, codec=codec, model=model,
                    sampler_config=rc.sampler_config, train_problems=train_problems, test_problems=test_problems,
                    seq_len=rc.packed_row_length if windows else rc.row_length, auto_settings=auto_settings, runner=rc,
                    **(_shared_openings(task, codec, train_problems) if cfg.rl.share_prompt_forward and not windows
                       else {}))


def _shared_openings(task, codec, problems) -> dict:
  """``shortest_train_prompt`` and ``common_train_prefix`` over the opening contexts (``start(...).context``) of
  every problem of ``problems``: the tokens of the shortest, and how many tokens every one starts with
  (``common_prompt_prefix``): the columns each group's rows share in the update, and those every row shares
  (``rl.share_prompt_forward``; a group's rows are one problem reset with one seed).

  Every problem is started, not a sample: a group whose opening were shorter than the shared columns would fail
  the update's shared-prompt check. Without this count the update would share only the problems' own ``prompt``
  fields (for a few-shot environment, a small part of the opening, whose rest every forward and backward would
  then run once per row).
  """
  from rljax.envs import start  # pylint: disable=import-outside-toplevel
  ids = {}
  for p in problems:
    context = start(task.env, task.env_problem(p), task.seed(p)).context
    if context not in ids:
      ids[context] = codec.prompt_ids(context)
  return dict(shortest_train_prompt=min(len(v) for v in ids.values()),
              common_train_prefix=len(common_prompt_prefix(list(ids.values()))))
