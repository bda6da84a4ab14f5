"""The arena on a real model: SmolLM2-135M-Instruct on the real-model demo's small additions (docs/arena.md).

    rljax arena --config smollm2_arena --experiment mismatch --seeds 0,1 --out runs/arena_smollm2

The warm start is the checkpoint itself (``sft.steps=0``): no SFT run, and each RL run evaluates the model as
loaded ("zero-shot") before it trains; the table's gains are after RL minus zero-shot. Entries that cannot run
on a checkpoint (the MoE ones: the checkpoint's architecture is dense) are refused at start-up and the others run.

What each run costs and why (2-core CPU, one run at a time: ``rljax arena`` runs one at a time by default on a
checkpoint, whose matmuls keep both cores busy): the demo's batch (8 prompts x 4 samples, 16 new tokens) and
full fine-tuning, 50 RL steps, and the held-out evaluation (84 questions, greedy and 4 samples each) at the start,
at step 25 and at the end. One float32 GRPO run takes about 9 minutes; the bfloat16-sampler entries are slower
(XLA on CPU computes bfloat16 matmuls without native support) and the KL entries pay a reference forward per
step. Why these: the demo's batch and learning rate are what takes this model from ~44% to 80-90% held-out
accuracy in 50 steps (docs/real_models.md), and 50 steps are where its entropy collapses (about 2 to 0.2 nats per
token), the regime the entropy papers describe; LoRA would save memory, not time (the trunk's forward and
backward are the same matmuls), and would change what is compared against the demo.
"""
import dataclasses

from rljax.configs import smollm2_addition


def get_config():
  cfg = smollm2_addition.get_config()
  return cfg.replace(eval=dataclasses.replace(cfg.eval, every=25), out_dir="runs/smollm2_arena")
