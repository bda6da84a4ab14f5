"""The generic trainer names no technique (issue #50, item 3): a technique enters the step through what its stage
declares (its needs, a loss term's ``batch_extras``, the inputs' declared extras keys), never through a branch or a
copy in ``rljax/train/``.

The scan reads every module of ``rljax/train/``: identifiers, string constants and comments (docstrings excluded:
they may cite a technique as an example of a generic rule), and looks for the name of every catalog technique.
``KNOWN`` lists the names still there today, with the reason; a name anywhere else fails."""
import ast
import io
import pathlib
import re
import tokenize

from rljax.recipes._spec import _catalog

TRAIN = pathlib.Path(__file__).resolve().parents[1] / "rljax" / "train"

_WORDS = "an ordinary word that is also a technique's name"
KNOWN = {
    "_config.py": ({"gdpo", "grpo", "kl_penalty", "math_answer", "ppo_clip", "qae", "rank", "token_mean"},
                   "the default recipe's specs and the help texts of the run configuration; rank: LoRA's"),
    "_legacy.py": ({"adaptive_kl", "bapo", "dr_grpo", "entropic", "entropy_bonus", "grpo", "gspo", "kl_penalty",
                    "overlong_penalty", "ppo_clip", "seq_mean_token_sum_norm", "temperature_control", "token_mean",
                    "zero_variance"}, "the translation of the old config keys into technique specs"),
    "_rundir.py": ({"grpo"}, "an example spec in a comment on comparing specs"),
    "_critic.py": ({"token_mean"}, "the critic's default aggregation (issue #50: to move to the critic's stage)"),
    "_step.py": ({"token_mean", "token_sum"}, "the default aggregation; a comment on the global denominator"),
    "_episodes.py": ({"void_turn"}, "the episode path's void-turn count (issue #50: to become a declared extra)"),
    "_startup.py": ({"gae", "segment", "value_loss"}, "help texts of start-up refusals; segment: " + _WORDS),
    "_inputs.py": ({"segment"}, _WORDS),
    "_run.py": ({"dump", "rank"}, _WORDS),
}


def _docstring_lines(src: str) -> set:
  lines = set()
  for node in ast.walk(ast.parse(src)):
    body = getattr(node, "body", None)
    if (isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body
        and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)):
      lines.add(body[0].lineno)
  return lines


def technique_names_in(src: str, names: set) -> set:
  """The catalog ``names`` that occur as words in ``src``'s identifiers, non-docstring strings and comments."""
  docs, found = _docstring_lines(src), set()
  for tok in tokenize.generate_tokens(io.StringIO(src).readline):
    if tok.type == tokenize.STRING and tok.start[0] in docs:
      continue
    if tok.type in (tokenize.NAME, tokenize.STRING, tokenize.COMMENT):
      found |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", tok.string)) & names
  return found


def test_the_scan_finds_a_technique_name_in_code_and_comments_not_in_docstrings():
  names = {"opd", "dpo", "grpo"}
  src = '"""Docstring naming grpo."""\n\ndef f(data):\n  """opd too."""\n  x = {"k": data.opd}  # dpo\n  return x\n'
  assert technique_names_in(src, names) == {"opd", "dpo"}
  assert technique_names_in("y = 'grpo(eps=1e-4)'\n", names) == {"grpo"}
  assert technique_names_in("y = 'grpo_like'\n", names) == set()


def test_no_technique_name_in_the_trainer_beyond_the_known_ones():
  names = set(_catalog())
  assert {"opd", "entropy_gated_contrastive", "dpo"} <= names
  extra = {}
  for path in sorted(TRAIN.glob("*.py")):
    found = technique_names_in(path.read_text(), names) - KNOWN.get(path.name, (set(), ""))[0]
    if found:
      extra[path.name] = sorted(found)
  assert not extra, f"technique names in rljax/train/ (declare the need/producer on the technique instead): {extra}"


def test_the_known_list_holds_no_technique_whose_producer_moved_out():
  """opd's teacher log-probs (StepData.logp_teacher declares its extras key) and entropy_gated_contrastive's
  entropy_base (its LossTerm.batch_extras) left the trainer: they may not come back as known names."""
  for names, _ in KNOWN.values():
    assert not names & {"opd", "entropy_gated_contrastive", "dpo"}
