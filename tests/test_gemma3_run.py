"""A Gemma 3 run end to end from the command line, the real model's route at a tiny size: a tiny random Gemma 3
GGUF file (the ``gguf`` package, a SentencePiece vocabulary in its metadata and no chat template: a base model, as
the real 270M file is) -> ``rljax train`` (1 SFT step and 2 RL steps on small additions, the prompt text as is)
-> ``rljax export`` -> transformers loads the directory as ``Gemma3ForCausalLM`` with its tokenizer, encodes the
run's prompts to the ids rljax trained on, and greedy-decodes the same tokens as rljax's sampler from the trained
state. Then ``rljax train --config gemma3_sequences`` on the same tiny file (its environment's route).

References: transformers' (torch CPU, float32) ``AutoTokenizer`` and ``generate`` on the exported directory, and
the exported weights against the run's own checkpoint. Long guard (two tiny runs, 5-10 min on 2 loaded cores).
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
pytest.importorskip("gguf")

from _gguf_files import write_family_gguf  # noqa: E402

from rljax import cli  # noqa: E402

pytestmark = [pytest.mark.long, pytest.mark.hf]

_SETS = ["task.name=small_addition", "task.chat_template=none", "sft.steps=1", "sft.batch_size=4", "rl.steps=2",
         "rl.num_prompts=2", "rl.group_size=2", "rl.max_new_tokens=6", "rl.concurrent_rollouts=1", "task.num_train=8",
         "eval.num_problems=4", "eval.batch_size=4", "eval.num_samples=1", "eval.pass_k=1", "checkpoint.every=1",
         "progress=false", "plot=false", "tensorboard=false", "sft.optim.warmup_steps=0"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  root = tmp_path_factory.mktemp("gemma3_run")
  mp = pytest.MonkeyPatch()
  mp.setenv("RLJAX_CACHE", str(root / "cache"))  # the GGUF's converted directory and compiled programs stay here
  try:
    torch.set_num_threads(2)
    gguf_file = str(root / "tiny-gemma3.gguf")
    write_family_gguf(gguf_file, "gemma3")
    out = str(root / "run")
    log = io.StringIO()
    with contextlib.redirect_stdout(log):
      code = cli.main(["train", "--out-dir", out, "--set", f"model.hf_checkpoint={gguf_file}",
                       *[a for s in _SETS for a in ("--set", s)]])
    assert code == 0, log.getvalue()[-3000:]
    yield out, gguf_file, log.getvalue()
  finally:
    mp.undo()


def test_a_base_model_gguf_trains_from_the_cli(run):
  out, gguf_file, log = run
  assert "[rljax] RL step 2/2: rollout " in log
  with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
    model = json.load(f)["model"]
  assert model["hf_checkpoint"] == gguf_file and (model["num_layers"], model["hidden_size"]) == (7, 64)
  rows = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl"), encoding="utf-8")]
  assert len([r for r in rows if r["stage"] == "rl" and "loss" in r and np.isfinite(r["loss"])]) == 2


def test_a_base_model_without_a_template_is_refused_under_auto_naming_none(tmp_path, run, capsys):
  _, gguf_file, _ = run
  sets = [s for s in _SETS if not s.startswith("task.chat_template")]
  assert cli.main(["train", "--out-dir", str(tmp_path / "auto"), "--set", f"model.hf_checkpoint={gguf_file}",
                   *[a for s in sets for a in ("--set", s)]]) == 2
  err = capsys.readouterr().err
  assert "task.chat_template=auto" in err and "has none" in err and "none (the prompt text as is)" in err
  assert not os.path.exists(tmp_path / "auto")


def test_export_loads_as_gemma3_and_greedy_decodes_rljax_tokens(run, tmp_path):
  import jax  # pylint: disable=import-outside-toplevel
  from flax import nnx  # pylint: disable=import-outside-toplevel
  from rljax.envs import get_task  # pylint: disable=import-outside-toplevel
  from rljax.train._run import load_run  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  from rljax.models import from_pretrained  # pylint: disable=import-outside-toplevel
  out, gguf_file, _ = run
  dst = str(tmp_path / "exported")
  assert cli.main(["export", "--run-dir", out, dst]) == 0
  for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
               "generation_config.json"):
    assert os.path.exists(os.path.join(dst, name)), name
  assert not os.path.exists(os.path.join(dst, "chat_template.jinja"))  # a base model: none invented
  exp, graphdef, state, info = load_run(out)
  assert info["stage"] == "rl" and info["step"] == 2
  hf = transformers.AutoModelForCausalLM.from_pretrained(dst, dtype=torch.float32).eval()
  assert type(hf).__name__ == "Gemma3ForCausalLM" and hf.config.layer_types[:6] == ["sliding_attention"] * 5 + [
      "full_attention"]
  # the exported weights are the trained ones, not the file's (the SFT step moved them)
  trained = nnx.merge(graphdef, jax.device_get(state.params), jax.device_get(state.model_state))
  ids = np.random.RandomState(3).randint(0, hf.config.vocab_size, (2, 12))
  with torch.no_grad():
    theirs = hf(torch.tensor(ids)).logits.numpy()
  np.testing.assert_allclose(theirs, np.asarray(trained(jnp.asarray(ids, jnp.int32), return_logits=True).logits),
                             rtol=0, atol=1e-4)
  start = from_pretrained(gguf_file)
  assert np.abs(theirs - np.asarray(start(jnp.asarray(ids, jnp.int32), return_logits=True).logits)).max() > 1e-3
  tok = transformers.AutoTokenizer.from_pretrained(dst)
  problems = get_task("small_addition").problems("test", 3, 0)
  prompts = [exp.codec.prompt_ids(p) for p in problems]
  for p, ids in zip(problems, prompts):  # the ids rljax trained on are the exported tokenizer's: <bos> + the text
    assert ids == tok.encode(p.prompt) and ids[0] == tok.bos_token_id == 2
  new = 8
  exp.sampler_config = dataclasses.replace(exp.sampler_config, max_new_tokens=new, cache_size=None)
  fn = exp.sample_fn(graphdef, state.params, state.model_state)
  rollout = fn(prompts, n=1, greedy=True, temperature=1.0, key=jax.random.PRNGKey(0))
  ours = [[int(t) for t in row[m]] for row, m in zip(np.asarray(rollout.tokens),
                                                      np.asarray(rollout.completion_mask, bool))]
  for ids, mine in zip(prompts, ours):
    with torch.no_grad():  # the exported generation_config.json gives eos/pad, as a user's generate() reads them
      gen = hf.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                        max_new_tokens=new, do_sample=False)
    theirs = [int(t) for t in gen[0, len(ids):]]
    assert mine == theirs, (mine, theirs)
  assert len({tuple(o) for o in ours}) > 1 or len(ours[0]) > 1  # not an immediate stop everywhere


def test_the_gemma3_config_trains_its_environment_on_a_base_model(run, tmp_path, monkeypatch, capsys):
  """``rljax train --config gemma3_sequences`` start to end (the real file swapped for the tiny one): the
  config's own environment (few-shot prompt as plain text, newline stop) runs through the start-up check, the
  zero-shot eval, one RL step and the final eval."""
  import rljax.models  # pylint: disable=import-outside-toplevel
  _, gguf_file, _ = run
  monkeypatch.setattr(rljax.models, "gemma3_gguf_path", lambda: gguf_file)
  out = str(tmp_path / "seq")
  sets = ["rl.steps=1", "rl.num_prompts=2", "rl.group_size=2", "eval.num_problems=4", "eval.batch_size=4",
          "eval.num_samples=1", "eval.pass_k=1", "progress=false", "plot=false", "tensorboard=false"]
  assert cli.main(["train", "--config", "gemma3_sequences", "--out-dir", out,
                   *[a for s in sets for a in ("--set", s)]]) == 0
  log = capsys.readouterr().out
  assert "task=env" in log and "test=72" in log and "[rljax] zero-shot (no SFT): held-out greedy accuracy" in log
  assert "[rljax] RL step 1/1: rollout " in log
  with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
    cfg = json.load(f)
  assert cfg["task"]["env"] == "rljax.configs.gemma3_sequences:make_env"
  assert cfg["model"]["hf_checkpoint"] == gguf_file
