"""Issue #51 item 4, fifteenth draw (seed 20261220), part b: an independent re-audit of five in-full rows.

Rows drawn (five of the ten of ``random.Random(20261220).sample(rows, 10)`` over the 109 rows):
qae, gd2po, dpo, zero_variance, reinforce_pp.

Held (0). Not held (5), each error fixed in the record and checked here (no implementation changed, no
implementation bug found: every implementation matched a float64 transcription of its source at the stated
settings, below):

- ``qae`` (FALSE as an unconditional claim; OMITTED): the record placed their advantage AFTER DAPO's
  dynamic-sampling filter and said "their runs drop all-equal groups before the advantage", from verl's
  run_dapo_qwen2.5_32b.sh alone (enable_filter_groups=True, :25). The QAE paper's models are Qwen3-8B-Base and
  Qwen3-14B-Base (abstract; the README's run_dapo_qwen3-8b-base.sh / run_dapo_qwen3-14b-base.sh), and verl's own
  DAPO scripts for those two models set enable_filter_groups=False (volcengine/verl@26a734e7 and @v0.7.0
  recipe/dapo/run_dapo_qwen3_8b_base_npu.sh:23 and run_dapo_qwen3_14b_base_npu.sh:23; train_prompt_bsz 16,
  gen_prompt_bsz 3x / 2x, n 16). The QAE scripts are not stored, so whether their 8B/14B runs filter is not known;
  where they do not, the qae stage alone (no zero_variance filter) is theirs on every group, all-equal ones
  included (checked below). Placement, a defaults entry, a deviation and read corrected.
- ``gd2po`` (OMITTED): the authors' documented launch does not start as released. tool-calling/README.md:49-68
  runs scripts/correctness_length/train_hard.sh, train_snr.sh, train_gdpo.sh and
  scripts/correctness_length_format/train_hard.sh, train_snr.sh; only train_gd2po_hard.sh, train_gd2po_snr.sh
  and correctness_length/train_gdpo.sh exist at f1ad765b (git ls-tree). And README.md:35-41 puts the data in
  dataset/rlla_4K/ while every script reads ${REPO_ROOT}/dataset/rlla_4k (train_gd2po_hard.sh:30,
  train_gd2po_snr.sh:31): data.train_files does not exist on a case-sensitive file system. The top-level
  README.md:45 names train_gd2po_hard.sh. The record cited the scripts' values without saying so. Read and a
  deviation added. The hard and snr rules are checked below against float64 transcriptions of
  ray_trainer.py:268-317, 319-390, 451-519 at one token per row (equal within the recorded 1e-8 terms).
- ``dpo`` (OMITTED): (1) the record's use line (rl.loss=dpo(beta=0.1)) trains with RLConfig.aggregation's default
  'token_mean' (rljax/train/_config.py, Recipe.aggregation), which weights each pair's loss by its two rows'
  completion tokens; TRL's is the plain mean over pairs (dpo_trainer.py:1578). The record named
  seq_mean_token_mean as TRL's form but listed no aggregation default. (2) TRL appends the EOS token to each
  non-conversational chosen / rejected text that does not end with it (dpo_trainer.py:1000-1013), so h there sums
  an EOS log-ratio that a completion cut at the length limit does not have here. (3) DPOConfig's own training
  defaults (dpo_config.py docstring: learning_rate 1e-6, bf16 True, gradient_checkpointing True; disable_dropout
  True, :178-182, dpo_trainer.py:912-916). Defaults, deviations and read added; (1) is checked numerically below.
- ``zero_variance`` (FALSE wording; OMITTED): the record gave our refill as "rl.max_refills = 3 extra rounds of
  the dropped groups". An extra round draws the loader's next full batch of new prompts (rl.num_prompts per step,
  rljax/train/_rollout.py next_prompts, collect: ``self._round`` per attempt), keeps the groups with spread, and
  takes the first num_prompts kept groups in round order (the surplus is discarded, as verl's batch[:traj_bsz]);
  the dropped groups' prompts are not drawn again in that step. Omitted: the recipe yaml's own generation batch,
  data.gen_batch_size = ${data.train_batch_size} (recipe/dapo/config/dapo_trainer.yaml:9-10), i.e. ours per round
  = theirs per generation batch at the yaml default (the scripts' 3x is a launch value). Defaults entry and read
  corrected. The keep rule is checked below against a float64 transcription of dapo_ray_trainer.py:248-262.
- ``reinforce_pp`` (OMITTED): the whitening pool. REINFORCE++'s normalisation is over the whole batch, and the
  record's example run (examples/reinforce_plus_plus_trainer/run_qwen2-7b_math_rf.sh@v0.7.0) sets
  data.train_batch_size=1024 with rollout.n=8: 8192 responses whitened together (ppo_mini_batch_size 1024: one
  update per batch); the record listed the group size (which the estimator does not use) but not the batch size
  (which it does). Ours whitens the step's rows (RLConfig num_prompts 32 x group_size 8 = 256 by default). A
  defaults entry and a deviation added. The returns and whitening are checked below against float64
  transcriptions of the verl 0.9.1 wheel's core_algos.py:693-731 (carry through mask-0 tokens) and v0.7.0's
  :581-616 (reset at mask-0 tokens), with torch_functional's masked_mean / masked_var / masked_whiten (÷ (n + 1e-8),
  unbiased).

Each numeric reference below is a float64 NumPy transcription of the cited lines, written for these tests.
"""
import jax
import jax.numpy as jnp
import numpy as np

