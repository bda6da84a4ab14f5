"""Reward functions shared by the end-to-end tests (imported by test modules and their subprocess workers)."""


def dense_reward(completions, problems):
  """Within-group reward variance from the first steps (fraction of completion characters found in the
  answer), so that tiny untrained models still get non-zero RL updates."""
  return [sum(ch in p.answer for ch in c) / max(len(c), 1) for c, p in zip(completions, problems)]


def parity_reward(completions, problems):
  """1 when the completion's character codes sum to an odd number, else 0: binary rewards that vary at random
  within a group, so that some groups of an untrained model have zero variance and some do not."""
  del problems
  return [float(sum(map(ord, c)) % 2) for c in completions]
