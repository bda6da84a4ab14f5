"""Issue #51 item 4, sixteenth draw (seed 20261221), part b: an independent re-audit of five in-full rows.

Rows drawn (five of the ten of ``random.Random(20261221).sample(rows, 10)`` over the 109 rows):
gd2po, sapo, alol, entropy_gated_contrastive, divergence_rejection.

Held (1): ``divergence_rejection``; its keep rule is checked below against a float64 transcription of the verl 0.9.1
PyPI wheel's rollout_corr_helper.py:132-413 (_parse_rollout_rs_thresholds, compute_rollout_rejection_mask) for the
token, seq_sum, seq_mean and seq_max criteria, the presets' thresholds and a single k1 value; the cited
volcengine/verl@b178a3cd rollout_corr_helper.py:93-372 is the same code but for the wheel's added lower <= upper
check, and its algorithm.py:176 / rollout_correction.yaml:12 leave rollout_rs None (checked).

Not held (4), each error fixed in the record and checked here (no implementation changed, no implementation bug
found: each implementation matched a float64 transcription of its source at the stated settings, below):

- ``gd2po`` (OMITTED): the whitening pool. All four gd2po scripts set data.train_batch_size=512 with rollout.n=4
  (Qwen-Applications/GD2PO@f1ad765b tool-calling/scripts/correctness_length{,_format}/train_gd2po_hard.sh:39, 60;
  train_gd2po_snr.sh:42, 63), and fit calls compute_advantage once on the whole generated batch
  (ray_trainer.py:1556-1563): the masked whitening runs over the kept tokens of 2048 responses. The record listed the
  group size (4) and placement "the whole batch" but not its size; ours whitens the step's rows (256 at RLConfig's
  defaults). A defaults entry, a deviation and read added; ours on the whole 2048-row batch = theirs (checked), on a
  256-row step it differs.
- ``sapo`` (FALSE): the aggregation deviation said chain(aggregate=seq_mean_token_mean) "gives it" (both peers'
  per-sequence mean) when no row is empty. verl's forced seq-mean-token-mean divides each row's token sum by
  (n + 1e-8) (the verl 0.9.1 PyPI wheel core_algos.py:1194-1202, called from compute_policy_loss_sapo :1688-1690;
  volcengine/verl@v0.7.0 core_algos.py:814 the same):
  ours is verl's × (n + 1e-8)/n per row, a relative 1e-8/n (TRL's clamp(min=1) count is exact: equal). Deviation
  and read corrected; the factor is checked below.
- ``alol`` (OMITTED): their V(x) at the loss is a dropout sample. abaheti95/LoL-RL@9f8d8166 utils/rl_utils.py:452-503
  ValueHeadAttention applies nn.Dropout(summary_dropout_prob) to its input hidden states (:488) and to its attention
  output (:501), summary_dropout_prob = 0.1 when the config has none (:462-467; LLaMA's has none), and
  lolrl_qlora_llama_hh.py never puts the head in eval mode (:193 .train(), :239 deepcopy, :503-514 a new module; its
  .eval() calls are the LM's and the baseline's): A = clamp(R − V, 0) at the loss (:856, :918, under no_grad) is a
  fresh dropout draw, not the V behind the cached A that drew the row (:285); and the head's attention has no
  key_padding_mask (:497-498) over the micro-batch's left-padded prompts (lolrl_qlora_llama_hh.py:723-724), so V(x)
  also depends on the other rows' prompt lengths. A defaults entry, a deviation and read added; ours equals their
  a_lol at a deterministic V (checked).
- ``entropy_gated_contrastive`` (OMITTED; one FALSE-leaning phrase): the length and the tokens. The authors'
  farukakgul/ReasonMaxxer@72182e90 (read in its fork ansz42/ReasonMaxxer) scripts/score_rollouts.py:246-271
  re-tokenises the prompt + completion TEXT with truncation=True, max_length --max_seq_len (8192 in
  02_generate_score_3x100x20.sh, argparse 4096 :149) and stores those tokens and their entropies (:278-307); and
  train_reasonmaxxer.py:77-93 cuts each row again at --max_seq_len 8192, right (04_train_tau1p4.sh; argparse 4096,
  right, :578-579), dropping decision positions past the cut. Generation allows max_tokens 8192 after the prompt, so
  a long rollout has no gate, decision loss or KL anchor past 8192 tokens there; ours covers every loss-mask token of
  the sampled ids. The record also said the entropy is of "float32 logits": they are the bfloat16 forward's logits
  (--dtype bfloat16, score_rollouts.py:146, and the recipe) upcast by .float() (:283). A defaults entry, two
  deviations and read added; the cut is checked numerically below.

Each numeric reference below is a float64 NumPy transcription of the cited lines, written for these tests.
"""
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rljax import advantages as A
from rljax import objectives as O
from rljax.types import PolicyOutputs, TrainBatch
from _fidelity import defaults as _defaults, fid as _fid, record as _record, any_deviation as _any_dev, mirror_git as _git




