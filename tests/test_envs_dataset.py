"""A user's own data: the jsonl and tfds tasks (rljax.envs._dataset), their config checks, and docs/data.md."""
import json
import os
import re

import numpy as np
import pytest

from rljax import cli
from rljax.envs import DatasetTask, Problem, jsonl_task, read_jsonl, tfds_task
from rljax.envs._task import split_of
from rljax.train import TaskConfig, apply_overrides, config_from_dict, config_to_dict, default_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _write(path, lines):
  path.write_text("".join(l if isinstance(l, str) else json.dumps(l) + "\n" for l in lines), encoding="utf-8")
  return str(path)


def _additions(path, n=10):
  return _write(path, [{"prompt": f"{a}+{b}=", "answer": str(a + b), "id": 10 * a + b}
                       for a in range(n) for b in range(n)])


# ----------------------------------------------------------------------------- reading


def test_read_jsonl_fields_meta_numbers_and_blank_lines(tmp_path):
  path = _write(tmp_path / "d.jsonl", [{"q": "1+1=", "a": 2, "src": "x"}, "\n", "   \n", {"q": "say hi", "a": "hi"}])
  recs = read_jsonl(path, prompt_field="q", answer_field="a")
  assert recs == [{"prompt": "1+1=", "answer": "2", "meta": {"src": "x", "index": 0}},
                  {"prompt": "say hi", "answer": "hi", "meta": {"index": 1}}]


@pytest.mark.parametrize("lines, match", [
    ([], "is empty"),
    (["\n", "  \n"], "is empty"),
    ([{"prompt": "a", "answer": "b"}, {"prompt": "c", "answer": "d"}, '{"prompt": "e", "answer": \n'],
     r"d\.jsonl:3: not valid JSON"),
    ([{"prompt": "a", "answer": "b"}, "[1, 2]\n"], r"d\.jsonl:2: each line must be a JSON object, got list"),
    ([{"prompt": "a", "answer": "b"}, "\n", {"prompt": "c"}],
     r"d\.jsonl:3: no field 'answer' \(fields: \['prompt'\]\)"),
    ([{"answer": "b"}], r"d\.jsonl:1: no field 'prompt'"),
    ([{"prompt": 3, "answer": "b"}], r"d\.jsonl:1: field 'prompt' must be a string, got int"),
    ([{"prompt": "a", "answer": True}], r"d\.jsonl:1: field 'answer' must be a string or a number, got bool"),
    ([{"prompt": "a", "answer": ["b", "c"]}], r"field 'answer' must be a string or a number, got list"),
])
def test_read_jsonl_refuses_bad_files_naming_the_line(tmp_path, lines, match):
  path = _write(tmp_path / "d.jsonl", lines)
  with pytest.raises(ValueError, match=match):
    read_jsonl(path)


@pytest.mark.parametrize("bad, where", [
    ('{"prompt": "730+580=", "answer": "221", "x": \n', "column 46, the end of the line"),  # truncated: not column 1
    ('{"prompt": "730+580=", "answer": "221", "x": \r\n', "column 46, the end of the line"),
    ('{"prompt": "730+580=", "answer": "221", "x": tru}\n', "Expecting value at column 46)"),
    ('{"prompt": "730+580=", "answer": "221"} {"x": 1}\n', "Extra data at column 41)"),
])
def test_a_bad_line_names_the_real_column(tmp_path, bad, where):
  """issue #36 item 6: the column on the line itself (json would put a truncated line's error on line 2, column 1),
  in both JSONL readers."""
  from rljax.data import jsonl_source
  path = _write(tmp_path / "d.jsonl", [{"prompt": "a", "answer": "b"}, bad])
  for read in (read_jsonl, jsonl_source):
    with pytest.raises(ValueError, match=r"d\.jsonl:2: not valid JSON \(") as e:
      read(path)
    assert where in str(e.value), str(e.value)


def test_read_jsonl_refuses_missing_paths(tmp_path):
  with pytest.raises(ValueError, match="does not exist"):
    read_jsonl(str(tmp_path / "nope.jsonl"))
  with pytest.raises(ValueError, match="is not a file"):
    read_jsonl(str(tmp_path))


# ----------------------------------------------------------------------------- splits, problems, scores


