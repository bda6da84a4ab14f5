"""Chat templates: Jinja templates rendered as Hugging Face transformers renders them.

``ChatTemplate(source).render(messages, add_generation_prompt=True, special_tokens=...) -> str`` renders a
template (a checkpoint's own, ``chat_template`` in ``tokenizer_config.json`` or ``chat_template.jinja``, or one
of the built-in ``TEMPLATES``) the way transformers' ``apply_chat_template`` does (transformers 5.25,
``utils/chat_template_utils.py``): an ``ImmutableSandboxedEnvironment`` with ``trim_blocks`` and
``lstrip_blocks``, the ``loopcontrols`` extension and a ``{% generation %}`` block that renders its body, a
``tojson`` filter that does not escape HTML (``ensure_ascii=False``), the globals ``raise_exception``,
``strftime_now``, ``dict`` and ``namespace``, and the variables ``messages`` (keys whose value is None dropped),
``tools=None``, ``documents=None``, ``add_generation_prompt`` and the tokenizer's named special tokens
(``bos_token``, ``eos_token``, ``unk_token``, ``sep_token``, ``pad_token``, ``cls_token``, ``mask_token``: those
it has, as strings). transformers then encodes the rendered text with ``add_special_tokens=False``: the start
token is the one the template writes (``rljax.train.Codec`` does the same).

``TEMPLATES``: the published templates of three families, ``llama3`` (Meta-Llama-3-Instruct: ``bos_token``, then
``<|start_header_id|>role<|end_header_id|>\\n\\n`` + trimmed content + ``<|eot_id|>`` per message), ``qwen``
(Qwen2-Instruct ChatML: a default system turn "You are a helpful assistant." when the conversation has none,
``<|im_start|>role\\ncontent<|im_end|>\\n``) and ``gemma`` (Gemma-3-it: ``bos_token``, a system message merged
into the first user turn, ``<start_of_turn>user|model\\n`` + trimmed content + ``<end_of_turn>\\n``, roles
alternating).

``apply_chat_template(family, messages, add_generation_prompt=True)`` renders a built-in template with the
family's own special tokens (``FAMILY_SPECIAL_TOKENS``) unless others are given. ``messages``: a list of
``{"role": "system"|"user"|"assistant", "content": str}``.
"""
from __future__ import annotations

import datetime
import json
from typing import Mapping, Optional, Sequence

__all__ = ["FAMILIES", "TEMPLATES", "FAMILY_SPECIAL_TOKENS", "SPECIAL_TOKEN_NAMES", "ChatTemplate",
           "apply_chat_template", "check_messages"]

FAMILIES = ("llama3", "qwen", "gemma")
SPECIAL_TOKEN_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")

# The families' published templates (Hugging Face ``tokenizer_config.json`` "chat_template"), as Jinja source.
TEMPLATES = {
    # meta-llama/Meta-Llama-3-8B-Instruct
    "llama3": (
        "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
        "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
        "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
        "{% endif %}"),
    # Qwen/Qwen2-7B-Instruct (ChatML with a default system turn)
    "qwen": (
        "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
        "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
        "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"),
    # google/gemma-3-1b-it
    "gemma": """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\\n'}}
{%- endif -%}
""",
}

# The special tokens of each family's tokenizer that its template reads (``apply_chat_template``'s default).
FAMILY_SPECIAL_TOKENS = {
    "llama3": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "qwen": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "gemma": {"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>"},
}

_PROBE = "rljax-end-of-turn-probe"  # an assistant message's text, to find what the template writes after it


def check_messages(messages: Sequence[Mapping[str, str]]) -> None:
  """Raises ``ValueError`` unless each message has a role of system, user or assistant and string content."""
  if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
    raise ValueError(f"messages must be a list of {{'role', 'content'}} dicts, got {type(messages).__name__}")
  for i, m in enumerate(messages):
    if not isinstance(m, Mapping):
      raise ValueError(f"messages[{i}] must be a dict with 'role' and 'content', got {type(m).__name__}")
    if m.get("role") not in ("system", "user", "assistant"):
      raise ValueError(f"messages[{i}].role must be system, user or assistant; got {m.get('role')!r}")
    if not isinstance(m.get("content"), str):
      raise ValueError(f"messages[{i}].content must be a string")


