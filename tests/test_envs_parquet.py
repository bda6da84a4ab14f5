"""verl-style parquet data in the jsonl task (issue #52 item 3): ``prompt`` a chat message list,
``reward_model.ground_truth`` the answer, the other columns in ``Problem.meta``; bad files refused naming the
file and the columns it has, before a run writes anything. Files written with pyarrow."""
import os

import pytest

from rljax import cli
from rljax.envs import jsonl_task, read_parquet
from rljax.train import apply_overrides, default_config

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _verl_rows(n, start=0):
  """Rows as verl's examples/data_preprocess/gsm8k.py writes them."""
  return [{"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": f"What is {i} + {i + 3}?"}],
           "ability": "math", "reward_model": {"style": "rule", "ground_truth": str(2 * i + 3)},
           "extra_info": {"split": "train", "index": i}} for i in range(start, start + n)]


def _write(path, rows):
  pq.write_table(pa.Table.from_pylist(rows), str(path))
  return str(path)


def test_verl_rows_become_problems(tmp_path):
  path = _write(tmp_path / "train.parquet", _verl_rows(3))
  records = read_parquet(path)
  assert [(r["prompt"], r["answer"]) for r in records] == [("What is 0 + 3?", "3"), ("What is 1 + 4?", "5"),
                                                           ("What is 2 + 5?", "7")]
  assert records[1]["meta"] == {"data_source": "openai/gsm8k", "ability": "math",
                                "extra_info": {"split": "train", "index": 1}, "index": 1}
  # plain string prompts and an answer column, as in a JSONL file; a dotted answer field reads a struct
  plain = _write(tmp_path / "plain.parquet", [{"question": "2+2?", "answer": 4, "reward_model": {"gt": "x"}}])
  assert read_parquet(plain, prompt_field="question")[0]["answer"] == "4"  # the answer column wins
  assert read_parquet(plain, prompt_field="question", answer_field="reward_model.gt")[0]["answer"] == "x"


def test_a_jsonl_task_reads_parquet_train_and_eval_files(tmp_path):
  train = _write(tmp_path / "train.parquet", _verl_rows(8))
  test = _write(tmp_path / "test.parquet", _verl_rows(2, start=100))
  task = jsonl_task(train, verifier="math_answer", eval_path=test)
  assert len(task.train) == 8 and [p.prompt for p in task.test] == ["What is 100 + 103?", "What is 101 + 104?"]
  assert list(task.score(["203", "the answer is 7"], list(task.test))) == [1.0, 0.0]
  cfg = apply_overrides(default_config(), ["task.name=jsonl", f"task.path={train}", f"task.eval_path={test}",
                                           "task.verifier=math_answer"])
  assert cfg.task.path == train


@pytest.mark.parametrize("rows, kwargs, match", [
    ([{"question": "a", "reward_model": {"ground_truth": "1"}}], {},
     r"bad\.parquet: no column 'prompt' \(columns: \['question', 'reward_model'\]\)"),
    ([{"prompt": "a", "solution": "1"}], {}, r"no column 'answer' \(columns: \['prompt', 'solution'\]\)"),
    ([{"prompt": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], "answer": "1"}], {},
     r"row 0: column 'prompt' holds the messages \['system', 'user'\]; rljax takes one user message"),
    ([{"prompt": "a", "reward_model": {"style": "rule"}}], {}, r"row 0: no 'reward_model\.ground_truth'"),
])
def test_bad_parquet_files_are_refused_naming_the_problem(tmp_path, rows, kwargs, match):
  path = _write(tmp_path / "bad.parquet", rows)
  with pytest.raises(ValueError, match=match):
    read_parquet(path, **kwargs)


def test_the_cli_refuses_a_parquet_file_without_the_prompt_column_writing_nothing(tmp_path, capsys):
  bad = _write(tmp_path / "bad.parquet", [{"question": "a", "reward_model": {"ground_truth": "1"}}] * 3)
  out = tmp_path / "run"
  assert cli.main(["train", "--out-dir", str(out), "--set", "task.name=jsonl", "--set", f"task.path={bad}",
                   "--set", "task.verifier=math_answer"]) == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and "no column 'prompt' (columns: ['question', 'reward_model'])" in err
  assert not out.exists()
  with open(tmp_path / "not.parquet", "w", encoding="utf-8") as f:
    f.write("not parquet")
  with pytest.raises(ValueError, match=r"not\.parquet: not a readable parquet file"):
    read_parquet(str(tmp_path / "not.parquet"))
  assert os.path.exists(tmp_path / "not.parquet")
