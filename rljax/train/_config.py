"""Typed, frozen run configs with ``--set key=value`` overrides.

A run is described by one ``RunConfig`` made of small frozen dataclasses
(task, model, SFT stage, RL stage, evaluation, checkpoints, logging). Each
validates itself in ``__post_init__`` and raises ``ValueError`` naming the
field and the allowed values. ``apply_overrides(cfg, ["rl.steps=50"])``
returns a new, re-validated config; unknown keys and unparsable values are
errors that name the field.

Size: one concern, the typed run configuration (one frozen dataclass per section, validated where declared).
"""
from __future__ import annotations

import dataclasses
import json
import os
import types
import typing
from typing import Any, Optional, Sequence

from rljax.recipes import SLOTS
from rljax.parallel import MeshConfig
from rljax.train._checkpoint_arch import ShapeDefault, as_shape_defaults
from rljax.train._codec import CHAT_TEMPLATE_CHOICES
from rljax.train._field_names import user_named_error

__all__ = ["TaskConfig", "ModelSpec", "OptimConfig", "SFTConfig", "RLConfig", "EvalConfig",
           "CheckpointConfig", "RunConfig", "apply_overrides", "config_to_dict", "default_config",
           "tiny_config", "pretrained_config", "config_from_dict", "RECIPE_FIELDS"]

SCHEDULES = ("constant", "cosine", "linear")
SAMPLER_DTYPES = ("", "float32", "bfloat16")  # RLConfig.sampler_dtype ("" = the model's dtype)


def _fail(field: str, value, allowed: str):
  raise ValueError(f"invalid config value {field}={value!r}: must be {allowed}")


def _pos_int(obj, *names, allow_zero=False):
  for n in names:
    v = getattr(obj, n)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0 or (v == 0 and not allow_zero):
      _fail(f"{type(obj).__name__}.{n}", v, "a non-negative integer" if allow_zero else "a positive integer")


def _nonneg(obj, *names):
  for n in names:
    v = getattr(obj, n)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
      _fail(f"{type(obj).__name__}.{n}", v, "a non-negative number")


def _choice(obj, name, allowed):
  v = getattr(obj, name)
  if v not in allowed:
    _fail(f"{type(obj).__name__}.{name}", v, f"one of {list(allowed)}")