from rljax import advantages as A
from rljax import filters as F
from rljax import objectives as O
from rljax.types import PolicyOutputs, TrainBatch
from _fidelity import defaults as _defaults, fid as _fid, record as _record, any_deviation as _any_dev



# verl torch_functional.masked_mean / masked_var / masked_whiten (v0.7.0 :287-340; the 0.9.1 wheel :294-345)
def _masked_mean(x, m):
  return (np.where(m > 0, x, 0.0) * m).sum() / (m.sum() + 1e-8)


def _masked_var(x, m):
  mean = _masked_mean(x, m)
  var = _masked_mean((x - mean) ** 2, m)
  n = m.sum()
  if n <= 1:
    raise ValueError("verl raises for a mask sum of 0 or 1")
  return var * n / (n - 1)


def _masked_whiten(x, m):
  return (x - _masked_mean(x, m)) / np.sqrt(_masked_var(x, m) + 1e-8)


# ------------------------------------------------------------------------------------------------ qae (not held)


def _qae_authors(scores, index, k=0.4, eps=1e-6):
  """verl compute_grpo_outcome_advantage (26a734e7 core_algos.py:300-325) with the README's quoted lines swapped in
  for the mean (torch.quantile, linear): singletons mean 0 / std 1, else (r − Q_K)/(std_unbiased + ε)."""
  out = np.empty_like(scores)
  for g in np.unique(index):
    s = scores[index == g]
    if s.size == 1:
      q, sd = 0.0, 1.0
    else:
      q = np.quantile(s, k) if 0 < k < 1 else s.mean()  # numpy's default 'linear' = torch.quantile's
      sd = s.std(ddof=1)
    out[index == g] = (s - q) / (sd + eps)
  return out


def test_qae_without_the_filter_the_stage_alone_is_theirs_on_every_group():
  rng = np.random.default_rng(51_1520)
  gid = np.repeat(np.arange(6), 16).astype(np.int32)
  r = np.where(rng.random(96) < 0.35, 1.0, -1.0)  # math_dapo's ±1
  r[gid == 1] = 1.0   # all correct
  r[gid == 4] = -1.0  # all wrong
  theirs = _qae_authors(r, gid)  # enable_filter_groups=False: every group reaches the advantage
  with jax.enable_x64(True):
    ours = np.asarray(A.qae(jnp.asarray(r), jnp.asarray(gid), quantile=0.4, mode="authors")[0])
    ours_rljax = np.asarray(A.qae(jnp.asarray(r), jnp.asarray(gid), quantile=0.4)[0])
  np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15)
  np.testing.assert_allclose(ours_rljax, theirs, rtol=1e-12, atol=1e-15)  # no singleton: the modes agree
  assert np.all(theirs[(gid == 1) | (gid == 4)] == 0.0)  # all-equal groups: 0 there too, not dropped
  f = _fid("qae")
  assert "filter_groups" in f.placement and "AFTER" in f.placement  # still named (the 32B script's form)
  assert "run_dapo_qwen3_8b_base_npu.sh:23" in f.read and "run_dapo_qwen3_14b_base_npu.sh:23" in f.read
  assert "enable_filter_groups=False" in f.placement
  d = _defaults("qae")
  assert "enable_filter_groups=False" in d["dynamic sampling (filter_groups)"][1]
  assert _any_dev("qae", "Qwen3-8B-Base", "enable_filter_groups=False", "not known")