# ------------------------------------------------------------------------------ gd2po (not held)

# verl torch_functional.masked_mean / masked_var / masked_whiten, as copied in GD2PO@f1ad765b
# tool-calling/verl/utils/torch_functional.py:171-221 (÷ (n + 1e-8), unbiased variance, rsqrt(var + 1e-8))
def _masked_mean(x, m):
  return (x * m).sum() / (m.sum() + 1e-8)


def _masked_whiten(x, m):
  mean = _masked_mean(x, m)
  n = m.sum()
  var = _masked_mean((x - mean) ** 2, m) * n / (n - 1)
  return (x - mean) / np.sqrt(var + 1e-8)


def _gd2po_hard_authors(comps, index):
  """GD2PO@f1ad765b tool-calling: core_algos.py:250-310 per-reward GRPO (ε 1e-6, unbiased std; one token per row),
  ray_trainer.py:268-273 (conflict: a rollout sum > 1e-8 and one < −1e-8), :292-307 (the group keep ratio over the
  whole group), :477-505 gdpo_filter_group_ratio (unweighted sum × ratio, then _apply_gdpo_keep_mask :276-290: the
  masked whitening over the kept tokens of the batch passed in)."""
  per = np.empty_like(comps)
  for k in range(comps.shape[1]):
    for g in np.unique(index):
      s = comps[index == g, k]
      mean, sd = (0.0, 1.0) if s.size == 1 else (s.mean(), s.std(ddof=1))
      per[index == g, k] = (s - mean) / (sd + 1e-6)
  conflict = (per > 1e-8).any(1) & (per < -1e-8).any(1)
  keep = (~conflict).astype(np.float64)
  q = np.array([keep[index == index[i]].sum() / (index == index[i]).sum() for i in range(len(index))])
  filt = per.sum(1) * q * keep
  return _masked_whiten(filt, keep) * keep


def test_gd2po_whitening_pool_is_their_whole_512x4_batch():
  rng = np.random.default_rng(20261221)
  n_prompts, n = 512, 4  # data.train_batch_size=512, rollout.n=4 (train_gd2po_hard.sh:39, :60)
  index = np.repeat(np.arange(n_prompts), n)
  comps = np.stack([rng.choice([0.0, 1.0, 2.0, 3.0], n_prompts * n), rng.choice([0.0, 0.5, 1.0], n_prompts * n)], 1)
  theirs = _gd2po_hard_authors(comps, index)
  with jax.enable_x64(True):
    ours_all, _ = A.gd2po(jnp.asarray(comps), jnp.asarray(index, jnp.int32), conflict_tol=1e-8)
    step = 256  # RLConfig num_prompts 32 × group_size 8 rows; here 64 of their groups of 4
    ours_step, _ = A.gd2po(jnp.asarray(comps[:step]), jnp.asarray(index[:step], jnp.int32), conflict_tol=1e-8)
  # the whole batch: theirs (their masked_mean ÷ (n + 1e-8): a relative 1e-8/n, inside rtol)
  np.testing.assert_allclose(np.asarray(ours_all), theirs, rtol=1e-7, atol=1e-9)
  # the step's rows only: another mean and variance, other numbers
  assert np.max(np.abs(np.asarray(ours_step) - theirs[:step])) > 1e-3
  d = _defaults("gd2po")
  ours, their = d["train batch (the whitening pool)"]
  assert "256" in ours and "512" in their and "2048" in their
  assert "train_gd2po_hard.sh:39" in _fid("gd2po").read and "train_gd2po_snr.sh:42" in _fid("gd2po").read
  assert _any_dev("gd2po", "whitening pool", "2048")


