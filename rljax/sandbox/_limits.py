"""Resource limits (``setrlimit(2)``) set on the sandboxed process just before ``execve``.

Standard library only (the launcher imports it without the ``rljax`` package). Soft and hard limits are set
equal, so the code cannot raise them again (raising a hard limit needs ``CAP_SYS_RESOURCE`` in the initial user
namespace); CPU time is the exception: soft ``s`` sends ``SIGXCPU``, hard ``s + 1`` then ``SIGKILL``.
"""
from __future__ import annotations

import resource


def apply(*, cpu_time_s: int, memory_bytes: int, open_files: int, file_size_bytes: int,
          processes: int) -> None:
  """Applies the limits to the calling process (inherited across ``fork`` and ``execve``).

  Args:
    cpu_time_s: ``RLIMIT_CPU`` seconds of CPU time per process.
    memory_bytes: ``RLIMIT_AS`` bytes of address space per process.
    open_files: ``RLIMIT_NOFILE`` (highest file descriptor + 1).
    file_size_bytes: ``RLIMIT_FSIZE``: largest file the process may write.
    processes: ``RLIMIT_NPROC``: tasks (processes and threads) of the sandbox's uid. Counted per user namespace
      on Linux >= 5.14, so it counts only the sandbox's own tasks; not enforced when the host uid is 0.
  """
  resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
  resource.setrlimit(resource.RLIMIT_CPU, (cpu_time_s, cpu_time_s + 1))
  resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
  resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))
  resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_bytes, file_size_bytes))
  resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
