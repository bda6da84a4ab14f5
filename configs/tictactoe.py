"""Self-play demo (issue #20, SPIRAL-style): one policy plays both sides of TicTacToe.

SFT imitates minimax play for both sides (``rljax.envs.get_env_task("tictactoe")``); RL trains on whole games,
one row per role of each game (only that role's moves are trained; its reward is the game's outcome for it:
+1 win, 0 draw, -1 loss or illegal move; ``extras["role_id"]`` names the role). Held-out metric: the share of
greedy games played to the end without an illegal move.

    rljax train --config tictactoe
"""
from rljax.train import default_config
from rljax.train._config import apply_overrides


def get_config():
  return apply_overrides(default_config(), [
      "out_dir=runs/tictactoe", "task.name=tictactoe", "task.num_train=64", "task.num_test=8",
      "task.max_obs_tokens=64",
      "model.num_layers=2", "model.hidden_size=64", "model.num_heads=4", "model.num_kv_heads=4",
      "model.intermediate_size=256", "model.max_seq_len=512",
      "sft.steps=200", "sft.batch_size=16", "sft.optim.learning_rate=3e-3",
      "rl.steps=10", "rl.num_prompts=4", "rl.group_size=4", "rl.max_new_tokens=4", "rl.updates_per_batch=1",
      "rl.optim.learning_rate=1e-4",
      "eval.num_problems=8", "eval.batch_size=8", "eval.every=5",
      "checkpoint.every=5"])
