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


# ``"x" in <needs>`` tests still in rljax/train/ (file, need): none left, none may be added (the start-up's
# ``RunFacts.task_ids`` comes from ``task_id``'s producer, ``rljax.train._producers.FACTS``).
KNOWN_NEED_TESTS: set = set()


def need_tests_in(src: str) -> set:
  """The needs tested by name in ``src``: ``"x" in E`` / ``"x" not in E`` with ``E`` an expression whose source
  mentions ``needs`` (``self.needs``, ``recipe.needs``, ``needs``)."""
  found = set()
  for node in ast.walk(ast.parse(src)):
    if isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
      left = node.left
      if (isinstance(left, ast.Constant) and isinstance(left.value, str)
          and any("needs" in ast.unparse(c) for c in node.comparators)):
        found.add(left.value)
  return found


def test_the_need_scan_finds_a_branch_on_a_need():
  src = 'def f(self, recipe, needs):\n  if "answer_ids" in self.needs:\n    pass\n  a = "x" not in recipe.needs\n' \
        '  return "y" in needs, "z" in other\n'
  assert need_tests_in(src) == {"answer_ids", "x", "y"}


def test_no_branch_on_a_need_in_the_trainer():
  """Issue #50 item 3: each need has one producer, declared beside its StepData field (``by=``); the trainer runs
  a producer when a stage needs one of its fields (``produced_by``), never through a ``"x" in needs`` branch."""
  found = {(path.name, n) for path in sorted(TRAIN.glob("*.py")) for n in need_tests_in(path.read_text())}
  assert not found - KNOWN_NEED_TESTS, f"a branch on a need in rljax/train/ (register its producer): " \
                                       f"{sorted(found - KNOWN_NEED_TESTS)}"
  assert not KNOWN_NEED_TESTS - found, f"gone: remove from KNOWN_NEED_TESTS: {sorted(KNOWN_NEED_TESTS - found)}"


def test_the_run_facts_of_a_need_come_from_its_producer():
  """Issue #50 item 3: ``RunFacts.task_ids`` (a curriculum's arms) is given by ``task_id``'s producer at start-up,
  for a recipe that needs ``task_id`` and a task that defines task ids; nothing for a task without them."""
  import types  # pylint: disable=import-outside-toplevel
  from rljax.train._producers import FACTS  # pylint: disable=import-outside-toplevel
  task = types.SimpleNamespace(task_id=lambda p: p % 3, num_tasks=3)
  assert FACTS["task_id"](task, [4, 5, 6, 9]) == {"task_ids": (1, 2, 0, 0)}
  assert FACTS["task_id"](types.SimpleNamespace(task_id=lambda p: 0), [1]) == {}  # no num_tasks: no task ids


def test_every_need_declares_one_producer_and_the_scoring_ones_are_registered():
  import dataclasses  # pylint: disable=import-outside-toplevel
  from rljax.stages import NEEDS, PRODUCERS, StepData, produced_by  # pylint: disable=import-outside-toplevel
  from rljax.train._producers import SCORING  # pylint: disable=import-outside-toplevel
  declared = {f.name: f.metadata["by"] for f in dataclasses.fields(StepData) if "need" in f.metadata}
  assert set(declared) == set(NEEDS) and set(declared.values()) <= set(PRODUCERS)
  assert {n for p in PRODUCERS for n in produced_by(p)} == set(NEEDS)  # each need: exactly one producer
  assert sum(len(produced_by(p)) for p in PRODUCERS) == len(NEEDS)
  assert set(SCORING) == produced_by("scoring") == {"answer_ids", "step_rewards", "task_id"}
  from rljax.train._producers import FACTS  # pylint: disable=import-outside-toplevel
  assert set(FACTS) <= set(SCORING)  # the run facts come from a need's one producer
  assert produced_by("reference forward") == {"logp_ref", "entropy_ref", "logp_teacher"}
  assert produced_by("policy forward") == {"logp_old", "entropy_old"}


