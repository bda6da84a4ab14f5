"""The default arena: named entries (a list of ``--set`` overrides each) and named groups of them (experiments).

An entry is applied to the arena's base config with ``rljax.train.apply_overrides``, so it may change the recipe
and anything else (sampler dtype, ``rl.rollout_ahead``, the model, ...). The recipe entries set every recipe
field (``RECIPE_FIELDS``): a base config's own recipe never leaks into an entry. Hyper-parameters are the
catalog defaults (``python -m rljax.catalog``: the authors' where the catalog says so), or the published
recipe's where ``configs/recipes.py`` writes one; where an entry departs from the catalog default, its
description says why.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

from rljax.train import RECIPE_FIELDS, RLConfig

__all__ = ["Entry", "ENTRIES", "EXPERIMENTS", "recipe_overrides", "select_entries"]

# every recipe slot and the value an entry that does not name it gets (RLConfig's defaults, GRPO without KL)
_RECIPE_DEFAULTS = {slot: getattr(RLConfig(), slot) for slot in RECIPE_FIELDS}


@dataclasses.dataclass(frozen=True)
class Entry:
  """One arena contestant: ``name``, the ``overrides`` (``"rl.loss=..."`` strings) and a one-line ``about``."""
  name: str
  overrides: tuple
  about: str = ""

  def __post_init__(self):
    if not isinstance(self.name, str) or not self.name or "/" in self.name or self.name.startswith(("_", ".")):
      raise ValueError(f"arena entry name {self.name!r}: must be a non-empty name without '/' that does not start "
                       "with '_' or '.' (it names a directory)")
    bad = [o for o in self.overrides if not isinstance(o, str) or "=" not in o]
    if bad:
      raise ValueError(f"arena entry {self.name!r}: overrides must be 'key=value' strings, got {bad}")


def recipe_overrides(**slots) -> tuple:
  """``("rl.rewards=", ..., "rl.advantage=...", ...)``: every recipe field, ``slots`` over GRPO-without-KL's.

  Other ``rl`` fields of the recipe (``critic_shared``, ``critic_coef``, ``critic_lr``) are given with their
  ``rl.`` key in ``slots`` too (``critic_lr=1e-3``)."""
  unknown = [k for k in slots if k not in _RECIPE_DEFAULTS and k not in ("critic_shared", "critic_coef", "critic_lr")]
  if unknown:
    raise ValueError(f"recipe_overrides: unknown recipe field(s) {unknown}; known: {sorted(_RECIPE_DEFAULTS)}")
  values = {**_RECIPE_DEFAULTS, **slots}
  return tuple(f"rl.{k}={v}" for k, v in values.items())


def _e(name, about, **slots) -> Entry:
  return Entry(name, recipe_overrides(**slots), about)


_KL = "kl_penalty(beta=0.04, estimator='k3')"
_ENTRIES = (
    _e("grpo", "GRPO (DeepSeekMath): group-normalised advantage, PPO clip 0.2, sequence mean, KL k3 0.04 "
       "(configs/recipes.py grpo)",
       loss=f"ppo_clip(eps_low=0.2, eps_high=0.2), {_KL}", aggregation="seq_mean_token_mean"),
    _e("dr_grpo", "Dr.GRPO: mean-only advantage, constant normaliser B*L_max (configs/recipes.py dr_grpo)",
       advantage="dr_grpo", aggregation="seq_mean_token_sum_norm"),
    _e("dapo", "DAPO: clip-higher 0.28, token mean, dynamic sampling with refills, overlong shaping, no KL "
       "(configs/recipes.py dapo)",
       shaping="overlong_penalty(buffer_len=2)", filters="zero_variance(refill=True)",
       loss="ppo_clip(eps_low=0.2, eps_high=0.28)"),
    _e("gspo", "GSPO: clipped sequence-level ratio (3e-4/4e-4), sequence mean (configs/recipes.py gspo)",
       loss="gspo(eps_low=0.0003, eps_high=0.0004)", aggregation="seq_mean_token_mean"),
    _e("gmpo", "GMPO: geometric mean of sign-clipped token ratios (eps 0.4, the authors' script), sequence mean",
       loss="gmpo(eps_low=0.4, eps_high=0.4)", aggregation="seq_mean_token_mean"),
    _e("cispo", "CISPO (MiniMax-M1): clipped detached IS weight, cap 1+4, token mean (configs/recipes.py cispo)",
       loss="cispo(eps_high=4.0)"),
    _e("sapo", "SAPO: soft sigmoid gate instead of a clip (tau+ 1.0, tau- 1.05), sequence mean as verl",
       loss="sapo(tau_pos=1.0, tau_neg=1.05)", aggregation="seq_mean_token_mean"),
    _e("rloo", "RLOO: leave-one-out baseline, PPO clip 0.2, token mean", advantage="rloo"),
    _e("reinforce_pp", "REINFORCE++ (baseline variant): group-mean baseline then batch whitening, PPO clip 0.2",
       advantage="reinforce_pp_baseline"),
    _e("ppo_gae", "PPO with a critic: GAE (gamma=lambda=1, whitened), a separate value model with clipped value "
       "loss 0.2, PPO clip 0.2", advantage="gae", critic="value_loss(clip_eps=0.2)"),
    _e("qae", "QAE: group K-quantile baseline, K=0.8 (the arena's choice for the ~80%-zero-advantage claim; the "
       "catalog default is 0.5)", advantage="qae(quantile=0.8)"),
    _e("passk", "Pass@k training: analytic pass@k advantage, k=4 of the group of 8 (our choice; the paper "
       "sweeps k)", advantage="passk(k=4)"),
    _e("rank", "rank advantage: centred within-group mid-ranks in [-1, 1] (our interpretation of the abstract)",
       advantage="rank"),
    _e("erc", "ERC: entropy-ratio clipping around PPO clip, bounds 0.95/1.05 (released recipe)",
       loss="erc(ppo_clip(eps_low=0.2, eps_high=0.2))"),
    _e("clip_cov", "Clip-Cov: PPO clip with the top-covariance tokens' gradient dropped (ratio 2e-4, bounds 1/5)",
       loss="clip_cov"),
    _e("kl_cov", "KL-Cov: a KL penalty on the top-covariance tokens (ratio 2e-4, coef 1)", loss="kl_cov"),
    _e("entropic", "EntroPIC: PI control of the positive/negative loss weights to a target entropy 0.1 "
       "(run_entropic.sh's; Kp 1, Ki 0.01)", controllers="entropic(target_entropy=0.1)"),
    _e("bapo", "BAPO: adaptive clip bounds keeping the positive share of the loss >= 0.5 (README rule)",
       controllers="bapo"),
    _e("grpo_lambda", "GRPO-lambda: length penalty inside the top-lambda (0.5) groups by accuracy",
       shaping="grpo_lambda"),
    _e("greso", "GRESO: pre-rollout skipping of prompts predicted to be all-correct or all-wrong (authors' "
       "defaults)", prompt_filters="greso"),
    _e("cpgd", "CPGD: clipped log-ratio policy drift, drift coef 0.1 (catalog default; siiRL scripts 0.001)",
       loss="cpgd"),
    _e("pspo", "PSPO: probability-smoothed ratio, alpha 0.1", loss="pspo(alpha=0.1)"),
    _e("gft", "GFT: dynamic-coefficient-rectified NLL on the samples, weighted by the group advantages "
       "(tau 0.1; the authors' Group Advantage Learning loss)", loss="gft(tau=0.1, use_advantages=True)"),
    _e("grpo_nokl", "GRPO without the KL term: PPO clip 0.2, token mean (the baseline the entropy, objective and "
       "advantage entries change one thing of)"),
    _e("entropic_h04", "EntroPIC with the target entropy at the SFT policy's (0.4 nats per token on the arena task; "
       "the authors' 0.1 is below where our small model starts)", controllers="entropic(target_entropy=0.4)"),
    _e("length_penalty", "a naive group-relative length reward (Kimi k1.5 form) added to the correctness reward: "
       "the collapse GRPO-lambda claims to avoid", shaping="length_penalty"),
)
_GRPO = dict(loss=f"ppo_clip(eps_low=0.2, eps_high=0.2), {_KL}", aggregation="seq_mean_token_mean")
_BF16 = ("rl.sampler_dtype=bfloat16",)
_MOE = ("model.num_experts=4", "model.num_experts_per_tok=2")
_AHEAD = ("rl.rollout_ahead=true",)
_ASYNC2 = ("rl.async_staleness=2",)


def _grpo_with(name, about, extra=(), **slots) -> Entry:
  """The ``grpo`` entry's recipe (``slots`` replace its fields) plus non-recipe ``extra`` overrides."""
  return Entry(name, recipe_overrides(**{**_GRPO, **slots}) + tuple(extra), about)


