"""Chat templates of the supported families, as plain Python (no jinja).

``apply_chat_template(family, messages, add_generation_prompt=True) -> str``
with ``messages`` a list of ``{"role": "system"|"user"|"assistant", "content": str}``.
The strings follow the families' published templates (Llama-3 header tokens,
Qwen ChatML, Gemma turns).
"""
from __future__ import annotations

from typing import Mapping, Sequence

FAMILIES = ("llama3", "qwen", "gemma")


def _check(messages):
  for i, m in enumerate(messages):
    if m.get("role") not in ("system", "user", "assistant"):
      raise ValueError(f"messages[{i}].role must be system, user or assistant; got {m.get('role')!r}")
    if not isinstance(m.get("content"), str):
      raise ValueError(f"messages[{i}].content must be a string")


def apply_chat_template(family: str, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True) -> str:
  _check(messages)
  if family == "llama3":
    out = "<|begin_of_text|>"
    for m in messages:
      out += f"<|start_header_id|>{m['role']}<|end_header_id|>\n\n{m['content'].strip()}<|eot_id|>"
    if add_generation_prompt:
      out += "<|start_header_id|>assistant<|end_header_id|>\n\n"
    return out
  if family == "qwen":
    out = ""
    if not messages or messages[0]["role"] != "system":
      out += "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    for m in messages:
      out += f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n"
    if add_generation_prompt:
      out += "<|im_start|>assistant\n"
    return out
  if family == "gemma":
    out = "<bos>"
    system = ""
    for m in messages:
      if m["role"] == "system":
        system = m["content"] + "\n\n"
        continue
      role = "model" if m["role"] == "assistant" else "user"
      out += f"<start_of_turn>{role}\n{system if role == 'user' else ''}{m['content'].strip()}<end_of_turn>\n"
      if role == "user":
        system = ""
    if add_generation_prompt:
      out += "<start_of_turn>model\n"
    return out
  raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
