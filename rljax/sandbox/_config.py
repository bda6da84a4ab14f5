"""The sandbox's configuration, its result record and its refusal error."""
from __future__ import annotations

import dataclasses
from typing import Optional

# Layers that must be on before model-written code runs (unless ``SandboxConfig.allow_unsafe``); what each one
# stops is in docs/agents.md, "The sandbox".
REQUIRED_LAYERS = ("user_namespace", "pid_namespace", "network_namespace", "private_tmpfs", "no_new_privs",
                   "landlock_fs", "rlimits", "process_limit")
# Layers applied when the kernel has them, recorded in ``SandboxResult.layers`` but not required.
OPTIONAL_LAYERS = ("ipc_namespace", "nested_namespaces", "seccomp", "landlock_net", "landlock_scope")


class SandboxUnavailable(RuntimeError):
  """A required isolation layer is missing on this host; the message names each one and why."""

  def __init__(self, missing: dict):
    self.missing = dict(missing)
    detail = "; ".join(f"{k}: {v}" for k, v in self.missing.items())
    super().__init__(f"the sandbox refuses to run untrusted code: layer(s) unavailable on this host: {detail}. "
                     "Fix the host (docs/agents.md, 'The sandbox') or pass SandboxConfig(allow_unsafe=True) "
                     "to run with the remaining layers only")


def _err(field: str, value, allowed: str) -> ValueError:
  return ValueError(f"SandboxConfig.{field}={value!r} is invalid: expected {allowed}")


@dataclasses.dataclass(frozen=True)
class SandboxConfig:
  """Limits of one sandboxed run (docs/agents.md, "The sandbox").

  Attributes:
    wall_time_s: wall-clock seconds before the whole sandbox (every process in it) is killed.
    cpu_time_s: ``RLIMIT_CPU`` per process, whole seconds (``SIGXCPU`` at the limit, ``SIGKILL`` one second on).
    memory_bytes: ``RLIMIT_AS`` per process (address space; a Python interpreter needs ~64 MiB, NumPy more).
    open_files: ``RLIMIT_NOFILE``.
    file_size_bytes: ``RLIMIT_FSIZE``: largest file the code may write.
    disk_bytes: size of the private ``tmpfs`` that is the code's only writable directory (it lives in the
      host's memory, outside ``memory_bytes``: keep it small).
    disk_files: files and directories that ``tmpfs`` may hold.
    output_bytes: stdout and stderr are each kept up to this many bytes; a stream that goes past it stops the
      run (``limits_hit`` has ``"output"``, the kept text ends where the cap fell).
    allow_fork: ``False`` (default): a seccomp filter refuses new processes (threads are allowed), which is what
      contains a fork bomb on any host. ``True``: processes are allowed and bounded by ``max_tasks``
      (``RLIMIT_NPROC``), which Linux does not enforce for a host uid of 0: there the sandbox refuses.
    max_tasks: ``RLIMIT_NPROC``: processes plus threads the code may have at once.
    site_packages: the code's interpreter imports the host environment's site-packages (NumPy, ...); ``False``
      runs ``python -S`` (standard library only, faster start).
    extra_read_paths: more files or directories the code may read (beneath), besides the interpreter's
      prefixes, ``/usr``, ``/lib*`` and the temporary directory. Nothing model-written should need this.
    python: the interpreter that runs the code (``None``: the current one).
    allow_unsafe: run even if a required layer is unavailable, with whatever layers the host has. The result's
      ``layers`` names what was missing. Only for trusted code or a throwaway machine.
  """
  wall_time_s: float = 10.0
  cpu_time_s: int = 5
  memory_bytes: int = 1 << 30
  open_files: int = 64
  file_size_bytes: int = 16 << 20
  disk_bytes: int = 64 << 20
  disk_files: int = 4096
  output_bytes: int = 64 << 10
  allow_fork: bool = False
  max_tasks: int = 32
  site_packages: bool = True
  extra_read_paths: tuple = ()
  python: Optional[str] = None
  allow_unsafe: bool = False

  def __post_init__(self):
    if not (isinstance(self.wall_time_s, (int, float)) and 0 < self.wall_time_s <= 3600):
      raise _err("wall_time_s", self.wall_time_s, "seconds in (0, 3600]")
    for name, low in (("cpu_time_s", 1), ("memory_bytes", 32 << 20), ("open_files", 8), ("file_size_bytes", 0),
                      ("disk_bytes", 1 << 20), ("disk_files", 16), ("output_bytes", 1), ("max_tasks", 1)):
      v = getattr(self, name)
      if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise _err(name, v, f"an int >= {low}")
    for name in ("allow_fork", "site_packages", "allow_unsafe"):
      if not isinstance(getattr(self, name), bool):
        raise _err(name, getattr(self, name), "True or False")
    if not isinstance(self.extra_read_paths, tuple) or not all(
        isinstance(p, str) and p.startswith("/") for p in self.extra_read_paths):
      raise _err("extra_read_paths", self.extra_read_paths, "a tuple of absolute paths")
    if self.python is not None and not (isinstance(self.python, str) and self.python.startswith("/")):
      raise _err("python", self.python, "None or an absolute path to an interpreter")


@dataclasses.dataclass(frozen=True)
class SandboxResult:
  """What one sandboxed run did.

  Attributes:
    stdout, stderr: decoded UTF-8 (invalid bytes replaced), each at most ``output_bytes`` bytes before decoding.
    exit_code: the code's exit status, or ``None`` when it was killed by a signal or by the sandbox.
    signal: the signal that ended it (e.g. 24 ``SIGXCPU``, 9 ``SIGKILL``), or ``None``.
    timed_out: the wall-clock limit stopped it.
    stdout_truncated, stderr_truncated: that stream went past ``output_bytes``.
    limits_hit: which limits stopped or hurt it, among ``"wall_time"``, ``"cpu_time"``, ``"output"``,
      ``"file_size"`` (seen from the terminating signal or the sandbox's own action; a ``MemoryError`` from
      ``RLIMIT_AS`` is the code's own exception, visible in ``stderr`` only).
    layers: each isolation layer's state: ``""`` when it was on, else why not.
    duration_s: wall-clock seconds of the whole run, launcher included.
  """
  stdout: str
  stderr: str
  exit_code: Optional[int]
  signal: Optional[int]
  timed_out: bool
  stdout_truncated: bool
  stderr_truncated: bool
  limits_hit: tuple
  layers: dict
  duration_s: float

  @property
  def ok(self) -> bool:
    """It exited by itself with status 0 within every limit."""
    return self.exit_code == 0 and not self.timed_out and not self.limits_hit
