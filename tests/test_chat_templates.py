"""Prompt ids identical to Hugging Face transformers: chat templates (the built-in llama3 / qwen / gemma and a
checkpoint's own), the start token of plain prompts, the tokens that end a completion, and the config semantics
of ``task.chat_template``.

The reference is transformers' ``apply_chat_template(messages, add_generation_prompt=..., tokenize=True)``
(tests marked ``hf``) on small local tokenizers with each family's special tokens and post-processor (built with
the ``tokenizers`` package) and on SmolLM2-135M-Instruct's tokenizer (the ``smollm2_tokenizer_dir`` fixture).
"""
import json
import os

import numpy as np
import pytest

from rljax.data import FAMILIES, TEMPLATES, ChatTemplate, apply_chat_template, load_tokenizer, train_sentencepiece
from rljax.train import TaskConfig, apply_overrides, config_from_dict, config_to_dict, tiny_config
from rljax.train._codec import Codec, checkpoint_eos_ids, resolve_chat_template

QUESTION = "What is 7 + 12?"
CONVERSATIONS = [
    [{"role": "user", "content": QUESTION}],
    [{"role": "system", "content": "Answer with a number."}, {"role": "user", "content": QUESTION}],
    [{"role": "user", "content": "Hi there "}, {"role": "assistant", "content": " Hello! "},
     {"role": "user", "content": QUESTION}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"},
     {"role": "assistant", "content": "4"}, {"role": "user", "content": "And 3+3?\n"}],
]