@dataclasses.dataclass(frozen=True)
class TaskConfig:
  """Which verifiable task to train on (see ``rljax.envs.get_task``).

  For arithmetic, ``digits``, ``sloppy_carry_prob`` and ``reverse_operands``
  (operands written lowest digit first, as the answer is) go to the task. ``tfds_dir`` is a local TFDS directory for
  dataset-backed tasks (GSM8K, ``tfds``).

  Multi-turn environments (``rljax.envs.get_env_task``, docs/agents.md): ``name="tool_countdown"`` (a Python
  tool in the sandbox), ``"frozenlake"``, ``"tictactoe"`` (self-play); ``max_turns`` and ``max_obs_tokens``
  size their episodes, ``rl.max_new_tokens`` is the most tokens of one model turn. ``demo_tool_prob``
  (tool_countdown): the share of SFT demonstrations that call the tool; the rest answer directly.
  ``context_budget``: the most characters of context the model is shown (0: unlimited); over it the oldest turns
  are dropped (the environment's ``fit_context``) and the episode goes on in a new window, trained in the same row.
  Your own environment: ``name="env"`` with ``env="module:factory"`` (or ``"path/to/file.py:factory"``, optionally
  with literal keyword arguments, ``"mypkg.envs:make_env(size=4)"``): the factory is called with those arguments
  when the run starts (and again on resume: the string is in ``config.json``) and returns the environment
  (``rljax.envs.OwnEnvTask`` lists what it reads; an object that is not one is refused at start-up, naming what
  it lacks). In a config file, ``TaskConfig(name="env", env=make_env)`` stores a module-level function's string.

  A user's own data (``rljax.envs._dataset``, docs/data.md): ``name="jsonl"`` reads ``path`` (one JSON object
  per line with ``prompt_field`` and ``answer_field``; a ``.parquet`` file in verl's format: ``prompt`` a chat
  message list, ``reward_model.ground_truth`` the answer), held out: ``eval_path`` or the share ``eval_fraction``
  of the prompts; ``name="tfds"`` reads the dataset ``dataset`` under ``tfds_dir``, splits ``train_split`` /
  ``eval_split``. Both are scored by ``verifier``, a catalog reward spec (``"math_answer"``,
  ``"exact_match(normalize='squad')"``, ...); ``num_train`` / ``num_test`` cap the problems used. These fields
  are refused on the other tasks. The data is read and checked here, when the config is made: a bad task
  fails before a run writes anything.

  ``chat_template`` (``rljax.train.Codec`` applies it: each prompt becomes one user message, encoded as
  transformers' ``apply_chat_template(..., add_generation_prompt=True)`` encodes it): ``"auto"`` (default) — the
  checkpoint's own chat template when ``model.hf_checkpoint`` is set and the prompts are text questions (gsm8k,
  jsonl, tfds), else plain prompts (the procedural and multi-turn tasks, models trained from scratch);
  ``"checkpoint"`` — the checkpoint's own (``chat_template.jinja`` or ``tokenizer_config.json``); ``"none"`` — the
  prompt text as is (with the start token the tokenizer's own rule adds); ``"llama3"``, ``"qwen"``, ``"gemma"`` —
  a built-in template (``rljax.data.TEMPLATES``). A checkpoint without a template where one is needed is refused
  when the run starts, before it writes anything.
  """
  name: str = "arithmetic"
  digits: int = 3
  sloppy_carry_prob: float = 0.6
  reverse_operands: bool = True
  num_train: int = 20000
  num_test: int = 500
  tfds_dir: Optional[str] = None
  lenient_rewards: bool = False
  chat_template: str = "auto"  # auto / checkpoint / none / llama3 / qwen / gemma (see the docstring)
  path: Optional[str] = None  # jsonl: the JSONL file (or a verl-style .parquet file: rljax.envs._parquet)
  eval_path: Optional[str] = None  # jsonl: a JSONL file of held-out problems (default: eval_fraction of path)
  eval_fraction: float = 0.1  # jsonl without eval_path: held-out share of the prompts (by prompt hash)
  dataset: Optional[str] = None  # tfds: the dataset name, optionally with a version ("my_data:1.0.0")
  train_split: str = "train"  # tfds
  eval_split: str = "test"  # tfds
  prompt_field: str = "prompt"  # jsonl, tfds: the record's prompt field
  answer_field: str = "answer"  # jsonl, tfds: the record's reference-answer field
  verifier: str = ""  # jsonl, tfds: the catalog reward spec that scores a completion against the answer
  max_turns: int = 0  # multi-turn env tasks: most model turns per episode (0 = the environment's default)
  max_obs_tokens: int = 96  # multi-turn env tasks: most tokens of one observation (longer: the episode ends, truncated)
  demo_tool_prob: float = 1.0  # tool_countdown: share of SFT demonstrations that call the tool (else a direct guess)
  context_budget: int = 0  # multi-turn env tasks: most characters of context per window (0 = unlimited; docs/agents.md)
  env: str = ""  # name=env: your environment's factory, "module:function" or "file.py:function" (docs/agents.md)

  def __post_init__(self):
    from rljax.envs import (DATASET_TASKS, MULTI_TURN_TASKS, OWN_ENV_TASK,  # pylint: disable=import-outside-toplevel
                            TASK_NAMES, env_spec, parse_env_spec)
    if self.name not in TASK_NAMES + MULTI_TURN_TASKS:
      _fail("TaskConfig.name", self.name, f"one of {list(TASK_NAMES + MULTI_TURN_TASKS)}")
    if callable(self.env):  # a config file's function: stored as the string that finds it again (resume)
      try:
        object.__setattr__(self, "env", env_spec(self.env))
      except ValueError as e:
        _fail("TaskConfig.env", self.env, str(e))
    if self.name == OWN_ENV_TASK:
      try:
        parse_env_spec(self.env)
      except ValueError as e:
        _fail("TaskConfig.env", self.env, f"{e} (task.name=env trains on your own environment)")
    elif self.env != "":
      _fail("TaskConfig.env", self.env, f"left unset: it is read by task.name=env (your own environment), and this "
            f"task is {self.name!r}")
    _pos_int(self, "max_turns", allow_zero=True)
    _pos_int(self, "max_obs_tokens")
    _pos_int(self, "context_budget", allow_zero=True)
    if not 0.0 <= self.demo_tool_prob <= 1.0:
      _fail("TaskConfig.demo_tool_prob", self.demo_tool_prob, "in [0, 1]")
    if self.name != "tool_countdown" and self.demo_tool_prob != 1.0:
      _fail("TaskConfig.demo_tool_prob", self.demo_tool_prob, f"left unset (1.0): it is read by the tool_countdown "
            f"task only, and this task is {self.name!r}")
    if self.name not in MULTI_TURN_TASKS:
      for name, default in (("max_turns", 0), ("max_obs_tokens", 96), ("context_budget", 0)):
        if getattr(self, name) != default:
          _fail(f"TaskConfig.{name}", getattr(self, name), f"left unset: it is read by the multi-turn tasks "
                f"{list(MULTI_TURN_TASKS)}, and this task is {self.name!r}")
    _pos_int(self, "digits", "num_train", "num_test")
    if not 0.0 <= self.sloppy_carry_prob <= 1.0:
      _fail("TaskConfig.sloppy_carry_prob", self.sloppy_carry_prob, "in [0, 1]")
    if self.chat_template is None:  # configs written before "auto": None meant plain prompts
      object.__setattr__(self, "chat_template", "none")
    _choice(self, "chat_template", CHAT_TEMPLATE_CHOICES)
    if self.name in MULTI_TURN_TASKS and self.chat_template not in ("auto", "none"):
      _fail("TaskConfig.chat_template", self.chat_template, f"auto or none: the multi-turn task {self.name!r} "
            "writes its own context")
    data_fields = {"jsonl": ("path", "eval_path", "eval_fraction"), "tfds": ("dataset", "train_split", "eval_split")}
    shared = ("prompt_field", "answer_field", "verifier")
    defaults = {f.name: f.default for f in dataclasses.fields(self)}
    for task, own in data_fields.items():
      for name in own + (shared if self.name not in DATASET_TASKS else ()):
        if self.name != task and getattr(self, name) != defaults[name]:
          _fail(f"TaskConfig.{name}", getattr(self, name), f"left unset: it is read by the task "
                f"{'jsonl or tfds' if name in shared else task}, and this task is {self.name!r}")
    if self.name in DATASET_TASKS:
      self._check_dataset()

  def _check_dataset(self):
    """Reads and checks the data of a ``jsonl`` / ``tfds`` task (errors name the field, file and line)."""
    for name in ("prompt_field", "answer_field"):
      if not isinstance(getattr(self, name), str) or not getattr(self, name):
        _fail(f"TaskConfig.{name}", getattr(self, name), "a non-empty field name")
    from rljax.envs import jsonl_task, resolve_verifier  # pylint: disable=import-outside-toplevel
    from rljax.recipes import names_for  # pylint: disable=import-outside-toplevel
    if not isinstance(self.verifier, str) or not self.verifier.strip():
      _fail("TaskConfig.verifier", self.verifier, f"a reward spec for the {self.name} task, one of "
            f"{names_for('rewards')} (e.g. task.verifier=math_answer)")
    try:
      resolve_verifier(self.verifier)
    except ValueError as e:
      raise ValueError(f"invalid config value TaskConfig.verifier={self.verifier!r}: {e}") from None
    if self.name == "tfds":
      for name in ("tfds_dir", "dataset"):
        if not isinstance(getattr(self, name), str) or not getattr(self, name):
          _fail(f"TaskConfig.{name}", getattr(self, name), "set for the tfds task (a local TFDS directory and "
                "the name of a dataset prepared there as array_record)")
      folder = os.path.expanduser(self.tfds_dir)
      if not os.path.isdir(os.path.join(folder, self.dataset.split(":")[0].split("/")[0])):
        _fail("TaskConfig.dataset", self.dataset, f"a dataset prepared under tfds_dir={self.tfds_dir!r} "
              f"(no folder {os.path.join(folder, self.dataset.split(':')[0].split('/')[0])!r})")
      return  # the records are read when the task is built (opening TFDS is slow)
    if self.path is None:
      _fail("TaskConfig.path", self.path, "the JSONL file of the jsonl task")
    if self.eval_path is None and not 0.0 < self.eval_fraction < 1.0:
      _fail("TaskConfig.eval_fraction", self.eval_fraction, "in (0, 1) (or set eval_path)")
    try:
      jsonl_task(self.path, verifier=self.verifier, eval_path=self.eval_path, eval_fraction=self.eval_fraction,
                 prompt_field=self.prompt_field, answer_field=self.answer_field)
    except ValueError as e:
      raise ValueError(f"invalid jsonl task: {e}") from None


