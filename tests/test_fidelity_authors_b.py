"""Fidelity against the authors' released code (issue #35, second pass, part b).

Each test checks an rljax function against a short float64 NumPy transcription (written here, not copied) of the
function the row's ``Fidelity.reference`` names, on random inputs. That every row has a ``Fidelity`` is tested in
test_catalog.py.
"""
import math

import numpy as np
import pytest

import rljax
import rljax.replay._buffer as B
from rljax.rewards import _shaping

ROWS = {r.name: r for r in rljax.catalog()}


# ----------------------------------------------------------------------------- ExGRPO vs ElliottYan/LUFFY


def _exgrpo_authors_first_draw(success_counts, n_rollout):
  """The probability that one draw of ``WeightedBucketSampler(weighting_method="normal").sample(1)`` returns each
  prompt: bucket ``k`` (its success count) weighs ``N(k; n_rollout / 2, 1)`` (``_normal_mapping``), the non-empty
  buckets' weights are normalised, ``np.random.multinomial(1, probs)`` picks a bucket, ``random.sample`` a prompt."""
  k = np.asarray(success_counts)
  buckets = sorted(set(k.tolist()))
  w = {b: np.exp(-((b - n_rollout / 2) ** 2) / 2.0) / np.sqrt(2 * np.pi) for b in buckets}
  total = sum(w.values())
  size = {b: int((k == b).sum()) for b in buckets}
  return np.array([w[int(b)] / total / size[int(b)] for b in k])


@pytest.mark.parametrize("n_rollout", [4, 8, 16])
def test_exgrpo_bucket_law_is_the_authors_normal_weighting(n_rollout):
  rng = np.random.default_rng(n_rollout)
  for _ in range(20):
    # stored prompts: 0 < k <= n - 1 (experience_lbound=0, experience_rbound=n-1 in run_exgrpo.sh)
    counts = rng.integers(1, n_rollout, size=int(rng.integers(1, 30)))
    ours = B.exgrpo_bucket_probs(counts / n_rollout, buckets=n_rollout)
    np.testing.assert_allclose(ours, _exgrpo_authors_first_draw(counts, n_rollout), rtol=1e-12, atol=0)
  assert ROWS["exgrpo"].fidelity.basis == "authors_code"


def test_exgrpo_stage_default_sigma_is_one_success_count():
  import inspect
  from rljax.replay import exgrpo
  assert inspect.signature(exgrpo).parameters["sigma"].default is None  # -> 1 / buckets (buckets = G)
  assert inspect.signature(B.exgrpo_pick).parameters["sigma"].default is None


# ----------------------------------------------------------------------------- IRRL vs mengdi-li/internally-rewarded-rl


def _irrl_authors_linear_clipping(p_true, num_classes):
  """trainer.py, ``linear_clipping``: ``torch.clamp(c_pis_gt - 0.1, min=0, max=None)`` for 10 classes; disdain.py:
  ``jnp.maximum(0, likelihood - 1 / num_skills)``."""
  return np.maximum(np.asarray(p_true, np.float64) - 1.0 / num_classes, 0.0)


@pytest.mark.parametrize("num_classes", [2, 10, 64])
def test_clipped_linear_reward_is_the_authors_linear_clipping(num_classes):
  rng = np.random.default_rng(num_classes)
  logits = rng.normal(size=(256, num_classes)) * 3
  p = np.exp(logits - logits.max(1, keepdims=True))
  p /= p.sum(1, keepdims=True)
  p_true = p[np.arange(256), rng.integers(0, num_classes, 256)]
  ours, _ = _shaping.clipped_linear_reward(p_true.astype(np.float32), offset=-1.0 / num_classes)
  np.testing.assert_allclose(np.asarray(ours, np.float64), _irrl_authors_linear_clipping(p_true, num_classes),
                             rtol=0, atol=1e-6)
  assert ROWS["clipped_linear_reward"].fidelity.basis == "authors_code"
