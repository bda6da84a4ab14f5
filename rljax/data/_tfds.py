"""TFDS builders for the built-in tasks, prepared locally as array_record.

No download: the examples are generated procedurally by the task (see
``rljax.envs``). TensorFlow is not needed to build or read them.

    builder = build_task_dataset(ArithmeticTask(), data_dir, num_train=20000, num_test=1000, seed=0)
    source = builder.as_data_source(split="train")   # random access, feeds grain
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any

import tensorflow_datasets as tfds

__all__ = ["TaskDatasetConfig", "TaskDataset", "build_task_dataset", "decode_record"]


@dataclasses.dataclass
class TaskDatasetConfig(tfds.core.BuilderConfig):
  """Which task and how many problems per split (the config name encodes them)."""
  task: Any = None
  num_train: int = 0
  num_test: int = 0
  seed: int = 0


class TaskDataset(tfds.core.GeneratorBasedBuilder):
  """Prompts and reference answers of a built-in rljax task."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Procedurally generated problems of an rljax task."}

  def _info(self) -> tfds.core.DatasetInfo:
    return self.dataset_info_from_configs(
        features=tfds.features.FeaturesDict({
            "prompt": tfds.features.Text(),
            "answer": tfds.features.Text(),
            "meta": tfds.features.Text(),  # JSON
        }),
        supervised_keys=None,
    )

  def _split_generators(self, dl_manager):
    del dl_manager  # nothing is downloaded
    return {"train": self._generate_examples("train"), "test": self._generate_examples("test")}

  def _generate_examples(self, split):
    cfg = self.builder_config
    num = cfg.num_train if split == "train" else cfg.num_test
    for i, p in enumerate(cfg.task.problems(split, num, cfg.seed)):
      yield i, {"prompt": p.prompt, "answer": p.answer, "meta": json.dumps(dict(p.meta), sort_keys=True)}


def _config_name(task, num_train, num_test, seed) -> str:
  fields = dataclasses.asdict(task) if dataclasses.is_dataclass(task) else {}
  fields.pop("name", None)
  parts = "_".join(f"{k}{v}" for k, v in sorted(fields.items())).replace(".", "p")
  return f"{task.name}_{parts}_tr{num_train}_te{num_test}_s{seed}".lower()


def build_task_dataset(task, data_dir: str, num_train: int, num_test: int, seed: int = 0) -> TaskDataset:
  """Generates (once) and returns the TFDS builder of ``task`` under ``data_dir``."""
  if num_train < 0 or num_test < 0:
    raise ValueError(f"num_train and num_test must be >= 0, got {num_train}, {num_test}")
  config = TaskDatasetConfig(name=_config_name(task, num_train, num_test, seed), task=task,
                             num_train=num_train, num_test=num_test, seed=seed)
  builder = TaskDataset(config=config, data_dir=data_dir, file_format="array_record")
  builder.download_and_prepare(file_format="array_record")
  return builder


def decode_record(record) -> dict:
  """A TFDS data-source record -> ``{"prompt": str, "answer": str, "meta": dict}``."""
  def text(x):
    return x.decode() if isinstance(x, bytes) else str(x)
  out = {"prompt": text(record["prompt"]), "answer": text(record["answer"])}
  meta = record.get("meta")
  out["meta"] = json.loads(text(meta)) if meta is not None else {}
  return out
