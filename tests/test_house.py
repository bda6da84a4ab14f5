"""The house's import rules (issue #34 item 7), as a ratchet: no room (a subpackage of ``rljax``, or a top-level
module) imports another room's private module, and rooms import each other without cycles. The imports that break
the rules today are listed below; a new one fails here, naming the file, line and module, and a listed one that is
gone must leave the list (so the list only shrinks)."""
import ast
import os

import rljax

ROOT = os.path.dirname(rljax.__file__)

# (importing file, imported private module) that predate this test: none left, never to be added to
KNOWN_PRIVATE: set = set()
# pairs of rooms on an import cycle (module-level and lazy imports alike) that predate this test: none left, never
# to be added to
KNOWN_CYCLES: set = set()


def _is_module(module: str) -> bool:
  path = os.path.join(ROOT, *module.split(".")[1:])
  return os.path.isfile(path + ".py") or os.path.isdir(path)


def _imports():
  """``(file relative to rljax/, line, room of the file, imported module)`` of every ``rljax`` import."""
  out = []
  for folder, _, files in os.walk(ROOT):
    for name in sorted(files):
      if not name.endswith(".py"):
        continue
      path = os.path.join(folder, name)
      rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
      room = rel.split("/")[0][:-3] if "/" not in rel else rel.split("/")[0]
      with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
      for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("rljax."):
          out.append((rel, node.lineno, room, node.module))
          # ``from rljax.room import _module`` imports that private module too (a private function is not one)
          out += [(rel, node.lineno, room, f"{node.module}.{a.name}") for a in node.names
                  if a.name.startswith("_") and not a.name.startswith("__")
                  and _is_module(f"{node.module}.{a.name}")]
        elif isinstance(node, ast.Import):
          out += [(rel, node.lineno, room, a.name) for a in node.names if a.name.startswith("rljax.")]
  return out


def _private(module: str) -> bool:
  return any(part.startswith("_") and not part.startswith("__") for part in module.split(".")[2:])


def _cycles(edges: dict) -> set:
  """The pairs ``(a, b)``, sorted, of nodes that reach each other along ``edges`` (``{node: set of nodes}``)."""

  def reaches(a, b):
    seen, todo = set(), [a]
    while todo:
      for c in edges.get(todo.pop(), ()):
        if c == b:
          return True
        if c not in seen:
          seen.add(c)
          todo.append(c)
    return False

  return {tuple(sorted((a, b))) for a in edges for b in edges[a] if reaches(b, a)}


def test_no_new_import_of_another_rooms_private_module():
  found = {}
  for rel, line, room, module in _imports():
    if module.split(".")[1] != room and _private(module):
      found.setdefault((rel, module), line)
  new = sorted(f"rljax/{rel}:{line} imports {module}" for (rel, module), line in found.items()
               if (rel, module) not in KNOWN_PRIVATE)
  assert not new, "a room imports another room's private module (import its public name instead):\n" + "\n".join(new)
  gone = sorted(KNOWN_PRIVATE - set(found))
  assert not gone, f"no longer imported: remove from KNOWN_PRIVATE: {gone}"


def test_no_new_import_cycle_between_rooms():
  edges = {}
  for _, _, room, module in _imports():
    target = module.split(".")[1]
    if target != room:
      edges.setdefault(room, set()).add(target)
  cycles = _cycles(edges)
  new = sorted(cycles - KNOWN_CYCLES)
  assert not new, f"rooms that now import each other (directly or through others): {new}"
  gone = sorted(KNOWN_CYCLES - cycles)
  assert not gone, f"cycles no longer there: remove from KNOWN_CYCLES: {gone}"


def _room_edges(room: str) -> dict:
  """``{module: modules of the same room it imports}`` (dotted names under ``rljax.<room>``; module-level and
  deferred imports alike; ``from rljax.room import name`` counts when ``name`` is a module of the room)."""
  folder, edges = os.path.join(ROOT, room), {}
  for base, _, files in os.walk(folder):
    for name in files:
      if not name.endswith(".py"):
        continue
      rel = os.path.relpath(os.path.join(base, name), ROOT)[:-3].replace(os.sep, ".")
      me = "rljax." + (rel[:-len(".__init__")] if rel.endswith(".__init__") else rel)
      with open(os.path.join(base, name), encoding="utf-8") as f:
        tree = ast.parse(f.read())
      for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
          targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
          targets = [a.name for a in node.names]
        else:
          continue
        for t in targets:
          if t.startswith(f"rljax.{room}.") and t != me and _is_module(t):
            edges.setdefault(me, set()).add(t)
  return edges


def _rooms() -> list:
  return sorted(n for n in os.listdir(ROOT) if os.path.isfile(os.path.join(ROOT, n, "__init__.py")))


def test_the_room_walk_sees_deferred_imports():
  """The walk counts an import inside a function (``_startup``'s deferred ``_rollout`` and ``_controllers``
  imports) as an edge."""
  edges = _room_edges("train")
  assert "rljax.train._phases" in edges["rljax.train._startup"]
  assert {"rljax.train._rollout", "rljax.train._controllers"} <= edges["rljax.train._startup"]  # only in functions
  assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {("a", "b"), ("b", "c"), ("a", "c")}


def test_no_import_cycle_between_the_modules_of_a_room():
  """Issue #50 item 7: no room has an import cycle between its modules, module-level or deferred imports alike
  (a deferred import hides a cycle from Python, not from a reader)."""
  cycles = {room: sorted(_cycles(_room_edges(room))) for room in _rooms()}
  cycles = {room: c for room, c in cycles.items() if c}
  assert not cycles, f"modules of a room that import each other (directly or through others): {cycles}"


MODULE_LINES = 600


def test_a_module_over_600_lines_says_why_in_its_docstring():
  """Issue #50 item 7: small modules, one concern each; a module of rljax/ over ``MODULE_LINES`` lines carries a
  line starting ``Size:`` in its docstring saying why it stays whole."""
  unexplained = []
  for folder, _, files in os.walk(ROOT):
    for name in sorted(files):
      if not name.endswith(".py"):
        continue
      path = os.path.join(folder, name)
      with open(path, encoding="utf-8") as f:
        text = f.read()
      if text.count("\n") + (not text.endswith("\n")) <= MODULE_LINES:
        continue
      doc = ast.get_docstring(ast.parse(text)) or ""
      if not any(line.startswith("Size: ") and len(line) > len("Size: ") + 20 for line in doc.split("\n")):
        unexplained.append(f"rljax/{os.path.relpath(path, ROOT)} ({text.count(chr(10))} lines)")
  assert not unexplained, (f"modules over {MODULE_LINES} lines without a 'Size: <reason>' line in their docstring "
                           f"(split them by concern, or say why not): {unexplained}")
