"""Median wall time of one GRPO step (rollout + update): rljax vs Tunix's GRPOLearner, CPU.

Same Llama-style model shape (random weights, float32) on both sides: vocab
512, hidden 256, 4 layers, 4 heads of 64 (MHA), MLP 1024; batch 16 prompts x 4
samples, 16 prompt tokens + 48 new tokens (no early stop), one policy update
per step (mu = 1), no KL / reference model, Adam 3e-4, PPO clip 0.2.

A step is: sample 64 completions, score them on the host (random reward),
group advantages, one jitted update. With mu = 1 Tunix takes pi_old from the
current policy (no extra forward); rljax does the same work by using the
sampler's own log-probs as pi_old (on-policy, so the ratio is 1 up to
sampler/trainer numerics). rljax's update runs each group's prompt once
(``policy_outputs(shared_prefix_len=16, group_size=4)``, what ``rljax train``
does by default: ``rl.share_prompt_forward``).

rljax rows:
  * ``rljax, defaults``: one sampler call, the update on the whole batch.
  * ``rljax, 2 concurrent rollout chunks, 4 update micro-batches``: the same
    algorithm with two CPU settings (``rl.concurrent_rollouts=2``,
    ``rl.num_microbatches=4``). The 16 prompts are sampled as two calls of 8
    on two host threads at once (``SamplerConfig.concurrent_chunks``: rows
    keep their random streams; one decode loop leaves a core idle), and the gradient is
    accumulated over 4 micro-batches of 16 rows with the global token count,
    so it is the full-batch gradient and one Adam step (smaller activations
    stay in cache).
  * ``..., prompt per row``: the prompt repeated in every row of the update,
    as Tunix does.
  * ``..., rollout ahead``: ``rl.rollout_ahead``'s schedule
    (``rljax.train.RolloutAhead``): step i+1's rollout is sampled on a
    background thread, from the parameters before update i, while update i
    runs — one-step off-policy, so not the same algorithm as Tunix's
    synchronous step; reported separately.
``--recompute-proximal`` adds rljax's extra proximal forward (what its RL
loop does for mu > 1) to the timed step.

Tunix rows: its defaults, and its ``train_micro_batch_size`` = 16 / 4 prompts
(``mini_batch_size`` 16, so still one optimizer step per batch). Its
``rollout_micro_batch_size`` defaults to the train micro-batch size, so that
setting rolls out and scores each micro-batch in turn and is slower; the
ratios are taken against Tunix's faster row. rljax times its step directly;
Tunix's is measured between consecutive calls of its
reward function for the first micro-batch of each step, which brackets
exactly one full step.

The machine is noisy and drifts, so the configurations are interleaved: in
each of ``--rounds`` rounds the synchronous rljax variants take turns step by
step for ``--steps`` steps, then the rollout-ahead variant runs a block, then
each Tunix setting runs in a fresh process (``--steps`` after ``--warmup``);
the reported figure is the median over all rounds' steps (every variant is
compiled and warmed up before the first round). Taking turns step by step
means each rljax step starts with caches warmed by another variant, while
Tunix runs its steps in one block: if anything, this favours Tunix.

The peer at its best (docs/benchmarks.md, "How we compare"): Tunix runs JAX at XLA's default threading (all cores;
no thread flag) in float32 (XLA:CPU's bfloat16 dot is slower than its float32 one, so float32 is its fastest
precision here). A missing Tunix stops the run with the command that makes its venv (``--skip-tunix`` times rljax
only); above the core count the load average at the start withholds the ratios unless ``--allow-load``.

Tunix runs in its own venv (it pins its own jax) as a subprocess::

  python3 -m venv /tmp/tunix-venv && /tmp/tunix-venv/bin/pip install google-tunix
  /work/venv/bin/python benchmarks/grpo_step_bench.py --tunix-python /tmp/tunix-venv/bin/python
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchmarks/: the shared rules
import _peer_rules as rules  # noqa: E402  pylint: disable=wrong-import-position

V, H, L, NH, D, F = 512, 256, 4, 4, 64, 1024
P, G, PROMPT_LEN, NEW = 16, 4, 16, 48


class RljaxVariant:
  """One rljax configuration of the GRPO step, built and compiled once, timed in blocks of steps."""

  def __init__(self, share_prompt: bool = True, rollout_ahead: bool = False, recompute_proximal: bool = False,
               num_microbatches: int = 1, rollout_chunks: int = 1):
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from rljax import advantages as adv_lib
    from rljax import objectives as obj
    from rljax.models import ModelConfig, Transformer, policy_outputs
    from rljax.sampling import SamplerConfig, generate
    from rljax.train import (OptimConfig, RolloutAhead, init_train_state, make_optimizer, make_train_step,
                             objective_loss)
    from rljax.types import TrainBatch

    cfg = ModelConfig(vocab_size=V, hidden_size=H, num_layers=L, num_heads=NH, num_kv_heads=NH, head_dim=D,
                      intermediate_size=F)
    opt, _ = make_optimizer(OptimConfig(learning_rate=3e-4, grad_clip=1.0), 1000)
    graphdef, self.state = init_train_state(Transformer(cfg, rngs=nnx.Rngs(0)), opt,
                                            {"clip_low": 0.2, "clip_high": 0.2})
    shared = dict(shared_prefix_len=PROMPT_LEN if share_prompt else 0, group_size=G)
    loss = objective_loss(lambda hp: obj.chain(obj.ppo_clip(hp["clip_low"], hp["clip_high"]),
                                               aggregate=obj.token_mean), **shared)
    step = make_train_step(graphdef, loss, opt, num_microbatches=num_microbatches)
    scfg = SamplerConfig(max_new_tokens=NEW, prompt_buckets=(PROMPT_LEN,), return_entropy=False,
                         return_routing=False, concurrent_chunks=rollout_chunks)
    proximal = jax.jit(lambda params, rest, tokens: policy_outputs(nnx.merge(graphdef, params, rest), tokens,
                                                                   **shared).logp)
    rng = np.random.default_rng(0)
    prompts = [list(map(int, r)) for r in rng.integers(1, V, size=(P, PROMPT_LEN))]

    def rollout(params, rest, i):
      ro = generate(nnx.merge(graphdef, params, rest), prompts, config=scfg, key=jax.random.PRNGKey(i), n=G,
                    temperature=1.0)
      return ro, jnp.asarray(rng.random(P * G), jnp.float32)  # host reward

    def update(state, ro, rewards):
      a, _ = adv_lib.grpo(rewards, ro.group_id)
      mask = ro.completion_mask
      batch = TrainBatch(tokens=ro.tokens, loss_mask=mask, advantages=a[:, None] * mask, group_id=ro.group_id,
                         logp_behavior=ro.logp_behavior,
                         logp_old=(proximal(state.params, state.model_state, ro.tokens) if recompute_proximal
                                   else None))
      state, metrics = step(state, batch)
      jax.block_until_ready(metrics["loss"])
      return state

    self._rollout, self._update, self._ahead_cls = rollout, update, RolloutAhead
    self.rollout_ahead = rollout_ahead
    self.jax_version = jax.__version__
    self._i = 0

  def run(self, n: int) -> list:
    """Times ``n`` consecutive steps. With ``rollout_ahead`` the block's first step has nothing sampled
    ahead (it is synchronous), so only the ``n - 1`` pipelined steps' times are returned."""
    times = []
    ahead = self._ahead_cls() if self.rollout_ahead else None
    for j in range(n):
      t0 = time.perf_counter()
      st = self.state
      if ahead is not None and ahead.pending:  # sampled during the previous update (rl.rollout_ahead)
        ro, rewards = ahead.result()
      else:
        ro, rewards = self._rollout(st.params, st.model_state, self._i)
      if ahead is not None and j + 1 < n:
        ahead.submit(self._rollout, *self._ahead_cls.snapshot((st.params, st.model_state)), self._i + 1)
      self.state = self._update(st, ro, rewards)
      self._i += 1
      if ahead is None or j > 0:
        times.append(time.perf_counter() - t0)
    if ahead is not None:
      ahead.close()
    return times


