"""Host-side glue between text problems and token arrays (prompts, SFT rows, decoding)."""
from __future__ import annotations

import json
import os
from typing import Optional, Sequence

import numpy as np

from rljax.types import TrainBatch

__all__ = ["Codec", "sft_batch", "CHAT_TEMPLATE_CHOICES", "TEXT_TASKS", "resolve_chat_template", "checkpoint_eos_ids"]

CHAT_TEMPLATE_CHOICES = ("auto", "checkpoint", "none", "llama3", "qwen", "gemma")  # TaskConfig.chat_template
TEXT_TASKS = ("gsm8k", "jsonl", "tfds", "small_addition")  # tasks whose prompts are text questions ("auto" chats with them)


class Codec:
  """Host-side encoding of prompts and completions; owns the chat template and the tokens that end a completion.

  * ``prompt_ids(problem)``: with a chat template, the prompt as one user message (``chat_ids``); without one,
    ``text_ids``.
  * ``chat_ids(messages)``: a conversation rendered by the template (``add_generation_prompt=True``, the
    tokenizer's special tokens as variables) and encoded as is (``tokenizer.encode_chat``): the ids
    transformers' ``apply_chat_template(messages, add_generation_prompt=True)`` gives; the template writes the
    start token.
  * ``text_ids(text)``: a plain prompt, with the start token the tokenizer's own rule puts first
    (``tokenizer.encode_prompt``: ``[bos] + tokens`` for SentencePiece, the ``tokenizer.json`` post-processor for
    HF tokenizers); never twice. A tokenizer with only ``encode``: ``[bos] + tokens`` when ``has_bos`` (default
    True).
  * ``completion_ids(text)``: ``tokens(text) + [end_id]``; ``end_id`` is the template's end-of-turn token when
    it is one special token (``<|im_end|>``, ``<|eot_id|>``, ``<end_of_turn>``), else ``eos_id``.
  * ``stop_ids``: the tokens that end a completion (sampler stop tokens, where ``decode_completions`` cuts):
    ``eos_id``, the ``extra_stop_ids`` (a checkpoint's ``generation_config.json`` ``eos_token_id``,
    ``checkpoint_eos_ids``) and the template's end-of-turn token.

  Args:
    tokenizer: an ``rljax.data`` tokenizer (or any object with ``encode``, ``decode``, ``bos_id``, ``eos_id``).
    chat_template: None (plain prompts), a built-in family name (``rljax.data.FAMILIES``) or Jinja source.
    extra_stop_ids: more ids that end a completion.
    template_name: where the template came from (logs and error messages).
  """

  def __init__(self, tokenizer, chat_template: Optional[str] = None, *, extra_stop_ids: Sequence[int] = (),
               template_name: Optional[str] = None):
    from rljax.data import TEMPLATES, ChatTemplate  # pylint: disable=import-outside-toplevel
    self.tok = tokenizer
    self.bos_id = int(tokenizer.bos_id)
    self.use_bos = bool(getattr(tokenizer, "has_bos", True))
    self.eos_id = int(tokenizer.eos_id)
    self.pad_id = int(getattr(tokenizer, "pad_id", 0))
    if self.pad_id < 0:
      self.pad_id = 0
    self.special_tokens = dict(getattr(tokenizer, "special_tokens", None) or {})
    self.template = None
    self.template_name = None
    end_of_turn = None
    if chat_template is not None:
      builtin = chat_template in TEMPLATES
      self.template_name = template_name or (f"the built-in {chat_template} chat template" if builtin
                                             else "the chat template")
      self.template = ChatTemplate(TEMPLATES[chat_template] if builtin else chat_template, self.template_name)
      end_of_turn = self.template.end_of_turn(self.special_tokens, getattr(tokenizer, "special_token_ids", {}) or {})
    self.end_id = self.eos_id if end_of_turn is None else int(end_of_turn)
    stops = [self.eos_id, *[int(i) for i in extra_stop_ids], *([] if end_of_turn is None else [end_of_turn])]
    self.stop_ids = tuple(dict.fromkeys(int(i) for i in stops if int(i) >= 0))

  def render(self, messages, add_generation_prompt: bool = True) -> str:
    """A conversation (a list of ``{"role", "content"}``; a string: one user message) in the chat template, with
    the assistant's header after it when ``add_generation_prompt``."""
    if self.template is None:
      raise ValueError("this Codec has no chat template (task.chat_template resolved to none)")
    if isinstance(messages, str):
      messages = [{"role": "user", "content": messages}]
    return self.template.render(messages, add_generation_prompt=add_generation_prompt,
                                special_tokens=self.special_tokens)

  def chat_ids(self, messages, add_generation_prompt: bool = True) -> list[int]:
    """A conversation's ids as transformers' ``apply_chat_template(messages, add_generation_prompt=...)`` gives
    them: rendered by the template, encoded without adding any special token."""
    rendered = self.render(messages, add_generation_prompt)
    encode_chat = getattr(self.tok, "encode_chat", None)
    return [int(i) for i in (encode_chat(rendered) if encode_chat is not None else self.tok.encode(rendered))]

  def text_ids(self, text: str) -> list[int]:
    """A plain prompt's ids: the tokenizer's start token (by its own rule, once) + the text's tokens."""
    encode_prompt = getattr(self.tok, "encode_prompt", None)
    if encode_prompt is not None:
      return [int(i) for i in encode_prompt(text)]
    ids = [int(i) for i in self.tok.encode(text)]
    return ids if not self.use_bos or ids[:1] == [self.bos_id] else [self.bos_id] + ids

  def prompt_ids(self, problem) -> list[int]:
    """The ids of a problem's prompt (a ``Problem`` or a string): in the chat template when there is one."""
    text = problem.prompt if hasattr(problem, "prompt") else str(problem)
    return self.text_ids(text) if self.template is None else self.chat_ids([{"role": "user", "content": text}])

  def completion_ids(self, text: str) -> list[int]:
    return list(self.tok.encode(text)) + [self.end_id]

  def decode_completions(self, tokens, completion_mask) -> list[str]:
    """Decodes each row's completion tokens, up to the first of ``stop_ids``."""
    tokens = np.asarray(tokens)
    mask = np.asarray(completion_mask).astype(bool)
    stops = set(self.stop_ids)
    out = []
    for row, m in zip(tokens, mask):
      ids = [int(i) for i in row[m]]
      cut = next((k for k, i in enumerate(ids) if i in stops), len(ids))
      out.append(self.tok.decode(ids[:cut]))
    return out


