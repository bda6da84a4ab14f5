"""Wall time of the episode runner with a slow environment: lockstep vs environment steps overlapping the decode.

Same episodes every way: FrozenLake (``rljax.envs.FrozenLakeEnv``, 4x4 boards by seed) whose ``step`` sleeps
``--sleep`` seconds (a stand-in for a tool call: a sandbox run costs 0.1-0.2 s), the random-weight model and
character tokenizer of ``benchmarks/episode_cache.py``, greedy turns of up to ``--new`` tokens ending at a
newline, up to ``--turns`` turns, one environment thread per episode. ``RunnerConfig.chunk_tokens`` = 0 is the
lockstep schedule (decode a turn for every row, then step every environment, then resume); ``k`` decodes ``k``
tokens per call and steps the environments of rows whose turn ended while the others decode, and the rows start
their next turn together (``rejoin="turn"``) or at the next call (``"chunk"``). ``--stops`` adds stop strings
(one per character) so that the random model's turns end at different lengths. Each schedule is run
once to compile, then timed over ``--rounds`` runs (median). The rows must equal the lockstep ones (greedy; a
float32 near-tie could flip one, which is reported).

    python benchmarks/episode_overlap.py [--episodes 16] [--turns 6] [--new 8] [--sleep 0.05] [--jitter 0]
        [--stops ""] [--chunks 8,4] [--rejoin turn,chunk]
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import jax
import numpy as np
from flax import nnx

from rljax import envs
from rljax.envs._runner import RunnerConfig, run_episodes

from episode_cache import CharTok, tiny_model  # pylint: disable=wrong-import-position


@dataclasses.dataclass(frozen=True)
class SlowLake(envs.FrozenLakeEnv):
  """FrozenLake whose every step first sleeps ``sleep * (1 + jitter * u)`` seconds, ``u`` in ``{0, 1/3, 2/3, 1}``
  from the episode's seed and turn (tool calls of different lengths; ``jitter=0``: every step the same)."""
  sleep: float = 0.05
  jitter: float = 0.0

  def step(self, state, action):
    u = ((state.seed * 7 + state.turn * 3) % 4) / 3
    time.sleep(self.sleep * (1 + self.jitter * u))
    return super().step(state, action)


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--episodes", type=int, default=16)
  ap.add_argument("--turns", type=int, default=6)
  ap.add_argument("--new", type=int, default=8)
  ap.add_argument("--sleep", type=float, default=0.05)
  ap.add_argument("--jitter", type=float, default=0.0, help="steps sleep between sleep and sleep * (1 + jitter)")
  ap.add_argument("--chunks", default="8,4", help="comma-separated chunk_tokens of the overlapped runs")
  ap.add_argument("--rejoin", default="turn,chunk", help="comma-separated RunnerConfig.rejoin of the overlapped runs")
  ap.add_argument("--stops", default="", help="extra stop strings, one per character (turns of different lengths)")
  ap.add_argument("--rounds", type=int, default=3)
  args = ap.parse_args()
  tok = CharTok()
  model = tiny_model(tok.vocab_size)
  env = SlowLake(size=4, sleep=args.sleep, jitter=args.jitter)
  cfg = envs.EpisodeConfig(stop_strings=tuple(env.stop_strings) + tuple(args.stops), max_turns=args.turns)
  base = RunnerConfig(max_turns=args.turns, max_new_tokens=args.new, max_prompt_tokens=128, max_obs_tokens=96,
                      threads=args.episodes)
  problems, seeds = [None] * args.episodes, list(range(args.episodes))
  split = nnx.split(model)

  def run(schedule):
    chunk, rejoin = schedule
    return run_episodes(split, env, problems, tokenizer=tok, episode_config=cfg, key=jax.random.key(0), seeds=seeds,
                        greedy=True, runner_config=dataclasses.replace(base, chunk_tokens=chunk, rejoin=rejoin))

  results = {}
  schedules = [(0, "turn")] + [(int(c), r) for c in args.chunks.split(",") if c for r in args.rejoin.split(",")]
  for schedule in schedules:
    out = run(schedule)  # compile
    times = []
    for _ in range(args.rounds):
      t0 = time.perf_counter()
      out = run(schedule)
      times.append(time.perf_counter() - t0)
    results[schedule] = (out, statistics.median(times))
  lock, t_lock = results[(0, "turn")]
  steps = int(lock.turns.sum())
  lengths = [len(s.text) for ep in lock.episodes for s in ep.segments if s.source == "model"]
  print(f"episodes {args.episodes}, mean turns {float(lock.turns.mean()):.2f}, max turns {args.turns}, new tokens/turn "
        f"<= {args.new}, env step sleeps {args.sleep * 1e3:.0f}-{args.sleep * (1 + args.jitter) * 1e3:.0f} ms "
        f"({steps} steps, "
        f"{args.episodes} threads), stop strings {cfg.stop_strings!r}, model turn lengths {min(lengths)}-"
        f"{max(lengths)} characters (mean {np.mean(lengths):.1f})")
  print(f"{'schedule':<30}{'wall s (median of ' + str(args.rounds) + ')':>24}{'vs lockstep':>13}{'sampler calls':>15}"
        f"{'compactions':>13}{'identical rows':>16}")
  for (chunk, rejoin), (out, t) in results.items():
    same = int(sum(np.array_equal(out.tokens[i], lock.tokens[i]) for i in range(lock.tokens.shape[0])))
    name = "lockstep" if chunk == 0 else f"overlapped, k={chunk}, {rejoin}"
    print(f"{name:<30}{t:>24.3f}{t_lock / t:>12.2f}x{out.sampler_calls:>15}{out.compactions:>13}"
          f"{same:>11}/{lock.tokens.shape[0]}")


if __name__ == "__main__":
  main()
