"""Issue #51 item 4, eighteenth draw (seed 20261223), part b: an independent re-audit of five in-full rows.

Rows drawn (five of the ten of ``random.Random(20261223).sample(rows, 10)`` over the 109 rows):
prm_delta, exgrpo, tis, exgrpo_policy, icepop.

Held (2): ``prm_delta`` (an abstract-only interpretation that says so; ours equals its stated form below),
``icepop`` (OpenRLHF/OpenRLHF@3c3be623 openrlhf/models/loss.py:196-205 and cli/train_ppo_ray.py:256-271 as
recorded; ours equals the 'ppo' + 'icepop' path below). Not held (3), each error fixed in the record and checked
here. No implementation was changed and no implementation bug was found.

- ``tis`` (OMITTED): verl's batch-normalise divisor. The verl 0.9.1 PyPI wheel rollout_corr_helper.py:628-655
  divides the weights by verl_F.masked_mean (utils/torch_functional.py:307-308: Σ x·m / (Σ m + 1e-8)) when
  torch.distributed is not initialised (the trainer's driver); at token level the normalised weights are then
  w·(n + 1e-8)/Σw where ours (normalize=True) gives w·n/Σw, a relative 1e-8/n; at sequence level each row's mean is
  Σw_i/(n_i + 1e-8). The record listed only the weights_mean > 1e-8 guard. A deviation extended.
- ``exgrpo`` (OMITTED): their replayed success is not the sampled token sequence. ElliottYan/LUFFY@01f4ae06
  ExGRPO/exgrpo/verl/verl/mix_src/experience/experience_trainer_ops.py:50 stores the decoded text
  ``.rstrip(tokenizer.eos_token)`` (a character-set strip: 'is done<|im_end|>' becomes 'is do', 'is done<|endoftext|>' 'is '),
  experience_helpers.py:172-237 build_off_policy_sample tokenises it again (a leading '<think>\\n' dropped when the
  chat template ends with it), mix_vllm_rollout_exp.py:157-166 appends the eos id; the recorded old log-probs are
  copied by position (experience_trainer_ops.py:76-99). Ours replays the stored token ids. A deviation and read
  added.
- ``exgrpo_policy`` (FALSE placement, OMITTED deviation): the placement called their replayed rows' log π_old "the
  recorded (behaviour) log-probs"; they are batch['old_log_probs'] of the storing step
  (experience_trainer_ops.py:52), the trainer's recompute (mix_trainer_experience.py:411-413), not the sampler's;
  ours (the exgrpo stage's logp_old='behavior') uses the sampler's, so w and w/(w + 0.1) differ by that step's
  sampler-trainer mismatch. The row listed no such deviation (only the exgrpo stage's record did). Placement
  reworded, a deviation and read added; ours equals their mixed-phase loss (mix_core_alg.py:87-219) when given
  their log π_old (below).

Each numeric reference below is a float64 NumPy transcription of the cited lines, written for these tests.
"""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from rljax import objectives as O
from rljax.rewards import prm_delta
from rljax.types import PolicyOutputs, TrainBatch
from _fidelity import any_deviation as _any_dev
from _fidelity import fid as _fid, record as _record



def _batch(mask, adv, old, behavior, extras=None):
  b, t = mask.shape
  with jax.enable_x64(True):
    return TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask),
                      advantages=jnp.asarray(adv), group_id=jnp.arange(b, dtype=jnp.int32),
                      logp_old=jnp.asarray(old), logp_behavior=jnp.asarray(behavior), extras=extras or {})


def _case(seed, b=6, t=11):
  rng = np.random.default_rng(seed)
  mask = rng.random((b, t)) < 0.8
  mask[:, 0] = True
  adv = np.repeat(rng.normal(size=(b, 1)), t, axis=1)
  old = np.log(rng.uniform(0.02, 1.0, size=(b, t)))
  behavior = old + rng.normal(scale=0.8, size=(b, t))
  new = old + rng.normal(scale=0.3, size=(b, t))
  return rng, mask, adv, old, behavior, new


# ----------------------------------------------------------------------------- tis (not held: fixed)


def _verl_tis_weights(log_ratio, mask, level="token", threshold=2.0, batch_normalize=False):
  """The verl 0.9.1 PyPI wheel rollout_corr_helper.py:522-657 compute_rollout_correction_weights, a float
  threshold, torch.distributed not initialised; verl_F.masked_mean = Σ x·m / (Σ m + 1e-8)."""
  m = mask.astype(np.float64)
  if level == "token":
    raw = np.exp(np.clip(log_ratio, -20.0, 20.0))
  else:
    raw = np.broadcast_to(np.exp(np.clip((log_ratio * m).sum(-1, keepdims=True), -20.0, 20.0)), log_ratio.shape)
  raw = raw * m
  w = np.minimum(raw, threshold)
  if batch_normalize:
    if level == "token":
      mean = (w * m).sum() / (m.sum() + 1e-8)
    else:
      seq_w = (w * m).sum(-1) / (m.sum(-1) + 1e-8)
      seq_m = (m.sum(-1) > 0).astype(np.float64)
      mean = (seq_w * seq_m).sum() / max(seq_m.sum(), 1e-8)
    if mean > 1e-8:
      w = w / mean
  return w