# each family's special tokens, the ones its tokenizer_config.json names, and how its tokenizer.json starts a text
FAMILY_TOKENIZERS = {
    "llama3": dict(specials=["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                             "<|eot_id|>"],
                   config={"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
                   post="bos", generation_eos=["<|end_of_text|>", "<|eot_id|>"]),
    "qwen": dict(specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                 config={"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
                 post="bytelevel", generation_eos=["<|im_end|>", "<|endoftext|>"]),
    "gemma": dict(specials=["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"],
                  config={"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>",
                          "add_bos_token": True, "add_eos_token": False},
                  post=None, generation_eos=["<eos>", "<end_of_turn>"]),
}


def family_tokenizer(path, family, *, post="default", config=None, chat_template=None, generation=True):
  """A small byte-level BPE ``tokenizer.json`` with ``family``'s special tokens and post-processor
  (``post``: "bos" — TemplateProcessing putting bos first, as Llama-3's; "bytelevel" — adds nothing, as Qwen's;
  None — no post-processor), its ``tokenizer_config.json`` and a ``generation_config.json``."""
  from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
  spec = FAMILY_TOKENIZERS[family]
  alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
  tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
  tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
  tok.decoder = decoders.ByteLevel()
  tok.add_special_tokens(spec["specials"])
  cfg = dict(spec["config"] if config is None else config)
  post = spec["post"] if post == "default" else post
  if post == "bos":
    bos = cfg["bos_token"]
    tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                                       special_tokens=[(bos, tok.token_to_id(bos))])
  elif post == "bytelevel":
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
  os.makedirs(path, exist_ok=True)
  tok.save(os.path.join(path, "tokenizer.json"))
  cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
  if chat_template is not None:
    cfg["chat_template"] = chat_template
  with open(os.path.join(path, "tokenizer_config.json"), "w", encoding="utf-8") as f:
    json.dump(cfg, f)
  if generation:
    with open(os.path.join(path, "generation_config.json"), "w", encoding="utf-8") as f:
      json.dump({"eos_token_id": [tok.token_to_id(t) for t in spec["generation_eos"]]}, f)
  return str(path)


def hf_ids(path, messages, **kwargs):
  """transformers' ids of a conversation (the reference)."""
  from transformers import AutoTokenizer
  return AutoTokenizer.from_pretrained(path).apply_chat_template(messages, tokenize=True, return_dict=False,
                                                                 **kwargs)


# ----------------------------------------------------------------------------- parity with transformers


@pytest.mark.hf
@pytest.mark.parametrize("family", FAMILIES)
def test_builtin_templates_give_transformers_ids_on_the_familys_tokenizer(family, tmp_path):
  path = family_tokenizer(tmp_path / family, family)
  codec = Codec(load_tokenizer(path), family)
  for msgs in CONVERSATIONS:
    for gen in (True, False):
      assert codec.chat_ids(msgs, add_generation_prompt=gen) == hf_ids(path, msgs, chat_template=TEMPLATES[family],
                                                                       add_generation_prompt=gen), (msgs, gen)
  ids = codec.prompt_ids(QUESTION)
  assert ids == hf_ids(path, CONVERSATIONS[0], chat_template=TEMPLATES[family], add_generation_prompt=True)
  tok = codec.tok
  bos = tok.special_token_ids.get(tok.special_tokens.get("bos_token"))
  assert ids.count(bos) == (0 if family == "qwen" else 1) and (bos is None or ids[0] == bos)


@pytest.mark.hf
@pytest.mark.parametrize("family", FAMILIES)
def test_builtin_templates_give_transformers_ids_on_smollm2(family, smollm2_tokenizer_dir):
  codec = Codec(load_tokenizer(smollm2_tokenizer_dir), family)
  for msgs in CONVERSATIONS:
    assert codec.chat_ids(msgs) == hf_ids(smollm2_tokenizer_dir, msgs, chat_template=TEMPLATES[family],
                                          add_generation_prompt=True), msgs


@pytest.mark.hf
def test_the_checkpoints_own_template_gives_transformers_ids(smollm2_tokenizer_dir):
  tok = load_tokenizer(smollm2_tokenizer_dir)
  assert tok.chat_template and "<|im_start|>" in tok.chat_template  # read from chat_template.jinja
  template, described = resolve_chat_template("auto", tok, task_name="gsm8k", hf_checkpoint=smollm2_tokenizer_dir)
  assert template == tok.chat_template and "checkpoint" in described
  codec = Codec(tok, template)
  ids = codec.prompt_ids(QUESTION)
  assert ids == hf_ids(smollm2_tokenizer_dir, CONVERSATIONS[0], add_generation_prompt=True)
  assert ids[:2] == [1, 9690] and ids.count(1) == 3  # one <|im_start|> per turn (system, user, assistant), no extra
  for msgs in CONVERSATIONS:
    for gen in (True, False):
      assert codec.chat_ids(msgs, gen) == hf_ids(smollm2_tokenizer_dir, msgs, add_generation_prompt=gen)
  assert codec.stop_ids == (2,) and codec.end_id == 2  # <|im_end|>: eos and the end of a turn
  assert codec.completion_ids("19")[-1] == 2


@pytest.mark.hf
def test_the_template_from_tokenizer_config_and_in_the_config_file(smollm2_tokenizer_dir, tmp_path):
  """A checkpoint whose template is in tokenizer_config.json (a string, or a list with a "default"); a
  chat_template.jinja beside it wins, as in transformers."""
  for i, value in enumerate([TEMPLATES["gemma"], [{"name": "default", "template": TEMPLATES["gemma"]},
                                                  {"name": "tool_use", "template": TEMPLATES["qwen"]}]]):
    path = family_tokenizer(tmp_path / f"g{i}", "gemma", chat_template=value)
    tok = load_tokenizer(path)
    assert tok.chat_template == TEMPLATES["gemma"]
    assert Codec(tok, tok.chat_template).chat_ids(CONVERSATIONS[1]) == hf_ids(path, CONVERSATIONS[1],
                                                                              add_generation_prompt=True)
    with open(os.path.join(path, "chat_template.jinja"), "w", encoding="utf-8") as f:
      f.write(TEMPLATES["llama3"])
    assert load_tokenizer(path).chat_template == TEMPLATES["llama3"]
    assert Codec(load_tokenizer(path), TEMPLATES["llama3"]).chat_ids(CONVERSATIONS[1]) == hf_ids(
        path, CONVERSATIONS[1], add_generation_prompt=True)


@pytest.mark.hf
def test_the_jinja_environment_is_transformers(smollm2_tokenizer_dir):
  """Everything transformers' environment offers a template: trim/lstrip blocks, loop controls, a generation
  block, raise_exception, strftime_now, tojson without HTML escaping, namespace, dict, the special tokens."""
  from transformers import AutoTokenizer
  src = ("{% set ns = namespace(n=0) %}{{ bos_token }}|{{ eos_token }}|{{ unk_token }}|{{ pad_token }}\n"
         "  {% for m in messages %}\n    {% if m['role'] == 'system' %}{% continue %}{% endif %}\n"
         "    {% set ns.n = ns.n + 1 %}{% generation %}{{ m['content'] | tojson }}{% endgeneration %}"
         "{% if loop.index > 2 %}{% break %}{% endif %}\n  {% endfor %}\n"
         "{{ dict(a=1) | tojson }}{{ ns.n }}{{ strftime_now('%Y') | length }}"
         "{{ tools is none }}{{ documents is none }}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
  msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "<a href='x'>é & \"q\"</a>"},
          {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
  ref = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir)
  tok = load_tokenizer(smollm2_tokenizer_dir)
  mine = ChatTemplate(src).render(msgs, add_generation_prompt=True, special_tokens=tok.special_tokens)
  assert mine == ref.apply_chat_template(msgs, chat_template=src, add_generation_prompt=True, tokenize=False)
  assert "<a href='x'>é" in mine  # not escaped
  bad = "{{ raise_exception('no ' + messages[0]['role']) }}"
  with pytest.raises(ValueError, match="no user"):
    ChatTemplate(bad).render(CONVERSATIONS[0])


@pytest.mark.hf
@pytest.mark.parametrize("family, post, config", [
    ("llama3", "default", None),  # TemplateProcessing puts <|begin_of_text|> first
    ("qwen", "default", None),  # ByteLevel: nothing
    ("gemma", "bos", None),  # <bos> first
    # transformers ignores add_bos_token / add_eos_token when there is a tokenizer.json: the post-processor decides
    ("gemma", None, None),  # no post-processor, add_bos_token: true in the config: nothing
    ("gemma", "bos", {"bos_token": "<bos>", "eos_token": "<eos>", "add_bos_token": False, "add_eos_token": True}),
])
def test_plain_prompts_start_as_the_tokenizer_says(family, post, config, tmp_path):
  from transformers import AutoTokenizer
  path = family_tokenizer(tmp_path / "t", family, post=post, config=config)
  codec = Codec(load_tokenizer(path))
  ref = AutoTokenizer.from_pretrained(path)
  for text in (QUESTION, "1+1=", " spaced"):
    assert codec.prompt_ids(text) == ref(text)["input_ids"], text
  bos = codec.tok.special_tokens.get("bos_token")
  if codec.tok.has_bos:  # a text that already starts with the start token does not get it twice
    ids = codec.text_ids(bos + QUESTION)
    assert ids == codec.text_ids(QUESTION) and ids.count(codec.bos_id) == 1
  assert codec.tok.has_bos == (ref(QUESTION)["input_ids"][:1] == [ref.bos_token_id])


@pytest.mark.hf
def test_plain_smollm2_prompts_have_no_start_token(smollm2_tokenizer_dir):
  from transformers import AutoTokenizer
  codec = Codec(load_tokenizer(smollm2_tokenizer_dir))
  ref = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir)
  assert not codec.tok.has_bos
  for text in (QUESTION, "<|im_start|>user\nHi"):
    assert codec.prompt_ids(text) == ref.encode(text) == ref(text)["input_ids"]


# ----------------------------------------------------------------------------- without transformers


@pytest.mark.parametrize("family, eos, end, stops", [
    ("llama3", "<|eot_id|>", "<|eot_id|>", ["<|eot_id|>", "<|end_of_text|>"]),
    ("qwen", "<|im_end|>", "<|im_end|>", ["<|im_end|>", "<|endoftext|>"]),
    ("gemma", "<eos>", "<end_of_turn>", ["<eos>", "<end_of_turn>"]),
])
def test_stop_ids_are_the_checkpoints_end_tokens(family, eos, end, stops, tmp_path):
  path = family_tokenizer(tmp_path / family, family)
  tok = load_tokenizer(path)
  tid = tok.special_token_ids.get
  codec = Codec(tok, family, extra_stop_ids=checkpoint_eos_ids(path))
  assert codec.eos_id == tid(eos) and codec.end_id == tid(end)
  assert codec.stop_ids == tuple(tid(t) for t in stops)
  assert codec.completion_ids("12")[-1] == tid(end)
  tokens = np.array([tok.encode("12") + [tid(end), 7] + tok.encode("x") + [tid(eos)]])
  assert codec.decode_completions(tokens, np.ones_like(tokens, bool)) == ["12"]  # cut at the first stop token
  plain = Codec(tok, extra_stop_ids=checkpoint_eos_ids(path))  # no template: eos and the generation config's
  assert plain.end_id == tid(eos)
  assert set(plain.stop_ids) == {tid(t) for t in FAMILY_TOKENIZERS[family]["generation_eos"]} | {tid(eos)}


def test_checkpoint_eos_ids_read_the_generation_config_then_the_model_config(tmp_path):
  assert checkpoint_eos_ids(None) == [] and checkpoint_eos_ids(str(tmp_path)) == []
  (tmp_path / "config.json").write_text(json.dumps({"eos_token_id": 7}))
  assert checkpoint_eos_ids(str(tmp_path)) == [7]
  (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [3, 9]}))
  assert checkpoint_eos_ids(str(tmp_path)) == [3, 9]