@dataclasses.dataclass(frozen=True)
class ModelSpec:
  """The policy network: a small decoder (from scratch) or a preset/HF checkpoint.

  A from-scratch model is dense unless ``num_experts > 0``: then the MLP of the layers ``moe_layers``
  (None = every layer) is a top-``num_experts_per_tok`` routed mixture of ``num_experts`` experts of width
  ``moe_intermediate_size`` (0 = ``intermediate_size // num_experts_per_tok``: the active MLP width of the
  dense model), ``rljax.models.ModelConfig``'s fields of the same names (Qwen3-MoE-style router, gates
  renormalised over the chosen experts). ``num_experts_per_tok`` and the others are read only when
  ``num_experts > 0``. A Hugging Face checkpoint brings its own architecture: these fields stay unset there
  (a value other than the checkpoint's is refused when the run starts, and the run's ``config.json`` records the
  checkpoint's values: ``rljax.train._checkpoint_arch``). The defaults below are ``ShapeDefault`` ints, which tell
  them from a value the user sets, even the same one.
  """
  num_layers: int = ShapeDefault(2)
  hidden_size: int = ShapeDefault(64)
  num_heads: int = ShapeDefault(4)
  num_kv_heads: int = ShapeDefault(4)
  intermediate_size: int = ShapeDefault(256)
  max_seq_len: int = ShapeDefault(64)
  preset: Optional[str] = None
  hf_checkpoint: Optional[str] = None  # a local directory, a .gguf file or a Hub id ORG/NAME (rljax.models._hub)
  hf_revision: Optional[str] = None  # a Hub id's branch, tag or commit (default: main)
  dtype: str = "float32"
  compute_dtype: str = ""  # activations and matmuls ("" = dtype); e.g. float32 parameters, bfloat16 compute
  init: str = "fan_in"  # from-scratch init: "fan_in" (1/sqrt(fan_in), embedding std 1) or "normal" (N(0, 0.02^2), the HF convention)
  num_experts: int = 0  # MoE: experts per MoE layer E (0 = dense)
  num_experts_per_tok: int = 2  # MoE: experts each token is routed to, k in [1, num_experts]
  moe_intermediate_size: int = 0  # MoE: width of each expert's MLP (0 = intermediate_size // num_experts_per_tok)
  moe_layers: Optional[tuple] = None  # MoE: indices of the MoE layers (None = every layer)
  remat: str = "none"  # per-layer rematerialisation (ModelConfig.remat): none / full / dots / dots_no_batch
  scan_layers: bool = False  # run the layers under jax.lax.scan (ModelConfig.scan_layers)
  attention_query_chunk: int = 0  # attention's query rows in chunks of this many (ModelConfig.attention_query_chunk)
  # LoRA (rljax.models.LoRAConfig): rank r > 0 trains only adapters of rank r on every projection; the base
  # weights stay frozen (no gradient, no optimizer moments). lora_alpha: the scale numerator (0 = 2 r, scale 2)
  lora_rank: int = 0
  lora_alpha: float = 0.0

  def __post_init__(self):
    _pos_int(self, "num_layers", "hidden_size", "num_heads", "num_kv_heads", "intermediate_size",
             "max_seq_len")
    _pos_int(self, "num_experts", "num_experts_per_tok", "moe_intermediate_size", allow_zero=True)
    if self.moe_layers is not None:
      if isinstance(self.moe_layers, list):
        object.__setattr__(self, "moe_layers", tuple(self.moe_layers))
      if (not isinstance(self.moe_layers, tuple) or not self.moe_layers
          or any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.num_layers for i in self.moe_layers)
          or len(set(self.moe_layers)) != len(self.moe_layers)):
        _fail("ModelSpec.moe_layers", self.moe_layers,
              f"None or distinct layer indices in [0, num_layers={self.num_layers})")
    if self.num_experts:
      if self.hf_checkpoint:
        _fail("ModelSpec.num_experts", self.num_experts, "0 with hf_checkpoint (the checkpoint's config decides)")
      if not 1 <= self.num_experts_per_tok <= self.num_experts:
        _fail("ModelSpec.num_experts_per_tok", self.num_experts_per_tok, f"in [1, num_experts={self.num_experts}]")
      if not self.moe_intermediate_size and self.intermediate_size < self.num_experts_per_tok:
        _fail("ModelSpec.moe_intermediate_size", 0, f"> 0 when intermediate_size={self.intermediate_size} < "
              f"num_experts_per_tok={self.num_experts_per_tok}")
    else:
      for name, default in (("num_experts_per_tok", 2), ("moe_intermediate_size", 0), ("moe_layers", None)):
        if getattr(self, name) != default:
          _fail(f"ModelSpec.{name}", getattr(self, name), f"left unset ({default}) when num_experts=0 (a dense model)")
    if self.hidden_size % self.num_heads and not self.hf_checkpoint:  # a checkpoint may set its own head_dim
      _fail("ModelSpec.hidden_size", self.hidden_size, f"divisible by num_heads={self.num_heads}")
    if self.num_heads % self.num_kv_heads and not self.hf_checkpoint:  # a checkpoint's own shape is refused later
      _fail("ModelSpec.num_kv_heads", self.num_kv_heads, f"a divisor of num_heads={self.num_heads}")
    if self.hf_revision is not None and (not isinstance(self.hf_revision, str) or not self.hf_checkpoint):
      _fail("ModelSpec.hf_revision", self.hf_revision, "None, or a branch, tag or commit of a Hub id in hf_checkpoint")
    _choice(self, "dtype", ("float32", "bfloat16"))
    _choice(self, "compute_dtype", ("", "float32", "bfloat16"))
    _choice(self, "init", ("fan_in", "normal"))
    _pos_int(self, "lora_rank", allow_zero=True)
    _nonneg(self, "lora_alpha")
    if not self.lora_rank and self.lora_alpha:
      _fail("ModelSpec.lora_alpha", self.lora_alpha, "left unset (0.0) when lora_rank=0 (no LoRA)")
    _choice(self, "remat", ("none", "full", "dots", "dots_no_batch"))
    if not isinstance(self.scan_layers, bool):
      _fail("ModelSpec.scan_layers", self.scan_layers, "a bool")
    _pos_int(self, "attention_query_chunk", allow_zero=True)

  @property
  def lora(self):
    """The ``rljax.models.LoRAConfig`` of ``lora_rank`` / ``lora_alpha``, or None without LoRA."""
    if not self.lora_rank:
      return None
    from rljax.models import LoRAConfig  # pylint: disable=import-outside-toplevel
    return LoRAConfig(rank=self.lora_rank, alpha=float(self.lora_alpha or 2 * self.lora_rank))

  @property
  def expert_width(self) -> int:
    """Each expert's MLP width (``moe_intermediate_size``, or ``intermediate_size // num_experts_per_tok``)."""
    return self.moe_intermediate_size or self.intermediate_size // self.num_experts_per_tok