_TUNIX_SCRIPT = textwrap.dedent('''
    import json, statistics, sys, time
    import jax, jax.numpy as jnp, numpy as np, optax
    from flax import nnx
    from tunix.models.llama3 import model as llama
    from tunix.rl import rl_cluster as rl_cluster_lib
    from tunix.rl.grpo import grpo_learner
    from tunix.rl.rollout import base_rollout
    V, H, L, NH, D, F, P, G, PL, NEW, steps, warmup, micro = [int(x) for x in sys.argv[1:14]]

    class Tok:  # ids as space-separated ints; EOS never produced
      def encode(self, s, **kw): return [int(x) for x in str(s).split()]
      def decode(self, ids, **kw): return " ".join(str(i) for i in ids)
      def bos_id(self): return 0
      def eos_id(self): return V + 7
      def pad_id(self): return 0

    cfg = llama.ModelConfig(num_layers=L, vocab_size=V, embed_dim=H, hidden_dim=F, num_heads=NH,
                            head_dim=D, num_kv_heads=NH, rope_theta=10000, norm_eps=1e-6)
    actor = llama.Llama3(cfg, rngs=nnx.Rngs(0))
    mesh = jax.make_mesh((1, 1), ("fsdp", "tp"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    total = steps + warmup
    train_cfg = rl_cluster_lib.RLTrainingConfig(
        actor_optimizer=optax.chain(optax.clip_by_global_norm(1.0), optax.adam(3e-4)),
        eval_every_n_steps=10**9, max_steps=total,
        **(dict(mini_batch_size=P, train_micro_batch_size=P // micro) if micro > 1 else {}))
    rollout_cfg = base_rollout.RolloutConfig(max_tokens_to_generate=NEW, max_prompt_length=PL,
                                             kv_cache_size=PL + NEW + 8, temperature=1.0, top_p=1.0,
                                             eos_tokens=[V + 7])
    cluster_cfg = rl_cluster_lib.ClusterConfig(
        role_to_mesh={rl_cluster_lib.Role.ACTOR: mesh, rl_cluster_lib.Role.REFERENCE: mesh,
                      rl_cluster_lib.Role.ROLLOUT: mesh},
        rollout_engine="vanilla", offload_to_cpu=False, training_config=train_cfg, rollout_config=rollout_cfg)
    cluster = rl_cluster_lib.RLCluster(actor=actor, reference=actor, tokenizer=Tok(), cluster_config=cluster_cfg)
    stamps = []
    rng = np.random.default_rng(0)

    def reward(prompts, completions, **kw):
      stamps.append(time.perf_counter())
      return list(rng.random(len(completions)))

    algo = grpo_learner.GRPOConfig(num_generations=G, num_iterations=1, beta=0.0, epsilon=0.2)
    learner = grpo_learner.GRPOLearner(rl_cluster=cluster, algo_config=algo, reward_fns=[reward])
    prompts = [" ".join(str(int(x)) for x in row) for row in rng.integers(1, V, size=(P, PL))]
    # an array, not a list: Tunix maps np.repeat over the example pytree (a list's strings would be leaves)
    ds = [{"prompts": np.asarray(prompts)} for _ in range(total + 2)]
    t0 = time.perf_counter()
    learner.train(ds)
    wall = time.perf_counter() - t0
    # with train micro-batches Tunix's rollout_micro_batch_size defaults to the same size, so it rolls out and
    # scores each micro-batch in turn: one step = `micro` reward calls (checked)
    if len(stamps) != total * micro:
      print("RESULT " + json.dumps({"error": f"{len(stamps)} reward calls, expected {total} steps x {micro}"}))
      sys.exit(0)
    stamps = stamps[::micro]
    diffs = [b - a for a, b in zip(stamps[:-1], stamps[1:])]
    print("RESULT " + json.dumps({"median_step_s": statistics.median(diffs[warmup:]) if len(diffs) > warmup else None,
                                  "reward_calls": len(stamps), "times": diffs[warmup:], "wall_s": wall,
                                  "jax": jax.__version__}))
''')


