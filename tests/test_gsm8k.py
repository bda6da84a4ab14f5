"""GSM8K from a local TFDS directory (no download, no TensorFlow), its verifier, and the real-model config.

A tiny dataset *named gsm8k with the features of the TFDS one* (question, answer, annotation,
short_answer; splits train/test; version 1.0.0) is prepared as array_record in a tmp dir and read back
through ``get_task("gsm8k", data_dir=tmp)``.
"""
import importlib.util
import json
import os

import numpy as np
import pytest
import tensorflow_datasets as tfds

from rljax.envs import GSM8KTask, VERL_INSTRUCTION, get_task, gsm8k_reference

CONFIGS = os.path.join(os.path.dirname(__file__), os.pardir, "configs")

TRAIN = [(f"Tom has {a} apples and buys {b} more. How many apples does he have?",
          f"He has {a}+{b}=<<{a}+{b}={a + b}>>{a + b} apples.\n#### {a + b:,}") for a, b in
         [(3, 4), (12, 30), (5, 5), (700, 800), (2, 9), (41, 1), (6, 7), (10, 20), (999, 1), (8, 8)]]
TEST = [("A box holds 6 eggs. How many eggs are in 4 boxes?", "6*4=<<6*4=24>>24\n#### 24"),
        ("Sam had 10 dollars and spent 12.5. How much does he have now?", "10-12.5=-2.5\n#### -2.5"),
        ("What is 1,000 times 3?", "1000*3=3000\n#### 3,000")]


class _Gsm8kLike(tfds.core.GeneratorBasedBuilder, skip_registration=True):
  """Same name, version, features and splits as tensorflow_datasets/text/gsm8k; examples from lists."""
  name = "gsm8k"
  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Initial release."}

  def _info(self):
    return tfds.core.DatasetInfo(builder=self, supervised_keys=None, features=tfds.features.FeaturesDict(
        {k: tfds.features.Text() for k in ("question", "answer", "annotation", "short_answer")}))

  def _split_generators(self, dl_manager):
    del dl_manager
    return {"train": self._generate_examples(TRAIN), "test": self._generate_examples(TEST)}

  def _generate_examples(self, rows):
    for i, (q, a) in enumerate(rows):
      ann, short = a.split("#### ")
      yield i, {"question": q, "answer": a, "annotation": ann, "short_answer": short}


def write_tiny_gsm8k(data_dir) -> str:
  builder = _Gsm8kLike(data_dir=str(data_dir), file_format="array_record")
  builder.download_and_prepare(file_format="array_record")
  return str(data_dir)


@pytest.fixture(scope="module")
def gsm8k_dir(tmp_path_factory):
  return write_tiny_gsm8k(tmp_path_factory.mktemp("tfds"))


def test_reads_local_tfds_dir_without_download(gsm8k_dir):
  assert os.path.isdir(os.path.join(gsm8k_dir, "gsm8k", "1.0.0"))
  assert any(f.endswith(".array_record-00000-of-00001") or "array_record" in f
             for f in os.listdir(os.path.join(gsm8k_dir, "gsm8k", "1.0.0")))
  task = get_task("gsm8k", data_dir=gsm8k_dir)
  assert isinstance(task, GSM8KTask)
  test = task.problems("test", 3, seed=5)
  assert task.problems("test", 2, seed=9) == test[:2]                 # test: stored order, seed-independent
  want = {TEST[0][0]: "24", TEST[1][0]: "-2.5", TEST[2][0]: "3000"}   # number after ####, no commas
  assert {p.meta["question"]: p.answer for p in test} == want
  assert all(p.prompt == p.meta["question"] + " " + VERL_INSTRUCTION for p in test)
  assert {p.meta["solution"] for p in test} == {a for _, a in TEST}
  train = task.problems("train", 10, seed=0)
  assert sorted(p.meta["question"] for p in train) == sorted(q for q, _ in TRAIN)  # a permutation
  assert task.problems("train", 4, seed=0) == train[:4]
  assert task.problems("train", 10, seed=1) != train
  sums = {f"Tom has {a} apples and buys {b} more. How many apples does he have?": a + b
          for a, b in [(3, 4), (12, 30), (5, 5), (700, 800), (2, 9), (41, 1), (6, 7), (10, 20), (999, 1), (8, 8)]}
  for p in train:
    assert p.answer == str(sums[p.meta["question"]])
    assert task.demonstration(p, np.random.default_rng(0)) == p.meta["solution"]
  with pytest.raises(ValueError, match="num=11"):
    task.problems("train", 11, seed=0)
  with pytest.raises(ValueError, match="split"):
    task.problems("validation", 1, seed=0)