# ---------------------------------------------------------------------------------------------- gd2po (not held)


def _grpo_tokens(score, index, mask, eps=1e-6):
  """tool-calling/verl/trainer/ppo/core_algos.py:250-310 compute_grpo_outcome_advantage (norm by std, True)."""
  out = np.empty_like(score)
  for g in np.unique(index):
    s = score[index == g]
    mean, sd = (0.0, 1.0) if s.size == 1 else (s.mean(), s.std(ddof=1))
    out[index == g] = (s - mean) / (sd + eps)
  return out[:, None] * mask


def _gd2po_authors(comps, index, mask, tau=None, ratio_eps=1e-8):
  """Qwen-Applications/GD2PO@f1ad765b tool-calling/verl/trainer/ppo/ray_trainer.py: per-reward token advantages
  (:243-266), rollout sums (A·L), the mixed-sign conflict at ±1e-8 (:269-273), tau: the ratio rule (:319-360),
  the group keep ratio over the whole group (:292-307) times the unweighted sum, then masked_whiten over kept
  tokens (:276-290)."""
  tok = np.stack([_grpo_tokens(comps[:, k], index, mask) for k in range(comps.shape[1])])
  roll = (tok * mask).sum(-1)
  conflict = (roll > 1e-8).any(0) & (roll < -1e-8).any(0)
  if tau is not None:
    ratio = roll.sum(0) / (np.abs(roll).sum(0) + max(ratio_eps, 1e-12))
    conflict = conflict & (np.abs(ratio) < min(max(tau, 0.0), 1.0))
  keep = (~conflict).astype(np.float64)
  q = np.array([keep[index == index[i]].sum() / (index == index[i]).sum() for i in range(len(index))])
  new = tok.sum(0) * q[:, None]
  filt = new * keep[:, None] * mask
  wm = keep[:, None] * mask
  return _masked_whiten(filt, wm) * wm, keep.astype(bool)


def test_gd2po_hard_and_snr_equal_the_authors_at_one_token_per_row():
  rng = np.random.default_rng(51_1521)
  index = np.repeat(np.arange(8), 4)  # rollout.n = 4
  comps = np.stack([rng.choice([0.0, 1.0, 2.0, 3.0], 32), rng.choice([0.0, 0.5, 1.0], 32)], 1)  # correctness, length
  mask = np.ones((32, 1))
  for tau in (None, 0.8, 0.2):
    theirs, keep = _gd2po_authors(comps, index, mask, tau=tau)
    with jax.enable_x64(True):
      ours, info = A.gd2po(jnp.asarray(comps), jnp.asarray(index, jnp.int32), conflict_tol=1e-8,
                           ratio_threshold=tau)
    assert np.array_equal(np.asarray(info["keep"]), keep) and (~keep).any()
    # theirs divides the whitening's means by (n + 1e-8): a relative 1e-8/n, inside rtol
    np.testing.assert_allclose(np.asarray(ours), theirs[:, 0], rtol=1e-7, atol=1e-9)
  f = _fid("gd2po")
  assert "train_hard.sh" in f.read and "dataset/rlla_4K" in f.read and "README.md:49-68" in f.read
  assert _any_dev("gd2po", "does not start as released", "rlla_4K", "rlla_4k")