# The claims experiments' own entries (issue #18 item 4): each changes one thing against ``grpo`` (or ``moe``).
_CLAIM_ENTRIES = (
    _grpo_with("bf16_sampler", "GRPO with the rollout sampler in bfloat16 (trainer float32), no correction", _BF16),
    _grpo_with("bf16_tis", "bfloat16 sampler, token TIS (cap 2) on the PPO loss", _BF16,
               loss=f"ppo_clip(eps_low=0.2, eps_high=0.2, correction=tis(threshold=2.0)), {_KL}"),
    _grpo_with("bf16_mis", "bfloat16 sampler, token MIS (keep ratios in [0.5, 2])", _BF16,
               loss=f"ppo_clip(eps_low=0.2, eps_high=0.2, correction=mis(lower=0.5, upper=2.0)), {_KL}"),
    _grpo_with("bf16_icepop", "bfloat16 sampler, IcePop (keep ratios in [0.5, 5])", _BF16,
               loss=f"ppo_clip(eps_low=0.2, eps_high=0.2, correction=icepop(alpha=0.5, beta=5.0)), {_KL}"),
    _grpo_with("moe", "GRPO on a toy MoE (4 experts, top-2 in every layer), float32 sampler", _MOE),
    _grpo_with("moe_bf16", "toy MoE, bfloat16 sampler, no routing replay", _MOE + _BF16),
    _grpo_with("moe_bf16_r3", "toy MoE, bfloat16 sampler, rollout routing replay (R3)",
               _MOE + _BF16 + ("rl.routing_replay=true",)),
    _grpo_with("stale_ppo", "one-step-off-policy rollouts; PPO's ratio against the stale behaviour policy", _AHEAD,
               loss=f"ppo_clip(eps_low=0.2, eps_high=0.2, old_logp='logp_behavior'), {_KL}"),
    _grpo_with("stale_decoupled", "one-step-off-policy rollouts; decoupled PPO (proximal policy recomputed, "
               "behaviour weight)", _AHEAD, loss=f"decoupled_ppo(eps_low=0.2, eps_high=0.2), {_KL}"),
    _grpo_with("async_ppo", "the asynchronous runner, tokens up to 2 policy versions old (eta 2, partial "
               "rollouts); PPO's ratio against the stale behaviour policy", _ASYNC2,
               loss=f"ppo_clip(eps_low=0.2, eps_high=0.2, old_logp='logp_behavior'), {_KL}"),
    _grpo_with("async_decoupled", "the asynchronous runner with eta 2; decoupled PPO (proximal policy recomputed, "
               "behaviour weight)", _ASYNC2, loss=f"decoupled_ppo(eps_low=0.2, eps_high=0.2), {_KL}"),
)
# The entropy claims with two updates per batch (``rl.updates_per_batch=2``: mu = 2, TRL's num_iterations, verl's
# ppo_epochs): at one update per batch the proximal inputs are the update's own, so ERC's entropy ratio is exactly
# 1 and Clip-Cov / KL-Cov change the gradient of at most k = max(floor(2e-4 N), 1) tokens
# (tests/test_objectives_entropy.py); the second update sees a moved policy. Base: GRPO without KL.
_MU2 = ("rl.updates_per_batch=2",)
_ENTROPY_MU2 = tuple(
    Entry(f"{name}_mu2", recipe_overrides(**slots) + _MU2, f"{about}; two updates per batch")
    for name, about, slots in (
        ("grpo_nokl", "GRPO without the KL term", {}),
        ("erc", "ERC around PPO clip, bounds 0.95/1.05", {"loss": "erc(ppo_clip(eps_low=0.2, eps_high=0.2))"}),
        ("clip_cov", "Clip-Cov (ratio 2e-4, bounds 1/5)", {"loss": "clip_cov"}),
        ("kl_cov", "KL-Cov (ratio 2e-4, coef 1)", {"loss": "kl_cov"}),
        ("entropic", "EntroPIC, target entropy 0.1", {"controllers": "entropic(target_entropy=0.1)"})))