def resolve_chat_template(choice: Optional[str], tokenizer, *, task_name: str,
                          hf_checkpoint: Optional[str]) -> tuple[Optional[str], Optional[str]]:
  """``(template, description)`` for ``TaskConfig.chat_template=choice``: the template (Jinja source or a built-in
  name) a run's ``Codec`` gets, None for plain prompts.

  ``"auto"``: the checkpoint's own template when ``hf_checkpoint`` is set and the task's prompts are text
  questions (``TEXT_TASKS``), else none. ``"checkpoint"``: the checkpoint's own (``tokenizer.chat_template``).
  ``"none"`` (or None, older configs): plain prompts. A built-in name: that template. A checkpoint template that
  is needed and missing is a ``ValueError`` naming the choices.
  """
  if choice is None or choice == "none":
    return None, None
  if choice not in CHAT_TEMPLATE_CHOICES:
    raise ValueError(f"invalid config value TaskConfig.chat_template={choice!r}: must be one of "
                     f"{list(CHAT_TEMPLATE_CHOICES)}")
  if choice == "auto":
    if not hf_checkpoint or task_name not in TEXT_TASKS:
      return None, None
  elif choice != "checkpoint":
    return choice, f"the built-in {choice} chat template"
  own = getattr(tokenizer, "chat_template", None)
  if not own:
    why = ("task.chat_template=auto uses the checkpoint's own chat template for the text task "
           f"{task_name!r}" if choice == "auto" else "task.chat_template=checkpoint")
    raise ValueError(f"{why}, but the checkpoint {hf_checkpoint!r} has none (no chat_template.jinja and no "
                     "chat_template in its tokenizer_config.json); set task.chat_template to one of "
                     f"{list(CHAT_TEMPLATE_CHOICES[3:])} (a built-in template) or none (the prompt text as is)")
  return own, f"the checkpoint's chat template ({hf_checkpoint})"


