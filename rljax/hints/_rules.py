"""Pure rules of the hinted (off-context) rollouts: which groups get a hint, the hint texts, and the row that
trains on a hinted sample (host NumPy; no state, no randomness).

A hinted sample ``y ~ pi(. | x + h)`` is trained as a row of the *unhinted* prompt ``x`` followed by ``y``
(``unhinted_rows``): the forwards of the RL step (``logp_old``, the update's ``logp``) are then
``log pi(y_t | x, y_<t)``, and the row keeps the hinted sampler's log-probs ``log pi_old(y_t | x + h, y_<t)`` as
its behaviour log-probs, so the off-context ratio ``pi_theta(y | x) / pi_old(y | x + h)`` is
``exp(logp - logp_behavior)``.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

__all__ = ["hint_groups", "answer_prefix", "mistakes_hint", "adhint_fraction", "hinted_prompt", "unhinted_rows",
           "replaced_rows", "check_template"]


def hint_groups(correct, valid, group_size: int, *, max_success: float = 0.0) -> np.ndarray:
  """``[P]`` bool: groups whose success rate over their valid rows is ``<= max_success`` (``0``: all-failed);
  a group without a valid row is never hinted. ``correct [P g]`` (a row succeeds when ``> 0.5``), ``valid [P g]``."""
  ok = np.asarray(correct, np.float64).reshape(-1, group_size) > 0.5
  v = np.asarray(valid, bool).reshape(-1, group_size)
  n = v.sum(1)
  rate = (ok & v).sum(1) / np.maximum(n, 1)
  return (n > 0) & (rate <= max_success + 1e-12)


def answer_prefix(answer: str, fraction: float) -> str:
  """The first ``ceil(fraction * len(answer))`` characters of the reference answer (``fraction=1``: all of it)."""
  return answer[:int(math.ceil(fraction * len(answer) - 1e-9))]


def mistakes_hint(keys: Sequence[str], *, max_mistakes: int) -> str:
  """LTE's hint from the group's own wrong answers: the distinct non-empty answer keys in order of first
  appearance, at most ``max_mistakes``, joined by ``", "`` ("" when there is none)."""
  seen: list = []
  for k in keys:
    if k and k not in seen:
      seen.append(k)
  return ", ".join(seen[:max_mistakes])


def adhint_fraction(success_rate: float, *, min_fraction: float, max_fraction: float) -> float:
  """ADHint's hint ratio from the difficulty prior ``d = 1 - p`` (``p``: the group's success rate):
  ``min_fraction + (max_fraction - min_fraction) d`` (harder groups get longer hints)."""
  return min_fraction + (max_fraction - min_fraction) * (1.0 - float(success_rate))


def check_template(template: str) -> str:
  if not isinstance(template, str) or "{hint}" not in template or "{prompt}" not in template:
    raise ValueError(f"template must be a str with the fields {{hint}} and {{prompt}}, got {template!r}")
  return template


def hinted_prompt(template: str, prompt: str, hint: str) -> str:
  """The prompt the hinted samples are drawn from (only for sampling: the trained row has ``prompt``)."""
  return template.replace("{hint}", hint).replace("{prompt}", prompt)


def unhinted_rows(tokens, prompt_mask, h_tokens, h_completion_mask, h_logp, h_entropy: Optional[np.ndarray] = None,
                  *, pad_id: int = 0):
  """Rows of the unhinted prompts followed by the hinted samples' completions.

  Args:
    tokens, prompt_mask: ``[B, T]`` the unhinted rows whose prompts are kept (row ``i`` gives the prompt of
      hinted sample ``i``); the completion starts right after the last prompt token.
    h_tokens, h_completion_mask, h_logp, h_entropy: ``[B, T_h]`` the hinted rollout (its own prompt width).
  Returns:
    ``(tokens, prompt_mask, completion_mask, logp_behavior, entropy_behavior)`` ``[B, T]``: the completion
    tokens and their sampler log-probs (and entropies) moved to the unhinted row's completion positions.
  Raises ValueError when a completion does not fit in ``T``.
  """
  tokens, pm = np.asarray(tokens), np.asarray(prompt_mask, bool)
  b, t = tokens.shape
  out_tok = np.where(pm, tokens, pad_id).astype(tokens.dtype)
  out_cm = np.zeros((b, t), bool)
  out_lp = np.zeros((b, t), np.float32)
  out_ent = None if h_entropy is None else np.zeros((b, t), np.float32)
  hcm = np.asarray(h_completion_mask, bool)
  for i in range(b):
    start = int(np.flatnonzero(pm[i]).max()) + 1 if pm[i].any() else 0
    src = np.flatnonzero(hcm[i])
    if start + src.size > t:
      raise ValueError(f"hinted row {i}: a completion of {src.size} tokens does not fit after a prompt of "
                       f"{start} positions in width {t}")
    dst = np.arange(start, start + src.size)
    out_tok[i, dst] = np.asarray(h_tokens)[i, src]
    out_cm[i, dst] = True
    out_lp[i, dst] = np.asarray(h_logp, np.float32)[i, src]
    if out_ent is not None:
      out_ent[i, dst] = np.asarray(h_entropy, np.float32)[i, src]
  return out_tok, pm.copy(), out_cm, out_lp, out_ent


def replaced_rows(correct, valid, group_size: int, take) -> tuple:
  """Which rows take which hinted samples: in group ``p`` the last ``take[p]`` failed valid rows take the
  hinted samples ``p g, p g + 1, ...`` (of a hinted rollout of ``g`` samples per prompt).

  Returns ``(rows [K], hinted [K])`` int64 (``K = sum(min(take, #failed))``)."""
  ok = np.asarray(correct, np.float64) > 0.5
  v = np.asarray(valid, bool)
  rows, hinted = [], []
  for p, k in enumerate(np.asarray(take, np.int64)):
    r = np.arange(p * group_size, (p + 1) * group_size)
    failed = r[v[r] & ~ok[r]]
    chosen = failed[failed.size - min(int(k), failed.size):] if k > 0 else failed[:0]
    rows += chosen.tolist()
    hinted += (p * group_size + np.arange(chosen.size)).tolist()
  return np.asarray(rows, np.int64), np.asarray(hinted, np.int64)


def splice_hinted(data, drawn, take, *, pad_id: int = 0) -> tuple:
  """The hint stages' ``Replay.splice``: which rows of the round take which hinted samples, and the hinted
  samples moved behind the round's *unhinted* prompts.

  Args:
    data: the scored round (``StepData`` ``[B = P g]``): ``correct``, ``valid``, ``tokens``, ``prompt_mask``.
    drawn: the hinted rollout ``[B, T_h]`` (``g`` samples of each hinted prompt): ``tokens``,
      ``completion_mask``, ``logp_behavior``, ``entropy_behavior`` (or None).
    take: ``[P]`` int, the failed rows of group ``p`` that take hinted samples (``replaced_rows``).
  Returns:
    ``(rows [K], drawn_rows [K], rebuilt)``: row ``rows[k]`` of the round becomes row ``drawn_rows[k]`` of
    ``rebuilt`` (a dict of ``tokens``, ``prompt_mask``, ``completion_mask``, ``logp_behavior``,
    ``entropy_behavior``, each ``[B, T]``: ``unhinted_rows``).
  """
  g = data.batch_size // len(take)
  rows, drawn_rows = replaced_rows(data.correct, data.valid, g, take)
  if not rows.size:
    return rows, drawn_rows, None
  tok, pm, cm, lp, ent = unhinted_rows(data.tokens, data.prompt_mask, drawn.tokens, drawn.completion_mask,
                                       drawn.logp_behavior, drawn.entropy_behavior, pad_id=pad_id)
  return rows, drawn_rows, {"tokens": tok, "prompt_mask": pm, "completion_mask": cm, "logp_behavior": lp,
                            "entropy_behavior": ent}
