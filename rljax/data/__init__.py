"""Data: tokenizers, chat templates, TFDS builders and grain prompt pipelines."""
from rljax.data._chat import FAMILIES, apply_chat_template
from rljax.data._loader import jsonl_source, prompt_loader, to_problem
from rljax.data._tfds import TaskDataset, TaskDatasetConfig, build_task_dataset, decode_record
from rljax.data._tokenizer import (HFTokenizer, SentencePieceTokenizer, Tokenizer, load_tokenizer,
                                   train_sentencepiece)

__all__ = ["FAMILIES", "apply_chat_template", "jsonl_source", "prompt_loader", "to_problem", "TaskDataset",
           "TaskDatasetConfig", "build_task_dataset", "decode_record", "HFTokenizer", "SentencePieceTokenizer",
           "Tokenizer", "load_tokenizer", "train_sentencepiece"]