def test_gd2po_scripts_set_train_batch_size_512():
  for sub in ("correctness_length", "correctness_length_format"):
    for name, line in (("train_gd2po_hard.sh", 39), ("train_gd2po_snr.sh", 42)):
      text = _git("Qwen-Applications+GD2PO", "show", f"f1ad765b:tool-calling/scripts/{sub}/{name}").splitlines()
      assert text[line - 1].strip() == "data.train_batch_size=512 \\"
      assert any(x.strip() == "actor_rollout_ref.rollout.n=4 \\" for x in text)


# ------------------------------------------------------------------------------ sapo (not held)


def _sapo_tokens(old, new, adv, tau_pos=1.0, tau_neg=1.05):
  """The verl 0.9.1 PyPI wheel core_algos.py:1655-1680 (log r clamped ±20, tau by A > 0, gate σ(τ(r − 1))·4/τ)."""
  r = np.exp(np.clip(new - old, -20.0, 20.0))
  tau = np.where(adv > 0, tau_pos, tau_neg)
  return -(1.0 / (1.0 + np.exp(-tau * (r - 1.0)))) * (4.0 / tau) * adv


def _verl_seq_mean_token_mean(loss, mask):
  """agg_loss 'seq-mean-token-mean' (the verl 0.9.1 PyPI wheel core_algos.py:1194-1202), one process."""
  n = mask.sum(-1)
  per = (loss * mask).sum(-1) / (n + 1e-8)
  has = (n > 0).astype(np.float64)
  return (per * has).sum() / has.sum()


def _trl_sapo_mean(loss, mask):
  """The TRL 1.9.0 PyPI wheel grpo_trainer.py:3124-3125 (loss_type 'sapo'), one micro-batch."""
  return ((loss * mask).sum(-1) / np.maximum(mask.sum(-1), 1.0)).mean()


def _ours_sapo(old, new, adv, mask):
  b, t = mask.shape
  with jax.enable_x64(True):
    batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask), advantages=jnp.asarray(adv),
                       group_id=jnp.arange(b, dtype=jnp.int32), logp_old=jnp.asarray(old))
    loss, _ = O.chain(O.sapo(), aggregate=O.seq_mean_token_mean)(PolicyOutputs(logp=jnp.asarray(new)), batch)
  return float(loss)


def test_sapo_seq_mean_token_mean_is_verls_times_n_plus_1e8_over_n():
  rng = np.random.default_rng(16_2)
  # one row of one token: ours / verl's = (1 + 1e-8) / 1, far above float64 rounding
  old, new, adv, mask = (np.array([[-1.3]]), np.array([[-1.1]]), np.array([[0.7]]), np.ones((1, 1)))
  ours = _ours_sapo(old, new, adv, mask)
  verl = _verl_seq_mean_token_mean(_sapo_tokens(old, new, adv), mask)
  trl = _trl_sapo_mean(_sapo_tokens(old, new, adv), mask)
  assert abs(ours / verl - (1.0 + 1e-8)) < 1e-13
  assert abs(ours / trl - 1.0) < 1e-14
  # several rows, no empty one: TRL's exactly; verl's × (n + 1e-8)/n per row
  b, t = 5, 7
  mask = (rng.random((b, t)) < 0.7).astype(np.float64)
  mask[:, 0] = 1.0
  adv = np.repeat(rng.normal(size=(b, 1)), t, 1)
  old = -rng.random((b, t)) * 2
  new = old + rng.normal(scale=0.3, size=(b, t))
  tok = _sapo_tokens(old, new, adv)
  n = mask.sum(-1)
  ours = _ours_sapo(old, new, adv, mask)
  np.testing.assert_allclose(ours, _trl_sapo_mean(tok, mask), rtol=1e-13)
  verl_scaled = ((tok * mask).sum(-1) / (n + 1e-8) * (n + 1e-8) / n).mean()
  np.testing.assert_allclose(ours, verl_scaled, rtol=1e-13)
  assert ours != _verl_seq_mean_token_mean(tok, mask)
  devs = " ".join(_fid("sapo").deviations)
  assert "gives it when no row is empty" not in devs
  assert "n + 1e-8" in devs and "1e-8/n" in devs and "core_algos.py:1194-1202" in devs and "v0.7.0 core_algos.py:814" in devs
  assert "agg_loss" in _fid("sapo").read and ":1688-1690" in _fid("sapo").read


