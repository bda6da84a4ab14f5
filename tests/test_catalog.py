"""rljax.catalog(): complete, unique, snake_case, and the generated docs are current."""
import os
import re
import subprocess
import sys

import pytest

import rljax
from rljax._technique import FIDELITY_BASES, Fidelity
from rljax.catalog import as_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Every bracketed name of the objective-library and advantages/filters/rewards issues.
REQUIRED = """
ppo_clip reinforce gpg gspo gspo_token gmpo segment_ratio cispo sapo cpgd pspo decoupled_ppo tis mis icepop
divergence_rejection entropy_bonus erc clip_cov kl_cov top_entropy_mask kl_penalty kl_in_reward rpg sft_nll gft opd
dpo alol entropy_gated_contrastive delta_logp_reweight token_mean token_sum seq_mean_token_sum seq_mean_token_mean
seq_mean_token_sum_norm adaptive_kl entropic bapo temperature_control
grpo dr_grpo rloo reinforce_pp reinforce_pp_baseline remax gae qae passk rank vote task_normalized key_baseline
role_ema_baseline hadw difficulty_weight gagar uniqueness canon segment outcome_conditioned_baseline tempo
step_episode_mix sign_preserving_modulation implicit_progress_reward gdpo dara sa_mrpo gd2po
zero_variance variance_topp void_turn greso pilot_commit difficulty_budget shuffle_pairs rorecomp
negative_advantage_drop vcrl exact_match math_answer format_regex grpo_lambda overlong_penalty length_penalty
rubric_dropout prm_clip prm_delta correctness_gated gaussian_reward clipped_linear_reward composite
""".split()


def test_catalog_has_every_required_technique_once():
  rows = rljax.catalog()
  names = [r.name for r in rows]
  assert len(names) == len(set(names))
  missing = sorted(set(REQUIRED) - set(names))
  assert not missing, f"not in the catalog: {missing}"
  for r in rows:
    assert re.fullmatch(r"[a-z][a-z0-9_]*", r.name)
    assert r.formula and r.source and callable(r.fn)
    assert r.fn.__doc__, f"{r.name}: callable has no docstring"


def test_cli_table_and_generated_docs_are_current():
  out = subprocess.run([sys.executable, "-m", "rljax.catalog"], capture_output=True, text=True, check=True,
                       cwd="/")
  assert "ppo_clip" in out.stdout and "grpo" in out.stdout
  with open(os.path.join(ROOT, "docs", "catalog.md")) as f:
    docs = f.read()
  assert as_table(markdown=True) in docs, "docs/catalog.md is stale: python -m rljax.catalog --markdown"


@pytest.mark.parametrize("row", rljax.catalog(), ids=lambda r: r.name)
def test_every_row_says_what_it_was_checked_against(row):
  """The fidelity column (issue #23): a ``Fidelity`` on every row, short; authors' code names
  ``github.com/owner/repo: path/file``, a peer row names the peer, an abstract-only row what was interpreted."""
  f = row.fidelity
  assert isinstance(f, Fidelity), f"{row.name} has no Fidelity"
  assert f.basis in FIDELITY_BASES and f.reference.strip()
  assert len(f.reference) <= 130 and len(f.differences) <= 220, f"{row.name}: keep the fidelity text short"
  if f.basis == "abstract":
    assert f.differences.strip(), f"{row.name}: an abstract-only row must say what was interpreted"
  if f.basis == "authors_code":
    m = re.match(r"github\.com/([\w.-]+)/([\w.-]+): (\S+)", f.reference)
    assert m, f"{row.name}: authors_code must name 'github.com/owner/repo: path/file', got {f.reference!r}"
    assert "." in m.group(3) and not m.group(3).endswith(":"), f"{row.name}: {m.group(3)!r} is not a file"
  if f.basis == "peer":
    assert re.search(r"verl|TRL|AReaL|OpenRLHF|open-r1|github\.com/", f.reference), \
        f"{row.name}: name the peer implementation"



