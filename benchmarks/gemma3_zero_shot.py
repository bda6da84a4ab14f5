"""Zero-shot held-out greedy accuracy of Gemma 3 270M (a base model) on candidate task formats: the groundwork for
its training config (issue #55 item 3 wants a task whose zero-shot accuracy is 10-60%).

The model is the packaged GGUF's converted checkpoint (``rljax.models.gemma3_checkpoint``, float32), prompts are
encoded as a run with ``task.chat_template=none`` encodes them (``Codec.text_ids``: ``<bos>`` + the text), and
rljax's sampler decodes greedily (KV cache, one batch per candidate). Candidates (84 held-out problems each):

- ``A``: ``small_addition`` as the task asks it ("What is 7 + 12? Reply with only the number."), scored as the
  task scores it (the last integer of the completion), 16 new tokens;
- ``B``: the same sums as "What is 7 + 12? Answer:", scored on the first line's first integer, 8 new tokens;
- ``C``: the same sums after three worked examples ("Q: What is 3 + 5?\\nA: 8\\n\\n..."), first line;
- ``D``: two-digit additions after three ("23 + 41 = 64\\n..."), first line;
- ``E``: one-digit multiplications after three Q/A examples, first line;
- ``F``: two-digit minus one-digit subtractions after three Q/A examples, first line.

A few-shot completion goes on with the next example ("...\\n\\nQ: ..."); scoring the first line is what a
``"\\n"`` stop string gives. The sums of A-C are ``SmallAdditionTask``'s test split; D-F draw their operands with a
fixed seed. The questions are not filtered against the worked examples (7 of E's 84 draws ask an example's own
question, e.g. 7 * 6, whose answer is in the prompt; configs/gemma3_multiplication.py leaves such questions
out). Accuracy figures only (no timings)::

    JAX_PLATFORMS=cpu python benchmarks/gemma3_zero_shot.py            # all candidates
    JAX_PLATFORMS=cpu python benchmarks/gemma3_zero_shot.py D E        # some
"""
import argparse
import re

import jax
import numpy as np

from rljax.data import HFTokenizer
from rljax.envs import get_task
from rljax.models import from_pretrained, gemma3_checkpoint
from rljax.sampling import SamplerConfig, generate
from rljax.train._codec import Codec

_INT = re.compile(r"-?\d+")
_N = 84


def first_line_int(text: str):
  """The first integer of the completion's first line (``None`` without one)."""
  found = _INT.findall(text.split("\n")[0])
  return found[0] if found else None


def last_int(text: str):
  """The completion's last integer (``SmallAdditionTask.score``'s rule)."""
  found = _INT.findall(text)
  return found[-1] if found else None


def _qa(examples, question):
  return "".join(f"Q: {q}\nA: {a}\n\n" for q, a in examples) + f"Q: {question}\nA:"


def candidates() -> dict:
  """``letter -> (description, prompts, answers, score, max_new_tokens)``."""
  test = get_task("small_addition").problems("test", _N, 0)
  ab = [(p.meta["a"], p.meta["b"]) for p in test]
  sums = [str(a + b) for a, b in ab]
  rs = np.random.RandomState(0)
  two = [(rs.randint(10, 100), rs.randint(10, 100)) for _ in range(_N)]
  mul = [(rs.randint(2, 10), rs.randint(2, 10)) for _ in range(_N)]
  sub = [(rs.randint(10, 100), rs.randint(2, 10)) for _ in range(_N)]
  add_shots = [("What is 3 + 5?", 8), ("What is 12 + 7?", 19), ("What is 6 + 14?", 20)]
  mul_shots = [("What is 3 * 4?", 12), ("What is 7 * 6?", 42), ("What is 5 * 9?", 45)]
  sub_shots = [("What is 45 - 7?", 38), ("What is 83 - 5?", 78), ("What is 31 - 9?", 22)]
  return {
      "A": ("small_addition as the task asks (last integer)", [p.prompt for p in test], sums, last_int, 16),
      "B": ("small_addition, 'Answer:' (first line)", [f"What is {a} + {b}? Answer:" for a, b in ab], sums,
            first_line_int, 8),
      "C": ("small_addition, 3-shot Q/A (first line)", [_qa(add_shots, f"What is {a} + {b}?") for a, b in ab],
            sums, first_line_int, 8),
      "D": ("2-digit addition, 3-shot 'a + b = c' (first line)",
            ["23 + 41 = 64\n57 + 18 = 75\n36 + 36 = 72\n" + f"{a} + {b} =" for a, b in two],
            [str(a + b) for a, b in two], first_line_int, 6),
      "E": ("1-digit multiplication, 3-shot Q/A (first line)", [_qa(mul_shots, f"What is {a} * {b}?") for a, b in mul],
            [str(a * b) for a, b in mul], first_line_int, 6),
      "F": ("2-digit minus 1-digit, 3-shot Q/A (first line)", [_qa(sub_shots, f"What is {a} - {b}?") for a, b in sub],
            [str(a - b) for a, b in sub], first_line_int, 6),
  }


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("which", nargs="*", help="candidate letters (default all)")
  args = ap.parse_args(argv)
  cands = candidates()
  unknown = [w for w in args.which if w not in cands]
  if unknown:
    raise SystemExit(f"unknown candidates {unknown}; choose from {sorted(cands)}")
  path = gemma3_checkpoint()
  tok = HFTokenizer(path)
  codec = Codec(tok)
  model = from_pretrained(path, dtype="float32")
  print(f"Gemma 3 270M, zero-shot held-out greedy accuracy ({_N} problems each)")
  print("| candidate | accuracy | first two completions |")
  print("|---|---|---|")
  for letter in args.which or sorted(cands):
    what, prompts, answers, score, new = cands[letter]
    ids = [codec.text_ids(p) for p in prompts]
    bucket = 1 << (max(len(i) for i in ids) - 1).bit_length()
    out = generate(model, ids, config=SamplerConfig(max_new_tokens=new, prompt_buckets=(bucket,)),
                   key=jax.random.PRNGKey(0), greedy=True)
    texts = codec.decode_completions(out.tokens, out.completion_mask)
    acc = float(np.mean([score(t) == a for t, a in zip(texts, answers)]))
    print(f"| {letter}: {what} | {100 * acc:.1f}% | {texts[0]!r} (want {answers[0]}), {texts[1]!r} "
          f"(want {answers[1]}) |", flush=True)


if __name__ == "__main__":
  main()