def test_missing_or_unprepared_dir_is_a_clear_error(tmp_path):
  with pytest.raises(ValueError, match="does not exist"):
    get_task("gsm8k", data_dir=str(tmp_path / "nope")).problems("test", 1, 0)
  with pytest.raises(ValueError, match="tfds build gsm8k"):
    get_task("gsm8k", data_dir=str(tmp_path)).problems("test", 1, 0)
  with pytest.raises(ValueError, match="method"):
    GSM8KTask(method="loose")


def test_chat_template_prompt(gsm8k_dir):
  """The task's prompt is the question + instruction; the Codec renders it as one user message."""
  from rljax.data import train_sentencepiece
  from rljax.train._codec import Codec
  task = GSM8KTask(data_dir=gsm8k_dir)
  p = task.problems("test", 1, 0)[0]
  assert p.prompt == f"{p.meta['question']} {VERL_INSTRUCTION}"
  codec = Codec(train_sentencepiece(task.corpus() + ["<|im_start|>system\nYou are a helpful assistant."]), "qwen")
  assert codec.render(p.prompt) == ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
                                    f"{p.meta['question']} {VERL_INSTRUCTION}<|im_end|>\n<|im_start|>assistant\n")


def test_reference_extraction():
  assert gsm8k_reference("so 5+7=12\n#### 12") == "12"
  assert gsm8k_reference("#### 1,234") == "1234"
  assert gsm8k_reference("#### -3.5") == "-3.5"
  assert gsm8k_reference("first #### 1 then\n#### 2") == "2"
  with pytest.raises(ValueError, match="####"):
    gsm8k_reference("no final answer")


def _brute_last_number(text):
  """Independent reference: scan the text right to left for the last maximal run of [-0-9.,]."""
  i = len(text) - 1
  while i >= 0 and not text[i].isdigit():
    i -= 1
  if i < 0:
    return None
  j = i
  while j - 1 >= 0 and (text[j - 1].isdigit() or text[j - 1] in ",."):
    j -= 1
  if j - 1 >= 0 and text[j - 1] == "-":
    j -= 1
  return text[j:i + 1].replace(",", "").lstrip(".")


@pytest.mark.parametrize("method", ["flexible", "strict"])
def test_verifier_against_reference(gsm8k_dir, method):
  task = GSM8KTask(data_dir=gsm8k_dir, method=method)
  by_answer = {p.answer: p for p in task.problems("test", 3, 0)}
  problems = [by_answer["24"], by_answer["-2.5"], by_answer["3000"]]
  cases = [
      ("6*4 = 24. The answer is 24", 0), ("So 24 eggs.\n#### 24", 0), ("#### 24.0", 0), ("#### 25", 0),
      ("I think 23, no, 24\n#### 24 eggs", 0), ("24 then 25", 0), ("", 0), ("no number", 0),
      ("10 - 12.5 = -2.5\n#### -2.5", 1), ("#### 2.5", 1), ("it is -2.50", 1),
      ("1000 * 3 = 3,000\n#### 3,000", 2), ("#### 3000", 2), ("3000.", 2), ("#### 30000", 2),
  ]
  comps = [c for c, _ in cases]
  probs = [problems[i] for _, i in cases]
  got = task.score(comps, probs)
  assert got.dtype == np.float32 and got.shape == (len(cases),)
  for (text, i), r in zip(cases, got):
    if method == "flexible":
      pred = _brute_last_number(text)
    elif "####" in text:  # the first word after the last "####" on its line
      words = text.rsplit("####", 1)[1].split("\n")[0].split()
      pred = words[0].replace(",", "").rstrip(".") if words else None
    else:
      pred = None
    want = pred is not None and pred not in ("", "-") and float(pred) == float(problems[i].answer)
    assert r == float(want), (method, text, pred)
  # malformed model output never raises
  assert task.score([None, 3, "#### " + "9" * 500], problems[:3]).tolist() == [0.0, 0.0, 0.0]
  with pytest.raises(ValueError, match="differ in length"):
    task.score(["1"], problems)