@dataclasses.dataclass(frozen=True)
class OptimConfig:
  """Adam(W) with global-norm clipping and a learning-rate schedule."""
  learning_rate: float = 3e-4
  schedule: str = "constant"
  warmup_steps: int = 0
  end_factor: float = 0.1
  b1: float = 0.9
  b2: float = 0.999
  eps: float = 1e-8
  weight_decay: float = 0.0
  grad_clip: float = 1.0

  def __post_init__(self):
    if not (isinstance(self.learning_rate, (int, float)) and self.learning_rate > 0):
      _fail("OptimConfig.learning_rate", self.learning_rate, "a positive number")
    _choice(self, "schedule", SCHEDULES)
    _pos_int(self, "warmup_steps", allow_zero=True)
    _nonneg(self, "end_factor", "weight_decay", "grad_clip", "eps")
    for n in ("b1", "b2"):
      if not 0.0 <= getattr(self, n) < 1.0:
        _fail(f"OptimConfig.{n}", getattr(self, n), "in [0, 1)")


@dataclasses.dataclass(frozen=True)
class SFTConfig:
  """Supervised warm-start on task demonstrations (NLL objective, same train step).

  ``init_from``: a run directory whose finished SFT checkpoint this run starts from instead of training its own
  (the other SFT fields are then unused; the run's model and task must be that run's). Several RL runs then share
  one warm start (``rljax arena`` does this per seed). Checked at start-up, before anything is written.
  """
  steps: int = 1200
  batch_size: int = 64
  optim: OptimConfig = OptimConfig(learning_rate=3e-3, schedule="constant", warmup_steps=20)
  init_from: Optional[str] = None

  def __post_init__(self):
    _pos_int(self, "steps", allow_zero=True)
    _pos_int(self, "batch_size")
    if self.init_from is not None and (not isinstance(self.init_from, str) or not self.init_from):
      _fail("SFTConfig.init_from", self.init_from, "None or the path of a run directory with a finished SFT")


# RLConfig fields that hold a recipe slot (a technique spec resolved through rljax.catalog(); rljax/recipes): the
# recipe's slots (rljax.recipes.SLOTS), each an RLConfig field of the same name
RECIPE_FIELDS = tuple(SLOTS)


