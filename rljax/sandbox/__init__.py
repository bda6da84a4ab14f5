"""A sandbox for model-written code: ``run_python(code, config=SandboxConfig()) -> SandboxResult``.

Used by the Python tool of multi-turn environments and by code verifiers (``rljax.rewards.code_tests``).
Layers, all applied by the kernel to the launcher before the code's interpreter is ``execve``d (nothing
model-written runs before they are on):

* a separate process tree, killed as a whole at the wall-clock limit or when an output stream passes its cap;
* rlimits: CPU time, address space, open files, file size, tasks (``_limits``);
* user, PID, network, IPC and mount namespaces, a private size-limited ``tmpfs`` as the only writable
  directory, nested namespaces forbidden (``_namespaces``);
* Landlock: read-only interpreter and system libraries, a writable temporary directory, nothing else; no TCP;
  no signals out (``_landlock``);
* seccomp: no new processes (unless ``allow_fork``), no non-Unix sockets, no mount/ptrace/bpf/... (``_seccomp``).

A required layer the host lacks makes ``run_python`` raise ``SandboxUnavailable`` naming it, unless
``SandboxConfig(allow_unsafe=True)``. Guarantees, limits and host needs: docs/agents.md, "The sandbox".
Linux only; standard library only.
"""
from rljax.sandbox._config import (OPTIONAL_LAYERS, REQUIRED_LAYERS, SandboxConfig, SandboxResult,
                                   SandboxUnavailable)
from rljax.sandbox._runner import probe, run_python


def check(config: SandboxConfig = SandboxConfig()) -> dict:
  """Raises ``SandboxUnavailable`` (naming each missing layer) if ``config`` would be refused on this host;
  else returns ``probe()``'s layer map. Call it at start-up so a misconfigured host fails before training."""
  layers = probe(config.python, config.allow_fork)
  missing = {k: layers.get(k, "not reported") for k in REQUIRED_LAYERS if layers.get(k, "not reported")}
  if missing and not config.allow_unsafe:
    raise SandboxUnavailable(missing)
  return dict(layers)


__all__ = ["run_python", "SandboxConfig", "SandboxResult", "SandboxUnavailable", "probe", "check",
           "REQUIRED_LAYERS", "OPTIONAL_LAYERS"]