def test_sapo_gate_per_token_equals_verl_and_trl():
  rng = np.random.default_rng(16_3)
  b, t = 4, 6
  adv = np.repeat(np.array([[1.0], [-0.5], [0.0], [2.0]]), t, 1)
  old = -rng.random((b, t)) * 3
  new = old + rng.normal(scale=0.8, size=(b, t))
  with jax.enable_x64(True):
    batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.ones((b, t)), advantages=jnp.asarray(adv),
                       group_id=jnp.arange(b, dtype=jnp.int32), logp_old=jnp.asarray(old))
    per, _ = O.sapo()(PolicyOutputs(logp=jnp.asarray(new)), batch)
  np.testing.assert_allclose(np.asarray(per), _sapo_tokens(old, new, adv), rtol=1e-13, atol=1e-15)
  d = _defaults("sapo")
  assert d["tau_pos"] == ("1.0", "1.0 (verl tau_pos, TRL sapo_temperature_pos)")
  assert d["tau_neg"][0] == "1.05" and "1.05" in d["tau_neg"][1]


# ------------------------------------------------------------------------------ alol (not held)


def _their_a_lol(logp, ref, mask, reward, value, ppo_clip=0.9):
  """abaheti95/LoL-RL@9f8d8166 lolrl_qlora_llama_hh.py:862-905 (a_lol, kl_beta 0): the detached sequence ratio
  exp(Σ −log π_ref − Σ −log π), clamped to [1 − 0.9, 1 + 0.9], × Σ_t −log π, × clamp(R − V, 0), mean over the
  micro-batch."""
  nll = -(logp * mask).sum(1)
  ratio = np.clip(np.exp(-(ref * mask).sum(1) - nll), 1 - ppo_clip, 1 + ppo_clip)
  adv = np.maximum(reward - value, 0.0)
  return float(np.mean(nll * ratio * adv))


def _ours_alol(logp, ref, mask, adv):
  b, t = logp.shape
  with jax.enable_x64(True):
    batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask),
                       advantages=jnp.asarray(np.repeat(adv[:, None], t, 1)), group_id=jnp.arange(b, dtype=jnp.int32),
                       logp_ref=jnp.asarray(ref))
    return float(O.chain(O.alol(), aggregate=O.seq_mean_token_sum)(PolicyOutputs(logp=jnp.asarray(logp)), batch)[0])