def _ours_tis(mask, old, behavior, **kw):
  batch = _batch(mask, np.zeros(mask.shape), old, behavior)
  with jax.enable_x64(True):
    w, keep, _ = O.tis(**kw)(PolicyOutputs(logp=jnp.asarray(old)), batch)
  return np.asarray(w), np.asarray(keep)


def test_tis_equals_verl_unnormalised_and_differs_by_the_n_plus_1e8_divisor_normalised():
  _, mask, _, old, behavior, _ = _case(3)
  log_ratio = np.where(mask, old - behavior, 0.0)
  n = mask.sum()
  for level in ("token", "sequence"):
    ours, keep = _ours_tis(mask, old, behavior, level=level)
    theirs = _verl_tis_weights(log_ratio, mask, level=level)
    np.testing.assert_allclose(ours[mask], theirs[mask], rtol=1e-13, atol=0)
    assert np.all(keep == 1)
  ours, _ = _ours_tis(mask, old, behavior, normalize=True)
  theirs = _verl_tis_weights(log_ratio, mask, batch_normalize=True)
  assert (np.exp(log_ratio)[mask] > 2.0).any()  # the truncation bites in this case
  # theirs = ours · (n + 1e-8)/n: not equal at 1e-12, equal after that factor
  assert not np.allclose(ours[mask], theirs[mask], rtol=1e-12, atol=0)
  np.testing.assert_allclose(ours[mask] * (n + 1e-8) / n, theirs[mask], rtol=1e-13, atol=0)


def test_tis_record_gives_verls_n_plus_1e8_mean():
  assert _any_dev("tis", "normalize=True", "(n + 1e-8)", "torch_functional.py:307-308", "1e-8/n",
                  "Σw_i/(n_i + 1e-8)", "eighteenth draw")


# ----------------------------------------------------------------------------- icepop (held)


def _openrlhf_ppo_icepop(new, old, rollout, adv, low=0.5, high=5.0, eps=0.2):
  """OpenRLHF/OpenRLHF@3c3be623 openrlhf/models/loss.py:166-205: policy_loss_type 'ppo', dual_clip None,
  vllm_is_correction_type 'icepop' (threshold [0.5, 5.0]: cli/train_ppo_ray.py:258-263)."""
  ratio = np.exp(np.clip(new - old, -20.0, 20.0))
  loss = -np.minimum(ratio * adv, np.clip(ratio, 1 - eps, 1 + eps) * adv)
  vllm_is = np.exp(old - rollout)
  vllm_is = vllm_is * ((vllm_is >= low) & (vllm_is <= high))
  return vllm_is * loss


def test_icepop_equals_openrlhf_ppo_icepop():
  _, mask, adv, old, behavior, new = _case(5)
  k = np.exp(old - behavior)
  assert (mask & ((k < 0.5) | (k > 5.0))).any() and (mask & (k >= 0.5) & (k <= 5.0)).any()
  batch = _batch(mask, adv, old, behavior)
  with jax.enable_x64(True):
    ours, _ = O.ppo_clip(0.2, correction=O.icepop())(PolicyOutputs(logp=jnp.asarray(new)), batch)
  np.testing.assert_allclose(np.asarray(ours)[mask], _openrlhf_ppo_icepop(new, old, behavior, adv)[mask],
                             rtol=1e-12, atol=1e-14)
  r = _record("icepop")
  assert "loss.py:196-207" in r and "[0.5, 5.0]" in r and "is_correction_enable" in r


# ----------------------------------------------------------------------------- exgrpo_policy (not held: fixed)


def _authors_mixed_loss(new, old, adv, mask, prefix, beta=0.1):
  """ElliottYan/LUFFY@01f4ae06 ExGRPO/exgrpo/verl/verl/mix_src/mix_core_alg.py:87-219 in the mixed phase
  (on_policy_reshape no_reshape, off_policy_reshape p_div_p_0.1, loss_remove_clip True, no off clips,
  all_max_clip None): per-token losses; loss_remove_token_mean divides Σ loss·mask by the width."""
  ratio = np.exp(new - old)
  on = -adv * ratio
  off_ratio = ratio / (ratio + beta)
  off = -adv * off_ratio
  per_token = off * prefix + on * (1 - prefix)
  return per_token, (per_token * mask).sum() / mask.shape[-1]


