"""Qwen2.5-0.5B-Instruct on GSM8K: a real-model GRPO config (accelerator; local files only, nothing downloaded).

Needs on disk (see docs/training.md, "A real model"):

* a Hugging Face checkpoint directory of Qwen2.5-0.5B-Instruct (``config.json``,
  ``model.safetensors``, ``tokenizer.json``, ``tokenizer_config.json``), default
  ``~/models/Qwen2.5-0.5B-Instruct``;
* a TFDS data directory with ``gsm8k`` prepared as array_record (``tfds build gsm8k
  --file_format=array_record`` on a machine with internet), default ``~/tensorflow_datasets``.

    rljax train --config qwen2_5_0_5b_gsm8k \
        --set model.hf_checkpoint=/data/Qwen2.5-0.5B-Instruct --set task.tfds_dir=/data/tfds

Prompts: the question + verl's "Let's think step by step and output the final answer after
\"####\"." as one user message in the checkpoint's own chat template (``task.chat_template=auto``:
the ids transformers' ``apply_chat_template(..., add_generation_prompt=True)`` gives, as verl's);
reward 1 when the last number of the completion equals the reference answer
(``rljax.envs.GSM8KTask``, ``method="flexible"``).
"""
import os

from rljax.parallel import MeshConfig
from rljax.train import (CheckpointConfig, EvalConfig, ModelSpec, OptimConfig, RLConfig, RunConfig, SFTConfig,
                         TaskConfig)


def get_config():
  return RunConfig(
      seed=0,
      out_dir="runs/qwen2_5_0_5b_gsm8k",
      task=TaskConfig(name="gsm8k", num_train=7473, num_test=1319, tfds_dir="~/tensorflow_datasets",
                      chat_template="auto"),  # the checkpoint's own template
      model=ModelSpec(dtype="bfloat16",  # the shape (24 layers, 896 wide, ...) is the checkpoint's config.json's
                      hf_checkpoint=os.path.expanduser("~/models/Qwen2.5-0.5B-Instruct")),
      sft=SFTConfig(steps=0),
      rl=RLConfig(steps=500, num_prompts=16, group_size=8, max_new_tokens=512, temperature=1.0,
                  advantage="grpo(eps=1e-4)", loss="ppo_clip(eps_low=0.2, eps_high=0.28)", aggregation="token_mean",
                  updates_per_batch=1, num_minibatches=4, num_microbatches=4,
                  optim=OptimConfig(learning_rate=1e-6, schedule="constant", warmup_steps=10, grad_clip=1.0,
                                    weight_decay=0.01)),
      eval=EvalConfig(num_problems=1319, batch_size=64, every=50, num_samples=4, pass_k=(1, 4)),
      checkpoint=CheckpointConfig(every=25, max_to_keep=3),
      mesh=MeshConfig(data=1, fsdp=-1, tensor=1, expert=1))  # FSDP over every device of every host