def test_alol_equals_a_lol_at_a_deterministic_value_and_the_record_names_their_dropout():
  rng = np.random.default_rng(16_4)
  b, t = 4, 12
  logp = -rng.uniform(0.01, 0.5, (b, t))
  ref = logp + rng.normal(scale=0.05, size=(b, t))
  mask = np.ones((b, t))
  mask[2, 8:] = 0
  reward = 1 / (1 + np.exp(-rng.normal(size=b)))  # R = sigmoid(reward-model score)
  value = np.array([0.3, 0.9, 0.5, 0.1])          # the head's deterministic V(x) (eval mode)
  ours = _ours_alol(logp, ref, mask, reward - value)
  np.testing.assert_allclose(ours, _their_a_lol(logp, ref, mask, reward, value), rtol=1e-12)
  # their loss reads V through the head's dropout (p 0.1, train mode): another draw of V is another loss
  value_drawn = value + np.array([0.05, -0.02, 0.0, 0.04])
  assert abs(_their_a_lol(logp, ref, mask, reward, value_drawn) - ours) > 1e-4
  d = _defaults("alol")
  ours_v, their_v = d["V(x) at the loss (value-head dropout)"]
  assert "batch.advantages" in ours_v and "0.1" in their_v and "never .eval()" in their_v
  assert "utils/rl_utils.py:452-503" in _fid("alol").read and ":856 / :918" in _fid("alol").read
  assert _any_dev("alol", "dropout", "never put in eval mode")
  assert "key_padding_mask" in their_v and _any_dev("alol", "without a padding mask", "rl_utils.py:497-498")


def test_alol_value_head_dropout_lines_as_recorded():
  rl_utils = _git("abaheti95+LoL-RL", "show", "9f8d8166:utils/rl_utils.py").splitlines()
  assert rl_utils[451].startswith("class ValueHeadAttention")
  assert 'kwargs.pop("summary_dropout_prob", 0.1)' in rl_utils[462]
  assert "self.dropout(hidden_states)" in rl_utils[487] and "self.dropout(mha_output)" in rl_utils[500]
  assert "self.source_seq_multihead_attn(query=query_vector, key=output, value=output)" in rl_utils[497]
  main = _git("abaheti95+LoL-RL", "show", "9f8d8166:lolrl_qlora_llama_hh.py")
  assert "value_function_model.eval()" not in main and "best_value_function_model.eval()" not in main
  lines = main.splitlines()
  assert "value_function_model.train()" in lines[192]
  assert "val_outputs = best_value_function_model(last_layer_hidden_state)" in lines[855]
  assert "val_outputs = best_value_function_model(last_layer_hidden_state)" in lines[917]


# ------------------------------------------------------------------------------ entropy_gated_contrastive (not held)


def _their_cut(ids_len, decision_positions, max_seq_len=8192):
  """farukakgul/ReasonMaxxer@72182e90 scripts/train_reasonmaxxer.py:77-93 (--truncate_side right): a row longer
  than max_seq_len keeps its first max_seq_len ids; decision positions must be < len(ids) − 1."""
  if ids_len > max_seq_len:
    ids_len = max_seq_len
    decision_positions = [p for p in decision_positions if p < ids_len - 1]
  return ids_len, [p for p in decision_positions if 0 <= p < ids_len - 1]


def test_entropy_gated_contrastive_their_rows_are_cut_at_8192_tokens():
  prompt, completion = 120, 8192  # generation max_tokens 8192 after the prompt (02_generate_score_3x100x20.sh)
  rng = np.random.default_rng(16_5)
  h = rng.random(completion) * 3.0                      # base entropies of the completion's positions
  gated = np.flatnonzero(h > 1.4)                       # tau 1.4 (04_train_tau1p4.sh); no entropy equals it here
  positions = [prompt - 1 + int(i) for i in gated]      # prediction positions, as prepare_training_data.py:232-246
  n_ids, kept = _their_cut(prompt + completion, positions)
  assert n_ids == 8192 and len(kept) < len(positions)
  their_kept_in_completion = len(kept)
  # ours: every loss-mask token of the sampled completion is gated by H ≥ τ
  with jax.enable_x64(True):
    batch = TrainBatch(tokens=jnp.zeros((1, completion), jnp.int32), loss_mask=jnp.ones((1, completion)),
                       advantages=jnp.zeros((1, completion)), group_id=jnp.zeros((1,), jnp.int32),
                       rewards=jnp.asarray([1.0]), extras={"entropy_base": jnp.asarray(h[None])})
    logp = -jnp.asarray(rng.random((1, completion)))
    per, _ = O.entropy_gated_contrastive(1.4)(PolicyOutputs(logp=logp), batch)
  per = np.asarray(per)[0]
  assert int((per != 0).sum()) == gated.size > their_kept_in_completion
  # within the cut the two gates are the same positions; past it only ours has a loss
  cut = 8192 - 1 - (prompt - 1)  # completion index of the first position their cut drops
  assert [prompt - 1 + i for i in np.flatnonzero(per[:cut] != 0)] == kept
  assert np.any(per[cut:] != 0)
  d = _defaults("entropy_gated_contrastive")
  assert "8192" in d["length and tokens"][1] and "re-tokenised" in d["length and tokens"][1]
  assert "bfloat16" in d["log-probs / entropy temperature"][1]
  assert "log_softmax(float32 logits)" not in _record("entropy_gated_contrastive")
  assert _any_dev("entropy_gated_contrastive", "8192 tokens", "train_reasonmaxxer.py:77-93")
  assert _any_dev("entropy_gated_contrastive", "re-tokenised", "not the sampled ids")
  assert "score_rollouts.py@72182e90:146, 149" in _fid("entropy_gated_contrastive").read


