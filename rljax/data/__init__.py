"""Data: tokenizers, chat templates, TFDS builders and grain prompt pipelines."""
from rljax.data._chat import (FAMILIES, FAMILY_SPECIAL_TOKENS, SPECIAL_TOKEN_NAMES, TEMPLATES, ChatTemplate,
                              apply_chat_template, check_messages)
from rljax.data._loader import jsonl_source, prompt_loader, to_problem
from rljax.data._tfds import TaskDataset, TaskDatasetConfig, build_task_dataset, decode_record
from rljax.data._tokenizer import (HFTokenizer, SentencePieceTokenizer, Tokenizer, load_tokenizer,
                                   train_sentencepiece)

__all__ = ["FAMILIES", "FAMILY_SPECIAL_TOKENS", "SPECIAL_TOKEN_NAMES", "TEMPLATES", "ChatTemplate", "apply_chat_template", "check_messages",
           "jsonl_source", "prompt_loader", "to_problem", "TaskDataset", "TaskDatasetConfig", "build_task_dataset",
           "decode_record", "HFTokenizer", "SentencePieceTokenizer", "Tokenizer", "load_tokenizer",
           "train_sentencepiece"]
