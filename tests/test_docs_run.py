"""Every ```python block of README.md, docs/*.md and the notebooks' markdown cells runs (one test per block).

The convention for placeholders (the reader never fills one in):

* A block imports or defines every library name it uses. A name it uses without binding it must be one of
  the *data placeholders* below (``model``, ``tokens``, ``batch``, ...): the test binds it to a tiny fixture
  before running the block. Any other unbound name fails the test ("uses `O` without importing it").
* A string literal in ``PATHS`` (a checkpoint or data directory such as ``"/path/to/Qwen2.5-0.5B"``) is
  replaced by a tiny fixture directory the test writes; any other ``"/path/to/..."`` literal fails.
* Each block runs in a fresh namespace, in its own temporary working directory (``runs/...`` land there).
  Blocks that train use ``tiny_config`` and a few steps themselves; most of the file's time is compiling
  (the first tiny training run, the sampler, the sharded step).
* ``CHECKS`` holds extra assertions for some blocks, keyed by ``file:index`` and pinned to a snippet of the
  block (a moved block fails loudly instead of checking the wrong one).

Placeholder shapes: B = 8 rows in P = 2 groups of 4, T = 16 tokens, the ``ModelConfig.tiny()`` model (V=128).
"""
import builtins
import glob
import json
import math
import os
import re
import symtable

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
B, P, T = 8, 2, 16


def _python_blocks(text: str) -> list:
  return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def _sources() -> list:
  """``(id, source)`` for every python block, id = ``file:index``."""
  out = []
  for path in ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md"))):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
      out += [(f"{path}:{i}", b) for i, b in enumerate(_python_blocks(f.read()))]
  for path in sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb"))):
    with open(path, encoding="utf-8") as f:
      cells = json.load(f)["cells"]
    md = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    rel = os.path.relpath(path, ROOT)
    out += [(f"{rel}:{i}", b) for i, b in enumerate(_python_blocks(md))]
  return out


BLOCKS = _sources()


def _read_before_bound(src: str) -> set:
  """Top-level names read by a statement before any earlier statement bound them (``batch = batch.replace(...)``).

  Function and class bodies and lambdas are skipped (they run later; ``free_names`` covers them)."""
  import ast  # pylint: disable=import-outside-toplevel
  bound, early = set(), set()
  deferred = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)

  def loads(node):
    if isinstance(node, deferred):
      return
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
      yield node.id
    for child in ast.iter_child_nodes(node):
      yield from loads(child)

  for stmt in ast.parse(src).body:
    if isinstance(stmt, deferred):
      for d in getattr(stmt, "decorator_list", []) + getattr(stmt, "bases", []):
        early |= set(loads(d)) - bound
      if not isinstance(stmt, ast.ClassDef):
        for d in stmt.args.defaults + [d for d in stmt.args.kw_defaults if d is not None]:
          early |= set(loads(d)) - bound
    else:
      # names a loop, a ``with ... as`` or a walrus binds before the statement's body reads them
      binders = [n.target for n in ast.walk(stmt) if isinstance(n, (ast.For, ast.AsyncFor, ast.NamedExpr))]
      binders += [i.optional_vars for n in ast.walk(stmt) if isinstance(n, (ast.With, ast.AsyncWith))
                  for i in n.items if i.optional_vars is not None]
      inner = {n.id for b in binders for n in ast.walk(b) if isinstance(n, ast.Name)}
      early |= set(loads(stmt)) - bound - inner
    for node in ast.walk(stmt):
      if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        bound.add(node.id)
      elif isinstance(node, (ast.Import, ast.ImportFrom)):
        bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(stmt, deferred) and not isinstance(stmt, ast.Lambda):
      bound.add(stmt.name)
  return early


def free_names(src: str) -> set:
  """Names a block reads without importing, defining or assigning them first (in any scope), minus builtins."""
  top = symtable.symtable(src, "block", "exec")
  bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
  used = set()

  def walk(table, is_top):
    for s in table.get_symbols():
      if s.is_referenced() and (is_top or s.is_global()):
        used.add(s.get_name())
    for child in table.get_children():
      walk(child, False)

  walk(top, True)
  return ((used - bound) | (_read_before_bound(src) & bound)) - set(dir(builtins))


# ---------------------------------------------------------------- placeholders (lazily built, cached per module)