def bench_tunix(python: str, steps: int, warmup: int, microbatches: int = 1) -> dict:
  with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
    f.write(_TUNIX_SCRIPT)
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  env.pop("PYTHONPATH", None)
  env.pop("XLA_FLAGS", None)
  args = [python, f.name] + [str(x) for x in (V, H, L, NH, D, F, P, G, PROMPT_LEN, NEW, steps, warmup,
                                            microbatches)]
  proc = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
  os.unlink(f.name)
  for line in proc.stdout.splitlines():
    if line.startswith("RESULT "):
      return json.loads(line[7:])
  return {"error": (proc.stderr or proc.stdout)[-3000:]}


def build_parser() -> argparse.ArgumentParser:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--steps", type=int, default=5, help="timed steps per configuration and round")
  ap.add_argument("--warmup", type=int, default=2)
  ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (rljax variants, then Tunix)")
  ap.add_argument("--tunix-python", default="/tmp/tunix-venv/bin/python")
  ap.add_argument("--skip-tunix", action="store_true")
  ap.add_argument("--recompute-proximal", action="store_true",
                  help="rljax also recomputes proximal log-probs (an extra forward) each step")
  ap.add_argument("--rollout-chunks", type=int, default=2,
                  help="SamplerConfig.concurrent_chunks of rljax's CPU-settings rows")
  ap.add_argument("--microbatches", type=int, default=4,
                  help="update micro-batches of rljax's CPU-settings rows, and of Tunix's micro-batched row "
                       "(its train_micro_batch_size = prompts / this; 1 = no such Tunix row)")
  rules.add_rules_args(ap)
  return ap