def test_hash_split_is_disjoint_stable_and_independent_of_order(tmp_path):
  path = _additions(tmp_path / "d.jsonl")
  task = jsonl_task(path, verifier="exact_match")
  train, test = {p.prompt for p in task.train}, {p.prompt for p in task.test}
  assert len(task.train) + len(task.test) == 100 and not train & test
  assert test == {f"{a}+{b}=" for a in range(10) for b in range(10) if split_of(f"{a}+{b}=", 0.1) == "test"}
  # reversed file, duplicated prompts: the same split, and a duplicate stays on its side
  lines = (tmp_path / "d.jsonl").read_text().splitlines(keepends=True)[::-1]
  again = jsonl_task(_write(tmp_path / "r.jsonl", lines + lines[:5]), verifier="exact_match")
  assert {p.prompt for p in again.test} == test
  assert {p.prompt for p in again.train} == train and len(again.train) + len(again.test) == 105


def test_eval_path_gives_the_held_out_problems(tmp_path):
  task = jsonl_task(_additions(tmp_path / "train.jsonl", 4), verifier="exact_match",
                    eval_path=_write(tmp_path / "eval.jsonl", [{"prompt": "9+9=", "answer": "18"}]))
  assert len(task.train) == 16 and task.test == (Problem("9+9=", "18", {"index": 0}),)


def test_an_empty_split_is_refused(tmp_path):
  one = _write(tmp_path / "one.jsonl", [{"prompt": "1+1=", "answer": "2"}])
  with pytest.raises(ValueError, match="leave the (train|held-out) split empty"):
    jsonl_task(one, verifier="exact_match")
  with pytest.raises(ValueError, match=r"eval_fraction must be in \(0, 1\)"):
    jsonl_task(one, verifier="exact_match", eval_fraction=1.0)


def test_problems_are_a_seeded_subset_of_train_and_the_first_of_test(tmp_path):
  task = jsonl_task(_additions(tmp_path / "d.jsonl"), verifier="exact_match")
  n = len(task.train)
  a, b, c = (task.problems("train", 20, s) for s in (0, 0, 1))
  assert a == b and a != c and len({p.prompt for p in a}) == 20
  assert {p.meta["index"] for p in a} <= {p.meta["index"] for p in task.train}
  everything = task.problems("train", 10**6, 0)
  assert sorted(p.meta["index"] for p in everything) == sorted(p.meta["index"] for p in task.train)
  assert len(task.problems("train", 10**6, 0)) == n  # at most num: all of them
  assert task.problems("test", 3, 5) == list(task.test[:3])
  assert task.demonstration(task.train[0], np.random.default_rng(0)) == task.train[0].answer
  corpus = task.corpus()
  assert len(corpus) == 2 * n + len(task.test)


def test_catalog_verifiers_and_user_functions_score(tmp_path):
  path = _write(tmp_path / "d.jsonl", [{"prompt": f"p{i}", "answer": a}
                                       for i, a in enumerate(["12", "0.5", "Paris"] * 20)])
  problems = [Problem("p", "12"), Problem("p", "0.5"), Problem("p", "Paris")]
  math = jsonl_task(path, verifier="math_answer")
  np.testing.assert_array_equal(math.score(["so 12", "\\boxed{1/2}", "the answer is paris"], problems), [1, 1, 1])
  np.testing.assert_array_equal(math.score(["13", "0.49", "Rome"], problems), [0, 0, 0])
  exact = jsonl_task(path, verifier="exact_match(normalize='strip')")
  np.testing.assert_array_equal(exact.score([" 12 ", "1/2", "paris"], problems), [1, 0, 0])
  mine = jsonl_task(path, verifier=lambda cs, ps: [len(c) + len(p.answer) for c, p in zip(cs, ps)])
  s = mine.score(["a", "bb", "ccc"], problems)
  assert s.dtype == np.float32 and s.tolist() == [3.0, 5.0, 8.0]


def test_chat_template_wraps_prompts_in_the_codec(tmp_path):
  """The task keeps the record's prompt; a run's Codec puts it in the chat template (task.chat_template)."""
  from rljax.train import apply_overrides, tiny_config
  from rljax.train._experiment import build_codec, build_task
  path = _additions(tmp_path / "d.jsonl", 4)
  cfg = apply_overrides(tiny_config(str(tmp_path / "run")), ["task.name=jsonl", f"task.path={path}",
                                                             "task.verifier=exact_match", "task.chat_template=qwen"])
  task = build_task(cfg)
  problem = task.train[0]
  assert not problem.prompt.startswith("<|im_start|>")
  codec = build_codec(cfg, task)
  text = codec.tok.decode(codec.prompt_ids(problem))
  assert text.startswith("<|im_start|>system") and text.endswith(f"{problem.prompt}<|im_end|>\n<|im_start|>assistant\n")
  assert codec.end_id == codec.tok.eos_id  # a tokenizer trained here has no <|im_end|> token: eos ends a completion
  for family in ("llama3", "gemma"):  # a character tokenizer trained here: the template's {{ bos_token }} is its <s>
    chat = build_codec(apply_overrides(cfg, [f"task.chat_template={family}"]), task)
    ids = chat.prompt_ids(problem)
    assert ids[0] == chat.bos_id and ids.count(chat.bos_id) == 1 and chat.tok.unknown_characters(
        chat.render(problem.prompt).replace("<s>", "")) == []
  plain = build_codec(apply_overrides(cfg, ["task.chat_template=auto"]), task)  # no hf checkpoint: plain prompts
  assert plain.template is None and plain.prompt_ids(problem) == [plain.bos_id] + plain.tok.encode(problem.prompt)