def _environment():
  """A Jinja environment configured as transformers' ``_cached_compile_jinja_template``."""
  try:
    import jinja2  # pylint: disable=import-outside-toplevel
    import jinja2.ext  # pylint: disable=import-outside-toplevel
    from jinja2.sandbox import ImmutableSandboxedEnvironment  # pylint: disable=import-outside-toplevel
  except ImportError as e:  # pragma: no cover - jinja2 is a core dependency
    raise ImportError("chat templates need the `jinja2` package: pip install jinja2") from e

  class Generation(jinja2.ext.Extension):
    """``{% generation %}...{% endgeneration %}`` (transformers' assistant-mask tracker): renders its body."""
    tags = {"generation"}

    def parse(self, parser):
      lineno = next(parser.stream).lineno
      body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
      return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
      return caller()

  def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)

  def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

  def strftime_now(fmt):
    return datetime.datetime.now().strftime(fmt)

  class TemplateDict:
    """``dict(...)`` and ``dict.fromkeys(...)`` without the type's other attributes."""

    def __call__(self, *args, **kwargs):
      return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
      return dict.fromkeys(*args, **kwargs)

  class TemplateNamespace(jinja2.utils.Namespace):
    """A namespace that refuses underscore-prefixed attributes (as transformers')."""

    def __init__(*args, **kwargs):  # pylint: disable=no-method-argument
      self, args = args[0], args[1:]
      attrs = dict(*args, **kwargs)
      for name in attrs:
        TemplateNamespace.check_name(name)
      jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
      TemplateNamespace.check_name(name)
      jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def check_name(name):
      if isinstance(name, str) and name.startswith("_"):
        raise jinja2.exceptions.SecurityError(f"chat templates cannot set underscore-prefixed attributes on a "
                                              f"namespace, got {name!r}")

  env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                      extensions=[Generation, jinja2.ext.loopcontrols])
  env.filters["tojson"] = tojson
  env.globals["raise_exception"] = raise_exception
  env.globals["strftime_now"] = strftime_now
  env.globals["dict"] = TemplateDict()
  env.globals["namespace"] = TemplateNamespace
  return env


class ChatTemplate:
  """A compiled chat template (Jinja ``source``); ``name`` says where it came from (for messages)."""

  def __init__(self, source: str, name: str = "chat template"):
    if not isinstance(source, str) or not source.strip():
      raise ValueError(f"{name}: a chat template must be a non-empty Jinja string, got {source!r}")
    import jinja2  # pylint: disable=import-outside-toplevel
    self.source = source
    self.name = name
    try:
      self._template = _environment().from_string(source)
    except jinja2.exceptions.TemplateError as e:
      raise ValueError(f"{name} is not a valid Jinja template: {e}") from None

  def render(self, messages: Sequence[Mapping[str, str]], *, add_generation_prompt: bool = True,
             special_tokens: Optional[Mapping[str, str]] = None, **variables) -> str:
    """The conversation as text, as transformers' ``apply_chat_template(..., tokenize=False)`` renders it.

    ``special_tokens``: the tokenizer's named special tokens (``bos_token`` ...; the template reads them);
    ``variables``: further template variables (they win over a special token of the same name, as in
    transformers). A template's ``raise_exception`` or any rendering error is a ``ValueError``.
    """
    import jinja2  # pylint: disable=import-outside-toplevel
    check_messages(messages)
    msgs = [{k: v for k, v in m.items() if v is not None} for m in messages]
    tokens = {k: str(v) for k, v in (special_tokens or {}).items() if k in SPECIAL_TOKEN_NAMES and v is not None}
    try:
      return self._template.render(messages=msgs, tools=None, documents=None,
                                   add_generation_prompt=bool(add_generation_prompt), **{**tokens, **variables})
    except jinja2.exceptions.TemplateError as e:
      raise ValueError(f"{self.name} refused the conversation {[m['role'] for m in msgs]}: {e}") from None

  def end_of_turn(self, special_tokens: Optional[Mapping[str, str]], token_ids: Mapping[str, int]) -> Optional[int]:
    """The id of the special token the template writes right after an assistant message (``<|im_end|>``,
    ``<|eot_id|>``, ``<end_of_turn>``), or None when what follows is not one of ``token_ids`` (the tokenizer's
    special tokens, text -> id) or the template cannot render a user/assistant exchange."""
    try:
      text = self.render([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": _PROBE}],
                         add_generation_prompt=False, special_tokens=special_tokens)
    except ValueError:
      return None
    at = text.rfind(_PROBE)
    if at < 0:
      return None
    after = text[at + len(_PROBE):]
    hits = [t for t in token_ids if t and after.startswith(t)]
    return int(token_ids[max(hits, key=len)]) if hits else None


def apply_chat_template(family: str, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True,
                        special_tokens: Optional[Mapping[str, str]] = None) -> str:
  """``messages`` in the built-in template of ``family`` (one of ``FAMILIES``), as text.

  ``special_tokens`` (default: the family's own, ``FAMILY_SPECIAL_TOKENS``) fill ``bos_token`` and the like.
  """
  if family not in TEMPLATES:
    raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
  tokens = FAMILY_SPECIAL_TOKENS[family] if special_tokens is None else special_tokens
  return ChatTemplate(TEMPLATES[family], f"the built-in {family} chat template").render(
      messages, add_generation_prompt=add_generation_prompt, special_tokens=tokens)