@dataclasses.dataclass(frozen=True)
class RLConfig:
  """The RL stage: the recipe (which techniques, by catalog name) and the rollout/update schedule.

  The recipe fields hold technique specs: catalog names with keyword arguments, several comma-separated
  (``python -m rljax.catalog`` lists the names; ``rljax.recipes`` resolves them; ``docs/recipes.md``)::

      --set rl.advantage='qae(quantile=0.7)'
      --set rl.loss='ppo_clip(eps_high=0.28), kl_penalty(beta=0.001)'
      --set rl.filters='zero_variance(refill=True)' --set rl.shaping='overlong_penalty(buffer_len=2)'
      --set rl.replay='exgrpo(ratio=0.5)' --set rl.loss='exgrpo_policy(beta=0.1)'

  ``rewards`` empty = the task's verifier; ``critic`` empty = no critic (``value_loss(clip_eps=0.2)`` trains
  one: ``critic_shared`` puts a value head on the policy trunk, else a separate critic model with learning
  rate ``critic_lr``). ``max_refills`` bounds the extra sampling rounds of a ``refill=True`` filter.
  """
  steps: int = 100
  num_prompts: int = 32
  group_size: int = 8
  max_new_tokens: int = 6
  temperature: float = 1.0
  top_k: int = 0
  top_p: float = 1.0
  rewards: str = ""
  multi_reward: str = ""
  shaping: str = ""
  prompt_filters: str = ""
  filters: str = ""
  replay: str = ""
  advantage: str = "grpo(eps=1e-4)"
  loss: str = "ppo_clip(eps_low=0.2, eps_high=0.2)"
  aggregation: str = "token_mean"
  controllers: str = ""
  critic: str = ""
  critic_shared: bool = False
  critic_coef: float = 0.5
  critic_lr: float = 1e-3
  max_refills: int = 3
  updates_per_batch: int = 2
  num_minibatches: int = 1
  # gradient-accumulation slices of each update (exact: the same gradient as one slice); 0 = auto: 4 on a CPU
  # backend when each slice holds whole groups (measured faster there, docs/training.md), else 1
  num_microbatches: int = 0
  # run each group's prompt once in the update / proximal / reference forwards (same result up to float
  # summation order; used when num_minibatches == 1 and each micro-batch holds whole groups)
  share_prompt_forward: bool = True
  # "auto": when one optimizer step trains on each batch (updates_per_batch = num_minibatches = 1) and only the loss
  # reads logp_old / entropy_old, the update's own forward gives them, detached (the same parameters: verl's
  # on-policy path, TRL with one iteration), instead of a separate proximal forward computing the same numbers;
  # "separate": always the separate forward (rljax/train/_inputs.py proximal_forward_reason)
  proximal_forward: str = "auto"
  # sample step s+1's batch on a background thread (from the parameters before step s's updates) while step s
  # trains: one-step off-policy (rljax/train/_ahead.py); single process only; resumes are not bitwise
  rollout_ahead: bool = False
  # the asynchronous runner (rljax/train/_async.py, docs/async.md): None = off (the synchronous loop, or
  # rollout_ahead); an int eta >= 0 runs a rollout producer thread that samples batch k once the policy version
  # (updates applied) is >= k - eta, and the trainer drops any row with a token older than eta versions (0 =
  # the synchronous loop's results bit for bit). Single process only
  async_staleness: Optional[int] = None
  # eta >= 1: when new weights arrive mid-generation, unfinished rows continue under them (True: partial
  # rollouts, per-token behaviour log-probs and versions recorded) or restart from their prompt (False)
  async_partial_rollouts: bool = True
  # eta >= 1: decode steps between two looks for new weights (the sampler runs in chunks of this many tokens;
  # each chunk re-reads the sequence so far under the weights of that chunk); 0 = auto: max(16, ceil(M / 4))
  async_chunk_tokens: int = 0
  # the asynchronous runner's devices: 0 = the producer shares the trainer's mesh; r >= 1 splits the mesh into a
  # rollout sub-mesh (its first r devices; the sampler's weights live there) and a training sub-mesh (the rest:
  # the train state), and each published version is an explicit, measured reshard between them
  # (rljax.parallel.split_mesh / transfer; metrics async/weight_transfer_s, async/weight_transfer_bytes). r must
  # leave both sides non-empty and cut the mesh's outermost axis of size > 1 into whole slices
  async_rollout_devices: int = 0
  # sample (and evaluate) the prompts as this many concurrent calls on host threads (SamplerConfig.concurrent_chunks):
  # fills the CPU cores one decode loop leaves idle; rows keep their random streams; CPU only (else one call);
  # 0 = auto: 2 on a CPU backend with >= 2 cores and a model of >= 1M parameters, else 1 (docs/training.md)
  concurrent_rollouts: int = 0
  # the rollout sampler's dtype: "" = the model's; "bfloat16" runs the sampler (only the RL rollouts, not the
  # held-out evaluation) with parameters cast to bfloat16 and bfloat16 compute while the trainer keeps the model's
  # dtype: a train/inference mismatch (the sampler's log-probs are logp_behavior; rollout/logp_gap measures it)
  sampler_dtype: Optional[str] = ""
  # Rollout Routing Replay (R3; spec catalog entry 8): MoE models only; every trainer forward on the rollout rows
  # (update, proximal, reference) uses the experts the sampler chose (rollout/routing_mismatch measures them)
  routing_replay: bool = False
  target_accuracy: Optional[float] = None
  optim: OptimConfig = OptimConfig()

  def __post_init__(self):
    _pos_int(self, "num_prompts", "group_size", "max_new_tokens", "updates_per_batch", "num_minibatches")
    _pos_int(self, "steps", "top_k", "max_refills", "num_microbatches", "concurrent_rollouts", allow_zero=True)
    _nonneg(self, "temperature")
    if self.temperature == 0:
      _fail("RLConfig.temperature", self.temperature, "> 0 for RL sampling")
    if not 0.0 < self.top_p <= 1.0:
      _fail("RLConfig.top_p", self.top_p, "in (0, 1]")
    if self.group_size < 2:
      _fail("RLConfig.group_size", self.group_size, ">= 2 (group-relative advantages need 2 samples)")
    batch = self.num_prompts * self.group_size
    if batch % self.num_minibatches:
      _fail("RLConfig.num_minibatches", self.num_minibatches,
            f"a divisor of the rollout batch num_prompts*group_size={batch}")
    if self.num_microbatches and (batch // self.num_minibatches) % self.num_microbatches:
      _fail("RLConfig.num_microbatches", self.num_microbatches,
            f"a divisor of the mini-batch size {batch // self.num_minibatches}")
    if self.target_accuracy is not None and not 0.0 <= self.target_accuracy <= 1.0:
      _fail("RLConfig.target_accuracy", self.target_accuracy, "None or in [0, 1]")
    if self.async_staleness is not None:
      if isinstance(self.async_staleness, bool) or not isinstance(self.async_staleness, int) or self.async_staleness < 0:
        _fail("RLConfig.async_staleness", self.async_staleness, "None (off) or an integer >= 0")
      if self.rollout_ahead:
        _fail("RLConfig.async_staleness", self.async_staleness,
              "None when rl.rollout_ahead=true (rollout_ahead is the one-step schedule; async_staleness=1 the "
              "asynchronous runner's): use one or the other")
    _pos_int(self, "async_chunk_tokens", "async_rollout_devices", allow_zero=True)
    if self.async_rollout_devices and self.async_staleness is None:
      _fail("RLConfig.async_rollout_devices", self.async_rollout_devices,
            "0 unless rl.async_staleness is set (the rollout sub-mesh is the asynchronous runner's)")
    if self.proximal_forward not in ("auto", "separate"):
      _fail("RLConfig.proximal_forward", self.proximal_forward, "'auto' or 'separate'")
    for name in ("critic_shared", "routing_replay", "async_partial_rollouts"):
      if not isinstance(getattr(self, name), bool):
        _fail(f"RLConfig.{name}", getattr(self, name), "true or false")
    if self.sampler_dtype is None:
      object.__setattr__(self, "sampler_dtype", "")
    _choice(self, "sampler_dtype", SAMPLER_DTYPES)
    for name in ("critic_coef", "critic_lr"):
      v = getattr(self, name)
      if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
        _fail(f"RLConfig.{name}", v, "a positive number")
    for name in RECIPE_FIELDS:
      if not isinstance(getattr(self, name), str):
        _fail(f"RLConfig.{name}", getattr(self, name), "a technique spec string such as 'qae(quantile=0.7)'")
    from rljax.train._recipes import check_recipe_fields  # pylint: disable=import-outside-toplevel
    check_recipe_fields(self)  # resolves every spec now: a bad name or argument is an error naming its field

  def recipe(self):
    """The ``rljax.recipes.Recipe`` these fields describe (raises ``ValueError`` naming a bad field, or a field
    that records a Python stage of a run's recipe: ``rljax.recipes.python_marker``)."""
    from rljax.train._recipes import recipe_from_config  # pylint: disable=import-outside-toplevel
    return recipe_from_config(self)

  def with_recipe(self, recipe, *, mark_python: bool = False) -> "RLConfig":
    """This config with its recipe fields written from ``recipe`` (catalog stages only; ``Recipe.specs``).
    ``mark_python=True``: a slot a spec cannot hold is written as a marker naming its stages (what a run's
    ``config.json`` records; ``RLConfig.recipe()`` then refuses to build a recipe from it)."""
    return dataclasses.replace(self, **recipe.specs(mark_python=mark_python))

  @property
  def batch_size(self) -> int:
    return self.num_prompts * self.group_size


@dataclasses.dataclass(frozen=True)
class EvalConfig:
  """Held-out evaluation: greedy accuracy, and unbiased pass@k from ``num_samples``."""
  num_problems: int = 500
  batch_size: int = 250
  every: int = 50
  num_samples: int = 8
  pass_k: tuple = (1, 4, 8)
  temperature: float = 1.0

  def __post_init__(self):
    _pos_int(self, "num_problems", "batch_size", "num_samples")
    _pos_int(self, "every", allow_zero=True)
    for k in self.pass_k:
      if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= self.num_samples:
        _fail("EvalConfig.pass_k", self.pass_k, f"integers in [1, num_samples={self.num_samples}]")


@dataclasses.dataclass(frozen=True)
class CheckpointConfig:
  """Orbax checkpoints under ``<out_dir>/checkpoints/{sft,rl}``."""
  every: int = 50
  max_to_keep: int = 3
  enabled: bool = True

  def __post_init__(self):
    _pos_int(self, "every", "max_to_keep")


@dataclasses.dataclass(frozen=True)
class RunConfig:
  """A whole run: SFT warm-start then RL, evaluation before/after RL.

  ``mesh`` lays the run out over devices (``rljax.parallel.MeshConfig``: ``data``,
  ``fsdp``, ``tensor``, ``expert``; ``--set mesh.fsdp=-1`` = FSDP over every
  device of every process); the default is one device. ``num_devices`` is a
  deprecated alias for ``mesh.data`` (0 = all devices).
  """
  seed: int = 0
  out_dir: str = "runs/default"
  task: TaskConfig = TaskConfig()
  model: ModelSpec = ModelSpec()
  sft: SFTConfig = SFTConfig()
  rl: RLConfig = RLConfig()
  eval: EvalConfig = EvalConfig()
  checkpoint: CheckpointConfig = CheckpointConfig()
  mesh: MeshConfig = MeshConfig(data=1, fsdp=1, tensor=1, expert=1)
  num_devices: Optional[int] = None
  progress: bool = True
  tensorboard: bool = True
  plot: bool = True
  log_every: int = 1
  # Weights & Biases (rljax.train._metrics.WandbSink; pip install -e ".[wandb]"): the run's config, every metric and
  # metrics.png. Project: wandb_project, else $WANDB_PROJECT, else "rljax"; run name: wandb_name, else out_dir's
  # last folder. WANDB_MODE=offline / WANDB_DIR work as in wandb.
  wandb: bool = False
  wandb_project: str = ""
  wandb_name: str = ""

  def __post_init__(self):
    _pos_int(self, "seed", allow_zero=True)
    _pos_int(self, "log_every")
    if not isinstance(self.wandb, bool):
      _fail("RunConfig.wandb", self.wandb, "true or false")
    for name in ("wandb_project", "wandb_name"):
      if not isinstance(getattr(self, name), str):
        _fail(f"RunConfig.{name}", getattr(self, name), "a string ('' = the default)")
    if not isinstance(self.mesh, MeshConfig):
      _fail("RunConfig.mesh", self.mesh, "a rljax.parallel.MeshConfig")
    if self.num_devices is not None:  # deprecated alias: a 1-D data-parallel mesh (0 = all devices)
      _pos_int(self, "num_devices", allow_zero=True)
      if self.mesh != MeshConfig(data=1, fsdp=1, tensor=1, expert=1):
        _fail("RunConfig.num_devices", self.num_devices, "None when mesh is set (num_devices is deprecated: "
              "use mesh.data)")
      object.__setattr__(self, "mesh", MeshConfig(data=self.num_devices or -1, fsdp=1, tensor=1, expert=1))
      object.__setattr__(self, "num_devices", None)
    if not isinstance(self.out_dir, str) or not self.out_dir:
      _fail("RunConfig.out_dir", self.out_dir, "a non-empty path")
    if self.task.chat_template == "checkpoint" and not self.model.hf_checkpoint:
      _fail("TaskConfig.chat_template", "checkpoint", "auto, none, llama3, qwen or gemma without a "
            "model.hf_checkpoint (checkpoint: the checkpoint's own template)")

  def replace(self, **changes) -> "RunConfig":
    return dataclasses.replace(self, **changes)


def default_config() -> RunConfig:
  """The main job: SFT warm-start, then GRPO on 3-digit addition (CPU, minutes)."""
  return RunConfig()


def tiny_config(out_dir: str = "runs/tiny") -> RunConfig:
  """A seconds-long config for tests and smoke runs."""
  return RunConfig(
      out_dir=out_dir,
      task=TaskConfig(digits=2, num_train=500, num_test=32),
      model=as_shape_defaults(ModelSpec(num_layers=1, hidden_size=32, num_heads=2, num_kv_heads=2,
                                        intermediate_size=64, max_seq_len=32)),  # a checkpoint replaces them
      sft=SFTConfig(steps=4, batch_size=16),
      rl=RLConfig(steps=4, num_prompts=4, group_size=4, max_new_tokens=4),
      eval=EvalConfig(num_problems=32, batch_size=32, every=0, num_samples=2, pass_k=(1, 2)),
      checkpoint=CheckpointConfig(every=2, max_to_keep=5),
      progress=False, tensorboard=False, plot=False)


def pretrained_config(checkpoint: str, out_dir: str = "runs/pretrained", **sections) -> RunConfig:
  """Defaults for RL on a real pretrained checkpoint (docs/real_models.md); ``sections`` replace whole sections.

  ``checkpoint``: a Hugging Face checkpoint directory or a ``.gguf`` file (``model.hf_checkpoint``). What differs
  from the toy defaults, and why:

  - no SFT (``sft.steps=0``): the checkpoint is the start, and the log says "zero-shot";
  - learning rate 1e-6 with 10 warm-up steps and one update per batch (verl's and TRL's GRPO defaults for
    0.5B-7B models: a pretrained policy moves far with Adam at the toy's 3e-4, and a second epoch on the same
    rollouts is where it drifts);
  - the DAPO clip bounds ``eps_low=0.2, eps_high=0.28`` and a k3 KL penalty to the checkpoint with beta 1e-3
    (verl's ``kl_loss_coef=0.001, kl_loss_type=low_var_kl``; a reference forward per step);
  - 256 new tokens (a real answer needs room), 8 samples per prompt, temperature 1.0;
  - checkpoints keep only the latest (a 135M-parameter model's train state is ~1.4 GB with Adam's moments).

  The demo on SmolLM2-135M (``configs/smollm2_addition.py``) raises the learning rate to 1e-5 and cuts new tokens
  to 16: a 135M model on a 2-core CPU, 50 steps.
  """
  base = RunConfig(
      out_dir=out_dir,
      model=ModelSpec(hf_checkpoint=checkpoint, dtype="float32"),
      sft=SFTConfig(steps=0),
      rl=RLConfig(steps=100, num_prompts=8, group_size=8, max_new_tokens=256, temperature=1.0, updates_per_batch=1,
                  loss="ppo_clip(eps_low=0.2, eps_high=0.28), kl_penalty(beta=0.001, estimator='k3')",
                  optim=OptimConfig(learning_rate=1e-6, schedule="constant", warmup_steps=10, grad_clip=1.0)),
      eval=EvalConfig(num_problems=128, batch_size=64, every=10, num_samples=4, pass_k=(1, 4)),
      checkpoint=CheckpointConfig(every=25, max_to_keep=1))
  return base.replace(**sections)


# ----------------------------------------------------------------------------- overrides


def _parse_value(field_path: str, text: str, annotation):
  origin = typing.get_origin(annotation)
  args = typing.get_args(annotation)
  if origin in (typing.Union, types.UnionType):
    non_none = [a for a in args if a is not type(None)]
    if text.lower() in ("none", "null"):
      return None
    return _parse_value(field_path, text, non_none[0])
  try:
    if annotation is bool:
      if text.lower() in ("true", "1", "yes", "on"):
        return True
      if text.lower() in ("false", "0", "no", "off"):
        return False
      raise ValueError
    if annotation is int:
      return int(text)
    if annotation is float:
      return float(text)
    if annotation is str:
      return text
    if annotation is tuple or origin is tuple:
      value = json.loads(text if text.startswith("[") else f"[{text}]")
      return tuple(value)
  except (ValueError, json.JSONDecodeError):
    raise ValueError(f"invalid override {field_path}={text!r}: expected {getattr(annotation, '__name__', annotation)}") from None
  raise ValueError(f"cannot override {field_path} from the command line (type {annotation})")


def _set(obj, path: list[str], text: str, full: str):
  fields = {f.name: f for f in dataclasses.fields(obj)}
  name = path[0]
  if name not in fields:
    if isinstance(obj, RLConfig):
      from rljax.train._legacy import MOVED  # pylint: disable=import-outside-toplevel
      if name in MOVED:
        raise ValueError(f"config field {full!r} was replaced by the recipe fields: use {MOVED[name]}")
    raise ValueError(f"unknown config field {full!r}: {type(obj).__name__} has fields {sorted(fields)}")
  hints = typing.get_type_hints(type(obj))
  current = getattr(obj, name)
  if len(path) > 1:
    if not dataclasses.is_dataclass(current):
      raise ValueError(f"config field {'.'.join(full.split('.')[:-len(path) + 1])!r} is not a section")
    return dataclasses.replace(obj, **{name: _set(current, path[1:], text, full)})
  if dataclasses.is_dataclass(current):
    raise ValueError(f"config field {full!r} is a section; set one of its fields, e.g. {full}.<field>=...")
  return dataclasses.replace(obj, **{name: _parse_value(full, text, hints[name])})


def apply_overrides(cfg: RunConfig, overrides: Sequence[str]) -> RunConfig:
  """Applies ``key=value`` overrides (dotted keys, e.g. ``rl.steps=50``).

  Values are parsed by the field's type; the result is re-validated, so an
  invalid value raises ``ValueError`` naming the field as the override does
  (``rl.loss``, not ``RLConfig.loss``: ``rljax.train._field_names``).
  """
  keys = [item.split("=", 1)[0].strip() for item in overrides]
  optims = {k.split(".")[0] + ".optim" for k in keys if k.startswith(("rl.optim.", "sft.optim."))}
  try:
    return _apply_overrides(cfg, overrides)
  except ValueError as e:
    raise user_named_error(e, optim=optims.pop() if len(optims) == 1 else None)


def _apply_overrides(cfg: RunConfig, overrides: Sequence[str]) -> RunConfig:
  """``apply_overrides`` with the config classes' own field names in its errors."""
  pending = []
  for item in overrides:
    if "=" not in item:
      raise ValueError(f"override {item!r} must look like key=value (e.g. rl.steps=50)")
    key, text = item.split("=", 1)
    pending.append((key.strip(), text.strip()))
  # Each override is validated as it is applied; one that is only valid together with a
  # later one (e.g. eval.num_samples=2 before eval.pass_k=1,2) is retried after the others.
  while pending:
    failed, first_error = [], None
    for key, text in pending:
      try:
        cfg = _set(cfg, key.split("."), text, key)
      except ValueError as e:
        failed.append((key, text))
        first_error = first_error or e
    if len(failed) == len(pending):
      try:  # overrides valid only all together (rl.multi_reward=gdpo with rl.advantage=''): one replace each
        return _set_together(cfg, [(k.split("."), t, k) for k, t in failed])
      except ValueError as e:  # several: what is wrong with them together (task.name=jsonl task.verifier=?)
        raise (e if len(failed) > 1 else first_error) from None
      except (KeyError, TypeError):
        raise first_error from None
    pending = failed
  return cfg


def _set_together(obj, items):
  """Applies ``(path, text, full)`` overrides with one ``dataclasses.replace`` per section (validated once)."""
  leaves, sections = {}, {}
  for path, text, full in items:
    if len(path) == 1:
      leaves[path[0]] = (text, full)
    else:
      sections.setdefault(path[0], []).append((path[1:], text, full))
  hints = typing.get_type_hints(type(obj))
  changes = {name: _parse_value(full, text, hints[name]) for name, (text, full) in leaves.items()}
  for name, sub in sections.items():
    changes[name] = _set_together(getattr(obj, name), sub)
  return dataclasses.replace(obj, **changes)


def config_to_dict(cfg) -> dict:
  """A JSON-serialisable dict of a config."""
  return json.loads(json.dumps(dataclasses.asdict(cfg), default=str))


def _legacy_chat_template(d: dict) -> dict:
  """A run written before ``task.chat_template="auto"`` saved None for plain prompts: the same prompts are
  ``"auto"`` where auto chooses none (no hf checkpoint, or not a text task), else ``"none"``."""
  task = d.get("task")
  if not isinstance(task, dict) or "chat_template" not in task or task["chat_template"] is not None:
    return d
  from rljax.train._codec import TEXT_TASKS  # pylint: disable=import-outside-toplevel
  model = d.get("model") if isinstance(d.get("model"), dict) else {}
  plain = not model.get("hf_checkpoint") or task.get("name", "arithmetic") not in TEXT_TASKS
  return {**d, "task": {**task, "chat_template": "auto" if plain else "none"}}


def config_from_dict(d: dict, cls=None):
  """Inverse of ``config_to_dict`` (unknown keys are errors naming the field)."""
  cls = cls or RunConfig
  if cls is RunConfig:
    d = _legacy_chat_template(d)
  if cls is RLConfig:
    from rljax.train._legacy import legacy_rl_fields  # pylint: disable=import-outside-toplevel
    d = legacy_rl_fields(d)  # a run written before the recipe fields
  hints = typing.get_type_hints(cls)
  names = {f.name for f in dataclasses.fields(cls)}
  kwargs = {}
  for k, v in d.items():
    if k not in names:
      raise ValueError(f"unknown config field {cls.__name__}.{k}")
    t = hints[k]
    if dataclasses.is_dataclass(t) and isinstance(v, dict):
      kwargs[k] = config_from_dict(v, t)
    elif (t is tuple or typing.get_origin(t) is tuple) and isinstance(v, list):
      kwargs[k] = tuple(v)
    else:
      kwargs[k] = v
  return cls(**kwargs)