def test_entropy_gated_contrastive_truncation_lines_as_recorded():
  score = _git("ansz42+ReasonMaxxer", "show", "72182e90:scripts/score_rollouts.py").splitlines()
  assert 'p.add_argument("--dtype", default="bfloat16")' in score[145]
  assert 'p.add_argument("--max_seq_len", type=int, default=4096)' in score[148]
  assert "full_text, rendered_prompt = _compose_full_text(" in score[245]
  assert "max_length=args.max_seq_len," in score[265] and "truncation=True," in score[264]
  assert ".logits[0, :-1, :].detach().float().cpu()" in score[282]
  train = _git("ansz42+ReasonMaxxer", "show", "72182e90:scripts/train_reasonmaxxer.py").splitlines()
  assert "if max_seq_len > 0 and len(ids) > max_seq_len:" in train[76]
  assert 'default=4096' in train[577] and 'default="right"' in train[578]
  recipe = _git("ansz42+ReasonMaxxer", "show", "72182e90:examples/qwen25_1p5b/04_train_tau1p4.sh")
  assert "--max_seq_len 8192   --truncate_side right" in recipe
  gen = _git("ansz42+ReasonMaxxer", "show", "72182e90:examples/qwen25_1p5b/02_generate_score_3x100x20.sh")
  assert "--max_tokens 8192" in gen and "--max_seq_len 8192" in gen and "--dtype bfloat16" in gen


# ------------------------------------------------------------------------------ divergence_rejection (held)


def _verl_thresholds(option, spec):
  """_parse_rollout_rs_thresholds (the verl 0.9.1 PyPI wheel rollout_corr_helper.py:132-194), one option."""
  spec = str(spec)
  if option.endswith("k1"):
    lo, hi = spec.split("_", 1) if "_" in spec else (str(1.0 / float(spec)), spec)
    return float(lo), float(hi)
  return None, float(spec)


def _verl_keep(log_ratio, mask, option, spec):
  """compute_rollout_rejection_mask (:197-413) for one option: the modified response mask."""
  lo, hi = _verl_thresholds(option, spec)
  lr = np.clip(log_ratio, -20.0, 20.0)
  k = {"k1": -lr, "k2": 0.5 * lr ** 2, "k3": np.exp(lr) - 1.0 - lr}[option[-2:]]
  if option.startswith("token"):
    stat = k
  elif option.startswith("seq_sum"):
    stat = (k * mask).sum(-1, keepdims=True)
  elif option.startswith("seq_mean"):
    stat = (k * mask).sum(-1, keepdims=True) / (mask.sum(-1, keepdims=True) + 1e-8)
  else:
    stat = np.where(mask > 0, k, -np.inf).max(-1, keepdims=True)
  keep = (stat >= math.log(lo)) & (stat <= math.log(hi)) if lo is not None else stat <= hi
  return np.broadcast_to(keep, mask.shape) * mask