def test_builtin_templates_render_the_published_strings():
  msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": " Hi "}]
  assert apply_chat_template("llama3", msgs) == (
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
  assert apply_chat_template("qwen", msgs[1:], add_generation_prompt=False) == (
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n Hi <|im_end|>\n")
  assert apply_chat_template("gemma", msgs + [{"role": "assistant", "content": "Hello"}]) == (
      "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello<end_of_turn>\n"
      "<start_of_turn>model\n")
  with pytest.raises(ValueError, match="'bos_token' is undefined"):  # as in transformers: a tokenizer without one
    apply_chat_template("llama3", msgs[1:], special_tokens={})
  with pytest.raises(ValueError, match="alternate"):
    apply_chat_template("gemma", [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
  with pytest.raises(ValueError, match="role"):
    apply_chat_template("llama3", [{"role": "tool", "content": "x"}])
  with pytest.raises(ValueError, match="not a valid Jinja"):
    ChatTemplate("{% for %}")


def test_char_tokenizer_prompts_are_unchanged():
  """The toy tasks' SentencePiece character tokenizer: [bos] + one id per character, bit for bit as before."""
  from rljax.envs import ArithmeticTask
  tok = train_sentencepiece(ArithmeticTask().corpus())
  codec = Codec(tok)
  assert codec.prompt_ids("730+580=") == [tok.bos_id] + tok.encode("730+580=")
  assert codec.completion_ids("221") == tok.encode("221") + [tok.eos_id]
  assert codec.stop_ids == (tok.eos_id,) and codec.template is None
  chat = Codec(train_sentencepiece(ArithmeticTask().corpus() + [apply_chat_template("gemma", [
      {"role": "user", "content": ""}], special_tokens={})]), "gemma")
  ids = chat.prompt_ids("1+2=")
  assert ids[0] == chat.bos_id and ids.count(chat.bos_id) == 1  # gemma's {{ bos_token }}: the <s> piece's id


def test_resolve_chat_template_choices(tmp_path):
  own = family_tokenizer(tmp_path / "own", "qwen", chat_template=TEMPLATES["qwen"])
  bare = family_tokenizer(tmp_path / "bare", "qwen")
  tok, no_template = load_tokenizer(own), load_tokenizer(bare)
  resolve = lambda choice, t=tok, task="jsonl", hf=own: resolve_chat_template(choice, t, task_name=task,
                                                                              hf_checkpoint=hf)[0]
  assert resolve("auto") == TEMPLATES["qwen"] and resolve("checkpoint") == TEMPLATES["qwen"]
  assert resolve("auto", task="arithmetic") is None and resolve("auto", hf=None) is None
  assert resolve("none") is None and resolve(None) is None and resolve("gemma") == "gemma"
  assert resolve("auto", t=no_template, task="arithmetic") is None
  for choice in ("auto", "checkpoint"):
    with pytest.raises(ValueError, match=r"has none.*llama3.*qwen.*gemma.*none"):
      resolve(choice, t=no_template, hf=bare)


def test_task_config_chat_template_values():
  assert TaskConfig().chat_template == "auto" and TaskConfig(chat_template=None).chat_template == "none"
  with pytest.raises(ValueError, match=r"TaskConfig\.chat_template='mistral'.*'auto', 'checkpoint', 'none'"):
    TaskConfig(chat_template="mistral")
  with pytest.raises(ValueError, match=r"TaskConfig\.chat_template.*multi-turn"):
    TaskConfig(name="frozenlake", chat_template="qwen")
  with pytest.raises(ValueError, match=r"task\.chat_template='checkpoint'.*hf_checkpoint"):
    apply_overrides(tiny_config("/tmp/x"), ["task.chat_template=checkpoint"])
  cfg = apply_overrides(tiny_config("/tmp/x"), ["task.chat_template=checkpoint", "model.hf_checkpoint=/ckpt"])
  assert cfg.task.chat_template == "checkpoint"
  assert apply_overrides(tiny_config("/tmp/x"), ["task.chat_template=none"]).task.chat_template == "none"
  # a config.json written before "auto" (None: plain prompts) loads with the same prompts
  old = config_to_dict(tiny_config("/tmp/x"))
  old["task"]["chat_template"] = None
  assert config_from_dict(old).task.chat_template == "auto"  # no hf checkpoint: auto is plain too
  from rljax.train._config import _legacy_chat_template  # pylint: disable=import-outside-toplevel
  old["model"]["hf_checkpoint"], old["task"]["name"] = "/ckpt", "gsm8k"  # a text task on a checkpoint: none
  assert _legacy_chat_template(old)["task"]["chat_template"] == "none"


# ----------------------------------------------------------------------------- runs: start-up checks, the CLI


def _tiny_checkpoint(path, tokenizer_dir, vocab_size):
  """A 1-layer Llama-architecture checkpoint (random weights, written by rljax) beside ``tokenizer_dir``'s files."""
  import shutil
  from flax import nnx
  from rljax.models import ModelConfig, Transformer, save_pretrained
  cfg = ModelConfig.tiny(vocab_size=vocab_size, hidden_size=16, num_layers=1, num_heads=2, num_kv_heads=1, head_dim=8,
                         intermediate_size=32, architecture="LlamaForCausalLM", tie_embeddings=True)
  save_pretrained(Transformer(cfg, rngs=nnx.Rngs(0)), str(path))
  for name in os.listdir(tokenizer_dir):
    if name.startswith(("tokenizer", "chat_template", "special_tokens", "generation")):
      shutil.copy(os.path.join(tokenizer_dir, name), os.path.join(path, name))
  return str(path)


def _questions(path, n=40):
  with open(path, "w", encoding="utf-8") as f:
    for i in range(n):
      f.write(json.dumps({"prompt": f"What is {i} + {i + 3}?", "answer": str(2 * i + 3)}) + "\n")
  return str(path)


def _run_config(out, ckpt, data, *more):
  return apply_overrides(tiny_config(str(out)), [
      f"model.hf_checkpoint={ckpt}", "task.name=jsonl", f"task.path={data}", "task.verifier=math_answer",
      "task.num_test=4", "sft.steps=1", "sft.batch_size=4", "rl.steps=0", "rl.max_new_tokens=3",
      "eval.num_problems=4", "eval.batch_size=4", "eval.num_samples=1", "eval.pass_k=1", *more])


def test_a_vocabulary_larger_than_the_embedding_is_refused_before_writing(tmp_path):
  from rljax.train import train
  tok_dir = family_tokenizer(tmp_path / "tok", "qwen", chat_template=TEMPLATES["qwen"])  # ids 0..258
  ckpt = _tiny_checkpoint(tmp_path / "ckpt", tok_dir, vocab_size=200)
  cfg = _run_config(tmp_path / "run", ckpt, _questions(tmp_path / "q.jsonl"))
  with pytest.raises(ValueError, match=r"ids 0\.\.258 \(259 ids, added tokens included\).*200 rows"):
    train(cfg)
  assert not os.path.exists(cfg.out_dir)


def test_a_checkpoint_without_a_template_is_refused_before_writing(tmp_path):
  from rljax.train import train
  ckpt = _tiny_checkpoint(tmp_path / "ckpt", family_tokenizer(tmp_path / "tok", "qwen"), vocab_size=272)
  cfg = _run_config(tmp_path / "run", ckpt, _questions(tmp_path / "q.jsonl"))
  with pytest.raises(ValueError, match=r"task\.chat_template=auto.*has none.*llama3.*none"):
    train(cfg)
  assert not os.path.exists(cfg.out_dir)
  explicit = apply_overrides(cfg, ["task.chat_template=checkpoint"])
  with pytest.raises(ValueError, match=r"task\.chat_template=checkpoint.*has none"):
    train(explicit)
  assert not os.path.exists(cfg.out_dir)


@pytest.fixture(scope="module")
def smollm2_run(smollm2_tokenizer_dir, tmp_path_factory):
  """A finished run (1 SFT step) of a tiny random model with SmolLM2's tokenizer and chat template on questions."""
  from rljax.train import train
  root = tmp_path_factory.mktemp("smollm2_run")
  ckpt = _tiny_checkpoint(root / "ckpt", smollm2_tokenizer_dir, vocab_size=49152)
  cfg = _run_config(root / "run", ckpt, _questions(root / "q.jsonl"))
  train(cfg)
  return cfg, ckpt, smollm2_tokenizer_dir  # transformers reads the tokenizer from the tokenizer-only directory


@pytest.fixture
def sent_prompts(monkeypatch):
  """The prompt ids every sampler call of ``Experiment.sample_fn`` receives."""
  from rljax.train._experiment import Experiment
  seen = []
  original = Experiment.sample_fn

  def spy(self, *args, **kwargs):
    fn = original(self, *args, **kwargs)

    def sample(prompts, **kw):
      seen.append([[int(i) for i in p] for p in prompts])
      return fn(prompts, **kw)
    return sample
  monkeypatch.setattr(Experiment, "sample_fn", spy)
  return seen


@pytest.mark.hf
def test_cli_sample_uses_the_runs_template_and_raw_sends_the_text(smollm2_run, sent_prompts, capsys):
  from transformers import AutoTokenizer
  from rljax import cli
  cfg, _, tok_dir = smollm2_run
  with open(os.path.join(cfg.out_dir, "config.json"), encoding="utf-8") as f:
    assert json.load(f)["task"]["chat_template"] == "auto"
  assert cli.main(["sample", "--run-dir", cfg.out_dir, QUESTION, "--greedy"]) == 0
  out = capsys.readouterr().out
  assert "checkpoint's chat template" in out.splitlines()[0] and out.splitlines()[1].startswith(QUESTION + "\t")
  expected = hf_ids(tok_dir, CONVERSATIONS[0], add_generation_prompt=True)
  assert sent_prompts[-1] == [expected] and expected[:2] == [1, 9690]
  assert cli.main(["sample", "--run-dir", cfg.out_dir, QUESTION, "--greedy", "--raw"]) == 0
  assert "raw prompts" in capsys.readouterr().out.splitlines()[0]
  assert sent_prompts[-1] == [AutoTokenizer.from_pretrained(tok_dir)(QUESTION)["input_ids"]]


@pytest.mark.hf
def test_cli_eval_and_load_run_use_the_runs_template(smollm2_run, sent_prompts, capsys):
  from rljax import cli
  from rljax.train import load_run
  cfg, ckpt, tok_dir = smollm2_run
  exp, _, _, _ = load_run(cfg.out_dir)
  assert exp.codec.template.source == load_tokenizer(ckpt).chat_template and exp.codec.stop_ids == (2,)
  assert exp.sampler_config.max_stop_tokens >= len(exp.codec.stop_ids)
  assert cli.main(["eval", "--run-dir", cfg.out_dir, "--num-samples", "1", "--k", "1", "--num-problems", "2"]) == 0
  assert json.loads(capsys.readouterr().out)["num_problems"] == 2
  problems = exp.test_problems[:2]
  expected = [hf_ids(tok_dir, [{"role": "user", "content": p.prompt}], add_generation_prompt=True) for p in problems]
  assert sent_prompts[0][:2] == expected  # greedy pass (rows after the problems repeat the first: fixed shapes)
