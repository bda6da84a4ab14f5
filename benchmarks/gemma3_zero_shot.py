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
- ``F``: two-digit minus one-digit subtractions after three Q/A examples, first line;
- ``G``: 1-19 plus 1-9 after six compact examples ("2 + 7 = 9"), first line;
- ``H``: one-digit multiplications (2-12) after eight compact examples ("3 * 4 = 12"), first line;
- ``I``: arithmetic sequences: the fifth term after four examples ("2, 5, 8, 11, 14"), first line;
- ``J``: the number after ``n`` (10-199) after six Q/A examples, first line;
- ``K``: two-digit plus one-digit additions after six compact examples ("34 + 5 = 39"), first line;
- ``L``: three distinct digits sorted ascending after six examples ("3 9 1 -> 1 3 9"), the whole first line.

From ``G`` on, the examples' answers differ from one another and no question is an example's or has an
example's answer (copying an example never scores), and the questions are distinct.

A few-shot completion goes on with the next example ("...\\n\\nQ: ..."); scoring the first line is what a
``"\\n"`` stop string gives. The sums of A-C are ``SmallAdditionTask``'s test split; D-F draw their operands with a
fixed seed. The questions are not filtered against the worked examples (7 of E's 84 draws ask an example's own
question, e.g. 7 * 6, whose answer is in the prompt). ``I`` is configs/gemma3_sequences.py's prompt. Accuracy
figures only (no timings)::

    JAX_PLATFORMS=cpu python benchmarks/gemma3_zero_shot.py            # all candidates
    JAX_PLATFORMS=cpu python benchmarks/gemma3_zero_shot.py D E        # some
    JAX_PLATFORMS=cpu python benchmarks/gemma3_zero_shot.py I --samples 4   # + sampled accuracy at T=1, pass@4
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


def first_line(text: str):
  """The completion's first line, stripped (an exact-string answer)."""
  return text.split("\n")[0].strip()


def _fresh(rs, draw, shots, n):
  """``n`` distinct ``(question, answer)`` from ``draw(rs)``, none an example's question or answer."""
  taken = {q for q, _ in shots}
  banned = {str(a) for _, a in shots}
  out = []
  for _ in range(100 * n):
    q, a = draw(rs)
    if q not in taken and str(a) not in banned:
      taken.add(q)
      out.append((q, str(a)))
      if len(out) == n:
        return out
  raise ValueError(f"could not draw {n} fresh questions")


def _lines(shots, question, sep):
  return "".join(f"{q}{sep}{a}\n" for q, a in shots) + f"{question}{sep}".rstrip(" ")


def _seq(start, step, n=4):
  return ", ".join(str(start + k * step) for k in range(n)) + ","


def _op(rs, a_range, b_range, op):
  a, b = rs.randint(*a_range), rs.randint(*b_range)
  return f"{a} {op} {b}", a + b if op == "+" else a * b


def _sequence(rs):
  """Start 1-30, step 2-9: the first four terms, answer the fifth."""
  a, d = rs.randint(1, 31), rs.randint(2, 10)
  return _seq(a, d), a + 4 * d


def _sorted_digits(rs):
  d = rs.choice(10, 3, replace=False)
  return " ".join(map(str, d)), " ".join(map(str, sorted(d)))


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
  rs = np.random.RandomState(1)
  g_shots = [("2 + 7", 9), ("8 + 5", 13), ("4 + 4", 8), ("9 + 6", 15), ("3 + 8", 11), ("6 + 1", 7)]
  g = _fresh(rs, lambda r: _op(r, (1, 20), (1, 10), "+"), g_shots, _N)
  h_shots = [("3 * 4", 12), ("7 * 6", 42), ("5 * 9", 45), ("2 * 8", 16), ("11 * 3", 33), ("6 * 6", 36),
             ("8 * 7", 56), ("12 * 5", 60)]
  h = _fresh(rs, lambda r: _op(r, (2, 13), (2, 13), "*"), h_shots, _N)
  i_shots = [(_seq(a, d), a + 4 * d) for a, d in ((2, 3), (20, 7), (9, 4), (3, 8))]
  i = _fresh(rs, _sequence, i_shots, _N)
  j_shots = [(f"What number comes after {n}?", n + 1) for n in (37, 64, 19, 80, 45, 72)]
  j = _fresh(rs, lambda r: (lambda n: (f"What number comes after {n}?", n + 1))(r.randint(10, 200)), j_shots, _N)
  k_shots = [("34 + 5", 39), ("71 + 8", 79), ("46 + 7", 53), ("18 + 3", 21), ("55 + 9", 64), ("82 + 6", 88)]
  k = _fresh(rs, lambda r: _op(r, (10, 91), (1, 10), "+"), k_shots, _N)
  l_shots = [("3 9 1", "1 3 9"), ("7 2 5", "2 5 7"), ("0 8 4", "0 4 8"), ("6 1 9", "1 6 9"), ("5 3 2", "2 3 5"),
             ("4 7 0", "0 4 7")]
  l = _fresh(rs, _sorted_digits, l_shots, _N)

  def compact(shots, items, sep, score, new, what):
    return (what, [_lines(shots, q, sep) for q, _ in items], [a for _, a in items], score, new)

  return {
      "G": compact(g_shots, g, " = ", first_line_int, 6, "1-19 + 1-9 addition, 6-shot 'a + b = c' (first line)"),
      "H": compact(h_shots, h, " = ", first_line_int, 6, "1-digit (2-12) multiplication, 8-shot 'a * b = c'"),
      "I": compact(i_shots, i, " ", first_line_int, 6, "arithmetic sequence, 5th term, 4-shot (first line)"),
      "J": ("the number after n, 6-shot Q/A (first line)", [_qa(j_shots, q) for q, _ in j], [a for _, a in j],
            first_line_int, 6),
      "K": compact(k_shots, k, " = ", first_line_int, 6, "2-digit + 1-digit addition, 6-shot 'a + b = c'"),
      "L": compact(l_shots, l, " -> ", first_line, 10, "sort 3 distinct digits, 6-shot (whole first line)"),
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
  ap.add_argument("--samples", type=int, default=0,
                  help="also sample this many completions per problem at temperature 1: mean accuracy and pass@k")
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
    sampled = ""
    if args.samples:
      k = args.samples
      out = generate(model, ids, config=SamplerConfig(max_new_tokens=new, prompt_buckets=(bucket,)),
                     key=jax.random.PRNGKey(1), n=k, temperature=1.0)
      hits = np.reshape([score(t) == a for t, a in zip(codec.decode_completions(out.tokens, out.completion_mask),
                                                       np.repeat(answers, k))], (len(answers), k))
      sampled = f" (T=1: {100 * hits.mean():.1f}%, pass@{k} {100 * hits.any(1).mean():.1f}%)"
    print(f"| {letter}: {what} | {100 * acc:.1f}%{sampled} | {texts[0]!r} (want {answers[0]}), {texts[1]!r} "
          f"(want {answers[1]}) |", flush=True)


if __name__ == "__main__":
  main()
