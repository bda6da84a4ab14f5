"""What `rljax sample` would pay per call to reuse a sampler program the training run compiled (issue #52 item 5a).

The sampler is compiled for a static number of prompts P and samples per prompt n (and greedy or not, and the
prompt-length bucket). A run of the real-model demo (``configs/smollm2_addition.py``: ``rl.num_prompts=8``,
``rl.group_size=4``, ``eval.batch_size=84``, 2 concurrent chunks on a CPU) compiles (8 prompts, 4 samples, sampled)
and (84 prompts, 1 sample, greedy), among others; ``rljax sample PROMPT`` asks for (1, 1). Padding the prompt to a
compiled batch would hit the cache, and decode the whole batch on every call. This times both, warm (after each
program's compile, which it also prints), on a model of SmolLM2-135M-Instruct's shape with random weights (no
stop token is drawn: every row decodes all 16 tokens, as the demo's ``rl.max_new_tokens``)::

    python benchmarks/sample_padding_cost.py [--repeats 3]

The seconds depend on the machine and its load; the ratio between a row and the padded batch is the result.
"""
import argparse
import time

import jax
import numpy as np
from flax import nnx

from rljax.models import ModelConfig, Transformer
from rljax.sampling import SamplerConfig, generate

# SmolLM2-135M-Instruct (its config.json): 30 layers, H 576, 9 query / 3 KV heads of 64, F 1536, tied embeddings
SMOLLM2 = dict(vocab_size=49152, hidden_size=576, num_layers=30, num_heads=9, num_kv_heads=3, head_dim=64,
               intermediate_size=1536, tie_embeddings=True, rope_theta=100000.0, rms_norm_eps=1e-5,
               architecture="LlamaForCausalLM")
PROMPT_LEN = 40  # about a chat-templated demo question
CASES = [  # (label, prompts, n, greedy)
    ("sample: 1 prompt x 1, sampled (its own program)", 1, 1, False),
    ("padded to the RL rollout: 8 prompts x 4, sampled", 8, 4, False),
    ("sample --greedy: 1 prompt x 1 (its own program)", 1, 1, True),
    ("padded to the evaluation: 84 prompts x 1, greedy", 84, 1, True),
]


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--repeats", type=int, default=3, help="warm calls per case; the fastest is printed")
  args = ap.parse_args()
  model = Transformer(ModelConfig(**SMOLLM2), rngs=nnx.Rngs(0))
  config = SamplerConfig(max_new_tokens=16, prompt_buckets=(64,), pad_id=0, concurrent_chunks=2)
  rng = np.random.default_rng(0)
  print(f"{jax.devices()[0].device_kind}, SmolLM2-135M shape, prompts of {PROMPT_LEN} tokens, 16 new tokens")
  for label, p, n, greedy in CASES:
    prompts = [rng.integers(1, SMOLLM2["vocab_size"], PROMPT_LEN) for _ in range(p)]
    call = lambda: generate(model, prompts, config=config, key=jax.random.PRNGKey(0), n=n, greedy=greedy,
                            max_new_tokens=16).tokens.block_until_ready()
    t0 = time.perf_counter()
    call()
    first = time.perf_counter() - t0
    warm = []
    for _ in range(args.repeats):
      t0 = time.perf_counter()
      call()
      warm.append(time.perf_counter() - t0)
    print(f"{label}: first call (compile + decode) {first:.1f} s, warm call {min(warm):.2f} s")


if __name__ == "__main__":
  main()