class Fixtures:
  """The data placeholders a block may use unbound, and the directories behind ``PATHS``."""

  def __init__(self, tmp_factory):
    self._tmp = tmp_factory
    self._cache = {}

  def get(self, name):
    if name == "model":  # fresh each time: a block may donate its parameters to a train step
      return self._model()
    if name not in self._cache:
      self._cache[name] = getattr(self, "_" + name)()
    return self._cache[name]

  # models and token arrays
  def _model(self):
    from flax import nnx
    from rljax.models import ModelConfig, Transformer
    return Transformer(ModelConfig.tiny(), rngs=nnx.Rngs(0))

  def _tokens(self):
    import jax.numpy as jnp
    return jnp.asarray(np.random.default_rng(0).integers(1, 128, (B, T)), jnp.int32)

  def _positions(self):
    import jax.numpy as jnp
    return jnp.broadcast_to(jnp.arange(T, dtype=jnp.int32), (B, T))

  def _prompts(self):
    return [[1, 5, 7], [3, 9, 11, 4]]

  def _key(self):
    import jax
    return jax.random.key(0)

  def _k0(self):
    import jax
    return jax.random.key(1)

  def _k1(self):
    import jax
    return jax.random.key(2)

  def _eos_id(self):
    return 2

  def _step(self):
    return 0

  def _tool_output_ids(self):
    return [[40, 41]] * (P * 4)  # one observation per row of a 2-prompt, n=4 rollout

  def _still_running(self):
    return [True] * (P * 4)

  # objective inputs
  def _group_id(self):
    import jax.numpy as jnp
    return jnp.repeat(jnp.arange(P, dtype=jnp.int32), B // P)

  def _rewards(self):
    import jax.numpy as jnp
    return jnp.asarray([1, 0, 0, 1, 1, 1, 1, 1], jnp.float32)

  def _correct(self):
    return self.get("rewards")

  def _P(self):  # pylint: disable=invalid-name
    return P

  def _batch(self):
    import jax.numpy as jnp
    from rljax.types import TrainBatch
    mask = jnp.zeros((B, T), bool).at[:, 4:].set(True)
    logp = -jnp.abs(jnp.asarray(np.random.default_rng(1).normal(size=(B, T)), jnp.float32)) * mask
    return TrainBatch.create(tokens=self.get("tokens"), loss_mask=mask,
                             advantages=jnp.where(mask, jnp.linspace(-1, 1, B)[:, None], 0.0),
                             group_id=self.get("group_id"), rewards=self.get("rewards"),
                             logp_behavior=logp, logp_old=logp, logp_ref=logp - 0.01 * mask)

  def _out(self):  # the current policy: the batch's old log-probs moved a little (no model needed)
    import jax.numpy as jnp
    from rljax.types import PolicyOutputs
    batch = self.get("batch")
    noise = jnp.asarray(np.random.default_rng(5).normal(scale=0.1, size=(B, T)), jnp.float32)
    return PolicyOutputs.create(logp=batch.logp_old + noise * batch.loss_mask, entropy=jnp.full((B, T), 1.5) * batch.loss_mask)

  def _global_den(self):
    return self.get("batch").loss_mask.sum()

  def _rollout(self):
    import jax.numpy as jnp
    from rljax.types import Rollout
    tokens = self.get("tokens")
    prompt = jnp.zeros((B, T), bool).at[:, :4].set(True)
    completion = jnp.arange(T)[None, :] < 4 + jnp.arange(3, 3 + B)[:, None]  # B completions of 3..10 tokens
    completion &= ~prompt
    return Rollout(tokens=tokens, prompt_mask=prompt, completion_mask=completion,
                   logp_behavior=jnp.where(completion, -0.5, 0.0), group_id=self.get("group_id"),
                   policy_version=jnp.zeros((B,), jnp.int32))

  def _completions(self):
    return ["3 + 4 = 7, so the answer is \\boxed{7}", "the answer is 8"]

  def _references(self):
    return ["7", "9"]

  # kernels
  def _hidden(self):
    import jax.numpy as jnp
    return jnp.asarray(np.random.default_rng(2).normal(size=(32, 16)), jnp.float32)

  def _weight(self):
    import jax.numpy as jnp
    return jnp.asarray(np.random.default_rng(3).normal(size=(16, 64)) / 4, jnp.float32)

  def _targets(self):
    import jax.numpy as jnp
    return jnp.asarray(np.random.default_rng(4).integers(0, 64, 32), jnp.int32)

  # training
  def _optimizer(self):
    import optax
    return optax.adam(1e-3)

  def _total_steps(self):
    return 10

  def _loss_fn(self):
    from rljax.objectives import chain, ppo_clip
    from rljax.train import objective_loss
    return objective_loss(lambda hp: chain(ppo_clip(0.2, 0.28)))

  # directories behind PATHS
  def hf_checkpoint(self):
    if "hf_checkpoint" not in self._cache:
      from rljax.models import save_pretrained
      path = str(self._tmp.mktemp("hf_checkpoint"))
      save_pretrained(self.get("model"), path)
      self._cache["hf_checkpoint"] = path
    return self._cache["hf_checkpoint"]

  def tfds_dir(self):
    if "tfds_dir" not in self._cache:
      from test_gsm8k import write_tiny_gsm8k  # pylint: disable=import-outside-toplevel
      self._cache["tfds_dir"] = write_tiny_gsm8k(self._tmp.mktemp("tfds"))
    return self._cache["tfds_dir"]

  def data_dir(self):
    return str(self._tmp.mktemp("rljax_data"))

  def gguf_file(self):
    if "gguf_file" not in self._cache:
      from test_gguf import write_tiny_gguf  # pylint: disable=import-outside-toplevel
      self._cache["gguf_file"] = write_tiny_gguf(self._tmp.mktemp("gguf") / "model.Q4_K_M.gguf")
    return self._cache["gguf_file"]


PLACEHOLDERS = {name[1:] for name in vars(Fixtures) if name.startswith("_") and not name.startswith("__")}
PATHS = {"/path/to/Qwen2.5-0.5B": Fixtures.hf_checkpoint, "/data/tfds": Fixtures.tfds_dir,
         "/tmp/rljax_data": Fixtures.data_dir, "/path/to/model.Q4_K_M.gguf": Fixtures.gguf_file}


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
  return Fixtures(tmp_path_factory)


# ---------------------------------------------------------------- extra checks for some blocks

def _check_recipes_0(ns, out, cwd):
  assert "ppo_clip(eps_low=0.2, eps_high=0.28)" in out  # the describe() printed
  assert os.path.exists(cwd / "runs" / "recipe_demo" / "summary.json")


def _check_recipes_1(ns, out, cwd):
  assert os.path.exists(cwd / "runs" / "my_recipe" / "metrics.jsonl")
  assert len(ns["rows"]) == 3 and all("some_close/kept_groups" in r for r in ns["rows"])


def _check_readme_recipe(ns, out, cwd):
  assert os.path.exists(cwd / "runs" / "readme" / "summary.json")


def _finite_loss(ns, out, cwd):
  assert math.isfinite(float(ns["loss"]))


def _check_advantages_0(ns, out, cwd):
  # hand-derived: group 0 rewards (1, 0, 0): mean 1/3, unbiased std sqrt(1/3); group 1 all equal -> 0
  s = math.sqrt(1 / 3)
  np.testing.assert_allclose(np.asarray(ns["adv"]), [(2 / 3) / (s + 1e-6), -(1 / 3) / (s + 1e-6),
                                                     -(1 / 3) / (s + 1e-6), 0, 0, 0], rtol=1e-5)
  assert np.asarray(ns["adv_tokens"]).shape == (6, 4)


def _check_own_loop(ns, out, cwd):
  """The hand-built PolicyOutputs equal the fused ``policy_outputs`` on the trained tokens; the gradient is non-zero."""
  import jax  # pylint: disable=import-outside-toplevel
  from rljax.models import policy_outputs  # pylint: disable=import-outside-toplevel
  batch, mask = ns["batch"], np.asarray(ns["batch"].loss_mask, bool)
  assert math.isfinite(float(ns["loss"])) and mask.any()
  # the PolicyOutputs the block's loss_fn builds: the objective's first argument, returned from one jit
  from flax import nnx  # pylint: disable=import-outside-toplevel
  seen, objective = {}, ns["objective"]
  ns["objective"] = lambda out, b: (seen.__setitem__("out", out), objective(out, b))[1]
  hand = nnx.jit(lambda m: (ns["loss_fn"](m), seen["out"])[1])(ns["model"])
  ref = policy_outputs(ns["model"], batch.tokens)
  np.testing.assert_allclose(np.asarray(hand.logp)[mask], np.asarray(ref.logp)[mask], rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(np.asarray(hand.entropy)[mask], np.asarray(ref.entropy)[mask], rtol=1e-5, atol=1e-5)
  assert any(float(abs(g).max()) > 0 for g in jax.tree_util.tree_leaves(ns["grads"]))


def _check_sampling_1(ns, out, cwd):
  assert ns["rollout"].tokens.shape[1] == ns["config"].cache_size


CHECKS = {
    "docs/recipes.md:0": ("describe()", _check_recipes_0),
    "docs/recipes.md:1": ("median_baseline", _check_recipes_1),
    "README.md:1": ("runs/readme", _check_readme_recipe),
    "README.md:0": ("O.chain", _finite_loss),
    "docs/objectives.md:0": ("O.chain", _finite_loss),
    "docs/objectives.md:1": ("PolicyOutputs.create", _check_own_loop),
    "docs/advantages.md:0": ("A.grpo", _check_advantages_0),
    "docs/sampling.md:1": ("resume(", _check_sampling_1),
}


def test_every_check_is_on_its_block():
  ids = dict(BLOCKS)
  for bid, (snippet, _) in CHECKS.items():
    assert bid in ids and snippet in ids[bid], f"CHECKS[{bid!r}] no longer matches its block (moved?)"


def test_free_names():
  assert free_names("import x\ny = x + z\ndef f(a=d):\n  return a + w + y\n[q for q in v]") == {"z", "w", "v", "d"}
  assert free_names("b = b.replace(1)\nc = 1\nc = c + 1") == {"b"}
  assert free_names("with open('x') as f:\n  for a in range(2):\n    f.write(a + z)") == {"z"}


# the README's blocks run in the fast loop; the docs' and notebooks' blocks are long guards (`pytest -m long`)
@pytest.mark.parametrize("bid,src", [pytest.param(b, s, id=b, marks=() if b.startswith("README.md:") else
                                                  pytest.mark.long) for b, s in BLOCKS])
def test_block_runs(bid, src, fixtures, tmp_path, monkeypatch, capsys):
  monkeypatch.chdir(tmp_path)
  monkeypatch.setenv("RLJAX_CACHE", str(tmp_path / "rljax_cache"))  # a GGUF file converts into the test's own cache
  for literal in set(re.findall(r"""["'](/path/to/[^"']*|/data/[^"']*|/tmp/[^"']*)["']""", src)):
    assert literal in PATHS, f"{bid}: path literal {literal!r} has no fixture in PATHS"
    src = src.replace(f'"{literal}"', repr(PATHS[literal](fixtures))).replace(f"'{literal}'",
                                                                            repr(PATHS[literal](fixtures)))
  unbound = free_names(src)
  missing = sorted(unbound - PLACEHOLDERS)
  assert not missing, f"{bid} uses {missing} without importing or defining them (placeholders: {sorted(PLACEHOLDERS)})"
  ns = {"__name__": "__docs_block__"}
  ns.update({name: fixtures.get(name) for name in unbound})
  exec(compile(src, bid, "exec"), ns)  # pylint: disable=exec-used
  out = capsys.readouterr().out
  if bid in CHECKS:
    CHECKS[bid][1](ns, out, tmp_path)


def test_needs_table_is_current():
  from rljax.recipes.__main__ import table  # pylint: disable=import-outside-toplevel
  with open(os.path.join(ROOT, "docs", "recipes.md"), encoding="utf-8") as f:
    assert table(markdown=True) in f.read(), "docs/recipes.md is stale: python -m rljax.recipes --markdown"


def test_docs_say_which_way_to_give_a_loss():
  """issue #36 item 7: Recipe.loss, objective_fn= and O.chain, and when to use each, in one place the others
  link to."""
  with open(os.path.join(ROOT, "docs", "objectives.md"), encoding="utf-8") as f:
    text = f.read()
  section = text.split("## Which way to give a loss\n", 1)[1].split("\n## ", 1)[0]
  for way in ("**`Recipe(loss=...)`**", "**`train(cfg, objective_fn=...)`**", "**`O.chain(...)`**", "Rule of thumb"):
    assert way in section, way
  for doc in ("recipes.md", "training.md"):
    with open(os.path.join(ROOT, "docs", doc), encoding="utf-8") as f:
      assert "(objectives.md#which-way-to-give-a-loss)" in f.read(), doc