# The staleness claim with two updates per batch: at one update per batch decoupled PPO's proximal policy is the
# update's own forward, so its ratio is exactly 1, its clip never binds and it is the behaviour-weighted policy
# gradient with no trust region (tests/test_objectives_ratio.py); AReaL updates on several minibatches per batch,
# whose later ones see a moved policy. Base: GRPO (with KL) at two updates per batch.
_STALENESS_MU2 = tuple(
    _grpo_with(f"{name}_mu2", f"{about}; two updates per batch", extra + _MU2, **slots)
    for name, about, extra, slots in (
        ("grpo", "GRPO (synchronous)", (), {}),
        ("stale_ppo", "one-step-off-policy rollouts; PPO's ratio against the stale behaviour policy", _AHEAD,
         {"loss": f"ppo_clip(eps_low=0.2, eps_high=0.2, old_logp='logp_behavior'), {_KL}"}),
        ("stale_decoupled", "one-step-off-policy rollouts; decoupled PPO", _AHEAD,
         {"loss": f"decoupled_ppo(eps_low=0.2, eps_high=0.2), {_KL}"})))
ENTRIES: Mapping[str, Entry] = {e.name: e for e in _ENTRIES + _CLAIM_ENTRIES + _ENTROPY_MU2 + _STALENESS_MU2}

