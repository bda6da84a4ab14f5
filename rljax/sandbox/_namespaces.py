"""Linux namespaces through ``unshare(2)`` (ctypes: Python 3.11 has no ``os.unshare``).

Runs inside the launcher (``_launch.py``), before any model-written code. Standard library only: the launcher
imports this file as a top-level module, without the ``rljax`` package.

* user namespace: the sandbox's uid ``SANDBOX_UID`` maps to the caller's uid (the only mapping an unprivileged
  process may write); the code gets no capability outside it, and loses all capabilities at ``execve`` (its uid is
  not 0 in the namespace).
* PID namespace: the next child is PID 1 of a fresh namespace; the code sees no host process, and when that PID 1
  exits the kernel kills every process left in the namespace (fork-bomb clean-up).
* network namespace: only a loopback interface, down: no route to the host's network or its loopback.
* IPC namespace: System V shared memory / semaphores / message queues of the host are invisible.
* mount namespace with a private ``tmpfs`` over the sandbox's directory: a size (and inode) quota on what the
  code writes, kept off the host's disk, gone when the namespace's last process exits.
* ``user.max_*_namespaces = 0`` inside the new user namespace: the code cannot create nested namespaces.
"""
from __future__ import annotations

import ctypes
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

SANDBOX_UID = 1000
SANDBOX_GID = 1000

_LIBC = ctypes.CDLL(None, use_errno=True)

_NESTED_LIMITS = ("max_user_namespaces", "max_net_namespaces", "max_pid_namespaces", "max_ipc_namespaces",
                  "max_mnt_namespaces", "max_uts_namespaces", "max_cgroup_namespaces", "max_time_namespaces")


def unshare(flags: int) -> None:
  """``unshare(2)``; raises ``OSError`` with the kernel's errno."""
  if _LIBC.unshare(ctypes.c_int(flags)) != 0:
    err = ctypes.get_errno()
    raise OSError(err, f"unshare({flags:#x}): {os.strerror(err)}")


def enter_user_namespace() -> None:
  """A new user namespace where the caller is ``SANDBOX_UID``/``SANDBOX_GID`` (mapped to its host ids).

  Raises ``OSError`` when the host forbids unprivileged user namespaces (``kernel.unprivileged_userns_clone=0``,
  ``user.max_user_namespaces=0``, an AppArmor restriction, a seccomp'd container...).
  """
  uid, gid = os.geteuid(), os.getegid()
  unshare(CLONE_NEWUSER)
  with open("/proc/self/setgroups", "w") as f:
    f.write("deny")
  with open("/proc/self/uid_map", "w") as f:
    f.write(f"{SANDBOX_UID} {uid} 1\n")
  with open("/proc/self/gid_map", "w") as f:
    f.write(f"{SANDBOX_GID} {gid} 1\n")


_MS_NOSUID, _MS_NODEV, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x4000, 0x40000


def _mount(source, target, fstype, flags: int, data) -> None:
  enc = lambda v: None if v is None else v.encode()  # noqa: E731
  if _LIBC.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
    err = ctypes.get_errno()
    raise OSError(err, f"mount({fstype or source} on {target}): {os.strerror(err)}")


def private_tmpfs(path: str, size_bytes: int, inodes: int) -> None:
  """A new mount namespace (mounts private, not propagated to the host) with a ``tmpfs`` of ``size_bytes``
  bytes and ``inodes`` files mounted on ``path``. Needs the user namespace's capabilities (call it before
  ``forbid_nested_namespaces``). What was in ``path`` is hidden beneath it."""
  unshare(CLONE_NEWNS)
  _mount(None, "/", None, _MS_REC | _MS_PRIVATE, None)
  _mount("tmpfs", path, "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={size_bytes},nr_inodes={inodes},mode=0700")


def forbid_nested_namespaces() -> None:
  """Sets this user namespace's ``/proc/sys/user/max_*_namespaces`` to 0 (needs its capabilities: call right
  after ``enter_user_namespace``). Raises ``OSError`` if the kernel refuses."""
  for name in _NESTED_LIMITS:
    path = f"/proc/sys/user/{name}"
    if os.path.exists(path):
      with open(path, "w") as f:
        f.write("0")
      with open(path) as f:
        if f.read().strip() != "0":
          raise OSError(f"{path} did not take the value 0")
