"""What the fidelity-reading tests share: the catalog's rows by name, a row's record, defaults and deviations, a
stored repository snapshot's git, float64 NumPy
transcriptions used by several of them (a stable log-softmax, vLLM's top-p filter, E3's rollout allocation), and a
float64 ``TrainBatch`` for per-token losses."""
import os
import subprocess

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rljax
from rljax.catalog import describe

ROWS = {r.name: r for r in rljax.catalog()}


def fid(name):
  """Row ``name``'s fidelity record."""
  return ROWS[name].fidelity


def defaults(name) -> dict:
  """Row ``name``'s defaults side by side: ``{hyper-parameter: (ours, theirs)}``."""
  return {k: (o, t) for k, o, t in fid(name).defaults}


def record(name) -> str:
  """Row ``name`` as ``python -m rljax.catalog NAME`` prints it."""
  return describe(ROWS[name])


def any_deviation(name, *parts) -> bool:
  """Whether one of row ``name``'s deviations contains every string of ``parts``."""
  return any(all(p in d for p in parts) for d in fid(name).deviations)


def mirror_git(repo, *args) -> str:
  """``git *args`` in the stored snapshot of ``repo`` (``owner+name``, fetched under /work/.mirror); the test is
  skipped where the snapshot is not on the machine."""
  git = f"/work/.mirror/{repo}/repo"
  if not os.path.isdir(git):
    pytest.skip(f"the {repo} snapshot is not on this machine")
  return subprocess.run(["git", "--git-dir", git, *args], capture_output=True, text=True, check=True).stdout


def log_softmax(z):
  """log softmax over the last axis (float64, max-shifted)."""
  z = z - z.max(-1, keepdims=True)
  return z - np.log(np.exp(z).sum(-1, keepdims=True))


def vllm_top_p(z, p):
  """vLLM's top-p on (tempered) logits: ascending sort, drop while the cumulative prob ≤ 1 − p, keep the last."""
  if p >= 1.0:
    return z
  order = np.argsort(z, axis=-1)
  zs = np.take_along_axis(z, order, -1)
  cum = np.cumsum(np.exp(log_softmax(zs)), -1)
  drop = cum <= 1 - p
  drop[..., -1] = False
  out = np.empty_like(z)
  np.put_along_axis(out, order, np.where(drop, -np.inf, zs), -1)
  return out


def pick(x, y):
  """``x[..., y]`` per position: the log-prob of each token id ``y`` under ``x [..., V]``."""
  return np.take_along_axis(x, y[..., None], -1)[..., 0]


def train_batch(mask, adv, old=None):
  """A float64 ``TrainBatch`` of ``mask [B, T]`` and ``adv [B, T]`` (zero tokens, one group per row)."""
  from rljax.types import TrainBatch  # pylint: disable=import-outside-toplevel
  b, t = mask.shape
  with jax.enable_x64(True):
    return TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask), advantages=jnp.asarray(adv),
                      group_id=jnp.arange(b, dtype=jnp.int32),
                      logp_old=None if old is None else jnp.asarray(old))


def e3_rollout_n(rank, total, n_min, n_max):
  """LiaoMengqi/E3-RL4LLMs@7e90b8e9 e3/trainer/ray_trainer.py:391-433 get_rollout_n_per_prompt, float64: a floor of
  ``n_min`` each, the rest split by rank (unseen, −100, counts 0) and floored without a cap, the leftover handed
  to the highest ranks up to ``n_max``."""
  rank = np.asarray(rank, np.float64).copy()
  counts = np.full(rank.shape, float(n_min))
  rank[rank == -100] = 0
  s = rank.sum()
  if s > 0:
    rank = rank / (s + 1e-8)
  counts = np.floor(counts + (total - counts.sum()) * rank).astype(np.int64)
  diff = total - counts.sum()
  for i in np.argsort(-rank):
    if diff > 0 and counts[i] < n_max:
      add = min(diff, n_max - counts[i])
      counts[i] += add
      diff -= add
    if diff <= 0:
      break
  return counts