def test_exgrpo_policy_equals_theirs_with_their_old_logp_and_differs_with_the_samplers():
  rng, mask, adv, trainer_old, sampler, new = _case(7)
  b, t = mask.shape
  replay = np.zeros(b, bool)
  replay[[1, 4]] = True
  prefix = np.broadcast_to(replay[:, None], (b, t)).astype(np.float64)
  # their replayed rows' log π_old: the storing step's trainer recompute (experience_trainer_ops.py:52)
  theirs, _ = _authors_mixed_loss(new, trainer_old, adv, mask, prefix)
  extras = {"replay_mask": jnp.asarray(replay)}
  with jax.enable_x64(True):
    b_theirs = _batch(mask, adv, trainer_old, sampler, extras)
    ours_t, _ = O.exgrpo_policy()(PolicyOutputs(logp=jnp.asarray(new)), b_theirs)
    # what the exgrpo stage (logp_old='behavior') hands over: the sampler's stored log-probs on replayed rows
    stage_old = np.where(replay[:, None], sampler, trainer_old)
    b_ours = dataclasses.replace(b_theirs, logp_old=jnp.asarray(stage_old))
    ours_s, _ = O.exgrpo_policy()(PolicyOutputs(logp=jnp.asarray(new)), b_ours)
  np.testing.assert_allclose(np.asarray(ours_t)[mask], theirs[mask], rtol=1e-12, atol=1e-14)
  rep = mask & replay[:, None]
  assert not np.allclose(np.asarray(ours_s)[rep], theirs[rep], rtol=1e-6)
  np.testing.assert_allclose(np.asarray(ours_s)[mask & ~replay[:, None]], theirs[mask & ~replay[:, None]],
                             rtol=1e-12, atol=1e-14)
  del rng


def test_exgrpo_policy_record_names_their_old_logp_as_the_trainers_recompute():
  f = _fid("exgrpo_policy")
  assert "recorded (behaviour) log-probs" not in f.placement
  assert "the trainer's recompute at the storing step" in f.placement and "not the sampler's" in f.placement
  assert _any_dev("exgrpo_policy", "sampler's stored log-prob", "experience_trainer_ops.py:52",
                  "sampler-trainer mismatch", "eighteenth draw")
  assert "mix_trainer_experience.py:411-413" in f.read


# ----------------------------------------------------------------------------- exgrpo (not held: fixed)


def test_exgrpo_rstrip_strips_a_character_set():
  # experience_trainer_ops.py:50: str.rstrip(eos_token) with Qwen's '<|endoftext|>' (and '<|im_end|>')
  assert "the answer is done<|endoftext|>".rstrip("<|endoftext|>") == "the answer is "
  assert "the answer is done<|im_end|>".rstrip("<|im_end|>") == "the answer is do"
  assert "so n = 7 <|im_end|>".rstrip("<|im_end|>") == "so n = 7 "
  assert "ends in }<|im_end|>".rstrip("<|im_end|>") == "ends in }"


def test_exgrpo_record_gives_the_text_round_trip():
  assert _any_dev("exgrpo", "stored as text", "rstrip", "experience_trainer_ops.py:50", "character set",
                  "'is do'", "build_off_policy_sample", "mix_vllm_rollout_exp.py", "copied by position",
                  "eighteenth draw")
  assert "Eighteenth draw" in _fid("exgrpo").read and "experience_helpers.py:172-237" in _fid("exgrpo").read


# ----------------------------------------------------------------------------- prm_delta (held)


def _delta_reference(r, m):
  """r'_t = r_t − r_{next valid t'}, the last valid step keeps r_T, 0 off the mask (the record's form)."""
  out = np.zeros_like(r)
  for i in range(r.shape[0]):
    idx = np.flatnonzero(m[i])
    for j, t in enumerate(idx):
      out[i, t] = r[i, t] - (r[i, idx[j + 1]] if j + 1 < idx.size else 0.0)
  return out


def test_prm_delta_equals_its_stated_form_and_telescopes():
  rng = np.random.default_rng(13)
  r = rng.uniform(-1, 1, size=(5, 7)).astype(np.float32)
  m = rng.random((5, 7)) < 0.7
  m[0] = False
  m[1, :] = False
  m[1, 3] = True
  ours, _ = prm_delta(jnp.asarray(r), jnp.asarray(m))
  ref = _delta_reference(r.astype(np.float64), m)
  np.testing.assert_allclose(np.asarray(ours), ref, rtol=1e-6, atol=1e-6)
  for i in range(5):
    idx = np.flatnonzero(m[i])
    if idx.size:
      np.testing.assert_allclose(np.asarray(ours)[i].sum(), r[i, idx[0]], rtol=1e-5, atol=1e-6)
  f = _fid("prm_delta")
  r = _record("prm_delta")
  assert "abstract only" in r and "r_T kept on the last step unverified" in r
