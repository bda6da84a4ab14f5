"""Landlock (Linux >= 5.13): the filesystem the sandbox may see, and (ABI >= 4) no TCP, (ABI >= 6) no signals out.

Standard library only (the launcher imports it without the ``rljax`` package). Syscalls 444-446
(``landlock_create_ruleset``, ``landlock_add_rule``, ``landlock_restrict_self``; the same numbers on x86_64 and
aarch64). A ruleset *handles* every access right the running kernel knows; whatever no rule grants is denied
to the calling process and all its descendants, for good (a domain can only be narrowed). Rules:

* read + execute beneath the interpreter's directories and the system libraries (``read_paths``);
* everything but device nodes beneath the sandbox's temporary directory (``write_paths``);
* read/write of ``/dev/null``, read of ``/dev/zero`` and ``/dev/urandom``.

Everything else: ``/etc/shadow``, ``/proc`` (so no scan of host processes, no ``/proc/<pid>/environ``), the
home directory, ``/dev/shm``, other temporary directories, is denied, including to a root uid. With ABI >= 4 no
TCP ``bind``/``connect`` rule is added, so both are denied; with ABI >= 6 the domain is *scoped*: no signal to a
process outside it, no connection to an abstract Unix socket created outside it.
"""
from __future__ import annotations

import ctypes
import os

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

# LANDLOCK_ACCESS_FS_* bits, in ABI order.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
_FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # rights a rule on a non-directory may hold
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

READ = EXECUTE | READ_FILE | READ_DIR
WRITE = (READ | WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO | MAKE_SYM
         | REFER | TRUNCATE)

_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.syscall.restype = ctypes.c_long


class _RulesetAttr(ctypes.Structure):
  _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
              ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
  _pack_ = 1
  _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _check(ret: int, what: str) -> int:
  if ret < 0:
    err = ctypes.get_errno()
    raise OSError(err, f"{what}: {os.strerror(err)}")
  return ret


def abi_version() -> int:
  """The kernel's Landlock ABI (0: not built in or not enabled at boot, e.g. ``lsm=`` without ``landlock``)."""
  ret = _LIBC.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
  return max(int(ret), 0)


def restrict_self(*, read_paths, write_paths) -> dict:
  """Confines the calling thread (and what it ``execve``s / forks) to the rules above.

  ``no_new_privs`` must be set first (``prctl(PR_SET_NO_NEW_PRIVS)``). Paths that do not exist are skipped.
  Returns which parts took effect: ``{"abi": n, "net": bool, "scope": bool}``. Raises ``OSError`` when Landlock
  is unavailable or refuses.
  """
  abi = abi_version()
  if abi < 1:
    raise OSError("Landlock is not available in this kernel (landlock_create_ruleset ABI query failed)")
  attr = _RulesetAttr(_FS_BY_ABI.get(abi, _FS_BY_ABI[5]), NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0,
                      SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0)
  size = 8 if abi < 4 else (16 if abi < 6 else 24)
  handled = attr.handled_access_fs
  fd = _check(_LIBC.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)),
              "landlock_create_ruleset")
  try:
    rules = [(p, READ) for p in read_paths] + [(p, WRITE) for p in write_paths]
    rules += [("/dev/null", READ_FILE | WRITE_FILE), ("/dev/zero", READ_FILE), ("/dev/urandom", READ_FILE)]
    for path, access in rules:
      try:
        pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
      except FileNotFoundError:
        continue
      try:
        if not os.path.isdir(path):
          access &= _FILE_ONLY
        rule = _PathBeneathAttr(access & handled, pfd)
        _check(_LIBC.syscall(_SYS_ADD_RULE, ctypes.c_int(fd), ctypes.c_int(_RULE_PATH_BENEATH),
                             ctypes.byref(rule), ctypes.c_uint32(0)), f"landlock_add_rule({path})")
      finally:
        os.close(pfd)
    _check(_LIBC.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0)), "landlock_restrict_self")
  finally:
    os.close(fd)
  return {"abi": abi, "net": abi >= 4, "scope": abi >= 6}