def checkpoint_eos_ids(path: Optional[str]) -> list[int]:
  """The end tokens a checkpoint's generation stops at: ``eos_token_id`` (an int or a list) of its
  ``generation_config.json``, else of its ``config.json`` (transformers derives the generation config from the
  model config when the file is missing). ``[]`` without a checkpoint or a value."""
  if not path or not os.path.isdir(path):
    return []
  for name in ("generation_config.json", "config.json"):
    file = os.path.join(path, name)
    if os.path.exists(file):
      with open(file, encoding="utf-8") as f:
        try:
          value = json.load(f).get("eos_token_id")
        except (json.JSONDecodeError, AttributeError):
          raise ValueError(f"{file} is not a JSON object") from None
      values = value if isinstance(value, list) else [value]
      return [int(v) for v in values if isinstance(v, int) and not isinstance(v, bool) and v >= 0]
  return []


def sft_batch(task, codec: Codec, problems: Sequence, *, step: int, seed: int, batch_size: int,
              seq_len: int) -> TrainBatch:
  """A deterministic SFT batch for ``step``: demonstrations from ``task.demonstration``.

  Row = ``codec.prompt_ids(problem) + codec.completion_ids(demonstration)`` (the prompt as the run sends it, in
  its chat template if any; the completion ends with ``codec.end_id``) left-aligned and padded to
  ``seq_len``; ``loss_mask`` covers the completion and its end token. A multi-turn task
  (``task.demonstration_episode``): the scripted episode's tokens
  (``rljax.envs.encode_episode``), ``loss_mask`` on its model turns only (``rng`` draws any random choice of the
  demonstration, e.g. the tool countdown's tool-or-direct mixture); with a context budget, its windows side by
  side with ``segment_ids`` = window + 1 (the layout of ``rljax.envs.pack_windows``). The problems and
  demonstrations depend only on ``(seed, step)``, so a resumed run sees the
  same batches.
  """
  rng = np.random.default_rng([seed, 7, step])
  idx = rng.integers(len(problems), size=batch_size)
  tokens = np.full((batch_size, seq_len), codec.pad_id, np.int32)
  mask = np.zeros((batch_size, seq_len), bool)
  if hasattr(task, "demonstration_episode"):  # a multi-turn task: its scripted episodes, model segments trained
    from rljax.envs import encode_episode  # pylint: disable=import-outside-toplevel
    packed = task.episode_config.context_budget is not None  # context windows side by side (pack_windows' layout)
    seg = np.zeros((batch_size, seq_len), np.int32) if packed else None
    for r, i in enumerate(idx):
      rows = encode_episode(task.demonstration_episode(problems[int(i)], rng), codec.tok, add_bos=codec.use_bos)
      lo = 0
      for row in rows if packed else rows[:1]:  # without a budget an episode has one window
        hi = lo + row.tokens.size
        if hi > seq_len:
          raise ValueError(f"a demonstration episode has {hi} tokens or more, more than the rows' {seq_len}: "
                           "raise rl.max_new_tokens or task.max_obs_tokens")
        tokens[r, lo:hi], mask[r, lo:hi] = row.tokens, row.loss_mask
        if packed:
          seg[r, lo:hi] = row.window + 1
        lo = hi
    return TrainBatch(tokens=tokens, loss_mask=mask, advantages=np.zeros((batch_size, seq_len), np.float32),
                      group_id=np.arange(batch_size, dtype=np.int32), segment_ids=seg)
  for r, i in enumerate(idx):
    p = problems[int(i)]
    prompt = codec.prompt_ids(p)
    comp = codec.completion_ids(task.demonstration(p, rng))
    row = (prompt + comp)[:seq_len]
    tokens[r, :len(row)] = row
    mask[r, len(prompt):len(row)] = True
  zeros = np.zeros((batch_size, seq_len), np.float32)
  return TrainBatch(tokens=tokens, loss_mask=mask, advantages=zeros,
                    group_id=np.arange(batch_size, dtype=np.int32))
