"""Tokenizers, TFDS builders, grain loaders, JSONL prompts, chat templates."""
import json

import pytest

from rljax.data import (apply_chat_template, build_task_dataset, jsonl_source, load_tokenizer, prompt_loader,
                        train_sentencepiece)
from rljax.envs import ArithmeticTask, CountdownTask, Problem


def test_char_sentencepiece_is_deterministic_and_one_id_per_char(tmp_path):
  corpus = ArithmeticTask().corpus()
  a = train_sentencepiece(corpus, str(tmp_path / "a"))
  b = train_sentencepiece(corpus, str(tmp_path / "b"))
  assert (tmp_path / "a" / "tokenizer.model").read_bytes() == (tmp_path / "b" / "tokenizer.model").read_bytes()
  assert a.vocab_size == 4 + 12
  text = "037+085="
  ids = a.encode(text)
  assert len(ids) == len(text) and a.decode(ids) == text
  assert (a.pad_id, a.bos_id, a.eos_id) == (0, 2, 3)
  assert a.decode(a.encode("221", add_bos=True, add_eos=True) + a.encode("99")) == "221"
  loaded = load_tokenizer(str(tmp_path / "a"))
  assert loaded.encode(text) == ids


def test_countdown_tokenizer_covers_its_alphabet():
  tok = train_sentencepiece(CountdownTask().corpus())
  text = "(3+4)*2-10/5,7>9="
  assert tok.decode(tok.encode(text)) == text and len(tok.encode(text)) == len(text)


def test_tfds_builder_and_grain_resume(tmp_path):
  task = ArithmeticTask()
  builder = build_task_dataset(task, str(tmp_path), num_train=64, num_test=16, seed=0)
  train = builder.as_data_source(split="train")
  test = builder.as_data_source(split="test")
  assert len(train) == 64 and len(test) == 16
  expected = {p.prompt for p in task.problems("train", 64, 0)}
  it = prompt_loader(train, batch_size=8, seed=1)
  first = next(it)
  assert {p.prompt for p in first} <= expected and all(isinstance(p, Problem) for p in first)
  state = it.get_state()
  rest = [[p.prompt for p in next(it)] for _ in range(10)]  # crosses an epoch boundary
  again = prompt_loader(train, batch_size=8, seed=1)
  again.set_state(state)
  assert [[p.prompt for p in next(again)] for _ in range(10)] == rest
  other = prompt_loader(train, batch_size=8, seed=2)
  assert [p.prompt for p in next(other)] != [p.prompt for p in first]


def test_loader_sharding_partitions_the_source():
  problems = ArithmeticTask().problems("train", 12, 0)
  seen = []
  for shard in range(3):
    it = prompt_loader(problems, batch_size=2, seed=0, shuffle=False, num_epochs=1, shard_index=shard,
                       shard_count=3)
    seen += [p.prompt for batch in it for p in batch]
  assert sorted(seen) == sorted(p.prompt for p in problems)
  with pytest.raises(ValueError, match="shard_index"):
    prompt_loader(problems, batch_size=2, seed=0, shard_index=3, shard_count=3)
  with pytest.raises(ValueError, match="batch_size"):
    prompt_loader(problems, batch_size=0, seed=0)


def test_jsonl_source(tmp_path):
  path = tmp_path / "prompts.jsonl"
  path.write_text(json.dumps({"prompt": "1+1=", "answer": "2", "level": 1}) + "\n\n"
                  + json.dumps({"prompt": "2+2="}) + "\n")
  src = jsonl_source(str(path))
  batch = next(prompt_loader(src, batch_size=2, seed=0, shuffle=False))
  assert batch[0] == Problem(prompt="1+1=", answer="2", meta={"level": 1})
  assert batch[1].answer == ""
  bad = tmp_path / "bad.jsonl"
  bad.write_text('{"prompt": "x"}\n{oops\n')
  with pytest.raises(ValueError, match="bad.jsonl:2"):
    jsonl_source(str(bad))


def test_chat_templates():
  msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
  assert apply_chat_template("qwen", msgs) == (
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
  assert apply_chat_template("llama3", msgs[1:]).endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
  assert apply_chat_template("llama3", msgs[1:]).count("<|begin_of_text|>") == 1
  assert apply_chat_template("gemma", msgs) == (
      "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n")
  with pytest.raises(ValueError, match="family"):
    apply_chat_template("gpt", msgs)
  with pytest.raises(ValueError, match="role"):
    apply_chat_template("qwen", [{"role": "tool", "content": "x"}])


def test_codec_adds_bos_only_when_the_tokenizer_puts_one_first(tmp_path):
  """The start token of a plain prompt is the tokenizer.json post-processor's: Qwen-style (none; ``bos_token:
  null``) gets the text alone, Llama-style (TemplateProcessing ``<s> $A``) gets ``<s>`` once."""
  import json
  from tokenizers import Tokenizer, models, pre_tokenizers, processors
  from rljax.train._codec import Codec
  vocab = {"<|endoftext|>": 0, "<|im_end|>": 1, "<s>": 2, "a": 3, "b": 4}
  tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|endoftext|>"))
  tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
  tok.add_special_tokens(["<|endoftext|>", "<|im_end|>", "<s>"])
  for name, bos in (("qwen", None), ("llama", "<s>")):
    d = tmp_path / name
    d.mkdir()
    if bos:
      tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 2)])
    tok.save(str(d / "tokenizer.json"))
    (d / "tokenizer_config.json").write_text(json.dumps({"bos_token": bos, "eos_token": "<|im_end|>",
                                                         "pad_token": "<|endoftext|>"}))
  qwen, llama = Codec(load_tokenizer(str(tmp_path / "qwen"))), Codec(load_tokenizer(str(tmp_path / "llama")))
  assert qwen.prompt_ids("ab") == [3, 4] and qwen.completion_ids("b") == [4, 1] and not qwen.tok.has_bos
  assert llama.prompt_ids("ab") == [2, 3, 4] and llama.tok.has_bos
  assert llama.prompt_ids("<s>ab") == [2, 3, 4]  # never twice