# ----------------------------------------------------------------------------- TFDS


def test_tfds_task_reads_a_local_array_record_dataset(tmp_path):
  from rljax.data import build_task_dataset  # pylint: disable=import-outside-toplevel
  from rljax.envs import ArithmeticTask  # pylint: disable=import-outside-toplevel
  source = ArithmeticTask(digits=2)
  builder = build_task_dataset(source, str(tmp_path / "tfds"), num_train=24, num_test=6, seed=3)
  dataset = f"{builder.name}/{builder.builder_config.name}"
  task = tfds_task(str(tmp_path / "tfds"), dataset, verifier="exact_match")
  pairs = lambda ps: sorted((p.prompt, p.answer) for p in ps)  # TFDS stores records in its own order
  assert pairs(task.train) == pairs(source.problems("train", 24, 3))
  assert pairs(task.test) == pairs(source.problems("test", 6, 3))
  assert task.name == "tfds" and task.score([task.test[0].answer], [task.test[0]]).tolist() == [1.0]
  cfg = apply_overrides(default_config(), ["task.name=tfds", f"task.tfds_dir={tmp_path / 'tfds'}",
                                           f"task.dataset={dataset}", "task.verifier=exact_match"])
  from rljax.train._experiment import build_task  # pylint: disable=import-outside-toplevel
  assert build_task(cfg).test == task.test
  with pytest.raises(ValueError, match=r"cannot read TFDS .* split 'validation'") as err:
    tfds_task(str(tmp_path / "tfds"), dataset, verifier="exact_match", eval_split="validation")
  assert "\n" not in str(err.value)  # one line
  with pytest.raises(ValueError, match="no feature 'question'"):
    tfds_task(str(tmp_path / "tfds"), dataset, verifier="exact_match", prompt_field="question")
  with pytest.raises(ValueError, match=r"task.dataset='nope'.*a dataset prepared under"):
    apply_overrides(cfg, ["task.dataset=nope"])
  with pytest.raises(ValueError, match=r"TaskConfig.tfds_dir=None"):
    TaskConfig(name="tfds", dataset=dataset, verifier="exact_match")


# ----------------------------------------------------------------------------- config and CLI


def test_config_builds_the_task_in_any_override_order(tmp_path):
  path = _additions(tmp_path / "d.jsonl")
  sets = [f"task.path={path}", "task.verifier=math_answer", "task.name=jsonl", "task.num_test=5"]
  for order in (sets, sets[::-1]):
    cfg = apply_overrides(default_config(), order)
    assert (cfg.task.name, cfg.task.path, cfg.task.verifier) == ("jsonl", path, "math_answer")
  assert config_from_dict(json.loads(json.dumps(config_to_dict(cfg)))) == cfg
  from rljax.train._experiment import build_task  # pylint: disable=import-outside-toplevel
  task = build_task(cfg)
  assert isinstance(task, DatasetTask) and len(task.problems("test", cfg.task.num_test, 0)) == 5


