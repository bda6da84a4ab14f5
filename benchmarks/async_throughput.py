"""Throughput of the asynchronous runner under heavy-tailed response lengths (issue #21; docs/async.md).

A simulated RL task: a random-weight Llama-style model (vocab 256, hidden 128, 2 layers), batches of 8 prompts x
4 samples, and each row's response length drawn from a lognormal (median 6 tokens, sigma 1.2, capped at 64):
a row stops at its drawn length (``max_new`` per row), so a batch's longest row is typically 5-10x its median
and over a run max/median >= 8. The reward is random; the update is the RL loop's: a proximal forward
(decoupled PPO) and ``updates_per_batch`` jitted PPO-clip updates. Every schedule trains on the same batches
(prompts and drawn lengths depend only on the batch index).

Schedules, side by side in one run:
  * ``synchronous``: sample the batch (one ``generate`` call: every row decodes until the longest is done,
    as ``rljax train`` does), then update;
  * ``synchronous, chunked sampler``: the same schedule with the async runner's sampler (chunks of 32 tokens,
    finished rows leave the batch): what the sampler alone gives;
  * ``one-step ahead``: ``rl.rollout_ahead``'s schedule (``RolloutAhead``: batch k+1 sampled on a thread
    during update k, plain sampler);
  * ``async eta=1, 2, 4``: the asynchronous runner's producer (``Producer`` + ``WeightBox`` +
    ``InterruptibleSampler``, partial rollouts): batch k starts once version k - eta is published, and new
    weights reach unfinished rows between chunks.

Reported per schedule: trained completion tokens per second of wall time, the trainer's idle fraction (time
waiting for a batch / wall time), the mean token staleness, and the ratio of tokens/s to the synchronous
row. Every program is compiled before the timing (all chunk shapes), so the figures are steady-state.

  python benchmarks/async_throughput.py [--steps 16] [--curve]

``--curve`` adds the learning-curve check on the demo task (``rljax train``, shared SFT warm start):
synchronous vs ``rl.async_staleness=2``, held-out greedy accuracy against wall time.
"""
from __future__ import annotations

import argparse
import time

V, H, L, NH, D, F = 256, 128, 2, 4, 32, 512
P, G, PROMPT_LEN, M, CHUNK = 8, 4, 8, 64, 32
MEDIAN, SIGMA = 6.0, 1.2


