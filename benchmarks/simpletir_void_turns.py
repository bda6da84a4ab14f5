"""SimpleTIR void-turn filtering on the tool countdown: GRPO with and without ``void_turn``, per-row gradients.

SimpleTIR (000_3e503271be254a43.txt L27): tool feedback drifts the model's input distribution, the turns after it
hold low-probability tokens, these give large gradients, and the gradient norm explodes; filtering out the
trajectories with a *void turn* (neither a code block nor an answer) blocks those gradients. This script measures
the mechanism directly and the batch gradient norm with and without the filter, on ``configs/tool_countdown.py``:

1. the demo's SFT warm start (``--sft-from`` a finished ``rljax train --config tool_countdown`` run with the same
   task settings, or its SFT run here; ``--model`` picks the demo's 2-layer d=64 model or a 4-layer d=128 one);
   by default (``RL_SET``) episodes have up to 3 turns and observations up to 96 tokens, so that a void turn's
   reminder fits and the episode goes on, and the loss is a token sum, sampled at temperature 1 (the paper's);
2. two GRPO runs from it (``sft.init_from``), same seed and settings: ``rl.filters`` empty, and
   ``void_turn(**rljax.envs.VOID_TURN_PATTERNS)`` (the environment's own definition of a void turn);
3. before each update, a per-row probe on the step's batch (both runs): the gradient of each row's share of the
   batch loss (the batch's loss with every other row masked, the batch's own denominator, so the rows' gradients
   sum to the batch gradient; checked against ``train/grad_norm``), the row's lowest and mean log-prob over its
   model tokens under the current policy (temperature 1), and whether the environment's definition calls one of
   its turns void. From the same per-row gradients: the norm of the batch gradient without the void rows,
   renormalised by their denominator (the gradient the filter would have given on this very batch);
4. a PNG (``--figure``): per-row gradient norms and lowest log-probs of void and other rows (the unfiltered run),
   and the batch gradient norm per step of both runs with the same-batch counterfactual.

    PYTHONPATH=. python benchmarks/simpletir_void_turns.py --out runs/simpletir \\
        --figure docs/figures/simpletir_grad_norm.png [--sft-from DIR] [--set key=value ...]

About 20 minutes on the shared 2-core CPU (SFT 300 steps, then 25 RL steps per run). Prints one line per run
(gradient norm median / max, void share, accuracy) and the per-row split. The runs' directories keep
``metrics.jsonl`` and the probe's ``rows.jsonl``; ``--plot-only`` redraws from them.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

ARMS = (("no filter", ""), ("void_turn filter", "void_turn"))
# the demo config's settings, pinned here so that the figure does not move with later tuning of the demo
SETTINGS = ("task.max_turns=2", "task.max_obs_tokens=32", "task.demo_tool_prob=0.4", "sft.steps=300",
            "rl.num_prompts=4", "rl.group_size=8", "rl.max_new_tokens=100", "rl.optim.learning_rate=2e-4",
            "checkpoint.every=50")
# the setting of the figure (docs/agents.md): the paper's sampling temperature, a token-sum loss (no length
# normalisation), room for the void-turn reminder (96 tokens) so that an episode goes on after a void turn
RL_SET = ("rl.aggregation=token_sum", "task.max_turns=3", "task.max_obs_tokens=96", "rl.max_new_tokens=80")
MODELS = {"small": (), "large": ("model.num_layers=4", "model.hidden_size=128", "model.intermediate_size=512",
                                 "sft.optim.learning_rate=2e-3")}


def _filter_spec(name):
  if not name:
    return ""
  from rljax.envs import VOID_TURN_PATTERNS  # pylint: disable=import-outside-toplevel
  return f"{name}({', '.join(f'{k}={v!r}' for k, v in VOID_TURN_PATTERNS.items())})"


def _config(out_dir, overrides):
  from rljax._config_files import load_config  # pylint: disable=import-outside-toplevel
  from rljax.train._config import apply_overrides  # pylint: disable=import-outside-toplevel
  return apply_overrides(load_config("tool_countdown"), [f"out_dir={out_dir}", *SETTINGS, *overrides])


def _read(path):
  return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


def _rl_rows(run_dir):
  return [r for r in _read(os.path.join(run_dir, "metrics.jsonl")) if r.get("stage") == "rl" and "train/grad_norm" in r]


# ----------------------------------------------------------------------------- the per-row probe


def row_probe(graphdef, loss_fn):
  """``probe(params, model_state, batch, hparams, model_mask [B, T], keep [K, B]) -> (row_norms [B],
  kept_norms [K], min_logp [B], mean_logp [B], denominator)``, jitted.

  Row ``i``'s gradient ``g_i = grad L(batch with loss_mask zero outside row i; the batch's denominator D)``, so
  ``sum_i g_i`` is the batch gradient for an objective that sums over rows (GRPO, token_mean or token_sum).
  ``kept_norms[k] = |sum_{keep[k]} g_i| * D / D_k`` with ``D_k`` the denominator of the kept rows alone: the
  gradient of the batch that a filter keeping those rows would train on (same advantages). The log-probs are the
  current policy's (``loss_fn``'s temperature) over ``model_mask`` (+inf / 0 for a row without model tokens).
  """
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  import optax  # pylint: disable=import-outside-toplevel
  from flax import nnx  # pylint: disable=import-outside-toplevel

  def row_loss(params, model_state, row, hparams, denominator):
    model = nnx.merge(graphdef, params, model_state)
    loss, _ = loss_fn(model, row, hparams, denominator)
    return loss

  def row_logp(params, model_state, row):
    return loss_fn._outputs(nnx.merge(graphdef, params, model_state), row).logp  # pylint: disable=protected-access

  @jax.jit
  def probe(params, model_state, batch, hparams, model_mask, keep):
    b = batch.tokens.shape[0]
    denominator = loss_fn.denominator(batch, hparams)

    def one(i):
      row = jax.tree_util.tree_map(lambda x: jax.lax.dynamic_slice_in_dim(x, i, 1, 0)
                                   if getattr(x, "ndim", 0) >= 1 and x.shape[0] == b else x, batch)
      g = jax.grad(row_loss)(params, model_state, row, hparams, denominator)
      return jax.tree_util.tree_map(lambda a: a.astype(jnp.float32), g), row_logp(params, model_state, row)[0]

    grads, logp = jax.lax.map(one, jnp.arange(b))
    row_norms = jax.vmap(optax.tree.norm)(grads)

    def kept(m):
      m = m.astype(jnp.float32)
      d_k = loss_fn.denominator(batch.replace(loss_mask=batch.loss_mask * m[:, None]), hparams)
      total = jax.tree_util.tree_map(lambda g: jnp.tensordot(m, g, 1), grads)
      return optax.tree.norm(total) * denominator / jnp.maximum(d_k, 1e-9)

    kept_norms = jnp.stack([kept(keep[k]) for k in range(keep.shape[0])])
    min_logp = jnp.min(jnp.where(model_mask, logp, jnp.inf), axis=1)
    mean_logp = jnp.sum(jnp.where(model_mask, logp, 0.0), 1) / jnp.maximum(model_mask.sum(1), 1)
    return row_norms, kept_norms, min_logp, mean_logp, denominator

  return probe


def install_probe(path):
  """Wraps ``RLLoop.step`` (keeps the collected rows' turns and model masks) and ``RLLoop.update`` (runs the
  probe on the batch before the update, appends one JSON line per step to ``path``). Returns ``restore()``."""
  import jax  # pylint: disable=import-outside-toplevel
  from rljax.envs import is_void_turn  # pylint: disable=import-outside-toplevel
  from rljax.train import _rl  # pylint: disable=import-outside-toplevel
  from rljax.train._step import objective_loss  # pylint: disable=import-outside-toplevel
  step0, update0 = _rl.RLLoop.step, _rl.RLLoop.update

  def step(self, s, collected):
    data = collected[0]
    self.probe_rows = {"void": np.asarray([any(is_void_turn(t) for t in (turns or ())) for turns in data.turns]),
                       "model_mask": np.asarray(data.completion_mask, bool), "rewards": np.asarray(data.rewards)}
    return step0(self, s, collected)

  def update(self, batch, s):
    if not hasattr(self, "probe_fn"):
      self.probe_fn = row_probe(self.graphdef, objective_loss(self.recipe.objective_builder(), temperature=1.0))
    rows = self.probe_rows
    void, mm = rows["void"], rows["model_mask"]
    keep = np.stack([np.ones_like(void), ~void])
    norms, kept, min_logp, mean_logp, den = jax.device_get(self.probe_fn(
        self.state.params, self.state.model_state, batch, self.state.hparams, mm, keep))
    lm = np.asarray(batch.loss_mask, bool)
    adv = np.where(lm, np.asarray(batch.advantages), 0.0).sum(1) / np.maximum(lm.sum(1), 1)
    rec = {"step": s + 1, "denominator": float(den), "void": void.tolist(), "trained": lm.any(1).tolist(),
           "row_grad_norm": norms.tolist(), "min_logp": np.where(np.isfinite(min_logp), min_logp, 0.0).tolist(),
           "mean_logp": mean_logp.tolist(), "model_tokens": mm.sum(1).tolist(), "loss_tokens": lm.sum(1).tolist(),
           "advantage": adv.tolist(), "rewards": rows["rewards"].tolist(), "batch_norm": float(kept[0]),
           "batch_norm_without_void": float(kept[1])}
    with open(path, "a", encoding="utf-8") as f:
      f.write(json.dumps(rec) + "\n")
    return update0(self, batch, s)

  _rl.RLLoop.step, _rl.RLLoop.update = step, update

  def restore():
    _rl.RLLoop.step, _rl.RLLoop.update = step0, update0
  return restore


# ----------------------------------------------------------------------------- runs


def run(out, *, sft_from, model, steps, seed, overrides):
  from rljax.train import train  # pylint: disable=import-outside-toplevel
  sft_dir = sft_from or os.path.join(out, "sft")
  if not sft_from:
    t0 = time.time()
    task = [o for o in overrides if o.startswith("task.")]  # a warm start keeps its task (sft.init_from checks)
    train(_config(sft_dir, ["rl.steps=0", f"seed={seed}", *MODELS[model], *task]), overwrite=True)
    print(f"SFT: {time.time() - t0:.0f} s")
  for i, (name, spec) in enumerate(ARMS):
    t0 = time.time()
    arm = os.path.join(out, f"arm{i}")
    os.makedirs(arm, exist_ok=True)
    if os.path.exists(os.path.join(arm, "rows.jsonl")):
      os.remove(os.path.join(arm, "rows.jsonl"))
    restore = install_probe(os.path.join(arm, "rows.jsonl"))
    try:
      train(_config(arm, [*MODELS[model], f"sft.init_from={sft_dir}", f"rl.steps={steps}",
                          f"rl.filters={_filter_spec(spec)}", "eval.every=0", "eval.num_problems=16",
                          "eval.batch_size=16", f"seed={seed}", *overrides]), overwrite=True)
    finally:
      restore()
    print(f"{name}: {time.time() - t0:.0f} s")


def _cat(recs, key):
  return np.concatenate([np.asarray(r[key], float) for r in recs]) if recs else np.zeros(0)


def summary(out):
  """Per run: the metrics' and the probe's numbers (also the figure's)."""
  res = []
  for i, (name, _) in enumerate(ARMS):
    rows, recs = _rl_rows(os.path.join(out, f"arm{i}")), _read(os.path.join(out, f"arm{i}", "rows.jsonl"))
    gn = np.array([r["train/grad_norm"] for r in rows])
    probe_sum = np.array([r["batch_norm"] for r in recs])
    void, g = _cat(recs, "void").astype(bool), _cat(recs, "row_grad_norm")
    r = {"name": name, "steps": [r["step"] for r in rows], "grad_norm": gn, "probe_sum": probe_sum,
         "without_void": np.array([r["batch_norm_without_void"] for r in recs]), "void": void, "row_grad": g,
         "min_logp": _cat(recs, "min_logp"), "tokens": _cat(recs, "model_tokens"),
         "void_share": np.array([np.mean(r["void"]) for r in recs]),
         "accuracy": np.nanmean([r.get("rollout/accuracy", np.nan) for r in rows])}
    nz = g > 0
    print(f"{name}: {len(rows)} steps, grad norm median {np.median(gn):.3f} max {gn.max():.3f} "
          f"(max/median {gn.max() / np.median(gn):.1f}), |probe sum - grad norm| <= "
          f"{np.max(np.abs(probe_sum - gn)):.1e}, "
          f"rows with a void turn {void.mean():.1%}, rollout accuracy {r['accuracy']:.1%}")
    if i == 0:
      wv = r["without_void"]
      print(f"  same batches without the void rows: median {np.median(wv):.3f} max {wv.max():.3f}")
    for label, sel in (("void rows", void), ("other rows", ~void)):
      if sel.any():
        s2 = sel & nz
        med = f"{np.median(g[s2]):.4f}" if s2.any() else "-"
        print(f"  {label}: {sel.sum()} ({s2.sum()} with a gradient), row gradient norm median {med} max "
              f"{g[sel].max():.4f}, lowest log-prob median {np.median(r['min_logp'][sel]):.2f}, "
              f"model tokens median {np.median(r['tokens'][sel]):.0f}")
    res.append(r)
  return res


def plot(out, figure, title):
  from matplotlib.backends.backend_agg import FigureCanvasAgg  # pylint: disable=import-outside-toplevel
  from matplotlib.figure import Figure  # pylint: disable=import-outside-toplevel
  res = summary(out)
  fig = Figure(figsize=(14, 3.9))
  FigureCanvasAgg(fig)
  ax_r, ax_l, ax_g = fig.subplots(1, 3)
  base = res[0]
  nz = base["row_grad"] > 0
  bins = np.geomspace(max(base["row_grad"][nz].min(), 1e-5), base["row_grad"].max() * 1.01, 30) if nz.any() else 10
  for label, sel, color in (("rows with a void turn", base["void"], "C3"), ("other rows", ~base["void"], "C0")):
    ax_r.hist(base["row_grad"][sel & nz], bins=bins, alpha=0.55, color=color, label=f"{label} ({(sel & nz).sum()})")
    ax_l.hist(base["min_logp"][sel], bins=30, alpha=0.55, color=color, label=f"{label} ({sel.sum()})")
  ax_r.set_xscale("log")
  ax_r.set_title("per-row gradient norm (no filter, rows with A != 0)")
  ax_r.set_xlabel("|g_i| (the row's share of the batch gradient)")
  ax_l.set_title("lowest token log-prob per row (no filter)")
  ax_l.set_xlabel("min_t log pi(y_t) over the row's model tokens")
  for r, color in zip(res, ("C0", "C1")):
    ax_g.plot(r["steps"], r["grad_norm"], marker="o", ms=3, color=color, label=f"{r['name']} (its own run)")
  ax_g.plot(base["steps"], base["without_void"], ls="--", color="C2",
            label="no-filter run's batches without their void rows")
  ax_g.set_title("batch gradient norm per GRPO step (pre-clip)")
  ax_g.set_xlabel("RL step")
  for ax in (ax_r, ax_l, ax_g):
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
  fig.suptitle(title, fontsize=10)
  fig.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(figure)), exist_ok=True)
  fig.savefig(figure, dpi=90)
  print(f"wrote {figure}")


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--out", default="runs/simpletir")
  ap.add_argument("--figure", default="docs/figures/simpletir_grad_norm.png")
  ap.add_argument("--sft-from", default=None, help="a finished tool_countdown run whose SFT to start from")
  ap.add_argument("--model", choices=sorted(MODELS), default="small")
  ap.add_argument("--steps", type=int, default=25)
  ap.add_argument("--temperature", type=float, default=1.0)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--set", nargs="*", default=list(RL_SET),
                  help="config overrides for both RL runs (key=value; task.* ones also for the SFT run)")
  ap.add_argument("--plot-only", action="store_true")
  a = ap.parse_args()
  if not a.plot_only:
    run(a.out, sft_from=a.sft_from, model=a.model, steps=a.steps, seed=a.seed,
        overrides=[f"rl.temperature={a.temperature}", *a.set])
  plot(a.out, a.figure, f"SimpleTIR void-turn filtering, tool countdown ({a.model} model, the demo's SFT, "
                        f"T={a.temperature}, {' '.join(a.set)})")


if __name__ == "__main__":
  main()