# Named groups of entries (``rljax arena --experiment NAME``): the seeds' claims (issue #18, item 4).
EXPERIMENTS: Mapping[str, tuple] = {
    "default": tuple(e.name for e in _ENTRIES),
    "entropy": ("grpo_nokl", "grpo", "erc", "clip_cov", "kl_cov", "entropic", "entropic_h04"),
    "entropy_mu2": tuple(e.name for e in _ENTROPY_MU2),
    "qae": ("grpo", "qae"),
    "passk": ("grpo", "passk"),
    "length": ("grpo", "grpo_lambda", "length_penalty"),
    "objectives": ("grpo", "dr_grpo", "dapo", "gspo", "gmpo", "cispo", "sapo", "cpgd", "pspo", "gft"),
    "advantages": ("grpo", "rloo", "reinforce_pp", "ppo_gae", "qae", "passk", "rank"),
    "mismatch": ("grpo", "bf16_sampler", "bf16_tis", "bf16_mis", "bf16_icepop"),
    "routing_replay": ("moe", "moe_bf16", "moe_bf16_r3"),
    "staleness": ("grpo", "stale_ppo", "stale_decoupled"),
    "staleness_async": ("grpo", "stale_ppo", "stale_decoupled", "async_ppo", "async_decoupled"),
    "staleness_mu2": tuple(e.name for e in _STALENESS_MU2),
    "claims": ("bf16_sampler", "bf16_tis", "bf16_mis", "bf16_icepop", "moe", "moe_bf16", "moe_bf16_r3", "stale_ppo",
               "stale_decoupled", "async_ppo", "async_decoupled"),
}


def select_entries(names: Sequence[str] = (), experiment: str | None = None,
                   entries: Mapping[str, Entry] | None = None,
                   experiments: Mapping[str, Sequence[str]] | None = None) -> list[Entry]:
  """The entries to run: ``names`` (entry names), or the experiment ``experiment``, or (neither) the ``default`` experiment (with your own ``entries``: all of them).

  Raises ``ValueError`` listing the known names for an unknown entry or experiment, or when both are given."""
  own_pool = entries is None  # the built-in entries: no names means the "default" experiment (not the claims')
  entries = ENTRIES if entries is None else entries
  experiments = EXPERIMENTS if experiments is None else experiments
  if names and experiment:
    raise ValueError("give entry names (--recipes) or an experiment (--experiment), not both")
  if experiment is not None:
    if experiment not in experiments:
      raise ValueError(f"unknown arena experiment {experiment!r}; known: {', '.join(experiments)}")
    names = experiments[experiment]
  names = list(names) if names else list(experiments["default"] if own_pool and "default" in experiments else entries)
  unknown = [n for n in names if n not in entries]
  if unknown:
    raise ValueError(f"unknown arena entr{'y' if len(unknown) == 1 else 'ies'} {', '.join(map(repr, unknown))}; "
                     f"known: {', '.join(entries)}")
  dupes = sorted({n for n in names if names.count(n) > 1})
  if dupes:
    raise ValueError(f"arena entries named twice: {', '.join(dupes)}")
  return [entries[n] for n in names]