class Bench:
  """The model, the update and the batches, shared by every schedule."""

  def __init__(self, updates_per_batch: int = 2):
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from rljax import advantages as adv_lib
    from rljax import objectives as obj
    from rljax.models import ModelConfig, Transformer, policy_outputs
    from rljax.sampling import SamplerConfig
    from rljax.train import OptimConfig, init_train_state, make_optimizer, make_train_step, objective_loss
    from rljax.types import TrainBatch

    self.jax, self.jnp, self.np, self.nnx = jax, jnp, np, nnx
    cfg = ModelConfig(vocab_size=V, hidden_size=H, num_layers=L, num_heads=NH, num_kv_heads=NH, head_dim=D,
                      intermediate_size=F)
    opt, _ = make_optimizer(OptimConfig(learning_rate=1e-4, grad_clip=1.0), 10_000)
    self.graphdef, self.state0 = init_train_state(Transformer(cfg, rngs=nnx.Rngs(0)), opt,
                                                  {"clip_low": 0.2, "clip_high": 0.2})
    loss = objective_loss(lambda hp: obj.chain(obj.ppo_clip(hp["clip_low"], hp["clip_high"]),
                                               aggregate=obj.token_mean))
    self.step = make_train_step(self.graphdef, loss, opt)
    self.scfg = SamplerConfig(max_new_tokens=M, prompt_buckets=(PROMPT_LEN,), return_entropy=False,
                              return_routing=False, pad_id=0)
    graphdef = self.graphdef
    self.proximal = jax.jit(lambda params, rest, tokens: policy_outputs(nnx.merge(graphdef, params, rest),
                                                                        tokens).logp)
    self.updates = updates_per_batch
    self.adv = adv_lib.grpo
    self.TrainBatch = TrainBatch

  def batch(self, k: int):
    """Batch ``k``'s prompts and per-row length caps (``[P*G]``), the same in every schedule."""
    np = self.np
    rng = np.random.default_rng([7, k])
    prompts = [rng.integers(2, V, size=PROMPT_LEN) for _ in range(P)]
    caps = np.clip(np.round(rng.lognormal(np.log(MEDIAN), SIGMA, size=P * G)), 1, M).astype(np.int64)
    return prompts, caps

  def plain(self, params, rest, k: int):
    """One ``generate`` call (every row decodes until the batch's longest cap), rows cut at their caps."""
    from rljax.sampling import generate  # pylint: disable=import-outside-toplevel
    np = self.np
    prompts, caps = self.batch(k)
    model = self.nnx.split(self.nnx.merge(self.graphdef, params, rest))
    ro = generate(model, prompts, config=self.scfg,
                  key=self.jax.random.PRNGKey(k), n=G, max_new_tokens=int(caps.max()), stop_tokens=None)
    cm = np.asarray(ro.completion_mask).astype(bool)
    cm &= np.cumsum(cm, 1) <= caps[:, None]
    return np.asarray(ro.tokens), cm, np.asarray(ro.logp_behavior), np.zeros(cm.shape, np.int32)

  def chunked(self, latest, k: int, stop=None):
    """The async runner's sampler (``InterruptibleSampler``) with per-row caps."""
    from rljax.train._async import InterruptibleSampler  # pylint: disable=import-outside-toplevel
    prompts, caps = self.batch(k)
    s = InterruptibleSampler(self.graphdef, latest, config=self.scfg, chunk=CHUNK, partial=True, stop_tokens=[],
                             stop=stop)
    out = s(prompts, n=G, greedy=False, temperature=1.0, key=self.jax.random.PRNGKey(k), max_new=caps)
    return out.tokens, out.completion_mask, out.logp_behavior, out.token_version

  def update(self, state, tokens, cm, logp_b, k: int):
    np, jnp = self.np, self.jnp
    rewards = jnp.asarray(np.random.default_rng([9, k]).random(P * G), jnp.float32)
    group = jnp.repeat(jnp.arange(P, dtype=jnp.int32), G)
    a, _ = self.adv(rewards, group)
    mask = jnp.asarray(cm)
    tokens = jnp.asarray(tokens)
    logp_old = self.proximal(state.params, state.model_state, tokens)  # decoupled PPO: the proximal policy
    batch = self.TrainBatch(tokens=tokens, loss_mask=mask, advantages=a[:, None] * mask, group_id=group,
                            logp_behavior=jnp.asarray(logp_b), logp_old=logp_old)
    for _ in range(self.updates):
      state, metrics = self.step(state, batch)
    self.jax.block_until_ready(metrics["loss"])
    return state

  def fresh_state(self):
    return self.jax.tree_util.tree_map(self.jnp.copy, self.state0)

  def warm_sampler(self, params, rest) -> None:
    """Compiles the chunked sampler's programs for parameters placed like ``params``: its prefills (``generate``
    returning its cache) for every bucket and batch size, and its continuations (``resume``)."""
    from rljax.sampling import generate, resume  # pylint: disable=import-outside-toplevel
    from rljax.train._async import InterruptibleSampler, Weights  # pylint: disable=import-outside-toplevel
    np, w = self.np, Weights(0, params, rest, {})
    s = InterruptibleSampler(self.graphdef, lambda: w, config=self.scfg, chunk=CHUNK, partial=True, stop_tokens=[])
    model = self.nnx.split(self.nnx.merge(self.graphdef, params, rest))
    for r in sorted({min(r, P * G) for r in (8, 16, 32)}):
      for bucket in (b for b in s.cont_config.prompt_buckets if b >= PROMPT_LEN):
        _, st = generate(model, [np.full(bucket, 3)] * r, config=s.cont_config, key=self.jax.random.PRNGKey(0),
                         n=1, max_new_tokens=1, stop_tokens=[], prompt_ids=np.arange(r), return_state=True)
      resume(model, st, None, config=s.cont_config, key=self.jax.random.PRNGKey(0), max_new_tokens=1)

  def warm_up(self) -> float:
    """Compiles every program the schedules use (all chunk shapes of the chunked sampler); returns seconds."""
    t = time.perf_counter()
    state = self.fresh_state()
    self.warm_sampler(state.params, state.model_state)
    tokens, cm, lp, _ = self.plain(state.params, state.model_state, 0)
    self.update(state, tokens, cm, lp, 0)
    return time.perf_counter() - t