def test_gd2po_readme_scripts_and_data_dir_as_recorded():
  import os  # pylint: disable=import-outside-toplevel
  import subprocess  # pylint: disable=import-outside-toplevel
  import pytest  # pylint: disable=import-outside-toplevel
  git = "/work/.mirror/Qwen-Applications+GD2PO/repo"
  if not os.path.isdir(git):
    pytest.skip("the GD2PO snapshot is not on this machine")
  run = lambda *a: subprocess.run(["git", "--git-dir", git, *a], capture_output=True, text=True,  # noqa: E731
                                  check=True).stdout
  files = set(run("ls-tree", "-r", "--name-only", "f1ad765b", "tool-calling/scripts").split())
  assert "tool-calling/scripts/correctness_length/train_gd2po_hard.sh" in files
  assert "tool-calling/scripts/correctness_length/train_hard.sh" not in files
  assert "tool-calling/scripts/correctness_length_format/train_snr.sh" not in files
  readme = run("show", "f1ad765b:tool-calling/README.md")
  assert "bash scripts/correctness_length/train_hard.sh" in readme and "dataset/rlla_4K/" in readme
  script = run("show", "f1ad765b:tool-calling/scripts/correctness_length/train_gd2po_hard.sh")
  assert 'DATA_DIR="${REPO_ROOT}/dataset/rlla_4k"' in script


# ------------------------------------------------------------------------------------------------ dpo (not held)


def _dpo_loss(logp, ref, mask, pair, chosen, aggregate):
  b, t = mask.shape
  with jax.enable_x64(True):
    batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask),
                       advantages=jnp.zeros((b, t)), group_id=jnp.arange(b, dtype=jnp.int32),
                       logp_ref=jnp.asarray(ref),
                       extras={"dpo_pair_id": jnp.asarray(pair), "dpo_chosen": jnp.asarray(chosen)})
    return float(O.chain(O.dpo(0.1), aggregate=aggregate)(PolicyOutputs(logp=jnp.asarray(logp)), batch)[0])


def test_dpo_default_aggregation_weights_pairs_by_length_trl_takes_the_pair_mean():
  from rljax.recipes import Recipe  # pylint: disable=import-outside-toplevel
  from rljax.train import RLConfig  # pylint: disable=import-outside-toplevel
  assert RLConfig().aggregation == "token_mean" and Recipe().aggregation is not None
  rng = np.random.default_rng(51_1522)
  b, t = 6, 12
  lens = np.array([12, 3, 5, 9, 2, 11])
  mask = np.arange(t)[None, :] < lens[:, None]
  logp, ref = -rng.uniform(0.1, 2.5, (b, t)), -rng.uniform(0.1, 2.5, (b, t))
  pair = np.array([0, 0, 1, 1, 2, 2])
  chosen = np.array([1, 0, 0, 1, 1, 0], bool)
  h = ((logp - ref) * mask).sum(1)
  w, l = np.array([0, 3, 4]), np.array([1, 2, 5])
  per_pair = np.log1p(np.exp(-0.1 * (h[w] - h[l])))  # trl dpo_trainer.py:1430 −logsigmoid(βΔ)
  trl = per_pair.mean()  # :1578
  np.testing.assert_allclose(_dpo_loss(logp, ref, mask, pair, chosen, "seq_mean_token_mean"), trl, rtol=1e-12)
  tokens = lens[w] + lens[l]
  weighted = (per_pair * tokens).sum() / tokens.sum()
  ours_default = _dpo_loss(logp, ref, mask, pair, chosen, "token_mean")
  np.testing.assert_allclose(ours_default, weighted, rtol=1e-12)
  assert abs(ours_default - trl) > 1e-3
  d = _defaults("dpo")
  assert d["aggregation"][0].startswith("token_mean")
  assert "add_eos" in _fid("dpo").read and "learning_rate 1e-6" in d["training defaults (DPOConfig's own)"][1]
  assert _any_dev("dpo", "EOS", "length limit")


# ---------------------------------------------------------------------------------------- zero_variance (not held)


def _dapo_keep(metric, uid):
  """volcengine/verl@v0.7.0 recipe/dapo/dapo_ray_trainer.py:248-262: np.std per uid; kept if std > 0 or len 1."""
  keep_uid = {u: (np.std(metric[uid == u]) > 0) or (uid == u).sum() == 1 for u in np.unique(uid)}
  return np.array([keep_uid[u] for u in uid])