@pytest.mark.parametrize("sets, match", [
    (["task.name=jsonl"],
     r"task.verifier='': must be a reward spec for the jsonl task, one of \['exact_match', 'math_answer'"),
    (["task.name=jsonl", "task.verifier=math_answer"], r"task.path=None: must be the JSONL file"),
    (["task.name=jsonl", "task.path={bad}", "task.verifier=math_answer"],
     r"invalid jsonl task: .*bad.jsonl:2: not valid JSON"),
    (["task.name=jsonl", "task.path={missing}", "task.verifier=math_answer"],
     r"invalid jsonl task: JSONL file .* does not exist"),
    (["task.name=jsonl", "task.path={good}", "task.verifier=math_verify"],
     r"task.verifier='math_verify': unknown reward 'math_verify'; valid names for rl.rewards: exact_match, "
     r"math_answer"),
    (["task.name=jsonl", "task.path={good}", "task.verifier=zero_variance"], r"'zero_variance' is a filter"),
    (["task.name=jsonl", "task.path={good}", "task.verifier=exact_match, math_answer"], "the verifier is one reward"),
    (["task.name=jsonl", "task.path={good}", "task.verifier=exact_match(normalize='x')"], "normalize must be one of"),
    (["task.name=jsonl", "task.path={good}", "task.verifier=exact_match", "task.answer_field=solution"],
     r"d.jsonl:1: no field 'solution'"),
    (["task.path={good}"],
     r"task.path=.*must be left unset: it is read by the task jsonl, and this task is 'arithmetic'"),
    (["task.verifier=exact_match"],
     r"task.verifier='exact_match': must be left unset: it is read by the task jsonl or tfds"),
    (["task.name=csv"],
     r"task.name='csv': must be one of \['arithmetic', 'countdown', 'small_addition', 'gsm8k', 'jsonl', 'tfds', "
     r"'tool_countdown', 'frozenlake', 'tictactoe', 'env'\]"),
])
def test_invalid_tasks_are_refused_naming_the_problem(tmp_path, sets, match):
  paths = {"good": _additions(tmp_path / "d.jsonl"), "missing": str(tmp_path / "missing.jsonl"),
           "bad": _write(tmp_path / "bad.jsonl", [{"prompt": "a", "answer": "b"}, "{oops\n"])}
  with pytest.raises(ValueError, match=match):
    apply_overrides(default_config(), [s.format(**paths) for s in sets])


def test_config_file_with_a_jsonl_task_and_a_user_reward(tmp_path):
  """A config file: the jsonl task in get_config(), the user's reward function in get_recipe()."""
  data = _additions(tmp_path / "d.jsonl")
  path = tmp_path / "mine.py"
  path.write_text(f"""
from rljax.recipes import Recipe
from rljax.train import TaskConfig, tiny_config

def get_config():
  return tiny_config().replace(task=TaskConfig(name="jsonl", path={data!r}, verifier="exact_match"))

def my_reward(completions, problems):
  return [float(c == p.answer) for c, p in zip(completions, problems)]

def get_recipe():
  return Recipe(rewards=(my_reward,), advantage="grpo")
""", encoding="utf-8")
  cfg, recipe = cli.load_config_and_recipe(str(path))
  assert (cfg.task.name, cfg.task.verifier) == ("jsonl", "exact_match")
  assert [r.name for r in recipe.rewards] == ["my_reward"]
  assert recipe.rewards[0].fn(["3", "4"], [Problem("1+2=", "3"), Problem("1+2=", "3")]) == [1.0, 0.0]


def test_cli_refuses_an_invalid_task_before_writing_anything(tmp_path, capsys):
  bad = _write(tmp_path / "bad.jsonl", [{"prompt": "a", "answer": "b"}, {"prompt": "c", "answer": "d"}, "nope\n"])
  out = tmp_path / "run"
  assert cli.main(["train", "--out-dir", str(out), "--set", "task.name=jsonl", "--set", f"task.path={bad}",
                   "--set", "task.verifier=math_answer"]) == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and "bad.jsonl:3: not valid JSON" in err
  assert not out.exists()


@pytest.mark.long
def test_docs_data_md_block_runs(tmp_path, monkeypatch, capsys):
  """docs/data.md, "Your own data": a tiny jsonl run with a catalog verifier and a user's reward function."""
  monkeypatch.chdir(tmp_path)
  with open(os.path.join(ROOT, "docs", "data.md"), encoding="utf-8") as f:
    text = f.read()
  section = text[text.index("## Your own data"):text.index("## JSONL prompt files (grain)")]
  (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
  scope = {"__name__": "docs_data_block"}
  exec(compile(block, "docs/data.md your-own-data block", "exec"), scope)  # pylint: disable=exec-used
  out = capsys.readouterr().out
  assert "task=jsonl train=89 test=10" in out  # 100 prompts, 11 held out by hash, num_test=10 of them used
  assert "'rewards': ['my_reward']" in out  # the RL reward is the user's function
  with open(tmp_path / "runs" / "my_data" / "config.json", encoding="utf-8") as f:
    task = json.load(f)["task"]
  assert (task["name"], task["path"], task["verifier"]) == ("jsonl", "my_prompts.jsonl", "math_answer")
  assert 0.0 <= scope["summary"]["rl"]["greedy_accuracy"] <= 1.0
  with open(tmp_path / "runs" / "my_data" / "metrics.jsonl", encoding="utf-8") as f:
    rows = [json.loads(l) for l in f]
  rl_rows = [r for r in rows if r["stage"] == "rl" and "my_reward/mean" in r]
  assert len(rl_rows) == 4 and all(0.0 <= r["my_reward/mean"] <= 2.0 for r in rl_rows)