def test_a_need_without_a_known_producer_is_refused():
  import pytest  # pylint: disable=import-outside-toplevel
  from rljax.stages import produced_by  # pylint: disable=import-outside-toplevel
  from rljax.stages._data import _field  # pylint: disable=import-outside-toplevel
  with pytest.raises(ValueError, match="by='oracle' must be one of"):
    _field("rows", None, need="x", by="oracle")
  with pytest.raises(ValueError, match="unknown producer 'oracle'"):
    produced_by("oracle")


def test_the_scoring_producers_against_hand_values():
  from rljax.train._producers import SCORING  # pylint: disable=import-outside-toplevel

  class Task:
    num_tasks = 3

    def task_id(self, p):
      return {"a": 0, "b": 2}[p]

    def step_rewards(self, completions, problems):
      return [[1, 0]] * len(completions), [[True, False]] * len(problems)

  index = {"7": 0}
  out = SCORING["answer_ids"](Task(), index, [" 7", "8 ", "7", "9"], ("a",) * 4)
  assert out["answer_ids"].tolist() == [0, 1, 0, 2] and out["answer_ids"].dtype == "int32"
  assert index == {"7": 0, "8": 1, "9": 2}  # shared by the step's rounds
  out = SCORING["task_id"](Task(), {}, ["x", "y"], ("a", "b"))
  assert out["task_id"].tolist() == [0, 2] and out["num_tasks"] == 3
  out = SCORING["step_rewards"](Task(), {}, ["x", "y"], ("a", "b"))
  assert out["step_rewards"].dtype == "float32" and out["step_mask"].tolist() == [[True, False]] * 2


def _extras_keys(src: str) -> set:
  """String keys read or written on an ``extras`` mapping in ``src``: ``extras["k"]``, ``extras.get("k")`` /
  ``setdefault`` / ``pop``, ``"k" in extras`` and ``extras={"k": ...}``."""
  keys = set()
  for n in ast.walk(ast.parse(src)):
    if (isinstance(n, ast.Subscript) and "extras" in ast.unparse(n.value) and isinstance(n.slice, ast.Constant)
        and isinstance(n.slice.value, str)):
      keys.add(n.slice.value)
    elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("get", "setdefault", "pop")
          and "extras" in ast.unparse(n.func.value) and n.args and isinstance(n.args[0], ast.Constant)):
      keys.add(n.args[0].value)
    elif (isinstance(n, ast.Compare) and isinstance(n.left, ast.Constant) and isinstance(n.left.value, str)
          and any("extras" in ast.unparse(c) for c in n.comparators)):
      keys.add(n.left.value)
    elif isinstance(n, ast.keyword) and n.arg == "extras" and isinstance(n.value, ast.Dict):
      keys |= {k.value for k in n.value.keys if isinstance(k, ast.Constant)}
  return keys


def test_every_extras_key_the_library_uses_is_declared():
  """Issue #50 item 3: the extras stages write and read are declared once (``rljax.stages.EXTRAS``: dtype, shape,
  writer), not string keys known only to the modules that use them. ``reward_segments`` is a StepData field (its
  ``extra=`` key), declared there."""
  from rljax.stages import EXTRAS  # pylint: disable=import-outside-toplevel
  assert _extras_keys('d.extras["a"]; x.extras.get("b"); "c" in data.extras; d.replace(extras={"e": 1})\n') == \
      {"a", "b", "c", "e"}
  used = {}
  for path in sorted((TRAIN.parent).rglob("*.py")):
    for key in _extras_keys(path.read_text()):
      used.setdefault(key, []).append(str(path.relative_to(TRAIN.parent.parent)))
  assert set(used) - {"reward_segments"} <= set(EXTRAS), f"undeclared extras keys: {sorted(set(used) - set(EXTRAS))}"
  # the declared ones are typed attributes (data.replay_mask) written by with_extras: no string key anywhere
  # (before: replay_mask 17 reads, role_id 5, logp_prm 4, replay_slot / policy_version / hint_mask 3 each)
  strings = {k: v for k, v in used.items() if k in EXTRAS}
  assert not strings, f"declared extras read or written by string key (use data.<name> / with_extras): {strings}"