def main(argv=None) -> int:
  args = build_parser().parse_args(argv)
  if not args.skip_tunix:
    rules.require_peer(args.tunix_python, "tunix")  # before anything is printed
  guard = rules.LoadGuard.now(args.allow_load)
  c, k = args.rollout_chunks, args.microbatches
  print(f"model V={V} H={H} L={L} heads={NH}x{D} F={F}; batch {P} prompts x {G} samples, "
        f"{PROMPT_LEN} prompt + {NEW} new tokens; mu=1, no KL; Tunix at XLA's default threading", flush=True)
  print(guard.header(), flush=True)
  cpu = dict(rollout_chunks=c, num_microbatches=k)
  tag = f"{c} concurrent rollout chunks, {k} update micro-batches"
  variants = {"rljax, defaults": dict(), f"rljax, {tag}": cpu,
              f"rljax, {tag}, prompt per row": dict(cpu, share_prompt=False),
              f"rljax, {tag}, rollout ahead (one-step off-policy)": dict(cpu, rollout_ahead=True)}
  built = {}
  for name, kw in variants.items():
    built[name] = RljaxVariant(recompute_proximal=args.recompute_proximal, **kw)
    built[name].run(args.warmup + 1)  # compile + warm up
  tunix_runs = {"tunix": 1}
  if k > 1:
    tunix_runs[f"tunix, {k} micro-batches"] = k
  times = {name: [] for name in list(variants) + list(tunix_runs)}
  have_tunix = not args.skip_tunix
  for r in range(args.rounds):  # interleaved, so that machine drift hits every configuration alike
    synchronous = [name for name, v in built.items() if not v.rollout_ahead]
    for _ in range(args.steps):  # the synchronous variants take turns step by step
      for name in synchronous:
        times[name] += built[name].run(1)
    for name, v in built.items():
      if v.rollout_ahead:  # a block: its first step has nothing sampled ahead and is not timed
        times[name] += v.run(args.steps + 1)
    for name, micro in tunix_runs.items():
      if not have_tunix:
        break
      t = bench_tunix(args.tunix_python, args.steps, args.warmup, micro)
      if "error" in t:
        print(f"{name} error:", t["error"], flush=True)
        have_tunix = False
      else:
        times[name] += t["times"]
    print(f"round {r + 1}: " + ", ".join(f"{n} {statistics.median(v):.3f} s" for n, v in times.items() if v),
          flush=True)
  med = {n: statistics.median(v) for n, v in times.items() if v}
  print(json.dumps({"median_step_s": med, "steps_timed": {n: len(v) for n, v in times.items()},
                    "jax": built["rljax, defaults"].jax_version}), flush=True)
  # against Tunix's faster setting (its micro-batches split its rollout as well)
  tunix_name = min((n for n in tunix_runs if n in med), key=med.get, default=None)
  tunix = med.get(tunix_name)
  for name in variants:
    ratio = "speed-up " + guard.ratio(tunix / med[name]) if tunix else "no Tunix"
    print(f"| GRPO step (rollout + update), CPU | {name} {med[name]:.3f} s | "
          f"{tunix_name} {tunix if tunix is None else round(tunix, 3)} s | {ratio} |")
  return 0


if __name__ == "__main__":
  sys.exit(main())