# ----------------------------------------------------------------------------- the real-model config


def _load_config(name):
  spec = importlib.util.spec_from_file_location(f"cfg_{name}", os.path.join(CONFIGS, f"{name}.py"))
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod.get_config()


def test_qwen_config_loads_and_validates():
  from rljax.train import apply_overrides
  cfg = _load_config("qwen2_5_0_5b_gsm8k")
  assert cfg.task.name == "gsm8k" and cfg.model.hf_checkpoint and cfg.task.tfds_dir
  assert cfg.task.chat_template == "auto"  # the checkpoint's own (Qwen2.5-Instruct's) template
  with pytest.raises(ValueError, match=r"task\.chat_template"):
    apply_overrides(cfg, ["task.chat_template=mistral"])
  assert cfg.task.num_train == 7473 and cfg.task.num_test == 1319  # the TFDS gsm8k split sizes
  assert cfg.rl.batch_size % cfg.rl.num_minibatches == 0


def _tiny_qwen2_checkpoint(path):
  """A tiny Qwen2-architecture HF checkpoint + a word-level tokenizer.json built locally."""
  torch = pytest.importorskip("torch")
  transformers = pytest.importorskip("transformers")
  from tokenizers import Tokenizer, models, pre_tokenizers, decoders
  from rljax.data import TEMPLATES
  chars = sorted(set("".join(q + a for q, a in TRAIN + TEST) + VERL_INSTRUCTION + "You are a helpful assistant.<|>_"))
  specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
  vocab = {t: i for i, t in enumerate(specials + [c for c in chars if c not in specials])}
  tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|endoftext|>"))
  tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
  tok.decoder = decoders.Fuse()
  tok.add_special_tokens(specials)
  os.makedirs(path, exist_ok=True)
  tok.save(os.path.join(path, "tokenizer.json"))
  with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
    json.dump({"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
               "chat_template": TEMPLATES["qwen"]}, f)
  cfg = transformers.Qwen2Config(vocab_size=len(vocab) + 8, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                                 tie_word_embeddings=True, eos_token_id=vocab["<|im_end|>"],
                                 bos_token_id=vocab["<|endoftext|>"])
  torch.manual_seed(0)
  transformers.Qwen2ForCausalLM(cfg).save_pretrained(path, safe_serialization=True)
  return path, vocab


@pytest.mark.slow  # ~80 s of CPU time (compiles: SFT step, sampler x3, RL step); the config itself is checked above
def test_qwen_config_end_to_end_at_toy_scale(gsm8k_dir, tmp_path):
  """The shipped config, with a tiny local Qwen2 checkpoint and the tiny gsm8k: 1 SFT step + 1 RL step."""
  from rljax.train import apply_overrides, read_jsonl, train
  hf, vocab = _tiny_qwen2_checkpoint(str(tmp_path / "hf"))
  cfg = apply_overrides(_load_config("qwen2_5_0_5b_gsm8k"), [
      f"model.hf_checkpoint={hf}", f"task.tfds_dir={gsm8k_dir}", f"out_dir={tmp_path / 'run'}",
      "model.dtype=float32", "task.num_train=10", "task.num_test=3", "sft.steps=1", "sft.batch_size=8",
      "rl.steps=1", "rl.num_prompts=4", "rl.group_size=2", "rl.max_new_tokens=8", "rl.num_minibatches=1",
      "rl.num_microbatches=1", "eval.num_problems=3", "eval.batch_size=3", "eval.num_samples=2", "eval.pass_k=1,2",
      "progress=false", "tensorboard=false", "plot=false"])  # the config's mesh: FSDP over the 8 test devices
  summary = train(cfg)
  rows = read_jsonl(os.path.join(cfg.out_dir, "metrics.jsonl"))
  sft = [r for r in rows if r["stage"] == "sft" and "loss" in r]
  rl = [r for r in rows if r["stage"] == "rl" and "loss" in r]
  assert len(sft) == 1 and len(rl) == 1
  assert np.isfinite(sft[0]["loss"]) and np.isfinite(rl[0]["loss"]) and rl[0]["train/skipped"] == 0.0
  assert 0.0 <= summary["rl"]["greedy_accuracy"] <= 1.0
  assert os.path.isdir(os.path.join(cfg.out_dir, "checkpoints", "rl"))