def test_the_declared_extras_are_typed_attributes_and_a_misspelt_one_fails_loudly():
  """Issue #50 item 3: ``data.<extra>`` for each entry of ``EXTRAS`` (None when absent), ``with_extras`` checks the
  name, the NumPy kind and the shape against the declaration; a misspelt name raises instead of reading None."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import pytest  # pylint: disable=import-outside-toplevel
  from rljax.stages import EXTRAS, probe_step  # pylint: disable=import-outside-toplevel
  data = probe_step()
  b, t = data.tokens.shape
  assert all(getattr(data, n) is None for n in EXTRAS)
  mask, version = np.arange(b) % 2 == 0, np.full((b, t), 3, np.int32)
  out = data.with_extras(replay_mask=mask, policy_version=version)
  assert out.replay_mask is mask and out.policy_version is version and out.hint_mask is None
  assert list(out.extras) == ["replay_mask", "policy_version"] and data.extras == {}  # a new step, in order
  assert out.replace(extras={**out.extras, "mine": 1}).with_extras(replay_mask=None).extras.keys() == \
      {"policy_version", "mine"}  # None removes; a stage's own key is kept
  assert out.take(np.arange(2)).replay_mask.tolist() == mask[:2].tolist()  # a per-row extra follows the rows
  with pytest.raises(AttributeError, match=r"no field or declared extra 'replay_msk'; .*'replay_mask'"):
    _ = data.replay_msk  # noqa: F841 - a misspelt read
  with pytest.raises(AttributeError):
    _ = data._replay_mask  # noqa: F841 - a private name is never an extra
  with pytest.raises(ValueError, match=r"undeclared extras \['replay_msk'\]; the declared ones .*'replay_mask'"):
    data.with_extras(replay_msk=mask)
  with pytest.raises(ValueError, match=r"extras\['replay_mask'\] .* kind 'b' and shape \(%d,\), got float32" % b):
    data.with_extras(replay_mask=mask.astype(np.float32))
  with pytest.raises(ValueError, match=r"extras\['policy_version'\] .* shape \(%d, %d\), got int32 of shape \(%d,\)"
                     % (b, t, b)):
    data.with_extras(policy_version=np.zeros(b, np.int32))


def test_each_extra_is_declared_by_its_writers_module_and_gathered_like_the_rooms_techniques():
  """Issue #50 item 3: each declared extra lives in the module that writes it (a module-level ``EXTRAS``), not in a
  central table; ``rljax.stages.EXTRAS`` gathers them from every module of the rooms (as ``gather_room`` gathers
  ``TECHNIQUES``), and the readers read them typed (``data.<name>``, ``REPLAY_MASK.of(batch)``)."""
  import importlib  # pylint: disable=import-outside-toplevel
  from rljax.stages import EXTRAS, Extra  # pylint: disable=import-outside-toplevel
  writers = {"replay_mask": "rljax.replay._stages", "replay_slot": "rljax.replay._stages",
             "hint_mask": "rljax.hints._stages", "role_id": "rljax.train._episodes",
             "policy_version": "rljax.train._async", "logp_prm": "rljax.advantages._stages"}
  assert set(EXTRAS) == set(writers)
  for name, module in writers.items():
    assert any(e is EXTRAS[name] for e in importlib.import_module(module).EXTRAS), (name, module)
  # no declaration left in rljax/stages: the package defines the record and gathers, nothing more
  stages = TRAIN.parent / "stages"
  calls = [(p.name, n.lineno) for p in stages.glob("*.py") for n in ast.walk(ast.parse(p.read_text()))
           if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "Extra"]
  assert not calls, f"extras declared in rljax/stages (declare them in the writer's module): {calls}"
  assert all(isinstance(e, Extra) and e.name == n for n, e in EXTRAS.items())


def test_a_new_modules_extras_are_gathered_and_a_name_declared_twice_raises(tmp_path, monkeypatch):
  import sys  # pylint: disable=import-outside-toplevel
  import pytest  # pylint: disable=import-outside-toplevel
  from rljax.stages import _extras  # pylint: disable=import-outside-toplevel
  room = tmp_path / "w50room"
  room.mkdir()
  (room / "__init__.py").write_text("")
  (room / "_writer.py").write_text("from rljax.stages import Extra\n"
                                   "MINE = Extra('mine_mask', 'b', 'B', 'a test writer', 'a test extra')\n"
                                   "EXTRAS = (MINE,)\n")
  monkeypatch.syspath_prepend(str(tmp_path))
  monkeypatch.setattr(_extras, "EXTRA_ROOMS", (*_extras.EXTRA_ROOMS, "w50room"))
  table, complete = _extras.gather()
  assert complete and table["mine_mask"] is sys.modules["w50room._writer"].MINE
  assert {"replay_mask", "role_id"} <= set(table)
  (room / "_again.py").write_text("from rljax.stages import Extra\n"
                                  "EXTRAS = (Extra('mine_mask', 'b', 'B', 'another writer', 'the same name'),)\n")
  with pytest.raises(ValueError, match=r"extra 'mine_mask' is declared twice: in w50room._again and "
                                       r"w50room._writer"):
    _extras.gather()
  (room / "_again.py").write_text("EXTRAS = ('mine_mask',)\n")
  sys.modules.pop("w50room._again")
  with pytest.raises(TypeError, match=r"w50room._again.EXTRAS must hold rljax.stages.Extra records"):
    _extras.gather()
  for name in [n for n in sys.modules if n.split(".")[0] == "w50room"]:
    monkeypatch.delitem(sys.modules, name)


def test_the_extras_rooms_are_the_catalogs_and_no_table_is_kept_while_an_rljax_module_imports(monkeypatch):
  """The rooms read are the catalog's and the trainer; a table gathered while some rljax module is being imported
  (a stage read at import time) imports nothing, reads the loaded modules and is not kept."""
  import importlib.machinery  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel
  import types  # pylint: disable=import-outside-toplevel
  from rljax.catalog import _ROOMS  # pylint: disable=import-outside-toplevel
  from rljax.stages import _extras  # pylint: disable=import-outside-toplevel
  assert set(_extras.EXTRA_ROOMS) == {*_ROOMS, "rljax.train"}
  partial = types.ModuleType("rljax._w50_partial")
  partial.__spec__ = importlib.machinery.ModuleSpec("rljax._w50_partial", None)
  partial.__spec__._initializing = True  # pylint: disable=protected-access
  monkeypatch.setitem(sys.modules, "rljax._w50_partial", partial)
  table, complete = _extras.gather()
  assert not complete and "replay_mask" in table  # the rooms already loaded are read
  fresh = _extras._Table()  # pylint: disable=protected-access
  assert "replay_mask" in fresh and fresh._kept is None  # pylint: disable=protected-access
  monkeypatch.delitem(sys.modules, "rljax._w50_partial")
  assert "replay_mask" in fresh and fresh._kept is not None  # pylint: disable=protected-access


def test_the_start_up_contract_refuses_a_declared_extra_of_the_wrong_dtype_or_shape():
  import numpy as np  # pylint: disable=import-outside-toplevel
  import pytest  # pylint: disable=import-outside-toplevel
  from rljax.stages import probe_step  # pylint: disable=import-outside-toplevel
  from rljax.train._contracts import Dims, check  # pylint: disable=import-outside-toplevel
  data = probe_step()
  b, t = data.tokens.shape
  dims = Dims(b=b, t=t, p=int(data.num_groups), g=b // int(data.num_groups), n=8, valid=np.ones(b, bool),
              loss_mask=np.ones((b, t), bool))
  good = data.replace(extras={"replay_mask": np.zeros(b, bool), "policy_version": np.zeros((b, t), np.int32),
                              "mine": "a user's key is not checked"})
  assert check("replay", "rl.replay stage 'r'", (good, None, {}), dims)[0] is good
  for extras, match in [({"replay_mask": np.zeros(b, np.float32)}, r"extras\['replay_mask'\] .* of dtype float32, "
                                                                      r"not bool"),
                        ({"replay_mask": np.zeros(b + 1, bool)}, r"extras\['replay_mask'\] .* of shape \(%d,\)" % (b + 1)),
                        ({"policy_version": np.zeros(b, np.int32)}, r"extras\['policy_version'\] .* of shape"),
                        ({"replay_masks": np.zeros(b, bool)}, r"extras\['replay_masks'\] is not declared .* did you "
                                                              r"mean 'replay_mask'")]:
    with pytest.raises(ValueError, match=match):
      check("replay", "rl.replay stage 'r'", (data.replace(extras=extras), None, {}), dims)
