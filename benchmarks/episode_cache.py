"""Prefilled tokens and wall time: the episode runner (KV cache kept between turns) vs recomputing the prefix.

Same episodes both ways: FrozenLake (``rljax.envs.FrozenLakeEnv``, 4x4 boards by seed), a random-weight model
(hidden 64, 2 layers, character tokenizer), greedy turns of up to ``--new`` tokens ending at a newline, up to
``--turns`` turns. The cached run is ``rljax.envs.run_episodes`` (``generate`` for the first turn, then
``resume`` with each observation). The baseline samples every turn with ``generate`` on the whole text so far
(the prompt and every earlier turn and observation prefilled again), and cuts and steps the same way. Each is
run once to compile, then timed over ``--rounds`` runs (median). The two must give the same tokens (greedy; a
float32 near-tie could flip one, which is reported).

    python benchmarks/episode_cache.py [--episodes 16] [--turns 6] [--new 8]
"""
from __future__ import annotations

import argparse
import statistics
import string
import time

import jax
import numpy as np
from flax import nnx

from rljax import envs
from rljax.envs._runner import RunnerConfig, _turn_cut, run_episodes
from rljax.models import ModelConfig, Transformer, fan_in_init
from rljax.sampling import SamplerConfig, generate

CHARS = string.ascii_letters + string.digits + " .,:()\n"


class CharTok:
  bos_id, eos_id, pad_id = 1, 2, 0

  def __init__(self):
    self.chars = CHARS
    self.vocab_size = 3 + len(self.chars)

  def encode(self, text):
    return [3 + self.chars.index(c) for c in text]

  def decode(self, ids):
    return "".join(self.chars[i - 3] for i in ids if i >= 3)


def recompute(model, env, problems, seeds, tok, cfg: envs.EpisodeConfig, rc: RunnerConfig, sc: SamplerConfig):
  """Every turn: ``generate`` on each running episode's whole sequence. Returns (rows, prefilled tokens)."""
  eps = [envs.start(env, p, s) for p, s in zip(problems, seeds)]
  seqs = [[tok.bos_id] + tok.encode(ep.context) for ep in eps]
  prefilled = 0
  for turn in range(cfg.max_turns):
    rows = [i for i, ep in enumerate(eps) if not ep.done]
    if not rows:
      break
    prefilled += sum(len(seqs[i]) for i in rows)
    r = generate(model, [seqs[i] for i in rows], config=sc, key=jax.random.key(turn), greedy=True,
                 stop_tokens=[tok.eos_id])
    tokens, cm = np.asarray(r.tokens), np.asarray(r.completion_mask)
    for j, i in enumerate(rows):
      ids = tokens[j][cm[j]].tolist()
      k, text = _turn_cut(ids, cfg.stop_strings, tok.eos_id, tok.decode)
      seqs[i] += ids[:k]
      eps[i] = envs.advance(env, eps[i], text, cfg)
      if not eps[i].done:
        seqs[i] += tok.encode(eps[i].segments[-1].text)
  return seqs, prefilled


def tiny_model(vocab_size: int) -> Transformer:
  """The benchmarks' random-weight 2-layer d=64 model (fan-in init, seed 0)."""
  model = Transformer(ModelConfig(vocab_size=vocab_size, hidden_size=64, num_layers=2, num_heads=4,
                                  num_kv_heads=4, head_dim=16, intermediate_size=256, max_position_embeddings=1024),
                      rngs=nnx.Rngs(0))
  fan_in_init(model)
  return model


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--episodes", type=int, default=16)
  ap.add_argument("--turns", type=int, default=6)
  ap.add_argument("--new", type=int, default=8)
  ap.add_argument("--rounds", type=int, default=3)
  args = ap.parse_args()
  tok = CharTok()
  model = tiny_model(tok.vocab_size)
  env = envs.FrozenLakeEnv(size=4)
  cfg = envs.EpisodeConfig(stop_strings=env.stop_strings, max_turns=args.turns)
  rc = RunnerConfig(max_turns=args.turns, max_new_tokens=args.new, max_prompt_tokens=128, max_obs_tokens=96)
  sc = SamplerConfig(max_new_tokens=args.new, prompt_buckets=(128, 256, 512), pad_id=0, decode_phases=1)
  problems, seeds = [None] * args.episodes, list(range(args.episodes))

  def cached():
    out = run_episodes(model, env, problems, tokenizer=tok, episode_config=cfg, runner_config=rc,
                       key=jax.random.key(0), seeds=seeds, greedy=True)
    return out, out.prefilled

  def timed(fn):
    res = fn()  # compile
    times = []
    for _ in range(args.rounds):
      t0 = time.perf_counter()
      res = fn()
      times.append(time.perf_counter() - t0)
    return res, statistics.median(times)

  (out, pre_c), t_c = timed(cached)
  (seqs, pre_r), t_r = timed(lambda: recompute(model, env, problems, seeds, tok, cfg, rc, sc))
  same = sum(out.tokens[i, :len(s)].tolist() == s for i, s in enumerate(seqs))
  turns = float(out.turns.mean())
  print(f"episodes {args.episodes}, mean turns {turns:.2f}, max turns {args.turns}, new tokens/turn <= {args.new}")
  print(f"identical episodes: {same}/{len(seqs)}")
  print(f"prefilled tokens: cached {pre_c}, recompute {pre_r}, ratio {pre_r / pre_c:.2f}x")
  print(f"wall time (median of {args.rounds}): cached {t_c:.3f} s, recompute {t_r:.3f} s, ratio {t_r / t_c:.2f}x")


if __name__ == "__main__":
  main()
