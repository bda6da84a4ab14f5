"""The sandbox launcher: applies every layer to itself, then ``execve``s the interpreter on the model's code.

Run by ``_runner.run_python`` as ``python -I -S _launch.py SPEC_JSON`` (a script, so the parent's ``rljax``
package, JAX and site-packages are never imported here). Three processes:

* **L** (this script, host PID namespace): enters a new user namespace (``_namespaces``), unshares the PID,
  network and IPC namespaces, mounts a private ``tmpfs`` over the temporary directory (copying ``main.py`` in),
  forbids nested namespaces, forks I, waits. ``PR_SET_PDEATHSIG``: dies with the
  trainer.
* **I** (PID 1 of the new PID namespace): forks C, reaps, reports C's end on the status pipe, exits; its exit
  makes the kernel kill whatever C left behind. ``PR_SET_PDEATHSIG``: killing L (the runner's timeout) kills I,
  hence the whole namespace.
* **C**: new session, ``no_new_privs``, Landlock (``_landlock``), seccomp (``_seccomp``), rlimits (``_limits``),
  closes every other descriptor, then, only if every required layer is on (or ``allow_unsafe``), ``execve``s
  ``python -I -B main.py`` in the temporary directory with a scrubbed environment.

Status protocol (one JSON object per line on fd ``status_fd``): ``{"layers": {...}}`` from C before ``execve``
or ``{"refused": {...}, "layers": {...}}`` instead; then ``{"exit": n}`` or ``{"signal": s}`` from I.
"""
import ctypes
import json
import os
import select
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _landlock  # noqa: E402
import _limits  # noqa: E402
import _namespaces  # noqa: E402
import _seccomp  # noqa: E402

_PR_SET_PDEATHSIG, _PR_SET_NO_NEW_PRIVS = 1, 38
_LIBC = ctypes.CDLL(None, use_errno=True)


def _status(fd: int, obj: dict) -> None:
  os.write(fd, (json.dumps(obj) + "\n").encode())


def _prctl(option: int, arg: int) -> None:
  if _LIBC.prctl(option, ctypes.c_ulong(arg), 0, 0, 0) != 0:
    err = ctypes.get_errno()
    raise OSError(err, f"prctl({option}): {os.strerror(err)}")


def _try(layers: dict, name: str, fn, *args, **kwargs):
  try:
    out = fn(*args, **kwargs)
    layers[name] = ""
    return out
  except OSError as e:
    layers[name] = str(e) or type(e).__name__
    return None


def _code(spec: dict, layers: dict) -> None:
  """C: confine, then exec the interpreter (or refuse). Never returns."""
  fd = spec["status_fd"]
  try:
    os.setsid()
    os.chdir(spec["tmp"])
    _try(layers, "no_new_privs", _prctl, _PR_SET_NO_NEW_PRIVS, 1)
    if layers["no_new_privs"]:
      for name in ("landlock_fs", "landlock_net", "landlock_scope", "seccomp"):
        layers[name] = "needs no_new_privs"
    else:
      got = _try(layers, "landlock_fs", _landlock.restrict_self, read_paths=spec["read_paths"],
                 write_paths=[spec["tmp"]])
      layers["landlock_net"] = ("needs landlock_fs" if got is None else
                                "" if got["net"] else "needs Landlock ABI >= 4 (Linux 6.7)")
      layers["landlock_scope"] = ("needs landlock_fs" if got is None else
                                  "" if got["scope"] else "needs Landlock ABI >= 6 (Linux 6.12)")
      _try(layers, "seccomp", _seccomp.install, allow_fork=spec["allow_fork"])
    lim = spec["limits"]
    # RLIMIT_NPROC counts every task of the sandbox uid in its user namespace: L and I too (2 more).
    _try(layers, "rlimits", _limits.apply, cpu_time_s=lim["cpu_time_s"], memory_bytes=lim["memory_bytes"],
         open_files=lim["open_files"], file_size_bytes=lim["file_size_bytes"], processes=lim["max_tasks"] + 2)
    if not spec["allow_fork"]:
      layers["process_limit"] = layers["seccomp"] and f"the no-fork seccomp filter: {layers['seccomp']}"
    elif spec["host_uid"] == 0:
      layers["process_limit"] = "RLIMIT_NPROC is not enforced for host uid 0 (run as a non-root user, or " \
                                "allow_fork=False)"
    elif layers["user_namespace"]:
      layers["process_limit"] = "RLIMIT_NPROC counts only the sandbox's tasks inside its own user namespace"
    else:
      layers["process_limit"] = layers["rlimits"]
    missing = {k: layers.get(k, "not applied") for k in spec["required"] if layers.get(k, "not applied")}
    if missing and not spec["allow_unsafe"]:
      _status(fd, {"refused": missing, "layers": layers})
      os._exit(0)
    _status(fd, {"layers": layers})
    os.closerange(3, 1 << 16)  # the status pipe included: nothing but stdin/stdout/stderr crosses execve
    argv = [spec["python"], "-I", "-B"] + ([] if spec["site_packages"] else ["-S"]) + ["main.py"]
    os.execve(spec["python"], argv, spec["env"])
  except BaseException as e:  # noqa: BLE001 -- report, never run the code unconfined
    try:
      _status(fd, {"error": f"launcher (code process): {type(e).__name__}: {e}"})
    finally:
      os._exit(126)


