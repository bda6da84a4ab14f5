"""Reward functions shared by the end-to-end tests (imported by test modules and their subprocess workers)."""


def dense_reward(completions, problems):
  """Within-group reward variance from the first steps (fraction of completion characters found in the
  answer), so that tiny untrained models still get non-zero RL updates."""
  return [sum(ch in p.answer for ch in c) / max(len(c), 1) for c, p in zip(completions, problems)]