def test_zero_variance_keep_equals_dapo_filter_and_the_refill_text():
  rng = np.random.default_rng(51_1523)
  sizes = [4, 4, 1, 4, 3, 4, 2]
  uid = np.repeat(np.arange(len(sizes)), sizes).astype(np.int32)
  acc = rng.choice([0.0, 1.0], uid.size)
  acc[uid == 0] = 1.0
  acc[uid == 3] = 0.0
  acc[uid == 6] = [0.0, 1.0]
  with jax.enable_x64(True):
    keep, _ = F.zero_variance(jnp.asarray(acc), jnp.asarray(uid), num_groups=len(sizes))
  assert np.array_equal(np.asarray(keep), _dapo_keep(acc, uid))
  # the recorded edge: equal non-binary values whose np.std rounds above 0
  v = np.array([0.1, 0.1, 0.1])
  assert np.std(v) > 0 and _dapo_keep(v, np.zeros(3, int)).all()
  with jax.enable_x64(True):
    assert not np.asarray(F.zero_variance(jnp.asarray(v), jnp.zeros(3, jnp.int32), num_groups=1)[0]).any()
  d = _defaults("zero_variance")
  ours, theirs = d["max_num_gen_batches / generation batch"]
  assert "the loader's next batch of rl.num_prompts new prompts" in ours and "not drawn again" in ours
  assert "gen_batch_size = ${data.train_batch_size}" in theirs and "dapo_trainer.yaml:9-10" in theirs
  assert "of the dropped groups" not in ours


# ----------------------------------------------------------------------------------------- reinforce_pp (not held)


def _rpp_verl(rewards, mask, gamma, carry=True):
  """reinforce_plus_plus returns: the verl 0.9.1 wheel core_algos.py:720-726 (carry through mask-0 tokens) or
  v0.7.0 :607-611 (reset there); then masked_whiten(returns, mask) * mask."""
  ret = np.zeros_like(rewards)
  run = np.zeros(rewards.shape[0])
  for t in reversed(range(rewards.shape[1])):
    new = rewards[:, t] + gamma * run
    m = mask[:, t]
    if carry:
      ret[:, t] = new * m
      run = new * m + run * (1 - m)
    else:
      ret[:, t] = new
      run = new * m
  return _masked_whiten(ret, mask) * mask, ret


def test_reinforce_pp_equals_verl_091_and_v070_and_the_batch_size_is_recorded():
  rng = np.random.default_rng(51_1524)
  b, t = 6, 10
  mask = (rng.random((b, t)) < 0.8).astype(np.float64)  # holes (multi-turn observations)
  mask[:, 0] = 1.0
  mask[2, 7:] = 0.0
  tok = rng.normal(size=(b, t)) * (rng.random((b, t)) < 0.3)
  for gamma in (1.0, 0.9):
    want, ret = _rpp_verl(tok, mask, gamma, carry=True)
    want_reset, _ = _rpp_verl(tok, mask, gamma, carry=False)
    with jax.enable_x64(True):
      ours, info = A.reinforce_pp(jnp.asarray(tok), jnp.asarray(mask > 0), gamma=gamma)
      ours_reset, _ = A.reinforce_pp(jnp.asarray(tok), jnp.asarray(mask > 0), gamma=gamma, reset_at_mask=True)
    # verl's whitening divides by (n + 1e-8): a relative 1e-8/n (the recorded deviation)
    np.testing.assert_allclose(np.asarray(ours), want, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(np.asarray(info["returns"]), ret, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(np.asarray(ours_reset), want_reset, rtol=1e-8, atol=1e-10)
    assert np.abs(want - want_reset).max() > 1e-3  # the holes matter: the two verl versions differ
  d = _defaults("reinforce_pp")
  assert "1024" in d["train batch (the whitening pool)"][1] and "8192" in d["train batch (the whitening pool)"][1]
  assert _any_dev("reinforce_pp", "8192 responses", "whiten")
  assert "data.train_batch_size=1024" in _fid("reinforce_pp").read


def test_records_print_the_corrections():
  assert "enable_filter_groups=False" in _record("qae")
  assert "rlla_4K" in _record("gd2po")
  assert "aggregation: ours token_mean" in _record("dpo")
  assert "not drawn again" in _record("zero_variance")
  assert "train batch (the whitening pool)" in _record("reinforce_pp")