def _init(spec: dict, layers: dict, alive_r: int) -> None:
  """I: PID 1 of the sandbox's PID namespace. Never returns."""
  fd = spec["status_fd"]
  try:
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if select.select([alive_r], [], [], 0)[0]:  # L died before PDEATHSIG was armed: EOF on its pipe
      os._exit(1)
    os.close(alive_r)
    pid = os.fork()
    if pid == 0:
      _code(spec, layers)
    while True:
      wpid, status, usage = os.wait4(-1, 0)  # as PID 1 we also reap orphans
      if wpid == pid:
        break
    cpu_s = usage.ru_utime + usage.ru_stime
    if os.WIFSIGNALED(status):
      _status(fd, {"signal": os.WTERMSIG(status), "cpu_s": cpu_s})
    else:
      _status(fd, {"exit": os.waitstatus_to_exitcode(status), "cpu_s": cpu_s})
  except BaseException as e:  # noqa: BLE001
    _status(fd, {"error": f"launcher (init): {type(e).__name__}: {e}"})
  os._exit(0)


def main() -> None:
  spec = json.loads(sys.argv[1])
  _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
  if os.getppid() != spec["parent_pid"]:  # the trainer died before PDEATHSIG was armed
    os._exit(1)
  layers = {}
  _try(layers, "user_namespace", _namespaces.enter_user_namespace)
  if layers["user_namespace"]:
    for name in ("nested_namespaces", "pid_namespace", "network_namespace", "ipc_namespace", "private_tmpfs"):
      layers[name] = "needs the user namespace"
  else:
    _try(layers, "pid_namespace", _namespaces.unshare, _namespaces.CLONE_NEWPID)
    _try(layers, "network_namespace", _namespaces.unshare, _namespaces.CLONE_NEWNET)
    _try(layers, "ipc_namespace", _namespaces.unshare, _namespaces.CLONE_NEWIPC)
    main_py = os.path.join(spec["tmp"], "main.py")
    with open(main_py, "rb") as f:
      code = f.read()
    _try(layers, "private_tmpfs", _namespaces.private_tmpfs, spec["tmp"], spec["limits"]["disk_bytes"],
         spec["limits"]["disk_files"])
    if not layers["private_tmpfs"]:
      with open(main_py, "wb") as f:  # the code, into the new tmpfs
        f.write(code)
    _try(layers, "nested_namespaces", _namespaces.forbid_nested_namespaces)  # last: it stops our own unshares
  alive_r, alive_w = os.pipe()
  pid = os.fork()
  if pid == 0:
    os.close(alive_w)
    _init(spec, layers, alive_r)
  os.close(alive_r)
  os.close(spec["status_fd"])
  os.waitpid(pid, 0)
  os._exit(0)


if __name__ == "__main__":
  main()