@pytest.mark.parametrize("row", rljax.catalog(), ids=lambda r: r.name)
def test_every_row_is_in_the_four_question_form(row):
  """Issue #51: every record names the source it read and the placement (``in_full``); since the last six rows
  (rank, key_baseline, difficulty_weight, tempo, oprl, grpo_lambda) moved, no row is allowed outside the form."""
  assert row.fidelity.in_full, f"{row.name}: fill read, defaults, placement and deviations (issue #51)"

def test_fidelity_rejects_incomplete_records():
  with pytest.raises(ValueError, match="basis"):
    Fidelity("paper", "x")
  with pytest.raises(ValueError, match="reference"):
    Fidelity("peer", " ")
  with pytest.raises(ValueError, match="interpreted"):
    Fidelity("abstract", "seed L1")


def test_docs_count_the_fidelity_bases():
  rows = rljax.catalog()
  counts = {b: sum(r.fidelity.basis == b for r in rows) for b in FIDELITY_BASES}
  with open(os.path.join(ROOT, "docs", "catalog.md")) as f:
    docs = f.read()
  assert "| checked against |" in docs
  assert (f"{counts['authors_code']} rows against the\nauthors' code, {counts['peer']} against a peer, "
          f"{counts['paper_formula']} against the paper's formula, {counts['abstract']} from the abstract alone") in docs


def test_name_shows_the_arguments_with_their_defaults(capsys):
  """``python -m rljax.catalog NAME`` (issue #36 item 4): each argument with its default, a required one bare."""
  from rljax.catalog import main
  assert main(["qae", "passk"]) == 0
  out = capsys.readouterr().out
  assert "qae (advantage)" in out
  assert "arguments: quantile=0.5, eps=1e-06, std_ddof=1, scale='group', interpolation='linear'" in out
  assert "arguments: k, sigma_eps=1e-06" in out and '--set "rl.advantage=passk(k=...)"' in out
  with pytest.raises(SystemExit) as e:
    main(["qea"])
  assert e.value.code == 2 and "unknown technique 'qea'; did you mean qae?" in capsys.readouterr().err


def test_markdown_lists_every_rows_arguments():
  table = as_table(markdown=True)
  assert "| name | kind | formula | arguments (defaults) | source | checked against |" in table
  row = next(l for l in table.splitlines() if l.startswith("| `qae` |"))
  assert "`quantile=0.5`, `eps=1e-06`" in row
  # a default holding backticks stays one code span
  row = next(l for l in table.splitlines() if l.startswith("| `void_turn` |"))
  assert "````code_pattern='```.*?```'````" in row
  for r in rljax.catalog():
    assert all(("=" in a) or a.isidentifier() for a in r.arguments), r.name


def test_unknown_argument_names_the_defaults():
  from rljax.recipes import stage
  with pytest.raises(ValueError, match=r"qae: unknown argument 'quantil'; its arguments are "
                                       r"\[quantile=0\.5, eps=1e-06"):
    stage("qae", quantil=0.7)


def test_a_row_declares_its_stage_and_an_unknown_name_raises():
  """One registry (issue #34 item 4): a row of a stage kind without its ``stage`` fails when it is declared (at the
  room's import); kernels, samplers and models have none. A name that matches no row raises where it is looked up."""
  from rljax._technique import Technique  # pylint: disable=import-outside-toplevel
  from rljax.recipes import stage  # pylint: disable=import-outside-toplevel
  fn = lambda: None  # noqa: E731
  assert Technique("my_adv", "advantage", fn, "A = r", "here", stage=fn).stage is fn
  assert Technique("my_kernel", "kernel", fn, "-", "here").stage is None
  with pytest.raises(ValueError, match=r"technique row 'my_adv' \(advantage\) has no stage"):
    Technique("my_adv", "advantage", fn, "A = r", "here")
  with pytest.raises(ValueError, match=r"unknown technique 'grpoo'"):
    stage("grpoo")