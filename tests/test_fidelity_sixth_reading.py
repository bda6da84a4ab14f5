"""Issue #51 item 4, sixth draw (seed 20261211): the record errors the re-audit found, each checked here.

- ``erc``: every ERC recipe sets ``postive_loss_coeff=0.1`` (Kwai-Klear/ERC@f1885c53 dp_actor.py:510-518, 549-550:
  0.1 × the token-mean NLL of the rows whose reward is exactly 1.0, added to the loss); the record now says so.
- ``divergence_rejection``: verl's ``rollout_rs`` is null in its config (no rejection); ``token_k1`` is only the
  helper's signature default.
- ``guide``: the authors' script also filters the unhinted groups by accuracy (0.001 / 0.999,
  guide_grpo_qwen.sh:67-70) and hints only a multiple of ``world_size`` of the failed groups.
"""
import numpy as np

import rljax

ROWS = {r.name: r for r in rljax.catalog()}


def _theirs(d):
  return dict((name, t) for name, _, t in d)


# ---------------------------------------------------------------- erc


def _erc_authors_loss(old, new, h_old, h, adv, mask, reward, cl=0.2, ch=0.28, c=10.0, low=0.95, high=1.05,
                      positive_coeff=0.1):
  """Float64 transcription of the ERC recipe's actor loss on one micro-batch (values only):
  core_algos.py:914-1010 compute_policy_loss_grpo_erc (token-mean agg_loss; the ERC mask only detaches, so the
  value is the dual-clip PPO loss) plus dp_actor.py:510-518, 549-550 (postive_loss_coeff × agg_loss(−log π) over the
  rows whose summed token reward is exactly 1.0; 0 when there is none)."""
  ratio = np.exp(np.clip(new - old, -20.0, 20.0))
  l1 = np.maximum(-adv * ratio, -adv * np.clip(ratio, 1 - cl, 1 + ch))
  pg = np.where(adv < 0, np.minimum(-adv * c, l1), l1)
  pg_loss = (pg * mask).sum() / (mask.sum() + 1e-8)  # verl_F.masked_mean
  pos = reward == 1.0
  positive = ((-new[pos]) * mask[pos]).sum() / (mask[pos].sum() + 1e-8) if pos.any() else 0.0
  return pg_loss + positive_coeff * positive


def test_erc_recipe_adds_a_positive_sample_nll_that_no_chain_composes():
  import jax
  import jax.numpy as jnp
  import rljax.objectives as O
  from rljax.types import PolicyOutputs, TrainBatch
  rng = np.random.default_rng(20261211)
  b, t = 6, 7
  old = -rng.uniform(0.1, 2.0, (b, t))
  new = old + rng.normal(scale=0.2, size=(b, t))
  h_old = rng.uniform(0.5, 2.0, (b, t))
  h = h_old * np.exp(rng.normal(scale=0.05, size=(b, t)))
  adv = rng.normal(size=(b, t))
  mask = (rng.uniform(size=(b, t)) < 0.8).astype(np.float64)
  mask[:, 0] = 1
  with jax.enable_x64(True):
    batch = TrainBatch.create(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask > 0),
                              advantages=jnp.asarray(adv), group_id=jnp.arange(b, dtype=jnp.int32),
                              logp_old=jnp.asarray(old), entropy_old=jnp.asarray(h_old))
    out = PolicyOutputs.create(logp=jnp.asarray(new), entropy=jnp.asarray(h))
    erc_only = O.chain(O.erc(O.ppo_clip(0.2, 0.28, dual_clip=10.0)))
    with_nll = O.chain(O.erc(O.ppo_clip(0.2, 0.28, dual_clip=10.0)), O.sft_nll(0.1))
    ours = float(erc_only(out, batch)[0])
    ours_nll = float(with_nll(out, batch)[0])
  # no row with reward 1.0: their loss is erc(ppo_clip(0.2, 0.28, dual_clip=10)) under token_mean
  no_positive = np.array([0.0, -1.0, 0.5, 0.0, -1.0, 0.0])
  # rtol: verl's masked_mean divides by Σm + 1e-8 (a relative 1e-8 / Σm)
  np.testing.assert_allclose(ours, _erc_authors_loss(old, new, h_old, h, adv, mask, no_positive), rtol=1e-9)
  # rows with reward 1.0: their positive-sample NLL changes the loss, and sft_nll in the chain is not it
  rewards = np.array([1.0, -1.0, 1.0, 0.0, -1.0, 1.0])
  theirs = _erc_authors_loss(old, new, h_old, h, adv, mask, rewards)
  assert abs(theirs - ours) > 1e-3 and abs(theirs - ours_nll) > 1e-3
  f = ROWS["erc"].fidelity
  assert "postive_loss_coeff" in f.read and "dp_actor.py:510-518" in f.read
  assert "postive_loss_coeff 0.1" in _theirs(f.defaults)["positive-sample NLL"]
  assert any("postive_loss_coeff" in d and "not built" in d for d in f.deviations)


# ---------------------------------------------------------------- divergence_rejection


def test_divergence_rejection_record_gives_verls_config_default_not_the_helpers_signature():
  f = ROWS["divergence_rejection"].fidelity
  theirs = _theirs(f.defaults)["estimator, level"]
  assert "rollout_rs null" in theirs and "signature default" in theirs
  assert "rollout_correction.yaml:12" in f.read and "algorithm.py:176" in f.read
  assert not any("verl's default option token_k1" in d for d in f.deviations)
  assert any("rejects nothing unless rollout_rs is set" in d for d in f.deviations)
  assert "bypass" in f.placement


# ---------------------------------------------------------------- guide


def _guide_accuracy_filter(correct, n, lower=0.001, upper=0.999):
  """Float64 transcription of guide_rl@2f277152 ray_trainer.py:1622-1629 (``_apply_filters`` with
  filter_accuracy on, the script's bounds 0.001 / 0.999): the groups kept."""
  acc = correct.reshape(-1, n).mean(-1)
  return (acc >= lower) & (acc <= upper)


def test_guide_unhinted_accuracy_filter_is_zero_variance_and_the_record_lists_it():
  import jax.numpy as jnp
  from rljax.filters import zero_variance
  rng = np.random.default_rng(20261211)
  n, groups = 8, 40
  p = rng.choice([0.0, 0.3, 0.7, 1.0], size=groups)
  correct = (rng.uniform(size=(groups, n)) < p[:, None]).astype(np.float64).reshape(-1)
  gid = np.repeat(np.arange(groups), n)
  keep = _guide_accuracy_filter(correct, n)
  ours, _ = zero_variance(jnp.asarray(correct), jnp.asarray(gid), num_groups=groups)
  # binary rewards: accuracy in [0.001, 0.999] <=> the group's rewards are not all equal (the deviation's
  # "compose zero_variance for the drop"), for all-correct and all-failed groups alike
  np.testing.assert_array_equal(np.asarray(ours).reshape(groups, n)[:, 0], keep)
  acc = correct.reshape(groups, n).mean(-1)
  assert (acc == 1).any() and (acc == 0).any() and keep.any()
  f = ROWS["guide"].fidelity
  assert "guide_grpo_qwen.sh:67-84" in f.read and ":1686-1693" in f.read
  theirs = _theirs(f.defaults)
  assert "on the unhinted groups" in theirs["accuracy filter"] and "world_size" in theirs["groups hinted"]
  assert any("unhinted (all correct) and hinted" in d for d in f.deviations)
  assert any("world_size" in d for d in f.deviations)