def run_sync(bench: Bench, steps: int, chunked: bool) -> dict:
  from rljax.train._async import Weights  # pylint: disable=import-outside-toplevel
  state, tokens_done, idle = bench.fresh_state(), 0, 0.0
  t0 = time.perf_counter()
  for k in range(steps):
    t = time.perf_counter()
    if chunked:
      w = Weights(k, state.params, state.model_state, {})
      tok, cm, lp, _ = bench.chunked(lambda: w, k)
    else:
      tok, cm, lp, _ = bench.plain(state.params, state.model_state, k)
    idle += time.perf_counter() - t
    state = bench.update(state, tok, cm, lp, k)
    tokens_done += int(cm.sum())
  wall = time.perf_counter() - t0
  return {"wall_s": wall, "tokens": tokens_done, "idle_s": idle, "staleness": 0.0}


def run_ahead(bench: Bench, steps: int) -> dict:
  from rljax.train import RolloutAhead  # pylint: disable=import-outside-toplevel
  state, tokens_done, idle, stale = bench.fresh_state(), 0, 0.0, []
  t0 = time.perf_counter()
  with RolloutAhead() as ahead:
    for k in range(steps):
      t = time.perf_counter()
      if ahead.pending:
        tok, cm, lp, _ = ahead.result()
        stale.append(1.0)
      else:
        tok, cm, lp, _ = bench.plain(state.params, state.model_state, k)
        stale.append(0.0)
      idle += time.perf_counter() - t
      if k + 1 < steps:
        ahead.submit(bench.plain, *RolloutAhead.snapshot((state.params, state.model_state)), k + 1)
      state = bench.update(state, tok, cm, lp, k)
      tokens_done += int(cm.sum())
  wall = time.perf_counter() - t0
  return {"wall_s": wall, "tokens": tokens_done, "idle_s": idle, "staleness": sum(stale) / len(stale)}


def run_async(bench: Bench, steps: int, eta: int) -> dict:
  import threading  # pylint: disable=import-outside-toplevel
  from rljax.train import RolloutAhead  # pylint: disable=import-outside-toplevel
  from rljax.train._async import Producer, WeightBox, Weights  # pylint: disable=import-outside-toplevel
  state, tokens_done, idle, stale_sum, stale_n = bench.fresh_state(), 0, 0.0, 0.0, 0
  box, stop = WeightBox(), threading.Event()
  box.publish(Weights(0, *RolloutAhead.snapshot((state.params, state.model_state)), {}))
  t0 = time.perf_counter()
  prod = Producer(lambda k, w: bench.chunked(box.latest, k, stop), box, start=0, stop_at=steps, staleness=eta,
                  stop=stop)
  try:
    for k in range(steps):
      t = time.perf_counter()
      tok, cm, lp, version = prod.get(k)
      idle += time.perf_counter() - t
      assert (k - version[cm]).max(initial=0) <= eta
      stale_sum += float((k - version[cm]).sum())
      stale_n += int(cm.sum())
      state = bench.update(state, tok, cm, lp, k)
      box.publish(Weights(k + 1, *RolloutAhead.snapshot((state.params, state.model_state)), {}))
      tokens_done += int(cm.sum())
  finally:
    prod.close()
  wall = time.perf_counter() - t0
  return {"wall_s": wall, "tokens": tokens_done, "idle_s": idle, "staleness": stale_sum / max(stale_n, 1)}


