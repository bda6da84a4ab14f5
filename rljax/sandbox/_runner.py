"""``run_python``: one piece of model-written Python in the sandbox, from the trainer's side.

The trainer never runs the code itself: it writes it to a fresh temporary directory, starts the launcher
(``_launch.py``, which applies the layers and only then ``execve``s the interpreter), reads stdout/stderr up to
the cap, and kills the launcher (hence, through ``PR_SET_PDEATHSIG``, the sandbox's PID namespace and every
process in it) at the wall-clock limit or when an output stream overflows.
"""
from __future__ import annotations

import functools
import json
import os
import selectors
import shutil
import signal as _signal
import subprocess
import sys
import tempfile
import time

from rljax.sandbox._config import REQUIRED_LAYERS, SandboxConfig, SandboxResult, SandboxUnavailable

_LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_launch.py")
_SYSTEM_READ = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/etc/ld.so.cache", "/etc/localtime")
_GRACE_S = 2.0  # after killing the launcher: time for the namespace to die and the pipes to close


def _python_prefixes(python: str) -> tuple:
  """Directories the interpreter reads: its real executable's prefix and (for the current one) sys prefixes."""
  real = os.path.realpath(python)
  dirs = {os.path.dirname(os.path.dirname(real)), os.path.dirname(python)}
  if python == sys.executable:
    dirs |= {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
  else:
    dirs |= {os.path.dirname(os.path.dirname(os.path.abspath(python)))}
  return tuple(sorted(d for d in dirs if d and d != "/"))


def _env(tmp: str) -> dict:
  """The code's whole environment: nothing of the trainer's (no tokens, no keys) crosses."""
  return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": tmp, "TMPDIR": tmp, "LANG": "C.UTF-8",
          "LC_ALL": "C.UTF-8", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _rmtree(path: str) -> None:
  """Removes the sandbox's directory even where the code took its permissions away."""
  for root, dirs, _ in os.walk(path):
    for d in dirs:
      try:
        os.chmod(os.path.join(root, d), 0o700, follow_symlinks=False)
      except OSError:
        pass
  shutil.rmtree(path, ignore_errors=True)


def _kill(proc: subprocess.Popen) -> None:
  try:
    proc.kill()
  except ProcessLookupError:
    pass


def run_python(code: str, *, config: SandboxConfig = SandboxConfig()) -> SandboxResult:
  """Runs ``code`` (a Python program's source) in the sandbox and returns what it did.

  Model output is data: whatever ``code`` does (loop, allocate, fork, print forever, crash, open sockets, read
  secrets, kill its parent), this returns a ``SandboxResult`` and the host is unaffected.

  Raises:
    TypeError: ``code`` is not a ``str`` (a caller's error, not model output).
    ValueError: a path of ``config.extra_read_paths`` does not exist.
    SandboxUnavailable: a required layer is missing on this host and ``config.allow_unsafe`` is ``False``; the
      message names each missing layer. The code did not run.
    RuntimeError: the launcher itself failed (a bug or a broken host, never the code's doing).
  """
  if not isinstance(code, str):
    raise TypeError(f"run_python(code=...) needs the program's source as str, got {type(code).__name__}")
  if not isinstance(config, SandboxConfig):
    raise TypeError(f"run_python(config=...) needs a SandboxConfig, got {type(config).__name__}")
  if not sys.platform.startswith("linux"):
    raise SandboxUnavailable({"linux": f"the sandbox is built on Linux kernel interfaces, this is {sys.platform}"})
  python = config.python or sys.executable
  for path in config.extra_read_paths:
    if not os.path.exists(path):
      raise ValueError(f"SandboxConfig.extra_read_paths holds {path!r}, which does not exist on this host")
  tmp = tempfile.mkdtemp(prefix="rljax-sandbox-")
  start = time.monotonic()
  try:
    with open(os.path.join(tmp, "main.py"), "w", encoding="utf-8", errors="surrogatepass") as f:
      f.write(code)
    status_r, status_w = os.pipe()
    spec = {
        "status_fd": status_w, "parent_pid": os.getpid(), "host_uid": os.geteuid(), "tmp": tmp,
        "python": python, "site_packages": config.site_packages, "allow_fork": config.allow_fork,
        "allow_unsafe": config.allow_unsafe, "required": list(REQUIRED_LAYERS), "env": _env(tmp),
        "read_paths": list(_python_prefixes(python) + _SYSTEM_READ + config.extra_read_paths),
        "limits": {"cpu_time_s": config.cpu_time_s, "memory_bytes": config.memory_bytes,
                   "open_files": config.open_files, "file_size_bytes": config.file_size_bytes,
                   "max_tasks": config.max_tasks, "disk_bytes": config.disk_bytes, "disk_files": config.disk_files},
    }
    try:
      proc = subprocess.Popen([sys.executable, "-I", "-S", _LAUNCHER, json.dumps(spec)], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(status_w,),
                              env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, cwd=tmp, start_new_session=True)
    except BaseException:
      os.close(status_r)
      raise
    finally:
      os.close(status_w)
    return _collect(proc, status_r, config, start)
  finally:
    _rmtree(tmp)


def _collect(proc: subprocess.Popen, status_r: int, config: SandboxConfig, start: float) -> SandboxResult:
  """Reads the three pipes until they close, enforcing the wall-clock and output limits."""
  cap = config.output_bytes
  bufs = {"stdout": bytearray(), "stderr": bytearray(), "status": bytearray()}
  truncated = {"stdout": False, "stderr": False}
  limits_hit, timed_out = [], False
  sel = selectors.DefaultSelector()
  sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
  sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
  status_file = os.fdopen(status_r, "rb", buffering=0)
  sel.register(status_file, selectors.EVENT_READ, "status")
  deadline, killed_at = start + config.wall_time_s, None
  try:
    while sel.get_map():
      now = time.monotonic()
      if killed_at is None and now >= deadline:
        timed_out = True
        limits_hit.append("wall_time")
        _kill(proc)
        killed_at = now
      if killed_at is not None and now >= killed_at + _GRACE_S:
        break  # something in the sandbox still holds a pipe open after the kill: stop listening
      limit = (killed_at + _GRACE_S if killed_at is not None else deadline) - now
      for key, _ in sel.select(timeout=max(limit, 0.0)):
        name = key.data
        chunk = os.read(key.fileobj.fileno(), 1 << 16)
        if not chunk:
          sel.unregister(key.fileobj)
          continue
        buf = bufs[name]
        if name == "status":
          buf += chunk
          continue
        room = cap - len(buf)
        buf += chunk[:max(room, 0)]
        if len(chunk) > room and not truncated[name]:
          truncated[name] = True
          if "output" not in limits_hit:
            limits_hit.append("output")
          if killed_at is None:
            _kill(proc)
            killed_at = time.monotonic()
  finally:
    sel.close()
    status_file.close()
    proc.stdout.close()
    proc.stderr.close()
    if killed_at is None and proc.poll() is None:
      _kill(proc)
    proc.wait()
  report = {}
  for line in bufs["status"].decode("utf-8", "replace").splitlines():
    try:
      report.update(json.loads(line))
    except ValueError:
      raise RuntimeError(f"the sandbox launcher wrote an unreadable status line: {line!r}") from None
  if "refused" in report:
    raise SandboxUnavailable(report["refused"])
  if "error" in report:
    raise RuntimeError(f"the sandbox launcher failed: {report['error']}")
  if "layers" not in report and not (timed_out or truncated["stdout"] or truncated["stderr"]):
    raise RuntimeError(f"the sandbox launcher ended without a report (exit status {proc.returncode}); stderr: "
                       f"{bytes(bufs['stderr'][:2000]).decode('utf-8', 'replace')!r}")
  sig = report.get("signal")
  exit_code = report.get("exit")
  if sig == _signal.SIGXCPU or (sig == _signal.SIGKILL and report.get("cpu_s", 0.0) >= config.cpu_time_s):
    limits_hit.append("cpu_time")  # RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL at the hard one (+1 s)
  if sig == _signal.SIGXFSZ:
    limits_hit.append("file_size")
  if killed_at is not None and exit_code is None and sig is None:
    sig = _signal.SIGKILL  # the sandbox was killed before its init could report
  return SandboxResult(
      stdout=bytes(bufs["stdout"]).decode("utf-8", "replace"), stderr=bytes(bufs["stderr"]).decode("utf-8", "replace"),
      exit_code=exit_code, signal=sig, timed_out=timed_out, stdout_truncated=truncated["stdout"],
      stderr_truncated=truncated["stderr"], limits_hit=tuple(limits_hit), layers=report.get("layers", {}),
      duration_s=time.monotonic() - start)


def probe(python: str | None = None, allow_fork: bool = False) -> dict:
  """Which layers this host gives the sandbox: ``{layer: ""}`` when on, ``{layer: reason}`` when not.

  Runs ``pass`` once with ``allow_unsafe=True``, memoised per (interpreter, ``allow_fork``): the host does not
  change under a running process. ``rljax.sandbox.check()`` turns a missing required layer into
  ``SandboxUnavailable``.
  """
  return dict(_probe(python, allow_fork))


@functools.lru_cache(maxsize=8)
def _probe(python, allow_fork: bool) -> dict:
  config = SandboxConfig(python=python, allow_fork=allow_fork, allow_unsafe=True, wall_time_s=30.0,
                         site_packages=False)
  return run_python("pass", config=config).layers
