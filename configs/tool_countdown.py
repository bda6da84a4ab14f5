"""Multi-turn demo (issue #20): countdown with a Python tool in the sandbox, SFT warm start then GRPO on episodes.

The model (2 layers, d=64, character tokenizer) sees two numbers and a target; it may call Python with
``<call>code</call>`` (run by ``rljax.sandbox``; the output comes back as ``<output>...</output>``) and answers
with ``<answer>expression</answer>`` (``rljax.envs.get_env_task("tool_countdown")``; the tool sets ``n``, the
numbers, and ``t``, the target). SFT imitates a scripted mixture: 40% of the demonstrations
(``task.demo_tool_prob=0.4``) make one call that prints the first ``x op y`` equal to ``t`` and copy it into the
answer, the others answer directly with a guess. RL (GRPO on whole episodes; tool output is context, never
trained on) then trains on the environment's reward: tool episodes succeed more often, so the tool-call rate
rises (held-out greedy success on 64 problems, seed 0: 15.6% -> 81.2%, seed 1: 1.6% -> 87.5%; held-out tool
calls per episode 0 -> 1; about 3.5 minutes on 2 cores; docs/agents.md).

    rljax train --config tool_countdown

Held-out success (greedy episodes) and the tool-call rate are logged (``eval/...``, ``rollout/tool_calls_per_episode``).
"""
from rljax.train import default_config
from rljax.train._config import apply_overrides


def get_config():
  return apply_overrides(default_config(), [
      "out_dir=runs/tool_countdown", "task.name=tool_countdown", "task.num_train=2000", "task.num_test=64",
      "task.max_turns=2", "task.max_obs_tokens=32", "task.demo_tool_prob=0.4",
      "model.num_layers=2", "model.hidden_size=64", "model.num_heads=4", "model.num_kv_heads=4",
      "model.intermediate_size=256", "model.max_seq_len=512",
      "sft.steps=300", "sft.batch_size=16", "sft.optim.learning_rate=3e-3",
      "rl.steps=20", "rl.num_prompts=4", "rl.group_size=8", "rl.max_new_tokens=100", "rl.updates_per_batch=1",
      "rl.temperature=0.8",
      "rl.optim.learning_rate=2e-4",
      "eval.num_problems=64", "eval.batch_size=64", "eval.every=10",
      "checkpoint.every=50"])