def throughput(steps: int, updates: int) -> None:
  import numpy as np  # pylint: disable=import-outside-toplevel
  bench = Bench(updates)
  caps = np.concatenate([bench.batch(k)[1] for k in range(steps)])
  per_batch = [bench.batch(k)[1] for k in range(steps)]
  print(f"lengths: median {np.median(caps):.0f}, max {caps.max()}, max/median {caps.max() / np.median(caps):.1f}; "
        f"per batch max/median {np.median([c.max() / np.median(c) for c in per_batch]):.1f} (median over batches)")
  print(f"warm-up (compiling every program): {bench.warm_up():.1f} s")
  runs = [("synchronous", lambda: run_sync(bench, steps, chunked=False)),
          ("synchronous, chunked sampler", lambda: run_sync(bench, steps, chunked=True)),
          ("one-step ahead (rl.rollout_ahead)", lambda: run_ahead(bench, steps))]
  runs += [(f"async eta={eta} (partial rollouts)", lambda eta=eta: run_async(bench, steps, eta)) for eta in (1, 2, 4)]
  results = []
  for name, fn in runs:
    r = fn()
    results.append((name, r))
    print(f"  {name}: {r['tokens'] / r['wall_s']:.0f} tok/s, idle {r['idle_s'] / r['wall_s']:.2f}", flush=True)
  base = results[0][1]["tokens"] / results[0][1]["wall_s"]
  print(f"\n{steps} steps of {P}x{G} rows, {updates} updates per batch, chunks of {CHUNK} tokens\n")
  print("| schedule | wall (s) | trained tokens/s | vs synchronous | trainer idle fraction | mean staleness |")
  print("|---|---|---|---|---|---|")
  for name, r in results:
    tps = r["tokens"] / r["wall_s"]
    print(f"| {name} | {r['wall_s']:.1f} | {tps:.0f} | {tps / base:.2f}x | {r['idle_s'] / r['wall_s']:.2f} | "
          f"{r['staleness']:.2f} |")


def curve(out: str, steps: int) -> None:
  """Held-out greedy accuracy against wall time: synchronous vs eta = 2, from one shared SFT warm start."""
  import json  # pylint: disable=import-outside-toplevel
  import os  # pylint: disable=import-outside-toplevel
  from rljax.train import apply_overrides, default_config, read_jsonl, train  # pylint: disable=import-outside-toplevel
  base = ["progress=false", "plot=false", "tensorboard=false", f"rl.steps={steps}", "eval.every=5",
          "eval.num_problems=200", "eval.batch_size=200", "checkpoint.every=1000"]
  sft_dir = os.path.join(out, "sft")
  if not os.path.exists(os.path.join(sft_dir, "summary.json")):
    train(apply_overrides(default_config(), base + [f"out_dir={sft_dir}", "rl.steps=0"]), overwrite=True)
  rows = {}
  for name, extra in (("synchronous", []), ("async eta=2", ["rl.async_staleness=2"])):
    d = os.path.join(out, name.replace(" ", "_").replace("=", ""))
    cfg = apply_overrides(default_config(), base + [f"out_dir={d}", f"sft.init_from={sft_dir}"] + extra)
    if not os.path.exists(os.path.join(d, "summary.json")):  # a finished run is reused
      train(cfg, overwrite=True)
    metrics = [r for r in read_jsonl(os.path.join(d, "metrics.jsonl")) if r["stage"] == "rl"]
    evals = [r for r in metrics if "eval/greedy_accuracy" in r]
    rows[name] = {"wall_s": metrics[-1]["time/rl_s"],  # the RL stage's wall time (steps, evaluations included)
                  "curve": [(r["step"], r.get("time/rl_s", 0.0), r["eval/greedy_accuracy"]) for r in evals]}
    print(name, json.dumps(rows[name]), flush=True)
  print("\n| run | RL wall (s) | held-out greedy accuracy at (RL step, RL wall s) |")
  print("|---|---|---|")
  for name, r in rows.items():
    print(f"| {name} | {r['wall_s']:.0f} | " + ", ".join(f"{a:.3f} ({s}, {t:.0f} s)" for s, t, a in r["curve"]) + " |")
  sync, fast = rows["synchronous"]["curve"], rows["async eta=2"]["curve"]
  target = sync[-1][2]
  hit = next(((s, t) for s, t, a in fast if a >= target), None)
  print(f"synchronous final accuracy {target:.3f} at {sync[-1][1]:.0f} s; async eta=2 reaches it "
        + (f"at step {hit[0]}, {hit[1]:.0f} s" if hit else "not within its run"))


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--steps", type=int, default=16)
  ap.add_argument("--updates", type=int, default=1)
  ap.add_argument("--curve", action="store_true")
  ap.add_argument("--curve-steps", type=int, default=30)
  ap.add_argument("--curve-only", action="store_true", help="skip the throughput table")
  ap.add_argument("--out", default="/tmp/rljax_async_curve")
  args = ap.parse_args()
  if not args.curve_only:
    throughput(args.steps, args.updates)
  if args.curve or args.curve_only:
    curve(args.out, args.curve_steps)


if __name__ == "__main__":
  main()