def test_divergence_rejection_keep_equals_verls_rollout_rs():
  rng = np.random.default_rng(16_6)
  b, t = 12, 9
  mask = (rng.random((b, t)) < 0.8).astype(np.float64)
  mask[:, 0] = 1.0
  old = -rng.random((b, t)) * 2
  behav = old + rng.normal(scale=0.3, size=(b, t))
  behav[3, 2] = old[3, 2] + 30.0  # past the ±20 clamp
  cases = (("token_k1", "0.8_1.25", dict(estimator="k1", threshold=(math.log(0.8), math.log(1.25)))),
           ("token_k1", 1.3, dict(estimator="k1", threshold=math.log(1.3))),
           ("token_k2", 0.02, dict(estimator="k2", threshold=0.02)),
           ("token_k3", 0.01, dict(estimator="k3", threshold=0.01)),
           ("seq_sum_k1", "0.5_2.0", dict(estimator="k1", level="sequence_sum",
                                          threshold=(math.log(0.5), math.log(2.0)))),
           ("seq_sum_k3", 0.3, dict(estimator="k3", level="sequence_sum", threshold=0.3)),
           ("seq_mean_k3", 0.04, dict(estimator="k3", level="sequence_mean", threshold=0.04)),
           ("seq_mean_k1", "0.95_1.05", dict(estimator="k1", level="sequence_mean",
                                             threshold=(math.log(0.95), math.log(1.05)))),
           ("seq_max_k2", 0.1, dict(estimator="k2", level="sequence_max", threshold=0.1)),
           ("seq_max_k3", 0.1, dict(estimator="k3", level="sequence_max", threshold=0.1)))
  with jax.enable_x64(True):
    batch = TrainBatch(tokens=jnp.zeros((b, t), jnp.int32), loss_mask=jnp.asarray(mask),
                       advantages=jnp.ones((b, t)), group_id=jnp.arange(b, dtype=jnp.int32),
                       logp_old=jnp.asarray(old), logp_behavior=jnp.asarray(behav))
    out = PolicyOutputs(logp=jnp.asarray(old))
    for option, spec, kw in cases:
      _, keep, _ = O.divergence_rejection(**kw)(out, batch)
      theirs = _verl_keep(old - behav, mask, option, spec)  # log_ratio = old − rollout (:964)
      ours = np.asarray(keep) * mask
      assert np.array_equal(ours, theirs), option
      assert 0 < theirs.sum() < mask.sum(), option  # each case rejects some and keeps some
  d = _defaults("divergence_rejection")
  assert d["log-ratio clamp"] == ("±20", "±20 (SAFETY_BOUND)")
  assert "seq_sum_k1 '0.5_2.0'" in d["estimator, level"][1] and "seq_mean_k3 0.01" in d["estimator, level"][1]


def test_divergence_rejection_b178a3cd_helper_is_the_wheels_but_for_an_order_check():
  old = _git("volcengine+verl", "show", "b178a3cd:verl/trainer/ppo/rollout_corr_helper.py").splitlines()
  wheel_path = "/work/peers/verl/verl/trainer/ppo/rollout_corr_helper.py"
  if not os.path.exists(wheel_path):
    pytest.skip("the verl 0.9.1 wheel is not on this machine")
  new = open(wheel_path, encoding="utf-8").read().splitlines()
  assert old[92].startswith("def _parse_rollout_rs_thresholds(") and old[155].startswith("def compute_rollout_rejection")
  assert new[131].startswith("def _parse_rollout_rs_thresholds(") and new[196].startswith("def compute_rollout_rejection")
  added = [x for x in new[131:413] if x not in old[92:372]]
  assert [x.strip() for x in added] == ["if lower > upper:",
                                        "raise ValueError(f\"Thresholds for option '{option}' must be lower <= upper, "
                                        "got {spec}.\")"]
  cfg = _git("volcengine+verl", "show", "b178a3cd:verl/trainer/config/algorithm.py").splitlines()
  assert cfg[175].strip() == "rollout_rs: Optional[str] = None"
  yaml = _git("volcengine+verl", "show", "b178a3cd:verl/trainer/config/algorithm/rollout_correction.yaml").splitlines()
  assert yaml[11].strip() == "rollout_rs: null"
