"""A seccomp-BPF filter (x86_64): no new processes, no sockets but Unix ones, no kernel-facing escape hatches.

Standard library only (the launcher imports it without the ``rljax`` package). Installed with
``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER)`` after ``PR_SET_NO_NEW_PRIVS``; kept across ``fork`` and
``execve``; cannot be removed. Calls it refuses fail with an errno (the code sees an ``OSError``), except a
foreign syscall ABI (i386 / x32 entry points), which kills the process:

* ``fork``, ``vfork``, ``clone`` without ``CLONE_THREAD`` -> ``EPERM`` unless ``allow_fork`` (threads stay
  allowed); ``clone3`` -> ``ENOSYS`` always (its flags sit behind a pointer that BPF cannot read; glibc then
  falls back to ``clone``);
* ``socket``/``socketpair`` with a family other than ``AF_UNIX`` -> ``EAFNOSUPPORT`` (a second network layer);
* ``unshare``, ``setns``, ``mount`` and the new mount API, ``umount2``, ``pivot_root``, ``chroot``, ``ptrace``,
  ``process_vm_readv/writev``, ``pidfd_getfd``, ``kcmp``, ``bpf``, ``perf_event_open``, ``userfaultfd``,
  ``io_uring`` (its operations would bypass this filter), key-ring calls, module and kexec loading,
  ``open_by_handle_at`` -> ``EPERM``.
"""
from __future__ import annotations

import ctypes
import os
import platform
import struct

_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000
_RET_ALLOW, _RET_KILL_PROCESS, _RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_CLONE_THREAD = 0x00010000
_AF_UNIX = 1
_EPERM, _ENOSYS, _EAFNOSUPPORT = 1, 38, 97

_X86_64 = {"fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "socket": 41, "socketpair": 53}
_X86_64_DENIED = {
    "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "bpf": 321, "perf_event_open": 298,
    "userfaultfd": 323, "keyctl": 250, "add_key": 248, "request_key": 249, "kexec_load": 246,
    "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
    "open_by_handle_at": 304, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "mount_setattr": 442, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "pidfd_getfd": 438, "kcmp": 312,
}

_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_LIBC = ctypes.CDLL(None, use_errno=True)


def supported() -> str:
  """``""`` when this host's architecture is covered, else the reason it is not."""
  machine = platform.machine()
  return "" if machine == "x86_64" else f"the seccomp filter covers x86_64 only, this host is {machine}"


def _program(allow_fork: bool) -> list:
  """The BPF program as ``(code, jt, jf, k)`` tuples; jumps are relative, resolved from labels below."""
  deny = lambda errno: ("ret", _RET_ERRNO | errno)  # noqa: E731
  prog = [
      ("ld", 4), ("jne", _AUDIT_ARCH_X86_64, "kill"),
      ("ld", 0), ("jge", _X32_BIT, "kill"),
      ("jeq", _X86_64["clone3"], "enosys"),
      ("jeq", _X86_64["socket"], "socket"), ("jeq", _X86_64["socketpair"], "socket"),
  ]
  if not allow_fork:
    prog += [("jeq", _X86_64["fork"], "eperm"), ("jeq", _X86_64["vfork"], "eperm"),
             ("jeq", _X86_64["clone"], "clone")]
  prog += [("jeq", nr, "eperm") for nr in _X86_64_DENIED.values()]
  prog += [("ret", _RET_ALLOW),
           ("label", "clone"), ("ld", 16), ("jset", _CLONE_THREAD, "allow"), deny(_EPERM),
           ("label", "socket"), ("ld", 16), ("jeq", _AF_UNIX, "allow"), deny(_EAFNOSUPPORT),
           ("label", "enosys"), deny(_ENOSYS),
           ("label", "eperm"), deny(_EPERM),
           ("label", "kill"), ("ret", _RET_KILL_PROCESS),
           ("label", "allow"), ("ret", _RET_ALLOW)]
  labels, pc = {}, 0
  for ins in prog:
    if ins[0] == "label":
      labels[ins[1]] = pc
    else:
      pc += 1
  out = []
  for ins in prog:
    if ins[0] == "label":
      continue
    here = len(out)
    op = ins[0]
    if op == "ld":
      out.append((_LD_W_ABS, 0, 0, ins[1]))
    elif op == "ret":
      out.append((_RET_K, 0, 0, ins[1]))
    else:
      off = labels[ins[2]] - here - 1  # a jump target, relative to the next instruction
      if not 0 <= off < 256:
        raise AssertionError(f"seccomp jump out of range: {ins}")
      code = {"jeq": _JEQ_K, "jne": _JEQ_K, "jge": _JGE_K, "jset": _JSET_K}[op]
      out.append((code, 0, off, ins[1]) if op == "jne" else (code, off, 0, ins[1]))
  return out


def install(*, allow_fork: bool) -> None:
  """Installs the filter on the calling thread (``no_new_privs`` must already be set). Raises ``OSError``."""
  reason = supported()
  if reason:
    raise OSError(reason)
  prog = _program(allow_fork)
  buf = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *ins) for ins in prog))

  class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

  fprog = _Fprog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
  if _LIBC.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
    err = ctypes.get_errno()
    raise OSError(err, f"prctl(PR_SET_SECCOMP): {os.strerror(err)}")
